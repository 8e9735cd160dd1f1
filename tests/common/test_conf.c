/* conf_parse / conf_load / conf_check_keys / conf_write. */
#include "common/conf.h"
#include "testlib.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static int parse(const char *text, struct conf *c, struct terr *err)
{
	return conf_parse(text, strlen(text), c, err);
}

TEST(comments_blanks_and_spacing)
{
	struct conf c;
	struct terr err = {0};
	const char *text =
		"# admin credentials\n"
		"\n"
		"endpoint = http://127.0.0.1:8090\n"
		"   access_key=AK1   \n"
		"\t# indented comment\n"
		"secret_key\t=\t s e c r e t \r\n"
		"empty =\n"
		"with.dots-and_dashes = x # not a comment\n"
		"last = no newline";
	CHECK_INT(parse(text, &c, &err), 0);
	CHECK_INT(c.n, 6);
	CHECK_STR(conf_get(&c, "endpoint"), "http://127.0.0.1:8090");
	CHECK_STR(conf_get(&c, "access_key"), "AK1");
	CHECK_STR(conf_get(&c, "secret_key"), "s e c r e t");
	CHECK_STR(conf_get(&c, "empty"), "");
	CHECK_STR(conf_get(&c, "with.dots-and_dashes"), "x # not a comment");
	CHECK_STR(conf_get(&c, "last"), "no newline");
	CHECK(conf_get(&c, "missing") == NULL);
	CHECK_INT(c.items[0].line, 3);
	CHECK_INT(c.items[2].line, 6);
	conf_free(&c);
	CHECK_INT(c.n, 0);
	CHECK_INT(parse("", &c, &err), 0);
	CHECK_INT(c.n, 0);
	conf_free(&c);
}

