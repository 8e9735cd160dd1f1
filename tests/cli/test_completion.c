/* The completion scripts and the manual page are made from the command
 * tables: every command and verb describes its options and words in a form
 * the scripts can use (no NULL, no quoting or glob characters), and what is
 * in the tables is in the scripts and the page. A verb added to a noun
 * without its words fails here. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent_settings.h"
#include "cli/cli.h"
#include "testlib.h"

static char *written(int (*write)(FILE *, const char *), void (*write_man)(FILE *), const char *shell)
{
	char *s = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&s, &n);
	if (!f)
		return NULL;
	int rc = write ? write(f, shell) : (write_man(f), 0);
	fclose(f);
	if (rc < 0) {
		free(s);
		return NULL;
	}
	return s;
}

/* Whether one word of a table is safe unquoted in both shells and has the
 * form the scripts read: option "--name" or "-x", with "=VALUE" when it
 * takes one. */
static bool word_ok(const char *w, size_t n, bool option)
{
	size_t i = 0;
	if (option) {
		if (n < 2 || w[0] != '-')
			return false;
		i = w[1] == '-' ? 2 : 1;
		size_t start = i;
		while (i < n && (islower((unsigned char)w[i]) || isdigit((unsigned char)w[i]) || w[i] == '-'))
			i++;
		if (i == start || (start == 1 && i != 2) || (i < n && w[i] != '='))
			return false;
	}
	for (; i < n; i++)
		if (strchr("*?[]'\"\\$`(){}<>;&! \t", w[i]))
			return false;
	return true;
}

static void check_words(const char *what, const char *s, bool option)
{
	CHECK(s != NULL);
	if (!s) {
		FAILF("%s: not described (opts and args are NULL)", what);
		return;
	}
	for (const char *p = s; *p;) {
		size_t n = strcspn(p, " ");
		if (n && !word_ok(p, n, option))
			FAILF("%s: bad word '%.*s' in \"%s\"", what, (int)n, p, s);
		p += n;
		while (*p == ' ')
			p++;
	}
}

TEST(every_command_and_verb_describes_its_words)
{
	CHECK(cli_n_commands > 10);
	for (size_t i = 0; i < cli_n_commands; i++) {
		const struct cli_command *c = &cli_commands[i];
		CHECK(cli_command_find(c->name) == c);
		if (!c->noun) {
			check_words(c->name, c->opts, true);
			check_words(c->name, c->args, false);
			continue;
		}
		CHECK(c->opts == NULL && c->args == NULL);
		CHECK(c->noun->n_verbs > 0);
		for (size_t j = 0; j < c->noun->n_verbs; j++) {
			const struct cli_verb *v = &c->noun->verbs[j];
			char what[128];
			snprintf(what, sizeof(what), "tessera %s %s", c->name, v->name);
			check_words(what, v->opts, true);
			check_words(what, v->args, false);
			for (size_t k = 0; k < j; k++)
				if (!strcmp(c->noun->verbs[k].name, v->name))
					FAILF("%s: twice in the table", what);
		}
	}
}

/* The nouns below a verb: named after the command and verb that lead to
 * them, which exist, and their verbs described as every other. */
TEST(the_nouns_below_a_verb_describe_their_words_too)
{
	CHECK(cli_n_subnouns > 0);
	for (size_t i = 0; i < cli_n_subnouns; i++) {
		const struct cli_noun *sub = cli_subnouns[i];
		char cmd[64] = "", verb[64] = "";
		CHECK(sscanf(sub->name, "%63s %63s", cmd, verb) == 2);
		const struct cli_command *c = cli_command_find(cmd);
		bool found = false;
		for (size_t j = 0; c && c->noun && j < c->noun->n_verbs; j++)
			found = found || !strcmp(c->noun->verbs[j].name, verb);
		if (!found)
			FAILF("%s: no verb %s of %s", sub->name, verb, cmd);
		for (size_t j = 0; j < sub->n_verbs; j++) {
			char what[128];
			snprintf(what, sizeof(what), "tessera %s %s", sub->name, sub->verbs[j].name);
			check_words(what, sub->verbs[j].opts, true);
			check_words(what, sub->verbs[j].args, false);
		}
	}
	char *script = written(cli_completion_write, NULL, "bash");
	CHECK_CONTAINS(script, "'user keys') _tessera_v='");
	CHECK_CONTAINS(script, "'user keys add') _tessera_o='");
	free(script);
	char *man = written(NULL, cli_manpage_write, NULL);
	CHECK_CONTAINS(man, ".TP\n\\fBtessera user keys add\\fR");
	free(man);
}

/* Each option's name, as the script offers it, in s. */
static void check_opts_in(const char *where, const char *s, const char *opts)
{
	for (const char *p = opts; p && *p;) {
		size_t n = strcspn(p, " =");
		char name[64];
		snprintf(name, sizeof(name), "%.*s", (int)n, p);
		if (!strstr(s, name))
			FAILF("%s: option %s missing", where, name);
		p += strcspn(p, " ");
		while (*p == ' ')
			p++;
	}
}

