/* SSH between a cluster session's containers (cluster.h). */
#include "runner/cluster.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runner/log.h"

extern char **environ;

/* Reads path whole into buf (NUL-terminated); false when it cannot. */
static bool read_small(const char *path, char *buf, size_t n)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	size_t got = 0;
	ssize_t r;
	while (got + 1 < n && (r = read(fd, buf + got, n - 1 - got)) > 0)
		got += (size_t)r;
	close(fd);
	buf[got] = '\0';
	return got > 0 && got + 1 < n;
}

void cluster_ssh_read(const char *dir, struct cluster_ssh *k)
{
	char path[PATH_MAX];
	k->have = false;
	if (access(dir, F_OK) < 0)
		return;
	snprintf(path, sizeof(path), "%s/id_ed25519", dir);
	bool ok = read_small(path, k->key, sizeof(k->key));
	snprintf(path, sizeof(path), "%s/id_ed25519.pub", dir);
	ok = ok && read_small(path, k->pub, sizeof(k->pub));
	/* The owner's keys: absent from an older agent's files. */
	snprintf(path, sizeof(path), "%s/authorized_keys", dir);
	if (ok && !read_small(path, k->owner_keys, sizeof(k->owner_keys)))
		k->owner_keys[0] = '\0';
	/* One line: the public key as the agent wrote it. */
	char *nl = strchr(k->pub, '\n');
	if (nl)
		*nl = '\0';
	if (!ok) {
		runner_log("tessera-runner: cannot read the session's SSH key in %s: %s", dir, strerror(errno));
		explicit_bzero(k->key, sizeof(k->key));
		return;
	}
	k->have = true;
}

/* Calls fn(name, len, ctx) for each host of "main1,sub1,...". */
static int each_host(const char *hosts, int (*fn)(const char *, size_t, void *), void *ctx)
{
	for (const char *p = hosts; p && *p;) {
		const char *e = strchr(p, ',');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		if (len && fn(p, len, ctx) < 0)
			return -1;
		p = e ? e + 1 : NULL;
	}
	return 0;
}

struct sbuf {
	char *p;
	size_t n, used;
	bool over;
};

static void sb_printf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(struct sbuf *b, const char *fmt, ...)
{
	if (b->over)
		return;
	va_list ap;
	va_start(ap, fmt);
	int w = vsnprintf(b->p + b->used, b->n - b->used, fmt, ap);
	va_end(ap);
	if (w < 0 || (size_t)w >= b->n - b->used)
		b->over = true;
	else
		b->used += (size_t)w;
}

static int add_host(const char *h, size_t len, void *ctx)
{
	sb_printf(ctx, " %.*s", (int)len, h);
	return 0;
}

static int add_known(const char *h, size_t len, void *ctx)
{
	struct sbuf *b = ctx;
	sb_printf(b, "%s[%.*s]:%d", b->used ? "," : "", (int)len, h, CLUSTER_SSH_PORT);
	return 0;
}

int cluster_ssh_client_config(const char *hosts, const char *keyfile, const char *known, char *buf, size_t n)
{
	struct sbuf b = {buf, n, 0, false};
	sb_printf(&b, "# The hosts of this cluster session (written by tessera-runner).\nHost");
	each_host(hosts, add_host, &b);
	sb_printf(&b,
		  "\n    Port %d\n    IdentityFile %s\n    IdentitiesOnly yes\n    UserKnownHostsFile %s\n"
		  "    StrictHostKeyChecking yes\n    LogLevel ERROR\n",
		  CLUSTER_SSH_PORT, keyfile, known);
	return b.over ? -1 : 0;
}

int cluster_ssh_known_hosts(const char *hosts, const char *pub, char *buf, size_t n)
{
	/* Every container has the session's key as its host key: one line
	 * names them all. */
	struct sbuf b = {buf, n, 0, false};
	each_host(hosts, add_known, &b);
	if (!b.used)
		return -1;
	sb_printf(&b, " %s\n", pub);
	return b.over ? -1 : 0;
}

/* Writes text to path, the user's alone (mode), replacing what was there. */
static bool write_file(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd < 0) {
		runner_log("tessera-runner: cannot write %s: %s", path, strerror(errno));
		return false;
	}
	size_t len = strlen(text);
	bool ok = write(fd, text, len) == (ssize_t)len && fchmod(fd, mode) == 0;
	if (close(fd) < 0 || !ok) {
		runner_log("tessera-runner: cannot write %s", path);
		return false;
	}
	return true;
}

/* The container's environment for SSH logins (sshd's
 * PermitUserEnvironment): what MPI's launchers and torchrun need on the
 * other side, as `docker exec` has it. The login's own are left out. */
static bool write_environment(const char *path)
{
	static const char *const skip[] = {"HOME=", "PWD=", "OLDPWD=", "SHLVL=", "_=", "HOSTNAME=", "TERM=", NULL};
	size_t cap = 1 << 16, used = 0;
	char *text = calloc(1, cap);
	if (!text)
		return false;
	for (char **e = environ; e && *e; e++) {
		bool left_out = strchr(*e, '\n') != NULL || !strchr(*e, '=');
		for (int i = 0; skip[i] && !left_out; i++)
			left_out = !strncmp(*e, skip[i], strlen(skip[i]));
		size_t len = strlen(*e);
		if (left_out || used + len + 2 > cap)
			continue;
		memcpy(text + used, *e, len);
		used += len;
		text[used++] = '\n';
	}
	bool ok = write_file(path, text, 0600);
	free(text);
	return ok;
}

