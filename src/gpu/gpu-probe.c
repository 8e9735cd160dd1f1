/* tessera-gpu-probe: how much device memory a bare CUDA context takes on
 * each GPU of this host, for the fGPU library's context_overhead (the
 * share must count it: a context costs hundreds of MiB on a large GPU,
 * per process).
 *
 * The agent runs it once at start, as a separate process so that it never
 * holds a context itself and a driver fault cannot take it down. It
 * retains the primary context of every device, then reads, through NVML,
 * how much memory the driver accounts to this process on each (the
 * per-process figure nvidia-smi shows), before any allocation. Output: one
 * line per device, "UUID BYTES"; a device whose figure cannot be read is
 * left out. Exit 0 when the driver could be asked at all, else 1 with a
 * line on stderr.
 *
 * The figure is a floor: with lazy module loading (CUDA 12.2+ default) a
 * context grows as kernels are first used. Under a PID namespace other
 * than the driver's the pids do not match and nothing is printed.
 *
 * `tessera-gpu-probe --processes` makes no context: it prints what the
 * driver holds for every process on every device, one line each,
 * "UUID PID BYTES" (pids as the driver reports them: the host's). The
 * agent runs it every few seconds to charge GPU sessions what their
 * processes hold beyond what the fGPU library accounted. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fgpu/cuda_abi.h"
#include "fgpu/nvml_abi.h"

#define MAX_PROCS 1024

static void *load(const char *name)
{
	void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		fprintf(stderr, "tessera-gpu-probe: cannot load %s: %s\n", name, dlerror());
	return h;
}

typedef nvmlReturn_t (*procs_fn)(nvmlDevice_t, unsigned *, nvmlProcessInfo_t *);

static procs_fn find_procs(void *nv)
{
	procs_fn f = (procs_fn)dlsym(nv, "nvmlDeviceGetComputeRunningProcesses_v3");
	return f ? f : (procs_fn)dlsym(nv, "nvmlDeviceGetComputeRunningProcesses_v2");
}

static int list_processes(void)
{
	void *nv = load("libnvidia-ml.so.1");
	if (!nv)
		return 1;
	nvmlReturn_t (*nv_init)(void) = (nvmlReturn_t (*)(void))dlsym(nv, "nvmlInit_v2");
	nvmlReturn_t (*nv_count)(unsigned *) = (nvmlReturn_t (*)(unsigned *))dlsym(nv, "nvmlDeviceGetCount_v2");
	nvmlReturn_t (*nv_get)(unsigned, nvmlDevice_t *) =
		(nvmlReturn_t (*)(unsigned, nvmlDevice_t *))dlsym(nv, "nvmlDeviceGetHandleByIndex_v2");
	nvmlReturn_t (*nv_uuid)(nvmlDevice_t, char *, unsigned) =
		(nvmlReturn_t (*)(nvmlDevice_t, char *, unsigned))dlsym(nv, "nvmlDeviceGetUUID");
	procs_fn nv_procs = find_procs(nv);
	unsigned n = 0;
	if (!nv_init || !nv_count || !nv_get || !nv_uuid || !nv_procs) {
		fprintf(stderr, "tessera-gpu-probe: the driver lacks an entry point the probe needs\n");
		return 1;
	}
	if (nv_init() != NVML_SUCCESS || nv_count(&n) != NVML_SUCCESS) {
		fprintf(stderr, "tessera-gpu-probe: the driver did not initialize\n");
		return 1;
	}
	static nvmlProcessInfo_t procs[MAX_PROCS];
	for (unsigned i = 0; i < n; i++) {
		nvmlDevice_t d;
		char uuid[96];
		unsigned count = MAX_PROCS;
		if (nv_get(i, &d) != NVML_SUCCESS || nv_uuid(d, uuid, sizeof(uuid)) != NVML_SUCCESS ||
		    nv_procs(d, &count, procs) != NVML_SUCCESS)
			continue;
		for (unsigned k = 0; k < count; k++)
			if (procs[k].usedGpuMemory != NVML_VALUE_NOT_AVAILABLE)
				printf("%s %u %llu\n", uuid, procs[k].pid, procs[k].usedGpuMemory);
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "--processes") == 0)
		return list_processes();
	if (argc != 1) {
		fprintf(stderr, "usage: tessera-gpu-probe [--processes]\n");
		return 2;
	}
	void *cu = load("libcuda.so.1"), *nv = load("libnvidia-ml.so.1");
	if (!cu || !nv)
		return 1;
	CUresult (*cu_init)(unsigned) = (CUresult (*)(unsigned))dlsym(cu, "cuInit");
	CUresult (*cu_count)(int *) = (CUresult (*)(int *))dlsym(cu, "cuDeviceGetCount");
	CUresult (*cu_get)(CUdevice *, int) = (CUresult (*)(CUdevice *, int))dlsym(cu, "cuDeviceGet");
	CUresult (*cu_retain)(CUcontext *, CUdevice) =
		(CUresult (*)(CUcontext *, CUdevice))dlsym(cu, "cuDevicePrimaryCtxRetain");
	CUresult (*cu_uuid)(CUuuid *, CUdevice) =
		(CUresult (*)(CUuuid *, CUdevice))dlsym(cu, "cuDeviceGetUuid");
	nvmlReturn_t (*nv_init)(void) = (nvmlReturn_t (*)(void))dlsym(nv, "nvmlInit_v2");
	nvmlReturn_t (*nv_by_uuid)(const char *, nvmlDevice_t *) =
		(nvmlReturn_t (*)(const char *, nvmlDevice_t *))dlsym(nv, "nvmlDeviceGetHandleByUUID");
	procs_fn nv_procs = find_procs(nv);
	int n = 0;
	if (!cu_init || !cu_count || !cu_get || !cu_retain || !cu_uuid || !nv_init ||
	    !nv_by_uuid || !nv_procs) {
		fprintf(stderr, "tessera-gpu-probe: the driver lacks an entry point the probe needs\n");
		return 1;
	}
	if (cu_init(0) != CUDA_SUCCESS || cu_count(&n) != CUDA_SUCCESS || nv_init() != NVML_SUCCESS) {
		fprintf(stderr, "tessera-gpu-probe: the driver did not initialize\n");
		return 1;
	}
	char uuids[64][48];
	int ndev = 0;
	for (int i = 0; i < n && ndev < 64; i++) {
		CUdevice dev;
		CUcontext ctx;
		CUuuid u;
		if (cu_get(&dev, i) != CUDA_SUCCESS || cu_uuid(&u, dev) != CUDA_SUCCESS ||
		    cu_retain(&ctx, dev) != CUDA_SUCCESS)
			continue;
		const unsigned char *b = (const unsigned char *)u.bytes;
		snprintf(uuids[ndev++], sizeof(uuids[0]),
			 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
			 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11],
			 b[12], b[13], b[14], b[15]);
	}
	static nvmlProcessInfo_t procs[MAX_PROCS];
	unsigned int me = (unsigned int)getpid();
	for (int i = 0; i < ndev; i++) {
		nvmlDevice_t d;
		unsigned int count = MAX_PROCS;
		if (nv_by_uuid(uuids[i], &d) != NVML_SUCCESS ||
		    nv_procs(d, &count, procs) != NVML_SUCCESS)
			continue;
		for (unsigned int k = 0; k < count; k++)
			if (procs[k].pid == me && procs[k].usedGpuMemory != NVML_VALUE_NOT_AVAILABLE)
				printf("%s %llu\n", uuids[i], procs[k].usedGpuMemory);
	}
	return 0;
}
