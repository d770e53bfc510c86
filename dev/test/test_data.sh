#!/usr/bin/env bash
# Tests of the data side: dataloader.h (build/test_dataloader), the vocabulary fetch, the shard
# writer dev/data/encode_text, the default corpus, the offline behaviour of the download scripts,
# and `make train` without a GPU (12 steps of its CPU recipe; SIGTERM, SIGHUP and SIGKILL to make
# during its run). One "PASS data ..." / "FAIL data ..."
# line per check; exits 1 if any check failed. Prepares what it needs itself (vocabulary via npm,
# small texts); about a minute.
set -u
cd "$(dirname "$0")/../.."
source dev/test/jobs.sh # verdict_of
PY=${PYTHON:-/usr/bin/python3}
command -v "$PY" >/dev/null 2>&1 || PY=python3
fails=0
pass() { echo "PASS data $*"; }
fail() { echo "FAIL data $*"; fails=$((fails + 1)); }
tmp=$(mktemp -d /tmp/test_data.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# ---------------------------------------------------------------- dataloader.h unit tests
if make -s build/test_dataloader >"$tmp/build.log" 2>&1; then
  # exit 1 comes with its FAIL lines; any other status (a crash) would otherwise print none
  ./build/test_dataloader | tee "$tmp/dataloader.log"; rc=${PIPESTATUS[0]}
  if [ "$rc" = 1 ]; then fails=$((fails + 1)); elif [ "$rc" != 0 ]; then fail "test_dataloader: exited with status $rc (crashed?)"; fi
  # the pinned shuffled order, derived again from dataloader.h's definition (splitmix64, rejection
  # sampling, Fisher-Yates) by an independent implementation: shards of 10, 7, 12 windows of 16
  ref=$("$PY" - <<'EOF'
M = (1 << 64) - 1
def splitmix64(s):
    s = (s + 0x9E3779B97F4A7C15) & M
    z = ((s ^ (s >> 30)) * 0xBF58476D1CE4E5B9) & M
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
    return s, z ^ (z >> 31)
def stream_seed(seed, epoch, stream):
    _, h = splitmix64(seed)
    _, h = splitmix64(h ^ ((epoch * 0xD1B54A32D192ED03) & M))
    return splitmix64(h ^ ((stream * 0xABC98388FB8FAC03) & M))[1]
def permutation(n, rng):
    out = list(range(n))
    for i in range(n, 1, -1):
        limit = M - (M % i)
        while True:
            rng, r = splitmix64(rng)
            if r < limit: break
        j = r % i
        out[i - 1], out[j] = out[j], out[i - 1]
    return out
windows, ids, seed = [10, 7, 12], [11, 12, 13], 42
shard = permutation(3, stream_seed(seed, 0, 0))[0]
order = permutation(windows[shard], stream_seed(seed, 0, 1 + shard))
print(" ".join("(%d,%d)" % (ids[shard], 16 * w) for w in order[:4]))
EOF
)
  got=$(sed -n 's/^PASS data shuffle_order_pinned seed 42 first windows (shard id, start): //p' "$tmp/dataloader.log")
  [ -n "$got" ] && [ "$got" = "$ref" ] && pass "shuffle_order_pinned_matches_python_reference: $ref" \
    || fail "shuffle_order_pinned_matches_python_reference: test_dataloader pinned '${got:-no PASS line}', the Python reference gives '$ref'"
else
  fail "build_test_dataloader: $(grep -m1 error "$tmp/build.log")"
fi

# ---------------------------------------------------------------- vocabulary and encode_text
if bash dev/data/fetch_gpt2_vocab.sh >"$tmp/fetch.log" 2>&1; then
  pass "fetch_gpt2_vocab: $(grep -m1 'encoder.json' "$tmp/fetch.log" | sed 's/^fetch_gpt2_vocab: //')"
else
  fail "fetch_gpt2_vocab: $(tail -n 1 "$tmp/fetch.log")"
fi
# the decode file that the trainers read for samples: ids of "Hello world" decode back
cat >"$tmp/dec.cpp" <<'EOF'
#include "tokenizer.h"
int main() {
    Tokenizer t;
    tokenizer_init(&t, "dev/data/gpt2/gpt2_tokenizer.bin");
    if (!t.init_ok) { return 1; }
    printf("%u %d %s%s\n", t.vocab_size, t.eot_token, tokenizer_decode(&t, 15496), tokenizer_decode(&t, 995));
    tokenizer_free(&t);
    return 0;
}
EOF
if g++ -O1 -std=c++17 -I. "$tmp/dec.cpp" -o "$tmp/dec" 2>"$tmp/dec.log" && dec=$("$tmp/dec" 2>&1) && [ "$dec" = "50257 50256 Hello world" ]; then
  pass "gpt2_tokenizer_bin_decodes: vocab 50257, eot 50256, 15496 995 -> 'Hello world'"
else
  fail "gpt2_tokenizer_bin_decodes: got '${dec:-$(head -n 1 "$tmp/dec.log")}', expected '50257 50256 Hello world'"
fi

if ! make -s dev/data/encode_text >"$tmp/build.log" 2>&1; then
  fail "build_encode_text: $(grep -m1 error "$tmp/build.log")"
  echo "(encode_text missing: the remaining checks cannot run)"
  exit 1
fi
ET=dev/data/encode_text

# reads shards: prints "tokens ok|bad" per shard, or the concatenated ids with --ids
cat >"$tmp/shards.py" <<'EOF'
import struct, sys
ids_mode = sys.argv[1] == "--ids"
out = []
for path in sys.argv[2:]:
    data = open(path, "rb").read()
    h = struct.unpack("<256i", data[:1024])
    n = h[2]
    ok = h[0] == 20240520 and h[1] == 1 and len(data) == 1024 + 2 * n
    toks = struct.unpack("<%dH" % n, data[1024:1024 + 2 * n]) if ok else ()
    if ids_mode:
        out.extend(toks)
    else:
        print(n, "ok" if ok else "bad")
if ids_mode:
    print(" ".join(map(str, out)))
EOF

# three documents in two files: one file holds two documents separated by <|endoftext|>
printf 'It is a truth universally acknowledged, that a single man in possession\nof a good fortune, must be in want of a wife.\n' >"$tmp/doc1.txt"
printf 'Emma Woodhouse, handsome, clever, and rich,\n\nwith a comfortable home.\n<|endoftext|>\nCall me Ishmael. Some years ago\x27s money: $1,234.56 \xe2\x80\x94 caf\xc3\xa9 \xf0\x9f\x98\x80  tabs\tand   spaces\n' >"$tmp/doc23.txt"
printf 'Emma Woodhouse, handsome, clever, and rich,\n\nwith a comfortable home.' >"$tmp/doc2.txt"
printf 'Call me Ishmael. Some years ago\x27s money: $1,234.56 \xe2\x80\x94 caf\xc3\xa9 \xf0\x9f\x98\x80  tabs\tand   spaces' >"$tmp/doc3.txt"
printf 'It is a truth universally acknowledged, that a single man in possession\nof a good fortune, must be in want of a wife.' >"$tmp/doc1s.txt"

# shards: [EOT] + ids(doc) per document, documents trimmed of surrounding whitespace
if $ET -o "$tmp/out/small" "$tmp/doc1.txt" "$tmp/doc23.txt" >"$tmp/enc.log" 2>&1; then
  expected=$( { echo 50256; $ET --print-ids "$tmp/doc1s.txt"; echo 50256; $ET --print-ids "$tmp/doc2.txt"; echo 50256; $ET --print-ids "$tmp/doc3.txt"; } | tr '\n' ' ' | sed 's/ *$//')
  got=$("$PY" "$tmp/shards.py" --ids "$tmp/out/small_train_000000.bin")
  header=$("$PY" "$tmp/shards.py" --check "$tmp/out/small_train_000000.bin")
  n_expected=$(echo "$expected" | wc -w)
  if [ "$got" = "$expected" ] && [ "$header" = "$n_expected ok" ] && [ ! -e "$tmp/out/small_val_000000.bin" ]; then
    pass "encode_shard_content: header magic/version/count ok, $n_expected tokens = EOT + ids of each of 3 documents"
  else
    fail "encode_shard_content: header '$header', expected '$n_expected ok'; ids equal: $([ "$got" = "$expected" ] && echo yes || echo no)"
  fi
else
  fail "encode_shard_content: encode_text failed: $(tail -n 1 "$tmp/enc.log")"
fi

# the shards load in dataloader.h (B=1, T=8) and give the same stream
cat >"$tmp/load.cpp" <<'EOF'
#include "dataloader.h"
int main(int argc, char** argv) {
    DataLoader dl; char msg[512];
    if (!dataloader_init(&dl, argv[1], 1, 8, 0, 0, msg, sizeof(msg))) { printf("%s\n", msg); return 1; }
    dataloader_next_batch(&dl);
    for (int i = 0; i < 8; i++) printf("%d ", dl.inputs[i]);
    printf("%d\n", dl.targets[7]);
    dataloader_free(&dl);
    return 0;
}
EOF
if g++ -O1 -std=c++17 -I. "$tmp/load.cpp" -o "$tmp/load" 2>"$tmp/load.log"; then
  first9=$("$PY" "$tmp/shards.py" --ids "$tmp/out/small_train_000000.bin" | cut -d' ' -f1-9)
  loaded=$("$tmp/load" "$tmp/out/small_train_*.bin" | sed 's/ *$//')
  [ "$loaded" = "$first9" ] && pass "dataloader_reads_encode_text_shards: first window $loaded" \
    || fail "dataloader_reads_encode_text_shards: got '$loaded', expected '$first9'"
else
  fail "dataloader_reads_encode_text_shards: compile error $(head -n 1 "$tmp/load.log")"
fi

# --print-ids equals js-tiktoken (the tokenizer developer's reference, dev/tokenizer/package.json)
if [ ! -d dev/tokenizer/node_modules/js-tiktoken ] && command -v npm >/dev/null 2>&1; then
  (cd dev/tokenizer && npm ci --silent --no-audit --no-fund >"$tmp/npm.log" 2>&1) || true
fi
if [ -d dev/tokenizer/node_modules/js-tiktoken ] && command -v node >/dev/null 2>&1; then
  all=ok
  for f in doc1.txt doc23.txt; do
    mine=$($ET --print-ids "$tmp/$f")
    ref=$(node dev/tokenizer/reference_ids.js special "$tmp/$f" 2>&1 | tr '\n' ' ' | sed 's/ *$//')
    [ "$mine" = "$ref" ] || { all="differs on $f: '$mine' vs '$ref'"; }
  done
  # a longer text with code, punctuation runs and indentation
  head -c 20000 dataloader.h >"$tmp/big.txt"
  mine=$($ET --print-ids "$tmp/big.txt")
  ref=$(node dev/tokenizer/reference_ids.js special "$tmp/big.txt" 2>&1 | tr '\n' ' ' | sed 's/ *$//')
  [ "$mine" = "$ref" ] || all="differs on 20000 bytes of dataloader.h"
  if [ "$all" = ok ]; then
    pass "print_ids_equals_js_tiktoken: 3 files, $(echo "$mine" | wc -w) tokens in the largest"
  else
    fail "print_ids_equals_js_tiktoken: $all"
  fi
else
  fail "print_ids_equals_js_tiktoken: node or js-tiktoken unavailable (HINT: cd dev/tokenizer && npm ci; $(tail -n 1 "$tmp/npm.log" 2>/dev/null))"
fi

# --print-ids of stdin
mine=$(printf 'Hello world' | $ET --print-ids -)
[ "$mine" = "15496 995" ] && pass "print_ids_stdin: 'Hello world' -> $mine" || fail "print_ids_stdin: 'Hello world' -> '$mine', expected '15496 995'"

# validation split by fraction: each document's tail, cut at a line boundary
for i in $(seq 1 40); do echo "Line $i of a document that is long enough to be cut somewhere near its end."; done >"$tmp/long.txt"
if $ET -o "$tmp/frac/f" --val-fraction 0.1 "$tmp/long.txt" >"$tmp/enc.log" 2>&1; then
  # expected: 36 lines... the cut is at the first newline after 90% of the characters
  read -r tr_n _ < <("$PY" "$tmp/shards.py" --check "$tmp/frac/f_train_000000.bin")
  read -r va_n _ < <("$PY" "$tmp/shards.py" --check "$tmp/frac/f_val_000000.bin")
  "$PY" - "$tmp/long.txt" "$tmp" <<'EOF'
import sys
t = open(sys.argv[1]).read().strip()
cut = t.find("\n", int(0.9 * len(t)))
open(sys.argv[2] + "/head.txt", "w").write(t[:cut])
open(sys.argv[2] + "/tail.txt", "w").write(t[cut:].lstrip())
EOF
  exp_train="50256 $($ET --print-ids "$tmp/head.txt")"
  exp_val="50256 $($ET --print-ids "$tmp/tail.txt")"
  got_train=$("$PY" "$tmp/shards.py" --ids "$tmp/frac/f_train_000000.bin")
  got_val=$("$PY" "$tmp/shards.py" --ids "$tmp/frac/f_val_000000.bin")
  if [ "$got_train" = "$exp_train" ] && [ "$got_val" = "$exp_val" ]; then
    pass "val_fraction_split: train $tr_n tokens, val $va_n tokens (last lines of the document)"
  else
    fail "val_fraction_split: train $tr_n / val $va_n tokens differ from the expected line-boundary cut"
  fi
else
  fail "val_fraction_split: $(tail -n 1 "$tmp/enc.log")"
fi

# validation split by file
if $ET -o "$tmp/vf/v" --val-file "$tmp/doc2.txt" "$tmp/doc1.txt" >"$tmp/enc.log" 2>&1; then
  got_val=$("$PY" "$tmp/shards.py" --ids "$tmp/vf/v_val_000000.bin")
  exp_val="50256 $($ET --print-ids "$tmp/doc2.txt")"
  got_train=$("$PY" "$tmp/shards.py" --ids "$tmp/vf/v_train_000000.bin")
  exp_train="50256 $($ET --print-ids "$tmp/doc1s.txt")"
  [ "$got_val" = "$exp_val" ] && [ "$got_train" = "$exp_train" ] && pass "val_file_split: val = EOT + ids(val file), train = the inputs" \
    || fail "val_file_split: shard ids differ from the expected documents"
else
  fail "val_file_split: $(tail -n 1 "$tmp/enc.log")"
fi

# sharding: --shard-size 20 -> shards of 20 tokens (the last shorter), same stream; a rerun with
# larger shards removes the stale higher-numbered shards
if $ET -o "$tmp/sh/s" --shard-size 20 "$tmp/doc1.txt" "$tmp/doc23.txt" >"$tmp/enc.log" 2>&1; then
  n_shards=$(ls "$tmp"/sh/s_train_*.bin | wc -l)
  sizes=$("$PY" "$tmp/shards.py" --check "$tmp"/sh/s_train_*.bin | cut -d' ' -f1 | tr '\n' ' ')
  got=$("$PY" "$tmp/shards.py" --ids "$tmp"/sh/s_train_*.bin)
  whole=$("$PY" "$tmp/shards.py" --ids "$tmp/out/small_train_000000.bin")
  all20=$(echo "$sizes" | awk '{ok=1; for (i=1;i<NF;i++) if ($i!=20) ok=0; print ok}')
  $ET -q -o "$tmp/sh/s" --shard-size 1000 "$tmp/doc1.txt" "$tmp/doc23.txt"
  left=$(ls "$tmp"/sh/s_train_*.bin | wc -l)
  if [ "$got" = "$whole" ] && [ "$all20" = 1 ] && [ "$n_shards" -gt 2 ] && [ "$left" = 1 ]; then
    pass "sharding: $n_shards shards of sizes $sizes= one stream; rerun left $left shard"
  else
    fail "sharding: $n_shards shards, sizes $sizes, same stream $([ "$got" = "$whole" ] && echo yes || echo no), $left left after rerun"
  fi
else
  fail "sharding: $(tail -n 1 "$tmp/enc.log")"
fi

# re-encoding over an existing dataset (same -o): replaced whole on success; on any error (empty
# input, empty validation split, a missing or unreadable later input, a read error or a signal
# mid-way) one line, exit 1, and every file of the old dataset byte-identical, no *.tmp left
for i in $(seq 1 30); do echo "Row $i of a newer, shorter text."; done >"$tmp/new.txt"
: >"$tmp/empty.txt"
re_make() { # the old dataset: 11 train shards + 1 val shard of 64 tokens
  rm -rf "$tmp/re" && $ET -q -o "$tmp/re/old" --val-fraction 0.1 --shard-size 64 "$tmp/long.txt"
}
re_sums() { # a checksum line per file (any *.tmp included), so a change, a loss or a leftover shows
  (cd "$tmp/re" && for f in *; do echo "$(cksum <"$f") $f"; done)
}
re_kept() { # NAME NEEDLE RC OUT: the check's verdict from encode_text's exit status and stderr
  local name=$1 needle=$2 rc=$3 out=$4 after
  after=$(re_sums)
  if [ "$rc" = 1 ] && [ "$(printf '%s\n' "$out" | wc -l)" = 1 ] && [[ "$out" == *"$needle"* ]] && [ "$after" = "$before" ]; then
    pass "reencode_keeps_dataset_$name: $(echo "$before" | wc -l) shards byte-identical, no *.tmp; $out"
  else
    fail "reencode_keeps_dataset_$name: rc=$rc (expected 1), stderr '$out' (expected one line with '$needle'), checksum lines that differ: $(diff <(echo "$before") <(echo "$after") | grep -c "^[<>]")"
  fi
}
re_case() { # NAME NEEDLE ARGS...: encode_text -o over the old dataset
  local name=$1 needle=$2 out rc; shift 2
  re_make; before=$(re_sums)
  out=$($ET -q -o "$tmp/re/old" --shard-size 64 "$@" 2>&1 >/dev/null); rc=$?
  re_kept "$name" "$needle" "$rc" "$out"
}
re_case empty_input "hold no text" --val-fraction 0.1 "$tmp/empty.txt"
re_case empty_val_split "validation split is empty" --val-fraction 0.0001 "$tmp/new.txt"
re_case missing_later_input "$tmp/nope.txt" --val-fraction 0.1 "$tmp/new.txt" "$tmp/nope.txt"
re_case directory_later_input "is a directory" --val-fraction 0.1 "$tmp/new.txt" "$tmp"
re_case missing_val_file "$tmp/nope.txt" --val-file "$tmp/nope.txt" "$tmp/new.txt"
# opens fine, fails while reading (EIO at offset 0): the error comes after new shards were written
re_case read_error_midway "error reading '/proc/self/mem'" --val-fraction 0.1 "$tmp/new.txt" /proc/self/mem
# SIGTERM while it waits on standard input, the second input, after the first one's shards were written
re_make; before=$(re_sums)
rm -f "$tmp/fifo" && mkfifo "$tmp/fifo"
$ET -q -o "$tmp/re/old" --shard-size 64 --val-fraction 0.1 "$tmp/new.txt" - <"$tmp/fifo" 2>"$tmp/sig.err" >/dev/null &
pid=$!
exec 7>"$tmp/fifo"  # the writer end stays open: encode_text blocks reading it
for i in $(seq 1 100); do  # until the first input is encoded (new or changed files), at most 10 s
  [ "$(re_sums)" != "$before" ] && break
  sleep 0.1
done
sleep 0.3
kill -TERM "$pid" 2>/dev/null
exec 7>&-
wait "$pid"; rc=$?
re_kept sigterm_midway "interrupted by signal 15" "$rc" "$(cat "$tmp/sig.err")"
# a successful re-encode with fewer shards and no validation split: exactly the new shards remain
# (the old dataset's other train shards and its val shard removed), also a .tmp an earlier killed run left
re_make; touch "$tmp/re/old_train_000099.bin.tmp"
if out=$($ET -o "$tmp/re/old" --shard-size 1000 "$tmp/new.txt" 2>&1); then
  left=$(cd "$tmp/re" && ls | tr '\n' ' ')
  got=$("$PY" "$tmp/shards.py" --ids "$tmp/re/old_train_000000.bin")
  printf '%s' "$(cat "$tmp/new.txt")" >"$tmp/new_s.txt"  # the document as the shard holds it: no final newline
  exp="50256 $($ET --print-ids "$tmp/new_s.txt")"
  if [ "$left" = "old_train_000000.bin " ] && [ "$got" = "$exp" ] && [[ "$out" == *"removed 11 shard(s)"* ]]; then
    pass "reencode_fewer_shards_replaces_dataset: 11 train + 1 val shards -> $left(the new text), $(echo "$out" | tail -n 1 | sed 's/ of the earlier.*//')"
  else
    fail "reencode_fewer_shards_replaces_dataset: files left '$left' (expected old_train_000000.bin only), ids equal $([ "$got" = "$exp" ] && echo yes || echo no), output '$(echo "$out" | tail -n 1)'"
  fi
else
  fail "reencode_fewer_shards_replaces_dataset: $(echo "$out" | tail -n 1)"
fi

# bad input: exit 1 with one line on stderr that names the flag or file
bad() { # NAME NEEDLE ARGS...
  local name=$1 needle=$2; shift 2
  local out rc
  out=$($ET "$@" 2>&1 >/dev/null); rc=$?
  if [ "$rc" = 1 ] && [ "$(printf '%s\n' "$out" | wc -l)" = 1 ] && [[ "$out" == *"$needle"* ]]; then
    pass "error_$name: $out"
  else
    fail "error_$name: rc=$rc, stderr '$out', expected one line with '$needle'"
  fi
}
bad unknown_flag "'--bogus'" --bogus -o "$tmp/x" "$tmp/doc1.txt"
bad missing_input "$tmp/nope.txt" -o "$tmp/x" "$tmp/nope.txt"
bad val_fraction_range "--val-fraction expects a number in [0, 1), got '1.5'" -o "$tmp/x" --val-fraction 1.5 "$tmp/doc1.txt"
bad val_fraction_text "got 'abc'" -o "$tmp/x" --val-fraction abc "$tmp/doc1.txt"
bad no_output "-o PREFIX is required" "$tmp/doc1.txt"
bad empty_output "-o '': expected a file-name prefix" -o "" "$tmp/doc1.txt"
bad folder_output "-o '$tmp/': expected a file-name prefix" -o "$tmp/" "$tmp/doc1.txt"
bad no_input "no input files" -o "$tmp/x"
bad fraction_and_file "exclude each other" -o "$tmp/x" --val-fraction 0.1 --val-file "$tmp/doc2.txt" "$tmp/doc1.txt"
bad missing_value "-o expects a value" "$tmp/doc1.txt" -o
bad missing_vocab "$tmp/none.json" --encoder "$tmp/none.json" --print-ids "$tmp/doc1.txt"
bad shard_size "--shard-size expects" --shard-size 0 -o "$tmp/x" "$tmp/doc1.txt"
bad unwritable_output "cannot" -o /proc/nope/x "$tmp/doc1.txt"

# outputs never replace inputs: an output path that is an input (the same device and inode, so
# symlinks, hard links and ./x vs x count) is refused before anything is read: exit 1, one line
# naming the flag and both paths, the input byte-identical, its folder unchanged (no .tmp, no shard)
CV=$tmp/clash/V; CD=$tmp/clash/D; ET_ABS=$PWD/$ET
rm -rf "$tmp/clash" && mkdir -p "$CV" "$CD"
cp dev/data/gpt2/encoder.json dev/data/gpt2/vocab.bpe "$CV/"
clash_ms=() # each refused run's wall time: argument parsing and the identity checks, nothing read
clash() { # NAME NEEDLE VICTIM [--in DIR] ARGS...: encode_text ARGS (from DIR if given) must refuse
  local name=$1 needle=$2 victim=$3 dir=. out rc t0 t1 before after; shift 3
  if [ "$1" = --in ]; then dir=$2; shift 2; fi
  cp "$victim" "$tmp/victim.copy"
  before=$(ls -la "$(dirname "$victim")" "$CV" "$CD")
  t0=$(date +%s%N)
  out=$(cd "$dir" && "$ET_ABS" "$@" 2>&1 >/dev/null); rc=$?
  t1=$(date +%s%N)
  clash_ms+=($(( (t1 - t0) / 1000000 )))
  after=$(ls -la "$(dirname "$victim")" "$CV" "$CD")
  if [ "$rc" = 1 ] && [ "$(printf '%s\n' "$out" | wc -l)" = 1 ] && [[ "$out" == *"$needle"* ]] && [[ "$out" == *"would destroy the input (HINT: "* ]] &&
     cmp -s "$victim" "$tmp/victim.copy" && [ "$before" = "$after" ]; then
    pass "refuse_output_over_input_$name: input byte-identical, folder unchanged; $out"
  else
    fail "refuse_output_over_input_$name: rc=$rc (expected 1), stderr '$out' (expected one line with '$needle'), input $(cmp -s "$victim" "$tmp/victim.copy" && echo intact || echo CHANGED), folder $([ "$before" = "$after" ] && echo unchanged || echo CHANGED)"
  fi
}
clash write_decoder_is_encoder "--write-decoder '$CV/encoder.json' is the same file as --encoder '$CV/encoder.json'" "$CV/encoder.json" \
  --encoder "$CV/encoder.json" --vocab "$CV/vocab.bpe" --write-decoder "$CV/encoder.json"
clash write_decoder_is_vocab "--write-decoder '$CV/vocab.bpe' is the same file as --vocab '$CV/vocab.bpe'" "$CV/vocab.bpe" \
  --encoder "$CV/encoder.json" --vocab "$CV/vocab.bpe" --write-decoder "$CV/vocab.bpe"
ln -s encoder.json "$CV/tok.bin"
clash write_decoder_symlink_to_encoder "--write-decoder '$CV/tok.bin' is the same file as --encoder '$CV/encoder.json'" "$CV/encoder.json" \
  --encoder "$CV/encoder.json" --vocab "$CV/vocab.bpe" --write-decoder "$CV/tok.bin"
clash write_decoder_dot_slash "--write-decoder './vocab.bpe' is the same file as --vocab 'vocab.bpe'" "$CV/vocab.bpe" --in "$CV" \
  --encoder encoder.json --vocab vocab.bpe --write-decoder ./vocab.bpe
cp "$CV/encoder.json" "$CV/dec.bin.tmp"  # the temporary name write_llmc writes first
clash write_decoder_tmp_is_encoder "--write-decoder '$CV/dec.bin' writes '$CV/dec.bin.tmp' first, which is the same file as --encoder '$CV/dec.bin.tmp'" "$CV/dec.bin.tmp" \
  --encoder "$CV/dec.bin.tmp" --vocab "$CV/vocab.bpe" --write-decoder "$CV/dec.bin"
rm -f "$CV/dec.bin.tmp"
# text files whose names a dataset -o $CD/d would write over (no shard of it exists yet)
printf 'A text file that happens to have the name of a shard.\n' >"$CD/d_train_000000.bin"
printf 'A validation text with the name of a validation shard.\n' >"$CD/d_val_000000.bin"
printf 'A text left under the name of a temporary shard.\n' >"$CD/d_train_000001.bin.tmp"
clash input_named_like_train_shard "-o $CD/d writes, replaces or removes '$CD/d_train_000000.bin', which is the same file as the input '$CD/d_train_000000.bin'" "$CD/d_train_000000.bin" \
  -o "$CD/d" "$CD/d_train_000000.bin"
clash val_file_named_like_val_shard "which is the same file as --val-file '$CD/d_val_000000.bin'" "$CD/d_val_000000.bin" \
  -o "$CD/d" --val-file "$CD/d_val_000000.bin" "$tmp/doc1.txt"
clash input_named_like_tmp_shard "'$CD/d_train_000001.bin.tmp', which is the same file as the input '$CD/d_train_000001.bin.tmp'" "$CD/d_train_000001.bin.tmp" \
  -o "$CD/d" "$tmp/doc1.txt" "$CD/d_train_000001.bin.tmp"
ln -s "$CD/d_train_000000.bin" "$tmp/clash/link.txt"
clash input_symlink_to_shard_name "'$CD/d_train_000000.bin', which is the same file as the input '$tmp/clash/link.txt'" "$CD/d_train_000000.bin" \
  -o "$CD/d" "$tmp/clash/link.txt"
ln -s "$CD/d_val_000000.bin" "$tmp/clash/vlink.txt"
clash val_file_symlink_to_shard_name "which is the same file as --val-file '$tmp/clash/vlink.txt'" "$CD/d_val_000000.bin" \
  -o "$CD/d" --val-file "$tmp/clash/vlink.txt" "$tmp/doc1.txt"
ln -s D "$tmp/clash/Dlink"
clash prefix_through_symlinked_folder "-o $tmp/clash/Dlink/d writes, replaces or removes '$tmp/clash/Dlink/d_train_000000.bin', which is the same file as the input '$CD/d_train_000000.bin'" "$CD/d_train_000000.bin" \
  -o "$tmp/clash/Dlink/d" "$CD/d_train_000000.bin"
clash input_dot_slash "-o d writes, replaces or removes './d_train_000000.bin', which is the same file as the input './d_train_000000.bin'" "$CD/d_train_000000.bin" --in "$CD" \
  -o d ./d_train_000000.bin
ln "$tmp/doc2.txt" "$CD/d_val_000007.bin"  # a hard link: the run would remove this name
clash input_hard_link_to_shard_name "'$CD/d_val_000007.bin', which is the same file as the input '$tmp/doc2.txt'" "$tmp/doc2.txt" \
  -o "$CD/d" "$tmp/doc2.txt"
rm -f "$CD/d_val_000007.bin"
clash stdin_redirected_from_shard_name "'$CD/d_train_000000.bin', which is the same file as standard input" "$CD/d_train_000000.bin" \
  -o "$CD/d" - <"$CD/d_train_000000.bin"
ms_sum=0; ms_max=0; for m in "${clash_ms[@]}"; do ms_sum=$((ms_sum + m)); [ "$m" -gt "$ms_max" ] && ms_max=$m; done
echo "data: refuse_output_over_input: ${#clash_ms[@]} refusals took $ms_sum ms in all, at most $ms_max ms each (process start, flags, the identity checks; nothing read)"

# the checks' own cost: 2000 shard names in -o's folder to stat, against none; --tokenizer names a
# missing file so the run stops right after the checks (the vocabulary load that would follow)
mkdir -p "$tmp/clash/many" "$tmp/clash/none"
(cd "$tmp/clash/many" && for i in $(seq 0 999); do printf -v n '%06d' "$i"; : >"m_train_$n.bin"; : >"m_val_$n.bin"; done)
check_ms() { # DIR: the best of 5 runs, in ms
  local best=999999 t0 t1 i
  for i in 1 2 3 4 5; do
    t0=$(date +%s%N); $ET --tokenizer "$tmp/clash/no_such.bin" -o "$1/m" "$tmp/doc1.txt" 2>/dev/null; t1=$(date +%s%N)
    [ $(( (t1 - t0) / 1000 )) -lt "$best" ] && best=$(( (t1 - t0) / 1000 ))
  done
  echo "$best"
}
us_many=$(check_ms "$tmp/clash/many"); us_none=$(check_ms "$tmp/clash/none")
echo "data: refuse_output_over_input: the checks over 2000 existing shard names: $((us_many / 1000)).$(printf '%03d' $((us_many % 1000))) ms per run vs $((us_none / 1000)).$(printf '%03d' $((us_none % 1000))) ms with none (best of 5)"

# controls: a normal run still works, with an input beside the dataset in its folder; a link left
# at a .tmp name (a shard's, the decoder's) is replaced, not written through
printf 'A text beside the dataset, under a name no shard has.' >"$CD/notes.txt"  # no newline: the shard holds it whole
printf 'a bystander file\n' >"$tmp/clash/bystander.txt"; cp "$tmp/clash/bystander.txt" "$tmp/clash/bystander.copy"
ln -s "$tmp/clash/bystander.txt" "$CD/e_train_000000.bin.tmp"
if out=$($ET -o "$CD/e" "$CD/notes.txt" 2>&1) && [ -f "$CD/e_train_000000.bin" ] && [ ! -L "$CD/e_train_000000.bin" ] &&
   [ ! -e "$CD/e_train_000000.bin.tmp" ] && [ "$("$PY" "$tmp/shards.py" --ids "$CD/e_train_000000.bin")" = "50256 $($ET --print-ids "$CD/notes.txt")" ] &&
   cmp -s "$tmp/clash/bystander.txt" "$tmp/clash/bystander.copy"; then
  pass "encode_beside_dataset_and_tmp_link: an input in -o's folder encodes; a symlink at the .tmp name replaced, its target untouched; $(echo "$out" | sed -n 2p)"
else
  fail "encode_beside_dataset_and_tmp_link: '$(echo "$out" | tail -n 1)'; shard $([ -f "$CD/e_train_000000.bin" ] && echo present || echo missing), bystander $(cmp -s "$tmp/clash/bystander.txt" "$tmp/clash/bystander.copy" && echo intact || echo CHANGED)"
fi
ln -s "$tmp/clash/bystander.txt" "$CV/dec.bin.tmp"
if out=$($ET --encoder "$CV/encoder.json" --vocab "$CV/vocab.bpe" --write-decoder "$CV/dec.bin" 2>&1) &&
   cmp -s "$CV/dec.bin" dev/data/gpt2/gpt2_tokenizer.bin && [ ! -e "$CV/dec.bin.tmp" ] && [ ! -L "$CV/dec.bin.tmp" ] &&
   cmp -s "$tmp/clash/bystander.txt" "$tmp/clash/bystander.copy"; then
  pass "write_decoder_new_path_and_tmp_link: $out, identical to dev/data/gpt2/gpt2_tokenizer.bin; a symlink at its .tmp name replaced, its target untouched"
else
  fail "write_decoder_new_path_and_tmp_link: '$out'; identical to gpt2_tokenizer.bin: $(cmp -s "$CV/dec.bin" dev/data/gpt2/gpt2_tokenizer.bin && echo yes || echo no), bystander $(cmp -s "$tmp/clash/bystander.txt" "$tmp/clash/bystander.copy" && echo intact || echo CHANGED)"
fi
# mix_text.py (prepare_mix.sh's cleaner, also a command of its own): OUT, or the OUT.tmp it writes
# first, that is IN is refused before IN is read; IN byte-identical
printf 'Genesis 1\n  1 In the beginning God created the heaven and the earth.\n' >"$tmp/clash/kjv.raw"
cp "$tmp/clash/kjv.raw" "$tmp/clash/kjv.copy"
ln -s kjv.raw "$tmp/clash/kjv.link"
cp "$tmp/clash/kjv.raw" "$tmp/clash/out.txt.tmp"; cp "$tmp/clash/kjv.raw" "$tmp/clash/out.copy"
mix_ok=""; mix_bad=""; MIX=$PWD/dev/data/mix_text.py
for c in "kjv.raw kjv.raw kjv.copy" "kjv.raw kjv.link kjv.copy" "out.txt.tmp out.txt out.copy"; do
  read -r in_f out_f copy_f <<<"$c"
  out=$(cd "$tmp/clash" && "$PY" "$MIX" kjv "$in_f" "$out_f" 2>&1); rc=$?
  if [ "$rc" = 1 ] && [ "$(printf '%s\n' "$out" | wc -l)" = 1 ] && [[ "$out" == *"is the same file as IN '$in_f'"*HINT* ]] && cmp -s "$tmp/clash/$in_f" "$tmp/clash/$copy_f"; then
    mix_ok="$mix_ok [$out]"
  else
    mix_bad="$mix_bad [IN $in_f OUT $out_f: rc=$rc '$out', IN $(cmp -s "$tmp/clash/$in_f" "$tmp/clash/$copy_f" && echo intact || echo CHANGED)]"
  fi
done
if [ -z "$mix_bad" ] && "$PY" dev/data/mix_text.py kjv "$tmp/clash/kjv.raw" "$tmp/clash/kjv.txt" >/dev/null && grep -q 'In the beginning' "$tmp/clash/kjv.txt"; then
  pass "mix_text_refuses_output_over_input: IN as OUT, through a symlink, as OUT.tmp; a normal run writes OUT;$mix_ok"
else
  fail "mix_text_refuses_output_over_input:${mix_bad:- the normal run failed}"
fi

# ---------------------------------------------------------------- the default corpus
if bash dev/data/prepare_austen.sh >"$tmp/austen.log" 2>&1; then
  n_train=$(od -A n -t d4 -j 8 -N 4 dev/data/austen/austen_train_000000.bin | tr -d ' ')
  n_val=$(od -A n -t d4 -j 8 -N 4 dev/data/austen/austen_val_000000.bin | tr -d ' ')
  cat >"$tmp/austen.cpp" <<'EOF'
#include "dataloader.h"
int main() {
    DataLoader a, b; char msg[512];
    if (!dataloader_init(&a, "dev/data/austen/austen_train_*.bin", 16, 1024, 1, 1337, msg, sizeof(msg)) ||
        !dataloader_init(&b, "dev/data/austen/austen_val_*.bin", 16, 1024, 0, 0, msg, sizeof(msg))) { printf("%s\n", msg); return 1; }
    printf("%zu %zu\n", a.num_batches, b.num_batches);
    return 0;
}
EOF
  if ! g++ -O1 -std=c++17 -I. "$tmp/austen.cpp" -o "$tmp/austen" 2>"$tmp/austen_build.log"; then
    fail "austen_corpus: compile error $(head -n 1 "$tmp/austen_build.log")"
  elif batches=$("$tmp/austen"); then
    if [ "$n_train" -gt 900000 ] && [ "$n_val" -gt 40000 ]; then
      pass "austen_corpus: train $n_train tokens, val $n_val tokens; B=16 T=1024 batches per epoch (train val): $batches"
    else
      fail "austen_corpus: train $n_train, val $n_val tokens, expected > 900000 and > 40000"
    fi
  else
    fail "austen_corpus: the dataloader refuses the shards: $batches"
  fi
else
  fail "austen_corpus: $(tail -n 1 "$tmp/austen.log")"
fi

# ---------------------------------------------------------------- download scripts offline
for s in tinyshakespeare fineweb; do
  out=$(OUT_DIR=$tmp/$s TINYSHAKESPEARE_URL=http://127.0.0.1:9/input.txt FINEWEB_URL=http://127.0.0.1:9 bash dev/data/prepare_$s.sh 2>&1); rc=$?
  if [ "$rc" = 1 ] && [ "$(printf '%s\n' "$out" | wc -l)" = 1 ] && [[ "$out" == *unreachable* ]]; then
    pass "prepare_${s}_offline_message: $out"
  else
    fail "prepare_${s}_offline_message: rc=$rc, output '$out', expected one line saying the network is unreachable"
  fi
done

# ---------------------------------------------------------------- apt-get in make train and install_deps
# a fake apt-get, dpkg-query and id on PATH (nothing is installed): apt-get logs its arguments and
# answers as FAKE_APT says: "fail" (install fails after 30 lines of output), "update_fail", "lock N"
# (the first N calls find the package lists locked, as apt 2.6 does while another apt runs)
mkdir -p "$tmp/fakebin"
cat >"$tmp/fakebin/apt-get" <<'EOF'
#!/bin/bash
echo "$*" >>"$FAKE_APT_DIR/args"
calls=$(wc -l <"$FAKE_APT_DIR/args")
set -- $FAKE_APT "$@"
case "$1" in
  lock) if [ "$calls" -le "$2" ]; then echo "E: Could not get lock /var/lib/apt/lists/lock. It is held by process 4242 (apt-get)"; echo "E: Unable to lock directory /var/lib/apt/lists/"; exit 100; fi ;;
  fail) if [[ " $* " == *" install "* ]]; then for i in $(seq 1 30); do echo "Reading line $i"; done; echo "E: Unable to locate package llmc-fake-pkg"; exit 100; fi ;;
  update_fail) if [[ " $* " == *" update "* ]]; then echo "Err:1 http://deb.debian.org/debian bookworm InRelease"; echo "E: Failed to fetch http://deb.debian.org/debian/dists/bookworm/InRelease  Temporary failure resolving 'deb.debian.org'"; exit 100; fi ;;
