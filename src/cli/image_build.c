/* `tessera image build RECIPE...`: images from recipes, on this machine
 * (images/build.h). Progress goes to stderr, one line updated in place on
 * a terminal, a line per step otherwise (logs, make); the result of each
 * recipe goes to stdout. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/client.h"
#include "common/units.h"
#include "images/build.h"
#include "images/recipe.h"

#define IMAGE_BUILD_USAGE \
	"usage: tessera image build [options] RECIPE...\n" \
	"\n" \
	"Builds each recipe (e.g. images/python/3.11.recipe) into this machine's\n" \
	"Docker: debootstrap of its Debian suite, its packages installed with apt,\n" \
	"the user work (uid 1000), labels (docs/images.md). Needs root. An image\n" \
	"whose tessera.recipe.hash label matches the recipe is up to date and not\n" \
	"built again.\n" \
	"  --force                 build even when up to date\n" \
	"  --check                 only read the recipes: print image, hash and state\n" \
	"  --mirror URL            Debian archive (default: the one apt uses here)\n" \
	"  --security-mirror URL   Debian security archive ('none': leave it out)\n" \
	"  --cache-dir DIR         downloads and build roots (default " IMG_DEFAULT_CACHE_DIR ")\n"

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

static int build_one(const char *path, const struct img_build_opts *base, bool check)
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
	if (br < 0) {
		rc = cli_fail("%s: %s", ref, err.msg);
	} else if (res.up_to_date) {
		printf("%s: up to date (%.19s, %s)\n", ref, res.id, size);
	} else {
		int64_t total = 0;
		char stages[IMG_STAGE_COUNT * 48] = "", t[40];
		for (int s = 0; s < IMG_STAGE_COUNT; s++) {
			total += res.stage_ms[s];
			format_ms(res.stage_ms[s], t, sizeof(t));
			snprintf(stages + strlen(stages), sizeof(stages) - strlen(stages), "%s%s %s",
				 s ? ", " : "", img_stage_name((enum img_stage)s), t);
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

int cmd_image_build(int argc, char **argv)
{
	static const struct option opts[] = {
		{"force", no_argument, NULL, 'f'},
		{"check", no_argument, NULL, 'c'},
		{"mirror", required_argument, NULL, 'm'},
		{"security-mirror", required_argument, NULL, 's'},
		{"cache-dir", required_argument, NULL, 'd'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	struct img_build_opts o = {0};
	bool check = false;
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
		case 'm':
			o.mirror = optarg;
			break;
		case 's':
			o.security_mirror = strcmp(optarg, "none") ? optarg : "";
			break;
		case 'd':
			o.cache_dir = optarg;
			break;
		default:
			if (optopt)
				return cli_usage_fail("image build", "option '%s' needs a value", argv[optind - 1]);
			return cli_usage_fail("image build", "option '%s' is unknown", argv[optind - 1]);
		}
	}
	if (optind >= argc)
		return cli_usage_fail("image build", "missing RECIPE (e.g. images/python/3.11.recipe)");
	int rc = CLI_EXIT_OK;
	for (int i = optind; i < argc; i++)
		if (build_one(argv[i], &o, check) != CLI_EXIT_OK)
			rc = CLI_EXIT_FAIL;
	return rc;
}
