/* folders/fsquota: what can be tested without a kernel with quotas.
 * The decision per filesystem from what a probe observed (fixtures for
 * btrfs with quotas on, off and unknown; XFS and ext4 with project quotas
 * enforced, only accounted, refused, and on a kernel without quota
 * support; another filesystem), project id allocation (in range, stable,
 * clear of ids in use, however many collide), the mount source of a device
 * from mountinfo fixtures, the free-bytes arithmetic at its edges, and on
 * this machine's temporary directory the uncapped path: a folder made,
 * probed as api-only, its limit a no-op, its removal never following a
 * link out of it. The btrfs path runs in tests/e2e/test_folder_quota.sh. */
#include "folders/fsquota.h"
#include "testlib.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

TEST(decide)
{
	char why[320];
	struct fsq_observed o = {.magic = FSQ_MAGIC_BTRFS, .btrfs_quota = 1};
	CHECK_INT(fsq_decide(&o, "/srv/f", why, sizeof(why)), FSQ_BTRFS);
	CHECK_CONTAINS(why, "/srv/f");
	o.btrfs_quota = 0;
	CHECK_INT(fsq_decide(&o, "/srv/f", why, sizeof(why)), FSQ_API_ONLY);
	CHECK_CONTAINS(why, "btrfs quota enable");
	o.btrfs_quota = -EPERM;
	CHECK_INT(fsq_decide(&o, "/srv/f", why, sizeof(why)), FSQ_API_ONLY);
	CHECK_CONTAINS(why, "cannot be told");

	o = (struct fsq_observed){.magic = FSQ_MAGIC_XFS, .prj_state = 1};
	CHECK_INT(fsq_decide(&o, "/x", why, sizeof(why)), FSQ_PROJECT);
	CHECK_CONTAINS(why, "XFS");
	o.prj_state = 0; /* accounted, not enforced */
	CHECK_INT(fsq_decide(&o, "/x", why, sizeof(why)), FSQ_API_ONLY);
	CHECK_CONTAINS(why, "prjquota");
	o.prj_state = -ENOSYS; /* no CONFIG_QUOTA */
	CHECK_INT(fsq_decide(&o, "/x", why, sizeof(why)), FSQ_API_ONLY);
	CHECK_CONTAINS(why, "no quota support");
	o = (struct fsq_observed){.magic = FSQ_MAGIC_EXT4, .prj_state = -ESRCH};
	CHECK_INT(fsq_decide(&o, "/e", why, sizeof(why)), FSQ_API_ONLY);
	CHECK_CONTAINS(why, "ext4");
	CHECK_CONTAINS(why, "quota,project");
	o.prj_state = 1;
	CHECK_INT(fsq_decide(&o, "/e", why, sizeof(why)), FSQ_PROJECT);
	/* A btrfs observation for XFS is ignored: the magic decides. */
	o = (struct fsq_observed){.magic = FSQ_MAGIC_XFS, .btrfs_quota = 1, .prj_state = 0};
	CHECK_INT(fsq_decide(&o, "/x", why, sizeof(why)), FSQ_API_ONLY);
	/* tmpfs, overlay, NFS...: uncapped, and the words say so. */
	o = (struct fsq_observed){.magic = 0x01021994L, .btrfs_quota = 1, .prj_state = 1};
	CHECK_INT(fsq_decide(&o, "/t", why, sizeof(why)), FSQ_API_ONLY);
	CHECK_CONTAINS(why, "not capped");
	/* A short buffer is cut, never overrun. */
	char tiny[8];
	fsq_decide(&o, "/a/long/path/name", tiny, sizeof(tiny));
	CHECK_INT((int)strlen(tiny), 7);

	CHECK_STR(fsq_kind_name(FSQ_BTRFS), "btrfs-qgroup");
	CHECK_STR(fsq_kind_name(FSQ_PROJECT), "project-quota");
	CHECK_STR(fsq_kind_name(FSQ_API_ONLY), "api-only");
	CHECK_STR(fsq_kind_name((enum fsq_kind)42), "api-only");
}

