/* Private images and the cluster registry, on the manager's side
 * (docs/images.md, "Private images" and "The cluster registry"):
 *   - session commit: a record per commit (committing -> ready | failed),
 *     kept in the store's settings table under "commits" as one JSON
 *     array (a few per user: max_private_images), and a dispatch job that
 *     asks the session's agent to commit the container and push it;
 *   - pulls: before a start, of an image the node lacks but the registry
 *     has (the progress in the session's status_info), and on request
 *     (`tessera image pull`, records in memory only).
 * The functions of core.h take the lock; those of state.h say. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/jsonutil.h"
#include "common/log.h"
#include "common/util.h"
#include "images/labels.h"
#include "manager/state.h"
#include "registry/registry.h"

#define COMMITS_KEY "commits"
/* Failed commits are kept for their reason, the latest ones only. */
#define COMMITS_FAILED_KEPT 50
/* Finished pulls kept for those who read their result late. */
#define PULLS_KEPT 20
/* Where private images live: PRIVATE_PREFIX<owner's namespace>/...
 * (owner_namespace); no other commit may write there. */
#define PRIVATE_PREFIX "tessera-private/"
/* Hex characters of the owner's id in their namespace. */
#define NAMESPACE_ID_CHARS 12

static const char *const commit_status_names[] = {
	[COMMIT_COMMITTING] = "committing", [COMMIT_READY] = "ready", [COMMIT_FAILED] = "failed",
};

static int commit_status_parse(const char *s)
{
	for (size_t i = 0; i < sizeof(commit_status_names) / sizeof(commit_status_names[0]); i++)
		if (s && !strcmp(s, commit_status_names[i]))
			return (int)i;
	return -1;
}

/* ---------- records and the store ---------- */

static struct mcommit *find_commit(struct manager *m, const char *id)
{
	for (size_t i = 0; i < m->n_commits; i++)
		if (!strcmp(m->commits[i]->id, id))
			return m->commits[i];
	return NULL;
}

/* Whether two image references name the same image ("x:1" and
 * "docker.io/library/x:1"): the catalog speaks in canonical ones. */
static bool same_ref(const char *a, const char *b)
{
	char ca[300], cb[300];
	struct terr ig = {0};
	if (!strcmp(a, b))
		return true;
	return img_ref_canonical(a, ca, sizeof(ca), &ig) == 0 && img_ref_canonical(b, cb, sizeof(cb), &ig) == 0 &&
	       !strcmp(ca, cb);
}

static struct mcommit *find_commit_ref(struct manager *m, const char *ref)
{
	for (size_t i = 0; i < m->n_commits; i++)
		if (m->commits[i]->status != COMMIT_FAILED && same_ref(m->commits[i]->ref, ref))
			return m->commits[i];
	return NULL;
}

/* Whether a commit's ref lies under PRIVATE_PREFIX, where every commit
 * made since issue 27 lies. A record of an earlier commit may name a
 * public image (a commit could then take any name); such a record must
 * not make that name private once the image under it is someone else's
 * again (re-tagged by an admin): the image's own label decides there. */
static bool under_private_prefix(const char *ref)
{
	return !strncmp(ref, PRIVATE_PREFIX, strlen(PRIVATE_PREFIX));
}

static json_t *commit_store_json(const struct mcommit *c)
{
	return json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:b,s:s,s:I,s:I}",
		"id", c->id, "ref", c->ref, "owner_id", c->owner_id, "session_id", c->session_id,
		"session_name", c->session_name, "source_image", c->source_image, "agent_id", c->agent_id,
		"by", c->by, "status", commit_status_names[c->status], "error", c->error, "pushed", c->pushed,
		"push_error", c->push_error, "created_ms", (json_int_t)c->created_ms,
		"finished_ms", (json_int_t)c->finished_ms);
}

static void copy_field(json_t *o, const char *key, char *dst, size_t n)
{
	const char *v = json_string_value(json_object_get(o, key));
	util_strlcpy(dst, v ? v : "", n);
}

static void persist_commits(struct manager *m)
{
	json_t *arr = json_array();
	for (size_t i = 0; i < m->n_commits; i++)
		json_array_append_new(arr, commit_store_json(m->commits[i]));
	char *text = jsonutil_dump(arr);
	json_decref(arr);
	struct terr err = {0};
	if (!text || m->so->kv_set(m->store, COMMITS_KEY, text, &err) < 0)
		log_error("manager", "cannot save the commits: %s", text ? err.msg : "out of memory");
	free(text);
}

