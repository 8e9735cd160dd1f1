/* Context hooks: making contexts (created, primary, green), the memory
 * their limits reserve, the stack a launch grows, and what goes when a
 * context ends.
 *
 * A process's first context on a device is charged the context overhead
 * (fgpu_charge_context), whichever way it is made, a green context too.
 *
 * cuCtxSetLimit sizes memory the driver reserves for the context: a stack
 * for every thread the device can hold at once, the device printf() FIFO
 * and the device malloc() heap. The context overhead covers them at the
 * values the context started with; raising one is charged the difference
 * before the driver is asked, so a process cannot take gigabytes past its
 * share by asking for a larger stack or heap. The driver also grows the
 * stack by itself for a kernel that needs more: the launch is charged
 * that growth first (fgpu_stack_admit), and what the driver takes beyond
 * the estimate is charged after the next synchronization
 * (fgpu_stack_follow).
 *
 * When a context ends (cuCtxDestroy, the last cuDevicePrimaryCtxRelease,
 * cuDevicePrimaryCtxReset, cuGreenCtxDestroy) the driver frees the linear
 * allocations and arrays made in it, and its limits; so does the share,
 * or a notebook that frees the GPU that way could not allocate again. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fgpu/shim.h"

/* ---- making contexts ----------------------------------------------------- */

/* Every context a process makes on a device takes the context's memory
 * there; the first one is charged (fgpu_charge_context). */
static CUresult fgpu_admit_context(CUdevice dev)
{
	CUDA_INIT();
	return fgpu_accounting() ? fgpu_charge_context(fgpu_cuda_index(dev)) : CUDA_SUCCESS;
}

static void fgpu_note_context(CUcontext ctx, CUdevice dev);

/* What a context-making call returned: a new context is noted. */
static CUresult fgpu_born(CUresult rc, CUcontext *pctx, CUdevice dev)
{
	if (rc == CUDA_SUCCESS && pctx)
		fgpu_note_context(*pctx, dev);
	return rc;
}

CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	CUresult rc = fgpu_admit_context(dev);
	return rc != CUDA_SUCCESS ? rc : fgpu_born(REAL(cuCtxCreate_v2, pctx, flags, dev), pctx, dev);
}

CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams,
			unsigned int flags, CUdevice dev)
{
	CUresult rc = fgpu_admit_context(dev);
	return rc != CUDA_SUCCESS
		? rc
		: fgpu_born(REAL(cuCtxCreate_v3, pctx, paramsArray, numParams, flags, dev), pctx,
			    dev);
}

CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams, unsigned int flags,
			CUdevice dev)
{
	CUresult rc = fgpu_admit_context(dev);
	return rc != CUDA_SUCCESS
		? rc
		: fgpu_born(REAL(cuCtxCreate_v4, pctx, ctxCreateParams, flags, dev), pctx, dev);
}

/* The primary context of each CUDA ordinal, as the driver handed it out:
 * what a release or reset of that device ends. */
static CUcontext fgpu_primary[FGPU_MAX_DEVICES];
static pthread_mutex_t fgpu_primary_lock = PTHREAD_MUTEX_INITIALIZER;

CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	CUresult rc = fgpu_admit_context(dev);
	if (rc != CUDA_SUCCESS)
		return rc;
	rc = REAL(cuDevicePrimaryCtxRetain, pctx, dev);
	if (rc == CUDA_SUCCESS && pctx && dev >= 0 && dev < FGPU_MAX_DEVICES) {
		pthread_mutex_lock(&fgpu_primary_lock);
		fgpu_primary[dev] = *pctx;
		pthread_mutex_unlock(&fgpu_primary_lock);
	}
	return fgpu_born(rc, pctx, dev);
}

CUresult cuGreenCtxCreate(CUgreenCtx *phCtx, CUdevResourceDesc desc, CUdevice dev,
			  unsigned int flags)
{
	CUresult rc = fgpu_admit_context(dev);
	if (rc != CUDA_SUCCESS || (rc = REAL(cuGreenCtxCreate, phCtx, desc, dev, flags)) !=
				      CUDA_SUCCESS)
		return rc;
	CUcontext ctx = NULL;
	if (REAL(cuCtxFromGreenCtx, &ctx, *phCtx) == CUDA_SUCCESS)
		fgpu_note_context(ctx, dev);
	return CUDA_SUCCESS;
}

