/* Building images from recipes (imagebuild/build.h). The work is done by
 * Debian's own tools, run as child processes: debootstrap, apt-get and
 * dpkg-query in a chroot, tar and the docker CLI. This file sequences
 * them, reads their output for the progress, and cleans up. The image is
 * handed to Docker with `docker import` rather than the Engine API: the
 * root filesystem is gigabytes, and the project's HTTP client sends
 * bodies from memory only. */
#include "imagebuild/build.h"

#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/evp.h>

#include "common/util.h"

#define IMG_STAGE_NAME(id, name) name,
static const char *const stage_names[] = {IMG_STAGES(IMG_STAGE_NAME)};
#undef IMG_STAGE_NAME

const char *img_stage_name(enum img_stage s)
{
	return s < IMG_STAGE_COUNT ? stage_names[s] : "?";
}

/* The PATH of every command the build runs and of the image itself. */
#define IMG_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#define IMG_HOME "/home/work"
/* Files the build puts into the root for its own sake and removes in the
 * clean stage: apt and dpkg settings for an unattended, fast install, and
 * the policy that keeps packages from starting services. */
#define BUILD_APT_CONF "/etc/apt/apt.conf.d/00tessera-build"
#define BUILD_DPKG_CFG "/etc/dpkg/dpkg.cfg.d/00tessera-build"
#define POLICY_RC_D "/usr/sbin/policy-rc.d"
/* The build machine's CA certificates, for what the run steps download
 * with Node.js (npm): the build reaches the network as the machine does,
 * through whatever TLS-inspecting proxy the machine trusts, which the
 * image's own ca-certificates does not know. In /tmp, which the clean
 * stage empties: never in the image. */
#define HOST_CA_BUNDLE "/etc/ssl/certs/ca-certificates.crt"
#define BUILD_CA "/tmp/tessera-build-ca.crt"

/* ---- sources.list ---- */

static bool plain_suite(const char *s, size_t n)
{
	char buf[32];
	if (n == 0 || n >= sizeof(buf))
		return false;
	memcpy(buf, s, n);
	buf[n] = '\0';
	return recipe_suite_version(buf) != NULL;
}

static bool security_suite(const char *s, size_t n)
{
	return (n > 9 && !memcmp(s + n - 9, "-security", 9)) || (n > 8 && !memcmp(s + n - 8, "/updates", 8));
}

static void copy_n(char *dst, size_t dn, const char *s, size_t n)
{
	if (!dn)
		return;
	if (n >= dn)
		n = dn - 1;
	memcpy(dst, s, n);
	dst[n] = '\0';
	/* A trailing '/' would double in "URI/dists". */
	while (n > 1 && dst[n - 1] == '/')
		dst[--n] = '\0';
}

/* One source: its URIs and suites (each a whitespace-separated list);
 * takes the first URI for the first plain and the first security suite. */
static void consider(const char *uris, size_t un, const char *suites, size_t sn,
		     char *mirror, size_t mn, char *security, size_t secn)
{
	size_t ul = 0;
	while (ul < un && !isspace((unsigned char)uris[ul]))
		ul++;
	if (!ul)
		return;
	for (size_t i = 0; i < sn;) {
		while (i < sn && isspace((unsigned char)suites[i]))
			i++;
		size_t j = i;
		while (j < sn && !isspace((unsigned char)suites[j]))
			j++;
		if (j > i) {
			if (!mirror[0] && plain_suite(suites + i, j - i))
				copy_n(mirror, mn, uris, ul);
			else if (!security[0] && security_suite(suites + i, j - i))
				copy_n(security, secn, uris, ul);
		}
		i = j;
	}
}

static const char *line_end(const char *s)
{
	const char *e = strchr(s, '\n');
	return e ? e : s + strlen(s);
}

void img_mirrors_from_sources(const char *text, bool deb822, char *mirror, size_t mirror_n,
			      char *security, size_t security_n)
{
	if (mirror_n)
		mirror[0] = '\0';
	if (security_n)
		security[0] = '\0';
	const char *p = text;
	/* deb822: stanzas of "Field: value" separated by blank lines. */
	const char *uris = NULL, *suites = NULL;
	size_t un = 0, sn = 0;
	bool is_deb = false, enabled = true;
	while (*p) {
		const char *e = line_end(p);
		const char *s = p;
		while (s < e && (*s == ' ' || *s == '\t'))
			s++;
		size_t n = (size_t)(e - s);
		while (n && isspace((unsigned char)s[n - 1]))
			n--;
		if (deb822) {
			if (n == 0) {
				if (is_deb && enabled && uris && suites)
					consider(uris, un, suites, sn, mirror, mirror_n, security, security_n);
				uris = suites = NULL;
				is_deb = false;
				enabled = true;
			} else if (s == p && s[0] != '#') {
				const char *colon = memchr(s, ':', n);
				if (colon) {
					size_t fn = (size_t)(colon - s);
					const char *v = colon + 1;
					while (v < s + n && isspace((unsigned char)*v))
						v++;
					size_t vn = (size_t)(s + n - v);
					if (fn == 5 && !strncasecmp(s, "Types", 5)) {
						for (size_t i = 0; i + 3 <= vn; i++)
							if (!memcmp(v + i, "deb", 3) &&
							    (i + 3 == vn || isspace((unsigned char)v[i + 3])) &&
							    (i == 0 || isspace((unsigned char)v[i - 1])))
								is_deb = true;
					} else if (fn == 4 && !strncasecmp(s, "URIs", 4)) {
						uris = v;
						un = vn;
					} else if (fn == 6 && !strncasecmp(s, "Suites", 6)) {
						suites = v;
						sn = vn;
					} else if (fn == 7 && !strncasecmp(s, "Enabled", 7)) {
						enabled = !(vn == 2 && !strncasecmp(v, "no", 2));
					}
				}
			}
		} else if (n > 4 && !strncmp(s, "deb", 3) && (s[3] == ' ' || s[3] == '\t')) {
			/* deb [options] URI SUITE COMPONENT... */
			const char *q = s + 4, *end = s + n;
			while (q < end && isspace((unsigned char)*q))
				q++;
			if (q < end && *q == '[') {
				const char *close = memchr(q, ']', (size_t)(end - q));
				q = close ? close + 1 : end;
				while (q < end && isspace((unsigned char)*q))
					q++;
			}
			const char *u = q;
			while (q < end && !isspace((unsigned char)*q))
				q++;
			size_t ulen = (size_t)(q - u);
			while (q < end && isspace((unsigned char)*q))
				q++;
			const char *st = q;
			while (q < end && !isspace((unsigned char)*q))
				q++;
			if (ulen && q > st)
				consider(u, ulen, st, (size_t)(q - st), mirror, mirror_n, security, security_n);
		}
		p = *e ? e + 1 : e;
	}
	if (deb822 && is_deb && enabled && uris && suites)
		consider(uris, un, suites, sn, mirror, mirror_n, security, security_n);
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The mirrors of this machine's apt: sources.list, then sources.list.d in
 * name order (as apt reads them). */
static void host_mirrors(char *mirror, size_t mn, char *security, size_t sn)
{
	mirror[0] = security[0] = '\0';
	char *files[128];
	size_t nf = 0;
	files[nf++] = strdup("/etc/apt/sources.list");
	DIR *d = opendir("/etc/apt/sources.list.d");
	struct dirent *e;
	while (d && (e = readdir(d)) && nf < sizeof(files) / sizeof(files[0])) {
		size_t l = strlen(e->d_name);
		if ((l > 5 && !strcmp(e->d_name + l - 5, ".list")) ||
		    (l > 8 && !strcmp(e->d_name + l - 8, ".sources"))) {
			char path[PATH_MAX];
			snprintf(path, sizeof(path), "/etc/apt/sources.list.d/%s", e->d_name);
			files[nf++] = strdup(path);
		}
	}
	if (d)
		closedir(d);
	if (nf > 2)
		qsort(files + 1, nf - 1, sizeof(files[0]), name_cmp);
	for (size_t i = 0; i < nf; i++) {
		char m[512], s[512], *text = NULL;
		size_t len;
		struct terr ignored = {0};
		if (files[i] && util_read_file(files[i], &text, &len, &ignored) == 0) {
			size_t l = strlen(files[i]);
			img_mirrors_from_sources(text, l > 8 && !strcmp(files[i] + l - 8, ".sources"),
						 m, sizeof(m), s, sizeof(s));
			if (!mirror[0] && m[0])
				copy_n(mirror, mn, m, strlen(m));
			if (!security[0] && s[0])
				copy_n(security, sn, s, strlen(s));
			free(text);
		}
		free(files[i]);
	}
}

/* ---- pip ---- */

bool img_pip_trusted_host(const char *url, char *host, size_t n)
{
	if (n)
		host[0] = '\0';
	if (strncmp(url, "http://", 7))
		return false;
	const char *h = url + 7;
	const char *at = NULL;
	size_t len = strcspn(h, "/?#");
	/* user:password@host: the host is after the '@'. */
	for (size_t i = 0; i < len; i++)
		if (h[i] == '@')
			at = h + i;
	if (at) {
		len -= (size_t)(at + 1 - h);
		h = at + 1;
	}
	if (!len || len >= n)
		return false;
	memcpy(host, h, len);
	host[len] = '\0';
	return true;
}

/* ---- site files and readiness ---- */

void img_site_dir(const struct img_build_opts *o, char *buf, size_t n)
{
	snprintf(buf, n, "%s/site", o && o->cache_dir ? o->cache_dir : IMG_DEFAULT_CACHE_DIR);
}

/* Reads fd to its end into the digest, and into out_fd when >= 0. */
static int digest_fd(int fd, int out_fd, char hex[RECIPE_HASH_HEX + 1], const char *what, struct terr *err)
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	char *buf = malloc(1 << 20);
	int rc = 0;
	if (!ctx || !buf || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1)
		rc = terr_set(err, ENOMEM, "out of memory");
	while (rc == 0) {
		ssize_t got = read(fd, buf, 1 << 20);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			rc = terr_set(err, errno, "cannot read %s: %s", what, strerror(errno));
			break;
		}
		if (got == 0)
			break;
		EVP_DigestUpdate(ctx, buf, (size_t)got);
		for (ssize_t off = 0; out_fd >= 0 && off < got;) {
			ssize_t w = write(out_fd, buf + off, (size_t)(got - off));
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				rc = terr_set(err, w < 0 ? errno : EIO, "cannot write the copy of %s: %s", what,
					      strerror(w < 0 ? errno : EIO));
				break;
			}
			off += w;
		}
	}
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	if (rc == 0 && (EVP_DigestFinal_ex(ctx, md, &mdlen) != 1 || mdlen * 2 != RECIPE_HASH_HEX))
		rc = terr_set(err, EIO, "sha256 failed");
	for (unsigned int i = 0; rc == 0 && i < mdlen; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	EVP_MD_CTX_free(ctx);
	free(buf);
	return rc;
}

