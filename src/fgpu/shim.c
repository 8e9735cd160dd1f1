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
#include <elf.h>
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
FGPU_EXPORT void *dlvsym(void *handle, const char *name, const char *version);

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

/* Not static: the x86-64 dlsym / dlvsym entry stubs below jump through
 * them. */
__attribute__((visibility("hidden"))) void *(*fgpu_real_dlsym)(void *, const char *);
__attribute__((visibility("hidden"))) void *(*fgpu_real_dlvsym)(void *, const char *,
								const char *);
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

/* A symbol defined by a loaded object, found through its GNU hash table
 * (what the dynamic loader itself reads), without calling any function
 * that could be interposed or not yet set up. */
FGPU_EARLY static void *fgpu_elf_symbol(const struct link_map *lm, const char *name)
{
	const ElfW(Sym) *symtab = NULL;
	const char *strtab = NULL;
	const uint32_t *gnu = NULL;
	for (const ElfW(Dyn) *d = lm->l_ld; d && d->d_tag != DT_NULL; d++) {
		/* The loader relocates these in place on most targets; an
		 * address below the load base is still an offset. */
		ElfW(Addr) p = d->d_un.d_ptr < lm->l_addr ? d->d_un.d_ptr + lm->l_addr
							  : d->d_un.d_ptr;
		if (d->d_tag == DT_SYMTAB)
			symtab = (const ElfW(Sym) *)p;
		else if (d->d_tag == DT_STRTAB)
			strtab = (const char *)p;
		else if (d->d_tag == DT_GNU_HASH)
			gnu = (const uint32_t *)p;
	}
	if (!symtab || !strtab || !gnu || gnu[0] == 0)
		return NULL;
	uint32_t nbuckets = gnu[0], symoffset = gnu[1], bloom_words = gnu[2];
	const uint32_t *buckets = (const uint32_t *)((const ElfW(Addr) *)&gnu[4] + bloom_words);
	const uint32_t *chain = buckets + nbuckets;
	uint32_t h = 5381;
	for (const unsigned char *c = (const unsigned char *)name; *c; c++)
		h = h * 33 + *c;
	uint32_t i = buckets[h % nbuckets];
	if (i < symoffset)
		return NULL;
	for (;; i++) {
		uint32_t h2 = chain[i - symoffset];
		const ElfW(Sym) *sym = &symtab[i];
		if ((h | 1) == (h2 | 1) && sym->st_shndx != SHN_UNDEF && sym->st_value &&
		    fgpu_streq(strtab + sym->st_name, name))
			return (void *)(lm->l_addr + sym->st_value);
		if (h2 & 1)
			return NULL;
	}
}

FGPU_EARLY static bool fgpu_has(const char *s, const char *part)
{
	for (; s && *s; s++) {
		const char *a = s, *b = part;
		while (*a && *a == *b)
			a++, b++;
		if (!*b)
			return true;
	}
	return false;
}

