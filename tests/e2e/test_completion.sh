#!/usr/bin/env bash
# Shell completion as a user gets it: the script `tessera completion bash`
# prints is sourced in bash and its function driven as readline drives it
# (COMP_WORDS, COMP_CWORD, then COMPREPLY): commands, verbs, options and
# their values, and the names of sessions, folders, images and nodes from a
# real `tessera server`; nothing, and no message, when no server answers.
# Every option a command's or verb's --help names is offered. The zsh
# script is read by zsh (zsh -n, and its shared part run in zsh) where zsh
# is installed, and tessera(1) renders without a warning.
. "$(dirname "$0")/lib.sh"
e2e_setup

script=$E2E_DIR/tessera.bash
"$TESSERA" completion bash >"$script"
check "tessera completion bash prints a script" [ -s "$script" ]
check "bash reads it" bash -n "$script"
out=$("$TESSERA" completion fish 2>&1)
check "another shell is a usage error ($out)" contains "$out" "bash or zsh"

# The script is sourced here, in this bash (with lib.sh's set -u, which it
# must bear too).
# shellcheck disable=SC1090
source "$script"
# complete WORD...: what bash would offer for the last WORD after
# `tessera WORD...`, one per line, sorted; stderr to $E2E_DIR/complete.err.
complete_words() {
	COMP_WORDS=("$TESSERA" "$@")
	COMP_CWORD=$#
	COMPREPLY=()
	_tessera 2>>"$E2E_DIR/complete.err"
	printf '%s\n' "${COMPREPLY[@]}" | sort
}
# has WORD LIST: LIST (lines) holds WORD.
has() { grep -qxF -- "$1" <<<"$2"; }
lines() { printf '%s\n' "$@" | sort; }

# No server yet: a configuration whose endpoint refuses.
printf 'endpoint = http://127.0.0.1:1\naccess_key = AKNONE\nsecret_key = none\n' >"$E2E_DIR/none.conf"
export TESSERA_CONFIG=$E2E_DIR/none.conf

# ---- commands and verbs ----
cmds=$(complete_words "")
want=$("$TESSERA" --help | awk '/^  [a-z_]/ { print $1 }' | sort)
check "tessera <TAB> offers every command of tessera --help" [ "$cmds" == "$want" ]
for c in session folder image node completion server login; do
	check "tessera <TAB> offers $c" has "$c" "$cmds"
done
check "the hidden __complete is not offered" not has __complete "$cmds"
check "tessera se<TAB>: server and session" [ "$(complete_words se)" == "$(lines server session)" ]

verbs=$(complete_words session "")
want=$("$TESSERA" session --help | awk '/^  [a-z]/ { print $1 }' | sort)
check "tessera session <TAB> offers the verbs of tessera session --help ($(echo $verbs))" \
	[ "$verbs" == "$want" ]
for v in create ls info rm logs exec shell ssh ssh-config; do
	check "tessera session <TAB> offers $v" has "$v" "$verbs"
done

check "tessera user keys <TAB>: the verbs of the noun below user" \
	[ "$(complete_words user keys "")" == "$(lines add ls rm)" ]
check "tessera user keys add <TAB> completes paths" \
	has "$E2E_DIR/tessera.bash" "$(complete_words user keys add "$E2E_DIR/tessera.b")"

# ---- options and their values ----
opts=$(complete_words session create --)
for o in --name --cpu --mem --fgpu --mount --wait --json --cluster-mode --help; do
	check "tessera session create --<TAB> offers $o" has "$o" "$opts"
done
check "tessera session create --clu<TAB>: the two --cluster- options" \
	[ "$(complete_words session create --clu)" == "$(lines --cluster-mode --cluster-size)" ]
check "--cluster-mode <TAB>: its values" \
	[ "$(complete_words session create --cluster-mode "")" == "$(lines multi-node single-node)" ]
check "--cluster-mode=<TAB> (bash splits at =): its values" \
	[ "$(complete_words session create --cluster-mode = "")" == "$(lines multi-node single-node)" ]
check "an option's value is not taken for the image" \
	[ "$(complete_words session create --cpu 1 --wait --cluster-mode "")" == "$(lines multi-node single-node)" ]
