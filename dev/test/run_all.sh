#!/usr/bin/env bash
# `make test`: every suite of the project, in order, on any machine. Each suite prints one
# "PASS ..." / "FAIL ..." line per check (indented lines are details, "SKIP ..." says what could
# not run here and why); this runner counts them (the SKIP lines apart: a check that could not run
# is no pass) and ends with "N passed, M failed".
# A suite that exits non-zero without printing a FAIL line counts as one failure, so a crash
# can never pass.
set -u
cd "$(dirname "$0")/../.."
export PYTHON=${PYTHON:-/usr/bin/python3}
log_dir=build/test_logs
mkdir -p "$log_dir"
passed=0
failed=0
skipped=0
failed_suites=()

run_suite() {
  local name=$1; shift
  local log="$log_dir/$name.log"
  echo "=== $name: $*"
  local start=$SECONDS
  "$@" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  local p f s
  p=$(grep -c '^PASS ' "$log")
  f=$(grep -c '^FAIL ' "$log")
  s=$(grep -c '^SKIP ' "$log")
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
    echo "FAIL $name: exited with status $rc without reporting a failed check (see $log)"
    f=1
  fi
  passed=$((passed + p))
  failed=$((failed + f))
  skipped=$((skipped + s))
  [ "$f" -gt 0 ] && failed_suites+=("$name")
  echo "=== $name: $p passed, $f failed$([ "$s" -gt 0 ] && echo ", $s skipped") in $((SECONDS - start)) s"
}

run_suite deps bash dev/test/install_deps.sh
run_suite header bash -c "make -s build/test_attention_variants && ./build/test_attention_variants"
run_suite docs "$PYTHON" dev/test/test_docs.py
run_suite layout "$PYTHON" dev/test/test_layout.py
run_suite params bash dev/test/test_params.sh
run_suite fixtures "$PYTHON" dev/reference/make_fixtures.py --out dev/fixtures
run_suite reference bash dev/test/test_reference.sh
run_suite cpu bash dev/test/test_cpu.sh
run_suite loop bash dev/test/test_loop.sh
run_suite mpi bash dev/test/test_mpi.sh
run_suite ablate bash dev/test/test_ablate.sh
run_suite tokenizer bash dev/test/test_tokenizer.sh
run_suite data bash dev/test/test_data.sh
run_suite sanitize bash dev/test/test_sanitize.sh
run_suite fuzz bash dev/test/test_fuzz.sh
run_suite cudacpu bash dev/test/test_cudacpu.sh
run_suite nccl bash dev/test/test_nccl.sh
run_suite attention_maps bash dev/test/test_attention_maps.sh
run_suite mutants python3 dev/cudacpu/mutants.py
run_suite gpu_suite bash dev/test/test_gpu_suite.sh
run_suite cuda bash dev/test/test_cuda.sh

echo
[ ${#failed_suites[@]} -gt 0 ] && echo "failed suites: ${failed_suites[*]} (logs in $log_dir/)"
[ "$skipped" -gt 0 ] && echo "$skipped skipped (SKIP lines: what cannot run on this machine, counted neither as passed nor as failed)"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
