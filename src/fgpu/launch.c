/* Launch hooks: pacing (pacing.h has the arithmetic), GPU turns (turn.h),
 * and the stack a launch grows (contexts.c). */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "fgpu/pacing.h"
#include "fgpu/shim.h"
#include "fgpu/turn.h"

/* ---- hooks: launch pacing ---------------------------------------------------- */

#define FGPU_RING 32

struct fgpu_pacer {
	pthread_mutex_t mu;
	CUcontext ctx;             /* context the events belong to */
	bool have_events;
	CUevent a[FGPU_RING], b[FGPU_RING];
	int head, count;           /* pending measurements */
	struct fgpu_turn turn;     /* this process's part in the GPU's turns */
};

static struct fgpu_pacer fgpu_pacers[FGPU_MAX_DEVICES] = {
	[0 ... FGPU_MAX_DEVICES - 1] = { .mu = PTHREAD_MUTEX_INITIALIZER, .turn = FGPU_TURN_INIT },
};

void fgpu_pace_reset_child(void)
{
	/* Events and contexts belong to the parent. */
	for (int i = 0; i < FGPU_MAX_DEVICES; i++) {
		pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
		fgpu_turn_forget(&fgpu_pacers[i].turn);   /* the parent's turn */
		memset(&fgpu_pacers[i], 0, sizeof(fgpu_pacers[i]));
		fgpu_pacers[i].mu = fresh;
		fgpu_pacers[i].turn = (struct fgpu_turn)FGPU_TURN_INIT;
	}
}

