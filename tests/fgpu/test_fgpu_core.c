/* The shim's parts as plain code (no preload): the limits parser, the
 * shared region with its robust lock, the UUID's text form, the pacing
 * arithmetic, and GPU turns (file locks between processes). */
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fgpu/pacing.h"
#include "fgpu/turn.h"
#include "gpuabi/conf.h"
#include "gpuabi/region.h"
#include "gpuabi/uuid.h"
#include "testlib.h"

static char dir[] = "/tmp/tessera-fgpu-core-XXXXXX";
static char region_path[256];

TEST(conf_parses_the_agent_format)
{
	struct fgpu_conf c;
	struct terr err;
	CHECK_INT(fgpu_conf_parse("# written by the agent\nversion = 1\nfgpu = 0.5\n"
				  "devices = 2\ndevice.0.uuid = GPU-aaaa\n"
				  "device.0.memory_limit = 4294967296\n"
				  "device.1.uuid = GPU-bbbb\ndevice.1.memory_limit = 2GiB\n"
				  "sm_limit_percent = 50\ncontext_overhead = 256MiB\n"
				  "future_key = whatever\n", &c, &err), 0);
	CHECK(c.enabled);
	CHECK_INT(c.ndev, 2);
	CHECK_STR(c.dev[0].uuid, "GPU-aaaa");
	CHECK_INT(fgpu_conf_limit(&c, 0), 4294967296LL);
	CHECK_INT(fgpu_conf_limit(&c, 1), 2147483648LL);
	CHECK_INT(fgpu_conf_limit(&c, 2), 0);          /* not listed: nothing */
	CHECK_INT(c.sm_limit_percent, 50);
	CHECK_INT(c.context_overhead, 256 * 1024 * 1024);
	CHECK_STR(c.fgpu, "0.5");
	CHECK_STR(c.region, FGPU_REGION_PATH);
	CHECK(!c.driver_clock);

	CHECK_INT(fgpu_conf_parse("memory_limit = 1g\n", &c, &err), 0);
	CHECK_INT(fgpu_conf_limit(&c, 0), 1073741824LL);
	CHECK_INT(fgpu_conf_limit(&c, 7), 1073741824LL);
	CHECK_INT(c.sm_limit_percent, 100);

	CHECK(fgpu_conf_parse("sm_limit_percent = 0\n", &c, &err) < 0);
	CHECK(fgpu_conf_parse("sm_limit_percent = 101\n", &c, &err) < 0);
	CHECK(fgpu_conf_parse("memory_limit = -1\n", &c, &err) < 0);
	CHECK(fgpu_conf_parse("version = 2\n", &c, &err) < 0);
	CHECK(fgpu_conf_parse("just words\n", &c, &err) < 0);
	CHECK(fgpu_conf_parse("device.99.memory_limit = 1\n", &c, &err) < 0);
}

TEST(conf_gives_each_device_its_compute_share)
{
	struct fgpu_conf c;
	struct terr err;
	/* a session with a whole device and half of another */
	CHECK_INT(fgpu_conf_parse("devices = 2\ndevice.0.uuid = GPU-aaaa\n"
				  "device.0.sm_limit_percent = 100\n"
				  "device.1.uuid = GPU-bbbb\ndevice.1.sm_limit_percent = 50\n"
				  "sm_limit_percent = 100\n", &c, &err), 0);
	CHECK_INT(fgpu_conf_sm_limit(&c, 0), 100);
	CHECK_INT(fgpu_conf_sm_limit(&c, 1), 50);
	CHECK_INT(fgpu_conf_sm_limit(&c, -1), 100);
	CHECK(fgpu_conf_sm_limited(&c));
	CHECK_INT(fgpu_conf_index(&c, "GPU-bbbb", 0), 1);
	CHECK_INT(fgpu_conf_index(&c, "GPU-cccc", 1), -1);   /* by UUID, not ordinal */
	/* without a device's own figure the session-wide one applies */
	CHECK_INT(fgpu_conf_parse("devices = 2\ndevice.1.sm_limit_percent = 30\n"
				  "sm_limit_percent = 60\n", &c, &err), 0);
	CHECK_INT(fgpu_conf_sm_limit(&c, 0), 60);
	CHECK_INT(fgpu_conf_sm_limit(&c, 1), 30);
	CHECK_INT(fgpu_conf_index(&c, NULL, 1), 1);          /* no UUIDs: by ordinal */
	CHECK_INT(fgpu_conf_index(&c, NULL, 2), -1);
	CHECK_INT(fgpu_conf_parse("memory_limit = 1g\n", &c, &err), 0);
	CHECK(!fgpu_conf_sm_limited(&c));
	CHECK(fgpu_conf_parse("device.0.sm_limit_percent = 0\n", &c, &err) < 0);
	CHECK(fgpu_conf_parse("device.0.sm_limit_percent = 150\n", &c, &err) < 0);
}

