/* Aligned text tables and the short forms people read in them. */
#ifndef TESSERA_CLI_TABLE_H
#define TESSERA_CLI_TABLE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct cli_table;

/* New table with ncols columns; headers are copied and upper-cased.
 * Returns NULL on allocation failure; release with cli_table_free. */
struct cli_table *cli_table_new(size_t ncols, const char *const *headers);
/* Appends a row of ncols cells (copied; NULL prints as "-").
 * Returns 0 or -ENOMEM. */
int cli_table_add(struct cli_table *t, const char *const *cells);
/* Prints header and rows, each column padded to its widest cell (counted
 * in characters, not bytes), two spaces apart, no trailing blanks. */
void cli_table_print(const struct cli_table *t, FILE *out);
void cli_table_free(struct cli_table *t);

/* Seconds -> "5s", "3m", "2h", "4d" (largest whole unit; negative as 0s). */
void cli_format_age(int64_t seconds, char *buf, size_t n);
/* fGPU milli-units -> "0.5 fGPU"; "-" for 0. */
void cli_format_fgpu(int64_t milli, char *buf, size_t n);
/* Copies s into buf, cut to at most max characters with "..." at the end
 * when longer; newlines become spaces (one table row per line). */
void cli_shorten(const char *s, size_t max, char *buf, size_t n);

#endif