FGPU_EARLY static void fgpu_resolve_dlsym(void)
{
	if (fgpu_real_dlsym && fgpu_real_dlvsym)
		return;
	/* dlsym and dlvsym are both replaced here, so the shim cannot call
	 * either to find the originals. The C library's dlvsym (libdl's
	 * before glibc 2.34) is read from its symbol table, then asked for
	 * what comes after the shim, so other interposers stay chained. */
	void *(*libc_dlvsym)(void *, const char *, const char *) = NULL;
	for (const struct link_map *lm = _r_debug.r_map; lm && !libc_dlvsym; lm = lm->l_next)
		if (fgpu_has(lm->l_name, "/libc.so.") || fgpu_has(lm->l_name, "/libdl.so."))
			*(void **)&libc_dlvsym = fgpu_elf_symbol(lm, "dlvsym");
	if (!libc_dlvsym)
		return;
	static const char *const versions[] = { "GLIBC_2.34", "GLIBC_2.2.5" };
	for (int i = 0; i < 2 && !fgpu_real_dlsym; i++)
		*(void **)&fgpu_real_dlsym = libc_dlvsym(RTLD_NEXT, "dlsym", versions[i]);
	for (int i = 0; i < 2 && !fgpu_real_dlvsym; i++)
		*(void **)&fgpu_real_dlvsym = libc_dlvsym(RTLD_NEXT, "dlvsym", versions[i]);
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
	extern void fgpu_pool_reset_child(void);
	fgpu_track_reset_child();
	fgpu_pace_reset_child();
	fgpu_pool_reset_child();
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

/* K_POOLPTR: an allocation served by a memory pool (charged through its
 * pool, see "pools" below); K_MAP: a VMM mapping, aux = its handle. */
enum { K_PTR = 1, K_PTR_V1, K_HANDLE, K_ARRAY, K_MIPMAP, K_POOLPTR, K_MAP };

struct fgpu_entry {
	struct fgpu_entry *next;
	uint64_t key;
	int kind;
	int idx;          /* region index; for K_POOLPTR: pool slot */
	int64_t bytes;
	uint64_t aux;
	int refs, maps;   /* K_HANDLE: references and mappings */
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
		*e = (struct fgpu_entry){ .next = fgpu_table[b], .key = key, .kind = kind,
					  .idx = idx, .bytes = bytes, .refs = 1 };
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

/* The entry (kind, key), or NULL. Caller holds fgpu_table_lock. */
static struct fgpu_entry *fgpu_find_locked(int kind, uint64_t key)
{
	for (struct fgpu_entry *e = fgpu_table[fgpu_bucket_of(kind, key)]; e; e = e->next)
		if (e->kind == kind && e->key == key)
			return e;
	return NULL;
}

/* Unlinks and frees e. Caller holds fgpu_table_lock. */
static void fgpu_drop_locked(struct fgpu_entry *e)
{
	for (struct fgpu_entry **pp = &fgpu_table[fgpu_bucket_of(e->kind, e->key)]; *pp;
	     pp = &(*pp)->next)
		if (*pp == e) {
			*pp = e->next;
			free(e);
			return;
		}
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

/* cuMemFree_v2 may free stream-ordered allocations too. */
static CUresult fgpu_pool_free_sync(CUdeviceptr p, bool *mine);

CUresult cuMemFree_v2(CUdeviceptr p)
{
	CUDA_INIT();
	bool mine;
	CUresult rc = fgpu_pool_free_sync(p, &mine);
	if (mine)
		return rc;
	FGPU_FREE(K_PTR, p, REAL(cuMemFree_v2, p));
}

CUresult cuMemFree(CUdeviceptr_v1 p)
{
	CUDA_INIT();
	FGPU_FREE(K_PTR_V1, p, REAL(cuMemFree, p));
}

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

void fgpu_pool_reset_child(void);
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
	fgpu_pool_slack = slack;
}

/* At synchronization points and before usage is reported. */
static void fgpu_pools_settle(void)
{
	if (!fgpu_accounting() || !__atomic_load_n(&fgpu_pool_slack, __ATOMIC_RELAXED))
		return;
	pthread_mutex_lock(&fgpu_pool_lock);
	fgpu_pools_settle_locked();
	pthread_mutex_unlock(&fgpu_pool_lock);
}

/* Makes room for need bytes on region index idx by trimming the unused
 * reserve of this process's other pools there. Caller holds the lock. */
static int fgpu_pool_make_room_locked(struct fgpu_pool *except, int idx, int64_t need)
{
	for (int i = 0; i < FGPU_MAX_POOLS; i++) {
		struct fgpu_pool *p = &fgpu_pools[i];
		if (!p->h || p == except || p->idx != idx || p->destroyed || p->charged <= p->live)
			continue;
		REAL(cuMemPoolTrimTo, p->h, 0);
		fgpu_pool_settle_locked(p);
	}
	return fgpu_region_reserve(&fgpu_region, idx, need, fgpu_limit(idx));
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
 * stream's device (cuMemAllocAsync). */
static CUresult fgpu_pool_alloc(enum fgpu_pool_call how, CUdeviceptr *dptr, size_t bytes,
				CUmemoryPool pool, CUstream s)
{
	CUDA_INIT();
	if (!fgpu_accounting() || !dptr || bytes == 0 || bytes > (size_t)INT64_MAX)
		return fgpu_pool_call(how, dptr, bytes, pool, s);
	bool ptsz = how == POOL_ASYNC_PTSZ || how == POOL_FROM_PTSZ;
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
		fgpu_pool_slack = fgpu_pool_slack || p->charged > p->live;
		pthread_mutex_unlock(&fgpu_pool_lock);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	fgpu_pool_slack = fgpu_pool_slack || p->charged > p->live;
	fgpu_pool_ptrs = true;
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
				fgpu_pool_slack = fgpu_pool_slack || (p_->h && p_->charged > p_->live); \
			} \
		} \
		pthread_mutex_unlock(&fgpu_pool_lock); \
	} \
	mine_; \
})

