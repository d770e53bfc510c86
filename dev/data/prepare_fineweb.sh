#!/usr/bin/env bash
# FineWeb (10B-token sample) already tokenized with GPT-2 in llm.c's shard format, where the
# internet is reachable: the validation shard and the first N training shards of 100M tokens each
# (200 MB per shard).
#
#   bash dev/data/prepare_fineweb.sh [N]   (default N=1)  ->  dev/data/fineweb10B/fineweb_{train,val}_*.bin
# Environment: OUT_DIR (default dev/data/fineweb10B), FINEWEB_URL (the folder the shards are in).
source "$(dirname "$0")/common.sh"
N=${1:-1}
[[ "$N" =~ ^[0-9]+$ ]] && [ "$N" -ge 1 ] && [ "$N" -le 103 ] || die "the shard count is '$N', expected 1..103"
OUT=${OUT_DIR:-dev/data/fineweb10B}
URL=${FINEWEB_URL:-https://huggingface.co/datasets/kjj0/fineweb10B-gpt2/resolve/main}

check_shard() { # FILE: the llm.c header and the size it implies
  local magic version n size
  magic=$(od -A n -t d4 -N 4 "$1" | tr -d ' ')
  version=$(od -A n -t d4 -j 4 -N 4 "$1" | tr -d ' ')
  n=$(shard_tokens "$1")
  size=$(stat -c %s "$1")
  [ "$magic" = 20240520 ] && [ "$version" = 1 ] && [ "$size" = $((1024 + 2 * n)) ]
}

files=(fineweb_val_000000.bin)
for i in $(seq 1 "$N"); do files+=("$(printf 'fineweb_train_%06d.bin' "$i")"); done
mkdir -p "$OUT"
for f in "${files[@]}"; do
  if [ -f "$OUT/$f" ] && check_shard "$OUT/$f"; then continue; fi
  rc=0
  curl -fsSL --connect-timeout 10 --max-time 1800 -o "$OUT/$f.tmp" "$URL/$f" 2>/dev/null || rc=$?
  if [ "$rc" != 0 ]; then
    rm -f "$OUT/$f.tmp"; rmdir "$OUT" 2>/dev/null || true
    download_failed "$rc" "$URL/$f" FineWeb
  fi
  check_shard "$OUT/$f.tmp" || { rm -f "$OUT/$f.tmp"; die "$URL/$f is not an llm.c token shard (expected magic 20240520, version 1, size 1024 + 2 x tokens)"; }
  mv "$OUT/$f.tmp" "$OUT/$f"
  info "downloaded $OUT/$f"
done
info "$OUT is ready ($(count_tokens "$OUT/fineweb_train_*.bin") train tokens, $(count_tokens "$OUT/fineweb_val_*.bin") val tokens)"
