#!/usr/bin/env bash
# Tests of data parallelism on the CPU (dev/trainer/data_parallel.h): the CPU trainer over MPI
# (build/train_gpt2_cpu_mpi_standard, Debian's Open MPI, installed by install_deps.sh), on the tiny
# fixture model and synthetic shards, 10 steps of -b 4 -t 32 -d 256 (two micro-batches a step):
#   - mpirun -np 1 through the MPI build: the model and state bit for bit the plain trainer's;
#   - -np 2, -z 0 and -z 1 (ZeRO-1), against -np 1 over the same global batch: every logged loss
#     within 1e-5, and the parameters and AdamW's m and v after 10 steps within 1e-6 relative L2
#     (float rounding: the two processes add their micro-batches' gradients in another order than one
#     process's backward does; measured 5e-8, and a wrong decomposition, a skipped micro-batch or a
#     missing 1/A, is off by more than 1e-2);
#   - -np 3 -z 1 (uneven shards, 4 validation batches over 3) against one process, as above;
#   - resume from 2 processes (-z 1) onto 1 and from 1 onto 2 at step 5: step 10 as above; onto 3
#     (2 micro-batches cannot split over 3) refused in one line;
#   - SIGTERM to one rank stops every rank at the same step with a checkpoint, which resumes; SIGTERM
#     and SIGHUP to mpirun do the same, and SIGKILL to mpirun leaves no rank running;
#   - a rank killed (SIGKILL) ends the job with mpirun's line naming it; a rank that hangs (SIGSTOP)
#     ends it after --collective_timeout 3 with rank 0's line naming the collective and the step;
#   - ranks with different flags (mpirun's MPMD form) refused in one line, --check_args among them
#     (at once: not after the collective timeout of the process that trains); the flags -pn, -pr, -pi
#     and -pf refused where they do not fit, each in one line; only rank 0 prints.
# One "PASS mpi ..." / "FAIL mpi ..." line per check; exits 1 if any failed. About 40 s on 2 cores
# (the build is half of it); the suite prints its time.
set -u
cd "$(dirname "$0")/../.."
PY=${PYTHON:-/usr/bin/python3}
fails=0
pass() { echo "PASS mpi $*"; }
fail() { echo "FAIL mpi $*"; fails=$((fails + 1)); }
tmp=$(mktemp -d /tmp/test_mpi.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
suite_start=$SECONDS
source dev/test/data_parallel_checks.sh # compare, refuse, resume_check
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 # CI runs as root
export OMP_NUM_THREADS=1                                         # two processes share two cores
MPIRUN=(mpirun --oversubscribe)
bin=build/train_gpt2_cpu_mpi_standard
plain=build/train_gpt2_cpu_standard
start=$SECONDS
if ! make -s "$bin" "$plain" >"$tmp/build.log" 2>&1; then
  fail "build: make $bin $plain failed: $(grep -m1 -i error "$tmp/build.log")"
  exit 1
fi
echo "mpi: built $bin in $((SECONDS - start)) s ($(mpirun --version | head -n 1))"
dp_inputs

# the pid of rank $1 of the running MPI trainers (its environment names the rank)
rank_pid() {
  local d a0
  for d in /proc/[0-9]*; do
    { IFS= read -r -d '' a0 <"$d/cmdline"; } 2>/dev/null || continue
    case "$a0" in *train_gpt2_cpu_mpi_standard) ;; *) continue ;; esac
    tr '\0' '\n' <"$d/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1" && echo "${d#/proc/}"
  done
}


