/* The node's images: what a start needs of one, kept while the image
 * events are followed; the image queries and removal; commit, push and
 * pull (agent_commit, agent_pull). */
#include "agent/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "images/labels.h"

/* ---- images: what a start needs of one, kept ------------------------- */

void agent_image_seen_free(struct image_seen *e)
{
	free(e->path);
	free(e->apps);
	e->path = e->apps = NULL;
}

/* Forgets every image kept (img_mu held or no other thread running). */
void agent_images_forget_locked(struct agent *a)
{
	for (size_t i = 0; i < a->n_img_seen; i++)
		agent_image_seen_free(&a->img_seen[i]);
	a->n_img_seen = 0;
	a->img_gen++;
}

void agent_images_forget(struct agent *a)
{
	pthread_mutex_lock(&a->img_mu);
	agent_images_forget_locked(a);
	pthread_mutex_unlock(&a->img_mu);
}

/* The runner's --apps for the image's ai.backend.service-ports, when it
 * has a valid one: its entries that are apps, each with its first port
 * (img_service_ports_runner_spec: Backend.AI's pty and internal entries
 * and port lists are not for the runner). Caller frees; NULL when none.
 * A label that does not parse is left out with a warning (once per
 * look at the image, as it is kept): the session still starts, with the
 * terminal only. */
static char *image_apps(const char *image, char **labels, size_t n)
{
	char *spec = NULL;
	struct terr err = {0};
	size_t klen = strlen(IMG_LABEL_SERVICE_PORTS);
	for (size_t i = 0; i < n && !spec; i++) {
		if (strncmp(labels[i], IMG_LABEL_SERVICE_PORTS, klen) || labels[i][klen] != '=')
			continue;
		struct img_service_port ports[IMG_MAX_SERVICE_PORTS];
		size_t np = 0;
		const char *v = labels[i] + klen + 1;
		if (*v && img_service_ports_parse(v, ports, IMG_MAX_SERVICE_PORTS, &np, &err) == 0)
			img_service_ports_runner_spec(ports, np, &spec, &err);
		else if (*v)
			log_warn("agent", "image %s: %s is not used: %s", image, IMG_LABEL_SERVICE_PORTS, err.msg);
	}
	return spec;
}

/* Asks the runtime what a start needs of image ref (one inspect with
 * image_config, else image_env and image_labels) into *e. */
static int image_look(struct agent *a, const char *ref, struct image_seen *e, struct terr *err)
{
	struct rt_image_config c = {0};
	int rc;
	if (a->rt_ops->image_config) {
		rc = a->rt_ops->image_config(a->rt, ref, &c, err);
	} else {
		rc = a->rt_ops->image_env(a->rt, ref, &c.env, &c.n_env, err);
		struct terr ignored = {0};
		if (rc == 0 && a->rt_ops->image_labels &&
		    a->rt_ops->image_labels(a->rt, ref, &c.labels, &c.n_labels, &ignored) < 0)
			c.labels = NULL, c.n_labels = 0;
	}
	if (rc < 0)
		return rc;
	memset(e, 0, sizeof(*e));
	util_strlcpy(e->ref, ref, sizeof(e->ref));
	util_strlcpy(e->id, c.id, sizeof(e->id));
	for (size_t i = 0; i < c.n_env && !e->path; i++)
		if (!strncmp(c.env[i], "PATH=", 5))
			e->path = strdup(c.env[i] + 5);
	e->apps = image_apps(ref, c.labels, c.n_labels);
	rt_image_config_free(&c);
	return 0;
}

static char *strdup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

/* What a start needs of image ref: from what is kept when it is (no
 * call to the runtime), else from a look, then kept. *out owns copies
 * (image_seen_free); *kept says which. -ENOENT when there is no such
 * image. Kept only while the image stream is followed: its events are
 * what says a reference moved. (The stream is counted as followed from
 * the moment it is asked for; an image changed in the milliseconds
 * before Docker starts sending it would be missed: only at an agent's
 * start or a reconnect, when next to nothing is kept.) */
