/* Mock CUDA driver (libcuda.so.1): simulates the devices of the mock spec
 * (gpu/mock/mockspec.h) closely enough for Tessera's fGPU shim, gpu-info
 * and tests, through the real driver ABI (fgpu/cuda_abi.h).
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
 * through cuGetProcAddress are its own, as the real driver's are. */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "fgpu/cuda_abi.h"
#include "gpu/mock/mockspec.h"

#define MOCK_API __attribute__((visibility("default")))
#define MOCK_MAGIC_CTX 0x43545831U
#define MOCK_MAGIC_STREAM 0x5354524dU
#define MOCK_MAGIC_EVENT 0x45564e54U
#define MOCK_MAGIC_ARRAY 0x41525259U
#define MOCK_MAGIC_POOL 0x504f4f4cU
#define MOCK_MAGIC_GRAPH 0x47525048U
#define MOCK_MAGIC_GEXEC 0x47455843U
#define MOCK_MAGIC_NODE 0x4e4f4445U

/* Granularity in which pools reserve device memory and give it back. */
#define MOCK_POOL_GRAIN (2ULL << 20)
/* CU_MEMPOOL_ATTR_REUSE_* are attributes 1..3 (int flags). */
#define MOCK_POOL_REUSE_ATTRS 3
/* cuMemAddressReserve hands out ranges below the device pointers
 * (mock_next_ptr), so a reserved address never names an allocation. */
#define MOCK_VA_BASE 0x600000000000ULL
#define MOCK_VA_END 0x700000000000ULL

struct CUctx_st {
	unsigned magic;
	int dev;
	int refs;            /* primary: retain count */
	bool primary;
	int64_t overhead;    /* bytes taken from the device */
	uint64_t null_tail;  /* simulated end of work on the NULL stream */
};

struct CUstream_st {
	unsigned magic;
	CUcontext ctx;
	uint64_t tail;
	CUstreamCaptureStatus capture;
	CUstreamCaptureMode capture_mode;  /* kept; what it forbids is not simulated */
	uint64_t cap_ns;        /* simulated work captured so far */
	unsigned cap_launches;  /* kernels captured so far */
	CUgraph cap_graph;      /* memory nodes captured so far (made on the first) */
};

struct CUevent_st {
	unsigned magic;
	unsigned flags;
	bool recorded;
	bool captured;          /* last recorded in a capture: no point in time */
	uint64_t t;
};

/* A graph: what its kernels would run, in simulated ns, and how many
 * kernels that is (kernels are not nodes here), and its other nodes:
 * memory allocations and frees, and child graphs. */
struct CUgraph_st {
	unsigned magic;
	uint64_t ns;
	unsigned launches;
	struct CUgraphNode_st **nodes;
	size_t nnodes, cap_nodes;
	bool embedded;           /* a child graph node's: the node owns it */
	unsigned execs;          /* live executable graphs, when it has memory nodes */
};

struct CUgraphNode_st {
	unsigned magic;
	CUgraphNodeType type;
	CUgraph owner;
	int dev;                 /* MEM_ALLOC */
	uint64_t bytes;          /* MEM_ALLOC */
	CUdeviceptr dptr;        /* MEM_ALLOC (fixed at creation), MEM_FREE */
	CUmemAccessDesc *access; /* MEM_ALLOC: a copy of the caller's */
	size_t naccess;
	CUgraph child;           /* GRAPH: a copy, owned by the node */
};

/* An allocation of an executable graph (child graphs flattened in). */
struct mock_galloc {
	CUdeviceptr dptr;
	uint64_t bytes;
	int dev;
	bool freed;              /* by a free node of the same graph */
};

/* An executable graph: a copy of what its graph runs and allocates. Its
 * allocations are backed by graph memory on the devices in mapped, from
 * its first launch or upload until it is destroyed or trimmed idle. */
struct CUgraphExec_st {
	unsigned magic;
	uint64_t ns;
	unsigned launches;
	bool auto_free;          /* CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH */
	CUgraph graph;           /* instantiated from, while that lives */
	struct mock_galloc *allocs;
	size_t nallocs;
	CUdeviceptr *frees;      /* free nodes for allocations of other graphs */
	size_t nfrees;
	uint32_t mapped;         /* bit per device */
	uint64_t busy_until;     /* simulated end of its last launch */
	struct CUgraphExec_st *next;  /* mock_execs */
};

/* A graph allocation left live by a launch, until it is freed. While the
 * executable graph that made it is mapped the bytes are part of that
 * mapping; otherwise (exec NULL) they count in graph memory on their own. */
struct mock_glive {
	CUdeviceptr dptr;
	uint64_t bytes;
	int dev;
	CUgraphExec exec;
};

/* The graph allocator of a device: reserved is taken from the device,
 * used is mapped to executable graphs (and live allocations). */
struct mock_gmem {
	uint64_t reserved, used;
	uint64_t reserved_high, used_high;
};

struct CUarray_st {
	unsigned magic;
	int dev;
	int64_t bytes;
};

struct CUmipmappedArray_st {
	unsigned magic;
	int dev;
	int64_t bytes;
};

/* Byte counts are what the pool holds: reserved is taken from the device,
 * used is the part handed out to live allocations. */
struct CUmemPoolHandle_st {
	unsigned magic;
	int dev;
	bool is_default;
	bool destroyed;         /* by the user; kept until its last free */
	uint64_t reserved, used, threshold;
	uint64_t reserved_high, used_high;
	int reuse[MOCK_POOL_REUSE_ATTRS];  /* stored only: reuse is not simulated */
	struct CUmemPoolHandle_st *next;   /* mock_pools */
};

/* Allocation kinds tracked so that a free finds its size and device. */
enum { MA_PTR, MA_PTR_V1, MA_HANDLE, MA_POOL };

struct mock_alloc {
	int kind;
	int dev;
	uint64_t key;
	int64_t bytes;
	CUmemoryPool pool;      /* MA_POOL: the pool it came from */
	int refs, maps;         /* MA_HANDLE: references and mappings */
};

/* A cuMemMap mapping, and a cuMemAddressReserve range. */
struct mock_map {
	uint64_t va, size;
	CUmemGenericAllocationHandle handle;
};

struct mock_range {
	uint64_t base, size;
	bool graph;              /* the address of a graph allocation node */
};

static pthread_mutex_t mock_lock = PTHREAD_MUTEX_INITIALIZER;
static bool mock_inited;
static struct mock_spec mock_spec;
static struct CUctx_st mock_primary[MOCK_MAX_DEVICES];
static struct CUmemPoolHandle_st mock_default_pool[MOCK_MAX_DEVICES];
static uint64_t mock_next_ptr[MOCK_MAX_DEVICES];
static uint32_t mock_next_ptr_v1 = 0x10000000U;
static uint64_t mock_next_handle = 1;
static struct mock_alloc *mock_allocs;
static size_t mock_nallocs, mock_cap_allocs;
static CUmemoryPool mock_pools;                 /* every live pool, defaults too */
static CUmemoryPool mock_cur_pool[MOCK_MAX_DEVICES];
static struct mock_map *mock_maps;
static size_t mock_nmaps, mock_cap_maps;
static struct mock_range *mock_vas;
static size_t mock_nvas, mock_cap_vas;
static uint64_t mock_next_va = MOCK_VA_BASE;
static CUgraphExec mock_execs;                  /* every live executable graph */
static struct mock_glive *mock_glives;
static size_t mock_nglives, mock_cap_glives;
static struct mock_gmem mock_gmem[MOCK_MAX_DEVICES];
static uint64_t mock_now = 1000000000ULL;       /* simulated ns, starts at 1 s */
static uint64_t mock_busy_until[MOCK_MAX_DEVICES];
static uint64_t mock_block_ns = 1000;
static int64_t mock_ctx_overhead;

static __thread CUcontext mock_ctx_stack[16];
static __thread int mock_ctx_depth;

#define LOCKED(expr) ({ pthread_mutex_lock(&mock_lock); CUresult r_ = (expr); \
	pthread_mutex_unlock(&mock_lock); r_; })

static bool mock_valid_dev(CUdevice d)
{
	return d >= 0 && d < mock_spec.count;
}

static CUcontext mock_current(void)
{
	return mock_ctx_depth > 0 ? mock_ctx_stack[mock_ctx_depth - 1] : NULL;
}

static int mock_current_dev(void)
{
	CUcontext c = mock_current();
	return c && c->magic == MOCK_MAGIC_CTX ? c->dev : -1;
}

/* Every CUstream argument goes through here first: the special handles
 * CU_STREAM_LEGACY and CU_STREAM_PER_THREAD are small integers, not
 * objects, and mean the current context's default stream as NULL does
 * (the mock has one default stream per context, so both are the same).
 * False for a handle that is not a live stream. */
static bool mock_stream(CUstream *s)
{
	if (*s == CU_STREAM_LEGACY || *s == CU_STREAM_PER_THREAD)
		*s = NULL;
	return !*s || (*s)->magic == MOCK_MAGIC_STREAM;
}