static CUresult fgpu_pool_free_sync(CUdeviceptr p, bool *mine)
{
	CUresult rc = CUDA_SUCCESS;
	*mine = __atomic_load_n(&fgpu_pool_ptrs, __ATOMIC_RELAXED) &&
		FGPU_POOL_FREE(p, REAL(cuMemFree_v2, p), &rc);
	return rc;
}

CUresult cuMemFreeAsync(CUdeviceptr p, CUstream s)
{
	CUDA_INIT();
	CUresult rc;
	if (FGPU_POOL_FREE(p, REAL(cuMemFreeAsync, p, s), &rc))
		return rc;
	FGPU_FREE(K_PTR, p, REAL(cuMemFreeAsync, p, s));
}

CUresult cuMemFreeAsync_ptsz(CUdeviceptr p, CUstream s)
{
	CUDA_INIT();
	CUresult rc;
	if (FGPU_POOL_FREE(p, REAL(cuMemFreeAsync_ptsz, p, s), &rc))
		return rc;
	FGPU_FREE(K_PTR, p, REAL(cuMemFreeAsync_ptsz, p, s));
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

/* Synchronization is where pools give memory back. */
CUresult cuStreamSynchronize(CUstream s)
{
	CUDA_INIT();
	CUresult rc = REAL(cuStreamSynchronize, s);
	if (rc == CUDA_SUCCESS)
		fgpu_pools_settle();
	return rc;
}

CUresult cuStreamSynchronize_ptsz(CUstream s)
{
	CUDA_INIT();
	CUresult rc = REAL(cuStreamSynchronize_ptsz, s);
	if (rc == CUDA_SUCCESS)
		fgpu_pools_settle();
	return rc;
}

CUresult cuEventSynchronize(CUevent e)
{
	CUDA_INIT();
	CUresult rc = REAL(cuEventSynchronize, e);
	if (rc == CUDA_SUCCESS)
		fgpu_pools_settle();
	return rc;
}

CUresult cuCtxSynchronize(void)
{
	CUDA_INIT();
	CUresult rc = REAL(cuCtxSynchronize);
	if (rc == CUDA_SUCCESS)
		fgpu_pools_settle();
	return rc;
}

/* ---- hooks: virtual memory management ---------------------------------------- */

/* cuMemCreate takes physical memory; the driver gives it back only when
 * the handle has no references left (cuMemRelease; cuMemRetainAllocationHandle
 * adds one) *and* no mappings (cuMemMap / cuMemUnmap). The charge follows
 * that, not cuMemRelease alone. */

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

/* Drops e when nothing holds its memory any more. Caller holds the table
 * lock; the bytes to unreserve are returned (0: still held). */
static int64_t fgpu_handle_check_locked(struct fgpu_entry *e, int *idx)
{
	if (e->refs > 0 || e->maps > 0)
		return 0;
	int64_t b = e->bytes;
	*idx = e->idx;
	fgpu_drop_locked(e);
	return b;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle h)
{
	CUDA_INIT();
	CUresult rc = REAL(cuMemRelease, h);
	if (rc != CUDA_SUCCESS || !fgpu_accounting())
		return rc;
	int idx = -1;
	int64_t freed = 0;
	pthread_mutex_lock(&fgpu_table_lock);
	struct fgpu_entry *e = fgpu_find_locked(K_HANDLE, h);
	if (e && e->refs > 0) {
		e->refs--;
		freed = fgpu_handle_check_locked(e, &idx);
	}
	pthread_mutex_unlock(&fgpu_table_lock);
	if (freed > 0)
		fgpu_unreserve(idx, freed);
	return rc;
}

CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *h, void *addr)
{
	CUDA_INIT();
	CUresult rc = REAL(cuMemRetainAllocationHandle, h, addr);
	if (rc != CUDA_SUCCESS || !fgpu_accounting() || !h)
		return rc;
	pthread_mutex_lock(&fgpu_table_lock);
	struct fgpu_entry *e = fgpu_find_locked(K_HANDLE, *h);
	if (e)
		e->refs++;
	pthread_mutex_unlock(&fgpu_table_lock);
	return rc;
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle h,
		  unsigned long long flags)
{
	CUDA_INIT();
	CUresult rc = REAL(cuMemMap, ptr, size, offset, h, flags);
	if (rc != CUDA_SUCCESS || !fgpu_accounting())
		return rc;
	pthread_mutex_lock(&fgpu_table_lock);
	struct fgpu_entry *e = fgpu_find_locked(K_HANDLE, h);
	pthread_mutex_unlock(&fgpu_table_lock);
	/* A handle the shim did not create (imported from another process)
	 * is charged to its owner: its mappings are not followed. */
	if (e && fgpu_track(K_MAP, ptr, 0, (int64_t)size) == 0) {
		pthread_mutex_lock(&fgpu_table_lock);
		struct fgpu_entry *m = fgpu_find_locked(K_MAP, ptr);
		e = fgpu_find_locked(K_HANDLE, h);
		if (m && e) {
			m->aux = h;
			e->maps++;
		} else if (m) {
			fgpu_drop_locked(m);   /* released meanwhile */
		}
		pthread_mutex_unlock(&fgpu_table_lock);
	}
	return rc;
}

