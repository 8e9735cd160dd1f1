/* Image recipes (imagebuild/recipe.h). Hand-written like common/conf.c: the
 * grammar is a few lines (key = value, indented continuation lines) and
 * the checks are specific to Docker names, Debian packages and Backend.AI's
 * label formats, which no library knows. */
#include "imagebuild/recipe.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "common/units.h"

/* Debian suites a recipe may name, with their release number (the
 * ai.backend.base-distro label is "debian" + it). One list: the check,
 * the default distro and the message listing the known ones use it. */
#define RECIPE_SUITES(X) \
	X("bullseye", "11") \
	X("bookworm", "12") \
	X("trixie", "13") \
	X("forky", "14") \
	X("sid", "sid")

struct suite_entry {
	const char *suite;
	const char *version;
};
#define AS_SUITE(s, v) {s, v},
static const struct suite_entry recipe_suites[] = {RECIPE_SUITES(AS_SUITE)};
#define N_SUITES (sizeof(recipe_suites) / sizeof(recipe_suites[0]))

const char *recipe_suite_version(const char *suite)
{
	for (size_t i = 0; suite && i < N_SUITES; i++)
		if (!strcmp(recipe_suites[i].suite, suite))
			return recipe_suites[i].version;
	return NULL;
}

/* ---- the parse state ---- */

struct parse {
	const char *path;
	struct recipe *r;
	struct terr *err;
	/* The file line of each line of the value being handled (comments
	 * between continuation lines are not part of it). */
	const int *lines;
	size_t n_lines;
};

static int fail(struct parse *p, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(struct parse *p, int line, const char *fmt, ...)
{
	char msg[TERR_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (line > 0)
		return terr_set(p->err, EINVAL, "%s:%d: %s", p->path, line, msg);
	return terr_set(p->err, EINVAL, "%s: %s", p->path, msg);
}

static int oom(struct parse *p)
{
	return terr_set(p->err, ENOMEM, "out of memory");
}

/* ---- checks of single words ---- */

static bool is_lower_alnum(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* Docker's repository grammar: path components of [a-z0-9] runs joined by
 * one '.', '_' (or "__") or any number of '-', separated by '/'. */
static bool valid_repo(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > 128)
		return false;
	bool need_alnum = true;
	for (size_t i = 0; i < n; i++) {
		int c = (unsigned char)s[i];
		if (is_lower_alnum(c)) {
			need_alnum = false;
			continue;
		}
		if (need_alnum)
			return false;
		if (c == '/' || c == '.' || c == '_' || c == '-') {
			if (c == '-')
				while (s[i + 1] == '-')
					i++;
			else if (c == '_' && s[i + 1] == '_')
				i++;
			need_alnum = true;
			continue;
		}
		return false;
	}
	return !need_alnum;
}

/* Docker's tag grammar: [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}. */
static bool valid_tag(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > 128 || s[0] == '.' || s[0] == '-')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && !strchr("_.-", s[i]))
			return false;
	return true;
}

/* Debian package names: [a-z0-9][a-z0-9+.-]+ (Policy 5.6.1). */
static bool valid_package(const char *s, size_t n)
{
	if (n < 2 || !is_lower_alnum((unsigned char)s[0]))
		return false;
	for (size_t i = 1; i < n; i++)
		if (!is_lower_alnum((unsigned char)s[i]) && !strchr("+.-", s[i]))
			return false;
	return true;
}

/* Debian versions, loosely: [0-9][A-Za-z0-9.+~:-]* (Policy 5.6.12). */
static bool valid_version(const char *s)
{
	if (!isdigit((unsigned char)s[0]))
		return false;
	for (const char *c = s; *c; c++)
		if (!isalnum((unsigned char)*c) && !strchr(".+~:-", *c))
			return false;
	return true;
}

/* [a-z0-9][a-z0-9._-]*: families, framework names, runtime types,
 * distros, label keys. */
static bool valid_word(const char *s)
{
	if (!is_lower_alnum((unsigned char)s[0]))
		return false;
	for (const char *c = s; *c; c++)
		if (!is_lower_alnum((unsigned char)*c) && !strchr("._-", *c))
			return false;
	return true;
}

static bool valid_env_name(const char *s)
{
	if (!isalpha((unsigned char)s[0]) && s[0] != '_')
		return false;
	for (const char *c = s; *c; c++)
		if (!isalnum((unsigned char)*c) && *c != '_')
			return false;
	return true;
}

/* ---- value handlers, one per key ---- */

/* Each gets the key's value (trimmed, continuation lines joined by '\n')
 * and the line of its key; the value belongs to the caller. */
typedef int (*value_fn)(struct parse *p, const char *key, const char *value, int line);

static int set_once(struct parse *p, char **field, const char *key,
		    const char *value, int line)
{
	if (strchr(value, '\n'))
		return fail(p, line, "%s takes one line", key);
	free(*field);
	*field = strdup(value);
	return *field ? 0 : oom(p);
}

static int on_name(struct parse *p, const char *key, const char *v, int line)
{
	if (!strchr(v, '\n') && !valid_repo(v))
		return fail(p, line, "name '%.128s' is not a Docker repository name "
			    "(lower-case letters and digits, '.', '_' or '-' between them, '/' between parts)", v);
	return set_once(p, &p->r->name, key, v, line);
}

static int on_tag(struct parse *p, const char *key, const char *v, int line)
{
	if (!strchr(v, '\n') && !valid_tag(v))
		return fail(p, line, "tag '%.128s' is not a Docker tag (letters, digits, '_', '.', '-'; "
			    "at most 128; not starting with '.' or '-')", v);
	return set_once(p, &p->r->tag, key, v, line);
}

static int on_title(struct parse *p, const char *key, const char *v, int line)
{
	if (strlen(v) > 64)
		return fail(p, line, "title is longer than 64 characters");
	return set_once(p, &p->r->title, key, v, line);
}

static int on_family(struct parse *p, const char *key, const char *v, int line)
{
	if (!strchr(v, '\n') && !valid_word(v))
		return fail(p, line, "family '%.64s' must be lower-case letters, digits, '.', '_' or '-'", v);
	return set_once(p, &p->r->family, key, v, line);
}

