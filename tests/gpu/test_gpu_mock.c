/* The mock driver on its own: spec parsing, stable UUIDs, the ABI details
 * the shim relies on (cuGetProcAddress versions, NVML struct versions),
 * simulated time, device usage shared between processes, and the driver
 * behaviour the shim's accounting is checked against: pools that keep
 * freed memory until a synchronization, VMM handles that live while
 * mapped, stream capture, the special stream handles, graph memory nodes
 * and the graph allocator's reserve. */
#include <dlfcn.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "gpu/mock/mockspec.h"
#include "fgpu/fgpu_test.h"
#include "testlib.h"

CUresult cuDeviceGetName(char *name, int len, CUdevice dev);
CUresult cuDeviceGetAttribute(int *pi, int attrib, CUdevice dev);
CUresult cuDriverGetVersion(int *v);
CUresult cuGetErrorString(CUresult e, const char **s);
CUresult cuGetErrorName(CUresult e, const char **s);
CUresult cuGreenCtxGetDevResource(CUgreenCtx g, CUdevResource *res, CUdevResourceType type);
CUresult cuCtxGetDevResource(CUcontext c, CUdevResource *res, CUdevResourceType type);
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count);
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned int len);
nvmlReturn_t nvmlSystemGetDriverVersion(char *v, unsigned int len);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *count,
						     nvmlProcessInfo_t *infos);
const char *nvmlErrorString(nvmlReturn_t r);
/* Entry points beyond those of fgpu_test.h, with NVIDIA's signatures. */
CUresult cuCtxGetCurrent(CUcontext *pctx);
CUresult cuStreamDestroy_v2(CUstream s);
CUresult cuEventSynchronize(CUevent e);
CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool);
CUresult cuMemPoolDestroy(CUmemoryPool pool);
CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep);
CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value);
CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value);
CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment,
			     CUdeviceptr addr, unsigned long long flags);
CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size);
CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
		  CUmemGenericAllocationHandle handle, unsigned long long flags);
CUresult cuMemUnmap(CUdeviceptr ptr, size_t size);
CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr);
CUresult cuArrayCreate(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR_v1 *desc);
CUresult cuArray3DCreate(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR_v1 *desc);
CUresult cuStreamBeginCapture(CUstream s);
CUresult cuStreamBeginCapture_ptsz(CUstream s);
CUresult cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode mode);
CUresult cuStreamBeginCapture_v2_ptsz(CUstream s, CUstreamCaptureMode mode);
CUresult cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus *status);
CUresult cuStreamIsCapturing_ptsz(CUstream s, CUstreamCaptureStatus *status);
CUresult cuStreamEndCapture(CUstream s, CUgraph *graph);
CUresult cuStreamEndCapture_ptsz(CUstream s, CUgraph *graph);
CUresult cuGraphInstantiateWithFlags(CUgraphExec *exec, CUgraph graph,
				     unsigned long long flags);
CUresult cuGraphLaunch(CUgraphExec exec, CUstream s);
CUresult cuGraphLaunch_ptsz(CUgraphExec exec, CUstream s);
CUresult cuGraphDestroy(CUgraph graph);
CUresult cuGraphExecDestroy(CUgraphExec exec);
CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
				   unsigned int gridDimZ, unsigned int blockDimX,
				   unsigned int blockDimY, unsigned int blockDimZ,
				   unsigned int sharedMemBytes, CUstream hStream,
				   void **kernelParams);
CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gridDimX,
					unsigned int gridDimY, unsigned int gridDimZ,
					unsigned int blockDimX, unsigned int blockDimY,
					unsigned int blockDimZ, unsigned int sharedMemBytes,
					CUstream hStream, void **kernelParams);
CUresult cuStreamGetCtx(CUstream s, CUcontext *pctx);
CUresult cuStreamGetCtx_ptsz(CUstream s, CUcontext *pctx);
CUresult cuGraphGetNodes(CUgraph graph, CUgraphNode *nodes, size_t *numNodes);
CUresult cuGraphNodeGetType(CUgraphNode node, CUgraphNodeType *type);
CUresult cuGraphMemAllocNodeGetParams(CUgraphNode node, CUDA_MEM_ALLOC_NODE_PARAMS *params);
CUresult cuGraphMemFreeNodeGetParams(CUgraphNode node, CUdeviceptr *dptr);
CUresult cuGraphChildGraphNodeGetGraph(CUgraphNode node, CUgraph *graph);
CUresult cuGraphInstantiate(CUgraphExec *exec, CUgraph graph, CUgraphNode *errNode,
			    char *logBuffer, size_t bufferSize);
CUresult cuGraphInstantiate_v2(CUgraphExec *exec, CUgraph graph, CUgraphNode *errNode,
			       char *logBuffer, size_t bufferSize);
CUresult cuGraphInstantiateWithParams(CUgraphExec *exec, CUgraph graph,
				      CUDA_GRAPH_INSTANTIATE_PARAMS *params);
CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *exec, CUgraph graph,
					   CUDA_GRAPH_INSTANTIATE_PARAMS *params);
CUresult cuGraphUpload(CUgraphExec exec, CUstream s);
CUresult cuGraphUpload_ptsz(CUgraphExec exec, CUstream s);
CUresult cuDeviceGraphMemTrim(CUdevice dev);
CUresult cuDeviceGetGraphMemAttribute(CUdevice dev, CUgraphMem_attribute attr, void *value);
CUresult cuDeviceSetGraphMemAttribute(CUdevice dev, CUgraphMem_attribute attr, void *value);

#define KiB 1024LL
/* CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES .. _ALLOW_INTERNAL_DEPENDENCIES */
#define POOL_REUSE_FIRST 1
#define POOL_REUSE_LAST 3

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
	/* As Debian's driver 550.163.01 answers (docs/fgpu.md, "The CUDA
	 * runtime on the mock"): _v2 says "not found" in symbolStatus and
	 * succeeds with NULL, the first form fails and leaves *pfn alone. */
	p = &st;
	CHECK_INT(cuGetProcAddress_v2("cuMemCreate", &p, 9000, 0, &st), CUDA_SUCCESS);
	CHECK_INT(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
	CHECK(p == NULL);
	p = &st;
	CHECK_INT(cuGetProcAddress_v2("cuNope", &p, 12000, 0, NULL), CUDA_SUCCESS);
	CHECK(p == NULL);
	CHECK_INT(cuGetProcAddress_v2("", &p, 0, 0, &st), CUDA_SUCCESS);
	CHECK_INT(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
	p = &st;
	CHECK_INT(cuGetProcAddress("cuNope", &p, 12000, 0), CUDA_ERROR_NOT_FOUND);
	CHECK(p == &st);
	CHECK_INT(cuGetProcAddress("cuMemCreate", &p, 9000, 0), CUDA_ERROR_NOT_FOUND);
	CHECK(p == &st);
	/* both stream flags: the per-thread variant; other flags are refused */
	CHECK_INT(cuGetProcAddress_v2("cuLaunchKernel", &p, 12000,
				      CU_GET_PROC_ADDRESS_LEGACY_STREAM |
				      CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st), CUDA_SUCCESS);
	CHECK(p == (void *)cuLaunchKernel_ptsz);
	CHECK_INT(cuGetProcAddress_v2("cuLaunchKernel", &p, 12000, 4, &st), CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuGetProcAddress("cuLaunchKernel", &p, 12000, 4), CUDA_ERROR_INVALID_VALUE);
	/* the version is compared unsigned: -1 is the newest */
	CHECK_INT(cuGetProcAddress_v2("cuMemAlloc", &p, -1, 0, &st), CUDA_SUCCESS);
	CHECK(p == (void *)cuMemAlloc_v2);
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

TEST(context_limits_take_memory_and_contexts_take_their_allocations)
{
	CUcontext c;
	int64_t base = tesseraMockUsedBytes(0);
	CHECK_INT(cuCtxCreate_v2(&c, 0, 0), CUDA_SUCCESS);
	size_t v = 0;
	int per_sm = 0;
	CHECK_INT(cuDeviceGetAttribute(&per_sm, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR,
				       0), CUDA_SUCCESS);
	CHECK_INT(per_sm, 2048);
	CHECK_INT(cuCtxGetLimit(&v, CU_LIMIT_STACK_SIZE), CUDA_SUCCESS);
	CHECK_INT(v, 1024);
	CHECK_INT(cuCtxGetLimit(&v, CU_LIMIT_PRINTF_FIFO_SIZE), CUDA_SUCCESS);
	CHECK_INT(v, 1 << 20);
	CHECK_INT(cuCtxGetLimit(&v, CU_LIMIT_MALLOC_HEAP_SIZE), CUDA_SUCCESS);
	CHECK_INT(v, 8 << 20);
	CHECK_INT(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, (8 << 20) + GiB), CUDA_SUCCESS);
	CHECK_INT(tesseraMockUsedBytes(0), base + GiB);
	CHECK_INT(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 5 * GiB), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_INT(cuCtxGetLimit(&v, CU_LIMIT_MALLOC_HEAP_SIZE), CUDA_SUCCESS);
	CHECK_INT(v, (8 << 20) + GiB);
	/* the stack is for every resident thread: 2048 a SM, 108 SMs */
	CHECK_INT(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 2048), CUDA_SUCCESS);
	CHECK_INT(tesseraMockUsedBytes(0), base + GiB + 1024LL * 2048 * 108);
	CHECK_INT(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 1 << 20), CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuCtxSetLimit((CUlimit)99, 1), CUDA_ERROR_UNSUPPORTED_LIMIT);
	CHECK_INT(cuCtxGetLimit(&v, (CUlimit)99), CUDA_ERROR_UNSUPPORTED_LIMIT);
	/* what the context holds goes with it */
	CUdeviceptr p;
	CHECK_INT(cuMemAlloc_v2(&p, 100 * MiB), CUDA_SUCCESS);
	CHECK_INT(cuCtxDestroy_v2(c), CUDA_SUCCESS);
	CHECK_INT(tesseraMockUsedBytes(0), base);
	CHECK_INT(cuMemFree_v2(p), CUDA_ERROR_INVALID_VALUE);
	/* the primary context: a reset empties it and keeps it retained */
	unsigned flags = 1;
	int active = -1;
	CHECK_INT(cuDevicePrimaryCtxGetState(0, &flags, &active), CUDA_SUCCESS);
	CHECK_INT(active, 0);
	CHECK_INT(cuDevicePrimaryCtxRetain(&c, 0), CUDA_SUCCESS);
	CHECK_INT(cuCtxSetCurrent(c), CUDA_SUCCESS);
	CHECK_INT(cuMemAlloc_v2(&p, 100 * MiB), CUDA_SUCCESS);
	CHECK_INT(cuCtxSetLimit(CU_LIMIT_PRINTF_FIFO_SIZE, 64 << 20), CUDA_SUCCESS);
	CHECK_INT(cuDevicePrimaryCtxReset_v2(0), CUDA_SUCCESS);
	CHECK_INT(tesseraMockUsedBytes(0), base);
	CHECK_INT(cuCtxGetLimit(&v, CU_LIMIT_PRINTF_FIFO_SIZE), CUDA_SUCCESS);
	CHECK_INT(v, 1 << 20);
	CHECK_INT(cuDevicePrimaryCtxGetState(0, &flags, &active), CUDA_SUCCESS);
	CHECK_INT(active, 1);
	CHECK_INT(cuDevicePrimaryCtxRelease_v2(0), CUDA_SUCCESS);
	CHECK_INT(cuDevicePrimaryCtxGetState(0, &flags, &active), CUDA_SUCCESS);
	CHECK_INT(active, 0);
	CHECK_INT(cuDevicePrimaryCtxGetState(0, NULL, &active), CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuCtxSetCurrent(NULL), CUDA_SUCCESS);
}

CUresult cuModuleLoadData(CUmodule *m, const void *image);
CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name);
CUresult cuModuleUnload(CUmodule m);

TEST(kernels_report_their_local_memory_and_launches_grow_the_stack)
{
	static const char ptx[] =
		".version 6.0\n.target sm_50\n.address_size 64\n"
		".visible .entry flat()\n{\n\tret;\n}\n"
		".visible .entry deep()\n{\n\t.local .align 4 .b8 a[1024];\n"
		"\t.local .align 8 .b8 b[3072];\n\tst.local.u32 [a], 1;\n\tret;\n}\n"
		".visible .entry huge()\n{\n\t.local .align 4 .b8 c[262144];\n\tret;\n}\n";
	CUcontext c;
	CUmodule m;
	CUfunction flat, deep, huge;
	int64_t base = tesseraMockUsedBytes(0);
	CHECK_INT(cuCtxCreate_v2(&c, 0, 0), CUDA_SUCCESS);
	CHECK_INT(cuModuleLoadData(&m, ptx), CUDA_SUCCESS);
	CHECK_INT(cuModuleGetFunction(&flat, m, "flat"), CUDA_SUCCESS);
	CHECK_INT(cuModuleGetFunction(&deep, m, "deep"), CUDA_SUCCESS);
	CHECK_INT(cuModuleGetFunction(&huge, m, "huge"), CUDA_SUCCESS);
	int v = -1;
	CHECK_INT(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, flat), CUDA_SUCCESS);
	CHECK_INT(v, 0);
	/* declarations add up; a st.local is no declaration */
	CHECK_INT(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, deep), CUDA_SUCCESS);
	CHECK_INT(v, 4096);
	CHECK_INT(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, deep),
		  CUDA_SUCCESS);
	CHECK_INT(v, 1024);
	CHECK_INT(cuFuncGetAttribute(&v, 99, deep), CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuFuncGetAttribute(NULL, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, deep),
		  CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, (CUfunction)&v),
		  CUDA_ERROR_INVALID_HANDLE);
	/* the stack grows for the kernel that needs it, for every resident
	 * thread (2048 a SM, 108 SMs), and stays grown */
	size_t stack = 0;
	CHECK_INT(cuLaunchKernel(flat, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL), CUDA_SUCCESS);
	CHECK_INT(tesseraMockUsedBytes(0), base);
	CHECK_INT(cuLaunchKernel(deep, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL), CUDA_SUCCESS);
	CHECK_INT(cuCtxGetLimit(&stack, CU_LIMIT_STACK_SIZE), CUDA_SUCCESS);
	CHECK_INT(stack, 4096);
	CHECK_INT(tesseraMockUsedBytes(0), base + 3072LL * 2048 * 108);
	CHECK_INT(cuLaunchKernel(flat, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL), CUDA_SUCCESS);
	CHECK_INT(cuCtxGetLimit(&stack, CU_LIMIT_STACK_SIZE), CUDA_SUCCESS);
	CHECK_INT(stack, 4096);
	/* 256 KiB a thread does not fit the device: out of memory, and the
	 * stack stays as it was */
	CHECK_INT(cuLaunchKernel(huge, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL),
		  CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_INT(cuCtxGetLimit(&stack, CU_LIMIT_STACK_SIZE), CUDA_SUCCESS);
	CHECK_INT(stack, 4096);
	CHECK_INT(tesseraMockUsedBytes(0), base + 3072LL * 2048 * 108);
	CHECK_INT(cuModuleUnload(m), CUDA_SUCCESS);
	CHECK_INT(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, deep),
		  CUDA_ERROR_INVALID_HANDLE);
	CHECK_INT(cuCtxDestroy_v2(c), CUDA_SUCCESS);
	CHECK_INT(tesseraMockUsedBytes(0), base);
}

