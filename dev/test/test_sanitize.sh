#!/usr/bin/env bash
# test_sanitize.sh: the CPU tools' error paths, and one normal run of each, under AddressSanitizer,
# LeakSanitizer and UBSan: the build/asan/ twins (`make asan`, -fsanitize=address,undefined,
# any UB fatal). Every refusal must exit 1..127 with a one-line error on stderr AND leave no
# sanitizer report; every normal run must exit 0 with no report (so a leak at a normal exit counts).
#
#   bash dev/test/test_sanitize.sh       (from anywhere; about 2 minutes on 2 cores)
#
# The malformed inputs are the other suites' own, not copies:
# (a) train_gpt2_cpu: the flag refusals of test_cpu.sh (h) (its FLAGS list, read from the file),
#     the corrupt checkpoints and debug states of test_cpu.sh (d) (same recipes), a checkpoint of
#     another scheme (b), the forbidden shapes of the standard scheme (c), and errors after the model
#     is loaded (tokens outside the vocabulary in -i / -j / --prompt, -y 1 past -x); NaN, Inf and
#     3e38 weights and a NaN AdamW moment, refused, then loaded with --allow_nonfinite 1 (training,
#     --generate, the checkpoint writer's refusal)
# (b) test_gpt2_cpu: the same corrupt files, debug states without inputs or with a bad token;
#     test_kv_cache_cpu: a debug state without inputs
# (c) the happy paths: a fresh d2 run (2 steps, validation, a sample, a checkpoint) on 2 OpenMP
#     threads, a resume (-y 1) of a fixture run, --generate, a fixture through test_gpt2_cpu and
#     test_kv_cache_cpu, build/params
# (d) build/params: the refusals of test_params.sh (its bad_args list)
# (e) encode_text: the refusals of test_data.sh (its `bad` lines), broken vocabulary files, and
#     an encoding with a validation split
# (f) test_dataloader (every case of dataloader.h) and test_tokenizer.sh with the asan binary
# The lists read from other suites run here without those suites' setup: a case added there that
# needs a file of its own must find it here too (here: $m, $TMP/synth_*, $tmp/doc1.txt, doc2.txt).
#
# Not here: huge header fields (n_embd >= 2^29) overflow int in gpt2_config_default / qkv_layout;
# the fuzzing work owns that fix and its tests (dev/fuzz/).
# No suppression file: libgomp's thread pool reports no leak at exit here (checked with 2 threads).
set -u
cd "$(dirname "$0")/../.."
PY=${PYTHON:-/usr/bin/python3}
A=build/asan
FIX=dev/fixtures
MANIFEST=$FIX/manifest.tsv
export OMP_NUM_THREADS=1 # the machine is shared; the happy path uses 2 threads on purpose
# exitcode: a leak report alone must not pass as the refusal's own exit code 1
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:exitcode=66
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
# (a LeakSanitizer that cannot run, e.g. under ptrace in some containers, says "fatal error": a report too)
LIMIT=120 # seconds for one run: a refusal that starts training instead must not hang the suite
REPORT='ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error|LeakSanitizer has encountered a fatal error'

npass=0
nfail=0
pass() { echo "PASS sanitize $*"; npass=$((npass + 1)); }
fail() { echo "FAIL sanitize $*"; nfail=$((nfail + 1)); }

