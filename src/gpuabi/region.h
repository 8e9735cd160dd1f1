/* The per-container accounting region: one small file (FGPU_REGION_PATH,
 * on a per-session directory the agent mounts read-write) mapped by every
 * process of the container, so a share is enforced across processes.
 *
 * Layout (version FGPU_REGION_VERSION; a process that finds another
 * version or size refuses to share it and falls back to a private region,
 * so mixed shim versions never misread each other):
 *
 *   header   magic "TFGP", version, total size, sizeof(pthread_mutex_t)
 *   lock     pthread mutex, PTHREAD_PROCESS_SHARED + PTHREAD_MUTEX_ROBUST
 *   total[d] bytes accounted on device d (sum of the slots)
 *   pace[d]  token bucket of device d (pacing.h), shared by the container
 *   slots[]  one per live process: pid, start time, used[d], untracked[d]
 *
 * Robustness: a process killed while holding the lock makes the next
 * locker get EOWNERDEAD; it then drops the slots of dead processes,
 * recomputes the totals from the slots (the dead owner may have been half
 * way through an update) and marks the mutex consistent. Dead slots are
 * also reclaimed when a process attaches and before an allocation is
 * refused, so memory of killed processes returns to the share.
 *
 * Untracked memory: what the driver holds for a process beyond what the
 * shim accounted (a context growing as modules load lazily, a module's
 * __device__ variables, the runtime's own buffers, page rounding) cannot
 * be seen from inside the process. The agent reads the driver's figure
 * per process (NVML, host pids) and writes the difference into the
 * process's slot (fgpu_region_set_untracked), so it counts in the share
 * like any allocation. It opens the region as an observer: from another
 * PID namespace it cannot tell which slots are dead, so it never drops
 * any.
 *
 * Ownership: struct fgpu_region_handle is caller-owned; the mapping lives
 * until process exit (the shim never unmaps: other threads may be inside). */
#ifndef TESSERA_GPUABI_REGION_H
#define TESSERA_GPUABI_REGION_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/err.h"
#include "gpuabi/fgpu_contract.h"

#define FGPU_REGION_MAGIC 0x50474654U    /* "TFGP" little-endian */
#define FGPU_REGION_VERSION 2
#define FGPU_REGION_SLOTS 1024

struct fgpu_region_slot {
	int32_t pid;                     /* 0: free */
	uint32_t reserved;
	uint64_t start;                  /* /proc start time, against pid reuse */
	int64_t used[FGPU_MAX_DEVICES];      /* accounted by the shim */
	int64_t untracked[FGPU_MAX_DEVICES]; /* the driver's figure beyond used */
};

struct fgpu_bucket {
	int64_t tokens;                  /* ns of GPU time that may be spent */
	uint64_t last;                   /* clock of the last refill, 0: never */
};

struct fgpu_region {
	uint32_t magic;
	uint32_t version;
	uint32_t size;
	uint32_t mutex_size;
	pthread_mutex_t lock;
	int64_t total[FGPU_MAX_DEVICES]; /* sum of used + untracked */
	struct fgpu_bucket pace[FGPU_MAX_DEVICES];
	uint64_t recoveries;             /* times EOWNERDEAD was handled */
	struct fgpu_region_slot slots[FGPU_REGION_SLOTS];
};

struct fgpu_region_handle {
	struct fgpu_region *r;
	bool shared;                     /* false: private fallback */
	int slot;                        /* -1: none yet */
	pid_t pid;                       /* owner of slot */
	bool observer;                   /* another PID namespace: never reclaims */
};

/* One live slot as an observer sees it. */
struct fgpu_region_proc {
	pid_t pid;
	uint64_t start;
	int64_t used[FGPU_MAX_DEVICES];
	int64_t untracked[FGPU_MAX_DEVICES];
};

/* Maps (creating if needed) the region file at path. */
int fgpu_region_open(struct fgpu_region_handle *h, const char *path, struct terr *err);

/* Maps the region file open at fd (closing fd) for the agent's side, as
 * an observer: it takes no slot and, on a dead lock owner, only
 * recomputes the totals. The caller opens and checks the file: it lies in
 * a directory the container can write (gpu/gpu_usage.h). path is for
 * messages. */
int fgpu_region_observe_fd(struct fgpu_region_handle *h, int fd, const char *path,
			   struct terr *err);

/* Unmaps an observer's region (the shim never unmaps its own). */
void fgpu_region_close(struct fgpu_region_handle *h);

/* The region's occupied slots (up to max; returns how many there are). */
int fgpu_region_processes(struct fgpu_region_handle *h, struct fgpu_region_proc *out, int max);

/* Sets the untracked bytes of the process (pid, and start time when not
 * 0) on device d, moving the total by the difference. 0, -ESRCH when no
 * slot matches, -EINVAL for a bad device or a negative size. */
int fgpu_region_set_untracked(struct fgpu_region_handle *h, pid_t pid, uint64_t start, int d,
			      int64_t bytes);

/* An anonymous region: shared with fork() children only. Used when the
 * file cannot be used; returns -errno when even that fails. */
int fgpu_region_open_private(struct fgpu_region_handle *h, struct terr *err);

/* Locks the region, recovering from a dead owner. Never blocks forever on
 * a dead process. */
void fgpu_region_lock(struct fgpu_region_handle *h);
void fgpu_region_unlock(struct fgpu_region_handle *h);

/* Adds bytes to device d for this process if total + bytes <= limit
 * (after reclaiming dead slots when it would not fit). 0 or -ENOMEM. */
int fgpu_region_reserve(struct fgpu_region_handle *h, int d, int64_t bytes, int64_t limit);

/* Returns bytes of device d from this process. */
void fgpu_region_release(struct fgpu_region_handle *h, int d, int64_t bytes);

/* Bytes accounted on device d by the whole container's live processes
 * (reclaims dead slots first). */
int64_t fgpu_region_used(struct fgpu_region_handle *h, int d);

/* Drops this process's slot (at exit: the driver frees its memory). */
void fgpu_region_detach(struct fgpu_region_handle *h);

/* Locked: drops dead processes' slots and recomputes totals; returns the
 * number of slots reclaimed. */
int fgpu_region_reclaim_locked(struct fgpu_region_handle *h);

/* Locked: this process's slot, acquiring one; NULL when the table is full. */
struct fgpu_region_slot *fgpu_region_slot_locked(struct fgpu_region_handle *h);

#endif
