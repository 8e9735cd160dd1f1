/* CUDA graph memory (docs/fgpu.md, "Graph memory"): what memory nodes of
 * CUDA graphs allocate.
 *
 * A graph's allocation nodes (cuGraphAddMemAllocNode, or cuMemAllocAsync
 * while a stream is captured) take nothing when they are created. The
 * driver's graph allocator maps physical memory to an executable graph
 * when it is first launched or uploaded, keeps that memory reserved for
 * graphs afterwards, and gives it back only through cuDeviceGraphMemTrim.
 * So, as with memory pools:
 *
 *   - each device is charged what the graph allocator has reserved on it
 *     (CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), re-read after anything
 *     that can change it ("settling");
 *   - at instantiation the shim adds up the sizes of the graph's
 *     allocation nodes (child graphs included), per device;
 *   - before an executable graph's first launch or upload, what it needs
 *     beyond the allocator's unmapped reserve must fit the share, else the
 *     launch is refused with CUDA_ERROR_OUT_OF_MEMORY and nothing runs.
 *     Later launches reuse the graph's mapping and need nothing new.
 *
 * The driver decides how it maps and reuses graph memory, so the check
 * before a launch is an estimate; the charge after it is the driver's own
 * figure. Executable graphs without allocation nodes are not recorded;
 * while none with them exists, a launch costs one atomic load more, and
 * otherwise a lock and a walk of the (short) list of those that do. */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fgpu/shim.h"

/* Child graphs nest; a deeper graph than this is not looked into. */
#define FGPU_GRAPH_MAX_DEPTH 16

/* An executable graph with allocation nodes. */
struct fgpu_gexec {
	struct fgpu_gexec *next;
	CUgraphExec h;
	int64_t bytes[FGPU_MAX_DEVICES];  /* by region index */
	CUdevice ord[FGPU_MAX_DEVICES];   /* CUDA ordinal of each region index */
	bool foreign;    /* allocates on a device the session was not given */
	bool mapped;     /* launched or uploaded since its memory was given back */
};

/* What the graph allocator holds on each device the shim has seen used. */
struct fgpu_gmem {
	bool known;
	CUdevice ord;
	int64_t charged;  /* bytes charged to the region for graph memory */
};

static struct fgpu_gexec *fgpu_gexecs;
static struct fgpu_gmem fgpu_gmem[FGPU_MAX_DEVICES];
static pthread_mutex_t fgpu_graph_lock = PTHREAD_MUTEX_INITIALIZER;
/* Some executable graph has allocation nodes, or some device has graph
 * memory charged: launches and synchronizations must look (read without
 * the lock; written under it). */
static bool fgpu_graph_mem;

void fgpu_graph_reset_child(void)
{
	/* The executable graphs and their memory belong to the parent. */
	struct fgpu_gexec *e = fgpu_gexecs;
	while (e) {
		struct fgpu_gexec *next = e->next;
		free(e);
		e = next;
	}
	fgpu_gexecs = NULL;
	memset(fgpu_gmem, 0, sizeof(fgpu_gmem));
	pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
	fgpu_graph_lock = fresh;
	fgpu_graph_mem = false;
}

/* ---- what a graph allocates ----------------------------------------------- */

/* Adds the sizes of g's allocation nodes (child graphs included) to e.
 * A driver without the node queries has no allocation nodes either. */
static void fgpu_graph_sum(CUgraph g, struct fgpu_gexec *e, int depth)
{
	size_t n = 0;
	if (!g || depth > FGPU_GRAPH_MAX_DEPTH || REAL(cuGraphGetNodes, g, NULL, &n) != CUDA_SUCCESS ||
	    n == 0)
		return;
	CUgraphNode *nodes = calloc(n, sizeof(*nodes));
	if (!nodes) {
		e->foreign = true;   /* cannot tell: refuse rather than let it pass */
		return;
	}
	if (REAL(cuGraphGetNodes, g, nodes, &n) != CUDA_SUCCESS)
		n = 0;
	for (size_t i = 0; i < n; i++) {
		CUgraphNodeType type;
		if (!nodes[i] || REAL(cuGraphNodeGetType, nodes[i], &type) != CUDA_SUCCESS)
			continue;
		if (type == CU_GRAPH_NODE_TYPE_GRAPH) {
			CUgraph child = NULL;
			if (REAL(cuGraphChildGraphNodeGetGraph, nodes[i], &child) == CUDA_SUCCESS)
				fgpu_graph_sum(child, e, depth + 1);
			continue;
		}
		if (type != CU_GRAPH_NODE_TYPE_MEM_ALLOC)
			continue;
		CUDA_MEM_ALLOC_NODE_PARAMS p;
		memset(&p, 0, sizeof(p));
		if (REAL(cuGraphMemAllocNodeGetParams, nodes[i], &p) != CUDA_SUCCESS)
			continue;
		CUdevice ord = p.poolProps.location.id;
		int idx = p.poolProps.location.type == CU_MEM_LOCATION_TYPE_DEVICE
				  ? fgpu_cuda_index(ord) : -1;
		if (idx < 0 || p.bytesize > (size_t)INT64_MAX ||
		    e->bytes[idx] > INT64_MAX - (int64_t)p.bytesize) {
			e->foreign = true;
			continue;
		}
		e->bytes[idx] += (int64_t)p.bytesize;
		e->ord[idx] = ord;
	}
	free(nodes);
}

