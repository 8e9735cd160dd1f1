/* The subset of the CUDA driver ABI that Tessera's fGPU shim and mock
 * driver use, declared from NVIDIA's public CUDA Driver API reference
 * (names, enum values, struct layouts, versioned `_v2` symbols). The project
 * does not depend on the CUDA toolkit headers: the build machines have no
 * toolkit, and the shim must compile everywhere.
 *
 * Only what is declared here is hooked or mocked. Values are the driver's,
 * so a binary built against the real cuda.h talks to the mock unchanged. */
#ifndef TESSERA_GPUABI_CUDA_ABI_H
#define TESSERA_GPUABI_CUDA_ABI_H

#include <stddef.h>
#include <stdint.h>

typedef int CUresult;                 /* enum cudaError_enum */
typedef int CUdevice;                 /* CUdevice_v1 */
typedef unsigned long long CUdeviceptr; /* CUdeviceptr_v2 */
typedef unsigned int CUdeviceptr_v1;  /* pre-3.2 32-bit ABI (cuMemAlloc etc.) */
typedef uint64_t cuuint64_t;
typedef unsigned long long CUmemGenericAllocationHandle;

typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUfunc_st *CUfunction;
typedef struct CUmod_st *CUmodule;
/* CUDA 12 libraries: loaded without a context; cuLaunchKernel takes one
 * of their kernels (CUkernel) in place of a CUfunction. */
typedef struct CUlib_st *CUlibrary;
typedef struct CUkern_st *CUkernel;
typedef struct CUarray_st *CUarray;
typedef struct CUmipmappedArray_st *CUmipmappedArray;
typedef struct CUmemPoolHandle_st *CUmemoryPool;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphExec_st *CUgraphExec;
typedef struct CUgraphNode_st *CUgraphNode;

typedef struct CUuuid_st {
	char bytes[16];
} CUuuid;

/* CUresult values used by the project. */
enum {
	CUDA_SUCCESS = 0,
	CUDA_ERROR_INVALID_VALUE = 1,
	CUDA_ERROR_OUT_OF_MEMORY = 2,
	CUDA_ERROR_NOT_INITIALIZED = 3,
	CUDA_ERROR_DEINITIALIZED = 4,
	CUDA_ERROR_NO_DEVICE = 100,
	CUDA_ERROR_INVALID_DEVICE = 101,
	CUDA_ERROR_INVALID_IMAGE = 200,
	CUDA_ERROR_INVALID_CONTEXT = 201,
	CUDA_ERROR_CONTEXT_ALREADY_CURRENT = 202,
	CUDA_ERROR_UNSUPPORTED_LIMIT = 215,
	CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY = 224,
	CUDA_ERROR_INVALID_HANDLE = 400,
	CUDA_ERROR_ILLEGAL_STATE = 401,
	CUDA_ERROR_NOT_FOUND = 500,
	CUDA_ERROR_NOT_READY = 600,
	CUDA_ERROR_NOT_PERMITTED = 800,
	CUDA_ERROR_NOT_SUPPORTED = 801,
	CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900,
	CUDA_ERROR_STREAM_CAPTURE_INVALIDATED = 901,
	CUDA_ERROR_CAPTURED_EVENT = 907,
	CUDA_ERROR_INVALID_RESOURCE_TYPE = 914,
	CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION = 915,
	CUDA_ERROR_UNKNOWN = 999,
};

/* CUdevice_attribute values used by the project. */
enum {
	CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1,
	CU_DEVICE_ATTRIBUTE_WARP_SIZE = 10,
	CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
	CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR = 39,
	CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
	CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
};

/* CUdriverProcAddress_flags and CUdriverProcAddressQueryResult. */
enum {
	CU_GET_PROC_ADDRESS_DEFAULT = 0,
	CU_GET_PROC_ADDRESS_LEGACY_STREAM = 1 << 0,
	CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM = 1 << 1,
};
typedef int CUdriverProcAddressQueryResult;
enum {
	CU_GET_PROC_ADDRESS_SUCCESS = 0,
	CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1,
	CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT = 2,
};

/* Context creation parameters: cuCtxCreate_v3 (CUDA 11.4) takes an array
 * of execution affinities (an SM count, honoured only under MPS);
 * cuCtxCreate_v4 (12.5, the base name's meaning from then on) takes them,
 * or graphics-interop (CIG) data, in a struct. */
typedef int CUexecAffinityType;
enum { CU_EXEC_AFFINITY_TYPE_SM_COUNT = 0 };
typedef struct CUexecAffinityParam_st {
	CUexecAffinityType type;
	union {
		struct { unsigned int val; } smCount;
	} param;
} CUexecAffinityParam;
typedef struct CUctxCigParam_st CUctxCigParam;
typedef struct CUctxCreateParams_st {
	CUexecAffinityParam *execAffinityParams;
	int numExecAffinityParams;
	CUctxCigParam *cigParams;
} CUctxCreateParams;

