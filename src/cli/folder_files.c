/* `tessera folder files|upload|download|mkdir|mv|rm-file`: the files in a
 * folder (docs/folders.md, "Files"). Uploads and downloads stream, of any
 * size, with a progress line on a terminal. */
#include <fcntl.h>
#include <libgen.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/client.h"
#include "cli/folder_files.h"
#include "common/apiclient.h"
#include "common/units.h"

/* Positional arguments and the flags a verb accepts (flags: "--x" names). */
struct fargs {
	const char *pos[3];
	int npos;
	bool json, overwrite, recursive, parents;
};

static int parse_args(const char *verb, int argc, char **argv, const char *const *flags, int min, int max,
		      const char *usage, struct fargs *a, bool *done)
{
	memset(a, 0, sizeof(*a));
	*done = true;
	for (int i = 1; i < argc; i++) {
		const char *s = argv[i];
		if (!strcmp(s, "-h") || !strcmp(s, "--help")) {
			printf("usage: tessera folder %s\n", usage);
			return CLI_EXIT_OK;
		}
		if (s[0] == '-' && s[1] == '-' && s[2]) {
			bool ok = false;
			for (int k = 0; flags[k] && !ok; k++)
				ok = !strcmp(flags[k], s);
			if (!ok)
				return cli_usage_fail("folder", "%s: option '%s' is unknown (usage: tessera folder %s)", verb,
						      s, usage);
			if (!strcmp(s, "--json")) a->json = true;
			if (!strcmp(s, "--overwrite")) a->overwrite = true;
			if (!strcmp(s, "--recursive")) a->recursive = true;
			if (!strcmp(s, "--parents")) a->parents = true;
			continue;
		}
		if (a->npos == max)
			return cli_usage_fail("folder", "%s: too many arguments (usage: tessera folder %s)", verb, usage);
		a->pos[a->npos++] = s;
	}
	if (a->npos < min)
		return cli_usage_fail("folder", "%s needs %s", verb, usage);
	*done = false;
	return CLI_EXIT_OK;
}

/* "/v1/folders/NAME/SUFFIX[?path=P[&EXTRA]]", malloc'd. */
static char *route(const char *name, const char *suffix, const char *path, const char *extra)
{
	char *en = api_escape(name), *ep = path ? api_escape(path) : NULL, *out = NULL;
	if (en && (!path || ep)) {
		/* "." and ".." as a segment would be taken as the path's own. */
		const char *n = !strcmp(en, ".") ? "%2E" : !strcmp(en, "..") ? "%2E%2E" : en;
		if (asprintf(&out, "/v1/folders/%s/%s%s%s%s%s", n, suffix, path ? "?path=" : "", path ? ep : "",
			     extra ? (path ? "&" : "?") : "", extra ? extra : "") < 0)
			out = NULL;
	}
	free(en);
	free(ep);
	return out;
}

/* One call (path and body are taken); quiet: a failure prints nothing. */
static int call_q(const char *method, char *path, json_t *body, json_t **reply, bool quiet);

static int call(const char *method, char *path, json_t *body, json_t **reply)
{
	return call_q(method, path, body, reply, false);
}

static int call_q(const char *method, char *path, json_t *body, json_t **reply, bool quiet)
{
	struct cli_config cfg = {0};
	struct api_client c;
	struct terr err = {0};
	json_t *r = NULL;
	int rc = CLI_EXIT_OK;
	if (!path)
		rc = quiet ? CLI_EXIT_FAIL : cli_fail("out of memory");
	else if (cli_connect(&cfg, &c, &err) < 0 || api_call(&c, method, path, body, 0, &r, NULL, &err) < 0)
		rc = quiet ? CLI_EXIT_FAIL : cli_fail("%s", err.msg);
	cli_config_free(&cfg);
	free(path);
	json_decref(body);
	if (reply)
		*reply = r;
	else
		json_decref(r);
	return rc;
}

