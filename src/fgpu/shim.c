/* libtessera-fgpu.so: fractional-GPU enforcement by interposition.
 *
 * Loaded into every process of a GPU session through /etc/ld.so.preload
 * (fgpu_contract.h). It exports the driver's own names for the entry
 * points in hooks.h, a dlsym that hands out those hooks to code that looks
 * the driver up by hand, and cuGetProcAddress(_v2), through which the CUDA
 * 12 runtime fetches every driver entry point. Hooks call the real driver
 * through a handle of its own (dlopen "libcuda.so.1"/"libnvidia-ml.so.1").
 *
 * Memory: every allocation family reserves its bytes in the container's
 * shared region (region.h) *before* calling the driver; past the limit it
 * returns CUDA_ERROR_OUT_OF_MEMORY without allocating. Sizes are kept in a
 * process-local table so frees give back exactly what was taken.
 * Compute: launches are paced by measured kernel time (pacing.h).
 *
 * Rules: never prints, never exits, never aborts the host process; on any
 * internal failure it returns the driver's error codes. */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fgpu/conf.h"
#include "fgpu/hooks.h"
#include "fgpu/pacing.h"
#include "fgpu/region.h"

#define FGPU_EXPORT __attribute__((visibility("default")))
/* The dlsym path can run before anything else in the process is set up:
 * sanitizer runtimes and libc-level interposers call dlsym from their own
 * initialization. Instrumented code would touch shadow memory that does
 * not exist yet, so that path is built without instrumentation. */
#define FGPU_EARLY __attribute__((no_sanitize("address", "undefined")))

/* ---- derived from the one list ----------------------------------------- */

#define FGPU_PROTO(ret, name, base, since, ptsz, params) FGPU_EXPORT ret name params;
FGPU_CUDA_HOOKS(FGPU_PROTO)
FGPU_NVML_HOOKS(FGPU_PROTO)
#undef FGPU_PROTO
FGPU_EXPORT void *dlsym(void *handle, const char *name);

static struct {
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
} real;

struct fgpu_hook {
	const char *name, *base;
	int since;
	bool ptsz, nvml;
	void *hook;
	void **real;
};

