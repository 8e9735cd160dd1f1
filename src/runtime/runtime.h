/* Container runtimes as an ops table (docs/architecture.md, "Ops tables").
 * The agent only ever talks to a runtime through this interface; the one
 * implementation today is the Docker Engine API (runtime/docker.c). */
#ifndef TESSERA_RUNTIME_RUNTIME_H
#define TESSERA_RUNTIME_RUNTIME_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "common/err.h"
#include "common/pump.h"

#define RT_ID_MAX 80

struct runtime;   /* opaque, per implementation */

struct rt_label {
	const char *key;
	const char *value;
};

struct rt_mount {
	const char *source;   /* host path */
	const char *target;   /* path in the container */
	bool readonly;
};

struct rt_container_spec {
	const char *name;                 /* container name, unique on the host */
	const char *image;                /* image reference */
	const char *const *entrypoint;    /* argv, NULL-terminated; overrides the image's */
	const char *const *cmd;           /* argv, NULL-terminated, may be NULL: empties the image's CMD */
	const char *const *env;           /* "K=V", NULL-terminated, may be NULL */
	const struct rt_label *labels;
	size_t n_labels;
	const struct rt_mount *mounts;
	size_t n_mounts;
	const char *const *devices;       /* host device paths, NULL-terminated, may be NULL */
	const char *hostname;             /* may be NULL */
	int64_t nano_cpus;                /* 0 = unlimited */
	int64_t memory_bytes;             /* 0 = unlimited; swap is set equal (no swap) */
	int64_t pids_limit;               /* 0 = unlimited */
	/* The container's log (its stdout and stderr as Docker keeps them):
	 * at most log_max_size bytes in all, in log_max_files files that
	 * rotate (the oldest is dropped); 0 = Docker's default, unbounded. */
	int64_t log_max_size;
	int log_max_files;                /* >= 2 when log_max_size is set */
	/* The network the container is attached to, and only that one
	 * (HostConfig.NetworkMode); NULL: the runtime's default bridge. */
	const char *network;
	/* A name the other containers on that network find it by (Docker's
	 * DNS), besides its own; may be NULL. */
	const char *network_alias;
	/* The id of a running container whose network namespace the new one
	 * joins (HostConfig.NetworkMode "container:ID": its address, its
	 * network, its DNS; Docker then takes no hostname, network, alias
	 * or published port of the new one). NULL: network above. */
	const char *netns_of;
	/* One TCP port of the container published on the host, and only
	 * that one (docs/apps.md: the runner's app port): on the address
	 * publish_host (an IP address) at a host port the runtime picks.
	 * publish_port 0: nothing is published. */
	int publish_port;
	const char *publish_host;
	/* true: the runtime's default syscall filter (Docker's seccomp
	 * profile) instead of Tessera's, which also refuses the ioctls that
	 * make btrfs subvolumes and snapshots (docs/security.md, "System
	 * calls"). */
	bool seccomp_default;
	/* The other security defaults are applied by the runtime, not chosen
	 * here: no-new-privileges and a dropped capability set
	 * (docs/admin.md). */
};

struct rt_container_info {
	char id[RT_ID_MAX];
	char name[128];
	char image[256];
	char state[32];        /* "created", "running", "exited", "dead", ... */
	bool running;
	bool oom_killed;
	int exit_code;
	int pid;               /* of PID 1 on the host, 0 when not running */
	char error[256];       /* runtime's own error text, may be empty */
	char session_id[64];   /* value of label tessera.session, may be empty */
	char agent_id[64];     /* value of label tessera.agent, may be empty */
	char cluster_id[64];   /* value of label tessera.cluster, may be empty */
	char run_as[32];       /* value of label tessera.run_as, may be empty */
	/* value of label tessera.sandbox: the container whose network
	 * namespace it joined (rt_container_spec.netns_of), may be empty */
	char sandbox[RT_ID_MAX];
	char network[128];     /* the network it was created on (NetworkMode) */
	/* Its first published TCP port, while it runs: the container's port
	 * and where the host has it (host address as the runtime reports
	 * it, "0.0.0.0" for all); 0 and "" when none. A container that
	 * joined another's namespace has that one's, which its label
	 * tessera.sandbox_published carries ("PRIVATE=HOST:PORT"). */
	int published_private;
	char published_host[64];
	int published_port;
	/* Its address on its network (the one NetworkMode names), while it
	 * runs: what the host reaches it at over the bridge, without the
	 * published port's userland proxy; "" when it has none. A container
	 * that joined another's namespace has that one's, which its label
	 * tessera.sandbox_ip carries (Docker reports none for it). */
	char ip[64];
};

/* A network of the runtime's own (a Docker bridge) that sessions are put
 * on. */
struct rt_network_spec {
	const char *name;                 /* unique on the host */
	/* NULL: a bridge on this host; "overlay": one network across the
	 * hosts of Docker's swarm mode, which containers join at create
	 * (attachable). */
	const char *driver;
	const struct rt_label *labels;
	size_t n_labels;
};