int img_sha256_file(const char *path, char hex[RECIPE_HASH_HEX + 1], struct terr *err)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return terr_set(err, errno, "cannot read %s: %s", path, strerror(errno));
	int rc = digest_fd(fd, -1, hex, path, err);
	close(fd);
	return rc;
}

int img_site_file_add(const struct img_build_opts *o, const char *path, const char *want,
		      char *dest, size_t dest_n, char hex[RECIPE_HASH_HEX + 1], struct terr *err)
{
	const char *name = strrchr(path, '/');
	name = name ? name + 1 : path;
	struct stat st;
	if (stat(path, &st) < 0)
		return terr_set(err, errno, "site file %s: %s", path, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return terr_set(err, EINVAL, "site file %s is not a regular file", path);
	/* The names recipes can ask for (recipe.c's site-file check). */
	bool ok = *name && isalnum((unsigned char)name[0]) && strlen(name) <= 200;
	for (const char *c = name; ok && *c; c++)
		ok = isalnum((unsigned char)*c) || strchr("._+-", *c);
	if (!ok)
		return terr_set(err, EINVAL, "site file %s: a recipe cannot name '%s' (letters, digits, '.', '_', "
				"'+', '-'; at most 200)", path, name);
	char dir[PATH_MAX], tmp[PATH_MAX];
	img_site_dir(o, dir, sizeof(dir));
	if (util_mkdir_p(dir, 0755, err) < 0)
		return -EIO;
	if (snprintf(dest, dest_n, "%s/%s", dir, name) >= (int)dest_n ||
	    snprintf(tmp, sizeof(tmp), "%s/.%s.%d.part", dir, name, (int)getpid()) >= (int)sizeof(tmp))
		return terr_set(err, ENAMETOOLONG, "cache directory path too long: %.100s", dir);
	int in = open(path, O_RDONLY | O_CLOEXEC);
	if (in < 0)
		return terr_set(err, errno, "cannot read %s: %s", path, strerror(errno));
	int out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (out < 0) {
		int e = errno;
		close(in);
		return terr_set(err, e, "cannot write %s: %s", tmp, strerror(e));
	}
	int rc = digest_fd(in, out, hex, path, err);
	close(in);
	if (close(out) < 0 && rc == 0)
		rc = terr_set(err, errno, "cannot write %s: %s", tmp, strerror(errno));
	if (rc == 0 && want && strcmp(want, hex))
		rc = terr_set(err, EINVAL, "site file %s has sha256 %s, not the %s its recipe names", path, hex, want);
	if (rc == 0 && rename(tmp, dest) < 0)
		rc = terr_set(err, errno, "cannot rename %s to %s: %s", tmp, dest, strerror(errno));
	if (rc < 0)
		unlink(tmp);
	return rc;
}

static void add_line(char *buf, size_t n, int *count, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static void add_line(char *buf, size_t n, int *count, const char *fmt, ...)
{
	size_t used = strlen(buf);
	if (used && used + 1 < n)
		buf[used++] = '\n', buf[used] = '\0';
	va_list ap;
	va_start(ap, fmt);
	if (used < n)
		vsnprintf(buf + used, n - used, fmt, ap);
	va_end(ap);
	(*count)++;
}

int img_recipe_needs(const struct recipe *r, const struct img_build_opts *o, char *buf, size_t n)
{
	int count = 0;
	if (n)
		buf[0] = '\0';
	if (r->n_pip && !(o && o->pip_index && *o->pip_index)) {
		char reqs[1024] = "";
		for (size_t i = 0; i < r->n_pip; i++)
			snprintf(reqs + strlen(reqs), sizeof(reqs) - strlen(reqs), "%s%s", i ? " " : "", r->pip[i]);
		add_line(buf, n, &count, "needs a pip index for %s: --pip-index URL or pip_index in %s", reqs,
			 o && o->config_path ? o->config_path : IMG_DEFAULT_CONFIG);
	}
	char dir[PATH_MAX];
	img_site_dir(o, dir, sizeof(dir));
	for (size_t i = 0; i < r->n_site_files; i++) {
		const struct recipe_pair *f = &r->site_files[i];
		char path[PATH_MAX + 256], hex[RECIPE_HASH_HEX + 1] = "";
		struct stat st;
		struct terr ignored = {0};
		snprintf(path, sizeof(path), "%s/%s", dir, f->key);
		if (stat(path, &st) < 0 || !S_ISREG(st.st_mode))
			add_line(buf, n, &count, "needs site file %s: tessera image build --site-file PATH", f->key);
		else if (f->value && (img_sha256_file(path, hex, &ignored) < 0 || strcmp(hex, f->value)))
			add_line(buf, n, &count, "needs site file %s: the one in %s has sha256 %s, not %s: "
				 "tessera image build --site-file PATH", f->key, dir, hex[0] ? hex : "(unreadable)",
				 f->value);
	}
	return count;
}

/* ---- running commands ---- */

struct builder {
	const struct recipe *r;
	const struct img_build_opts *o;
	struct img_build_result *res;
	struct terr *err;
	char cache[PATH_MAX / 2];
	char suite_dir[PATH_MAX / 2];
	char build_dir[PATH_MAX / 2];
	char root[PATH_MAX / 2];
	char site_dir[PATH_MAX / 2];
	char mirror[512], security[512];
	int log_fd;
	struct img_progress prog;
	char what[256];
	char last[2][256];     /* the output's last two non-empty lines */
	bool build_ca;         /* BUILD_CA is in the root */
	bool base_kept;        /* the root's base came from the cache, not debootstrap */
	char note[512];        /* the progress's latest note */
	int64_t stage_start;
};

static void report(struct builder *b)
{
	b->prog.what = b->what;
	if (b->o->progress)
		b->o->progress(&b->prog, b->o->ud);
}

static void enter_stage(struct builder *b, enum img_stage s)
{
	int64_t now = util_mono_ms();
	if (b->stage_start)
		b->res->stage_ms[b->prog.stage] += now - b->stage_start;
	b->stage_start = now;
	b->prog = (struct img_progress){.stage = s};
	b->what[0] = '\0';
	report(b);
}

static void log_text(struct builder *b, const char *s)
{
	if (b->log_fd >= 0 && write(b->log_fd, s, strlen(s)) < 0) {
		/* The log is for reading after a failure; losing it is not one. */
	}
}

static void note(struct builder *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A line of its own in the progress (and the log): what the stage found
 * out, or a warning ("warning: ...") about something it went on without. */
static void note(struct builder *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(b->note, sizeof(b->note), fmt, ap);
	va_end(ap);
	log_text(b, "# ");
	log_text(b, b->note);
	log_text(b, "\n");
	b->prog.note = b->note;
	report(b);
	b->prog.note = NULL;
}

static void set_what(struct builder *b, const char *s, size_t n)
{
	copy_n(b->what, sizeof(b->what), s, n);
}

typedef void (*line_fn)(struct builder *b, const char *line, void *ud);

struct cmd {
	const char *const *argv;
	bool in_root;            /* chroot into b->root first */
	const char *const *env;  /* NULL: the build's base environment */
	line_fn on_line;         /* each output line; NULL: log only */
	void *ud;
	bool keep_stderr;        /* stderr into the lines too (default: yes) */
	bool quiet_fail;         /* leave err alone on a non-zero exit */
};

static const char *const base_env[] = {
	"PATH=" IMG_PATH, "LC_ALL=C", "DEBIAN_FRONTEND=noninteractive",
	"HOME=/root", NULL,
};

static void handle_line(struct builder *b, const struct cmd *c, char *line, size_t n)
{
	while (n && (line[n - 1] == '\r' || line[n - 1] == ' '))
		n--;
	line[n] = '\0';
	log_text(b, line);
	log_text(b, "\n");
	if (!n)
		return;
	memmove(b->last[0], b->last[1], sizeof(b->last[0]));
	copy_n(b->last[1], sizeof(b->last[1]), line, n);
	if (c->on_line)
		c->on_line(b, line, c->ud);
}

static void child_exec(struct builder *b, const struct cmd *c, int out_fd, int in_fd)
{
	if (in_fd >= 0)
		dup2(in_fd, 0);
	else {
		int nul = open("/dev/null", O_RDONLY);
		if (nul >= 0)
			dup2(nul, 0);
	}
	dup2(out_fd, 1);
	dup2(out_fd, 2);
	if (c->in_root && (chdir(b->root) < 0 || chroot(".") < 0 || chdir("/") < 0))
		_exit(126);
	/* In the root, the build's environment only; on the host, the
	 * caller's (DOCKER_HOST and the like reach docker), in the C locale
	 * for output this file reads. */
	extern char **environ;
	if (c->in_root || c->env)
		environ = (char **)(c->env ? c->env : base_env);
	else
		setenv("LC_ALL", "C", 1);
	execvp(c->argv[0], (char *const *)c->argv);
	_exit(127);
}

/* Runs c and waits for it, its stdout and stderr read line by line into
 * the log and c->on_line. Non-zero exit: -EIO with the command, its
 * status, its last output line and where the log is. */
static int run(struct builder *b, const struct cmd *c)
{
	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC) < 0)
		return terr_set(b->err, errno, "pipe: %s", strerror(errno));
	char hdr[1024];
	int hn = snprintf(hdr, sizeof(hdr), "\n$%s", c->in_root ? " (chroot)" : "");
	for (size_t i = 0; c->argv[i] && hn < (int)sizeof(hdr) - 2; i++)
		hn += snprintf(hdr + hn, sizeof(hdr) - (size_t)hn, " %s", c->argv[i]);
	log_text(b, hdr);
	log_text(b, "\n");
	b->last[0][0] = b->last[1][0] = '\0';
	pid_t pid = fork();
	if (pid < 0) {
		close(pfd[0]);
		close(pfd[1]);
		return terr_set(b->err, errno, "fork: %s", strerror(errno));
	}
	if (pid == 0)
		child_exec(b, c, pfd[1], -1);
	close(pfd[1]);
	char buf[8192];
	size_t have = 0;
	for (;;) {
		ssize_t got = read(pfd[0], buf + have, sizeof(buf) - 1 - have);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break;
		have += (size_t)got;
		size_t start = 0;
		for (size_t i = 0; i < have; i++)
			if (buf[i] == '\n') {
				handle_line(b, c, buf + start, i - start);
				start = i + 1;
			}
		memmove(buf, buf + start, have - start);
		have -= start;
		if (have == sizeof(buf) - 1) {   /* an overlong line: cut */
			handle_line(b, c, buf, have);
			have = 0;
		}
	}
	if (have)
		handle_line(b, c, buf, have);
	close(pfd[0]);
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	if (c->quiet_fail)
		return -EIO;
	char how[64];
	if (WIFEXITED(st))
		snprintf(how, sizeof(how), "exit status %d", WEXITSTATUS(st));
	else
		snprintf(how, sizeof(how), "signal %d", WIFSIGNALED(st) ? WTERMSIG(st) : 0);
	if (WIFEXITED(st) && WEXITSTATUS(st) == 127 && !b->last[1][0])
		return terr_set(b->err, ENOENT, "cannot run %s: not installed?%s", c->argv[0],
				!strcmp(c->argv[0], "debootstrap") ? " (run scripts/bootstrap as root)" : "");
	const char *last = b->last[1];
	/* apt's last words are often a summary; its E: line says why. */
	if (strncmp(last, "E: ", 3) && !strncmp(b->last[0], "E: ", 3))
		last = b->last[0];
	return terr_set(b->err, EIO, "%s failed (%s): %.200s%s%s", c->argv[0], how, last,
			b->res->log_path[0] ? "; the full output is in " : "", b->res->log_path);
}

/* ---- files in the root ---- */

static int root_path(struct builder *b, const char *rel, char *buf, size_t n)
{
	if (snprintf(buf, n, "%s%s", b->root, rel) >= (int)n)
		return terr_set(b->err, ENAMETOOLONG, "path too long: %s%s", b->root, rel);
	return 0;
}

static int write_root_file(struct builder *b, const char *rel, const char *text, mode_t mode)
{
	char path[PATH_MAX];
	if (root_path(b, rel, path, sizeof(path)) < 0)
		return -ENAMETOOLONG;
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
	if (fd < 0)
		return terr_set(b->err, errno, "cannot write %s: %s", path, strerror(errno));
	size_t len = strlen(text);
	ssize_t w = write(fd, text, len);
	int saved = errno;
	if (fchmod(fd, mode) < 0 || close(fd) < 0 || w != (ssize_t)len)
		return terr_set(b->err, saved ? saved : EIO, "cannot write %s", path);
	return 0;
}

static void unlink_root(struct builder *b, const char *rel)
{
	char path[PATH_MAX];
	if (root_path(b, rel, path, sizeof(path)) == 0)
		unlink(path);
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if (flag == FTW_DP)
		rmdir(path);
	else
		unlink(path);
	return 0;
}

/* Removes a tree without following links or entering other file systems
 * (the mounts are gone by then; this is a second guard). */
static void remove_tree(const char *path)
{
	nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

/* Everything in the directory root+rel except the names in keep. */
static void empty_dir(struct builder *b, const char *rel, const char *const *keep)
{
	char dir[PATH_MAX];
	if (root_path(b, rel, dir, sizeof(dir)) < 0)
		return;
	DIR *d = opendir(dir);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		bool kept = false;
		for (size_t i = 0; keep && keep[i]; i++)
			kept |= !strcmp(keep[i], e->d_name);
		if (kept)
			continue;
		char path[PATH_MAX];
		if (snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) < (int)sizeof(path))
			remove_tree(path);
	}
	if (d)
		closedir(d);
}

