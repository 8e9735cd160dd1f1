/* `tessera session ssh | ssh-config | ssh-proxy`: SSH, SFTP, scp, rsync
 * and VS Code's Remote-SSH into a session (docs/user-guide.md, "Working
 * from your own machine").
 *
 * The session's sshd is its `sshd` app, reached like every app through
 * the app proxy: `ssh-proxy` opens the app with the user's API key (the
 * manager checks that the session is theirs), redeems the one-time URL
 * for the app's cookie, then asks the proxy for a CONNECT tunnel and
 * relays its stdin and stdout through it: it is the ProxyCommand of the
 * Host block `ssh-config` prints, which also pins the session's host key.
 * `ssh` runs the system's ssh with the same options. No port of the
 * session is open to anyone but the proxy. */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/client.h"
#include "cli/session_apps.h"
#include "common/util.h"

/* How long a starting sshd (the proxy's 503) is waited for. */
#define SSH_START_WAIT_S 60

#define SSH_OPTS_HELP \
	"  --owner EMAIL   NAME is a session of this user (admins)\n" \
	"  --container C   one container of a cluster session: main1 (the default),\n" \
	"                  sub1, ... (NAME/C says the same)\n"

#define SSH_USAGE \
	"usage: tessera session ssh NAME [--owner EMAIL] [--container C] [-i KEY] [-- CMD...]\n" \
	"\n" \
	"Logs in to a running session with OpenSSH's ssh, through the app proxy,\n" \
	"as the session's user, with your SSH keys ('tessera user keys add FILE').\n" \
	"With CMD, runs it there instead of a login shell. The image must offer\n" \
	"the sshd app ('tessera session apps NAME').\n" \
	"\n" \
	"  -i KEY          the private key to log in with (ssh's -i)\n" SSH_OPTS_HELP

#define SSH_CONFIG_USAGE \
	"usage: tessera session ssh-config NAME [--owner EMAIL] [--container C]\n" \
	"\n" \
	"Prints an OpenSSH Host block for the session: add it to ~/.ssh/config and\n" \
	"plain ssh, scp, sftp, rsync -e ssh and VS Code's Remote-SSH reach the\n" \
	"session as 'tessera-NAME'. It carries the connection through the app\n" \
	"proxy ('tessera session ssh-proxy') and pins the session's host key.\n" \
	"\n" SSH_OPTS_HELP

#define SSH_PROXY_USAGE \
	"usage: tessera session ssh-proxy NAME [--owner EMAIL] [--container C]\n" \
	"\n" \
	"Relays stdin and stdout to the session's sshd through the app proxy: the\n" \
	"ProxyCommand of the block 'tessera session ssh-config' prints.\n" \
	"\n" SSH_OPTS_HELP

struct ssh_opts {
	const char *ref, *owner, *identity;
	char **cmd;   /* after --; NULL: none */
	int n_cmd;
};

/* Options may come before or after NAME (as the usage shows them); CMD
 * is everything after --, its own options included. */
static int ssh_parse(const char *sub, const char *usage, bool with_cmd, int argc, char **argv,
		     struct ssh_opts *o, bool *done)
{
	memset(o, 0, sizeof(*o));
	*done = true;
	int i = 1;
	for (; i < argc; i++) {
		const char *a = argv[i];
		const char **slot = NULL, *value = NULL;
		if (!strcmp(a, "--")) {
			i++;
			break;
		}
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			fputs(usage, stdout);
			return CLI_EXIT_OK;
		}
		if (!strcmp(a, "--owner") || !strncmp(a, "--owner=", 8))
			slot = &o->owner;
		else if (!strcmp(a, "--container") || !strncmp(a, "--container=", 12))
			slot = &cli_session_container;
		else if (with_cmd && (!strcmp(a, "-i") || !strcmp(a, "--identity")))
			slot = &o->identity;
		if (slot) {
			const char *eq = strchr(a, '=');
			value = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
			if (!value || !*value)
				return cli_usage_fail(sub, "option '%s' needs a value", a);
			*slot = value;
			continue;
		}
		if (a[0] == '-' && a[1])
			return cli_usage_fail(sub, "option '%s' is unknown%s", a,
					      with_cmd ? " (a command's own options go after --)" : "");
		if (o->ref)
			return cli_usage_fail(sub, "unexpected argument '%s'%s", a,
					      with_cmd ? ": put the command after --" : "");
		o->ref = a;
	}
	if (!o->ref)
		return cli_usage_fail(sub, "which session? %.*s", (int)strcspn(usage, "\n"), usage);
	if (i < argc && !with_cmd)
		return cli_usage_fail(sub, "unexpected argument '%s'", argv[i]);
	o->cmd = i < argc ? argv + i : NULL;
	o->n_cmd = argc - i;
	*done = false;
	return CLI_EXIT_OK;
}

