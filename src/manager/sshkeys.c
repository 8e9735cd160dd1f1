/* Users' SSH public keys (sshkeys.h). */
#include "manager/sshkeys.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>


/* The types OpenSSH 9 accepts for user authentication; DSA is gone. */
static const char *const key_types[] = {
	"ssh-ed25519", "ssh-rsa", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521",
	"sk-ssh-ed25519@openssh.com", "sk-ecdsa-sha2-nistp256@openssh.com", NULL,
};

static bool known_type(const char *t, size_t n)
{
	for (int i = 0; key_types[i]; i++)
		if (strlen(key_types[i]) == n && !strncmp(key_types[i], t, n))
			return true;
	return false;
}

static bool is_b64(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/' ||
	       c == '=';
}

int sshkey_parse(const char *text, struct sshkey_info *out, struct terr *err)
{
	memset(out, 0, sizeof(*out));
	const char *p = text ? text : "";
	while (*p == ' ' || *p == '\t')
		p++;
	size_t tl = strcspn(p, " \t\r\n");
	if (!tl)
		return terr_set(err, EINVAL, "the key is empty: give a public key line, e.g. the contents of "
				"~/.ssh/id_ed25519.pub");
	if (!strncmp(p, "-----BEGIN", 10) || !strncmp(p, "PuTTY-User-Key-File", 19))
		return terr_set(err, EINVAL, "that is a private key: give its public key (the .pub file, or "
				"ssh-keygen -y -f KEY), and keep the private one to yourself");
	if (!known_type(p, tl))
		return terr_set(err, EINVAL, "the key's type '%.*s' is not one OpenSSH accepts for logins (%s, %s, "
				"ecdsa-sha2-nistp256/384/521 or a security key's): give a public key line "
				"\"TYPE BASE64 [COMMENT]\" without options", (int)(tl > 40 ? 40 : tl), p,
				key_types[0], key_types[1]);
	memcpy(out->type, p, tl);
	p += tl;
	while (*p == ' ' || *p == '\t')
		p++;
	size_t bl = strcspn(p, " \t\r\n");
	if (!bl || bl % 4)
		return terr_set(err, EINVAL, "the key has no valid base64 after its type");
	for (size_t i = 0; i < bl; i++)
		if (!is_b64(p[i]))
			return terr_set(err, EINVAL, "the key has no valid base64 after its type");
	if (bl > SSHKEY_LINE_MAX - sizeof(out->type) - SSHKEY_COMMENT_MAX - 4)
		return terr_set(err, EINVAL, "the key is %zu characters long; at most %zu", bl,
				SSHKEY_LINE_MAX - sizeof(out->type) - SSHKEY_COMMENT_MAX - 4);
	const char *b64 = p;
	unsigned char blob[SSHKEY_LINE_MAX];
	int n = EVP_DecodeBlock(blob, (const unsigned char *)b64, (int)bl);
	if (n < 0)
		return terr_set(err, EINVAL, "the key's base64 does not decode");
	for (size_t i = bl; i > 0 && b64[i - 1] == '='; i--)
		n--;   /* EVP_DecodeBlock counts the padding's bytes */
	/* The blob's first field: a 32-bit length, then the type again. */
	uint32_t fl = n >= 4 ? (uint32_t)blob[0] << 24 | (uint32_t)blob[1] << 16 | (uint32_t)blob[2] << 8 | blob[3] : 0;
	if (n < 4 || fl != tl || (size_t)n < 4 + fl || memcmp(blob + 4, out->type, tl) || (size_t)n == 4 + fl)
		return terr_set(err, EINVAL, "the key's data is not a %s key (is the line whole?)", out->type);
	p += bl;
	while (*p == ' ' || *p == '\t')
		p++;
	/* The comment: the rest of the line, blanks inside kept. */
	size_t cl = strcspn(p, "\r\n");
	while (cl && (p[cl - 1] == ' ' || p[cl - 1] == '\t'))
		cl--;
	const char *rest = p + cl + strspn(p + cl, " \t\r\n");
	if (*rest)
		return terr_set(err, EINVAL, "give one key at a time (the text has more than one line)");
	if (cl >= SSHKEY_COMMENT_MAX)
		return terr_set(err, EINVAL, "the key's comment is %zu characters; at most %d", cl, SSHKEY_COMMENT_MAX - 1);
	for (size_t i = 0; i < cl; i++)
		if (((unsigned char)p[i] < 0x20 && p[i] != '\t') || p[i] == 0x7f)
			return terr_set(err, EINVAL, "the key's comment holds a control character");
	memcpy(out->comment, p, cl);
	unsigned char md[32];
	unsigned int mdl = 0;
	if (!EVP_Digest(blob, (size_t)n, md, &mdl, EVP_sha256(), NULL) || mdl != 32)
		return terr_set(err, EIO, "cannot hash the key");
	unsigned char fp[48];
	int fl64 = EVP_EncodeBlock(fp, md, 32);
	while (fl64 > 0 && fp[fl64 - 1] == '=')
		fl64--;   /* ssh-keygen prints it unpadded */
	snprintf(out->fingerprint, sizeof(out->fingerprint), "SHA256:%.*s", fl64, (const char *)fp);
	for (int i = 0; i < 8; i++)
		snprintf(out->id + 2 * i, 3, "%02x", md[i]);
	snprintf(out->line, sizeof(out->line), "%s %.*s%s%s\n", out->type, (int)bl, b64, cl ? " " : "", out->comment);
	return 0;
}

