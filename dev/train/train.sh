#!/usr/bin/env bash
# `make train [QKV=<scheme>]`: prepares the GPT-2 vocabulary and the default corpus (Jane Austen,
# ~1M tokens) if missing, then trains a d12 GPT-2 from scratch with the given Q/K/V scheme on one
# GPU (a d2 on the CPU where there is none), printing a progress line per step, the validation
# loss and a generated sample.
#
#   bash dev/train/train.sh [SCHEME] [extra trainer flags...]     (SCHEME defaults to standard)
#   TRAIN_ARGS="-x 50" make train                                  (extra flags through make)
#   TRAIN_OUT=dir                                                   (logs and checkpoints there, not log_*/)
#   TRAIN_ARGS="-y 1" make train                                   (continue the run in the folder instead)
#   CPU_STEPS=500 TRAIN_ARGS="-y 1 --reschedule 1" make train       (train it longer: the cosine is
#                                                                   stretched from the resumed step, said so)
#
# `make train` trains from scratch: a previous run in its folder is replaced (the trainer's
# --overwrite 1, which lists the files it removes), unless the extra flags resume it (-y 1).
#
# Order: data first, then the GPU check, then the nvcc build (minutes, and only where it can run),
# then training. Without a GPU, the CPU trainer trains a small model instead (see the CPU recipe).
#
# The recipe, for ~0.94M training tokens and a budget of about 5 minutes on one H100:
#   B=16, T=1024, 32768 tokens per step (2 micro-steps of gradient accumulation), 150 steps
#   = 4.9M tokens, ~5 epochs: on a corpus this small a 124M model starts to overfit after a few
#   epochs, so more steps buy a lower train loss but not a lower validation loss.
#   AdamW lr 6e-4, 15 warmup steps, cosine decay to 0, weight decay 0.1; the shards and their
#   windows are reshuffled every epoch by the trainer's data loader.
#   Validation loss (all of the ~48K validation tokens) every 25 steps and at the end; a 128-token
#   sample and a checkpoint at the end, in log_<scheme>/.
#
# The CPU recipe (no GPU; a few minutes on 2 cores; CPU_STEPS=<n> changes its length):
#   d2 (2 layers, 128 channels, 2 heads, 7.0M parameters of which 6.4M are the token embedding),
#   B=8, T=128, 1024 tokens per step, 250 steps = 256K tokens (a quarter of an epoch); AdamW lr 2e-3
#   (a small model takes a larger rate), 10 warmup steps, cosine to 10%, weight decay 0.1;
#   validation on 4 batches every 50 steps, a 64-token sample and a checkpoint at the end, in
#   log_cpu_<scheme>/.
source "$(dirname "$0")/../data/common.sh"  # set -euo pipefail, the repository root, count_tokens

# Signals: the trainer replaces this script (exec), so a SIGTERM that make passes on, and the SIGHUP
# that make train's setpriv asks for at make's death, reach the trainer itself, which stops at its next
# step with a checkpoint. The steps before it (the data, the build) end with this script: a parent-death
# SIGTERM each, which make passes on to its compilers.
with_me() {
  if command -v setpriv >/dev/null 2>&1; then setpriv --pdeathsig TERM "$@"; else "$@"; fi
}

SCHEME=${1:-standard}
[ $# -gt 0 ] && shift
SCHEMES=$(make -s --no-print-directory schemes)
case " $SCHEMES " in
  *" $SCHEME "*) ;;
  *) echo "make train: QKV=$SCHEME is not a scheme; expected one of: $SCHEMES" >&2; exit 1 ;;
esac

# 1. data
with_me bash dev/data/prepare_austen.sh
DATA=dev/data/austen
TRAIN_TOKENS=$(count_tokens "$DATA/austen_train_*.bin")
VAL_TOKENS=$(count_tokens "$DATA/austen_val_*.bin")

# --overwrite 1 unless the caller resumes: the trainer refuses a fresh run into a used folder
start_flags() { # OUT, then the extra flags
  local out=$1; shift
  case " $* " in *" -y 1 "*) return ;; esac
  if [ -e "$out/main.log" ] || compgen -G "$out/model_*.bin" >/dev/null || compgen -G "$out/state_*.bin" >/dev/null; then
    echo "make train: $out/ holds a previous run: replacing it (TRAIN_ARGS=\"-y 1\" continues it instead)" >&2
    echo --overwrite 1
  fi
}

# 2. no GPU: the CPU trainer (dev/cpu/train_gpt2_cpu.cpp, OpenMP), same flags, a corpus-sized recipe
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  BIN=build/train_gpt2_cpu_$SCHEME
  OUT=${TRAIN_OUT:-log_cpu_$SCHEME}
  mkdir -p "$OUT"
  echo "make train: no CUDA GPU on this machine: training a d2 model ($SCHEME) with the CPU trainer $BIN on $(nproc) cores, logs in $OUT/"
  with_me make -s "$BIN"
  # (the trainer itself makes its OpenMP threads wait passively: openmp_wait_passively)
  START=$(start_flags "$OUT" ${TRAIN_ARGS:-} "$@")
  set -x
  exec "$BIN" \
    -i "$DATA/austen_train_*.bin" -j "$DATA/austen_val_*.bin" -o "$OUT" -e d2 \
    -b 8 -t 128 -x ${CPU_STEPS:-250} \
    -l 2e-3 -u 10 -q 0.1 -c 0.1 \
    -v 50 -m 4 -s ${CPU_STEPS:-250} -g 64 -n ${CPU_STEPS:-250} \
    $START ${TRAIN_ARGS:-} "$@"
fi

# 3. the trainer for this scheme (binary names of the Makefile: train_gpt2cu, train_gpt2cu_<scheme>)
BIN=./train_gpt2cu
[ "$SCHEME" = standard ] || BIN=./train_gpt2cu_$SCHEME
echo "make train: building $BIN (nvcc, takes a few minutes the first time)"
with_me make -s train_gpt2cu QKV="$SCHEME"

# 4. train
OUT=${TRAIN_OUT:-log_$SCHEME}
mkdir -p "$OUT"
echo "make train: d12 from scratch, scheme $SCHEME, $TRAIN_TOKENS train tokens, 150 steps x 32768 tokens, logs in $OUT/"
START=$(start_flags "$OUT" ${TRAIN_ARGS:-} "$@")
set -x
exec "$BIN" \
  -i "$DATA/austen_train_*.bin" -j "$DATA/austen_val_*.bin" -o "$OUT" -e d12 \
  -b 16 -t 1024 -d 32768 -x 150 \
  -l 6e-4 -u 15 -q 0.0 -c 0.1 \
  -v 25 -m -1 -s 150 -g 128 -n 150 \
  $START ${TRAIN_ARGS:-} "$@"
