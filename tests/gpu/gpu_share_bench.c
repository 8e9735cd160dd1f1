/* gpu-share-bench: the measurements docs/fgpu.md needs from a real GPU,
 * through the CUDA driver API alone. No CUDA toolkit and no framework:
 * the kernels are PTX text that the driver compiles when the module is
 * loaded. The driver is dlopen'ed as "libcuda.so.1" and its entry points
 * fetched with dlsym, so a preloaded libtessera-fgpu.so hooks this
 * program as it hooks user code. Against Tessera's mock driver it runs
 * too (simulated kernels), which is how CI keeps it working.
 *
 *   gpu-share-bench info                  device, SMs, memory as reported
 *   gpu-share-bench alloc SIZE [--how plain|async|graph|reset]
 *                                         allocate SIZE once (cuMemAlloc,
 *                                         cuMemAllocAsync, or a CUDA graph's
 *                                         memory node; reset: cuMemAlloc,
 *                                         reset the device as
 *                                         cudaDeviceReset does, then again):
 *                                         "ok", or "out of memory" and exit 1
 *   gpu-share-bench limit stack|heap BYTES
 *                                         raise the context's stack size
 *                                         (per thread) or malloc heap to
 *                                         BYTES: "ok", how much free memory
 *                                         dropped and what the shim charges
 *                                         for it, or "out of memory", exit 1
 *   gpu-share-bench deep-launch           launch a kernel with 32 KiB of local
 *                                         memory per thread and synchronize:
 *                                         the stack size after it, how much
 *                                         free memory dropped, and what the
 *                                         shim charges for that stack; or
 *                                         "out of memory" and exit 1
 *   gpu-share-bench globals SIZE [--hold SECONDS]
 *                                         load a module with SIZE bytes of
 *                                         __device__ variables (memory the
 *                                         driver places on the device with
 *                                         no allocation call), then hold it:
 *                                         how much free memory dropped, or
 *                                         "out of memory" and exit 1
 *   gpu-share-bench throughput SECONDS [--green-sms N] [--iters N]
 *                                         compute-bound kernels per second
 *                                         (in a green context of N SMs when
 *                                         asked; CUDA 12.4+ drivers)
 *   gpu-share-bench launch-overhead N     ns per launch of an empty kernel
 *   gpu-share-bench alloc-overhead N      ns per cuMemAlloc+cuMemFree (64 MiB)
 *
 * Output: one line, "key value ..." pairs, for scripts. Errors: one line
 * on stderr and exit status 2. */
#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/err.h"
#include "common/units.h"
#include "gpuabi/cuda_abi.h"

/* A kernel that keeps the SMs busy: each thread runs a chain of iters
 * fused multiply-adds and stores the result (so it is not optimized
 * away), and an empty kernel for launch costs. PTX ISA 6.0 / sm_50 so
 * that any driver of the last years can JIT it for its GPU. */