static int on_suite(struct parse *p, const char *key, const char *v, int line)
{
	if (!recipe_suite_version(v)) {
		char known[128] = "";
		for (size_t i = 0; i < N_SUITES; i++) {
			strcat(known, i ? ", " : "");
			strcat(known, recipe_suites[i].suite);
		}
		return fail(p, line, "unknown Debian suite '%.64s' (known: %s)", v, known);
	}
	return set_once(p, &p->r->suite, key, v, line);
}

static int on_word(struct parse *p, char **field, const char *key, const char *v, int line)
{
	if (!strchr(v, '\n') && !valid_word(v))
		return fail(p, line, "%s '%.64s' must be lower-case letters, digits, '.', '_' or '-'", key, v);
	return set_once(p, field, key, v, line);
}

static int on_distro(struct parse *p, const char *key, const char *v, int line)
{
	return on_word(p, &p->r->distro, key, v, line);
}

static int on_runtime_type(struct parse *p, const char *key, const char *v, int line)
{
	return on_word(p, &p->r->runtime_type, key, v, line);
}

static int on_runtime_path(struct parse *p, const char *key, const char *v, int line)
{
	if (v[0] != '/' || strpbrk(v, " \t\n"))
		return fail(p, line, "runtime-path must be an absolute path without spaces");
	return set_once(p, &p->r->runtime_path, key, v, line);
}

static int on_min_cpu(struct parse *p, const char *key, const char *v, int line)
{
	int64_t milli;
	struct terr e = {0};
	if (units_parse_milli(v, &milli, &e) < 0 || milli <= 0)
		return fail(p, line, "min.cpu '%.32s' is not a positive number of cores", v);
	return set_once(p, &p->r->min_cpu, key, v, line);
}

static int on_min_mem(struct parse *p, const char *key, const char *v, int line)
{
	int64_t bytes;
	struct terr e = {0};
	if (units_parse_size(v, &bytes, &e) < 0 || bytes <= 0)
		return fail(p, line, "min.mem '%.32s' is not a size (e.g. 512m, 1g)", v);
	return set_once(p, &p->r->min_mem, key, v, line);
}

static int on_min_shares(struct parse *p, const char *key, const char *v, int line)
{
	int64_t milli;
	struct terr e = {0};
	if (units_parse_milli(v, &milli, &e) < 0)
		return fail(p, line, "min.cuda.shares '%.32s' is not a number of fGPU (e.g. 0, 0.5)", v);
	return set_once(p, &p->r->min_cuda_shares, key, v, line);
}

static bool valid_port(const char *s, size_t n)
{
	if (n == 0 || n > 5)
		return false;
	long v = 0;
	for (size_t i = 0; i < n; i++) {
		if (!isdigit((unsigned char)s[i]))
			return false;
		v = v * 10 + (s[i] - '0');
	}
	return v >= 1 && v <= 65535;
}

/* One entry of ai.backend.service-ports: name:proto:port or
 * name:proto:[port,port] (Backend.AI writes both). */
static const char *check_service_port(const char *s, size_t n)
{
	const char *c1 = memchr(s, ':', n);
	if (!c1 || c1 == s)
		return "expected name:protocol:port";
	for (const char *c = s; c < c1; c++)
		if (!is_lower_alnum((unsigned char)*c) && *c != '-' && *c != '_')
			return "a service name is lower-case letters, digits, '-' or '_'";
	const char *rest = c1 + 1;
	size_t rn = n - (size_t)(rest - s);
	const char *c2 = memchr(rest, ':', rn);
	if (!c2)
		return "expected name:protocol:port";
	static const char *const protos[] = {"http", "tcp", "preopen", "pty"};
	bool known = false;
	for (size_t i = 0; i < 4; i++)
		if ((size_t)(c2 - rest) == strlen(protos[i]) && !memcmp(rest, protos[i], (size_t)(c2 - rest)))
			known = true;
	if (!known)
		return "the protocol is one of http, tcp, preopen, pty";
	const char *ports = c2 + 1;
	size_t pn = n - (size_t)(ports - s);
	if (pn >= 2 && ports[0] == '[' && ports[pn - 1] == ']') {
		ports++;
		pn -= 2;
		if (pn == 0)
			return "an empty port list";
		for (size_t i = 0; i <= pn;) {
			const char *comma = memchr(ports + i, ',', pn - i);
			size_t end = comma ? (size_t)(comma - ports) : pn;
			if (!valid_port(ports + i, end - i))
				return "a port is a number from 1 to 65535";
			i = end + 1;
		}
		return NULL;
	}
	return valid_port(ports, pn) ? NULL : "a port is a number from 1 to 65535";
}

static int on_service_ports(struct parse *p, const char *key, const char *v, int line)
{
	size_t n = strlen(v);
	size_t i = 0;
	while (i <= n) {
		/* Entries end at a comma outside brackets. */
		size_t j = i;
		int depth = 0;
		while (j < n && (v[j] != ',' || depth)) {
			if (v[j] == '[')
				depth++;
			else if (v[j] == ']' && depth)
				depth--;
			j++;
		}
		const char *why = check_service_port(v + i, j - i);
		if (why)
			return fail(p, line, "service-ports entry '%.*s': %s", (int)(j - i > 64 ? 64 : j - i),
				    v + i, why);
		i = j + 1;
	}
	return set_once(p, &p->r->service_ports, key, v, line);
}

static int on_cmd(struct parse *p, const char *key, const char *v, int line)
{
	return set_once(p, &p->r->cmd, key, v, line);
}

/* Calls fn for each whitespace-separated word of v. */
static int each_word(struct parse *p, const char *v, int line,
		     int (*fn)(struct parse *p, const char *w, size_t n, int line))
{
	const char *s = v;
	for (;;) {
		while (*s && isspace((unsigned char)*s))
			s++;
		if (!*s)
			return 0;
		const char *e = s;
		while (*e && !isspace((unsigned char)*e))
			e++;
		/* A word on a continuation line is reported at that line. */
		size_t nth = 0;
		for (const char *c = v; c < s; c++)
			nth += *c == '\n';
		int at = nth < p->n_lines ? p->lines[nth] : line;
		int r = fn(p, s, (size_t)(e - s), at);
		if (r < 0)
			return r;
		s = e;
	}
}

