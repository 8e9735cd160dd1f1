/* `tessera session apps | app | shell`: a session's apps (docs/apps.md).
 *
 * `apps` lists them and `app` opens one: the manager answers with a
 * one-time URL on the proxy, which a browser redeems for a cookie.
 * `shell` does what the browser does for the terminal app, then speaks the
 * terminal protocol over its own WebSocket connection (wsconn.h), like
 * `docker exec -it`. */
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/client.h"
#include "cli/session_apps.h"
#include "cli/table.h"
#include "common/wsconn.h"

#define OWNER_HELP \
	"  --owner EMAIL   NAME is a session of this user (admins): a name is\n" \
	"                  otherwise one of your own sessions; an id is anyone's\n" \
	"  --container C   one container of a cluster session: main1 (the default),\n" \
	"                  sub1, ... (NAME/C says the same)\n"

#define APPS_USAGE \
	"usage: tessera session apps NAME [--owner EMAIL] [--container C] [--json]\n" \
	"\n" \
	"Lists the apps of a session: the terminal, which every session has, then\n" \
	"those its image declares (jupyter, mlflow-ui...). Open one with\n" \
	"'tessera session app NAME APP'.\n" \
	"\n" \
	"  --json          print the list as JSON\n" OWNER_HELP

#define APP_USAGE \
	"usage: tessera session app NAME APP [--owner EMAIL] [--container C] [--json]\n" \
	"       tessera session app NAME --port N [--owner EMAIL] [--container C] [--json]\n" \
	"\n" \
	"Opens an app of a running session (or any port N the session listens on)\n" \
	"and prints a URL to open in a browser. The URL is valid once, for a\n" \
	"short time (60 s): open it soon; the browser then keeps a cookie for\n" \
	"the app.\n" \
	"\n" \
	"  --port N        a port of the session (1-65535) instead of a named app\n" \
	"  --json          print the manager's answer as JSON\n" OWNER_HELP

#define SHELL_USAGE \
	"usage: tessera session shell NAME [--owner EMAIL] [--container C]\n" \
	"\n" \
	"An interactive shell in a running session (its terminal app), like\n" \
	"'docker exec -it'. The shell ends when you leave it, and this command\n" \
	"exits with the shell's exit status. With input from a pipe, the input\n" \
	"is typed into the shell, then Ctrl-D once the shell waits again, and\n" \
	"the output printed until the shell ends.\n" \
	"\n" OWNER_HELP

/* The exit code when the connection to the terminal is lost: as ssh's,
 * apart from any code the remote shell may exit with below 255. */
#define SHELL_EXIT_LOST 255
/* Piped input that has ended is followed by Ctrl-D (0x04) each time the
 * output has paused this long, as a person at the terminal would type it.
 * Not at once: a PTY in canonical mode turns a Ctrl-D that no read is
 * waiting for into a NUL byte when the shell then switches to raw mode for
 * its line editing (busybox ash, bash's readline), so a Ctrl-D sent with
 * the input is lost; one sent while the shell waits at its prompt ends it.
 * A shell that never prompts again (its last command runs on) gets one a
 * second, which a program reading the terminal takes as its end of input.
 * From the second on, each comes after a Ctrl-U (kill line): a Ctrl-D that
 * reached the PTY while a command ran (the output paused a second under
 * load) became that NUL byte at the next prompt, and a Ctrl-D on a line
 * that is not empty does not end the shell; the Ctrl-U empties it. */
#define SHELL_EOF_IDLE_MS 1000
/* How long an app that is starting (503) is waited for. */
#define SHELL_START_WAIT_S 30

static void apps_reset_getopt(void)
{
	optind = 0;  /* glibc: full re-initialization */
	opterr = 0;  /* we print our own one-line messages */
}

static int apps_bad_option(const char *sub, char **argv)
{
	if (optopt && optopt != '?')
		return cli_usage_fail(sub, "option '-%c' is unknown or needs a value", optopt);
	return cli_usage_fail(sub, "option '%s' is unknown or needs a value", argv[optind - 1]);
}

/* ---- apps ------------------------------------------------------------ */

