/* NVML (what nvidia-smi reads) shows the share: total = limit, used = what
 * the container's processes accounted, free = the rest. */
#include <signal.h>
#include <sys/wait.h>

#include "fgpu/fgpu_test.h"
#include "testlib.h"

static const char *dir;

TEST(memory_info_shows_the_share)
{
	nvmlDevice_t d;
	nvmlMemory_t m;
	CHECK_INT(nvmlInit_v2(), NVML_SUCCESS);
	CHECK_INT(nvmlDeviceGetHandleByIndex_v2(0, &d), NVML_SUCCESS);
	CHECK_INT(nvmlDeviceGetMemoryInfo(d, &m), NVML_SUCCESS);
	CHECK_INT(m.total, 2 * GiB);
	CHECK_INT(m.used, 0);
	CHECK_INT(m.free, 2 * GiB);
	nvmlMemory_v2_t m2;
	memset(&m2, 0, sizeof(m2));
	m2.version = nvmlMemory_v2;
	CHECK_INT(nvmlDeviceGetMemoryInfo_v2(d, &m2), NVML_SUCCESS);
	CHECK_INT(m2.total, 2 * GiB);
	CHECK_INT(m2.free, 2 * GiB);
	m2.version = 1;
	CHECK_INT(nvmlDeviceGetMemoryInfo_v2(d, &m2), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
	CHECK_INT(nvmlDeviceGetMemoryInfo(d, NULL), NVML_ERROR_INVALID_ARGUMENT);
	CHECK_INT(nvmlDeviceGetMemoryInfo_v2(d, NULL), NVML_ERROR_INVALID_ARGUMENT);
	/* device 1 was not given to the session: nothing */
	CHECK_INT(nvmlDeviceGetHandleByIndex_v2(1, &d), NVML_SUCCESS);
	CHECK_INT(nvmlDeviceGetMemoryInfo(d, &m), NVML_SUCCESS);
	CHECK_INT(m.total, 0);
	nvmlShutdown();
}

TEST(memory_info_counts_other_processes)
{
	int pipefd[2];
	CHECK(pipe(pipefd) == 0);
	pid_t pid = fork();
	if (pid == 0) {
		CUcontext c;
		CUdeviceptr p;
		char ok = cuCtxCreate_v2(&c, 0, 0) == CUDA_SUCCESS &&
			  cuMemAlloc_v2(&p, 768 * MiB) == CUDA_SUCCESS ? 'y' : 'n';
		if (write(pipefd[1], &ok, 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	char ok = 0;
	CHECK(read(pipefd[0], &ok, 1) == 1);
	CHECK_INT(ok, 'y');
	nvmlDevice_t d;
	nvmlMemory_t m;
	CHECK_INT(nvmlInit_v2(), NVML_SUCCESS);
	CHECK_INT(nvmlDeviceGetHandleByIndex_v2(0, &d), NVML_SUCCESS);
	CHECK_INT(nvmlDeviceGetMemoryInfo(d, &m), NVML_SUCCESS);
	CHECK_INT(m.total, 2 * GiB);
	CHECK_INT(m.used, 768 * MiB);
	CHECK_INT(m.free, 2 * GiB - 768 * MiB);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	/* the dead process's share comes back once it is noticed */
	CUcontext c;
	CUdeviceptr p;
	CHECK_INT(cuCtxCreate_v2(&c, 0, 0), CUDA_SUCCESS);
	CHECK_INT(cuMemAlloc_v2(&p, 2 * GiB), CUDA_SUCCESS);
	CHECK_INT(nvmlDeviceGetMemoryInfo(d, &m), NVML_SUCCESS);
	CHECK_INT(m.used, 2 * GiB);
	CHECK_INT(m.free, 0);
	CHECK_INT(cuMemFree_v2(p), CUDA_SUCCESS);
	nvmlShutdown();
}

int main(void)
{
	setenv("TESSERA_MOCK_GPUS", "2x8GiB", 1);
	/* devices listed by ordinal (no UUIDs) */
	dir = ft_setup("devices = 1\ndevice.0.memory_limit = 2GiB\n");
	char state[300];
	snprintf(state, sizeof(state), "%s/mock.state", dir);
	setenv("TESSERA_MOCK_STATE", state, 1);
	if (cuInit(0) != CUDA_SUCCESS)
		return 1;
	RUN(memory_info_shows_the_share);
	RUN(memory_info_counts_other_processes);
	ft_cleanup(dir);
	return testlib_done();
}
