/* gpu/gpu_usage.c with the real parts: a process under the fGPU library
 * (libtessera-fgpu.so preloaded over the mock driver) loads a module whose
 * __device__ variables the driver places on the device without any
 * allocation call; tessera-gpu-probe --processes reads what the driver
 * holds for it; tessera-gpu-probe --charge (what the agent runs every
 * second) charges the difference to its slot, and the process's next
 * allocation is refused where the share is full.
 *
 * Environment (set by tests/gpu/meson.build):
 *   TESSERA_TEST_MOCK_LIB_DIR  the build dir holding the mock driver
 *   TESSERA_TEST_GPU_PROBE     tessera-gpu-probe
 *   FGPU_LIB                   libtessera-fgpu.so */
#include "gpu/gpu_usage.h"
#include "common/err.h"
#include "gpuabi/cuda_abi.h"
#include "gpu/gpu.h"
#include "testlib.h"

#include <dlfcn.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define MiB (1LL << 20)
#define GiB (1LL << 30)

/* A module with 1 GiB of __device__ variables, in the mock's PTX. */
static const char big_globals[] =
	".version 6.0\n.target sm_50\n.address_size 64\n"
	".global .align 8 .b8 table[1073741824];\n"
	".visible .entry k()\n{\n\tret;\n}\n";

/* ---- the process under the library: commands on stdin, one answer line
 * each on stdout ---- */

static int child_main(void)
{
	void *cu = dlopen("libcuda.so.1", RTLD_NOW);
	if (!cu)
		return 2;
	CUresult (*init)(unsigned) = (CUresult (*)(unsigned))dlsym(cu, "cuInit");
	CUresult (*ctx_create)(CUcontext *, unsigned, CUdevice) =
		(CUresult (*)(CUcontext *, unsigned, CUdevice))dlsym(cu, "cuCtxCreate_v2");
	CUresult (*load)(CUmodule *, const void *) =
		(CUresult (*)(CUmodule *, const void *))dlsym(cu, "cuModuleLoadData");
	CUresult (*unload)(CUmodule) = (CUresult (*)(CUmodule))dlsym(cu, "cuModuleUnload");
	CUresult (*alloc)(CUdeviceptr *, size_t) =
		(CUresult (*)(CUdeviceptr *, size_t))dlsym(cu, "cuMemAlloc_v2");
	CUresult (*mfree)(CUdeviceptr) = (CUresult (*)(CUdeviceptr))dlsym(cu, "cuMemFree_v2");
	CUresult (*info)(size_t *, size_t *) =
		(CUresult (*)(size_t *, size_t *))dlsym(cu, "cuMemGetInfo_v2");
	CUcontext ctx;
	if (!init || !ctx_create || !load || !unload || !alloc || !mfree || !info ||
	    init(0) != CUDA_SUCCESS || ctx_create(&ctx, 0, 0) != CUDA_SUCCESS)
		return 3;
	setvbuf(stdout, NULL, _IONBF, 0);
	CUmodule mod = NULL;
	CUdeviceptr last[16];
	int nlast = 0;
	char cmd[64];
	long long arg;
	while (scanf("%63s", cmd) == 1) {
		CUresult rc = CUDA_SUCCESS;
		if (!strcmp(cmd, "alloc") && scanf("%lld", &arg) == 1 && nlast < 16) {
			rc = alloc(&last[nlast], (size_t)arg);
			nlast += rc == CUDA_SUCCESS;
		} else if (!strcmp(cmd, "free") && nlast > 0) {
			rc = mfree(last[--nlast]);
		} else if (!strcmp(cmd, "load")) {
			rc = load(&mod, big_globals);
		} else if (!strcmp(cmd, "unload")) {
			rc = unload(mod);
		} else if (!strcmp(cmd, "used")) {
			size_t fr = 0, total = 0;
			rc = info(&fr, &total);
			printf("%lld\n", rc == CUDA_SUCCESS ? (long long)(total - fr) : -1LL);
			continue;
		} else {
			return 0;
		}
		printf("%d\n", (int)rc);
	}
	return 0;
}

/* ---- the test side ---- */

static char dir[] = "/tmp/tessera-gpu-usage-XXXXXX";
static char region_path[300], spec_path[300], state_path[300];
static char uuids[1][96];
static pid_t child;
static FILE *to_child, *from_child;

static long long ask(const char *cmd)
{
	long long v = -99;
	fprintf(to_child, "%s\n", cmd);
	fflush(to_child);
	if (fscanf(from_child, "%lld", &v) != 1)
		v = -98;
	return v;
}

