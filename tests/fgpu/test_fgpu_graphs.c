/* Memory that CUDA graphs allocate, through the preloaded shim over the
 * mock driver: allocation nodes take nothing until the executable graph
 * is first launched or uploaded; then the graph allocator's reserve is
 * charged, and it must fit the share before the launch runs. The session
 * has one device with a 1 GiB share. */
#include <stdbool.h>

#include "fgpu/fgpu_test.h"
#include "testlib.h"

static const char *dir;
static CUstream s;

static long long graph_attr(CUgraphMem_attribute a)
{
	cuuint64_t v = 0;
	if (cuDeviceGetGraphMemAttribute(0, a, &v) != CUDA_SUCCESS)
		return -1;
	return (long long)v;
}

/* A captured graph that allocates bytes and, when freed, frees them;
 * *out (when given) gets the allocation's address. */
static CUgraph captured_graph(long long bytes, bool freed, CUdeviceptr *out)
{
	CUgraph g = NULL;
	CUdeviceptr p = 0;
	if (cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL) != CUDA_SUCCESS ||
	    cuMemAllocAsync(&p, (size_t)bytes, s) != CUDA_SUCCESS ||
	    (freed && cuMemFreeAsync(p, s) != CUDA_SUCCESS) ||
	    cuStreamEndCapture(s, &g) != CUDA_SUCCESS)
		return NULL;
	if (out)
		*out = p;
	return g;
}

static CUgraphExec instantiate(CUgraph g)
{
	CUgraphExec e = NULL;
	if (!g || cuGraphInstantiateWithFlags(&e, g, 0) != CUDA_SUCCESS)
		return NULL;
	return e;
}

/* Gives the graph allocator's unused memory back; afterwards nothing of
 * it is charged. */
static void trim(void)
{
	CHECK_INT(cuStreamSynchronize(s), CUDA_SUCCESS);
	CHECK_INT(cuDeviceGraphMemTrim(0), CUDA_SUCCESS);
}

TEST(capture_takes_nothing_until_the_graph_runs)
{
	long long base = ft_used(), mock_base = tesseraMockUsedBytes(0);
	CUgraph g = captured_graph(300 * MiB, true, NULL);
	CHECK(g != NULL);
	CHECK_INT(ft_used(), base);
	CUgraphExec e = instantiate(g);
	CHECK(e != NULL);
	CHECK_INT(ft_used(), base);
	CHECK_INT(tesseraMockUsedBytes(0), mock_base);

	CHECK_INT(cuGraphLaunch(e, s), CUDA_SUCCESS);
	CHECK_INT(graph_attr(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), 300 * MiB);
	CHECK_INT(ft_used(), base + 300 * MiB);
	CHECK_INT(tesseraMockUsedBytes(0), mock_base + 300 * MiB);
	/* launched again, it reuses its memory */
	CHECK_INT(cuGraphLaunch(e, s), CUDA_SUCCESS);
	CHECK_INT(cuStreamSynchronize(s), CUDA_SUCCESS);
	CHECK_INT(ft_used(), base + 300 * MiB);

	/* destroyed, its memory stays with the graph allocator until trimmed */
	CHECK_INT(cuGraphExecDestroy(e), CUDA_SUCCESS);
	CHECK_INT(ft_used(), base + 300 * MiB);
	trim();
	CHECK_INT(ft_used(), base);
	CHECK_INT(tesseraMockUsedBytes(0), mock_base);
	CHECK_INT(cuGraphDestroy(g), CUDA_SUCCESS);
}