/* Ends mapping m (caller holds the table lock); returns bytes to give back. */
static int64_t fgpu_unmap_locked(struct fgpu_entry *m, int *idx)
{
	uint64_t h = m->aux;
	fgpu_drop_locked(m);
	struct fgpu_entry *e = fgpu_find_locked(K_HANDLE, h);
	if (!e || e->maps == 0)
		return 0;
	e->maps--;
	return fgpu_handle_check_locked(e, idx);
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
	CUDA_INIT();
	CUresult rc = REAL(cuMemUnmap, ptr, size);
	if (rc != CUDA_SUCCESS || !fgpu_accounting() || size == 0)
		return rc;
	/* The range covers whole mappings, usually back to back: follow them
	 * by address, and scan the table only when there is a gap. */
	CUdeviceptr end = ptr + size < ptr ? UINT64_MAX : ptr + size;
	int64_t freed[FGPU_MAX_DEVICES] = { 0 };
	pthread_mutex_lock(&fgpu_table_lock);
	CUdeviceptr at = ptr;
	while (at < end) {
		struct fgpu_entry *m = fgpu_find_locked(K_MAP, at);
		if (!m)
			break;
		CUdeviceptr next = at + (uint64_t)m->bytes;
		int idx = -1;
		int64_t b = fgpu_unmap_locked(m, &idx);
		if (b > 0 && idx >= 0 && idx < FGPU_MAX_DEVICES)
			freed[idx] += b;
		at = next;
	}
	if (at < end) {
		for (unsigned i = 0; i < FGPU_BUCKETS; i++) {
			struct fgpu_entry *m = fgpu_table[i];
			while (m) {
				if (m->kind != K_MAP || m->key < at || m->key >= end) {
					m = m->next;
					continue;
				}
				int idx = -1;
				int64_t b = fgpu_unmap_locked(m, &idx);
				if (b > 0 && idx >= 0 && idx < FGPU_MAX_DEVICES)
					freed[idx] += b;
				/* That may have dropped the handle's entry as well,
				 * maybe from this very bucket: start it over. */
				m = fgpu_table[i];
			}
		}
	}
	pthread_mutex_unlock(&fgpu_table_lock);
	for (int i = 0; i < FGPU_MAX_DEVICES; i++)
		if (freed[i] > 0)
			fgpu_unreserve(i, freed[i]);
	return rc;
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

/* The pre-3.2 ABI: the same arrays, described with 32-bit extents. */
CUresult cuArrayCreate(CUarray *pa, const CUDA_ARRAY_DESCRIPTOR_v1 *d)
{
	CUDA_INIT();
	CUdevice ord = 0;
	if (!pa || !d)
		return REAL(cuArrayCreate, pa, d);
	CURRENT_DEVICE(ord);
	int64_t b = fgpu_array_bytes(d->Width, d->Height, 1, d->Format, d->NumChannels, 1);
	FGPU_ALLOC(K_ARRAY, ord, b, (uint64_t)(uintptr_t)*pa, REAL(cuArrayCreate, pa, d),
		   REAL(cuArrayDestroy, *pa));
}

CUresult cuArray3DCreate(CUarray *pa, const CUDA_ARRAY3D_DESCRIPTOR_v1 *d)
{
	CUDA_INIT();
	CUdevice ord = 0;
	if (!pa || !d)
		return REAL(cuArray3DCreate, pa, d);
	CURRENT_DEVICE(ord);
	int64_t b = fgpu_array_bytes(d->Width, d->Height, d->Depth, d->Format, d->NumChannels, 1);
	FGPU_ALLOC(K_ARRAY, ord, b, (uint64_t)(uintptr_t)*pa, REAL(cuArray3DCreate, pa, d),
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
	fgpu_pools_settle();
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
	fgpu_pools_settle();
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
	fgpu_pools_settle();
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
	/* Work launched into a stream being captured into a graph does not
	 * run now, and events recorded there become part of the graph (the
	 * driver refuses to query them): the graph is paced when launched. */
	CUstream qs = ptsz && !s ? CU_STREAM_PER_THREAD : s;
	if (qs && qs != CU_STREAM_LEGACY && real.cuStreamIsCapturing) {
		CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
		if (real.cuStreamIsCapturing(qs, &st) != CUDA_SUCCESS ||
		    st != CU_STREAM_CAPTURE_STATUS_NONE)
			return NULL;
	}
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

/* Cooperative kernels are kernels; a graph launch is measured as a whole
 * (all its kernels, from the first start to the last end). */
CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy,
				   unsigned int gz, unsigned int bx, unsigned int by,
				   unsigned int bz, unsigned int shmem, CUstream s, void **params)
{
	FGPU_PACED(false, s,
		   REAL(cuLaunchCooperativeKernel, f, gx, gy, gz, bx, by, bz, shmem, s, params));
}

CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy,
					unsigned int gz, unsigned int bx, unsigned int by,
					unsigned int bz, unsigned int shmem, CUstream s,
					void **params)
{
	FGPU_PACED(true, s, REAL(cuLaunchCooperativeKernel_ptsz, f, gx, gy, gz, bx, by, bz, shmem,
				 s, params));
}

CUresult cuGraphLaunch(CUgraphExec g, CUstream s)
{
	FGPU_PACED(false, s, REAL(cuGraphLaunch, g, s));
}

CUresult cuGraphLaunch_ptsz(CUgraphExec g, CUstream s)
{
	FGPU_PACED(true, s, REAL(cuGraphLaunch_ptsz, g, s));
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

/* The same for dlvsym(handle, name, version). */
__attribute__((visibility("hidden"))) FGPU_EARLY void *
fgpu_dlvsym_hook(void *handle, const char *name, const char *version);
FGPU_EARLY void *fgpu_dlvsym_hook(void *handle, const char *name, const char *version)
{
	fgpu_resolve_dlsym();
	const struct fgpu_hook *h = fgpu_hook_find(name);
	if (!h || !fgpu_real_dlvsym)
		return NULL;
	return fgpu_real_dlvsym(handle, name, version) ? h->hook : NULL;
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
	".size dlsym, .-dlsym\n"
	/* dlvsym: three arguments; three pushes keep the stack aligned. */
	".globl dlvsym\n"
	".type dlvsym, @function\n"
	"dlvsym:\n"
	"	.cfi_startproc\n"
	"	pushq %rdi\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	pushq %rsi\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	pushq %rdx\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	call fgpu_dlvsym_hook\n"
	"	popq %rdx\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	popq %rsi\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	popq %rdi\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	testq %rax, %rax\n"
	"	jz 2f\n"
	"	ret\n"
	"2:	jmp *fgpu_real_dlvsym(%rip)\n"
	"	.cfi_endproc\n"
	".size dlvsym, .-dlvsym\n");
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

FGPU_EARLY void *dlvsym(void *handle, const char *name, const char *version)
{
	void *p = fgpu_dlvsym_hook(handle, name, version);
	if (p)
		return p;
	return fgpu_real_dlvsym ? fgpu_real_dlvsym(handle, name, version) : NULL;
}
#endif
