/* common/model.c: state names, resource text, state predicates, names. */
#include "common/model.h"
#include "testlib.h"

#include <errno.h>

TEST(status_names_round_trip)
{
	static const char *const names[] = {"PENDING", "SCHEDULED", "PREPARING", "RUNNING", "LOST",
					    "TERMINATING", "PREEMPTED", "TERMINATED", "CANCELLED", "ERROR"};
	CHECK_INT(SS__COUNT, 10);
	for (int i = 0; i < SS__COUNT; i++) {
		CHECK_STR(session_status_name((enum session_status)i), names[i]);
		CHECK_INT(session_status_parse(names[i]), i);
		CHECK_INT(session_status_parse(session_status_name((enum session_status)i)), i);
	}
	CHECK_INT(session_status_parse("running"), -1);
	CHECK_INT(session_status_parse(""), -1);
	CHECK_INT(session_status_parse("UNKNOWN"), -1);
	CHECK_INT(session_status_parse("RUNNING "), -1);
	CHECK_STR(session_status_name(SS__COUNT), "UNKNOWN");
	CHECK_STR(session_status_name((enum session_status)-1), "UNKNOWN");
}

static void describes(int64_t cpu_m, int64_t mem, int64_t fgpu_m, const char *want, int line)
{
	struct res r = {cpu_m, mem, fgpu_m};
	char buf[128];
	res_describe(&r, buf, sizeof(buf));
	testlib_checks++;
	if (strcmp(buf, want) != 0)
		FAILF("line %d: res_describe gave \"%s\", expected \"%s\"", line, buf, want);
}
#define DESCRIBES(c, m, f, w) describes((c), (m), (f), (w), __LINE__)

TEST(describe)
{
	DESCRIBES(1000, 256LL << 20, 0, "1 CPU, 256 MiB");
	DESCRIBES(500, 1LL << 30, 0, "0.5 CPU, 1 GiB");
	DESCRIBES(125, 3LL << 29, 500, "0.125 CPU, 1.5 GiB, 0.5 fGPU");
	DESCRIBES(2000, 16LL << 40, 2000, "2 CPU, 16 TiB, 2 fGPU");
	DESCRIBES(0, 0, 0, "0 CPU, 0 B");
	DESCRIBES(10, 6LL << 20, 1, "0.01 CPU, 6 MiB, 0.001 fGPU");
	/* truncation is safe */
	struct res r = {1000, 256LL << 20, 500};
	char small[8];
	res_describe(&r, small, sizeof(small));
	CHECK_STR(small, "1 CPU, ");
}

TEST(predicates)
{
	/* state, holds, final, listed */
	static const struct { enum session_status s; bool holds, final, listed; } t[] = {
		{SS_PENDING, false, false, true},
		{SS_SCHEDULED, true, false, true},
		{SS_PREPARING, true, false, true},
		{SS_RUNNING, true, false, true},
		{SS_LOST, true, false, true},
		{SS_TERMINATING, true, false, true},
		{SS_PREEMPTED, true, false, true},
		{SS_TERMINATED, false, true, false},
		{SS_CANCELLED, false, true, false},
		{SS_ERROR, false, true, true},
	};
	CHECK_INT(sizeof(t) / sizeof(t[0]), SS__COUNT);
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		testlib_checks++;
		if (session_status_holds(t[i].s) != t[i].holds ||
		    session_status_final(t[i].s) != t[i].final ||
		    session_status_listed(t[i].s) != t[i].listed)
			FAILF("%s: holds %d final %d listed %d, expected %d %d %d",
			      session_status_name(t[i].s), session_status_holds(t[i].s),
			      session_status_final(t[i].s), session_status_listed(t[i].s),
			      t[i].holds, t[i].final, t[i].listed);
		/* nothing both holds resources and is final */
		CHECK(!(session_status_holds(t[i].s) && session_status_final(t[i].s)));
	}
}

TEST(res_arith)
{
	struct res a = {1000, 100, 400}, b = {400, 50, 400};
	CHECK(res_fits(&b, &a));
	CHECK(!res_fits(&a, &b));
	CHECK(res_fits(&a, &a));
	res_sub(&a, &b);
	CHECK_INT(a.cpu_m, 600);
	CHECK_INT(a.mem, 50);
	CHECK_INT(a.fgpu_m, 0);
	res_add(&a, &b);
	CHECK_INT(a.cpu_m, 1000);
	CHECK_INT(a.fgpu_m, 400);
	struct res g = {0, 0, 1};
	struct res z = {1000, 1000, 0};
	CHECK(!res_fits(&g, &z));
}

