#!/usr/bin/env bash
# The short call that re-checks a sanitizer fix on a fresh GPU machine with 3-4 minutes of device
# time left, where gpu_suite.sh's sanitizer stages (all 16 trainers built first) would not fit:
# only the standard BF16 trainer is built, and it runs gpu_suite.sh's sanitizer command lines
# (dev/test/sanitizer_runs.sh) on the standard fixtures:
#   1. initcheck, one step, with the LD_PRELOAD shim that marks cuBLASLt's outputs initialized
#      (dev/test/initcheck_lt_regions.c, --nvtx yes), each log through dev/test/initcheck_filter.py;
#   2. racecheck, one step and an 8-token sample, 4 runs at once (head sizes 64: MHA, GQA, MQA;
#      the unfused tiny fixture).
# Each run has its own timeout; the logs go to OUT_DIR as they are written, and one tarball of them
# at the end (the device tool brings back at most 8 files).
#
#   bash dev/test/gpu_sanitize_recheck.sh OUT_DIR
set -u
cd "$(dirname "$0")/../.."
source dev/test/sanitizer_runs.sh
out=${1:?usage: bash dev/test/gpu_sanitize_recheck.sh OUT_DIR}
logs=$out/sanitize_recheck
mkdir -p "$logs" build/gpu_suite
SM=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n1 | tr -d '.')
SANITIZER=${SANITIZER:-$(command -v compute-sanitizer || echo "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer")}
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*"; }

make -s train_gpt2cu CUDA_ARCHS="-gencode arch=compute_$SM,code=sm_$SM" >"$logs/build.log" 2>&1 &
build_pid=$!
python3 dev/reference/make_fixtures.py --out dev/fixtures >"$logs/fixtures.log" 2>&1
stamp "fixtures: exit $?"
sanitizer_build_shim "${CUDA_HOME:-/usr/local/cuda}" >"$logs/shim_build.log" 2>&1
stamp "shim: exit $?"
sanitizer_prepare_shard >/dev/null
wait "$build_pid"
stamp "train_gpt2cu (sm_$SM): exit $?"

run_sanitizer() { # tool fixture seconds
  local SAN_TOOL_ARGS SAN_ENV_ARGS SAN_TRAINER_ARGS
  sanitizer_tool_args "$1"
  sanitizer_env_args "$1" "$logs/$1_$2.regions"
  sanitizer_trainer_args "$1" "$2" "build/gpu_suite/$1_$2"
  timeout "$3" "${SAN_ENV_ARGS[@]}" "$SANITIZER" "${SAN_TOOL_ARGS[@]}" ./train_gpt2cu "${SAN_TRAINER_ARGS[@]}" \
    >"$logs/$1_$2.log" 2>&1
}
for f in standard_hd64 standard_tiny; do
  run_sanitizer initcheck "$f" 60
  rc=$?
  python3 dev/test/initcheck_filter.py "$logs/initcheck_$f.log" --regions "$logs/initcheck_$f.regions" \
    >"$logs/initcheck_$f.filtered.txt" 2>&1
  frc=$?
  stamp "initcheck $f BF16: exit $rc, filter exit $frc; $(grep -c '^lt_marked' "$logs/initcheck_$f.regions") outputs marked"
  head -n 8 "$logs/initcheck_$f.filtered.txt"
done

race() { # fixture
  run_sanitizer racecheck "$1" 100
  echo "racecheck $1 BF16: exit $?, $(grep -m1 'RACECHECK SUMMARY' "$logs/racecheck_$1.log" | sed 's/^=* *//')" \
    >"$logs/racecheck_$1.result"
}
for f in standard_hd64 standard_hd64_gqa2 standard_hd64_mqa standard_tiny; do race $f & done
wait
stamp "racecheck, 4 at once:"
cat "$logs"/racecheck_*.result
tar czf "$out/sanitize_recheck.tgz" -C "$out" sanitize_recheck && rm -rf "$logs"
