/* Folder quotas enforced by the kernel (fsquota.h): btrfs qgroups, XFS and
 * ext4 project quotas, or nothing (the API's own checks only).
 *
 * Written from the kernel's UAPI headers (<linux/btrfs.h>,
 * <linux/btrfs_tree.h>, <linux/quota.h>, <linux/dqblk_xfs.h>, <linux/fs.h>)
 * and their man pages. quotactl(2) and quotactl_fd(2) are called through
 * syscall(2): glibc's <sys/quota.h> clashes with <linux/quota.h>, and
 * quotactl_fd has no wrapper. */
#include "folders/fsquota.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <linux/btrfs.h>
#include <linux/btrfs_tree.h>
#include <linux/dqblk_xfs.h>
#include <linux/fs.h>
#include <linux/quota.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#ifndef SYS_quotactl_fd
#define SYS_quotactl_fd 443
#endif

const char *fsq_kind_name(enum fsq_kind k)
{
	switch (k) {
	case FSQ_BTRFS: return "btrfs-qgroup";
	case FSQ_PROJECT: return "project-quota";
	default: return "api-only";
	}
}

/* ---------- pure parts ---------- */

enum fsq_kind fsq_decide(const struct fsq_observed *o, const char *path, char *why, size_t n)
{
	if (o->magic == FSQ_MAGIC_BTRFS) {
		if (o->btrfs_quota > 0) {
			snprintf(why, n, "%s is on btrfs with quotas on: each folder is a subvolume capped by its qgroup",
				 path);
			return FSQ_BTRFS;
		}
		if (o->btrfs_quota == 0)
			snprintf(why, n, "%s is on btrfs but its quotas are off: writes inside sessions are not capped "
				 "(run `btrfs quota enable` on its mount point, then restart the manager)", path);
		else
			snprintf(why, n, "%s is on btrfs but whether its quotas are on cannot be told (%s): writes "
				 "inside sessions are not capped", path, strerror(-o->btrfs_quota));
		return FSQ_API_ONLY;
	}
	if (o->magic == FSQ_MAGIC_XFS || o->magic == FSQ_MAGIC_EXT4) {
		const char *fs = o->magic == FSQ_MAGIC_XFS ? "XFS" : "ext4";
		const char *opt = o->magic == FSQ_MAGIC_XFS ? "prjquota (or pquota)" : "prjquota, on a filesystem "
			"made with -O quota,project";
		if (o->prj_state > 0) {
			snprintf(why, n, "%s is on %s with project quotas enforced: each folder has a project id and "
				 "limit", path, fs);
			return FSQ_PROJECT;
		}
		if (o->prj_state == -ENOSYS)
			snprintf(why, n, "%s is on %s but this kernel has no quota support (CONFIG_QUOTA): writes "
				 "inside sessions are not capped", path, fs);
		else if (o->prj_state == 0)
			snprintf(why, n, "%s is on %s without enforced project quotas: writes inside sessions are not "
				 "capped (mount it with %s)", path, fs, opt);
		else
			snprintf(why, n, "%s is on %s without project quotas (%s): writes inside sessions are not "
				 "capped (mount it with %s)", path, fs, strerror(-o->prj_state), opt);
		return FSQ_API_ONLY;
	}
	snprintf(why, n, "%s is on a filesystem without folder quotas (type 0x%lx): writes inside sessions are "
		 "not capped; put it on btrfs or on XFS/ext4 with project quotas to cap them", path,
		 (unsigned long)o->magic);
	return FSQ_API_ONLY;
}

uint32_t fsq_projid_pick(const char *folder_id, const uint32_t *used, size_t n)
{
	/* FNV-1a: the same folder gets the same first choice each time. */
	uint32_t h = 2166136261u;
	for (const unsigned char *p = (const unsigned char *)folder_id; *p; p++)
		h = (h ^ *p) * 16777619u;
	const uint32_t span = FSQ_PROJID_MAX - FSQ_PROJID_MIN + 1;
	uint32_t id = FSQ_PROJID_MIN + h % span;
	/* At most n ids are taken, so n + 1 probes find a free one. */
	for (size_t probe = 0; probe <= n && probe < span; probe++) {
		bool taken = false;
		for (size_t i = 0; i < n && !taken; i++)
			taken = used[i] == id;
		if (!taken)
			return id;
		id = id == FSQ_PROJID_MAX ? FSQ_PROJID_MIN : id + 1;
	}
	return 0;
}