static const struct fgpu_hook fgpu_hooks[] = {
#define FGPU_ROW_CUDA(ret, name, base, since, ptsz, params) \
	{ #name, #base, since, ptsz, false, (void *)name, (void **)&real.name },
#define FGPU_ROW_NVML(ret, name, base, since, ptsz, params) \
	{ #name, #base, since, ptsz, true, (void *)name, (void **)&real.name },
	FGPU_CUDA_HOOKS(FGPU_ROW_CUDA)
	FGPU_NVML_HOOKS(FGPU_ROW_NVML)
#undef FGPU_ROW_CUDA
#undef FGPU_ROW_NVML
};
#define FGPU_NHOOKS (sizeof(fgpu_hooks) / sizeof(fgpu_hooks[0]))

/* Own string helpers on the dlsym path: libc's may be intercepted by a
 * runtime that is still initializing (see FGPU_EARLY). */
FGPU_EARLY static bool fgpu_streq(const char *a, const char *b)
{
	while (*a && *a == *b)
		a++, b++;
	return *a == *b;
}

FGPU_EARLY static const struct fgpu_hook *fgpu_hook_find(const char *name)
{
	/* Cheap rejection first: dlsym is called for every symbol of every
	 * plugin some programs load. */
	if (!name || !((name[0] == 'c' && name[1] == 'u') || (name[0] == 'n' && name[1] == 'v')))
		return NULL;
	for (size_t i = 0; i < FGPU_NHOOKS; i++)
		if (fgpu_streq(fgpu_hooks[i].name, name))
			return &fgpu_hooks[i];
	return NULL;
}

/* ---- state --------------------------------------------------------------- */

/* Not static: the x86-64 dlsym entry stub below jumps through it. */
__attribute__((visibility("hidden"))) void *(*fgpu_real_dlsym)(void *, const char *);
static pthread_once_t fgpu_base_once = PTHREAD_ONCE_INIT;
static pthread_once_t fgpu_cuda_once = PTHREAD_ONCE_INIT;
static pthread_once_t fgpu_nvml_once = PTHREAD_ONCE_INIT;
static struct fgpu_conf fgpu_conf;
static struct fgpu_region_handle fgpu_region;
static bool fgpu_active;       /* limits enforced */
static bool fgpu_pacing;       /* compute share enforced */
static bool fgpu_exiting;      /* after detaching at exit: pass through */
static bool fgpu_conf_uuids;   /* the limits file names devices by UUID */

static pthread_mutex_t fgpu_lock = PTHREAD_MUTEX_INITIALIZER; /* local state */
static int fgpu_ord_index[FGPU_MAX_DEVICES];    /* CUDA ordinal -> conf index + 1 */
static bool fgpu_ctx_charged[FGPU_MAX_DEVICES]; /* by conf index */

FGPU_EARLY static void fgpu_resolve_dlsym(void)
{
	if (fgpu_real_dlsym)
		return;
	/* dlsym itself is what we replace, so find the C library's by version
	 * (2.34 moved it into libc; older glibc has the 2.2.5 one). */
	void *p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
	if (!p)
		p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
	*(void **)&fgpu_real_dlsym = p;
}

static void fgpu_atfork_child(void)
{
	/* The child owns none of the parent's device memory or events; its
	 * accounting starts empty (a new slot is taken on first use). */
	pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
	fgpu_lock = fresh;
	memset(fgpu_ctx_charged, 0, sizeof(fgpu_ctx_charged));
	extern void fgpu_track_reset_child(void);
	extern void fgpu_pace_reset_child(void);
	fgpu_track_reset_child();
	fgpu_pace_reset_child();
}

static void fgpu_base_init(void)
{
	fgpu_resolve_dlsym();
	struct terr err;
	if (fgpu_conf_load(&fgpu_conf, &err) < 0) {
		/* An unreadable agent file must not mean "unlimited": limit
		 * everything to nothing rather than pass through. */
		memset(&fgpu_conf, 0, sizeof(fgpu_conf));
		fgpu_conf.enabled = true;
		fgpu_conf.all_limit = 0;
		fgpu_conf.sm_limit_percent = 100;
	}
	fgpu_active = fgpu_conf.enabled;
	for (int i = 0; i < fgpu_conf.ndev; i++)
		if (fgpu_conf.dev[i].uuid[0])
			fgpu_conf_uuids = true;
	if (fgpu_active) {
		if (fgpu_region_open(&fgpu_region, fgpu_conf.region, &err) < 0 &&
		    fgpu_region_open_private(&fgpu_region, &err) < 0)
			fgpu_active = false;   /* cannot account at all: nothing mapped */
	}
	if (!fgpu_active && fgpu_conf.enabled) {
		/* Fail closed when limits exist but no region could be mapped:
		 * allocations are refused (fgpu_reserve checks region.r). */
		fgpu_active = true;
	}
	fgpu_pacing = fgpu_active && fgpu_region.r && fgpu_conf.sm_limit_percent < 100;
	pthread_atfork(NULL, NULL, fgpu_atfork_child);
}

static void *fgpu_open_lib(const char *soname)
{
	return dlopen(soname, RTLD_NOW | RTLD_LOCAL);
}

static void fgpu_cuda_init(void)
{
	pthread_once(&fgpu_base_once, fgpu_base_init);
	void *h = fgpu_open_lib("libcuda.so.1");
	if (!h || !fgpu_real_dlsym)
		return;
	for (size_t i = 0; i < FGPU_NHOOKS; i++)
		if (!fgpu_hooks[i].nvml)
			*fgpu_hooks[i].real = fgpu_real_dlsym(h, fgpu_hooks[i].name);
#define FGPU_LOAD_USED(ret, name, params) *(void **)&real.name = fgpu_real_dlsym(h, #name);
	FGPU_CUDA_USED(FGPU_LOAD_USED)
	if (fgpu_conf.driver_clock) {
		*(void **)&real.mock_now = fgpu_real_dlsym(h, "tesseraMockNowNs");
		*(void **)&real.mock_sleep = fgpu_real_dlsym(h, "tesseraMockSleepNs");
		if (!real.mock_now || !real.mock_sleep)
			real.mock_now = NULL, real.mock_sleep = NULL;
	}
}

static void fgpu_nvml_init(void)
{
	pthread_once(&fgpu_base_once, fgpu_base_init);
	void *h = fgpu_open_lib("libnvidia-ml.so.1");
	if (!h || !fgpu_real_dlsym)
		return;
	for (size_t i = 0; i < FGPU_NHOOKS; i++)
		if (fgpu_hooks[i].nvml)
			*fgpu_hooks[i].real = fgpu_real_dlsym(h, fgpu_hooks[i].name);
	FGPU_NVML_USED(FGPU_LOAD_USED)
#undef FGPU_LOAD_USED
}

#define CUDA_INIT() pthread_once(&fgpu_cuda_once, fgpu_cuda_init)
#define NVML_INIT() pthread_once(&fgpu_nvml_once, fgpu_nvml_init)
/* Calls the real function, or fails like a driver without that entry. */
#define REAL(name, ...) (real.name ? real.name(__VA_ARGS__) : CUDA_ERROR_NOT_SUPPORTED)
#define REAL_NVML(name, ...) (real.name ? real.name(__VA_ARGS__) : NVML_ERROR_FUNCTION_NOT_FOUND)

__attribute__((destructor)) static void fgpu_fini(void)
{
	/* The driver frees a process's memory when it exits; so does the
	 * share. Later frees from other destructors only pass through. */
	if (fgpu_region.r) {
		fgpu_exiting = true;
		fgpu_region_detach(&fgpu_region);
	}
}

/* ---- devices --------------------------------------------------------------- */

static void fgpu_uuid_string(const CUuuid *u, char *out, size_t n)
{
	const unsigned char *b = (const unsigned char *)u->bytes;
	snprintf(out, n,
		 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10],
		 b[11], b[12], b[13], b[14], b[15]);
}

static int fgpu_index_of_uuid(const char *uuid)
{
	for (int i = 0; i < fgpu_conf.ndev; i++)
		if (strcmp(fgpu_conf.dev[i].uuid, uuid) == 0)
			return i;
	return -1;
}

/* Conf/region index of a CUDA ordinal; -1 for a device the session was
 * not given (its limit is 0). */
static int fgpu_cuda_index(CUdevice ord)
{
	if (ord < 0 || ord >= FGPU_MAX_DEVICES)
		return -1;
	if (!fgpu_conf_uuids)
		return fgpu_conf.ndev == 0 || ord < fgpu_conf.ndev ? ord : -1;
	pthread_mutex_lock(&fgpu_lock);
	int v = fgpu_ord_index[ord];
	pthread_mutex_unlock(&fgpu_lock);
	if (v != 0)
		return v - 1;
	CUuuid u;
	char s[64];
	int idx = -1;
	if (REAL(cuDeviceGetUuid, &u, ord) == CUDA_SUCCESS) {
		fgpu_uuid_string(&u, s, sizeof(s));
		idx = fgpu_index_of_uuid(s);
	}
	pthread_mutex_lock(&fgpu_lock);
	fgpu_ord_index[ord] = idx + 1;
	pthread_mutex_unlock(&fgpu_lock);
	/* Unknown devices are not cached (0 means "not looked up"); the
	 * lookup is cheap next to a failing allocation. */
	return idx;
}

static int64_t fgpu_limit(int idx)
{
	return idx < 0 ? 0 : fgpu_conf_limit(&fgpu_conf, idx);
}

static CUresult fgpu_current_device(CUdevice *dev)
{
	return REAL(cuCtxGetDevice, dev);
}

/* Counts this process's context on device idx once (fgpu_contract.h:
 * context_overhead). */
static CUresult fgpu_charge_context(int idx)
{
	if (fgpu_conf.context_overhead <= 0)
		return CUDA_SUCCESS;
	if (idx < 0)
		return CUDA_ERROR_OUT_OF_MEMORY;   /* not the session's device: no room */
	pthread_mutex_lock(&fgpu_lock);
	CUresult rc = CUDA_SUCCESS;
	if (!fgpu_ctx_charged[idx]) {
		if (fgpu_region_reserve(&fgpu_region, idx, fgpu_conf.context_overhead,
					fgpu_limit(idx)) == 0)
			fgpu_ctx_charged[idx] = true;
		else
			rc = CUDA_ERROR_OUT_OF_MEMORY;
	}
	pthread_mutex_unlock(&fgpu_lock);
	return rc;
}

/* Whether allocations are accounted right now. */
static bool fgpu_accounting(void)
{
	return fgpu_active && !fgpu_exiting;
}

/* Reserves bytes on CUDA ordinal ord; *idx gets the region index. */
static CUresult fgpu_reserve(CUdevice ord, int64_t bytes, int *idx)
{
	*idx = fgpu_cuda_index(ord);
	if (*idx < 0 || !fgpu_region.r)
		return CUDA_ERROR_OUT_OF_MEMORY;
	CUresult rc = fgpu_charge_context(*idx);
	if (rc != CUDA_SUCCESS)
		return rc;
	if (bytes < 0 || fgpu_region_reserve(&fgpu_region, *idx, bytes, fgpu_limit(*idx)) < 0)
		return CUDA_ERROR_OUT_OF_MEMORY;
	return CUDA_SUCCESS;
}

static void fgpu_unreserve(int idx, int64_t bytes)
{
	if (idx >= 0 && fgpu_region.r && !fgpu_exiting)
		fgpu_region_release(&fgpu_region, idx, bytes);
}

/* ---- allocation table (process-local) ------------------------------------- */

enum { K_PTR = 1, K_PTR_V1, K_HANDLE, K_ARRAY, K_MIPMAP, K_POOL };

struct fgpu_entry {
	struct fgpu_entry *next;
	uint64_t key;
	int kind;
	int idx;          /* region index; for K_POOL: CUDA ordinal */
	int64_t bytes;
};

#define FGPU_BUCKETS 4096
static struct fgpu_entry *fgpu_table[FGPU_BUCKETS];
static pthread_mutex_t fgpu_table_lock = PTHREAD_MUTEX_INITIALIZER;

static unsigned fgpu_bucket_of(int kind, uint64_t key)
{
	uint64_t h = (key ^ ((uint64_t)kind << 56)) * 0x9e3779b97f4a7c15ULL;
	return (unsigned)(h >> 52) & (FGPU_BUCKETS - 1);
}

/* Records (kind, key); replaces an existing record (pools). -ENOMEM when
 * the entry cannot be allocated. */
static int fgpu_track(int kind, uint64_t key, int idx, int64_t bytes)
{
	unsigned b = fgpu_bucket_of(kind, key);
	pthread_mutex_lock(&fgpu_table_lock);
	for (struct fgpu_entry *e = fgpu_table[b]; e; e = e->next)
		if (e->kind == kind && e->key == key) {
			e->idx = idx;
			e->bytes = bytes;
			pthread_mutex_unlock(&fgpu_table_lock);
			return 0;
		}
	struct fgpu_entry *e = malloc(sizeof(*e));
	if (e) {
		*e = (struct fgpu_entry){ fgpu_table[b], key, kind, idx, bytes };
		fgpu_table[b] = e;
	}
	pthread_mutex_unlock(&fgpu_table_lock);
	return e ? 0 : -ENOMEM;
}

/* Removes (kind, key); returns whether it was there. */
static bool fgpu_untrack(int kind, uint64_t key, int *idx, int64_t *bytes)
{
	unsigned b = fgpu_bucket_of(kind, key);
	bool found = false;
	pthread_mutex_lock(&fgpu_table_lock);
	for (struct fgpu_entry **pp = &fgpu_table[b]; *pp; pp = &(*pp)->next) {
		struct fgpu_entry *e = *pp;
		if (e->kind == kind && e->key == key) {
			*idx = e->idx;
			*bytes = e->bytes;
			*pp = e->next;
			free(e);
			found = true;
			break;
		}
	}
	pthread_mutex_unlock(&fgpu_table_lock);
	return found;
}

static bool fgpu_lookup(int kind, uint64_t key, int *idx)
{
	unsigned b = fgpu_bucket_of(kind, key);
	bool found = false;
	pthread_mutex_lock(&fgpu_table_lock);
	for (struct fgpu_entry *e = fgpu_table[b]; e; e = e->next)
		if (e->kind == kind && e->key == key) {
			*idx = e->idx;
			found = true;
			break;
		}
	pthread_mutex_unlock(&fgpu_table_lock);
	return found;
}

void fgpu_track_reset_child(void);
void fgpu_track_reset_child(void)
{
	/* Entries are leaked on purpose: another parent thread may have been
	 * half way through the list when fork() copied it. */
	memset(fgpu_table, 0, sizeof(fgpu_table));
	pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
	fgpu_table_lock = fresh;
}

/* Frees via free_fn after untracking; re-tracks when the driver refuses,
 * so a failed free changes nothing. */
#define FGPU_FREE(kind, key, call) do { \
	int idx_; int64_t bytes_; \
	bool had_ = fgpu_accounting() && fgpu_untrack((kind), (key), &idx_, &bytes_); \
	CUresult rc_ = (call); \
	if (had_) { \
		if (rc_ == CUDA_SUCCESS) fgpu_unreserve(idx_, bytes_); \
		else fgpu_track((kind), (key), idx_, bytes_); \
	} \
	return rc_; \
} while (0)

