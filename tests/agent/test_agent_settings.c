/* agent/agent_settings.c: the one table of the agent's settings. Its
 * defaults are valid values; flags are named like the keys; every type
 * parses and refuses what it should, naming the setting as the front end
 * spells it; agent.conf and `tessera server`'s flags give the same
 * struct agent_config for the same values; agent.conf refuses unknown and
 * missing required keys, naming the file and the line. */
#include "agent/agent_settings.h"
#include "testlib.h"

#include <stdlib.h>

#define MiB (1LL << 20)

static struct conf parse_conf(const char *text)
{
	struct conf c = {0};
	struct terr err = {0};
	if (conf_parse(text, strlen(text), &c, &err) < 0)
		FAILF("conf_parse: %s", err.msg);
	return c;
}

TEST(defaults)
{
	struct agent_settings s;
	agent_settings_init(&s);
	CHECK_STR(s.agent.id, "local");
	CHECK_STR(s.listen, "0.0.0.0:8091");
	CHECK_STR(s.agent.data_dir, "/var/lib/tessera-agent");
	CHECK_STR(s.agent.gpu_context_overhead, "auto");
	CHECK_STR(s.agent.seccomp, "tessera");
	CHECK_INT(s.agent.mem_reserve, 512 * MiB);
	CHECK_INT(s.agent.gpu_usage_interval_ms, 1000);
	CHECK_INT(s.agent.cpu_m, 0);   /* 0: all online CPUs */
	CHECK_INT(s.agent.mem, 0);     /* 0: all memory minus the reserve */
	CHECK_INT(s.agent.pids_limit, 0);   /* 0: auto, sized per session */
	CHECK(s.agent.runtime_endpoint == NULL);
	CHECK(s.agent.runner_path == NULL);
	CHECK(s.agent.mock_gpus == NULL);
	CHECK(s.manager == NULL && s.cluster_secret == NULL && s.advertise_url == NULL);

	/* Every default passes the setting's own validation. */
	for (size_t i = 0; i < agent_settings_count; i++) {
		const struct agent_setting *d = &agent_settings_table[i];
		struct terr err = {0};
		if (d->def && agent_setting_set(&s, d, d->def, d->key, &err) < 0)
			FAILF("default of %s refused: %s", d->key, err.msg);
	}
}

TEST(flags_are_named_like_keys)
{
	bool seen_interval = false, seen_runner = false, seen_docker = false;
	for (size_t i = 0; i < agent_settings_count; i++) {
		const struct agent_setting *d = &agent_settings_table[i];
		CHECK(agent_setting_find(d->key) == d);
		CHECK(d->help && *d->help);
		if (!(d->flags & AGENT_SETTING_FLAG)) {
			CHECK(d->flag == NULL);
			continue;
		}
		if (!strcmp(d->key, "id")) {
			CHECK_STR(d->flag, "node-id");  /* the flag it always had */
			continue;
		}
		char want[64];
		snprintf(want, sizeof(want), "%s", d->key);
		for (char *p = want; *p; p++)
			if (*p == '_')
				*p = '-';
		CHECK_STR(d->flag, want);
		seen_interval |= !strcmp(d->key, "gpu_usage_interval_ms");
		seen_runner |= !strcmp(d->key, "runner_path");
		seen_docker |= !strcmp(d->key, "docker_socket");
	}
	/* The three that `tessera server` used to lack. */
	CHECK(seen_interval && seen_runner && seen_docker);
	CHECK(agent_setting_find("nosuch") == NULL);
}

static int set(struct agent_settings *s, const char *key, const char *value, struct terr *err)
{
	const struct agent_setting *d = agent_setting_find(key);
	if (!d) {
		FAILF("no setting %s", key);
		return -1;
	}
	return agent_setting_set(s, d, value, key, err);
}

