#include "gpu/gpu.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"
#include "gpu/mock/mockspec.h"
#include "gpuabi/fgpu_contract.h"
#include "gpuabi/uuid.h"

int gpu_inventory_mock(const char *spec, struct gpu_inventory *inv, struct terr *err)
{
	struct mock_spec ms;
	memset(inv, 0, sizeof(*inv));
	if (mock_spec_parse(spec, &ms, err) < 0)
		return terr_prefix(err, "mock GPU spec '%s' (expected COUNTxMEM[:SMS],... e.g. 2x80GiB:132,1x8GiB)", spec);
	if (ms.count == 0)
		return terr_set(err, EINVAL, "mock GPU spec '%s' has no devices", spec);
	if (ms.count > GPU_MAX_DEVICES)
		return terr_set(err, EINVAL, "mock GPU spec '%s' has more than %d devices", spec, GPU_MAX_DEVICES);
	inv->mock = true;
	inv->n = ms.count;
	util_strlcpy(inv->mock_spec, spec, sizeof(inv->mock_spec));
	util_strlcpy(inv->driver_version, MOCK_DRIVER_VERSION, sizeof(inv->driver_version));
	for (int i = 0; i < ms.count; i++) {
		struct gpu_device *d = &inv->dev[i];
		d->index = i;
		d->memory = ms.dev[i].mem;
		d->sms = ms.dev[i].sms;
		d->minor = -1;
		util_strlcpy(d->uuid, ms.dev[i].uuid_str, sizeof(d->uuid));
		char size[32];
		snprintf(size, sizeof(size), "%lld GiB", (long long)(d->memory >> 30));
		snprintf(d->name, sizeof(d->name), "%s %s", MOCK_DEVICE_NAME, size);
	}
	return 0;
}

/* The few NVML/CUDA entry points discovery needs, by their ABI. */
typedef int (*nvml_init_fn)(void);
typedef int (*nvml_count_fn)(unsigned int *);
typedef int (*nvml_handle_fn)(unsigned int, void **);
typedef int (*nvml_str_fn)(void *, char *, unsigned int);
typedef int (*nvml_uint_fn)(void *, unsigned int *);
typedef int (*nvml_sysver_fn)(char *, unsigned int);
struct nvml_memory { unsigned long long total, free, used; };
typedef int (*nvml_mem_fn)(void *, struct nvml_memory *);
typedef int (*cu_init_fn)(unsigned int);
typedef int (*cu_count_fn)(int *);
typedef int (*cu_get_fn)(int *, int);
typedef int (*cu_attr_fn)(int *, int, int);
typedef int (*cu_uuid_fn)(unsigned char *, int);
#define CU_ATTR_MULTIPROCESSOR_COUNT 16

static void *open_lib(const char *lib_dir, const char *name)
{
	if (lib_dir) {
		char path[4096];
		if (snprintf(path, sizeof(path), "%s/%s", lib_dir, name) < (int)sizeof(path)) {
			void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
			if (h)
				return h;
		}
	}
	return dlopen(name, RTLD_NOW | RTLD_LOCAL);
}

/* SM counts come from CUDA; matched to NVML devices by UUID. */
static void fill_sms(const char *lib_dir, struct gpu_inventory *inv)
{
	void *h = open_lib(lib_dir, "libcuda.so.1");
	if (!h)
		return;
	cu_init_fn cu_init = (cu_init_fn)dlsym(h, "cuInit");
	cu_count_fn cu_count = (cu_count_fn)dlsym(h, "cuDeviceGetCount");
	cu_get_fn cu_get = (cu_get_fn)dlsym(h, "cuDeviceGet");
	cu_attr_fn cu_attr = (cu_attr_fn)dlsym(h, "cuDeviceGetAttribute");
	cu_uuid_fn cu_uuid = (cu_uuid_fn)dlsym(h, "cuDeviceGetUuid_v2");
	if (!cu_uuid)
		cu_uuid = (cu_uuid_fn)dlsym(h, "cuDeviceGetUuid");
	int count = 0;
	if (!cu_init || !cu_count || !cu_get || !cu_attr || !cu_uuid || cu_init(0) != 0 || cu_count(&count) != 0) {
		dlclose(h);
		return;
	}
	for (int i = 0; i < count; i++) {
		int dev, sms;
		unsigned char raw[16];
		char uuid[64];
		if (cu_get(&dev, i) != 0 || cu_attr(&sms, CU_ATTR_MULTIPROCESSOR_COUNT, dev) != 0 ||
		    cu_uuid(raw, dev) != 0)
			continue;
		gpuabi_uuid_format(raw, uuid, sizeof(uuid));
		for (int k = 0; k < inv->n; k++)
			if (!strcasecmp(inv->dev[k].uuid, uuid))
				inv->dev[k].sms = sms;
	}
	dlclose(h);
}

