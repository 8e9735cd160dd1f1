/* Mock NVML (libnvidia-ml.so.1) over the devices of the mock spec
 * (gpu/mock/mockspec.h), through the real NVML ABI (gpuabi/nvml_abi.h).
 * Memory "used" is the device-wide usage recorded by the mock libcuda
 * (shared state file), so nvidia-smi-like tools see what CUDA allocated. */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "gpu/mock/mockspec.h"
#include "gpuabi/nvml_abi.h"

#define MOCK_API __attribute__((visibility("default")))

struct nvmlDevice_st {
	int index;
};

static pthread_mutex_t nvml_lock = PTHREAD_MUTEX_INITIALIZER;
static int nvml_refs;
static bool nvml_loaded;
static struct mock_spec nvml_spec;
static struct nvmlDevice_st nvml_devs[MOCK_MAX_DEVICES];

static nvmlReturn_t nvml_init(void)
{
	pthread_mutex_lock(&nvml_lock);
	if (!nvml_loaded) {
		struct terr err;
		if (mock_spec_load(&nvml_spec, &err) < 0)
			nvml_spec.count = 0;
		for (int i = 0; i < MOCK_MAX_DEVICES; i++)
			nvml_devs[i].index = i;
		mock_usage_init(&nvml_spec);
		nvml_loaded = true;
	}
	nvml_refs++;
	pthread_mutex_unlock(&nvml_lock);
	return NVML_SUCCESS;
}

MOCK_API nvmlReturn_t nvmlInit_v2(void) { return nvml_init(); }
MOCK_API nvmlReturn_t nvmlInit(void) { return nvml_init(); }
MOCK_API nvmlReturn_t nvmlInitWithFlags(unsigned int flags) { (void)flags; return nvml_init(); }

MOCK_API nvmlReturn_t nvmlShutdown(void)
{
	pthread_mutex_lock(&nvml_lock);
	nvmlReturn_t rc = NVML_SUCCESS;
	if (nvml_refs == 0)
		rc = NVML_ERROR_UNINITIALIZED;
	else
		nvml_refs--;
	pthread_mutex_unlock(&nvml_lock);
	return rc;
}

static bool nvml_ready(void)
{
	pthread_mutex_lock(&nvml_lock);
	bool r = nvml_refs > 0;
	pthread_mutex_unlock(&nvml_lock);
	return r;
}

static int nvml_index(nvmlDevice_t d)
{
	if (!d || d < &nvml_devs[0] || d >= &nvml_devs[nvml_spec.count])
		return -1;
	return d->index;
}

MOCK_API nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
	if (!nvml_ready())
		return NVML_ERROR_UNINITIALIZED;
	if (!count)
		return NVML_ERROR_INVALID_ARGUMENT;
	*count = (unsigned int)nvml_spec.count;
	return NVML_SUCCESS;
}

MOCK_API nvmlReturn_t nvmlDeviceGetCount(unsigned int *count)
{
	return nvmlDeviceGetCount_v2(count);
}

MOCK_API nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *dev)
{
	if (!nvml_ready())
		return NVML_ERROR_UNINITIALIZED;
	if (!dev || index >= (unsigned int)nvml_spec.count)
		return NVML_ERROR_INVALID_ARGUMENT;
	*dev = &nvml_devs[index];
	return NVML_SUCCESS;
}

MOCK_API nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *dev)
{
	return nvmlDeviceGetHandleByIndex_v2(index, dev);
}

MOCK_API nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *dev)
{
	if (!nvml_ready())
		return NVML_ERROR_UNINITIALIZED;
	if (!uuid || !dev)
		return NVML_ERROR_INVALID_ARGUMENT;
	for (int i = 0; i < nvml_spec.count; i++)
		if (strcmp(nvml_spec.dev[i].uuid_str, uuid) == 0) {
			*dev = &nvml_devs[i];
			return NVML_SUCCESS;
		}
	return NVML_ERROR_NOT_FOUND;
}

