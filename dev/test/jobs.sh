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

# end_tree_with_me: nothing this script started outlives it, however it ends (a signal to it alone,
# SIGKILL included: bash runs no trap then, and a trapped signal waits for the foreground command).
# The script exports a token that every process it starts inherits, to the last descendant (a
# background build, a peer's benchmark under `timeout`, a memory sampler); a watcher, started before
# the token so that it holds none, waits for the script to end and then sends SIGTERM to every process
# whose environment holds the token. The watcher is no child of the script (a bare `wait` would wait
# for it) and ignores the signals that end the script. A script that calls it under another that did
# (bench.sh under gpu_suite.sh) gets a token of its own, and ends with that script's token holders.
#   source dev/test/jobs.sh; end_tree_with_me
end_tree_with_me() {
  local me=$$ token="$$.$RANDOM$RANDOM"
  ( ( trap '' HUP INT TERM
      while kill -0 "$me" 2>/dev/null; do sleep 1; done
      for d in /proc/[0-9]*; do
        while IFS= read -r -d '' kv; do
          [ "$kv" = "END_TREE_WITH_ME=$token" ] && { kill -TERM "${d#/proc/}" 2>/dev/null; break; }
        done <"$d/environ" 2>/dev/null
      done
    ) </dev/null >/dev/null 2>&1 & )
  export END_TREE_WITH_ME=$token
}

# verdict_of FILE: the one PASS or FAIL line a check run in the background (`&`, a subshell, which
# cannot count into the caller's counters) wrote into FILE, through the caller's own pass or fail; a
# missing or empty FILE is a FAIL
verdict_of() {
  local line
  line=$(cat "$1" 2>/dev/null)
  case $line in
    "PASS "*) pass "${line#PASS }" ;;
    "FAIL "*) fail "${line#FAIL }" ;;
    *) fail "$1: the check wrote no verdict" ;;
  esac
}
