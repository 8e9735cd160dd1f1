/* A program that looks driver entry points up by hand gets the hooks:
 * dlsym and dlvsym on the driver's handle, RTLD_DEFAULT and RTLD_NEXT, and
 * cuGetProcAddress(_v2) (how the CUDA 12 runtime gets them). RTLD_NEXT
 * keeps meaning "after the caller" for everything else.
 *
 * meson runs this program twice: once as the mock normally answers
 * cuGetProcAddress (with its exported functions, which the shim matches
 * by address) and once with TESSERA_MOCK_PROC_TRAMPOLINES=1 (stubs the
 * shim cannot match, so it must go by name and version). */
#include <dlfcn.h>

#include "fgpu/fgpu_test.h"
#include "testlib.h"

static const char *dir;

typedef CUresult (*PFN_ctx3)(CUcontext *, CUexecAffinityParam *, int, unsigned int, CUdevice);
typedef CUresult (*PFN_ctx4)(CUcontext *, CUctxCreateParams *, unsigned int, CUdevice);

static int from_shim(void *p)
{
	Dl_info info;
	return p && dladdr(p, &info) && info.dli_fname &&
	       strstr(info.dli_fname, "libtessera-fgpu") != NULL;
}

static int from_mock(void *p)
{
	Dl_info info;
	return p && dladdr(p, &info) && info.dli_fname &&
	       strstr(info.dli_fname, "libcuda.so") != NULL;
}

/* Whether the mock hands out stubs from cuGetProcAddress. */
static int by_name(void)
{
	const char *t = getenv("TESSERA_MOCK_PROC_TRAMPOLINES");
	return t && strcmp(t, "1") == 0;
}

TEST(dlsym_hands_out_hooks)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW);
	CHECK(h != NULL);
	CHECK(from_shim(dlsym(h, "cuMemAlloc_v2")));
	CHECK(from_shim(dlsym(h, "cuMemGetInfo_v2")));
	CHECK(from_shim(dlsym(h, "cuGetProcAddress")));
	CHECK(from_shim(dlsym(h, "cuGetProcAddress_v2")));
	CHECK(from_shim(dlsym(RTLD_DEFAULT, "cuMemAlloc_v2")));
	CHECK(from_shim(dlsym(RTLD_NEXT, "cuMemAlloc_v2")));
	CHECK(from_shim(dlsym(RTLD_DEFAULT, "cuLaunchKernel")));
	/* not hooked: the driver's own */
	CHECK(from_mock(dlsym(h, "cuInit")));
	CHECK(from_mock(dlsym(RTLD_DEFAULT, "cuDeviceGetName")));
	CHECK(dlsym(h, "cuNoSuchFunction") == NULL);
	void *n = dlopen("libnvidia-ml.so.1", RTLD_NOW);
	CHECK(n != NULL);
	CHECK(from_shim(dlsym(n, "nvmlDeviceGetMemoryInfo")));
	CHECK(from_shim(dlsym(n, "nvmlDeviceGetMemoryInfo_v2")));
	CHECK(!from_shim(dlsym(n, "nvmlDeviceGetName")));
	/* the shim's internals are not exported */
	void *s = dlopen(getenv("FGPU_LIB"), RTLD_NOW | RTLD_NOLOAD);
	CHECK(s != NULL);
	CHECK(dlsym(s, "fgpu_region_open") == NULL);
	CHECK(dlsym(s, "units_parse_size") == NULL);
	CHECK(dlsym(s, "terr_set") == NULL);
}

TEST(rtld_next_still_means_after_the_caller)
{
	/* After this program come the shim, then the C library. */
	void *m = dlsym(RTLD_NEXT, "malloc");
	CHECK(m != NULL);
	CHECK(m == dlsym(RTLD_DEFAULT, "malloc"));
	CHECK(dlsym(RTLD_NEXT, "no_such_symbol_anywhere") == NULL);
	CHECK(from_mock(dlsym(RTLD_NEXT, "cuInit")));
}