int agent_image_facts(struct agent *a, const char *ref, struct image_seen *out, bool *kept, struct terr *err)
{
	*kept = false;
	pthread_mutex_lock(&a->img_mu);
	for (size_t i = 0; a->img_live && i < a->n_img_seen; i++) {
		struct image_seen *e = &a->img_seen[i];
		if (strcmp(e->ref, ref))
			continue;
		e->used = ++a->img_tick;
		*out = *e;
		out->path = strdup_or_null(e->path);
		out->apps = strdup_or_null(e->apps);
		pthread_mutex_unlock(&a->img_mu);
		*kept = true;
		return 0;
	}
	uint64_t gen = a->img_gen;
	pthread_mutex_unlock(&a->img_mu);

	int rc = image_look(a, ref, out, err);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&a->img_mu);
	if (a->img_live && gen == a->img_gen) {
		if (!a->img_seen)
			a->img_seen = calloc(AGENT_IMAGES_KEPT, sizeof(*a->img_seen));
		struct image_seen *slot = NULL;
		if (a->img_seen && a->n_img_seen < AGENT_IMAGES_KEPT) {
			slot = &a->img_seen[a->n_img_seen++];
		} else if (a->img_seen) {
			slot = &a->img_seen[0];
			for (size_t i = 1; i < a->n_img_seen; i++)
				if (a->img_seen[i].used < slot->used)
					slot = &a->img_seen[i];
			agent_image_seen_free(slot);
		}
		if (slot) {
			*slot = *out;
			slot->path = strdup_or_null(out->path);
			slot->apps = strdup_or_null(out->apps);
			slot->used = ++a->img_tick;
		}
	}
	pthread_mutex_unlock(&a->img_mu);
	return 0;
}

/* The manager asks this before each start (to pull what is missing):
 * answered from the images kept for starts, and a look at one that is
 * not kept keeps it for the start that follows. */
int agent_image_exists(struct agent *a, const char *ref, bool *exists, struct terr *err)
{
	struct image_seen img;
	bool kept;
	int rc = agent_image_facts(a, ref, &img, &kept, err);
	*exists = rc == 0;
	if (rc == 0)
		agent_image_seen_free(&img);
	else if (rc != -ENOENT)
		return a->rt_ops->image_exists(a->rt, ref, exists, err);
	return 0;
}

int agent_images(struct agent *a, json_t **images, struct terr *err)
{
	return a->rt_ops->image_list(a->rt, images, err);
}

int agent_image_remove(struct agent *a, const char *ref, struct terr *err)
{
	if (!a->rt_ops->image_remove)
		return terr_set(err, ENOSYS, "the container runtime of node %s cannot remove images", a->id);
	return a->rt_ops->image_remove(a->rt, ref, err);
}

/* ---- images: commit, push, pull ---- */

/* "host:port/ref" into buf; -ENAMETOOLONG. */
static int registry_ref(const char *registry, const char *ref, char *buf, size_t n, struct terr *err)
{
	int len = snprintf(buf, n, "%s/%s", registry, ref);
	if (len < 0 || (size_t)len >= n)
		return terr_set(err, ENAMETOOLONG, "image name %s/%s is too long", registry, ref);
	return 0;
}

/* Whether the image ref on this node carries tessera.owner = owner (a
 * private image of that user's; false when owner is NULL or "", or when
 * the labels cannot be read). */
static bool image_owned_by(struct agent *a, const char *ref, const char *owner)
{
	char **sl = NULL;
	size_t n = 0;
	struct terr ignored = {0};
	if (!owner || !*owner || !a->rt_ops->image_labels ||
	    a->rt_ops->image_labels(a->rt, ref, &sl, &n, &ignored) < 0)
		return false;
	size_t klen = strlen(IMG_LABEL_OWNER);
	bool mine = false;
	for (size_t i = 0; i < n; i++) {
		if (!strncmp(sl[i], IMG_LABEL_OWNER, klen) && sl[i][klen] == '=' && !strcmp(sl[i] + klen + 1, owner))
			mine = true;
		free(sl[i]);
	}
	free(sl);
	return mine;
}

