#include "gpuabi/region.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gpuabi/procinfo.h"

/* This process's id, without a system call per allocation: getpid() is
 * not cached by the C library and shows up in every reserve/release.
 * fork() children refresh it through the atfork handler. */
static pid_t region_pid;
static pthread_once_t region_pid_once = PTHREAD_ONCE_INIT;

static void region_pid_refresh(void)
{
	region_pid = getpid();
}

static void region_pid_init(void)
{
	region_pid_refresh();
	pthread_atfork(NULL, NULL, region_pid_refresh);
}

static pid_t region_self(void)
{
	pthread_once(&region_pid_once, region_pid_init);
	return region_pid;
}

static int fgpu_region_init_mutex(struct fgpu_region *r)
{
	pthread_mutexattr_t a;
	int rc = pthread_mutexattr_init(&a);
	if (rc == 0)
		rc = pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	if (rc == 0)
		rc = pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	if (rc == 0)
		rc = pthread_mutex_init(&r->lock, &a);
	pthread_mutexattr_destroy(&a);
	return -rc;
}

static void fgpu_region_format(struct fgpu_region *r)
{
	memset(r, 0, sizeof(*r));
	r->version = FGPU_REGION_VERSION;
	r->size = sizeof(*r);
	r->mutex_size = sizeof(pthread_mutex_t);
}

/* Maps the region file open at fd (closed here; the mapping stays). */
static int fgpu_region_map(struct fgpu_region_handle *h, int fd, const char *path, bool observer,
			   struct terr *err)
{
	memset(h, 0, sizeof(*h));
	h->slot = -1;
	h->observer = observer;
	/* flock only serializes creation; the robust mutex guards the data.
	 * flock is released by the kernel if the creator dies. */
	if (flock(fd, LOCK_EX) != 0) {
		int e = errno;
		close(fd);
		return terr_set(err, e, "flock %s: %s", path, strerror(e));
	}
	/* The size by lseek rather than fstat: fstat is a versioned symbol
	 * of glibc 2.33+ only (glibc_compat.h). */
	int rc = 0;
	off_t size = lseek(fd, 0, SEEK_END);
	if (size < 0) {
		rc = terr_set(err, errno, "seek %s: %s", path, strerror(errno));
		goto out;
	}
	bool fresh = size == 0;
	if (fresh && observer) {
		/* Being made by a process right now (it holds the flock until
		 * formatted, so this is a file left empty): nothing to see. */
		rc = terr_set(err, ENOENT, "%s: empty", path);
		goto out;
	}
	if (fresh && ftruncate(fd, sizeof(struct fgpu_region)) != 0) {
		rc = terr_set(err, errno, "truncate %s: %s", path, strerror(errno));
		goto out;
	}
	if (!fresh && size != (off_t)sizeof(struct fgpu_region)) {
		rc = terr_set(err, EPROTO, "%s: size %lld, expected %zu (other layout version)",
			      path, (long long)size, sizeof(struct fgpu_region));
		goto out;
	}
	struct fgpu_region *r = mmap(NULL, sizeof(*r), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (r == MAP_FAILED) {
		rc = terr_set(err, errno, "mmap %s: %s", path, strerror(errno));
		goto out;
	}
	if (fresh || r->magic == 0) {
		/* magic is written last: a creator that died half way leaves 0
		 * and the next opener formats again. */
		fgpu_region_format(r);
		rc = fgpu_region_init_mutex(r);
		if (rc < 0) {
			munmap(r, sizeof(*r));
			rc = terr_set(err, -rc, "%s: cannot create robust mutex", path);
			goto out;
		}
		__atomic_store_n(&r->magic, FGPU_REGION_MAGIC, __ATOMIC_RELEASE);
	} else if (r->magic != FGPU_REGION_MAGIC || r->version != FGPU_REGION_VERSION ||
		   r->size != sizeof(*r) || r->mutex_size != sizeof(pthread_mutex_t)) {
		munmap(r, sizeof(*r));
		rc = terr_set(err, EPROTO, "%s: unknown layout (magic %#x version %u)", path,
			      r->magic, r->version);
		goto out;
	}
	h->r = r;
	h->shared = true;
out:
	flock(fd, LOCK_UN);
	close(fd);   /* the mapping stays */
	return rc;
}

int fgpu_region_open(struct fgpu_region_handle *h, const char *path, struct terr *err)
{
	int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_CREAT, 0660);
	if (fd < 0)
		return terr_set(err, errno, "open %s: %s", path, strerror(errno));
	return fgpu_region_map(h, fd, path, false, err);
}