TEST(dlvsym_hands_out_hooks_too)
{
	/* glibc's dlvsym matches versioned symbols only; the mock driver's
	 * carry none (nor do NVIDIA's), so dlvsym finds nothing there, with
	 * or without the shim... */
	void *h = dlopen("libcuda.so.1", RTLD_NOW);
	CHECK(h != NULL);
	CHECK(dlvsym(h, "cuMemAlloc_v2", "ANY") == NULL);
	CHECK(dlvsym(h, "cuInit", "ANY") == NULL);
	/* ...but where a library versions a hooked name, the hook is what
	 * dlvsym hands out, and only for the version that exists. */
	void *v = dlopen(getenv("VERSIONED_FIXTURE"), RTLD_NOW);
	CHECK(v != NULL);
	CHECK(from_shim(dlvsym(v, "cuMemAlloc_v2", "TESSERA_FIXTURE_1.0")));
	CHECK(dlvsym(v, "cuMemAlloc_v2", "TESSERA_FIXTURE_1.0") == dlsym(h, "cuMemAlloc_v2"));
	CHECK(dlvsym(v, "cuMemAlloc_v2", "OTHER_1.0") == NULL);
	CHECK(dlvsym(v, "cuNoSuchFunction", "TESSERA_FIXTURE_1.0") == NULL);
	/* everything else keeps its meaning: versions of the C library,
	 * RTLD_NEXT from the caller, dlerror */
	void *m = dlvsym(RTLD_NEXT, "malloc", "GLIBC_2.2.5");
	void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
	CHECK(m != NULL && libc != NULL);
	CHECK(m == dlsym(libc, "malloc"));   /* (a sanitizer's malloc has no version) */
	CHECK(dlvsym(RTLD_DEFAULT, "malloc", "NO_SUCH_VERSION") == NULL);
	CHECK(dlerror() != NULL);
}

