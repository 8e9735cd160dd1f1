/* Mock GPU devices shared by the mock libcuda.so.1 and libnvidia-ml.so.1.
 *
 * Spec: TESSERA_MOCK_GPUS="COUNTxMEM[:SMS],..." (e.g. "2x80GiB:132,1x8GiB";
 * SMS defaults to 108; MEM as units_parse_size reads it). When that
 * variable is unset the spec is read from the file named by
 * TESSERA_MOCK_GPUS_FILE, else from MOCK_SPEC_PATH (the agent mounts it);
 * no spec means no devices.
 *
 * Device memory in use is tracked per process in a small state file so
 * that every process of a session sees the same device-wide usage, as on a
 * real GPU (slots are keyed by pid, so the file is not shared across PID
 * namespaces): TESSERA_MOCK_STATE names it, else
 * MOCK_STATE_DIR/gpus.state is used when that directory exists, else usage
 * is private to the process. Slots of dead processes are dropped, as the
 * real driver frees a process's memory when it exits. */
#ifndef TESSERA_GPU_MOCK_MOCKSPEC_H
#define TESSERA_GPU_MOCK_MOCKSPEC_H

#include <stdint.h>

#include "common/err.h"

#define MOCK_MAX_DEVICES 16
#define MOCK_DEFAULT_SMS 108
#define MOCK_SPEC_PATH "/etc/tessera/mock-gpus"
#define MOCK_STATE_DIR "/run/tessera-mock"
#define MOCK_DEVICE_NAME "Tessera Mock GPU"
#define MOCK_DRIVER_VERSION "550.54.15"
#define MOCK_CUDA_VERSION 12040

struct mock_dev {
	int host_index;             /* index in the host's full spec */
	int64_t mem;                /* bytes */
	int sms;
	unsigned char uuid[16];
	char uuid_str[48];          /* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" */
};

struct mock_spec {
	int count;
	uint64_t hash;              /* of the normalized spec */
	struct mock_dev dev[MOCK_MAX_DEVICES];
};

/* Parses a spec string into *spec (caller-owned). */
int mock_spec_parse(const char *s, struct mock_spec *spec, struct terr *err);

/* Keeps only the devices whose UUIDs are in the comma-separated list, in
 * spec order, as a container sees only the device nodes mounted into it
 * (their UUIDs and usage keys stay the host's). -EINVAL for an unknown
 * UUID. */
int mock_spec_filter_visible(struct mock_spec *spec, const char *uuids, struct terr *err);

/* Loads the spec from the environment or files (see above). A spec file
 * may carry a second line "visible = UUID,UUID", and TESSERA_MOCK_VISIBLE
 * does the same from the environment: the session's devices only. */
int mock_spec_load(struct mock_spec *spec, struct terr *err);

/* Device-wide usage. mock_usage_init must run once (under the caller's
 * lock) before the others. mock_usage_add adds delta bytes (negative to
 * free) for this process; it fails with -ENOMEM, changing nothing, when
 * the device's total would be exceeded. */
void mock_usage_init(const struct mock_spec *spec);
int mock_usage_add(int dev, int64_t delta);
int64_t mock_usage_get(int dev);
/* The processes holding memory on dev: up to max (pid, bytes) pairs into
 * pids/bytes; returns how many there are (may be more than max). */
int mock_usage_processes(int dev, int32_t *pids, int64_t *bytes, int max);
/* Adds ns of simulated kernel time run on dev (a launch, mock_submit). */
void mock_usage_busy(int dev, uint64_t ns);
/* The simulated kernel time run on dev by the session's processes, ever
 * (0 with private usage, where no other process's is known). */
uint64_t mock_usage_busy_get(int dev);
/* For the agent, from the host: a session's state file open at fd, read
 * with pread: the bytes its processes hold and the simulated kernel time
 * run, per host device index. -ENODATA for a file of another layout (or
 * none yet). */
int mock_usage_read_fd(int fd, int64_t used[MOCK_MAX_DEVICES], uint64_t busy_ns[MOCK_MAX_DEVICES]);

#endif
