#include "fgpu/pacing.h"

void fgpu_pace_refill(struct fgpu_bucket *b, uint64_t now, int share_pct)
{
	if (b->last == 0 || now < b->last) {
		/* First use (or a clock that went back, e.g. a different
		 * process's simulated clock): start with no credit. */
		b->last = now;
		return;
	}
	uint64_t dt = now - b->last;
	/* dt * share / 100 without overflow for any realistic dt. */
	int64_t add = dt > (uint64_t)INT64_MAX / 100 ? INT64_MAX / 100
						     : (int64_t)(dt * (uint64_t)share_pct / 100);
	b->tokens = b->tokens > FGPU_PACE_BURST_NS - add ? FGPU_PACE_BURST_NS : b->tokens + add;
	b->last = now;
}

void fgpu_pace_charge(struct fgpu_bucket *b, int64_t gpu_ns)
{
	if (gpu_ns <= 0)
		return;
	/* Debt is bounded too, so a bogus measurement cannot stall a
	 * process for long. */
	const int64_t floor = -100 * FGPU_PACE_BURST_NS;
	b->tokens = b->tokens - gpu_ns < floor ? floor : b->tokens - gpu_ns;
}

uint64_t fgpu_pace_delay(const struct fgpu_bucket *b, int share_pct)
{
	if (b->tokens >= 0 || share_pct <= 0)
		return 0;
	return (uint64_t)(-b->tokens) * 100 / (uint64_t)share_pct;
}
