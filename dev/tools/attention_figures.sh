#!/usr/bin/env bash
# attention_figures.sh: the figures of dev/ATTENTION_MAPS.md and the README's "Looking inside
# attention", from the checkpoints `make train` and the CPU ablation config produce:
#
#   make train                                           (no GPU: the CPU recipe, log_cpu_standard/)
#   make ablate CONFIG=dev/ablate/cpu.txt                (ablate_cpu/<run>/seed_1337/, ~50 min)
#   bash dev/tools/attention_figures.sh [TRAIN_MODEL] [ABLATE_OUT]
#
# TRAIN_MODEL defaults to the last model_*.bin in log_cpu_standard/, ABLATE_OUT to ablate_cpu/ (the
# figures use its seed 1337 runs: standard, q_identity, kv_shared, qkv_shared). Writes, into
# dev/figures/: attention_make_train.png (the README's), attention_schemes.png, attention_scores.png,
# attention_diagnostics.png; and prints each checkpoint's diagnostics table. The maps and CSVs go to a
# temporary folder. Needs the CPU trainers (make builds them) and /usr/bin/python3 with matplotlib.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-/usr/bin/python3}
TRAIN_MODEL=${1:-$(ls log_cpu_standard/model_*.bin 2>/dev/null | tail -n 1)}
ABLATE_OUT=${2:-ablate_cpu}
RUNS="standard q_identity kv_shared qkv_shared"
[ -n "$TRAIN_MODEL" ] && [ -f "$TRAIN_MODEL" ] ||
    { echo "attention_figures: no make train checkpoint (HINT: make train, or name one: bash $0 MODEL [ABLATE_OUT])" >&2; exit 1; }
for r in $RUNS; do
    [ -n "$(ls "$ABLATE_OUT/$r/seed_1337"/model_*.bin 2>/dev/null)" ] ||
        { echo "attention_figures: no model in $ABLATE_OUT/$r/seed_1337/ (HINT: make ablate CONFIG=dev/ablate/cpu.txt)" >&2; exit 1; }
done
make -s $(for r in $RUNS; do echo "build/train_gpt2_cpu_$r"; done)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p dev/figures

echo "== make train: $TRAIN_MODEL"
build/train_gpt2_cpu_standard -e "$TRAIN_MODEL" --dump_attention "$tmp/train.bin" --attention_csv "$tmp/train.csv" |
    sed -n '/^attention maps/,$p'
for r in $RUNS; do
    model=$(ls "$ABLATE_OUT/$r/seed_1337"/model_*.bin | tail -n 1)
    echo "== $r: $model"
    "build/train_gpt2_cpu_$r" -e "$model" --dump_attention "$tmp/$r.bin" --attention_csv "$tmp/$r.csv" | sed -n '/^attention maps/,$p'
done

T=dev/tools/attention_maps.py
$PY $T grid "$tmp/train.bin" -o dev/figures/attention_make_train.png
$PY $T compare $(for r in $RUNS; do echo "$tmp/$r.bin"; done) --names $RUNS --layers 0 3 -o dev/figures/attention_schemes.png
$PY $T compare "$tmp/standard.bin" "$tmp/qkv_shared.bin" --names standard qkv_shared --scores --layers 0 3 --heads 0 1 \
    -o dev/figures/attention_scores.png
$PY $T diagnostics $(for r in $RUNS; do echo "$tmp/$r.csv"; done) --names $RUNS -o dev/figures/attention_diagnostics.png
