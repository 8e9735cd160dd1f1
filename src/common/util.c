#include "common/util.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <libgen.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/sign.h"

int64_t util_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t util_mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void util_cond_init_mono(pthread_cond_t *cv)
{
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(cv, &ca);
	pthread_condattr_destroy(&ca);
}

void util_deadline_ms(struct timespec *ts, int64_t ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += (time_t)(ms / 1000);
	ts->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

void util_format_time_ms(int64_t ms, char *buf, size_t n)
{
	time_t secs = (time_t)(ms / 1000);
	struct tm tm;
	gmtime_r(&secs, &tm);
	char base[24];
	strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf, n, "%s.%03dZ", base, (int)(ms % 1000));
}

int util_new_id(char out[UTIL_ID_LEN + 1], struct terr *err)
{
	return sign_random_hex(UTIL_ID_LEN / 2, out, UTIL_ID_LEN + 1, err);
}

int util_mkdir_p(const char *path, mode_t mode, struct terr *err)
{
	char tmp[PATH_MAX];
	if (util_strlcpy(tmp, path, sizeof(tmp)) < 0)
		return terr_set(err, ENAMETOOLONG, "path too long: %s", path);
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(tmp, mode) < 0 && errno != EEXIST)
			return terr_set(err, errno, "cannot create directory %s: %s", tmp, strerror(errno));
		*p = '/';
	}
	if (mkdir(tmp, mode) < 0 && errno != EEXIST)
		return terr_set(err, errno, "cannot create directory %s: %s", tmp, strerror(errno));
	return 0;
}

int util_read_file(const char *path, char **out, size_t *len, struct terr *err)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return terr_set(err, errno, "cannot open %s: %s", path, strerror(errno));
	size_t cap = 4096, n = 0;
	char *buf = malloc(cap);
	while (buf) {
		size_t got = fread(buf + n, 1, cap - n - 1, f);
		n += got;
		if (got == 0)
			break;
		if (cap - n - 1 == 0) {
			char *nb = realloc(buf, cap * 2);
			if (!nb) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = nb;
			cap *= 2;
		}
	}
	int failed = ferror(f);
	fclose(f);
	if (!buf)
		return terr_set(err, ENOMEM, "out of memory reading %s", path);
	if (failed) {
		free(buf);
		return terr_set(err, EIO, "cannot read %s", path);
	}
	buf[n] = '\0';
	*out = buf;
	if (len)
		*len = n;
	return 0;
}

int util_exe_dir(char *buf, size_t n, struct terr *err)
{
	char exe[PATH_MAX];
	ssize_t r = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (r < 0)
		return terr_set(err, errno, "cannot resolve /proc/self/exe: %s", strerror(errno));
	exe[r] = '\0';
	if (util_strlcpy(buf, dirname(exe), n) < 0)
		return terr_set(err, ENAMETOOLONG, "executable path too long");
	return 0;
}

int util_self_command(const char *name, char *buf, size_t n, struct terr *err)
{
	char self[PATH_MAX];
	if (!realpath("/proc/self/exe", self))
		return terr_set(err, errno, "cannot resolve /proc/self/exe: %s", strerror(errno));
	bool on_path = false;
	/* An empty PATH entry is the current directory. */
	for (const char *p = getenv("PATH"); p;) {
		const char *end = strchr(p, ':');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		char cand[PATH_MAX], real[PATH_MAX];
		struct stat st;
		if (snprintf(cand, sizeof(cand), "%.*s%s%s", (int)len, p, len ? "/" : "", name) < (int)sizeof(cand) &&
		    stat(cand, &st) == 0 && S_ISREG(st.st_mode) && access(cand, X_OK) == 0) {
			/* The shell runs the first one it finds. */
			on_path = realpath(cand, real) && !strcmp(real, self);
			break;
		}
		p = end ? end + 1 : NULL;
	}
	if (util_strlcpy(buf, on_path ? name : self, n) < 0)
		return terr_set(err, ENAMETOOLONG, "executable path too long");
	return 0;
}

int util_strlcpy(char *dst, const char *src, size_t n)
{
	if (n == 0)
		return -ENAMETOOLONG;
	size_t len = strlen(src);
	if (len >= n) {
		memcpy(dst, src, n - 1);
		dst[n - 1] = '\0';
		return -ENAMETOOLONG;
	}
	memcpy(dst, src, len + 1);
	return 0;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

void util_remove_tree(const char *path)
{
	nftw(path, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
}

static int port_digits(const char *s, const char *end, int *out)
{
	if (s == end || end - s > 5)
		return -1;
	int v = 0;
	for (const char *p = s; p < end; p++) {
		if (*p < '0' || *p > '9')
			return -1;
		v = v * 10 + (*p - '0');
	}
	*out = v;
	return 0;
}

int util_parse_port_range(const char *s, int *lo, int *hi, struct terr *err)
{
	const char *dash = s ? strchr(s, '-') : NULL;
	int a, b;
	if (!dash || port_digits(s, dash, &a) < 0 || port_digits(dash + 1, dash + 1 + strlen(dash + 1), &b) < 0 ||
	    a < 1 || b > 65535 || a > b)
		return terr_set(err, EINVAL, "port range must be FIRST-LAST with 1 <= FIRST <= LAST <= 65535 "
				"(e.g. 10205-10300), not '%.40s'", s ? s : "");
	*lo = a;
	*hi = b;
	return 0;
}

int util_find_ui_dir(const char *file, char *out, size_t n, struct terr *err)
{
	char dir[PATH_MAX];
	if (util_exe_dir(dir, sizeof(dir), err) < 0)
		return -err->code;
	char real[PATH_MAX];
	const char *candidates[] = {"%s/ui/www", "%s/../share/tessera/ui", NULL};
	for (size_t i = 0; i < sizeof(candidates) / sizeof(candidates[0]); i++) {
		char path[PATH_MAX + 64], probe[PATH_MAX + 128];
		if (candidates[i])
			snprintf(path, sizeof(path), candidates[i], dir);
		else
			snprintf(path, sizeof(path), "/usr/share/tessera/ui");
		snprintf(probe, sizeof(probe), "%s/%s", path, file);
		if (access(probe, R_OK) == 0 && realpath(path, real))
			return util_strlcpy(out, real, n) < 0 ? terr_set(err, ENAMETOOLONG, "UI path too long") : 0;
	}
	return terr_set(err, ENOENT, "cannot find the built UI (%s) beside %s or in /usr/share/tessera/ui; "
			"run 'make build' or set ui_dir", file, dir);
}

void util_netns_key(char out[UTIL_NETNS_KEY_LEN + 1])
{
	out[0] = '\0';
	char boot[64] = "";
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
	if (!f)
		return;
	bool ok = fgets(boot, sizeof(boot), f) != NULL;
	fclose(f);
	struct stat st;
	if (!ok || stat("/proc/self/ns/net", &st) < 0)
		return;
	char buf[128];
	int n = snprintf(buf, sizeof(buf), "%s|%llu|%llu", boot, (unsigned long long)st.st_dev,
			 (unsigned long long)st.st_ino);
	/* FNV-1a: a name, not a secret; both sides compute it alike. */
	uint64_t h = 1469598103934665603ULL;
	for (int i = 0; i < n; i++) {
		h ^= (unsigned char)buf[i];
		h *= 1099511628211ULL;
	}
	snprintf(out, UTIL_NETNS_KEY_LEN + 1, "%016llx", (unsigned long long)h);
}
