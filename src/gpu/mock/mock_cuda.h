/* Internal to the mock libcuda.so.1: what its source files share. Nothing
 * here is exported (the library is built with -fvisibility=hidden); only
 * the entry points, marked MOCK_API, are. What the mock simulates is said
 * at the top of mock_cuda.c.
 *
 *   mock_cuda.c     cuInit, devices, contexts with their limits, green
 *                   contexts, the test hooks
 *                   (tesseraMock*), modules, error strings, and
 *                   cuGetProcAddress with its symbol table and trampolines
 *   mock_memory.c   linear and managed allocations and the table that
 *                   tracks allocations, virtual memory management, arrays,
 *                   cuMemGetInfo
 *   mock_pools.c    stream-ordered allocation, memory pools, and the
 *                   frees of device pointers (cuMemFree*)
 *   mock_streams.c  streams, events and kernel launches on the simulated
 *                   clock
 *   mock_graphs.c   stream capture, graphs and their nodes, graph memory,
 *                   executable graphs */
#ifndef TESSERA_GPU_MOCK_MOCK_CUDA_H
#define TESSERA_GPU_MOCK_MOCK_CUDA_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "gpu/mock/mockspec.h"
#include "gpuabi/cuda_abi.h"

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

/* CUlimit values a context keeps (CU_LIMIT_STACK_SIZE..
 * CU_LIMIT_PERSISTING_L2_CACHE_SIZE). */
#define MOCK_NLIMITS 7

struct CUctx_st {
	unsigned magic;
	int dev;
	int refs;            /* primary: retain count */
	bool primary;
	unsigned sms;        /* a green context's SMs; 0: the whole device */
	int64_t overhead;    /* bytes taken from the device by the context */
	size_t limits[MOCK_NLIMITS];
	int64_t limit_bytes; /* taken for stack, printf FIFO and heap beyond
			      * their defaults (the overhead covers those) */
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

/* Allocation kinds tracked so that a free finds its size and device.
 * Linear allocations and arrays belong to the context that made them and
 * go with it; VMM handles and pool memory belong to the process. */
enum { MA_PTR, MA_PTR_V1, MA_HANDLE, MA_POOL, MA_ARRAY };

struct mock_alloc {
	int kind;
	int dev;
	CUcontext ctx;          /* MA_PTR, MA_PTR_V1, MA_ARRAY: the owner */
	uint64_t key;
	int64_t bytes;
	CUmemoryPool pool;      /* MA_POOL: the pool it came from */
	int refs, maps;         /* MA_HANDLE: references and mappings */
};

/* A cuMemAddressReserve range. */
struct mock_range {
	uint64_t base, size;
	bool graph;              /* the address of a graph allocation node */
};

#define LOCKED(expr) ({ pthread_mutex_lock(&mock_lock); CUresult r_ = (expr); \
	pthread_mutex_unlock(&mock_lock); r_; })

#define REQUIRE_INIT() do { if (!mock_inited) return CUDA_ERROR_NOT_INITIALIZED; } while (0)

/* What the files share besides the entry points, by the file that defines
 * it. mock_lock guards all of the mock's state. */

/* mock_cuda.c */
extern pthread_mutex_t mock_lock;
extern bool mock_inited;
extern struct mock_spec mock_spec;
bool mock_valid_dev(CUdevice d);
CUcontext mock_current(void);
int mock_current_dev(void);
/* Grows context c's stack for a launch of f when f needs more. */
CUresult mock_launch_needs(CUcontext c, CUfunction f);

/* mock_memory.c */
extern uint64_t mock_next_ptr[MOCK_MAX_DEVICES];
extern struct mock_alloc *mock_allocs;
extern size_t mock_nallocs;
extern struct mock_range *mock_vas;
extern size_t mock_nvas;
bool mock_room(void **arr, size_t *cap, size_t n, size_t elem);
CUresult mock_track(int kind, int dev, uint64_t key, int64_t bytes);
struct mock_alloc *mock_find(int kind, uint64_t key);
void mock_untrack(struct mock_alloc *a);
CUresult mock_give(int kind, uint64_t key);
CUresult mock_address_reserve(CUdeviceptr *ptr, size_t size, size_t align, CUdeviceptr addr);
/* Frees what context c owns (linear allocations, arrays): it is going. */
void mock_ctx_free_allocs(CUcontext c);

/* mock_pools.c */
extern struct CUmemPoolHandle_st mock_default_pool[MOCK_MAX_DEVICES];
extern CUmemoryPool mock_pools;                 /* every live pool, defaults too */
extern CUmemoryPool mock_cur_pool[MOCK_MAX_DEVICES];
uint64_t mock_grain_up(uint64_t n);
void mock_pools_release(void);

