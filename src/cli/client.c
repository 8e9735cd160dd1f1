/* Configuration resolution and helpers shared by the client verbs. */
#include "cli/client.h"

#include <math.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/conf.h"
#include "common/units.h"

char *cli_client_conf_path(void)
{
	const char *home = getenv("HOME");
	if (!home || !*home) {
		struct passwd *pw = getpwuid(getuid());
		home = pw ? pw->pw_dir : NULL;
	}
	if (!home)
		return NULL;
	char *path = NULL;
	if (asprintf(&path, "%s/.config/tessera/client.conf", home) < 0)
		return NULL;
	return path;
}

static int cli_set(char **dst, const char *val, struct terr *err)
{
	if (!val)
		return 0;
	char *copy = strdup(val);
	if (!copy)
		return terr_set(err, ENOMEM, "out of memory");
	free(*dst);
	*dst = copy;
	return 0;
}

static int cli_config_file(struct cli_config *cfg, const char *path, struct terr *err)
{
	struct conf c;
	int r = conf_load(path, &c, err);
	if (r < 0)
		return r;
	if ((r = cli_set(&cfg->endpoint, conf_get(&c, "endpoint"), err)) < 0 ||
	    (r = cli_set(&cfg->access_key, conf_get(&c, "access_key"), err)) < 0 ||
	    (r = cli_set(&cfg->secret_key, conf_get(&c, "secret_key"), err)) < 0 ||
	    (r = cli_set(&cfg->file, path, err)) < 0) {
		conf_free(&c);
		return r;
	}
	conf_free(&c);
	return 0;
}

static const char *cli_env(const char *name)
{
	const char *v = getenv(name);
	return v && *v ? v : NULL;
}

int cli_config_load(struct cli_config *cfg, struct terr *err)
{
	memset(cfg, 0, sizeof(*cfg));
	int r;
	const char *explicit = cli_env("TESSERA_CONFIG");
	if (explicit) {
		/* Named on purpose: a missing file is a mistake to report. */
		r = cli_config_file(cfg, explicit, err);
		if (r < 0) {
			cli_config_free(cfg);
			return terr_prefix(err, "TESSERA_CONFIG");
		}
	} else {
		char *path = cli_client_conf_path();
		if (path && access(path, F_OK) == 0) {
			r = cli_config_file(cfg, path, err);
			if (r < 0) {
				free(path);
				cli_config_free(cfg);
				return r;
			}
		}
		free(path);
	}
	if ((r = cli_set(&cfg->endpoint, cli_env("TESSERA_ENDPOINT"), err)) < 0 ||
	    (r = cli_set(&cfg->access_key, cli_env("TESSERA_ACCESS_KEY"), err)) < 0 ||
	    (r = cli_set(&cfg->secret_key, cli_env("TESSERA_SECRET_KEY"), err)) < 0) {
		cli_config_free(cfg);
		return r;
	}
	return 0;
}

void cli_config_free(struct cli_config *cfg)
{
	free(cfg->endpoint);
	free(cfg->access_key);
	free(cfg->secret_key);
	free(cfg->file);
	memset(cfg, 0, sizeof(*cfg));
}

int cli_connect(struct cli_config *cfg, struct api_client *c, struct terr *err)
{
	int r = cli_config_load(cfg, err);
	if (r < 0)
		return r;
	const char *where = cfg->file ? cfg->file : "the environment";
	if (!cfg->endpoint || !*cfg->endpoint)
		return terr_set(err, EINVAL,
				"no endpoint configured; run 'tessera login' or set TESSERA_CONFIG");
	if (!cfg->access_key || !*cfg->access_key)
		return terr_set(err, EINVAL,
				"no access_key in %s; run 'tessera login' or set TESSERA_ACCESS_KEY",
				where);
	if (!cfg->secret_key || !*cfg->secret_key)
		return terr_set(err, EINVAL,
				"no secret_key in %s; run 'tessera login' or set TESSERA_SECRET_KEY",
				where);
	*c = (struct api_client){.endpoint = cfg->endpoint, .access_key = cfg->access_key,
				 .secret_key = cfg->secret_key};
	return 0;
}

int cli_call(const char *method, const char *path, json_t *body, json_t **reply)
{
	struct cli_config cfg = {0};
	struct api_client c;
	struct terr err = {0};
	json_t *r = NULL;
	int rc = CLI_EXIT_OK;
	if (!path)
		rc = cli_fail("out of memory");
	else if (cli_connect(&cfg, &c, &err) < 0 || api_call(&c, method, path, body, 0, &r, NULL, &err) < 0)
		rc = cli_fail("%s", err.msg);
	cli_config_free(&cfg);
	if (reply)
		*reply = r;
	else
		json_decref(r);
	return rc;
}

int cli_fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("tessera: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	return CLI_EXIT_FAIL;
}

int cli_usage_fail(const char *verb, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("tessera: ", stderr);
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "; run 'tessera %s --help'\n", verb);
	va_end(ap);
	return CLI_EXIT_USAGE;
}

void cli_print_json(json_t *v)
{
	json_dumpf(v, stdout, JSON_INDENT(2));
	fputc('\n', stdout);
}

int64_t cli_json_milli(json_t *v)
{
	if (json_is_integer(v))
		return (int64_t)json_integer_value(v) * 1000;
	if (json_is_real(v))
		/* The API sends at most 3 decimals; rounding undoes the
		 * binary representation (0.1 -> 0.1000000000000000055). */
		return (int64_t)llround(json_real_value(v) * 1000.0);
	if (json_is_string(v)) {
		int64_t m = 0;
		if (units_parse_milli(json_string_value(v), &m, NULL) == 0)
			return m;
	}
	return 0;
}

int64_t cli_json_int(json_t *v)
{
	if (json_is_integer(v))
		return (int64_t)json_integer_value(v);
	if (json_is_real(v))
		return (int64_t)llround(json_real_value(v));
	if (json_is_string(v)) {
		int64_t b = 0;
		if (units_parse_size(json_string_value(v), &b, NULL) == 0)
			return b;
	}
	return 0;
}

const char *cli_json_str(json_t *obj, const char *key, const char *dflt)
{
	const char *s = json_string_value(json_object_get(obj, key));
	return s ? s : dflt;
}

int cli_parse_time(const char *s, time_t *out)
{
	int y, mo, d, h, mi, sec, n = 0;
	if (!s || sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &sec, &n) != 6)
		return -EINVAL;
	const char *p = s + n;
	if (*p == '.') {
		p++;
		while (*p >= '0' && *p <= '9')
			p++;
	}
	if (strcmp(p, "Z") && strcmp(p, "+00:00"))
		return -EINVAL;
	struct tm tm = {.tm_year = y - 1900, .tm_mon = mo - 1, .tm_mday = d,
			.tm_hour = h, .tm_min = mi, .tm_sec = sec};
	time_t t = timegm(&tm);
	if (t == (time_t)-1)
		return -EINVAL;
	*out = t;
	return 0;
}