check "tessera session ssh -<TAB> offers -i" has -i "$(complete_words session ssh -)"
check "tessera completion <TAB>: bash and zsh" [ "$(complete_words completion "")" == "$(lines bash zsh)" ]
check "tessera server --seccomp <TAB>: the agent setting's values" \
	[ "$(complete_words server --seccomp "")" == "$(lines default tessera)" ]
check "tessera image build <TAB> completes paths" \
	has "$E2E_DIR/tessera.bash" "$(complete_words image build "$E2E_DIR/tessera.b")"

# No server: nothing, quietly.
check "session names without a server: none" [ -z "$(complete_words session info "")" ]
check "and no message ($(cat "$E2E_DIR/complete.err"))" [ ! -s "$E2E_DIR/complete.err" ]
"$TESSERA" __complete sessions >"$E2E_DIR/names.out" 2>"$E2E_DIR/names.err"
check "tessera __complete without a server fails" [ $? -ne 0 ]
check "quietly" [ ! -s "$E2E_DIR/names.out" -a ! -s "$E2E_DIR/names.err" ]

# ---- every option a --help names is offered ----
# help_opts HELP CMD [noun]: the options HELP names for CMD ("node info"):
# on its usage lines, and, when HELP is CMD's own (not its noun's), on the
# lines that list options.
help_opts() {
	local help=$1 cmd=$2 own=0 first
	first=$(head -n1 <<<"$help")
	[[ $# -eq 2 && ($first == "usage: tessera $cmd" || $first == "usage: tessera $cmd "*) ]] && own=1
	awk -v cmd="tessera $cmd" -v own="$own" '
		# project add-member prints create and set'"'"'s quota options after its own.
		/\(create, set\):$/ && cmd !~ / (create|set)$/ { own = 0 }
		{
			line = $0
			mine = index(line, cmd " ") || substr(line, length(line) - length(cmd) + 1) == cmd
			if (!(mine || (own && line ~ /^[ \t]+-/)))
				next
			while (match(line, /(^|[^a-z0-9-])(--[a-z][a-z0-9-]*|-[a-zA-Z],)/)) {
				w = substr(line, RSTART, RLENGTH)
				sub(/^[^-]/, "", w)
				sub(/,$/, "", w)
				print w
				line = substr(line, RSTART + RLENGTH)
			}
		}' <<<"$help" | sort -u
}
missing=()
for c in $cmds; do
	vs=$(complete_words "$c" "")
	if [[ -z $vs || $vs == -* || $c == completion ]]; then
		targets=("$c")
	else
		targets=()
		for v in $vs; do targets+=("$c $v"); done
	fi
	for t in "${targets[@]}"; do
		# A verb without a --help of its own (admin's): its noun's usage lines.
		noun=()
		# shellcheck disable=SC2086
		help=$("$TESSERA" $t --help 2>/dev/null) || { help=$("$TESSERA" ${t%% *} --help 2>/dev/null); noun=(noun); }
		# shellcheck disable=SC2086
		offered=$(complete_words $t -)
		for o in $(help_opts "$help" "$t" "${noun[@]}"); do
			has "$o" "$offered" || missing+=("tessera $t $o")
		done
	done
done
check "every option named in a --help is offered (missing: ${missing[*]})" [ ${#missing[@]} -eq 0 ]

# ---- names from a real server ----
start_server || { e2e_done; exit 1; }
"$TESSERA" session create "$TEST_IMAGE" --name comp-one --cpu 0.1 --mem 32m --wait >/dev/null
check "session comp-one runs" wait_status comp-one RUNNING
"$TESSERA" folder create comp-data >/dev/null
check "folder comp-data made" [ $? -eq 0 ]

names=$(complete_words session info "")
check "tessera session info <TAB> offers comp-one ($(echo $names))" has comp-one "$names"
check "tessera session info comp<TAB>: comp-one" [ "$(complete_words session info comp)" == comp-one ]
check "tessera session rm comp-one <TAB>: more sessions" has comp-one "$(complete_words session rm comp-one "")"
check "tessera session info --owner <TAB> takes no name" [ -z "$(complete_words session info --owner "")" ]
check "after exec's -- nothing is offered" [ -z "$(complete_words session exec comp-one -- "")" ]
folders=$(complete_words folder info "")
check "tessera folder info <TAB> offers comp-data ($(echo $folders))" has comp-data "$folders"
check "tessera session create --mount <TAB> offers comp-data" \
	has comp-data "$(complete_words session create --mount "")"
images=$(complete_words session create "")
check "tessera session create <TAB> offers the image $TEST_IMAGE ($(echo $images))" has "$TEST_IMAGE" "$images"
check "tessera node info <TAB> offers this node" has "$E2E_AGENT_ID" "$(complete_words node info "")"
check "no message with a server either ($(cat "$E2E_DIR/complete.err"))" [ ! -s "$E2E_DIR/complete.err" ]

# ---- zsh ----
zscript=$E2E_DIR/_tessera
"$TESSERA" completion zsh >"$zscript"
check "tessera completion zsh starts with #compdef" [ "$(head -n1 "$zscript")" == "#compdef tessera" ]
if command -v zsh >/dev/null; then
	check "zsh reads it (zsh -n)" zsh -n "$zscript"
	# The part both shells share, run by zsh as the script runs it.
	zout=$(zsh -fc 'compdef() { :; }; source "$1"; setopt shwordsplit; _tessera_bin=$2
		_tessera_candidates "" session create --cluster-mode; _tessera_candidates "" folder info' \
		_ "$zscript" "$TESSERA" | sort)
	check "in zsh: option values and folder names ($(echo $zout))" \
		[ "$zout" == "$(lines comp-data multi-node single-node)" ]
	# And as a user gets it: an interactive zsh with compinit, the script
	# in fpath as make install puts it, Tab pressed on a pty (zpty). Each
	# line is run with $((6*7)) before it, so its output, unlike the echo
	# of what was typed, says "42 ". The timeout only stops a hang.
	mkdir -p "$E2E_DIR/zfunc" "$E2E_DIR/zbin"
	cp "$zscript" "$E2E_DIR/zfunc/_tessera"
	ln -s "$TESSERA" "$E2E_DIR/zbin/tessera"
	cat >"$E2E_DIR/zpty.zsh" <<-'ZSH'
		zmodload zsh/zpty
		setopt extendedglob
		zpty z "env PATH=$1:\$PATH HOME=$3 TERM=dumb zsh -f -i"
		zpty -w z "PS1='%% '; fpath=($2 \$fpath); autoload -U compinit; compinit -u -D"
		for line in 'tessera session info comp' 'tessera session create --clus'; do
			zpty -w -n z "$line"$'\t'
			zpty -w -n z $'\C-a print -r -- $((6*7)) \C-m'
			zpty -r z out '*42 tessera*'$'\n'
			print -r -- "${${out##*42 }%%[[:space:]]#}"
		done
		zpty -d z
	ZSH
	zgot=$(timeout 60 zsh -f "$E2E_DIR/zpty.zsh" "$E2E_DIR/zbin" "$E2E_DIR/zfunc" "$E2E_DIR" 2>&1 | tr -d '\r')
	check "zsh with compinit completes a session name and an option on Tab ($zgot)" \
		[ "$zgot" == "$(printf '%s\n' 'tessera session info comp-one' 'tessera session create --cluster-')" ]
else
	e2e_log "zsh not installed (scripts/bootstrap installs it): zsh checks skipped"
fi

"$TESSERA" session rm comp-one >/dev/null

# ---- the manual page ----
"$TESSERA" manpage >"$E2E_DIR/tessera.1"
warn=$(groff -ww -man -Tutf8 "$E2E_DIR/tessera.1" 2>&1 >/dev/null)
check "tessera(1) renders without warnings ($warn)" [ -z "$warn" ]
page=$(groff -man -Tascii -P-cbou "$E2E_DIR/tessera.1" 2>/dev/null | tr -s ' \n' '  ')
check "it describes tessera session create's --mount" grep -q -- '--mount FOLDER' <<<"$page"
check "and tessera completion" grep -q 'tessera completion bash|zsh' <<<"$page"
e2e_done