/* Expects model_validate_name to refuse; the message names `what`. */
static void name_refused(const char *name, int line)
{
	struct terr err = {0};
	int rc = model_validate_name(name, "name", &err);
	testlib_checks++;
	if (rc != -EINVAL || err.code != EINVAL || !strstr(err.msg, "name"))
		FAILF("line %d: name '%s' gave %d '%s', expected -EINVAL naming the field",
		      line, name, rc, err.msg);
}
#define NAME_BAD(n) name_refused((n), __LINE__)
#define NAME_OK(n) CHECK_INT(model_validate_name((n), "name", NULL), 0)

TEST(names)
{
	char s[80];
	NAME_OK("a");
	NAME_OK("A");
	NAME_OK("0");
	NAME_OK("job-1");
	NAME_OK("My.Session_2-x");
	memset(s, 'a', 63);
	s[63] = '\0';
	NAME_OK(s);
	s[63] = 'a';
	s[64] = '\0';
	NAME_BAD(s);             /* 64 chars */
	NAME_BAD("");
	NAME_BAD("-a");
	NAME_BAD("_a");
	NAME_BAD(".a");
	NAME_BAD("a b");
	NAME_BAD("a/b");
	NAME_BAD("a:b");
	NAME_BAD("a@b");
	NAME_BAD("a\tb");
	NAME_BAD("\xc3\xa9t\xc3\xa9");  /* "été": non-ASCII first byte */
	NAME_BAD("caf\xc3\xa9");         /* non-ASCII later */
	NAME_BAD("a\xff");

	struct terr err = {0};
	CHECK(model_validate_name("", "session name", &err) < 0);
	CHECK_CONTAINS(err.msg, "session name");
	CHECK_CONTAINS(err.msg, "1 to 63");
	CHECK(model_validate_name("-x", "name", &err) < 0);
	CHECK_CONTAINS(err.msg, "start with a letter or digit");
	CHECK(model_validate_name("x y", "name", &err) < 0);
	CHECK_CONTAINS(err.msg, "may contain only");
}

