#!/usr/bin/env bash
# The package as it is published: `python -m build` (sdist and wheel, without build
# isolation: the pinned setuptools of the test virtualenv) of a copy of the package's files;
# the wheel installed into a fresh virtualenv holds one text turn with a real `switchboard
# local` (turn.py, run from the temporary folder, so the package comes from that
# virtualenv, not from this checkout), and the sdist installs into another and imports, with
# its type marker. Run by `run-tests.sh --package`, which sets SWITCHBOARD_BIN.
# Args: the repository root, the test virtualenv.
set -euo pipefail
ROOT="$1"
VENV="$2"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=../../start-local.sh
. "$ROOT/clients/start-local.sh"
tmp="$(mktemp -d)"
trap 'stop_local; rm -rf "$tmp"' EXIT

mkdir "$tmp/package"
cp -R "$HERE/pyproject.toml" "$HERE/README.md" "$HERE/src" "$tmp/package/"
find "$tmp/package" -name __pycache__ -prune -exec rm -rf {} +
"$VENV/bin/python" -m build --no-isolation --sdist --wheel --outdir "$tmp/dist" "$tmp/package" >"$tmp/build.log" 2>&1 \
  || { cat "$tmp/build.log" >&2; exit 1; }
version="$(sed -n 's/^version = "\(.*\)"$/\1/p' "$HERE/pyproject.toml")"
wheel="$tmp/dist/switchboard_client-$version-py3-none-any.whl"
sdist="$tmp/dist/switchboard_client-$version.tar.gz"
[ -f "$wheel" ] && [ -f "$sdist" ] || { echo "python -m build made: $(ls "$tmp/dist")" >&2; exit 1; }

cd "$tmp"
python3 -m venv "$tmp/wheel-env"
"$tmp/wheel-env/bin/pip" install --quiet --disable-pip-version-check "$wheel" >&2
[ -x "$tmp/wheel-env/bin/switchboard-client" ] || { echo "the wheel installed no switchboard-client command" >&2; exit 1; }
"$tmp/wheel-env/bin/switchboard-client" --help >/dev/null
python3 -m venv "$tmp/sdist-env"
"$tmp/sdist-env/bin/pip" install --quiet --disable-pip-version-check "$sdist" >&2
"$tmp/sdist-env/bin/python" - "$version" <<'PY'
import importlib.metadata, importlib.resources, sys
import switchboard_client
assert importlib.metadata.version("switchboard-client") == sys.argv[1], importlib.metadata.version("switchboard-client")
assert switchboard_client.PROTOCOL_VERSION == sys.argv[1], switchboard_client.PROTOCOL_VERSION
assert importlib.resources.files("switchboard_client").joinpath("py.typed").is_file(), "no py.typed"
print(f"switchboard-client {sys.argv[1]} from its sdist: imports, typed")
PY
start_local "$ROOT" "$tmp"
"$tmp/wheel-env/bin/python" "$HERE/test-package/turn.py" "ws://$LOCAL_ADDR/v1/session" "$version"
