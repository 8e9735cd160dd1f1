/* common/util.c: removing a directory tree. */
#include <stdio.h>
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

int main(void)
{
	RUN(remove_tree_removes_all_and_follows_no_link);
	return testlib_done();
}