TEST(conf_env_without_file)
{
	/* (FGPU_CONF_PATH does not exist on a build machine.) */
	struct fgpu_conf c;
	struct terr err;
	unsetenv("TESSERA_FGPU_CONF");
	unsetenv("TESSERA_GPU_MEMORY_LIMIT");
	unsetenv("TESSERA_GPU_SM_LIMIT");
	CHECK_INT(fgpu_conf_load(&c, &err), 0);
	CHECK(!c.enabled);
	setenv("TESSERA_GPU_MEMORY_LIMIT", "1536MiB", 1);
	setenv("TESSERA_GPU_SM_LIMIT", "30", 1);
	CHECK_INT(fgpu_conf_load(&c, &err), 0);
	CHECK(c.enabled);
	CHECK_INT(fgpu_conf_limit(&c, 3), 1536LL * 1024 * 1024);
	CHECK_INT(c.sm_limit_percent, 30);
	/* with a file, the variables only tighten */
	char path[300];
	snprintf(path, sizeof(path), "%s/fgpu.conf", dir);
	FILE *f = fopen(path, "w");
	fputs("memory_limit = 1GiB\nsm_limit_percent = 20\n", f);
	fclose(f);
	setenv("TESSERA_FGPU_CONF", path, 1);
	CHECK_INT(fgpu_conf_load(&c, &err), 0);
	CHECK_INT(fgpu_conf_limit(&c, 0), 1024LL * 1024 * 1024);
	CHECK_INT(c.sm_limit_percent, 20);
	unsetenv("TESSERA_FGPU_CONF");
	unsetenv("TESSERA_GPU_MEMORY_LIMIT");
	unsetenv("TESSERA_GPU_SM_LIMIT");
}

TEST(region_reserve_and_release)
{
	struct fgpu_region_handle h;
	struct terr err;
	CHECK_INT(fgpu_region_open(&h, region_path, &err), 0);
	CHECK(h.shared);
	CHECK_INT(fgpu_region_reserve(&h, 0, 600, 1000), 0);
	CHECK_INT(fgpu_region_reserve(&h, 0, 600, 1000), -ENOMEM);
	CHECK_INT(fgpu_region_reserve(&h, 0, 400, 1000), 0);
	CHECK_INT(fgpu_region_used(&h, 0), 1000);
	CHECK_INT(fgpu_region_reserve(&h, 1, 1000, 1000), 0);   /* per device */
	CHECK_INT(fgpu_region_reserve(&h, 0, INT64_MAX, INT64_MAX), -ENOMEM);  /* no overflow */
	CHECK_INT(fgpu_region_used(&h, 0), 1000);
	fgpu_region_release(&h, 0, 1000);
	fgpu_region_release(&h, 1, 1000);
	CHECK_INT(fgpu_region_used(&h, 0), 0);
	CHECK_INT(fgpu_region_reserve(&h, -1, 1, 10), -EINVAL);
	CHECK_INT(fgpu_region_reserve(&h, FGPU_MAX_DEVICES, 1, 10), -EINVAL);
	/* a second mapping (another process would do the same) sees it */
	struct fgpu_region_handle h2;
	CHECK_INT(fgpu_region_open(&h2, region_path, &err), 0);
	CHECK_INT(fgpu_region_reserve(&h, 0, 250, 1000), 0);
	CHECK_INT(fgpu_region_used(&h2, 0), 250);
	fgpu_region_release(&h, 0, 250);
}

