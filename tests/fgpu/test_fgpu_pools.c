/* What the GPU holds beyond single allocations, through the preloaded shim
 * over the mock driver: memory pools keep freed memory reserved until a
 * synchronization (up to their release threshold), VMM handles keep their
 * memory while mapped, and stream-ordered allocations land on the
 * stream's device. The session has two devices: device 0 with a 1 GiB
 * share and device 1 with 256 MiB. */
#include <pthread.h>

#include "fgpu/fgpu_test.h"
#include "testlib.h"

static const char *dir;
static CUcontext ctx0, ctx1;

/* Bytes the container has accounted on device ord (= limit - free). */
static long long used_on(CUdevice ord)
{
	size_t f = 0, t = 0;
	CUcontext c = ord == 0 ? ctx0 : ctx1;
	if (cuCtxPushCurrent_v2(c) != CUDA_SUCCESS)
		return -1;
	CUresult rc = cuMemGetInfo_v2(&f, &t);
	cuCtxPopCurrent_v2(NULL);
	return rc == CUDA_SUCCESS ? (long long)(t - f) : -1;
}

static long long pool_attr(CUmemoryPool p, CUmemPool_attribute a)
{
	cuuint64_t v = 0;
	if (cuMemPoolGetAttribute(p, a, &v) != CUDA_SUCCESS)
		return -1;
	return (long long)v;
}

static void set_threshold(CUmemoryPool p, cuuint64_t v)
{
	CHECK_INT(cuMemPoolSetAttribute(p, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &v), CUDA_SUCCESS);
}

