/* The seccomp profile of session containers (docker_seccomp.h).
 *
 * The system calls, their groups and conditions are those of Docker's
 * default profile (the facts of its documentation, "Seccomp security
 * profiles for Docker", and of the profile Docker builds in), and where
 * its versions differ the stricter: a process in a session can do what it
 * could under Docker 20.10's default and later ones, and nothing more,
 * except the btrfs ioctls refused here. Compared call by call with
 * dockerd 20.10.24's default by tests/e2e/test_folder_quota.sh. */
#include "runtime/docker_seccomp.h"

#include <errno.h>
#include <stdbool.h>

#include <linux/btrfs.h>

const uint32_t docker_seccomp_refused_ioctls[] = {
	BTRFS_IOC_SUBVOL_CREATE,
	BTRFS_IOC_SUBVOL_CREATE_V2,
	BTRFS_IOC_SNAP_CREATE,
	BTRFS_IOC_SNAP_CREATE_V2,
};
const size_t docker_seccomp_n_refused_ioctls =
	sizeof(docker_seccomp_refused_ioctls) / sizeof(docker_seccomp_refused_ioctls[0]);

/* Allowed whatever the arguments, the container's capabilities or the
 * architecture. Names a host's libseccomp does not know, or that its
 * architecture lacks (the 32-bit and *_time64 variants on a 64-bit
 * native ABI, open or fork on aarch64), are skipped by runc, so one list
 * serves every ABI of the host: x86_64 with i386 and x32, aarch64 with
 * arm. ioctl, socket, personality, clone and clone3 have rules of their
 * own below. */
