/* Commands run in a session's container (agent_exec_stream), with the
 * runner enforcing a timeout, and its log (agent_logs_stream). */
#include "agent/internal.h"

#include <stdlib.h>
#include <string.h>

#include "common/frames.h"
#include "common/util.h"

/* A container started before the runner knew --timeout still has the old
 * binary mounted (a bind mount keeps the old file): it answers a wrapped
 * command with its usage and exit code 2, and the command is then run as
 * before, without the limit. That answer is known only at its end, so
 * the wrapped command's stderr is held back while it could still be it:
 * until stdout says anything, more than RETRY_HOLD bytes came, or it
 * ended. Everything else passes through, re-framed as it came. */
#define RETRY_HOLD 1024

struct exec_retry {
	struct agent *a;
	char cid[RT_ID_MAX];
	char **argv;             /* the plain command, copied, NULL-terminated */
	char user[32];            /* the user it runs as, "" for the container's */
	struct pump *inner;      /* the stream being read */
	struct pump *out;
	struct frames_decoder dec;
	char held[RETRY_HOLD];
	size_t held_len;
	bool deciding;           /* stderr is held back */
	bool old_runner;
	bool write_failed;
};

static void exec_retry_free(void *ud)
{
	struct exec_retry *r = ud;
	pump_close(r->inner);
	for (size_t i = 0; r->argv && r->argv[i]; i++)
		free(r->argv[i]);
	free(r->argv);
	free(r);
}

static int retry_put(struct exec_retry *r, enum frame_type type, const void *data, size_t len)
{
	unsigned char hdr[FRAMES_HEADER];
	frames_header(hdr, type, (uint32_t)len);
	if (pump_write(r->out, hdr, sizeof(hdr)) < 0 || pump_write(r->out, data, len) < 0) {
		r->write_failed = true;
		return 1;
	}
	return 0;
}

static int retry_release(struct exec_retry *r)
{
	r->deciding = false;
	return r->held_len ? retry_put(r, FRAME_STDERR, r->held, r->held_len) : 0;
}

static int retry_data(void *ud, enum frame_type type, const char *data, size_t len)
{
	struct exec_retry *r = ud;
	if (r->deciding && type == FRAME_STDERR && r->held_len + len <= sizeof(r->held)) {
		memcpy(r->held + r->held_len, data, len);
		r->held_len += len;
		return 0;
	}
	if (r->deciding && retry_release(r))
		return 1;
	return retry_put(r, type, data, len);
}

static int retry_end(void *ud, bool exited, int32_t code, const char *error)
{
	struct exec_retry *r = ud;
	if (r->deciding && exited && code == 2 &&
	    memmem(r->held, r->held_len, "usage: tessera-runner", 21) &&
	    !memmem(r->held, r->held_len, "--timeout SECONDS", 17)) {
		r->old_runner = true;
		return 0;
	}
	if (r->deciding && retry_release(r))
		return 1;
	if (exited) {
		unsigned char fr[FRAMES_HEADER + 4];
		frames_exit(fr, code);
		if (pump_write(r->out, fr, sizeof(fr)) < 0)
			r->write_failed = true;
		return r->write_failed;
	}
	return retry_put(r, FRAME_ERROR, error, strlen(error));
}

/* Reads r->inner into fn (decoder or plain copy) until it ends; waits in
 * steps so that a reader who left is noticed. 0 at its end, else the
 * error. */
static int retry_pass(struct exec_retry *r, bool decode, struct terr *err)
{
	char buf[16384];
	for (;;) {
		long n = pump_read(r->inner, buf, sizeof(buf), 500);
		if (n == -ETIMEDOUT) {
			if (atomic_load_explicit(pump_cancel_flag(r->out), memory_order_relaxed))
				return terr_set(err, ECANCELED, "exec: the reader went away");
			continue;
		}
		if (n < 0) {
			*err = *pump_error(r->inner);
			return -(err->code ? err->code : EIO);
		}
		if (n == 0)
			return 0;
		if (decode ? frames_feed(&r->dec, buf, (size_t)n) < 0 : pump_write(r->out, buf, (size_t)n) < 0)
			break;
	}
	if (r->write_failed || !decode)
		return terr_set(err, ECANCELED, "exec: the reader went away");
	return 0;   /* the decoder refused the stream: judged by the caller */
}

