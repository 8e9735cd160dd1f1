/* nvidia-smi of the mock driver: what the real one prints, for the mock
 * devices of a session with mock GPUs (the agent mounts it at
 * FGPU_MOCK_SMI_PATH, where the host's nvidia-smi is on real GPUs).
 *
 *   nvidia-smi                    the usual table: driver and CUDA version,
 *                                 per GPU its name, memory used / total,
 *                                 utilisation; then the processes
 *   nvidia-smi -L                 "GPU N: NAME (UUID: GPU-...)" per GPU
 *   nvidia-smi --query-gpu=FIELD,... --format=csv[,noheader][,nounits]
 *                                 FIELD: index, name, uuid, memory.total,
 *                                 memory.used, memory.free, utilization.gpu,
 *                                 utilization.memory, driver_version, count
 *   -i N (--id=N)                 only GPU N
 *
 * Like the real one it reads everything through NVML, dlopen'd as
 * libnvidia-ml.so.1, so in a session it shows what the fGPU library
 * (preloaded through /etc/ld.so.preload) lets NVML show: the session's
 * share as the memory total. The table's first line says it is the mock's;
 * -L and CSV keep the real format, for the scripts that parse them. Fields
 * the mock has no figure for (fan, temperature, power, bus id) read N/A, as
 * the real one prints them where a board lacks them. Any other option: one
 * line on stderr and exit 2; no driver: exit 9, as the real one. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpuabi/nvml_abi.h"

#define SMI_NAME "nvidia-smi (Tessera mock driver)"
#define SMI_MAX_DEVICES 64
#define SMI_MAX_PROCS 256
#define SMI_WIDTH 89   /* inside the table's outer bars */

struct smi_nvml {
	nvmlReturn_t (*init)(void);
	nvmlReturn_t (*shutdown)(void);
	nvmlReturn_t (*driver)(char *, unsigned int);
	nvmlReturn_t (*cuda)(int *);
	nvmlReturn_t (*count)(unsigned int *);
	nvmlReturn_t (*handle)(unsigned int, nvmlDevice_t *);
	nvmlReturn_t (*name)(nvmlDevice_t, char *, unsigned int);
	nvmlReturn_t (*uuid)(nvmlDevice_t, char *, unsigned int);
	nvmlReturn_t (*mem)(nvmlDevice_t, nvmlMemory_t *);
	nvmlReturn_t (*mem2)(nvmlDevice_t, nvmlMemory_v2_t *);          /* optional */
	nvmlReturn_t (*util)(nvmlDevice_t, nvmlUtilization_t *);        /* optional */
	nvmlReturn_t (*procs)(nvmlDevice_t, unsigned int *, nvmlProcessInfo_t *);   /* optional */
	const char *(*errstr)(nvmlReturn_t);                            /* optional */
};

struct smi_dev {
	unsigned int index;
	char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
	char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
	int have_mem, have_util;
	unsigned long long total, used, free;
	nvmlUtilization_t util;
};