int fgpu_region_observe_fd(struct fgpu_region_handle *h, int fd, const char *path,
			   struct terr *err)
{
	return fgpu_region_map(h, fd, path, true, err);
}

int fgpu_region_open_private(struct fgpu_region_handle *h, struct terr *err)
{
	memset(h, 0, sizeof(*h));
	h->slot = -1;
	struct fgpu_region *r = mmap(NULL, sizeof(*r), PROT_READ | PROT_WRITE,
				     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (r == MAP_FAILED)
		return terr_set(err, errno, "mmap: %s", strerror(errno));
	fgpu_region_format(r);
	int rc = fgpu_region_init_mutex(r);
	if (rc < 0) {
		munmap(r, sizeof(*r));
		return terr_set(err, -rc, "cannot create robust mutex");
	}
	r->magic = FGPU_REGION_MAGIC;
	h->r = r;
	return 0;
}

int fgpu_region_reclaim_locked(struct fgpu_region_handle *h)
{
	struct fgpu_region *r = h->r;
	int n = 0;
	pid_t me = region_self();
	for (int i = 0; i < FGPU_REGION_SLOTS && !h->observer; i++) {
		struct fgpu_region_slot *s = &r->slots[i];
		if (s->pid != 0 && s->pid != me && !fgpu_proc_alive(s->pid, s->start)) {
			memset(s, 0, sizeof(*s));
			n++;
		}
	}
	/* Totals are recomputed, not decremented: after EOWNERDEAD they may
	 * not match the slots. */
	for (int d = 0; d < FGPU_MAX_DEVICES; d++) {
		int64_t sum = 0;
		for (int i = 0; i < FGPU_REGION_SLOTS; i++)
			if (r->slots[i].pid != 0)
				sum += r->slots[i].used[d] + r->slots[i].untracked[d];
		r->total[d] = sum;
	}
	return n;
}

void fgpu_region_lock(struct fgpu_region_handle *h)
{
	int rc = pthread_mutex_lock(&h->r->lock);
	if (rc == EOWNERDEAD) {
		fgpu_region_reclaim_locked(h);
		h->r->recoveries++;
		pthread_mutex_consistent(&h->r->lock);
	} else if (rc == ENOTRECOVERABLE) {
		/* Only if a recovering process died too before marking it
		 * consistent; reinitializing is the one way out. Any process
		 * blocked on the old state gets the same error and lands here. */
		fgpu_region_init_mutex(h->r);
		pthread_mutex_lock(&h->r->lock);
		fgpu_region_reclaim_locked(h);
	}
}

void fgpu_region_unlock(struct fgpu_region_handle *h)
{
	pthread_mutex_unlock(&h->r->lock);
}

struct fgpu_region_slot *fgpu_region_slot_locked(struct fgpu_region_handle *h)
{
	struct fgpu_region *r = h->r;
	pid_t me = region_self();
	if (h->slot >= 0 && h->pid == me && r->slots[h->slot].pid == me)
		return &r->slots[h->slot];
	h->slot = -1;
	for (int pass = 0; pass < 2; pass++) {
		for (int i = 0; i < FGPU_REGION_SLOTS; i++) {
			struct fgpu_region_slot *s = &r->slots[i];
			if (s->pid == me) {
				/* A slot left by an earlier process with our pid
				 * (pid reuse) is stale: start afresh. */
				if (s->start != fgpu_proc_start_time(me)) {
					memset(s->used, 0, sizeof(s->used));
					memset(s->untracked, 0, sizeof(s->untracked));
				}
			} else if (s->pid != 0) {
				continue;
			}
			s->pid = me;
			s->start = fgpu_proc_start_time(me);
			h->slot = i;
			h->pid = me;
			fgpu_region_reclaim_locked(h);
			return s;
		}
		if (fgpu_region_reclaim_locked(h) == 0)
			break;
	}
	return NULL;
}

int fgpu_region_reserve(struct fgpu_region_handle *h, int d, int64_t bytes, int64_t limit)
{
	if (d < 0 || d >= FGPU_MAX_DEVICES || bytes < 0)
		return -EINVAL;
	fgpu_region_lock(h);
	int rc = -ENOMEM;
	struct fgpu_region_slot *s = fgpu_region_slot_locked(h);
	if (s) {
		int64_t total = h->r->total[d], want;
		if (__builtin_add_overflow(total, bytes, &want) || want > limit) {
			/* Before refusing: memory of dead processes is free. */
			if (fgpu_region_reclaim_locked(h) > 0)
				total = h->r->total[d];
		}
		if (!__builtin_add_overflow(total, bytes, &want) && want <= limit) {
			s->used[d] += bytes;
			h->r->total[d] = want;
			rc = 0;
		}
	}
	fgpu_region_unlock(h);
	return rc;
}

void fgpu_region_release(struct fgpu_region_handle *h, int d, int64_t bytes)
{
	if (d < 0 || d >= FGPU_MAX_DEVICES || bytes <= 0)
		return;
	fgpu_region_lock(h);
	struct fgpu_region_slot *s = fgpu_region_slot_locked(h);
	if (s) {
		int64_t give = bytes < s->used[d] ? bytes : s->used[d];
		s->used[d] -= give;
		h->r->total[d] -= give;
		if (h->r->total[d] < 0)
			h->r->total[d] = 0;
	}
	fgpu_region_unlock(h);
}

int64_t fgpu_region_used(struct fgpu_region_handle *h, int d)
{
	if (d < 0 || d >= FGPU_MAX_DEVICES)
		return 0;
	fgpu_region_lock(h);
	/* Reporting is rare next to allocating, and a figure that still
	 * counts processes that exited (without running destructors) or were
	 * killed would be wrong: reclaim first. */
	fgpu_region_reclaim_locked(h);
	int64_t v = h->r->total[d];
	fgpu_region_unlock(h);
	return v < 0 ? 0 : v;
}

void fgpu_region_detach(struct fgpu_region_handle *h)
{
	if (!h->r || h->slot < 0 || h->pid != region_self())
		return;
	fgpu_region_lock(h);
	struct fgpu_region_slot *s = &h->r->slots[h->slot];
	if (s->pid == h->pid) {
		for (int d = 0; d < FGPU_MAX_DEVICES; d++) {
			h->r->total[d] -= s->used[d] + s->untracked[d];
			if (h->r->total[d] < 0)
				h->r->total[d] = 0;
		}
		memset(s, 0, sizeof(*s));
	}
	h->slot = -1;
	fgpu_region_unlock(h);
}

void fgpu_region_close(struct fgpu_region_handle *h)
{
	if (h->r)
		munmap(h->r, sizeof(*h->r));
	h->r = NULL;
}

int fgpu_region_processes(struct fgpu_region_handle *h, struct fgpu_region_proc *out, int max)
{
	int n = 0;
	fgpu_region_lock(h);
	for (int i = 0; i < FGPU_REGION_SLOTS; i++) {
		const struct fgpu_region_slot *s = &h->r->slots[i];
		if (s->pid == 0)
			continue;
		if (n < max) {
			out[n].pid = s->pid;
			out[n].start = s->start;
			memcpy(out[n].used, s->used, sizeof(s->used));
			memcpy(out[n].untracked, s->untracked, sizeof(s->untracked));
		}
		n++;
	}
	fgpu_region_unlock(h);
	return n;
}

int fgpu_region_set_untracked(struct fgpu_region_handle *h, pid_t pid, uint64_t start, int d,
			      int64_t bytes)
{
	if (d < 0 || d >= FGPU_MAX_DEVICES || bytes < 0)
		return -EINVAL;
	int rc = -ESRCH;
	fgpu_region_lock(h);
	for (int i = 0; i < FGPU_REGION_SLOTS; i++) {
		struct fgpu_region_slot *s = &h->r->slots[i];
		if (pid <= 0 || s->pid != pid || (start && s->start && s->start != start))
			continue;
		h->r->total[d] += bytes - s->untracked[d];
		if (h->r->total[d] < 0)
			h->r->total[d] = 0;
		s->untracked[d] = bytes;
		rc = 0;
		break;
	}
	fgpu_region_unlock(h);
	return rc;
}