static int add_package(struct parse *p, const char *w, size_t n, int line)
{
	const char *eq = memchr(w, '=', n);
	size_t name_n = eq ? (size_t)(eq - w) : n;
	if (!valid_package(w, name_n))
		return fail(p, line, "'%.*s' is not a Debian package name (lower-case letters, digits, '+', '-', '.')",
			    (int)(name_n > 64 ? 64 : name_n), w);
	char *word = strndup(w, n);
	if (!word)
		return oom(p);
	if (eq && (n - name_n < 2 || !valid_version(word + name_n + 1))) {
		free(word);
		return fail(p, line, "'%.*s': a pinned version is PACKAGE=VERSION, VERSION a Debian version",
			    (int)(n > 64 ? 64 : n), w);
	}
	struct recipe *r = p->r;
	for (size_t i = 0; i < r->n_packages; i++) {
		size_t on = strcspn(r->packages[i], "=");
		if (on == name_n && !memcmp(r->packages[i], w, on)) {
			free(word);
			return fail(p, line, "package '%.*s' is listed twice", (int)(name_n > 64 ? 64 : name_n), w);
		}
	}
	char **np = realloc(r->packages, (r->n_packages + 1) * sizeof(*np));
	if (!np) {
		free(word);
		return oom(p);
	}
	r->packages = np;
	r->packages[r->n_packages++] = word;
	return 0;
}

static int on_packages(struct parse *p, const char *key, const char *v, int line)
{
	(void)key;
	return each_word(p, v, line, add_package);
}

static int add_pair(struct parse *p, struct recipe_pair **list, size_t *n,
		    const char *key, size_t kn, const char *value, int line)
{
	struct recipe_pair *nl = realloc(*list, (*n + 1) * sizeof(*nl));
	if (!nl)
		return oom(p);
	*list = nl;
	char *k = key ? strndup(key, kn) : NULL;
	char *v = strdup(value);
	if ((key && !k) || !v) {
		free(k);
		free(v);
		return oom(p);
	}
	nl[(*n)++] = (struct recipe_pair){.key = k, .value = v, .line = line};
	return 0;
}

static int add_framework(struct parse *p, const char *w, size_t n, int line)
{
	const char *eq = memchr(w, '=', n);
	char name[65];
	size_t nn = eq ? (size_t)(eq - w) : 0;
	if (!eq || nn == 0 || nn >= sizeof(name))
		return fail(p, line, "frameworks entry '%.*s': expected NAME=PACKAGE (e.g. torch=python3-torch)",
			    (int)(n > 64 ? 64 : n), w);
	memcpy(name, w, nn);
	name[nn] = '\0';
	const char *pkg = eq + 1;
	size_t pn = n - nn - 1;
	if (!valid_word(name) || !valid_package(pkg, pn))
		return fail(p, line, "frameworks entry '%.*s': NAME is lower-case letters, digits, '.', '_', '-', "
			    "PACKAGE a Debian package name", (int)(n > 64 ? 64 : n), w);
	for (size_t i = 0; i < p->r->n_frameworks; i++)
		if (!strcmp(p->r->frameworks[i].key, name))
			return fail(p, line, "framework '%s' is listed twice", name);
	char pkgz[128];
	if (pn >= sizeof(pkgz))
		return fail(p, line, "package name too long");
	memcpy(pkgz, pkg, pn);
	pkgz[pn] = '\0';
	return add_pair(p, &p->r->frameworks, &p->r->n_frameworks, name, nn, pkgz, line);
}

static int on_frameworks(struct parse *p, const char *key, const char *v, int line)
{
	(void)key;
	return each_word(p, v, line, add_framework);
}

static int on_run(struct parse *p, const char *key, const char *v, int line)
{
	(void)key;
	return add_pair(p, &p->r->run, &p->r->n_run, NULL, 0, v, line);
}

/* The labels the builder writes itself, each from its own key: a
 * `label.` of one of them would be ambiguous. */
static const char *const generated_labels[][2] = {
	{"ai.backend.kernelspec", NULL},
	{"ai.backend.base-distro", "distro"},
	{"ai.backend.runtime-type", "runtime-type"},
	{"ai.backend.runtime-path", "runtime-path"},
	{"ai.backend.resource.min.cpu", "min.cpu"},
	{"ai.backend.resource.min.mem", "min.mem"},
	{"ai.backend.resource.min.cuda.shares", "min.cuda.shares"},
	{"ai.backend.service-ports", "service-ports"},
};

static int on_label(struct parse *p, const char *key, const char *v, int line)
{
	const char *lk = key + strlen("label.");
	if (!*lk || !valid_word(lk))
		return fail(p, line, "label key '%.64s' must be lower-case letters, digits, '.', '_' or '-'", lk);
	if (!strncmp(lk, "tessera.", 8))
		return fail(p, line, "labels tessera.* are written by the builder (use title, family, frameworks)");
	for (size_t i = 0; i < sizeof(generated_labels) / sizeof(generated_labels[0]); i++)
		if (!strcmp(lk, generated_labels[i][0])) {
			if (generated_labels[i][1])
				return fail(p, line, "set %s with '%s', not as a label", lk, generated_labels[i][1]);
			return fail(p, line, "%s is written by the builder", lk);
		}
	if (strchr(v, '\n'))
		return fail(p, line, "a label takes one line");
	for (size_t i = 0; i < p->r->n_labels; i++)
		if (!strcmp(p->r->labels[i].key, lk))
			return fail(p, line, "label %s is set twice (first on line %d)", lk, p->r->labels[i].line);
	return add_pair(p, &p->r->labels, &p->r->n_labels, lk, strlen(lk), v, line);
}

static int on_env(struct parse *p, const char *key, const char *v, int line)
{
	const char *name = key + strlen("env.");
	if (!*name || !valid_env_name(name))
		return fail(p, line, "environment variable name '%.64s' must be letters, digits and '_'", name);
	if (strchr(v, '\n'))
		return fail(p, line, "env.%s takes one line", name);
	for (size_t i = 0; i < p->r->n_env; i++)
		if (!strcmp(p->r->env[i].key, name))
			return fail(p, line, "env.%s is set twice (first on line %d)", name, p->r->env[i].line);
	return add_pair(p, &p->r->env, &p->r->n_env, name, strlen(name), v, line);
}

/* ---- the keys of CUDA and pip images ---- */

