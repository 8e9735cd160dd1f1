/* Fair-share usage (docs/scheduling.md, "Fair share"): what each project,
 * and each user within a project, has held over time, charged once a
 * second from the sessions that hold resources and decayed with the
 * fairshare_half_life_s setting (sched_usage_charge). It is kept in the
 * store's settings table under "fairshare_usage" once a minute and at
 * close, so a restart loses at most a minute of it; the time the manager
 * was down decays it as time does. All functions are called with mu held. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/jsonutil.h"
#include "common/log.h"
#include "common/util.h"
#include "manager/state.h"

#define USAGE_KEY "fairshare_usage"
#define SAVE_EVERY_MS 60000

static json_t *usage_json(const struct sched_usage *u)
{
	return json_pack("[f,f,f]", u->cpu_s, u->mem_s, u->fgpu_s);
}

static void usage_read(json_t *a, struct sched_usage *u)
{
	if (!json_is_array(a) || json_array_size(a) != 3)
		return;
	double v[3];
	for (size_t i = 0; i < 3; i++) {
		v[i] = json_number_value(json_array_get(a, i));
		if (!(v[i] >= 0 && v[i] < 1e300))   /* also refuses NaN */
			return;
	}
	u->cpu_s = v[0];
	u->mem_s = v[1];
	u->fgpu_s = v[2];
}

void mgr_fairshare_save(struct manager *m)
{
	json_t *projects = json_object(), *members = json_object();
	for (size_t i = 0; i < m->n_projects; i++)
		json_object_set_new(projects, m->projects[i]->rec.id, usage_json(&m->projects[i]->usage));
	for (size_t i = 0; i < m->n_members; i++)
		json_object_set_new(members, m->members[i]->rec.id, usage_json(&m->members[i]->usage));
	json_t *o = json_pack("{s:o,s:o,s:I}", "projects", projects, "members", members, "at_ms",
			      (json_int_t)util_now_ms());
	char *text = o ? json_dumps(o, JSONUTIL_DUMP_FLAGS) : NULL;
	struct terr err = {0};
	if (!text || m->so->kv_set(m->store, USAGE_KEY, text, &err) < 0)
		log_warn("manager", "cannot keep the fair-share usage now (kept in memory, tried again in a "
			 "minute): %s", text ? err.msg : "out of memory");
	free(text);
	json_decref(o);
	m->fs_saved_mono = util_mono_ms();
}

void mgr_fairshare_load(struct manager *m)
{
	char *text = NULL;
	struct terr err = {0};
	m->fs_tick_mono = m->fs_saved_mono = util_mono_ms();
	if (m->so->kv_get(m->store, USAGE_KEY, &text, &err) < 0)
		return;   /* none yet: every project starts at nothing */
	json_t *o = json_loads(text, 0, NULL);
	free(text);
	json_t *projects = json_object_get(o, "projects"), *members = json_object_get(o, "members");
	for (size_t i = 0; i < m->n_projects; i++)
		usage_read(json_object_get(projects, m->projects[i]->rec.id), &m->projects[i]->usage);
	for (size_t i = 0; i < m->n_members; i++)
		usage_read(json_object_get(members, m->members[i]->rec.id), &m->members[i]->usage);
	/* The time the manager was down decays the usage, as it would have
	 * while running; nothing is charged for it (nothing was placed). */
	json_int_t at = json_integer_value(json_object_get(o, "at_ms"));
	int64_t now = util_now_ms();
	if (at > 0 && now > at) {
		double dt = (double)(now - at) / 1000.0, hl = (double)m->settings.fairshare_half_life_s;
		struct res none = {0};
		for (size_t i = 0; i < m->n_projects; i++)
			sched_usage_charge(&m->projects[i]->usage, &none, dt, hl);
		for (size_t i = 0; i < m->n_members; i++)
			sched_usage_charge(&m->members[i]->usage, &none, dt, hl);
	}
	json_decref(o);
}

void mgr_fairshare_tick(struct manager *m)
{
	int64_t now = util_mono_ms();
	double dt = (double)(now - m->fs_tick_mono) / 1000.0;
	if (dt <= 0)
		return;
	m->fs_tick_mono = now;
	/* What each project and member holds now, summed in one walk of the
	 * sessions (ids mapped to indexes for the walk). */
	struct res *held_p = calloc(m->n_projects + 1, sizeof(*held_p));
	struct res *held_m = calloc(m->n_members + 1, sizeof(*held_m));
	struct strmap pix = {0}, mix = {0};
	bool ok = held_p && held_m;
	for (size_t i = 0; ok && i < m->n_projects; i++)
		ok = strmap_put(&pix, m->projects[i]->rec.id, (void *)(uintptr_t)(i + 1)) == 0;
	for (size_t i = 0; ok && i < m->n_members; i++)
		ok = strmap_put(&mix, m->members[i]->rec.id, (void *)(uintptr_t)(i + 1)) == 0;
	for (size_t i = 0; ok && i < m->n_sessions; i++) {
		const struct msession *s = m->sessions[i];
		if (!session_status_holds(s->rec.status))
			continue;
		size_t p, mb;
		if (s->ix_gen == m->ix_gen) {
			/* The scheduler's pass found them since the lists changed. */
			p = s->ix_project;
			mb = s->ix_member;
		} else {
			char key[sizeof(((struct member_rec *)0)->id)];
			snprintf(key, sizeof(key), "%s:%s", s->rec.project_id, s->rec.owner_id);
			p = (size_t)(uintptr_t)strmap_get(&pix, s->rec.project_id);
			mb = (size_t)(uintptr_t)strmap_get(&mix, key);
		}
		if (p)
			res_add(&held_p[p - 1], &s->rec.req);
		if (mb)
			res_add(&held_m[mb - 1], &s->rec.req);
	}
	if (ok) {
		double hl = (double)m->settings.fairshare_half_life_s;
		for (size_t i = 0; i < m->n_projects; i++)
			sched_usage_charge(&m->projects[i]->usage, &held_p[i], dt, hl);
		for (size_t i = 0; i < m->n_members; i++)
			sched_usage_charge(&m->members[i]->usage, &held_m[i], dt, hl);
	} else {
		log_warn("manager", "fair-share usage not charged this second: out of memory");
	}
	strmap_free(&pix);
	strmap_free(&mix);
	free(held_p);
	free(held_m);
	if (now - m->fs_saved_mono >= SAVE_EVERY_MS)
		mgr_fairshare_save(m);
}
