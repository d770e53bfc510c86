#!/usr/bin/env bash
# kernel_emulator.sh: runs the trainer's non-attention kernels (train_gpt2.cu) on the CPU, no GPU needed.
#
# Extracts byte for byte the sections of train_gpt2.cu named in SECTIONS below: a section starts at
# the header line (a comment line right under a `// ----` line) that begins with the start text and
# runs up to the header line that begins with its stop text, so the wording after the key words may
# change. Today: reductions, packed 16-byte types, encoder (with its host-side bucket builder),
# LayerNorm/RMSNorm, elementwise; classifier, optimizer, norms, init. Also the `#define` lines of the
# launchers' constants named in DEFINES. `#line` directives keep train_gpt2.cu's line numbers, so
# compiler errors and the emulator's messages point there. The only rewrite: an
# `extern __shared__ T name[];` (dynamic shared memory) would become a pointer to the emulated CTA's
# buffer. Then builds dev/cuda/kernel_emulator.cpp with the SIMT emulator of flash_emulator_shim.h
# (g++, -Wall, a warning fails, UBSan alignment) with floatX = bf16 and with floatX = float (the FP32
# build) and runs every case of both: one PASS/FAIL line per case with every output tensor's
# rel_err = |out - ref| / |ref| against the float64 references of dev/cuda/kernels_cpu.h; exit status
# non-zero on any FAIL. About 10 s on 2 cores, 35 s with --self-test.
#
# Proves and does not prove: see the header of kernel_emulator.cpp.
#
#   bash dev/cuda/kernel_emulator.sh [--filter SUBSTRING] [--one-schedule] [--first-fail] [--bf16-only]
#   bash dev/cuda/kernel_emulator.sh --self-test   # also: each of a list of deliberate bugs (mutants of
#                                                  # the extracted copy) must make the run FAIL
#   build/kernel_emu/kernel_emulator --fuzz 200 --seed 3   # after a run: random shapes instead of the list
#   KERNEL_EMU_SRC=path/to/train_gpt2.cu bash dev/cuda/kernel_emulator.sh   # another copy of the trainer
set -u
cd "$(dirname "$0")/../.."
SRC=${KERNEL_EMU_SRC:-train_gpt2.cu}
OUT=build/kernel_emu
mkdir -p "$OUT"
EMU_TAG=kernel-emu
EMU_OPT=-Og
. dev/cuda/emulator_common.sh # CXX, CUDA_INC, SAN, build()

self_test=0
bf16_only=0
args=()
for a in "$@"; do
  case "$a" in
    --self-test) self_test=1 ;;
    --bf16-only) bf16_only=1 ;;
    *) args+=("$a") ;;
  esac
done

# start header | stop header (the beginnings of header lines), one section a line
SECTIONS='// reductions|// kernels: attention data movement
// kernels: classifier, optimizer|// cuBLASLt'
# constants of the launchers (outside the sections) that the driver's copies of them use
DEFINES='REDUCE_MAX_BLOCKS NORM_BACKWARD_MAX_PACKS'