static uint64_t mock_grain_up(uint64_t n)
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
static void mock_pools_release(void)
{
	for (CUmemoryPool p = mock_pools; p; p = p->next)
		if (p->reserved > p->threshold)
			mock_pool_shrink(p, p->threshold);
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

#define REQUIRE_INIT() do { if (!mock_inited) return CUDA_ERROR_NOT_INITIALIZED; } while (0)

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

static CUresult mock_ctx_charge(CUcontext c)
{
	if (mock_ctx_overhead > 0) {
		if (mock_usage_add(c->dev, mock_ctx_overhead) < 0)
			return CUDA_ERROR_OUT_OF_MEMORY;
		c->overhead = mock_ctx_overhead;
	}
	return CUDA_SUCCESS;
}

static void mock_ctx_uncharge(CUcontext c)
{
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
	if (!c || c->magic != MOCK_MAGIC_CTX || c->primary)
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

/* ---- memory ------------------------------------------------------------ */

/* Makes room for one more element in a growing table (*arr holding n of
 * *cap elements of size elem). */
static bool mock_room(void **arr, size_t *cap, size_t n, size_t elem)
{
	if (n < *cap)
		return true;
	size_t c = *cap ? *cap * 2 : 64;
	void *a = realloc(*arr, c * elem);
	if (!a)
		return false;
	*arr = a;
	*cap = c;
	return true;
}

/* Records an allocation; the new entry is mock_allocs[mock_nallocs - 1]. */
static CUresult mock_track(int kind, int dev, uint64_t key, int64_t bytes)
{
	if (!mock_room((void **)&mock_allocs, &mock_cap_allocs, mock_nallocs, sizeof(*mock_allocs)))
		return CUDA_ERROR_OUT_OF_MEMORY;
	mock_allocs[mock_nallocs++] = (struct mock_alloc){ .kind = kind, .dev = dev,
		.key = key, .bytes = bytes };
	return CUDA_SUCCESS;
}

/* Takes bytes from dev and records the allocation under key. */
static CUresult mock_take(int kind, int dev, uint64_t key, int64_t bytes)
{
	if (mock_usage_add(dev, bytes) < 0)
		return CUDA_ERROR_OUT_OF_MEMORY;
	CUresult rc = mock_track(kind, dev, key, bytes);
	if (rc != CUDA_SUCCESS)
		mock_usage_add(dev, -bytes);
	return rc;
}

/* The tracked allocation, valid until the table next changes. */
static struct mock_alloc *mock_find(int kind, uint64_t key)
{
	for (size_t i = mock_nallocs; i-- > 0;)
		if (mock_allocs[i].kind == kind && mock_allocs[i].key == key)
			return &mock_allocs[i];
	return NULL;
}

static void mock_untrack(struct mock_alloc *a)
{
	*a = mock_allocs[--mock_nallocs];
}

static CUresult mock_give(int kind, uint64_t key)
{
	struct mock_alloc *a = mock_find(kind, key);
	if (!a)
		return CUDA_ERROR_INVALID_VALUE;
	mock_usage_add(a->dev, -a->bytes);
	mock_untrack(a);
	return CUDA_SUCCESS;
}

static CUresult mock_alloc_on(CUdeviceptr *dptr, size_t bytes, int dev)
{
	REQUIRE_INIT();
	if (!dptr || bytes == 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (dev < 0)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (bytes > (size_t)INT64_MAX)
		return CUDA_ERROR_OUT_OF_MEMORY;
	uint64_t p = mock_next_ptr[dev];
	CUresult rc = mock_take(MA_PTR, dev, p, (int64_t)bytes);
	if (rc != CUDA_SUCCESS)
		return rc;
	mock_next_ptr[dev] += ((uint64_t)bytes + 511) & ~511ULL;
	*dptr = p;
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytes)
{
	return LOCKED(mock_alloc_on(dptr, bytes, mock_current_dev()));
}

static CUresult mock_alloc_v1(CUdeviceptr_v1 *dptr, unsigned int bytes)
{
	REQUIRE_INIT();
	if (!dptr || bytes == 0)
		return CUDA_ERROR_INVALID_VALUE;
	int dev = mock_current_dev();
	if (dev < 0)
		return CUDA_ERROR_INVALID_CONTEXT;
	uint32_t p = mock_next_ptr_v1;
	if ((uint64_t)p + bytes > 0xffffffffULL)
		return CUDA_ERROR_OUT_OF_MEMORY;
	CUresult rc = mock_take(MA_PTR_V1, dev, p, bytes);
	if (rc != CUDA_SUCCESS)
		return rc;
	mock_next_ptr_v1 += (bytes + 511u) & ~511u;
	*dptr = p;
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytes)
{
	return LOCKED(mock_alloc_v1(dptr, bytes));
}

MOCK_API CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width,
				     size_t height, unsigned int elem)
{
	if (!pitch || width == 0 || height == 0 ||
	    (elem != 4 && elem != 8 && elem != 16))
		return CUDA_ERROR_INVALID_VALUE;
	size_t p = (width + 511) & ~(size_t)511;
	if (height > SIZE_MAX / p)
		return CUDA_ERROR_OUT_OF_MEMORY;
	CUresult rc = cuMemAlloc_v2(dptr, p * height);
	if (rc == CUDA_SUCCESS)
		*pitch = p;
	return rc;
}

MOCK_API CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pitch,
				  unsigned int width, unsigned int height, unsigned int elem)
{
	if (!pitch || width == 0 || height == 0 ||
	    (elem != 4 && elem != 8 && elem != 16))
		return CUDA_ERROR_INVALID_VALUE;
	uint64_t p = ((uint64_t)width + 511) & ~511ULL;
	if (p * height > 0xffffffffULL)
		return CUDA_ERROR_OUT_OF_MEMORY;
	CUresult rc = cuMemAlloc(dptr, (unsigned int)(p * height));
	if (rc == CUDA_SUCCESS)
		*pitch = (unsigned int)p;
	return rc;
}

MOCK_API CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytes, unsigned int flags)
{
	if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST)
		return CUDA_ERROR_INVALID_VALUE;
	return cuMemAlloc_v2(dptr, bytes);
}

/* ---- stream-ordered pools ---------------------------------------------- */

/* Graph memory (below) that stream-ordered allocation reaches into. */
static CUresult mock_capture_alloc(CUdeviceptr *dptr, size_t bytes, int dev, CUstream s);
static CUresult mock_capture_free(CUdeviceptr p, CUstream s);
static bool mock_glive_free(CUdeviceptr p);

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

/* ---- virtual memory management ----------------------------------------- */

static CUresult mock_mem_create(CUmemGenericAllocationHandle *h, size_t size,
				const CUmemAllocationProp *prop)
{
	REQUIRE_INIT();
	if (!h || !prop || size == 0 || size > (size_t)INT64_MAX ||
	    prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
		return CUDA_ERROR_INVALID_VALUE;
	if (!mock_valid_dev(prop->location.id))
		return CUDA_ERROR_INVALID_DEVICE;
	uint64_t key = mock_next_handle;
	CUresult rc = mock_take(MA_HANDLE, prop->location.id, key, (int64_t)size);
	if (rc == CUDA_SUCCESS) {
		mock_allocs[mock_nallocs - 1].refs = 1;
		mock_next_handle++;
		*h = key;
	}
	return rc;
}

MOCK_API CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t size,
			      const CUmemAllocationProp *prop, unsigned long long flags)
{
	if (flags != 0)
		return CUDA_ERROR_INVALID_VALUE;
	return LOCKED(mock_mem_create(h, size, prop));
}

/* The physical memory of a handle lives while anything holds it: a
 * reference (cuMemCreate, cuMemRetainAllocationHandle) or a mapping. */
static void mock_handle_put(struct mock_alloc *a)
{
	if (a->refs == 0 && a->maps == 0) {
		mock_usage_add(a->dev, -a->bytes);
		mock_untrack(a);
	}
}

static CUresult mock_mem_release(CUmemGenericAllocationHandle h)
{
	REQUIRE_INIT();
	struct mock_alloc *a = mock_find(MA_HANDLE, h);
	if (!a || a->refs == 0)
		return CUDA_ERROR_INVALID_VALUE;
	a->refs--;
	mock_handle_put(a);
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuMemRelease(CUmemGenericAllocationHandle h)
{
	return LOCKED(mock_mem_release(h));
}

static bool mock_overlaps(uint64_t a, uint64_t an, uint64_t b, uint64_t bn)
{
	return a < b + bn && b < a + an;
}

static bool mock_va_is_free(uint64_t base, uint64_t size)
{
	for (size_t i = 0; i < mock_nvas; i++)
		if (mock_overlaps(base, size, mock_vas[i].base, mock_vas[i].size))
			return false;
	return true;
}

/* addr is a hint, taken when it is free, aligned and in the mock's
 * address area; otherwise the range comes after every range handed out
 * so far (freed ranges are not reused, the area is 16 TiB). */
static CUresult mock_address_reserve(CUdeviceptr *ptr, size_t size, size_t align,
				     CUdeviceptr addr)
{
	REQUIRE_INIT();
	if (!ptr || size == 0 || (align & (align - 1)) != 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (align < MOCK_POOL_GRAIN)
		align = MOCK_POOL_GRAIN;   /* the mock's allocation granularity */
	if (size > MOCK_VA_END - MOCK_VA_BASE)
		return CUDA_ERROR_OUT_OF_MEMORY;
	uint64_t base;
	if (addr != 0 && addr % align == 0 && addr >= MOCK_VA_BASE &&
	    addr <= MOCK_VA_END - size && mock_va_is_free(addr, size)) {
		base = addr;
	} else {
		base = (mock_next_va + align - 1) & ~(uint64_t)(align - 1);
		if (base < mock_next_va || base > MOCK_VA_END - size)
			return CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (!mock_room((void **)&mock_vas, &mock_cap_vas, mock_nvas, sizeof(*mock_vas)))
		return CUDA_ERROR_OUT_OF_MEMORY;
	mock_vas[mock_nvas++] = (struct mock_range){ .base = base, .size = size };
	if (base + size > mock_next_va)
		mock_next_va = base + size;
	*ptr = base;
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment,
				      CUdeviceptr addr, unsigned long long flags)
{
	if (flags != 0)
		return CUDA_ERROR_INVALID_VALUE;
	return LOCKED(mock_address_reserve(ptr, size, alignment, addr));
}

/* Only a whole range as reserved can be freed. */
static CUresult mock_address_free(CUdeviceptr ptr, size_t size)
{
	REQUIRE_INIT();
	for (size_t i = 0; i < mock_nvas; i++)
		if (mock_vas[i].base == ptr && mock_vas[i].size == size && !mock_vas[i].graph) {
			mock_vas[i] = mock_vas[--mock_nvas];
			return CUDA_SUCCESS;
		}
	return CUDA_ERROR_INVALID_VALUE;
}

MOCK_API CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
	return LOCKED(mock_address_free(ptr, size));
}

static CUresult mock_mem_map(CUdeviceptr va, size_t size, size_t offset,
			     CUmemGenericAllocationHandle h)
{
	REQUIRE_INIT();
	struct mock_alloc *a = mock_find(MA_HANDLE, h);
	/* a released handle is dead to its user even while still mapped */
	if (!a || a->refs == 0 || va == 0 || size == 0 || va + size < va ||
	    offset > (uint64_t)a->bytes || size > (uint64_t)a->bytes - offset)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < mock_nmaps; i++)
		if (mock_overlaps(va, size, mock_maps[i].va, mock_maps[i].size))
			return CUDA_ERROR_INVALID_VALUE;
	if (!mock_room((void **)&mock_maps, &mock_cap_maps, mock_nmaps, sizeof(*mock_maps)))
		return CUDA_ERROR_OUT_OF_MEMORY;
	mock_maps[mock_nmaps++] = (struct mock_map){ .va = va, .size = size, .handle = h };
	a->maps++;
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
			   CUmemGenericAllocationHandle handle, unsigned long long flags)
{
	if (flags != 0)
		return CUDA_ERROR_INVALID_VALUE;
	return LOCKED(mock_mem_map(ptr, size, offset, handle));
}

/* Checks the whole request before removing anything, so that a refused
 * unmap changes nothing. */
static CUresult mock_mem_unmap(CUdeviceptr va, size_t size)
{
	REQUIRE_INIT();
	if (va == 0 || size == 0 || va + size < va)
		return CUDA_ERROR_INVALID_VALUE;
	uint64_t end = va + size;
	bool at_start = false;
	for (size_t i = 0; i < mock_nmaps; i++) {
		const struct mock_map *m = &mock_maps[i];
		if (m->va < va || m->va >= end)
			continue;
		if (m->size > end - m->va)
			return CUDA_ERROR_INVALID_VALUE;
		at_start |= m->va == va;
	}
	if (!at_start)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = mock_nmaps; i-- > 0;) {
		if (mock_maps[i].va < va || mock_maps[i].va >= end)
			continue;
		struct mock_alloc *a = mock_find(MA_HANDLE, mock_maps[i].handle);
		mock_maps[i] = mock_maps[--mock_nmaps];
		if (a) {
			a->maps--;
			mock_handle_put(a);
		}
	}
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
	return LOCKED(mock_mem_unmap(ptr, size));
}

