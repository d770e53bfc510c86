#!/usr/bin/env bash
# Session diagnostics (issue 9, 2026-11-23): is v_identity's BF16 step_grad_norms error stable, and
# are initcheck's reports in permute_heads_kernel the same in FP32 (non-TMA cuBLASLt kernels)?
#   bash dev/test/gpu_diag.sh OUT_DIR     (after gpu_suite.sh's build and fixtures stages)
set -u
cd "$(dirname "$0")/../.."
out=$1; mkdir -p "$out" build/gpu_suite
shard=build/gpu_suite/tiny_000.bin
python3 dev/test/tiny_shard.py "$shard" $((4 * 32 * 8 + 1)) 7
for p in FP32 BF16; do
  bin=train_gpt2cu; [ $p = FP32 ] && bin=train_gpt2cu_fp32
  timeout 150 compute-sanitizer --tool initcheck --print-limit 4 ./$bin -e dev/fixtures/standard_tiny_model.bin \
    -i $shard -j $shard -b 4 -t 32 -x 1 -v 0 -s 0 >"$out/initcheck_$p.log" 2>&1 &
done
for i in 1 2 3; do ./test_gpt2cu_v_identity | grep -E 'v_identity_tiny (step|grad)|cuda-bf16 v_identity_tiny' | sort -t= -k2 -g | tail -n 4; done
wait
for p in FP32 BF16; do echo "initcheck $p: $(grep -c 'Uninitialized' "$out/initcheck_$p.log") reports shown, $(grep -m1 'ERROR SUMMARY' "$out/initcheck_$p.log"), first at: $(grep -m1 -A1 Uninitialized "$out/initcheck_$p.log" | tail -n1)"; done
