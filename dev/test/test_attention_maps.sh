#!/usr/bin/env bash
# test_attention_maps.sh: the inspection run (--dump_attention, --attention_csv; issue 31, README
# "Looking inside attention"), its diagnostics and its pictures.
#
#   bash dev/test/test_attention_maps.sh      (from anywhere; runs in the repository root)
#
# (a) the diagnostics on hand-built patterns with known values (uniform, identity, previous-token,
#     pure induction; symmetric and antisymmetric scores), the induction probe's tokens, the maps
#     file's round trip and its refusal of damaged copies (build/test_attention_maps)
# (b) the CPU trainer on every scheme's tiny fixture (and GQA, MQA): probabilities = the causal
#     softmax of the scores, the CSV = numpy's own diagnostics of the maps, the prompt's tokens;
#     Q = K (qk_shared, qkv_shared): every score map symmetric bit for bit, every other scheme not
# (c) the CUDA trainer on the CPU runtime (dev/cudacpu): its maps against the CPU trainer's for the
#     same checkpoint and prompt, ||cuda - cpu|| / ||cpu||, FP32 builds within 1e-5, BF16 within 1e-2;
#     its Q = K scores symmetric too
# (d) one-line refusals: an empty prompt, a prompt longer than the context (text and token file),
#     a checkpoint of another scheme, an unwritable output, an output that is the model file, bad
#     token files, --generate with it; nothing written by a refused run
# (e) the pictures (dev/tools/attention_maps.py) on a tiny checkpoint: the grid, the scores, two
#     schemes side by side and the diagnostics heatmaps, each a PNG of many colours
# (f) under ASan, LSan and UBSan: the inspection run and two refusals, no report
# One PASS/FAIL line per check; exits non-zero on any FAIL.
#
#   bash dev/test/test_attention_maps.sh --gpu "FP32 BF16"
#     on a GPU (dev/test/test_cuda.sh's GPU tests call it): (c) with the real trainers
#     (./train_gpt2cu[_<scheme>][_fp32], built by test_cuda.sh) against the CPU trainer, the same
#     tolerances, plus the head-size-64 fixture; Q = K's scores from cuBLASLt symmetric within 1e-6
#     (FP32) / 1e-2 (BF16), and how many bit for bit; nothing else
set -u
cd "$(dirname "$0")/../.."
start=$SECONDS
GPU_PRECISIONS=""
if [ "${1:-}" = --gpu ]; then GPU_PRECISIONS=${2:?--gpu needs the precisions, e.g. --gpu \"FP32 BF16\"}; fi
PY=${PYTHON:-/usr/bin/python3}
FIX=dev/fixtures
CHECK="$PY dev/test/attention_maps_check.py"
TOOL="$PY dev/tools/attention_maps.py"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
SCHEMES=$(make -s --no-print-directory schemes) && [ -n "$SCHEMES" ] || { echo "FAIL attention_maps: make schemes printed nothing"; exit 1; }

nfail=0
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; nfail=$((nfail + 1)); }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/test_attention_maps.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

# a prompt for the fixtures (vocabulary 500, context 64): token ids, used as given
printf '0 17 42 99, 123\n7 250 17 42 99 3 480\n' > "$TMP/prompt.txt"
PROMPT=0,17,42,99,123,7,250,17,42,99,3,480
[ -f "$FIX/manifest.tsv" ] || $PY dev/reference/make_fixtures.py --out "$FIX" > "$TMP/fixtures.log" 2>&1 ||
    fail "attention_maps: the fixtures could not be generated: $(tail -n 1 "$TMP/fixtures.log")"

# ---------------------------------------------------------------------------------------------
# (a) the diagnostics and the file format on their own
if [ -n "$GPU_PRECISIONS" ]; then
    : # the GPU mode: (b) for the fixtures it compares, then the GPU trainers
elif make -s build/test_attention_maps > "$TMP/build_unit.log" 2>&1; then
    ./build/test_attention_maps "$TMP" || fail "attention_maps unit test: build/test_attention_maps exited $?"
else
    fail "attention_maps unit test: build failed: $(grep -m1 error "$TMP/build_unit.log")"
fi

