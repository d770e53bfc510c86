#!/usr/bin/env bash
# Training throughput on this GPU, side by side with the peers in one run. Not a test: it needs a
# GPU and takes minutes.
#
#   bash dev/bench/bench.sh [steps (default 10)] [schemes (default all)]
#   bash dev/bench/bench.sh --build-llmc
#       only build llm.c (below) and mark it built for this GPU, so that gpu_suite.sh can build it in
#       the background while other stages run; a later bench.sh on the same machine reuses it
#
# 1. Peers: our standard scheme at d12, T 1024, BF16, 524288 tokens per step (gradient accumulation),
#    the largest micro-batch B that fits (128 down, halving on "out of memory"); then llm.c's
#    train_gpt2cu and a PyTorch GPT-2 (dev/bench/bench_torch.py: bf16 autocast, SDPA,
#    torch.compile, fused AdamW) at the same shape, tokens per step and B (halved if they do not
#    fit), on the same shard. Ratios ours/llm.c and ours/PyTorch.
# 2. Every scheme at d12, then the standard scheme at d24, ours only, the same way.
#
# Each run: the mean step time over the steps after the first (ours: the trainer's summary line;
# llm.c: its "total average iteration time"; PyTorch: after the first two, compilation), tokens/s,
# MFU by llm.c's formula ((6 N + 6 L C T) FLOPs per token, N every parameter) against
# PEAK_TFLOPS (default 790: the dense bf16 rate measured on the device's H100s), and the peak
# device memory in use (nvidia-smi, sampled every 100 ms: the same measure for all three).
#
# llm.c: built here from its source in dev/bench/peers/llm.c (an ignored folder; fetched from
# github.com/karpathy/llm.c, never committed) with cuDNN attention when cuDNN and
# $LLMC_DIR/cudnn-frontend/include (github.com/NVIDIA/cudnn-frontend) are found, else without; the build line says which.
# Data: one shard of random token ids in build/bench/, written by dev/bench/bench_shard.py (throughput
# does not depend on the text).
# Results: BENCH_LOG_DIR (default build/bench): a log per run and results.tsv. BENCH_PEERS_ONLY=1: part 1 only;
# BENCH_SCHEMES_ONLY=1: part 2 only (dev/test/gpu_suite.sh runs the two parts as two stages, each
# within one device call). Each run is stopped after RUN_TIMEOUT s (default 300).
set -u
cd "$(dirname "$0")/../.."
source dev/test/jobs.sh
end_tree_with_me # a peer's run, llm.c's build, the memory sampler: none outlives this script
BUILD_LLMC_ONLY=0
if [ "${1:-}" = --build-llmc ]; then BUILD_LLMC_ONLY=1; shift; fi
STEPS=${1:-10}
case "$STEPS" in ''|*[!0-9]*) echo "bench: steps '$STEPS': expected an integer >= 4" >&2; exit 1;; esac
[ "$STEPS" -ge 4 ] || { echo "bench: steps $STEPS: expected >= 4 (the first steps are not timed)" >&2; exit 1; }
SCHEMES=${2:-$(make -s --no-print-directory schemes)}
if [ "${BENCH_PEERS_ONLY:-0}" = 1 ] && [ "${BENCH_SCHEMES_ONLY:-0}" = 1 ]; then
  echo "bench: BENCH_PEERS_ONLY=1 and BENCH_SCHEMES_ONLY=1: expected at most one of them" >&2
  exit 1
fi
TOKENS_PER_STEP=524288
T=1024
PEAK_TFLOPS=${PEAK_TFLOPS:-790}
# each run's limit: 6-10 steps take seconds, PyTorch's compilation a minute or two; a hung kernel
# then costs 300 s, not the device call's 540
RUN_TIMEOUT=${RUN_TIMEOUT:-300}
PYTHON=${PYTHON:-python3}
LLMC_DIR=${LLMC_DIR:-dev/bench/peers/llm.c}
CUDNN_FRONTEND=${CUDNN_FRONTEND:-$PWD/$LLMC_DIR/cudnn-frontend/include}
out_dir=${BENCH_LOG_DIR:-build/bench}
mkdir -p "$out_dir" build/bench
if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  echo "bench: no CUDA device on this machine (nvidia-smi -L lists no GPU); nothing to measure" >&2
  exit 1
fi
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n1)
SM=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n1 | tr -d '.')

