#!/usr/bin/env bash
# Runs the Python client's tests (tests/) against a real `switchboard local` of
# examples/banking: installs requirements-test.txt (pinned) into a virtualenv cached by its
# hash ($SWITCHBOARD_CACHE, default ~/.cache/switchboard, then clients-python-<hash>), checks
# the generated types match the schema, type-checks the package (mypy --strict) and runs
# pytest.
# `run-tests.sh --package` tests the package as it is published instead: an sdist and a
# wheel built with `python -m build` from a copy of the package (so nothing is written
# here), each installed into a fresh virtualenv; the wheel's holds one text turn with a real
# `switchboard local` (test-package/turn.py).
#
# Env: SWITCHBOARD_BIN  the `switchboard` binary (default: built with cargo, dev profile)
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
CACHE="${SWITCHBOARD_CACHE:-$HOME/.cache/switchboard}"
key="$(sha256sum "$HERE/requirements-test.txt" | cut -c1-12)"
VENV="$CACHE/clients-python-$key"
# One install at a time (the suite runs this script's tests and --package at once: a second
# run's `rm -rf` would pull the virtualenv from under the first's pip).
mkdir -p "$CACHE"
exec 9>"$CACHE/clients-python.lock"
flock 9
if ! [ -f "$VENV/.installed" ]; then
  python3 -c 'import venv, ensurepip' 2>/dev/null || {
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >&2
  }
  echo "[clients/python] installing requirements-test.txt into $VENV" >&2
  rm -rf "$VENV"
  python3 -m venv "$VENV" >&2
  "$VENV/bin/pip" install --quiet --disable-pip-version-check -r "$HERE/requirements-test.txt" >&2
  touch "$VENV/.installed"
fi
flock -u 9

if [ -z "${SWITCHBOARD_BIN:-}" ]; then
  (cd "$ROOT" && cargo build --quiet --locked -p switchboard-dataplane --bin switchboard)
  SWITCHBOARD_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/debug/switchboard"
fi
export SWITCHBOARD_BIN
cd "$HERE"
if [ "${1:-}" = "--package" ]; then
  exec bash "$HERE/test-package/run.sh" "$ROOT" "$VENV"
fi
"$VENV/bin/python" generate.py --check
"$VENV/bin/mypy" --cache-dir "$VENV/.mypy_cache"
PYTHONPATH="$HERE/src" "$VENV/bin/python" -m pytest -q -p no:cacheprovider tests
