# Stage timing for test.sh (sourced; bash only). `step NAME` starts a stage and prints the
# elapsed seconds; `stage_table [RC]` prints each stage's duration, the last one running up
# to now and marked failed when RC is non-zero, then the total.
stage_names=()
stage_starts=()

step() {
  stage_names+=("$1")
  stage_starts+=("$SECONDS")
  printf '\n== %s (%ss)\n' "$1" "$SECONDS"
}

stage_table() {
  local rc="${1:-0}" n="${#stage_names[@]}" i end mark
  [ "$n" -gt 0 ] || return 0
  printf '\n== time per stage\n'
  for ((i = 0; i < n; i++)); do
    end="${stage_starts[i + 1]:-$SECONDS}"
    mark=""
    if [ "$i" -eq $((n - 1)) ] && [ "$rc" -ne 0 ]; then mark="  (failed, exit $rc)"; fi
    printf '%6ss  %s%s\n' "$((end - stage_starts[i]))" "${stage_names[i]}" "$mark"
  done
  printf '%6ss  total\n' "$SECONDS"
}
