#!/usr/bin/env bash
# Puts the peers' sources where dev/bench/bench.sh looks for them, in the ignored folder
# dev/bench/peers/ (never committed: not our code). Run it where the repositories can be reached
# (the GPU machine has no network), then carry dev/bench/peers to the GPU.
#
#   bash dev/bench/prepare_peers.sh LLMC_GIT_DIR [CUDNN_FRONTEND_GIT_DIR]
#     LLMC_GIT_DIR            a clone (or bare mirror) of github.com/karpathy/llm.c
#     CUDNN_FRONTEND_GIT_DIR  optional, github.com/NVIDIA/cudnn-frontend: llm.c then builds with cuDNN
#
# One change to llm.c, for CUDA 13 and this workplace: cudaMallocConditionallyManaged falls back to
# managed memory on out-of-memory, through a cudaMemAdvise call whose signature CUDA 13 changed (it
# no longer compiles), and managed memory beyond the card's size can hang a shared GPU. The patch
# turns that fallback into an "out of GPU memory" exit, which bench.sh reads as "halve B".
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -ge 1 ] || { echo "usage: bash dev/bench/prepare_peers.sh LLMC_GIT_DIR [CUDNN_FRONTEND_GIT_DIR]" >&2; exit 1; }
llmc_git=$1
dest=dev/bench/peers/llm.c
git -C "$llmc_git" rev-parse HEAD >/dev/null 2>&1 || { echo "prepare_peers: $llmc_git: not a git repository (HINT: git clone https://github.com/karpathy/llm.c)" >&2; exit 1; }
rm -rf "$dest" && mkdir -p "$dest"
git -C "$llmc_git" archive HEAD | tar -x -C "$dest"
git -C "$llmc_git" rev-parse HEAD >"$dest/COMMIT"
python3 - "$dest/llmc/cuda_utils.cuh" <<'EOF_PY'
import sys
path = sys.argv[1]
src = open(path).read()
start = src.find("cudaCheck_(cudaMallocManaged(out, bytes), file, line);")
end = src.find("return 1;", start)
if start < 0 or end < 0:
    sys.exit(f"prepare_peers: {path}: the managed-memory fallback was not found (llm.c changed; update this patch)")
line_start = src.rfind("\n", 0, start) + 1
patched = (src[:line_start] +
           '        fprintf(stderr, "out of GPU memory (bench patch: no managed-memory fallback)\\n");\n'
           "        exit(EXIT_FAILURE);\n        " + src[end:])
open(path, "w").write(patched)
EOF_PY
echo "prepare_peers: llm.c $(cat "$dest/COMMIT") in $dest (managed-memory fallback patched out)"
if [ $# -ge 2 ]; then
  mkdir -p "$dest/cudnn-frontend"
  git -C "$2" archive HEAD include | tar -x -C "$dest/cudnn-frontend"
  echo "prepare_peers: cudnn-frontend $(git -C "$2" rev-parse --short HEAD) headers in $dest/cudnn-frontend/include"
fi
