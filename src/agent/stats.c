/* Live usage of session containers from cgroups and /proc (stats.h). */
#include "agent/stats.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


/* Whether the comma-separated list [s, s+n) holds word. */
static bool list_has(const char *s, size_t n, const char *word)
{
	size_t wl = strlen(word);
	const char *end = s + n;
	while (s < end) {
		const char *comma = memchr(s, ',', (size_t)(end - s));
		size_t len = comma ? (size_t)(comma - s) : (size_t)(end - s);
		if (len == wl && !memcmp(s, word, wl))
			return true;
		s += len + 1;
	}
	return false;
}

/* The cgroup path of controller in /proc/PID/cgroup text ("ID:CONTROLLERS:
 * PATH" lines): the v1 line naming it, else the v2 "0::" line; controller
 * NULL: the v2 line only. */
static bool cgroup_path(const char *text, const char *controller, char *out, size_t n, bool *v2)
{
	bool found_v2 = false;
	char v2_path[4096] = "";
	for (const char *line = text; line && *line;) {
		const char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		const char *c1 = memchr(line, ':', len);
		const char *c2 = c1 ? memchr(c1 + 1, ':', len - (size_t)(c1 + 1 - line)) : NULL;
		if (c2) {
			size_t plen = len - (size_t)(c2 + 1 - line);
			if (controller && list_has(c1 + 1, (size_t)(c2 - c1 - 1), controller)) {
				if (plen >= n)
					return false;
				memcpy(out, c2 + 1, plen);
				out[plen] = '\0';
				*v2 = false;
				return true;
			}
			if (c2 == c1 + 1 && c1 - line == 1 && line[0] == '0' && plen < sizeof(v2_path)) {
				memcpy(v2_path, c2 + 1, plen);
				v2_path[plen] = '\0';
				found_v2 = true;
			}
		}
		line = nl ? nl + 1 : NULL;
	}
	if (!found_v2 || strlen(v2_path) >= n)
		return false;
	strcpy(out, v2_path);
	*v2 = true;
	return true;
}

/* The hierarchy's mount in mountinfo: ID PARENT MAJ:MIN ROOT MOUNTPOINT
 * OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS. */
static bool hierarchy_mount(const char *mountinfo, bool v2, const char *controller, char *root, char *point,
			    size_t n)
{
	for (const char *line = mountinfo; line && *line;) {
		const char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		char buf[4096];
		if (len < sizeof(buf)) {
			memcpy(buf, line, len);
			buf[len] = '\0';
			char *sep = strstr(buf, " - ");
			char r[4096], p[4096], fstype[64], super[1024] = "";
			if (sep && sscanf(buf, "%*s %*s %*s %4095s %4095s", r, p) == 2 &&
			    sscanf(sep + 3, "%63s %*s %1023s", fstype, super) >= 1) {
				bool match = v2 ? !strcmp(fstype, "cgroup2")
						: !strcmp(fstype, "cgroup") && list_has(super, strlen(super), controller);
				if (match && strlen(r) < n && strlen(p) < n) {
					strcpy(root, r);
					strcpy(point, p);
					return true;
				}
			}
		}
		line = nl ? nl + 1 : NULL;
	}
	return false;
}

bool stats_cgroup_path(const char *proc_cgroup, const char *controller, char *out, size_t n, bool *v2)
{
	*v2 = false;
	return cgroup_path(proc_cgroup, controller, out, n, v2);
}

int stats_cgroup_dir(const char *proc_cgroup, const char *mountinfo, const char *controller, char *out,
		     size_t n, bool *v2, struct terr *err)
{
	char path[4096], root[4096], point[4096];
	*v2 = false;
	if (!cgroup_path(proc_cgroup, controller, path, sizeof(path), v2))
		return terr_set(err, ENOENT, "the process is in no %s cgroup", controller ? controller : "v2");
	if (!hierarchy_mount(mountinfo, *v2, controller, root, point, sizeof(root)))
		return terr_set(err, ENOENT, "no cgroup%s mount %s%sfound", *v2 ? "2" : "", *v2 ? "" : "of ",
				*v2 ? "" : controller);
	/* The path is seen from the hierarchy's root; the mount may show a
	 * part of it only (its root), under its mount point. */
	const char *rel = path;
	size_t rl = strlen(root);
	if (strcmp(root, "/") != 0) {
		if (strncmp(path, root, rl) != 0 || (path[rl] != '/' && path[rl] != '\0'))
			return terr_set(err, ENOENT, "cgroup %s is outside the mounted part %s", path, root);
		rel = path + rl;
	}
	if (snprintf(out, n, "%s%s", point, !strcmp(rel, "/") ? "" : rel) >= (int)n)
		return terr_set(err, ENAMETOOLONG, "cgroup path too long");
	return 0;
}

