/* Building an image from a recipe (docs/images.md, "How building works"):
 * debootstrap of the recipe's Debian suite, apt-get install of its
 * packages in a chroot, the user `work`, the recipe's run steps, cleaning,
 * then `tar | docker import` with the labels. Needs root and the docker
 * CLI; the caller is the `tessera image build` verb. */
#ifndef TESSERA_IMAGEBUILD_BUILD_H
#define TESSERA_IMAGEBUILD_BUILD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "imagebuild/recipe.h"

/* The stages, in order: one list for the enum, the names the progress
 * shows, and docs/images.md. */
#define IMG_STAGES(X) \
	X(BOOTSTRAP, "bootstrap") \
	X(PACKAGES, "packages") \
	X(USER, "user") \
	X(PIP, "pip") \
	X(RUN, "run") \
	X(CLEAN, "clean") \
	X(IMPORT, "import")

#define IMG_STAGE_ENUM(id, name) IMG_STAGE_##id,
enum img_stage { IMG_STAGES(IMG_STAGE_ENUM) IMG_STAGE_COUNT };
#undef IMG_STAGE_ENUM

const char *img_stage_name(enum img_stage s);

struct img_progress {
	enum img_stage stage;
	/* Counts of the stage, 0 of 0 when it has none: packages set up of
	 * those apt plans to install (packages), run steps (run), MB sent to
	 * Docker (import). */
	long done, total;
	/* While packages download: downloaded of total; else 0 of 0. */
	long fetched, to_fetch;
	/* The latest thing happening ("Configuring libc6", a package name);
	 * borrowed for the call. May be empty. */
	const char *what;
	/* A fact about the stage worth a line of its own, set once when it
	 * becomes known ("kept base of 2026-11-29 10:12 UTC", or a warning
	 * starting "warning: "); borrowed for the call; NULL or "" when none. */
	const char *note;
};

typedef void (*img_progress_fn)(const struct img_progress *p, void *ud);

#define IMG_DEFAULT_CACHE_DIR "/var/cache/tessera/images"
#define IMG_DEFAULT_MIRROR "http://deb.debian.org/debian"
/* The images' configuration (docs/images.md, "images.conf"): pip_index,
 * npm_registry, mirror, security_mirror, cache_dir, base_max_age; the
 * flags of `tessera image build` win over it. */
#define IMG_DEFAULT_CONFIG "/etc/tessera/images.conf"
/* A kept base (docs/images.md, "The cache") older than this many days is
 * bootstrapped again. */
#define IMG_DEFAULT_BASE_MAX_AGE_DAYS 7
/* The most --base-max-age / base_max_age takes: ten years. */
#define IMG_MAX_BASE_MAX_AGE_DAYS 3650
/* Where a build's site files are seen in the chroot (read-only). */
#define IMG_SITE_MOUNT "/tmp/tessera-site"

struct img_build_opts {
	/* The Debian archive and its security archive; NULL: those apt uses
	 * on this machine (/etc/apt/sources.list*), else deb.debian.org.
	 * security_mirror "" leaves the security suite out. */
	const char *mirror;
	const char *security_mirror;
	/* Downloaded packages and the build's root filesystem live here;
	 * NULL: IMG_DEFAULT_CACHE_DIR. */
	const char *cache_dir;
	/* The site's Python package index (PEP 503 simple index, http:// or
	 * https://) for recipes with pip; NULL: none, such recipes cannot be
	 * built. */
	const char *pip_index;
	/* The site's npm registry (http:// or https://) for the run steps'
	 * npm, as npm_config_registry; NULL: npm's default
	 * (https://registry.npmjs.org). */
	const char *npm_registry;
	/* The images' configuration file, named where a message says where
	 * pip_index can be set; NULL: IMG_DEFAULT_CONFIG. */
	const char *config_path;
	/* Rebuild even when an image with the recipe's hash exists. */
	bool force;
	/* Bootstrap the suite again even when a kept base matches, and keep
	 * the new one in its place. */
	bool fresh_base;
	/* A kept base older than this many days is bootstrapped again; 0:
	 * IMG_DEFAULT_BASE_MAX_AGE_DAYS. */
	int base_max_age_days;
	/* Called from the building thread; may be NULL. */
	img_progress_fn progress;
	void *ud;
};

struct img_build_result {
	bool up_to_date;          /* nothing was built: the image has the hash */
	char ref[256];            /* "tessera/python:3.11" */
	char id[80];              /* Docker's image id, "sha256:..." */
	int64_t size;             /* bytes, as Docker reports it */
	char frameworks[512];     /* the tessera.frameworks label written */
	char log_path[512];       /* the full output of the build's commands */
	int64_t stage_ms[IMG_STAGE_COUNT];   /* time each stage took */
	/* How the root's base came to be, for the times line: "kept base of
	 * 2026-11-29 10:12 UTC", "bootstrapped, kept", "bootstrapped" (when
	 * it could not be kept). Empty when the build did not get so far. */
	char base_note[128];
	/* Nothing was built because the recipe cannot be built as configured:
	 * what it needs, a "needs ..." line each (img_recipe_needs). */
	bool unready;
	char needs[2048];
};

/* What r still needs before it can be built with o, one line per thing
 * ("needs a pip index for tensorflow==2.20.* mlflow: --pip-index URL or
 * pip_index in /etc/tessera/images.conf", "needs site file NAME: tessera
 * image build --site-file PATH"), '\n'-separated into buf ("" when it is
 * ready). Reads the site files of the cache (their sha256 where the recipe
 * gives one). Returns the number of lines. */
int img_recipe_needs(const struct recipe *r, const struct img_build_opts *o, char *buf, size_t n);