/* ---- progress ---- */

struct progress {
	bool tty;
	const char *what;
	int64_t total, done;
	time_t last;
};

static void progress_show(struct progress *p, bool final)
{
	if (!p->tty)
		return;
	time_t now = time(NULL);
	if (!final && now == p->last)
		return;
	p->last = now;
	char d[32], t[32];
	units_format_size(p->done, d, sizeof(d));
	if (p->total > 0) {
		units_format_size(p->total, t, sizeof(t));
		int pct = (int)(p->done * 100 / p->total);
		int filled = pct * 30 / 100;
		fprintf(stderr, "\r%s [%.*s%*s] %3d%% %s / %s", p->what, filled, "##############################",
			30 - filled, "", pct, d, t);
	} else {
		fprintf(stderr, "\r%s %s", p->what, d);
	}
	if (final)
		fputc('\n', stderr);
	fflush(stderr);
}

/* ---- verbs ---- */

int folder_files_cmd(int argc, char **argv)
{
	static const char *const flags[] = {"--json", NULL};
	struct fargs a;
	bool done;
	int rc = parse_args("files", argc, argv, flags, 1, 2, "files NAME [PATH] [--json]", &a, &done);
	if (done)
		return rc;
	json_t *reply = NULL;
	rc = call("GET", route(a.pos[0], "files", a.npos > 1 ? a.pos[1] : "", NULL), NULL, &reply);
	if (rc != CLI_EXIT_OK)
		return rc;
	if (a.json) {
		cli_print_json(reply);
	} else {
		json_t *ents = json_object_get(reply, "entries");
		size_t i;
		json_t *e;
		printf("%-5s %10s  %-20s  %s\n", "TYPE", "SIZE", "MODIFIED", "NAME");
		json_array_foreach(ents, i, e) {
			char sz[32], when[24];
			const char *type = cli_json_str(e, "type", "");
			units_format_size(cli_json_int(json_object_get(e, "size")), sz, sizeof(sz));
			/* To the second, still UTC: "2026-11-24T23:42:37.123Z"
			 * shows as "2026-11-24T23:42:37Z". */
			const char *mt = cli_json_str(e, "mtime", "");
			snprintf(when, sizeof(when), "%.19s%s", mt, strlen(mt) > 19 ? "Z" : "");
			printf("%-5s %10s  %-20s  %s%s\n", type, !strcmp(type, "dir") ? "-" : sz, when,
			       cli_json_str(e, "name", ""),
			       !strcmp(type, "dir") ? "/" : !strcmp(type, "link") ? " (link, not followed)" : "");
		}
	}
	json_decref(reply);
	return CLI_EXIT_OK;
}

struct upsrc {
	int fd;
	struct progress pr;
};

static long upload_read(char *buf, size_t max, void *ud)
{
	struct upsrc *s = ud;
	ssize_t n = read(s->fd, buf, max);
	if (n < 0)
		return -1;
	s->pr.done += n;
	progress_show(&s->pr, false);
	return (long)n;
}

/* hex SHA-256 of the file open on fd (read to its end, then rewound). */
static int file_sha256(int fd, char hex[65])
{
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	if (!md || !EVP_DigestInit_ex(md, EVP_sha256(), NULL)) {
		EVP_MD_CTX_free(md);
		return -ENOMEM;
	}
	static char buf[1 << 16];
	ssize_t n;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		EVP_DigestUpdate(md, buf, (size_t)n);
	int e = n < 0 ? errno : 0;
	unsigned char out[EVP_MAX_MD_SIZE];
	unsigned len = 0;
	EVP_DigestFinal_ex(md, out, &len);
	EVP_MD_CTX_free(md);
	for (unsigned i = 0; i < 32 && i < len; i++)
		snprintf(hex + 2 * i, 3, "%02x", out[i]);
	if (e)
		return -e;
	return lseek(fd, 0, SEEK_SET) < 0 ? -errno : 0;
}