esac
exit 0
EOF
printf '#!/bin/sh\nexit 1\n' >"$tmp/fakebin/dpkg-query"  # every package is missing
printf '#!/bin/sh\n[ "$1" = -u ] && { echo 0; exit 0; }\nexec /usr/bin/id "$@"\n' >"$tmp/fakebin/id"  # root
chmod +x "$tmp/fakebin/"*
printf 'source %q/dev/data/common.sh\napt_ensure llmc-fake-pkg\necho "installed"\n' "$PWD" >"$tmp/apt_user.sh"
fake_apt() { # MODE [COMMAND...]: runs COMMAND (default: apt_ensure llmc-fake-pkg via common.sh) with the fakes
  local mode=$1; shift
  rm -rf "$tmp/apt" && mkdir -p "$tmp/apt" && : >"$tmp/apt/args"
  [ $# -gt 0 ] || set -- bash "$tmp/apt_user.sh"
  FAKE_APT="$mode" FAKE_APT_DIR="$tmp/apt" APT_LOG="$tmp/apt/apt.log" APT_LOCK_RETRY=0.1 PATH="$tmp/fakebin:$PATH" \
    "$@" >"$tmp/apt/out" 2>"$tmp/apt/err"
}
apt_failed() { # NAME RC NEEDLE...: exit 1; apt's last output line shown; the last stderr line one error naming the command, with a HINT
  local name=$1 rc=$2 last n; shift 2
  last=$(tail -n 1 "$tmp/apt/err")
  local ok=1
  [ "$rc" = 1 ] && [[ "$last" == *HINT* ]] || ok=0
  for n in "$@"; do [[ "$last" == *"$n"* ]] || ok=0; done
  grep -q 'DPkg::Lock::Timeout=' "$tmp/apt/args" || ok=0
  if [ "$ok" = 1 ]; then
    pass "$name: $(grep -c '^    ' "$tmp/apt/err") lines of apt's output shown, then: $last"
  else
    fail "$name: rc=$rc (expected 1), stderr ends '$last' (expected one line with $* and a HINT), apt-get was called as '$(head -n 1 "$tmp/apt/args")' (expected -o DPkg::Lock::Timeout=...)"
  fi
}
fake_apt fail; rc=$?
if grep -q '^    E: Unable to locate package llmc-fake-pkg$' "$tmp/apt/err"; then
  apt_failed apt_install_failure_shows_output "$rc" "apt_user: apt-get install llmc-fake-pkg failed with exit code 100: E: Unable to locate package llmc-fake-pkg"
else
  fail "apt_install_failure_shows_output: apt's error 'E: Unable to locate package llmc-fake-pkg' not shown; stderr: '$(tr '\n' '|' <"$tmp/apt/err")'"
fi
fake_apt update_fail; rc=$?
if grep -q "^    E: Failed to fetch" "$tmp/apt/err" && [ "$(grep -c ' install ' "$tmp/apt/args")" = 0 ]; then
  apt_failed apt_update_failure_shows_output "$rc" "apt_user: apt-get update failed" "Temporary failure resolving" "reachable"
else
  fail "apt_update_failure_shows_output: apt's error 'E: Failed to fetch ...' not shown or install still tried; stderr: '$(tr '\n' '|' <"$tmp/apt/err")'"
fi
# another apt holds the lock for the first 3 calls: waited for (one line saying so), then installed
fake_apt "lock 3"; rc=$?
calls=$(tr '\n' '|' <"$tmp/apt/args")
if [ "$rc" = 0 ] && grep -q '^installed$' "$tmp/apt/out" && [ "$(grep -c 'waiting up to 600 s for another apt-get' "$tmp/apt/out")" = 1 ] &&
   [ "$(grep -c ' update$' "$tmp/apt/args")" = 4 ] && grep -q 'DPkg::Lock::Timeout=[0-9]* -y -qq install llmc-fake-pkg$' "$tmp/apt/args"; then
  pass "apt_waits_for_lock: 3 tries found the lock held, the 4th update and the install ran; $(grep waiting "$tmp/apt/out")"
else
  fail "apt_waits_for_lock: rc=$rc (expected 0 after waiting), output '$(tr '\n' '|' <"$tmp/apt/out")', stderr '$(tail -n 1 "$tmp/apt/err")', apt-get calls '$calls'"
fi
# held longer than APT_LOCK_TIMEOUT: one error saying so
APT_LOCK_TIMEOUT=1 fake_apt "lock 1000"; rc=$?
apt_failed apt_lock_timeout "$rc" "apt_user: apt-get update failed" "held its lock for 1 s"
# install_deps.sh (make test's first suite): the same apt_get (PYTHON=false: torch counts as missing)
fake_apt fail env PYTHON=/bin/false bash dev/test/install_deps.sh; rc=$?
if grep -q '^    E: Unable to locate package llmc-fake-pkg$' "$tmp/apt/err"; then
  apt_failed install_deps_apt_failure_shows_output "$rc" "install_deps: apt-get install python3-torch" "failed with exit code 100"
else
  fail "install_deps_apt_failure_shows_output: apt's error not shown; stderr: '$(tr '\n' '|' <"$tmp/apt/err")'"
fi

# ---------------------------------------------------------------- make train without a GPU
# trains on the CPU instead (the CPU trainer, d2): 12 steps of the recipe, into a folder of the test
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  echo "SKIP data make_train_cpu: this machine has a GPU (make train trains d12 there; gpu_suite.sh checks it)"
else
  out=$(CPU_STEPS=12 TRAIN_OUT="$tmp/train_cpu" bash dev/train/train.sh standard 2>&1); rc=$?
  printf '%s\n' "$out" >"$tmp/train_cpu.log"
  first=$(grep -m1 '^step 0 | val loss' "$tmp/train_cpu.log" | awk '{ print $NF }')
  last=$(grep '^step 12 | val loss' "$tmp/train_cpu.log" | awk '{ print $NF }')
  if [ "$rc" = 0 ] && grep -q "^make train: no CUDA GPU on this machine: training a d2 model" "$tmp/train_cpu.log" &&
     [ "$(grep -c '^step [0-9]*/12 | loss .* tok/s$' "$tmp/train_cpu.log")" = 12 ] && grep -q '^generating:' "$tmp/train_cpu.log" &&
     [ -f "$tmp/train_cpu/model_00000012.bin" ] && [ -f "$tmp/train_cpu/state_00000012.bin" ] && [ -n "$first" ] && [ -n "$last" ] &&
     awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 0.5) }'; then
    pass "make_train_cpu: no GPU, so the CPU trainer: 12 steps of the d2 recipe, val loss $first -> $last, a sample and a checkpoint ($(grep '^summary' "$tmp/train_cpu.log" | cut -d'|' -f3 | xargs))"
  else
    fail "make_train_cpu: rc=$rc, val loss '$first' -> '$last' (expected a drop of 0.5), last line '$(tail -n 1 "$tmp/train_cpu.log")'"
  fi
  # again into the same folder: the trainer refuses a fresh run into a used folder, so make train
  # replaces the old run (--overwrite 1, saying so), or continues it with TRAIN_ARGS="-y 1" (and
  # --reschedule 1 to train it longer: CPU_STEPS=3 is -x 3 where the run had 2)
  out=$(CPU_STEPS=2 TRAIN_OUT="$tmp/train_cpu" bash dev/train/train.sh standard 2>&1); rc=$?
  out2=$(CPU_STEPS=3 TRAIN_ARGS="-y 1 --reschedule 1" TRAIN_OUT="$tmp/train_cpu" bash dev/train/train.sh standard 2>&1); rc2=$?
  if [ "$rc" = 0 ] && grep -q "^make train: $tmp/train_cpu/ holds a previous run: replacing it" <<<"$out" &&
     grep -q "^--overwrite 1: removed the previous run's files from $tmp/train_cpu: main.log model_00000012.bin state_00000012.bin$" <<<"$out" &&
     [ "$rc2" = 0 ] && grep -q "^resuming from $tmp/train_cpu/state_00000002.bin at step 2" <<<"$out2" &&
     grep -q "^reschedule: from step 3/3 on, -x 2 -> 3;" <<<"$out2"; then
    pass "make_train_cpu_again: a second make train replaces the first run (--overwrite 1, the removed files listed); TRAIN_ARGS=\"-y 1 --reschedule 1\" resumes instead, one step longer ($(grep '^reschedule' <<<"$out2"))"
  else
    fail "make_train_cpu_again: rc=$rc/$rc2, $(grep -m1 'error\|replacing\|resuming' <<<"$out$out2")"
  fi
  # signals (issue 57): SIGTERM to make (which passes it on), SIGHUP to make's process group (a closed
  # terminal), SIGKILL to make (the trainer's parent-death SIGHUP, which make train's setpriv asks for):
  # each time the trainer stops at its next step with a checkpoint, make exits 128 + the signal, and
  # nothing is left running; the killed run then resumes (-y 1) to the 4-step run's model bit for bit
  # (without validation or the sample: -v 0 -s 0)
  start=$SECONDS
  train_signal_case() { # SIG:to: the run, the signal once step 1 is logged, the verdict into $o.result
    local sig=${1%%:*} to=${1#*:} o=$tmp/train_sig_${1/:/_} pid rc left at
    setsid env --default-signal=HUP,INT,TERM CPU_STEPS=4 TRAIN_ARGS="-v 0 -s 0" TRAIN_OUT="$o" make -s train >"$o.log" 2>&1 &
    pid=$!
    for _ in $(seq 1200); do grep -q '^step 1/4' "$o.log" 2>/dev/null && break; sleep 0.05; done
    if [ "$to" = make_group ]; then kill -$sig -- -$pid; else kill -$sig $pid; fi
    wait $pid 2>/dev/null # (quietly: bash would note the signal)
    rc=$?
    for _ in $(seq 300); do pgrep -f "$o" >/dev/null || break; sleep 0.1; done # the trainer ends its step first
    left=$(pgrep -f "$o" | wc -l)
    at=$(sed -n 's/^stopped by SIG[A-Z]* at step \([0-9]*\): checkpoint .*/\1/p' "$o/main.log" 2>/dev/null)
    if [ $rc = $((128 + $(kill -l "$sig"))) ] && [ "$left" = 0 ] && [ -n "$at" ] && [ "$at" -lt 4 ] && [ -f "$o/state_$(printf %08d "$at").bin" ]; then
      echo "PASS make_train_signal_${sig,,}_$to: SIG$sig to ${to/_/\'s } during its run: exit $rc, the trainer stopped with a checkpoint at step $at, nothing left running"
    else
      echo "FAIL make_train_signal_${sig,,}_$to: exit $rc (expected $((128 + $(kill -l "$sig")))), $left processes left, stopped at step '${at}': $(tail -n 2 "$o.log" | paste -sd' ' -)"
    fi >"$o.result"
    pkill -9 -f "$o" 2>/dev/null
  }
  # the uninterrupted run and the three cases at once
  CPU_STEPS=4 TRAIN_ARGS="-v 0 -s 0" TRAIN_OUT="$tmp/train_sig_ref" make -s train >"$tmp/train_sig_ref.log" 2>&1 &
  ref=$!
  for c in TERM:make HUP:make_group KILL:make; do train_signal_case $c & done
  wait $(jobs -p | grep -vx "$ref")
  wait $ref || fail "make_train_signal: the uninterrupted 4-step run failed: $(grep -m1 error "$tmp/train_sig_ref.log")"
  for c in TERM:make HUP:make_group KILL:make; do verdict_of "$tmp/train_sig_${c/:/_}.result"; done
  o=$tmp/train_sig_KILL_make
  CPU_STEPS=4 TRAIN_OUT="$o" TRAIN_ARGS="-v 0 -s 0 -y 1" make -s train >"$o.resume.log" 2>&1; rc=$?
  if [ $rc = 0 ] && cmp -s "$o/model_00000004.bin" "$tmp/train_sig_ref/model_00000004.bin"; then
    pass "make_train_signal_resume: after SIGKILL to make, TRAIN_ARGS=\"-y 1\" make train ends on the uninterrupted run's model, bit for bit"
  else
    fail "make_train_signal_resume: exit $rc, $(cmp "$o/model_00000004.bin" "$tmp/train_sig_ref/model_00000004.bin" 2>&1 | head -c 150)"
  fi
  echo "data: make train's signal checks took $((SECONDS - start)) s"
fi

[ "$fails" -eq 0 ]
