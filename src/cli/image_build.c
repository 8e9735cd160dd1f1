/* `tessera image build RECIPE...`: images from recipes, on this machine
 * (imagebuild/build.h). Progress goes to stderr, one line updated in place on
 * a terminal, a line per step otherwise (logs, make); the result of each
 * recipe goes to stdout. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/client.h"
#include "common/conf.h"
#include "common/units.h"
#include "imagebuild/build.h"
#include "imagebuild/recipe.h"

#define IMAGE_BUILD_USAGE \
	"usage: tessera image build [options] RECIPE...\n" \
	"       tessera image build --site-file PATH...\n" \
	"\n" \
	"Builds each recipe (e.g. images/python/3.11.recipe) into this machine's\n" \
	"Docker: debootstrap of its Debian suite, its packages installed with apt,\n" \
	"the user work (uid 1000), labels (docs/images.md). Needs root. An image\n" \
	"whose tessera.recipe.hash label matches the recipe is up to date and not\n" \
	"built again.\n" \
	"  --force                 build even when up to date\n" \
	"  --check                 only read the recipes: print image, hash, state and\n" \
	"                          what each still needs to be built\n" \
	"  --skip-unready          skip, with what it needs, a recipe that cannot be\n" \
	"                          built as configured (a pip index, a site file)\n" \
	"  --pip-index URL         the site's Python package index (PEP 503) for\n" \
	"                          recipes with pip\n" \
	"  --npm-registry URL      the site's npm registry for the recipes' run steps\n" \
	"                          (npm_config_registry; default npm's own)\n" \
	"  --site-file PATH        keep the file in the cache's site/ folder for the\n" \
	"                          recipes' site-file (repeatable)\n" \
	"  --config FILE           the images' configuration (default " IMG_DEFAULT_CONFIG "):\n" \
	"                          pip_index, npm_registry, mirror, security_mirror,\n" \
	"                          cache_dir, base_max_age\n" \
	"  --mirror URL            Debian archive (default: the one apt uses here)\n" \
	"  --security-mirror URL   Debian security archive ('none': leave it out)\n" \
	"  --cache-dir DIR         downloads, kept bases, site files and build roots\n" \
	"                          (default " IMG_DEFAULT_CACHE_DIR ")\n" \
	"  --fresh-base            bootstrap the suite again instead of using the\n" \
	"                          kept base, and keep the new one in its place\n" \
	"  --base-max-age DAYS     bootstrap again when the kept base is older (1 to\n" \
	"                          3650; default 7)\n"

struct view {
	const char *ref;
	bool tty;
	enum img_stage stage;
	long last_step;          /* non-tty: the last tenth of the stage printed */
	bool started;
	size_t width;            /* tty: of the line last drawn */
};

static void format_counts(const struct img_progress *p, char *buf, size_t n)
{
	buf[0] = '\0';
	switch (p->stage) {
	case IMG_STAGE_PACKAGES:
		if (p->total && p->to_fetch && p->fetched < p->to_fetch)
			snprintf(buf, n, "%ld of %ld set up, downloaded %ld of %ld MB", p->done, p->total,
				 p->fetched / 1000, p->to_fetch / 1000);
		else if (p->total)
			snprintf(buf, n, "%ld of %ld set up", p->done, p->total);
		break;
	case IMG_STAGE_RUN:
		if (p->total)
			snprintf(buf, n, "step %ld of %ld", p->done + 1 > p->total ? p->total : p->done + 1,
				 p->total);
		break;
	case IMG_STAGE_IMPORT:
		if (p->total)
			snprintf(buf, n, "%ld of %ld MB", p->done, p->total);
		break;
	default:
		break;
	}
}

