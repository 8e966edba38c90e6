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
# AB_THRESHOLD percent above the baseline's, 2 when a run failed. With AB_BENCH=capacity it
# measures the product path instead: the `capacity` bench's AB_SESSIONS voice calls through
# `switchboard gateway` to the runtime (30 s calls, 8 spoken turns), both processes' CPU per
# call-minute, and the two processes' RSS growth per call in place of the base RSS.
#
# Environment (defaults in brackets):
#   AB_BENCH      [voice_density]  the bench: voice_density (the runtime alone) or capacity
#                          (gateway + runtime, the product path)
#   AB_PROFILE    [bench]  cargo profile of both builds (bench = fat LTO, what ships;
#                          release builds in a fraction of the time, for a quick look)
#   AB_PAIRS      [3]      runs of each build
#   AB_SESSIONS   [50]     live calls during each run
#   AB_WINDOW_S   [20]     measured seconds per run (after 3 s of settling)
#   AB_THRESHOLD  [10]     percent above the baseline that fails
#   AB_BASE_BIN, AB_HEAD_BIN   already built `switchboard` binaries: skip that build
#   AB_BASE_EXAMPLES  [the baseline's own examples/banking]  the Example Bank folder the
#                          baseline runs with (a baseline older than this tree's examples
#                          may not know their newer fields); with AB_BASE_BIN, this tree's.
#                          This tree resolves it either way: where its checks refuse the
#                          baseline's own examples (a rule added since), the bench says so
#                          and AB_BASE_EXAMPLES=$PWD/examples/banking is the way on
#   AB_BENCH_EXE  [unset]  an already built AB_BENCH executable: skip its build
#   AB_KEEP       [unset]  a folder to copy both binaries into (base/, head/)
#   CARGO_TARGET_DIR       shared by both builds, one after the other (their third-party
#                          crates are built once)
#
# CPU figures move with the machine's load: only figures of one run, alternated, are
# compared here, never figures of another hour.
set -euo pipefail

usage() { sed -n '2,41p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
[[ $# -eq 1 && $1 != -h && $1 != --help ]] || usage

root=$(git rev-parse --show-toplevel)
rev=$(git -C "$root" rev-parse --verify "$1^{commit}")
profile=${AB_PROFILE:-bench}
pairs=${AB_PAIRS:-3}
sessions=${AB_SESSIONS:-50}
window=${AB_WINDOW_S:-20}
threshold=${AB_THRESHOLD:-10}
bench=${AB_BENCH:-voice_density}
case $bench in voice_density | capacity) ;; *) echo "ab.sh: AB_BENCH is voice_density or capacity, not $bench" >&2; exit 2 ;; esac
work=$(mktemp -d "${TMPDIR:-/tmp}/switchboard-ab.XXXXXX")
base_src="$work/base-src"
cleanup() {
    if [[ -d $base_src ]]; then git -C "$root" worktree remove --force "$base_src" || true; fi
    rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/base" "$work/head"

# Builds `switchboard` (and, with $2, that bench) in $1 with the profile;
# prints the bench executable's path when asked for it.
build() {
    local dir=$1 bench=${2:-}
    local args=(build --profile "$profile" --locked -p switchboard-dataplane --bin switchboard)
    [[ -n $bench ]] && args+=(--bench "$bench")
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
bench_exe=${AB_BENCH_EXE:-$(build "$root/dataplane" "$bench")}
[[ -x $bench_exe ]] || { echo "ab.sh: no $bench bench executable was built" >&2; exit 2; }
cp "$bench_exe" "$work/bench"
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

# One run of the bench with build $1: "<core-s per call-minute> <RSS KiB> <load>" (RSS: the
# runtime's before any session, or with capacity the product path's growth per call).
run() {
    local side=$1 load out row rss
    load=$(cut -d' ' -f1-3 /proc/loadavg)
    local examples=$root/examples/banking
    [[ $side == base ]] && examples=$base_examples
    if [[ $bench == capacity ]]; then
        out=$(BENCH_FLOOR=0 BENCH_BIN="$work/$side/switchboard" BENCH_EXAMPLES=$examples BENCH_VOICE_STEPS=$sessions \
            BENCH_TEXT_STEPS= "$work/bench" --bench 2>&1) || { echo "$out" >&2; return 1; }
        # "  50 call: 0.1100 core-s per call-minute (...); RSS +118.0 KiB per call (...); ...; 400/400 turns answered; ..."
        row=$(sed -n "s|^ *$sessions call: \([0-9.]*\) core-s per call-minute.*RSS +\([0-9.]*\) KiB per call.*; \([0-9]*\)/\([0-9]*\) turns answered.*|\1 \2 \3 \4|p" <<<"$out")
        read -r cpu rss answered turns <<<"$row"
        if [[ -z ${turns:-} ]]; then echo "$out" >&2; return 1; fi
        if [[ $answered != "$turns" ]]; then echo "$out" >&2; echo "ab.sh: $answered of $turns turns answered" >&2; return 1; fi
        echo "$cpu $rss $load"
        return
    fi
    out=$(BENCH_FLOOR=0 BENCH_BIN="$work/$side/switchboard" BENCH_EXAMPLES=$examples BENCH_STEPS=$sessions BENCH_WINDOW_S=$window \
        "$work/bench" --bench 2>&1) || { echo "$out" >&2; return 1; }
    rss=$(sed -n 's/^runtime RSS before any session: \([0-9]*\) KiB$/\1/p' <<<"$out")
    # sessions jit-p50 jit-p99 late-p99 rt-CPU% rt-%/sess rt-cs/call-min ... errors
    row=$(awk -v n="$sessions" '$1 == n && NF >= 13 { print $7, $NF }' <<<"$out")
    if [[ -z $row || -z $rss ]]; then echo "$out" >&2; return 1; fi
    if [[ ${row#* } != 0 ]]; then echo "$out" >&2; echo "ab.sh: ${row#* } session errors" >&2; return 1; fi
    echo "${row%% *} $rss $load"
}

rss_title="base RSS KiB"
[[ $bench == capacity ]] && rss_title="RSS KiB/call"
echo "== $bench, $sessions calls, alternated" >&2
printf '%-5s %-5s %16s %14s  %s\n' pair build "core-s/call-min" "$rss_title" "load average (1, 5, 15 min)"
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
