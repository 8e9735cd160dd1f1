/* gpu-info: what a container sees of its GPUs, through CUDA and NVML.
 *
 *   gpu-info                      human-readable summary
 *   gpu-info --json               {"devices":[{...}]} on stdout
 *   gpu-info --alloc SIZE [--hold SECONDS] [--device N]
 *                                 allocate device memory (and hold it);
 *                                 on failure prints a line containing
 *                                 "out of memory" (stderr), exits 1
 *
 * It links against the C library only and dlopens libcuda.so.1 and
 * libnvidia-ml.so.1 like user code does, so it sees exactly what the fGPU
 * shim (loaded through /etc/ld.so.preload) lets user code see. The SM limit
 * is not visible through either API, so it is read from the limits file
 * with the shim's own parser. */
#include <dlfcn.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/units.h"
#include "gpuabi/conf.h"
#include "gpuabi/cuda_abi.h"
#include "gpuabi/nvml_abi.h"
#include "gpuabi/uuid.h"

#define GI_MAX 64

struct gi_dev {
	int index;
	char name[256];
	char uuid[96];
	unsigned long long total, used, free;
	int sms;
	int have_mem;
	int sm_limit;           /* compute share from the limits file, percent */
};

struct gi_cuda {
	CUresult (*init)(unsigned int);
	CUresult (*count)(int *);
	CUresult (*get)(CUdevice *, int);
	CUresult (*name)(char *, int, CUdevice);
	CUresult (*uuid)(CUuuid *, CUdevice);
	CUresult (*attr)(int *, int, CUdevice);
	CUresult (*total)(size_t *, CUdevice);
	CUresult (*version)(int *);
	CUresult (*retain)(CUcontext *, CUdevice);
	CUresult (*release)(CUdevice);
	CUresult (*set_current)(CUcontext);
	CUresult (*alloc)(CUdeviceptr *, size_t);
	CUresult (*free)(CUdeviceptr);
	CUresult (*errstr)(CUresult, const char **);
	CUresult (*errname)(CUresult, const char **);
};

struct gi_nvml {
	nvmlReturn_t (*init)(void);
	nvmlReturn_t (*shutdown)(void);
	nvmlReturn_t (*count)(unsigned int *);
	nvmlReturn_t (*handle)(unsigned int, nvmlDevice_t *);
	nvmlReturn_t (*uuid)(nvmlDevice_t, char *, unsigned int);
	nvmlReturn_t (*mem)(nvmlDevice_t, nvmlMemory_t *);
	nvmlReturn_t (*driver)(char *, unsigned int);
};

#define GI_SYM(lib, field, name) \
	(*(void **)&(field) = dlsym((lib), (name)))

static int gi_load_cuda(struct gi_cuda *c)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW);
	if (!h)
		return -1;
	int ok = GI_SYM(h, c->init, "cuInit") && GI_SYM(h, c->count, "cuDeviceGetCount") &&
		 GI_SYM(h, c->get, "cuDeviceGet") && GI_SYM(h, c->name, "cuDeviceGetName") &&
		 GI_SYM(h, c->uuid, "cuDeviceGetUuid") &&
		 GI_SYM(h, c->attr, "cuDeviceGetAttribute") &&
		 GI_SYM(h, c->total, "cuDeviceTotalMem_v2") &&
		 GI_SYM(h, c->version, "cuDriverGetVersion") &&
		 GI_SYM(h, c->retain, "cuDevicePrimaryCtxRetain") &&
		 GI_SYM(h, c->release, "cuDevicePrimaryCtxRelease_v2") &&
		 GI_SYM(h, c->set_current, "cuCtxSetCurrent") &&
		 GI_SYM(h, c->alloc, "cuMemAlloc_v2") && GI_SYM(h, c->free, "cuMemFree_v2") &&
		 GI_SYM(h, c->errstr, "cuGetErrorString") &&
		 GI_SYM(h, c->errname, "cuGetErrorName");
	return ok ? 0 : -1;
}

