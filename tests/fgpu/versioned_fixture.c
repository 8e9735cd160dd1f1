/* A library whose driver-named symbol carries a version, so that the
 * shim's dlvsym path can be tested for real: glibc's dlvsym never matches
 * an unversioned symbol (the mock driver's, like NVIDIA's libcuda). */
typedef int CUresult;

__attribute__((visibility("default"))) CUresult cuMemAlloc_v2(unsigned long long *p,
							      unsigned long n);
CUresult cuMemAlloc_v2(unsigned long long *p, unsigned long n)
{
	(void)p;
	(void)n;
	return 999;
}