TEST(quotes)
{
	struct conf c;
	struct terr err = {0};
	CHECK_INT(parse("a = \"  padded  \"\nb = \"say \\\"hi\\\" \\\\ ok\"\nc = \"\"\n"
			"d = x\"y\"\n", &c, &err), 0);
	CHECK_STR(conf_get(&c, "a"), "  padded  ");
	CHECK_STR(conf_get(&c, "b"), "say \"hi\" \\ ok");
	CHECK_STR(conf_get(&c, "c"), "");
	CHECK_STR(conf_get(&c, "d"), "x\"y\"");  /* quotes only count around a value */
	conf_free(&c);

	CHECK_INT(parse("ok = 1\na = \"open\n", &c, &err), -EINVAL);
	CHECK_STR(err.msg, "line 2: unterminated quoted value");
	CHECK_INT(parse("a = \"x\" y\n", &c, &err), -EINVAL);
	CHECK_STR(err.msg, "line 1: text after the closing quote");
	CHECK_INT(parse("a = \"x\\\"\n", &c, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "unterminated");
}

TEST(duplicates_and_bad_lines)
{
	struct conf c;
	struct terr err = {0};
	CHECK_INT(parse("a = 1\n\nb = 2\na = 3\n", &c, &err), -EINVAL);
	CHECK_STR(err.msg, "line 4: duplicate key 'a' (first set on line 1)");
	CHECK_INT(c.n, 0);
	CHECK_INT(parse("a = 1\njust words\n", &c, &err), -EINVAL);
	CHECK_STR(err.msg, "line 2: expected 'key = value'");
	CHECK_INT(parse("= value\n", &c, &err), -EINVAL);
	CHECK_STR(err.msg, "line 1: expected 'key = value'");
	CHECK_INT(parse("# c\nEndpoint = x\n", &c, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "line 2: invalid key 'Endpoint'");
	CHECK_INT(parse("two words = x\n", &c, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "line 1: invalid key 'two words'");
	CHECK_INT(parse("[section]\n", &c, &err), -EINVAL);
	CHECK_STR(err.msg, "line 1: expected 'key = value'");
	CHECK_INT(conf_parse("a = 1\nb\0 = 2\n", 12, &c, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "line 2: unexpected NUL");
	/* Length-bounded: text after len is not read. */
	CHECK_INT(conf_parse("a = 1\ngarbage", 6, &c, &err), 0);
	CHECK_INT(c.n, 1);
	conf_free(&c);
}

TEST(unknown_keys)
{
	struct conf c;
	struct terr err = {0};
	static const char *const known[] = {"endpoint", "access_key", "secret_key", NULL};
	CHECK_INT(parse("endpoint = x\naccess_key = y\n", &c, &err), 0);
	CHECK_INT(conf_check_keys(&c, known, "/etc/t.conf", &err), 0);
	conf_free(&c);
	CHECK_INT(parse("endpoint = x\n\nendpont = y\n", &c, &err), 0);
	CHECK_INT(conf_check_keys(&c, known, "/etc/t.conf", &err), -EINVAL);
	CHECK_STR(err.msg, "/etc/t.conf: line 3: unknown key 'endpont'");
	conf_free(&c);
}

TEST(load_names_the_path)
{
	char dir[] = "/tmp/test_conf.XXXXXX";
	CHECK(mkdtemp(dir) != NULL);
	char path[256];
	snprintf(path, sizeof(path), "%s/a.conf", dir);
	struct conf c;
	struct terr err = {0};
	CHECK_INT(conf_load(path, &c, &err), -ENOENT);
	CHECK_CONTAINS(err.msg, path);
	CHECK_CONTAINS(err.msg, "No such file");
	FILE *f = fopen(path, "w");
	fputs("a = 1\nbroken\n", f);
	fclose(f);
	CHECK_INT(conf_load(path, &c, &err), -EINVAL);
	char want[300];
	snprintf(want, sizeof(want), "%s: line 2: expected 'key = value'", path);
	CHECK_STR(err.msg, want);
	unlink(path);
	rmdir(dir);
}

TEST(write_atomic_and_private)
{
	char dir[] = "/tmp/test_conf.XXXXXX";
	CHECK(mkdtemp(dir) != NULL);
	char path[256];
	snprintf(path, sizeof(path), "%s/client.conf", dir);
	static const char *const keys[] = {"endpoint", "access_key", "secret_key", "odd"};
	static const char *const vals[] = {"http://h:1", "AK", "S K", " \"quoted\" \\ "};
	struct terr err = {0};
	CHECK_INT(conf_write(path, 0600, keys, vals, 4, &err), 0);
	struct stat st;
	CHECK_INT(stat(path, &st), 0);
	CHECK_INT(st.st_mode & 07777, 0600);
	struct conf c;
	CHECK_INT(conf_load(path, &c, &err), 0);
	CHECK_INT(c.n, 4);
	for (int i = 0; i < 4; i++)
		CHECK_STR(conf_get(&c, keys[i]), vals[i]);
	conf_free(&c);

	/* Replacing keeps only the new content and leaves no temp files. */
	CHECK_INT(conf_write(path, 0640, keys, vals, 1, &err), 0);
	CHECK_INT(stat(path, &st), 0);
	CHECK_INT(st.st_mode & 07777, 0640);
	CHECK_INT(conf_load(path, &c, &err), 0);
	CHECK_INT(c.n, 1);
	conf_free(&c);
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "test $(ls -A %s | wc -l) = 1", dir);
	CHECK_INT(system(cmd), 0);

	static const char *const bad_keys[] = {"Bad Key"};
	static const char *const nl_vals[] = {"two\nlines"};
	CHECK_INT(conf_write(path, 0600, bad_keys, vals, 1, &err), -EINVAL);
	CHECK_INT(conf_write(path, 0600, keys, nl_vals, 1, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "one line");

	char nodir[300];
	snprintf(nodir, sizeof(nodir), "%s/missing/x.conf", dir);
	CHECK_INT(conf_write(nodir, 0600, keys, vals, 1, &err), -ENOENT);
	CHECK_CONTAINS(err.msg, nodir);

	unlink(path);
	rmdir(dir);
}

/* A write that fails part way (here the file size limit, as a full
 * disk would) leaves the file it was to replace whole and no temp file:
 * admin.conf is never half written. */
TEST(write_cut_short_leaves_the_old_file)
{
	char dir[] = "/tmp/test_conf.XXXXXX";
	CHECK(mkdtemp(dir) != NULL);
	char path[256];
	snprintf(path, sizeof(path), "%s/admin.conf", dir);
	static const char *const keys[] = {"endpoint", "access_key", "secret_key", "email", "password"};
	static const char *const old[] = {"http://h:1", "AK1", "S1", "admin@tessera.local", "first password"};
	struct terr err = {0};
	CHECK_INT(conf_write(path, 0600, keys, old, 5, &err), 0);
	char big[4096];
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	const char *next[] = {"http://h:2", "AK2", big, "admin@tessera.local", "second password"};
	pid_t pid = fork();
	if (pid == 0) {
		signal(SIGXFSZ, SIG_IGN);
		struct rlimit lim = {64, 64};
		setrlimit(RLIMIT_FSIZE, &lim);
		struct terr e = {0};
		_exit(conf_write(path, 0600, keys, next, 5, &e) == -EFBIG ? 0 : 1);
	}
	int st = 0;
	CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);   /* the write failed, with EFBIG */
	struct conf c;
	CHECK_INT(conf_load(path, &c, &err), 0);
	CHECK_INT(c.n, 5);
	for (int i = 0; i < 5; i++)
		CHECK_STR(conf_get(&c, keys[i]), old[i]);
	conf_free(&c);
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "test \"$(ls -A %s)\" = admin.conf", dir);
	CHECK_INT(system(cmd), 0);
	unlink(path);
	rmdir(dir);
}

int main(void)
{
	RUN(comments_blanks_and_spacing);
	RUN(quotes);
	RUN(duplicates_and_bad_lines);
	RUN(unknown_keys);
	RUN(load_names_the_path);
	RUN(write_atomic_and_private);
	RUN(write_cut_short_leaves_the_old_file);
	return testlib_done();
}