static const char *const allowed[] = {
	/* files and directories */
	"access", "faccessat", "faccessat2", "chdir", "fchdir", "getcwd",
	"chmod", "fchmod", "fchmodat", "chown", "chown32", "fchown", "fchown32",
	"fchownat", "lchown", "lchown32", "creat", "open", "openat", "openat2",
	"close", "close_range", "dup", "dup2", "dup3",
	"fcntl", "fcntl64", "flock", "link", "linkat", "symlink", "symlinkat",
	"readlink", "readlinkat", "rename", "renameat", "renameat2", "unlink",
	"unlinkat", "mkdir", "mkdirat", "rmdir", "mknod", "mknodat", "umask",
	"truncate", "truncate64", "ftruncate", "ftruncate64", "fallocate",
	"fadvise64", "fadvise64_64", "readahead", "sync", "syncfs", "fsync",
	"fdatasync", "sync_file_range", "stat", "stat64", "lstat", "lstat64",
	"fstat", "fstat64", "fstatat64", "newfstatat", "statx", "statfs",
	"statfs64", "fstatfs", "fstatfs64", "getdents", "getdents64", "utime",
	"utimes", "utimensat", "utimensat_time64", "futimesat",
	"getxattr", "lgetxattr", "fgetxattr", "setxattr", "lsetxattr",
	"fsetxattr", "listxattr", "llistxattr", "flistxattr", "removexattr",
	"lremovexattr", "fremovexattr", "inotify_init", "inotify_init1",
	"inotify_add_watch", "inotify_rm_watch", "fanotify_mark",
	/* reading, writing, waiting */
	"read", "readv", "pread64", "preadv", "preadv2", "write", "writev",
	"pwrite64", "pwritev", "pwritev2", "lseek", "_llseek", "sendfile",
	"sendfile64", "splice", "tee", "vmsplice", "copy_file_range", "pipe",
	"pipe2", "select", "_newselect", "pselect6", "pselect6_time64", "poll",
	"ppoll", "ppoll_time64", "epoll_create", "epoll_create1", "epoll_ctl",
	"epoll_ctl_old", "epoll_wait", "epoll_wait_old", "epoll_pwait",
	"epoll_pwait2", "eventfd", "eventfd2", "signalfd", "signalfd4",
	"timerfd_create", "timerfd_gettime", "timerfd_gettime64",
	"timerfd_settime", "timerfd_settime64", "io_setup", "io_destroy",
	"io_submit", "io_cancel", "io_getevents", "io_pgetevents",
	"io_pgetevents_time64", "io_uring_setup", "io_uring_enter",
	"io_uring_register", "ioprio_get", "ioprio_set",
	/* memory */
	"brk", "mmap", "mmap2", "munmap", "mremap", "mprotect", "madvise",
	"mincore", "msync", "mlock", "mlock2", "mlockall", "munlock",
	"munlockall", "membarrier", "memfd_create", "memfd_secret",
	"remap_file_pages",
	/* processes and threads (clone and clone3 below) */
	"execve", "execveat", "exit", "exit_group", "fork", "vfork", "wait4",
	"waitid", "waitpid", "kill", "tkill", "tgkill", "getpid", "getppid",
	"gettid", "getpgid", "getpgrp", "setpgid", "getsid", "setsid",
	"set_tid_address", "set_robust_list", "get_robust_list", "futex",
	"futex_time64", "futex_waitv", "rseq", "restart_syscall", "prctl",
	"seccomp", "capget", "capset", "getpriority", "setpriority",
	"getrlimit", "setrlimit", "ugetrlimit", "prlimit64", "getrusage",
	"sched_yield", "sched_getaffinity", "sched_setaffinity",
	"sched_getattr", "sched_setattr", "sched_getparam", "sched_setparam",
	"sched_getscheduler", "sched_setscheduler", "sched_get_priority_max",
	"sched_get_priority_min", "sched_rr_get_interval",
	"sched_rr_get_interval_time64", "getcpu", "pidfd_open",
	"pidfd_send_signal", "process_mrelease", "landlock_create_ruleset",
	"landlock_add_rule", "landlock_restrict_self", "get_thread_area",
	"set_thread_area",
	/* user and group ids */
	"getuid", "getuid32", "geteuid", "geteuid32", "getgid", "getgid32",
	"getegid", "getegid32", "getresuid", "getresuid32", "getresgid",
	"getresgid32", "getgroups", "getgroups32", "setuid", "setuid32",
	"setgid", "setgid32", "setreuid", "setreuid32", "setregid",
	"setregid32", "setresuid", "setresuid32", "setresgid", "setresgid32",
	"setfsuid", "setfsuid32", "setfsgid", "setfsgid32", "setgroups",
	"setgroups32",
	/* signals */
	"rt_sigaction", "rt_sigpending", "rt_sigprocmask", "rt_sigqueueinfo",
	"rt_sigreturn", "rt_sigsuspend", "rt_sigtimedwait",
	"rt_sigtimedwait_time64", "rt_tgsigqueueinfo", "sigaltstack",
	"sigprocmask", "sigreturn", "pause", "alarm",
	/* time: reading clocks and timers (setting a clock needs SYS_TIME,
	 * below; adjtimex and clock_adjtime only read without it) */
	"time", "gettimeofday", "clock_gettime", "clock_gettime64",
	"clock_getres", "clock_getres_time64", "clock_nanosleep",
	"clock_nanosleep_time64", "nanosleep", "adjtimex", "clock_adjtime",
	"clock_adjtime64", "getitimer", "setitimer", "timer_create",
	"timer_delete", "timer_getoverrun", "timer_gettime", "timer_gettime64",
	"timer_settime", "timer_settime64", "times",
	/* the system */
	"uname", "sysinfo", "getrandom",
	/* sockets (socket below) */
	"socketpair", "socketcall", "bind", "connect", "listen", "accept",
	"accept4", "getsockname", "getpeername", "getsockopt", "setsockopt",
	"send", "sendto", "sendmsg", "sendmmsg", "recv", "recvfrom", "recvmsg",
	"recvmmsg", "recvmmsg_time64", "shutdown",
	/* System V and POSIX IPC (namespaced) */
	"ipc", "msgget", "msgctl", "msgsnd", "msgrcv", "semget", "semctl",
	"semop", "semtimedop", "semtimedop_time64", "shmget", "shmctl", "shmat",
	"shmdt", "mq_open", "mq_unlink", "mq_getsetattr", "mq_notify",
	"mq_timedsend", "mq_timedsend_time64", "mq_timedreceive",
	"mq_timedreceive_time64",
	NULL,
};

/* Allowed only to a container holding a capability, as in Docker's
 * default: a session holds none of these (runtime/docker.c keeps
 * CHOWN, DAC_OVERRIDE, FOWNER, FSETID, KILL, SETUID, SETGID and
 * NET_BIND_SERVICE), so in sessions they are refused; they are here so
 * that the profile stays Docker's should that set ever grow. */
struct cap_group {
	const char *cap;
	const char *const names[32];
};

static const struct cap_group by_cap[] = {
	{"CAP_DAC_READ_SEARCH", {"open_by_handle_at"}},
	{"CAP_SYS_ADMIN", {"bpf", "clone", "clone3", "fanotify_init", "fsconfig", "fsmount", "fsopen",
			   "fspick", "lookup_dcookie", "mount", "mount_setattr", "move_mount", "name_to_handle_at",
			   "open_tree", "perf_event_open", "quotactl", "quotactl_fd", "setdomainname",
			   "sethostname", "setns", "syslog", "umount", "umount2", "unshare"}},
	{"CAP_SYS_BOOT", {"reboot"}},
	{"CAP_SYS_CHROOT", {"chroot"}},
	{"CAP_SYS_MODULE", {"delete_module", "init_module", "finit_module"}},
	{"CAP_SYS_PACCT", {"acct"}},
	{"CAP_SYS_PTRACE", {"kcmp", "pidfd_getfd", "process_madvise", "process_vm_readv",
			    "process_vm_writev", "ptrace"}},
	{"CAP_SYS_RAWIO", {"iopl", "ioperm"}},
	{"CAP_SYS_TIME", {"settimeofday", "stime", "clock_settime", "clock_settime64"}},
	{"CAP_SYS_TTY_CONFIG", {"vhangup"}},
	{"CAP_SYS_NICE", {"get_mempolicy", "mbind", "set_mempolicy", "set_mempolicy_home_node"}},
	{"CAP_SYSLOG", {"syslog"}},
	{"CAP_BPF", {"bpf"}},
	{"CAP_PERFMON", {"perf_event_open"}},
};

