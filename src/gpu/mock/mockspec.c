#include "gpu/mock/mockspec.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/units.h"
#include "gpuabi/procinfo.h"
#include "gpuabi/uuid.h"

static uint64_t mock_fnv1a(uint64_t h, const void *data, size_t n)
{
	const unsigned char *p = data;
	for (size_t i = 0; i < n; i++) {
		h ^= p[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

/* UUID bytes from (spec hash, index): stable for a given spec, distinct
 * per device, formatted as an RFC 4122 version-4-shaped UUID. */
static void mock_make_uuid(struct mock_dev *d, uint64_t spec_hash, int index)
{
	uint64_t h1 = mock_fnv1a(0xcbf29ce484222325ULL, &spec_hash, sizeof(spec_hash));
	h1 = mock_fnv1a(h1, &index, sizeof(index));
	uint64_t h2 = mock_fnv1a(h1 ^ 0x5bd1e9955bd1e995ULL, "tessera-mock-gpu", 16);
	for (int i = 0; i < 8; i++) {
		d->uuid[i] = (unsigned char)(h1 >> (8 * i));
		d->uuid[8 + i] = (unsigned char)(h2 >> (8 * i));
	}
	d->uuid[6] = (unsigned char)((d->uuid[6] & 0x0f) | 0x40);
	d->uuid[8] = (unsigned char)((d->uuid[8] & 0x3f) | 0x80);
	gpuabi_uuid_format(d->uuid, d->uuid_str, sizeof(d->uuid_str));
}

int mock_spec_parse(const char *s, struct mock_spec *spec, struct terr *err)
{
	memset(spec, 0, sizeof(*spec));
	uint64_t hash = 0xcbf29ce484222325ULL;
	const char *p = s;
	while (*p == ' ' || *p == '\t')
		p++;
	if (*p == '\0' || *p == '\n')
		return 0;   /* empty spec: no devices */
	for (;;) {
		char item[128];
		const char *end = strchr(p, ',');
		size_t n = end ? (size_t)(end - p) : strcspn(p, "\r\n");
		if (n == 0 || n >= sizeof(item))
			return terr_set(err, EINVAL, "mock GPU spec: bad item in \"%s\"", s);
		memcpy(item, p, n);
		item[n] = '\0';
		char *x = strchr(item, 'x');
		if (!x)
			x = strchr(item, 'X');
		if (!x)
			return terr_set(err, EINVAL, "mock GPU spec: \"%s\" is not COUNTxMEM[:SMS]", item);
		*x = '\0';
		char *sms_s = strchr(x + 1, ':');
		if (sms_s)
			*sms_s++ = '\0';
		char *e;
		long count = strtol(item, &e, 10);
		if (e == item || *e || count < 1 || count > MOCK_MAX_DEVICES)
			return terr_set(err, EINVAL, "mock GPU spec: bad count \"%s\"", item);
		int64_t mem;
		int rc = units_parse_size(x + 1, &mem, err);
		if (rc < 0)
			return terr_prefix(err, "mock GPU spec");
		if (mem <= 0)
			return terr_set(err, EINVAL, "mock GPU spec: memory must be positive");
		long sms = MOCK_DEFAULT_SMS;
		if (sms_s) {
			sms = strtol(sms_s, &e, 10);
			if (e == sms_s || *e || sms < 1 || sms > 100000)
				return terr_set(err, EINVAL, "mock GPU spec: bad SM count \"%s\"", sms_s);
		}
		if (spec->count + count > MOCK_MAX_DEVICES)
			return terr_set(err, EINVAL, "mock GPU spec: more than %d devices", MOCK_MAX_DEVICES);
		for (long i = 0; i < count; i++) {
			struct mock_dev *d = &spec->dev[spec->count++];
			d->mem = mem;
			d->sms = (int)sms;
			hash = mock_fnv1a(hash, &mem, sizeof(mem));
			hash = mock_fnv1a(hash, &sms, sizeof(sms));
		}
		if (!end)
			break;
		p = end + 1;
	}
	spec->hash = hash;
	for (int i = 0; i < spec->count; i++) {
		mock_make_uuid(&spec->dev[i], hash, i);
		spec->dev[i].host_index = i;
	}
	return 0;
}

int mock_spec_filter_visible(struct mock_spec *spec, const char *uuids, struct terr *err)
{
	bool keep[MOCK_MAX_DEVICES] = {0};
	const char *p = uuids;
	while (*p) {
		while (*p == ' ' || *p == ',')
			p++;
		size_t n = strcspn(p, ", \n");
		if (n == 0)
			break;
		int found = -1;
		for (int i = 0; i < spec->count; i++)
			if (strlen(spec->dev[i].uuid_str) == n && !strncmp(spec->dev[i].uuid_str, p, n))
				found = i;
		if (found < 0)
			return terr_set(err, EINVAL, "visible device %.*s is not in the mock spec", (int)n, p);
		keep[found] = true;
		p += n;
	}
	int k = 0;
	for (int i = 0; i < spec->count; i++)
		if (keep[i])
			spec->dev[k++] = spec->dev[i];
	spec->count = k;
	return 0;
}

static int mock_apply_env_visible(struct mock_spec *spec, struct terr *err)
{
	const char *vis = getenv("TESSERA_MOCK_VISIBLE");
	return vis ? mock_spec_filter_visible(spec, vis, err) : 0;
}

int mock_spec_load(struct mock_spec *spec, struct terr *err)
{
	const char *env = getenv("TESSERA_MOCK_GPUS");
	if (env) {
		int rc = mock_spec_parse(env, spec, err);
		return rc < 0 ? rc : mock_apply_env_visible(spec, err);
	}
	const char *path = getenv("TESSERA_MOCK_GPUS_FILE");
	if (!path || !*path)
		path = MOCK_SPEC_PATH;
	FILE *f = fopen(path, "re");
	if (!f) {
		memset(spec, 0, sizeof(*spec));
		return 0;
	}
	char line[1024];
	int rc = 0;
	bool parsed = false;
	memset(spec, 0, sizeof(*spec));
	while (rc == 0 && fgets(line, sizeof(line), f)) {
		if (line[0] == '#' || line[0] == '\n')
			continue;
		if (!parsed) {
			rc = mock_spec_parse(line, spec, err);
			parsed = true;
		} else if (!strncmp(line, "visible", 7)) {
			const char *eq = strchr(line, '=');
			rc = eq ? mock_spec_filter_visible(spec, eq + 1, err)
				: terr_set(err, EINVAL, "mock spec: 'visible' needs '= UUID,...'");
		}
	}
	fclose(f);
	return rc < 0 ? rc : mock_apply_env_visible(spec, err);
}

/* ---- device-wide usage ------------------------------------------------ */

#define MOCK_STATE_MAGIC 0x4d4f434bU   /* "MOCK" */
#define MOCK_STATE_VERSION 3
#define MOCK_STATE_SLOTS 256

struct mock_slot {
	int32_t pid;
	int32_t pad;
	uint64_t start;
	int64_t used[MOCK_MAX_DEVICES];
};

struct mock_state {
	uint32_t magic;
	uint32_t version;
	uint64_t spec_hash;
	/* The PID namespace of the processes in the slots (0: none yet).
	 * Only a process of that namespace can tell a dead slot: the agent
	 * reads a session's usage from the host, where the same pids are
	 * other processes or none. */
	uint64_t pid_ns;
	/* Simulated kernel time run on each host device by the session's
	 * processes, ever (mock_usage_busy): the agent's utilisation figure
	 * is its growth over wall time. Added atomically, without the flock. */
	uint64_t busy_ns[MOCK_MAX_DEVICES];
	struct mock_slot slots[MOCK_STATE_SLOTS];
};

static const struct mock_spec *mock_usage_spec;
static struct mock_state *mock_state;   /* mapped file, or NULL */
static int mock_state_fd = -1;
static int64_t mock_private_used[MOCK_MAX_DEVICES];

static uint64_t mock_pid_ns(void);

void mock_usage_init(const struct mock_spec *spec)
{
	mock_usage_spec = spec;
	const char *path = getenv("TESSERA_MOCK_STATE");
	char def[256];
	/* (no stat family here: see gpuabi/glibc_compat.h) */
	if (!path || !*path) {
		int dir = open(MOCK_STATE_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dir < 0)
			return;
		close(dir);
		snprintf(def, sizeof(def), "%s/gpus.state", MOCK_STATE_DIR);
		path = def;
	}
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
	if (fd < 0)
		return;   /* private usage: the mock still works, less faithfully */
	off_t size = -1;
	if (flock(fd, LOCK_EX) != 0 || (size = lseek(fd, 0, SEEK_END)) < 0 ||
	    (size < (off_t)sizeof(struct mock_state) &&
	     ftruncate(fd, sizeof(struct mock_state)) != 0)) {
		close(fd);
		return;
	}
	void *m = mmap(NULL, sizeof(struct mock_state), PROT_READ | PROT_WRITE,
		       MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) {
		flock(fd, LOCK_UN);
		close(fd);
		return;
	}
	struct mock_state *s = m;
	if (s->magic == MOCK_STATE_MAGIC && s->version == MOCK_STATE_VERSION &&
	    s->spec_hash != spec->hash && s->pid_ns && s->pid_ns != mock_pid_ns()) {
		/* Another namespace's usage under another spec: an observer
		 * must not wipe it; this process keeps its usage private. */
		munmap(m, sizeof(struct mock_state));
		flock(fd, LOCK_UN);
		close(fd);
		return;
	}
	if (s->magic != MOCK_STATE_MAGIC || s->version != MOCK_STATE_VERSION ||
	    s->spec_hash != spec->hash) {
		/* Another spec (or a fresh file): the old usage means nothing. */
		memset(s, 0, sizeof(*s));
		s->version = MOCK_STATE_VERSION;
		s->spec_hash = spec->hash;
		s->magic = MOCK_STATE_MAGIC;
	}
	flock(fd, LOCK_UN);
	mock_state = s;
	mock_state_fd = fd;
}

/* Read once: a process keeps its PID namespace (fork children too). */
static uint64_t mock_pid_ns(void)
{
	static uint64_t ns;
	if (!ns)
		ns = fgpu_proc_pid_ns(0);
	return ns;
}

/* Under flock: drops dead processes (when this process can judge them)
 * and returns this process's slot (NULL when the table is full). */
static struct mock_slot *mock_state_slot(bool create)
{
	pid_t me = getpid();
	uint64_t ns = mock_pid_ns();
	if (create && mock_state->pid_ns == 0)
		mock_state->pid_ns = ns;
	/* An observer from another namespace reads, and takes no slot. */
	bool judge = !(ns && mock_state->pid_ns && ns != mock_state->pid_ns);
	if (!judge && create)
		return NULL;
	struct mock_slot *mine = NULL, *free_slot = NULL;
	for (int i = 0; i < MOCK_STATE_SLOTS; i++) {
		struct mock_slot *sl = &mock_state->slots[i];
		if (sl->pid == me && judge) {
			mine = sl;
		} else if (judge && sl->pid != 0 && !fgpu_proc_alive(sl->pid, sl->start)) {
			memset(sl, 0, sizeof(*sl));
		}
		if (sl->pid == 0 && !free_slot)
			free_slot = sl;
	}
	if (mine || !create || !free_slot)
		return mine;
	free_slot->pid = me;
	free_slot->start = fgpu_proc_start_time(me);
	return free_slot;
}

static int64_t mock_state_total(int dev)
{
	int64_t sum = 0;
	for (int i = 0; i < MOCK_STATE_SLOTS; i++)
		if (mock_state->slots[i].pid != 0)
			sum += mock_state->slots[i].used[dev];
	return sum;
}

int mock_usage_add(int dev, int64_t delta)
{
	int64_t total = mock_usage_spec->dev[dev].mem;
	int key = mock_usage_spec->dev[dev].host_index;  /* shared state is by host device */
	if (!mock_state) {
		if (delta > 0 && mock_private_used[dev] + delta > total)
			return -ENOMEM;
		mock_private_used[dev] += delta;
		return 0;
	}
	flock(mock_state_fd, LOCK_EX);
	int rc = 0;
	struct mock_slot *sl = mock_state_slot(delta > 0);
	if (!sl) {
		rc = delta > 0 ? -ENOMEM : 0;
	} else if (delta > 0 && mock_state_total(key) + delta > total) {
		rc = -ENOMEM;
	} else {
		sl->used[key] += delta;
		if (sl->used[key] < 0)
			sl->used[key] = 0;
	}
	flock(mock_state_fd, LOCK_UN);
	return rc;
}

int64_t mock_usage_get(int dev)
{
	if (!mock_state)
		return mock_private_used[dev];
	flock(mock_state_fd, LOCK_EX);
	mock_state_slot(false);
	int64_t sum = mock_state_total(mock_usage_spec->dev[dev].host_index);
	flock(mock_state_fd, LOCK_UN);
	return sum;
}

int mock_usage_processes(int dev, int32_t *pids, int64_t *bytes, int max)
{
	int n = 0;
	if (!mock_state) {
		if (mock_private_used[dev] > 0) {
			if (max > 0) {
				pids[0] = (int32_t)getpid();
				bytes[0] = mock_private_used[dev];
			}
			n = 1;
		}
		return n;
	}
	int key = mock_usage_spec->dev[dev].host_index;
	flock(mock_state_fd, LOCK_EX);
	mock_state_slot(false);   /* drops the dead */
	for (int i = 0; i < MOCK_STATE_SLOTS; i++) {
		const struct mock_slot *sl = &mock_state->slots[i];
		if (sl->pid == 0 || sl->used[key] <= 0)
			continue;
		if (n < max) {
			pids[n] = sl->pid;
			bytes[n] = sl->used[key];
		}
		n++;
	}
	flock(mock_state_fd, LOCK_UN);
	return n;
}

void mock_usage_busy(int dev, uint64_t ns)
{
	if (mock_state && ns)
		__atomic_fetch_add(&mock_state->busy_ns[mock_usage_spec->dev[dev].host_index], ns,
				   __ATOMIC_RELAXED);
}

uint64_t mock_usage_busy_get(int dev)
{
	if (!mock_state)
		return 0;
	return __atomic_load_n(&mock_state->busy_ns[mock_usage_spec->dev[dev].host_index], __ATOMIC_RELAXED);
}

int mock_usage_read_fd(int fd, int64_t used[MOCK_MAX_DEVICES], uint64_t busy_ns[MOCK_MAX_DEVICES])
{
	/* Read without the flock: the figures are for display, and a reader
	 * must never stall the session's processes. The header, then the
	 * slots in pieces (a few KiB of stack, not the whole 37 KiB). */
	struct mock_state head;
	size_t hlen = offsetof(struct mock_state, slots);
	ssize_t n = pread(fd, &head, hlen, 0);
	if (n < 0)
		return -errno;
	if ((size_t)n < hlen || head.magic != MOCK_STATE_MAGIC || head.version != MOCK_STATE_VERSION)
		return -ENODATA;
	for (int d = 0; d < MOCK_MAX_DEVICES; d++) {
		used[d] = 0;
		busy_ns[d] = head.busy_ns[d];
	}
	struct mock_slot part[32];
	for (int i = 0; i < MOCK_STATE_SLOTS; i += 32) {
		n = pread(fd, part, sizeof(part), (off_t)(hlen + (size_t)i * sizeof(struct mock_slot)));
		if (n < (ssize_t)sizeof(part))
			return n < 0 ? -errno : -ENODATA;
		for (int k = 0; k < 32; k++)
			if (part[k].pid != 0)
				for (int d = 0; d < MOCK_MAX_DEVICES; d++)
					used[d] += part[k].used[d];
	}
	return 0;
}
