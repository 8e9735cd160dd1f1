/* The cluster registry (docs/images.md, "The cluster registry"): where
 * agents push the images sessions are committed into and pull those a
 * session needs but its node lacks. Two parts: the child process that
 * `tessera server` runs by default (Debian's docker-registry, supervised:
 * restarted when it dies, stopped at exit), and a small client of the
 * registry's HTTP API (its tags list) for the manager's placement check. */
#ifndef TESSERA_REGISTRY_REGISTRY_H
#define TESSERA_REGISTRY_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>

#include "common/err.h"

/* The program run when none is given (Debian package docker-registry). */
#define REGISTRY_DEFAULT_BINARY "/usr/bin/docker-registry"

/* A registry's address as configured ("http://reg.example:5000/",
 * "reg.example:5000", "https://..."): host:port as image names carry it
 * into host (e.g. "reg.example:5000"), and the base URL of its HTTP API
 * into base ("http://reg.example:5000"; plain http when no scheme is
 * given). EINVAL for anything else (a path, spaces, an empty host). */
int registry_parse_url(const char *url, char *host, size_t host_n, char *base, size_t base_n,
		       struct terr *err);

/* Whether the registry at base holds ref ("repo[:tag]", tag "latest" when
 * none): GET /v2/<repo>/tags/list. A repository it does not know is
 * *has = false, not an error; an unreachable registry is. */
int registry_has_image(const char *base, const char *ref, bool *has, struct terr *err);

struct registry_proc;

/* Starts the registry as a child: its configuration and storage under
 * dir (created), listening on 127.0.0.1 on a free port, its output in
 * dir/registry.log. binary: NULL for REGISTRY_DEFAULT_BINARY. Waits until
 * it answers (GET /v2/). A thread restarts it (on the same port) when it
 * ends by itself. *out owned by the caller: registry_proc_stop. */
int registry_proc_start(const char *dir, const char *binary, struct registry_proc **out,
			struct terr *err);
/* "127.0.0.1:PORT" (borrowed, lives as long as p). */
const char *registry_proc_host(const struct registry_proc *p);
/* Stops the child (SIGTERM, then SIGKILL after 5 s), the thread, frees p.
 * NULL is fine. */
void registry_proc_stop(struct registry_proc *p);

#endif
