/* The image catalog: what each agent reports of its images (at
 * registration, after Docker's image events, on rescan), read through
 * their labels (images/labels.h) into what users may launch; the aliases
 * (kept in the store's settings under "image_aliases"); image removal;
 * and the check of a create request's image (visibility, minimum).
 *
 * Visibility (docs/images.md, "The image catalog"): an image labelled
 * tessera.owner is its owner's and the admins'; to anyone else it does
 * not exist, and every path here answers for it exactly as for a name no
 * node has. An image whose ai.backend.features say "private" is hidden
 * from the lists (not from launching by name) unless an admin asks for
 * all. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/units.h"
#include "common/util.h"
#include "images/labels.h"
#include "manager/state.h"

#define ALIASES_KEY "image_aliases"

/* ---------- the agents' lists ---------- */

/* An agent's list in one shape: [{"id","tags","size","labels"}], entries
 * of an earlier agent ("repo:tag" strings) turned into that shape, others
 * dropped. New reference, shares nothing with `list`. */
static json_t *normalize_list(json_t *list)
{
	json_t *out = json_array();
	size_t i;
	json_t *e;
	json_array_foreach(list, i, e) {
		if (json_is_string(e)) {
			json_array_append_new(out, json_pack("{s:s,s:[s],s:i,s:o}", "id", "", "tags", json_string_value(e),
							     "size", 0, "labels", json_object()));
			continue;
		}
		json_t *tags = json_object_get(e, "tags");
		if (!json_is_object(e) || !json_is_array(tags))
			continue;
		json_array_append_new(out, json_deep_copy(e));
	}
	return out;
}

void mgr_agent_set_images(struct magent *a, json_t *list)
{
	json_decref(a->images);
	a->images = json_is_array(list) ? normalize_list(list) : NULL;
}

void mgr_images_free(struct manager *m)
{
	for (size_t i = 0; i < m->n_agents; i++) {
		json_decref(m->agents[i]->images);
		m->agents[i]->images = NULL;
	}
	json_decref(m->image_aliases);
	m->image_aliases = NULL;
}

int mgr_images_load(struct manager *m, struct terr *err)
{
	(void)err;
	char *text = NULL;
	struct terr e = {0};
	m->image_aliases = NULL;
	if (m->so->kv_get(m->store, ALIASES_KEY, &text, &e) == 0) {
		m->image_aliases = json_loads(text, 0, NULL);
		free(text);
	}
	if (!json_is_object(m->image_aliases)) {
		json_decref(m->image_aliases);
		m->image_aliases = json_object();
	}
	return 0;
}

/* Asks the alive agents (all, or only those whose list is unknown) for
 * their images, without the lock, and records the answers. Returns how
 * many answered; *failed the last error. */
static int refresh_agents(struct manager *m, bool only_unknown, struct terr *failed)
{
	struct probe { const struct agent_link_ops *link; void *ctx; char id[STORE_NAME_MAX]; json_t *list; } *probes;
	size_t n = 0;
	pthread_mutex_lock(&m->mu);
	probes = calloc(m->n_agents ? m->n_agents : 1, sizeof(*probes));
	for (size_t i = 0; probes && i < m->n_agents; i++) {
		struct magent *a = m->agents[i];
		if (!a->alive || !a->link || (only_unknown && a->images))
			continue;
		probes[n].link = a->link;
		probes[n].ctx = a->link_ctx;
		util_strlcpy(probes[n].id, a->rec.id, sizeof(probes[n].id));
		n++;
	}
	pthread_mutex_unlock(&m->mu);
	if (!probes)
		return 0;
	int answered = 0;
	for (size_t i = 0; i < n; i++) {
		struct terr err = {0};
		if (probes[i].link->images(probes[i].ctx, &probes[i].list, &err) < 0) {
			log_warn("manager", "listing images on %s: %s", probes[i].id, err.msg);
			if (failed)
				*failed = err;
			probes[i].list = NULL;
		}
	}
	pthread_mutex_lock(&m->mu);
	for (size_t i = 0; i < n; i++) {
		struct magent *a = mgr_find_agent(m, probes[i].id);
		if (probes[i].list && a) {
			mgr_agent_set_images(a, probes[i].list);
			answered++;
		}
		json_decref(probes[i].list);
	}
	pthread_mutex_unlock(&m->mu);
	free(probes);
	return answered;
}

