/* Shell completion and the manual page, made from the command table
 * (commands.c) and the nouns' tables of verbs: `tessera completion
 * bash|zsh` prints a script, `tessera manpage` prints tessera(1), and the
 * hidden `tessera __complete KIND` prints the names the scripts offer for
 * sessions, images, folders and nodes.
 *
 * The scripts hold the tables as data (a case per noun and verb) and one
 * function, _tessera_candidates, written in the shell language bash and zsh
 * share, which walks the words typed so far and prints what may come next;
 * each shell's own wrapper turns that into COMPREPLY or compadd. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent_settings.h"
#include "cli/cli.h"
#include "cli/client.h"
#include "common/apiclient.h"

/* How long the scripts wait for the server: a completion that hangs is
 * worse than none. */
#define COMPLETE_TIMEOUT_MS 3000

/* A command's or verb's options as completed: opts, plus for a command
 * with agent_flags every agent setting that is a flag. malloc'd; NULL when
 * out of memory. */
static char *full_opts(const struct cli_command *cmd, const struct cli_verb *verb)
{
	const char *own = verb ? verb->opts : cmd->opts;
	char *s = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&s, &n);
	if (!f)
		return NULL;
	fputs(own ? own : "", f);
	if (!verb && cmd->agent_flags)
		for (size_t i = 0; i < agent_settings_count; i++) {
			const struct agent_setting *a = &agent_settings_table[i];
			if (a->flags & AGENT_SETTING_FLAG)
				fprintf(f, "%s--%s=%s", ftell(f) ? " " : "", a->flag,
					a->metavar ? a->metavar : "VALUE");
		}
	if (fclose(f) != 0) {
		free(s);
		return NULL;
	}
	return s;
}

/* ---- the scripts ---- */

/* s in single quotes, for either shell. */
static void sh_quote(FILE *f, const char *s)
{
	fputc('\'', f);
	for (; *s; s++)
		if (*s == '\'')
			fputs("'\\''", f);
		else
			fputc(*s, f);
	fputc('\'', f);
}

static void spec_case(FILE *f, const char *key, const char *opts, const char *args)
{
	fputs("\t", f);
	sh_quote(f, key);
	fputs(") _tessera_o=", f);
	sh_quote(f, opts ? opts : "");
	fputs(" _tessera_a=", f);
	sh_quote(f, args ? args : "");
	fputs(" ;;\n", f);
}

/* The tables as three functions: _tessera_commands prints the commands;
 * _tessera_verbs NOUN sets _tessera_v to its verbs ("" for a command
 * without); _tessera_spec COMMAND VERB sets _tessera_o and _tessera_a to
 * the options and positional words (VERB "" for a command without verbs). */
static int write_tables(FILE *f)
{
	fputs("_tessera_commands() {\n\tprintf '%s\\n'", f);
	for (size_t i = 0; i < cli_n_commands; i++)
		if (cli_commands[i].summary)
			fprintf(f, " %s", cli_commands[i].name);
	fputs("\n}\n\n_tessera_verbs() {\n\tcase $1 in\n", f);
	for (size_t i = 0; i < cli_n_commands; i++) {
		const struct cli_noun *noun = cli_commands[i].noun;
		if (!noun || !cli_commands[i].summary)
			continue;
		fprintf(f, "\t%s) _tessera_v='", cli_commands[i].name);
		for (size_t j = 0; j < noun->n_verbs; j++)
			fprintf(f, "%s%s", j ? " " : "", noun->verbs[j].name);
		fputs("' ;;\n", f);
	}
	for (size_t i = 0; i < cli_n_subnouns; i++) {
		const struct cli_noun *noun = cli_subnouns[i];
		fputs("\t", f);
		sh_quote(f, noun->name);
		fputs(") _tessera_v='", f);
		for (size_t j = 0; j < noun->n_verbs; j++)
			fprintf(f, "%s%s", j ? " " : "", noun->verbs[j].name);
		fputs("' ;;\n", f);
	}
	fputs("\t*) _tessera_v= ;;\n\tesac\n}\n\n_tessera_spec() {\n\tcase \"$1 $2\" in\n", f);
	for (size_t i = 0; i < cli_n_commands; i++) {
		const struct cli_command *c = &cli_commands[i];
		if (!c->summary)
			continue;
		char key[128];
		if (!c->noun) {
			char *opts = full_opts(c, NULL);
			if (!opts)
				return -1;
			snprintf(key, sizeof(key), "%s ", c->name);
			spec_case(f, key, opts, c->args);
			free(opts);
			continue;
		}
		for (size_t j = 0; j < c->noun->n_verbs; j++) {
			const struct cli_verb *v = &c->noun->verbs[j];
			snprintf(key, sizeof(key), "%s %s", c->name, v->name);
			spec_case(f, key, v->opts, v->args);
		}
	}
	for (size_t i = 0; i < cli_n_subnouns; i++)
		for (size_t j = 0; j < cli_subnouns[i]->n_verbs; j++) {
			const struct cli_verb *v = &cli_subnouns[i]->verbs[j];
			char key[128];
			snprintf(key, sizeof(key), "%s %s", cli_subnouns[i]->name, v->name);
			spec_case(f, key, v->opts, v->args);
		}
	fputs("\t*) _tessera_o= _tessera_a= ;;\n\tesac\n}\n\n", f);
	return 0;
}

