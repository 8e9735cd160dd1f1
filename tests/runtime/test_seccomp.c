/* The sessions' seccomp profile (runtime/docker_seccomp.h), read the way
 * Docker and runc read it: a rule applies when the host's architecture,
 * kernel and the container's capabilities pass its includes and
 * excludes; its conditions are ANDed unless two are on the same argument,
 * which runc then adds as separate rules (ORed); an ALLOW rule that
 * matches allows, else an ERRNO one gives its errno, else the default
 * action (EPERM). The end-to-end check against the real dockerd is
 * tests/e2e/test_folder_quota.sh. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <linux/btrfs.h>

#include "runtime/docker_seccomp.h"
#include "testlib.h"

/* What a session holds: Docker's default set less what runtime/docker.c
 * drops. */
static const char *const session_caps[] = {
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL",
	"CAP_SETGID", "CAP_SETUID", "CAP_NET_BIND_SERVICE", NULL,
};
static const char *const admin_caps[] = { "CAP_SYS_ADMIN", NULL };

struct host {
	const char *goarch;           /* "amd64", "arm64" */
	int kmajor, kminor;
	const char *const *caps;
};
static const struct host amd64 = { "amd64", 6, 1, session_caps };
static const struct host arm64 = { "arm64", 6, 1, session_caps };

static json_t *profile;

static bool str_in(json_t *arr, const char *s)
{
	size_t i;
	json_t *v;
	json_array_foreach(arr, i, v)
		if (json_is_string(v) && !strcmp(json_string_value(v), s))
			return true;
	return false;
}

static bool holds(const struct host *h, const char *cap)
{
	for (const char *const *c = h->caps; *c; c++)
		if (!strcmp(*c, cap))
			return true;
	return false;
}

/* Docker's includes/excludes of one rule. */
static bool applies(json_t *rule, const struct host *h)
{
	json_t *inc = json_object_get(rule, "includes"), *exc = json_object_get(rule, "excludes");
	size_t i;
	json_t *v;
	json_array_foreach(json_object_get(inc, "caps"), i, v)
		if (!holds(h, json_string_value(v)))
			return false;
	json_t *arches = json_object_get(inc, "arches");
	if (json_array_size(arches) && !str_in(arches, h->goarch))
		return false;
	const char *mk = json_string_value(json_object_get(inc, "minKernel"));
	if (mk) {
		int maj = 0, min = 0;
		sscanf(mk, "%d.%d", &maj, &min);
		if (h->kmajor < maj || (h->kmajor == maj && h->kminor < min))
			return false;
	}
	json_array_foreach(json_object_get(exc, "caps"), i, v)
		if (holds(h, json_string_value(v)))
			return false;
	if (str_in(json_object_get(exc, "arches"), h->goarch))
		return false;
	return true;
}

static bool cond_true(json_t *c, const uint64_t args[6])
{
	unsigned idx = (unsigned)json_integer_value(json_object_get(c, "index"));
	uint64_t a = idx < 6 ? args[idx] : 0;
	uint64_t v = (uint64_t)json_integer_value(json_object_get(c, "value"));
	uint64_t v2 = (uint64_t)json_integer_value(json_object_get(c, "valueTwo"));
	const char *op = json_string_value(json_object_get(c, "op"));
	if (!strcmp(op, "SCMP_CMP_EQ"))
		return a == v;
	if (!strcmp(op, "SCMP_CMP_NE"))
		return a != v;
	if (!strcmp(op, "SCMP_CMP_MASKED_EQ"))
		return (a & v) == v2;
	if (!strcmp(op, "SCMP_CMP_GT"))
		return a > v;
	if (!strcmp(op, "SCMP_CMP_GE"))
		return a >= v;
	if (!strcmp(op, "SCMP_CMP_LT"))
		return a < v;
	if (!strcmp(op, "SCMP_CMP_LE"))
		return a <= v;
	FAILF("unknown op %s", op);
	return false;
}

/* runc: conditions ANDed, unless an argument has more than one: then
 * each is a rule of its own. */
