/* Accounting is per container, across processes: two processes together
 * cannot pass the share; a process killed with SIGKILL, even while it
 * holds the region lock, hangs nobody and its memory returns. */
#include <signal.h>
#include <sys/wait.h>

#include "fgpu/fgpu_test.h"
#include "testlib.h"

static const char *dir;

/* Runs fn in a child that reports one byte back; returns that byte. */
static char in_child(char (*fn)(void), pid_t *pid_out, int keep_running)
{
	int fds[2];
	if (pipe(fds) != 0)
		return '!';
	pid_t pid = fork();
	if (pid == 0) {
		char r = fn();
		if (write(fds[1], &r, 1) != 1)
			_exit(1);
		if (keep_running)
			pause();
		_exit(0);
	}
	char r = '?';
	if (read(fds[0], &r, 1) != 1)
		r = '?';
	close(fds[0]);
	close(fds[1]);
	if (pid_out)
		*pid_out = pid;
	else
		waitpid(pid, NULL, 0);
	return r;
}

static char child_alloc_600(void)
{
	CUcontext c;
	CUdeviceptr p;
	if (cuCtxCreate_v2(&c, 0, 0) != CUDA_SUCCESS)
		return 'c';
	CUresult r = cuMemAlloc_v2(&p, 600 * MiB);
	return r == CUDA_SUCCESS ? 'y' : r == CUDA_ERROR_OUT_OF_MEMORY ? 'o' : 'e';
}

static char child_alloc_300(void)
{
	CUcontext c;
	CUdeviceptr p;
	if (cuCtxCreate_v2(&c, 0, 0) != CUDA_SUCCESS)
		return 'c';
	return cuMemAlloc_v2(&p, 300 * MiB) == CUDA_SUCCESS ? 'y' : 'n';
}

TEST(two_processes_cannot_pass_the_share)
{
	CUdeviceptr p;
	CHECK_INT(cuMemAlloc_v2(&p, 600 * MiB), CUDA_SUCCESS);
	CHECK_INT(in_child(child_alloc_600, NULL, 0), 'o');
	CHECK_INT(in_child(child_alloc_300, NULL, 0), 'y');
	/* that child exited: its 300 MiB came back */
	size_t f, t;
	CHECK_INT(cuMemGetInfo_v2(&f, &t), CUDA_SUCCESS);
	CHECK_INT(f, 1 * GiB - 600 * MiB);
	CHECK_INT(cuMemFree_v2(p), CUDA_SUCCESS);
}

TEST(killed_process_memory_is_reclaimed)
{
	pid_t pid;
	CHECK_INT(in_child(child_alloc_600, &pid, 1), 'y');
	CUdeviceptr p;
	CHECK_INT(cuMemAlloc_v2(&p, 600 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	CHECK_INT(cuMemAlloc_v2(&p, 600 * MiB), CUDA_SUCCESS);
	CHECK_INT(cuMemFree_v2(p), CUDA_SUCCESS);
}

TEST(many_processes_share_one_limit)
{
	/* eight children try 300 MiB each at once: at most three fit */
	int fds[2];
	CHECK(pipe(fds) == 0);
	pid_t pids[8];
	for (int i = 0; i < 8; i++) {
		pids[i] = fork();
		if (pids[i] == 0) {
			char r = child_alloc_300();
			if (write(fds[1], &r, 1) != 1)
				_exit(1);
			pause();
			_exit(0);
		}
	}
	int ok = 0;
	for (int i = 0; i < 8; i++) {
		char r = 0;
		if (read(fds[0], &r, 1) == 1 && r == 'y')
			ok++;
	}
	CHECK_INT(ok, 3);
	for (int i = 0; i < 8; i++) {
		kill(pids[i], SIGKILL);
		waitpid(pids[i], NULL, 0);
	}
	close(fds[0]);
	close(fds[1]);
	size_t f, t;
	CUdeviceptr p;
	CHECK_INT(cuMemAlloc_v2(&p, 1 * GiB), CUDA_SUCCESS);
	CHECK_INT(cuMemGetInfo_v2(&f, &t), CUDA_SUCCESS);
	CHECK_INT(f, 0);
	CHECK_INT(cuMemFree_v2(p), CUDA_SUCCESS);
}

int main(void)
{
	setenv("TESSERA_MOCK_GPUS", "1x8GiB", 1);
	dir = ft_setup("memory_limit = 1GiB\n");
	CUcontext ctx;
	if (cuInit(0) != CUDA_SUCCESS || cuCtxCreate_v2(&ctx, 0, 0) != CUDA_SUCCESS)
		return 1;
	RUN(two_processes_cannot_pass_the_share);
	RUN(killed_process_memory_is_reclaimed);
	RUN(many_processes_share_one_limit);
	ft_cleanup(dir);
	return testlib_done();
}