# ---------------------------------------------------------------------------------------------
# (b) the CPU trainer on every scheme
# (the GPU mode needs only the schemes it compares, built on all cores: tests_fp32 took 80 s of
# device time on the 2026-11-27 H200 with all eight built at -j2, 16 s the day before without them;
# one build takes ~11 s)
cpu_schemes=$([ -n "$GPU_PRECISIONS" ] && echo "standard qk_shared q_residual" || echo "$SCHEMES")
cpu_bins=""
for s in $cpu_schemes; do cpu_bins="$cpu_bins build/train_gpt2_cpu_$s"; done
make -s -j"$(nproc)" $cpu_bins > "$TMP/build_cpu.log" 2>&1 || fail "attention_maps: CPU trainers build failed: $(grep -m1 error "$TMP/build_cpu.log")"

# dump FIXTURE BINARY OUT_STEM [flags]: the inspection run on the fixture's checkpoint and the prompt
dump() {
    local fixture=$1 bin=$2 out=$3; shift 3
    "$bin" -e "$FIX/${fixture}_model.bin" --prompt_tokens "$TMP/prompt.txt" --dump_attention "$out.bin" \
        --attention_csv "$out.csv" "$@" > "$out.log" 2>&1
}

CPU_FIXTURES="$(for s in $SCHEMES; do echo "${s}_tiny"; done) standard_gqa2 standard_mqa kv_shared_mqa q_residual_gqa2"
[ -n "$GPU_PRECISIONS" ] && CPU_FIXTURES="standard_tiny standard_gqa2 standard_mqa qk_shared_tiny q_residual_gqa2 standard_hd64"
for fixture in $CPU_FIXTURES; do
    scheme=$(awk -v f="$fixture" '$1 == f { print $2 }' "$FIX/manifest.tsv")
    [ -n "$scheme" ] || { fail "attention_maps cpu $fixture: not in $FIX/manifest.tsv"; continue; }
    if ! dump "$fixture" "build/train_gpt2_cpu_$scheme" "$TMP/cpu_$fixture"; then
        fail "attention_maps cpu $fixture: the inspection run failed: $(grep -m1 error "$TMP/cpu_$fixture.log")"
        continue
    fi
    sym=""
    case $scheme in qk_shared|qkv_shared) sym=--symmetric ;; esac
    $CHECK verify "$TMP/cpu_$fixture.bin" "$TMP/cpu_$fixture.csv" $sym --tokens "$PROMPT" --name "cpu $fixture" ||
        nfail=$((nfail + 1))
done
# the CSV's asymmetry column says the same: exactly 0 for Q = K
for fixture in $([ -z "$GPU_PRECISIONS" ] && echo qk_shared_tiny qkv_shared_tiny); do
    col=$(awk -F, 'NR > 1 { print $8 }' "$TMP/cpu_$fixture.csv" 2>/dev/null | sort -u | tr '\n' ' ')
    [ "$col" = "0 " ] && pass "attention_maps cpu $fixture: the CSV's asymmetry is 0 for every head" ||
        fail "attention_maps cpu $fixture: the CSV's asymmetry column holds '$col', expected 0 for every head"
done

# ---------------------------------------------------------------------------------------------
# (c) the CUDA trainer on the CPU runtime against the CPU trainer: FP32 builds of the schemes whose
# q and k come from different places (standard, q = k, the residual query), and the BF16 build
cuda_bins="build/cudacpu/train_gpt2cu_standard_fp32 build/cudacpu/train_gpt2cu_standard build/cudacpu/train_gpt2cu_qk_shared_fp32 build/cudacpu/train_gpt2cu_q_residual_fp32"
t0=$SECONDS
if [ -n "$GPU_PRECISIONS" ]; then
    # the real trainers (test_cuda.sh built them): FP32 as on the CPU runtime, BF16 for every scheme
    # pair, plus the head-size-64 fixture (the shape the flash path would take; the dump is unfused)
    for p in $GPU_PRECISIONS; do
        sfx=$([ "$p" = FP32 ] && echo _fp32); tol=$([ "$p" = FP32 ] && echo 1e-5 || echo 1e-2)
        for run in standard_tiny:standard standard_gqa2:standard standard_mqa:standard qk_shared_tiny:qk_shared \
                   q_residual_gqa2:q_residual standard_hd64:standard; do
            IFS=: read -r fixture scheme <<< "$run"
            bin=./train_gpt2cu$([ "$scheme" != standard ] && echo "_$scheme")$sfx
            out="$TMP/gpu_${p}_$fixture"
            [ -x "$bin" ] || { fail "attention_maps gpu $bin: not built"; continue; }
            if ! dump "$fixture" "$bin" "$out"; then
                fail "attention_maps gpu $bin $fixture: the inspection run failed: $(grep -m1 error "$out.log")"
                continue
            fi
            $CHECK compare "$out.bin" "$TMP/cpu_$fixture.bin" --tol "$tol" --name "gpu $bin vs cpu, $fixture" || nfail=$((nfail + 1))
        done
        stol=$([ "$p" = FP32 ] && echo 1e-6 || echo 1e-2)
        $CHECK verify "$TMP/gpu_${p}_qk_shared_tiny.bin" "$TMP/gpu_${p}_qk_shared_tiny.csv" --symmetric --symmetric_tol "$stol" \
            --tokens "$PROMPT" --tol "$tol" --name "gpu $p qk_shared_tiny" || nfail=$((nfail + 1))
    done
    echo "attention_maps (gpu): $((SECONDS - start)) s"
    [ $nfail -eq 0 ]
    exit