static const char bench_ptx[] =
	".version 6.0\n"
	".target sm_50\n"
	".address_size 64\n"
	".visible .entry spin(.param .u32 iters, .param .u64 out)\n"
	"{\n"
	"	.reg .pred p;\n"
	"	.reg .b32 r<3>;\n"
	"	.reg .f32 f<4>;\n"
	"	.reg .b64 rd<3>;\n"
	"	ld.param.u32 r1, [iters];\n"
	"	mov.f32 f1, 0f3F800000;\n"
	"	mov.f32 f2, 0f3F7FFFFE;\n"
	"	mov.f32 f3, 0f00000000;\n"
	"	mov.u32 r2, 0;\n"
	"LOOP:\n"
	"	fma.rn.f32 f3, f3, f2, f1;\n"
	"	add.u32 r2, r2, 1;\n"
	"	setp.lt.u32 p, r2, r1;\n"
	"	@p bra LOOP;\n"
	"	ld.param.u64 rd1, [out];\n"
	"	cvta.to.global.u64 rd2, rd1;\n"
	"	st.global.f32 [rd2], f3;\n"
	"	ret;\n"
	"}\n"
	".visible .entry empty()\n"
	"{\n"
	"	ret;\n"
	"}\n"
	/* 32 KiB of local memory per thread, indexed at run time so that it
	 * is kept: more than the default stack, which the driver grows */
	".visible .entry deep(.param .u32 idx, .param .u64 out)\n"
	"{\n"
	"	.local .align 4 .b8 buf[32768];\n"
	"	.reg .b32 q<4>;\n"
	"	.reg .b64 a<6>;\n"
	"	ld.param.u32 q1, [idx];\n"
	"	and.b32 q1, q1, 8191;\n"
	"	mul.wide.u32 a1, q1, 4;\n"
	"	mov.u64 a2, buf;\n"
	"	add.u64 a3, a2, a1;\n"
	"	st.local.u32 [a3], q1;\n"
	"	xor.b32 q2, q1, 1;\n"
	"	mul.wide.u32 a4, q2, 4;\n"
	"	add.u64 a5, a2, a4;\n"
	"	ld.local.u32 q3, [a5];\n"
	"	ld.param.u64 a1, [out];\n"
	"	cvta.to.global.u64 a1, a1;\n"
	"	st.global.u32 [a1], q3;\n"
	"	ret;\n"
	"}\n";

typedef struct CUgreenCtx_st *CUgreenCtx;
typedef struct CUdevResourceDesc_st *CUdevResourceDesc;

/* CUdevResource (CUDA 12.4+): an int type, then 92 bytes the driver keeps
 * to itself, then a union whose SM member starts with smCount. Buffers are
 * kept larger than the 144 bytes of that layout in case a driver writes
 * more. */
#define RES_BYTES 512
#define RES_TYPE_SM 1
#define RES_SM_COUNT_OFFSET 96
#define GREEN_CTX_DEFAULT_STREAM 0x1
#define STREAM_NON_BLOCKING 0x1

static struct {
	CUresult (*Init)(unsigned);
	CUresult (*DeviceGet)(CUdevice *, int);
	CUresult (*DeviceGetName)(char *, int, CUdevice);
	CUresult (*DeviceGetAttribute)(int *, int, CUdevice);
	CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
	CUresult (*CtxSetCurrent)(CUcontext);
	CUresult (*CtxSynchronize)(void);
	CUresult (*MemGetInfo)(size_t *, size_t *);
	CUresult (*MemAlloc)(CUdeviceptr *, size_t);
	CUresult (*MemFree)(CUdeviceptr);
	CUresult (*ModuleLoadData)(CUmodule *, const void *);
	CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
	CUresult (*StreamCreate)(CUstream *, unsigned);
	CUresult (*StreamSynchronize)(CUstream);
	CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
				 unsigned, unsigned, CUstream, void **, void **);
	CUresult (*GetErrorName)(CUresult, const char **);
	CUresult (*DevicePrimaryCtxReset)(CUdevice);
	CUresult (*CtxSetLimit)(int, size_t);
	CUresult (*CtxGetLimit)(size_t *, int);
	/* stream-ordered allocation and graphs, optional (alloc --how) */
	CUresult (*MemAllocAsync)(CUdeviceptr *, size_t, CUstream);
	CUresult (*MemFreeAsync)(CUdeviceptr, CUstream);
	CUresult (*StreamBeginCapture)(CUstream, int);
	CUresult (*StreamEndCapture)(CUstream, CUgraph *);
	CUresult (*GraphInstantiateWithFlags)(CUgraphExec *, CUgraph, unsigned long long);
	CUresult (*GraphLaunch)(CUgraphExec, CUstream);
	/* green contexts, optional */
	CUresult (*DeviceGetDevResource)(CUdevice, void *, int);
	CUresult (*DevSmResourceSplitByCount)(void *, unsigned *, const void *, void *, unsigned,
					      unsigned);
	CUresult (*DevResourceGenerateDesc)(CUdevResourceDesc *, void *, unsigned);
	CUresult (*GreenCtxCreate)(CUgreenCtx *, CUdevResourceDesc, CUdevice, unsigned);
	CUresult (*CtxFromGreenCtx)(CUcontext *, CUgreenCtx);
	CUresult (*GreenCtxStreamCreate)(CUstream *, CUgreenCtx, unsigned, int);
} cu;

