/* Mock CUDA driver: stream-ordered allocation and memory pools (the
 * default pool of each device, created pools, release thresholds), and the
 * frees of device pointers, which return a pool allocation to its pool.
 * See mock_cuda.c for what the mock simulates. */
#include <stdlib.h>

#include "gpu/mock/mock_cuda.h"

struct CUmemPoolHandle_st mock_default_pool[MOCK_MAX_DEVICES];
CUmemoryPool mock_pools;                 /* every live pool, defaults too */
CUmemoryPool mock_cur_pool[MOCK_MAX_DEVICES];

/* ---- stream-ordered pools ---------------------------------------------- */

uint64_t mock_grain_up(uint64_t n)
{
	return (n + MOCK_POOL_GRAIN - 1) & ~(MOCK_POOL_GRAIN - 1);
}

/* Gives back to the device what pool reserves beyond max(used, keep),
 * rounded up to the grain: a pool never frees memory it has handed out,
 * and never grows here. */
static void mock_pool_shrink(CUmemoryPool pool, uint64_t keep)
{
	if (keep < pool->used)
		keep = pool->used;
	if (keep >= pool->reserved)
		return;
	keep = mock_grain_up(keep);
	if (keep >= pool->reserved)
		return;
	mock_usage_add(pool->dev, -(int64_t)(pool->reserved - keep));
	pool->reserved = keep;
}

/* What the driver does at a synchronization: every pool holding more
 * than its release threshold trims down to it. All pools of the process
 * are visited, which is at least what the real driver releases. */
void mock_pools_release(void)
{
	for (CUmemoryPool p = mock_pools; p; p = p->next)
		if (p->reserved > p->threshold)
			mock_pool_shrink(p, p->threshold);
}

static bool mock_pool_ok(CUmemoryPool pool)
{
	return pool && pool->magic == MOCK_MAGIC_POOL;
}

/* Gives a destroyed pool's memory back and forgets it: its last
 * allocation is gone, so nothing can name it any more. */
static void mock_pool_drop(CUmemoryPool pool)
{
	mock_pool_shrink(pool, 0);
	for (CUmemoryPool *pp = &mock_pools; *pp; pp = &(*pp)->next)
		if (*pp == pool) {
			*pp = pool->next;
			break;
		}
	free(pool);
}

/* Serves bytes from pool's reserve, growing the reserve by what is
 * missing, in whole grains, when the free part is too small. */
static CUresult mock_pool_alloc(CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool)
{
	REQUIRE_INIT();
	if (!dptr || bytes == 0)
		return CUDA_ERROR_INVALID_VALUE;
	/* far past any device; keeps the grain arithmetic inside int64_t */
	if (bytes > (size_t)(INT64_MAX / 2))
		return CUDA_ERROR_OUT_OF_MEMORY;
	uint64_t n = bytes, avail = pool->reserved - pool->used, grow = 0;
	if (avail < n)
		grow = mock_grain_up(n - avail);
	if (grow > 0 && mock_usage_add(pool->dev, (int64_t)grow) < 0)
		return CUDA_ERROR_OUT_OF_MEMORY;
	uint64_t p = mock_next_ptr[pool->dev];
	CUresult rc = mock_track(MA_POOL, pool->dev, p, (int64_t)n);
	if (rc != CUDA_SUCCESS) {
		if (grow > 0)
			mock_usage_add(pool->dev, -(int64_t)grow);
		return rc;
	}
	mock_allocs[mock_nallocs - 1].pool = pool;
	mock_next_ptr[pool->dev] += (n + 511) & ~511ULL;
	pool->reserved += grow;
	pool->used += n;
	if (pool->reserved > pool->reserved_high)
		pool->reserved_high = pool->reserved;
	if (pool->used > pool->used_high)
		pool->used_high = pool->used;
	*dptr = p;
	return CUDA_SUCCESS;
}

/* Frees any device pointer. A pool allocation returns to its pool, whose
 * reserve stays taken from the device; sync (cuMemFree, which waits for
 * the device as the real one does) then applies the pool's release
 * threshold. A destroyed pool goes with its last allocation. */
