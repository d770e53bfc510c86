#!/usr/bin/env bash
# The GPU session's tools, checked without a GPU (suite gpu_suite of `make test`, ~30 s):
#   dev/test/gpu_suite.sh --dry-run: every stage's commands printed, nothing run, consistent (every
#     script and config there, every timeout <= 540 s); resume (a passed stage skipped, its rows
#     kept in the summary), --time-limit (a stage that no longer fits is not started), a bad stage;
#   --plan: every stage in exactly one call, each call <= 540 s of stages, the first fits 900 s;
#     --record-times makes the plan's times "measured";
#   dev/tools/sass_facts.py on a synthetic cuobjdump -sass dump (dev/test/samples/sass_flash.txt);
#   dev/tools/ncu_table.py on a synthetic ncu CSV (dev/test/samples/ncu_step.csv: quoted long
#     format, ==PROF== lines, thousands separators, scaled units) and its wide form;
#   dev/test/initcheck_filter.py on a synthetic initcheck log (dev/test/samples/initcheck.log,
#     .regions): it drops exactly the 4 reads inside cuBLASLt's outputs and keeps the 4 others;
#   dev/test/initcheck_lt_regions.c (the LD_PRELOAD shim) built and called through cuBLASLt's own
#     descriptors, where the CUDA headers and libcublasLt are (no GPU needed);
#   the targets stage on fake lab bench logs: the flash versions against SDPA (B 8) and the d12 step's
#     flash rows from the B 64 lines;
#   ABLATE_RUNS of dev/ablate/ablate.sh and BENCH_*_ONLY of dev/bench/bench.sh (shared_projections in parts);
#   the racecheck stage run for real on a fake GPU (fake nvidia-smi, binaries, fixtures and
#     compute-sanitizer): a run killed beside others is tried again alone; the next call keeps the
#     passed runs and its status adds the earlier call's seconds;
#   end_tree_with_me (dev/test/jobs.sh): SIGTERM, SIGHUP or SIGKILL to a script alone leaves nothing
#     it started running (the suite's background builds, the benchmark's peers).
# One PASS/FAIL line per check.
#
#   bash dev/test/test_gpu_suite.sh
set -u
cd "$(dirname "$0")/../.."
failed=0
pass() { echo "PASS gpu_suite $*"; }
fail() { echo "FAIL gpu_suite $*"; failed=1; }
skip() { echo "SKIP gpu_suite $*"; }
tmp=$(mktemp -d /tmp/test_gpu_suite.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
start=$SECONDS
suite=dev/test/gpu_suite.sh
records_before=$(find dev/results -type f | sort | xargs md5sum) # the suite's --record-times must write elsewhere
STAGES=$(bash $suite --dry-run "$tmp/list" no_such_stage 2>&1 | sed -n 's/.*expected one of: //p') # the suite's own list
[ "$(echo "$STAGES" | wc -w)" -ge 10 ] || fail "stage list: could not read STAGES_ALL from $suite (got '$STAGES')"

# ---------------------------------------------------------------- syntax
for f in $suite dev/test/test_cuda.sh dev/bench/bench.sh dev/ablate/ablate.sh dev/test/torch_python.sh \
         dev/test/sanitizer_runs.sh dev/test/gpu_sanitize_recheck.sh dev/test/gpu_followup.sh dev/test/jobs.sh; do
  if out=$(bash -n "$f" 2>&1); then pass "syntax $f"; else fail "syntax $f: $out"; fi
done

# ---------------------------------------------------------------- the dry run
bash $suite --dry-run "$tmp/dry" >"$tmp/dry.txt" 2>&1
rc=$?
missing=""
for st in $STAGES; do grep -q "^=== $st " "$tmp/dry.txt" || missing="$missing $st"; done
over=$(grep -o 'timeout [0-9]*' "$tmp/dry.txt" | awk '$2 > 540' | head -n 3 | tr '\n' ' ')
n_cmd=$(grep -c '^  + ' "$tmp/dry.txt")
if [ $rc -eq 0 ] && [ -z "$missing" ] && [ -z "$over" ] && grep -q '^gpu_suite --dry-run: .* consistent' "$tmp/dry.txt" &&
   [ "$n_cmd" -gt 100 ] && ! ls "$tmp/dry"/*.status >/dev/null 2>&1; then
  pass "dry_run: exit 0, all $(echo $STAGES | wc -w) stages, $n_cmd commands printed, every timeout <= 540 s, no status written"
else
  fail "dry_run: exit $rc, stages missing:${missing:- none}, timeouts over 540: ${over:-none}, $n_cmd commands: $(grep -m1 'dry-run:' "$tmp/dry.txt")"
fi
# every stage prints at least one command
empty=$(awk '/^=== / { if (st != "" && n == 0) print st; st = $2; n = 0 } /^  \+ / { n++ } END { if (st != "" && n == 0) print st }' "$tmp/dry.txt" |
        grep -v '^targets$\|^summary$' | tr '\n' ' ')
if [ -z "$empty" ]; then pass "dry_run_commands: every stage prints its commands"; else fail "dry_run_commands: no command printed for: $empty"; fi

# resume: a stage recorded as passed is skipped and its rows still summarised
mkdir -p "$tmp/resume"
printf 'PASS\t31\t2026-11-30 10:00 UTC\tNVIDIA H100 80GB HBM3\n' >"$tmp/resume/tests_fp32.status"
echo "tests_fp32         fp32 standard (a row kept from an earlier call)  PASS  11 fixtures" >"$tmp/resume/tests_fp32.rows"
printf 'FAIL\t12\t2026-11-30 10:01 UTC\tNVIDIA H100 80GB HBM3\n' >"$tmp/resume/tests_bf16.status"
bash $suite --dry-run "$tmp/resume" tests_fp32 tests_bf16 >"$tmp/resume.txt" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -q '^=== tests_fp32: passed in an earlier call (31 s' "$tmp/resume.txt" &&
   grep -q '^=== tests_bf16 ' "$tmp/resume.txt" && grep -q 'CUDA_TEST_PRECISIONS=BF16' "$tmp/resume.txt" &&
   ! grep -q 'CUDA_TEST_PRECISIONS=FP32' "$tmp/resume.txt" &&
   grep -q 'a row kept from an earlier call' "$tmp/resume.txt"; then
  pass "resume: a passed stage skipped (its rows in the summary), a failed one run again"
else
  fail "resume: exit $rc: $(grep -m3 '^===' "$tmp/resume.txt" | tr '\n' '|')"
fi
bash $suite --dry-run --force "$tmp/resume" tests_fp32 >"$tmp/force.txt" 2>&1
if grep -q 'CUDA_TEST_PRECISIONS=FP32' "$tmp/force.txt"; then pass "force: --force runs a passed stage again"
else fail "force: $(grep -m2 '^===' "$tmp/force.txt" | tr '\n' '|')"; fi

# --time-limit: with 100 s, a stage expected to take longer is not started
bash $suite --dry-run --time-limit 100 "$tmp/limit" tests_bf16 bench_peers >"$tmp/limit.txt" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -q '^=== bench_peers: not started: expected [0-9]* s, [0-9]* s left of --time-limit 100' "$tmp/limit.txt"; then
  pass "time_limit: bench_peers not started within --time-limit 100"
else
  fail "time_limit: exit $rc: $(grep -m3 '^===' "$tmp/limit.txt" | tr '\n' '|')"
fi
out=$(bash $suite --dry-run "$tmp/bad" no_such_stage 2>&1)
if [ $? -eq 1 ] && echo "$out" | grep -q "stage 'no_such_stage': expected one of: build"; then pass "bad_stage: refused with the list"
else fail "bad_stage: $out"; fi

# ---------------------------------------------------------------- the plan
bash $suite --plan >"$tmp/plan.txt" 2>&1
rc=$?
plan_check=$(awk -v stages="$STAGES" '
  /^call +session/ { table = 1; next }
  table && /^[0-9]+ / { n++; if ($3 > 540 && $0 !~ /fresh machine/) bad = bad " call " $1 " " $3 " s"; if ($3 > 540 + 200) bad = bad " call " $1 " " $3 " s";
                        for (i = 5; i <= NF && $i !~ /^\(/; i++) seen[$i]++;
                        if ($1 == 1) { split($4, d, "/"); if (d[1] > d[2]) bad = bad " call 1 over budget" } next }
  table { table = 0 }
  END { m = split(stages, s, " "); for (i = 1; i <= m; i++) if (s[i] ~ /^ablate_/ ? seen[s[i]] < 1 : seen[s[i]] != 1) bad = bad " " s[i] " in " seen[s[i]] + 0 " calls";
        if (n == 0) bad = bad " no call"; print bad }' "$tmp/plan.txt")
if [ $rc -eq 0 ] && [ -z "$plan_check" ] && grep -q '^the first session (900 s) holds call' "$tmp/plan.txt" &&
   [ "$(grep -c 'command: set -o pipefail; export RECORD_COMMIT=.* dev/test/gpu_suite.sh --time-limit 540 build/gpu_log ' "$tmp/plan.txt")" -eq \
     "$(grep -c '^call [0-9]* (' "$tmp/plan.txt")" ]; then
  pass "plan: every stage in one call (an ablation in as many as its runs left take), calls <= 540 s of stages, call 1 within 900 s ($(grep '^the first session' "$tmp/plan.txt"))"
else
  fail "plan: exit $rc:${plan_check:- no session line or a call without its command}"
fi
bash $suite --plan 3000 >"$tmp/plan3000.txt" 2>&1
if [ "$(awk '/^[0-9]+ +1 /' "$tmp/plan3000.txt" | wc -l)" -gt "$(awk '/^[0-9]+ +1 /' "$tmp/plan.txt" | wc -l)" ]; then
  pass "plan_budget: a 3000-s budget holds more calls in its first session"
else
  fail "plan_budget: --plan 3000 holds no more calls than 900 in session 1"
fi
# --record-times: a passed stage's time becomes "measured", a failed one is not recorded
mkdir -p "$tmp/rec"
cp dev/results/stage_times.tsv "$tmp/times.tsv"
printf 'PASS\t77\t2026-11-30 10:00 UTC\tNVIDIA H100 80GB HBM3\n' >"$tmp/rec/build.status"
printf 'FAIL\t5\t2026-11-30 10:01 UTC\tNVIDIA H100 80GB HBM3\n' >"$tmp/rec/fixtures.status"
GPU_SUITE_TIMES="$tmp/times.tsv" GPU_SUITE_PASSES="$tmp/rec_passes.tsv" GPU_SUITE_ABLATE_RESULTS="$tmp/rec_ablate" \
  bash $suite --record-times "$tmp/rec" >"$tmp/rec.txt" 2>&1
GPU_SUITE_TIMES="$tmp/times.tsv" bash $suite --plan >"$tmp/plan_rec.txt" 2>&1
if grep -q '^    build  *77 s  measured 2026-11-30 NVIDIA H100 80GB HBM3' "$tmp/plan_rec.txt" &&
   grep '^    fixtures  *[0-9]* s ' "$tmp/plan_rec.txt" | grep -qv '2026-11-30' && grep -q 'fixtures: FAIL, not recorded' "$tmp/rec.txt"; then
  pass "record_times: a passed stage's 77 s measured in the plan, a failed stage's time not taken"
else
  fail "record_times: $(grep -m2 '^    build\|^    fixtures' "$tmp/plan_rec.txt" | tr '\n' '|') $(head -c 200 "$tmp/rec.txt")"
fi

samples=dev/test/samples
# ---------------------------------------------------------------- sass_facts.py
# a synthetic cuobjdump -sass dump (dev/test/samples/sass_flash.txt): the delta kernel (no mma) not
# matched; flash4's dQ kernel with a spill (STL, a predicated LDL) reported; the flash5 kernels checked
flash_re='flash\w*_attention_(forward|backward)'
python3 dev/tools/sass_facts.py $samples/sass_flash.txt --match "$flash_re" --strict flash5 >"$tmp/sass_ok.txt" 2>&1
rc_ok=$?
python3 dev/tools/sass_facts.py $samples/sass_flash.txt --match "$flash_re" >"$tmp/sass_bad.txt" 2>&1
rc_bad=$?
python3 dev/tools/sass_facts.py $samples/sass_flash.txt --match no_such_kernel >"$tmp/sass_none.txt" 2>&1
rc_none=$?
if [ $rc_ok -eq 0 ] && grep -q '^flash5_attention_forward_kernel<64> *HMMA 3 HGMMA 0 LDL 0 STL 0  ok$' "$tmp/sass_ok.txt" &&
   grep -q '^flash4_attention_backward_dq_kernel<64> *HMMA 2 HGMMA 0 LDL 1 STL 1$' "$tmp/sass_ok.txt" &&
   ! grep -q delta "$tmp/sass_ok.txt" && [ $rc_bad -eq 1 ] && grep -q 'local memory: flash4_attention_backward_dq_kernel<64>$' "$tmp/sass_bad.txt" &&
   [ $rc_none -eq 2 ] && grep -q 'HINT' "$tmp/sass_none.txt"; then
  pass "sass_facts: HMMA and LDL/STL counted per kernel (predicated too), the --strict kernels judged (exit 0, 1), no match an error (2)"
else
  fail "sass_facts: exits $rc_ok/$rc_bad/$rc_none: $(cat "$tmp/sass_ok.txt" "$tmp/sass_bad.txt" "$tmp/sass_none.txt" | head -c 700 | tr '\n' '|')"
fi

# ---------------------------------------------------------------- ncu_table.py
python3 dev/tools/ncu_table.py $samples/ncu_step.csv --predicted $samples/params_profile.csv --source train_gpt2.cu \
  --format tsv >"$tmp/ncu.tsv" 2>&1
rc=$?
want_gemm=$'1\tsm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas\t2\t1.000\t58.1\t168\t208.5k\t12.0\t85.0\t20.0\t-\t-'
want_ln=$'4\tresidual_layernorm_forward_kernel\t2\t0.100\t5.8\t40-48\t1.0k\t50.0\t30.0\t80.0\t0.070\t1.43'
want_perm=$'7\tpermute_heads_kernel\t1\t0.010\t0.6\t20\t0\t90.0\t10.0\t50.0\t-\t-'
want_group=$'matmuls\t2\t1.200\t0.800\t1.50\tqkv_fwd+attproj_fwd+classifier'
if [ $rc -eq 0 ] && grep -qxF "$want_gemm" "$tmp/ncu.tsv" && grep -qxF "$want_ln" "$tmp/ncu.tsv" &&
   grep -qxF "$want_perm" "$tmp/ncu.tsv" && grep -qxF "$want_group" "$tmp/ncu.tsv" && [ "$(grep -c . "$tmp/ncu.tsv")" -eq 14 ]; then
  pass "ncu_table: the long format (quoted, ==PROF== lines, 12,345 nsecond, usecond, Kbyte/block): 7 kernels, a GEMM's 2 calls, the layernorm group vs 3 rows, no prediction for permute_heads_kernel"
else
  fail "ncu_table: exit $rc: $(head -c 600 "$tmp/ncu.tsv" | tr '\n\t' '| ')"
fi
# the same capture in ncu's wide form (--page raw: a column per metric, a units row) gives the same table
python3 - $samples/ncu_step.csv "$tmp/wide.csv" <<'EOF'
import csv, sys
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
h = rows[0]; col = {n: i for i, n in enumerate(h)}
# one unit per column in the wide form: times in nsecond, sizes in byte/block (the sample mixes units)
to_base = {"nsecond": ("nsecond", 1), "usecond": ("nsecond", 1e3), "msecond": ("nsecond", 1e6),
           "byte/block": ("byte/block", 1), "Kbyte/block": ("byte/block", 1e3)}
launches, metrics, units = {}, [], {}
for r in rows[1:]:
    unit, value = r[col["Metric Unit"]], float(r[col["Metric Value"]].replace(",", ""))
    unit, scale = to_base.get(unit, (unit, 1))
    lid = r[col["ID"]]
    launches.setdefault(lid, {"Kernel Name": r[col["Kernel Name"]]})[r[col["Metric Name"]]] = "%.6g" % (value * scale)
    if r[col["Metric Name"]] not in metrics: metrics.append(r[col["Metric Name"]])
    units[r[col["Metric Name"]]] = unit
with open(sys.argv[2], "w", newline="") as f:
    w = csv.writer(f, quoting=csv.QUOTE_ALL)
    w.writerow(["ID", "Process ID", "Kernel Name"] + metrics)
    w.writerow(["", "", ""] + [units[m] for m in metrics])
    for lid, d in launches.items():
        w.writerow([lid, "4242", d["Kernel Name"]] + [d[m] for m in metrics])
EOF
python3 dev/tools/ncu_table.py "$tmp/wide.csv" --predicted $samples/params_profile.csv --source train_gpt2.cu --format tsv >"$tmp/ncu_wide.tsv" 2>&1
if cmp -s "$tmp/ncu.tsv" "$tmp/ncu_wide.tsv"; then pass "ncu_table_wide: the wide (--page raw) form gives the same table"
else fail "ncu_table_wide: differs: $(diff "$tmp/ncu.tsv" "$tmp/ncu_wide.tsv" | head -n 4 | tr '\n' '|')"; fi
python3 dev/tools/ncu_table.py $samples/ncu_step.csv --predicted $samples/params_profile.csv --source train_gpt2.cu \
  --format markdown >"$tmp/ncu.md" 2>&1
if [ $? -eq 0 ] && grep -q '^| 1 | sm90_xmma_gemm' "$tmp/ncu.md" && grep -q 'predicted rows with no kernel in the capture: zero_grad' "$tmp/ncu.md"; then
  pass "ncu_table_markdown: the table for dev/results, the rows with no kernel named"
else
  fail "ncu_table_markdown: $(head -c 300 "$tmp/ncu.md")"
fi
echo '"ID","Kernel Name"' >"$tmp/empty.csv"
if ! python3 dev/tools/ncu_table.py "$tmp/empty.csv" >/dev/null 2>"$tmp/empty.err" && grep -q 'no kernel rows' "$tmp/empty.err"; then
  pass "ncu_table_empty: a capture without kernels is an error, not an empty table"
else
  fail "ncu_table_empty: $(cat "$tmp/empty.err")"
fi

# ---------------------------------------------------------------- initcheck_filter.py
filter=dev/test/initcheck_filter.py
python3 $filter $samples/initcheck.log --regions $samples/initcheck.regions >"$tmp/filter.txt" 2>&1
rc=$?
kept=$(grep -A3 '^  kept:' "$tmp/filter.txt" | sed -n 's/.*Address \(0x[0-9a-f]*\)/\1/p; s/.*kept: Host API.*/host/p' | tr '\n' ' ')
if [ $rc -eq 1 ] && grep -q '^initcheck_filter: 8 reports (ERROR SUMMARY 8): 4 dropped (reads of cuBLASLt outputs), 4 kept; 3 cuBLASLt output regions' "$tmp/filter.txt" &&
   [ "$kept" = "0x7f000000bff8 0x7f00002002dc 0x7f0000500000 host " ] &&
   grep -q 'dropped        1  gelu_backward_kernel reading cuBLASLt.s GELU aux output' "$tmp/filter.txt"; then
  pass "initcheck_filter: drops the 4 reads inside cuBLASLt's outputs (D, GELU aux, a strided batch), keeps a read across a region's end, one in a column's padding, one outside, a host report; exit 1"
else
  fail "initcheck_filter: exit $rc, kept '$kept': $(head -n 3 "$tmp/filter.txt" | tr '\n' '|')"
fi
# only reports inside the regions: exit 0 (the sample's first and fourth reports)
{ sed -n '1,7p;18,23p' $samples/initcheck.log; echo "========= ERROR SUMMARY: 2 errors"; } >"$tmp/drop_only.log"
python3 $filter "$tmp/drop_only.log" --regions $samples/initcheck.regions >"$tmp/filter0.txt" 2>&1
rc0=$?
sed 's/ERROR SUMMARY: 2 errors/ERROR SUMMARY: 9 errors/' "$tmp/drop_only.log" >"$tmp/unprinted.log"
python3 $filter "$tmp/unprinted.log" --regions $samples/initcheck.regions >"$tmp/filter9.txt" 2>&1
rc9=$?
python3 $filter "$tmp/drop_only.log" --regions "$tmp/no_such.regions" >"$tmp/filter_noreg.txt" 2>&1
rcn=$?
if [ $rc0 -eq 0 ] && grep -q '2 reports (ERROR SUMMARY 2): 2 dropped.*, 0 kept' "$tmp/filter0.txt" &&
   [ $rc9 -eq 1 ] && grep -q 'the summary counts 9 errors but 2 reports were printed' "$tmp/filter9.txt" &&
   [ $rcn -eq 1 ] && grep -q 'no region recorded' "$tmp/filter_noreg.txt"; then
  pass "initcheck_filter_exit: 0 when every report is a read of cuBLASLt's outputs; 1 when the summary counts unprinted reports, or no region was recorded"
else
  fail "initcheck_filter_exit: exits $rc0/$rc9/$rcn (expected 0/1/1): $(head -n 2 "$tmp/filter0.txt" "$tmp/filter9.txt" | tr '\n' '|')"
fi

# ---------------------------------------------------------------- the LD_PRELOAD shim, through cuBLASLt's descriptors
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
if [ -f "$CUDA_HOME/include/cublasLt.h" ] && ls "$CUDA_HOME"/lib64/libcublasLt.so* >/dev/null 2>&1 && command -v gcc >/dev/null; then
  cat >"$tmp/drv.c" <<'EOF'
#include <stdio.h>
#include <cublasLt.h>
/* a matmul descriptor and D layout as the trainer's matmul_lt builds them, then cublasLtMatmul with no
   handle: the shim records the regions first, the library then refuses the call (no GPU needed) */
int main(void) {
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t ld, ld2;
    if (cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS) { return 2; }
    cublasLtMatrixLayoutCreate(&ld, CUDA_R_16BF, 768, 256, 800);
    int32_t bc = 3; int64_t sd = 800 * 256;
    cublasLtMatrixLayoutSetAttribute(ld, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof(bc));
    cublasLtMatrixLayoutSetAttribute(ld, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &sd, sizeof(sd));
    cublasLtEpilogue_t e = CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof(e));
    void* aux = (void*)0x7000000000; int64_t aux_ld = 768;
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux));
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof(aux_ld));
    const float zero = 0.0f, one = 1.0f; /* beta 0: D marked before the call too; beta 1 (accumulate): not */
    cublasLtMatmul(NULL, op, &one, NULL, ld, NULL, ld, &zero, NULL, ld, (void*)0x7100000000, ld, NULL, NULL, 0, 0);
    cublasLtMatrixLayoutCreate(&ld2, CUDA_R_32F, 64, 32, 64); /* fp32 weight gradients, plain epilogue */
    e = CUBLASLT_EPILOGUE_DEFAULT;
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof(e));
    cublasLtMatmul(NULL, op, &one, NULL, ld2, NULL, ld2, &one, NULL, ld2, (void*)0x7200000000, ld2, NULL, NULL, 0, 0);
    return 0;
}
EOF
  if gcc -Wall -Wextra -shared -fPIC -O2 -I"$CUDA_HOME/include" dev/test/initcheck_lt_regions.c -o "$tmp/lt.so" -ldl 2>"$tmp/shim.err" &&
     gcc -I"$CUDA_HOME/include" "$tmp/drv.c" -o "$tmp/drv" -L"$CUDA_HOME/lib64" -lcublasLt -Wl,-rpath="$CUDA_HOME/lib64" 2>>"$tmp/shim.err"; then
    LD_PRELOAD="$tmp/lt.so" LT_REGIONS_FILE="$tmp/regions.txt" "$tmp/drv" >/dev/null 2>>"$tmp/shim.err"
    LD_PRELOAD="$tmp/lt.so" LT_REGIONS_FILE="$tmp/regions_nomark.txt" LT_MARK_INITIALIZED=0 "$tmp/drv" >/dev/null 2>>"$tmp/shim.err"
    # the NVTX ranges: D 3 batch matrices x 256 columns (ld 800 > rows 768: the padding unmarked),
    # 768 x 256 x 2 bytes each; the aux output's batch stride 0 is one matrix, contiguous; the fp32 D
    # one range; D of the beta-0 call marked before the call too ("lt_premark"), the beta-1 one not;
    # no "lt_marked" line, since the library refused every call (no handle, no GPU)
    want=$'lt_region D base=0x7100000000 esize=2 rows=768 cols=256 ld=800 batch=3 stride=204800\nlt_region aux base=0x7000000000 esize=2 rows=768 cols=256 ld=768 batch=3 stride=0\nlt_mark D ranges=768 bytes=1179648\nlt_mark aux ranges=1 bytes=393216\nlt_premark D\nlt_region D base=0x7200000000 esize=4 rows=64 cols=32 ld=64 batch=1 stride=0\nlt_mark D ranges=1 bytes=8192'
    if [ "$(cat "$tmp/regions.txt" 2>/dev/null)" = "$want" ] && ! grep -q warning "$tmp/shim.err" &&
       [ "$(cat "$tmp/regions_nomark.txt" 2>/dev/null)" = "$(grep -v '^lt_\(pre\)\{0,1\}mark' <<<"$want")" ]; then
      pass "lt_regions_shim: built without warnings; D (bf16, strided batch, ld > rows), the GELU aux output and an fp32 D recorded from cuBLASLt's descriptors, with the ranges the NVTX mark covers (before the call only at beta 0; none after a refused call; none with LT_MARK_INITIALIZED=0)"
    else
      fail "lt_regions_shim: got '$(tr '\n' '|' <"$tmp/regions.txt" 2>/dev/null)': $(head -c 300 "$tmp/shim.err")"
    fi
  else
    fail "lt_regions_shim: build: $(head -c 300 "$tmp/shim.err")"
  fi