static struct smi_nvml nv;
static char driver[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = "N/A";
static char cuda[16] = "N/A";
static struct smi_dev devs[SMI_MAX_DEVICES];
static unsigned int ndevs;

#define SMI_SYM(lib, field, name) (*(void **)&(field) = dlsym((lib), (name)))

/* Loads NVML and reads every device (or only `only`, when >= 0). Returns
 * the exit status to end with on failure, 0 when all is read. */
static int smi_load(long only)
{
	void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW);
	if (!h) {
		fprintf(stderr, "NVIDIA-SMI couldn't find libnvidia-ml.so library in your system: %s\n", dlerror());
		return 9;
	}
	if (!(SMI_SYM(h, nv.init, "nvmlInit_v2") && SMI_SYM(h, nv.shutdown, "nvmlShutdown") &&
	      SMI_SYM(h, nv.driver, "nvmlSystemGetDriverVersion") &&
	      SMI_SYM(h, nv.count, "nvmlDeviceGetCount_v2") &&
	      SMI_SYM(h, nv.handle, "nvmlDeviceGetHandleByIndex_v2") &&
	      SMI_SYM(h, nv.name, "nvmlDeviceGetName") && SMI_SYM(h, nv.uuid, "nvmlDeviceGetUUID") &&
	      SMI_SYM(h, nv.mem, "nvmlDeviceGetMemoryInfo"))) {
		fprintf(stderr, "NVIDIA-SMI: libnvidia-ml.so.1 lacks %s\n", "an NVML entry point it needs");
		return 9;
	}
	if (!SMI_SYM(h, nv.cuda, "nvmlSystemGetCudaDriverVersion_v2"))
		SMI_SYM(h, nv.cuda, "nvmlSystemGetCudaDriverVersion");
	SMI_SYM(h, nv.mem2, "nvmlDeviceGetMemoryInfo_v2");
	SMI_SYM(h, nv.util, "nvmlDeviceGetUtilizationRates");
	if (!SMI_SYM(h, nv.procs, "nvmlDeviceGetComputeRunningProcesses_v3"))
		SMI_SYM(h, nv.procs, "nvmlDeviceGetComputeRunningProcesses_v2");
	SMI_SYM(h, nv.errstr, "nvmlErrorString");

	nvmlReturn_t r = nv.init();
	if (r != NVML_SUCCESS) {
		fprintf(stderr, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver (%s).\n",
			nv.errstr ? nv.errstr(r) : "NVML error");
		return 9;
	}
	nv.driver(driver, sizeof(driver));
	int cv = 0;
	if (nv.cuda && nv.cuda(&cv) == NVML_SUCCESS && cv > 0)
		snprintf(cuda, sizeof(cuda), "%d.%d", cv / 1000, cv % 1000 / 10);
	unsigned int n = 0;
	if ((r = nv.count(&n)) != NVML_SUCCESS) {
		fprintf(stderr, "NVIDIA-SMI: cannot count the GPUs: %s\n", nv.errstr ? nv.errstr(r) : "NVML error");
		return 9;
	}
	if (only >= (long)n) {
		fprintf(stderr, "No devices were found with index %ld\n", only);
		return 6;
	}
	for (unsigned int i = 0; i < n && ndevs < SMI_MAX_DEVICES; i++) {
		if (only >= 0 && i != (unsigned long)only)
			continue;
		struct smi_dev *d = &devs[ndevs++];
		nvmlDevice_t dh;
		d->index = i;
		snprintf(d->name, sizeof(d->name), "N/A");
		snprintf(d->uuid, sizeof(d->uuid), "N/A");
		if (nv.handle(i, &dh) != NVML_SUCCESS)
			continue;
		nv.name(dh, d->name, sizeof(d->name));
		nv.uuid(dh, d->uuid, sizeof(d->uuid));
		nvmlMemory_v2_t m2 = { .version = nvmlMemory_v2 };
		nvmlMemory_t m;
		/* _v2 first, as the real tool: its used leaves out what the
		 * driver reserves. */
		if (nv.mem2 && nv.mem2(dh, &m2) == NVML_SUCCESS) {
			d->have_mem = 1;
			d->total = m2.total;
			d->used = m2.used;
			d->free = m2.free;
		} else if (nv.mem(dh, &m) == NVML_SUCCESS) {
			d->have_mem = 1;
			d->total = m.total;
			d->used = m.used;
			d->free = m.free;
		}
		d->have_util = nv.util && nv.util(dh, &d->util) == NVML_SUCCESS;
	}
	return 0;
}

static unsigned long long mib(unsigned long long b)
{
	return b >> 20;
}

/* One line of the table: "|" + text padded (or cut) to SMI_WIDTH + "|". */
static void smi_line(const char *text)
{
	printf("|%-*.*s|\n", SMI_WIDTH, SMI_WIDTH, text);
}

static void smi_rule(char edge, char fill)
{
	putchar(edge);
	for (int i = 0; i < SMI_WIDTH; i++)
		putchar(fill);
	printf("%c\n", edge);
}

/* A cell of the GPU table, width w: " left ... right ", left cut to fit. */
static void smi_cell(char *out, size_t n, int w, const char *left, const char *right)
{
	int room = w - 2 - (int)strlen(right);
	if (room < 0)
		room = 0;
	snprintf(out, n, " %-*.*s%s ", room, room, left, right);
}

static void smi_row(const char *l1, const char *r1, const char *l2, const char *r2, const char *l3,
		    const char *r3)
{
	char c1[64], c2[64], c3[64];
	smi_cell(c1, sizeof(c1), 41, l1, r1);
	smi_cell(c2, sizeof(c2), 24, l2, r2);
	smi_cell(c3, sizeof(c3), 22, l3, r3);
	printf("|%s|%s|%s|\n", c1, c2, c3);
}

