#!/usr/bin/env bash
# The CUDA suite of `make test` (owner: CUDA trainer).
#
# Always: builds the trainer of every scheme x {BF16, FP32} and the test binary of standard (with a
# GPU, of every scheme, all in full; without one standard's in full and the other schemes' trainers
# to PTX only, in BF16 only, their device code held identical to each other's; at most two nvcc at a
# time; a build with a compiler warning fails), then checks what the trainers must do
# before touching a GPU: -h, a bad flag, a bad value, every forbidden scheme/shape combination of
# dev/fixtures/forbidden.tsv and a checkpoint of another scheme each give one clear line (exit 0
# for -h, 1 otherwise).
# Without a GPU: valid flags must end in one "no CUDA device" line (exit 1, no crash), and the GPU
# tests are skipped. With a GPU: every test binary runs (fixtures, every tensor, resume), and the
# trainers' attention maps are compared with the CPU trainer's (dev/test/test_attention_maps.sh --gpu).
# Kernel labs (dev/cuda/README.md): every lab binary is compiled (one architecture, PTX only without a GPU; a warning
# fails), the attention labs' flag errors checked; without a GPU each must print one SKIP line and
# exit 0, which is reported as a SKIP line (a lab that cannot run is no pass), with one `--check`
# must print PASS lines and no FAIL.
# The kernels themselves run on the CPU in the cudacpu suite (dev/test/test_cudacpu.sh): the trainer
# against every fixture, and every lab's --check (or --quick) against its CPU twin.
#
#   bash dev/test/test_cuda.sh            # from anywhere; prints PASS/FAIL/SKIP lines
#   CUDA_TEST_PRECISIONS=FP32|BF16        # one precision only (default both): its builds, flag checks
#                                         # and test binaries; the checks that use the BF16 trainer
#                                         # (shapes, checkpoints, the end-to-end runs) come with BF16
#   CUDA_TEST_LABS=0                      # no kernel lab (dev/test/gpu_suite.sh runs them in its lab stages)
set -u
cd "$(dirname "$0")/../.."
source dev/test/jobs.sh
source dev/test/torch_python.sh
SCHEMES=$(make -s --no-print-directory schemes) && [ -n "$SCHEMES" ] || { echo "FAIL cuda: make schemes printed no scheme list"; exit 1; }
PRECISIONS=${CUDA_TEST_PRECISIONS:-BF16 FP32}
for p in $PRECISIONS; do
  case $p in BF16|FP32) ;; *) echo "FAIL cuda: CUDA_TEST_PRECISIONS='$PRECISIONS': expected BF16, FP32 or both"; exit 1;; esac
done
case " $PRECISIONS " in *" BF16 "*) has_bf16=1 ;; *) has_bf16=0 ;; esac
WITH_LABS=${CUDA_TEST_LABS:-1}
case $WITH_LABS in 0|1) ;; *) echo "FAIL cuda: CUDA_TEST_LABS='$WITH_LABS': expected 0 or 1"; exit 1;; esac
log_dir=build/test_logs/cuda
mkdir -p "$log_dir"
failed=0

skipped=0
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; failed=1; }
skip() { echo "SKIP $*"; skipped=$((skipped + 1)); }
# the fixtures' command, with a Python that has torch here (probed once, when a HINT needs it)
fixtures_hint() {
  [ -n "${FIXTURES_PY:-}" ] || FIXTURES_PY=$(torch_python) || FIXTURES_PY="<a python3 with torch>"
  echo "HINT: $FIXTURES_PY dev/reference/make_fixtures.py --out dev/fixtures"
}

# binary name of (kind, scheme, precision), the Makefile's naming
binary() {
  local name=$1
  [ "$2" != standard ] && name="${name}_$2"
  [ "$3" = FP32 ] && name="${name}_fp32"
  echo "$name"
}

if nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then has_gpu=1; else has_gpu=0; fi

