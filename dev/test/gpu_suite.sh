#!/usr/bin/env bash
# Everything that needs a GPU, as stages that each fit one call of the device machine (at most 540 s:
# a call may run 600 s, a session has 900 s of device time in all). The suite resumes from its log
# folder: a stage that passed is skipped (it says so), its summary rows still printed, so a session
# calls it again and again with the same LOG_DIR until the stages are done. The device tool's calls
# to make, with the expected time of each, come from --plan; the runbook is dev/results/README.md.
#
#   bash dev/test/gpu_suite.sh [--time-limit S] [--force] LOG_DIR [STAGE...]
#       run the stages (default: all, in the order below), skipping those LOG_DIR records as passed
#       (--force: run them again); --time-limit S: start no stage whose expected time no longer
#       fits in S seconds from now, and stop each stage by then (what was not started runs next call)
#   bash dev/test/gpu_suite.sh --dry-run [LOG_DIR] [STAGE...]
#       print every command the stages would run, run none (no GPU needed; placeholder sm_90);
#       exit 0 when the plan is consistent: every stage known, every script and config it names
#       there, every timeout <= 540 s (make test runs this: dev/test/test_gpu_suite.sh)
#   bash dev/test/gpu_suite.sh --inputs [LOG_DIR] [STAGE...]
#       each stage's input files (what its skip compares: "a stage's inputs" below) and their digest; no GPU
#   bash dev/test/gpu_suite.sh --plan [BUDGET_S]
#       the device calls to make, in order, each <= 540 s, with the expected time of each stage
#       from dev/results/stage_times.tsv (the last recorded run, or an estimate where none was
#       measured), the machine's start-up, the cumulative device time and which calls fit the
#       budget (default 900 s); not the stages that passed with today's inputs (stage_passes.tsv), and
#       the ablations' runs not yet done (dev/results/ablate/) in the minutes left. No GPU needed.
#   bash dev/test/gpu_suite.sh --record-times LOG_DIR
#       write the seconds of every stage LOG_DIR records as passed into dev/results/stage_times.tsv
#       (measured, with the date and GPU), for the next --plan; their passes with the digest of their
#       inputs into dev/results/stage_passes.tsv; the finished ablation runs into dev/results/ablate/
#
# Stages, in order of value (the stage's timeout in brackets; every one <= 540 s):
#   build             [300] every trainer and test binary (scheme x BF16/FP32), the kernel labs and
#                     build/params, for this GPU's architecture only, all nvcc at once
#   fixtures          [240] dev/fixtures from the PyTorch reference (too large to carry)
#   tests_fp32        [400] dev/test/test_cuda.sh, FP32 (CUDA_TEST_PRECISIONS=FP32, no labs): the
#                     FP32 trainers' flag checks, test_gpt2cu of every scheme against the fixtures, the
#                     trainers' attention maps (--dump_attention) against the CPU trainer's
#   tests_bf16        [400] the same in BF16, with the checks that use the BF16 trainer (shapes,
#                     checkpoints, the end-to-end -o/-y/SIGTERM runs, llm.c's version 5 header)
#   bench_peers       [540] dev/bench/bench.sh part 1: ours vs llm.c vs PyTorch compile at d12
#   train             [300] `make train` (standard, Austen, 150 steps), --generate with the KV cache
#                     (make train's model; a random d12 of kv_shared), llm.c loading our checkpoint
#   nccl              [300] data parallelism through NCCL with one process: `-pi fs -pn 1` bit for bit
#                     the run without it (tiny, BF16, 10 steps), and d12 at B 16 in tokens/s beside it
#   profile           [300] `--profile` of every scheme at d12, T 1024, B 64, BF16 on dev/data/austen (and of
#                     standard at the bench's B 128),
#                     a CSV per scheme; `build/params profile d12 1024 64` (the predicted rows)
#   bench_schemes     [540] dev/bench/bench.sh part 2: every scheme at d12, standard at d24
#   lab_check         [540] build/test_ptx and build/test_hopper (the CPU runtime's model of ldmatrix, cp.async
#                     and mma.sync, and of Hopper's mbarrier, bulk tensor copies, wgmma and setmaxnreg, on the
#                     hardware), then `--check` of every kernel lab (BF16, FP32); one that cannot run is a SKIP;
#                     the attention labs' SASS (dev/tools/sass_facts.py): tensor-core instructions (HMMA; HGMMA
#                     in versions 6 and 7, sm_90a) and no LDL/STL in the flash5, flash6 and flash7 kernels
#   sanitize_memcheck [540] compute-sanitizer memcheck: the trainer (BF16) on the head-size-64
#                     fixtures of every scheme and the GQA/MQA ones (the flash path), on the tiny
#                     fixtures (BF16; FP32 also GQA/MQA: the unfused path), a test binary on
#                     standard_hd64 (both paths), every version of the attention labs (--check --quick)
#   sanitize_racecheck[540] racecheck, one step and a short sample, 4 runs at once: the trainer (BF16)
#                     on every head-size-64 fixture, standard_tiny, every version of the attention labs
#   sanitize_synccheck[540] synccheck: the trainer (BF16) on every head-size-64 fixture, every version of the labs
#   sanitize_initcheck[540] initcheck, one step: FP32 on each scheme's tiny fixture; BF16 on
#                     standard_tiny and the head-size-64 fixtures of standard, kv_shared, qkv_shared,
#                     q_residual, through dev/test/initcheck_filter.py (reads of what only cuBLASLt
#                     wrote dropped, everything else kept; why: dev/results/README.md)
#   lab_bench         [400] `--bench` of the BF16 labs, dev/cuda/sdpa_bench.py (PyTorch SDPA, same shapes)
#   lab_bench_long    [200] the attention labs' `--long` and `sdpa_bench.py --long`: issue 59's grid (B 8, H 12,
#                     T 1024 to 16384, hd 64 and 128), the flash versions beside PyTorch SDPA
#   profile_ncu       [540] ncu over one training step of the standard scheme (CSV), then
#                     dev/tools/ncu_table.py: the top 15 kernels against the predicted rows
#   ablate_shared_projections, ablate_wq_identity, ablate_residual_query [540 each] `make ablate
#                     CONFIG=dev/ablate/<config>.txt`, as many whole runs as fit the call (ABLATE_TIME_LIMIT);
#                     the runs finished in earlier calls and sessions are skipped (below); PART while runs are left
#   gen_bench         [300] dev/bench/gen_bench.py: batched KV-cached generation of every run of
#                     shared_projections (schemes, GQA/MQA) at d12, context 1024, batches 1, 16, 64:
#                     tokens/s and cache bytes, beside seed 004's direction (Q-K=V faster than QKV)
# A stage that passed on this GPU with the same inputs at an earlier commit (dev/results/stage_passes.tsv,
# from --record-times) is skipped: "passed at <commit>, inputs unchanged" (a stage's inputs, below).
# Sanitizer stages resume run by run (a run that passed is not repeated) and note the least host
# memory available and the most GPU memory used while they ran (sampled every 5 s). The targets are checked,
# not printed, in a last step of every call (`targets`, no GPU, seconds): ours >= llm.c and ours >=
# PyTorch compile in tokens/s (bench_peers), flash forward and backward at least as fast as PyTorch
# SDPA at every lab shape of B 8 (lab_bench) and at every T and head size of issue 59's grid (lab_bench_long), the flash rows of a d12 step (12 x the labs' fastest forward and
# backward at B 64, T 1024) at most 60% of the 33.2 ms measured at c32bccf (lab_bench; issue 58),
# the profiled run's peak memory within 5% of `build/params
# memory d12 1024 64` (profile). A miss is a FAIL row; a target not yet measured a SKIP row. A FAIL
# never stops the suite: every stage asked for runs, the summary comes last, the exit status is 1
# when a stage of this call or a target failed.
#
# Needs, beside the repository: dev/data/austen (profile, profile_ncu, train), dev/data/gpt2 (train,
# ablate), dev/data/mix (ablate), dev/bench/peers (bench_peers), made where the registries are reachable and
# carried (the device machine has no network); a LOG_DIR inside the repository (build/gpu_log) so
# that it can be carried back to a fresh machine. Logs: LOG_DIR/<stage>.status, .rows, and the
# stage's files; LOG_DIR/summary.txt.
set -u
cd "$(dirname "$0")/../.."
source dev/test/jobs.sh
source dev/test/torch_python.sh
end_tree_with_me # the background builds (llm.c's among them) and every stage's processes end with the suite

STAGES_ALL="build fixtures tests_fp32 tests_bf16 bench_peers train nccl profile bench_schemes lab_check sanitize_memcheck
sanitize_racecheck sanitize_synccheck sanitize_initcheck lab_bench lab_bench_long profile_ncu ablate_shared_projections ablate_wq_identity
ablate_residual_query gen_bench"
STAGES_ALL=$(echo $STAGES_ALL)
declare -A CAP=([build]=300 [fixtures]=240 [tests_fp32]=400 [tests_bf16]=400 [bench_peers]=540 [bench_schemes]=540
  [profile]=300 [profile_ncu]=540 [lab_check]=540 [lab_bench]=400 [lab_bench_long]=200 [sanitize_memcheck]=540 [sanitize_racecheck]=540
  [sanitize_synccheck]=540 [sanitize_initcheck]=540 [train]=300 [nccl]=300 [ablate_shared_projections]=540 [ablate_wq_identity]=540
  [ablate_residual_query]=540 [gen_bench]=300)
# what each stage needs carried to the device machine (the plan's carry lists)
declare -A CARRY=([bench_peers]="dev/bench/peers" [profile]="dev/data/austen" [profile_ncu]="dev/data/austen"
  [train]="dev/data/austen dev/data/gpt2" [ablate_shared_projections]="dev/data/mix dev/data/gpt2"
  [ablate_wq_identity]="dev/data/mix dev/data/gpt2" [ablate_residual_query]="dev/data/mix dev/data/gpt2")
# the stages that need build's binaries, and fixtures' files, on this machine (a fresh machine has
# neither: they are made again first, whatever LOG_DIR says)
NEEDS_BUILD=" tests_fp32 tests_bf16 bench_peers bench_schemes profile profile_ncu lab_check lab_bench lab_bench_long sanitize_memcheck
 sanitize_racecheck sanitize_synccheck sanitize_initcheck train nccl gen_bench "
NEEDS_FIXTURES=" tests_fp32 tests_bf16 nccl sanitize_memcheck sanitize_racecheck sanitize_synccheck sanitize_initcheck "
# stages that keep what they finished when stopped (run by run): started with 120 s left, whatever
# their expected time; the rest runs in the next call
ABLATE_STAGES=" ablate_shared_projections ablate_wq_identity ablate_residual_query "
RESUMABLE=" sanitize_memcheck sanitize_racecheck sanitize_synccheck sanitize_initcheck$ABLATE_STAGES"
NEEDS_BUILD=" $(echo $NEEDS_BUILD) " NEEDS_FIXTURES=" $(echo $NEEDS_FIXTURES) " # one line, spaces around each
MAX_CALL_S=540          # one device call: 600 s at most, less the transfers and a margin
START_S=60              # a machine's start-up, counted in the session's device time (2026-11-26, H100: 30-60 s)
CALL_OVERHEAD_S=20      # per call: sending the tree, fetching $OUT, the pause before the next call (idle time counts; 12 s seen)
LOG_REL=build/gpu_log   # the LOG_DIR of the plan's calls
TIMES_FILE=${GPU_SUITE_TIMES:-dev/results/stage_times.tsv}
PASSES_FILE=${GPU_SUITE_PASSES:-dev/results/stage_passes.tsv} # the passes and their inputs' digests (a stage's inputs, below)
ABLATE_RESULTS=${GPU_SUITE_ABLATE_RESULTS:-dev/results/ablate}  # the finished ablation runs of earlier sessions
BENCH_STEPS=${BENCH_STEPS:-6}
PROFILE_STEPS=${PROFILE_STEPS:-5}
AUSTEN_TRAIN="dev/data/austen/austen_train_*.bin"
AUSTEN_VAL="dev/data/austen/austen_val_*.bin"
NCU_METRICS="gpu__time_duration.sum,launch__registers_per_thread,launch__shared_mem_per_block_static,launch__shared_mem_per_block_dynamic,sm__warps_active.avg.pct_of_peak_sustained_active,sm__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed"
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}

usage() {
  sed -n '/^#   bash dev/,/^# Stages/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  echo "stages: $STAGES_ALL" >&2
  exit "${1:-1}"
}

# ---------------------------------------------------------------------------------------------
# expected times: dev/results/stage_times.tsv (stage, seconds, source, note)

expected_s() { # stage -> seconds (the stage's timeout when nothing is recorded)
  local v
  v=$(awk -F'\t' -v s="$1" '!/^#/ && $1 == s { print $2; exit }' "$TIMES_FILE" 2>/dev/null)
  echo "${v:-${CAP[$1]}}"
}
time_source() {
  local v
  v=$(awk -F'\t' -v s="$1" '!/^#/ && $1 == s { print $3; exit }' "$TIMES_FILE" 2>/dev/null)
  echo "${v:-no record: its timeout}"
}

# ---------------------------------------------------------------------------------------------
# --plan: the calls to make