static void on_progress(const struct img_progress *p, void *ud)
{
	struct view *v = ud;
	char counts[160];
	/* A note is a line of its own, on a terminal too (over the line
	 * drawn last): it says how the stage goes (the kept base), or warns. */
	if (p->note && p->note[0]) {
		if (v->tty && v->width)
			fprintf(stderr, "\r%*s\r", (int)v->width, "");
		v->width = 0;
		fprintf(stderr, "%s: %s: %s\n", v->ref, img_stage_name(p->stage), p->note);
		fflush(stderr);
		return;
	}
	format_counts(p, counts, sizeof(counts));
	if (v->tty) {
		char line[400];
		int n = snprintf(line, sizeof(line), "%s: %s %d/%d%s%s%s%.60s", v->ref, img_stage_name(p->stage),
				 (int)p->stage + 1, (int)IMG_STAGE_COUNT, counts[0] ? ": " : "", counts,
				 p->what && p->what[0] ? "  " : "", p->what ? p->what : "");
		size_t len = n < 0 ? 0 : (size_t)n >= sizeof(line) ? sizeof(line) - 1 : (size_t)n;
		/* \r, then blanks over what the previous line had beyond this one. */
		fprintf(stderr, "\r%s%*s", line, v->width > len ? (int)(v->width - len) : 0, "");
		v->width = len;
		fflush(stderr);
		return;
	}
	/* Not a terminal: a line when a stage starts and at each tenth of
	 * its count, so that logs stay short. */
	long step = p->total ? p->done * 10 / p->total : 0;
	bool new_stage = !v->started || p->stage != v->stage;
	if (!new_stage && (step == v->last_step || !p->total))
		return;
	if (!new_stage && p->stage == IMG_STAGE_PACKAGES && p->done == 0)
		return;   /* downloading: the count of set-up packages says it */
	v->started = true;
	v->stage = p->stage;
	v->last_step = step;
	fprintf(stderr, "%s: %s%s%s\n", v->ref, img_stage_name(p->stage), counts[0] ? ": " : "", counts);
}

static void format_ms(int64_t ms, char *buf, size_t n)
{
	long s = (long)((ms + 500) / 1000);
	if (s >= 60)
		snprintf(buf, n, "%ldm%02lds", s / 60, s % 60);
	else
		snprintf(buf, n, "%lds", s);
}

/* Each line of text (lines separated by '\n') as "REF: PREFIX LINE". */
static void print_lines(FILE *f, const char *ref, const char *prefix, const char *text)
{
	for (const char *l = text; *l;) {
		size_t n = strcspn(l, "\n");
		fprintf(f, "%s%s: %s%.*s\n", f == stderr ? "tessera: " : "", ref, prefix, (int)n, l);
		l += n;
		if (*l)
			l++;
	}
}

static int build_one(const char *path, const struct img_build_opts *base, bool check, bool skip_unready)
{
	struct recipe r;
	struct terr err = {0};
	if (recipe_load(path, &r, &err) < 0)
		return cli_fail("%s", err.msg);
	char ref[256];
	recipe_ref(&r, ref, sizeof(ref));
	int rc = CLI_EXIT_OK;
	if (check) {
		bool found;
		char hash[RECIPE_HASH_HEX + 1];
		const char *state;
		if (img_existing_hash(ref, &found, hash, sizeof(hash), &err) < 0)
			state = "unknown (Docker does not answer)";
		else if (!found)
			state = "not built";
		else
			state = strcmp(hash, r.hash) ? "out of date" : "up to date";
		printf("%s %s %s\n", ref, r.hash, state);
		char needs[2048];
		if (img_recipe_needs(&r, base, needs, sizeof(needs)) > 0)
			print_lines(stdout, ref, "", needs);
		recipe_free(&r);
		return rc;
	}

	struct view v = {.ref = ref, .tty = isatty(2)};
	struct img_build_opts o = *base;
	o.progress = on_progress;
	o.ud = &v;
	struct img_build_result res;
	int br = img_build(&r, &o, &res, &err);
	if (v.tty && v.width)
		fprintf(stderr, "\r%*s\r", (int)v.width, "");
	char size[32] = "";
	units_format_size(res.size, size, sizeof(size));
	if (br < 0 && res.unready && skip_unready) {
		print_lines(stdout, ref, "skipped, ", res.needs);
	} else if (br < 0 && res.unready) {
		print_lines(stderr, ref, "", res.needs);
		rc = CLI_EXIT_FAIL;
	} else if (br < 0) {
		rc = cli_fail("%s: %s", ref, err.msg);
	} else if (res.up_to_date) {
		printf("%s: up to date (%.19s, %s)\n", ref, res.id, size);
	} else {
		int64_t total = 0;
		char stages[IMG_STAGE_COUNT * 48 + sizeof(res.base_note) + 4] = "", t[40];
		for (int s = 0; s < IMG_STAGE_COUNT; s++) {
			total += res.stage_ms[s];
			format_ms(res.stage_ms[s], t, sizeof(t));
			snprintf(stages + strlen(stages), sizeof(stages) - strlen(stages), "%s%s %s",
				 s ? ", " : "", img_stage_name((enum img_stage)s), t);
			/* Where the base came from: "bootstrap 4s (kept base of DATE)". */
			if (s == IMG_STAGE_BOOTSTRAP && res.base_note[0])
				snprintf(stages + strlen(stages), sizeof(stages) - strlen(stages), " (%s)",
					 res.base_note);
		}
		format_ms(total, t, sizeof(t));
		printf("%s: built in %s (%s), %.19s, %s\n", ref, t, stages, res.id, size);
	}
	if (br == 0 && res.frameworks[0])
		printf("%s: %s\n", ref, res.frameworks);
	/* Results and progress interleave in order in a log. */
	fflush(stdout);
	recipe_free(&r);
	return rc;
}