static int append_commit(struct manager *m, struct mcommit *c)
{
	if (m->n_commits == m->cap_commits) {
		size_t ncap = m->cap_commits ? m->cap_commits * 2 : 16;
		struct mcommit **n = realloc(m->commits, ncap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		m->commits = n;
		m->cap_commits = ncap;
	}
	m->commits[m->n_commits++] = c;
	return 0;
}

static void remove_commit_at(struct manager *m, size_t i)
{
	free(m->commits[i]);
	memmove(&m->commits[i], &m->commits[i + 1], (m->n_commits - i - 1) * sizeof(m->commits[0]));
	m->n_commits--;
}

/* Keeps the latest COMMITS_FAILED_KEPT failed ones. */
static void prune_failed(struct manager *m)
{
	size_t failed = 0;
	for (size_t i = 0; i < m->n_commits; i++)
		failed += m->commits[i]->status == COMMIT_FAILED;
	for (size_t i = 0; i < m->n_commits && failed > COMMITS_FAILED_KEPT;) {
		if (m->commits[i]->status == COMMIT_FAILED) {
			remove_commit_at(m, i);
			failed--;
		} else {
			i++;
		}
	}
}

void mgr_registry_get(struct manager *m, char *host, size_t hn, char *base, size_t bn)
{
	pthread_mutex_lock(&m->reg_mu);
	if (host)
		util_strlcpy(host, m->registry_host, hn);
	if (base)
		util_strlcpy(base, m->registry_base, bn);
	pthread_mutex_unlock(&m->reg_mu);
}

void mgr_registry_apply(struct manager *m)
{
	const char *url = mgr_conf_value(m, "registry_url");
	char host[sizeof(m->registry_host)] = "", base[sizeof(m->registry_base)] = "";
	struct terr e = {0};
	if (url && *url && registry_parse_url(url, host, sizeof(host), base, sizeof(base), &e) < 0) {
		log_warn("manager", "registry_url '%s' ignored: %s", url, e.msg);
		return;
	}
	pthread_mutex_lock(&m->reg_mu);
	bool same = !strcmp(host, m->registry_host) && !strcmp(base, m->registry_base);
	util_strlcpy(m->registry_host, host, sizeof(m->registry_host));
	util_strlcpy(m->registry_base, base, sizeof(m->registry_base));
	pthread_mutex_unlock(&m->reg_mu);
	if (!same)
		log_info("manager", "the cluster registry from now on: %s", base[0] ? base : "none");
}

int mgr_commits_load(struct manager *m, struct terr *err)
{
	/* The value in force: a bad manager.conf stops the start. */
	const char *url = mgr_conf_value(m, "registry_url");
	if (url && *url && registry_parse_url(url, m->registry_host, sizeof(m->registry_host), m->registry_base,
					       sizeof(m->registry_base), err) < 0)
		return terr_prefix(err, "registry_url");
	char *text = NULL;
	struct terr e = {0};
	if (m->so->kv_get(m->store, COMMITS_KEY, &text, &e) < 0)
		return 0;   /* none yet */
	json_t *arr = json_loads(text, 0, NULL);
	free(text);
	bool interrupted = false;
	size_t i;
	json_t *o;
	json_array_foreach(arr, i, o) {
		struct mcommit *c = calloc(1, sizeof(*c));
		if (!c || append_commit(m, c) < 0) {
			free(c);
			json_decref(arr);
			return terr_set(err, ENOMEM, "out of memory");
		}
		copy_field(o, "id", c->id, sizeof(c->id));
		copy_field(o, "ref", c->ref, sizeof(c->ref));
		copy_field(o, "owner_id", c->owner_id, sizeof(c->owner_id));
		copy_field(o, "session_id", c->session_id, sizeof(c->session_id));
		copy_field(o, "session_name", c->session_name, sizeof(c->session_name));
		copy_field(o, "source_image", c->source_image, sizeof(c->source_image));
		copy_field(o, "agent_id", c->agent_id, sizeof(c->agent_id));
		copy_field(o, "by", c->by, sizeof(c->by));
		copy_field(o, "error", c->error, sizeof(c->error));
		copy_field(o, "push_error", c->push_error, sizeof(c->push_error));
		c->pushed = json_is_true(json_object_get(o, "pushed"));
		c->created_ms = json_integer_value(json_object_get(o, "created_ms"));
		c->finished_ms = json_integer_value(json_object_get(o, "finished_ms"));
		int st = commit_status_parse(json_string_value(json_object_get(o, "status")));
		c->status = st < 0 ? COMMIT_FAILED : (enum commit_status)st;
		if (c->status == COMMIT_COMMITTING) {
			/* Its job went with the process that ran it. */
			c->status = COMMIT_FAILED;
			c->finished_ms = util_now_ms();
			util_strlcpy(c->error, "interrupted: the manager stopped during the commit; commit again",
				     sizeof(c->error));
			interrupted = true;
		}
	}
	json_decref(arr);
	if (interrupted)
		persist_commits(m);
	return 0;
}

void mgr_commits_free(struct manager *m)
{
	for (size_t i = 0; i < m->n_commits; i++)
		free(m->commits[i]);
	free(m->commits);
	m->commits = NULL;
	m->n_commits = m->cap_commits = 0;
	for (size_t i = 0; i < m->n_pulls; i++) {
		json_decref(m->pulls[i]->nodes);
		free(m->pulls[i]);
	}
	free(m->pulls);
	m->pulls = NULL;
	m->n_pulls = 0;
}

/* ---------- views ---------- */

/* As an entry of GET /v1/images (docs/api.md), with the commit's own
 * fields beside. */
static json_t *commit_json(struct manager *m, const struct mcommit *c)
{
	const struct user_rec *owner = mgr_find_user(m, c->owner_id);
	/* ref is always "name:tag" (mgr_session_commit makes it so). */
	char name[256];
	util_strlcpy(name, c->ref, sizeof(name));
	char *colon = strrchr(name, ':');
	const char *tag = "latest";
	if (colon && !strchr(colon, '/')) {
		*colon = '\0';
		tag = c->ref + (colon + 1 - name);
	}
	json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:s,s:o,s:s,s:s,s:[],s:b,s:s,s:s,s:s,s:o,s:o}",
		"id", c->id, "ref", c->ref, "name", name, "tag", tag,
		"family", name, "owner", owner ? json_string(owner->email) : json_null(),
		"visibility", "private", "status", commit_status_names[c->status], "nodes",
		"in_registry", c->pushed, "source_session", c->session_name, "source_image", c->source_image,
		"committed_by", c->by, "created_at", mgr_time_json(c->created_ms),
		"finished_at", mgr_time_json(c->finished_ms));
	if (c->status == COMMIT_READY)
		json_array_append_new(json_object_get(o, "nodes"), json_string(c->agent_id));
	if (c->error[0])
		json_object_set_new(o, "error", json_string(c->error));
	if (c->push_error[0])
		json_object_set_new(o, "push_error", json_string(c->push_error));
	return o;
}