else
  skip "lt_regions_shim: no $CUDA_HOME/include/cublasLt.h, libcublasLt or gcc here"
fi

# ---------------------------------------------------------------- the ablation stages, bench in parts
# one stage per paper config, in the issue's order; each call trains the runs that fit its time
want="ablate_shared_projections ablate_wq_identity ablate_residual_query"
got=$(tr ' ' '\n' <<<"$STAGES" | grep '^ablate_' | paste -sd' ' -)
dry_ab=$(bash $suite --dry-run "$tmp/dry_ab" $want 2>&1)
if [ "$got" = "$want" ] && [ "$(grep -c 'ABLATE_TIME_LIMIT=[0-9]* PYTHON=.* make ablate CONFIG=dev/ablate/\(shared_projections\|wq_identity\|residual_query\).txt OUT=build/gpu_suite/ablate_' <<<"$dry_ab")" = 3 ]; then
  pass "ablate_stages: $want, each a make ablate of its config with ABLATE_TIME_LIMIT (the stage's time less the report's)"
else
  fail "ablate_stages: stages '$got' (expected '$want'): $(grep -m1 'make ablate' <<<"$dry_ab")"
fi
out=$(ABLATE_PLAN_ONLY=1 ABLATE_RUNS="gqa4 mqa" bash dev/ablate/ablate.sh dev/ablate/shared_projections.txt 2>&1)
rc=$?
n_not=$(echo "$out" | grep -c 'not in ABLATE_RUNS')
bad=$(ABLATE_PLAN_ONLY=1 ABLATE_RUNS="gqa4 nope" bash dev/ablate/ablate.sh dev/ablate/shared_projections.txt 2>&1)
rcb=$?
if [ $rc -eq 0 ] && [ "$n_not" -eq 18 ] && [ $rcb -eq 1 ] && echo "$bad" | grep -q "ABLATE_RUNS names 'nope', which is no run of this config"; then
  pass "ablate_runs: ABLATE_RUNS trains 2 of shared_projections' 8 runs (the 6 others marked, at each of 3 seeds), a name not in the config refused"
