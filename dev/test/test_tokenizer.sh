#!/usr/bin/env bash
# Tests tokenizer.h against the reference GPT-2 tokenizer, js-tiktoken (gpt2 encoding) under node:
# exact ids on the Austen corpus, dev/tokenizer/torture.txt and fuzz strings, the special token,
# round trips, invalid UTF-8, the Unicode tables, and llm.c's gpt2_tokenizer.bin.
# Needs node + npm (dev/tokenizer/package.json, installed into dev/tokenizer/node_modules) and the
# GPT-2 files in dev/data/gpt2/ (fetched by dev/data/fetch_gpt2_vocab.sh when missing). Anything
# missing is a FAIL, never a silent skip.
# TEST_TOKENIZER=build/asan/test_tokenizer runs the same checks with the sanitizer build (test_sanitize.sh).
set -u
cd "$(dirname "$0")/../.."
BIN=${TEST_TOKENIZER:-build/test_tokenizer}
WORK=build/tokenizer_test
VOCAB=dev/data/gpt2
REF="node dev/tokenizer/reference_ids.js"
mkdir -p "$WORK"

die() { echo "FAIL tokenizer $*"; exit 1; }

# the reference
command -v node >/dev/null 2>&1 || die "setup: node not found (HINT: apt-get install nodejs npm, or bash dev/test/install_deps.sh)"
if ! node -e 'require("./dev/tokenizer/node_modules/js-tiktoken")' >/dev/null 2>&1; then
  command -v npm >/dev/null 2>&1 || die "setup: npm not found to install js-tiktoken (HINT: apt-get install npm)"
  (cd dev/tokenizer && npm ci --no-audit --no-fund >/dev/null 2>"../../$WORK/npm.log") ||
    die "setup: 'npm ci' in dev/tokenizer failed: $(tail -n 1 "$WORK/npm.log") (HINT: is the npm registry reachable?)"
  node -e 'require("./dev/tokenizer/node_modules/js-tiktoken")' >/dev/null 2>&1 || die "setup: js-tiktoken still not loadable after npm ci"
fi

# the vocabulary
if [ ! -f "$VOCAB/encoder.json" ] || [ ! -f "$VOCAB/vocab.bpe" ] || [ ! -f "$VOCAB/gpt2_tokenizer.bin" ]; then
  bash dev/data/fetch_gpt2_vocab.sh >"$WORK/fetch.log" 2>&1 ||
    die "setup: no $VOCAB/encoder.json + vocab.bpe + gpt2_tokenizer.bin and dev/data/fetch_gpt2_vocab.sh failed: $(tail -n 1 "$WORK/fetch.log")"
fi

# the Austen corpus as one text: the data scripts' export if it is there, else straight from R
AUSTEN=$WORK/austen.txt
if ls dev/data/austen/text/*.txt >/dev/null 2>&1; then
  cat dev/data/austen/text/*.txt >"$AUSTEN.tmp" && mv "$AUSTEN.tmp" "$AUSTEN"
else
  command -v Rscript >/dev/null 2>&1 || die "setup: Rscript not found for the Austen corpus (HINT: apt-get install r-cran-janeaustenr)"
  Rscript --vanilla -e 'library(janeaustenr); out <- commandArgs(trailingOnly = TRUE)[1];
    con <- file(out, "wb"); for (b in list(sensesensibility, prideprejudice, mansfieldpark, emma, northangerabbey, persuasion))
    writeLines(b, con, useBytes = TRUE); close(con)' "$AUSTEN.tmp" >"$WORK/r.log" 2>&1 ||
    die "setup: exporting the Austen novels with R failed: $(tail -n 1 "$WORK/r.log") (HINT: apt-get install r-cran-janeaustenr)"
  mv "$AUSTEN.tmp" "$AUSTEN"
fi
[ -s "$AUSTEN" ] || die "setup: $AUSTEN is empty"

make -s "$BIN" || die "build: make $BIN failed"
"./$BIN" gen "$WORK" >/dev/null || die "setup: $BIN gen $WORK failed"

# reference ids (node)
ref() { # OUT ARGS...: one reference file, or a FAIL naming the step
  local out=$1; shift
  $REF "$@" >"$WORK/$out.tmp" 2>"$WORK/$out.err" || die "reference: node reference_ids.js $* failed: $(tail -n 1 "$WORK/$out.err")"
  mv "$WORK/$out.tmp" "$WORK/$out"
}
ref classes.ref classes
ref austen.ref ordinary "$AUSTEN"
ref torture_ordinary.ref ordinary dev/tokenizer/torture.txt
ref torture_special.ref special dev/tokenizer/torture.txt
ref fuzz_ordinary.ref strings "$WORK/fuzz.bin" ordinary
ref fuzz_special.ref strings "$WORK/fuzz.bin" special
ref long_ordinary.ref strings "$WORK/long.bin" ordinary
ref invalid_pieces.ref pieces "$WORK/invalid.bin"
ref invalid_ordinary.ref strings "$WORK/invalid.bin" ordinary

"./$BIN" check "$VOCAB" "$WORK" "$AUSTEN" dev/tokenizer/torture.txt