/* The part both shells run alike (POSIX shell plus local; zsh runs it with
 * shwordsplit, as bash splits). */
static const char core_script[] =
	"# _tessera_names KIND: names from the server (tessera __complete KIND),\n"
	"# nothing when it cannot be reached.\n"
	"_tessera_names() {\n"
	"\t\"${_tessera_bin:-tessera}\" __complete \"$1\" 2>/dev/null </dev/null\n"
	"}\n"
	"\n"
	"# _tessera_kind WORD: what may stand for WORD of a table (SESSION, FILE,\n"
	"# a|b, ...), one per line; @FILE or @DIR for paths.\n"
	"_tessera_kind() {\n"
	"\tcase ${1%...} in\n"
	"\tSESSION) _tessera_names sessions ;;\n"
	"\tIMAGE) _tessera_names images ;;\n"
	"\tFOLDER) _tessera_names folders ;;\n"
	"\tNODE) _tessera_names nodes ;;\n"
	"\tFILE) printf '%s\\n' @FILE ;;\n"
	"\tDIR) printf '%s\\n' @DIR ;;\n"
	"\t*'|'*)\n"
	"\t\tlocal IFS='|' t\n"
	"\t\tfor t in ${1%...}; do\n"
	"\t\t\tcase $t in *[!a-z0-9._-]*) ;; *) printf '%s\\n' \"$t\" ;; esac\n"
	"\t\tdone ;;\n"
	"\tesac\n"
	"}\n"
	"\n"
	"# _tessera_candidates CUR WORD...: what may come as CUR after the WORDs\n"
	"# typed after tessera, one per line.\n"
	"_tessera_candidates() {\n"
	"\tlocal cur=$1 noun= verb= want= pos=0 n=0 w t last= _tessera_v= _tessera_o= _tessera_a=\n"
	"\tshift\n"
	"\tfor w in \"$@\"; do\n"
	"\t\tif [ -n \"$want\" ]; then want=; continue; fi\n"
	"\t\tcase $w in\n"
	"\t\t--) return 0 ;;   # a command of its own follows (session exec)\n"
	"\t\t--*=*) continue ;;\n"
	"\t\t-*)\n"
	"\t\t\tcase \" $_tessera_o \" in *\" $w=\"*) want=$w ;; esac\n"
	"\t\t\tcontinue ;;\n"
	"\t\tesac\n"
	"\t\tif [ -z \"$noun\" ]; then\n"
	"\t\t\tnoun=$w\n"
	"\t\t\t_tessera_verbs \"$noun\"\n"
	"\t\t\tif [ -z \"$_tessera_v\" ]; then verb=' '; _tessera_spec \"$noun\" ''; fi\n"
	"\t\telif [ -z \"$verb\" ]; then\n"
	"\t\t\tverb=$w\n"
	"\t\t\t# A verb that is a noun of its own (user keys): its verbs next.\n"
	"\t\t\t_tessera_verbs \"$noun $verb\"\n"
	"\t\t\tif [ -n \"$_tessera_v\" ]; then noun=\"$noun $verb\" verb=; else _tessera_spec \"$noun\" \"$verb\"; fi\n"
	"\t\telse\n"
	"\t\t\tpos=$((pos + 1))\n"
	"\t\tfi\n"
	"\tdone\n"
	"\tif [ -n \"$want\" ]; then\n"
	"\t\tfor t in $_tessera_o; do\n"
	"\t\t\tcase $t in \"$want=\"*) _tessera_kind \"${t#*=}\"; return 0 ;; esac\n"
	"\t\tdone\n"
	"\t\treturn 0\n"
	"\tfi\n"
	"\tif [ -z \"$noun\" ]; then\n"
	"\t\tcase $cur in -*) printf '%s\\n' --help --version ;; *) _tessera_commands ;; esac\n"
	"\t\treturn 0\n"
	"\tfi\n"
	"\tif [ -z \"$verb\" ]; then\n"
	"\t\tcase $cur in -*) printf '%s\\n' --help ;; *) for t in $_tessera_v; do printf '%s\\n' \"$t\"; done ;; esac\n"
	"\t\treturn 0\n"
	"\tfi\n"
	"\tcase $cur in\n"
	"\t-*)\n"
	"\t\tfor t in $_tessera_o --help; do printf '%s\\n' \"${t%%=*}\"; done\n"
	"\t\treturn 0 ;;\n"
	"\tesac\n"
	"\t# The positional word's kind: the last one of args repeats when it ends in ...\n"
	"\tfor t in $_tessera_a; do\n"
	"\t\tn=$((n + 1))\n"
	"\t\tlast=$t\n"
	"\t\tif [ \"$n\" -eq $((pos + 1)) ]; then _tessera_kind \"$t\"; return 0; fi\n"
	"\tdone\n"
	"\tcase $last in *...) _tessera_kind \"$last\" ;; esac\n"
	"}\n"
	"\n";

