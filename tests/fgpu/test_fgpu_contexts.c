/* Contexts through the preloaded shim over the mock driver: the memory
 * that context limits reserve is charged, green contexts are charged like
 * any context, and what a context held goes when it ends. Device 0
 * (8 GiB, 100 SMs) gets a 1 GiB share and a 64 MiB context overhead;
 * device 1 is not given to the session. */
#include <pthread.h>

#include "fgpu/fgpu_test.h"
#include "testlib.h"

/* The mock's resident threads per SM (CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_
 * MULTIPROCESSOR) times its SMs: what one byte of stack costs. */
#define THREADS (2048LL * 100)

CUresult cuModuleLoadData(CUmodule *m, const void *image);
CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name);
CUresult cuModuleUnload(CUmodule m);

static const char *dir;
static CUcontext primary;

static size_t limit_of(CUlimit l)
{
	size_t v = 0;
	return cuCtxGetLimit(&v, l) == CUDA_SUCCESS ? v : (size_t)-1;
}

TEST(heap_and_printf_fifo_are_charged)
{
	long long base = ft_used(), mock_base = tesseraMockUsedBytes(0);
	size_t heap0 = limit_of(CU_LIMIT_MALLOC_HEAP_SIZE);
	CHECK_INT(heap0, 8 * MiB);
	CHECK_INT(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, heap0 + 256 * MiB), CUDA_SUCCESS);
	CHECK_INT(ft_used(), base + 256 * MiB);
	CHECK_INT(tesseraMockUsedBytes(0), mock_base + 256 * MiB);
	/* past the share: refused, the driver never asked, nothing changed */
	CHECK_INT(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 2 * GiB), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_INT(limit_of(CU_LIMIT_MALLOC_HEAP_SIZE), heap0 + 256 * MiB);
	CHECK_INT(ft_used(), base + 256 * MiB);
	CHECK_INT(tesseraMockUsedBytes(0), mock_base + 256 * MiB);
	/* the heap counts against allocations and the other way round */
	CUdeviceptr p = 0;
	CHECK_INT(cuMemAlloc_v2(&p, 800 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_INT(cuCtxSetLimit(CU_LIMIT_PRINTF_FIFO_SIZE, 1 * MiB + 16 * MiB), CUDA_SUCCESS);
	CHECK_INT(ft_used(), base + 272 * MiB);
	/* lowering gives it back; below the start value gives nothing more */
	CHECK_INT(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, heap0), CUDA_SUCCESS);
	CHECK_INT(cuCtxSetLimit(CU_LIMIT_PRINTF_FIFO_SIZE, 4096), CUDA_SUCCESS);
	CHECK_INT(ft_used(), base);
	CHECK_INT(tesseraMockUsedBytes(0), mock_base);
	CHECK_INT(cuCtxSetLimit(CU_LIMIT_PRINTF_FIFO_SIZE, 1 * MiB), CUDA_SUCCESS);
	CHECK_INT(ft_used(), base);
}

TEST(stack_counts_every_resident_thread)
{
	long long base = ft_used(), mock_base = tesseraMockUsedBytes(0);
	CHECK_INT(limit_of(CU_LIMIT_STACK_SIZE), 1024);
	CHECK_INT(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 2048), CUDA_SUCCESS);
	CHECK_INT(ft_used(), base + 1024 * THREADS);               /* 200 MiB */
	/* the driver rounds 2056 up to 2064: the charge follows the driver */
	CHECK_INT(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 2056), CUDA_SUCCESS);
	CHECK_INT(limit_of(CU_LIMIT_STACK_SIZE), 2064);
	CHECK_INT(ft_used(), base + (2064 - 1024) * THREADS);
	CHECK_INT(tesseraMockUsedBytes(0), mock_base + (2064 - 1024) * THREADS);
	/* 8 KiB a thread is 1.4 GB on this device: past the share */
	CHECK_INT(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 8192), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_INT(limit_of(CU_LIMIT_STACK_SIZE), 2064);
	CHECK_INT(ft_used(), base + (2064 - 1024) * THREADS);
	CHECK_INT(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 1024), CUDA_SUCCESS);
	CHECK_INT(ft_used(), base);
	CHECK_INT(tesseraMockUsedBytes(0), mock_base);
}

/* Kernels with 4 KiB and 8 KiB of local memory per thread: the driver
 * grows the stack to fit when they are launched. */
static const char deep_ptx[] =
	".version 6.0\n.target sm_50\n.address_size 64\n"
	".visible .entry deep4k()\n{\n\t.local .align 4 .b8 buf[4096];\n\tret;\n}\n"
	".visible .entry deep8k()\n{\n\t.local .align 4 .b8 buf[8192];\n\tret;\n}\n";