# ---------------------------------------------------------------------------------------------
# builds: one make per binary, two at a time, the trainers and test binaries, then the kernel labs; a
# make that fails or a compiler warning fails the build
build_target() { # target [make variables]
  local target=$1 log start=$SECONDS rc
  shift
  log="$log_dir/build_$(basename "$target").log"
  make -s "$target" "$@" >"$log" 2>&1
  rc=$?
  local secs=$((SECONDS - start))
  if [ $rc -ne 0 ]; then
    echo "FAIL compile $target: make exited $rc (${secs}s): $(grep -m1 -i 'error' "$log" || tail -n1 "$log")"
  elif grep -qi 'warning' "$log"; then
    echo "FAIL compile $target: compiler warnings (${secs}s): $(grep -m1 -i 'warning' "$log")"
  elif [ ! -x "$target" ]; then
    echo "FAIL compile $target: make succeeded but $target is missing"
  else
    echo "PASS compile $target (${secs}s)"
  fi
}
# test_gpt2.cu has no kernel of its own: its device code is train_gpt2.cu's, which the trainers compile
# for every scheme, and g++ compiles its host code for every scheme in the cudacpu suite. Without a
# GPU to run them, nvcc builds it for standard only (both precisions, to PTX: build/ptx/, as below);
# with one, every test binary.
# The device code is the same for every scheme too (a scheme is data the kernels read at run time;
# the check after the builds holds the device code to that), so without a GPU the other schemes'
# trainers are compiled to PTX only, as build/ptx/train_gpt2cu_<scheme>[_fp32] (nvcc's front end and
# every scheme's host code, without ptxas: 40% less time), while standard's run ptxas for sm_80 and
# sm_90. Those PTX-only builds are made in the first precision of $PRECISIONS only (BF16 by default):
# the other precision's host code of every scheme is g++'s in the cudacpu suite (build/cudacpu/
# test_gpt2cu_<scheme>_fp32, which includes train_gpt2.cu), its device code is standard's full build.
# The flag checks below run the binaries this run built (trainer_of, precisions_of).
# (make with a suffix-less target for standard BF16 needs the file name, which `binary` gives)
ptx_only() { [ $has_gpu -eq 0 ] && [ "$1" != standard ]; } # scheme
precisions_of() { # scheme -> the precisions this run builds its trainer in
  if ptx_only "$1"; then echo "${PRECISIONS%% *}"; else echo "$PRECISIONS"; fi
}
trainer_of() { # scheme precision -> the trainer binary this run builds
  if ptx_only "$1"; then echo "build/ptx/$(binary train_gpt2cu "$1" "$2")"; else binary train_gpt2cu "$1" "$2"; fi
}
targets=()
for s in $SCHEMES; do
  for p in $(precisions_of "$s"); do
    if ptx_only "$s"; then targets+=("$(trainer_of "$s" "$p")"); else targets+=("$(binary train_gpt2cu "$s" "$p") QKV=$s PRECISION=$p"); fi
    if [ $has_gpu -eq 1 ]; then targets+=("$(binary test_gpt2cu "$s" "$p") QKV=$s PRECISION=$p")
    elif [ "$s" = standard ]; then targets+=("build/ptx/test_gpt2cu_$s$([ "$p" = FP32 ] && echo _fp32)"); fi
  done
