/* Files inside a folder's directory, resolved beneath it (fspath.h). */
#include "folders/fspath.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_openat2
#define SYS_openat2 437
#endif

int fsp_force_fallback;
int fsp_force_named_tmp;

/* Set once openat2 answered ENOSYS: the kernel will not grow it. */
static int openat2_missing;

/* Deepest directory tree a recursive removal walks: each level holds an fd. */
#define FSP_RM_DEPTH 256

const char *fsp_type_name(enum fsp_type t)
{
	switch (t) {
	case FSP_FILE: return "file";
	case FSP_DIR: return "dir";
	case FSP_LINK: return "link";
	default: return "other";
	}
}

static int is_root(const char *path)
{
	return path[0] == '\0' || strcmp(path, ".") == 0;
}

int fsp_path_check(const char *path, size_t len, int allow_root, struct terr *err)
{
	if (!path)
		return terr_set(err, EINVAL, "a path is required");
	if (memchr(path, '\0', len))
		return terr_set(err, EINVAL, "the path holds a NUL byte");
	if (len == 0 || (len == 1 && path[0] == '.')) {
		if (allow_root)
			return 0;
		return terr_set(err, EINVAL, "this needs a path inside the folder, not the folder itself");
	}
	if (len >= FSP_PATH_MAX)
		return terr_set(err, ENAMETOOLONG, "the path is longer than %d bytes", FSP_PATH_MAX - 1);
	if (path[0] == '/')
		return terr_set(err, EINVAL,
			"the path '%.200s' is absolute; give it relative to the folder (e.g. 'data/x.csv')", path);
	size_t start = 0;
	for (size_t i = 0; i <= len; i++) {
		if (i < len && path[i] != '/')
			continue;
		size_t clen = i - start;
		const char *c = path + start;
		if (clen == 0)
			return terr_set(err, EINVAL,
				"the path '%.200s' has an empty component ('//' or a trailing '/')", path);
		if (clen == 1 && c[0] == '.')
			return terr_set(err, EINVAL,
				"the path '%.200s' has a '.' component; write it without", path);
		if (clen == 2 && c[0] == '.' && c[1] == '.')
			return terr_set(err, EINVAL,
				"the path '%.200s' has a '..' component; paths stay inside the folder", path);
		if (clen > NAME_MAX)
			return terr_set(err, ENAMETOOLONG, "a name in the path is longer than %d bytes", NAME_MAX);
		start = i + 1;
	}
	return 0;
}

/* Fills err for a failed resolution or operation on path. */
static int path_err(int e, const char *what, const char *path, struct terr *err)
{
	switch (e) {
	case EXDEV:
		return terr_set(err, EXDEV,
			"%s '%.200s': the path leads outside the folder (a symbolic link or '..' pointing out of it); "
			"links out of a folder are not followed", what, path);
	case ELOOP:
		return terr_set(err, ELOOP,
			"%s '%.200s': a symbolic link is in the way (a loop, or a link where the folder's own "
			"file or directory is needed); links are not followed here", what, path);
	case ENOENT:
		return terr_set(err, ENOENT, "%s '%.200s': no such file or directory in the folder", what, path);
	case ENOTDIR:
		return terr_set(err, ENOTDIR, "%s '%.200s': a component of the path is not a directory", what, path);
	case EEXIST:
		return terr_set(err, EEXIST, "%s '%.200s': it already exists (ask for overwrite to replace it)",
			what, path);
	case EISDIR:
		return terr_set(err, EISDIR, "%s '%.200s': it is a directory", what, path);
	case ENOTEMPTY:
		return terr_set(err, ENOTEMPTY,
			"%s '%.200s': the directory is not empty; remove it recursively", what, path);
	case EACCES:
	case EPERM:
		return terr_set(err, e, "%s '%.200s': permission denied on the storage host", what, path);
	case ENOSPC:
		return terr_set(err, ENOSPC, "%s '%.200s': the storage host is full", what, path);
	case EDQUOT:
		return terr_set(err, EDQUOT, "%s '%.200s': the folder's quota is used up", what, path);
	default:
		return terr_set(err, e, "%s '%.200s': %s", what, path, strerror(e));
	}
}

