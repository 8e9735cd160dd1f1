/* The mock driver's nvidia-smi through the shim, as in a session with a
 * share of two 8 GiB mock GPUs: the table and the CSV show the share's
 * memory and the processes holding it, -L lists the UUIDs, what it does
 * not know is refused with exit 2; and the mock NVML's utilisation counts
 * the kernel time run. MOCK_NVIDIA_SMI, GPU_INFO and the preload come from
 * meson's test environment; the children inherit it. */
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include "fgpu/fgpu_test.h"
#include "testlib.h"

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t dev, nvmlUtilization_t *u);

static char out[16384];

/* Runs nvidia-smi with args (stderr merged); returns the exit status. */
static int smi(const char *args)
{
	return ft_run("MOCK_NVIDIA_SMI", args, out, sizeof(out));
}

static int count_lines(const char *s)
{
	int n = 0;
	for (; *s; s++)
		n += *s == '\n';
	return n;
}

TEST(table_shows_the_share)
{
	CHECK_INT(smi(""), 0);
	CHECK_CONTAINS(out, "| NVIDIA-SMI 550.54.15 (Tessera mock driver) Driver Version: 550.54.15 CUDA Version: 12.4 |");
	CHECK_CONTAINS(out, "|   0  Tessera Mock GPU ");
	CHECK_CONTAINS(out, "|   1  Tessera Mock GPU ");
	/* 2 GiB of each 8 GiB device: the share, not the device. */
	CHECK_CONTAINS(out, "|       0MiB /   2048MiB |      0%      Default |");
	CHECK(!strstr(out, "8192MiB"));
	CHECK_CONTAINS(out, "|  No running processes found ");
	/* Every line of the table is as wide as the real one's. */
	int rows = 0, bad = 0;
	for (char *l = out; *l;) {
		size_t len = strcspn(l, "\n");
		if (*l == '|' || *l == '+') {
			rows++;
			if (len != 91) {
				bad++;
				printf("  %zu wide: %.*s\n", len, (int)len, l);
			}
		}
		l += len + (l[len] == '\n');
	}
	CHECK(rows >= 20);
	CHECK_INT(bad, 0);
}

