/* agent/etcdfollow.h: a range of the prefix, then a watch from the
 * revision after it. */
#include "agent/etcdfollow.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/etcd.h"
#include "common/log.h"

struct agent_etcd {
	struct agent *a;
	const char *endpoint;
	pthread_t thread;
	atomic_bool cancel;
	/* Between ETCD_EVENT_RESET and SYNCED: which keys etcd still has. */
	bool resyncing;
	bool seen[2];
};

static const char *const keys[] = {"log_max_size", "log_max_files"};

/* key under the prefix = the JSON text value (NULL: unset). */
static void apply(struct agent_etcd *f, const char *full_key, const char *value, size_t len, int64_t rev)
{
	const char *key = full_key + strlen(ETCD_CONFIG_PREFIX);
	if (!agent_cluster_key(key))
		return;   /* a manager's setting */
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (!strcmp(keys[i], key))
			f->seen[i] = true;
	json_t *v = value ? json_loadb(value, len, JSON_DECODE_ANY, NULL) : json_null();
	struct terr err = {0};
	if (!v)
		log_warn("agent", "etcd key %s (revision %lld) is not JSON: ignored", full_key, (long long)rev);
	else if (agent_cluster_set(f->a, key, v, &err) < 0)
		log_warn("agent", "etcd key %s (revision %lld) ignored: %s", full_key, (long long)rev, err.msg);
	json_decref(v);
}

static void on_event(const struct etcd_event *ev, void *ud)
{
	struct agent_etcd *f = ud;
	if (ev->type == ETCD_EVENT_RESET) {
		/* Everything there is follows: what it lacks was deleted. */
		f->resyncing = true;
		memset(f->seen, 0, sizeof(f->seen));
		return;
	}
	if (ev->type == ETCD_EVENT_SYNCED) {
		for (size_t i = 0; f->resyncing && i < sizeof(keys) / sizeof(keys[0]); i++)
			if (!f->seen[i])
				agent_cluster_set(f->a, keys[i], NULL, NULL);
		f->resyncing = false;
		return;
	}
	apply(f, ev->key, ev->type == ETCD_EVENT_PUT ? ev->value : NULL, ev->value_len, ev->revision);
}

static void on_state(bool up, const char *why, void *ud)
{
	struct agent_etcd *f = ud;
	if (up)
		log_info("agent", "watching the cluster settings in etcd at %s", f->endpoint);
	else
		log_warn("agent", "etcd at %s: %s; settings stay as they are, retrying every second", f->endpoint, why);
}

static void *follow(void *arg)
{
	struct agent_etcd *f = arg;
	int64_t rev = 0;
	bool warned = false;
	while (!atomic_load(&f->cancel)) {
		struct etcd_kv *kvs;
		size_t n;
		struct terr err = {0};
		if (etcd_range(f->endpoint, ETCD_CONFIG_PREFIX, true, &kvs, &n, &rev, &err) == 0) {
			for (size_t i = 0; i < n; i++)
				apply(f, kvs[i].key, kvs[i].value, kvs[i].value_len, kvs[i].mod_revision);
			etcd_kvs_free(kvs, n);
			break;
		}
		if (!warned)
			log_warn("agent", "cannot read the cluster settings: %s; agent.conf's values meanwhile, "
				 "retrying every second", err.msg);
		warned = true;
		for (int i = 0; i < 10 && !atomic_load(&f->cancel); i++)
			nanosleep(&(struct timespec){0, 100000000L}, NULL);
	}
	if (!atomic_load(&f->cancel))
		etcd_watch(f->endpoint, ETCD_CONFIG_PREFIX, rev + 1, 1000, on_event, on_state, f, &f->cancel);
	return NULL;
}

int agent_etcd_start(struct agent_etcd **out, struct agent *a, const char *endpoint, struct terr *err)
{
	int rc = etcd_check_endpoint(endpoint, err);
	if (rc < 0)
		return rc;
	struct agent_etcd *f = calloc(1, sizeof(*f));
	if (!f)
		return terr_set(err, ENOMEM, "out of memory");
	f->a = a;
	f->endpoint = endpoint;
	if ((rc = pthread_create(&f->thread, NULL, follow, f))) {
		free(f);
		return terr_set(err, rc, "cannot start the etcd thread");
	}
	*out = f;
	return 0;
}

void agent_etcd_stop(struct agent_etcd *f)
{
	if (!f)
		return;
	atomic_store(&f->cancel, true);
	pthread_join(f->thread, NULL);
	free(f);
}
