/* Image labels and image references: pure parsers, no state, no I/O.
 *
 * Labels (docs/images.md, "Labels"): Backend.AI's (ai.backend.*), read so
 * that its images work unchanged, and Tessera's (tessera.*). Parsing never
 * fails: a label that cannot be read is named in `warning` and, when it is
 * a resource minimum, the image gets no minimum at all (a half-read
 * minimum would be wrong in a way nobody sees), but it stays listed.
 *
 * References: [host[:port]/]path[:tag][@sha256:hex], Docker's grammar,
 * parsed into their parts and put into one canonical form, the one
 * `docker images` shows ("busybox:latest", not "docker.io/library/busybox"),
 * so that what users type and what nodes report compare equal. */
#ifndef TESSERA_IMAGES_LABELS_H
#define TESSERA_IMAGES_LABELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

/* ---- labels ---- */

#define IMG_LABEL_KERNELSPEC "ai.backend.kernelspec"
#define IMG_LABEL_FEATURES "ai.backend.features"
#define IMG_LABEL_BASE_DISTRO "ai.backend.base-distro"
#define IMG_LABEL_RUNTIME_TYPE "ai.backend.runtime-type"
#define IMG_LABEL_RUNTIME_PATH "ai.backend.runtime-path"
#define IMG_LABEL_MIN_CPU "ai.backend.resource.min.cpu"
#define IMG_LABEL_MIN_MEM "ai.backend.resource.min.mem"
#define IMG_LABEL_MIN_FGPU "ai.backend.resource.min.cuda.shares"
#define IMG_LABEL_SERVICE_PORTS "ai.backend.service-ports"
#define IMG_LABEL_FAMILY "tessera.family"
#define IMG_LABEL_TITLE "tessera.title"
#define IMG_LABEL_FRAMEWORKS "tessera.frameworks"
#define IMG_LABEL_CUDA "tessera.cuda"
#define IMG_LABEL_RECIPE_HASH "tessera.recipe.hash"
#define IMG_LABEL_OWNER "tessera.owner"
#define IMG_LABEL_SOURCE_SESSION "tessera.source.session"
#define IMG_LABEL_SOURCE_IMAGE "tessera.source.image"
#define IMG_LABEL_COMMITTED "tessera.committed"

#define IMG_MAX_FRAMEWORKS 16
#define IMG_MAX_SERVICE_PORTS 16
#define IMG_MAX_PORTS_PER_SERVICE 8

struct img_label {
	const char *key;
	const char *value;
};

struct img_framework {
	char name[64];
	char version[64];
};

/* Service protocols as Backend.AI names them. */
#define IMG_PROTOCOLS(X) X(http) X(tcp) X(preopen) X(pty) X(internal)

struct img_service_port {
	char name[64];
	char protocol[16];
	int ports[IMG_MAX_PORTS_PER_SERVICE];
	int n_ports;
};

struct img_meta {
	bool kernelspec;                 /* ai.backend.kernelspec present */
	bool hidden;                     /* "private" among ai.backend.features */
	char features[256];
	char base_distro[64];
	char runtime_type[64];
	char runtime_path[256];
	/* The minimum a session of the image needs; has_min false: none. */
	bool has_min;
	int64_t min_cpu_m, min_mem, min_fgpu_m;
	char family[128];                /* "" when unlabelled: the caller names it */
	char title[128];
	struct img_framework frameworks[IMG_MAX_FRAMEWORKS];
	size_t n_frameworks;
	char cuda[16];                   /* tessera.cuda, "12.4"; "" when none or unreadable */
	struct img_service_port ports[IMG_MAX_SERVICE_PORTS];
	size_t n_ports;
	char recipe_hash[80];
	char owner[64];                  /* tessera.owner: a user id; "" public */
	char source_session[64];
	char source_image[256];
	char committed[40];
	char warning[512];               /* what was not understood; "" when all was */
};

/* Reads the labels (borrowed; keys and values may be anything) into *out,
 * which it clears first. Never fails; see the header comment. */
void img_labels_parse(const struct img_label *labels, size_t n, struct img_meta *out);

/* Parses one ai.backend.service-ports value ("name:proto:port" or
 * "name:proto:[p1,p2]", comma-separated) with Backend.AI's rules: known
 * protocol, ports 1025 to 65535 but not those Backend.AI keeps for its own
 * (2000-2003, 2200, 7681), names and ports each used once. On error
 * (EINVAL) out holds nothing. */
int img_service_ports_parse(const char *value, struct img_service_port *out, size_t max,
			    size_t *n, struct terr *err);

/* Whether a session's runner serves this entry as an app (docs/apps.md):
 * protocol http, tcp or preopen, a name other than "terminal" (the
 * runner's own), its first port not the runner's 7611. Backend.AI's `pty`
 * and `internal` entries are not apps here. */
bool img_service_port_is_app(const struct img_service_port *p);

/* The runner's --apps value for the entries that are apps ("name:proto:
 * port", the first port of each, comma-separated) into a new string
 * (*out, caller frees; NULL when none is an app). -ENOMEM. */
int img_service_ports_runner_spec(const struct img_service_port *ports, size_t n, char **out,
				  struct terr *err);

/* ---- references ---- */

struct img_ref {
	char registry[256];   /* "" for Docker Hub; "host", "host:port", "localhost" */
	char path[256];       /* "library/busybox" stays "busybox" for Docker Hub */
	char tag[129];        /* "" when none was given */
	char digest[72];      /* "sha256:..." or "" */
};

/* Parses and checks a reference: [host[:port]/]path[:tag][@sha256:hex],
 * lower-case path components of [a-z0-9._-] with Docker's separators, tag
 * [A-Za-z0-9_.-]{1,128} not starting with '.' or '-', 255 characters at
 * most. EINVAL with a message naming what is wrong. out may be NULL. */
int img_ref_parse(const char *s, struct img_ref *out, struct terr *err);

/* The canonical text of a parsed reference into buf (n bytes): the
 * registry only when not Docker Hub, "library/" dropped for Docker Hub,
 * ":latest" when neither tag nor digest was given. "busybox" and
 * "docker.io/library/busybox:latest" both give "busybox:latest". */
void img_ref_format(const struct img_ref *r, char *buf, size_t n);

/* The repository without its tag or digest ("tessera/python-ml"). */
void img_ref_name(const struct img_ref *r, char *buf, size_t n);

/* img_ref_parse then img_ref_format. */
int img_ref_canonical(const char *s, char *buf, size_t n, struct terr *err);

#endif
