#!/usr/bin/env bash
# VS Code in the browser (images/code-server, docs/images.md): a session of
# the code-server image, its app `vscode` opened through the proxy as a
# browser opens it: the setup link's cookie, code-server's workbench page,
# and the WebSocket the workbench opens to its server (upgraded with the
# page's own Origin, which code-server compares with the Host). Without the
# cookie the proxy answers nothing of code-server's.
# `make images-test` runs it and requires the image
# (TESSERA_CODE_SERVER_REQUIRED=1); as a Meson test it is skipped when the
# image is not built, so that `make test` never builds it (it takes many
# minutes: code-server's native modules are compiled at build time).
. "$(dirname "$0")/../e2e/lib.sh"

SRC=$(cd "$(dirname "$0")/../.." && pwd)
IMAGE=tessera/code-server:4.100-node20
VERSION=4.100.3
if ! docker image inspect "$IMAGE" >/dev/null 2>&1; then
	if [[ -n "${TESSERA_CODE_SERVER_REQUIRED:-}" ]]; then
		echo "FAIL not built: $IMAGE (run 'make images' as root)"
		exit 1
	fi
	echo "skip: not built: $IMAGE ('make images' builds it)"
	exit 77
fi

e2e_setup
start_server --app-ports "$(e2e_free_port_range 4)" --registry none || { e2e_done; exit 1; }
label() { docker image inspect --format "{{index .Config.Labels \"$2\"}}" "$1"; }

# The site's npm registry (--npm-registry, npm_registry): a URL, or a
# one-line refusal naming where it came from.
out=$("$TESSERA" image build --check --npm-registry ftp://npm.example "$SRC/images/code-server/4.100-node20.recipe" 2>&1)
check "--npm-registry must be http(s) ($out)" has_line "$out" \
	"tessera: npm registry 'ftp://npm.example' (--npm-registry) is not an http:// or https:// URL"
printf 'npm_registry = http://npm example\n' >"$E2E_DIR/images.conf"
out=$("$TESSERA" image build --check --config "$E2E_DIR/images.conf" "$SRC/images/code-server/4.100-node20.recipe" 2>&1)
check "so must npm_registry, named with its file ($out)" contains "$out" "($E2E_DIR/images.conf) is not an http"
printf 'npm_registry = http://npm.example:4873/\n' >"$E2E_DIR/images.conf"
out=$("$TESSERA" image build --check --config "$E2E_DIR/images.conf" "$SRC/images/code-server/4.100-node20.recipe" 2>&1)
check "a good one is taken ($out)" has_prefix_line "$out" "${IMAGE%%:*}:${IMAGE#*:} [0-9a-f]\{64\} "

check "$IMAGE declares VS Code and sshd" [ "$(label "$IMAGE" ai.backend.service-ports)" == "vscode:http:8180,sshd:tcp:2200" ]

"$TESSERA" session create "$IMAGE" --name vs --cpu 1 --mem 2g --wait >/dev/null 2>&1
check "a session of $IMAGE starts" wait_status vs RUNNING
out=$("$TESSERA" session exec vs -- sh -c 'code-server --version; node --version; cat /etc/backend.ai/service-defs/vscode.json' 2>&1)
echo "$out" | sed "s|^|# $IMAGE: |"
check "code-server $VERSION is installed" has_prefix_line "$out" "$VERSION "
check "on Debian's Node.js 20" has_prefix_line "$out" "v20\."
check "its service definition binds code-server to the loopback without a password" \
	contains "$out" '"--auth", "none", "--bind-addr", "127.0.0.1:{ports[0]}"'

apps=$("$TESSERA" session apps vs 2>&1)
check "session apps lists vscode ($apps)" grep -qE '^vscode[[:space:]]+http[[:space:]]+8180' <<<"$apps"

open_app vs vscode
check "session app vscode sets the app's cookie ($SETUP)" bash -c '[ "$1" == 302 ] && [ -n "$2" ]' _ "$SETUP" "$COOKIE"
# code-server's own health endpoint, once the runner has started it.
poll "$ORIGIN" /healthz "$COOKIE"
check "code-server answers through the proxy once started (seen:$SEEN)" [ $? -eq 0 ]
# ("expired" until a page has been served: code-server counts requests
# as heartbeats.)
check "with its health answer ($(head -c 100 "$E2E_DIR/body"))" grep -qE '"status":"(alive|expired)","lastHeartbeat"' "$E2E_DIR/body"

# The page: / redirects to the folder the definition opens.
c=$(curl -s -o "$E2E_DIR/root" -D "$E2E_DIR/root.h" -w '%{http_code}' -b "$COOKIE" "$ORIGIN/")
loc=$(sed -n 's/^[Ll]ocation: *//p' "$E2E_DIR/root.h" | tr -d '\r')
check "/ redirects to the home folder ($c $loc)" bash -c '[ "$1" == 302 ] && [[ "$2" == *"folder=/home/work"* ]]' _ "$c" "$loc"
c=$(code "$ORIGIN" "/?folder=/home/work" "$COOKIE")
check "the workbench page answers 200 ($c)" [ "$c" == 200 ]
check "it is VS Code's workbench" grep -q 'workbench-web-configuration' "$E2E_DIR/body"
check "of code-server $VERSION" grep -q "codeServerVersion&quot;:&quot;$VERSION" "$E2E_DIR/body"
c=$(code "$ORIGIN" /healthz)
check "without the cookie the proxy does not relay ($c)" [ "$c" != 200 ]

# The WebSocket the workbench opens to its server (VS Code's remote
# protocol on /?reconnectionToken=...): the upgrade through the proxy is
# answered 101 with the key's accept value (RFC 6455's example key).
ws() {
	curl -s -i -N --max-time 5 -b "$COOKIE" -H "Origin: $1" \
		-H 'Connection: Upgrade' -H 'Upgrade: websocket' -H 'Sec-WebSocket-Version: 13' \
		-H 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==' \
		"$ORIGIN/?reconnectionToken=tessera-test-1&reconnection=false&skipWebSocketFrames=false" 2>&1 | tr -d '\r'
}
out=$(ws "$ORIGIN")
echo "$out" | head -n 5 | sed 's|^|# ws: |'
check "code-server's WebSocket upgrades through the proxy" has_prefix_line "$out" "HTTP/1.1 101"
check "with the accept value of the key" has_line "$out" "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
# code-server's own check, which the proxy leaves in place: a page of
# another origin may not open it.
out=$(ws "http://evil.example")
check "a WebSocket from another origin is refused ($(head -n 1 <<<"$out"))" not has_prefix_line "$out" "HTTP/1.1 101"

"$TESSERA" session rm vs >/dev/null
e2e_done
