/* Sandboxes: a spare container per user's network, made ahead, whose
 * network namespace a session's container joins at its start
 * (docs/architecture.md, "Sandboxes"). Docker sets up a container's
 * network on a user-defined bridge in about twice the time it takes
 * on its default bridge; joining a namespace that exists costs nothing
 * of that. So the user's next start finds its network ready, on their
 * own network as before, and the spare is made again in the background
 * after each start.
 *
 * A sandbox runs the runner as `--hold` from an image of no file of its
 * own (AGENT_SANDBOX_IMAGE, imported once from an empty tar; the runner
 * is bound in). It carries the agent's label, so that the tests' and the
 * admins' clean-ups by that label find it, and no session label, so that
 * nothing counts it as a session. A session's container names its
 * sandbox in its labels (and the sandbox's address, which Docker does
 * not report for it); its removal removes the sandbox. Spares not taken
 * within AGENT_SANDBOX_IDLE_MS go, as do all spares at the agent's end. */
#include "agent/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"

/* A spare not taken for this long is removed: one container per user
 * who started a session in the last hour. */
#define AGENT_SANDBOX_IDLE_MS (60 * 60 * 1000)
/* And at most this many spares at once (the least recently made go). */
#define AGENT_SANDBOX_SPARES_MAX 64

bool agent_sandbox_usable(const struct agent *a)
{
	return a->sbx_on && a->rt_ops->image_import && a->rt_ops->network_ensure && a->data_dir[0];
}

/* ---- the image ------------------------------------------------------- */

/* A tar of one directory, "opt/": what Docker's import takes as an image
 * with no file of its own. */
static void empty_tar(unsigned char tar[1536])
{
	memset(tar, 0, 1536);
	char *h = (char *)tar;
	memcpy(h, "opt/", 4);
	memcpy(h + 100, "0000755", 7);          /* mode */
	memcpy(h + 108, "0000000", 7);          /* uid */
	memcpy(h + 116, "0000000", 7);          /* gid */
	memcpy(h + 124, "00000000000", 11);     /* size */
	memcpy(h + 136, "00000000000", 11);     /* mtime */
	h[156] = '5';                           /* a directory */
	memcpy(h + 257, "ustar", 6);
	memcpy(h + 263, "00", 2);
	/* The checksum counts its own field as spaces. */
	memset(h + 148, ' ', 8);
	unsigned sum = 0;
	for (int i = 0; i < 512; i++)
		sum += tar[i];
	snprintf(h + 148, 8, "%06o", sum);
	h[155] = ' ';
}

static int sandbox_image_ensure(struct agent *a, struct terr *err)
{
	if (a->sbx_image_ok)
		return 0;
	bool exists = false;
	int rc = a->rt_ops->image_exists(a->rt, AGENT_SANDBOX_IMAGE, &exists, err);
	if (rc == 0 && !exists) {
		unsigned char tar[1536];
		empty_tar(tar);
		rc = a->rt_ops->image_import(a->rt, AGENT_SANDBOX_IMAGE,
					     &(struct rt_label){AGENT_LABEL_ROLE, "sandbox"}, tar, sizeof(tar), err);
	}
	if (rc == 0)
		a->sbx_image_ok = true;
	return rc;
}

/* ---- removal ------------------------------------------------------------ */

void agent_sandbox_remove(struct agent *a, const char *id)
{
	if (!id || !*id)
		return;
	struct terr err = {0};
	int rc = a->rt_ops->remove(a->rt, id, &err);
	/* Gone, or going: the session's removal and the watcher that saw
	 * its container's end may both remove it. */
	if (rc < 0 && rc != -ENOENT && !strstr(err.msg, "already in progress"))
		log_warn("agent", "cannot remove sandbox %.12s: %s", id, err.msg);
}

/* Takes every spare out of the table (under sbx_mu), then removes them
 * (outside it: Docker calls). */
void agent_sandbox_drop_all(struct agent *a)
{
	pthread_mutex_lock(&a->sbx_mu);
	struct sandbox_spare *v = a->sbx_spares;
	size_t n = a->n_sbx_spares;
	a->sbx_spares = NULL;
	a->n_sbx_spares = 0;
	pthread_mutex_unlock(&a->sbx_mu);
	for (size_t i = 0; i < n; i++)
		agent_sandbox_remove(a, v[i].id);
	free(v);
}

/* ---- taking one ---------------------------------------------------------- */

