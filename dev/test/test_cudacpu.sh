#!/usr/bin/env bash
# The CUDA trainer on the CPU (`make test`, suite cudacpu; dev/cudacpu/README.md): the real
# test_gpt2.cu and train_gpt2.cu, built with g++ against the CPU runtime of dev/cudacpu, run against
# the reference's fixtures with no GPU. Every kernel runs from its own launcher, every matmul through
# the cuBLASLt API (a reference GEMM behind it). Every fixture of the manifest runs once:
#
#   FP32, every scheme: its fixtures of head size 12 and 16 (tiny, GQA, MQA, no bias, untied, T not a
#        multiple of the tile, ...) on the unfused attention path (the permute kernels, the causal
#        softmax, the batched cuBLASLt matmuls): every activation, every gradient, 10 AdamW steps at
#        1e-4, and the KV-cached generation
#   BF16, every scheme: its head-size-64 fixtures (and standard's 128) on both attention paths (the
#        flash kernels and mma.sync; the unfused path), GQA and MQA among them, at 2e-2
#   standard, in both precisions, also runs test_gpt2cu's scheme-independent rest: two more option sets
#        (-r 1; -r 2 with the classifier in 37-row chunks and the GELU unfused), the bit-identical
#        resume (both attention paths), the log, bad steps, the v5 read; the other schemes skip it
#        (--fixtures-only) to fit CI
#   the attention labs (dev/cuda/attention_{forward,backward}.cu), BF16, version 3 --check on the
#        standard layout (version 1 its baseline; T up to 1024) and --quick for every scheme, version 2
#        --quick, the backward's versions 2, 4 and 5 and the forward's version 5 as version 3,
#        against their CPU twin; the other labs (layernorm, classifier, encoder_backward, optimizer, matmul_gelu)
#        with --quick: the trainer's kernels at its widths (C to 2048, V 50257, two sweeps of the norm);
#        the attention labs' --large: each flash kernel's far end at the largest shape the trainer admits;
#        attention_decode --quick: the batched decode attention against float64, every cache layout
#   the runtime's inline PTX (dev/cudacpu/test_ptx.cu): ldmatrix x1/x2/x4 (.trans) into mma.sync against
#        a host matmul, cp.async groups, zero-fill and the poison before the wait
#   the runtime's Hopper instructions (dev/cudacpu/test_hopper.cu): bulk tensor loads and a store through
#        tensor maps (swizzle, out of bounds) on mbarriers, wgmma in every operand layout, setmaxnreg, and
#        named barriers, eleven planted mistakes each of which must fail with its message (a deadlock naming the barrier, ...)
#   the runtime's streams and events (dev/cudacpu/test_streams.cu): event waits, the legacy stream's
#        implicit order with blocking streams, event and stream syncs that run only what they wait for;
#        a missing wait (and a non-blocking stream read by the legacy stream) must show its stale values;
#        and the poison of a 16 GiB allocation without its memory, run_only's one block, and its refusal of
#        a kernel it does not name
#   cuBLASLt without epilogues (CUDA_CPU_LT_NO_EPILOGUES=1): the trainer's fallback kernels, on
#        standard_tiny and standard_nobias (FP32) and standard_hd64 (BF16)
#   the matmul tuning (--lt_tune; test_gpt2cu --tuning) over the runtime's 4 algorithms of their own
#        summation orders (CUDA_CPU_LT_ALGOS=4), the fastest of them wrong (CUDA_CPU_LT_BROKEN_ALGO=2)
#        and rejected, the GELU epilogue slower than the matmul without it plus the trainer's GELU
#        (CUDA_CPU_LT_SLOW_EPILOGUE=gelu_aux_bias), so the pair is chosen and run: tuned losses against
#        --lt_tune 0's, a resume from lt_algos.bin bit for bit;
#        the trainer binary's lt_algos.bin refused when damaged, re-tuned (and said) on another GPU
#   the trainer binary's step of 2 and of 3 micro-steps against the reference's one batch of the same
#        tokens (dev/test/grad_accum_check.py: loss, norm, m, the weights after; clipping on and off);
#   the trainer binary: 4 steps with checkpoints, -y 1 -x 6 refused (another schedule), with
#        --reschedule 1 resumed to 6 and said so; SIGTERM writes a checkpoint; a NaN
#        weight refused at load, and with --allow_nonfinite 1 kept out of checkpoints and --generate;
#        --generate with the sampling flags (--num_samples 2, temperature, top-k, top-p): the CPU trainer's text,
#        the two samples decoded together, the second --seed 6's text alone;
#        --profile (FP32: the unfused attention; BF16 at head size 64: the flash backward's three rows
#        with -r 2 and 2 micro-steps): each
#        row of the path timed (cudaEvents, stamped by the runtime's queue), the rows within 5% of the
#        step the trainer measured
#
# One PASS/FAIL line per check (the test binary's own lines, prefixed "cpu-run"). Two runs at a time.
#   bash dev/test/test_cudacpu.sh
set -u
cd "$(dirname "$0")/../.."
source dev/test/jobs.sh
log_dir=build/test_logs/cudacpu
mkdir -p "$log_dir"
failed=0
start=$SECONDS
manifest=dev/fixtures/manifest.tsv
[ -f "$manifest" ] || { echo "FAIL cpu-run: no $manifest (HINT: /usr/bin/python3 dev/reference/make_fixtures.py --out dev/fixtures)"; exit 1; }
SCHEMES=$(make -s --no-print-directory schemes)