/* Unmounts whatever is mounted at or under dir (deepest first), e.g. what
 * a debootstrap that was killed left. Within this process's namespace. */
static void unmount_under(const char *dir)
{
	size_t dl = strlen(dir);
	for (int pass = 0; pass < 64; pass++) {
		FILE *f = fopen("/proc/self/mountinfo", "re");
		if (!f)
			return;
		char line[4096], deepest[PATH_MAX] = "";
		while (fgets(line, sizeof(line), f)) {
			/* id parent major:minor root MOUNTPOINT ... */
			char mp[PATH_MAX];
			if (sscanf(line, "%*s %*s %*s %*s %4095s", mp) != 1)
				continue;
			if (!strncmp(mp, dir, dl) && (mp[dl] == '/' || mp[dl] == '\0') &&
			    strlen(mp) > strlen(deepest))
				snprintf(deepest, sizeof(deepest), "%s", mp);
		}
		fclose(f);
		if (!deepest[0] || umount2(deepest, MNT_DETACH) < 0)
			return;
	}
}

/* ---- the stages ---- */

static void on_debootstrap(struct builder *b, const char *line, void *ud)
{
	(void)ud;
	if (!strncmp(line, "I: ", 3)) {
		set_what(b, line + 3, strlen(line + 3));
		report(b);
	}
}

static void on_first_line(struct builder *b, const char *line, void *ud)
{
	(void)b;
	char *out = ud;
	if (!out[0])
		copy_n(out, 64, line, strlen(line));
}

/* The architecture debootstrap bootstraps by default: the host's dpkg's. */
static int host_arch(struct builder *b, char arch[64])
{
	const char *argv[] = {"dpkg", "--print-architecture", NULL};
	arch[0] = '\0';
	if (run(b, &(struct cmd){.argv = argv, .on_line = on_first_line, .ud = arch, .quiet_fail = true}) < 0)
		return -EIO;
	return arch[0] ? 0 : -EIO;
}

/* Where the suite's kept base is, for this build's key: the folder
 * SUITE/base of the cache, the archive's and the key's paths. -1 when
 * the key cannot be made (no dpkg on the host, an odd mirror): then
 * nothing is kept or used, and the build bootstraps as ever. */
static int base_paths(struct builder *b, char *dir, char *archive, char *keyfile, size_t n, char *key, size_t kn)
{
	char arch[64], name[128];
	if (host_arch(b, arch) < 0) {
		log_text(b, "# no base is kept: dpkg --print-architecture failed\n");
		return -1;
	}
	if (img_base_name(b->r->suite, IMG_BASE_VARIANT, arch, b->mirror, name, sizeof(name)) < 0 ||
	    img_base_key_text(b->r->suite, IMG_BASE_VARIANT, arch, b->mirror, key, kn) < 0) {
		log_text(b, "# no base is kept: no key for this suite, architecture and mirror\n");
		return -1;
	}
	size_t stem = strlen(name) - strlen(".tar.zst");
	if (snprintf(dir, n, "%s/base", b->suite_dir) >= (int)n ||
	    snprintf(archive, n, "%s/%s", dir, name) >= (int)n ||
	    snprintf(keyfile, n, "%s/%.*s.key", dir, (int)stem, name) >= (int)n)
		return -1;
	return 0;
}

/* Removes what a build that was killed while keeping a base left
 * (".NAME.PID.part"); called under the suite's lock, so no build is
 * writing one now. */
static void remove_parts(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		size_t l = strlen(e->d_name);
		char path[PATH_MAX];
		if (e->d_name[0] == '.' && l > 5 && !strcmp(e->d_name + l - 5, ".part") &&
		    snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) < (int)sizeof(path))
			unlink(path);
	}
	if (d)
		closedir(d);
}

/* The root as debootstrap left it, kept as the archive: owners (numeric),
 * modes, xattrs (file capabilities) and device nodes, through a temporary
 * name and a rename, so that a build killed meanwhile never leaves half a
 * base under the real name. A failure is a warning: the build goes on. */
static void keep_base(struct builder *b, const char *dir, const char *archive, const char *keyfile,
		      const char *key)
{
	char tmp[PATH_MAX], tmpkey[PATH_MAX];
	const char *name = strrchr(archive, '/') + 1;
	if (snprintf(tmp, sizeof(tmp), "%s/.%s.%d.part", dir, name, (int)getpid()) >= (int)sizeof(tmp) ||
	    snprintf(tmpkey, sizeof(tmpkey), "%s/.%s.key.%d.part", dir, name, (int)getpid()) >= (int)sizeof(tmpkey))
		return;
	struct terr ignored = {0};
	if (util_mkdir_p(dir, 0755, &ignored) < 0) {
		note(b, "warning: the base is not kept: cannot make %s: %s", dir, ignored.msg);
		snprintf(b->res->base_note, sizeof(b->res->base_note), "bootstrapped, not kept");
		return;
	}
	snprintf(b->what, sizeof(b->what), "keeping the base");
	report(b);
	/* debootstrap unmounts what it mounted; a second guard, as tar
	 * stays on the root's file system too. */
	unmount_under(b->root);
	/* Without the .debs debootstrap leaves in the root's apt archives
	 * (30 of Debian 12's 85 MB): they are in SUITE/debootstrap already,
	 * the build hides them under its bind mount of SUITE/apt and the
	 * clean stage empties that folder. apt's lists stay: they carry the
	 * mirror's name, so the packages stage's apt-get update asks for
	 * changes only. */
	const char *argv[] = {"tar", "--zstd", "--numeric-owner", "--xattrs", "--xattrs-include=*", "--one-file-system",
			      "--exclude=./var/cache/apt/archives/*.deb", "-C", b->root, "-cf", tmp, ".", NULL};
	int rc = run(b, &(struct cmd){.argv = argv, .quiet_fail = true});
	int fd = rc == 0 ? open(tmp, O_RDONLY | O_CLOEXEC) : -1;
	/* On disk before the rename: a crash must not leave a short archive
	 * under the real name. */
	if (fd < 0 || fsync(fd) < 0)
		rc = -EIO;
	if (fd >= 0)
		close(fd);
	int kfd = rc == 0 ? open(tmpkey, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644) : -1;
	if (kfd >= 0) {
		if (write(kfd, key, strlen(key)) != (ssize_t)strlen(key) || close(kfd) < 0 || rename(tmpkey, keyfile) < 0)
			unlink(tmpkey);   /* the key file is for people; the archive stands without it */
	}
	if (rc == 0 && rename(tmp, archive) < 0)
		rc = -errno;
	if (rc < 0) {
		unlink(tmp);
		note(b, "warning: the base is not kept: tar into %s failed (zstd installed?); the full output is in %s",
		     dir, b->res->log_path);
		snprintf(b->res->base_note, sizeof(b->res->base_note), "bootstrapped, not kept");
		return;
	}
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
	note(b, "kept for later builds of %s as %s", b->r->suite, archive);
	snprintf(b->res->base_note, sizeof(b->res->base_note), "bootstrapped, kept");
}

/* Extracts the kept base into the (empty) root. A failure removes the
 * archive, which is then of no use, and empties the root again. */
static int use_base(struct builder *b, const char *archive, const char *keyfile, int64_t mtime)
{
	char date[64];
	img_base_date(mtime, date, sizeof(date));
	snprintf(b->what, sizeof(b->what), "extracting the kept base of %s", date);
	report(b);
	if (util_mkdir_p(b->root, 0755, b->err) < 0)
		return -EIO;
	const char *argv[] = {"tar", "--zstd", "--numeric-owner", "--xattrs", "--xattrs-include=*", "-xpf", archive,
			      "-C", b->root, NULL};
	if (run(b, &(struct cmd){.argv = argv, .quiet_fail = true}) == 0) {
		b->base_kept = true;
		note(b, "kept base of %s", date);
		snprintf(b->res->base_note, sizeof(b->res->base_note), "kept base of %s", date);
		return 0;
	}
	unlink(archive);
	unlink(keyfile);
	unmount_under(b->root);
	remove_tree(b->root);
	note(b, "warning: the kept base %s could not be read (tar failed: %.120s), removed; bootstrapping instead",
	     archive, b->last[1][0] ? b->last[1] : "no output");
	return -EIO;
}

