/* The watcher threads: containers that end by themselves, and changes of
 * the node's images and networks; agent_watch_start starts them and the
 * measuring threads of agent_usage.c, agent_watch_stop joins them all. */
#include "agent/internal.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"

bool agent_signal_words(int exit_code, char *buf, size_t n)
{
	/* 128+N: the runner, PID 1, ended by signal N. It handles TERM, INT,
	 * HUP, QUIT, USR1 and USR2 itself and exits 0 after TERM; and a
	 * process in its PID namespace cannot signal it unless it handles
	 * the signal: a SIGKILL came from the node (docker kill, kill -9 as
	 * root), since an OOM kill of it sets the OOM flag instead. */
	if (exit_code <= 128 || exit_code > 128 + 64)
		return false;
	int sig = exit_code - 128;
	const char *abbrev = sigabbrev_np(sig);
	char name[32];
	if (abbrev)
		snprintf(name, sizeof(name), "SIG%s", abbrev);
	else
		snprintf(name, sizeof(name), "signal %d", sig);
	if (sig == SIGKILL)
		snprintf(buf, n, "killed by %s from outside the session (docker kill or kill -9 on its node)", name);
	else if (abbrev)
		snprintf(buf, n, "killed by %s (signal %d)", name, sig);
	else
		snprintf(buf, n, "killed by %s", name);
	return true;
}

/* Words for why a container ended, for status_info. */
static void death_reason(const struct rt_container_info *info, char *buf, size_t n)
{
	char killed[128];
	if (info->oom_killed)
		snprintf(buf, n, "container was OOM-killed (exceeded its memory limit), exit code %d",
			 info->exit_code);
	else if (info->error[0])
		snprintf(buf, n, "container ended with exit code %d: %s", info->exit_code, info->error);
	else if (agent_signal_words(info->exit_code, killed, sizeof(killed)))
		snprintf(buf, n, "container was %s, exit code %d", killed, info->exit_code);
	else
		snprintf(buf, n, "container ended by itself with exit code %d", info->exit_code);
}

static int on_runtime_event(const struct rt_event *ev, void *ud)
{
	struct agent *a = ud;
	if (!strcmp(ev->action, "oom")) {
		/* Counted by the OOM thread, which reads the cgroup now. */
		atomic_store_explicit(&a->oom_poke, true, memory_order_relaxed);
		return 0;
	}
	/* A session's container gone by any way (its destroy, or by hand):
	 * its sandbox goes with it. A spare that died leaves the table. */
	if (!strcmp(ev->action, "destroy") && ev->session_id[0] && ev->sandbox[0] && agent_owns(a, ev->cluster_id)) {
		agent_sandbox_remove(a, ev->sandbox);
		return 0;
	}
	if (!strcmp(ev->action, "die") && !ev->session_id[0]) {
		agent_sandbox_forget(a, ev->container_id);
		return 0;
	}
	if (strcmp(ev->action, "die") != 0 || !ev->session_id[0] || !agent_owns(a, ev->cluster_id))
		return 0;
	bool replaced = false;
	pthread_mutex_lock(&a->replaced_mu);
	for (unsigned i = 0; i < 8 && !replaced; i++)
		replaced = a->replaced[i][0] && !strcmp(a->replaced[i], ev->container_id);
	pthread_mutex_unlock(&a->replaced_mu);
	if (replaced)
		return 0;
	struct rt_container_info info = {0};
	struct terr err = {0};
	bool oom = false;
	int code = ev->exit_code;
	char reason[300];
	if (a->rt_ops->inspect(a->rt, ev->container_id, &info, &err) == 0) {
		oom = info.oom_killed;
		code = info.exit_code;
		death_reason(&info, reason, sizeof(reason));
	} else {
		/* Removed already (a deliberate destroy): the manager ignores
		 * deaths of sessions it is terminating. */
		snprintf(reason, sizeof(reason), "container ended with exit code %d", code);
	}
	json_t *event = json_pack("{s:s,s:s,s:s,s:i,s:b,s:s}", "session_id", ev->session_id,
				  "container_id", ev->container_id, "event", "died",
				  "exit_code", code, "oom_killed", oom, "reason", reason);
	if (a->on_event)
		a->on_event(a->event_ud, a->id, event);
	json_decref(event);
	return 0;
}

bool agent_stopping(const struct agent *a)
{
	return atomic_load_explicit(&a->stop, memory_order_relaxed);
}

static void *watch_main(void *arg)
{
	struct agent *a = arg;
	while (!agent_stopping(a)) {
		struct terr err = {0};
		int rc = a->rt_ops->watch(a->rt, AGENT_LABEL_AGENT, a->id, on_runtime_event, a, &a->stop, &err);
		if (agent_stopping(a))
			break;
		if (rc < 0)
			log_warn("agent", "event stream from the runtime failed, retrying: %s", err.msg);
		/* The stream ended; reconnect after a pause so a dead dockerd
		 * is not hammered. */
		for (int i = 0; i < 10 && !agent_stopping(a); i++)
			usleep(100 * 1000);
	}
	return NULL;
}

