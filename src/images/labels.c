/* Image labels and references (labels.h). Written by hand: the grammars
 * are small, Docker's reference grammar has no C library in Debian, and
 * Backend.AI's label formats are its own. */
#include "images/labels.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/units.h"

/* ---------- small helpers (no util.c: this module links with the base
 * library only, for its fuzz target) ---------- */

static void copy(char *dst, size_t n, const char *src, size_t len)
{
	if (len >= n)
		len = n - 1;
	memcpy(dst, src, len);
	dst[len] = '\0';
}

static void scopy(char *dst, size_t n, const char *src)
{
	copy(dst, n, src, strlen(src));
}

/* Printable ASCII only: labels end up in tables, JSON and log lines. */
static bool printable(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f)
			return false;
	return true;
}

static void warn(struct img_meta *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn(struct img_meta *m, const char *fmt, ...)
{
	size_t len = strlen(m->warning);
	if (len + 4 >= sizeof(m->warning))
		return;
	if (len)
		len += (size_t)snprintf(m->warning + len, sizeof(m->warning) - len, "; ");
	if (len >= sizeof(m->warning))
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(m->warning + len, sizeof(m->warning) - len, fmt, ap);
	va_end(ap);
}

/* A value shown in a warning: cut, and only when printable. */
static const char *shown(const char *v)
{
	return printable(v) && strlen(v) <= 64 ? v : "(unreadable value)";
}

/* ---------- service ports ---------- */

bool img_service_port_is_app(const struct img_service_port *p)
{
	return p->n_ports > 0 && p->ports[0] != 7611 && strcmp(p->name, "terminal") &&
	       (!strcmp(p->protocol, "http") || !strcmp(p->protocol, "tcp") || !strcmp(p->protocol, "preopen"));
}

int img_service_ports_runner_spec(const struct img_service_port *ports, size_t n, char **out,
				  struct terr *err)
{
	*out = NULL;
	size_t len = 0;
	for (size_t i = 0; i < n; i++)
		if (img_service_port_is_app(&ports[i]))
			len += strlen(ports[i].name) + strlen(ports[i].protocol) + 9;
	if (!len)
		return 0;
	char *s = malloc(len + 1);
	if (!s)
		return terr_set(err, ENOMEM, "out of memory");
	size_t o = 0;
	for (size_t i = 0; i < n; i++)
		if (img_service_port_is_app(&ports[i]))
			o += (size_t)snprintf(s + o, len + 1 - o, "%s%s:%s:%d", o ? "," : "", ports[i].name,
					      ports[i].protocol, ports[i].ports[0]);
	*out = s;
	return 0;
}

static bool known_protocol(const char *p)
{
#define IMG_PROTO_CMP(name) if (!strcmp(p, #name)) return true;
	IMG_PROTOCOLS(IMG_PROTO_CMP)
#undef IMG_PROTO_CMP
	return false;
}

/* Backend.AI keeps these for its own use in every container: the kernel
 * runner's REPL ports (2000-2003), its SSH (2200) and ttyd (7681). 2200
 * is the `sshd` app's own here too (the runner's sshd: SSH into the
 * session, and between a cluster session's containers), so only an
 * app of that name may declare it. */
static bool reserved_port(long p, const char *name)
{
	return (p >= 2000 && p <= 2003) || (p == 2200 && strcmp(name, "sshd")) || p == 7681;
}

static int parse_port(const char *s, size_t len, const char *name, int *out, struct terr *err)
{
	if (len == 0 || len > 5)
		return terr_set(err, EINVAL, "service port '%.*s' is not a number", (int)(len > 16 ? 16 : len), s);
	long v = 0;
	for (size_t i = 0; i < len; i++) {
		if (!isdigit((unsigned char)s[i]))
			return terr_set(err, EINVAL, "service port '%.*s' is not a number", (int)len, s);
		v = v * 10 + (s[i] - '0');
	}
	if (v <= 1024 || v > 65535)
		return terr_set(err, EINVAL, "service port %ld is outside 1025-65535", v);
	if (reserved_port(v, name))
		return terr_set(err, EINVAL, "service port %ld is reserved (2000-2003, 2200 and 7681 are kept for the runtime; "
				"2200 is the sshd app's)", v);
	*out = (int)v;
	return 0;
}

int img_service_ports_parse(const char *value, struct img_service_port *out, size_t max, size_t *n,
			    struct terr *err)
{
	*n = 0;
	const char *p = value;
	size_t count = 0;
	int rc = 0;
	while (*p && rc == 0) {
		/* name:proto:port or name:proto:[p1,p2] up to the next top-level ',' */
		const char *c1 = strchr(p, ':');
		const char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c1 || !c2) {
			rc = terr_set(err, EINVAL, "service port entry '%.32s' is not name:protocol:port", p);
			break;
		}
		size_t name_len = (size_t)(c1 - p), proto_len = (size_t)(c2 - c1 - 1);
		const char *ports = c2 + 1, *end;
		bool list = *ports == '[';
		if (list) {
			end = strchr(ports, ']');
			if (!end) {
				rc = terr_set(err, EINVAL, "service port list '%.32s' has no ']'", ports);
				break;
			}
			end++;
		} else {
			end = ports + strcspn(ports, ",");
		}
		if (*end && *end != ',') {
			rc = terr_set(err, EINVAL, "service port entry '%.32s' has text after its ports", p);
			break;
		}
		if (count >= max) {
			rc = terr_set(err, EINVAL, "more than %zu service ports", max);
			break;
		}
		struct img_service_port *sp = &out[count];
		memset(sp, 0, sizeof(*sp));
		if (name_len == 0 || name_len >= sizeof(sp->name)) {
			rc = terr_set(err, EINVAL, "service port name must be 1 to %zu characters", sizeof(sp->name) - 1);
			break;
		}
		for (size_t i = 0; i < name_len && rc == 0; i++)
			if (!isalnum((unsigned char)p[i]) && p[i] != '-' && p[i] != '_')
				rc = terr_set(err, EINVAL, "service port name '%.*s' may use letters, digits, '-' and '_' only",
					      (int)name_len, p);
		if (rc)
			break;
		copy(sp->name, sizeof(sp->name), p, name_len);
		copy(sp->protocol, sizeof(sp->protocol), c1 + 1, proto_len < sizeof(sp->protocol) ? proto_len : 0);
		if (proto_len >= sizeof(sp->protocol) || !known_protocol(sp->protocol)) {
			rc = terr_set(err, EINVAL, "service %s: protocol '%.*s' is not one of http, tcp, preopen, pty, internal",
				      sp->name, (int)(proto_len > 16 ? 16 : proto_len), c1 + 1);
			break;
		}
		const char *q = list ? ports + 1 : ports, *qend = list ? end - 1 : end;
		while (rc == 0) {
			const char *e = q;
			while (e < qend && *e != ',')
				e++;
			if (sp->n_ports >= IMG_MAX_PORTS_PER_SERVICE) {
				rc = terr_set(err, EINVAL, "service %s has more than %d ports", sp->name, IMG_MAX_PORTS_PER_SERVICE);
				break;
			}
			if ((rc = parse_port(q, (size_t)(e - q), sp->name, &sp->ports[sp->n_ports], err)) < 0)
				break;
			sp->n_ports++;
			if (e >= qend)
				break;
			q = e + 1;
		}
		if (rc)
			break;
		/* Names and ports are each used once across all services. */
		for (size_t k = 0; k < count && rc == 0; k++) {
			if (!strcmp(out[k].name, sp->name))
				rc = terr_set(err, EINVAL, "service port name '%s' is used twice", sp->name);
			for (int a = 0; a < out[k].n_ports && rc == 0; a++)
				for (int b = 0; b < sp->n_ports && rc == 0; b++)
					if (out[k].ports[a] == sp->ports[b])
						rc = terr_set(err, EINVAL, "service port %d is used twice", sp->ports[b]);
		}
		for (int a = 0; a < sp->n_ports && rc == 0; a++)
			for (int b = a + 1; b < sp->n_ports && rc == 0; b++)
				if (sp->ports[a] == sp->ports[b])
					rc = terr_set(err, EINVAL, "service port %d is used twice", sp->ports[a]);
		if (rc)
			break;
		count++;
		p = *end ? end + 1 : end;
	}
	if (rc < 0)
		return rc;
	*n = count;
	return 0;
}