/* ---- limits ---------------------------------------------------------------- */

/* The limits that size memory, kept per context as table entries of kind
 * K_LIMIT + limit: bytes = what is charged, aux = the base, what the
 * overhead covers: the value the context had when it was made (the
 * stack), or when the shim first saw the limit set (the others). */
static bool fgpu_sized_limit(CUlimit limit)
{
	return limit == CU_LIMIT_STACK_SIZE || limit == CU_LIMIT_PRINTF_FIFO_SIZE ||
	       limit == CU_LIMIT_MALLOC_HEAP_SIZE;
}

/* Bytes that value of limit takes beyond base on device ord; -1 when the
 * device's size cannot be read. The stack is reserved for every resident
 * thread: threads per SM times SMs. */
static int64_t fgpu_limit_bytes(CUlimit limit, size_t value, size_t base, CUdevice ord)
{
	if (value <= base)
		return 0;
	uint64_t extra = value - base;
	if (limit == CU_LIMIT_STACK_SIZE) {
		int per_sm = 0, sms = 0;
		if (REAL(cuDeviceGetAttribute, &per_sm,
			 CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, ord) != CUDA_SUCCESS ||
		    REAL(cuDeviceGetAttribute, &sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
			 ord) != CUDA_SUCCESS || per_sm <= 0 || sms <= 0)
			return -1;
		if (__builtin_mul_overflow(extra, (uint64_t)per_sm * (uint64_t)sms, &extra))
			return INT64_MAX;
	}
	return extra > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)extra;
}

/* Limit changes are rare; one at a time keeps each context's record and
 * the driver's value in step. */
static pthread_mutex_t fgpu_limit_lock = PTHREAD_MUTEX_INITIALIZER;

/* The record of limit on ctx: *base and *charged (the driver's current
 * value and 0 when there is none yet); whether there is one. */
static bool fgpu_limit_record(CUcontext ctx, CUlimit limit, size_t current, size_t *base,
			      int64_t *charged)
{
	*base = current;
	*charged = 0;
	pthread_mutex_lock(&fgpu_table_lock);
	struct fgpu_entry *e = fgpu_find_locked(K_LIMIT + limit, (uint64_t)(uintptr_t)ctx);
	if (e) {
		*base = (size_t)e->aux;
		*charged = e->bytes;
	}
	pthread_mutex_unlock(&fgpu_table_lock);
	return e != NULL;
}

static void fgpu_limit_store(CUcontext ctx, CUlimit limit, int idx, size_t base,
			     int64_t charged)
{
	uint64_t key = (uint64_t)(uintptr_t)ctx;
	if (fgpu_track(K_LIMIT + limit, key, idx, charged) < 0)
		return;   /* no memory for the record: the charge stays until exit */
	pthread_mutex_lock(&fgpu_table_lock);
	struct fgpu_entry *e = fgpu_find_locked(K_LIMIT + limit, key);
	if (e) {
		e->aux = base;
		e->ctx = ctx;
	}
	pthread_mutex_unlock(&fgpu_table_lock);
}

/* A new context's stack size: the base its growth is charged from (the
 * overhead covers it). The context need not be current: a retained
 * primary context is not. */
static void fgpu_note_context(CUcontext ctx, CUdevice dev)
{
	if (!ctx || !fgpu_accounting())
		return;
	pthread_mutex_lock(&fgpu_limit_lock);
	size_t v, base;
	int64_t charged;
	if (!fgpu_limit_record(ctx, CU_LIMIT_STACK_SIZE, 0, &base, &charged) &&
	    REAL(cuCtxPushCurrent_v2, ctx) == CUDA_SUCCESS) {
		CUresult rc = REAL(cuCtxGetLimit, &v, CU_LIMIT_STACK_SIZE);
		REAL(cuCtxPopCurrent_v2, NULL);
		if (rc == CUDA_SUCCESS)
			fgpu_limit_store(ctx, CU_LIMIT_STACK_SIZE, fgpu_cuda_index(dev), v, 0);
	}
	pthread_mutex_unlock(&fgpu_limit_lock);
}

