#!/usr/bin/env bash
# Browser test of the Data page (docs/folders.md, "In the web UI") in
# Debian's Chromium (playwright-core): a folder is made; files go up by
# drag and drop (a real drop event with a DataTransfer) and by the file
# input, each with its progress bar to the end; a directory is browsed
# into; a file comes back as a browser download, unchanged; an upload is
# cancelled and leaves nothing; a file is removed after its confirmation;
# the folder goes to the trash and comes back; a read-only share shows
# its write actions disabled with the reason; a session launched with the
# folder picked mounts it at the path chosen (checked with exec), and the
# folder cannot be removed then without force. First, without a browser:
# 200 MB up and down through the webserver, unchanged, with the server's
# memory bounded (the webserver relays the bytes, it does not hold them).
. "$(dirname "$0")/../e2e/lib.sh"
UI_SRC=${UI_SRC:?UI_SRC must point at the ui/ source dir (its node_modules has playwright-core)}
if [[ ! -x /usr/bin/chromium ]]; then
	echo "chromium is not installed (/usr/bin/chromium); run 'make setup'"
	exit 1
fi
e2e_setup

start_server || { e2e_done; exit 1; }
web_url=$(sed -n 's/^web_url *= *//p' "$TESSERA_CONFIG")
password=$(sed -n 's/^password *= *//p' "$TESSERA_CONFIG")
check "admin.conf has web_url ($web_url)" [ -n "$web_url" ]

# ---- 200 MB through the webserver, with curl as the browser ----
T() { "$TESSERA" "$@"; }
check "folder create big" T folder create big >/dev/null
jar=$E2E_DIR/cookies
csrf=$(curl -s -c "$jar" -H 'Content-Type: application/json' \
	-d "{\"email\":\"admin@tessera.local\",\"password\":\"$password\"}" "${web_url}auth/login" |
	python3 -c 'import json,sys; print(json.load(sys.stdin)["csrf_token"])')
check "logged in to the webserver" [ -n "$csrf" ]
head -c 200M /dev/urandom >"$E2E_DIR/big"
want=$(sha256sum <"$E2E_DIR/big" | cut -d' ' -f1)
hwm() { sed -n 's/^VmHWM: *\([0-9]*\) kB/\1/p' "/proc/$SERVER_PID/status"; }
before=$(hwm)
code=$(curl -s -o "$E2E_DIR/up.json" -w '%{http_code}' -b "$jar" -X PUT -H "X-CSRF-Token: $csrf" \
	-H "X-Tessera-Content-SHA256: $want" -H 'Content-Type: application/octet-stream' \
	--data-binary @"$E2E_DIR/big" "${web_url}api/v1/folders/big/upload?path=big.bin")
check "200 MB upload through the webserver: 201 ($code $(head -c 300 "$E2E_DIR/up.json"))" [ "$code" = 201 ]
code=$(curl -s -D "$E2E_DIR/down.hdr" -o "$E2E_DIR/back" -w '%{http_code}' -b "$jar" \
	"${web_url}api/v1/folders/big/download?path=big.bin")
check "200 MB download through the webserver: 200" [ "$code" = 200 ]
check "the download is the upload, byte for byte (sha256)" \
	[ "$(sha256sum <"$E2E_DIR/back" | cut -d' ' -f1)" = "$want" ]
check "the download has its length" grep -qi '^Content-Length: 209715200' "$E2E_DIR/down.hdr"
check "the download is an attachment named big.bin" grep -qi "^Content-Disposition: attachment; filename\*=UTF-8''big.bin" "$E2E_DIR/down.hdr"
after=$(hwm)
# The server process (manager and webserver) may grow by a few buffers,
# never by the file: 64 MiB is far under the 200 MB that went through.
check "the server's peak memory grew by $(((after - before) / 1024)) MiB, far less than the 200 MB relayed" \
	[ $((after - before)) -lt 65536 ]
code=$(curl -s -o "$E2E_DIR/bad.json" -w '%{http_code}' -b "$jar" -X PUT -H "X-CSRF-Token: $csrf" \
	-H "X-Tessera-Content-SHA256: $(echo other | sha256sum | cut -d' ' -f1)" \
	--data-binary @"$E2E_DIR/big" "${web_url}api/v1/folders/big/upload?path=bad.bin")
check "a body that is not what its checksum says is refused (400)" [ "$code" = 400 ]
code=$(curl -s -o /dev/null -w '%{http_code}' -b "$jar" -X PUT -H "X-Tessera-Content-SHA256: $want" \
	--data-binary @"$E2E_DIR/big" "${web_url}api/v1/folders/big/upload?path=nocsrf.bin")
check "an upload without the CSRF token is refused (403)" [ "$code" = 403 ]
code=$(curl -s -o /dev/null -w '%{http_code}' -b "$jar" -X PUT -H "X-CSRF-Token: $csrf" \
	--data-binary @"$E2E_DIR/big" "${web_url}api/v1/folders/big/upload?path=nohash.bin")
check "an upload without its checksum is refused (400)" [ "$code" = 400 ]
code=$(curl -s -o "$E2E_DIR/dup.json" -w '%{http_code}' -b "$jar" -X PUT -H "X-CSRF-Token: $csrf" \
	-H "X-Tessera-Content-SHA256: $want" --data-binary @"$E2E_DIR/big" \
	"${web_url}api/v1/folders/big/upload?path=big.bin")
check "the manager's early answer comes through the relay (409 exists)" [ "$code" = 409 ]
listing=$(T folder files big)
check "only big.bin is in the folder" [ "$(grep -c '\.bin' <<<"$listing")" = 1 ]
rm -f "$E2E_DIR/big" "$E2E_DIR/back"

# ---- the browser ----
head -c 48M /dev/urandom >"$E2E_DIR/slow.bin"
WEB_URL=$web_url ADMIN_EMAIL=admin@tessera.local ADMIN_PASSWORD=$password IMAGE=$TEST_IMAGE \
	PROFILE_DIR=$E2E_DIR/chromium SHOTS=${SCREENSHOT_DIR:-$E2E_DIR/shots} UI_SRC=$UI_SRC \
	SLOW_FILE=$E2E_DIR/slow.bin DOWNLOADS=$E2E_DIR/downloads \
	node "$(dirname "$0")/folders.test.mjs" 2>&1 | tee "$E2E_DIR/browser.log"
while read -r line; do
	case $line in
	"ok "*) ok "${line#ok }" ;;
	"FAIL "*) fail "${line#FAIL }" ;;
	esac
done < "$E2E_DIR/browser.log"
check "the browser test ran to its end" grep -q '^# done' "$E2E_DIR/browser.log"
e2e_done