ablate_left() { # ablation stage -> "<seconds> <runs left> <runs>": its config's runs with no DONE in
  # ABLATE_RESULTS (an earlier session's, committed), predicted from their DONE or the recorded tokens/s
  local cfg=${1#ablate_}
  ABLATE_GPU_SECONDS=1 bash dev/ablate/ablate.sh "dev/ablate/$cfg.txt" "$ABLATE_RESULTS/$cfg" 2>/dev/null |
    sed -n 's/^ablate: gpu seconds left \([0-9]*\) runs left \([0-9]*\) of \([0-9]*\)$/\1 \2 \3/p'
}
ABLATE_MIN_S=120   # an ablation call no shorter than this (the trainers' build, a run or two)
ABLATE_BUILD_S=60  # an ablation's build of its trainers, once a session (one nvcc each, at once; a guess)

plan() { # budget
  local budget=$1 st e
  local commit
  commit=$(git rev-parse --short HEAD 2>/dev/null || echo "<commit>")
  git diff --quiet HEAD 2>/dev/null || commit="$commit (the tree has uncommitted changes: commit first, then use the new hash)"
  echo "gpu_suite plan: sessions of $budget s of device time each: start-up ~$START_S s, then calls of <= $MAX_CALL_S s of"
  echo "stages (timeout_s 600 leaves the rest for the record and the tarball), ~$CALL_OVERHEAD_S s per call for the transfers and"
  echo "the pause before the next; stages in order of value, expected times from $TIMES_FILE"
  echo "commit: $commit"
  echo
  # Which stages run: not those that passed with today's inputs ($PASSES_FILE; build and fixtures
  # still, where a stage that runs needs them), and of the ablations the runs not yet done, predicted
  # from the recorded tokens/s; the ablations take the minutes left, in parts of a call each.
  local todo=() skipped="" needs_build=0 needs_fixtures=0 at left n_left n_all
  declare -A AT=() LEFT=()
  for st in $STAGES_ALL; do
    case "$ABLATE_STAGES" in *" $st "*)
      read -r left n_left n_all <<<"$(ablate_left "$st")"
      if [ "${n_left:-1}" = 0 ]; then AT[$st]="all ${n_all} runs done (in $ABLATE_RESULTS)"; else LEFT[$st]=${left:-$(expected_s "$st")}; fi
      continue;;
    esac
    if at=$(recorded_pass "$st" "$(stage_digest "$st")" any); then AT[$st]="passed at $at, inputs unchanged"; continue; fi
    case "$NEEDS_BUILD" in *" $st "*) needs_build=1;; esac
    case "$NEEDS_FIXTURES" in *" $st "*) needs_fixtures=1;; esac
  done
  [ $needs_build = 1 ] && unset 'AT[build]'
  [ $needs_fixtures = 1 ] && unset 'AT[fixtures]'
  for st in $STAGES_ALL; do [ -n "${AT[$st]:-}" ] && skipped="$skipped $st" || todo+=("$st"); done
  # Stages into calls, calls into sessions, in order: a call closes when the next stage would take it
  # past $MAX_CALL_S s or the session past its budget; a call that cannot fit the session any more
  # opens the next one, on a fresh machine, whose first call makes the binaries and fixtures again. An
  # ablation stage fills what is left of a call (at least $ABLATE_MIN_S s) and goes on in the next.
  local build_s fixtures_s fresh=0
  build_s=$(expected_s build); fixtures_s=$(expected_s fixtures)
  local calls=() sess=() after=() pre=() cur="" cur_s=0 session=1 used=$START_S prereq=0 add room take built
  close_call() { # the current call ends; the next opens, in a new session where this one is full
    used=$((used + cur_s + CALL_OVERHEAD_S))
    calls+=("$cur_s:$cur"); sess+=("$session"); after+=("$used"); pre+=("$prereq")
    cur="" prereq=0 cur_s=0 add=0 fresh=0
    if [ $((used + $1 + CALL_OVERHEAD_S)) -gt "$budget" ]; then session=$((session + 1)) used=$START_S fresh=1; fi
  }
  for st in "${todo[@]}"; do
    if [ -n "${LEFT[$st]:-}" ]; then # an ablation: as many parts as it takes
      left=${LEFT[$st]} built=0
      while [ "$left" -gt 0 ]; do
        room=$((MAX_CALL_S - cur_s))
        [ $((budget - used - cur_s - CALL_OVERHEAD_S)) -lt $room ] && room=$((budget - used - cur_s - CALL_OVERHEAD_S))
        if [ $room -lt $ABLATE_MIN_S ]; then
          if [ -n "$cur" ]; then close_call $ABLATE_MIN_S; else session=$((session + 1)) used=$START_S fresh=1; fi
          [ $fresh = 1 ] && built=0
          continue
        fi
        add=$ABLATE_REPORT_S; [ $built = 0 ] && add=$((add + ABLATE_BUILD_S)) built=$session
        take=$((room - add)); [ $take -gt "$left" ] && take=$left
        cur="${cur:+$cur }$st=$((take + add))"; cur_s=$((cur_s + take + add))
        left=$((left - take))
      done
      continue
    fi
    e=$(expected_s "$st")
    # on a fresh machine: the binaries first, and the fixtures before the first stage that needs them
    add=0
    if [ $fresh -eq 1 ]; then
      case "$NEEDS_BUILD" in *" $st "*) [ $prereq -eq 0 ] && add=$build_s;; esac
      case "$NEEDS_FIXTURES" in *" $st "*) [ $prereq -le "$build_s" ] && add=$((add + fixtures_s));; esac
    fi
    if [ -n "$cur" ] && { [ $((cur_s + add + e)) -gt $MAX_CALL_S ] || [ $((used + cur_s + add + e + CALL_OVERHEAD_S)) -gt "$budget" ]; }; then
      close_call "$e"
      if [ $fresh -eq 1 ]; then
        case "$NEEDS_BUILD" in *" $st "*) add=$build_s;; esac
        case "$NEEDS_FIXTURES" in *" $st "*) add=$((add + fixtures_s));; esac
      fi
    fi
    prereq=$((prereq + add))
    cur="${cur:+$cur }$st=$e"; cur_s=$((cur_s + add + e))
  done
  [ -n "$cur" ] && close_call 0
  local k secs stages names
  if [ ${#calls[@]} -eq 0 ]; then
    echo "nothing to run: every stage passed with today's inputs and every ablation run is done"
  else
    printf "%-5s %-8s %-8s %-10s %s\n" call session call_s device_s stages
  fi
  for ((k = 0; k < ${#calls[@]}; k++)); do
    printf "%-5s %-8s %-8s %-10s %s%s\n" $((k + 1)) "${sess[k]}" "${calls[k]%%:*}" "${after[k]}/$budget" "$(sed 's/=[0-9]*//g' <<<"${calls[k]#*:}")" \
      "$([ "${pre[k]}" -gt 0 ] && echo " (+ ${pre[k]} s: a fresh machine)")"
  done
  local fitting=0
  for ((k = 0; k < ${#calls[@]}; k++)); do [ "${sess[k]}" = 1 ] && fitting=$((k + 1)); done
  [ ${#calls[@]} -gt 0 ] && echo "the first session ($budget s) holds call$([ $fitting -gt 1 ] && echo "s 1-$fitting" || echo " 1"); all ${#calls[@]} calls take ${sess[${#calls[@]} - 1]} sessions"
  for st in $skipped; do printf "not run: %-26s %s\n" "$st" "${AT[$st]}"; done
  local carry d piece
  for ((k = 0; k < ${#calls[@]}; k++)); do
    secs=${calls[k]%%:*}; stages=${calls[k]#*:}; names=$(sed 's/=[0-9]*//g' <<<"$stages")
    echo
    echo "call $((k + 1)) (session ${sess[k]}; ~$secs s; device time after it ~${after[k]} s of $budget)"
    [ "${pre[k]}" -gt 0 ] && printf "    %-20s %4s s  %s\n" "(a fresh machine)" "${pre[k]}" "the suite makes the binaries$([ "${pre[k]}" -gt "$build_s" ] && echo " and the fixtures") first"
    if [ "$secs" -gt $MAX_CALL_S ]; then
      case "$RESUMABLE" in
        *" ${names%% *} "*) echo "    (over $MAX_CALL_S s: the stage resumes run by run, what is left goes into the next call)" ;;
        *) echo "    (over $MAX_CALL_S s: --time-limit will not start ${names%% *} after the rebuild; give it a call on a warm machine)" ;;
      esac
    fi
    for piece in $stages; do
      st=${piece%%=*}
      case "$ABLATE_STAGES" in
        *" $st "*) printf "    %-20s %4s s  %s\n" "$st" "${piece#*=}" "predicted: the runs that fit, of ${LEFT[$st]} s left (recorded tokens/s; the trainers' build and the report included)" ;;
        *) printf "    %-20s %4s s  %s\n" "$st" "${piece#*=}" "$(time_source "$st")" ;;
      esac
    done
    carry=""
    for st in $names; do for d in ${CARRY[$st]:-}; do case " $carry " in *" $d "*) ;; *) carry="$carry $d";; esac; done; done
    [ $k -gt 0 ] && carry="$carry $LOG_REL"
    echo "    run: timeout_s=600 carry=[$(echo $carry | sed 's/ /, /g')]"
    echo "    command: set -o pipefail; export RECORD_COMMIT=${commit%% *}; RESULTS_DIR=\$OUT bash dev/results/record.sh gpu_call$((k + 1))_${commit%% *} bash dev/test/gpu_suite.sh --time-limit $MAX_CALL_S $LOG_REL $(tr ' ' '\n' <<<"$names" | awk '!seen[$0]++' | tr '\n' ' ' | sed 's/ $//'); rc=\$?; tar czf \$OUT/gpu_log.tgz -C build gpu_log; exit \$rc"
  done
  echo
  echo "Between calls: tar xzf the returned gpu_log.tgz -C build here, so that $LOG_REL travels with the next call"
  echo "(its passed stages are skipped, its summary rows kept, its finished ablation runs not trained again). A call that"
  echo "finds a fresh machine (the last one idle for 30 s, or a new session) makes the binaries and the fixtures again first"
  echo "(~$(( $(expected_s build) + $(expected_s fixtures) )) s more)."
  echo "After the session: bash dev/test/gpu_suite.sh --record-times $LOG_REL (the measured times, the passes and their inputs'"
  echo "digests, the finished ablation runs into $ABLATE_RESULTS: commit them, for the next plan)."
}

# the ablation stages' results: what comes back of each finished run, and where it is put back
ABLATE_RUN_FILES="cmd.txt DONE stdout.log main.log heads.csv heads.log"
ABLATE_REPORT_FILES="plan.tsv runs.csv summary.csv table.md loss.png"
ABLATE_REPORT_S=${GPU_SUITE_ABLATE_REPORT_S:-45} # the runner's report and the copies after the last run (tests: more)

ablate_restore() { # from out -> the finished runs under from (a folder of ablate_<config> files) put into out
  local from=$1 out=$2 done_file d f
  [ -d "$from" ] || return 0
  while IFS= read -r done_file; do
    d=${done_file#"$from"/}; d=${d%/DONE}
    [ -f "$out/$d/DONE" ] && continue
    x mkdir -p "$out/$d"
    for f in $ABLATE_RUN_FILES; do [ -f "$from/$d/$f" ] && x cp "$from/$d/$f" "$out/$d/$f"; done
  done < <(find "$from" -name DONE -type f | sort)
}
ablate_keep() { # out keep: the small files of out's finished runs, and its report, into keep
  local out=$1 keep=$2 done_file d f
  while IFS= read -r done_file; do
    d=${done_file#"$out"/}; d=${d%/DONE}
    mkdir -p "$keep/$d"
    for f in $ABLATE_RUN_FILES; do [ -f "$out/$d/$f" ] && cp "$out/$d/$f" "$keep/$d/$f"; done
  done < <(find "$out" -name DONE -type f | sort)
  for f in $ABLATE_REPORT_FILES; do [ -f "$out/$f" ] && cp "$out/$f" "$keep/$f"; done
}
# --record-times: the passed stages' seconds into the times file
record_times() { # log_dir
  local log=$1 st status secs date gpu n=0 tmp
  [ -d "$log" ] || { echo "gpu_suite: --record-times $log: no such folder" >&2; exit 1; }
  tmp=$(mktemp)
  cp "$TIMES_FILE" "$tmp" 2>/dev/null || printf "# stage\tseconds\tsource\tnote\n" >"$tmp"
  for st in $STAGES_ALL; do
    [ -f "$log/$st.status" ] || continue
    IFS=$'\t' read -r status secs date gpu <"$log/$st.status"
    [ "$status" = PASS ] || { echo "  $st: $status, not recorded (only passed stages give a time)"; continue; }
    awk -F'\t' -v OFS='\t' -v s="$st" -v t="$secs" -v src="measured ${date%% *} ${gpu}" '
      !/^#/ && $1 == s { $2 = t; $3 = src; found = 1 } { print }
      END { if (!found) print s, t, src, "" }' "$tmp" >"$tmp.new" && mv "$tmp.new" "$tmp"
    echo "  $st: $secs s (measured ${date%% *} $gpu)"
    n=$((n + 1))
  done
  mv "$tmp" "$TIMES_FILE"
  echo "gpu_suite: $n stage times written to $TIMES_FILE"
  # the passes, with the digest of their inputs: the next session skips a stage whose inputs are the same
  local digest commit nvcc m=0
  tmp=$(mktemp)
  cp "$PASSES_FILE" "$tmp" 2>/dev/null || printf "# stage\tgpu\tnvcc\tdigest\tcommit\tdate\n" >"$tmp"
  for st in $STAGES_ALL; do
    [ -f "$log/$st.status" ] && [ -f "$log/$st.digest" ] || continue
    IFS=$'\t' read -r status secs date gpu <"$log/$st.status"
    [ "$status" = PASS ] || continue
    IFS=$'\t' read -r digest commit nvcc <"$log/$st.digest"
    awk -F'\t' -v OFS='\t' -v s="$st" -v g="$gpu" -v n="$nvcc" -v d="$digest" -v c="$commit" -v t="$date" '
      !/^#/ && $1 == s && $2 == g { $3 = n; $4 = d; $5 = c; $6 = t; found = 1 } { print }
      END { if (!found) print s, g, n, d, c, t }' "$tmp" >"$tmp.new" && mv "$tmp.new" "$tmp"
    m=$((m + 1))
  done
  mv "$tmp" "$PASSES_FILE"
  echo "gpu_suite: $m passes with the digest of their inputs written to $PASSES_FILE"
  # the finished ablation runs' small files and the latest report of each config, for the next session
  local dir cfg k=0
  for dir in "$log"/ablate_*/; do
    [ -d "$dir" ] || continue
    cfg=$(basename "$dir"); cfg=${cfg#ablate_}
    mkdir -p "$ABLATE_RESULTS/$cfg"
    ablate_keep "${dir%/}" "$ABLATE_RESULTS/$cfg"
    k=$(find "$ABLATE_RESULTS/$cfg" -name DONE | wc -l)
    echo "gpu_suite: $ABLATE_RESULTS/$cfg: $k finished runs"
  done
}

# ---------------------------------------------------------------------------------------------
# arguments

DRY=0 FORCE=0 TIME_LIMIT="" INPUTS=0
while [ $# -gt 0 ]; do
  case $1 in
    --plan)
      PLAN_BUDGET=900
      case ${2:-} in ""|--*) ;; *) PLAN_BUDGET=$2; shift;; esac
      [[ $PLAN_BUDGET =~ ^[0-9]+$ ]] || { echo "gpu_suite: --plan $PLAN_BUDGET: expected the budget in seconds" >&2; exit 1; }
      DRY=1 INPUTS=plan; shift ;;
    --record-times) [ $# -eq 2 ] || usage; record_times "$2"; exit 0 ;;
    --dry-run) DRY=1; shift ;;
    --inputs) DRY=1 INPUTS=1; shift ;;
    --force) FORCE=1; shift ;;
    --time-limit)
      TIME_LIMIT=${2:-}
      [[ $TIME_LIMIT =~ ^[0-9]+$ ]] || { echo "gpu_suite: --time-limit '$TIME_LIMIT': expected seconds" >&2; exit 1; }
      shift 2 ;;
    -h|--help) usage 0 ;;
    -*) echo "gpu_suite: unknown option $1" >&2; usage ;;
    *) break ;;
  esac
done
if [ $# -ge 1 ]; then LOG=$1; shift
elif [ $DRY -eq 1 ]; then LOG=build/gpu_suite_dry
else usage; fi
STAGES=${*:-$STAGES_ALL}
for st in $STAGES; do
  case " $STAGES_ALL " in *" $st "*) ;; *) echo "gpu_suite: stage '$st': expected one of: $STAGES_ALL" >&2; exit 1;; esac
done
for st in $STAGES_ALL; do
  [ "${CAP[$st]}" -le $MAX_CALL_S ] || { echo "gpu_suite: stage $st: timeout ${CAP[$st]} s > $MAX_CALL_S s" >&2; exit 1; }
done
mkdir -p "$LOG" build/gpu_suite || { echo "gpu_suite: cannot create $LOG" >&2; exit 1; }
LOG=$(cd "$LOG" && pwd)
SCHEMES=$(make -s --no-print-directory schemes)
lab_lists=$(make -s --no-print-directory labs-list) # "LABS / LABS_BF16"
LABS=${lab_lists%% / *}
LABS_BF16=${lab_lists##* / }
JOBS=$(nproc)
NCU=${NCU:-$(command -v ncu || echo "$CUDA_HOME/bin/ncu")}
SANITIZER=${SANITIZER:-$(command -v compute-sanitizer || echo "$CUDA_HOME/bin/compute-sanitizer")}
exec 3>&1 # the dry run's command lines go here, whatever a command's output is redirected to

if [ $DRY -eq 1 ]; then
  SM=90 GPU_NAME="dry run (no GPU)" PYTHON=${PYTHON:-python3}
  [ "$INPUTS" = 0 ] && echo "gpu_suite --dry-run: every command of: $STAGES (LOG_DIR $LOG; sm_$SM; nothing runs)"
else
  if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
    echo "gpu_suite: no CUDA device (nvidia-smi -L lists no GPU); this suite is for a GPU machine (HINT: --dry-run or --plan run anywhere; make test runs the no-GPU checks)" >&2
    exit 1
  fi
  SM=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n1 | tr -d '.')
  GPU_NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n1)
  PYTHON=$(torch_python) || PYTHON=${PYTHON:-python3}
  { nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
    echo "python with torch: $PYTHON ($("$PYTHON" -c 'import torch; print(torch.__version__)' 2>&1 | tail -n 1))"
    "$SANITIZER" --version 2>&1 | tail -n 1
    "$NCU" --version 2>&1 | tail -n 1
    nvcc --version 2>&1 | tail -n 1; } | tee "$LOG/gpu.txt"