# ---------------------------------------------------------------- one process, two, ZeRO-1
"$plain" "${F[@]}" -n 5 -o "$tmp/one" >"$tmp/one.log" 2>&1 || fail "one_process: the plain trainer exited $?: $(grep -m1 error "$tmp/one.log")"
"${MPIRUN[@]}" -np 1 "$bin" "${F[@]}" -n 10 -o "$tmp/mpi1" >"$tmp/mpi1.log" 2>&1
rc=$?
if [ $rc -eq 0 ] && cmp -s "$tmp/one/model_00000010.bin" "$tmp/mpi1/model_00000010.bin" &&
   cmp -s "$tmp/one/state_00000010.bin" "$tmp/mpi1/state_00000010.bin"; then
  pass "np1_equals_plain: mpirun -np 1 of the MPI build writes the plain trainer's model and state at step 10, bit for bit"
else
  fail "np1_equals_plain: exit $rc; the step-10 files differ from the plain trainer's: $(grep -m1 error "$tmp/mpi1.log")"
fi
for z in 0 1; do
  "${MPIRUN[@]}" -np 2 "$bin" "${F[@]}" -z $z -n 5 -o "$tmp/two_z$z" >"$tmp/two_z$z.log" 2>&1
  rc=$?
  if [ $rc -eq 0 ] && msg=$(compare "$tmp/one" "$tmp/two_z$z" 10 2>&1) &&
     grep -q "^processes: 2 over MPI | each trains 1 of the 2 micro-batches of a step | -z $z: " "$tmp/two_z$z.log"; then
    pass "np2_z${z}_equals_np1: mpirun -np 2 -z $z against one process, global batch 256: $msg"
  else
    fail "np2_z${z}_equals_np1: exit $rc: ${msg:-} $(grep -m1 error "$tmp/two_z$z.log")"
  fi
done
# three processes, ZeRO-1: shards of 45654, 45654 and 45652 of the 136960 parameters; the 4
# validation batches split 2, 1, 1
"$plain" "${F[@]}" -d 384 -n 10 -o "$tmp/one384" >"$tmp/one384.log" 2>&1
"${MPIRUN[@]}" -np 3 "$bin" "${F[@]}" -d 384 -z 1 -n 10 -o "$tmp/three" >"$tmp/three.log" 2>&1
rc=$?
if [ $rc -eq 0 ] && msg=$(compare "$tmp/one384" "$tmp/three" 10 2>&1); then
  pass "np3_z1_equals_np1: mpirun -np 3 -z 1 (uneven shards, 4 validation batches over 3) against one process, global batch 384: $msg"
else
  fail "np3_z1_equals_np1: exit $rc: ${msg:-} $(grep -m1 error "$tmp/three.log")"
fi
n=$(grep -c '^step 1/10 ' "$tmp/two_z0.log")
if [ "$n" = 1 ] && [ "$(grep -c '^model: ' "$tmp/two_z0.log")" = 1 ]; then
  pass "rank0_prints: the 2-process run's output has one model line and one line per step (rank 0's)"
else
  fail "rank0_prints: $n 'step 1/10' lines in the 2-process output, expected 1"
fi

# ---------------------------------------------------------------- resume across process counts
resume_check resume_2_to_1 "$tmp/two_z1" "$tmp/one" "$tmp/resume_2_to_1.log" \
  "the -np 2 -z 1 checkpoint of step 5 resumed by one process" "$plain" "${F[@]}"
resume_check resume_1_to_2 "$tmp/one" "$tmp/one" "$tmp/resume_1_to_2.log" \
  "one process's checkpoint of step 5 resumed by -np 2 -z 1" "${MPIRUN[@]}" -np 2 "$bin" "${F[@]}" -z 1
cp -r "$tmp/one" "$tmp/r13" && rm "$tmp/r13/"*_00000010.bin
"${MPIRUN[@]}" -np 3 "$bin" "${F[@]}" -z 1 -n 5 -o "$tmp/r13" -y 1 >"$tmp/r13.log" 2>&1
rc=$?
want="^error: rank [0-2]: -d 256: 2 micro-batches of B\*T = 128 tokens per step do not split over 3 processes \(HINT: -d a multiple of B\*T\*3 = 384\)$"
if [ $rc -ne 0 ] && grep -Eq "$want" "$tmp/r13.log" && [ ! -e "$tmp/r13/model_00000010.bin" ]; then
  pass "resume_onto_3_refused: exit $rc, '$(grep -m1 -E "$want" "$tmp/r13.log")'"
