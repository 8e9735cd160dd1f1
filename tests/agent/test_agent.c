/* agent/agent.c against a container runtime written here: what a session
 * spec turns into (mounts, devices, environment, limits, the fGPU files),
 * specs refused before anything is made, removal, the recovery paths of
 * a start, and the GPU usage thread asking the runtime for a container's
 * init once per start of it.
 *
 * The runtime is the agent's seam (runtime/runtime.h): Docker's own
 * protocol is tested in tests/runtime/test_docker.c, end to end in
 * tests/e2e. The GPUs are the project's mock driver, as mock devices and,
 * for the real-driver path, through NVML from the mock's directory.
 *
 * Environment (set by tests/agent/meson.build):
 *   TESSERA_TEST_BUILD_ROOT    the build tree (the agent's asset_dir)
 *   TESSERA_TEST_MOCK_LIB_DIR  the directory of the mock driver
 *   TESSERA_MOCK_GPUS          the devices NVML shows there */
#include "agent/agent.h"
#include "common/frames.h"
#include "common/util.h"
#include "gpuabi/conf.h"
#include "gpuabi/fgpu_contract.h"
#include "testlib.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define GiB (1LL << 30)
#define MiB (1LL << 20)

/* ---- the runtime -------------------------------------------------------- */

#define FAKE_MAX 16

struct fake_container {
	char id[RT_ID_MAX];
	char name[128];
	char image[256];
	char session_id[64];
	char agent_id[64];
	char cluster_id[64];
	char run_as[32];
	char network[128];
	bool running;
	int pid;
	/* What the agent asked for, copied. */
	char env[64][512];
	int n_env;
	struct { char src[4200], dst[512]; bool ro; } mounts[32];
	int n_mounts;
	char devices[24][64];
	int n_devices;
	char entry[12][256];
	int n_entry;
	int publish_port;      /* asked at create; published at start */
	char publish_host[64];
	int host_port;
	int64_t nano_cpus, memory, pids_limit;
	int64_t log_max_size;
	int log_max_files;
	char netns_of[RT_ID_MAX];   /* the sandbox it joined */
	char sandbox_label[RT_ID_MAX], sandbox_ip[64];
};

static struct {
	pthread_mutex_t mu;
	struct fake_container c[FAKE_MAX];
	int n;
	int next_id;
	int creates, starts, removes, inspects, lists;
	int init_pid;          /* the pid a started container's init gets */
	struct rt_event events[8];   /* queued for the watcher (fake_event) */
	int n_events;
	bool old_runner;       /* exec: the runner answers --timeout with its usage */
	int execs;
	/* Networks: those that exist, and what the last exec was run as. */
	char networks[8][128];
	char network_labels[8][256];   /* "k=v,k=v" as made */
	int n_networks, network_creates, network_removes;
	char exec_user[32], exec_workdir[64];
	int network_ensures;
	/* Called at each create, before the fake makes the container: what
	 * arrives while a start is under way. */
	void (*on_create)(void);
	/* The next start fails once with this (a network race), then works. */
	char start_fails_once[128];
	int start_fail_code;
	/* kill: how often, and what it answers (-ETIMEDOUT: a Docker that
	 * does not stop the container in time). */
	int kills;
	int kill_rc;
	/* Looks at images (image_config), and the image and network events
	 * queued for the images' stream (fake_image_event); images_live:
	 * that stream is being followed. */
	int image_looks;
	struct rt_event img_events[8];
	int n_img_events;
	bool img_events_sent;   /* the queue was emptied and its events handled */
	bool images_live;
	/* Networks Docker has room for (address pools); 0: 8. */
	int network_pools;
} fake = {.mu = PTHREAD_MUTEX_INITIALIZER};

static struct fake_container *fake_find(const char *id_or_name)
{
	for (int i = 0; i < fake.n; i++)
		if (!strcmp(fake.c[i].id, id_or_name) || !strcmp(fake.c[i].name, id_or_name))
			return &fake.c[i];
	return NULL;
}

static void fake_reset(void)
{
	pthread_mutex_lock(&fake.mu);
	fake.n = 0;
	fake.creates = fake.starts = fake.removes = fake.inspects = fake.lists = 0;
	fake.n_events = 0;
	fake.n_networks = fake.network_creates = fake.network_removes = 0;
	fake.exec_user[0] = fake.exec_workdir[0] = '\0';
	fake.network_ensures = 0;
	fake.start_fails_once[0] = '\0';
	fake.kills = fake.kill_rc = 0;
	fake.image_looks = fake.n_img_events = fake.network_pools = 0;
	fake.images_live = fake.img_events_sent = false;
	fake.init_pid = getpid();
	pthread_mutex_unlock(&fake.mu);
}

static int f_open(struct runtime **out, const char *endpoint, struct terr *err)
{
	(void)endpoint;
	(void)err;
	*out = (struct runtime *)&fake;
	return 0;
}

static void f_close(struct runtime *rt)
{
	(void)rt;
}

static int f_version(struct runtime *rt, char *api, size_t api_n, char *server, size_t server_n,
		     struct terr *err)
{
	(void)rt;
	(void)err;
	snprintf(api, api_n, "1.41");
	snprintf(server, server_n, "0.1-test");
	return 0;
}

static int f_image_exists(struct runtime *rt, const char *ref, bool *exists, struct terr *err)
{
	(void)rt;
	(void)err;
	/* Commits go to "tp/..." names, new ones. */
	*exists = strcmp(ref, "nosuch:latest") != 0 && strncmp(ref, "tp/", 3) != 0 &&
		  strcmp(ref, AGENT_SANDBOX_IMAGE) != 0;
	return 0;
}

/* Every image sets PATH, as Debian's do; the agent appends its tools. */
static int f_image_env(struct runtime *rt, const char *ref, char ***env, size_t *n, struct terr *err)
{
	(void)rt;
	(void)ref;
	(void)err;
	*env = calloc(2, sizeof(char *));
	(*env)[0] = strdup("PATH=/image/bin:/bin");
	(*env)[1] = strdup("LANG=C.UTF-8");
	*n = 2;
	return 0;
}

static int f_image_labels(struct runtime *rt, const char *ref, char ***labels, size_t *n, struct terr *err);

/* As Docker's: both of the above from one look, counted. */
static int f_image_config(struct runtime *rt, const char *ref, struct rt_image_config *out, struct terr *err)
{
	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&fake.mu);
	fake.image_looks++;
	pthread_mutex_unlock(&fake.mu);
	if (!strcmp(ref, "nosuch:latest"))
		return terr_set(err, ENOENT, "No such image: %s", ref);
	snprintf(out->id, sizeof(out->id), "sha256:%.60s", ref);
	f_image_env(rt, ref, &out->env, &out->n_env, err);
	f_image_labels(rt, ref, &out->labels, &out->n_labels, err);
	return 0;
}

static int f_image_list(struct runtime *rt, json_t **images, struct terr *err)
{
	(void)rt;
	(void)err;
	*images = json_array();
	return 0;
}

static int fake_network(const char *name);

static int f_create(struct runtime *rt, const struct rt_container_spec *s, char id[RT_ID_MAX], struct terr *err)
{
	(void)rt;
	if (fake.on_create)
		fake.on_create();
	pthread_mutex_lock(&fake.mu);
	fake.creates++;
	int rc = 0;
	if (!strcmp(s->image, "nosuch:latest")) {
		rc = terr_set(err, ENOENT, "No such image: nosuch:latest");
	} else if (s->network && *s->network && fake_network(s->network) < 0) {
		/* Docker 20.10's answer (404) to a NetworkMode that names none. */
		rc = terr_set(err, ENOENT, "create container: network %s not found", s->network);
	} else if (fake_find(s->name)) {
		rc = terr_set(err, EEXIST, "Conflict. The container name \"/%s\" is already in use", s->name);
	} else if (fake.n == FAKE_MAX) {
		rc = terr_set(err, ENOSPC, "the test runtime is full");
	} else {
		struct fake_container *c = &fake.c[fake.n++];
		memset(c, 0, sizeof(*c));
		snprintf(c->id, sizeof(c->id), "c%04d", ++fake.next_id);
		snprintf(c->name, sizeof(c->name), "%s", s->name);
		snprintf(c->image, sizeof(c->image), "%s", s->image);
		for (size_t i = 0; i < s->n_labels; i++) {
			if (!strcmp(s->labels[i].key, AGENT_LABEL_SESSION))
				snprintf(c->session_id, sizeof(c->session_id), "%s", s->labels[i].value);
			if (!strcmp(s->labels[i].key, AGENT_LABEL_AGENT))
				snprintf(c->agent_id, sizeof(c->agent_id), "%s", s->labels[i].value);
			if (!strcmp(s->labels[i].key, AGENT_LABEL_CLUSTER))
				snprintf(c->cluster_id, sizeof(c->cluster_id), "%s", s->labels[i].value);
			if (!strcmp(s->labels[i].key, AGENT_LABEL_RUN_AS))
				snprintf(c->run_as, sizeof(c->run_as), "%s", s->labels[i].value);
			if (!strcmp(s->labels[i].key, AGENT_LABEL_SANDBOX))
				snprintf(c->sandbox_label, sizeof(c->sandbox_label), "%s", s->labels[i].value);
			if (!strcmp(s->labels[i].key, AGENT_LABEL_SANDBOX_IP))
				snprintf(c->sandbox_ip, sizeof(c->sandbox_ip), "%s", s->labels[i].value);
		}
		snprintf(c->network, sizeof(c->network), "%s", s->network ? s->network : "");
		if (s->netns_of)
			snprintf(c->network, sizeof(c->network), "container:%s", s->netns_of);
		snprintf(c->netns_of, sizeof(c->netns_of), "%s", s->netns_of ? s->netns_of : "");
		for (int i = 0; s->env && s->env[i] && c->n_env < 64; i++)
			snprintf(c->env[c->n_env++], sizeof(c->env[0]), "%s", s->env[i]);
		for (size_t i = 0; i < s->n_mounts && c->n_mounts < 32; i++, c->n_mounts++) {
			snprintf(c->mounts[i].src, sizeof(c->mounts[i].src), "%s", s->mounts[i].source);
			snprintf(c->mounts[i].dst, sizeof(c->mounts[i].dst), "%s", s->mounts[i].target);
			c->mounts[i].ro = s->mounts[i].readonly;
		}
		for (int i = 0; s->devices && s->devices[i] && c->n_devices < 24; i++)
			snprintf(c->devices[c->n_devices++], sizeof(c->devices[0]), "%s", s->devices[i]);
		c->publish_port = s->publish_port;
		snprintf(c->publish_host, sizeof(c->publish_host), "%s", s->publish_host ? s->publish_host : "");
		for (int i = 0; s->entrypoint && s->entrypoint[i] && c->n_entry < 12; i++)
			snprintf(c->entry[c->n_entry++], sizeof(c->entry[0]), "%s", s->entrypoint[i]);
		c->nano_cpus = s->nano_cpus;
		c->memory = s->memory_bytes;
		c->pids_limit = s->pids_limit;
		c->log_max_size = s->log_max_size;
		c->log_max_files = s->log_max_files;
		snprintf(id, RT_ID_MAX, "%s", c->id);
	}
	pthread_mutex_unlock(&fake.mu);
	return rc;
}

static int f_start(struct runtime *rt, const char *id, struct terr *err)
{
	(void)rt;
	pthread_mutex_lock(&fake.mu);
	fake.starts++;
	struct fake_container *c = fake_find(id);
	int rc = 0;
	if (!c)
		rc = terr_set(err, ENOENT, "No such container: %s", id);
	else if (!strcmp(c->image, "broken:latest"))
		rc = terr_set(err, EIO, "OCI runtime create failed: exec: no such file");
	else if (fake.start_fails_once[0]) {
		rc = terr_set(err, fake.start_fail_code, "%s", fake.start_fails_once);
		fake.start_fails_once[0] = '\0';
	}
	else {
		c->running = true;
		c->pid = fake.init_pid;
		/* As Docker with HostPort "": a free port, chosen at start. */
		if (c->publish_port)
			c->host_port = 40000 + fake.next_id;
	}
	pthread_mutex_unlock(&fake.mu);
	return rc;
}

static int f_remove(struct runtime *rt, const char *id, struct terr *err)
{
	(void)rt;
	pthread_mutex_lock(&fake.mu);
	fake.removes++;
	struct fake_container *c = fake_find(id);
	int rc = 0;
	if (!c)
		rc = terr_set(err, ENOENT, "No such container: %s", id);
	else
		*c = fake.c[--fake.n];
	pthread_mutex_unlock(&fake.mu);
	return rc;
}

static int f_kill(struct runtime *rt, const char *id, long timeout_ms, struct terr *err)
{
	(void)rt;
	pthread_mutex_lock(&fake.mu);
	fake.kills++;
	struct fake_container *c = fake_find(id);
	int rc = fake.kill_rc;
	if (!c)
		rc = terr_set(err, ENOENT, "No such container: %s", id);
	else if (rc < 0)
		terr_set(err, -rc, "context deadline exceeded after %ld ms", timeout_ms);
	else
		c->running = false;
	pthread_mutex_unlock(&fake.mu);
	return rc;
}

static void fake_info(const struct fake_container *c, struct rt_container_info *out)
{
	memset(out, 0, sizeof(*out));
	snprintf(out->id, sizeof(out->id), "%s", c->id);
	memcpy(out->name, c->name, sizeof(out->name));
	snprintf(out->image, sizeof(out->image), "%s", c->image);
	snprintf(out->state, sizeof(out->state), "%s", c->running ? "running" : "created");
	out->running = c->running;
	out->pid = c->running ? c->pid : 0;
	snprintf(out->session_id, sizeof(out->session_id), "%s", c->session_id);
	snprintf(out->agent_id, sizeof(out->agent_id), "%s", c->agent_id);
	snprintf(out->cluster_id, sizeof(out->cluster_id), "%s", c->cluster_id);
	snprintf(out->run_as, sizeof(out->run_as), "%s", c->run_as);
	snprintf(out->network, sizeof(out->network), "%s", c->network);
	snprintf(out->sandbox, sizeof(out->sandbox), "%s", c->sandbox_label);
	/* Its address on its network, as Docker's inspect gives it (from
	 * its label when it joined a sandbox). Each container its own. */
	if (c->running && c->netns_of[0])
		snprintf(out->ip, sizeof(out->ip), "%s", c->sandbox_ip);
	else if (c->running)
		snprintf(out->ip, sizeof(out->ip), "172.30.0.2");
	if (c->running && c->host_port) {
		out->published_private = c->publish_port;
		out->published_port = c->host_port;
		snprintf(out->published_host, sizeof(out->published_host), "%s", c->publish_host);
	}
}

static int f_inspect(struct runtime *rt, const char *id, struct rt_container_info *out, struct terr *err)
{
	(void)rt;
	pthread_mutex_lock(&fake.mu);
	fake.inspects++;
	struct fake_container *c = fake_find(id);
	int rc = 0;
	if (c)
		fake_info(c, out);
	else
		rc = terr_set(err, ENOENT, "No such container: %s", id);
	pthread_mutex_unlock(&fake.mu);
	return rc;
}

