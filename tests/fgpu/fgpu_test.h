/* Shared by the fGPU tests: driver prototypes (from the shim's own hook
 * list, so tests and shim cannot disagree), the mock's test hooks, a
 * helper that writes a limits file and points the shim at it, and one
 * that runs a program (gpu-info, the mock's nvidia-smi) under the shim.
 *
 * The test programs link against the mock libcuda.so.1/libnvidia-ml.so.1;
 * meson runs them with LD_PRELOAD=libtessera-fgpu.so, so every hooked call
 * goes through the shim as in a container. The shim reads its limits on
 * the first hooked call, so a test sets them up before that. */
#ifndef TESSERA_TESTS_FGPU_TEST_H
#define TESSERA_TESTS_FGPU_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fgpu/hooks.h"

#define FT_PROTO(ret, name, base, since, ptsz, params) ret name params;
FGPU_CUDA_HOOKS(FT_PROTO)
FGPU_NVML_HOOKS(FT_PROTO)
#undef FT_PROTO
#define FT_USED(ret, name, params) ret name params;
FGPU_CUDA_USED(FT_USED)
FGPU_NVML_USED(FT_USED)
#undef FT_USED

CUresult cuInit(unsigned int flags);
CUresult cuDeviceGet(CUdevice *dev, int ordinal);
CUresult cuDeviceGetCount(int *count);
CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev);
CUresult cuCtxSetCurrent(CUcontext ctx);
CUresult cuDeviceGetDevResource(CUdevice dev, CUdevResource *res, CUdevResourceType type);
CUresult cuDevSmResourceSplitByCount(CUdevResource *result, unsigned int *nbGroups,
				     const CUdevResource *input, CUdevResource *remaining,
				     unsigned int useFlags, unsigned int minCount);
CUresult cuDevResourceGenerateDesc(CUdevResourceDesc *desc, CUdevResource *res, unsigned int n);
CUresult cuGreenCtxStreamCreate(CUstream *s, CUgreenCtx g, unsigned int flags, int priority);
CUresult cuStreamCreate(CUstream *s, unsigned int flags);
CUresult cuStreamSynchronize(CUstream s);
CUresult cuCtxSynchronize(void);
CUresult cuStreamDestroy_v2(CUstream s);
CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value);
CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool);
CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
			     unsigned long long flags);
CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size);
CUresult cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode mode);
CUresult cuStreamEndCapture(CUstream s, CUgraph *graph);
CUresult cuGraphInstantiateWithFlags(CUgraphExec *exec, CUgraph graph, unsigned long long flags);
CUresult cuGraphDestroy(CUgraph graph);
CUresult cuGraphCreate(CUgraph *graph, unsigned int flags);
CUresult cuGraphAddMemAllocNode(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps,
				size_t ndeps, CUDA_MEM_ALLOC_NODE_PARAMS *params);
CUresult cuGraphAddMemFreeNode(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps,
			       size_t ndeps, CUdeviceptr dptr);
CUresult cuGraphAddChildGraphNode(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps,
				  size_t ndeps, CUgraph child);
CUresult cuGraphExecDestroy(CUgraphExec exec);
nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlShutdown(void);
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *dev);
uint64_t tesseraMockNowNs(void);
void tesseraMockSleepNs(uint64_t ns);
int64_t tesseraMockUsedBytes(int dev);

#define MiB (1024LL * 1024)
#define GiB (1024LL * MiB)

/* Bytes the container has accounted on the current context's device
 * (= limit - free, as the shim tells it); -1 when that cannot be read. */
static inline long long ft_used(void)
{
	size_t f = 0, t = 0;
	if (cuMemGetInfo_v2(&f, &t) != CUDA_SUCCESS)
		return -1;
	return (long long)(t - f);
}

/* "GPU-..." of mock device ord, through the (unhooked) driver call. */
static inline void ft_uuid(int ord, char *out, size_t n)
{
	CUuuid u;
	const unsigned char *b = (const unsigned char *)u.bytes;
	if (cuDeviceGetUuid(&u, ord) != CUDA_SUCCESS) {
		snprintf(out, n, "?");
		return;
	}
	snprintf(out, n,
		 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10],
		 b[11], b[12], b[13], b[14], b[15]);
}

/* Writes text as the limits file in a fresh temp dir, with the region next
 * to it, and points the shim at both. Returns the directory (static). */
static inline const char *ft_setup(const char *text)
{
	static char dir[] = "/tmp/tessera-fgpu-test-XXXXXX";
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		exit(2);
	}
	char path[256];
	snprintf(path, sizeof(path), "%s/fgpu.conf", dir);
	FILE *f = fopen(path, "w");
	if (!f) {
		perror(path);
		exit(2);
	}
	fputs(text, f);
	fclose(f);
	setenv("TESSERA_FGPU_CONF", path, 1);
	snprintf(path, sizeof(path), "%s/fgpu.region", dir);
	setenv("TESSERA_FGPU_REGION", path, 1);
	return dir;
}

/* Runs the program at the path environment variable var names, with args
 * (shell words; stderr merged), what it prints into out (n bytes,
 * NUL-terminated). Its exit status, -1 if it did not exit. */
static inline int ft_run(const char *var, const char *args, char *out, size_t n)
{
	char cmd[1024];
	snprintf(cmd, sizeof(cmd), "'%s' %s 2>&1", getenv(var), args);
	FILE *p = popen(cmd, "r");
	if (!p)
		return -1;
	size_t got = fread(out, 1, n - 1, p);
	out[got] = '\0';
	int st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static inline void ft_cleanup(const char *dir)
{
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cleanup of %s failed\n", dir);
}

#endif