/* The namespace flags of clone: a process without SYS_ADMIN may clone
 * with none of them (a new user namespace would give it a full set of
 * capabilities over the namespaces it then makes). */
#define NS_FLAGS (0x00020000u /* NEWNS */ | 0x04000000u /* NEWUTS */ | 0x08000000u /* NEWIPC */ | \
		  0x10000000u /* NEWUSER */ | 0x20000000u /* NEWPID */ | 0x40000000u /* NEWNET */ | \
		  0x02000000u /* NEWCGROUP */)

static json_t *str_list(const char *const *v, size_t n)
{
	json_t *a = json_array();
	for (size_t i = 0; a && i < n && v[i]; i++)
		if (json_array_append_new(a, json_string(v[i])) < 0) {
			json_decref(a);
			return NULL;
		}
	return a;
}

/* Appends rule (stolen) to calls; -1 when it or the append failed. */
static int add(json_t *calls, json_t *rule)
{
	return rule ? json_array_append_new(calls, rule) : -1;
}

static json_t *cond(unsigned index, const char *op, uint64_t value, uint64_t value_two)
{
	return json_pack("{s:i, s:I, s:I, s:s}", "index", (int)index, "value", (json_int_t)value,
			 "valueTwo", (json_int_t)value_two, "op", op);
}

/* One ALLOW rule for name whose single condition is
 * (args[index] & mask) == prefix. */
static json_t *masked_rule(const char *name, unsigned index, uint32_t mask, uint32_t prefix)
{
	return json_pack("{s:[s], s:s, s:[o]}", "names", name, "action", "SCMP_ACT_ALLOW", "args",
			 cond(index, "SCMP_CMP_MASKED_EQ", mask, prefix));
}

/* The ALLOW rules for name that together match every value of
 * args[index] whose low 32 bits are none of refused[n] (the higher bits
 * ignored, as the kernel ignores them for a 32-bit argument). Walks the
 * 32-bit values as a binary tree from the top bit: the block of values
 * sharing the top `depth` bits of prefix is one rule when it holds no
 * refused value, nothing when it is one refused value, and else its two
 * halves. So the rules are disjoint, at most 32 per refused value. */
static int allow_except(json_t *calls, const char *name, unsigned index, const uint32_t *refused,
			size_t n, uint32_t prefix, unsigned depth)
{
	uint32_t mask = depth == 0 ? 0 : UINT32_MAX << (32 - depth);
	bool holds = false;
	for (size_t i = 0; i < n && !holds; i++)
		holds = (refused[i] & mask) == prefix;
	if (!holds)
		return add(calls, depth == 0 ? json_pack("{s:[s], s:s}", "names", name, "action", "SCMP_ACT_ALLOW")
					     : masked_rule(name, index, mask, prefix));
	if (depth == 32)
		return 0;
	uint32_t bit = 1u << (31 - depth);
	if (allow_except(calls, name, index, refused, n, prefix, depth + 1) < 0)
		return -1;
	return allow_except(calls, name, index, refused, n, prefix | bit, depth + 1);
}