static CUresult mock_retain_handle(CUmemGenericAllocationHandle *h, void *addr)
{
	REQUIRE_INIT();
	if (!h)
		return CUDA_ERROR_INVALID_VALUE;
	uint64_t va = (uint64_t)(uintptr_t)addr;
	for (size_t i = 0; i < mock_nmaps; i++) {
		const struct mock_map *m = &mock_maps[i];
		if (va < m->va || va - m->va >= m->size)
			continue;
		struct mock_alloc *a = mock_find(MA_HANDLE, m->handle);
		if (!a)
			break;
		a->refs++;
		*h = m->handle;
		return CUDA_SUCCESS;
	}
	return CUDA_ERROR_INVALID_VALUE;
}

MOCK_API CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle,
					      void *addr)
{
	return LOCKED(mock_retain_handle(handle, addr));
}

/* ---- arrays ------------------------------------------------------------ */

static int64_t mock_format_bytes(CUarray_format f)
{
	switch (f) {
	case CU_AD_FORMAT_UNSIGNED_INT8: case CU_AD_FORMAT_SIGNED_INT8: return 1;
	case CU_AD_FORMAT_UNSIGNED_INT16: case CU_AD_FORMAT_SIGNED_INT16:
	case CU_AD_FORMAT_HALF: return 2;
	case CU_AD_FORMAT_UNSIGNED_INT32: case CU_AD_FORMAT_SIGNED_INT32:
	case CU_AD_FORMAT_FLOAT: return 4;
	default: return -1;
	}
}

static int64_t mock_extent_bytes(size_t w, size_t h, size_t d, CUarray_format f,
				 unsigned ch, unsigned levels)
{
	int64_t bpe = mock_format_bytes(f);
	if (bpe < 0 || w == 0 || (ch != 1 && ch != 2 && ch != 4) || levels == 0)
		return -1;
	int64_t total = 0;
	for (unsigned l = 0; l < levels; l++) {
		size_t lw = w >> l ? w >> l : 1, lh = h >> l ? h >> l : 1,
		       ld = d >> l ? d >> l : 1;
		int64_t b;
		if (__builtin_mul_overflow((int64_t)lw, (int64_t)lh, &b) ||
		    __builtin_mul_overflow(b, (int64_t)ld, &b) ||
		    __builtin_mul_overflow(b, bpe * ch, &b) ||
		    __builtin_add_overflow(total, b, &total))
			return INT64_MAX;
	}
	return total;
}

