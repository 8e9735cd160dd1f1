/* The agent's Prometheus metrics (docs/admin.md, "Metrics"): the last
 * round of live usage per session and per GPU. Sessions are labelled by
 * id, never by name or owner (users' words and emails stay out of the
 * monitoring system); GPUs by UUID. */
#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"
#include "common/metrics.h"

static double num(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);
	return json_is_number(v) ? json_number_value(v) : 0;
}

/* One gauge or counter per session from a member of its sample. */
static void per_session(struct metrics_text *t, json_t *samples, const char *node, const char *name, const char *type,
			const char *help, const char *key)
{
	metrics_family(t, name, type, help);
	size_t i;
	json_t *s;
	json_array_foreach(samples, i, s) {
		const char *sid = json_string_value(json_object_get(s, "session_id"));
		if (!sid)
			continue;
		const char *l[] = {"node", node, "session_id", sid, NULL};
		metrics_sample(t, name, l, num(s, key));
	}
}

static void per_session_gpu(struct metrics_text *t, json_t *samples, const char *node, const char *name,
			    const char *help, const char *key)
{
	metrics_family(t, name, "gauge", help);
	size_t i, k;
	json_t *s, *g;
	json_array_foreach(samples, i, s) {
		const char *sid = json_string_value(json_object_get(s, "session_id"));
		json_array_foreach(json_object_get(s, "gpus"), k, g) {
			const char *uuid = json_string_value(json_object_get(g, "uuid"));
			/* Not measured (real GPUs' utilisation): no series. */
			if (!sid || !uuid || !json_is_number(json_object_get(g, key)))
				continue;
			const char *l[] = {"node", node, "session_id", sid, "gpu", uuid, NULL};
			metrics_sample(t, name, l, num(g, key));
		}
	}
}

/* A family of one sample, labelled with the node. */
static void node_metric(struct metrics_text *t, const char *name, const char *type, const char *help,
			const char *const *ln, double v)
{
	metrics_family(t, name, type, help);
	metrics_sample(t, name, ln, v);
}

void agent_metrics_write(struct agent *a, struct metrics_text *t)
{
	json_t *ev = agent_stats_last(a);
	json_t *samples = json_object_get(ev, "samples"), *node = json_object_get(ev, "node");
	const char *id = agent_id(a);
	const char *ln[] = {"node", id, NULL};
	metrics_family(t, "tessera_agent_sessions", "gauge", "Running sessions in the last usage round.");
	metrics_sample(t, "tessera_agent_sessions", ln, (double)json_array_size(samples));
	int64_t kills, kill_failures, spares, joined;
	agent_cgroup_kill_counts(a, &kills, &kill_failures);
	agent_sandbox_counts(a, &spares, &joined);
	node_metric(t, "tessera_agent_cgroup_kills_total", "counter",
		    "Removals whose container Docker did not stop in time and the agent killed through its cgroups.", ln,
		    (double)kills);
	node_metric(t, "tessera_agent_cgroup_kill_failures_total", "counter",
		    "Removals whose container neither Docker nor the agent's cgroup kill could stop.", ln,
		    (double)kill_failures);
	node_metric(t, "tessera_agent_sandbox_spares", "gauge", "Spare sandboxes ready for users' next sessions to join.",
		    ln, (double)spares);
	node_metric(t, "tessera_agent_sandbox_starts_total", "counter",
		    "Session starts that joined a spare sandbox, setting up no network.", ln, (double)joined);
	node_metric(t, "tessera_agent_stats_interval_seconds", "gauge", "The period of the usage rounds.", ln,
		    agent_stats_interval_ms(a) / 1000.0);
	if (node) {
		metrics_family(t, "tessera_agent_node_cpu_cores", "gauge", "CPU cores the node's sessions use.");
		metrics_sample(t, "tessera_agent_node_cpu_cores", ln, num(node, "cpu_cores"));
		metrics_family(t, "tessera_agent_node_memory_bytes", "gauge", "Memory the node's sessions use.");
		metrics_sample(t, "tessera_agent_node_memory_bytes", ln, num(node, "mem_bytes"));
	}
	per_session(t, samples, id, "tessera_agent_session_cpu_cores", "gauge", "CPU cores a session uses.",
		    "cpu_cores");
	per_session(t, samples, id, "tessera_agent_session_cpu_percent", "gauge",
		    "CPU a session uses in percent of its allocation.", "cpu_pct");
	per_session(t, samples, id, "tessera_agent_session_memory_bytes", "gauge",
		    "Memory a session uses (without the inactive page cache).", "mem_bytes");
	per_session(t, samples, id, "tessera_agent_session_memory_limit_bytes", "gauge", "A session's memory limit.",
		    "mem_limit_bytes");
	per_session(t, samples, id, "tessera_agent_session_network_receive_bytes_total", "counter",
		    "Bytes a session's network namespace received.", "net_rx_bytes");
	per_session(t, samples, id, "tessera_agent_session_network_transmit_bytes_total", "counter",
		    "Bytes a session's network namespace sent.", "net_tx_bytes");
	per_session(t, samples, id, "tessera_agent_session_block_read_bytes_total", "counter",
		    "Bytes a session read from block devices.", "blk_read_bytes");
	per_session(t, samples, id, "tessera_agent_session_block_write_bytes_total", "counter",
		    "Bytes a session wrote to block devices.", "blk_write_bytes");
	per_session_gpu(t, samples, id, "tessera_agent_session_gpu_utilization_percent",
			"SM utilisation charged to a session on a GPU, in percent of the device.", "util_pct");
	per_session_gpu(t, samples, id, "tessera_agent_session_gpu_memory_bytes",
			"GPU memory a session's processes hold on a device.", "mem_bytes");
	size_t i;
	json_t *g;
	metrics_family(t, "tessera_agent_gpu_utilization_percent", "gauge",
		       "A GPU's utilisation by the sessions, in percent (where measured).");
	json_array_foreach(json_object_get(node, "gpus"), i, g) {
		const char *uuid = json_string_value(json_object_get(g, "uuid"));
		if (!uuid || !json_is_number(json_object_get(g, "util_pct")))
			continue;
		const char *l[] = {"node", id, "gpu", uuid, NULL};
		metrics_sample(t, "tessera_agent_gpu_utilization_percent", l, num(g, "util_pct"));
	}
	metrics_family(t, "tessera_agent_gpu_memory_used_bytes", "gauge", "GPU memory the sessions hold on a device.");
	json_array_foreach(json_object_get(node, "gpus"), i, g) {
		const char *uuid = json_string_value(json_object_get(g, "uuid"));
		if (!uuid)
			continue;
		const char *l[] = {"node", id, "gpu", uuid, NULL};
		metrics_sample(t, "tessera_agent_gpu_memory_used_bytes", l, num(g, "mem_used_bytes"));
	}
	json_decref(ev);
}
