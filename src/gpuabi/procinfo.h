/* Liveness of processes that own slots in shared files (the fGPU region,
 * the mock driver's device state). A pid alone is not enough: pids are
 * reused, so a slot also records the process start time from
 * /proc/<pid>/stat, and a slot whose pid now belongs to a younger process
 * is dead. Async-signal-safe enough for the shim: no allocation. */
#ifndef TESSERA_GPUABI_PROCINFO_H
#define TESSERA_GPUABI_PROCINFO_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* Start time of pid in clock ticks since boot (field 22 of
 * /proc/<pid>/stat), or 0 when it cannot be read. */
uint64_t fgpu_proc_start_time(pid_t pid);

/* True when pid exists and (when start != 0 and /proc is readable) is the
 * same process that had that start time. */
bool fgpu_proc_alive(pid_t pid, uint64_t start);

/* The inode of pid's PID namespace (pid 0: this process's), which tells
 * whether two processes name pids alike; 0 when it cannot be read. */
uint64_t fgpu_proc_pid_ns(pid_t pid);

#endif
