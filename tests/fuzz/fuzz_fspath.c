/* Fuzz target: folder paths from the API (src/folders/fspath). The input is
 * a path as a request would carry it (any bytes, NUL included). It is
 * checked, then resolved inside a hostile folder built once in a temporary
 * directory (links to a decoy outside it, absolute and relative, a loop,
 * a link inside): stat, read, list, and mkdir -p then removal under w/,
 * each through openat2 and through the fallback walk. The target aborts if
 * anything resolved to the decoy, if the decoy changed, or if a path the
 * checker accepted holds a '..' component. */
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "folders/fspath.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char folder[300], decoy[300];
static int rootfd = -1;
static dev_t decoy_dev;
static ino_t decoy_dir_ino, decoy_file_ino;

static void link_at(const char *target, const char *name)
{
	char p[700];
	snprintf(p, sizeof(p), "%s/%s", folder, name);
	/* Already there on every call but the first (or removed by a
	 * previous input and made again). */
	(void)symlink(target, p);
}

static char base[256];

static void remove_tree(void)
{
	char cmd[400];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", base);
}

static void build_tree(void)
{
	const char *tmp = getenv("TMPDIR");
	snprintf(base, sizeof(base), "%s/tessera-fuzz-fspath-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(base))
		abort();
	atexit(remove_tree);
	snprintf(folder, sizeof(folder), "%s/folder", base);
	snprintf(decoy, sizeof(decoy), "%s/decoy", base);
	mkdir(folder, 0755);
	mkdir(decoy, 0755);
	char p[700];
	snprintf(p, sizeof(p), "%s/secret", decoy);
	FILE *f = fopen(p, "w");
	if (!f)
		abort();
	fputs("secret", f);
	fclose(f);
	struct stat st;
	if (stat(decoy, &st) != 0)
		abort();
	decoy_dev = st.st_dev;
	decoy_dir_ino = st.st_ino;
	if (stat(p, &st) != 0)
		abort();
	decoy_file_ino = st.st_ino;
	snprintf(p, sizeof(p), "%s/d", folder);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/d/f", folder);
	f = fopen(p, "w");
	if (f)
		fclose(f);
	snprintf(p, sizeof(p), "%s/w", folder);
	mkdir(p, 0755);
	rootfd = open(folder, O_RDONLY | O_DIRECTORY);
	if (rootfd < 0)
		abort();
}

static void relink(void)
{
	link_at(decoy, "abs");
	link_at("../decoy", "rel");
	link_at("../decoy/secret", "sec");
	link_at("../../..", "up");
	link_at("loopb", "loopa");
	link_at("loopa", "loopb");
	link_at("d", "in");
	link_at(decoy, "w/abs");
	link_at("../../decoy", "w/rel");
	link_at("..", "w/parent");
}

static void check_not_decoy(int fd)
{
	struct stat st;
	if (fd >= 0 && fstat(fd, &st) == 0 && st.st_dev == decoy_dev &&
	    (st.st_ino == decoy_dir_ino || st.st_ino == decoy_file_ino))
		abort();
}

static void check_decoy_intact(void)
{
	DIR *d = opendir(decoy);
	if (!d)
		abort();
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)) != NULL)
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
			n++;
	closedir(d);
	if (n != 1)
		abort();
}

static void exercise(const char *path)
{
	struct terr err;
	struct fsp_entry e;
	(void)fsp_stat(rootfd, path, &e, &err);
	int64_t sz;
	int fd = fsp_open_read(rootfd, path, &sz, &err);
	check_not_decoy(fd);
	if (fd >= 0)
		close(fd);
	fd = fsp_open_dir(rootfd, path, &err);
	check_not_decoy(fd);
	if (fd >= 0)
		close(fd);
	struct fsp_entry *ents = NULL;
	size_t n = 0;
	if (fsp_list(rootfd, path, &ents, &n, &err) == 0)
		free(ents);

	/* Writes go under w/ only, and what they made is removed again. */
	char wpath[FSP_PATH_MAX + 8];
	snprintf(wpath, sizeof(wpath), "w/%s", path);
	if (fsp_path_check(wpath, strlen(wpath), 0, &err) == 0 && strlen(wpath) < 200) {
		char first[300];
		/* strlen(wpath) < 200 was checked: a copy, not a format. */
		memcpy(first, wpath, strlen(wpath) + 1);
		char *slash = strchr(first + 2, '/');
		if (slash)
			*slash = '\0';
		struct stat st;
		char full[700];
		snprintf(full, sizeof(full), "%s/%s", folder, first);
		int existed = lstat(full, &st) == 0;
		(void)fsp_mkdir(rootfd, wpath, 1, FSP_OWNER_KEEP, &err);
		if (!existed)
			(void)fsp_remove(rootfd, first, 1, &err);
	}
	check_decoy_intact();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (rootfd < 0)
		build_tree();
	relink();
	char *s = malloc(size + 1);
	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	struct terr err;
	int ok = fsp_path_check(s, size, 1, &err) == 0;
	if (!ok && err.msg[0] == '\0')
		abort();
	if (ok) {
		/* What the checker lets through has no '..' and is relative. */
		if (s[0] == '/')
			abort();
		for (const char *p = s; (p = strstr(p, "..")) != NULL; p++)
			if ((p == s || p[-1] == '/') && (p[2] == '\0' || p[2] == '/'))
				abort();
		for (int fallback = 0; fallback <= 1; fallback++) {
			fsp_force_fallback = fallback;
			exercise(s);
		}
		fsp_force_fallback = 0;
	}
	free(s);
	return 0;
}