else
  fail "resume_onto_3_refused: exit $rc: $(grep -m1 error "$tmp/r13.log")"
fi

# ---------------------------------------------------------------- a signal, a rank killed, a rank hung
long=("${F[@]}" -x 1000000 -v 0)
# SIGTERM to rank 1 alone: the ranks agree on it at the top of the next step, both stop there with a
# checkpoint (gathered under -z 1), exit 143; the same command with -y 1 resumes from it
"${MPIRUN[@]}" -np 2 "$bin" "${long[@]}" -x 100000 -z 1 -o "$tmp/stop" >"$tmp/stop.log" 2>&1 &
job=$!
pid=""
for _ in $(seq 100); do
  pid=$(rank_pid 1)
  [ -n "$pid" ] && grep -q '^step 2/' "$tmp/stop.log" && break
  sleep 0.1
done
[ -n "$pid" ] && kill -TERM "$pid"
wait $job
rc=$?
stop_line=$(grep -m1 '^stopped by SIGTERM at step' "$tmp/stop.log")
at=$(sed -n 's/^stopped by SIGTERM at step \([0-9]*\): checkpoint .*/\1/p' <<<"$stop_line")
if [ -n "$pid" ] && [ $rc -eq 143 ] && [ -n "$at" ] && [ -f "$tmp/stop/state_$(printf %08d "$at").bin" ]; then
  "${MPIRUN[@]}" -np 2 "$bin" "${long[@]}" -x $((at + 2)) --reschedule 1 -z 1 -o "$tmp/stop" -y 1 >"$tmp/stop2.log" 2>&1
  rc2=$?
  if [ $rc2 -eq 0 ] && grep -q "^resuming from $tmp/stop/state_$(printf %08d "$at").bin at step $at" "$tmp/stop2.log" &&
     grep -q "^step $((at + 2))/$((at + 2)) " "$tmp/stop2.log"; then
    pass "stop_one_rank: SIGTERM to rank 1: exit 143, '$stop_line'; resumed with -y 1 to step $((at + 2))"
  else
    fail "stop_one_rank: the resume exited $rc2: $(grep -m1 'error\|resuming' "$tmp/stop2.log")"
  fi
else
  fail "stop_one_rank: rank 1 '$pid', exit $rc (expected 143), stop line '$stop_line', checkpoint of step '${at}': $(grep -m1 error "$tmp/stop.log")"