/* An image as a start needs it (runtime_ops.image_config). */
struct rt_image_config {
	char id[RT_ID_MAX];    /* "sha256:..." */
	char **env;            /* "K=V", n_env of them */
	size_t n_env;
	char **labels;         /* "key=value", n_labels of them */
	size_t n_labels;
};

void rt_image_config_free(struct rt_image_config *c);

struct rt_exec_result {
	int exit_code;
	char *out;             /* stdout, NUL-terminated, owned (free) */
	size_t out_len;
	char *err;             /* stderr, NUL-terminated, owned (free) */
	size_t err_len;
};

struct rt_event {
	bool image;            /* an image event: action is Docker's, the rest empty */
	bool network;          /* a network's "destroy": network names it, the rest empty */
	char network_name[128];
	char container_id[RT_ID_MAX];
	char action[32];       /* "die", "oom", "start", "destroy" */
	char session_id[64];   /* label tessera.session */
	char cluster_id[64];   /* label tessera.cluster, may be empty */
	char sandbox[RT_ID_MAX]; /* label tessera.sandbox, may be empty */
	int exit_code;         /* for "die"; -1 when unknown */
};

typedef int (*rt_event_cb)(const struct rt_event *ev, void *ud);

/* Progress of an image pull or push: bytes transferred and their known
 * total, summed over the image's layers (total 0 while unknown). Called
 * from the calling thread, as often as the runtime reports. */
typedef void (*rt_progress_cb)(void *ud, int64_t current, int64_t total);