int stats_parse_value(const char *text, int64_t *v)
{
	while (*text == ' ' || *text == '\t')
		text++;
	if (!strncmp(text, "max", 3)) {
		*v = -1;
		return 0;
	}
	char *end;
	errno = 0;
	long long x = strtoll(text, &end, 10);
	if (end == text || errno || (*end && *end != '\n' && *end != ' '))
		return -EINVAL;
	*v = x;
	return 0;
}

int stats_parse_key(const char *text, const char *key, int64_t *v)
{
	size_t kl = strlen(key);
	for (const char *line = text; line && *line;) {
		if (!strncmp(line, key, kl) && line[kl] == ' ') {
			char *end;
			long long x = strtoll(line + kl + 1, &end, 10);
			if (end != line + kl + 1) {
				*v = x;
				return 0;
			}
		}
		const char *nl = strchr(line, '\n');
		line = nl ? nl + 1 : NULL;
	}
	return -ENOENT;
}

int stats_parse_cpu_max(const char *text, int64_t *quota, int64_t *period)
{
	char q[32];
	long long p = 100000;
	if (sscanf(text, "%31s %lld", q, &p) < 1 || p <= 0)
		return -EINVAL;
	*period = p;
	return stats_parse_value(q, quota);
}

void stats_parse_io_v2(const char *text, int64_t *read, int64_t *write)
{
	*read = *write = 0;
	for (const char *line = text; line && *line;) {
		const char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		/* MAJ:MIN key=value ... */
		for (const char *p = line; p && p < line + len;) {
			const char *sp = memchr(p, ' ', (size_t)(line + len - p));
			if (!strncmp(p, "rbytes=", 7))
				*read += strtoll(p + 7, NULL, 10);
			else if (!strncmp(p, "wbytes=", 7))
				*write += strtoll(p + 7, NULL, 10);
			p = sp ? sp + 1 : NULL;
		}
		line = nl ? nl + 1 : NULL;
	}
}

void stats_parse_blkio_v1(const char *text, int64_t *read, int64_t *write)
{
	*read = *write = 0;
	for (const char *line = text; line && *line;) {
		char dev[32], op[16];
		long long v;
		if (sscanf(line, "%31s %15s %lld", dev, op, &v) == 3 && strchr(dev, ':')) {
			if (!strcmp(op, "Read"))
				*read += v;
			else if (!strcmp(op, "Write"))
				*write += v;
		}
		const char *nl = strchr(line, '\n');
		line = nl ? nl + 1 : NULL;
	}
}

int stats_parse_netdev(const char *text, int64_t *rx, int64_t *tx)
{
	*rx = *tx = 0;
	int n = 0;
	for (const char *line = text; line && *line;) {
		/* "  eth0: RXBYTES packets errs drop fifo frame compressed
		 * multicast TXBYTES ..." after two header lines. */
		const char *colon = strchr(line, ':');
		const char *nl = strchr(line, '\n');
		if (colon && (!nl || colon < nl)) {
			const char *name = line;
			while (*name == ' ')
				name++;
			unsigned long long v[9];
			if (sscanf(colon + 1, "%llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
				   &v[3], &v[4], &v[5], &v[6], &v[7], &v[8]) == 9) {
				n++;
				if (!((size_t)(colon - name) == 2 && !strncmp(name, "lo", 2))) {
					*rx += (int64_t)v[0];
					*tx += (int64_t)v[8];
				}
			}
		}
		line = nl ? nl + 1 : NULL;
	}
	return n > 0 ? 0 : -EINVAL;
}

/* One line of /proc/PID/net/tcp or tcp6: "  0: 0100007F:1DBB
 * 0100007F:9C40 01 ...": the local address's bytes (4, or 16 for tcp6;
 * the kernel prints each 32-bit word in host order), its port and the
 * state (01 ESTABLISHED, 0A LISTEN). False for the header and junk. */
