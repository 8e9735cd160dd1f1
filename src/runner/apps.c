#include "runner/apps.h"
#include "runner/cluster.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runner/log.h"

#define APPS_BACKOFF_FIRST_MS 1000
#define APPS_BACKOFF_MAX_MS 30000
/* Dying this many times in a row before anyone reached it is "keeps
 * failing": connections are answered ERROR with why, while restarts go on. */
#define APPS_FAILING_AFTER 3
#define APPS_LINE_MAX 1024
#define APPS_DEF_MAX (256 * 1024)

struct app;

/* The read end of a started app's stdout/stderr. Lives until every
 * holder of the write end (the app and what it left behind) closed it,
 * which may be after the app was restarted: then two readers exist. */
struct app_out {
	struct rl_watch w;
	struct app *app;
	char line[APPS_LINE_MAX];
	size_t len;
};

struct app {
	struct app_decl decl;
	bool wanted;          /* supervised: started once, restarted when it dies */
	pid_t pid;            /* running now; 0 when not */
	int fails;            /* deaths in a row before being reached */
	bool reached;         /* reached since its last start */
	int last_status;      /* how it last ended (exit status or 128+signal) */
	char last_line[256];  /* its last line of output */
	char error[512];      /* why it cannot start at all, "" when it can */
	struct rl_watch timer;/* the restart */
};

static struct rl_loop *apps_loop;
static struct app apps[APP_MAX];
static size_t apps_n;
static sigset_t apps_mask;
static bool apps_stopping;

const sigset_t *apps_child_mask(void)
{
	return &apps_mask;
}

static struct app *app_of(const struct app_decl *d)
{
	for (size_t i = 0; i < apps_n; i++)
		if (&apps[i].decl == d)
			return &apps[i];
	return NULL;
}

const struct app_decl *apps_nth(int i)
{
	return i >= 0 && (size_t)i < apps_n ? &apps[i].decl : NULL;
}

const struct app_decl *apps_find(const char *name)
{
	for (size_t i = 0; i < apps_n; i++)
		if (!strcmp(apps[i].decl.name, name))
			return &apps[i].decl;
	return NULL;
}

/* ---- output ------------------------------------------------------------ */

static void app_out_line(struct app_out *o)
{
	if (!o->len)
		return;
	/* Prefixed, one write, so lines of two writers never mix. */
	char buf[APPS_LINE_MAX + APP_NAME_MAX + 8];
	int n = snprintf(buf, sizeof(buf), "[%s] %.*s\n", o->app->decl.name, (int)o->len, o->line);
	if (n > (int)sizeof(buf))
		n = (int)sizeof(buf);
	ssize_t w = write(STDOUT_FILENO, buf, (size_t)n);
	(void)w;
	/* The last line for the ERROR answer; control bytes would break the line protocol. */
	size_t k = 0;
	for (size_t i = 0; i < o->len && k + 1 < sizeof(o->app->last_line); i++) {
		unsigned char c = (unsigned char)o->line[i];
		o->app->last_line[k++] = c < 0x20 || c == 0x7f ? ' ' : (char)c;
	}
	while (k && o->app->last_line[k - 1] == ' ')
		k--;
	if (k)
		o->app->last_line[k] = '\0';
	o->len = 0;
}

static void app_out_cb(struct rl_watch *w, short revents)
{
	struct app_out *o = w->data;
	(void)revents;
	char buf[4096];
	ssize_t n = read(w->fd, buf, sizeof(buf));
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		app_out_line(o);
		rl_del(apps_loop, w);
		close(w->fd);
		free(o);
		return;
	}
	for (ssize_t i = 0; i < n; i++) {
		char c = buf[i];
		if (c == '\n') {
			if (o->len && o->line[o->len - 1] == '\r')
				o->len--;
			app_out_line(o);
			continue;
		}
		if (o->len == sizeof(o->line))
			app_out_line(o);
		o->line[o->len++] = c;
	}
}

/* ---- starting ---------------------------------------------------------- */

static bool on_path(const char *prog)
{
	const char *path = getenv("PATH");
	if (!path || !*path)
		path = "/usr/local/bin:/usr/bin:/bin";
	while (*path) {
		const char *c = strchr(path, ':');
		size_t len = c ? (size_t)(c - path) : strlen(path);
		char p[4096];
		if (len && len + strlen(prog) + 2 < sizeof(p)) {
			snprintf(p, sizeof(p), "%.*s/%s", (int)len, path, prog);
			if (access(p, X_OK) == 0)
				return true;
		}
		path += len + (c ? 1 : 0);
	}
	return false;
}