int gpu_inventory_nvml(const char *lib_dir, struct gpu_inventory *inv, struct terr *err)
{
	memset(inv, 0, sizeof(*inv));
	void *h = open_lib(lib_dir, "libnvidia-ml.so.1");
	if (!h)
		return 0;   /* no driver: a CPU-only node */
	nvml_init_fn init = (nvml_init_fn)dlsym(h, "nvmlInit_v2");
	nvml_init_fn shutdown = (nvml_init_fn)dlsym(h, "nvmlShutdown");
	nvml_count_fn count_fn = (nvml_count_fn)dlsym(h, "nvmlDeviceGetCount_v2");
	nvml_handle_fn handle_fn = (nvml_handle_fn)dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
	nvml_str_fn name_fn = (nvml_str_fn)dlsym(h, "nvmlDeviceGetName");
	nvml_str_fn uuid_fn = (nvml_str_fn)dlsym(h, "nvmlDeviceGetUUID");
	nvml_mem_fn mem_fn = (nvml_mem_fn)dlsym(h, "nvmlDeviceGetMemoryInfo");
	nvml_uint_fn minor_fn = (nvml_uint_fn)dlsym(h, "nvmlDeviceGetMinorNumber");
	nvml_sysver_fn ver_fn = (nvml_sysver_fn)dlsym(h, "nvmlSystemGetDriverVersion");
	if (!init || !count_fn || !handle_fn || !name_fn || !uuid_fn || !mem_fn) {
		dlclose(h);
		return terr_set(err, ENOSYS, "libnvidia-ml.so.1 lacks the NVML entry points discovery needs");
	}
	int rc = init();
	if (rc != 0) {
		dlclose(h);
		return terr_set(err, EIO, "nvmlInit_v2 failed with NVML error %d (is the NVIDIA driver loaded?)", rc);
	}
	unsigned int count = 0;
	count_fn(&count);
	if (count > GPU_MAX_DEVICES)
		count = GPU_MAX_DEVICES;
	if (ver_fn)
		ver_fn(inv->driver_version, sizeof(inv->driver_version));
	for (unsigned int i = 0; i < count; i++) {
		void *dev;
		struct gpu_device *d = &inv->dev[inv->n];
		struct nvml_memory mem = {0};
		unsigned int minor = 0;
		if (handle_fn(i, &dev) != 0)
			continue;
		d->index = (int)i;
		name_fn(dev, d->name, sizeof(d->name));
		uuid_fn(dev, d->uuid, sizeof(d->uuid));
		if (mem_fn(dev, &mem) == 0)
			d->memory = (int64_t)mem.total;
		d->minor = (minor_fn && minor_fn(dev, &minor) == 0) ? (int)minor : (int)i;
		inv->n++;
	}
	if (shutdown)
		shutdown();
	dlclose(h);
	fill_sms(lib_dir, inv);
	return 0;
}

extern char **environ;