/* Charges ctx's stack (on ord) up to the size v the driver reads now,
 * past the share or not, since the memory is taken; later allocations
 * are refused until it is given back. fgpu_limit_lock held. */
static void fgpu_stack_charge_to(CUcontext ctx, CUdevice ord, size_t v)
{
	size_t base;
	int64_t charged;
	bool known = fgpu_limit_record(ctx, CU_LIMIT_STACK_SIZE, v, &base, &charged);
	int64_t want = fgpu_limit_bytes(CU_LIMIT_STACK_SIZE, v, base, ord);
	int idx = fgpu_cuda_index(ord);
	if (want > charged) {
		if (idx >= 0 && fgpu_region.r)
			fgpu_region_reserve(&fgpu_region, idx, want - charged, FGPU_UNLIMITED);
		fgpu_limit_store(ctx, CU_LIMIT_STACK_SIZE, idx, base, want);
	} else if (!known) {
		fgpu_limit_store(ctx, CU_LIMIT_STACK_SIZE, idx, base, 0);
	}
}

/* The driver grows a context's stack by itself for a kernel that needs
 * more local memory per thread than the stack limit, and keeps it grown;
 * the limit then reads the larger value. Launches charge their estimate
 * of it first (fgpu_stack_admit); after synchronizations the value is
 * read again and anything beyond the estimate is charged, as is growth
 * from launches the shim could not size. */
void fgpu_stack_follow(void)
{
	CUcontext ctx = NULL;
	CUdevice ord;
	size_t v;
	if (!fgpu_accounting() || REAL(cuCtxGetCurrent, &ctx) != CUDA_SUCCESS || !ctx ||
	    REAL(cuCtxGetLimit, &v, CU_LIMIT_STACK_SIZE) != CUDA_SUCCESS ||
	    fgpu_current_device(&ord) != CUDA_SUCCESS)
		return;
	pthread_mutex_lock(&fgpu_limit_lock);
	fgpu_stack_charge_to(ctx, ord, v);
	pthread_mutex_unlock(&fgpu_limit_lock);
}

/* ---- launches that grow the stack ------------------------------------------ */

/* A launch of a kernel that needs more local memory per thread than the
 * context's stack makes the driver grow the stack, for every resident
 * thread, before the kernel runs. The growth is charged first: past the
 * share the launch fails with out of memory, as on a full device, and the
 * driver is never asked. The need is the kernel's local memory
 * (CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES) rounded as the driver rounds a
 * stack; anything the driver takes beyond it is charged at the next
 * synchronization. A kernel captured into a graph is charged when
 * captured: the graph's launches will need that stack.
 *
 * cuLaunchKernel takes a CUDA 12 library's kernel (CUkernel) in place of
 * a function; cuFuncGetAttribute is documented for functions only, so a
 * handle it refuses is asked of as a kernel (cuKernelGetAttribute).
 *
 * The check costs a driver query per kernel, not per launch: each thread
 * remembers the kernels it launched in a context without growth. They
 * stay remembered until a stack is set, a context ends, or a module or
 * library is unloaded (its handles may come back for other kernels); each
 * bumps the epoch. A stack only grows otherwise. */
#define FGPU_FITS 64

struct fgpu_fit {
	CUfunction f;
	CUcontext ctx;
	unsigned epoch;
};

static __thread struct fgpu_fit fgpu_fits[FGPU_FITS];
static atomic_uint fgpu_fits_epoch = 1;   /* never 0: empty slots never match */

static void fgpu_fits_forget(void)
{
	atomic_fetch_add_explicit(&fgpu_fits_epoch, 1, memory_order_relaxed);
}

static struct fgpu_fit *fgpu_fit_slot(CUfunction f)
{
	return &fgpu_fits[((uintptr_t)f >> 4) % FGPU_FITS];
}