/* Which values may go into the printed configuration and ssh's
 * arguments unquoted: a name, an email, a path without blanks. */
static bool ssh_safe(const char *s)
{
	for (; s && *s; s++)
		if ((unsigned char)*s <= ' ' || strchr("'\"\\$`;&|<>()*?[]{}#~!%", *s))
			return false;
	return true;
}

/* GET path with the CLI's configuration, printing nothing: 0 and *reply,
 * or -1. */
static int cli_call_quiet(const char *method, const char *path, json_t **reply)
{
	struct cli_config cfg = {0};
	struct api_client c;
	struct terr err = {0};
	*reply = NULL;
	int rc = cli_connect(&cfg, &c, &err) == 0 ? api_call(&c, method, path, NULL, 0, reply, NULL, &err) : -1;
	cli_config_free(&cfg);
	return rc < 0 ? -1 : 0;
}

/* ---- what ssh needs: the sshd app's user and host key --------------- */

struct ssh_target {
	char user[16];
	char host_key[256];
	char alias[48];       /* the HostKeyAlias the key is pinned under */
	char host[128];       /* the Host of the printed block: tessera-NAME[-C] */
	char proxy_cmd[2 * PATH_MAX + 1024];
};

static int ssh_target(const struct ssh_opts *o, struct ssh_target *t, struct terr *err)
{
	struct cli_config cfg = {0};
	struct api_client c;
	json_t *reply = NULL;
	char *path = cli_session_path(o->ref, o->owner, "/apps");
	int rc = !path ? terr_set(err, ENOMEM, "out of memory") : 0;
	if (rc == 0 && (rc = cli_connect(&cfg, &c, err)) == 0)
		rc = api_call(&c, "GET", path, NULL, 0, &reply, NULL, err);
	free(path);
	cli_config_free(&cfg);
	if (rc < 0)
		return rc;
	json_t *apps = json_object_get(reply, "apps"), *ssh = NULL, *a;
	size_t i;
	json_array_foreach(apps, i, a) {
		if (!strcmp(cli_json_str(a, "name", ""), "sshd"))
			ssh = json_object_get(a, "ssh");
	}
	if (!ssh) {
		json_decref(reply);
		return terr_set(err, ENOENT, "session %s has no sshd app: its image offers none (tessera session apps %s "
				"lists what it has; Tessera's images declare sshd)", o->ref, o->ref);
	}
	if (!json_is_object(ssh)) {
		json_decref(reply);
		return terr_set(err, ENOENT, "session %s was made before sessions had SSH keys: start a new one", o->ref);
	}
	snprintf(t->user, sizeof(t->user), "%s", cli_json_str(ssh, "user", "work"));
	snprintf(t->host_key, sizeof(t->host_key), "%s", cli_json_str(ssh, "host_key", ""));
	snprintf(t->alias, sizeof(t->alias), "%s", cli_json_str(ssh, "host_alias", ""));
	json_decref(reply);
	if (strncmp(t->host_key, "ssh-ed25519 ", 12) || !t->alias[0] || !ssh_safe(t->alias) || !ssh_safe(t->user))
		return terr_set(err, EPROTO, "unexpected answer from the manager: no usable ssh host key");
	/* The Host name: the session's name as given, '/' as '-'. */
	snprintf(t->host, sizeof(t->host), "tessera-%s%s%s", o->ref, cli_session_container ? "-" : "",
		 cli_session_container ? cli_session_container : "");
	for (char *p = t->host; *p; p++)
		if (*p == '/')
			*p = '-';
	if (!ssh_safe(o->ref) || (o->owner && !ssh_safe(o->owner)) ||
	    (cli_session_container && !ssh_safe(cli_session_container)))
		return terr_set(err, EINVAL, "the session's name holds characters a ProxyCommand cannot carry");
	/* This very binary, by its absolute path, with the configuration
	 * this command used: ssh runs the ProxyCommand from anywhere, and
	 * VS Code without this shell's environment. */
	char self[PATH_MAX], conf[PATH_MAX] = "";
	if (util_self_command("tessera", self, sizeof(self), err) < 0 || !ssh_safe(self))
		return terr_set(err, EINVAL, "cannot name this tessera binary for the ProxyCommand");
	const char *env_conf = getenv("TESSERA_CONFIG");
	if (env_conf && *env_conf && (!realpath(env_conf, conf) || !ssh_safe(conf)))
		return terr_set(err, EINVAL, "TESSERA_CONFIG (%s) cannot be named in a ProxyCommand", env_conf);
	int w = snprintf(t->proxy_cmd, sizeof(t->proxy_cmd), "%s%s%s%s session ssh-proxy%s%s%s%s %s",
			 conf[0] ? "env TESSERA_CONFIG=" : "", conf, conf[0] ? " " : "", self,
			 o->owner ? " --owner " : "", o->owner ? o->owner : "", cli_session_container ? " --container " : "",
			 cli_session_container ? cli_session_container : "", o->ref);
	if (w < 0 || (size_t)w >= sizeof(t->proxy_cmd))
		return terr_set(err, ENAMETOOLONG, "the ProxyCommand would be too long");
	return 0;
}

