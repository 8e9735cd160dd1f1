/* The registry child of `tessera server`. Written with fork/exec rather
 * than posix_spawn for PR_SET_PDEATHSIG: a server killed with SIGKILL
 * must not leave its registry running on the port. */
#include "registry/registry.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/httpc.h"
#include "common/log.h"
#include "common/sign.h"
#include "common/util.h"

struct registry_proc {
	char binary[PATH_MAX];
	char config[PATH_MAX + 32];
	char log[PATH_MAX + 32];
	char host[64];
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pid_t pid;          /* the running child, 0 when none */
	bool stopping;
	pthread_t thread;
	bool thread_started;
};

/* A free port on 127.0.0.1: bound and released. Another process may take
 * it in between; the registry then fails to start and says so in its log. */
static int free_port(struct terr *err)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sa);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &len) < 0) {
		if (fd >= 0)
			close(fd);
		return terr_set(err, errno, "cannot find a free port for the registry: %s", strerror(errno));
	}
	close(fd);
	return ntohs(sa.sin_port);
}

static int write_config(const struct registry_proc *p, const char *dir, struct terr *err)
{
	char secret[65];
	if (sign_random_hex(32, secret, sizeof(secret), err) < 0)
		return -EIO;
	FILE *f = fopen(p->config, "w");
	if (!f)
		return terr_set(err, errno, "cannot write %s: %s", p->config, strerror(errno));
	/* delete: enabled, so that an admin can remove an image's manifest
	 * through the registry's API (docs/admin.md). */
	fprintf(f,
		"# Written by tessera server at each start; edits are lost.\n"
		"version: 0.1\n"
		"log:\n  level: warn\n  accesslog:\n    disabled: true\n"
		"storage:\n  filesystem:\n    rootdirectory: %s/storage\n  delete:\n    enabled: true\n"
		"http:\n  addr: %s\n  secret: %s\n",
		dir, p->host, secret);
	if (fclose(f) != 0)
		return terr_set(err, EIO, "cannot write %s", p->config);
	return 0;
}

static pid_t spawn(const struct registry_proc *p)
{
	int logfd = open(p->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid == 0) {
		/* The child: only async-signal-safe calls until exec. The
		 * server blocks its stop signals and ignores SIGPIPE; the
		 * registry must not inherit either. */
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		signal(SIGPIPE, SIG_DFL);
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() != parent)
			_exit(1);
		if (logfd >= 0) {
			dup2(logfd, 1);
			dup2(logfd, 2);
		}
		int devnull = open("/dev/null", O_RDONLY);
		if (devnull >= 0)
			dup2(devnull, 0);
		char *const argv[] = {(char *)p->binary, (char *)"serve", (char *)p->config, NULL};
		execv(p->binary, argv);
		_exit(127);
	}
	if (logfd >= 0)
		close(logfd);
	return pid;
}

/* Waits for the child and starts it again when it ended by itself, at
 * most once a second. */
