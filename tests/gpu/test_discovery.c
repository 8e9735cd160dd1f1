/* gpu/gpu.c: mock inventories from a spec, NVML discovery through the
 * project's mock libnvidia-ml.so.1 / libcuda.so.1 (and without a driver),
 * the mock driver's visible-device filter, and the ld cache parser.
 *
 * Environment (set by tests/gpu/meson.build):
 *   TESSERA_TEST_MOCK_LIB_DIR  the build dir holding the mock driver
 *   TESSERA_MOCK_GPUS          "2x16GiB:80", read by the mock driver */
#include "gpu/gpu.h"
#include "gpu/mock/mockspec.h"
#include "testlib.h"

#include <ctype.h>
#include <stdlib.h>
#include <unistd.h>

#define GiB (1LL << 30)

/* "GPU-" + 8-4-4-4-12 lowercase hex digits. */
static bool uuid_shaped(const char *u)
{
	if (strncmp(u, "GPU-", 4) != 0 || strlen(u) != 40)
		return false;
	for (int i = 0; i < 36; i++) {
		char c = u[4 + i];
		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (c != '-')
				return false;
		} else if (!isxdigit((unsigned char)c) || isupper((unsigned char)c)) {
			return false;
		}
	}
	return true;
}

/* ---------- gpu_inventory_mock ---------- */

TEST(mock_inventory_from_spec)
{
	struct gpu_inventory inv;
	struct terr err = {0};
	CHECK_INT(gpu_inventory_mock("2x80GiB:132,1x8GiB", &inv, &err), 0);
	CHECK_INT(inv.n, 3);
	CHECK(inv.mock);
	CHECK_STR(inv.mock_spec, "2x80GiB:132,1x8GiB");
	CHECK_STR(inv.driver_version, MOCK_DRIVER_VERSION);
	CHECK_INT(inv.dev[0].memory, 80 * GiB);
	CHECK_INT(inv.dev[1].memory, 80 * GiB);
	CHECK_INT(inv.dev[2].memory, 8 * GiB);
	CHECK_INT(inv.dev[0].sms, 132);
	CHECK_INT(inv.dev[1].sms, 132);
	CHECK_INT(inv.dev[2].sms, MOCK_DEFAULT_SMS);
	CHECK_INT(MOCK_DEFAULT_SMS, 108);
	for (int i = 0; i < 3; i++) {
		CHECK_INT(inv.dev[i].index, i);
		CHECK_INT(inv.dev[i].minor, -1);
		CHECK(uuid_shaped(inv.dev[i].uuid));
		CHECK_CONTAINS(inv.dev[i].name, MOCK_DEVICE_NAME);
	}
	CHECK_STR(inv.dev[0].name, MOCK_DEVICE_NAME " 80 GiB");
	CHECK_STR(inv.dev[2].name, MOCK_DEVICE_NAME " 8 GiB");
	/* distinct devices, distinct UUIDs */
	CHECK(strcmp(inv.dev[0].uuid, inv.dev[1].uuid) != 0);
	CHECK(strcmp(inv.dev[0].uuid, inv.dev[2].uuid) != 0);
	CHECK(strcmp(inv.dev[1].uuid, inv.dev[2].uuid) != 0);

	/* stable across calls */
	struct gpu_inventory again;
	CHECK_INT(gpu_inventory_mock("2x80GiB:132,1x8GiB", &again, &err), 0);
	for (int i = 0; i < 3; i++)
		CHECK_STR(again.dev[i].uuid, inv.dev[i].uuid);

	/* another spec, other UUIDs */
	struct gpu_inventory other;
	CHECK_INT(gpu_inventory_mock("2x80GiB:132,1x16GiB", &other, &err), 0);
	CHECK_INT(other.n, 3);
	for (int i = 0; i < 3; i++)
		for (int k = 0; k < 3; k++)
			CHECK(strcmp(other.dev[i].uuid, inv.dev[k].uuid) != 0);
	CHECK_INT(gpu_inventory_mock("1x8GiB", &other, &err), 0);
	CHECK_INT(other.n, 1);
	CHECK(strcmp(other.dev[0].uuid, inv.dev[2].uuid) != 0);

	/* the maximum: 16 devices */
	CHECK_INT(gpu_inventory_mock("16x1GiB", &other, &err), 0);
	CHECK_INT(other.n, GPU_MAX_DEVICES);
	CHECK_INT(gpu_inventory_mock("8x1GiB:10,8x2GiB", &other, &err), 0);
	CHECK_INT(other.n, 16);
	CHECK_INT(other.dev[15].memory, 2 * GiB);
	CHECK_INT(other.dev[7].sms, 10);
}