static bool args_match(json_t *conds, const uint64_t args[6])
{
	int per_index[6] = {0};
	bool or_them = false;
	size_t i;
	json_t *c;
	json_array_foreach(conds, i, c) {
		json_int_t idx = json_integer_value(json_object_get(c, "index"));
		if (idx >= 0 && idx < 6 && ++per_index[idx] > 1)
			or_them = true;
	}
	if (json_array_size(conds) == 0)
		return true;
	json_array_foreach(conds, i, c) {
		bool t = cond_true(c, args);
		if (or_them && t)
			return true;
		if (!or_them && !t)
			return false;
	}
	return !or_them;
}

/* 0: allowed; else the errno the call gets. */
static int verdict(const struct host *h, const char *name, const uint64_t args[6])
{
	int errno_rule = 0;
	size_t i;
	json_t *r;
	json_array_foreach(json_object_get(profile, "syscalls"), i, r) {
		if (!str_in(json_object_get(r, "names"), name) || !applies(r, h) ||
		    !args_match(json_object_get(r, "args"), args))
			continue;
		const char *action = json_string_value(json_object_get(r, "action"));
		if (!strcmp(action, "SCMP_ACT_ALLOW"))
			return 0;
		if (!strcmp(action, "SCMP_ACT_ERRNO")) {
			json_t *e = json_object_get(r, "errnoRet");
			errno_rule = e ? (int)json_integer_value(e) : EPERM;
		}
	}
	/* The default action: SCMP_ACT_ERRNO, EPERM (TEST(architectures)). */
	return errno_rule ? errno_rule : EPERM;
}

static int call1(const struct host *h, const char *name, uint64_t a0, uint64_t a1)
{
	uint64_t args[6] = { a0, a1, 0, 0, 0, 0 };
	return verdict(h, name, args);
}

static bool refused_ioctl(uint32_t v)
{
	for (size_t i = 0; i < docker_seccomp_n_refused_ioctls; i++)
		if (docker_seccomp_refused_ioctls[i] == v)
			return true;
	return false;
}

TEST(the_four_btrfs_ioctls_are_refused_whatever_the_high_bits)
{
	CHECK_INT(docker_seccomp_n_refused_ioctls, 4);
	const uint32_t want[] = { BTRFS_IOC_SUBVOL_CREATE, BTRFS_IOC_SUBVOL_CREATE_V2, BTRFS_IOC_SNAP_CREATE,
				  BTRFS_IOC_SNAP_CREATE_V2 };
	for (size_t i = 0; i < 4; i++) {
		CHECK(refused_ioctl(want[i]));
		/* The kernel reads the request as 32 bits: these are the same
		 * request to it. */
		const uint64_t high[] = { 0, 1ull << 32, 0xffffffff00000000ull, 1ull << 63, 0x1234567800000000ull };
		for (size_t j = 0; j < sizeof(high) / sizeof(high[0]); j++)
			for (int fd = 0; fd < 4; fd += 3) {
				CHECK_INT(call1(&amd64, "ioctl", (uint64_t)fd, high[j] | want[i]), EPERM);
				CHECK_INT(call1(&arm64, "ioctl", (uint64_t)fd, high[j] | want[i]), EPERM);
			}
	}
	/* The numbers as the kernel's ioctl encoding gives them on x86_64
	 * and aarch64 (_IOW(0x94, nr, 4096 bytes)). */
	CHECK(refused_ioctl(0x5000940e) && refused_ioctl(0x50009418) && refused_ioctl(0x50009401) &&
	      refused_ioctl(0x50009417));
}

TEST(every_other_ioctl_is_allowed)
{
	const uint32_t common[] = { 0, 0x5401 /* TCGETS */, 0x5413 /* TIOCGWINSZ */, 0x541b /* FIONREAD */,
				    0x5421 /* FIONBIO */, BTRFS_IOC_FS_INFO, BTRFS_IOC_INO_LOOKUP,
				    BTRFS_IOC_TREE_SEARCH, 0xc0104620 /* an _IOWR */, 0xffffffff };
	for (size_t i = 0; i < sizeof(common) / sizeof(common[0]); i++) {
		CHECK_INT(call1(&amd64, "ioctl", 1, common[i]), 0);
		/* musl passes the request as an int, sign-extended. */
		CHECK_INT(call1(&amd64, "ioctl", 1, (uint64_t)(int64_t)(int32_t)common[i]), 0);
		CHECK_INT(call1(&arm64, "ioctl", 1, common[i]), 0);
	}
	/* Every request near the refused ones, and a sample of all others. */
	int wrong = 0;
	for (uint32_t v = 0x50009000; v < 0x5000a000; v++)
		wrong += (call1(&amd64, "ioctl", 3, v) == 0) == refused_ioctl(v);
	uint64_t x = 88172645463325252ull;
	for (int n = 0; n < 20000; n++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		wrong += (call1(&amd64, "ioctl", 3, x) == 0) == refused_ioctl((uint32_t)x);
	}
	CHECK_INT(wrong, 0);
}