/* Reserves, allocates through call (which must set *out_key on success),
 * tracks; undoes everything when any step fails. */
#define FGPU_ALLOC(kind, ord, bytes, key_expr, call, undo_call) do { \
	if (!fgpu_accounting()) return (call); \
	int idx_; \
	CUresult rc_ = fgpu_reserve((ord), (bytes), &idx_); \
	if (rc_ != CUDA_SUCCESS) return rc_; \
	rc_ = (call); \
	if (rc_ != CUDA_SUCCESS) { fgpu_unreserve(idx_, (bytes)); return rc_; } \
	if (fgpu_track((kind), (key_expr), idx_, (bytes)) < 0) { \
		(void)(undo_call); fgpu_unreserve(idx_, (bytes)); \
		return CUDA_ERROR_OUT_OF_MEMORY; \
	} \
	return CUDA_SUCCESS; \
} while (0)

/* ---- hooks: contexts ------------------------------------------------------- */

CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	CUDA_INIT();
	if (fgpu_accounting()) {
		int idx = fgpu_cuda_index(dev);
		CUresult rc = fgpu_charge_context(idx);
		if (rc != CUDA_SUCCESS)
			return rc;
	}
	return REAL(cuCtxCreate_v2, pctx, flags, dev);
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	CUDA_INIT();
	if (fgpu_accounting()) {
		int idx = fgpu_cuda_index(dev);
		CUresult rc = fgpu_charge_context(idx);
		if (rc != CUDA_SUCCESS)
			return rc;
	}
	return REAL(cuDevicePrimaryCtxRetain, pctx, dev);
}

