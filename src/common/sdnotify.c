/* systemd notification through libsystemd (common/sdnotify.h). sd_notify
 * itself is a no-op when NOTIFY_SOCKET is unset, so nothing here checks
 * for it; unset_environment is 0 so that a daemon restarted in place by
 * `exec` would still notify. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <systemd/sd-daemon.h>

#include "common/sdnotify.h"

static void send_with_status(const char *first, const char *status)
{
	if (status)
		sd_notifyf(0, "%s%sSTATUS=%s", first ? first : "", first ? "\n" : "", status);
	else if (first)
		sd_notify(0, first);
}

void sdnotify_ready(const char *status)
{
	send_with_status("READY=1", status);
}

void sdnotify_status(const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	send_with_status(NULL, buf);
}

void sdnotify_stopping(const char *status)
{
	send_with_status("STOPPING=1", status);
}

long sdnotify_watchdog_ms(void)
{
	uint64_t usec = 0;
	/* > 0 only when WATCHDOG_USEC is set and WATCHDOG_PID, if set, is us. */
	if (sd_watchdog_enabled(0, &usec) <= 0 || usec == 0)
		return 0;
	return (long)(usec / 1000);
}

void sdnotify_watchdog(void)
{
	if (sdnotify_watchdog_ms() > 0)
		sd_notify(0, "WATCHDOG=1");
}

int sdnotify_loop_ms(int default_ms)
{
	long w = sdnotify_watchdog_ms();
	/* Pinging at half the period leaves room for a late wake-up. */
	if (w > 0 && w / 2 < default_ms)
		return w / 2 > 1 ? (int)(w / 2) : 1;
	return default_ms;
}
