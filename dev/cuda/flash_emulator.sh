#!/usr/bin/env bash
# flash_emulator.sh: runs the flash attention kernels of train_gpt2.cu on the CPU (no GPU needed).
#
# Extracts the section "kernels: flash attention (BF16 builds, head sizes 64 and 128)" of
# train_gpt2.cu (up to "kernels: classifier, optimizer, norms, init") byte for byte, with exactly
# two textual rewrites: the three `extern __shared__ __align__(16) unsigned char flash_smem[];`
# become a pointer to the emulated CTA's shared memory, and the body of mma_16816 (its inline PTX
# mma.sync) becomes a call of the emulator's warp-collective mma. `#line` directives keep
# train_gpt2.cu's line numbers, so compiler errors and the emulator's messages point there.
# Then builds dev/cuda/flash_emulator.cpp as host C++ (g++, one process) and runs every case: one
# PASS/FAIL line per case (and a line of every tensor's rel_err), exit status non-zero on any FAIL.
#
# Proves: the kernels' source text computes causal GQA attention (forward, backward) within bf16
# tolerance of a float64 reference under the PTX m16n8k16 fragment layout and the CTA/warp
# synchronization as emulated (three thread schedules, bit-identical results required).
# Does not prove: real timing, the GPU memory model, bank conflicts, shared-memory races beyond
# barrier placement, fast-math intrinsics. See the header of flash_emulator.cpp.
#
#   bash dev/cuda/flash_emulator.sh [--filter SUBSTRING] [--one-schedule] [--first-fail]
#   bash dev/cuda/flash_emulator.sh --self-test   # also: each of a list of deliberate bugs (mutants
#                                                 # of the extracted copy, or of the emulator's mma
#                                                 # layout) must make the run FAIL (~1-2 minutes)
#   FLASH_EMU_SRC=path/to/train_gpt2.cu bash dev/cuda/flash_emulator.sh   # another copy of the trainer
set -u
cd "$(dirname "$0")/../.."
SRC=${FLASH_EMU_SRC:-train_gpt2.cu}
OUT=build/flash_emu
mkdir -p "$OUT"
EMU_TAG=flash-emu
EMU_OPT=-O1
. dev/cuda/emulator_common.sh # CXX, CUDA_INC, SAN, build()

self_test=0
args=()
for a in "$@"; do
  if [ "$a" = "--self-test" ]; then self_test=1; else args+=("$a"); fi
done