CUresult cuLibraryLoadData(CUlibrary *l, const void *code, void *jitOptions,
			   void **jitOptionsValues, unsigned int numJitOptions,
			   void *libraryOptions, void **libraryOptionValues,
			   unsigned int numLibraryOptions);
CUresult cuLibraryGetKernel(CUkernel *k, CUlibrary l, const char *name);
CUresult cuKernelGetFunction(CUfunction *f, CUkernel k);

/* A module's .global arrays take device memory when it is loaded, as
 * __device__ variables do on the real driver: memory no allocation call
 * asked for. Unloading or the context ending gives it back. */
TEST(modules_take_their_globals_from_the_device)
{
	static const char ptx[] =
		".version 6.0\n.target sm_50\n.address_size 64\n"
		".global .align 8 .b8 table[1048576];\n.global .align 4 .b8 counts[4096];\n"
		".visible .entry k()\n{\n\tld.global.u32 %r1, [counts];\n\tret;\n}\n";
	static const char too_big[] =
		".version 6.0\n.target sm_50\n.address_size 64\n"
		".global .align 8 .b8 all[8589934592];\n.visible .entry k()\n{\n\tret;\n}\n";
	CUcontext c;
	CUmodule m, m2;
	int64_t base = tesseraMockUsedBytes(0);
	CHECK_INT(cuCtxCreate_v2(&c, 0, 0), CUDA_SUCCESS);
	int64_t ctx = tesseraMockUsedBytes(0);
	CHECK_INT(cuModuleLoadData(&m, ptx), CUDA_SUCCESS);
	CHECK_INT(tesseraMockUsedBytes(0), ctx + 1048576 + 4096);
	CHECK_INT(cuModuleUnload(m), CUDA_SUCCESS);
	CHECK_INT(tesseraMockUsedBytes(0), ctx);
	/* more than the device has: out of memory, nothing loaded */
	CHECK_INT(cuModuleLoadData(&m, too_big), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_INT(tesseraMockUsedBytes(0), ctx);
	/* the context takes its modules with it */
	CHECK_INT(cuModuleLoadData(&m, ptx), CUDA_SUCCESS);
	CHECK_INT(cuModuleLoadData(&m2, ptx), CUDA_SUCCESS);
	CHECK_INT(tesseraMockUsedBytes(0), ctx + 2 * (1048576 + 4096));
	CHECK_INT(cuCtxDestroy_v2(c), CUDA_SUCCESS);
	CHECK_INT(tesseraMockUsedBytes(0), base);
}

/* Self-exec'd modes of this test program, for the PID namespace test:
 * "--hold FD" allocates 1 GiB on device 0, says 'y' on FD and waits;
 * "--observe" prints "PID BYTES" for each process NVML lists on device 0. */
static int mock_hold(int fd)
{
	CUcontext c;
	CUdeviceptr p;
	char r = cuInit(0) == CUDA_SUCCESS && cuCtxCreate_v2(&c, 0, 0) == CUDA_SUCCESS &&
		 cuMemAlloc_v2(&p, 1LL << 30) == CUDA_SUCCESS ? 'y' : 'n';
	if (write(fd, &r, 1) != 1)
		return 1;
	pause();
	return 0;
}

static int mock_observe(void)
{
	nvmlDevice_t d;
	nvmlProcessInfo_t procs[8];
	unsigned int n = 8;
	if (nvmlInit_v2() != NVML_SUCCESS || nvmlDeviceGetHandleByIndex_v2(0, &d) != NVML_SUCCESS ||
	    nvmlDeviceGetComputeRunningProcesses_v3(d, &n, procs) != NVML_SUCCESS)
		return 1;
	for (unsigned int i = 0; i < n; i++)
		printf("%u %llu\n", procs[i].pid, procs[i].usedGpuMemory);
	return 0;
}

/* The agent reads a session's usage from the host, where the pids the
 * session's processes recorded are other processes or none: it must see
 * them, and must not drop them as dead. The holder runs as pid 1 of a PID
 * namespace with its own /proc, as in a container. */
TEST(another_pid_namespace_reads_usage_without_dropping_it)
{
	char self[PATH_MAX], state[300];
	ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
	CHECK(len > 0);
	self[len > 0 ? len : 0] = '\0';
	snprintf(state, sizeof(state), "%s/ns.state", dir);
	int fds[2];
	CHECK(pipe(fds) == 0);
	pid_t c = fork();
	if (c == 0) {
		char r = 's';
		if (unshare(CLONE_NEWPID | CLONE_NEWNS) != 0) {
			(void)!write(fds[1], &r, 1);   /* not allowed here: skip */
			_exit(0);
		}
		pid_t g = fork();
		if (g == 0) {
			char fd[16];
			snprintf(fd, sizeof(fd), "%d", fds[1]);
			if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 ||
			    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
			    mount("proc", "/proc", "proc", 0, NULL) != 0)
				_exit(3);
			setenv("TESSERA_MOCK_STATE", state, 1);
			execl(self, self, "--hold", fd, (char *)NULL);
			_exit(4);
		}
		int st = 0;
		waitpid(g, &st, 0);
		_exit(0);
	}
	char r = 0;
	CHECK(read(fds[0], &r, 1) == 1);
	if (r == 's') {
		printf("  (skipped: no permission to make a PID namespace)\n");
		waitpid(c, NULL, 0);
		close(fds[0]);
		close(fds[1]);
		return;
	}
	CHECK_INT(r, 'y');
	char cmd[PATH_MAX + 400];
	snprintf(cmd, sizeof(cmd), "TESSERA_MOCK_STATE='%s' '%s' --observe", state, self);
	for (int round = 0; round < 2; round++) {
		FILE *f = popen(cmd, "r");
		CHECK(f != NULL);
		unsigned pid = 0;
		unsigned long long bytes = 0;
		CHECK_INT(f && fscanf(f, "%u %llu", &pid, &bytes) == 2, 1);
		CHECK_INT(pid, 1);   /* as the holder's namespace names it */
		CHECK_INT(bytes, 1LL << 30);
		if (f)
			CHECK_INT(pclose(f), 0);
	}
	/* an observer with another spec must not wipe the session's usage */
	char other[PATH_MAX + 400];
	snprintf(other, sizeof(other), "TESSERA_MOCK_GPUS=2x4GiB TESSERA_MOCK_STATE='%s' '%s' --observe",
		 state, self);
	FILE *o = popen(other, "r");
	CHECK(o != NULL);
	if (o)
		CHECK_INT(pclose(o), 0);
	FILE *f = popen(cmd, "r");
	unsigned pid = 0;
	unsigned long long bytes = 0;
	CHECK_INT(f && fscanf(f, "%u %llu", &pid, &bytes) == 2, 1);
	CHECK_INT(bytes, 1LL << 30);
	if (f)
		pclose(f);
	/* the holder dies with its parent (PR_SET_PDEATHSIG) */
	kill(c, SIGKILL);
	waitpid(c, NULL, 0);
	close(fds[0]);
	close(fds[1]);
}

TEST(libraries_load_without_a_context_and_launch_their_kernels)
{
	static const char ptx[] =
		".version 6.0\n.target sm_50\n.address_size 64\n"
		".visible .entry deep()\n{\n\t.local .align 4 .b8 a[4096];\n\tret;\n}\n";
	CUlibrary l;
	CUkernel k;
	CUfunction f;
	CUcontext c;
	int v = -1;
	int64_t base = tesseraMockUsedBytes(0);
	CHECK_INT(cuCtxSetCurrent(NULL), CUDA_SUCCESS);
	CHECK_INT(cuLibraryLoadData(&l, "no kernels here", NULL, NULL, 0, NULL, NULL, 0),
		  CUDA_ERROR_INVALID_IMAGE);
	CHECK_INT(cuLibraryLoadData(&l, ptx, NULL, NULL, 1, NULL, NULL, 0),
		  CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuLibraryLoadData(&l, ptx, NULL, NULL, 0, NULL, NULL, 0), CUDA_SUCCESS);
	CHECK_INT(cuLibraryGetKernel(&k, l, "shallow"), CUDA_ERROR_NOT_FOUND);
	CHECK_INT(cuLibraryGetKernel(&k, l, "deep"), CUDA_SUCCESS);
	/* a kernel is asked through cuKernelGetAttribute, on any device */
	CHECK_INT(cuKernelGetAttribute(&v, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, k, 0),
		  CUDA_SUCCESS);
	CHECK_INT(v, 4096);
	CHECK_INT(cuKernelGetAttribute(&v, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, k, 7),
		  CUDA_ERROR_INVALID_DEVICE);
	CHECK_INT(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, (CUfunction)k),
		  CUDA_ERROR_INVALID_HANDLE);
	/* its function exists in a context */
	CHECK_INT(cuKernelGetFunction(&f, k), CUDA_ERROR_INVALID_CONTEXT);
	CHECK_INT(cuCtxCreate_v2(&c, 0, 0), CUDA_SUCCESS);
	CHECK_INT(cuKernelGetFunction(&f, k), CUDA_SUCCESS);
	CHECK_INT(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, f), CUDA_SUCCESS);
	CHECK_INT(v, 4096);
	CHECK_INT(cuKernelGetAttribute(&v, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, (CUkernel)f, 0),
		  CUDA_ERROR_INVALID_HANDLE);
	/* cuLaunchKernel takes the kernel itself, and grows the stack for it */
	size_t stack = 0;
	CHECK_INT(cuLaunchKernel((CUfunction)k, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL),
		  CUDA_SUCCESS);
	CHECK_INT(cuCtxGetLimit(&stack, CU_LIMIT_STACK_SIZE), CUDA_SUCCESS);
	CHECK_INT(stack, 4096);
	CHECK_INT(tesseraMockUsedBytes(0), base + 3072LL * 2048 * 108);
	CHECK_INT(cuLibraryUnload(l), CUDA_SUCCESS);
	CHECK_INT(cuKernelGetAttribute(&v, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, k, 0),
		  CUDA_ERROR_INVALID_HANDLE);
	CHECK_INT(cuLibraryUnload(NULL), CUDA_ERROR_INVALID_HANDLE);
	CHECK_INT(cuCtxDestroy_v2(c), CUDA_SUCCESS);
	CHECK_INT(tesseraMockUsedBytes(0), base);
}

/* A library has no context: its __device__ variables are placed in each
 * context that uses one of its kernels (asked for its function, or
 * launched), once, and leave with that context or the library. */