static void start_child(const char *self)
{
	char conf[300], text[600];
	snprintf(conf, sizeof(conf), "%s/fgpu.conf", dir);
	snprintf(text, sizeof(text),
		 "version = 1\ndevices = 1\ndevice.0.uuid = %s\ndevice.0.memory_limit = %lld\n"
		 "region = %s\n", uuids[0], 2 * GiB, region_path);
	FILE *f = fopen(conf, "w");
	fputs(text, f);
	fclose(f);
	int in[2], out[2];
	if (pipe(in) != 0 || pipe(out) != 0)
		abort();
	child = fork();
	if (child == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		close(in[1]);
		close(out[0]);
		setenv("LD_PRELOAD", getenv("FGPU_LIB"), 1);
		setenv("LD_LIBRARY_PATH", getenv("TESSERA_TEST_MOCK_LIB_DIR"), 1);
		setenv("TESSERA_FGPU_CONF", conf, 1);
		setenv("TESSERA_MOCK_GPUS_FILE", spec_path, 1);
		setenv("TESSERA_MOCK_STATE", state_path, 1);
		unsetenv("TESSERA_MOCK_GPUS");
		execl(self, self, "--child", (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	to_child = fdopen(in[1], "w");
	from_child = fdopen(out[0], "r");
}

/* The driver's list, from tessera-gpu-probe --processes run as the agent
 * runs it for a mock session: "UUID PID BYTES" lines. */
static int driver_list(struct gpu_process_usage *drv, int max)
{
	char cmd[2048];
	snprintf(cmd, sizeof(cmd),
		 "env -u LD_PRELOAD LD_LIBRARY_PATH='%s' TESSERA_MOCK_GPUS_FILE='%s' "
		 "TESSERA_MOCK_STATE='%s' '%s' --processes",
		 getenv("TESSERA_TEST_MOCK_LIB_DIR"), spec_path, state_path,
		 getenv("TESSERA_TEST_GPU_PROBE"));
	FILE *p = popen(cmd, "r");
	if (!p)
		return -1;
	int n = 0;
	long long pid, bytes;
	char uuid[64];
	while (n < max && fscanf(p, "%63s %lld %lld", uuid, &pid, &bytes) == 3) {
		memcpy(drv[n].uuid, uuid, sizeof(uuid));
		drv[n].pid = (int32_t)pid;
		drv[n].bytes = bytes;
		n++;
	}
	return pclose(p) == 0 ? n : -1;
}

/* One round of the agent: tessera-gpu-probe --charge on the session
 * (init pid 0: the mock's pids are the session's). Returns how many
 * figures changed, from the probe's line "REGION CHANGED". */
static int round_(struct fgpu_region_handle *h)
{
	(void)h;
	char a0[300], a1[] = "0", a2[96], out[1024];
	snprintf(a0, sizeof(a0), "%s", region_path);
	memcpy(a2, uuids[0], sizeof(a2));
	char *args[] = {a0, a1, a2};
	struct terr err = {0};
	if (gpu_charge_sessions(getenv("TESSERA_TEST_GPU_PROBE"), getenv("TESSERA_TEST_MOCK_LIB_DIR"),
				spec_path, state_path, args, 3, 20000, out, sizeof(out), &err) < 0) {
		fprintf(stderr, "charge: %s\n", err.msg);
		return -1;
	}
	int changed = -2;
	char path[300];
	if (sscanf(out, "%299s %d", path, &changed) != 2 || strcmp(path, region_path) != 0)
		fprintf(stderr, "charge said: %s\n", out);
	return changed;
}

TEST(the_probe_lists_what_the_driver_holds_per_process)
{
	CHECK_INT(ask("alloc 268435456"), CUDA_SUCCESS);
	struct gpu_process_usage drv[8];
	CHECK_INT(driver_list(drv, 8), 1);
	CHECK_STR(drv[0].uuid, uuids[0]);
	CHECK_INT(drv[0].pid, child);
	CHECK_INT(drv[0].bytes, 256 * MiB);
	/* nothing untracked yet: the library accounted all of it */
	struct fgpu_region_handle h;
	struct terr err;
	CHECK_INT(gpu_usage_open_region(&h, region_path, &err), 0);
	CHECK_INT(round_(&h), 0);
	CHECK_INT(fgpu_region_used(&h, 0), 256 * MiB);
	fgpu_region_close(&h);
}

TEST(memory_the_driver_takes_by_itself_counts_in_the_share)
{
	struct fgpu_region_handle h;
	struct terr err;
	CHECK_INT(gpu_usage_open_region(&h, region_path, &err), 0);
	/* 1 GiB of module variables: the library sees no allocation */
	CHECK_INT(ask("load"), CUDA_SUCCESS);
	CHECK_INT(fgpu_region_used(&h, 0), 256 * MiB);
	CHECK_INT(ask("used"), 256 * MiB);
	/* so 1 GiB more would still be admitted; after a round it is not */
	CHECK_INT(round_(&h), 1);
	CHECK_INT(fgpu_region_used(&h, 0), 1280 * MiB);
	CHECK_INT(ask("used"), 1280 * MiB);
	CHECK_INT(ask("alloc 1073741824"), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_INT(ask("alloc 536870912"), CUDA_SUCCESS);
	CHECK_INT(ask("free"), CUDA_SUCCESS);
	/* a second round with nothing new changes nothing */
	CHECK_INT(round_(&h), 0);
	/* unloaded: the driver gives it back, and so does the share */
	CHECK_INT(ask("unload"), CUDA_SUCCESS);
	CHECK_INT(round_(&h), 1);
	CHECK_INT(fgpu_region_used(&h, 0), 256 * MiB);
	CHECK_INT(ask("alloc 1073741824"), CUDA_SUCCESS);
	CHECK_INT(ask("free"), CUDA_SUCCESS);
	fgpu_region_close(&h);
}

/* An allocation freed between the snapshot and the driver's answer must
 * not look untracked: the driver's figure still had it. */
TEST(a_free_while_the_driver_is_asked_is_not_untracked)
{
	struct fgpu_region_handle h;
	struct terr err;
	CHECK_INT(gpu_usage_open_region(&h, region_path, &err), 0);
	CHECK_INT(ask("alloc 1073741824"), CUDA_SUCCESS);
	struct fgpu_region_proc before[8];
	struct gpu_process_usage drv[8];
	int nb = fgpu_region_processes(&h, before, 8);
	int nd = driver_list(drv, 8);
	CHECK_INT(nd, 1);
	CHECK_INT(drv[0].bytes, 1280 * MiB);
	CHECK_INT(ask("free"), CUDA_SUCCESS);
	CHECK_INT(gpu_usage_apply(&h, (const char (*)[96])uuids, 1, before, nb, drv, nd,
				  gpu_usage_map_same_pid, NULL), 0);
	CHECK_INT(fgpu_region_used(&h, 0), 256 * MiB);
	/* without the snapshot from before, 1 GiB would have been charged */
	CHECK_INT(gpu_usage_apply(&h, (const char (*)[96])uuids, 1, NULL, 0, drv, nd,
				  gpu_usage_map_same_pid, NULL), 1);
	CHECK_INT(fgpu_region_used(&h, 0), 1280 * MiB);
	CHECK_INT(round_(&h), 1);
	CHECK_INT(fgpu_region_used(&h, 0), 256 * MiB);
	/* a device of another session, or a pid that is not the session's,
	 * is ignored */
	struct gpu_process_usage other[2] = {{"GPU-00000000-0000-0000-0000-000000000000", 0, GiB},
					     {"", 0, GiB}};
	other[0].pid = child;
	memcpy(other[1].uuid, uuids[0], sizeof(other[1].uuid));
	other[1].pid = child + 100000;
	CHECK_INT(gpu_usage_apply(&h, (const char (*)[96])uuids, 1, NULL, 0, other, 2,
				  gpu_usage_map_same_pid, NULL), 0);
	CHECK_INT(fgpu_region_used(&h, 0), 256 * MiB);
	fgpu_region_close(&h);
}

/* The region lies in a directory the session can write: whatever it
 * puts there costs an error line, never the caller. */
TEST(a_spoiled_region_is_an_error_line)
{
	char fifo[300], small[300], out[2048];
	snprintf(fifo, sizeof(fifo), "%s/fifo.region", dir);
	snprintf(small, sizeof(small), "%s/small.region", dir);
	CHECK_INT(mkfifo(fifo, 0600), 0);
	FILE *f = fopen(small, "w");
	fputs("not a region", f);
	fclose(f);
	char a1[] = "0", a2[96];
	memcpy(a2, uuids[0], sizeof(a2));
	char *args[] = {fifo, a1, a2, small, a1, a2, region_path, a1, a2};
	struct terr err = {0};
	CHECK_INT(gpu_charge_sessions(getenv("TESSERA_TEST_GPU_PROBE"),
				      getenv("TESSERA_TEST_MOCK_LIB_DIR"), spec_path, state_path, args, 9,
				      20000, out, sizeof(out), &err), 0);
	CHECK(strstr(out, "fifo.region error: ") != NULL);
	CHECK(strstr(out, "not a regular file") != NULL);
	CHECK(strstr(out, "small.region error: ") != NULL);
	/* a region no process has made yet is not made by the observer */
	char missing[320];
	struct fgpu_region_handle h;
	snprintf(missing, sizeof(missing), "%s/none.region", dir);
	CHECK_INT(gpu_usage_open_region(&h, missing, &err), -ENOENT);
	CHECK(access(missing, F_OK) != 0);
	/* the good session next to them is charged as usual */
	char good[400];
	snprintf(good, sizeof(good), "%s 0\n", region_path);
	CHECK(strstr(out, good) != NULL);
	/* bad arguments: a usage line, not a crash */
	char *odd[] = {region_path, a1};
	CHECK(gpu_charge_sessions(getenv("TESSERA_TEST_GPU_PROBE"), NULL, NULL, NULL, odd, 2, 20000,
				  out, sizeof(out), &err) < 0);
}

/* A real driver names processes by host pid: the session's are those in
 * its init's PID namespace, named there by their innermost pid. */
TEST(host_pids_map_into_the_session_namespace)
{
	pid_t me = getpid(), inner = 0;
	uint64_t start = 0;
	CHECK(gpu_usage_map_host_pid(me, &me, &inner, &start));
	CHECK_INT(inner, me);
	CHECK(start != 0);
	int fds[2];
	CHECK(pipe(fds) == 0);
	pid_t c = fork();
	if (c == 0) {
		pid_t g = -1;
		if (unshare(CLONE_NEWPID) != 0) {
			(void)!write(fds[1], &g, sizeof(g));   /* not allowed here: skip */
			_exit(0);
		}
		g = fork();
		if (g == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			pause();
			_exit(0);
		}
		(void)!write(fds[1], &g, sizeof(g));
		waitpid(g, NULL, 0);
		_exit(0);
	}
	pid_t g = 0;
	CHECK(read(fds[0], &g, sizeof(g)) == sizeof(g));
	if (g <= 0) {
		printf("  (skipped: no permission to make a PID namespace)\n");
	} else {
		/* g is pid 1 in its namespace */
		CHECK(gpu_usage_map_host_pid(g, &g, &inner, &start));
		CHECK_INT(inner, 1);
		/* this process is not in that namespace, nor g in ours */
		CHECK(!gpu_usage_map_host_pid(me, &g, &inner, &start));
		CHECK(!gpu_usage_map_host_pid(g, &me, &inner, &start));
		/* by its host pid (it may not have set its death signal yet);
		 * c then reaps it and exits */
		kill(g, SIGKILL);
	}
	waitpid(c, NULL, 0);
	close(fds[0]);
	close(fds[1]);
	/* a pid that does not exist is nobody's */
	CHECK(!gpu_usage_map_host_pid(INT32_MAX, &me, &inner, &start));
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "--child"))
		return child_main();
	if (!getenv("TESSERA_TEST_MOCK_LIB_DIR") || !getenv("TESSERA_TEST_GPU_PROBE") ||
	    !getenv("FGPU_LIB") || !mkdtemp(dir))
		return 2;
	char self[PATH_MAX];
	ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (len <= 0)
		return 2;
	self[len] = '\0';
	snprintf(region_path, sizeof(region_path), "%s/fgpu.region", dir);
	snprintf(spec_path, sizeof(spec_path), "%s/mock-gpus", dir);
	snprintf(state_path, sizeof(state_path), "%s/gpus.state", dir);
	FILE *f = fopen(spec_path, "w");
	fputs("1x8GiB\n", f);
	fclose(f);
	struct gpu_inventory inv;
	struct terr err;
	if (gpu_inventory_mock("1x8GiB", &inv, &err) < 0)
		return 2;
	memcpy(uuids[0], inv.dev[0].uuid, sizeof(inv.dev[0].uuid));
	start_child(self);
	RUN(the_probe_lists_what_the_driver_holds_per_process);
	RUN(memory_the_driver_takes_by_itself_counts_in_the_share);
	RUN(a_free_while_the_driver_is_asked_is_not_untracked);
	RUN(a_spoiled_region_is_an_error_line);
	RUN(host_pids_map_into_the_session_namespace);
	fprintf(to_child, "quit\n");
	fclose(to_child);
	waitpid(child, NULL, 0);
	char cmd[400];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		return 2;
	return testlib_done();
}