fi

# ---------------------------------------------------------------------------------------------
# helpers

binary() { # kind scheme precision -> the Makefile's binary name
  local name=$1
  [ "$2" != standard ] && name="${name}_$2"
  [ "$3" = FP32 ] && name="${name}_fp32"
  echo "$name"
}
known_binaries() { # every trainer and test binary the build stage makes
  local s p
  for s in $SCHEMES; do for p in BF16 FP32; do echo "$(binary train_gpt2cu "$s" $p) $(binary test_gpt2cu "$s" $p)"; done; done | tr '\n' ' '
}
DRY_ERRORS=0
dry_error() { echo "gpu_suite --dry-run: $*" >&3; DRY_ERRORS=$((DRY_ERRORS + 1)); }
dry_check() { # the words of a command: timeouts within a call, the scripts and configs it names present
  local prev="" a f
  for a in "$@"; do
    if [ "$prev" = timeout ] && [[ $a =~ ^[0-9]+$ ]] && [ "$a" -gt $MAX_CALL_S ]; then dry_error "timeout $a > $MAX_CALL_S s: $*"; fi
    f=${a#*=}
    case $f in
      dev/data/*) ;; # carried data, absent here
      dev/*.sh|dev/*.py|dev/*.txt|dev/*.c|dev/*.cpp|dev/*.cu|*.cu) [ -f "$f" ] || dry_error "$f: no such file (in: $*)" ;;
      ./train_gpt2cu*|./test_gpt2cu*) # built there, absent here: a name the build stage makes
        [ -n "${KNOWN_BINARIES:-}" ] || KNOWN_BINARIES=$(known_binaries)
        case " $KNOWN_BINARIES " in *" ${f#./} "*) ;; *) dry_error "$f: not a binary the build stage makes (in: $*)";; esac ;;
    esac
    prev=$a
  done
}
x() { # runs a command, or in a dry run prints it (and checks what it names)
  if [ $DRY -eq 1 ]; then
    echo "  + $(printf '%q ' "$@")" >&3
    dry_check "$@"
    return 0
  fi
  "$@"
}
now() { date +%s; }
tlimit() { # N -> N, or less when the stage's deadline is nearer (at least 1)
  local left=$((STAGE_DEADLINE - $(now)))
  [ "$left" -lt "$1" ] && { [ "$left" -gt 1 ] && echo "$left" || echo 1; } || echo "$1"
}
STAGE_FAILS=0
ROWS_FILE=/dev/null
row() { # what status detail: one summary row of the running stage
  local line
  line=$(printf "%-18s %-46s %-5s %s" "$CUR_STAGE" "$1" "$2" "$3")
  echo "$line"
  echo "$line" >>"$ROWS_FILE"
  [ "$2" = FAIL ] && STAGE_FAILS=$((STAGE_FAILS + 1))
  return 0
}
note() { # text for the summary (a table), indented
  local l
  while IFS= read -r l; do echo "    $l"; echo "    $l" >>"$ROWS_FILE"; done
}
first_error() { grep -m1 -i "${2:-error}" "$1" 2>/dev/null | cut -c1-110; }
# run a function on each line of a file (its words as arguments), P at a time, in the file's order
pool() { # P file func
  local lines
  mapfile -t lines < <(grep -v '^$' "$2")
  run_jobs "$([ $DRY -eq 1 ] && echo 0 || echo "$1")" "$3" "${lines[@]}"
}
fixture_scheme() { # fixture -> its scheme: the manifest's; before the fixtures exist (a dry run
  # here), the longest scheme name the fixture's name starts with (q_identity_hd64_mqa: q_identity)
  local s best=""
  s=$(awk -F'\t' -v f="$1" '$1 == f { print $2; exit }' dev/fixtures/manifest.tsv 2>/dev/null)
  [ -n "$s" ] && { echo "$s"; return; }
  for s in $SCHEMES; do case $1 in "$s"_*) [ ${#s} -gt ${#best} ] && best=$s;; esac; done
  echo "${best:-standard}"
}
need_data() { # folder file what -> 0 when there (a dry run only notes it)
  [ -f "$1/$2" ] && return 0
  if [ $DRY -eq 1 ]; then echo "  (needs $1, carried: absent here)" >&3; return 0; fi
  row "$3" FAIL "no $1/$2 (HINT: carry $1: dev/results/README.md)"
  return 1
}

build_outputs_ok() {
  local s p l
  for s in $SCHEMES; do for p in BF16 FP32; do
    [ -x "$(binary train_gpt2cu "$s" $p)" ] && [ -x "$(binary test_gpt2cu "$s" $p)" ] || return 1
  done; done
  for l in $LABS; do [ -x "build/lab_$l" ] && [ -x "build/lab_${l}_fp32" ] || return 1; done
  for l in $LABS_BF16; do [ -x "build/lab_$l" ] || return 1; done
  [ -x build/params ] && [ -x build/test_ptx ] && [ -x build/test_hopper ]
}
fixtures_ok() {
  [ -f dev/fixtures/manifest.tsv ] || return 1
  awk -F'\t' '{ print $3; print $4 }' dev/fixtures/manifest.tsv | while read -r f; do [ -f "$f" ] || exit 1; done
}

# ---------------------------------------------------------------------------------------------
# a stage's inputs. A stage that passed on this GPU with the same inputs, at an earlier commit
# (PASSES_FILE, written by --record-times from LOG_DIR/<stage>.digest), is not run again: "passed at
# <commit>, inputs unchanged". Its inputs, found rather than listed: its functions in this file
# (stage_<name> and every function they call), the repository files they and the stage's commands (its
# dry run) name, recursively through those that are scripts (.sh, .py: the paths they name; .py: its
# local imports); and where any of that runs a binary the build stage makes (train_gpt2cu, test_gpt2cu,
# lab_, build/params, test_ptx), the Makefile and the compiler's dependencies of every such binary (its
# `make -n` command with -MM: the sources and headers it includes). The digest is a SHA-256 of their
# names and contents (the list: LOG_DIR/<stage>.inputs); a pass counts on the same GPU and nvcc only.
DEPS_CACHE=$LOG/deps # the -MM lists, each valid while the files it lists are unchanged (travels with LOG_DIR)
SUITE_COMMIT=${RECORD_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
trap 'rm -f "$DEPS_CACHE"/kind_*."$$"' EXIT # kind_deps' memo of this invocation

fn_closure() { # function... -> them and every function of this file they call, transitively, a line each
  # (not the dry run's checks, which a real run never calls)
  local todo=("$@") seen=" dry_check dry_error known_binaries " f w all
  all=" $(compgen -A function | tr '\n' ' ') "
  while [ ${#todo[@]} -gt 0 ]; do
    f=${todo[0]} todo=("${todo[@]:1}")
    case "$seen" in *" $f "*) continue;; esac
    seen="$seen$f " && echo "$f"
    for w in $(declare -f "$f" | grep -oE '[A-Za-z_][A-Za-z0-9_]*' | sort -u); do
      case "$all" in *" $w "*) todo+=("$w");; esac
    done
  done
}
named_paths() { # [dir] < text -> the repository files it names, a line each (not build outputs, data or
  # fixtures); a name not found from the root is looked for in dir (a script's "$(dirname "$0")/x.py")
  local f dir=${1:-.}
  grep -oE '(\./)?[A-Za-z0-9_][A-Za-z0-9_./-]*\.(sh|py|cu|cuh|h|c|cpp|txt|tsv)\b|\bMakefile\b' | sed 's|^\./||' | sort -u |
    while read -r f; do
      case $f in build/*|dev/data/*|dev/fixtures/*|dev/results/*) continue;; esac
      if [ -f "$f" ]; then echo "$f"; elif [ -f "$dir/$f" ]; then realpath --relative-to=. "$dir/$f"; fi
    done
}
py_imports() { # file.py -> the files of the modules it imports from its own folder
  local m dir
  dir=$(dirname "$1")
  sed -n 's/^[[:space:]]*\(from\|import\)[[:space:]]\{1,\}\([A-Za-z_][A-Za-z0-9_]*\).*/\2/p' "$1" | sort -u |
    while read -r m; do [ -f "$dir/$m.py" ] && echo "$dir/$m.py"; done
}
code_of() { # script -> its lines without comments (what a comment names is not run)
  sed -e 's/^[[:space:]]*#.*//' -e 's/[[:space:]]#[^"'"'"']*$//' "$1"
}
script_closure() { # file... -> them and the files the scripts among them name, transitively, a line each
  # (not this file: what a stage runs of it is its functions)
  local todo=("$@") seen=" dev/test/gpu_suite.sh " f
  while [ ${#todo[@]} -gt 0 ]; do
    f=${todo[0]} todo=("${todo[@]:1}")
    case "$seen" in *" $f "*) continue;; esac
    seen="$seen$f " && echo "$f"
    case $f in
      *.sh) todo+=($(code_of "$f" | named_paths "$(dirname "$f")"));;
      *.py) todo+=($(code_of "$f" | named_paths "$(dirname "$f")") $(py_imports "$f"));;
    esac
  done
}
unit_deps() { # make target [VAR=value...] -> the repository files its compile reads (-MM), a line each
  local cmd key cache list
  cmd=$(make -n -B "$@" 2>/dev/null | grep -E '(nvcc|g\+\+|c\+\+) ' | tail -n 1 | sed 's/ -o [^ ]*$//')
  [ -n "$cmd" ] || { echo "gpu_suite: no compile command from make -n $*" >&2; echo Makefile; return; }
  mkdir -p "$DEPS_CACHE"
  key=$(printf '%s' "$cmd" | sha256sum | cut -c1-32) cache="$DEPS_CACHE/$key"
  if [ -f "$cache" ] && [ "$(head -n 1 "$cache")" = "$(sed 1d "$cache" | xargs -r sha256sum 2>&1 | sha256sum)" ]; then
    sed 1d "$cache"
    return
  fi
  list=$(eval "$cmd -MM" 2>/dev/null | tr -d '\\' | tr ' ' '\n' | grep -v ':$' | grep . | grep -v '\.o$' |
         xargs -r realpath -m --relative-to=. | grep -v '^\.\./\|^/' | sort -u)
  { printf '%s\n' "$list" | xargs -r sha256sum 2>&1 | sha256sum; printf '%s\n' "$list"; } >"$cache.tmp" && mv "$cache.tmp" "$cache"
  printf '%s\n' "$list"
}
kind_deps() { # trainer|test|lab|params|ptx -> the files every binary of that kind the build stage makes reads
  local s p l i=0 dir memo="$DEPS_CACHE/kind_$1.$$" # the same all through one invocation of the suite
  [ -f "$memo" ] && { cat "$memo"; return; }
  dir=$(mktemp -d)
  {
    case $1 in
      trainer|test)
        local kind=train_gpt2cu; [ "$1" = test ] && kind=test_gpt2cu
        for s in $SCHEMES; do for p in BF16 FP32; do
          echo "$(binary "$kind" "$s" "$p") QKV=$s PRECISION=$p"
        done; done ;;
      lab) for l in $LABS; do echo "build/lab_$l"; echo "build/lab_${l}_fp32"; done
           for l in $LABS_BF16; do echo "build/lab_$l"; done ;;
      params) echo build/params ;;
      ptx) echo build/test_ptx; echo build/test_hopper ;;
    esac
  } >"$dir/units"
  # nvcc -MM takes about a second each: $JOBS at once (on a fresh machine; the cache answers after)
  while read -r -a unit; do
    unit_deps "${unit[@]}" CUDA_ARCHS="-gencode arch=compute_$SM,code=sm_$SM" LAB_SM="$SM" >"$dir/$i" &
    i=$((i + 1))
    [ $((i % JOBS)) -eq 0 ] && wait
  done <"$dir/units"
  wait
  mkdir -p "$DEPS_CACHE"
  cat "$dir"/[0-9]* 2>/dev/null | sort -u >"$memo"
  cat "$memo"
  rm -rf "$dir"
}
stage_inputs() { # stage -> its input files, sorted, a line each
  local st=$1 text dry files all k line
  # the stage's commands from a dry run of it in a subshell, with a LOG_DIR of its own (nothing of this
  # call's touched), and what the Makefile runs for each `make` among them
  dry=$(( DRY=1 ROWS_FILE=/dev/null CUR_STAGE=$st LOG=$(mktemp -d) STAGE_DEADLINE=$(($(now) + 600))
          "stage_$st"; rm -rf "$LOG" ) 3>&1 >/dev/null 2>&1)
  text=$(for k in $(fn_closure "stage_$st"); do declare -f "$k"; done
         echo "$dry"
         sed -n 's/^  + .*[[:space:]]make[[:space:]]\(.*\)$/\1/p' <<<"$dry" | while read -r line; do eval "make -n $line" 2>/dev/null; done)
  files=$(script_closure $(named_paths <<<"$text"))
  # what runs a binary: the functions, the commands and the shell scripts (the Python ones run none)
  all="$text"$'\n'"$(for k in $files; do case $k in *.sh) code_of "$k";; esac; done)"
  {
    printf '%s\n' "$files"
    for k in trainer:train_gpt2cu test:test_gpt2cu lab:lab_ params:build/params ptx:test_ptx; do
      grep -q "${k#*:}" <<<"$all" && { echo Makefile; kind_deps "${k%%:*}"; }
    done
  } | grep . | sort -u
}
stage_digest() { # stage -> the SHA-256 of its inputs' names and contents (their list into LOG_DIR/<stage>.inputs)
  stage_inputs "$1" >"$LOG/$1.inputs"
  xargs -r sha256sum <"$LOG/$1.inputs" | sha256sum | cut -c1-16
}
NVCC_VERSION=$(nvcc --version 2>/dev/null | tail -n 1)
recorded_pass() { # stage digest [gpu nvcc] -> "<commit> (<date>)" of a pass with these inputs on that GPU with that
  # nvcc (default: this machine's), from PASSES_FILE; with gpu "any": on any GPU (--plan), "<commit> (<date>, <gpu>)"
  awk -F'\t' -v s="$1" -v d="$2" -v g="${3:-$GPU_NAME}" -v n="${4:-$NVCC_VERSION}" '
    !/^#/ && $1 == s && $4 == d && ((g == "any") || ($2 == g && $3 == n)) { c = $5 " (" $6 (g == "any" ? ", " $2 : "") ")" }
    END { if (c == "") exit 1; print c }' "$PASSES_FILE" 2>/dev/null
}
unchanged_since_pass() { # stage -> 0 (and the summary's row) when PASSES_FILE has a pass of it with today's inputs
  local st=$1 digest at
  [ $FORCE -eq 0 ] && [ $DRY -eq 0 ] || return 1
  case "$ABLATE_STAGES" in *" $st "*) return 1;; esac # their runs are skipped run by run instead
  digest=$(stage_digest "$st")
  at=$(recorded_pass "$st" "$digest") || return 1
  echo "=== $st: passed at $at on this GPU, inputs unchanged ($(wc -l <"$LOG/$st.inputs") files, $digest): skipping (--force runs it)"
  printf "%-18s %-46s %-5s %s\n" "$st" "inputs unchanged since a pass" PASS "passed at $at; $digest" >"$LOG/$st.rows"
  printf '%s\t%s\n' "$digest" "$at" >"$LOG/$st.unchanged"
  SKIPPED+=("$st")
}