/* Sends the node's images as an event: {"event":"images","images":[...]}. */
static void report_images(struct agent *a)
{
	json_t *images = NULL;
	struct terr err = {0};
	if (a->rt_ops->image_list(a->rt, &images, &err) < 0)
		log_warn("agent", "listing images after a change: %s", err.msg);
	json_t *event = json_pack("{s:s,s:o}", "event", AGENT_EVENT_IMAGES, "images", agent_images_inline(images));
	if (event && a->on_event)
		a->on_event(a->event_ud, a->id, event);
	json_decref(event);
}

static int on_image_event(const struct rt_event *ev, void *ud)
{
	struct agent *a = ud;
	if (ev->image) {
		agent_images_forget(a);
		report_images(a);
	} else if (ev->network && !strcmp(ev->action, "destroy")) {
		/* One of this agent's: its bridge's rules go (other agents on
		 * this Docker sweep their own; what no one swept goes at the
		 * next agent's start). */
		if (agent_net_forget(a, ev->network_name))
			agent_firewall_sweep(a);
	}
	return 0;
}

static void *image_watch_main(void *arg)
{
	struct agent *a = arg;
	bool first = true;
	/* Rules left for bridges removed while no agent watched, and those
	 * of networks made before this agent. */
	agent_firewall_sweep_all(a);
	while (!agent_stopping(a)) {
		/* Changes while the stream was down are sent as one list. */
		if (!first)
			report_images(a);
		first = false;
		struct terr err = {0};
		/* Images are kept for starts only while their events come;
		 * networks are known again from the next start of each user
		 * (their removals were not seen while the stream was down). */
		pthread_mutex_lock(&a->img_mu);
		a->img_live = a->rt_ops->watch_images != NULL;
		agent_images_forget_locked(a);
		pthread_mutex_unlock(&a->img_mu);
		pthread_mutex_lock(&a->net_mu);
		a->n_net_known = 0;
		pthread_mutex_unlock(&a->net_mu);
		int rc = a->rt_ops->watch_images ? a->rt_ops->watch_images(a->rt, on_image_event, a, &a->stop, &err) : 0;
		pthread_mutex_lock(&a->img_mu);
		a->img_live = false;
		agent_images_forget_locked(a);
		pthread_mutex_unlock(&a->img_mu);
		if (agent_stopping(a) || !a->rt_ops->watch_images)
			break;
		if (rc < 0)
			log_warn("agent", "image event stream from the runtime failed, retrying: %s", err.msg);
		for (int i = 0; i < 10 && !agent_stopping(a); i++)
			usleep(100 * 1000);
	}
	return NULL;
}

int agent_watch_start(struct agent *a, agent_event_fn fn, void *ud, struct terr *err)
{
	a->on_event = fn;
	a->event_ud = ud;
	agent_sandbox_start(a);
	if (pthread_create(&a->watcher, NULL, watch_main, a) != 0)
		return terr_set(err, EAGAIN, "cannot start the container watcher thread");
	a->watching = true;
	if (pthread_create(&a->image_watcher, NULL, image_watch_main, a) == 0)
		a->watching_images = true;
	else
		log_warn("agent", "cannot start the image watcher thread: image changes reach the "
			 "manager only at registration and on 'tessera image rescan'");
	if (a->oom_interval_ms < 0)
		log_info("agent", "OOM kills are not counted (oom_interval_ms < 0)");
	else if (pthread_create(&a->oom_thread, NULL, agent_oom_main, a) == 0)
		a->oom_running = true;
	else
		log_warn("agent", "cannot start the OOM thread: processes killed for exceeding a session's "
			 "memory limit will not be reported");
	if (a->stats_interval_ms < 0)
		log_info("agent", "live usage is not collected (stats_interval_ms < 0)");
	else if (pthread_create(&a->stats_thread, NULL, agent_stats_main, a) == 0)
		a->stats_running = true;
	else
		log_warn("agent", "cannot start the stats thread: sessions' live usage will not be reported");
	if (a->gpus.n > 0 && a->probe_path[0]) {
		if (pthread_create(&a->usage_thread, NULL, agent_usage_main, a) == 0)
			a->usage_running = true;
		else
			log_warn("agent", "cannot start the GPU usage thread: what the driver holds "
				 "beyond the fGPU library's accounting will not be charged");
	}
	return 0;
}

void agent_watch_stop(struct agent *a)
{
	if (!a)
		return;
	atomic_store_explicit(&a->stop, true, memory_order_relaxed);
	if (a->watching)
		pthread_join(a->watcher, NULL);
	if (a->watching_images)
		pthread_join(a->image_watcher, NULL);
	if (a->usage_running)
		pthread_join(a->usage_thread, NULL);
	if (a->oom_running)
		pthread_join(a->oom_thread, NULL);
	if (a->stats_running)
		pthread_join(a->stats_thread, NULL);
	a->watching = a->watching_images = a->usage_running = a->oom_running = a->stats_running = false;
}