# --- extract ---------------------------------------------------------------------------------
awk -v src="$SRC" '
  BEGIN { start = "// kernels: flash attention (BF16 builds, head sizes 64 and 128)";
          stop = "// kernels: classifier, optimizer, norms, init" }
  $0 == start { on = 1; found_start = 1; printf "#line %d \"%s\"\n", NR, src }
  $0 == stop && on { on = 0; found_stop = 1 }
  !on { next }
  skipping {
    if (index($0, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32") > 0) { saw_ptx = 1 }
    if ($0 == "}") {
      print "    emu_mma_16816(c, a, b); // [flash_emulator] replaces the inline PTX mma.sync"
      print "}"
      printf "#line %d \"%s\"\n", NR + 1, src
      skipping = 0
    }
    next
  }
  /^[ \t]*extern __shared__ __align__\(16\) unsigned char flash_smem\[\];[ \t]*$/ {
    match($0, /^[ \t]*/)
    print substr($0, 1, RLENGTH) "unsigned char* const flash_smem = emu_flash_smem(); // [flash_emulator] was: extern __shared__ __align__(16) unsigned char flash_smem[];"
    smem++
    next
  }
  index($0, "void mma_16816(float c[4], const uint32_t a[4], const uint32_t b[2]) {") > 0 {
    print; skipping = 1; mma++; next
  }
  /(^|[^A-Za-z_])asm[ \t]*(volatile[ \t]*)?\(/ { stray_asm++ }
  /__shared__/ { stray_shared++ }
  { print }
  END {
    bad = 0
    if (!found_start || !found_stop) { print "extract: section markers not found" > "/dev/stderr"; bad = 1 }
    if (smem != 3) { printf "extract: expected 3 flash_smem declarations, found %d\n", smem > "/dev/stderr"; bad = 1 }
    if (mma != 1 || !saw_ptx) { print "extract: mma_16816 with its mma.sync m16n8k16 bf16 body not found exactly once" > "/dev/stderr"; bad = 1 }
    if (stray_asm) { printf "extract: %d other asm statement(s) in the section: the emulator cannot run them\n", stray_asm > "/dev/stderr"; bad = 1 }
    if (stray_shared) { printf "extract: %d other __shared__ declaration(s) in the section\n", stray_shared > "/dev/stderr"; bad = 1 }
    exit bad
  }
' "$SRC" >"$OUT/flash_section.inc.tmp" 2>"$OUT/extract.err"
if [ $? -ne 0 ]; then
  echo "FAIL flash-emu extract: $(head -n1 "$OUT/extract.err")"
  exit 1
fi
if ! cmp -s "$OUT/flash_section.inc.tmp" "$OUT/flash_section.inc" 2>/dev/null; then
  mv "$OUT/flash_section.inc.tmp" "$OUT/flash_section.inc"
else
  rm -f "$OUT/flash_section.inc.tmp"
fi

# --- build -----------------------------------------------------------------------------------
BIN=$OUT/flash_emulator
if [ ! -x "$BIN" ] || [ "$OUT/flash_section.inc" -nt "$BIN" ] || [ dev/cuda/flash_emulator.cpp -nt "$BIN" ] \
   || [ dev/cuda/flash_emulator_shim.h -nt "$BIN" ] || [ "$0" -nt "$BIN" ] || [ dev/cuda/emulator_common.sh -nt "$BIN" ]; then
  build dev/cuda/flash_emulator.cpp "$OUT" "$BIN" "$OUT/build.log" || exit 1
fi

# --- run -------------------------------------------------------------------------------------
"$BIN" "${args[@]}"
rc=$?
[ $self_test -eq 1 ] || exit $rc

# --- self-test: deliberate bugs must be caught -------------------------------------------------
# mutate FILE NTH OLD NEW: in the NTH line containing the fixed string OLD, replace it by NEW
mutate() {
  awk -v old="$3" -v new="$4" -v nth="$2" '
    !done && (i = index($0, old)) > 0 && ++seen == nth { $0 = substr($0, 1, i - 1) new substr($0, i + length(old)); done = 1 }
    { print }
    END { exit done ? 0 : 1 }' "$1" >"$1.tmp" && mv "$1.tmp" "$1"
}
K=flash_section.inc
S=flash_emulator_shim.h
m1() { mutate $K 1 "__syncthreads(); // the tiles (and on the first pass sQ) are complete" ";"; }
m2() { mutate $K 2 "__syncthreads(); // every warp is done with the previous K/V tile" ";"; }
m3() { mutate $K 1 "__syncthreads(); // every warp is done with the previous Q/dO tile (on the first pass: K/V loads issued)" ";"; }
m4() { mutate $K 1 "a[1] = lds_bf16x2(p + 8 * stride);" "a[1] = lds_bf16x2(p + 8);" &&
       mutate $K 1 "a[2] = lds_bf16x2(p + 8);" "a[2] = lds_bf16x2(p + 8 * stride);"; }
m5() { mutate $K 1 "(query < key || query >= T)" "(query <= key || query >= T)"; }
m6() { mutate $K 2 "if (t >= T) { continue; }" ";"; }
m7() { mutate $K 1 "m_new = fmaxf(m_new, __shfl_xor_sync(0xFFFFFFFFu, m_new, 2));" ";"; }
m8() { mutate $K 1 "float* s_delta = s_lse + FLASH_BLOCK_M;" "float* s_delta = s_lse + 2 * FLASH_BLOCK_M;"; }
m9() { mutate $K 1 "flash_store_pair(pk + dj * 8, k0 + v0, k1 + v1, dk.accumulate);" "flash_store_pair(pk + dj * 8, k0, k1, dk.accumulate);"; }
m10() { mutate $K 1 "if (accumulate) {" "if (false) {"; }
m11() { mutate $K 1 "const int key0 = n_block * FLASH_BLOCK_N + warp * 16 + group;" "const int key0 = n_block * FLASH_BLOCK_N + warp * 16 + quad;"; }
m12() { mutate $S 1 "*row = g + ((reg & 1) ? 8 : 0);" "*row = g + ((reg & 2) ? 8 : 0);" &&
        mutate $S 1 "*col = 2 * t + half + ((reg & 2) ? 8 : 0);" "*col = 2 * t + half + ((reg & 1) ? 8 : 0);"; }
desc=(
  ""
  "forward: no barrier after loading the K/V tiles"
  "dQ kernel: no barrier before overwriting the K/V tiles"
  "dK/dV kernel: no barrier before overwriting the Q/dO tiles"
  "load_frag_a with a[1] and a[2] swapped"
  "dK/dV causal mask off by one (query <= key)"
  "dQ epilogue writes rows t >= T"
  "forward row max reduced over 2 lanes of the quad, not 4"
  "dK/dV: s_delta past the launcher's shared memory"
  "dK/dV: k = v epilogue drops dV"
  "flash_store_pair ignores accumulate"
  "dK/dV: key0 from quad instead of group"
  "emulator: the PTX A layout with a1 and a2 swapped (the kernel must then fail)"
)
st_fail=0
for i in $(seq 1 12); do
  d="$OUT/mutants/m$i"
  rm -rf "$d"; mkdir -p "$d"
  cp "$OUT/flash_section.inc" dev/cuda/flash_emulator.cpp dev/cuda/flash_emulator_shim.h "$d/"
  if ! (cd "$d" && "m$i"); then
    echo "FAIL flash-emu self-test m$i (${desc[$i]}): the mutation did not apply (the kernel text changed?)"
    st_fail=1; continue
  fi
  if ! build "$d/flash_emulator.cpp" "$d" "$d/flash_emulator" "$d/build.log" >"$d/build.msg"; then
    echo "FAIL flash-emu self-test m$i (${desc[$i]}): $(cat "$d/build.msg")"
    st_fail=1; continue
  fi
  "$d/flash_emulator" --first-fail >"$d/run.log" 2>&1
  if [ $? -ne 0 ] && grep -q '^FAIL' "$d/run.log"; then
    echo "PASS flash-emu self-test m$i (${desc[$i]}): caught: $(grep -m1 '^FAIL' "$d/run.log" | cut -c1-220)"
  else
    echo "FAIL flash-emu self-test m$i (${desc[$i]}): not caught (log: $d/run.log)"
    st_fail=1
  fi
done
[ $rc -eq 0 ] && [ $st_fail -eq 0 ]