MOCK_API nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t dev, unsigned int *index)
{
	if (!nvml_ready())
		return NVML_ERROR_UNINITIALIZED;
	int i = nvml_index(dev);
	if (i < 0 || !index)
		return NVML_ERROR_INVALID_ARGUMENT;
	*index = (unsigned int)i;
	return NVML_SUCCESS;
}

static nvmlReturn_t nvml_copy(char *dst, unsigned int len, const char *src)
{
	if (!dst)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (strlen(src) + 1 > len)
		return NVML_ERROR_INSUFFICIENT_SIZE;
	memcpy(dst, src, strlen(src) + 1);
	return NVML_SUCCESS;
}

MOCK_API nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t dev, char *name, unsigned int len)
{
	if (!nvml_ready())
		return NVML_ERROR_UNINITIALIZED;
	if (nvml_index(dev) < 0)
		return NVML_ERROR_INVALID_ARGUMENT;
	return nvml_copy(name, len, MOCK_DEVICE_NAME);
}

MOCK_API nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t dev, char *uuid, unsigned int len)
{
	if (!nvml_ready())
		return NVML_ERROR_UNINITIALIZED;
	int i = nvml_index(dev);
	if (i < 0)
		return NVML_ERROR_INVALID_ARGUMENT;
	return nvml_copy(uuid, len, nvml_spec.dev[i].uuid_str);
}

static nvmlReturn_t nvml_mem(nvmlDevice_t dev, unsigned long long *total,
			     unsigned long long *used, unsigned long long *freep)
{
	if (!nvml_ready())
		return NVML_ERROR_UNINITIALIZED;
	int i = nvml_index(dev);
	if (i < 0)
		return NVML_ERROR_INVALID_ARGUMENT;
	int64_t t = nvml_spec.dev[i].mem, u = mock_usage_get(i);
	if (u > t)
		u = t;
	*total = (unsigned long long)t;
	*used = (unsigned long long)u;
	*freep = (unsigned long long)(t - u);
	return NVML_SUCCESS;
}

MOCK_API nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t dev, nvmlMemory_t *m)
{
	if (!m)
		return NVML_ERROR_INVALID_ARGUMENT;
	return nvml_mem(dev, &m->total, &m->used, &m->free);
}

MOCK_API nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t dev, nvmlMemory_v2_t *m)
{
	if (!m)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (m->version != nvmlMemory_v2)
		return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
	m->reserved = 0;
	return nvml_mem(dev, &m->total, &m->used, &m->free);
}

/* Processes holding memory on the device, as the host sees them: the
 * mock does not tell compute from graphics use. */
MOCK_API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t dev,
							      unsigned int *count,
							      nvmlProcessInfo_t *infos)
{
	if (!nvml_ready())
		return NVML_ERROR_UNINITIALIZED;
	int i = nvml_index(dev);
	if (i < 0 || !count || (*count > 0 && !infos))
		return NVML_ERROR_INVALID_ARGUMENT;
	int32_t pids[256];
	int64_t bytes[256];
	int n = mock_usage_processes(i, pids, bytes, 256);
	if (n > 256)
		n = 256;
	if ((unsigned int)n > *count) {
		*count = (unsigned int)n;
		return NVML_ERROR_INSUFFICIENT_SIZE;
	}
	for (int k = 0; k < n; k++)
		infos[k] = (nvmlProcessInfo_t){ .pid = (unsigned int)pids[k],
			.usedGpuMemory = (unsigned long long)bytes[k],
			.gpuInstanceId = 0xffffffffu, .computeInstanceId = 0xffffffffu };
	*count = (unsigned int)n;
	return NVML_SUCCESS;
}

MOCK_API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t dev,
							      unsigned int *count,
							      nvmlProcessInfo_t *infos)
{
	return nvmlDeviceGetComputeRunningProcesses_v3(dev, count, infos);
}