/* A package index pip (or a registry npm) can be pointed at: http:// or
 * https://, printable, without spaces (it goes into a command line,
 * pip.conf and the run steps' environment). */
static bool valid_index(const char *u)
{
	if (strncmp(u, "http://", 7) && strncmp(u, "https://", 8))
		return false;
	const char *host = u + (u[4] == 's' ? 8 : 7);
	if (!*host || *host == '/')
		return false;
	for (const char *c = u; *c; c++)
		if ((unsigned char)*c <= ' ' || (unsigned char)*c >= 0x7f)
			return false;
	return strlen(u) < 512;
}

/* The images' configuration: the explicit file must be there, the
 * default one may be absent. Flags already in o win over its keys. */
static int read_images_conf(const char *path, bool explicit_path, struct img_build_opts *o, struct conf *c,
			    const char **index_from, const char **registry_from)
{
	static const char *const known[] = {"pip_index", "npm_registry", "mirror", "security_mirror", "cache_dir",
					      "base_max_age", NULL};
	struct terr err = {0};
	if (conf_load(path, c, &err) < 0) {
		if (!explicit_path && err.code == ENOENT)
			return 0;
		return cli_fail("%s", err.msg);
	}
	if (conf_check_keys(c, known, path, &err) < 0)
		return cli_fail("%s", err.msg);
	const char *v;
	if (!o->pip_index && (v = conf_get(c, "pip_index")) && *v) {
		o->pip_index = v;
		*index_from = path;
	}
	if (!o->npm_registry && (v = conf_get(c, "npm_registry")) && *v) {
		o->npm_registry = v;
		*registry_from = path;
	}
	if (!o->mirror && (v = conf_get(c, "mirror")) && *v)
		o->mirror = v;
	if (!o->security_mirror && (v = conf_get(c, "security_mirror")) && *v)
		o->security_mirror = strcmp(v, "none") ? v : "";
	if (!o->cache_dir && (v = conf_get(c, "cache_dir")) && *v)
		o->cache_dir = v;
	if (!o->base_max_age_days && (v = conf_get(c, "base_max_age")) && *v &&
	    img_base_parse_max_age(v, &o->base_max_age_days) < 0)
		return cli_fail("%s: base_max_age '%.40s' is not a number of days from 1 to %d", path, v,
				IMG_MAX_BASE_MAX_AGE_DAYS);
	return 0;
}

#define MAX_SITE_FILES 64

/* --site-file PATH: into the cache, checked against the sha256 that a
 * recipe of this command line gives for its name. */
static int add_site_file(const char *path, const struct img_build_opts *o, char **recipes, int n_recipes)
{
	const char *name = strrchr(path, '/');
	name = name ? name + 1 : path;
	const char *want = NULL;
	char want_from[600] = "";
	struct recipe r;
	for (int i = 0; i < n_recipes && !want; i++) {
		struct terr ignored = {0};
		if (recipe_load(recipes[i], &r, &ignored) < 0)
			continue;   /* build_one reports it */
		for (size_t k = 0; k < r.n_site_files && !want; k++)
			if (!strcmp(r.site_files[k].key, name) && r.site_files[k].value) {
				snprintf(want_from, sizeof(want_from), "%s", r.site_files[k].value);
				want = want_from;
			}
		recipe_free(&r);
	}
	char dest[4096], hex[RECIPE_HASH_HEX + 1];
	struct terr err = {0};
	if (img_site_file_add(o, path, want, dest, sizeof(dest), hex, &err) < 0)
		return cli_fail("%s", err.msg);
	printf("site file %s: kept as %s (sha256 %s)\n", name, dest, hex);
	fflush(stdout);
	return CLI_EXIT_OK;
}

