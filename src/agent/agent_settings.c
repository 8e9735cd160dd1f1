#include "agent/agent_settings.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/units.h"
#include "gpu/gpu_usage.h"

const struct agent_setting agent_settings_table[] = {
#define AGENT_SETTING_ROW(key, flag, type, field, def, min, max, flags, metavar, help) \
	{#key, flag, AGENT_SETTING_##type, offsetof(struct agent_settings, field), def, min, max, flags, \
	 metavar, help},
	AGENT_SETTINGS(AGENT_SETTING_ROW)
#undef AGENT_SETTING_ROW
};

const size_t agent_settings_count = sizeof(agent_settings_table) / sizeof(agent_settings_table[0]);

/* Each setting's field has the C type its setting type stores: checked
 * here once, so that the untyped stores below cannot write a wrong one. */
#define AGENT_SETTING_KIND(type) \
	(AGENT_SETTING_##type == AGENT_SETTING_INT ? 1 \
	 : AGENT_SETTING_##type == AGENT_SETTING_SIZE || AGENT_SETTING_##type == AGENT_SETTING_CORES || \
	   AGENT_SETTING_##type == AGENT_SETTING_PIDS ? 2 : 3)
#define AGENT_SETTING_CHECK(key, flag, type, field, def, min, max, flags, metavar, help) \
	_Static_assert(_Generic(((struct agent_settings *)0)->field, int: 1, int64_t: 2, const char *: 3, \
				default: 0) == AGENT_SETTING_KIND(type), \
		       "agent setting " #key ": its field's type does not match its setting type");
AGENT_SETTINGS(AGENT_SETTING_CHECK)
#undef AGENT_SETTING_CHECK

const struct agent_setting *agent_setting_find(const char *key)
{
	for (size_t i = 0; i < agent_settings_count; i++)
		if (!strcmp(agent_settings_table[i].key, key))
			return &agent_settings_table[i];
	return NULL;
}

int agent_settings_parse_overhead(const char *v, int64_t *bytes, const char *name, struct terr *err)
{
	if (!v || !*v || !strcmp(v, "auto")) {
		*bytes = -1;
		return 0;
	}
	if (units_parse_size(v, bytes, NULL) < 0 || *bytes < 0)
		return terr_set(err, EINVAL, "%s must be \"auto\" or a size such as 512MiB, not '%s'", name, v);
	return 0;
}

int agent_settings_parse_seccomp(const char *v, bool *docker_default, const char *name, struct terr *err)
{
	if (!v || !*v || !strcmp(v, "tessera")) {
		*docker_default = false;
		return 0;
	}
	if (!strcmp(v, "default")) {
		*docker_default = true;
		return 0;
	}
	return terr_set(err, EINVAL, "%s must be \"tessera\" or \"default\", not '%s'", name, v);
}

int agent_settings_parse_app_publish(const char *v, bool dflt, bool *publish, const char *name, struct terr *err)
{
	if (!v || !*v) {
		*publish = dflt;
		return 0;
	}
	if (!strcmp(v, "yes") || !strcmp(v, "no")) {
		*publish = !strcmp(v, "yes");
		return 0;
	}
	return terr_set(err, EINVAL, "%s must be \"yes\" or \"no\", not '%s'", name, v);
}

int agent_setting_set(struct agent_settings *s, const struct agent_setting *d, const char *value,
		      const char *name, struct terr *err)
{
	char *field = (char *)s + d->offset;
	int64_t n;
	switch (d->type) {
	case AGENT_SETTING_TEXT:
		*(const char **)field = value;
		return 0;
	case AGENT_SETTING_OVERHEAD:
		if (agent_settings_parse_overhead(value, &n, name, err) < 0)
			return -EINVAL;
		*(const char **)field = value;
		return 0;
	case AGENT_SETTING_SECCOMP: {
		bool b;
		if (agent_settings_parse_seccomp(value, &b, name, err) < 0)
			return -EINVAL;
		*(const char **)field = value;
		return 0;
	}
	case AGENT_SETTING_APP_PUBLISH: {
		bool b;
		if (agent_settings_parse_app_publish(value, true, &b, name, err) < 0)
			return -EINVAL;
		*(const char **)field = value;
		return 0;
	}
	case AGENT_SETTING_SIZE:
		if (units_parse_size(value, &n, err) < 0)
			return terr_prefix(err, "%s", name);
		*(int64_t *)field = n;
		return 0;
	case AGENT_SETTING_CORES:
		if (units_parse_milli(value, &n, NULL) < 0 || n <= 0)
			return terr_set(err, EINVAL, "%s must be a positive number like 2 or 0.5", name);
		*(int64_t *)field = n;
		return 0;
	case AGENT_SETTING_PIDS: {
		/* auto: sized per session by agent_pids_limit (agent.h). */
		if (!strcmp(value, "auto")) {
			*(int64_t *)field = 0;
			return 0;
		}
		/* Digits only: strtoll alone would take " 64" or "+64". */
		char *end = NULL;
		long long v = value[0] >= '0' && value[0] <= '9' ? strtoll(value, &end, 10) : -1;
		if (v < 0 || *end || v < d->min || v > d->max)
			return terr_set(err, EINVAL, "%s must be \"auto\" or an integer from %lld to %lld, not '%s'",
					name, d->min, d->max, value);
		*(int64_t *)field = v;
		return 0;
	}
	case AGENT_SETTING_INT: {
		char *end;
		long long v = strtoll(value, &end, 10);
		if (end == value || *end || v < d->min || v > d->max)
			return terr_set(err, EINVAL, "%s must be an integer from %lld to %lld, not '%s'", name,
					d->min, d->max, value);
		*(int *)field = (int)v;
		return 0;
	}
	}
	return terr_set(err, EINVAL, "%s: unknown setting type", name);
}

void agent_settings_init(struct agent_settings *s)
{
	memset(s, 0, sizeof(*s));
	for (size_t i = 0; i < agent_settings_count; i++) {
		const struct agent_setting *d = &agent_settings_table[i];
		/* The defaults are valid values (tests/agent/test_agent_settings.c). */
		if (d->def)
			agent_setting_set(s, d, d->def, d->key, NULL);
	}
}

/* "id, manager, cluster_secret and advertise_url" */
static void required_list(char *buf, size_t n)
{
	size_t total = 0, seen = 0, len = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < agent_settings_count; i++)
		total += (agent_settings_table[i].flags & AGENT_SETTING_REQUIRED) != 0;
	for (size_t i = 0; i < agent_settings_count && len < n; i++) {
		if (!(agent_settings_table[i].flags & AGENT_SETTING_REQUIRED))
			continue;
		seen++;
		const char *sep = seen == 1 ? "" : seen == total ? " and " : ", ";
		int w = snprintf(buf + len, n - len, "%s%s", sep, agent_settings_table[i].key);
		if (w < 0)
			break;
		len += (size_t)w;
	}
}

int agent_settings_from_conf(struct agent_settings *s, const struct conf *c, const char *path,
			     struct terr *err)
{
	for (size_t i = 0; i < c->n; i++) {
		const struct conf_item *it = &c->items[i];
		const struct agent_setting *d = agent_setting_find(it->key);
		if (!d)
			return terr_set(err, EINVAL, "%s: line %d: unknown key '%s'", path, it->line, it->key);
		if (agent_setting_set(s, d, it->value, d->key, err) < 0)
			return terr_prefix(err, "%s: line %d", path, it->line);
	}
	for (size_t i = 0; i < agent_settings_count; i++) {
		const struct agent_setting *d = &agent_settings_table[i];
		if ((d->flags & AGENT_SETTING_REQUIRED) && !conf_get(c, d->key)) {
			char all[256];
			required_list(all, sizeof(all));
			return terr_set(err, EINVAL, "%s: %s are required (%s is missing)", path, all, d->key);
		}
	}
	return 0;
}
