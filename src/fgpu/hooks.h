/* The one list of hooked entry points. Everything else is derived from it:
 * the exported prototypes, the table of real driver functions, the table
 * that dlsym and cuGetProcAddress use to hand out hooks.
 *
 *   X(return type, symbol, base name, CUDA version that made the symbol
 *     the default for the base name, per-thread-default-stream variant,
 *     (parameters))
 *
 * The base name and version are what cuGetProcAddress is asked for; the
 * symbol is what the driver exports. The implementations are in the files
 * shim.h lists. */
#ifndef TESSERA_FGPU_HOOKS_H
#define TESSERA_FGPU_HOOKS_H

#include "gpuabi/cuda_abi.h"
#include "gpuabi/nvml_abi.h"

#define FGPU_CUDA_HOOKS(X) \
	X(CUresult, cuGetProcAddress, cuGetProcAddress, 11030, 0, \
	  (const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)) \
	X(CUresult, cuGetProcAddress_v2, cuGetProcAddress, 12000, 0, \
	  (const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags, \
	   CUdriverProcAddressQueryResult *symbolStatus)) \
	X(CUresult, cuCtxCreate_v2, cuCtxCreate, 3020, 0, \
	  (CUcontext *pctx, unsigned int flags, CUdevice dev)) \
	X(CUresult, cuCtxCreate_v3, cuCtxCreate, 11040, 0, \
	  (CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams, \
	   unsigned int flags, CUdevice dev)) \
	X(CUresult, cuCtxCreate_v4, cuCtxCreate, 12050, 0, \
	  (CUcontext *pctx, CUctxCreateParams *ctxCreateParams, unsigned int flags, \
	   CUdevice dev)) \
	X(CUresult, cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain, 7000, 0, \
	  (CUcontext *pctx, CUdevice dev)) \
	X(CUresult, cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease, 7000, 0, \
	  (CUdevice dev)) \
	X(CUresult, cuDevicePrimaryCtxRelease_v2, cuDevicePrimaryCtxRelease, 11000, 0, \
	  (CUdevice dev)) \
	X(CUresult, cuDevicePrimaryCtxReset, cuDevicePrimaryCtxReset, 7000, 0, (CUdevice dev)) \
	X(CUresult, cuDevicePrimaryCtxReset_v2, cuDevicePrimaryCtxReset, 11000, 0, \
	  (CUdevice dev)) \
	X(CUresult, cuCtxDestroy, cuCtxDestroy, 2000, 0, (CUcontext ctx)) \
	X(CUresult, cuCtxDestroy_v2, cuCtxDestroy, 4000, 0, (CUcontext ctx)) \
	X(CUresult, cuCtxSetLimit, cuCtxSetLimit, 3010, 0, (CUlimit limit, size_t value)) \
	X(CUresult, cuGreenCtxCreate, cuGreenCtxCreate, 12040, 0, \
	  (CUgreenCtx *phCtx, CUdevResourceDesc desc, CUdevice dev, unsigned int flags)) \
	X(CUresult, cuGreenCtxDestroy, cuGreenCtxDestroy, 12040, 0, (CUgreenCtx hCtx)) \
	X(CUresult, cuModuleUnload, cuModuleUnload, 2000, 0, (CUmodule hmod)) \
	X(CUresult, cuLibraryUnload, cuLibraryUnload, 12000, 0, (CUlibrary library)) \
	X(CUresult, cuMemAlloc, cuMemAlloc, 2000, 0, \
	  (CUdeviceptr_v1 *dptr, unsigned int bytesize)) \
	X(CUresult, cuMemAlloc_v2, cuMemAlloc, 3020, 0, \
	  (CUdeviceptr *dptr, size_t bytesize)) \
	X(CUresult, cuMemAllocPitch, cuMemAllocPitch, 2000, 0, \
	  (CUdeviceptr_v1 *dptr, unsigned int *pPitch, unsigned int width, \
	   unsigned int height, unsigned int elemSize)) \
	X(CUresult, cuMemAllocPitch_v2, cuMemAllocPitch, 3020, 0, \
	  (CUdeviceptr *dptr, size_t *pPitch, size_t width, size_t height, \
	   unsigned int elemSize)) \
	X(CUresult, cuMemAllocManaged, cuMemAllocManaged, 6000, 0, \
	  (CUdeviceptr *dptr, size_t bytesize, unsigned int flags)) \
	X(CUresult, cuMemAllocAsync, cuMemAllocAsync, 11020, 0, \
	  (CUdeviceptr *dptr, size_t bytesize, CUstream stream)) \
	X(CUresult, cuMemAllocAsync_ptsz, cuMemAllocAsync, 11020, 1, \
	  (CUdeviceptr *dptr, size_t bytesize, CUstream stream)) \
	X(CUresult, cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync, 11020, 0, \
	  (CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream stream)) \
	X(CUresult, cuMemAllocFromPoolAsync_ptsz, cuMemAllocFromPoolAsync, 11020, 1, \
	  (CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream stream)) \
	X(CUresult, cuMemFree, cuMemFree, 2000, 0, (CUdeviceptr_v1 dptr)) \
	X(CUresult, cuMemFree_v2, cuMemFree, 3020, 0, (CUdeviceptr dptr)) \
	X(CUresult, cuMemFreeAsync, cuMemFreeAsync, 11020, 0, \
	  (CUdeviceptr dptr, CUstream stream)) \
	X(CUresult, cuMemFreeAsync_ptsz, cuMemFreeAsync, 11020, 1, \
	  (CUdeviceptr dptr, CUstream stream)) \
	X(CUresult, cuMemCreate, cuMemCreate, 10020, 0, \
	  (CUmemGenericAllocationHandle *handle, size_t size, \
	   const CUmemAllocationProp *prop, unsigned long long flags)) \
	X(CUresult, cuMemRelease, cuMemRelease, 10020, 0, \
	  (CUmemGenericAllocationHandle handle)) \
	X(CUresult, cuMemMap, cuMemMap, 10020, 0, \
	  (CUdeviceptr ptr, size_t size, size_t offset, \
	   CUmemGenericAllocationHandle handle, unsigned long long flags)) \
	X(CUresult, cuMemUnmap, cuMemUnmap, 10020, 0, (CUdeviceptr ptr, size_t size)) \
	X(CUresult, cuMemRetainAllocationHandle, cuMemRetainAllocationHandle, 11000, 0, \
	  (CUmemGenericAllocationHandle *handle, void *addr)) \
	X(CUresult, cuMemPoolCreate, cuMemPoolCreate, 11020, 0, \
	  (CUmemoryPool *pool, const CUmemPoolProps *props)) \
	X(CUresult, cuDeviceGetDefaultMemPool, cuDeviceGetDefaultMemPool, 11020, 0, \
	  (CUmemoryPool *pool, CUdevice dev)) \
	X(CUresult, cuDeviceGetMemPool, cuDeviceGetMemPool, 11020, 0, \
	  (CUmemoryPool *pool, CUdevice dev)) \
	X(CUresult, cuMemPoolDestroy, cuMemPoolDestroy, 11020, 0, (CUmemoryPool pool)) \
	X(CUresult, cuMemPoolTrimTo, cuMemPoolTrimTo, 11020, 0, \
	  (CUmemoryPool pool, size_t minBytesToKeep)) \
	X(CUresult, cuStreamSynchronize, cuStreamSynchronize, 2000, 0, (CUstream stream)) \
	X(CUresult, cuStreamSynchronize_ptsz, cuStreamSynchronize, 7000, 1, (CUstream stream)) \
	X(CUresult, cuEventSynchronize, cuEventSynchronize, 2000, 0, (CUevent ev)) \
	X(CUresult, cuCtxSynchronize, cuCtxSynchronize, 2000, 0, (void)) \
	X(CUresult, cuArrayCreate, cuArrayCreate, 2000, 0, \
	  (CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR_v1 *desc)) \
	X(CUresult, cuArray3DCreate, cuArray3DCreate, 2000, 0, \
	  (CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR_v1 *desc)) \
	X(CUresult, cuArrayCreate_v2, cuArrayCreate, 3020, 0, \
	  (CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *desc)) \
	X(CUresult, cuArray3DCreate_v2, cuArray3DCreate, 3020, 0, \
	  (CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *desc)) \
	X(CUresult, cuArrayDestroy, cuArrayDestroy, 2000, 0, (CUarray hArray)) \
	X(CUresult, cuMipmappedArrayCreate, cuMipmappedArrayCreate, 5000, 0, \
	  (CUmipmappedArray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *desc, \
	   unsigned int numLevels)) \
	X(CUresult, cuMipmappedArrayDestroy, cuMipmappedArrayDestroy, 5000, 0, \
	  (CUmipmappedArray hArray)) \
	X(CUresult, cuMemGetInfo, cuMemGetInfo, 2000, 0, \
	  (unsigned int *free, unsigned int *total)) \
	X(CUresult, cuMemGetInfo_v2, cuMemGetInfo, 3020, 0, (size_t *free, size_t *total)) \
	X(CUresult, cuDeviceTotalMem, cuDeviceTotalMem, 2000, 0, \
	  (unsigned int *bytes, CUdevice dev)) \
	X(CUresult, cuDeviceTotalMem_v2, cuDeviceTotalMem, 3020, 0, \
	  (size_t *bytes, CUdevice dev)) \
	X(CUresult, cuLaunchKernel, cuLaunchKernel, 4000, 0, \
	  (CUfunction f, unsigned int gridDimX, unsigned int gridDimY, \
	   unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY, \
	   unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream, \
	   void **kernelParams, void **extra)) \
	X(CUresult, cuLaunchKernel_ptsz, cuLaunchKernel, 7000, 1, \
	  (CUfunction f, unsigned int gridDimX, unsigned int gridDimY, \
	   unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY, \
	   unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream, \
	   void **kernelParams, void **extra)) \
	X(CUresult, cuLaunchKernelEx, cuLaunchKernelEx, 11060, 0, \
	  (const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra)) \
	X(CUresult, cuLaunchKernelEx_ptsz, cuLaunchKernelEx, 11060, 1, \
	  (const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra)) \
	X(CUresult, cuLaunchCooperativeKernel, cuLaunchCooperativeKernel, 9000, 0, \
	  (CUfunction f, unsigned int gridDimX, unsigned int gridDimY, \
	   unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY, \
	   unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream, \
	   void **kernelParams)) \
	X(CUresult, cuLaunchCooperativeKernel_ptsz, cuLaunchCooperativeKernel, 9000, 1, \
	  (CUfunction f, unsigned int gridDimX, unsigned int gridDimY, \
	   unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY, \
	   unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream, \
	   void **kernelParams)) \
	X(CUresult, cuGraphLaunch, cuGraphLaunch, 10000, 0, (CUgraphExec exec, CUstream hStream)) \
	X(CUresult, cuGraphLaunch_ptsz, cuGraphLaunch, 10000, 1, \
	  (CUgraphExec exec, CUstream hStream)) \
	X(CUresult, cuGraphUpload, cuGraphUpload, 11010, 0, (CUgraphExec exec, CUstream hStream)) \
	X(CUresult, cuGraphUpload_ptsz, cuGraphUpload, 11010, 1, \
	  (CUgraphExec exec, CUstream hStream)) \
	X(CUresult, cuGraphInstantiate, cuGraphInstantiate, 10000, 0, \
	  (CUgraphExec *exec, CUgraph graph, CUgraphNode *errNode, char *logBuffer, \
	   size_t bufferSize)) \
	X(CUresult, cuGraphInstantiate_v2, cuGraphInstantiate, 11000, 0, \
	  (CUgraphExec *exec, CUgraph graph, CUgraphNode *errNode, char *logBuffer, \
	   size_t bufferSize)) \
	X(CUresult, cuGraphInstantiateWithFlags, cuGraphInstantiateWithFlags, 11040, 0, \
	  (CUgraphExec *exec, CUgraph graph, unsigned long long flags)) \
	X(CUresult, cuGraphInstantiateWithParams, cuGraphInstantiateWithParams, 12000, 0, \
	  (CUgraphExec *exec, CUgraph graph, CUDA_GRAPH_INSTANTIATE_PARAMS *params)) \
	X(CUresult, cuGraphInstantiateWithParams_ptsz, cuGraphInstantiateWithParams, 12000, 1, \
	  (CUgraphExec *exec, CUgraph graph, CUDA_GRAPH_INSTANTIATE_PARAMS *params)) \
	X(CUresult, cuGraphExecDestroy, cuGraphExecDestroy, 10000, 0, (CUgraphExec exec)) \
	X(CUresult, cuDeviceGraphMemTrim, cuDeviceGraphMemTrim, 11040, 0, (CUdevice dev))

