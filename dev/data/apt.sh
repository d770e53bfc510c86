# apt_get: apt-get for the scripts that install Debian packages (sourced by dev/data/common.sh, which
# `make train` uses, and by dev/test/install_deps.sh; not run on its own). Two things plain
# `apt-get ... >/dev/null` got wrong:
# - another apt or dpkg running (unattended-upgrades on a fresh machine, a second terminal) made it
#   fail at once. DPkg::Lock::Timeout makes apt wait for dpkg's lock, but apt 2.6 (Debian 12) still
#   fails at once on the lock of its package lists (update) and of its download cache (install), so
#   those failures are retried here until the same deadline (APT_LOCK_TIMEOUT seconds, default 600).
# - its output was thrown away, so a failure said nothing about why. It goes to APT_LOG (default
#   build/apt.log), and on failure its last lines are printed, then one line naming the command,
#   apt's own error and a HINT.

APT_LOCK_TIMEOUT=${APT_LOCK_TIMEOUT:-600}
APT_LOCK_RETRY=${APT_LOCK_RETRY:-5}  # seconds between tries while a lock is held
APT_LOG=${APT_LOG:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/build/apt.log}

apt_get() { # WHO update | WHO install PACKAGE...: as root; returns 1 after printing why it failed
  local who=$1; shift
  local deadline=$((SECONDS + APT_LOCK_TIMEOUT)) rc said=0 wait
  local quiet=(-qq)
  if [ "$1" = install ]; then quiet=(-y -qq); fi
  mkdir -p "$(dirname "$APT_LOG")" || { echo "$who: cannot create the folder of $APT_LOG for apt-get's log" >&2; return 1; }
  while true; do
    wait=$((deadline - SECONDS))
    [ "$wait" -gt 0 ] || wait=1
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout="$wait" "${quiet[@]}" "$@" >"$APT_LOG" 2>&1 && return 0 || rc=$?
    grep -q 'Could not get lock' "$APT_LOG" && [ "$SECONDS" -lt "$deadline" ] || break
    if [ "$said" = 0 ]; then
      echo "$who: waiting up to ${APT_LOCK_TIMEOUT} s for another apt-get or dpkg to finish ($(grep -m1 -o 'Could not get lock.*' "$APT_LOG"))"
      said=1
    fi
    sleep "$APT_LOCK_RETRY"
  done
  # the last lines of apt's output (indented: details), then the one-line error
  tail -n 15 "$APT_LOG" | sed 's/^/    /' >&2
  local why hint
  why=$(grep -m1 '^E: ' "$APT_LOG")  # the first is the cause (later ones follow from it)
  if grep -q 'Could not get lock' "$APT_LOG"; then
    hint="another apt-get or dpkg held its lock for ${APT_LOCK_TIMEOUT} s; wait for it to finish and run again, or set APT_LOCK_TIMEOUT=<seconds>"
  elif [ "$1" = update ]; then
    hint="is the Debian archive reachable from this machine?"
  else
    hint="by hand: apt-get install ${*:2}"
  fi
  echo "$who: apt-get $* failed with exit code $rc${why:+: $why} (HINT: $hint; apt's last lines are above, all of them in $APT_LOG)" >&2
  return 1
}