static uint64_t fgpu_now(void)
{
	if (real.mock_now)
		return real.mock_now();
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void fgpu_sleep(uint64_t ns)
{
	if (real.mock_sleep) {
		real.mock_sleep(ns);
		return;
	}
	struct timespec ts = { (time_t)(ns / 1000000000ULL), (long)(ns % 1000000000ULL) };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* Charges completed measurements (in order). Caller holds p->mu. */
static void fgpu_harvest(struct fgpu_pacer *p, int idx, bool block_one)
{
	while (p->count > 0) {
		int i = p->head;
		if (block_one) {
			REAL(cuEventSynchronize, p->b[i]);
			block_one = false;
		} else if (REAL(cuEventQuery, p->b[i]) == CUDA_ERROR_NOT_READY) {
			break;
		}
		float ms = 0;
		if (REAL(cuEventElapsedTime, &ms, p->a[i], p->b[i]) == CUDA_SUCCESS && ms > 0) {
			fgpu_region_lock(&fgpu_region);
			fgpu_pace_charge(&fgpu_region.r->pace[idx], (int64_t)((double)ms * 1e6));
			fgpu_region_unlock(&fgpu_region);
		}
		p->head = (p->head + 1) % FGPU_RING;
		p->count--;
	}
}

/* Waits for everything this process launched on the device to finish,
 * and charges it. Caller holds p->mu. */
static void fgpu_drain(struct fgpu_pacer *p, int idx)
{
	while (p->count > 0)
		fgpu_harvest(p, idx, true);
}

/* Gives the GPU's turn up once this process's work there has finished,
 * so that the next holder starts on an idle GPU. Caller holds p->mu. */
static void fgpu_turn_hand_over(struct fgpu_pacer *p, int idx)
{
	fgpu_drain(p, idx);
	fgpu_turn_give(&p->turn);
}

void fgpu_pace_synced(void)
{
	CUdevice ord;
	if (!fgpu_pacing || fgpu_current_device(&ord) != CUDA_SUCCESS || ord < 0 ||
	    ord >= FGPU_MAX_DEVICES)
		return;
	struct fgpu_pacer *p = &fgpu_pacers[ord];
	/* Never block a synchronization on another thread's launch. */
	if (pthread_mutex_trylock(&p->mu) != 0)
		return;
	int idx = fgpu_cuda_index(ord);
	if (p->turn.held && idx >= 0) {
		fgpu_harvest(p, idx, false);
		if (p->count == 0 && fgpu_turn_due(&p->turn))
			fgpu_turn_give(&p->turn);
	}
	pthread_mutex_unlock(&p->mu);
}

/* Before a launch: waits for the device's bucket and the GPU's turn,
 * then records the start event. Returns the pacer locked (or NULL when
 * not pacing this launch). */
static struct fgpu_pacer *fgpu_pace_before(CUstream s, bool ptsz, int *idx_out)
{
	CUdevice ord;
	CUcontext ctx = NULL;
	if (fgpu_current_device(&ord) != CUDA_SUCCESS || ord < 0 || ord >= FGPU_MAX_DEVICES ||
	    REAL(cuCtxGetCurrent, &ctx) != CUDA_SUCCESS || !ctx)
		return NULL;
	int idx = fgpu_cuda_index(ord);
	int pct = fgpu_conf_sm_limit(&fgpu_conf, idx);
	if (idx < 0 || pct >= 100)
		return NULL;   /* not the session's device, or a whole one */
	/* Work launched into a stream being captured into a graph does not
	 * run now, and events recorded there become part of the graph (the
	 * driver refuses to query them): the graph is paced when launched. */
	if (fgpu_stream_capturing(ptsz && !s ? CU_STREAM_PER_THREAD : s, true))
		return NULL;
	struct fgpu_pacer *p = &fgpu_pacers[ord];
	pthread_mutex_lock(&p->mu);
	if (p->ctx != ctx) {
		/* Another context on this device: measurements restart there. */
		if (p->have_events)
			for (int i = 0; i < FGPU_RING; i++) {
				REAL(cuEventDestroy_v2, p->a[i]);
				REAL(cuEventDestroy_v2, p->b[i]);
			}
		p->have_events = false;
		p->head = p->count = 0;
		p->ctx = ctx;
	}
	if (!p->have_events) {
		bool ok = true;
		for (int i = 0; i < FGPU_RING && ok; i++)
			ok = REAL(cuEventCreate, &p->a[i], CU_EVENT_DEFAULT) == CUDA_SUCCESS &&
			     REAL(cuEventCreate, &p->b[i], CU_EVENT_DEFAULT) == CUDA_SUCCESS;
		if (!ok) {
			pthread_mutex_unlock(&p->mu);
			return NULL;   /* cannot measure: launch unpaced */
		}
		p->have_events = true;
	}
	if (!p->turn.opened) {
		char uuid[64];
		if (fgpu_device_uuid(ord, uuid, sizeof(uuid)))
			fgpu_turn_open(&p->turn, fgpu_conf.turn_dir, uuid);
		p->turn.opened = true;
		p->turn.quantum = (uint64_t)fgpu_conf.turn_quantum_ns;
	}
	fgpu_harvest(p, idx, false);
	if (p->count == FGPU_RING)
		fgpu_harvest(p, idx, true);
	/* Held for a quantum while another process waits: its turn. */
	if (fgpu_turn_due(&p->turn))
		fgpu_turn_hand_over(p, idx);
	for (int spins = 0; spins < 10000; spins++) {
		fgpu_region_lock(&fgpu_region);
		struct fgpu_bucket *b = &fgpu_region.r->pace[idx];
		fgpu_pace_refill(b, fgpu_now(), pct);
		uint64_t wait = fgpu_pace_delay(b, pct);
		fgpu_region_unlock(&fgpu_region);
		if (wait == 0)
			break;
		if (p->turn.held) {
			/* A turn held while waiting for credit would idle the
			 * GPU for everyone. What the drain charges makes the
			 * wait longer: it is worked out again. */
			fgpu_turn_hand_over(p, idx);
			continue;
		}
		/* Sleep in slices so that a long debt still lets completions of
		 * other processes' kernels be seen in between. */
		fgpu_sleep(wait > 50000000ULL ? 50000000ULL : wait);
		fgpu_harvest(p, idx, false);
	}
	fgpu_turn_take(&p->turn, FGPU_TURN_PATIENCE_NS);
	int slot = (p->head + p->count) % FGPU_RING;
	CUresult rc = ptsz && real.cuEventRecord_ptsz ? real.cuEventRecord_ptsz(p->a[slot], s)
						      : REAL(cuEventRecord, p->a[slot], s);
	if (rc != CUDA_SUCCESS) {
		pthread_mutex_unlock(&p->mu);
		return NULL;
	}
	*idx_out = idx;
	return p;
}

static void fgpu_pace_after(struct fgpu_pacer *p, CUstream s, bool ptsz, CUresult launch)
{
	if (!p)
		return;
	int slot = (p->head + p->count) % FGPU_RING;
	if (launch == CUDA_SUCCESS) {
		CUresult rc = ptsz && real.cuEventRecord_ptsz ? real.cuEventRecord_ptsz(p->b[slot], s)
							      : REAL(cuEventRecord, p->b[slot], s);
		if (rc == CUDA_SUCCESS)
			p->count++;
	}
	pthread_mutex_unlock(&p->mu);
}

/* What a launch returns, an expression the hook returns (a macro so that
 * call runs between the steps): paced when the share is less than the
 * whole GPU, and the stack it grows charged first (contexts.c). f is NULL
 * for graphs. */
#define FGPU_LAUNCH(f, ptsz, stream, call) ({ \
	int idx_; \
	struct fgpu_pacer *p_ = fgpu_pacing ? fgpu_pace_before((stream), (ptsz), &idx_) : NULL; \
	struct fgpu_stack_grant g_; \
	CUresult rc_ = fgpu_stack_admit((f), &g_); \
	if (rc_ == CUDA_SUCCESS) { \
		rc_ = (call); \
		fgpu_stack_launched(&g_, rc_); \
	} \
	fgpu_pace_after(p_, (stream), (ptsz), rc_); \
	rc_; \
})

CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
			unsigned int bx, unsigned int by, unsigned int bz, unsigned int shmem,
			CUstream s, void **params, void **extra)
{
	CUDA_INIT();
	return FGPU_LAUNCH(f, false, s, REAL(cuLaunchKernel, f, gx, gy, gz, bx, by, bz, shmem, s, params, extra));
}

CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
			     unsigned int bx, unsigned int by, unsigned int bz,
			     unsigned int shmem, CUstream s, void **params, void **extra)
{
	CUDA_INIT();
	return FGPU_LAUNCH(f, true, s,
			   REAL(cuLaunchKernel_ptsz, f, gx, gy, gz, bx, by, bz, shmem, s, params, extra));
}

CUresult cuLaunchKernelEx(const CUlaunchConfig *c, CUfunction f, void **params, void **extra)
{
	CUDA_INIT();
	return FGPU_LAUNCH(f, false, c ? c->hStream : NULL, REAL(cuLaunchKernelEx, c, f, params, extra));
}

CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *c, CUfunction f, void **params,
			       void **extra)
{
	CUDA_INIT();
	return FGPU_LAUNCH(f, true, c ? c->hStream : NULL, REAL(cuLaunchKernelEx_ptsz, c, f, params, extra));
}

/* Cooperative kernels are kernels; a graph launch is measured as a whole
 * (all its kernels, from the first start to the last end), and its
 * memory must fit first (graphs.c). */
CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy,
				   unsigned int gz, unsigned int bx, unsigned int by,
				   unsigned int bz, unsigned int shmem, CUstream s, void **params)
{
	CUDA_INIT();
	return FGPU_LAUNCH(f, false, s,
			   REAL(cuLaunchCooperativeKernel, f, gx, gy, gz, bx, by, bz, shmem, s, params));
}

CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy,
					unsigned int gz, unsigned int bx, unsigned int by,
					unsigned int bz, unsigned int shmem, CUstream s,
					void **params)
{
	CUDA_INIT();
	return FGPU_LAUNCH(f, true, s, REAL(cuLaunchCooperativeKernel_ptsz, f, gx, gy, gz, bx, by,
						 bz, shmem, s, params));
}

CUresult cuGraphLaunch(CUgraphExec g, CUstream s)
{
	CUDA_INIT();
	return FGPU_LAUNCH(NULL, false, s, fgpu_graph_launch(g, s, false));
}

CUresult cuGraphLaunch_ptsz(CUgraphExec g, CUstream s)
{
	CUDA_INIT();
	return FGPU_LAUNCH(NULL, true, s, fgpu_graph_launch(g, s, true));
}