/* mock_streams.c */
extern uint64_t mock_now;                       /* simulated ns */
extern uint64_t mock_busy_until[MOCK_MAX_DEVICES];
extern uint64_t mock_block_ns;
bool mock_stream(CUstream *s);
/* A new stream of context c. */
CUresult mock_stream_new(CUstream *ps, CUcontext c);
CUresult mock_submit(CUstream s, uint64_t ns, unsigned launches, uint64_t *endp);

/* mock_graphs.c: the graph memory that stream-ordered allocation reaches
 * into, and what destroys a stream's unfinished capture */
CUresult mock_capture_alloc(CUdeviceptr *dptr, size_t bytes, int dev, CUstream s);
CUresult mock_capture_free(CUdeviceptr p, CUstream s);
bool mock_glive_free(CUdeviceptr p);
void mock_graph_free(CUgraph g);

/* The entry points that the cuGetProcAddress table in mock_cuda.c names
 * and the other files define, file by file. */
MOCK_API CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytes);
MOCK_API CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytes);
MOCK_API CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width,
				     size_t height, unsigned int elem);
MOCK_API CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pitch,
				  unsigned int width, unsigned int height, unsigned int elem);
MOCK_API CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytes, unsigned int flags);
MOCK_API CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t size,
			      const CUmemAllocationProp *prop, unsigned long long flags);
MOCK_API CUresult cuMemRelease(CUmemGenericAllocationHandle h);
MOCK_API CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment,
				      CUdeviceptr addr, unsigned long long flags);
MOCK_API CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size);
MOCK_API CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
			   CUmemGenericAllocationHandle handle, unsigned long long flags);
MOCK_API CUresult cuMemUnmap(CUdeviceptr ptr, size_t size);
MOCK_API CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle,
					      void *addr);
MOCK_API CUresult cuArrayCreate_v2(CUarray *pa, const CUDA_ARRAY_DESCRIPTOR *d);
MOCK_API CUresult cuArray3DCreate_v2(CUarray *pa, const CUDA_ARRAY3D_DESCRIPTOR *d);
MOCK_API CUresult cuArrayCreate(CUarray *pa, const CUDA_ARRAY_DESCRIPTOR_v1 *d);
MOCK_API CUresult cuArray3DCreate(CUarray *pa, const CUDA_ARRAY3D_DESCRIPTOR_v1 *d);
MOCK_API CUresult cuArrayDestroy(CUarray a);
MOCK_API CUresult cuMipmappedArrayCreate(CUmipmappedArray *pm,
					 const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned int levels);
MOCK_API CUresult cuMipmappedArrayDestroy(CUmipmappedArray m);
MOCK_API CUresult cuMemGetInfo_v2(size_t *freep, size_t *totalp);
MOCK_API CUresult cuMemGetInfo(unsigned int *freep, unsigned int *totalp);

MOCK_API CUresult cuMemFree_v2(CUdeviceptr p);
MOCK_API CUresult cuMemFree(CUdeviceptr_v1 p);
MOCK_API CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytes, CUstream s);
MOCK_API CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytes, CUstream s);
MOCK_API CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytes,
					  CUmemoryPool pool, CUstream s);
MOCK_API CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytes,
					       CUmemoryPool pool, CUstream s);
MOCK_API CUresult cuMemFreeAsync(CUdeviceptr p, CUstream s);
MOCK_API CUresult cuMemFreeAsync_ptsz(CUdeviceptr p, CUstream s);
MOCK_API CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props);
MOCK_API CUresult cuMemPoolDestroy(CUmemoryPool pool);
MOCK_API CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep);
MOCK_API CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr,
					void *value);
MOCK_API CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr,
					void *value);
MOCK_API CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice dev);
MOCK_API CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev);
MOCK_API CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool);

MOCK_API CUresult cuStreamCreate(CUstream *ps, unsigned int flags);
MOCK_API CUresult cuStreamDestroy_v2(CUstream s);
MOCK_API CUresult cuStreamSynchronize(CUstream s);
MOCK_API CUresult cuStreamSynchronize_ptsz(CUstream s);
MOCK_API CUresult cuStreamGetCtx(CUstream s, CUcontext *pctx);
MOCK_API CUresult cuStreamGetCtx_ptsz(CUstream s, CUcontext *pctx);
MOCK_API CUresult cuEventCreate(CUevent *pe, unsigned int flags);
MOCK_API CUresult cuEventDestroy_v2(CUevent e);
MOCK_API CUresult cuEventRecord(CUevent e, CUstream s);
MOCK_API CUresult cuEventRecord_ptsz(CUevent e, CUstream s);
MOCK_API CUresult cuEventQuery(CUevent e);
MOCK_API CUresult cuEventSynchronize(CUevent e);
MOCK_API CUresult cuEventElapsedTime(float *ms, CUevent a, CUevent b);
MOCK_API CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy,
				 unsigned int gz, unsigned int bx, unsigned int by,
				 unsigned int bz, unsigned int shmem, CUstream s,
				 void **params, void **extra);