/* ---- the graph allocator's charge ------------------------------------------ */

/* Bytes of graph memory attribute attr on ord, or -1. */
static int64_t fgpu_graph_attr(CUdevice ord, CUgraphMem_attribute attr)
{
	cuuint64_t v = 0;
	if (REAL(cuDeviceGetGraphMemAttribute, ord, attr, &v) != CUDA_SUCCESS ||
	    v > (cuuint64_t)INT64_MAX)
		return -1;
	return (int64_t)v;
}

static void fgpu_graph_note_locked(void)
{
	bool any = fgpu_gexecs != NULL;
	for (int i = 0; i < FGPU_MAX_DEVICES && !any; i++)
		any = fgpu_gmem[i].charged > 0;
	__atomic_store_n(&fgpu_graph_mem, any, __ATOMIC_RELEASE);
}

/* Brings region index idx's graph charge to what the driver has reserved
 * there. Truthful, not limited: the memory is held whether or not it
 * fits. Caller holds fgpu_graph_lock. */
static void fgpu_graph_settle_locked(int idx)
{
	struct fgpu_gmem *m = &fgpu_gmem[idx];
	if (!m->known || !fgpu_region.r)
		return;
	int64_t reserved = fgpu_graph_attr(m->ord, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT);
	if (reserved < 0)
		return;   /* cannot tell: keep what was charged */
	if (reserved > m->charged)
		fgpu_region_reserve(&fgpu_region, idx, reserved - m->charged, FGPU_UNLIMITED);
	else if (reserved < m->charged)
		fgpu_unreserve(idx, m->charged - reserved);
	m->charged = reserved;
}

static void fgpu_graph_learn_locked(int idx, CUdevice ord)
{
	if (!fgpu_gmem[idx].known) {
		fgpu_gmem[idx] = (struct fgpu_gmem){ .known = true, .ord = ord };
		fgpu_graph_settle_locked(idx);
	}
}