int fsq_mount_source(const char *mountinfo, unsigned major, unsigned minor, char *src, size_t n)
{
	/* A line: ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTS */
	for (const char *line = mountinfo; line && *line;) {
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) : strlen(line);
		char buf[4096];
		if (len >= sizeof(buf))
			return -EINVAL;
		memcpy(buf, line, len);
		buf[len] = '\0';
		line = end ? end + 1 : NULL;
		if (!buf[0])
			continue;
		unsigned ma, mi;
		if (sscanf(buf, "%*u %*u %u:%u", &ma, &mi) != 2)
			return -EINVAL;
		if (ma != major || mi != minor)
			continue;
		char *sep = strstr(buf, " - ");
		if (!sep)
			return -EINVAL;
		char fstype[64], source[1024];
		if (sscanf(sep + 3, "%63s %1023s", fstype, source) != 2)
			return -EINVAL;
		if (strlen(source) >= n)
			return -ENAMETOOLONG;
		memcpy(src, source, strlen(source) + 1);
		return 0;
	}
	return -ENOENT;
}

int64_t fsq_free_bytes(int64_t quota, int64_t usage, int64_t reserved)
{
	if (quota <= 0)
		return -1;
	if (usage < 0)
		usage = 0;
	if (reserved < 0)
		reserved = 0;
	if (usage >= quota || reserved >= quota - usage)
		return 0;
	return quota - usage - reserved;
}

/* ---------- btrfs ---------- */

/* Searches tree_id for one item of type at (objectid, offset); its data
 * into item (up to n bytes). 1 found, 0 not, -errno (-ENOENT: no such
 * tree, e.g. no quota tree while quotas are off). */
static int btrfs_find_item(int fd, uint64_t tree_id, uint64_t objectid, uint32_t type, uint64_t offset,
			   void *item, size_t n)
{
	struct btrfs_ioctl_search_args args;
	memset(&args, 0, sizeof(args));
	args.key.tree_id = tree_id;
	args.key.min_objectid = args.key.max_objectid = objectid;
	args.key.min_type = args.key.max_type = type;
	args.key.min_offset = args.key.max_offset = offset;
	args.key.max_transid = UINT64_MAX;
	args.key.nr_items = 1;
	if (ioctl(fd, BTRFS_IOC_TREE_SEARCH, &args) < 0)
		return -errno;
	if (args.key.nr_items < 1)
		return 0;
	struct btrfs_ioctl_search_header sh;
	memcpy(&sh, args.buf, sizeof(sh));
	if (sh.type != type || sh.objectid != objectid || sh.offset != offset)
		return 0;
	size_t len = sh.len < n ? sh.len : n;
	memcpy(item, args.buf + sizeof(sh), len);
	return 1;
}

/* 1 when the btrfs filesystem of fd has quotas on, 0 off, -errno. */
static int btrfs_quota_on(int fd)
{
	struct btrfs_qgroup_status_item st;
	int r = btrfs_find_item(fd, BTRFS_QUOTA_TREE_OBJECTID, 0, BTRFS_QGROUP_STATUS_KEY, 0, &st, sizeof(st));
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	if (!r)
		return 0;
	return (le64toh(st.flags) & BTRFS_QGROUP_STATUS_FLAG_ON) ? 1 : 0;
}

/* The id of the subvolume fd lies in. */
static int btrfs_subvol_id(int fd, uint64_t *id)
{
	struct btrfs_ioctl_ino_lookup_args a;
	memset(&a, 0, sizeof(a));
	a.treeid = 0;
	a.objectid = BTRFS_FIRST_FREE_OBJECTID;
	if (ioctl(fd, BTRFS_IOC_INO_LOOKUP, &a) < 0)
		return -errno;
	*id = a.treeid;
	return 0;
}

/* The subvolumes directly inside subvolume parent (a session can make
 * them: the ioctl is open to unprivileged users): their ids and paths
 * relative to parent's root, at most max. Returns how many, or -errno. */
