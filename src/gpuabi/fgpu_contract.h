/* The contract between the agent and the fGPU library (libtessera-fgpu.so)
 * inside a GPU session's container. The agent includes this header and
 * derives every mount and file it writes from these definitions; the shim
 * and gpu-info read the same names. docs/fgpu.md explains the mechanism.
 *
 * Mounts the agent sets up (host side paths are the agent's business):
 *
 *   FGPU_LIB_PATH        the shim, read-only.
 *   FGPU_PRELOAD_PATH    a read-only file holding FGPU_LIB_PATH and "\n",
 *                        so that every dynamically linked process loads the
 *                        shim, whatever its environment.
 *   FGPU_CONF_PATH       the limits file (format below), read-only.
 *   FGPU_RUN_DIR         a per-session host directory, read-write, holding
 *                        the shared accounting region FGPU_REGION_PATH that
 *                        all processes of the container share. The shim
 *                        creates the region file itself on first use.
 *   FGPU_GPU_INFO_PATH   the gpu-info tool, read-only.
 *   FGPU_MOCK_SMI_PATH   mock GPUs only: the mock driver's nvidia-smi,
 *                        read-only (real GPUs: the host's, at its path).
 *   FGPU_TURN_DIR        the node's GPU turn files, read-only: two empty
 *                        files per physical GPU of the node, named by its
 *                        UUID and UUID FGPU_TURN_WAIT_SUFFIX, the same
 *                        directory in every GPU session (fgpu/turn.h:
 *                        paced tenants take turns at a GPU).
 *   Real GPUs: the host's libcuda.so.1 / libnvidia-ml.so.1 / nvidia-smi
 *   and the allocated /dev/nvidia* nodes, as usual.
 *   Mock GPUs: FGPU_MOCK_CUDA_PATH and FGPU_MOCK_NVML_PATH (the mock
 *   libraries, read-only, where the driver's would be), the mock spec file
 *   FGPU_MOCK_SPEC_PATH (first line "COUNTxMEM[:SMS],...", the host's
 *   physical mock devices; then "visible = UUID,..." naming the session's
 *   devices, the only ones the mock driver then shows), and a directory at
 *   FGPU_MOCK_STATE_DIR, read-write, per session: device usage is shared by
 *   the session's processes. It is not shared across sessions because its
 *   slots are keyed by pid, and each container has its own PID namespace.
 *
 * Limits file (FGPU_CONF_PATH): text, one "key = value" per line, '#'
 * comments, unknown keys ignored (forward compatibility), values in bytes
 * or with units_parse_size suffixes:
 *
 *   version = 1
 *   fgpu = 0.5                         # informational (milli-units text)
 *   devices = 2                        # devices listed below, by index
 *   device.0.uuid = GPU-...            # matched against the driver's UUID
 *   device.0.memory_limit = 4294967296 # bytes this session may use
 *   device.1.uuid = GPU-...
 *   device.1.memory_limit = 4294967296
 *   device.1.sm_limit_percent = 50     # this device's compute share
 *   sm_limit_percent = 100             # compute share of devices without
 *                                      # their own, 1..100 (100 = off)
 *   context_overhead = 0               # bytes counted per process and device
 *                                      # for the CUDA context itself
 *   region = /run/tessera/fgpu.region  # optional, default FGPU_REGION_PATH
 *   turn_dir = /run/tessera-turns      # optional, default FGPU_TURN_DIR
 *   turn_quantum_us = 10000            # optional: how long a GPU turn is
 *                                      # held while others wait (turn.h)
 *
 * A device the driver shows but the file does not list (by UUID when
 * UUIDs are given, else by ordinal) gets a limit of 0: fail closed.
 * "memory_limit = N" without "devices" applies to every device.
 *
 * Environment (FGPU_ENV_*): when FGPU_CONF_PATH exists it is authoritative
 * and the variables can only tighten it (a smaller memory or SM limit);
 * the conf/region/turn path overrides are ignored, so a process that changes
 * or clears its environment is still limited. Without the file (tests,
 * development) the variables configure the shim; with neither, the shim
 * passes everything through. */
#ifndef TESSERA_GPUABI_FGPU_CONTRACT_H
#define TESSERA_GPUABI_FGPU_CONTRACT_H

