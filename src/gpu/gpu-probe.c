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
 * "UUID PID BYTES" (pids as the driver reports them: the host's).
 *
 * `tessera-gpu-probe --charge REGION INIT_PID UUID[,UUID...] ...` charges
 * sessions (one triple each: the session's region file on the host, the
 * host pid of its container's init, its devices in the order of its
 * limits file) what their processes hold beyond what the fGPU library
 * accounted (gpu/gpu_usage.h). INIT_PID 0: the driver's pids are already
 * the session's (the mock driver of one session). The agent runs it every
 * second; one line per session on stdout, "REGION CHANGED" or
 * "REGION error: ...". */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu/gpu_usage.h"
#include "gpuabi/cuda_abi.h"
#include "gpuabi/nvml_abi.h"
#include "gpuabi/uuid.h"

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

/* What the driver holds per process and device, into out (up to max);
 * how many there are, or -1 with a line on stderr. */
static int driver_processes(struct gpu_process_usage *out, int max)
{
	void *nv = load("libnvidia-ml.so.1");
	if (!nv)
		return -1;
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
		return -1;
	}
	if (nv_init() != NVML_SUCCESS || nv_count(&n) != NVML_SUCCESS) {
		fprintf(stderr, "tessera-gpu-probe: the driver did not initialize\n");
		return -1;
	}
	static nvmlProcessInfo_t procs[MAX_PROCS];
	int got = 0;
	for (unsigned i = 0; i < n; i++) {
		nvmlDevice_t d;
		char uuid[96];
		unsigned count = MAX_PROCS;
		if (nv_get(i, &d) != NVML_SUCCESS || nv_uuid(d, uuid, sizeof(uuid)) != NVML_SUCCESS ||
		    nv_procs(d, &count, procs) != NVML_SUCCESS)
			continue;
		for (unsigned k = 0; k < count; k++) {
			if (procs[k].usedGpuMemory == NVML_VALUE_NOT_AVAILABLE ||
			    procs[k].pid > INT32_MAX)
				continue;
			if (got < max) {
				snprintf(out[got].uuid, sizeof(out[got].uuid), "%.63s", uuid);
				out[got].pid = (int32_t)procs[k].pid;
				out[got].bytes = (int64_t)procs[k].usedGpuMemory;
			}
			got++;
		}
	}
	return got < max ? got : max;
}

#define MAX_DRIVER_PROCS 4096

static int list_processes(void)
{
	static struct gpu_process_usage drv[MAX_DRIVER_PROCS];
	int n = driver_processes(drv, MAX_DRIVER_PROCS);
	for (int i = 0; i < n; i++)
		printf("%s %d %lld\n", drv[i].uuid, drv[i].pid, (long long)drv[i].bytes);
	return n < 0 ? 1 : 0;
}

struct charged_session {
	const char *region_path;
	pid_t init;
	char uuids[FGPU_MAX_DEVICES][96];
	int ndev;
	struct fgpu_region_handle region;
	bool open;
	struct fgpu_region_proc before[FGPU_REGION_SLOTS];
	int n_before;
};

static int charge_sessions(int argc, char **argv)
{
	int n = argc / 3;
	if (n == 0 || argc % 3 != 0) {
		fprintf(stderr, "usage: tessera-gpu-probe --charge REGION INIT_PID UUID[,UUID...] ...\n");
		return 2;
	}
	struct charged_session *ss = calloc((size_t)n, sizeof(*ss));
	static struct gpu_process_usage drv[MAX_DRIVER_PROCS];
	if (!ss)
		return 1;
	/* Every session's accounting before the driver is asked. */
	for (int i = 0; i < n; i++) {
		struct charged_session *s = &ss[i];
		s->region_path = argv[3 * i];
		s->init = (pid_t)atoi(argv[3 * i + 1]);
		char *save = NULL;
		for (char *u = strtok_r(argv[3 * i + 2], ",", &save); u && s->ndev < FGPU_MAX_DEVICES;
		     u = strtok_r(NULL, ",", &save))
			snprintf(s->uuids[s->ndev++], sizeof(s->uuids[0]), "%.95s", u);
		struct terr err = {0};
		if (gpu_usage_open_region(&s->region, s->region_path, &err) < 0) {
			printf("%s error: %s\n", s->region_path, err.msg);
			continue;
		}
		s->open = true;
		s->n_before = fgpu_region_processes(&s->region, s->before, FGPU_REGION_SLOTS);
		if (s->n_before > FGPU_REGION_SLOTS)
			s->n_before = FGPU_REGION_SLOTS;
	}
	int nd = driver_processes(drv, MAX_DRIVER_PROCS);
	for (int i = 0; i < n; i++) {
		struct charged_session *s = &ss[i];
		if (!s->open)
			continue;
		if (nd < 0) {
			printf("%s error: the driver could not be asked\n", s->region_path);
			continue;
		}
		int changed = gpu_usage_apply(&s->region, (const char (*)[96])s->uuids, s->ndev,
					      s->before, s->n_before, drv, nd,
					      s->init > 0 ? gpu_usage_map_host_pid : gpu_usage_map_same_pid,
					      &s->init);
		printf("%s %d\n", s->region_path, changed);
		fgpu_region_close(&s->region);
	}
	free(ss);
	return nd < 0 ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "--processes") == 0)
		return list_processes();
	if (argc >= 2 && strcmp(argv[1], "--charge") == 0)
		return charge_sessions(argc - 2, argv + 2);
	if (argc != 1) {
		fprintf(stderr, "usage: tessera-gpu-probe [--processes | --charge REGION INIT_PID UUIDS ...]\n");
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
	char uuids[64][GPUABI_UUID_STR_SIZE];
	int ndev = 0;
	for (int i = 0; i < n && ndev < 64; i++) {
		CUdevice dev;
		CUcontext ctx;
		CUuuid u;
		if (cu_get(&dev, i) != CUDA_SUCCESS || cu_uuid(&u, dev) != CUDA_SUCCESS ||
		    cu_retain(&ctx, dev) != CUDA_SUCCESS)
			continue;
		gpuabi_uuid_format(u.bytes, uuids[ndev++], sizeof(uuids[0]));
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
