/* Mock CUDA driver (libcuda.so.1): simulates the devices of the mock spec
 * (gpu/mock/mockspec.h) closely enough for Tessera's fGPU shim, gpu-info
 * and tests, through the real driver ABI (gpuabi/cuda_abi.h).
 *
 * What is simulated:
 *   - devices, names, UUIDs, attributes, contexts (primary and created,
 *     with a thread-local current-context stack);
 *   - device memory: every allocation family reserves bytes against the
 *     device's total, device-wide across processes (mockspec.c); pointers
 *     are never dereferenceable;
 *   - time: a per-process *simulated* clock. A kernel launched on a device
 *     runs for gridDimX*gridDimY*gridDimZ * TESSERA_MOCK_BLOCK_NS
 *     (default 1000) simulated ns, one kernel at a time per device; events
 *     record simulated times; synchronizing advances the clock to the end
 *     of the awaited work. tesseraMockNowNs / tesseraMockSleepNs expose the
 *     clock so pacing can be tested without real waiting.
 *   - context overhead: TESSERA_MOCK_CTX_OVERHEAD bytes (default 0) are
 *     taken from the device by each context, as a real context uses memory.
 *     Limits (cuCtxSetLimit) start at the driver's defaults; raising the
 *     stack size (reserved for all 2048 resident threads of every SM), the
 *     printf FIFO or the malloc heap above them takes the difference from
 *     the device; so does a launch of a kernel whose local memory per
 *     thread (its ".local" arrays) exceeds the stack limit, which grows
 *     the limit to fit. A module's ".global" arrays take device memory
 *     when it is loaded into a context (cuModuleLoadData; a library's are
 *     not charged), as __device__ variables do. A context's linear
 *     allocations, arrays and modules go with it (cuCtxDestroy, the last
 *     primary release, cuDevicePrimaryCtxReset).
 *   - green contexts: SM partitions as on compute capability 9.0 (8 SMs
 *     at least, in steps of 8); a green context takes the context
 *     overhead, and its kernels run at its share of the device's SMs.
 *   - stream-ordered pools as the real driver keeps them: a pool reserves
 *     device memory in 2 MiB steps, freed blocks stay reserved in it, and
 *     synchronizing gives back what exceeds its release threshold; the
 *     device usage (what nvidia-smi shows) is the pools' reserve, not the
 *     live allocations, which is what an interposer must account.
 *   - virtual memory management: a cuMemCreate handle keeps its memory
 *     while it has a reference or a mapping, whichever goes last.
 *   - stream capture: work launched on a capturing stream does not run;
 *     its simulated time goes into the graph, which runs when launched.
 *   - graph memory nodes: an executable graph's allocations are mapped at
 *     its first launch or upload from a per-device graph reserve (2 MiB
 *     steps) that only cuDeviceGraphMemTrim gives back.
 *
 * Streams may be CU_STREAM_LEGACY / CU_STREAM_PER_THREAD wherever a
 * CUstream is taken: both mean the current context's default stream.
 *
 * Everything is guarded by one mutex: the mock is for tests, not speed.
 * Built with -Bsymbolic-functions so that the addresses it hands out
 * through cuGetProcAddress are its own, as the real driver's are.
 *
 * mock_cuda.h lists the mock's source files and what each holds; this one
 * has cuInit, devices, contexts (limits and green contexts too), the test
 * hooks, modules, error strings and cuGetProcAddress. */
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gpu/mock/mock_cuda.h"

pthread_mutex_t mock_lock = PTHREAD_MUTEX_INITIALIZER;
bool mock_inited;
struct mock_spec mock_spec;
static struct CUctx_st mock_primary[MOCK_MAX_DEVICES];
/* Resident threads per SM: the stack is reserved for all of them. */
#define MOCK_THREADS_PER_SM 2048
static int64_t mock_ctx_overhead;

static __thread CUcontext mock_ctx_stack[16];
static __thread int mock_ctx_depth;

bool mock_valid_dev(CUdevice d)
{
	return d >= 0 && d < mock_spec.count;
}

CUcontext mock_current(void)
{
	return mock_ctx_depth > 0 ? mock_ctx_stack[mock_ctx_depth - 1] : NULL;
}

int mock_current_dev(void)
{
	CUcontext c = mock_current();
	return c && c->magic == MOCK_MAGIC_CTX ? c->dev : -1;
}

MOCK_API CUresult cuInit(unsigned int flags)
{
	if (flags != 0)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&mock_lock);
	if (!mock_inited) {
		struct terr err;
		if (mock_spec_load(&mock_spec, &err) < 0)
			mock_spec.count = 0;   /* a bad spec is no devices, as a broken driver */
		for (int i = 0; i < MOCK_MAX_DEVICES; i++) {
			mock_next_ptr[i] = 0x700000000000ULL + ((uint64_t)i << 36);
			mock_primary[i] = (struct CUctx_st){ .magic = MOCK_MAGIC_CTX,
				.dev = i, .primary = true };
			mock_default_pool[i] = (struct CUmemPoolHandle_st){
				.magic = MOCK_MAGIC_POOL, .dev = i, .is_default = true,
				.reuse = { 1, 1, 1 } };
			mock_cur_pool[i] = &mock_default_pool[i];
		}
		for (int i = 0; i < mock_spec.count; i++) {
			mock_default_pool[i].next = mock_pools;
			mock_pools = &mock_default_pool[i];
		}
		const char *b = getenv("TESSERA_MOCK_BLOCK_NS");
		if (b && atoll(b) > 0)
			mock_block_ns = (uint64_t)atoll(b);
		const char *o = getenv("TESSERA_MOCK_CTX_OVERHEAD");
		if (o && atoll(o) > 0)
			mock_ctx_overhead = atoll(o);
		mock_usage_init(&mock_spec);
		mock_inited = true;
	}
	CUresult rc = mock_spec.count > 0 ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE;
	pthread_mutex_unlock(&mock_lock);
	return rc;
}

