/* Mock CUDA driver: the simulated clock, and what runs on it: streams,
 * events and kernel launches. See mock_cuda.c for what the mock simulates
 * (the clock included). */
#include <stdlib.h>

#include "gpu/mock/mock_cuda.h"

struct CUevent_st {
	unsigned magic;
	unsigned flags;
	bool recorded;
	bool captured;          /* last recorded in a capture: no point in time */
	uint64_t t;
};

uint64_t mock_now = 1000000000ULL;       /* simulated ns, starts at 1 s */
uint64_t mock_busy_until[MOCK_MAX_DEVICES];
uint64_t mock_block_ns = 1000;

/* ---- streams (simulated time) ------------------------------------------ */

/* Every CUstream argument goes through here first: the special handles
 * CU_STREAM_LEGACY and CU_STREAM_PER_THREAD are small integers, not
 * objects, and mean the current context's default stream as NULL does
 * (the mock has one default stream per context, so both are the same).
 * False for a handle that is not a live stream. */
bool mock_stream(CUstream *s)
{
	if (*s == CU_STREAM_LEGACY || *s == CU_STREAM_PER_THREAD)
		*s = NULL;
	return !*s || (*s)->magic == MOCK_MAGIC_STREAM;
}

static uint64_t *mock_tail(CUstream s)
{
	if (s)
		return &s->tail;
	CUcontext c = mock_current();
	return c ? &c->null_tail : NULL;
}