TEST(mock_inventory_bad_specs)
{
	static const char *const bad[] = {
		"", "x", "0x8GiB", "2x8XB", "17x1GiB", "16x1GiB,1x1GiB", "9x1GiB,8x1GiB",
		"2x80GiB:", "2x80GiB:0", "2x80GiB:abc", "2x", "x8GiB", "2x0", "-1x8GiB",
		"2x8GiB,", ",2x8GiB", "2x8GiB,,1x8GiB", "two x 8GiB",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct gpu_inventory inv;
		struct terr err = {0};
		int rc = gpu_inventory_mock(bad[i], &inv, &err);
		if (rc >= 0)
			FAILF("spec \"%s\" accepted (%d devices)", bad[i], inv.n);
		CHECK(rc < 0);
		CHECK_INT(err.code, EINVAL);
		CHECK(err.msg[0] != '\0');
		/* the message quotes the spec it refuses */
		char quoted[64];
		snprintf(quoted, sizeof(quoted), "'%s'", bad[i]);
		CHECK_CONTAINS(err.msg, quoted);
		CHECK_INT(inv.n, 0);
	}
	struct gpu_inventory inv;
	struct terr err = {0};
	CHECK(gpu_inventory_mock("", &inv, &err) < 0);
	CHECK_CONTAINS(err.msg, "no devices");
	CHECK(gpu_inventory_mock("17x1GiB", &inv, &err) < 0);
	CHECK_CONTAINS(err.msg, "count");
	CHECK(gpu_inventory_mock("16x1GiB,1x1GiB", &inv, &err) < 0);
	CHECK_CONTAINS(err.msg, "more than 16 devices");
	CHECK(gpu_inventory_mock("2x8XB", &inv, &err) < 0);
	CHECK_CONTAINS(err.msg, "COUNTxMEM");
}

/* ---------- gpu_inventory_nvml ---------- */

/* Runs first: the mock driver must not be loaded yet, or dlopen by soname
 * would find it already in the process. */
TEST(nvml_without_driver)
{
	/* the loader read LD_LIBRARY_PATH at start; it must not point at the mock */
	CHECK(getenv("LD_LIBRARY_PATH") == NULL || !*getenv("LD_LIBRARY_PATH"));
	char dir[] = "/tmp/tessera-nodrv-XXXXXX";
	CHECK(mkdtemp(dir) != NULL);
	struct gpu_inventory inv;
	memset(&inv, 0xab, sizeof(inv));
	struct terr err = {0};
	CHECK_INT(gpu_inventory_nvml(dir, &inv, &err), 0);
	CHECK_INT(inv.n, 0);
	CHECK(!inv.mock);
	CHECK_INT(err.code, 0);
	/* no lib_dir at all: the default search path, no driver either */
	CHECK_INT(gpu_inventory_nvml(NULL, &inv, &err), 0);
	CHECK_INT(inv.n, 0);
	CHECK_INT(err.code, 0);
	/* a lib_dir that does not exist */
	CHECK_INT(gpu_inventory_nvml("/nonexistent/tessera", &inv, &err), 0);
	CHECK_INT(inv.n, 0);
	rmdir(dir);
}