TEST(library_globals_are_placed_in_each_context_that_uses_them)
{
	static const char ptx[] =
		".version 6.0\n.target sm_50\n.address_size 64\n"
		".global .align 8 .b8 table[2097152];\n"
		".visible .entry k()\n{\n\tret;\n}\n";
	static const char too_big[] =
		".version 6.0\n.target sm_50\n.address_size 64\n"
		".global .align 8 .b8 all[8589934592];\n.visible .entry k()\n{\n\tret;\n}\n";
	CUlibrary l, big;
	CUkernel k, kb;
	CUfunction f;
	CUcontext c1, c2;
	int64_t base = tesseraMockUsedBytes(0);
	CHECK_INT(cuCtxSetCurrent(NULL), CUDA_SUCCESS);
	CHECK_INT(cuLibraryLoadData(&l, ptx, NULL, NULL, 0, NULL, NULL, 0), CUDA_SUCCESS);
	CHECK_INT(cuLibraryGetKernel(&k, l, "k"), CUDA_SUCCESS);
	CHECK_INT(tesseraMockUsedBytes(0), base);   /* no context yet */
	CHECK_INT(cuCtxCreate_v2(&c1, 0, 0), CUDA_SUCCESS);
	int64_t one = tesseraMockUsedBytes(0);
	CHECK_INT(cuKernelGetFunction(&f, k), CUDA_SUCCESS);
	CHECK_INT(tesseraMockUsedBytes(0), one + 2097152);
	CHECK_INT(cuLaunchKernel((CUfunction)k, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL), CUDA_SUCCESS);
	CHECK_INT(cuKernelGetFunction(&f, k), CUDA_SUCCESS);
	CHECK_INT(tesseraMockUsedBytes(0), one + 2097152);   /* once per context */
	/* a second context loads it again, by launching it */
	CHECK_INT(cuCtxCreate_v2(&c2, 0, 0), CUDA_SUCCESS);
	int64_t two = tesseraMockUsedBytes(0);
	CHECK_INT(cuLaunchKernel((CUfunction)k, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL), CUDA_SUCCESS);
	CHECK_INT(tesseraMockUsedBytes(0), two + 2097152);
	/* the context takes its copy; the library stays usable elsewhere */
	CHECK_INT(cuCtxDestroy_v2(c2), CUDA_SUCCESS);
	CHECK_INT(tesseraMockUsedBytes(0), one + 2097152);
	CHECK_INT(cuCtxSetCurrent(c1), CUDA_SUCCESS);
	/* variables that do not fit: the use fails, nothing is placed */
	CHECK_INT(cuLibraryLoadData(&big, too_big, NULL, NULL, 0, NULL, NULL, 0), CUDA_SUCCESS);
	CHECK_INT(cuLibraryGetKernel(&kb, big, "k"), CUDA_SUCCESS);
	CHECK_INT(cuKernelGetFunction(&f, kb), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_INT(cuLaunchKernel((CUfunction)kb, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL),
		  CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_INT(tesseraMockUsedBytes(0), one + 2097152);
	CHECK_INT(cuLibraryUnload(big), CUDA_SUCCESS);
	/* unloading the library gives back every context's copy */
	CHECK_INT(cuLibraryUnload(l), CUDA_SUCCESS);
	CHECK_INT(tesseraMockUsedBytes(0), one);
	CHECK_INT(cuCtxDestroy_v2(c1), CUDA_SUCCESS);
	CHECK_INT(tesseraMockUsedBytes(0), base);
}

TEST(green_contexts_partition_the_sms)
{
	CUdevResource all, part[2], rest;
	CHECK_INT(cuDeviceGetDevResource(1, &all, CU_DEV_RESOURCE_TYPE_SM), CUDA_SUCCESS);
	CHECK_INT(all.type, CU_DEV_RESOURCE_TYPE_SM);
	CHECK_INT(all.sm.smCount, 132);
	CHECK_INT(all.sm.minSmPartitionSize, 8);
	CHECK_INT(cuDeviceGetDevResource(1, &all, (CUdevResourceType)7),
		  CUDA_ERROR_INVALID_RESOURCE_TYPE);
	CHECK_INT(cuDeviceGetDevResource(1, &all, CU_DEV_RESOURCE_TYPE_SM), CUDA_SUCCESS);
	/* 30 SMs asked: groups of 32, four of them fit; asking none counts */
	unsigned n = 0;
	CHECK_INT(cuDevSmResourceSplitByCount(NULL, &n, &all, NULL, 0, 30), CUDA_SUCCESS);
	CHECK_INT(n, 4);
	n = 2;
	CHECK_INT(cuDevSmResourceSplitByCount(part, &n, &all, &rest, 0, 30), CUDA_SUCCESS);
	CHECK_INT(n, 2);
	CHECK_INT(part[0].sm.smCount, 32);
	CHECK_INT(rest.sm.smCount, 132 - 64);
	CHECK_INT(cuDevSmResourceSplitByCount(part, &n, &all, &rest, 0, 200),
		  CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION);
	CUdevResourceDesc desc;
	CHECK_INT(cuDevResourceGenerateDesc(&desc, part, 1), CUDA_SUCCESS);
	CUgreenCtx g;
	CHECK_INT(cuGreenCtxCreate(&g, desc, 1, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuGreenCtxCreate(&g, desc, 0, CU_GREEN_CTX_DEFAULT_STREAM),
		  CUDA_ERROR_INVALID_DEVICE);
	CHECK_INT(cuGreenCtxCreate(&g, desc, 1, CU_GREEN_CTX_DEFAULT_STREAM), CUDA_SUCCESS);
	CUdevResource mine;
	CHECK_INT(cuGreenCtxGetDevResource(g, &mine, CU_DEV_RESOURCE_TYPE_SM), CUDA_SUCCESS);
	CHECK_INT(mine.sm.smCount, 32);
	CUcontext gc;
	CHECK_INT(cuCtxFromGreenCtx(&gc, g), CUDA_SUCCESS);
	CHECK_INT(cuCtxGetDevResource(gc, &mine, CU_DEV_RESOURCE_TYPE_SM), CUDA_SUCCESS);
	CHECK_INT(mine.sm.smCount, 32);
	CUstream s;
	CHECK_INT(cuGreenCtxStreamCreate(&s, g, 0, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuGreenCtxStreamCreate(&s, g, CU_STREAM_NON_BLOCKING, 0), CUDA_SUCCESS);
	/* 32 blocks take 32 us on the whole device, 132/32 times that here */
	CHECK_INT(cuCtxSetCurrent(gc), CUDA_SUCCESS);
	uint64_t t0 = tesseraMockNowNs();
	CHECK_INT(cuLaunchKernel((CUfunction)(uintptr_t)0x1000, 32, 1, 1, 32, 1, 1, 0, s, NULL, NULL),
		  CUDA_SUCCESS);
	CHECK_INT(cuStreamSynchronize(s), CUDA_SUCCESS);
	CHECK_INT(tesseraMockNowNs() - t0, 32000 * 132 / 32);
	CHECK_INT(cuCtxDestroy_v2(gc), CUDA_ERROR_INVALID_CONTEXT);   /* not that way */
	CHECK_INT(cuStreamDestroy_v2(s), CUDA_SUCCESS);
	CHECK_INT(cuGreenCtxDestroy(g), CUDA_SUCCESS);
	CHECK_INT(cuCtxSetCurrent(NULL), CUDA_SUCCESS);
}

/* A cuuint64_t pool attribute, or -1 when the driver refuses. */
static long long pool_attr(CUmemoryPool pool, CUmemPool_attribute attr)
{
	cuuint64_t v = 0;
	return cuMemPoolGetAttribute(pool, attr, &v) == CUDA_SUCCESS ? (long long)v : -1;
}

static CUmemoryPool new_pool(int dev)
{
	CUmemPoolProps props;
	memset(&props, 0, sizeof(props));
	props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
	props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	props.location.id = dev;
	CUmemoryPool pool = NULL;
	CHECK_INT(cuMemPoolCreate(&pool, &props), CUDA_SUCCESS);
	return pool;
}

static const CUfunction kernel = (CUfunction)(uintptr_t)0x1000;

TEST(pool_grows_in_grains_and_reuses_its_reserve)
{
	CUcontext c;
	CUstream s;
	CHECK_INT(cuCtxCreate_v2(&c, 0, 0), CUDA_SUCCESS);
	CHECK_INT(cuStreamCreate(&s, 0), CUDA_SUCCESS);
	CUmemoryPool pool = NULL, def = NULL;
	CHECK_INT(cuDeviceGetMemPool(&pool, 0), CUDA_SUCCESS);
	CHECK_INT(cuDeviceGetDefaultMemPool(&def, 0), CUDA_SUCCESS);
	CHECK(pool == def);
	CHECK_INT(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 0);
	CHECK_INT(pool_attr(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), 0);
	long long base = tesseraMockUsedBytes(0);
	CUdeviceptr a = 0, b = 0, d = 0;
	/* the device gives the pool whole 2 MiB grains */
	CHECK_INT(cuMemAllocAsync(&a, 1 * MiB, s), CUDA_SUCCESS);
	CHECK_INT(tesseraMockUsedBytes(0), base + 2 * MiB);
	CHECK_INT(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 2 * MiB);
	CHECK_INT(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 1 * MiB);
	/* the spare part of the reserve serves this one */
	CHECK_INT(cuMemAllocAsync(&b, 512 * KiB, s), CUDA_SUCCESS);
	CHECK_INT(tesseraMockUsedBytes(0), base + 2 * MiB);
	/* 3 MiB with 512 KiB spare: grows by 2.5 MiB, rounded up to 4 */
	CHECK_INT(cuMemAllocAsync(&d, 3 * MiB, s), CUDA_SUCCESS);
	CHECK_INT(tesseraMockUsedBytes(0), base + 6 * MiB);
	CHECK_INT(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 4 * MiB + 512 * KiB);
	CHECK(a != b && b != d && a != d);
	/* freed blocks stay in the pool, not on the device... */
	CHECK_INT(cuMemFreeAsync(b, s), CUDA_SUCCESS);
	CHECK_INT(cuMemFreeAsync(d, s), CUDA_SUCCESS);
	CHECK_INT(tesseraMockUsedBytes(0), base + 6 * MiB);
	CHECK_INT(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 1 * MiB);
	/* ...and serve the next allocation without growth */
	CHECK_INT(cuMemAllocAsync(&d, 4 * MiB, s), CUDA_SUCCESS);
	CHECK_INT(tesseraMockUsedBytes(0), base + 6 * MiB);
	CHECK_INT(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH), 5 * MiB);
	CHECK_INT(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH), 6 * MiB);
	/* a growth the device cannot give fails and changes nothing */
	CHECK_INT(cuMemAllocAsync(&b, 4 * GiB, s), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_INT(tesseraMockUsedBytes(0), base + 6 * MiB);
	CHECK_INT(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 6 * MiB);
	CHECK_INT(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 5 * MiB);
	/* synchronizing (threshold 0) gives back all but what is in use */
	CHECK_INT(cuMemFreeAsync(d, s), CUDA_SUCCESS);
	CHECK_INT(tesseraMockUsedBytes(0), base + 6 * MiB);
	CHECK_INT(cuStreamSynchronize(s), CUDA_SUCCESS);
	CHECK_INT(tesseraMockUsedBytes(0), base + 2 * MiB);
	CHECK_INT(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 2 * MiB);
	/* cuMemFree waits for the device, so the pool releases at once */
	CHECK_INT(cuMemFree_v2(a), CUDA_SUCCESS);
	CHECK_INT(tesseraMockUsedBytes(0), base);
	CHECK_INT(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 0);
	CHECK_INT(cuMemFreeAsync(a, s), CUDA_ERROR_INVALID_VALUE);
	/* high marks stay until reset, and resetting takes only 0 */
	CHECK_INT(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH), 5 * MiB);
	cuuint64_t zero = 0, one = 1;
	CHECK_INT(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &one),
		  CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH), 5 * MiB);
	CHECK_INT(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &zero), CUDA_SUCCESS);
	CHECK_INT(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH), 0);
	CHECK_INT(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &zero),
		  CUDA_SUCCESS);
	CHECK_INT(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH), 0);
	/* the current amounts are read-only */
	CHECK_INT(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &zero),
		  CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &zero),
		  CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuStreamDestroy_v2(s), CUDA_SUCCESS);
	CHECK_INT(cuCtxDestroy_v2(c), CUDA_SUCCESS);
}

TEST(pool_threshold_trim_and_attributes)
{
	CUcontext c;
	CUstream s;
	CUevent e;
	CHECK_INT(cuCtxCreate_v2(&c, 0, 0), CUDA_SUCCESS);
	CHECK_INT(cuStreamCreate(&s, 0), CUDA_SUCCESS);
	CHECK_INT(cuEventCreate(&e, 0), CUDA_SUCCESS);
	CUmemoryPool pool = new_pool(0);
	long long base = tesseraMockUsedBytes(0);
	cuuint64_t thr = 5 * MiB;
	CHECK_INT(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &thr),
		  CUDA_SUCCESS);
	CHECK_INT(pool_attr(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), 5 * MiB);
	CUdeviceptr a = 0;
	CHECK_INT(cuMemAllocFromPoolAsync(&a, 9 * MiB, pool, s), CUDA_SUCCESS);
	CHECK_INT(tesseraMockUsedBytes(0), base + 10 * MiB);
	CHECK_INT(cuMemFreeAsync(a, s), CUDA_SUCCESS);
	CHECK_INT(tesseraMockUsedBytes(0), base + 10 * MiB);
	/* kept up to the threshold, in whole grains */
	CHECK_INT(cuCtxSynchronize(), CUDA_SUCCESS);
	CHECK_INT(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 6 * MiB);
	CHECK_INT(tesseraMockUsedBytes(0), base + 6 * MiB);
	/* a threshold above the reserve keeps all of it; setting it releases
	 * nothing by itself */
	thr = UINT64_MAX;
	CHECK_INT(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &thr),
		  CUDA_SUCCESS);
	CHECK_INT(cuMemAllocFromPoolAsync(&a, 9 * MiB, pool, s), CUDA_SUCCESS);
	CHECK_INT(tesseraMockUsedBytes(0), base + 10 * MiB);
	CHECK_INT(cuMemFreeAsync(a, s), CUDA_SUCCESS);
	CHECK_INT(cuEventRecord(e, s), CUDA_SUCCESS);
	CHECK_INT(cuEventSynchronize(e), CUDA_SUCCESS);
	CHECK_INT(cuStreamSynchronize(s), CUDA_SUCCESS);
	CHECK_INT(tesseraMockUsedBytes(0), base + 10 * MiB);
	thr = 0;
	CHECK_INT(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &thr),
		  CUDA_SUCCESS);
	CHECK_INT(tesseraMockUsedBytes(0), base + 10 * MiB);
	/* an event synchronization releases too */
	CHECK_INT(cuEventSynchronize(e), CUDA_SUCCESS);
	CHECK_INT(tesseraMockUsedBytes(0), base);
	/* trimming, on demand, never below what is in use */
	thr = UINT64_MAX;
	CHECK_INT(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &thr),
		  CUDA_SUCCESS);
	CHECK_INT(cuMemAllocFromPoolAsync(&a, 9 * MiB, pool, s), CUDA_SUCCESS);
	CHECK_INT(cuMemFreeAsync(a, s), CUDA_SUCCESS);
	CHECK_INT(cuMemPoolTrimTo(pool, 3 * MiB), CUDA_SUCCESS);
	CHECK_INT(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 4 * MiB);
	CHECK_INT(tesseraMockUsedBytes(0), base + 4 * MiB);
	CHECK_INT(cuMemAllocFromPoolAsync(&a, 3 * MiB, pool, s), CUDA_SUCCESS);
	CHECK_INT(tesseraMockUsedBytes(0), base + 4 * MiB);
	CHECK_INT(cuMemPoolTrimTo(pool, 0), CUDA_SUCCESS);
	CHECK_INT(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 4 * MiB);
	/* a large minimum keeps the reserve, it never grows it */
	CHECK_INT(cuMemPoolTrimTo(pool, 1 * GiB), CUDA_SUCCESS);
	CHECK_INT(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 4 * MiB);
	CHECK_INT(cuMemFreeAsync(a, s), CUDA_SUCCESS);
	CHECK_INT(cuMemPoolTrimTo(pool, 0), CUDA_SUCCESS);
	CHECK_INT(tesseraMockUsedBytes(0), base);
	/* reuse policies: int flags, on by default */
	for (int attr = POOL_REUSE_FIRST; attr <= POOL_REUSE_LAST; attr++) {
		int on = 0;
		CHECK_INT(cuMemPoolGetAttribute(pool, attr, &on), CUDA_SUCCESS);
		CHECK_INT(on, 1);
	}
	int off = 0, got = -1;
	CHECK_INT(cuMemPoolSetAttribute(pool, POOL_REUSE_LAST, &off), CUDA_SUCCESS);
	CHECK_INT(cuMemPoolGetAttribute(pool, POOL_REUSE_LAST, &got), CUDA_SUCCESS);
	CHECK_INT(got, 0);
	/* unknown attributes, handles and missing values */
	cuuint64_t v = 0;
	CHECK_INT(cuMemPoolGetAttribute(pool, 99, &v), CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuMemPoolSetAttribute(pool, 99, &v), CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuMemPoolGetAttribute(pool, 0, &v), CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuMemPoolGetAttribute(NULL, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &v),
		  CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, NULL),
		  CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuMemPoolTrimTo(NULL, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuMemPoolDestroy(pool), CUDA_SUCCESS);
	CHECK_INT(cuEventDestroy_v2(e), CUDA_SUCCESS);
	CHECK_INT(cuStreamDestroy_v2(s), CUDA_SUCCESS);
	CHECK_INT(cuCtxDestroy_v2(c), CUDA_SUCCESS);
}

