/* Launch pacing: a token bucket of GPU time per device.
 *
 * Tokens are nanoseconds of GPU (kernel) time. They accrue at share% of
 * the clock, up to FGPU_PACE_BURST_NS; each kernel's measured duration
 * (cuEventElapsedTime around the launch) is charged when it completes.
 * While the balance is negative the next launch waits until it would be
 * zero again. Over a long run a busy process therefore gets share% of the
 * GPU's time, whatever the kernel sizes. Pure arithmetic: the caller holds
 * the region lock and supplies the clock. */
#ifndef TESSERA_FGPU_PACING_H
#define TESSERA_FGPU_PACING_H

#include <stdint.h>

#include "gpuabi/region.h"

/* Largest credit a device may build up: bounds the burst after idling. */
#define FGPU_PACE_BURST_NS (20LL * 1000 * 1000)

/* Accrues credit up to now. */
void fgpu_pace_refill(struct fgpu_bucket *b, uint64_t now, int share_pct);

/* Charges measured GPU time. */
void fgpu_pace_charge(struct fgpu_bucket *b, int64_t gpu_ns);

/* Nanoseconds of clock to wait before launching (0: launch now). */
uint64_t fgpu_pace_delay(const struct fgpu_bucket *b, int share_pct);

#endif
