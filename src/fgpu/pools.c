/* Stream-ordered allocations and memory pools (docs/fgpu.md, "Memory
 * pools"): a pool is charged what the driver has reserved for it. */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fgpu/shim.h"

/* ---- hooks: stream-ordered allocator and pools ---------------------------- */

/* A memory pool keeps memory reserved after cuMemFreeAsync, up to its
 * release threshold, and gives it back at the next synchronization (or
 * cuMemPoolTrimTo). What the GPU really holds for a pool is its reserve,
 * so that is what a pool is charged: each pool's charge follows
 * CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT ("settling"), and the allocations
 * it serves are not charged one by one. An allocation that the pool's
 * spare reserve can serve costs nothing new; one that makes the pool grow
 * must fit the share first. Drivers without the attribute are charged by
 * the allocations instead (charge = live bytes). */
#define FGPU_MAX_POOLS 256

struct fgpu_pool {
	CUmemoryPool h;          /* NULL: free slot */
	CUdevice ord;            /* CUDA ordinal the pool allocates on */
	int idx;                 /* region index, -1: not the session's device */
	int64_t charged;         /* bytes charged to the region for this pool */
	int64_t live;            /* bytes of live allocations it served */
	bool destroyed;          /* cuMemPoolDestroy'ed with allocations left */
};

static struct fgpu_pool fgpu_pools[FGPU_MAX_POOLS];
static pthread_mutex_t fgpu_pool_lock = PTHREAD_MUTEX_INITIALIZER;
/* Some pool holds more than its live allocations: synchronization points
 * settle the pools (read without the lock: a stale value only delays). */
static bool fgpu_pool_slack;
/* Some allocation was served by a pool: frees must look there first. */
static bool fgpu_pool_ptrs;

/* Both flags are written under fgpu_pool_lock and read without it. */
static void fgpu_pool_flag(bool *flag, bool v)
{
	__atomic_store_n(flag, v, __ATOMIC_RELEASE);
}

/* After p changed: notes when it holds more than its live allocations. */
static void fgpu_pool_note_slack_locked(const struct fgpu_pool *p)
{
	if (p->h && p->charged > p->live)
		fgpu_pool_flag(&fgpu_pool_slack, true);
}

void fgpu_pool_reset_child(void)
{
	/* The pools and their memory belong to the parent. */
	memset(fgpu_pools, 0, sizeof(fgpu_pools));
	pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
	fgpu_pool_lock = fresh;
	fgpu_pool_slack = false;
	fgpu_pool_ptrs = false;
}

/* The slot of pool h, registering it on ord when new (ord < 0: unknown,
 * not registered). NULL when unknown or the table is full. Caller holds
 * fgpu_pool_lock. */
static struct fgpu_pool *fgpu_pool_slot_locked(CUmemoryPool h, CUdevice ord)
{
	struct fgpu_pool *free_slot = NULL;
	for (int i = 0; i < FGPU_MAX_POOLS; i++) {
		struct fgpu_pool *p = &fgpu_pools[i];
		if (p->h == h && !p->destroyed)
			return p;
		if (!p->h && !free_slot)
			free_slot = p;
	}
	if (ord < 0 || !free_slot)
		return NULL;
	*free_slot = (struct fgpu_pool){ .h = h, .ord = ord, .idx = fgpu_cuda_index(ord) };
	return free_slot;
}

/* Brings p's charge to what the driver has reserved for it (never below
 * its live allocations). Truthful, not limited: the memory is held
 * whether or not it fits. Caller holds fgpu_pool_lock. */
static void fgpu_pool_settle_locked(struct fgpu_pool *p)
{
	cuuint64_t reserved = 0;
	int64_t target = p->live;
	if (!p->destroyed &&
	    REAL(cuMemPoolGetAttribute, p->h, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved) ==
		    CUDA_SUCCESS &&
	    reserved <= (cuuint64_t)INT64_MAX && (int64_t)reserved > target)
		target = (int64_t)reserved;
	if (p->destroyed && p->live > 0)
		target = p->charged;   /* released only with the last allocation */
	if (p->idx >= 0 && target > p->charged)
		fgpu_region_reserve(&fgpu_region, p->idx, target - p->charged, FGPU_UNLIMITED);
	else if (target < p->charged)
		fgpu_unreserve(p->idx, p->charged - target);
	p->charged = target;
	if (p->destroyed && p->live == 0)
		*p = (struct fgpu_pool){ 0 };
}

static void fgpu_pools_settle_locked(void)
{
	bool slack = false;
	for (int i = 0; i < FGPU_MAX_POOLS; i++) {
		struct fgpu_pool *p = &fgpu_pools[i];
		if (!p->h)
			continue;
		fgpu_pool_settle_locked(p);
		slack |= p->h && p->charged > p->live;
	}
	fgpu_pool_flag(&fgpu_pool_slack, slack);
}