TEST(nvml_through_mock_driver)
{
	const char *lib_dir = getenv("TESSERA_TEST_MOCK_LIB_DIR");
	CHECK(lib_dir != NULL);
	if (!lib_dir)
		return;
	CHECK_STR(getenv("TESSERA_MOCK_GPUS"), "2x16GiB:80");
	struct gpu_inventory inv, want;
	struct terr err = {0};
	CHECK_INT(gpu_inventory_nvml(lib_dir, &inv, &err), 0);
	if (err.code)
		FAILF("error: %s", err.msg);
	CHECK_INT(gpu_inventory_mock("2x16GiB:80", &want, &err), 0);
	CHECK_INT(inv.n, 2);
	CHECK(!inv.mock);
	CHECK(inv.driver_version[0] != '\0');
	CHECK_STR(inv.driver_version, MOCK_DRIVER_VERSION);
	for (int i = 0; i < 2 && i < inv.n; i++) {
		CHECK_INT(inv.dev[i].index, i);
		CHECK_STR(inv.dev[i].uuid, want.dev[i].uuid);
		CHECK_INT(inv.dev[i].memory, 16 * GiB);
		CHECK_INT(inv.dev[i].sms, 80);   /* from the mock libcuda.so.1 */
		CHECK_CONTAINS(inv.dev[i].name, MOCK_DEVICE_NAME);
		CHECK(inv.dev[i].minor >= 0);
	}
	/* twice in a row gives the same answer */
	struct gpu_inventory again;
	CHECK_INT(gpu_inventory_nvml(lib_dir, &again, &err), 0);
	CHECK_INT(again.n, 2);
	if (again.n == 2 && inv.n == 2) {
		CHECK_STR(again.dev[1].uuid, inv.dev[1].uuid);
		CHECK_INT(again.dev[1].sms, 80);
	}
}

/* ---------- mock_spec_filter_visible ---------- */

/* ---------- gpu_probe_context_overhead ---------- */

TEST(context_overhead_is_measured_in_a_probe_process)
{
	const char *lib_dir = getenv("TESSERA_TEST_MOCK_LIB_DIR");
	const char *probe = getenv("TESSERA_TEST_GPU_PROBE");
	CHECK(lib_dir != NULL && probe != NULL);
	if (!lib_dir || !probe)
		return;
	char dir[] = "/tmp/tessera-probe-XXXXXX";
	CHECK(mkdtemp(dir) != NULL);
	struct gpu_inventory inv;
	struct terr err = {0};
	CHECK_INT(gpu_inventory_mock("2x8GiB,1x4GiB", &inv, &err), 0);
	/* The mock takes this much per context, as a real driver takes
	 * hundreds of MiB; the probe reads it back through NVML. */
	setenv("TESSERA_MOCK_CTX_OVERHEAD", "314572800", 1);
	CHECK_INT(gpu_probe_context_overhead(&inv, probe, lib_dir, dir, 20000, &err), 3);
	for (int i = 0; i < inv.n; i++)
		CHECK_INT(inv.dev[i].context_overhead, 314572800);
	/* A driver whose contexts take nothing: measured as 0, nothing wrong. */
	struct gpu_inventory inv0;
	CHECK_INT(gpu_inventory_mock("1x8GiB", &inv0, &err), 0);
	setenv("TESSERA_MOCK_CTX_OVERHEAD", "0", 1);
	CHECK_INT(gpu_probe_context_overhead(&inv0, probe, lib_dir, dir, 20000, &err), 0);
	CHECK_INT(inv0.dev[0].context_overhead, 0);
	unsetenv("TESSERA_MOCK_CTX_OVERHEAD");
	/* the probe's usage file does not stay behind */
	char state[256];
	snprintf(state, sizeof(state), "%s/probe-gpus.state", dir);
	CHECK(access(state, F_OK) != 0);
	/* no driver where the probe looks: an error, not a hang or a crash */
	CHECK(gpu_probe_context_overhead(&inv0, probe, "/nonexistent", dir, 20000, &err) < 0 ||
	      inv0.dev[0].context_overhead == 0);
	CHECK(gpu_probe_context_overhead(&inv0, "/nonexistent/probe", lib_dir, dir, 20000, &err) < 0);
	rmdir(dir);
}