# ---------------------------------------------------------------------------------------------
# build

build_job() { # kind target [precision]
  local log="$LOG/build/${2//\//_}${3:+_$3}.log" rc
  case $1 in
    trainer) x timeout "$(tlimit 280)" make -s "$(binary train_gpt2cu "$2" "$3")" "$(binary test_gpt2cu "$2" "$3")" QKV="$2" \
               PRECISION="$3" CUDA_ARCHS="-gencode arch=compute_$SM,code=sm_$SM" >"$log" 2>&1 ;;
    lab) x timeout "$(tlimit 280)" make -s "$2" LAB_SM="$SM" >"$log" 2>&1 ;;
    *) x timeout "$(tlimit 280)" make -s "$2" >"$log" 2>&1 ;;
  esac
  rc=$?
  [ $DRY -eq 1 ] && return 0
  if [ $rc -ne 0 ]; then echo "FAIL $2 ${3:-}: exit $rc: $(first_error "$log")"
  elif grep -qi 'warning' "$log"; then echo "FAIL $2 ${3:-}: compiler warnings: $(first_error "$log" warning)"
  else echo "PASS $2 ${3:-}"; fi >"$LOG/build/${2//\//_}${3:+_$3}.result"
}
stage_build() {
  mkdir -p "$LOG/build"
  rm -f "$LOG"/build/*.result
  local jobs="$LOG/build/jobs.txt" s l n
  : >"$jobs"
  for s in $SCHEMES; do echo "trainer $s BF16" >>"$jobs"; echo "trainer $s FP32" >>"$jobs"; done
  for l in $LABS; do echo "lab build/lab_$l" >>"$jobs"; echo "lab build/lab_${l}_fp32" >>"$jobs"; done
  for l in $LABS_BF16; do echo "lab build/lab_$l" >>"$jobs"; done
  echo "params build/params" >>"$jobs"
  echo "ptx build/test_ptx" >>"$jobs"
  echo "ptx build/test_hopper" >>"$jobs"
  pool "$JOBS" "$jobs" build_job
  [ $DRY -eq 1 ] && return
  n=$(grep -c . "$jobs")
  if grep -q '^FAIL' "$LOG"/build/*.result 2>/dev/null || ! build_outputs_ok; then
    row "$n builds (trainers, tests, labs, params), sm_$SM" FAIL "$(cat "$LOG"/build/*.result 2>/dev/null | grep -m3 '^FAIL' | tr '\n' ';' | cut -c1-200) (see build/*.log)"
  else
    row "$n builds: $((2 * $(echo $SCHEMES | wc -w))) trainers + tests, $(( $(echo $LABS | wc -w) * 2 + $(echo $LABS_BF16 | wc -w) )) labs, params; sm_$SM" PASS "$(stage_secs) s, $JOBS at once"
  fi
}

# ---------------------------------------------------------------------------------------------
# fixtures

stage_fixtures() {
  x timeout "$(tlimit 240)" "$PYTHON" dev/reference/make_fixtures.py --out dev/fixtures >"$LOG/fixtures.log" 2>&1
  local rc=$?
  [ $DRY -eq 1 ] && return
  if [ $rc -eq 0 ] && fixtures_ok; then
    row "$(grep -c . dev/fixtures/manifest.tsv) fixtures" PASS "$(stage_secs) s, $PYTHON, torch $("$PYTHON" -c 'import torch; print(torch.__version__)' 2>&1 | tail -n 1)"
  else
    row "make_fixtures.py" FAIL "exit $rc: $(tail -n 1 "$LOG/fixtures.log" | cut -c1-120)"
  fi
}

# ---------------------------------------------------------------------------------------------
# tests (dev/test/test_cuda.sh, one precision per stage)

stage_tests() { # precision
  local p=$1 lp s test_log n_pass n_fail worst rc
  lp=$(echo "$p" | tr A-Z a-z)
  x env CUDA_TEST_PRECISIONS="$p" CUDA_TEST_LABS=0 GPU_RUN_TIMEOUT=60 PYTHON="$PYTHON" timeout "$(tlimit 400)" bash dev/test/test_cuda.sh \
    >"$LOG/tests_$lp.log" 2>&1
  rc=$?
  [ $DRY -eq 1 ] && return
  mkdir -p "$LOG/tests_$lp"
  cp build/test_logs/cuda/test_gpt2cu*.log "$LOG/tests_$lp/" 2>/dev/null
  for s in $SCHEMES; do
    test_log="$LOG/tests_$lp/$(binary test_gpt2cu "$s" "$p").log"
    n_pass=$(grep -c "^PASS cuda-$lp " "$test_log" 2>/dev/null); n_fail=$(grep -c "^FAIL " "$test_log" 2>/dev/null)
    worst=$(grep -m1 "^FAIL " "$test_log" 2>/dev/null | cut -c1-110)
    if [ "${n_pass:-0}" -gt 0 ] && [ "${n_fail:-0}" -eq 0 ]; then row "$lp $s" PASS "$n_pass fixtures"
    else row "$lp $s" FAIL "${n_pass:-0} pass, ${n_fail:-0} fail: ${worst:-no PASS line (crash?)}"; fi
  done
  n_pass=$(grep -c '^PASS' "$LOG/tests_$lp.log"); n_fail=$(grep -c '^FAIL' "$LOG/tests_$lp.log")
  if [ $rc -eq 0 ] && [ "$n_fail" -eq 0 ]; then row "test_cuda.sh $p (all checks)" PASS "$n_pass passed, $(stage_secs) s"
  else row "test_cuda.sh $p (all checks)" FAIL "exit $rc, $n_pass passed, $n_fail failed: $(grep -m1 '^FAIL' "$LOG/tests_$lp.log" | cut -c1-100)"; fi
}
stage_tests_fp32() { stage_tests FP32; }
stage_tests_bf16() { stage_tests BF16; }

# ---------------------------------------------------------------------------------------------
# bench (dev/bench/bench.sh, its two parts as two stages)

stage_bench() { # part (peers|schemes)
  local part=$1 only rc
  [ "$part" = peers ] && only=BENCH_PEERS_ONLY=1 || only=BENCH_SCHEMES_ONLY=1
  x env "$only" BENCH_LOG_DIR="$LOG/bench_$part" PYTHON="$PYTHON" timeout "$(tlimit 540)" bash dev/bench/bench.sh "$BENCH_STEPS" \
    >"$LOG/bench_$part.log" 2>&1
  rc=$?
  [ $DRY -eq 1 ] && return
  sed -n '/^== table/,$p' "$LOG/bench_$part.log" | grep -v '^results:' | note
  if [ $rc -eq 0 ]; then row "bench.sh $part ($BENCH_STEPS steps per run)" PASS "$(stage_secs) s"
  else row "bench.sh $part ($BENCH_STEPS steps per run)" FAIL "exit $rc: $(grep -m1 '^bench:' "$LOG/bench_$part.log" | cut -c1-110)"; fi
}
stage_bench_peers() { wait_llmc_build; stage_bench peers; }
stage_bench_schemes() { stage_bench schemes; }

# ---------------------------------------------------------------------------------------------
# profile: the trainer's --profile of every scheme, then ncu over one step of standard

predicted_profile() { # -> LOG/profile/predicted_d12.csv (build/params, no GPU)
  mkdir -p "$LOG/profile"
  x timeout 120 make -s build/params >"$LOG/profile/params_build.log" 2>&1
  x timeout 60 ./build/params profile d12 1024 64 --csv "$LOG/profile/predicted_d12.csv" >"$LOG/profile/predicted_d12.txt" 2>&1
}
# The cost model taught by the newest record of this GPU with a measured profile table (build/params
# profile --learn): the step predicted for this build at the profile's shape (B 64) and at the bench's
# (B 128 x 4), written before this run measures either, and noted beside the record's measured step
learned_profile() {
  local records record shape
  records=$(grep -l '^ *profile total ' dev/results/*.txt 2>/dev/null | sort)
  # shellcheck disable=SC2086 # the file names
  record=$(grep -l "^gpu: *${GPU_NAME:-none}\$" $records /dev/null 2>/dev/null | tail -n 1)
  [ $DRY -eq 1 ] && [ -z "$record" ] && record=$(tail -n 1 <<<"$records") # the commands, on some record
  [ -n "$record" ] || { echo "no record of ${GPU_NAME:-this GPU} with a profile table in dev/results: no learned prediction" | note; return; }
  for shape in "64" "128 --micro_steps 4"; do
    # shellcheck disable=SC2086 # the shape's words
    x timeout 60 ./build/params profile d12 1024 $shape --learn "$record" >"$LOG/profile/learned_b${shape%% *}.txt" 2>&1
    [ $DRY -eq 0 ] && grep '^profile step' "$LOG/profile/learned_b${shape%% *}.txt" | sed "s/^profile step/learned, B ${shape%% *}/" | note
  done
}
stage_profile() {
  local s bin log csv rc summary apart
  predicted_profile
  if [ $DRY -eq 0 ]; then
    if [ -s "$LOG/profile/predicted_d12.csv" ]; then row "build/params profile d12 1024 64 (predicted)" PASS "$(grep -m1 '^total,' "$LOG/profile/predicted_d12.csv" | cut -d, -f5) ms predicted per step"
    else row "build/params profile d12 1024 64 (predicted)" FAIL "$(first_error "$LOG/profile/predicted_d12.txt" 'error\|params\|usage')"; fi
  fi
  learned_profile
  need_data dev/data/austen austen_train_000000.bin "--profile (every scheme)" || return
  # every scheme, then standard at the bench's own shape (B 128, -d 524288: 4 micro-steps), whose step
  # the bench's step is compared with (the flash versions the trainer does not hold: lab_bench)
  local run name flags B
  for run in $SCHEMES standard:b128; do
    s=${run%%:*} name=${run/:/_} flags=() B=64
    [ "$run" = standard:b128 ] && B=128 flags=(-d 524288)
    bin=$(binary train_gpt2cu "$s" BF16) log="$LOG/profile/profile_$name.log" csv="$LOG/profile/profile_$name.csv"
    rm -f "$csv"
    x timeout "$(tlimit 150)" ./"$bin" -e d12 -i "$AUSTEN_TRAIN" -j "$AUSTEN_VAL" -b $B -t 1024 -x $((PROFILE_STEPS + 1)) \
      -v 0 -s 0 "${flags[@]}" --profile "$PROFILE_STEPS" --profile_csv "$csv" >"$log" 2>&1
    rc=$?
    [ $DRY -eq 1 ] && continue
    summary=$(grep '^summary:' "$log" | sed -E 's/.*\| ([0-9.]+) ms\/step.*peak memory ([0-9]+) MiB.*/\1 ms\/step, peak \2 MiB/')
    apart=$(grep -m1 '^profile sum of rows' "$log" | sed -E 's/.*: ([0-9.]+)% apart.*/\1/')
    if [ $rc -eq 0 ] && [ -s "$csv" ] && grep -q '^total,' "$csv" && ! grep -q 'NOT within' "$log"; then
      row "--profile $PROFILE_STEPS, $s${flags[*]:+ ${flags[*]}} (d12, B $B, T 1024)" PASS "$summary; rows sum ${apart:-?}% from the step"
    else
      row "--profile $PROFILE_STEPS, $s${flags[*]:+ ${flags[*]}} (d12, B $B, T 1024)" FAIL "exit $rc${apart:+, rows sum $apart% from the step (over 5%)}: $(first_error "$log" 'error\|NOT within')"
    fi
  done
  [ $DRY -eq 0 ] && [ -f "$LOG/profile/profile_standard.log" ] && grep '^profile \|^profile: [0-9]* steps' "$LOG/profile/profile_standard.log" | note
  [ $DRY -eq 0 ] && [ -f "$LOG/profile/profile_standard_b128.log" ] && grep '^profile \|^summary' "$LOG/profile/profile_standard_b128.log" | note
}
stage_profile_ncu() {
  local rc
  [ -s "$LOG/profile/predicted_d12.csv" ] || predicted_profile
  need_data dev/data/austen austen_train_000000.bin "ncu, one step of standard" || return
  rm -f "$LOG/profile/ncu_standard.csv"
  x timeout "$(tlimit 480)" "$NCU" --profile-from-start off --clock-control none --csv --page details --print-units base \
    --metrics "$NCU_METRICS" --log-file "$LOG/profile/ncu_standard.csv" ./train_gpt2cu -e d12 -i "$AUSTEN_TRAIN" \
    -j "$AUSTEN_VAL" -b 64 -t 1024 -x 2 -v 0 -s 0 --profile 1 >"$LOG/profile/ncu_run.log" 2>&1
  rc=$?
  x python3 dev/tools/ncu_table.py "$LOG/profile/ncu_standard.csv" --predicted "$LOG/profile/predicted_d12.csv" \
    --source train_gpt2.cu --top 15 >"$LOG/profile/ncu_top15.txt" 2>&1
  local rc_table=$?
  x python3 dev/tools/ncu_table.py "$LOG/profile/ncu_standard.csv" --predicted "$LOG/profile/predicted_d12.csv" \
    --source train_gpt2.cu --top 15 --format markdown >"$LOG/profile/ncu_top15.md" 2>&1
  x python3 dev/tools/ncu_table.py "$LOG/profile/ncu_standard.csv" --predicted "$LOG/profile/predicted_d12.csv" \
    --source train_gpt2.cu --top 15 --format tsv >"$LOG/profile/ncu_top15.tsv" 2>&1
  [ $DRY -eq 1 ] && return
  if [ $rc -eq 0 ] && [ $rc_table -eq 0 ]; then
    row "ncu, one step of standard (d12, B 64, T 1024)" PASS "$(head -n 1 "$LOG/profile/ncu_top15.txt" | cut -c6-90); ncu_standard.csv"
    sed 1d "$LOG/profile/ncu_top15.txt" | note
  else
    row "ncu, one step of standard (d12, B 64, T 1024)" FAIL "ncu exit $rc, table exit $rc_table: $(first_error "$LOG/profile/ncu_run.log" 'error\|ERR')$(head -n 1 "$LOG/profile/ncu_top15.txt" | cut -c1-80)"
  fi
}

