/* Folder quotas enforced by the kernel, for writes made inside sessions
 * (docs/folders.md, "Quotas and usage"; docs/admin.md, "Storage").
 *
 * A session writes into its folders through a bind mount, so nothing of
 * Tessera sees those writes: only the filesystem can cap them. Three cases,
 * decided once per storage host at the manager's start (fsq_probe):
 *
 *   btrfs-qgroup   the host is on btrfs with quotas enabled (by the admin:
 *                  `btrfs quota enable`). Each folder is a subvolume and its
 *                  quota the limit of its level-0 qgroup (referenced bytes).
 *   project-quota  the host is on XFS or ext4 mounted with project quotas
 *                  enforced. Each folder's directory gets a project id of
 *                  its own, inherited by what is made below it, and the
 *                  quota is that project's hard block limit.
 *   api-only       anything else (plain ext4, overlay, tmpfs, NFS...): the
 *                  API checks uploads against the quota, sessions' writes
 *                  are not capped, usage is measured by walking the folder.
 *
 * On btrfs without quotas folders are still made as subvolumes, so that
 * turning quotas on later (and restarting the manager) caps them all.
 *
 * Only the C library and the kernel (ioctls, quotactl) are used: nothing is
 * run. Functions that can fail return 0 or a negative errno with err filled.
 * The pure functions (fsq_decide, fsq_projid_pick, fsq_mount_source,
 * fsq_free_bytes) take no system state and are unit tested on their own. */
#ifndef TESSERA_FOLDERS_FSQUOTA_H
#define TESSERA_FOLDERS_FSQUOTA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

enum fsq_kind { FSQ_API_ONLY = 0, FSQ_BTRFS = 1, FSQ_PROJECT = 2 };

/* "api-only", "btrfs-qgroup", "project-quota": the API's words. */
const char *fsq_kind_name(enum fsq_kind k);

/* Filesystem magic numbers (statfs f_type) this module tells apart. */
#define FSQ_MAGIC_BTRFS 0x9123683EL
#define FSQ_MAGIC_XFS 0x58465342L
#define FSQ_MAGIC_EXT4 0xEF53L

/* What was observed of a host's filesystem; fsq_decide turns it into a
 * kind. The probing fills it, the tests write it by hand. */
struct fsq_observed {
	long magic;          /* statfs f_type */
	int btrfs_quota;     /* btrfs: 1 quotas on, 0 off, <0 -errno of the check */
	int prj_state;       /* XFS/ext4: 1 project quota enforced, 0 accounted
	                      * only or off, <0 -errno of quotactl (-ENOSYS: the
	                      * kernel has no quota support) */
};

/* The kind for o, and in why (n bytes) a sentence for the log saying what
 * enforces the quota or why nothing does and what the admin can do. */
enum fsq_kind fsq_decide(const struct fsq_observed *o, const char *path, char *why, size_t n);

/* A storage host's filesystem, as probed. */
struct fsq_host {
	enum fsq_kind kind;
	bool btrfs;          /* on btrfs (folders are subvolumes, quotas on or not) */
	bool xfs;            /* project-quota: XFS (else ext4) */
	char device[256];    /* project-quota: the block device for quotactl(2)
	                      * where quotactl_fd(2) is missing; may be "" */
	char why[320];       /* fsq_decide's sentence */
};

/* Probes the filesystem of directory path. Never fails: what cannot be
 * told gives FSQ_API_ONLY with the reason in out->why. */
void fsq_probe(const char *path, struct fsq_host *out);

/* A folder's own enforcement: kind, and the qgroup id (a subvolume's id,
 * btrfs) or the project id its directory carries. FSQ_API_ONLY when the
 * folder is not capped (made before quotas were on, or a plain directory
 * on btrfs). */
struct fsq_folder {
	enum fsq_kind kind;
	uint64_t id;
};

/* Makes the directory of a new folder at path (mode 0755): a subvolume on
 * btrfs (a plain directory when the kernel refuses one), else mkdir. */
int fsq_make_dir(const struct fsq_host *h, const char *path, struct terr *err);

/* Reads how the folder at path is capped, on host h. */
int fsq_folder_probe(const struct fsq_host *h, const char *path, struct fsq_folder *out, struct terr *err);

/* Gives directory path project id projid, inherited by what is made in
 * it (FS_XFLAG_PROJINHERIT). Existing content below keeps its id. */
int fsq_set_project(const char *path, uint32_t projid, struct terr *err);

/* Sets the folder's limit to bytes (0: no limit). path: the folder's
 * directory (live or trashed). A folder of kind FSQ_API_ONLY: no-op. */
int fsq_set_limit(const struct fsq_host *h, const struct fsq_folder *f, const char *path, int64_t bytes,
		  struct terr *err);

/* The bytes the kernel charges the folder: the qgroup's referenced bytes
 * (as of the filesystem's last transaction commit), with those of any
 * subvolume made inside the folder (a session can make one; its qgroup
 * is its own, so the folder's limit does not cap it), or the project's
 * space. -ENOTSUP for FSQ_API_ONLY (the caller walks the folder). */
int fsq_usage(const struct fsq_host *h, const struct fsq_folder *f, const char *path, int64_t *bytes,
	      struct terr *err);

/* Removes a folder's directory for good: a subvolume is destroyed (with
 * everything in it, subvolumes made inside it first), anything else
 * removed as a tree, links never followed. */
int fsq_remove_dir(const struct fsq_host *h, const char *path, struct terr *err);

/* Project ids Tessera gives folders: [FSQ_PROJID_MIN, FSQ_PROJID_MAX],
 * clear of the small ids sites give by hand in /etc/projid. */
#define FSQ_PROJID_MIN 0x01000000u
#define FSQ_PROJID_MAX 0x7fffffffu

/* A project id for folder_id that is not among used (n ids): the folder
 * id's hash in the range, then the next free one. 0 when the range is
 * full (it cannot be with fewer than 2^31 folders). */
uint32_t fsq_projid_pick(const char *folder_id, const uint32_t *used, size_t n);

/* From /proc/self/mountinfo's text, the mount source (the device) of the
 * mount whose device number is major:minor, into src (n bytes). 0, or
 * -ENOENT when no line matches, -EINVAL for a line that does not parse. */
int fsq_mount_source(const char *mountinfo, unsigned major, unsigned minor, char *src, size_t n);

/* Bytes a folder may still take: quota - usage - reserved, never below 0;
 * -1 when quota is 0 (no quota). Saturates instead of overflowing. */
int64_t fsq_free_bytes(int64_t quota, int64_t usage, int64_t reserved);

#endif
