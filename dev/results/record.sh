#!/usr/bin/env bash
# Runs a command and keeps what it printed as a results file: the date, the GPU, the command and
# its output, so that a result under dev/results/ always says where and how it was produced.
#
#   bash dev/results/record.sh NAME COMMAND [ARGS...]
#       -> ${RESULTS_DIR:-dev/results}/<YYYY-MM-DD>_<gpu>_<NAME>.txt, and the output on stdout too
#
# On the device machine set RESULTS_DIR=$OUT so that the file comes back, and RECORD_COMMIT to the
# commit of the working tree sent there (it has no .git). Exits with the command's status.
set -u
[ $# -ge 2 ] || { echo "usage: bash dev/results/record.sh NAME COMMAND [ARGS...]" >&2; exit 1; }
name=$1; shift
case "$name" in *[!A-Za-z0-9._-]*|'') echo "record.sh: NAME '$name': expected letters, digits, '.', '_' or '-'" >&2; exit 1;; esac
dir=${RESULTS_DIR:-dev/results}
mkdir -p "$dir" || { echo "record.sh: cannot create $dir" >&2; exit 1; }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
gpu_tag=$(printf "%s" "${gpu:-nogpu}" | tr -c 'A-Za-z0-9' '-' | tr -s '-' | sed 's/-$//')
file="$dir/$(date -u +%Y-%m-%d)_${gpu_tag}_${name}.txt"
{
  echo "date:    $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "gpu:     ${gpu:-none}"
  echo "driver:  $(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1)"
  echo "nvcc:    $(nvcc --version 2>/dev/null | tail -n 1)"
  # the device machine gets a copy of the working tree without .git: RECORD_COMMIT names the commit there
  if [ -n "${RECORD_COMMIT:-}" ]; then echo "commit:  $RECORD_COMMIT (as given by RECORD_COMMIT)"
  else echo "commit:  $(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')"; fi
  echo "command: $*"
  echo
} > "$file.tmp"
"$@" 2>&1 | tee -a "$file.tmp"
rc=${PIPESTATUS[0]}
echo "exit status: $rc" >> "$file.tmp"
mv "$file.tmp" "$file"
echo "record.sh: wrote $file"
exit "$rc"