/* environ without the variables in drop, plus the ones in add. */
static char **probe_env(const char *const *drop, char *const *add)
{
	size_t n = 0, k = 0, na = 0;
	while (environ[n])
		n++;
	while (add[na])
		na++;
	char **env = calloc(n + na + 1, sizeof(char *));
	if (!env)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		bool skip = false;
		for (size_t d = 0; drop[d] && !skip; d++) {
			size_t l = strlen(drop[d]);
			skip = !strncmp(environ[i], drop[d], l) && environ[i][l] == '=';
		}
		if (!skip)
			env[k++] = environ[i];
	}
	for (size_t i = 0; i < na; i++)
		env[k++] = add[i];
	return env;
}

/* Runs the probe (argv[0] is its path) with env and collects what it
 * prints, at most timeout_ms. 0 when it exited 0, else -errno with err
 * set. out gets a NUL-terminated copy of its output (truncated to n). */
static int probe_run(char *const argv[], char **env, int timeout_ms, char *out, size_t n,
		     struct terr *err)
{
	int fds[2];
	if (pipe2(fds, O_CLOEXEC) != 0)
		return terr_set(err, errno, "pipe");
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
	pid_t pid;
	int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, env);
	posix_spawn_file_actions_destroy(&fa);
	close(fds[1]);
	if (rc != 0) {
		close(fds[0]);
		return terr_set(err, rc, "cannot run %s", argv[0]);
	}
	size_t len = 0;
	int64_t deadline = util_mono_ms() + timeout_ms;
	bool timed_out = false;
	for (;;) {
		int64_t left = deadline - util_mono_ms();
		if (left <= 0) {
			timed_out = true;
			break;
		}
		struct pollfd pfd = {fds[0], POLLIN, 0};
		int pr = poll(&pfd, 1, (int)left);
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr <= 0) {
			timed_out = pr == 0;
			break;
		}
		ssize_t got = read(fds[0], out + len, n - 1 - len);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break;
		len += (size_t)got;
		if (len == n - 1)
			break;
	}
	close(fds[0]);
	out[len] = '\0';
	if (timed_out)
		kill(pid, SIGKILL);
	int status = 0;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (timed_out)
		return terr_set(err, ETIMEDOUT, "%s did not answer within %d ms", argv[0], timeout_ms);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return terr_set(err, EIO, "%s failed (the driver could not be asked)", argv[0]);
	return 0;
}

/* The probe's environment: this process's without what would pick its
 * driver or mock for it, plus lib_dir first on the library path (written
 * into libpath, which must outlive the result) and the mock's spec and
 * usage variables ("NAME=value", or NULL). */
static char **probe_env_for(const char *lib_dir, char *libpath, size_t n, char *spec_kv,
			    char *state_kv)
{
	static const char *const drop[] = {"LD_LIBRARY_PATH", "LD_PRELOAD", "TESSERA_MOCK_GPUS",
		"TESSERA_MOCK_STATE", "TESSERA_MOCK_VISIBLE", "TESSERA_MOCK_GPUS_FILE", NULL};
	char *add[4] = {0};
	int na = 0;
	if (lib_dir) {
		const char *old = getenv("LD_LIBRARY_PATH");
		snprintf(libpath, n, "LD_LIBRARY_PATH=%s%s%s", lib_dir, old && *old ? ":" : "",
			 old && *old ? old : "");
		add[na++] = libpath;
	}
	if (spec_kv)
		add[na++] = spec_kv;
	if (state_kv)
		add[na++] = state_kv;
	return probe_env(drop, add);
}

