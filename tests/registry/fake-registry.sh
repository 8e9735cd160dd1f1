#!/bin/sh
# A stand-in for docker-registry in tests/registry/test_registry.c: called
# as "fake-registry.sh serve CONFIG", serves CONFIG's directory over HTTP on
# the config's addr, where a v2/ directory makes GET /v2/ answer 200.
[ "$1" = serve ] || exit 2
dir=$(dirname "$2")
addr=$(sed -n 's/^ *addr: *//p' "$2")
mkdir -p "$dir/v2"
echo "$$" >> "$dir/pids"
cd "$dir" && exec python3 -m http.server "${addr##*:}" --bind "${addr%:*}"