static int gi_load_nvml(struct gi_nvml *n)
{
	void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW);
	if (!h)
		return -1;
	int ok = GI_SYM(h, n->init, "nvmlInit_v2") && GI_SYM(h, n->shutdown, "nvmlShutdown") &&
		 GI_SYM(h, n->count, "nvmlDeviceGetCount_v2") &&
		 GI_SYM(h, n->handle, "nvmlDeviceGetHandleByIndex_v2") &&
		 GI_SYM(h, n->uuid, "nvmlDeviceGetUUID") &&
		 GI_SYM(h, n->mem, "nvmlDeviceGetMemoryInfo") &&
		 GI_SYM(h, n->driver, "nvmlSystemGetDriverVersion");
	return ok ? 0 : -1;
}

static const char *gi_cuda_err(const struct gi_cuda *c, CUresult r, char *buf, size_t n)
{
	const char *s = NULL, *name = NULL;
	if (c->errstr)
		c->errstr(r, &s);
	if (c->errname)
		c->errname(r, &name);
	snprintf(buf, n, "%s (%s)", s ? s : "unknown error", name ? name : "?");
	return buf;
}

/* JSON string escaping for names/UUIDs coming from a driver. */
static void gi_json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch == '"' || ch == '\\')
			printf("\\%c", ch);
		else if (ch < 0x20)
			printf("\\u%04x", ch);
		else
			putchar(ch);
	}
	putchar('"');
}

static int gi_usage(void)
{
	fprintf(stderr, "usage: gpu-info [--json] | --alloc SIZE [--hold SECONDS] [--device N]\n");
	return 2;
}

