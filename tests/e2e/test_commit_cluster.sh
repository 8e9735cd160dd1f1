#!/usr/bin/env bash
# The same as test_commit.sh in cluster mode: `tessera manager` with
# registry_url in manager.conf (a docker-registry started here, as an
# administrator runs one) and a `tessera agent`: the commit goes through the
# agent's RPC and is pushed; a session of the image removed from Docker
# pulls it back, its progress coming through the agent's events; `tessera
# image pull` through the RPC too.
. "$(dirname "$0")/lib.sh"
e2e_setup
REGISTRY_BIN=/usr/bin/docker-registry
if [[ ! -x $REGISTRY_BIN ]]; then
	e2e_log "docker-registry is not installed (scripts/bootstrap installs it): skipped"
	e2e_done
	exit 77
fi
mport=$(free_port); aport=$(free_port); rport=$(free_port)
secret=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
mkdir -p "$E2E_DIR/registry"
cat >"$E2E_DIR/registry/config.yml" <<CONF
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $E2E_DIR/registry/storage
http:
  addr: 127.0.0.1:$rport
CONF
"$REGISTRY_BIN" serve "$E2E_DIR/registry/config.yml" >>"$E2E_DIR/registry.log" 2>&1 &
E2E_PIDS+=("$!")
e2e_manager_conf "$E2E_DIR/manager.conf" "$mport" "$secret" "$E2E_DIR/mdata" \
	"registry_url=http://127.0.0.1:$rport"
e2e_agent_conf "$E2E_DIR/agent.conf" "$E2E_AGENT_ID" "$mport" "$aport" "$secret" "$E2E_DIR/agent-data" \
	cpu=2 mem=1GiB
"$TESSERA" manager --config "$E2E_DIR/manager.conf" >>"$E2E_DIR/manager.log" 2>&1 &
E2E_PIDS+=("$!")
"$TESSERA" agent --config "$E2E_DIR/agent.conf" >>"$E2E_DIR/agent.log" 2>&1 &
E2E_PIDS+=("$!")
for _ in $(seq 1 100); do [[ -s $E2E_DIR/mdata/admin.conf ]] && break; sleep 0.1; done
export TESSERA_CONFIG=$E2E_DIR/mdata/admin.conf
T() { "$TESSERA" "$@"; }
has_image() { docker image inspect "$1" >/dev/null 2>&1; }
matches() { [[ $1 =~ $2 ]]; }
REF=   # tessera-private/admin-<12 hex of the admin's id>/csrc:c1, from the commit
cleanup() { [[ -n $REF ]] && docker rmi -f "$REF" >/dev/null 2>&1; return 0; }
for _ in $(seq 1 100); do curl -fsS "http://127.0.0.1:$rport/v2/" -o /dev/null 2>&1 && break; sleep 0.1; done
for _ in $(seq 1 100); do T node ls 2>/dev/null | grep -q ALIVE && break; sleep 0.1; done

# Writing under /usr/local takes root: sessions run as the work user
# unless the owner's policy allows root (docs/admin.md, "Session isolation").
T config set policy.admin@tessera.local '{"allow_root": true}' >/dev/null
T session create "$TEST_IMAGE" --name csrc --cpu 1 --mem 32m --wait --root \
	--startup-command 'mkdir -p /usr/local/c && echo cluster-file > /usr/local/c/f && exec sleep 1000' >/dev/null
check "a session runs on the remote agent" wait_status csrc RUNNING
for _ in $(seq 1 100); do T session exec csrc -- cat /usr/local/c/f >/dev/null 2>&1 && break; sleep 0.1; done
out=$(T session commit csrc --tag c1 --wait 2>&1)
REF=$(sed -n 's/ is ready.*//p' <<<"$out")
check "named in the admin's name space ($REF)" matches "$REF" '^tessera-private/admin-[0-9a-f]{12}/csrc:c1$'
check "committed through the agent and pushed ($out)" contains "$out" "$REF is ready (pushed to the cluster registry)"
tags=$(curl -fsS "http://127.0.0.1:$rport/v2/${REF%:c1}/tags/list")
check "the registry at registry_url has it" contains "$tags" '"c1"'

docker rmi "$REF" >/dev/null
T session create "$REF" --name cpulled --cpu 1 --mem 32m --wait >/dev/null
check "a session of the removed image RUNNING" wait_status cpulled RUNNING
hist=$(T session info cpulled)
check "'pulling' in its history" contains "$hist" "pulling $REF from the registry"
check "it has the file" [ "$(T session exec cpulled -- cat /usr/local/c/f)" == "cluster-file" ]

T session rm cpulled >/dev/null
wait_status cpulled TERMINATED
docker rmi "$REF" >/dev/null
out=$(T image pull "$REF" 2>&1)
check "image pull through the agent ($out)" contains "$out" "$E2E_AGENT_ID: done"
check "... the image is back" has_image "$REF"

T session rm csrc >/dev/null
cleanup
e2e_done