int folder_upload_cmd(int argc, char **argv)
{
	static const char *const flags[] = {"--overwrite", NULL};
	struct fargs a;
	bool done;
	int rc = parse_args("upload", argc, argv, flags, 2, 3, "upload NAME LOCAL [REMOTE] [--overwrite]", &a,
			    &done);
	if (done)
		return rc;
	const char *local = a.pos[1];
	int fd = open(local, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return cli_fail("cannot read %s: %s", local, strerror(e));
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return cli_fail("%s is not a regular file (upload files one by one)", local);
	}
	char *lcopy = strdup(local);
	const char *remote = a.npos > 2 ? a.pos[2] : (lcopy ? basename(lcopy) : local);
	char hex[65] = "";
	if ((rc = file_sha256(fd, hex)) < 0) {
		close(fd);
		free(lcopy);
		return cli_fail("cannot read %s: %s", local, strerror(-rc));
	}
	char *path = route(a.pos[0], "upload", remote, a.overwrite ? "overwrite=1" : NULL);
	struct upsrc src = {.fd = fd, .pr = {.tty = isatty(STDERR_FILENO), .what = remote,
					      .total = (int64_t)st.st_size}};
	struct cli_config cfg = {0};
	struct api_client c;
	struct terr err = {0};
	json_t *reply = NULL;
	rc = CLI_EXIT_OK;
	if (!path)
		rc = cli_fail("out of memory");
	else if (cli_connect(&cfg, &c, &err) < 0 ||
		 api_upload(&c, "PUT", path, upload_read, &src, (long long)st.st_size, hex, &reply, &err) < 0) {
		if (src.pr.tty)
			fputc('\n', stderr);
		rc = cli_fail("%s", err.msg);
	} else {
		progress_show(&src.pr, true);
		printf("uploaded %s to %s:%s (%lld bytes, sha256 %s)\n", local, a.pos[0], remote,
		       (long long)st.st_size, hex);
	}
	cli_config_free(&cfg);
	json_decref(reply);
	free(path);
	free(lcopy);
	close(fd);
	return rc;
}

struct downdst {
	int fd;
	int failed;
	struct progress pr;
};

static int download_data(const char *data, size_t len, void *ud)
{
	struct downdst *d = ud;
	while (len > 0) {
		ssize_t w = write(d->fd, data, len);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			d->failed = errno;
			return 1;
		}
		data += w;
		len -= (size_t)w;
		d->pr.done += w;
	}
	progress_show(&d->pr, false);
	return 0;
}