/* At synchronization points and before usage is reported. */
void fgpu_graphs_settle(void)
{
	if (!fgpu_accounting() || !__atomic_load_n(&fgpu_graph_mem, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&fgpu_graph_lock);
	for (int i = 0; i < FGPU_MAX_DEVICES; i++)
		fgpu_graph_settle_locked(i);
	fgpu_graph_note_locked();
	pthread_mutex_unlock(&fgpu_graph_lock);
}

/* After the graph allocator on idx was trimmed: the driver also unmaps
 * the memory of executable graphs that are not running, so those count
 * as unmapped again, and the charge is re-read. */
static void fgpu_graph_trimmed_locked(int idx)
{
	for (struct fgpu_gexec *e = fgpu_gexecs; e; e = e->next)
		if (e->bytes[idx] > 0)
			e->mapped = false;
	fgpu_graph_settle_locked(idx);
	fgpu_graph_note_locked();
}

/* Gives the graph allocator's unused reserve on region index idx back to
 * the device (part of fgpu_reclaim_idle). */
void fgpu_graphs_trim_idle(int idx)
{
	if (idx < 0 || idx >= FGPU_MAX_DEVICES || !__atomic_load_n(&fgpu_graph_mem, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&fgpu_graph_lock);
	struct fgpu_gmem *m = &fgpu_gmem[idx];
	if (m->known && m->charged > 0 && REAL(cuDeviceGraphMemTrim, m->ord) == CUDA_SUCCESS)
		fgpu_graph_trimmed_locked(idx);
	pthread_mutex_unlock(&fgpu_graph_lock);
}

/* ---- mapping an executable graph's memory ----------------------------------- */

static struct fgpu_gexec *fgpu_gexec_find_locked(CUgraphExec h)
{
	for (struct fgpu_gexec *e = fgpu_gexecs; e; e = e->next)
		if (e->h == h)
			return e;
	return NULL;
}

static void fgpu_gexec_drop_locked(CUgraphExec h)
{
	for (struct fgpu_gexec **pp = &fgpu_gexecs; *pp; pp = &(*pp)->next)
		if ((*pp)->h == h) {
			struct fgpu_gexec *e = *pp;
			*pp = e->next;
			free(e);
			return;
		}
}

/* What an executable graph needs mapped, copied out of its record (which
 * may go away while the lock is let go). */
struct fgpu_gneed {
	int64_t bytes[FGPU_MAX_DEVICES];
	CUdevice ord[FGPU_MAX_DEVICES];
	bool foreign;
};

static void fgpu_gneed_of(const struct fgpu_gexec *e, struct fgpu_gneed *n)
{
	memcpy(n->bytes, e->bytes, sizeof(n->bytes));
	memcpy(n->ord, e->ord, sizeof(n->ord));
	n->foreign = e->foreign;
}

static void fgpu_graph_uncharge_locked(const int64_t grown[])
{
	for (int idx = 0; idx < FGPU_MAX_DEVICES; idx++)
		if (grown[idx] > 0) {
			fgpu_gmem[idx].charged -= grown[idx];
			fgpu_unreserve(idx, grown[idx]);
		}
}

/* Charges, device by device, what the need is beyond the graph
 * allocator's unmapped reserve; grown[] gets what was charged. Refuses
 * (charging nothing) when it does not fit even after this process's idle
 * pool and graph reserves are given back. Caller holds fgpu_graph_lock;
 * it is let go while reserves are given back. */
static CUresult fgpu_graph_admit_locked(const struct fgpu_gneed *n, int64_t grown[])
{
	memset(grown, 0, sizeof(int64_t) * FGPU_MAX_DEVICES);
	if (n->foreign || !fgpu_region.r)
		return CUDA_ERROR_OUT_OF_MEMORY;
	for (int idx = 0; idx < FGPU_MAX_DEVICES; idx++) {
		if (n->bytes[idx] == 0)
			continue;
		if (fgpu_charge_context(idx) != CUDA_SUCCESS)
			goto refuse;
		for (int attempt = 0;; attempt++) {
			fgpu_graph_learn_locked(idx, n->ord[idx]);
			fgpu_graph_settle_locked(idx);
			int64_t reserved = fgpu_gmem[idx].charged;
			int64_t used = fgpu_graph_attr(n->ord[idx], CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT);
			int64_t spare = used >= 0 && used < reserved ? reserved - used : 0;
			int64_t need = n->bytes[idx] > spare ? n->bytes[idx] - spare : 0;
			if (need == 0 ||
			    fgpu_region_reserve(&fgpu_region, idx, need, fgpu_limit(idx)) == 0) {
				fgpu_gmem[idx].charged += need;
				grown[idx] = need;
				break;
			}
			if (attempt > 0)
				goto refuse;
			/* Idle reserves first (the pool lock comes before the
			 * graph lock, so this one is let go meanwhile). */
			pthread_mutex_unlock(&fgpu_graph_lock);
			fgpu_reclaim_idle(idx);
			pthread_mutex_lock(&fgpu_graph_lock);
		}
	}
	return CUDA_SUCCESS;
refuse:
	fgpu_graph_uncharge_locked(grown);
	return CUDA_ERROR_OUT_OF_MEMORY;
}

/* After the call that maps the need's memory returned rc: the charge
 * becomes the driver's figure. */
static void fgpu_graph_mapped_locked(const struct fgpu_gneed *n, const int64_t grown[],
				     CUresult rc)
{
	if (rc != CUDA_SUCCESS)
		fgpu_graph_uncharge_locked(grown);
	for (int idx = 0; idx < FGPU_MAX_DEVICES; idx++)
		if (n->bytes[idx] > 0)
			fgpu_graph_settle_locked(idx);
	fgpu_graph_note_locked();
}

enum fgpu_graph_call { GRAPH_LAUNCH, GRAPH_LAUNCH_PTSZ, GRAPH_UPLOAD, GRAPH_UPLOAD_PTSZ };

static CUresult fgpu_graph_call(enum fgpu_graph_call how, CUgraphExec h, CUstream s)
{
	switch (how) {
	case GRAPH_LAUNCH: return REAL(cuGraphLaunch, h, s);
	case GRAPH_LAUNCH_PTSZ: return REAL(cuGraphLaunch_ptsz, h, s);
	case GRAPH_UPLOAD: return REAL(cuGraphUpload, h, s);
	default: return REAL(cuGraphUpload_ptsz, h, s);
	}
}

/* Launches or uploads h, first making sure its memory fits. */
static CUresult fgpu_graph_run(enum fgpu_graph_call how, CUgraphExec h, CUstream s)
{
	if (!fgpu_accounting() || !__atomic_load_n(&fgpu_graph_mem, __ATOMIC_ACQUIRE))
		return fgpu_graph_call(how, h, s);
	pthread_mutex_lock(&fgpu_graph_lock);
	struct fgpu_gexec *e = fgpu_gexec_find_locked(h);
	if (!e || e->mapped) {
		pthread_mutex_unlock(&fgpu_graph_lock);
		return fgpu_graph_call(how, h, s);
	}
	struct fgpu_gneed n;
	int64_t grown[FGPU_MAX_DEVICES];
	fgpu_gneed_of(e, &n);
	CUresult rc = fgpu_graph_admit_locked(&n, grown);
	if (rc == CUDA_SUCCESS) {
		rc = fgpu_graph_call(how, h, s);
		fgpu_graph_mapped_locked(&n, grown, rc);
		/* e may have been destroyed while the lock was let go */
		if (rc == CUDA_SUCCESS && (e = fgpu_gexec_find_locked(h)) != NULL)
			e->mapped = true;
	}
	pthread_mutex_unlock(&fgpu_graph_lock);
	return rc;
}

CUresult fgpu_graph_launch(CUgraphExec h, CUstream s, bool ptsz)
{
	return fgpu_graph_run(ptsz ? GRAPH_LAUNCH_PTSZ : GRAPH_LAUNCH, h, s);
}

CUresult cuGraphUpload(CUgraphExec h, CUstream s)
{
	CUDA_INIT();
	return fgpu_graph_run(GRAPH_UPLOAD, h, s);
}

CUresult cuGraphUpload_ptsz(CUgraphExec h, CUstream s)
{
	CUDA_INIT();
	return fgpu_graph_run(GRAPH_UPLOAD_PTSZ, h, s);
}

/* ---- instantiation ----------------------------------------------------------- */

/* A graph about to be instantiated: what it allocates, or NULL when
 * nothing (or when nothing is accounted). *fail is set when that cannot
 * be worked out. */
static struct fgpu_gexec *fgpu_graph_prepare(CUgraph g, bool *fail)
{
	*fail = false;
	if (!fgpu_accounting() || !g || !real.cuGraphGetNodes)
		return NULL;
	struct fgpu_gexec *e = calloc(1, sizeof(*e));
	if (!e) {
		*fail = true;
		return NULL;
	}
	fgpu_graph_sum(g, e, 0);
	bool any = e->foreign;
	for (int i = 0; i < FGPU_MAX_DEVICES && !any; i++)
		any = e->bytes[i] > 0;
	if (!any) {
		free(e);
		return NULL;
	}
	return e;
}

/* Records e as executable graph h (rc: how its instantiation went). */
static void fgpu_graph_record(struct fgpu_gexec *e, CUresult rc, CUgraphExec h)
{
	if (!e)
		return;
	if (rc != CUDA_SUCCESS) {
		free(e);
		return;
	}
	e->h = h;
	pthread_mutex_lock(&fgpu_graph_lock);
	/* A record for the same handle is of a graph destroyed unseen (before
	 * the shim was loaded, or through a path it does not hook). */
	fgpu_gexec_drop_locked(h);
	e->next = fgpu_gexecs;
	fgpu_gexecs = e;
	fgpu_graph_note_locked();
	pthread_mutex_unlock(&fgpu_graph_lock);
}

/* What an instantiation returns, an expression the hook returns (a macro
 * so that call runs between the steps): out of memory, without calling
 * the driver, when the graph's memory cannot fit. */
#define FGPU_INSTANTIATE(pexec, graph, call) ({ \
	bool fail_; \
	struct fgpu_gexec *e_ = fgpu_graph_prepare((graph), &fail_); \
	CUresult rc_ = CUDA_ERROR_OUT_OF_MEMORY; \
	if (!fail_) { \
		rc_ = (call); \
		fgpu_graph_record(e_, rc_, rc_ == CUDA_SUCCESS && (pexec) ? *(pexec) : NULL); \
	} \
	rc_; \
})