TEST(filter_visible)
{
	struct mock_spec spec, orig;
	struct terr err = {0};
	CHECK_INT(mock_spec_parse("3x8GiB:20,1x24GiB", &spec, &err), 0);
	CHECK_INT(spec.count, 4);
	orig = spec;
	/* listed in another order, with a space: spec order is kept */
	char list[256];
	snprintf(list, sizeof(list), "%s, %s", orig.dev[3].uuid_str, orig.dev[1].uuid_str);
	CHECK_INT(mock_spec_filter_visible(&spec, list, &err), 0);
	CHECK_INT(spec.count, 2);
	CHECK_STR(spec.dev[0].uuid_str, orig.dev[1].uuid_str);
	CHECK_STR(spec.dev[1].uuid_str, orig.dev[3].uuid_str);
	CHECK_INT(spec.dev[0].host_index, 1);
	CHECK_INT(spec.dev[1].host_index, 3);
	CHECK_INT(spec.dev[0].mem, 8 * GiB);
	CHECK_INT(spec.dev[1].mem, 24 * GiB);
	CHECK_INT(spec.dev[0].sms, 20);
	CHECK_INT(spec.dev[1].sms, MOCK_DEFAULT_SMS);
	CHECK(memcmp(spec.dev[1].uuid, orig.dev[3].uuid, 16) == 0);
	CHECK(spec.hash == orig.hash);

	/* one device; a trailing newline as in a spec file */
	spec = orig;
	snprintf(list, sizeof(list), "%s\n", orig.dev[2].uuid_str);
	CHECK_INT(mock_spec_filter_visible(&spec, list, &err), 0);
	CHECK_INT(spec.count, 1);
	CHECK_INT(spec.dev[0].host_index, 2);
	CHECK_STR(spec.dev[0].uuid_str, orig.dev[2].uuid_str);

	/* listing all keeps all */
	spec = orig;
	snprintf(list, sizeof(list), "%s,%s,%s,%s", orig.dev[0].uuid_str, orig.dev[1].uuid_str,
		 orig.dev[2].uuid_str, orig.dev[3].uuid_str);
	CHECK_INT(mock_spec_filter_visible(&spec, list, &err), 0);
	CHECK_INT(spec.count, 4);
	for (int i = 0; i < 4; i++)
		CHECK_INT(spec.dev[i].host_index, i);

	/* an unknown UUID is refused, naming it, and changes nothing */
	spec = orig;
	struct mock_spec other;
	CHECK_INT(mock_spec_parse("1x8GiB", &other, &err), 0);
	snprintf(list, sizeof(list), "%s,%s", orig.dev[0].uuid_str, other.dev[0].uuid_str);
	CHECK_INT(mock_spec_filter_visible(&spec, list, &err), -EINVAL);
	CHECK_INT(err.code, EINVAL);
	CHECK_CONTAINS(err.msg, other.dev[0].uuid_str);
	CHECK_INT(spec.count, 4);
	/* a prefix of a real UUID is not that UUID */
	spec = orig;
	snprintf(list, sizeof(list), "%.20s", orig.dev[0].uuid_str);
	CHECK_INT(mock_spec_filter_visible(&spec, list, &err), -EINVAL);
	CHECK_INT(mock_spec_filter_visible(&spec, "GPU-bogus", &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "GPU-bogus");
}

/* ---------- gpu_parse_ldconfig ---------- */

/* Captured `ldconfig -p` shape, with i386 entries for the same sonames,
 * sonames that are not wanted (and one that is a prefix of a wanted one),
 * and lines with odd spacing. */
static const char ldconfig_fixture[] =
	"1187 libs found in cache `/etc/ld.so.cache'\n"
	"\tlibz.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libz.so.1\n"
	"\tlibcuda.so.1 (libc6) => /usr/lib/i386-linux-gnu/libcuda.so.1\n"
	"\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so.1\n"
	"\tlibcuda.so (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so\n"
	"\tlibnvidia-ml.so.1 (libc6) => /usr/lib/i386-linux-gnu/libnvidia-ml.so.1\n"
	"    libnvidia-ml.so.1   (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1\n"
	"\tlibnvidia-ml.so.1 (libc6,x86-64) => /opt/second/libnvidia-ml.so.1\n"
	"\tlibnvidia-ptxjitcompiler.so.1 (libc6,x86-64, OS ABI: Linux 3.2.0) => "
	"/usr/lib/x86_64-linux-gnu/libnvidia-ptxjitcompiler.so.1\n"
	"\tlibnvidia-nvvm.so.4 (libc6) => /usr/lib/i386-linux-gnu/libnvidia-nvvm.so.4\n"
	"\tlibnvidia-gpucomp.so (libc6,x86-64) =>  /usr/lib/x86_64-linux-gnu/libnvidia-gpucomp.so\n"
	"Cache generated by: ldconfig (GNU libc) stable release version 2.36";

TEST(parse_ldconfig)
{
	static const char *const wanted[] = {
		"libnvidia-ml.so.1", "libcuda.so.1", "libmissing.so.1",
		"libnvidia-nvvm.so.4",            /* i386 only: not found */
		"libnvidia-ptxjitcompiler.so.1", NULL,
	};
	char **out = NULL;
	size_t n = 99;
	struct terr err = {0};
	CHECK_INT(gpu_parse_ldconfig(ldconfig_fixture, wanted, &out, &n, &err), 0);
	CHECK_INT(n, 3);
	CHECK(out != NULL);
	if (out && n == 3) {
		CHECK_STR(out[0], "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1");
		CHECK_STR(out[1], "/usr/lib/x86_64-linux-gnu/libcuda.so.1");
		CHECK_STR(out[2], "/usr/lib/x86_64-linux-gnu/libnvidia-ptxjitcompiler.so.1");
		CHECK(out[3] == NULL);
	}
	for (size_t i = 0; out && i < n; i++)
		free(out[i]);
	free(out);

	/* two spaces after "=>": the path has no leading space */
	static const char *const gpucomp[] = {"libnvidia-gpucomp.so", NULL};
	out = NULL;
	CHECK_INT(gpu_parse_ldconfig(ldconfig_fixture, gpucomp, &out, &n, &err), 0);
	CHECK_INT(n, 1);
	if (out && n == 1)
		CHECK_STR(out[0], "/usr/lib/x86_64-linux-gnu/libnvidia-gpucomp.so");
	for (size_t i = 0; out && i < n; i++)
		free(out[i]);
	free(out);

	/* nothing wanted found; empty text; nothing wanted */
	static const char *const none[] = {"libnothing.so.1", NULL};
	out = NULL;
	CHECK_INT(gpu_parse_ldconfig(ldconfig_fixture, none, &out, &n, &err), 0);
	CHECK_INT(n, 0);
	CHECK(out != NULL && out[0] == NULL);
	free(out);
	out = NULL;
	CHECK_INT(gpu_parse_ldconfig("", wanted, &out, &n, &err), 0);
	CHECK_INT(n, 0);
	CHECK(out != NULL && out[0] == NULL);
	free(out);
	static const char *const empty[] = {NULL};
	out = NULL;
	CHECK_INT(gpu_parse_ldconfig(ldconfig_fixture, empty, &out, &n, &err), 0);
	CHECK_INT(n, 0);
	free(out);

	/* the last line without a newline is read */
	static const char tail[] = "\tlibcuda.so.1 (libc6,x86-64) => /x/libcuda.so.1";
	out = NULL;
	CHECK_INT(gpu_parse_ldconfig(tail, wanted, &out, &n, &err), 0);
	CHECK_INT(n, 1);
	if (out && n == 1)
		CHECK_STR(out[0], "/x/libcuda.so.1");
	for (size_t i = 0; out && i < n; i++)
		free(out[i]);
	free(out);
}

/* Libraries whose soname has the driver's version in it, as the ld cache
 * lists them (libnvidia-gpucomp, the PKCS#11 ones: never a plain
 * "libnvidia-gpucomp.so" line): a wanted name ending in '.' takes every
 * x86-64 one, in the order of the cache, each once; exact names still
 * take their first line. */
TEST(parse_ldconfig_versioned_sonames)
{
	static const char text[] =
		"\tlibnvidia-gpucomp.so.550.163.01 (libc6,x86-64) => "
		"/usr/lib/x86_64-linux-gnu/libnvidia-gpucomp.so.550.163.01\n"
		"\tlibnvidia-gpucomp.so.550.163.01 (libc6) => "
		"/usr/lib/i386-linux-gnu/libnvidia-gpucomp.so.550.163.01\n"
		"\tlibnvidia-gpucomp.so.535.216.03 (libc6,x86-64) => "
		"/usr/lib/x86_64-linux-gnu/libnvidia-gpucomp.so.535.216.03\n"
		"\tlibnvidia-gpucomp.so.550.163.01 (libc6,x86-64) => "
		"/usr/lib/x86_64-linux-gnu/libnvidia-gpucomp.so.550.163.01\n"
		"\tlibnvidia-pkcs11-openssl3.so.550.163.01 (libc6,x86-64) => "
		"/usr/lib/x86_64-linux-gnu/libnvidia-pkcs11-openssl3.so.550.163.01\n"
		"\tlibnvidia-pkcs11.so.550.163.01 (libc6,x86-64) => "
		"/usr/lib/x86_64-linux-gnu/libnvidia-pkcs11.so.550.163.01\n"
		"\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so.1\n"
		"\tlibcuda.so.1 (libc6,x86-64) => /opt/other/libcuda.so.1\n";
	static const char *const wanted[] = {
		"libcuda.so.1", "libnvidia-gpucomp.so.", "libnvidia-pkcs11.so.",
		"libnvidia-gpucomp.so", NULL,
	};
	char **out = NULL;
	size_t n = 0;
	struct terr err = {0};
	CHECK_INT(gpu_parse_ldconfig(text, wanted, &out, &n, &err), 0);
	CHECK_INT(n, 4);
	if (out && n == 4) {
		CHECK_STR(out[0], "/usr/lib/x86_64-linux-gnu/libcuda.so.1");
		CHECK_STR(out[1], "/usr/lib/x86_64-linux-gnu/libnvidia-gpucomp.so.550.163.01");
		CHECK_STR(out[2], "/usr/lib/x86_64-linux-gnu/libnvidia-gpucomp.so.535.216.03");
		/* "libnvidia-pkcs11.so." is no prefix of the openssl3 one */
		CHECK_STR(out[3], "/usr/lib/x86_64-linux-gnu/libnvidia-pkcs11.so.550.163.01");
		CHECK(out[4] == NULL);
	}
	for (size_t i = 0; out && i < n; i++)
		free(out[i]);
	free(out);
}

/* ---------- gpu_driver_target ---------- */

TEST(driver_targets)
{
	char t[64];
	CHECK(gpu_driver_target("/usr/lib64/libcuda.so.1", t, sizeof(t)));
	CHECK_STR(t, "/usr/lib/x86_64-linux-gnu/libcuda.so.1");
	CHECK(gpu_driver_target("/usr/lib/x86_64-linux-gnu/libnvidia-gpucomp.so.550.163.01", t, sizeof(t)));
	CHECK_STR(t, "/usr/lib/x86_64-linux-gnu/libnvidia-gpucomp.so.550.163.01");
	CHECK(gpu_driver_target("/usr/local/bin/nvidia-smi", t, sizeof(t)));
	CHECK_STR(t, "/usr/bin/nvidia-smi");
	CHECK(!gpu_driver_target("/usr/lib64/", t, sizeof(t)));
	char small[16];
	CHECK(!gpu_driver_target("/usr/lib64/libcuda.so.1", small, sizeof(small)));
}

int main(int argc, char **argv)
{
	(void)argc;
	/* The loader reads LD_LIBRARY_PATH once, at start, and meson test
	 * points it at the mock driver's directory (a dependency of this
	 * test): start again without it, so the no-driver case finds none. */
	if (getenv("LD_LIBRARY_PATH")) {
		unsetenv("LD_LIBRARY_PATH");
		execv("/proc/self/exe", argv);
		perror("execv /proc/self/exe");
		return 1;
	}
	/* the mock driver must show every device of the spec */
	unsetenv("TESSERA_MOCK_VISIBLE");
	RUN(nvml_without_driver);
	RUN(mock_inventory_from_spec);
	RUN(mock_inventory_bad_specs);
	RUN(nvml_through_mock_driver);
	RUN(context_overhead_is_measured_in_a_probe_process);
	RUN(filter_visible);
	RUN(parse_ldconfig);
	RUN(parse_ldconfig_versioned_sonames);
	RUN(driver_targets);
	return testlib_done();
}