static CUdevice dev;
static CUstream stream;
static CUfunction k_spin, k_empty, k_deep;
static CUdeviceptr out;

static void die(const char *what, CUresult rc)
{
	const char *name = NULL;
	if (cu.GetErrorName)
		cu.GetErrorName(rc, &name);
	fprintf(stderr, "gpu-share-bench: %s failed: %s (%d)\n", what, name ? name : "?", rc);
	exit(2);
}

#define CALL(expr) do { CUresult rc_ = (expr); if (rc_ != CUDA_SUCCESS) die(#expr, rc_); } while (0)

static void load_driver(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW);
	if (!h) {
		fprintf(stderr, "gpu-share-bench: cannot load libcuda.so.1: %s\n", dlerror());
		exit(2);
	}
	/* The driver's own names: cuda.h maps several to versioned symbols. */
	static const struct { const char *name; void **slot; bool optional; } syms[] = {
		{ "cuInit", (void **)&cu.Init, false },
		{ "cuDeviceGet", (void **)&cu.DeviceGet, false },
		{ "cuDeviceGetName", (void **)&cu.DeviceGetName, false },
		{ "cuDeviceGetAttribute", (void **)&cu.DeviceGetAttribute, false },
		{ "cuDevicePrimaryCtxRetain", (void **)&cu.DevicePrimaryCtxRetain, false },
		{ "cuCtxSetCurrent", (void **)&cu.CtxSetCurrent, false },
		{ "cuCtxSynchronize", (void **)&cu.CtxSynchronize, false },
		{ "cuMemGetInfo_v2", (void **)&cu.MemGetInfo, false },
		{ "cuMemAlloc_v2", (void **)&cu.MemAlloc, false },
		{ "cuMemFree_v2", (void **)&cu.MemFree, false },
		{ "cuModuleLoadData", (void **)&cu.ModuleLoadData, false },
		{ "cuModuleGetFunction", (void **)&cu.ModuleGetFunction, false },
		{ "cuStreamCreate", (void **)&cu.StreamCreate, false },
		{ "cuStreamSynchronize", (void **)&cu.StreamSynchronize, false },
		{ "cuLaunchKernel", (void **)&cu.LaunchKernel, false },
		{ "cuGetErrorName", (void **)&cu.GetErrorName, true },
		{ "cuDevicePrimaryCtxReset_v2", (void **)&cu.DevicePrimaryCtxReset, false },
		{ "cuCtxSetLimit", (void **)&cu.CtxSetLimit, false },
		{ "cuCtxGetLimit", (void **)&cu.CtxGetLimit, false },
		{ "cuMemAllocAsync", (void **)&cu.MemAllocAsync, true },
		{ "cuMemFreeAsync", (void **)&cu.MemFreeAsync, true },
		{ "cuStreamBeginCapture_v2", (void **)&cu.StreamBeginCapture, true },
		{ "cuStreamEndCapture", (void **)&cu.StreamEndCapture, true },
		{ "cuGraphInstantiateWithFlags", (void **)&cu.GraphInstantiateWithFlags, true },
		{ "cuGraphLaunch", (void **)&cu.GraphLaunch, true },
		{ "cuDeviceGetDevResource", (void **)&cu.DeviceGetDevResource, true },
		{ "cuDevSmResourceSplitByCount", (void **)&cu.DevSmResourceSplitByCount, true },
		{ "cuDevResourceGenerateDesc", (void **)&cu.DevResourceGenerateDesc, true },
		{ "cuGreenCtxCreate", (void **)&cu.GreenCtxCreate, true },
		{ "cuCtxFromGreenCtx", (void **)&cu.CtxFromGreenCtx, true },
		{ "cuGreenCtxStreamCreate", (void **)&cu.GreenCtxStreamCreate, true },
	};
	for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		*syms[i].slot = dlsym(h, syms[i].name);
		if (!*syms[i].slot && !syms[i].optional) {
			fprintf(stderr, "gpu-share-bench: the driver has no %s\n", syms[i].name);
			exit(2);
		}
	}
}