int cmd_session_ssh_config(int argc, char **argv)
{
	struct ssh_opts o;
	bool done;
	int rc = ssh_parse("session ssh-config", SSH_CONFIG_USAGE, false, argc, argv, &o, &done);
	if (done)
		return rc;
	struct ssh_target t;
	struct terr err = {0};
	if (ssh_target(&o, &t, &err) < 0)
		return cli_fail("%s", err.msg);
	/* KnownHostsCommand pins the key in the block itself: ssh takes
	 * its output as known_hosts lines, and no file of the user's is
	 * read or written for this host. */
	printf("# Tessera session %s: ssh %s (scp, sftp, rsync -e ssh and VS Code's Remote-SSH too)\n"
	       "Host %s\n"
	       "    HostName %s\n"
	       "    User %s\n"
	       "    Port 2200\n"
	       "    ProxyCommand %s\n"
	       "    HostKeyAlias %s\n"
	       "    KnownHostsCommand /bin/echo %s %s\n"
	       "    UserKnownHostsFile /dev/null\n"
	       "    GlobalKnownHostsFile /dev/null\n"
	       "    StrictHostKeyChecking yes\n"
	       "    CheckHostIP no\n",
	       o.ref, t.host, t.host, t.alias, t.user, t.proxy_cmd, t.alias, t.alias, t.host_key);
	return CLI_EXIT_OK;
}

int cmd_session_ssh(int argc, char **argv)
{
	struct ssh_opts o;
	bool done;
	int rc = ssh_parse("session ssh", SSH_USAGE, true, argc, argv, &o, &done);
	if (done)
		return rc;
	struct ssh_target t;
	struct terr err = {0};
	if (ssh_target(&o, &t, &err) < 0)
		return cli_fail("%s", err.msg);
	/* The first thing a new user hits: no key, and ssh's bare
	 * "Permission denied (publickey)". Say what to do first. */
	json_t *mine = NULL;
	if (cli_call_quiet("GET", "/v1/ssh-keys", &mine) == 0 && json_is_array(json_object_get(mine, "keys")) &&
	    !json_array_size(json_object_get(mine, "keys")))
		fprintf(stderr, "tessera: you have no SSH keys: add yours with 'tessera user keys add "
			"~/.ssh/id_ed25519.pub', then start a new session (a session accepts the keys you had when "
			"it started)\n");
	json_decref(mine);
	char *proxy = NULL, known[400], alias[80];
	if (asprintf(&proxy, "ProxyCommand=%s", t.proxy_cmd) < 0)
		return cli_fail("out of memory");
	snprintf(known, sizeof(known), "KnownHostsCommand=/bin/echo %s %s", t.alias, t.host_key);
	snprintf(alias, sizeof(alias), "HostKeyAlias=%s", t.alias);
	const char *head[] = {
		"ssh", "-o", proxy, "-o", alias, "-o", known, "-o", "UserKnownHostsFile=/dev/null",
		"-o", "GlobalKnownHostsFile=/dev/null", "-o", "StrictHostKeyChecking=yes", "-o", "CheckHostIP=no",
		"-p", "2200", "-l", t.user,
	};
	size_t nh = sizeof(head) / sizeof(head[0]);
	char **av = calloc(nh + 5 + (size_t)o.n_cmd, sizeof(char *));
	if (!av) {
		free(proxy);
		return cli_fail("out of memory");
	}
	size_t n = 0;
	for (size_t i = 0; i < nh; i++)
		av[n++] = (char *)head[i];
	if (o.identity) {
		av[n++] = (char *)"-i";
		av[n++] = (char *)o.identity;
	}
	av[n++] = t.alias;
	if (o.n_cmd) {
		av[n++] = (char *)"--";
		for (int i = 0; i < o.n_cmd; i++)
			av[n++] = o.cmd[i];
	}
	av[n] = NULL;
	fflush(stdout);
	execvp("ssh", av);
	int e = errno;
	free(av);
	free(proxy);
	if (e == ENOENT)
		return cli_fail("ssh is not installed here (Debian's openssh-client)");
	return cli_fail("cannot run ssh: %s", strerror(e));
}