else
  fail "ablate_runs: exits $rc/$rcb, $n_not runs marked: $(echo "$bad" | tail -n 1)"
fi
# the plan's prediction of each ablation: its runs not done, from the recorded tokens/s
left=$(ABLATE_GPU_SECONDS=1 bash dev/ablate/ablate.sh dev/ablate/shared_projections.txt "$tmp/no_such_out" 2>&1)
if [[ $left =~ ^ablate:\ gpu\ seconds\ left\ ([0-9]+)\ runs\ left\ 24\ of\ 24$ ]] && [ "${BASH_REMATCH[1]}" -gt 300 ] && [ "${BASH_REMATCH[1]}" -lt 3000 ] &&
   grep -q "^    ablate_shared_projections .*predicted: the runs that fit, of ${BASH_REMATCH[1]} s left" "$tmp/plan.txt"; then
  pass "ablate_predicted: shared_projections' 24 runs predicted at ${BASH_REMATCH[1]} s of GPU from the recorded tokens/s, the plan's figure"
else
  fail "ablate_predicted: '$left'; plan: $(grep -m1 '^    ablate_shared_projections' "$tmp/plan.txt")"
fi
out=$(BENCH_PEERS_ONLY=1 BENCH_SCHEMES_ONLY=1 bash dev/bench/bench.sh 2>&1)
if [ $? -eq 1 ] && echo "$out" | grep -q 'expected at most one of them'; then pass "bench_parts: BENCH_PEERS_ONLY and BENCH_SCHEMES_ONLY together refused"
else fail "bench_parts: $out"; fi

