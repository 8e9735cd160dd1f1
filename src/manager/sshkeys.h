/* Users' SSH public keys (docs/user-guide.md, "Working from your own
 * machine"): the lines a user adds with `tessera user keys add FILE`,
 * kept in users.ssh_keys and given to their sessions' sshd as its
 * authorized keys. Pure text functions (no manager state), unit-tested
 * in tests/manager/test_sshkeys.c.
 *
 * A key is checked as OpenSSH reads one: a known type, base64 that
 * decodes to a blob whose first field names the same type. What is kept
 * is the normalised line "TYPE BASE64 COMMENT\n" (no authorized_keys
 * options: a user gives a public key, the rules around it are ours). */
#ifndef TESSERA_MANAGER_SSHKEYS_H
#define TESSERA_MANAGER_SSHKEYS_H

#include <jansson.h>
#include <stddef.h>

#include "common/err.h"

#define SSHKEYS_MAX 16            /* keys per user */
#define SSHKEY_LINE_MAX 2048      /* one normalised line (an RSA 8192 is ~1.4 KB) */
#define SSHKEY_COMMENT_MAX 128

struct sshkey_info {
	char type[48];
	char fingerprint[64];         /* "SHA256:..." as ssh-keygen -l prints it */
	char id[17];                  /* its first 16 hex of SHA-256: the API's name for it */
	char comment[SSHKEY_COMMENT_MAX];
	char line[SSHKEY_LINE_MAX];   /* normalised, with its newline */
};

/* Parses one public key line (surrounding blanks and one newline
 * allowed). EINVAL with a message a person can act on. */
int sshkey_parse(const char *text, struct sshkey_info *out, struct terr *err);

/* Adds the key in text to keys (a NUL-terminated list of normalised
 * lines in a buffer of cap bytes): EEXIST when it is there already (same
 * blob), EBUSY past SSHKEYS_MAX, ENOSPC when the buffer cannot hold it. */
int sshkeys_add(char *keys, size_t cap, const char *text, struct sshkey_info *added, struct terr *err);

/* Removes the key whose id or fingerprint is ref: ENOENT when none. */
int sshkeys_remove(char *keys, const char *ref, struct sshkey_info *removed, struct terr *err);

/* [{"id","type","fingerprint","comment"}], one per line of keys. */
json_t *sshkeys_json(const char *keys);

#endif