struct btrfs_child {
	uint64_t id;
	char rel[1024];
};
static int btrfs_children(int fd, uint64_t parent, struct btrfs_child *out, int max)
{
	struct btrfs_ioctl_search_args args;
	int n = 0;
	uint64_t from = 0;
	for (;;) {
		memset(&args, 0, sizeof(args));
		args.key.tree_id = BTRFS_ROOT_TREE_OBJECTID;
		args.key.min_objectid = args.key.max_objectid = parent;
		args.key.min_type = args.key.max_type = BTRFS_ROOT_REF_KEY;
		args.key.min_offset = from;
		args.key.max_offset = UINT64_MAX;
		args.key.max_transid = UINT64_MAX;
		args.key.nr_items = 64;
		if (ioctl(fd, BTRFS_IOC_TREE_SEARCH, &args) < 0)
			return -errno;
		if (args.key.nr_items == 0)
			return n;
		size_t off = 0;
		for (uint32_t i = 0; i < args.key.nr_items; i++) {
			struct btrfs_ioctl_search_header sh;
			if (off + sizeof(sh) > sizeof(args.buf))
				return -EIO;
			memcpy(&sh, args.buf + off, sizeof(sh));
			off += sizeof(sh);
			if (off + sh.len > sizeof(args.buf))
				return -EIO;
			from = sh.offset + 1;
			if (sh.type == BTRFS_ROOT_REF_KEY && sh.objectid == parent &&
			    sh.len >= sizeof(struct btrfs_root_ref) && n < max) {
				struct btrfs_root_ref ref;
				memcpy(&ref, args.buf + off, sizeof(ref));
				size_t nl = le16toh(ref.name_len);
				if (sizeof(ref) + nl > sh.len)
					return -EIO;
				/* Where the child's directory lies in parent: a path
				 * ending in '/', empty for parent's root. */
				struct btrfs_ioctl_ino_lookup_args lk;
				memset(&lk, 0, sizeof(lk));
				lk.treeid = parent;
				lk.objectid = le64toh(ref.dirid);
				if (ioctl(fd, BTRFS_IOC_INO_LOOKUP, &lk) < 0)
					return -errno;
				int w = snprintf(out[n].rel, sizeof(out[n].rel), "%s%.*s", lk.name, (int)nl,
						 args.buf + off + sizeof(ref));
				if (w < 0 || (size_t)w >= sizeof(out[n].rel))
					return -ENAMETOOLONG;
				out[n].id = sh.offset;
				n++;
			}
			off += sh.len;
		}
		if (from == 0) /* wrapped past UINT64_MAX */
			return n;
	}
}

#define FSQ_MAX_NESTED 64

/* Splits path into its parent (opened) and leaf. */
static int open_parent(const char *path, char *leaf, size_t n, struct terr *err)
{
	const char *slash = strrchr(path, '/');
	if (!slash || !slash[1] || strlen(slash + 1) >= n)
		return terr_set(err, EINVAL, "%s is not an absolute path to a folder", path);
	snprintf(leaf, n, "%s", slash + 1);
	char parent[4096];
	size_t pl = slash == path ? 1 : (size_t)(slash - path);
	if (pl >= sizeof(parent))
		return terr_set(err, ENAMETOOLONG, "%s: path too long", path);
	memcpy(parent, path, pl);
	parent[pl] = '\0';
	int fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return terr_set(err, errno, "cannot open %s: %s", parent, strerror(errno));
	return fd;
}

/* ---------- project quotas ---------- */

/* quotactl on the filesystem of dirfd: quotactl_fd(2) (Linux 5.14), else
 * quotactl(2) on the block device h names. */
static int prj_quotactl(const char *device, int dirfd, int cmd, uint32_t id, void *addr)
{
	long r = syscall(SYS_quotactl_fd, dirfd, (unsigned)QCMD(cmd, PRJQUOTA), id, addr);
	if (r == 0)
		return 0;
	if (errno != ENOSYS || !device || !*device)
		return -errno;
	/* quotactl_fd missing, or no quota support at all: the latter answers
	 * ENOSYS to this too. */
	r = syscall(SYS_quotactl, QCMD(cmd, PRJQUOTA), device, id, addr);
	return r == 0 ? 0 : -errno;
}

/* 1 project quota enforced, 0 not, -errno. */
static int prj_state(const char *device, int fd, bool xfs)
{
	struct fs_quota_statv sv;
	memset(&sv, 0, sizeof(sv));
	sv.qs_version = FS_QSTATV_VERSION1;
	int r = prj_quotactl(device, fd, Q_XGETQSTATV, 0, &sv);
	if (r == 0)
		return (sv.qs_flags & FS_QUOTA_PDQ_ENFD) ? 1 : 0;
	if (r == -ENOSYS || xfs)
		return r;
	/* ext4 answers Q_GETINFO once the project quota is on; with the
	 * prjquota mount option it is enforced too. */
	struct if_dqinfo info;
	r = prj_quotactl(device, fd, Q_GETINFO, 0, &info);
	if (r == 0)
		return 1;
	return r == -ESRCH ? 0 : r;
}