int cmd_image_build(int argc, char **argv)
{
	static const struct option opts[] = {
		{"force", no_argument, NULL, 'f'},
		{"check", no_argument, NULL, 'c'},
		{"skip-unready", no_argument, NULL, 'k'},
		{"pip-index", required_argument, NULL, 'p'},
		{"npm-registry", required_argument, NULL, 'n'},
		{"site-file", required_argument, NULL, 'S'},
		{"config", required_argument, NULL, 'C'},
		{"mirror", required_argument, NULL, 'm'},
		{"security-mirror", required_argument, NULL, 's'},
		{"cache-dir", required_argument, NULL, 'd'},
		{"fresh-base", no_argument, NULL, 'B'},
		{"base-max-age", required_argument, NULL, 'A'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	struct img_build_opts o = {0};
	bool check = false, skip_unready = false;
	const char *config = NULL, *index_from = "--pip-index", *registry_from = "--npm-registry";
	const char *site_files[MAX_SITE_FILES];
	int n_site = 0;
	optind = 0;
	opterr = 0;
	for (int c; (c = getopt_long(argc, argv, "h", opts, NULL)) != -1;) {
		switch (c) {
		case 'h':
			fputs(IMAGE_BUILD_USAGE, stdout);
			return CLI_EXIT_OK;
		case 'f':
			o.force = true;
			break;
		case 'c':
			check = true;
			break;
		case 'k':
			skip_unready = true;
			break;
		case 'p':
			o.pip_index = optarg;
			break;
		case 'n':
			o.npm_registry = optarg;
			break;
		case 'S':
			if (n_site == MAX_SITE_FILES)
				return cli_usage_fail("image build", "at most %d --site-file", MAX_SITE_FILES);
			site_files[n_site++] = optarg;
			break;
		case 'C':
			config = optarg;
			break;
		case 'm':
			o.mirror = optarg;
			break;
		case 's':
			o.security_mirror = strcmp(optarg, "none") ? optarg : "";
			break;
		case 'd':
			o.cache_dir = optarg;
			break;
		case 'B':
			o.fresh_base = true;
			break;
		case 'A':
			if (img_base_parse_max_age(optarg, &o.base_max_age_days) < 0)
				return cli_usage_fail("image build", "--base-max-age '%.40s' is not a number of days "
						      "from 1 to %d", optarg, IMG_MAX_BASE_MAX_AGE_DAYS);
			break;
		default:
			if (optopt)
				return cli_usage_fail("image build", "option '%s' needs a value", argv[optind - 1]);
			return cli_usage_fail("image build", "option '%s' is unknown", argv[optind - 1]);
		}
	}
	if (optind >= argc && !n_site)
		return cli_usage_fail("image build", "missing RECIPE (e.g. images/python/3.11.recipe)");
	o.config_path = config ? config : IMG_DEFAULT_CONFIG;
	struct conf conf = {0};
	int rc = read_images_conf(o.config_path, config != NULL, &o, &conf, &index_from, &registry_from);
	if (rc == CLI_EXIT_OK && o.pip_index && !valid_index(o.pip_index))
		rc = cli_fail("pip index '%.200s' (%s) is not an http:// or https:// URL", o.pip_index, index_from);
	if (rc == CLI_EXIT_OK && o.npm_registry && !valid_index(o.npm_registry))
		rc = cli_fail("npm registry '%.200s' (%s) is not an http:// or https:// URL", o.npm_registry,
			      registry_from);
	if (rc != CLI_EXIT_OK) {
		conf_free(&conf);
		return rc;
	}
	/* A site file that could not be kept fails the command; the recipes
	 * are built all the same (one that needs it says so). */
	for (int i = 0; i < n_site; i++)
		if (add_site_file(site_files[i], &o, argv + optind, argc - optind) != CLI_EXIT_OK)
			rc = CLI_EXIT_FAIL;
	for (int i = optind; i < argc; i++)
		if (build_one(argv[i], &o, check, skip_unready) != CLI_EXIT_OK)
			rc = CLI_EXIT_FAIL;
	conf_free(&conf);
	return rc;
}
