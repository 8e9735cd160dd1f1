/* Image recipes (docs/images.md, "Recipes"): the text files under images/
 * that say which Debian suite and packages an image is made of, and the
 * labels it carries.
 *
 *   # comment
 *   name     = tessera/python-ml
 *   tag      = 3.11-torch1.13
 *   suite    = bookworm
 *   packages = python3 python3-torch
 *       python3-notebook              <- an indented line continues the value
 *   env.LANG = C.UTF-8
 *   run      = ln -s /usr/bin/python3 /usr/local/bin/python
 *
 * Keys are [A-Za-z0-9_.-]+ at the start of a line; `env.NAME`, `label.KEY`,
 * `run`, `debconf` and `site-file` may appear more than once (every other
 * key once). Errors name
 * the file and the line: "images/x.recipe:7: unknown key 'pakages'". */
#ifndef TESSERA_IMAGEBUILD_RECIPE_H
#define TESSERA_IMAGEBUILD_RECIPE_H

#include <stddef.h>

#include "common/err.h"

/* Bumped when the builder changes what it makes of the same recipe (the
 * user, the cleaning, the image config), so that existing images are
 * rebuilt: it is part of every recipe's hash. 2: /etc/pip.conf and
 * /usr/local given to the user work (pip for the session user). */
#define RECIPE_BUILD_VERSION 2

#define RECIPE_HASH_HEX 64

struct recipe_pair {
	char *key;
	char *value;
	int line;
};

struct recipe {
	char *path;              /* as given to recipe_parse, for messages */
	/* Single-valued keys; NULL when the recipe leaves them out (then the
	 * defaults of recipe_fill_defaults apply). */
	char *name;              /* "tessera/python-ml" */
	char *tag;               /* "3.11-torch1.13" */
	char *title;             /* "Python ML" (tessera.title) */
	char *family;            /* default: the name's last component */
	char *suite;             /* Debian suite: bookworm, trixie, ... */
	char *distro;            /* ai.backend.base-distro; default from suite */
	char *runtime_type;      /* ai.backend.runtime-type */
	char *runtime_path;      /* ai.backend.runtime-path */
	char *min_cpu;           /* ai.backend.resource.min.cpu, validated */
	char *min_mem;           /* ai.backend.resource.min.mem, validated */
	char *min_cuda_shares;   /* ai.backend.resource.min.cuda.shares */
	char *service_ports;     /* ai.backend.service-ports, validated */
	char *cmd;               /* the image's CMD, words split on spaces */
	char *cuda;              /* "12.4": the tessera.cuda label; NULL: none */
	/* Lists. */
	char **packages;         /* Debian package names, maybe "=VERSION" */
	size_t n_packages;
	struct recipe_pair *frameworks;   /* display name -> Debian package */
	size_t n_frameworks;
	struct recipe_pair *env;          /* NAME -> value, in recipe order */
	size_t n_env;
	struct recipe_pair *labels;       /* extra labels, KEY -> value */
	size_t n_labels;
	struct recipe_pair *run;          /* shell steps; key is NULL */
	size_t n_run;
	/* Archive components of the image's sources.list and of the build,
	 * in Debian's order (main, contrib, non-free, non-free-firmware);
	 * "main" alone when the recipe has no `components`. */
	char **components;
	size_t n_components;
	/* debconf-set-selections lines: key is "OWNER QUESTION" (the
	 * question's identity, for the duplicate check), value the whole line
	 * "OWNER QUESTION TYPE VALUE" with single spaces between the first
	 * four fields. */
	struct recipe_pair *debconf;
	size_t n_debconf;
	/* host-provides: NAME -> VERSION, what the node's driver mount gives
	 * a session (the builder's tessera-host-driver package provides them). */
	struct recipe_pair *host_provides;
	size_t n_host_provides;
	/* site-file: FILENAME -> sha256 (64 lower-case hex digits), value
	 * NULL when the recipe gives none. */
	struct recipe_pair *site_files;
	size_t n_site_files;
	/* pip requirements, as written ("tensorflow==2.20.*"). */
	char **pip;
	size_t n_pip;
	char hash[RECIPE_HASH_HEX + 1];   /* sha256 of the canonical content */
};

/* Parses text (len bytes, need not be NUL-terminated) into out (release
 * with recipe_free); path names the recipe in errors ("PATH:LINE: ...").
 * Checks every key and value, that name, tag, suite and packages are
 * present, and fills the defaults and the hash. On failure out holds
 * nothing to free. */
int recipe_parse(const char *text, size_t len, const char *path,
		 struct recipe *out, struct terr *err);
/* Reads and parses the file at path. */
int recipe_load(const char *path, struct recipe *out, struct terr *err);
void recipe_free(struct recipe *r);

/* "name:tag" into buf; -ENAMETOOLONG when it does not fit. */
int recipe_ref(const struct recipe *r, char *buf, size_t n);

/* The canonical form the hash is taken of: one "key=value" line per item
 * in a fixed order, comments and layout gone. malloc'd; NULL when out of
 * memory. */
char *recipe_canonical(const struct recipe *r);

/* The distribution name of a pip requirement ("Foo_Bar[x]>=1" -> "foo-bar"),
 * normalized as PEP 503 compares names; "" when it is no requirement the
 * recipe parser takes. Writes at most n bytes, always NUL-terminated. */
void recipe_pip_name(const char *requirement, char *buf, size_t n);

/* Debian's version of a suite ("bookworm" -> "12"); NULL when unknown. */
const char *recipe_suite_version(const char *suite);

/* The upstream part of a Debian package version, as the labels show it:
 * epoch, Debian revision and repack suffixes dropped ("1:1.24.2-1+deb12u1"
 * -> "1.24.2", "1.13.1+dfsg-4" -> "1.13.1", "3.11.2-1+b1" -> "3.11.2").
 * Writes at most n bytes, always NUL-terminated. */
void recipe_upstream_version(const char *debian_version, char *buf, size_t n);

#endif
