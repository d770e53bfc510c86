/*
Kernel lab: causal attention forward of train_gpt2.cu, every scheme, GQA/MQA.

  atty (B, T, C) = softmax(scale * q k^T, causal) v, per query head h reading kv head h / (H / Hkv);
  q, k, v read where the scheme keeps them (QKVLayout: columns of qkv (B, T, W), x or q_residual's query).

The two numbers (benchmark shape: B = 8, H = Hkv = 12, hd = 64, the d12 model's heads; bf16):
  FLOPs  = 2 * B * H * T^2 * hd: QK^T and PV, 2 * T^2 * hd each per head, over half of the T x T square
           T = 1024: 12.9 GFLOP   T = 2048: 51.5 GFLOP   T = 4096: 206.2 GFLOP
  bytes  = 2 * B * T * hd * (2 H + 2 Hkv) + 4 * B * H * T: q, k, v read once, O written once (bf16),
           lse written once (fp32)
           T = 1024: 50.7 MB      T = 2048: 101.4 MB     T = 4096: 202.9 MB
  Predicted on an H100 (~790 TFLOP/s dense bf16, ~3 TB/s), FLOPs / 790e12 vs bytes / 3e12:
           T = 1024: 0.0163 ms compute vs 0.0169 ms memory: balanced (254 FLOP/byte, the ridge is 263)
           T = 2048: 0.0652 ms compute vs 0.0338 ms memory: compute-bound
           T = 4096: 0.2610 ms compute vs 0.0676 ms memory: compute-bound
  (version 1 is held to neither: it computes the full T x T scores and writes and reads (B, H, T, T) twice)

Versions (1 and 3 the trainer's own code, included below; 2, 5, 6 and 7 in attention_flash_versions.h; `make labs`
builds build/lab_attention_forward):
  1  unfused, ./build/lab_attention_forward 1: permute_heads_kernel q, k, v to (B, H|Hkv, T, hd) (grid-stride,
     256 threads), cuBLASLt strided-batched S = scale q k^T over B*Hkv batches (full T x T, bf16 out),
     softmax_causal_forward_kernel in place (a warp per row, 8 rows per 256-thread block), cuBLASLt
     y = P v, unpermute to (B, T, C). Any hd; memory O(B H T^2); deterministic (cuBLASLt keeps one
     algorithm per shape, no atomics). FP32 builds: this version only. ms on GPU: "Measured" below.
  2  fused flash, ./build/lab_attention_forward 2: flash_attention_forward_kernel<hd>, grid (ceil(T/64),
     B*H), 128 threads (4 warps x 16 query rows), dynamic smem Q, K, V tiles of 64 x (hd + 8) bf16
     (27.0 KiB at hd 64, 51.0 KiB at hd 128; V shares K's tile when k == v), S/P, acc_o, row_max,
     row_sum in registers (fp32; P rounded to bf16 as the PV mma's A fragment), mma.sync m16n8k16 bf16;
     key tiles only up to the diagonal; writes O and lse (B, H, T). 106 registers at hd 64, 134 at
     hd 128, no spills (ptxas -v, nvcc 13.0, sm_90). hd 64 or 128, BF16 builds, rows
     16-byte aligned with strides a multiple of 8 (host-checked), any T (rows >= T zero-filled);
     deterministic (no atomics). ms on GPU: "Measured" below.
  3  flash version 3, ./build/lab_attention_forward 3 (the trainer's flash forward since the H100 and
     the H200 timed it, 2026-11-26):
     flash3_attention_forward_kernel<hd>, grid (B*H, ceil(T/128)): the heads of one batch row side by
     side, so a GQA group's query heads read their kv head's tiles from L2 together; 256 threads
     (8 warps x 16 query rows = 128 rows per CTA), Q's A fragments held in registers for the whole key
     loop (ldmatrix.x4 once), K and V tiles of 64 keys double-buffered by cp.async.cg (the next tile
     lands while this one is computed; rows >= T zero-filled), their B fragments by ldmatrix.x4 (K) and
     ldmatrix.x4.trans (V: P V's column pairs from V's row-major tile), two 8-wide tiles per instruction;
     a warp skips the key tiles that lie wholly after its 16 rows. Shared rows hd + 8 bf16 (144 or 272
     bytes: 4 banks past a multiple of 128 bytes), so the 8 rows of one ldmatrix phase (16 bytes each)
     start 4 banks apart and cover the 32 banks once, and a cp.async phase (8 lanes x 16 bytes of one
     row) is 128 contiguous bytes: no bank conflicts either way. Dynamic smem Q + 2 stages of K, V:
     54.0 KiB at hd 64, 102.0 KiB at hd 128. ptxas (nvcc 13.0, sm_90, --use_fast_math):
       flash3_attention_forward_kernel<64>:  128 registers, 0 bytes spill stores, 0 bytes spill loads
         (__launch_bounds__(256, 2): 2 CTAs = 16 warps per SM; without the bound 142 registers, 1 CTA)
       flash3_attention_forward_kernel<128>: 205 registers, 0 bytes spill stores, 0 bytes spill loads
         (1 CTA = 8 warps per SM)
     (cuobjdump is not installed on the development machine: the SASS is read on the GPU run.)
     Deterministic (no atomics). ms on GPU: "Measured" below.

  Predicted (not measured), B 8, H 12, hd 64, T 1024: the two numbers above put the floor at
  0.017 ms; what binds the flash kernels is shared memory (128 bytes per clock per SM: 132 SMs x
  1.755 GHz = 29.6 TB/s) and mma.sync (taken as 2/3 of the 790 TFLOP/s dense rate: 527 TFLOP/s).
  Counted per warp tile (16 query rows x 64 keys; 544 per (b, h) with causal skipping, 52,224 in all,
  64 m16n8k16 each: 13.7 GFLOP):
    version 2: Q 2 KiB + K 8 KiB + V 8 KiB per warp tile, V's B fragments as two 16-bit loads per
       register (half a 32-bit load's bytes per instruction): 26 KiB-equivalent -> 1.39 GB of shared
       traffic, 0.047 ms; mma 0.026 ms; exp2 (16 per clock per SM) 0.015 ms. Predicted 0.047 ms
       (275 TFLOP/s on the 12.9 GFLOP: 35% of 790).
    version 3: K 8 KiB + V 8 KiB per warp tile (Q from registers, V by ldmatrix.trans) -> 0.86 GB,
       0.029 ms; mma and exp2 as version 2. Predicted 0.030 ms (430 TFLOP/s, 54% of 790): 1.6x
       version 2. At T 2048 and 4096 the same ratios (the warp tiles scale with T^2).
  Measured (H100 80GB HBM3, 2026-11-26, --bench: median of 25, L2 flushed; dev/results/
  2026-11-26_NVIDIA-H100-80GB-HBM3_gpu_followup.txt), ms at T 1024 / 2048 / 4096: version 1 0.410 /
  1.312 / 5.359; version 2 0.126 / 0.401 / 1.409 (2.7x its prediction at T 1024); version 3 0.094 /
  0.311 / 1.160 (3.1x its prediction; 1.3x faster than version 2, not the 1.6x predicted); PyTorch SDPA
  0.083 / 0.157 / 0.503. The shared-memory model is not what binds: both versions sit far below it.
  Why version 3 missed by 3.1x: the model takes the largest of three units' times (shared memory,
  mma, exp2) as if they overlapped perfectly, but within a warp they run one after another: S = Q K^T,
  then the softmax (two shuffle rounds per row, a dependent exp2 chain), then P V, with two barriers
  per 64-key tile, and each ldmatrix'd fragment feeds only two mma, so its latency is not covered.
  Adding the units' times instead (0.029 + 0.026 + 0.015 = 0.070 ms) comes within 1.34x of the
  measured 0.094; the rest is barrier waits and the wave tail (768 CTAs over 264 slots).

  5  flash version 5, ./build/lab_attention_forward 5 (issue 58; in attention_flash_versions.h, not in
     the trainer until a GPU measures it faster than version 3): flash5_attention_forward_kernel<hd>,
     grid (B*H, ceil(T/128)) as version 3, 128 threads: 4 warps x 32 query rows (two m16 tiles: each
     K and V fragment from ldmatrix feeds two mma), key tiles of 128 at hd 64 and 64 at hd 128 (one
     barrier pair each; at hd 128 computed in two parts of 32 keys, each its own S and softmax round,
     since O alone holds 128 registers a thread and S of 64 keys spilled 52 bytes at sm_90),
     double-buffered by cp.async (the next tile's copies issued before this tile's S, so before its
     softmax); Q's fragments read from shared memory at each 16-wide step (S 128 + O 64 registers a
     thread at hd 64 leave no room to hold them); the running max in raw score units, so each
     probability is one FFMA into exp2; P packed to bf16 as it is made; masks only on tiles that
     cross a warp's diagonal or T, tiles past a warp's rows skipped, past the CTA's never loaded; O
     written through the warp's own rows of shared memory as 16-byte chunks (a row's 128 bytes at hd
     64 in one line). GQA: the g query heads of a group are neighbouring CTAs sharing the kv head's
     tiles through L2; one CTA holding the g heads would need g times O and S in registers, which
     this budget does not have. Dynamic smem Q + 2 stages of K, V: 90.0 KiB at hd 64, 102.0 KiB at
     hd 128 (2 CTAs = 8 warps per SM at both). ptxas (nvcc 13.0, --use_fast_math):
       flash5_attention_forward_kernel<64>:  253 registers at sm_80, 255 at sm_90, 0 bytes spill
       flash5_attention_forward_kernel<128>: 244 registers at sm_80, 243 at sm_90, 0 bytes spill
       (__launch_bounds__(128, 2): 2 CTAs = 8 warps per SM, 180 and 204 KiB of shared memory)
     cuobjdump is not installed here either: the SASS (HMMA count, no LDL/STL) is read on the GPU run.
     Predicted (not measured), B 8, H 12, hd 64, T 1024, per warp tile of 32 rows x 128 keys (144
     per (b, h): every warp of a 128-row CTA takes the diagonal tile whole, 13,824 in all; 256
     m16n8k16 each, 14.5 GFLOP): shared traffic K 16 KiB + V 16 KiB + Q 4 KiB = 36 KiB per warp
     tile, 0.51 GB (0.59x version 3's 0.86), 0.017 ms; mma 0.028 ms; exp2 56.6M, 0.015 ms. The sum
     (the model version 3's measurement supports, above): 0.060 ms, against version 3's 0.070 by the
     same sum; the max (the model version 3 missed by 3.1x): 0.028 ms. Predicted 0.060 ms at T 1024,
     0.24 ms at 2048, 0.96 ms at 4096 (T^2): 1.4x SDPA's measured 0.083 ms at 1024, but 0.65x and
     0.52x at 2048 and 4096, below the issue's 0.8x. What the design changes about version 3's miss:
     4x the mma per barrier pair (256 per warp per 128-key tile against 64), each fragment feeding
     two mma (its latency behind the other m-tile's), half the softmax rounds per score, one FFMA
     less per score. What it does not change: the softmax still sits between the two matmuls of its
     warp (FlashAttention-3's ping-pong, issue 59, overlaps them), and 8 warps per SM hide less
     latency than version 3's 16 at hd 64.

  6  flash version 6, ./build/lab_attention_forward 6 (issue 59 part 2; in attention_flash_versions.h,
     its first cut; predicted below before it was written): flash6_attention_forward_kernel<hd> for
     sm_90a, FlashAttention-3's design: grid (B*H, ceil(T/128)), 384 threads = 3 warpgroups.
     Warpgroup 0 is the producer: setmaxnreg.dec to 24 registers, one thread issues the bulk tensor
     copies (cp.async.bulk.tensor.3d through a tensor map per role, (the role's columns, T, B),
     boxes of 64 columns x 128 rows, 128-byte swizzle, zero fill past T) of Q once and of K and V
     into a ring of 2 stages (hd 128: 32 KiB a tile, Q 32 KiB + 4 tiles = 160 KiB; hd 64: 16 KiB a
     tile, 80 KiB; version 7 takes 3 at hd 64, 112 KiB), each stage a "full" mbarrier (the copies'
     bytes) and an "empty" one (the consumers' 256 arrivals); a K=V scheme's
     tile is copied once and read as both. Warpgroups 1 and 2 are the consumers, 64 query rows each,
     setmaxnreg.inc to 240: S = Q K^T by wgmma m64n128k16 from shared memory (Q and K K-major,
     128-byte swizzle; hd / 16 instructions), the online softmax on S's 64 registers a thread, P
     packed to bf16 in registers as wgmma's A fragments (the accumulator layout is the A layout, no
     shuffle), O += P V by wgmma m64n{hd}k16 with A from registers and V MN-major (128-byte swizzle,
     so V's row-major tile needs no transpose). Registers a consumer thread: S 64, O 32 (hd 64) or 64
     (hd 128), P 32, the next tile's S 64 when the S of tile j + 1 is issued before the softmax of
     tile j (the intra-warpgroup overlap): 192 or 224 of 240. Then the two consumers take turns by
     named barriers (bar.sync / bar.arrive, modelled in the CPU runtime with this version), so one's
     softmax runs under the other's wgmma (the ping-pong). The first cut has neither overlap: each
     consumer issues S, waits, runs the softmax, issues P V, waits, and releases the stage.
     ptxas (nvcc 13.0, sm_90a, --use_fast_math, -Xptxas -v): flash6_attention_forward_kernel<64> and
     <128>: 168 registers at entry (the cap of 384 threads, 65536 / 384, that setmaxnreg needs), 0 bytes
     stack frame, 0 spills, 48 bytes of static shared memory (the mbarriers); no C7508 (setmaxnreg
     honoured), no C7517 / C7519 (no wgmma serialized by an injected wait). Dynamic shared memory 81 KiB
     at hd 64 and 161 KiB at hd 128, with 1 KiB to align the swizzle. Checked on the CPU runtime (its
     model of wgmma, the bulk copies and mbarriers: dev/cudacpu/test_hopper.cu): `--check` on every
     shape of every scheme (Hkv H, H/2, 1; T 1 to 1024; hd 64 and 128), `--large`. Not yet on a GPU:
     where the build is not sm_90a or the GPU not compute capability 9.0 the lab says SKIP for it.
     Predicted (not measured), B 8, H 12, T 1024 to 16384. Executed FLOPs count the diagonal tiles
     whole (128 x 128 tiles: nt (nt + 1) / 2 per head, nt = T / 128); scores exponentiated the same.
     Units on an H100 or H200: wgmma at the measured dense 790 TFLOP/s; MUFU exp2 16 a clock an SM
     (3.7e12/s); the softmax's FP32 work about 5 operations a score (scale and subtract in one FFMA,
     max, sum, the bf16 pack, the diagonal's mask) at 128 a clock an SM (29.6e12/s); HBM 4.8 TB/s
     (Q, K, V read once and O written once: 0.011 ms at T 1024, never the largest unit). The two
     models, as versions 3-5 taught: "sum" (each consumer's matmuls and softmax in series, no
     overlap: the first cut) and "overlap" (the ping-pong hides the smaller of the two units: the
     larger, times 1.10 for the fill, the epilogue and the wave tail of 768 to 12288 CTAs over 132 SMs).
       hd 64   T     exec GFLOP  wgmma ms  softmax ms  sum ms   overlap ms  SDPA (H100, measured)
               1024      14.5    0.018     0.025       0.043    0.027       0.083
               2048      54.8    0.069     0.094       0.163    0.103       0.157
               4096     212.6    0.269     0.365       0.634    0.401       0.503
               8192     837.5    1.060     1.437       2.497    1.581       not measured
              16384    3324.3    4.208     5.703       9.911    6.273       not measured
       hd 128  1024      29.0    0.037     0.025       0.062    0.040       not measured
               4096     425.2    0.538     0.365       0.903    0.592       not measured
              16384    6648.6    8.416     5.703      14.119    9.258       not measured
     At hd 64 the softmax, not the matmul, is the larger unit (exp2 alone is 0.83x wgmma's time): the
     first cut is predicted to beat SDPA's measured forward up to T 2048 (1.9x, 0.96x) and to lose at
     4096 (0.79x); the ping-pong is what the issue's 1.0x at every T needs (predicted 1.25x at 4096).
     At hd 128 wgmma is the larger unit. SASS facts that prove the fast path (read on the GPU run,
     dev/tools/sass_facts.py): HGMMA.64x128x16 and HGMMA.64x64x16 (or 64x128x16 at hd 128) present,
     no HMMA, no LDL/STL; UTMALDG (the bulk copies), SYNCS (mbarrier) and USETMAXREG present; and
     ptxas reports no "warpgroup.arrive is injected" (C7519) or "warpgroup.wait is injected" (C7517)
     for the kernel, each of which serializes the wgmma it names.

  7  flash version 7, ./build/lab_attention_forward 7 (issue 59 part 2b; in attention_flash_versions.h;
     predicted here before it was written, not measured): version 6 with the two overlaps its first
     cut left out, and the ring FlashAttention-3 sizes by head size:
     - the intra-warpgroup overlap: a consumer issues S_j = Q K_j^T and O += P_{j-1} V_{j-1} as two
       wgmma groups, waits for the first only (wgmma.wait_group 1), and runs tile j's softmax (max,
       exp2, row sums; nothing that touches O) while P V still runs; then waits for it, releases
       tile j - 1's stage, rescales O by tile j's correction and packs P_j. O_j = c_j (O_{j-1} +
       P_{j-1} V_{j-1}) is version 6's arithmetic in version 6's order, only issued earlier.
     - the ping-pong: the two consumers take turns to issue their wgmma by two named barriers
       (bar.sync on its own, bar.arrive on the other's; 256 threads each), so one consumer's softmax
       runs while the tensor cores work on the other's matmuls. Consumer 1 arrives once up front
       (consumer 0 goes first) and not after its last turn, so every barrier round completes.
     - the ring: 3 stages at hd 64 (16 KiB a tile of K and V each: Q + 6 tiles = 113 KiB of dynamic
       shared memory) and 2 at hd 128 (161 KiB, as version 6).
     Registers a consumer thread: S 64, O 32 or 64, P 32 (P_{j-1} in flight as wgmma's A while S_j's
     exponentials wait for the rescale): 128 or 160 plus addresses, of the 240 setmaxnreg gives.
     Predicted: the "overlap" column above (hd 64: 0.027, 0.103, 0.401, 1.581, 6.273 ms at T 1024,
     2048, 4096, 8192, 16384; hd 128: 0.040, 0.592, 9.258 ms at 1024, 4096, 16384): 1.25x SDPA's
     measured forward at hd 64 T 4096, against version 6's predicted 0.79x. The SASS facts are
     version 6's, plus BAR.SYNC and BAR.ARV with barriers 1 and 2, and no C7517 / C7519 for the
     kernel: an injected wgmma wait would put the softmax back in series with P V.
     ptxas (nvcc 13.0, sm_90a, --use_fast_math, -Xptxas -v): flash7_attention_forward_kernel<64> and
     <128>: 168 registers at entry, 0 bytes stack frame, 0 spills, 3 barriers (0 and the two turns),
     64 and 48 bytes of static shared memory; no C7514, C7517 or C7519. The first draft issued tile
     0's S in the loop with the P V issue under `if (n > 0)`: ptxas reported C7519 ("warpgroup.arrive
     is injected") and C7514 ("wgmma.mma_async instructions are serialized due to non wgmma
     instructions reading accumulator registers"), the register copies of O where the branch's two
     paths meet; tile 0 is peeled out of the loop for that. Checked on the CPU runtime: `--check` on
     every shape of every scheme, `--large`; its planted bugs m77 (O rescaled while its P V is in
     flight: the poison the runtime leaves in the accumulators is read) and m78 (consumer 0 never given
     its first turn: a deadlock naming named barrier 1) are caught.

  ./build/lab_attention_forward [version] [--scheme s] [--seed n] [--check] [--bench] [--quick] [--large] [--long]

--check, for each version and each shape of lab_check_shapes (every scheme x Hkv in {H, H/2, 1}
where allowed x T in {1, 63, 64, 65, 200, 1024} x hd in {16 (version 1), 64, 128}; B 2, H 4): fresh N(0, 1)
inputs per trial (seed printed), atty and every buffer of the path poisoned with 0xFF before each
run (guards around every buffer too), then atty against the CPU twin (dev/cpu/attention_tiled_cpu.h),
lse against the twin (versions 2, 3, 5, 6 and 7), atty of version >= 2 against version 1, no element left unwritten,
guards and inputs unchanged, a second run bit-identical. One PASS/FAIL line per (version, scheme,
shape); exit 1 on any FAIL. Tolerances: common.h. Without a GPU: one SKIP line, exit 0.
--large (BF16 builds; common.h's lab_attn_large): each flash version at the largest shape the trainer
admits (trainer_shape_check: B*T*C <= 2^31 - 1, B*H <= 65535): B 16383, T 512, C 256 (hd 64 with H 4,
hd 128 with H 2; Hkv H and 1; every scheme), so (B, T, C) holds 2^31 - 131072 elements and the
projection (B, T, 3C) is past 2^32. Only batch row B - 1 holds inputs (a fresh B = 1 trial, seed
printed); the CTAs of the last head of that row run (on the CPU runtime only those: run_only; on a GPU
every CTA), and that head's atty and lse are compared with the twin of the B = 1 trial, the rest of the
row still poison. An index computed in 32 bits shows there (mutants m62 and m63).
--bench: ms (median of 25, L2 flushed before each), TFLOP/s and GB/s from the two numbers above, at
B 8 (T 1024, 2048, 4096), then at d12's micro-step, B 64 and T 1024: 12 x that forward and the
backward lab's is the flash rows of a d12 training step (gpu_suite.sh's targets compare it with the
33.2 ms the trainer measured at c32bccf).
PyTorch's SDPA on the same shapes: python3 dev/cuda/sdpa_bench.py.
--long (with or instead of --bench): issue 59's grid, where its bar is 1.0x SDPA: B 8, H 12, T 1024,
2048, 4096, 8192, 16384, hd 64 then 128, the flash versions (version 1's (B, H, T, T) buffers take 13
GB at T 8192), median of 10 runs; the inputs are drawn on the device. python3 dev/cuda/sdpa_bench.py
--long times SDPA on the same grid; gpu_suite.sh's stage lab_bench_long runs both.
*/
#define TESTING
#include "../../train_gpt2.cu"
#include "../cpu/attention_tiled_cpu.h"
#include "attention_flash_versions.h"
#include "common.h"