pid_t cluster_ssh_start(struct cluster_ssh *k, const char *home, const char *hosts, bool root,
			const sigset_t *orig_mask)
{
	/* Paths under a home of at most 256 characters. */
	char dir[320], ssh[320], key[400], auth[400], known[400], conf[400], path[448];
	char text[8192];
	pid_t pid = -1;
	if (strlen(home) > 256) {
		runner_log("tessera-runner: the home directory's path is too long for the session's SSH files");
		goto out;
	}
	snprintf(ssh, sizeof(ssh), "%s/.ssh", home);
	snprintf(dir, sizeof(dir), "%s/.ssh/tessera", home);
	snprintf(key, sizeof(key), "%s/id_ed25519", dir);
	snprintf(auth, sizeof(auth), "%s/authorized_keys", dir);
	snprintf(known, sizeof(known), "%s/known_hosts", dir);
	snprintf(conf, sizeof(conf), "%s/sshd_config", dir);
	if ((mkdir(ssh, 0700) < 0 && errno != EEXIST) || (mkdir(dir, 0700) < 0 && errno != EEXIST)) {
		runner_log("tessera-runner: cannot make %s: %s", dir, strerror(errno));
		goto out;
	}
	bool cluster = hosts && *hosts;
	snprintf(text, sizeof(text), "%s\n", k->pub);
	if (!write_file(key, k->key, 0600))
		goto out;
	snprintf(path, sizeof(path), "%s.pub", key);
	if (!write_file(path, text, 0644))
		goto out;
	/* Who may log in: the session's own key (its other containers) and
	 * its owner's keys as they were when it started. */
	char *auth_text = malloc(sizeof(k->owner_keys) + sizeof(k->pub) + 2);
	if (!auth_text)
		goto out;
	snprintf(auth_text, sizeof(k->owner_keys) + sizeof(k->pub) + 2, "%s\n%s", k->pub, k->owner_keys);
	bool auth_ok = write_file(auth, auth_text, 0600);
	free(auth_text);
	if (!auth_ok)
		goto out;
	snprintf(path, sizeof(path), "%s/environment", ssh);
	if (!write_environment(path))
		goto out;
	/* As root, sshd wants its privilege separation directory. */
	if (root && mkdir("/run/sshd", 0755) < 0 && errno != EEXIST)
		runner_log("tessera-runner: cannot make /run/sshd: %s", strerror(errno));
	if (!cluster) {
		/* One container: sshd is the `sshd` app, reached through the
		 * runner on 127.0.0.1 only. */
		snprintf(text, sizeof(text),
			 "# sshd of this session (written by tessera-runner; started as its sshd app)\n"
			 "Port %d\nListenAddress 127.0.0.1\nHostKey %s\nAuthorizedKeysFile %s\n"
			 "PubkeyAuthentication yes\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
			 "UsePAM no\nPermitUserEnvironment yes\nPidFile none\nLogLevel ERROR\n"
			 "Subsystem sftp internal-sftp\n",
			 CLUSTER_SSH_PORT, key, auth);
		if (write_file(conf, text, 0600))
			pid = 0;
		goto out;
	}
	if (cluster_ssh_known_hosts(hosts, k->pub, text, sizeof(text)) < 0 || !write_file(known, text, 0644))
		goto out;
	/* The user's own client configuration is theirs: ours only where
	 * there is none (docs/user-guide.md says how to include it). */
	snprintf(path, sizeof(path), "%s/config", dir);
	if (cluster_ssh_client_config(hosts, key, known, text, sizeof(text)) < 0 || !write_file(path, text, 0644))
		goto out;
	snprintf(path, sizeof(path), "%s/config", ssh);
	if (access(path, F_OK) < 0 && errno == ENOENT) {
		snprintf(text, sizeof(text), "Include %s/config\n", dir);
		if (!write_file(path, text, 0644))
			goto out;
	}
	snprintf(text, sizeof(text),
		 "# sshd of this cluster session's container (written by tessera-runner)\n"
		 "Port %d\nHostKey %s\nAuthorizedKeysFile %s\nPubkeyAuthentication yes\n"
		 "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n"
		 "PermitUserEnvironment yes\nPidFile none\nLogLevel ERROR\nSubsystem sftp internal-sftp\n",
		 CLUSTER_SSH_PORT, key, auth);
	if (!write_file(conf, text, 0600))
		goto out;
	if (access(CLUSTER_SSHD, X_OK) < 0) {
		runner_log("tessera-runner: this image has no %s (Debian's openssh-server): the session's "
			   "containers cannot reach each other over SSH", CLUSTER_SSHD);
		goto out;
	}
	pid = fork();
	if (pid < 0) {
		runner_log("tessera-runner: cannot start sshd: %s", strerror(errno));
		goto out;
	}
	if (pid == 0) {
		setpgid(0, 0);
		sigprocmask(SIG_SETMASK, orig_mask, NULL);
		/* -D: stays a child of ours; -e: its errors in the session's log. */
		execl(CLUSTER_SSHD, CLUSTER_SSHD, "-D", "-e", "-f", conf, (char *)NULL);
		runner_log("tessera-runner: cannot run %s: %s", CLUSTER_SSHD, strerror(errno));
		_exit(127);
	}
	setpgid(pid, pid);
out:
	explicit_bzero(k->key, sizeof(k->key));
	return pid;
}