/* Paths inside the container. */
#define FGPU_LIB_DIR          "/opt/tessera/lib"
#define FGPU_LIB_PATH         FGPU_LIB_DIR "/libtessera-fgpu.so"
#define FGPU_PRELOAD_PATH     "/etc/ld.so.preload"
#define FGPU_CONF_DIR         "/etc/tessera"
#define FGPU_CONF_PATH        FGPU_CONF_DIR "/fgpu.conf"
#define FGPU_RUN_DIR          "/run/tessera"
#define FGPU_REGION_NAME      "fgpu.region"
#define FGPU_REGION_PATH      FGPU_RUN_DIR "/" FGPU_REGION_NAME
#define FGPU_BIN_DIR          "/opt/tessera/bin"
#define FGPU_GPU_INFO_PATH    FGPU_BIN_DIR "/gpu-info"
#define FGPU_MOCK_SMI_PATH    FGPU_BIN_DIR "/nvidia-smi"
#define FGPU_TURN_DIR         "/run/tessera-turns"
#define FGPU_TURN_WAIT_SUFFIX ".wait"   /* "UUID" and "UUID.wait" per GPU */

/* Mock GPUs: where the mock libraries replace the driver's (Debian/Ubuntu
 * multiarch directory, searched by default by their dynamic loader). */
#define FGPU_DRIVER_LIB_DIR   "/usr/lib/x86_64-linux-gnu"
#define FGPU_MOCK_CUDA_PATH   FGPU_DRIVER_LIB_DIR "/libcuda.so.1"
#define FGPU_MOCK_NVML_PATH   FGPU_DRIVER_LIB_DIR "/libnvidia-ml.so.1"
#define FGPU_MOCK_SPEC_PATH   FGPU_CONF_DIR "/mock-gpus"
#define FGPU_MOCK_STATE_DIR   "/run/tessera-mock"

/* File names of the build outputs (in the build dir: src/fgpu/,
 * src/gpu/). */
#define FGPU_LIB_NAME         "libtessera-fgpu.so"
#define FGPU_MOCK_CUDA_NAME   "libcuda.so.1"
#define FGPU_MOCK_NVML_NAME   "libnvidia-ml.so.1"
#define FGPU_GPU_INFO_NAME    "gpu-info"
#define FGPU_MOCK_SMI_NAME    "tessera-mock-nvidia-smi"
#define FGPU_GPU_PROBE_NAME   "tessera-gpu-probe"

/* Environment. */
#define FGPU_ENV_FGPU         "TESSERA_FGPU"              /* informational fGPU amount */
#define FGPU_ENV_MEMORY_LIMIT "TESSERA_GPU_MEMORY_LIMIT"  /* bytes per device */
#define FGPU_ENV_SM_LIMIT     "TESSERA_GPU_SM_LIMIT"      /* percent */
#define FGPU_ENV_CONF         "TESSERA_FGPU_CONF"         /* conf path, only without FGPU_CONF_PATH */
#define FGPU_ENV_REGION       "TESSERA_FGPU_REGION"       /* region path, only without FGPU_CONF_PATH */
#define FGPU_ENV_TURN_DIR     "TESSERA_FGPU_TURN_DIR"     /* turn files, only without FGPU_CONF_PATH */
#define FGPU_ENV_MOCK_GPUS    "TESSERA_MOCK_GPUS"         /* mock spec */
#define FGPU_ENV_MOCK_GPUS_FILE "TESSERA_MOCK_GPUS_FILE"  /* mock spec file */
#define FGPU_ENV_MOCK_STATE   "TESSERA_MOCK_STATE"        /* mock state file */

/* Limits-file keys. */
#define FGPU_KEY_VERSION      "version"
#define FGPU_KEY_FGPU         "fgpu"
#define FGPU_KEY_DEVICES      "devices"
#define FGPU_KEY_DEVICE_FMT_UUID  "device.%d.uuid"
#define FGPU_KEY_DEVICE_FMT_LIMIT "device.%d.memory_limit"
#define FGPU_KEY_DEVICE_FMT_SM    "device.%d.sm_limit_percent"
#define FGPU_KEY_MEMORY_LIMIT "memory_limit"
#define FGPU_KEY_SM_LIMIT     "sm_limit_percent"
#define FGPU_KEY_CTX_OVERHEAD "context_overhead"
#define FGPU_KEY_REGION       "region"
#define FGPU_KEY_TURN_DIR     "turn_dir"
#define FGPU_KEY_TURN_QUANTUM_US "turn_quantum_us"
/* "pacing_clock = driver" makes pacing use the mock driver's simulated
 * clock (tests only); the default is CLOCK_MONOTONIC. */
#define FGPU_KEY_PACING_CLOCK "pacing_clock"

#define FGPU_CONF_VERSION     1
#define FGPU_MAX_DEVICES      16

#endif
