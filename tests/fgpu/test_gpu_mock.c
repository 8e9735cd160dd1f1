/* The mock driver on its own: spec parsing, stable UUIDs, the ABI details
 * the shim relies on (cuGetProcAddress versions, NVML struct versions),
 * simulated time, and device usage shared between processes. */
#include <signal.h>
#include <sys/wait.h>

#include "gpu/mock/mockspec.h"
#include "fgpu/fgpu_test.h"
#include "testlib.h"

CUresult cuDeviceGetName(char *name, int len, CUdevice dev);
CUresult cuDeviceGetAttribute(int *pi, int attrib, CUdevice dev);
CUresult cuDriverGetVersion(int *v);
CUresult cuGetErrorString(CUresult e, const char **s);
CUresult cuGetErrorName(CUresult e, const char **s);
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count);
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned int len);
nvmlReturn_t nvmlSystemGetDriverVersion(char *v, unsigned int len);
const char *nvmlErrorString(nvmlReturn_t r);

static char dir[] = "/tmp/tessera-gpu-mock-XXXXXX";

TEST(spec_parsing)
{
	struct mock_spec s, s2;
	struct terr err;
	CHECK_INT(mock_spec_parse("2x80GiB:132,1x8GiB", &s, &err), 0);
	CHECK_INT(s.count, 3);
	CHECK_INT(s.dev[0].mem, 80LL * 1024 * 1024 * 1024);
	CHECK_INT(s.dev[1].sms, 132);
	CHECK_INT(s.dev[2].mem, 8LL * 1024 * 1024 * 1024);
	CHECK_INT(s.dev[2].sms, MOCK_DEFAULT_SMS);
	CHECK_INT(strlen(s.dev[0].uuid_str), 40);
	CHECK(strncmp(s.dev[0].uuid_str, "GPU-", 4) == 0);
	CHECK(strcmp(s.dev[0].uuid_str, s.dev[1].uuid_str) != 0);
	/* stable for a given spec, different for another */
	CHECK_INT(mock_spec_parse("2x80GiB:132,1x8GiB", &s2, &err), 0);
	CHECK_STR(s.dev[2].uuid_str, s2.dev[2].uuid_str);
	CHECK_INT(mock_spec_parse("2x80GiB:132,1x16GiB", &s2, &err), 0);
	CHECK(strcmp(s.dev[0].uuid_str, s2.dev[0].uuid_str) != 0);
	CHECK_INT(mock_spec_parse("1x1536m", &s, &err), 0);
	CHECK_INT(s.dev[0].mem, 1536LL * 1024 * 1024);
	CHECK_INT(mock_spec_parse("", &s, &err), 0);
	CHECK_INT(s.count, 0);
	CHECK(mock_spec_parse("2x", &s, &err) < 0);
	CHECK(mock_spec_parse("x8GiB", &s, &err) < 0);
	CHECK(mock_spec_parse("0x8GiB", &s, &err) < 0);
	CHECK(mock_spec_parse("1x8GiB:0", &s, &err) < 0);
	CHECK(mock_spec_parse("1x8GiB,", &s, &err) < 0);
	CHECK(mock_spec_parse("17x1GiB", &s, &err) < 0);
	CHECK(mock_spec_parse("1xlots", &s, &err) < 0);
}

TEST(cuda_devices)
{
	int n = 0, v = 0, sms = 0;
	char name[64];
	CHECK_INT(cuDeviceGetCount(&n), CUDA_SUCCESS);
	CHECK_INT(n, 2);
	CHECK_INT(cuDeviceGetName(name, sizeof(name), 0), CUDA_SUCCESS);
	CHECK_STR(name, MOCK_DEVICE_NAME);
	CHECK_INT(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 1), CUDA_SUCCESS);
	CHECK_INT(sms, 132);
	CHECK_INT(cuDriverGetVersion(&v), CUDA_SUCCESS);
	CHECK_INT(v, MOCK_CUDA_VERSION);
	CHECK_INT(cuDeviceGetName(name, sizeof(name), 2), CUDA_ERROR_INVALID_DEVICE);
	size_t t;
	CHECK_INT(cuDeviceTotalMem_v2(&t, 0), CUDA_SUCCESS);
	CHECK_INT(t, 4LL * 1024 * 1024 * 1024);
	const char *s;
	CHECK_INT(cuGetErrorString(CUDA_ERROR_OUT_OF_MEMORY, &s), CUDA_SUCCESS);
	CHECK_STR(s, "out of memory");
	CHECK_INT(cuGetErrorName(CUDA_ERROR_OUT_OF_MEMORY, &s), CUDA_SUCCESS);
	CHECK_STR(s, "CUDA_ERROR_OUT_OF_MEMORY");
	/* memory needs a context */
	CUdeviceptr p;
	CHECK_INT(cuMemAlloc_v2(&p, 1024), CUDA_ERROR_INVALID_CONTEXT);
}