static void *supervise(void *arg)
{
	struct registry_proc *p = arg;
	pthread_mutex_lock(&p->mu);
	while (!p->stopping) {
		pid_t pid = p->pid;
		pthread_mutex_unlock(&p->mu);
		int status = 0;
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
		pthread_mutex_lock(&p->mu);
		p->pid = 0;
		pthread_cond_broadcast(&p->cv);
		if (p->stopping)
			break;
		log_warn("registry", "docker-registry (pid %d) ended (%s %d); restarting it (its log: %s)", (int)pid,
			 WIFSIGNALED(status) ? "signal" : "exit code",
			 WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status), p->log);
		struct timespec dl;
		clock_gettime(CLOCK_REALTIME, &dl);
		dl.tv_sec += 1;
		while (!p->stopping && pthread_cond_timedwait(&p->cv, &p->mu, &dl) == 0)
			;
		if (p->stopping)
			break;
		pid = spawn(p);
		if (pid < 0) {
			log_error("registry", "cannot start %s again: %s", p->binary, strerror(errno));
			break;
		}
		p->pid = pid;
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

static bool answers(const struct registry_proc *p)
{
	char url[128];
	snprintf(url, sizeof(url), "http://%s/v2/", p->host);
	struct httpc_request req = {.method = "GET", .url = url, .timeout_ms = 2000};
	struct httpc_response resp;
	struct terr err = {0};
	if (httpc_do(&req, &resp, &err) < 0)
		return false;
	bool ok = resp.status == 200;
	httpc_response_free(&resp);
	return ok;
}

int registry_proc_start(const char *dir, const char *binary, struct registry_proc **out, struct terr *err)
{
	struct registry_proc *p = calloc(1, sizeof(*p));
	if (!p)
		return terr_set(err, ENOMEM, "out of memory");
	pthread_mutex_init(&p->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_cond_init(&p->cv, &ca);
	pthread_condattr_destroy(&ca);
	util_strlcpy(p->binary, binary && *binary ? binary : REGISTRY_DEFAULT_BINARY, sizeof(p->binary));
	snprintf(p->config, sizeof(p->config), "%s/config.yml", dir);
	snprintf(p->log, sizeof(p->log), "%s/registry.log", dir);
	int rc, port;
	if (access(p->binary, X_OK) != 0) {
		rc = terr_set(err, ENOENT, "%s is not installed (Debian package docker-registry; "
			      "or run with --registry none, or --registry URL of another registry)", p->binary);
		goto fail;
	}
	if ((rc = util_mkdir_p(dir, 0700, err)) < 0)
		goto fail;
	if ((port = free_port(err)) < 0) {
		rc = port;
		goto fail;
	}
	snprintf(p->host, sizeof(p->host), "127.0.0.1:%d", port);
	if ((rc = write_config(p, dir, err)) < 0)
		goto fail;
	p->pid = spawn(p);
	if (p->pid < 0) {
		rc = terr_set(err, errno, "cannot start %s: %s", p->binary, strerror(errno));
		goto fail;
	}
	/* Up to 20 s for the first answer: the machine may be busy. */
	for (int i = 0; i < 200 && !answers(p); i++) {
		int status;
		if (waitpid(p->pid, &status, WNOHANG) == p->pid) {
			p->pid = 0;
			rc = terr_set(err, EIO, "%s ended at start; see %s", p->binary, p->log);
			goto fail;
		}
		struct timespec ts = {0, 100 * 1000000L};
		nanosleep(&ts, NULL);
	}
	/* From here on the supervisor owns p->pid (under mu). */
	pid_t first = p->pid;
	if (pthread_create(&p->thread, NULL, supervise, p) != 0) {
		rc = terr_set(err, EAGAIN, "cannot start the registry's supervisor thread");
		goto fail;
	}
	p->thread_started = true;
	log_info("registry", "docker-registry serving on %s (pid %d; data and log under %s)", p->host, (int)first, dir);
	*out = p;
	return 0;
fail:
	if (p->pid > 0) {
		kill(p->pid, SIGKILL);
		waitpid(p->pid, NULL, 0);
	}
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cv);
	free(p);
	return rc;
}

const char *registry_proc_host(const struct registry_proc *p)
{
	return p->host;
}

void registry_proc_stop(struct registry_proc *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->stopping = true;
	pid_t pid = p->pid;
	if (pid > 0)
		kill(pid, SIGTERM);
	pthread_cond_broadcast(&p->cv);
	/* The supervisor reaps it; past 5 s it is killed. */
	struct timespec dl;
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += 5;
	while (p->pid > 0 && pthread_cond_timedwait(&p->cv, &p->mu, &dl) == 0)
		;
	if (p->pid > 0)
		kill(p->pid, SIGKILL);
	pthread_mutex_unlock(&p->mu);
	if (p->thread_started)
		pthread_join(p->thread, NULL);
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cv);
	free(p);
}