static bool may_see(const struct user_rec *u, const char *owner_id)
{
	return u->is_admin || !strcmp(u->id, owner_id);
}

const char *mgr_commit_owner(struct manager *m, const char *ref)
{
	const struct mcommit *c = find_commit_ref(m, ref);
	return c && under_private_prefix(c->ref) ? c->owner_id : NULL;
}

bool mgr_commit_hidden(struct manager *m, const struct user_rec *u, const char *ref)
{
	const struct mcommit *c = find_commit_ref(m, ref);
	return c && !may_see(u, c->owner_id);
}

json_t *mgr_commit_last_json(struct manager *m, const char *session_id)
{
	for (size_t i = m->n_commits; i-- > 0;)
		if (!strcmp(m->commits[i]->session_id, session_id))
			return commit_json(m, m->commits[i]);
	return json_null();
}

void mgr_commits_annotate(struct manager *m, json_t *images)
{
	size_t i;
	json_t *img;
	pthread_mutex_lock(&m->mu);
	json_array_foreach(images, i, img) {
		const char *ref = json_string_value(json_object_get(img, "ref"));
		const struct mcommit *c = ref ? find_commit_ref(m, ref) : NULL;
		if (!c || c->status != COMMIT_READY)
			continue;
		json_object_set_new(img, "in_registry", json_boolean(c->pushed));
		json_object_set_new(img, "source_session", json_string(c->session_name));
		json_object_set_new(img, "source_image", json_string(c->source_image));
		json_object_set_new(img, "committed_by", json_string(c->by));
		/* When it was made: the Environments page lists one's own
		 * images newest first. */
		json_object_set_new(img, "committed_at", mgr_time_json(c->finished_ms ? c->finished_ms : c->created_ms));
		if (c->push_error[0])
			json_object_set_new(img, "push_error", json_string(c->push_error));
	}
	pthread_mutex_unlock(&m->mu);
}

json_t *mgr_commits_json(struct manager *m, const struct user_rec *caller)
{
	json_t *arr = json_array();
	pthread_mutex_lock(&m->mu);
	for (size_t i = 0; i < m->n_commits; i++) {
		const struct mcommit *c = m->commits[i];
		if (c->status != COMMIT_READY && may_see(caller, c->owner_id))
			json_array_append_new(arr, commit_json(m, c));
	}
	pthread_mutex_unlock(&m->mu);
	return arr;
}

/* ---------- session commit ---------- */

/* One path component of a Docker repository name from free text (an
 * email's local part, a session name): lower case, runs of anything but
 * [a-z0-9] become one '-', none at the ends; fallback when nothing is
 * left. Docker's grammar: [a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*. */
static void name_component(const char *in, size_t in_n, const char *fallback, char *out, size_t n)
{
	size_t k = 0;
	bool dash = false;
	for (size_t i = 0; i < in_n && in[i] && k + 2 < n; i++) {
		unsigned char ch = (unsigned char)in[i];
		if (isalnum(ch) && isascii(ch)) {
			if (dash && k > 0)
				out[k++] = '-';
			dash = false;
			out[k++] = (char)tolower(ch);
		} else {
			dash = true;
		}
	}
	out[k] = '\0';
	if (!k)
		util_strlcpy(out, fallback, n);
}

/* A tag as Docker takes it: [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}. */
static int check_tag(const char *tag, struct terr *err)
{
	size_t n = strlen(tag);
	if (n == 0 || n > 128 || tag[0] == '.' || tag[0] == '-')
		return terr_set(err, EINVAL, "tag '%s' must be 1 to 128 characters, not starting with '.' or '-'", tag);
	for (size_t i = 0; i < n; i++)
		if (!isascii((unsigned char)tag[i]) ||
		    !(isalnum((unsigned char)tag[i]) || tag[i] == '_' || tag[i] == '.' || tag[i] == '-'))
			return terr_set(err, EINVAL, "tag '%s' may contain only letters, digits, '_', '.' and '-'", tag);
	return 0;
}

/* An image name without tag or digest, lower case, no registry host:
 * the image is the cluster's, pushed to its registry under this name. */
