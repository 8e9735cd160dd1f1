/* Every driver entry point Debian's CUDA runtime 12.4 asks for, as the
 * runtime asks for it, through the fGPU library to the mock driver
 * (tests/fgpu/cudart12_entry_points.txt, made from the runtime and
 * Debian's driver by tests/fgpu/cudart12.sh generate; no download here).
 *
 * The runtime fetches cuGetProcAddress_v2 by name and then every entry
 * point through it, with symbolStatus NULL. For each lookup in the list:
 *   - when what Debian's driver hands out is a variant the library hooks,
 *     the runtime must get that variant's hook (so the mock must have it);
 *   - otherwise it must get the driver's own entry point, unhooked: the
 *     same variant the real driver names, or NULL where the mock lacks it
 *     (the runtime keeps NULL for what a driver lacks);
 *   - what the real driver does not have, the mock must not hand out.
 * Run twice by meson, like the lookup tests: with the mock's exported
 * functions, and with stubs it hands out instead (TESSERA_MOCK_PROC_
 * TRAMPOLINES=1), which the library must tell apart without names. */
#include <dlfcn.h>
#include <stdbool.h>

#include "fgpu/fgpu_test.h"
#include "testlib.h"

static const char *const hooked[] = {
#define FT_NAME(ret, name, base, since, ptsz, params) #name,
	FGPU_CUDA_HOOKS(FT_NAME)
#undef FT_NAME
};

static bool is_hooked(const char *sym)
{
	for (size_t i = 0; i < sizeof(hooked) / sizeof(hooked[0]); i++)
		if (strcmp(hooked[i], sym) == 0)
			return true;
	return false;
}

static bool in_file(void *p, const char *part)
{
	Dl_info info;
	return p && dladdr(p, &info) && info.dli_fname && strstr(info.dli_fname, part);
}

static const char *exported_name(void *p)
{
	Dl_info info;
	return p && dladdr(p, &info) && info.dli_saddr == p && info.dli_sname ? info.dli_sname
									       : NULL;
}

static bool by_name(void)
{
	const char *t = getenv("TESSERA_MOCK_PROC_TRAMPOLINES");
	return t && strcmp(t, "1") == 0;
}

struct lookup {
	char name[128], real[128];
	int version;
	unsigned long long flags;
};

static struct lookup *list;
static size_t nlist;

static void load_list(void)
{
	const char *path = getenv("CUDART12_ENTRY_POINTS");
	FILE *f = path ? fopen(path, "r") : NULL;
	if (!f) {
		fprintf(stderr, "cannot read CUDART12_ENTRY_POINTS (%s)\n", path ? path : "unset");
		exit(1);
	}
	char line[512];
	size_t cap = 0;
	int lineno = 0;
	while (fgets(line, sizeof(line), f)) {
		lineno++;
		if (line[0] == '#' || line[0] == '\n')
			continue;
		if (nlist == cap) {
			cap = cap ? 2 * cap : 512;
			list = realloc(list, cap * sizeof(*list));
			if (!list)
				exit(2);
		}
		struct lookup *l = &list[nlist];
		if (sscanf(line, "%127s %d %llu %127s", l->name, &l->version, &l->flags, l->real) != 4) {
			fprintf(stderr, "%s:%d: not NAME VERSION FLAGS SYMBOL\n", path, lineno);
			exit(1);
		}
		if (strcmp(l->name, "\"\"") == 0)
			l->name[0] = '\0';
		nlist++;
	}
	fclose(f);
}

/* The list is what the runtime reaches: hundreds of lookups, among them
 * cuGetProcAddress at 12.0, which the real driver answers with
 * cuGetProcAddress_v2, and the allocation and launch entry points. */
TEST(the_list_is_the_runtimes)
{
	CHECK(nlist > 300);
	static const char *const must[] = { "cuGetProcAddress_v2", "cuMemAlloc_v2",
					    "cuMemGetInfo_v2", "cuLaunchKernel", "cuMemAllocAsync",
					    "cuDevicePrimaryCtxRetain", "cuGraphLaunch", NULL };
	for (int i = 0; must[i]; i++) {
		bool found = false;
		for (size_t j = 0; j < nlist && !found; j++)
			found = strcmp(list[j].real, must[i]) == 0;
		if (!found)
			FAILF("the list does not reach %s", must[i]);
	}
}

