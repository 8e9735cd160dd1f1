/* Parsing and printing of resource amounts. Amounts are fixed-point
 * integers everywhere (docs/architecture.md, "Conventions"): CPU and fGPU
 * in milli-units (1000 = one core / one fGPU), memory in bytes. Floats are
 * never used, so three sessions of 0.4 on 1.0 give exactly two. */
#ifndef TESSERA_COMMON_UNITS_H
#define TESSERA_COMMON_UNITS_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

/* Sizes: plain bytes ("1048576") or a number with up to 3 decimals and a
 * binary suffix, case-insensitive: k/kb/kib, m/mb/mib, g/gb/gib, t/tb/tib
 * (all powers of 1024, as `docker run -m` reads them), optional spaces
 * between number and suffix, "b" for bytes. "256m", "1g", "512MiB",
 * "1.5GiB". Rejects negatives, empty input, overflow, junk. */
int units_parse_size(const char *s, int64_t *bytes, struct terr *err);

/* "1.5 GiB", "256 MiB", "512 B": shortest exact-ish form, 1 decimal max. */
void units_format_size(int64_t bytes, char *buf, size_t n);

/* Decimal with at most 3 fraction digits -> milli-units: "0.5" -> 500,
 * "2" -> 2000, "0.125" -> 125. Rejects negatives, exponents, more than 3
 * fraction digits, overflow, junk. Zero is accepted (callers decide). */
int units_parse_milli(const char *s, int64_t *milli, struct terr *err);

/* 500 -> "0.5", 2000 -> "2", 125 -> "0.125". */
void units_format_milli(int64_t milli, char *buf, size_t n);

/* A whole number written as digits only, at most max: "0", "42". Unlike
 * strtol, refuses spaces, a sign, "0x" and anything after the digits (a
 * query's limit=" 5" or "+5" is no number). 0, or -EINVAL (not digits) or
 * -ERANGE (past max). Says nothing: callers word the refusal. */
int units_parse_whole(const char *s, uint64_t max, uint64_t *out);

#endif