static const char bash_wrapper[] =
	"_tessera() {\n"
	"\t# The tessera typed (~/bin/tessera as typed: ~ expanded here) answers.\n"
	"\tlocal cur=${COMP_WORDS[COMP_CWORD]} _tessera_bin=${COMP_WORDS[0]/#\\~/$HOME} out\n"
	"\tlocal -a words=(\"${COMP_WORDS[@]:1:COMP_CWORD-1}\")\n"
	"\t# COMP_WORDBREAKS splits --opt=value into --opt, = and value: complete\n"
	"\t# the value as after --opt value.\n"
	"\tif [[ $cur == = ]]; then\n"
	"\t\tcur=\n"
	"\telif ((${#words[@]})) && [[ ${words[-1]} == = ]]; then\n"
	"\t\tunset 'words[-1]'\n"
	"\tfi\n"
	"\tout=$(_tessera_candidates \"$cur\" \"${words[@]}\")\n"
	"\tlocal IFS=$'\\n'\n"
	"\tlocal -a c=($out)\n"
	"\tCOMPREPLY=()\n"
	"\tcase ${c[0]-} in\n"
	"\t@FILE) compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- \"$cur\")) ;;\n"
	"\t@DIR) compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -d -- \"$cur\")) ;;\n"
	"\t*) COMPREPLY=($(compgen -W \"${c[*]}\" -- \"$cur\")) ;;\n"
	"\tesac\n"
	"}\n"
	"complete -F _tessera tessera\n";

static const char zsh_wrapper[] =
	"_tessera() {\n"
	"\tlocal cur=${words[CURRENT]} _tessera_bin=${words[1]/#\\~/$HOME} out\n"
	"\tlocal -a c\n"
	"\t# shwordsplit in the subshell only: _files wants zsh's own options.\n"
	"\tout=$(setopt shwordsplit; _tessera_candidates \"$cur\" \"${(@)words[2,CURRENT-1]}\")\n"
	"\tc=(\"${(@f)out}\")\n"
	"\tcase ${c[1]} in\n"
	"\t@FILE) _files ;;\n"
	"\t@DIR) _files -/ ;;\n"
	"\t*) [[ -n $out ]] && compadd -- \"${c[@]}\" ;;\n"
	"\tesac\n"
	"}\n"
	"\n"
	"# Autoloaded from fpath (as _tessera) or sourced after compinit.\n"
	"if [[ ${zsh_eval_context[-1]-} == loadautofunc ]]; then\n"
	"\t_tessera \"$@\"\n"
	"else\n"
	"\tcompdef _tessera tessera\n"
	"fi\n";