/* ---------- the labels ---------- */

static void parse_frameworks(const char *v, struct img_meta *m)
{
	const char *p = v;
	while (*p) {
		size_t len = strcspn(p, ",");
		const char *eq = memchr(p, '=', len);
		size_t nlen = eq ? (size_t)(eq - p) : len;
		/* trim spaces around name and version */
		const char *ns = p;
		while (nlen && *ns == ' ') { ns++; nlen--; }
		while (nlen && ns[nlen - 1] == ' ') nlen--;
		const char *vs = eq ? eq + 1 : p + len;
		size_t vlen = eq ? (size_t)(p + len - vs) : 0;
		while (vlen && *vs == ' ') { vs++; vlen--; }
		while (vlen && vs[vlen - 1] == ' ') vlen--;
		if (nlen == 0 || nlen >= sizeof(m->frameworks[0].name) || vlen >= sizeof(m->frameworks[0].version)) {
			if (len)
				warn(m, "%s: entry '%.*s' is not name=version", IMG_LABEL_FRAMEWORKS, (int)(len > 32 ? 32 : len), p);
		} else if (m->n_frameworks < IMG_MAX_FRAMEWORKS) {
			struct img_framework *f = &m->frameworks[m->n_frameworks++];
			copy(f->name, sizeof(f->name), ns, nlen);
			copy(f->version, sizeof(f->version), vs, vlen);
		}
		p += len;
		if (*p)
			p++;
	}
}

