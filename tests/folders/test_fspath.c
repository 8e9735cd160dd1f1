/* src/folders/fspath: paths from the API against a folder a session has
 * filled with hostile links, once through openat2 and once through the
 * fallback walk. Each case also checks that nothing outside the folder was
 * read, written or removed. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "folders/fspath.h"
#include "testlib.h"

static char base[256], folder[300], outside[300];
static int rootfd = -1;

static void put(const char *path, const char *content)
{
	FILE *f = fopen(path, "w");
	if (!f) {
		perror(path);
		exit(2);
	}
	fputs(content, f);
	fclose(f);
}

static char *slurp_fd(int fd)
{
	static char buf[4096];
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	buf[n < 0 ? 0 : n] = '\0';
	return buf;
}

static int exists_at(const char *dir, const char *name)
{
	char p[700];
	struct stat st;
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return lstat(p, &st) == 0;
}

static const char *fmt(const char *dir, const char *name)
{
	static char p[700];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return p;
}

/* Hidden upload files left in dir. */
static int count_tmp(const char *dir)
{
	DIR *d = opendir(dir);
	int n = 0;
	struct dirent *de;
	while (d && (de = readdir(d)) != NULL)
		if (strncmp(de->d_name, ".tessera-upload-", 16) == 0)
			n++;
	if (d)
		closedir(d);
	return n;
}

/* A fresh hostile tree: the folder and, beside it, what must stay safe. */
static void setup_tree(void)
{
	char cmd[800];
	if (rootfd >= 0)
		close(rootfd);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s/folder' '%s/outside'", base, base);
	if (system(cmd) != 0)
		exit(2);
	mkdir(folder, 0755);
	mkdir(outside, 0755);
	put(fmt(outside, "secret"), "secret");
	mkdir(fmt(folder, "sub"), 0755);
	put(fmt(folder, "sub/file.txt"), "hello");
	/* An absolute link out, as a session's ln -s /etc etc would be; it
	 * points at a decoy so that even a broken build touches nothing of
	 * the machine's own. */
	put(fmt(outside, "passwd"), "decoy");
	symlink(outside, fmt(folder, "etc"));
	symlink("../..", fmt(folder, "up"));
	symlink("../outside", fmt(folder, "linkdir"));
	symlink("../outside/secret", fmt(folder, "tosecret"));
	symlink("loop2", fmt(folder, "loop1"));
	symlink("loop1", fmt(folder, "loop2"));
	symlink("sub", fmt(folder, "in"));
	mkfifo(fmt(folder, "sub/fifo"), 0644);
	rootfd = open(folder, O_RDONLY | O_DIRECTORY);
	if (rootfd < 0)
		exit(2);
}

