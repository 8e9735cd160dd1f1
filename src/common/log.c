#include "common/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>

#include "common/util.h"

static enum log_level min_level = LOG_INFO;
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;

void log_set_level(enum log_level level)
{
	min_level = level;
}

void log_msg(enum log_level level, const char *component, const char *fmt, ...)
{
	static const char *const names[] = {"DEBUG", "INFO ", "WARN ", "ERROR"};
	if (level < min_level)
		return;
	char ts[40];
	util_format_time_ms(util_now_ms(), ts, sizeof(ts));
	va_list ap;
	va_start(ap, fmt);
	/* One lock so lines from different threads never interleave. */
	pthread_mutex_lock(&log_mu);
	fprintf(stderr, "%s %s %s: ", ts, names[level], component);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	fflush(stderr);
	pthread_mutex_unlock(&log_mu);
	va_end(ap);
}