TEST(types_and_ranges)
{
	struct agent_settings s;
	agent_settings_init(&s);
	struct terr err = {0};

	CHECK_INT(set(&s, "cpu", "0.5", &err), 0);
	CHECK_INT(s.agent.cpu_m, 500);
	CHECK_INT(set(&s, "cpu", "0", &err), -EINVAL);
	CHECK_STR(err.msg, "cpu must be a positive number like 2 or 0.5");
	CHECK_INT(set(&s, "cpu", "-1", &err), -EINVAL);
	CHECK_INT(s.agent.cpu_m, 500);   /* a refused value changes nothing */

	CHECK_INT(set(&s, "mem", "1.5GiB", &err), 0);
	CHECK_INT(s.agent.mem, 1536 * MiB);
	CHECK(set(&s, "mem", "12x", &err) < 0);
	CHECK_CONTAINS(err.msg, "mem: invalid size '12x'");
	CHECK_INT(set(&s, "mem_reserve", "2g", &err), 0);
	CHECK_INT(s.agent.mem_reserve, 2048 * MiB);

	CHECK_INT(set(&s, "gpu_usage_interval_ms", "100", &err), 0);
	CHECK_INT(s.agent.gpu_usage_interval_ms, 100);
	CHECK_INT(set(&s, "gpu_usage_interval_ms", "60000", &err), 0);
	CHECK_INT(s.agent.gpu_usage_interval_ms, 60000);
	const char *bad[] = {"5", "99", "60001", "1e3", "", "100ms", "-100"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK_INT(set(&s, "gpu_usage_interval_ms", bad[i], &err), -EINVAL);
		CHECK_CONTAINS(err.msg, "gpu_usage_interval_ms must be an integer from 100 to 60000");
	}
	CHECK_INT(s.agent.gpu_usage_interval_ms, 60000);

	CHECK_INT(set(&s, "gpu_context_overhead", "512MiB", &err), 0);
	CHECK_STR(s.agent.gpu_context_overhead, "512MiB");
	CHECK_INT(set(&s, "gpu_context_overhead", "0", &err), 0);
	CHECK_INT(set(&s, "gpu_context_overhead", "auto", &err), 0);
	CHECK_INT(set(&s, "gpu_context_overhead", "lots", &err), -EINVAL);
	CHECK_STR(err.msg, "gpu_context_overhead must be \"auto\" or a size such as 512MiB, not 'lots'");

	CHECK_INT(set(&s, "seccomp", "default", &err), 0);
	CHECK_STR(s.agent.seccomp, "default");
	CHECK_INT(set(&s, "seccomp", "off", &err), -EINVAL);
	CHECK_STR(err.msg, "seccomp must be \"tessera\" or \"default\", not 'off'");
	CHECK_STR(s.agent.seccomp, "default");
	bool docker_default = true;
	CHECK_INT(agent_settings_parse_seccomp(NULL, &docker_default, "seccomp", &err), 0);
	CHECK(!docker_default);
	CHECK_INT(agent_settings_parse_seccomp("default", &docker_default, "--seccomp", &err), 0);
	CHECK(docker_default);
	CHECK_INT(agent_settings_parse_seccomp("unconfined", &docker_default, "--seccomp", &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "--seccomp must be");

	/* pids_limit: auto or a number, digits only. */
	CHECK_INT(set(&s, "pids_limit", "64", &err), 0);
	CHECK_INT(s.agent.pids_limit, 64);
	CHECK_INT(set(&s, "pids_limit", "auto", &err), 0);
	CHECK_INT(s.agent.pids_limit, 0);
	CHECK_INT(set(&s, "pids_limit", "4194304", &err), 0);
	CHECK_INT(s.agent.pids_limit, 4194304);
	const char *bad_pids[] = {"15", "0", "-1", " 64", "+64", "64 ", "1e3", "", "4194305", "lots",
				  "99999999999999999999"};
	for (size_t i = 0; i < sizeof(bad_pids) / sizeof(bad_pids[0]); i++) {
		CHECK_INT(set(&s, "pids_limit", bad_pids[i], &err), -EINVAL);
		CHECK_CONTAINS(err.msg, "pids_limit must be \"auto\" or an integer from 16 to 4194304");
	}
	CHECK_INT(s.agent.pids_limit, 4194304);

	CHECK_INT(set(&s, "docker_socket", "unix:///run/docker.sock", &err), 0);
	CHECK_STR(s.agent.runtime_endpoint, "unix:///run/docker.sock");
	CHECK_INT(set(&s, "runner_path", "/opt/runner", &err), 0);
	CHECK_STR(s.agent.runner_path, "/opt/runner");
}

TEST(context_overhead_parser)
{
	int64_t b = 7;
	struct terr err = {0};
	CHECK_INT(agent_settings_parse_overhead(NULL, &b, "x", &err), 0);
	CHECK_INT(b, -1);
	CHECK_INT(agent_settings_parse_overhead("", &b, "x", &err), 0);
	CHECK_INT(b, -1);
	CHECK_INT(agent_settings_parse_overhead("auto", &b, "x", &err), 0);
	CHECK_INT(b, -1);
	CHECK_INT(agent_settings_parse_overhead("256m", &b, "x", &err), 0);
	CHECK_INT(b, 256 * MiB);
	CHECK_INT(agent_settings_parse_overhead("0", &b, "x", &err), 0);
	CHECK_INT(b, 0);
	CHECK_INT(agent_settings_parse_overhead("-1", &b, "--gpu-context-overhead", &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "--gpu-context-overhead must be \"auto\"");
}

/* The same values through agent.conf and through the flags (as
 * cmd_server sets them) give the same node configuration. */
TEST(conf_and_flags_agree)
{
	const char *vals[][2] = {
		{"id", "node-7"}, {"docker_socket", "unix:///x.sock"}, {"cpu", "3.5"}, {"mem", "2GiB"},
		{"mem_reserve", "1GiB"}, {"runner_path", "/r"}, {"mock_gpus", "2x8GiB"},
		{"gpu_context_overhead", "300MiB"}, {"gpu_usage_interval_ms", "250"}, {"seccomp", "default"},
		{"pids_limit", "300"},
	};
	size_t n = sizeof(vals) / sizeof(vals[0]);
	char text[2048] = "manager = http://m:8090\ncluster_secret = 0123456789abcdef\n"
			  "advertise_url = http://a:8091\n";
	for (size_t i = 0; i < n; i++) {
		size_t l = strlen(text);
		snprintf(text + l, sizeof(text) - l, "%s = %s\n", vals[i][0], vals[i][1]);
	}
	struct conf c = parse_conf(text);
	struct agent_settings from_conf, from_flags;
	struct terr err = {0};
	agent_settings_init(&from_conf);
	CHECK_INT(agent_settings_from_conf(&from_conf, &c, "agent.conf", &err), 0);

	agent_settings_init(&from_flags);
	for (size_t i = 0; i < n; i++) {
		const struct agent_setting *d = agent_setting_find(vals[i][0]);
		CHECK(d && (d->flags & AGENT_SETTING_FLAG));
		char name[64];
		snprintf(name, sizeof(name), "--%s", d->flag);
		CHECK_INT(agent_setting_set(&from_flags, d, vals[i][1], name, &err), 0);
	}
	const struct agent_config *x = &from_conf.agent, *y = &from_flags.agent;
	CHECK_STR(x->id, "node-7");
	CHECK_STR(x->id, y->id);
	CHECK_STR(x->runtime_endpoint, y->runtime_endpoint);
	CHECK_STR(x->runner_path, y->runner_path);
	CHECK_STR(x->mock_gpus, y->mock_gpus);
	CHECK_STR(x->seccomp, "default");
	CHECK_STR(x->seccomp, y->seccomp);
	CHECK_STR(x->gpu_context_overhead, y->gpu_context_overhead);
	CHECK_INT(x->cpu_m, 3500);
	CHECK_INT(x->cpu_m, y->cpu_m);
	CHECK_INT(x->mem, y->mem);
	CHECK_INT(x->mem_reserve, 1024 * MiB);
	CHECK_INT(x->mem_reserve, y->mem_reserve);
	CHECK_INT(x->gpu_usage_interval_ms, 250);
	CHECK_INT(x->gpu_usage_interval_ms, y->gpu_usage_interval_ms);
	CHECK_INT(x->pids_limit, 300);
	CHECK_INT(x->pids_limit, y->pids_limit);
	CHECK_STR(from_conf.manager, "http://m:8090");
	CHECK_STR(from_conf.advertise_url, "http://a:8091");
	CHECK_STR(from_conf.listen, "0.0.0.0:8091");
	conf_free(&c);
}

TEST(conf_errors)
{
	struct agent_settings s;
	struct terr err = {0};
	const char *base = "id = n1\nmanager = http://m:8090\ncluster_secret = 0123456789abcdef\n"
			   "advertise_url = http://a:8091\n";
	char text[1024];

	snprintf(text, sizeof(text), "%sgpu_usage_interval_ms = 5\n", base);
	struct conf c = parse_conf(text);
	agent_settings_init(&s);
	CHECK_INT(agent_settings_from_conf(&s, &c, "/etc/a.conf", &err), -EINVAL);
	CHECK_STR(err.msg, "/etc/a.conf: line 5: gpu_usage_interval_ms must be an integer from 100 to 60000, not '5'");
	conf_free(&c);

	snprintf(text, sizeof(text), "%smem_reserv = 1g\n", base);
	c = parse_conf(text);
	agent_settings_init(&s);
	CHECK_INT(agent_settings_from_conf(&s, &c, "/etc/a.conf", &err), -EINVAL);
	CHECK_STR(err.msg, "/etc/a.conf: line 5: unknown key 'mem_reserv'");
	conf_free(&c);

	c = parse_conf("id = n1\ncluster_secret = 0123456789abcdef\nadvertise_url = http://a:8091\n");
	agent_settings_init(&s);
	CHECK_INT(agent_settings_from_conf(&s, &c, "/etc/a.conf", &err), -EINVAL);
	CHECK_STR(err.msg, "/etc/a.conf: id, manager, cluster_secret and advertise_url are required (manager is missing)");
	conf_free(&c);

	/* id has a default for `tessera server`, but agent.conf must name it. */
	c = parse_conf("manager = http://m:8090\ncluster_secret = 0123456789abcdef\nadvertise_url = http://a:8091\n");
	agent_settings_init(&s);
	CHECK_INT(agent_settings_from_conf(&s, &c, "a.conf", &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "(id is missing)");
	conf_free(&c);
}

int main(void)
{
	RUN(defaults);
	RUN(flags_are_named_like_keys);
	RUN(types_and_ranges);
	RUN(context_overhead_parser);
	RUN(conf_and_flags_agree);
	RUN(conf_errors);
	return testlib_done();
}