TEST(folder_names)
{
	struct terr err = {0};
	CHECK_INT(model_validate_folder_name(".local", &err), 0);
	CHECK_INT(model_validate_folder_name("data-1_x.y", &err), 0);
	CHECK_INT(model_validate_folder_name("...", &err), 0);
	CHECK_INT(model_validate_folder_name("..", &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "'..'");
	CHECK_INT(model_validate_folder_name(".", &err), -EINVAL);
	CHECK_INT(model_validate_folder_name("", &err), -EINVAL);
	CHECK_INT(model_validate_folder_name("a/b", &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "may contain only");
	CHECK_INT(model_validate_folder_name("../x", &err), -EINVAL);
	CHECK_INT(model_validate_folder_name("a b", &err), -EINVAL);
	CHECK_INT(model_validate_folder_name("caf\xc3\xa9", &err), -EINVAL);
	char longest[64], too_long[65];
	memset(longest, 'a', 63);
	longest[63] = '\0';
	memset(too_long, 'a', 64);
	too_long[64] = '\0';
	CHECK_INT(model_validate_folder_name(longest, &err), 0);
	CHECK_INT(model_validate_folder_name(too_long, &err), -EINVAL);
}

TEST(storage_hosts)
{
	struct model_storage_host h[4];
	size_t n = 0;
	struct terr err = {0};
	CHECK_INT(model_storage_hosts_parse("local:/var/lib/tessera/folders", h, 4, &n, &err), 0);
	CHECK_INT((int)n, 1);
	CHECK_STR(h[0].name, "local");
	CHECK_STR(h[0].path, "/var/lib/tessera/folders");
	CHECK_INT(model_storage_hosts_parse("a:/x/,nfs:/mnt/nfs/folders", h, 4, &n, &err), 0);
	CHECK_INT((int)n, 2);
	CHECK_STR(h[0].path, "/x");
	CHECK_STR(h[1].name, "nfs");
	CHECK_STR(h[1].path, "/mnt/nfs/folders");
	CHECK_INT(model_storage_hosts_parse("", h, 4, &n, &err), -EINVAL);
	CHECK_INT(model_storage_hosts_parse("local", h, 4, &n, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "NAME:PATH");
	CHECK_INT(model_storage_hosts_parse("local:relative/dir", h, 4, &n, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "absolute");
	CHECK_INT(model_storage_hosts_parse("local:/", h, 4, &n, &err), -EINVAL);
	CHECK_INT(model_storage_hosts_parse("local:/a/../etc", h, 4, &n, &err), -EINVAL);
	CHECK_INT(model_storage_hosts_parse("local:/a/..", h, 4, &n, &err), -EINVAL);
	CHECK_INT(model_storage_hosts_parse("-bad:/a", h, 4, &n, &err), -EINVAL);
	CHECK_INT(model_storage_hosts_parse("a/b:/a", h, 4, &n, &err), -EINVAL);
	CHECK_INT(model_storage_hosts_parse("a:/x,a:/y", h, 4, &n, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "twice");
	CHECK_INT(model_storage_hosts_parse("a:/x,", h, 4, &n, &err), -EINVAL);
	CHECK_INT(model_storage_hosts_parse("a:/1,b:/2,c:/3", h, 2, &n, &err), -EINVAL);
}

TEST(mount_specs)
{
	struct model_mount mm;
	struct terr err = {0};
	CHECK_INT(model_parse_mount_spec("data", &mm, &err), 0);
	CHECK_STR(mm.name, "data");
	CHECK_STR(mm.target, "");
	CHECK(!mm.ro);
	CHECK_INT(model_parse_mount_spec("data:ro", &mm, &err), 0);
	CHECK(mm.ro);
	CHECK_STR(mm.target, "");
	CHECK_INT(model_parse_mount_spec(".local:/opt/x", &mm, &err), 0);
	CHECK_STR(mm.name, ".local");
	CHECK_STR(mm.target, "/opt/x");
	CHECK(!mm.ro);
	CHECK_INT(model_parse_mount_spec("d:/data/in:ro", &mm, &err), 0);
	CHECK_STR(mm.target, "/data/in");
	CHECK(mm.ro);
	CHECK_INT(model_parse_mount_spec("d:/data/in:rw", &mm, &err), 0);
	CHECK(!mm.ro);
	CHECK_INT(model_parse_mount_spec("d:/data/in:rx", &mm, &err), -EINVAL);
	CHECK_INT(model_parse_mount_spec("../d", &mm, &err), -EINVAL);
	CHECK_INT(model_parse_mount_spec(":/x", &mm, &err), -EINVAL);
	CHECK_INT(model_parse_mount_spec("d:rel", &mm, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "absolute");
	CHECK_INT(model_parse_mount_spec("d:/", &mm, &err), -EINVAL);
	static const char *const refused[] = {"/proc", "/proc/x", "/sys", "/dev/shm", "/etc", "/usr/local", "/bin",
					      "/lib", "/run/tessera", "/opt/tessera/bin", "/home/work", "/home",
					      "/a/../etc", "/a/./b", "/a//b", "/a/", NULL};
	for (int i = 0; refused[i]; i++) {
		testlib_checks++;
		if (model_validate_mount_target(refused[i], &err) == 0)
			FAILF("mount target %s was accepted", refused[i]);
	}
	static const char *const fine[] = {"/home/work/x", "/data", "/opt/x", "/procs", "/libx/y", "/mnt/a.b", NULL};
	for (int i = 0; fine[i]; i++) {
		testlib_checks++;
		if (model_validate_mount_target(fine[i], &err) != 0)
			FAILF("mount target %s was refused: %s", fine[i], err.msg);
	}
	char target[MODEL_MOUNT_TARGET_MAX];
	model_default_mount_target(".local", target, sizeof(target));
	CHECK_STR(target, "/home/work/.local");
}

int main(void)
{
	RUN(status_names_round_trip);
	RUN(describe);
	RUN(predicates);
	RUN(res_arith);
	RUN(names);
	RUN(folder_names);
	RUN(storage_hosts);
	RUN(mount_specs);
	return testlib_done();
}
