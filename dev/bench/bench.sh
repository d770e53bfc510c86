#!/usr/bin/env bash
# Training throughput of every Q/K/V scheme (BF16 builds) on this GPU. Not a test: it needs a GPU
# and takes minutes. For each scheme: d12 at T 1024 with the largest micro-batch that fits (tried
# from 128 down, halving on "out of GPU memory"), then the standard scheme at d24 the same way.
# Prints, per configuration: micro-batch, ms per step, tokens/s, MFU and peak device memory, as
# measured by the trainer itself (its "summary:" line: the mean over the steps after the first).
#
#   bash dev/bench/bench.sh [steps (default 12)] [schemes (default all)]
# Results also go to build/bench/results.tsv. Data: random tokens in build/bench/ (throughput does
# not depend on the text), so no dataset is needed.
set -u
cd "$(dirname "$0")/../.."
STEPS=${1:-12}
case "$STEPS" in ''|*[!0-9]*) echo "bench: steps '$STEPS': expected an integer >= 2" >&2; exit 1;; esac
[ "$STEPS" -ge 2 ] || { echo "bench: steps $STEPS: expected >= 2 (the first step is not timed)" >&2; exit 1; }
SCHEMES=${2:-$(make -s --no-print-directory schemes)}
out_dir=build/bench
mkdir -p "$out_dir"
if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  echo "bench: no CUDA device on this machine (nvidia-smi -L lists no GPU); nothing to measure" >&2
  exit 1
fi
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n1)

# one shard of random GPT-2 token ids, large enough for 128 x 1024 x (STEPS + 1) tokens
shard="$out_dir/bench_train_000.bin"
need=$(( 128 * 1024 * (STEPS + 2) + 1 ))
python3 - "$shard" "$need" <<'EOF'
import os, random, struct, sys
path, n = sys.argv[1], int(sys.argv[2])
if os.path.exists(path) and os.path.getsize(path) == 1024 + 2 * n:
    sys.exit(0)
rng = random.Random(1234)
header = struct.pack("<256i", 20240520, 1, n, *([0] * 253))
with open(path + ".tmp", "wb") as f:
    f.write(header)
    chunk = 1 << 20
    for start in range(0, n, chunk):
        m = min(chunk, n - start)
        f.write(struct.pack("<%dH" % m, *[rng.randrange(50257) for _ in range(m)]))
os.replace(path + ".tmp", path)
EOF

binary() { if [ "$1" = standard ]; then echo train_gpt2cu; else echo "train_gpt2cu_$1"; fi; }

results="$out_dir/results.tsv"
printf "gpu\tscheme\tmodel\tB\tT\tms_per_step\ttokens_per_s\tmfu\tpeak_mib\n" >"$results"
printf "%-11s %-5s %4s %5s %10s %12s %8s %10s\n" scheme model B T ms/step tok/s MFU peak_MiB
run_config() { # scheme depth
  local s=$1 depth=$2 bin B log line
  bin=$(binary "$s")
  make -s "$bin" QKV="$s" PRECISION=BF16 >/dev/null || { echo "bench: build of $bin failed" >&2; return 1; }
  for B in 128 64 32 16 8 4 2 1; do
    log="$out_dir/${s}_${depth}_B${B}.log"
    # a hang must not stall the whole benchmark: 20 minutes is far more than STEPS steps need
    timeout 1200 ./"$bin" -e "$depth" -t 1024 -b "$B" -x "$STEPS" -v 0 -s 0 -i "$shard" -l 1e-4 >"$log" 2>&1
    local rc=$?
    if [ $rc -eq 0 ] && grep -q '^summary:' "$log"; then
      line=$(grep '^summary:' "$log")
      # summary: N timed steps | X ms/step | Y tok/s | MFU Z | peak memory W MiB
      local ms tok mfu mem
      ms=$(echo "$line" | sed -E 's/.*\| ([0-9.]+) ms\/step.*/\1/')
      tok=$(echo "$line" | sed -E 's/.*\| ([0-9.]+) tok\/s.*/\1/')
      mfu=$(echo "$line" | sed -E 's/.*\| MFU ([^ ]+) .*/\1/')
      mem=$(echo "$line" | sed -E 's/.*peak memory ([0-9.]+) MiB.*/\1/')
      printf "%-11s %-5s %4s %5s %10s %12s %8s %10s\n" "$s" "$depth" "$B" 1024 "$ms" "$tok" "$mfu" "$mem"
      printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n" "$gpu" "$s" "$depth" "$B" 1024 "$ms" "$tok" "$mfu" "$mem" >>"$results"
      return 0
    fi
    if ! grep -qi 'out of \(GPU \)\?memory' "$log"; then
      echo "bench: $bin -e $depth -b $B failed (exit $rc, not out of memory; see $log): $(grep -m1 'error' "$log")" >&2
      return 1
    fi
  done
  echo "bench: $s $depth does not fit even at B=1" >&2
  return 1
}

echo "gpu: $gpu"
bench_failed=0
for s in $SCHEMES; do run_config "$s" d12 || bench_failed=1; done
run_config standard d24 || bench_failed=1
echo "results: $results"
exit $bench_failed