# ---------------------------------------------------------------------------------------------
# kernel labs

lab_bins() { # the runtime's PTX checks (the CPU runtime's model of ldmatrix, cp.async, mma.sync; of Hopper's
  # instructions: sm_90a, a SKIP elsewhere), then the labs, attention first
  local l
  echo build/test_ptx
  echo build/test_hopper
  for l in $LABS; do echo "build/lab_$l"; echo "build/lab_${l}_fp32"; done
  for l in $LABS_BF16; do echo "build/lab_$l"; done
}
stage_lab_check() {
  local bin name log rc n_pass n_fail
  mkdir -p "$LOG/lab"
  for bin in $(lab_bins); do
    name=$(basename "$bin") log="$LOG/lab/${name}_check.log"
    x timeout "$(tlimit 150)" ./"$bin" --check >"$log" 2>&1
    rc=$?
    [ $DRY -eq 1 ] && continue
    n_pass=$(grep -c '^PASS ' "$log"); n_fail=$(grep -c '^FAIL ' "$log")
    if [ $rc -eq 0 ] && grep -q "^SKIP $name" "$log" && [ "$n_pass" -eq 0 ]; then
      row "$name --check" SKIP "$(grep -m1 '^SKIP' "$log" | cut -c1-110)"
    elif [ $rc -eq 0 ] && [ "$n_pass" -gt 0 ] && [ "$n_fail" -eq 0 ]; then
      row "$name --check" PASS "$n_pass (version, scheme, shape) checks"
    else
      row "$name --check" FAIL "exit $rc, $n_pass pass, $n_fail fail: $(grep -m1 '^FAIL \|^error' "$log" | cut -c1-100)"
    fi
  done
  # the flash kernels' machine code (cuobjdump is on this machine, not on the development one): each
  # kernel's HMMA and LDL/STL counts noted; the versions not yet measured (flash5, flash6, flash7) must hold HMMA
  # (HGMMA) and no local memory (the older ones' known spills are in the labs' headers)
  # (flash6's and flash7's bodies are sm_90a's alone: built for another GPU they are empty)
  local l sass strict=flash5
  [ "$SM" = 90 ] && strict='flash[567]'
  for l in attention_forward attention_backward; do
    sass="$LOG/lab/lab_${l}_sass.txt"
    x cuobjdump -sass build/lab_"$l" >"$sass" 2>&1
    x python3 dev/tools/sass_facts.py "$sass" --match 'flash\w*_attention_(forward|backward)' --strict "$strict" >"$sass.facts" 2>&1
    rc=$?
    [ $DRY -eq 1 ] && continue
    note <"$sass.facts"
    if [ $rc -eq 0 ]; then row "lab_$l SASS ($strict)" PASS "$(tail -n 1 "$sass.facts" | cut -c1-110)"
    else row "lab_$l SASS ($strict)" FAIL "exit $rc: $(tail -n 1 "$sass.facts" | cut -c1-110)"; fi
  done
}
bench_run() { # label log pattern command...: the command into LOG/lab/<log>.log, its lines matching pattern noted, a row
  local label=$1 log="$LOG/lab/$2.log" pattern=$3 rc
  shift 3
  x timeout "$(tlimit 200)" "$@" >"$log" 2>&1
  rc=$?
  [ $DRY -eq 1 ] && return
  grep "$pattern" "$log" | note
  if [ $rc -eq 0 ] && grep -q "$pattern" "$log"; then row "$label" PASS "$(grep -c "$pattern" "$log") lines (lab/$2.log): $(head -n 1 "$log" | cut -c1-80)"
  elif [ $rc -eq 0 ] && grep -q '^SKIP' "$log"; then row "$label" SKIP "$(grep -m1 '^SKIP' "$log" | cut -c1-110)"
  else row "$label" FAIL "exit $rc: $(grep -m1 '^error\|^SKIP\|Error' "$log" | cut -c1-110)"; fi
}
stage_lab_bench() {
  local l
  mkdir -p "$LOG/lab"
  for l in $LABS $LABS_BF16; do bench_run "lab_$l --bench" "lab_${l}_bench" '^bench v' ./build/lab_"$l" --bench; done
  bench_run "sdpa_bench.py (PyTorch SDPA)" sdpa_bench '^bench sdpa ' "$PYTHON" dev/cuda/sdpa_bench.py
}
stage_lab_bench_long() {
  local l
  mkdir -p "$LOG/lab"
  for l in attention_forward attention_backward; do bench_run "lab_$l --long" "lab_${l}_bench_long" '^bench v' ./build/lab_"$l" --long; done
  bench_run "sdpa_bench.py --long (PyTorch SDPA)" sdpa_bench_long '^bench sdpa ' "$PYTHON" dev/cuda/sdpa_bench.py --long
}

# ---------------------------------------------------------------------------------------------
# sanitizers: one run per job line "tool kind precision target" (kind: train, test, lab), in value
# order, P at a time; a run that passed (LOG/sanitize/<run>.result) is not repeated

