/* The fGPU limits (fgpu_contract.h for the file format and where they
 * come from). Parsed once per process by the shim and by gpu-info. */
#ifndef TESSERA_GPUABI_CONF_H
#define TESSERA_GPUABI_CONF_H

#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"
#include "gpuabi/fgpu_contract.h"

#define FGPU_UNLIMITED INT64_MAX

struct fgpu_conf_dev {
	char uuid[96];          /* "" when the file gives none */
	int64_t memory_limit;   /* bytes; FGPU_UNLIMITED when none */
	int sm_limit_percent;   /* 1..100; 0: the session-wide one applies */
};

struct fgpu_conf {
	bool enabled;           /* false: pass everything through */
	bool from_agent;        /* FGPU_CONF_PATH was read: env can only tighten */
	int ndev;               /* listed devices; 0: all_limit applies to all */
	struct fgpu_conf_dev dev[FGPU_MAX_DEVICES];
	int64_t all_limit;      /* FGPU_UNLIMITED when none */
	int sm_limit_percent;   /* 1..100, for devices without their own */
	int64_t context_overhead;
	bool driver_clock;
	char fgpu[32];          /* informational */
	char region[256];
	char turn_dir[256];     /* the node's GPU turn files (turn.h) */
	int64_t turn_quantum_ns; /* 0: turn.h's default */
};

/* Parses limits-file text into *conf (caller-owned; defaults first). */
int fgpu_conf_parse(const char *text, struct fgpu_conf *conf, struct terr *err);

/* Resolves the limits as fgpu_contract.h describes (file, env overrides). */
int fgpu_conf_load(struct fgpu_conf *conf, struct terr *err);

/* Limit of listed device index i, or of any device when none are listed. */
int64_t fgpu_conf_limit(const struct fgpu_conf *conf, int i);

/* Compute share (percent) of device index i: its own when the file gives
 * one, else the session-wide one. */
int fgpu_conf_sm_limit(const struct fgpu_conf *conf, int i);

/* Whether any device's compute is limited (some share below 100). */
bool fgpu_conf_sm_limited(const struct fgpu_conf *conf);

/* Index in the file of the device with this UUID and CUDA/NVML ordinal:
 * by UUID when the file names devices by UUID, else by ordinal; -1 when
 * the file does not list it. */
int fgpu_conf_index(const struct fgpu_conf *conf, const char *uuid, int ordinal);

#endif
