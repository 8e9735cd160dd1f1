/* GPU discovery for the agent: NVML (dlopen of libnvidia-ml.so.1, plus
 * libcuda.so.1 for SM counts) where a driver is present, or mock devices
 * from a spec `COUNTxMEM[:SMS],...` that are advertised and allocated
 * exactly like real ones. Also finds the driver files a GPU container
 * needs, through the ld cache, as nvidia-container-toolkit does. */
#ifndef TESSERA_GPU_GPU_H
#define TESSERA_GPU_GPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

#define GPU_MAX_DEVICES 16

struct gpu_device {
	int index;
	char uuid[64];        /* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" */
	char name[96];
	int64_t memory;       /* bytes */
	int sms;
	int minor;            /* /dev/nvidia<minor>; -1 for mock devices */
	int64_t context_overhead; /* bytes a CUDA context takes here; 0: unknown */
};

struct gpu_inventory {
	int n;
	struct gpu_device dev[GPU_MAX_DEVICES];
	bool mock;
	char mock_spec[256];  /* the spec the mock devices came from */
	char driver_version[64];
};

/* Mock devices from a spec; UUIDs are the mock driver's (same spec, same
 * UUIDs), so limits written by the agent match what the driver shows. */
int gpu_inventory_mock(const char *spec, struct gpu_inventory *inv, struct terr *err);

/* Real devices through NVML. No driver on the host is not an error: n = 0.
 * lib_dir (may be NULL) is searched before the default loader path. */
int gpu_inventory_nvml(const char *lib_dir, struct gpu_inventory *inv, struct terr *err);

/* Measures context_overhead of every device by running the probe program
 * (tessera-gpu-probe, src/gpu/gpu-probe.c) in a process of its own, with
 * lib_dir (may be NULL) first on its library path; for mock devices it
 * gets the inventory's spec and a private usage file in state_dir. Waits
 * at most timeout_ms. Returns how many devices were measured (the others
 * keep 0), or -errno when the probe could not be run. */
int gpu_probe_context_overhead(struct gpu_inventory *inv, const char *probe_path,
			       const char *lib_dir, const char *state_dir, int timeout_ms,
			       struct terr *err);

/* What the driver holds for one process on one device. */
struct gpu_process_usage {
	char uuid[64];
	int32_t pid;          /* as the driver reports it (real: the host's) */
	int64_t bytes;
};

/* Runs tessera-gpu-probe --charge with sessions (n_args strings: REGION
 * INIT_PID UUIDS per session, gpu/gpu_usage.h); with mock_spec_file set,
 * the probe loads the mock from lib_dir with that spec and usage file (a
 * mock session's own). out gets what it printed (one line per
 * session). 0, or -errno when it failed or ran past timeout_ms (it is
 * then killed: a session whose region misbehaves costs a helper). */
int gpu_charge_sessions(const char *probe_path, const char *lib_dir, const char *mock_spec_file,
			const char *mock_state_file, char *const *sessions, int n_args,
			int timeout_ms, char *out, size_t out_len, struct terr *err);

/* From `ldconfig -p` output, the paths of the wanted sonames for this
 * architecture (x86-64), in wanted order: the first match of each, or for
 * a wanted name ending in '.' (a soname with the driver's version in it)
 * every soname that starts with it. *out malloc'd; caller frees each
 * string and the array. */
int gpu_parse_ldconfig(const char *text, const char *const *wanted, char ***out, size_t *n,
		       struct terr *err);

/* Host driver files to bind read-only into a real-GPU container: the
 * driver libraries found by the ld cache and nvidia-smi. */
int gpu_driver_files(char ***out, size_t *n, struct terr *err);

/* Where a host driver file goes in a session: a library into the
 * multiarch directory that Debian's and Ubuntu's loader searches
 * (FGPU_DRIVER_LIB_DIR, where the mock driver goes too), a program into
 * /usr/bin, whatever the host's own path (RHEL-like hosts keep the driver
 * in /usr/lib64, which those images' loader never searches). Writes the
 * path into buf (n bytes); false when it does not fit. */
bool gpu_driver_target(const char *host_path, char *buf, size_t n);

#endif