# run a command while sampling the GPU's memory in use; the peak (MiB) goes to $log.mem
with_memory_peak() { # log cmd...
  local log=$1; shift
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 >"$log.memtrace" 2>/dev/null &
  local smi=$!
  "$@" >"$log" 2>&1
  local rc=$?
  kill $smi 2>/dev/null; wait $smi 2>/dev/null
  sort -n "$log.memtrace" | tail -n 1 >"$log.mem"
  return $rc
}
is_oom() { grep -qi 'out of \(GPU \)\?memory\|CUDA_ERROR_OUT_OF_MEMORY\|cudaErrorMemoryAllocation' "$1"; }

results="$out_dir/results.tsv"
printf "who\tscheme\tmodel\tB\tT\tparams\tms_per_step\ttokens_per_s\tmfu_pct\tpeak_mib\tnote\n" >"$results"
# depth -> "L C"
shape_of() { case $1 in d12) echo "12 768";; d24) echo "24 1024";; d36) echo "36 1280";; d48) echo "48 1600";; esac; }
record() { # who scheme depth B params ms log note
  local who=$1 s=$2 depth=$3 B=$4 params=$5 ms=$6 log=$7 note=$8 L C tok mfu mem
  read -r L C <<<"$(shape_of "$depth")"
  tok=$(awk -v ms="$ms" -v n=$TOKENS_PER_STEP 'BEGIN { printf "%.0f", n / (ms / 1000) }')
  mfu=$(awk -v tok="$tok" -v N="$params" -v L="$L" -v C="$C" -v T=$T -v peak="$PEAK_TFLOPS" \
        'BEGIN { printf "%.1f", 100 * tok * (6 * N + 6 * L * C * T) / (peak * 1e12) }')
  mem=$(cat "$log.mem" 2>/dev/null)
  printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n" "$who" "$s" "$depth" "$B" $T "$params" "$ms" "$tok" "$mfu" "${mem:-?}" "$note" >>"$results"
  printf "%-7s %-11s %-5s %4s %10s %12s %7s%% %9s  %s\n" "$who" "$s" "$depth" "$B" "$ms" "$tok" "$mfu" "${mem:-?}" "$note"
}

binary() { if [ "$1" = standard ]; then echo train_gpt2cu; else echo "train_gpt2cu_$1"; fi; }

# One run per (who, scheme, depth): launch_<who> at micro-batch B, halving B on "out of memory";
# the first run that finishes is parsed by parse_<who> (prints "ms params note") and recorded.
# Sets FIT_B and FIT_MS.
run_fitting() { # who scheme depth first_B
  local who=$1 s=$2 depth=$3 B=$4 log rc parsed ms params note
  FIT_B=""; FIT_MS=""
  while [ "$B" -ge 1 ]; do
    log="$out_dir/${who}_${s}_${depth}_B${B}.log"
    with_memory_peak "$log" "launch_$who" "$s" "$depth" "$B"
    rc=$?
    parsed=$([ $rc -eq 0 ] && "parse_$who" "$log")
    if [ -n "$parsed" ]; then
      read -r ms params note <<<"$parsed"
      record "$who" "$s" "$depth" "$B" "$params" "$ms" "$log" "$note"
      FIT_B=$B; FIT_MS=$ms
      return 0
    fi
    is_oom "$log" || { echo "bench: $who $s $depth -b $B failed (exit $rc, not out of memory; see $log): $(grep -m1 -i 'error' "$log" || tail -n 1 "$log")" >&2; return 1; }
    B=$((B / 2))
  done
  echo "bench: $who $s $depth does not fit even at B=1" >&2
  return 1
}

# ours: the trainer's summary line (mean over the steps after the first)
launch_ours() { # scheme depth B
  timeout "$RUN_TIMEOUT" ./"$(binary "$1")" -e "$2" -t $T -b "$3" -d $TOKENS_PER_STEP -x "$STEPS" -v 0 -s 0 -i "$shard" -l 1e-4
}
parse_ours() {
  grep -q '^summary:' "$1" || return 0
  echo "$(grep '^summary:' "$1" | sed -E 's/.*\| ([0-9.]+) ms\/step.*/\1/') $(grep '^model:' "$1" | sed -E 's/.*\| ([0-9]+) parameters.*/\1/')"
}
run_ours() { # scheme depth
  make -s "$(binary "$1")" QKV="$1" PRECISION=BF16 >/dev/null || { echo "bench: build of $(binary "$1") failed" >&2; return 1; }
  run_fitting ours "$1" "$2" 128
}