static void parse_features(const char *v, struct img_meta *m)
{
	scopy(m->features, sizeof(m->features), v);
	const char *p = v;
	while (*p) {
		size_t len = strcspn(p, " ,\t");
		if (len == 7 && !strncmp(p, "private", 7))
			m->hidden = true;
		p += len;
		while (*p == ' ' || *p == ',' || *p == '\t')
			p++;
	}
}

/* tessera.cuda: the CUDA version the image's frameworks were built for,
 * MAJOR.MINOR (each 1 to 3 digits, no leading zero in MAJOR), as the
 * recipe's `cuda` key takes it. Anything else is refused with a warning:
 * the launcher shows it as a mark, where a stray text would mislead. */
static void parse_cuda(struct img_meta *m, const char *v)
{
	size_t a = strspn(v, "0123456789");
	size_t b = v[a] == '.' ? strspn(v + a + 1, "0123456789") : 0;
	if (a == 0 || a > 3 || b == 0 || b > 3 || v[a + 1 + b] != '\0' || (v[0] == '0' && a > 1)) {
		warn(m, "%s '%s' is not a CUDA version such as 12.4", IMG_LABEL_CUDA, shown(v));
		return;
	}
	scopy(m->cuda, sizeof(m->cuda), v);
}

/* A text label copied as is; a label longer than its field or not
 * printable is refused with a warning. */
static void text(struct img_meta *m, const char *key, const char *v, char *dst, size_t n)
{
	if (strlen(v) >= n || !printable(v)) {
		warn(m, "%s is not a printable text of at most %zu characters", key, n - 1);
		return;
	}
	scopy(dst, n, v);
}