fi
if make -s -j2 $cuda_bins > "$TMP/build_cuda.log" 2>&1; then
    echo "  (CUDA trainers on the CPU runtime built in $((SECONDS - t0)) s)"
    for run in standard_tiny:standard_fp32:1e-5 standard_gqa2:standard_fp32:1e-5 qk_shared_tiny:qk_shared_fp32:1e-5 \
               q_residual_gqa2:q_residual_fp32:1e-5 standard_tiny:standard:1e-2 standard_mqa:standard:1e-2; do
        IFS=: read -r fixture build tol <<< "$run"
        out="$TMP/cuda_${build}_$fixture"
        if ! dump "$fixture" "build/cudacpu/train_gpt2cu_$build" "$out"; then
            fail "attention_maps cudacpu train_gpt2cu_$build $fixture: the inspection run failed: $(grep -m1 error "$out.log")"
            continue
        fi
        $CHECK compare "$out.bin" "$TMP/cpu_$fixture.bin" --tol "$tol" --name "cudacpu train_gpt2cu_$build vs cpu, $fixture" ||
            nfail=$((nfail + 1))
    done
    $CHECK verify "$TMP/cuda_qk_shared_fp32_qk_shared_tiny.bin" "$TMP/cuda_qk_shared_fp32_qk_shared_tiny.csv" --symmetric \
        --tokens "$PROMPT" --name "cudacpu train_gpt2cu_qk_shared_fp32 qk_shared_tiny" || nfail=$((nfail + 1))
else
    fail "attention_maps: CUDA trainers on the CPU runtime: build failed: $(grep -m1 error "$TMP/build_cuda.log")"
fi

# ---------------------------------------------------------------------------------------------
# (d) refusals: exit 1, one "error:" line naming the problem, and no output file
# refused NAME EXPECTED_TEXT BINARY FLAGS...
refused() {
    local name=$1 want=$2; shift 2
    rm -f "$TMP/out.bin" "$TMP/out.csv"
    "$@" > "$TMP/refused.out" 2> "$TMP/refused.err"
    local rc=$? lines
    lines=$(wc -l < "$TMP/refused.err")
    if [ $rc -eq 1 ] && [ "$lines" -eq 1 ] && grep -q "^error: .*$want" "$TMP/refused.err" && [ ! -e "$TMP/out.bin" ] &&
       [ ! -e "$TMP/out.csv" ]; then
        pass "attention_maps refuses $name: $(cut -c1-150 "$TMP/refused.err")"
    else
        fail "attention_maps refuses $name: exit $rc, $lines stderr lines (expected 1, 1 line with '$want', no output): $(head -c 300 "$TMP/refused.err")"
    fi
}
CPU=build/train_gpt2_cpu_standard
M=$FIX/standard_tiny_model.bin
seq 1 65 | tr '\n' ' ' > "$TMP/long_prompt.txt"
printf '' > "$TMP/empty_prompt.txt"
printf '1 2 banana 3\n' > "$TMP/word_prompt.txt"
printf '1 2 500\n' > "$TMP/outside_prompt.txt"
long_text=$(for i in $(seq 1 1100); do printf 'word '; done)
refused "an empty --prompt" "--prompt is empty" $CPU -e "$M" --prompt "" --dump_attention "$TMP/out.bin"
refused "an empty --prompt_tokens file" "no tokens in the file" $CPU -e "$M" --prompt_tokens "$TMP/empty_prompt.txt" --dump_attention "$TMP/out.bin"
refused "a prompt longer than the context (token file)" "more than the model's context of max_seq_len 64" $CPU -e "$M" --prompt_tokens "$TMP/long_prompt.txt" --dump_attention "$TMP/out.bin"
if [ -f dev/data/gpt2/encoder.json ] || bash dev/data/fetch_gpt2_vocab.sh > "$TMP/vocab.log" 2>&1; then
    refused "a prompt longer than the context (text)" "longer than the model's context, max_seq_len 1024" $CPU -e d2 --prompt "$long_text" --dump_attention "$TMP/out.bin"