/* The cache's folder of site files: CACHE_DIR/site. */
void img_site_dir(const struct img_build_opts *o, char *buf, size_t n);

/* SHA-256 of a file, 64 lower-case hex digits. */
int img_sha256_file(const char *path, char hex[RECIPE_HASH_HEX + 1], struct terr *err);

/* Copies the file at path into the cache's site folder under its own
 * name (atomically: a copy, then a rename), checking its sha256 against
 * want (NULL: any). Fills dest with where it went and hex with its
 * sha256. */
int img_site_file_add(const struct img_build_opts *o, const char *path, const char *want,
		      char *dest, size_t dest_n, char hex[RECIPE_HASH_HEX + 1], struct terr *err);

/* The hash label of the image ref in the local Docker: 0 with *found
 * false when there is no such image, 0 with hash filled (empty when the
 * image has no such label), negative when Docker cannot be asked. */
int img_existing_hash(const char *ref, bool *found, char *hash, size_t n,
		      struct terr *err);

/* Builds r into the local Docker (or finds it up to date). A recipe that
 * is not ready (img_recipe_needs) fails with -EAGAIN, res->unready and
 * res->needs set, before anything is done. Needs root:
 * it moves the calling process into a mount namespace of its own (so
 * that the mounts of the build vanish with it, however it ends) and runs
 * debootstrap, chroot and docker. Single-threaded callers only. */
int img_build(const struct recipe *r, const struct img_build_opts *opts,
	      struct img_build_result *res, struct terr *err);

/* Reads one line of apt-get's output into p: "Inst" lines of a simulated
 * install count the total, "Need to get" and "Get:" the download (kB),
 * "Setting up" the packages done; what gets the package a line names.
 * Returns whether p or what changed in a way worth showing. */
bool img_apt_progress(struct img_progress *p, const char *line, char *what, size_t what_n);

/* Every label the image of r gets (the contract of docs/images.md,
 * "Labels"): Backend.AI's, Tessera's and the recipe's own; frameworks is
 * the tessera.frameworks value (NULL or "": left out). *out is a malloc'd
 * array of n pairs with malloc'd strings; the caller frees all. */
int img_recipe_labels(const struct recipe *r, const char *frameworks,
		      struct recipe_pair **out, size_t *n, struct terr *err);

/* The --trusted-host of pip for an index URL: its host[:port] when the
 * URL is plain http:// (pip refuses those hosts otherwise), false for
 * https:// and anything else. */
bool img_pip_trusted_host(const char *url, char *host, size_t n);

/* The Debian archive and security archive apt uses, read from the text of
 * a sources file: deb822 (.sources) when deb822, else one-line (.list).
 * Fills mirror / security (empty when the text names none). */
void img_mirrors_from_sources(const char *text, bool deb822, char *mirror, size_t mirror_n,
			      char *security, size_t security_n);

/* ---- the kept base (imagebuild/base.c) ----
 * After a debootstrap the root is kept as an archive in the cache, and a
 * later build of the same key extracts it instead of bootstrapping again
 * (docs/images.md, "The cache"). The key is what decides what debootstrap
 * makes: suite, variant, architecture and mirror. Components do not: the
 * build bootstraps `main` alone and the packages stage writes the recipe's
 * own sources.list over debootstrap's. */

#define IMG_BASE_VARIANT "minbase"
#define IMG_BASE_COMPONENTS "main"

/* The archive's file name for the key, "minbase-amd64-HEX12.tar.zst",
 * HEX12 the first 12 hex digits of the SHA-256 of the key's text
 * (img_base_key_text): the mirror is in it without making the name
 * unwieldy. -EINVAL for an empty or unsafe part (a variant or
 * architecture other than [a-z0-9-], a mirror with spaces or control
 * characters), -ENAMETOOLONG when n is too small. */
int img_base_name(const char *suite, const char *variant, const char *arch, const char *mirror,
		  char *buf, size_t n);

/* The key as text, one "field value" a line in a fixed order ("suite
 * bookworm\nvariant minbase\narch amd64\nmirror URL\n"): what
 * img_base_name hashes, kept beside the archive (NAME.key) for people. */
int img_base_key_text(const char *suite, const char *variant, const char *arch, const char *mirror,
		      char *buf, size_t n);

enum img_base_use {
	IMG_BASE_USE,       /* extract the kept base */
	IMG_BASE_NONE,      /* none kept: bootstrap and keep */
	IMG_BASE_OLD,       /* older than the limit: bootstrap and keep anew */
	IMG_BASE_FUTURE,    /* dated after now (a clock set back): bootstrap and keep anew */
	IMG_BASE_FRESH,     /* --fresh-base: bootstrap and keep anew */
};

/* Whether a build uses a kept base: exists and its mtime, now, the age
 * limit in days (0: IMG_DEFAULT_BASE_MAX_AGE_DAYS) and --fresh-base. A
 * base exactly max_age_days old is still used. */
enum img_base_use img_base_decide(bool exists, int64_t mtime, int64_t now, int max_age_days, bool fresh);

/* Why a base is not used, for the log and the progress ("none kept",
 * "older than 7 days", ...); NULL for IMG_BASE_USE. */
const char *img_base_reason(enum img_base_use u);

/* "2026-11-29 10:12 UTC" of t (seconds since the epoch). */
void img_base_date(int64_t t, char *buf, size_t n);

/* Reads a --base-max-age / base_max_age value: whole days, 1 to
 * IMG_MAX_BASE_MAX_AGE_DAYS, digits only. -EINVAL otherwise. */
int img_base_parse_max_age(const char *s, int *days);

#endif