/* ---- hooks: linear memory ---------------------------------------------------- */

#define CURRENT_DEVICE(ord) do { \
	if (fgpu_accounting()) { \
		CUresult r_ = fgpu_current_device(&(ord)); \
		if (r_ != CUDA_SUCCESS) return r_; \
	} \
} while (0)

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytes)
{
	CUDA_INIT();
	CUdevice ord = 0;
	if (!dptr || bytes == 0 || bytes > (size_t)INT64_MAX)
		return REAL(cuMemAlloc_v2, dptr, bytes);
	CURRENT_DEVICE(ord);
	FGPU_ALLOC(K_PTR, ord, (int64_t)bytes, *dptr, REAL(cuMemAlloc_v2, dptr, bytes),
		   REAL(cuMemFree_v2, *dptr));
}

CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytes)
{
	CUDA_INIT();
	CUdevice ord = 0;
	if (!dptr || bytes == 0)
		return REAL(cuMemAlloc, dptr, bytes);
	CURRENT_DEVICE(ord);
	FGPU_ALLOC(K_PTR_V1, ord, (int64_t)bytes, *dptr, REAL(cuMemAlloc, dptr, bytes),
		   REAL(cuMemFree, *dptr));
}

CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytes, unsigned int flags)
{
	CUDA_INIT();
	CUdevice ord = 0;
	if (!dptr || bytes == 0 || bytes > (size_t)INT64_MAX)
		return REAL(cuMemAllocManaged, dptr, bytes, flags);
	CURRENT_DEVICE(ord);
	FGPU_ALLOC(K_PTR, ord, (int64_t)bytes, *dptr,
		   REAL(cuMemAllocManaged, dptr, bytes, flags), REAL(cuMemFree_v2, *dptr));
}

/* Pitch is the driver's choice; reserve a 512-byte-aligned estimate first
 * (the usual texture pitch alignment), then settle on the real size. */
static CUresult fgpu_settle(int idx, int64_t reserved, int64_t actual, bool *ok)
{
	*ok = true;
	if (actual > reserved) {
		if (fgpu_region_reserve(&fgpu_region, idx, actual - reserved, fgpu_limit(idx)) < 0)
			*ok = false;
	} else if (actual < reserved) {
		fgpu_unreserve(idx, reserved - actual);
	}
	return CUDA_SUCCESS;
}

CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height,
			    unsigned int elem)
{
	CUDA_INIT();
	if (!fgpu_accounting() || !dptr || !pitch || width == 0 || height == 0)
		return REAL(cuMemAllocPitch_v2, dptr, pitch, width, height, elem);
	CUdevice ord;
	CUresult rc = fgpu_current_device(&ord);
	if (rc != CUDA_SUCCESS)
		return rc;
	uint64_t est;
	if (__builtin_mul_overflow((uint64_t)((width + 511) & ~(size_t)511), (uint64_t)height, &est) ||
	    est > (uint64_t)INT64_MAX)
		return CUDA_ERROR_OUT_OF_MEMORY;
	int idx;
	if ((rc = fgpu_reserve(ord, (int64_t)est, &idx)) != CUDA_SUCCESS)
		return rc;
	rc = REAL(cuMemAllocPitch_v2, dptr, pitch, width, height, elem);
	if (rc != CUDA_SUCCESS) {
		fgpu_unreserve(idx, (int64_t)est);
		return rc;
	}
	int64_t actual = (int64_t)(*pitch * height);
	bool ok;
	fgpu_settle(idx, (int64_t)est, actual, &ok);
	if (!ok || fgpu_track(K_PTR, *dptr, idx, actual) < 0) {
		REAL(cuMemFree_v2, *dptr);
		fgpu_unreserve(idx, ok ? actual : (int64_t)est);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	return CUDA_SUCCESS;
}

CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pitch, unsigned int width,
			 unsigned int height, unsigned int elem)
{
	CUDA_INIT();
	if (!fgpu_accounting() || !dptr || !pitch || width == 0 || height == 0)
		return REAL(cuMemAllocPitch, dptr, pitch, width, height, elem);
	CUdevice ord;
	CUresult rc = fgpu_current_device(&ord);
	if (rc != CUDA_SUCCESS)
		return rc;
	int64_t est = (int64_t)(((uint64_t)width + 511) & ~511ULL) * height;
	int idx;
	if ((rc = fgpu_reserve(ord, est, &idx)) != CUDA_SUCCESS)
		return rc;
	rc = REAL(cuMemAllocPitch, dptr, pitch, width, height, elem);
	if (rc != CUDA_SUCCESS) {
		fgpu_unreserve(idx, est);
		return rc;
	}
	int64_t actual = (int64_t)*pitch * height;
	bool ok;
	fgpu_settle(idx, est, actual, &ok);
	if (!ok || fgpu_track(K_PTR_V1, *dptr, idx, actual) < 0) {
		REAL(cuMemFree, *dptr);
		fgpu_unreserve(idx, ok ? actual : est);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	return CUDA_SUCCESS;
}

CUresult cuMemFree_v2(CUdeviceptr p)
{
	CUDA_INIT();
	FGPU_FREE(K_PTR, p, REAL(cuMemFree_v2, p));
}

CUresult cuMemFree(CUdeviceptr_v1 p)
{
	CUDA_INIT();
	FGPU_FREE(K_PTR_V1, p, REAL(cuMemFree, p));
}

/* ---- hooks: stream-ordered allocator and pools ---------------------------- */

/* Ordinal a pool allocates on: recorded when the pool was created or
 * fetched; else the current device. */
static CUresult fgpu_pool_device(CUmemoryPool pool, CUdevice *ord)
{
	int v;
	if (pool && fgpu_lookup(K_POOL, (uint64_t)(uintptr_t)pool, &v)) {
		*ord = v;
		return CUDA_SUCCESS;
	}
	return fgpu_current_device(ord);
}

#define FGPU_ALLOC_ASYNC(realfn, ...) do { \
	CUDA_INIT(); \
	CUdevice ord = 0; \
	if (!dptr || bytes == 0 || bytes > (size_t)INT64_MAX) return REAL(realfn, __VA_ARGS__); \
	CURRENT_DEVICE(ord); \
	FGPU_ALLOC(K_PTR, ord, (int64_t)bytes, *dptr, REAL(realfn, __VA_ARGS__), \
		   REAL(cuMemFree_v2, *dptr)); \
} while (0)

CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytes, CUstream s)
{
	FGPU_ALLOC_ASYNC(cuMemAllocAsync, dptr, bytes, s);
}

CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytes, CUstream s)
{
	FGPU_ALLOC_ASYNC(cuMemAllocAsync_ptsz, dptr, bytes, s);
}

#define FGPU_ALLOC_POOL(realfn) do { \
	CUDA_INIT(); \
	CUdevice ord = 0; \
	if (!dptr || bytes == 0 || bytes > (size_t)INT64_MAX) \
		return REAL(realfn, dptr, bytes, pool, s); \
	if (fgpu_accounting()) { \
		CUresult r_ = fgpu_pool_device(pool, &ord); \
		if (r_ != CUDA_SUCCESS) return r_; \
	} \
	FGPU_ALLOC(K_PTR, ord, (int64_t)bytes, *dptr, REAL(realfn, dptr, bytes, pool, s), \
		   REAL(cuMemFree_v2, *dptr)); \
} while (0)

CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool, CUstream s)
{
	FGPU_ALLOC_POOL(cuMemAllocFromPoolAsync);
}

CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool,
				      CUstream s)
{
	FGPU_ALLOC_POOL(cuMemAllocFromPoolAsync_ptsz);
}

CUresult cuMemFreeAsync(CUdeviceptr p, CUstream s)
{
	CUDA_INIT();
	FGPU_FREE(K_PTR, p, REAL(cuMemFreeAsync, p, s));
}

CUresult cuMemFreeAsync_ptsz(CUdeviceptr p, CUstream s)
{
	CUDA_INIT();
	FGPU_FREE(K_PTR, p, REAL(cuMemFreeAsync_ptsz, p, s));
}

CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props)
{
	CUDA_INIT();
	CUresult rc = REAL(cuMemPoolCreate, pool, props);
	if (rc == CUDA_SUCCESS && props && props->location.type == CU_MEM_LOCATION_TYPE_DEVICE)
		fgpu_track(K_POOL, (uint64_t)(uintptr_t)*pool, props->location.id, 0);
	return rc;
}

CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice dev)
{
	CUDA_INIT();
	CUresult rc = REAL(cuDeviceGetDefaultMemPool, pool, dev);
	if (rc == CUDA_SUCCESS)
		fgpu_track(K_POOL, (uint64_t)(uintptr_t)*pool, dev, 0);
	return rc;
}

CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
	CUDA_INIT();
	CUresult rc = REAL(cuDeviceGetMemPool, pool, dev);
	if (rc == CUDA_SUCCESS)
		fgpu_track(K_POOL, (uint64_t)(uintptr_t)*pool, dev, 0);
	return rc;
}

/* ---- hooks: virtual memory management ---------------------------------------- */

CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t size,
		     const CUmemAllocationProp *prop, unsigned long long flags)
{
	CUDA_INIT();
	if (!h || !prop || size == 0 || size > (size_t)INT64_MAX ||
	    prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
		return REAL(cuMemCreate, h, size, prop, flags);   /* host memory: not ours */
	FGPU_ALLOC(K_HANDLE, prop->location.id, (int64_t)size, *h,
		   REAL(cuMemCreate, h, size, prop, flags), REAL(cuMemRelease, *h));
}

CUresult cuMemRelease(CUmemGenericAllocationHandle h)
{
	CUDA_INIT();
	FGPU_FREE(K_HANDLE, h, REAL(cuMemRelease, h));
}

/* ---- hooks: arrays ------------------------------------------------------------- */

static int64_t fgpu_format_bytes(CUarray_format f)
{
	switch (f) {
	case CU_AD_FORMAT_UNSIGNED_INT8: case CU_AD_FORMAT_SIGNED_INT8: return 1;
	case CU_AD_FORMAT_UNSIGNED_INT16: case CU_AD_FORMAT_SIGNED_INT16:
	case CU_AD_FORMAT_HALF: return 2;
	case CU_AD_FORMAT_UNSIGNED_INT32: case CU_AD_FORMAT_SIGNED_INT32:
	case CU_AD_FORMAT_FLOAT: return 4;
	default: return 16;   /* formats not declared here: count generously */
	}
}

/* Bytes of an array (all mip levels); INT64_MAX on overflow. */
static int64_t fgpu_array_bytes(size_t w, size_t h, size_t d, CUarray_format f,
				unsigned ch, unsigned levels)
{
	int64_t total = 0, bpe = fgpu_format_bytes(f) * (ch ? ch : 1);
	if (levels == 0)
		levels = 1;
	for (unsigned l = 0; l < levels && l < 64; l++) {
		uint64_t lw = w >> l ? w >> l : 1, lh = h >> l ? h >> l : 1, ld = d >> l ? d >> l : 1;
		int64_t b;
		if (__builtin_mul_overflow((int64_t)lw, (int64_t)lh, &b) ||
		    __builtin_mul_overflow(b, (int64_t)ld, &b) ||
		    __builtin_mul_overflow(b, bpe, &b) ||
		    __builtin_add_overflow(total, b, &total))
			return INT64_MAX;
	}
	return total;
}

CUresult cuArrayCreate_v2(CUarray *pa, const CUDA_ARRAY_DESCRIPTOR *d)
{
	CUDA_INIT();
	CUdevice ord = 0;
	if (!pa || !d)
		return REAL(cuArrayCreate_v2, pa, d);
	CURRENT_DEVICE(ord);
	int64_t b = fgpu_array_bytes(d->Width, d->Height, 1, d->Format, d->NumChannels, 1);
	FGPU_ALLOC(K_ARRAY, ord, b, (uint64_t)(uintptr_t)*pa, REAL(cuArrayCreate_v2, pa, d),
		   REAL(cuArrayDestroy, *pa));
}

CUresult cuArray3DCreate_v2(CUarray *pa, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
	CUDA_INIT();
	CUdevice ord = 0;
	if (!pa || !d)
		return REAL(cuArray3DCreate_v2, pa, d);
	CURRENT_DEVICE(ord);
	int64_t b = fgpu_array_bytes(d->Width, d->Height, d->Depth, d->Format, d->NumChannels, 1);
	FGPU_ALLOC(K_ARRAY, ord, b, (uint64_t)(uintptr_t)*pa, REAL(cuArray3DCreate_v2, pa, d),
		   REAL(cuArrayDestroy, *pa));
}

CUresult cuArrayDestroy(CUarray a)
{
	CUDA_INIT();
	FGPU_FREE(K_ARRAY, (uint64_t)(uintptr_t)a, REAL(cuArrayDestroy, a));
}

CUresult cuMipmappedArrayCreate(CUmipmappedArray *pm, const CUDA_ARRAY3D_DESCRIPTOR *d,
				unsigned int levels)
{
	CUDA_INIT();
	CUdevice ord = 0;
	if (!pm || !d)
		return REAL(cuMipmappedArrayCreate, pm, d, levels);
	CURRENT_DEVICE(ord);
	int64_t b = fgpu_array_bytes(d->Width, d->Height, d->Depth, d->Format, d->NumChannels,
				     levels);
	FGPU_ALLOC(K_MIPMAP, ord, b, (uint64_t)(uintptr_t)*pm,
		   REAL(cuMipmappedArrayCreate, pm, d, levels),
		   REAL(cuMipmappedArrayDestroy, *pm));
}

CUresult cuMipmappedArrayDestroy(CUmipmappedArray m)
{
	CUDA_INIT();
	FGPU_FREE(K_MIPMAP, (uint64_t)(uintptr_t)m, REAL(cuMipmappedArrayDestroy, m));
}

/* ---- hooks: what the process is told ----------------------------------------- */

/* The share of device idx as (total, free): total = min(limit, physical),
 * used = what the container accounted, free = total - used but never more
 * than the device really has free; never negative. */
static void fgpu_share(int idx, uint64_t phys_total, uint64_t phys_free, uint64_t *total,
		       uint64_t *used, uint64_t *freep)
{
	int64_t lim = fgpu_limit(idx);
	uint64_t t = lim == FGPU_UNLIMITED || (uint64_t)lim > phys_total ? phys_total : (uint64_t)lim;
	if (lim == FGPU_UNLIMITED) {
		*total = phys_total;
		*freep = phys_free;
		*used = phys_total - phys_free;
		return;
	}
	uint64_t u = idx >= 0 && fgpu_region.r ? (uint64_t)fgpu_region_used(&fgpu_region, idx) : 0;
	if (u > t)
		u = t;
	uint64_t f = t - u;
	if (f > phys_free)
		f = phys_free;
	*total = t;
	*used = u;
	*freep = f;
}

CUresult cuMemGetInfo_v2(size_t *freep, size_t *totalp)
{
	CUDA_INIT();
	size_t rf = 0, rt = 0;
	CUresult rc = REAL(cuMemGetInfo_v2, &rf, &rt);
	if (rc != CUDA_SUCCESS || !fgpu_active) {
		if (rc == CUDA_SUCCESS) {
			if (freep)
				*freep = rf;
			if (totalp)
				*totalp = rt;
		}
		return rc;
	}
	CUdevice ord;
	if ((rc = fgpu_current_device(&ord)) != CUDA_SUCCESS)
		return rc;
	int idx = fgpu_cuda_index(ord);
	fgpu_charge_context(idx);
	uint64_t t, u, f;
	fgpu_share(idx, rt, rf, &t, &u, &f);
	if (freep)
		*freep = (size_t)f;
	if (totalp)
		*totalp = (size_t)t;
	return CUDA_SUCCESS;
}

CUresult cuMemGetInfo(unsigned int *freep, unsigned int *totalp)
{
	size_t f, t;
	CUresult rc = cuMemGetInfo_v2(&f, &t);
	if (rc == CUDA_SUCCESS) {
		if (freep)
			*freep = f > 0xffffffffu ? 0xffffffffu : (unsigned int)f;
		if (totalp)
			*totalp = t > 0xffffffffu ? 0xffffffffu : (unsigned int)t;
	}
	return rc;
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
	CUDA_INIT();
	size_t b = 0;
	CUresult rc = REAL(cuDeviceTotalMem_v2, &b, dev);
	if (rc == CUDA_SUCCESS && fgpu_active) {
		int64_t lim = fgpu_limit(fgpu_cuda_index(dev));
		if (lim != FGPU_UNLIMITED && (uint64_t)lim < b)
			b = (size_t)lim;
	}
	if (rc == CUDA_SUCCESS) {
		if (!bytes)
			return CUDA_ERROR_INVALID_VALUE;
		*bytes = b;
	}
	return rc;
}

CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev)
{
	size_t b;
	CUresult rc = cuDeviceTotalMem_v2(&b, dev);
	if (rc == CUDA_SUCCESS) {
		if (!bytes)
			return CUDA_ERROR_INVALID_VALUE;
		*bytes = b > 0xffffffffu ? 0xffffffffu : (unsigned int)b;
	}
	return rc;
}