static CUresult mock_array_new(CUarray *pa, int64_t bytes)
{
	REQUIRE_INIT();
	if (bytes < 0)
		return CUDA_ERROR_INVALID_VALUE;
	int dev = mock_current_dev();
	if (dev < 0)
		return CUDA_ERROR_INVALID_CONTEXT;
	CUarray a = calloc(1, sizeof(*a));
	if (!a)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (mock_usage_add(dev, bytes) < 0) {
		free(a);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*a = (struct CUarray_st){ MOCK_MAGIC_ARRAY, dev, bytes };
	*pa = a;
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuArrayCreate_v2(CUarray *pa, const CUDA_ARRAY_DESCRIPTOR *d)
{
	if (!pa || !d)
		return CUDA_ERROR_INVALID_VALUE;
	int64_t b = mock_extent_bytes(d->Width, d->Height, 1, d->Format, d->NumChannels, 1);
	return LOCKED(mock_array_new(pa, b));
}

MOCK_API CUresult cuArray3DCreate_v2(CUarray *pa, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
	if (!pa || !d)
		return CUDA_ERROR_INVALID_VALUE;
	int64_t b = mock_extent_bytes(d->Width, d->Height, d->Depth, d->Format,
				      d->NumChannels, 1);
	return LOCKED(mock_array_new(pa, b));
}

/* The pre-3.2 entry points: the same arrays, described with 32-bit
 * extents. */
MOCK_API CUresult cuArrayCreate(CUarray *pa, const CUDA_ARRAY_DESCRIPTOR_v1 *d)
{
	if (!pa || !d)
		return CUDA_ERROR_INVALID_VALUE;
	int64_t b = mock_extent_bytes(d->Width, d->Height, 1, d->Format, d->NumChannels, 1);
	return LOCKED(mock_array_new(pa, b));
}

MOCK_API CUresult cuArray3DCreate(CUarray *pa, const CUDA_ARRAY3D_DESCRIPTOR_v1 *d)
{
	if (!pa || !d)
		return CUDA_ERROR_INVALID_VALUE;
	int64_t b = mock_extent_bytes(d->Width, d->Height, d->Depth, d->Format,
				      d->NumChannels, 1);
	return LOCKED(mock_array_new(pa, b));
}

static CUresult mock_array_destroy(CUarray a)
{
	REQUIRE_INIT();
	if (!a || a->magic != MOCK_MAGIC_ARRAY)
		return CUDA_ERROR_INVALID_HANDLE;
	mock_usage_add(a->dev, -a->bytes);
	a->magic = 0;
	free(a);
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuArrayDestroy(CUarray a)
{
	return LOCKED(mock_array_destroy(a));
}

static CUresult mock_mipmap_new(CUmipmappedArray *pm, const CUDA_ARRAY3D_DESCRIPTOR *d,
				unsigned levels)
{
	REQUIRE_INIT();
	int64_t b = mock_extent_bytes(d->Width, d->Height, d->Depth, d->Format,
				      d->NumChannels, levels);
	if (b < 0)
		return CUDA_ERROR_INVALID_VALUE;
	int dev = mock_current_dev();
	if (dev < 0)
		return CUDA_ERROR_INVALID_CONTEXT;
	CUmipmappedArray m = calloc(1, sizeof(*m));
	if (!m)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (mock_usage_add(dev, b) < 0) {
		free(m);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*m = (struct CUmipmappedArray_st){ MOCK_MAGIC_ARRAY, dev, b };
	*pm = m;
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuMipmappedArrayCreate(CUmipmappedArray *pm,
					 const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned int levels)
{
	if (!pm || !d)
		return CUDA_ERROR_INVALID_VALUE;
	return LOCKED(mock_mipmap_new(pm, d, levels));
}

static CUresult mock_mipmap_destroy(CUmipmappedArray m)
{
	REQUIRE_INIT();
	if (!m || m->magic != MOCK_MAGIC_ARRAY)
		return CUDA_ERROR_INVALID_HANDLE;
	mock_usage_add(m->dev, -m->bytes);
	m->magic = 0;
	free(m);
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuMipmappedArrayDestroy(CUmipmappedArray m)
{
	return LOCKED(mock_mipmap_destroy(m));
}

static CUresult mock_mem_info(size_t *freep, size_t *totalp)
{
	REQUIRE_INIT();
	if (!freep || !totalp)
		return CUDA_ERROR_INVALID_VALUE;
	int dev = mock_current_dev();
	if (dev < 0)
		return CUDA_ERROR_INVALID_CONTEXT;
	int64_t total = mock_spec.dev[dev].mem, used = mock_usage_get(dev);
	*totalp = (size_t)total;
	*freep = used >= total ? 0 : (size_t)(total - used);
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuMemGetInfo_v2(size_t *freep, size_t *totalp)
{
	return LOCKED(mock_mem_info(freep, totalp));
}

MOCK_API CUresult cuMemGetInfo(unsigned int *freep, unsigned int *totalp)
{
	size_t f, t;
	CUresult rc = cuMemGetInfo_v2(freep ? &f : NULL, totalp ? &t : NULL);
	if (rc == CUDA_SUCCESS) {
		*freep = f > 0xffffffffu ? 0xffffffffu : (unsigned int)f;
		*totalp = t > 0xffffffffu ? 0xffffffffu : (unsigned int)t;
	}
	return rc;
}

/* ---- streams (simulated time) ------------------------------------------ */

static uint64_t *mock_tail(CUstream s)
{
	if (s)
		return &s->tail;
	CUcontext c = mock_current();
	return c ? &c->null_tail : NULL;
}

MOCK_API CUresult cuStreamCreate(CUstream *ps, unsigned int flags)
{
	(void)flags;
	REQUIRE_INIT();
	if (!ps)
		return CUDA_ERROR_INVALID_VALUE;
	CUcontext c = mock_current();
	if (!c)
		return CUDA_ERROR_INVALID_CONTEXT;
	CUstream s = calloc(1, sizeof(*s));
	if (!s)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*s = (struct CUstream_st){ .magic = MOCK_MAGIC_STREAM, .ctx = c };
	*ps = s;
	return CUDA_SUCCESS;
}

static void mock_graph_free(CUgraph g);

static CUresult mock_stream_destroy(CUstream s)
{
	if (s->cap_graph)
		mock_graph_free(s->cap_graph);   /* an unfinished capture's */
	s->magic = 0;
	free(s);
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuStreamDestroy_v2(CUstream s)
{
	REQUIRE_INIT();
	/* the default streams are the context's, not the caller's to destroy */
	if (!mock_stream(&s) || !s)
		return CUDA_ERROR_INVALID_HANDLE;
	return LOCKED(mock_stream_destroy(s));
}

/* Waiting is what a capture cannot record: the capture is invalidated
 * (it stays open until cuStreamEndCapture, which reports it). */
static CUresult mock_stream_sync(CUstream s)
{
	if (s && s->capture != CU_STREAM_CAPTURE_STATUS_NONE) {
		s->capture = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	}
	uint64_t *t = mock_tail(s);
	if (!t)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (*t > mock_now)
		mock_now = *t;
	mock_pools_release();
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuStreamSynchronize(CUstream s)
{
	REQUIRE_INIT();
	if (!mock_stream(&s))
		return CUDA_ERROR_INVALID_HANDLE;
	return LOCKED(mock_stream_sync(s));
}

MOCK_API CUresult cuStreamSynchronize_ptsz(CUstream s)
{
	return cuStreamSynchronize(s);
}

static CUresult mock_stream_ctx(CUstream s, CUcontext *pctx)
{
	CUcontext c = s ? s->ctx : mock_current();
	if (!c)
		return CUDA_ERROR_INVALID_CONTEXT;
	*pctx = c;
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuStreamGetCtx(CUstream s, CUcontext *pctx)
{
	REQUIRE_INIT();
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	if (!mock_stream(&s))
		return CUDA_ERROR_INVALID_HANDLE;
	return LOCKED(mock_stream_ctx(s, pctx));
}

MOCK_API CUresult cuStreamGetCtx_ptsz(CUstream s, CUcontext *pctx)
{
	return cuStreamGetCtx(s, pctx);
}

/* ---- stream capture ---------------------------------------------------- */

/* Default streams cannot capture (the legacy stream synchronizes with
 * everything, so there is nothing to record it into). */
static CUresult mock_begin_capture(CUstream s, CUstreamCaptureMode mode)
{
	if (!s)
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	if (s->capture != CU_STREAM_CAPTURE_STATUS_NONE)
		return CUDA_ERROR_ILLEGAL_STATE;
	s->capture = CU_STREAM_CAPTURE_STATUS_ACTIVE;
	s->capture_mode = mode;
	s->cap_ns = 0;
	s->cap_launches = 0;
	s->cap_graph = NULL;
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode mode)
{
	REQUIRE_INIT();
	if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
	    mode != CU_STREAM_CAPTURE_MODE_RELAXED)
		return CUDA_ERROR_INVALID_VALUE;
	if (!mock_stream(&s))
		return CUDA_ERROR_INVALID_HANDLE;
	return LOCKED(mock_begin_capture(s, mode));
}

/* The CUDA 10.0 entry point, before capture modes: global mode. */
MOCK_API CUresult cuStreamBeginCapture(CUstream s)
{
	return cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
}

MOCK_API CUresult cuStreamBeginCapture_ptsz(CUstream s)
{
	return cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
}

MOCK_API CUresult cuStreamBeginCapture_v2_ptsz(CUstream s, CUstreamCaptureMode mode)
{
	return cuStreamBeginCapture_v2(s, mode);
}

MOCK_API CUresult cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus *status)
{
	REQUIRE_INIT();
	if (!status)
		return CUDA_ERROR_INVALID_VALUE;
	if (!mock_stream(&s))
		return CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_lock(&mock_lock);
	*status = s ? s->capture : CU_STREAM_CAPTURE_STATUS_NONE;
	pthread_mutex_unlock(&mock_lock);
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuStreamIsCapturing_ptsz(CUstream s, CUstreamCaptureStatus *status)
{
	return cuStreamIsCapturing(s, status);
}

static CUgraph mock_graph_new(void);

/* Ends the capture in every case but "not capturing"; an invalidated one
 * yields no graph. The graph gets the captured memory nodes. */
static CUresult mock_end_capture(CUstream s, CUgraph *pg)
{
	if (!s || s->capture == CU_STREAM_CAPTURE_STATUS_NONE)
		return CUDA_ERROR_ILLEGAL_STATE;
	bool valid = s->capture == CU_STREAM_CAPTURE_STATUS_ACTIVE;
	CUgraph g = s->cap_graph;
	s->capture = CU_STREAM_CAPTURE_STATUS_NONE;
	s->cap_graph = NULL;
	*pg = NULL;
	if (!valid) {
		if (g)
			mock_graph_free(g);
		return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
	}
	if (!g && !(g = mock_graph_new()))
		return CUDA_ERROR_OUT_OF_MEMORY;
	g->ns = s->cap_ns;
	g->launches = s->cap_launches;
	*pg = g;
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuStreamEndCapture(CUstream s, CUgraph *pg)
{
	REQUIRE_INIT();
	if (!pg)
		return CUDA_ERROR_INVALID_VALUE;
	if (!mock_stream(&s))
		return CUDA_ERROR_INVALID_HANDLE;
	return LOCKED(mock_end_capture(s, pg));
}

MOCK_API CUresult cuStreamEndCapture_ptsz(CUstream s, CUgraph *pg)
{
	return cuStreamEndCapture(s, pg);
}

/* ---- events ------------------------------------------------------------ */

MOCK_API CUresult cuEventCreate(CUevent *pe, unsigned int flags)
{
	REQUIRE_INIT();
	if (!pe)
		return CUDA_ERROR_INVALID_VALUE;
	CUevent e = calloc(1, sizeof(*e));
	if (!e)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*e = (struct CUevent_st){ .magic = MOCK_MAGIC_EVENT, .flags = flags };
	*pe = e;
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuEventDestroy_v2(CUevent e)
{
	REQUIRE_INIT();
	if (!e || e->magic != MOCK_MAGIC_EVENT)
		return CUDA_ERROR_INVALID_HANDLE;
	e->magic = 0;
	free(e);
	return CUDA_SUCCESS;
}

/* Recorded in a capture, an event becomes a node of the graph, not a
 * point in time, until it is next recorded outside one. */
static CUresult mock_event_record(CUevent e, CUstream s)
{
	if (s && s->capture == CU_STREAM_CAPTURE_STATUS_INVALIDATED)
		return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
	if (s && s->capture == CU_STREAM_CAPTURE_STATUS_ACTIVE) {
		e->captured = true;
		return CUDA_SUCCESS;
	}
	uint64_t *t = mock_tail(s);
	if (!t)
		return CUDA_ERROR_INVALID_CONTEXT;
	e->t = *t > mock_now ? *t : mock_now;
	e->recorded = true;
	e->captured = false;
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuEventRecord(CUevent e, CUstream s)
{
	REQUIRE_INIT();
	if (!e || e->magic != MOCK_MAGIC_EVENT || !mock_stream(&s))
		return CUDA_ERROR_INVALID_HANDLE;
	return LOCKED(mock_event_record(e, s));
}

MOCK_API CUresult cuEventRecord_ptsz(CUevent e, CUstream s)
{
	return cuEventRecord(e, s);
}

MOCK_API CUresult cuEventQuery(CUevent e)
{
	REQUIRE_INIT();
	if (!e || e->magic != MOCK_MAGIC_EVENT)
		return CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_lock(&mock_lock);
	CUresult rc = e->captured ? CUDA_ERROR_CAPTURED_EVENT
		: !e->recorded || e->t <= mock_now ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
	pthread_mutex_unlock(&mock_lock);
	return rc;
}

static CUresult mock_event_sync(CUevent e)
{
	if (e->captured)
		return CUDA_ERROR_CAPTURED_EVENT;
	if (e->recorded && e->t > mock_now)
		mock_now = e->t;
	mock_pools_release();
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuEventSynchronize(CUevent e)
{
	REQUIRE_INIT();
	if (!e || e->magic != MOCK_MAGIC_EVENT)
		return CUDA_ERROR_INVALID_HANDLE;
	return LOCKED(mock_event_sync(e));
}

MOCK_API CUresult cuEventElapsedTime(float *ms, CUevent a, CUevent b)
{
	REQUIRE_INIT();
	if (!ms)
		return CUDA_ERROR_INVALID_VALUE;
	if (!a || !b || a->magic != MOCK_MAGIC_EVENT || b->magic != MOCK_MAGIC_EVENT)
		return CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_lock(&mock_lock);
	CUresult rc = CUDA_SUCCESS;
	if (a->captured || b->captured)
		rc = CUDA_ERROR_CAPTURED_EVENT;
	else if ((a->flags & CU_EVENT_DISABLE_TIMING) || (b->flags & CU_EVENT_DISABLE_TIMING) ||
		 !a->recorded || !b->recorded)
		rc = CUDA_ERROR_INVALID_HANDLE;
	else if (a->t > mock_now || b->t > mock_now)
		rc = CUDA_ERROR_NOT_READY;
	else
		*ms = (float)((double)((int64_t)b->t - (int64_t)a->t) / 1e6);
	pthread_mutex_unlock(&mock_lock);
	return rc;
}

/* ---- kernels and graphs ------------------------------------------------ */

/* Puts ns of simulated work (launches kernels) on stream s: it starts
 * once the stream's earlier work and the device are done, one thing at a
 * time per device; *endp (when given) gets when it ends. A capturing
 * stream records it instead. */
static CUresult mock_submit(CUstream s, uint64_t ns, unsigned launches, uint64_t *endp)
{
	CUcontext c = s ? s->ctx : mock_current();
	uint64_t *t = mock_tail(s);
	if (!c || !t)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (s && s->capture == CU_STREAM_CAPTURE_STATUS_INVALIDATED)
		return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
	if (s && s->capture == CU_STREAM_CAPTURE_STATUS_ACTIVE) {
		s->cap_ns += ns;
		s->cap_launches += launches;
		return CUDA_SUCCESS;
	}
	uint64_t start = mock_now;
	if (*t > start)
		start = *t;
	if (mock_busy_until[c->dev] > start)
		start = mock_busy_until[c->dev];
	uint64_t end = start + ns;
	*t = end;
	mock_busy_until[c->dev] = end;
	if (endp)
		*endp = end;
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy,
				 unsigned int gz, unsigned int bx, unsigned int by,
				 unsigned int bz, unsigned int shmem, CUstream s,
				 void **params, void **extra)
{
	(void)shmem; (void)params; (void)extra;
	REQUIRE_INIT();
	if (!f)
		return CUDA_ERROR_INVALID_HANDLE;
	if (gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0 ||
	    (uint64_t)bx * by * bz > 1024)
		return CUDA_ERROR_INVALID_VALUE;
	if (!mock_stream(&s))
		return CUDA_ERROR_INVALID_HANDLE;
	return LOCKED(mock_submit(s, (uint64_t)gx * gy * gz * mock_block_ns, 1, NULL));
}

MOCK_API CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy,
				      unsigned int gz, unsigned int bx, unsigned int by,
				      unsigned int bz, unsigned int shmem, CUstream s,
				      void **params, void **extra)
{
	return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shmem, s, params, extra);
}

MOCK_API CUresult cuLaunchKernelEx(const CUlaunchConfig *c, CUfunction f, void **params,
				   void **extra)
{
	if (!c)
		return CUDA_ERROR_INVALID_VALUE;
	return cuLaunchKernel(f, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX,
			      c->blockDimY, c->blockDimZ, c->sharedMemBytes, c->hStream,
			      params, extra);
}

MOCK_API CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *c, CUfunction f,
					void **params, void **extra)
{
	return cuLaunchKernelEx(c, f, params, extra);
}

/* All blocks co-resident is not checked: the mock has no occupancy. */
MOCK_API CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX,
					    unsigned int gridDimY, unsigned int gridDimZ,
					    unsigned int blockDimX, unsigned int blockDimY,
					    unsigned int blockDimZ, unsigned int sharedMemBytes,
					    CUstream hStream, void **kernelParams)
{
	return cuLaunchKernel(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY,
			      blockDimZ, sharedMemBytes, hStream, kernelParams, NULL);
}

MOCK_API CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gridDimX,
						 unsigned int gridDimY, unsigned int gridDimZ,
						 unsigned int blockDimX, unsigned int blockDimY,
						 unsigned int blockDimZ,
						 unsigned int sharedMemBytes, CUstream hStream,
						 void **kernelParams)
{
	return cuLaunchCooperativeKernel(f, gridDimX, gridDimY, gridDimZ, blockDimX,
					 blockDimY, blockDimZ, sharedMemBytes, hStream,
					 kernelParams);
}

/* ---- graph nodes --------------------------------------------------------- */

static bool mock_graph_ok(CUgraph g)
{
	return g && g->magic == MOCK_MAGIC_GRAPH;
}

static bool mock_node_ok(CUgraphNode n)
{
	return n && n->magic == MOCK_MAGIC_NODE;
}

static CUgraph mock_graph_new(void)
{
	CUgraph g = calloc(1, sizeof(*g));
	if (g)
		g->magic = MOCK_MAGIC_GRAPH;
	return g;
}

/* Frees g with its nodes and their child graphs; executable graphs made
 * from it live on without it. */
static void mock_graph_free(CUgraph g)
{
	for (CUgraphExec e = mock_execs; e; e = e->next)
		if (e->graph == g)
			e->graph = NULL;
	for (size_t i = 0; i < g->nnodes; i++) {
		CUgraphNode n = g->nodes[i];
		if (n->child)
			mock_graph_free(n->child);
		free(n->access);
		n->magic = 0;
		free(n);
	}
	free(g->nodes);
	g->magic = 0;
	free(g);
}

/* A new node at the end of g, or NULL when out of memory. */
static CUgraphNode mock_node_add(CUgraph g, CUgraphNodeType type)
{
	if (!mock_room((void **)&g->nodes, &g->cap_nodes, g->nnodes, sizeof(*g->nodes)))
		return NULL;
	CUgraphNode n = calloc(1, sizeof(*n));
	if (!n)
		return NULL;
	*n = (struct CUgraphNode_st){ .magic = MOCK_MAGIC_NODE, .type = type, .owner = g };
	g->nodes[g->nnodes++] = n;
	return n;
}

/* Dependencies only have to be distinct nodes of g: the mock runs a
 * graph as one piece of work, so their order does not matter. */
static CUresult mock_deps_ok(CUgraph g, const CUgraphNode *deps, size_t ndeps)
{
	if (ndeps > 0 && !deps)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < ndeps; i++) {
		if (!mock_node_ok(deps[i]) || deps[i]->owner != g)
			return CUDA_ERROR_INVALID_VALUE;
		for (size_t j = 0; j < i; j++)
			if (deps[j] == deps[i])
				return CUDA_ERROR_INVALID_VALUE;
	}
	return CUDA_SUCCESS;
}

/* A deep copy of src, owned by a child graph node. Memory nodes keep
 * their addresses. */
static CUgraph mock_graph_clone(CUgraph src)
{
	CUgraph g = mock_graph_new();
	if (!g)
		return NULL;
	g->ns = src->ns;
	g->launches = src->launches;
	g->embedded = true;
	for (size_t i = 0; i < src->nnodes; i++) {
		const struct CUgraphNode_st *s = src->nodes[i];
		CUgraphNode n = mock_node_add(g, s->type);
		if (!n)
			goto fail;
		n->dev = s->dev;
		n->bytes = s->bytes;
		n->dptr = s->dptr;
		if (s->naccess > 0) {
			n->access = malloc(s->naccess * sizeof(*n->access));
			if (!n->access)
				goto fail;
			memcpy(n->access, s->access, s->naccess * sizeof(*n->access));
			n->naccess = s->naccess;
		}
		if (s->child && !(n->child = mock_graph_clone(s->child)))
			goto fail;
	}
	return g;
fail:
	mock_graph_free(g);
	return NULL;
}

/* An allocation node's address: a range of the cuMemAddressReserve area
 * that no other reservation can take, kept for the life of the process
 * (the address stays the allocation's across instantiations). */
static CUresult mock_graph_va(CUdeviceptr *va, size_t bytes)
{
	CUresult rc = mock_address_reserve(va, bytes, 0, 0);
	if (rc == CUDA_SUCCESS)
		mock_vas[mock_nvas - 1].graph = true;
	return rc;
}

static bool mock_graph_va_known(CUdeviceptr p)
{
	for (size_t i = 0; i < mock_nvas; i++)
		if (mock_vas[i].graph && mock_vas[i].base == p)
			return true;
	return false;
}

static CUresult mock_add_alloc(CUgraphNode *pn, CUgraph g, int dev, size_t bytes,
			       const CUmemAccessDesc *access, size_t naccess, CUdeviceptr *dptr)
{
	CUmemAccessDesc *copy = NULL;
	if (naccess > 0) {
		if (naccess > SIZE_MAX / sizeof(*copy) || !(copy = malloc(naccess * sizeof(*copy))))
			return CUDA_ERROR_OUT_OF_MEMORY;
		memcpy(copy, access, naccess * sizeof(*copy));
	}
	CUdeviceptr va;
	CUresult rc = mock_graph_va(&va, bytes);
	CUgraphNode n = rc == CUDA_SUCCESS ? mock_node_add(g, CU_GRAPH_NODE_TYPE_MEM_ALLOC) : NULL;
	if (!n) {
		free(copy);
		return rc != CUDA_SUCCESS ? rc : CUDA_ERROR_OUT_OF_MEMORY;
	}
	n->dev = dev;
	n->bytes = bytes;
	n->dptr = va;
	n->access = copy;
	n->naccess = naccess;
	*dptr = va;
	if (pn)
		*pn = n;
	return CUDA_SUCCESS;
}

/* The graph a capture's memory nodes go to, made on the first. */
static CUgraph mock_cap_graph(CUstream s)
{
	if (!s->cap_graph)
		s->cap_graph = mock_graph_new();
	return s->cap_graph;
}

static CUresult mock_capture_alloc(CUdeviceptr *dptr, size_t bytes, int dev, CUstream s)
{
	if (!dptr || bytes == 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (s->capture == CU_STREAM_CAPTURE_STATUS_INVALIDATED)
		return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
	CUgraph g = mock_cap_graph(s);
	if (!g)
		return CUDA_ERROR_OUT_OF_MEMORY;
	return mock_add_alloc(NULL, g, dev, bytes, NULL, 0, dptr);
}

static CUresult mock_capture_free(CUdeviceptr p, CUstream s)
{
	if (s->capture == CU_STREAM_CAPTURE_STATUS_INVALIDATED)
		return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
	CUgraph g = mock_cap_graph(s);
	CUgraphNode n = g ? mock_node_add(g, CU_GRAPH_NODE_TYPE_MEM_FREE) : NULL;
	if (!n)
		return CUDA_ERROR_OUT_OF_MEMORY;
	n->dptr = p;
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuGraphCreate(CUgraph *pg, unsigned int flags)
{
	REQUIRE_INIT();
	if (!pg || flags != 0)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&mock_lock);
	CUgraph g = mock_graph_new();
	pthread_mutex_unlock(&mock_lock);
	if (!g)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*pg = g;
	return CUDA_SUCCESS;
}

/* Memory nodes cannot be added to a child graph node's graph (as the
 * driver documents for cuGraphChildGraphNodeGetGraph). */
static CUresult mock_add_mem_alloc_node(CUgraphNode *pn, CUgraph g, const CUgraphNode *deps,
					size_t ndeps, CUDA_MEM_ALLOC_NODE_PARAMS *p)
{
	REQUIRE_INIT();
	if (!pn || !mock_graph_ok(g) || g->embedded || !p || p->bytesize == 0 ||
	    p->poolProps.allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
	    p->poolProps.location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
	    (p->accessDescCount > 0 && !p->accessDescs))
		return CUDA_ERROR_INVALID_VALUE;
	if (!mock_valid_dev(p->poolProps.location.id))
		return CUDA_ERROR_INVALID_DEVICE;
	for (size_t i = 0; i < p->accessDescCount; i++)
		if (p->accessDescs[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
		    !mock_valid_dev(p->accessDescs[i].location.id))
			return CUDA_ERROR_INVALID_VALUE;
	CUresult rc = mock_deps_ok(g, deps, ndeps);
	if (rc != CUDA_SUCCESS)
		return rc;
	return mock_add_alloc(pn, g, p->poolProps.location.id, p->bytesize, p->accessDescs,
			      p->accessDescCount, &p->dptr);
}

MOCK_API CUresult cuGraphAddMemAllocNode(CUgraphNode *pn, CUgraph g, const CUgraphNode *deps,
					 size_t ndeps, CUDA_MEM_ALLOC_NODE_PARAMS *params)
{
	return LOCKED(mock_add_mem_alloc_node(pn, g, deps, ndeps, params));
}

/* Whether g (children included) has a free node for p. */
static bool mock_graph_frees(CUgraph g, CUdeviceptr p)
{
	for (size_t i = 0; i < g->nnodes; i++) {
		const struct CUgraphNode_st *n = g->nodes[i];
		if ((n->type == CU_GRAPH_NODE_TYPE_MEM_FREE && n->dptr == p) ||
		    (n->child && mock_graph_frees(n->child, p)))
			return true;
	}
	return false;
}

/* Only an address an allocation node returned, once per graph. */
static CUresult mock_add_mem_free_node(CUgraphNode *pn, CUgraph g, const CUgraphNode *deps,
				       size_t ndeps, CUdeviceptr dptr)
{
	REQUIRE_INIT();
	if (!pn || !mock_graph_ok(g) || g->embedded || !mock_graph_va_known(dptr) ||
	    mock_graph_frees(g, dptr))
		return CUDA_ERROR_INVALID_VALUE;
	CUresult rc = mock_deps_ok(g, deps, ndeps);
	if (rc != CUDA_SUCCESS)
		return rc;
	CUgraphNode n = mock_node_add(g, CU_GRAPH_NODE_TYPE_MEM_FREE);
	if (!n)
		return CUDA_ERROR_OUT_OF_MEMORY;
	n->dptr = dptr;
	*pn = n;
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuGraphAddMemFreeNode(CUgraphNode *pn, CUgraph g, const CUgraphNode *deps,
					size_t ndeps, CUdeviceptr dptr)
{
	return LOCKED(mock_add_mem_free_node(pn, g, deps, ndeps, dptr));
}

/* The child is copied into the node, memory nodes included (which the
 * driver allows only for a child whose ownership moves to the parent). */
static CUresult mock_add_child_node(CUgraphNode *pn, CUgraph g, const CUgraphNode *deps,
				    size_t ndeps, CUgraph child)
{
	REQUIRE_INIT();
	if (!pn || !mock_graph_ok(g) || !mock_graph_ok(child))
		return CUDA_ERROR_INVALID_VALUE;
	CUresult rc = mock_deps_ok(g, deps, ndeps);
	if (rc != CUDA_SUCCESS)
		return rc;
	CUgraph copy = mock_graph_clone(child);
	if (!copy)
		return CUDA_ERROR_OUT_OF_MEMORY;
	CUgraphNode n = mock_node_add(g, CU_GRAPH_NODE_TYPE_GRAPH);
	if (!n) {
		mock_graph_free(copy);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	n->child = copy;
	*pn = n;
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuGraphAddChildGraphNode(CUgraphNode *pn, CUgraph g, const CUgraphNode *deps,
					   size_t ndeps, CUgraph child)
{
	return LOCKED(mock_add_child_node(pn, g, deps, ndeps, child));
}

/* As documented: with nodes, at most *n of them are written, entries past
 * the graph's nodes are set to NULL, and *n becomes how many were
 * written. Captured kernels are no nodes in the mock. */
static CUresult mock_graph_get_nodes(CUgraph g, CUgraphNode *nodes, size_t *n)
{
	REQUIRE_INIT();
	if (!mock_graph_ok(g) || !n)
		return CUDA_ERROR_INVALID_VALUE;
	if (!nodes) {
		*n = g->nnodes;
		return CUDA_SUCCESS;
	}
	size_t got = *n < g->nnodes ? *n : g->nnodes;
	for (size_t i = 0; i < *n; i++)
		nodes[i] = i < got ? g->nodes[i] : NULL;
	*n = got;
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuGraphGetNodes(CUgraph g, CUgraphNode *nodes, size_t *numNodes)
{
	return LOCKED(mock_graph_get_nodes(g, nodes, numNodes));
}

static CUresult mock_node_get_type(CUgraphNode n, CUgraphNodeType *type)
{
	REQUIRE_INIT();
	if (!mock_node_ok(n) || !type)
		return CUDA_ERROR_INVALID_VALUE;
	*type = n->type;
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuGraphNodeGetType(CUgraphNode node, CUgraphNodeType *type)
{
	return LOCKED(mock_node_get_type(node, type));
}

/* The access descriptors returned are the node's, valid while it lives. */
static CUresult mock_alloc_node_params(CUgraphNode n, CUDA_MEM_ALLOC_NODE_PARAMS *out)
{
	REQUIRE_INIT();
	if (!mock_node_ok(n) || n->type != CU_GRAPH_NODE_TYPE_MEM_ALLOC || !out)
		return CUDA_ERROR_INVALID_VALUE;
	memset(&out->poolProps, 0, sizeof(out->poolProps));
	out->poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
	out->poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	out->poolProps.location.id = n->dev;
	out->accessDescs = n->access;
	out->accessDescCount = n->naccess;
	out->bytesize = n->bytes;
	out->dptr = n->dptr;
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuGraphMemAllocNodeGetParams(CUgraphNode node,
					       CUDA_MEM_ALLOC_NODE_PARAMS *params_out)
{
	return LOCKED(mock_alloc_node_params(node, params_out));
}

static CUresult mock_free_node_params(CUgraphNode n, CUdeviceptr *dptr)
{
	REQUIRE_INIT();
	if (!mock_node_ok(n) || n->type != CU_GRAPH_NODE_TYPE_MEM_FREE || !dptr)
		return CUDA_ERROR_INVALID_VALUE;
	*dptr = n->dptr;
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuGraphMemFreeNodeGetParams(CUgraphNode node, CUdeviceptr *dptr_out)
{
	return LOCKED(mock_free_node_params(node, dptr_out));
}

/* Not a copy: the node keeps owning the graph. */
static CUresult mock_child_node_graph(CUgraphNode n, CUgraph *pg)
{
	REQUIRE_INIT();
	if (!mock_node_ok(n) || n->type != CU_GRAPH_NODE_TYPE_GRAPH || !pg)
		return CUDA_ERROR_INVALID_VALUE;
	*pg = n->child;
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuGraphChildGraphNodeGetGraph(CUgraphNode node, CUgraph *graph)
{
	return LOCKED(mock_child_node_graph(node, graph));
}

/* ---- graph memory ------------------------------------------------------ */

static void mock_gmem_highs(struct mock_gmem *m)
{
	if (m->reserved > m->reserved_high)
		m->reserved_high = m->reserved;
	if (m->used > m->used_high)
		m->used_high = m->used;
}

static uint64_t mock_gexec_bytes(CUgraphExec e, int dev)
{
	uint64_t n = 0;
	for (size_t i = 0; i < e->nallocs; i++)
		if (e->allocs[i].dev == dev)
			n += e->allocs[i].bytes;
	return n;
}

/* Whether p is an allocation e leaves live on dev. */
static bool mock_gexec_keeps(CUgraphExec e, CUdeviceptr p, int dev)
{
	for (size_t i = 0; i < e->nallocs; i++)
		if (e->allocs[i].dptr == p && e->allocs[i].dev == dev && !e->allocs[i].freed)
			return true;
	return false;
}

static struct mock_glive *mock_glive_find(CUdeviceptr p)
{
	for (size_t i = 0; i < mock_nglives; i++)
		if (mock_glives[i].dptr == p)
			return &mock_glives[i];
	return NULL;
}

/* Frees a live graph allocation: its memory stays mapped to its graph,
 * or, when it was on its own, leaves graph memory (not the reserve). */
static void mock_glive_drop(struct mock_glive *l)
{
	if (!l->exec)
		mock_gmem[l->dev].used -= l->bytes;
	*l = mock_glives[--mock_nglives];
}

/* cuMemFree / cuMemFreeAsync of a graph allocation: true when p was one
 * that is live. */
static bool mock_glive_free(CUdeviceptr p)
{
	struct mock_glive *l = mock_glive_find(p);
	if (!l)
		return false;
	mock_glive_drop(l);
	return true;
}

/* Backs e's allocations with graph memory on every device where it is
 * not mapped yet: the unmapped part of the reserve first, then the
 * reserve grows by whole grains. All or nothing. Live allocations of e's
 * that lost their mapping (trim, or a destroyed executable graph of the
 * same graph) are mapped already and become part of e's again. */
static CUresult mock_gexec_map(CUgraphExec e)
{
	uint64_t add[MOCK_MAX_DEVICES] = { 0 }, grow[MOCK_MAX_DEVICES] = { 0 };
	uint32_t devs = 0;
	for (int d = 0; d < mock_spec.count; d++) {
		uint64_t need = mock_gexec_bytes(e, d);
		if ((e->mapped & (1u << d)) || need == 0)
			continue;
		devs |= 1u << d;
		for (size_t i = 0; i < mock_nglives; i++) {
			const struct mock_glive *l = &mock_glives[i];
			if (!l->exec && l->dev == d && mock_gexec_keeps(e, l->dptr, d))
				need -= l->bytes;
		}
		const struct mock_gmem *m = &mock_gmem[d];
		add[d] = need;
		if (need > m->reserved - m->used)
			grow[d] = mock_grain_up(need - (m->reserved - m->used));
	}
	for (int d = 0; d < mock_spec.count; d++)
		if (grow[d] > 0 && mock_usage_add(d, (int64_t)grow[d]) < 0) {
			while (d-- > 0)
				if (grow[d] > 0)
					mock_usage_add(d, -(int64_t)grow[d]);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
	for (int d = 0; d < mock_spec.count; d++) {
		if (!(devs & (1u << d)))
			continue;
		mock_gmem[d].reserved += grow[d];
		mock_gmem[d].used += add[d];
		mock_gmem_highs(&mock_gmem[d]);
		for (size_t i = 0; i < mock_nglives; i++) {
			struct mock_glive *l = &mock_glives[i];
			if (!l->exec && l->dev == d && mock_gexec_keeps(e, l->dptr, d))
				l->exec = e;
		}
	}
	e->mapped |= devs;
	return CUDA_SUCCESS;
}

/* Takes e's mapping on dev back into the reserve; its live allocations
 * there keep their memory, on their own. */
static void mock_gexec_unmap(CUgraphExec e, int dev)
{
	if (!(e->mapped & (1u << dev)))
		return;
	uint64_t held = 0;
	for (size_t i = 0; i < mock_nglives; i++) {
		struct mock_glive *l = &mock_glives[i];
		if (l->exec == e && l->dev == dev) {
			l->exec = NULL;
			held += l->bytes;
		}
	}
	mock_gmem[dev].used -= mock_gexec_bytes(e, dev) - held;
	e->mapped &= ~(1u << dev);
}

static bool mock_gexec_has_mem(CUgraphExec e)
{
	return e->nallocs > 0 || e->nfrees > 0;
}

/* Gives back what the graph allocator of dev holds unused: executable
 * graphs that are neither running nor waiting to run lose their mapping
 * (they are mapped again when next launched), live allocations keep
 * theirs. */
static CUresult mock_graph_mem_trim(CUdevice dev)
{
	REQUIRE_INIT();
	if (!mock_valid_dev(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	for (CUgraphExec e = mock_execs; e; e = e->next)
		if (e->busy_until <= mock_now)
			mock_gexec_unmap(e, dev);
	struct mock_gmem *m = &mock_gmem[dev];
	uint64_t keep = mock_grain_up(m->used);
	if (m->reserved > keep) {
		mock_usage_add(dev, -(int64_t)(m->reserved - keep));
		m->reserved = keep;
	}
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuDeviceGraphMemTrim(CUdevice device)
{
	return LOCKED(mock_graph_mem_trim(device));
}

static CUresult mock_graph_mem_get(CUdevice dev, CUgraphMem_attribute attr, void *value)
{
	REQUIRE_INIT();
	if (!mock_valid_dev(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	if (!value)
		return CUDA_ERROR_INVALID_VALUE;
	const struct mock_gmem *m = &mock_gmem[dev];
	cuuint64_t v;
	switch (attr) {
	case CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT: v = m->used; break;
	case CU_GRAPH_MEM_ATTR_USED_MEM_HIGH: v = m->used_high; break;
	case CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT: v = m->reserved; break;
	case CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH: v = m->reserved_high; break;
	default: return CUDA_ERROR_INVALID_VALUE;
	}
	*(cuuint64_t *)value = v;
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuDeviceGetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr,
					       void *value)
{
	return LOCKED(mock_graph_mem_get(device, attr, value));
}

/* Only the high marks can be set, and only reset (to the current value),
 * by writing 0. */
static CUresult mock_graph_mem_set(CUdevice dev, CUgraphMem_attribute attr, void *value)
{
	REQUIRE_INIT();
	if (!mock_valid_dev(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	if (!value || *(const cuuint64_t *)value != 0)
		return CUDA_ERROR_INVALID_VALUE;
	struct mock_gmem *m = &mock_gmem[dev];
	switch (attr) {
	case CU_GRAPH_MEM_ATTR_USED_MEM_HIGH: m->used_high = m->used; return CUDA_SUCCESS;
	case CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH: m->reserved_high = m->reserved; return CUDA_SUCCESS;
	default: return CUDA_ERROR_INVALID_VALUE;
	}
}

MOCK_API CUresult cuDeviceSetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr,
					       void *value)
{
	return LOCKED(mock_graph_mem_set(device, attr, value));
}

/* ---- executable graphs ----------------------------------------------------- */

/* The accepted CUDA_GRAPH_INSTANTIATE_FLAG_*: AUTO_FREE_ON_LAUNCH |
 * UPLOAD | DEVICE_LAUNCH | USE_NODE_PRIORITY. Device launch and node
 * priorities change nothing the mock simulates; UPLOAD means something
 * only to cuGraphInstantiateWithParams (which has a stream for it). */
#define MOCK_GRAPH_INSTANTIATE_FLAGS 0xfULL

static bool mock_instantiate_flags_ok(unsigned long long flags)
{
	const unsigned long long both = CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH |
					CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH;
	return (flags & ~MOCK_GRAPH_INSTANTIATE_FLAGS) == 0 && (flags & both) != both;
}

/* Everything g runs and allocates, child graphs included. */
struct mock_flat {
	uint64_t ns;
	unsigned launches;
	struct mock_galloc *allocs;
	size_t nallocs, cap_allocs;
	CUdeviceptr *frees;
	size_t nfrees, cap_frees;
};

static bool mock_flatten(CUgraph g, struct mock_flat *f)
{
	f->ns += g->ns;
	f->launches += g->launches;
	for (size_t i = 0; i < g->nnodes; i++) {
		const struct CUgraphNode_st *n = g->nodes[i];
		bool seen = false;
		switch (n->type) {
		case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
			/* one allocation, though a child graph may hold it twice */
			for (size_t j = 0; j < f->nallocs && !seen; j++)
				seen = f->allocs[j].dptr == n->dptr;
			if (seen)
				break;
			if (!mock_room((void **)&f->allocs, &f->cap_allocs, f->nallocs,
				       sizeof(*f->allocs)))
				return false;
			f->allocs[f->nallocs++] = (struct mock_galloc){ .dptr = n->dptr,
				.bytes = n->bytes, .dev = n->dev };
			break;
		case CU_GRAPH_NODE_TYPE_MEM_FREE:
			if (!mock_room((void **)&f->frees, &f->cap_frees, f->nfrees,
				       sizeof(*f->frees)))
				return false;
			f->frees[f->nfrees++] = n->dptr;
			break;
		case CU_GRAPH_NODE_TYPE_GRAPH:
			if (!mock_flatten(n->child, f))
				return false;
			break;
		default:
			break;
		}
	}
	return true;
}

/* A graph with memory nodes has at most one executable graph at a time,
 * as the driver documents. */
static CUresult mock_graph_instantiate(CUgraphExec *pe, CUgraph g, unsigned long long flags)
{
	if (!mock_graph_ok(g))
		return CUDA_ERROR_INVALID_VALUE;
	struct mock_flat f = { 0 };
	CUgraphExec e = NULL;
	CUresult rc = CUDA_ERROR_OUT_OF_MEMORY;
	if (!mock_flatten(g, &f))
		goto out;
	/* frees of the graph's own allocations mark them; the others free
	 * what other graphs left live */
	size_t ext = 0;
	for (size_t i = 0; i < f.nfrees; i++) {
		bool own = false;
		for (size_t j = 0; j < f.nallocs; j++)
			if (f.allocs[j].dptr == f.frees[i]) {
				f.allocs[j].freed = true;
				own = true;
			}
		if (!own)
			f.frees[ext++] = f.frees[i];
	}
	f.nfrees = ext;
	bool mem = f.nallocs > 0 || f.nfrees > 0;
	if (mem && g->execs > 0) {
		rc = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	if (!(e = calloc(1, sizeof(*e))))
		goto out;
	*e = (struct CUgraphExec_st){ .magic = MOCK_MAGIC_GEXEC, .ns = f.ns,
		.launches = f.launches, .graph = g, .allocs = f.allocs, .nallocs = f.nallocs,
		.frees = f.frees, .nfrees = f.nfrees, .next = mock_execs,
		.auto_free = (flags & CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH) != 0 };
	f.allocs = NULL;
	f.frees = NULL;
	mock_execs = e;
	if (mem)
		g->execs++;
	*pe = e;
	rc = CUDA_SUCCESS;
out:
	free(f.allocs);
	free(f.frees);
	return rc;
}

static CUresult mock_gexec_destroy(CUgraphExec e)
{
	REQUIRE_INIT();
	if (!e || e->magic != MOCK_MAGIC_GEXEC)
		return CUDA_ERROR_INVALID_VALUE;
	for (int d = 0; d < mock_spec.count; d++)
		mock_gexec_unmap(e, d);
	if (e->graph && mock_gexec_has_mem(e))
		e->graph->execs--;
	for (CUgraphExec *pp = &mock_execs; *pp; pp = &(*pp)->next)
		if (*pp == e) {
			*pp = e->next;
			break;
		}
	free(e->allocs);
	free(e->frees);
	e->magic = 0;
	free(e);
	return CUDA_SUCCESS;
}

/* What launching or uploading e into s needs first: a context, and no
 * capture for a graph with memory nodes (the capture could only hold it
 * as a child graph, which cannot have them); trying invalidates it. */
static CUresult mock_gexec_check(CUgraphExec e, CUstream s)
{
	if (!e || e->magic != MOCK_MAGIC_GEXEC)
		return CUDA_ERROR_INVALID_VALUE;
	if (!(s ? s->ctx : mock_current()))
		return CUDA_ERROR_INVALID_CONTEXT;
	if (s && s->capture == CU_STREAM_CAPTURE_STATUS_INVALIDATED)
		return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
	if (s && s->capture == CU_STREAM_CAPTURE_STATUS_ACTIVE && mock_gexec_has_mem(e)) {
		s->capture = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	}
	return CUDA_SUCCESS;
}

static CUresult mock_graph_upload(CUgraphExec e, CUstream s)
{
	REQUIRE_INIT();
	CUresult rc = mock_gexec_check(e, s);
	if (rc != CUDA_SUCCESS || (s && s->capture != CU_STREAM_CAPTURE_STATUS_NONE))
		return rc;
	return mock_gexec_map(e);
}

/* Maps e's memory when it is not, then runs it. Allocations it does not
 * free stay live after it; launching it again while one is still live is
 * refused, unless it frees them first (AUTO_FREE_ON_LAUNCH). */
static CUresult mock_graph_launch(CUgraphExec e, CUstream s)
{
	REQUIRE_INIT();
	CUresult rc = mock_gexec_check(e, s);
	if (rc != CUDA_SUCCESS)
		return rc;
	if (s && s->capture != CU_STREAM_CAPTURE_STATUS_NONE)
		return mock_submit(s, e->ns, e->launches, NULL);   /* no memory nodes */
	size_t kept = 0;
	for (size_t i = 0; i < e->nallocs; i++) {
		if (e->allocs[i].freed)
			continue;
		if (mock_glive_find(e->allocs[i].dptr) && !e->auto_free)
			return CUDA_ERROR_INVALID_VALUE;
		kept++;
	}
	while (mock_cap_glives < mock_nglives + kept)
		if (!mock_room((void **)&mock_glives, &mock_cap_glives, mock_cap_glives,
			       sizeof(*mock_glives)))
			return CUDA_ERROR_OUT_OF_MEMORY;
	rc = mock_gexec_map(e);
	if (rc != CUDA_SUCCESS)
		return rc;
	struct mock_glive *l;
	for (size_t i = 0; i < e->nallocs; i++)
		if (!e->allocs[i].freed && (l = mock_glive_find(e->allocs[i].dptr)))
			mock_glive_drop(l);
	for (size_t i = 0; i < e->nfrees; i++)
		if ((l = mock_glive_find(e->frees[i])))
			mock_glive_drop(l);
	for (size_t i = 0; i < e->nallocs; i++)
		if (!e->allocs[i].freed)
			mock_glives[mock_nglives++] = (struct mock_glive){
				.dptr = e->allocs[i].dptr, .bytes = e->allocs[i].bytes,
				.dev = e->allocs[i].dev, .exec = e };
	return mock_submit(s, e->ns, e->launches, &e->busy_until);
}

MOCK_API CUresult cuGraphInstantiateWithFlags(CUgraphExec *pe, CUgraph g,
					      unsigned long long flags)
{
	REQUIRE_INIT();
	if (!pe || !mock_instantiate_flags_ok(flags))
		return CUDA_ERROR_INVALID_VALUE;
	return LOCKED(mock_graph_instantiate(pe, g, flags));
}

/* The pre-12.0 form: no flags, an error node and a log. */
static CUresult mock_instantiate_logged(CUgraphExec *pe, CUgraph g, CUgraphNode *err,
					char *log, size_t size)
{
	REQUIRE_INIT();
	CUresult rc = pe ? LOCKED(mock_graph_instantiate(pe, g, 0)) : CUDA_ERROR_INVALID_VALUE;
	if (err)
		*err = NULL;
	if (log && size > 0) {
		const char *msg = rc == CUDA_SUCCESS ? "" : "graph instantiation failed";
		size_t n = strlen(msg) < size - 1 ? strlen(msg) : size - 1;
		memcpy(log, msg, n);
		log[n] = '\0';
	}
	return rc;
}

MOCK_API CUresult cuGraphInstantiate(CUgraphExec *pe, CUgraph g, CUgraphNode *errNode,
				     char *logBuffer, size_t bufferSize)
{
	return mock_instantiate_logged(pe, g, errNode, logBuffer, bufferSize);
}

MOCK_API CUresult cuGraphInstantiate_v2(CUgraphExec *pe, CUgraph g, CUgraphNode *errNode,
					char *logBuffer, size_t bufferSize)
{
	return mock_instantiate_logged(pe, g, errNode, logBuffer, bufferSize);
}

/* With UPLOAD the new executable graph is uploaded into hUploadStream; if
 * that fails there is no executable graph. */
static CUresult mock_instantiate_params(CUgraphExec *pe, CUgraph g,
				       CUDA_GRAPH_INSTANTIATE_PARAMS *p)
{
	REQUIRE_INIT();
	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	p->hErrNode_out = NULL;
	p->result_out = CUDA_GRAPH_INSTANTIATE_ERROR;
	if (!pe || !mock_instantiate_flags_ok(p->flags))
		return CUDA_ERROR_INVALID_VALUE;
	bool upload = (p->flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD) != 0;
	CUstream s = p->hUploadStream;
	if (upload && !mock_stream(&s))
		return CUDA_ERROR_INVALID_HANDLE;
	CUgraphExec e;
	CUresult rc = mock_graph_instantiate(&e, g, p->flags);
	if (rc == CUDA_SUCCESS && upload && (rc = mock_graph_upload(e, s)) != CUDA_SUCCESS)
		mock_gexec_destroy(e);
	if (rc != CUDA_SUCCESS)
		return rc;
	p->result_out = CUDA_GRAPH_INSTANTIATE_SUCCESS;
	*pe = e;
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuGraphInstantiateWithParams(CUgraphExec *pe, CUgraph g,
					       CUDA_GRAPH_INSTANTIATE_PARAMS *params)
{
	return LOCKED(mock_instantiate_params(pe, g, params));
}

MOCK_API CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *pe, CUgraph g,
						    CUDA_GRAPH_INSTANTIATE_PARAMS *params)
{
	return cuGraphInstantiateWithParams(pe, g, params);
}

MOCK_API CUresult cuGraphUpload(CUgraphExec e, CUstream s)
{
	if (!mock_stream(&s))
		return CUDA_ERROR_INVALID_HANDLE;
	return LOCKED(mock_graph_upload(e, s));
}

MOCK_API CUresult cuGraphUpload_ptsz(CUgraphExec e, CUstream s)
{
	return cuGraphUpload(e, s);
}

/* A graph runs as one piece of work as long as all its kernels; launched
 * into a capture, it becomes part of the capturing graph. */
MOCK_API CUresult cuGraphLaunch(CUgraphExec e, CUstream s)
{
	if (!mock_stream(&s))
		return CUDA_ERROR_INVALID_HANDLE;
	return LOCKED(mock_graph_launch(e, s));
}

MOCK_API CUresult cuGraphLaunch_ptsz(CUgraphExec e, CUstream s)
{
	return cuGraphLaunch(e, s);
}

/* A child graph node's graph is the node's. */
static CUresult mock_graph_destroy(CUgraph g)
{
	REQUIRE_INIT();
	if (!mock_graph_ok(g) || g->embedded)
		return CUDA_ERROR_INVALID_VALUE;
	mock_graph_free(g);
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuGraphDestroy(CUgraph g)
{
	return LOCKED(mock_graph_destroy(g));
}

/* Its memory goes back to the graph reserve, except what its live
 * allocations hold until they are freed. */
MOCK_API CUresult cuGraphExecDestroy(CUgraphExec e)
{
	return LOCKED(mock_gexec_destroy(e));
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

/* A module is PTX text; its kernels are the names after ".entry". Kernels
 * run in simulated time like any other (their code is never looked at),
 * so a program that JITs PTX on a real driver runs unchanged here. */
typedef struct CUmod_st *CUmodule;

#define MOCK_MAGIC_MODULE 0x4d4f444cU
#define MOCK_MAX_KERNELS 64

struct CUfunc_st {
	unsigned magic;
	char name[64];
};

struct CUmod_st {
	unsigned magic;
	int nfuncs;
	struct CUfunc_st funcs[MOCK_MAX_KERNELS];
};

MOCK_API CUresult cuModuleLoadData(CUmodule *pm, const void *image)
{
	REQUIRE_INIT();
	if (!pm || !image)
		return CUDA_ERROR_INVALID_VALUE;
	if (mock_current_dev() < 0)
		return CUDA_ERROR_INVALID_CONTEXT;
	CUmodule m = calloc(1, sizeof(*m));
	if (!m)
		return CUDA_ERROR_OUT_OF_MEMORY;
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
	}
	if (m->nfuncs == 0) {
		free(m);
		return CUDA_ERROR_INVALID_IMAGE;   /* nothing a driver could load */
	}
	*pm = m;
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuModuleGetFunction(CUfunction *pf, CUmodule m, const char *name)
{
	REQUIRE_INIT();
	if (!pf || !name)
		return CUDA_ERROR_INVALID_VALUE;
	if (!m || m->magic != MOCK_MAGIC_MODULE)
		return CUDA_ERROR_INVALID_HANDLE;
	for (int i = 0; i < m->nfuncs; i++)
		if (strcmp(m->funcs[i].name, name) == 0) {
			*pf = &m->funcs[i];
			return CUDA_SUCCESS;
		}
	return CUDA_ERROR_NOT_FOUND;
}

MOCK_API CUresult cuModuleUnload(CUmodule m)
{
	REQUIRE_INIT();
	if (!m || m->magic != MOCK_MAGIC_MODULE)
		return CUDA_ERROR_INVALID_HANDLE;
	m->magic = 0;
	free(m);
	return CUDA_SUCCESS;
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
	X(cuGetErrorString, cuGetErrorString, 6000, 0) \
	X(cuGetErrorName, cuGetErrorName, 6000, 0) \
	X(cuModuleLoadData, cuModuleLoadData, 2000, 0) \
	X(cuModuleGetFunction, cuModuleGetFunction, 2000, 0) \
	X(cuModuleUnload, cuModuleUnload, 2000, 0) \
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

static CUresult mock_proc_address(const char *symbol, void **pfn, int version,
				  cuuint64_t flags, CUdriverProcAddressQueryResult *status)
{
	if (!symbol || !pfn)
		return CUDA_ERROR_INVALID_VALUE;
	bool want_ptsz = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
	const struct mock_symbol *best = NULL;
	bool known = false;
	for (size_t i = 0; i < MOCK_NSYMBOLS; i++) {
		const struct mock_symbol *s = &mock_symbols[i];
		if (strcmp(s->base, symbol) != 0)
			continue;
		known = true;
		if (s->since > version)
			continue;
		/* A per-thread variant wins when asked for; otherwise never. */
		if (s->ptsz && !want_ptsz)
			continue;
		if (!best || (s->ptsz && !best->ptsz) ||
		    (s->ptsz == best->ptsz && s->since > best->since))
			best = s;
	}
	*pfn = best ? mock_handed_out(best) : NULL;
	if (status)
		*status = best ? CU_GET_PROC_ADDRESS_SUCCESS
			: known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
				: CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	return best ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

MOCK_API CUresult cuGetProcAddress(const char *symbol, void **pfn, int version,
				   cuuint64_t flags)
{
	return mock_proc_address(symbol, pfn, version, flags, NULL);
}

MOCK_API CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
				      cuuint64_t flags,
				      CUdriverProcAddressQueryResult *status)
{
	return mock_proc_address(symbol, pfn, version, flags, status);
}