static int check_name(const char *name, struct terr *err)
{
	if (validate_image_ref(name, err) < 0)
		return -EINVAL;
	const char *slash = strrchr(name, '/');
	if (strchr(slash ? slash : name, ':') || strchr(name, '@'))
		return terr_set(err, EINVAL, "image name '%s' must not carry a tag or digest; give the tag with --tag", name);
	/* Docker reads a first component with '.' or ':', or "localhost",
	 * as a registry host. */
	const char *first = strchr(name, '/');
	size_t n = first ? (size_t)(first - name) : 0;
	if (first && (memchr(name, '.', n) || memchr(name, ':', n) || !strncmp(name, "localhost/", 10)))
		return terr_set(err, EINVAL, "image name '%s' must not name a registry host: "
				"private images go to the cluster registry", name);
	return 0;
}

/* The owner's namespace under PRIVATE_PREFIX: their email up to the '@'
 * (for people to read) and the first NAMESPACE_ID_CHARS of their id (so
 * that alice@a.example and alice@b.example, or "a.b" and "a-b", do not
 * share one), e.g. "alice-3f9a0c1e2b4d". Docker's grammar holds: both
 * parts are runs of [a-z0-9] (ids are lower-case hex) joined by '-'. */
static void owner_namespace(const struct user_rec *owner, char *out, size_t n)
{
	char who[64], id[NAMESPACE_ID_CHARS + 2];
	const char *at = strchr(owner->email, '@');
	name_component(owner->email, at ? (size_t)(at - owner->email) : strlen(owner->email), "user", who,
		       sizeof(who));
	name_component(owner->id, NAMESPACE_ID_CHARS, "0", id, sizeof(id));
	snprintf(out, n, "%s-%s", who, id);
}

/* The full name of a commit of owner's: PRIVATE_PREFIX, the owner's
 * namespace, then `name` (or the session's name). A name given with
 * PRIVATE_PREFIX must already be in the owner's namespace: a commit writes
 * nowhere else, so it never moves a tag of a public image or of another
 * user's private one (docs/images.md, "Private images"). */
static int private_name(struct manager *m, const struct user_rec *owner, const char *name, const char *session,
			char *full, size_t n, struct terr *err)
{
	char ns[128];
	owner_namespace(owner, ns, sizeof(ns));
	/* Ids are random: two users with one namespace would take about
	 * 2^24 users of the same local part. Still, none of them writes into
	 * the other's images then. */
	for (size_t i = 0; i < m->n_users; i++) {
		char other[128];
		if (strcmp(m->users[i].id, owner->id) == 0)
			continue;
		owner_namespace(&m->users[i], other, sizeof(other));
		if (!strcmp(other, ns))
			return terr_set(err, EEXIST, "the private images of %s and of %s would share the name space "
					PRIVATE_PREFIX "%s/; an admin must change one of the two emails",
					owner->email, m->users[i].email, ns);
	}
	size_t plen = strlen(PRIVATE_PREFIX), nslen = strlen(ns);
	if (name && !strncmp(name, PRIVATE_PREFIX, plen)) {
		if (strncmp(name + plen, ns, nslen) || name[plen + nslen] != '/' || !name[plen + nslen + 1])
			return terr_set(err, EINVAL,
					"image name '%s' is not among the private images of %s: those are named "
					PRIVATE_PREFIX "%s/NAME; give just NAME", name, owner->email, ns);
		snprintf(full, n, "%s", name);
		return 0;
	}
	char what[64];
	if (!name)
		name_component(session, strlen(session), "session", what, sizeof(what));
	snprintf(full, n, PRIVATE_PREFIX "%s/%s", ns, name ? name : what);
	return 0;
}

static int owned_private_images(struct manager *m, const char *owner_id)
{
	int n = 0;
	for (size_t i = 0; i < m->n_commits; i++)
		n += m->commits[i]->status != COMMIT_FAILED && !strcmp(m->commits[i]->owner_id, owner_id);
	return n;
}

