# emulator_common.sh: what kernel_emulator.sh needs, sourced by it after it
# set EMU_TAG (their FAIL lines' name), EMU_OPT (g++ optimization level) and OUT (the build folder):
# the compiler, cuda_bf16.h's folder, UBSan's alignment check when the compiler has it (every packed
# access must be aligned as on the GPU), and build(), which fails on any error or warning.

CXX=${CXX:-g++}
CUDA_INC=${CUDA_INC:-}
if [ -z "$CUDA_INC" ]; then
  for d in /usr/local/cuda/include /usr/local/cuda/targets/x86_64-linux/include /usr/include; do
    if [ -f "$d/cuda_bf16.h" ]; then CUDA_INC=$d; break; fi
  done
fi
if [ -z "$CUDA_INC" ]; then echo "FAIL $EMU_TAG: cuda_bf16.h not found (set CUDA_INC)"; exit 1; fi

SAN="-fsanitize=alignment -fno-sanitize-recover=all"
echo "int main(){return 0;}" >"$OUT/san_probe.cpp"
$CXX $SAN "$OUT/san_probe.cpp" -o "$OUT/san_probe" 2>/dev/null || SAN=""

build() { # source.cpp include_dir binary log [extra flags]
  if ! $CXX -std=c++17 "$EMU_OPT" -g0 -fno-strict-aliasing -Wall -Wno-unknown-pragmas $SAN ${5:-} \
       -I"$CUDA_INC" -I"$2" "$1" -o "$3" >"$4" 2>&1; then
    echo "FAIL $EMU_TAG build: $(grep -m1 -i 'error' "$4" || tail -n1 "$4") (log: $4)"
    return 1
  fi
  if grep -qi 'warning' "$4"; then
    echo "FAIL $EMU_TAG build: compiler warning: $(grep -m1 -i 'warning' "$4") (log: $4)"
    return 1
  fi
}
