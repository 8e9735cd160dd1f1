#!/usr/bin/env bash
# The ML images of images/python-ml (built by `make images`): a session of
# each runs a small tensor computation and prints torch.__version__ and
# the installed python3-torch package's version, which is what the
# launcher shows (Debian's 1.13.1 build calls itself 1.13.0a0).
# `make images-test` runs it and requires the images
# (TESSERA_ML_IMAGES_REQUIRED=1); as a Meson test it is skipped when they
# are not built, so that `make test` never builds GBs of images.
. "$(dirname "$0")/../e2e/lib.sh"

# image, python3-torch version, scikit-learn version, Python version
CASES=(
	"tessera/python-ml:3.11-torch1.13 1.13.1 1.2. 3.11."
	"tessera/python-ml:3.13-torch2.6 2.6.0 1.4. 3.13."
)

missing=()
for c in "${CASES[@]}"; do
	read -r image _ <<<"$c"
	docker image inspect "$image" >/dev/null 2>&1 || missing+=("$image")
done
if ((${#missing[@]})); then
	if [[ -n "${TESSERA_ML_IMAGES_REQUIRED:-}" ]]; then
		echo "FAIL not built: ${missing[*]} (run 'make images' as root)"
		exit 1
	fi
	echo "skip: not built: ${missing[*]} ('make images' builds them)"
	exit 77
fi

e2e_setup
start_server || { e2e_done; exit 1; }

PROBE='
import subprocess, torch, sklearn
a = torch.arange(6, dtype=torch.float32).reshape(2, 3)
b = torch.ones(3, 2)
c = (a @ b).sum().item()
pkg = subprocess.run(["dpkg-query", "--show", "--showformat=${Version}", "python3-torch"],
                     capture_output=True, text=True).stdout
print("torch.__version__", torch.__version__)
print("python3-torch", pkg)
print("sklearn", sklearn.__version__)
print("matmul-sum", c)
'
n=0
for c in "${CASES[@]}"; do
	read -r image torch_pkg sklearn_ver py_ver <<<"$c"
	n=$((n + 1))
	name=ml$n
	"$TESSERA" session create "$image" --name "$name" --cpu 1 --mem 2g --wait >/dev/null 2>&1
	check "a session of $image starts" wait_status "$name" RUNNING
	out=$("$TESSERA" session exec "$name" --timeout 300 -- python3 -c "$PROBE" 2>&1)
	echo "$out" | sed "s|^|# $image: |"
	check "$image: a tensor computation gives 30" has_line "$out" "matmul-sum 30.0"
	check "$image: python3-torch is $torch_pkg" has_prefix_line "$out" "python3-torch $torch_pkg"
	check "$image: torch.__version__ is printed" has_prefix_line "$out" "torch.__version__ ${torch_pkg%.*}"
	check "$image: scikit-learn $sklearn_ver" has_prefix_line "$out" "sklearn $sklearn_ver"
	ver=$("$TESSERA" session exec "$name" -- python3 --version 2>&1)
	check "$image: Python $py_ver ($ver)" contains "$ver" "Python $py_ver"
	ver=$("$TESSERA" session exec "$name" -- jupyter notebook --version 2>&1)
	check "$image: Jupyter Notebook 6.4 ($ver)" contains "$ver" "6.4."
	fw=$(docker image inspect --format '{{index .Config.Labels "tessera.frameworks"}}' "$image")
	check "$image: the launcher's label says torch=$torch_pkg ($fw)" contains "$fw" ",torch=$torch_pkg,"
	ports=$(docker image inspect --format '{{index .Config.Labels "ai.backend.service-ports"}}' "$image")
	check "$image: Jupyter and MLflow UI are declared ($ports)" [ "$ports" == "jupyter:http:8081,mlflow-ui:preopen:5000" ]
	"$TESSERA" session rm "$name" >/dev/null
done
e2e_done