int agent_commit(struct agent *a, json_t *req, json_t **result, struct terr *err)
{
	const char *cid = json_string_value(json_object_get(req, "container_id"));
	const char *ref = json_string_value(json_object_get(req, "ref"));
	const char *source = json_string_value(json_object_get(req, "source_image"));
	const char *registry = json_string_value(json_object_get(req, "registry"));
	json_t *labels = json_object_get(req, "labels");
	if (!cid || !*cid || !ref || !*ref || strlen(ref) > 255 || (labels && !json_is_object(labels)))
		return terr_set(err, EINVAL, "a commit needs container_id, ref (at most 255 characters) and labels as an object");
	/* Docker's commit moves an existing tag to the new image. The
	 * manager names commits into the owner's namespace only; here, on
	 * the node, a ref that exists already is refused unless it is a
	 * private image of the same owner, so a commit never takes over a
	 * public image or another user's (docs/images.md, "Private images"). */
	const char *owner = json_string_value(json_object_get(labels, IMG_LABEL_OWNER));
	bool exists = false;
	if (a->rt_ops->image_exists(a->rt, ref, &exists, err) < 0)
		return terr_prefix(err, "cannot tell whether image %s exists on this node", ref);
	if (exists && !image_owned_by(a, ref, owner))
		return terr_set(err, EEXIST, "image %s exists on this node and is not a private image of this "
				"session's owner; a commit does not move it", ref);
	size_t nl = json_object_size(labels), k = 0;
	struct rt_label *lv = calloc(nl + 5, sizeof(*lv));
	if (!lv)
		return terr_set(err, ENOMEM, "out of memory");
	const char *key;
	json_t *val;
	json_object_foreach(labels, key, val) {
		if (json_is_string(val))
			lv[k++] = (struct rt_label){key, json_string_value(val)};
	}
	/* Docker keeps the container's own labels on the image; those that
	 * name this session's container are emptied (Docker cannot drop
	 * them): the image's source is in tessera.source.*. */
	static const char *const own[] = {AGENT_LABEL_SESSION, AGENT_LABEL_AGENT, AGENT_LABEL_NAME, AGENT_LABEL_CLUSTER};
	for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
		if (!json_object_get(labels, own[i]))
			lv[k++] = (struct rt_label){own[i], ""};
	/* The session's variables (its id, its devices, fGPU limits) are
	 * not the image's: the source image's are put back. */
	char **env = NULL;
	size_t n_env = 0;
	struct terr ignored = {0};
	if (!source || a->rt_ops->image_env(a->rt, source, &env, &n_env, &ignored) < 0) {
		env = NULL;
		n_env = 0;
	}
	/* image_env counts its strings; commit takes them NULL-terminated. */
	char **envz = env ? realloc(env, (n_env + 1) * sizeof(*env)) : NULL;
	if (envz) {
		env = envz;
		env[n_env] = NULL;
	} else if (env) {
		for (size_t i = 0; i < n_env; i++)
			free(env[i]);
		free(env);
		env = NULL;
		n_env = 0;
	}
	/* "private" joins the source image's features (Backend.AI's label:
	 * words separated by spaces or commas), whose other words stay. */
	char features[1024] = "";
	for (size_t i = 0; i < k; i++) {
		if (strcmp(lv[i].key, "ai.backend.features"))
			continue;
		char **sl = NULL;
		size_t n_sl = 0;
		if (source && a->rt_ops->image_labels &&
		    a->rt_ops->image_labels(a->rt, source, &sl, &n_sl, &ignored) == 0) {
			for (size_t j = 0; j < n_sl; j++)
				if (!strncmp(sl[j], "ai.backend.features=", 20) && sl[j][20] &&
				    !strstr(sl[j] + 20, lv[i].value))
					snprintf(features, sizeof(features), "%s %s", sl[j] + 20, lv[i].value);
			for (size_t j = 0; j < n_sl; j++)
				free(sl[j]);
			free(sl);
		}
		if (features[0])
			lv[i].value = features;
	}
	int rc = a->rt_ops->commit(a->rt, cid, ref, lv, k, env && n_env ? (const char *const *)env : NULL, err);
	for (size_t i = 0; i < n_env; i++)
		free(env[i]);
	free(env);
	free(lv);
	if (rc < 0)
		return rc;
	json_t *out = json_pack("{s:s,s:b}", "ref", ref, "pushed", 0);
	if (registry && *registry && (!a->rt_ops->tag || !a->rt_ops->push || !a->rt_ops->image_remove)) {
		json_object_set_new(out, "push_error", json_string("this node's container runtime cannot push images"));
	} else if (registry && *registry) {
		char rref[600];
		struct terr perr = {0};
		if (registry_ref(registry, ref, rref, sizeof(rref), &perr) == 0 &&
		    a->rt_ops->tag(a->rt, ref, rref, &perr) == 0) {
			int prc = a->rt_ops->push(a->rt, rref, NULL, NULL, &perr);
			a->rt_ops->image_remove(a->rt, rref, &ignored);
			if (prc == 0)
				json_object_set_new(out, "pushed", json_true());
		}
		if (perr.code)
			json_object_set_new(out, "push_error", json_string(perr.msg));
	}
	*result = out;
	return 0;
}