void img_labels_parse(const struct img_label *labels, size_t n, struct img_meta *out)
{
	memset(out, 0, sizeof(*out));
	bool min_bad = false, min_any = false;
	for (size_t i = 0; i < n; i++) {
		const char *k = labels[i].key, *v = labels[i].value;
		if (!k || !v)
			continue;
		struct terr err = {0};
		if (!strcmp(k, IMG_LABEL_KERNELSPEC)) {
			out->kernelspec = true;
		} else if (!strcmp(k, IMG_LABEL_FEATURES)) {
			parse_features(v, out);
		} else if (!strcmp(k, IMG_LABEL_BASE_DISTRO)) {
			text(out, k, v, out->base_distro, sizeof(out->base_distro));
		} else if (!strcmp(k, IMG_LABEL_RUNTIME_TYPE)) {
			text(out, k, v, out->runtime_type, sizeof(out->runtime_type));
		} else if (!strcmp(k, IMG_LABEL_RUNTIME_PATH)) {
			text(out, k, v, out->runtime_path, sizeof(out->runtime_path));
		} else if (!strcmp(k, IMG_LABEL_MIN_CPU) || !strcmp(k, IMG_LABEL_MIN_FGPU)) {
			int64_t *dst = !strcmp(k, IMG_LABEL_MIN_CPU) ? &out->min_cpu_m : &out->min_fgpu_m;
			min_any = true;
			if (units_parse_milli(v, dst, &err) < 0) {
				min_bad = true;
				warn(out, "%s '%s' is not a number such as 1 or 0.5", k, shown(v));
			}
		} else if (!strcmp(k, IMG_LABEL_MIN_MEM)) {
			min_any = true;
			if (units_parse_size(v, &out->min_mem, &err) < 0) {
				min_bad = true;
				warn(out, "%s '%s' is not a size such as 1g, 512m or bytes", k, shown(v));
			}
		} else if (!strcmp(k, IMG_LABEL_SERVICE_PORTS)) {
			if (img_service_ports_parse(v, out->ports, IMG_MAX_SERVICE_PORTS, &out->n_ports, &err) < 0)
				warn(out, "%s: %s", k, err.msg);
		} else if (!strcmp(k, IMG_LABEL_FAMILY)) {
			text(out, k, v, out->family, sizeof(out->family));
		} else if (!strcmp(k, IMG_LABEL_TITLE)) {
			text(out, k, v, out->title, sizeof(out->title));
		} else if (!strcmp(k, IMG_LABEL_FRAMEWORKS)) {
			if (!printable(v))
				warn(out, "%s is not printable text", k);
			else
				parse_frameworks(v, out);
		} else if (!strcmp(k, IMG_LABEL_CUDA)) {
			parse_cuda(out, v);
		} else if (!strcmp(k, IMG_LABEL_RECIPE_HASH)) {
			text(out, k, v, out->recipe_hash, sizeof(out->recipe_hash));
		} else if (!strcmp(k, IMG_LABEL_OWNER)) {
			/* An owner that cannot be read must not make the image
			 * public: it is kept as a value no user id has. */
			if (!*v || strlen(v) >= sizeof(out->owner) || !printable(v)) {
				warn(out, "%s is not a user id; the image is nobody's", k);
				scopy(out->owner, sizeof(out->owner), "?");
			} else {
				scopy(out->owner, sizeof(out->owner), v);
			}
		} else if (!strcmp(k, IMG_LABEL_SOURCE_SESSION)) {
			text(out, k, v, out->source_session, sizeof(out->source_session));
		} else if (!strcmp(k, IMG_LABEL_SOURCE_IMAGE)) {
			text(out, k, v, out->source_image, sizeof(out->source_image));
		} else if (!strcmp(k, IMG_LABEL_COMMITTED)) {
			text(out, k, v, out->committed, sizeof(out->committed));
		}
	}
	if (min_bad) {
		out->min_cpu_m = out->min_mem = out->min_fgpu_m = 0;
		out->has_min = false;
	} else {
		out->has_min = min_any && (out->min_cpu_m || out->min_mem || out->min_fgpu_m);
	}
}

/* ---------- references ---------- */

static int is_path_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

