/* The text form of a GPU's 16-byte UUID, as NVML and nvidia-smi show it
 * and the limits file names devices: "GPU-" and the bytes in lower-case
 * hex, grouped 8-4-4-4-12. The shim and gpu-info format what
 * cuDeviceGetUuid returns, discovery and the probe match CUDA's devices
 * to NVML's by it, and the mock driver names its devices with it; one
 * formatter, so that all of them agree. */
#ifndef TESSERA_GPUABI_UUID_H
#define TESSERA_GPUABI_UUID_H

#include <stddef.h>

/* strlen("GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx") + 1 */
#define GPUABI_UUID_STR_SIZE 41

/* Writes the text form of bytes into out (n bytes, truncated and
 * NUL-terminated when n < GPUABI_UUID_STR_SIZE). bytes: 16 bytes, as
 * CUuuid.bytes holds them. */
void gpuabi_uuid_format(const void *bytes, char *out, size_t n);

#endif