/* ---------- the catalog ---------- */

/* One image as the catalog sees it, gathered over the agents. */
struct centry {
	char ref[300];          /* canonical */
	struct img_ref parsed;
	struct img_meta meta;
	char id[80];
	int64_t size;
	json_t *nodes;          /* array of agent ids (new values) */
};

struct catalog {
	struct centry *e;
	size_t n, cap;
};

static void catalog_free(struct catalog *c)
{
	for (size_t i = 0; i < c->n; i++)
		json_decref(c->e[i].nodes);
	free(c->e);
	c->e = NULL;
	c->n = c->cap = 0;
}

static struct centry *catalog_find(struct catalog *c, const char *ref)
{
	for (size_t i = 0; i < c->n; i++)
		if (!strcmp(c->e[i].ref, ref))
			return &c->e[i];
	return NULL;
}

static void meta_from_json(json_t *labels, struct img_meta *meta)
{
	size_t n = json_object_size(labels), k = 0;
	struct img_label *l = calloc(n ? n : 1, sizeof(*l));
	const char *key;
	json_t *v;
	if (l) {
		json_object_foreach(labels, key, v) {
			if (k < n && json_is_string(v)) {
				l[k].key = key;
				l[k].value = json_string_value(v);
				k++;
			}
		}
	}
	img_labels_parse(l, k, meta);
	free(l);
}

/* Builds the catalog of the alive agents' images (under the lock). */
static int catalog_build(struct manager *m, struct catalog *c)
{
	memset(c, 0, sizeof(*c));
	for (size_t i = 0; i < m->n_agents; i++) {
		struct magent *a = m->agents[i];
		if (!a->alive || !a->images)
			continue;
		size_t k;
		json_t *img;
		json_array_foreach(a->images, k, img) {
			size_t t;
			json_t *tag;
			json_array_foreach(json_object_get(img, "tags"), t, tag) {
				const char *s = json_string_value(tag);
				struct img_ref r;
				struct terr err = {0};
				if (!s || img_ref_parse(s, &r, &err) < 0)
					continue;
				char ref[300];
				img_ref_format(&r, ref, sizeof(ref));
				struct centry *e = catalog_find(c, ref);
				if (!e) {
					if (c->n == c->cap) {
						size_t ncap = c->cap ? c->cap * 2 : 16;
						struct centry *ne = realloc(c->e, ncap * sizeof(*ne));
						if (!ne)
							return -ENOMEM;
						c->e = ne;
						c->cap = ncap;
					}
					e = &c->e[c->n++];
					memset(e, 0, sizeof(*e));
					util_strlcpy(e->ref, ref, sizeof(e->ref));
					e->parsed = r;
					meta_from_json(json_object_get(img, "labels"), &e->meta);
					util_strlcpy(e->id, json_string_value(json_object_get(img, "id")) ?: "", sizeof(e->id));
					e->size = json_integer_value(json_object_get(img, "size"));
					e->nodes = json_array();
				}
				json_array_append_new(e->nodes, json_string(a->rec.id));
			}
		}
	}
	return 0;
}

/* The owner's user id of the image ref with these labels (under the
 * lock), or NULL for a public image: the label tessera.owner, or a
 * commit's record when the labels do not say (an image whose labels were
 * lost on the way). One rule for the list, the create check and
 * removal. */
static const char *owner_of(struct manager *m, const char *ref, const struct img_meta *meta)
{
	return meta->owner[0] ? meta->owner : mgr_commit_owner(m, ref);
}

/* Whether u may launch (and see) it: private images are their owner's
 * and the admins'. One whose owner is no user of this installation (a
 * private image of another installation on the same Docker, whose owner
 * would show as a bare id) is nobody's here, not even an admin's. */
static bool visible_to(struct manager *m, const char *ref, const struct img_meta *meta, const struct user_rec *u)
{
	const char *owner = owner_of(m, ref, meta);
	if (owner && !mgr_find_user(m, owner))
		return false;
	return !owner || u->is_admin || !strcmp(owner, u->id);
}

/* Whether e is a private image of u's own. */
static bool owned_by(struct manager *m, const struct centry *e, const struct user_rec *u)
{
	const char *owner = owner_of(m, e->ref, &e->meta);
	return owner && !strcmp(owner, u->id);
}