# --- extract ---------------------------------------------------------------------------------
printf '%s\n' "$SECTIONS" | awk -v src="$SRC" -v defines="$DEFINES" '
  BEGIN { nd = split(defines, def, " ") }
  NR == FNR { i = index($0, "|"); ns++; start[ns] = substr($0, 1, i - 1); stop[ns] = substr($0, i + 1); next }
  !on && /^#define / {
    for (k = 1; k <= nd; k++) {
      if ($2 == def[k]) { printf "#line %d \"%s\"\n%s\n", FNR, src, $0; got[k]++ }
    }
  }
  { header = prev ~ /^\/\/ ----/; prev = $0 }
  on && header && index($0, stop[on]) == 1 { closed[on] = 1; on = 0 } # may start the next section
  !on {
    for (k = 1; k <= ns; k++) {
      if (header && index($0, start[k]) == 1) {
        if (seen[k]++) { printf "extract: section header \"%s\" appears twice\n", start[k] > "/dev/stderr"; bad = 1 }
        on = k; printf "#line %d \"%s\"\n", FNR, src
      }
    }
    if (!on) { next }
  }
  /^#define / { for (k = 1; k <= nd; k++) { if ($2 == def[k]) { got[k]++ } } } # already in a section
  /(^|[^A-Za-z_])asm[ \t]*(volatile[ \t]*)?\(/ { stray_asm++ }
  /^[ \t]*extern[ \t]+__shared__[ \t]/ {
    # extern __shared__ [__align__(n)] TYPE NAME[]; -> TYPE* const NAME = (TYPE*)emu_dynamic_smem();
    line = $0
    match(line, /^[ \t]*/); indent = substr(line, 1, RLENGTH)
    sub(/^[ \t]*extern[ \t]+__shared__[ \t]+/, "", line)
    sub(/^__align__\([0-9]+\)[ \t]+/, "", line)
    if (match(line, /[A-Za-z_][A-Za-z0-9_]*\[\];[ \t]*$/)) {
      type = substr(line, 1, RSTART - 1); name = substr(line, RSTART, RLENGTH)
      sub(/\[\];[ \t]*$/, "", name); sub(/[ \t]+$/, "", type)
      print indent type "* const " name " = (" type "*)emu_dynamic_smem(); // [kernel_emulator] was: " $0
      dyn++
      next
    }
    printf "extract: line %d: an extern __shared__ declaration the extractor cannot rewrite\n", FNR > "/dev/stderr"; bad = 1
  }
  { print }
  END {
    for (k = 1; k <= ns; k++) {
      if (!seen[k]) { printf "extract: section header \"%s\" not found\n", start[k] > "/dev/stderr"; bad = 1 }
      else if (!closed[k]) { printf "extract: no \"%s\" after \"%s\"\n", stop[k], start[k] > "/dev/stderr"; bad = 1 }
    }
    for (k = 1; k <= nd; k++) {
      if (got[k] != 1) { printf "extract: #define %s found %d times\n", def[k], got[k] > "/dev/stderr"; bad = 1 }
    }
    if (stray_asm) { printf "extract: %d asm statement(s) in the sections: the emulator cannot run them\n", stray_asm > "/dev/stderr"; bad = 1 }
    exit bad
  }
' - "$SRC" >"$OUT/kernel_sections.inc.tmp" 2>"$OUT/extract.err"
if [ $? -ne 0 ]; then
  echo "FAIL kernel-emu extract: $(head -n1 "$OUT/extract.err")"
  exit 1
fi
if ! cmp -s "$OUT/kernel_sections.inc.tmp" "$OUT/kernel_sections.inc" 2>/dev/null; then
  mv "$OUT/kernel_sections.inc.tmp" "$OUT/kernel_sections.inc"
else
  rm -f "$OUT/kernel_sections.inc.tmp"
fi

# --- build -----------------------------------------------------------------------------------
stale() { # binary: older than any of its inputs?
  [ ! -x "$1" ] || [ "$OUT/kernel_sections.inc" -nt "$1" ] || [ dev/cuda/kernel_emulator.cpp -nt "$1" ] \
    || [ dev/cuda/kernels_cpu.h -nt "$1" ] || [ dev/cuda/flash_emulator_shim.h -nt "$1" ] || [ "$0" -nt "$1" ] \
    || [ dev/cuda/emulator_common.sh -nt "$1" ]
}

BIN=$OUT/kernel_emulator
BIN32=$OUT/kernel_emulator_fp32
pids=()
if stale "$BIN"; then build dev/cuda/kernel_emulator.cpp "$OUT" "$BIN" "$OUT/build.log" & pids+=($!); fi
if [ $bf16_only -eq 0 ] && stale "$BIN32"; then
  build dev/cuda/kernel_emulator.cpp "$OUT" "$BIN32" "$OUT/build_fp32.log" -DEMU_FP32 & pids+=($!)
fi
for p in "${pids[@]}"; do wait "$p" || exit 1; done

# --- run -------------------------------------------------------------------------------------
# a run that stops without its summary line (UBSan's misaligned access, a crash) gets a FAIL line
run() { # binary log
  "$1" "${args[@]}" 2>&1 | tee "$2"
  local r=${PIPESTATUS[0]}
  if ! grep -q '^kernel-emu[-a-z0-9]*: [0-9]* cases' "$2"; then
    local n_done case_name
    n_done=$(grep -c '^PASS \|^FAIL ' "$2")
    case_name=$("$1" --list "${args[@]}" 2>/dev/null | sed -n "$((n_done + 1))p")
    echo "FAIL kernel-emu: $1 stopped (exit $r) in case \"$case_name\": $(grep -m1 'runtime error' "$2" || tail -n1 "$2")"
    r=1
  fi
  return $r
}
rc=0
run "$BIN" "$OUT/run.log" || rc=1
if [ $bf16_only -eq 0 ]; then
  run "$BIN32" "$OUT/run_fp32.log" || rc=1
fi
[ $self_test -eq 1 ] || exit $rc

# --- self-test: deliberate bugs must be caught -------------------------------------------------
# Every mutant is planted in one copy of the extracted text, behind a run-time switch: OLD, an
# expression in the first line containing it at or after the line containing ANCHOR (the kernel's
# name and first parameter), becomes `(EMU_MUTANT(k) ? (NEW) : (OLD))`, and `--mutant k` selects
# it. One build for all of them (a build is most of a mutant's cost); with no mutant selected that
# copy must pass.
# description | anchor | OLD | NEW
MUTANTS=(
  "norm_backward: no barrier between the warps' adds into shared memory|// the block's sums: warp 0 writes|__syncthreads()|(void)0"
  "warp_sum: butterfly stops at lane distance 2|float warp_sum(|off > 0|off > 1"
  "bias_backward: no barrier before the row lanes are added|bias_backward_kernel(float* dbias|__syncthreads()|(void)0"
  "norm_backward: the first block to take a ticket finalizes, not the last|norm_backward_kernel(floatX* dinp|atomicAdd(counter, 1u) == gridDim.x - 1|atomicAdd(counter, 1u) == 0"
  "norm_backward: the ticket counter is not reset|norm_backward_kernel(floatX* dinp|*counter = 0u|*counter = *counter"
  "bias_backward: partial row from the column group|bias_backward_kernel(float* dbias|(size_t)blockIdx.y * OC|(size_t)blockIdx.x * OC"
  "fused_classifier: padded columns get softmax too|fused_classifier_kernel(floatX* logits|col < V|col < Vp"
  "softmax_stats_merge: the old sum is not rescaled to the new max|softmax_stats_merge(float* m|*s * expf(*m - mm)|*s"
  "encoder_backward_wte_reduce: last chunk of a token dropped|encoder_backward_wte_reduce_kernel(float* dwte|s < reduce_start[r + 1]|s < reduce_start[r + 1] - 1"
  "encoder_backward_wte: one position past the chunk|encoder_backward_wte_kernel(float* dwte|p < chunk_start[u + 1]|p <= chunk_start[u + 1]"
  "encoder_forward: position from the batch index|encoder_forward_kernel(floatX* out|bt % T|bt / T"
  "adamw: v corrected with bc1 (16-byte path)|adamw_kernel(floatX* params|v[j] / bc2|v[j] / bc1"
  "adamw: the clip applies below the threshold|adamw_kernel(floatX* params|norm > grad_clip|norm < grad_clip"
  "residual_layernorm_forward: statistics of inp1, not of the residual|residual_layernorm_forward_kernel(floatX* residual|(inp2 != NULL ? residual : inp1)|inp1"
  "loss_sum: the last warp's sum dropped|loss_sum_kernel(double* accum|w < nwarps|w < nwarps - 1"
  "sum_squares_partial: grid stride in threads, not in f128 packs|sum_squares_partial_kernel(float* partial|(size_t)gridDim.x * blockDim.x * f128::size|(size_t)gridDim.x * blockDim.x"
  "block_sum: reads one warp slot past the block's warps|float block_sum(|lane < nwarps|lane <= nwarps"
)
MD=$OUT/mutants
rm -rf "$MD"; mkdir -p "$MD"
cp "$OUT/kernel_sections.inc" "$MD/"
st_fail=0
unplanted=()
for i in "${!MUTANTS[@]}"; do
  spec=${MUTANTS[$i]}
  desc=${spec%%|*}; rest=${spec#*|}
  anchor=${rest%%|*}; rest=${rest#*|}
  old=${rest%%|*}; new=${rest#*|}
  awk -v anchor="$anchor" -v old="$old" -v new="$new" -v k="$i" '
    !inside && index($0, anchor) > 0 { inside = 1 }
    inside && !done && (j = index($0, old)) > 0 {
      $0 = substr($0, 1, j - 1) "(EMU_MUTANT(" k ") ? (" new ") : (" old "))" substr($0, j + length(old)); done = 1
    }
    { print }
    END { exit done ? 0 : 1 }' "$MD/kernel_sections.inc" >"$MD/tmp.inc" && mv "$MD/tmp.inc" "$MD/kernel_sections.inc" || {
    echo "FAIL kernel-emu self-test m$i ($desc): the mutation did not apply (the kernel text changed?)"
    unplanted[$i]=1
    st_fail=1
  }
done
cp dev/cuda/kernel_emulator.cpp dev/cuda/flash_emulator_shim.h dev/cuda/kernels_cpu.h "$MD/"
if ! build "$MD/kernel_emulator.cpp" "$MD" "$MD/kernel_emulator" "$MD/build.log" >"$MD/build.msg"; then
  echo "FAIL kernel-emu self-test: the mutants' build: $(cat "$MD/build.msg")"
  exit 1
fi
if ! "$MD/kernel_emulator" --first-fail >"$MD/none.log" 2>&1; then
  echo "FAIL kernel-emu self-test: the mutants' copy with no mutant selected fails: $(grep -m1 '^FAIL' "$MD/none.log" | cut -c1-200)"
  st_fail=1
fi
for i in "${!MUTANTS[@]}"; do
  [ -z "${unplanted[$i]:-}" ] || continue
  desc=${MUTANTS[$i]%%|*}
  "$MD/kernel_emulator" --first-fail --mutant "$i" >"$MD/m$i.log" 2>&1
  if [ $? -ne 0 ] && grep -q '^FAIL\|runtime error' "$MD/m$i.log"; then
    echo "PASS kernel-emu self-test m$i ($desc): caught: $(grep -m1 '^FAIL\|runtime error' "$MD/m$i.log" | cut -c1-200)"
  else
    echo "FAIL kernel-emu self-test m$i ($desc): not caught (log: $MD/m$i.log)"
    st_fail=1
  fi
done
[ $rc -eq 0 ] && [ $st_fail -eq 0 ]