/* How to start the app: its service definition, else the built-in one. */
static int app_service(const struct app *a, struct app_service *s, struct terr *err)
{
	char path[256];
	snprintf(path, sizeof(path), APPS_SERVICE_DEFS "/%s.json", a->decl.name);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT) {
		if (!strcmp(a->decl.name, "jupyter"))
			return appdef_builtin_jupyter(on_path("jupyter"), a->decl.port, s, err);
		if (!strcmp(a->decl.name, "sshd")) {
			/* The runner wrote its configuration at start when the
			 * agent gave the session its SSH files. */
			const char *home = getenv("HOME");
			char conf[512];
			snprintf(conf, sizeof(conf), "%s/" CLUSTER_SSHD_CONFIG, home && *home ? home : "");
			if (access(CLUSTER_SSHD, X_OK) < 0)
				return terr_set(err, ENOENT, "sshd cannot be started: the image has no %s (Debian's "
						"openssh-server)", CLUSTER_SSHD);
			if (access(conf, R_OK) < 0)
				return terr_set(err, ENOENT, "sshd cannot be started: this session has no SSH keys "
						"(it was made before Tessera gave sessions SSH; start a new one)");
			return appdef_builtin_sshd(CLUSTER_SSHD, conf, a->decl.port, s, err);
		}
		return terr_set(err, ENOENT, "%s cannot be started: the image has no %s", a->decl.name, path);
	}
	if (fd < 0)
		return terr_set(err, errno, "%s cannot be started: cannot read %s: %s", a->decl.name, path,
				strerror(errno));
	char *buf = malloc(APPS_DEF_MAX);
	size_t len = 0;
	ssize_t n = 0;
	while (buf && len < APPS_DEF_MAX && (n = read(fd, buf + len, APPS_DEF_MAX - len)) > 0)
		len += (size_t)n;
	close(fd);
	int rc = !buf ? terr_set(err, ENOMEM, "out of memory")
		   : n < 0 ? terr_set(err, errno, "cannot read %s: %s", path, strerror(errno))
		   : len >= APPS_DEF_MAX ? terr_set(err, EFBIG, "%s is over %d bytes", path, APPS_DEF_MAX)
		   : appdef_parse_service(buf, len, a->decl.port, s, err);
	free(buf);
	if (rc < 0)
		terr_prefix(err, "%s cannot be started: %s", a->decl.name, path);
	return rc;
}

/* In the child, before exec: the prestart actions. Says what failed on
 * stderr (the app's output) and returns false. */