static int exec_retry_produce(struct pump *p, void *ud, struct terr *err)
{
	struct exec_retry *r = ud;
	r->out = p;
	pump_ready(p);
	int rc = retry_pass(r, true, err);
	if (rc < 0)
		return rc;
	if (!r->old_runner) {
		if (frames_finish(&r->dec) < 0) {
			static const char msg[] = "exec: the command's output stream was cut short";
			retry_put(r, FRAME_ERROR, msg, sizeof(msg) - 1);
		}
		return 0;
	}
	pump_close(r->inner);
	r->inner = NULL;
	struct terr e = {0};
	if (r->a->rt_ops->exec_stream(r->a->rt, r->cid, (const char *const *)r->argv, NULL,
				      r->user[0] ? r->user : NULL, r->user[0] ? AGENT_WORK_HOME : NULL,
				      &r->inner, &e) < 0) {
		retry_put(r, FRAME_ERROR, e.msg, strlen(e.msg));
		return 0;
	}
	return retry_pass(r, false, err);
}

int agent_exec_stream(struct agent *a, const char *container_id, const char *const *argv,
		      int timeout_s, struct pump **out, struct terr *err)
{
	*out = NULL;
	/* As the session's own user, from its container's label (set at
	 * create, out of the session's reach); a container without it, made
	 * before sessions had a user, runs everything as root. */
	struct rt_container_info info;
	int rc = a->rt_ops->inspect(a->rt, container_id, &info, err);
	if (rc < 0)
		return rc;
	const char *user = NULL, *workdir = NULL;
	if (info.run_as[0] && strcmp(info.run_as, "0:0") != 0) {
		user = info.run_as;
		workdir = AGENT_WORK_HOME;
	}
	if (timeout_s <= 0)
		return a->rt_ops->exec_stream(a->rt, container_id, argv, NULL, user, workdir, out, err);
	/* docker exec cannot stop what it started: the runner (in every
	 * session, on PATH or not) runs the command and stops it in time. */
	size_t n = 0;
	while (argv[n])
		n++;
	struct exec_retry *r = calloc(1, sizeof(*r));
	const char **wrapped = calloc(n + 5, sizeof(char *));
	if (r)
		r->argv = calloc(n + 1, sizeof(char *));
	bool ok = r && wrapped && r->argv;
	for (size_t i = 0; ok && i < n; i++)
		ok = (r->argv[i] = strdup(argv[i])) != NULL;
	if (!ok) {
		free(wrapped);
		if (r)
			exec_retry_free(r);
		return terr_set(err, ENOMEM, "out of memory");
	}
	r->a = a;
	util_strlcpy(r->cid, container_id, sizeof(r->cid));
	if (user)
		util_strlcpy(r->user, user, sizeof(r->user));
	r->deciding = true;
	frames_decoder_init(&r->dec, &(struct frames_sink){.on_data = retry_data, .on_end = retry_end, .ud = r});
	char secs[16];
	snprintf(secs, sizeof(secs), "%d", timeout_s);
	wrapped[0] = AGENT_RUNNER_TARGET;
	wrapped[1] = "--timeout";
	wrapped[2] = secs;
	wrapped[3] = "--";
	memcpy(wrapped + 4, argv, n * sizeof(char *));
	rc = a->rt_ops->exec_stream(a->rt, container_id, wrapped, NULL, user, workdir, &r->inner, err);
	free(wrapped);
	if (rc < 0) {
		exec_retry_free(r);
		return rc;
	}
	return pump_start(out, 0, exec_retry_produce, r, exec_retry_free, err);
}

int agent_logs_stream(struct agent *a, const char *container_id, int tail, bool follow,
		      struct pump **out, struct terr *err)
{
	return a->rt_ops->logs_stream(a->rt, container_id, tail, follow, out, err);
}