static int fgpu_nvml_index(nvmlDevice_t d)
{
	if (fgpu_conf_uuids) {
		char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
		if (REAL_NVML(nvmlDeviceGetUUID, d, uuid, sizeof(uuid)) != NVML_SUCCESS)
			return -1;
		return fgpu_index_of_uuid(uuid);
	}
	unsigned int i;
	if (REAL_NVML(nvmlDeviceGetIndex, d, &i) != NVML_SUCCESS || i >= FGPU_MAX_DEVICES)
		return -1;
	return fgpu_conf.ndev == 0 || (int)i < fgpu_conf.ndev ? (int)i : -1;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m)
{
	NVML_INIT();
	if (!m)
		return NVML_ERROR_INVALID_ARGUMENT;
	nvmlReturn_t rc = REAL_NVML(nvmlDeviceGetMemoryInfo, d, m);
	if (rc != NVML_SUCCESS || !fgpu_active)
		return rc;
	uint64_t t, u, f;
	fgpu_share(fgpu_nvml_index(d), m->total, m->free, &t, &u, &f);
	m->total = t;
	m->used = u;
	m->free = f;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2_t *m)
{
	NVML_INIT();
	if (!m)
		return NVML_ERROR_INVALID_ARGUMENT;
	nvmlReturn_t rc = REAL_NVML(nvmlDeviceGetMemoryInfo_v2, d, m);
	if (rc != NVML_SUCCESS || !fgpu_active)
		return rc;
	uint64_t t, u, f;
	fgpu_share(fgpu_nvml_index(d), m->total, m->free, &t, &u, &f);
	m->total = t;
	m->used = u;
	m->free = f;
	m->reserved = 0;
	return NVML_SUCCESS;
}

/* ---- hooks: launch pacing ---------------------------------------------------- */

#define FGPU_RING 32

struct fgpu_pacer {
	pthread_mutex_t mu;
	CUcontext ctx;             /* context the events belong to */
	bool have_events;
	CUevent a[FGPU_RING], b[FGPU_RING];
	int head, count;           /* pending measurements */
};

static struct fgpu_pacer fgpu_pacers[FGPU_MAX_DEVICES] = {
	[0 ... FGPU_MAX_DEVICES - 1] = { .mu = PTHREAD_MUTEX_INITIALIZER },
};

void fgpu_pace_reset_child(void);
void fgpu_pace_reset_child(void)
{
	/* Events and contexts belong to the parent. */
	for (int i = 0; i < FGPU_MAX_DEVICES; i++) {
		pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
		memset(&fgpu_pacers[i], 0, sizeof(fgpu_pacers[i]));
		fgpu_pacers[i].mu = fresh;
	}
}

static uint64_t fgpu_now(void)
{
	if (real.mock_now)
		return real.mock_now();
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void fgpu_sleep(uint64_t ns)
{
	if (real.mock_sleep) {
		real.mock_sleep(ns);
		return;
	}
	struct timespec ts = { (time_t)(ns / 1000000000ULL), (long)(ns % 1000000000ULL) };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* Charges completed measurements (in order). Caller holds p->mu. */
static void fgpu_harvest(struct fgpu_pacer *p, int idx, bool block_one)
{
	while (p->count > 0) {
		int i = p->head;
		if (block_one) {
			REAL(cuEventSynchronize, p->b[i]);
			block_one = false;
		} else if (REAL(cuEventQuery, p->b[i]) == CUDA_ERROR_NOT_READY) {
			break;
		}
		float ms = 0;
		if (REAL(cuEventElapsedTime, &ms, p->a[i], p->b[i]) == CUDA_SUCCESS && ms > 0) {
			fgpu_region_lock(&fgpu_region);
			fgpu_pace_charge(&fgpu_region.r->pace[idx], (int64_t)((double)ms * 1e6));
			fgpu_region_unlock(&fgpu_region);
		}
		p->head = (p->head + 1) % FGPU_RING;
		p->count--;
	}
}

/* Before a launch: waits for the device's bucket, then records the start
 * event. Returns the pacer locked (or NULL when not pacing this launch). */
static struct fgpu_pacer *fgpu_pace_before(CUstream s, bool ptsz, int *idx_out)
{
	CUdevice ord;
	CUcontext ctx = NULL;
	if (fgpu_current_device(&ord) != CUDA_SUCCESS || ord < 0 || ord >= FGPU_MAX_DEVICES ||
	    REAL(cuCtxGetCurrent, &ctx) != CUDA_SUCCESS || !ctx)
		return NULL;
	int idx = fgpu_cuda_index(ord);
	if (idx < 0)
		return NULL;
	struct fgpu_pacer *p = &fgpu_pacers[ord];
	pthread_mutex_lock(&p->mu);
	if (p->ctx != ctx) {
		/* Another context on this device: measurements restart there. */
		if (p->have_events)
			for (int i = 0; i < FGPU_RING; i++) {
				REAL(cuEventDestroy_v2, p->a[i]);
				REAL(cuEventDestroy_v2, p->b[i]);
			}
		p->have_events = false;
		p->head = p->count = 0;
		p->ctx = ctx;
	}
	if (!p->have_events) {
		bool ok = true;
		for (int i = 0; i < FGPU_RING && ok; i++)
			ok = REAL(cuEventCreate, &p->a[i], CU_EVENT_DEFAULT) == CUDA_SUCCESS &&
			     REAL(cuEventCreate, &p->b[i], CU_EVENT_DEFAULT) == CUDA_SUCCESS;
		if (!ok) {
			pthread_mutex_unlock(&p->mu);
			return NULL;   /* cannot measure: launch unpaced */
		}
		p->have_events = true;
	}
	fgpu_harvest(p, idx, false);
	if (p->count == FGPU_RING)
		fgpu_harvest(p, idx, true);
	int pct = fgpu_conf.sm_limit_percent;
	for (int spins = 0; spins < 10000; spins++) {
		fgpu_region_lock(&fgpu_region);
		struct fgpu_bucket *b = &fgpu_region.r->pace[idx];
		fgpu_pace_refill(b, fgpu_now(), pct);
		uint64_t wait = fgpu_pace_delay(b, pct);
		fgpu_region_unlock(&fgpu_region);
		if (wait == 0)
			break;
		/* Sleep in slices so that a long debt still lets completions of
		 * other processes' kernels be seen in between. */
		fgpu_sleep(wait > 50000000ULL ? 50000000ULL : wait);
		fgpu_harvest(p, idx, false);
	}
	int slot = (p->head + p->count) % FGPU_RING;
	CUresult rc = ptsz && real.cuEventRecord_ptsz ? real.cuEventRecord_ptsz(p->a[slot], s)
						      : REAL(cuEventRecord, p->a[slot], s);
	if (rc != CUDA_SUCCESS) {
		pthread_mutex_unlock(&p->mu);
		return NULL;
	}
	*idx_out = idx;
	return p;
}

static void fgpu_pace_after(struct fgpu_pacer *p, CUstream s, bool ptsz, CUresult launch)
{
	if (!p)
		return;
	int slot = (p->head + p->count) % FGPU_RING;
	if (launch == CUDA_SUCCESS) {
		CUresult rc = ptsz && real.cuEventRecord_ptsz ? real.cuEventRecord_ptsz(p->b[slot], s)
							      : REAL(cuEventRecord, p->b[slot], s);
		if (rc == CUDA_SUCCESS)
			p->count++;
	}
	pthread_mutex_unlock(&p->mu);
}

#define FGPU_PACED(ptsz, stream, call) do { \
	CUDA_INIT(); \
	if (!fgpu_pacing) return (call); \
	int idx_; \
	struct fgpu_pacer *p_ = fgpu_pace_before((stream), (ptsz), &idx_); \
	CUresult rc_ = (call); \
	fgpu_pace_after(p_, (stream), (ptsz), rc_); \
	return rc_; \
} while (0)

CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
			unsigned int bx, unsigned int by, unsigned int bz, unsigned int shmem,
			CUstream s, void **params, void **extra)
{
	FGPU_PACED(false, s, REAL(cuLaunchKernel, f, gx, gy, gz, bx, by, bz, shmem, s, params, extra));
}

CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
			     unsigned int bx, unsigned int by, unsigned int bz,
			     unsigned int shmem, CUstream s, void **params, void **extra)
{
	FGPU_PACED(true, s,
		   REAL(cuLaunchKernel_ptsz, f, gx, gy, gz, bx, by, bz, shmem, s, params, extra));
}

CUresult cuLaunchKernelEx(const CUlaunchConfig *c, CUfunction f, void **params, void **extra)
{
	FGPU_PACED(false, c ? c->hStream : NULL, REAL(cuLaunchKernelEx, c, f, params, extra));
}

CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *c, CUfunction f, void **params,
			       void **extra)
{
	FGPU_PACED(true, c ? c->hStream : NULL, REAL(cuLaunchKernelEx_ptsz, c, f, params, extra));
}

/* ---- lookup: cuGetProcAddress and dlsym ------------------------------------- */

/* Replaces a driver entry point by its hook: by address when the driver
 * hands out its exported functions (the common case), else by base name
 * and version, preferring the per-thread-stream variant when asked. */
static void fgpu_substitute(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
	if (!pfn || !*pfn)
		return;
	for (size_t i = 0; i < FGPU_NHOOKS; i++)
		if (!fgpu_hooks[i].nvml && *fgpu_hooks[i].real == *pfn) {
			*pfn = fgpu_hooks[i].hook;
			return;
		}
	bool want_ptsz = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
	const struct fgpu_hook *best = NULL;
	for (size_t i = 0; i < FGPU_NHOOKS; i++) {
		const struct fgpu_hook *h = &fgpu_hooks[i];
		if (h->nvml || strcmp(h->base, symbol) != 0 || h->since > version || h->ptsz != want_ptsz)
			continue;
		if (!best || h->since > best->since)
			best = h;
	}
	if (!best)
		return;   /* e.g. a per-thread variant we do not hook: pass through */
	if (!*best->real)
		__atomic_store_n(best->real, *pfn, __ATOMIC_RELEASE);
	*pfn = best->hook;
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
	CUDA_INIT();
	CUresult rc = REAL(cuGetProcAddress, symbol, pfn, version, flags);
	if (rc == CUDA_SUCCESS && symbol)
		fgpu_substitute(symbol, pfn, version, flags);
	return rc;
}

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
			     CUdriverProcAddressQueryResult *status)
{
	CUDA_INIT();
	CUresult rc = REAL(cuGetProcAddress_v2, symbol, pfn, version, flags, status);
	if (rc == CUDA_SUCCESS && symbol)
		fgpu_substitute(symbol, pfn, version, flags);
	return rc;
}

/* Decides whether dlsym(handle, name) gets a hook: only for hooked names
 * the lookup finds. Returns the hook, or NULL for "let the C library
 * answer". */
__attribute__((visibility("hidden"))) FGPU_EARLY void *fgpu_dlsym_hook(void *handle,
								       const char *name);
FGPU_EARLY void *fgpu_dlsym_hook(void *handle, const char *name)
{
	fgpu_resolve_dlsym();
	const struct fgpu_hook *h = fgpu_hook_find(name);
	if (!h || !fgpu_real_dlsym)
		return NULL;
	/* RTLD_NEXT from here searches after the shim rather than after the
	 * caller; for the driver's names that finds the same library. */
	return fgpu_real_dlsym(handle, name) ? h->hook : NULL;
}

#if defined(__x86_64__)
/* dlsym itself. RTLD_NEXT means "after the caller's object", and the C
 * library works out the caller from its return address. So the entry is
 * a stub that asks fgpu_dlsym_hook and, when that declines, *jumps* to
 * the real dlsym with the caller's return address still on the stack:
 * RTLD_NEXT, RTLD_DEFAULT from RTLD_LOCAL objects and dlerror() all keep
 * their exact meaning for everything the shim does not hook. */
__asm__(
	".text\n"
	".globl dlsym\n"
	".type dlsym, @function\n"
	"dlsym:\n"
	"	.cfi_startproc\n"
	"	pushq %rdi\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	pushq %rsi\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	subq $8, %rsp\n"          /* 16-byte alignment for the call */
	"	.cfi_adjust_cfa_offset 8\n"
	"	call fgpu_dlsym_hook\n"
	"	addq $8, %rsp\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	popq %rsi\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	popq %rdi\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	testq %rax, %rax\n"
	"	jz 1f\n"
	"	ret\n"
	"1:	jmp *fgpu_real_dlsym(%rip)\n"
	"	.cfi_endproc\n"
	".size dlsym, .-dlsym\n");
#else
/* Other architectures: no stub yet, so RTLD_NEXT for names the shim does
 * not hook is answered as if asked from the shim (searching after it).
 * Documented in docs/fgpu.md as a limit. */
FGPU_EARLY void *dlsym(void *handle, const char *name)
{
	void *p = fgpu_dlsym_hook(handle, name);
	if (p)
		return p;
	return fgpu_real_dlsym ? fgpu_real_dlsym(handle, name) : NULL;
}
#endif