int gpu_probe_context_overhead(struct gpu_inventory *inv, const char *probe_path,
			       const char *lib_dir, const char *state_dir, int timeout_ms,
			       struct terr *err)
{
	char libpath[4200], spec[300] = "", state[4200] = "";
	if (inv->mock) {
		/* The mock keeps per-process usage only in a shared file. */
		snprintf(spec, sizeof(spec), "TESSERA_MOCK_GPUS=%s", inv->mock_spec);
		snprintf(state, sizeof(state), "TESSERA_MOCK_STATE=%s/probe-gpus.state",
			 state_dir ? state_dir : "/tmp");
	}
	char **env = probe_env_for(lib_dir, libpath, sizeof(libpath), inv->mock ? spec : NULL,
				   inv->mock ? state : NULL);
	if (!env)
		return terr_set(err, ENOMEM, "out of memory");
	char out[8192];
	char *argv[] = {(char *)probe_path, NULL};
	int rc = probe_run(argv, env, timeout_ms, out, sizeof(out), err);
	free(env);
	if (inv->mock && state_dir) {
		char path[4200];
		snprintf(path, sizeof(path), "%s/probe-gpus.state", state_dir);
		unlink(path);
	}
	if (rc < 0)
		return rc;
	int measured = 0;
	for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
		char uuid[64];
		long long bytes;
		if (sscanf(line, "%63s %lld", uuid, &bytes) != 2 || bytes < 0)
			continue;
		for (int k = 0; k < inv->n; k++)
			if (!strcasecmp(inv->dev[k].uuid, uuid) && inv->dev[k].context_overhead == 0) {
				inv->dev[k].context_overhead = bytes;
				measured++;
			}
	}
	return measured;
}

int gpu_charge_sessions(const char *probe_path, const char *lib_dir, const char *mock_spec_file,
			const char *mock_state_file, char *const *sessions, int n_args,
			int timeout_ms, char *out, size_t out_len, struct terr *err)
{
	char libpath[4200], spec[4200] = "", state[4200] = "";
	if (mock_spec_file) {
		snprintf(spec, sizeof(spec), "TESSERA_MOCK_GPUS_FILE=%s", mock_spec_file);
		snprintf(state, sizeof(state), "TESSERA_MOCK_STATE=%s",
			 mock_state_file ? mock_state_file : "");
	}
	char **argv = calloc((size_t)n_args + 3, sizeof(char *));
	char **env = probe_env_for(lib_dir, libpath, sizeof(libpath), mock_spec_file ? spec : NULL,
				   mock_spec_file ? state : NULL);
	if (!argv || !env) {
		free(argv);
		free(env);
		return terr_set(err, ENOMEM, "out of memory");
	}
	argv[0] = (char *)probe_path;
	argv[1] = "--charge";
	for (int i = 0; i < n_args; i++)
		argv[2 + i] = sessions[i];
	int rc = probe_run(argv, env, timeout_ms, out, out_len, err);
	free(argv);
	free(env);
	return rc;
}

/* The path of an `ldconfig -p` line for this architecture (x86-64) whose
 * soname is name, or (name ending in '.') starts with name; NULL if not. */
static char *ldconfig_line_path(const char *line, size_t len, const char *name)
{
	/* Lines look like: "\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so.1" */
	char buf[1024];
	if (len >= sizeof(buf))
		return NULL;
	memcpy(buf, line, len);
	buf[len] = '\0';
	char *p = buf;
	while (*p == ' ' || *p == '\t')
		p++;
	char *sp = strchr(p, ' ');
	char *arrow = strstr(buf, "=> ");
	if (!sp || !arrow || !strstr(buf, "x86-64"))
		return NULL;
	*sp = '\0';
	size_t nlen = strlen(name);
	bool prefix = nlen > 0 && name[nlen - 1] == '.';
	if (prefix ? strncmp(p, name, nlen) != 0 : strcmp(p, name) != 0)
		return NULL;
	const char *path = arrow + 2;
	while (*path == ' ' || *path == '\t')
		path++;
	size_t plen = strlen(path);
	while (plen && (path[plen - 1] == ' ' || path[plen - 1] == '\t' || path[plen - 1] == '\r'))
		plen--;
	return plen ? strndup(path, plen) : NULL;
}