TEST(cuda_memory_and_uuid_match_nvml)
{
	CUcontext c;
	CHECK_INT(cuCtxCreate_v2(&c, 0, 0), CUDA_SUCCESS);
	CUdeviceptr p;
	CHECK_INT(cuMemAlloc_v2(&p, 5LL * 1024 * 1024 * 1024), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_INT(cuMemAlloc_v2(&p, 1LL * 1024 * 1024 * 1024), CUDA_SUCCESS);
	size_t f, t;
	CHECK_INT(cuMemGetInfo_v2(&f, &t), CUDA_SUCCESS);
	CHECK_INT(f, 3LL * 1024 * 1024 * 1024);
	char cu_uuid[64], nv_uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
	ft_uuid(0, cu_uuid, sizeof(cu_uuid));
	nvmlDevice_t d;
	CHECK_INT(nvmlInit_v2(), NVML_SUCCESS);
	CHECK_INT(nvmlDeviceGetHandleByIndex_v2(0, &d), NVML_SUCCESS);
	CHECK_INT(nvmlDeviceGetUUID(d, nv_uuid, sizeof(nv_uuid)), NVML_SUCCESS);
	CHECK_STR(cu_uuid, nv_uuid);
	nvmlMemory_t m;
	CHECK_INT(nvmlDeviceGetMemoryInfo(d, &m), NVML_SUCCESS);
	CHECK_INT(m.used, 1LL * 1024 * 1024 * 1024);
	CHECK_INT(m.total, 4LL * 1024 * 1024 * 1024);
	nvmlMemory_v2_t m2 = { .version = nvmlMemory_v2 };
	CHECK_INT(nvmlDeviceGetMemoryInfo_v2(d, &m2), NVML_SUCCESS);
	CHECK_INT(m2.free, 3LL * 1024 * 1024 * 1024);
	m2.version = 0;
	CHECK_INT(nvmlDeviceGetMemoryInfo_v2(d, &m2), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
	char buf[8];
	CHECK_INT(nvmlDeviceGetUUID(d, buf, sizeof(buf)), NVML_ERROR_INSUFFICIENT_SIZE);
	char ver[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE];
	CHECK_INT(nvmlSystemGetDriverVersion(ver, sizeof(ver)), NVML_SUCCESS);
	CHECK_STR(ver, MOCK_DRIVER_VERSION);
	CHECK_STR(nvmlErrorString(NVML_ERROR_NOT_FOUND), "Not Found");
	CHECK_INT(cuMemFree_v2(p), CUDA_SUCCESS);
	CHECK_INT(nvmlDeviceGetMemoryInfo(d, &m), NVML_SUCCESS);
	CHECK_INT(m.used, 0);
	nvmlShutdown();
	CHECK_INT(cuCtxDestroy_v2(c), CUDA_SUCCESS);
}

TEST(usage_is_shared_between_processes)
{
	int fds[2];
	CHECK(pipe(fds) == 0);
	pid_t pid = fork();
	if (pid == 0) {
		CUcontext c;
		CUdeviceptr p;
		char r = cuCtxCreate_v2(&c, 0, 1) == CUDA_SUCCESS &&
			 cuMemAlloc_v2(&p, 3LL * 1024 * 1024 * 1024) == CUDA_SUCCESS ? 'y' : 'n';
		if (write(fds[1], &r, 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	char r = 0;
	CHECK(read(fds[0], &r, 1) == 1);
	CHECK_INT(r, 'y');
	CHECK_INT(tesseraMockUsedBytes(1), 3LL * 1024 * 1024 * 1024);
	CUcontext c;
	CUdeviceptr p;
	CHECK_INT(cuCtxCreate_v2(&c, 0, 1), CUDA_SUCCESS);
	CHECK_INT(cuMemAlloc_v2(&p, 2LL * 1024 * 1024 * 1024), CUDA_ERROR_OUT_OF_MEMORY);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	/* the driver frees a dead process's memory */
	CHECK_INT(tesseraMockUsedBytes(1), 0);
	CHECK_INT(cuMemAlloc_v2(&p, 2LL * 1024 * 1024 * 1024), CUDA_SUCCESS);
	CHECK_INT(cuMemFree_v2(p), CUDA_SUCCESS);
	CHECK_INT(cuCtxDestroy_v2(c), CUDA_SUCCESS);
	close(fds[0]);
	close(fds[1]);
}

TEST(proc_address_versions)
{
	void *p = NULL, *q = NULL;
	CUdriverProcAddressQueryResult st;
	CHECK_INT(cuGetProcAddress_v2("cuMemAlloc", &p, 12000, 0, &st), CUDA_SUCCESS);
	CHECK(p == (void *)cuMemAlloc_v2);
	CHECK_INT(cuGetProcAddress_v2("cuMemAlloc", &q, 2000, 0, &st), CUDA_SUCCESS);
	CHECK(q == (void *)cuMemAlloc);
	CHECK_INT(cuGetProcAddress_v2("cuLaunchKernel", &p, 12000,
				      CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st), CUDA_SUCCESS);
	CHECK(p == (void *)cuLaunchKernel_ptsz);
	CHECK_INT(cuGetProcAddress_v2("cuMemCreate", &p, 9000, 0, &st), CUDA_ERROR_NOT_FOUND);
	CHECK_INT(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
	CHECK_INT(cuGetProcAddress("cuNope", &p, 12000, 0), CUDA_ERROR_NOT_FOUND);
}

TEST(simulated_kernel_time)
{
	CUcontext c;
	CUstream s;
	CUevent a, b;
	CHECK_INT(cuCtxCreate_v2(&c, 0, 0), CUDA_SUCCESS);
	CHECK_INT(cuStreamCreate(&s, 0), CUDA_SUCCESS);
	CHECK_INT(cuEventCreate(&a, 0), CUDA_SUCCESS);
	CHECK_INT(cuEventCreate(&b, 0), CUDA_SUCCESS);
	uint64_t t0 = tesseraMockNowNs();
	CUfunction f = (CUfunction)(uintptr_t)0x1000;
	CHECK_INT(cuEventRecord(a, s), CUDA_SUCCESS);
	CHECK_INT(cuLaunchKernel(f, 500, 2, 1, 32, 1, 1, 0, s, NULL, NULL), CUDA_SUCCESS);  /* 1 ms */
	CHECK_INT(cuEventRecord(b, s), CUDA_SUCCESS);
	CHECK_INT(cuEventQuery(b), CUDA_ERROR_NOT_READY);
	float ms = 0;
	CHECK_INT(cuEventElapsedTime(&ms, a, b), CUDA_ERROR_NOT_READY);
	CHECK_INT(cuEventSynchronize(b), CUDA_SUCCESS);
	CHECK_INT(cuEventElapsedTime(&ms, a, b), CUDA_SUCCESS);
	CHECK(ms > 0.999f && ms < 1.001f);
	CHECK_INT(tesseraMockNowNs() - t0, 1000000);
	tesseraMockSleepNs(5000);
	CHECK_INT(tesseraMockNowNs() - t0, 1005000);
	CHECK_INT(cuLaunchKernel(NULL, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL), CUDA_ERROR_INVALID_HANDLE);
	CHECK_INT(cuLaunchKernel(f, 1, 1, 1, 2048, 1, 1, 0, s, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuCtxDestroy_v2(c), CUDA_SUCCESS);
}

int main(void)
{
	if (!mkdtemp(dir))
		return 2;
	char state[300];
	snprintf(state, sizeof(state), "%s/gpus.state", dir);
	setenv("TESSERA_MOCK_STATE", state, 1);
	setenv("TESSERA_MOCK_GPUS", "1x4GiB,1x4GiB:132", 1);
	RUN(spec_parsing);
	CHECK_INT(cuInit(0), CUDA_SUCCESS);
	RUN(cuda_devices);
	RUN(cuda_memory_and_uuid_match_nvml);
	RUN(usage_is_shared_between_processes);
	RUN(proc_address_versions);
	RUN(simulated_kernel_time);
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		return 2;
	return testlib_done();
}