TEST(freed_pool_memory_stays_charged_until_released)
{
	long long base = used_on(0), mock_base = tesseraMockUsedBytes(0);
	CUstream s;
	CUmemoryPool def;
	CHECK_INT(cuStreamCreate(&s, 0), CUDA_SUCCESS);
	CHECK_INT(cuDeviceGetMemPool(&def, 0), CUDA_SUCCESS);
	set_threshold(def, (cuuint64_t)-1);   /* keep everything, as many frameworks do */

	CUdeviceptr a = 0, b = 0;
	CHECK_INT(cuMemAllocAsync(&a, 300 * MiB, s), CUDA_SUCCESS);
	CHECK_INT(used_on(0), base + 300 * MiB);
	CHECK_INT(cuMemFreeAsync(a, s), CUDA_SUCCESS);
	CHECK_INT(cuStreamSynchronize(s), CUDA_SUCCESS);
	/* the pool still holds it, so the share still counts it */
	CHECK_INT(pool_attr(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 300 * MiB);
	CHECK_INT(used_on(0), base + 300 * MiB);
	CHECK_INT(tesseraMockUsedBytes(0), mock_base + 300 * MiB);

	/* served from the reserve: nothing new charged */
	CHECK_INT(cuMemAllocAsync(&b, 200 * MiB, s), CUDA_SUCCESS);
	CHECK_INT(used_on(0), base + 300 * MiB);
	CHECK_INT(cuMemFreeAsync(b, s), CUDA_SUCCESS);

	/* threshold 0: the next synchronization gives it back */
	set_threshold(def, 0);
	CHECK_INT(used_on(0), base + 300 * MiB);
	CHECK_INT(cuCtxSynchronize(), CUDA_SUCCESS);
	CHECK_INT(used_on(0), base);
	CHECK_INT(tesseraMockUsedBytes(0), mock_base);
	CHECK_INT(cuStreamDestroy_v2(s), CUDA_SUCCESS);
}

TEST(pool_growth_must_fit_the_share)
{
	long long base = used_on(0), mock_base = tesseraMockUsedBytes(0);
	CUstream s;
	CUmemoryPool def, pool;
	CHECK_INT(cuStreamCreate(&s, 0), CUDA_SUCCESS);
	CHECK_INT(cuDeviceGetMemPool(&def, 0), CUDA_SUCCESS);
	set_threshold(def, (cuuint64_t)-1);
	CUmemPoolProps props;
	memset(&props, 0, sizeof(props));
	props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
	props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	props.location.id = 0;
	CHECK_INT(cuMemPoolCreate(&pool, &props), CUDA_SUCCESS);
	set_threshold(pool, (cuuint64_t)-1);

	/* A pool grows in 2 MiB steps: 1 byte costs 2 MiB of the share. */
	CUdeviceptr tiny = 0;
	CHECK_INT(cuMemAllocFromPoolAsync(&tiny, 1, pool, s), CUDA_SUCCESS);
	CHECK_INT(used_on(0), base + 2 * MiB);
	CHECK_INT(cuMemFreeAsync(tiny, s), CUDA_SUCCESS);

	/* The default pool keeps 600 MiB idle... */
	CUdeviceptr a = 0, b = 0, c = 0;
	CHECK_INT(cuMemAllocAsync(&a, 600 * MiB, s), CUDA_SUCCESS);
	CHECK_INT(cuMemFreeAsync(a, s), CUDA_SUCCESS);
	CHECK_INT(used_on(0), base + 602 * MiB);
	/* ...which another pool's growth may take back: the idle reserve is
	 * trimmed before the allocation is refused. */
	CHECK_INT(cuMemAllocFromPoolAsync(&b, 600 * MiB, pool, s), CUDA_SUCCESS);
	CHECK_INT(pool_attr(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 0);
	CHECK_INT(used_on(0), base + 600 * MiB);
	/* Memory in use is never taken: past the share is out of memory,
	 * and the pool has not grown. */
	long long reserved = pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT);
	CHECK_INT(cuMemAllocFromPoolAsync(&c, 500 * MiB, pool, s), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_INT(cuMemAllocAsync(&c, 500 * MiB, s), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_INT(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), reserved);
	CHECK_INT(tesseraMockUsedBytes(0), mock_base + 600 * MiB);

	/* Destroying a pool with a live allocation keeps its memory until
	 * that allocation is freed. */
	CHECK_INT(cuMemPoolDestroy(pool), CUDA_SUCCESS);
	CHECK_INT(used_on(0), base + 600 * MiB);
	CHECK_INT(cuMemFreeAsync(b, s), CUDA_SUCCESS);
	CHECK_INT(cuStreamSynchronize(s), CUDA_SUCCESS);
	CHECK_INT(used_on(0), base);
	CHECK_INT(tesseraMockUsedBytes(0), mock_base);

	/* cuMemPoolTrimTo gives idle reserve back at once. */
	CHECK_INT(cuMemAllocAsync(&a, 100 * MiB, s), CUDA_SUCCESS);
	CHECK_INT(cuMemFreeAsync(a, s), CUDA_SUCCESS);
	CHECK_INT(used_on(0), base + 100 * MiB);
	CHECK_INT(cuMemPoolTrimTo(def, 0), CUDA_SUCCESS);
	CHECK_INT(used_on(0), base);
	set_threshold(def, 0);
	CHECK_INT(cuStreamDestroy_v2(s), CUDA_SUCCESS);
}

TEST(stream_ordered_alloc_lands_on_the_streams_device)
{
	long long base0 = used_on(0), base1 = used_on(1);
	CUstream s1;
	CHECK_INT(cuCtxPushCurrent_v2(ctx1), CUDA_SUCCESS);
	CHECK_INT(cuStreamCreate(&s1, 0), CUDA_SUCCESS);
	CHECK_INT(cuCtxPopCurrent_v2(NULL), CUDA_SUCCESS);
	/* device 0 is current; the stream belongs to device 1 (256 MiB) */
	CUdeviceptr a = 0;
	CHECK_INT(cuMemAllocAsync(&a, 512 * MiB, s1), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_INT(cuMemAllocAsync(&a, 128 * MiB, s1), CUDA_SUCCESS);
	CHECK_INT(used_on(1), base1 + 128 * MiB);
	CHECK_INT(used_on(0), base0);
	CHECK_INT(cuMemFreeAsync(a, s1), CUDA_SUCCESS);
	CHECK_INT(cuStreamSynchronize(s1), CUDA_SUCCESS);
	CHECK_INT(used_on(1), base1);
	/* cuMemFree_v2 frees stream-ordered memory as well */
	CHECK_INT(cuMemAllocAsync(&a, 64 * MiB, NULL), CUDA_SUCCESS);
	CHECK_INT(used_on(0), base0 + 64 * MiB);
	CHECK_INT(cuMemFree_v2(a), CUDA_SUCCESS);
	CHECK_INT(used_on(0), base0);
	/* the special default-stream handles mean the current device */
	CHECK_INT(cuMemAllocAsync(&a, 64 * MiB, CU_STREAM_PER_THREAD), CUDA_SUCCESS);
	CHECK_INT(used_on(0), base0 + 64 * MiB);
	CHECK_INT(cuMemFreeAsync(a, CU_STREAM_LEGACY), CUDA_SUCCESS);
	CHECK_INT(cuCtxSynchronize(), CUDA_SUCCESS);
	CHECK_INT(used_on(0), base0);
	CHECK_INT(cuStreamDestroy_v2(s1), CUDA_SUCCESS);
}

TEST(vmm_memory_is_held_while_mapped)
{
	long long base = used_on(0), mock_base = tesseraMockUsedBytes(0);
	CUmemAllocationProp prop;
	memset(&prop, 0, sizeof(prop));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = 0;
	CUmemGenericAllocationHandle h1 = 0, h2 = 0, again = 0;
	CUdeviceptr va = 0;
	CHECK_INT(cuMemAddressReserve(&va, 512 * MiB, 0, 0, 0), CUDA_SUCCESS);
	CHECK_INT(cuMemCreate(&h1, 256 * MiB, &prop, 0), CUDA_SUCCESS);
	CHECK_INT(cuMemCreate(&h2, 256 * MiB, &prop, 0), CUDA_SUCCESS);
	CHECK_INT(cuMemMap(va, 256 * MiB, 0, h1, 0), CUDA_SUCCESS);
	CHECK_INT(cuMemMap(va + 256 * MiB, 256 * MiB, 0, h2, 0), CUDA_SUCCESS);
	/* The usual pattern: release right after mapping. The memory stays
	 * in use until it is unmapped. */
	CHECK_INT(cuMemRelease(h1), CUDA_SUCCESS);
	CHECK_INT(cuMemRelease(h2), CUDA_SUCCESS);
	CHECK_INT(used_on(0), base + 512 * MiB);
	CHECK_INT(tesseraMockUsedBytes(0), mock_base + 512 * MiB);
	/* a retained handle holds it past the unmap */
	CHECK_INT(cuMemRetainAllocationHandle(&again, (void *)(uintptr_t)(va + 300 * MiB)),
		  CUDA_SUCCESS);
	CHECK_INT(again, h2);
	/* one unmap over both mappings */
	CHECK_INT(cuMemUnmap(va, 512 * MiB), CUDA_SUCCESS);
	CHECK_INT(used_on(0), base + 256 * MiB);
	CHECK_INT(tesseraMockUsedBytes(0), mock_base + 256 * MiB);
	CHECK_INT(cuMemRelease(again), CUDA_SUCCESS);
	CHECK_INT(used_on(0), base);
	CHECK_INT(tesseraMockUsedBytes(0), mock_base);
	CHECK_INT(cuMemAddressFree(va, 512 * MiB), CUDA_SUCCESS);
}

/* Threads allocating and freeing through pools, plain allocations and
 * synchronizations at once: every byte comes back, and no call fails
 * while the share has room. */
static int worker_failures;

static void *pool_worker(void *arg)
{
	int id = (int)(intptr_t)arg;
	CUstream s;
	if (cuCtxSetCurrent(ctx0) != CUDA_SUCCESS || cuStreamCreate(&s, 0) != CUDA_SUCCESS) {
		__atomic_add_fetch(&worker_failures, 1, __ATOMIC_RELAXED);
		return NULL;
	}
	for (int i = 0; i < 400; i++) {
		CUdeviceptr a = 0, b = 0;
		size_t n = (size_t)(1 + (i + id) % 7) * MiB;
		if (cuMemAllocAsync(&a, n, s) != CUDA_SUCCESS || cuMemAlloc_v2(&b, n) != CUDA_SUCCESS ||
		    cuMemFreeAsync(a, s) != CUDA_SUCCESS || cuMemFree_v2(b) != CUDA_SUCCESS)
			__atomic_add_fetch(&worker_failures, 1, __ATOMIC_RELAXED);
		if (i % 50 == id)
			cuStreamSynchronize(s);
	}
	cuStreamSynchronize(s);
	cuStreamDestroy_v2(s);
	return NULL;
}

TEST(concurrent_pool_use_gives_everything_back)
{
	long long base = used_on(0), mock_base = tesseraMockUsedBytes(0);
	pthread_t t[4];
	for (int i = 0; i < 4; i++)
		CHECK_INT(pthread_create(&t[i], NULL, pool_worker, (void *)(intptr_t)i), 0);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	CHECK_INT(worker_failures, 0);
	CHECK_INT(cuCtxSynchronize(), CUDA_SUCCESS);
	CHECK_INT(used_on(0), base);
	CHECK_INT(tesseraMockUsedBytes(0), mock_base);
}

int main(void)
{
	setenv("TESSERA_MOCK_GPUS", "2x8GiB", 1);
	if (cuInit(0) != CUDA_SUCCESS) {
		fprintf(stderr, "mock driver did not initialize\n");
		return 1;
	}
	char uuid0[64], uuid1[64], conf[512];
	ft_uuid(0, uuid0, sizeof(uuid0));
	ft_uuid(1, uuid1, sizeof(uuid1));
	snprintf(conf, sizeof(conf),
		 "version = 1\ndevices = 2\n"
		 "device.0.uuid = %s\ndevice.0.memory_limit = 1GiB\n"
		 "device.1.uuid = %s\ndevice.1.memory_limit = 256MiB\n", uuid0, uuid1);
	dir = ft_setup(conf);
	if (cuDevicePrimaryCtxRetain(&ctx1, 1) != CUDA_SUCCESS ||
	    cuDevicePrimaryCtxRetain(&ctx0, 0) != CUDA_SUCCESS ||
	    cuCtxSetCurrent(ctx0) != CUDA_SUCCESS) {
		fprintf(stderr, "no context\n");
		return 1;
	}
	RUN(freed_pool_memory_stays_charged_until_released);
	RUN(pool_growth_must_fit_the_share);
	RUN(stream_ordered_alloc_lands_on_the_streams_device);
	RUN(vmm_memory_is_held_while_mapped);
	RUN(concurrent_pool_use_gives_everything_back);
	ft_cleanup(dir);
	return testlib_done();
}