int img_ref_parse(const char *ref, struct img_ref *out, struct terr *err)
{
	size_t len = strlen(ref);
	if (len == 0)
		return terr_set(err, EINVAL, "image must not be empty");
	if (len > 255)
		return terr_set(err, EINVAL, "image reference is longer than 255 characters");
	const char *at = strchr(ref, '@');
	size_t main_len = at ? (size_t)(at - ref) : len;
	if (at) {
		const char *d = at + 1;
		if (strncmp(d, "sha256:", 7) != 0 || strlen(d + 7) != 64)
			return terr_set(err, EINVAL, "image digest in '%s' must be sha256:<64 hex>", ref);
		for (const char *p = d + 7; *p; p++)
			if (!isdigit((unsigned char)*p) && !(*p >= 'a' && *p <= 'f'))
				return terr_set(err, EINVAL, "image digest in '%s' must be lower-case hex", ref);
	}
	/* The tag is after the last ':' that follows the last '/'. */
	const char *last_slash = NULL;
	for (size_t i = 0; i < main_len; i++)
		if (ref[i] == '/')
			last_slash = ref + i;
	const char *tag = NULL;
	for (const char *p = last_slash ? last_slash : ref; p < ref + main_len; p++)
		if (*p == ':')
			tag = p;
	size_t name_len = tag ? (size_t)(tag - ref) : main_len;
	if (tag) {
		size_t tlen = main_len - name_len - 1;
		if (tlen == 0 || tlen > 128)
			return terr_set(err, EINVAL, "image tag in '%s' must be 1 to 128 characters", ref);
		for (size_t i = 1; i <= tlen; i++) {
			char c = tag[i];
			if (!(isalnum((unsigned char)c) || c == '_' || c == '.' || c == '-') || !isascii((unsigned char)c))
				return terr_set(err, EINVAL, "image tag in '%s' may contain only letters, digits, '_', '.' and '-'", ref);
		}
		if (tag[1] == '.' || tag[1] == '-')
			return terr_set(err, EINVAL, "image tag in '%s' must not start with '.' or '-'", ref);
	}
	if (name_len == 0)
		return terr_set(err, EINVAL, "image '%s' has no name", ref);
	/* Components separated by '/'; the first may be a registry host[:port]
	 * (it contains '.' or ':' or is "localhost"). */
	size_t start = 0, path_start = 0;
	int comp = 0;
	while (start <= name_len) {
		size_t end = start;
		while (end < name_len && ref[end] != '/')
			end++;
		if (end == start)
			return terr_set(err, EINVAL, "image '%s' has an empty path component", ref);
		int registry = comp == 0 && end < name_len &&
			       (memchr(ref + start, '.', end - start) || memchr(ref + start, ':', end - start) ||
				(end - start == 9 && !strncmp(ref + start, "localhost", 9)));
		const char *colon = registry ? memchr(ref + start, ':', end - start) : NULL;
		for (size_t i = start; i < end; i++) {
			char c = ref[i];
			if (registry ? !(isalnum((unsigned char)c) || c == '.' || c == '-' || c == ':') || !isascii((unsigned char)c)
				     : !is_path_char(c))
				return terr_set(err, EINVAL,
						"image '%s' is not a valid reference: names use lower-case letters, digits, '.', '_' and '-'",
						ref);
			if (registry && colon && ref + i > colon && !isdigit((unsigned char)c))
				return terr_set(err, EINVAL, "image '%s': the registry port must be a number", ref);
			/* Separators inside a name: one '.', one or two '_', or a
			 * run of '-' (Docker's reference grammar). */
			char prev = i > start ? ref[i - 1] : 0;
			if (!registry && prev && strchr("._-", c) && strchr("._-", prev) &&
			    !(c == '-' && prev == '-') && !(c == '_' && prev == '_' && (i < start + 2 || ref[i - 2] != '_')))
				return terr_set(err, EINVAL, "image '%s': '%c%c' is not a valid separator in a name", ref, prev, c);
		}
		if (registry && colon && colon == ref + end - 1)
			return terr_set(err, EINVAL, "image '%s': the registry port must be a number", ref);
		if (!registry && (!isalnum((unsigned char)ref[start]) || !isalnum((unsigned char)ref[end - 1])))
			return terr_set(err, EINVAL, "image '%s': each name component must start and end with a letter or digit", ref);
		if (registry)
			path_start = end + 1;
		comp++;
		start = end + 1;
	}
	if (!out)
		return 0;
	memset(out, 0, sizeof(*out));
	if (path_start)
		copy(out->registry, sizeof(out->registry), ref, path_start - 1);
	const char *path = ref + path_start;
	size_t plen = name_len - path_start;
	bool hub = !out->registry[0] || !strcmp(out->registry, "docker.io") ||
		   !strcmp(out->registry, "index.docker.io") || !strcmp(out->registry, "registry-1.docker.io");
	/* Docker Hub's name is dropped unless the path's first component
	 * would then read as a registry ("docker.io/a.b/c"). */
	size_t first = plen;
	for (size_t i = 0; i < plen; i++)
		if (path[i] == '/') {
			first = i;
			break;
		}
	if (hub && first < plen &&
	    (memchr(path, '.', first) || memchr(path, ':', first) || (first == 9 && !strncmp(path, "localhost", 9)))) {
		scopy(out->registry, sizeof(out->registry), "docker.io");
		hub = false;
	}
	if (hub) {
		out->registry[0] = '\0';
		if (plen > 8 && !strncmp(path, "library/", 8) && !memchr(path + 8, '/', plen - 8)) {
			path += 8;
			plen -= 8;
		}
	}
	copy(out->path, sizeof(out->path), path, plen);
	if (tag)
		copy(out->tag, sizeof(out->tag), tag + 1, main_len - name_len - 1);
	if (at)
		scopy(out->digest, sizeof(out->digest), at + 1);
	return 0;
}

void img_ref_name(const struct img_ref *r, char *buf, size_t n)
{
	snprintf(buf, n, "%s%s%s", r->registry, r->registry[0] ? "/" : "", r->path);
}

void img_ref_format(const struct img_ref *r, char *buf, size_t n)
{
	const char *tag = r->tag[0] ? r->tag : (r->digest[0] ? "" : "latest");
	snprintf(buf, n, "%s%s%s%s%s%s%s", r->registry, r->registry[0] ? "/" : "", r->path, *tag ? ":" : "", tag,
		 r->digest[0] ? "@" : "", r->digest);
}

int img_ref_canonical(const char *s, char *buf, size_t n, struct terr *err)
{
	struct img_ref r;
	int rc = img_ref_parse(s, &r, err);
	if (rc < 0)
		return rc;
	img_ref_format(&r, buf, n);
	return 0;
}