/* Debian's archive areas, in the order sources.list lists them. */
static const char *const known_components[] = {"main", "contrib", "non-free", "non-free-firmware"};
#define N_COMPONENTS (sizeof(known_components) / sizeof(known_components[0]))

static int on_components(struct parse *p, const char *key, const char *v, int line)
{
	(void)key;
	int at[N_COMPONENTS] = {0};
	const char *s = v;
	for (;;) {
		while (*s && isspace((unsigned char)*s))
			s++;
		if (!*s)
			break;
		size_t n = strcspn(s, " \t\r\n");
		size_t nth = 0;
		for (const char *c = v; c < s; c++)
			nth += *c == '\n';
		int wl = nth < p->n_lines ? p->lines[nth] : line;
		size_t k = 0;
		while (k < N_COMPONENTS && !(strlen(known_components[k]) == n && !memcmp(known_components[k], s, n)))
			k++;
		if (k == N_COMPONENTS)
			return fail(p, wl, "unknown archive component '%.*s' (known: main, contrib, non-free, "
				    "non-free-firmware)", (int)(n > 64 ? 64 : n), s);
		if (at[k])
			return fail(p, wl, "component '%s' is listed twice", known_components[k]);
		at[k] = wl;
		s += n;
	}
	if (!at[0])
		return fail(p, line, "components must include main (the root filesystem comes from it)");
	struct recipe *r = p->r;
	r->components = calloc(N_COMPONENTS, sizeof(*r->components));
	if (!r->components)
		return oom(p);
	for (size_t k = 0; k < N_COMPONENTS; k++)
		if (at[k] && !(r->components[r->n_components++] = strdup(known_components[k])))
			return oom(p);
	return 0;
}

/* debconf's question types (debconf-devel(7), "Templates"). */
static const char *const debconf_types[] = {"select", "multiselect", "string", "boolean", "note",
					    "text", "password", "title", "error"};

/* OWNER QUESTION TYPE VALUE, as debconf-set-selections reads it: three
 * words, then the value (which may have spaces: "I Decline"). */
static int on_debconf(struct parse *p, const char *key, const char *v, int line)
{
	(void)key;
	if (strchr(v, '\n'))
		return fail(p, line, "debconf takes one line (OWNER QUESTION TYPE VALUE)");
	const char *f[3];
	size_t fn[3];
	const char *s = v;
	for (int i = 0; i < 3; i++) {
		while (*s == ' ' || *s == '\t')
			s++;
		f[i] = s;
		fn[i] = strcspn(s, " \t");
		s += fn[i];
		if (!fn[i])
			return fail(p, line, "debconf '%.64s': expected OWNER QUESTION TYPE VALUE "
				    "(e.g. nvidia-cudnn nvidia-cudnn/question select I Decline)", v);
	}
	while (*s == ' ' || *s == '\t')
		s++;
	const char *value = s;
	if (!valid_package(f[0], fn[0]))
		return fail(p, line, "debconf owner '%.*s' is not a Debian package name", (int)(fn[0] > 64 ? 64 : fn[0]),
			    f[0]);
	bool q_ok = memchr(f[1], '/', fn[1]) != NULL && f[1][0] != '/' && f[1][fn[1] - 1] != '/';
	for (size_t i = 0; i < fn[1]; i++)
		q_ok &= isalnum((unsigned char)f[1][i]) || strchr("._+-/:", f[1][i]) != NULL;
	if (!q_ok)
		return fail(p, line, "debconf question '%.*s' is not a debconf question name (e.g. nvidia-cudnn/question)",
			    (int)(fn[1] > 64 ? 64 : fn[1]), f[1]);
	bool t_ok = false;
	for (size_t i = 0; i < sizeof(debconf_types) / sizeof(debconf_types[0]); i++)
		t_ok |= strlen(debconf_types[i]) == fn[2] && !memcmp(debconf_types[i], f[2], fn[2]);
	if (!t_ok)
		return fail(p, line, "debconf type '%.*s' is not one of select, multiselect, string, boolean, "
			    "note, text, password, title, error", (int)(fn[2] > 32 ? 32 : fn[2]), f[2]);
	if (fn[2] == 7 && !memcmp(f[2], "boolean", 7) && strcmp(value, "true") && strcmp(value, "false"))
		return fail(p, line, "debconf boolean %.*s: the value is true or false", (int)(fn[1] > 64 ? 64 : fn[1]),
			    f[1]);
	if (fn[2] == 6 && !memcmp(f[2], "select", 6) && !*value)
		return fail(p, line, "debconf select %.*s has no value", (int)(fn[1] > 64 ? 64 : fn[1]), f[1]);
	char id[256], full[1024];
	if (fn[0] + fn[1] + 2 > sizeof(id) || strlen(v) >= sizeof(full))
		return fail(p, line, "debconf line too long");
	snprintf(id, sizeof(id), "%.*s %.*s", (int)fn[0], f[0], (int)fn[1], f[1]);
	for (size_t i = 0; i < p->r->n_debconf; i++)
		if (!strcmp(p->r->debconf[i].key, id))
			return fail(p, line, "debconf %s is set twice (first on line %d)", id, p->r->debconf[i].line);
	snprintf(full, sizeof(full), "%s %.*s%s%s", id, (int)fn[2], f[2], *value ? " " : "", value);
	return add_pair(p, &p->r->debconf, &p->r->n_debconf, id, strlen(id), full, line);
}

/* NAME=VERSION: a versioned Provides of the builder's tessera-host-driver. */
static int add_host_provide(struct parse *p, const char *w, size_t n, int line)
{
	const char *eq = memchr(w, '=', n);
	size_t nn = eq ? (size_t)(eq - w) : n;
	char ver[128];
	size_t vn = eq ? n - nn - 1 : 0;
	if (!eq || !valid_package(w, nn) || vn == 0 || vn >= sizeof(ver))
		return fail(p, line, "host-provides entry '%.*s': expected NAME=VERSION (e.g. libcuda1=550), "
			    "NAME a Debian package name", (int)(n > 64 ? 64 : n), w);
	memcpy(ver, eq + 1, vn);
	ver[vn] = '\0';
	if (!valid_version(ver))
		return fail(p, line, "host-provides entry '%.*s': '%s' is not a Debian version",
			    (int)(n > 64 ? 64 : n), w, ver);
	if (nn == strlen("tessera-host-driver") && !memcmp(w, "tessera-host-driver", nn))
		return fail(p, line, "host-provides: tessera-host-driver is the package that provides the others");
	for (size_t i = 0; i < p->r->n_host_provides; i++)
		if (strlen(p->r->host_provides[i].key) == nn && !memcmp(p->r->host_provides[i].key, w, nn))
			return fail(p, line, "host-provides: '%.*s' is listed twice", (int)(nn > 64 ? 64 : nn), w);
	return add_pair(p, &p->r->host_provides, &p->r->n_host_provides, w, nn, ver, line);
}