CUresult cuGraphInstantiate(CUgraphExec *exec, CUgraph g, CUgraphNode *err_node, char *log,
			    size_t log_size)
{
	CUDA_INIT();
	return FGPU_INSTANTIATE(exec, g, REAL(cuGraphInstantiate, exec, g, err_node, log, log_size));
}

CUresult cuGraphInstantiate_v2(CUgraphExec *exec, CUgraph g, CUgraphNode *err_node, char *log,
			       size_t log_size)
{
	CUDA_INIT();
	return FGPU_INSTANTIATE(exec, g, REAL(cuGraphInstantiate_v2, exec, g, err_node, log, log_size));
}

CUresult cuGraphInstantiateWithFlags(CUgraphExec *exec, CUgraph g, unsigned long long flags)
{
	CUDA_INIT();
	return FGPU_INSTANTIATE(exec, g, REAL(cuGraphInstantiateWithFlags, exec, g, flags));
}

/* With CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD the graph's memory is mapped
 * during instantiation, so it must fit before. */
static CUresult fgpu_graph_instantiate_params(bool ptsz, CUgraphExec *exec, CUgraph g,
					      CUDA_GRAPH_INSTANTIATE_PARAMS *params)
{
	CUDA_INIT();
	bool fail;
	struct fgpu_gexec *e = fgpu_graph_prepare(g, &fail);
	if (fail)
		return CUDA_ERROR_OUT_OF_MEMORY;
	bool upload = e && params && (params->flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD);
	struct fgpu_gneed n;
	int64_t grown[FGPU_MAX_DEVICES];
	if (upload) {
		fgpu_gneed_of(e, &n);
		pthread_mutex_lock(&fgpu_graph_lock);
		if (fgpu_graph_admit_locked(&n, grown) != CUDA_SUCCESS) {
			pthread_mutex_unlock(&fgpu_graph_lock);
			free(e);
			params->result_out = CUDA_GRAPH_INSTANTIATE_ERROR;
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
	}
	CUresult rc = ptsz ? REAL(cuGraphInstantiateWithParams_ptsz, exec, g, params)
			   : REAL(cuGraphInstantiateWithParams, exec, g, params);
	if (upload) {
		fgpu_graph_mapped_locked(&n, grown, rc);
		pthread_mutex_unlock(&fgpu_graph_lock);
		e->mapped = rc == CUDA_SUCCESS;
	}
	fgpu_graph_record(e, rc, rc == CUDA_SUCCESS && exec ? *exec : NULL);
	return rc;
}

CUresult cuGraphInstantiateWithParams(CUgraphExec *exec, CUgraph g,
				      CUDA_GRAPH_INSTANTIATE_PARAMS *params)
{
	return fgpu_graph_instantiate_params(false, exec, g, params);
}

CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *exec, CUgraph g,
					   CUDA_GRAPH_INSTANTIATE_PARAMS *params)
{
	return fgpu_graph_instantiate_params(true, exec, g, params);
}

