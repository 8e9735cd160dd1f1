#!/usr/bin/env bash
# Builds the UI for meson: build.sh UI_SOURCE_DIR OUT_DIR
# Installs the pinned npm packages (from package-lock.json) when
# node_modules is missing or older than the lockfile, type-checks, and
# bundles with Vite into OUT_DIR. Nothing is fetched at run time.
set -euo pipefail
src=$1
out=$(realpath -m "$2")
cd "$src"
if ! command -v npm >/dev/null 2>&1; then
  echo "ui/build.sh: npm is missing; run 'make setup' (scripts/bootstrap installs nodejs and npm)" >&2
  exit 1
fi
if [[ ! -f node_modules/.package-lock.json || package-lock.json -nt node_modules/.package-lock.json ]]; then
  # `npm install --no-save` installs the versions package-lock.json pins and
  # leaves it untouched. Not `npm ci`: it insists on lock entries for every
  # optional per-platform package (rollup's), which the registry reachable
  # here does not describe, so it refuses a lockfile that installs fine.
  npm install --no-save --no-audit --no-fund --loglevel=error
fi
node_modules/.bin/tsc --noEmit -p .
node_modules/.bin/vite build --logLevel warn --outDir "$out" --emptyOutDir