int cli_completion_write(FILE *f, const char *shell)
{
	bool zsh = !strcmp(shell, "zsh");
	if (!zsh && strcmp(shell, "bash"))
		return -1;
	if (zsh)
		fputs("#compdef tessera\n", f);
	fprintf(f,
		"# %s completion for tessera %s, made by `tessera completion %s` from its\n"
		"# command tables: commands, verbs, options, and the names of sessions,\n"
		"# images, folders and nodes (asked of the server with `tessera __complete`).\n\n",
		shell, TESSERA_VERSION, shell);
	if (write_tables(f) < 0)
		return -1;
	fputs(core_script, f);
	fputs(zsh ? zsh_wrapper : bash_wrapper, f);
	return 0;
}

int cmd_completion(int argc, char **argv)
{
	if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		fputs("usage: tessera completion bash|zsh\n\n"
		      "Prints a completion script for the shell: commands, verbs, options, and\n"
		      "session, image, folder and node names from the server. In ~/.bashrc:\n"
		      "  source <(tessera completion bash)\n"
		      "In ~/.zshrc, after compinit:\n"
		      "  source <(tessera completion zsh)\n"
		      "make install puts both where bash-completion and zsh find them.\n",
		      stdout);
		return CLI_EXIT_OK;
	}
	if (argc != 2)
		return cli_usage_fail("completion", "which shell? bash or zsh");
	if (!strcmp(argv[1], "bash") || !strcmp(argv[1], "zsh")) {
		if (cli_completion_write(stdout, argv[1]) < 0)
			return cli_fail("out of memory");
		return fflush(stdout) == 0 ? CLI_EXIT_OK : cli_fail("cannot write the script");
	}
	return cli_usage_fail("completion", "no completion for '%s': bash or zsh", argv[1]);
}

/* ---- tessera __complete KIND ---- */

int cmd_complete_names(int argc, char **argv)
{
	/* Each kind: the list to ask for, its array in the answer, the member
	 * that names an item, and one added after a ':' (an image is launched
	 * by name:tag). */
	static const struct {
		const char *kind, *path, *array, *name, *tag;
	} kinds[] = {
		{"sessions", "/v1/sessions", "sessions", "name", NULL},
		{"images", "/v1/images", "images", "name", "tag"},
		{"folders", "/v1/folders", "folders", "name", NULL},
		{"nodes", "/v1/nodes", "nodes", "id", NULL},
	};
	size_t k = 0;
	while (argc == 2 && k < sizeof(kinds) / sizeof(kinds[0]) && strcmp(argv[1], kinds[k].kind))
		k++;
	if (argc != 2 || k == sizeof(kinds) / sizeof(kinds[0]))
		return cli_usage_fail("__complete", "sessions, images, folders or nodes");
	/* Quiet on every failure: it runs under a shell's completion, where
	 * a message would land in the middle of the command line. */
	struct cli_config cfg = {0};
	struct api_client c;
	struct terr err = {0};
	json_t *reply = NULL;
	if (cli_connect(&cfg, &c, &err) < 0 ||
	    api_call(&c, "GET", kinds[k].path, NULL, COMPLETE_TIMEOUT_MS, &reply, NULL, &err) < 0) {
		cli_config_free(&cfg);
		return CLI_EXIT_FAIL;
	}
	json_t *items = json_object_get(reply, kinds[k].array), *it;
	size_t i;
	json_array_foreach(items, i, it) {
		const char *name = cli_json_str(it, kinds[k].name, NULL);
		if (!name || !*name)
			continue;
		const char *tag = kinds[k].tag ? cli_json_str(it, kinds[k].tag, NULL) : NULL;
		if (tag && *tag)
			printf("%s:%s\n", name, tag);
		else
			printf("%s\n", name);
	}
	json_decref(reply);
	cli_config_free(&cfg);
	return CLI_EXIT_OK;
}