done
lab_lists=$(make -s --no-print-directory labs-list) # the Makefile's "LABS / LABS_BF16" (BF16 builds only)
LABS=${lab_lists%% / *}
LABS_BF16=${lab_lists##* / }
# Without a GPU the labs are compiled to PTX only (build/ptx/lab_<op>, as the other schemes' trainers:
# their device code is the trainer's, which standard's full build runs ptxas on; 11 s of 33 saved per
# lab); the binaries still parse their flags and say SKIP, checked below.
lab_dir=build
[ $has_gpu -eq 0 ] && lab_dir=build/ptx
lab_bins=()
if [ "$WITH_LABS" = 1 ]; then
  for l in $LABS; do
    for p in $PRECISIONS; do
      if [ "$p" = FP32 ]; then lab_bins+=("$lab_dir/lab_${l}_fp32"); else lab_bins+=("$lab_dir/lab_${l}"); fi
    done
  done
  [ $has_bf16 -eq 1 ] && for l in $LABS_BF16; do lab_bins+=("$lab_dir/lab_${l}"); done
fi
targets+=("${lab_bins[@]}")
# the CPU runtime's check of Hopper's instructions (dev/cudacpu/test_hopper.cu), built for sm_90a: ptxas
# reads its wgmma, bulk tensor copies, mbarriers and setmaxnreg as a GPU will (gpu_suite.sh runs it there)
[ $has_gpu -eq 0 ] && targets+=(build/test_hopper)
build_start=$SECONDS
build_out="$log_dir/builds.txt"
: >"$build_out"
run_jobs 2 build_target "${targets[@]}" >>"$build_out"
sort "$build_out"
grep -q '^FAIL' "$build_out" && failed=1
echo "  cuda builds: ${#targets[@]} binaries (${#lab_bins[@]} of them kernel labs) in $((SECONDS - build_start))s"
# the claim that lets the PTX-only builds stand in for full ones: every scheme's trainer has the same
# device code. A kernel that read the compile-time scheme would make it differ here.
if [ $has_gpu -eq 0 ]; then
  for p in $(precisions_of q_identity); do # the precision of the PTX-only builds
    sums="" n=0 empty=""
    for s in $SCHEMES; do
      [ "$s" = standard ] && continue
      bin=$(trainer_of "$s" "$p")
      # the embedded device code (the .nv_fatbin section: the compressed PTX), as the binary holds it
      objcopy -O binary --only-section=.nv_fatbin "$bin" "$log_dir/fatbin.bin" 2>/dev/null
      if [ -s "$log_dir/fatbin.bin" ]; then sums="$sums $(md5sum <"$log_dir/fatbin.bin" | cut -c1-12)"; else empty="$empty $bin"; fi
      n=$((n + 1))
    done
    n_distinct=$(echo $sums | tr ' ' '\n' | sort -u | grep -c .)
    if [ -z "$empty" ] && [ "$n_distinct" -eq 1 ] && [ "$n" -ge 2 ]; then
      pass "compile $p device code is scheme-independent: the .nv_fatbin of the $n PTX-only trainers is identical (md5 $(echo $sums | cut -d' ' -f1)), so standard's ptxas builds cover theirs"
    else
      fail "compile $p device code: ${empty:+no .nv_fatbin in$empty; }$n_distinct distinct among $n PTX-only trainers: they no longer stand in for ptxas on every scheme (HINT: build every scheme in full in test_cuda.sh)"
    fi
  done
fi

# ---------------------------------------------------------------------------------------------
# checks that need no GPU: flags, shapes, checkpoints

# run a trainer and require: exit status, exactly one output line, and that the line contains a text
expect_one_line() { # name expected_rc needle cmd...
  local name=$1 want=$2 needle=$3
  shift 3
  local out rc lines
  out=$("$@" 2>&1)
  rc=$?
  lines=$(printf '%s\n' "$out" | grep -c .)
  if [ $rc -eq "$want" ] && [ "$lines" -eq 1 ] && printf '%s' "$out" | grep -qF -- "$needle"; then
    pass "nogpu $name: exit $rc: $out"
  else
    fail "nogpu $name: expected exit $want and one line containing '$needle', got exit $rc and $lines lines: $(printf '%s' "$out" | head -c 300 | tr '\n' '|')"
  fi
}

# a small token shard (ids < 500, the fixtures' vocabulary) for the data flags, so that these checks
# do not depend on dev/data having been prepared: 4 * 32 * 16 + 1 tokens
shard="$log_dir/tokens_000.bin"
python3 dev/test/tiny_shard.py "$shard" $((4 * 32 * 16 + 1)) 5

fixture_of() { # scheme -> model path of its tiny fixture, or empty
  local f="dev/fixtures/$1_tiny_model.bin"
  [ -f "$f" ] && echo "$f"
}

for s in $SCHEMES; do
  for p in $(precisions_of "$s"); do
    bin=$(trainer_of "$s" "$p")
    [ -x "$bin" ] || { fail "nogpu $bin: not built"; continue; }
    out=$(./"$bin" -h 2>&1); rc=$?
    if [ $rc -eq 0 ] && printf '%s' "$out" | grep -q '^Usage:' && printf '%s' "$out" | grep -q "scheme '$s'"; then
      pass "nogpu $bin -h: exit 0, usage names scheme $s"
    else
      fail "nogpu $bin -h: exit $rc, expected 0 and a usage naming scheme $s"
    fi
    expect_one_line "$bin bad flag" 1 "unknown flag -k" ./"$bin" -k 3
    expect_one_line "$bin bad value" 1 "-b 0" ./"$bin" -b 0
    expect_one_line "$bin bad number" 1 "--attn_scale abc" ./"$bin" --attn_scale abc
    expect_one_line "$bin bad depth" 1 "-e d7" ./"$bin" -e d7
    expect_one_line "$bin retired --flash" 1 "--flash is no longer a flag" ./"$bin" --flash 4
    expect_one_line "$bin -d not a multiple" 1 "-d 100" ./"$bin" -e d6 -b 2 -t 64 -d 100
    expect_one_line "$bin -t too long" 1 "-t 2048" ./"$bin" -e d6 -t 2048
    # a checkpoint of another scheme (the next scheme in the list)
    other=$(echo $SCHEMES $SCHEMES | tr ' ' '\n' | grep -A1 -x "$s" | sed -n 2p)
    f=$(fixture_of "$other")
    if [ -n "$f" ]; then
      expect_one_line "$bin checkpoint of scheme $other" 1 "written by scheme $other, but this binary is built for scheme $s" \
        ./"$bin" -e "$f" -t 64
    else
      fail "nogpu $bin checkpoint of another scheme: no dev/fixtures/${other}_tiny_model.bin ($(fixtures_hint))"
    fi
    expect_one_line "$bin missing train data" 1 "-i $log_dir/nope_*.bin" ./"$bin" -e d6 -t 64 -b 2 -i "$log_dir/nope_*.bin"
    if [ $has_gpu -eq 0 ]; then
      expect_one_line "$bin valid flags" 1 "no CUDA device" ./"$bin" -e d6 -t 64 -b 2 -x 3 -i "$shard" -j "$shard"
      f=$(fixture_of "$s")
      if [ -n "$f" ]; then
        expect_one_line "$bin valid checkpoint" 1 "no CUDA device" ./"$bin" -e "$f" -t 64 -b 2 -i "$shard" -j "$shard"
      else
        fail "nogpu $bin valid checkpoint: no dev/fixtures/${s}_tiny_model.bin ($(fixtures_hint))"
      fi
    fi
  done
done

# the forbidden scheme/shape combinations of the reference's table
# (scheme n_layer n_embd n_head n_kv_head mlp bias); --n_kv_head 0 is refused as a bad value.
# These and the checks below that use the BF16 trainer run with BF16 (CUDA_TEST_PRECISIONS).
forbidden=dev/fixtures/forbidden.tsv
if [ $has_bf16 -eq 0 ]; then
  :
elif [ -f "$forbidden" ]; then
  while IFS=$'\t' read -r s L C H KV M bias; do
    [ -z "$s" ] && continue
    bin=$(trainer_of "$s" BF16)
    [ -x "$bin" ] || { fail "nogpu forbidden $s: $bin not built"; continue; }
    needle="scheme $s"
    [ "$KV" -lt 1 ] && needle="--n_kv_head 0"
    expect_one_line "forbidden $s L=$L C=$C H=$H KV=$KV M=$M bias=$bias" 1 "$needle" \
      ./"$bin" -e d6 --n_layer "$L" --n_embd "$C" --n_head "$H" --n_kv_head "$KV" --mlp_hidden "$M" --bias "$bias" -t 64
  done <"$forbidden"
else
  fail "nogpu forbidden shapes: no $forbidden ($(fixtures_hint))"
fi
# the example of the brief, spelled out: k_identity refuses GQA
[ $has_bf16 -eq 1 ] && expect_one_line "forbidden k_identity GQA" 1 "scheme k_identity requires n_kv_head == n_head" \
  ./"$(trainer_of k_identity BF16)" -e d6 --n_kv_head 2
# a checkpoint's shape cannot be changed by flags
f=$(fixture_of standard)
if [ $has_bf16 -eq 0 ]; then
  :
elif [ -n "$f" ]; then
  expect_one_line "checkpoint shape flag" 1 "cannot be changed" ./train_gpt2cu -e "$f" -t 64 --n_kv_head 2
  expect_one_line "resume without -o" 1 "-y 1 needs -o" ./train_gpt2cu -e "$f" -t 64 -y 1
  # data parallelism (dev/trainer/data_parallel.h): train_gpt2cu is the NCCL build where make finds NCCL, the
  # PTX-only builds are compiled without it (so both builds compile here); checked before any CUDA call
  if [ -z "$(make -s nccl_flags)" ]; then
    skip "nogpu NCCL build: make finds no NCCL here (nccl.h and libnccl under CUDA_HOME or /usr), so train_gpt2cu is built without it"
  elif ldd ./train_gpt2cu 2>/dev/null | grep -q libnccl; then
    expect_one_line "NCCL build: -pn 2 alone" 1 "-pn 2: the CUDA trainer's processes meet with -pi fs -pf DIR, over NCCL (HINT:" \
      ./train_gpt2cu -e "$f" -t 64 -pn 2
    [ $has_gpu -eq 0 ] && expect_one_line "NCCL build: -pi fs" 1 "no CUDA device" \
      ./train_gpt2cu -e "$f" -t 64 -b 2 -d 256 -i "$shard" -j "$shard" -pi fs -pf "$log_dir" -pn 2 -pr 1
  else
    fail "nogpu train_gpt2cu: not linked with libnccl, though make finds NCCL ($(make -s nccl_flags))"
  fi
  nonccl=$(trainer_of k_identity BF16)
  if [ $has_gpu -eq 0 ] && [ -x "$nonccl" ]; then
    expect_one_line "$nonccl (no NCCL) -pi fs" 1 "-pi fs: this build of the CUDA trainer has no NCCL" \
      ./"$nonccl" -e d6 -t 64 -pi fs -pf "$log_dir" -pn 2 -pr 0
  fi
  # the output folder (dev/trainer/train_common.h, checked before any CUDA call)
  rm -rf "$log_dir/nogpu_used" && mkdir -p "$log_dir/nogpu_used" && echo "an old run" >"$log_dir/nogpu_used/main.log"
  expect_one_line "resume with nothing to resume" 1 "-y 1: no checkpoint to resume from in -o $log_dir/nogpu_empty" \
    ./train_gpt2cu -e "$f" -t 64 -o "$log_dir/nogpu_empty" -y 1
  expect_one_line "fresh run into a used -o" 1 "-o $log_dir/nogpu_used holds another run's files (main.log: 1 in all)" \
    ./train_gpt2cu -e "$f" -i "$shard" -j "$shard" -b 4 -t 32 -o "$log_dir/nogpu_used"
  sum=$(md5sum <"$f")
  expect_one_line "-o naming a file" 1 "-o $f: exists and is not a folder" ./train_gpt2cu -e "$f" -i "$shard" -j "$shard" -b 4 -t 32 -o "$f"
  [ "$(md5sum <"$f")" = "$sum" ] || fail "nogpu -o naming a file: $f changed"
  expect_one_line "-sg out of range" 1 "-sg -1: expected a number in [0, 1e+06]" ./train_gpt2cu -e "$f" -t 64 -sg -1
else
  fail "nogpu checkpoint shape flag, resume without -o: no dev/fixtures/standard_tiny_model.bin ($(fixtures_hint))"
fi

# the kernel labs' flags (checked before any CUDA call) and, without a GPU, their SKIP line
lab_fwd=$lab_dir/lab_attention_forward
if [ "$WITH_LABS" = 1 ] && [ -x "$lab_fwd" ] && [ -x "${lab_fwd}_fp32" ]; then
  expect_one_line "$lab_fwd bad seed" 1 "--seed 'abc'" ./"$lab_fwd" --seed abc
  expect_one_line "$lab_fwd bad version" 1 "version '9'" ./"$lab_fwd" 9
  expect_one_line "$lab_fwd bad scheme" 1 "--scheme 'nope'" ./"$lab_fwd" --check --scheme nope
  expect_one_line "$lab_fwd bad flag" 1 "unknown flag '--frob'" ./"$lab_fwd" --frob
  expect_one_line "${lab_fwd}_fp32 version 2" 1 "BF16-only" ./"${lab_fwd}_fp32" 2
fi
for l in $LABS_BF16; do
  bin=$lab_dir/lab_$l
  [ "$WITH_LABS" = 1 ] && [ -x "$bin" ] || continue
  expect_one_line "$bin bad seed" 1 "--seed 'abc'" ./"$bin" --seed abc
  expect_one_line "$bin bad version" 1 "version '9'" ./"$bin" 9
  expect_one_line "$bin bad flag" 1 "unknown flag '--frob'" ./"$bin" --frob
done
# without a GPU a lab cannot run: one SKIP line and exit 0 is what it must do, and that is reported
# as a SKIP (counted apart by run_all.sh), not a pass; anything else is a FAIL
if [ $has_gpu -eq 0 ]; then
  out=$(./build/test_hopper 2>&1)
  rc=$?
  if [ $rc -eq 0 ] && [ "$out" = "SKIP test_hopper: no GPU" ]; then
    skip "nogpu build/test_hopper: cannot run without a GPU (its one line: $out)"
  else
    fail "nogpu build/test_hopper without a GPU: expected exit 0 and the one line 'SKIP test_hopper: no GPU', got exit $rc: $(printf '%s' "$out" | head -c 300 | tr '\n' '|')"
  fi
  for bin in "${lab_bins[@]}"; do
    [ -x "$bin" ] || { fail "nogpu $bin: not built"; continue; }
    out=$(./"$bin" --check 2>&1)
    rc=$?
    lines=$(printf '%s\n' "$out" | grep -c .)
    if [ $rc -eq 0 ] && [ "$lines" -eq 1 ] && printf '%s' "$out" | grep -qF "SKIP $(basename "$bin"): no CUDA device"; then
      skip "nogpu $bin --check: cannot run without a GPU (its one line: $out)"
    else
      fail "nogpu $bin without a GPU: expected exit 0 and one line 'SKIP $(basename "$bin"): no CUDA device ...', got exit $rc and $lines lines: $(printf '%s' "$out" | head -c 300 | tr '\n' '|')"
    fi
  done
fi

# ---------------------------------------------------------------------------------------------
# GPU tests. Each binary runs under a timeout: a kernel that hangs (a spin wait on another block
# that never comes) must cost one run, not the device call
GPU_RUN_TIMEOUT=${GPU_RUN_TIMEOUT:-180}
if [ $has_gpu -eq 0 ]; then
  echo "SKIP gpu tests: no CUDA device on this machine"
else
  # FP32 first: its tolerance separates logic errors from bf16 rounding
  for p in FP32 BF16; do
    case " $PRECISIONS " in *" $p "*) ;; *) continue ;; esac
    for s in $SCHEMES; do
      bin=$(binary test_gpt2cu "$s" "$p")
      [ -x "$bin" ] || { fail "gpu $bin: not built"; continue; }
      timeout "$GPU_RUN_TIMEOUT" ./"$bin" | tee "$log_dir/$bin.log" | grep -E '^(PASS|FAIL|SKIP) |^cuda-'
      rc=${PIPESTATUS[0]}
      if [ "$rc" -ne 0 ]; then
        # exit 1 with FAIL lines is a counted failure; anything else (a crash, a cudaCheck exit mid-run) is one more
        if [ "$rc" -ne 1 ] || ! grep -q '^FAIL' "$log_dir/$bin.log"; then
          echo "FAIL gpu $bin: exited $rc$([ "$rc" -eq 124 ] && echo ": stopped after $GPU_RUN_TIMEOUT s (a hang?)") (crash or error before its summary; see $log_dir/$bin.log: $(grep -m1 '^error' "$log_dir/$bin.log"))"
        fi
        failed=1
      elif ! grep -q '^PASS ' "$log_dir/$bin.log"; then
        echo "FAIL gpu $bin: exited 0 without a PASS line (see $log_dir/$bin.log)"
        failed=1
      fi
    done
  done
  # the inspection run (--dump_attention) of the GPU trainers against the CPU trainer's maps, Q = K's
  # symmetry under cuBLASLt (dev/test/test_attention_maps.sh --gpu: its PASS/FAIL lines)
  bash dev/test/test_attention_maps.sh --gpu "$PRECISIONS" > "$log_dir/attention_maps.log" 2>&1
  rc=$?
  grep -E '^(PASS|FAIL|SKIP) ' "$log_dir/attention_maps.log"
  if [ $rc -ne 0 ]; then
    grep -q '^FAIL' "$log_dir/attention_maps.log" || echo "FAIL gpu attention maps: exited $rc without a FAIL line (see $log_dir/attention_maps.log)"
    failed=1
  fi
  # the trainer binary itself (BF16), end to end: -o log and checkpoints, then -y 1 continues from them
  f=$(fixture_of standard)
  if [ $has_bf16 -eq 0 ]; then
    :
  elif [ -n "$f" ]; then
    run_dir=build/test_cuda_trainer
    rm -rf "$run_dir"
    common=(-e "$f" -i "$shard" -j "$shard" -b 4 -t 32 -v 2 -m 1 -s 2 -g 4 -n 2 -l 1e-3 -u 1 -q 0.1 -c 0.1 -o "$run_dir")
    ./train_gpt2cu "${common[@]}" -x 4 >"$log_dir/trainer_run.log" 2>&1; rc1=$?
    ./train_gpt2cu "${common[@]}" -x 6 -y 1 --reschedule 1 >"$log_dir/trainer_resume.log" 2>&1; rc2=$?
    steps=$(grep -c '^step [0-9]*/[0-9]* | loss .* | lr .* | norm .* ms | .* tok/s | MFU ' "$run_dir/main.log" 2>/dev/null)
    lt_line=$(grep -m1 '^matmuls: [0-9]* configurations' "$log_dir/trainer_run.log")
    if [ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && [ "${steps:-0}" -eq 6 ] && grep -q '^resuming from .*state_00000004.bin' "$log_dir/trainer_resume.log" &&
       [ -f "$run_dir/model_00000004.bin" ] && [ -f "$run_dir/state_00000006.bin" ] && ! ls "$run_dir"/*.tmp >/dev/null 2>&1 &&
       [ -n "$lt_line" ] && [ -f "$run_dir/lt_algos.bin" ] && grep -q "^matmuls: [0-9]* choices read from $run_dir/lt_algos.bin" "$log_dir/trainer_resume.log"; then
      pass "gpu train_gpt2cu -o/-n/-y: 4 steps, checkpoints, resumed to 6 (6 step lines in $run_dir/main.log); the matmuls tuned ('${lt_line#matmuls: }'), lt_algos.bin read by the resume"
    else
      fail "gpu train_gpt2cu -o/-n/-y: exits $rc1/$rc2, $steps step lines (expected 0/0, 6), see $log_dir/trainer_run.log, trainer_resume.log"
    fi
    # the same folder again without -y 1: refused (it holds that run), then replaced with --overwrite 1
    ./train_gpt2cu "${common[@]}" -x 2 >"$log_dir/trainer_again.log" 2>&1; rc1=$?
    ./train_gpt2cu "${common[@]}" -x 2 --overwrite 1 >"$log_dir/trainer_overwrite.log" 2>&1; rc2=$?
    if [ $rc1 -eq 1 ] && grep -q "holds another run's files" "$log_dir/trainer_again.log" && [ $rc2 -eq 0 ] &&
       grep -q "^--overwrite 1: removed the previous run's files from $run_dir: lt_algos.bin main.log model_00000002.bin model_00000004.bin model_00000006.bin state_" "$log_dir/trainer_overwrite.log" &&
       [ ! -f "$run_dir/model_00000006.bin" ] && [ -f "$run_dir/model_00000002.bin" ]; then
      pass "gpu train_gpt2cu reused -o: refused without -y 1, replaced with --overwrite 1 (the removed files listed)"
    else
      fail "gpu train_gpt2cu reused -o: exits $rc1/$rc2 (expected 1/0), see $log_dir/trainer_again.log, trainer_overwrite.log"
    fi
    # SIGTERM mid-run: a checkpoint at the next step, exit 143, and -y 1 continues from it
    sig_dir=build/test_cuda_trainer_sigterm
    rm -rf "$sig_dir"
    ./train_gpt2cu "${common[@]}" -x 100000 -v 0 -s 0 -n 0 -o "$sig_dir" >"$log_dir/trainer_sigterm.log" 2>&1 &
    pid=$!
    for _ in $(seq 1 3000); do grep -q '^step [2-9][0-9]*/' "$log_dir/trainer_sigterm.log" && break; kill -0 $pid 2>/dev/null || break; sleep 0.01; done
    kill -TERM $pid 2>/dev/null; wait $pid; rc1=$?
    sig_step=$(sed -n 's/^stopped by SIGTERM at step \([0-9]*\): checkpoint .* written.*/\1/p' "$log_dir/trainer_sigterm.log")
    rc2=1
    [ -n "$sig_step" ] && { ./train_gpt2cu "${common[@]}" -x $((sig_step + 2)) -v 0 -s 0 -n 0 -o "$sig_dir" -y 1 --reschedule 1 >"$log_dir/trainer_sigterm_resume.log" 2>&1; rc2=$?; }
    if [ $rc1 -eq 143 ] && [ -n "$sig_step" ] && [ -f "$sig_dir/state_$(printf %08d "$sig_step").bin" ] && [ $rc2 -eq 0 ] &&
       grep -q "^resuming from $sig_dir/state_$(printf %08d "$sig_step").bin at step $sig_step" "$log_dir/trainer_sigterm_resume.log"; then
      pass "gpu train_gpt2cu SIGTERM: exit 143, checkpoint at step $sig_step, -y 1 resumes from it"
    else
      fail "gpu train_gpt2cu SIGTERM: exit $rc1 (expected 143), stop line at step '${sig_step}', resume exit $rc2; see $log_dir/trainer_sigterm.log"
    fi
  else
    fail "gpu train_gpt2cu -o/-n/-y: no dev/fixtures/standard_tiny_model.bin ($(fixtures_hint))"
  fi
  # the BF16 trainer writes a plain GPT-2 (the standard fixture: Hkv = H, MLP 4C, biases, tied) as
  # llm.c's version 5, fields 8..255 zero, so that llm.c's train_gpt2cu loads it
  m5=build/test_cuda_trainer/model_00000002.bin # the --overwrite 1 run's (it removed the first run's files)
  if [ $has_bf16 -eq 0 ]; then
    :
  elif [ -f "$m5" ]; then
    read -r -a h5 <<< "$(od -An -t d4 -N 1024 -v "$m5" | tr -s ' \n' ' ')"
    nz5=$(printf '%s\n' "${h5[@]:8}" | grep -vc '^0$')
    if [ "${h5[1]:-}" = 5 ] && [ "$nz5" -eq 0 ]; then
      pass "gpu train_gpt2cu checkpoint of a plain GPT-2 is llm.c's version 5 (fields 8..255 zero)"
    else
      fail "gpu train_gpt2cu checkpoint of a plain GPT-2: $m5 is version ${h5[1]:-?} with $nz5 nonzero fields in 8..255, expected llm.c's 5 and 0"
    fi
  else
    fail "gpu train_gpt2cu checkpoint of a plain GPT-2: $m5 was not written"
  fi
  # the kernel labs: every version x scheme x shape against the CPU twin (FAIL lines shown, PASS lines counted)
  for bin in "${lab_bins[@]}"; do
    [ -x "$bin" ] || { fail "gpu $bin: not built"; continue; }
    lab_log="$log_dir/$(basename "$bin").log"
    timeout "$GPU_RUN_TIMEOUT" ./"$bin" --check >"$lab_log" 2>&1
    rc=$?
    n_pass=$(grep -c '^PASS ' "$lab_log")
    n_fail=$(grep -c '^FAIL ' "$lab_log")
    grep '^FAIL ' "$lab_log" | head -n 20
    if [ $rc -eq 0 ] && [ "$n_pass" -gt 0 ] && [ "$n_fail" -eq 0 ]; then
      pass "gpu $bin --check: $n_pass PASS lines (version x scheme x shape), see $lab_log"
    else
      fail "gpu $bin --check: exit $rc, $n_pass PASS and $n_fail FAIL lines (see $lab_log: $(grep -m1 '^error' "$lab_log"))"
    fi
  done
fi

[ $skipped -gt 0 ] && echo "  cuda: $skipped checks skipped (SKIP lines: what cannot run on this machine; not passes)"
exit $failed
