#!/usr/bin/env bash
# The short call for the end of a GPU session (3-4 minutes of device time left, a fresh machine):
# the trainer's step profile and the flash kernels' versions side by side, which no gpu_suite.sh stage
# does in one run, each under its own timeout, every log written to OUT_DIR as it goes (what is there
# comes back even if the call is cut):
#   1. our standard trainer's --profile (flash forward 3, backward 4; the bias gradients in the BGRADB
#      epilogue), and with --bias_fusion 0 (d12, B 64, T 1024, Austen);
#   2. the attention labs' --bench of every version beside PyTorch SDPA (dev/cuda/sdpa_bench.py).
# llm.c is not here: the bench_peers stage builds it with cuDNN and runs it beside ours.
#
#   bash dev/test/gpu_followup.sh OUT_DIR      (needs dev/data/austen carried)
set -u
cd "$(dirname "$0")/../.."
source dev/test/torch_python.sh
out=${1:?usage: bash dev/test/gpu_followup.sh OUT_DIR}
mkdir -p "$out"
PYTHON=$(torch_python) || PYTHON=python3
SM=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n1 | tr -d '.')
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*"; }

stamp "building train_gpt2cu and the attention labs (sm_$SM)"
make -s train_gpt2cu CUDA_ARCHS="-gencode arch=compute_$SM,code=sm_$SM" >"$out/build.log" 2>&1 &
trainer_pid=$!
make -s -j 2 build/lab_attention_forward build/lab_attention_backward LAB_SM="$SM" >"$out/build_labs.log" 2>&1
wait "$trainer_pid"
stamp "built: $(ls train_gpt2cu build/lab_attention_forward build/lab_attention_backward 2>&1 | tr '\n' ' ')"

for run in "default|" "nobiasfusion|--bias_fusion 0"; do
  IFS='|' read -r name flags <<<"$run"
  # shellcheck disable=SC2086 # $flags is words on purpose
  timeout 60 ./train_gpt2cu -e d12 -i "dev/data/austen/austen_train_*.bin" -j "dev/data/austen/austen_val_*.bin" -b 64 -t 1024 \
    -x 6 -v 0 -s 0 $flags --profile 5 >"$out/profile_$name.log" 2>&1
  stamp "profile ${flags:-(the defaults)}: exit $?: $(grep '^summary:' "$out/profile_$name.log" | cut -c1-150)"
  grep '^profile \(attn\|qkv_bwd\|attproj_bwd\|fc_bwd\|fcproj_bwd\|total\)' "$out/profile_$name.log"
done
for l in forward backward; do
  timeout 60 ./build/lab_attention_$l --bench >"$out/lab_attention_${l}_bench.log" 2>&1
  stamp "lab_attention_$l --bench: exit $?"; grep '^bench v' "$out/lab_attention_${l}_bench.log"
done
timeout 60 "$PYTHON" dev/cuda/sdpa_bench.py >"$out/sdpa_bench.log" 2>&1
stamp "sdpa_bench.py: exit $?"; grep '^bench sdpa' "$out/sdpa_bench.log"