static bool tcp_line(const char *line, unsigned char addr[16], size_t *alen, int *port, unsigned *st)
{
	char local[80];
	if (sscanf(line, " %*[0-9]: %79s %*s %x", local, st) != 2)
		return false;
	char *colon = strrchr(local, ':');
	if (!colon)
		return false;
	*colon = '\0';
	size_t hl = strlen(local);
	if (hl != 8 && hl != 32)
		return false;
	for (size_t w = 0; w < hl / 8; w++) {
		char word[9];
		memcpy(word, local + 8 * w, 8);
		word[8] = '\0';
		char *end;
		uint32_t v = (uint32_t)strtoul(word, &end, 16);
		if (*end)
			return false;
		memcpy(addr + 4 * w, &v, 4);
	}
	*alen = hl / 2;
	char *end;
	long p = strtol(colon + 1, &end, 16);
	if (*end || p <= 0 || p > 65535)
		return false;
	*port = (int)p;
	return true;
}

static bool addr_loopback(const unsigned char *a, size_t len)
{
	static const unsigned char v6_loop[16] = {[15] = 1};
	static const unsigned char v4_mapped[12] = {[10] = 0xff, [11] = 0xff};
	if (len == 4)
		return a[0] == 127;
	return !memcmp(a, v6_loop, 16) || (!memcmp(a, v4_mapped, 12) && a[12] == 127);
}

void stats_listening(const char *text, struct stats_ports *ports)
{
	for (const char *line = text; line && *line;) {
		unsigned char addr[16];
		size_t alen;
		int port;
		unsigned st;
		if (tcp_line(line, addr, &alen, &port, &st) && st == 0x0A) {
			bool seen = false;
			for (int i = 0; i < ports->n && !seen; i++)
				seen = ports->port[i] == port;
			if (!seen && ports->n < STATS_MAX_LISTEN)
				ports->port[ports->n++] = port;
		}
		const char *nl = strchr(line, '\n');
		line = nl ? nl + 1 : NULL;
	}
}

int stats_count_inbound(const char *text, const struct stats_ports *ports)
{
	int n = 0;
	for (const char *line = text; line && *line;) {
		unsigned char addr[16];
		size_t alen;
		int port;
		unsigned st;
		if (tcp_line(line, addr, &alen, &port, &st) && st == 0x01 && !addr_loopback(addr, alen)) {
			for (int i = 0; i < ports->n; i++)
				if (ports->port[i] == port) {
					n++;
					break;
				}
		}
		const char *nl = strchr(line, '\n');
		line = nl ? nl + 1 : NULL;
	}
	return n;
}

/* ---- the collector ---- */

static int open_ro(const char *dir, const char *name)
{
	char path[4200];
	if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return open(path, O_RDONLY | O_CLOEXEC);
}

/* Reads the whole file at fd from offset 0 into buf (NUL-terminated);
 * the length or -errno. */
static ssize_t pread_all(int fd, char *buf, size_t n)
{
	size_t got = 0;
	while (got + 1 < n) {
		ssize_t r = pread(fd, buf + got, n - 1 - got, (off_t)got);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			break;
		got += (size_t)r;
	}
	buf[got] = '\0';
	return (ssize_t)got;
}

static int read_small(const char *dir, const char *name, char *buf, size_t n)
{
	int fd = open_ro(dir, name);
	if (fd < 0)
		return -errno;
	ssize_t r = pread_all(fd, buf, n);
	close(fd);
	return r < 0 ? (int)r : 0;
}

/* The whole file at path, NUL-terminated, into *out (malloc'd). Here
 * rather than util_read_file so that the parsers' fuzz target links this
 * file with the base library alone. */
static int read_whole(const char *path, char **out, struct terr *err)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return terr_set(err, errno, "cannot open %s: %s", path, strerror(errno));
	size_t len = 0, cap = 4096;
	char *buf = malloc(cap);
	for (;;) {
		if (!buf) {
			close(fd);
			return terr_set(err, ENOMEM, "out of memory");
		}
		ssize_t r = read(fd, buf + len, cap - len - 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int e = errno;
			free(buf);
			close(fd);
			return terr_set(err, e, "cannot read %s: %s", path, strerror(e));
		}
		if (r == 0)
			break;
		len += (size_t)r;
		if (len + 1 == cap) {
			char *g = cap < (64u << 20) ? realloc(buf, cap * 2) : NULL;
			if (!g)
				free(buf);
			buf = g;
			cap *= 2;
		}
	}
	close(fd);
	buf[len] = '\0';
	*out = buf;
	return 0;
}