/* At synchronization points and before usage is reported. */
static void fgpu_pools_settle(void)
{
	if (!fgpu_accounting() || !__atomic_load_n(&fgpu_pool_slack, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&fgpu_pool_lock);
	fgpu_pools_settle_locked();
	pthread_mutex_unlock(&fgpu_pool_lock);
}

/* Trims the unused reserve of this process's pools on region index idx
 * (but except's), then the graph allocator's there (pool lock, then
 * graph lock). Caller holds the pool lock. */
static void fgpu_pools_trim_idle_locked(const struct fgpu_pool *except, int idx)
{
	for (int i = 0; i < FGPU_MAX_POOLS; i++) {
		struct fgpu_pool *p = &fgpu_pools[i];
		if (!p->h || p == except || p->idx != idx || p->destroyed || p->charged <= p->live)
			continue;
		REAL(cuMemPoolTrimTo, p->h, 0);
		fgpu_pool_settle_locked(p);
	}
	fgpu_graphs_trim_idle(idx);
}

/* Makes room for need bytes on region index idx by trimming what is idle
 * there. Caller holds the lock. */
static int fgpu_pool_make_room_locked(struct fgpu_pool *except, int idx, int64_t need)
{
	fgpu_pools_trim_idle_locked(except, idx);
	return fgpu_region_reserve(&fgpu_region, idx, need, fgpu_limit(idx));
}

void fgpu_reclaim_idle(int idx)
{
	if (!fgpu_accounting() || idx < 0)
		return;
	pthread_mutex_lock(&fgpu_pool_lock);
	fgpu_pools_trim_idle_locked(NULL, idx);
	pthread_mutex_unlock(&fgpu_pool_lock);
}

void fgpu_reserves_settle(void)
{
	fgpu_pools_settle();
	fgpu_graphs_settle();
}

/* Ordinal of the device a stream's work runs on (its context's). */
static CUresult fgpu_stream_device(CUstream s, CUdevice *ord)
{
	if (!s || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD)
		return fgpu_current_device(ord);
	CUcontext ctx = NULL, cur = NULL;
	CUresult rc = REAL(cuStreamGetCtx, s, &ctx);
	if (rc == CUDA_ERROR_NOT_SUPPORTED)
		return fgpu_current_device(ord);   /* driver without it: best guess */
	if (rc != CUDA_SUCCESS)
		return rc;
	if (REAL(cuCtxGetCurrent, &cur) == CUDA_SUCCESS && cur == ctx)
		return fgpu_current_device(ord);
	if ((rc = REAL(cuCtxPushCurrent_v2, ctx)) != CUDA_SUCCESS)
		return rc;
	rc = fgpu_current_device(ord);
	REAL(cuCtxPopCurrent_v2, NULL);
	return rc;
}

enum fgpu_pool_call { POOL_ASYNC, POOL_ASYNC_PTSZ, POOL_FROM, POOL_FROM_PTSZ };

static CUresult fgpu_pool_call(enum fgpu_pool_call how, CUdeviceptr *dptr, size_t bytes,
			       CUmemoryPool pool, CUstream s)
{
	switch (how) {
	case POOL_ASYNC: return REAL(cuMemAllocAsync, dptr, bytes, s);
	case POOL_ASYNC_PTSZ: return REAL(cuMemAllocAsync_ptsz, dptr, bytes, s);
	case POOL_FROM: return REAL(cuMemAllocFromPoolAsync, dptr, bytes, pool, s);
	default: return REAL(cuMemAllocFromPoolAsync_ptsz, dptr, bytes, pool, s);
	}
}

static CUresult fgpu_pool_free_call(bool ptsz, CUdeviceptr p, CUstream s)
{
	return ptsz ? REAL(cuMemFreeAsync_ptsz, p, s) : REAL(cuMemFreeAsync, p, s);
}

/* An allocation from a pool: pool NULL means the current pool of the
 * stream's device (cuMemAllocAsync). On a stream being captured it is
 * not one: it becomes an allocation node of the graph, which takes
 * memory when the graph runs (graphs.c charges it then). */
static CUresult fgpu_pool_alloc(enum fgpu_pool_call how, CUdeviceptr *dptr, size_t bytes,
				CUmemoryPool pool, CUstream s)
{
	CUDA_INIT();
	bool ptsz = how == POOL_ASYNC_PTSZ || how == POOL_FROM_PTSZ;
	if (!fgpu_accounting() || !dptr || bytes == 0 || bytes > (size_t)INT64_MAX ||
	    fgpu_stream_capturing(ptsz && !s ? CU_STREAM_PER_THREAD : s, false))
		return fgpu_pool_call(how, dptr, bytes, pool, s);
	CUdevice ord = -1;
	CUresult rc;
	if (!pool) {
		if ((rc = fgpu_stream_device(ptsz && !s ? CU_STREAM_PER_THREAD : s, &ord)) !=
			    CUDA_SUCCESS ||
		    (rc = REAL(cuDeviceGetMemPool, &pool, ord)) != CUDA_SUCCESS)
			return rc;
	}
	pthread_mutex_lock(&fgpu_pool_lock);
	struct fgpu_pool *p = fgpu_pool_slot_locked(pool, -1);
	if (!p) {
		/* A pool first seen here (imported, or created before the
		 * shim could see it): it allocates on the stream's device. */
		pthread_mutex_unlock(&fgpu_pool_lock);
		if (ord < 0 && (rc = fgpu_stream_device(ptsz && !s ? CU_STREAM_PER_THREAD : s,
							&ord)) != CUDA_SUCCESS)
			return rc;
		pthread_mutex_lock(&fgpu_pool_lock);
		p = fgpu_pool_slot_locked(pool, ord);
	}
	if (!p || p->idx < 0 || !fgpu_region.r ||
	    fgpu_charge_context(p->idx) != CUDA_SUCCESS) {
		pthread_mutex_unlock(&fgpu_pool_lock);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	int idx = p->idx;
	fgpu_pool_settle_locked(p);
	int64_t n = (int64_t)bytes, spare = p->charged - p->live;
	int64_t need = n > spare ? n - spare : 0;
	if (need > 0 && fgpu_region_reserve(&fgpu_region, idx, need, fgpu_limit(idx)) < 0 &&
	    fgpu_pool_make_room_locked(p, idx, need) < 0) {
		pthread_mutex_unlock(&fgpu_pool_lock);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	rc = fgpu_pool_call(how, dptr, bytes, pool, s);
	if (rc != CUDA_SUCCESS) {
		fgpu_unreserve(idx, need);
		pthread_mutex_unlock(&fgpu_pool_lock);
		return rc;
	}
	p->charged += need;
	p->live += n;
	/* The pool may have grown by more than asked (its granularity): the
	 * growth beyond what was charged must fit too, else undo. */
	int64_t before = p->charged;
	fgpu_pool_settle_locked(p);
	bool over = p->charged > before &&
		    fgpu_region_used(&fgpu_region, idx) > fgpu_limit(idx);
	if (over || fgpu_track(K_POOLPTR, *dptr, (int)(p - fgpu_pools), n) < 0) {
		fgpu_pool_free_call(ptsz, *dptr, s);
		p->live -= n;
		REAL(cuMemPoolTrimTo, pool, (size_t)p->live);
		fgpu_pool_settle_locked(p);
		fgpu_pool_note_slack_locked(p);
		pthread_mutex_unlock(&fgpu_pool_lock);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	fgpu_pool_note_slack_locked(p);
	fgpu_pool_flag(&fgpu_pool_ptrs, true);
	pthread_mutex_unlock(&fgpu_pool_lock);
	return CUDA_SUCCESS;
}

CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytes, CUstream s)
{
	return fgpu_pool_alloc(POOL_ASYNC, dptr, bytes, NULL, s);
}

CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytes, CUstream s)
{
	return fgpu_pool_alloc(POOL_ASYNC_PTSZ, dptr, bytes, NULL, s);
}

CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool, CUstream s)
{
	if (!pool)
		return REAL(cuMemAllocFromPoolAsync, dptr, bytes, pool, s);
	return fgpu_pool_alloc(POOL_FROM, dptr, bytes, pool, s);
}

CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool,
				      CUstream s)
{
	if (!pool)
		return REAL(cuMemAllocFromPoolAsync_ptsz, dptr, bytes, pool, s);
	return fgpu_pool_alloc(POOL_FROM_PTSZ, dptr, bytes, pool, s);
}