int cmd_session_apps(int argc, char **argv)
{
	static const struct option opts[] = {
		{"owner", required_argument, NULL, 'o'},
		{"container", required_argument, NULL, 'C'},
		{"json", no_argument, NULL, 'j'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	const char *sub = "session apps", *owner = NULL;
	int as_json = 0;
	apps_reset_getopt();
	for (int o; (o = getopt_long(argc, argv, "h", opts, NULL)) != -1;) {
		if (o == 'h') {
			fputs(APPS_USAGE, stdout);
			return CLI_EXIT_OK;
		} else if (o == 'C') {
			cli_session_container = optarg;
		} else if (o == 'o') {
			owner = optarg;
		} else if (o == 'j') {
			as_json = 1;
		} else {
			return apps_bad_option(sub, argv);
		}
	}
	if (optind >= argc)
		return cli_usage_fail(sub, "which session? usage: tessera session apps NAME");
	if (optind + 1 < argc)
		return cli_usage_fail(sub, "unexpected argument '%s'", argv[optind + 1]);
	char *path = cli_session_path(argv[optind], owner, "/apps");
	if (!path)
		return cli_fail("out of memory");
	struct cli_config cfg = {0};
	struct api_client c;
	struct terr err = {0};
	json_t *reply = NULL;
	int rc = CLI_EXIT_OK;
	if (cli_connect(&cfg, &c, &err) < 0 || api_call(&c, "GET", path, NULL, 0, &reply, NULL, &err) < 0) {
		rc = cli_fail("%s", err.msg);
		goto out;
	}
	json_t *apps = json_object_get(reply, "apps");
	if (!json_is_array(apps)) {
		rc = cli_fail("unexpected answer from the manager: no 'apps' array");
		goto out;
	}
	if (as_json) {
		cli_print_json(apps);
		goto out;
	}
	static const char *const hdr[] = {"name", "protocol", "port"};
	struct cli_table *t = cli_table_new(3, hdr);
	if (!t) {
		rc = cli_fail("out of memory");
		goto out;
	}
	size_t i;
	json_t *a;
	json_array_foreach(apps, i, a) {
		char port[24] = "-";
		json_t *p = json_object_get(a, "port");
		if (json_is_integer(p))
			snprintf(port, sizeof(port), "%lld", (long long)json_integer_value(p));
		const char *name = cli_json_str(a, "name", "?");
		/* The terminal is the runner's own PTY, whatever the answer says. */
		const char *proto = !strcmp(name, "terminal") ? "pty" : cli_json_str(a, "protocol", "?");
		const char *row[] = {name, proto, port};
		if (cli_table_add(t, row) < 0) {
			rc = cli_fail("out of memory");
			break;
		}
	}
	if (rc == CLI_EXIT_OK)
		cli_table_print(t, stdout);
	cli_table_free(t);
out:
	json_decref(reply);
	free(path);
	cli_config_free(&cfg);
	return rc;
}

/* ---- app ------------------------------------------------------------- */

int cli_apps_open(const struct api_client *c, const char *ref, const char *owner, const char *app,
		     json_t **reply, struct terr *err)
{
	*reply = NULL;
	char *esc = api_escape(app), *suffix = NULL, *path = NULL;
	if (!esc || asprintf(&suffix, "/apps/%s", esc) < 0)
		suffix = NULL;
	free(esc);
	if (suffix)
		path = cli_session_path(ref, owner, suffix);
	free(suffix);
	if (!path)
		return terr_set(err, ENOMEM, "out of memory");
	json_t *body = json_object();
	int r = body ? api_call(c, "POST", path, body, 0, reply, NULL, err) : terr_set(err, ENOMEM, "out of memory");
	json_decref(body);
	free(path);
	if (r < 0)
		return r;
	if (!json_is_string(json_object_get(*reply, "url"))) {
		json_decref(*reply);
		*reply = NULL;
		return terr_set(err, EPROTO, "unexpected answer from the manager: no 'url'");
	}
	return 0;
}

/* --port's value: 1..65535, digits only. */
static int apps_parse_port(const char *s, long *port)
{
	char *end;
	if (*s < '0' || *s > '9')
		return -1;
	*port = strtol(s, &end, 10);
	return *end || *port < 1 || *port > 65535 ? -1 : 0;
}

int cmd_session_app(int argc, char **argv)
{
	static const struct option opts[] = {
		{"port", required_argument, NULL, 'p'},
		{"owner", required_argument, NULL, 'o'},
		{"container", required_argument, NULL, 'C'},
		{"json", no_argument, NULL, 'j'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	const char *sub = "session app", *owner = NULL;
	int as_json = 0;
	long port = 0;
	apps_reset_getopt();
	for (int o; (o = getopt_long(argc, argv, "h", opts, NULL)) != -1;) {
		if (o == 'h') {
			fputs(APP_USAGE, stdout);
			return CLI_EXIT_OK;
		} else if (o == 'C') {
			cli_session_container = optarg;
		} else if (o == 'o') {
			owner = optarg;
		} else if (o == 'j') {
			as_json = 1;
		} else if (o == 'p') {
			if (apps_parse_port(optarg, &port) < 0)
				return cli_usage_fail(sub, "--port must be a port number from 1 to 65535, not '%s'", optarg);
		} else {
			return apps_bad_option(sub, argv);
		}
	}
	if (optind >= argc)
		return cli_usage_fail(sub, "which session? usage: tessera session app NAME APP");
	const char *ref = argv[optind];
	char app[16];
	const char *which;
	if (port) {
		if (optind + 1 < argc)
			return cli_usage_fail(sub, "give an app's name or --port, not both");
		snprintf(app, sizeof(app), "%ld", port);
		which = app;
	} else {
		if (optind + 1 >= argc)
			return cli_usage_fail(sub, "which app? usage: tessera session app NAME APP (see 'tessera session apps NAME')");
		if (optind + 2 < argc)
			return cli_usage_fail(sub, "unexpected argument '%s'", argv[optind + 2]);
		which = argv[optind + 1];
		if (!*which)
			return cli_usage_fail(sub, "the app's name is empty");
	}
	struct cli_config cfg = {0};
	struct api_client c;
	struct terr err = {0};
	json_t *reply = NULL;
	int rc = CLI_EXIT_OK;
	if (cli_connect(&cfg, &c, &err) < 0 || cli_apps_open(&c, ref, owner, which, &reply, &err) < 0) {
		rc = cli_fail("%s", err.msg);
	} else if (as_json) {
		cli_print_json(reply);
	} else {
		printf("%s\n", cli_json_str(reply, "url", ""));
		fflush(stdout);
		json_t *ttl = json_object_get(reply, "expires_in");
		if (isatty(STDERR_FILENO))
			fprintf(stderr, "open it in a browser: it is valid once, for %lld s\n",
				json_is_integer(ttl) ? (long long)json_integer_value(ttl) : 60LL);
	}
	json_decref(reply);
	cli_config_free(&cfg);
	return rc;
}

/* ---- shell ----------------------------------------------------------- */

/* The terminal's settings before raw mode, restored on every way out:
 * the normal ones, and from the handlers of the signals that end or stop
 * the process (tcsetattr is async-signal-safe). */
static struct termios shell_saved;
static volatile sig_atomic_t shell_raw_on;
static int shell_sig_fd = -1;  /* write end of the self-pipe */

static void shell_restore_tty(void)
{
	if (shell_raw_on) {
		tcsetattr(STDIN_FILENO, TCSADRAIN, &shell_saved);
		shell_raw_on = 0;
	}
}

static int shell_raw_tty(void)
{
	struct termios raw = shell_saved;
	cfmakeraw(&raw);
	if (tcsetattr(STDIN_FILENO, TCSADRAIN, &raw) < 0)
		return -1;
	shell_raw_on = 1;
	return 0;
}

static void shell_on_fatal(int sig)
{
	shell_restore_tty();
	/* Then die of the signal as if it had not been caught, so that the
	 * parent sees what happened. */
	signal(sig, SIG_DFL);
	raise(sig);
}

static void shell_on_tstp(int sig)
{
	(void)sig;
	int saved = errno;
	shell_restore_tty();
	raise(SIGSTOP);
	errno = saved;
}

/* SIGWINCH and SIGCONT: the loop resends the size (and after a stop puts
 * the terminal back in raw mode). */
static void shell_on_wake(int sig)
{
	int saved = errno;
	char ch = sig == SIGCONT ? 'C' : 'W';
	if (shell_sig_fd >= 0 && write(shell_sig_fd, &ch, 1) < 0) {
		/* The pipe is full: a wake-up is already pending. */
	}
	errno = saved;
}

static void shell_signals(void)
{
	struct sigaction sa = {0};
	sigemptyset(&sa.sa_mask);
	sa.sa_handler = shell_on_fatal;
	int fatal[] = {SIGHUP, SIGINT, SIGQUIT, SIGTERM};
	for (size_t i = 0; i < sizeof(fatal) / sizeof(fatal[0]); i++)
		sigaction(fatal[i], &sa, NULL);
	sa.sa_handler = shell_on_tstp;
	sigaction(SIGTSTP, &sa, NULL);
	sa.sa_handler = shell_on_wake;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGWINCH, &sa, NULL);
	sigaction(SIGCONT, &sa, NULL);
	sa.sa_handler = SIG_IGN;
	sa.sa_flags = 0;
	sigaction(SIGPIPE, &sa, NULL);  /* a closed socket is an error, not death */
}

/* The size of the terminal we are in (stdin's, else stdout's); 80x24
 * when there is none. Returns whether there is one. */
static bool shell_winsize(unsigned *cols, unsigned *rows)
{
	struct winsize ws;
	*cols = 80;
	*rows = 24;
	if ((ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) == 0 || ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0) &&
	    ws.ws_col && ws.ws_row) {
		*cols = ws.ws_col;
		*rows = ws.ws_row;
		return true;
	}
	return false;
}

static int shell_send_resize(struct wsconn *ws, struct terr *err)
{
	unsigned cols, rows;
	if (!shell_winsize(&cols, &rows))
		return 0;
	uint8_t msg[5] = {0x01, (uint8_t)(cols >> 8), (uint8_t)cols, (uint8_t)(rows >> 8), (uint8_t)rows};
	return wsconn_send(ws, WS_OP_BINARY, msg, sizeof(msg), err);
}

/* Writes all of data to stdout, waiting while it is full. */
static int shell_write_out(const uint8_t *data, size_t n)
{
	while (n) {
		ssize_t w = write(STDOUT_FILENO, data, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				struct pollfd p = {.fd = STDOUT_FILENO, .events = POLLOUT};
				poll(&p, 1, -1);
				continue;
			}
			return -errno;
		}
		data += w;
		n -= (size_t)w;
	}
	return 0;
}

/* "exit N" (N 0..255) from the close frame's reason: N, else -1. */
static int shell_exit_reason(const char *reason)
{
	if (strncmp(reason, "exit ", 5) != 0 || reason[5] < '0' || reason[5] > '9')
		return -1;
	char *end;
	long v = strtol(reason + 5, &end, 10);
	if (*end || v > 255)
		return -1;
	return (int)v;
}

/* How the session ended, for the caller to report. */
struct shell_end {
	int code;          /* the exit code */
	char msg[TERR_MSG_MAX + 64];  /* a one-line error, or "" */
};

static long shell_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Relays between stdin/stdout and the terminal until the server closes
 * the connection or it is lost. */
static void shell_relay(struct wsconn *ws, int sig_rd, bool tty, struct shell_end *end)
{
	struct terr err = {0};
	bool in_open = true;
	uint8_t in[1 + 16384];
	long quiet_since = shell_now_ms();
	int eofs_sent = 0;
	end->code = SHELL_EXIT_LOST;
	end->msg[0] = '\0';
	/* Frames that came with the handshake's answer first. */
	bool pending = ws->rd.len > ws->rd.off;
	for (;;) {
		if (!pending) {
			struct pollfd p[3] = {
				{.fd = sig_rd, .events = POLLIN},
				{.fd = ws->fd, .events = POLLIN},
				{.fd = in_open ? STDIN_FILENO : -1, .events = POLLIN},
			};
			/* Piped input has ended: once the output pauses, Ctrl-D
			 * (see SHELL_EOF_IDLE_MS). */
			bool eof_wait = !in_open && !tty;
			long wait_ms = -1;
			if (eof_wait) {
				wait_ms = quiet_since + SHELL_EOF_IDLE_MS - shell_now_ms();
				if (wait_ms < 0)
					wait_ms = 0;
			}
			int np = poll(p, 3, (int)wait_ms);
			if (np < 0) {
				if (errno == EINTR)
					continue;
				snprintf(end->msg, sizeof(end->msg), "poll: %s", strerror(errno));
				return;
			}
			if (np == 0 && eof_wait) {
				size_t n = 0;
				in[n++] = 0x00;  /* input */
				if (eofs_sent++)
					in[n++] = 0x15;  /* Ctrl-U */
				in[n++] = 0x04;  /* Ctrl-D */
				if (wsconn_send(ws, WS_OP_BINARY, in, n, &err) < 0)
					goto lost;
				quiet_since = shell_now_ms();
				continue;
			}
			if (p[0].revents) {
				char sigs[16];
				ssize_t k = read(sig_rd, sigs, sizeof(sigs));
				for (ssize_t i = 0; i < k; i++)
					if (sigs[i] == 'C' && tty && !shell_raw_on)
						shell_raw_tty();
				if (k > 0 && shell_send_resize(ws, &err) < 0)
					goto lost;
			}
			if (p[2].revents) {
				ssize_t k = read(STDIN_FILENO, in + 1, sizeof(in) - 1);
				if (k < 0 && (errno == EINTR || errno == EAGAIN))
					continue;
				if (k > 0) {
					in[0] = 0x00;  /* input */
					if (wsconn_send(ws, WS_OP_BINARY, in, (size_t)k + 1, &err) < 0)
						goto lost;
				} else {
					/* The end of the input; the output is read on
					 * until the shell ends. */
					in_open = false;
					quiet_since = shell_now_ms();
				}
			}
			if (!p[1].revents)
				continue;
			int r = wsconn_recv(ws, &err);
			if (r == -EAGAIN)
				continue;
			if (r <= 0) {
				if (r == 0)
					snprintf(err.msg, sizeof(err.msg), "the server closed the connection");
				goto lost;
			}
			quiet_since = shell_now_ms();
		}
		pending = false;
		struct wsconn_msg m;
		int r;
		while ((r = wsconn_reader_next(&ws->rd, &m, &err)) > 0) {
			switch (m.opcode) {
			case WS_OP_TEXT:
			case WS_OP_BINARY:
				if (shell_write_out(m.data, m.len) < 0) {
					end->code = CLI_EXIT_FAIL;
					snprintf(end->msg, sizeof(end->msg), "cannot write the terminal's output: %s",
						 strerror(errno));
					return;
				}
				break;
			case WS_OP_PING:
				if (wsconn_send(ws, WS_OP_PONG, m.data, m.len, &err) < 0)
					goto lost;
				break;
			case WS_OP_CLOSE: {
				int code;
				char reason[WS_CONTROL_MAX];
				wsconn_close_info(m.data, m.len, &code, reason, sizeof(reason));
				/* Answer the close as RFC 6455 5.5.1 asks; the server
				 * may be gone already. */
				uint8_t echo[2] = {(uint8_t)(code >> 8), (uint8_t)code};
				wsconn_send(ws, WS_OP_CLOSE, echo, code == 1005 ? 0 : 2, &err);
				int n = shell_exit_reason(reason);
				if (n >= 0) {
					end->code = n;
				} else {
					end->code = SHELL_EXIT_LOST;
					snprintf(end->msg, sizeof(end->msg), "the terminal was closed (code %d%s%s)", code,
						 reason[0] ? ": " : "", reason);
				}
				return;
			}
			default:
				break;
			}
		}
		if (r < 0)
			goto lost;
	}
lost:
	snprintf(end->msg, sizeof(end->msg), "the connection to the terminal was lost: %s", err.msg);
	end->code = SHELL_EXIT_LOST;
}

int cli_app_setup(const struct wsconn_url *u, char **cookie, struct terr *err)
{
	int status;
	char *head = NULL, *body = NULL;
	int r = wsconn_http_get(u, 30000, &status, &head, &body, err);
	if (r < 0)
		return terr_prefix(err, "cannot reach the app proxy at %s", u->authority);
	char text[300];
	wsconn_page_text(body, strlen(body), text, sizeof(text));
	if (status == 403)
		r = terr_set(err, EACCES, "the app proxy refused the app's URL: %s", text[0] ? text : "403 Forbidden");
	else if (status < 200 || status >= 400)
		r = terr_set(err, EPROTO, "the app proxy answered %d%s%s", status, text[0] ? ": " : "", text);
	else if (wsconn_setup_cookie(head, strlen(head), cookie, err) < 0)
		r = terr_set(err, EPROTO, "the app proxy answered %d without the app's cookie", status);
	free(head);
	free(body);
	return r;
}

/* Connects the terminal's WebSocket, waiting while the proxy says the app
 * is starting (503). */
static int shell_connect(struct wsconn *ws, const struct wsconn_url *setup, const char *cookie, struct terr *err)
{
	struct wsconn_url u = *setup;
	unsigned cols, rows;
	shell_winsize(&cols, &rows);
	snprintf(u.path, sizeof(u.path), "/ws?term=new&cols=%u&rows=%u", cols, rows);
	time_t deadline = time(NULL) + SHELL_START_WAIT_S;
	bool said = false;
	for (;;) {
		int status = 0;
		int r = wsconn_open(ws, &u, cookie, 30000, &status, err);
		if (r == 0)
			return 0;
		if (status != 503 || time(NULL) >= deadline) {
			if (status == 403)
				return terr_prefix(err, "the app proxy refused the terminal");
			if (status)
				return terr_prefix(err, "the app proxy answered");
			return terr_prefix(err, "cannot open the terminal at %s", u.authority);
		}
		if (!said && isatty(STDERR_FILENO)) {
			fprintf(stderr, "waiting for the terminal (%s)\n", err->msg);
			said = true;
		}
		sleep(1);
	}
}

int cmd_session_shell(int argc, char **argv)
{
	static const struct option opts[] = {
		{"owner", required_argument, NULL, 'o'},
		{"container", required_argument, NULL, 'C'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	const char *sub = "session shell", *owner = NULL;
	apps_reset_getopt();
	for (int o; (o = getopt_long(argc, argv, "h", opts, NULL)) != -1;) {
		if (o == 'h') {
			fputs(SHELL_USAGE, stdout);
			return CLI_EXIT_OK;
		} else if (o == 'C') {
			cli_session_container = optarg;
		} else if (o == 'o') {
			owner = optarg;
		} else {
			return apps_bad_option(sub, argv);
		}
	}
	if (optind >= argc)
		return cli_usage_fail(sub, "which session? usage: tessera session shell NAME");
	if (optind + 1 < argc)
		return cli_usage_fail(sub, "unexpected argument '%s'", argv[optind + 1]);

	struct cli_config cfg = {0};
	struct api_client c;
	struct terr err = {0};
	json_t *reply = NULL;
	struct wsconn_url u;
	char *cookie = NULL;
	struct wsconn ws = {.fd = -1};
	int pipefd[2] = {-1, -1};
	int rc;
	if (cli_connect(&cfg, &c, &err) < 0 || cli_apps_open(&c, argv[optind], owner, "terminal", &reply, &err) < 0 ||
	    wsconn_parse_url(cli_json_str(reply, "url", ""), &u, &err) < 0 || cli_app_setup(&u, &cookie, &err) < 0 ||
	    shell_connect(&ws, &u, cookie, &err) < 0) {
		rc = cli_fail("%s", err.msg);
		goto out;
	}
	if (pipe2(pipefd, O_CLOEXEC | O_NONBLOCK) < 0) {
		rc = cli_fail("pipe: %s", strerror(errno));
		goto out;
	}
	shell_sig_fd = pipefd[1];
	bool tty = isatty(STDIN_FILENO);
	if (tty && tcgetattr(STDIN_FILENO, &shell_saved) < 0)
		tty = false;
	/* Handlers first: from the moment the terminal is raw, any way out
	 * restores it. */
	shell_signals();
	if (tty && shell_raw_tty() < 0) {
		rc = cli_fail("cannot put the terminal in raw mode: %s", strerror(errno));
		goto out;
	}
	struct shell_end end;
	shell_relay(&ws, pipefd[0], tty, &end);
	shell_restore_tty();
	if (end.msg[0]) {
		/* After raw output the cursor may be anywhere on its line. */
		if (tty)
			fputs("\r\n", stderr);
		fprintf(stderr, "tessera: %s\n", end.msg);
	}
	rc = end.code;
out:
	shell_restore_tty();
	shell_sig_fd = -1;
	if (pipefd[0] >= 0)
		close(pipefd[0]);
	if (pipefd[1] >= 0)
		close(pipefd[1]);
	if (ws.fd >= 0)
		wsconn_close(&ws);
	free(cookie);
	json_decref(reply);
	cli_config_free(&cfg);
	return rc;
}
