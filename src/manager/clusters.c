/* Cluster sessions: one session of N containers for distributed work
 * (docs/user-guide.md, "Distributed training"). Each container is a
 * session record of its own (store.h: main1's is the session users see,
 * sub1, sub2... name it in cluster_main), so that everything the manager
 * does per container (placement on a node, the start, adoption after a
 * restart, LOST, usage, apps) is what it does for any session. What is
 * the session's as a whole is here: the records linked to each other,
 * RUNNING only once every container runs, one container's end ending the
 * others, the containers in the session's JSON and the SSH key the
 * containers share. The scheduler places them as one gang (scheduler.c). */
#include <errno.h>
#include <openssl/evp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/jsonutil.h"
#include "common/log.h"
#include "common/sign.h"
#include "common/util.h"
#include "manager/state.h"

int mgr_cluster_link(struct manager *m, struct msession *s)
{
	/* A record made before clusters existed, or by a caller that set
	 * nothing (the benchmarks, white-box tests): one container. */
	if (s->rec.cluster_size < 1)
		s->rec.cluster_size = 1;
	if (!s->rec.cluster_role[0])
		util_strlcpy(s->rec.cluster_role, STORE_CLUSTER_MAIN, sizeof(s->rec.cluster_role));
	if (!s->rec.cluster_mode[0])
		util_strlcpy(s->rec.cluster_mode, STORE_CLUSTER_SINGLE_NODE, sizeof(s->rec.cluster_mode));
	if (s->rec.cluster_idx < 1)
		s->rec.cluster_idx = 1;
	if (!mgr_session_is_sub(s)) {
		s->cl_main = s;
		if (s->rec.cluster_size > 1 && !s->cl_members) {
			s->cl_members = calloc((size_t)s->rec.cluster_size, sizeof(*s->cl_members));
			if (!s->cl_members)
				return -ENOMEM;
			s->cl_members[0] = s;
		}
		return 0;
	}
	/* A sub comes after its main: created after it, loaded in creation
	 * order. One whose main is missing stays alone. */
	struct msession *main = mgr_find_session(m, s->rec.cluster_main);
	if (!main || !main->cl_members || s->rec.cluster_idx >= main->rec.cluster_size) {
		log_warn("manager", "container sub%lld of session %s has no main record (%.8s)",
			 (long long)s->rec.cluster_idx, s->rec.name, s->rec.cluster_main);
		return 0;
	}
	main->cl_members[s->rec.cluster_idx] = s;
	s->cl_main = main;
	return 0;
}

struct msession *mgr_cluster_member(const struct msession *main, int64_t i)
{
	if (i < 0 || i >= main->rec.cluster_size)
		return NULL;
	if (!main->cl_members)
		return i == 0 ? (struct msession *)main : NULL;
	return main->cl_members[i];
}

void mgr_cluster_name(const struct msession *s, char *buf, size_t n)
{
	snprintf(buf, n, "%s%lld", mgr_session_is_sub(s) ? STORE_CLUSTER_SUB : STORE_CLUSTER_MAIN,
		 (long long)s->rec.cluster_idx);
}

struct msession *mgr_cluster_find(struct msession *main, const char *container)
{
	if (!container || !*container)
		return main;
	char name[24];
	for (int64_t i = 0; i < main->rec.cluster_size; i++) {
		struct msession *o = mgr_cluster_member(main, i);
		if (!o)
			continue;
		mgr_cluster_name(o, name, sizeof(name));
		if (!strcmp(name, container))
			return o;
	}
	return NULL;
}

void mgr_cluster_hosts(const struct msession *main, char *buf, size_t n)
{
	size_t used = 0;
	buf[0] = '\0';
	for (int64_t i = 0; i < main->rec.cluster_size && used < n; i++) {
		int w = i == 0 ? snprintf(buf, n, "%s1", STORE_CLUSTER_MAIN)
			       : snprintf(buf + used, n - used, ",%s%lld", STORE_CLUSTER_SUB, (long long)i);
		if (w < 0)
			break;
		used += (size_t)w;
	}
}

/* Whether s is on its way out or gone. */
static bool leaving(enum session_status st)
{
	return session_status_final(st) || session_status_ending(st);
}

/* Depth of follows in progress on this thread (which holds mu
 * throughout): a member ended by a follow does not end the others
 * again. Per thread, as a process may hold several managers (tests). */
static _Thread_local int following;

