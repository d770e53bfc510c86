# shellcheck shell=bash
# run_jobs N function items...: `function item` for each item (an item's words are the function's
# arguments), N at a time, started in the items' order; returns when all have finished. N 0 runs them
# in the foreground, one after another (a dry run's printed plan keeps its order). The caller
# redirects the call's output as it needs: every job inherits it.
#   source dev/test/jobs.sh; run_jobs 2 build_one "${targets[@]}" >>"$log"
run_jobs() {
  local n=$1 fn=$2 running=0 item
  shift 2
  for item in "$@"; do
    if [ "$n" -eq 0 ]; then
      # shellcheck disable=SC2086 # an item is words on purpose
      $fn $item
      continue
    fi
    # shellcheck disable=SC2086
    $fn $item </dev/null &
    running=$((running + 1))
    if [ $running -ge "$n" ]; then wait -n; running=$((running - 1)); fi
  done
  wait
}
