/* Launch pacing holds the compute share, measured in the mock driver's
 * simulated time (no wall-clock assertions): with share s, a process that
 * launches as fast as it can gets s of the device's time within 5 points.
 * Each share runs in its own child, since the shim reads its limits once. */
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "fgpu/fgpu_test.h"
#include "fgpu/turn.h"
#include "testlib.h"

/* How the work is launched: plain kernels, cooperative kernels, or a CUDA
 * graph of ten 100 us kernels captured from a stream. */
enum launch_kind { PLAIN, COOPERATIVE, GRAPH };
static enum launch_kind launch_kind = PLAIN;

/* Captures ten 100-block kernels (1 ms of simulated time in all). While
 * the stream captures nothing runs, so nothing may be paced or waited
 * for; the capture must stay valid. */
static CUgraphExec capture_graph(CUstream s, CUfunction f)
{
	CUgraph g = NULL;
	CUgraphExec e = NULL;
	/* Run into debt first, so that pacing the capture would wait. */
	for (int i = 0; i < 50; i++) {
		if (cuLaunchKernel(f, 1000, 1, 1, 128, 1, 1, 0, s, NULL, NULL) != CUDA_SUCCESS)
			return NULL;
		cuStreamSynchronize(s);
	}
	uint64_t t0 = tesseraMockNowNs();
	if (cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL) != CUDA_SUCCESS)
		return NULL;
	for (int i = 0; i < 10; i++)
		if (cuLaunchKernel(f, 100, 1, 1, 128, 1, 1, 0, s, NULL, NULL) != CUDA_SUCCESS)
			return NULL;
	CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
	if (cuStreamIsCapturing(s, &st) != CUDA_SUCCESS || st != CU_STREAM_CAPTURE_STATUS_ACTIVE)
		return NULL;
	if (cuStreamEndCapture(s, &g) != CUDA_SUCCESS || !g ||
	    cuGraphInstantiateWithFlags(&e, g, 0) != CUDA_SUCCESS)
		return NULL;
	cuGraphDestroy(g);
	return tesseraMockNowNs() == t0 ? e : NULL;
}

static CUresult launch(CUfunction f, CUstream s, CUgraphExec g)
{
	switch (launch_kind) {
	case COOPERATIVE:
		return cuLaunchCooperativeKernel(f, 1000, 1, 1, 128, 1, 1, 0, s, NULL);
	case GRAPH:
		return cuGraphLaunch(g, s);
	default:
		return cuLaunchKernel(f, 1000, 1, 1, 128, 1, 1, 0, s, NULL, NULL);
	}
}

/* The limits file for the next run_share, and the device it runs on
 * (default: a session-wide share of pct on device 0). */
static const char *share_conf;
static int share_dev;

/* Launches n units of 1 ms simulated time each (1000 blocks x 1 us);
 * sync_each: synchronize after each launch (else only at the end).
 * Returns the achieved share in per-mille. */
static int run_share(int pct, int n, int sync_each)
{
	char conf[256];
	if (share_conf)
		snprintf(conf, sizeof(conf), "%spacing_clock = driver\n", share_conf);
	else
		snprintf(conf, sizeof(conf), "sm_limit_percent = %d\npacing_clock = driver\n", pct);
	const char *dir = ft_setup(conf);
	CUcontext ctx;
	CUstream s;
	if (cuInit(0) != CUDA_SUCCESS || cuCtxCreate_v2(&ctx, 0, share_dev) != CUDA_SUCCESS ||
	    cuStreamCreate(&s, 0) != CUDA_SUCCESS)
		return -1;
	CUfunction f = (CUfunction)(uintptr_t)0x1000;   /* the mock never dereferences it */
	CUgraphExec g = NULL;
	if (launch_kind == GRAPH && !(g = capture_graph(s, f)))
		return -5;
	uint64_t t0 = tesseraMockNowNs();
	for (int i = 0; i < n; i++) {
		if (launch(f, s, g) != CUDA_SUCCESS)
			return -2;
		if (sync_each)
			cuStreamSynchronize(s);
	}
	cuStreamSynchronize(s);
	uint64_t busy = (uint64_t)n * 1000000ULL, elapsed = tesseraMockNowNs() - t0;
	ft_cleanup(dir);
	return (int)(busy * 1000 / elapsed);
}

static int share_in_child(int pct, int n, int sync_each)
{
	int fds[2];
	if (pipe(fds) != 0)
		return -3;
	pid_t pid = fork();
	if (pid == 0) {
		int r = run_share(pct, n, sync_each);
		if (write(fds[1], &r, sizeof(r)) != sizeof(r))
			_exit(1);
		_exit(0);
	}
	int r = -4;
	if (read(fds[0], &r, sizeof(r)) != sizeof(r))
		r = -4;
	waitpid(pid, NULL, 0);
	close(fds[0]);
	close(fds[1]);
	return r;
}

#define CHECK_SHARE(permille, pct) do { \
	int s_ = (permille); \
	printf("  share %d%%: achieved %d.%d%%\n", (pct), s_ / 10, s_ % 10); \
	CHECK(s_ >= (pct) * 10 - 50 && s_ <= (pct) * 10 + 50); \
} while (0)

TEST(quarter_share_synchronous)
{
	CHECK_SHARE(share_in_child(25, 4000, 1), 25);
}

TEST(half_share_asynchronous)
{
	/* launches queue up ahead of the GPU; pacing still converges */
	CHECK_SHARE(share_in_child(50, 4000, 0), 50);
}