/* runc ORs a rule's conditions on one argument: a rule with two would
 * allow more than it says. */
TEST(no_rule_has_two_conditions_on_one_argument)
{
	size_t i, j;
	json_t *r, *c;
	json_array_foreach(json_object_get(profile, "syscalls"), i, r) {
		int seen[6] = {0};
		json_array_foreach(json_object_get(r, "args"), j, c) {
			json_int_t idx = json_integer_value(json_object_get(c, "index"));
			CHECK(idx >= 0 && idx < 6);
			if (idx >= 0 && idx < 6)
				CHECK_INT(++seen[idx], 1);
		}
	}
}

TEST(what_docker_default_blocks_stays_blocked)
{
	/* The significant calls Docker's documentation lists as blocked by
	 * its default profile, and the mount API's. */
	const char *const blocked[] = {
		"acct", "add_key", "bpf", "clock_settime", "create_module", "delete_module", "finit_module",
		"get_kernel_syms", "get_mempolicy", "init_module", "ioperm", "iopl", "kcmp", "kexec_file_load",
		"kexec_load", "keyctl", "lookup_dcookie", "mbind", "mount", "move_pages", "nfsservctl",
		"open_by_handle_at", "perf_event_open", "pivot_root", "query_module", "quotactl", "reboot",
		"request_key", "set_mempolicy", "setns", "settimeofday", "stime", "swapon", "swapoff", "sysfs",
		"_sysctl", "umount", "umount2", "unshare", "uselib", "userfaultfd", "ustat", "vm86", "vm86old",
		"chroot", "fsopen", "fsmount", "fspick", "open_tree", "move_mount", "syslog", "vhangup",
		"pidfd_getfd", "process_madvise", "sethostname", "setdomainname", "fanotify_init",
		/* and what Docker 20.10's refuses that later versions allow */
		"name_to_handle_at", "process_vm_readv", "process_vm_writev", "pkey_alloc", "pkey_free",
		"pkey_mprotect",
		NULL,
	};
	for (const char *const *b = blocked; *b; b++) {
		if (call1(&amd64, *b, 0, 0) != EPERM || call1(&arm64, *b, 0, 0) != EPERM)
			FAILF("%s is not refused", *b);
	}
	/* clone: threads and processes, no namespaces; clone3 falls back. */
	CHECK_INT(call1(&amd64, "clone", 0x3d0f00 /* what pthread_create passes */, 0), 0);
	CHECK_INT(call1(&amd64, "clone", 0x01200011 /* fork's */, 0), 0);
	const uint64_t ns[] = { 0x10000000, 0x00020000, 0x04000000, 0x08000000, 0x20000000, 0x40000000, 0x02000000 };
	for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++)
		CHECK_INT(call1(&amd64, "clone", 0x01200011 | ns[i], 0), EPERM);
	CHECK_INT(call1(&amd64, "clone3", 0, 0), ENOSYS);
	/* personality: the listed values only. */
	CHECK_INT(call1(&amd64, "personality", 0, 0), 0);
	CHECK_INT(call1(&amd64, "personality", 0xffffffff, 0), 0);
	CHECK_INT(call1(&amd64, "personality", 0x20008, 0), 0);
	CHECK_INT(call1(&amd64, "personality", 0x0040000 /* ADDR_NO_RANDOMIZE */, 0), EPERM);
	/* socket: not AF_VSOCK. */
	CHECK_INT(call1(&amd64, "socket", 2, 1), 0);
	CHECK_INT(call1(&amd64, "socket", 40, 1), EPERM);
	CHECK_INT(call1(&amd64, "socket", (1ull << 32) | 40, 1), EPERM);
	for (uint64_t fam = 0; fam < 64; fam++)
		if (fam != 40)
			CHECK_INT(call1(&amd64, "socket", fam, 1), 0);
	/* ptrace from kernel 4.8 on only. */
	CHECK_INT(call1(&amd64, "ptrace", 0, 0), 0);
	const struct host old = { "amd64", 4, 4, session_caps };
	CHECK_INT(call1(&old, "ptrace", 0, 0), EPERM);
	/* An unknown name is refused (the default). */
	CHECK_INT(call1(&amd64, "no_such_call", 0, 0), EPERM);
}

