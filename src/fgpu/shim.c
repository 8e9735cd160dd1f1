/* libtessera-fgpu.so: fractional-GPU enforcement by interposition.
 *
 * Loaded into every process of a GPU session through /etc/ld.so.preload
 * (fgpu_contract.h). It exports the driver's own names for the entry
 * points in hooks.h, a dlsym that hands out those hooks to code that looks
 * the driver up by hand, and cuGetProcAddress(_v2), through which the CUDA
 * 12 runtime fetches every driver entry point. Hooks call the real driver
 * through a handle of its own (dlopen "libcuda.so.1"/"libnvidia-ml.so.1").
 *
 * Memory (memory.c, pools.c): every allocation family reserves its bytes
 * in the container's shared region (region.h) *before* calling the driver;
 * past the limit it returns CUDA_ERROR_OUT_OF_MEMORY without allocating.
 * Sizes are kept in a process-local table (here) so frees give back
 * exactly what was taken. Compute (launch.c): launches are paced by
 * measured kernel time (pacing.h). shim.h lists what the files share.
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

#include "fgpu/hooks.h"
#include "fgpu/pacing.h"
#include "fgpu/shim.h"
#include "gpuabi/conf.h"
#include "gpuabi/region.h"
#include "gpuabi/uuid.h"

/* ---- derived from the one list ----------------------------------------- */

struct fgpu_real real;

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
pthread_once_t fgpu_cuda_once = PTHREAD_ONCE_INIT;
pthread_once_t fgpu_nvml_once = PTHREAD_ONCE_INIT;
struct fgpu_conf fgpu_conf;
struct fgpu_region_handle fgpu_region;
bool fgpu_active;       /* limits enforced */
bool fgpu_pacing;       /* compute share enforced */
bool fgpu_exiting;      /* after detaching at exit: pass through */
bool fgpu_conf_uuids;   /* the limits file names devices by UUID */

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
	/* glibc 2.34+, then the architecture's first glibc (x86-64, AArch64) */
	static const char *const versions[] = { "GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17" };
	const int n = sizeof(versions) / sizeof(versions[0]);
	for (int i = 0; i < n && !fgpu_real_dlsym; i++)
		*(void **)&fgpu_real_dlsym = libc_dlvsym(RTLD_NEXT, "dlsym", versions[i]);
	for (int i = 0; i < n && !fgpu_real_dlvsym; i++)
		*(void **)&fgpu_real_dlvsym = libc_dlvsym(RTLD_NEXT, "dlvsym", versions[i]);
}

static void fgpu_atfork_child(void)
{
	/* The child owns none of the parent's device memory or events; its
	 * accounting starts empty (a new slot is taken on first use). */
	pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
	fgpu_lock = fresh;
	memset(fgpu_ctx_charged, 0, sizeof(fgpu_ctx_charged));
	fgpu_track_reset_child();
	fgpu_pace_reset_child();
	fgpu_pool_reset_child();
	fgpu_graph_reset_child();
	fgpu_contexts_reset_child();
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
	fgpu_pacing = fgpu_active && fgpu_region.r && fgpu_conf_sm_limited(&fgpu_conf);
	pthread_atfork(NULL, NULL, fgpu_atfork_child);
}

static void *fgpu_open_lib(const char *soname)
{
	return dlopen(soname, RTLD_NOW | RTLD_LOCAL);
}

void fgpu_cuda_init(void)
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

void fgpu_nvml_init(void)
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

bool fgpu_device_uuid(CUdevice ord, char *out, size_t n)
{
	CUuuid u;
	if (REAL(cuDeviceGetUuid, &u, ord) != CUDA_SUCCESS)
		return false;
	gpuabi_uuid_format(u.bytes, out, n);
	return true;
}

/* Conf/region index of a CUDA ordinal; -1 for a device the session was
 * not given (its limit is 0). */
int fgpu_cuda_index(CUdevice ord)
{
	if (ord < 0 || ord >= FGPU_MAX_DEVICES)
		return -1;
	if (!fgpu_conf_uuids)
		return fgpu_conf_index(&fgpu_conf, NULL, ord);
	pthread_mutex_lock(&fgpu_lock);
	int v = fgpu_ord_index[ord];
	pthread_mutex_unlock(&fgpu_lock);
	if (v != 0)
		return v - 1;
	CUuuid u;
	char s[GPUABI_UUID_STR_SIZE];
	int idx = -1;
	if (REAL(cuDeviceGetUuid, &u, ord) == CUDA_SUCCESS) {
		gpuabi_uuid_format(u.bytes, s, sizeof(s));
		idx = fgpu_conf_index(&fgpu_conf, s, -1);
	}
	pthread_mutex_lock(&fgpu_lock);
	fgpu_ord_index[ord] = idx + 1;
	pthread_mutex_unlock(&fgpu_lock);
	/* Unknown devices are not cached (0 means "not looked up"); the
	 * lookup is cheap next to a failing allocation. */
	return idx;
}