else
    fail "attention_maps: dev/data/fetch_gpt2_vocab.sh failed, a text --prompt cannot be encoded: $(tail -n 1 "$TMP/vocab.log")"
fi
refused "a token that is not a number" "token 3 ('banana') is not a token id" $CPU -e "$M" --prompt_tokens "$TMP/word_prompt.txt" --dump_attention "$TMP/out.bin"
refused "a token outside the vocabulary" "token 3 ('500') is not a token id of this model's vocabulary \[0, 500)" $CPU -e "$M" --prompt_tokens "$TMP/outside_prompt.txt" --attention_csv "$TMP/out.csv"
refused "a checkpoint of another scheme" "qk_shared" $CPU -e "$FIX/qk_shared_tiny_model.bin" --prompt_tokens "$TMP/prompt.txt" --dump_attention "$TMP/out.bin"
refused "an output in a missing folder" "cannot write into $TMP/missing (no such folder)" $CPU -e "$M" --prompt_tokens "$TMP/prompt.txt" --dump_attention "$TMP/missing/out.bin"
refused "an output that is a folder" "this is a folder" $CPU -e "$M" --prompt_tokens "$TMP/prompt.txt" --attention_csv "$TMP"
cp "$M" "$TMP/model_copy.bin"
sum=$(md5sum < "$TMP/model_copy.bin")
refused "an output that is the model file" "an input of this run" $CPU -e "$TMP/model_copy.bin" --prompt_tokens "$TMP/prompt.txt" --dump_attention "$TMP/./model_copy.bin"
[ "$(md5sum < "$TMP/model_copy.bin")" = "$sum" ] && pass "attention_maps: the model file is unchanged after that refusal" ||
    fail "attention_maps: the model file changed after --dump_attention named it"
refused "--dump_attention with --generate" "give one of them" $CPU -e "$M" --generate 4 --dump_attention "$TMP/out.bin"
refused "--prompt_tokens without an inspection flag" "it needs --dump_attention FILE" $CPU -e "$M" --prompt_tokens "$TMP/prompt.txt"
refused "the same file for both outputs" "both name" $CPU -e "$M" --prompt_tokens "$TMP/prompt.txt" --dump_attention "$TMP/out.bin" --attention_csv "$TMP/out.bin"
if [ -e "$TMP/cudacpu_ok" ] || [ -x build/cudacpu/train_gpt2cu_standard_fp32 ]; then
    refused "(CUDA trainer) a prompt longer than the context" "more than the model's context" build/cudacpu/train_gpt2cu_standard_fp32 -e "$M" --prompt_tokens "$TMP/long_prompt.txt" --dump_attention "$TMP/out.bin"
    refused "(CUDA trainer) an unwritable output" "no such folder" build/cudacpu/train_gpt2cu_standard_fp32 -e "$M" --prompt_tokens "$TMP/prompt.txt" --dump_attention "$TMP/missing/out.bin"
fi
printf '1 2\0003 4\n' > "$TMP/nul_prompt.txt"
refused "a token file with a NUL byte" "token 2 ('2?3') is not a token id" $CPU -e "$M" --prompt_tokens "$TMP/nul_prompt.txt" --dump_attention "$TMP/out.bin"
printf 'my notes\n' > "$TMP/notes.txt"
refused "replacing a file that is not a maps file" "exists and is not an attention maps file" $CPU -e "$M" --prompt_tokens "$TMP/prompt.txt" --dump_attention "$TMP/notes.txt"
refused "replacing a file that is not a diagnostics CSV" "exists and is not a head diagnostics CSV" $CPU -e "$M" --prompt_tokens "$TMP/prompt.txt" --attention_csv "$TMP/notes.txt"
[ "$(cat "$TMP/notes.txt")" = "my notes" ] && pass "attention_maps: the notes file is unchanged after those refusals" ||
    fail "attention_maps: the notes file changed"
