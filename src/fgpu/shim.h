/* Internal to libtessera-fgpu.so: what its source files share. Nothing
 * here is exported (the library is built with -fvisibility=hidden and a
 * version script); only the hooks of hooks.h, dlsym and dlvsym are.
 *
 *   shim.c    the real driver's entry points, limits and region, devices,
 *             the process-local allocation table, and the lookups
 *             (cuGetProcAddress, dlsym, dlvsym)
 *   contexts.c  context hooks: making contexts (green ones too), the
 *             memory their limits take, the stack a launch grows (and
 *             module and library unloading, which forgets kernels), what
 *             goes when one ends
 *   memory.c  allocation hooks, VMM, and what a process is told
 *   pools.c   stream-ordered allocations and memory pools
 *   graphs.c  memory that CUDA graphs allocate
 *   launch.c  launch pacing, and GPU turns (turn.h) */
#ifndef TESSERA_FGPU_SHIM_H
#define TESSERA_FGPU_SHIM_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "fgpu/hooks.h"
#include "gpuabi/conf.h"
#include "gpuabi/region.h"

#define FGPU_EXPORT __attribute__((visibility("default")))
/* The dlsym path can run before anything else in the process is set up:
 * sanitizer runtimes and libc-level interposers call dlsym from their own
 * initialization. Instrumented code would touch shadow memory that does
 * not exist yet, so that path is built without instrumentation. */
#define FGPU_EARLY __attribute__((no_sanitize("address", "undefined", "thread")))

#define FGPU_PROTO(ret, name, base, since, ptsz, params) FGPU_EXPORT ret name params;
FGPU_CUDA_HOOKS(FGPU_PROTO)
FGPU_NVML_HOOKS(FGPU_PROTO)
#undef FGPU_PROTO
FGPU_EXPORT void *dlsym(void *handle, const char *name);
FGPU_EXPORT void *dlvsym(void *handle, const char *name, const char *version);

/* The real driver's entry points (NULL where the driver lacks one). */
struct fgpu_real {
#define FGPU_REAL_FIELD(ret, name, base, since, ptsz, params) ret (*name) params;
	FGPU_CUDA_HOOKS(FGPU_REAL_FIELD)
	FGPU_NVML_HOOKS(FGPU_REAL_FIELD)
#undef FGPU_REAL_FIELD
#define FGPU_USED_FIELD(ret, name, params) ret (*name) params;
	FGPU_CUDA_USED(FGPU_USED_FIELD)
	FGPU_NVML_USED(FGPU_USED_FIELD)
#undef FGPU_USED_FIELD
	uint64_t (*mock_now)(void);
	void (*mock_sleep)(uint64_t);
};
extern struct fgpu_real real;

extern pthread_once_t fgpu_cuda_once, fgpu_nvml_once;
void fgpu_cuda_init(void);
void fgpu_nvml_init(void);
#define CUDA_INIT() pthread_once(&fgpu_cuda_once, fgpu_cuda_init)
#define NVML_INIT() pthread_once(&fgpu_nvml_once, fgpu_nvml_init)
/* Calls the real function, or fails like a driver without that entry. */
#define REAL(name, ...) (real.name ? real.name(__VA_ARGS__) : CUDA_ERROR_NOT_SUPPORTED)
#define REAL_NVML(name, ...) (real.name ? real.name(__VA_ARGS__) : NVML_ERROR_FUNCTION_NOT_FOUND)

extern struct fgpu_conf fgpu_conf;
extern struct fgpu_region_handle fgpu_region;
extern bool fgpu_active;       /* limits enforced */
extern bool fgpu_pacing;       /* compute share enforced */
extern bool fgpu_exiting;      /* after detaching at exit: pass through */
extern bool fgpu_conf_uuids;   /* the limits file names devices by UUID (then
			       * fgpu_conf_index needs the driver's UUID) */

/* ---- devices and the share (shim.c) ---- */

/* Conf/region index of a CUDA ordinal; -1 for a device the session was
 * not given (its limit is 0). */
int fgpu_cuda_index(CUdevice ord);
/* The driver's UUID of a CUDA ordinal as "GPU-..." (false if it has none). */
bool fgpu_device_uuid(CUdevice ord, char *out, size_t n);
int64_t fgpu_limit(int idx);
CUresult fgpu_current_device(CUdevice *dev);
/* Counts this process's context on device idx once. */
CUresult fgpu_charge_context(int idx);
/* Whether allocations are accounted right now. */
bool fgpu_accounting(void);
/* Reserves bytes on CUDA ordinal ord; *idx gets the region index. What
 * the process's pools and graph allocator hold idle there is given back
 * before it refuses. */
CUresult fgpu_reserve(CUdevice ord, int64_t bytes, int *idx);
void fgpu_unreserve(int idx, int64_t bytes);

/* ---- the process-local allocation table (shim.c) ---- */

/* K_POOLPTR: an allocation served by a memory pool (charged through its
 * pool, see "pools" below); K_MAP: a VMM mapping, aux = its handle;
 * K_LIMIT + a CUlimit: what a context's limit takes (contexts.c). */
enum { K_PTR = 1, K_PTR_V1, K_HANDLE, K_ARRAY, K_MIPMAP, K_POOLPTR, K_MAP, K_LIMIT = 16 };