/* debootstrap of the suite into the root, or the kept base of the same
 * key (docs/images.md, "The cache"); a base debootstrap made is kept.
 * Always `--components=main`: the components only decide the
 * sources.list debootstrap writes, which setup_root writes over with the
 * recipe's, and every package of minbase is in main; so recipes of one
 * suite share one base whatever their components. Called under the
 * suite's lock, which guards the kept bases as it does the downloads. */
static int stage_bootstrap(struct builder *b)
{
	enter_stage(b, IMG_STAGE_BOOTSTRAP);
	char dir[PATH_MAX], archive[PATH_MAX], keyfile[PATH_MAX], key[1200];
	bool can_keep = base_paths(b, dir, archive, keyfile, sizeof(dir), key, sizeof(key)) == 0;
	if (can_keep) {
		/* For whoever reads the log (tests/e2e/test_image_pip.sh): which
		 * archive this build's key names, used or made. */
		dprintf(b->log_fd, "# the kept base of this key: %s\n", archive);
		remove_parts(dir);
		struct stat st;
		bool exists = stat(archive, &st) == 0 && S_ISREG(st.st_mode);
		enum img_base_use u = img_base_decide(exists, exists ? (int64_t)st.st_mtime : 0, (int64_t)time(NULL),
						      b->o->base_max_age_days, b->o->fresh_base);
		if (u == IMG_BASE_USE && use_base(b, archive, keyfile, (int64_t)st.st_mtime) == 0)
			return 0;
		if (u == IMG_BASE_OLD) {
			char date[64];
			img_base_date((int64_t)st.st_mtime, date, sizeof(date));
			note(b, "debootstrap (the kept base of %s is older than %d days)", date,
			     b->o->base_max_age_days > 0 ? b->o->base_max_age_days : IMG_DEFAULT_BASE_MAX_AGE_DAYS);
		} else if (u != IMG_BASE_USE) {
			note(b, "debootstrap (%s)", img_base_reason(u));
		}
	}
	char cache_arg[PATH_MAX];
	snprintf(cache_arg, sizeof(cache_arg), "--cache-dir=%s/debootstrap", b->suite_dir);
	const char *argv[] = {"debootstrap", "--variant=" IMG_BASE_VARIANT, "--components=" IMG_BASE_COMPONENTS,
			      cache_arg, b->r->suite, b->root, b->mirror, NULL};
	snprintf(b->res->base_note, sizeof(b->res->base_note), "bootstrapped");
	int rc = run(b, &(struct cmd){.argv = argv, .on_line = on_debootstrap});
	if (rc == 0 && can_keep)
		keep_base(b, dir, archive, keyfile, key);
	return rc;
}

/* The recipe's site files, read-only at IMG_SITE_MOUNT/NAME in the root
 * for the packages, pip and run stages: bind mounts of the cache's copies
 * (no copy of gigabytes), in the build's own mount namespace; the clean
 * stage unmounts them before it empties /tmp, so they are not in the
 * image. */
static int mount_site_files(struct builder *b)
{
	if (!b->r->n_site_files)
		return 0;
	char dir[PATH_MAX];
	if (root_path(b, IMG_SITE_MOUNT, dir, sizeof(dir)) < 0 || util_mkdir_p(dir, 0755, b->err) < 0)
		return -EIO;
	for (size_t i = 0; i < b->r->n_site_files; i++) {
		char src[PATH_MAX], dst[PATH_MAX];
		const char *name = b->r->site_files[i].key;
		if (snprintf(src, sizeof(src), "%s/%s", b->site_dir, name) >= (int)sizeof(src) ||
		    snprintf(dst, sizeof(dst), "%s/%s", dir, name) >= (int)sizeof(dst))
			return terr_set(b->err, ENAMETOOLONG, "path too long: %s/%s", dir, name);
		int fd = open(dst, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0444);
		if (fd < 0)
			return terr_set(b->err, errno, "cannot make %s: %s", dst, strerror(errno));
		close(fd);
		if (mount(src, dst, NULL, MS_BIND, NULL) < 0)
			return terr_set(b->err, errno, "cannot bind %s: %s", src, strerror(errno));
		if (mount(NULL, dst, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY, NULL) < 0)
			return terr_set(b->err, errno, "cannot make %s read-only: %s", dst, strerror(errno));
		dprintf(b->log_fd, "# site file %s at %s/%s (read-only)\n", src, IMG_SITE_MOUNT, name);
	}
	return 0;
}