TEST(region_rejects_other_layouts)
{
	char path[300];
	snprintf(path, sizeof(path), "%s/other.region", dir);
	int fd = open(path, O_CREAT | O_RDWR, 0600);
	CHECK(fd >= 0);
	CHECK(ftruncate(fd, 4096) == 0);
	close(fd);
	struct fgpu_region_handle h;
	struct terr err;
	CHECK_INT(fgpu_region_open(&h, path, &err), -EPROTO);
	CHECK_CONTAINS(err.msg, "expected");
	CHECK_INT(fgpu_region_open_private(&h, &err), 0);
	CHECK_INT(fgpu_region_reserve(&h, 0, 5, 10), 0);
}

/* In a child: take the lock and die holding it (or with memory held). */
static pid_t child_dies(int hold_lock, int64_t bytes)
{
	int fds[2];
	if (pipe(fds) != 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		struct fgpu_region_handle h;
		struct terr err;
		if (fgpu_region_open(&h, region_path, &err) < 0)
			_exit(1);
		if (bytes && fgpu_region_reserve(&h, 0, bytes, 1 << 30) < 0)
			_exit(1);
		if (hold_lock)
			fgpu_region_lock(&h);
		char c = 'x';
		if (write(fds[1], &c, 1) != 1)
			_exit(1);
		raise(SIGKILL);
		_exit(1);
	}
	char c;
	if (read(fds[0], &c, 1) != 1)
		pid = -1;
	close(fds[0]);
	close(fds[1]);
	int st;
	waitpid(pid, &st, 0);
	return pid;
}

/* Locks in a grandchild with an alarm: reports whether it got the lock
 * in time and what the accounted usage then was. */
static int64_t lock_within_seconds(int secs)
{
	int fds[2];
	if (pipe(fds) != 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		alarm((unsigned)secs);   /* a hang ends in SIGALRM, not a stuck test */
		struct fgpu_region_handle h;
		struct terr err;
		if (fgpu_region_open(&h, region_path, &err) < 0)
			_exit(1);
		fgpu_region_lock(&h);
		int64_t used = h.r->total[0];
		fgpu_region_unlock(&h);
		if (write(fds[1], &used, sizeof(used)) != sizeof(used))
			_exit(1);
		_exit(0);
	}
	int64_t used = -1;
	if (read(fds[0], &used, sizeof(used)) != sizeof(used))
		used = -1;
	close(fds[0]);
	close(fds[1]);
	waitpid(pid, NULL, 0);
	return used;
}

TEST(killed_lock_holder_hangs_nobody)
{
	struct fgpu_region_handle h;
	struct terr err;
	CHECK_INT(fgpu_region_open(&h, region_path, &err), 0);
	uint64_t before = h.r->recoveries;
	CHECK(child_dies(1, 4096) > 0);
	/* The child died holding the lock, with 4096 bytes accounted. The
	 * next locker recovers (EOWNERDEAD) and drops the dead slot. */
	CHECK_INT(lock_within_seconds(20), 0);
	CHECK(h.r->recoveries == before + 1);
	/* and the lock works normally afterwards */
	CHECK_INT(fgpu_region_reserve(&h, 0, 10, 100), 0);
	fgpu_region_release(&h, 0, 10);
}

