/* The session spec: what a manager hands an agent to start a session
 * (link->start; POST /rpc/v1/sessions for a remote agent). One codec for
 * both sides: the manager writes it with session_spec_to_json
 * (manager/dispatch.c), the agent reads it with session_spec_from_json
 * (agent_start_session), in-process or over HTTP, so the two cannot
 * drift apart. Needs jansson and common/model only (its fuzz target
 * compiles it alone). */
#ifndef TESSERA_AGENT_SESSION_SPEC_H
#define TESSERA_AGENT_SESSION_SPEC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/agent.h"
#include "common/err.h"

/* Devices one spec may list (gpu/gpu.h's GPU_MAX_DEVICES: no node has
 * more) and variables it may set. */
#define SESSION_SPEC_MAX_GPUS 16
#define SESSION_SPEC_MAX_ENV 256

/* One device share and the limits it implies. */
struct session_spec_gpu {
	int index;                    /* the device's index on its node */
	const char *uuid;
	int64_t fgpu_m;               /* the share, in milli-fGPU */
	int64_t memory_limit;         /* bytes */
	int sm_limit_percent;         /* 1 to 100; 0: not given (the whole device's compute) */
};

/* One folder mount: a folder's directory on a storage host. */
struct session_spec_mount {
	const char *source, *target;
	bool readonly;
};

/* A cluster session's container (docs/user-guide.md, "Distributed
 * training"): which one it is, the session's hosts and its SSH key.
 * host NULL: a one-container session. */
#define SESSION_SPEC_CLUSTER_MAX 16
struct session_spec_cluster {
	const char *session;          /* the main's id: names the session's network */
	const char *host;             /* "main1", "sub1"...: its hostname on that network */
	const char *mode;             /* "single-node" or "multi-node" */
	const char *hosts;            /* every host, main1 first, comma-separated */
	int64_t size, rank;           /* containers; its place, main1 0 */
	const char *ssh_key;          /* the session's OpenSSH private key (Ed25519) */
	const char *ssh_pub;          /* its public key line, "ssh-ed25519 BASE64 COMMENT" */
};

/* SSH into the session (docs/user-guide.md, "Working from your own
 * machine"): the session's key pair, its sshd's host key (a cluster
 * session's containers also log in to each other with it), and the
 * owner's public keys, for its authorized keys. key NULL: none (an older
 * manager, or a session made before). */
#define SESSION_SPEC_SSH_AUTH_MAX 16384
struct session_spec_ssh {
	const char *key;              /* OpenSSH private key (Ed25519) */
	const char *pub;              /* "ssh-ed25519 BASE64 COMMENT" */
	const char *authorized_keys;  /* the owner's public key lines; may be "" */
};

/* Strings and env are borrowed: from the JSON that session_spec_from_json
 * read, or from whatever the writer points them at. */
struct session_spec {
	const char *id, *name, *image;
	const char *owner;            /* the owner's email; may be NULL */
	const char *owner_id;         /* names the owner's network; NULL: none (an older manager) */
	const char *startup;          /* startup_command; may be NULL */
	const char *app_secret;       /* AGENT_APP_SECRET_HEX hex; NULL: no apps (an older manager) */
	bool root;                    /* run as root (the owner's policy allows it) */
	bool batch;                   /* ends with startup */
	int64_t cpu_m, mem, fgpu_m;   /* resources */
	json_t *env;                  /* object of strings; may be NULL */
	const struct session_spec_gpu *gpus;
	size_t n_gpus;
	const struct session_spec_mount *mounts;
	size_t n_mounts;
	struct session_spec_cluster cluster;
	struct session_spec_ssh ssh;
	/* Where session_spec_from_json keeps the lists it read (gpus and
	 * mounts point here then); a writer points them at its own. */
	struct session_spec_gpu gpu_buf[SESSION_SPEC_MAX_GPUS];
	struct session_spec_mount mount_buf[AGENT_MAX_FOLDER_MOUNTS];
};

/* The spec as JSON (new reference; NULL when out of memory):
 * {"id","name","owner","owner_id","root","image","resources":{"cpu_milli",
 * "mem","fgpu_milli"},"env":{...},"startup_command","app_secret",
 * "gpus":[{"index","uuid","fgpu_milli","memory_limit","sm_limit_percent"}],
 * "batch","mounts":[{"source","target","readonly"}]}. env is {} when NULL,
 * startup_command null when NULL; owner, owner_id and app_secret are left
 * out when NULL, batch when false, mounts when there are none, a device's
 * sm_limit_percent when 0: what an older agent reads as before. A cluster
 * session's container adds "cluster":{"session","host","mode","hosts",
 * "size","rank","ssh_key","ssh_pub"}; a session with SSH keys
 * "ssh":{"key","pub","authorized_keys"}. */
json_t *session_spec_to_json(const struct session_spec *spec);

/* What the reading agent checks against its own node while it reads a
 * spec, in the order the checks have always run. */
struct session_spec_node {
	const char *id;               /* the node, for messages */
	int n_gpus;                   /* its devices */
	/* The memory of the node's device uuid (may be NULL); -1 when the
	 * node has no such device. */
	int64_t (*device_memory)(void *ctx, const char *uuid);
	/* Whether a folder mount's source may be bound on this node
	 * (0, else the error in err). */
	int (*mount_source)(void *ctx, const char *source, struct terr *err);
	void *ctx;
};

/* Reads spec (borrowed; out borrows from it) into *out and checks it:
 * the manager validated the request the spec comes from, but the agent
 * still checks what it turns into paths, limits and buffers, since a spec
 * can also come from any holder of the cluster secret or an older
 * manager. node NULL: nothing is checked against a node (the devices'
 * memory limits only against 1 byte; no more than SESSION_SPEC_MAX_GPUS
 * devices). -EINVAL (err's code may say more) with the reason in err. */
int session_spec_from_json(json_t *spec, const struct session_spec_node *node, struct session_spec *out,
			   struct terr *err);

#endif