static int setup_root(struct builder *b)
{
	char comps[128] = "";
	for (size_t i = 0; i < b->r->n_components; i++)
		snprintf(comps + strlen(comps), sizeof(comps) - strlen(comps), " %s", b->r->components[i]);
	char sources[2048];
	int n = snprintf(sources, sizeof(sources), "deb %s %s%s\n", b->mirror, b->r->suite, comps);
	/* sid has neither updates nor security suites. */
	if (strcmp(b->r->suite, "sid")) {
		n += snprintf(sources + n, sizeof(sources) - (size_t)n, "deb %s %s-updates%s\n",
			      b->mirror, b->r->suite, comps);
		if (b->security[0])
			snprintf(sources + n, sizeof(sources) - (size_t)n, "deb %s %s-security%s\n",
				 b->security, b->r->suite, comps);
	}
	/* The build's name resolution is the host's; Docker gives containers
	 * their own resolv.conf. */
	char *resolv = NULL;
	size_t rl;
	struct terr ignored = {0};
	util_read_file("/etc/resolv.conf", &resolv, &rl, &ignored);
	int r = 0;
	if (write_root_file(b, "/etc/apt/sources.list", sources, 0644) < 0 ||
	    write_root_file(b, "/etc/resolv.conf", resolv ? resolv : "", 0644) < 0 ||
	    /* Packages must not start services in the build. */
	    write_root_file(b, POLICY_RC_D, "#!/bin/sh\nexit 101\n", 0755) < 0 ||
	    write_root_file(b, BUILD_APT_CONF,
			    "APT::Install-Recommends \"false\";\n"
			    "APT::Install-Suggests \"false\";\n"
			    "APT::Sandbox::User \"root\";\n"
			    "Acquire::Languages \"none\";\n"
			    "Dpkg::Use-Pty \"0\";\n", 0644) < 0 ||
	    /* No fsync per file: a crashed build is thrown away anyway. */
	    write_root_file(b, BUILD_DPKG_CFG, "force-unsafe-io\n", 0644) < 0)
		r = -EIO;
	free(resolv);
	if (r < 0)
		return r;
	char *ca = NULL;
	size_t cal = 0;
	if (util_read_file(HOST_CA_BUNDLE, &ca, &cal, &ignored) == 0 && cal > 0 && strlen(ca) == cal) {
		if (write_root_file(b, BUILD_CA, ca, 0644) < 0) {
			free(ca);
			return -EIO;
		}
		b->build_ca = true;
	}
	free(ca);
	char proc[PATH_MAX], archives[PATH_MAX], cache_apt[PATH_MAX];
	root_path(b, "/proc", proc, sizeof(proc));
	root_path(b, "/var/cache/apt/archives", archives, sizeof(archives));
	snprintf(cache_apt, sizeof(cache_apt), "%s/apt/partial", b->suite_dir);
	if (util_mkdir_p(cache_apt, 0755, b->err) < 0 || util_mkdir_p(archives, 0755, b->err) < 0)
		return -EIO;
	snprintf(cache_apt, sizeof(cache_apt), "%s/apt", b->suite_dir);
	if (mount("proc", proc, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		return terr_set(b->err, errno, "cannot mount proc in %s: %s", b->root, strerror(errno));
	/* apt downloads into the cache, so rebuilds do not download again. */
	if (mount(cache_apt, archives, NULL, MS_BIND, NULL) < 0)
		return terr_set(b->err, errno, "cannot bind %s: %s", cache_apt, strerror(errno));
	return mount_site_files(b);
}

static void on_simulate(struct builder *b, const char *line, void *ud)
{
	(void)b;
	char ignored[8];
	img_apt_progress(ud, line, ignored, sizeof(ignored));
}

/* "512 kB", "1,024 kB", "6.1 MB" (apt's SI units) into kB. */
static long parse_kb(const char *s)
{
	double v = 0;
	char unit[4] = "";
	char num[32];
	size_t n = 0;
	while (*s && (isdigit((unsigned char)*s) || *s == '.' || *s == ',') && n < sizeof(num) - 1) {
		if (*s != ',')
			num[n++] = *s;
		s++;
	}
	num[n] = '\0';
	v = strtod(num, NULL);
	while (*s == ' ')
		s++;
	for (size_t u = 0; u < sizeof(unit) - 1 && isalpha((unsigned char)s[u]); u++)
		unit[u] = s[u];
	if (!strcmp(unit, "B"))
		return (long)(v / 1000);
	if (!strcmp(unit, "MB"))
		return (long)(v * 1000);
	if (!strcmp(unit, "GB"))
		return (long)(v * 1000 * 1000);
	return (long)v;
}

bool img_apt_progress(struct img_progress *p, const char *line, char *what, size_t what_n)
{
	const char *s;
	if (!strncmp(line, "Inst ", 5)) {
		p->total++;
		return false;
	}
	if (!strncmp(line, "Need to get ", 12)) {
		p->to_fetch = parse_kb(line + 12);
		return false;
	}
	if (!strncmp(line, "Get:", 4) && (s = strrchr(line, '['))) {
		/* Get:12 URI SUITE/main amd64 PACKAGE amd64 VERSION [SIZE] */
		p->fetched += parse_kb(s + 1);
		if (p->fetched > p->to_fetch)
			p->fetched = p->to_fetch;
		char pkg[128];
		if (sscanf(line, "%*s %*s %*s %*s %127s", pkg) == 1)
			copy_n(what, what_n, pkg, strlen(pkg));
		return true;
	}
	if (!strncmp(line, "Unpacking ", 10)) {
		p->fetched = p->to_fetch;
		copy_n(what, what_n, line + 10, strcspn(line + 10, " :"));
		return true;
	}
	if (!strncmp(line, "Setting up ", 11)) {
		p->fetched = p->to_fetch;
		if (p->done < p->total)
			p->done++;
		copy_n(what, what_n, line + 11, strcspn(line + 11, " :"));
		return true;
	}
	return false;
}

static void on_install(struct builder *b, const char *line, void *ud)
{
	(void)ud;
	if (img_apt_progress(&b->prog, line, b->what, sizeof(b->what)))
		report(b);
}

/* The recipe's debconf answers, before any package asks: a file for
 * debconf-set-selections (package debconf, which minbase has; the
 * debconf-utils wrapper is not needed). */
static int set_debconf(struct builder *b)
{
	if (!b->r->n_debconf)
		return 0;
	size_t len = 1;
	for (size_t i = 0; i < b->r->n_debconf; i++)
		len += strlen(b->r->debconf[i].value) + 1;
	char *text = malloc(len);
	if (!text)
		return terr_set(b->err, ENOMEM, "out of memory");
	text[0] = '\0';
	for (size_t i = 0; i < b->r->n_debconf; i++) {
		strcat(text, b->r->debconf[i].value);
		strcat(text, "\n");
	}
	int r = write_root_file(b, "/tmp/tessera-debconf", text, 0600);
	free(text);
	snprintf(b->what, sizeof(b->what), "debconf-set-selections");
	report(b);
	const char *argv[] = {"debconf-set-selections", "/tmp/tessera-debconf", NULL};
	if (r == 0)
		r = run(b, &(struct cmd){.argv = argv, .in_root = true});
	unlink_root(b, "/tmp/tessera-debconf");
	return r;
}

/* host-provides: an empty package, tessera-host-driver, that Provides
 * what the node's driver mount gives a session at run time (libcuda1,
 * libcuda.so.1), so that Debian packages depending on the driver install
 * without it. Made with dpkg-deb and installed with dpkg in the root,
 * before the recipe's packages; it stays, so that apt in a session sees
 * those dependencies satisfied too. */
static int install_host_driver(struct builder *b)
{
	const struct recipe *r = b->r;
	if (!r->n_host_provides)
		return 0;
	char provides[2048] = "";
	for (size_t i = 0; i < r->n_host_provides; i++)
		snprintf(provides + strlen(provides), sizeof(provides) - strlen(provides), "%s%s (= %s)",
			 i ? ", " : "", r->host_provides[i].key, r->host_provides[i].value);
	char control[4096];
	snprintf(control, sizeof(control),
		 "Package: tessera-host-driver\n"
		 "Version: 1.0\n"
		 "Architecture: all\n"
		 "Maintainer: Tessera <root@localhost>\n"
		 "Section: misc\n"
		 "Priority: optional\n"
		 "Provides: %s\n"
		 "Description: the node's GPU driver, mounted by the Tessera agent at run time\n"
		 " Made by tessera image build from the recipe's host-provides: the driver's\n"
		 " libraries (libcuda.so.1 and the like) are not in the image but come from\n"
		 " the host's driver mount when a session starts.\n",
		 provides);
	char dir[PATH_MAX];
	if (root_path(b, "/tmp/tessera-host-driver/DEBIAN", dir, sizeof(dir)) < 0 ||
	    util_mkdir_p(dir, 0755, b->err) < 0)
		return -EIO;
	snprintf(b->what, sizeof(b->what), "tessera-host-driver");
	report(b);
	const char *build[] = {"dpkg-deb", "--build", "/tmp/tessera-host-driver", "/tmp/tessera-host-driver.deb", NULL};
	const char *install[] = {"dpkg", "-i", "/tmp/tessera-host-driver.deb", NULL};
	int rc = write_root_file(b, "/tmp/tessera-host-driver/DEBIAN/control", control, 0644);
	if (rc == 0)
		rc = run(b, &(struct cmd){.argv = build, .in_root = true});
	if (rc == 0)
		rc = run(b, &(struct cmd){.argv = install, .in_root = true});
	char path[PATH_MAX];
	if (root_path(b, "/tmp/tessera-host-driver", path, sizeof(path)) == 0)
		remove_tree(path);
	unlink_root(b, "/tmp/tessera-host-driver.deb");
	if (rc < 0)
		terr_prefix(b->err, "%s: host-provides", r->path);
	return rc;
}

static int stage_packages(struct builder *b)
{
	enter_stage(b, IMG_STAGE_PACKAGES);
	int r = set_debconf(b);
	if (r == 0)
		r = install_host_driver(b);
	if (r < 0)
		return r;
	snprintf(b->what, sizeof(b->what), "apt-get update");
	report(b);
	const char *update[] = {"apt-get", "update", NULL};
	r = run(b, &(struct cmd){.argv = update, .in_root = true});
	if (r < 0)
		return r;
	/* The base brought up to what the suite's -updates and -security
	 * have now: debootstrap takes the suite alone, and a kept base may
	 * also be days old. Both ways the image gets the same packages, with
	 * their fixes. Unattended as the install is; a changed conffile
	 * keeps the base's. */
	{
		snprintf(b->what, sizeof(b->what), "apt-get dist-upgrade of the %s base",
			 b->base_kept ? "kept" : "new");
		report(b);
		const char *upgrade[] = {"apt-get", "-y", "-o", "Dpkg::Options::=--force-confdef", "-o",
					 "Dpkg::Options::=--force-confold", "dist-upgrade", NULL};
		r = run(b, &(struct cmd){.argv = upgrade, .in_root = true});
		if (r < 0)
			return r;
	}
	size_t n = b->r->n_packages;
	const char **argv = calloc(n + 8, sizeof(*argv));
	if (!argv)
		return terr_set(b->err, ENOMEM, "out of memory");
	size_t a = 0;
	argv[a++] = "apt-get";
	argv[a++] = "install";
	argv[a++] = "-y";
	argv[a++] = "--no-install-recommends";
	size_t sim = a;
	argv[a++] = "-s";
	for (size_t i = 0; i < n; i++)
		argv[a++] = b->r->packages[i];
	argv[a] = NULL;
	/* What apt plans is the total the progress counts against. */
	struct img_progress plan = {0};
	r = run(b, &(struct cmd){.argv = argv, .in_root = true, .on_line = on_simulate, .ud = &plan});
	if (r == 0) {
		b->prog.total = plan.total;
		snprintf(b->what, sizeof(b->what), "%ld to install", plan.total);
		report(b);
		memmove(argv + sim, argv + sim + 1, (n + 1) * sizeof(*argv));
		r = run(b, &(struct cmd){.argv = argv, .in_root = true, .on_line = on_install});
	}
	free(argv);
	return r;
}

/* /etc/pip.conf of every image: pip for the session user, the seeds' way
 * (docs/images.md, "pip in sessions"). Debian marks its Python externally
 * managed (PEP 668), which makes every pip install, `--user` included,
 * fail with "externally-managed-environment"; break-system-packages lets
 * it go on. index is the site's package index the pip stage used (NULL:
 * none), kept so that sessions install from the same mirror. */
static int write_pip_conf(struct builder *b, const char *index)
{
	char text[1024];
	int n = snprintf(text, sizeof(text),
			 "# Written by tessera image build (docs/images.md, \"pip in sessions\").\n"
			 "[global]\n"
			 "break-system-packages = true\n");
	if (index) {
		char host[256];
		n += snprintf(text + n, sizeof(text) - (size_t)n, "index-url = %s\n", index);
		if (img_pip_trusted_host(index, host, sizeof(host)))
			snprintf(text + n, sizeof(text) - (size_t)n, "trusted-host = %s\n", host);
	}
	return write_root_file(b, "/etc/pip.conf", text, 0644);
}

static void on_purelib(struct builder *b, const char *line, void *ud)
{
	(void)b;
	if (line[0] == '/')
		copy_n(ud, PATH_MAX, line, strlen(line));
}

/* The session user (work, uid 1000) owns /usr/local and the site-packages
 * directory pip uses there, so that a plain `pip install PKG` in a session
 * (no root, no sudo) installs into the image's own site-packages, which a
 * session converted into an image keeps; `pip install --user` goes to
 * ~/.local as ever. Done again in the clean stage, for what the pip stage
 * and the run steps put under /usr/local as root (the user may upgrade
 * it). */
static int session_pip(struct builder *b, bool first)
{
	if (first) {
		int r = write_pip_conf(b, NULL);
		if (r < 0)
			return r;
		/* Debian's python3 installs into /usr/local/lib/python3.X/
		 * dist-packages (its posix_local scheme), which pip creates only
		 * when it first installs there: made now, to be the user's. */
		char py[PATH_MAX], purelib[PATH_MAX] = "";
		root_path(b, "/usr/bin/python3", py, sizeof(py));
		const char *argv[] = {"python3", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))", NULL};
		if (access(py, X_OK) == 0 &&
		    run(b, &(struct cmd){.argv = argv, .in_root = true, .on_line = on_purelib, .ud = purelib,
					 .quiet_fail = true}) == 0 &&
		    !strncmp(purelib, "/usr/local/", 11) && !strstr(purelib, "..")) {
			char dir[PATH_MAX];
			if (root_path(b, purelib, dir, sizeof(dir)) < 0 || util_mkdir_p(dir, 0755, b->err) < 0)
				return -EIO;
		}
	}
	const char *chown_argv[] = {"chown", "-R", "1000:1000", "/usr/local", NULL};
	return run(b, &(struct cmd){.argv = chown_argv, .in_root = true});
}

static int stage_user(struct builder *b)
{
	enter_stage(b, IMG_STAGE_USER);
	/* As Backend.AI's images have it: work, uid and gid 1000. */
	const char *group[] = {"groupadd", "--gid", "1000", "work", NULL};
	const char *user[] = {"useradd", "--uid", "1000", "--gid", "1000", "--create-home",
			      "--home-dir", IMG_HOME, "--shell", "/bin/bash", "work", NULL};
	int r = run(b, &(struct cmd){.argv = group, .in_root = true});
	if (r == 0)
		r = run(b, &(struct cmd){.argv = user, .in_root = true});
	return r < 0 ? r : session_pip(b, true);
}

/* The environment of the run steps and the pip stage: the recipe's,
 * then what the build needs where the recipe does not set it, then
 * extra (NULL-terminated, may be NULL). A NULL-terminated malloc'd
 * array; env_free releases it. */
static char **step_env(struct builder *b, const char *const *extra)
{
	const struct recipe *r = b->r;
	size_t ne = r->n_env + 16;
	char **env = calloc(ne, sizeof(*env));
	if (!env)
		return NULL;
	size_t k = 0;
	bool ok = true;
	for (size_t i = 0; i < r->n_env && ok; i++)
		ok = asprintf(&env[k++], "%s=%s", r->env[i].key, r->env[i].value) >= 0;
	/* Node.js adds NODE_EXTRA_CA_CERTS to its own roots (npm's TLS is
	 * Node's); nothing else reads it. */
	char npm_reg[600] = "";
	if (b->o->npm_registry && *b->o->npm_registry)
		snprintf(npm_reg, sizeof(npm_reg), "npm_config_registry=%s", b->o->npm_registry);
	const char *fixed[] = {"PATH=" IMG_PATH, "DEBIAN_FRONTEND=noninteractive", "HOME=/root",
			       b->build_ca ? "NODE_EXTRA_CA_CERTS=" BUILD_CA : "", npm_reg, NULL};
	for (size_t i = 0; fixed[i] && ok; i++) {
		if (!*fixed[i])
			continue;
		bool set = false;
		for (size_t j = 0; j < r->n_env; j++)
			set |= !strncmp(fixed[i], r->env[j].key, strlen(r->env[j].key)) &&
			       fixed[i][strlen(r->env[j].key)] == '=';
		if (!set)
			ok = (env[k++] = strdup(fixed[i])) != NULL;
	}
	for (size_t i = 0; extra && extra[i] && ok && k + 1 < ne; i++)
		ok = (env[k++] = strdup(extra[i])) != NULL;
	if (!ok) {
		for (size_t i = 0; i < ne; i++)
			free(env[i]);
		free(env);
		return NULL;
	}
	return env;
}

static void env_free(char **env)
{
	for (size_t i = 0; env && env[i]; i++)
		free(env[i]);
	free(env);
}

static void on_pip_line(struct builder *b, const char *line, void *ud)
{
	(void)ud;
	if (!strncmp(line, "Collecting ", 11)) {
		set_what(b, line + 11, strcspn(line + 11, " "));
		report(b);
	} else if (!strncmp(line, "Installing collected packages", 29)) {
		set_what(b, "installing", 10);
		report(b);
	}
}

/* The recipe's pip requirements from the site's index only, as root in
 * the root with the image's python3: into /usr/local (Debian's scheme
 * for pip as root), which the clean stage gives to the session user with
 * the rest of /usr/local. */
static int stage_pip(struct builder *b)
{
	enter_stage(b, IMG_STAGE_PIP);
	const struct recipe *r = b->r;
	const char *index = b->o->pip_index;
	if (!r->n_pip)
		return 0;
	if (!index || !*index)   /* img_build checked; a second guard */
		return terr_set(b->err, EINVAL, "%s: pip needs a package index", r->path);
	/* --break-system-packages as a variable, not an option: the pip of
	 * Debian 11 (20.3) predates it and refuses options it does not know,
	 * while every pip ignores variables it does not know. */
	const char *extra[] = {"PIP_BREAK_SYSTEM_PACKAGES=1", "PIP_DISABLE_PIP_VERSION_CHECK=1",
			       "PIP_NO_INPUT=1", NULL};
	char **env = step_env(b, extra);
	if (!env)
		return terr_set(b->err, ENOMEM, "out of memory");
	const char *version[] = {"python3", "-m", "pip", "--version", NULL};
	int rc = run(b, &(struct cmd){.argv = version, .in_root = true, .env = (const char *const *)env,
				      .quiet_fail = true});
	if (rc < 0) {
		env_free(env);
		return terr_set(b->err, ENOENT, "%s: pip needs python3 -m pip in the image: add python3-pip to packages",
				r->path);
	}
	char host[256];
	bool trusted = img_pip_trusted_host(index, host, sizeof(host));
	const char **argv = calloc(r->n_pip + 16, sizeof(*argv));
	if (!argv) {
		env_free(env);
		return terr_set(b->err, ENOMEM, "out of memory");
	}
	size_t a = 0;
	argv[a++] = "python3";
	argv[a++] = "-m";
	argv[a++] = "pip";
	argv[a++] = "install";
	argv[a++] = "--no-cache-dir";
	argv[a++] = "--progress-bar";
	argv[a++] = "off";
	argv[a++] = "--index-url";
	argv[a++] = index;
	if (trusted) {
		argv[a++] = "--trusted-host";
		argv[a++] = host;
	}
	for (size_t i = 0; i < r->n_pip; i++)
		argv[a++] = r->pip[i];
	argv[a] = NULL;
	b->prog.total = 0;
	rc = run(b, &(struct cmd){.argv = argv, .in_root = true, .env = (const char *const *)env,
				  .on_line = on_pip_line});
	free(argv);
	env_free(env);
	if (rc < 0)
		return terr_prefix(b->err, "%s: pip", r->path);
	/* Sessions install from the same index. */
	return write_pip_conf(b, index);
}

static int stage_run(struct builder *b)
{
	enter_stage(b, IMG_STAGE_RUN);
	const struct recipe *r = b->r;
	b->prog.total = (long)r->n_run;
	char **env = step_env(b, NULL);
	if (!env)
		return terr_set(b->err, ENOMEM, "out of memory");
	int rc = 0;
	for (size_t i = 0; i < r->n_run && rc == 0; i++) {
		snprintf(b->what, sizeof(b->what), "%.*s", (int)strcspn(r->run[i].value, "\n"),
			 r->run[i].value);
		report(b);
		const char *argv[] = {"/bin/sh", "-ec", r->run[i].value, NULL};
		rc = run(b, &(struct cmd){.argv = argv, .in_root = true, .env = (const char *const *)env});
		if (rc < 0)
			terr_prefix(b->err, "%s:%d: run step", r->path, r->run[i].line);
		else
			b->prog.done++;
	}
	env_free(env);
	return rc;
}

static void on_version(struct builder *b, const char *line, void *ud)
{
	(void)b;
	copy_n(ud, 128, line, strlen(line));
}

/* The version pip installed of a recipe's pip requirement named like
 * pkg (PEP 503's comparison), into ver; false when pkg is none of them or
 * it is not installed. */
static bool pip_version(struct builder *b, const char *pkg, char *ver)
{
	char want[128], name[128];
	recipe_pip_name(pkg, want, sizeof(want));
	for (size_t i = 0; want[0] && i < b->r->n_pip; i++) {
		recipe_pip_name(b->r->pip[i], name, sizeof(name));
		if (strcmp(name, want))
			continue;
		const char *argv[] = {"python3", "-c",
				      "import importlib.metadata, sys; print(importlib.metadata.version(sys.argv[1]))",
				      name, NULL};
		ver[0] = '\0';
		return run(b, &(struct cmd){.argv = argv, .in_root = true, .on_line = on_version, .ud = ver,
					    .quiet_fail = true}) == 0 && ver[0];
	}
	return false;
}

/* tessera.frameworks from the installed packages' versions: Debian's
 * (the upstream part), or, for a name among the recipe's pip
 * requirements that no Debian package of the image has, pip's. */
static int read_frameworks(struct builder *b)
{
	char *out = b->res->frameworks;
	size_t cap = sizeof(b->res->frameworks), n = 0;
	out[0] = '\0';
	for (size_t i = 0; i < b->r->n_frameworks; i++) {
		const struct recipe_pair *f = &b->r->frameworks[i];
		char ver[128] = "", up[128];
		const char *argv[] = {"dpkg-query", "--show", "--showformat=${Version}\n", f->value, NULL};
		if (run(b, &(struct cmd){.argv = argv, .in_root = true, .on_line = on_version, .ud = ver,
					 .quiet_fail = true}) == 0 && ver[0])
			recipe_upstream_version(ver, up, sizeof(up));
		else if (pip_version(b, f->value, ver))
			copy_n(up, sizeof(up), ver, strlen(ver));
		else
			return terr_set(b->err, ENOENT, "%s:%d: frameworks: package %s is not installed in the image",
					b->r->path, f->line, f->value);
		int w = snprintf(out + n, cap - n, "%s%s=%s", n ? "," : "", f->key, up);
		if (w < 0 || (size_t)w >= cap - n)
			return terr_set(b->err, ENAMETOOLONG, "frameworks: too many to fit a label");
		n += (size_t)w;
	}
	return 0;
}

static int stage_clean(struct builder *b)
{
	enter_stage(b, IMG_STAGE_CLEAN);
	int r = read_frameworks(b);
	if (r == 0)
		r = session_pip(b, false);
	if (r < 0)
		return r;
	/* The cache first: what follows must not reach into it. */
	char archives[PATH_MAX], proc[PATH_MAX];
	root_path(b, "/var/cache/apt/archives", archives, sizeof(archives));
	root_path(b, "/proc", proc, sizeof(proc));
	if (umount2(archives, MNT_DETACH) < 0 || umount2(proc, MNT_DETACH) < 0)
		return terr_set(b->err, errno, "cannot unmount in %s: %s", b->root, strerror(errno));
	/* The site files leave with their mounts, before /tmp is emptied. */
	for (size_t i = 0; i < b->r->n_site_files; i++) {
		char mp[PATH_MAX];
		if (snprintf(mp, sizeof(mp), "%s%s/%s", b->root, IMG_SITE_MOUNT, b->r->site_files[i].key) <
			    (int)sizeof(mp) &&
		    umount2(mp, MNT_DETACH) < 0)
			return terr_set(b->err, errno, "cannot unmount %s: %s", mp, strerror(errno));
	}
	unlink_root(b, POLICY_RC_D);
	unlink_root(b, BUILD_APT_CONF);
	unlink_root(b, BUILD_DPKG_CFG);
	static const char *const keep_partial[] = {"partial", "lock", NULL};
	empty_dir(b, "/var/cache/apt/archives", keep_partial);
	empty_dir(b, "/var/lib/apt/lists", keep_partial);
	static const char *const keep_archives[] = {"archives", NULL};
	empty_dir(b, "/var/cache/apt", keep_archives);
	empty_dir(b, "/var/cache/debconf", (const char *const[]){"config.dat", "templates.dat", "passwords.dat", NULL});
	empty_dir(b, "/tmp", NULL);
	empty_dir(b, "/var/tmp", NULL);
	empty_dir(b, "/var/log/apt", NULL);
	/* Docker provides these per container; the host's must not stay. */
	write_root_file(b, "/etc/resolv.conf", "", 0644);
	write_root_file(b, "/etc/hostname", "", 0644);
	return 0;
}

/* ---- import ---- */

static int64_t tree_bytes;

static int add_size(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)path;
	(void)ftw;
	/* A file with n hard links is archived once: a share per name. */
	if (flag == FTW_F)
		tree_bytes += st->st_nlink > 1 ? st->st_size / (off_t)st->st_nlink : st->st_size;
	return 0;
}