/* CUlimit: per-context limits (cuCtxSetLimit). The first three size
 * memory the driver reserves for the context: a stack for every thread
 * the device can hold at once, the device printf() buffer, and the device
 * malloc() heap. */
typedef int CUlimit;
enum {
	CU_LIMIT_STACK_SIZE = 0x00,
	CU_LIMIT_PRINTF_FIFO_SIZE = 0x01,
	CU_LIMIT_MALLOC_HEAP_SIZE = 0x02,
	CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH = 0x03,
	CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT = 0x04,
	CU_LIMIT_MAX_L2_FETCH_GRANULARITY = 0x05,
	CU_LIMIT_PERSISTING_L2_CACHE_SIZE = 0x06,
};

/* CUfunction_attribute (cuFuncGetAttribute): what a kernel needs. Local
 * memory is per thread; the driver grows the context's stack to fit it. */
typedef int CUfunction_attribute;
enum {
	CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0,
	CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1,
	CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES = 2,
	CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES = 3,
	CU_FUNC_ATTRIBUTE_NUM_REGS = 4,
	CU_FUNC_ATTRIBUTE_PTX_VERSION = 5,
	CU_FUNC_ATTRIBUTE_BINARY_VERSION = 6,
};

/* Green contexts (CUDA 12.4+): a context over a partition of the device's
 * SMs. A CUdevResource is a type, 92 bytes the driver keeps to itself,
 * then a 48-byte union whose SM member is a few counts; a descriptor
 * (CUdevResourceDesc) is opaque. */
typedef struct CUgreenCtx_st *CUgreenCtx;
typedef struct CUdevResourceDesc_st *CUdevResourceDesc;
typedef int CUdevResourceType;
enum { CU_DEV_RESOURCE_TYPE_INVALID = 0, CU_DEV_RESOURCE_TYPE_SM = 1 };
typedef struct CUdevSmResource_st {
	unsigned int smCount;
	unsigned int minSmPartitionSize;      /* CUDA 13 */
	unsigned int smCoscheduledAlignment;  /* CUDA 13 */
} CUdevSmResource;
typedef struct CUdevResource_st {
	CUdevResourceType type;
	unsigned char _internal_padding[92];
	union {
		CUdevSmResource sm;
		unsigned char _oversize[48];
	};
} CUdevResource;
enum { CU_GREEN_CTX_DEFAULT_STREAM = 0x1 };
enum { CU_STREAM_NON_BLOCKING = 0x1 };

/* CUarray_format (bytes per channel are derived in the shim). */
typedef int CUarray_format;
enum {
	CU_AD_FORMAT_UNSIGNED_INT8 = 0x01,
	CU_AD_FORMAT_UNSIGNED_INT16 = 0x02,
	CU_AD_FORMAT_UNSIGNED_INT32 = 0x03,
	CU_AD_FORMAT_SIGNED_INT8 = 0x08,
	CU_AD_FORMAT_SIGNED_INT16 = 0x09,
	CU_AD_FORMAT_SIGNED_INT32 = 0x0a,
	CU_AD_FORMAT_HALF = 0x10,
	CU_AD_FORMAT_FLOAT = 0x20,
};

typedef struct CUDA_ARRAY_DESCRIPTOR_st {   /* CUDA_ARRAY_DESCRIPTOR_v2 */
	size_t Width;
	size_t Height;
	CUarray_format Format;
	unsigned int NumChannels;
} CUDA_ARRAY_DESCRIPTOR;

/* The pre-3.2 ABI of cuArrayCreate / cuArray3DCreate (unversioned
 * symbols): 32-bit extents. */
typedef struct CUDA_ARRAY_DESCRIPTOR_v1_st {
	unsigned int Width;
	unsigned int Height;
	CUarray_format Format;
	unsigned int NumChannels;
} CUDA_ARRAY_DESCRIPTOR_v1;

typedef struct CUDA_ARRAY3D_DESCRIPTOR_v1_st {
	unsigned int Width;
	unsigned int Height;
	unsigned int Depth;
	CUarray_format Format;
	unsigned int NumChannels;
	unsigned int Flags;
} CUDA_ARRAY3D_DESCRIPTOR_v1;

typedef struct CUDA_ARRAY3D_DESCRIPTOR_st { /* CUDA_ARRAY3D_DESCRIPTOR_v2 */
	size_t Width;
	size_t Height;
	size_t Depth;
	CUarray_format Format;
	unsigned int NumChannels;
	unsigned int Flags;
} CUDA_ARRAY3D_DESCRIPTOR;

/* Virtual memory management (cuMemCreate) and memory pools. */
enum { CU_MEM_LOCATION_TYPE_DEVICE = 1 };
enum { CU_MEM_ALLOCATION_TYPE_PINNED = 1 };
typedef struct CUmemLocation_st {
	int type;                /* CUmemLocationType */
	int id;
} CUmemLocation;

