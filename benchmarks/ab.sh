#!/usr/bin/env bash
# The release checklist's CPU guard: the runtime's CPU per live voice call, this build
# against a baseline build, alternated in one run on the same machine.
#
#   benchmarks/ab.sh <baseline-rev>          # e.g. the last release's tag
#
# Builds `switchboard` at <baseline-rev> (a detached git worktree, removed afterwards) and
# from this working tree, with the same profile, then runs `voice_density` (the runtime
# alone: real-time 20 ms audio both ways, AB_SESSIONS calls at once, against the simulator)
# once with each, alternated (base, head, head, base, base, head, ...), AB_PAIRS times. Per
# run it prints the runtime's CPU per call-minute (core-seconds of the runtime process from
# /proc per minute of one live call), its RSS before any session, and the machine's load
# average; then the medians and their ratio. Exits 1 when this build's median is more than
# AB_THRESHOLD percent above the baseline's, 2 when a run failed.
#
# Environment (defaults in brackets):
#   AB_PROFILE    [bench]  cargo profile of both builds (bench = fat LTO, what ships;
#                          release builds in a fraction of the time, for a quick look)
#   AB_PAIRS      [3]      runs of each build
#   AB_SESSIONS   [50]     live calls during each run
#   AB_WINDOW_S   [20]     measured seconds per run (after 3 s of settling)
#   AB_THRESHOLD  [10]     percent above the baseline that fails
#   AB_BASE_BIN, AB_HEAD_BIN   already built `switchboard` binaries: skip that build
#   AB_BASE_EXAMPLES  [the baseline's own examples/banking]  the Example Bank folder the
#                          baseline runs with (a baseline older than this tree's examples
#                          may not know their newer fields); with AB_BASE_BIN, this tree's
#   AB_BENCH_EXE  [unset]  an already built `voice_density` bench executable: skip its build
#   AB_KEEP       [unset]  a folder to copy both binaries into (base/, head/)
#   CARGO_TARGET_DIR       shared by both builds, one after the other (their third-party
#                          crates are built once)
#
# CPU figures move with the machine's load: only figures of one run, alternated, are
# compared here, never figures of another hour.
set -euo pipefail