json_t *docker_seccomp_profile(void)
{
	json_t *p = json_pack("{s:s, s:[{s:s, s:[s,s]}, {s:s, s:[s]}], s:[]}",
			      "defaultAction", "SCMP_ACT_ERRNO",
			      /* Docker picks the entry of the host's architecture
			       * and filters its 32-bit ABIs too. */
			      "archMap",
			      "architecture", "SCMP_ARCH_X86_64", "subArchitectures", "SCMP_ARCH_X86",
			      "SCMP_ARCH_X32",
			      "architecture", "SCMP_ARCH_AARCH64", "subArchitectures", "SCMP_ARCH_ARM",
			      "syscalls");
	json_t *calls = p ? json_object_get(p, "syscalls") : NULL;
	if (!calls)
		goto oom;
	if (add(calls, json_pack("{s:o, s:s}", "names", str_list(allowed, SIZE_MAX), "action", "SCMP_ACT_ALLOW")) < 0)
		goto oom;

	/* Every ioctl request but the btrfs subvolume and snapshot ones. */
	if (allow_except(calls, "ioctl", 1, docker_seccomp_refused_ioctls, docker_seccomp_n_refused_ioctls, 0, 0) < 0)
		goto oom;

	/* Tracing: from kernel 4.8 on, where a traced process can no longer
	 * step around seccomp. */
	if (add(calls, json_pack("{s:[s], s:s, s:{s:s}}", "names", "ptrace", "action", "SCMP_ACT_ALLOW",
				 "includes", "minKernel", "4.8")) < 0)
		goto oom;

	/* Sockets of every family but AF_VSOCK (40), which reaches the
	 * hypervisor's side of a virtual machine: refused by Docker's default
	 * profile after 20.10 (20.10's allows it; of two versions this
	 * profile takes the stricter). Written as the ioctl rules, since the
	 * kernel reads the family as an int: Docker's "!= 40" lets
	 * 40 + (1 << 32) through. */
	static const uint32_t vsock[] = {40};
	if (allow_except(calls, "socket", 0, vsock, 1, 0, 0) < 0)
		goto oom;

	/* personality: only Linux, with or without 32-bit and 2.6-style
	 * uname, and the query (0xffffffff). One rule per value: several
	 * conditions on one argument would be ORed. */
	static const uint32_t personas[] = {0x0, 0x8, 0x20000, 0x20008, 0xffffffff};
	for (size_t i = 0; i < sizeof(personas) / sizeof(personas[0]); i++)
		if (add(calls, json_pack("{s:[s], s:s, s:[o]}", "names", "personality", "action", "SCMP_ACT_ALLOW",
					 "args", cond(0, "SCMP_CMP_EQ", personas[i], 0))) < 0)
			goto oom;

	/* Calls of one architecture family (Docker compares these names with
	 * the host's Go architecture name). */
	static const char *const x86_prctl[] = {"arch_prctl"};
	static const char *const x86_ldt[] = {"modify_ldt"};
	static const char *const arm_calls[] = {"arm_fadvise64_64", "arm_sync_file_range", "sync_file_range2",
						"breakpoint", "cacheflush", "set_tls"};
	if (add(calls, json_pack("{s:o, s:s, s:{s:[s,s]}}", "names", str_list(x86_prctl, 1), "action",
				 "SCMP_ACT_ALLOW", "includes", "arches", "amd64", "x32")) < 0 ||
	    add(calls, json_pack("{s:o, s:s, s:{s:[s,s,s]}}", "names", str_list(x86_ldt, 1), "action",
				 "SCMP_ACT_ALLOW", "includes", "arches", "amd64", "x32", "x86")) < 0 ||
	    add(calls, json_pack("{s:o, s:s, s:{s:[s,s]}}", "names", str_list(arm_calls, 6), "action",
				 "SCMP_ACT_ALLOW", "includes", "arches", "arm", "arm64")) < 0)
		goto oom;

	for (size_t i = 0; i < sizeof(by_cap) / sizeof(by_cap[0]); i++)
		if (add(calls, json_pack("{s:o, s:s, s:{s:[s]}}", "names", str_list(by_cap[i].names, 32), "action",
					 "SCMP_ACT_ALLOW", "includes", "caps", by_cap[i].cap)) < 0)
			goto oom;

	/* clone without SYS_ADMIN: threads and processes, no namespaces
	 * ((flags & NS_FLAGS) == 0; flags are args[0], args[1] on s390). */
	if (add(calls, json_pack("{s:[s], s:s, s:[o], s:{s:[s], s:[s,s]}}", "names", "clone", "action",
				 "SCMP_ACT_ALLOW", "args", cond(0, "SCMP_CMP_MASKED_EQ", NS_FLAGS, 0), "excludes",
				 "caps", "CAP_SYS_ADMIN", "arches", "s390", "s390x")) < 0 ||
	    add(calls, json_pack("{s:[s], s:s, s:[o], s:{s:[s,s]}, s:{s:[s]}}", "names", "clone", "action",
				 "SCMP_ACT_ALLOW", "args", cond(1, "SCMP_CMP_MASKED_EQ", NS_FLAGS, 0), "includes",
				 "arches", "s390", "s390x", "excludes", "caps", "CAP_SYS_ADMIN")) < 0)
		goto oom;
	/* clone3 passes its flags in memory, out of a filter's sight: ENOSYS
	 * makes the C libraries fall back to clone, which is filtered. */
	if (add(calls, json_pack("{s:[s], s:s, s:i, s:{s:[s]}}", "names", "clone3", "action", "SCMP_ACT_ERRNO",
				 "errnoRet", ENOSYS, "excludes", "caps", "CAP_SYS_ADMIN")) < 0)
		goto oom;
	return p;
oom:
	json_decref(p);
	return NULL;
}
