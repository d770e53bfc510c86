#!/usr/bin/env bash
# The default corpus: Jane Austen's six novels (public domain; Debian's r-cran-janeaustenr, so it
# works offline), about 1M GPT-2 tokens. One document per novel; the last 5% of each novel (cut at
# a line boundary) is the validation split.
#
#   bash dev/data/prepare_austen.sh   ->  dev/data/austen/austen_train_000000.bin (~0.96M tokens)
#                                          dev/data/austen/austen_val_000000.bin   (~0.05M tokens)
source "$(dirname "$0")/common.sh"
OUT=dev/data/austen
if [ -f "$OUT/austen_train_000000.bin" ] && [ -f "$OUT/austen_val_000000.bin" ]; then
  info "$OUT is ready ($(count_tokens "$OUT/austen_train_*.bin") train tokens, $(count_tokens "$OUT/austen_val_*.bin") val tokens)"
  exit 0
fi
bash dev/data/fetch_gpt2_vocab.sh
build_encode_text
export_austen "$OUT/text"
dev/data/encode_text -o "$OUT/austen" --val-fraction 0.05 "$OUT"/text/*.txt
info "$OUT is ready ($(count_tokens "$OUT/austen_train_*.bin") train tokens, $(count_tokens "$OUT/austen_val_*.bin") val tokens)"