int folder_download_cmd(int argc, char **argv)
{
	static const char *const flags[] = {NULL};
	struct fargs a;
	bool done;
	int rc = parse_args("download", argc, argv, flags, 2, 3, "download NAME REMOTE [LOCAL]", &a, &done);
	if (done)
		return rc;
	const char *remote = a.pos[1];
	char *rcopy = strdup(remote);
	const char *local = a.npos > 2 ? a.pos[2] : (rcopy ? basename(rcopy) : remote);
	struct downdst d = {.fd = -1, .pr = {.tty = isatty(STDERR_FILENO), .what = remote, .total = -1}};
	/* The size for the progress bar, from the listing of its directory. */
	if (d.pr.tty) {
		char *pcopy = strdup(remote);
		char *slash = pcopy ? strrchr(pcopy, '/') : NULL;
		const char *leaf = slash ? slash + 1 : remote;
		if (slash)
			*slash = '\0';
		json_t *list = NULL;
		/* Quiet: the download's own answer says what is wrong. */
		if (pcopy && call_q("GET", route(a.pos[0], "files", slash ? pcopy : "", NULL), NULL, &list, true) ==
			     CLI_EXIT_OK) {
			size_t i;
			json_t *e;
			json_array_foreach(json_object_get(list, "entries"), i, e)
				if (!strcmp(cli_json_str(e, "name", ""), leaf))
					d.pr.total = cli_json_int(json_object_get(e, "size"));
		}
		json_decref(list);
		free(pcopy);
	}
	/* Written beside LOCAL and renamed at the end: a cut download leaves
	 * no partial file under its name. */
	char *part = NULL;
	if (asprintf(&part, "%s.tessera-part", local) < 0) {
		free(rcopy);
		return cli_fail("out of memory");
	}
	d.fd = open(part, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (d.fd < 0) {
		rc = cli_fail("cannot write %s: %s", part, strerror(errno));
		free(part);
		free(rcopy);
		return rc;
	}
	char *path = route(a.pos[0], "download", remote, NULL);
	struct cli_config cfg = {0};
	struct api_client c;
	struct terr err = {0};
	rc = CLI_EXIT_OK;
	if (!path) {
		rc = cli_fail("out of memory");
	} else if (cli_connect(&cfg, &c, &err) < 0 ||
		   api_stream(&c, "GET", path, NULL, 0, "application/octet-stream", NULL, download_data, &d, NULL,
			      NULL, &err) < 0) {
		if (d.pr.tty && d.pr.done)
			fputc('\n', stderr);
		rc = cli_fail("%s", err.msg);
	} else if (d.failed) {
		rc = cli_fail("cannot write %s: %s", part, strerror(d.failed));
	} else if (fsync(d.fd) < 0 || rename(part, local) < 0) {
		rc = cli_fail("cannot write %s: %s", local, strerror(errno));
	} else {
		progress_show(&d.pr, true);
		printf("downloaded %s:%s to %s (%lld bytes)\n", a.pos[0], remote, local, (long long)d.pr.done);
	}
	close(d.fd);
	if (rc != CLI_EXIT_OK)
		unlink(part);
	cli_config_free(&cfg);
	free(path);
	free(part);
	free(rcopy);
	return rc;
}

int folder_mkdir_cmd(int argc, char **argv)
{
	static const char *const flags[] = {"--parents", NULL};
	struct fargs a;
	bool done;
	int rc = parse_args("mkdir", argc, argv, flags, 2, 2, "mkdir NAME PATH [--parents]", &a, &done);
	if (done)
		return rc;
	rc = call("POST", route(a.pos[0], "mkdir", NULL, NULL),
		  json_pack("{s:s,s:b}", "path", a.pos[1], "parents", a.parents), NULL);
	if (rc == CLI_EXIT_OK)
		printf("made %s:%s\n", a.pos[0], a.pos[1]);
	return rc;
}

int folder_mv_cmd(int argc, char **argv)
{
	static const char *const flags[] = {"--overwrite", NULL};
	struct fargs a;
	bool done;
	int rc = parse_args("mv", argc, argv, flags, 3, 3, "mv NAME FROM TO [--overwrite]", &a, &done);
	if (done)
		return rc;
	rc = call("POST", route(a.pos[0], "mv", NULL, NULL),
		  json_pack("{s:s,s:s,s:b}", "from", a.pos[1], "to", a.pos[2], "overwrite", a.overwrite), NULL);
	if (rc == CLI_EXIT_OK)
		printf("moved %s:%s to %s\n", a.pos[0], a.pos[1], a.pos[2]);
	return rc;
}

int folder_rm_file_cmd(int argc, char **argv)
{
	static const char *const flags[] = {"--recursive", NULL};
	struct fargs a;
	bool done;
	int rc = parse_args("rm-file", argc, argv, flags, 2, 2, "rm-file NAME PATH [--recursive]", &a, &done);
	if (done)
		return rc;
	rc = call("DELETE", route(a.pos[0], "files", a.pos[1], a.recursive ? "recursive=1" : NULL), NULL, NULL);
	if (rc == CLI_EXIT_OK)
		printf("removed %s:%s\n", a.pos[0], a.pos[1]);
	return rc;
}
