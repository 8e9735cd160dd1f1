/* The seccomp profile of session containers, in the JSON that Docker's
 * HostConfig.SecurityOpt takes as "seccomp=<profile>" (docs/security.md,
 * "System calls").
 *
 * A profile given there replaces Docker's default one, so this one is
 * complete: the same allow-list as Docker's default (default action
 * "refuse with EPERM", the system calls it allows, the same conditional
 * rules for clone, clone3, personality and socket, the same syscalls
 * opened by capabilities, architectures and kernel version; where
 * Docker's versions differ, the stricter), with one difference:
 * ioctl is allowed for every request but the four that make a btrfs
 * subvolume or snapshot (BTRFS_IOC_SUBVOL_CREATE, _SUBVOL_CREATE_V2,
 * _SNAP_CREATE, _SNAP_CREATE_V2), which then get EPERM. A subvolume made
 * inside a folder has a qgroup of its own, so writes there would not be
 * charged to the folder's quota (docs/folders.md, "Quotas and usage").
 *
 * How the exception is written, and why so: runc adds a rule's conditions
 * on one argument as separate rules, ORed, so "args[1] != A && args[1] !=
 * B" in one rule would allow every request; and the kernel reads ioctl's
 * request as a 32-bit unsigned int, so a comparison of the whole 64-bit
 * register would let A + (1 << 32) through. The allowed requests are
 * instead the ones whose low 32 bits fall in one of a few blocks, each an
 * ALLOW rule with a single SCMP_CMP_MASKED_EQ condition ((args[1] & mask)
 * == prefix): the blocks together cover every 32-bit value but the four.
 *
 * Pure: no I/O, no globals. */
#ifndef TESSERA_RUNTIME_DOCKER_SECCOMP_H
#define TESSERA_RUNTIME_DOCKER_SECCOMP_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

/* The profile (new reference), NULL when out of memory. */
json_t *docker_seccomp_profile(void);

/* The ioctl requests the profile refuses, as the kernel's headers of the
 * build host define them (the same on x86_64 and aarch64, and on their
 * 32-bit ABIs). */
extern const uint32_t docker_seccomp_refused_ioctls[];
extern const size_t docker_seccomp_n_refused_ioctls;

#endif