int mgr_session_commit(struct manager *m, const struct user_rec *u, const char *ref, const char *name,
		       const char *tag, json_t **commit, struct terr *err)
{
	if (name && check_name(name, err) < 0)
		return -EINVAL;
	if (tag && check_tag(tag, err) < 0)
		return -EINVAL;
	int rc = 0;
	pthread_mutex_lock(&m->mu);
	struct msession *s = mgr_resolve_session(m, ref, u);
	struct magent *a = s ? mgr_find_agent(m, s->rec.agent_id) : NULL;
	const struct user_rec *owner = s ? mgr_find_user(m, s->rec.owner_id) : NULL;
	if (!s) {
		rc = terr_set(err, ENOENT, "no session named or with id '%s'", ref);
		goto out;
	}
	if (!mgr_session_enterable(u, s)) {
		rc = mgr_not_enterable(s, err);
		goto out;
	}
	/* Its containers differ (each wrote its own files): no one image
	 * is the session's. */
	if (mgr_session_is_cluster(s)) {
		rc = terr_set(err, EINVAL, "session %s is a cluster session of %lld containers, which cannot be "
			      "committed: commit a one-container session set up as you want the image (docs/images.md)",
			      s->rec.name, (long long)s->rec.cluster_size);
		goto out;
	}
	if (s->rec.status != SS_RUNNING || !s->rec.container_id[0]) {
		rc = terr_set(err, EBUSY, "session %s is %s; only a RUNNING session can be committed", s->rec.name,
			      session_status_name(s->rec.status));
		goto out;
	}
	if (!a || !a->alive || !a->link || !a->link->commit) {
		rc = terr_set(err, EAGAIN, "node %s of session %s is not reachable now", s->rec.agent_id, s->rec.name);
		goto out;
	}
	if (!owner) {
		rc = terr_set(err, ENOENT, "the owner of session %s is not known", s->rec.name);
		goto out;
	}
	struct mcommit *c = calloc(1, sizeof(*c));
	if (!c) {
		rc = terr_set(err, ENOMEM, "out of memory");
		goto out;
	}
	char full[600];
	if ((rc = private_name(m, owner, name, s->rec.name, full, sizeof(full), err)) < 0) {
		free(c);
		goto out;
	}
	char stamp[32];
	if (!tag) {
		time_t now = time(NULL);
		struct tm tm;
		gmtime_r(&now, &tm);
		strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
	}
	size_t len = strlen(full);
	snprintf(full + len, sizeof(full) - len, ":%s", tag ? tag : stamp);
	if (strlen(full) >= sizeof(c->ref)) {
		free(c);
		rc = terr_set(err, EINVAL, "image name %s is longer than %zu characters", full, sizeof(c->ref) - 1);
		goto out;
	}
	if (find_commit_ref(m, full)) {
		free(c);
		rc = terr_set(err, EEXIST, "image %s exists already; choose another --tag", full);
		goto out;
	}
	int64_t limit = mgr_user_max_private_images(m, owner->email);
	int have = owned_private_images(m, owner->id);
	if (limit > 0 && have >= limit) {
		free(c);
		rc = terr_set(err, EPERM,
			      "%s has %d private images, the most the policy max_private_images allows (%lld); "
			      "remove one first (tessera image rm IMAGE)", owner->email, have, (long long)limit);
		goto out;
	}
	util_new_id(c->id, NULL);
	util_strlcpy(c->ref, full, sizeof(c->ref));
	util_strlcpy(c->owner_id, owner->id, sizeof(c->owner_id));
	util_strlcpy(c->session_id, s->rec.id, sizeof(c->session_id));
	util_strlcpy(c->session_name, s->rec.name, sizeof(c->session_name));
	util_strlcpy(c->source_image, s->rec.image, sizeof(c->source_image));
	util_strlcpy(c->agent_id, s->rec.agent_id, sizeof(c->agent_id));
	util_strlcpy(c->by, u->email, sizeof(c->by));
	c->status = COMMIT_COMMITTING;
	c->created_ms = util_now_ms();
	if (append_commit(m, c) < 0) {
		free(c);
		rc = terr_set(err, ENOMEM, "out of memory");
		goto out;
	}
	prune_failed(m);
	persist_commits(m);
	m->version++;
	mgr_enqueue(m, JOB_COMMIT, c->id);
	log_info("manager", "committing session %s (%.8s) into %s for %s, on request of %s", s->rec.name, s->rec.id,
		 c->ref, owner->email, u->email);
	*commit = commit_json(m, c);
out:
	pthread_mutex_unlock(&m->mu);
	return rc;
}

static void finish_commit(struct manager *m, struct mcommit *c, int rc, const struct terr *err, json_t *result)
{
	c->finished_ms = util_now_ms();
	if (rc < 0) {
		c->status = COMMIT_FAILED;
		util_strlcpy(c->error, err->msg[0] ? err->msg : "the commit failed", sizeof(c->error));
		log_warn("manager", "commit of %s into %s failed: %s", c->session_name, c->ref, c->error);
	} else {
		c->status = COMMIT_READY;
		c->pushed = json_is_true(json_object_get(result, "pushed"));
		const char *pe = json_string_value(json_object_get(result, "push_error"));
		util_strlcpy(c->push_error, pe ? pe : "", sizeof(c->push_error));
		log_info("manager", "session %s committed into %s%s%s%s", c->session_name, c->ref,
			 c->pushed ? " and pushed to the registry" : "", pe ? "; the push failed: " : "", pe ? pe : "");
	}
	prune_failed(m);
	persist_commits(m);
	m->version++;
	pthread_cond_broadcast(&m->changed);
}

