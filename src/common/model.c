#include "common/model.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "common/units.h"

#define SESSION_STATE_NAME(name) #name,
static const char *const state_names[] = {SESSION_STATES(SESSION_STATE_NAME)};

const char *session_status_name(enum session_status s)
{
	return (s >= 0 && s < SS__COUNT) ? state_names[s] : "UNKNOWN";
}

int session_status_parse(const char *name)
{
	for (int i = 0; i < SS__COUNT; i++)
		if (!strcmp(state_names[i], name))
			return i;
	return -1;
}

void res_describe(const struct res *r, char *buf, size_t n)
{
	char cpu[32], mem[32], fgpu[32];
	units_format_milli(r->cpu_m, cpu, sizeof(cpu));
	units_format_size(r->mem, mem, sizeof(mem));
	if (r->fgpu_m) {
		units_format_milli(r->fgpu_m, fgpu, sizeof(fgpu));
		snprintf(buf, n, "%s CPU, %s, %s fGPU", cpu, mem, fgpu);
	} else {
		snprintf(buf, n, "%s CPU, %s", cpu, mem);
	}
}

static int is_name_char(char c)
{
	return isalnum((unsigned char)c) || c == '.' || c == '_' || c == '-';
}

int model_validate_name(const char *name, const char *what, struct terr *err)
{
	size_t len = strlen(name);
	if (len == 0 || len > 63)
		return terr_set(err, EINVAL, "%s must be 1 to 63 characters (got %zu)", what, len);
	if (!isalnum((unsigned char)name[0]) || !isascii((unsigned char)name[0]))
		return terr_set(err, EINVAL, "%s '%s' must start with a letter or digit", what, name);
	for (size_t i = 1; i < len; i++)
		if (!isascii((unsigned char)name[i]) || !is_name_char(name[i]))
			return terr_set(err, EINVAL,
					"%s '%s' may contain only letters, digits, '.', '_' and '-'", what, name);
	return 0;
}

int model_validate_folder_name(const char *name, struct terr *err)
{
	size_t len = strlen(name);
	if (len == 0 || len > MODEL_FOLDER_NAME_MAX - 1)
		return terr_set(err, EINVAL, "folder name must be 1 to %d characters (got %zu)",
				MODEL_FOLDER_NAME_MAX - 1, len);
	if (!strcmp(name, ".") || !strcmp(name, ".."))
		return terr_set(err, EINVAL, "folder name may not be '.' or '..'");
	for (size_t i = 0; i < len; i++)
		if (!isascii((unsigned char)name[i]) || !is_name_char(name[i]))
			return terr_set(err, EINVAL,
					"folder name '%s' may contain only letters, digits, '.', '_' and '-'", name);
	return 0;
}

int model_validate_mount_target(const char *path, struct terr *err)
{
	/* Directories a folder would hide or take over: the system's, the
	 * runner's and the fGPU files' (agent.h, fgpu_contract.h). */
	static const char *const refused[] = {"/proc", "/sys", "/dev", "/etc", "/usr", "/bin", "/sbin", "/lib",
					      "/lib64", "/boot", "/run", "/var/run", "/opt/tessera", NULL};
	size_t len = strlen(path);
	if (path[0] != '/')
		return terr_set(err, EINVAL, "mount path '%.80s' must be absolute", path);
	if (len >= MODEL_MOUNT_TARGET_MAX)
		return terr_set(err, EINVAL, "mount path is longer than %d bytes", MODEL_MOUNT_TARGET_MAX - 1);
	if (len == 1)
		return terr_set(err, EINVAL, "a folder cannot be mounted at /");
	if (path[len - 1] == '/' || strstr(path, "//"))
		return terr_set(err, EINVAL, "mount path '%s' may not end with '/' or contain '//'", path);
	for (const char *p = path; p; p = strchr(p + 1, '/')) {
		const char *seg = p + 1;
		size_t sl = strcspn(seg, "/");
		if ((sl == 1 && seg[0] == '.') || (sl == 2 && seg[0] == '.' && seg[1] == '.'))
			return terr_set(err, EINVAL, "mount path '%s' may not contain '.' or '..' parts", path);
	}
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)path[i] < 0x20 || path[i] == ':' || path[i] == ',' || path[i] == 0x7f)
			return terr_set(err, EINVAL, "mount path '%.80s' may not contain control characters, ':' or ','",
					path);
	if (!strcmp(path, "/home/work") || !strcmp(path, "/home"))
		return terr_set(err, EINVAL, "a folder cannot be mounted at %s (the work user's home stays its own); "
				"use /home/work/NAME", path);
	for (int i = 0; refused[i]; i++) {
		size_t rl = strlen(refused[i]);
		if (!strncmp(path, refused[i], rl) && (path[rl] == '\0' || path[rl] == '/'))
			return terr_set(err, EINVAL, "a folder cannot be mounted in %s (a system directory)", refused[i]);
	}
	return 0;
}