int main(int argc, char **argv)
{
	int json = 0, device = 0;
	const char *alloc_s = NULL;
	long hold = 0;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0) {
			json = 1;
		} else if (strcmp(argv[i], "--alloc") == 0 && i + 1 < argc) {
			alloc_s = argv[++i];
		} else if (strcmp(argv[i], "--hold") == 0 && i + 1 < argc) {
			char *e;
			hold = strtol(argv[++i], &e, 10);
			if (*e || hold < 0)
				return gi_usage();
		} else if (strcmp(argv[i], "--device") == 0 && i + 1 < argc) {
			char *e;
			device = (int)strtol(argv[++i], &e, 10);
			if (*e || device < 0)
				return gi_usage();
		} else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			gi_usage();
			return 0;
		} else {
			return gi_usage();
		}
	}

	struct gi_cuda cu = {0};
	struct gi_nvml nv = {0};
	int have_cuda = gi_load_cuda(&cu) == 0;
	int have_nvml = gi_load_nvml(&nv) == 0;
	char ebuf[256];

	if (alloc_s) {
		int64_t bytes;
		struct terr err;
		if (units_parse_size(alloc_s, &bytes, &err) < 0 || bytes <= 0) {
			fprintf(stderr, "gpu-info: --alloc %s: %s\n", alloc_s,
				bytes <= 0 ? "size must be positive" : err.msg);
			return 2;
		}
		if (!have_cuda) {
			fprintf(stderr, "gpu-info: cannot load libcuda.so.1: %s\n", dlerror());
			return 1;
		}
		CUresult r;
		CUdevice dev;
		CUcontext ctx;
		CUdeviceptr p;
		if ((r = cu.init(0)) != CUDA_SUCCESS || (r = cu.get(&dev, device)) != CUDA_SUCCESS ||
		    (r = cu.retain(&ctx, dev)) != CUDA_SUCCESS ||
		    (r = cu.set_current(ctx)) != CUDA_SUCCESS) {
			fprintf(stderr, "gpu-info: device %d: %s\n", device,
				gi_cuda_err(&cu, r, ebuf, sizeof(ebuf)));
			return 1;
		}
		char human[64];
		units_format_size(bytes, human, sizeof(human));
		r = cu.alloc(&p, (size_t)bytes);
		if (r != CUDA_SUCCESS) {
			/* The message says "out of memory" for OOM whatever the driver's
			 * wording, since callers match on it. */
			gi_cuda_err(&cu, r, ebuf, sizeof(ebuf));
			fprintf(stderr, "gpu-info: allocating %s on device %d failed: %s%s\n",
				human, device, ebuf,
				r == CUDA_ERROR_OUT_OF_MEMORY && !strstr(ebuf, "out of memory")
					? ": out of memory" : "");
			cu.release(dev);
			return 1;
		}
		printf("allocated %s (%" PRId64 " bytes) on device %d\n", human, bytes, device);
		fflush(stdout);
		if (hold > 0) {
			struct timespec ts = { .tv_sec = hold };
			while (nanosleep(&ts, &ts) != 0)
				;
		}
		cu.free(p);
		cu.release(dev);
		return 0;
	}

	struct fgpu_conf conf;
	struct terr err;
	bool have_conf = fgpu_conf_load(&conf, &err) == 0;
	if (!have_conf) {
		fprintf(stderr, "gpu-info: limits file: %s\n", err.msg);
		memset(&conf, 0, sizeof(conf));
	}

	static struct gi_dev devs[GI_MAX];
	int n = 0, cuda_version = 0;
	char driver[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = "";
	if (have_cuda && cu.init(0) == CUDA_SUCCESS && cu.count(&n) == CUDA_SUCCESS) {
		if (n > GI_MAX)
			n = GI_MAX;
		cu.version(&cuda_version);
		for (int i = 0; i < n; i++) {
			CUdevice d;
			CUuuid u;
			size_t total = 0;
			devs[i].index = i;
			if (cu.get(&d, i) != CUDA_SUCCESS)
				continue;
			cu.name(devs[i].name, sizeof(devs[i].name), d);
			if (cu.uuid(&u, d) == CUDA_SUCCESS)
				gpuabi_uuid_format(u.bytes, devs[i].uuid, sizeof(devs[i].uuid));
			cu.attr(&devs[i].sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d);
			if (cu.total(&total, d) == CUDA_SUCCESS)
				devs[i].total = total;
			devs[i].free = devs[i].total;
		}
	} else {
		n = 0;
	}
	if (have_nvml && nv.init() == NVML_SUCCESS) {
		nv.driver(driver, sizeof(driver));
		unsigned int cnt = 0;
		nv.count(&cnt);
		for (unsigned int j = 0; j < cnt; j++) {
			nvmlDevice_t h;
			char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
			nvmlMemory_t m;
			if (nv.handle(j, &h) != NVML_SUCCESS ||
			    nv.uuid(h, uuid, sizeof(uuid)) != NVML_SUCCESS ||
			    nv.mem(h, &m) != NVML_SUCCESS)
				continue;
			for (int i = 0; i < n; i++)
				if (strcmp(devs[i].uuid, uuid) == 0) {
					devs[i].total = m.total;
					devs[i].used = m.used;
					devs[i].free = m.free;
					devs[i].have_mem = 1;
				}
		}
		nv.shutdown();
	}

	for (int i = 0; i < n; i++)
		devs[i].sm_limit = conf.enabled
			? fgpu_conf_sm_limit(&conf, fgpu_conf_index(&conf, devs[i].uuid, i)) : 100;
	if (json) {
		printf("{\"devices\":[");
		for (int i = 0; i < n; i++) {
			printf("%s{\"index\":%d,\"uuid\":", i ? "," : "", devs[i].index);
			gi_json_str(devs[i].uuid);
			printf(",\"name\":");
			gi_json_str(devs[i].name);
			printf(",\"memory_total\":%llu,\"memory_used\":%llu,\"memory_free\":%llu,"
			       "\"sm_limit_percent\":%d}",
			       devs[i].total, devs[i].used, devs[i].free, devs[i].sm_limit);
		}
		printf("]}\n");
		return 0;
	}

	if (!have_cuda)
		printf("CUDA: libcuda.so.1 not found\n");
	else
		printf("CUDA driver API %d.%d", cuda_version / 1000, cuda_version % 1000 / 10);
	if (have_cuda)
		printf(", NVML driver %s\n", driver[0] ? driver : "unavailable");
	printf("fGPU: %s\n", conf.fgpu[0] ? conf.fgpu : "not set");
	if (n == 0)
		printf("no GPU visible\n");
	for (int i = 0; i < n; i++) {
		char t[64], u[64], f[64];
		units_format_size((int64_t)devs[i].total, t, sizeof(t));
		units_format_size((int64_t)devs[i].used, u, sizeof(u));
		units_format_size((int64_t)devs[i].free, f, sizeof(f));
		printf("GPU %d: %s (%s), %d SMs, compute share %d%%\n", devs[i].index, devs[i].name,
		       devs[i].uuid, devs[i].sms, devs[i].sm_limit);
		printf("  memory: %s total, %s used, %s free%s\n", t, u, f,
		       devs[i].have_mem ? "" : " (NVML unavailable)");
	}
	return 0;
}
