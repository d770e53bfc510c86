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
# SIGKILL included: bash runs no trap then, and a trapped signal waits for the foreground command). A
# watcher notes the script's descendants every second; once the script is gone it sends SIGTERM to
# each still running and to everything under it: a background build, a peer's benchmark under
# `timeout` (which passes it on), a memory sampler. The watcher is no child of the script (a bare
# `wait` would wait for it) and ignores the signals that end the script.
#   source dev/test/jobs.sh; end_tree_with_me
end_tree_with_me() {
  local me=$$
  ( ( trap '' HUP INT TERM
      tree() { local c; for c in $(pgrep -P "$1"); do echo "$c"; tree "$c"; done; }
      seen=""
      while kill -0 "$me" 2>/dev/null; do seen=$(tree "$me"); sleep 1; done
      for p in $seen; do kill -0 "$p" 2>/dev/null && { tree "$p"; echo "$p"; }; done | xargs -r kill -TERM 2>/dev/null
    ) </dev/null >/dev/null 2>&1 & )
}