// one version on one trial; returns 1 on FAIL. When v1_atty is not NULL and this is version 1,
// fills it with this version's atty (the baseline of later versions); for later versions, compares.
static int check_version(const LabArgs* a, const LabVersion* ver, const LabInputs* in, const std::vector<float>& atty_ref,
                         const std::vector<float>& lse_ref, std::vector<float>* v1_atty, int print) {
    AttnShape s;
    if (!lab_version_shape(ver, in, &s)) { return 0; }
    const LabShape* sh = &in->sh;
    const int B = sh->B, T = sh->T, H = sh->H, hd = sh->hd, C = in->C;
    char prefix[160];
    lab_shape_describe(sh, prefix, sizeof(prefix));
    LabAttn at;
    lab_attn_alloc(&at, &s, ver->variant, 0);
    LabBuf atty = lab_buf_alloc((size_t)B * T * C * sizeof(floatX), "atty");
    LabVerdict v;
    lab_verdict_init(&v);
    std::vector<unsigned char> first_atty, first_lse;
    const int runs = lab_runs_per_trial(a);
    for (int rep = 0; rep < runs; rep++) {
        lab_attn_poison_forward(&at);
        lab_buf_poison(&atty);
        lab_attention_forward(&at, (floatX*)atty.ptr, lab_sources(in));
        cudaCheck(cudaDeviceSynchronize());
        const std::vector<unsigned char> h_atty = lab_buf_download(&atty);
        const std::vector<unsigned char> h_lse = lab_buf_download(&at.lse);
        if (rep == 1) { // the second run: the same bytes
            lab_check_same(first_atty, h_atty, "atty", &v);
            lab_check_same(first_lse, h_lse, "lse", &v);
            break;
        }
        first_atty = h_atty;
        first_lse = h_lse;
    }
    lab_attn_guards_ok(&at, &v.fail);
    lab_buf_guards_ok(&atty, &v.fail);
    lab_inputs_intact(in, &v.fail);
    const size_t unwritten = lab_count_unwritten(first_atty, sizeof(floatX));
    if (unwritten > 0) { v.fail += "; " + std::to_string(unwritten) + " elements of atty never written (still 0xFF)"; }
    const std::vector<float> out = lab_x_to_floats(first_atty);
    if (print) {
        const LabIndex ix = lab_index_btchd(B, T, H, hd);
        lab_compare(prefix, ver->version, "atty", "cpu", out.data(), atty_ref.data(), out.size(), &ix, 0.0, LAB_TOL, &v);
        if (s.fused) {
            const std::vector<float> lse = lab_f32_from_bytes(first_lse);
            const size_t left = lab_count_unwritten(first_lse, sizeof(float));
            if (left > 0) { v.fail += "; " + std::to_string(left) + " elements of lse never written (still 0xFF)"; }
            const LabIndex il = lab_index_bht(B, H, T);
            lab_compare(prefix, ver->version, "lse", "cpu", lse.data(), lse_ref.data(), lse.size(), &il, 0.0, LAB_TOL_LSE, &v);
        }
        if (ver->version != 1 && v1_atty != NULL && !v1_atty->empty()) {
            lab_compare(prefix, ver->version, "atty", "v1", out.data(), v1_atty->data(), out.size(), &ix, 0.0, LAB_TOL, &v);
        }
    }
    if (ver->version == 1 && v1_atty != NULL) { *v1_atty = out; }
    lab_buf_free(&atty);
    lab_attn_free(&at);
    return print ? lab_attn_verdict(a, ver->version, in, &v) : 0;
}

