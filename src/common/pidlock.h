/* One process at a time on a resource (a data directory): an exclusive
 * flock() on a lock file that holds the holder's pid. The kernel drops the
 * lock when the holder exits, crashed or not, so a stale file never locks
 * anyone out; the file itself stays (removing it would race with the next
 * holder). */
#ifndef TESSERA_COMMON_PIDLOCK_H
#define TESSERA_COMMON_PIDLOCK_H

#include "common/err.h"

/* Takes the lock on path (created 0600 when absent) without waiting and
 * writes this process's pid into it; returns the open descriptor, which
 * holds the lock until it is closed (pidlock_release) or the process ends.
 * Held by another process: -EBUSY, and *holder gets its pid (0 when the
 * file names none yet); holder may be NULL. */
int pidlock_acquire(const char *path, long *holder, struct terr *err);
/* Drops the lock (fd from pidlock_acquire; negative is a no-op). */
void pidlock_release(int fd);

#endif