source dev/test/sanitizer_runs.sh
sanitize_run_name() { echo "$1_$2_$4_$3"; } # tool kind precision target -> the run's file names in LOG/sanitize
sanitize_job() { # tool kind precision target
  local tool=$1 kind=$2 p=$3 target=$4 name dir log res left cmd=() label rc summary scheme
  name=$(sanitize_run_name "$@")
  dir="$LOG/sanitize" log="$dir/$name.log" res="$dir/$name.result"
  [ $DRY -eq 0 ] && [ -f "$res" ] && grep -q '^PASS' "$res" && return 0
  left=$(tlimit 480)
  if [ $DRY -eq 0 ] && [ "$left" -lt 30 ]; then rm -f "$res"; return 0; fi # not reached: no result, the next call runs it
  case $kind in
    lab)
      cmd=(./build/lab_"$target" --check --quick); label="lab_$target --check --quick (every version)" ;;
    test)
      awk -F'\t' -v f="$target" '$1 == f' dev/fixtures/manifest.tsv >"$dir/manifest_$target.tsv" 2>/dev/null
      scheme=$(fixture_scheme "$target")
      cmd=(./"$(binary test_gpt2cu "$scheme" "$p")" "$dir/manifest_$target.tsv"); label="test_gpt2cu $target $p" ;;
    train)
      scheme=$(fixture_scheme "$target")
      [ $DRY -eq 0 ] && rm -rf "build/gpu_suite/$name"
      sanitizer_trainer_args "$tool" "$target" "build/gpu_suite/$name"
      cmd=(./"$(binary train_gpt2cu "$scheme" "$p")" "${SAN_TRAINER_ARGS[@]}")
      label="trainer $target $p" ;;
  esac
  local SAN_TOOL_ARGS SAN_ENV_ARGS
  sanitizer_tool_args "$tool"
  sanitizer_env_args "$tool" "$dir/$name.regions"
  [ "$tool" = initcheck ] && [ $DRY -eq 0 ] && rm -f "$dir/$name.regions"
  x timeout "$left" "${SAN_ENV_ARGS[@]}" "$SANITIZER" "${SAN_TOOL_ARGS[@]}" "${cmd[@]}" >"$log" 2>&1
  rc=$?
  [ $DRY -eq 1 ] && return 0
  summary=$(grep -m1 'ERROR SUMMARY\|RACECHECK SUMMARY' "$log" | sed 's/^=* *//')
  if [ "$tool" = initcheck ]; then
    python3 dev/test/initcheck_filter.py "$log" --regions "$dir/$name.regions" >"$dir/$name.filtered.txt" 2>&1
    local frc=$?
    # the raw log can hold a million reports: keep its head and tail, and the filter's verdict
    if [ "$(wc -c <"$log")" -gt 2000000 ]; then
      { head -n 100 "$log"; echo "... ($(wc -l <"$log") lines, cut by gpu_suite.sh; the filter read them all)"; tail -n 20 "$log"; } >"$log.cut" && mv "$log.cut" "$log"
    fi
    if { [ $rc -eq 0 ] || [ $rc -eq 99 ]; } && [ $frc -eq 0 ]; then
      echo "PASS $tool $label: $summary; $(head -n 1 "$dir/$name.filtered.txt" | sed 's/^initcheck_filter: //')"
    else
      echo "FAIL $tool $label: exit $rc; $(head -n 1 "$dir/$name.filtered.txt" | sed 's/^initcheck_filter: //'): $(grep -m1 'kept:\|summary counts\|no ERROR' "$dir/$name.filtered.txt" | sed 's/^ *//' | cut -c1-100)"
    fi >"$res"
  elif [ $rc -eq 0 ] && echo "$summary" | grep -q ' 0 \(errors\|hazards\)'; then
    echo "PASS $tool $label: $summary" >"$res"
  elif [ $rc -eq 124 ]; then
    rm -f "$res" # stopped at the stage's time limit: no result, the next call runs it again
  elif [ $rc -eq 9 ] || [ $rc -eq 137 ]; then
    # compute-sanitizer passes on the signal number of a target killed by a signal; the kernel's log
    # says whether its out-of-memory killer chose it (where the machine lets us read it)
    local oom
    oom=$(dmesg 2>/dev/null | grep -i 'out of memory\|oom-kill\|killed process' | tail -n 1 | cut -c1-120)
    echo "FAIL $tool $label: killed (exit $rc, SIGKILL; the host's out-of-memory killer? $SAN_AT_ONCE runs at once), ${summary:-no summary}; dmesg: ${oom:-no out-of-memory line}" >"$res"
  else
    echo "FAIL $tool $label: exit $rc, ${summary:-no summary}: $(grep -m1 -i 'error\|hazard' "$log" | cut -c1-110)" >"$res"
  fi
}
sanitize_jobs() { # tool -> the job lines, in value order
  local tool=$1 s f
  local hd64=() hd64_gqa=()
  for s in $SCHEMES; do hd64+=("${s}_hd64"); done
  for f in standard_hd64_gqa2 standard_hd64_mqa kv_shared_hd64_gqa2 q_identity_hd64_mqa q_residual_hd64_gqa2; do hd64_gqa+=("$f"); done
  case $tool in
    memcheck)
      for f in "${hd64[@]}" "${hd64_gqa[@]}"; do echo "memcheck train BF16 $f"; done
      echo "memcheck test BF16 standard_hd64"
      for l in $LABS; do echo "memcheck lab BF16 $l"; done
      for s in $SCHEMES; do echo "memcheck train BF16 ${s}_tiny"; done
      for s in $SCHEMES; do
        echo "memcheck train FP32 ${s}_tiny"
        case $s in standard|q_identity|kv_shared|q_residual) echo "memcheck train FP32 ${s}_gqa2"; echo "memcheck train FP32 ${s}_mqa";; esac
      done ;;
    racecheck|synccheck)
      for f in "${hd64[@]}" "${hd64_gqa[@]}"; do echo "$tool train BF16 $f"; done
      for l in $LABS; do echo "$tool lab BF16 $l"; done
      [ "$tool" = racecheck ] && echo "racecheck train BF16 standard_tiny" ;;
    initcheck)
      echo "initcheck train BF16 standard_hd64"
      for s in $SCHEMES; do echo "initcheck train FP32 ${s}_tiny"; done
      echo "initcheck train BF16 standard_tiny"
      for f in kv_shared_hd64 qkv_shared_hd64 q_residual_hd64; do echo "initcheck train BF16 $f"; done ;;
  esac
}
sanitize_group() { # kind precision target -> the summary row the run belongs to
  case $1 in
    train) case $3 in *_hd64*|*_hd128*) echo "trainer $2, head-size-64 fixtures (flash)";; *) echo "trainer $2, tiny fixtures (unfused)";; esac ;;
    test) echo "test_gpt2cu $2 $3 (both paths)" ;;
    lab) echo "attention labs, every version --check --quick" ;;
  esac
}
# Runs killed beside others leave no reason behind (the 2026-11-27 H200: 4 of 4 racecheck runs at
# once). A sampler writes the host's available memory and the GPU's used memory every 5 s while a
# sanitizer stage runs, so that the summary says whether either ran out. It is no child of the
# suite's shell (a pool's `wait` would wait for it) and ends with the suite.
memory_sampler_start() { # file -> the sampler's pid
  local file=$1 suite=$$
  ( while kill -0 "$suite" 2>/dev/null; do
      printf "%s host_available_MiB %s gpu_used_MiB %s\n" "$(date -u +%T)" \
        "$(awk '/^MemAvailable:/ { print int($2 / 1024) }' /proc/meminfo 2>/dev/null)" \
        "$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null | head -n 1)"
      sleep 5
    done >"$file" 2>&1 & echo $! )
}
memory_sampler_note() { # file -> one line: the least host memory available, the most GPU memory used
  awk '$3 ~ /^[0-9]+$/ { n++; if (h == "" || $3 < h) h = $3 } $5 ~ /^[0-9]+$/ { if (g == "" || $5 > g) g = $5 }
       END { printf "memory while it ran (%d samples, 5 s apart): host available at least %s MiB, GPU used at most %s MiB\n",
             n, h == "" ? "?" : h, g == "" ? "?" : g }' "$1"
}
stage_sanitize() { # tool
  local tool=$1 jobs g kind p target sampler=""
  mkdir -p "$LOG/sanitize"
  jobs="$LOG/sanitize/${tool}_jobs.txt"
  sanitize_jobs "$tool" >"$jobs"
  sanitizer_prepare_shard x
  if [ "$tool" = initcheck ]; then
    sanitizer_build_shim "$CUDA_HOME" x >"$LOG/sanitize/shim_build.log" 2>&1 ||
      row "initcheck_lt_regions.so (gcc)" FAIL "$(head -c 120 "$LOG/sanitize/shim_build.log")"
  fi
  # racecheck keeps far more state per run than the other tools: 13 trainer runs at once on the
  # 2026-11-26 H200 ended with 10 of them killed before their first step
  SAN_AT_ONCE=$JOBS
  [ "$tool" = racecheck ] && SAN_AT_ONCE=4
  while read -r _ kind p target; do
    grep -qs '^PASS' "$LOG/sanitize/$(sanitize_run_name "$tool" "$kind" "$p" "$target").result" && STAGE_RESUMED=$((STAGE_RESUMED + 1))
  done <"$jobs"
  [ $DRY -eq 0 ] && sampler=$(memory_sampler_start "$LOG/sanitize/${tool}_memory.log")
  pool "$SAN_AT_ONCE" "$jobs" sanitize_job
  [ $DRY -eq 1 ] && return
  # a run killed beside others (the 2026-11-26 H200: one racecheck run of 4) gets a second try
  # alone, in this call's time; killed alone, it fails
  local retry="$LOG/sanitize/${tool}_retry.txt"
  while read -r _ kind p target; do
    grep -qs '^FAIL .*: killed (' "$LOG/sanitize/$(sanitize_run_name "$tool" "$kind" "$p" "$target").result" &&
      echo "$tool $kind $p $target"
  done <"$jobs" >"$retry"
  if [ -s "$retry" ] && [ "$SAN_AT_ONCE" -gt 1 ]; then
    echo "  $(wc -l <"$retry") run(s) killed beside others: again, one at a time"
    SAN_AT_ONCE=1
    pool 1 "$retry" sanitize_job
  fi
  kill "$sampler" 2>/dev/null
  memory_sampler_note "$LOG/sanitize/${tool}_memory.log" | note
  # one row per group of runs: (kind, precision, fixture family), in the jobs' order
  local groups=()
  local -A seen=()
  while read -r _ kind p target; do
    g=$(sanitize_group "$kind" "$p" "$target")
    [ -n "${seen[$g]:-}" ] || { seen[$g]=1; groups+=("$g"); }
  done <"$jobs"
  for g in "${groups[@]}"; do
    local pass=0 fail=0 missing=0 first="" res
    while read -r _ kind p target; do
      [ "$(sanitize_group "$kind" "$p" "$target")" = "$g" ] || continue
      res="$LOG/sanitize/$(sanitize_run_name "$tool" "$kind" "$p" "$target").result"
      if [ ! -f "$res" ]; then missing=$((missing + 1))
      elif grep -q '^PASS' "$res"; then pass=$((pass + 1))
      else fail=$((fail + 1)); [ -n "$first" ] || first=$(cut -c6-140 "$res"); fi
    done <"$jobs"
    if [ $fail -eq 0 ] && [ $missing -eq 0 ]; then
      row "$tool: $g ($pass runs)" PASS "$([ "$tool" = initcheck ] && echo "no report kept by the filter" || echo "0 errors")"
    elif [ $fail -gt 0 ]; then
      row "$tool: $g ($((pass + fail + missing)) runs)" FAIL "$fail failed$([ $missing -gt 0 ] && echo ", $missing not reached"): $first"
    else
      row "$tool: $g ($((pass + missing)) runs)" FAIL "$missing not reached in this call's time: run the stage again (passed runs are kept)"
    fi
  done
  cat "$LOG"/sanitize/"${tool}"_*.result 2>/dev/null | sort >"$LOG/sanitize/${tool}_results.txt"
  [ "$tool" = initcheck ] && grep -h '^  dropped' "$LOG"/sanitize/initcheck_*BF16.filtered.txt 2>/dev/null |
    awk '{ c = $2; sub(/^ *dropped +[0-9]+ +/, ""); n[$0] += c } END { for (k in n) printf "%10d dropped: %s\n", n[k], k }' |
    sort -rn | head -n 12 | note
}
stage_sanitize_memcheck() { stage_sanitize memcheck; }
stage_sanitize_racecheck() { stage_sanitize racecheck; }
stage_sanitize_synccheck() { stage_sanitize synccheck; }
stage_sanitize_initcheck() { stage_sanitize initcheck; }

# ---------------------------------------------------------------------------------------------
# train: make train, --generate, llm.c loading our checkpoint

stage_train() {
  local rc val steps summary g
  wait_llmc_build
  need_data dev/data/austen austen_train_000000.bin "make train" || return
  x timeout "$(tlimit 240)" make train >"$LOG/make_train.log" 2>&1
  rc=$?
  if [ $DRY -eq 0 ]; then
    val=$(grep '| val loss' "$LOG/make_train.log" | tail -n 1 | sed -E 's/.*val loss ([0-9.]+).*/\1/')
    steps=$(grep -c '^step [0-9]*/150 | loss' "$LOG/make_train.log")
    summary=$(grep '^summary:' "$LOG/make_train.log" | sed 's/^summary: //')
    # sensible: well under a random model's ln(50257) = 10.8 (the first H100 run reached 5.18)
    if [ $rc -eq 0 ] && [ "$steps" -eq 150 ] && [ -n "$val" ] && awk -v v="$val" 'BEGIN { exit !(v < 6.0) }' &&
       grep -q '^generating:' "$LOG/make_train.log"; then
      row "make train (standard, Austen, 150 steps)" PASS "val loss $val, $(stage_secs) s | $summary"
    else
      row "make train (standard, Austen, 150 steps)" FAIL "exit $rc, $steps step lines, val loss '${val}': $(first_error "$LOG/make_train.log")"
    fi
  fi
  # --generate with the KV cache: make train's model, then a random d12 of kv_shared, whose cache
  # must be half of standard's (build/params: 36864 and 18432 bf16 bytes per token at d12)
  for g in "standard ./train_gpt2cu log_standard/model_00000150.bin 36864" "kv_shared ./train_gpt2cu_kv_shared d12 18432"; do
    set -- $g
    x timeout "$(tlimit 120)" "$2" -e "$3" --generate 256 --prompt "It is a truth universally acknowledged" >"$LOG/generate_$1.log" 2>&1
    rc=$?
    [ $DRY -eq 1 ] && continue
    if [ $rc -eq 0 ] && grep -q "^kv cache: $4 bytes per token allocated" "$LOG/generate_$1.log"; then
      row "--generate 256, $1 ($3)" PASS "$(grep '^generate:' "$LOG/generate_$1.log" | sed -E 's/.*\(([0-9.]+ tok\/s).*/\1/'), kv cache $4 bytes/token"
    else
      row "--generate 256, $1 ($3)" FAIL "exit $rc, expected 'kv cache: $4 bytes per token': $(first_error "$LOG/generate_$1.log" 'error\|kv cache')"
    fi
  done
  # llm.c's own train_gpt2cu (built by bench_peers on this machine) loads make train's checkpoint, a
  # plain GPT-2 that our BF16 trainer writes as llm.c's version 5: its validation loss on the first
  # 4 batches of the Austen val shard against ours on the same batches (both bf16: within 2%)
  local m=log_standard/model_00000150.bin llmc=dev/bench/peers/llm.c/train_gpt2cu ours theirs
  local val_flags=(-i "$AUSTEN_VAL" -j "$AUSTEN_VAL" -b 4 -t 1024 -v 1 -m 4)
  if [ $DRY -eq 0 ] && [ ! -x "$llmc" ]; then
    row "llm.c loads our v5 checkpoint" SKIP "no $llmc on this machine (bench_peers builds it; run it in the same call)"
    return
  fi
  x timeout "$(tlimit 120)" ./train_gpt2cu -e "$m" "${val_flags[@]}" -x 0 -s 0 >"$LOG/llmc_v5_ours.log" 2>&1
  x timeout "$(tlimit 120)" "$llmc" -e "$m" "${val_flags[@]}" -x 1 -s 0 >"$LOG/llmc_v5_llmc.log" 2>&1
  [ $DRY -eq 1 ] && return
  ours=$(sed -n 's/^step 0 | val loss \([0-9.]*\).*/\1/p' "$LOG/llmc_v5_ours.log" | head -n 1)
  theirs=$(sed -n 's/^val loss \([0-9.]*\).*/\1/p' "$LOG/llmc_v5_llmc.log" | head -n 1)
  if [ "$(od -An -t d4 -j 4 -N 4 "$m" 2>/dev/null | tr -d ' ')" = 5 ] && [ -n "$ours" ] && [ -n "$theirs" ] &&
     awk -v a="$ours" -v b="$theirs" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d / a < 0.02) }'; then
    row "llm.c loads our v5 checkpoint ($m)" PASS "val loss llm.c $theirs, ours $ours"
  else
    row "llm.c loads our v5 checkpoint ($m)" FAIL "version $(od -An -t d4 -j 4 -N 4 "$m" 2>/dev/null | tr -d ' '), val loss llm.c '$theirs' ours '$ours': $(first_error "$LOG/llmc_v5_llmc.log" 'error\|bad\|version')"
  fi
}