static int check(const LabArgs* a) {
    const std::vector<LabShape> shapes = lab_check_shapes(a->scheme, a->quick);
    printf("check: %zu shapes (%s), tolerance %.0e (lse %.0e)\n", shapes.size(), a->quick ? "--quick" : "full", LAB_TOL,
           LAB_TOL_LSE);
    int failed = 0, passed_or_failed = 0;
    for (size_t i = 0; i < shapes.size(); i++) {
        LabInputs in;
        lab_inputs_make(&in, &shapes[i], a->seed, 0);
        std::vector<float> atty_ref, lse_ref;
        lab_twin_forward(&in, &atty_ref, &lse_ref); // the CPU twin on the same (rounded) inputs
        // version 1 first: it is the baseline of the later ones (run silently when not selected)
        std::vector<float> v1_atty;
        for (int k = 0; k < lab_attn_num_versions(0); k++) {
            const LabVersion* ver = &lab_attn_versions(0)[k];
            const int selected = lab_version_selected(a, ver->version);
            if (!lab_version_runs(a, ver)) { continue; }
            AttnShape s;
            if (!lab_version_shape(ver, &in, &s)) { continue; } // no kernel for this head size
            failed |= check_version(a, ver, &in, atty_ref, lse_ref, &v1_atty, selected);
            passed_or_failed += selected;
        }
        lab_inputs_free(&in);
    }
    if (passed_or_failed == 0) {
        printf("FAIL %s: no (version, shape) pair ran (version %d has no kernel for these shapes)\n", a->name, a->version);
        return 1;
    }
    return failed;
}