/* As Docker's list: no init pid. */
static int f_list(struct runtime *rt, const char *key, const char *value, struct rt_container_info **out,
		  size_t *n, struct terr *err)
{
	(void)rt;
	(void)err;
	pthread_mutex_lock(&fake.mu);
	fake.lists++;
	*out = calloc(FAKE_MAX, sizeof(**out));
	*n = 0;
	for (int i = 0; i < fake.n; i++) {
		const struct fake_container *c = &fake.c[i];
		const char *have = !strcmp(key, AGENT_LABEL_AGENT) ? c->agent_id
				   : !strcmp(key, AGENT_LABEL_SESSION) ? c->session_id : "";
		if (strcmp(have, value) != 0)
			continue;
		fake_info(c, &(*out)[*n]);
		(*out)[(*n)++].pid = 0;
	}
	pthread_mutex_unlock(&fake.mu);
	return 0;
}

/* A pump that sends fixed bytes. */
struct fixed_bytes {
	unsigned char data[512];
	size_t len;
};

static int fixed_produce(struct pump *p, void *ud, struct terr *err)
{
	(void)err;
	struct fixed_bytes *f = ud;
	pump_ready(p);
	pump_write(p, f->data, f->len);
	return 0;
}

static void fixed_add(struct fixed_bytes *f, enum frame_type type, const char *text)
{
	size_t n = strlen(text);
	frames_header(f->data + f->len, type, (uint32_t)n);
	memcpy(f->data + f->len + FRAMES_HEADER, text, n);
	f->len += FRAMES_HEADER + n;
}

/* The runner with --timeout: "wrapped:CMD" on stdout, exit 0; or, when
 * fake.old_runner, the usage of a runner without --timeout, exit 2. A
 * command without the runner: "plain:CMD" on stdout, "e\0" on stderr,
 * exit 5. */
static int f_exec(struct runtime *rt, const char *id, const char *const *argv, const char *const *env,
		  const char *user, const char *workdir, struct pump **out, struct terr *err)
{
	(void)rt;
	(void)id;
	(void)env;
	struct fixed_bytes *f = calloc(1, sizeof(*f));
	if (!f)
		return terr_set(err, ENOMEM, "out of memory");
	pthread_mutex_lock(&fake.mu);
	bool old = fake.old_runner;
	fake.execs++;
	snprintf(fake.exec_user, sizeof(fake.exec_user), "%s", user ? user : "(none)");
	snprintf(fake.exec_workdir, sizeof(fake.exec_workdir), "%s", workdir ? workdir : "(none)");
	pthread_mutex_unlock(&fake.mu);
	char text[256];
	int code;
	if (!strcmp(argv[0], AGENT_RUNNER_TARGET) && old) {
		fixed_add(f, FRAME_STDERR, "usage: tessera-runner [--] COMMAND [ARG...]\n");
		code = 2;
	} else if (!strcmp(argv[0], AGENT_RUNNER_TARGET)) {
		snprintf(text, sizeof(text), "wrapped:%s", argv[4]);
		fixed_add(f, FRAME_STDOUT, text);
		code = 0;
	} else {
		snprintf(text, sizeof(text), "plain:%s", argv[0]);
		fixed_add(f, FRAME_STDOUT, text);
		frames_header(f->data + f->len, FRAME_STDERR, 2);
		memcpy(f->data + f->len + FRAMES_HEADER, "e\0", 2);
		f->len += FRAMES_HEADER + 2;
		code = 5;
	}
	frames_exit(f->data + f->len, code);
	f->len += FRAMES_HEADER + 4;
	return pump_start(out, 0, fixed_produce, f, free, err);
}

static int fake_network(const char *name)
{
	for (int i = 0; i < fake.n_networks; i++)
		if (!strcmp(fake.networks[i], name))
			return i;
	return -1;
}

static int f_network_ensure(struct runtime *rt, const struct rt_network_spec *ns, struct terr *err)
{
	(void)rt;
	(void)err;
	pthread_mutex_lock(&fake.mu);
	fake.network_ensures++;
	if (fake_network(ns->name) < 0 && fake.n_networks >= (fake.network_pools ? fake.network_pools : 8)) {
		pthread_mutex_unlock(&fake.mu);
		return terr_set(err, EIO, "create network: could not find an available, non-overlapping IPv4 address "
				"pool among the defaults to assign to the network");
	}
	if (fake_network(ns->name) < 0) {
		int i = fake.n_networks++;
		fake.network_creates++;
		snprintf(fake.networks[i], sizeof(fake.networks[i]), "%s", ns->name);
		fake.network_labels[i][0] = '\0';
		for (size_t k = 0; k < ns->n_labels; k++) {
			size_t used = strlen(fake.network_labels[i]);
			snprintf(fake.network_labels[i] + used, sizeof(fake.network_labels[i]) - used, "%s%s=%s",
				 k ? "," : "", ns->labels[k].key, ns->labels[k].value);
		}
	}
	pthread_mutex_unlock(&fake.mu);
	return 0;
}

/* As Docker: refused while a running container is on it. */
static int f_network_remove(struct runtime *rt, const char *name, struct terr *err)
{
	(void)rt;
	pthread_mutex_lock(&fake.mu);
	int i = fake_network(name), rc = 0;
	for (int k = 0; k < fake.n && i >= 0 && rc == 0; k++)
		if (fake.c[k].running && !strcmp(fake.c[k].network, name))
			rc = terr_set(err, EBUSY, "network %s has active endpoints", name);
	if (i < 0)
		rc = terr_set(err, ENOENT, "network %s not found", name);
	else if (rc == 0) {
		fake.network_removes++;
		memcpy(fake.networks[i], fake.networks[fake.n_networks - 1], sizeof(fake.networks[i]));
		memcpy(fake.network_labels[i], fake.network_labels[fake.n_networks - 1], sizeof(fake.network_labels[i]));
		fake.n_networks--;
	}
	pthread_mutex_unlock(&fake.mu);
	return rc;
}

/* Networks by one label, as Docker's list filtered by it. */
static int f_network_list(struct runtime *rt, const char *key, const char *value, char ***names, size_t *n,
			  struct terr *err)
{
	(void)rt;
	(void)err;
	char want[256];
	snprintf(want, sizeof(want), "%s=%s", key, value);
	pthread_mutex_lock(&fake.mu);
	*names = calloc(fake.n_networks + 1, sizeof(char *));
	*n = 0;
	for (int i = 0; i < fake.n_networks; i++) {
		/* labels are "k=v,k=v": the cluster's is last. */
		const char *l = strstr(fake.network_labels[i], want);
		if (l && (l == fake.network_labels[i] || l[-1] == ',') && !l[strlen(want)])
			(*names)[(*n)++] = strdup(fake.networks[i]);
	}
	pthread_mutex_unlock(&fake.mu);
	return 0;
}

static int f_logs(struct runtime *rt, const char *id, int tail, bool follow, struct pump **out,
		  struct terr *err)
{
	(void)rt;
	(void)id;
	(void)tail;
	(void)follow;
	(void)out;
	return terr_set(err, ENOSYS, "logs are not part of these tests");
}

/* The image calls, recorded in order as lines ("commit c1 ref", "tag a b",
 * "push r", "pull r", "rmi r", "label k=v", "env K=V"). */
static struct {
	pthread_mutex_t mu;
	char lines[64][600];
	int n;
	const char *push_fails;    /* the push's error, NULL: it works */
} img = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void img_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void img_log(const char *fmt, ...)
{
	pthread_mutex_lock(&img.mu);
	if (img.n < 64) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(img.lines[img.n++], sizeof(img.lines[0]), fmt, ap);
		va_end(ap);
	}
	pthread_mutex_unlock(&img.mu);
}

static bool img_has(const char *line)
{
	bool has = false;
	pthread_mutex_lock(&img.mu);
	for (int i = 0; i < img.n; i++)
		has = has || !strcmp(img.lines[i], line);
	pthread_mutex_unlock(&img.mu);
	return has;
}

static int img_index(const char *line)
{
	for (int i = 0; i < img.n; i++)
		if (!strcmp(img.lines[i], line))
			return i;
	return -1;
}

static int f_commit(struct runtime *rt, const char *id, const char *ref, const struct rt_label *labels,
		    size_t n_labels, const char *const *env, struct terr *err)
{
	(void)rt;
	(void)err;
	img_log("commit %s %s", id, ref);
	for (size_t i = 0; i < n_labels; i++)
		img_log("label %s=%s", labels[i].key, labels[i].value);
	for (; env && *env; env++)
		img_log("env %s", *env);
	return 0;
}

/* The source image is a Backend.AI one, with features of its own. */
static int f_image_labels(struct runtime *rt, const char *ref, char ***labels, size_t *n, struct terr *err)
{
	(void)rt;
	(void)err;
	*labels = calloc(3, sizeof(char *));
	(*labels)[0] = strdup("ai.backend.features=batch uid-match");
	(*labels)[1] = strdup("ai.backend.kernelspec=1");
	*n = 2;
	/* Images with apps, one of them declared wrong. */
	if (!strcmp(ref, "apps:latest"))
		(*labels)[(*n)++] = strdup("ai.backend.service-ports=jupyter:http:8081,mlflow-ui:preopen:5000");
	if (!strcmp(ref, "badapps:latest"))
		(*labels)[(*n)++] = strdup("ai.backend.service-ports=jupyter:http:22");
	/* A private image of user u1's, committed earlier. */
	if (!strcmp(ref, "mine:1"))
		(*labels)[(*n)++] = strdup("tessera.owner=u1");
	return 0;
}

static int f_tag(struct runtime *rt, const char *src, const char *dst, struct terr *err)
{
	(void)rt;
	(void)err;
	img_log("tag %s %s", src, dst);
	return 0;
}

static int f_image_remove(struct runtime *rt, const char *ref, struct terr *err)
{
	(void)rt;
	(void)err;
	img_log("rmi %s", ref);
	return 0;
}

static int f_push(struct runtime *rt, const char *ref, rt_progress_cb cb, void *ud, struct terr *err)
{
	(void)rt;
	img_log("push %s", ref);
	if (cb)
		cb(ud, 10, 20);
	return img.push_fails ? terr_set(err, EIO, "%s", img.push_fails) : 0;
}

/* "missing:1" is not in the registry. */
static int f_pull(struct runtime *rt, const char *ref, rt_progress_cb cb, void *ud, struct terr *err)
{
	(void)rt;
	img_log("pull %s", ref);
	if (strstr(ref, "missing:1"))
		return terr_set(err, ENOENT, "pull image %s: manifest unknown", ref);
	cb(ud, 412000000, 980000000);
	cb(ud, 980000000, 980000000);
	return 0;
}

/* Holds the stream open, as Docker's does, until the agent stops; sends
 * the events the test queued (fake_event). */
static int f_watch(struct runtime *rt, const char *key, const char *value, rt_event_cb cb, void *ud,
		   const atomic_bool *stop, struct terr *err)
{
	(void)rt;
	(void)key;
	(void)value;
	(void)err;
	while (!atomic_load_explicit(stop, memory_order_relaxed)) {
		struct rt_event evs[8];
		pthread_mutex_lock(&fake.mu);
		int n = fake.n_events;
		memcpy(evs, fake.events, sizeof(evs));
		fake.n_events = 0;
		pthread_mutex_unlock(&fake.mu);
		for (int i = 0; i < n; i++)
			cb(&evs[i], ud);
		usleep(10 * 1000);
	}
	return 0;
}

/* The images' stream: held open until the agent stops, sending what
 * fake_image_event queued. */
static int f_watch_images(struct runtime *rt, rt_event_cb cb, void *ud, const atomic_bool *stop, struct terr *err)
{
	(void)rt;
	(void)err;
	pthread_mutex_lock(&fake.mu);
	fake.images_live = true;
	pthread_mutex_unlock(&fake.mu);
	while (!atomic_load_explicit(stop, memory_order_relaxed)) {
		struct rt_event evs[8];
		pthread_mutex_lock(&fake.mu);
		int n = fake.n_img_events;
		memcpy(evs, fake.img_events, sizeof(evs));
		fake.n_img_events = 0;
		pthread_mutex_unlock(&fake.mu);
		for (int i = 0; i < n; i++)
			cb(&evs[i], ud);
		pthread_mutex_lock(&fake.mu);
		if (fake.n_img_events == 0)
			fake.img_events_sent = true;
		pthread_mutex_unlock(&fake.mu);
		usleep(5 * 1000);
	}
	return 0;
}

static const struct runtime_ops fake_ops = {
	.name = "test-runtime", .open = f_open, .close = f_close, .version = f_version,
	.image_exists = f_image_exists, .image_env = f_image_env, .image_list = f_image_list,
	.create = f_create, .start = f_start, .remove = f_remove, .kill = f_kill, .inspect = f_inspect,
	.list = f_list, .exec_stream = f_exec, .logs_stream = f_logs, .commit = f_commit, .watch = f_watch,
	.image_labels = f_image_labels, .tag = f_tag, .image_remove = f_image_remove, .push = f_push,
	.pull = f_pull,
	.network_ensure = f_network_ensure, .network_remove = f_network_remove, .network_list = f_network_list,
	.image_config = f_image_config,
};

/* The same runtime with an images' stream, so that the agent keeps what
 * it learns of images (tests that follow it). */
static struct runtime_ops fake_ops_images;

/* ---- helpers ------------------------------------------------------------ */

/* agent_exec_stream run to its end, its output dropped: 0 or the error. */
static int exec_collected(struct agent *a, const char *cid, const char *const *argv, int timeout_s,
			  struct terr *err)
{
	struct pump *p = NULL;
	struct rt_exec_result r;
	int rc = agent_exec_stream(a, cid, argv, timeout_s, &p, err);
	if (rc < 0)
		return rc;
	rc = rt_exec_collect(p, 1024, &r, err);
	pump_close(p);
	rt_exec_result_free(&r);
	return rc;
}


/* A container made by someone else (another installation, or this one
 * before containers carried its id), as Docker would list it. */
static void fake_add(const char *id, const char *session, const char *agent, const char *cluster)
{
	pthread_mutex_lock(&fake.mu);
	struct fake_container *c = &fake.c[fake.n++];
	memset(c, 0, sizeof(*c));
	snprintf(c->id, sizeof(c->id), "%s", id);
	snprintf(c->name, sizeof(c->name), "tessera-%s", session);
	snprintf(c->image, sizeof(c->image), "busybox:latest");
	snprintf(c->session_id, sizeof(c->session_id), "%s", session);
	snprintf(c->agent_id, sizeof(c->agent_id), "%s", agent);
	snprintf(c->cluster_id, sizeof(c->cluster_id), "%s", cluster);
	c->running = true;
	pthread_mutex_unlock(&fake.mu);
}

