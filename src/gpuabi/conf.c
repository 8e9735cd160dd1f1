#include "gpuabi/conf.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/units.h"

static void fgpu_conf_defaults(struct fgpu_conf *c)
{
	memset(c, 0, sizeof(*c));
	c->all_limit = FGPU_UNLIMITED;
	for (int i = 0; i < FGPU_MAX_DEVICES; i++)
		c->dev[i].memory_limit = FGPU_UNLIMITED;
	c->sm_limit_percent = 100;
	snprintf(c->region, sizeof(c->region), "%s", FGPU_REGION_PATH);
	snprintf(c->turn_dir, sizeof(c->turn_dir), "%s", FGPU_TURN_DIR);
}

static char *fgpu_trim(char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	size_t n = strlen(s);
	while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' ||
			 s[n - 1] == '\n'))
		s[--n] = '\0';
	return s;
}

static int fgpu_parse_int(const char *v, long lo, long hi, long *out)
{
	char *e;
	long x = strtol(v, &e, 10);
	if (e == v || *e || x < lo || x > hi)
		return -EINVAL;
	*out = x;
	return 0;
}

int fgpu_conf_parse(const char *text, struct fgpu_conf *c, struct terr *err)
{
	fgpu_conf_defaults(c);
	c->enabled = true;
	int lineno = 0;
	const char *p = text;
	while (*p) {
		char line[512];
		size_t n = strcspn(p, "\n");
		lineno++;
		if (n >= sizeof(line))
			return terr_set(err, EINVAL, "line %d: too long", lineno);
		memcpy(line, p, n);
		line[n] = '\0';
		p += n + (p[n] == '\n');
		char *hash = strchr(line, '#');
		if (hash)
			*hash = '\0';
		char *s = fgpu_trim(line);
		if (!*s)
			continue;
		char *eq = strchr(s, '=');
		if (!eq)
			return terr_set(err, EINVAL, "line %d: expected key = value", lineno);
		*eq = '\0';
		char *key = fgpu_trim(s), *val = fgpu_trim(eq + 1);
		long x;
		int idx, off = 0;
		if (strcmp(key, FGPU_KEY_VERSION) == 0) {
			if (fgpu_parse_int(val, 1, 1000, &x) < 0)
				return terr_set(err, EINVAL, "line %d: bad version", lineno);
			if (x > FGPU_CONF_VERSION)
				return terr_set(err, ENOTSUP, "limits file version %ld is newer than %d",
						x, FGPU_CONF_VERSION);
		} else if (strcmp(key, FGPU_KEY_DEVICES) == 0) {
			if (fgpu_parse_int(val, 0, FGPU_MAX_DEVICES, &x) < 0)
				return terr_set(err, EINVAL, "line %d: bad device count", lineno);
			c->ndev = (int)x;
		} else if (sscanf(key, "device.%d.%n", &idx, &off) == 1 && off > 0) {
			if (idx < 0 || idx >= FGPU_MAX_DEVICES)
				return terr_set(err, EINVAL, "line %d: bad device index", lineno);
			const char *field = key + off;
			if (strcmp(field, "uuid") == 0) {
				snprintf(c->dev[idx].uuid, sizeof(c->dev[idx].uuid), "%s", val);
			} else if (strcmp(field, "memory_limit") == 0) {
				if (units_parse_size(val, &c->dev[idx].memory_limit, err) < 0)
					return terr_prefix(err, "line %d", lineno);
			} else if (strcmp(field, "sm_limit_percent") == 0) {
				if (fgpu_parse_int(val, 1, 100, &x) < 0)
					return terr_set(err, EINVAL,
							"line %d: sm_limit_percent must be 1..100", lineno);
				c->dev[idx].sm_limit_percent = (int)x;
			}
		} else if (strcmp(key, FGPU_KEY_MEMORY_LIMIT) == 0) {
			if (units_parse_size(val, &c->all_limit, err) < 0)
				return terr_prefix(err, "line %d", lineno);
		} else if (strcmp(key, FGPU_KEY_SM_LIMIT) == 0) {
			if (fgpu_parse_int(val, 1, 100, &x) < 0)
				return terr_set(err, EINVAL, "line %d: sm_limit_percent must be 1..100", lineno);
			c->sm_limit_percent = (int)x;
		} else if (strcmp(key, FGPU_KEY_CTX_OVERHEAD) == 0) {
			if (units_parse_size(val, &c->context_overhead, err) < 0)
				return terr_prefix(err, "line %d", lineno);
		} else if (strcmp(key, FGPU_KEY_REGION) == 0) {
			snprintf(c->region, sizeof(c->region), "%s", val);
		} else if (strcmp(key, FGPU_KEY_TURN_DIR) == 0) {
			snprintf(c->turn_dir, sizeof(c->turn_dir), "%s", val);
		} else if (strcmp(key, FGPU_KEY_TURN_QUANTUM_US) == 0) {
			if (fgpu_parse_int(val, 100, 1000000, &x) < 0)
				return terr_set(err, EINVAL, "line %d: turn_quantum_us must be 100..1000000", lineno);
			c->turn_quantum_ns = x * 1000;
		} else if (strcmp(key, FGPU_KEY_PACING_CLOCK) == 0) {
			c->driver_clock = strcmp(val, "driver") == 0;
		} else if (strcmp(key, FGPU_KEY_FGPU) == 0) {
			snprintf(c->fgpu, sizeof(c->fgpu), "%s", val);
		}
		/* unknown keys: ignored, for newer agents */
	}
	return 0;
}

