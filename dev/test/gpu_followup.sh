#!/usr/bin/env bash
# The short call for the end of a GPU session (4-5 minutes of device time left, a fresh machine):
# what gpu_suite.sh's stages measure slowest, cut to the numbers that matter most, each under its own
# timeout, every log written to OUT_DIR as it goes (what is there comes back even if the call is cut).
#   1. llm.c with cuDNN (built in the background from the start; ~2 min): d12, B 64, 6 steps
#   2. meanwhile: our standard trainer's --profile with --flash 2 (version 3 is the default, profiled
#      by gpu_suite.sh's profile stage), and the attention labs' --bench beside PyTorch SDPA
#
#   bash dev/test/gpu_followup.sh OUT_DIR      (needs dev/bench/peers and dev/data/austen carried)
set -u
cd "$(dirname "$0")/../.."
source dev/test/torch_python.sh
out=${1:?usage: bash dev/test/gpu_followup.sh OUT_DIR}
mkdir -p "$out" build/bench
PYTHON=$(torch_python) || PYTHON=python3
SM=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n1 | tr -d '.')
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*"; }

BENCH_LOG_DIR=$out PYTHON=$PYTHON timeout 200 bash dev/bench/bench.sh --build-llmc >"$out/llmc_build.log" 2>&1 &
llmc_pid=$!
stamp "building train_gpt2cu and the attention labs (sm_$SM)"
make -s train_gpt2cu CUDA_ARCHS="-gencode arch=compute_$SM,code=sm_$SM" >"$out/build.log" 2>&1 &
trainer_pid=$!
make -s -j 2 build/lab_attention_forward build/lab_attention_backward LAB_SM="$SM" >"$out/build_labs.log" 2>&1
wait "$trainer_pid"
stamp "built: $(ls train_gpt2cu build/lab_attention_forward build/lab_attention_backward 2>&1 | tr '\n' ' ')"

for v in 2 3; do
  timeout 60 ./train_gpt2cu -e d12 -i "dev/data/austen/austen_train_*.bin" -j "dev/data/austen/austen_val_*.bin" -b 64 -t 1024 \
    -x 6 -v 0 -s 0 --flash $v --profile 5 >"$out/profile_flash$v.log" 2>&1
  stamp "profile --flash $v: exit $?: $(grep '^summary:' "$out/profile_flash$v.log" | cut -c1-150)"
  grep '^profile \(attn\|total\)' "$out/profile_flash$v.log"
done
for l in forward backward; do
  timeout 60 ./build/lab_attention_$l --bench >"$out/lab_attention_${l}_bench.log" 2>&1
  stamp "lab_attention_$l --bench: exit $?"; grep '^bench v' "$out/lab_attention_${l}_bench.log"
done
timeout 60 "$PYTHON" dev/cuda/sdpa_bench.py >"$out/sdpa_bench.log" 2>&1
stamp "sdpa_bench.py: exit $?"; grep '^bench sdpa' "$out/sdpa_bench.log"

wait "$llmc_pid"
stamp "llm.c build: exit $?: $(tail -n 1 "$out/llmc_build.log")"
shard=build/bench/bench_train_000.bin
"$PYTHON" dev/bench/bench_shard.py "$shard" $((524288 * 8 + 1)) # bench.sh's shard, 6 steps and validation
if [ -x dev/bench/peers/llm.c/train_gpt2cu ]; then
  timeout 90 dev/bench/peers/llm.c/train_gpt2cu -e d12 -t 1024 -b 64 -d 524288 -x 6 -v 100000 -s 100000 -m 1 \
    -i "$shard" -j "$shard" -l 1e-4 >"$out/llmc_d12_B64.log" 2>&1
  stamp "llm.c d12 B 64 (6 steps): exit $?: $(cat dev/bench/peers/llm.c/BUILT 2>/dev/null): $(grep '^total average iteration time' "$out/llmc_d12_B64.log")"
fi