# ---------------------------------------------------------------- a sanitizer stage on a fake GPU
# The suite for real (not --dry-run) in a copy of its scripts, with a fake nvidia-smi, fake
# binaries and fixtures, and a fake compute-sanitizer that kills the standard_hd64_mqa run the first
# FAKE_KILLS times: a run killed beside others gets a second try alone; a stage that kept runs passed
# in an earlier call records the sum of the calls' seconds (what --record-times reads).
fake_repo="$tmp/fake_repo" fake_bin="$tmp/fake_bin"
mkdir -p "$fake_repo/dev/results" "$fake_repo/dev/fixtures" "$fake_repo/build" "$fake_bin"
cp Makefile attention_variants.cuh "$fake_repo/" && cp -r dev/test dev/reference "$fake_repo/dev/" && cp dev/results/stage_times.tsv "$fake_repo/dev/results/"
cat >"$fake_bin/nvidia-smi" <<'EOF'
#!/bin/sh
case "$*" in
  -L) echo "GPU 0: Fake GPU (UUID: GPU-0)" ;;
  *compute_cap*) echo "9.0" ;;
  *memory.used*) echo "1234" ;;
  *driver_version*) echo "name, driver_version, memory.total [MiB], clocks.max.sm [MHz]"; echo "Fake GPU, 0, 1 MiB, 1 MHz" ;;
  *) echo "Fake GPU" ;;