/* Utilisation as the real NVML gives it: the share of the last sample
 * period in which a kernel ran, from the simulated kernel time the
 * session's processes have run (mock_usage_busy). A process's first call
 * waits one period (1/6 s, the real driver's shortest) to have a sample;
 * later calls close the period when 1/6 s has passed since it opened (it
 * may be longer: the real driver samples all the time, the mock only when
 * asked) and otherwise answer the last period's figure, so a tool asking
 * for each device in turn gets one period for all. The mock does not model
 * memory traffic: memory utilisation is 0. */
#define NVML_UTIL_PERIOD_NS (1000000000LL / 6)

static pthread_mutex_t nvml_util_lock = PTHREAD_MUTEX_INITIALIZER;
static int64_t nvml_util_start_ns;             /* the open period's start; 0: none */
static uint64_t nvml_util_start_busy[MOCK_MAX_DEVICES];
static unsigned int nvml_util_pct[MOCK_MAX_DEVICES];

static int64_t nvml_mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void nvml_util_open_period(int64_t now)
{
	nvml_util_start_ns = now;
	for (int d = 0; d < nvml_spec.count; d++)
		nvml_util_start_busy[d] = mock_usage_busy_get(d);
}

MOCK_API nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t dev, nvmlUtilization_t *u)
{
	if (!nvml_ready())
		return NVML_ERROR_UNINITIALIZED;
	int i = nvml_index(dev);
	if (i < 0 || !u)
		return NVML_ERROR_INVALID_ARGUMENT;
	pthread_mutex_lock(&nvml_util_lock);
	int64_t now = nvml_mono_ns();
	if (!nvml_util_start_ns) {
		nvml_util_open_period(now);
		struct timespec ts = { .tv_nsec = NVML_UTIL_PERIOD_NS };
		while (nanosleep(&ts, &ts) != 0)
			;
		now = nvml_mono_ns();
	}
	if (now - nvml_util_start_ns >= NVML_UTIL_PERIOD_NS) {
		double span = (double)(now - nvml_util_start_ns);
		for (int d = 0; d < nvml_spec.count; d++) {
			uint64_t b = mock_usage_busy_get(d);
			double pct = b > nvml_util_start_busy[d]
				? (double)(b - nvml_util_start_busy[d]) / span * 100.0 : 0;
			/* Launches add their simulated time when submitted, so a
			 * period can hold more than its length. */
			nvml_util_pct[d] = pct > 100 ? 100 : (unsigned int)(pct + 0.5);
		}
		nvml_util_open_period(now);
	}
	u->gpu = nvml_util_pct[i];
	u->memory = 0;
	pthread_mutex_unlock(&nvml_util_lock);
	return NVML_SUCCESS;
}

MOCK_API nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int len)
{
	if (!nvml_ready())
		return NVML_ERROR_UNINITIALIZED;
	return nvml_copy(version, len, MOCK_DRIVER_VERSION);
}

MOCK_API nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *v)
{
	if (!v)
		return NVML_ERROR_INVALID_ARGUMENT;
	*v = MOCK_CUDA_VERSION;
	return NVML_SUCCESS;
}

MOCK_API nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v)
{
	return nvmlSystemGetCudaDriverVersion(v);
}

MOCK_API const char *nvmlErrorString(nvmlReturn_t r)
{
	switch (r) {
	case NVML_SUCCESS: return "Success";
	case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
	case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
	case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
	case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
	case NVML_ERROR_ALREADY_INITIALIZED: return "Already Initialized";
	case NVML_ERROR_NOT_FOUND: return "Not Found";
	case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
	case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
	case NVML_ERROR_FUNCTION_NOT_FOUND: return "Function Not Found";
	case NVML_ERROR_MEMORY: return "Insufficient Memory";
	case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument Version Mismatch";
	default: return "Unknown Error";
	}
}