static int on_host_provides(struct parse *p, const char *key, const char *v, int line)
{
	(void)key;
	return each_word(p, v, line, add_host_provide);
}

/* A file name of the site's cache: one path component of plain
 * characters (it is a file name on the host and in the chroot). */
static bool valid_site_name(const char *s, size_t n)
{
	if (n == 0 || n > 200 || !isalnum((unsigned char)s[0]))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && !strchr("._+-", s[i]))
			return false;
	return true;
}

static int on_site_file(struct parse *p, const char *key, const char *v, int line)
{
	(void)key;
	if (strchr(v, '\n'))
		return fail(p, line, "site-file takes one line (FILENAME [sha256=HEX])");
	size_t nn = strcspn(v, " \t");
	if (!valid_site_name(v, nn))
		return fail(p, line, "site-file '%.*s' is not a file name (letters, digits, '.', '_', '+', '-'; "
			    "no '/'; at most 200)", (int)(nn > 64 ? 64 : nn), v);
	const char *s = v + nn;
	while (*s == ' ' || *s == '\t')
		s++;
	char sha[RECIPE_HASH_HEX + 1] = "";
	if (*s) {
		size_t sn = strcspn(s, " \t");
		bool ok = sn == 7 + RECIPE_HASH_HEX && !strncmp(s, "sha256=", 7);
		for (size_t i = 7; ok && i < sn; i++)
			ok = isxdigit((unsigned char)s[i]);
		const char *rest = s + sn;
		while (*rest == ' ' || *rest == '\t')
			rest++;
		if (!ok || *rest)
			return fail(p, line, "site-file %.*s: after the name comes sha256=HEX (64 hex digits) or nothing",
				    (int)(nn > 64 ? 64 : nn), v);
		for (size_t i = 0; i < RECIPE_HASH_HEX; i++)
			sha[i] = (char)tolower((unsigned char)s[7 + i]);
		sha[RECIPE_HASH_HEX] = '\0';
	}
	for (size_t i = 0; i < p->r->n_site_files; i++)
		if (strlen(p->r->site_files[i].key) == nn && !memcmp(p->r->site_files[i].key, v, nn))
			return fail(p, line, "site file %.*s is listed twice (first on line %d)", (int)(nn > 64 ? 64 : nn),
				    v, p->r->site_files[i].line);
	int r = add_pair(p, &p->r->site_files, &p->r->n_site_files, v, nn, sha, line);
	if (r == 0 && !sha[0]) {
		struct recipe_pair *last = &p->r->site_files[p->r->n_site_files - 1];
		free(last->value);
		last->value = NULL;
	}
	return r;
}

/* pip's distribution names compare normalized (PEP 503): lower case,
 * runs of '-', '_' and '.' one '-'. */
static void pip_normalize(const char *s, size_t n, char *out, size_t on)
{
	size_t o = 0;
	for (size_t i = 0; i < n && o + 1 < on; i++) {
		if (strchr("-_.", s[i])) {
			if (o == 0 || out[o - 1] != '-')
				out[o++] = '-';
		} else {
			out[o++] = (char)tolower((unsigned char)s[i]);
		}
	}
	out[o] = '\0';
}

/* The name's length when w is a requirement this builder takes: NAME,
 * maybe [EXTRA,...], maybe version clauses (OP VERSION, comma-separated,
 * OP one of PEP 440's), without spaces, markers, URLs or options; 0
 * otherwise. */
static size_t pip_requirement(const char *w, size_t n)
{
	size_t i = 0;
	if (n == 0 || !isalnum((unsigned char)w[0]))
		return 0;
	while (i < n && (isalnum((unsigned char)w[i]) || strchr("._-", w[i])))
		i++;
	size_t name_n = i;
	if (!isalnum((unsigned char)w[name_n - 1]))
		return 0;
	if (i < n && w[i] == '[') {
		size_t close = i + 1;
		while (close < n && w[close] != ']')
			close++;
		if (close == n || close == i + 1)
			return 0;
		for (size_t k = i + 1; k < close; k++)
			if (!isalnum((unsigned char)w[k]) && !strchr("._-,", w[k]))
				return 0;
		i = close + 1;
	}
	while (i < n) {
		static const char *const ops[] = {"===", "==", "!=", "<=", ">=", "~=", "<", ">"};
		size_t ol = 0;
		for (size_t k = 0; k < sizeof(ops) / sizeof(ops[0]) && !ol; k++)
			if (n - i >= strlen(ops[k]) && !memcmp(w + i, ops[k], strlen(ops[k])))
				ol = strlen(ops[k]);
		if (!ol)
			return 0;
		i += ol;
		size_t vs = i;
		while (i < n && (isalnum((unsigned char)w[i]) || strchr(".*+!_-", w[i])))
			i++;
		if (i == vs)
			return 0;
		if (i < n) {
			if (w[i] != ',' || i + 1 == n)
				return 0;
			i++;
		}
	}
	return name_n;
}

static int add_pip(struct parse *p, const char *w, size_t n, int line)
{
	size_t nn = pip_requirement(w, n);
	if (!nn)
		return fail(p, line, "pip requirement '%.*s' is not NAME[EXTRAS][VERSIONS] (e.g. tensorflow==2.20.*, "
			    "mlflow>=2,<3; no spaces, markers, URLs or options)", (int)(n > 64 ? 64 : n), w);
	char norm[128], other[128];
	pip_normalize(w, nn, norm, sizeof(norm));
	struct recipe *r = p->r;
	for (size_t i = 0; i < r->n_pip; i++) {
		pip_normalize(r->pip[i], pip_requirement(r->pip[i], strlen(r->pip[i])), other, sizeof(other));
		if (!strcmp(norm, other))
			return fail(p, line, "pip: '%.*s' is listed twice", (int)(nn > 64 ? 64 : nn), w);
	}
	char *word = strndup(w, n);
	char **np = word ? realloc(r->pip, (r->n_pip + 1) * sizeof(*np)) : NULL;
	if (!np) {
		free(word);
		return oom(p);
	}
	r->pip = np;
	r->pip[r->n_pip++] = word;
	return 0;
}

