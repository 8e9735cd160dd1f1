/* Users' SSH public keys (src/manager/sshkeys.c): what is accepted, the
 * fingerprints ssh-keygen -l prints, adding and removing. */
#include "manager/sshkeys.h"
#include "testlib.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Made with ssh-keygen; their fingerprints as `ssh-keygen -l` printed them. */
#define ED "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGuTiyr9/3x2PPIETnNBUU3uwvWD1XfilMpQLwkWsdRU"
#define ED_FP "SHA256:9AS2lxAU8jj0cMQmWAjES5G4ntbJ9ztog+S+Z9YY2Pk"
#define RSA_B64 \
	"AAAAB3NzaC1yc2EAAAADAQABAAABAQ"
/* A second Ed25519 key's blob: the type, then 32 bytes. */
#define ED2 "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAB"

TEST(parse_good)
{
	struct sshkey_info k;
	struct terr err = {0};
	CHECK_INT(sshkey_parse("  " ED "   laptop key  \n", &k, &err), 0);
	CHECK_STR(k.type, "ssh-ed25519");
	CHECK_STR(k.fingerprint, ED_FP);
	CHECK_STR(k.comment, "laptop key");
	CHECK_STR(k.line, ED " laptop key\n");
	CHECK_INT((int)strlen(k.id), 16);
	/* No comment: none in the line either. */
	CHECK_INT(sshkey_parse(ED, &k, &err), 0);
	CHECK_STR(k.line, ED "\n");
	CHECK_STR(k.comment, "");
}

TEST(parse_bad)
{
	static const struct { const char *text, *why; } cases[] = {
		{"", "the key is empty"},
		{"   \n", "the key is empty"},
		{"-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn\n", "that is a private key"},
		{"ssh-dss AAAAB3NzaC1kc3MAAACBAP== x", "is not one OpenSSH accepts"},
		{"from=\"10.0.0.1\" " ED, "is not one OpenSSH accepts"},
		{"ssh-ed25519", "no valid base64"},
		{"ssh-ed25519 AAAA*AAA", "no valid base64"},
		{"ssh-ed25519 AAAAC3NzaC1", "no valid base64"},
		/* An RSA blob under the Ed25519 type. */
		{"ssh-ed25519 " RSA_B64 "==", "is not a ssh-ed25519 key"},
		{ED " a\n" ED " b\n", "one key at a time"},
		{ED " tab\there", NULL},
		{ED " bell\a", "control character"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct sshkey_info k;
		struct terr err = {0};
		int rc = sshkey_parse(cases[i].text, &k, &err);
		if (!cases[i].why) {
			CHECK_INT(rc, 0);
			continue;
		}
		CHECK_INT(rc, -EINVAL);
		if (!strstr(err.msg, cases[i].why))
			FAILF("case %zu: '%s' lacks '%s'", i, err.msg, cases[i].why);
	}
}

TEST(add_and_remove)
{
	char keys[4096] = "";
	struct sshkey_info k, k2, gone;
	struct terr err = {0};
	CHECK_INT(sshkeys_add(keys, sizeof(keys), ED " laptop", &k, &err), 0);
	CHECK_INT(sshkeys_add(keys, sizeof(keys), ED2 " desk", &k2, &err), 0);
	CHECK_STR(keys, ED " laptop\n" ED2 " desk\n");
	/* The same key again, whatever its comment: refused. */
	CHECK_INT(sshkeys_add(keys, sizeof(keys), ED " other name", &k, &err), -EEXIST);
	CHECK(strstr(err.msg, ED_FP) != NULL);
	json_t *arr = sshkeys_json(keys);
	CHECK_INT((int)json_array_size(arr), 2);
	CHECK_STR(json_string_value(json_object_get(json_array_get(arr, 0), "fingerprint")), ED_FP);
	CHECK_STR(json_string_value(json_object_get(json_array_get(arr, 1), "comment")), "desk");
	json_decref(arr);
	/* By fingerprint, then by id. */
	CHECK_INT(sshkeys_remove(keys, ED_FP, &gone, &err), 0);
	CHECK_STR(gone.comment, "laptop");
	CHECK_STR(keys, ED2 " desk\n");
	CHECK_INT(sshkeys_remove(keys, "0123456789abcdef", &gone, &err), -ENOENT);
	CHECK_INT(sshkeys_remove(keys, k2.id, &gone, &err), 0);
	CHECK_STR(keys, "");
	/* A buffer too small for the next one. */
	char tiny[100] = "";
	CHECK_INT(sshkeys_add(tiny, sizeof(tiny), ED " a comment long enough", &k, &err), -ENOSPC);
	CHECK_STR(tiny, "");
}

TEST(at_most_max)
{
	char *keys = calloc(1, 65536);
	struct terr err = {0};
	struct sshkey_info k;
	char line[200];
	/* Distinct Ed25519 blobs: the last base64 characters differ. */
	for (int i = 0; i <= SSHKEYS_MAX; i++) {
		snprintf(line, sizeof(line), "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA%c%c",
			 'A' + i / 16, "AEIMQUYcgkosw048"[i % 16]);
		int rc = sshkeys_add(keys, 65536, line, &k, &err);
		if (i < SSHKEYS_MAX)
			CHECK_INT(rc, 0);
		else
			CHECK_INT(rc, -EBUSY);
	}
	free(keys);
}

int main(void)
{
	RUN(parse_good);
	RUN(parse_bad);
	RUN(add_and_remove);
	RUN(at_most_max);
	return testlib_done();
}
