#!/usr/bin/env bash
# Runs the TypeScript client's tests (test/) against a real `switchboard local` of
# examples/banking: installs the pinned dev dependencies of package-lock.json with `npm ci`
# into a cache keyed by the lock file ($SWITCHBOARD_CACHE, default ~/.cache/switchboard,
# then clients-typescript-<hash>) and links it as node_modules; checks the generated types
# match the schema, type-checks, builds and runs `node --test`.
#
# `run-tests.sh --browser` runs the browser test instead (test-browser/: Microphone and
# Player in headless Chromium), built into dist-browser/ so both may run at once.
# `run-tests.sh --package` tests the package as it is published instead: `npm pack` of a
# copy of the package (so nothing is written here), installed with `ws` into a fresh npm
# project, holds one text turn with a real `switchboard local` (test-package/turn.mjs).
#
# Env: SWITCHBOARD_BIN         the `switchboard` binary (default: built with cargo, dev profile)
#      SWITCHBOARD_PLAYWRIGHT  (--browser) playwright-core's directory; tests/tools/install.sh
#                              installs it and Debian's chromium
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
CACHE="${SWITCHBOARD_CACHE:-$HOME/.cache/switchboard}"
key="$(sha256sum "$HERE/package-lock.json" | cut -c1-12)"
DEPS="$CACHE/clients-typescript-$key"
# One install at a time (the suite runs this script's modes at once: a second run's
# `rm -rf` would pull the dependencies from under the first's npm).
mkdir -p "$CACHE"
exec 9>"$CACHE/clients-typescript.lock"
flock 9
if ! [ -f "$DEPS/.installed" ]; then
  echo "[clients/typescript] installing the dev dependencies into $DEPS" >&2
  rm -rf "$DEPS"
  mkdir -p "$DEPS"
  cp "$HERE/package.json" "$HERE/package-lock.json" "$DEPS/"
  (cd "$DEPS" && npm ci --silent --no-audit --no-fund >&2)
  touch "$DEPS/.installed"
fi
flock -u 9
# Linked beside its name and renamed over it: a concurrent run never finds it missing.
tmp="$HERE/.node_modules.$$"
ln -sfn "$DEPS/node_modules" "$tmp"
mv -Tf "$tmp" "$HERE/node_modules"

if [ -z "${SWITCHBOARD_BIN:-}" ]; then
  (cd "$ROOT" && cargo build --quiet --locked -p switchboard-dataplane --bin switchboard)
  SWITCHBOARD_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/debug/switchboard"
fi
export SWITCHBOARD_BIN
cd "$HERE"
if [ "${1:-}" = "--package" ]; then
  exec bash "$HERE/test-package/run.sh" "$ROOT"
elif [ "${1:-}" = "--browser" ]; then
  : "${SWITCHBOARD_PLAYWRIGHT:?set it to the playwright-core directory that tests/tools/install.sh installs}"
  chromium="$(command -v chromium)" || { echo "chromium is not on PATH; tests/tools/install.sh installs it" >&2; exit 1; }
  node_modules/.bin/tsc -p tsconfig.json --outDir dist-browser
  node test-browser/run.mjs "$SWITCHBOARD_PLAYWRIGHT" "$chromium" "$SWITCHBOARD_BIN" dist-browser
else
  npm test --silent
fi