int gpu_parse_ldconfig(const char *text, const char *const *wanted, char ***out, size_t *n,
		       struct terr *err)
{
	size_t cap = 8, k = 0;
	char **res = calloc(cap + 1, sizeof(char *));
	if (!res)
		return terr_set(err, ENOMEM, "out of memory");
	for (size_t w = 0; wanted[w]; w++) {
		size_t wl = strlen(wanted[w]);
		bool prefix = wl > 0 && wanted[w][wl - 1] == '.';
		for (const char *line = text; line && *line;) {
			const char *eol = strchr(line, '\n');
			size_t len = eol ? (size_t)(eol - line) : strlen(line);
			char *path = ldconfig_line_path(line, len, wanted[w]);
			line = eol ? eol + 1 : NULL;
			if (!path)
				continue;
			bool dup = false;
			for (size_t i = 0; i < k && !dup; i++)
				dup = strcmp(res[i], path) == 0;
			if (dup) {
				free(path);
				continue;
			}
			if (k == cap) {
				char **grown = realloc(res, (2 * cap + 1) * sizeof(char *));
				if (!grown) {
					free(path);
					for (size_t i = 0; i < k; i++)
						free(res[i]);
					free(res);
					return terr_set(err, ENOMEM, "out of memory");
				}
				res = grown;
				cap *= 2;
			}
			res[k++] = path;
			res[k] = NULL;
			if (!prefix)
				break;   /* an exact soname: the first line wins */
		}
	}
	*out = res;
	*n = k;
	return 0;
}

int gpu_driver_files(char ***out, size_t *n, struct terr *err)
{
	/* The libraries CUDA programs load from the driver (the set
	 * nvidia-container-toolkit mounts for the "compute,utility" caps that
	 * CUDA needs): libcuda dlopens the PTX JIT (kernels a program ships as
	 * PTX only, or for an older GPU: PyTorch's and TensorFlow's builds
	 * for a GPU newer than they know), NVVM (JIT link-time optimisation)
	 * and, on a GPU in confidential-computing mode, the PKCS#11 libraries.
	 * A name ending in '.' is a library whose soname carries the driver's
	 * version (libnvidia-gpucomp.so.550.163.01): every one the ld cache
	 * has, so the one the driver asks for by its version is there. */
	static const char *const wanted[] = {
		"libcuda.so.1", "libnvidia-ml.so.1", "libnvidia-ptxjitcompiler.so.1",
		"libnvidia-nvvm.so.4", "libcudadebugger.so.1", "libnvidia-gpucomp.so.",
		"libnvidia-pkcs11.so.", "libnvidia-pkcs11-openssl3.so.", NULL,
	};
	FILE *p = popen("ldconfig -p 2>/dev/null || /sbin/ldconfig -p 2>/dev/null", "r");
	if (!p)
		return terr_set(err, errno, "cannot run ldconfig -p");
	size_t cap = 65536, len = 0;
	char *text = malloc(cap);
	size_t got;
	while (text && (got = fread(text + len, 1, cap - len - 1, p)) > 0) {
		len += got;
		if (cap - len - 1 == 0) {
			char *nt = realloc(text, cap * 2);
			if (!nt) {
				free(text);
				text = NULL;
				break;
			}
			text = nt;
			cap *= 2;
		}
	}
	pclose(p);
	if (!text)
		return terr_set(err, ENOMEM, "out of memory reading the ld cache");
	text[len] = '\0';
	int rc = gpu_parse_ldconfig(text, wanted, out, n, err);
	free(text);
	if (rc < 0)
		return rc;
	const char *smi[] = {"/usr/bin/nvidia-smi", "/usr/local/bin/nvidia-smi", NULL};
	for (int i = 0; smi[i]; i++) {
		if (access(smi[i], X_OK) != 0)
			continue;
		char **grown = realloc(*out, (*n + 2) * sizeof(char *));
		if (!grown)
			break;
		*out = grown;
		(*out)[(*n)++] = strdup(smi[i]);
		(*out)[*n] = NULL;
		break;
	}
	return 0;
}

bool gpu_driver_target(const char *host_path, char *buf, size_t n)
{
	const char *base = strrchr(host_path, '/');
	base = base ? base + 1 : host_path;
	bool lib = !strncmp(base, "lib", 3) && strstr(base, ".so");
	int len = snprintf(buf, n, "%s/%s", lib ? FGPU_DRIVER_LIB_DIR : "/usr/bin", base);
	return *base && len > 0 && (size_t)len < n;
}