esac
EOF
cat >"$fake_bin/compute-sanitizer" <<'EOF'
#!/bin/sh
[ "$1" = --version ] && { echo "fake compute-sanitizer"; exit 0; }
case "$*" in
  *standard_hd64_mqa_model.bin*)
    n=$(cat "$FAKE_KILLS_FILE" 2>/dev/null || echo 0)
    if [ "$n" -lt "$FAKE_KILLS" ]; then echo $((n + 1)) >"$FAKE_KILLS_FILE"; echo "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)"; exit 9; fi ;;
esac
echo "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)"
EOF
printf '#!/bin/sh\nexit 0\n' >"$fake_bin/ok"
chmod +x "$fake_bin"/*

# ---------------------------------------------------------------- an ablation over two calls, for real
# (issue 54) The ablate_residual_query stage in a copy of the repository whose residual_query.txt is the
# toy config at 3 seeds (Austen, CPU trainers: ABLATE_TEST_FAKE_GPUS=1 schedules them over the fake GPU,
# about 3 s a run): call 1, cut by --time-limit 130 (a resumable stage starts with 120 s left) less 110 s
# for the report (ABLATE_TIME_LIMIT about 20 s, a few runs' worth), keeps the runs it finished and is PART; --record-times copies them into the results folder; call 2, a fresh LOG_DIR with only that
# folder (the next session), puts them back, trains exactly the rest and passes, the table whole.
# It trains for about a minute on one core, so it runs in the background beside the sections after the
# fake GPU's set-up (its own folders under $tmp; the binaries it makes are up to date by then), and its
# lines are printed here.
ablate_two_calls() {
  ab_start=$SECONDS
  ab_repo="$tmp/ab_repo"
  mkdir -p "$ab_repo/build" "$ab_repo/dev/data/mix"
  (tar -cf - --exclude=dev/data --exclude=dev/fixtures --exclude=dev/results/ablate Makefile ./*.h ./*.cuh ./*.cu dev |
     tar -xpf - -C "$ab_repo") 2>/dev/null
  cp -p dev/data/*.sh "$ab_repo/dev/data/"
  ln -s "$PWD/dev/data/austen" "$ab_repo/dev/data/austen"
  ln -s "$PWD/dev/data/gpt2" "$ab_repo/dev/data/gpt2"
  : >"$ab_repo/dev/data/mix/mix_train_000000.bin" # need_data's check; the config reads Austen
  sed -e 's/^seeds = .*/seeds = 1337 1338 1339/' \
    dev/ablate/toy.txt >"$ab_repo/dev/ablate/residual_query.txt"
  (make -s build/params build/train_gpt2_cpu_standard build/train_gpt2_cpu_kv_shared build/train_gpt2_cpu_q_identity &&
     cp -p build/params build/train_gpt2_cpu_standard build/train_gpt2_cpu_kv_shared build/train_gpt2_cpu_q_identity "$ab_repo/build/") \
    >"$tmp/ab_build.log" 2>&1
  ab_call() { # log [suite args...] -> the suite's output
    local log=$1; shift
    (cd "$ab_repo" && PATH="$fake_bin:$PATH" ABLATE_TEST_FAKE_GPUS=1 PYTHON=/usr/bin/python3 GPU_SUITE_PASSES="$tmp/ab_passes.tsv" \
       GPU_SUITE_TIMES="$tmp/ab_times.tsv" GPU_SUITE_ABLATE_RESULTS="$tmp/ab_results" bash dev/test/gpu_suite.sh "$@" "$tmp/$log" ablate_residual_query 2>&1)
  }
  ab1=$(GPU_SUITE_ABLATE_REPORT_S=110 ab_call ab1 --time-limit 130); rc1=$?
  n1=$(find "$tmp/ab1/ablate_residual_query" -name DONE 2>/dev/null | wc -l)
  (cd "$ab_repo" && GPU_SUITE_PASSES="$tmp/ab_passes.tsv" GPU_SUITE_TIMES="$tmp/ab_times.tsv" GPU_SUITE_ABLATE_RESULTS="$tmp/ab_results" \
     bash dev/test/gpu_suite.sh --record-times "$tmp/ab1" >"$tmp/ab_rec.txt" 2>&1)
  sum1=$(cd "$tmp/ab_results/residual_query" 2>/dev/null && find . -name main.log | sort | xargs -r cat | md5sum)
  ab2=$(ab_call ab2); rc2=$?
  n2=$(find "$tmp/ab2/ablate_residual_query" -name DONE 2>/dev/null | wc -l)
  sum2=$(cd "$tmp/ab_results/residual_query" && find . -name main.log | sort | sed "s|^|$ab_repo/build/gpu_suite/ablate_residual_query/|" | xargs -r cat | md5sum)
  if [ $rc1 -eq 0 ] && [ "$(cut -f1 "$tmp/ab1/ablate_residual_query.status" 2>/dev/null)" = PART ] && [ "$n1" -ge 1 ] && [ "$n1" -le 8 ] &&
     grep -q "^ablate_residual_query .* PART .*, $n1 of 9 runs done" <<<"$ab1" && [ "$(find "$tmp/ab_results/residual_query" -name DONE | wc -l)" = "$n1" ] &&
     ! find "$tmp/ab_results" -name 'model_*' | grep -q . &&
     [ $rc2 -eq 0 ] && [ "$(cut -f1 "$tmp/ab2/ablate_residual_query.status")" = PASS ] && [ "$n2" = 9 ] &&
     [ "$(grep -c '^ablate: skip [a-z_]* seed 133[789]: done' "$tmp/ab2/ablate_residual_query.log")" = "$n1" ] &&
     [ "$(grep -c '^ablate: run [a-z_]* seed 133[789] done in' "$tmp/ab2/ablate_residual_query.log")" = $((9 - n1)) ] &&
     [ "$sum1" = "$sum2" ] && grep -q '^ablate_residual_query .* PASS .*all 9 runs done' <<<"$ab2" && ! grep -q 'not yet run' "$tmp/ab2/ablate_residual_query/table.md"; then
    pass "ablate_two_calls: call 1 cut by its time limit kept $n1 of 9 runs (PART), --record-times kept their logs (no model), call 2 on a fresh LOG_DIR skipped them (logs untouched) and trained the $((9 - n1)) left: PASS, the table whole ($((SECONDS - ab_start)) s)"
  else
    fail "ablate_two_calls: exits $rc1/$rc2, $n1 then $n2 runs done, status $(cut -f1 "$tmp/ab1/ablate_residual_query.status" 2>/dev/null)/$(cut -f1 "$tmp/ab2/ablate_residual_query.status" 2>/dev/null): $(grep -m1 '^ablate_residual_query ' <<<"$ab1") | $(grep -m1 '^ablate_residual_query ' <<<"$ab2") | $(grep -m2 'error\|failed\|refused' "$tmp/ab1/ablate_residual_query.log" "$tmp/ab_build.log" 2>/dev/null | paste -sd' ' -)"
  fi

}