TEST(dead_process_slot_is_reclaimed)
{
	struct fgpu_region_handle h;
	struct terr err;
	CHECK_INT(fgpu_region_open(&h, region_path, &err), 0);
	CHECK(child_dies(0, 900) > 0);
	CHECK_INT(h.r->total[0], 900);   /* not yet noticed */
	/* a reservation that would not fit reclaims first */
	CHECK_INT(fgpu_region_reserve(&h, 0, 500, 1000), 0);
	CHECK_INT(fgpu_region_used(&h, 0), 500);
	int used_slots = 0;
	for (int i = 0; i < FGPU_REGION_SLOTS; i++)
		used_slots += h.r->slots[i].pid != 0;
	CHECK_INT(used_slots, 1);
	fgpu_region_release(&h, 0, 500);
	fgpu_region_detach(&h);
	CHECK_INT(fgpu_region_used(&h, 0), 0);
}

/* What the agent finds the driver holding beyond the shim's accounting
 * counts in the share, goes with the process, and an observer (the agent,
 * from another PID namespace) never drops slots it cannot judge. */
TEST(untracked_memory_counts_in_the_share)
{
	struct fgpu_region_handle h, obs;
	struct terr err;
	CHECK_INT(fgpu_region_open(&h, region_path, &err), 0);
	CHECK_INT(fgpu_region_reserve(&h, 0, 300, 1000), 0);
	CHECK_INT(fgpu_region_observe_fd(&obs, open(region_path, O_RDWR | O_CLOEXEC), region_path,
					 &err), 0);
	struct fgpu_region_proc procs[4];
	CHECK_INT(fgpu_region_processes(&obs, procs, 4), 1);
	CHECK_INT(procs[0].pid, getpid());
	CHECK_INT(procs[0].used[0], 300);
	CHECK_INT(fgpu_region_set_untracked(&obs, getpid(), procs[0].start, 0, 600), 0);
	CHECK_INT(fgpu_region_used(&h, 0), 900);
	CHECK_INT(fgpu_region_reserve(&h, 0, 200, 1000), -ENOMEM);
	CHECK_INT(fgpu_region_reserve(&h, 0, 100, 1000), 0);
	/* a free returns what the shim took, never the untracked part */
	fgpu_region_release(&h, 0, 5000);
	CHECK_INT(fgpu_region_used(&h, 0), 600);
	/* a new figure replaces the old one */
	CHECK_INT(fgpu_region_set_untracked(&obs, getpid(), 0, 0, 50), 0);
	CHECK_INT(fgpu_region_used(&h, 0), 50);
	CHECK_INT(fgpu_region_set_untracked(&obs, getpid(), procs[0].start + 1, 0, 70), -ESRCH);
	CHECK_INT(fgpu_region_set_untracked(&obs, getpid() + 100000, 0, 0, 70), -ESRCH);
	CHECK_INT(fgpu_region_set_untracked(&obs, getpid(), 0, FGPU_MAX_DEVICES, 70), -EINVAL);
	CHECK_INT(fgpu_region_set_untracked(&obs, getpid(), 0, 0, -1), -EINVAL);
	/* a dead process's untracked memory goes with its slot... */
	pid_t dead = child_dies(0, 10);
	CHECK(dead > 0);
	CHECK_INT(fgpu_region_set_untracked(&obs, dead, 0, 0, 400), 0);
	CHECK_INT(obs.r->total[0], 460);
	/* ...but not when the observer locks: it cannot tell the dead */
	CHECK_INT(fgpu_region_processes(&obs, procs, 4), 2);
	CHECK_INT(fgpu_region_used(&obs, 0), 460);
	CHECK_INT(fgpu_region_used(&h, 0), 50);
	fgpu_region_detach(&h);
	CHECK_INT(fgpu_region_used(&h, 0), 0);
}