/* The fallback walk: every component but the last opened with O_NOFOLLOW
 * (a link anywhere is refused), the last with flags | O_NOFOLLOW. Returns
 * an fd or -errno (-EXDEV for a link met on the way). */
static int walk_nofollow(int rootfd, const char *path, int flags)
{
	char buf[FSP_PATH_MAX];
	snprintf(buf, sizeof(buf), "%s", path);
	int cur = openat(rootfd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (cur < 0)
		return -errno;
	char *save = NULL;
	char *comp = strtok_r(buf, "/", &save);
	while (comp) {
		char *next = strtok_r(NULL, "/", &save);
		int last = next == NULL;
		int fd = openat(cur, comp, last ? (flags | O_NOFOLLOW | O_CLOEXEC)
			: (O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
		int e = errno;
		if (fd < 0) {
			struct stat st;
			/* O_PATH|O_NOFOLLOW on a link gives ENOTDIR, O_NOFOLLOW ELOOP. */
			if ((e == ELOOP || e == ENOTDIR) &&
			    fstatat(cur, comp, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
				e = EXDEV;
			close(cur);
			return -e;
		}
		close(cur);
		cur = fd;
		comp = next;
	}
	return cur;
}

/* Opens path (checked, not the root) beneath rootfd with flags; the last
 * component is followed only if follow_last (and then only beneath).
 * Returns an fd or -errno. */
static int resolve(int rootfd, const char *path, int flags, int follow_last)
{
	if (!fsp_force_fallback && !openat2_missing) {
		struct open_how how;
		memset(&how, 0, sizeof(how));
		how.flags = (uint64_t)(flags | O_CLOEXEC | (follow_last ? 0 : O_NOFOLLOW));
		how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
		/* EAGAIN: a rename raced the lookup; the kernel asks for a retry. */
		for (int tries = 0; tries < 16; tries++) {
			long fd = syscall(SYS_openat2, rootfd, path, &how, sizeof(how));
			if (fd >= 0)
				return (int)fd;
			if (errno == ENOSYS) {
				openat2_missing = 1;
				break;
			}
			if (errno != EAGAIN)
				return -errno;
		}
		if (!openat2_missing)
			return -EAGAIN;
	}
	return walk_nofollow(rootfd, path, flags);
}

/* The root itself, opened like resolve's results: an fd or -errno. */
static int open_root(int rootfd)
{
	int fd = openat(rootfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

/* Splits path (checked, not the root) into its parent's path (in pbuf, ""
 * for the root) and leaf. */
static int split(const char *path, char *pbuf, size_t pbufsz, char *leaf, size_t leafsz)
{
	const char *slash = strrchr(path, '/');
	const char *l = slash ? slash + 1 : path;
	size_t plen = slash ? (size_t)(slash - path) : 0;
	if (strlen(l) >= leafsz || plen >= pbufsz)
		return -ENAMETOOLONG;
	memcpy(pbuf, path, plen);
	pbuf[plen] = '\0';
	strcpy(leaf, l);
	return 0;
}

int fsp_open_dir(int rootfd, const char *path, struct terr *err)
{
	int r = fsp_path_check(path, path ? strlen(path) : 0, 1, err);
	if (r < 0)
		return r;
	int fd = is_root(path)
		? open_root(rootfd)
		: resolve(rootfd, path, O_RDONLY | O_DIRECTORY, 1);
	if (fd < 0)
		return path_err(-fd, "open directory", path, err);
	return fd;
}

int fsp_open_parent(int rootfd, const char *path, char *leaf, size_t leafsz, struct terr *err)
{
	int r = fsp_path_check(path, path ? strlen(path) : 0, 0, err);
	if (r < 0)
		return r;
	char parent[FSP_PATH_MAX];
	if (split(path, parent, sizeof(parent), leaf, leafsz) < 0)
		return terr_set(err, ENAMETOOLONG, "the path '%.200s' is too long", path);
	int fd = parent[0]
		? resolve(rootfd, parent, O_RDONLY | O_DIRECTORY, 1)
		: open_root(rootfd);
	if (fd < 0)
		return path_err(-fd, "open", path, err);
	return fd;
}

static void fill_entry(struct fsp_entry *e, const char *name, const struct stat *st)
{
	snprintf(e->name, sizeof(e->name), "%s", name);
	e->type = S_ISREG(st->st_mode) ? FSP_FILE : S_ISDIR(st->st_mode) ? FSP_DIR
		: S_ISLNK(st->st_mode) ? FSP_LINK : FSP_OTHER;
	e->size = (int64_t)st->st_size;
	e->mtime = (int64_t)st->st_mtim.tv_sec;
	e->mode = (unsigned)(st->st_mode & 07777);
}

static int entry_cmp(const void *a, const void *b)
{
	return strcmp(((const struct fsp_entry *)a)->name, ((const struct fsp_entry *)b)->name);
}

int fsp_list(int rootfd, const char *path, struct fsp_entry **out, size_t *n, struct terr *err)
{
	*out = NULL;
	*n = 0;
	int fd = fsp_open_dir(rootfd, path, err);
	if (fd < 0)
		return fd;
	DIR *d = fdopendir(fd);
	if (!d) {
		int e = errno;
		close(fd);
		return path_err(e, "list", path, err);
	}
	struct fsp_entry *v = NULL;
	size_t cnt = 0, cap = 0;
	struct dirent *de;
	int r = 0;
	while ((errno = 0, de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		struct stat st;
		/* An entry removed since readdir saw it is simply not listed. */
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (cnt == cap) {
			size_t ncap = cap ? cap * 2 : 64;
			struct fsp_entry *nv = realloc(v, ncap * sizeof(*nv));
			if (!nv) {
				r = terr_set(err, ENOMEM, "out of memory listing '%.200s'", path);
				break;
			}
			v = nv;
			cap = ncap;
		}
		fill_entry(&v[cnt++], de->d_name, &st);
	}
	if (r == 0 && errno != 0)
		r = path_err(errno, "list", path, err);
	closedir(d);
	if (r < 0) {
		free(v);
		return r;
	}
	if (cnt)
		qsort(v, cnt, sizeof(*v), entry_cmp);
	*out = v;
	*n = cnt;
	return 0;
}

int fsp_stat(int rootfd, const char *path, struct fsp_entry *out, struct terr *err)
{
	int r = fsp_path_check(path, path ? strlen(path) : 0, 1, err);
	if (r < 0)
		return r;
	struct stat st;
	if (is_root(path)) {
		if (fstat(rootfd, &st) < 0)
			return path_err(errno, "stat", "", err);
		fill_entry(out, "", &st);
		return 0;
	}
	char leaf[NAME_MAX + 1];
	int pfd = fsp_open_parent(rootfd, path, leaf, sizeof(leaf), err);
	if (pfd < 0)
		return pfd;
	r = fstatat(pfd, leaf, &st, AT_SYMLINK_NOFOLLOW);
	int e = errno;
	close(pfd);
	if (r < 0)
		return path_err(e, "stat", path, err);
	fill_entry(out, leaf, &st);
	return 0;
}

int fsp_open_read(int rootfd, const char *path, int64_t *size, struct terr *err)
{
	int r = fsp_path_check(path, path ? strlen(path) : 0, 0, err);
	if (r < 0)
		return r;
	/* O_NONBLOCK: opening a FIFO a session made must not hang the caller. */
	int fd = resolve(rootfd, path, O_RDONLY | O_NONBLOCK | O_NOCTTY, 1);
	if (fd < 0)
		return path_err(-fd, "read", path, err);
	struct stat st;
	if (fstat(fd, &st) < 0) {
		int e = errno;
		close(fd);
		return path_err(e, "read", path, err);
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		if (S_ISDIR(st.st_mode))
			return terr_set(err, EISDIR, "read '%.200s': it is a directory; list it instead", path);
		return terr_set(err, EINVAL, "read '%.200s': not a regular file", path);
	}
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	if (size)
		*size = (int64_t)st.st_size;
	return fd;
}

static void chown_leaf(int pfd, const char *leaf, struct fsp_owner owner)
{
	/* AT_SYMLINK_NOFOLLOW: had a session swapped the new entry for a link,
	 * the link is chowned, not its target. Failure leaves root's owner. */
	if (owner.uid != (uid_t)-1 || owner.gid != (gid_t)-1)
		(void)fchownat(pfd, leaf, owner.uid, owner.gid, AT_SYMLINK_NOFOLLOW);
}

/* mkdir of one directory; exist_ok: an existing directory (reached beneath
 * the root) is no error. */
static int mkdir_one(int rootfd, const char *path, int exist_ok, struct fsp_owner owner,
                     struct terr *err)
{
	char leaf[NAME_MAX + 1];
	int pfd = fsp_open_parent(rootfd, path, leaf, sizeof(leaf), err);
	if (pfd < 0)
		return pfd;
	if (mkdirat(pfd, leaf, 0755) == 0) {
		chown_leaf(pfd, leaf, owner);
		close(pfd);
		return 0;
	}
	int e = errno;
	close(pfd);
	if (e == EEXIST && exist_ok) {
		int fd = resolve(rootfd, path, O_RDONLY | O_DIRECTORY, 1);
		if (fd >= 0) {
			close(fd);
			return 0;
		}
		if (fd == -ENOTDIR)
			return terr_set(err, EEXIST, "mkdir '%.200s': it exists and is not a directory", path);
		return path_err(-fd, "mkdir", path, err);
	}
	return path_err(e, "mkdir", path, err);
}

int fsp_mkdir(int rootfd, const char *path, int parents, struct fsp_owner owner, struct terr *err)
{
	int r = fsp_path_check(path, path ? strlen(path) : 0, 0, err);
	if (r < 0)
		return r;
	if (!parents)
		return mkdir_one(rootfd, path, 0, owner, err);
	char buf[FSP_PATH_MAX];
	snprintf(buf, sizeof(buf), "%s", path);
	/* Each prefix in turn, each resolved from the root again. */
	for (char *p = buf;; p++) {
		if (*p == '/' || *p == '\0') {
			char c = *p;
			*p = '\0';
			r = mkdir_one(rootfd, buf, 1, owner, err);
			*p = c;
			if (r < 0 || c == '\0')
				return r;
		}
	}
}

int fsp_rename(int rootfd, const char *from, const char *to, int overwrite, struct terr *err)
{
	char fleaf[NAME_MAX + 1], tleaf[NAME_MAX + 1];
	int fpfd = fsp_open_parent(rootfd, from, fleaf, sizeof(fleaf), err);
	if (fpfd < 0)
		return terr_prefix(err, "move from");
	int tpfd = fsp_open_parent(rootfd, to, tleaf, sizeof(tleaf), err);
	if (tpfd < 0) {
		close(fpfd);
		return terr_prefix(err, "move to");
	}
	int r = renameat2(fpfd, fleaf, tpfd, tleaf, overwrite ? 0 : RENAME_NOREPLACE);
	int e = errno;
	close(fpfd);
	close(tpfd);
	if (r == 0)
		return 0;
	if (e == EINVAL)
		return terr_set(err, EINVAL, "move '%.200s' to '%.200s': a directory cannot move into itself",
			from, to);
	if (e == EEXIST || e == ENOTEMPTY || e == EISDIR || e == ENOTDIR)
		return path_err(e, "move to", to, err);
	return path_err(e, "move", from, err);
}

/* Empties directory name in pfd, never following a link: each level is
 * opened with O_NOFOLLOW relative to the one above. */
static int rm_tree(int pfd, const char *name, int depth, struct terr *err)
{
	if (depth > FSP_RM_DEPTH)
		return terr_set(err, ELOOP, "directories are nested deeper than %d levels", FSP_RM_DEPTH);
	int fd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return terr_set(err, errno, "open '%.200s': %s", name, strerror(errno));
	DIR *d = fdopendir(fd);
	if (!d) {
		int e = errno;
		close(fd);
		return terr_set(err, e, "list '%.200s': %s", name, strerror(e));
	}
	int r = 0;
	struct dirent *de;
	/* Removing entries while reading may make readdir skip some: read again
	 * until a pass removes nothing. */
	for (int removed = 1; removed && r == 0;) {
		removed = 0;
		rewinddir(d);
		while (r == 0 && (de = readdir(d)) != NULL) {
			if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
				continue;
			struct stat st;
			if (fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
				continue;
			if (S_ISDIR(st.st_mode)) {
				r = rm_tree(fd, de->d_name, depth + 1, err);
				if (r == 0 && unlinkat(fd, de->d_name, AT_REMOVEDIR) < 0 && errno != ENOENT)
					r = terr_set(err, errno, "remove '%.200s': %s", de->d_name, strerror(errno));
			} else if (unlinkat(fd, de->d_name, 0) < 0 && errno != ENOENT) {
				r = terr_set(err, errno, "remove '%.200s': %s", de->d_name, strerror(errno));
			}
			removed = 1;
		}
	}
	closedir(d);
	return r;
}

int fsp_remove(int rootfd, const char *path, int recursive, struct terr *err)
{
	char leaf[NAME_MAX + 1];
	int pfd = fsp_open_parent(rootfd, path, leaf, sizeof(leaf), err);
	if (pfd < 0)
		return pfd;
	struct stat st;
	int r;
	if (fstatat(pfd, leaf, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		r = path_err(errno, "remove", path, err);
	} else if (S_ISDIR(st.st_mode)) {
		r = recursive ? rm_tree(pfd, leaf, 0, err) : 0;
		if (r < 0)
			terr_prefix(err, "remove '%.200s'", path);
		else if (unlinkat(pfd, leaf, AT_REMOVEDIR) < 0)
			r = path_err(errno, "remove", path, err);
	} else {
		/* A link is removed itself: unlinkat never follows. */
		r = unlinkat(pfd, leaf, 0) < 0 ? path_err(errno, "remove", path, err) : 0;
	}
	close(pfd);
	return r;
}

static void tmp_name(char *buf, size_t sz)
{
	unsigned char rnd[6];
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
		/* No entropy to be had: the pid and an address still differ per call. */
		uintptr_t x = (uintptr_t)buf ^ (uintptr_t)getpid();
		memcpy(rnd, &x, sizeof(rnd) < sizeof(x) ? sizeof(rnd) : sizeof(x));
	}
	snprintf(buf, sz, ".tessera-upload-%02x%02x%02x%02x%02x%02x",
		rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5]);
}

int fsp_upload_begin(struct fsp_upload *up, int rootfd, const char *path, int overwrite,
                     int64_t budget, struct fsp_owner owner, struct terr *err)
{
	memset(up, 0, sizeof(*up));
	up->dirfd = up->fd = -1;
	int pfd = fsp_open_parent(rootfd, path, up->leaf, sizeof(up->leaf), err);
	if (pfd < 0)
		return terr_prefix(err, "upload");
	struct stat st;
	if (fstatat(pfd, up->leaf, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		int e = S_ISDIR(st.st_mode) ? EISDIR : !overwrite ? EEXIST : 0;
		if (e) {
			close(pfd);
			return path_err(e, "upload", path, err);
		}
	}
	int fd = -1;
	if (fsp_force_named_tmp)
		errno = EOPNOTSUPP;
	else
		fd = openat(pfd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
	if (fd >= 0) {
		up->anonymous = 1;
	} else if (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL) {
		/* No O_TMPFILE on this filesystem (or kernel): a hidden name. */
		for (int tries = 0; tries < 16 && fd < 0; tries++) {
			tmp_name(up->tmpname, sizeof(up->tmpname));
			fd = openat(pfd, up->tmpname, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
			if (fd < 0 && errno != EEXIST)
				break;
		}
	}
	if (fd < 0) {
		int e = errno;
		close(pfd);
		return path_err(e, "upload", path, err);
	}
	/* The owner and mode the file will have in a session; failure to chown
	 * (not root) leaves the manager's user as owner. */
	if (owner.uid != (uid_t)-1 || owner.gid != (gid_t)-1)
		(void)fchown(fd, owner.uid, owner.gid);
	(void)fchmod(fd, 0644);
	up->dirfd = pfd;
	up->fd = fd;
	up->overwrite = overwrite;
	up->budget = budget;
	return 0;
}

int fsp_upload_write(struct fsp_upload *up, const void *buf, size_t len, struct terr *err)
{
	if (up->fd < 0)
		return terr_set(err, EBADF, "the upload is finished");
	if (up->budget >= 0 && (int64_t)len > up->budget - up->written)
		return terr_set(err, EDQUOT,
			"upload '%.200s': it passes the folder's quota (%lld bytes were free); "
			"remove files or ask for a larger quota", up->leaf, (long long)up->budget);
	const char *p = buf;
	while (len > 0) {
		ssize_t w = write(up->fd, p, len);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return path_err(errno, "upload", up->leaf, err);
		}
		p += w;
		len -= (size_t)w;
		up->written += w;
	}
	return 0;
}

void fsp_upload_abort(struct fsp_upload *up)
{
	if (up->fd >= 0)
		close(up->fd);
	if (up->dirfd >= 0) {
		if (!up->anonymous && up->tmpname[0])
			unlinkat(up->dirfd, up->tmpname, 0);
		close(up->dirfd);
	}
	up->fd = up->dirfd = -1;
}

/* Gives the anonymous file the name name in the target's directory. */
static int link_anonymous(struct fsp_upload *up, const char *name)
{
	if (linkat(up->fd, "", up->dirfd, name, AT_EMPTY_PATH) == 0)
		return 0;
	if (errno != ENOENT && errno != EPERM)
		return -errno;
	/* AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH; /proc's link does not. */
	char proc[64];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", up->fd);
	if (linkat(AT_FDCWD, proc, up->dirfd, name, AT_SYMLINK_FOLLOW) == 0)
		return 0;
	return -errno;
}

int fsp_upload_commit(struct fsp_upload *up, struct terr *err)
{
	if (up->fd < 0)
		return terr_set(err, EBADF, "the upload is finished");
	int r = 0;
	if (fsync(up->fd) < 0) {
		r = path_err(errno, "upload", up->leaf, err);
		goto fail;
	}
	if (up->anonymous && !up->overwrite) {
		/* linkat never replaces: an entry made since begin gives EEXIST. */
		r = link_anonymous(up, up->leaf);
		if (r < 0) {
			r = path_err(-r, "upload", up->leaf, err);
			goto fail;
		}
	} else {
		if (up->anonymous) {
			/* Replacing: a hidden name first, then an atomic rename. */
			for (int tries = 0; tries < 16; tries++) {
				tmp_name(up->tmpname, sizeof(up->tmpname));
				r = link_anonymous(up, up->tmpname);
				if (r != -EEXIST)
					break;
			}
			if (r < 0) {
				up->tmpname[0] = '\0';
				r = path_err(-r, "upload", up->leaf, err);
				goto fail;
			}
			up->anonymous = 0;
		}
		if (renameat2(up->dirfd, up->tmpname, up->dirfd, up->leaf,
		              up->overwrite ? 0 : RENAME_NOREPLACE) < 0) {
			r = path_err(errno, "upload", up->leaf, err);
			goto fail;
		}
		up->tmpname[0] = '\0';
	}
	/* The new name itself made durable. */
	(void)fsync(up->dirfd);
	close(up->fd);
	close(up->dirfd);
	up->fd = up->dirfd = -1;
	return 0;
fail:
	fsp_upload_abort(up);
	return r;
}