# (binary stem, fixtures, flags) of each run, the longest first: head sizes 64 and 128 in BF16, the
# others in FP32. A lab's run is (lab_<op>, -, its arguments); flags and arguments comma-separated.
fixtures_of() { # scheme fp32|bf16 -> comma-separated fixture names
  awk -F'\t' -v s="$1" -v p="$2" '$2 == s && (($1 ~ /_hd(64|128)/) == (p == "bf16")) { printf "%s%s", n++ ? "," : "", $1 }' "$manifest"
}
runs=("standard $(fixtures_of standard bf16) full")
# the attention labs' --check against their CPU twin (dev/cuda/README.md) on this runtime, every version
# of each lab in one run: on every shape of the standard layout (Hkv H, H/2, 1; T 1 to 1024; hd 16 for
# version 1, 64 and 128), each version against the twin and against version 1, and on --quick's shapes
# for every scheme (what differs between schemes: shared tiles, dq added after dK/dV, identity roles).
# One run per lab, not one per version: the twin and version 1, the baseline of every later version,
# are computed once per shape instead of once per version (the backward's four flash versions took
# 653 s as four runs, 2026-11-30; about 470 s as one, with version 1's own check added). The versions:
# forward 1, 2, 3 (the trainer's), 5, 6 and 7 (sm_90a: issue 59); backward 1, 2, 3, 4 (the trainer's),
# 5, 6, 7 and 8 (sm_90a) (attention_flash_versions.h holds the ones the trainer does not). T 1024's six shapes are ~85% of the
# backward's time (the runtime's mma.sync). (Every scheme in full: ~5 min a forward version here, ~20
# a backward one.) Their FP32 builds have version 1 only, the unfused path the 25 FP32 fixtures run: not here.
runs=("lab_attention_backward - --check,--scheme,standard" "${runs[@]}") # the longest run first
runs+=("lab_attention_forward - --check,--scheme,standard" "lab_attention_backward - --quick" "lab_attention_forward - --quick")
# --large: every flash kernel's index arithmetic at the largest shape the trainer admits (B 16383, T 512,
# C 256: B*T*C just under 2^31, the projection past 2^32), every scheme, hd 64 and 128, Hkv H and 1; only
# the CTAs of the last head of the last batch row run (the runtime's run_only), against the twin of that
# row; version 3's dQ store the block whose stride loop reaches the last pair (~45 s for both)
runs+=("lab_attention_forward - --large" "lab_attention_backward - --large")
runs+=("standard_fp32 $(fixtures_of standard fp32) full")
for s in $SCHEMES; do
  [ "$s" = standard ] && continue
  for p in bf16 fp32; do
    f=$(fixtures_of "$s" $p)
    [ -n "$f" ] || { echo "FAIL cpu-run $s: no $p fixture in $manifest"; failed=1; continue; }
    runs+=("$s$([ $p = fp32 ] && echo _fp32) $f --fixtures-only")
  done