ablate_two_calls >"$tmp/ablate_two_calls.out" 2>&1 &
ablate_pid=$!

fake_schemes=$(make -s --no-print-directory -C "$fake_repo" schemes)
fake_labs=$(make -s --no-print-directory -C "$fake_repo" labs-list | tr '/' ' ')
for sch in $fake_schemes; do
  for kind in train_gpt2cu test_gpt2cu; do
    name=$kind; [ "$sch" != standard ] && name="${name}_$sch"
    cp "$fake_bin/ok" "$fake_repo/$name"; cp "$fake_bin/ok" "$fake_repo/${name}_fp32"
  done
  for fx in "${sch}_hd64" "${sch}_tiny" standard_hd64_gqa2 standard_hd64_mqa kv_shared_hd64_gqa2 q_identity_hd64_mqa q_residual_hd64_gqa2; do
    case $fx in "${sch}"_*) : >"$fake_repo/dev/fixtures/${fx}_model.bin"; : >"$fake_repo/dev/fixtures/${fx}_debug.bin"
      printf '%s\t%s\tdev/fixtures/%s_model.bin\tdev/fixtures/%s_debug.bin\n' "$fx" "$sch" "$fx" "$fx" >>"$fake_repo/dev/fixtures/manifest.tsv";; esac
  done
done
for l in $fake_labs params test_ptx; do cp "$fake_bin/ok" "$fake_repo/build/lab_$l"; cp "$fake_bin/ok" "$fake_repo/build/lab_${l}_fp32"; done
cp "$fake_bin/ok" "$fake_repo/build/params"; cp "$fake_bin/ok" "$fake_repo/build/test_ptx"; cp "$fake_bin/ok" "$fake_repo/build/test_hopper"
fake_suite() { # FAKE_KILLS log -> the suite's output; its exit status
  (cd "$fake_repo" && PATH="$fake_bin:$PATH" SANITIZER="$fake_bin/compute-sanitizer" NCU="$fake_bin/ok" FAKE_KILLS=$1 \
     FAKE_KILLS_FILE="$tmp/fake_kills_$2" PYTHON="$fake_bin/ok" bash dev/test/gpu_suite.sh "$tmp/$2" sanitize_racecheck 2>&1)
}
out=$(fake_suite 1 fake_once); rc=$?
if [ $rc -eq 0 ] && echo "$out" | grep -q '1 run(s) killed beside others: again, one at a time' &&
   echo "$out" | grep -q '^sanitize_racecheck racecheck: trainer BF16, head-size-64 fixtures (flash) (13 runs) PASS' &&
   [ "$(cut -f1 "$tmp/fake_once/sanitize_racecheck.status")" = PASS ] &&
   echo "$out" | grep -q '^    memory while it ran ([1-9][0-9]* samples, 5 s apart): host available at least [0-9]* MiB, GPU used at most 1234 MiB$'; then
  pass "sanitize_retry: a racecheck run killed beside 3 others passes on its second try, alone; the stage passes; $(echo "$out" | grep -m1 'memory while it ran' | sed 's/^ *//')"
else
  fail "sanitize_retry: exit $rc: $(echo "$out" | grep -m3 'killed\|racecheck:\|gpu_suite' | tr '\n' '|')"
fi
out=$(fake_suite 2 fake_twice); rc=$?
if [ $rc -eq 1 ] && echo "$out" | grep -q 'standard_hd64_mqa BF16: killed (exit 9, SIGKILL; .* 1 runs at once)' &&
   grep -q '; dmesg: ' "$tmp/fake_twice/sanitize/racecheck_train_standard_hd64_mqa_BF16.result" &&
   [ "$(cut -f1 "$tmp/fake_twice/sanitize_racecheck.status")" = FAIL ]; then
  pass "sanitize_killed_alone: killed again alone, the run fails, saying it ran alone and what dmesg says of it ($(grep -o 'dmesg: .*' "$tmp/fake_twice/sanitize/racecheck_train_standard_hd64_mqa_BF16.result" | cut -c1-60))"
else
  fail "sanitize_killed_alone: exit $rc: $(echo "$out" | grep -m3 'killed\|racecheck:' | tr '\n' '|')"
fi
# the next call: the 15 runs that passed are kept, the killed one runs (and passes); the status
# adds this call's seconds to the 100 s written here for the earlier call
printf 'FAIL\t100\t2026-11-30 10:00 UTC\tFake GPU\n' >"$tmp/fake_twice/sanitize_racecheck.status"
out=$(fake_suite 2 fake_twice); rc=$?
secs=$(cut -f2 "$tmp/fake_twice/sanitize_racecheck.status")
GPU_SUITE_TIMES="$tmp/fake_times.tsv" GPU_SUITE_PASSES="$tmp/fake_passes.tsv" GPU_SUITE_ABLATE_RESULTS="$tmp/fake_ablate" \
  bash $suite --record-times "$tmp/fake_twice" >/dev/null 2>&1
if [ $rc -eq 0 ] && [ "$(cut -f1 "$tmp/fake_twice/sanitize_racecheck.status")" = PASS ] && [ "$secs" -ge 100 ] && [ "$secs" -lt 160 ] &&
   echo "$out" | grep -q "($secs s with the earlier calls' runs)" &&
   grep -q "^sanitize_racecheck	$secs	measured " "$tmp/fake_times.tsv"; then
  pass "sanitize_resume_time: the next call runs only the failed run; the status and --record-times get both calls' time ($secs s)"
else
  fail "sanitize_resume_time: exit $rc, status seconds '$secs': $(echo "$out" | grep -m2 '=== sanitize_racecheck' | tr '\n' '|')"
fi

