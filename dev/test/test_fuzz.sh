#!/usr/bin/env bash
# Coverage-guided fuzzing of every parser a user can hand a file to (dev/fuzz/README.md): builds
# each libFuzzer target (clang 14, ASan + UBSan), runs it for FUZZ_SECONDS (default 20) from the
# committed corpus dev/fuzz/corpus/<target>/ plus seeds made from the files `make test` generated
# (build/fuzz/seeds/, dev/fuzz/make_seeds.py), two targets at a time (one core each), and prints one
# PASS/FAIL line per target, in order, with its executions and corpus size. Any crash, sanitizer
# report, leak, timeout (10 s per input) or broken property makes libFuzzer exit non-zero: a FAIL
# naming the saved input and how to replay it. New inputs go to build/fuzz/corpus/<target>/;
# FUZZ_MERGE=1 then merges the ones that add coverage into dev/fuzz/corpus/ (review and commit
# them). `make fuzz` runs this with 600 s each.
set -u
cd "$(dirname "$0")/../.."
source dev/test/jobs.sh
SECS=${FUZZ_SECONDS:-20}
TARGETS=${FUZZ_TARGETS:-checkpoint state debug_state dataloader tokenizer_bin bpe_files bpe_text}
WORK=build/fuzz
PY=${PYTHON:-python3}
mkdir -p "$WORK/artifacts"

die() { echo "FAIL fuzz $*"; exit 1; }

command -v clang++ >/dev/null 2>&1 || die "setup: clang++ not found (HINT: apt-get install clang libclang-rt-14-dev, or bash dev/test/install_deps.sh)"
make -s -j2 fuzz-build FUZZ_TARGETS="$TARGETS" >"$WORK/build.log" 2>&1 ||
  die "build: make fuzz-build failed: $(grep -m 1 -E 'error|cannot find' "$WORK/build.log") (see $WORK/build.log; HINT: libclang-rt-14-dev provides -fsanitize=fuzzer)"
# bpe_text encodes with the real GPT-2 vocabulary (the tokenizer suite fetched it before)
case " $TARGETS " in *" bpe_text "*)
  if [ ! -f dev/data/gpt2/gpt2_tokenizer.bin ]; then
    bash dev/data/fetch_gpt2_vocab.sh >"$WORK/fetch.log" 2>&1 ||
      die "setup: no dev/data/gpt2/gpt2_tokenizer.bin and dev/data/fetch_gpt2_vocab.sh failed: $(tail -n 1 "$WORK/fetch.log")"
  fi ;;
esac
rm -rf "$WORK/seeds"
"$PY" dev/fuzz/make_seeds.py "$WORK/seeds" --all >"$WORK/seeds.log" 2>&1 ||
  die "setup: dev/fuzz/make_seeds.py failed: $(tail -n 1 "$WORK/seeds.log")"

# the longest input each target mutates (its seeds are below this)
max_len() {
  case $1 in
    checkpoint) echo 1100 ;; state|debug_state|dataloader) echo 8192 ;; bpe_text) echo 4096 ;; *) echo 16384 ;;
  esac
}
dict() {
  case $1 in
    checkpoint|state|debug_state|dataloader|tokenizer_bin) echo "-dict=dev/fuzz/headers.dict" ;;
    bpe_files) echo "-dict=dev/fuzz/bpe_files.dict" ;; bpe_text) echo "-dict=dev/fuzz/bpe_text.dict" ;;
  esac
}

# one target: its PASS/FAIL line (and the merge's) on stdout
fuzz_one() { # target
  local t=$1 log=$WORK/$1.log rc
  local dirs=("$WORK/corpus/$t")
  mkdir -p "$WORK/corpus/$t"
  for d in "dev/fuzz/corpus/$t" "$WORK/seeds/$t"; do [ -d "$d" ] && dirs+=("$d"); done
  # shellcheck disable=SC2046
  "./$WORK/fuzz_$t" -max_total_time="$SECS" -timeout=10 -rss_limit_mb=2048 -max_len="$(max_len "$t")" $(dict "$t") \
    -close_fd_mask=3 -print_final_stats=1 -artifact_prefix="$WORK/artifacts/$t-" "${dirs[@]}" >"$log" 2>&1
  rc=$?
  local execs corpus
  execs=$(grep -a '^stat::number_of_executed_units:' "$log" | awk '{print $2}')
  corpus=$(grep -a -o 'corp: [0-9]*/[0-9]*[a-zA-Z]*' "$log" | tail -n 1 | sed 's/corp: //')
  if [ "$rc" -eq 0 ]; then
    echo "PASS fuzz $t: ${execs:-?} executions in ${SECS} s, corpus ${corpus:-?} (inputs/bytes), no finding"
  else
    local what artifact
    what=$(grep -a -m 1 -E 'fuzz property failed|^fuzz_[a-z_]+: |runtime error|ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|SUMMARY' "$log" | cut -c1-240)
    artifact=$(grep -a -o "Test unit written to [^ ]*" "$log" | tail -n 1 | sed 's/Test unit written to //')
    echo "FAIL fuzz $t: exit status $rc: ${what:-see $log} (replay: ./$WORK/fuzz_$t ${artifact:-<input>}; log $log)"
  fi
  if [ "${FUZZ_MERGE:-0}" = 1 ] && [ "$rc" -eq 0 ]; then
    mkdir -p "dev/fuzz/corpus/$t"
    local before
    before=$(ls "dev/fuzz/corpus/$t" | wc -l)
    "./$WORK/fuzz_$t" -merge=1 -max_len="$(max_len "$t")" -close_fd_mask=3 "dev/fuzz/corpus/$t" "$WORK/corpus/$t" >"$WORK/$t.merge.log" 2>&1 ||
      echo "FAIL fuzz $t: merge into dev/fuzz/corpus/$t failed (see $WORK/$t.merge.log)"
    echo "  merged: dev/fuzz/corpus/$t has $(ls "dev/fuzz/corpus/$t" | wc -l) inputs (was $before), $(du -sh "dev/fuzz/corpus/$t" | cut -f1)"
  fi
}

# two targets at a time (each fuzzer is one process on one core), their lines printed in target order
fuzz_to_file() { fuzz_one "$1" >"$WORK/$1.result"; }
# shellcheck disable=SC2086 # the targets are words
run_jobs 2 fuzz_to_file $TARGETS
failed=0
for t in $TARGETS; do
  cat "$WORK/$t.result"
  grep -q '^FAIL' "$WORK/$t.result" && failed=1
done
exit $failed