int64_t fgpu_limit(int idx)
{
	return idx < 0 ? 0 : fgpu_conf_limit(&fgpu_conf, idx);
}

CUresult fgpu_current_device(CUdevice *dev)
{
	return REAL(cuCtxGetDevice, dev);
}

/* Counts this process's context on device idx once (fgpu_contract.h:
 * context_overhead). */
CUresult fgpu_charge_context(int idx)
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
bool fgpu_accounting(void)
{
	return fgpu_active && !fgpu_exiting;
}

/* Reserves bytes on CUDA ordinal ord; *idx gets the region index. */
CUresult fgpu_reserve(CUdevice ord, int64_t bytes, int *idx)
{
	*idx = fgpu_cuda_index(ord);
	if (*idx < 0 || !fgpu_region.r)
		return CUDA_ERROR_OUT_OF_MEMORY;
	CUresult rc = fgpu_charge_context(*idx);
	if (rc != CUDA_SUCCESS)
		return rc;
	if (bytes < 0)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (fgpu_region_reserve(&fgpu_region, *idx, bytes, fgpu_limit(*idx)) == 0)
		return CUDA_SUCCESS;
	fgpu_reclaim_idle(*idx);
	if (fgpu_region_reserve(&fgpu_region, *idx, bytes, fgpu_limit(*idx)) == 0)
		return CUDA_SUCCESS;
	return CUDA_ERROR_OUT_OF_MEMORY;
}

bool fgpu_stream_capturing(CUstream s, bool if_unknown)
{
	/* The legacy default stream cannot be captured. */
	if (!s || s == CU_STREAM_LEGACY || !real.cuStreamIsCapturing)
		return false;
	CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
	if (real.cuStreamIsCapturing(s, &st) != CUDA_SUCCESS)
		return if_unknown;
	return st != CU_STREAM_CAPTURE_STATUS_NONE;
}

void fgpu_unreserve(int idx, int64_t bytes)
{
	if (idx >= 0 && fgpu_region.r && !fgpu_exiting)
		fgpu_region_release(&fgpu_region, idx, bytes);
}

/* ---- allocation table (process-local) ------------------------------------- */

struct fgpu_entry *fgpu_table[FGPU_BUCKETS];
pthread_mutex_t fgpu_table_lock = PTHREAD_MUTEX_INITIALIZER;

static unsigned fgpu_bucket_of(int kind, uint64_t key)
{
	uint64_t h = (key ^ ((uint64_t)kind << 56)) * 0x9e3779b97f4a7c15ULL;
	return (unsigned)(h >> 52) & (FGPU_BUCKETS - 1);
}

/* Records (kind, key); replaces an existing record (pools). -ENOMEM when
 * the entry cannot be allocated. */
int fgpu_track(int kind, uint64_t key, int idx, int64_t bytes)
{
	unsigned b = fgpu_bucket_of(kind, key);
	/* what a context owns goes with it (contexts.c) */
	CUcontext owner = NULL;
	if ((kind == K_PTR || kind == K_PTR_V1 || kind == K_ARRAY || kind == K_MIPMAP) &&
	    REAL(cuCtxGetCurrent, &owner) != CUDA_SUCCESS)
		owner = NULL;
	pthread_mutex_lock(&fgpu_table_lock);
	for (struct fgpu_entry *e = fgpu_table[b]; e; e = e->next)
		if (e->kind == kind && e->key == key) {
			e->idx = idx;
			e->bytes = bytes;
			e->ctx = owner;
			pthread_mutex_unlock(&fgpu_table_lock);
			return 0;
		}
	struct fgpu_entry *e = malloc(sizeof(*e));
	if (e) {
		*e = (struct fgpu_entry){ .next = fgpu_table[b], .key = key, .kind = kind,
					  .idx = idx, .bytes = bytes, .refs = 1, .ctx = owner };
		fgpu_table[b] = e;
	}
	pthread_mutex_unlock(&fgpu_table_lock);
	return e ? 0 : -ENOMEM;
}

/* Removes (kind, key); returns whether it was there. */
bool fgpu_untrack(int kind, uint64_t key, int *idx, int64_t *bytes)
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
struct fgpu_entry *fgpu_find_locked(int kind, uint64_t key)
{
	for (struct fgpu_entry *e = fgpu_table[fgpu_bucket_of(kind, key)]; e; e = e->next)
		if (e->kind == kind && e->key == key)
			return e;
	return NULL;
}

