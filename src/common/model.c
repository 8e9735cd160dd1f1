#include "common/model.h"

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
