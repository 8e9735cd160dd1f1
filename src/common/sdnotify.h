/* The daemons' side of systemd's service notification (Type=notify units,
 * configs/systemd/): readiness, status lines, stopping, and the watchdog.
 * Each call sends one datagram to $NOTIFY_SOCKET through libsystemd's
 * sd_notify; without that variable (a daemon started by hand, by a test,
 * or under another supervisor) every call does nothing. Failures to send
 * are not errors of the daemon: systemd then times the start out or
 * restarts the unit by itself, so these return nothing. */
#ifndef TESSERA_COMMON_SDNOTIFY_H
#define TESSERA_COMMON_SDNOTIFY_H

/* READY=1 with a STATUS= line: call once the daemon's sockets listen and
 * it answers requests. status is copied (may be NULL). */
void sdnotify_ready(const char *status);
/* A STATUS= line (printf format), shown by `systemctl status`. */
void sdnotify_status(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* STOPPING=1 with a STATUS= line, when a stop signal arrived. */
void sdnotify_stopping(const char *status);
/* WATCHDOG=1 when the unit has WatchdogSec= (WATCHDOG_USEC set for this
 * process), else nothing; call from the main loop at least every
 * sdnotify_watchdog_ms() / 2. */
void sdnotify_watchdog(void);
/* The unit's watchdog period in ms, or 0 when there is none. */
long sdnotify_watchdog_ms(void);
/* How long a daemon's main loop may sleep between wake-ups: default_ms, or
 * less when the watchdog needs pinging more often. */
int sdnotify_loop_ms(int default_ms);

#endif
