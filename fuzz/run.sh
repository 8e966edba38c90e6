#!/usr/bin/env bash
# Runs every cargo-fuzz (libFuzzer) target of fuzz/fuzz_targets for SECONDS each (default
# 600) and prints, per target, the executions, the seconds it ran, the corpus size and
# whether it crashed; exits 1 if any target crashed (the input is kept in
# fuzz/artifacts/<target>/; turn it into a regression test in the crate it broke).
#
# It builds on the stable toolchain: cargo-fuzz passes nightly-only flags (-Z), which
# RUSTC_BOOTSTRAP=1 allows; with `-s none` no sanitizer runtime is needed (the targets are
# safe Rust; overflow checks and debug assertions are on in the fuzz profile). cargo-fuzz
# itself is installed from crates.io when missing.
#
# Env: FUZZ_PROFILE (release, the default: optimised, one codegen unit per crate as
#      cargo-fuzz builds for real runs; dev: unoptimised, several codegen units — builds
#      in a fraction of the time, for smoke runs such as ./test.sh's),
#      FUZZ_TARGETS (space-separated targets to run; default every target),
#      FUZZ_JOBS (targets run at once, default 1), FUZZ_TARGET_DIR (default
#      $CARGO_TARGET_DIR/fuzz, or fuzz/target), FUZZ_CORPUS (default
#      ~/.cache/switchboard/fuzz-corpus: kept between runs, seeded from fuzz/seeds).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
EACH="${1:-600}"
JOBS="${FUZZ_JOBS:-1}"
export RUSTC_BOOTSTRAP=1
export CARGO_TARGET_DIR="${FUZZ_TARGET_DIR:-${CARGO_TARGET_DIR:+$CARGO_TARGET_DIR/fuzz}}"
[ -n "$CARGO_TARGET_DIR" ] || export CARGO_TARGET_DIR="$PWD/target"
CORPUS="${FUZZ_CORPUS:-$HOME/.cache/switchboard/fuzz-corpus}"
log() { echo "[fuzz] $*" >&2; }

if ! cargo fuzz --version >/dev/null 2>&1; then
  log "installing cargo-fuzz from crates.io"
  cargo install --locked cargo-fuzz --version 0.13.1 >&2
fi
case "${FUZZ_PROFILE:-release}" in
  release) PROFILE_FLAG=-O; log "building the targets (stable toolchain, no sanitizer, optimised with debug assertions)" ;;
  dev) PROFILE_FLAG=--dev; log "building the targets (stable toolchain, no sanitizer, unoptimised: a smoke build)" ;;
  *) log "FUZZ_PROFILE is release or dev, not ${FUZZ_PROFILE}"; exit 2 ;;
esac
cargo fuzz build -s none "$PROFILE_FLAG" >&2
mkdir -p "$CORPUS" artifacts logs

run_one() {
  local target="$1" corpus="$CORPUS/$1" out="logs/$1.log"
  mkdir -p "$corpus" "artifacts/$target"
  [ -d "seeds/$target" ] && cp -n seeds/"$target"/* "$corpus"/ 2>/dev/null || true
  local started=$SECONDS status=ok
  if ! cargo fuzz run -s none "$PROFILE_FLAG" "$target" "$corpus" -- -max_total_time="$EACH" -print_final_stats=1 \
      -artifact_prefix="artifacts/$target/" -close_fd_mask=3 >"$out" 2>&1; then
    status=CRASH
  fi
  local execs
  execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$out" | tail -n1)"
  printf '%-22s %12s execs %6s s %7s inputs  %s\n' "$target" "${execs:-?}" "$((SECONDS - started))" \
    "$(find "$corpus" -type f | wc -l)" "$status"
  [ "$status" = ok ]
}

failed=0
pids=()
for target in ${FUZZ_TARGETS:-$(cargo fuzz list)}; do
  run_one "$target" & pids+=($!)
  if [ "${#pids[@]}" -ge "$JOBS" ]; then
    wait "${pids[0]}" || failed=1
    pids=("${pids[@]:1}")
  fi
done
for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
[ "$failed" = 0 ] || { log "a target crashed: see fuzz/logs and fuzz/artifacts"; exit 1; }
log "no crashes"