TEST(the_scripts_hold_every_command_verb_and_option)
{
	const char *shells[] = {"bash", "zsh"};
	for (size_t s = 0; s < 2; s++) {
		char *script = written(cli_completion_write, NULL, shells[s]);
		CHECK(script != NULL);
		if (!script)
			continue;
		if (s == 1)
			CHECK(!strncmp(script, "#compdef tessera\n", 17));
		else
			CHECK_CONTAINS(script, "complete -F _tessera tessera\n");
		for (size_t i = 0; i < cli_n_commands; i++) {
			const struct cli_command *c = &cli_commands[i];
			char key[160];
			if (!c->summary) {
				/* Hidden: not offered. */
				snprintf(key, sizeof(key), "'%s ')", c->name);
				CHECK(!strstr(script, key));
				continue;
			}
			if (!c->noun) {
				snprintf(key, sizeof(key), "'%s ') _tessera_o='", c->name);
				CHECK_CONTAINS(script, key);
				check_opts_in(key, strstr(script, key) ? strstr(script, key) : "", c->opts);
				continue;
			}
			for (size_t j = 0; j < c->noun->n_verbs; j++) {
				const struct cli_verb *v = &c->noun->verbs[j];
				snprintf(key, sizeof(key), "'%s %s') _tessera_o='", c->name, v->name);
				CHECK_CONTAINS(script, key);
				const char *line = strstr(script, key);
				if (line) {
					char buf[1024];
					snprintf(buf, sizeof(buf), "%.*s", (int)strcspn(line, "\n"), line);
					check_opts_in(key, buf, v->opts);
				}
			}
		}
		/* tessera server takes the agent settings that are flags. */
		const char *server = strstr(script, "'server ') _tessera_o='");
		CHECK(server != NULL);
		for (size_t i = 0; server && i < agent_settings_count; i++)
			if (agent_settings_table[i].flags & AGENT_SETTING_FLAG) {
				char opt[80];
				snprintf(opt, sizeof(opt), " --%s=", agent_settings_table[i].flag);
				char line[4096];
				snprintf(line, sizeof(line), "%.*s", (int)strcspn(server, "\n"), server);
				CHECK_CONTAINS(line, opt);
			}
		free(script);
	}
	char *none = written(cli_completion_write, NULL, "fish");
	CHECK(none == NULL);
	free(none);
}

TEST(the_manual_page_has_every_verb_and_option)
{
	char *man = written(NULL, cli_manpage_write, NULL);
	CHECK(man != NULL);
	if (!man)
		return;
	CHECK_CONTAINS(man, ".TH TESSERA 1 ");
	CHECK_CONTAINS(man, ".SH SYNOPSIS\n");
	for (size_t i = 0; i < cli_n_commands; i++) {
		const struct cli_command *c = &cli_commands[i];
		if (!c->summary || !c->noun)
			continue;
		for (size_t j = 0; j < c->noun->n_verbs; j++) {
			const struct cli_verb *v = &c->noun->verbs[j];
			char tag[128], esc[64];
			size_t k = 0;
			for (const char *p = v->name; *p && k + 3 < sizeof(esc); p++) {
				if (*p == '-')
					esc[k++] = '\\';
				esc[k++] = *p;
			}
			esc[k] = '\0';
			snprintf(tag, sizeof(tag), ".TP\n\\fBtessera %s %s\\fR", c->name, esc);
			CHECK_CONTAINS(man, tag);
			/* Its options, in the paragraph that follows. */
			const char *at = strstr(man, tag), *end = at ? strstr(at + strlen(tag), ".TP\n") : NULL;
			char para[2048];
			snprintf(para, sizeof(para), "%.*s", at ? (int)(end ? end - at : (long)strlen(at)) : 0,
				 at ? at : "");
			for (const char *p = v->opts; p && *p;) {
				char opt[80] = "\\fB";
				size_t n = strcspn(p, " =");
				for (size_t m = 0, o = 3; m < n && o + 3 < sizeof(opt); m++) {
					if (p[m] == '-')
						opt[o++] = '\\';
					opt[o++] = p[m];
					opt[o] = '\0';
				}
				CHECK_CONTAINS(para, opt);
				p += strcspn(p, " ");
				while (*p == ' ')
					p++;
			}
		}
	}
	/* No line starts with a control character by accident. */
	for (const char *p = man; *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : p + strlen(p))
		if (*p == '\'')
			FAILF("a line starts with ': %.40s", p);
	free(man);
}

int main(void)
{
	RUN(every_command_and_verb_describes_its_words);
	RUN(the_nouns_below_a_verb_describe_their_words_too);
	RUN(the_scripts_hold_every_command_verb_and_option);
	RUN(the_manual_page_has_every_verb_and_option);
	return testlib_done();
}
