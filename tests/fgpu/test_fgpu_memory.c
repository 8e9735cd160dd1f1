/* Memory accounting and limits for every allocation family, through the
 * preloaded shim over the mock driver. Device 0 (8 GiB) gets a 1 GiB share
 * and a 64 MiB context overhead; device 1 is not given to the session. */
#include "fgpu/fgpu_test.h"
#include "testlib.h"

static const char *dir;
static CUcontext ctx;

TEST(reports_the_share)
{
	size_t f = 0, t = 0, total = 0;
	CHECK_INT(cuMemGetInfo_v2(&f, &t), CUDA_SUCCESS);
	CHECK_INT(t, 1 * GiB);
	CHECK_INT(f, 1 * GiB - 64 * MiB);       /* the context is counted */
	CHECK_INT(cuDeviceTotalMem_v2(&total, 0), CUDA_SUCCESS);
	CHECK_INT(total, 1 * GiB);
	CHECK_INT(cuMemGetInfo_v2(NULL, &t), CUDA_SUCCESS);   /* NULL tolerated */
	CHECK_INT(cuMemGetInfo_v2(&f, NULL), CUDA_SUCCESS);
	CHECK_INT(cuMemGetInfo_v2(NULL, NULL), CUDA_SUCCESS);
	unsigned int f1 = 0, t1 = 0, tot1 = 0;
	CHECK_INT(cuMemGetInfo(&f1, &t1), CUDA_SUCCESS);      /* v1 ABI */
	CHECK_INT(t1, 1 * GiB);
	CHECK_INT(cuDeviceTotalMem(&tot1, 0), CUDA_SUCCESS);
	CHECK_INT(tot1, 1 * GiB);
	/* the device not given to the session has no memory */
	CHECK_INT(cuDeviceTotalMem_v2(&total, 1), CUDA_SUCCESS);
	CHECK_INT(total, 0);
}