static int on_pip(struct parse *p, const char *key, const char *v, int line)
{
	(void)key;
	return each_word(p, v, line, add_pip);
}

void recipe_pip_name(const char *requirement, char *buf, size_t n)
{
	if (!n)
		return;
	buf[0] = '\0';
	size_t nn = pip_requirement(requirement, strlen(requirement));
	if (nn)
		pip_normalize(requirement, nn, buf, n);
}

static int on_cuda(struct parse *p, const char *key, const char *v, int line)
{
	size_t a = strspn(v, "0123456789");
	size_t b = v[a] == '.' ? strspn(v + a + 1, "0123456789") : 0;
	if (a == 0 || a > 3 || b == 0 || b > 3 || v[a + 1 + b] != '\0' || (v[0] == '0' && a > 1))
		return fail(p, line, "cuda '%.32s' is not a CUDA version MAJOR.MINOR (e.g. 12.4)", v);
	return set_once(p, &p->r->cuda, key, v, line);
}

/* Every key, once: the parser's dispatch, the unknown-key message and
 * the documentation (docs/images.md) follow this table. A key ending in
 * '.' is a prefix (env.NAME, label.KEY). */
#define RECIPE_KEYS(X) \
	X("name", on_name) \
	X("tag", on_tag) \
	X("title", on_title) \
	X("family", on_family) \
	X("suite", on_suite) \
	X("distro", on_distro) \
	X("packages", on_packages) \
	X("frameworks", on_frameworks) \
	X("runtime-type", on_runtime_type) \
	X("runtime-path", on_runtime_path) \
	X("min.cpu", on_min_cpu) \
	X("min.mem", on_min_mem) \
	X("min.cuda.shares", on_min_shares) \
	X("service-ports", on_service_ports) \
	X("cmd", on_cmd) \
	X("env.", on_env) \
	X("label.", on_label) \
	X("run", on_run) \
	X("components", on_components) \
	X("debconf", on_debconf) \
	X("host-provides", on_host_provides) \
	X("site-file", on_site_file) \
	X("pip", on_pip) \
	X("cuda", on_cuda)

struct key_entry {
	const char *key;
	value_fn fn;
};
#define AS_KEY(k, fn) {k, fn},
static const struct key_entry recipe_keys[] = {RECIPE_KEYS(AS_KEY)};
#define N_KEYS (sizeof(recipe_keys) / sizeof(recipe_keys[0]))

/* Keys that may appear more than once. */
static bool key_repeats(const char *k)
{
	return !strcmp(k, "run") || !strcmp(k, "debconf") || !strcmp(k, "site-file");
}

static const struct key_entry *find_key(const char *k)
{
	for (size_t i = 0; i < N_KEYS; i++) {
		size_t n = strlen(recipe_keys[i].key);
		if (recipe_keys[i].key[n - 1] == '.' ? !strncmp(k, recipe_keys[i].key, n)
						       : !strcmp(k, recipe_keys[i].key))
			return &recipe_keys[i];
	}
	return NULL;
}

/* ---- lines into entries ---- */

struct entry {
	char *key;
	char *value;     /* continuation lines joined with '\n' */
	int line;
	int *lines;      /* the file line of each line of value */
	size_t n_lines;
};

static bool key_char(int c)
{
	return isalnum(c) || c == '_' || c == '.' || c == '-';
}

static void trim(const char **s, size_t *n)
{
	while (*n && isspace((unsigned char)**s)) {
		(*s)++;
		(*n)--;
	}
	while (*n && isspace((unsigned char)(*s)[*n - 1]))
		(*n)--;
}

static int append(struct parse *p, struct entry *e, const char *s, size_t n, int line)
{
	size_t old = e->value ? strlen(e->value) : 0;
	char *nv = realloc(e->value, old + n + 2);
	if (!nv)
		return oom(p);
	e->value = nv;
	int *nl = realloc(e->lines, (e->n_lines + 1) * sizeof(*nl));
	if (!nl)
		return oom(p);
	e->lines = nl;
	e->lines[e->n_lines++] = line;
	if (old)
		nv[old++] = '\n';
	memcpy(nv + old, s, n);
	nv[old + n] = '\0';
	return 0;
}

static void entries_free(struct entry *e, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(e[i].key);
		free(e[i].value);
		free(e[i].lines);
	}
	free(e);
}

/* Splits text into entries; checks the line structure only. */
static int split_lines(struct parse *p, const char *text, size_t len,
		       struct entry **out, size_t *n_out)
{
	struct entry *e = NULL;
	size_t n = 0;
	int lineno = 0, r = 0;
	size_t pos = 0;
	while (pos < len && r == 0) {
		const char *nl = memchr(text + pos, '\n', len - pos);
		size_t end = nl ? (size_t)(nl - text) : len;
		const char *s = text + pos;
		size_t sn = end - pos;
		lineno++;
		pos = end + 1;
		if (memchr(s, '\0', sn)) {
			r = fail(p, lineno, "unexpected NUL byte (not a text file?)");
			break;
		}
		for (size_t i = 0; i < sn; i++)
			if (iscntrl((unsigned char)s[i]) && s[i] != '\t' && s[i] != '\r') {
				r = fail(p, lineno, "unexpected control character 0x%02x", (unsigned char)s[i]);
				break;
			}
		if (r < 0)
			break;
		bool indented = sn && (s[0] == ' ' || s[0] == '\t');
		trim(&s, &sn);
		if (sn == 0 || s[0] == '#')
			continue;
		if (indented) {
			if (n == 0) {
				r = fail(p, lineno, "an indented line continues the value above it, but no key comes before it");
				break;
			}
			r = append(p, &e[n - 1], s, sn, lineno);
			continue;
		}
		size_t k = 0;
		while (k < sn && key_char((unsigned char)s[k]))
			k++;
		size_t eq = k;
		while (eq < sn && (s[eq] == ' ' || s[eq] == '\t'))
			eq++;
		if (k == 0 || eq >= sn || s[eq] != '=') {
			r = fail(p, lineno, "expected 'key = value' (or an indented line continuing a value)");
			break;
		}
		struct entry *ne = realloc(e, (n + 1) * sizeof(*ne));
		if (!ne) {
			r = oom(p);
			break;
		}
		e = ne;
		e[n] = (struct entry){.key = strndup(s, k), .line = lineno};
		n++;
		const char *v = s + eq + 1;
		size_t vn = sn - eq - 1;
		trim(&v, &vn);
		if (!e[n - 1].key)
			r = oom(p);
		else if (vn)
			r = append(p, &e[n - 1], v, vn, lineno);
	}
	if (r < 0) {
		entries_free(e, n);
		return r;
	}
	*out = e;
	*n_out = n;
	return 0;
}