static const char *visibility(struct manager *m, const struct centry *e)
{
	return owner_of(m, e->ref, &e->meta) ? "private" : e->meta.hidden ? "hidden" : "public";
}

static json_t *entry_json(struct manager *m, const struct centry *e)
{
	char name[300];
	img_ref_name(&e->parsed, name, sizeof(name));
	/* Unlabelled images are their own family: the repository's name. */
	const char *family = e->meta.family[0] ? e->meta.family : name;
	const char *title = e->meta.title[0] ? e->meta.title : family;
	json_t *fw = json_array();
	for (size_t i = 0; i < e->meta.n_frameworks; i++)
		json_array_append_new(fw, json_pack("{s:s,s:s}", "name", e->meta.frameworks[i].name, "version",
						    e->meta.frameworks[i].version));
	json_t *ports = json_array();
	for (size_t i = 0; i < e->meta.n_ports; i++) {
		json_t *pl = json_array();
		for (int k = 0; k < e->meta.ports[i].n_ports; k++)
			json_array_append_new(pl, json_integer(e->meta.ports[i].ports[k]));
		json_array_append_new(ports, json_pack("{s:s,s:s,s:o}", "name", e->meta.ports[i].name, "protocol",
						       e->meta.ports[i].protocol, "ports", pl));
	}
	json_t *aliases = json_array();
	const char *alias;
	json_t *target;
	json_object_foreach(m->image_aliases, alias, target) {
		char canon[300];
		struct terr err = {0};
		if (json_is_string(target) &&
		    img_ref_canonical(json_string_value(target), canon, sizeof(canon), &err) == 0 &&
		    !strcmp(canon, e->ref))
			json_array_append_new(aliases, json_string(alias));
	}
	json_t *owner = json_null();
	const char *owner_id = owner_of(m, e->ref, &e->meta);
	if (owner_id) {
		const struct user_rec *u = mgr_find_user(m, owner_id);
		owner = json_string(u ? u->email : owner_id);
	}
	struct res min = {e->meta.min_cpu_m, e->meta.min_mem, e->meta.min_fgpu_m};
	json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:s,s:o,s:s,s:I,s:o,s:o,s:O,s:o,s:o,s:s,s:s,s:b,s:s}",
			      "ref", e->ref, "name", name, "tag", e->parsed.tag[0] ? e->parsed.tag : "",
			      "family", family, "title", title, "frameworks", fw, "base_distro", e->meta.base_distro,
			      "size", (json_int_t)e->size, "min", mgr_res_json(&min), "service_ports", ports,
			      "nodes", e->nodes, "aliases", aliases, "owner", owner, "visibility", visibility(m, e),
			      "status", "ready", "in_registry", false, "id", e->id);
	if (e->meta.warning[0])
		json_object_set_new(o, "warning", json_string(e->meta.warning));
	if (e->meta.runtime_type[0])
		json_object_set_new(o, "runtime_type", json_string(e->meta.runtime_type));
	if (e->meta.runtime_path[0])
		json_object_set_new(o, "runtime_path", json_string(e->meta.runtime_path));
	/* The CUDA version its frameworks were built for (tessera.cuda),
	 * for the launcher's mark; absent for a CPU image. */
	if (e->meta.cuda[0])
		json_object_set_new(o, "cuda", json_string(e->meta.cuda));
	return o;
}

void mgr_image_service_ports(struct manager *m, const char *image, struct img_service_port *out, size_t max,
			     size_t *n)
{
	*n = 0;
	char canon[300];
	struct terr err = {0};
	struct catalog c;
	if (img_ref_canonical(image, canon, sizeof(canon), &err) < 0)
		return;
	const struct centry *e = catalog_build(m, &c) == 0 ? catalog_find(&c, canon) : NULL;
	for (size_t i = 0; e && i < e->meta.n_ports && *n < max; i++)
		out[(*n)++] = e->meta.ports[i];
	catalog_free(&c);
}

