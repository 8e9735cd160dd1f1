/* Password hashing for web logins: argon2id through libargon2 (Debian's
 * libargon2-1), in the PHC string format ("$argon2id$v=19$m=...,t=...,p=...
 * $salt$hash"), so the parameters travel with each hash and can be raised
 * later without breaking old ones. */
#ifndef TESSERA_AUTH_PWHASH_H
#define TESSERA_AUTH_PWHASH_H

#include <stdbool.h>
#include <stddef.h>

#include "common/err.h"

#define PWHASH_MIN_LEN 8
#define PWHASH_MAX_LEN 256
#define PWHASH_ENCODED_MAX 160

/* Hashes plain (NUL-terminated) with a fresh random salt into out (n >=
 * PWHASH_ENCODED_MAX). -EINVAL when plain is too short/long. */
int pwhash_hash(const char *plain, char *out, size_t n, struct terr *err);
/* true when plain matches encoded; false on any mismatch or malformed hash. */
bool pwhash_verify(const char *encoded, const char *plain);
/* A random password people can type: 20 characters from [A-Za-z0-9]
 * without look-alikes (0/O, 1/l/I). out >= 21 bytes. */
int pwhash_generate(char *out, size_t n, struct terr *err);
/* Checks a password someone chose: length PWHASH_MIN_LEN..PWHASH_MAX_LEN,
 * no control characters. */
int pwhash_check_policy(const char *plain, struct terr *err);

#endif