static CUresult mock_free(CUdeviceptr p, bool sync)
{
	REQUIRE_INIT();
	if (mock_glive_free(p))
		return CUDA_SUCCESS;
	struct mock_alloc *a = mock_find(MA_POOL, p);
	if (!a)
		return mock_give(MA_PTR, p);
	CUmemoryPool pool = a->pool;
	pool->used -= (uint64_t)a->bytes;
	mock_untrack(a);
	if (pool->destroyed) {
		if (pool->used == 0)
			mock_pool_drop(pool);
	} else if (sync && pool->reserved > pool->threshold) {
		mock_pool_shrink(pool, pool->threshold);
	}
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuMemFree_v2(CUdeviceptr p)
{
	if (p == 0)
		return CUDA_SUCCESS;
	return LOCKED(mock_free(p, true));
}

MOCK_API CUresult cuMemFree(CUdeviceptr_v1 p)
{
	if (p == 0)
		return CUDA_SUCCESS;
	return LOCKED(mock_inited ? mock_give(MA_PTR_V1, p) : CUDA_ERROR_NOT_INITIALIZED);
}

/* The stream's device (a default stream's: the current context's) gives
 * its current pool. In a capture it is an allocation node instead, which
 * takes nothing now (default streams do not capture). */
static CUresult mock_alloc_async(CUdeviceptr *dptr, size_t bytes, CUstream s)
{
	REQUIRE_INIT();
	if (s && s->capture != CU_STREAM_CAPTURE_STATUS_NONE)
		return mock_capture_alloc(dptr, bytes, s->ctx->dev, s);
	int dev = s ? s->ctx->dev : mock_current_dev();
	if (dev < 0)
		return CUDA_ERROR_INVALID_CONTEXT;
	return mock_pool_alloc(dptr, bytes, mock_cur_pool[dev]);
}

/* Captured, the allocation node is on the pool's device. */
static CUresult mock_alloc_from_pool(CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool,
				     CUstream s)
{
	REQUIRE_INIT();
	if (s && s->capture != CU_STREAM_CAPTURE_STATUS_NONE)
		return mock_capture_alloc(dptr, bytes, pool->dev, s);
	return mock_pool_alloc(dptr, bytes, pool);
}

/* In a capture a free is a free node, which frees nothing now. */
static CUresult mock_free_async(CUdeviceptr p, CUstream s)
{
	REQUIRE_INIT();
	if (s && s->capture != CU_STREAM_CAPTURE_STATUS_NONE)
		return mock_capture_free(p, s);
	return mock_free(p, false);
}

MOCK_API CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytes, CUstream s)
{
	if (!mock_stream(&s))
		return CUDA_ERROR_INVALID_HANDLE;
	return LOCKED(mock_alloc_async(dptr, bytes, s));
}

MOCK_API CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytes, CUstream s)
{
	return cuMemAllocAsync(dptr, bytes, s);
}

MOCK_API CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytes,
					  CUmemoryPool pool, CUstream s)
{
	if (!mock_pool_ok(pool) || !mock_stream(&s))
		return CUDA_ERROR_INVALID_HANDLE;
	return LOCKED(mock_alloc_from_pool(dptr, bytes, pool, s));
}

MOCK_API CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytes,
					       CUmemoryPool pool, CUstream s)
{
	return cuMemAllocFromPoolAsync(dptr, bytes, pool, s);
}

MOCK_API CUresult cuMemFreeAsync(CUdeviceptr p, CUstream s)
{
	if (!mock_stream(&s))
		return CUDA_ERROR_INVALID_HANDLE;
	if (p == 0)
		return CUDA_SUCCESS;
	return LOCKED(mock_free_async(p, s));
}

MOCK_API CUresult cuMemFreeAsync_ptsz(CUdeviceptr p, CUstream s)
{
	return cuMemFreeAsync(p, s);
}