/* In the nodes' order (Docker's: newest first); the CLI sorts its table. */
json_t *mgr_images_list(struct manager *m, const struct user_rec *u, bool all)
{
	/* Agents whose list is not known yet (an agent of an earlier
	 * version) are asked now. */
	refresh_agents(m, true, NULL);
	json_t *arr = json_array();
	struct catalog c;
	pthread_mutex_lock(&m->mu);
	if (catalog_build(m, &c) == 0) {
		for (size_t i = 0; i < c.n; i++) {
			const struct centry *e = &c.e[i];
			/* A private image (it has an owner) is listed to whoever may
			 * see it: its features say "private" too (session commit
			 * adds it), which hides only images that nobody owns. */
			bool owned = owner_of(m, e->ref, &e->meta) != NULL;
			if (!visible_to(m, e->ref, &e->meta, u) || (!owned && e->meta.hidden && !(all && u->is_admin)))
				continue;
			json_array_append_new(arr, entry_json(m, e));
		}
	}
	catalog_free(&c);
	pthread_mutex_unlock(&m->mu);
	return arr;
}

int mgr_images_rescan(struct manager *m, json_t **reply, struct terr *err)
{
	struct terr failed = {0};
	int answered = refresh_agents(m, false, &failed);
	pthread_mutex_lock(&m->mu);
	size_t alive = 0;
	for (size_t i = 0; i < m->n_agents; i++)
		alive += m->agents[i]->alive && m->agents[i]->link;
	struct catalog c;
	size_t images = catalog_build(m, &c) == 0 ? c.n : 0;
	catalog_free(&c);
	pthread_mutex_unlock(&m->mu);
	if (alive && !answered)
		return terr_set(err, EAGAIN, "no node answered: %s", failed.msg);
	log_info("manager", "image rescan: %d of %zu nodes answered, %zu images", answered, alive, images);
	*reply = json_pack("{s:i,s:i,s:i}", "nodes", answered, "nodes_alive", (int)alive, "images", (int)images);
	return 0;
}

/* ---------- aliases ---------- */

json_t *mgr_image_aliases(struct manager *m)
{
	pthread_mutex_lock(&m->mu);
	json_t *o = json_deep_copy(m->image_aliases);
	pthread_mutex_unlock(&m->mu);
	return o ? o : json_object();
}

int mgr_image_alias(struct manager *m, const char *alias, const char *image, struct terr *err)
{
	struct terr e = {0};
	if (img_ref_parse(alias, NULL, &e) < 0)
		return terr_set(err, EINVAL, "alias '%s' is not a valid image name (%s)", alias, e.msg);
	if (img_ref_parse(image, NULL, err) < 0)
		return -EINVAL;
	pthread_mutex_lock(&m->mu);
	json_t *next = json_deep_copy(m->image_aliases);
	json_object_set_new(next, alias, json_string(image));
	char *text = json_dumps(next, JSON_COMPACT | JSON_SORT_KEYS);
	int rc = text ? m->so->kv_set(m->store, ALIASES_KEY, text, err) : terr_set(err, ENOMEM, "out of memory");
	if (rc == 0) {
		json_decref(m->image_aliases);
		m->image_aliases = next;
		log_info("manager", "image alias %s -> %s", alias, image);
	} else {
		json_decref(next);
	}
	free(text);
	pthread_mutex_unlock(&m->mu);
	return rc;
}

int mgr_image_dealias(struct manager *m, const char *alias, struct terr *err)
{
	pthread_mutex_lock(&m->mu);
	if (!json_object_get(m->image_aliases, alias)) {
		pthread_mutex_unlock(&m->mu);
		return terr_set(err, ENOENT, "no image alias '%s'", alias);
	}
	json_t *next = json_deep_copy(m->image_aliases);
	json_object_del(next, alias);
	char *text = json_dumps(next, JSON_COMPACT | JSON_SORT_KEYS);
	int rc = text ? m->so->kv_set(m->store, ALIASES_KEY, text, err) : terr_set(err, ENOMEM, "out of memory");
	if (rc == 0) {
		json_decref(m->image_aliases);
		m->image_aliases = next;
		log_info("manager", "image alias %s removed", alias);
	} else {
		json_decref(next);
	}
	free(text);
	pthread_mutex_unlock(&m->mu);
	return rc;
}

/* ---------- the create check ---------- */

static int no_image(const char *ref, struct terr *err)
{
	return terr_set(err, EINVAL, "image %s is not present on any node; pull or build it there first (docker pull %s)",
			ref, ref);
}