void model_default_mount_target(const char *name, char *out, size_t n)
{
	snprintf(out, n, "/home/work/%s", name);
}

int model_parse_mount_spec(const char *spec, struct model_mount *out, struct terr *err)
{
	memset(out, 0, sizeof(*out));
	const char *c1 = strchr(spec, ':');
	size_t nl = c1 ? (size_t)(c1 - spec) : strlen(spec);
	if (nl >= sizeof(out->name))
		return terr_set(err, EINVAL, "mount '%.80s': folder name is longer than %d characters", spec,
				MODEL_FOLDER_NAME_MAX - 1);
	memcpy(out->name, spec, nl);
	out->name[nl] = '\0';
	if (model_validate_folder_name(out->name, err) < 0)
		return terr_prefix(err, "mount '%.80s'", spec);
	if (!c1)
		return 0;
	const char *rest = c1 + 1;
	/* NAME:ro, NAME:PATH, NAME:PATH:ro */
	if (!strcmp(rest, "ro")) {
		out->ro = true;
		return 0;
	}
	const char *c2 = strrchr(rest, ':');
	size_t pl = strlen(rest);
	if (c2) {
		if (strcmp(c2 + 1, "ro") && strcmp(c2 + 1, "rw"))
			return terr_set(err, EINVAL, "mount '%.80s' must be NAME[:PATH][:ro]", spec);
		out->ro = !strcmp(c2 + 1, "ro");
		pl = (size_t)(c2 - rest);
	}
	if (pl >= sizeof(out->target))
		return terr_set(err, EINVAL, "mount '%.80s': path is longer than %d bytes", spec, MODEL_MOUNT_TARGET_MAX - 1);
	memcpy(out->target, rest, pl);
	out->target[pl] = '\0';
	if (model_validate_mount_target(out->target, err) < 0)
		return terr_prefix(err, "mount '%.80s'", spec);
	return 0;
}

int model_storage_hosts_parse(const char *spec, struct model_storage_host *hosts, size_t max, size_t *n,
			    struct terr *err)
{
	*n = 0;
	if (!spec || !*spec)
		return terr_set(err, EINVAL, "storage_hosts is empty: give NAME:PATH[,NAME:PATH...]");
	const char *p = spec;
	while (*p) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		char item[1200];
		if (len >= sizeof(item))
			return terr_set(err, EINVAL, "storage_hosts: an entry is too long");
		memcpy(item, p, len);
		item[len] = '\0';
		char *colon = strchr(item, ':');
		if (!colon)
			return terr_set(err, EINVAL, "storage_hosts: '%s' must be NAME:PATH (e.g. local:/var/lib/tessera/folders)",
					item);
		*colon = '\0';
		const char *name = item, *path = colon + 1;
		if (model_validate_name(name, "storage host name", err) < 0)
			return terr_prefix(err, "storage_hosts");
		if (path[0] != '/')
			return terr_set(err, EINVAL, "storage_hosts: path of %s must be absolute (got '%s')", name, path);
		size_t pl = strlen(path);
		while (pl > 1 && path[pl - 1] == '/')
			pl--;
		if (pl == 1)
			return terr_set(err, EINVAL, "storage_hosts: host %s may not be the root directory", name);
		if (pl >= sizeof(hosts[0].path))
			return terr_set(err, EINVAL, "storage_hosts: path of %s is too long", name);
		if (strstr(path, "/../") || strstr(path, "/./") || (pl >= 3 && !strncmp(path + pl - 3, "/..", 3)))
			return terr_set(err, EINVAL, "storage_hosts: path of %s may not contain '.' or '..' parts", name);
		for (size_t i = 0; i < *n; i++)
			if (!strcmp(hosts[i].name, name))
				return terr_set(err, EINVAL, "storage_hosts: host %s is declared twice", name);
		if (*n >= max)
			return terr_set(err, EINVAL, "storage_hosts: at most %zu hosts", max);
		/* model_validate_name kept it under 64 bytes. */
		memcpy(hosts[*n].name, name, strlen(name) + 1);
		memcpy(hosts[*n].path, path, pl);
		hosts[*n].path[pl] = '\0';
		(*n)++;
		if (!end)
			break;
		p = end + 1;
		if (!*p)
			return terr_set(err, EINVAL, "storage_hosts: trailing ','");
	}
	return 0;
}

