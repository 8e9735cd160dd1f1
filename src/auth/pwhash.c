#include "auth/pwhash.h"

#include <argon2.h>
#include <openssl/rand.h>
#include <string.h>

/* OWASP's argon2id baseline: 19 MiB, 2 passes, 1 lane. */
#define PW_T_COST 2
#define PW_M_COST (19 * 1024)
#define PW_LANES 1
#define PW_SALT 16
#define PW_HASH 32

int pwhash_check_policy(const char *plain, struct terr *err)
{
	size_t n = plain ? strlen(plain) : 0;
	if (n < PWHASH_MIN_LEN || n > PWHASH_MAX_LEN)
		return terr_set(err, EINVAL, "password must be %d to %d characters long", PWHASH_MIN_LEN,
				PWHASH_MAX_LEN);
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)plain[i] < 0x20 || plain[i] == 0x7f)
			return terr_set(err, EINVAL, "password must not contain control characters");
	return 0;
}

int pwhash_hash(const char *plain, char *out, size_t n, struct terr *err)
{
	int rc = pwhash_check_policy(plain, err);
	if (rc < 0)
		return rc;
	unsigned char salt[PW_SALT];
	if (RAND_bytes(salt, sizeof(salt)) != 1)
		return terr_set(err, EIO, "no random bytes for a password salt");
	int ar = argon2id_hash_encoded(PW_T_COST, PW_M_COST, PW_LANES, plain, strlen(plain), salt,
				       sizeof(salt), PW_HASH, out, n);
	if (ar != ARGON2_OK)
		return terr_set(err, ar == ARGON2_MEMORY_ALLOCATION_ERROR ? ENOMEM : EIO,
				"cannot hash the password: %s", argon2_error_message(ar));
	return 0;
}

bool pwhash_verify(const char *encoded, const char *plain)
{
	if (!encoded || !plain || strncmp(encoded, "$argon2id$", 10) != 0)
		return false;
	return argon2id_verify(encoded, plain, strlen(plain)) == ARGON2_OK;
}

int pwhash_generate(char *out, size_t n, struct terr *err)
{
	static const char alphabet[] = "ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789";
	const size_t len = 20, k = sizeof(alphabet) - 1;
	if (n < len + 1)
		return terr_set(err, EINVAL, "password buffer too small");
	for (size_t i = 0; i < len; i++) {
		unsigned char b;
		do {
			if (RAND_bytes(&b, 1) != 1)
				return terr_set(err, EIO, "no random bytes for a password");
		} while (b >= 256 - (256 % k));   /* no modulo bias */
		out[i] = alphabet[b % k];
	}
	out[len] = '\0';
	return 0;
}