TEST(what_docker_default_allows_stays_allowed)
{
	const char *const ok[] = {
		"read", "write", "openat", "openat2", "close", "close_range", "execve", "futex", "rseq", "statx",
		"faccessat2", "mmap", "mprotect", "epoll_pwait2", "io_uring_setup", "getrandom", "prctl", "seccomp",
		"setuid", "setgroups", "socketpair", "sendmmsg", "memfd_create", "pidfd_open", "clock_nanosleep",
		"sched_setaffinity", "mq_open", "shmget", "fchownat", "mknodat", "getdents64", "copy_file_range",
		"landlock_create_ruleset", "futex_waitv", "memfd_secret", "process_mrelease", "ptrace",
		NULL,
	};
	for (const char *const *o = ok; *o; o++)
		if (call1(&amd64, *o, 0, 0) != 0)
			FAILF("%s is not allowed", *o);
	/* Per architecture. */
	CHECK_INT(call1(&amd64, "arch_prctl", 0, 0), 0);
	CHECK_INT(call1(&arm64, "arch_prctl", 0, 0), EPERM);
	CHECK_INT(call1(&amd64, "modify_ldt", 0, 0), 0);
	CHECK_INT(call1(&arm64, "set_tls", 0, 0), 0);
	CHECK_INT(call1(&amd64, "set_tls", 0, 0), EPERM);
	/* A capability opens its calls, as in Docker's default. */
	const struct host admin = { "amd64", 6, 1, admin_caps };
	CHECK_INT(call1(&admin, "mount", 0, 0), 0);
	CHECK_INT(call1(&admin, "clone", 0x10000000, 0), 0);
	CHECK_INT(call1(&admin, "clone3", 0, 0), 0);
	/* ... but not the btrfs ioctls. */
	CHECK_INT(call1(&admin, "ioctl", 3, BTRFS_IOC_SUBVOL_CREATE), EPERM);
}

TEST(architectures)
{
	CHECK_STR(json_string_value(json_object_get(profile, "defaultAction")), "SCMP_ACT_ERRNO");
	CHECK(!json_object_get(profile, "defaultErrnoRet"));
	json_t *map = json_object_get(profile, "archMap");
	CHECK_INT(json_array_size(map), 2);
	json_t *x86 = json_array_get(map, 0), *arm = json_array_get(map, 1);
	CHECK_STR(json_string_value(json_object_get(x86, "architecture")), "SCMP_ARCH_X86_64");
	CHECK(str_in(json_object_get(x86, "subArchitectures"), "SCMP_ARCH_X86"));
	CHECK(str_in(json_object_get(x86, "subArchitectures"), "SCMP_ARCH_X32"));
	CHECK_STR(json_string_value(json_object_get(arm, "architecture")), "SCMP_ARCH_AARCH64");
	CHECK(str_in(json_object_get(arm, "subArchitectures"), "SCMP_ARCH_ARM"));
}

TEST(one_profile_text_for_docker)
{
	/* Built twice, the same text: what the runtime puts in SecurityOpt
	 * once at open. */
	json_t *again = docker_seccomp_profile();
	char *a = json_dumps(profile, JSON_COMPACT), *b = json_dumps(again, JSON_COMPACT);
	CHECK(a && b && !strcmp(a, b));
	/* Docker's SecurityOpt splits at the first '=' only, but a profile
	 * without one is plainer to read back from inspect. */
	CHECK(a && !strchr(a, '='));
	free(a);
	free(b);
	json_decref(again);
}

int main(void)
{
	profile = docker_seccomp_profile();
	if (!profile) {
		fprintf(stderr, "no profile\n");
		return 1;
	}
	RUN(the_four_btrfs_ioctls_are_refused_whatever_the_high_bits);
	RUN(every_other_ioctl_is_allowed);
	RUN(no_rule_has_two_conditions_on_one_argument);
	RUN(what_docker_default_blocks_stays_blocked);
	RUN(what_docker_default_allows_stays_allowed);
	RUN(architectures);
	RUN(one_profile_text_for_docker);
	json_decref(profile);
	return testlib_done();
}