bool agent_sandbox_take(struct agent *a, const char *net, char id[RT_ID_MAX], char ip[64], char published[128])
{
	bool found = false;
	pthread_mutex_lock(&a->sbx_mu);
	for (size_t i = 0; i < a->n_sbx_spares && !found; i++) {
		if (strcmp(a->sbx_spares[i].net, net) != 0)
			continue;
		util_strlcpy(id, a->sbx_spares[i].id, RT_ID_MAX);
		util_strlcpy(ip, a->sbx_spares[i].ip, 64);
		util_strlcpy(published, a->sbx_spares[i].published, 128);
		a->sbx_spares[i] = a->sbx_spares[--a->n_sbx_spares];
		found = true;
	}
	pthread_mutex_unlock(&a->sbx_mu);
	return found;
}

void agent_sandbox_want(struct agent *a, const char *net, const char *owner_id)
{
	if (!agent_sandbox_usable(a))
		return;
	pthread_mutex_lock(&a->sbx_mu);
	bool have = false;
	for (size_t i = 0; i < a->n_sbx_spares && !have; i++)
		have = !strcmp(a->sbx_spares[i].net, net);
	for (size_t i = 0; i < a->n_sbx_wants && !have; i++)
		have = !strcmp(a->sbx_wants[i].net, net);
	if (!have && a->n_sbx_wants < AGENT_SANDBOX_SPARES_MAX) {
		struct sandbox_want *grown = realloc(a->sbx_wants, (a->n_sbx_wants + 1) * sizeof(*grown));
		if (grown) {
			a->sbx_wants = grown;
			util_strlcpy(grown[a->n_sbx_wants].net, net, sizeof(grown->net));
			util_strlcpy(grown[a->n_sbx_wants].owner_id, owner_id, sizeof(grown->owner_id));
			a->n_sbx_wants++;
			pthread_cond_signal(&a->sbx_cv);
		}
	}
	pthread_mutex_unlock(&a->sbx_mu);
}

/* ---- the session's host name ----------------------------------------- */

/* Sets the host name in the UTS namespace of process pid (a container's
 * init, as the host sees it), from a child process: setns in the agent's
 * own threads would move that thread. Docker gives a container that
 * joined a sandbox the sandbox's host name and refuses one of its own;
 * the container's UTS namespace is still its own. */