/* ---- the manual page ---- */

/* s as troff text: backslashes and hyphens escaped, a leading . or '
 * made plain. */
static void man_text(FILE *f, const char *s, size_t n)
{
	for (size_t i = 0; i < n && s[i]; i++) {
		if ((i == 0 || s[i - 1] == '\n') && (s[i] == '.' || s[i] == '\''))
			fputs("\\&", f);
		if (s[i] == '\\')
			fputs("\\e", f);
		else if (s[i] == '-')
			fputs("\\-", f);
		else
			fputc(s[i], f);
	}
}

static void man_str(FILE *f, const char *s)
{
	man_text(f, s, strlen(s));
}

/* "Options: --owner EMAIL, --json." from a table's opts. */
static void man_opts(FILE *f, const char *opts)
{
	if (!opts || !*opts)
		return;
	fputs(".br\nOptions:", f);
	const char *p = opts;
	bool first = true;
	while (*p) {
		size_t n = strcspn(p, " ");
		if (n) {
			const char *eq = memchr(p, '=', n);
			fputs(first ? " \\fB" : ", \\fB", f);
			man_text(f, p, eq ? (size_t)(eq - p) : n);
			fputs("\\fR", f);
			if (eq) {
				fputs(" \\fI", f);
				man_text(f, eq + 1, n - (size_t)(eq + 1 - p));
				fputs("\\fR", f);
			}
			first = false;
		}
		p += n;
		while (*p == ' ')
			p++;
	}
	fputs(".\n", f);
}

/* A block of text as printed (a noun's usage). */
static void man_verbatim(FILE *f, const char *s)
{
	fputs(".PP\n.nf\n", f);
	man_str(f, s);
	if (*s && s[strlen(s) - 1] != '\n')
		fputc('\n', f);
	fputs(".fi\n", f);
}

/* The verbs of the noun below `tessera NOUN VERB`, if there is one. */
static void man_subnoun(FILE *f, const char *noun, const char *verb)
{
	char name[128];
	snprintf(name, sizeof(name), "%s %s", noun, verb);
	for (size_t i = 0; i < cli_n_subnouns; i++) {
		const struct cli_noun *sub = cli_subnouns[i];
		if (strcmp(sub->name, name))
			continue;
		for (size_t j = 0; j < sub->n_verbs; j++) {
			const struct cli_verb *v = &sub->verbs[j];
			fputs(".TP\n\\fBtessera ", f);
			man_str(f, sub->name);
			fputs(" ", f);
			man_str(f, v->name);
			fputs("\\fR", f);
			const char *rest = v->synopsis && !strncmp(v->synopsis, v->name, strlen(v->name))
						   ? v->synopsis + strlen(v->name)
						   : v->args;
			while (rest && *rest == ' ')
				rest++;
			if (rest && *rest) {
				fputs(" \\fI", f);
				man_str(f, rest);
				fputs("\\fR", f);
			}
			fputs("\n", f);
			if (v->help) {
				man_str(f, v->help);
				fputs(".\n", f);
			}
			man_opts(f, v->opts);
		}
	}
}