fi
# SIGTERM and SIGHUP to mpirun itself (a job scheduler, a closed terminal): it passes SIGTERM to every
# rank, and they stop together at one step with a checkpoint; SIGKILL to mpirun: its ranks end with it
# (Open MPI's daemon is gone; no checkpoint, and nothing left running). Each time no rank is left.
# Open MPI 4.1's mpirun is not reliable here, and the check allows for what is its doing, not the
# trainer's (each seen on this 2-core machine, in about 1 run in 8 together):
#   - now and then it ends the ranks without passing them the signal (no handler ran, nothing logged),
#     so a TERM or HUP case takes up to 3 runs and passes when one stops with its checkpoint (a trainer
#     that ignores the signal fails all 3);
#   - it may exit before it forwards the ranks' last lines, or crash in its own teardown
#     (PMIx_server_finalize, exit 139) after they stopped: the stop step is read from rank 0's
#     main.log, not from mpirun's output;
#   - it has hung with no rank left (twice here): 30 s after the signal it is killed and the run counts as failed.
mpirun_signal_run() { # $1: the signal, $2: the output folder; sets rc, left, at
  rm -rf "$2"
  "${MPIRUN[@]}" -np 2 "$bin" "${long[@]}" -o "$2" >"$2.log" 2>&1 &
  local job=$!
  for _ in $(seq 100); do grep -q '^step 2/' "$2.log" && break; sleep 0.1; done
  kill -"$1" $job
  for _ in $(seq 300); do kill -0 $job 2>/dev/null || break; sleep 0.1; done
  kill -0 $job 2>/dev/null && { kill -9 $job; echo "mpirun hung 30 s after SIG$1: killed" >>"$2.log"; }
  wait $job
  rc=$?
  for _ in $(seq 100); do [ -z "$(rank_pid 0)$(rank_pid 1)" ] && break; sleep 0.1; done
  left=$(rank_pid 0)$(rank_pid 1)
  [ -n "$left" ] && kill -9 $left 2>/dev/null
  at=$(sed -n 's/^stopped by SIGTERM at step \([0-9]*\): checkpoint .*/\1/p' "$2/main.log" 2>/dev/null)
}
for sig in TERM HUP KILL; do
  tries=0
  while :; do
    tries=$((tries + 1))
    mpirun_signal_run $sig "$tmp/mpirun_$sig"
    stopped=0
    [ -n "$at" ] && [ -f "$tmp/mpirun_$sig/state_$(printf %08d "$at").bin" ] && stopped=1
    { [ $sig = KILL ] || [ $stopped = 1 ] || [ $tries = 3 ] || [ -n "$left" ]; } && break
  done
  if [ $rc -ne 0 ] && [ -z "$left" ] && { [ $sig = KILL ] || [ $stopped = 1 ]; }; then
    pass "mpirun_sig${sig,,}: SIG$sig to mpirun mid-run: exit $rc, no rank left$([ $stopped = 1 ] && echo ", the ranks stopped together at step $at with a checkpoint (run $tries of at most 3)")"
  else
    fail "mpirun_sig${sig,,}: SIG$sig to mpirun, $tries runs: the last exited $rc, ranks left '${left}', stop checkpoint at step '${at}': $(grep -hm1 'error\|stopped\|hung' "$tmp/mpirun_$sig.log" "$tmp/mpirun_$sig/main.log" 2>/dev/null)"
  fi
