#include "runner/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

void runner_log(const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof(buf) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n > sizeof(buf) - 2)
		n = sizeof(buf) - 2;
	buf[n++] = '\n';
	/* One write per line so lines from a child never interleave mid-line. */
	ssize_t w = write(STDERR_FILENO, buf, (size_t)n);
	(void)w;
}