done
# cuBLASLt without its epilogues (CUDA_CPU_LT_NO_EPILOGUES=1: no algorithm for any): the trainer's own
# fallbacks (add_bias_kernel, gelu_forward/backward_kernel, bias_backward_kernel) in place of BIAS,
# GELU_AUX_BIAS, DGELU and BGRADB, against the same fixtures, with and without biases
runs+=("standard_fp32 standard_tiny,standard_nobias --fixtures-only no_epilogues")
runs+=("standard standard_hd64 --fixtures-only no_epilogues")
# ... and refused as INVALID_VALUE (=2), which matmul_lt takes as "no algorithm" too, with a warning
runs+=("standard_fp32 standard_tiny --fixtures-only epilogues_invalid")
# the matmul tuning (--lt_tune, test_gpt2.cu's run_tuning_check) over 4 algorithms of their own summation
# orders (CUDA_CPU_LT_ALGOS=4), one of them wrong and the fastest (CUDA_CPU_LT_BROKEN_ALGO=2): the tuner
# must reject it and choose among the other three; the GELU epilogue slow (CUDA_CPU_LT_SLOW_EPILOGUE): the
# tuner must choose the matmul without it and the trainer's GELU; lt_algos.bin and the resume that reads it
runs+=("standard_fp32 standard_tiny --tuning lt_broken")
# the other kernels at the trainer's widths (C to 2048, V 50257, 1.8M parameters) against their CPU
# twins: the BF16 labs' --quick (their short shape lists), the trainer's version of each (matmul_gelu:
# all three, the GELU and the bias gradients fused and not; classifier: version 3, whose launcher also
# takes version 2's kernel, its fallback, at V 60000; layernorm: version 3, whose backward's grouped
# reduction is one group, version 2's, at the fixtures' small grids, and version 4, the lab's backward
# with its column sums in shared memory, not yet measured on a GPU)
runs+=("lab_layernorm - 3,--quick" "lab_layernorm - 4,--quick" "lab_classifier - 3,--quick" "lab_encoder_backward - 2,--quick"
       "lab_optimizer - --quick" "lab_matmul_gelu - --quick" "lab_attention_decode - --quick")
# the runtime's model of ldmatrix and cp.async (and mma.sync) against host arithmetic (dev/cudacpu/test_ptx.cu)
runs+=("test_ptx - full")
# ... and of Hopper's instructions (dev/cudacpu/test_hopper.cu): mbarrier, bulk tensor copies (swizzle, out
# of bounds), the async proxy's fence, wgmma in every operand layout, setmaxnreg, named barriers, and eleven planted mistakes
runs+=("test_hopper - full")
# ... and of streams and events (dev/cudacpu/test_streams.cu): what CUDA orders holds; what it leaves
# unordered runs in the order that breaks a program relying on it, the later stream first and (again)
# the legacy stream first (CUDA_CPU_STREAMS=earlier)
runs+=("test_streams - full" "test_streams - full streams_earlier")
# the trainer with the legacy stream's work first (the classifier's stream last): a chunk's backward
# that did not wait for its cross-entropy would read logits (the default order runs the other way)
runs+=("standard_fp32 standard_tiny --fixtures-only streams_earlier")

# `function item` for each item (its words as arguments), two at a time, their output collected in
# out_file, then printed; a FAIL line there fails the suite
two_at_a_time() { # out_file function items...
  local out=$1 fn=$2
  shift 2
  : >"$out"
  run_jobs 2 "$fn" "$@" >>"$out"
  cat "$out"
  if grep -q '^FAIL' "$out"; then failed=1; fi
}