TEST(pacing_arithmetic)
{
	struct fgpu_bucket b = {0, 0};
	fgpu_pace_refill(&b, 1000, 50);             /* first use: no credit */
	CHECK_INT(b.tokens, 0);
	CHECK_INT(fgpu_pace_delay(&b, 50), 0);
	fgpu_pace_charge(&b, 10 * 1000 * 1000);     /* a 10 ms kernel */
	CHECK_INT(fgpu_pace_delay(&b, 50), 20 * 1000 * 1000);   /* 20 ms at 50% */
	fgpu_pace_refill(&b, 1000 + 20 * 1000 * 1000, 50);
	CHECK_INT(b.tokens, 0);
	CHECK_INT(fgpu_pace_delay(&b, 50), 0);
	/* idle credit is capped */
	fgpu_pace_refill(&b, 1000ULL + 10ULL * 1000 * 1000 * 1000, 50);
	CHECK_INT(b.tokens, FGPU_PACE_BURST_NS);
	/* debt is bounded */
	fgpu_pace_charge(&b, INT64_MAX / 2);
	CHECK_INT(b.tokens, -100 * FGPU_PACE_BURST_NS);
	/* a clock going back restarts without credit */
	fgpu_pace_refill(&b, 5, 50);
	CHECK_INT(b.last, 5);
}

TEST(pacing_converges_to_the_share)
{
	/* A simulated busy launcher: kernels of 3 ms, launch whenever the
	 * bucket allows; share of time spent in kernels must be ~s. */
	int shares[] = { 10, 25, 50, 75 };
	for (int k = 0; k < 4; k++) {
		int s = shares[k];
		struct fgpu_bucket b = {0, 0};
		uint64_t now = 1, busy = 0;
		fgpu_pace_refill(&b, now, s);
		while (now < 20ULL * 1000 * 1000 * 1000) {
			fgpu_pace_refill(&b, now, s);
			uint64_t d = fgpu_pace_delay(&b, s);
			if (d) {
				now += d;
				continue;
			}
			now += 3 * 1000 * 1000;
			busy += 3 * 1000 * 1000;
			fgpu_pace_refill(&b, now, s);
			fgpu_pace_charge(&b, 3 * 1000 * 1000);
		}
		int permille = (int)(busy * 1000 / now);
		CHECK(permille >= s * 10 - 20 && permille <= s * 10 + 20);
	}
}

/* ---- GPU turns ---- */

TEST(conf_reads_the_turn_settings)
{
	struct fgpu_conf c;
	struct terr err;
	CHECK_INT(fgpu_conf_parse("sm_limit_percent = 50\n", &c, &err), 0);
	CHECK_STR(c.turn_dir, FGPU_TURN_DIR);
	CHECK_INT(c.turn_quantum_ns, 0);
	CHECK_INT(fgpu_conf_parse("turn_dir = /somewhere/else\nturn_quantum_us = 2000\n", &c, &err), 0);
	CHECK_STR(c.turn_dir, "/somewhere/else");
	CHECK_INT(c.turn_quantum_ns, 2000000);
	CHECK(fgpu_conf_parse("turn_quantum_us = 5\n", &c, &err) < 0);
	CHECK_CONTAINS(err.msg, "turn_quantum_us must be 100..1000000");
	CHECK(fgpu_conf_parse("turn_quantum_us = soon\n", &c, &err) < 0);
}

static char turn_dir[300];
#define TURN_GPU "GPU-00000000-0000-0000-0000-000000000001"

static struct fgpu_turn turn_opened(void)
{
	struct fgpu_turn t = FGPU_TURN_INIT;
	fgpu_turn_open(&t, turn_dir, TURN_GPU);
	return t;
}

/* Waits (bounded) until cond holds; the bound is a safety net for a
 * broken implementation, not a timing assertion. */
#define EVENTUALLY(cond) do { \
	for (int i_ = 0; i_ < 5000 && !(cond); i_++) \
		usleep(1000); \
} while (0)

TEST(turn_needs_its_file)
{
	struct fgpu_turn t = FGPU_TURN_INIT;
	CHECK(!fgpu_turn_open(&t, turn_dir, "GPU-not-on-this-node"));
	CHECK(!fgpu_turn_take(&t, 0));
	CHECK(!fgpu_turn_open(&t, turn_dir, "../" TURN_GPU));
	struct fgpu_turn u = FGPU_TURN_INIT;
	CHECK(!fgpu_turn_open(&u, turn_dir, "../x"));
	struct fgpu_turn v = FGPU_TURN_INIT;
	CHECK(!fgpu_turn_open(&v, NULL, TURN_GPU));
	/* Without its waiters' file a holder could never learn that others
	 * wait: no turns then. */
	struct fgpu_turn w = FGPU_TURN_INIT;
	CHECK(!fgpu_turn_open(&w, turn_dir, "GPU-without-its-wait-file"));
	CHECK(w.fd < 0 && w.wait_fd < 0);
}