static void bench(const LabArgs* a) {
    LabTimer timer;
    lab_timer_init(&timer);
    lab_attn_bench_header(a, &timer);
    for (const LabBenchBT& bt : lab_bench_list(a)) {
        const LabShape sh = lab_bench_shape(bt);
        const double flops = lab_flops_forward(sh.B, sh.T, sh.H, sh.hd);
        const double bytes = lab_bytes_forward(sh.B, sh.T, sh.H, sh.Hkv, sh.hd);
        lab_attn_bench_predicted("forward", flops, bytes, &sh);
        LabInputs in;
        lab_bench_inputs_make(&in, &sh, a->seed, 0);
        for (int k = 0; k < lab_attn_num_versions(0); k++) {
            const LabVersion* ver = &lab_attn_versions(0)[k];
            AttnShape s;
            if (!lab_bench_runs(a, ver) || !lab_version_shape(ver, &in, &s)) { continue; }
            LabAttn at;
            lab_attn_alloc(&at, &s, ver->variant, 0);
            LabBuf atty = lab_buf_alloc((size_t)sh.B * sh.T * in.C * sizeof(floatX), "atty");
            const double ms = lab_time_median_ms(&timer, lab_bench_reps(a), [&]() {
                lab_attention_forward(&at, (floatX*)atty.ptr, lab_sources(&in));
            });
            lab_attn_bench_line(ver->version, "forward", &sh, ms, flops, bytes);
            lab_buf_free(&atty);
            lab_attn_free(&at);
        }
        lab_inputs_free(&in);
    }
    lab_timer_free(&timer);
}

int main(int argc, char** argv) {
    const LabSpec spec = lab_attn_spec("lab_attention_forward", "causal attention forward of train_gpt2.cu",
                                       "time every version at T = 1024, 2048, 4096 (B 8, H 12, hd 64, standard layout)\n"
                                       "                and at d12's micro-step (B 64, T 1024)",
                                       0);
    LabArgs a;
    if (!lab_parse_args(&a, argc, argv, &spec)) { return 0; }
    lab_attn_apply_args(&a);
    if (!lab_device_or_skip(&a)) { return 0; }
    if (!lab_attn_drop_unavailable(&a)) { return 0; }
    int failed = 0;
    if (a.check) { failed = check(&a); }
    if (a.bench) { bench(&a); }
    if (a.large) { failed = lab_attn_large(&a, 0); }
    return lab_verdict(a.name, a.check || a.large, failed);
}