TEST(tenth_share_synchronous)
{
	CHECK_SHARE(share_in_child(10, 2000, 1), 10);
}

TEST(cooperative_kernels_are_paced)
{
	launch_kind = COOPERATIVE;
	CHECK_SHARE(share_in_child(25, 2000, 1), 25);
	launch_kind = PLAIN;
}

TEST(graph_launches_are_paced_and_capture_is_left_alone)
{
	launch_kind = GRAPH;
	CHECK_SHARE(share_in_child(25, 2000, 1), 25);
	launch_kind = PLAIN;
}

/* A session with a whole device and a quarter of another: only the
 * partial device is paced. */
TEST(each_device_has_its_own_share)
{
	share_conf = "devices = 2\ndevice.0.sm_limit_percent = 100\n"
		     "device.1.sm_limit_percent = 25\nsm_limit_percent = 100\n";
	share_dev = 1;
	CHECK_SHARE(share_in_child(0, 2000, 1), 25);
	share_dev = 0;
	int whole = share_in_child(0, 1000, 1);
	printf("  whole device: achieved %d.%d%%\n", whole / 10, whole % 10);
	CHECK(whole >= 990);
	share_conf = NULL;
}

TEST(full_share_is_not_paced)
{
	int s = share_in_child(100, 1000, 1);
	CHECK(s >= 990);
}

/* GPU turns (fgpu/turn.h), seen from outside through the turn file: in
 * a child, a process with share pct launches once and synchronizes;
 * returns a bit set: 1 it held the turn after the launch, 2 a waiting
 * process got the turn after the holder had it for a quantum and
 * synchronized, 4 the next launch took it back. */
static int turn_bits(int pct)
{
	pid_t pid = fork();
	if (pid == 0) {
		char conf[64];
		snprintf(conf, sizeof(conf), "sm_limit_percent = %d\n", pct);
		const char *dir = ft_setup(conf);
		char turns[300], uuid[64], path[400];
		snprintf(turns, sizeof(turns), "%s/turns", dir);
		if (mkdir(turns, 0755) != 0)
			_exit(100);
		setenv("TESSERA_FGPU_TURN_DIR", turns, 1);
		CUcontext ctx;
		CUstream s;
		if (cuInit(0) != CUDA_SUCCESS || cuCtxCreate_v2(&ctx, 0, 0) != CUDA_SUCCESS ||
		    cuStreamCreate(&s, 0) != CUDA_SUCCESS)
			_exit(101);
		ft_uuid(0, uuid, sizeof(uuid));
		for (int i = 0; i < 2; i++) {
			snprintf(path, sizeof(path), "%s/%s%s", turns, uuid, i ? FGPU_TURN_WAIT_SUFFIX : "");
			int fd = open(path, O_CREAT | O_WRONLY, 0444);
			if (fd < 0)
				_exit(102);
			close(fd);
		}
		struct fgpu_turn obs = FGPU_TURN_INIT;
		if (!fgpu_turn_open(&obs, turns, uuid))
			_exit(103);
		CUfunction f = (CUfunction)(uintptr_t)0x1000;
		int bits = 0;
		if (cuLaunchKernel(f, 10, 1, 1, 128, 1, 1, 0, s, NULL, NULL) != CUDA_SUCCESS)
			_exit(104);
		if (fgpu_turn_take(&obs, 0)) {
			fgpu_turn_give(&obs);
			ft_cleanup(dir);
			_exit(bits);   /* not held: nothing more to see */
		}
		bits |= 1;
		pid_t w = fork();
		if (w == 0) {
			struct fgpu_turn t = FGPU_TURN_INIT;
			fgpu_turn_open(&t, turns, uuid);
			bool got = fgpu_turn_take(&t, 10ULL * 1000 * 1000 * 1000);
			_exit(got ? 0 : 1);
		}
		for (int i = 0; i < 5000 && !fgpu_turn_others_wait(&obs); i++)
			usleep(1000);
		/* Held for a quantum, then synchronized with nothing left in
		 * flight: the holder gives the turn up, and its next launch,
		 * at once, lets the waiter have it first. */
		usleep(FGPU_TURN_QUANTUM_NS / 1000 + 2000);
		cuStreamSynchronize(s);
		CUresult relaunched = cuLaunchKernel(f, 10, 1, 1, 128, 1, 1, 0, s, NULL, NULL);
		int st = -1;
		waitpid(w, &st, 0);
		if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
			bits |= 2;
		obs.impatient_until = 0;
		if (relaunched == CUDA_SUCCESS && !fgpu_turn_take(&obs, 0))
			bits |= 4;
		cuStreamSynchronize(s);
		ft_cleanup(dir);
		_exit(bits);
	}
	int st = -1;
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

TEST(paced_launches_take_turns_at_the_gpu)
{
	CHECK_INT(turn_bits(50), 1 | 2 | 4);
}

TEST(a_whole_device_takes_no_turn)
{
	CHECK_INT(turn_bits(100), 0);
}

int main(void)
{
	setenv("TESSERA_MOCK_GPUS", "2x8GiB", 1);
	RUN(quarter_share_synchronous);
	RUN(half_share_asynchronous);
	RUN(tenth_share_synchronous);
	RUN(cooperative_kernels_are_paced);
	RUN(graph_launches_are_paced_and_capture_is_left_alone);
	RUN(each_device_has_its_own_share);
	RUN(full_share_is_not_paced);
	RUN(paced_launches_take_turns_at_the_gpu);
	RUN(a_whole_device_takes_no_turn);
	return testlib_done();
}