static void device_of(const char *path, char *dev, size_t n)
{
	struct stat st;
	dev[0] = '\0';
	if (stat(path, &st) < 0)
		return;
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return;
	char *text = NULL;
	size_t cap = 0, len = 0;
	char chunk[8192];
	for (size_t got; (got = fread(chunk, 1, sizeof(chunk), f)) > 0;) {
		if (len + got + 1 > cap) {
			size_t nc = (len + got + 1) * 2;
			char *t = realloc(text, nc);
			if (!t)
				break;
			text = t;
			cap = nc;
		}
		memcpy(text + len, chunk, got);
		len += got;
		text[len] = '\0';
	}
	fclose(f);
	if (text && fsq_mount_source(text, major(st.st_dev), minor(st.st_dev), dev, n) < 0)
		dev[0] = '\0';
	free(text);
}

/* ---------- probing ---------- */

void fsq_probe(const char *path, struct fsq_host *out)
{
	memset(out, 0, sizeof(*out));
	struct fsq_observed o = {0};
	struct statfs sf;
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fstatfs(fd, &sf) < 0) {
		snprintf(out->why, sizeof(out->why), "%s cannot be probed (%s): writes inside sessions are not capped",
			 path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return;
	}
	o.magic = (long)sf.f_type;
	if (o.magic == FSQ_MAGIC_BTRFS) {
		out->btrfs = true;
		o.btrfs_quota = btrfs_quota_on(fd);
	} else if (o.magic == FSQ_MAGIC_XFS || o.magic == FSQ_MAGIC_EXT4) {
		out->xfs = o.magic == FSQ_MAGIC_XFS;
		device_of(path, out->device, sizeof(out->device));
		o.prj_state = prj_state(out->device, fd, out->xfs);
	}
	close(fd);
	out->kind = fsq_decide(&o, path, out->why, sizeof(out->why));
}

int fsq_make_dir(const struct fsq_host *h, const char *path, struct terr *err)
{
	if (h->btrfs) {
		char leaf[256];
		int pfd = open_parent(path, leaf, sizeof(leaf), err);
		if (pfd < 0)
			return pfd;
		struct btrfs_ioctl_vol_args a;
		memset(&a, 0, sizeof(a));
		snprintf(a.name, sizeof(a.name), "%s", leaf);
		int r = ioctl(pfd, BTRFS_IOC_SUBVOL_CREATE, &a);
		int e = errno;
		close(pfd);
		if (r == 0) {
			/* A subvolume's root takes the creator's umask. */
			if (chmod(path, 0755) < 0)
				return terr_set(err, errno, "cannot set the mode of %s: %s", path, strerror(errno));
			return 0;
		}
		if (e == EEXIST)
			return terr_set(err, EEXIST, "cannot make %s: it exists", path);
		/* Refused (no privilege): a plain directory, uncapped, which
		 * fsq_folder_probe then reports as such. */
	}
	if (mkdir(path, 0755) < 0)
		return terr_set(err, errno, "cannot make %s: %s", path, strerror(errno));
	return 0;
}

int fsq_folder_probe(const struct fsq_host *h, const char *path, struct fsq_folder *out, struct terr *err)
{
	out->kind = FSQ_API_ONLY;
	out->id = 0;
	if (h->kind == FSQ_API_ONLY)
		return 0;
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return terr_set(err, errno, "cannot open %s: %s", path, strerror(errno));
	int rc = 0;
	if (h->kind == FSQ_BTRFS) {
		struct stat st;
		uint64_t id = 0;
		/* A subvolume's root directory is inode 256 of its own tree. */
		if (fstat(fd, &st) == 0 && st.st_ino == BTRFS_FIRST_FREE_OBJECTID && btrfs_subvol_id(fd, &id) == 0) {
			out->kind = FSQ_BTRFS;
			out->id = id;
		}
	} else {
		struct fsxattr fx;
		if (ioctl(fd, FS_IOC_FSGETXATTR, &fx) < 0)
			rc = terr_set(err, errno, "cannot read the project id of %s: %s", path, strerror(errno));
		else if (fx.fsx_projid != 0 && (fx.fsx_xflags & FS_XFLAG_PROJINHERIT)) {
			out->kind = FSQ_PROJECT;
			out->id = fx.fsx_projid;
		}
	}
	close(fd);
	return rc;
}