/* Unloading makes handles free for other kernels: the hooks only forget
 * what was remembered. */
static CUresult fgpu_unloaded(CUresult rc)
{
	if (rc == CUDA_SUCCESS)
		fgpu_fits_forget();
	return rc;
}

CUresult cuModuleUnload(CUmodule m)
{
	CUDA_INIT();
	return fgpu_unloaded(REAL(cuModuleUnload, m));
}

CUresult cuLibraryUnload(CUlibrary l)
{
	CUDA_INIT();
	return fgpu_unloaded(REAL(cuLibraryUnload, l));
}

/* Whether launching f in ctx grows the stack: if so, the growth is
 * charged (or refused) and g holds the limit lock over the launch, so
 * that a synchronization elsewhere cannot read the stack in between. */
static CUresult fgpu_stack_admit_slow(CUfunction f, CUcontext ctx, unsigned epoch,
				      struct fgpu_stack_grant *g)
{
	int local = 0;
	CUdevice ord;
	if (fgpu_current_device(&ord) != CUDA_SUCCESS ||
	    (REAL(cuFuncGetAttribute, &local, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, f) !=
		     CUDA_SUCCESS &&
	     REAL(cuKernelGetAttribute, &local, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES,
		  (CUkernel)f, ord) != CUDA_SUCCESS) ||
	    local < 0)
		local = 0;   /* not sizeable here: what it grows is charged after it runs */
	size_t need = ((size_t)local + 15) & ~(size_t)15;
	size_t v;
	pthread_mutex_lock(&fgpu_limit_lock);
	if (need > 0 && REAL(cuCtxGetLimit, &v, CU_LIMIT_STACK_SIZE) == CUDA_SUCCESS &&
	    need > v) {
		size_t base;
		int64_t charged;
		fgpu_limit_record(ctx, CU_LIMIT_STACK_SIZE, v, &base, &charged);
		int64_t want = fgpu_limit_bytes(CU_LIMIT_STACK_SIZE, need, base, ord);
		if (want > charged) {
			int idx;
			if (fgpu_reserve(ord, want - charged, &idx) != CUDA_SUCCESS) {
				pthread_mutex_unlock(&fgpu_limit_lock);
				return CUDA_ERROR_OUT_OF_MEMORY;
			}
			fgpu_limit_store(ctx, CU_LIMIT_STACK_SIZE, idx, base, want);
			*g = (struct fgpu_stack_grant){ .held = true, .ctx = ctx, .f = f,
							.epoch = epoch, .ord = ord, .idx = idx,
							.base = base, .before = charged,
							.after = want };
			return CUDA_SUCCESS;
		}
	}
	pthread_mutex_unlock(&fgpu_limit_lock);
	*fgpu_fit_slot(f) = (struct fgpu_fit){ f, ctx, epoch };
	return CUDA_SUCCESS;
}

CUresult fgpu_stack_admit(CUfunction f, struct fgpu_stack_grant *g)
{
	g->held = false;
	CUcontext ctx = NULL;
	if (!f || !fgpu_accounting() || REAL(cuCtxGetCurrent, &ctx) != CUDA_SUCCESS || !ctx)
		return CUDA_SUCCESS;   /* the driver says what is wrong, if anything */
	unsigned epoch = atomic_load_explicit(&fgpu_fits_epoch, memory_order_relaxed);
	const struct fgpu_fit *fit = fgpu_fit_slot(f);
	if (fit->f == f && fit->ctx == ctx && fit->epoch == epoch)
		return CUDA_SUCCESS;
	return fgpu_stack_admit_slow(f, ctx, epoch, g);
}

void fgpu_stack_launched(struct fgpu_stack_grant *g, CUresult launch)
{
	if (!g->held)
		return;
	if (launch == CUDA_SUCCESS) {
		*fgpu_fit_slot(g->f) = (struct fgpu_fit){ g->f, g->ctx, g->epoch };
	} else {
		/* Not launched: the charge goes back to what it was, then up to
		 * whatever the driver grew all the same. */
		fgpu_unreserve(g->idx, g->after - g->before);
		fgpu_limit_store(g->ctx, CU_LIMIT_STACK_SIZE, g->idx, g->base, g->before);
		size_t v;
		if (REAL(cuCtxGetLimit, &v, CU_LIMIT_STACK_SIZE) == CUDA_SUCCESS)
			fgpu_stack_charge_to(g->ctx, g->ord, v);
	}
	g->held = false;
	pthread_mutex_unlock(&fgpu_limit_lock);
}