TEST(turn_is_held_by_one_at_a_time)
{
	/* Two open file descriptions conflict like two processes. */
	struct fgpu_turn a = turn_opened(), b = turn_opened();
	CHECK(a.fd >= 0 && b.fd >= 0);
	CHECK(fgpu_turn_take(&a, 0));
	CHECK(a.held);
	CHECK(!fgpu_turn_take(&b, 1000000));
	CHECK(!b.held);
	/* The wait ran out: launches go ahead without waiting for a while. */
	CHECK(b.impatient_until > fgpu_turn_now());
	fgpu_turn_give(&a);
	CHECK(!a.held);
	CHECK(fgpu_turn_take(&b, 0));
	CHECK(!fgpu_turn_take(&a, 0));
	fgpu_turn_give(&b);
	fgpu_turn_forget(&a);
	fgpu_turn_forget(&b);
}

/* A child that waits for the turn up to 10 s and exits 0 once it has it,
 * after writing a byte to fd. */
static pid_t turn_waiter(int fd)
{
	pid_t pid = fork();
	if (pid == 0) {
		struct fgpu_turn t = turn_opened();
		bool got = fgpu_turn_take(&t, 10ULL * 1000 * 1000 * 1000);
		if (got && write(fd, "x", 1) != 1)
			_exit(3);
		usleep(20000);
		_exit(got ? 0 : 1);
	}
	return pid;
}

