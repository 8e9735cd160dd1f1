/* Fuzz target: the live-usage parsers of agent/stats.c over any bytes as
 * the kernel's files would be (a container can change nothing of them,
 * but a kernel of another version writes other lines): the cgroup path
 * lookup with the input as /proc/PID/cgroup and as mountinfo, and every
 * file parser. Nothing may crash; a path found fits its buffer. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/stats.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	/* The first line is the cgroup file, the rest the mount table. */
	char *nl = strchr(s, '\n');
	const char *mi = nl ? nl + 1 : "";
	char cg[4096];
	size_t cl = nl ? (size_t)(nl - s) + 1 : strlen(s);
	if (cl >= sizeof(cg))
		cl = sizeof(cg) - 1;
	memcpy(cg, s, cl);
	cg[cl] = '\0';
	char out[256];
	bool v2;
	struct terr err = {0};
	static const char *const ctl[] = {"cpuacct", "memory", "blkio", "cpu"};
	for (size_t i = 0; i < 4; i++) {
		if (stats_cgroup_dir(cg, mi, ctl[i], out, sizeof(out), &v2, &err) == 0 && strlen(out) >= sizeof(out))
			abort();
		stats_cgroup_dir(s, s, ctl[i], out, sizeof(out), &v2, &err);
	}
	int64_t a = 0, b = 0;
	stats_parse_value(s, &a);
	stats_parse_key(s, "usage_usec", &a);
	stats_parse_key(s, "inactive_file", &a);
	stats_parse_cpu_max(s, &a, &b);
	stats_parse_io_v2(s, &a, &b);
	stats_parse_blkio_v1(s, &a, &b);
	stats_parse_netdev(s, &a, &b);
	struct stats_ports ports = {0};
	stats_listening(s, &ports);
	if (ports.n < 0 || ports.n > STATS_MAX_LISTEN || stats_count_inbound(s, &ports) < 0)
		abort();
	free(s);
	return 0;
}