/* The process's command as the real tool shows it: its path, else its
 * name, else N/A (gone, or not in this PID namespace). */
static void smi_proc_name(unsigned int pid, char *out, size_t n)
{
	char path[64];
	snprintf(out, n, "N/A");
	snprintf(path, sizeof(path), "/proc/%u/cmdline", pid);
	FILE *f = fopen(path, "re");
	if (f) {
		size_t k = fread(out, 1, n - 1, f);
		fclose(f);
		out[k] = '\0';   /* the first argument ends at its NUL */
		if (k > 0 && out[0])
			return;
	}
	snprintf(path, sizeof(path), "/proc/%u/comm", pid);
	if ((f = fopen(path, "re"))) {
		if (fgets(out, (int)n, f))
			out[strcspn(out, "\n")] = '\0';
		else
			snprintf(out, n, "N/A");
		fclose(f);
	}
}

static void smi_table(void)
{
	char buf[512], when[64];
	time_t now = time(NULL);
	struct tm tm;
	localtime_r(&now, &tm);
	strftime(when, sizeof(when), "%a %b %e %H:%M:%S %Y", &tm);
	printf("%s       \n", when);
	smi_rule('+', '-');
	/* The real header's three parts; the middle space gives way to the
	 * mark that this is the mock's. */
	char ver[128], rest[160];
	snprintf(ver, sizeof(ver), " NVIDIA-SMI %s (Tessera mock driver)", driver);
	snprintf(rest, sizeof(rest), "Driver Version: %s   CUDA Version: %s ", driver, cuda);
	int gap = SMI_WIDTH - (int)strlen(ver) - (int)strlen(rest);
	if (gap < 1) {   /* a long version: the real header's spacing gives */
		snprintf(rest, sizeof(rest), "Driver Version: %s CUDA Version: %s ", driver, cuda);
		gap = SMI_WIDTH - (int)strlen(ver) - (int)strlen(rest);
	}
	snprintf(buf, sizeof(buf), "%s%*s%s", ver, gap > 1 ? gap : 1, "", rest);
	smi_line(buf);
	printf("|-----------------------------------------+------------------------+----------------------+\n");
	smi_row("GPU  Name", "Persistence-M", "Bus-Id", "Disp.A", "Volatile Uncorr.", " ECC");
	smi_row("Fan  Temp   Perf", "Pwr:Usage/Cap", "", "Memory-Usage", "GPU-Util", "Compute M.");
	smi_row("", "", "", "", "", "MIG M.");
	printf("|=========================================+========================+======================|\n");
	for (unsigned int i = 0; i < ndevs; i++) {
		const struct smi_dev *d = &devs[i];
		char l[128], mem[64], util[32];
		snprintf(l, sizeof(l), "%3u  %s", d->index, d->name);
		smi_row(l, "  N/A", "", "N/A   N/A", "", "N/A");
		if (d->have_mem)
			snprintf(mem, sizeof(mem), "%lluMiB / %6lluMiB", mib(d->used), mib(d->total));
		else
			snprintf(mem, sizeof(mem), "N/A");
		if (d->have_util)
			snprintf(util, sizeof(util), "%3u%%      Default", d->util.gpu);
		else
			snprintf(util, sizeof(util), "N/A      Default");
		smi_row("N/A   N/A    N/A", "N/A /  N/A", "", mem, "", util);
		smi_row("", "", "", "", "", "N/A");
		printf("+-----------------------------------------+------------------------+----------------------+\n");
	}
	if (ndevs == 0)
		printf("No devices were found\n");

	printf("%*s\n", SMI_WIDTH + 2, "");
	smi_rule('+', '-');
	smi_line(" Processes:");
	smi_line("  GPU   GI   CI        PID   Type   Process name                              GPU Memory");
	smi_line("        ID   ID                                                               Usage     ");
	smi_rule('|', '=');
	int any = 0;
	for (unsigned int i = 0; i < ndevs && nv.procs; i++) {
		nvmlDevice_t dh;
		static nvmlProcessInfo_t infos[SMI_MAX_PROCS];
		unsigned int n = SMI_MAX_PROCS;
		if (nv.handle(devs[i].index, &dh) != NVML_SUCCESS || nv.procs(dh, &n, infos) != NVML_SUCCESS)
			continue;
		for (unsigned int k = 0; k < n; k++) {
			char name[256], usage[32];
			smi_proc_name(infos[k].pid, name, sizeof(name));
			if (infos[k].usedGpuMemory == NVML_VALUE_NOT_AVAILABLE)
				snprintf(usage, sizeof(usage), "N/A");
			else
				snprintf(usage, sizeof(usage), "%lluMiB", mib(infos[k].usedGpuMemory));
			/* A long path keeps its end, the part that names it. */
			const char *shown = strlen(name) > 38 ? name + strlen(name) - 38 : name;
			snprintf(buf, sizeof(buf), "  %3u   N/A  N/A %10u      C   %-38s %12s ", devs[i].index,
				 infos[k].pid, shown, usage);
			smi_line(buf);
			any = 1;
		}
	}
	if (!any)
		smi_line("  No running processes found");
	smi_rule('+', '-');
}

