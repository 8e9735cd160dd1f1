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
