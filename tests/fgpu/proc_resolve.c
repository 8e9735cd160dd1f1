/* proc-resolve: which entry point a CUDA driver hands out for each lookup.
 *
 *   proc-resolve LIBCUDA < REQUESTS
 *
 * REQUESTS has lines "NAME VERSION FLAGS" (what a CUDA runtime asked
 * cuGetProcAddress_v2 for; "" is the empty name); each is asked of the
 * driver LIBCUDA (a path) with cuGetProcAddress_v2, and printed back with
 * the exported name of what the driver handed out: "-" when it found
 * nothing, "?" when what it handed out is no exported function. The
 * real driver answers without a GPU (lookups need no cuInit), which is
 * how tests/fgpu/cudart12_entry_points.txt was made from Debian's driver
 * (tests/fgpu/cudart12.sh generate). */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef int (*proc_v2_fn)(const char *, void **, int, uint64_t, int *);

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: proc-resolve LIBCUDA < REQUESTS\n");
		return 2;
	}
	void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "proc-resolve: %s\n", dlerror());
		return 1;
	}
	proc_v2_fn proc;
	*(void **)&proc = dlsym(h, "cuGetProcAddress_v2");
	if (!proc) {
		fprintf(stderr, "proc-resolve: %s has no cuGetProcAddress_v2\n", argv[1]);
		return 1;
	}
	char line[512], name[256];
	int version, lineno = 0;
	unsigned long long flags;
	while (fgets(line, sizeof(line), stdin)) {
		lineno++;
		if (line[0] == '#' || line[0] == '\n')
			continue;
		if (sscanf(line, "%255s %d %llu", name, &version, &flags) != 3) {
			fprintf(stderr, "proc-resolve: line %d: not NAME VERSION FLAGS\n", lineno);
			return 1;
		}
		const char *sym = strcmp(name, "\"\"") == 0 ? "" : name;
		void *p = NULL;
		int status = -1;
		int rc = proc(sym, &p, version, flags, &status);
		const char *what = "-";
		Dl_info info;
		if (rc != 0) {
			fprintf(stderr, "proc-resolve: %s %d %llu: error %d\n", name, version, flags, rc);
			return 1;
		}
		if (p)
			what = dladdr(p, &info) && info.dli_saddr == p && info.dli_sname
				       ? info.dli_sname : "?";
		printf("%s %d %llu %s\n", name, version, flags, what);
	}
	return 0;
}
