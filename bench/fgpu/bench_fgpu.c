/* Overhead of the fGPU shim: ns per cuLaunchKernel and per
 * cuMemAlloc_v2+cuMemFree_v2 pair, through the hooks versus the bare
 * (mock) driver, measured in the same run. The hooked entry points come
 * from dlsym on libcuda.so.1 (which the preloaded shim answers with its
 * hooks); the bare ones from a second copy of the mock driver loaded with
 * dlmopen into a new link-map namespace, where the preload is absent.
 *
 *   TESSERA_MOCK_GPUS=1x80GiB TESSERA_GPU_MEMORY_LIMIT=40GiB \
 *   LD_PRELOAD=libtessera-fgpu.so LD_LIBRARY_PATH=<mock dir> bench_fgpu [N]
 *
 * The mock's own calls are cheap, so the ratio overstates what it would be
 * on a real driver; the absolute ns added is the figure to read. Pacing is
 * off here (no TESSERA_GPU_SM_LIMIT); with it on, each launch also records
 * two events and queries one. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpuabi/cuda_abi.h"

typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*free_fn)(CUdeviceptr);
typedef CUresult (*launch_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
			      unsigned, unsigned, CUstream, void **, void **);

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static double bench_alloc(alloc_fn a, free_fn f, int n)
{
	double t0 = now_ns();
	for (int i = 0; i < n; i++) {
		CUdeviceptr p;
		if (a(&p, 4096) != CUDA_SUCCESS || f(p) != CUDA_SUCCESS) {
			fprintf(stderr, "alloc/free failed\n");
			exit(1);
		}
	}
	return (now_ns() - t0) / n;
}

static double bench_launch(launch_fn l, int n)
{
	CUfunction fn = (CUfunction)(uintptr_t)0x1000;
	double t0 = now_ns();
	for (int i = 0; i < n; i++)
		if (l(fn, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL) != CUDA_SUCCESS) {
			fprintf(stderr, "launch failed\n");
			exit(1);
		}
	return (now_ns() - t0) / n;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 200000;
	setenv("TESSERA_MOCK_GPUS", "1x80GiB", 0);
	void *h = dlopen("libcuda.so.1", RTLD_NOW);
	if (!h) {
		fprintf(stderr, "cannot load libcuda.so.1: %s\n", dlerror());
		return 1;
	}
	/* The mock driver in a new link-map namespace: the preloaded shim is
	 * not part of it, so these are the bare driver's functions. */
	void *priv = dlmopen(LM_ID_NEWLM, "libcuda.so.1", RTLD_NOW);
	if (!priv) {
		fprintf(stderr, "dlmopen: %s\n", dlerror());
		return 1;
	}
	CUresult (*init)(unsigned), (*pinit)(unsigned);
	CUresult (*ctx)(CUcontext *, unsigned, CUdevice), (*pctx)(CUcontext *, unsigned, CUdevice);
	*(void **)&init = dlsym(h, "cuInit");
	*(void **)&ctx = dlsym(h, "cuCtxCreate_v2");
	/* Not dlsym: the shim's dlsym hands out its hooks for the driver's
	 * names whatever the handle, the private copy's included. The C
	 * library's own dlsym (asked for by version through dlvsym, which the
	 * shim passes through for names it does not hook) does not. */
	void *(*bare_dlsym)(void *, const char *);
	*(void **)&bare_dlsym = dlvsym(RTLD_DEFAULT, "dlsym", "GLIBC_2.34");
	if (!bare_dlsym)
		*(void **)&bare_dlsym = dlvsym(RTLD_DEFAULT, "dlsym", "GLIBC_2.2.5");
	if (!bare_dlsym) {
		fprintf(stderr, "cannot find the C library's dlsym\n");
		return 1;
	}
	*(void **)&pinit = bare_dlsym(priv, "cuInit");
	*(void **)&pctx = bare_dlsym(priv, "cuCtxCreate_v2");
	CUcontext c1, c2;
	if (init(0) || ctx(&c1, 0, 0) || pinit(0) || pctx(&c2, 0, 0)) {
		fprintf(stderr, "mock driver did not initialize (TESSERA_MOCK_GPUS?)\n");
		return 1;
	}
	alloc_fn ha, ba;
	free_fn hf, bf;
	launch_fn hl, bl;
	*(void **)&ha = dlsym(h, "cuMemAlloc_v2");
	*(void **)&hf = dlsym(h, "cuMemFree_v2");
	*(void **)&hl = dlsym(h, "cuLaunchKernel");
	*(void **)&ba = bare_dlsym(priv, "cuMemAlloc_v2");
	*(void **)&bf = bare_dlsym(priv, "cuMemFree_v2");
	*(void **)&bl = bare_dlsym(priv, "cuLaunchKernel");
	Dl_info info;
	int hooked = dladdr((void *)ha, &info) && strstr(info.dli_fname, "libtessera-fgpu");
	if (dladdr((void *)ba, &info) && strstr(info.dli_fname, "libtessera-fgpu")) {
		fprintf(stderr, "the bare driver's functions are the shim's: nothing to compare\n");
		return 1;
	}

	/* warm up both */
	bench_alloc(ba, bf, 1000);
	bench_alloc(ha, hf, 1000);
	/* Alternate rounds and keep the best of each: a shared 2-core
	 * machine makes single runs noisy. */
	double b_alloc = 1e18, h_alloc = 1e18, b_launch = 1e18, h_launch = 1e18;
	for (int round = 0; round < 5; round++) {
		double x;
		if ((x = bench_alloc(ba, bf, n)) < b_alloc) b_alloc = x;
		if ((x = bench_alloc(ha, hf, n)) < h_alloc) h_alloc = x;
		if ((x = bench_launch(bl, n)) < b_launch) b_launch = x;
		if ((x = bench_launch(hl, n)) < h_launch) h_launch = x;
	}
	printf("fGPU shim overhead (mock driver, %d iterations, shim %s)\n", n,
	       hooked ? "loaded" : "NOT loaded: set LD_PRELOAD");
	/* The bare copy lives in its own namespace, where thread-local data
	 * costs a __tls_get_addr call: the added ns is the figure to read. */
	printf("%-28s %12s %12s %10s %8s\n", "operation", "bare ns", "hooked ns", "added ns",
	       "ratio");
	printf("%-28s %12.1f %12.1f %10.1f %8.2f\n", "cuMemAlloc_v2+cuMemFree_v2", b_alloc,
	       h_alloc, h_alloc - b_alloc, h_alloc / b_alloc);
	printf("%-28s %12.1f %12.1f %10.1f %8.2f\n", "cuLaunchKernel", b_launch, h_launch,
	       h_launch - b_launch, h_launch / b_launch);
	return 0;
}