struct fgpu_entry {
	struct fgpu_entry *next;
	uint64_t key;
	int kind;
	int idx;          /* region index; for K_POOLPTR: pool slot */
	int64_t bytes;
	uint64_t aux;
	int refs, maps;   /* K_HANDLE: references and mappings */
	CUcontext ctx;    /* linear memory, arrays, limits: the context they
			   * belong to, whose end frees them */
};

#define FGPU_BUCKETS 4096
extern struct fgpu_entry *fgpu_table[FGPU_BUCKETS];
extern pthread_mutex_t fgpu_table_lock;

/* Records (kind, key); replaces an existing record. -ENOMEM when the
 * entry cannot be allocated. Linear memory and arrays are recorded as
 * the current context's. */
int fgpu_track(int kind, uint64_t key, int idx, int64_t bytes);
/* Removes (kind, key); returns whether it was there. */
bool fgpu_untrack(int kind, uint64_t key, int *idx, int64_t *bytes);
/* The entry (kind, key), or NULL. Caller holds fgpu_table_lock. */
struct fgpu_entry *fgpu_find_locked(int kind, uint64_t key);
/* Unlinks and frees e. Caller holds fgpu_table_lock. */
void fgpu_drop_locked(struct fgpu_entry *e);

/* The two shapes of an accounted call, as expressions whose value (the
 * CUresult) the hook returns itself: `return FGPU_FREE(...);`. They are
 * macros because call (and undo_call) must run between the steps, and
 * key_expr is read only once call has set it.
 *
 * FGPU_FREE: untracks (kind, key), frees through call, and gives the bytes
 * back to the share; re-tracks when the driver refuses, so a failed free
 * changes nothing. */
#define FGPU_FREE(kind, key, call) ({ \
	int idx_; int64_t bytes_; \
	bool had_ = fgpu_accounting() && fgpu_untrack((kind), (key), &idx_, &bytes_); \
	CUresult rc_ = (call); \
	if (had_) { \
		if (rc_ == CUDA_SUCCESS) fgpu_unreserve(idx_, bytes_); \
		else fgpu_track((kind), (key), idx_, bytes_); \
	} \
	rc_; \
})

/* FGPU_ALLOC: reserves bytes on ord's share, allocates through call (which
 * must set key_expr on success) and tracks it; undoes every step when one
 * fails (undo_call frees what the driver made when it cannot be tracked).
 * Only while fgpu_accounting(): the hook passes the call through itself
 * otherwise. */
#define FGPU_ALLOC(kind, ord, bytes, key_expr, call, undo_call) ({ \
	int idx_; \
	CUresult rc_ = fgpu_reserve((ord), (bytes), &idx_); \
	if (rc_ == CUDA_SUCCESS) { \
		rc_ = (call); \
		if (rc_ == CUDA_SUCCESS && fgpu_track((kind), (key_expr), idx_, (bytes)) < 0) { \
			(void)(undo_call); \
			rc_ = CUDA_ERROR_OUT_OF_MEMORY; \
		} \
		if (rc_ != CUDA_SUCCESS) \
			fgpu_unreserve(idx_, (bytes)); \
	} \
	rc_; \
})

/* ---- across the source files ---- */

/* shim.c: whether work on s is being captured into a graph (then it does
 * not run now); if_unknown when the driver cannot tell. */
bool fgpu_stream_capturing(CUstream s, bool if_unknown);

/* pools.c: frees p when it is a stream-ordered allocation (*mine). */
CUresult fgpu_pool_free_sync(CUdeviceptr p, bool *mine);
/* pools.c: the pools' and the graph allocator's charges, up to date (at
 * synchronization points and before usage is reported). */
void fgpu_reserves_settle(void);
/* pools.c: gives back what this process's pools and graph allocator hold
 * unused on region index idx (before an allocation there is refused).
 * Takes the pool lock, then the graph lock. */
void fgpu_reclaim_idle(int idx);
/* graphs.c: the graph allocator's charges, brought up to date. */
void fgpu_graphs_settle(void);
/* graphs.c: trims the graph allocator's unused reserve on idx. */
void fgpu_graphs_trim_idle(int idx);
/* graphs.c: cuGraphLaunch(_ptsz) once its memory fits. */
CUresult fgpu_graph_launch(CUgraphExec h, CUstream s, bool ptsz);

/* In a fork() child: the parent's allocations, pools and events are not
 * the child's. */
void fgpu_track_reset_child(void);
void fgpu_pool_reset_child(void);
void fgpu_pace_reset_child(void);
void fgpu_graph_reset_child(void);
void fgpu_contexts_reset_child(void);
/* launch.c: after a synchronization: gives the GPU turn up when this
 * process has nothing in flight there and another process waits. */
void fgpu_pace_synced(void);
/* contexts.c: charges the current context's stack grown by the driver. */
void fgpu_stack_follow(void);

/* contexts.c: the stack a launch of kernel f grows, charged before the
 * launch. fgpu_stack_admit refuses with out of memory past the share;
 * when it set held, the launch's result must go to fgpu_stack_launched
 * (until then the limit lock is held). */
struct fgpu_stack_grant {
	bool held;
	CUcontext ctx;
	CUfunction f;
	unsigned epoch;
	CUdevice ord;
	int idx;
	size_t base;
	int64_t before, after;   /* the stack's charge without and with it */
};
CUresult fgpu_stack_admit(CUfunction f, struct fgpu_stack_grant *g);
void fgpu_stack_launched(struct fgpu_stack_grant *g, CUresult launch);

#endif