/* --query-gpu fields: the name, the CSV header's unit, and a value. */
enum smi_field { F_INDEX, F_NAME, F_UUID, F_MEM_TOTAL, F_MEM_USED, F_MEM_FREE, F_UTIL_GPU, F_UTIL_MEM,
		 F_DRIVER, F_COUNT };
static const struct {
	const char *name;
	enum smi_field f;
	const char *unit;   /* NULL: none */
} smi_fields[] = {
	{"index", F_INDEX, NULL},
	{"name", F_NAME, NULL},
	{"gpu_name", F_NAME, NULL},
	{"uuid", F_UUID, NULL},
	{"gpu_uuid", F_UUID, NULL},
	{"memory.total", F_MEM_TOTAL, "MiB"},
	{"memory.used", F_MEM_USED, "MiB"},
	{"memory.free", F_MEM_FREE, "MiB"},
	{"utilization.gpu", F_UTIL_GPU, "%"},
	{"utilization.memory", F_UTIL_MEM, "%"},
	{"driver_version", F_DRIVER, NULL},
	{"count", F_COUNT, NULL},
};
#define SMI_NFIELDS (sizeof(smi_fields) / sizeof(smi_fields[0]))
#define SMI_MAX_QUERY 32

static int smi_query(const char *list, const char *format, long only)
{
	int fidx[SMI_MAX_QUERY], nq = 0;
	char names[SMI_MAX_QUERY][32];
	const char *p = list;
	while (*p) {
		size_t len = strcspn(p, ",");
		size_t k = 0;
		while (k < SMI_NFIELDS && !(strlen(smi_fields[k].name) == len && !strncmp(p, smi_fields[k].name, len)))
			k++;
		if (k == SMI_NFIELDS || len == 0) {
			fprintf(stderr, "Field \"%.*s\" is not a valid field to query.\n", (int)len, p);
			return 2;
		}
		if (nq == SMI_MAX_QUERY) {
			fprintf(stderr, "%s: at most %d fields in --query-gpu\n", SMI_NAME, SMI_MAX_QUERY);
			return 2;
		}
		snprintf(names[nq], sizeof(names[nq]), "%s", smi_fields[k].name);
		fidx[nq++] = (int)k;
		p += len;
		if (*p == ',')
			p++;
	}
	if (nq == 0) {
		fprintf(stderr, "%s: --query-gpu needs at least one field\n", SMI_NAME);
		return 2;
	}
	int header = 1, units = 1;
	if (strncmp(format, "csv", 3) != 0 || (format[3] && format[3] != ',')) {
		fprintf(stderr, "%s: --format must be csv[,noheader][,nounits], not \"%s\"\n", SMI_NAME, format);
		return 2;
	}
	for (const char *o = format + 3; *o == ',';) {
		o++;
		size_t len = strcspn(o, ",");
		if (len == 8 && !strncmp(o, "noheader", 8))
			header = 0;
		else if (len == 7 && !strncmp(o, "nounits", 7))
			units = 0;
		else {
			fprintf(stderr, "%s: unknown --format option \"%.*s\" (known: csv, noheader, nounits)\n",
				SMI_NAME, (int)len, o);
			return 2;
		}
		o += len;
	}
	int rc = smi_load(only);
	if (rc)
		return rc;
	if (header) {
		for (int q = 0; q < nq; q++) {
			const char *unit = smi_fields[fidx[q]].unit;
			printf("%s%s", q ? ", " : "", names[q]);
			if (unit)
				printf(" [%s]", unit);
		}
		printf("\n");
	}
	for (unsigned int i = 0; i < ndevs; i++) {
		const struct smi_dev *d = &devs[i];
		for (int q = 0; q < nq; q++) {
			char v[128];
			const char *unit = smi_fields[fidx[q]].unit;
			int known = 1;
			switch (smi_fields[fidx[q]].f) {
			case F_INDEX: snprintf(v, sizeof(v), "%u", d->index); break;
			case F_NAME: snprintf(v, sizeof(v), "%s", d->name); break;
			case F_UUID: snprintf(v, sizeof(v), "%s", d->uuid); break;
			case F_MEM_TOTAL: known = d->have_mem; snprintf(v, sizeof(v), "%llu", mib(d->total)); break;
			case F_MEM_USED: known = d->have_mem; snprintf(v, sizeof(v), "%llu", mib(d->used)); break;
			case F_MEM_FREE: known = d->have_mem; snprintf(v, sizeof(v), "%llu", mib(d->free)); break;
			case F_UTIL_GPU: known = d->have_util; snprintf(v, sizeof(v), "%u", d->util.gpu); break;
			case F_UTIL_MEM: known = d->have_util; snprintf(v, sizeof(v), "%u", d->util.memory); break;
			case F_DRIVER: snprintf(v, sizeof(v), "%s", driver); break;
			case F_COUNT: snprintf(v, sizeof(v), "%u", ndevs); break;
			}
			printf("%s", q ? ", " : "");
			if (!known)
				printf("[N/A]");
			else
				printf("%s%s%s", v, unit && units ? " " : "", unit && units ? unit : "");
		}
		printf("\n");
	}
	return 0;
}