static bool app_prestart(const struct app_service *s)
{
	for (size_t i = 0; i < s->n_prestart; i++) {
		const struct app_action *act = &s->prestart[i];
		if (act->kind == APP_ACT_WRITE_FILE) {
			int fd = open(act->filename, O_WRONLY | O_CREAT | O_CLOEXEC |
					(act->append ? O_APPEND : O_TRUNC), act->mode);
			size_t len = strlen(act->body);
			if (fd < 0 || write(fd, act->body, len) != (ssize_t)len) {
				fprintf(stderr, "prestart: cannot write %s: %s\n", act->filename, strerror(errno));
				return false;
			}
			fchmod(fd, act->mode);
			close(fd);
			continue;
		}
		pid_t pid = fork();
		if (pid == 0) {
			execvp(act->argv[0], act->argv);
			fprintf(stderr, "prestart: cannot run %s: %s\n", act->argv[0], strerror(errno));
			_exit(127);
		}
		int st = 0;
		while (pid > 0 && waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
		if (pid < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			fprintf(stderr, "prestart: %s failed (status %d)\n", act->argv[0],
				pid < 0 ? -1 : WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
			return false;
		}
	}
	return true;
}

static void app_start(struct app *a)
{
	struct app_service s;
	struct terr err = {0};
	if (app_service(a, &s, &err) < 0) {
		snprintf(a->error, sizeof(a->error), "%s", err.msg);
		runner_log("tessera-runner: %s", err.msg);
		return;
	}
	a->error[0] = '\0';
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0) {
		runner_log("tessera-runner: cannot start %s: pipe: %s", a->decl.name, strerror(errno));
		appdef_service_free(&s);
		return;
	}
	struct app_out *o = calloc(1, sizeof(*o));
	pid_t pid = o ? fork() : -1;
	if (pid == 0) {
		setpgid(0, 0);
		sigprocmask(SIG_SETMASK, &apps_mask, NULL);
		int nul = open("/dev/null", O_RDONLY);
		if (nul >= 0 && nul != STDIN_FILENO) {
			dup2(nul, STDIN_FILENO);
			close(nul);
		}
		dup2(p[1], STDOUT_FILENO);
		dup2(p[1], STDERR_FILENO);
		if (chdir(APPS_HOME) < 0 && errno != ENOENT)
			fprintf(stderr, "cannot work in " APPS_HOME ": %s\n", strerror(errno));
		for (size_t i = 0; s.env[i]; i++)
			putenv(s.env[i]);
		if (!app_prestart(&s))
			_exit(1);
		execvp(s.argv[0], s.argv);
		fprintf(stderr, "cannot run %s: %s\n", s.argv[0], strerror(errno));
		_exit(errno == ENOENT ? 127 : 126);
	}
	close(p[1]);
	appdef_service_free(&s);
	if (pid < 0) {
		runner_log("tessera-runner: cannot start %s: %s", a->decl.name, strerror(errno));
		close(p[0]);
		free(o);
		return;
	}
	setpgid(pid, pid);
	fcntl(p[0], F_SETFL, O_NONBLOCK);
	o->app = a;
	rl_init(&o->w, p[0], app_out_cb, o);
	o->w.events = POLLIN;
	if (rl_add(apps_loop, &o->w) < 0) {
		close(p[0]);   /* its output is lost, the app still runs (SIGPIPE ends it if it writes) */
		free(o);
	}
	a->pid = pid;
	a->reached = false;
	runner_log("tessera-runner: started %s (pid %d) for port %d", a->decl.name, (int)pid, a->decl.port);
}

static void app_timer_cb(struct rl_watch *w, short revents)
{
	(void)revents;
	struct app *a = w->data;
	rl_del(apps_loop, w);
	if (!apps_stopping && a->wanted && !a->pid)
		app_start(a);
}

void apps_init(struct rl_loop *l, const struct app_decl *decls, size_t n, const sigset_t *child_mask)
{
	apps_loop = l;
	apps_mask = *child_mask;
	apps_n = n > APP_MAX ? APP_MAX : n;
	for (size_t i = 0; i < apps_n; i++) {
		memset(&apps[i], 0, sizeof(apps[i]));
		apps[i].decl = decls[i];
		rl_init(&apps[i].timer, -1, app_timer_cb, &apps[i]);
	}
}

int apps_want(const struct app_decl *d, char *msg, size_t n)
{
	struct app *a = app_of(d);
	if (!a || d->proto == APP_PREOPEN) {
		snprintf(msg, n, "nothing listens on port %d yet: start your server there, "
			 "e.g. mlflow ui --host 0.0.0.0 --port %d", d->port, d->port);
		return 0;
	}
	if (!a->wanted) {
		a->wanted = true;
		app_start(a);
	} else if (a->error[0] && !a->pid && a->timer.slot < 0) {
		app_start(a);   /* the image may have gained its definition since */
	}
	if (a->error[0]) {
		snprintf(msg, n, "%s", a->error);
		return -1;
	}
	if (a->fails >= APPS_FAILING_AFTER) {
		if (a->last_line[0])
			snprintf(msg, n, "%s exited with status %d: %s", d->name, a->last_status, a->last_line);
		else
			snprintf(msg, n, "%s exited with status %d", d->name, a->last_status);
		return -1;
	}
	snprintf(msg, n, "starting %s: waiting for port %d", d->name, d->port);
	return 0;
}

void apps_reached(const struct app_decl *d)
{
	struct app *a = app_of(d);
	if (a) {
		a->reached = true;
		a->fails = 0;
	}
}

bool apps_child_exited(pid_t pid, int status)
{
	for (size_t i = 0; i < apps_n; i++) {
		struct app *a = &apps[i];
		if (a->pid != pid || pid <= 0)
			continue;
		a->pid = 0;
		a->last_status = WIFEXITED(status) ? WEXITSTATUS(status)
			       : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
		/* What it left in its group goes with it: a restart must find the port free. */
		kill(-pid, SIGKILL);
		a->fails = a->reached ? 1 : a->fails + 1;
		int64_t backoff = APPS_BACKOFF_FIRST_MS;
		for (int k = 1; k < a->fails && backoff < APPS_BACKOFF_MAX_MS; k++)
			backoff *= 2;
		if (backoff > APPS_BACKOFF_MAX_MS)
			backoff = APPS_BACKOFF_MAX_MS;
		runner_log("tessera-runner: %s exited with status %d%s", a->decl.name, a->last_status,
			   apps_stopping ? "" : "; restarting it");
		if (!apps_stopping) {
			a->timer.deadline = rl_now_ms() + backoff;
			rl_add(apps_loop, &a->timer);
		}
		return true;
	}
	return false;
}

void apps_stop(void)
{
	apps_stopping = true;
}