#define FGPU_NVML_HOOKS(X) \
	X(nvmlReturn_t, nvmlDeviceGetMemoryInfo, nvmlDeviceGetMemoryInfo, 0, 0, \
	  (nvmlDevice_t device, nvmlMemory_t *memory)) \
	X(nvmlReturn_t, nvmlDeviceGetMemoryInfo_v2, nvmlDeviceGetMemoryInfo_v2, 0, 0, \
	  (nvmlDevice_t device, nvmlMemory_v2_t *memory))

/* Driver functions the shim calls but does not hook. */
#define FGPU_CUDA_USED(X) \
	X(CUresult, cuCtxGetDevice, (CUdevice *dev)) \
	X(CUresult, cuCtxGetLimit, (size_t *pvalue, CUlimit limit)) \
	X(CUresult, cuDeviceGetAttribute, (int *pi, int attrib, CUdevice dev)) \
	X(CUresult, cuDevicePrimaryCtxGetState, (CUdevice dev, unsigned int *flags, int *active)) \
	X(CUresult, cuCtxFromGreenCtx, (CUcontext *pctx, CUgreenCtx hCtx)) \
	X(CUresult, cuFuncGetAttribute, (int *pi, CUfunction_attribute attrib, CUfunction f)) \
	X(CUresult, cuKernelGetAttribute, \
	  (int *pi, CUfunction_attribute attrib, CUkernel kernel, CUdevice dev)) \
	X(CUresult, cuDeviceGetUuid, (CUuuid *uuid, CUdevice dev)) \
	X(CUresult, cuEventCreate, (CUevent *ev, unsigned int flags)) \
	X(CUresult, cuEventDestroy_v2, (CUevent ev)) \
	X(CUresult, cuEventRecord, (CUevent ev, CUstream stream)) \
	X(CUresult, cuEventRecord_ptsz, (CUevent ev, CUstream stream)) \
	X(CUresult, cuEventQuery, (CUevent ev)) \
	X(CUresult, cuEventElapsedTime, (float *ms, CUevent start, CUevent end)) \
	X(CUresult, cuCtxGetCurrent, (CUcontext *ctx)) \
	X(CUresult, cuCtxPushCurrent_v2, (CUcontext ctx)) \
	X(CUresult, cuCtxPopCurrent_v2, (CUcontext *ctx)) \
	X(CUresult, cuStreamGetCtx, (CUstream stream, CUcontext *ctx)) \
	X(CUresult, cuStreamIsCapturing, (CUstream stream, CUstreamCaptureStatus *status)) \
	X(CUresult, cuMemPoolGetAttribute, \
	  (CUmemoryPool pool, CUmemPool_attribute attr, void *value)) \
	X(CUresult, cuGraphGetNodes, (CUgraph graph, CUgraphNode *nodes, size_t *numNodes)) \
	X(CUresult, cuGraphNodeGetType, (CUgraphNode node, CUgraphNodeType *type)) \
	X(CUresult, cuGraphMemAllocNodeGetParams, \
	  (CUgraphNode node, CUDA_MEM_ALLOC_NODE_PARAMS *params)) \
	X(CUresult, cuGraphChildGraphNodeGetGraph, (CUgraphNode node, CUgraph *graph)) \
	X(CUresult, cuDeviceGetGraphMemAttribute, \
	  (CUdevice dev, CUgraphMem_attribute attr, void *value))

#define FGPU_NVML_USED(X) \
	X(nvmlReturn_t, nvmlDeviceGetUUID, (nvmlDevice_t device, char *uuid, unsigned int len)) \
	X(nvmlReturn_t, nvmlDeviceGetIndex, (nvmlDevice_t device, unsigned int *index))

#endif