static int smi_unknown(const char *arg)
{
	fprintf(stderr, "%s: option %s is not supported (known: -L, -i N, --query-gpu=FIELDS "
		"--format=csv[,noheader][,nounits], -h)\n", SMI_NAME, arg);
	return 2;
}

static void smi_help(void)
{
	printf("%s: the mock GPU driver's nvidia-smi, as Tessera provides it in sessions with mock GPUs\n"
	       "\n"
	       "  nvidia-smi                 the GPUs and their processes, as a table\n"
	       "  nvidia-smi -L              list the GPUs with their UUIDs\n"
	       "  nvidia-smi --query-gpu=FIELD,... --format=csv[,noheader][,nounits]\n"
	       "                             FIELD: index, name, uuid, memory.total, memory.used,\n"
	       "                             memory.free, utilization.gpu, utilization.memory,\n"
	       "                             driver_version, count\n"
	       "  -i N, --id=N               only GPU N\n", SMI_NAME);
}

/* "--opt=VALUE" or "--opt VALUE": the value, advancing *i for the second. */
static const char *smi_value(int argc, char **argv, int *i, const char *opt)
{
	size_t len = strlen(opt);
	if (strncmp(argv[*i], opt, len) != 0)
		return NULL;
	if (argv[*i][len] == '=')
		return argv[*i] + len + 1;
	if (argv[*i][len] == '\0' && *i + 1 < argc)
		return argv[++*i];
	return NULL;
}

int main(int argc, char **argv)
{
	int list = 0;
	long only = -1;
	const char *query = NULL, *format = NULL, *v;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-L") || !strcmp(argv[i], "--list-gpus")) {
			list = 1;
		} else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			smi_help();
			return 0;
		} else if ((v = smi_value(argc, argv, &i, "--query-gpu"))) {
			query = v;
		} else if ((v = smi_value(argc, argv, &i, "--format"))) {
			format = v;
		} else if ((v = smi_value(argc, argv, &i, "--id")) || (v = smi_value(argc, argv, &i, "-i"))) {
			char *e;
			only = strtol(v, &e, 10);
			if (e == v || *e || only < 0) {
				fprintf(stderr, "%s: -i takes a GPU index, not \"%s\"\n", SMI_NAME, v);
				return 2;
			}
		} else {
			return smi_unknown(argv[i]);
		}
	}
	if (query || format) {
		if (!query || !format || list) {
			fprintf(stderr, "%s: --query-gpu=FIELDS and --format=csv go together, without -L\n", SMI_NAME);
			return 2;
		}
		return smi_query(query, format, only);
	}
	int rc = smi_load(only);
	if (rc)
		return rc;
	if (list) {
		for (unsigned int i = 0; i < ndevs; i++)
			printf("GPU %u: %s (UUID: %s)\n", devs[i].index, devs[i].name, devs[i].uuid);
		if (ndevs == 0)
			printf("No devices found.\n");
	} else {
		smi_table();
	}
	nv.shutdown();
	return 0;
}