usage() { sed -n '2,34p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
[[ $# -eq 1 && $1 != -h && $1 != --help ]] || usage

root=$(git rev-parse --show-toplevel)
rev=$(git -C "$root" rev-parse --verify "$1^{commit}")
profile=${AB_PROFILE:-bench}
pairs=${AB_PAIRS:-3}
sessions=${AB_SESSIONS:-50}
window=${AB_WINDOW_S:-20}
threshold=${AB_THRESHOLD:-10}
work=$(mktemp -d "${TMPDIR:-/tmp}/switchboard-ab.XXXXXX")
base_src="$work/base-src"
cleanup() {
    if [[ -d $base_src ]]; then git -C "$root" worktree remove --force "$base_src" || true; fi
    rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/base" "$work/head"

# Builds `switchboard` (and, with $2, the voice_density bench) in $1 with the profile;
# prints the bench executable's path when asked for it.
build() {
    local dir=$1 bench=${2:-}
    local args=(build --profile "$profile" --locked -p switchboard-dataplane --bin switchboard)
    [[ -n $bench ]] && args+=(--bench voice_density)
    (cd "$dir" && cargo "${args[@]}" --message-format=json-render-diagnostics) |
        python3 -c '
import json, sys
want = sys.argv[1]
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") != "compiler-artifact" or not m.get("executable"):
        continue
    t = m["target"]
    if t["name"] == want:
        print(m["executable"])
' "${bench:-switchboard}"
}

echo "== this tree ($(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet HEAD || echo ', with uncommitted changes')), profile $profile" >&2
bench_exe=${AB_BENCH_EXE:-$(build "$root/dataplane" voice_density)}
[[ -x $bench_exe ]] || { echo "ab.sh: no voice_density bench executable was built" >&2; exit 2; }
cp "$bench_exe" "$work/voice_density"
if [[ -n ${AB_HEAD_BIN:-} ]]; then
    cp "$AB_HEAD_BIN" "$work/head/switchboard"
else
    cp "$(build "$root/dataplane" | tail -n1)" "$work/head/switchboard"
fi

if [[ -n ${AB_BASE_BIN:-} ]]; then
    cp "$AB_BASE_BIN" "$work/base/switchboard"
else
    echo "== baseline $(git -C "$root" rev-parse --short "$rev"), profile $profile" >&2
    git -C "$root" worktree add --detach "$base_src" "$rev" >/dev/null
    cp "$(build "$base_src/dataplane" | tail -n1)" "$work/base/switchboard"
    base_examples=${AB_BASE_EXAMPLES:-$base_src/examples/banking}
fi
base_examples=${base_examples:-${AB_BASE_EXAMPLES:-$root/examples/banking}}
if [[ -n ${AB_KEEP:-} ]]; then
    mkdir -p "$AB_KEEP/base" "$AB_KEEP/head"
    cp "$work/base/switchboard" "$AB_KEEP/base/"
    cp "$work/head/switchboard" "$AB_KEEP/head/"
fi

# One run of `voice_density` with build $1: "<core-s per call-minute> <base RSS KiB> <load>".
run() {
    local side=$1 load out row rss
    load=$(cut -d' ' -f1-3 /proc/loadavg)
    local examples=$root/examples/banking
    [[ $side == base ]] && examples=$base_examples
    out=$(BENCH_BIN="$work/$side/switchboard" BENCH_EXAMPLES=$examples BENCH_STEPS=$sessions BENCH_WINDOW_S=$window \
        "$work/voice_density" --bench 2>&1) || { echo "$out" >&2; return 1; }
    rss=$(sed -n 's/^runtime RSS before any session: \([0-9]*\) KiB$/\1/p' <<<"$out")
    # sessions jit-p50 jit-p99 late-p99 rt-CPU% rt-%/sess rt-cs/call-min ... errors
    row=$(awk -v n="$sessions" '$1 == n && NF >= 13 { print $7, $NF }' <<<"$out")
    if [[ -z $row || -z $rss ]]; then echo "$out" >&2; return 1; fi
    if [[ ${row#* } != 0 ]]; then echo "$out" >&2; echo "ab.sh: ${row#* } session errors" >&2; return 1; fi
    echo "${row%% *} $rss $load"
}

printf '%-5s %-5s %16s %14s  %s\n' pair build "core-s/call-min" "base RSS KiB" "load average (1, 5, 15 min)"
declare -a base_cpu head_cpu
for ((i = 1; i <= pairs; i++)); do
    if ((i % 2)); then order=(base head); else order=(head base); fi
    for side in "${order[@]}"; do
        result=$(run "$side") || { echo "ab.sh: the $side run failed" >&2; exit 2; }
        read -r cpu rss l1 l5 l15 <<<"$result"
        printf '%-5s %-5s %16s %14s  %s %s %s\n' "$i" "$side" "$cpu" "$rss" "$l1" "$l5" "$l15"
        if [[ $side == base ]]; then base_cpu+=("$cpu"); else head_cpu+=("$cpu"); fi
    done
done

python3 - "$threshold" "${base_cpu[*]}" "${head_cpu[*]}" <<'EOF'
import statistics, sys
threshold = float(sys.argv[1])
base = [float(v) for v in sys.argv[2].split()]
head = [float(v) for v in sys.argv[3].split()]
b, h = statistics.median(base), statistics.median(head)
ratio = h / b if b else float("inf")
print(f"median core-s per call-minute: baseline {b:.4f} ({min(base):.4f}-{max(base):.4f}), "
      f"this build {h:.4f} ({min(head):.4f}-{max(head):.4f}); ratio {ratio:.3f}")
if ratio > 1 + threshold / 100:
    print(f"FAIL: this build costs {100 * (ratio - 1):.1f} % more CPU per call than the baseline "
          f"(threshold {threshold:g} %)")
    sys.exit(1)
print(f"ok: within {threshold:g} % of the baseline")
EOF