MOCK_API CUresult cuDriverGetVersion(int *v)
{
	if (!v)
		return CUDA_ERROR_INVALID_VALUE;
	*v = MOCK_CUDA_VERSION;
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuDeviceGetCount(int *count)
{
	REQUIRE_INIT();
	if (!count)
		return CUDA_ERROR_INVALID_VALUE;
	*count = mock_spec.count;
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuDeviceGet(CUdevice *dev, int ordinal)
{
	REQUIRE_INIT();
	if (!dev)
		return CUDA_ERROR_INVALID_VALUE;
	if (!mock_valid_dev(ordinal))
		return CUDA_ERROR_INVALID_DEVICE;
	*dev = ordinal;
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
	REQUIRE_INIT();
	if (!name || len <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (!mock_valid_dev(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	strncpy(name, MOCK_DEVICE_NAME, (size_t)len - 1);
	name[len - 1] = '\0';
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
	REQUIRE_INIT();
	if (!uuid)
		return CUDA_ERROR_INVALID_VALUE;
	if (!mock_valid_dev(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	memcpy(uuid->bytes, mock_spec.dev[dev].uuid, 16);
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
	return cuDeviceGetUuid(uuid, dev);
}

MOCK_API CUresult cuDeviceGetAttribute(int *pi, int attrib, CUdevice dev)
{
	REQUIRE_INIT();
	if (!pi)
		return CUDA_ERROR_INVALID_VALUE;
	if (!mock_valid_dev(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	switch (attrib) {
	case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *pi = mock_spec.dev[dev].sms; break;
	case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: *pi = MOCK_THREADS_PER_SM; break;
	case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *pi = 1024; break;
	case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *pi = 32; break;
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *pi = 9; break;
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *pi = 0; break;
	default: return CUDA_ERROR_INVALID_VALUE;
	}
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
	REQUIRE_INIT();
	if (!bytes)
		return CUDA_ERROR_INVALID_VALUE;
	if (!mock_valid_dev(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	*bytes = (size_t)mock_spec.dev[dev].mem;
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev)
{
	size_t b;
	CUresult rc = cuDeviceTotalMem_v2(bytes ? &b : NULL, dev);
	if (rc == CUDA_SUCCESS)
		*bytes = b > 0xffffffffu ? 0xffffffffu : (unsigned int)b;
	return rc;
}

/* ---- contexts ---------------------------------------------------------- */

/* The limits a context starts with (the real driver's defaults); the
 * context overhead covers the memory they take. */
static const size_t mock_limit_default[MOCK_NLIMITS] = {
	[CU_LIMIT_STACK_SIZE] = 1024,
	[CU_LIMIT_PRINTF_FIFO_SIZE] = 1 << 20,
	[CU_LIMIT_MALLOC_HEAP_SIZE] = 8 << 20,
	[CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH] = 2,
	[CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT] = 2048,
	[CU_LIMIT_MAX_L2_FETCH_GRANULARITY] = 128,
	[CU_LIMIT_PERSISTING_L2_CACHE_SIZE] = 0,
};
#define MOCK_MAX_STACK (512u << 10)

/* Device memory that limits lim take beyond the defaults: a stack for
 * every thread the device can hold, the printf FIFO, the malloc heap. */
static int64_t mock_limit_bytes(int dev, const size_t *lim)
{
	int64_t threads = (int64_t)MOCK_THREADS_PER_SM * mock_spec.dev[dev].sms, total = 0;
	static const CUlimit sized[] = { CU_LIMIT_STACK_SIZE, CU_LIMIT_PRINTF_FIFO_SIZE,
					 CU_LIMIT_MALLOC_HEAP_SIZE };
	for (size_t i = 0; i < sizeof(sized) / sizeof(sized[0]); i++) {
		CUlimit l = sized[i];
		if (lim[l] <= mock_limit_default[l])
			continue;
		int64_t extra = (int64_t)(lim[l] - mock_limit_default[l]);
		if (l == CU_LIMIT_STACK_SIZE)
			extra *= threads;
		total += extra;
	}
	return total;
}

static void mock_ctx_init(CUcontext c)
{
	memcpy(c->limits, mock_limit_default, sizeof(c->limits));
	c->limit_bytes = 0;
}

static CUresult mock_ctx_charge(CUcontext c)
{
	mock_ctx_init(c);
	if (mock_ctx_overhead > 0) {
		if (mock_usage_add(c->dev, mock_ctx_overhead) < 0)
			return CUDA_ERROR_OUT_OF_MEMORY;
		c->overhead = mock_ctx_overhead;
	}
	return CUDA_SUCCESS;
}

static void mock_modules_unload_ctx(CUcontext c);

/* What a context's state holds goes: its allocations, its modules, what
 * its limits took; the limits are back to the defaults. */
static void mock_ctx_clear(CUcontext c)
{
	mock_ctx_free_allocs(c);
	mock_modules_unload_ctx(c);
	if (c->limit_bytes > 0)
		mock_usage_add(c->dev, -c->limit_bytes);
	mock_ctx_init(c);
}

/* The context ends: its state and its own memory go. */
static void mock_ctx_uncharge(CUcontext c)
{
	mock_ctx_clear(c);
	if (c->overhead > 0)
		mock_usage_add(c->dev, -c->overhead);
	c->overhead = 0;
}

static void mock_ctx_push(CUcontext c)
{
	if (mock_ctx_depth < (int)(sizeof(mock_ctx_stack) / sizeof(mock_ctx_stack[0])))
		mock_ctx_stack[mock_ctx_depth++] = c;
	else
		mock_ctx_stack[mock_ctx_depth - 1] = c;
}

/* Removes c from this thread's stack (other threads may keep a dangling
 * pointer, as with the real driver, which is the caller's bug). */
static void mock_ctx_forget(CUcontext c)
{
	int j = 0;
	for (int i = 0; i < mock_ctx_depth; i++)
		if (mock_ctx_stack[i] != c)
			mock_ctx_stack[j++] = mock_ctx_stack[i];
	mock_ctx_depth = j;
}

static CUresult mock_ctx_create(CUcontext *pctx, CUdevice dev)
{
	REQUIRE_INIT();
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	if (!mock_valid_dev(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	CUcontext c = calloc(1, sizeof(*c));
	if (!c)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*c = (struct CUctx_st){ .magic = MOCK_MAGIC_CTX, .dev = dev, .refs = 1 };
	CUresult rc = mock_ctx_charge(c);
	if (rc != CUDA_SUCCESS) {
		free(c);
		return rc;
	}
	mock_ctx_push(c);
	*pctx = c;
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	(void)flags;
	return LOCKED(mock_ctx_create(pctx, dev));
}

MOCK_API CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	return cuCtxCreate_v2(pctx, flags, dev);
}

/* Execution affinity (an SM count per context) is honoured only by
 * contexts of MPS clients, and CIG needs a graphics API: the mock has
 * neither, so it answers as a driver without them does. */
static CUresult mock_ctx_affinity(const CUexecAffinityParam *params, int n)
{
	if (n < 0 || (n > 0 && !params))
		return CUDA_ERROR_INVALID_VALUE;
	for (int i = 0; i < n; i++)
		if (params[i].type != CU_EXEC_AFFINITY_TYPE_SM_COUNT)
			return CUDA_ERROR_INVALID_VALUE;
	return n > 0 ? CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY : CUDA_SUCCESS;
}

MOCK_API CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams,
				 unsigned int flags, CUdevice dev)
{
	CUresult rc = mock_ctx_affinity(paramsArray, numParams);
	return rc != CUDA_SUCCESS ? rc : cuCtxCreate_v2(pctx, flags, dev);
}

MOCK_API CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *params, unsigned int flags,
				 CUdevice dev)
{
	if (params) {
		if (params->cigParams && params->execAffinityParams)
			return CUDA_ERROR_INVALID_VALUE;
		if (params->cigParams)
			return CUDA_ERROR_NOT_SUPPORTED;
		CUresult rc = mock_ctx_affinity(params->execAffinityParams,
						params->numExecAffinityParams);
		if (rc != CUDA_SUCCESS)
			return rc;
	}
	return cuCtxCreate_v2(pctx, flags, dev);
}

static CUresult mock_ctx_destroy(CUcontext c)
{
	REQUIRE_INIT();
	if (!c || c->magic != MOCK_MAGIC_CTX || c->primary || c->sms)
		return CUDA_ERROR_INVALID_CONTEXT;
	mock_ctx_forget(c);
	mock_ctx_uncharge(c);
	c->magic = 0;
	free(c);
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuCtxDestroy_v2(CUcontext c)
{
	return LOCKED(mock_ctx_destroy(c));
}

MOCK_API CUresult cuCtxDestroy(CUcontext c)
{
	return cuCtxDestroy_v2(c);
}

MOCK_API CUresult cuCtxGetCurrent(CUcontext *pctx)
{
	REQUIRE_INIT();
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	*pctx = mock_current();
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuCtxSetCurrent(CUcontext c)
{
	REQUIRE_INIT();
	if (c && c->magic != MOCK_MAGIC_CTX)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (!c) {
		if (mock_ctx_depth > 0)
			mock_ctx_depth--;
	} else if (mock_ctx_depth == 0) {
		mock_ctx_push(c);
	} else {
		mock_ctx_stack[mock_ctx_depth - 1] = c;
	}
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuCtxPushCurrent_v2(CUcontext c)
{
	REQUIRE_INIT();
	if (!c || c->magic != MOCK_MAGIC_CTX)
		return CUDA_ERROR_INVALID_CONTEXT;
	mock_ctx_push(c);
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
	REQUIRE_INIT();
	if (mock_ctx_depth == 0)
		return CUDA_ERROR_INVALID_CONTEXT;
	CUcontext c = mock_ctx_stack[--mock_ctx_depth];
	if (pctx)
		*pctx = c;
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuCtxGetDevice(CUdevice *dev)
{
	REQUIRE_INIT();
	if (!dev)
		return CUDA_ERROR_INVALID_VALUE;
	int d = mock_current_dev();
	if (d < 0)
		return CUDA_ERROR_INVALID_CONTEXT;
	*dev = d;
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuCtxSynchronize(void)
{
	REQUIRE_INIT();
	pthread_mutex_lock(&mock_lock);
	int d = mock_current_dev();
	if (d >= 0 && mock_busy_until[d] > mock_now)
		mock_now = mock_busy_until[d];
	if (d >= 0)
		mock_pools_release();
	pthread_mutex_unlock(&mock_lock);
	return d >= 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

static CUresult mock_primary_retain(CUcontext *pctx, CUdevice dev)
{
	REQUIRE_INIT();
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	if (!mock_valid_dev(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	CUcontext c = &mock_primary[dev];
	if (c->refs == 0) {
		CUresult rc = mock_ctx_charge(c);
		if (rc != CUDA_SUCCESS)
			return rc;
	}
	c->refs++;
	*pctx = c;
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	return LOCKED(mock_primary_retain(pctx, dev));
}

static CUresult mock_primary_release(CUdevice dev)
{
	REQUIRE_INIT();
	if (!mock_valid_dev(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	CUcontext c = &mock_primary[dev];
	if (c->refs == 0)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (--c->refs == 0)
		mock_ctx_uncharge(c);
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
	return LOCKED(mock_primary_release(dev));
}

MOCK_API CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
	return cuDevicePrimaryCtxRelease_v2(dev);
}

/* Resetting destroys what the primary context holds and leaves it retained
 * by whoever retained it (the driver re-creates it for them). */
static CUresult mock_primary_reset(CUdevice dev)
{
	REQUIRE_INIT();
	if (!mock_valid_dev(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	if (mock_primary[dev].refs > 0)
		mock_ctx_clear(&mock_primary[dev]);
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
	return LOCKED(mock_primary_reset(dev));
}

MOCK_API CUresult cuDevicePrimaryCtxReset(CUdevice dev)
{
	return cuDevicePrimaryCtxReset_v2(dev);
}

static CUresult mock_primary_state(CUdevice dev, unsigned int *flags, int *active)
{
	REQUIRE_INIT();
	if (!flags || !active)
		return CUDA_ERROR_INVALID_VALUE;
	if (!mock_valid_dev(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	*flags = 0;
	*active = mock_primary[dev].refs > 0;
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
	return LOCKED(mock_primary_state(dev, flags, active));
}

/* ---- context limits ---------------------------------------------------- */

/* Sets limit on c, taking from the device (or giving back) what the
 * change sizes; the stack is rounded up to 16 bytes, as the driver may. */
static CUresult mock_ctx_limit(CUcontext c, CUlimit limit, size_t value)
{
	size_t lim[MOCK_NLIMITS];
	memcpy(lim, c->limits, sizeof(lim));
	if (limit == CU_LIMIT_STACK_SIZE)
		value = (value + 15) & ~(size_t)15;
	lim[limit] = value;
	int64_t bytes = mock_limit_bytes(c->dev, lim), delta = bytes - c->limit_bytes;
	if (delta != 0 && mock_usage_add(c->dev, delta) < 0)
		return CUDA_ERROR_OUT_OF_MEMORY;
	memcpy(c->limits, lim, sizeof(lim));
	c->limit_bytes = bytes;
	return CUDA_SUCCESS;
}

static CUresult mock_set_limit(CUlimit limit, size_t value)
{
	REQUIRE_INIT();
	CUcontext c = mock_current();
	if (!c || c->magic != MOCK_MAGIC_CTX)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (limit < 0 || limit >= MOCK_NLIMITS)
		return CUDA_ERROR_UNSUPPORTED_LIMIT;
	if (limit == CU_LIMIT_STACK_SIZE && value > MOCK_MAX_STACK)
		return CUDA_ERROR_INVALID_VALUE;
	return mock_ctx_limit(c, limit, value);
}

MOCK_API CUresult cuCtxSetLimit(CUlimit limit, size_t value)
{
	return LOCKED(mock_set_limit(limit, value));
}

static CUresult mock_get_limit(size_t *pvalue, CUlimit limit)
{
	REQUIRE_INIT();
	if (!pvalue)
		return CUDA_ERROR_INVALID_VALUE;
	CUcontext c = mock_current();
	if (!c || c->magic != MOCK_MAGIC_CTX)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (limit < 0 || limit >= MOCK_NLIMITS)
		return CUDA_ERROR_UNSUPPORTED_LIMIT;
	*pvalue = c->limits[limit];
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuCtxGetLimit(size_t *pvalue, CUlimit limit)
{
	return LOCKED(mock_get_limit(pvalue, limit));
}

/* ---- green contexts ---------------------------------------------------- */

/* SM partitions as on compute capability 9.0: at least 8 SMs, in steps of
 * 8. A resource carries its device in the bytes the driver keeps to
 * itself (as 1 + ordinal, so a zeroed struct names none). */
#define MOCK_SM_GRAIN 8
#define MOCK_MAGIC_GREEN 0x4752454eU
#define MOCK_MAGIC_DESC 0x44455343U

struct CUdevResourceDesc_st {
	unsigned magic;
	int dev;
	unsigned sms;
};

struct CUgreenCtx_st {
	unsigned magic;
	struct CUctx_st ctx;
};

static void mock_sm_resource(CUdevResource *r, int dev, unsigned sms)
{
	memset(r, 0, sizeof(*r));
	r->type = CU_DEV_RESOURCE_TYPE_SM;
	int tag = dev + 1;
	memcpy(r->_internal_padding, &tag, sizeof(tag));
	r->sm.smCount = sms;
	r->sm.minSmPartitionSize = MOCK_SM_GRAIN;
	r->sm.smCoscheduledAlignment = MOCK_SM_GRAIN;
}

/* The device an SM resource came from, or -1. */
static int mock_resource_dev(const CUdevResource *r)
{
	int tag;
	memcpy(&tag, r->_internal_padding, sizeof(tag));
	return r->type == CU_DEV_RESOURCE_TYPE_SM && mock_valid_dev(tag - 1) ? tag - 1 : -1;
}

MOCK_API CUresult cuDeviceGetDevResource(CUdevice dev, CUdevResource *res, CUdevResourceType type)
{
	REQUIRE_INIT();
	if (!res)
		return CUDA_ERROR_INVALID_VALUE;
	if (!mock_valid_dev(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	if (type != CU_DEV_RESOURCE_TYPE_SM)
		return CUDA_ERROR_INVALID_RESOURCE_TYPE;
	mock_sm_resource(res, dev, (unsigned)mock_spec.dev[dev].sms);
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuDevSmResourceSplitByCount(CUdevResource *result, unsigned int *nbGroups,
					      const CUdevResource *input,
					      CUdevResource *remaining, unsigned int useFlags,
					      unsigned int minCount)
{
	REQUIRE_INIT();
	if (!nbGroups || !input || (useFlags & ~3u) || (result && *nbGroups == 0))
		return CUDA_ERROR_INVALID_VALUE;
	int dev = mock_resource_dev(input);
	if (dev < 0)
		return CUDA_ERROR_INVALID_RESOURCE_TYPE;
	unsigned per = minCount < MOCK_SM_GRAIN ? MOCK_SM_GRAIN : minCount;
	if (per > input->sm.smCount)
		return CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION;
	per = (per + MOCK_SM_GRAIN - 1) / MOCK_SM_GRAIN * MOCK_SM_GRAIN;
	unsigned n = input->sm.smCount / per;
	if (n == 0)
		return CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION;
	if (result && *nbGroups < n)
		n = *nbGroups;
	unsigned rest = input->sm.smCount - n * per;
	if (result)
		for (unsigned i = 0; i < n; i++)
			mock_sm_resource(&result[i], dev, per);
	if (remaining)
		mock_sm_resource(remaining, dev, rest);
	*nbGroups = n;
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuDevResourceGenerateDesc(CUdevResourceDesc *phDesc, CUdevResource *resources,
					    unsigned int nbResources)
{
	REQUIRE_INIT();
	if (!phDesc || !resources || nbResources == 0)
		return CUDA_ERROR_INVALID_VALUE;
	int dev = mock_resource_dev(&resources[0]);
	unsigned sms = 0;
	for (unsigned i = 0; i < nbResources; i++) {
		if (mock_resource_dev(&resources[i]) != dev || dev < 0)
			return CUDA_ERROR_INVALID_RESOURCE_TYPE;
		sms += resources[i].sm.smCount;
	}
	if (sms == 0)
		return CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION;
	CUdevResourceDesc d = calloc(1, sizeof(*d));
	if (!d)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*d = (struct CUdevResourceDesc_st){ .magic = MOCK_MAGIC_DESC, .dev = dev, .sms = sms };
	*phDesc = d;
	return CUDA_SUCCESS;
}

/* A green context is a context of its own (it takes the context overhead)
 * whose kernels get only its SMs; creating one does not make it current. */
static CUresult mock_green_create(CUgreenCtx *phCtx, CUdevResourceDesc desc, CUdevice dev,
				  unsigned int flags)
{
	REQUIRE_INIT();
	if (!phCtx || !desc || desc->magic != MOCK_MAGIC_DESC ||
	    flags != CU_GREEN_CTX_DEFAULT_STREAM)
		return CUDA_ERROR_INVALID_VALUE;
	if (!mock_valid_dev(dev) || desc->dev != dev)
		return CUDA_ERROR_INVALID_DEVICE;
	CUgreenCtx g = calloc(1, sizeof(*g));
	if (!g)
		return CUDA_ERROR_OUT_OF_MEMORY;
	g->magic = MOCK_MAGIC_GREEN;
	g->ctx = (struct CUctx_st){ .magic = MOCK_MAGIC_CTX, .dev = dev, .refs = 1,
				    .sms = desc->sms };
	CUresult rc = mock_ctx_charge(&g->ctx);
	if (rc != CUDA_SUCCESS) {
		free(g);
		return rc;
	}
	*phCtx = g;
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuGreenCtxCreate(CUgreenCtx *phCtx, CUdevResourceDesc desc, CUdevice dev,
				   unsigned int flags)
{
	return LOCKED(mock_green_create(phCtx, desc, dev, flags));
}

static CUresult mock_green_destroy(CUgreenCtx g)
{
	REQUIRE_INIT();
	if (!g || g->magic != MOCK_MAGIC_GREEN)
		return CUDA_ERROR_INVALID_HANDLE;
	mock_ctx_forget(&g->ctx);
	mock_ctx_uncharge(&g->ctx);
	g->magic = 0;
	g->ctx.magic = 0;
	free(g);
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuGreenCtxDestroy(CUgreenCtx g)
{
	return LOCKED(mock_green_destroy(g));
}

MOCK_API CUresult cuCtxFromGreenCtx(CUcontext *pContext, CUgreenCtx g)
{
	REQUIRE_INIT();
	if (!pContext)
		return CUDA_ERROR_INVALID_VALUE;
	if (!g || g->magic != MOCK_MAGIC_GREEN)
		return CUDA_ERROR_INVALID_HANDLE;
	*pContext = &g->ctx;
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuGreenCtxStreamCreate(CUstream *phStream, CUgreenCtx g, unsigned int flags,
					 int priority)
{
	(void)priority;
	REQUIRE_INIT();
	if (!phStream || flags != CU_STREAM_NON_BLOCKING)
		return CUDA_ERROR_INVALID_VALUE;
	if (!g || g->magic != MOCK_MAGIC_GREEN)
		return CUDA_ERROR_INVALID_HANDLE;
	return LOCKED(mock_stream_new(phStream, &g->ctx));
}

MOCK_API CUresult cuGreenCtxGetDevResource(CUgreenCtx g, CUdevResource *res,
					   CUdevResourceType type)
{
	REQUIRE_INIT();
	if (!res)
		return CUDA_ERROR_INVALID_VALUE;
	if (!g || g->magic != MOCK_MAGIC_GREEN)
		return CUDA_ERROR_INVALID_HANDLE;
	if (type != CU_DEV_RESOURCE_TYPE_SM)
		return CUDA_ERROR_INVALID_RESOURCE_TYPE;
	mock_sm_resource(res, g->ctx.dev, g->ctx.sms);
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuCtxGetDevResource(CUcontext c, CUdevResource *res, CUdevResourceType type)
{
	REQUIRE_INIT();
	if (!res)
		return CUDA_ERROR_INVALID_VALUE;
	if (!c || c->magic != MOCK_MAGIC_CTX)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (type != CU_DEV_RESOURCE_TYPE_SM)
		return CUDA_ERROR_INVALID_RESOURCE_TYPE;
	mock_sm_resource(res, c->dev, c->sms ? c->sms : (unsigned)mock_spec.dev[c->dev].sms);
	return CUDA_SUCCESS;
}

/* Test hooks, not CUDA: the simulated clock (see the file comment). */
MOCK_API uint64_t tesseraMockNowNs(void)
{
	pthread_mutex_lock(&mock_lock);
	uint64_t t = mock_now;
	pthread_mutex_unlock(&mock_lock);
	return t;
}

MOCK_API void tesseraMockSleepNs(uint64_t ns)
{
	pthread_mutex_lock(&mock_lock);
	mock_now += ns;
	pthread_mutex_unlock(&mock_lock);
}

/* Test hook: device-wide bytes in use on dev (all processes sharing the
 * state file), or -1 before cuInit / for a bad device. */
MOCK_API int64_t tesseraMockUsedBytes(int dev)
{
	if (!mock_inited || !mock_valid_dev(dev))
		return -1;
	pthread_mutex_lock(&mock_lock);
	int64_t v = mock_usage_get(dev);
	pthread_mutex_unlock(&mock_lock);
	return v;
}

/* ---- modules ----------------------------------------------------------- */

/* A module is PTX text; its kernels are the names after ".entry", and a
 * kernel's local memory per thread is the sum of the ".local" arrays
 * declared up to the next entry. Kernels run in simulated time like any
 * other (their code is never looked at), so a program that JITs PTX on a
 * real driver runs unchanged here. Loaded modules are listed so that a
 * launch can tell its kernels from any other pointer. */
#define MOCK_MAGIC_MODULE 0x4d4f444cU
#define MOCK_MAX_KERNELS 64

struct CUfunc_st {
	unsigned magic;
	char name[64];
	size_t local_bytes;
};

struct CUmod_st {
	unsigned magic;
	CUcontext ctx;              /* loaded into; NULL: a library's */
	int64_t global_bytes;       /* its .global variables, taken from ctx's device */
	int nfuncs;
	struct CUfunc_st funcs[MOCK_MAX_KERNELS];
	struct CUmod_st *next;
};

static CUmodule mock_modules;

/* Bytes of the "SPACE ... name[N]" declarations (SPACE ".local" or
 * ".global") in [p, end). */
static size_t mock_decl_bytes(const char *p, const char *end, const char *space)
{
	size_t total = 0, len = strlen(space);
	for (const char *l = strstr(p, space); l && (!end || l < end); l = strstr(l + len, space)) {
		const char *semi = strchr(l, ';'), *br = strchr(l, '[');
		if (!semi || !br || br > semi)
			continue;   /* an ld/st of that space, not a declaration */
		total += strtoull(br + 1, NULL, 10);
	}
	return total;
}

static size_t mock_local_bytes(const char *p, const char *end)
{
	return mock_decl_bytes(p, end, ".local");
}

/* A module of the kernels image declares; NULL when it declares none
 * (*rc says why). Not yet listed. */
static CUmodule mock_module_parse(const void *image, CUresult *rc)
{
	CUmodule m = calloc(1, sizeof(*m));
	if (!m) {
		*rc = CUDA_ERROR_OUT_OF_MEMORY;
		return NULL;
	}
	m->magic = MOCK_MAGIC_MODULE;
	for (const char *p = strstr(image, ".entry"); p && m->nfuncs < MOCK_MAX_KERNELS;
	     p = strstr(p + 6, ".entry")) {
		const char *n = p + 6;
		while (*n == ' ' || *n == '\t')
			n++;
		size_t len = strcspn(n, " \t\n(");
		if (len == 0 || len >= sizeof(m->funcs[0].name))
			continue;
		struct CUfunc_st *f = &m->funcs[m->nfuncs++];
		f->magic = MOCK_MAGIC_MODULE;
		memcpy(f->name, n, len);
		f->local_bytes = mock_local_bytes(n, strstr(n, ".entry"));
	}
	if (m->nfuncs == 0) {
		free(m);
		*rc = CUDA_ERROR_INVALID_IMAGE;   /* nothing a driver could load */
		return NULL;
	}
	/* Globals sit before the first kernel in PTX. */
	m->global_bytes = (int64_t)mock_decl_bytes(image, strstr(image, ".entry"), ".global");
	return m;
}

static void mock_module_list(CUmodule m)
{
	pthread_mutex_lock(&mock_lock);
	m->next = mock_modules;
	mock_modules = m;
	pthread_mutex_unlock(&mock_lock);
}

/* Under mock_lock: unlists m, gives back its globals, frees it. */
static void mock_module_drop_locked(CUmodule m)
{
	for (CUmodule *pp = &mock_modules; *pp; pp = &(*pp)->next)
		if (*pp == m) {
			*pp = m->next;
			break;
		}
	if (m->ctx && m->global_bytes > 0)
		mock_usage_add(m->ctx->dev, -m->global_bytes);
	m->magic = 0;
	free(m);
}

static void mock_module_drop(CUmodule m)
{
	pthread_mutex_lock(&mock_lock);
	mock_module_drop_locked(m);
	pthread_mutex_unlock(&mock_lock);
}

static void mock_libraries_leave(CUcontext c);

/* Under mock_lock: a context that ends unloads its modules, as the
 * driver does; their handles are invalid afterwards. */
static void mock_modules_unload_ctx(CUcontext c)
{
	for (CUmodule m = mock_modules, next; m; m = next) {
		next = m->next;
		if (m->ctx == c)
			mock_module_drop_locked(m);
	}
	/* Libraries stay loaded; they leave this context only. */
	mock_libraries_leave(c);
}

MOCK_API CUresult cuModuleLoadData(CUmodule *pm, const void *image)
{
	REQUIRE_INIT();
	if (!pm || !image)
		return CUDA_ERROR_INVALID_VALUE;
	if (mock_current_dev() < 0)
		return CUDA_ERROR_INVALID_CONTEXT;
	CUresult rc = CUDA_SUCCESS;
	CUmodule m = mock_module_parse(image, &rc);
	if (!m)
		return rc;
	/* The driver places a module's __device__ variables in the context's
	 * device memory when it loads the module: memory no allocation call
	 * asked for, which only the driver's per-process figure shows. */
	pthread_mutex_lock(&mock_lock);
	m->ctx = mock_current();
	if (m->global_bytes > 0 && mock_usage_add(m->ctx->dev, m->global_bytes) < 0) {
		pthread_mutex_unlock(&mock_lock);
		free(m);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	m->next = mock_modules;
	mock_modules = m;
	pthread_mutex_unlock(&mock_lock);
	*pm = m;
	return CUDA_SUCCESS;
}

/* The index of the kernel called name in m; -1 when there is none. */
static int mock_module_index(CUmodule m, const char *name)
{
	for (int i = 0; i < m->nfuncs; i++)
		if (strcmp(m->funcs[i].name, name) == 0)
			return i;
	return -1;
}

MOCK_API CUresult cuModuleGetFunction(CUfunction *pf, CUmodule m, const char *name)
{
	REQUIRE_INIT();
	if (!pf || !name)
		return CUDA_ERROR_INVALID_VALUE;
	if (!m || m->magic != MOCK_MAGIC_MODULE)
		return CUDA_ERROR_INVALID_HANDLE;
	int i = mock_module_index(m, name);
	if (i < 0)
		return CUDA_ERROR_NOT_FOUND;
	*pf = &m->funcs[i];
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuModuleUnload(CUmodule m)
{
	REQUIRE_INIT();
	if (!m || m->magic != MOCK_MAGIC_MODULE)
		return CUDA_ERROR_INVALID_HANDLE;
	mock_module_drop(m);
	return CUDA_SUCCESS;
}

/* ---- libraries (CUDA 12) ------------------------------------------------ */

/* A library is a module loaded without a context; its kernels (CUkernel)
 * are handles of their own, which cuLaunchKernel takes in place of a
 * function and cuKernelGetFunction turns into the module's function in
 * the current context. cuFuncGetAttribute does not take them here (the
 * driver documents it for functions only); cuKernelGetAttribute does. */
#define MOCK_MAGIC_LIBRARY 0x4c494252U

struct CUkern_st {
	unsigned magic;
	struct CUfunc_st *f;
};

/* A context a library's module is loaded into. */
struct mock_lib_load {
	CUcontext ctx;
	struct mock_lib_load *next;
};

struct CUlib_st {
	unsigned magic;
	CUmodule m;                 /* its kernels and globals; in no context */
	struct CUkern_st kernels[MOCK_MAX_KERNELS];
	/* A library has no context of its own: the driver loads its module
	 * into a context when a kernel of it is first used there, placing
	 * its __device__ variables on that context's device each time. */
	struct mock_lib_load *loads;
	struct CUlib_st *next;
};

static CUlibrary mock_libraries;

/* Under mock_lock: loads l into c unless it is there already; out of
 * memory when its variables do not fit on c's device. */
static CUresult mock_library_load_in(CUlibrary l, CUcontext c)
{
	for (struct mock_lib_load *ld = l->loads; ld; ld = ld->next)
		if (ld->ctx == c)
			return CUDA_SUCCESS;
	struct mock_lib_load *ld = calloc(1, sizeof(*ld));
	if (!ld)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (l->m->global_bytes > 0 && mock_usage_add(c->dev, l->m->global_bytes) < 0) {
		free(ld);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	ld->ctx = c;
	ld->next = l->loads;
	l->loads = ld;
	return CUDA_SUCCESS;
}

/* Under mock_lock: l leaves c (c == NULL: every context), giving back
 * its variables there. */
static void mock_library_unload_from(CUlibrary l, CUcontext c)
{
	for (struct mock_lib_load **pp = &l->loads; *pp;) {
		struct mock_lib_load *ld = *pp;
		if (c && ld->ctx != c) {
			pp = &ld->next;
			continue;
		}
		if (l->m->global_bytes > 0)
			mock_usage_add(ld->ctx->dev, -l->m->global_bytes);
		*pp = ld->next;
		free(ld);
	}
}

/* Under mock_lock: every library leaves c, which ends. */
static void mock_libraries_leave(CUcontext c)
{
	for (CUlibrary l = mock_libraries; l; l = l->next)
		mock_library_unload_from(l, c);
}

/* The library whose kernel handle k is; NULL for anything else
 * (mock_lock held). */
static CUlibrary mock_library_of(const void *k)
{
	uintptr_t kp = (uintptr_t)k;
	for (CUlibrary l = mock_libraries; l; l = l->next)
		if (kp >= (uintptr_t)&l->kernels[0] && kp < (uintptr_t)&l->kernels[l->m->nfuncs])
			return l;
	return NULL;
}

MOCK_API CUresult cuLibraryLoadData(CUlibrary *pl, const void *code, void *jitOptions,
				    void **jitOptionsValues, unsigned int numJitOptions,
				    void *libraryOptions, void **libraryOptionValues,
				    unsigned int numLibraryOptions)
{
	(void)jitOptions; (void)jitOptionsValues; (void)libraryOptions; (void)libraryOptionValues;
	REQUIRE_INIT();
	if (!pl || !code || (numJitOptions && !jitOptions) ||
	    (numLibraryOptions && !libraryOptions))
		return CUDA_ERROR_INVALID_VALUE;
	CUresult rc = CUDA_SUCCESS;
	CUlibrary l = calloc(1, sizeof(*l));
	if (!l)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (!(l->m = mock_module_parse(code, &rc))) {
		free(l);
		return rc;
	}
	l->magic = MOCK_MAGIC_LIBRARY;
	for (int i = 0; i < l->m->nfuncs; i++)
		l->kernels[i] = (struct CUkern_st){ MOCK_MAGIC_LIBRARY, &l->m->funcs[i] };
	mock_module_list(l->m);
	pthread_mutex_lock(&mock_lock);
	l->next = mock_libraries;
	mock_libraries = l;
	pthread_mutex_unlock(&mock_lock);
	*pl = l;
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuLibraryGetKernel(CUkernel *pk, CUlibrary l, const char *name)
{
	REQUIRE_INIT();
	if (!pk || !name)
		return CUDA_ERROR_INVALID_VALUE;
	if (!l || l->magic != MOCK_MAGIC_LIBRARY)
		return CUDA_ERROR_INVALID_HANDLE;
	int i = mock_module_index(l->m, name);
	if (i < 0)
		return CUDA_ERROR_NOT_FOUND;
	*pk = &l->kernels[i];
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuLibraryUnload(CUlibrary l)
{
	REQUIRE_INIT();
	if (!l || l->magic != MOCK_MAGIC_LIBRARY)
		return CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_lock(&mock_lock);
	for (CUlibrary *pp = &mock_libraries; *pp; pp = &(*pp)->next)
		if (*pp == l) {
			*pp = l->next;
			break;
		}
	mock_library_unload_from(l, NULL);
	pthread_mutex_unlock(&mock_lock);
	mock_module_drop(l->m);
	l->magic = 0;
	free(l);
	return CUDA_SUCCESS;
}

/* f when it is a kernel of a loaded module, else NULL; with libraries,
 * a library's kernel handle counts as its function (mock_lock held). */
static struct CUfunc_st *mock_kernel_of(CUfunction f, bool libraries)
{
	uintptr_t fp = (uintptr_t)f;
	for (CUmodule m = mock_modules; m; m = m->next)
		if (fp >= (uintptr_t)&m->funcs[0] && fp < (uintptr_t)&m->funcs[m->nfuncs])
			return f;
	if (libraries && mock_library_of(f))
		return ((struct CUkern_st *)f)->f;
	return NULL;
}

static struct CUfunc_st *mock_library_kernel(CUkernel k)
{
	struct CUfunc_st *f = mock_kernel_of((CUfunction)k, true);
	return f == (struct CUfunc_st *)k ? NULL : f;   /* a module's function is no CUkernel */
}

static CUresult mock_kernel_function(CUfunction *pf, CUkernel k)
{
	REQUIRE_INIT();
	if (!pf)
		return CUDA_ERROR_INVALID_VALUE;
	if (mock_current_dev() < 0)
		return CUDA_ERROR_INVALID_CONTEXT;
	struct CUfunc_st *f = mock_library_kernel(k);
	if (!f)
		return CUDA_ERROR_INVALID_HANDLE;
	CUresult rc = mock_library_load_in(mock_library_of(k), mock_current());
	if (rc != CUDA_SUCCESS)
		return rc;
	*pf = f;
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuKernelGetFunction(CUfunction *pf, CUkernel k)
{
	return LOCKED(mock_kernel_function(pf, k));
}

/* The attributes a program asks of a kernel; the mock compiles nothing,
 * so registers and sizes other than local memory are fixed figures. */
static CUresult mock_attribute_of(int *pi, CUfunction_attribute attrib, struct CUfunc_st *k)
{
	REQUIRE_INIT();
	if (!pi)
		return CUDA_ERROR_INVALID_VALUE;
	if (!k)
		return CUDA_ERROR_INVALID_HANDLE;
	switch (attrib) {
	case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *pi = 1024; break;
	case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: *pi = 0; break;
	case CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES: *pi = 0; break;
	case CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES:
		*pi = k->local_bytes > INT_MAX ? INT_MAX : (int)k->local_bytes;
		break;
	case CU_FUNC_ATTRIBUTE_NUM_REGS: *pi = 32; break;
	case CU_FUNC_ATTRIBUTE_PTX_VERSION: *pi = 60; break;
	case CU_FUNC_ATTRIBUTE_BINARY_VERSION: *pi = 90; break;
	default: return CUDA_ERROR_INVALID_VALUE;
	}
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction f)
{
	return LOCKED(mock_attribute_of(pi, attrib, mock_kernel_of(f, false)));
}

static CUresult mock_kernel_attribute(int *pi, CUfunction_attribute attrib, CUkernel k,
				      CUdevice dev)
{
	REQUIRE_INIT();
	if (!mock_valid_dev(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	return mock_attribute_of(pi, attrib, mock_library_kernel(k));
}

MOCK_API CUresult cuKernelGetAttribute(int *pi, CUfunction_attribute attrib, CUkernel k,
				       CUdevice dev)
{
	return LOCKED(mock_kernel_attribute(pi, attrib, k, dev));
}

/* Before a launch of f in context c (mock_lock held): a kernel that needs
 * more local memory per thread than the stack limit makes the driver grow
 * the stack to fit, for every resident thread, and keep it grown; when
 * the device has no room for that, the launch fails with out of memory.
 * Launch arguments that are no loaded kernel (tests pass made-up handles)
 * need nothing. */
CUresult mock_launch_needs(CUcontext c, CUfunction f)
{
	struct CUfunc_st *k = mock_kernel_of(f, true);
	CUlibrary lib = c ? mock_library_of(f) : NULL;
	if (lib) {
		/* Launched as a library's kernel: loaded here first. */
		CUresult rc = mock_library_load_in(lib, c);
		if (rc != CUDA_SUCCESS)
			return rc;
	}
	size_t need = k ? k->local_bytes : 0;
	if (!c || need <= c->limits[CU_LIMIT_STACK_SIZE])
		return CUDA_SUCCESS;
	return mock_ctx_limit(c, CU_LIMIT_STACK_SIZE, need);
}

/* ---- errors ------------------------------------------------------------ */

static const struct { CUresult code; const char *name, *text; } mock_errors[] = {
	{ CUDA_SUCCESS, "CUDA_SUCCESS", "no error" },
	{ CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument" },
	{ CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory" },
	{ CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error" },
	{ CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED", "driver shutting down" },
	{ CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected" },
	{ CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal" },
	{ CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid" },
	{ CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context" },
	{ CUDA_ERROR_CONTEXT_ALREADY_CURRENT, "CUDA_ERROR_CONTEXT_ALREADY_CURRENT", "context already current" },
	{ CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle" },
	{ CUDA_ERROR_ILLEGAL_STATE, "CUDA_ERROR_ILLEGAL_STATE", "the operation cannot be performed in the present state" },
	{ CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found" },
	{ CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready" },
	{ CUDA_ERROR_NOT_PERMITTED, "CUDA_ERROR_NOT_PERMITTED", "operation not permitted" },
	{ CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported" },
	{ CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "operation not permitted when stream is capturing" },
	{ CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", "operation failed due to a previous error during capture" },
	{ CUDA_ERROR_CAPTURED_EVENT, "CUDA_ERROR_CAPTURED_EVENT", "operation not permitted on an event last recorded in a capturing stream" },
	{ CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error" },
};

MOCK_API CUresult cuGetErrorString(CUresult e, const char **p)
{
	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < sizeof(mock_errors) / sizeof(mock_errors[0]); i++)
		if (mock_errors[i].code == e) {
			*p = mock_errors[i].text;
			return CUDA_SUCCESS;
		}
	*p = NULL;
	return CUDA_ERROR_INVALID_VALUE;
}

MOCK_API CUresult cuGetErrorName(CUresult e, const char **p)
{
	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < sizeof(mock_errors) / sizeof(mock_errors[0]); i++)
		if (mock_errors[i].code == e) {
			*p = mock_errors[i].name;
			return CUDA_SUCCESS;
		}
	*p = NULL;
	return CUDA_ERROR_INVALID_VALUE;
}

/* ---- cuGetProcAddress -------------------------------------------------- */

/* Every entry point: (symbol, base name, CUDA version it became the
 * default for that base name, per-thread-default-stream variant). The
 * driver resolves a base name + requested version to the newest variant
 * not newer than the request, as documented for cuGetProcAddress. */
CUresult cuGetProcAddress(const char *, void **, int, cuuint64_t);
CUresult cuGetProcAddress_v2(const char *, void **, int, cuuint64_t,
			     CUdriverProcAddressQueryResult *);
#define MOCK_SYMBOLS(X) \
	X(cuInit, cuInit, 2000, 0) \
	X(cuDriverGetVersion, cuDriverGetVersion, 2020, 0) \
	X(cuDeviceGetCount, cuDeviceGetCount, 2000, 0) \
	X(cuDeviceGet, cuDeviceGet, 2000, 0) \
	X(cuDeviceGetName, cuDeviceGetName, 2000, 0) \
	X(cuDeviceGetUuid, cuDeviceGetUuid, 9020, 0) \
	X(cuDeviceGetUuid_v2, cuDeviceGetUuid, 11040, 0) \
	X(cuDeviceGetAttribute, cuDeviceGetAttribute, 2000, 0) \
	X(cuDeviceTotalMem, cuDeviceTotalMem, 2000, 0) \
	X(cuDeviceTotalMem_v2, cuDeviceTotalMem, 3020, 0) \
	X(cuCtxCreate, cuCtxCreate, 2000, 0) \
	X(cuCtxCreate_v2, cuCtxCreate, 3020, 0) \
	X(cuCtxCreate_v3, cuCtxCreate, 11040, 0) \
	X(cuCtxCreate_v4, cuCtxCreate, 12050, 0) \
	X(cuCtxDestroy, cuCtxDestroy, 2000, 0) \
	X(cuCtxDestroy_v2, cuCtxDestroy, 4000, 0) \
	X(cuCtxGetCurrent, cuCtxGetCurrent, 4000, 0) \
	X(cuCtxSetCurrent, cuCtxSetCurrent, 4000, 0) \
	X(cuCtxPushCurrent_v2, cuCtxPushCurrent, 4000, 0) \
	X(cuCtxPopCurrent_v2, cuCtxPopCurrent, 4000, 0) \
	X(cuCtxGetDevice, cuCtxGetDevice, 2000, 0) \
	X(cuCtxSynchronize, cuCtxSynchronize, 2000, 0) \
	X(cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain, 7000, 0) \
	X(cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease, 7000, 0) \
	X(cuDevicePrimaryCtxRelease_v2, cuDevicePrimaryCtxRelease, 11000, 0) \
	X(cuDevicePrimaryCtxReset, cuDevicePrimaryCtxReset, 7000, 0) \
	X(cuDevicePrimaryCtxReset_v2, cuDevicePrimaryCtxReset, 11000, 0) \
	X(cuDevicePrimaryCtxGetState, cuDevicePrimaryCtxGetState, 7000, 0) \
	X(cuCtxSetLimit, cuCtxSetLimit, 3010, 0) \
	X(cuCtxGetLimit, cuCtxGetLimit, 3010, 0) \
	X(cuDeviceGetDevResource, cuDeviceGetDevResource, 12040, 0) \
	X(cuCtxGetDevResource, cuCtxGetDevResource, 12040, 0) \
	X(cuDevSmResourceSplitByCount, cuDevSmResourceSplitByCount, 12040, 0) \
	X(cuDevResourceGenerateDesc, cuDevResourceGenerateDesc, 12040, 0) \
	X(cuGreenCtxCreate, cuGreenCtxCreate, 12040, 0) \
	X(cuGreenCtxDestroy, cuGreenCtxDestroy, 12040, 0) \
	X(cuCtxFromGreenCtx, cuCtxFromGreenCtx, 12040, 0) \
	X(cuGreenCtxStreamCreate, cuGreenCtxStreamCreate, 12050, 0) \
	X(cuGreenCtxGetDevResource, cuGreenCtxGetDevResource, 12040, 0) \
	X(cuGetErrorString, cuGetErrorString, 6000, 0) \
	X(cuGetErrorName, cuGetErrorName, 6000, 0) \
	X(cuModuleLoadData, cuModuleLoadData, 2000, 0) \
	X(cuModuleGetFunction, cuModuleGetFunction, 2000, 0) \
	X(cuModuleUnload, cuModuleUnload, 2000, 0) \
	X(cuFuncGetAttribute, cuFuncGetAttribute, 2020, 0) \
	X(cuLibraryLoadData, cuLibraryLoadData, 12000, 0) \
	X(cuLibraryGetKernel, cuLibraryGetKernel, 12000, 0) \
	X(cuLibraryUnload, cuLibraryUnload, 12000, 0) \
	X(cuKernelGetFunction, cuKernelGetFunction, 12000, 0) \
	X(cuKernelGetAttribute, cuKernelGetAttribute, 12000, 0) \
	X(cuGetProcAddress, cuGetProcAddress, 11030, 0) \
	X(cuGetProcAddress_v2, cuGetProcAddress, 12000, 0) \
	X(cuMemAlloc, cuMemAlloc, 2000, 0) \
	X(cuMemAlloc_v2, cuMemAlloc, 3020, 0) \
	X(cuMemAllocPitch, cuMemAllocPitch, 2000, 0) \
	X(cuMemAllocPitch_v2, cuMemAllocPitch, 3020, 0) \
	X(cuMemAllocManaged, cuMemAllocManaged, 6000, 0) \
	X(cuMemAllocAsync, cuMemAllocAsync, 11020, 0) \
	X(cuMemAllocAsync_ptsz, cuMemAllocAsync, 11020, 1) \
	X(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync, 11020, 0) \
	X(cuMemAllocFromPoolAsync_ptsz, cuMemAllocFromPoolAsync, 11020, 1) \
	X(cuMemFree, cuMemFree, 2000, 0) \
	X(cuMemFree_v2, cuMemFree, 3020, 0) \
	X(cuMemFreeAsync, cuMemFreeAsync, 11020, 0) \
	X(cuMemFreeAsync_ptsz, cuMemFreeAsync, 11020, 1) \
	X(cuMemGetInfo, cuMemGetInfo, 2000, 0) \
	X(cuMemGetInfo_v2, cuMemGetInfo, 3020, 0) \
	X(cuMemCreate, cuMemCreate, 10020, 0) \
	X(cuMemRelease, cuMemRelease, 10020, 0) \
	X(cuMemPoolCreate, cuMemPoolCreate, 11020, 0) \
	X(cuMemPoolDestroy, cuMemPoolDestroy, 11020, 0) \
	X(cuDeviceGetDefaultMemPool, cuDeviceGetDefaultMemPool, 11020, 0) \
	X(cuDeviceGetMemPool, cuDeviceGetMemPool, 11020, 0) \
	X(cuDeviceSetMemPool, cuDeviceSetMemPool, 11020, 0) \
	X(cuMemPoolTrimTo, cuMemPoolTrimTo, 11020, 0) \
	X(cuMemPoolGetAttribute, cuMemPoolGetAttribute, 11020, 0) \
	X(cuMemPoolSetAttribute, cuMemPoolSetAttribute, 11020, 0) \
	X(cuMemAddressReserve, cuMemAddressReserve, 10020, 0) \
	X(cuMemAddressFree, cuMemAddressFree, 10020, 0) \
	X(cuMemMap, cuMemMap, 10020, 0) \
	X(cuMemUnmap, cuMemUnmap, 10020, 0) \
	X(cuMemRetainAllocationHandle, cuMemRetainAllocationHandle, 11000, 0) \
	X(cuArrayCreate, cuArrayCreate, 2000, 0) \
	X(cuArrayCreate_v2, cuArrayCreate, 3020, 0) \
	X(cuArray3DCreate, cuArray3DCreate, 2000, 0) \
	X(cuArray3DCreate_v2, cuArray3DCreate, 3020, 0) \
	X(cuArrayDestroy, cuArrayDestroy, 2000, 0) \
	X(cuMipmappedArrayCreate, cuMipmappedArrayCreate, 5000, 0) \
	X(cuMipmappedArrayDestroy, cuMipmappedArrayDestroy, 5000, 0) \
	X(cuStreamCreate, cuStreamCreate, 2000, 0) \
	X(cuStreamDestroy_v2, cuStreamDestroy, 4000, 0) \
	X(cuStreamSynchronize, cuStreamSynchronize, 2000, 0) \
	X(cuStreamSynchronize_ptsz, cuStreamSynchronize, 7000, 1) \
	X(cuStreamGetCtx, cuStreamGetCtx, 9020, 0) \
	X(cuStreamGetCtx_ptsz, cuStreamGetCtx, 9020, 1) \
	X(cuStreamBeginCapture, cuStreamBeginCapture, 10000, 0) \
	X(cuStreamBeginCapture_ptsz, cuStreamBeginCapture, 10000, 1) \
	X(cuStreamBeginCapture_v2, cuStreamBeginCapture, 10010, 0) \
	X(cuStreamBeginCapture_v2_ptsz, cuStreamBeginCapture, 10010, 1) \
	X(cuStreamIsCapturing, cuStreamIsCapturing, 10000, 0) \
	X(cuStreamIsCapturing_ptsz, cuStreamIsCapturing, 10000, 1) \
	X(cuStreamEndCapture, cuStreamEndCapture, 10000, 0) \
	X(cuStreamEndCapture_ptsz, cuStreamEndCapture, 10000, 1) \
	X(cuGraphCreate, cuGraphCreate, 10000, 0) \
	X(cuGraphAddMemAllocNode, cuGraphAddMemAllocNode, 11040, 0) \
	X(cuGraphAddMemFreeNode, cuGraphAddMemFreeNode, 11040, 0) \
	X(cuGraphAddChildGraphNode, cuGraphAddChildGraphNode, 10000, 0) \
	X(cuGraphGetNodes, cuGraphGetNodes, 10000, 0) \
	X(cuGraphNodeGetType, cuGraphNodeGetType, 10000, 0) \
	X(cuGraphMemAllocNodeGetParams, cuGraphMemAllocNodeGetParams, 11040, 0) \
	X(cuGraphMemFreeNodeGetParams, cuGraphMemFreeNodeGetParams, 11040, 0) \
	X(cuGraphChildGraphNodeGetGraph, cuGraphChildGraphNodeGetGraph, 10000, 0) \
	X(cuGraphInstantiate, cuGraphInstantiate, 10000, 0) \
	X(cuGraphInstantiate_v2, cuGraphInstantiate, 11000, 0) \
	X(cuGraphInstantiateWithFlags, cuGraphInstantiateWithFlags, 11040, 0) \
	/* CUDA 12 headers #define cuGraphInstantiate to the flags form */ \
	X(cuGraphInstantiateWithFlags, cuGraphInstantiate, 12000, 0) \
	X(cuGraphInstantiateWithParams, cuGraphInstantiateWithParams, 12000, 0) \
	X(cuGraphInstantiateWithParams_ptsz, cuGraphInstantiateWithParams, 12000, 1) \
	X(cuGraphUpload, cuGraphUpload, 11010, 0) \
	X(cuGraphUpload_ptsz, cuGraphUpload, 11010, 1) \
	X(cuDeviceGraphMemTrim, cuDeviceGraphMemTrim, 11040, 0) \
	X(cuDeviceGetGraphMemAttribute, cuDeviceGetGraphMemAttribute, 11040, 0) \
	X(cuDeviceSetGraphMemAttribute, cuDeviceSetGraphMemAttribute, 11040, 0) \
	X(cuGraphLaunch, cuGraphLaunch, 10000, 0) \
	X(cuGraphLaunch_ptsz, cuGraphLaunch, 10000, 1) \
	X(cuGraphDestroy, cuGraphDestroy, 10000, 0) \
	X(cuGraphExecDestroy, cuGraphExecDestroy, 10000, 0) \
	X(cuEventCreate, cuEventCreate, 2000, 0) \
	X(cuEventDestroy_v2, cuEventDestroy, 4000, 0) \
	X(cuEventRecord, cuEventRecord, 2000, 0) \
	X(cuEventRecord_ptsz, cuEventRecord, 7000, 1) \
	X(cuEventQuery, cuEventQuery, 2000, 0) \
	X(cuEventSynchronize, cuEventSynchronize, 2000, 0) \
	X(cuEventElapsedTime, cuEventElapsedTime, 2000, 0) \
	X(cuLaunchKernel, cuLaunchKernel, 4000, 0) \
	X(cuLaunchKernel_ptsz, cuLaunchKernel, 7000, 1) \
	X(cuLaunchKernelEx, cuLaunchKernelEx, 11060, 0) \
	X(cuLaunchKernelEx_ptsz, cuLaunchKernelEx, 11060, 1) \
	X(cuLaunchCooperativeKernel, cuLaunchCooperativeKernel, 9000, 0) \
	X(cuLaunchCooperativeKernel_ptsz, cuLaunchCooperativeKernel, 9000, 1)

static const struct mock_symbol {
	const char *name, *base;
	int since;
	bool ptsz;
	void *fn;
} mock_symbols[] = {
#define MOCK_SYM_ROW(n, b, v, p) { #n, #b, v, p, (void *)n },
	MOCK_SYMBOLS(MOCK_SYM_ROW)
#undef MOCK_SYM_ROW
};

#define MOCK_NSYMBOLS (sizeof(mock_symbols) / sizeof(mock_symbols[0]))

/* TESSERA_MOCK_PROC_TRAMPOLINES=1 makes cuGetProcAddress hand out, instead
 * of the exported functions, stubs in anonymous memory that jump to them:
 * a driver whose lookup table is not its export table. dladdr finds no
 * symbol there, so a shim has to go by the name and version it was asked
 * for; this is how the tests reach that path. x86-64 and AArch64 only
 * (elsewhere the variable is ignored). */
#define MOCK_TRAMPOLINE_BYTES 16
static unsigned char *mock_trampolines;
static pthread_once_t mock_trampolines_once = PTHREAD_ONCE_INIT;

static void mock_trampolines_make(void)
{
	const char *on = getenv("TESSERA_MOCK_PROC_TRAMPOLINES");
	if (!on || strcmp(on, "1") != 0)
		return;
#if defined(__x86_64__) || defined(__aarch64__)
	size_t len = MOCK_NSYMBOLS * MOCK_TRAMPOLINE_BYTES;
	unsigned char *t = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
				-1, 0);
	if (t == MAP_FAILED)
		return;
	for (size_t i = 0; i < MOCK_NSYMBOLS; i++) {
		unsigned char *stub = t + i * MOCK_TRAMPOLINE_BYTES;
		uint64_t target = (uint64_t)(uintptr_t)mock_symbols[i].fn;
#if defined(__x86_64__)
		/* jmp *0(%rip), then the target address */
		static const unsigned char jmp[6] = { 0xff, 0x25, 0, 0, 0, 0 };
		memcpy(stub, jmp, sizeof(jmp));
		memcpy(stub + 6, &target, 8);
#else
		/* ldr x16, #8; br x16; then the target address */
		static const uint32_t ldr_br[2] = { 0x58000050, 0xd61f0200 };
		memcpy(stub, ldr_br, sizeof(ldr_br));
		memcpy(stub + 8, &target, 8);
#endif
	}
	__builtin___clear_cache((char *)t, (char *)t + len);
	if (mprotect(t, len, PROT_READ | PROT_EXEC) != 0) {
		munmap(t, len);
		return;
	}
	mock_trampolines = t;
#endif
}

static void *mock_handed_out(const struct mock_symbol *s)
{
	pthread_once(&mock_trampolines_once, mock_trampolines_make);
	if (!mock_trampolines)
		return s->fn;
	/* one stub per function, however many base names lead to it */
	size_t i = 0;
	while (mock_symbols[i].fn != s->fn)
		i++;
	return mock_trampolines + i * MOCK_TRAMPOLINE_BYTES;
}

/* TESSERA_MOCK_PROC_LOG=FILE appends one line per lookup: the name, version
 * and flags asked for, and the file of the code that asked (the fGPU
 * library, when it is in between). This is how the tests see what a CUDA
 * runtime asks the driver for (tests/fgpu/cudart12_entry_points.txt). */
static void mock_proc_log(const char *symbol, int version, cuuint64_t flags, void *caller)
{
	const char *path = getenv("TESSERA_MOCK_PROC_LOG");
	if (!path || !*path)
		return;
	Dl_info info;
	const char *from = "?";
	if (dladdr(caller, &info) && info.dli_fname) {
		const char *slash = strrchr(info.dli_fname, '/');
		from = slash ? slash + 1 : info.dli_fname;
	}
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	/* one write per line: lines of concurrent callers do not mix */
	char line[512];
	int n = snprintf(line, sizeof(line), "%s %d %llu %s\n", symbol && *symbol ? symbol : "\"\"",
			 version, (unsigned long long)flags, from);
	if (n > 0 && (size_t)n < sizeof(line) && write(fd, line, (size_t)n) < 0)
		n = -1;   /* a test hook: a failed write only loses the line */
	close(fd);
}

/* What the real driver does, as Debian's 550.163.01 (CUDA 12.4) answers
 * (docs/fgpu.md, "The CUDA runtime on the mock"): flags other than the
 * two stream flags are CUDA_ERROR_INVALID_VALUE; a version is compared
 * unsigned (-1 asks for the newest); a name not found, or found only in
 * a newer version, is CUDA_ERROR_NOT_FOUND from cuGetProcAddress with
 * *pfn untouched, and CUDA_SUCCESS from cuGetProcAddress_v2 with *pfn NULL
 * and the reason in symbolStatus. The CUDA 12 runtime relies on the
 * latter: it asks for every entry point it knows and keeps NULL for the
 * ones a driver lacks. */
static CUresult mock_proc_address(const char *symbol, void **pfn, int version,
				  cuuint64_t flags, bool v2, CUdriverProcAddressQueryResult *status)
{
	if (!symbol || !pfn)
		return CUDA_ERROR_INVALID_VALUE;
	if (flags & ~(cuuint64_t)(CU_GET_PROC_ADDRESS_LEGACY_STREAM |
				  CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM))
		return CUDA_ERROR_INVALID_VALUE;
	bool want_ptsz = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
	const struct mock_symbol *best = NULL;
	bool known = false;
	for (size_t i = 0; i < MOCK_NSYMBOLS; i++) {
		const struct mock_symbol *s = &mock_symbols[i];
		if (strcmp(s->base, symbol) != 0)
			continue;
		known = true;
		if ((unsigned)s->since > (unsigned)version)
			continue;
		/* A per-thread variant wins when asked for; otherwise never. */
		if (s->ptsz && !want_ptsz)
			continue;
		if (!best || (s->ptsz && !best->ptsz) ||
		    (s->ptsz == best->ptsz && s->since > best->since))
			best = s;
	}
	if (status)
		*status = best ? CU_GET_PROC_ADDRESS_SUCCESS
			: known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
				: CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	if (best) {
		*pfn = mock_handed_out(best);
		return CUDA_SUCCESS;
	}
	if (!v2)
		return CUDA_ERROR_NOT_FOUND;
	*pfn = NULL;
	return CUDA_SUCCESS;
}

/* noinline: the return address is the caller's (mock_proc_log). */
MOCK_API __attribute__((noinline)) CUresult cuGetProcAddress(const char *symbol, void **pfn,
							     int version, cuuint64_t flags)
{
	mock_proc_log(symbol, version, flags, __builtin_return_address(0));
	return mock_proc_address(symbol, pfn, version, flags, false, NULL);
}

MOCK_API __attribute__((noinline)) CUresult cuGetProcAddress_v2(const char *symbol, void **pfn,
								int version, cuuint64_t flags,
								CUdriverProcAddressQueryResult *status)
{
	mock_proc_log(symbol, version, flags, __builtin_return_address(0));
	return mock_proc_address(symbol, pfn, version, flags, true, status);
}