TMP=$(mktemp -d "${TMPDIR:-/tmp}/test_sanitize.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

if nice make -s -j2 asan > "$TMP/build.log" 2>&1; then
    pass "build (make asan: train_gpt2_cpu, test_gpt2_cpu, test_kv_cache_cpu (standard), params, encode_text, test_tokenizer, test_dataloader in $A/)"
else
    tail -n 20 "$TMP/build.log"
    fail "build (make asan failed, see above)"
    echo "sanitize: $npass passed, $nfail failed"
    exit 1
fi

# the first sanitizer report line of $TMP/err, or nothing
report_of() { grep -m1 -E "$REPORT" "$TMP/err"; }

# refusal WHAT [NEEDLE] -- CMD...: exit 1..127, one line on stderr (containing NEEDLE), no report
refusal() {
    local what=$1 needle=""; shift
    if [ "$1" != "--" ]; then needle=$1; shift; fi
    shift
    timeout -k 5 "$LIMIT" "$@" > "$TMP/out" 2> "$TMP/err"; local rc=$?
    local rep; rep=$(report_of)
    local lines; lines=$(wc -l < "$TMP/err")
    if [ -n "$rep" ]; then
        fail "$what (sanitizer report: $rep; $(grep -m1 -E '^ *#[1-3] .* in ' "$TMP/err" | sed 's/^ *//'))"
    elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        fail "$what (still running after $LIMIT s, expected a refusal)"
    elif [ "$rc" -lt 1 ] || [ "$rc" -gt 127 ]; then
        fail "$what (exit code $rc, expected 1..127: $(head -c 200 "$TMP/err"))"
    elif [ "$lines" -ne 1 ]; then
        fail "$what (expected a one-line error, got $lines lines: $(head -c 300 "$TMP/err" | tr '\n' '|'))"
    elif [ -n "$needle" ] && ! grep -qF -- "$needle" "$TMP/err"; then
        fail "$what (error does not mention '$needle': $(cat "$TMP/err"))"
    else
        local shown
        shown=$(head -n 1 "$TMP/err" | cut -c1-160)
        [ "${#shown}" -lt "$(head -n 1 "$TMP/err" | wc -c | awk '{ print $1 - 1 }')" ] && shown="$shown ..."
        pass "$what (exit $rc, no report: $shown)"
    fi
}

# clean WHAT CHECK -- CMD...: exit 0, no report, then the shell condition CHECK on $TMP/out
clean() {
    local what=$1 check=$2; shift 3
    timeout -k 5 "$LIMIT" "$@" > "$TMP/out" 2> "$TMP/err"; local rc=$?
    local rep; rep=$(report_of)
    if [ -n "$rep" ]; then
        fail "$what (sanitizer report: $rep; $(grep -m1 -E '^ *#[1-3] .* in ' "$TMP/err" | sed 's/^ *//'))"
    elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        fail "$what (still running after $LIMIT s)"
    elif [ "$rc" -ne 0 ]; then
        fail "$what (exit code $rc: $(tail -n 1 "$TMP/err"))"
    elif ! eval "$check"; then
        fail "$what (exit 0 and no report, but not as expected: $check; $(tail -n 1 "$TMP/out"))"
    else
        pass "$what (exit 0, no report)"
    fi
}

# control: the same flags and options must report a leak at exit and a signed overflow, or every
# "no report" below would prove nothing (LSan needs ptrace; some containers forbid it)
printf '%s\n' '#include <stdio.h>' '#include <stdlib.h>' 'int main(int argc, char** argv) {' \
    '    if (argc > 1) { printf("%d\n", atoi(argv[1]) * 4); return 0; } // overflows for 2^29' \
    '    for (int i = 0; i < 8; i++) { volatile char* q = (char*)malloc(100); q[0] = 1; } // 7 at least unreachable' \
    '    return 1;' '}' > "$TMP/control.cpp"
asan_flags=$(make -s --no-print-directory -f Makefile -f - print_asan_flags <<< 'print_asan_flags: ; @echo $(ASAN_CXXFLAGS)')
# shellcheck disable=SC2086 # the flags are words
if ! g++ $asan_flags "$TMP/control.cpp" -o "$TMP/control" > "$TMP/control.log" 2>&1; then
    fail "control: cannot build a program with the asan flags '$asan_flags': $(head -n 1 "$TMP/control.log")"
else
    "$TMP/control" > /dev/null 2> "$TMP/err"; leak=$(report_of)
    "$TMP/control" 536870912 > /dev/null 2> "$TMP/err"; ub=$(report_of)
    if [[ "$leak" == *"ERROR: LeakSanitizer: detected memory leaks"* ]] && [[ "$ub" == *"runtime error"* ]]; then
        pass "control: a deliberate leak and a signed overflow are reported with these flags and options (so the checks below can fail)"
    else
        fail "control: a deliberate leak gave '${leak:-no report}', a signed overflow '${ub:-no report}' (HINT: LeakSanitizer needs ptrace; in a container run with --cap-add SYS_PTRACE)"
    fi
fi

if [ ! -f "$MANIFEST" ]; then
    fail "fixtures: $MANIFEST not found (HINT: /usr/bin/python3 dev/reference/make_fixtures.py --out dev/fixtures)"
    echo "sanitize: $npass passed, $nfail failed"
    exit 1
fi
model_of() { awk -F'\t' -v s="$1" '$2 == s { print $3; exit }' "$MANIFEST"; }
debug_of() { awk -F'\t' -v s="$1" '$2 == s { print $4; exit }' "$MANIFEST"; }
m=$(model_of standard); d=$(debug_of standard)
TRAIN=$A/train_gpt2_cpu_standard
TEST=$A/test_gpt2_cpu_standard
KV=$A/test_kv_cache_cpu_standard

# ---------------------------------------------------------------------------------------------
# inputs: test_cpu.sh's synthetic shards (tokens < the fixtures' vocab of 500), a shard of tokens
# outside it, its corrupt checkpoints (d), debug states without inputs / with a bad token
"$PY" dev/test/synth_shards.py "$TMP"
"$PY" - "$TMP" "$d" <<'EOF'
import struct, sys
out, debug = sys.argv[1], sys.argv[2]
def shard(path, toks):
    h = [0] * 256
    h[0], h[1], h[2] = 20240520, 1, len(toks)
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", *h))
        f.write(struct.pack(f"<{len(toks)}H", *toks))
shard(f"{out}/vocab60000_train_000.bin", [60000] * 3000)
# debug states: the records (name, 8 ints, data) of the fixture, filtered or patched
data = bytearray(open(debug, "rb").read())
h = list(struct.unpack("<256i", data[:1024]))
recs, off = [], 1024
for _ in range(h[4]):
    meta = struct.unpack("<8i", data[off + 64:off + 96])
    numel = meta[2] * meta[3] * meta[4] * meta[5]
    size = 96 + numel * (8 if meta[0] == 2 else 4)
    recs.append((bytes(data[off:off + 64]).split(b"\0")[0].decode(), off, size))
    off += size
def write(path, keep, patch=None):
    hh = list(h)
    hh[4] = len(keep)
    body = bytearray()
    for name, o, size in keep:
        r = bytearray(data[o:o + size])
        if patch and name == patch[0]:
            struct.pack_into("<i", r, 96, patch[1])
        body += r
    open(path, "wb").write(struct.pack("<256i", *hh) + body)
write(f"{out}/debug_no_inputs.bin", [r for r in recs if r[0] not in ("inputs", "targets")])
write(f"{out}/debug_bad_token.bin", recs, patch=("inputs", 99999))
EOF
size=$(stat -c %s "$m")
head -c $((size - 100)) "$m" > "$TMP/truncated.bin"
head -c 1000 "$m" > "$TMP/header_truncated.bin"
{ cat "$m"; head -c 8 /dev/zero; } > "$TMP/oversized.bin"
cp "$m" "$TMP/badmagic.bin"; printf '\x01\x02\x03\x04' | dd of="$TMP/badmagic.bin" bs=1 seek=0 conv=notrunc status=none
cp "$m" "$TMP/badversion.bin"; printf '\x04\x00\x00\x00' | dd of="$TMP/badversion.bin" bs=1 seek=4 conv=notrunc status=none
dsize=$(stat -c %s "$d")
head -c $((dsize / 2)) "$d" > "$TMP/debug_truncated.bin"
mkdir -p "$TMP/a_dir.bin"

# ---------------------------------------------------------------------------------------------
# (a) + (b) the corrupt files, through the trainer (-e) and the test binary
# the needle: the file's name, and for the directory what it is (not a truncated file)
needle_of() { if [ "$1" = a_dir ]; then echo "$TMP/a_dir.bin: is a directory"; else echo "$TMP/$1.bin"; fi; }
for f in truncated header_truncated oversized badmagic badversion missing_model a_dir; do
    refusal "train_gpt2_cpu -e $f.bin" "$(needle_of $f)" -- "$TRAIN" -e "$TMP/$f.bin"
    refusal "test_gpt2_cpu model $f.bin" "$(needle_of $f)" -- "$TEST" corrupt "$TMP/$f.bin" "$d"
done
for f in debug_truncated missing_debug a_dir debug_no_inputs debug_bad_token; do
    refusal "test_gpt2_cpu debug state $f.bin" "$(needle_of $f)" -- "$TEST" corrupt "$m" "$TMP/$f.bin"
done
refusal "test_kv_cache_cpu debug state debug_no_inputs.bin" "$TMP/debug_no_inputs.bin" -- "$KV" corrupt "$m" "$TMP/debug_no_inputs.bin"
# (b) of test_cpu.sh: another scheme's checkpoint
mq=$(model_of q_identity)
[ -n "$mq" ] && refusal "train_gpt2_cpu -e a q_identity checkpoint" "scheme q_identity" -- "$TRAIN" -e "$mq"
# (c) of test_cpu.sh: the forbidden shapes of the standard scheme, as header-only v6 files
n=0
while IFS=$'\t' read -r scheme L C H Hkv M bias; do
    case "$scheme" in standard) ;; *) continue ;; esac
    n=$((n + 1))
    "$PY" -c "
