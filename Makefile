# Thin wrapper over Meson/Ninja. `make run` and `make test` do all set-up.
BUILD      ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
FUZZ_BUILD ?= build-fuzz
DATA_DIR   ?= $(HOME)/.local/share/tessera
PORT       ?= 8090
PREFIX     ?= /usr/local
MESON_OPTS ?= --buildtype=debugoptimized

.PHONY: all setup build run install test test-unit test-e2e test-cluster asan fuzz bench images images-test clean

all: build

setup:
	@scripts/bootstrap

$(BUILD)/build.ninja:
	meson setup $(BUILD) $(MESON_OPTS)

$(ASAN_BUILD)/build.ninja:
	meson setup $(ASAN_BUILD) --buildtype=debug -Db_sanitize=address,undefined -Db_lundef=false

$(TSAN_BUILD)/build.ninja:
	meson setup $(TSAN_BUILD) --buildtype=debug -Db_sanitize=thread -Db_lundef=false

# libFuzzer comes with clang: the fuzz targets (tests/common/meson.build,
# fuzz_targets) are built with clang, ASan and UBSan in their own build.
$(FUZZ_BUILD)/build.ninja:
	CC=clang meson setup $(FUZZ_BUILD) --buildtype=debug -Db_sanitize=address,undefined -Db_lundef=false

build: setup $(BUILD)/build.ninja
	ninja -C $(BUILD)

run: build
	$(BUILD)/tessera server --data-dir $(DATA_DIR) --port $(PORT)

# tessera in $(PREFIX)/bin, its companion files in $(PREFIX)/lib/tessera,
# the UI in $(PREFIX)/share/tessera/ui (scripts/install); DESTDIR stages it.
install: build
	scripts/install $(BUILD) $(DESTDIR)$(PREFIX)

# Every test: unit + end-to-end on the normal build, unit tests again under
# ASan+UBSan, under ThreadSanitizer the fGPU tests and suite tsan (the
# threaded components' unit tests, tests/meson.build): the TSan build makes
# only what those two suites run; and every fuzz target for a fixed number
# of executions (suite fuzz of the clang build, which makes only the fuzz
# targets); then that no test left a container, network or image in
# Docker (scripts/check-leftovers).
test: build $(ASAN_BUILD)/build.ninja $(TSAN_BUILD)/build.ninja $(FUZZ_BUILD)/build.ninja
	ninja -C $(ASAN_BUILD)
	ninja -C $(TSAN_BUILD) fgpu-tests tsan-tests
	ninja -C $(FUZZ_BUILD) fuzz-targets
	scripts/check-leftovers snapshot $(BUILD)/docker-before-tests.txt
	rc=0; scripts/run-tests $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD):fgpu $(TSAN_BUILD):tsan $(FUZZ_BUILD):fuzz || rc=1; \
	scripts/check-leftovers compare $(BUILD)/docker-before-tests.txt || rc=1; exit $$rc

test-unit: build
	scripts/run-tests --suite unit $(BUILD)

test-e2e: build
	scripts/run-tests --suite e2e $(BUILD)

# The multi-host test alone (tests/e2e/test_cluster.sh; `make test` runs it
# too): agents in network namespaces of their own, root needed.
test-cluster: build
	scripts/run-tests --suite cluster $(BUILD)

asan: setup $(ASAN_BUILD)/build.ninja
	ninja -C $(ASAN_BUILD)
	scripts/run-tests --suite unit $(ASAN_BUILD)

fuzz: setup $(FUZZ_BUILD)/build.ninja
	ninja -C $(FUZZ_BUILD) fuzz-targets
	scripts/run-tests $(FUZZ_BUILD):fuzz

# The benchmarks' comparison tools (nginx) are installed only here.
bench: build
	scripts/bootstrap --bench
	bench/run-all $(BUILD)

# Every recipe under images/ built into this machine's Docker (root; images
# whose recipe hash is unchanged are skipped; docs/images.md). The ML
# images are GBs: `make test` builds only tessera/python:3.11. Recipes that
# need what this machine lacks (a pip index, a site file) are skipped with
# a line saying what (--skip-unready; `tessera image build --check`).
RECIPES ?= $(sort $(wildcard images/*/*.recipe))
images: build
	$(BUILD)/tessera image build --skip-unready $(RECIPES)

# Sessions of the ML images: a tensor computation, torch's version and the
# python3-torch package's (tests/images/test_ml_images.sh); VS Code of the
# code-server image through the proxy (tests/images/test_code_server.sh). Then Debian's
# CUDA runtime 12.4 (non-free, fetched here, never by `make test`) on the
# mock driver under the fGPU library (tests/fgpu/cudart12.sh).
images-test: images
	TESSERA_BIN=$(BUILD)/tessera TESSERA_ML_IMAGES_REQUIRED=1 tests/images/test_ml_images.sh
	TESSERA_BIN=$(BUILD)/tessera TESSERA_CODE_SERVER_REQUIRED=1 tests/images/test_code_server.sh
	TESSERA_CUDART12_FETCH=1 TESSERA_CUDART12_REQUIRED=1 meson test -C $(BUILD) --print-errorlogs cudart12_mock

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) $(FUZZ_BUILD)