TEST(proc_address_hands_out_hooks)
{
	void *p = NULL;
	CUdriverProcAddressQueryResult st = -1;
	CHECK_INT(cuGetProcAddress("cuMemAlloc", &p, 12000, 0), CUDA_SUCCESS);
	CHECK(from_shim(p));
	CHECK(p == dlsym(RTLD_DEFAULT, "cuMemAlloc_v2"));
	CHECK_INT(cuGetProcAddress_v2("cuMemAlloc", &p, 12040, 0, &st), CUDA_SUCCESS);
	CHECK_INT(st, CU_GET_PROC_ADDRESS_SUCCESS);
	CHECK(p == dlsym(RTLD_DEFAULT, "cuMemAlloc_v2"));
	/* an old version gets the old ABI's hook */
	CHECK_INT(cuGetProcAddress_v2("cuMemAlloc", &p, 3000, 0, &st), CUDA_SUCCESS);
	CHECK(p == dlsym(RTLD_DEFAULT, "cuMemAlloc"));
	CHECK(from_shim(p));
	/* the per-thread default stream variant */
	CHECK_INT(cuGetProcAddress_v2("cuMemAllocAsync", &p, 12000,
				      CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st), CUDA_SUCCESS);
	CHECK(p == dlsym(RTLD_DEFAULT, "cuMemAllocAsync_ptsz"));
	CHECK_INT(cuGetProcAddress_v2("cuLaunchKernel", &p, 12000, 0, &st), CUDA_SUCCESS);
	CHECK(p == dlsym(RTLD_DEFAULT, "cuLaunchKernel"));
	/* asking for cuGetProcAddress itself yields the hook */
	CHECK_INT(cuGetProcAddress_v2("cuGetProcAddress", &p, 12000, 0, &st), CUDA_SUCCESS);
	CHECK(p == dlsym(RTLD_DEFAULT, "cuGetProcAddress_v2"));
	CHECK_INT(cuGetProcAddress_v2("cuGetProcAddress", &p, 11080, 0, &st), CUDA_SUCCESS);
	CHECK(p == dlsym(RTLD_DEFAULT, "cuGetProcAddress"));
	/* not hooked: the driver's (its stub, when it hands out stubs) */
	CHECK_INT(cuGetProcAddress_v2("cuInit", &p, 12000, 0, &st), CUDA_SUCCESS);
	CHECK(by_name() ? !from_shim(p) && !from_mock(p) : from_mock(p));
	CHECK_INT(((CUresult(*)(unsigned int))p)(0), CUDA_SUCCESS);
	/* not found: success, NULL and the reason, as the real driver answers */
	CHECK_INT(cuGetProcAddress_v2("cuNoSuch", &p, 12000, 0, &st), CUDA_SUCCESS);
	CHECK_INT(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
	CHECK(p == NULL);
	p = &st;
	CHECK_INT(cuGetProcAddress("cuNoSuch", &p, 12000, 0), CUDA_ERROR_NOT_FOUND);
	CHECK(p == &st);
}

/* The hooks that see contexts end or take memory through limits are
 * handed out by base name and version, like the allocation hooks. */
TEST(context_hooks_are_handed_out)
{
	static const struct {
		const char *base;
		int version;
		const char *variant;
	} want[] = {
		{ "cuCtxDestroy", 3020, "cuCtxDestroy" },
		{ "cuCtxDestroy", 12000, "cuCtxDestroy_v2" },
		{ "cuDevicePrimaryCtxRelease", 10020, "cuDevicePrimaryCtxRelease" },
		{ "cuDevicePrimaryCtxRelease", 12000, "cuDevicePrimaryCtxRelease_v2" },
		{ "cuDevicePrimaryCtxReset", 10020, "cuDevicePrimaryCtxReset" },
		{ "cuDevicePrimaryCtxReset", 12000, "cuDevicePrimaryCtxReset_v2" },
		{ "cuCtxSetLimit", 12000, "cuCtxSetLimit" },
		{ "cuGreenCtxCreate", 12040, "cuGreenCtxCreate" },
		{ "cuGreenCtxDestroy", 12040, "cuGreenCtxDestroy" },
		{ "cuModuleUnload", 12000, "cuModuleUnload" },
		{ "cuLibraryUnload", 12000, "cuLibraryUnload" },
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		void *p = NULL;
		CHECK_INT(cuGetProcAddress_v2(want[i].base, &p, want[i].version, 0, NULL),
			  CUDA_SUCCESS);
		CHECK(from_shim(p));
		CHECK(p == dlsym(RTLD_DEFAULT, want[i].variant));
	}
	/* green contexts are CUDA 12.4: an older caller is told so */
	void *p = NULL;
	CUdriverProcAddressQueryResult st = -1;
	CHECK_INT(cuGetProcAddress_v2("cuGreenCtxCreate", &p, 12000, 0, &st), CUDA_SUCCESS);
	CHECK_INT(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
	CHECK(p == NULL);
}

/* A base name means a different signature from the version that changed
 * it: cuCtxCreate takes execution affinities from CUDA 11.4 (_v3) and a
 * parameter struct from 12.5 (_v4, what CUDA 13's cuCtxCreate is). Each
 * caller must get the hook of the form it will call, and that hook must
 * work when called that way. */
TEST(each_version_gets_the_hook_of_its_signature)
{
	static const struct {
		int version;
		const char *variant;
	} want[] = {
		{ 3020, "cuCtxCreate_v2" },  { 11030, "cuCtxCreate_v2" },
		{ 11040, "cuCtxCreate_v3" }, { 12040, "cuCtxCreate_v3" },
		{ 12050, "cuCtxCreate_v4" }, { 13000, "cuCtxCreate_v4" },
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		void *p = NULL;
		CHECK_INT(cuGetProcAddress_v2("cuCtxCreate", &p, want[i].version, 0, NULL),
			  CUDA_SUCCESS);
		CHECK(from_shim(p));
		CHECK(p == dlsym(RTLD_DEFAULT, want[i].variant));
	}
	CUcontext c = NULL, cur = NULL;
	CHECK_INT(cuCtxGetCurrent(&cur), CUDA_SUCCESS);
	PFN_ctx3 v3 = NULL;
	PFN_ctx4 v4 = NULL;
	CHECK_INT(cuGetProcAddress_v2("cuCtxCreate", (void **)&v3, 11040, 0, NULL), CUDA_SUCCESS);
	CHECK_INT(cuGetProcAddress_v2("cuCtxCreate", (void **)&v4, 13000, 0, NULL), CUDA_SUCCESS);
	CHECK_INT(v3(&c, NULL, 0, 0, 0), CUDA_SUCCESS);
	CHECK_INT(cuCtxDestroy_v2(c), CUDA_SUCCESS);
	/* an SM-count affinity needs MPS, which the mock (like most machines)
	 * does not run: the driver's answer comes through */
	CUexecAffinityParam aff = { .type = CU_EXEC_AFFINITY_TYPE_SM_COUNT,
				    .param.smCount.val = 8 };
	CHECK_INT(v3(&c, &aff, 1, 0, 0), CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY);
	CHECK_INT(v4(&c, NULL, 0, 0), CUDA_SUCCESS);
	CHECK_INT(cuCtxDestroy_v2(c), CUDA_SUCCESS);
	CUctxCreateParams cp = { .execAffinityParams = NULL };
	CHECK_INT(v4(&c, &cp, 0, 0), CUDA_SUCCESS);
	CHECK_INT(cuCtxDestroy_v2(c), CUDA_SUCCESS);
	cp = (CUctxCreateParams){ .execAffinityParams = &aff, .numExecAffinityParams = 1 };
	CHECK_INT(v4(&c, &cp, 0, 0), CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY);
	CHECK_INT(cuCtxSetCurrent(cur), CUDA_SUCCESS);
}

TEST(entry_points_from_lookups_enforce_the_limit)
{
	CUresult (*alloc)(CUdeviceptr *, size_t) = NULL;
	CUresult (*fre)(CUdeviceptr) = NULL;
	CUresult (*info)(size_t *, size_t *) = NULL;
	CHECK_INT(cuGetProcAddress_v2("cuMemAlloc", (void **)&alloc, 12000, 0, NULL), CUDA_SUCCESS);
	CHECK_INT(cuGetProcAddress_v2("cuMemFree", (void **)&fre, 12000, 0, NULL), CUDA_SUCCESS);
	void *h = dlopen("libcuda.so.1", RTLD_NOW);
	*(void **)&info = dlsym(h, "cuMemGetInfo_v2");
	CUdeviceptr a = 0, b = 0;
	CHECK_INT(alloc(&a, 600 * MiB), CUDA_SUCCESS);
	CHECK_INT(alloc(&b, 600 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
	size_t f = 0, t = 0;
	CHECK_INT(info(&f, &t), CUDA_SUCCESS);
	CHECK_INT(t, 1 * GiB);
	CHECK_INT(f, 1 * GiB - 600 * MiB);
	CHECK_INT(fre(a), CUDA_SUCCESS);
	CHECK_INT(info(&f, &t), CUDA_SUCCESS);
	CHECK_INT(f, 1 * GiB);
}

int main(void)
{
	setenv("TESSERA_MOCK_GPUS", "1x8GiB", 1);
	dir = ft_setup("memory_limit = 1GiB\n");
	CUcontext ctx;
	if (cuInit(0) != CUDA_SUCCESS || cuCtxCreate_v2(&ctx, 0, 0) != CUDA_SUCCESS) {
		fprintf(stderr, "mock driver did not initialize\n");
		return 1;
	}
	RUN(dlsym_hands_out_hooks);
	RUN(rtld_next_still_means_after_the_caller);
	RUN(dlvsym_hands_out_hooks_too);
	RUN(proc_address_hands_out_hooks);
	RUN(context_hooks_are_handed_out);
	RUN(each_version_gets_the_hook_of_its_signature);
	RUN(entry_points_from_lookups_enforce_the_limit);
	ft_cleanup(dir);
	return testlib_done();
}
