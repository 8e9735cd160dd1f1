/* The domain vocabulary every component shares: resource amounts and the
 * session state machine (docs/architecture.md). */
#ifndef TESSERA_COMMON_MODEL_H
#define TESSERA_COMMON_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

/* Fixed-point amounts: milli-cores, bytes, milli-fGPU. */
struct res {
	int64_t cpu_m;
	int64_t mem;
	int64_t fgpu_m;
};

static inline bool res_fits(const struct res *need, const struct res *free_)
{
	return need->cpu_m <= free_->cpu_m && need->mem <= free_->mem &&
	       need->fgpu_m <= free_->fgpu_m;
}

static inline void res_add(struct res *a, const struct res *b)
{
	a->cpu_m += b->cpu_m;
	a->mem += b->mem;
	a->fgpu_m += b->fgpu_m;
}

static inline void res_sub(struct res *a, const struct res *b)
{
	a->cpu_m -= b->cpu_m;
	a->mem -= b->mem;
	a->fgpu_m -= b->fgpu_m;
}

/* Writes "1 CPU, 256 MiB" (+ ", 0.5 fGPU" when any) into buf. */
void res_describe(const struct res *r, char *buf, size_t n);

/* One list of states; the enum and the names derive from it. Stores keep
 * the names, so the order may change. LOST: was RUNNING on a node the
 * manager declared LOST; the container may still run, so it still holds
 * its resources until the node returns (re-adopted RUNNING, or ended).
 * PREEMPTED: ended by the scheduler to make room for another session
 * (docs/scheduling.md); like TERMINATING it holds its resources until its
 * container is gone, then it is PENDING again or TERMINATED. */
#define SESSION_STATES(X) \
	X(PENDING)     \
	X(SCHEDULED)   \
	X(PREPARING)   \
	X(RUNNING)     \
	X(LOST)        \
	X(TERMINATING) \
	X(PREEMPTED)   \
	X(TERMINATED)  \
	X(CANCELLED)   \
	X(ERROR)

#define SESSION_STATE_ENUM(name) SS_##name,
enum session_status { SESSION_STATES(SESSION_STATE_ENUM) SS__COUNT };
#undef SESSION_STATE_ENUM

const char *session_status_name(enum session_status s);
/* -1 when unknown. */
int session_status_parse(const char *name);

/* Ended for good: nothing runs, nothing is held. */
static inline bool session_status_final(enum session_status s)
{
	return s == SS_TERMINATED || s == SS_CANCELLED || s == SS_ERROR;
}

/* Holds resources on a node (placed and not yet released). */
static inline bool session_status_holds(enum session_status s)
{
	return s == SS_SCHEDULED || s == SS_PREPARING || s == SS_RUNNING ||
	       s == SS_LOST || s == SS_TERMINATING || s == SS_PREEMPTED;
}

/* Its container is being removed: TERMINATING, or PREEMPTED. */
static inline bool session_status_ending(enum session_status s)
{
	return s == SS_TERMINATING || s == SS_PREEMPTED;
}

/* Shown by `session ls` without --all. */
static inline bool session_status_listed(enum session_status s)
{
	return s != SS_TERMINATED && s != SS_CANCELLED;
}

/* Names of sessions and nodes, and session ids, which also name
 * directories and containers: ^[a-zA-Z0-9][a-zA-Z0-9._-]{0,62}$. `what`
 * names the field in the message. */
int model_validate_name(const char *name, const char *what, struct terr *err);

/* Names of data folders (docs/folders.md): 1-63 of [A-Za-z0-9._-], may
 * start with '.' (automounted), never "." nor "..". */
#define MODEL_FOLDER_NAME_MAX 64
int model_validate_folder_name(const char *name, struct terr *err);

/* Where a folder is mounted in a session: an absolute path of at most
 * 255 bytes without "." or ".." parts, empty parts or a trailing '/', not
 * "/" nor /home/work itself (which stays the work user's), and not in
 * the system's or Tessera's own directories (/proc, /sys, /dev, /etc,
 * /usr, /bin, /sbin, /lib, /lib64, /boot, /run, /var/run, /opt/tessera). */
#define MODEL_MOUNT_TARGET_MAX 256
int model_validate_mount_target(const char *path, struct terr *err);

/* One --mount NAME[:PATH][:ro] of `session create`. */
struct model_mount {
	char name[MODEL_FOLDER_NAME_MAX];
	char target[MODEL_MOUNT_TARGET_MAX];   /* "": /home/work/NAME */
	bool ro;
};
/* Parses and validates NAME[:PATH][:ro] into out. */
int model_parse_mount_spec(const char *spec, struct model_mount *out, struct terr *err);
/* The default target of folder name: /home/work/NAME (out: n bytes). */
void model_default_mount_target(const char *name, char *out, size_t n);

/* A storage host of data folders: a name and an absolute directory
 * (docs/admin.md, "Storage"), as the manager and agents declare them. */
#define MODEL_MAX_STORAGE_HOSTS 16
struct model_storage_host {
	char name[64];
	char path[1024];       /* absolute, no trailing '/' */
};
/* Parses "NAME:PATH[,NAME:PATH...]" into hosts (at most max): names as
 * session names, paths absolute without '.' or '..' parts, not "/",
 * names unique. */
int model_storage_hosts_parse(const char *spec, struct model_storage_host *hosts, size_t max, size_t *n,
			      struct terr *err);

#endif
