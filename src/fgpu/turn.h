/* GPU turns: the paced tenants of one physical GPU use it one at a time.
 *
 * Why. Two contexts with work on one GPU are time-sliced by the hardware.
 * Measured on an H100 (docs/fgpu.md), two busy tenants then get about
 * 42 % of the GPU each: a sixth is lost to the switching. And a kernel's
 * measured time (the events pacing reads) includes the slices the GPU
 * gave the other tenant, so pacing over-charges it. With turns, a paced
 * process launches only while it holds its GPU's turn, and gives the turn
 * up only once its own work has finished: the GPU switches tenants
 * rarely, on an idle GPU, and each kernel's measured time is its own.
 *
 * How. Two empty files per physical GPU, named by the driver's UUID
 * ("GPU-..." and "GPU-....wait"), in a directory the agent mounts
 * read-only into every GPU session of the node (FGPU_TURN_DIR). The turn
 * is an exclusive flock() on the first: the kernel drops it when its
 * holder dies, so a killed process never blocks the others, and no tenant
 * can resize or write a read-only file. A process waiting for the turn
 * holds a shared flock() on the second; the holder learns that someone
 * waits when it cannot lock that file exclusively itself, and then gives
 * the turn up once it has held it for a quantum. Only flock(), which
 * every local file system has. No shared memory: nothing another tenant
 * does to these files can crash a process.
 *
 * Turns are cooperative, like pacing: a process outside Tessera, or one
 * that never gives the turn back (stopped, or computing on the CPU while
 * holding it), is waited for at most FGPU_TURN_PATIENCE_NS; then the
 * waiter launches anyway and the hardware time-slices as without turns.
 *
 * Locks belong to open file descriptions, which fork() shares: a child
 * must forget (close) the parent's descriptors without unlocking. */
#ifndef TESSERA_FGPU_TURN_H
#define TESSERA_FGPU_TURN_H

#include <stdbool.h>
#include <stdint.h>

#include "gpuabi/fgpu_contract.h"   /* FGPU_TURN_WAIT_SUFFIX */

/* How long a holder keeps the turn while another process waits. */
#define FGPU_TURN_QUANTUM_NS (10ULL * 1000 * 1000)
/* How long a launch waits for the turn before it goes ahead anyway. */
#define FGPU_TURN_PATIENCE_NS (50ULL * 1000 * 1000)
/* After a wait ran out, launches do not wait again for this long. */
#define FGPU_TURN_IMPATIENT_NS (200ULL * 1000 * 1000)
/* A holder looks for waiters at most this often. */
#define FGPU_TURN_RECHECK_NS (250ULL * 1000)

struct fgpu_turn {
	int fd;                    /* the GPU's turn file; -1: no turns */
	int wait_fd;               /* its ".wait" file, where waiters show */
	bool opened;               /* an open was tried */
	bool held;
	bool gave;                 /* gave the turn up since it last took it */
	uint64_t since;            /* held since (fgpu_turn_now) */
	uint64_t checked;          /* last look for waiters */
	uint64_t impatient_until;  /* launches do not wait before this */
	uint64_t quantum;          /* 0: FGPU_TURN_QUANTUM_NS */
};

#define FGPU_TURN_INIT { .fd = -1, .wait_fd = -1 }

/* CLOCK_MONOTONIC in ns: the one clock every container of a node shares. */
uint64_t fgpu_turn_now(void);

/* Opens dir/uuid and dir/uuid.wait once (later calls return what the
 * first found). False when either is missing: no turns for that GPU. */
bool fgpu_turn_open(struct fgpu_turn *t, const char *dir, const char *uuid);

/* Takes the turn, waiting up to patience_ns for it. After giving the turn
 * up, processes that already wait go first: without that, the process
 * that just gave it would take it back before any waiter, which polls,
 * could. True when held; false without a turn file, or when the wait ran
 * out. */
bool fgpu_turn_take(struct fgpu_turn *t, uint64_t patience_ns);

/* Whether the holder should give the turn up now: it has held it for a
 * quantum and another process waits. Looks for waiters at most every
 * FGPU_TURN_RECHECK_NS. */
bool fgpu_turn_due(struct fgpu_turn *t);

/* Whether another process waits for this GPU's turn. */
bool fgpu_turn_others_wait(const struct fgpu_turn *t);

/* Gives the turn up (no-op when not held). */
void fgpu_turn_give(struct fgpu_turn *t);

/* In a fork() child: closes the parent's descriptor without unlocking
 * (the lock is the parent's) and starts over. */
void fgpu_turn_forget(struct fgpu_turn *t);

#endif