TEST(path_check)
{
	struct terr err;
	CHECK_INT(fsp_path_check("a/b.txt", 7, 0, &err), 0);
	CHECK_INT(fsp_path_check("", 0, 1, &err), 0);
	CHECK_INT(fsp_path_check(".", 1, 1, &err), 0);
	CHECK_INT(fsp_path_check("", 0, 0, &err), -EINVAL);
	CHECK_INT(fsp_path_check("/etc/passwd", 11, 0, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "absolute");
	CHECK_INT(fsp_path_check("a/../../b", 9, 0, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "'..'");
	CHECK_INT(fsp_path_check("..", 2, 1, &err), -EINVAL);
	CHECK_INT(fsp_path_check("a//b", 4, 0, &err), -EINVAL);
	CHECK_INT(fsp_path_check("a/", 2, 0, &err), -EINVAL);
	CHECK_INT(fsp_path_check("./a", 3, 0, &err), -EINVAL);
	CHECK_INT(fsp_path_check("a\0b", 3, 0, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "NUL");
	char longname[300];
	memset(longname, 'x', 299);
	longname[299] = '\0';
	CHECK_INT(fsp_path_check(longname, 299, 0, &err), -ENAMETOOLONG);
	CHECK_INT(fsp_path_check("...", 3, 0, &err), 0);
	CHECK_INT(fsp_path_check(NULL, 0, 0, &err), -EINVAL);
}

/* Reads, listings and stats never reach outside. */
static void hostile_reads(void)
{
	setup_tree();
	struct terr err;
	int64_t size = 0;
	CHECK_INT(fsp_open_read(rootfd, "etc/passwd", &size, &err), -EXDEV);
	CHECK_CONTAINS(err.msg, "outside the folder");
	CHECK_INT(fsp_open_read(rootfd, "etc", &size, &err), -EXDEV);
	CHECK_INT(fsp_open_read(rootfd, "up/etc/passwd", &size, &err), -EXDEV);
	CHECK_INT(fsp_open_read(rootfd, "tosecret", &size, &err), -EXDEV);
	CHECK_INT(fsp_open_read(rootfd, "linkdir/secret", &size, &err), -EXDEV);
	int r = fsp_open_read(rootfd, "loop1", &size, &err);
	CHECK(r == -ELOOP || r == -EXDEV);
	CHECK_INT(fsp_open_read(rootfd, "../outside/secret", &size, &err), -EINVAL);
	CHECK_INT(fsp_open_read(rootfd, "/etc/passwd", &size, &err), -EINVAL);
	CHECK_INT(fsp_open_read(rootfd, "sub", &size, &err), -EISDIR);
	/* A FIFO must neither be read nor hang the caller. */
	CHECK_INT(fsp_open_read(rootfd, "sub/fifo", &size, &err), -EINVAL);
	CHECK_INT(fsp_open_read(rootfd, "sub/nope", &size, &err), -ENOENT);
	int fd = fsp_open_read(rootfd, "sub/file.txt", &size, &err);
	CHECK(fd >= 0);
	if (fd >= 0) {
		CHECK_INT(size, 5);
		CHECK_STR(slurp_fd(fd), "hello");
		close(fd);
	}
	/* A link that stays inside is followed through openat2; the walk
	 * follows none. */
	fd = fsp_open_read(rootfd, "in/file.txt", &size, &err);
	if (fsp_force_fallback) {
		CHECK_INT(fd, -EXDEV);
	} else {
		CHECK(fd >= 0);
		if (fd >= 0)
			close(fd);
	}

	struct fsp_entry *ents = NULL;
	size_t n = 0;
	CHECK_INT(fsp_list(rootfd, "etc", &ents, &n, &err), -EXDEV);
	CHECK_INT(fsp_list(rootfd, "linkdir", &ents, &n, &err), -EXDEV);
	CHECK_INT(fsp_list(rootfd, "up", &ents, &n, &err), -EXDEV);
	CHECK_INT(fsp_list(rootfd, "..", &ents, &n, &err), -EINVAL);
	CHECK_INT(fsp_list(rootfd, "", &ents, &n, &err), 0);
	int seen_etc = 0, seen_sub = 0;
	for (size_t i = 0; i < n; i++) {
		if (strcmp(ents[i].name, "etc") == 0) {
			seen_etc = 1;
			CHECK_INT(ents[i].type, FSP_LINK);
			CHECK_INT(ents[i].size, (long long)strlen(outside));
		}
		if (strcmp(ents[i].name, "sub") == 0) {
			seen_sub = 1;
			CHECK_INT(ents[i].type, FSP_DIR);
		}
		if (i > 0)
			CHECK(strcmp(ents[i - 1].name, ents[i].name) < 0);
	}
	CHECK(seen_etc && seen_sub);
	CHECK_INT(n, 8);
	free(ents);
	CHECK_INT(fsp_list(rootfd, "sub", &ents, &n, &err), 0);
	CHECK_INT(n, 2);
	if (n == 2) {
		CHECK_STR(ents[0].name, "fifo");
		CHECK_INT(ents[0].type, FSP_OTHER);
		CHECK_STR(ents[1].name, "file.txt");
		CHECK_INT(ents[1].type, FSP_FILE);
		CHECK_INT(ents[1].size, 5);
		CHECK_INT(ents[1].mode, 0644 & ~(unsigned)0);
	}
	free(ents);

	struct fsp_entry e;
	CHECK_INT(fsp_stat(rootfd, "etc", &e, &err), 0);
	CHECK_INT(e.type, FSP_LINK);
	CHECK_INT(fsp_stat(rootfd, "etc/passwd", &e, &err), -EXDEV);
	CHECK_INT(fsp_stat(rootfd, "linkdir/secret", &e, &err), -EXDEV);
	CHECK_INT(fsp_stat(rootfd, "", &e, &err), 0);
	CHECK_INT(e.type, FSP_DIR);
}

/* Writes, moves and removals never reach outside; a link as the last
 * component is itself replaced or removed. */
static void hostile_writes(void)
{
	setup_tree();
	struct terr err;
	struct fsp_upload up;
	CHECK_INT(fsp_mkdir(rootfd, "linkdir/new", 0, FSP_OWNER_KEEP, &err), -EXDEV);
	CHECK_INT(fsp_mkdir(rootfd, "linkdir/new/deeper", 1, FSP_OWNER_KEEP, &err), -EXDEV);
	CHECK_INT(fsp_mkdir(rootfd, "etc/tessera-test", 0, FSP_OWNER_KEEP, &err), -EXDEV);
	CHECK(!exists_at(outside, "new"));
	CHECK(!exists_at(outside, "tessera-test"));

	CHECK_INT(fsp_upload_begin(&up, rootfd, "linkdir/x", 1, -1, FSP_OWNER_KEEP, &err), -EXDEV);
	CHECK(!exists_at(outside, "x"));
	CHECK_INT(fsp_upload_begin(&up, rootfd, "up/x", 1, -1, FSP_OWNER_KEEP, &err), -EXDEV);
	CHECK_INT(fsp_upload_begin(&up, rootfd, "../x", 1, -1, FSP_OWNER_KEEP, &err), -EINVAL);
	/* The last component a link: refused without overwrite, replaced (the
	 * link, not its target) with it. */
	CHECK_INT(fsp_upload_begin(&up, rootfd, "tosecret", 0, -1, FSP_OWNER_KEEP, &err), -EEXIST);
	CHECK_INT(fsp_upload_begin(&up, rootfd, "tosecret", 1, -1, FSP_OWNER_KEEP, &err), 0);
	CHECK_INT(fsp_upload_write(&up, "mine", 4, &err), 0);
	CHECK_INT(fsp_upload_commit(&up, &err), 0);
	struct stat st;
	CHECK_INT(lstat(fmt(folder, "tosecret"), &st), 0);
	CHECK(S_ISREG(st.st_mode));
	int fd = open(fmt(outside, "secret"), O_RDONLY);
	CHECK_STR(slurp_fd(fd), "secret");
	close(fd);

	CHECK_INT(fsp_rename(rootfd, "sub/file.txt", "linkdir/file.txt", 0, &err), -EXDEV);
	CHECK_INT(fsp_rename(rootfd, "linkdir/secret", "stolen", 0, &err), -EXDEV);
	CHECK_INT(fsp_rename(rootfd, "sub/file.txt", "../file.txt", 0, &err), -EINVAL);
	CHECK(exists_at(folder, "sub/file.txt"));
	CHECK(!exists_at(folder, "stolen"));

	CHECK_INT(fsp_remove(rootfd, "linkdir/secret", 0, &err), -EXDEV);
	CHECK_INT(fsp_remove(rootfd, "etc/passwd", 0, &err), -EXDEV);
	CHECK_INT(fsp_remove(rootfd, "..", 1, &err), -EINVAL);
	CHECK_INT(fsp_remove(rootfd, "", 1, &err), -EINVAL);
	/* A link to a directory outside removed recursively: the link goes. */
	CHECK_INT(fsp_remove(rootfd, "linkdir", 1, &err), 0);
	CHECK(!exists_at(folder, "linkdir"));
	CHECK(exists_at(outside, "secret"));
	/* A directory holding links out is emptied without following them. */
	mkdir(fmt(folder, "sub/deep"), 0755);
	symlink("../../../outside", fmt(folder, "sub/deep/out"));
	symlink(outside, fmt(folder, "sub/etc"));
	CHECK_INT(fsp_remove(rootfd, "sub", 0, &err), -ENOTEMPTY);
	CHECK_CONTAINS(err.msg, "recursively");
	CHECK_INT(fsp_remove(rootfd, "sub", 1, &err), 0);
	CHECK(!exists_at(folder, "sub"));
	CHECK(exists_at(outside, "secret"));
	CHECK(exists_at(outside, "passwd"));
	/* A loop is removed as the link it is. */
	CHECK_INT(fsp_remove(rootfd, "loop1", 0, &err), 0);
	CHECK(!exists_at(folder, "loop1"));
}

TEST(hostile_openat2)
{
	fsp_force_fallback = 0;
	hostile_reads();
	hostile_writes();
}

TEST(hostile_fallback_walk)
{
	fsp_force_fallback = 1;
	hostile_reads();
	hostile_writes();
	fsp_force_fallback = 0;
}

TEST(upload_atomic)
{
	setup_tree();
	struct terr err;
	struct fsp_upload up;
	struct fsp_owner work = {1000, 1000};
	CHECK_INT(fsp_upload_begin(&up, rootfd, "sub/new.bin", 0, -1, work, &err), 0);
	CHECK_INT(fsp_upload_write(&up, "abc", 3, &err), 0);
	CHECK_INT(fsp_upload_write(&up, "def", 3, &err), 0);
	/* Nothing under the final name before the commit. */
	CHECK(!exists_at(folder, "sub/new.bin"));
	CHECK_INT(fsp_upload_commit(&up, &err), 0);
	struct stat st;
	CHECK_INT(stat(fmt(folder, "sub/new.bin"), &st), 0);
	CHECK_INT(st.st_size, 6);
	CHECK_INT(st.st_mode & 07777, 0644);
	if (geteuid() == 0) {
		CHECK_INT(st.st_uid, 1000);
		CHECK_INT(st.st_gid, 1000);
	}
	CHECK_INT(count_tmp(fmt(folder, "sub")), 0);

	/* An aborted upload leaves nothing, neither the name nor a hidden file. */
	CHECK_INT(fsp_upload_begin(&up, rootfd, "sub/cut.bin", 0, -1, work, &err), 0);
	CHECK_INT(fsp_upload_write(&up, "partial", 7, &err), 0);
	fsp_upload_abort(&up);
	fsp_upload_abort(&up);
	CHECK(!exists_at(folder, "sub/cut.bin"));
	CHECK_INT(count_tmp(fmt(folder, "sub")), 0);

	/* The budget: a write that would pass it is refused whole. */
	CHECK_INT(fsp_upload_begin(&up, rootfd, "sub/big.bin", 0, 10, work, &err), 0);
	CHECK_INT(fsp_upload_write(&up, "0123456789", 10, &err), 0);
	CHECK_INT(fsp_upload_write(&up, "x", 1, &err), -EDQUOT);
	CHECK_CONTAINS(err.msg, "quota");
	fsp_upload_abort(&up);
	CHECK(!exists_at(folder, "sub/big.bin"));

	/* Existing name: refused at begin, and at commit if made meanwhile. */
	CHECK_INT(fsp_upload_begin(&up, rootfd, "sub/new.bin", 0, -1, work, &err), -EEXIST);
	CHECK_INT(fsp_upload_begin(&up, rootfd, "sub", 1, -1, work, &err), -EISDIR);
	CHECK_INT(fsp_upload_begin(&up, rootfd, "sub/race.bin", 0, -1, work, &err), 0);
	CHECK_INT(fsp_upload_write(&up, "late", 4, &err), 0);
	put(fmt(folder, "sub/race.bin"), "first");
	CHECK_INT(fsp_upload_commit(&up, &err), -EEXIST);
	int fd = open(fmt(folder, "sub/race.bin"), O_RDONLY);
	CHECK_STR(slurp_fd(fd), "first");
	close(fd);
	CHECK_INT(count_tmp(fmt(folder, "sub")), 0);
	/* Overwrite replaces atomically. */
	CHECK_INT(fsp_upload_begin(&up, rootfd, "sub/race.bin", 1, -1, work, &err), 0);
	CHECK_INT(fsp_upload_write(&up, "second", 6, &err), 0);
	CHECK_INT(fsp_upload_commit(&up, &err), 0);
	fd = open(fmt(folder, "sub/race.bin"), O_RDONLY);
	CHECK_STR(slurp_fd(fd), "second");
	close(fd);
	CHECK_INT(count_tmp(fmt(folder, "sub")), 0);
	CHECK_INT(fsp_upload_write(&up, "x", 1, &err), -EBADF);
}

/* The same without O_TMPFILE: a hidden name, gone after commit or abort. */
TEST(upload_named_temp)
{
	fsp_force_named_tmp = 1;
	setup_tree();
	struct terr err;
	struct fsp_upload up;
	CHECK_INT(fsp_upload_begin(&up, rootfd, "sub/n.bin", 0, -1, FSP_OWNER_KEEP, &err), 0);
	CHECK_INT(up.anonymous, 0);
	CHECK_INT(count_tmp(fmt(folder, "sub")), 1);
	CHECK_INT(fsp_upload_write(&up, "named", 5, &err), 0);
	CHECK(!exists_at(folder, "sub/n.bin"));
	CHECK_INT(fsp_upload_commit(&up, &err), 0);
	CHECK_INT(count_tmp(fmt(folder, "sub")), 0);
	int fd = open(fmt(folder, "sub/n.bin"), O_RDONLY);
	CHECK_STR(slurp_fd(fd), "named");
	close(fd);
	CHECK_INT(fsp_upload_begin(&up, rootfd, "sub/cut.bin", 0, -1, FSP_OWNER_KEEP, &err), 0);
	CHECK_INT(fsp_upload_write(&up, "x", 1, &err), 0);
	fsp_upload_abort(&up);
	CHECK_INT(count_tmp(fmt(folder, "sub")), 0);
	CHECK(!exists_at(folder, "sub/cut.bin"));
	/* Made meanwhile: kept, the upload refused, its hidden file gone. */
	CHECK_INT(fsp_upload_begin(&up, rootfd, "sub/race.bin", 0, -1, FSP_OWNER_KEEP, &err), 0);
	put(fmt(folder, "sub/race.bin"), "first");
	CHECK_INT(fsp_upload_commit(&up, &err), -EEXIST);
	CHECK_INT(count_tmp(fmt(folder, "sub")), 0);
	fd = open(fmt(folder, "sub/race.bin"), O_RDONLY);
	CHECK_STR(slurp_fd(fd), "first");
	close(fd);
	CHECK_INT(fsp_upload_begin(&up, rootfd, "sub/race.bin", 1, -1, FSP_OWNER_KEEP, &err), 0);
	CHECK_INT(fsp_upload_write(&up, "again", 5, &err), 0);
	CHECK_INT(fsp_upload_commit(&up, &err), 0);
	fd = open(fmt(folder, "sub/race.bin"), O_RDONLY);
	CHECK_STR(slurp_fd(fd), "again");
	close(fd);
	fsp_force_named_tmp = 0;
}

TEST(mkdir_rename_remove)
{
	setup_tree();
	struct terr err;
	struct fsp_owner work = {1000, 1000};
	CHECK_INT(fsp_mkdir(rootfd, "a/b/c", 0, work, &err), -ENOENT);
	CHECK_INT(fsp_mkdir(rootfd, "a/b/c", 1, work, &err), 0);
	CHECK_INT(fsp_mkdir(rootfd, "a/b/c", 1, work, &err), 0);
	CHECK_INT(fsp_mkdir(rootfd, "a/b/c", 0, work, &err), -EEXIST);
	CHECK_INT(fsp_mkdir(rootfd, "sub/file.txt/x", 1, work, &err), -EEXIST);
	CHECK_INT(fsp_mkdir(rootfd, "", 1, work, &err), -EINVAL);
	struct stat st;
	CHECK_INT(stat(fmt(folder, "a/b/c"), &st), 0);
	CHECK(S_ISDIR(st.st_mode));
	if (geteuid() == 0)
		CHECK_INT(st.st_uid, 1000);

	put(fmt(folder, "a/one"), "1");
	put(fmt(folder, "a/two"), "2");
	CHECK_INT(fsp_rename(rootfd, "a/one", "a/two", 0, &err), -EEXIST);
	CHECK_INT(fsp_rename(rootfd, "a/one", "a/b/c/one", 0, &err), 0);
	CHECK(exists_at(folder, "a/b/c/one"));
	CHECK_INT(fsp_rename(rootfd, "a/b/c/one", "a/two", 1, &err), 0);
	CHECK(!exists_at(folder, "a/b/c/one"));
	CHECK_INT(fsp_rename(rootfd, "a", "a/b/c/a", 0, &err), -EINVAL);
	CHECK_INT(fsp_rename(rootfd, "nope", "x", 0, &err), -ENOENT);
	CHECK_INT(fsp_rename(rootfd, "", "x", 0, &err), -EINVAL);

	CHECK_INT(fsp_remove(rootfd, "a/two", 0, &err), 0);
	CHECK_INT(fsp_remove(rootfd, "a/two", 0, &err), -ENOENT);
	CHECK_INT(fsp_remove(rootfd, "a", 0, &err), -ENOTEMPTY);
	CHECK_INT(fsp_remove(rootfd, "a/b/c", 0, &err), 0);
	CHECK_INT(fsp_remove(rootfd, "a", 1, &err), 0);
	CHECK(!exists_at(folder, "a"));
}

int main(void)
{
	const char *tmp = getenv("TMPDIR");
	snprintf(base, sizeof(base), "%s/tessera-fspath-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(base))
		return 2;
	snprintf(folder, sizeof(folder), "%s/folder", base);
	snprintf(outside, sizeof(outside), "%s/outside", base);
	RUN(path_check);
	RUN(hostile_openat2);
	RUN(hostile_fallback_walk);
	RUN(upload_atomic);
	RUN(upload_named_temp);
	RUN(mkdir_rename_remove);
	close(rootfd);
	char cmd[400];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
	if (system(cmd) != 0)
		return 2;
	return testlib_done();
}