int fsq_set_project(const char *path, uint32_t projid, struct terr *err)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return terr_set(err, errno, "cannot open %s: %s", path, strerror(errno));
	struct fsxattr fx;
	int rc = 0;
	if (ioctl(fd, FS_IOC_FSGETXATTR, &fx) < 0) {
		rc = terr_set(err, errno, "cannot read the attributes of %s: %s", path, strerror(errno));
	} else {
		fx.fsx_projid = projid;
		fx.fsx_xflags |= FS_XFLAG_PROJINHERIT;
		if (ioctl(fd, FS_IOC_FSSETXATTR, &fx) < 0)
			rc = terr_set(err, errno, "cannot give %s project id %u: %s", path, projid, strerror(errno));
	}
	close(fd);
	return rc;
}

int fsq_set_limit(const struct fsq_host *h, const struct fsq_folder *f, const char *path, int64_t bytes,
		  struct terr *err)
{
	if (f->kind == FSQ_API_ONLY)
		return 0;
	if (bytes < 0)
		return terr_set(err, EINVAL, "a quota cannot be negative");
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return terr_set(err, errno, "cannot open %s: %s", path, strerror(errno));
	int r;
	if (f->kind == FSQ_BTRFS) {
		struct btrfs_ioctl_qgroup_limit_args a;
		memset(&a, 0, sizeof(a));
		a.qgroupid = f->id; /* level 0: the subvolume's own qgroup */
		a.lim.flags = BTRFS_QGROUP_LIMIT_MAX_RFER;
		/* All ones clears the limit. */
		a.lim.max_rfer = bytes ? (uint64_t)bytes : UINT64_MAX;
		/* Through the parent, which lies outside the subvolume: the
		 * ioctl's transaction is charged to the subvolume it is made
		 * in, and one over its limit would refuse it (EDQUOT), so a
		 * quota could never be raised past a full folder's usage. */
		char leaf[256];
		struct terr pe = {0};
		int pfd = open_parent(path, leaf, sizeof(leaf), &pe);
		r = ioctl(pfd >= 0 ? pfd : fd, BTRFS_IOC_QGROUP_LIMIT, &a) < 0 ? -errno : 0;
		if (pfd >= 0)
			close(pfd);
		if (r == -ENOTCONN)
			r = terr_set(err, ENOTCONN, "btrfs quotas were turned off on %s; turn them on again "
				     "(btrfs quota enable) or the quota of %s is not enforced", path, path);
		else if (r < 0)
			r = terr_set(err, -r, "cannot set the qgroup limit of %s: %s", path, strerror(-r));
	} else if (h->xfs) {
		struct fs_disk_quota d;
		memset(&d, 0, sizeof(d));
		d.d_version = FS_DQUOT_VERSION;
		d.d_flags = FS_PROJ_QUOTA;
		d.d_id = (uint32_t)f->id;
		d.d_fieldmask = FS_DQ_BSOFT | FS_DQ_BHARD;
		/* XFS counts 512-byte basic blocks; round up, 0 is no limit. */
		d.d_blk_hardlimit = d.d_blk_softlimit = ((uint64_t)bytes + 511) / 512;
		r = prj_quotactl(h->device, fd, Q_XSETQLIM, (uint32_t)f->id, &d);
		if (r < 0)
			r = terr_set(err, -r, "cannot set the project quota of %s: %s", path, strerror(-r));
	} else {
		struct if_dqblk q;
		memset(&q, 0, sizeof(q));
		/* Block limits are in QIF_DQBLKSIZE (1 KiB) units. */
		q.dqb_bhardlimit = q.dqb_bsoftlimit = ((uint64_t)bytes + QIF_DQBLKSIZE - 1) / QIF_DQBLKSIZE;
		q.dqb_valid = QIF_BLIMITS;
		r = prj_quotactl(h->device, fd, Q_SETQUOTA, (uint32_t)f->id, &q);
		if (r < 0)
			r = terr_set(err, -r, "cannot set the project quota of %s: %s", path, strerror(-r));
	}
	close(fd);
	return r;
}

/* The referenced bytes of subvolume id's qgroup and those of the
 * subvolumes made inside it, which its own qgroup does not count. */
