/* A bounded pipe with a producer thread (common/pump.h): a ring buffer
 * under one mutex, one condition variable for each direction. */
#include "common/pump.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/util.h"

struct pump {
	pthread_mutex_t mu;
	pthread_cond_t can_read;    /* data, ready or the end arrived */
	pthread_cond_t can_write;   /* room, or the reader left */
	char *buf;
	size_t cap, head, len;      /* ring: len bytes from head */
	bool ready, ended, thread_started;
	int rc;                     /* the producer's result once ended */
	struct terr err;
	atomic_bool cancel;         /* the reader closed: read by httpc too */
	pump_fn fn;
	void *ud;
	void (*ud_free)(void *);
	pthread_t thread;
};

static void *pump_main(void *arg)
{
	struct pump *p = arg;
	struct terr err = {0};
	int rc = p->fn(p, p->ud, &err);
	pthread_mutex_lock(&p->mu);
	p->ended = true;
	p->rc = rc;
	if (rc < 0)
		p->err = err;
	pthread_cond_broadcast(&p->can_read);
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

static void pump_free(struct pump *p)
{
	if (p->ud_free)
		p->ud_free(p->ud);
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->can_read);
	pthread_cond_destroy(&p->can_write);
	free(p->buf);
	free(p);
}

int pump_start(struct pump **out, size_t cap, pump_fn fn, void *ud, void (*ud_free)(void *ud),
	       struct terr *err)
{
	*out = NULL;
	struct pump *p = calloc(1, sizeof(*p));
	if (!cap)
		cap = PUMP_DEFAULT_CAP;
	if (!p || !(p->buf = malloc(cap))) {
		free(p);
		if (ud_free)
			ud_free(ud);
		return terr_set(err, ENOMEM, "out of memory");
	}
	p->cap = cap;
	p->fn = fn;
	p->ud = ud;
	p->ud_free = ud_free;
	atomic_init(&p->cancel, false);
	pthread_mutex_init(&p->mu, NULL);
	util_cond_init_mono(&p->can_read);
	pthread_cond_init(&p->can_write, NULL);
	if (pthread_create(&p->thread, NULL, pump_main, p) != 0) {
		pump_free(p);
		return terr_set(err, EAGAIN, "cannot start a thread for the stream");
	}
	p->thread_started = true;
	*out = p;
	return 0;
}

int pump_write(struct pump *p, const void *data, size_t len)
{
	const char *d = data;
	pthread_mutex_lock(&p->mu);
	while (len) {
		while (p->len == p->cap && !atomic_load_explicit(&p->cancel, memory_order_relaxed))
			pthread_cond_wait(&p->can_write, &p->mu);
		if (atomic_load_explicit(&p->cancel, memory_order_relaxed)) {
			pthread_mutex_unlock(&p->mu);
			return -ECANCELED;
		}
		/* Copy into the free part of the ring: at most up to its end. */
		size_t tail = (p->head + p->len) % p->cap;
		size_t room = p->cap - p->len;
		size_t k = p->cap - tail < room ? p->cap - tail : room;
		if (k > len)
			k = len;
		memcpy(p->buf + tail, d, k);
		p->len += k;
		d += k;
		len -= k;
		pthread_cond_broadcast(&p->can_read);
	}
	pthread_mutex_unlock(&p->mu);
	return 0;
}

void pump_ready(struct pump *p)
{
	pthread_mutex_lock(&p->mu);
	p->ready = true;
	pthread_cond_broadcast(&p->can_read);
	pthread_mutex_unlock(&p->mu);
}

const atomic_bool *pump_cancel_flag(struct pump *p)
{
	return &p->cancel;
}

int pump_wait_ready(struct pump *p, struct terr *err)
{
	pthread_mutex_lock(&p->mu);
	while (!p->ready && !p->ended)
		pthread_cond_wait(&p->can_read, &p->mu);
	int rc = 0;
	if (!p->ready && p->ended && p->rc < 0) {
		rc = p->rc;
		if (err)
			*err = p->err;
	}
	pthread_mutex_unlock(&p->mu);
	return rc;
}

long pump_read(struct pump *p, char *buf, size_t max, int timeout_ms)
{
	struct timespec dl;
	if (timeout_ms >= 0)
		util_deadline_ms(&dl, timeout_ms);
	pthread_mutex_lock(&p->mu);
	while (p->len == 0 && !p->ended) {
		if (timeout_ms < 0) {
			pthread_cond_wait(&p->can_read, &p->mu);
		} else if (pthread_cond_timedwait(&p->can_read, &p->mu, &dl) != 0 && p->len == 0 &&
			   !p->ended) {
			pthread_mutex_unlock(&p->mu);
			return -ETIMEDOUT;
		}
	}
	long n;
	if (p->len == 0) {
		n = p->rc < 0 ? -1 : 0;
	} else {
		size_t k = p->cap - p->head < p->len ? p->cap - p->head : p->len;
		if (k > max)
			k = max;
		memcpy(buf, p->buf + p->head, k);
		p->head = (p->head + k) % p->cap;
		p->len -= k;
		if (p->len == 0)
			p->head = 0;
		n = (long)k;
		pthread_cond_broadcast(&p->can_write);
	}
	pthread_mutex_unlock(&p->mu);
	return n;
}

const struct terr *pump_error(struct pump *p)
{
	return &p->err;
}

void pump_close(struct pump *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	atomic_store_explicit(&p->cancel, true, memory_order_relaxed);
	pthread_cond_broadcast(&p->can_write);
	pthread_mutex_unlock(&p->mu);
	if (p->thread_started)
		pthread_join(p->thread, NULL);
	pump_free(p);
}