MOCK_API CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy,
				      unsigned int gz, unsigned int bx, unsigned int by,
				      unsigned int bz, unsigned int shmem, CUstream s,
				      void **params, void **extra);
MOCK_API CUresult cuLaunchKernelEx(const CUlaunchConfig *c, CUfunction f, void **params,
				   void **extra);
MOCK_API CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *c, CUfunction f,
					void **params, void **extra);
MOCK_API CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX,
					    unsigned int gridDimY, unsigned int gridDimZ,
					    unsigned int blockDimX, unsigned int blockDimY,
					    unsigned int blockDimZ, unsigned int sharedMemBytes,
					    CUstream hStream, void **kernelParams);
MOCK_API CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gridDimX,
						 unsigned int gridDimY, unsigned int gridDimZ,
						 unsigned int blockDimX, unsigned int blockDimY,
						 unsigned int blockDimZ,
						 unsigned int sharedMemBytes, CUstream hStream,
						 void **kernelParams);

MOCK_API CUresult cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode mode);
MOCK_API CUresult cuStreamBeginCapture(CUstream s);
MOCK_API CUresult cuStreamBeginCapture_ptsz(CUstream s);
MOCK_API CUresult cuStreamBeginCapture_v2_ptsz(CUstream s, CUstreamCaptureMode mode);
MOCK_API CUresult cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus *status);
MOCK_API CUresult cuStreamIsCapturing_ptsz(CUstream s, CUstreamCaptureStatus *status);
MOCK_API CUresult cuStreamEndCapture(CUstream s, CUgraph *pg);
MOCK_API CUresult cuStreamEndCapture_ptsz(CUstream s, CUgraph *pg);
MOCK_API CUresult cuGraphCreate(CUgraph *pg, unsigned int flags);
MOCK_API CUresult cuGraphAddMemAllocNode(CUgraphNode *pn, CUgraph g, const CUgraphNode *deps,
					 size_t ndeps, CUDA_MEM_ALLOC_NODE_PARAMS *params);
MOCK_API CUresult cuGraphAddMemFreeNode(CUgraphNode *pn, CUgraph g, const CUgraphNode *deps,
					size_t ndeps, CUdeviceptr dptr);
MOCK_API CUresult cuGraphAddChildGraphNode(CUgraphNode *pn, CUgraph g, const CUgraphNode *deps,
					   size_t ndeps, CUgraph child);
MOCK_API CUresult cuGraphGetNodes(CUgraph g, CUgraphNode *nodes, size_t *numNodes);
MOCK_API CUresult cuGraphNodeGetType(CUgraphNode node, CUgraphNodeType *type);
MOCK_API CUresult cuGraphMemAllocNodeGetParams(CUgraphNode node,
					       CUDA_MEM_ALLOC_NODE_PARAMS *params_out);
MOCK_API CUresult cuGraphMemFreeNodeGetParams(CUgraphNode node, CUdeviceptr *dptr_out);
MOCK_API CUresult cuGraphChildGraphNodeGetGraph(CUgraphNode node, CUgraph *graph);
MOCK_API CUresult cuDeviceGraphMemTrim(CUdevice device);
MOCK_API CUresult cuDeviceGetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr,
					       void *value);
MOCK_API CUresult cuDeviceSetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr,
					       void *value);
MOCK_API CUresult cuGraphInstantiateWithFlags(CUgraphExec *pe, CUgraph g,
					      unsigned long long flags);
MOCK_API CUresult cuGraphInstantiate(CUgraphExec *pe, CUgraph g, CUgraphNode *errNode,
				     char *logBuffer, size_t bufferSize);
MOCK_API CUresult cuGraphInstantiate_v2(CUgraphExec *pe, CUgraph g, CUgraphNode *errNode,
					char *logBuffer, size_t bufferSize);
MOCK_API CUresult cuGraphInstantiateWithParams(CUgraphExec *pe, CUgraph g,
					       CUDA_GRAPH_INSTANTIATE_PARAMS *params);
MOCK_API CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *pe, CUgraph g,
						    CUDA_GRAPH_INSTANTIATE_PARAMS *params);
MOCK_API CUresult cuGraphUpload(CUgraphExec e, CUstream s);
MOCK_API CUresult cuGraphUpload_ptsz(CUgraphExec e, CUstream s);
MOCK_API CUresult cuGraphLaunch(CUgraphExec e, CUstream s);
MOCK_API CUresult cuGraphLaunch_ptsz(CUgraphExec e, CUstream s);
MOCK_API CUresult cuGraphDestroy(CUgraph g);
MOCK_API CUresult cuGraphExecDestroy(CUgraphExec e);

#endif