/* Frees a pool allocation through call when ptr is one; returns false
 * (nothing done) when it is not. */
#define FGPU_POOL_FREE(ptr, call, rcp) ({ \
	int slot_; int64_t bytes_; bool mine_ = false; \
	if (fgpu_accounting()) { \
		pthread_mutex_lock(&fgpu_pool_lock); \
		mine_ = fgpu_untrack(K_POOLPTR, (ptr), &slot_, &bytes_); \
		if (mine_) { \
			*(rcp) = (call); \
			if (*(rcp) != CUDA_SUCCESS) { \
				fgpu_track(K_POOLPTR, (ptr), slot_, bytes_); \
			} else { \
				struct fgpu_pool *p_ = &fgpu_pools[slot_]; \
				p_->live -= bytes_; \
				fgpu_pool_settle_locked(p_); \
				fgpu_pool_note_slack_locked(p_); \
			} \
		} \
		pthread_mutex_unlock(&fgpu_pool_lock); \
	} \
	mine_; \
})

CUresult fgpu_pool_free_sync(CUdeviceptr p, bool *mine)
{
	CUresult rc = CUDA_SUCCESS;
	*mine = __atomic_load_n(&fgpu_pool_ptrs, __ATOMIC_ACQUIRE) &&
		FGPU_POOL_FREE(p, REAL(cuMemFree_v2, p), &rc);
	return rc;
}