static CUresult mock_pool_create(CUmemoryPool *pool, const CUmemPoolProps *props)
{
	REQUIRE_INIT();
	if (!pool || !props || props->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
		return CUDA_ERROR_INVALID_VALUE;
	if (!mock_valid_dev(props->location.id))
		return CUDA_ERROR_INVALID_DEVICE;
	CUmemoryPool p = calloc(1, sizeof(*p));
	if (!p)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*p = (struct CUmemPoolHandle_st){ .magic = MOCK_MAGIC_POOL,
		.dev = props->location.id, .reuse = { 1, 1, 1 }, .next = mock_pools };
	mock_pools = p;
	*pool = p;
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props)
{
	return LOCKED(mock_pool_create(pool, props));
}

/* The handle dies now; the memory of live allocations from the pool stays
 * theirs until they are freed, as with the real driver. */
static CUresult mock_pool_destroy(CUmemoryPool pool)
{
	REQUIRE_INIT();
	if (!mock_pool_ok(pool) || pool->is_default)
		return CUDA_ERROR_INVALID_VALUE;
	if (mock_cur_pool[pool->dev] == pool)
		mock_cur_pool[pool->dev] = &mock_default_pool[pool->dev];
	pool->magic = 0;
	pool->destroyed = true;
	if (pool->used == 0)
		mock_pool_drop(pool);
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
	return LOCKED(mock_pool_destroy(pool));
}

static CUresult mock_pool_trim(CUmemoryPool pool, size_t keep)
{
	REQUIRE_INIT();
	if (!mock_pool_ok(pool))
		return CUDA_ERROR_INVALID_VALUE;
	mock_pool_shrink(pool, keep);
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
	return LOCKED(mock_pool_trim(pool, minBytesToKeep));
}

static CUresult mock_pool_get(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
	REQUIRE_INIT();
	if (!mock_pool_ok(pool) || !value)
		return CUDA_ERROR_INVALID_VALUE;
	if (attr >= 1 && attr <= MOCK_POOL_REUSE_ATTRS) {
		*(int *)value = pool->reuse[attr - 1];
		return CUDA_SUCCESS;
	}
	cuuint64_t v;
	switch (attr) {
	case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: v = pool->threshold; break;
	case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: v = pool->reserved; break;
	case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: v = pool->reserved_high; break;
	case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: v = pool->used; break;
	case CU_MEMPOOL_ATTR_USED_MEM_HIGH: v = pool->used_high; break;
	default: return CUDA_ERROR_INVALID_VALUE;
	}
	*(cuuint64_t *)value = v;
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr,
					void *value)
{
	return LOCKED(mock_pool_get(pool, attr, value));
}

/* A new threshold applies at the next synchronization, not now. The high
 * marks can only be reset (to the current value), by writing 0. */
static CUresult mock_pool_set(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
	REQUIRE_INIT();
	if (!mock_pool_ok(pool) || !value)
		return CUDA_ERROR_INVALID_VALUE;
	if (attr >= 1 && attr <= MOCK_POOL_REUSE_ATTRS) {
		pool->reuse[attr - 1] = *(const int *)value;
		return CUDA_SUCCESS;
	}
	cuuint64_t v = *(const cuuint64_t *)value;
	switch (attr) {
	case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
		pool->threshold = v;
		return CUDA_SUCCESS;
	case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
		if (v != 0)
			return CUDA_ERROR_INVALID_VALUE;
		pool->reserved_high = pool->reserved;
		return CUDA_SUCCESS;
	case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
		if (v != 0)
			return CUDA_ERROR_INVALID_VALUE;
		pool->used_high = pool->used;
		return CUDA_SUCCESS;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
}

MOCK_API CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr,
					void *value)
{
	return LOCKED(mock_pool_set(pool, attr, value));
}

MOCK_API CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice dev)
{
	REQUIRE_INIT();
	if (!pool)
		return CUDA_ERROR_INVALID_VALUE;
	if (!mock_valid_dev(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	*pool = &mock_default_pool[dev];
	return CUDA_SUCCESS;
}

static CUresult mock_get_mem_pool(CUmemoryPool *pool, CUdevice dev)
{
	REQUIRE_INIT();
	if (!pool)
		return CUDA_ERROR_INVALID_VALUE;
	if (!mock_valid_dev(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	*pool = mock_cur_pool[dev];
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
	return LOCKED(mock_get_mem_pool(pool, dev));
}

static CUresult mock_set_mem_pool(CUdevice dev, CUmemoryPool pool)
{
	REQUIRE_INIT();
	if (!mock_valid_dev(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	if (!mock_pool_ok(pool) || pool->dev != dev)
		return CUDA_ERROR_INVALID_VALUE;
	mock_cur_pool[dev] = pool;
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool)
{
	return LOCKED(mock_set_mem_pool(dev, pool));
}
