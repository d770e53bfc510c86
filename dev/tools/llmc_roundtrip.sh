#!/usr/bin/env bash
# A plain GPT-2 checkpoint written by our CPU trainer, loaded by llm.c's own CPU code: the file must
# be llm.c's version 3, llm.c must accept it, and llm.c's loss on a batch must equal ours (fp32 both,
# different summation orders: relative difference below 1e-5).
#
#   bash dev/tools/llmc_roundtrip.sh [LLMC_DIR] [TRAIN_SHARD VAL_SHARD]
#     LLMC_DIR     an llm.c source tree (default dev/bench/peers/llm.c, from dev/bench/prepare_peers.sh);
#                  llm.c is never part of this repository
#     *_SHARD      token shards (default dev/data/austen's first train and val shards)
# Prints one PASS or FAIL line; exits 0 on PASS, 1 on FAIL, 2 when LLMC_DIR is missing.
set -u
cd "$(dirname "$0")/../.."
llmc=${1:-dev/bench/peers/llm.c}
train=${2:-dev/data/austen/austen_train_000000.bin}
val=${3:-dev/data/austen/austen_val_000000.bin}
if [ ! -f "$llmc/train_gpt2.c" ]; then
    echo "llmc_roundtrip: $llmc/train_gpt2.c not found (HINT: bash dev/bench/prepare_peers.sh <llm.c clone>)" >&2
    exit 2
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/llmc_roundtrip.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL llmc round trip: $*"; exit 1; }

make -s build/train_gpt2_cpu_standard >"$tmp/make.log" 2>&1 || fail "make build/train_gpt2_cpu_standard failed: $(tail -n 3 "$tmp/make.log" | tr '\n' ' ')"
gcc -O2 -fopenmp -I"$llmc" dev/tools/llmc_load.c -lm -o "$tmp/llmc_load" >"$tmp/cc.log" 2>&1 ||
    fail "cannot build llm.c's loader from $llmc: $(head -n 3 "$tmp/cc.log" | tr '\n' ' ')"

# two training steps of a random d2 (2 layers, 128 channels, GPT-2's vocabulary), then its checkpoint
B=2 T=64
OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} ./build/train_gpt2_cpu_standard -e d2 -i "$train" -j "$val" -b $B -t $T -x 2 -v 2 -m 1 -s 0 \
    -n 2 -o "$tmp/run" >"$tmp/train.log" 2>&1 || fail "our CPU trainer failed: $(tail -n 1 "$tmp/train.log")"
model="$tmp/run/model_00000002.bin"
version=$(od -An -t d4 -j 4 -N 4 "$model" | tr -d ' ')
[ "$version" = 3 ] || fail "$model is version $version, expected llm.c's 3"
ours=$(grep "^step 2 | val loss" "$tmp/train.log" | awk '{ print $NF }')
[ -n "$ours" ] || fail "no 'step 2 | val loss' line in our trainer's output"
OMP_NUM_THREADS=1 "$tmp/llmc_load" "$model" "$val" $B $T >"$tmp/llmc.log" 2>&1 ||
    fail "llm.c refused $model: $(grep -v '^\[\|^[a-z_]*:' "$tmp/llmc.log" | head -n 2 | tr '\n' ' ')"
theirs=$(awk '/^llm.c loss/ { print $3 }' "$tmp/llmc.log")
awk -v a="$ours" -v b="$theirs" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(b != "" && d / b < 1e-5) }' ||
    fail "llm.c's loss $theirs differs from ours $ours on the same batch"
echo "PASS llmc round trip: our CPU trainer's d2 checkpoint is llm.c's version 3; llm.c ($(cat "$llmc/COMMIT" 2>/dev/null | cut -c1-7)) loads it, loss $theirs vs ours $ours on the first val batch (B $B T $T)"
