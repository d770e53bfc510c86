#!/usr/bin/env bash
# A stand-in for nvidia-smi, for dev/test/test_ablate.sh: the two questions dev/ablate/ablate.py asks,
# answered for FAKE_GPUS (default 3) GPUs that do not exist. The test links it as `nvidia-smi` into a
# folder it puts first on PATH.
#
#   nvidia-smi -L                                                        GPU i: Fake GPU i (UUID: GPU-fake-i)
#   nvidia-smi --query-compute-apps=gpu_uuid,pid --format=csv,noheader   GPU-fake-i, <pid> per "process"
#
# The compute processes are the CPU trainers running now (build/train_gpt2_cpu_*), each listed on the
# GPU its own CUDA_VISIBLE_DEVICES names (read from /proc/<pid>/environ, so the listing shows what the
# runner really gave the process), plus FAKE_FOREIGN="<gpu index>:<pid> ..." (processes of somebody
# else; their pids need not exist).
set -u
gpus=${FAKE_GPUS:-3}
case "${1:-}" in
  -L)
    for ((i = 0; i < gpus; i++)); do echo "GPU $i: Fake GPU $i (UUID: GPU-fake-$i)"; done ;;
  --query-compute-apps=gpu_uuid,pid)
    for d in /proc/[0-9]*; do  # bash builtins only: the runner asks every quarter second at times
      IFS= read -r -d '' arg0 <"$d/cmdline" 2>/dev/null || continue
      case "$arg0" in
        ./build/train_gpt2_cpu_*|*/build/train_gpt2_cpu_*) ;;
        *) continue ;;
      esac
      dev=""
      while IFS= read -r -d '' kv; do
        case "$kv" in CUDA_VISIBLE_DEVICES=*) dev=${kv#*=} ;; esac
      done <"$d/environ" 2>/dev/null
      [ -n "$dev" ] && echo "GPU-fake-$dev, ${d#/proc/}"
    done
    for f in ${FAKE_FOREIGN:-}; do echo "GPU-fake-${f%%:*}, ${f#*:}"; done ;;
  *)
    echo "fake nvidia-smi: only -L and --query-compute-apps=gpu_uuid,pid --format=csv,noheader" >&2
    exit 2 ;;
esac