static int btrfs_usage_tree(int fd, uint64_t id, int64_t *bytes, int depth)
{
	struct btrfs_qgroup_info_item it;
	int r = btrfs_find_item(fd, BTRFS_QUOTA_TREE_OBJECTID, 0, BTRFS_QGROUP_INFO_KEY, id, &it, sizeof(it));
	if (r <= 0)
		return r ? r : -ENOENT;
	*bytes = (int64_t)le64toh(it.rfer);
	if (depth > 16)
		return 0;
	struct btrfs_child *kids = calloc(FSQ_MAX_NESTED, sizeof(*kids));
	int n = kids ? btrfs_children(fd, id, kids, FSQ_MAX_NESTED) : 0;
	for (int i = 0; i < n; i++) {
		int64_t more = 0;
		if (btrfs_usage_tree(fd, kids[i].id, &more, depth + 1) == 0)
			*bytes += more;
	}
	free(kids);
	return 0;
}

int fsq_usage(const struct fsq_host *h, const struct fsq_folder *f, const char *path, int64_t *bytes,
	      struct terr *err)
{
	if (f->kind == FSQ_API_ONLY)
		return terr_set(err, ENOTSUP, "the kernel keeps no count for %s", path);
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return terr_set(err, errno, "cannot open %s: %s", path, strerror(errno));
	int r;
	if (f->kind == FSQ_BTRFS) {
		r = btrfs_usage_tree(fd, f->id, bytes, 0);
		if (r < 0)
			r = terr_set(err, -r, "no qgroup for %s", path);
	} else {
		struct if_dqblk q;
		memset(&q, 0, sizeof(q));
		r = prj_quotactl(h->device, fd, Q_GETQUOTA, (uint32_t)f->id, &q);
		if (r == 0)
			*bytes = (int64_t)q.dqb_curspace;
		else
			r = terr_set(err, -r, "cannot read the project quota of %s: %s", path, strerror(-r));
	}
	close(fd);
	return r;
}

static int rm_cb(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if (flag == FTW_DP)
		return rmdir(p) < 0 && errno != ENOENT ? -1 : 0;
	return unlink(p) < 0 && errno != ENOENT ? -1 : 0;
}

/* Destroys the subvolumes inside the subvolume at path (id), deepest
 * first, so that the folder's own can then go. depth bounds the recursion. */
static void destroy_nested(const char *path, uint64_t id, int depth)
{
	if (depth > 16)
		return;
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return;
	struct btrfs_child *kids = calloc(FSQ_MAX_NESTED, sizeof(*kids));
	int n = kids ? btrfs_children(fd, id, kids, FSQ_MAX_NESTED) : 0;
	close(fd);
	for (int i = 0; i < n; i++) {
		char sub[4096];
		if ((size_t)snprintf(sub, sizeof(sub), "%s/%s", path, kids[i].rel) >= sizeof(sub))
			continue;
		destroy_nested(sub, kids[i].id, depth + 1);
		char leaf[256];
		struct terr e = {0};
		int pfd = open_parent(sub, leaf, sizeof(leaf), &e);
		if (pfd < 0)
			continue;
		struct btrfs_ioctl_vol_args a;
		memset(&a, 0, sizeof(a));
		snprintf(a.name, sizeof(a.name), "%s", leaf);
		ioctl(pfd, BTRFS_IOC_SNAP_DESTROY, &a);
		close(pfd);
	}
	free(kids);
}

int fsq_remove_dir(const struct fsq_host *h, const char *path, struct terr *err)
{
	struct stat st;
	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : terr_set(err, errno, "%s: %s", path, strerror(errno));
	if (h->btrfs && S_ISDIR(st.st_mode) && st.st_ino == BTRFS_FIRST_FREE_OBJECTID) {
		uint64_t id = 0;
		int dfd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (dfd >= 0 && btrfs_subvol_id(dfd, &id) == 0)
			destroy_nested(path, id, 0);
		if (dfd >= 0)
			close(dfd);
		char leaf[256];
		int pfd = open_parent(path, leaf, sizeof(leaf), err);
		if (pfd < 0)
			return pfd;
		struct btrfs_ioctl_vol_args a;
		memset(&a, 0, sizeof(a));
		snprintf(a.name, sizeof(a.name), "%s", leaf);
		int r = ioctl(pfd, BTRFS_IOC_SNAP_DESTROY, &a);
		close(pfd);
		if (r == 0)
			return 0;
		/* Not allowed (no privilege): emptied below, and the empty
		 * subvolume's rmdir, which recent kernels allow, ends it. */
	}
	/* FTW_PHYS: links are removed, never followed; FTW_MOUNT: a mount a
	 * session's host left below is not descended into. */
	if (nftw(path, rm_cb, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) < 0)
		return terr_set(err, errno, "cannot remove %s: %s", path, strerror(errno));
	return 0;
}