/* How the runtime starts: the driver's cuGetProcAddress_v2 by dlsym on
 * its handle, then cuGetProcAddress at 12.0 through it. Both must be the
 * library's, or nothing after them is hooked. */
TEST(the_runtime_gets_the_hooked_lookup)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	CHECK(h != NULL);
	CUresult (*v2)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
	*(void **)&v2 = dlsym(h, "cuGetProcAddress_v2");
	CHECK(in_file((void *)v2, "libtessera-fgpu"));
	void *p = NULL;
	CHECK_INT(v2("cuGetProcAddress", &p, 12000, 0, NULL), CUDA_SUCCESS);
	CHECK(p == (void *)cuGetProcAddress_v2);
	CHECK(in_file(p, "libtessera-fgpu"));
	/* its first lookup, of the empty name, as the real driver answers */
	CUdriverProcAddressQueryResult st = -1;
	p = &st;
	CHECK_INT(v2("", &p, 0, 0, &st), CUDA_SUCCESS);
	CHECK(p == NULL);
	CHECK_INT(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
}

TEST(each_lookup_gets_the_hook_or_the_drivers_own)
{
	size_t n_hooked = 0, n_own = 0, n_missing = 0;
	for (size_t i = 0; i < nlist; i++) {
		const struct lookup *l = &list[i];
		void *p = (void *)&n_own;
		CUresult rc = cuGetProcAddress_v2(l->name, &p, l->version, l->flags, NULL);
		if (rc != CUDA_SUCCESS) {
			FAILF("%s %d %llu: cuGetProcAddress_v2 returned %d", l->name, l->version,
			      l->flags, rc);
			continue;
		}
		if (strcmp(l->real, "-") == 0) {
			if (p != NULL)
				FAILF("%s %d %llu: the real driver has nothing, the mock hands out %p",
				      l->name, l->version, l->flags, p);
			continue;
		}
		if (is_hooked(l->real)) {
			n_hooked++;
			void *hook = dlsym(RTLD_DEFAULT, l->real);
			if (!p || p != hook || !in_file(p, "libtessera-fgpu"))
				FAILF("%s %d %llu: the driver's %s is hooked, the runtime got %s",
				      l->name, l->version, l->flags, l->real,
				      !p ? "NULL (the mock lacks it)" : "something else");
			continue;
		}
		if (!p) {
			n_missing++;
			continue;
		}
		n_own++;
		if (in_file(p, "libtessera-fgpu")) {
			FAILF("%s %d %llu: %s is not hooked, yet the library handed out a hook",
			      l->name, l->version, l->flags, l->real);
			continue;
		}
		/* with stubs the mock's answer has no name; otherwise it must be
		 * the variant the real driver hands out */
		const char *got = exported_name(p);
		if (!by_name() && (!got || strcmp(got, l->real) != 0))
			FAILF("%s %d %llu: the real driver hands out %s, the mock %s", l->name,
			      l->version, l->flags, l->real, got ? got : "an unnamed pointer");
	}
	printf("# %zu lookups: %zu get the library's hook, %zu the mock's own entry point, "
	       "%zu nothing (the mock lacks them)\n", nlist, n_hooked, n_own, n_missing);
	CHECK(n_hooked > 0 && n_own > 0);
}

int main(void)
{
	setenv("TESSERA_MOCK_GPUS", "1x8GiB", 1);
	const char *dir = ft_setup("memory_limit = 1GiB\n");
	load_list();
	if (cuInit(0) != CUDA_SUCCESS) {
		fprintf(stderr, "mock driver did not initialize\n");
		return 1;
	}
	RUN(the_list_is_the_runtimes);
	RUN(the_runtime_gets_the_hooked_lookup);
	RUN(each_lookup_gets_the_hook_or_the_drivers_own);
	ft_cleanup(dir);
	free(list);
	return testlib_done();
}