void cli_manpage_write(FILE *f)
{
	fputs(".\\\" tessera(1), made by `tessera manpage` from the command tables (src/cli/commands.c\n"
	      ".\\\" and each noun's verbs); edit those, not this.\n",
	      f);
	fprintf(f, ".TH TESSERA 1 \"\" \"tessera %s\" \"User Commands\"\n", TESSERA_VERSION);
	/* No hyphenation: option names are typed as printed. */
	fputs(".nh\n.SH NAME\n"
	      "tessera \\- GPU cluster platform: sessions, data folders, images, and its daemons\n"
	      ".SH SYNOPSIS\n"
	      ".B tessera\n.I command\n.RI [ verb ]\n.RI [ options ]\n"
	      ".br\n.B tessera\n.BR \\-\\-help \" | \" \\-\\-version\n"
	      ".SH DESCRIPTION\n"
	      "One binary for every part of Tessera: the daemons (\\fBserver\\fR runs a whole cluster on\n"
	      "one machine) and the client, which signs its requests with the keypair of\n"
	      "\\fB~/.config/tessera/client.conf\\fR (see \\fBlogin\\fR). Every command and verb\n"
	      "takes \\fB\\-\\-help\\fR. Errors are one line on standard error; the exit status is 0\n"
	      "on success, 1 on failure and 2 for a usage error.\n"
	      ".SH COMMANDS\n",
	      f);
	for (size_t i = 0; i < cli_n_commands; i++) {
		const struct cli_command *c = &cli_commands[i];
		if (!c->summary)
			continue;
		fputs(".SS ", f);
		man_str(f, c->name);
		fputs("\n", f);
		man_str(f, c->summary);
		fputs("\n", f);
		if (!c->noun) {
			char *opts = full_opts(c, NULL);
			fputs(".TP\n\\fBtessera ", f);
			man_str(f, c->name);
			fputs("\\fR", f);
			if (c->args && *c->args) {
				fputs(" \\fI", f);
				man_str(f, c->args);
				fputs("\\fR", f);
			}
			fputs("\n", f);
			man_opts(f, opts ? opts : c->opts);
			free(opts);
			continue;
		}
		bool described = true;
		for (size_t j = 0; j < c->noun->n_verbs; j++) {
			const struct cli_verb *v = &c->noun->verbs[j];
			fprintf(f, ".TP\n\\fBtessera %s ", c->name);
			man_str(f, v->name);
			fputs("\\fR", f);
			const char *rest = v->synopsis && !strncmp(v->synopsis, v->name, strlen(v->name))
						   ? v->synopsis + strlen(v->name)
						   : NULL;
			if (rest) {
				while (*rest == ' ')
					rest++;
			} else {
				rest = v->args;
			}
			if (rest && *rest) {
				fputs(" \\fI", f);
				man_str(f, rest);
				fputs("\\fR", f);
			}
			fputs("\n", f);
			if (v->help) {
				man_str(f, v->help);
				fputs(".\n", f);
			} else {
				described = false;
			}
			man_opts(f, v->opts);
			man_subnoun(f, c->name, v->name);
		}
		/* Nouns whose usage text describes the verbs itself, and what the
		 * others add after their verbs. */
		if (!described)
			man_verbatim(f, c->noun->usage);
		if (c->noun->usage_end)
			man_verbatim(f, c->noun->usage_end);
	}
	fputs(".SH ENVIRONMENT\n"
	      ".TP\n.B TESSERA_CONFIG\n"
	      "a client configuration to read instead of ~/.config/tessera/client.conf (e.g. the\n"
	      "admin.conf that \\fBtessera server\\fR writes in its data directory)\n"
	      ".TP\n.BR TESSERA_ENDPOINT \", \" TESSERA_ACCESS_KEY \", \" TESSERA_SECRET_KEY\n"
	      "each in place of its line of the configuration\n"
	      ".SH FILES\n"
	      ".TP\n.B ~/.config/tessera/client.conf\n"
	      "the endpoint and keypair \\fBtessera login\\fR stores (mode 0600)\n"
	      ".SH SEE ALSO\n"
	      "The user guide, the administrator's guide and the rest of the documentation, installed\n"
	      "in \\fIshare/doc/tessera\\fR under the prefix (\\fIdocs/\\fR in the sources).\n"
	      "Shell completion: \\fBtessera completion bash\\fR, \\fBtessera completion zsh\\fR.\n",
	      f);
}

int cmd_manpage(int argc, char **argv)
{
	if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		fputs("usage: tessera manpage\n\n"
		      "Prints the tessera(1) manual page (troff), made from the command tables;\n"
		      "make install installs it. To read it: tessera manpage | man -l -\n",
		      stdout);
		return CLI_EXIT_OK;
	}
	if (argc != 1)
		return cli_usage_fail("manpage", "unexpected argument '%s'", argv[1]);
	cli_manpage_write(stdout);
	return fflush(stdout) == 0 ? CLI_EXIT_OK : cli_fail("cannot write the page");
}