struct pull_ctx {
	struct agent *a;
	const char *key, *ref;
	agent_progress_fn fn;
	void *ud;
	int64_t last_ms;
	int64_t cur, total;
};

static void pull_report(struct pull_ctx *p)
{
	if (p->fn) {
		p->fn(p->ud, p->key, p->ref, p->cur, p->total);
	} else if (p->key && *p->key && p->a->on_event) {
		json_t *ev = json_pack("{s:s,s:s,s:s,s:I,s:I}", "event", AGENT_EVENT_PROGRESS,
				       "session_id", p->key, "ref", p->ref, "current", (json_int_t)p->cur,
				       "total", (json_int_t)p->total);
		p->a->on_event(p->a->event_ud, p->a->id, ev);
		json_decref(ev);
	}
}

static void pull_progress(void *ud, int64_t current, int64_t total)
{
	struct pull_ctx *p = ud;
	p->cur = current;
	p->total = total;
	/* At most about once a second: a pull reports every few kilobytes. */
	int64_t now = util_mono_ms();
	if (now - p->last_ms < 1000)
		return;
	p->last_ms = now;
	pull_report(p);
}

int agent_pull(struct agent *a, const char *ref, const char *registry, const char *key,
	       agent_progress_fn fn, void *ud, struct terr *err)
{
	if (!ref || !*ref || strlen(ref) > 255)
		return terr_set(err, EINVAL, "image must be 1 to 255 characters");
	if (!registry || !*registry)
		return terr_set(err, ENOENT, "image %s is not on node %s and the cluster has no registry", ref, a->id);
	if (!a->rt_ops->pull || !a->rt_ops->tag || !a->rt_ops->image_remove)
		return terr_set(err, ENOSYS, "the container runtime of node %s cannot pull images", a->id);
	char rref[600];
	int rc = registry_ref(registry, ref, rref, sizeof(rref), err);
	if (rc < 0)
		return rc;
	struct pull_ctx p = {.a = a, .key = key, .ref = ref, .fn = fn, .ud = ud, .last_ms = util_mono_ms()};
	pull_report(&p);   /* "pulling" is seen at once, before any byte */
	rc = a->rt_ops->pull(a->rt, rref, pull_progress, &p, err);
	if (rc < 0)
		return rc;
	pull_report(&p);
	rc = a->rt_ops->tag(a->rt, rref, ref, err);
	struct terr ignored;
	a->rt_ops->image_remove(a->rt, rref, &ignored);
	return rc;
}