import struct, sys
h = [0] * 256
h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7] = 20240326, 6, 64, 500, $L, $H, $C, 512
h[8], h[9], h[10], h[11], h[12] = 0, $Hkv, $M, $bias, 1
open(sys.argv[1], 'wb').write(struct.pack('<256i', *h))" "$TMP/forbidden_$n.bin"
    refusal "train_gpt2_cpu -e forbidden shape L=$L C=$C H=$H Hkv=$Hkv M=$M bias=$bias" "$TMP/forbidden_$n.bin" -- \
        "$TRAIN" -e "$TMP/forbidden_$n.bin"
done < "$FIX/forbidden.tsv"

# (h) of test_cpu.sh: its list of flag refusals, read from the file so that a case added there runs
# here too (the message itself is test_cpu.sh's check; here: one line, no report)
flags=$(sed -n '/^done <<FLAGS$/,/^FLAGS$/p' dev/test/test_cpu.sh | sed '1d;$d')
if [ -z "$flags" ]; then
    fail "train_gpt2_cpu flags (no 'done <<FLAGS' list found in dev/test/test_cpu.sh)"
else
    while IFS='|' read -r what _ args; do
        args=$(eval "echo \"$args\"") # the list names \$m and \$TMP
        # shellcheck disable=SC2086 # the arguments are words on purpose
        refusal "train_gpt2_cpu flags $what" -- "$TRAIN" $args
    done <<< "$flags"