CUresult cuMemFreeAsync(CUdeviceptr p, CUstream s)
{
	CUDA_INIT();
	CUresult rc;
	if (FGPU_POOL_FREE(p, REAL(cuMemFreeAsync, p, s), &rc))
		return rc;
	return FGPU_FREE(K_PTR, p, REAL(cuMemFreeAsync, p, s));
}

CUresult cuMemFreeAsync_ptsz(CUdeviceptr p, CUstream s)
{
	CUDA_INIT();
	CUresult rc;
	if (FGPU_POOL_FREE(p, REAL(cuMemFreeAsync_ptsz, p, s), &rc))
		return rc;
	return FGPU_FREE(K_PTR, p, REAL(cuMemFreeAsync_ptsz, p, s));
}

/* Records which device a pool allocates on. */
static void fgpu_pool_register(CUmemoryPool h, CUdevice ord)
{
	if (!fgpu_accounting() || !h)
		return;
	pthread_mutex_lock(&fgpu_pool_lock);
	fgpu_pool_slot_locked(h, ord);
	pthread_mutex_unlock(&fgpu_pool_lock);
}

CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props)
{
	CUDA_INIT();
	CUresult rc = REAL(cuMemPoolCreate, pool, props);
	if (rc == CUDA_SUCCESS && props && props->location.type == CU_MEM_LOCATION_TYPE_DEVICE)
		fgpu_pool_register(*pool, props->location.id);
	return rc;
}

CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice dev)
{
	CUDA_INIT();
	CUresult rc = REAL(cuDeviceGetDefaultMemPool, pool, dev);
	if (rc == CUDA_SUCCESS)
		fgpu_pool_register(*pool, dev);
	return rc;
}

CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
	CUDA_INIT();
	CUresult rc = REAL(cuDeviceGetMemPool, pool, dev);
	if (rc == CUDA_SUCCESS)
		fgpu_pool_register(*pool, dev);
	return rc;
}

CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t keep)
{
	CUDA_INIT();
	CUresult rc = REAL(cuMemPoolTrimTo, pool, keep);
	if (rc == CUDA_SUCCESS && fgpu_accounting()) {
		pthread_mutex_lock(&fgpu_pool_lock);
		struct fgpu_pool *p = fgpu_pool_slot_locked(pool, -1);
		if (p)
			fgpu_pool_settle_locked(p);
		pthread_mutex_unlock(&fgpu_pool_lock);
	}
	return rc;
}

CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
	CUDA_INIT();
	CUresult rc = REAL(cuMemPoolDestroy, pool);
	if (rc == CUDA_SUCCESS && fgpu_accounting()) {
		/* The driver gives a destroyed pool's memory back once its last
		 * allocation is freed; until then the charge stays. */
		pthread_mutex_lock(&fgpu_pool_lock);
		struct fgpu_pool *p = fgpu_pool_slot_locked(pool, -1);
		if (p) {
			p->destroyed = true;
			fgpu_pool_settle_locked(p);
		}
		pthread_mutex_unlock(&fgpu_pool_lock);
	}
	return rc;
}

/* Synchronization is where pools give memory back (and where the graph
 * allocator's figure and the context's stack size are re-read): call's
 * result, after that, as an expression the hook returns. */
#define FGPU_SETTLE_AFTER(call) ({ \
	CUresult rc_ = (call); \
	if (rc_ == CUDA_SUCCESS) { \
		fgpu_reserves_settle(); \
		fgpu_stack_follow(); \
		fgpu_pace_synced(); \
	} \
	rc_; \
})

CUresult cuStreamSynchronize(CUstream s)
{
	CUDA_INIT();
	return FGPU_SETTLE_AFTER(REAL(cuStreamSynchronize, s));
}

CUresult cuStreamSynchronize_ptsz(CUstream s)
{
	CUDA_INIT();
	return FGPU_SETTLE_AFTER(REAL(cuStreamSynchronize_ptsz, s));
}

CUresult cuEventSynchronize(CUevent e)
{
	CUDA_INIT();
	return FGPU_SETTLE_AFTER(REAL(cuEventSynchronize, e));
}

CUresult cuCtxSynchronize(void)
{
	CUDA_INIT();
	return FGPU_SETTLE_AFTER(REAL(cuCtxSynchronize));
}