/* ---- defaults, canonical form, hash ---- */

static int fill_defaults(struct parse *p)
{
	struct recipe *r = p->r;
	if (!r->name)
		return fail(p, 0, "no 'name' (the image's repository, e.g. tessera/python)");
	if (!r->tag)
		return fail(p, 0, "no 'tag' (e.g. 3.11)");
	if (!r->suite)
		return fail(p, 0, "no 'suite' (the Debian suite, e.g. bookworm)");
	if (!r->n_packages)
		return fail(p, 0, "no 'packages' (the Debian packages to install)");
	if (!r->family) {
		const char *slash = strrchr(r->name, '/');
		r->family = strdup(slash ? slash + 1 : r->name);
	}
	if (!r->title)
		r->title = strdup(r->family ? r->family : "");
	if (!r->distro) {
		char d[32];
		snprintf(d, sizeof(d), "debian%s", recipe_suite_version(r->suite));
		r->distro = strdup(d);
	}
	if (!r->cmd)
		r->cmd = strdup("/bin/bash");
	if (!r->n_components) {
		free(r->components);
		r->components = calloc(1, sizeof(*r->components));
		if (!r->components || !(r->components[0] = strdup("main")))
			return oom(p);
		r->n_components = 1;
	}
	if (!r->family || !r->title || !r->distro || !r->cmd)
		return oom(p);
	return 0;
}

/* A growing string; ok turns false when memory ran out. */
struct sbuf {
	char *s;
	size_t n, cap;
	bool ok;
};

static void sb_put(struct sbuf *b, const char *s, size_t n)
{
	if (!b->ok)
		return;
	if (b->n + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->n + n + 1)
			cap *= 2;
		char *ns = realloc(b->s, cap);
		if (!ns) {
			b->ok = false;
			return;
		}
		b->s = ns;
		b->cap = cap;
	}
	memcpy(b->s + b->n, s, n);
	b->n += n;
	b->s[b->n] = '\0';
}

/* key=value\n with '\' and newlines escaped, so every item is one line. */
static void sb_item(struct sbuf *b, const char *k1, const char *k2, const char *v)
{
	if (!v)
		return;
	sb_put(b, k1, strlen(k1));
	if (k2)
		sb_put(b, k2, strlen(k2));
	sb_put(b, "=", 1);
	for (const char *c = v; *c; c++) {
		if (*c == '\\')
			sb_put(b, "\\\\", 2);
		else if (*c == '\n')
			sb_put(b, "\\n", 2);
		else
			sb_put(b, c, 1);
	}
	sb_put(b, "\n", 1);
}

static int pair_cmp(const void *a, const void *b)
{
	return strcmp(((const struct recipe_pair *)a)->key, ((const struct recipe_pair *)b)->key);
}

char *recipe_canonical(const struct recipe *r)
{
	struct sbuf b = {.ok = true};
	char ver[16];
	snprintf(ver, sizeof(ver), "%d", RECIPE_BUILD_VERSION);
	sb_item(&b, "tessera-recipe", NULL, ver);
	sb_item(&b, "name", NULL, r->name);
	sb_item(&b, "tag", NULL, r->tag);
	sb_item(&b, "title", NULL, r->title);
	sb_item(&b, "family", NULL, r->family);
	sb_item(&b, "suite", NULL, r->suite);
	sb_item(&b, "distro", NULL, r->distro);
	sb_item(&b, "runtime-type", NULL, r->runtime_type);
	sb_item(&b, "runtime-path", NULL, r->runtime_path);
	sb_item(&b, "min.cpu", NULL, r->min_cpu);
	sb_item(&b, "min.mem", NULL, r->min_mem);
	sb_item(&b, "min.cuda.shares", NULL, r->min_cuda_shares);
	sb_item(&b, "service-ports", NULL, r->service_ports);
	sb_item(&b, "cmd", NULL, r->cmd);
	for (size_t i = 0; i < r->n_packages; i++)
		sb_item(&b, "package", NULL, r->packages[i]);
	for (size_t i = 0; i < r->n_frameworks; i++)
		sb_item(&b, "framework.", r->frameworks[i].key, r->frameworks[i].value);
	/* Order of env and labels does not change the image: sorted copies. */
	struct recipe_pair *sorted[2] = {NULL, NULL};
	const struct recipe_pair *lists[2] = {r->env, r->labels};
	size_t counts[2] = {r->n_env, r->n_labels};
	const char *prefixes[2] = {"env.", "label."};
	for (int l = 0; l < 2; l++) {
		if (!counts[l])
			continue;
		sorted[l] = malloc(counts[l] * sizeof(*sorted[l]));
		if (!sorted[l]) {
			b.ok = false;
			continue;
		}
		memcpy(sorted[l], lists[l], counts[l] * sizeof(*sorted[l]));
		qsort(sorted[l], counts[l], sizeof(*sorted[l]), pair_cmp);
		for (size_t i = 0; i < counts[l]; i++)
			sb_item(&b, prefixes[l], sorted[l][i].key, sorted[l][i].value);
		free(sorted[l]);
	}
	for (size_t i = 0; i < r->n_run; i++)
		sb_item(&b, "run", NULL, r->run[i].value);
	/* The keys of CUDA and pip images come last, and only when set, so
	 * that recipes without them keep their hashes (and their images). */
	if (!(r->n_components == 1 && !strcmp(r->components[0], "main")))
		for (size_t i = 0; i < r->n_components; i++)
			sb_item(&b, "component", NULL, r->components[i]);
	for (size_t i = 0; i < r->n_debconf; i++)
		sb_item(&b, "debconf", NULL, r->debconf[i].value);
	for (size_t i = 0; i < r->n_host_provides; i++)
		sb_item(&b, "host-provides.", r->host_provides[i].key, r->host_provides[i].value);
	for (size_t i = 0; i < r->n_site_files; i++)
		sb_item(&b, "site-file.", r->site_files[i].key,
			r->site_files[i].value ? r->site_files[i].value : "-");
	for (size_t i = 0; i < r->n_pip; i++)
		sb_item(&b, "pip", NULL, r->pip[i]);
	sb_item(&b, "cuda", NULL, r->cuda);
	if (!b.ok) {
		free(b.s);
		return NULL;
	}
	return b.s;
}