# ---------------------------------------------------------------------------------------------
# nccl: data parallelism's path through NCCL with one process (issue 32, dev/trainer/data_parallel.h; more
# than one GPU needs another machine): ./train_gpt2cu -pi fs -pn 1 against the same run without it,
# model and state bit for bit (the tiny fixture, BF16, 10 steps of two micro-batches; every
# collective runs, on a communicator of one); then d12, B 16, T 1024, 12 steps each way on random
# tokens: tokens/s side by side (the plain run takes no NCCL call at all, -pi fs adds the all-reduce
# of the gradients and the scalars' each step)

stage_nccl() {
  local f=dev/fixtures/standard_tiny_model.bin shard="$LOG/nccl_tokens_000.bin" big="$LOG/nccl_big_000.bin" rc1 rc2 t1 t2
  if [ $DRY -eq 0 ] && ! ldd ./train_gpt2cu 2>/dev/null | grep -q libnccl; then
    row "-pi fs -pn 1 through NCCL" FAIL "./train_gpt2cu is not linked with libnccl (make nccl_flags: '$(make -s nccl_flags)')"
    return
  fi
  x "$PYTHON" dev/test/tiny_shard.py "$shard" $((4 * 32 * 40 + 1)) 5
  x rm -rf "$LOG/nccl_plain" "$LOG/nccl_fs" "$LOG/nccl_rdv"
  x mkdir -p "$LOG/nccl_rdv"
  local common=(-e "$f" -i "$shard" -j "$shard" -b 4 -t 32 -d 256 -x 10 -l 1e-3 -s 0 -v 5 -m 2 -n 10)
  x timeout "$(tlimit 120)" ./train_gpt2cu "${common[@]}" -o "$LOG/nccl_plain" >"$LOG/nccl_plain.log" 2>&1
  rc1=$?
  x timeout "$(tlimit 120)" ./train_gpt2cu "${common[@]}" -pi fs -pf "$LOG/nccl_rdv" -o "$LOG/nccl_fs" >"$LOG/nccl_fs.log" 2>&1
  rc2=$?
  if [ $DRY -eq 0 ]; then
    if [ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && grep -q '^processes: 1 over NCCL' "$LOG/nccl_fs.log" &&
       cmp -s "$LOG/nccl_plain/model_00000010.bin" "$LOG/nccl_fs/model_00000010.bin" &&
       cmp -s "$LOG/nccl_plain/state_00000010.bin" "$LOG/nccl_fs/state_00000010.bin"; then
      row "-pi fs -pn 1 through NCCL (tiny, BF16, 10 steps)" PASS "model and state of step 10 bit for bit the run without it"
    else
      row "-pi fs -pn 1 through NCCL (tiny, BF16, 10 steps)" FAIL "exits $rc1/$rc2, files differ or missing: $(first_error "$LOG/nccl_fs.log")"
    fi
  fi
  x "$PYTHON" dev/test/tiny_shard.py "$big" $((16 * 1024 * 13 + 1)) 6
  local speed=(-e d12 -i "$big" -j "$big" -b 16 -t 1024 -d 16384 -x 12 -v 0 -s 0)
  x timeout "$(tlimit 180)" ./train_gpt2cu "${speed[@]}" >"$LOG/nccl_speed_plain.log" 2>&1
  rc1=$?
  x rm -rf "$LOG/nccl_rdv2"
  x mkdir -p "$LOG/nccl_rdv2"
  x timeout "$(tlimit 180)" ./train_gpt2cu "${speed[@]}" -pi fs -pf "$LOG/nccl_rdv2" >"$LOG/nccl_speed_fs.log" 2>&1
  rc2=$?
  [ $DRY -eq 1 ] && return
  t1=$(sed -n 's/^summary: .* | \([0-9]*\) tok\/s .*/\1/p' "$LOG/nccl_speed_plain.log")
  t2=$(sed -n 's/^summary: .* | \([0-9]*\) tok\/s .*/\1/p' "$LOG/nccl_speed_fs.log")
  if [ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && [ -n "$t1" ] && [ -n "$t2" ] && awk -v a="$t1" -v b="$t2" 'BEGIN { exit !(b >= 0.97 * a) }'; then
    row "d12 B 16 T 1024: plain vs -pi fs -pn 1" PASS "$t1 vs $t2 tok/s ($(awk -v a="$t1" -v b="$t2" 'BEGIN { printf "%.3f", b / a }')x)"
  else
    row "d12 B 16 T 1024: plain vs -pi fs -pn 1" FAIL "exits $rc1/$rc2, tok/s '$t1' vs '$t2' (expected within 3%): $(first_error "$LOG/nccl_speed_fs.log")"
  fi
}

# ---------------------------------------------------------------------------------------------
# ablate: `make ablate` of one config into build/gpu_suite/ablate_<config> (the checkpoints stay out of
# LOG_DIR), as many whole runs as fit the stage's time (ABLATE_TIME_LIMIT, less ABLATE_REPORT_S for the
# report). A finished run's small files (ABLATE_RUN_FILES: its logs, DONE, heads.csv) are kept in
# LOG_DIR/ablate_<config>, which travels to the next call, and --record-times copies them into
# dev/results/ablate/<config> (committed); both are put back into OUT before the runner starts, so that
# it skips those runs, on a fresh machine too, without their checkpoints. The stage is PART while runs
# are left (the next call trains them), PASS when every run is done.
stage_ablate() { # config
  local cfg=$1 out=build/gpu_suite/ablate_$1 keep=$LOG/ablate_$1 rc n_done n_all limit
  [ $DRY -eq 1 ] || mkdir -p "$out" "$keep"
  ablate_restore "$ABLATE_RESULTS/$cfg" "$out"
  ablate_restore "$keep" "$out"
  need_data dev/data/mix mix_train_000000.bin "make ablate CONFIG=dev/ablate/$cfg.txt" || return
  limit=$(($(tlimit 540) - ABLATE_REPORT_S))
  [ "$limit" -gt 0 ] || limit=1
  # the trainers for this GPU only, built at once (the runner builds those of the runs left)
  x env ABLATE_CUDA_ARCHS="-gencode arch=compute_$SM,code=sm_$SM" ABLATE_TIME_LIMIT="$limit" PYTHON="$PYTHON" \
    timeout "$(tlimit 540)" make ablate CONFIG="dev/ablate/$cfg.txt" OUT="$out" >"$LOG/${CUR_STAGE}.log" 2>&1
  rc=$?
  [ $DRY -eq 1 ] && return
  ablate_keep "$out" "$keep"
  # plan.tsv: "# key<TAB>value" lines, the header row (name ...), then one row per run and seed
  n_all=$(awk -F'\t' '!/^#/ && $1 != "name" && NF > 1' "$out/plan.tsv" 2>/dev/null | wc -l)
  n_done=$(find "$out" -name DONE -type f | wc -l)
  local what="make ablate CONFIG=dev/ablate/$cfg.txt"
  if [ $rc -eq 0 ] && [ "$n_all" -gt 0 ] && [ "$n_done" -eq "$n_all" ]; then
    row "$what" PASS "$(stage_secs) s, all $n_all runs done; table in ablate_$cfg/table.md"
    note <"$keep/table.md"
  elif [ $rc -eq 0 ] && [ "$n_all" -gt 0 ]; then
    STAGE_PARTIAL=1
    row "$what" PART "$(stage_secs) s, $n_done of $n_all runs done (the next call trains the rest: $(grep -c '^ablate: not started\|stopped at the time limit' "$LOG/${CUR_STAGE}.log") not started or stopped)"
    [ -f "$keep/table.md" ] && note <"$keep/table.md"
  else
    # the runner's error line, or else the log's last line (a traceback's, a report.py error)
    row "$what" FAIL "exit $rc, $n_done of ${n_all:-?} runs done: $({ grep -m1 '^ablate:.*\(error\|failed\|exited\|expected\|HINT\)' "$LOG/${CUR_STAGE}.log" ||
      tail -n 1 "$LOG/${CUR_STAGE}.log"; } | cut -c1-110)"
  fi
}
stage_ablate_shared_projections() { stage_ablate shared_projections; }
stage_ablate_wq_identity() { stage_ablate wq_identity; }
stage_ablate_residual_query() { stage_ablate residual_query; }

# ---------------------------------------------------------------------------------------------
# gen_bench: the KV-cache saving as speed (dev/bench/gen_bench.py), on build's trainers

stage_gen_bench() {
  local rc what="gen_bench.py (shared_projections' 8 runs x B 1, 16, 64, d12, context 1024)"
  x timeout "$(tlimit 300)" "$PYTHON" dev/bench/gen_bench.py --no-build --timeout 60 --out "$LOG/gen_bench" \
    >"$LOG/gen_bench.log" 2>&1
  rc=$?
  [ $DRY -eq 1 ] && return
  [ -f "$LOG/gen_bench/table.md" ] && note <"$LOG/gen_bench/table.md"
  if [ $rc -eq 0 ]; then row "$what" PASS "$(stage_secs) s | $(tail -n 1 "$LOG/gen_bench.log" | sed 's/^gen_bench: //; s/; results in .*//')"
  else row "$what" FAIL "exit $rc: $(grep -m1 'FAILED\|error' "$LOG/gen_bench.log" | cut -c1-110)"; fi
}

# ---------------------------------------------------------------------------------------------
# targets: checked from the stages' logs at the end of every call (no GPU)

target_ratio() { # what ours theirs unit source: PASS when ours >= theirs (higher is better)
  if [ -z "$2" ] || [ -z "$3" ]; then row "$1" FAIL "not measured in $5 (ours '${2}', peer '${3}'): see its log"; return; fi
  local r
  r=$(awk -v a="$2" -v b="$3" 'BEGIN { printf "%.2f", a / b }')
  if awk -v a="$2" -v b="$3" 'BEGIN { exit !(a >= b) }'; then row "$1" PASS "${r}x: ours $2, peer $3 $4"
  else row "$1" FAIL "${r}x: ours $2, peer $3 $4"; fi
}
# stage log-suffix sdpa-log label "T:hd ..." -> a target row per pass: the fastest of the attention lab's
# versions (the trainer runs version 3's forward and version 4's backward by default) against PyTorch SDPA
# at each shape (B 8, H 12), ms, lower is better
flash_vs_sdpa() {
  local st=$1 suffix=$2 sdpa="$LOG/lab/$3.log" label=$4 pass lab shape T hd a b detail ok
  for pass in forward backward; do
    lab="$LOG/lab/lab_attention_${pass}_$suffix.log"
    if [ ! -f "$LOG/$st.status" ]; then row "flash $pass >= PyTorch SDPA ($label)" SKIP "not yet measured (stage $st)"; continue; fi
    detail="" ok=1
    for shape in $5; do
      T=${shape%:*} hd=${shape#*:}
      a=$(sed -n "s/^bench v[0-9] $pass  *T=$T B=8 H=12 hd=$hd ms=\([0-9.]*\) .*/\1/p" "$lab" 2>/dev/null | sort -g | head -n 1)
      b=$(sed -n "s/^bench sdpa $pass  *T=$T B=8 H=12 hd=$hd ms=\([0-9.]*\) .*/\1/p" "$sdpa" 2>/dev/null | head -n 1)
      if [ -z "$a" ] || [ -z "$b" ]; then ok=0; detail="$detail; T=$T hd=$hd not measured (flash '$a', sdpa '$b')"; continue; fi
      awk -v a="$a" -v b="$b" 'BEGIN { exit !(a <= b) }' || ok=0
      detail="$detail; T=$T hd=$hd $a vs $b ms ($(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.2fx", b / a }'))"
    done
    if [ $ok -eq 1 ]; then row "flash $pass >= PyTorch SDPA ($label)" PASS "best version vs sdpa:${detail#;}"
    else row "flash $pass >= PyTorch SDPA ($label)" FAIL "best version vs sdpa:${detail#;}"; fi
  done
}
targets() {
  CUR_STAGE=targets ROWS_FILE="$LOG/targets.rows.tmp"
  : >"$ROWS_FILE"
  # 1. ours vs the peers, tokens/s at d12 (bench.sh part 1)
  local res="$LOG/bench_peers/results.tsv" ours llmc torch
  if [ ! -f "$LOG/bench_peers.status" ]; then
    row "ours >= llm.c (tok/s, d12)" SKIP "not yet measured (stage bench_peers)"
    row "ours >= PyTorch compile (tok/s, d12)" SKIP "not yet measured (stage bench_peers)"
  else
    ours=$(awk -F'\t' '$1 == "ours" && $2 == "standard" && $3 == "d12" { print $8 }' "$res" 2>/dev/null | head -n 1)
    llmc=$(awk -F'\t' '$1 == "llmc" && $3 == "d12" { print $8 }' "$res" 2>/dev/null | head -n 1)
    torch=$(awk -F'\t' '$1 == "pytorch" && $3 == "d12" { print $8 }' "$res" 2>/dev/null | head -n 1)
    target_ratio "ours >= llm.c (tok/s, d12)" "$ours" "$llmc" "tok/s" "bench_peers"
    target_ratio "ours >= PyTorch compile (tok/s, d12)" "$ours" "$torch" "tok/s" "bench_peers"
  fi
  # 2. flash attention vs PyTorch SDPA (its own backend choice), every lab bench shape: ms, lower is better
  local a b detail
  flash_vs_sdpa lab_bench bench sdpa_bench "B 8, H 12, hd 64" "1024:64 2048:64 4096:64"
  # issue 59's bar: at every T from 1024 to 16384, head sizes 64 and 128
  flash_vs_sdpa lab_bench_long bench_long sdpa_bench_long "issue 59: T 1024-16384, hd 64 and 128" \
    "1024:64 2048:64 4096:64 8192:64 16384:64 1024:128 2048:128 4096:128 8192:128 16384:128"
  # issue 58's bar for the training step: the fastest forward and backward (delta kernel included) at
  # d12's micro-step (B 64, T 1024), times 12 layers, at most 60% of the flash rows the H200 measured in
  # the trainer at c32bccf (33.2 ms of a 121.95 ms micro-step): 19.92 ms
  if [ -f "$LOG/lab_bench.status" ]; then
    local fwd bwd
    fwd=$(sed -n "s/^bench \(v[0-9]\) forward  *T=1024 B=64 .* ms=\([0-9.]*\) .*/\2 \1/p" "$LOG/lab/lab_attention_forward_bench.log" 2>/dev/null | sort -g | head -n 1)
    bwd=$(sed -n "s/^bench \(v[0-9]\) backward  *T=1024 B=64 .* ms=\([0-9.]*\) .*/\2 \1/p" "$LOG/lab/lab_attention_backward_bench.log" 2>/dev/null | sort -g | head -n 1)
    if [ -z "$fwd" ] || [ -z "$bwd" ]; then
      row "flash rows of a d12 step <= 60% (19.92 ms)" FAIL "not measured at B 64, T 1024 (forward '$fwd', backward '$bwd')"
    else
      a=$(awk -v f="${fwd%% *}" -v b="${bwd%% *}" 'BEGIN { printf "%.2f", 12 * (f + b) }')
      detail="12 x (forward ${fwd#* } ${fwd%% *} + backward ${bwd#* } ${bwd%% *} ms) = $a ms, $(awk -v a="$a" 'BEGIN { printf "%.0f%%", 100 * a / 33.2 }') of 33.2"
      if awk -v a="$a" 'BEGIN { exit !(a <= 19.92) }'; then row "flash rows of a d12 step <= 60% (19.92 ms)" PASS "$detail"
      else row "flash rows of a d12 step <= 60% (19.92 ms)" FAIL "$detail"; fi
    fi
  else
    row "flash rows of a d12 step <= 60% (19.92 ms)" SKIP "not yet measured (stage lab_bench)"
  fi
  # 3. the profiled standard run's peak memory against build/params memory at the same shape
  local plog="$LOG/profile/profile_standard.log" peak pred
  if [ ! -f "$LOG/profile.status" ]; then
    row "peak memory within 5% of params memory" SKIP "not yet measured (stage profile)"
  else
    peak=$(sed -n 's/^summary: .*peak memory \([0-9.]*\) MiB.*/\1/p' "$plog" 2>/dev/null | head -n 1)
    x ./build/params memory d12 1024 64 >"$LOG/params_memory_d12.txt" 2>&1
    pred=$(awk '$1 == "total" { print $4; exit }' "$LOG/params_memory_d12.txt" 2>/dev/null)
    if [ -z "$peak" ] || [ -z "$pred" ]; then
      row "peak memory within 5% of params memory" FAIL "measured '$peak' MiB (profile/profile_standard.log), predicted '$pred' MiB (build/params memory d12 1024 64)"
    elif awk -v a="$peak" -v b="$pred" 'BEGIN { d = (a - b) / b; if (d < 0) d = -d; exit !(d <= 0.05) }'; then
      row "peak memory within 5% of params memory" PASS "$peak MiB measured vs $pred MiB predicted ($(awk -v a="$peak" -v b="$pred" 'BEGIN { printf "%+.1f%%", 100 * (a - b) / b }'); d12, B 64, T 1024, BF16)"
    else
      row "peak memory within 5% of params memory" FAIL "$peak MiB measured vs $pred MiB predicted ($(awk -v a="$peak" -v b="$pred" 'BEGIN { printf "%+.1f%%", 100 * (a - b) / b }'); d12, B 64, T 1024, BF16)"
    fi
  fi
  mv "$ROWS_FILE" "$LOG/targets.rows"
}