fi

# errors after the model is loaded: the data and the prompt are checked against its vocabulary
refusal "train_gpt2_cpu -i tokens outside the vocabulary" "token out of range" -- \
    "$TRAIN" -e "$m" -i "$TMP/vocab60000_train_*.bin" -v 0 -s 0 -b 2 -t 32 -x 2
refusal "train_gpt2_cpu -j tokens outside the vocabulary" "token out of range" -- \
    "$TRAIN" -e "$m" -i "$TMP/synth_train_*.bin" -j "$TMP/vocab60000_train_*.bin" -v 1 -s 0 -b 2 -t 32 -x 2
if [ -f dev/data/gpt2/encoder.json ]; then
    refusal "train_gpt2_cpu --prompt outside the vocabulary" "outside this model's vocabulary" -- \
        "$TRAIN" -e "$m" --generate 3 --prompt "Hello world"
else
    fail "train_gpt2_cpu --prompt (no dev/data/gpt2/encoder.json; HINT: bash dev/data/fetch_gpt2_vocab.sh)"
fi

# non-finite values (test_loop.sh (b) checks the messages): refused at load, and loaded anyway with
# --allow_nonfinite 1, through training, generation and the checkpoint writer's refusal, where
# NaN and Inf reach exp_fast and every softmax: UBSan must stay silent
"$PY" - "$m" "$TMP" <<'EOF'
import struct, sys
src, out = open(sys.argv[1], "rb").read(), sys.argv[2]
for name, value, every in (("nan", float("nan"), 7), ("inf", float("inf"), 7), ("3e38", 3e38, 1)):
    b = bytearray(src)
    n = (len(b) - 1024) // 4  # an fp32 fixture
    for i in range(0, n, every):
        b[1024 + 4 * i: 1028 + 4 * i] = struct.pack("<f", value)
    open(f"{out}/weights_{name}.bin", "wb").write(b)