# --- build: the rewrite once, then two g++ at a time ----------------------------------------------
build_start=$SECONDS
lab_sources=()
for f in dev/cuda/{attention_forward,attention_backward,layernorm,classifier,encoder_backward,optimizer,matmul_gelu,attention_decode}.cu \
         dev/cuda/common.h dev/cuda/attention_flash_versions.h dev/cpu/attention_tiled_cpu.h dev/cpu/kernels_cpu.h \
         dev/trainer/*.cuh; do
  lab_sources+=("build/cudacpu/src/$f")
done
make -s build/cudacpu/src/train_gpt2.cu build/cudacpu/src/test_gpt2.cu "${lab_sources[@]}" >"$log_dir/rewrite.log" 2>&1 ||
  { echo "FAIL cpu-run rewrite: $(grep -m1 -i 'error' "$log_dir/rewrite.log" || tail -n1 "$log_dir/rewrite.log")"; exit 1; }
# the runtime's precompiled headers, once, before the builds that use them run two at a time
make -s cudacpu-pch >"$log_dir/pch.log" 2>&1 && ! grep -qi 'warning' "$log_dir/pch.log" ||
  { echo "FAIL cpu-run precompiled header: $(grep -m1 -i 'error\|warning' "$log_dir/pch.log" || tail -n1 "$log_dir/pch.log")"; exit 1; }
build_one() { # target
  local log="$log_dir/build_$(basename "$1").log"
  if ! make -s "$1" >"$log" 2>&1; then
    echo "FAIL cpu-run compile $1: $(grep -m1 -i 'error' "$log" || tail -n1 "$log")"
  elif grep -qi 'warning' "$log"; then
    echo "FAIL cpu-run compile $1: compiler warning: $(grep -m1 -i 'warning' "$log")"
  fi
}
binary_of() { case $1 in lab_* | test_ptx | test_hopper | test_streams) echo "build/cudacpu/$1" ;; *) echo "build/cudacpu/test_gpt2cu_$1" ;; esac; }
targets=(build/cudacpu/train_gpt2cu_standard_fp32 build/cudacpu/train_gpt2cu_standard)
for r in "${runs[@]}"; do # each binary once (two makes of one target at a time would race)
  t=$(binary_of "${r%% *}")
  [[ " ${targets[*]} " == *" $t "* ]] || targets+=("$t")
done
two_at_a_time "$log_dir/builds.txt" build_one "${targets[@]}"
echo "  cpu-run builds: ${#targets[@]} binaries in $((SECONDS - build_start)) s"

# --- the test binaries, two at a time ----------------------------------------------------------------
run_one() { # stem fixtures full|--fixtures-only|--tuning [no_epilogues|epilogues_invalid|lt_broken|streams_earlier], or lab_<op> - arguments (comma-separated)
  local name=$1${4:+_$4}
  # a lab runs more than once (versions, shape lists): its arguments name the log
  [ "$2" = - ] && name="${1}_$(printf '%s' "$3" | tr -c 'a-zA-Z0-9' _)${4:+_$4}"
  local bin m="$log_dir/manifest_$name.tsv" log="$log_dir/test_$name.log" t0=$SECONDS
  local env=() tag=""
  [ "${4:-}" = no_epilogues ] && { env=(CUDA_CPU_LT_NO_EPILOGUES=1); tag=" no-epilogues"; }
  [ "${4:-}" = epilogues_invalid ] && { env=(CUDA_CPU_LT_NO_EPILOGUES=2); tag=" epilogues-invalid"; }
  [ "${4:-}" = lt_broken ] && { env=(CUDA_CPU_LT_ALGOS=4 CUDA_CPU_LT_BROKEN_ALGO=2 CUDA_CPU_LT_SLOW_EPILOGUE=gelu_aux_bias); tag=" lt-broken"; }
  [ "${4:-}" = streams_earlier ] && { env=(CUDA_CPU_STREAMS=earlier); tag=" streams-earlier"; }
  bin=$(binary_of "$1")
  [ -x "$bin" ] || { echo "FAIL cpu-run $1: $bin not built"; return; }
  local args=("$m")
  if [ "$2" = - ]; then
    args=()
  else
    : >"$m"
    for f in ${2//,/ }; do
      grep -P "^$f\t" "$manifest" >>"$m" || { echo "FAIL cpu-run $1: fixture $f not in $manifest"; return; }
    done
  fi
  local flags=()
  # shellcheck disable=SC2206
  [ "$3" = full ] || flags=(${3//,/ })
  env "${env[@]}" timeout 1200 "$bin" "${args[@]}" "${flags[@]}" >"$log" 2>&1
  local rc=$?
  grep -E '^(PASS|FAIL) ' "$log" | sed -E "s/^(PASS|FAIL) /\\1 cpu-run$tag /"
  if [ $rc -ne 0 ] && ! grep -q '^FAIL ' "$log"; then
    echo "FAIL cpu-run$tag $1: exited $rc without a FAIL line (timeout is 124; see $log: $(grep -m1 'cuda-cpu\|^error' "$log"))"
  elif [ $rc -eq 0 ] && ! grep -q '^PASS ' "$log"; then
    echo "FAIL cpu-run$tag $1: exited 0 without a PASS line (a SKIP is no check; see $log)"
  fi
  echo "  cpu-run$tag $1 ($2${flags[*]:+ ${flags[*]}}): $((SECONDS - t0)) s"
}
two_at_a_time "$log_dir/tests.txt" run_one "${runs[@]}"

# --- the trainer binary: checkpoints, -y 1, SIGTERM ----------------------------------------------------
trainer=build/cudacpu/train_gpt2cu_standard_fp32
shard="$log_dir/tokens_000.bin"
python3 dev/test/tiny_shard.py "$shard" $((4 * 32 * 16 + 1)) 5
f=dev/fixtures/standard_tiny_model.bin
if [ -x "$trainer" ] && [ -f "$f" ]; then
  run_dir=build/test_cudacpu_trainer
  rm -rf "$run_dir"
  common=(-e "$f" -i "$shard" -j "$shard" -b 4 -t 32 -v 2 -m 1 -s 0 -g 4 -n 2 -l 1e-3 -u 1 -q 0.1 -c 0.1 -o "$run_dir")
  "$trainer" "${common[@]}" -x 4 >"$log_dir/trainer_run.log" 2>&1; rc1=$?
  # -x 6 stretches the run's schedule: refused, then taken with --reschedule 1, which says so
  "$trainer" "${common[@]}" -x 6 -y 1 >"$log_dir/trainer_resume_refused.log" 2>&1; rc_refused=$?
  "$trainer" "${common[@]}" -x 6 -y 1 --reschedule 1 >"$log_dir/trainer_resume.log" 2>&1; rc2=$?
  steps=$(grep -c '^step [0-9]*/[0-9]* | loss ' "$run_dir/main.log" 2>/dev/null)
  resched="reschedule: from step 5/6 on, -x 4 -> 6; the learning rate of step 5 goes from "
  if [ $rc1 -eq 0 ] && [ $rc_refused -eq 1 ] && grep -q "^error: -y 1: this run's settings differ .*: -x 4 -> 6; .*--reschedule 1" "$log_dir/trainer_resume_refused.log" &&
     [ $rc2 -eq 0 ] && [ "${steps:-0}" -eq 6 ] && grep -q '^resuming from .*state_00000004.bin' "$log_dir/trainer_resume.log" &&
     grep -q "^$resched" "$log_dir/trainer_resume.log" && grep -q "^$resched" "$run_dir/main.log" &&
     [ -f "$run_dir/model_00000004.bin" ] && [ -f "$run_dir/state_00000006.bin" ] && ! ls "$run_dir"/*.tmp >/dev/null 2>&1; then
    echo "PASS cpu-run train_gpt2cu -o/-n/-y: 4 steps, checkpoints; -y 1 -x 6 refused, with --reschedule 1 resumed to 6 ($steps step lines in $run_dir/main.log; $(grep '^reschedule' "$log_dir/trainer_resume.log" | cut -c1-110) ...)"
  else
    echo "FAIL cpu-run train_gpt2cu -o/-n/-y: exits $rc1/$rc_refused/$rc2, ${steps:-0} step lines (expected 0/1/0, 6, a refusal naming -x 4 -> 6, then '$resched...' in the output and main.log), see $log_dir/trainer_run.log, trainer_resume_refused.log, trainer_resume.log"
    failed=1
  fi
  # lt_algos.bin: written by the run, read by its resume; from another GPU: re-tuned, said, and rewritten;
  # damaged: refused in one line (each resume from the step-4 checkpoint, 2 steps with --reschedule 1)
  lt_line=$(grep -m1 '^matmuls: [0-9]* choices read from ' "$log_dir/trainer_resume.log")
  lt_other=build/test_cudacpu_trainer_lt_other lt_bad=build/test_cudacpu_trainer_lt_bad
  rm -rf "$lt_other" "$lt_bad" && mkdir -p "$lt_other" "$lt_bad"
  cp "$run_dir"/model_00000004.bin "$run_dir"/state_00000004.bin "$lt_other/" && cp "$run_dir"/*_00000004.bin "$lt_bad/"
  python3 - "$run_dir/lt_algos.bin" "$lt_other/lt_algos.bin" "$lt_bad/lt_algos.bin" <<'PY'
import sys
d = bytearray(open(sys.argv[1], "rb").read())
open(sys.argv[3], "wb").write(d[:300])  # the header and part of an entry
d[16:16 + 256] = b"NVIDIA A100-SXM4-80GB".ljust(256, b"\0")  # the header's GPU name (dev/FORMATS.md)
open(sys.argv[2], "wb").write(d)
PY
  "$trainer" "${common[@]}" -o "$lt_other" -x 6 -y 1 --reschedule 1 >"$log_dir/trainer_lt_other.log" 2>&1; rc_other=$?
  "$trainer" "${common[@]}" -o "$lt_bad" -x 6 -y 1 --reschedule 1 >"$log_dir/trainer_lt_bad.log" 2>&1; rc_bad=$?
  if [ -n "$lt_line" ] && [ $rc_other -eq 0 ] &&
     grep -q "^matmuls: $lt_other/lt_algos.bin was tuned on NVIDIA A100-SXM4-80GB with cuBLASLt [0-9]*; this is .*: re-tuning" "$log_dir/trainer_lt_other.log" &&
     grep -q "dev/cudacpu on the CPU" "$lt_other/lt_algos.bin" && [ $rc_bad -eq 1 ] &&
     [ "$(grep -c '^error: ' "$log_dir/trainer_lt_bad.log")" = 1 ] &&
     grep -q "^error: $lt_bad/lt_algos.bin is not a complete lt_algos.bin of version 1 (HINT: delete it" "$log_dir/trainer_lt_bad.log"; then
    echo "PASS cpu-run train_gpt2cu lt_algos.bin: the run wrote it, -y 1 read it ('${lt_line#matmuls: }'); another GPU's re-tuned and said so, then rewritten; a damaged one refused in one line"
  else
    echo "FAIL cpu-run train_gpt2cu lt_algos.bin: resume line '$lt_line', exits $rc_other/$rc_bad (expected 0/1); see $log_dir/trainer_resume.log, trainer_lt_other.log, trainer_lt_bad.log"
    failed=1
  fi
  sig_dir=build/test_cudacpu_trainer_sigterm
  rm -rf "$sig_dir"
  "$trainer" "${common[@]}" -x 100000 -v 0 -n 0 -o "$sig_dir" >"$log_dir/trainer_sigterm.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 6000); do grep -q '^step [2-9][0-9]*/' "$log_dir/trainer_sigterm.log" && break; kill -0 $pid 2>/dev/null || break; sleep 0.05; done
  kill -TERM $pid 2>/dev/null; wait $pid; rc1=$?
  sig_step=$(sed -n 's/^stopped by SIGTERM at step \([0-9]*\): checkpoint .* written.*/\1/p' "$log_dir/trainer_sigterm.log")
  rc2=1
  [ -n "$sig_step" ] && { "$trainer" "${common[@]}" -x $((sig_step + 1)) -v 0 -n 0 -o "$sig_dir" -y 1 --reschedule 1 >"$log_dir/trainer_sigterm_resume.log" 2>&1; rc2=$?; }
  if [ $rc1 -eq 143 ] && [ -n "$sig_step" ] && [ $rc2 -eq 0 ] &&
     grep -q "^resuming from $sig_dir/state_$(printf %08d "$sig_step").bin at step $sig_step" "$log_dir/trainer_sigterm_resume.log"; then
    echo "PASS cpu-run train_gpt2cu SIGTERM: exit 143, checkpoint at step $sig_step, -y 1 resumes from it"
  else
    echo "FAIL cpu-run train_gpt2cu SIGTERM: exit $rc1 (expected 143), stop line at step '${sig_step}', resume exit $rc2; see $log_dir/trainer_sigterm.log"
    failed=1
  fi
