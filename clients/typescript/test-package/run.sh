#!/usr/bin/env bash
# The package as it is published: `npm pack` (its prepack builds dist/) of a copy of the
# package's files, installed with `ws` into a fresh npm project in a temporary folder, then
# one text turn with a real `switchboard local` (turn.mjs, run from that project, so the
# package comes from its node_modules, not from this checkout). Run by `run-tests.sh
# --package`, which links the dev dependencies as node_modules and sets SWITCHBOARD_BIN.
# Args: the repository root.
set -euo pipefail
ROOT="$1"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=../../start-local.sh
. "$ROOT/clients/start-local.sh"
tmp="$(mktemp -d)"
trap 'stop_local; rm -rf "$tmp"' EXIT

mkdir "$tmp/package" "$tmp/app"
cp -R "$HERE/package.json" "$HERE/README.md" "$HERE/tsconfig.json" "$HERE/src" "$tmp/package/"
ln -s "$(readlink -f "$HERE/node_modules")" "$tmp/package/node_modules"
tarball="$(cd "$tmp/package" && npm pack --silent --pack-destination "$tmp" | tail -n1)"
version="$(node -p 'require(process.argv[1]).version' "$HERE/package.json")"
[ "$tarball" = "switchboard-client-$version.tgz" ] || { echo "npm pack made $tarball" >&2; exit 1; }
# What a user gets: the built JavaScript and its types, the README and package.json; no sources.
listing="$(tar tzf "$tmp/$tarball" | sort | tr '\n' ' ')"
for file in package/package.json package/README.md package/dist/index.js package/dist/index.d.ts package/dist/session.js; do
  case " $listing " in *" $file "*) ;; *) echo "$tarball lacks $file: $listing" >&2; exit 1 ;; esac
done
case " $listing " in *" package/src/"*) echo "$tarball carries sources: $listing" >&2; exit 1 ;; esac

cd "$tmp/app"
npm init -y >/dev/null
npm install --silent --no-audit --no-fund "$tmp/$tarball" ws@8.18.3 >&2
cp "$HERE/test-package/turn.mjs" .
start_local "$ROOT" "$tmp"
node turn.mjs "ws://$LOCAL_ADDR/v1/session" "$version"