/* Reads a whole small file into buf; -errno on failure. */
static int fgpu_read_file(const char *path, char *buf, size_t n)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t got = 0;
	while (got + 1 < n) {
		ssize_t r = read(fd, buf + got, n - 1 - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	close(fd);
	buf[got] = '\0';
	return 0;
}

int fgpu_conf_load(struct fgpu_conf *c, struct terr *err)
{
	char text[16384];
	int rc = fgpu_read_file(FGPU_CONF_PATH, text, sizeof(text));
	if (rc == 0) {
		if (fgpu_conf_parse(text, c, err) < 0)
			return terr_prefix(err, "%s", FGPU_CONF_PATH);
		c->from_agent = true;
	} else {
		const char *path = getenv(FGPU_ENV_CONF);
		if (path && *path && fgpu_read_file(path, text, sizeof(text)) == 0) {
			if (fgpu_conf_parse(text, c, err) < 0)
				return terr_prefix(err, "%s", path);
		} else {
			fgpu_conf_defaults(c);
		}
		const char *region = getenv(FGPU_ENV_REGION);
		if (region && *region)
			snprintf(c->region, sizeof(c->region), "%s", region);
		const char *turns = getenv(FGPU_ENV_TURN_DIR);
		if (turns && *turns)
			snprintf(c->turn_dir, sizeof(c->turn_dir), "%s", turns);
	}

	/* The variables: configure without a file, only tighten with one. */
	const char *mem = getenv(FGPU_ENV_MEMORY_LIMIT);
	int64_t lim;
	if (mem && *mem && units_parse_size(mem, &lim, NULL) == 0) {
		c->enabled = true;
		if (lim < c->all_limit)
			c->all_limit = lim;
		for (int i = 0; i < FGPU_MAX_DEVICES; i++)
			if (lim < c->dev[i].memory_limit)
				c->dev[i].memory_limit = lim;
	}
	const char *sm = getenv(FGPU_ENV_SM_LIMIT);
	long pct;
	if (sm && *sm && fgpu_parse_int(sm, 1, 100, &pct) == 0) {
		c->enabled = true;
		if (pct < c->sm_limit_percent)
			c->sm_limit_percent = (int)pct;
		for (int i = 0; i < FGPU_MAX_DEVICES; i++)
			if (c->dev[i].sm_limit_percent > pct)
				c->dev[i].sm_limit_percent = (int)pct;
	}
	const char *f = getenv(FGPU_ENV_FGPU);
	if (f && *f && !c->fgpu[0])
		snprintf(c->fgpu, sizeof(c->fgpu), "%s", f);
	return 0;
}

int64_t fgpu_conf_limit(const struct fgpu_conf *c, int i)
{
	if (c->ndev == 0)
		return i >= 0 && i < FGPU_MAX_DEVICES && c->dev[i].memory_limit < c->all_limit
			? c->dev[i].memory_limit : c->all_limit;
	if (i < 0 || i >= c->ndev)
		return 0;
	return c->dev[i].memory_limit < c->all_limit ? c->dev[i].memory_limit : c->all_limit;
}

int fgpu_conf_sm_limit(const struct fgpu_conf *c, int i)
{
	if (i >= 0 && i < FGPU_MAX_DEVICES && c->dev[i].sm_limit_percent > 0)
		return c->dev[i].sm_limit_percent;
	return c->sm_limit_percent;
}

bool fgpu_conf_sm_limited(const struct fgpu_conf *c)
{
	if (c->sm_limit_percent < 100)
		return true;
	for (int i = 0; i < FGPU_MAX_DEVICES; i++)
		if (c->dev[i].sm_limit_percent > 0 && c->dev[i].sm_limit_percent < 100)
			return true;
	return false;
}

int fgpu_conf_index(const struct fgpu_conf *c, const char *uuid, int ordinal)
{
	bool by_uuid = false;
	for (int i = 0; i < c->ndev; i++) {
		if (!c->dev[i].uuid[0])
			continue;
		by_uuid = true;
		if (uuid && strcmp(c->dev[i].uuid, uuid) == 0)
			return i;
	}
	if (by_uuid || ordinal < 0 || ordinal >= FGPU_MAX_DEVICES)
		return -1;
	return c->ndev == 0 || ordinal < c->ndev ? ordinal : -1;
}