/* Moves the charge from have to want bytes on device ord (*idx gets the
 * region index): growing may be refused, shrinking never is. */
static CUresult fgpu_recharge(CUdevice ord, int64_t have, int64_t want, int *idx)
{
	*idx = fgpu_cuda_index(ord);
	if (want > have)
		return fgpu_reserve(ord, want - have, idx);
	if (want < have)
		fgpu_unreserve(*idx, have - want);
	return CUDA_SUCCESS;
}

static CUresult fgpu_set_limit(CUlimit limit, size_t value)
{
	CUcontext ctx = NULL;
	CUdevice ord;
	size_t current;
	if (REAL(cuCtxGetCurrent, &ctx) != CUDA_SUCCESS || !ctx ||
	    fgpu_current_device(&ord) != CUDA_SUCCESS ||
	    REAL(cuCtxGetLimit, &current, limit) != CUDA_SUCCESS)
		return REAL(cuCtxSetLimit, limit, value);   /* the driver says what is wrong */
	size_t base;
	int64_t charged;
	fgpu_limit_record(ctx, limit, current, &base, &charged);
	int64_t want = fgpu_limit_bytes(limit, value, base, ord);
	if (want < 0)
		return CUDA_ERROR_OUT_OF_MEMORY;   /* cannot size it: refuse, never let it pass */
	int idx;
	CUresult rc = fgpu_recharge(ord, charged, want, &idx);
	if (rc != CUDA_SUCCESS)
		return rc;
	rc = REAL(cuCtxSetLimit, limit, value);
	if (rc != CUDA_SUCCESS) {
		fgpu_recharge(ord, want, charged, &idx);
		return rc;
	}
	/* The driver may round the value; charge what it settled on. */
	size_t set = value;
	if (REAL(cuCtxGetLimit, &set, limit) == CUDA_SUCCESS && set != value) {
		int64_t settled = fgpu_limit_bytes(limit, set, base, ord);
		if (settled < 0 || fgpu_recharge(ord, want, settled, &idx) != CUDA_SUCCESS) {
			REAL(cuCtxSetLimit, limit, current);
			fgpu_recharge(ord, want, charged, &idx);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		want = settled;
	}
	fgpu_limit_store(ctx, limit, idx, base, want);
	if (limit == CU_LIMIT_STACK_SIZE)
		fgpu_fits_forget();   /* a lowered stack: kernels are checked again */
	return CUDA_SUCCESS;
}

CUresult cuCtxSetLimit(CUlimit limit, size_t value)
{
	CUDA_INIT();
	if (!fgpu_accounting() || !fgpu_sized_limit(limit))
		return REAL(cuCtxSetLimit, limit, value);
	pthread_mutex_lock(&fgpu_limit_lock);
	CUresult rc = fgpu_set_limit(limit, value);
	pthread_mutex_unlock(&fgpu_limit_lock);
	return rc;
}

void fgpu_contexts_reset_child(void)
{
	pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
	fgpu_limit_lock = fresh;
	fgpu_primary_lock = fresh;
	memset(fgpu_primary, 0, sizeof(fgpu_primary));
	fgpu_fits_forget();
}

/* ---- contexts ending ------------------------------------------------------- */

static bool fgpu_owned_by_context(int kind)
{
	return kind == K_PTR || kind == K_PTR_V1 || kind == K_ARRAY || kind == K_MIPMAP ||
	       kind >= K_LIMIT;
}

/* ctx has ended: what was charged for its allocations and limits goes. */
static void fgpu_context_gone(CUcontext ctx)
{
	if (!ctx || !fgpu_accounting())
		return;
	fgpu_fits_forget();   /* its handle may come back for a new context */
	int64_t freed[FGPU_MAX_DEVICES] = { 0 };
	pthread_mutex_lock(&fgpu_table_lock);
	for (unsigned b = 0; b < FGPU_BUCKETS; b++)
		for (struct fgpu_entry **pp = &fgpu_table[b]; *pp;) {
			struct fgpu_entry *e = *pp;
			if (e->ctx != ctx || !fgpu_owned_by_context(e->kind)) {
				pp = &e->next;
				continue;
			}
			if (e->idx >= 0 && e->idx < FGPU_MAX_DEVICES)
				freed[e->idx] += e->bytes;
			*pp = e->next;
			free(e);
		}
	pthread_mutex_unlock(&fgpu_table_lock);
	for (int i = 0; i < FGPU_MAX_DEVICES; i++)
		if (freed[i] > 0)
			fgpu_unreserve(i, freed[i]);
}

static CUresult fgpu_destroy_context(CUcontext ctx, CUresult (*destroy)(CUcontext))
{
	CUDA_INIT();
	if (!destroy)
		return CUDA_ERROR_NOT_SUPPORTED;
	pthread_mutex_lock(&fgpu_limit_lock);
	CUresult rc = destroy(ctx);
	if (rc == CUDA_SUCCESS)
		fgpu_context_gone(ctx);
	pthread_mutex_unlock(&fgpu_limit_lock);
	return rc;
}

CUresult cuCtxDestroy_v2(CUcontext ctx)
{
	CUDA_INIT();
	return fgpu_destroy_context(ctx, real.cuCtxDestroy_v2);
}

CUresult cuCtxDestroy(CUcontext ctx)
{
	CUDA_INIT();
	return fgpu_destroy_context(ctx, real.cuCtxDestroy);
}

static CUcontext fgpu_primary_of(CUdevice dev)
{
	if (dev < 0 || dev >= FGPU_MAX_DEVICES)
		return NULL;
	pthread_mutex_lock(&fgpu_primary_lock);
	CUcontext c = fgpu_primary[dev];
	pthread_mutex_unlock(&fgpu_primary_lock);
	return c;
}

/* The primary context ends with its last release; a reset ends what it
 * holds whoever still retains it. */
static CUresult fgpu_primary_done(CUdevice dev, CUresult (*call)(CUdevice), bool reset)
{
	if (!call)
		return CUDA_ERROR_NOT_SUPPORTED;
	pthread_mutex_lock(&fgpu_limit_lock);
	CUresult rc = call(dev);
	if (rc == CUDA_SUCCESS) {
		unsigned flags = 0;
		int active = 1;
		if (reset || (REAL(cuDevicePrimaryCtxGetState, dev, &flags, &active) ==
			      CUDA_SUCCESS && !active))
			fgpu_context_gone(fgpu_primary_of(dev));
	}
	pthread_mutex_unlock(&fgpu_limit_lock);
	return rc;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
	CUDA_INIT();
	return fgpu_primary_done(dev, real.cuDevicePrimaryCtxRelease_v2, false);
}

CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
	CUDA_INIT();
	return fgpu_primary_done(dev, real.cuDevicePrimaryCtxRelease, false);
}

CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
	CUDA_INIT();
	return fgpu_primary_done(dev, real.cuDevicePrimaryCtxReset_v2, true);
}

CUresult cuDevicePrimaryCtxReset(CUdevice dev)
{
	CUDA_INIT();
	return fgpu_primary_done(dev, real.cuDevicePrimaryCtxReset, true);
}

CUresult cuGreenCtxDestroy(CUgreenCtx g)
{
	CUDA_INIT();
	CUcontext ctx = NULL;
	if (REAL(cuCtxFromGreenCtx, &ctx, g) != CUDA_SUCCESS)
		ctx = NULL;
	pthread_mutex_lock(&fgpu_limit_lock);
	CUresult rc = REAL(cuGreenCtxDestroy, g);
	if (rc == CUDA_SUCCESS)
		fgpu_context_gone(ctx);
	pthread_mutex_unlock(&fgpu_limit_lock);
	return rc;
}