# what the flags wrote before is replaced; the temporary names collide with nothing: an output named
# like the other's temporary file, and a model named like the maps' (both survive)
cp "$M" "$TMP/m.bin.tmp"
sum=$(md5sum < "$TMP/m.bin.tmp")
if $CPU -e "$TMP/m.bin.tmp" --prompt_tokens "$TMP/prompt.txt" --dump_attention "$TMP/m.bin" --attention_csv "$TMP/m.bin.tmp.csv" > /dev/null 2>&1 &&
   $CPU -e "$M" --prompt_tokens "$TMP/prompt.txt" --dump_attention "$TMP/x.bin" --attention_csv "$TMP/x.bin.tmp" > /dev/null 2>&1 &&
   $CPU -e "$M" --prompt_tokens "$TMP/prompt.txt" --dump_attention "$TMP/x.bin" --attention_csv "$TMP/x.bin.tmp" > /dev/null 2>&1 &&
   [ "$(md5sum < "$TMP/m.bin.tmp")" = "$sum" ] && $CHECK verify "$TMP/x.bin" "$TMP/x.bin.tmp" --tokens "$PROMPT" --name rerun > /dev/null &&
   [ -z "$(ls "$TMP" | grep -E '^(x|m)\.bin.*\.[A-Za-z0-9]{6}$')" ]; then
    pass "attention_maps: a rerun replaces its own files; the model m.bin.tmp beside --dump_attention m.bin and an output named x.bin.tmp survive; no temporary file left"
else
    fail "attention_maps: outputs named like temporary files: model $([ "$(md5sum < "$TMP/m.bin.tmp")" = "$sum" ] && echo intact || echo CHANGED); files: $(ls "$TMP" | grep -E '^(x|m)\.bin' | tr '\n' ' ')"
fi
# a context shorter than the default prompt: the probe cut to fit, the induction probe shorter, in
# both trainers (standard_tiny with max_seq_len 16: its position table cut to 16 rows)
$PY - "$M" "$TMP/ctx16.bin" <<'EOF'
import sys
import numpy as np
raw = open(sys.argv[1], "rb").read()
h = np.frombuffer(raw[:1024], dtype="<i4").copy()
T, C, Vp = int(h[2]), int(h[6]), int(h[7])
wte_end = 1024 + 4 * Vp * C  # an fp32 file (version 6): wte (Vp, C), then wpe (T, C)
h[2] = 16
open(sys.argv[2], "wb").write(h.tobytes() + raw[1024:wte_end] + raw[wte_end:wte_end + 4 * 16 * C] + raw[wte_end + 4 * T * C:])
EOF
for bin in $CPU build/cudacpu/train_gpt2cu_standard_fp32; do
    [ -x "$bin" ] || continue
    if "$bin" -e "$TMP/ctx16.bin" --dump_attention "$TMP/ctx16_maps.bin" --attention_csv "$TMP/ctx16.csv" > "$TMP/ctx16.log" 2>&1 &&
       grep -q "prompt of 16 tokens .*induction probe: end-of-text + 7 random tokens" "$TMP/ctx16.log" &&
       $CHECK verify "$TMP/ctx16_maps.bin" "$TMP/ctx16.csv" --name ctx16 > "$TMP/ctx16_check.log"; then
        pass "attention_maps $bin, a 16-token context: $(grep -m1 '^attention maps' "$TMP/ctx16.log" | cut -c1-150)"
    else
        fail "attention_maps $bin, a 16-token context: $(grep -m1 'error\|^attention maps' "$TMP/ctx16.log") $(grep -m1 FAIL "$TMP/ctx16_check.log" 2>/dev/null)"
    fi
done
# --check_args describes the run and writes nothing
if $CPU -e "$M" --prompt_tokens "$TMP/prompt.txt" --dump_attention "$TMP/out.bin" --check_args 1 > "$TMP/check.out" 2>&1 &&
   grep -q "would look at attention on $TMP/prompt.txt and the induction probe, writing $TMP/out.bin" "$TMP/check.out" &&
   [ ! -e "$TMP/out.bin" ]; then
    pass "attention_maps --check_args 1: $(grep -m1 check_args "$TMP/check.out" | cut -c1-150)"
else
    fail "attention_maps --check_args 1: $(tail -n 2 "$TMP/check.out")"
fi