void mgr_cluster_follow(struct manager *m, struct msession *s, enum session_status old)
{
	struct msession *main = s->cl_main;
	enum session_status st = s->rec.status;
	if (following || !main || !mgr_session_is_cluster(s) || !leaving(st) || leaving(old))
		return;
	/* In a batch session the command of main1 is the session's: a sub
	 * whose own command finished well leaves the others running. */
	if (main != s && st == SS_TERMINATED && mgr_session_is_batch(s) && s->rec.has_exit_code &&
	    s->rec.exit_code == 0)
		return;
	char me[24], why[STORE_INFO_MAX];
	mgr_cluster_name(s, me, sizeof(me));
	if (main == s) {
		snprintf(why, sizeof(why), "the session ended (main1: %.200s)", s->rec.status_info);
	} else {
		/* A sub ended by itself (ERROR, a container gone): the session
		 * ends as ERROR, saying which container and why. */
		snprintf(main->cl_error, sizeof(main->cl_error), "container %s%s%s ended: %.300s", me,
			 s->rec.agent_id[0] ? " on node " : "", s->rec.agent_id, s->rec.status_info);
		snprintf(why, sizeof(why), "%s", main->cl_error);
	}
	following++;
	for (int64_t i = 0; i < main->rec.cluster_size; i++) {
		struct msession *o = mgr_cluster_member(main, i);
		if (!o || o == s || leaving(o->rec.status))
			continue;
		if (o->rec.status == SS_PENDING) {
			mgr_set_status(m, o, SS_CANCELLED, "%s", why);
			continue;
		}
		util_strlcpy(o->end_reason, why, sizeof(o->end_reason));
		mgr_set_status(m, o, SS_TERMINATING, "terminating: %s", why);
		mgr_enqueue_destroy(m, o);
	}
	following--;
	/* The main, now ending, takes cl_error as its final ERROR once its
	 * container is gone (run_destroy). */
	mgr_wake_scheduler(m);
}

void mgr_cluster_started(struct manager *m, struct msession *s, const char *agent_name)
{
	struct msession *main = s->cl_main;
	if (!mgr_session_is_cluster(s) || !main) {
		mgr_set_status(m, s, SS_RUNNING, "running on node %s", agent_name);
		return;
	}
	int64_t up = 0, n = main->rec.cluster_size;
	for (int64_t i = 0; i < n; i++) {
		const struct msession *o = mgr_cluster_member(main, i);
		if (o && (o->rec.status == SS_RUNNING || (o->rec.status == SS_PREPARING && o->rec.container_id[0] &&
							 !o->start_inflight)))
			up++;
	}
	if (up < n) {
		/* Its container runs; the session waits for the others'. */
		snprintf(s->rec.status_info, sizeof(s->rec.status_info),
			 "container started on node %s; waiting for the session's other containers (%lld of %lld "
			 "started)", agent_name, (long long)up, (long long)n);
		mgr_persist(m, s);
		m->version++;
		pthread_cond_broadcast(&m->changed);
		return;
	}
	for (int64_t i = 0; i < n; i++) {
		struct msession *o = mgr_cluster_member(main, i);
		if (o && o->rec.status == SS_PREPARING)
			mgr_set_status(m, o, SS_RUNNING, "running on node %s", o->rec.agent_id);
	}
}

json_t *mgr_cluster_containers_json(struct manager *m, const struct msession *s)
{
	(void)m;
	json_t *arr = json_array();
	const struct msession *main = s->cl_main ? s->cl_main : s;
	for (int64_t i = 0; arr && i < main->rec.cluster_size; i++) {
		const struct msession *o = mgr_cluster_member(main, i);
		if (!o)
			continue;
		char name[24];
		mgr_cluster_name(o, name, sizeof(name));
		json_t *gpus = json_array();
		for (int d = 0; d < o->n_shares; d++)
			json_array_append_new(gpus, json_pack("{s:i,s:s,s:o}", "index", o->shares[d].index, "uuid",
							      o->shares[d].uuid, "fgpu",
							      jsonutil_milli(o->shares[d].fgpu_m)));
		json_t *c = json_pack("{s:s,s:s,s:I,s:s,s:o,s:s,s:s,s:o,s:o}", "name", name, "role",
				      o->rec.cluster_role, "idx", (json_int_t)o->rec.cluster_idx, "id", o->rec.id,
				      "agent", o->rec.agent_id[0] ? json_string(o->rec.agent_id) : json_null(), "status",
				      session_status_name(o->rec.status), "status_info", o->rec.status_info,
				      "container_id",
				      o->rec.container_id[0] ? json_string(o->rec.container_id) : json_null(), "gpus",
				      gpus);
		if (c && o->rec.status == SS_RUNNING && o->usage_t)
			json_object_set_new(c, "usage",
					    json_pack("{s:f,s:f,s:o}", "cpu_pct", o->usage_cpu_pct, "mem_pct",
						      o->usage_mem_pct, "gpu_pct",
						      o->usage_gpu_pct >= 0 ? json_real(o->usage_gpu_pct) : json_null()));
		json_array_append_new(arr, c);
	}
	return arr;
}

int mgr_cluster_new_seed(char out[65], struct terr *err)
{
	return sign_random_hex(32, out, 65, err);
}

/* ---- the session's SSH key, in OpenSSH's own formats ---- */

struct wbuf {
	unsigned char b[512];
	size_t n;
	bool over;
};