/* gpu-info holding 512 MiB on device 0 in a child; returns its pid. */
static pid_t hold_512mib(void)
{
	int fds[2];
	if (pipe(fds) != 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		dup2(fds[1], STDOUT_FILENO);
		close(fds[0]);
		execl(getenv("GPU_INFO"), "gpu-info", "--alloc", "512MiB", "--hold", "600", (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	char line[256] = "";
	ssize_t n = read(fds[0], line, sizeof(line) - 1);   /* "allocated ..." once it holds it */
	close(fds[0]);
	if (n <= 0 || strncmp(line, "allocated", 9) != 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return -1;
	}
	return pid;
}

TEST(table_shows_processes_and_their_memory)
{
	pid_t pid = hold_512mib();
	CHECK(pid > 0);
	if (pid <= 0)
		return;
	CHECK_INT(smi(""), 0);
	CHECK_CONTAINS(out, "|     512MiB /   2048MiB |");
	CHECK_CONTAINS(out, "|       0MiB /   2048MiB |");   /* device 1 */
	char row[128];
	snprintf(row, sizeof(row), "|    0   N/A  N/A %10d      C   ", (int)pid);
	CHECK_CONTAINS(out, row);
	CHECK_CONTAINS(out, "gpu-info");
	CHECK_CONTAINS(out, "512MiB |");
	CHECK(!strstr(out, "No running processes found"));
	CHECK_INT(smi("--query-gpu=memory.used,memory.free --format=csv,noheader"), 0);
	CHECK_STR(out, "512 MiB, 1536 MiB\n0 MiB, 2048 MiB\n");
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	/* The driver frees a dead process's memory. */
	CHECK_INT(smi("--query-gpu=memory.used --format=csv,noheader,nounits"), 0);
	CHECK_STR(out, "0\n0\n");
}

TEST(list_gives_the_uuids)
{
	char u0[64], u1[64], want[256];
	ft_uuid(0, u0, sizeof(u0));
	ft_uuid(1, u1, sizeof(u1));
	CHECK_INT(smi("-L"), 0);
	snprintf(want, sizeof(want), "GPU 0: Tessera Mock GPU (UUID: %s)\nGPU 1: Tessera Mock GPU (UUID: %s)\n", u0, u1);
	CHECK_STR(out, want);
	CHECK_INT(smi("-L -i 1"), 0);
	snprintf(want, sizeof(want), "GPU 1: Tessera Mock GPU (UUID: %s)\n", u1);
	CHECK_STR(out, want);
}

TEST(query_csv)
{
	char u0[64], u1[64], want[512];
	ft_uuid(0, u0, sizeof(u0));
	ft_uuid(1, u1, sizeof(u1));
	CHECK_INT(smi("--query-gpu=name,memory.total,memory.used,memory.free,utilization.gpu,uuid --format=csv"), 0);
	snprintf(want, sizeof(want),
		 "name, memory.total [MiB], memory.used [MiB], memory.free [MiB], utilization.gpu [%%], uuid\n"
		 "Tessera Mock GPU, 2048 MiB, 0 MiB, 2048 MiB, 0 %%, %s\n"
		 "Tessera Mock GPU, 2048 MiB, 0 MiB, 2048 MiB, 0 %%, %s\n", u0, u1);
	CHECK_STR(out, want);
	CHECK_INT(smi("--query-gpu=memory.total,uuid --format=csv,noheader,nounits"), 0);
	snprintf(want, sizeof(want), "2048, %s\n2048, %s\n", u0, u1);
	CHECK_STR(out, want);
	/* The header keeps the units without them in the values, as the
	 * real tool's; the options are also taken as separate arguments. */
	CHECK_INT(smi("--query-gpu memory.total,index --format csv,nounits -i 1"), 0);
	CHECK_STR(out, "memory.total [MiB], index\n2048, 1\n");
	CHECK_INT(smi("--query-gpu=count,driver_version --format=csv,noheader"), 0);
	CHECK_STR(out, "2, 550.54.15\n2, 550.54.15\n");
}

TEST(without_the_shim_the_whole_device)
{
	char saved[1024];
	snprintf(saved, sizeof(saved), "%s", getenv("LD_PRELOAD") ? getenv("LD_PRELOAD") : "");
	unsetenv("LD_PRELOAD");
	CHECK_INT(smi("--query-gpu=memory.total --format=csv,noheader"), 0);
	CHECK_STR(out, "8192 MiB\n8192 MiB\n");
	setenv("LD_PRELOAD", saved, 1);
}

TEST(what_it_does_not_know_is_refused)
{
	static const char *const bad[] = {
		"-q", "--query-compute-apps=pid --format=csv", "-x",
		"--query-gpu=temperature.gpu --format=csv", "--query-gpu=name --format=json",
		"--query-gpu=name --format=csv,wide", "--query-gpu=name", "--format=csv",
		"-L --query-gpu=name --format=csv", "-i", "-i zero",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		printf("  nvidia-smi %s\n", bad[i]);
		CHECK_INT(smi(bad[i]), 2);
		CHECK_INT(count_lines(out), 1);
	}
	CHECK_INT(smi("-q"), 2);
	CHECK_CONTAINS(out, "nvidia-smi (Tessera mock driver): option -q is not supported");
	CHECK_INT(smi("--query-gpu=name,nope --format=csv"), 2);
	CHECK_STR(out, "Field \"nope\" is not a valid field to query.\n");
	/* A GPU the session does not have, as the real tool says it. */
	CHECK_INT(smi("-i 2"), 6);
	CHECK_STR(out, "No devices were found with index 2\n");
	CHECK_INT(smi("-h"), 0);
	CHECK_CONTAINS(out, "mock GPU driver's nvidia-smi");
}

/* The mock NVML's utilisation (what the table's GPU-Util shows): the
 * kernel time run over the sample period. A 100 s kernel (simulated) in a
 * period of well under 100 s of wall time is 100%, whatever the machine's
 * speed; nothing run is 0%. */
TEST(utilization_is_the_kernel_time_run)
{
	nvmlDevice_t d0, d1;
	nvmlUtilization_t u = {7, 7};
	CHECK_INT(nvmlInit_v2(), NVML_SUCCESS);
	CHECK_INT(nvmlDeviceGetHandleByIndex_v2(0, &d0), NVML_SUCCESS);
	CHECK_INT(nvmlDeviceGetHandleByIndex_v2(1, &d1), NVML_SUCCESS);
	CHECK_INT(nvmlDeviceGetUtilizationRates(d0, &u), NVML_SUCCESS);   /* waits for a sample */
	CHECK_INT((int)u.gpu, 0);
	CHECK_INT((int)u.memory, 0);
	CHECK_INT(nvmlDeviceGetUtilizationRates(d0, NULL), NVML_ERROR_INVALID_ARGUMENT);

	CUcontext ctx;
	CUdevice dev;
	CHECK_INT(cuInit(0), CUDA_SUCCESS);
	CHECK_INT(cuDeviceGet(&dev, 0), CUDA_SUCCESS);
	CHECK_INT(cuCtxCreate_v2(&ctx, 0, dev), CUDA_SUCCESS);
	CUfunction f = (CUfunction)(uintptr_t)0x1000;   /* the mock never dereferences it */
	CHECK_INT(cuLaunchKernel(f, 100000000, 1, 1, 128, 1, 1, 0, NULL, NULL, NULL), CUDA_SUCCESS);
	/* Past the period's shortest length, so the next call closes it. */
	struct timespec ts = { .tv_nsec = 200 * 1000 * 1000 };
	while (nanosleep(&ts, &ts) != 0)
		;
	CHECK_INT(nvmlDeviceGetUtilizationRates(d0, &u), NVML_SUCCESS);
	CHECK_INT((int)u.gpu, 100);
	CHECK_INT(nvmlDeviceGetUtilizationRates(d1, &u), NVML_SUCCESS);
	CHECK_INT((int)u.gpu, 0);
	cuCtxDestroy_v2(ctx);
	nvmlShutdown();
}

int main(void)
{
	setenv("TESSERA_MOCK_GPUS", "2x8GiB:132", 1);
	const char *dir = ft_setup("memory_limit = 2GiB\nsm_limit_percent = 50\n");
	/* One usage state for this process and its children, as the agent's
	 * state directory gives a session's processes. */
	char state[256];
	snprintf(state, sizeof(state), "%s/mock.state", dir);
	setenv("TESSERA_MOCK_STATE", state, 1);
	cuInit(0);   /* for ft_uuid */
	RUN(table_shows_the_share);
	RUN(table_shows_processes_and_their_memory);
	RUN(list_gives_the_uuids);
	RUN(query_csv);
	RUN(without_the_shim_the_whole_device);
	RUN(what_it_does_not_know_is_refused);
	RUN(utilization_is_the_kernel_time_run);
	ft_cleanup(dir);
	return testlib_done();
}