/* Calls fn for each line of keys with its parsed form; stops when fn
 * returns non-zero, returning that. Lines that do not parse (edited in
 * the database by hand) are skipped. */
static int each_key(const char *keys, int (*fn)(const struct sshkey_info *, const char *start, size_t len, void *),
		    void *ud)
{
	struct sshkey_info k;
	struct terr ignored = {0};
	char line[SSHKEY_LINE_MAX + 1];
	for (const char *p = keys; p && *p;) {
		size_t len = strcspn(p, "\n");
		size_t whole = len + (p[len] == '\n');
		if (len < sizeof(line)) {
			memcpy(line, p, len);
			line[len] = '\0';
			if (sshkey_parse(line, &k, &ignored) == 0) {
				int rc = fn(&k, p, whole, ud);
				if (rc)
					return rc;
			}
		}
		p += whole;
	}
	return 0;
}

struct find {
	const char *ref;
	size_t count;
	const char *at;
	size_t len;
	struct sshkey_info found;
};

static int count_or_find(const struct sshkey_info *k, const char *start, size_t len, void *ud)
{
	struct find *f = ud;
	f->count++;
	if (f->ref && (!strcmp(k->id, f->ref) || !strcmp(k->fingerprint, f->ref))) {
		f->at = start;
		f->len = len;
		f->found = *k;
		return 1;
	}
	return 0;
}

int sshkeys_add(char *keys, size_t cap, const char *text, struct sshkey_info *added, struct terr *err)
{
	int rc = sshkey_parse(text, added, err);
	if (rc < 0)
		return rc;
	struct find f = {.ref = added->id};
	each_key(keys, count_or_find, &f);
	if (f.at)
		return terr_set(err, EEXIST, "you have that key already (%s%s%s)", added->fingerprint,
				f.found.comment[0] ? ", " : "", f.found.comment);
	if (f.count >= SSHKEYS_MAX)
		return terr_set(err, EBUSY, "you have %zu SSH keys, the most a user may have: remove one first",
				f.count);
	size_t have = strlen(keys), more = strlen(added->line);
	if (have && keys[have - 1] != '\n')
		more++;
	if (have + more + 1 > cap)
		return terr_set(err, ENOSPC, "your SSH keys take %zu bytes and this one does not fit: remove one first",
				have);
	if (have && keys[have - 1] != '\n')
		keys[have++] = '\n';
	memcpy(keys + have, added->line, strlen(added->line) + 1);
	return 0;
}

int sshkeys_remove(char *keys, const char *ref, struct sshkey_info *removed, struct terr *err)
{
	struct find f = {.ref = ref ? ref : ""};
	each_key(keys, count_or_find, &f);
	if (!f.at)
		return terr_set(err, ENOENT, "you have no SSH key %s (tessera user keys ls lists them)", ref ? ref : "");
	*removed = f.found;
	char *at = keys + (f.at - keys);
	memmove(at, at + f.len, strlen(at + f.len) + 1);
	return 0;
}

static int to_json(const struct sshkey_info *k, const char *start, size_t len, void *ud)
{
	(void)start;
	(void)len;
	json_array_append_new(ud, json_pack("{s:s,s:s,s:s,s:s}", "id", k->id, "type", k->type, "fingerprint",
					    k->fingerprint, "comment", k->comment));
	return 0;
}

json_t *sshkeys_json(const char *keys)
{
	json_t *arr = json_array();
	if (arr)
		each_key(keys, to_json, arr);
	return arr;
}