struct runtime_ops {
	const char *name;
	/* endpoint: e.g. "unix:///var/run/docker.sock" or NULL for the default. */
	int (*open)(struct runtime **out, const char *endpoint, struct terr *err);
	void (*close)(struct runtime *rt);
	/* Negotiated API version and server version ("1.41", "20.10.24"). */
	int (*version)(struct runtime *rt, char *api, size_t api_n,
		       char *server, size_t server_n, struct terr *err);
	/* 0 and *exists set; an unreachable runtime is an error. */
	int (*image_exists)(struct runtime *rt, const char *ref, bool *exists,
			    struct terr *err);
	/* The image's configured environment ("K=V" strings; caller frees each
	 * and the array); -ENOENT when the image does not exist. */
	int (*image_env)(struct runtime *rt, const char *ref, char ***env, size_t *n,
			 struct terr *err);
	/* The image's labels as "key=value" strings, the same way (may be
	 * NULL in a runtime without labels). */
	int (*image_labels)(struct runtime *rt, const char *ref, char ***labels, size_t *n,
			    struct terr *err);
	/* The image's id, environment and labels, from one look at the
	 * image (image_env and image_labels each look once); -ENOENT when it
	 * does not exist. Optional (NULL: the agent asks those two). The
	 * caller frees with rt_image_config_free. */
	int (*image_config)(struct runtime *rt, const char *ref, struct rt_image_config *out,
			    struct terr *err);
	/* Lists the images that have a reference: *images (new ref) is
	 * [{"id","tags":["repo:tag",...],"digests":["repo@sha256:...",...],
	 * "size","labels":{...}}], dangling
	 * references ("<none>:<none>") left out, and images left with none. */
	int (*image_list)(struct runtime *rt, json_t **images, struct terr *err);
	int (*create)(struct runtime *rt, const struct rt_container_spec *spec,
		      char id[RT_ID_MAX], struct terr *err);
	int (*start)(struct runtime *rt, const char *id, struct terr *err);
	/* Force-removes (kills) the container; -ENOENT when it does not exist. */
	int (*remove)(struct runtime *rt, const char *id, struct terr *err);
	/* SIGKILLs the container and waits until the runtime has seen it
	 * stop, for at most timeout_ms: -ETIMEDOUT past it (the runtime may
	 * still be at it), -ENOENT when it does not exist, 0 also when it was
	 * not running. Optional (NULL: removal kills as it removes). */
	int (*kill)(struct runtime *rt, const char *id, long timeout_ms, struct terr *err);
	/* -ENOENT when it does not exist. */
	int (*inspect)(struct runtime *rt, const char *id,
		       struct rt_container_info *out, struct terr *err);
	/* Containers (running or not) carrying label `key=value`; *out is a
	 * malloc'd array the caller frees. */
	int (*list)(struct runtime *rt, const char *label_key,
		    const char *label_value, struct rt_container_info **out,
		    size_t *n, struct terr *err);
	/* Starts argv in the container; *out streams its output in the
	 * frames of common/frames.h: stdout and stderr apart, byte for byte,
	 * then the exit code (or an error frame when it cannot be known).
	 * user ("UID:GID") and workdir: NULL for the container's own.
	 * What fails before the command runs (no such container: -ENOENT,
	 * not running) is returned here. The caller pump_closes *out. */
	int (*exec_stream)(struct runtime *rt, const char *id, const char *const *argv,
			   const char *const *env, const char *user, const char *workdir,
			   struct pump **out, struct terr *err);
	/* The container's log as a stream of bytes, stdout and stderr
	 * interleaved as written: the last `tail` lines (0 = all), and with
	 * follow what it writes afterwards, until it ends. With tail 0, when
	 * rotation has dropped the log's start, the stream begins with a line
	 * saying so (RT_LOGS_DROPPED). -ENOENT when there is no such container.
	 * The caller pump_closes *out. */
	int (*logs_stream)(struct runtime *rt, const char *id, int tail, bool follow,
			   struct pump **out, struct terr *err);
	/* Commits the container's filesystem (not its mounts) to a new image
	 * reference "repo:tag". labels are added to those the container
	 * carries (its image's and its own); env (may be NULL: the
	 * container's) replaces the variables of the same names. */
	int (*commit)(struct runtime *rt, const char *id, const char *ref,
		      const struct rt_label *labels, size_t n_labels,
		      const char *const *env, struct terr *err);
	/* Gives image src (a reference or id) the further reference dst. */
	int (*tag)(struct runtime *rt, const char *src, const char *dst, struct terr *err);
	/* Removes one reference of an image (the image itself goes with its
	 * last); -ENOENT when there is none. */
	int (*image_remove)(struct runtime *rt, const char *ref, struct terr *err);
	/* Pushes "registry/repo:tag" to its registry, or pulls it from there;
	 * cb (may be NULL) follows the transfer. A failure reported in the
	 * stream (the registry's message) is an error like a refused call:
	 * -ENOENT when the registry does not have the image. */
	int (*push)(struct runtime *rt, const char *ref, rt_progress_cb cb, void *ud,
		    struct terr *err);
	int (*pull)(struct runtime *rt, const char *ref, rt_progress_cb cb, void *ud,
		    struct terr *err);
	/* Streams container events for containers with label key=value,
	 * calling cb for each; blocks until another thread sets *stop (read
	 * at least once a second), cb returns non-zero, or the stream fails. */
	int (*watch)(struct runtime *rt, const char *label_key,
		     const char *label_value, rt_event_cb cb, void *ud,
		     const atomic_bool *stop, struct terr *err);
	/* The same for every image's events (rt_event.image set, action
	 * Docker's: pull, tag, untag, delete, import, load), and every
	 * network's removal (rt_event.network set, action "destroy",
	 * network_name the network's): what a cache of images and networks
	 * must forget. */
	int (*watch_images)(struct runtime *rt, rt_event_cb cb, void *ud,
			    const atomic_bool *stop, struct terr *err);
	/* Networks, optional (NULL: the runtime has none of its own, and
	 * containers stay on its default network). network_ensure makes the
	 * network unless one of that name exists; an existing one must carry
	 * every label of the spec with the same value (else -EEXIST: a name
	 * taken by something else is not silently shared). */
	int (*network_ensure)(struct runtime *rt, const struct rt_network_spec *spec,
			      struct terr *err);
	/* Removes the network; -ENOENT when it does not exist, -EBUSY while
	 * running containers are attached to it. */
	int (*network_remove)(struct runtime *rt, const char *name, struct terr *err);
	/* The names of the networks carrying label key=value, or label key
	 * whatever its value when value is NULL (*names and each name
	 * malloc'd, the caller frees). Optional. */
	int (*network_list)(struct runtime *rt, const char *label_key, const char *label_value, char ***names,
			    size_t *n, struct terr *err);
	/* The node's network device of bridge network name into buf (n >=
	 * 16): Docker's "br-" and 12 characters of its id, or the name its
	 * options set; "" for a network of another driver. Optional. */
	int (*network_bridge)(struct runtime *rt, const char *name, char *buf, size_t n, struct terr *err);
	/* Makes image ref ("repo:tag") from a tar of its one layer (len
	 * bytes), as `docker import` does, with the label (may be NULL).
	 * Optional. */
	int (*image_import)(struct runtime *rt, const char *ref, const struct rt_label *label, const void *tar,
			    size_t len, struct terr *err);
};

extern const struct runtime_ops runtime_docker_ops;

/* The first words of the line a log stream starts with when rotation
 * dropped its start. */
#define RT_LOGS_DROPPED "[tessera] earlier output was dropped"

/* Reads an exec stream (exec_stream's framed output) to its end into out:
 * at most max_output bytes of each of stdout and stderr are kept (the
 * rest is read and dropped). An error frame or a broken stream is an
 * error. For callers that want the output whole (tests, short internal
 * commands); the stream stays the caller's to close. */
int rt_exec_collect(struct pump *p, size_t max_output, struct rt_exec_result *out, struct terr *err);
void rt_exec_result_free(struct rt_exec_result *r);

#endif