TEST(destroyed_pool_keeps_memory_of_live_allocations)
{
	CUcontext c;
	CUstream s;
	CHECK_INT(cuCtxCreate_v2(&c, 0, 0), CUDA_SUCCESS);
	CHECK_INT(cuStreamCreate(&s, 0), CUDA_SUCCESS);
	long long base = tesseraMockUsedBytes(0);
	CUmemoryPool def = NULL, cur = NULL, pool = new_pool(0);
	CHECK_INT(cuDeviceGetDefaultMemPool(&def, 0), CUDA_SUCCESS);
	CHECK_INT(cuDeviceSetMemPool(0, pool), CUDA_SUCCESS);
	CUdeviceptr a = 0;
	CHECK_INT(cuMemAllocAsync(&a, 3 * MiB, s), CUDA_SUCCESS);
	CHECK_INT(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 3 * MiB);
	CHECK_INT(pool_attr(def, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 0);
	CHECK_INT(tesseraMockUsedBytes(0), base + 4 * MiB);
	CHECK_INT(cuMemPoolDestroy(pool), CUDA_SUCCESS);
	/* the device falls back to its default pool */
	CHECK_INT(cuDeviceGetMemPool(&cur, 0), CUDA_SUCCESS);
	CHECK(cur == def);
	/* the handle is dead, its memory is not */
	CHECK_INT(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), -1);
	CHECK_INT(cuMemPoolDestroy(pool), CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuStreamSynchronize(s), CUDA_SUCCESS);
	CHECK_INT(tesseraMockUsedBytes(0), base + 4 * MiB);
	CHECK_INT(cuMemFreeAsync(a, s), CUDA_SUCCESS);
	CHECK_INT(tesseraMockUsedBytes(0), base);
	/* without allocations the reserve goes back at once, threshold or not */
	CUmemoryPool p2 = new_pool(0);
	cuuint64_t thr = UINT64_MAX;
	CHECK_INT(cuMemPoolSetAttribute(p2, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &thr),
		  CUDA_SUCCESS);
	CHECK_INT(cuMemAllocFromPoolAsync(&a, 1 * MiB, p2, s), CUDA_SUCCESS);
	CHECK_INT(cuMemFreeAsync(a, s), CUDA_SUCCESS);
	CHECK_INT(tesseraMockUsedBytes(0), base + 2 * MiB);
	CHECK_INT(cuMemPoolDestroy(p2), CUDA_SUCCESS);
	CHECK_INT(tesseraMockUsedBytes(0), base);
	/* default pools are the driver's */
	CHECK_INT(cuMemPoolDestroy(def), CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuStreamDestroy_v2(s), CUDA_SUCCESS);
	CHECK_INT(cuCtxDestroy_v2(c), CUDA_SUCCESS);
}