int agent_sandbox_set_hostname(int pid, const char *name, struct terr *err)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/ns/uts", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return terr_set(err, errno, "cannot open %s: %s", path, strerror(errno));
	pid_t child = fork();
	if (child == 0) {
		if (setns(fd, CLONE_NEWUTS) < 0)
			_exit(1);
		if (sethostname(name, strlen(name)) < 0)
			_exit(2);
		_exit(0);
	}
	int saved = errno;
	close(fd);
	if (child < 0)
		return terr_set(err, saved, "cannot fork: %s", strerror(saved));
	int status = 0;
	while (waitpid(child, &status, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return terr_set(err, EPERM, "cannot %s in the UTS namespace of process %d (the agent must run as root "
				"on the node)", WIFEXITED(status) && WEXITSTATUS(status) == 2 ? "set the host name" :
				"enter", pid);
	return 0;
}

/* ---- making spares ----------------------------------------------------- */

static int sandbox_make(struct agent *a, const struct sandbox_want *w, struct sandbox_spare *out,
			struct terr *err)
{
	int64_t t0 = util_mono_ms();
	char cluster[64];
	agent_cluster_id_copy(a, cluster);
	int rc = sandbox_image_ensure(a, err);
	if (rc < 0)
		return terr_prefix(err, "the sandbox image %s", AGENT_SANDBOX_IMAGE);
	bool asked = false;
	if ((rc = agent_network_ensure(a, w->net, NULL, cluster, w->owner_id, &asked, err)) < 0)
		return rc;
	unsigned char rnd[6];
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		memset(rnd, 0, sizeof(rnd));
	char name[160];
	snprintf(name, sizeof(name), "%s-%.16s-%02x%02x%02x%02x%02x%02x", AGENT_SANDBOX_PREFIX, w->owner_id, rnd[0],
		 rnd[1], rnd[2], rnd[3], rnd[4], rnd[5]);
	struct rt_label labels[] = {
		{AGENT_LABEL_AGENT, a->id}, {AGENT_LABEL_ROLE, "sandbox"}, {AGENT_LABEL_OWNER_ID, w->owner_id},
		{AGENT_LABEL_CLUSTER, cluster},   /* last: left out while unknown */
	};
	const char *entry[] = {AGENT_RUNNER_TARGET, "--hold", NULL};
	struct rt_mount runner = {a->runner_path, AGENT_RUNNER_TARGET, true};
	struct rt_container_spec cs = {
		.name = name,
		.image = AGENT_SANDBOX_IMAGE,
		.entrypoint = entry,
		.labels = labels,
		.n_labels = sizeof(labels) / sizeof(labels[0]) - (cluster[0] ? 0 : 1),
		.mounts = &runner,
		.n_mounts = 1,
		.hostname = "sandbox",
		.memory_bytes = 16 << 20,
		.pids_limit = 8,
		.log_max_size = 1 << 20,
		.log_max_files = 2,
		.network = w->net,
		/* Where the app port is published (app_publish), it is the
		 * sandbox's: Docker publishes none of a container that joins
		 * another's namespace. */
		.publish_port = a->app_publish ? AGENT_APP_PORT : 0,
		.publish_host = a->app_host,
		.seccomp_default = a->seccomp_default,
	};
	char id[RT_ID_MAX];
	if ((rc = a->rt_ops->create(a->rt, &cs, id, err)) < 0) {
		if (agent_network_retry(rc, err))
			agent_net_forget(a, w->net);
		/* The image may be what is gone (`docker image prune -a`
		 * while no spare held it): looked for again next time. */
		a->sbx_image_ok = false;
		return rc;
	}
	struct rt_container_info info;
	if ((rc = a->rt_ops->start(a->rt, id, err)) < 0 || (rc = a->rt_ops->inspect(a->rt, id, &info, err)) < 0) {
		if (agent_network_retry(rc, err))
			agent_net_forget(a, w->net);
		agent_sandbox_remove(a, id);
		return rc;
	}
	if (!info.running || !info.ip[0] || (a->app_publish && info.published_port <= 0)) {
		agent_sandbox_remove(a, id);
		return terr_set(err, EPROTO, "sandbox %.12s has no address on %s%s (%s)", id, w->net,
				a->app_publish ? " or no published port" : "", info.state);
	}
	memset(out, 0, sizeof(*out));
	if (a->app_publish)
		snprintf(out->published, sizeof(out->published), "%d=%s:%d", info.published_private,
			 info.published_host, info.published_port);
	util_strlcpy(out->net, w->net, sizeof(out->net));
	util_strlcpy(out->id, id, sizeof(out->id));
	util_strlcpy(out->ip, info.ip, sizeof(out->ip));
	out->made_ms = util_mono_ms();
	/* bench/session-start.sh waits for this line before it goes on. */
	log_info("agent", "sandbox %.12s ready on %s in %lld ms", id, w->net, (long long)(out->made_ms - t0));
	return 0;
}

/* Removes the agent's sandboxes that no session container names: spares
 * of an agent that ended without removing them, and those whose session's
 * container was removed while the agent was away. */
static void sandbox_sweep(struct agent *a)
{
	struct rt_container_info *list = NULL;
	size_t n = 0;
	struct terr err = {0};
	if (a->rt_ops->list(a->rt, AGENT_LABEL_AGENT, a->id, &list, &n, &err) < 0) {
		log_warn("agent", "cannot list containers for left sandboxes: %s", err.msg);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		if (list[i].session_id[0] || strncmp(list[i].name, AGENT_SANDBOX_PREFIX "-",
						     strlen(AGENT_SANDBOX_PREFIX) + 1) != 0 ||
		    !agent_owns(a, list[i].cluster_id))
			continue;
		bool named = false;
		for (size_t k = 0; k < n && !named; k++)
			named = list[k].session_id[0] && !strcmp(list[k].sandbox, list[i].id);
		if (!named) {
			log_info("agent", "removing sandbox %.12s, which no session uses", list[i].id);
			agent_sandbox_remove(a, list[i].id);
		}
	}
	free(list);
}

/* Spares past their idle time, or over the count, leave the table
 * (sbx_mu held); their ids go to out (at most max), for removal outside. */
static size_t sandbox_expire_locked(struct agent *a, int64_t now, char (*out)[RT_ID_MAX], size_t max)
{
	size_t k = 0;
	for (size_t i = 0; i < a->n_sbx_spares && k < max;) {
		if (now - a->sbx_spares[i].made_ms >= AGENT_SANDBOX_IDLE_MS) {
			util_strlcpy(out[k++], a->sbx_spares[i].id, RT_ID_MAX);
			a->sbx_spares[i] = a->sbx_spares[--a->n_sbx_spares];
		} else {
			i++;
		}
	}
	while (a->n_sbx_spares > AGENT_SANDBOX_SPARES_MAX && k < max) {
		size_t oldest = 0;
		for (size_t i = 1; i < a->n_sbx_spares; i++)
			if (a->sbx_spares[i].made_ms < a->sbx_spares[oldest].made_ms)
				oldest = i;
		util_strlcpy(out[k++], a->sbx_spares[oldest].id, RT_ID_MAX);
		a->sbx_spares[oldest] = a->sbx_spares[--a->n_sbx_spares];
	}
	return k;
}

static void *sandbox_main(void *arg)
{
	struct agent *a = arg;
	sandbox_sweep(a);
	pthread_mutex_lock(&a->sbx_mu);
	while (!a->sbx_stop) {
		char gone[8][RT_ID_MAX];
		size_t n_gone = sandbox_expire_locked(a, util_mono_ms(), gone, 8);
		if (n_gone) {
			pthread_mutex_unlock(&a->sbx_mu);
			for (size_t i = 0; i < n_gone; i++)
				agent_sandbox_remove(a, gone[i]);
			pthread_mutex_lock(&a->sbx_mu);
			continue;
		}
		if (!a->n_sbx_wants) {
			struct timespec until;
			clock_gettime(CLOCK_REALTIME, &until);
			until.tv_sec += 60;
			pthread_cond_timedwait(&a->sbx_cv, &a->sbx_mu, &until);
			continue;
		}
		struct sandbox_want w = a->sbx_wants[0];
		pthread_mutex_unlock(&a->sbx_mu);
		struct sandbox_spare s;
		struct terr err = {0};
		int rc = sandbox_make(a, &w, &s, &err);
		pthread_mutex_lock(&a->sbx_mu);
		/* Out of the queue only now: a want for the same network that
		 * came meanwhile found it queued and was not added again. */
		for (size_t i = 0; i < a->n_sbx_wants; i++)
			if (!strcmp(a->sbx_wants[i].net, w.net)) {
				memmove(&a->sbx_wants[i], &a->sbx_wants[i + 1],
					(a->n_sbx_wants - i - 1) * sizeof(a->sbx_wants[0]));
				a->n_sbx_wants--;
				break;
			}
		if (rc < 0) {
			pthread_mutex_unlock(&a->sbx_mu);
			log_warn("agent", "cannot make a sandbox on %s (the user's next start sets up its own "
				 "network): %s", w.net, err.msg);
			/* A Docker that fails is not asked again at once. */
			for (int i = 0; i < 10 && !atomic_load_explicit(&a->stop, memory_order_relaxed); i++)
				usleep(100 * 1000);
			pthread_mutex_lock(&a->sbx_mu);
			continue;
		}
		struct sandbox_spare *grown = a->sbx_stop ? NULL
				: realloc(a->sbx_spares, (a->n_sbx_spares + 1) * sizeof(*grown));
		if (grown) {
			a->sbx_spares = grown;
			grown[a->n_sbx_spares++] = s;
		} else {
			pthread_mutex_unlock(&a->sbx_mu);
			agent_sandbox_remove(a, s.id);
			pthread_mutex_lock(&a->sbx_mu);
		}
	}
	pthread_mutex_unlock(&a->sbx_mu);
	return NULL;
}

void agent_sandbox_start(struct agent *a)
{
	if (!agent_sandbox_usable(a))
		return;
	if (pthread_create(&a->sbx_thread, NULL, sandbox_main, a) == 0)
		a->sbx_running = true;
	else
		log_warn("agent", "cannot start the sandbox thread: every start sets up its container's network");
}

void agent_sandbox_stop(struct agent *a)
{
	pthread_mutex_lock(&a->sbx_mu);
	a->sbx_stop = true;
	pthread_cond_signal(&a->sbx_cv);
	pthread_mutex_unlock(&a->sbx_mu);
	if (a->sbx_running)
		pthread_join(a->sbx_thread, NULL);
	a->sbx_running = false;
	agent_sandbox_drop_all(a);
	free(a->sbx_wants);
	a->sbx_wants = NULL;
	a->n_sbx_wants = 0;
}

void agent_sandbox_forget(struct agent *a, const char *id)
{
	bool spare = false;
	pthread_mutex_lock(&a->sbx_mu);
	for (size_t i = 0; i < a->n_sbx_spares && !spare; i++)
		if (!strcmp(a->sbx_spares[i].id, id)) {
			a->sbx_spares[i] = a->sbx_spares[--a->n_sbx_spares];
			spare = true;
		}
	pthread_mutex_unlock(&a->sbx_mu);
	if (spare) {
		log_info("agent", "spare sandbox %.12s ended; removing it", id);
		agent_sandbox_remove(a, id);
	}
}

void agent_sandbox_counts(struct agent *a, int64_t *spares, int64_t *joined)
{
	pthread_mutex_lock(&a->sbx_mu);
	*spares = (int64_t)a->n_sbx_spares;
	pthread_mutex_unlock(&a->sbx_mu);
	*joined = atomic_load(&a->sbx_joined);
}
