/* Small helpers with no better home: time, ids, files. */
#ifndef TESSERA_COMMON_UTIL_H
#define TESSERA_COMMON_UTIL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "common/err.h"

#define UTIL_ID_LEN 32   /* hex chars of a generated id */

/* Wall-clock milliseconds since the epoch. */
int64_t util_now_ms(void);
/* Monotonic milliseconds (for timeouts, never stored). */
int64_t util_mono_ms(void);
/* Timed waits on a condition variable, on one clock: CLOCK_MONOTONIC,
 * which setting the wall clock does not move (a wait on CLOCK_REALTIME
 * would end early, or hang, when it jumps). util_cond_init_mono makes a
 * condition variable whose pthread_cond_timedwait takes such deadlines;
 * util_deadline_ms is now on that clock plus ms. */
void util_cond_init_mono(pthread_cond_t *cv);
void util_deadline_ms(struct timespec *ts, int64_t ms);
/* RFC 3339 UTC with milliseconds: "2026-11-22T08:40:00.123Z" (n >= 32). */
void util_format_time_ms(int64_t ms, char *buf, size_t n);

/* New random id, UTIL_ID_LEN hex chars + NUL. */
int util_new_id(char out[UTIL_ID_LEN + 1], struct terr *err);

/* mkdir -p with mode for the directories it creates. */
int util_mkdir_p(const char *path, mode_t mode, struct terr *err);

/* Removes path and everything under it, without following symlinks
 * (best effort: what cannot be removed stays). */
void util_remove_tree(const char *path);

/* Whole file into a NUL-terminated malloc'd buffer (caller frees). */
int util_read_file(const char *path, char **out, size_t *len, struct terr *err);

/* Directory holding the running executable (from /proc/self/exe). */
int util_exe_dir(char *buf, size_t n, struct terr *err);

/* How a shell reaches the running executable, for commands printed to
 * the user: `name` when the first `name` on PATH is this very file, else
 * its absolute path (e.g. build/tessera, not installed). */
int util_self_command(const char *name, char *buf, size_t n, struct terr *err);

/* Copies src into dst of size n, always NUL-terminating; returns 0, or
 * -ENAMETOOLONG when it had to cut. */
int util_strlcpy(char *dst, const char *src, size_t n);

/* The built web UI, a folder holding `file` (e.g. "index.html"): the
 * build's ui/www beside the binary, PREFIX/share/tessera/ui of an install
 * (../share/tessera/ui from PREFIX/bin), or /usr/share/tessera/ui; its
 * real path into out (n bytes, at least PATH_MAX). -ENOENT saying where
 * it looked. Shared by the webserver and the app proxy (terminal.html). */
int util_find_ui_dir(const char *file, char *out, size_t n, struct terr *err);

/* 16 hex digits naming this kernel boot and this process's network
 * namespace (/proc/sys/kernel/random/boot_id, /proc/self/ns/net): two
 * processes that get the same key route an address the same way. The
 * agent tags a container's bridge address with it and the app proxy uses
 * that address only when its own key matches (docs/apps.md, "The direct
 * path"); elsewhere the address may be another host's container. ""
 * when either file cannot be read. */
#define UTIL_NETNS_KEY_LEN 16
void util_netns_key(char out[UTIL_NETNS_KEY_LEN + 1]);

/* A TCP port range "A-B" (1 <= A <= B <= 65535, digits only) into *lo and
 * *hi: the app proxy's ports, in the manager's, the proxy's and `tessera
 * server`'s settings. -EINVAL naming what is wrong. */
int util_parse_port_range(const char *s, int *lo, int *hi, struct terr *err);

#endif