/* ---- the end of an executable graph, and trimming ------------------------------ */

CUresult cuGraphExecDestroy(CUgraphExec h)
{
	CUDA_INIT();
	CUresult rc = REAL(cuGraphExecDestroy, h);
	if (rc != CUDA_SUCCESS || !fgpu_accounting() ||
	    !__atomic_load_n(&fgpu_graph_mem, __ATOMIC_ACQUIRE))
		return rc;
	pthread_mutex_lock(&fgpu_graph_lock);
	fgpu_gexec_drop_locked(h);
	/* Its memory stays with the graph allocator until trimmed. */
	for (int i = 0; i < FGPU_MAX_DEVICES; i++)
		fgpu_graph_settle_locked(i);
	fgpu_graph_note_locked();
	pthread_mutex_unlock(&fgpu_graph_lock);
	return rc;
}

CUresult cuDeviceGraphMemTrim(CUdevice dev)
{
	CUDA_INIT();
	CUresult rc = REAL(cuDeviceGraphMemTrim, dev);
	int idx = fgpu_cuda_index(dev);
	if (rc != CUDA_SUCCESS || !fgpu_accounting() || idx < 0)
		return rc;
	pthread_mutex_lock(&fgpu_graph_lock);
	fgpu_graph_learn_locked(idx, dev);
	fgpu_graph_trimmed_locked(idx);
	pthread_mutex_unlock(&fgpu_graph_lock);
	return rc;
}