/* A LABEL or ENV change of `docker import`: Dockerfile syntax, the value
 * double-quoted with '"' and '\' escaped. */
static char *quoted_change(const char *verb, const char *key, const char *value)
{
	size_t n = strlen(value);
	char *q = malloc(2 * n + 1);
	if (!q)
		return NULL;
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		if (value[i] == '"' || value[i] == '\\')
			q[o++] = '\\';
		q[o++] = value[i];
	}
	q[o] = '\0';
	char *out = NULL;
	if (asprintf(&out, "%s %s=\"%s\"", verb, key, q) < 0)
		out = NULL;
	free(q);
	return out;
}

struct strv {
	char **v;
	size_t n, cap;
	bool ok;
};

static void strv_take(struct strv *s, char *x)
{
	if (!x || !s->ok) {
		free(x);
		s->ok = false;
		return;
	}
	if (s->n + 2 > s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 32;
		char **nv = realloc(s->v, cap * sizeof(*nv));
		if (!nv) {
			free(x);
			s->ok = false;
			return;
		}
		s->v = nv;
		s->cap = cap;
	}
	s->v[s->n++] = x;
	s->v[s->n] = NULL;
}

static void strv_free(struct strv *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i]);
	free(s->v);
}

int img_recipe_labels(const struct recipe *r, const char *frameworks,
		      struct recipe_pair **out, size_t *n, struct terr *err)
{
	const char *fixed[][2] = {
		{"ai.backend.kernelspec", "1"},
		{"ai.backend.base-distro", r->distro},
		{"ai.backend.runtime-type", r->runtime_type},
		{"ai.backend.runtime-path", r->runtime_path},
		{"ai.backend.resource.min.cpu", r->min_cpu},
		{"ai.backend.resource.min.mem", r->min_mem},
		{"ai.backend.resource.min.cuda.shares", r->min_cuda_shares},
		{"ai.backend.service-ports", r->service_ports},
		{"tessera.family", r->family},
		{"tessera.title", r->title},
		{"tessera.frameworks", frameworks && *frameworks ? frameworks : NULL},
		{"tessera.recipe.hash", r->hash},
		{"tessera.cuda", r->cuda},
	};
	size_t nf = sizeof(fixed) / sizeof(fixed[0]);
	struct recipe_pair *l = calloc(nf + r->n_labels, sizeof(*l));
	if (!l)
		return terr_set(err, ENOMEM, "out of memory");
	size_t k = 0;
	bool ok = true;
	for (size_t i = 0; i < nf; i++)
		if (fixed[i][1]) {
			l[k].key = strdup(fixed[i][0]);
			l[k].value = strdup(fixed[i][1]);
			ok &= l[k].key && l[k].value;
			k++;
		}
	for (size_t i = 0; i < r->n_labels; i++) {
		l[k].key = strdup(r->labels[i].key);
		l[k].value = strdup(r->labels[i].value);
		ok &= l[k].key && l[k].value;
		k++;
	}
	if (!ok) {
		for (size_t i = 0; i < k; i++) {
			free(l[i].key);
			free(l[i].value);
		}
		free(l);
		return terr_set(err, ENOMEM, "out of memory");
	}
	*out = l;
	*n = k;
	return 0;
}