TEST(projid_pick)
{
	uint32_t first = fsq_projid_pick("9f3c0a", NULL, 0);
	CHECK(first >= FSQ_PROJID_MIN && first <= FSQ_PROJID_MAX);
	/* Stable: the same folder id gives the same first choice. */
	CHECK_INT((long long)fsq_projid_pick("9f3c0a", NULL, 0), (long long)first);
	/* Different ids spread. */
	CHECK(fsq_projid_pick("9f3c0b", NULL, 0) != first);
	/* Taken ids are skipped, however many follow one another. */
	uint32_t used[64];
	for (int i = 0; i < 64; i++)
		used[i] = first + (uint32_t)i > FSQ_PROJID_MAX ? FSQ_PROJID_MIN + (uint32_t)i : first + (uint32_t)i;
	uint32_t next = fsq_projid_pick("9f3c0a", used, 64);
	CHECK(next >= FSQ_PROJID_MIN && next <= FSQ_PROJID_MAX);
	bool clash = false;
	for (int i = 0; i < 64; i++)
		clash |= used[i] == next;
	CHECK(!clash);
	/* In reverse order too (the set is not assumed sorted). */
	uint32_t rev[64];
	for (int i = 0; i < 64; i++)
		rev[i] = used[63 - i];
	CHECK_INT((long long)fsq_projid_pick("9f3c0a", rev, 64), (long long)next);
	/* Ids outside the range in the set do not matter. */
	uint32_t low[] = {0, 1, 1000, FSQ_PROJID_MIN - 1};
	CHECK_INT((long long)fsq_projid_pick("9f3c0a", low, 4), (long long)first);
	/* Many folders: every pick distinct. */
	enum { N = 2000 };
	uint32_t *all = calloc(N, sizeof(*all));
	char id[32];
	bool distinct = all != NULL;
	for (int i = 0; all && i < N; i++) {
		snprintf(id, sizeof(id), "folder-%d", i % 7); /* few ids: many collisions */
		all[i] = fsq_projid_pick(id, all, (size_t)i);
		distinct &= all[i] >= FSQ_PROJID_MIN && all[i] <= FSQ_PROJID_MAX;
		for (int j = 0; j < i && distinct; j++)
			distinct = all[j] != all[i];
	}
	CHECK(distinct);
	free(all);
}

static const char mountinfo[] =
	"22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
	"35 22 0:32 / /proc rw,nosuid - proc proc rw\n"
	"60 22 7:0 / /srv/tessera rw,relatime shared:30 master:2 - xfs /dev/loop0 rw,attr2,inode64,prjquota\n"
	"61 22 253:3 /sub /mnt/x rw - ext4 /dev/mapper/vg-data rw,prjquota\n";

TEST(mount_source)
{
	char src[64];
	CHECK_INT(fsq_mount_source(mountinfo, 7, 0, src, sizeof(src)), 0);
	CHECK_STR(src, "/dev/loop0");
	CHECK_INT(fsq_mount_source(mountinfo, 253, 3, src, sizeof(src)), 0);
	CHECK_STR(src, "/dev/mapper/vg-data");
	CHECK_INT(fsq_mount_source(mountinfo, 8, 1, src, sizeof(src)), 0);
	CHECK_STR(src, "/dev/sda1");
	CHECK_INT(fsq_mount_source(mountinfo, 9, 9, src, sizeof(src)), -ENOENT);
	CHECK_INT(fsq_mount_source("", 7, 0, src, sizeof(src)), -ENOENT);
	char small[5];
	CHECK_INT(fsq_mount_source(mountinfo, 7, 0, small, sizeof(small)), -ENAMETOOLONG);
	CHECK_INT(fsq_mount_source("garbage line\n", 7, 0, src, sizeof(src)), -EINVAL);
	CHECK_INT(fsq_mount_source("60 22 7:0 / /x rw no separator\n", 7, 0, src, sizeof(src)), -EINVAL);
	/* No newline at the end. */
	CHECK_INT(fsq_mount_source("60 22 7:0 / /x rw - xfs /dev/vdb rw", 7, 0, src, sizeof(src)), 0);
	CHECK_STR(src, "/dev/vdb");
}

