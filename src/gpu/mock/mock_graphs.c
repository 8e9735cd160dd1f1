/* Mock CUDA driver: stream capture, graphs and their nodes (memory
 * allocation and free nodes, child graphs; kernels are counted, not
 * nodes), graph memory, and executable graphs. See mock_cuda.c for what
 * the mock simulates. */
#include <stdlib.h>
#include <string.h>

#include "gpu/mock/mock_cuda.h"

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

static CUgraphExec mock_execs;                  /* every live executable graph */
static struct mock_glive *mock_glives;
static size_t mock_nglives, mock_cap_glives;
static struct mock_gmem mock_gmem[MOCK_MAX_DEVICES];

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
void mock_graph_free(CUgraph g)
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

CUresult mock_capture_alloc(CUdeviceptr *dptr, size_t bytes, int dev, CUstream s)
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

CUresult mock_capture_free(CUdeviceptr p, CUstream s)
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
bool mock_glive_free(CUdeviceptr p)
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
