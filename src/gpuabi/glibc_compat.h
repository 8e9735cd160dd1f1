/* Forced into every file of what Tessera puts into session containers
 * (the fGPU shim, the mock driver and NVML, gpu-info, and the 'container'
 * flavour of the libc-only libraries they link; meson passes -include), so
 * that they load with the C library of any image, not only with one as
 * new as the build machine's.
 *
 * glibc 2.34 moved libdl and libpthread into libc and gave the moved
 * functions a new symbol version (dlopen@GLIBC_2.34 ...); glibc 2.33 made
 * the stat family real functions (fstat64@GLIBC_2.33). A library linked
 * on a newer system asks for those versions, and the dynamic loader of an
 * older image (Debian 11, Ubuntu 20.04: glibc 2.31) refuses it: through
 * /etc/ld.so.preload that stops every program in the container from
 * starting. Newer glibc still provides the old versions, so binding to
 * them works on both: the references below name the versions those
 * functions have had since the architecture's first glibc, and the
 * libraries list libdl.so.2 and libpthread.so.0 (meson.build), where an
 * older glibc keeps them. The stat family is avoided instead (lseek gives
 * a file's size). tests/fgpu/test_glibc_compat.sh checks what the built
 * libraries ask for. */
#ifndef TESSERA_GPUABI_GLIBC_COMPAT_H
#define TESSERA_GPUABI_GLIBC_COMPAT_H

#if defined(__x86_64__)
#define TESSERA_GLIBC_BASE "GLIBC_2.2.5"
#define TESSERA_GLIBC_ROBUST "GLIBC_2.12"
#elif defined(__aarch64__)
#define TESSERA_GLIBC_BASE "GLIBC_2.17"
#define TESSERA_GLIBC_ROBUST "GLIBC_2.17"
#endif

#if defined(TESSERA_GLIBC_BASE) && !defined(__ASSEMBLER__)
#define TESSERA_GLIBC_OLD(fn, ver) __asm__(".symver " #fn "," #fn "@" ver)
TESSERA_GLIBC_OLD(dlopen, TESSERA_GLIBC_BASE);
TESSERA_GLIBC_OLD(dlclose, TESSERA_GLIBC_BASE);
TESSERA_GLIBC_OLD(dlerror, TESSERA_GLIBC_BASE);
TESSERA_GLIBC_OLD(dladdr, TESSERA_GLIBC_BASE);
/* dlsym and dlvsym are left out: the shim defines its own (its hooks).
 * Files that call the C library's define TESSERA_GLIBC_DLSYM first. */
#ifdef TESSERA_GLIBC_DLSYM
TESSERA_GLIBC_OLD(dlsym, TESSERA_GLIBC_BASE);
#endif
TESSERA_GLIBC_OLD(pthread_once, TESSERA_GLIBC_BASE);
TESSERA_GLIBC_OLD(pthread_mutex_trylock, TESSERA_GLIBC_BASE);
TESSERA_GLIBC_OLD(pthread_key_create, TESSERA_GLIBC_BASE);
TESSERA_GLIBC_OLD(pthread_getspecific, TESSERA_GLIBC_BASE);
TESSERA_GLIBC_OLD(pthread_setspecific, TESSERA_GLIBC_BASE);
TESSERA_GLIBC_OLD(pthread_mutexattr_init, TESSERA_GLIBC_BASE);
TESSERA_GLIBC_OLD(pthread_mutexattr_destroy, TESSERA_GLIBC_BASE);
TESSERA_GLIBC_OLD(pthread_mutexattr_settype, TESSERA_GLIBC_BASE);
TESSERA_GLIBC_OLD(pthread_mutexattr_setpshared, TESSERA_GLIBC_BASE);
TESSERA_GLIBC_OLD(pthread_mutexattr_setrobust, TESSERA_GLIBC_ROBUST);
TESSERA_GLIBC_OLD(pthread_mutex_consistent, TESSERA_GLIBC_ROBUST);
#endif

#endif
