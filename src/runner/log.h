/* The runner's own messages: one line each on stderr (the session's log). */
#ifndef TESSERA_RUNNER_LOG_H
#define TESSERA_RUNNER_LOG_H

void runner_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