/* ---- ssh-proxy: stdin/stdout <-> the proxy's CONNECT tunnel ---------- */

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Bytes both ways until sshd's side ends; stdin's end is passed on as
 * a half-close. */
static int ssh_relay(int s, const char *extra, size_t n_extra)
{
	if (n_extra && write_all(STDOUT_FILENO, extra, n_extra) < 0)
		return CLI_EXIT_FAIL;
	static char buf[65536];
	bool in_open = true;
	for (;;) {
		struct pollfd p[2] = {{.fd = s, .events = POLLIN}, {.fd = in_open ? STDIN_FILENO : -1, .events = POLLIN}};
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return CLI_EXIT_FAIL;
		}
		if (p[0].revents) {
			ssize_t r = read(s, buf, sizeof(buf));
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0)
				return r == 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
			if (write_all(STDOUT_FILENO, buf, (size_t)r) < 0)
				return CLI_EXIT_FAIL;
		}
		if (in_open && p[1].revents) {
			ssize_t r = read(STDIN_FILENO, buf, sizeof(buf));
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0) {
				in_open = false;
				shutdown(s, SHUT_WR);
			} else if (write_all(s, buf, (size_t)r) < 0) {
				return CLI_EXIT_FAIL;
			}
		}
	}
}

int cmd_session_ssh_proxy(int argc, char **argv)
{
	struct ssh_opts o;
	bool done;
	int rc = ssh_parse("session ssh-proxy", SSH_PROXY_USAGE, false, argc, argv, &o, &done);
	if (done)
		return rc;
	signal(SIGPIPE, SIG_IGN);
	struct cli_config cfg = {0};
	struct api_client c;
	struct terr err = {0};
	json_t *reply = NULL;
	struct wsconn_url u;
	char *cookie = NULL;
	char *extra = NULL;
	size_t n_extra = 0;
	int s = -1, status = 0;
	if (cli_connect(&cfg, &c, &err) < 0 || cli_apps_open(&c, o.ref, o.owner, "sshd", &reply, &err) < 0 ||
	    wsconn_parse_url(cli_json_str(reply, "url", ""), &u, &err) < 0 || cli_app_setup(&u, &cookie, &err) < 0) {
		rc = cli_fail("%s", err.msg);
		goto out;
	}
	/* sshd starts on the first connection (the proxy says 503 while it
	 * does): ask again each second. */
	time_t deadline = time(NULL) + SSH_START_WAIT_S;
	while (wsconn_http_connect(&u, "sshd", cookie, 30000, &s, &extra, &n_extra, &status, &err) < 0) {
		if (status != 503 || time(NULL) >= deadline) {
			rc = status ? cli_fail("the app proxy answered %s", err.msg)
				    : cli_fail("cannot reach the app proxy at %s: %s", u.authority, err.msg);
			goto out;
		}
		sleep(1);
	}
	rc = ssh_relay(s, extra, n_extra);
	close(s);
out:
	free(extra);
	free(cookie);
	json_decref(reply);
	cli_config_free(&cfg);
	return rc;
}
