/* cudart12-probe: what a program built against the CUDA runtime 12 sees,
 * without CUDA's headers: libcudart.so.12 is opened with dlopen and its
 * documented functions are called by their documented signatures.
 *
 *   cudart12-probe SHARE_BYTES
 *
 * Prints one line per step and checks the fGPU share the way a user
 * would: cudaGetDeviceCount, cudaMemGetInfo reporting SHARE_BYTES as the
 * total, cudaMalloc of 64 MiB blocks succeeding up to the share and
 * failing with cudaErrorMemoryAllocation (2) just past it. When the
 * runtime stops, the last line is "stopped at FUNCTION: CODE NAME" and
 * the exit status 3; a check that fails is "FAIL ..." and status 1; all
 * passed is status 0. tests/fgpu/cudart12.sh runs it on the mock driver
 * (where the runtime stops: docs/fgpu.md, "The CUDA runtime on the
 * mock"); on a node with a GPU it runs the same checks for real. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#define MiB (1024ULL * 1024)
#define BLOCK (64 * MiB)
#define CUDA_ERROR_MEMORY_ALLOCATION 2   /* cudaErrorMemoryAllocation */
#define MAX_BLOCKS 65536

static int (*rt_version)(int *);
static int (*drv_version)(int *);
static int (*get_count)(int *);
static int (*mem_info)(size_t *, size_t *);
static int (*rt_malloc)(void **, size_t);
static int (*rt_free)(void *);
static const char *(*err_name)(int);
static const char *(*err_string)(int);

static int stopped(const char *fn, int rc)
{
	printf("stopped at %s: %d %s (%s)\n", fn, rc, err_name(rc), err_string(rc));
	return 3;
}

static void *need(void *h, const char *name)
{
	void *p = dlsym(h, name);
	if (!p) {
		printf("FAIL libcudart.so.12 has no %s\n", name);
		exit(1);
	}
	return p;
}

int main(int argc, char **argv)
{
	char *end = NULL;
	unsigned long long share = argc == 2 ? strtoull(argv[1], &end, 10) : 0;
	if (argc != 2 || !end || *end || share == 0) {
		fprintf(stderr, "usage: cudart12-probe SHARE_BYTES\n");
		return 2;
	}
	void *h = dlopen("libcudart.so.12", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		printf("FAIL cannot load libcudart.so.12: %s\n", dlerror());
		return 1;
	}
	*(void **)&rt_version = need(h, "cudaRuntimeGetVersion");
	*(void **)&drv_version = need(h, "cudaDriverGetVersion");
	*(void **)&get_count = need(h, "cudaGetDeviceCount");
	*(void **)&mem_info = need(h, "cudaMemGetInfo");
	*(void **)&rt_malloc = need(h, "cudaMalloc");
	*(void **)&rt_free = need(h, "cudaFree");
	*(void **)&err_name = need(h, "cudaGetErrorName");
	*(void **)&err_string = need(h, "cudaGetErrorString");

	int v = 0, rc;
	if ((rc = rt_version(&v)) != 0)
		return stopped("cudaRuntimeGetVersion", rc);
	printf("runtime version %d\n", v);
	if ((rc = drv_version(&v)) != 0)
		return stopped("cudaDriverGetVersion", rc);
	printf("driver version %d\n", v);
	int n = 0;
	if ((rc = get_count(&n)) != 0)
		return stopped("cudaGetDeviceCount", rc);
	printf("devices %d\n", n);
	size_t free_b = 0, total_b = 0;
	if ((rc = mem_info(&free_b, &total_b)) != 0)
		return stopped("cudaMemGetInfo", rc);
	printf("memory free %zu total %zu\n", free_b, total_b);
	int fails = 0;
	if (total_b != share) {
		printf("FAIL cudaMemGetInfo total %zu, the share is %llu\n", total_b, share);
		fails++;
	}
	/* Blocks up to what is free, then one more that cannot fit. */
	static void *blocks[MAX_BLOCKS];
	size_t nb = 0;
	while (nb < MAX_BLOCKS && (nb + 1) * BLOCK <= free_b) {
		if ((rc = rt_malloc(&blocks[nb], BLOCK)) != 0) {
			printf("FAIL cudaMalloc of block %zu (%llu MiB in all) within the share: "
			       "%d %s\n", nb + 1, (unsigned long long)((nb + 1) * BLOCK / MiB), rc,
			       err_name(rc));
			fails++;
			break;
		}
		nb++;
	}
	printf("allocated %llu MiB in %zu blocks\n", (unsigned long long)(nb * BLOCK / MiB), nb);
	void *past = NULL;
	size_t over = free_b - nb * BLOCK + 1;   /* one byte more than what is left */
	rc = rt_malloc(&past, over);
	printf("cudaMalloc of %zu bytes past the share: %d %s\n", over, rc, err_name(rc));
	if (rc != CUDA_ERROR_MEMORY_ALLOCATION) {
		printf("FAIL cudaMalloc past the share: %d, not cudaErrorMemoryAllocation\n", rc);
		fails++;
		if (rc == 0)
			rt_free(past);
	}
	for (size_t i = 0; i < nb; i++)
		if ((rc = rt_free(blocks[i])) != 0) {
			printf("FAIL cudaFree: %d %s\n", rc, err_name(rc));
			fails++;
			break;
		}
	printf("%s\n", fails ? "FAILED" : "all checks passed");
	return fails ? 1 : 0;
}