/* Looks ref up (canonical) for u under the lock: 1 found and visible
 * (*meta filled), 0 not (absent and invisible alike). */
static int lookup(struct manager *m, const struct user_rec *u, const char *canon, struct img_meta *meta)
{
	struct catalog c;
	int found = 0;
	if (catalog_build(m, &c) == 0) {
		struct centry *e = catalog_find(&c, canon);
		if (e && visible_to(m, e->ref, &e->meta, u)) {
			*meta = e->meta;
			found = 1;
		}
	}
	catalog_free(&c);
	if (found || !strchr(canon, '@'))
		return found;
	/* By digest: the images whose repository digests include it. */
	for (size_t i = 0; i < m->n_agents; i++) {
		struct magent *a = m->agents[i];
		size_t k, d;
		json_t *img, *dg;
		if (!a->alive || !a->images)
			continue;
		json_array_foreach(a->images, k, img) {
			json_array_foreach(json_object_get(img, "digests"), d, dg) {
				char dc[300];
				struct terr ig = {0};
				if (!json_is_string(dg) ||
				    img_ref_canonical(json_string_value(dg), dc, sizeof(dc), &ig) < 0)
					continue;
				/* "repo@sha256:x" against "repo:tag@sha256:x" too. */
				const char *at = strchr(canon, '@'), *dat = strchr(dc, '@');
				if (strcmp(at, dat))
					continue;
				struct img_meta dm;
				meta_from_json(json_object_get(img, "labels"), &dm);
				if (visible_to(m, canon, &dm, u)) {
					*meta = dm;
					return 1;
				}
			}
		}
	}
	return 0;
}

static void describe_min(const struct res *r, char *buf, size_t n)
{
	char cpu[32], mem[32], fgpu[32];
	units_format_milli(r->cpu_m, cpu, sizeof(cpu));
	units_format_size(r->mem, mem, sizeof(mem));
	units_format_milli(r->fgpu_m, fgpu, sizeof(fgpu));
	if (r->fgpu_m)
		snprintf(buf, n, "%s CPU, %s memory and %s fGPU", cpu, mem, fgpu);
	else
		snprintf(buf, n, "%s CPU and %s memory", cpu, mem);
}

int mgr_image_check(struct manager *m, const struct user_rec *u, const char *typed, const struct res *req,
		    char *resolved, size_t n, struct terr *err)
{
	/* An alias names its image; anything else is a reference. */
	util_strlcpy(resolved, typed, n);
	pthread_mutex_lock(&m->mu);
	json_t *target = json_object_get(m->image_aliases, typed);
	if (json_is_string(target))
		util_strlcpy(resolved, json_string_value(target), n);
	pthread_mutex_unlock(&m->mu);
	char canon[300];
	int rc = img_ref_canonical(resolved, canon, sizeof(canon), err);
	if (rc < 0)
		return rc;
	struct img_meta meta;
	pthread_mutex_lock(&m->mu);
	int found = lookup(m, u, canon, &meta);
	pthread_mutex_unlock(&m->mu);
	if (!found) {
		/* The lists may lag behind Docker (an image pulled a moment
		 * ago, an agent that does not report them): ask the nodes. */
		struct terr failed = {0};
		int answered = refresh_agents(m, false, &failed);
		pthread_mutex_lock(&m->mu);
		found = lookup(m, u, canon, &meta);
		bool hidden = !found && mgr_commit_hidden(m, u, canon);
		pthread_mutex_unlock(&m->mu);
		/* On no node but in the cluster registry: the start pulls it
		 * (commits.c); its labels, and so its minimum, are not known
		 * before. A private one of someone else stays missing. */
		if (!found && !hidden && mgr_registry_has(m, resolved)) {
			memset(&meta, 0, sizeof(meta));
			found = 1;
		}
		if (!found && !answered && failed.code)
			return terr_set(err, EAGAIN, "cannot check image %s: %s", resolved, failed.msg);
	}
	if (!found)
		return no_image(resolved, err);
	if (meta.has_min && (req->cpu_m < meta.min_cpu_m || req->mem < meta.min_mem || req->fgpu_m < meta.min_fgpu_m)) {
		struct res min = {meta.min_cpu_m, meta.min_mem, meta.min_fgpu_m};
		char need[128], asked[128];
		describe_min(&min, need, sizeof(need));
		describe_min(req, asked, sizeof(asked));
		/* ERANGE (400, as EINVAL): the one refusal that stands while
		 * no node can be asked (sessions.c). */
		return terr_set(err, ERANGE, "%s needs at least %s; asked for %s", resolved, need, asked);
	}
	return 0;
}

