#!/usr/bin/env bash
# Installs what `make test` needs on a fresh Debian machine (CI runs as root): the reference's
# PyTorch and NumPy for /usr/bin/python3, matplotlib (make ablate's plot), R's janeaustenr (the
# default corpus), Node.js and npm (the independent GPT-2 tokenizer), clang 14 with its runtime
# libraries (libFuzzer and the sanitizers of dev/fuzz/), Open MPI (the CPU trainer's data-parallel
# build, dev/test/test_mpi.sh). Each is installed only when missing; no GPU is needed.
set -u
source "$(dirname "$0")/../data/apt.sh"  # apt_get: waits for another apt, shows its output on failure
PYTHON=${PYTHON:-/usr/bin/python3}
missing=()
"$PYTHON" -c "import torch, numpy" >/dev/null 2>&1 || missing+=(python3-torch python3-numpy)
"$PYTHON" -c "import matplotlib" >/dev/null 2>&1 || missing+=(python3-matplotlib)
[ -d /usr/lib/R/site-library/janeaustenr ] || missing+=(r-cran-janeaustenr)
command -v Rscript >/dev/null 2>&1 || missing+=(r-base-core)
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
command -v g++ >/dev/null 2>&1 || missing+=(g++)
command -v clang++ >/dev/null 2>&1 || missing+=(clang)
command -v mpicxx >/dev/null 2>&1 || missing+=(libopenmpi-dev)
command -v mpirun >/dev/null 2>&1 || missing+=(openmpi-bin)
# libFuzzer's runtime (-fsanitize=fuzzer) comes with the sanitizers' in libclang-rt-14-dev
ls /usr/lib/llvm-14/lib/clang/*/lib/linux/libclang_rt.fuzzer-*.a >/dev/null 2>&1 || missing+=(libclang-rt-14-dev)
if [ ${#missing[@]} -gt 0 ]; then
  echo "install_deps: installing ${missing[*]}"
  if [ "$(id -u)" != 0 ]; then
    echo "install_deps: need root to apt-get install ${missing[*]} (HINT: run as root or install them yourself)" >&2
    exit 1
  fi
  apt_get install_deps update && apt_get install_deps install "${missing[@]}" || exit 1
fi
"$PYTHON" -c "import torch, numpy, matplotlib" >/dev/null 2>&1 || { echo "install_deps: $PYTHON still cannot import torch, numpy and matplotlib" >&2; exit 1; }
command -v clang++ >/dev/null 2>&1 || { echo "install_deps: clang++ still missing" >&2; exit 1; }
command -v mpicxx >/dev/null 2>&1 && command -v mpirun >/dev/null 2>&1 || { echo "install_deps: mpicxx or mpirun still missing" >&2; exit 1; }
echo "PASS deps: torch, numpy, matplotlib, R janeaustenr, node, clang, Open MPI present (torch $("$PYTHON" -c 'import torch; print(torch.__version__)'), node $(node --version))"