void mgr_run_commit(struct manager *m, const char *commit_id)
{
	pthread_mutex_lock(&m->mu);
	struct mcommit *c = find_commit(m, commit_id);
	if (!c || c->status != COMMIT_COMMITTING) {
		pthread_mutex_unlock(&m->mu);
		return;
	}
	struct msession *s = mgr_find_session(m, c->session_id);
	struct magent *a = s ? mgr_find_agent(m, s->rec.agent_id) : NULL;
	struct terr err = {0};
	if (!s || s->rec.status != SS_RUNNING || !s->rec.container_id[0] || !a || !a->alive || !a->link) {
		terr_set(&err, EBUSY, "session %s is %s now; it must be RUNNING on a reachable node", c->session_name,
			 s ? session_status_name(s->rec.status) : "gone");
		finish_commit(m, c, -EBUSY, &err, NULL);
		pthread_mutex_unlock(&m->mu);
		return;
	}
	char when[40];
	util_format_time_ms(c->created_ms, when, sizeof(when));
	/* The registry in force now: a change applies from the next commit. */
	char reg_host[sizeof(m->registry_host)];
	mgr_registry_get(m, reg_host, sizeof(reg_host), NULL, 0);
	json_t *req = json_pack("{s:s,s:s,s:{s:s,s:s,s:s,s:s,s:s},s:s,s:s}",
		"container_id", s->rec.container_id, "ref", c->ref,
		"labels", "tessera.owner", c->owner_id, "tessera.source.session", c->session_id,
		"tessera.source.image", c->source_image, "tessera.committed", when,
		"ai.backend.features", "private",
		"source_image", c->source_image, "registry", reg_host);
	const struct agent_link_ops *link = a->link;
	void *ctx = a->link_ctx;
	char id[STORE_ID_MAX], agent_id[STORE_NAME_MAX];
	util_strlcpy(id, c->id, sizeof(id));
	util_strlcpy(agent_id, a->rec.id, sizeof(agent_id));
	pthread_mutex_unlock(&m->mu);

	json_t *result = NULL;
	int rc = req ? link->commit(ctx, req, &result, &err) : terr_set(&err, ENOMEM, "out of memory");
	json_decref(req);
	/* The node's image list, read again before the commit says ready: the
	 * agent's image event would bring the new image into the catalog too,
	 * but only a moment later, and a client that saw "ready" lists the
	 * images next. */
	json_t *images = NULL;
	struct terr ierr = {0};
	if (rc == 0 && link->images && link->images(ctx, &images, &ierr) < 0) {
		log_warn("manager", "listing images on %s after a commit: %s", agent_id, ierr.msg);
		images = NULL;
	}

	pthread_mutex_lock(&m->mu);
	struct magent *na = images ? mgr_find_agent(m, agent_id) : NULL;
	if (na)
		mgr_agent_set_images(na, images);
	json_decref(images);
	if ((c = find_commit(m, id)) && c->status == COMMIT_COMMITTING)
		finish_commit(m, c, rc, &err, result);
	pthread_mutex_unlock(&m->mu);
	json_decref(result);
}

int mgr_commit_get(struct manager *m, const struct user_rec *u, const char *id, int wait_s, json_t **commit,
		   struct terr *err)
{
	pthread_mutex_lock(&m->mu);
	struct mcommit *c = find_commit(m, id);
	if (c && !may_see(u, c->owner_id) && strcmp(c->by, u->email))
		c = NULL;
	if (c && wait_s >= 0) {
		struct timespec dl;
		clock_gettime(CLOCK_MONOTONIC, &dl);
		dl.tv_sec += wait_s;
		/* Found again after each wait: a record may go meanwhile
		 * (prune_failed, mgr_commit_forget). */
		while (c && c->status == COMMIT_COMMITTING && !m->stopping &&
		       pthread_cond_timedwait(&m->changed, &m->mu, &dl) == 0)
			c = find_commit(m, id);
		c = c ? find_commit(m, id) : NULL;
	}
	json_t *o = c ? commit_json(m, c) : NULL;
	pthread_mutex_unlock(&m->mu);
	if (!o)
		return terr_set(err, ENOENT, "no commit with id '%s'", id);
	*commit = o;
	return 0;
}

int mgr_commit_forget(struct manager *m, const char *ref)
{
	pthread_mutex_lock(&m->mu);
	int rc = -ENOENT;
	for (size_t i = 0; i < m->n_commits; i++) {
		if (m->commits[i]->status == COMMIT_READY && same_ref(m->commits[i]->ref, ref)) {
			remove_commit_at(m, i);
			persist_commits(m);
			m->version++;
			rc = 0;
			break;
		}
	}
	pthread_mutex_unlock(&m->mu);
	return rc;
}

/* ---------- pulls ---------- */

bool mgr_registry_has(struct manager *m, const char *ref)
{
	char base[sizeof(m->registry_base)];
	mgr_registry_get(m, NULL, 0, base, sizeof(base));
	if (!base[0])
		return false;
	bool has = false;
	struct terr err = {0};
	if (registry_has_image(base, ref, &has, &err) < 0) {
		log_warn("manager", "asking the registry for %s: %s", ref, err.msg);
		return false;
	}
	return has;
}

/* "412 of 980 MB" (decimal megabytes, as Docker shows them). */
static void progress_words(int64_t current, int64_t total, char *buf, size_t n)
{
	/* Small layers (a commit's own) read better in kB. */
	int64_t unit = total >= 1000000 ? 1000000 : 1000;
	if (total > 0)
		snprintf(buf, n, "%lld of %lld %s", (long long)((current + unit / 2) / unit),
			 (long long)((total + unit / 2) / unit), unit == 1000 ? "kB" : "MB");
	else
		snprintf(buf, n, "starting");
}

/* The progress of a session's pull: its status_info, while it is still
 * PREPARING on that node. Takes mu. */
static void session_pull_progress(struct manager *m, const char *agent_id, const char *sid, const char *ref,
				  int64_t current, int64_t total)
{
	pthread_mutex_lock(&m->mu);
	struct msession *s = mgr_find_session(m, sid);
	if (s && s->rec.status == SS_PREPARING && !strcmp(s->rec.agent_id, agent_id)) {
		char words[64];
		progress_words(current, total, words, sizeof(words));
		snprintf(s->rec.status_info, sizeof(s->rec.status_info), "pulling %s: %s", ref, words);
		mgr_persist(m, s);
		m->version++;
		pthread_cond_broadcast(&m->changed);
	}
	pthread_mutex_unlock(&m->mu);
}

struct start_pull {
	struct manager *m;
	const char *agent_id;
};

static void start_pull_progress(void *ud, const char *key, const char *ref, int64_t current, int64_t total)
{
	struct start_pull *sp = ud;
	session_pull_progress(sp->m, sp->agent_id, key, ref, current, total);
}