/* ---------- removal ---------- */

int mgr_image_remove(struct manager *m, const struct user_rec *u, const char *ref, json_t **reply,
		     struct terr *err)
{
	char canon[300];
	int rc = img_ref_canonical(ref, canon, sizeof(canon), err);
	if (rc < 0)
		return rc;
	refresh_agents(m, true, NULL);
	struct hold { const struct agent_link_ops *link; void *ctx; char id[STORE_NAME_MAX]; } *holds = NULL;
	size_t n = 0;
	pthread_mutex_lock(&m->mu);
	struct catalog c;
	struct centry *e = catalog_build(m, &c) == 0 ? catalog_find(&c, canon) : NULL;
	if (!e || !visible_to(m, e->ref, &e->meta, u)) {
		rc = terr_set(err, ENOENT, "no image %s on any node", ref);
	} else if (!u->is_admin && !owned_by(m, e, u)) {
		rc = terr_set(err, EPERM, "only an admin may remove %s (your own private images you may remove)", ref);
	} else {
		for (size_t i = 0; i < m->n_sessions && rc == 0; i++) {
			const struct msession *s = m->sessions[i];
			char sc[300];
			struct terr ig = {0};
			if (!session_status_final(s->rec.status) &&
			    img_ref_canonical(s->rec.image, sc, sizeof(sc), &ig) == 0 && !strcmp(sc, canon))
				rc = terr_set(err, EBUSY, "image %s is used by session %s (%s); remove the session first", ref,
					      s->rec.name, session_status_name(s->rec.status));
		}
		holds = rc == 0 ? calloc(json_array_size(e->nodes) + 1, sizeof(*holds)) : NULL;
		size_t k;
		json_t *node;
		json_array_foreach(e->nodes, k, node) {
			struct magent *a = holds ? mgr_find_agent(m, json_string_value(node)) : NULL;
			if (a && a->link) {
				holds[n].link = a->link;
				holds[n].ctx = a->link_ctx;
				util_strlcpy(holds[n].id, a->rec.id, sizeof(holds[n].id));
				n++;
			}
		}
		if (rc == 0 && !holds)
			rc = terr_set(err, ENOMEM, "out of memory");
	}
	catalog_free(&c);
	pthread_mutex_unlock(&m->mu);
	if (rc < 0)
		return rc;
	json_t *removed = json_array();
	struct terr failed = {0};
	char failed_on[STORE_NAME_MAX] = "";
	for (size_t i = 0; i < n; i++) {
		struct terr e2 = {0};
		/* The node's own name for it may differ from the canonical one
		 * (docker.io/library/...): Docker resolves either. */
		if (!holds[i].link->image_remove)
			terr_set(&e2, ENOSYS, "this node's link cannot remove images");
		else if (holds[i].link->image_remove(holds[i].ctx, canon, &e2) == 0 || e2.code == ENOENT)
			e2.code = 0;
		if (e2.code) {
			failed = e2;
			util_strlcpy(failed_on, holds[i].id, sizeof(failed_on));
			continue;
		}
		json_array_append_new(removed, json_string(holds[i].id));
		log_info("manager", "image %s removed from %s by %s", canon, holds[i].id, u->email);
	}
	free(holds);
	refresh_agents(m, false, NULL);
	if (failed.code) {
		json_decref(removed);
		return terr_set(err, failed.code == ENOENT ? EIO : failed.code, "removing %s from node %s: %s", canon,
				failed_on, failed.msg);
	}
	/* A private image gone from the nodes no longer counts against its
	 * owner's max_private_images (-ENOENT: it was not a commit's). */
	if (mgr_commit_forget(m, canon) == 0)
		log_info("manager", "private image %s forgotten", canon);
	*reply = json_pack("{s:s,s:o}", "ref", canon, "nodes", removed);
	return 0;
}