TEST(set_mem_pool_and_alloc_on_another_devices_stream)
{
	CUcontext c0, c1, cur;
	CUstream s1;
	CHECK_INT(cuCtxCreate_v2(&c1, 0, 1), CUDA_SUCCESS);
	CHECK_INT(cuStreamCreate(&s1, 0), CUDA_SUCCESS);
	CHECK_INT(cuCtxCreate_v2(&c0, 0, 0), CUDA_SUCCESS);
	CHECK_INT(cuCtxGetCurrent(&cur), CUDA_SUCCESS);
	CHECK(cur == c0);
	CUmemoryPool pool1 = new_pool(1), def0 = NULL, def1 = NULL, got = NULL;
	CHECK_INT(cuDeviceGetDefaultMemPool(&def0, 0), CUDA_SUCCESS);
	CHECK_INT(cuDeviceGetDefaultMemPool(&def1, 1), CUDA_SUCCESS);
	/* a device's pool must be on that device */
	CHECK_INT(cuDeviceSetMemPool(0, pool1), CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuDeviceSetMemPool(1, NULL), CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuDeviceSetMemPool(7, pool1), CUDA_ERROR_INVALID_DEVICE);
	CHECK_INT(cuDeviceSetMemPool(1, pool1), CUDA_SUCCESS);
	CHECK_INT(cuDeviceGetMemPool(&got, 1), CUDA_SUCCESS);
	CHECK(got == pool1);
	CHECK_INT(cuDeviceGetDefaultMemPool(&got, 1), CUDA_SUCCESS);
	CHECK(got == def1);
	CHECK_INT(cuDeviceGetMemPool(&got, 0), CUDA_SUCCESS);
	CHECK(got == def0);
	long long u0 = tesseraMockUsedBytes(0), u1 = tesseraMockUsedBytes(1);
	/* the stream's device decides, not the current context's */
	CUdeviceptr p = 0, q = 0;
	CHECK_INT(cuMemAllocAsync(&p, 1 * MiB, s1), CUDA_SUCCESS);
	CHECK_INT(pool_attr(pool1, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 1 * MiB);
	CHECK_INT(pool_attr(def1, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 0);
	CHECK_INT(tesseraMockUsedBytes(1), u1 + 2 * MiB);
	CHECK_INT(tesseraMockUsedBytes(0), u0);
	/* the default stream: the current context's device */
	CHECK_INT(cuMemAllocAsync(&q, 1 * MiB, NULL), CUDA_SUCCESS);
	CHECK_INT(pool_attr(def0, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 1 * MiB);
	CHECK_INT(tesseraMockUsedBytes(0), u0 + 2 * MiB);
	CHECK_INT(cuMemFreeAsync(p, s1), CUDA_SUCCESS);
	CHECK_INT(cuMemFreeAsync(q, NULL), CUDA_SUCCESS);
	/* one synchronization releases every pool over its threshold */
	CHECK_INT(cuStreamSynchronize(s1), CUDA_SUCCESS);
	CHECK_INT(tesseraMockUsedBytes(1), u1);
	CHECK_INT(tesseraMockUsedBytes(0), u0);
	CHECK_INT(cuMemPoolDestroy(pool1), CUDA_SUCCESS);
	CHECK_INT(cuDeviceGetMemPool(&got, 1), CUDA_SUCCESS);
	CHECK(got == def1);
	CHECK_INT(cuStreamDestroy_v2(s1), CUDA_SUCCESS);
	CHECK_INT(cuCtxDestroy_v2(c0), CUDA_SUCCESS);
	CHECK_INT(cuCtxDestroy_v2(c1), CUDA_SUCCESS);
}

TEST(vmm_memory_lives_while_referenced_or_mapped)
{
	long long base = tesseraMockUsedBytes(0);
	CUmemAllocationProp prop;
	memset(&prop, 0, sizeof(prop));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = 0;
	CUmemGenericAllocationHandle h = 0, h2 = 0;
	CHECK_INT(cuMemCreate(&h, 4 * MiB, &prop, 0), CUDA_SUCCESS);
	CHECK_INT(tesseraMockUsedBytes(0), base + 4 * MiB);
	/* address ranges cost no device memory */
	CUdeviceptr va = 0, va2 = 0, va3 = 0;
	CHECK_INT(cuMemAddressReserve(&va, 8 * MiB, 0, 0, 0), CUDA_SUCCESS);
	CHECK(va != 0);
	CHECK_INT(cuMemAddressReserve(&va2, 8 * MiB, 0, 0, 1), CUDA_ERROR_INVALID_VALUE);
	/* a taken address is only a hint */
	CHECK_INT(cuMemAddressReserve(&va2, 8 * MiB, 0, va, 0), CUDA_SUCCESS);
	CHECK(va2 >= va + 8 * MiB || va2 + 8 * MiB <= va);
	CHECK_INT(tesseraMockUsedBytes(0), base + 4 * MiB);
	/* what a mapping must be */
	CHECK_INT(cuMemMap(va, 4 * MiB, 0, h, 1), CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuMemMap(va, 4 * MiB, 2 * MiB, h, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuMemMap(va, 0, 0, h, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuMemMap(0, 2 * MiB, 0, h, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuMemMap(va, 2 * MiB, 0, h + 1000, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuMemMap(va, 2 * MiB, 0, h, 0), CUDA_SUCCESS);
	CHECK_INT(cuMemMap(va + 2 * MiB, 2 * MiB, 2 * MiB, h, 0), CUDA_SUCCESS);
	CHECK_INT(cuMemMap(va + 1 * MiB, 2 * MiB, 0, h, 0), CUDA_ERROR_INVALID_VALUE);
	/* released while mapped: the memory stays */
	CHECK_INT(cuMemRelease(h), CUDA_SUCCESS);
	CHECK_INT(tesseraMockUsedBytes(0), base + 4 * MiB);
	CHECK_INT(cuMemRelease(h), CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuMemMap(va2, 2 * MiB, 0, h, 0), CUDA_ERROR_INVALID_VALUE);
	/* a mapped address gives the handle back, with a new reference */
	CHECK_INT(cuMemRetainAllocationHandle(&h2, (void *)(uintptr_t)(va + 3 * MiB)),
		  CUDA_SUCCESS);
	CHECK_INT(h2, h);
	CHECK_INT(cuMemRetainAllocationHandle(&h2, (void *)(uintptr_t)va2),
		  CUDA_ERROR_INVALID_VALUE);
	/* an unmap starts at a mapping and takes whole mappings only */
	CHECK_INT(cuMemUnmap(va + 1 * MiB, 1 * MiB), CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuMemUnmap(va, 3 * MiB), CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuMemRetainAllocationHandle(&h2, (void *)(uintptr_t)va), CUDA_SUCCESS);
	CHECK_INT(cuMemRelease(h2), CUDA_SUCCESS);
	CHECK_INT(cuMemUnmap(va, 4 * MiB), CUDA_SUCCESS);
	CHECK_INT(cuMemUnmap(va, 2 * MiB), CUDA_ERROR_INVALID_VALUE);
	/* unmapped but still referenced by the retain */
	CHECK_INT(tesseraMockUsedBytes(0), base + 4 * MiB);
	CHECK_INT(cuMemRelease(h2), CUDA_SUCCESS);
	CHECK_INT(tesseraMockUsedBytes(0), base);
	CHECK_INT(cuMemRelease(h2), CUDA_ERROR_INVALID_VALUE);
	/* released first, freed by the last unmap */
	CHECK_INT(cuMemCreate(&h, 2 * MiB, &prop, 0), CUDA_SUCCESS);
	CHECK_INT(cuMemMap(va, 2 * MiB, 0, h, 0), CUDA_SUCCESS);
	CHECK_INT(cuMemMap(va2, 2 * MiB, 0, h, 0), CUDA_SUCCESS);
	CHECK_INT(cuMemRelease(h), CUDA_SUCCESS);
	CHECK_INT(cuMemUnmap(va, 2 * MiB), CUDA_SUCCESS);
	CHECK_INT(tesseraMockUsedBytes(0), base + 2 * MiB);
	CHECK_INT(cuMemUnmap(va2, 8 * MiB), CUDA_SUCCESS);
	CHECK_INT(tesseraMockUsedBytes(0), base);
	/* ranges are freed as reserved */
	CHECK_INT(cuMemAddressFree(va, 4 * MiB), CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuMemAddressFree(va, 8 * MiB), CUDA_SUCCESS);
	CHECK_INT(cuMemAddressFree(va, 8 * MiB), CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuMemAddressFree(va2, 8 * MiB), CUDA_SUCCESS);
	CHECK_INT(cuMemAddressReserve(&va3, 2 * MiB, 64 * MiB, 0, 0), CUDA_SUCCESS);
	CHECK_INT(va3 % (64 * MiB), 0);
	CHECK_INT(cuMemAddressReserve(&va2, 2 * MiB, 3 * MiB, 0, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuMemAddressFree(va3, 2 * MiB), CUDA_SUCCESS);
}

TEST(legacy_array_abi)
{
	CUcontext c;
	CHECK_INT(cuCtxCreate_v2(&c, 0, 0), CUDA_SUCCESS);
	long long base = tesseraMockUsedBytes(0);
	CUarray a = NULL, b = NULL, v2 = NULL;
	CUDA_ARRAY_DESCRIPTOR_v1 d = { 1024, 1024, CU_AD_FORMAT_FLOAT, 4 };        /* 16 MiB */
	CHECK_INT(cuArrayCreate(&a, &d), CUDA_SUCCESS);
	CHECK_INT(tesseraMockUsedBytes(0), base + 16 * MiB);
	CUDA_ARRAY3D_DESCRIPTOR_v1 d3 = { 256, 256, 16, CU_AD_FORMAT_UNSIGNED_INT8, 4, 0 }; /* 4 MiB */
	CHECK_INT(cuArray3DCreate(&b, &d3), CUDA_SUCCESS);
	CHECK_INT(tesseraMockUsedBytes(0), base + 20 * MiB);
	/* the same size as the _v2 description of the same array */
	CUDA_ARRAY_DESCRIPTOR dv2 = { 1024, 1024, CU_AD_FORMAT_FLOAT, 4 };
	CHECK_INT(cuArrayCreate_v2(&v2, &dv2), CUDA_SUCCESS);
	CHECK_INT(tesseraMockUsedBytes(0), base + 36 * MiB);
	CHECK_INT(cuArrayDestroy(v2), CUDA_SUCCESS);
	d.NumChannels = 3;
	CHECK_INT(cuArrayCreate(&v2, &d), CUDA_ERROR_INVALID_VALUE);
	d3.Format = 0x7;
	CHECK_INT(cuArray3DCreate(&v2, &d3), CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuArray3DCreate(&v2, NULL), CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuArrayDestroy(a), CUDA_SUCCESS);
	CHECK_INT(cuArrayDestroy(b), CUDA_SUCCESS);
	CHECK_INT(tesseraMockUsedBytes(0), base);
	CHECK_INT(cuCtxDestroy_v2(c), CUDA_SUCCESS);
}

TEST(capture_records_instead_of_running)
{
	CUcontext c;
	CUstream s, s2;
	CUevent a, b, e;
	CUgraph g = NULL, g2 = NULL;
	CUgraphExec x = NULL, x2 = NULL;
	CUstreamCaptureStatus st = -1;
	float ms = 0;
	CHECK_INT(cuCtxCreate_v2(&c, 0, 0), CUDA_SUCCESS);
	CHECK_INT(cuStreamCreate(&s, 0), CUDA_SUCCESS);
	CHECK_INT(cuStreamCreate(&s2, 0), CUDA_SUCCESS);
	CHECK_INT(cuEventCreate(&a, 0), CUDA_SUCCESS);
	CHECK_INT(cuEventCreate(&b, 0), CUDA_SUCCESS);
	CHECK_INT(cuEventCreate(&e, 0), CUDA_SUCCESS);
	/* default streams cannot capture */
	CHECK_INT(cuStreamBeginCapture(NULL), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
	CHECK_INT(cuStreamBeginCapture_v2(CU_STREAM_LEGACY, CU_STREAM_CAPTURE_MODE_GLOBAL),
		  CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
	CHECK_INT(cuStreamBeginCapture_v2(s, 7), CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuStreamEndCapture(s, &g), CUDA_ERROR_ILLEGAL_STATE);
	CHECK_INT(cuStreamIsCapturing(s, &st), CUDA_SUCCESS);
	CHECK_INT(st, CU_STREAM_CAPTURE_STATUS_NONE);

	uint64_t t0 = tesseraMockNowNs();
	CHECK_INT(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), CUDA_SUCCESS);
	CHECK_INT(cuStreamBeginCapture(s), CUDA_ERROR_ILLEGAL_STATE);
	CHECK_INT(cuStreamIsCapturing(s, &st), CUDA_SUCCESS);
	CHECK_INT(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
	CHECK_INT(cuLaunchKernel(kernel, 1000, 1, 1, 32, 1, 1, 0, s, NULL, NULL), CUDA_SUCCESS);
	CHECK_INT(cuLaunchCooperativeKernel(kernel, 250, 2, 1, 32, 1, 1, 0, s, NULL),
		  CUDA_SUCCESS);
	CUlaunchConfig cfg = { .gridDimX = 100, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 32,
			       .blockDimY = 1, .blockDimZ = 1, .hStream = s };
	CHECK_INT(cuLaunchKernelEx(&cfg, kernel, NULL, NULL), CUDA_SUCCESS);
	/* an event recorded in a capture is no point in time */
	CHECK_INT(cuEventRecord(e, s), CUDA_SUCCESS);
	CHECK_INT(cuEventQuery(e), CUDA_ERROR_CAPTURED_EVENT);
	CHECK_INT(cuEventSynchronize(e), CUDA_ERROR_CAPTURED_EVENT);
	CHECK_INT(cuEventElapsedTime(&ms, e, e), CUDA_ERROR_CAPTURED_EVENT);
	/* nothing ran: the clock did not move and the device is idle */
	CHECK_INT(cuCtxSynchronize(), CUDA_SUCCESS);
	CHECK_INT(tesseraMockNowNs() - t0, 0);
	CHECK_INT(cuEventRecord(a, s2), CUDA_SUCCESS);
	CHECK_INT(cuLaunchKernel(kernel, 100, 1, 1, 32, 1, 1, 0, s2, NULL, NULL), CUDA_SUCCESS);
	CHECK_INT(cuEventRecord(b, s2), CUDA_SUCCESS);
	CHECK_INT(cuEventSynchronize(b), CUDA_SUCCESS);
	CHECK_INT(tesseraMockNowNs() - t0, 100000);
	CHECK_INT(cuStreamEndCapture(s, &g), CUDA_SUCCESS);
	CHECK(g != NULL);
	CHECK_INT(cuStreamIsCapturing(s, &st), CUDA_SUCCESS);
	CHECK_INT(st, CU_STREAM_CAPTURE_STATUS_NONE);

	/* the graph runs as long as the work it captured */
	CHECK_INT(cuGraphInstantiateWithFlags(&x, g, 1ULL << 40), CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuGraphInstantiateWithFlags(&x, g, 0), CUDA_SUCCESS);
	CHECK_INT(cuGraphDestroy(g), CUDA_SUCCESS);   /* the executable outlives it */
	uint64_t t1 = tesseraMockNowNs();
	CHECK_INT(cuEventRecord(a, s), CUDA_SUCCESS);
	CHECK_INT(cuGraphLaunch(x, s), CUDA_SUCCESS);
	CHECK_INT(cuEventRecord(b, s), CUDA_SUCCESS);
	CHECK_INT(cuEventQuery(b), CUDA_ERROR_NOT_READY);
	CHECK_INT(cuEventSynchronize(b), CUDA_SUCCESS);
	CHECK_INT(cuEventElapsedTime(&ms, a, b), CUDA_SUCCESS);
	CHECK(ms > 1.599f && ms < 1.601f);
	CHECK_INT(tesseraMockNowNs() - t1, 1600000);
	/* recorded outside a capture, the event is a point in time again */
	CHECK_INT(cuEventRecord(e, s), CUDA_SUCCESS);
	CHECK_INT(cuEventQuery(e), CUDA_SUCCESS);
	/* like a kernel, a graph waits for the device */
	uint64_t t2 = tesseraMockNowNs();
	CHECK_INT(cuLaunchKernel(kernel, 400, 1, 1, 32, 1, 1, 0, s2, NULL, NULL), CUDA_SUCCESS);
	CHECK_INT(cuGraphLaunch_ptsz(x, s), CUDA_SUCCESS);
	CHECK_INT(cuStreamSynchronize(s), CUDA_SUCCESS);
	CHECK_INT(tesseraMockNowNs() - t2, 2000000);

	/* a graph launched into a capture becomes part of the new graph */
	CHECK_INT(cuStreamBeginCapture_ptsz(s), CUDA_SUCCESS);
	CHECK_INT(cuGraphLaunch(x, s), CUDA_SUCCESS);
	CHECK_INT(cuLaunchKernel(kernel, 400, 1, 1, 32, 1, 1, 0, s, NULL, NULL), CUDA_SUCCESS);
	CHECK_INT(cuStreamEndCapture_ptsz(s, &g2), CUDA_SUCCESS);
	CHECK_INT(cuGraphInstantiateWithFlags(&x2, g2, 0), CUDA_SUCCESS);
	uint64_t t3 = tesseraMockNowNs();
	CHECK_INT(cuGraphLaunch(x2, s), CUDA_SUCCESS);
	CHECK_INT(cuStreamSynchronize(s), CUDA_SUCCESS);
	CHECK_INT(tesseraMockNowNs() - t3, 2000000);

	/* waiting for a capturing stream is refused and breaks the capture */
	CHECK_INT(cuStreamBeginCapture_v2_ptsz(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
	CHECK_INT(cuStreamSynchronize(s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
	CHECK_INT(cuStreamIsCapturing_ptsz(s, &st), CUDA_SUCCESS);
	CHECK_INT(st, CU_STREAM_CAPTURE_STATUS_INVALIDATED);
	CHECK_INT(cuLaunchKernel(kernel, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL),
		  CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
	g = (CUgraph)(uintptr_t)0x1;
	CHECK_INT(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
	CHECK(g == NULL);
	CHECK_INT(cuStreamIsCapturing(s, &st), CUDA_SUCCESS);
	CHECK_INT(st, CU_STREAM_CAPTURE_STATUS_NONE);
	CHECK_INT(cuStreamEndCapture(s, &g), CUDA_ERROR_ILLEGAL_STATE);
	/* and the stream works as before */
	uint64_t t4 = tesseraMockNowNs();
	CHECK_INT(cuLaunchKernel(kernel, 1000, 1, 1, 32, 1, 1, 0, s, NULL, NULL), CUDA_SUCCESS);
	CHECK_INT(cuStreamSynchronize(s), CUDA_SUCCESS);
	CHECK_INT(tesseraMockNowNs() - t4, 1000000);

	CHECK_INT(cuGraphExecDestroy(NULL), CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuGraphLaunch(NULL, s), CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuGraphExecDestroy(x), CUDA_SUCCESS);
	CHECK_INT(cuGraphExecDestroy(x2), CUDA_SUCCESS);
	CHECK_INT(cuGraphDestroy(g2), CUDA_SUCCESS);
	CHECK_INT(cuEventDestroy_v2(a), CUDA_SUCCESS);
	CHECK_INT(cuEventDestroy_v2(b), CUDA_SUCCESS);
	CHECK_INT(cuEventDestroy_v2(e), CUDA_SUCCESS);
	CHECK_INT(cuStreamDestroy_v2(s), CUDA_SUCCESS);
	CHECK_INT(cuStreamDestroy_v2(s2), CUDA_SUCCESS);
	CHECK_INT(cuCtxDestroy_v2(c), CUDA_SUCCESS);
}

TEST(special_stream_handles_are_the_default_stream)
{
	CUcontext c, got = NULL;
	CUevent a;
	CUstreamCaptureStatus st = -1;
	CHECK_INT(cuCtxCreate_v2(&c, 0, 0), CUDA_SUCCESS);
	CHECK_INT(cuEventCreate(&a, 0), CUDA_SUCCESS);
	long long base = tesseraMockUsedBytes(0);
	uint64_t t0 = tesseraMockNowNs();
	/* one default stream behind both handles */
	CHECK_INT(cuLaunchKernel(kernel, 1000, 1, 1, 32, 1, 1, 0, CU_STREAM_LEGACY, NULL, NULL),
		  CUDA_SUCCESS);
	CHECK_INT(cuEventRecord(a, CU_STREAM_PER_THREAD), CUDA_SUCCESS);
	CHECK_INT(cuEventQuery(a), CUDA_ERROR_NOT_READY);
	CHECK_INT(cuStreamSynchronize(CU_STREAM_LEGACY), CUDA_SUCCESS);
	CHECK_INT(tesseraMockNowNs() - t0, 1000000);
	CHECK_INT(cuEventQuery(a), CUDA_SUCCESS);
	CHECK_INT(cuLaunchKernel_ptsz(kernel, 500, 1, 1, 32, 1, 1, 0, CU_STREAM_PER_THREAD,
				      NULL, NULL), CUDA_SUCCESS);
	CUlaunchConfig cfg = { .gridDimX = 500, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 1,
			       .blockDimY = 1, .blockDimZ = 1, .hStream = CU_STREAM_LEGACY };
	CHECK_INT(cuLaunchKernelEx(&cfg, kernel, NULL, NULL), CUDA_SUCCESS);
	CHECK_INT(cuLaunchCooperativeKernel_ptsz(kernel, 500, 1, 1, 1, 1, 1, 0,
						 CU_STREAM_PER_THREAD, NULL), CUDA_SUCCESS);
	CHECK_INT(cuStreamSynchronize_ptsz(CU_STREAM_PER_THREAD), CUDA_SUCCESS);
	CHECK_INT(tesseraMockNowNs() - t0, 2500000);
	/* memory on the default stream: the current context's device */
	CUmemoryPool def = NULL;
	CHECK_INT(cuDeviceGetDefaultMemPool(&def, 0), CUDA_SUCCESS);
	CUdeviceptr p = 0, q = 0;
	CHECK_INT(cuMemAllocAsync(&p, 1 * MiB, CU_STREAM_PER_THREAD), CUDA_SUCCESS);
	CHECK_INT(cuMemAllocFromPoolAsync(&q, 1 * MiB, def, CU_STREAM_LEGACY), CUDA_SUCCESS);
	CHECK_INT(tesseraMockUsedBytes(0), base + 2 * MiB);
	CHECK_INT(cuMemFreeAsync(p, CU_STREAM_LEGACY), CUDA_SUCCESS);
	CHECK_INT(cuMemFreeAsync_ptsz(q, CU_STREAM_PER_THREAD), CUDA_SUCCESS);
	CHECK_INT(cuCtxSynchronize(), CUDA_SUCCESS);
	CHECK_INT(tesseraMockUsedBytes(0), base);
	CHECK_INT(cuStreamIsCapturing(CU_STREAM_LEGACY, &st), CUDA_SUCCESS);
	CHECK_INT(st, CU_STREAM_CAPTURE_STATUS_NONE);
	CHECK_INT(cuStreamBeginCapture(CU_STREAM_PER_THREAD), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
	CHECK_INT(cuStreamGetCtx(CU_STREAM_LEGACY, &got), CUDA_SUCCESS);
	CHECK(got == c);
	CHECK_INT(cuStreamGetCtx_ptsz(CU_STREAM_PER_THREAD, &got), CUDA_SUCCESS);
	CHECK(got == c);
	/* not objects: nothing to destroy */
	CHECK_INT(cuStreamDestroy_v2(CU_STREAM_LEGACY), CUDA_ERROR_INVALID_HANDLE);
	CHECK_INT(cuStreamDestroy_v2(CU_STREAM_PER_THREAD), CUDA_ERROR_INVALID_HANDLE);
	CHECK_INT(cuEventDestroy_v2(a), CUDA_SUCCESS);
	CHECK_INT(cuCtxDestroy_v2(c), CUDA_SUCCESS);
}

TEST(stream_context)
{
	CUcontext c0, c1, got = NULL;
	CUstream s;
	CHECK_INT(cuCtxCreate_v2(&c0, 0, 0), CUDA_SUCCESS);
	CHECK_INT(cuStreamCreate(&s, 0), CUDA_SUCCESS);
	CHECK_INT(cuCtxCreate_v2(&c1, 0, 1), CUDA_SUCCESS);
	CHECK_INT(cuStreamGetCtx(s, &got), CUDA_SUCCESS);
	CHECK(got == c0);
	CHECK_INT(cuStreamGetCtx_ptsz(s, &got), CUDA_SUCCESS);
	CHECK(got == c0);
	CHECK_INT(cuStreamGetCtx(NULL, &got), CUDA_SUCCESS);
	CHECK(got == c1);
	CHECK_INT(cuStreamGetCtx(s, NULL), CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuStreamDestroy_v2(s), CUDA_SUCCESS);
	CHECK_INT(cuCtxDestroy_v2(c1), CUDA_SUCCESS);
	CHECK_INT(cuCtxDestroy_v2(c0), CUDA_SUCCESS);
	CHECK_INT(cuCtxGetCurrent(&got), CUDA_SUCCESS);
	CHECK(got == NULL);
	CHECK_INT(cuStreamGetCtx(NULL, &got), CUDA_ERROR_INVALID_CONTEXT);
	CHECK_INT(cuStreamGetCtx(CU_STREAM_LEGACY, &got), CUDA_ERROR_INVALID_CONTEXT);
}

TEST(proc_address_new_entry_points)
{
	static const struct {
		const char *name;
		int version;
		bool ptsz;
		void *fn;
	} want[] = {
		{ "cuDeviceSetMemPool", 12040, false, (void *)cuDeviceSetMemPool },
		{ "cuMemPoolTrimTo", 12040, false, (void *)cuMemPoolTrimTo },
		{ "cuMemPoolGetAttribute", 12040, false, (void *)cuMemPoolGetAttribute },
		{ "cuMemPoolSetAttribute", 12040, false, (void *)cuMemPoolSetAttribute },
		{ "cuMemAddressReserve", 10020, false, (void *)cuMemAddressReserve },
		{ "cuMemAddressFree", 10020, false, (void *)cuMemAddressFree },
		{ "cuMemMap", 10020, false, (void *)cuMemMap },
		{ "cuMemUnmap", 10020, false, (void *)cuMemUnmap },
		{ "cuMemRetainAllocationHandle", 11000, false, (void *)cuMemRetainAllocationHandle },
		{ "cuArrayCreate", 3010, false, (void *)cuArrayCreate },
		{ "cuArrayCreate", 3020, false, (void *)cuArrayCreate_v2 },
		{ "cuArray3DCreate", 2000, false, (void *)cuArray3DCreate },
		{ "cuArray3DCreate", 12040, false, (void *)cuArray3DCreate_v2 },
		{ "cuStreamBeginCapture", 10000, false, (void *)cuStreamBeginCapture },
		{ "cuStreamBeginCapture", 10010, false, (void *)cuStreamBeginCapture_v2 },
		{ "cuStreamBeginCapture", 10000, true, (void *)cuStreamBeginCapture_ptsz },
		{ "cuStreamBeginCapture", 12040, true, (void *)cuStreamBeginCapture_v2_ptsz },
		{ "cuStreamIsCapturing", 10000, false, (void *)cuStreamIsCapturing },
		{ "cuStreamIsCapturing", 12040, true, (void *)cuStreamIsCapturing_ptsz },
		{ "cuStreamEndCapture", 10000, false, (void *)cuStreamEndCapture },
		{ "cuStreamEndCapture", 12040, true, (void *)cuStreamEndCapture_ptsz },
		{ "cuGraphInstantiateWithFlags", 11040, false, (void *)cuGraphInstantiateWithFlags },
		{ "cuGraphLaunch", 10000, false, (void *)cuGraphLaunch },
		{ "cuGraphLaunch", 12040, true, (void *)cuGraphLaunch_ptsz },
		{ "cuGraphDestroy", 10000, false, (void *)cuGraphDestroy },
		{ "cuGraphExecDestroy", 10000, false, (void *)cuGraphExecDestroy },
		{ "cuLaunchCooperativeKernel", 9000, false, (void *)cuLaunchCooperativeKernel },
		{ "cuLaunchCooperativeKernel", 12040, true, (void *)cuLaunchCooperativeKernel_ptsz },
		{ "cuStreamGetCtx", 9020, false, (void *)cuStreamGetCtx },
		{ "cuStreamGetCtx", 12040, true, (void *)cuStreamGetCtx_ptsz },
		{ "cuEventSynchronize", 12040, false, (void *)cuEventSynchronize },
		{ "cuCtxSynchronize", 12040, false, (void *)cuCtxSynchronize },
		{ "cuStreamSynchronize", 12040, false, (void *)cuStreamSynchronize },
		{ "cuStreamSynchronize", 12040, true, (void *)cuStreamSynchronize_ptsz },
		{ "cuGraphCreate", 10000, false, (void *)cuGraphCreate },
		{ "cuGraphAddMemAllocNode", 11040, false, (void *)cuGraphAddMemAllocNode },
		{ "cuGraphAddMemFreeNode", 11040, false, (void *)cuGraphAddMemFreeNode },
		{ "cuGraphAddChildGraphNode", 10000, false, (void *)cuGraphAddChildGraphNode },
		{ "cuGraphGetNodes", 10000, false, (void *)cuGraphGetNodes },
		{ "cuGraphNodeGetType", 10000, false, (void *)cuGraphNodeGetType },
		{ "cuGraphMemAllocNodeGetParams", 11040, false,
		  (void *)cuGraphMemAllocNodeGetParams },
		{ "cuGraphMemFreeNodeGetParams", 11040, false, (void *)cuGraphMemFreeNodeGetParams },
		{ "cuGraphChildGraphNodeGetGraph", 10000, false,
		  (void *)cuGraphChildGraphNodeGetGraph },
		/* the pre-12 forms, then what CUDA 12 headers call cuGraphInstantiate */
		{ "cuGraphInstantiate", 10000, false, (void *)cuGraphInstantiate },
		{ "cuGraphInstantiate", 11000, false, (void *)cuGraphInstantiate_v2 },
		{ "cuGraphInstantiate", 11080, false, (void *)cuGraphInstantiate_v2 },
		{ "cuGraphInstantiate", 12000, false, (void *)cuGraphInstantiateWithFlags },
		{ "cuGraphInstantiate", 12040, false, (void *)cuGraphInstantiateWithFlags },
		{ "cuGraphInstantiateWithFlags", 12040, false, (void *)cuGraphInstantiateWithFlags },
		{ "cuGraphInstantiateWithParams", 12000, false, (void *)cuGraphInstantiateWithParams },
		{ "cuGraphInstantiateWithParams", 12040, true,
		  (void *)cuGraphInstantiateWithParams_ptsz },
		{ "cuGraphUpload", 11010, false, (void *)cuGraphUpload },
		{ "cuGraphUpload", 12040, true, (void *)cuGraphUpload_ptsz },
		{ "cuDeviceGraphMemTrim", 11040, false, (void *)cuDeviceGraphMemTrim },
		{ "cuDeviceGetGraphMemAttribute", 11040, false, (void *)cuDeviceGetGraphMemAttribute },
		{ "cuDeviceSetGraphMemAttribute", 11040, false, (void *)cuDeviceSetGraphMemAttribute },
		{ "cuFuncGetAttribute", 12000, false, (void *)cuFuncGetAttribute },
		{ "cuLibraryLoadData", 12000, false, (void *)cuLibraryLoadData },
		{ "cuLibraryGetKernel", 12000, false, (void *)cuLibraryGetKernel },
		{ "cuLibraryUnload", 12000, false, (void *)cuLibraryUnload },
		{ "cuKernelGetFunction", 12000, false, (void *)cuKernelGetFunction },
		{ "cuKernelGetAttribute", 12000, false, (void *)cuKernelGetAttribute },
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		void *p = NULL;
		CUdriverProcAddressQueryResult st = -1;
		cuuint64_t flags = want[i].ptsz ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : 0;
		CHECK_INT(cuGetProcAddress_v2(want[i].name, &p, want[i].version, flags, &st),
			  CUDA_SUCCESS);
		CHECK_INT(st, CU_GET_PROC_ADDRESS_SUCCESS);
		if (p != want[i].fn)
			FAILF("%s at %d%s: wrong entry point", want[i].name, want[i].version,
			      want[i].ptsz ? " (ptsz)" : "");
	}
	/* older than the entry point */
	void *p = NULL;
	CUdriverProcAddressQueryResult st = -1;
	CHECK_INT(cuGetProcAddress_v2("cuGraphInstantiateWithFlags", &p, 11030, 0, &st),
		  CUDA_SUCCESS);
	CHECK_INT(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
	CHECK_INT(cuGetProcAddress_v2("cuStreamBeginCapture", &p, 9020, 0, &st),
		  CUDA_SUCCESS);
	CHECK_INT(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
	CHECK_INT(cuGetProcAddress_v2("cuMemPoolTrimTo", &p, 11010, 0, &st), CUDA_SUCCESS);
	CHECK_INT(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
	CHECK_INT(cuGetProcAddress_v2("cuGraphInstantiate", &p, 9020, 0, &st), CUDA_SUCCESS);
	CHECK_INT(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
	CHECK_INT(cuGetProcAddress_v2("cuGraphInstantiateWithParams", &p, 11080, 0, &st),
		  CUDA_SUCCESS);
	CHECK_INT(cuGetProcAddress_v2("cuGraphAddMemAllocNode", &p, 11030, 0, &st),
		  CUDA_SUCCESS);
}

TEST(capture_error_names)
{
	static const struct { CUresult code; const char *name; } want[] = {
		{ CUDA_ERROR_ILLEGAL_STATE, "CUDA_ERROR_ILLEGAL_STATE" },
		{ CUDA_ERROR_NOT_PERMITTED, "CUDA_ERROR_NOT_PERMITTED" },
		{ CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED" },
		{ CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED" },
		{ CUDA_ERROR_CAPTURED_EVENT, "CUDA_ERROR_CAPTURED_EVENT" },
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		const char *s = NULL;
		CHECK_INT(cuGetErrorName(want[i].code, &s), CUDA_SUCCESS);
		CHECK_STR(s, want[i].name);
		s = NULL;
		CHECK_INT(cuGetErrorString(want[i].code, &s), CUDA_SUCCESS);
		CHECK(s != NULL && *s != '\0');
	}
}

/* ---- graph memory ------------------------------------------------------ */

/* A graph memory attribute of device 0, or -1 when the driver refuses. */
static long long gmem(CUgraphMem_attribute attr)
{
	cuuint64_t v = 0;
	return cuDeviceGetGraphMemAttribute(0, attr, &v) == CUDA_SUCCESS ? (long long)v : -1;
}

#define GMEM_USED gmem(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT)
#define GMEM_RESERVED gmem(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT)

/* A graph captured on s: a kernel of blocks blocks, then an allocation of
 * bytes, freed in the graph when freed; *p gets its address. NULL when
 * anything fails. */
static CUgraph capture_alloc(CUstream s, unsigned blocks, long long bytes, bool freed,
			     CUdeviceptr *p)
{
	CUgraph g = NULL;
	*p = 0;
	if (cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL) != CUDA_SUCCESS)
		return NULL;
	if (blocks > 0 &&
	    cuLaunchKernel(kernel, blocks, 1, 1, 32, 1, 1, 0, s, NULL, NULL) != CUDA_SUCCESS)
		return NULL;
	if (cuMemAllocAsync(p, (size_t)bytes, s) != CUDA_SUCCESS ||
	    (freed && cuMemFreeAsync(*p, s) != CUDA_SUCCESS) ||
	    cuStreamEndCapture(s, &g) != CUDA_SUCCESS)
		return NULL;
	return g;
}

static CUDA_MEM_ALLOC_NODE_PARAMS alloc_params(int dev, long long bytes)
{
	CUDA_MEM_ALLOC_NODE_PARAMS a;
	memset(&a, 0, sizeof(a));
	a.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
	a.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	a.poolProps.location.id = dev;
	a.bytesize = (size_t)bytes;
	return a;
}

TEST(graph_memory_is_mapped_at_first_launch_and_kept_in_a_reserve)
{
	CUcontext c;
	CUstream s;
	CHECK_INT(cuCtxCreate_v2(&c, 0, 0), CUDA_SUCCESS);
	CHECK_INT(cuStreamCreate(&s, 0), CUDA_SUCCESS);
	CUmemoryPool def = NULL;
	CHECK_INT(cuDeviceGetDefaultMemPool(&def, 0), CUDA_SUCCESS);
	long long base = tesseraMockUsedBytes(0);
	CHECK_INT(GMEM_RESERVED, 0);

	/* captured allocations take nothing, from the device or any pool */
	CUdeviceptr p = 0, q = 0;
	CUgraph g = capture_alloc(s, 1000, 3 * MiB, true, &p);
	CHECK(g != NULL);
	CHECK(p != 0);
	CHECK_INT(tesseraMockUsedBytes(0), base);
	CHECK_INT(pool_attr(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 0);
	CHECK_INT(pool_attr(def, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 0);
	/* the graph has an allocation node and a free node */
	CUgraphNode nodes[2];
	size_t n = 2;
	CUgraphNodeType type = -1;
	CHECK_INT(cuGraphGetNodes(g, nodes, &n), CUDA_SUCCESS);
	CHECK_INT(n, 2);
	CHECK_INT(cuGraphNodeGetType(nodes[0], &type), CUDA_SUCCESS);
	CHECK_INT(type, CU_GRAPH_NODE_TYPE_MEM_ALLOC);
	CHECK_INT(cuGraphNodeGetType(nodes[1], &type), CUDA_SUCCESS);
	CHECK_INT(type, CU_GRAPH_NODE_TYPE_MEM_FREE);
	CUDA_MEM_ALLOC_NODE_PARAMS a;
	memset(&a, 0xff, sizeof(a));
	CHECK_INT(cuGraphMemAllocNodeGetParams(nodes[0], &a), CUDA_SUCCESS);
	CHECK_INT(a.bytesize, 3 * MiB);
	CHECK(a.dptr == p);
	CHECK_INT(a.poolProps.location.id, 0);
	CHECK_INT(a.poolProps.location.type, CU_MEM_LOCATION_TYPE_DEVICE);
	CHECK_INT(a.poolProps.allocType, CU_MEM_ALLOCATION_TYPE_PINNED);
	CHECK(a.accessDescs == NULL);
	CHECK_INT(a.accessDescCount, 0);
	CHECK_INT(cuGraphMemFreeNodeGetParams(nodes[1], &q), CUDA_SUCCESS);
	CHECK(q == p);

	CUgraphExec x = NULL, x2 = NULL;
	CHECK_INT(cuGraphInstantiateWithFlags(&x, g, 0), CUDA_SUCCESS);
	CHECK_INT(tesseraMockUsedBytes(0), base);
	CHECK_INT(GMEM_RESERVED, 0);
	/* the first launch maps it: the reserve grows in whole grains */
	uint64_t t0 = tesseraMockNowNs();
	CHECK_INT(cuGraphLaunch(x, s), CUDA_SUCCESS);
	CHECK_INT(GMEM_RESERVED, 4 * MiB);
	CHECK_INT(GMEM_USED, 3 * MiB);
	CHECK_INT(tesseraMockUsedBytes(0), base + 4 * MiB);
	nvmlDevice_t d;
	nvmlMemory_t m;
	CHECK_INT(nvmlInit_v2(), NVML_SUCCESS);
	CHECK_INT(nvmlDeviceGetHandleByIndex_v2(0, &d), NVML_SUCCESS);
	CHECK_INT(nvmlDeviceGetMemoryInfo(d, &m), NVML_SUCCESS);
	CHECK_INT(m.used, base + 4 * MiB);
	nvmlShutdown();
	/* later launches reuse the mapping, and run the captured work */
	CHECK_INT(cuGraphLaunch(x, s), CUDA_SUCCESS);
	CHECK_INT(cuStreamSynchronize(s), CUDA_SUCCESS);
	CHECK_INT(tesseraMockNowNs() - t0, 2000000);
	CHECK_INT(GMEM_RESERVED, 4 * MiB);
	CHECK_INT(tesseraMockUsedBytes(0), base + 4 * MiB);
	/* destroyed, its memory stays in the reserve */
	CHECK_INT(cuGraphExecDestroy(x), CUDA_SUCCESS);
	CHECK_INT(GMEM_USED, 0);
	CHECK_INT(GMEM_RESERVED, 4 * MiB);
	CHECK_INT(tesseraMockUsedBytes(0), base + 4 * MiB);
	/* which another executable graph reuses */
	CUgraph g2 = capture_alloc(s, 1000, 2 * MiB, true, &q);
	CHECK(g2 != NULL);
	CHECK(q != p);
	CHECK_INT(cuGraphInstantiateWithFlags(&x2, g2, 0), CUDA_SUCCESS);
	CHECK_INT(cuGraphLaunch(x2, s), CUDA_SUCCESS);
	CHECK_INT(GMEM_USED, 2 * MiB);
	CHECK_INT(GMEM_RESERVED, 4 * MiB);
	CHECK_INT(tesseraMockUsedBytes(0), base + 4 * MiB);
	CHECK_INT(gmem(CU_GRAPH_MEM_ATTR_USED_MEM_HIGH), 3 * MiB);
	CHECK_INT(gmem(CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH), 4 * MiB);
	/* trimming keeps what a graph still running uses... */
	CHECK_INT(cuDeviceGraphMemTrim(0), CUDA_SUCCESS);
	CHECK_INT(GMEM_RESERVED, 2 * MiB);
	CHECK_INT(tesseraMockUsedBytes(0), base + 2 * MiB);
	/* ...and takes an idle one's mapping, which its next launch maps again */
	CHECK_INT(cuStreamSynchronize(s), CUDA_SUCCESS);
	CHECK_INT(cuDeviceGraphMemTrim(0), CUDA_SUCCESS);
	CHECK_INT(GMEM_USED, 0);
	CHECK_INT(GMEM_RESERVED, 0);
	CHECK_INT(tesseraMockUsedBytes(0), base);
	CHECK_INT(cuGraphLaunch(x2, s), CUDA_SUCCESS);
	CHECK_INT(GMEM_RESERVED, 2 * MiB);
	CHECK_INT(tesseraMockUsedBytes(0), base + 2 * MiB);
	/* high marks are reset to the current values by writing 0 */
	cuuint64_t zero = 0, one = 1;
	CHECK_INT(cuDeviceSetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, &zero),
		  CUDA_SUCCESS);
	CHECK_INT(gmem(CU_GRAPH_MEM_ATTR_USED_MEM_HIGH), 2 * MiB);
	CHECK_INT(cuDeviceSetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH, &zero),
		  CUDA_SUCCESS);
	CHECK_INT(gmem(CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH), 2 * MiB);
	CHECK_INT(cuDeviceSetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, &one),
		  CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuDeviceSetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &zero),
		  CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuDeviceSetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &zero),
		  CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuStreamSynchronize(s), CUDA_SUCCESS);
	CHECK_INT(cuGraphExecDestroy(x2), CUDA_SUCCESS);
	CHECK_INT(cuDeviceGraphMemTrim(0), CUDA_SUCCESS);
	CHECK_INT(tesseraMockUsedBytes(0), base);
	CHECK_INT(cuGraphDestroy(g), CUDA_SUCCESS);
	CHECK_INT(cuGraphDestroy(g2), CUDA_SUCCESS);
	CHECK_INT(cuStreamDestroy_v2(s), CUDA_SUCCESS);
	CHECK_INT(cuCtxDestroy_v2(c), CUDA_SUCCESS);
}

TEST(graph_memory_out_of_memory_changes_nothing)
{
	CUcontext c;
	CUstream s;
	CHECK_INT(cuCtxCreate_v2(&c, 0, 0), CUDA_SUCCESS);
	CHECK_INT(cuStreamCreate(&s, 0), CUDA_SUCCESS);
	long long base0 = tesseraMockUsedBytes(0), base1 = tesseraMockUsedBytes(1);
	CUdeviceptr hog = 0, p = 0;
	CHECK_INT(cuMemAlloc_v2(&hog, 3 * GiB), CUDA_SUCCESS);
	CUgraph g = capture_alloc(s, 1000, 2 * GiB, true, &p);
	CHECK(g != NULL);
	CUgraphExec x = NULL;
	CHECK_INT(cuGraphInstantiateWithFlags(&x, g, 0), CUDA_SUCCESS);
	uint64_t t0 = tesseraMockNowNs();
	CHECK_INT(cuGraphLaunch(x, s), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_INT(cuGraphUpload(x, s), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_INT(cuStreamSynchronize(s), CUDA_SUCCESS);
	CHECK_INT(tesseraMockNowNs() - t0, 0);   /* nothing ran */
	CHECK_INT(GMEM_RESERVED, 0);
	CHECK_INT(GMEM_USED, 0);
	CHECK_INT(tesseraMockUsedBytes(0), base0 + 3 * GiB);
	/* with room, the upload maps it and the launch needs nothing more */
	CHECK_INT(cuMemFree_v2(hog), CUDA_SUCCESS);
	CHECK_INT(cuGraphUpload_ptsz(x, s), CUDA_SUCCESS);
	CHECK_INT(GMEM_RESERVED, 2 * GiB);
	CHECK_INT(tesseraMockUsedBytes(0), base0 + 2 * GiB);
	CHECK_INT(cuGraphLaunch(x, s), CUDA_SUCCESS);
	CHECK_INT(GMEM_RESERVED, 2 * GiB);
	CHECK_INT(cuStreamSynchronize(s), CUDA_SUCCESS);
	CHECK_INT(cuGraphExecDestroy(x), CUDA_SUCCESS);
	CHECK_INT(cuDeviceGraphMemTrim(0), CUDA_SUCCESS);
	CHECK_INT(tesseraMockUsedBytes(0), base0);

	/* a graph on two devices: one that cannot supply its part fails the
	 * launch, and the other keeps nothing */
	CUgraph h;
	CUgraphNode n0, n1;
	CHECK_INT(cuGraphCreate(&h, 0), CUDA_SUCCESS);
	CUDA_MEM_ALLOC_NODE_PARAMS a0 = alloc_params(0, 1 * MiB), a1 = alloc_params(1, 5 * GiB);
	CHECK_INT(cuGraphAddMemAllocNode(&n0, h, NULL, 0, &a0), CUDA_SUCCESS);
	CHECK_INT(cuGraphAddMemAllocNode(&n1, h, NULL, 0, &a1), CUDA_SUCCESS);
	CHECK_INT(cuGraphInstantiateWithFlags(&x, h, 0), CUDA_SUCCESS);
	CHECK_INT(cuGraphLaunch(x, s), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_INT(GMEM_RESERVED, 0);
	CHECK_INT(tesseraMockUsedBytes(0), base0);
	CHECK_INT(tesseraMockUsedBytes(1), base1);
	/* nothing was launched, so nothing is live */
	CHECK_INT(cuMemFree_v2(a0.dptr), CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuGraphExecDestroy(x), CUDA_SUCCESS);
	CHECK_INT(cuGraphDestroy(h), CUDA_SUCCESS);
	CHECK_INT(cuGraphDestroy(g), CUDA_SUCCESS);
	CHECK_INT(cuStreamDestroy_v2(s), CUDA_SUCCESS);
	CHECK_INT(cuCtxDestroy_v2(c), CUDA_SUCCESS);
}

TEST(graph_allocations_not_freed_in_the_graph_stay_live)
{
	CUcontext c;
	CUstream s;
	CHECK_INT(cuCtxCreate_v2(&c, 0, 0), CUDA_SUCCESS);
	CHECK_INT(cuStreamCreate(&s, 0), CUDA_SUCCESS);
	CUmemoryPool def = NULL;
	CHECK_INT(cuDeviceGetDefaultMemPool(&def, 0), CUDA_SUCCESS);
	long long base = tesseraMockUsedBytes(0);
	CUdeviceptr p = 0;
	CUgraph g = capture_alloc(s, 100, 1 * MiB, false, &p);
	CHECK(g != NULL);
	CUgraphExec x = NULL, x2 = NULL;
	CHECK_INT(cuGraphInstantiateWithFlags(&x, g, 0), CUDA_SUCCESS);
	/* not launched yet: no allocation to free */
	CHECK_INT(cuMemFreeAsync(p, s), CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuGraphLaunch(x, s), CUDA_SUCCESS);
	/* live: the graph cannot run again until it is freed */
	CHECK_INT(cuGraphLaunch(x, s), CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuMemFreeAsync(p, s), CUDA_SUCCESS);
	CHECK_INT(pool_attr(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 0);
	CHECK_INT(cuMemFreeAsync(p, s), CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuGraphLaunch(x, s), CUDA_SUCCESS);
	CHECK_INT(cuMemFree_v2(p), CUDA_SUCCESS);
	CHECK_INT(cuGraphLaunch(x, s), CUDA_SUCCESS);
	CHECK_INT(GMEM_USED, 1 * MiB);
	/* a graph with memory nodes has one executable graph at a time */
	CHECK_INT(cuGraphInstantiateWithFlags(&x2, g, 0), CUDA_ERROR_INVALID_VALUE);
	/* destroyed, the live allocation keeps its memory until freed */
	CHECK_INT(cuStreamSynchronize(s), CUDA_SUCCESS);
	CHECK_INT(cuGraphExecDestroy(x), CUDA_SUCCESS);
	CHECK_INT(GMEM_USED, 1 * MiB);
	CHECK_INT(cuDeviceGraphMemTrim(0), CUDA_SUCCESS);
	CHECK_INT(GMEM_RESERVED, 2 * MiB);
	CHECK_INT(tesseraMockUsedBytes(0), base + 2 * MiB);
	CHECK_INT(cuMemFree_v2(p), CUDA_SUCCESS);
	CHECK_INT(GMEM_USED, 0);
	CHECK_INT(cuDeviceGraphMemTrim(0), CUDA_SUCCESS);
	CHECK_INT(tesseraMockUsedBytes(0), base);

	/* AUTO_FREE_ON_LAUNCH: each launch frees what the last one left */
	CHECK_INT(cuGraphInstantiateWithFlags(&x2, g, CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH),
		  CUDA_SUCCESS);
	CHECK_INT(cuGraphLaunch(x2, s), CUDA_SUCCESS);
	CHECK_INT(cuGraphLaunch(x2, s), CUDA_SUCCESS);
	CHECK_INT(GMEM_USED, 1 * MiB);
	CHECK_INT(GMEM_RESERVED, 2 * MiB);
	/* a free node in another graph frees it when that graph runs */
	CUgraph fg;
	CUgraphNode fn;
	CUgraphExec fx = NULL;
	CHECK_INT(cuGraphCreate(&fg, 0), CUDA_SUCCESS);
	CHECK_INT(cuGraphAddMemFreeNode(&fn, fg, NULL, 0, p), CUDA_SUCCESS);
	CHECK_INT(cuGraphInstantiateWithFlags(&fx, fg, 0), CUDA_SUCCESS);
	CHECK_INT(cuGraphLaunch(fx, s), CUDA_SUCCESS);
	CHECK_INT(cuMemFree_v2(p), CUDA_ERROR_INVALID_VALUE);

	/* into a capture, a graph with memory nodes cannot go */
	CUstreamCaptureStatus st = -1;
	CUgraph cg = NULL;
	CHECK_INT(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
	CHECK_INT(cuGraphLaunch(x2, s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
	CHECK_INT(cuStreamIsCapturing(s, &st), CUDA_SUCCESS);
	CHECK_INT(st, CU_STREAM_CAPTURE_STATUS_INVALIDATED);
	CHECK_INT(cuMemAllocAsync(&p, 1 * MiB, s), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
	CHECK_INT(cuMemFreeAsync(p, s), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
	CHECK_INT(cuStreamEndCapture(s, &cg), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
	CHECK(cg == NULL);

	/* from a pool, the node is on the pool's device */
	CUmemoryPool pool1 = new_pool(1);
	CUgraphNode node;
	size_t n = 1;
	CHECK_INT(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
	CHECK_INT(cuMemAllocFromPoolAsync_ptsz(&p, 1 * MiB, pool1, s), CUDA_SUCCESS);
	CHECK_INT(cuStreamEndCapture(s, &cg), CUDA_SUCCESS);
	CHECK_INT(pool_attr(pool1, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 0);
	CHECK_INT(cuGraphGetNodes(cg, &node, &n), CUDA_SUCCESS);
	CUDA_MEM_ALLOC_NODE_PARAMS a;
	CHECK_INT(cuGraphMemAllocNodeGetParams(node, &a), CUDA_SUCCESS);
	CHECK_INT(a.poolProps.location.id, 1);
	CHECK(a.dptr == p);
	CHECK_INT(cuGraphDestroy(cg), CUDA_SUCCESS);
	CHECK_INT(cuMemPoolDestroy(pool1), CUDA_SUCCESS);
	/* a capture left unfinished goes with its stream */
	CUstream s2;
	CHECK_INT(cuStreamCreate(&s2, 0), CUDA_SUCCESS);
	CHECK_INT(cuStreamBeginCapture_v2(s2, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
	CHECK_INT(cuMemAllocAsync(&p, 1 * MiB, s2), CUDA_SUCCESS);
	CHECK_INT(cuStreamDestroy_v2(s2), CUDA_SUCCESS);

	CHECK_INT(cuStreamSynchronize(s), CUDA_SUCCESS);
	CHECK_INT(cuGraphExecDestroy(x2), CUDA_SUCCESS);
	CHECK_INT(cuGraphExecDestroy(fx), CUDA_SUCCESS);
	CHECK_INT(GMEM_USED, 0);
	CHECK_INT(cuDeviceGraphMemTrim(0), CUDA_SUCCESS);
	CHECK_INT(tesseraMockUsedBytes(0), base);
	CHECK_INT(cuGraphDestroy(fg), CUDA_SUCCESS);
	CHECK_INT(cuGraphDestroy(g), CUDA_SUCCESS);
	CHECK_INT(cuStreamDestroy_v2(s), CUDA_SUCCESS);
	CHECK_INT(cuCtxDestroy_v2(c), CUDA_SUCCESS);
}

TEST(graph_nodes_built_by_hand)
{
	CUcontext c;
	CUstream s;
	CHECK_INT(cuCtxCreate_v2(&c, 0, 0), CUDA_SUCCESS);
	CHECK_INT(cuStreamCreate(&s, 0), CUDA_SUCCESS);
	long long base = tesseraMockUsedBytes(0);
	CUgraph g = NULL, other = NULL, child = NULL, cg = NULL;
	CHECK_INT(cuGraphCreate(&g, 1), CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuGraphCreate(NULL, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuGraphCreate(&g, 0), CUDA_SUCCESS);
	CHECK_INT(cuGraphCreate(&other, 0), CUDA_SUCCESS);
	CHECK_INT(cuGraphCreate(&child, 0), CUDA_SUCCESS);

	/* allocation nodes: pinned device memory of some size */
	CUgraphNode n1 = NULL, n2 = NULL, n3 = NULL, on = NULL, cn = NULL;
	CUDA_MEM_ALLOC_NODE_PARAMS a = alloc_params(0, 1 * MiB);
	CHECK_INT(cuGraphAddMemAllocNode(&n1, g, NULL, 0, NULL), CUDA_ERROR_INVALID_VALUE);
	a.bytesize = 0;
	CHECK_INT(cuGraphAddMemAllocNode(&n1, g, NULL, 0, &a), CUDA_ERROR_INVALID_VALUE);
	a = alloc_params(0, 1 * MiB);
	a.poolProps.allocType = 0;
	CHECK_INT(cuGraphAddMemAllocNode(&n1, g, NULL, 0, &a), CUDA_ERROR_INVALID_VALUE);
	a = alloc_params(0, 1 * MiB);
	a.poolProps.location.type = 0;
	CHECK_INT(cuGraphAddMemAllocNode(&n1, g, NULL, 0, &a), CUDA_ERROR_INVALID_VALUE);
	a = alloc_params(7, 1 * MiB);
	CHECK_INT(cuGraphAddMemAllocNode(&n1, g, NULL, 0, &a), CUDA_ERROR_INVALID_DEVICE);
	CHECK_INT(cuGraphAddMemAllocNode(&n1, NULL, NULL, 0, &a), CUDA_ERROR_INVALID_VALUE);
	a = alloc_params(0, 1 * MiB);
	CUmemAccessDesc acc = { .location = { CU_MEM_LOCATION_TYPE_DEVICE, 0 }, .flags = 3 };
	a.accessDescs = &acc;
	a.accessDescCount = 1;
	CHECK_INT(cuGraphAddMemAllocNode(&n1, g, NULL, 0, &a), CUDA_SUCCESS);
	CUdeviceptr outer = a.dptr;
	CHECK(outer != 0);
	CHECK_INT(tesseraMockUsedBytes(0), base);
	/* dependencies: distinct nodes of the same graph */
	CUgraphNode dup[2] = { n1, n1 };
	CHECK_INT(cuGraphAddMemAllocNode(&on, other, &n1, 1, &a), CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuGraphAddMemFreeNode(&n2, g, dup, 2, outer), CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuGraphAddMemFreeNode(&n2, g, NULL, 1, outer), CUDA_ERROR_INVALID_VALUE);
	/* free nodes: of an allocation node's address, once per graph */
	CHECK_INT(cuGraphAddMemFreeNode(&n2, g, &n1, 1, outer + 512), CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuGraphAddMemFreeNode(&n2, g, &n1, 1, outer), CUDA_SUCCESS);
	CHECK_INT(cuGraphAddMemFreeNode(&on, g, &n2, 1, outer), CUDA_ERROR_INVALID_VALUE);
	/* a child graph: copied into the node, its memory nodes counting */
	CUDA_MEM_ALLOC_NODE_PARAMS b = alloc_params(0, 2 * MiB);
	CHECK_INT(cuGraphAddMemAllocNode(&cn, child, NULL, 0, &b), CUDA_SUCCESS);
	CHECK_INT(cuGraphAddMemFreeNode(&cn, child, &cn, 1, b.dptr), CUDA_SUCCESS);
	CHECK_INT(cuGraphAddChildGraphNode(&n3, g, &n2, 1, NULL), CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuGraphAddChildGraphNode(&n3, g, &n2, 1, child), CUDA_SUCCESS);
	CHECK_INT(cuGraphDestroy(child), CUDA_SUCCESS);

	/* the nodes, as documented for too small and too large arrays */
	CUgraphNode nodes[5];
	size_t n = 0;
	CHECK_INT(cuGraphGetNodes(g, NULL, &n), CUDA_SUCCESS);
	CHECK_INT(n, 3);
	for (int i = 0; i < 5; i++)
		nodes[i] = (CUgraphNode)(uintptr_t)0x1;
	n = 5;
	CHECK_INT(cuGraphGetNodes(g, nodes, &n), CUDA_SUCCESS);
	CHECK_INT(n, 3);
	CHECK(nodes[0] == n1 && nodes[1] == n2 && nodes[2] == n3);
	CHECK(nodes[3] == NULL && nodes[4] == NULL);
	for (int i = 0; i < 5; i++)
		nodes[i] = (CUgraphNode)(uintptr_t)0x1;
	n = 2;
	CHECK_INT(cuGraphGetNodes(g, nodes, &n), CUDA_SUCCESS);
	CHECK_INT(n, 2);
	CHECK(nodes[0] == n1 && nodes[1] == n2 && nodes[2] == (CUgraphNode)(uintptr_t)0x1);
	CHECK_INT(cuGraphGetNodes(g, nodes, NULL), CUDA_ERROR_INVALID_VALUE);
	CUgraphNodeType type = -1;
	CHECK_INT(cuGraphNodeGetType(n3, &type), CUDA_SUCCESS);
	CHECK_INT(type, CU_GRAPH_NODE_TYPE_GRAPH);
	CHECK_INT(cuGraphNodeGetType(NULL, &type), CUDA_ERROR_INVALID_VALUE);
	CUDA_MEM_ALLOC_NODE_PARAMS got;
	memset(&got, 0, sizeof(got));
	CHECK_INT(cuGraphMemAllocNodeGetParams(n1, &got), CUDA_SUCCESS);
	CHECK_INT(got.bytesize, 1 * MiB);
	CHECK(got.dptr == outer);
	CHECK_INT(got.poolProps.location.id, 0);
	CHECK_INT(got.accessDescCount, 1);
	CHECK(got.accessDescs != NULL && got.accessDescs != &acc);
	CHECK_INT(got.accessDescs[0].flags, 3);
	CHECK_INT(cuGraphMemAllocNodeGetParams(n2, &got), CUDA_ERROR_INVALID_VALUE);
	CUdeviceptr fp = 0;
	CHECK_INT(cuGraphMemFreeNodeGetParams(n2, &fp), CUDA_SUCCESS);
	CHECK(fp == outer);
	CHECK_INT(cuGraphMemFreeNodeGetParams(n1, &fp), CUDA_ERROR_INVALID_VALUE);
	/* the child graph node's graph is its own, not the caller's */
	CHECK_INT(cuGraphChildGraphNodeGetGraph(n1, &cg), CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuGraphChildGraphNodeGetGraph(n3, &cg), CUDA_SUCCESS);
	CHECK(cg != NULL && cg != child && cg != g);
	CHECK_INT(cuGraphGetNodes(cg, NULL, &n), CUDA_SUCCESS);
	CHECK_INT(n, 2);
	CHECK_INT(cuGraphGetNodes(cg, nodes, &n), CUDA_SUCCESS);
	CHECK_INT(cuGraphMemAllocNodeGetParams(nodes[0], &got), CUDA_SUCCESS);
	CHECK(got.dptr == b.dptr);
	CHECK_INT(cuGraphAddMemAllocNode(&on, cg, NULL, 0, &b), CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuGraphDestroy(cg), CUDA_ERROR_INVALID_VALUE);

	/* instantiated (the pre-12 form): parent and child allocations map */
	CUgraphExec x = NULL, x2 = NULL;
	CUgraphNode err = (CUgraphNode)(uintptr_t)0x1;
	char log[32] = "junk";
	CHECK_INT(cuGraphInstantiate_v2(&x, g, &err, log, sizeof(log)), CUDA_SUCCESS);
	CHECK(err == NULL);
	CHECK_STR(log, "");
	CHECK_INT(cuGraphLaunch(x, s), CUDA_SUCCESS);
	CHECK_INT(GMEM_USED, 3 * MiB);
	CHECK_INT(GMEM_RESERVED, 4 * MiB);
	CHECK_INT(tesseraMockUsedBytes(0), base + 4 * MiB);
	/* both are freed in the graph, so it runs again */
	CHECK_INT(cuGraphLaunch(x, s), CUDA_SUCCESS);
	CHECK_INT(cuMemFree_v2(outer), CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuGraphInstantiate(&x2, g, NULL, NULL, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuStreamSynchronize(s), CUDA_SUCCESS);
	CHECK_INT(cuGraphExecDestroy(x), CUDA_SUCCESS);
	CHECK_INT(cuGraphInstantiate(&x2, g, NULL, NULL, 0), CUDA_SUCCESS);
	CHECK_INT(cuGraphExecDestroy(x2), CUDA_SUCCESS);
	/* failures say so in the log */
	CHECK_INT(cuGraphInstantiate(&x2, NULL, &err, log, sizeof(log)), CUDA_ERROR_INVALID_VALUE);
	CHECK(err == NULL);
	CHECK(log[0] != '\0');
	/* the graph goes with its nodes; its executable graph outlives it */
	CHECK_INT(cuGraphInstantiateWithFlags(&x, g, 0), CUDA_SUCCESS);
	CHECK_INT(cuGraphDestroy(g), CUDA_SUCCESS);
	CHECK_INT(cuGraphLaunch(x, s), CUDA_SUCCESS);
	CHECK_INT(cuStreamSynchronize(s), CUDA_SUCCESS);
	CHECK_INT(cuGraphExecDestroy(x), CUDA_SUCCESS);
	CHECK_INT(cuDeviceGraphMemTrim(0), CUDA_SUCCESS);
	CHECK_INT(tesseraMockUsedBytes(0), base);
	CHECK_INT(cuGraphDestroy(other), CUDA_SUCCESS);
	CHECK_INT(cuStreamDestroy_v2(s), CUDA_SUCCESS);
	CHECK_INT(cuCtxDestroy_v2(c), CUDA_SUCCESS);
}

TEST(graph_instantiate_with_params)
{
	CUcontext c;
	CUstream s;
	CHECK_INT(cuCtxCreate_v2(&c, 0, 0), CUDA_SUCCESS);
	CHECK_INT(cuStreamCreate(&s, 0), CUDA_SUCCESS);
	long long base = tesseraMockUsedBytes(0);
	CUdeviceptr p = 0, q = 0;
	CUgraph g = capture_alloc(s, 100, 3 * MiB, true, &p);
	CUgraph big = capture_alloc(s, 100, 5 * GiB, true, &q);
	CHECK(g != NULL && big != NULL);
	CUgraphExec x = NULL;
	CUDA_GRAPH_INSTANTIATE_PARAMS ip = { .flags = 1ULL << 40, .hErrNode_out =
					     (CUgraphNode)(uintptr_t)0x1, .result_out = -1 };
	CHECK_INT(cuGraphInstantiateWithParams(&x, g, NULL), CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuGraphInstantiateWithParams(&x, g, &ip), CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(ip.result_out, CUDA_GRAPH_INSTANTIATE_ERROR);
	CHECK(ip.hErrNode_out == NULL);
	ip.flags = CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH |
		   CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH;
	CHECK_INT(cuGraphInstantiateWithParams(&x, g, &ip), CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuGraphInstantiateWithFlags(&x, g, ip.flags), CUDA_ERROR_INVALID_VALUE);
	/* UPLOAD maps the memory at instantiation */
	ip = (CUDA_GRAPH_INSTANTIATE_PARAMS){ .flags = CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD,
					      .hUploadStream = s, .result_out = -1 };
	CHECK_INT(cuGraphInstantiateWithParams(&x, g, &ip), CUDA_SUCCESS);
	CHECK_INT(ip.result_out, CUDA_GRAPH_INSTANTIATE_SUCCESS);
	CHECK_INT(GMEM_RESERVED, 4 * MiB);
	CHECK_INT(GMEM_USED, 3 * MiB);
	CHECK_INT(tesseraMockUsedBytes(0), base + 4 * MiB);
	CHECK_INT(cuGraphLaunch(x, s), CUDA_SUCCESS);
	CHECK_INT(GMEM_RESERVED, 4 * MiB);
	/* an upload that does not fit leaves no executable graph */
	CUgraphExec xb = NULL;
	ip.result_out = -1;
	CHECK_INT(cuGraphInstantiateWithParams_ptsz(&xb, big, &ip), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_INT(ip.result_out, CUDA_GRAPH_INSTANTIATE_ERROR);
	CHECK(xb == NULL);
	CHECK_INT(GMEM_RESERVED, 4 * MiB);
	CHECK_INT(tesseraMockUsedBytes(0), base + 4 * MiB);
	ip.flags = 0;
	CHECK_INT(cuGraphInstantiateWithParams(&xb, big, &ip), CUDA_SUCCESS);
	CHECK_INT(ip.result_out, CUDA_GRAPH_INSTANTIATE_SUCCESS);
	CHECK_INT(GMEM_RESERVED, 4 * MiB);
	CHECK_INT(cuGraphExecDestroy(xb), CUDA_SUCCESS);
	CHECK_INT(cuStreamSynchronize(s), CUDA_SUCCESS);
	CHECK_INT(cuGraphExecDestroy(x), CUDA_SUCCESS);
	CHECK_INT(cuDeviceGraphMemTrim(0), CUDA_SUCCESS);
	CHECK_INT(tesseraMockUsedBytes(0), base);
	CHECK_INT(cuGraphDestroy(g), CUDA_SUCCESS);
	CHECK_INT(cuGraphDestroy(big), CUDA_SUCCESS);
	CHECK_INT(cuStreamDestroy_v2(s), CUDA_SUCCESS);
	CHECK_INT(cuCtxDestroy_v2(c), CUDA_SUCCESS);
}

TEST(graph_mem_attribute_errors)
{
	cuuint64_t v = 0;
	CHECK_INT(cuDeviceGetGraphMemAttribute(7, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &v),
		  CUDA_ERROR_INVALID_DEVICE);
	CHECK_INT(cuDeviceGetGraphMemAttribute(-1, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &v),
		  CUDA_ERROR_INVALID_DEVICE);
	CHECK_INT(cuDeviceGetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, NULL),
		  CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuDeviceGetGraphMemAttribute(0, 4, &v), CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuDeviceGetGraphMemAttribute(0, -1, &v), CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuDeviceGetGraphMemAttribute(1, CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH, &v),
		  CUDA_SUCCESS);
	CHECK_INT(cuDeviceSetGraphMemAttribute(7, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, &v),
		  CUDA_ERROR_INVALID_DEVICE);
	CHECK_INT(cuDeviceSetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, NULL),
		  CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuDeviceSetGraphMemAttribute(0, 4, &v), CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(cuDeviceGraphMemTrim(7), CUDA_ERROR_INVALID_DEVICE);
}

/* The mock implements every entry point the shim hooks or calls (one
 * list, fgpu/hooks.h), and its cuGetProcAddress hands out, for each hook's
 * base name at the version the hook appeared (per-thread stream variants
 * with that flag), exactly that symbol, as the real driver's table does. */
TEST(every_hooked_entry_point_is_implemented_and_looked_up_by_version)
{
#define MOCK_HAS(ret, name, base, since, ptsz, params) \
	do { \
		void *want = dlsym(RTLD_DEFAULT, #name), *got = NULL; \
		CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND; \
		testlib_checks++; \
		if (!want) \
			FAILF("the mock has no %s", #name); \
		else if (cuGetProcAddress_v2(#base, &got, since, \
					     ptsz ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM \
						  : CU_GET_PROC_ADDRESS_DEFAULT, &st) != CUDA_SUCCESS || \
			 st != CU_GET_PROC_ADDRESS_SUCCESS || got != want) \
			FAILF("cuGetProcAddress(%s, %d%s) is not %s", #base, since, ptsz ? ", ptds" : "", #name); \
	} while (0);
	FGPU_CUDA_HOOKS(MOCK_HAS)
#undef MOCK_HAS
#define MOCK_HAS_NVML(ret, name, base, since, ptsz, params) \
	testlib_checks++; \
	if (!dlsym(RTLD_DEFAULT, #name)) \
		FAILF("the mock has no %s", #name);
	FGPU_NVML_HOOKS(MOCK_HAS_NVML)
#undef MOCK_HAS_NVML
#define MOCK_HAS_USED(ret, name, params) \
	testlib_checks++; \
	if (!dlsym(RTLD_DEFAULT, #name)) \
		FAILF("the mock has no %s", #name);
	FGPU_CUDA_USED(MOCK_HAS_USED)
	FGPU_NVML_USED(MOCK_HAS_USED)
#undef MOCK_HAS_USED
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "--hold"))
		return mock_hold(atoi(argv[2]));
	if (argc == 2 && !strcmp(argv[1], "--observe"))
		return mock_observe();
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
	RUN(context_limits_take_memory_and_contexts_take_their_allocations);
	RUN(kernels_report_their_local_memory_and_launches_grow_the_stack);
	RUN(modules_take_their_globals_from_the_device);
	RUN(another_pid_namespace_reads_usage_without_dropping_it);
	RUN(libraries_load_without_a_context_and_launch_their_kernels);
	RUN(library_globals_are_placed_in_each_context_that_uses_them);
	RUN(every_hooked_entry_point_is_implemented_and_looked_up_by_version);
	RUN(green_contexts_partition_the_sms);
	RUN(pool_grows_in_grains_and_reuses_its_reserve);
	RUN(pool_threshold_trim_and_attributes);
	RUN(destroyed_pool_keeps_memory_of_live_allocations);
	RUN(set_mem_pool_and_alloc_on_another_devices_stream);
	RUN(vmm_memory_lives_while_referenced_or_mapped);
	RUN(legacy_array_abi);
	RUN(capture_records_instead_of_running);
	RUN(special_stream_handles_are_the_default_stream);
	RUN(stream_context);
	RUN(proc_address_new_entry_points);
	RUN(capture_error_names);
	RUN(graph_memory_is_mapped_at_first_launch_and_kept_in_a_reserve);
	RUN(graph_memory_out_of_memory_changes_nothing);
	RUN(graph_allocations_not_freed_in_the_graph_stay_live);
	RUN(graph_nodes_built_by_hand);
	RUN(graph_instantiate_with_params);
	RUN(graph_mem_attribute_errors);
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		return 2;
	return testlib_done();
}