int mgr_pull_for_start(struct manager *m, const char *session_id, const struct agent_link_ops *link, void *ctx,
		       const char *agent_id, const char *image, struct terr *err)
{
	char reg_host[sizeof(m->registry_host)];
	mgr_registry_get(m, reg_host, sizeof(reg_host), NULL, 0);
	if (!reg_host[0] || !link->pull)
		return 0;   /* the start reports a missing image itself */
	bool exists = false;
	struct terr e = {0};
	if (link->image_exists(ctx, image, &exists, &e) == 0 && exists)
		return 0;
	pthread_mutex_lock(&m->mu);
	struct msession *s = mgr_find_session(m, session_id);
	if (!s || s->rec.status != SS_PREPARING) {
		pthread_mutex_unlock(&m->mu);
		return terr_set(err, ECANCELED, "the session was deleted while it was starting");
	}
	snprintf(s->rec.status_info, sizeof(s->rec.status_info), "pulling %s from the registry onto node %s", image,
		 agent_id);
	/* A line of its own in the status history: the pull is a stage of
	 * PREPARING worth seeing afterwards (how long it took). */
	mgr_session_note_past(m, s, util_now_ms(), s->rec.status_info);
	mgr_persist(m, s);
	m->version++;
	pthread_cond_broadcast(&m->changed);
	pthread_mutex_unlock(&m->mu);

	struct start_pull sp = {m, agent_id};
	int rc = link->pull(ctx, image, reg_host, session_id, start_pull_progress, &sp, err);
	if (rc < 0)
		return terr_prefix(err, "could not pull %s from the registry", image);
	pthread_mutex_lock(&m->mu);
	if ((s = mgr_find_session(m, session_id)) && s->rec.status == SS_PREPARING) {
		snprintf(s->rec.status_info, sizeof(s->rec.status_info), "pulled %s; creating the container on node %s",
			 image, agent_id);
		/* The pull's end, a line too: the start's breakdown counts the
		 * pull up to here (sessions.c, mgr_start_breakdown). */
		mgr_session_note_past(m, s, util_now_ms(), s->rec.status_info);
		mgr_persist(m, s);
		m->version++;
		pthread_cond_broadcast(&m->changed);
	} else {
		rc = terr_set(err, ECANCELED, "the session was deleted while its image was pulled");
	}
	pthread_mutex_unlock(&m->mu);
	return rc;
}

static struct mpull *find_pull(struct manager *m, const char *id)
{
	for (size_t i = 0; i < m->n_pulls; i++)
		if (!strcmp(m->pulls[i]->id, id))
			return m->pulls[i];
	return NULL;
}

static json_t *pull_json(const struct mpull *p)
{
	return json_pack("{s:s,s:s,s:O,s:b,s:o}", "id", p->id, "image", p->ref, "nodes", p->nodes, "done", p->done,
			 "created_at", mgr_time_json(p->created_ms));
}

/* A node's entry of a pull's progress; takes mu. */
static void pull_node_update(struct manager *m, const char *pull_id, const char *node, const char *status,
			     int64_t current, int64_t total, const char *error)
{
	pthread_mutex_lock(&m->mu);
	struct mpull *p = find_pull(m, pull_id);
	size_t i;
	json_t *e;
	json_array_foreach(p ? p->nodes : NULL, i, e) {
		if (strcmp(json_string_value(json_object_get(e, "node")) ?: "", node))
			continue;
		if (status)
			json_object_set_new(e, "status", json_string(status));
		if (current >= 0) {
			json_object_set_new(e, "current", json_integer(current));
			json_object_set_new(e, "total", json_integer(total));
		}
		if (error)
			json_object_set_new(e, "error", json_string(error));
	}
	m->version++;
	pthread_cond_broadcast(&m->changed);
	pthread_mutex_unlock(&m->mu);
}

struct image_pull {
	struct manager *m;
	const char *pull_id, *node;
};

static void image_pull_progress(void *ud, const char *key, const char *ref, int64_t current, int64_t total)
{
	(void)key;
	(void)ref;
	struct image_pull *ip = ud;
	pull_node_update(ip->m, ip->pull_id, ip->node, NULL, current, total, NULL);
}

void mgr_pull_progress_event(struct manager *m, const char *agent_id, json_t *event)
{
	const char *key = json_string_value(json_object_get(event, "session_id"));
	const char *ref = json_string_value(json_object_get(event, "ref"));
	int64_t cur = json_integer_value(json_object_get(event, "current"));
	int64_t total = json_integer_value(json_object_get(event, "total"));
	if (!key || !ref)
		return;
	if (!strncmp(key, "pull:", 5))
		pull_node_update(m, key + 5, agent_id, NULL, cur, total, NULL);
	else
		session_pull_progress(m, agent_id, key, ref, cur, total);
}