TEST(graph_memory_must_fit_the_share)
{
	long long base = ft_used(), mock_base = tesseraMockUsedBytes(0);
	CUgraph big = captured_graph(1200 * MiB, true, NULL);
	CUgraphExec eb = instantiate(big);
	CHECK(eb != NULL);
	/* more than the share: refused, nothing runs, nothing is taken */
	CHECK_INT(cuGraphLaunch(eb, s), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_INT(cuGraphUpload(eb, s), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_INT(ft_used(), base);
	CHECK_INT(tesseraMockUsedBytes(0), mock_base);
	CHECK_INT(graph_attr(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), 0);

	/* other allocations hold part of the share */
	CUdeviceptr d = 0;
	CHECK_INT(cuMemAlloc_v2(&d, 700 * MiB), CUDA_SUCCESS);
	/* (an allocation the graph leaves live: trimming cannot take it) */
	CUdeviceptr live = 0;
	CUgraph g = captured_graph(400 * MiB, false, &live);
	CUgraphExec e = instantiate(g);
	CHECK(e != NULL);
	CHECK_INT(cuGraphLaunch(e, s), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_INT(ft_used(), base + 700 * MiB);
	CHECK_INT(cuMemFree_v2(d), CUDA_SUCCESS);
	CHECK_INT(cuGraphLaunch(e, s), CUDA_SUCCESS);
	CHECK_INT(ft_used(), base + 400 * MiB);

	/* and graph memory holds it from the others */
	CHECK_INT(cuMemAlloc_v2(&d, 700 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_INT(ft_used(), base + 400 * MiB);
	CHECK_INT(cuStreamSynchronize(s), CUDA_SUCCESS);
	CHECK_INT(cuMemFreeAsync(live, s), CUDA_SUCCESS);
	CHECK_INT(cuGraphExecDestroy(e), CUDA_SUCCESS);
	CHECK_INT(cuGraphExecDestroy(eb), CUDA_SUCCESS);
	trim();
	CHECK_INT(ft_used(), base);
	CHECK_INT(tesseraMockUsedBytes(0), mock_base);
	cuGraphDestroy(g);
	cuGraphDestroy(big);
}

TEST(idle_reserves_make_room)
{
	long long base = ft_used(), mock_base = tesseraMockUsedBytes(0);
	/* a pool keeping 600 MiB it does not use ... */
	CUmemoryPool pool;
	cuuint64_t keep_all = (cuuint64_t)-1, keep_none = 0;
	CHECK_INT(cuDeviceGetMemPool(&pool, 0), CUDA_SUCCESS);
	CHECK_INT(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep_all),
		  CUDA_SUCCESS);
	CUdeviceptr p = 0;
	CHECK_INT(cuMemAllocAsync(&p, 600 * MiB, s), CUDA_SUCCESS);
	CHECK_INT(cuMemFreeAsync(p, s), CUDA_SUCCESS);
	CHECK_INT(cuStreamSynchronize(s), CUDA_SUCCESS);
	CHECK_INT(ft_used(), base + 600 * MiB);

	/* ... gives it back for a graph's first launch */
	CUgraph g = captured_graph(600 * MiB, true, NULL);
	CUgraphExec e = instantiate(g);
	CHECK(e != NULL);
	CHECK_INT(cuGraphLaunch(e, s), CUDA_SUCCESS);
	CHECK_INT(ft_used(), base + 600 * MiB);
	CHECK_INT(tesseraMockUsedBytes(0), mock_base + 600 * MiB);

	/* the graph allocator's idle reserve gives way to a plain allocation */
	CHECK_INT(cuStreamSynchronize(s), CUDA_SUCCESS);
	CHECK_INT(cuGraphExecDestroy(e), CUDA_SUCCESS);
	CHECK_INT(ft_used(), base + 600 * MiB);
	CUdeviceptr d = 0;
	CHECK_INT(cuMemAlloc_v2(&d, 800 * MiB), CUDA_SUCCESS);
	CHECK_INT(ft_used(), base + 800 * MiB);
	CHECK_INT(graph_attr(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), 0);
	CHECK_INT(cuMemFree_v2(d), CUDA_SUCCESS);
	CHECK_INT(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep_none),
		  CUDA_SUCCESS);
	CHECK_INT(cuStreamSynchronize(s), CUDA_SUCCESS);
	CHECK_INT(ft_used(), base);
	CHECK_INT(tesseraMockUsedBytes(0), mock_base);
	cuGraphDestroy(g);
}

TEST(built_graphs_and_child_graphs_count)
{
	long long base = ft_used(), mock_base = tesseraMockUsedBytes(0);
	CUDA_MEM_ALLOC_NODE_PARAMS a;
	memset(&a, 0, sizeof(a));
	a.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
	a.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	a.poolProps.location.id = 0;
	a.bytesize = 200 * MiB;
	CUgraph g, child;
	CUgraphNode n1, n2, n3;
	CHECK_INT(cuGraphCreate(&g, 0), CUDA_SUCCESS);
	CHECK_INT(cuGraphAddMemAllocNode(&n1, g, NULL, 0, &a), CUDA_SUCCESS);
	CUdeviceptr outer = a.dptr;
	CHECK_INT(cuGraphCreate(&child, 0), CUDA_SUCCESS);
	a.bytesize = 100 * MiB;
	CHECK_INT(cuGraphAddMemAllocNode(&n2, child, NULL, 0, &a), CUDA_SUCCESS);
	CUdeviceptr inner = a.dptr;
	CHECK_INT(cuGraphAddMemFreeNode(&n3, child, &n2, 1, inner), CUDA_SUCCESS);
	CHECK_INT(cuGraphAddChildGraphNode(&n3, g, &n1, 1, child), CUDA_SUCCESS);

	/* CUDA 12 runtimes ask for "cuGraphInstantiate" at version 12000 and
	 * call it with flags: they must get the flags form's hook */
	void *fn = NULL;
	CHECK_INT(cuGetProcAddress("cuGraphInstantiate", &fn, 12000, 0), CUDA_SUCCESS);
	CHECK(fn == (void *)cuGraphInstantiateWithFlags);
	CHECK_INT(cuGetProcAddress("cuGraphInstantiate", &fn, 11000, 0), CUDA_SUCCESS);
	CHECK(fn == (void *)cuGraphInstantiate_v2);

	/* the pre-12 form, with an error node and a log */
	CUgraphExec e = NULL;
	CUgraphNode err = NULL;
	char log[64];
	CHECK_INT(cuGraphInstantiate_v2(&e, g, &err, log, sizeof(log)), CUDA_SUCCESS);
	CHECK_INT(ft_used(), base);
	CHECK_INT(cuGraphLaunch(e, s), CUDA_SUCCESS);
	CHECK_INT(ft_used(), base + 300 * MiB);
	CHECK_INT(tesseraMockUsedBytes(0), mock_base + 300 * MiB);
	/* its outer allocation outlives the launch, until freed */
	CHECK_INT(cuStreamSynchronize(s), CUDA_SUCCESS);
	CHECK_INT(cuMemFreeAsync(outer, s), CUDA_SUCCESS);
	CHECK_INT(cuGraphExecDestroy(e), CUDA_SUCCESS);
	trim();
	CHECK_INT(ft_used(), base);

	/* more than the share through the child: refused at launch */
	CUgraph big;
	CHECK_INT(cuGraphCreate(&big, 0), CUDA_SUCCESS);
	CHECK_INT(cuGraphAddChildGraphNode(&n1, big, NULL, 0, g), CUDA_SUCCESS);
	a.bytesize = 800 * MiB;
	CHECK_INT(cuGraphAddMemAllocNode(&n2, big, &n1, 1, &a), CUDA_SUCCESS);
	CHECK_INT(cuGraphAddMemFreeNode(&n3, big, &n2, 1, a.dptr), CUDA_SUCCESS);
	CUgraphExec eb = NULL;
	CHECK_INT(cuGraphInstantiate(&eb, big, NULL, NULL, 0), CUDA_SUCCESS);
	CHECK_INT(cuGraphLaunch(eb, s), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_INT(ft_used(), base);
	CHECK_INT(tesseraMockUsedBytes(0), mock_base);
	CHECK_INT(cuGraphExecDestroy(eb), CUDA_SUCCESS);
	cuGraphDestroy(big);
	cuGraphDestroy(child);
	cuGraphDestroy(g);
}

TEST(upload_at_instantiation_must_fit_first)
{
	long long base = ft_used(), mock_base = tesseraMockUsedBytes(0);
	/* (an allocation the graph leaves live: trimming cannot take it) */
	CUdeviceptr live = 0;
	CUgraph g = captured_graph(500 * MiB, false, &live);
	CUDA_GRAPH_INSTANTIATE_PARAMS ip = { .flags = CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD,
					     .hUploadStream = s };
	CUgraphExec e = NULL;
	CHECK_INT(cuGraphInstantiateWithParams(&e, g, &ip), CUDA_SUCCESS);
	CHECK_INT(ip.result_out, CUDA_GRAPH_INSTANTIATE_SUCCESS);
	CHECK_INT(ft_used(), base + 500 * MiB);
	/* launched, its allocation is live: no trimming can take it */
	CHECK_INT(cuGraphLaunch(e, s), CUDA_SUCCESS);
	CHECK_INT(cuStreamSynchronize(s), CUDA_SUCCESS);
	CHECK_INT(ft_used(), base + 500 * MiB);

	/* a second one does not fit next to it */
	CUgraph g2 = captured_graph(600 * MiB, true, NULL);
	CUgraphExec e2 = NULL;
	ip.result_out = -1;
	CHECK_INT(cuGraphInstantiateWithParams(&e2, g2, &ip), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_INT(ip.result_out, CUDA_GRAPH_INSTANTIATE_ERROR);
	CHECK_INT(ft_used(), base + 500 * MiB);
	CHECK_INT(tesseraMockUsedBytes(0), mock_base + 500 * MiB);

	/* once the first is gone it does */
	CHECK_INT(cuMemFreeAsync(live, s), CUDA_SUCCESS);
	CHECK_INT(cuStreamSynchronize(s), CUDA_SUCCESS);
	CHECK_INT(cuGraphExecDestroy(e), CUDA_SUCCESS);
	CHECK_INT(cuGraphInstantiateWithParams(&e2, g2, &ip), CUDA_SUCCESS);
	CHECK_INT(cuGraphLaunch(e2, s), CUDA_SUCCESS);
	CHECK_INT(ft_used(), base + 600 * MiB);
	CHECK_INT(cuStreamSynchronize(s), CUDA_SUCCESS);
	CHECK_INT(cuGraphExecDestroy(e2), CUDA_SUCCESS);
	trim();
	CHECK_INT(ft_used(), base);
	CHECK_INT(tesseraMockUsedBytes(0), mock_base);
	cuGraphDestroy(g);
	cuGraphDestroy(g2);
}

int main(void)
{
	setenv("TESSERA_MOCK_GPUS", "1x8GiB", 1);
	if (cuInit(0) != CUDA_SUCCESS) {
		fprintf(stderr, "mock driver did not initialize\n");
		return 1;
	}
	char uuid0[64], conf[256];
	ft_uuid(0, uuid0, sizeof(uuid0));
	snprintf(conf, sizeof(conf),
		 "version = 1\ndevices = 1\ndevice.0.uuid = %s\ndevice.0.memory_limit = 1GiB\n",
		 uuid0);
	dir = ft_setup(conf);
	CUcontext ctx;
	if (cuDevicePrimaryCtxRetain(&ctx, 0) != CUDA_SUCCESS || cuCtxSetCurrent(ctx) != CUDA_SUCCESS ||
	    cuStreamCreate(&s, 0) != CUDA_SUCCESS) {
		fprintf(stderr, "no context\n");
		return 1;
	}
	RUN(capture_takes_nothing_until_the_graph_runs);
	RUN(graph_memory_must_fit_the_share);
	RUN(idle_reserves_make_room);
	RUN(built_graphs_and_child_graphs_count);
	RUN(upload_at_instantiation_must_fit_first);
	ft_cleanup(dir);
	return testlib_done();
}