TEST(linear_alloc_within_and_past_limit)
{
	long long base = ft_used(), mock_base = tesseraMockUsedBytes(0);
	CUdeviceptr a = 0, b = 0;
	CHECK_INT(cuMemAlloc_v2(&a, 512 * MiB), CUDA_SUCCESS);
	CHECK_INT(ft_used(), base + 512 * MiB);
	/* past the share: OOM and nothing allocated on the device */
	CHECK_INT(cuMemAlloc_v2(&b, 512 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_INT(tesseraMockUsedBytes(0), mock_base + 512 * MiB);
	CHECK_INT(ft_used(), base + 512 * MiB);
	/* exactly up to the limit is fine */
	CHECK_INT(cuMemAlloc_v2(&b, (size_t)(1 * GiB - base - 512 * MiB)), CUDA_SUCCESS);
	size_t f = 1, t = 0;
	CHECK_INT(cuMemGetInfo_v2(&f, &t), CUDA_SUCCESS);
	CHECK_INT(f, 0);
	CHECK_INT(cuMemFree_v2(b), CUDA_SUCCESS);
	CHECK_INT(cuMemFree_v2(a), CUDA_SUCCESS);
	CHECK_INT(ft_used(), base);
	CHECK_INT(tesseraMockUsedBytes(0), mock_base);
	/* a huge request does not wrap */
	CHECK_INT(cuMemAlloc_v2(&a, (size_t)-1), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_INT(ft_used(), base);
}

TEST(v1_alloc_is_counted)
{
	long long base = ft_used();
	CUdeviceptr_v1 a = 0, b = 0;
	unsigned int pitch = 0;
	CHECK_INT(cuMemAlloc(&a, 256 * MiB), CUDA_SUCCESS);
	CHECK_INT(ft_used(), base + 256 * MiB);
	CHECK_INT(cuMemAlloc(&b, 1024 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_INT(cuMemAllocPitch(&b, &pitch, 1000, 1024, 4), CUDA_SUCCESS);
	CHECK_INT(pitch, 1024);
	CHECK_INT(ft_used(), base + 256 * MiB + 1024 * 1024);
	CHECK_INT(cuMemFree(b), CUDA_SUCCESS);
	CHECK_INT(cuMemFree(a), CUDA_SUCCESS);
	CHECK_INT(ft_used(), base);
}

TEST(pitch_alloc_counts_the_pitch)
{
	long long base = ft_used(), mock_base = tesseraMockUsedBytes(0);
	CUdeviceptr p = 0;
	size_t pitch = 0;
	CHECK_INT(cuMemAllocPitch_v2(&p, &pitch, 1000, 1000, 4), CUDA_SUCCESS);
	CHECK_INT(pitch, 1024);
	CHECK_INT(ft_used(), base + 1024 * 1000);
	CHECK_INT(cuMemAllocPitch_v2(&p, &pitch, 1 << 20, 1024, 4), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_INT(tesseraMockUsedBytes(0), mock_base + 1024 * 1000);
	CHECK_INT(cuMemFree_v2(p), CUDA_SUCCESS);
	CHECK_INT(ft_used(), base);
}

TEST(managed_alloc_is_counted)
{
	long long base = ft_used();
	CUdeviceptr p = 0;
	CHECK_INT(cuMemAllocManaged(&p, 300 * MiB, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
	CHECK_INT(ft_used(), base + 300 * MiB);
	CUdeviceptr q = 0;
	CHECK_INT(cuMemAllocManaged(&q, 800 * MiB, CU_MEM_ATTACH_GLOBAL), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_INT(cuMemFree_v2(p), CUDA_SUCCESS);
	CHECK_INT(ft_used(), base);
}

TEST(async_and_pool_allocs_are_counted)
{
	long long base = ft_used(), mock_base = tesseraMockUsedBytes(0);
	CUstream s;
	CHECK_INT(cuStreamCreate(&s, 0), CUDA_SUCCESS);
	CUdeviceptr a = 0, b = 0, c = 0;
	CHECK_INT(cuMemAllocAsync(&a, 200 * MiB, s), CUDA_SUCCESS);
	CHECK_INT(cuMemAllocAsync_ptsz(&b, 200 * MiB, s), CUDA_SUCCESS);
	CHECK_INT(ft_used(), base + 400 * MiB);

	CUmemoryPool def = NULL, pool = NULL;
	CHECK_INT(cuDeviceGetDefaultMemPool(&def, 0), CUDA_SUCCESS);
	CUmemPoolProps props;
	memset(&props, 0, sizeof(props));
	props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
	props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	props.location.id = 0;
	CHECK_INT(cuMemPoolCreate(&pool, &props), CUDA_SUCCESS);
	CHECK_INT(cuMemAllocFromPoolAsync(&c, 200 * MiB, pool, s), CUDA_SUCCESS);
	CHECK_INT(ft_used(), base + 600 * MiB);
	CUdeviceptr d = 0;
	CHECK_INT(cuMemAllocFromPoolAsync(&d, 400 * MiB, def, s), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_INT(cuMemAllocFromPoolAsync_ptsz(&d, 400 * MiB, pool, s), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_INT(cuMemAllocAsync(&d, 400 * MiB, s), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_INT(tesseraMockUsedBytes(0), mock_base + 600 * MiB);
	CHECK_INT(cuMemFreeAsync(a, s), CUDA_SUCCESS);
	CHECK_INT(cuMemFreeAsync_ptsz(b, s), CUDA_SUCCESS);
	CHECK_INT(cuMemFreeAsync(c, s), CUDA_SUCCESS);
	/* the pools keep the memory until a synchronization releases it
	 * (test_fgpu_pools has the details) */
	CHECK_INT(ft_used(), base + 600 * MiB);
	CHECK_INT(cuStreamSynchronize(s), CUDA_SUCCESS);
	CHECK_INT(ft_used(), base);
	CHECK_INT(tesseraMockUsedBytes(0), mock_base);

	/* a pool on a device the session was not given allocates nothing */
	props.location.id = 1;
	CUmemoryPool pool1 = NULL;
	CHECK_INT(cuMemPoolCreate(&pool1, &props), CUDA_SUCCESS);
	CHECK_INT(cuMemAllocFromPoolAsync(&d, 1 * MiB, pool1, s), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_INT(tesseraMockUsedBytes(1), 0);
}

TEST(vmm_create_release_is_counted)
{
	long long base = ft_used(), mock_base = tesseraMockUsedBytes(0);
	CUmemAllocationProp prop;
	memset(&prop, 0, sizeof(prop));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = 0;
	CUmemGenericAllocationHandle h = 0, h2 = 0;
	CHECK_INT(cuMemCreate(&h, 512 * MiB, &prop, 0), CUDA_SUCCESS);
	CHECK_INT(ft_used(), base + 512 * MiB);
	CHECK_INT(cuMemCreate(&h2, 512 * MiB, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_INT(tesseraMockUsedBytes(0), mock_base + 512 * MiB);
	CHECK_INT(cuMemRelease(h), CUDA_SUCCESS);
	CHECK_INT(ft_used(), base);
	prop.location.id = 1;
	CHECK_INT(cuMemCreate(&h2, 2 * MiB, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
}

TEST(arrays_are_counted)
{
	long long base = ft_used(), mock_base = tesseraMockUsedBytes(0);
	CUDA_ARRAY_DESCRIPTOR d2 = { 4096, 4096, CU_AD_FORMAT_FLOAT, 4 };   /* 256 MiB */
	CUarray a = NULL, b = NULL;
	CHECK_INT(cuArrayCreate_v2(&a, &d2), CUDA_SUCCESS);
	CHECK_INT(ft_used(), base + 256 * MiB);
	CUDA_ARRAY3D_DESCRIPTOR d3 = { 1024, 1024, 256, CU_AD_FORMAT_UNSIGNED_INT8, 4, 0 }; /* 1 GiB */
	CHECK_INT(cuArray3DCreate_v2(&b, &d3), CUDA_ERROR_OUT_OF_MEMORY);
	d3.Depth = 64;                                                        /* 256 MiB */
	CHECK_INT(cuArray3DCreate_v2(&b, &d3), CUDA_SUCCESS);
	CHECK_INT(ft_used(), base + 512 * MiB);
	CUmipmappedArray m = NULL;
	CUDA_ARRAY3D_DESCRIPTOR dm = { 1024, 1024, 0, CU_AD_FORMAT_FLOAT, 1, 0 };
	/* 4 MiB + 1 MiB + 256 KiB */
	CHECK_INT(cuMipmappedArrayCreate(&m, &dm, 3), CUDA_SUCCESS);
	CHECK_INT(ft_used(), base + 512 * MiB + 4 * MiB + 1 * MiB + 256 * 1024);
	CHECK_INT(tesseraMockUsedBytes(0), mock_base + 512 * MiB + 4 * MiB + 1 * MiB + 256 * 1024);
	CUmipmappedArray m2 = NULL;
	dm.Width = dm.Height = 16384;   /* 1 GiB at level 0 */
	CHECK_INT(cuMipmappedArrayCreate(&m2, &dm, 2), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_INT(cuMipmappedArrayDestroy(m), CUDA_SUCCESS);
	CHECK_INT(cuArrayDestroy(b), CUDA_SUCCESS);
	CHECK_INT(cuArrayDestroy(a), CUDA_SUCCESS);
	CHECK_INT(ft_used(), base);
	CHECK_INT(tesseraMockUsedBytes(0), mock_base);
}

TEST(failed_free_changes_nothing)
{
	long long base = ft_used();
	CHECK_INT(cuMemFree_v2(0xdead0000ULL), CUDA_ERROR_INVALID_VALUE);
	CHECK_INT(ft_used(), base);
}

TEST(unlisted_device_gets_nothing)
{
	CUcontext c1;
	CHECK_INT(cuDevicePrimaryCtxRetain(&c1, 1), CUDA_ERROR_OUT_OF_MEMORY);
	CUcontext c2;
	/* creating a context there is refused too: its overhead cannot fit */
	CHECK_INT(cuCtxCreate_v2(&c2, 0, 1), CUDA_ERROR_OUT_OF_MEMORY);
	/* ...whichever form of cuCtxCreate makes it */
	CHECK_INT(cuCtxCreate_v3(&c2, NULL, 0, 0, 1), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_INT(cuCtxCreate_v4(&c2, NULL, 0, 1), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_INT(tesseraMockUsedBytes(1), 0);
}

int main(void)
{
	setenv("TESSERA_MOCK_GPUS", "2x8GiB", 1);
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
	if (cuCtxCreate_v2(&ctx, 0, 0) != CUDA_SUCCESS) {
		fprintf(stderr, "no context\n");
		return 1;
	}
	RUN(reports_the_share);
	RUN(linear_alloc_within_and_past_limit);
	RUN(v1_alloc_is_counted);
	RUN(pitch_alloc_counts_the_pitch);
	RUN(managed_alloc_is_counted);
	RUN(async_and_pool_allocs_are_counted);
	RUN(vmm_create_release_is_counted);
	RUN(arrays_are_counted);
	RUN(failed_free_changes_nothing);
	RUN(unlisted_device_gets_nothing);
	ft_cleanup(dir);
	return testlib_done();
}