CUresult mock_stream_new(CUstream *ps, CUcontext c)
{
	CUstream s = calloc(1, sizeof(*s));
	if (!s)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*s = (struct CUstream_st){ .magic = MOCK_MAGIC_STREAM, .ctx = c };
	*ps = s;
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuStreamCreate(CUstream *ps, unsigned int flags)
{
	(void)flags;
	REQUIRE_INIT();
	if (!ps)
		return CUDA_ERROR_INVALID_VALUE;
	CUcontext c = mock_current();
	if (!c)
		return CUDA_ERROR_INVALID_CONTEXT;
	return LOCKED(mock_stream_new(ps, c));
}

static CUresult mock_stream_destroy(CUstream s)
{
	if (s->cap_graph)
		mock_graph_free(s->cap_graph);   /* an unfinished capture's */
	s->magic = 0;
	free(s);
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuStreamDestroy_v2(CUstream s)
{
	REQUIRE_INIT();
	/* the default streams are the context's, not the caller's to destroy */
	if (!mock_stream(&s) || !s)
		return CUDA_ERROR_INVALID_HANDLE;
	return LOCKED(mock_stream_destroy(s));
}

/* Waiting is what a capture cannot record: the capture is invalidated
 * (it stays open until cuStreamEndCapture, which reports it). */
static CUresult mock_stream_sync(CUstream s)
{
	if (s && s->capture != CU_STREAM_CAPTURE_STATUS_NONE) {
		s->capture = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	}
	uint64_t *t = mock_tail(s);
	if (!t)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (*t > mock_now)
		mock_now = *t;
	mock_pools_release();
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuStreamSynchronize(CUstream s)
{
	REQUIRE_INIT();
	if (!mock_stream(&s))
		return CUDA_ERROR_INVALID_HANDLE;
	return LOCKED(mock_stream_sync(s));
}

MOCK_API CUresult cuStreamSynchronize_ptsz(CUstream s)
{
	return cuStreamSynchronize(s);
}

static CUresult mock_stream_ctx(CUstream s, CUcontext *pctx)
{
	CUcontext c = s ? s->ctx : mock_current();
	if (!c)
		return CUDA_ERROR_INVALID_CONTEXT;
	*pctx = c;
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuStreamGetCtx(CUstream s, CUcontext *pctx)
{
	REQUIRE_INIT();
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	if (!mock_stream(&s))
		return CUDA_ERROR_INVALID_HANDLE;
	return LOCKED(mock_stream_ctx(s, pctx));
}

MOCK_API CUresult cuStreamGetCtx_ptsz(CUstream s, CUcontext *pctx)
{
	return cuStreamGetCtx(s, pctx);
}

/* ---- events ------------------------------------------------------------ */

MOCK_API CUresult cuEventCreate(CUevent *pe, unsigned int flags)
{
	REQUIRE_INIT();
	if (!pe)
		return CUDA_ERROR_INVALID_VALUE;
	CUevent e = calloc(1, sizeof(*e));
	if (!e)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*e = (struct CUevent_st){ .magic = MOCK_MAGIC_EVENT, .flags = flags };
	*pe = e;
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuEventDestroy_v2(CUevent e)
{
	REQUIRE_INIT();
	if (!e || e->magic != MOCK_MAGIC_EVENT)
		return CUDA_ERROR_INVALID_HANDLE;
	e->magic = 0;
	free(e);
	return CUDA_SUCCESS;
}

/* Recorded in a capture, an event becomes a node of the graph, not a
 * point in time, until it is next recorded outside one. */
static CUresult mock_event_record(CUevent e, CUstream s)
{
	if (s && s->capture == CU_STREAM_CAPTURE_STATUS_INVALIDATED)
		return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
	if (s && s->capture == CU_STREAM_CAPTURE_STATUS_ACTIVE) {
		e->captured = true;
		return CUDA_SUCCESS;
	}
	uint64_t *t = mock_tail(s);
	if (!t)
		return CUDA_ERROR_INVALID_CONTEXT;
	e->t = *t > mock_now ? *t : mock_now;
	e->recorded = true;
	e->captured = false;
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuEventRecord(CUevent e, CUstream s)
{
	REQUIRE_INIT();
	if (!e || e->magic != MOCK_MAGIC_EVENT || !mock_stream(&s))
		return CUDA_ERROR_INVALID_HANDLE;
	return LOCKED(mock_event_record(e, s));
}

MOCK_API CUresult cuEventRecord_ptsz(CUevent e, CUstream s)
{
	return cuEventRecord(e, s);
}

MOCK_API CUresult cuEventQuery(CUevent e)
{
	REQUIRE_INIT();
	if (!e || e->magic != MOCK_MAGIC_EVENT)
		return CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_lock(&mock_lock);
	CUresult rc = e->captured ? CUDA_ERROR_CAPTURED_EVENT
		: !e->recorded || e->t <= mock_now ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
	pthread_mutex_unlock(&mock_lock);
	return rc;
}

static CUresult mock_event_sync(CUevent e)
{
	if (e->captured)
		return CUDA_ERROR_CAPTURED_EVENT;
	if (e->recorded && e->t > mock_now)
		mock_now = e->t;
	mock_pools_release();
	return CUDA_SUCCESS;
}

MOCK_API CUresult cuEventSynchronize(CUevent e)
{
	REQUIRE_INIT();
	if (!e || e->magic != MOCK_MAGIC_EVENT)
		return CUDA_ERROR_INVALID_HANDLE;
	return LOCKED(mock_event_sync(e));
}

MOCK_API CUresult cuEventElapsedTime(float *ms, CUevent a, CUevent b)
{
	REQUIRE_INIT();
	if (!ms)
		return CUDA_ERROR_INVALID_VALUE;
	if (!a || !b || a->magic != MOCK_MAGIC_EVENT || b->magic != MOCK_MAGIC_EVENT)
		return CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_lock(&mock_lock);
	CUresult rc = CUDA_SUCCESS;
	if (a->captured || b->captured)
		rc = CUDA_ERROR_CAPTURED_EVENT;
	else if ((a->flags & CU_EVENT_DISABLE_TIMING) || (b->flags & CU_EVENT_DISABLE_TIMING) ||
		 !a->recorded || !b->recorded)
		rc = CUDA_ERROR_INVALID_HANDLE;
	else if (a->t > mock_now || b->t > mock_now)
		rc = CUDA_ERROR_NOT_READY;
	else
		*ms = (float)((double)((int64_t)b->t - (int64_t)a->t) / 1e6);
	pthread_mutex_unlock(&mock_lock);
	return rc;
}

/* ---- kernel launches --------------------------------------------------- */

/* Puts ns of simulated work (launches kernels) on stream s: it starts
 * once the stream's earlier work and the device are done, one thing at a
 * time per device; *endp (when given) gets when it ends. A capturing
 * stream records it instead. */
CUresult mock_submit(CUstream s, uint64_t ns, unsigned launches, uint64_t *endp)
{
	CUcontext c = s ? s->ctx : mock_current();
	uint64_t *t = mock_tail(s);
	if (!c || !t)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (s && s->capture == CU_STREAM_CAPTURE_STATUS_INVALIDATED)
		return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
	if (s && s->capture == CU_STREAM_CAPTURE_STATUS_ACTIVE) {
		s->cap_ns += ns;
		s->cap_launches += launches;
		return CUDA_SUCCESS;
	}
	/* a green context's kernels run on its share of the SMs */
	if (c->sms && c->sms < (unsigned)mock_spec.dev[c->dev].sms)
		ns = ns * (uint64_t)mock_spec.dev[c->dev].sms / c->sms;
	uint64_t start = mock_now;
	if (*t > start)
		start = *t;
	if (mock_busy_until[c->dev] > start)
		start = mock_busy_until[c->dev];
	uint64_t end = start + ns;
	*t = end;
	mock_busy_until[c->dev] = end;
	mock_usage_busy(c->dev, ns);
	if (endp)
		*endp = end;
	return CUDA_SUCCESS;
}

static CUresult mock_launch(CUfunction f, CUstream s, uint64_t ns)
{
	CUresult rc = mock_launch_needs(s ? s->ctx : mock_current(), f);
	return rc != CUDA_SUCCESS ? rc : mock_submit(s, ns, 1, NULL);
}

MOCK_API CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy,
				 unsigned int gz, unsigned int bx, unsigned int by,
				 unsigned int bz, unsigned int shmem, CUstream s,
				 void **params, void **extra)
{
	(void)shmem; (void)params; (void)extra;
	REQUIRE_INIT();
	if (!f)
		return CUDA_ERROR_INVALID_HANDLE;
	if (gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0 ||
	    (uint64_t)bx * by * bz > 1024)
		return CUDA_ERROR_INVALID_VALUE;
	if (!mock_stream(&s))
		return CUDA_ERROR_INVALID_HANDLE;
	return LOCKED(mock_launch(f, s, (uint64_t)gx * gy * gz * mock_block_ns));
}

MOCK_API CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy,
				      unsigned int gz, unsigned int bx, unsigned int by,
				      unsigned int bz, unsigned int shmem, CUstream s,
				      void **params, void **extra)
{
	return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shmem, s, params, extra);
}

MOCK_API CUresult cuLaunchKernelEx(const CUlaunchConfig *c, CUfunction f, void **params,
				   void **extra)
{
	if (!c)
		return CUDA_ERROR_INVALID_VALUE;
	return cuLaunchKernel(f, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX,
			      c->blockDimY, c->blockDimZ, c->sharedMemBytes, c->hStream,
			      params, extra);
}

MOCK_API CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *c, CUfunction f,
					void **params, void **extra)
{
	return cuLaunchKernelEx(c, f, params, extra);
}

/* All blocks co-resident is not checked: the mock has no occupancy. */
MOCK_API CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX,
					    unsigned int gridDimY, unsigned int gridDimZ,
					    unsigned int blockDimX, unsigned int blockDimY,
					    unsigned int blockDimZ, unsigned int sharedMemBytes,
					    CUstream hStream, void **kernelParams)
{
	return cuLaunchKernel(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY,
			      blockDimZ, sharedMemBytes, hStream, kernelParams, NULL);
}

MOCK_API CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gridDimX,
						 unsigned int gridDimY, unsigned int gridDimZ,
						 unsigned int blockDimX, unsigned int blockDimY,
						 unsigned int blockDimZ,
						 unsigned int sharedMemBytes, CUstream hStream,
						 void **kernelParams)
{
	return cuLaunchCooperativeKernel(f, gridDimX, gridDimY, gridDimZ, blockDimX,
					 blockDimY, blockDimZ, sharedMemBytes, hStream,
					 kernelParams);
}