done
for how in KILL STOP; do
  t0=$SECONDS
  timeout 60 "${MPIRUN[@]}" -np 2 "$bin" "${long[@]}" --collective_timeout 3 >"$tmp/$how.log" 2>&1 &
  job=$!
  pid=""
  for _ in $(seq 100); do # up to 10 s for rank 1 to start, then a second of training
    pid=$(rank_pid 1)
    [ -n "$pid" ] && grep -q '^step 2/' "$tmp/$how.log" && break
    sleep 0.1
  done
  [ -n "$pid" ] && kill -"$how" "$pid"
  wait $job
  rc=$?
  [ -n "$pid" ] && { kill -CONT "$pid"; kill -9 "$pid"; } 2>/dev/null
  secs=$((SECONDS - t0))
  if [ $how = KILL ]; then
    want="mpirun noticed that process rank 1 with PID [0-9]+ on node .* exited on signal 9 \(Killed\)"
  else
    want="^error: rank 0: the .* at step [0-9]+ waited 3 s for the other 1 process and gave up \(HINT: one died or hangs: see its output above; --collective_timeout sets the wait\)$"
  fi
  if [ -n "$pid" ] && [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -Eq "$want" "$tmp/$how.log"; then
    pass "rank_$(tr A-Z a-z <<<"$how"): SIG$how to rank 1 mid-run: the job ended with status $rc in $secs s: '$(grep -m1 -Eo "$want" "$tmp/$how.log")'"
  else
    fail "rank_$(tr A-Z a-z <<<"$how"): rank 1 '$pid', exit $rc after $secs s (124: a hang), expected a line matching '$want': $(grep -v '^step' "$tmp/$how.log" | tail -n 3 | paste -sd' ' -)"
  fi
done

# ---------------------------------------------------------------- refusals, one line each
"${MPIRUN[@]}" -np 1 "$bin" "${F[@]}" -l 1e-3 : -np 1 "$bin" "${F[@]}" -l 2e-3 >"$tmp/differ.log" 2>&1
rc=$?
want="^error: the 2 processes differ in the model or the training flags \(.*\) \(HINT: every process must run the same command on the same files\)$"
if [ $rc -ne 0 ] && grep -Eq "$want" "$tmp/differ.log"; then
  pass "ranks_differ: mpirun -np 1 ... -l 1e-3 : -np 1 ... -l 2e-3: exit $rc, '$(grep -m1 -E "$want" "$tmp/differ.log" | cut -c1-90)...'"
else
  fail "ranks_differ: exit $rc, no line matching '$want': $(grep -m1 error "$tmp/differ.log")"
fi
# differing only in --check_args: refused at once, not after the other process's --collective_timeout
start=$SECONDS
"${MPIRUN[@]}" -np 1 "$bin" "${F[@]}" --collective_timeout 20 --check_args 1 : -np 1 "$bin" "${F[@]}" --collective_timeout 20 >"$tmp/differ_check.log" 2>&1
rc=$?
want="^error: the 2 processes differ in --check_args \(HINT: every process must run the same command on the same files\)$"
if [ $rc -ne 0 ] && [ $((SECONDS - start)) -lt 60 ] && grep -Eq "$want" "$tmp/differ_check.log"; then
  pass "ranks_differ_check_args: mpirun -np 1 ... --check_args 1 : -np 1 ...: exit $rc in $((SECONDS - start)) s, '$(grep -m1 -E "$want" "$tmp/differ_check.log" | cut -c1-70)...'"
else
  fail "ranks_differ_check_args: exit $rc after $((SECONDS - start)) s, no line matching '$want': $(grep -m1 error "$tmp/differ_check.log")"
fi
refuse pn_without_mpi "^error: -pn 2: this binary has no MPI to reach other processes \(HINT: make build/train_gpt2_cpu_mpi_<scheme>, then mpirun -np N .*\)$" \
  "$plain" "${F[@]}" -pn 2
refuse pn_mismatch "^error: rank [01]: -pn 3: this run has 2 processes \(HINT: mpirun -np 3, or drop -pn\)$" \
  "${MPIRUN[@]}" -np 2 "$bin" "${F[@]}" -pn 3
refuse pr_mismatch "^error: rank 0: -pr 1: this process has rank 0 of 2 \(HINT: drop -pr: mpirun sets the ranks\)$" \
  "${MPIRUN[@]}" -np 2 "$bin" "${F[@]}" -pr 1
refuse pi_fs "^error: -pi fs: the shared-folder rendezvous belongs to the CUDA trainer's NCCL data parallelism; the CPU trainer's processes meet through MPI, started by mpirun \(HINT: -pi mpi\)$" \
  "$plain" "${F[@]}" -pi fs
refuse pf_unused "^error: -pf $tmp: the folder of -pi fs, which this run does not use \(HINT: drop -pf\)$" \
  "$plain" "${F[@]}" -pf "$tmp"
refuse d_split "^error: rank [01]: -d 384: 3 micro-batches of B\*T = 128 tokens per step do not split over 2 processes \(HINT: -d a multiple of B\*T\*2 = 256\)$" \
  "${MPIRUN[@]}" -np 2 "$bin" "${F[@]}" -d 384
refuse profile_under_mpi "^error: rank [01]: --profile is one process's work \(HINT: run it as one process\)$" \
  "${MPIRUN[@]}" -np 2 "$bin" "${F[@]}" --profile 2
refuse timeout_0 "^error: --collective_timeout 0: expected a number in \[1, 1e\+07\] \(HINT: run with -h for usage\)$" \
  "$plain" "${F[@]}" --collective_timeout 0

echo "mpi: the suite took $((SECONDS - suite_start)) s"
[ $fails -eq 0 ] || { echo "mpi: $fails failed"; exit 1; }