EOF
nf=(-i "$TMP/synth_train_*.bin" -j "$TMP/synth_val_*.bin" -b 2 -t 32 -v 0 -s 0)
for w in nan inf 3e38; do
    refusal "train_gpt2_cpu $w weights refused at load" "tensor wte holds" -- "$TRAIN" -e "$TMP/weights_$w.bin" "${nf[@]}" -x 2
    refusal "train_gpt2_cpu $w weights, --allow_nonfinite 1, 2 steps" "non-finite steps in a row" -- \
        "$TRAIN" -e "$TMP/weights_$w.bin" --allow_nonfinite 1 "${nf[@]}" -x 2
    refusal "train_gpt2_cpu $w weights, --allow_nonfinite 1, --generate" "sampling at position" -- \
        "$TRAIN" -e "$TMP/weights_$w.bin" --allow_nonfinite 1 --generate 4
done
"$TRAIN" -e "$m" "${nf[@]}" -x 2 -n 2 -o "$TMP/nf_state" > /dev/null 2>&1
"$PY" -c "
import struct, sys
p = sys.argv[1]; b = bytearray(open(p, 'rb').read())
b[1088:1092] = struct.pack('<f', float('nan'))  # AdamW's m[0]
open(p, 'wb').write(b)" "$TMP/nf_state/state_00000002.bin"
refusal "train_gpt2_cpu a NaN AdamW moment refused at -y 1" "AdamW's first moment of wte holds nan" -- \
    "$TRAIN" -e "$m" "${nf[@]}" -x 4 -n 1 -o "$TMP/nf_state" -y 1 --reschedule 1
refusal "train_gpt2_cpu a NaN AdamW moment, --allow_nonfinite 1: the NaN weight is not written" "not written" -- \
    "$TRAIN" -e "$m" "${nf[@]}" -x 4 -n 1 -o "$TMP/nf_state" -y 1 --reschedule 1 --allow_nonfinite 1

# ---------------------------------------------------------------------------------------------
# (c) happy paths: leaks at a normal exit count too
OMP_NUM_THREADS=2 clean "train_gpt2_cpu fresh d2 run, 2 OpenMP threads (2 steps, val, sample, checkpoint)" \
    'grep -q "^step 2 | val loss" "$TMP/out" && grep -q "^generating:" "$TMP/out" && [ -f "$TMP/fresh/model_00000002.bin" ]' -- \
    "$TRAIN" -e d2 --n_embd 64 --n_head 2 --n_kv_head 1 -i "$TMP/synth_train_*.bin" -j "$TMP/synth_val_*.bin" \
    -b 1 -t 16 -x 2 -v 2 -m 1 -s 2 -g 4 -n 2 -o "$TMP/fresh"