TEST(free_bytes)
{
	const int64_t MiB = 1 << 20;
	CHECK_INT(fsq_free_bytes(0, 5 * MiB, 0), -1);            /* no quota */
	CHECK_INT(fsq_free_bytes(10 * MiB, 0, 0), 10 * MiB);
	CHECK_INT(fsq_free_bytes(10 * MiB, 4 * MiB, 3 * MiB), 3 * MiB);
	CHECK_INT(fsq_free_bytes(10 * MiB, 4 * MiB, 6 * MiB), 0); /* exactly full */
	CHECK_INT(fsq_free_bytes(10 * MiB, 12 * MiB, 0), 0);      /* over (quota lowered) */
	CHECK_INT(fsq_free_bytes(10 * MiB, 4 * MiB, 7 * MiB), 0); /* reservations past it */
	CHECK_INT(fsq_free_bytes(10 * MiB, -1, -5), 10 * MiB);    /* nonsense counts clamp */
	CHECK_INT(fsq_free_bytes(INT64_MAX, INT64_MAX - 1, INT64_MAX), 0); /* no overflow */
	CHECK_INT(fsq_free_bytes(INT64_MAX, 0, 1), INT64_MAX - 1);
	CHECK_INT(fsq_free_bytes(-3, 0, 0), -1);
}

/* The uncapped path on whatever filesystem /tmp is (api-only unless it is
 * btrfs with quotas, which the e2e test covers). */
TEST(plain_directory)
{
	char base[] = "/tmp/tessera-fsq-XXXXXX";
	CHECK(mkdtemp(base) != NULL);
	struct fsq_host h;
	fsq_probe(base, &h);
	CHECK(h.why[0] != '\0');
	if (h.kind != FSQ_API_ONLY || h.btrfs) {
		printf("# %s: not the plain case (%s); skipped\n", base, h.why);
		rmdir(base);
		return;
	}
	char dir[256], outside[256], link[300];
	snprintf(dir, sizeof(dir), "%s/f1", base);
	snprintf(outside, sizeof(outside), "%s/outside", base);
	struct terr err = {0};
	CHECK_INT(fsq_make_dir(&h, dir, &err), 0);
	struct stat st;
	CHECK(stat(dir, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 07777) == 0755);
	CHECK_INT(fsq_make_dir(&h, dir, &err), -EEXIST);
	struct fsq_folder f = {.kind = FSQ_BTRFS, .id = 7};
	CHECK_INT(fsq_folder_probe(&h, dir, &f, &err), 0);
	CHECK_INT(f.kind, FSQ_API_ONLY);
	CHECK_INT(fsq_set_limit(&h, &f, dir, 10 << 20, &err), 0);
	int64_t used = 0;
	CHECK_INT(fsq_usage(&h, &f, dir, &used, &err), -ENOTSUP);
	/* A link out of the folder is removed, never followed. */
	CHECK(mkdir(outside, 0700) == 0);
	snprintf(link, sizeof(link), "%s/keep", outside);
	FILE *fp = fopen(link, "w");
	CHECK(fp != NULL);
	if (fp)
		fclose(fp);
	snprintf(link, sizeof(link), "%s/escape", dir);
	CHECK(symlink(outside, link) == 0);
	snprintf(link, sizeof(link), "%s/sub/deeper", dir);
	CHECK(mkdir(link, 0755) < 0); /* sub is missing */
	snprintf(link, sizeof(link), "%s/sub", dir);
	CHECK(mkdir(link, 0755) == 0);
	CHECK_INT(fsq_remove_dir(&h, dir, &err), 0);
	CHECK(lstat(dir, &st) < 0 && errno == ENOENT);
	snprintf(link, sizeof(link), "%s/keep", outside);
	CHECK(stat(link, &st) == 0);
	/* Removing what is gone is no error. */
	CHECK_INT(fsq_remove_dir(&h, dir, &err), 0);
	unlink(link);
	rmdir(outside);
	rmdir(base);
}

int main(void)
{
	RUN(decide);
	RUN(projid_pick);
	RUN(mount_source);
	RUN(free_bytes);
	RUN(plain_directory);
	return testlib_done();
}