/* The --change arguments of docker import. */
static int import_changes(struct builder *b, struct strv *args)
{
	const struct recipe *r = b->r;
	strv_take(args, strdup("--change"));
	strv_take(args, strdup("ENV PATH=" IMG_PATH));
	bool has_lang = false;
	for (size_t i = 0; i < r->n_env; i++)
		has_lang |= !strcmp(r->env[i].key, "LANG");
	if (!has_lang) {
		strv_take(args, strdup("--change"));
		strv_take(args, strdup("ENV LANG=C.UTF-8"));
	}
	for (size_t i = 0; i < r->n_env; i++) {
		strv_take(args, strdup("--change"));
		strv_take(args, quoted_change("ENV", r->env[i].key, r->env[i].value));
	}
	strv_take(args, strdup("--change"));
	strv_take(args, strdup("WORKDIR " IMG_HOME));
	/* CMD in exec form: the recipe's words as a JSON array. */
	json_t *cmd = json_array();
	const char *s = r->cmd;
	while (cmd && *s) {
		while (*s == ' ' || *s == '\t')
			s++;
		size_t w = strcspn(s, " \t");
		if (w)
			json_array_append_new(cmd, json_stringn(s, w));
		s += w;
	}
	char *cmd_json = cmd ? json_dumps(cmd, JSON_COMPACT) : NULL;
	json_decref(cmd);
	char *cmd_change = NULL;
	if (!cmd_json || asprintf(&cmd_change, "CMD %s", cmd_json) < 0)
		cmd_change = NULL;
	free(cmd_json);
	strv_take(args, strdup("--change"));
	strv_take(args, cmd_change);
	struct recipe_pair *labels = NULL;
	size_t nl = 0;
	if (img_recipe_labels(r, b->res->frameworks, &labels, &nl, b->err) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < nl; i++) {
		strv_take(args, strdup("--change"));
		strv_take(args, quoted_change("LABEL", labels[i].key, labels[i].value));
		free(labels[i].key);
		free(labels[i].value);
	}
	free(labels);
	return args->ok ? 0 : terr_set(b->err, ENOMEM, "out of memory");
}