/* Queues a "die" event of a container for the watcher. */
static void fake_event(const char *cid, const char *session, const char *cluster)
{
	pthread_mutex_lock(&fake.mu);
	struct rt_event *e = &fake.events[fake.n_events++];
	memset(e, 0, sizeof(*e));
	snprintf(e->container_id, sizeof(e->container_id), "%s", cid);
	snprintf(e->action, sizeof(e->action), "die");
	snprintf(e->session_id, sizeof(e->session_id), "%s", session);
	snprintf(e->cluster_id, sizeof(e->cluster_id), "%s", cluster);
	e->exit_code = 1;
	pthread_mutex_unlock(&fake.mu);
}

static char data_dir[64];

static bool exists(const char *fmt, const char *arg)
{
	char path[512];
	snprintf(path, sizeof(path), fmt, data_dir, arg);
	return access(path, F_OK) == 0;
}

static char *slurp(const char *fmt, const char *arg)
{
	char path[512];
	snprintf(path, sizeof(path), fmt, data_dir, arg);
	FILE *f = fopen(path, "r");
	if (!f)
		return NULL;
	static char buf[8192];
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

/* A mock-GPU agent (1 device of 8 GiB) on the test runtime. */
static struct agent *open_mock_agent(void)
{
	struct agent_config cfg = {
		.id = "node-a", .cpu_m = 4000, .mem = 8 * GiB, .data_dir = data_dir,
		.mock_gpus = "1x8GiB:100", .gpu_context_overhead = "0",
		.asset_dir = getenv("TESSERA_TEST_BUILD_ROOT"), .runtime = &fake_ops,
	};
	struct agent *a = NULL;
	struct terr err = {0};
	if (agent_open(&a, &cfg, &err) < 0)
		FAILF("agent_open: %s", err.msg);
	return a;
}

static const char *device_uuid(struct agent *a, int i)
{
	static char uuid[64];
	json_t *d = NULL;
	struct terr err = {0};
	uuid[0] = '\0';
	if (agent_describe(a, &d, &err) == 0)
		snprintf(uuid, sizeof(uuid), "%s",
			 json_string_value(json_object_get(json_array_get(json_object_get(d, "gpus"), i), "uuid")) ?: "");
	json_decref(d);
	return uuid;
}

/* A spec as the manager sends it; gpu_mem 0: no GPU. */
static json_t *spec_for(const char *id, const char *uuid, int64_t gpu_mem, int sm_pct)
{
	json_t *spec = json_pack("{s:s,s:s,s:s,s:s,s:{s:I,s:I,s:I},s:{s:s},s:n}", "id", id, "name", "nb1",
				 "owner", "alice", "image", "busybox:latest", "resources", "cpu_milli",
				 (json_int_t)1500, "mem", (json_int_t)(64 * MiB), "fgpu_milli",
				 (json_int_t)(gpu_mem ? 500 : 0), "env", "A", "1", "startup_command");
	if (gpu_mem) {
		json_t *g = json_pack("{s:i,s:s,s:I,s:I}", "index", 0, "uuid", uuid, "fgpu_milli",
				      (json_int_t)500, "memory_limit", (json_int_t)gpu_mem);
		if (sm_pct)
			json_object_set_new(g, "sm_limit_percent", json_integer(sm_pct));
		json_object_set_new(spec, "gpus", json_pack("[o]", g));
	}
	return spec;
}

static const char *env_of(const struct fake_container *c, const char *name)
{
	size_t n = strlen(name);
	for (int i = 0; i < c->n_env; i++)
		if (!strncmp(c->env[i], name, n) && c->env[i][n] == '=')
			return c->env[i] + n + 1;
	return NULL;
}

static int mount_at(const struct fake_container *c, const char *dst)
{
	for (int i = 0; i < c->n_mounts; i++)
		if (!strcmp(c->mounts[i].dst, dst))
			return i;
	return -1;
}

/* ---- tests -------------------------------------------------------------- */

/* Folder mounts (docs/folders.md): a folder directory directly under a
 * declared storage host is bound where the spec says, read-only when it
 * says; anything else (a path outside every host, the host itself, its
 * trash, a symlink to elsewhere, '..', a system target) is refused and no
 * container is made; without storage_hosts every folder mount is. */
TEST(folder_mounts_only_from_declared_storage_hosts)
{
	fake_reset();
	char host[PATH_MAX], spec_hosts[PATH_MAX + 16], folder[PATH_MAX + 8], link[PATH_MAX + 8], trash[PATH_MAX + 16];
	snprintf(host, sizeof(host), "%s/folders", data_dir);
	snprintf(spec_hosts, sizeof(spec_hosts), "local:%s", host);
	snprintf(folder, sizeof(folder), "%s/f1", host);
	snprintf(link, sizeof(link), "%s/evil", host);
	snprintf(trash, sizeof(trash), "%s/.trash/f2", host);
	CHECK_INT(util_mkdir_p(folder, 0755, NULL), 0);
	CHECK_INT(util_mkdir_p(trash, 0700, NULL), 0);
	CHECK_INT(symlink("/etc", link), 0);
	struct agent_config cfg = {
		.id = "node-a", .cpu_m = 4000, .mem = 8 * GiB, .data_dir = data_dir,
		.asset_dir = getenv("TESSERA_TEST_BUILD_ROOT"), .runtime = &fake_ops, .storage_hosts = spec_hosts,
	};
	struct agent *a = NULL;
	struct terr err = {0};
	if (agent_open(&a, &cfg, &err) < 0) {
		FAILF("agent_open: %s", err.msg);
		return;
	}
	json_t *spec = spec_for("m1", NULL, 0, 0);
	json_object_set_new(spec, "mounts", json_pack("[{s:s,s:s,s:b},{s:s,s:s,s:b}]",
		"source", folder, "target", "/home/work/.local", "readonly", false,
		"source", folder, "target", "/data", "readonly", true));
	char cid[RT_ID_MAX];
	CHECK_INT(agent_start_session(a, spec, cid, NULL, &err), 0);
	json_decref(spec);
	struct fake_container *c = fake_find(cid);
	CHECK(c != NULL);
	if (c) {
		int i = mount_at(c, "/home/work/.local"), j = mount_at(c, "/data");
		CHECK(i >= 0 && j >= 0);
		if (i >= 0 && j >= 0) {
			CHECK_STR(c->mounts[i].src, folder);
			CHECK(!c->mounts[i].ro);
			CHECK(c->mounts[j].ro);
		}
	}
	char outside[PATH_MAX + 8], dotdot[PATH_MAX + 16];
	snprintf(outside, sizeof(outside), "%s", data_dir);
	snprintf(dotdot, sizeof(dotdot), "%s/f1/..", host);
	const char *bad_sources[] = {"/etc", outside, host, trash, link, dotdot, "relative/x", NULL};
	for (int k = 0; bad_sources[k]; k++) {
		spec = spec_for("m2", NULL, 0, 0);
		json_object_set_new(spec, "mounts", json_pack("[{s:s,s:s}]", "source", bad_sources[k], "target", "/data"));
		memset(&err, 0, sizeof(err));
		testlib_checks++;
		if (agent_start_session(a, spec, cid, NULL, &err) == 0)
			FAILF("mount source %s was accepted", bad_sources[k]);
		json_decref(spec);
	}
	spec = spec_for("m3", NULL, 0, 0);
	json_object_set_new(spec, "mounts", json_pack("[{s:s,s:s}]", "source", folder, "target", "/etc/x"));
	CHECK_INT(agent_start_session(a, spec, cid, NULL, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "system directory");
	json_decref(spec);
	agent_close(a);

	/* No storage hosts declared: no folder mounts at all. */
	cfg.storage_hosts = NULL;
	CHECK_INT(agent_open(&a, &cfg, &err), 0);
	spec = spec_for("m4", NULL, 0, 0);
	json_object_set_new(spec, "mounts", json_pack("[{s:s,s:s}]", "source", folder, "target", "/data"));
	CHECK(agent_start_session(a, spec, cid, NULL, &err) < 0);
	CHECK_CONTAINS(err.msg, "storage_hosts");
	json_decref(spec);
	agent_close(a);
}

/* A timed exec runs through the runner; a runner from before --timeout
 * answers with its usage, and the command then runs without it; the
 * bytes pass unchanged either way. */
TEST(exec_streams_through_the_runner_or_without_an_old_one)
{
	fake_reset();
	struct agent *a = open_mock_agent();
	if (!a)
		return;
	/* A container from before sessions had a user: run as its own. */
	fake_add("c1", "s1", "node-a", "");
	static const char *const argv[] = {"sh", "-c", "true", NULL};
	struct pump *p = NULL;
	struct rt_exec_result r;
	struct terr err = {0};
	CHECK_INT(agent_exec_stream(a, "c1", argv, 5, &p, &err), 0);
	CHECK_INT(rt_exec_collect(p, 1024, &r, &err), 0);
	pump_close(p);
	CHECK_STR(r.out, "wrapped:sh");
	CHECK_INT(r.exit_code, 0);
	rt_exec_result_free(&r);

	CHECK_INT(agent_exec_stream(a, "c1", argv, 0, &p, &err), 0);
	CHECK_INT(rt_exec_collect(p, 1024, &r, &err), 0);
	pump_close(p);
	CHECK_STR(r.out, "plain:sh");
	CHECK_INT((int)r.err_len, 2);
	CHECK(r.err && !memcmp(r.err, "e\0", 2));
	CHECK_INT(r.exit_code, 5);
	rt_exec_result_free(&r);

	pthread_mutex_lock(&fake.mu);
	fake.old_runner = true;
	fake.execs = 0;
	pthread_mutex_unlock(&fake.mu);
	CHECK_INT(agent_exec_stream(a, "c1", argv, 5, &p, &err), 0);
	CHECK_INT(rt_exec_collect(p, 1024, &r, &err), 0);
	pump_close(p);
	CHECK_STR(r.out, "plain:sh");
	CHECK_INT((int)r.err_len, 2);   /* the usage is not shown */
	CHECK_INT(r.exit_code, 5);
	rt_exec_result_free(&r);
	pthread_mutex_lock(&fake.mu);
	CHECK_INT(fake.execs, 2);
	fake.old_runner = false;
	pthread_mutex_unlock(&fake.mu);
	agent_close(a);
}

/* The log cap of the agent's settings reaches every container. */
TEST(containers_get_the_log_cap)
{
	fake_reset();
	struct agent_config cfg = {
		.id = "node-a", .cpu_m = 4000, .mem = 8 * GiB, .data_dir = data_dir,
		.asset_dir = getenv("TESSERA_TEST_BUILD_ROOT"), .runtime = &fake_ops,
		.log_max_size = 100 * MiB, .log_max_files = 4,
	};
	struct agent *a = NULL;
	struct terr err = {0};
	if (agent_open(&a, &cfg, &err) < 0) {
		FAILF("agent_open: %s", err.msg);
		return;
	}
	json_t *spec = spec_for("s9", NULL, 0, 0);
	char cid[RT_ID_MAX];
	CHECK_INT(agent_start_session(a, spec, cid, NULL, &err), 0);
	json_decref(spec);
	struct fake_container *c = fake_find(cid);
	CHECK(c != NULL);
	if (c) {
		CHECK_INT(c->log_max_size, 100 * MiB);
		CHECK_INT(c->log_max_files, 4);
	}
	agent_close(a);
}

/* The pids limit (issue 27: a fork bomb under a flat 4096 wedged a
 * small node): auto gives a session AGENT_PIDS_PER_CPU per core of its
 * own, at least AGENT_PIDS_MIN, and one without a CPU limit what the
 * node's cores give; a number in agent.conf is every session's. */
TEST(the_pids_limit_fits_the_session_and_the_node)
{
	CHECK_INT(agent_pids_limit(0, 1500, 4000), 768);
	CHECK_INT(agent_pids_limit(0, 500, 2000), 256);
	CHECK_INT(agent_pids_limit(0, 10, 2000), AGENT_PIDS_MIN);
	CHECK_INT(agent_pids_limit(0, 1001, 2000), 513);   /* a part of a core rounds up */
	CHECK_INT(agent_pids_limit(0, 0, 2000), 1024);     /* no CPU limit: the node's two cores */
	CHECK_INT(agent_pids_limit(0, 64000, 64000), 32768);
	CHECK_INT(agent_pids_limit(0, INT64_MAX / 1000000, 2000), AGENT_PIDS_LIMIT_MAX);
	CHECK_INT(agent_pids_limit(64, 1500, 4000), 64);
	CHECK_INT(agent_pids_limit(100000, 10, 2000), 100000);

	for (int fixed = 0; fixed < 2; fixed++) {
		fake_reset();
		struct agent_config cfg = {
			.id = "node-a", .cpu_m = 2000, .mem = 8 * GiB, .data_dir = data_dir,
			.asset_dir = getenv("TESSERA_TEST_BUILD_ROOT"), .runtime = &fake_ops,
			.pids_limit = fixed ? 64 : 0,
		};
		struct agent *a = NULL;
		struct terr err = {0};
		if (agent_open(&a, &cfg, &err) < 0) {
			FAILF("agent_open: %s", err.msg);
			return;
		}
		json_t *spec = spec_for("s10", NULL, 0, 0);   /* 1.5 cores */
		char cid[RT_ID_MAX];
		CHECK_INT(agent_start_session(a, spec, cid, NULL, &err), 0);
		json_decref(spec);
		struct fake_container *c = fake_find(cid);
		CHECK(c != NULL);
		if (c)
			CHECK_INT(c->pids_limit, fixed ? 64 : 768);
		agent_close(a);
	}
}

/* A container whose runner was ended by a signal says so (issue 27: one
 * killed from outside said "ended by itself"); a SIGKILL, which nothing
 * inside a session can send its PID 1, came from outside. */
TEST(a_signal_death_is_told_as_a_kill)
{
	char w[160];
	CHECK(agent_signal_words(137, w, sizeof(w)));
	CHECK_STR(w, "killed by SIGKILL from outside the session (docker kill or kill -9 on its node)");
	CHECK(agent_signal_words(139, w, sizeof(w)));
	CHECK_STR(w, "killed by SIGSEGV (signal 11)");
	CHECK(agent_signal_words(128 + 64, w, sizeof(w)));
	CHECK(!agent_signal_words(0, w, sizeof(w)));
	CHECK(!agent_signal_words(1, w, sizeof(w)));
	CHECK(!agent_signal_words(127, w, sizeof(w)));
	CHECK(!agent_signal_words(128, w, sizeof(w)));
	CHECK(!agent_signal_words(128 + 65, w, sizeof(w)));
	CHECK(!agent_signal_words(255, w, sizeof(w)));
	CHECK(!agent_signal_words(-1, w, sizeof(w)));
}

/* Removal (issue 27): a running container is killed through the runtime
 * before it is removed; when the runtime does not stop it in time, the
 * agent goes for its cgroups, here those of the fake container's "init",
 * which is this test process: they are the test's own (or the host's
 * roots), which the agent never kills, so the test lives on, nothing is
 * counted as killed, and the container is removed all the same. A
 * container that does not run is not killed first. */
TEST(a_removal_kills_first_and_never_its_own_cgroup)
{
	fake_reset();
	struct agent *a = open_mock_agent();
	if (!a)
		return;
	json_t *spec = spec_for("k1", NULL, 0, 0);
	char cid[RT_ID_MAX];
	struct terr err = {0};
	CHECK_INT(agent_start_session(a, spec, cid, NULL, &err), 0);
	CHECK_INT(agent_destroy_session(a, "k1", cid, &err), 0);
	CHECK_INT(fake.kills, 1);
	CHECK(fake_find(cid) == NULL);

	fake.kill_rc = -ETIMEDOUT;
	CHECK_INT(agent_start_session(a, spec, cid, NULL, &err), 0);
	CHECK_INT(agent_destroy_session(a, "k1", cid, &err), 0);
	CHECK_INT(fake.kills, 2);
	CHECK(fake_find(cid) == NULL);
	int64_t kills = -1, failures = -1;
	agent_cgroup_kill_counts(a, &kills, &failures);
	CHECK_INT(kills, 0);
	CHECK_INT(failures, 0);

	/* Found by label (no container id recorded): the same. */
	CHECK_INT(agent_start_session(a, spec, cid, NULL, &err), 0);
	CHECK_INT(agent_destroy_session(a, "k1", NULL, &err), 0);
	CHECK_INT(fake.kills, 3);
	CHECK(fake_find(cid) == NULL);

	/* Made but not running: removed without a kill. */
	fake_add("c-stopped", "k2", "node-a", "");
	fake_find("c-stopped")->running = false;
	CHECK_INT(agent_destroy_session(a, "k2", "c-stopped", &err), 0);
	CHECK_INT(fake.kills, 3);
	CHECK(fake_find("c-stopped") == NULL);
	json_decref(spec);
	agent_close(a);
}

/* Session apps (docs/apps.md): with the manager's app secret, the
 * secret in a 0400 file mounted read-only, only the app port published,
 * on app_host, where it was published read back and listed, and the
 * image's service ports given to the runner. Without one (an older
 * manager), none of it. */
TEST(a_session_gets_its_app_port_and_secret)
{
	fake_reset();
	struct agent_config cfg = {
		.id = "node-a", .cpu_m = 4000, .mem = 8 * GiB, .data_dir = data_dir,
		.asset_dir = getenv("TESSERA_TEST_BUILD_ROOT"), .runtime = &fake_ops, .app_host = "10.1.2.3",
	};
	struct agent *a = NULL;
	struct terr err = {0};
	if (agent_open(&a, &cfg, &err) < 0) {
		FAILF("agent_open: %s", err.msg);
		return;
	}
	static const char secret[] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
	json_t *spec = spec_for("sapps", NULL, 0, 0);
	json_object_set_new(spec, "image", json_string("apps:latest"));
	json_object_set_new(spec, "app_secret", json_string(secret));
	char cid[RT_ID_MAX], ep[AGENT_APP_ENDPOINT_MAX];
	CHECK_INT(agent_start_session(a, spec, cid, ep, &err), 0);
	struct fake_container *c = fake_find(cid);
	CHECK(c != NULL);
	if (c) {
		CHECK_INT(c->publish_port, AGENT_APP_PORT);
		CHECK_STR(c->publish_host, "10.1.2.3");
		/* Published on app_host, then the direct path, for a proxy in
		 * this network namespace (docs/apps.md). */
		char want[128], key[UTIL_NETNS_KEY_LEN + 1];
		util_netns_key(key);
		snprintf(want, sizeof(want), "10.1.2.3:%d,172.30.0.2:%d@%s", c->host_port, AGENT_APP_PORT, key);
		CHECK_STR(ep, want);
		int m = mount_at(c, AGENT_APP_SECRET_PATH);
		CHECK(m >= 0);
		if (m >= 0) {
			CHECK(c->mounts[m].ro);
			struct stat st;
			CHECK_INT(stat(c->mounts[m].src, &st), 0);
			CHECK_INT((int)(st.st_mode & 0777), 0400);
			CHECK_INT((int)st.st_uid, (int)geteuid());
			char got[100] = "";
			FILE *f = fopen(c->mounts[m].src, "r");
			if (f) {
				CHECK(fgets(got, sizeof(got), f) != NULL);
				fclose(f);
			}
			CHECK_STR(got, secret);
		}
		CHECK_INT(c->n_entry, 5);
		CHECK_STR(c->entry[3], "--apps");
		CHECK_STR(c->entry[4], "jupyter:http:8081,mlflow-ui:preopen:5000");
	}
	/* Listed with its endpoint (what the manager adopts after a restart). */
	json_t *list = NULL;
	CHECK_INT(agent_list_containers(a, &list, &err), 0);
	CHECK_STR(json_string_value(json_object_get(json_array_get(list, 0), "app_endpoint")), ep);
	json_decref(list);
	/* Started again (an interrupted start): the secret file is made anew. */
	CHECK_INT(agent_start_session(a, spec, cid, ep, &err), 0);
	json_decref(spec);

	/* A label that does not parse: no --apps, the session still starts. */
	spec = spec_for("sbad", NULL, 0, 0);
	json_object_set_new(spec, "image", json_string("badapps:latest"));
	json_object_set_new(spec, "app_secret", json_string(secret));
	json_object_set_new(spec, "startup_command", json_string("sleep 1"));
	CHECK_INT(agent_start_session(a, spec, cid, ep, &err), 0);
	c = fake_find(cid);
	if (c) {
		CHECK_INT(c->n_entry, 7);
		CHECK_STR(c->entry[3], "--");
		CHECK(ep[0] != '\0');
	}
	json_decref(spec);

	/* No secret: nothing published, nothing mounted, no endpoint. */
	spec = spec_for("sold", NULL, 0, 0);
	json_object_set_new(spec, "image", json_string("apps:latest"));
	CHECK_INT(agent_start_session(a, spec, cid, ep, &err), 0);
	c = fake_find(cid);
	if (c) {
		CHECK_INT(c->publish_port, 0);
		CHECK(mount_at(c, AGENT_APP_SECRET_PATH) < 0);
		CHECK_INT(c->n_entry, 3);
	}
	CHECK_STR(ep, "");
	/* A secret that is not 64 lower-case hex is refused. */
	json_object_set_new(spec, "app_secret", json_string("ABC"));
	err = (struct terr){0};
	CHECK_INT(agent_start_session(a, spec, cid, ep, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "app_secret");
	json_decref(spec);
	agent_close(a);

	/* app_publish no: nothing published; the endpoint is the direct
	 * path alone, which only a proxy on this node can use. */
	cfg.app_publish = "no";
	CHECK_INT(agent_open(&a, &cfg, &err), 0);
	spec = spec_for("sdirect", NULL, 0, 0);
	json_object_set_new(spec, "image", json_string("apps:latest"));
	json_object_set_new(spec, "app_secret", json_string(secret));
	CHECK_INT(agent_start_session(a, spec, cid, ep, &err), 0);
	c = fake_find(cid);
	if (c)
		CHECK_INT(c->publish_port, 0);
	char want_direct[128], key[UTIL_NETNS_KEY_LEN + 1];
	util_netns_key(key);
	snprintf(want_direct, sizeof(want_direct), ",172.30.0.2:%d@%s", AGENT_APP_PORT, key);
	CHECK_STR(ep, want_direct);
	json_decref(spec);
	agent_close(a);
	cfg.app_publish = "maybe";
	err = (struct terr){0};
	CHECK_INT(agent_open(&a, &cfg, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "app_publish must be \"yes\" or \"no\"");
	cfg.app_publish = NULL;

	/* app_host must be an IP address. */
	cfg.app_host = "node1.example.org";
	err = (struct terr){0};
	CHECK_INT(agent_open(&a, &cfg, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "app_host must be an IP address");
}

/* A removal that comes while the session's start is under way, before
 * its container is made (a manager that restarted, forgot the start and
 * was then told to remove the session): the agent lists the start as
 * "starting", the removal succeeds, and the start removes the container
 * it made. */
static struct agent *mid_agent;
static json_t *mid_list;
static int mid_destroy_rc = 1;
static void removal_mid_start(void)
{
	struct terr err = {0};
	json_decref(mid_list);
	mid_list = NULL;
	agent_list_containers(mid_agent, &mid_list, &err);
	mid_destroy_rc = agent_destroy_session(mid_agent, "smid", NULL, &err);
}

TEST(a_removal_during_a_start_leaves_no_container)
{
	fake_reset();
	struct agent_config cfg = {
		.id = "node-a", .cpu_m = 4000, .mem = 8 * GiB, .data_dir = data_dir,
		.asset_dir = getenv("TESSERA_TEST_BUILD_ROOT"), .runtime = &fake_ops,
	};
	struct terr err = {0};
	if (agent_open(&mid_agent, &cfg, &err) < 0) {
		FAILF("agent_open: %s", err.msg);
		return;
	}
	fake.on_create = removal_mid_start;
	json_t *spec = spec_for("smid", NULL, 0, 0);
	char cid[RT_ID_MAX];
	err = (struct terr){0};
	CHECK_INT(agent_start_session(mid_agent, spec, cid, NULL, &err), -ECANCELED);
	CHECK_CONTAINS(err.msg, "removed while it started");
	fake.on_create = NULL;
	json_decref(spec);
	CHECK_INT(mid_destroy_rc, 0);
	/* Listed while it started, before its container was made, as
	 * "starting", so that the manager's reconciliation sees it. */
	bool starting = false;
	size_t i;
	json_t *c;
	json_array_foreach(mid_list, i, c)
		starting = starting || (!strcmp(json_string_value(json_object_get(c, "session_id")) ?: "", "smid") &&
					json_is_true(json_object_get(c, "starting")));
	CHECK(starting);
	json_decref(mid_list);
	mid_list = NULL;
	/* Nothing of it is left, and the agent lists nothing. */
	pthread_mutex_lock(&fake.mu);
	CHECK_INT(fake.n, 0);
	pthread_mutex_unlock(&fake.mu);
	json_t *list = NULL;
	CHECK_INT(agent_list_containers(mid_agent, &list, &err), 0);
	CHECK_INT((int)json_array_size(list), 0);
	json_decref(list);
	agent_close(mid_agent);
}

TEST(describes_its_node_and_mock_gpus)
{
	fake_reset();
	struct agent *a = open_mock_agent();
	if (!a)
		return;
	json_t *d = NULL;
	struct terr err = {0};
	CHECK_INT(agent_describe(a, &d, &err), 0);
	CHECK_STR(json_string_value(json_object_get(d, "id")), "node-a");
	CHECK_STR(json_string_value(json_object_get(d, "runtime")), "test-runtime 0.1-test (API 1.41)");
	CHECK(json_is_true(json_object_get(d, "mock_gpus")));
	json_t *cap = json_object_get(d, "capacity");
	CHECK_INT(json_integer_value(json_object_get(cap, "cpu_milli")), 4000);
	CHECK_INT(json_integer_value(json_object_get(cap, "mem")), 8 * GiB);
	json_t *gpus = json_object_get(d, "gpus");
	CHECK_INT(json_array_size(gpus), 1);
	CHECK_INT(json_integer_value(json_object_get(json_array_get(gpus, 0), "memory")), 8 * GiB);
	CHECK_INT(json_integer_value(json_object_get(json_array_get(gpus, 0), "sms")), 100);
	CHECK_INT(json_array_size(json_object_get(d, "containers")), 0);
	json_decref(d);
	agent_close(a);
}

TEST(a_gpu_session_gets_its_share_and_the_fgpu_files)
{
	fake_reset();
	struct agent *a = open_mock_agent();
	if (!a)
		return;
	const char *uuid = device_uuid(a, 0);
	char uuid_copy[64];
	snprintf(uuid_copy, sizeof(uuid_copy), "%s", uuid);
	json_t *spec = spec_for("s1", uuid_copy, 2 * GiB, 25);
	char cid[RT_ID_MAX];
	struct terr err = {0};
	CHECK_INT(agent_start_session(a, spec, cid, NULL, &err), 0);
	json_decref(spec);
	struct fake_container *c = fake_find(cid);
	CHECK(c && c->running);
	if (!c) {
		agent_close(a);
		return;
	}
	CHECK_STR(c->name, "tessera-nb1-s1");
	CHECK_STR(c->session_id, "s1");
	CHECK_STR(c->agent_id, "node-a");
	CHECK_INT(c->nano_cpus, 1500000000LL);
	CHECK_INT(c->memory, 64 * MiB);
	/* pids_limit auto: 512 per core of the session's 1.5. */
	CHECK_INT(c->pids_limit, 768);
	/* The runner, told to drop to the work user (no startup command). */
	CHECK_STR(c->entry[0], AGENT_RUNNER_TARGET);
	CHECK_INT(c->n_entry, 3);
	CHECK_STR(c->entry[1], "--user");
	CHECK_STR(c->entry[2], AGENT_WORK_UID_GID);

	/* The user's variables, the session's, the image's PATH with the
	 * platform's tools after it, and the share. */
	CHECK_STR(env_of(c, "A"), "1");
	CHECK_STR(env_of(c, "TESSERA_SESSION_ID"), "s1");
	CHECK_STR(env_of(c, "PATH"), "/image/bin:/bin:" FGPU_BIN_DIR);
	CHECK_STR(env_of(c, "CUDA_VISIBLE_DEVICES"), uuid_copy);
	CHECK_STR(env_of(c, FGPU_ENV_MEMORY_LIMIT), "2147483648");
	CHECK_STR(env_of(c, FGPU_ENV_SM_LIMIT), "25");
	CHECK_STR(env_of(c, FGPU_ENV_FGPU), "0.5");

	/* The contract's mounts: limits and preload read-only, the region's
	 * directory writable, the library, the node's GPU turns and the mock
	 * driver read-only. */
	static const struct { const char *dst; bool ro; } want[] = {
		{AGENT_RUNNER_TARGET, true}, {FGPU_GPU_INFO_PATH, true}, {FGPU_CONF_PATH, true},
		{FGPU_PRELOAD_PATH, true}, {FGPU_LIB_PATH, true}, {FGPU_RUN_DIR, false},
		{FGPU_MOCK_SPEC_PATH, true}, {FGPU_MOCK_CUDA_PATH, true}, {FGPU_MOCK_NVML_PATH, true},
		{FGPU_MOCK_STATE_DIR, false}, {FGPU_TURN_DIR, true},
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		int m = mount_at(c, want[i].dst);
		if (m < 0) {
			FAILF("no mount at %s", want[i].dst);
			continue;
		}
		CHECK_INT(c->mounts[m].ro, want[i].ro);
		CHECK(access(c->mounts[m].src, F_OK) == 0);
	}
	/* Mock devices have no device nodes. */
	CHECK_INT(c->n_devices, 0);

	/* The limits file the library reads, whatever the environment says. */
	char *text = slurp("%s/sessions/%s/fgpu.conf", "s1");
	struct fgpu_conf conf;
	CHECK(text && fgpu_conf_parse(text, &conf, &err) == 0);
	if (text) {
		CHECK_INT(conf.ndev, 1);
		CHECK_STR(conf.dev[0].uuid, uuid_copy);
		CHECK_INT(conf.dev[0].memory_limit, 2 * GiB);
		CHECK_INT(conf.dev[0].sm_limit_percent, 25);
	}
	CHECK_STR(slurp("%s/sessions/%s/ld.so.preload", "s1"), FGPU_LIB_PATH "\n");
	/* The mock driver in the container sees only the session's device. */
	char want_visible[128];
	snprintf(want_visible, sizeof(want_visible), "visible = %s\n", uuid_copy);
	CHECK_CONTAINS(slurp("%s/sessions/%s/mock-gpus", "s1"), want_visible);
	struct stat st;
	char run[256];
	snprintf(run, sizeof(run), "%s/sessions/s1/run", data_dir);
	CHECK(stat(run, &st) == 0 && (st.st_mode & 07777) == 01777);
	/* The GPU's two turn files, in the node's directory every session
	 * mounts (not the session's own). */
	int tm = mount_at(c, FGPU_TURN_DIR);
	if (tm >= 0) {
		char turn[4300];
		snprintf(turn, sizeof(turn), "%s/%s", c->mounts[tm].src, uuid_copy);
		CHECK(stat(turn, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 0);
		snprintf(turn, sizeof(turn), "%s/%s" FGPU_TURN_WAIT_SUFFIX, c->mounts[tm].src, uuid_copy);
		CHECK(stat(turn, &st) == 0 && S_ISREG(st.st_mode));
		CHECK(strstr(c->mounts[tm].src, "/sessions/") == NULL);
	}

	json_t *list = NULL;
	CHECK_INT(agent_list_containers(a, &list, &err), 0);
	CHECK_INT(json_array_size(list), 1);
	CHECK_STR(json_string_value(json_object_get(json_array_get(list, 0), "session_id")), "s1");
	CHECK(json_is_true(json_object_get(json_array_get(list, 0), "running")));
	json_decref(list);

	/* Removal takes the container and the session's files. */
	CHECK_INT(agent_destroy_session(a, "s1", cid, &err), 0);
	CHECK(!fake_find(cid));
	CHECK(!exists("%s/sessions/%s", "s1"));
	/* Absent is success. */
	CHECK_INT(agent_destroy_session(a, "s1", cid, &err), 0);
	agent_close(a);
}

TEST(a_share_without_a_compute_limit_gets_the_whole_device)
{
	fake_reset();
	struct agent *a = open_mock_agent();
	if (!a)
		return;
	char uuid[64];
	snprintf(uuid, sizeof(uuid), "%s", device_uuid(a, 0));
	json_t *spec = spec_for("s2", uuid, 1 * GiB, 0);
	char cid[RT_ID_MAX];
	struct terr err = {0};
	CHECK_INT(agent_start_session(a, spec, cid, NULL, &err), 0);
	json_decref(spec);
	struct fake_container *c = fake_find(cid);
	CHECK(c && env_of(c, FGPU_ENV_SM_LIMIT) && !strcmp(env_of(c, FGPU_ENV_SM_LIMIT), "100"));
	char *text = slurp("%s/sessions/%s/fgpu.conf", "s2");
	struct fgpu_conf conf;
	CHECK(text && fgpu_conf_parse(text, &conf, &err) == 0);
	if (text) {
		CHECK_INT(conf.dev[0].sm_limit_percent, 100);
		CHECK_INT(conf.sm_limit_percent, 100);
	}
	CHECK_INT(agent_destroy_session(a, "s2", NULL, &err), 0);
	CHECK(!fake_find(cid));
	CHECK(!exists("%s/sessions/%s", "s2"));
	agent_close(a);
}

TEST(a_cpu_session_has_no_gpu_parts)
{
	fake_reset();
	struct agent *a = open_mock_agent();
	if (!a)
		return;
	json_t *spec = spec_for("s3", NULL, 0, 0);
	json_object_set_new(spec, "startup_command", json_string("echo hi"));
	char cid[RT_ID_MAX];
	struct terr err = {0};
	CHECK_INT(agent_start_session(a, spec, cid, NULL, &err), 0);
	json_decref(spec);
	struct fake_container *c = fake_find(cid);
	CHECK(c != NULL);
	if (c) {
		CHECK(mount_at(c, FGPU_PRELOAD_PATH) < 0);
		CHECK(mount_at(c, FGPU_CONF_PATH) < 0);
		CHECK(env_of(c, FGPU_ENV_MEMORY_LIMIT) == NULL);
		CHECK(env_of(c, "CUDA_VISIBLE_DEVICES") == NULL);
		/* The startup command runs under the runner, as the work user. */
		CHECK_INT(c->n_entry, 7);
		CHECK_STR(c->entry[1], "--user");
		CHECK_STR(c->entry[2], AGENT_WORK_UID_GID);
		CHECK_STR(c->entry[3], "--");
		CHECK_STR(c->entry[6], "echo hi");
	}
	CHECK(!exists("%s/sessions/%s", "s3"));
	agent_close(a);
}

/* Each spec is refused with a message naming what is wrong, and nothing
 * is created: no container, no session directory. */
TEST(bad_specs_are_refused_before_anything_is_made)
{
	fake_reset();
	struct agent *a = open_mock_agent();
	if (!a)
		return;
	char uuid[64];
	snprintf(uuid, sizeof(uuid), "%s", device_uuid(a, 0));
	static const struct { const char *what, *patch, *msg; } cases[] = {
		{"no image", "{\"image\":null}", "needs id, name, image and resources"},
		{"a path as id", "{\"id\":\"../../etc\"}", "session id '../../etc' must start with a letter or digit"},
		{"an id too long",
		 "{\"id\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}", "session id must be 1 to 63 characters (got 64)"},
		{"a name with a space", "{\"name\":\"my nb\"}", "session name 'my nb' may contain only"},
		{"an empty image", "{\"image\":\"\"}", "image must be 1 to 255"},
		{"negative memory", "{\"resources\":{\"cpu_milli\":1000,\"mem\":-1}}", "resources.mem must be"},
		{"cpu as a string", "{\"resources\":{\"cpu_milli\":\"1\",\"mem\":1}}", "resources.cpu_milli must be"},
		{"huge cpu", "{\"resources\":{\"cpu_milli\":9223372036854775807}}", "cpu_milli is too large"},
		{"env not an object", "{\"env\":[\"A=1\"]}", "env must be an object"},
		{"env value a number", "{\"env\":{\"A\":1}}", "env variable 'A' needs"},
		{"env name with =", "{\"env\":{\"A=B\":\"1\"}}", "env variable 'A=B' needs"},
		{"startup_command a number", "{\"startup_command\":5}", "must be strings"},
		{"an owner id that is a path", "{\"owner_id\":\"../x\"}", "owner_id must be a user id"},
		{"an owner id that is a number", "{\"owner_id\":5}", "owner_id must be a user id"},
		{"root as a string", "{\"root\":\"yes\"}", "root must be true or false"},
		{"gpus not an array", "{\"gpus\":{}}", "gpus must be an array"},
		{"an unknown device", "{\"gpus\":[{\"uuid\":\"GPU-nope\",\"memory_limit\":1}]}",
		 "device GPU-nope is not on node node-a"},
		{"a device without uuid", "{\"gpus\":[{\"memory_limit\":1}]}", "device (no uuid) is not on node"},
		{"more devices than the node", "{\"gpus\":[{\"uuid\":\"@\",\"memory_limit\":1},{\"uuid\":\"@\",\"memory_limit\":1}]}",
		 "asks for 2 GPUs; node node-a has 1"},
		{"no memory limit", "{\"gpus\":[{\"uuid\":\"@\"}]}", "gpus[0].memory_limit must be 1 to 8589934592"},
		{"a limit beyond the device", "{\"gpus\":[{\"uuid\":\"@\",\"memory_limit\":8589934593}]}",
		 "memory_limit must be"},
		{"an SM limit of 0", "{\"gpus\":[{\"uuid\":\"@\",\"memory_limit\":1,\"sm_limit_percent\":0}]}",
		 "sm_limit_percent must be an integer from 1 to 100"},
		{"an SM limit of 101", "{\"gpus\":[{\"uuid\":\"@\",\"memory_limit\":1,\"sm_limit_percent\":101}]}",
		 "sm_limit_percent must be"},
		{"gpus without fgpu", "{\"resources\":{\"cpu_milli\":1},\"gpus\":[{\"uuid\":\"@\",\"memory_limit\":1}]}",
		 "needs resources.fgpu_milli above 0"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_t *spec = spec_for("bad1", NULL, 0, 0);
		json_object_set_new(json_object_get(spec, "resources"), "fgpu_milli", json_integer(500));
		/* "@" stands for the node's device. */
		char patch[1024], *at;
		snprintf(patch, sizeof(patch), "%s", cases[i].patch);
		while ((at = strchr(patch, '@'))) {
			char rest[1024];
			snprintf(rest, sizeof(rest), "%s", at + 1);
			snprintf(at, sizeof(patch) - (size_t)(at - patch), "%s%s", uuid, rest);
		}
		json_error_t jerr;
		json_t *p = json_loads(patch, 0, &jerr);
		if (!p) {
			FAILF("%s: bad patch: %s", cases[i].what, jerr.text);
			json_decref(spec);
			continue;
		}
		json_object_update(spec, p);
		json_decref(p);
		char cid[RT_ID_MAX];
		struct terr err = {0};
		int rc = agent_start_session(a, spec, cid, NULL, &err);
		json_decref(spec);
		if (rc != -EINVAL || !strstr(err.msg, cases[i].msg))
			FAILF("%s: rc %d, message \"%s\"; expected -EINVAL and \"%s\"", cases[i].what, rc, err.msg,
			      cases[i].msg);
		testlib_checks++;
	}
	CHECK_INT(fake.creates, 0);
	CHECK(!exists("%s/sessions/%s", "bad1"));
	/* A GPU session on a node without GPUs is refused too: NVML (the
	 * mock's, without devices) finds none. */
	struct agent_config cfg = {.id = "cpu-node", .cpu_m = 1000, .mem = GiB, .data_dir = data_dir,
				   .asset_dir = getenv("TESSERA_TEST_BUILD_ROOT"), .runtime = &fake_ops,
				   .nvml_lib_dir = getenv("TESSERA_TEST_MOCK_LIB_DIR")};
	struct agent *cpu = NULL;
	struct terr err = {0};
	char *spec_env = strdup(getenv("TESSERA_MOCK_GPUS") ?: "");
	unsetenv("TESSERA_MOCK_GPUS");
	CHECK_INT(agent_open(&cpu, &cfg, &err), 0);
	setenv("TESSERA_MOCK_GPUS", spec_env, 1);
	free(spec_env);
	if (cpu) {
		json_t *spec = spec_for("gpu-on-cpu", uuid, GiB, 50);
		char cid[RT_ID_MAX];
		CHECK_INT(agent_start_session(cpu, spec, cid, NULL, &err), -EINVAL);
		CHECK_CONTAINS(err.msg, "node cpu-node has 0");
		json_decref(spec);
		agent_close(cpu);
	}
	CHECK_INT(fake.creates, 0);
	agent_close(a);
}

/* The manager died mid-start: the container of the first attempt is
 * still there under the session's name. */
TEST(a_leftover_container_of_the_session_is_replaced)
{
	fake_reset();
	struct agent *a = open_mock_agent();
	if (!a)
		return;
	json_t *spec = spec_for("s4", NULL, 0, 0);
	char first[RT_ID_MAX], second[RT_ID_MAX];
	struct terr err = {0};
	CHECK_INT(agent_start_session(a, spec, first, NULL, &err), 0);
	CHECK_INT(agent_start_session(a, spec, second, NULL, &err), 0);
	json_decref(spec);
	CHECK(strcmp(first, second) != 0);
	CHECK(!fake_find(first));
	CHECK(fake_find(second) != NULL);
	CHECK_INT(fake.n, 1);
	CHECK_INT(agent_destroy_session(a, "s4", second, &err), 0);
	agent_close(a);
}

TEST(a_container_that_cannot_start_is_removed)
{
	fake_reset();
	struct agent *a = open_mock_agent();
	if (!a)
		return;
	json_t *spec = spec_for("s5", NULL, 0, 0);
	json_object_set_new(spec, "image", json_string("broken:latest"));
	char cid[RT_ID_MAX];
	struct terr err = {0};
	CHECK(agent_start_session(a, spec, cid, NULL, &err) < 0);
	CHECK_CONTAINS(err.msg, "OCI runtime create failed");
	CHECK_INT(fake.creates, 1);
	CHECK_INT(fake.n, 0);
	/* An image that does not exist: the runtime's message comes through. */
	json_object_set_new(spec, "image", json_string("nosuch:latest"));
	CHECK_INT(agent_start_session(a, spec, cid, NULL, &err), -ENOENT);
	CHECK_CONTAINS(err.msg, "No such image");
	CHECK_INT(fake.n, 0);
	json_decref(spec);
	agent_close(a);
}

/* ---- the usage thread on the real-driver path --------------------------- */

static pid_t sleeper(void)
{
	pid_t p = fork();
	if (p == 0) {
		for (;;)
			pause();
	}
	return p;
}

/* Waits (up to a minute: a loaded machine is slow, never wrong) until
 * the usage thread has listed the containers `rounds` more times. */
static bool wait_rounds(int rounds)
{
	pthread_mutex_lock(&fake.mu);
	int until = fake.lists + rounds;
	pthread_mutex_unlock(&fake.mu);
	for (int i = 0; i < 6000; i++) {
		pthread_mutex_lock(&fake.mu);
		int now = fake.lists;
		pthread_mutex_unlock(&fake.mu);
		if (now >= until)
			return true;
		usleep(10 * 1000);
	}
	return false;
}

static int inspects(void)
{
	pthread_mutex_lock(&fake.mu);
	int n = fake.inspects;
	pthread_mutex_unlock(&fake.mu);
	return n;
}

static void on_event(void *ud, const char *agent_id, json_t *event)
{
	(void)ud;
	(void)agent_id;
	(void)event;
}

/* Docker's list has no pids, so the agent inspects a GPU session's
 * container for its init: once per start of that init, not every round. */
TEST(the_usage_thread_inspects_a_container_once_per_start_of_its_init)
{
	fake_reset();
	const char *lib = getenv("TESSERA_TEST_MOCK_LIB_DIR");
	struct agent_config cfg = {
		.id = "node-r", .cpu_m = 4000, .mem = 8 * GiB, .data_dir = data_dir,
		.nvml_lib_dir = lib, .gpu_context_overhead = "0", .gpu_usage_interval_ms = 100,
		.asset_dir = getenv("TESSERA_TEST_BUILD_ROOT"), .runtime = &fake_ops,
		/* The OOM thread inspects each container once too: this
		 * counts the usage thread's inspects alone. So does the stats
		 * thread. */
		.oom_interval_ms = -1, .stats_interval_ms = -1,
	};
	struct agent *a = NULL;
	struct terr err = {0};
	if (agent_open(&a, &cfg, &err) < 0) {
		FAILF("agent_open: %s", err.msg);
		return;
	}
	json_t *d = NULL;
	CHECK_INT(agent_describe(a, &d, &err), 0);
	CHECK(json_is_false(json_object_get(d, "mock_gpus")));
	json_decref(d);
	char uuid[64];
	snprintf(uuid, sizeof(uuid), "%s", device_uuid(a, 0));

	pid_t first = sleeper();
	pthread_mutex_lock(&fake.mu);
	fake.init_pid = first;
	pthread_mutex_unlock(&fake.mu);
	json_t *spec = spec_for("r1", uuid, GiB, 50);
	char cid[RT_ID_MAX];
	CHECK_INT(agent_start_session(a, spec, cid, NULL, &err), 0);
	json_decref(spec);
	/* Real devices come as their nodes. */
	struct fake_container *c = fake_find(cid);
	CHECK(c && c->n_devices >= 1 && !strncmp(c->devices[0], "/dev/nvidia", 11));
	/* The region appears once a process of the session uses CUDA. */
	char region[512];
	snprintf(region, sizeof(region), "%s/sessions/r1/run/" FGPU_REGION_NAME, data_dir);
	FILE *f = fopen(region, "w");
	CHECK(f != NULL);
	if (f)
		fclose(f);

	CHECK_INT(agent_watch_start(a, on_event, NULL, &err), 0);
	CHECK(wait_rounds(4));
	CHECK_INT(inspects(), 1);

	/* The container restarts: its init is another process. */
	pid_t second = sleeper();
	pthread_mutex_lock(&fake.mu);
	fake.init_pid = second;
	if ((c = fake_find(cid)))
		c->pid = second;
	pthread_mutex_unlock(&fake.mu);
	kill(first, SIGKILL);
	waitpid(first, NULL, 0);
	CHECK(wait_rounds(4));
	CHECK_INT(inspects(), 2);

	/* Gone from the list, it is forgotten; a new start is asked again.
	 * (The destroy itself inspects the container once, for its network.) */
	CHECK_INT(agent_destroy_session(a, "r1", cid, &err), 0);
	CHECK_INT(inspects(), 3);
	CHECK(wait_rounds(2));
	spec = spec_for("r1", uuid, GiB, 50);
	CHECK_INT(agent_start_session(a, spec, cid, NULL, &err), 0);
	json_decref(spec);
	f = fopen(region, "w");
	if (f)
		fclose(f);
	CHECK(wait_rounds(3));
	CHECK_INT(inspects(), 4);

	agent_close(a);
	kill(second, SIGKILL);
	waitpid(second, NULL, 0);
}

/* The sessions whose deaths the agent reported, in order. */
static struct {
	pthread_mutex_t mu;
	char sessions[8][64];
	int n;
} died = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void record_death(void *ud, const char *agent_id, json_t *event)
{
	(void)ud;
	(void)agent_id;
	/* Deaths only: the stats thread reports its rounds here too. */
	const char *kind = json_string_value(json_object_get(event, "event"));
	if (kind && !strcmp(kind, AGENT_EVENT_STATS))
		return;
	pthread_mutex_lock(&died.mu);
	if (died.n < 8)
		snprintf(died.sessions[died.n++], sizeof(died.sessions[0]), "%s",
			 json_string_value(json_object_get(event, "session_id")) ?: "");
	pthread_mutex_unlock(&died.mu);
}

/* Sessions listed by agent_list_containers, comma-separated in order. */
static const char *listed(struct agent *a)
{
	static char out[600];
	json_t *arr = NULL;
	struct terr err = {0};
	out[0] = '\0';
	if (agent_list_containers(a, &arr, &err) < 0) {
		snprintf(out, sizeof(out), "error: %s", err.msg);
		return out;
	}
	size_t i;
	json_t *c;
	json_array_foreach(arr, i, c) {
		size_t len = strlen(out);
		snprintf(out + len, sizeof(out) - len, "%s%s", i ? "," : "",
			 json_string_value(json_object_get(c, "session_id")));
	}
	json_decref(arr);
	return out;
}

/* Two installations on one Docker, with agents of the same id: each keeps
 * to its own containers, and to those made before containers carried the
 * installation's id. */
TEST(containers_of_another_installation_are_left_alone)
{
	fake_reset();
	struct agent *a = open_mock_agent();
	if (!a)
		return;
	fake_add("c-mine", "m1", "node-a", "k-mine");
	fake_add("c-old", "o1", "node-a", "");
	fake_add("c-theirs", "t1", "node-a", "k-other");
	fake_add("c-elsewhere", "e1", "node-b", "k-mine");

	/* Before it knows its installation, every container of its id. */
	CHECK_STR(listed(a), "m1,o1,t1");
	agent_set_cluster_id(a, "k-mine");
	CHECK_STR(listed(a), "m1,o1");
	json_t *arr = NULL;
	struct terr err = {0};
	CHECK_INT(agent_list_containers(a, &arr, &err), 0);
	CHECK_STR(json_string_value(json_object_get(json_array_get(arr, 0), "cluster_id")), "k-mine");
	CHECK_STR(json_string_value(json_object_get(json_array_get(arr, 1), "cluster_id")), "");
	json_decref(arr);
	json_t *d = NULL;
	CHECK_INT(agent_describe(a, &d, &err), 0);
	CHECK_INT(json_array_size(json_object_get(d, "containers")), 2);
	json_decref(d);

	/* What it starts carries the installation's id beside its own. */
	json_t *spec = spec_for("s9", NULL, 0, 0);
	char cid[RT_ID_MAX];
	CHECK_INT(agent_start_session(a, spec, cid, NULL, &err), 0);
	json_decref(spec);
	struct fake_container *c = fake_find(cid);
	CHECK(c != NULL);
	if (c) {
		CHECK_STR(c->cluster_id, "k-mine");
		CHECK_STR(c->agent_id, "node-a");
	}
	CHECK_STR(listed(a), "m1,o1,s9");

	/* A removal by session label does not reach another installation's. */
	CHECK_INT(agent_destroy_session(a, "t1", NULL, &err), 0);
	CHECK(fake_find("c-theirs") != NULL);
	CHECK_INT(agent_destroy_session(a, "o1", NULL, &err), 0);
	CHECK(fake_find("c-old") == NULL);

	/* Deaths: only its own are reported. */
	CHECK_INT(agent_watch_start(a, record_death, NULL, &err), 0);
	fake_event("c-theirs", "t1", "k-other");
	fake_event("c-mine", "m1", "k-mine");
	fake_event("c-gone", "o2", "");
	bool seen = false;
	for (int i = 0; i < 6000 && !seen; i++) {
		pthread_mutex_lock(&died.mu);
		seen = died.n >= 2;
		pthread_mutex_unlock(&died.mu);
		if (!seen)
			usleep(10 * 1000);
	}
	/* Once its watchers are stopped (tessera server does it before
	 * closing the manager they report to), nothing is reported: the
	 * event stays queued, unread. */
	agent_watch_stop(a);
	fake_event("c-mine", "m1", "k-mine");
	pthread_mutex_lock(&fake.mu);
	int queued = fake.n_events;
	pthread_mutex_unlock(&fake.mu);
	CHECK_INT(queued, 1);
	agent_close(a);
	CHECK_INT(died.n, 2);
	CHECK_STR(died.sessions[0], "m1");
	CHECK_STR(died.sessions[1], "o2");
	pthread_mutex_lock(&fake.mu);
	fake.n_events = 0;
	pthread_mutex_unlock(&fake.mu);
}


/* Queues an event on the images' stream: an image's, or a network's. */
static void fake_image_event(bool network, const char *action, const char *name)
{
	pthread_mutex_lock(&fake.mu);
	struct rt_event *e = &fake.img_events[fake.n_img_events++];
	memset(e, 0, sizeof(*e));
	e->image = !network;
	e->network = network;
	snprintf(e->action, sizeof(e->action), "%s", action);
	snprintf(e->network_name, sizeof(e->network_name), "%s", name ? name : "");
	fake.img_events_sent = false;
	pthread_mutex_unlock(&fake.mu);
}

/* Until the images' stream has handed every queued event to the agent
 * (and the agent has acted on it: the callback returned); false after
 * 5 s. */
static bool wait_image_events(void)
{
	for (int i = 0; i < 500; i++) {
		pthread_mutex_lock(&fake.mu);
		bool done = fake.n_img_events == 0 && fake.img_events_sent;
		pthread_mutex_unlock(&fake.mu);
		if (done)
			return true;
		usleep(10 * 1000);
	}
	return false;
}

/* Until the agent follows the images' stream; false after 5 s. */
static bool wait_images_live(void)
{
	for (int i = 0; i < 500; i++) {
		pthread_mutex_lock(&fake.mu);
		bool live = fake.images_live;
		pthread_mutex_unlock(&fake.mu);
		if (live)
			return true;
		usleep(10 * 1000);
	}
	return false;
}

/* Each user's sessions on a network of their own, made once, labelled
 * with the cluster and the user, and kept after their last container:
 * the user's next start asks Docker nothing about it. */
TEST(sessions_get_their_owners_network)
{
	fake_reset();
	struct agent *a = open_mock_agent();
	if (!a)
		return;
	agent_set_cluster_id(a, "0123456789abcdef0123456789abcdef");
	char c1[RT_ID_MAX], c2[RT_ID_MAX], c3[RT_ID_MAX];
	struct terr err = {0};
	json_t *spec = spec_for("s1", NULL, 0, 0);
	json_object_set_new(spec, "owner_id", json_string("aaaabbbbccccddddeeeeffff00001111"));
	CHECK_INT(agent_start_session(a, spec, c1, NULL, &err), 0);
	json_object_set_new(spec, "id", json_string("s2"));
	json_object_set_new(spec, "name", json_string("nb2"));
	CHECK_INT(agent_start_session(a, spec, c2, NULL, &err), 0);
	json_object_set_new(spec, "id", json_string("s3"));
	json_object_set_new(spec, "name", json_string("nb3"));
	json_object_set_new(spec, "owner_id", json_string("99998888777766665555444433332222"));
	CHECK_INT(agent_start_session(a, spec, c3, NULL, &err), 0);
	json_decref(spec);

	const char *net_a = AGENT_NETWORK_PREFIX "aaaabbbbccccdddd-01234567";
	const char *net_b = AGENT_NETWORK_PREFIX "9999888877776666-01234567";
	pthread_mutex_lock(&fake.mu);
	CHECK_INT(fake.n_networks, 2);
	CHECK_INT(fake.network_creates, 2);
	CHECK_INT(fake.network_ensures, 2);   /* s2's was known */
	CHECK(fake_network(net_a) >= 0);
	CHECK(fake_network(net_b) >= 0);
	if (fake_network(net_a) >= 0)
		CHECK_STR(fake.network_labels[fake_network(net_a)],
			  AGENT_LABEL_OWNER_ID "=aaaabbbbccccddddeeeeffff00001111,"
			  AGENT_LABEL_CLUSTER "=0123456789abcdef0123456789abcdef");
	struct fake_container *f1 = fake_find(c1), *f2 = fake_find(c2), *f3 = fake_find(c3);
	CHECK(f1 && f2 && f3);
	if (f1 && f2 && f3) {
		CHECK_STR(f1->network, net_a);
		CHECK_STR(f2->network, net_a);
		CHECK_STR(f3->network, net_b);
	}
	pthread_mutex_unlock(&fake.mu);

	/* The networks stay after their users' last sessions. */
	CHECK_INT(agent_destroy_session(a, "s1", c1, &err), 0);
	CHECK_INT(agent_destroy_session(a, "s2", c2, &err), 0);
	/* Found by its label (no container id recorded): the same. */
	CHECK_INT(agent_destroy_session(a, "s3", NULL, &err), 0);
	CHECK(fake_network(net_a) >= 0);
	CHECK(fake_network(net_b) >= 0);
	CHECK_INT(fake.network_removes, 0);
	/* The user's next session: on the kept network, Docker not asked. */
	spec = spec_for("s4", NULL, 0, 0);
	json_object_set_new(spec, "owner_id", json_string("aaaabbbbccccddddeeeeffff00001111"));
	CHECK_INT(agent_start_session(a, spec, c1, NULL, &err), 0);
	json_decref(spec);
	CHECK_INT(fake.network_ensures, 2);
	CHECK(fake_find(c1) && !strcmp(fake_find(c1)->network, net_a));
	agent_close(a);
}

static int f_image_import(struct runtime *rt, const char *ref, const struct rt_label *label, const void *tar,
			  size_t len, struct terr *err)
{
	(void)rt;
	(void)tar;
	(void)err;
	img_log("import %s %s=%s %zu", ref, label ? label->key : "", label ? label->value : "", len);
	return 0;
}

/* Whether the fake has container id (on network net, unless NULL), read
 * under its lock: the agent's sandbox thread creates beside the test. */
static bool fake_has(const char *id, const char *net)
{
	pthread_mutex_lock(&fake.mu);
	const struct fake_container *c = fake_find(id);
	bool has = c && (!net || !strcmp(c->network, net));
	pthread_mutex_unlock(&fake.mu);
	return has;
}

/* The container of the fake whose image is the sandboxes' and that no
 * session joined yet; "" when none. */
static void spare_of(char id[RT_ID_MAX])
{
	id[0] = '\0';
	pthread_mutex_lock(&fake.mu);
	for (int i = 0; i < fake.n; i++) {
		bool joined = false;
		for (int k = 0; k < fake.n; k++)
			joined = joined || !strcmp(fake.c[k].netns_of, fake.c[i].id);
		if (!strcmp(fake.c[i].image, AGENT_SANDBOX_IMAGE) && fake.c[i].running && !joined)
			snprintf(id, RT_ID_MAX, "%s", fake.c[i].id);
	}
	pthread_mutex_unlock(&fake.mu);
}

/* Until the agent has a spare ready (its count), and which one. */
static bool wait_spare(struct agent *a, char id[RT_ID_MAX])
{
	for (int i = 0; i < 500; i++) {
		int64_t spares, joined;
		agent_sandbox_counts(a, &spares, &joined);
		spare_of(id);
		if (id[0] && spares == 1)
			return true;
		usleep(10 * 1000);
	}
	return false;
}

/* The host name in the UTS namespace of process pid, read from a child
 * that enters it. */
static void hostname_of(pid_t pid, char *out, size_t n)
{
	out[0] = '\0';
	int fds[2];
	if (pipe(fds) < 0)
		return;
	pid_t c = fork();
	if (c == 0) {
		char path[64], name[128] = "";
		snprintf(path, sizeof(path), "/proc/%d/ns/uts", (int)pid);
		int fd = open(path, O_RDONLY);
		if (fd >= 0 && setns(fd, CLONE_NEWUTS) == 0)
			gethostname(name, sizeof(name) - 1);
		if (write(fds[1], name, strlen(name)) < 0)
			_exit(1);
		_exit(0);
	}
	close(fds[1]);
	ssize_t k = c > 0 ? read(fds[0], out, n - 1) : -1;
	out[k > 0 ? k : 0] = '\0';
	close(fds[0]);
	if (c > 0)
		waitpid(c, NULL, 0);
}

/* Sandboxes (agent_sandbox.c): after a user's first start the agent makes
 * a spare on the user's network, from the imported image, holding it;
 * the user's next session joins it (NetworkMode container:ID), named in
 * its labels with its address, gets hosts files of its own and its host
 * name set in its UTS namespace, and a new spare is made. The session's
 * removal removes its sandbox; the agent's end removes the spare. Another
 * user's start never takes it. The containers' init is a child in a UTS
 * namespace of its own (root only). */
TEST(a_users_next_start_joins_a_spare_sandbox)
{
	if (geteuid() != 0) {
		printf("# skipped: a UTS namespace of a child's own needs root\n");
		return;
	}
	int sync_fds[2];
	if (pipe(sync_fds) < 0)
		return;
	pid_t holder = fork();
	if (holder == 0) {
		char c = unshare(CLONE_NEWUTS) == 0 && sethostname("sandbox", 7) == 0 ? 'y' : 'n';
		if (write(sync_fds[1], &c, 1) < 0)
			_exit(1);
		pause();
		_exit(0);
	}
	char ready = 'n';
	if (holder < 0 || read(sync_fds[0], &ready, 1) != 1 || ready != 'y') {
		FAILF("cannot make a process in a UTS namespace of its own");
		if (holder > 0)
			kill(holder, SIGKILL);
		return;
	}
	close(sync_fds[0]);
	close(sync_fds[1]);

	fake_reset();
	pthread_mutex_lock(&img.mu);
	img.n = 0;
	pthread_mutex_unlock(&img.mu);
	fake.init_pid = holder;
	static struct runtime_ops ops;
	ops = fake_ops;
	ops.image_import = f_image_import;
	struct agent_config cfg = {
		.id = "node-s", .cpu_m = 4000, .mem = 8 * GiB, .data_dir = data_dir, .app_publish = "no",
		.asset_dir = getenv("TESSERA_TEST_BUILD_ROOT"), .runtime = &ops,
	};
	struct agent *a = NULL;
	struct terr err = {0};
	if (agent_open(&a, &cfg, &err) < 0) {
		FAILF("agent_open: %s", err.msg);
		kill(holder, SIGKILL);
		waitpid(holder, NULL, 0);
		return;
	}
	agent_set_cluster_id(a, "0123456789abcdef0123456789abcdef");
	CHECK_INT(agent_watch_start(a, NULL, NULL, &err), 0);
	const char *net_a = AGENT_NETWORK_PREFIX "aaaabbbbccccdddd-01234567";

	/* The first start: no spare yet, on the user's network. */
	char c1[RT_ID_MAX], c2[RT_ID_MAX], c3[RT_ID_MAX], ep[AGENT_APP_ENDPOINT_MAX], spare[RT_ID_MAX];
	json_t *spec = spec_for("s1", NULL, 0, 0);
	json_object_set_new(spec, "owner_id", json_string("aaaabbbbccccddddeeeeffff00001111"));
	CHECK_INT(agent_start_session(a, spec, c1, NULL, &err), 0);
	CHECK(fake_has(c1, net_a));
	CHECK(wait_spare(a, spare));
	CHECK(img_has("import " AGENT_SANDBOX_IMAGE " " AGENT_LABEL_ROLE "=sandbox 1536"));
	pthread_mutex_lock(&fake.mu);
	struct fake_container *sb = fake_find(spare);
	CHECK(sb != NULL);
	if (sb) {
		CHECK_STR(sb->network, net_a);
		CHECK_STR(sb->session_id, "");   /* no session's */
		CHECK_STR(sb->agent_id, "node-s");
		CHECK_INT(sb->n_entry, 2);
		CHECK_STR(sb->entry[1], "--hold");
		CHECK(sb->n_mounts == 1 && !strcmp(sb->mounts[0].dst, AGENT_RUNNER_TARGET) && sb->mounts[0].ro);
	}
	pthread_mutex_unlock(&fake.mu);

	/* The next start joins it. */
	json_object_set_new(spec, "id", json_string("s2"));
	json_object_set_new(spec, "name", json_string("nb2"));
	json_object_set_new(spec, "app_secret",
			    json_string("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"));
	CHECK_INT(agent_start_session(a, spec, c2, ep, &err), 0);
	pthread_mutex_lock(&fake.mu);
	struct fake_container *f2 = fake_find(c2);
	CHECK(f2 != NULL);
	if (f2) {
		CHECK_STR(f2->netns_of, spare);
		CHECK_STR(f2->sandbox_label, spare);
		CHECK_STR(f2->sandbox_ip, "172.30.0.2");
		CHECK(f2->n_entry >= 3 && !strcmp(f2->entry[1], "--hostname") && !strcmp(f2->entry[2], "nb2"));
		CHECK(mount_at(f2, "/etc/hosts") >= 0 && mount_at(f2, "/etc/hostname") >= 0);
	}
	pthread_mutex_unlock(&fake.mu);
	CHECK_CONTAINS(slurp("%s/sessions/%s/hosts", "s2"), "172.30.0.2\tnb2\n");
	CHECK_CONTAINS(slurp("%s/sessions/%s/hosts", "s2"), "127.0.0.1\tlocalhost\n");
	CHECK_STR(slurp("%s/sessions/%s/hostname", "s2"), "nb2\n");
	char host[128];
	hostname_of(holder, host, sizeof(host));
	CHECK_STR(host, "nb2");
	/* The app port at the sandbox's address. */
	CHECK_CONTAINS(ep, "172.30.0.2:7611@");
	/* A new spare, and the first one is the session's. */
	char spare2[RT_ID_MAX];
	CHECK(wait_spare(a, spare2));
	CHECK(spare2[0] && strcmp(spare2, spare) != 0);
	int64_t spares, joined;
	agent_sandbox_counts(a, &spares, &joined);
	CHECK_INT(joined, 1);

	/* Another user's start does not take it. */
	json_object_set_new(spec, "id", json_string("s3"));
	json_object_set_new(spec, "name", json_string("nb3"));
	json_object_set_new(spec, "owner_id", json_string("99998888777766665555444433332222"));
	CHECK_INT(agent_start_session(a, spec, c3, NULL, &err), 0);
	pthread_mutex_lock(&fake.mu);
	CHECK(fake_find(c3) && !fake_find(c3)->netns_of[0]);
	pthread_mutex_unlock(&fake.mu);
	json_decref(spec);

	/* The session's removal removes its sandbox. */
	CHECK_INT(agent_destroy_session(a, "s2", c2, &err), 0);
	CHECK(!fake_has(spare, NULL));
	CHECK(!exists("%s/sessions/%s", "s2"));
	/* The agent's end removes the spares, and nothing else. */
	agent_close(a);
	int sandboxes = 0;
	pthread_mutex_lock(&fake.mu);
	for (int i = 0; i < fake.n; i++)
		sandboxes += !strcmp(fake.c[i].image, AGENT_SANDBOX_IMAGE);
	pthread_mutex_unlock(&fake.mu);
	CHECK_INT(sandboxes, 0);
	CHECK(fake_has(c1, NULL) && fake_has(c3, NULL));
	kill(holder, SIGKILL);
	waitpid(holder, NULL, 0);
}

/* A kept network removed under the agent (`docker network rm`): the
 * create that names it is refused (404), the agent makes it again and
 * creates once more; followed through the images' stream, its removal
 * is heard and the next start makes it first. Either way the session
 * runs on its user's network, never on another. */
TEST(a_network_removed_under_the_agent_is_made_again)
{
	fake_reset();
	struct agent *a = open_mock_agent();
	if (!a)
		return;
	agent_set_cluster_id(a, "0123456789abcdef0123456789abcdef");
	const char *net_a = AGENT_NETWORK_PREFIX "aaaabbbbccccdddd-01234567";
	char c1[RT_ID_MAX];
	struct terr err = {0};
	json_t *spec = spec_for("s1", NULL, 0, 0);
	json_object_set_new(spec, "owner_id", json_string("aaaabbbbccccddddeeeeffff00001111"));
	CHECK_INT(agent_start_session(a, spec, c1, NULL, &err), 0);
	CHECK_INT(agent_destroy_session(a, "s1", c1, &err), 0);
	CHECK_INT(fake_ops.network_remove(NULL, net_a, &err), 0);

	json_object_set_new(spec, "id", json_string("s2"));
	CHECK_INT(agent_start_session(a, spec, c1, NULL, &err), 0);
	CHECK_INT(fake.network_creates, 2);
	CHECK_INT(fake.creates, 3);   /* s1; s2 refused, then made */
	struct fake_container *c = fake_find(c1);
	CHECK(c && c->running && !strcmp(c->network, net_a));
	CHECK_INT(agent_destroy_session(a, "s2", c1, &err), 0);
	agent_close(a);

	/* Heard from the images' stream. */
	fake_reset();
	struct agent_config cfg = {
		.id = "node-a", .cpu_m = 4000, .mem = 8 * GiB, .data_dir = data_dir,
		.asset_dir = getenv("TESSERA_TEST_BUILD_ROOT"), .runtime = &fake_ops_images,
	};
	if (agent_open(&a, &cfg, &err) < 0) {
		FAILF("agent_open: %s", err.msg);
		json_decref(spec);
		return;
	}
	agent_set_cluster_id(a, "0123456789abcdef0123456789abcdef");
	CHECK_INT(agent_watch_start(a, on_event, NULL, &err), 0);
	CHECK(wait_images_live());
	json_object_set_new(spec, "id", json_string("s3"));
	CHECK_INT(agent_start_session(a, spec, c1, NULL, &err), 0);
	CHECK_INT(agent_destroy_session(a, "s3", c1, &err), 0);
	CHECK_INT(fake_ops.network_remove(NULL, net_a, &err), 0);
	fake_image_event(true, "destroy", net_a);
	CHECK(wait_image_events());
	json_object_set_new(spec, "id", json_string("s4"));
	CHECK_INT(agent_start_session(a, spec, c1, NULL, &err), 0);
	CHECK_INT(fake.network_ensures, 2);
	CHECK_INT(fake.network_creates, 2);
	CHECK_INT(fake.creates, 2);   /* no refused create this time */
	c = fake_find(c1);
	CHECK(c && c->running && !strcmp(c->network, net_a));
	json_decref(spec);
	agent_close(a);
}

/* Docker out of address pools for a new user's network: the idle
 * networks of this installation (no running container) make room;
 * those in use stay. */
TEST(idle_networks_give_way_when_docker_has_no_pool_left)
{
	fake_reset();
	fake.network_pools = 2;
	struct agent *a = open_mock_agent();
	if (!a)
		return;
	agent_set_cluster_id(a, "0123456789abcdef0123456789abcdef");
	char c1[RT_ID_MAX], c2[RT_ID_MAX], c3[RT_ID_MAX];
	struct terr err = {0};
	json_t *spec = spec_for("s1", NULL, 0, 0);
	json_object_set_new(spec, "owner_id", json_string("aaaa"));
	CHECK_INT(agent_start_session(a, spec, c1, NULL, &err), 0);
	json_object_set_new(spec, "id", json_string("s2"));
	json_object_set_new(spec, "owner_id", json_string("bbbb"));
	CHECK_INT(agent_start_session(a, spec, c2, NULL, &err), 0);
	CHECK_INT(agent_destroy_session(a, "s1", c1, &err), 0);   /* aaaa's network idle */
	json_object_set_new(spec, "id", json_string("s3"));
	json_object_set_new(spec, "owner_id", json_string("cccc"));
	CHECK_INT(agent_start_session(a, spec, c3, NULL, &err), 0);
	CHECK(fake_network(AGENT_NETWORK_PREFIX "aaaa-01234567") < 0);
	CHECK(fake_network(AGENT_NETWORK_PREFIX "bbbb-01234567") >= 0);
	CHECK(fake_network(AGENT_NETWORK_PREFIX "cccc-01234567") >= 0);
	/* None idle: the error is Docker's, said. */
	json_object_set_new(spec, "id", json_string("s4"));
	json_object_set_new(spec, "owner_id", json_string("dddd"));
	err = (struct terr){0};
	CHECK(agent_start_session(a, spec, c1, NULL, &err) < 0);
	CHECK_CONTAINS(err.msg, "address pool");
	/* aaaa comes back: their network is made again, where it went. */
	CHECK_INT(agent_destroy_session(a, "s3", c3, &err), 0);
	json_object_set_new(spec, "id", json_string("s5"));
	json_object_set_new(spec, "owner_id", json_string("aaaa"));
	CHECK_INT(agent_start_session(a, spec, c1, NULL, &err), 0);
	CHECK(fake_find(c1) && !strcmp(fake_find(c1)->network, AGENT_NETWORK_PREFIX "aaaa-01234567"));
	json_decref(spec);
	agent_close(a);
}

/* A start that meets its network doubled or gone (another agent on the
 * same Docker) ensures it again and tries once more; other failures are
 * not retried. */
TEST(a_start_retries_when_its_network_changed_under_it)
{
	fake_reset();
	struct agent *a = open_mock_agent();
	if (!a)
		return;
	char cid[RT_ID_MAX];
	struct terr err = {0};
	json_t *spec = spec_for("s1", NULL, 0, 0);
	json_object_set_new(spec, "owner_id", json_string("aaaabbbbccccdddd"));
	snprintf(fake.start_fails_once, sizeof(fake.start_fails_once),
		 "start container: network tessera-u-x is ambiguous (2 matches found on name)");
	fake.start_fail_code = EINVAL;
	CHECK_INT(agent_start_session(a, spec, cid, NULL, &err), 0);
	CHECK_INT(fake.network_ensures, 2);
	CHECK_INT(fake.creates, 2);
	CHECK(fake_find(cid) && fake_find(cid)->running);
	CHECK_INT(fake.n, 1);   /* the failed one was removed */

	snprintf(fake.start_fails_once, sizeof(fake.start_fails_once), "start container: network tessera-u-x not found");
	fake.start_fail_code = ENOENT;
	json_object_set_new(spec, "id", json_string("s2"));
	json_object_set_new(spec, "name", json_string("nb2"));
	CHECK_INT(agent_start_session(a, spec, cid, NULL, &err), 0);
	CHECK_INT(fake.network_ensures, 3);   /* known at first, then asked */

	snprintf(fake.start_fails_once, sizeof(fake.start_fails_once), "OCI runtime create failed");
	fake.start_fail_code = EIO;
	json_object_set_new(spec, "id", json_string("s3"));
	json_object_set_new(spec, "name", json_string("nb3"));
	CHECK_INT(agent_start_session(a, spec, cid, NULL, &err), -EIO);
	CHECK_INT(fake.network_ensures, 3);
	json_decref(spec);
	agent_close(a);
}

/* What a start needs of its image is looked at once while the images'
 * stream is followed (the manager's "does it exist?" included), and
 * looked at again after any image event; without the stream, at every
 * start. */
TEST(an_image_is_looked_at_once_while_its_events_come)
{
	fake_reset();
	struct agent_config cfg = {
		.id = "node-a", .cpu_m = 4000, .mem = 8 * GiB, .data_dir = data_dir,
		.asset_dir = getenv("TESSERA_TEST_BUILD_ROOT"), .runtime = &fake_ops_images,
	};
	struct agent *a = NULL;
	struct terr err = {0};
	if (agent_open(&a, &cfg, &err) < 0) {
		FAILF("agent_open: %s", err.msg);
		return;
	}
	CHECK_INT(agent_watch_start(a, on_event, NULL, &err), 0);
	CHECK(wait_images_live());
	static const char secret[] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
	json_t *spec = spec_for("s1", NULL, 0, 0);
	json_object_set_new(spec, "image", json_string("apps:latest"));
	json_object_set_new(spec, "app_secret", json_string(secret));
	bool exists = false;
	CHECK_INT(agent_image_exists(a, "apps:latest", &exists, &err), 0);
	CHECK(exists);
	char cid[RT_ID_MAX], ep[AGENT_APP_ENDPOINT_MAX];
	CHECK_INT(agent_start_session(a, spec, cid, ep, &err), 0);
	json_object_set_new(spec, "id", json_string("s2"));
	json_object_set_new(spec, "name", json_string("nb2"));
	CHECK_INT(agent_start_session(a, spec, cid, ep, &err), 0);
	CHECK_INT(fake.image_looks, 1);
	/* What was kept is what a look gives. */
	struct fake_container *c = fake_find(cid);
	if (c) {
		char want[128];
		snprintf(want, sizeof(want), "/image/bin:/bin:%s", FGPU_BIN_DIR);
		CHECK_STR(env_of(c, "PATH"), want);
		CHECK_INT(c->n_entry, 5);
		CHECK_STR(c->entry[4], "jupyter:http:8081,mlflow-ui:preopen:5000");
	}
	/* An image event (a pull or tag may move any reference). */
	fake_image_event(false, "tag", NULL);
	CHECK(wait_image_events());
	json_object_set_new(spec, "id", json_string("s3"));
	json_object_set_new(spec, "name", json_string("nb3"));
	CHECK_INT(agent_start_session(a, spec, cid, ep, &err), 0);
	CHECK_INT(fake.image_looks, 2);
	/* An image that does not exist is not kept: asked each time. */
	CHECK_INT(agent_image_exists(a, "nosuch:latest", &exists, &err), 0);
	CHECK(!exists);
	CHECK_INT(agent_image_exists(a, "nosuch:latest", &exists, &err), 0);
	CHECK_INT(fake.image_looks, 4);
	agent_close(a);

	/* No images' stream: nothing is kept. */
	fake_reset();
	cfg.runtime = &fake_ops;
	if (agent_open(&a, &cfg, &err) < 0) {
		FAILF("agent_open: %s", err.msg);
		json_decref(spec);
		return;
	}
	CHECK_INT(agent_watch_start(a, on_event, NULL, &err), 0);
	CHECK_INT(agent_start_session(a, spec, cid, ep, &err), 0);
	json_object_set_new(spec, "id", json_string("s4"));
	json_object_set_new(spec, "name", json_string("nb4"));
	CHECK_INT(agent_start_session(a, spec, cid, ep, &err), 0);
	CHECK_INT(fake.image_looks, 2);
	json_decref(spec);
	agent_close(a);
}

/* A spec without an owner id (an older manager's) keeps the default
 * network. */
TEST(a_spec_without_owner_id_keeps_the_default_network)
{
	fake_reset();
	struct agent *a = open_mock_agent();
	if (!a)
		return;
	char cid[RT_ID_MAX];
	struct terr err = {0};
	json_t *spec = spec_for("s1", NULL, 0, 0);
	CHECK_INT(agent_start_session(a, spec, cid, NULL, &err), 0);
	json_decref(spec);
	struct fake_container *c = fake_find(cid);
	CHECK(c && !c->network[0]);
	CHECK_INT(fake.n_networks, 0);
	agent_close(a);
}

/* The work user by default, with its home; root when the spec says so;
 * exec runs as what the container's label says. */
TEST(sessions_and_execs_run_as_the_work_user_unless_root)
{
	fake_reset();
	struct agent *a = open_mock_agent();
	if (!a)
		return;
	char c1[RT_ID_MAX], c2[RT_ID_MAX];
	struct terr err = {0};
	json_t *spec = spec_for("s1", NULL, 0, 0);
	json_object_set_new(spec, "startup_command", json_string("sleep 1"));
	CHECK_INT(agent_start_session(a, spec, c1, NULL, &err), 0);
	json_object_set_new(spec, "id", json_string("s2"));
	json_object_set_new(spec, "name", json_string("nb2"));
	json_object_set_new(spec, "root", json_true());
	CHECK_INT(agent_start_session(a, spec, c2, NULL, &err), 0);
	json_decref(spec);
	struct fake_container *w = fake_find(c1), *r = fake_find(c2);
	CHECK(w && r);
	if (!w || !r) {
		agent_close(a);
		return;
	}
	CHECK_INT(w->n_entry, 7);
	CHECK_STR(w->entry[1], "--user");
	CHECK_STR(w->entry[2], AGENT_WORK_UID_GID);
	CHECK_STR(w->entry[3], "--");
	CHECK_STR(w->entry[6], "sleep 1");
	CHECK_STR(w->run_as, AGENT_WORK_UID_GID);
	CHECK_STR(env_of(w, "HOME"), AGENT_WORK_HOME);
	CHECK_STR(r->entry[2], "0:0");
	CHECK_STR(r->run_as, "0:0");
	CHECK(env_of(r, "HOME") == NULL);

	const char *argv[] = {"id", "-u", NULL};
	CHECK_INT(exec_collected(a, c1, argv, 0, &err), 0);
	CHECK_STR(fake.exec_user, AGENT_WORK_UID_GID);
	CHECK_STR(fake.exec_workdir, AGENT_WORK_HOME);
	CHECK_INT(exec_collected(a, c1, argv, 30, &err), 0);   /* through the runner */
	CHECK_STR(fake.exec_user, AGENT_WORK_UID_GID);
	CHECK_INT(exec_collected(a, c2, argv, 0, &err), 0);
	CHECK_STR(fake.exec_user, "(none)");
	CHECK_STR(fake.exec_workdir, "(none)");
	/* A container from before sessions had a user: as before, root. */
	fake_add("old1", "s9", "node-a", "");
	CHECK_INT(exec_collected(a, "old1", argv, 0, &err), 0);
	CHECK_STR(fake.exec_user, "(none)");

	/* The user's own HOME is kept. */
	spec = spec_for("s3", NULL, 0, 0);
	json_object_set_new(spec, "name", json_string("nb3"));
	json_object_set_new(json_object_get(spec, "env"), "HOME", json_string("/data"));
	CHECK_INT(agent_start_session(a, spec, c1, NULL, &err), 0);
	json_decref(spec);
	CHECK(fake_find(c1) && !strcmp(env_of(fake_find(c1), "HOME") ?: "", "/data"));
	agent_close(a);
}

TEST(a_commit_labels_the_image_and_pushes_it)
{
	fake_reset();
	img.n = 0;
	struct agent *a = open_mock_agent();
	if (!a)
		return;
	json_t *req = json_pack("{s:s,s:s,s:{s:s,s:s},s:s,s:s}", "container_id", "c1", "ref", "tp/alice/s:v1",
				"labels", "tessera.owner", "u1", "ai.backend.features", "private",
				"source_image", "lablup/python:3.9", "registry", "127.0.0.1:5000");
	json_t *out = NULL;
	struct terr err = {0};
	CHECK_INT(agent_commit(a, req, &out, &err), 0);
	CHECK(json_is_true(json_object_get(out, "pushed")));
	CHECK(!json_object_get(out, "push_error"));
	CHECK(img_has("commit c1 tp/alice/s:v1"));
	CHECK(img_has("label tessera.owner=u1"));
	/* private joins the source image's features */
	CHECK(img_has("label ai.backend.features=batch uid-match private"));
	/* the container's own labels are emptied on the image */
	CHECK(img_has("label tessera.session="));
	CHECK(img_has("label tessera.agent="));
	/* the source image's variables, not the session's */
	CHECK(img_has("env PATH=/image/bin:/bin"));
	CHECK(img_has("env LANG=C.UTF-8"));
	/* tagged for the registry, pushed, that name removed again */
	int t = img_index("tag tp/alice/s:v1 127.0.0.1:5000/tp/alice/s:v1");
	int p = img_index("push 127.0.0.1:5000/tp/alice/s:v1");
	int r = img_index("rmi 127.0.0.1:5000/tp/alice/s:v1");
	CHECK(t >= 0 && p > t && r > p);
	json_decref(out);

	/* A failed push leaves the commit standing, with the reason. */
	img.push_fails = "connection refused";
	out = NULL;
	CHECK_INT(agent_commit(a, req, &out, &err), 0);
	CHECK(json_is_false(json_object_get(out, "pushed")));
	CHECK_CONTAINS(json_string_value(json_object_get(out, "push_error")), "connection refused");
	img.push_fails = NULL;
	json_decref(out);
	/* Without a registry: no push at all. */
	json_object_del(req, "registry");
	img.n = 0;
	out = NULL;
	CHECK_INT(agent_commit(a, req, &out, &err), 0);
	CHECK(!img_has("push 127.0.0.1:5000/tp/alice/s:v1"));
	json_decref(out);
	/* A ref the node has already is not moved: a public image (no
	 * owner) or another user's; only the same owner's private one may be
	 * committed again. */
	img.n = 0;
	out = NULL;
	json_object_set_new(req, "ref", json_string("public:1"));
	CHECK_INT(agent_commit(a, req, &out, &err), -EEXIST);
	CHECK_CONTAINS(err.msg, "image public:1 exists on this node");
	CHECK(!img_has("commit c1 public:1"));
	json_object_set_new(req, "ref", json_string("mine:1"));
	json_object_set_new(json_object_get(req, "labels"), "tessera.owner", json_string("u2"));
	CHECK_INT(agent_commit(a, req, &out, &err), -EEXIST);
	CHECK(!img_has("commit c1 mine:1"));
	json_object_set_new(json_object_get(req, "labels"), "tessera.owner", json_string("u1"));
	CHECK_INT(agent_commit(a, req, &out, &err), 0);
	CHECK(img_has("commit c1 mine:1"));
	json_decref(out);
	/* A request without a container or with labels of the wrong type. */
	json_object_set_new(req, "labels", json_string("x"));
	CHECK_INT(agent_commit(a, req, &out, &err), -EINVAL);
	json_decref(req);
	agent_close(a);
}

static struct {
	int calls;
	char key[64];
	int64_t last_cur, last_total;
} progress;

static void on_progress(void *ud, const char *key, const char *ref, int64_t cur, int64_t total)
{
	(void)ud;
	(void)ref;
	progress.calls++;
	snprintf(progress.key, sizeof(progress.key), "%s", key);
	progress.last_cur = cur;
	progress.last_total = total;
}

TEST(a_pull_reports_progress_and_takes_the_plain_name)
{
	fake_reset();
	img.n = 0;
	struct agent *a = open_mock_agent();
	if (!a)
		return;
	struct terr err = {0};
	memset(&progress, 0, sizeof(progress));
	CHECK_INT(agent_pull(a, "tp/x:1", "127.0.0.1:5000", "sess-1", on_progress, NULL, &err), 0);
	CHECK(img_has("pull 127.0.0.1:5000/tp/x:1"));
	CHECK(img_has("tag 127.0.0.1:5000/tp/x:1 tp/x:1"));
	CHECK(img_has("rmi 127.0.0.1:5000/tp/x:1"));
	/* once at the start, at most once a second between, once at the end */
	CHECK(progress.calls >= 2);
	CHECK_STR(progress.key, "sess-1");
	CHECK_INT(progress.last_cur, 980000000);
	CHECK_INT(progress.last_total, 980000000);
	CHECK_INT(agent_pull(a, "tp/missing:1", "127.0.0.1:5000", "sess-1", on_progress, NULL, &err), -ENOENT);
	CHECK_CONTAINS(err.msg, "manifest unknown");
	CHECK_INT(agent_pull(a, "tp/x:1", "", "sess-1", on_progress, NULL, &err), -ENOENT);
	CHECK_CONTAINS(err.msg, "no registry");
	agent_close(a);
}

int main(void)
{
	snprintf(data_dir, sizeof(data_dir), "/tmp/tessera-agent-test.XXXXXX");
	if (!mkdtemp(data_dir)) {
		perror("mkdtemp");
		return 1;
	}
	fake_ops_images = fake_ops;
	fake_ops_images.watch_images = f_watch_images;
	RUN(describes_its_node_and_mock_gpus);
	RUN(a_session_gets_its_app_port_and_secret);
	RUN(a_removal_during_a_start_leaves_no_container);
	RUN(exec_streams_through_the_runner_or_without_an_old_one);
	RUN(containers_get_the_log_cap);
	RUN(the_pids_limit_fits_the_session_and_the_node);
	RUN(a_removal_kills_first_and_never_its_own_cgroup);
	RUN(a_signal_death_is_told_as_a_kill);
	RUN(folder_mounts_only_from_declared_storage_hosts);
	RUN(a_gpu_session_gets_its_share_and_the_fgpu_files);
	RUN(a_share_without_a_compute_limit_gets_the_whole_device);
	RUN(a_cpu_session_has_no_gpu_parts);
	RUN(bad_specs_are_refused_before_anything_is_made);
	RUN(a_leftover_container_of_the_session_is_replaced);
	RUN(a_container_that_cannot_start_is_removed);
	RUN(the_usage_thread_inspects_a_container_once_per_start_of_its_init);
	RUN(containers_of_another_installation_are_left_alone);
	RUN(sessions_get_their_owners_network);
	RUN(a_users_next_start_joins_a_spare_sandbox);
	RUN(a_network_removed_under_the_agent_is_made_again);
	RUN(idle_networks_give_way_when_docker_has_no_pool_left);
	RUN(an_image_is_looked_at_once_while_its_events_come);
	RUN(a_spec_without_owner_id_keeps_the_default_network);
	RUN(a_start_retries_when_its_network_changed_under_it);
	RUN(sessions_and_execs_run_as_the_work_user_unless_root);
	RUN(a_commit_labels_the_image_and_pushes_it);
	RUN(a_pull_reports_progress_and_takes_the_plain_name);
	util_remove_tree(data_dir);
	return testlib_done();
}