void stats_cg_close(struct stats_cg *cg)
{
	int *fds[] = {&cg->fd_cpu, &cg->fd_mem, &cg->fd_memstat, &cg->fd_io, &cg->fd_net, &cg->fd_tcp, &cg->fd_tcp6};
	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++) {
		if (*fds[i] >= 0)
			close(*fds[i]);
		*fds[i] = -1;
	}
}

int stats_cg_open(struct stats_cg *cg, const char *proc_root, int pid, const char *mountinfo_path,
		  struct terr *err)
{
	memset(cg, 0, sizeof(*cg));
	cg->fd_cpu = cg->fd_mem = cg->fd_memstat = cg->fd_io = cg->fd_net = cg->fd_tcp = cg->fd_tcp6 = -1;
	cg->prev_cpu_ns = -1;
	char path[4200], *pcg = NULL, *mi = NULL;
	int rc;
	snprintf(path, sizeof(path), "%s/%d/cgroup", proc_root, pid);
	if ((rc = read_whole(path, &pcg, err)) < 0 ||
	    (rc = read_whole(mountinfo_path ? mountinfo_path : "/proc/self/mountinfo", &mi, err)) < 0) {
		free(pcg);
		return rc;
	}
	char cpu[4096], mem[4096], blk[4096], buf[256];
	bool v2c, v2m, v2b;
	if ((rc = stats_cgroup_dir(pcg, mi, "cpuacct", cpu, sizeof(cpu), &v2c, err)) < 0 ||
	    (rc = stats_cgroup_dir(pcg, mi, "memory", mem, sizeof(mem), &v2m, err)) < 0 ||
	    (rc = stats_cgroup_dir(pcg, mi, "blkio", blk, sizeof(blk), &v2b, err)) < 0)
		goto out;
	cg->v2 = v2m;
	cg->fd_cpu = open_ro(cpu, v2c ? "cpu.stat" : "cpuacct.usage");
	cg->fd_mem = open_ro(mem, v2m ? "memory.current" : "memory.usage_in_bytes");
	cg->fd_memstat = open_ro(mem, "memory.stat");
	if (cg->fd_cpu < 0 || cg->fd_mem < 0 || cg->fd_memstat < 0) {
		rc = terr_set(err, errno ? errno : ENOENT, "cannot open the cgroup files of %s and %s: %s", cpu, mem,
			      strerror(errno));
		goto out;
	}
	/* Optional: a host without the io controller still has CPU and
	 * memory figures. */
	cg->fd_io = open_ro(blk, v2b ? "io.stat" : "blkio.throttle.io_service_bytes");
	snprintf(path, sizeof(path), "%s/%d/net", proc_root, pid);
	cg->fd_net = open_ro(path, "dev");
	cg->fd_tcp = open_ro(path, "tcp");
	cg->fd_tcp6 = open_ro(path, "tcp6");
	/* The limits do not change while a container runs: read once. */
	int64_t v = 0, q = 0, p = 0;
	if (read_small(mem, v2m ? "memory.max" : "memory.limit_in_bytes", buf, sizeof(buf)) == 0 &&
	    stats_parse_value(buf, &v) == 0 && v > 0 && v < (INT64_C(1) << 60))
		cg->mem_limit = v;
	if (v2c) {
		if (read_small(cpu, "cpu.max", buf, sizeof(buf)) == 0 && stats_parse_cpu_max(buf, &q, &p) == 0 && q > 0)
			cg->cpu_limit_m = q * 1000 / p;
	} else {
		/* v1: the cpu controller shares the cpuacct hierarchy on
		 * every distribution ("cpu,cpuacct"); its own lookup covers
		 * the others. */
		char cdir[4096];
		bool v2x;
		struct terr e2 = {0};
		if (stats_cgroup_dir(pcg, mi, "cpu", cdir, sizeof(cdir), &v2x, &e2) == 0 &&
		    read_small(cdir, "cpu.cfs_quota_us", buf, sizeof(buf)) == 0 && stats_parse_value(buf, &q) == 0 &&
		    q > 0 && read_small(cdir, "cpu.cfs_period_us", buf, sizeof(buf)) == 0 &&
		    stats_parse_value(buf, &p) == 0 && p > 0)
			cg->cpu_limit_m = q * 1000 / p;
	}
	rc = 0;
out:
	if (rc < 0)
		stats_cg_close(cg);
	free(pcg);
	free(mi);
	return rc;
}

/* Established connections to port in the whole tcp or tcp6 file at fd,
 * read in pieces of whole lines (it may be long). */