# ---------------------------------------------------------------------------------------------
# (e) the pictures, on the tiny fixtures' maps: a PNG of many colours each
# png_ok NAME FILE: exists, over 10 KB, at least 50 distinct colours and 10% of its pixels not white
png_ok() {
    local name=$1 file=$2 facts
    if facts=$($PY - "$file" <<'EOF'
import sys
import matplotlib.image as mpimg
import numpy as np
img = mpimg.imread(sys.argv[1])[..., :3]
colours = len(np.unique((img.reshape(-1, 3) * 255).astype(np.uint8), axis=0))
inked = float(np.mean(np.any(img < 0.95, axis=-1)))
print(f"{img.shape[1]}x{img.shape[0]} pixels, {colours} colours, {inked:.0%} not white")
sys.exit(0 if colours >= 50 and inked >= 0.10 else 1)
EOF
    ) && [ "$(stat -c %s "$file")" -gt 10240 ]; then
        pass "attention_maps.py $name: $file, $(stat -c %s "$file") bytes, $facts"
    else
        fail "attention_maps.py $name: $file missing, small or blank (${facts:-unreadable})"
    fi
}
S=$TMP/cpu_standard_tiny
Q=$TMP/cpu_qkv_shared_tiny
$TOOL grid "$S.bin" -o "$TMP/grid.png" > "$TMP/plot.log" 2>&1 && png_ok grid "$TMP/grid.png" || fail "attention_maps.py grid: $(tail -n 1 "$TMP/plot.log")"
$TOOL grid "$Q.bin" --scores -o "$TMP/scores.png" > "$TMP/plot.log" 2>&1 && png_ok "grid --scores" "$TMP/scores.png" || fail "attention_maps.py grid --scores: $(tail -n 1 "$TMP/plot.log")"
$TOOL compare "$S.bin" "$Q.bin" --names standard qkv_shared --seq induction -o "$TMP/compare.png" > "$TMP/plot.log" 2>&1 &&
    png_ok "compare (induction probe)" "$TMP/compare.png" || fail "attention_maps.py compare: $(tail -n 1 "$TMP/plot.log")"
$TOOL diagnostics "$S.csv" "$Q.csv" --names standard qkv_shared -o "$TMP/diagnostics.png" > "$TMP/plot.log" 2>&1 &&
    png_ok diagnostics "$TMP/diagnostics.png" || fail "attention_maps.py diagnostics: $(tail -n 1 "$TMP/plot.log")"
if $TOOL grid "$S.csv" -o "$TMP/bad.png" > /dev/null 2> "$TMP/plot.err"; then
    fail "attention_maps.py grid of a CSV: accepted"
else
    grep -q "^error: .*not an attention maps file" "$TMP/plot.err" && [ ! -e "$TMP/bad.png" ] &&
        pass "attention_maps.py refuses a file that is not a maps file: $(head -n 1 "$TMP/plot.err" | cut -c1-150)" ||
        fail "attention_maps.py grid of a CSV: $(head -n 1 "$TMP/plot.err")"
fi

# ---------------------------------------------------------------------------------------------
# (f) the inspection run and two refusals under ASan, LSan and UBSan (make asan's CPU trainer)
if make -s build/asan/train_gpt2_cpu_standard > "$TMP/build_asan.log" 2>&1; then
    export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:exitcode=66 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
    for case in ok:0:prompt.txt word:1:word_prompt.txt long:1:long_prompt.txt; do
        IFS=: read -r what want file <<< "$case"
        build/asan/train_gpt2_cpu_standard -e "$M" --prompt_tokens "$TMP/$file" --dump_attention "$TMP/asan.bin" \
            --attention_csv "$TMP/asan.csv" > "$TMP/asan_$what.log" 2>&1
        rc=$?
        if [ $rc -eq "$want" ] && ! grep -q "Sanitizer\|runtime error" "$TMP/asan_$what.log"; then
            pass "attention_maps under ASan/UBSan ($file): exit $rc, no report"
        else
            fail "attention_maps under ASan/UBSan ($file): exit $rc (expected $want): $(grep -m1 "Sanitizer\|runtime error\|error" "$TMP/asan_$what.log")"
        fi
    done
else
    fail "attention_maps: build/asan/train_gpt2_cpu_standard: build failed: $(grep -m1 error "$TMP/build_asan.log")"
fi

echo "attention_maps: $((SECONDS - start)) s"
[ $nfail -eq 0 ]
