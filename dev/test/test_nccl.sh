#!/usr/bin/env bash
# Tests of the CUDA trainer's data parallelism (dev/trainer/data_parallel.h, -pi fs over NCCL) on the CPU:
# build/cudacpu/train_gpt2cu_standard[_fp32], the real train_gpt2.cu on the CPU runtime, whose NCCL
# is dev/cudacpu/nccl_cpu.h (processes on this machine exchanging buffers through files). On the tiny
# fixture model and synthetic shards, 10 steps of -b 4 -t 32 -d 256 (two micro-batches a step):
#   - -pi fs with one process (the NCCL path: rendezvous, communicator, every collective) writes the
#     model and state of the build without it (no -pi fs), bit for bit, in FP32 and BF16;
#   - two processes, -z 0 and -z 1 (ZeRO-1: m, v and the master weights sharded), against one over the
#     same global batch: every logged loss within 1e-5 and the parameters and AdamW's state after 10
#     steps within 1e-6 relative L2 in FP32 (float rounding: the two processes add their micro-batches'
#     gradients in another order than one process's backward does; both processes training the same
#     micro-batch, a bug planted by hand, was off by 2.4e-2). BF16 with master weights: the master
#     weights, m and v within 1e-6, the bf16 parameters (each rounded from its master weight) within
#     1e-3 and the losses within 1e-4;
#   - three processes, -z 1 (shards of whole 128-parameter blocks, the last one short);
#   - the matmul tuning in two processes (their times added up) against one: the same choices;
#   - planted bugs, the collectives' stream not waiting for the trainer's event, and the trainer not
#     waiting for the collectives' stream: each caught (the runtime runs each stream only as far as its
#     own order requires);
#   - resume from two processes (-z 1) onto one, and from one onto two;
#   - SIGTERM to one process stops both at one step with a checkpoint; a process killed mid-run ends
#     the other within --collective_timeout 3, with a line naming the collective and the step;
#   - refusals, one line each: -pn 2 without -pi fs, -pi fs without -pf or a rank, -pr out of range,
#     processes with different flags (-w and --check_args among them) or -pn, a rank 0 that never comes, --profile;
#     a launcher's processes without -pi fs, or with a -pn that is not the launcher's count;
#   - ranks from a launcher's environment (as mpirun's); a rank 0 left alone removes its id file.
# One "PASS nccl ..." / "FAIL nccl ..." line per check; exits 1 if any failed.
set -u
cd "$(dirname "$0")/../.."
source dev/test/jobs.sh # verdict_of
PY=${PYTHON:-/usr/bin/python3}
fails=0
pass() { echo "PASS nccl $*"; }
fail() { echo "FAIL nccl $*"; fails=$((fails + 1)); }
tmp=$(mktemp -d /tmp/test_nccl.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
export TMPDIR=$tmp # nccl_cpu's exchange folders
suite_start=$SECONDS
source dev/test/data_parallel_checks.sh # compare, refuse, resume_check
fp32=build/cudacpu/train_gpt2cu_standard_fp32
bf16=build/cudacpu/train_gpt2cu_standard
start=$SECONDS
if ! make -s "$fp32" "$bf16" >"$tmp/build.log" 2>&1; then
  fail "build: make $fp32 $bf16 failed: $(grep -m1 -i error "$tmp/build.log")"
  exit 1
fi
echo "nccl: built $fp32 and $bf16 in $((SECONDS - start)) s"
dp_inputs
F+=(--collective_timeout 60)

# ranks BIN WORLD NAME ARGS...: WORLD processes of BIN, ranks 0..WORLD-1, meeting in a fresh folder;
# rank r's output in $tmp/NAME.r<r>.log; returns the highest exit status
ranks() {
  local bin=$1 world=$2 name=$3 r rc=0 st
  shift 3
  local rdv="$tmp/rdv_$name"
  rm -rf "$rdv" && mkdir -p "$rdv"
  local pids=()
  for ((r = 0; r < world; r++)); do
    "$bin" "$@" -pi fs -pf "$rdv" -pn "$world" -pr $r >"$tmp/$name.r$r.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do
    wait "$p" 2>/dev/null # (bash's own line for a process killed by a test)
    st=$?
    [ $st -gt $rc ] && rc=$st
  done
  return $rc
}


# ---------------------------------------------------------------- one process through NCCL
for bin in "$fp32" "$bf16"; do
  tag=$([ "$bin" = "$fp32" ] && echo fp32 || echo bf16)
  "$bin" "${F[@]}" -n 5 -o "$tmp/one_$tag" >"$tmp/one_$tag.log" 2>&1 || fail "one_process_$tag: exited $?: $(grep -m1 error "$tmp/one_$tag.log")"
  ranks "$bin" 1 w1_$tag "${F[@]}" -n 5 -o "$tmp/w1_$tag"
  rc=$?
  if [ $rc -eq 0 ] && cmp -s "$tmp/one_$tag/model_00000010.bin" "$tmp/w1_$tag/model_00000010.bin" &&
     cmp -s "$tmp/one_$tag/state_00000010.bin" "$tmp/w1_$tag/state_00000010.bin" &&
     grep -q "^processes: 1 over NCCL" "$tmp/w1_$tag.r0.log"; then
    pass "world1_equals_plain_$tag: -pi fs -pn 1 (NCCL's path, every collective) writes the model and state of the run without it at step 10, bit for bit"
  else
    fail "world1_equals_plain_$tag: exit $rc; the step-10 files differ: $(grep -m1 error "$tmp/w1_$tag.r0.log")"
  fi
done

# ---------------------------------------------------------------- two processes, ZeRO-1, three
for z in 0 1; do
  ranks "$fp32" 2 two_z$z "${F[@]}" -z $z -n 5 -o "$tmp/two_z$z"
  rc=$?
  if [ $rc -eq 0 ] && msg=$(compare "$tmp/one_fp32" "$tmp/two_z$z" 10 2>&1) &&
     grep -q "^processes: 2 over NCCL | each trains 1 of the 2 micro-batches of a step | -z $z: " "$tmp/two_z$z.r0.log"; then
    pass "np2_z${z}_equals_np1_fp32: two processes, -z $z, against one, global batch 256: $msg"
  else
    fail "np2_z${z}_equals_np1_fp32: exit $rc: ${msg:-} $(grep -m1 error "$tmp/two_z$z.r"[01].log)"
  fi
done
ranks "$bf16" 2 two_bf16 "${F[@]}" -z 1 -n 5 -o "$tmp/two_bf16"
rc=$?
if [ $rc -eq 0 ] && msg=$(compare "$tmp/one_bf16" "$tmp/two_bf16" 10 1e-3 1e-4 2>&1); then
  pass "np2_z1_equals_np1_bf16: two processes, -z 1 (the master weights sharded too), against one: $msg"
else
  fail "np2_z1_equals_np1_bf16: exit $rc: ${msg:-} $(grep -m1 error "$tmp/two_bf16.r"[01].log)"
fi
"$fp32" "${F[@]}" -d 384 -n 10 -o "$tmp/one384" >"$tmp/one384.log" 2>&1
ranks "$fp32" 3 three "${F[@]}" -d 384 -z 1 -n 10 -o "$tmp/three"
rc=$?
if [ $rc -eq 0 ] && msg=$(compare "$tmp/one384" "$tmp/three" 10 2>&1); then
  pass "np3_z1_equals_np1_fp32: three processes, -z 1 (uneven shards, 4 validation batches over 3), global batch 384: $msg"
else
  fail "np3_z1_equals_np1_fp32: exit $rc: ${msg:-} $(grep -m1 error "$tmp/three.r"[012].log)"
fi
# the matmul tuning (--lt_tune, over the CPU runtime's 4 algorithms) in two processes: each times the
# candidates, they add their times up (one collective per configuration) and keep the same algorithm;
# against one process tuned alike: the same lt_algos.bin, the same training, rank 1 silent
export CUDA_CPU_LT_ALGOS=4
"$fp32" "${F[@]}" -n 5 -o "$tmp/one_tuned" >"$tmp/one_tuned.log" 2>&1; rc1=$?
ranks "$fp32" 2 two_tuned "${F[@]}" -z 1 -n 5 -o "$tmp/two_tuned"
rc=$?
unset CUDA_CPU_LT_ALGOS
lt=$(grep -m1 '^matmuls: [0-9]* configurations, [1-9][0-9]* timed' "$tmp/two_tuned.r0.log")
if [ $rc1 -eq 0 ] && [ $rc -eq 0 ] && [ -n "$lt" ] && cmp -s "$tmp/one_tuned/lt_algos.bin" "$tmp/two_tuned/lt_algos.bin" &&
   [ ! -s "$tmp/two_tuned.r1.log" ] && msg=$(compare "$tmp/one_tuned" "$tmp/two_tuned" 10 2>&1); then
  pass "np2_tuned: two processes tune their matmuls together ('${lt#matmuls: }'): one process's lt_algos.bin, its training: $msg"
else
  fail "np2_tuned: exits $rc1/$rc, '$lt': ${msg:-} $(grep -m1 error "$tmp/one_tuned.log" "$tmp/two_tuned.r"[01].log)"
fi
if [ "$(grep -c '^step 1/10 ' "$tmp/two_z0.r0.log")" = 1 ] && [ ! -s "$tmp/two_z0.r1.log" ] &&
   [ "$(ls "$tmp/rdv_two_z0" | wc -l)" = 0 ]; then
  pass "rank0_prints: rank 0 prints the run, rank 1 nothing; the rendezvous folder is left empty"
else
  fail "rank0_prints: $(grep -c '^step 1/10 ' "$tmp/two_z0.r0.log") 'step 1/10' lines from rank 0, $(wc -l <"$tmp/two_z0.r1.log") lines from rank 1, left in -pf: $(ls "$tmp/rdv_two_z0" | head -3 | paste -sd' ' -)"
fi

# ---------------------------------------------------------------- resume across process counts
resume_check resume_2_to_1 "$tmp/two_z1" "$tmp/one_fp32" "$tmp/resume_2_to_1.r0.log" \
  "the two processes' -z 1 checkpoint of step 5 resumed by one" ranks "$fp32" 1 resume_2_to_1 "${F[@]}" -z 1
resume_check resume_1_to_2 "$tmp/one_fp32" "$tmp/one_fp32" "$tmp/resume_1_to_2.r0.log" \
  "one process's checkpoint of step 5 resumed by two, -z 1" ranks "$fp32" 2 resume_1_to_2 "${F[@]}" -z 1

# ---------------------------------------------------------------- a signal, a process killed
long=("${F[@]}" -x 100000 -v 0 --collective_timeout 3)
# pid_of NAME RANK: the trainer of that run and rank (its command line names both)
pid_of() { pgrep -f -- "-pf $tmp/rdv_$1 -pn 2 -pr $2" | head -n 1; }
for how in TERM KILL; do
  name=sig_$how
  t0=$SECONDS
  ranks "$fp32" 2 "$name" "${long[@]}" -z 1 -o "$tmp/$name" &
  job=$!
  for _ in $(seq 300); do grep -q '^step 2/' "$tmp/$name.r0.log" 2>/dev/null && break; sleep 0.1; done
  pid=$(pid_of "$name" 1)
  [ -n "$pid" ] && kill -"$how" "$pid"
  wait $job
  rc=$?
  secs=$((SECONDS - t0))
  if [ $how = TERM ]; then
    stop_line=$(grep -m1 '^stopped by SIGTERM at step' "$tmp/$name.r0.log")
    at=$(sed -n 's/^stopped by SIGTERM at step \([0-9]*\): checkpoint .*/\1/p' <<<"$stop_line")
    if [ -n "$pid" ] && [ $rc -eq 143 ] && [ -n "$at" ] && [ -f "$tmp/$name/state_$(printf %08d "$at").bin" ]; then
      pass "stop_one_rank: SIGTERM to rank 1: both exit 143 at one step, rank 0: '$stop_line'"
    else
      fail "stop_one_rank: rank 1 '$pid', exit $rc (expected 143), stop line '$stop_line': $(grep -m1 error "$tmp/$name.r"[01].log)"
    fi
  else
    want="^error: rank 0: the .* at step [0-9]+ waited 3 s for the other 1 process and gave up \(HINT: one died or hangs: see its output; --collective_timeout sets the wait\)$"
    if [ -n "$pid" ] && [ $rc -ne 0 ] && grep -Eq "$want" "$tmp/$name.r0.log"; then
      pass "rank_killed: SIGKILL to rank 1 mid-run: rank 0 ended the run after $secs s with '$(grep -m1 -Eo "$want" "$tmp/$name.r0.log")'"
    else
      fail "rank_killed: rank 1 '$pid', exit $rc after $secs s, expected a line matching '$want': $(tail -n 2 "$tmp/$name.r0.log" | paste -sd' ' -)"
    fi
  fi
done

# ---------------------------------------------------------------- refusals, one line each
refuse pn_without_fs "^error: -pn 2: the CUDA trainer's processes meet with -pi fs -pf DIR, over NCCL \(HINT: .*\)$" \
  "$fp32" "${F[@]}" -pn 2
refuse fs_without_pf "^error: -pi fs: -pf DIR is missing, the folder where the processes meet \(HINT: .*\)$" \
  "$fp32" "${F[@]}" -pi fs -pn 2 -pr 0
refuse fs_without_rank "^error: -pi fs -pn 2: this process's rank is not known \(HINT: -pr R, from 0 to 1; .*\)$" \
  "$fp32" "${F[@]}" -pi fs -pf "$tmp" -pn 2
refuse pr_range "^error: -pr 2: the ranks of -pn 2 go from 0 to 1$" "$fp32" "${F[@]}" -pi fs -pf "$tmp" -pn 2 -pr 2
refuse no_rank0 "^error: rank 1: -pf $tmp/lonely: rank 0 wrote no $tmp/lonely/ncclUniqueId within 2 s \(HINT: .*\)$" \
  bash -c "mkdir -p $tmp/lonely && exec $fp32 $(printf '%q ' "${F[@]}") --collective_timeout 2 -pi fs -pf $tmp/lonely -pn 2 -pr 1"
refuse_ranks() { # NAME WANT(ERE, the whole line) ARGS...: two processes with ARGS; each must exit non-zero
  local name=$1 want=$2
  shift 2
  ranks "$fp32" 2 "$name" "$@"
  local rc=$? r0 r1
  r0=$(grep -Ec "$want" "$tmp/$name.r0.log")
  r1=$(grep -Ec "$want" "$tmp/$name.r1.log")
  if [ $rc -ne 0 ] && [ "$r0" -ge 1 ] && [ "$r1" -ge 1 ]; then
    pass "refused_$name: both processes exit non-zero, each with its line: '$(grep -m1 -E "$want" "$tmp/$name.r1.log")'"
  else
    fail "refused_$name: exit $rc, $r0 and $r1 lines matching '$want': $(grep -m1 -i error "$tmp/$name.r1.log")"
  fi
}
refuse_ranks d_split "^error: rank [01]: -d 384: 3 micro-batches of B\*T = 128 tokens per step do not split over 2 processes \(HINT: -d a multiple of B\*T\*2 = 256\)$" \
  "${F[@]}" -d 384
refuse_ranks profile "^error: rank [01]: --profile is one process's work \(HINT: run it as one process\)$" "${F[@]}" --profile 2
# different flags on the two processes: the agreement refuses them; different -pn: rank 1 refuses rank 0's id
rm -rf "$tmp/rdv_differ" && mkdir -p "$tmp/rdv_differ"
"$fp32" "${F[@]}" -pi fs -pf "$tmp/rdv_differ" -pn 2 -pr 0 -l 1e-3 >"$tmp/differ.r0.log" 2>&1 &
p0=$!
"$fp32" "${F[@]}" -pi fs -pf "$tmp/rdv_differ" -pn 2 -pr 1 -l 2e-3 >"$tmp/differ.r1.log" 2>&1
rc1=$?
wait $p0
rc0=$?
want="^error: the 2 processes differ in the model or the training flags \(.*\) \(HINT: every process must run the same command on the same files\)$"
if [ $rc0 -ne 0 ] && [ $rc1 -ne 0 ] && grep -Eq "$want" "$tmp/differ.r0.log"; then
  pass "ranks_differ: -l 1e-3 on rank 0, 2e-3 on rank 1: exits $rc0/$rc1, '$(grep -m1 -E "$want" "$tmp/differ.r0.log" | cut -c1-90)...'"
else
  fail "ranks_differ: exits $rc0/$rc1, no line matching '$want': $(grep -m1 error "$tmp/differ.r0.log")"
fi
# differing only in --check_args: refused at once (before, the process that trains waited out its
# --collective_timeout for the one that only checked)
rm -rf "$tmp/rdv_check" && mkdir -p "$tmp/rdv_check"
start=$SECONDS
"$fp32" "${F[@]}" -pi fs -pf "$tmp/rdv_check" -pn 2 -pr 0 --collective_timeout 20 --check_args 1 >"$tmp/check.r0.log" 2>&1 &
p0=$!
"$fp32" "${F[@]}" -pi fs -pf "$tmp/rdv_check" -pn 2 -pr 1 --collective_timeout 20 >"$tmp/check.r1.log" 2>&1
rc1=$?
wait $p0
rc0=$?
want="^error: the 2 processes differ in --check_args \(HINT: every process must run the same command on the same files\)$"
if [ $rc0 -ne 0 ] && [ $rc1 -ne 0 ] && [ $((SECONDS - start)) -lt 15 ] && grep -Eq "$want" "$tmp/check.r0.log"; then
  pass "ranks_differ_check_args: --check_args 1 on rank 0 only: exits $rc0/$rc1 in $((SECONDS - start)) s, '$(grep -m1 -E "$want" "$tmp/check.r0.log" | cut -c1-70)...'"
else
  fail "ranks_differ_check_args: exits $rc0/$rc1 after $((SECONDS - start)) s, no line matching '$want': $(grep -m1 error "$tmp/check.r0.log") $(grep -m1 error "$tmp/check.r1.log")"
fi
rm -rf "$tmp/rdv_pn" && mkdir -p "$tmp/rdv_pn"
"$fp32" "${F[@]}" -pi fs -pf "$tmp/rdv_pn" -pn 2 -pr 0 --collective_timeout 3 >"$tmp/pn.r0.log" 2>&1 &
p0=$!
refuse pn_differs "^error: rank 2: -pn 3: rank 0 runs with -pn 2 \(.*\)$" \
  "$fp32" "${F[@]}" -pi fs -pf "$tmp/rdv_pn" -pn 3 -pr 2 --collective_timeout 3
wait $p0

# started by a launcher (its environment, as mpirun's): without -pi fs refused; with it, the ranks are
# the launcher's, and a -pn that is not its count is refused
refuse launcher_without_fs "^error: this process is one of 2 that a launcher \(mpirun, srun\) started: the CUDA trainer's processes train one run together only with -pi fs -pf DIR \(HINT: .*\)$" \
  env OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=1 "$fp32" "${F[@]}"
refuse launcher_pn "^error: -pn 3: the launcher started 2 processes, whose ranks these are \(HINT: .*\)$" \
  env OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=1 "$fp32" "${F[@]}" -pi fs -pf "$tmp" -pn 3
rm -rf "$tmp/rdv_env" && mkdir -p "$tmp/rdv_env"
for r in 0 1; do
  env OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=$r OMPI_COMM_WORLD_LOCAL_RANK=$r "$fp32" "${F[@]}" -x 2 -v 0 \
    -pi fs -pf "$tmp/rdv_env" >"$tmp/env.r$r.log" 2>&1 &
  pids[$r]=$!
done
wait "${pids[0]}"; rc0=$?
wait "${pids[1]}"; rc1=$?
if [ $rc0 -eq 0 ] && [ $rc1 -eq 0 ] && grep -q "^processes: 2 over NCCL" "$tmp/env.r0.log" && grep -q "^step 2/2 " "$tmp/env.r0.log"; then
  pass "launcher_ranks: two processes whose ranks come from the launcher's environment (no -pn, -pr) train together"
else
  fail "launcher_ranks: exits $rc0/$rc1: $(grep -m1 error "$tmp/env.r"[01].log)"
fi
# -w differs (BF16): another update and another checkpoint, refused by the agreement
rm -rf "$tmp/rdv_w" && mkdir -p "$tmp/rdv_w"
"$bf16" "${F[@]}" -pi fs -pf "$tmp/rdv_w" -pn 2 -pr 0 -w 1 >"$tmp/w.r0.log" 2>&1 &
p0=$!
"$bf16" "${F[@]}" -pi fs -pf "$tmp/rdv_w" -pn 2 -pr 1 -w 0 >"$tmp/w.r1.log" 2>&1
rc1=$?
wait $p0
rc0=$?
if [ $rc0 -ne 0 ] && [ $rc1 -ne 0 ] && grep -q "^error: the 2 processes differ in the model or the training flags (.*, -w)" "$tmp/w.r0.log"; then
  pass "master_weights_differ: -w 1 on rank 0, -w 0 on rank 1: refused, '$(grep -m1 '^error' "$tmp/w.r0.log" | cut -c1-60)...'"
else
  fail "master_weights_differ: exits $rc0/$rc1: $(grep -m1 error "$tmp/w.r0.log")"
fi
# a rank 0 whose others never come leaves no id behind for the next launch
rm -rf "$tmp/rdv_alone" && mkdir -p "$tmp/rdv_alone"
"$fp32" "${F[@]}" -pi fs -pf "$tmp/rdv_alone" -pn 2 -pr 0 --collective_timeout 2 >"$tmp/alone.log" 2>&1
rc=$?
if [ $rc -ne 0 ] && grep -q "^error: rank 0: NCCL's communicator of 2 processes did not form within 2 s" "$tmp/alone.log" &&
   [ ! -e "$tmp/rdv_alone/ncclUniqueId" ]; then
  pass "rank0_alone: exit $rc, '$(grep -m1 '^error' "$tmp/alone.log" | cut -c1-80)...', its id file removed"
else
  fail "rank0_alone: exit $rc, files left: $(ls "$tmp/rdv_alone" | paste -sd' ' -): $(grep -m1 error "$tmp/alone.log")"
fi

# ---------------------------------------------------------------- the NCCL stream's order, seen
# Planted bugs, one per wait between the trainer's stream and the collectives' (data_parallel.h):
#   no_wait: the collectives' stream no longer waits for the trainer's event (dp_nccl_after_trainer's
#     cudaStreamWaitEvent deleted), so the collectives send gradients the backward has not written yet;
#   no_query: the trainer no longer waits for the collectives' stream to finish (dp_nccl_wait's
#     cudaStreamQuery loop taken as done at once), so its next kernels read the gradients, and the host
#     its sums, before the all-reduce has written them.
# The runtime runs each stream's work only as far as its own order requires (cuda_cpu.h's queues), so
# with either bug two processes must differ from one. (The runtime of one queue ran every stream in
# issue order, and this trainer passed every check.) Each is built at -O1 from the rewritten trainer
# with a copy of dev/trainer/ whose data_parallel.h has the edit.
planted() { # name description line replacement: its verdict (a PASS or FAIL line) into $tmp/<name>.result
  local name=$1 what=$2 line=$3 replacement=$4 mut="$tmp/$1" start=$SECONDS rc msg
  mkdir -p "$mut/dev/trainer" "$mut/dev/tokenizer"
  cp dev/trainer/*.h "$mut/dev/trainer/" && cp dev/tokenizer/*.h "$mut/dev/tokenizer/" && cp ./*.h ./*.cuh "$mut/"
  sed "s|$line|$replacement|" dev/trainer/data_parallel.h >"$mut/dev/trainer/data_parallel.h"
  cp build/cudacpu/src/train_gpt2.cu "$mut/train_gpt2.cu" && cp build/cudacpu/src/dev/trainer/*.cuh "$mut/dev/trainer/"
  if [ "$(grep -cF "$line" dev/trainer/data_parallel.h)" != 1 ]; then
    echo "FAIL ${name}_caught: stale: dev/trainer/data_parallel.h no longer holds '$line' once"
  elif ! ${CXX:-g++} -std=c++17 -O1 -g0 -fno-strict-aliasing -w -x c++ -include dev/cudacpu/cuda_cpu.h -I"${CUDA_HOME:-/usr/local/cuda}/include" \
           -I. -Idev/cudacpu -DDP_NCCL -DENABLE_FP32 -DQKV_SCHEME=QKV_STANDARD "$mut/train_gpt2.cu" -o "$mut/train" >"$tmp/${name}_build.log" 2>&1; then
    echo "FAIL ${name}_caught: the planted bug does not build: $(grep -m1 error "$tmp/${name}_build.log")"
  else
    ranks "$mut/train" 2 "$name" "${F[@]}" -z 0 -n 5 -o "$tmp/${name}_run"
    rc=$?
    if msg=$(compare "$tmp/one_fp32" "$tmp/${name}_run" 10 2>&1); then
      echo "FAIL ${name}_caught: two processes with $what match one process (exit $rc): $msg"
    else
      echo "PASS ${name}_caught: two processes with $what (planted) differ from one process: $(cut -c1-110 <<<"$msg") ($((SECONDS - start)) s)"
    fi
  fi >"$tmp/$name.result"
}
# the rewritten trainer once, then both bugs built and run at once
if ! make -s build/cudacpu/src/train_gpt2.cu $(ls dev/trainer/*.cuh | sed 's|^|build/cudacpu/src/|') >"$tmp/planted_make.log" 2>&1; then
  fail "planted: the rewritten trainer does not build: $(grep -m1 -i error "$tmp/planted_make.log")"
else
  planted no_wait "collectives that skip the wait for the trainer's event" \
    'const cudaError_t w = e == cudaSuccess ? cudaStreamWaitEvent(n->stream, n->ready, 0) : e;' 'const cudaError_t w = e;' &
  planted no_query "a trainer that does not wait for the collectives' stream" \
    'const cudaError_t e = cudaStreamQuery(n->stream);' 'const cudaError_t e = cudaSuccess;' &
  wait
  for name in no_wait no_query; do verdict_of "$tmp/$name.result"; done
fi

echo "nccl: the suite took $((SECONDS - suite_start)) s"
[ $fails -eq 0 ] || { echo "nccl: $fails failed"; exit 1; }