/* Runs fn over the file at fd a piece at a time, each piece whole lines
 * (a line longer than the buffer ends the reading). */
static void tcp_file_scan(int fd, void (*fn)(const char *text, void *ctx), void *ctx)
{
	if (fd < 0)
		return;
	char buf[8192];
	off_t off = 0;
	for (;;) {
		ssize_t r = pread(fd, buf, sizeof(buf) - 1, off);
		if (r <= 0)
			break;
		buf[r] = '\0';
		char *end = strrchr(buf, '\n');
		if (!end)
			break;
		end[1] = '\0';
		fn(buf, ctx);
		off += end + 1 - buf;
	}
}

struct inbound_count {
	struct stats_ports ports;
	int n;
};

static void scan_listening(const char *text, void *ctx)
{
	stats_listening(text, &((struct inbound_count *)ctx)->ports);
}

static void scan_inbound(const char *text, void *ctx)
{
	struct inbound_count *c = ctx;
	c->n += stats_count_inbound(text, &c->ports);
}

/* The connections clients hold to the session: its listeners first (a
 * dual-stack one is in tcp6 while its IPv4 clients may be in tcp). */
static int count_conns(const struct stats_cg *cg)
{
	struct inbound_count c = {0};
	tcp_file_scan(cg->fd_tcp, scan_listening, &c);
	tcp_file_scan(cg->fd_tcp6, scan_listening, &c);
	tcp_file_scan(cg->fd_tcp, scan_inbound, &c);
	tcp_file_scan(cg->fd_tcp6, scan_inbound, &c);
	return c.n;
}

int stats_cg_read(struct stats_cg *cg, int64_t mono_ns, int app_port, struct stats_reading *out,
		  struct terr *err)
{
	/* memory.stat is the largest file (about 1.5 KiB on v2, more on v1). */
	char buf[8192];
	memset(out, 0, sizeof(*out));
	out->cpu_cores = -1;
	int64_t v = 0;
	if (pread_all(cg->fd_cpu, buf, sizeof(buf)) < 0)
		return terr_set(err, errno, "cannot read the CPU usage: %s", strerror(errno));
	if (cg->v2 ? stats_parse_key(buf, "usage_usec", &v) : stats_parse_value(buf, &v))
		return terr_set(err, EINVAL, "unexpected CPU usage file");
	out->cpu_ns = cg->v2 ? v * 1000 : v;
	if (cg->prev_cpu_ns >= 0 && mono_ns > cg->prev_mono_ns)
		out->cpu_cores = (double)(out->cpu_ns - cg->prev_cpu_ns) / (double)(mono_ns - cg->prev_mono_ns);
	if (out->cpu_cores < 0 && cg->prev_cpu_ns >= 0)
		out->cpu_cores = 0;
	cg->prev_cpu_ns = out->cpu_ns;
	cg->prev_mono_ns = mono_ns;
	if (pread_all(cg->fd_mem, buf, sizeof(buf)) < 0 || stats_parse_value(buf, &v) < 0)
		return terr_set(err, EIO, "cannot read the memory usage");
	out->mem_bytes = v;
	/* What docker stats shows: the page cache the kernel can drop at
	 * once (inactive file pages) does not count as used. */
	if (pread_all(cg->fd_memstat, buf, sizeof(buf)) >= 0 &&
	    stats_parse_key(buf, cg->v2 ? "inactive_file" : "total_inactive_file", &v) == 0 && v <= out->mem_bytes)
		out->mem_bytes -= v;
	out->mem_limit = cg->mem_limit;
	out->cpu_limit_m = cg->cpu_limit_m;
	if (cg->fd_io >= 0 && pread_all(cg->fd_io, buf, sizeof(buf)) >= 0) {
		if (cg->v2)
			stats_parse_io_v2(buf, &out->blk_read, &out->blk_write);
		else
			stats_parse_blkio_v1(buf, &out->blk_read, &out->blk_write);
	}
	if (cg->fd_net >= 0 && pread_all(cg->fd_net, buf, sizeof(buf)) >= 0)
		stats_parse_netdev(buf, &out->net_rx, &out->net_tx);
	if (app_port > 0 && (!cg->conns_ns || mono_ns - cg->conns_ns >= STATS_CONN_CHECK_NS)) {
		cg->conns = count_conns(cg);
		cg->conns_ns = mono_ns;
	}
	out->app_conns = app_port > 0 ? cg->conns : 0;
	return 0;
}
