/* Files inside a folder's directory, safe against what sessions can put
 * there (docs/folders.md, "Files").
 *
 * A folder's directory is writable from inside sessions, so any entry in it
 * may be a symbolic link pointing anywhere (/etc, ../.., itself). Every
 * operation here takes the folder's root directory fd (opened by the caller
 * with O_DIRECTORY; it stays owned by the caller) and a relative path as the
 * API received it, and resolves it with openat2(2) and RESOLVE_BENEATH |
 * RESOLVE_NO_MAGICLINKS: a symbolic link or '..' that would lead out of the
 * folder is refused by the kernel (-EXDEV), with no window between a check
 * and a use. Where openat2 is missing (Linux < 5.6) a component-by-component
 * walk with O_NOFOLLOW is used instead, which follows no symbolic link at all.
 * The last component of a path that is written, renamed or removed is never
 * followed: the link itself is what is replaced or removed.
 *
 * Paths: relative, components separated by '/', no empty, '.' or '..'
 * component, no NUL byte; "" (or ".") names the folder's root where an
 * operation allows it. Every function returns 0 (or an fd) on success and a
 * negative errno with err filled on failure. */
#ifndef TESSERA_FOLDERS_FSPATH_H
#define TESSERA_FOLDERS_FSPATH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/err.h"

/* Longest path accepted from the API (bytes). */
#define FSP_PATH_MAX 4096

/* Files and directories made through the API get this owner (the sessions'
 * work user), so a session can change them; -1 leaves the creator's. */
struct fsp_owner {
	uid_t uid;
	gid_t gid;
};
#define FSP_OWNER_KEEP ((struct fsp_owner){(uid_t)-1, (gid_t)-1})

enum fsp_type { FSP_FILE, FSP_DIR, FSP_LINK, FSP_OTHER };

/* "file", "dir", "link", "other": the words of the API. */
const char *fsp_type_name(enum fsp_type t);

struct fsp_entry {
	char name[256];        /* the entry's own name (a path's last component) */
	enum fsp_type type;    /* a symbolic link is FSP_LINK, never followed */
	int64_t size;          /* bytes (a link: the length of its target) */
	int64_t mtime;         /* seconds since the epoch */
	unsigned mode;         /* permission bits (07777) */
};

/* Checks a path from the API: len bytes (a NUL among them is refused).
 * allow_root: "" and "." name the root. -EINVAL with the reason. */
int fsp_path_check(const char *path, size_t len, int allow_root, struct terr *err);

/* Test hook: nonzero makes every resolution take the fallback walk, as on a
 * kernel without openat2. */
extern int fsp_force_fallback;
/* Test hook: nonzero makes uploads use a hidden name, as on a filesystem
 * without O_TMPFILE. */
extern int fsp_force_named_tmp;

/* Opens path (root allowed) as a directory: O_RDONLY|O_DIRECTORY|O_CLOEXEC.
 * Returns the fd (the caller closes it). */
int fsp_open_dir(int rootfd, const char *path, struct terr *err);

/* Opens the directory that would hold path's last component and copies that
 * component to leaf (NAME_MAX+1 bytes). The root itself is refused. Returns
 * the parent's fd (the caller closes it). */
int fsp_open_parent(int rootfd, const char *path, char *leaf, size_t leafsz,
                    struct terr *err);

/* Lists directory path (root allowed): *out gets *n entries, sorted by name,
 * a malloc'd array the caller frees. "." and ".." are left out. */
int fsp_list(int rootfd, const char *path, struct fsp_entry **out, size_t *n,
             struct terr *err);

/* What path is (root allowed), without following a link at its end. */
int fsp_stat(int rootfd, const char *path, struct fsp_entry *out, struct terr *err);

/* Opens regular file path for reading (a link at its end is followed only
 * when its target lies in the folder); *size gets its size. Returns the fd. */
int fsp_open_read(int rootfd, const char *path, int64_t *size, struct terr *err);

/* Makes directory path (mode 0755 then chowned to owner); parents: makes
 * the missing directories above it too and an existing directory is no
 * error. */
int fsp_mkdir(int rootfd, const char *path, int parents, struct fsp_owner owner,
              struct terr *err);

/* Renames from to to, both inside the folder. Without overwrite an existing
 * to is refused (-EEXIST). */
int fsp_rename(int rootfd, const char *from, const char *to, int overwrite,
               struct terr *err);

/* Removes a file, a link (the link, not its target) or an empty directory;
 * recursive: a directory with all it holds, links inside never followed. */
int fsp_remove(int rootfd, const char *path, int recursive, struct terr *err);

/* An upload in progress: written to a hidden file in the target's directory
 * (O_TMPFILE where the filesystem has it, else a unique
 * ".tessera-upload-XXXXXX"), which becomes path only at commit, so a failed
 * or interrupted upload never leaves a partial file under path. */
struct fsp_upload {
	int dirfd;             /* the target's directory; -1 once finished */
	int fd;                /* the data */
	int anonymous;         /* O_TMPFILE: no name until committed */
	int overwrite;
	char leaf[256];
	char tmpname[64];      /* the hidden name when not anonymous */
	int64_t written;
	int64_t budget;        /* bytes that may still be written; <0: no limit */
};

/* Starts an upload to path (not the root). budget: the most bytes the
 * upload may write (the folder's free quota), <0 for no limit. Without
 * overwrite an existing path is refused now and again at commit. */
int fsp_upload_begin(struct fsp_upload *up, int rootfd, const char *path,
                     int overwrite, int64_t budget, struct fsp_owner owner,
                     struct terr *err);

/* Appends len bytes. -EDQUOT (and nothing more written) when the upload
 * would pass its budget; the caller then aborts it. */
int fsp_upload_write(struct fsp_upload *up, const void *buf, size_t len,
                     struct terr *err);

/* fsyncs the data and puts it in place under path. On failure the upload is
 * aborted. Either way up is finished. */
int fsp_upload_commit(struct fsp_upload *up, struct terr *err);

/* Drops an upload not committed (no-op once finished): nothing is left. */
void fsp_upload_abort(struct fsp_upload *up);

#endif