TEST(a_launch_is_charged_the_stack_it_grows_before_it_runs)
{
	long long base = ft_used(), mock_base = tesseraMockUsedBytes(0);
	CUmodule m;
	CUfunction k4, k8;
	CUstream s;
	CHECK_INT(cuModuleLoadData(&m, deep_ptx), CUDA_SUCCESS);
	CHECK_INT(cuModuleGetFunction(&k4, m, "deep4k"), CUDA_SUCCESS);
	CHECK_INT(cuModuleGetFunction(&k8, m, "deep8k"), CUDA_SUCCESS);
	CHECK_INT(cuStreamCreate(&s, 0), CUDA_SUCCESS);
	CHECK_INT(cuLaunchKernel(k4, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL), CUDA_SUCCESS);
	CHECK_INT(limit_of(CU_LIMIT_STACK_SIZE), 4096);
	CHECK_INT(tesseraMockUsedBytes(0), mock_base + 3072 * THREADS);
	/* charged with the launch, before any synchronization */
	CHECK_INT(ft_used(), base + 3072 * THREADS);                       /* 600 MiB */
	/* the synchronization reads the same stack: nothing more */
	CHECK_INT(cuStreamSynchronize(s), CUDA_SUCCESS);
	CHECK_INT(ft_used(), base + 3072 * THREADS);
	CHECK_INT(cuLaunchKernel(k4, 2, 1, 1, 64, 1, 1, 0, s, NULL, NULL), CUDA_SUCCESS);
	CHECK_INT(ft_used(), base + 3072 * THREADS);
	/* 8 KiB a thread is past the share: the launch is refused before the
	 * driver grows anything, and nothing changes */
	CHECK_INT(cuLaunchKernel(k8, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL),
		  CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_INT(limit_of(CU_LIMIT_STACK_SIZE), 4096);
	CHECK_INT(tesseraMockUsedBytes(0), mock_base + 3072 * THREADS);
	CHECK_INT(ft_used(), base + 3072 * THREADS);
	CUlaunchConfig cfg = { .gridDimX = 1, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 32,
			       .blockDimY = 1, .blockDimZ = 1, .hStream = s };
	CHECK_INT(cuLaunchKernelEx(&cfg, k8, NULL, NULL), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_INT(cuLaunchCooperativeKernel(k8, 1, 1, 1, 32, 1, 1, 0, s, NULL),
		  CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_INT(cuCtxSynchronize(), CUDA_SUCCESS);
	CHECK_INT(ft_used(), base + 3072 * THREADS);
	/* setting the stack back gives it all back; the kernel is then
	 * charged again when launched */
	CHECK_INT(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 1024), CUDA_SUCCESS);
	CHECK_INT(ft_used(), base);
	CHECK_INT(tesseraMockUsedBytes(0), mock_base);
	CHECK_INT(cuLaunchKernel(k4, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL), CUDA_SUCCESS);
	CHECK_INT(ft_used(), base + 3072 * THREADS);
	CHECK_INT(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 1024), CUDA_SUCCESS);
	/* a launch the driver refuses (1025 threads a block) grows nothing
	 * and keeps nothing charged */
	CHECK_INT(cuLaunchKernel(k4, 1, 1, 1, 1025, 1, 1, 0, s, NULL, NULL),
		  CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(limit_of(CU_LIMIT_STACK_SIZE), 1024);
	CHECK_INT(ft_used(), base);
	CHECK_INT(tesseraMockUsedBytes(0), mock_base);
	CHECK_INT(cuStreamDestroy_v2(s), CUDA_SUCCESS);
	CHECK_INT(cuModuleUnload(m), CUDA_SUCCESS);
}

/* Threads launching kernels that grow the stack, and synchronizing, at
 * once: the growth is charged once, never twice, and a launch past the
 * share is refused in every thread. */
struct launcher {
	CUfunction fits, too_deep;
	int unexpected;
};

static void *launch_loop(void *arg)
{
	struct launcher *l = arg;
	CUstream s;
	if (cuCtxSetCurrent(primary) != CUDA_SUCCESS || cuStreamCreate(&s, 0) != CUDA_SUCCESS) {
		l->unexpected++;
		return NULL;
	}
	for (int i = 0; i < 200; i++) {
		l->unexpected += cuLaunchKernel(l->fits, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL) !=
				 CUDA_SUCCESS;
		l->unexpected += cuLaunchKernel(l->too_deep, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL) !=
				 CUDA_ERROR_OUT_OF_MEMORY;
		l->unexpected += (i % 3 ? cuStreamSynchronize(s) : cuCtxSynchronize()) !=
				 CUDA_SUCCESS;
	}
	l->unexpected += cuStreamDestroy_v2(s) != CUDA_SUCCESS;
	return NULL;
}

TEST(threads_launching_at_once_charge_the_growth_once)
{
	long long base = ft_used(), mock_base = tesseraMockUsedBytes(0);
	CUmodule m;
	struct launcher l[4] = { 0 };
	pthread_t t[4];
	CHECK_INT(cuModuleLoadData(&m, deep_ptx), CUDA_SUCCESS);
	for (int i = 0; i < 4; i++) {
		CHECK_INT(cuModuleGetFunction(&l[i].fits, m, "deep4k"), CUDA_SUCCESS);
		CHECK_INT(cuModuleGetFunction(&l[i].too_deep, m, "deep8k"), CUDA_SUCCESS);
		CHECK_INT(pthread_create(&t[i], NULL, launch_loop, &l[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		CHECK_INT(pthread_join(t[i], NULL), 0);
		CHECK_INT(l[i].unexpected, 0);
	}
	CHECK_INT(limit_of(CU_LIMIT_STACK_SIZE), 4096);
	CHECK_INT(ft_used(), base + 3072 * THREADS);
	CHECK_INT(tesseraMockUsedBytes(0), mock_base + 3072 * THREADS);
	CHECK_INT(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 1024), CUDA_SUCCESS);
	CHECK_INT(ft_used(), base);
	CHECK_INT(cuModuleUnload(m), CUDA_SUCCESS);
}

CUresult cuLibraryLoadData(CUlibrary *l, const void *code, void *jitOptions,
			   void **jitOptionsValues, unsigned int numJitOptions,
			   void *libraryOptions, void **libraryOptionValues,
			   unsigned int numLibraryOptions);
CUresult cuLibraryGetKernel(CUkernel *k, CUlibrary l, const char *name);

/* cuLaunchKernel takes a CUDA 12 library's kernel in place of a function
 * (cuFuncGetAttribute refuses it): it is sized all the same. */
TEST(a_library_kernel_is_charged_the_stack_it_grows)
{
	long long base = ft_used(), mock_base = tesseraMockUsedBytes(0);
	CUlibrary l;
	CUkernel k4, k8;
	CHECK_INT(cuLibraryLoadData(&l, deep_ptx, NULL, NULL, 0, NULL, NULL, 0), CUDA_SUCCESS);
	CHECK_INT(cuLibraryGetKernel(&k4, l, "deep4k"), CUDA_SUCCESS);
	CHECK_INT(cuLibraryGetKernel(&k8, l, "deep8k"), CUDA_SUCCESS);
	CHECK_INT(cuLaunchKernel((CUfunction)k8, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL),
		  CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_INT(limit_of(CU_LIMIT_STACK_SIZE), 1024);
	CHECK_INT(cuLaunchKernel((CUfunction)k4, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL),
		  CUDA_SUCCESS);
	CHECK_INT(ft_used(), base + 3072 * THREADS);
	CHECK_INT(tesseraMockUsedBytes(0), mock_base + 3072 * THREADS);
	CHECK_INT(cuLibraryUnload(l), CUDA_SUCCESS);
	CHECK_INT(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 1024), CUDA_SUCCESS);
	CHECK_INT(ft_used(), base);
	CHECK_INT(tesseraMockUsedBytes(0), mock_base);
}

TEST(other_limits_pass_through)
{
	long long base = ft_used();
	CHECK_INT(cuCtxSetLimit(CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT, 100000), CUDA_SUCCESS);
	CHECK_INT(limit_of(CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT), 100000);
	CHECK_INT(cuCtxSetLimit((CUlimit)99, 1), CUDA_ERROR_UNSUPPORTED_LIMIT);
	/* the driver's own refusal comes back as it is, and nothing is kept */
	CHECK_INT(cuCtxSetCurrent(NULL), CUDA_SUCCESS);
	CHECK_INT(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 64 * MiB), CUDA_ERROR_INVALID_CONTEXT);
	CHECK_INT(cuCtxSetCurrent(primary), CUDA_SUCCESS);
	CHECK_INT(ft_used(), base);
	CHECK_INT(limit_of(CU_LIMIT_MALLOC_HEAP_SIZE), 8 * MiB);
}

TEST(a_destroyed_context_gives_back_what_it_held)
{
	long long base = ft_used(), mock_base = tesseraMockUsedBytes(0);
	CUcontext c = NULL;
	CHECK_INT(cuCtxCreate_v2(&c, 0, 0), CUDA_SUCCESS);   /* current now */
	CUdeviceptr p = 0;
	CUdeviceptr_v1 p1 = 0;
	CUarray a = NULL;
	CUDA_ARRAY_DESCRIPTOR d = { 1024, 1024, CU_AD_FORMAT_FLOAT, 4 };   /* 16 MiB */
	CHECK_INT(cuMemAlloc_v2(&p, 256 * MiB), CUDA_SUCCESS);
	CHECK_INT(cuMemAlloc(&p1, 32 * MiB), CUDA_SUCCESS);
	CHECK_INT(cuArrayCreate_v2(&a, &d), CUDA_SUCCESS);
	CHECK_INT(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 8 * MiB + 64 * MiB), CUDA_SUCCESS);
	/* VMM memory is the process's, not the context's */
	CUmemAllocationProp prop;
	memset(&prop, 0, sizeof(prop));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	CUmemGenericAllocationHandle h = 0;
	CHECK_INT(cuMemCreate(&h, 64 * MiB, &prop, 0), CUDA_SUCCESS);
	CHECK_INT(ft_used(), base + (256 + 32 + 16 + 64 + 64) * MiB);
	CHECK_INT(cuCtxDestroy_v2(c), CUDA_SUCCESS);
	CHECK_INT(cuCtxSetCurrent(primary), CUDA_SUCCESS);
	CHECK_INT(ft_used(), base + 64 * MiB);
	CHECK_INT(tesseraMockUsedBytes(0), mock_base + 64 * MiB);
	CHECK_INT(cuMemRelease(h), CUDA_SUCCESS);
	CHECK_INT(ft_used(), base);
	/* the old pointer is nobody's: freeing it changes nothing */
	CHECK_INT(cuMemFree_v2(p), CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(ft_used(), base);
	/* what another context holds stays when one is destroyed */
	CUdeviceptr q = 0;
	CHECK_INT(cuMemAlloc_v2(&q, 128 * MiB), CUDA_SUCCESS);
	CHECK_INT(cuCtxCreate(&c, 0, 0), CUDA_SUCCESS);
	CHECK_INT(cuCtxDestroy(c), CUDA_SUCCESS);            /* the pre-4.0 entry point */
	CHECK_INT(cuCtxSetCurrent(primary), CUDA_SUCCESS);
	CHECK_INT(ft_used(), base + 128 * MiB);
	CHECK_INT(cuMemFree_v2(q), CUDA_SUCCESS);
	CHECK_INT(ft_used(), base);
	/* a failed destroy changes nothing */
	CHECK_INT(cuCtxDestroy_v2(primary), CUDA_ERROR_INVALID_CONTEXT);
	CHECK_INT(ft_used(), base);
}

TEST(a_reset_lets_the_process_allocate_its_share_again)
{
	long long base = ft_used(), mock_base = tesseraMockUsedBytes(0);
	CUdeviceptr p = 0;
	CHECK_INT(cuMemAlloc_v2(&p, 600 * MiB), CUDA_SUCCESS);
	CHECK_INT(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 8 * MiB + 100 * MiB), CUDA_SUCCESS);
	CHECK_INT(cuMemAlloc_v2(&p, 600 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
	/* what cudaDeviceReset does: everything the primary context held goes */
	CHECK_INT(cuDevicePrimaryCtxReset_v2(0), CUDA_SUCCESS);
	CHECK_INT(ft_used(), base);
	CHECK_INT(tesseraMockUsedBytes(0), mock_base);
	CHECK_INT(limit_of(CU_LIMIT_MALLOC_HEAP_SIZE), 8 * MiB);
	CHECK_INT(cuMemAlloc_v2(&p, 600 * MiB), CUDA_SUCCESS);
	CHECK_INT(cuDevicePrimaryCtxReset(0), CUDA_SUCCESS);   /* the pre-11.0 entry point */
	CHECK_INT(ft_used(), base);
	CHECK_INT(cuDevicePrimaryCtxReset_v2(7), CUDA_ERROR_INVALID_DEVICE);
	CHECK_INT(ft_used(), base);
}

TEST(the_last_primary_release_gives_back_what_it_held)
{
	long long base = ft_used(), mock_base = tesseraMockUsedBytes(0);
	CUcontext again = NULL;
	CHECK_INT(cuDevicePrimaryCtxRetain(&again, 0), CUDA_SUCCESS);   /* two retains */
	CUdeviceptr p = 0;
	CHECK_INT(cuMemAlloc_v2(&p, 128 * MiB), CUDA_SUCCESS);
	CHECK_INT(cuDevicePrimaryCtxRelease_v2(0), CUDA_SUCCESS);
	CHECK_INT(ft_used(), base + 128 * MiB);                 /* still retained once */
	CHECK_INT(cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
	/* the context is gone, its own overhead with it */
	CHECK_INT(tesseraMockUsedBytes(0), mock_base - 64 * MiB);
	CHECK_INT(cuDevicePrimaryCtxRetain(&primary, 0), CUDA_SUCCESS);
	CHECK_INT(cuCtxSetCurrent(primary), CUDA_SUCCESS);
	CHECK_INT(ft_used(), base);
	CHECK_INT(tesseraMockUsedBytes(0), mock_base);
}

/* A green context of 16 of the device's SMs, on ord. */
static CUresult green(CUgreenCtx *g, int ord)
{
	CUdevResource all, part;
	unsigned n = 1;
	CUdevResourceDesc desc;
	CUresult rc;
	if ((rc = cuDeviceGetDevResource(ord, &all, CU_DEV_RESOURCE_TYPE_SM)) != CUDA_SUCCESS ||
	    (rc = cuDevSmResourceSplitByCount(&part, &n, &all, NULL, 0, 16)) != CUDA_SUCCESS ||
	    (rc = cuDevResourceGenerateDesc(&desc, &part, 1)) != CUDA_SUCCESS)
		return rc;
	return cuGreenCtxCreate(g, desc, ord, CU_GREEN_CTX_DEFAULT_STREAM);
}

TEST(green_contexts_are_charged_and_give_back_what_they_held)
{
	long long base = ft_used(), mock_base = tesseraMockUsedBytes(0);
	CUgreenCtx g = NULL;
	CHECK_INT(green(&g, 0), CUDA_SUCCESS);
	CUcontext gc = NULL;
	CHECK_INT(cuCtxFromGreenCtx(&gc, g), CUDA_SUCCESS);
	CHECK_INT(cuCtxSetCurrent(gc), CUDA_SUCCESS);
	CUdeviceptr p = 0;
	CHECK_INT(cuMemAlloc_v2(&p, 256 * MiB), CUDA_SUCCESS);
	CHECK_INT(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 1024 + 256), CUDA_SUCCESS);  /* 50 MiB */
	CHECK_INT(ft_used(), base + 256 * MiB + 256 * THREADS);
	CHECK_INT(cuMemAlloc_v2(&p, 800 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_INT(cuGreenCtxDestroy(g), CUDA_SUCCESS);
	CHECK_INT(cuCtxSetCurrent(primary), CUDA_SUCCESS);
	CHECK_INT(ft_used(), base);
	/* the mock's green context took its overhead and gave it back */
	CHECK_INT(tesseraMockUsedBytes(0), mock_base);
	/* a green context on a device the session was not given: no room */
	CHECK_INT(green(&g, 1), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_INT(tesseraMockUsedBytes(1), 0);
}

int main(void)
{
	setenv("TESSERA_MOCK_GPUS", "2x8GiB:100", 1);
	setenv("TESSERA_MOCK_CTX_OVERHEAD", "67108864", 1);   /* bytes */
	if (cuInit(0) != CUDA_SUCCESS) {
		fprintf(stderr, "mock driver did not initialize\n");
		return 1;
	}
	char uuid[64], conf[512];
	ft_uuid(0, uuid, sizeof(uuid));
	snprintf(conf, sizeof(conf),
		 "version = 1\ndevices = 1\ndevice.0.uuid = %s\ndevice.0.memory_limit = 1GiB\n"
		 "context_overhead = 64MiB\n", uuid);
	dir = ft_setup(conf);
	if (cuDevicePrimaryCtxRetain(&primary, 0) != CUDA_SUCCESS ||
	    cuCtxSetCurrent(primary) != CUDA_SUCCESS) {
		fprintf(stderr, "no context\n");
		return 1;
	}
	RUN(heap_and_printf_fifo_are_charged);
	RUN(stack_counts_every_resident_thread);
	RUN(a_launch_is_charged_the_stack_it_grows_before_it_runs);
	RUN(a_library_kernel_is_charged_the_stack_it_grows);
	RUN(threads_launching_at_once_charge_the_growth_once);
	RUN(other_limits_pass_through);
	RUN(a_destroyed_context_gives_back_what_it_held);
	RUN(a_reset_lets_the_process_allocate_its_share_again);
	RUN(the_last_primary_release_gives_back_what_it_held);
	RUN(green_contexts_are_charged_and_give_back_what_they_held);
	ft_cleanup(dir);
	return testlib_done();
}