# ---------------------------------------------------------------- a stage skipped while its inputs are unchanged
# (issue 54) On the fake GPU: fixtures passes (a fake Python), --record-times writes the pass with the
# digest of its inputs and the commit; a new call (a fresh LOG_DIR, as in the next session) skips it,
# naming the commit; a change to one of its inputs (dev/reference/make_fixtures.py) runs it again, and
# so does --force.
fake_call() { # log stage... -> the suite's output on the fake GPU, with this test's passes file
  local log=$1; shift
  (cd "$fake_repo" && PATH="$fake_bin:$PATH" PYTHON="$fake_bin/ok" RECORD_COMMIT=abc1234 GPU_SUITE_PASSES="$tmp/passes.tsv" \
     GPU_SUITE_TIMES="$tmp/skip_times.tsv" GPU_SUITE_ABLATE_RESULTS="$tmp/skip_ablate" bash dev/test/gpu_suite.sh "$tmp/$log" "$@" 2>&1)
}
out1=$(fake_call skip1 fixtures); rc1=$?
(cd "$fake_repo" && GPU_SUITE_PASSES="$tmp/passes.tsv" GPU_SUITE_TIMES="$tmp/skip_times.tsv" GPU_SUITE_ABLATE_RESULTS="$tmp/skip_ablate" \
   bash dev/test/gpu_suite.sh --record-times "$tmp/skip1" >"$tmp/skip_rec.txt" 2>&1)
digest=$(cut -f1 "$tmp/skip1/fixtures.digest" 2>/dev/null)
out2=$(fake_call skip2 fixtures); rc2=$?
if [ $rc1 -eq 0 ] && grep -q '^=== fixtures (' <<<"$out1" && [ -n "$digest" ] &&
   grep -q "^fixtures	Fake GPU	[^	]*	$digest	abc1234	" "$tmp/passes.tsv" &&
   [ $rc2 -eq 0 ] && grep -q "^=== fixtures: passed at abc1234 (.*) on this GPU, inputs unchanged ([0-9]* files, $digest): skipping" <<<"$out2" &&
   ! grep -q '^=== fixtures (' <<<"$out2" && grep -q '^not passed yet:.*' <<<"$out2" && ! grep -q '^not passed yet:.* fixtures' <<<"$out2" &&
   grep -qx 'dev/reference/make_fixtures.py' "$tmp/skip2/fixtures.inputs"; then
  pass "skip_unchanged: fixtures passed, recorded with its inputs' digest $digest at abc1234; the next call skips it: '$(grep -m1 '^=== fixtures' <<<"$out2" | cut -c5-90)...'"
else
  fail "skip_unchanged: exits $rc1/$rc2, digest '$digest', passes: $(grep -v '^#' "$tmp/passes.tsv" 2>/dev/null | head -n 2 | tr '\t\n' ' |'): $(grep -m1 '^=== fixtures' <<<"$out2")"
fi
echo "# a change" >>"$fake_repo/dev/reference/make_fixtures.py"
out3=$(fake_call skip3 fixtures); rc3=$?
out4=$(cd "$fake_repo" && PATH="$fake_bin:$PATH" PYTHON="$fake_bin/ok" GPU_SUITE_PASSES="$tmp/passes.tsv" bash dev/test/gpu_suite.sh --force "$tmp/skip4" fixtures 2>&1)
sed -i '$d' "$fake_repo/dev/reference/make_fixtures.py"
out5=$(fake_call skip5 fixtures)
if [ $rc3 -eq 0 ] && grep -q '^=== fixtures (' <<<"$out3" && [ "$(cut -f1 "$tmp/skip3/fixtures.digest")" != "$digest" ] &&
   grep -q '^=== fixtures (' <<<"$out4" && grep -q "^=== fixtures: passed at abc1234 .*$digest): skipping" <<<"$out5"; then
  pass "skip_changed: a changed input (make_fixtures.py) runs the stage again (a new digest), --force runs it, the file restored is skipped again"
else
  fail "skip_changed: exit $rc3: $(grep -m1 '^=== fixtures' <<<"$out3") | force: $(grep -m1 '^=== fixtures' <<<"$out4") | restored: $(grep -m1 '^=== fixtures' <<<"$out5")"
fi
# the inputs found for stages that run binaries: the compiler's dependencies of what they run, the scripts
bash $suite --inputs "$tmp/inputs" tests_fp32 lab_bench fixtures >"$tmp/inputs.txt" 2>&1
section() { awk -v s="=== $1:" 'index($0, s) == 1 { on = 1; next } /^=== / { on = 0 } on { print $1 }' "$tmp/inputs.txt"; }
t=$(section tests_fp32) l=$(section lab_bench) f=$(section fixtures)
miss=""
for want in train_gpt2.cu test_gpt2.cu attention_variants.cuh dev/trainer/parameters.h dev/trainer/train_common.h dataloader.h dev/test/test_cuda.sh Makefile; do
  grep -qx "$want" <<<"$t" || miss="$miss tests_fp32:$want"
done
for want in dev/cuda/attention_forward.cu dev/cuda/common.h dev/cuda/sdpa_bench.py train_gpt2.cu; do grep -qx "$want" <<<"$l" || miss="$miss lab_bench:$want"; done
grep -qx 'dev/bench/bench.sh\|dev/ablate/ablate.py' <<<"$t" && miss="$miss tests_fp32:(bench or ablate named)"
grep -qx 'dev/reference/make_fixtures.py' <<<"$f" || miss="$miss fixtures:make_fixtures.py"
grep -qx 'train_gpt2.cu' <<<"$f" && miss="$miss fixtures:(train_gpt2.cu: it runs no binary)"
if [ -z "$miss" ]; then
  pass "inputs: tests_fp32 $(wc -l <<<"$t") files (the trainers' and tests' -MM, test_cuda.sh), lab_bench $(wc -l <<<"$l") (the labs), fixtures $(wc -l <<<"$f") (no binary)"
else
  fail "inputs: missing or wrong:$miss"
fi
# the targets stage reads the lab bench: the fastest version per T against SDPA at B 8 only, and issue
# 58's bar for the d12 step, 12 x (fastest forward + fastest backward at B 64, T 1024) <= 19.92 ms
mkdir -p "$tmp/tgt/lab"
printf 'PASS\t10\t2026-11-30 10:00 UTC\tFake GPU\n' >"$tmp/tgt/lab_bench.status"
for T in 1024 2048 4096; do
  for pass in forward backward; do
    for v in "v3 0.30" "v5 0.20" "sdpa 0.25"; do # ms; B 64 lines faster than SDPA must not count for B 8
      f="$tmp/tgt/lab/lab_attention_${pass}_bench.log"; [ "${v% *}" = sdpa ] && f="$tmp/tgt/lab/sdpa_bench.log"
      printf 'bench %s %-16s T=%d B=8 H=12 hd=64 ms=%s TFLOP/s=1.0 GB/s=1.0\n' "${v% *}" $pass $T "${v#* }" >>"$f"
    done
  done