common=(-e "$m" -i "$TMP/synth_train_*.bin" -j "$TMP/synth_val_*.bin" -b 2 -t 32 -x 4 -v 2 -m 1 -s 4 -g 4 -n 2 -o "$TMP/fix")
clean "train_gpt2_cpu fixture run with checkpoints" '[ -f "$TMP/fix/state_00000004.bin" ]' -- "$TRAIN" "${common[@]}"
rm -f "$TMP/fix/model_00000004.bin" "$TMP/fix/state_00000004.bin"
clean "train_gpt2_cpu resume (-y 1)" 'grep -q "^resuming from .* at step 2" "$TMP/out"' -- "$TRAIN" "${common[@]}" -y 1
# after the model and the loaders are built: a state past the run's last step
refusal "train_gpt2_cpu -y 1 at a step past -x" "past this run's 1 steps" -- "$TRAIN" "${common[@]}" -y 1 -x 1
clean "train_gpt2_cpu --generate" 'grep -q "^generate: " "$TMP/out"' -- "$TRAIN" -e "$m" --generate 8
clean "test_gpt2_cpu standard fixture" 'grep -q "^PASS cpu " "$TMP/out"' -- "$TEST" sanitize "$m" "$d"
clean "test_kv_cache_cpu standard fixture" 'grep -q "^PASS kv_cache_cpu " "$TMP/out"' -- "$KV" sanitize "$m" "$d"
clean "params (dev/SCHEMES.md's table)" '[ "$(grep -c "^scheme=" "$TMP/out")" -ge 20 ]' -- "$A/params"
clean "params memory d12" 'grep -q "^total " "$TMP/out"' -- "$A/params" memory d12 1024 64

# ---------------------------------------------------------------------------------------------
# (d) test_params.sh's refusals
eval "$(sed -n '/^bad_args=(/,/^)/p' dev/test/test_params.sh)"
if [ "${#bad_args[@]}" -eq 0 ]; then
    fail "params refusals (no bad_args list found in dev/test/test_params.sh)"
else
    for args in "${bad_args[@]}"; do
        # shellcheck disable=SC2086 # word splitting of the argument list is wanted
        refusal "params $args" -- "$A/params" $args
    done
fi

# ---------------------------------------------------------------------------------------------
# (e) encode_text: test_data.sh's `bad` lines (run with the asan binary), then vocabulary files
# that are broken, and a real encoding with a validation split
tmp=$TMP # the name test_data.sh's lines use
printf 'It is a truth universally acknowledged, that a single man in possession\nof a good fortune, must be in want of a wife.\n' > "$tmp/doc1.txt"
printf 'Emma Woodhouse, handsome, clever, and rich,\n\nwith a comfortable home.' > "$tmp/doc2.txt"
bad_lines=$(grep -E '^bad [a-z_]+ ' dev/test/test_data.sh)
if [ -z "$bad_lines" ]; then
    fail "encode_text refusals (no 'bad NAME NEEDLE ARGS' lines found in dev/test/test_data.sh)"
else
    # the message is test_data.sh's check (with its setup); here: a one-line refusal, no report
    bad() { local name=$1; shift 2; refusal "encode_text $name" -- "$A/encode_text" "$@"; }
    eval "$bad_lines"