int mgr_image_pull(struct manager *m, const struct user_rec *u, const char *image, const char *node,
		   json_t **pull, struct terr *err)
{
	if (validate_image_ref(image, err) < 0)
		return -EINVAL;
	char reg_base[sizeof(m->registry_base)];
	mgr_registry_get(m, NULL, 0, reg_base, sizeof(reg_base));
	if (!reg_base[0])
		return terr_set(err, EINVAL, "the cluster has no registry (tessera config set registry_url URL, "
				"registry_url in manager.conf, tessera server --registry)");
	pthread_mutex_lock(&m->mu);
	bool hidden = mgr_commit_hidden(m, u, image);
	pthread_mutex_unlock(&m->mu);
	/* A private image of someone else is as absent as one nobody made. */
	if (hidden || !mgr_registry_has(m, image))
		return terr_set(err, ENOENT, "image %s is not in the cluster registry", image);
	struct mpull *p = calloc(1, sizeof(*p));
	if (!p)
		return terr_set(err, ENOMEM, "out of memory");
	util_new_id(p->id, NULL);
	util_strlcpy(p->ref, image, sizeof(p->ref));
	util_strlcpy(p->owner_id, u->id, sizeof(p->owner_id));
	util_strlcpy(p->node, node ? node : "", sizeof(p->node));
	p->created_ms = util_now_ms();
	p->nodes = json_array();
	int rc = 0;
	pthread_mutex_lock(&m->mu);
	for (size_t i = 0; i < m->n_agents; i++) {
		struct magent *a = m->agents[i];
		if ((node && strcmp(a->rec.id, node)) || (!node && !a->alive))
			continue;
		json_array_append_new(p->nodes, json_pack("{s:s,s:s,s:i,s:i}", "node", a->rec.id, "status",
							  a->alive ? "queued" : "failed", "current", 0, "total", 0));
		if (!a->alive)
			json_object_set_new(json_array_get(p->nodes, json_array_size(p->nodes) - 1), "error",
					    json_string("the node is LOST"));
	}
	if (json_array_size(p->nodes) == 0) {
		rc = node ? terr_set(err, ENOENT, "no node '%s' (see 'tessera node ls')", node)
			  : terr_set(err, EAGAIN, "no node is alive right now");
	} else {
		if (m->n_pulls == PULLS_KEPT) {
			/* The oldest goes; a job still running on it finds it gone. */
			json_decref(m->pulls[0]->nodes);
			free(m->pulls[0]);
			memmove(&m->pulls[0], &m->pulls[1], (m->n_pulls - 1) * sizeof(m->pulls[0]));
			m->n_pulls--;
		}
		struct mpull **n = realloc(m->pulls, (m->n_pulls + 1) * sizeof(*n));
		if (!n) {
			rc = terr_set(err, ENOMEM, "out of memory");
		} else {
			m->pulls = n;
			m->pulls[m->n_pulls++] = p;
			mgr_enqueue(m, JOB_PULL, p->id);
			*pull = pull_json(p);
			p = NULL;
		}
	}
	pthread_mutex_unlock(&m->mu);
	if (p) {
		json_decref(p->nodes);
		free(p);
	}
	return rc;
}

void mgr_run_pull(struct manager *m, const char *pull_id)
{
	/* One node after the other: each is a call that lasts the pull. The
	 * registry as the pull starts, for all of them: a change of
	 * registry_url applies from the next pull. */
	char reg_host[sizeof(m->registry_host)];
	mgr_registry_get(m, reg_host, sizeof(reg_host), NULL, 0);
	for (size_t k = 0;; k++) {
		pthread_mutex_lock(&m->mu);
		struct mpull *p = find_pull(m, pull_id);
		json_t *e = p ? json_array_get(p->nodes, k) : NULL;
		if (!e) {
			if (p)
				p->done = true;
			m->version++;
			pthread_cond_broadcast(&m->changed);
			pthread_mutex_unlock(&m->mu);
			return;
		}
		char node[STORE_NAME_MAX], ref[256];
		util_strlcpy(node, json_string_value(json_object_get(e, "node")) ?: "", sizeof(node));
		util_strlcpy(ref, p->ref, sizeof(ref));
		struct magent *a = mgr_find_agent(m, node);
		bool skip = strcmp(json_string_value(json_object_get(e, "status")) ?: "", "queued") != 0;
		if (!skip && (!a || !a->alive || !a->link || !a->link->pull)) {
			json_object_set_new(e, "status", json_string("failed"));
			json_object_set_new(e, "error", json_string("the node is not reachable"));
			skip = true;
		}
		const struct agent_link_ops *link = a ? a->link : NULL;
		void *ctx = a ? a->link_ctx : NULL;
		if (!skip)
			json_object_set_new(e, "status", json_string("pulling"));
		m->version++;
		pthread_mutex_unlock(&m->mu);
		if (skip)
			continue;
		char key[STORE_ID_MAX + 8];
		snprintf(key, sizeof(key), "pull:%s", pull_id);
		struct image_pull ip = {m, pull_id, node};
		struct terr err = {0};
		int rc = link->pull(ctx, ref, reg_host, key, image_pull_progress, &ip, &err);
		pull_node_update(m, pull_id, node, rc < 0 ? "failed" : "done", -1, 0, rc < 0 ? err.msg : NULL);
	}
}

int mgr_image_pull_get(struct manager *m, const struct user_rec *u, const char *id, json_t **pull,
		       struct terr *err)
{
	pthread_mutex_lock(&m->mu);
	struct mpull *p = find_pull(m, id);
	json_t *o = p && (u->is_admin || !strcmp(p->owner_id, u->id)) ? pull_json(p) : NULL;
	pthread_mutex_unlock(&m->mu);
	if (!o)
		return terr_set(err, ENOENT, "no image pull with id '%s'", id);
	*pull = o;
	return 0;
}