typedef struct CUmemAllocationProp_st {
	int type;                /* CUmemAllocationType */
	int requestedHandleTypes;/* CUmemAllocationHandleType */
	CUmemLocation location;
	void *win32HandleMetaData;
	struct {
		unsigned char compressionType;
		unsigned char gpuDirectRDMACapable;
		unsigned short usage;
		unsigned char reserved[4];
	} allocFlags;
} CUmemAllocationProp;

/* Only the leading fields are read; the driver's struct ends in reserved
 * bytes whose size changed between releases, so callers own the storage. */
typedef struct CUmemPoolProps_st {
	int allocType;
	int handleTypes;
	CUmemLocation location;
	void *win32SecurityAttributes;
	size_t maxSize;
	unsigned short usage;
	unsigned char reserved[54];
} CUmemPoolProps;

/* CUmemPool_attribute values used by the project (the value type of 4..8
 * is cuuint64_t). */
typedef int CUmemPool_attribute;
enum {
	CU_MEMPOOL_ATTR_RELEASE_THRESHOLD = 4,
	CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT = 5,
	CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH = 6,
	CU_MEMPOOL_ATTR_USED_MEM_CURRENT = 7,
	CU_MEMPOOL_ATTR_USED_MEM_HIGH = 8,
};

/* Stream capture (CUDA graphs). */
typedef int CUstreamCaptureStatus;
enum {
	CU_STREAM_CAPTURE_STATUS_NONE = 0,
	CU_STREAM_CAPTURE_STATUS_ACTIVE = 1,
	CU_STREAM_CAPTURE_STATUS_INVALIDATED = 2,
};
typedef int CUstreamCaptureMode;
enum {
	CU_STREAM_CAPTURE_MODE_GLOBAL = 0,
	CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1,
	CU_STREAM_CAPTURE_MODE_RELAXED = 2,
};

/* Graph nodes (only the kinds the project looks at). */
typedef int CUgraphNodeType;
enum {
	CU_GRAPH_NODE_TYPE_KERNEL = 0,
	CU_GRAPH_NODE_TYPE_GRAPH = 4,
	CU_GRAPH_NODE_TYPE_EMPTY = 5,
	CU_GRAPH_NODE_TYPE_MEM_ALLOC = 10,
	CU_GRAPH_NODE_TYPE_MEM_FREE = 11,
};

typedef struct CUmemAccessDesc_st {
	CUmemLocation location;
	int flags;               /* CUmemAccess_flags */
} CUmemAccessDesc;

/* cuGraphAddMemAllocNode / cuGraphMemAllocNodeGetParams. */
typedef struct CUDA_MEM_ALLOC_NODE_PARAMS_st {
	CUmemPoolProps poolProps;
	const CUmemAccessDesc *accessDescs;
	size_t accessDescCount;
	size_t bytesize;
	CUdeviceptr dptr;        /* out: the allocation's fixed address */
} CUDA_MEM_ALLOC_NODE_PARAMS;

/* cuDeviceGetGraphMemAttribute (values are cuuint64_t): the graph
 * allocator's memory per device and process. */
typedef int CUgraphMem_attribute;
enum {
	CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT = 0,
	CU_GRAPH_MEM_ATTR_USED_MEM_HIGH = 1,
	CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT = 2,
	CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH = 3,
};

/* Graph instantiation. */
enum {
	CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH = 1,
	CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD = 2,
	CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH = 4,
	CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY = 8,
};
enum {
	CUDA_GRAPH_INSTANTIATE_SUCCESS = 0,
	CUDA_GRAPH_INSTANTIATE_ERROR = 1,
};
typedef struct CUDA_GRAPH_INSTANTIATE_PARAMS_st {
	cuuint64_t flags;
	CUstream hUploadStream;  /* with CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD */
	CUgraphNode hErrNode_out;
	int result_out;          /* CUgraphInstantiateResult */
} CUDA_GRAPH_INSTANTIATE_PARAMS;

/* Special stream handles: the legacy default stream and the per-thread
 * default stream, usable wherever a CUstream is. */
#define CU_STREAM_LEGACY ((CUstream)0x1)
#define CU_STREAM_PER_THREAD ((CUstream)0x2)

/* cuMemAttach flags for cuMemAllocManaged. */
enum { CU_MEM_ATTACH_GLOBAL = 0x1, CU_MEM_ATTACH_HOST = 0x2 };

/* cuLaunchKernelEx (CUDA 11.8+): only the leading fields are read. */
typedef struct CUlaunchAttribute_st CUlaunchAttribute;
typedef struct CUlaunchConfig_st {
	unsigned int gridDimX, gridDimY, gridDimZ;
	unsigned int blockDimX, blockDimY, blockDimZ;
	unsigned int sharedMemBytes;
	CUstream hStream;
	CUlaunchAttribute *attrs;
	unsigned int numAttrs;
} CUlaunchConfig;

/* Event flags. */
enum { CU_EVENT_DEFAULT = 0, CU_EVENT_DISABLE_TIMING = 0x2 };

#endif