/* Context (primary, or a green one of green_sms SMs), stream, module. */
static void setup(int green_sms)
{
	CALL(cu.Init(0));
	CALL(cu.DeviceGet(&dev, 0));
	CUcontext ctx;
	if (green_sms <= 0) {
		CALL(cu.DevicePrimaryCtxRetain(&ctx, dev));
		CALL(cu.CtxSetCurrent(ctx));
		CALL(cu.StreamCreate(&stream, STREAM_NON_BLOCKING));
	} else {
		if (!cu.DeviceGetDevResource || !cu.DevSmResourceSplitByCount ||
		    !cu.DevResourceGenerateDesc || !cu.GreenCtxCreate || !cu.CtxFromGreenCtx) {
			fprintf(stderr, "gpu-share-bench: this driver has no green contexts\n");
			exit(2);
		}
		static unsigned char all[RES_BYTES], part[RES_BYTES], rest[RES_BYTES];
		unsigned groups = 1;
		CUdevResourceDesc desc;
		CUgreenCtx green;
		CALL(cu.DeviceGetDevResource(dev, all, RES_TYPE_SM));
		CALL(cu.DevSmResourceSplitByCount(part, &groups, all, rest, 0, (unsigned)green_sms));
		CALL(cu.DevResourceGenerateDesc(&desc, part, 1));
		CALL(cu.GreenCtxCreate(&green, desc, dev, GREEN_CTX_DEFAULT_STREAM));
		CALL(cu.CtxFromGreenCtx(&ctx, green));
		CALL(cu.CtxSetCurrent(ctx));
		if (cu.GreenCtxStreamCreate)
			CALL(cu.GreenCtxStreamCreate(&stream, green, STREAM_NON_BLOCKING, 0));
		else
			CALL(cu.StreamCreate(&stream, STREAM_NON_BLOCKING));
		unsigned got;
		memcpy(&got, part + RES_SM_COUNT_OFFSET, sizeof(got));
		fprintf(stderr, "gpu-share-bench: green context of %u SMs (asked %d)\n", got,
			green_sms);
	}
	CUmodule mod;
	CALL(cu.ModuleLoadData(&mod, bench_ptx));
	CALL(cu.ModuleGetFunction(&k_spin, mod, "spin"));
	CALL(cu.ModuleGetFunction(&k_empty, mod, "empty"));
	CALL(cu.ModuleGetFunction(&k_deep, mod, "deep"));
	CALL(cu.MemAlloc(&out, 4096));
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int sm_count(void)
{
	int sms = 0;
	CALL(cu.DeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
	return sms;
}

static void spin(unsigned blocks, unsigned iters)
{
	void *params[] = { &iters, &out };
	CALL(cu.LaunchKernel(k_spin, blocks, 1, 1, 256, 1, 1, 0, stream, params, NULL));
}

/* Kernels per second over secs seconds of wall time, synchronizing every
 * 10 launches so that at most 10 are queued (a busy tenant, not a queue). */
static void cmd_throughput(double secs, int green_sms, unsigned iters)
{
	setup(green_sms);
	unsigned blocks = (unsigned)sm_count() * 8;
	for (int i = 0; i < 5; i++)
		spin(blocks, iters);
	CALL(cu.StreamSynchronize(stream));
	long n = 0;
	double t0 = now_s(), t;
	do {
		for (int i = 0; i < 10; i++)
			spin(blocks, iters);
		CALL(cu.StreamSynchronize(stream));
		n += 10;
	} while ((t = now_s()) - t0 < secs);
	printf("kernels_per_s %.3f kernels %ld seconds %.3f blocks %u iters %u\n",
	       (double)n / (t - t0), n, t - t0, blocks, iters);
}

static void cmd_launch_overhead(long n)
{
	setup(0);
	for (int i = 0; i < 100; i++)
		CALL(cu.LaunchKernel(k_empty, 1, 1, 1, 32, 1, 1, 0, stream, NULL, NULL));
	CALL(cu.StreamSynchronize(stream));
	double t0 = now_s();
	for (long i = 0; i < n; i++)
		CALL(cu.LaunchKernel(k_empty, 1, 1, 1, 32, 1, 1, 0, stream, NULL, NULL));
	CALL(cu.StreamSynchronize(stream));
	printf("ns_per_launch %.1f launches %ld\n", (now_s() - t0) * 1e9 / (double)n, n);
}

static void cmd_alloc_overhead(long n)
{
	setup(0);
	double t0 = now_s();
	for (long i = 0; i < n; i++) {
		CUdeviceptr p;
		CALL(cu.MemAlloc(&p, 64u << 20));
		CALL(cu.MemFree(p));
	}
	printf("ns_per_alloc_free %.1f pairs %ld\n", (now_s() - t0) * 1e9 / (double)n, n);
}

static void cmd_info(void)
{
	setup(0);
	char name[128] = "";
	size_t f = 0, t = 0;
	CALL(cu.DeviceGetName(name, sizeof(name), dev));
	CALL(cu.MemGetInfo(&f, &t));
	for (char *c = name; *c; c++)
		if (*c == ' ')
			*c = '_';
	printf("name %s sms %d memory_total %zu memory_free %zu\n", name, sm_count(), t, f);
}

enum alloc_how { HOW_PLAIN, HOW_ASYNC, HOW_GRAPH, HOW_RESET };

/* One allocation of bytes, as a program would make it: cuMemAlloc_v2, a
 * stream-ordered cuMemAllocAsync (from the device's pool), or a CUDA
 * graph whose captured cuMemAllocAsync/cuMemFreeAsync become memory
 * nodes, allocated when the graph is launched. */
static int cmd_alloc(int64_t bytes, enum alloc_how how)
{
	setup(0);
	CUdeviceptr p;
	CUresult rc;
	const char *what = "cuMemAlloc_v2";
	if (how != HOW_PLAIN && (!cu.MemAllocAsync || !cu.MemFreeAsync)) {
		fprintf(stderr, "gpu-share-bench: this driver has no stream-ordered allocator\n");
		exit(2);
	}
	if (how == HOW_PLAIN) {
		rc = cu.MemAlloc(&p, (size_t)bytes);
	} else if (how == HOW_RESET) {
		/* the first allocation must fit; after the reset, so must the
		 * second: the reset freed the first */
		CALL(cu.MemAlloc(&p, (size_t)bytes));
		CALL(cu.DevicePrimaryCtxReset(dev));
		CUcontext ctx;
		CALL(cu.DevicePrimaryCtxRetain(&ctx, dev));
		CALL(cu.CtxSetCurrent(ctx));
		what = "cuMemAlloc_v2 after cuDevicePrimaryCtxReset_v2";
		rc = cu.MemAlloc(&p, (size_t)bytes);
	} else if (how == HOW_ASYNC) {
		what = "cuMemAllocAsync";
		rc = cu.MemAllocAsync(&p, (size_t)bytes, stream);
		if (rc == CUDA_SUCCESS) {
			CALL(cu.MemFreeAsync(p, stream));
			CALL(cu.StreamSynchronize(stream));
		}
	} else {
		if (!cu.StreamBeginCapture || !cu.StreamEndCapture ||
		    !cu.GraphInstantiateWithFlags || !cu.GraphLaunch) {
			fprintf(stderr, "gpu-share-bench: this driver has no graph memory nodes\n");
			exit(2);
		}
		CUgraph g;
		CUgraphExec e;
		CALL(cu.StreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
		CALL(cu.MemAllocAsync(&p, (size_t)bytes, stream));
		CALL(cu.MemFreeAsync(p, stream));
		CALL(cu.StreamEndCapture(stream, &g));
		CALL(cu.GraphInstantiateWithFlags(&e, g, 0));
		what = "cuGraphLaunch";
		rc = cu.GraphLaunch(e, stream);
		if (rc == CUDA_SUCCESS)
			CALL(cu.StreamSynchronize(stream));
	}
	if (rc == CUDA_ERROR_OUT_OF_MEMORY) {
		printf("out of memory\n");
		return 1;
	}
	if (rc != CUDA_SUCCESS)
		die(what, rc);
	printf("ok\n");
	return 0;
}

/* Raises a memory-sizing limit of the primary context. free_drop is what
 * cuMemGetInfo's free fell by (right away: a driver may reserve later);
 * charged is what the shim counts for the change, the difference times
 * the resident threads (MAX_THREADS_PER_MULTIPROCESSOR x SMs) for the
 * stack. */
static int cmd_limit(CUlimit limit, size_t value)
{
	setup(0);
	size_t before = 0, f0 = 0, f1 = 0, t = 0, set = 0;
	CALL(cu.CtxGetLimit(&before, limit));
	CALL(cu.MemGetInfo(&f0, &t));
	CUresult rc = cu.CtxSetLimit(limit, value);
	if (rc == CUDA_ERROR_OUT_OF_MEMORY) {
		printf("out of memory\n");
		return 1;
	}
	if (rc != CUDA_SUCCESS)
		die("cuCtxSetLimit", rc);
	CALL(cu.CtxGetLimit(&set, limit));
	CALL(cu.MemGetInfo(&f1, &t));
	long long charged = set > before ? (long long)(set - before) : 0;
	if (limit == CU_LIMIT_STACK_SIZE) {
		int per_sm = 0;
		CALL(cu.DeviceGetAttribute(&per_sm, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR,
					   dev));
		charged *= (long long)per_sm * sm_count();
	}
	printf("ok value %zu free_drop %lld charged %lld\n", set, (long long)f0 - (long long)f1,
	       charged);
	return 0;
}

/* The stack the driver grows by itself for a kernel that needs more
 * local memory than the stack limit (the same figures as cmd_limit). */
static int cmd_deep_launch(void)
{
	setup(0);
	size_t before = 0, after = 0, f0 = 0, f1 = 0, t = 0;
	unsigned idx = 5;
	void *params[] = { &idx, &out };
	CALL(cu.CtxGetLimit(&before, CU_LIMIT_STACK_SIZE));
	CALL(cu.MemGetInfo(&f0, &t));
	CUresult rc = cu.LaunchKernel(k_deep, 1, 1, 1, 32, 1, 1, 0, stream, params, NULL);
	if (rc == CUDA_ERROR_OUT_OF_MEMORY) {
		printf("out of memory\n");
		return 1;
	}
	if (rc != CUDA_SUCCESS)
		die("cuLaunchKernel", rc);
	CALL(cu.StreamSynchronize(stream));
	CALL(cu.CtxGetLimit(&after, CU_LIMIT_STACK_SIZE));
	CALL(cu.MemGetInfo(&f1, &t));
	int per_sm = 0;
	CALL(cu.DeviceGetAttribute(&per_sm, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, dev));
	long long charged = after > before ? (long long)(after - before) * per_sm * sm_count() : 0;
	printf("ok value %zu free_drop %lld charged %lld free_after %zu\n", after,
	       (long long)f0 - (long long)f1, charged, f1);
	return 0;
}

static int cmd_globals(int64_t bytes, long hold_s)
{
	setup(0);
	char ptx[512];
	snprintf(ptx, sizeof(ptx),
		 ".version 6.0\n.target sm_50\n.address_size 64\n"
		 ".visible .global .align 8 .b8 tessera_globals[%lld];\n"
		 ".visible .entry globals_touch()\n{\n\tret;\n}\n", (long long)bytes);
	size_t f0 = 0, f1 = 0, t = 0;
	CALL(cu.MemGetInfo(&f0, &t));
	CUmodule m;
	CUresult rc = cu.ModuleLoadData(&m, ptx);
	if (rc == CUDA_ERROR_OUT_OF_MEMORY) {
		printf("out of memory\n");
		return 1;
	}
	if (rc != CUDA_SUCCESS)
		die("cuModuleLoadData", rc);
	CALL(cu.MemGetInfo(&f1, &t));
	printf("ok free_drop %lld\n", (long long)f0 - (long long)f1);
	fflush(stdout);
	struct timespec ts = {hold_s, 0};
	while (hold_s > 0 && nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
	return 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: gpu-share-bench info | alloc SIZE [--how plain|async|graph|reset] | "
			"limit stack|heap BYTES | deep-launch | globals SIZE [--hold SECONDS] | "
			"throughput SECONDS [--green-sms N] [--iters N] | "
			"launch-overhead N | alloc-overhead N\n");
	exit(2);
}

static long positive(const char *s)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || *end || v <= 0) {
		fprintf(stderr, "gpu-share-bench: not a positive number: %s\n", s);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		usage();
	load_driver();
	const char *cmd = argv[1];
	if (strcmp(cmd, "info") == 0 && argc == 2) {
		cmd_info();
	} else if (strcmp(cmd, "alloc") == 0 && (argc == 3 || argc == 5)) {
		int64_t bytes;
		struct terr err;
		if (units_parse_size(argv[2], &bytes, &err) < 0 || bytes <= 0) {
			fprintf(stderr, "gpu-share-bench: bad size %s\n", argv[2]);
			return 2;
		}
		enum alloc_how how = HOW_PLAIN;
		if (argc == 5) {
			if (strcmp(argv[3], "--how") != 0)
				usage();
			if (strcmp(argv[4], "async") == 0)
				how = HOW_ASYNC;
			else if (strcmp(argv[4], "graph") == 0)
				how = HOW_GRAPH;
			else if (strcmp(argv[4], "reset") == 0)
				how = HOW_RESET;
			else if (strcmp(argv[4], "plain") != 0)
				usage();
		}
		return cmd_alloc(bytes, how);
	} else if (strcmp(cmd, "limit") == 0 && argc == 4) {
		int64_t bytes;
		struct terr err;
		if (units_parse_size(argv[3], &bytes, &err) < 0 || bytes <= 0) {
			fprintf(stderr, "gpu-share-bench: bad size %s\n", argv[3]);
			return 2;
		}
		if (strcmp(argv[2], "stack") == 0)
			return cmd_limit(CU_LIMIT_STACK_SIZE, (size_t)bytes);
		if (strcmp(argv[2], "heap") == 0)
			return cmd_limit(CU_LIMIT_MALLOC_HEAP_SIZE, (size_t)bytes);
		usage();
	} else if (strcmp(cmd, "deep-launch") == 0 && argc == 2) {
		return cmd_deep_launch();
	} else if (strcmp(cmd, "globals") == 0 && (argc == 3 || argc == 5)) {
		int64_t bytes;
		struct terr err;
		if (units_parse_size(argv[2], &bytes, &err) < 0 || bytes <= 0) {
			fprintf(stderr, "gpu-share-bench: bad size %s\n", argv[2]);
			return 2;
		}
		long hold = 0;
		if (argc == 5) {
			if (strcmp(argv[3], "--hold") != 0)
				usage();
			hold = positive(argv[4]);
		}
		return cmd_globals(bytes, hold);
	} else if (strcmp(cmd, "throughput") == 0 && argc >= 3) {
		int green = 0;
		unsigned iters = 4096;
		for (int i = 3; i < argc; i++) {
			if (strcmp(argv[i], "--green-sms") == 0 && i + 1 < argc)
				green = (int)positive(argv[++i]);
			else if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc)
				iters = (unsigned)positive(argv[++i]);
			else
				usage();
		}
		cmd_throughput((double)positive(argv[2]), green, iters);
	} else if (strcmp(cmd, "launch-overhead") == 0 && argc == 3) {
		cmd_launch_overhead(positive(argv[2]));
	} else if (strcmp(cmd, "alloc-overhead") == 0 && argc == 3) {
		cmd_alloc_overhead(positive(argv[2]));
	} else {
		usage();
	}
	return 0;
}
