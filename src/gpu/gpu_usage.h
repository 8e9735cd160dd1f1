/* Charging GPU sessions what the driver holds for their processes beyond
 * what the fGPU library accounted (docs/fgpu.md, "Memory the driver takes
 * by itself").
 *
 * Inside a process the library sees every allocation call, but not what
 * the driver takes on its own: a context growing as modules load lazily
 * (CUDA 12.2+ default), a module's __device__ variables, the runtime's
 * buffers, page rounding. The driver's per-process figure (NVML, the one
 * nvidia-smi shows) has all of it, but names processes by host pid, which
 * a process in a container cannot map to itself. The agent can: every
 * round it runs `tessera-gpu-probe --charge` with its running GPU
 * sessions, which reads the driver's list, maps each pid into the
 * session's namespace, and writes the difference into the process's slot
 * of the session's region, where it counts against the share like an
 * allocation (gpuabi/region.h). That runs in the probe, not in the agent:
 * the region file lies in a directory the container can write, and a
 * container that truncates it or leaves its lock held must cost a killed
 * helper, not the agent.
 *
 * The difference is taken against the larger of the process's accounting
 * just before and just after the driver was asked, so an allocation freed
 * in between is never mistaken for untracked memory (which would refuse
 * allocations that fit); one made in between is seen a round later. */
#ifndef TESSERA_GPU_GPU_USAGE_H
#define TESSERA_GPU_GPU_USAGE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "gpu/gpu.h"
#include "gpuabi/fgpu_contract.h"
#include "gpuabi/region.h"

/* How often the agent takes the driver's figures. */
#define GPU_USAGE_INTERVAL_MS 1000

/* A driver pid in the session's terms: its pid there and its start time
 * (0: unknown, then only the pid is matched). false: not the session's. */
typedef bool (*gpu_usage_pid_map)(int32_t driver_pid, void *ud, pid_t *ns_pid, uint64_t *start);

/* Real drivers report host pids: ud points at the host pid of the
 * session's init process; a pid is the session's when it lives in the
 * same PID namespace, and is then named by its innermost pid (NSpid). */
bool gpu_usage_map_host_pid(int32_t driver_pid, void *ud, pid_t *ns_pid, uint64_t *start);

/* The mock driver records pids as its processes see them. */
bool gpu_usage_map_same_pid(int32_t driver_pid, void *ud, pid_t *ns_pid, uint64_t *start);

/* Opens the region at path as an observer, refusing anything but a
 * regular file (a device node or FIFO the container put there). */
int gpu_usage_open_region(struct fgpu_region_handle *h, const char *path, struct terr *err);

/* Sets the untracked figure of every process in the region h: for each of
 * the session's devices (uuids[d], in the order of its limits file), what
 * the driver holds for the process (drv, n_drv) less the larger of its
 * accounting in before (a snapshot taken before the driver was asked) and
 * now, never below 0. A process the driver does not list holds nothing
 * untracked. Returns how many figures changed. */
int gpu_usage_apply(struct fgpu_region_handle *h, const char uuids[][96], int ndev,
		    const struct fgpu_region_proc *before, int n_before,
		    const struct gpu_process_usage *drv, int n_drv, gpu_usage_pid_map map,
		    void *map_ud);

#endif
