#!/usr/bin/env bash
# tinyshakespeare (Karpathy's char-rnn text, ~0.3M GPT-2 tokens), where the internet is reachable.
# One document; the last 10% (cut at a line boundary) is the validation split.
#
#   bash dev/data/prepare_tinyshakespeare.sh  ->  dev/data/tinyshakespeare/tiny_shakespeare_{train,val}_000000.bin
# Environment: OUT_DIR (default dev/data/tinyshakespeare), TINYSHAKESPEARE_URL (the source).
source "$(dirname "$0")/common.sh"
OUT=${OUT_DIR:-dev/data/tinyshakespeare}
URL=${TINYSHAKESPEARE_URL:-https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt}
if [ -f "$OUT/tiny_shakespeare_train_000000.bin" ] && [ -f "$OUT/tiny_shakespeare_val_000000.bin" ]; then
  info "$OUT is ready ($(count_tokens "$OUT/tiny_shakespeare_train_*.bin") train tokens, $(count_tokens "$OUT/tiny_shakespeare_val_*.bin") val tokens)"
  exit 0
fi
mkdir -p "$OUT"
if [ ! -s "$OUT/input.txt" ]; then
  rc=0
  curl -fsSL --connect-timeout 10 --max-time 300 -o "$OUT/input.txt.tmp" "$URL" 2>/dev/null || rc=$?
  if [ "$rc" != 0 ]; then
    rm -f "$OUT/input.txt.tmp"; rmdir "$OUT" 2>/dev/null || true
    download_failed "$rc" "$URL" tinyshakespeare
  fi
  mv "$OUT/input.txt.tmp" "$OUT/input.txt"
fi
bash dev/data/fetch_gpt2_vocab.sh
build_encode_text
dev/data/encode_text -o "$OUT/tiny_shakespeare" --val-fraction 0.1 "$OUT/input.txt"
info "$OUT is ready ($(count_tokens "$OUT/tiny_shakespeare_train_*.bin") train tokens, $(count_tokens "$OUT/tiny_shakespeare_val_*.bin") val tokens)"