# ---------------------------------------------------------------------------------------------
# the stages, in order, resumable

stage_secs() { echo $(($(now) - STAGE_T0)); }
RAN=() SKIPPED=() NOT_STARTED=() CALL_FAILS=0 DRY_USED=0
T_CALL0=$(now)
run_stage() { # stage [reason it runs although LOG_DIR says it passed]
  local st=$1 why=${2:-} status secs expected left
  if [ -z "$why" ] && [ $FORCE -eq 0 ] && [ -f "$LOG/$st.status" ]; then
    IFS=$'\t' read -r status secs _ <"$LOG/$st.status"
    local gone=0
    if [ "$st" = build ]; then build_outputs_ok || gone=1; fi
    if [ "$st" = fixtures ]; then fixtures_ok || gone=1; fi
    if [ "$status" = PASS ] && [ $gone -eq 1 ]; then
      why="passed in an earlier call, but its outputs are not on this machine"
    elif [ "$status" = PASS ]; then
      echo "=== $st: passed in an earlier call ($secs s; $(cut -f3,4 "$LOG/$st.status" | tr '\t' ' ')), skipping"
      SKIPPED+=("$st")
      return
    fi
  fi
  local prior_secs=""
  [ -f "$LOG/$st.status" ] && prior_secs=$(cut -f2 "$LOG/$st.status")
  [[ $prior_secs =~ ^[0-9]+$ ]] || prior_secs=""
  STAGE_RESUMED=0
  expected=$(expected_s "$st")
  STAGE_T0=$(now)
  STAGE_DEADLINE=$((STAGE_T0 + CAP[$st]))
  if [ -n "$TIME_LIMIT" ]; then
    # a dry run keeps a clock of its own: the expected times of the stages it printed
    if [ $DRY -eq 1 ]; then left=$((TIME_LIMIT - DRY_USED)); else left=$((T_CALL0 + TIME_LIMIT - STAGE_T0)); fi
    local needed=$expected
    case "$RESUMABLE" in *" $st "*) [ "$needed" -gt 120 ] && needed=120;; esac
    if [ "$needed" -gt "$left" ]; then
      echo "=== $st: not started: expected $expected s, $left s left of --time-limit $TIME_LIMIT (the next call runs it)"
      NOT_STARTED+=("$st")
      return
    fi
    [ $((STAGE_T0 + left)) -lt $STAGE_DEADLINE ] && STAGE_DEADLINE=$((STAGE_T0 + left))
  fi
  echo
  echo "=== $st${why:+ ($why)} ($(date -u +%H:%M:%S); timeout $((STAGE_DEADLINE - STAGE_T0)) s, expected ~$expected s)"
  CUR_STAGE=$st STAGE_FAILS=0 STAGE_PARTIAL=0
  [ $DRY -eq 1 ] || rm -f "$LOG/$st.unchanged" "$LOG/$st.digest"
  if [ $DRY -eq 1 ]; then ROWS_FILE=/dev/null; else ROWS_FILE="$LOG/$st.rows.tmp"; : >"$ROWS_FILE"; fi
  "stage_$st"
  RAN+=("$st")
  DRY_USED=$((DRY_USED + expected))
  [ $DRY -eq 1 ] && return
  [ "$(now)" -ge "$STAGE_DEADLINE" ] && row "stage $st" FAIL "stopped at its time limit ($((STAGE_DEADLINE - STAGE_T0)) s): run it again"
  mv "$ROWS_FILE" "$LOG/$st.rows"
  if [ $STAGE_FAILS -gt 0 ]; then status=FAIL; CALL_FAILS=$((CALL_FAILS + 1))
  elif [ "$STAGE_PARTIAL" = 1 ]; then status=PART # a resumable stage with work left for the next call
  else status=PASS; fi
  # what it passed on, for --record-times: the next session skips it while its inputs stay the same
  case "$ABLATE_STAGES" in *" $st "*) ;; *)
    [ $status = PASS ] && printf '%s\t%s\t%s\n' "$(stage_digest "$st")" "$SUITE_COMMIT" "$NVCC_VERSION" >"$LOG/$st.digest";;
  esac
  # a sanitizer stage that kept runs passed in earlier calls took those calls' time too: the
  # status holds the sum, so that --record-times gets the whole stage's time
  local secs_now total
  secs_now=$(stage_secs); total=$secs_now
  [ "${STAGE_RESUMED:-0}" -gt 0 ] && [ "${prior_secs:-}" != "" ] && total=$((total + prior_secs))
  printf "%s\t%s\t%s\t%s\n" "$status" "$total" "$(date -u '+%Y-%m-%d %H:%M UTC')" "$GPU_NAME" >"$LOG/$st.status"
  echo "=== $st: $status in $secs_now s$([ "$total" != "$secs_now" ] && echo " ($total s with the earlier calls' runs)")"
}

passed_before() { # stage: LOG_DIR records it as passed (and --force is not given)
  [ $FORCE -eq 0 ] && [ -f "$LOG/$1.status" ] && [ "$(cut -f1 "$LOG/$1.status")" = PASS ]
}
if [ "$INPUTS" = plan ]; then plan "$PLAN_BUDGET"; exit 0; fi
if [ "$INPUTS" = 1 ]; then # --inputs: each stage's input files and digest, nothing run
  for st in $STAGES; do
    d=$(stage_digest "$st")
    echo "=== $st: $(wc -l <"$LOG/$st.inputs") input files, digest $d (GPU '$GPU_NAME')"
    sed 's/^/  /' "$LOG/$st.inputs"
  done
  exit 0
fi
# llm.c's build (about 2 min with cuDNN, one nvcc after another) runs in the background from the
# call's start, beside the stages before bench_peers; bench_peers and train wait for it
LLMC_BUILD_PID=""
for st in $STAGES; do
  case $st in bench_peers|train) passed_before "$st" || { LLMC_WANTED=1; break; };; esac
done
if [ "${LLMC_WANTED:-0}" = 1 ] && [ -f dev/bench/peers/llm.c/train_gpt2.cu ]; then
  mkdir -p "$LOG/bench_peers"
  if [ $DRY -eq 1 ]; then
    x env BENCH_LOG_DIR="$LOG/bench_peers" PYTHON="$PYTHON" bash dev/bench/bench.sh --build-llmc
  else
    # its exit status goes to a file: a pool's `wait -n` may reap the job first, and a later `wait PID`
    # then says 127 (it did on the 2026-11-26 H200, after a good build)
    rm -f "$LOG/bench_peers/llmc_background_build.rc"
    { BENCH_LOG_DIR="$LOG/bench_peers" PYTHON="$PYTHON" timeout 600 bash dev/bench/bench.sh --build-llmc \
        >"$LOG/bench_peers/llmc_background_build.log" 2>&1
      echo $? >"$LOG/bench_peers/llmc_background_build.rc"; } &
    LLMC_BUILD_PID=$!
  fi
fi
wait_llmc_build() {
  [ -n "$LLMC_BUILD_PID" ] || return 0
  echo "(waiting for llm.c's background build: $(date -u +%H:%M:%S))"
  wait "$LLMC_BUILD_PID" 2>/dev/null
  echo "(llm.c's background build: exit $(cat "$LOG/bench_peers/llmc_background_build.rc" 2>/dev/null || echo unknown), $(tail -n 1 "$LOG/bench_peers/llmc_background_build.log" 2>/dev/null))"
  LLMC_BUILD_PID=""
}
for st in $STAGES; do
  if passed_before "$st" && [ "$st" != build ] && [ "$st" != fixtures ]; then run_stage "$st"; continue; fi
  passed_before "$st" || ! unchanged_since_pass "$st" || continue
  # a fresh machine has neither the binaries nor the fixtures, whatever LOG_DIR says; build and fixtures
  # run (once) before the first stage that needs them, also where they were skipped as unchanged
  case "$NEEDS_BUILD" in *" $st "*)
    if ! build_outputs_ok && [ "${BUILT:-0}" = 0 ]; then BUILT=1; run_stage build "its binaries are not on this machine"; fi;;
  esac
  case "$NEEDS_FIXTURES" in *" $st "*)
    if ! fixtures_ok && [ "${FIXED:-0}" = 0 ]; then FIXED=1; run_stage fixtures "the fixtures are not on this machine"; fi;;
  esac
  [ "$st" = build ] && BUILT=1
  [ "$st" = fixtures ] && FIXED=1
  run_stage "$st"
done

echo
echo "=== targets (from the logs; no GPU)"
if [ $DRY -eq 1 ]; then
  ROWS_FILE=/dev/null CUR_STAGE=targets
  x ./build/params memory d12 1024 64
else
  targets
  grep -q ' FAIL ' "$LOG/targets.rows" && CALL_FAILS=$((CALL_FAILS + 1))
fi
# the summary: every stage's rows, this call's and those kept from earlier calls, then the targets
echo
summary_file="$LOG/summary.txt"
[ $DRY -eq 1 ] && summary_file=/dev/null
{
  echo "=== summary ($GPU_NAME; LOG_DIR $LOG; this call: ${RAN[*]:-nothing}${SKIPPED[*]:+; passed earlier: ${SKIPPED[*]}}${NOT_STARTED[*]:+; not started (time): ${NOT_STARTED[*]}})"
  for st in $STAGES_ALL; do [ -f "$LOG/$st.rows" ] && cat "$LOG/$st.rows"; done
  [ -f "$LOG/targets.rows" ] && cat "$LOG/targets.rows"
  pending=""
  for st in $STAGES_ALL; do
    { [ -f "$LOG/$st.status" ] && [ "$(cut -f1 "$LOG/$st.status")" = PASS ]; } || [ -f "$LOG/$st.unchanged" ] || pending="$pending $st"
  done
  echo "not passed yet:${pending:- none}"
} | tee "$summary_file"
if [ $DRY -eq 1 ]; then
  if [ $DRY_ERRORS -gt 0 ]; then echo "gpu_suite --dry-run: $DRY_ERRORS inconsistencies (above)"; exit 1; fi
  echo "gpu_suite --dry-run: ${#RAN[@]} stages printed (${RAN[*]:-none}), consistent: every script and config present, every timeout <= $MAX_CALL_S s"
  exit 0
fi
exit $((CALL_FAILS > 0))
