/* SSH between the containers of a cluster session (docs/user-guide.md,
 * "Distributed training"): MPI's launchers and scripts reach the other
 * containers with `ssh sub1 CMD`. The session's key pair comes from the
 * agent in CLUSTER_SSH_DIR (root's, read before the runner drops to the
 * work user); the runner gives it to the work user under ~/.ssh/tessera,
 * with an sshd configuration, a client configuration for the session's
 * hosts and the container's environment for logins, and starts the
 * image's own sshd as the work user on CLUSTER_SSH_PORT. */
#ifndef TESSERA_RUNNER_CLUSTER_H
#define TESSERA_RUNNER_CLUSTER_H

#include <signal.h>
#include <stdbool.h>
#include <sys/types.h>

#define CLUSTER_SSH_DIR "/run/tessera/ssh"
#define CLUSTER_SSH_PORT 2200
#define CLUSTER_SSHD "/usr/sbin/sshd"
/* Where the runner writes sshd's configuration, under the home. */
#define CLUSTER_SSHD_CONFIG ".ssh/tessera/sshd_config"

struct cluster_ssh {
	bool have;
	char key[4096];   /* the private key, OpenSSH's format */
	char pub[1024];   /* "ssh-ed25519 BASE64 COMMENT" */
	char owner_keys[16384 + 1];  /* the owner's public keys (authorized_keys); may be "" */
};

/* Reads the key pair from dir (as root, before the drop). No dir: not a
 * cluster session (k->have false). A file that cannot be read is said
 * on stderr and leaves k->have false. */
void cluster_ssh_read(const char *dir, struct cluster_ssh *k);

/* As the session's user, in home: writes ~/.ssh/tessera/{id_ed25519,
 * authorized_keys (the session's key and the owner's), sshd_config} and
 * ~/.ssh/environment. In a cluster session (hosts: "main1,sub1,...",
 * TESSERA_CLUSTER_HOSTS) also known_hosts and ~/.ssh/config when there
 * is none, then starts sshd from the image (CLUSTER_SSHD) in its own
 * process group with orig_mask, returning its pid. Otherwise (hosts "")
 * sshd listens on 127.0.0.1 only and starts as the `sshd` app, on first
 * use (appdef_builtin_sshd): returns 0. -1 (said on stderr) when a file
 * cannot be written or, in a cluster, there is no sshd. Wipes k's
 * private key. */
pid_t cluster_ssh_start(struct cluster_ssh *k, const char *home, const char *hosts, bool root,
			const sigset_t *orig_mask);

/* The text of the client configuration and the known hosts line for
 * hosts (the pure parts, unit-tested): into buf, -1 when it does not fit. */
int cluster_ssh_client_config(const char *hosts, const char *keyfile, const char *known, char *buf, size_t n);
int cluster_ssh_known_hosts(const char *hosts, const char *pub, char *buf, size_t n);

#endif