/* Unlinks and frees e. Caller holds fgpu_table_lock. */
void fgpu_drop_locked(struct fgpu_entry *e)
{
	for (struct fgpu_entry **pp = &fgpu_table[fgpu_bucket_of(e->kind, e->key)]; *pp;
	     pp = &(*pp)->next)
		if (*pp == e) {
			*pp = e->next;
			free(e);
			return;
		}
}

void fgpu_track_reset_child(void)
{
	/* Entries are leaked on purpose: another parent thread may have been
	 * half way through the list when fork() copied it. */
	memset(fgpu_table, 0, sizeof(fgpu_table));
	pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
	fgpu_table_lock = fresh;
}


/* ---- lookup: cuGetProcAddress and dlsym ------------------------------------- */

/* What the driver's own lookup answers for each hooked variant, asked once
 * with the variant's base name at the version it took that name (and the
 * per-thread-stream flag for the _ptsz ones). A driver may hand out
 * pointers that are none of its exported functions; these answers still
 * say which variant such a pointer is. A pointer two variants share is
 * dropped: it cannot say which signature its caller expects. */
static void *fgpu_driver_answers[FGPU_NHOOKS];
static pthread_once_t fgpu_driver_asked = PTHREAD_ONCE_INIT;

static void fgpu_ask_driver(void)
{
	for (size_t i = 0; i < FGPU_NHOOKS; i++) {
		const struct fgpu_hook *h = &fgpu_hooks[i];
		if (h->nvml)
			continue;
		cuuint64_t flags = h->ptsz ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
					   : CU_GET_PROC_ADDRESS_LEGACY_STREAM;
		void *p = NULL;
		CUresult rc = real.cuGetProcAddress
				      ? real.cuGetProcAddress(h->base, &p, h->since, flags)
				      : REAL(cuGetProcAddress_v2, h->base, &p, h->since, flags, NULL);
		if (rc == CUDA_SUCCESS)
			fgpu_driver_answers[i] = p;
	}
	for (size_t i = 0; i < FGPU_NHOOKS; i++) {
		bool shared = false;
		for (size_t j = i + 1; j < FGPU_NHOOKS; j++)
			if (fgpu_driver_answers[i] && fgpu_driver_answers[j] == fgpu_driver_answers[i]) {
				fgpu_driver_answers[j] = NULL;
				shared = true;
			}
		if (shared)
			fgpu_driver_answers[i] = NULL;
	}
}

static const struct fgpu_hook *fgpu_hook_of_driver_pointer(void *p)
{
	for (size_t i = 0; i < FGPU_NHOOKS; i++)
		if (!fgpu_hooks[i].nvml && *fgpu_hooks[i].real == p)
			return &fgpu_hooks[i];
	Dl_info info;
	if (dladdr(p, &info) && info.dli_sname && info.dli_saddr == p) {
		/* An exported function: its name says what it is. One the shim
		 * does not hook (a newer variant of a hooked name) stays, and so
		 * does one from elsewhere than the driver the hooks call. */
		const struct fgpu_hook *h = fgpu_hook_find(info.dli_sname);
		return h && !h->nvml && !*h->real ? h : NULL;
	}
	pthread_once(&fgpu_driver_asked, fgpu_ask_driver);
	for (size_t i = 0; i < FGPU_NHOOKS; i++)
		if (fgpu_driver_answers[i] == p)
			return &fgpu_hooks[i];
	return NULL;
}

/* Replaces an entry point the driver's lookup handed out by its hook,
 * when it is a hooked variant. What the caller asked for (a base name and
 * a version) is not used to choose: the same base name has meant entry
 * points with other signatures from some CUDA version on (cuCtxCreate
 * from 11.4 and 12.5, cuGraphInstantiate from 12.0), so only the pointer
 * itself says which signature its caller will call it with. A pointer
 * that cannot be told apart is left alone: unhooked rather than called
 * with the wrong arguments. */
static void fgpu_substitute(void **pfn)
{
	if (!pfn || !*pfn)
		return;
	const struct fgpu_hook *h = fgpu_hook_of_driver_pointer(*pfn);
	if (!h)
		return;
	if (!*h->real)   /* the driver does not export it: call what it handed out */
		__atomic_store_n(h->real, *pfn, __ATOMIC_RELEASE);
	*pfn = h->hook;
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
	CUDA_INIT();
	CUresult rc = REAL(cuGetProcAddress, symbol, pfn, version, flags);
	if (rc == CUDA_SUCCESS && symbol)
		fgpu_substitute(pfn);
	return rc;
}

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
			     CUdriverProcAddressQueryResult *status)
{
	CUDA_INIT();
	CUresult rc = REAL(cuGetProcAddress_v2, symbol, pfn, version, flags, status);
	if (rc == CUDA_SUCCESS && symbol)
		fgpu_substitute(pfn);
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