done
printf 'bench v3 forward          T=1024 B=64 H=12 hd=64 ms=0.7000 TFLOP/s=1.0 GB/s=1.0\n' >>"$tmp/tgt/lab/lab_attention_forward_bench.log"
printf 'bench v5 forward          T=1024 B=64 H=12 hd=64 ms=0.5000 TFLOP/s=1.0 GB/s=1.0\n' >>"$tmp/tgt/lab/lab_attention_forward_bench.log"
printf 'bench v4 backward         T=1024 B=64 H=12 hd=64 ms=1.9000 TFLOP/s=1.0 GB/s=1.0\n' >>"$tmp/tgt/lab/lab_attention_backward_bench.log"
printf 'bench v5 forward+backward T=1024 B=64 H=12 hd=64 ms=0.1000 TFLOP/s=1.0 GB/s=1.0\n' >>"$tmp/tgt/lab/lab_attention_backward_bench.log"
printf 'bench v5 backward         T=1024 B=64 H=12 hd=64 ms=1.1000 TFLOP/s=1.0 GB/s=1.0\n' >>"$tmp/tgt/lab/lab_attention_backward_bench.log"
printf 'bench sdpa backward         T=1024 B=64 H=12 hd=64 ms=0.0100 TFLOP/s=1.0 GB/s=1.0\n' >>"$tmp/tgt/lab/sdpa_bench.log"
# ... and the long bench (issue 59's grid): faster than SDPA everywhere but the backward at T 16384, hd 128
printf 'PASS\t10\t2026-11-30 10:00 UTC\tFake GPU\n' >"$tmp/tgt/lab_bench_long.status"
for hd in 64 128; do
  for T in 1024 2048 4096 8192 16384; do
    for pass in forward backward; do
      slow=$([ $pass = backward ] && [ $T = 16384 ] && [ $hd = 128 ] && echo 0.40 || echo 0.20)
      for v in "v6 0.30" "v7 $slow" "sdpa 0.25"; do
        f="$tmp/tgt/lab/lab_attention_${pass}_bench_long.log"; [ "${v% *}" = sdpa ] && f="$tmp/tgt/lab/sdpa_bench_long.log"
        printf 'bench %s %-16s T=%d B=8 H=12 hd=%d ms=%s TFLOP/s=1.0 GB/s=1.0\n' "${v% *}" $pass $T $hd "${v#* }" >>"$f"
      done
    done
  done
done
out=$(fake_call tgt fixtures) # targets ends every call
if grep -q '^targets *flash forward >= PyTorch SDPA (B 8, H 12, hd 64) *PASS .*T=1024 hd=64 0.20 vs 0.25 ms (1.25x)' <<<"$out" &&
   grep -q '^targets *flash backward >= PyTorch SDPA (B 8, H 12, hd 64) *PASS' <<<"$out" &&
   grep -q '^targets *flash forward >= PyTorch SDPA (issue 59: T 1024-16384, hd 64 and 128) *PASS .*T=16384 hd=128 0.20 vs 0.25 ms' <<<"$out" &&
   grep -q '^targets *flash backward >= PyTorch SDPA (issue 59: T 1024-16384, hd 64 and 128) *FAIL .*T=16384 hd=128 0.30 vs 0.25 ms (0.83x)' <<<"$out" &&
   grep -q '^targets *flash rows of a d12 step <= 60% (19.92 ms) *PASS *12 x (forward v5 0.5000 + backward v5 1.1000 ms) = 19.20 ms, 58% of 33.2' <<<"$out"; then
  pass "targets_flash: the fastest version per shape against SDPA at B 8 (B 64 lines apart), issue 59's grid (a backward at T 16384, hd 128 slower: FAIL), the d12 step's flash rows from B 64 (19.20 ms, 58%)"
else
  fail "targets_flash: $(grep 'flash' <<<"$out" | tr '\n' '|' | cut -c1-900)"
fi

# --record-times keeps the finished ablation runs' small files (not their models) for the next session
mkdir -p "$tmp/rec_ab/ablate_toy/standard/seed_1" "$tmp/rec_ab/ablate_toy/kv_shared/seed_1"
for f in DONE main.log stdout.log cmd.txt heads.csv; do echo "$f" >"$tmp/rec_ab/ablate_toy/standard/seed_1/$f"; done
echo model >"$tmp/rec_ab/ablate_toy/standard/seed_1/model_00000016.bin"; echo partial >"$tmp/rec_ab/ablate_toy/kv_shared/seed_1/main.log"
echo "| table |" >"$tmp/rec_ab/ablate_toy/table.md"
GPU_SUITE_TIMES="$tmp/rec_ab_times.tsv" GPU_SUITE_PASSES="$tmp/rec_ab_passes.tsv" GPU_SUITE_ABLATE_RESULTS="$tmp/ab_results" \
  bash $suite --record-times "$tmp/rec_ab" >"$tmp/rec_ab.txt" 2>&1
kept=$(cd "$tmp/ab_results/toy" 2>/dev/null && find . -type f | sort | tr '\n' ' ')
if [ "$kept" = "./standard/seed_1/DONE ./standard/seed_1/cmd.txt ./standard/seed_1/heads.csv ./standard/seed_1/main.log ./standard/seed_1/stdout.log ./table.md " ]; then
  pass "record_ablate: --record-times copies a finished run's logs, DONE and heads.csv and the table, not its model nor an unfinished run"
else
  fail "record_ablate: kept '$kept': $(cat "$tmp/rec_ab.txt" | tail -n 2)"
fi

# the ablation over two calls (ablate_two_calls, in the background since the fake GPU was set up)
wait "$ablate_pid"
cat "$tmp/ablate_two_calls.out"
grep -q '^FAIL' "$tmp/ablate_two_calls.out" && failed=1

# every --record-times above wrote into this test's files: the repository's records are as they were
records_after=$(find dev/results -type f | sort | xargs md5sum)
if [ "$records_after" = "$records_before" ]; then
  pass "records_untouched: dev/results (stage_times.tsv, stage_passes.tsv, ablate/) as before the suite"
else
  fail "records_untouched: the suite changed $(diff <(echo "$records_before") <(echo "$records_after") | grep '^[<>]' | head -n 3 | tr '\n' ' ')"
fi

# end_tree_with_me (dev/test/jobs.sh, which gpu_suite.sh and bench.sh call): a script holding a
# background job with a child of its own, a background subshell and a foreground command is ended by
# SIGTERM, SIGHUP or SIGKILL to it alone; within 3 s none of the three is left
for sig in TERM HUP KILL; do
  n=$(kill -l $sig)
  cat >"$tmp/tree_$sig.sh" <<EOF2
source dev/test/jobs.sh
end_tree_with_me
bash -c 'sleep 31$n' &
( sleep 32$n ) &
sleep 33$n
EOF2
  env --default-signal=HUP,INT,TERM bash "$tmp/tree_$sig.sh" &
  eval "tree_pid_$sig=\$!"
done
for _ in $(seq 50); do [ "$(pgrep -fc 'sleep 3[123][0-9]')" -ge 9 ] && break; sleep 0.1; done
started=$(pgrep -fc 'sleep 3[123][0-9]')
{ # quietly: bash would note each kill
  for sig in TERM HUP KILL; do eval "kill -$sig \$tree_pid_$sig"; done
  for sig in TERM HUP KILL; do eval "wait \$tree_pid_$sig"; done
} 2>/dev/null
sleep 3
for sig in TERM HUP KILL; do
  n=$(kill -l $sig)
  left=$(pgrep -fa "sleep 3[123]$n\$" | wc -l)
  if [ "$started" -ge 9 ] && [ "$left" = 0 ]; then
    pass "end_tree_with_me_$sig: SIG$sig to a script alone: its background job's child, its background subshell and its foreground command all ended within 3 s"
  else
    fail "end_tree_with_me_$sig: $started of 9 started, $left of the script's 3 left after SIG$sig to it: $(pgrep -fa "sleep 3[123]$n\$" | paste -sd' ' -)"
  fi
  pkill -f "sleep 3[123]$n\$" 2>/dev/null
done

echo "  gpu_suite: $((SECONDS - start)) s"
exit $failed