TEST(turn_holder_sees_a_waiter_and_is_due_after_a_quantum)
{
	struct fgpu_turn a = turn_opened();
	CHECK(fgpu_turn_take(&a, 0));
	CHECK(!fgpu_turn_others_wait(&a));
	a.since -= FGPU_TURN_QUANTUM_NS;
	a.checked = 0;
	CHECK(!fgpu_turn_due(&a));            /* nobody waits */
	int fds[2];
	CHECK(pipe(fds) == 0);
	pid_t w = turn_waiter(fds[1]);
	EVENTUALLY(fgpu_turn_others_wait(&a));
	CHECK(fgpu_turn_others_wait(&a));
	a.checked = 0;
	CHECK(fgpu_turn_due(&a));
	/* Not yet a quantum: not due, waiter or not. */
	struct fgpu_turn fresh = a;
	fresh.since = fgpu_turn_now();
	fresh.checked = 0;
	CHECK(!fgpu_turn_due(&fresh));
	fgpu_turn_give(&a);
	int st = -1;
	waitpid(w, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK(!fgpu_turn_others_wait(&a));   /* its mark went with it */
	close(fds[0]);
	close(fds[1]);
	fgpu_turn_forget(&a);
}

TEST(turn_of_a_killed_holder_is_free)
{
	int fds[2];
	CHECK(pipe(fds) == 0);
	pid_t pid = fork();
	if (pid == 0) {
		struct fgpu_turn t = turn_opened();
		if (!fgpu_turn_take(&t, 0) || write(fds[1], "x", 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	char c;
	CHECK(read(fds[0], &c, 1) == 1);
	struct fgpu_turn a = turn_opened();
	CHECK(!fgpu_turn_take(&a, 0));
	a.impatient_until = 0;
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	CHECK(fgpu_turn_take(&a, 0));
	fgpu_turn_give(&a);
	close(fds[0]);
	close(fds[1]);
	fgpu_turn_forget(&a);
}

TEST(turn_given_up_goes_to_the_waiter_first)
{
	struct fgpu_turn a = turn_opened();
	CHECK(fgpu_turn_take(&a, 0));
	int fds[2];
	CHECK(pipe(fds) == 0);
	pid_t w = turn_waiter(fds[1]);
	EVENTUALLY(fgpu_turn_others_wait(&a));
	fgpu_turn_give(&a);
	/* Having given it up, a takes it back only after the waiter has had
	 * it, although a asks first. */
	CHECK(fgpu_turn_take(&a, 10ULL * 1000 * 1000 * 1000));
	CHECK(fcntl(fds[0], F_SETFL, O_NONBLOCK) == 0);
	char c;
	CHECK(read(fds[0], &c, 1) == 1);
	int st = -1;
	waitpid(w, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	fgpu_turn_give(&a);
	close(fds[0]);
	close(fds[1]);
	fgpu_turn_forget(&a);
}

TEST(turn_forgotten_in_a_fork_child_stays_the_parents)
{
	struct fgpu_turn a = turn_opened();
	CHECK(fgpu_turn_take(&a, 0));
	pid_t pid = fork();
	if (pid == 0) {
		fgpu_turn_forget(&a);
		struct fgpu_turn t = turn_opened();
		_exit(fgpu_turn_take(&t, 0) ? 1 : 0);
	}
	int st = -1;
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	struct fgpu_turn b = turn_opened();
	CHECK(!fgpu_turn_take(&b, 0));   /* still the parent's */
	fgpu_turn_give(&a);
	b.impatient_until = 0;
	CHECK(fgpu_turn_take(&b, 0));
	fgpu_turn_forget(&a);
	fgpu_turn_forget(&b);
}

TEST(uuid_text_form_is_nvidias)
{
	const unsigned char b[16] = {0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77,
				     0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff};
	char s[GPUABI_UUID_STR_SIZE], small[8];
	gpuabi_uuid_format(b, s, sizeof(s));
	CHECK_STR(s, "GPU-00112233-4455-6677-8899-aabbccddeeff");
	CHECK_INT(strlen(s) + 1, GPUABI_UUID_STR_SIZE);
	gpuabi_uuid_format(b, small, sizeof(small));
	CHECK_STR(small, "GPU-001");
}

int main(void)
{
	if (!mkdtemp(dir))
		return 2;
	snprintf(region_path, sizeof(region_path), "%s/fgpu.region", dir);
	RUN(conf_parses_the_agent_format);
	RUN(conf_gives_each_device_its_compute_share);
	RUN(conf_env_without_file);
	RUN(region_reserve_and_release);
	RUN(region_rejects_other_layouts);
	RUN(killed_lock_holder_hangs_nobody);
	RUN(dead_process_slot_is_reclaimed);
	RUN(untracked_memory_counts_in_the_share);
	RUN(uuid_text_form_is_nvidias);
	RUN(pacing_arithmetic);
	RUN(pacing_converges_to_the_share);
	snprintf(turn_dir, sizeof(turn_dir), "%s/turns", dir);
	if (mkdir(turn_dir, 0755) != 0)
		return 2;
	static const char *const turn_files[] = { TURN_GPU, TURN_GPU FGPU_TURN_WAIT_SUFFIX,
						  "GPU-without-its-wait-file" };
	for (int i = 0; i < 3; i++) {
		char turn_file[400];
		snprintf(turn_file, sizeof(turn_file), "%s/%s", turn_dir, turn_files[i]);
		int tf = open(turn_file, O_CREAT | O_WRONLY, 0444);
		if (tf < 0)
			return 2;
		close(tf);
	}
	RUN(conf_reads_the_turn_settings);
	RUN(turn_needs_its_file);
	RUN(turn_is_held_by_one_at_a_time);
	RUN(turn_holder_sees_a_waiter_and_is_due_after_a_quantum);
	RUN(turn_of_a_killed_holder_is_free);
	RUN(turn_given_up_goes_to_the_waiter_first);
	RUN(turn_forgotten_in_a_fork_child_stays_the_parents);
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		return 2;
	return testlib_done();
}
