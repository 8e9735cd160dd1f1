/* common/util.c: removing a directory tree; how a shell reaches the
 * running executable; deadlines of timed waits. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "testlib.h"

TEST(remove_tree_removes_all_and_follows_no_link)
{
	char base[] = "/tmp/tessera-util-test-XXXXXX";
	CHECK(mkdtemp(base) != NULL);
	char tree[128], deep[160], file[192], keep[128], kept[160], link[192];
	snprintf(tree, sizeof(tree), "%s/tree", base);
	snprintf(deep, sizeof(deep), "%s/a/b", tree);
	snprintf(file, sizeof(file), "%s/f", deep);
	snprintf(keep, sizeof(keep), "%s/keep", base);
	snprintf(kept, sizeof(kept), "%s/k", keep);
	snprintf(link, sizeof(link), "%s/to-keep", tree);
	struct terr err;
	CHECK_INT(util_mkdir_p(deep, 0755, &err), 0);
	CHECK_INT(util_mkdir_p(keep, 0755, &err), 0);
	FILE *f = fopen(file, "w");
	CHECK(f != NULL);
	if (f)
		fclose(f);
	f = fopen(kept, "w");
	CHECK(f != NULL);
	if (f)
		fclose(f);
	CHECK_INT(symlink(keep, link), 0);
	util_remove_tree(tree);
	struct stat st;
	CHECK(stat(tree, &st) != 0);
	CHECK(stat(kept, &st) == 0);   /* the link went, not what it names */
	util_remove_tree(base);
	CHECK(stat(base, &st) != 0);
	util_remove_tree(base);        /* gone already: nothing happens */
}

TEST(self_command_is_the_name_only_when_path_finds_this_binary)
{
	char self[PATH_MAX], base[] = "/tmp/tessera-util-test-XXXXXX";
	CHECK(realpath("/proc/self/exe", self) != NULL);
	CHECK(mkdtemp(base) != NULL);
	char other[96], mine[96], path[256], out[PATH_MAX];
	snprintf(other, sizeof(other), "%s/other", base);
	snprintf(mine, sizeof(mine), "%s/mine", base);
	CHECK_INT(util_mkdir_p(other, 0755, NULL), 0);
	CHECK_INT(util_mkdir_p(mine, 0755, NULL), 0);
	char link[128], impostor[128];
	snprintf(link, sizeof(link), "%s/tessera-x", mine);
	snprintf(impostor, sizeof(impostor), "%s/tessera-x", other);
	CHECK_INT(symlink(self, link), 0);     /* as an install's symlink would */
	FILE *f = fopen(impostor, "w");
	CHECK(f != NULL);
	if (f)
		fclose(f);
	char *saved = getenv("PATH") ? strdup(getenv("PATH")) : NULL;
	struct terr err;

	/* Not on PATH at all: the absolute path. */
	setenv("PATH", "/nonexistent:/usr/bin", 1);
	CHECK_INT(util_self_command("tessera-x", out, sizeof(out), &err), 0);
	CHECK_STR(out, self);
	/* Found through PATH (a symlink to it): the bare name. */
	snprintf(path, sizeof(path), "/nonexistent:%s:/usr/bin", mine);
	setenv("PATH", path, 1);
	CHECK_INT(util_self_command("tessera-x", out, sizeof(out), &err), 0);
	CHECK_STR(out, "tessera-x");
	/* A file of that name that is not executable is skipped, as the
	 * shell skips it. */
	snprintf(path, sizeof(path), "%s:%s", other, mine);
	setenv("PATH", path, 1);
	CHECK_INT(util_self_command("tessera-x", out, sizeof(out), &err), 0);
	CHECK_STR(out, "tessera-x");
	/* Another program of that name comes first: the absolute path. */
	chmod(impostor, 0755);
	CHECK_INT(util_self_command("tessera-x", out, sizeof(out), &err), 0);
	CHECK_STR(out, self);

	if (saved) {
		setenv("PATH", saved, 1);
		free(saved);
	}
	util_remove_tree(base);
}

/* A deadline is on the monotonic clock, and a condition variable made by
 * util_cond_init_mono waits until it: not before, and not much after. */
TEST(deadline_is_monotonic_and_cond_waits_for_it)
{
	struct timespec now, dl;
	clock_gettime(CLOCK_MONOTONIC, &now);
	util_deadline_ms(&dl, 1999);
	int64_t ahead = ((int64_t)dl.tv_sec - now.tv_sec) * 1000 + (dl.tv_nsec - now.tv_nsec) / 1000000;
	CHECK(ahead >= 1998 && ahead <= 2100);
	CHECK(dl.tv_nsec >= 0 && dl.tv_nsec < 1000000000L);
	pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	pthread_cond_t cv;
	util_cond_init_mono(&cv);
	int64_t t0 = util_mono_ms();
	util_deadline_ms(&dl, 50);
	pthread_mutex_lock(&mu);
	int rc;
	while ((rc = pthread_cond_timedwait(&cv, &mu, &dl)) == 0)
		;
	pthread_mutex_unlock(&mu);
	int64_t took = util_mono_ms() - t0;
	CHECK_INT(rc, ETIMEDOUT);
	CHECK(took >= 49 && took < 5000);
	pthread_cond_destroy(&cv);
}

int main(void)
{
	RUN(remove_tree_removes_all_and_follows_no_link);
	RUN(self_command_is_the_name_only_when_path_finds_this_binary);
	RUN(deadline_is_monotonic_and_cond_waits_for_it);
	return testlib_done();
}