static int hash_recipe(struct parse *p)
{
	char *canon = recipe_canonical(p->r);
	if (!canon)
		return oom(p);
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	int ok = EVP_Digest(canon, strlen(canon), md, &mdlen, EVP_sha256(), NULL);
	free(canon);
	if (!ok || mdlen * 2 != RECIPE_HASH_HEX)
		return terr_set(p->err, EIO, "sha256 failed");
	for (unsigned int i = 0; i < mdlen; i++)
		snprintf(p->r->hash + 2 * i, 3, "%02x", md[i]);
	return 0;
}

/* ---- public ---- */

int recipe_parse(const char *text, size_t len, const char *path,
		 struct recipe *out, struct terr *err)
{
	memset(out, 0, sizeof(*out));
	struct parse p = {.path = path ? path : "recipe", .r = out, .err = err};
	out->path = strdup(p.path);
	if (!out->path)
		return oom(&p);
	struct entry *e = NULL;
	size_t n = 0;
	int r = split_lines(&p, text, len, &e, &n);
	for (size_t i = 0; r == 0 && i < n; i++) {
		const struct key_entry *k = find_key(e[i].key);
		if (!k) {
			r = fail(&p, e[i].line, "unknown key '%.64s'", e[i].key);
			break;
		}
		if (!key_repeats(k->key) && k->key[strlen(k->key) - 1] != '.')
			for (size_t j = 0; j < i; j++)
				if (!strcmp(e[j].key, e[i].key)) {
					r = fail(&p, e[i].line, "%s is set twice (first on line %d)", e[i].key,
						 e[j].line);
					break;
				}
		if (r < 0)
			break;
		const char *v = e[i].value ? e[i].value : "";
		p.lines = e[i].lines;
		p.n_lines = e[i].n_lines;
		if (!*v) {
			r = fail(&p, e[i].line, "%s has no value", e[i].key);
			break;
		}
		r = k->fn(&p, e[i].key, v, e[i].line);
	}
	entries_free(e, n);
	if (r == 0)
		r = fill_defaults(&p);
	if (r == 0)
		r = hash_recipe(&p);
	if (r < 0)
		recipe_free(out);
	return r;
}

int recipe_load(const char *path, struct recipe *out, struct terr *err)
{
	memset(out, 0, sizeof(*out));
	FILE *f = fopen(path, "re");
	if (!f)
		return terr_set(err, errno, "cannot read %s: %s", path, strerror(errno));
	char *buf = NULL;
	size_t len = 0, cap = 0;
	int r = 0;
	for (;;) {
		if (len == cap) {
			/* Recipes are a page or two; a huge file is a mistake. */
			if (cap >= (1u << 20)) {
				r = terr_set(err, EFBIG, "%s: too large for a recipe", path);
				break;
			}
			cap = cap ? cap * 2 : 4096;
			char *nb = realloc(buf, cap);
			if (!nb) {
				r = terr_set(err, ENOMEM, "out of memory");
				break;
			}
			buf = nb;
		}
		size_t got = fread(buf + len, 1, cap - len, f);
		len += got;
		if (got == 0) {
			if (ferror(f))
				r = terr_set(err, EIO, "cannot read %s", path);
			break;
		}
	}
	fclose(f);
	if (r == 0)
		r = recipe_parse(buf ? buf : "", len, path, out, err);
	free(buf);
	return r;
}

static void pairs_free(struct recipe_pair *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(p[i].key);
		free(p[i].value);
	}
	free(p);
}

void recipe_free(struct recipe *r)
{
	if (!r)
		return;
	char **fields[] = {&r->path, &r->name, &r->tag, &r->title, &r->family, &r->suite,
			   &r->distro, &r->runtime_type, &r->runtime_path, &r->min_cpu,
			   &r->min_mem, &r->min_cuda_shares, &r->service_ports, &r->cmd, &r->cuda};
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
		free(*fields[i]);
	for (size_t i = 0; i < r->n_packages; i++)
		free(r->packages[i]);
	free(r->packages);
	pairs_free(r->frameworks, r->n_frameworks);
	pairs_free(r->env, r->n_env);
	pairs_free(r->labels, r->n_labels);
	pairs_free(r->run, r->n_run);
	for (size_t i = 0; i < r->n_components; i++)
		free(r->components[i]);
	free(r->components);
	pairs_free(r->debconf, r->n_debconf);
	pairs_free(r->host_provides, r->n_host_provides);
	pairs_free(r->site_files, r->n_site_files);
	for (size_t i = 0; i < r->n_pip; i++)
		free(r->pip[i]);
	free(r->pip);
	memset(r, 0, sizeof(*r));
}

int recipe_ref(const struct recipe *r, char *buf, size_t n)
{
	int w = snprintf(buf, n, "%s:%s", r->name ? r->name : "", r->tag ? r->tag : "");
	return w < 0 || (size_t)w >= n ? -ENAMETOOLONG : 0;
}

void recipe_upstream_version(const char *v, char *buf, size_t n)
{
	if (!n)
		return;
	const char *colon = strchr(v, ':');
	if (colon)
		v = colon + 1;
	size_t len = strlen(v);
	const char *dash = strrchr(v, '-');
	if (dash)
		len = (size_t)(dash - v);
	size_t cut = strcspn(v, "+~");
	if (cut < len)
		len = cut;
	if (len >= n)
		len = n - 1;
	memcpy(buf, v, len);
	buf[len] = '\0';
}
