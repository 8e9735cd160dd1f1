#!/usr/bin/env bash
# docs/openapi.yaml against a live manager with an agent (issue 34, item
# 4): openapi_live.py calls nearly every route, as an admin, a user, the
# agent and the app proxy, and holds each answer's status, Content-Type
# and JSON body to the document (tests/docs checks the document itself
# and that it names exactly the route table's routes).
. "$(dirname "$0")/lib.sh"
e2e_setup
# The test image with the sshd app declared: its apps then carry the ssh
# object (no sshd need run for the listing). Port 2222, not the recipes'
# 2200, which the label parser keeps for the runtime (src/images/labels.c).
SSHD_IMAGE=tessera-test/openapi-sshd:e2e-2
printf 'FROM %s\nLABEL ai.backend.service-ports="sshd:tcp:2222"\n' "$TEST_IMAGE" |
	docker build -q -t "$SSHD_IMAGE" - >/dev/null 2>&1
E2E_IMAGES+=("$SSHD_IMAGE")
mport=$(free_port); aport=$(free_port)
secret=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
e2e_manager_conf "$E2E_DIR/manager.conf" "$mport" "$secret" "$E2E_DIR/mdata" \
	heartbeat_interval_ms=300 wsproxy_url=http://127.0.0.1 "wsproxy_port_range=$(e2e_free_port_range 4)" \
	"storage_hosts=local:$E2E_DIR/folders"
e2e_agent_conf "$E2E_DIR/agent.conf" "$E2E_AGENT_ID" "$mport" "$aport" "$secret" "$E2E_DIR/adata" \
	cpu=2 mem=1GiB "storage_hosts=local:$E2E_DIR/folders"
mkdir -p "$E2E_DIR/folders"
"$TESSERA" manager --config "$E2E_DIR/manager.conf" >>"$E2E_DIR/manager.log" 2>&1 &
E2E_PIDS+=("$!")
"$TESSERA" agent --config "$E2E_DIR/agent.conf" >>"$E2E_DIR/agent.log" 2>&1 &
E2E_PIDS+=("$!")
for _ in $(seq 1 100); do [[ -s $E2E_DIR/mdata/admin.conf ]] && break; sleep 0.1; done
export TESSERA_CONFIG=$E2E_DIR/mdata/admin.conf
wait_alive() {
	for _ in $(seq 1 150); do
		"$TESSERA" node ls --json 2>/dev/null | grep -q '"ALIVE"' && return 0
		sleep 0.1
	done
	return 1
}
check "the agent registers" wait_alive

# Debian's python (python3-yaml, python3-jsonschema: scripts/bootstrap),
# not whatever python3 is first on PATH.
spec=$(dirname "$0")/../../docs/openapi.yaml
out=$(PYTHONPATH=$(dirname "$0") /usr/bin/python3 "$(dirname "$0")/openapi_live.py" "$spec" "$TESSERA_CONFIG" \
	"$secret" "$E2E_AGENT_ID" "$SSHD_IMAGE" 2>&1)
rc=$?
echo "$out"
check "every answer matches docs/openapi.yaml" test "$rc" = 0
check "the calls ran to the end" contains "$out" "not called:"
e2e_done
