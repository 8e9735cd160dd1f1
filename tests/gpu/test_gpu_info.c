/* gpu-info through the shim: --json shows the share, --alloc past it
 * fails with "out of memory" and a non-zero exit. GPU_INFO and the
 * preload come from meson's test environment; the children inherit it. */
#include "fgpu/fgpu_test.h"
#include "testlib.h"

static char out[8192];

/* Runs gpu-info with args (stderr merged); returns the exit status. */
static int gpu_info(const char *args)
{
	return ft_run("GPU_INFO", args, out, sizeof(out));
}

TEST(json_shows_the_share)
{
	CHECK_INT(gpu_info("--json"), 0);
	CHECK_CONTAINS(out, "{\"devices\":[{\"index\":0,\"uuid\":\"GPU-");
	CHECK_CONTAINS(out, "\"name\":\"Tessera Mock GPU\"");
	CHECK_CONTAINS(out, "\"memory_total\":2147483648,\"memory_used\":0,"
			    "\"memory_free\":2147483648,\"sm_limit_percent\":50}");
	CHECK_CONTAINS(out, "{\"index\":1,");
}

TEST(human_output)
{
	CHECK_INT(gpu_info(""), 0);
	CHECK_CONTAINS(out, "GPU 0: Tessera Mock GPU");
	CHECK_CONTAINS(out, "2 GiB total");
	CHECK_CONTAINS(out, "compute share 50%");
}

TEST(alloc_within_share)
{
	CHECK_INT(gpu_info("--alloc 1536MiB"), 0);
	CHECK_CONTAINS(out, "allocated 1.5 GiB");
	CHECK_INT(gpu_info("--alloc 2g --device 1"), 0);
}

TEST(alloc_past_share_fails)
{
	CHECK_INT(gpu_info("--alloc 3GiB"), 1);
	CHECK_CONTAINS(out, "out of memory");
	CHECK_INT(gpu_info("--alloc 2147483649"), 1);
	CHECK_CONTAINS(out, "out of memory");
	CHECK_INT(gpu_info("--alloc lots"), 2);
}

TEST(without_the_shim_the_whole_device)
{
	char saved[1024];
	snprintf(saved, sizeof(saved), "%s", getenv("LD_PRELOAD") ? getenv("LD_PRELOAD") : "");
	unsetenv("LD_PRELOAD");
	CHECK_INT(gpu_info("--json"), 0);
	CHECK_CONTAINS(out, "\"memory_total\":8589934592");
	CHECK_CONTAINS(out, "\"sm_limit_percent\":50");   /* the file still says so */
	CHECK_INT(gpu_info("--alloc 3GiB"), 0);
	setenv("LD_PRELOAD", saved, 1);
}

/* Each device's own compute share, as the agent writes it for a session
 * with a whole device and part of another. */
TEST(json_shows_each_devices_share)
{
	char path[512];
	snprintf(path, sizeof(path), "%s", getenv("TESSERA_FGPU_CONF"));
	FILE *f = fopen(path, "w");
	CHECK(f != NULL);
	if (!f)
		return;
	fputs("devices = 2\ndevice.0.memory_limit = 8GiB\ndevice.0.sm_limit_percent = 100\n"
	      "device.1.memory_limit = 4GiB\ndevice.1.sm_limit_percent = 50\n"
	      "sm_limit_percent = 100\n", f);
	fclose(f);
	CHECK_INT(gpu_info("--json"), 0);
	CHECK_CONTAINS(out, "\"memory_total\":8589934592,\"memory_used\":0,"
			    "\"memory_free\":8589934592,\"sm_limit_percent\":100}");
	CHECK_CONTAINS(out, "\"memory_total\":4294967296,\"memory_used\":0,"
			    "\"memory_free\":4294967296,\"sm_limit_percent\":50}");
	CHECK_INT(gpu_info(""), 0);
	CHECK_CONTAINS(out, "132 SMs, compute share 100%");
	CHECK_CONTAINS(out, "132 SMs, compute share 50%");
}

int main(void)
{
	setenv("TESSERA_MOCK_GPUS", "2x8GiB:132", 1);
	const char *dir = ft_setup("memory_limit = 2GiB\nsm_limit_percent = 50\n");
	RUN(json_shows_the_share);
	RUN(human_output);
	RUN(alloc_within_share);
	RUN(alloc_past_share_fails);
	RUN(without_the_shim_the_whole_device);
	RUN(json_shows_each_devices_share);
	ft_cleanup(dir);
	return testlib_done();
}