else
  echo "FAIL cpu-run train_gpt2cu: $trainer or $f missing"
  failed=1
fi

# --- sampling: the shared flags (dev/trainer/train_common.h) in the CUDA trainer's --generate, whose text must
# be the CPU trainer's for the same fp32 model, settings and seed (the same sampler on logits equal to
# ~1e-6: a coin that close to a boundary of the distribution is a 1-in-10^5 event per token, fixed for
# these inputs); and a bad value refused the same way
sampling_start=$SECONDS
cpu_trainer=build/train_gpt2_cpu_standard
if make -s "$cpu_trainer" >"$log_dir/build_cpu_trainer.log" 2>&1 && [ -x "$trainer" ] && [ -f "$f" ]; then
  gen_args=(-e "$f" --generate 16 --num_samples 2 --temperature 0.8 --top_k 40 --top-p 0.9 --seed 5)
  "$trainer" "${gen_args[@]}" >"$log_dir/sampling_cuda.log" 2>&1; rc1=$?
  OMP_NUM_THREADS=1 "$cpu_trainer" "${gen_args[@]}" >"$log_dir/sampling_cpu.log" 2>&1; rc2=$?
  "$trainer" -e "$f" --generate 4 --top_k 501 >"$log_dir/sampling_refused.log" 2>&1; rc3=$?
  # the batch's second sample (decoded together with the first, its own generator) is --seed 6's text alone
  "$trainer" -e "$f" --generate 16 --temperature 0.8 --top_k 40 --top-p 0.9 --seed 6 >"$log_dir/sampling_cuda_seed6.log" 2>&1; rc4=$?
  text_of() { sed -n '/^sampling: /,/^generate: /p' "$1" | grep -v '^generate: '; }
  sample_of() { awk -v want="$2" '/^---$/ { n++; next } n == want && !/^generate: / && !/^decode: / && !/^kv cache: /' "$1"; }
  second=$(sample_of "$log_dir/sampling_cuda.log" 2); alone=$(sample_of "$log_dir/sampling_cuda_seed6.log" 1)
  if [ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && [ "$(grep -c '^---$' "$log_dir/sampling_cuda.log")" -eq 3 ] &&
     [ -n "$(text_of "$log_dir/sampling_cuda.log")" ] && [ "$(text_of "$log_dir/sampling_cuda.log")" = "$(text_of "$log_dir/sampling_cpu.log")" ] &&
     [ $rc3 -eq 1 ] && grep -q "^error: --top_k 501: expected at most the model's vocabulary of 500 tokens" "$log_dir/sampling_refused.log" &&
     [ $rc4 -eq 0 ] && [ -n "$second" ] && [ "$second" = "$alone" ] &&
     grep -q "^sampling: .* | seed 6 | 1 sample$" "$log_dir/sampling_cuda_seed6.log" &&
     grep -q "^decode: 15 steps of 2 tokens, " "$log_dir/sampling_cuda.log"; then
    echo "PASS cpu-run train_gpt2cu sampling: --generate 16 --num_samples 2 --temperature 0.8 --top_k 40 --top-p 0.9 gives the CPU trainer's text on $f, the 2 samples decoded together, the second the text of --seed 6 alone; --top_k 501 refused"
  else
    echo "FAIL cpu-run train_gpt2cu sampling: exits $rc1/$rc2/$rc3/$rc4 (expected 0/0/1/0); the texts $( [ "$(text_of "$log_dir/sampling_cuda.log")" = "$(text_of "$log_dir/sampling_cpu.log")" ] && echo agree || echo differ); the batch's second sample and --seed 6 alone $( [ -n "$second" ] && [ "$second" = "$alone" ] && echo agree || echo differ); see $log_dir/sampling_cuda.log, sampling_cpu.log, sampling_cuda_seed6.log, sampling_refused.log"
    failed=1
  fi
else
  echo "FAIL cpu-run train_gpt2cu sampling: $trainer, $f or $cpu_trainer missing ($(grep -m1 -i error "$log_dir/build_cpu_trainer.log"))"
  failed=1
fi
echo "  cpu-run sampling: $((SECONDS - sampling_start)) s"

# --- non-finite weights (dev/trainer/train_common.h): refused at load; loaded with --allow_nonfinite 1, the
# CUDA writer's check (device -> host, bf16 or fp32) keeps them out of the checkpoint, and --generate
# refuses the NaN logits the decode step returns
nf_start=$SECONDS
nan_model="$log_dir/weights_nan.bin"
python3 - "$f" "$nan_model" <<'EOF2'
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
b[1024 + 4 * 5: 1024 + 4 * 6] = struct.pack("<f", float("nan"))  # wte[5]: standard_tiny is fp32
open(sys.argv[2], "wb").write(b)
EOF2
for stem in standard_fp32 standard; do
  bin=build/cudacpu/train_gpt2cu_$stem
  nf_dir=build/test_cudacpu_nonfinite_$stem
  rm -rf "$nf_dir"
  "$bin" -e "$nan_model" -i "$shard" -j "$shard" -b 4 -t 32 -x 2 -v 0 -s 0 >"$log_dir/nonfinite_refused_$stem.log" 2>&1; rc1=$?
  "$bin" -e "$nan_model" --allow_nonfinite 1 -i "$shard" -j "$shard" -b 4 -t 32 -x 2 -v 0 -s 0 -n 1 -o "$nf_dir" \
    >"$log_dir/nonfinite_$stem.log" 2>&1; rc2=$?
  "$bin" -e "$nan_model" --allow_nonfinite 1 --generate 4 >"$log_dir/nonfinite_generate_$stem.log" 2>&1; rc3=$?
  if [ $rc1 -eq 1 ] && grep -q "^error: $nan_model: tensor wte holds nan at index 5 of 32768" "$log_dir/nonfinite_refused_$stem.log" &&
     [ $rc2 -eq 1 ] && grep -q "^error: step 1: $nf_dir/model_00000001.bin: tensor wte holds nan at index 5 of 32768, .* (HINT: not written" "$log_dir/nonfinite_$stem.log" &&
     [ -z "$(ls "$nf_dir" | grep -v '^main.log$\|^lt_algos.bin$')" ] &&
     [ $rc3 -eq 1 ] && grep -q "^error: sampling at position 1: logit [0-9]* is nan" "$log_dir/nonfinite_generate_$stem.log"; then
    echo "PASS cpu-run train_gpt2cu_$stem non-finite: a NaN weight refused at load; with --allow_nonfinite 1 never written as a checkpoint (only main.log and lt_algos.bin in -o), and --generate exits 1 on NaN logits"
  else
    echo "FAIL cpu-run train_gpt2cu_$stem non-finite: exits $rc1/$rc2/$rc3 (expected 1/1/1), files in -o: $(ls "$nf_dir" 2>/dev/null | tr '\n' ' '); see $log_dir/nonfinite_*_$stem.log"
    failed=1
  fi
done
echo "  cpu-run non-finite: $((SECONDS - nf_start)) s"

# --- the trainer's --profile: which rows, each timed, adding up to the measured step -------------------
source dev/test/profile_csv.sh
profile_start=$SECONDS
rows_fwd="encoder_fwd ln1_fwd qkv_fwd attn_fwd attproj_fwd ln2_fwd fc_fwd fcproj_fwd lnf_fwd classifier lnf_bwd"
rows_bwd="fcproj_bwd fc_bwd ln2_bwd attproj_bwd ATTN qkv_bwd ln1_bwd encoder_bwd zero_grad grad_norm adamw"
for run in "standard_fp32|standard_tiny|attn_bwd|" "standard|standard_hd64|attn_bwd_delta attn_bwd_dkdv attn_bwd_dq|-r 2 -d 256"; do
  IFS='|' read -r stem fixture attn extra <<<"$run"
  bin=build/cudacpu/train_gpt2cu_$stem
  csv="$log_dir/profile_$stem.csv"
  log="$log_dir/profile_$stem.log"
  rm -f "$csv"
  # shellcheck disable=SC2086 # $extra is words on purpose
  "$bin" -e "dev/fixtures/${fixture}_model.bin" -i "$shard" -j "$shard" -b 4 -t 32 -x 3 -v 0 -s 0 $extra \
    --profile 2 --profile_csv "$csv" >"$log" 2>&1
  rc=$?
  want="$rows_fwd ${rows_bwd/ATTN/$attn}"
  [[ "$extra" == *"-r "* ]] && want="$rows_fwd recompute ${rows_bwd/ATTN/$attn}"
  step_ms=$(sed -n 's/^summary: 2 timed steps | \([0-9.]*\) ms\/step.*/\1/p' "$log")
  if [ $rc -eq 0 ] && profile_csv_check "$csv" "$step_ms" "$want"; then
    echo "PASS cpu-run train_gpt2cu_$stem --profile 2 ($fixture${extra:+ $extra}): $(echo "$want" | wc -w) rows, each timed; rows $rows_ms ms vs the summary's $step_ms ms/step: $apart% apart"
  else
    echo "FAIL cpu-run train_gpt2cu_$stem --profile 2 ($fixture${extra:+ $extra}): exit $rc; rows '$got', expected '$want'; untimed '$untimed'; $rows_ms vs '$step_ms' ms ($apart% apart); see $log"
    failed=1
  fi
done
echo "  cpu-run profile: $((SECONDS - profile_start)) s"
# gradient accumulation against the reference's one batch (dev/test/grad_accum_check.py): the trainer's
# step of 2 and of 3 micro-steps, clipping active and inactive, at the fixtures' tolerances
ga_start=$SECONDS
for stem in standard_fp32 standard; do
  tol=2e-2; [ "$stem" = standard_fp32 ] && tol=1e-4
  mkdir -p "$log_dir/grad_accum_$stem"
  "${PYTHON:-/usr/bin/python3}" dev/test/grad_accum_check.py build/cudacpu/train_gpt2cu_$stem $tol "$log_dir/grad_accum_$stem" \
    "cpu-run train_gpt2cu_$stem" || failed=1
done
echo "  cpu-run gradient accumulation: $((SECONDS - ga_start)) s"
echo "  cpu-run: $((SECONDS - start)) s in all"
exit $failed
