#!/usr/bin/env bash
# Bit-for-bit fingerprints of the CUDA trainer on the CPU runtime (dev/cudacpu), for refactors that
# must not change a single result: every scheme, FP32 and BF16, both attention paths where BF16 has
# the flash kernels. Each run trains 3 steps from a reference fixture (with a validation pass and a
# checkpoint), then samples 8 tokens from the checkpoint it wrote; the line printed per run is the
# SHA-256 of the checkpoint, the training state, the loss lines and the sampled tokens. Run it before
# and after a change and diff the two outputs:
#
#   bash dev/tools/digests.sh > before.txt   # ... change ...   bash dev/tools/digests.sh > after.txt
#
# Needs the fixtures (/usr/bin/python3 dev/reference/make_fixtures.py --out dev/fixtures). About 10 min
# on 2 cores, most of it building the 16 trainers.
set -u
cd "$(dirname "$0")/../.."
out=build/digests
mkdir -p "$out"
SCHEMES=${DIGEST_SCHEMES:-$(make -s --no-print-directory schemes)} # DIGEST_SCHEMES="a b": only those
[ -f dev/fixtures/manifest.tsv ] || { echo "error: no dev/fixtures (HINT: /usr/bin/python3 dev/reference/make_fixtures.py --out dev/fixtures)" >&2; exit 1; }

targets=()
for s in $SCHEMES; do targets+=("build/cudacpu/train_gpt2cu_${s}_fp32" "build/cudacpu/train_gpt2cu_$s"); done
make -s -j2 "${targets[@]}" >"$out/build.log" 2>&1 || { echo "error: build failed, see $out/build.log" >&2; exit 1; }

shard="$out/tokens.bin"
python3 dev/test/tiny_shard.py "$shard" $((4 * 32 * 8 + 1)) 7

run() { # stem model flags... -> one line: stem model flags digest
  local stem=$1 model=$2
  shift 2
  local dir="$out/run_${stem}_$(basename "$model" _model.bin)$(echo "$*" | tr -c 'a-z0-9' _)"
  rm -rf "$dir"
  mkdir -p "$dir"
  local bin=build/cudacpu/train_gpt2cu_$stem
  "$bin" -e "$model" -i "$shard" -j "$shard" -b 4 -t 32 -x 3 -v 3 -m 2 -s 0 -n 3 -o "$dir" "$@" \
    >"$dir/train.log" 2>&1 || { echo "$stem $(basename "$model") $* FAILED (see $dir/train.log)"; return; }
  "$bin" -e "$dir/model_00000003.bin" --generate 8 --seed 5 --temperature 0.9 >"$dir/generate.log" 2>&1 ||
    { echo "$stem $(basename "$model") $* generate FAILED (see $dir/generate.log)"; return; }
  local digest
  digest=$( { cat "$dir/model_00000003.bin" "$dir/state_00000003.bin"
              grep -o 'loss [0-9.e+-]*' "$dir/main.log"
              sed -n '/^sampling: /,/^generate: /p' "$dir/generate.log" | grep -v '^generate: '; } | sha256sum | cut -c1-16)
  echo "$stem $(basename "$model") ${*:-default} $digest"
}

for s in $SCHEMES; do
  run "${s}_fp32" "dev/fixtures/${s}_tiny_model.bin"
  run "${s}_fp32" "dev/fixtures/${s}_tiny_model.bin" -r 2 -d 256
  run "$s" "dev/fixtures/${s}_hd64_model.bin" --attention fused
  run "$s" "dev/fixtures/${s}_hd64_model.bin" --attention unfused -r 1
done