static int wait_child(pid_t pid)
{
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

static int stage_import(struct builder *b)
{
	enter_stage(b, IMG_STAGE_IMPORT);
	tree_bytes = 0;
	nftw(b->root, add_size, 16, FTW_PHYS | FTW_MOUNT);
	b->prog.total = (long)(tree_bytes >> 20);
	report(b);

	struct strv args = {.ok = true};
	strv_take(&args, strdup("docker"));
	strv_take(&args, strdup("import"));
	strv_take(&args, strdup("--message"));
	char msg[PATH_MAX + 64];
	snprintf(msg, sizeof(msg), "tessera image build %s", b->r->path);
	strv_take(&args, strdup(msg));
	if (import_changes(b, &args) < 0) {
		strv_free(&args);
		return -ENOMEM;
	}
	strv_take(&args, strdup("-"));
	strv_take(&args, strdup(b->res->ref));
	if (!args.ok) {
		strv_free(&args);
		return terr_set(b->err, ENOMEM, "out of memory");
	}

	/* tar -> this process (counting, for the progress) -> docker import */
	int from_tar[2], to_docker[2], out[2];
	if (pipe2(from_tar, O_CLOEXEC) < 0 || pipe2(to_docker, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0) {
		strv_free(&args);
		return terr_set(b->err, errno, "pipe: %s", strerror(errno));
	}
	log_text(b, "\n$ tar --numeric-owner -C ROOT -cf - . | docker import ...\n");
	const char *tar_argv[] = {"tar", "--numeric-owner", "-C", b->root, "-cf", "-", ".", NULL};
	struct cmd docker_cmd = {.argv = (const char *const *)args.v};
	pid_t tar_pid = fork();
	if (tar_pid == 0) {
		/* stderr of tar to the log; its stdout is the archive. */
		if (b->log_fd >= 0)
			dup2(b->log_fd, 2);
		int nul = open("/dev/null", O_RDONLY);
		if (nul >= 0)
			dup2(nul, 0);
		dup2(from_tar[1], 1);
		setenv("LC_ALL", "C", 1);
		execvp(tar_argv[0], (char *const *)tar_argv);
		_exit(127);
	}
	pid_t docker_pid = tar_pid < 0 ? -1 : fork();
	if (docker_pid == 0)
		child_exec(b, &docker_cmd, out[1], to_docker[0]);
	close(from_tar[1]);
	close(to_docker[0]);
	close(out[1]);
	int rc = 0;
	if (tar_pid < 0 || docker_pid < 0)
		rc = terr_set(b->err, errno, "fork: %s", strerror(errno));
	char *buf = malloc(1 << 20);
	if (!buf && rc == 0)
		rc = terr_set(b->err, ENOMEM, "out of memory");
	int64_t sent = 0;
	bool write_failed = false;
	while (rc == 0 && buf) {
		ssize_t got = read(from_tar[0], buf, 1 << 20);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break;
		for (ssize_t off = 0; off < got && !write_failed;) {
			ssize_t w = write(to_docker[1], buf + off, (size_t)(got - off));
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				write_failed = true;
			else
				off += w;
		}
		if (write_failed)
			break;
		int64_t before = sent >> 24;
		sent += got;
		if ((sent >> 24) != before) {   /* every 16 MiB */
			b->prog.done = (long)(sent >> 20);
			if (b->prog.done > b->prog.total)
				b->prog.total = b->prog.done;
			report(b);
		}
	}
	free(buf);
	close(from_tar[0]);
	close(to_docker[1]);
	/* docker's answer (the image id, or why not) */
	b->last[0][0] = b->last[1][0] = '\0';
	char obuf[4096];
	size_t on = 0;
	for (ssize_t got; (got = read(out[0], obuf + on, sizeof(obuf) - 1 - on)) > 0 || (got < 0 && errno == EINTR);)
		if (got > 0)
			on += (size_t)got;
	obuf[on] = '\0';
	close(out[0]);
	log_text(b, obuf);
	int tar_st = tar_pid > 0 ? wait_child(tar_pid) : -1;
	int docker_st = docker_pid > 0 ? wait_child(docker_pid) : -1;
	strv_free(&args);
	if (rc < 0)
		return rc;
	if (docker_st != 0) {
		char *nl = strchr(obuf, '\n');
		if (nl && nl[1] == '\0')
			*nl = '\0';
		return terr_set(b->err, EIO, "docker import failed (exit status %d): %.300s%s%s", docker_st,
				obuf[0] ? obuf : "(no output)", "; the full output is in ", b->res->log_path);
	}
	if (tar_st != 0)
		return terr_set(b->err, EIO, "tar of %s failed (exit status %d); the full output is in %s",
				b->root, tar_st, b->res->log_path);
	b->prog.done = b->prog.total = (long)(sent >> 20);
	report(b);
	return 0;
}

/* ---- Docker's side ---- */

struct capture {
	char text[8192];
	size_t n;
};

static void on_capture(struct builder *b, const char *line, void *ud)
{
	(void)b;
	struct capture *c = ud;
	int w = snprintf(c->text + c->n, sizeof(c->text) - c->n, "%s\n", line);
	if (w > 0 && (size_t)w < sizeof(c->text) - c->n)
		c->n += (size_t)w;
}

/* docker image inspect REF: Id, Size and the labels as JSON. */
static int inspect(const char *ref, bool *found, json_t **out, struct terr *err)
{
	struct img_build_opts o = {0};
	struct img_build_result res = {0};
	struct builder b = {.o = &o, .res = &res, .err = err, .log_fd = -1};
	struct capture cap = {.n = 0};
	const char *argv[] = {"docker", "image", "inspect", "--format",
			      "{\"id\":{{json .Id}},\"size\":{{json .Size}},\"labels\":{{json .Config.Labels}}}",
			      ref, NULL};
	*found = false;
	*out = NULL;
	int r = run(&b, &(struct cmd){.argv = argv, .on_line = on_capture, .ud = &cap, .quiet_fail = true});
	if (r < 0) {
		if (strstr(cap.text, "No such image") || strstr(cap.text, "No such object"))
			return 0;
		char *nl = strchr(cap.text, '\n');
		if (nl)
			*nl = '\0';
		return terr_set(err, EIO, "cannot ask Docker about %s: %s", ref,
				cap.text[0] ? cap.text : "docker image inspect failed");
	}
	json_error_t je;
	/* A warning of the CLI may come before the answer on stderr. */
	const char *brace = strchr(cap.text, '{');
	*out = json_loads(brace ? brace : cap.text, 0, &je);
	if (!*out)
		return terr_set(err, EIO, "unexpected answer of docker image inspect: %.100s", cap.text);
	*found = true;
	return 0;
}

int img_existing_hash(const char *ref, bool *found, char *hash, size_t n, struct terr *err)
{
	json_t *info = NULL;
	if (n)
		hash[0] = '\0';
	int r = inspect(ref, found, &info, err);
	if (r < 0 || !*found)
		return r;
	const char *h = json_string_value(json_object_get(json_object_get(info, "labels"), "tessera.recipe.hash"));
	if (h)
		copy_n(hash, n, h, strlen(h));
	json_decref(info);
	return 0;
}

/* ---- the build ---- */

static int lock_file(const char *path, struct terr *err)
{
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return terr_set(err, errno, "cannot open %s: %s", path, strerror(errno));
	while (flock(fd, LOCK_EX) < 0)
		if (errno != EINTR) {
			int e = errno;
			close(fd);
			return terr_set(err, e, "cannot lock %s: %s", path, strerror(e));
		}
	return fd;
}

static int prepare(struct builder *b)
{
	const struct img_build_opts *o = b->o;
	/* debootstrap wants its cache as an absolute path. */
	const char *cache_arg = o->cache_dir ? o->cache_dir : IMG_DEFAULT_CACHE_DIR;
	char cache[PATH_MAX];
	if (util_mkdir_p(cache_arg, 0755, b->err) < 0)
		return -EIO;
	if (!realpath(cache_arg, cache))
		return terr_set(b->err, errno, "%s: %s", cache_arg, strerror(errno));
	char slug[300];
	snprintf(slug, sizeof(slug), "%s", b->res->ref);
	for (char *c = slug; *c; c++)
		if (*c == '/' || *c == ':')
			*c = '_';
	char dir[PATH_MAX];
	/* The longest path below is of the root's files; keep room for them. */
	if (strlen(cache) > 1024 ||
	    snprintf(b->cache, sizeof(b->cache), "%s", cache) >= (int)sizeof(b->cache) ||
	    snprintf(b->suite_dir, sizeof(b->suite_dir), "%s/%s", cache, b->r->suite) >= (int)sizeof(b->suite_dir) ||
	    snprintf(b->build_dir, sizeof(b->build_dir), "%s/build/%s", cache, slug) >= (int)sizeof(b->build_dir) ||
	    snprintf(b->root, sizeof(b->root), "%s/root", b->build_dir) >= (int)sizeof(b->root) ||
	    snprintf(b->res->log_path, sizeof(b->res->log_path), "%s/logs/%s.log", cache, slug) >=
		    (int)sizeof(b->res->log_path) ||
	    snprintf(b->site_dir, sizeof(b->site_dir), "%s/site", cache) >= (int)sizeof(b->site_dir) ||
	    snprintf(dir, sizeof(dir), "%s/debootstrap", b->suite_dir) >= (int)sizeof(dir))
		return terr_set(b->err, ENAMETOOLONG, "cache directory path too long: %.100s", cache);
	if (util_mkdir_p(dir, 0755, b->err) < 0)
		return -EIO;
	if (snprintf(dir, sizeof(dir), "%s/logs", b->cache) >= (int)sizeof(dir))
		return terr_set(b->err, ENAMETOOLONG, "cache directory path too long: %.100s", cache);
	if (util_mkdir_p(dir, 0755, b->err) < 0)
		return -EIO;
	if (util_mkdir_p(b->build_dir, 0755, b->err) < 0)
		return -EIO;
	b->log_fd = open(b->res->log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (b->log_fd < 0)
		return terr_set(b->err, errno, "cannot write %s: %s", b->res->log_path, strerror(errno));

	if (o->mirror && *o->mirror) {
		copy_n(b->mirror, sizeof(b->mirror), o->mirror, strlen(o->mirror));
	}
	char hm[512], hs[512];
	host_mirrors(hm, sizeof(hm), hs, sizeof(hs));
	if (!b->mirror[0])
		copy_n(b->mirror, sizeof(b->mirror), hm[0] ? hm : IMG_DEFAULT_MIRROR,
		       strlen(hm[0] ? hm : IMG_DEFAULT_MIRROR));
	const char *sec = o->security_mirror ? o->security_mirror : hs;
	copy_n(b->security, sizeof(b->security), sec, strlen(sec));
	dprintf(b->log_fd, "# %s from %s (suite %s, mirror %s, security %s), hash %s\n", b->res->ref,
		b->r->path, b->r->suite, b->mirror, b->security[0] ? b->security : "none", b->r->hash);
	return 0;
}

/* A private mount namespace: the build's mounts are seen by nobody else
 * and end with this process, even if it is killed. */
static int private_mounts(struct terr *err)
{
	if (unshare(CLONE_NEWNS) < 0)
		return terr_set(err, errno, "cannot make a mount namespace for the build: %s", strerror(errno));
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return terr_set(err, errno, "cannot make mounts private: %s", strerror(errno));
	return 0;
}

/* 1 with res filled when the image of r is there with r's hash, 0 when
 * it is not, negative when Docker cannot be asked. */
static int check_up_to_date(const struct recipe *r, struct img_build_result *res, struct terr *err)
{
	bool found;
	json_t *info = NULL;
	if (inspect(res->ref, &found, &info, err) < 0)
		return -EIO;
	if (!found)
		return 0;
	json_t *labels = json_object_get(info, "labels");
	const char *hash = json_string_value(json_object_get(labels, "tessera.recipe.hash"));
	int r_up = hash && !strcmp(hash, r->hash);
	if (r_up) {
		res->up_to_date = true;
		const char *id = json_string_value(json_object_get(info, "id"));
		copy_n(res->id, sizeof(res->id), id ? id : "", id ? strlen(id) : 0);
		res->size = (int64_t)json_integer_value(json_object_get(info, "size"));
		const char *fw = json_string_value(json_object_get(labels, "tessera.frameworks"));
		if (fw)
			copy_n(res->frameworks, sizeof(res->frameworks), fw, strlen(fw));
	}
	json_decref(info);
	return r_up;
}

int img_build(const struct recipe *r, const struct img_build_opts *opts,
	      struct img_build_result *res, struct terr *err)
{
	memset(res, 0, sizeof(*res));
	if (recipe_ref(r, res->ref, sizeof(res->ref)) < 0)
		return terr_set(err, ENAMETOOLONG, "image name too long");
	if (!opts->force) {
		int u = check_up_to_date(r, res, err);
		if (u != 0)
			return u < 0 ? u : 0;
	}
	/* A recipe that needs what is not there fails before anything runs. */
	if (img_recipe_needs(r, opts, res->needs, sizeof(res->needs)) > 0) {
		res->unready = true;
		return terr_set(err, EAGAIN, "%.*s", (int)strcspn(res->needs, "\n"), res->needs);
	}
	if (geteuid() != 0)
		return terr_set(err, EPERM, "building images needs root (debootstrap and chroot)");

	struct builder b = {.r = r, .o = opts, .res = res, .err = err, .log_fd = -1};
	int ref_lock = -1, suite_lock = -1, rc;
	struct sigaction ign = {.sa_handler = SIG_IGN}, old_pipe;
	/* A docker that dies mid-import must fail the write, not kill us. */
	sigaction(SIGPIPE, &ign, &old_pipe);
	rc = private_mounts(err);
	if (rc == 0)
		rc = prepare(&b);
	char lock[PATH_MAX];
	if (rc == 0) {
		snprintf(lock, sizeof(lock), "%s.lock", b.build_dir);
		/* One build of an image at a time; a second waits. */
		rc = ref_lock = lock_file(lock, err);
	}
	/* A build of the same recipe that held the lock may have made it. */
	if (rc >= 0 && !opts->force) {
		int u = check_up_to_date(r, res, err);
		if (u != 0) {
			rc = u < 0 ? u : 0;
			goto out;
		}
	}
	if (rc >= 0) {
		/* What a build that was killed left (its mounts died with it). */
		unmount_under(b.root);
		remove_tree(b.root);
		snprintf(lock, sizeof(lock), "%s/lock", b.suite_dir);
		/* apt and debootstrap share the suite's download cache: one at a time. */
		rc = suite_lock = lock_file(lock, err);
	}
	if (rc >= 0)
		rc = stage_bootstrap(&b);
	if (rc >= 0 && (rc = setup_root(&b)) >= 0)
		rc = stage_packages(&b);
	if (rc >= 0)
		rc = stage_user(&b);
	if (rc >= 0)
		rc = stage_pip(&b);
	if (rc >= 0)
		rc = stage_run(&b);
	if (rc >= 0)
		rc = stage_clean(&b);
	/* The clean stage unmounted the download cache (run steps may use
	 * apt too): other builds of the suite may go on. */
	if (suite_lock >= 0)
		close(suite_lock);
	/* The image this build replaces, when an earlier build made it. */
	char old_id[80] = "";
	if (rc >= 0) {
		bool found;
		json_t *info = NULL;
		struct terr ignored = {0};
		if (inspect(res->ref, &found, &info, &ignored) == 0 && info) {
			const char *id = json_string_value(json_object_get(info, "id"));
			if (id && json_object_get(json_object_get(info, "labels"), "tessera.recipe.hash"))
				copy_n(old_id, sizeof(old_id), id, strlen(id));
			json_decref(info);
		}
	}
	if (rc >= 0)
		rc = stage_import(&b);
	if (b.stage_start)
		res->stage_ms[b.prog.stage] += util_mono_ms() - b.stage_start;
	if (rc >= 0) {
		bool found;
		json_t *info = NULL;
		if (inspect(res->ref, &found, &info, err) == 0 && info) {
			const char *id = json_string_value(json_object_get(info, "id"));
			copy_n(res->id, sizeof(res->id), id ? id : "", id ? strlen(id) : 0);
			res->size = (int64_t)json_integer_value(json_object_get(info, "size"));
			json_decref(info);
		}
		/* The old one lost its name to the new one: gone too, unless
		 * containers use it or it has other names (then Docker refuses,
		 * and it stays). */
		if (old_id[0] && strcmp(old_id, res->id)) {
			const char *argv[] = {"docker", "image", "rm", old_id, NULL};
			run(&b, &(struct cmd){.argv = argv, .quiet_fail = true});
		}
		rc = 0;
	}
out:
	if (b.root[0]) {
		unmount_under(b.root);
		/* On failure the root stays for a look until the next build. */
		if (rc == 0)
			remove_tree(b.build_dir);
	}
	if (b.log_fd >= 0)
		close(b.log_fd);
	if (ref_lock >= 0)
		close(ref_lock);
	sigaction(SIGPIPE, &old_pipe, NULL);
	return rc < 0 ? rc : 0;
}