static void w_raw(struct wbuf *w, const void *p, size_t n)
{
	if (w->over || n > sizeof(w->b) - w->n) {
		w->over = true;
		return;
	}
	memcpy(w->b + w->n, p, n);
	w->n += n;
}

static void w_u32(struct wbuf *w, uint32_t v)
{
	unsigned char b[4] = {(unsigned char)(v >> 24), (unsigned char)(v >> 16), (unsigned char)(v >> 8),
			      (unsigned char)v};
	w_raw(w, b, 4);
}

/* An SSH "string": its length, then its bytes (RFC 4251, 5). */
static void w_str(struct wbuf *w, const void *p, size_t n)
{
	w_u32(w, (uint32_t)n);
	w_raw(w, p, n);
}

static int hex_bytes(const char *hex, unsigned char *out, size_t n)
{
	if (strlen(hex) != 2 * n)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		unsigned v = 0;
		for (int k = 0; k < 2; k++) {
			char c = hex[2 * i + (size_t)k];
			int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
			if (d < 0)
				return -EINVAL;
			v = v * 16 + (unsigned)d;
		}
		out[i] = (unsigned char)v;
	}
	return 0;
}

#define KEY_COMMENT "tessera-session"

int mgr_cluster_ssh_keys(const char *seed_hex, char *key, size_t key_n, char *pub, size_t pub_n)
{
	unsigned char seed[32], pk[32];
	size_t pk_len = sizeof(pk);
	if (hex_bytes(seed_hex, seed, sizeof(seed)) < 0)
		return -EINVAL;
	EVP_PKEY *k = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, seed, sizeof(seed));
	int ok = k && EVP_PKEY_get_raw_public_key(k, pk, &pk_len) == 1 && pk_len == sizeof(pk);
	EVP_PKEY_free(k);
	if (!ok)
		return -ENOMEM;
	/* The public key blob: its type and the 32 bytes (RFC 8709). */
	struct wbuf blob = {0};
	w_str(&blob, "ssh-ed25519", 11);
	w_str(&blob, pk, sizeof(pk));
	/* The private part (OpenSSH's PROTOCOL.key): two equal check
	 * numbers, the key (the private half is the seed and the public
	 * key), a comment, padding 1, 2, 3... to the cipher's block of 8
	 * ("none": no passphrase; the file is the session user's alone). */
	struct wbuf priv = {0};
	uint32_t check = (uint32_t)seed[0] << 24 | (uint32_t)seed[1] << 16 | (uint32_t)seed[2] << 8 | seed[3];
	w_u32(&priv, check);
	w_u32(&priv, check);
	w_str(&priv, "ssh-ed25519", 11);
	w_str(&priv, pk, sizeof(pk));
	unsigned char both[64];
	memcpy(both, seed, 32);
	memcpy(both + 32, pk, 32);
	w_str(&priv, both, sizeof(both));
	w_str(&priv, KEY_COMMENT, strlen(KEY_COMMENT));
	for (unsigned char pad = 1; priv.n % 8; pad++)
		w_raw(&priv, &pad, 1);
	struct wbuf all = {0};
	w_raw(&all, "openssh-key-v1", 15);   /* with its NUL */
	w_str(&all, "none", 4);
	w_str(&all, "none", 4);
	w_str(&all, "", 0);
	w_u32(&all, 1);
	w_str(&all, blob.b, blob.n);
	w_str(&all, priv.b, priv.n);
	OPENSSL_cleanse(both, sizeof(both));
	OPENSSL_cleanse(seed, sizeof(seed));
	if (blob.over || priv.over || all.over) {
		OPENSSL_cleanse(&priv, sizeof(priv));
		OPENSSL_cleanse(&all, sizeof(all));
		return -ENOMEM;
	}
	OPENSSL_cleanse(&priv, sizeof(priv));
	unsigned char b64[4 * sizeof(all.b) / 3 + 8], pub64[4 * sizeof(blob.b) / 3 + 8];
	int n64 = EVP_EncodeBlock(b64, all.b, (int)all.n);
	OPENSSL_cleanse(&all, sizeof(all));
	EVP_EncodeBlock(pub64, blob.b, (int)blob.n);
	/* PEM-like armour, 70 characters a line, as ssh-keygen writes it. */
	size_t used = (size_t)snprintf(key, key_n, "-----BEGIN OPENSSH PRIVATE KEY-----\n");
	for (int i = 0; i < n64 && used < key_n; i += 70)
		used += (size_t)snprintf(key + used, key_n - used, "%.*s\n", n64 - i < 70 ? n64 - i : 70,
					 (const char *)b64 + i);
	if (used < key_n)
		used += (size_t)snprintf(key + used, key_n - used, "-----END OPENSSH PRIVATE KEY-----\n");
	OPENSSL_cleanse(b64, sizeof(b64));
	int pw = snprintf(pub, pub_n, "ssh-ed25519 %s " KEY_COMMENT, (const char *)pub64);
	if (used >= key_n || pw < 0 || (size_t)pw >= pub_n)
		return -ENOMEM;
	return 0;
}