fi
V=dev/data/gpt2
if [ -f "$V/encoder.json" ] && [ -f "$V/vocab.bpe" ] && [ -f "$V/gpt2_tokenizer.bin" ]; then
    printf '{"a": 0, "b": }' > "$TMP/broken.json"
    head -c 1000 "$V/encoder.json" > "$TMP/truncated.json"
    awk 'NR == 2 { l2 = $0; next } NR == 3 { print; print l2; next } { print }' "$V/vocab.bpe" > "$TMP/swapped.bpe"
    head -c 100000 "$V/gpt2_tokenizer.bin" > "$TMP/tok_truncated.bin"
    cp "$V/gpt2_tokenizer.bin" "$TMP/tok_badmagic.bin"; printf '\x00' | dd of="$TMP/tok_badmagic.bin" bs=1 seek=0 conv=notrunc status=none
    refusal "encode_text --encoder malformed JSON" "$TMP/broken.json" -- "$A/encode_text" --encoder "$TMP/broken.json" --print-ids "$tmp/doc1.txt"
    refusal "encode_text --encoder truncated" "$TMP/truncated.json" -- "$A/encode_text" --encoder "$TMP/truncated.json" --print-ids "$tmp/doc1.txt"
    refusal "encode_text --vocab merges out of order" "$TMP/swapped.bpe" -- "$A/encode_text" --vocab "$TMP/swapped.bpe" --print-ids "$tmp/doc1.txt"
    refusal "encode_text --tokenizer truncated" "$TMP/tok_truncated.bin" -- "$A/encode_text" --tokenizer "$TMP/tok_truncated.bin" --print-ids "$tmp/doc1.txt"
    refusal "encode_text --tokenizer bad magic" "$TMP/tok_badmagic.bin" -- "$A/encode_text" --tokenizer "$TMP/tok_badmagic.bin" --print-ids "$tmp/doc1.txt"
    refusal "encode_text a directory as input" "$TMP/a_dir.bin" -- "$A/encode_text" -o "$TMP/enc/x" "$TMP/a_dir.bin"
    cp "$V/encoder.json" "$TMP/enc_copy.json"
    refusal "encode_text --write-decoder over --encoder" "is the same file as --encoder" -- \
        "$A/encode_text" --encoder "$TMP/enc_copy.json" --vocab "$V/vocab.bpe" --write-decoder "$TMP/enc_copy.json"
    mkdir -p "$TMP/enc_clash" && printf 'text\n' > "$TMP/enc_clash/c_train_000000.bin"
    refusal "encode_text an input named like an output shard" "is the same file as the input" -- \
        "$A/encode_text" -o "$TMP/enc_clash/c" "$TMP/enc_clash/c_train_000000.bin"
    for i in $(seq 1 30); do echo "Line $i of a document, long enough to be cut near its end: café — 😀."; done > "$TMP/long.txt"
    printf 'bad utf-8 \xff\xfe and \xc3 then text\n' >> "$TMP/long.txt"
    clean "encode_text shards with a validation split (and invalid UTF-8)" \
        '[ -f "$TMP/enc/e_train_000000.bin" ] && [ -f "$TMP/enc/e_val_000000.bin" ]' -- \
        "$A/encode_text" -q -o "$TMP/enc/e" --val-fraction 0.2 "$TMP/long.txt" "$tmp/doc1.txt"
else
    fail "encode_text vocabulary cases (no $V/encoder.json, vocab.bpe, gpt2_tokenizer.bin; HINT: bash dev/data/fetch_gpt2_vocab.sh)"
fi

# ---------------------------------------------------------------------------------------------
# (f) the unit tests of dataloader.h and the tokenizer, whole, with the asan binaries
clean "test_dataloader (every dataloader.h case)" '! grep -q "^FAIL" "$TMP/out" && grep -q "^PASS" "$TMP/out"' -- "$A/test_dataloader"
TEST_TOKENIZER=$A/test_tokenizer bash dev/test/test_tokenizer.sh > "$TMP/out" 2> "$TMP/err"; rc=$?
cat "$TMP/out" >> "$TMP/err"
rep=$(report_of)
np=$(grep -c '^PASS tokenizer' "$TMP/out"); nf=$(grep -c '^FAIL tokenizer' "$TMP/out")
if [ -n "$rep" ]; then
    fail "test_tokenizer.sh with $A/test_tokenizer (sanitizer report: $rep)"
elif [ "$rc" -ne 0 ] || [ "$nf" -gt 0 ] || [ "$np" -eq 0 ]; then
    fail "test_tokenizer.sh with $A/test_tokenizer (exit $rc, $np passed, $nf failed: $(grep -m1 '^FAIL' "$TMP/out"))"
else
    pass "test_tokenizer.sh with $A/test_tokenizer ($np checks passed, no report)"
fi

echo "sanitize: $npass passed, $nfail failed"
[ "$nfail" -eq 0 ]
