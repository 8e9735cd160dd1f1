/* Daemon logging to stderr: "2026-11-22T08:40:00.123Z INFO  manager: text".
 * Only daemons log; library code reports through struct terr instead. */
#ifndef TESSERA_COMMON_LOG_H
#define TESSERA_COMMON_LOG_H

enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR };

void log_set_level(enum log_level level);
void log_msg(enum log_level level, const char *component, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#define log_debug(comp, ...) log_msg(LOG_DEBUG, comp, __VA_ARGS__)
#define log_info(comp, ...)  log_msg(LOG_INFO, comp, __VA_ARGS__)
#define log_warn(comp, ...)  log_msg(LOG_WARN, comp, __VA_ARGS__)
#define log_error(comp, ...) log_msg(LOG_ERROR, comp, __VA_ARGS__)

#endif