# llm.c: built once per machine, with cuDNN if that builds; sets LLMC_BIN and LLMC_NOTE. A finished
# build writes "sm_<arch> <note>" to $LLMC_DIR/BUILT; a later call for the same GPU reuses it (the
# folder is carried from elsewhere without it, so a build made for another machine is never reused)
LLMC_BIN=""
build_llmc() {
  [ -f "$LLMC_DIR/train_gpt2.cu" ] || { echo "bench: no llm.c source in $LLMC_DIR (HINT: fetch github.com/karpathy/llm.c there; it is ignored by git)" >&2; return 1; }
  if [ -x "$LLMC_DIR/train_gpt2cu" ] && [ "$(cut -d' ' -f1 "$LLMC_DIR/BUILT" 2>/dev/null)" = "sm_$SM" ]; then
    LLMC_NOTE=$(cut -d' ' -f2- "$LLMC_DIR/BUILT") LLMC_BIN="$LLMC_DIR/train_gpt2cu"
    echo "llm.c: $(cat "$LLMC_DIR/COMMIT" 2>/dev/null || echo 'commit unknown'), $LLMC_NOTE (built earlier on this machine)"
    return 0
  fi
  rm -f "$LLMC_DIR/BUILT"
  local cudnn_dir
  # llm.c uses NVML when nvml.h is found; the linker then needs libnvidia-ml (the toolkit's stub)
  # or the driver's libnvidia-ml.so.1 under an unversioned name
  NVML_LINK="-L${CUDA_HOME:-/usr/local/cuda}/lib64/stubs -lnvidia-ml"
  local nvml
  nvml=$(ldconfig -p 2>/dev/null | grep -m1 'libnvidia-ml.so.1 ' | sed 's/.*=> //')
  if [ -n "$nvml" ]; then
    mkdir -p build/bench/nvml_lib && ln -sf "$nvml" build/bench/nvml_lib/libnvidia-ml.so
    NVML_LINK="-L$PWD/build/bench/nvml_lib $NVML_LINK"
  fi
  cudnn_dir=$("$PYTHON" -c 'import nvidia.cudnn, os; f = getattr(nvidia.cudnn, "__file__", None); print(os.path.dirname(f) if f else list(nvidia.cudnn.__path__)[0])' 2>/dev/null)
  LLMC_NOTE="llm.c without cuDNN"
  # (cudnn-frontend 1.x compiles some kernels at run time: -lnvrtc; the 2026-11-26 H100 run failed to link without it)
  if [ -n "$cudnn_dir" ] && [ -f "$cudnn_dir/include/cudnn.h" ] && [ -d "$CUDNN_FRONTEND" ]; then
    # the wheel ships libcudnn.so.9 only: give the linker an unversioned name
    mkdir -p build/bench/cudnn_lib
    ln -sf "$cudnn_dir/lib/libcudnn.so.9" build/bench/cudnn_lib/libcudnn.so
    if (cd "$LLMC_DIR" && timeout 300 make -B train_gpt2cu GPU_COMPUTE_CAPABILITY="$SM" NO_MULTI_GPU=1 USE_CUDNN=1 PRECISION=BF16 \
          CUDNN_FRONTEND_PATH="$CUDNN_FRONTEND" NVCC_INCLUDES="-I$CUDNN_FRONTEND -I$cudnn_dir/include" \
          NVCC_LDFLAGS="-lcublas -lcublasLt -lnvrtc $NVML_LINK -L$PWD/build/bench/cudnn_lib -lcudnn -Xlinker -rpath=$cudnn_dir/lib") \
          >"$out_dir/llmc_build_cudnn.log" 2>&1; then
      LLMC_NOTE="llm.c with cuDNN"
    else
      echo "bench: llm.c with cuDNN did not build ($(grep -m1 -i error "$out_dir/llmc_build_cudnn.log")); building without" >&2
      rm -f "$LLMC_DIR/train_gpt2cu"
    fi
  fi
  if [ "$LLMC_NOTE" = "llm.c without cuDNN" ]; then
    (cd "$LLMC_DIR" && rm -f build/*.o && make -B train_gpt2cu GPU_COMPUTE_CAPABILITY="$SM" NO_MULTI_GPU=1 USE_CUDNN=0 PRECISION=BF16 \
        NVCC_LDFLAGS="-lcublas -lcublasLt $NVML_LINK") >"$out_dir/llmc_build.log" 2>&1 ||
      { echo "bench: llm.c did not build: $(grep -m1 -i error "$out_dir/llmc_build.log")" >&2; return 1; }
  fi
  LLMC_BIN="$LLMC_DIR/train_gpt2cu"
  echo "sm_$SM $LLMC_NOTE" >"$LLMC_DIR/BUILT"
  echo "llm.c: $(cat "$LLMC_DIR/COMMIT" 2>/dev/null || echo 'commit unknown'), $LLMC_NOTE"
}
if [ $BUILD_LLMC_ONLY = 1 ]; then
  build_llmc >"$out_dir/llmc_build_note.txt" 2>&1
  rc=$?
  cat "$out_dir/llmc_build_note.txt"
  exit $rc
fi

# one shard of random GPT-2 token ids, enough for STEPS steps and llm.c's final validation
shard=build/bench/bench_train_000.bin
"$PYTHON" dev/bench/bench_shard.py "$shard" $((TOKENS_PER_STEP * (STEPS + 2) + 1))
[ -f "$shard" ] || { echo "bench: could not write $shard" >&2; exit 1; }
# llm.c's defaults otherwise (recompute GELU -r 1, master weights, ZeRO 0); no validation or
# sampling inside the timed steps; its "total average iteration time" excludes the first step
launch_llmc() { # scheme depth B
  timeout "$RUN_TIMEOUT" "$LLMC_BIN" -e "$2" -t $T -b "$3" -d $TOKENS_PER_STEP -x "$STEPS" -v 100000 -s 100000 -m 1 \
    -i "$shard" -j "$shard" -l 1e-4
}
parse_llmc() {
  local ms
  ms=$(grep '^total average iteration time:' "$1" | sed -E 's/.*: ([0-9.]+) ms.*/\1/')
  [ -n "$ms" ] && echo "$ms $(grep -m1 'num_parameters' "$1" | grep -o '[0-9]\{6,\}') $LLMC_NOTE"
}
# PyTorch: bench_torch.py's summary line (mean over the steps after the first two)
launch_pytorch() { # scheme depth B
  timeout "$RUN_TIMEOUT" "$PYTHON" dev/bench/bench_torch.py --shard "$shard" -e "$2" -b "$3" -t $T -d $TOKENS_PER_STEP \
    -x "$STEPS" --peak_tflops "$PEAK_TFLOPS"
}
parse_pytorch() {
  local line
  line=$(grep '^summary:' "$1")
  [ -n "$line" ] && echo "$(echo "$line" | sed -E 's/.*\| ([0-9.]+) ms\/step.*/\1/') $(echo "$line" | sed -E 's/.*params ([0-9]+).*/\1/')" \
    "torch $(grep -m1 '^device:' "$1" | sed -E 's/.*torch ([^ ]+).*/\1/'), compile"
}

echo "gpu: $gpu | $TOKENS_PER_STEP tokens per step | $STEPS steps per run | MFU against $PEAK_TFLOPS TFLOP/s"
bench_failed=0
header() { printf "%-7s %-11s %-5s %4s %10s %12s %8s %9s  %s\n" who scheme model B ms/step tok/s MFU peak_MiB note; }

LLMC_MS=""; TORCH_MS=""
if [ "${BENCH_SCHEMES_ONLY:-0}" != 1 ]; then
  echo "== peers"
  header
  run_ours standard d12 || bench_failed=1
  peer_B=${FIT_B:-64}
  if build_llmc >"$out_dir/llmc_build_note.txt" 2>&1; then
    cat "$out_dir/llmc_build_note.txt"
    run_fitting llmc standard d12 "$peer_B" && LLMC_MS=$FIT_MS || bench_failed=1
  else cat "$out_dir/llmc_build_note.txt"; bench_failed=1; fi
  run_fitting pytorch standard d12 "$peer_B" && TORCH_MS=$FIT_MS || bench_failed=1
fi

if [ "${BENCH_PEERS_ONLY:-0}" != 1 ]; then
  echo "== schemes"
  header
  for s in $SCHEMES; do
    [ "$s" = standard ] && continue
    run_ours "$s" d12 || bench_failed=1
  done
  run_ours standard d24 || bench_failed=1
fi

echo "== table ($gpu; d12/d24, T $T, $TOKENS_PER_STEP tokens per step, BF16; MFU against $PEAK_TFLOPS TFLOP/s)"
awk -F'\t' -v llmc="${LLMC_MS:-}" -v torch="${TORCH_MS:-}" '
  NR == 1 { printf "%-7s %-11s %-5s %4s %10s %12s %7s %9s %12s %12s\n", "who", "scheme", "model", "B", "ms/step", "tok/s", "MFU", "peak_MiB", "vs_llm.c", "vs_PyTorch"; next }
  {
    r1 = (llmc != "" && $3 == "d12") ? sprintf("%.2fx", llmc / $7) : "-"
    r2 = (torch != "" && $3 == "d12") ? sprintf("%.2fx", torch / $7) : "-"
    printf "%-7s %-11s %-5s %4s %10s %12s %6s%% %9s %12s %12s\n", $1, $2, $3, $4, $7, $8, $9, $10, r1, r2
  }' "$results"
echo "(vs_llm.c, vs_PyTorch: that row's tokens/s over the peer's at d12; > 1 is faster than the peer)"
echo "results: $results"
exit $bench_failed
