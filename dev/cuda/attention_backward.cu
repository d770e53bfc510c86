/*
Kernel lab: causal attention backward of train_gpt2.cu, every scheme, GQA/MQA.

  From datty (B, T, C): dq, dk, dv, each sent where its values came from: columns of dqkv (B, T, W),
  every column written exactly once; dx (B, T, C) when a role is x itself (attention_backward returns
  1); dqres (B, T, C) for q_residual's query. Shared roles (kv_shared, qk_shared, qkv_shared) get the
  sum of their gradients; a kv head the sum over its H / Hkv query heads.

The two numbers (benchmark shape: B = 8, H = Hkv = 12, hd = 64, the d12 model's heads; bf16):
  FLOPs  backward = 2.5 x the forward's 2 * B * H * T^2 * hd = 5 * B * H * T^2 * hd (dV = P^T dO, dP = dO V^T,
         dK = dS^T Q, dQ = dS K, and S = Q K^T recomputed: 5 matmuls of the forward's 2)
           T = 1024: 32.2 GFLOP   T = 2048: 128.8 GFLOP   T = 4096: 515.4 GFLOP
         forward + backward = 3.5 x: 45.1, 180.4, 721.6 GFLOP
  bytes  backward = the forward's (q, k, v, O, lse) + dO, dq, dk, dv, each once:
         2 * B * T * hd * 2 * (2 H + 2 Hkv) + 4 * B * H * T
           T = 1024: 101.1 MB     T = 2048: 202.1 MB      T = 4096: 404.2 MB
         forward + backward = the sum of both (O and lse are written, then read again): 151.8, 303.6, 607.1 MB
  Predicted on an H100 (~790 TFLOP/s dense bf16, ~3 TB/s), FLOPs / 790e12 vs bytes / 3e12:
         backward  T = 1024: 0.0408 vs 0.0337 ms   T = 2048: 0.163 vs 0.067 ms   T = 4096: 0.652 vs 0.135 ms
         fwd + bwd T = 1024: 0.0571 vs 0.0506 ms   T = 2048: 0.228 vs 0.101 ms   T = 4096: 0.913 vs 0.202 ms
         compute-bound at every T (backward 319 FLOP/byte at T = 1024, the ridge is 263)
  (version 1 is held to neither: full T x T matmuls, (B, H, T, T) probabilities and their gradient)

Versions (1 and 4 the trainer's own code, included below; 2, 3, 5, 6, 7 and 8 in attention_flash_versions.h;
`make labs` builds build/lab_attention_backward):
  1  unfused, ./build/lab_attention_backward 1: permute dO to (B, H, T, hd); cuBLASLt strided-batched
     dP = dO v^T and dv = P^T dO over B*Hkv batches (the g query heads of a kv head summed through the
     inner dimension g*T); softmax_causal_backward_kernel dS = scale P (dP - rowsum(P dP)) in place (a
     warp per row); cuBLASLt dq = dS k, dk = dS^T q (beta = 1 into a shared role's buffer); unpermute each
     stored tensor to dqkv / dx / dqres. Needs the forward's perm and (B, H, T, T) att. Any hd;
     deterministic. FP32 builds: this version only. ms on GPU: "Measured" below.
  2  fused flash, ./build/lab_attention_backward 2: flash_attention_delta_kernel delta = rowsum(dO * O)
     (a warp per (b, t, h), 256 threads); flash_attention_backward_dkdv_kernel<hd>, grid (ceil(T/64),
     B*Hkv), 128 threads (4 warps x 16 keys), smem K, V, Q, dO tiles 64 x (hd + 8) bf16 + lse, delta
     (36.5 KiB at hd 64, 68.5 KiB at hd 128), acc_dk, acc_dv fp32 in registers, loops over the g query
     heads and the query tiles from the diagonal on: a kv head's sum without atomics; then
     flash_attention_backward_dq_kernel<hd>, grid (ceil(T/64), B*H), smem Q, dO, K, V tiles (36.0 /
     68.0 KiB), acc_dq in registers, adds to the dK/dV kernel's write where q shares k's storage. P and
     dS rounded to bf16 as mma A fragments. Registers (ptxas -v, nvcc 13.0, sm_90): dK/dV 168 at hd 64,
     255 + 8 bytes spilled at hd 128; dQ 128 / 172; delta 32. hd 64 or 128, BF16 builds, rows 16-byte
     aligned, any T; deterministic (no atomics). ms on GPU: "Measured" below.
  3  flash version 3, one pass, ./build/lab_attention_backward 3 (after version 3's forward;
     version 2's backward measured 1.3-1.7x faster on an H100 and an H200, 2026-11-26):
     flash3_attention_backward_kernel<hd>, a 1-D grid of ceil(T/128) * B * Hkv CTAs taking
     their work from a ticket, 256 threads (8 warps x 16 keys = 128 keys of one kv head), K and V
     resident in shared memory; per step (one query tile of one of the g query heads, from the diagonal
     on) Q and dO (cp.async, double-buffered) give P^T and dP^T once, dV += P^T dO and dK += dS^T Q in
     registers, dS^T goes to shared memory, and the tile's dQ = dS K is added into an fp32 accumulator
     (B, T, C) in a fixed order. Every mma operand by ldmatrix (.trans for dO and Q as B of dV and dK,
     K as B of dQ, dS^T read back as dS). Query rows per step: 64 at hd 64, 16 at hd 128 (the registers:
     dK and dV are 16 keys x hd fp32 each per warp). D = rowsum(dO * O) folded in: the tile's diagonal
     CTA computes it from O and its dO tile and publishes it (flag); no delta kernel. Where q shares k's
     or v's storage, flash3_dq_store_kernel adds the summed dQ after the kernel (as version 2's dQ
     kernel adds to dK/dV's write). 5 products of T^2 hd per head (version 2: 7). Dynamic smem 90.5 KiB
     at hd 64 (K, V 36 KiB, two stages of Q and dO 36 KiB, dS^T 18 KiB), 91.1 KiB at hd 128.
     ptxas (nvcc 13.0, sm_90, --use_fast_math):
       flash3_attention_backward_kernel<64>:  228 registers, 0 bytes spill stores, 0 bytes spill loads
       flash3_attention_backward_kernel<128>: 241 registers, 0 bytes spill stores, 0 bytes spill loads
         (with 32 query rows per step at hd 128: 255 registers and 4 bytes spilled, hence 16)
       flash3_dq_store_kernel: 16 registers. One CTA (8 warps) per SM at both head sizes.
     Deterministic: bit-identical runs (the check's second backward). ms on GPU: "Measured" below.
  4  flash version 4, ./build/lab_attention_backward 4 (the trainer's flash backward; after version 3's
     forward): version 2's delta kernel and two kernels, in version 2's order of sums, with version 3's
     operand machinery. flash4_attention_backward_dkdv_kernel<hd>, grid (ceil(T/64), B*Hkv), 128
     threads (4 warps x 16 keys), K and V resident, Q, dO (cp.async) and lse, D double-buffered per
     step (one query tile of one of the g query heads, from the diagonal on); every mma operand by
     ldmatrix (.trans for dO and Q as B of dV and dK). Dynamic smem 55.0 KiB at hd 64, 103.0 KiB at hd
     128. flash4_attention_backward_dq_kernel<hd>, grid (B*H, ceil(T/128)), 256 threads (8 warps x 16
     rows, version 3's forward shape: a K/V tile serves 128 rows), Q and dO resident, K and V
     double-buffered; K by ldmatrix.trans as B of dQ = dS K. Dynamic smem 72.0 KiB at hd 64, 136.0 KiB
     at hd 128. 7 products of T^2 hd per head, as version 2; deterministic (no atomics). On the CPU
     runtime its --quick errors equal version 2's to the printed digits on all 48 shapes (the same
     sums in the same order). ptxas (nvcc 13.0, sm_90, this lab's flags):
       flash4_attention_backward_dkdv_kernel<64>:  168 registers, no spill (version 2's: 168 and 8 bytes)
       flash4_attention_backward_dkdv_kernel<128>: 255 registers, no spill (version 2's: 255 and 20 bytes)
       flash4_attention_backward_dq_kernel<64>:    128 registers (the cap of 2 CTAs of 256 threads), 12 bytes spilled
       flash4_attention_backward_dq_kernel<128>:   216 registers, no spill
     Written 2026-11-27 without a GPU; the trainer's backward since an H200 timed it the same
     day (1.39x version 2's speed). ms on GPU: "Measured" below.

  Determinism, the choice (version 3). A query tile's dQ sums contributions from every key CTA at or
  before its diagonal. FlashAttention-2 adds them with fp32 atomics (the order varies run to run).
  Options: (a) per key tile partials, reduced afterwards in a fixed order: (T/128) partial dQ tensors,
  16 x 25 MB = 403 MB at d12's B 64, T 1024 per layer, written and read once more: ~0.25 ms per layer
  of HBM traffic and 403 MB of memory; (b) a semaphore per query tile fixing the order of plain
  read-add-writes into one fp32 accumulator: 25 MB per layer (B T C fp32, carved from dbuf_m, which is
  dead then: no extra memory), traffic 2 x 16 KiB per CTA step that L2 holds (the accumulator of the
  tiles in flight), and waits only when a CTA runs ahead of the one before it in the order. (b), with
  the order n_diag, n_diag - 1, ..., 0: the order in which the contributions are formed when the CTAs
  of a kv head run side by side (CTA n reaches tile m one step after CTA n + 1 does), so in the steady
  state nobody waits. Work comes from a ticket (tiles of a (b, kv head) in descending key order), so
  every CTA that one waits for took an earlier ticket and is running: no deadlock whatever order the
  hardware starts CTAs in. (The CPU runtime cannot show an ordering bug here: dev/cudacpu/README.md.)

  Predicted (not measured), B 8, H 12, hd 64, T 1024, by the forward lab's shared-memory model
  (128 B per clock per SM, 29.6 TB/s; mma.sync at 527 TFLOP/s; exp2 at 3.7e12 per second), counted
  per warp step (16 keys x 64 queries):
    version 2: dK/dV kernel 52 KiB-equivalent (Q 8 + dO 8 as 32-bit pairs; dO and Q as 16-bit column
      pairs, 16 + 16; K, V A fragments 2 + 2), 52,224 warp steps: 2.72 GB; dQ kernel 36 KiB (Q, dO
      rows 2 + 2, K, V 8 + 8, K as column pairs 16): 1.88 GB; 4.6 GB -> 0.155 ms (mma 0.09 ms).
      21% of 790 TFLOP/s on the backward's 4 products (the profile's count).
    version 3: 50 KiB (S^T: K 2 + Q 8; dP^T: V 2 + dO 8; dV: dO 8; dK: Q 8; dS^T written 2; dQ: dS 4
      + K 8), 55,296 warp steps (128-key CTAs, 72 steps per (b, h)): 2.83 GB -> 0.096 ms; mma
      (160 per warp step) 0.069 ms; exp2 0.015 ms; the dQ accumulator 221 MB through L2, overlapped.
      Predicted 0.10 ms: 34% of 790 TFLOP/s on the 4 products, 1.6x version 2 (which also runs the
      delta kernel: 25 MB, 0.008 ms).
  At hd 128 version 3's 16-row steps reload K's and V's A fragments (4 + 4 KiB) for every 16 queries:
  predicted about 1.2x version 2 there, not more.
    version 4: the same warp steps as version 2 (52,224 in each kernel: the dQ kernel's 128-row CTAs
      skip the warps whose rows all precede a key tile), every operand by ldmatrix at the full 128
      bytes per clock: dK/dV 36 KiB per warp step (S^T: K 2 + Q 8; dV: dO 8; dP^T: V 2 + dO 8; dK: Q 8),
      dQ 28 KiB (S: Q 2 + K 8; dP: dO 2 + V 8; dQ: K 8); 3.34 GB -> 0.113 ms; mma as version 2 (7
      products) 0.09 ms; exp2 0.03 ms. Predicted 0.115 ms: 28% of 790 TFLOP/s on the 4 products, 1.35x
      version 2's prediction. Version 2 measured 2.3x its prediction (H200, 2026-11-27: 0.353 ms), much
      of it waiting on its synchronous tile loads (17-19% of stalls on long scoreboard) and issuing
      scalar shared loads, which version 4 removes; if half of that gap remains, version 4 runs at
      about 0.2 ms, 1.7x version 2 (predicted, not measured).
  Measured (H100 80GB HBM3, 2026-11-26, --bench as the forward's; dev/results/
  2026-11-26_NVIDIA-H100-80GB-HBM3_gpu_followup.txt), backward ms at T 1024 / 2048 / 4096: version 1
  0.866 / 4.457 / 20.73; version 2 0.372 / 1.149 / 4.039 (2.4x its prediction at T 1024); version 3
  0.494 / 1.757 / 6.687 (4.9x its prediction, and slower than version 2, not 1.6x faster); PyTorch
  SDPA 0.222 / 0.549 / 1.648. ncu of version 3 at T 1024 (..._gpu_ncu_flash3_bwd.txt): 228 registers
  and its shared memory leave one CTA (8 warps) per SM, 12.5% of the warp slots; the tensor pipe busy
  12.8%; warps stalled on global loads 27% (the spin waits on the D flag and the dQ turn read memory
  too), barriers 22%, memory fences 10% (the __threadfence of each step): the ordering of the dQ
  accumulation, which the smem model leaves out, is the first suspect (not yet separated).
  Version 2's dK/dV kernel: 168 registers, 3 CTAs (12 warps) per SM, tensor pipe 25%.
  H200, 2026-11-27 (c32bccf, dev/results/2026-11-27_NVIDIA-H200_gpu_call2_c32bccf.txt), T 1024 / 2048
  / 4096: version 1 0.645 / 3.454 / 17.82; version 2 0.353 / 1.136 / 4.048; version 3 0.479 / 1.689 /
  6.472; version 4 0.255 / 0.820 / 2.921 (2.2x its 0.115 ms prediction at T 1024, 1.39x version 2's
  speed); PyTorch SDPA 0.252 / 0.535 / 1.588. In the trainer (d12, B 64, T 1024) version 4's dK/dV
  and dQ kernels took 14.19 and 9.29 ms a micro-step against version 2's 17.52 and 12.27.

  5  flash version 5, ./build/lab_attention_backward 5 (issue 58; in attention_flash_versions.h, not in
     the trainer until a GPU measures it faster than version 4; runs after forward version 5): the
     trainer's delta kernel, then two kernels in version 4's order of sums (deterministic, no atomics).
     flash5_attention_backward_dkdv_kernel<hd>, grid (B*Hkv, ceil(T/128)): CTAs of 128 keys, and
     linear dispatch starts key tile 0 of every (b, kv head), the CTAs with the most steps, in the
     first wave (version 4's grid (key tiles, B*Hkv) started them last). hd 64: 4 warps x 32 keys (two
     m16 tiles: each Q and dO fragment from ldmatrix feeds two mma), steps of 32 queries (dK and dV
     hold 128 registers a thread; S^T and dP^T 32 each); hd 128: 8 warps x 16 keys (32 keys a warp
     would need 256 registers for dK and dV alone), steps of 32 too (64 fit the registers, but three
     stages of them take 171.5 KiB, past the A100's 163 KiB a block). Q, dO, lse and D in three stages: step
     s + 2's copies are issued after step s's barrier into the stage step s - 1 used, so one barrier a
     step (version 4: two). A warp skips the steps whose queries all precede its keys and masks only
     the steps that cross its diagonal or T. flash5_attention_backward_dq_kernel<hd>, grid (B*H,
     ceil(T/128)), forward version 5's shape: 4 warps x 32 query rows, Q and dO resident, lse and D in
     shared memory, K and V double-buffered in tiles of 128 keys at hd 64 (two parts of 64, each an S,
     dP and dQ round) and 32 at hd 128 (Q and dO take 68 KiB there: 32-key stages keep two CTAs per SM).
     The score loops are unrolled two 16-wide steps at a time: unrolled whole, ptxas hoisted the next
     steps' ldmatrix into the accumulators' registers and spilled 4-24 bytes in every kernel.
     ptxas (nvcc 13.0, this lab's flags; registers at sm_80 / sm_90, 0 bytes spilled in each):
       flash5_attention_backward_dkdv_kernel<64>:  246 / 249, 63.8 KiB smem, 2 CTAs = 8 warps per SM
       flash5_attention_backward_dkdv_kernel<128>: 217 / 230, 119.8 KiB, 1 CTA = 8 warps
       flash5_attention_backward_dq_kernel<64>:    255 / 254, 109.0 KiB, 2 CTAs = 8 warps
       flash5_attention_backward_dq_kernel<128>:   254 / 245, 103.0 KiB, 2 CTAs = 8 warps
     FLOPs executed (T 1024, with the diagonal's masked work): dK/dV 26.6 GFLOP, dQ 20.5 GFLOP, 47.1 in
     all for the 32.2 of the two numbers above (7 products for 5, as version 4); bytes as above (the
     streamed tiles come from L2: each Q and dO tile serves 128 keys where version 4's served 64).
     Predicted (not measured), B 8, H 12, hd 64, by the sum of the three units' times (shared memory
     at 29.6 TB/s, mma.sync at 527 TFLOP/s, exp2 at 3.7e12/s), the model that came within 1.06x of
     version 4's measured time at T 1024 (0.241 ms against 0.255) and above it at longer T (0.925
     against 0.820, 3.62 against 2.92: warps overlap more when the CTAs are long):
       per 1024 scores of a warp, shared reads 24 KiB in the dK/dV kernel (K_w, V_w 4 each; Q, dO 4
       each as S^T's and dP^T's B; dO, Q 4 each, .trans, as dV's and dK's B) against version 4's 36,
       and 16 KiB in the dQ kernel (Q_w, dO_w 2 each; K, V 4 each; K 4 as dQ's B) against 28;
       T 1024: dK/dV 0.042 + 0.050 + 0.014 = 0.107 ms, dQ 0.029 + 0.039 + 0.015 = 0.082 ms, delta
         0.005 ms: 0.194 ms (version 4 by the same sum: 0.241);
       T 2048: 0.750 ms (version 4: 0.925); T 4096: 2.95 ms (version 4: 3.62).
     Scaled by version 4's measured / sum at each T (1.06, 0.89, 0.81): 0.206 / 0.666 / 2.38 ms, 1.24x
     version 4 at every T; against SDPA on the H200 (0.252 / 0.535 / 1.588 ms) 1.22x / 0.80x / 0.67x.
     The issue's bar is 1.0x at T 1024 and 0.8x at 2048 and 4096: predicted met at 1024 and 2048, not
     at 4096, where mma.sync on 7 products (1.39 ms of the 2.95 sum) is the largest unit.
     Why version 4 missed its prediction (in the trainer, d12: dK/dV 1.7x, dQ 3.3x): its model took
     the largest unit's time as if shared memory, mma and exp2 overlapped, but a warp runs S^T, the
     exp2, dV, dP^T, dS^T and dK one after another between two barriers a step, with 12 (dK/dV) or
     16 (dQ) warps per SM to hide it; the sum of the units comes within 1.06x. The dQ kernel missed
     most: its 16-row warps read 28 KiB per 1024 scores, it spilled at the 128-register cap of two
     256-thread CTAs, and its prediction left out the exp2. What version 5 changes: 24 and 16 KiB per
     1024 scores, one barrier a step in dK/dV, no spills, the longest dK/dV CTAs first. What it does
     not: the 7 products, and the softmax between a warp's matmuls (issue 59's ping-pong).
     dQ, the choice: (a) in the dK/dV pass with a fixed-order fp32 accumulation, as version 3: 5
     products, but dS^T through shared memory to a per-step dQ product (+56 KiB of shared reads and 16
     KiB of L2 read-add-write per 128-key step) and waits on the order: about 0.18 ms by the same sum
     at T 1024, 8% under two kernels, and version 3 measured 4.9x its own prediction on those waits
     and fences; (b) a dQ kernel that reads dS from the dK/dV kernel instead of recomputing S and dP:
     4 bytes of HBM per score (written, read) to save 4 hd = 256 FLOPs, 64 FLOPs a byte against the
     H200's ridge of 165 (790 TFLOP/s over 4.8 TB/s), and B H T^2 / 2 bf16 of memory (0.8 GB a layer at
     d12); (c) a dQ kernel that recomputes S and dP and reads what it can (Q, dO, K, V, lse, D):
     chosen, version 4's decomposition. The GPU decides between version 5 and version 4.
     Deterministic: bit-identical runs (the check's second backward).

  6  flash version 6, ./build/lab_attention_backward 6 (issue 59 part 2c; in attention_flash_versions.h,
     its first cut, for sm_90a; runs after forward version 6; predicted below before it was written,
     not measured): version 5's decomposition (the delta kernel, a dK/dV kernel, a dQ kernel that
     recomputes S and dP; every sum in a fixed order, no atomics: deterministic) in forward version 6's
     shape. Both kernels: 384 threads = 3 warpgroups; warpgroup 0 the producer (setmaxnreg.dec to 24,
     one thread issues cp.async.bulk.tensor copies through tensor maps, 128-byte swizzle, zeros past
     T), warpgroups 1 and 2 the consumers (setmaxnreg.inc to 240, wgmma from shared memory), a ring of
     2 stages on "full" and "empty" mbarriers.
     flash6_attention_backward_dkdv_kernel<hd, 6> (one template for versions 6, 7 and 8: kVersion),
     grid (B*Hkv, ceil(T/128)): K and V of 128 keys
     resident (one copy when k = v), a consumer 64 keys; steps of 64-row query tiles of the g query
     heads from the diagonal on, Q and dO streamed (boxes of 64 rows). Per step and consumer: S^T =
     K_c Q^T and dP^T = V_c dO^T by wgmma m64n64k16 (both operands K-major, issued as one group),
     P^T = 2^(S^T scale_log2 - lse) and dS^T = P^T (dP^T - D) in registers (each thread's 16 query
     columns' lse and D read from global memory, L2-resident: 128 floats a step), then dV += P^T dO
     and dK += dS^T Q by wgmma m64n{hd}k16 with A from registers (the accumulator layout is the A
     layout) and dO, Q MN-major (their row-major tiles need no transpose). A consumer whose 64 keys
     all follow the step's queries waits for the stage and releases it without computing.
     flash6_attention_backward_dq_kernel<hd, 6>, grid (B*H, ceil(T/128)): Q and dO of 128 rows resident
     (forward version 6's producer with dO as a second resident tile), a consumer 64 rows; K and V
     tiles of 128 keys streamed up to the diagonal. Per tile: S = Q K^T and dP = dO V^T (m64n128k16),
     P and dS in registers (the thread's two rows' lse and D held from the start), dQ += dS K (K
     MN-major).
     Registers a consumer thread (live, of 240): dK/dV kernel dK and dV 32 each at hd 64 (64 at hd
     128), S^T/P^T 32, dP^T/dS^T 32, the P^T and dS^T fragments 16 each: 160 / 224; dQ kernel dQ 32
     (64), S/P 64, dP/dS 64, dS's fragments 32: 192 / 224. Dynamic shared memory (1 KiB to align the
     swizzle): dK/dV 65 KiB at hd 64, 129 KiB at hd 128; dQ 97 / 193 KiB. One CTA per SM (384 threads
     x 168 registers at entry).
     ptxas (nvcc 13.0, sm_90a, --use_fast_math, -Xptxas -v): both kernels at both head sizes 168
     registers at entry, 0 bytes stack frame, 0 spills, 1 barrier, 48 bytes of static shared memory
     (the mbarriers); no C7508, C7514, C7517 or C7519.
     Predicted (not measured), B 8, H 12, by forward version 6's "sum" model (each consumer's matmuls
     and elementwise work in series, no overlap: the first cut): wgmma at 790 TFLOP/s on the executed
     FLOPs (diagonal tiles whole: 64 x 64 blocks in dK/dV, 4 products; 64 x 128 in dQ, 3 products), exp2
     at 3.7e12/s (every score twice, once a kernel), ~6 FP32 operations a score (FFMA, mask, dP - D, the
     product, two packs) at 29.6e12/s, the delta kernel at 4.8 TB/s; times 1.10 (fill, epilogue, tail):
       hd 64   T      dK/dV+dQ GFLOP  wgmma ms  exp2 ms  fp32 ms  delta ms  predicted ms  SDPA H200 (measured)
               1024     27.4 + 21.7     0.062    0.030    0.022    0.005      0.131        0.252
               2048    106.3 + 82.1     0.239    0.114    0.085    0.010      0.493        0.535
               4096    418.8 + 318.9    0.934    0.446    0.334    0.021      1.908        1.588
               8192   1662 + 1256       3.694    1.762    1.321    0.042      7.50         not measured
              16384   6623 + 4987      14.70     7.01     5.25     0.084     29.74         not measured
       hd 128  1024     54.8 + 43.5     0.124    0.030    0.022    0.010      0.206        not measured
               4096    837.5 + 637.8    1.867    0.446    0.334    0.042      2.958        not measured
              16384  13246 + 9973      29.39     7.01     5.25     0.168     46.00         not measured
     Against SDPA's measured backward on the H200 (hd 64): 1.9x, 1.09x and 0.83x at T 1024, 2048 and
     4096. The issue's 1.0x at every T needs the overlap the first cut leaves out: with the elementwise
     work under the other consumer's wgmma (forward version 7's ping-pong), 0.062 + 0.005 = 0.07 ms at
     T 1024 and 1.05 ms at 4096 (1.5x SDPA) if wgmma stays the larger unit. Version 5's model missed
     version 4's GPU time by 1.06x at T 1024; forward versions 3-5 missed theirs by 1.7-3.3x, so the
     first GPU run decides. SASS facts that prove the fast path (dev/tools/sass_facts.py on the GPU
     run): HGMMA.64x64x16 (S^T, dP^T; dV, dK, dQ at hd 64) and HGMMA.64x128x16 (S, dP; hd 128's
     products), no HMMA, no LDL/STL; UTMALDG, SYNCS and USETMAXREG present.
     Checked on the CPU runtime (its model of wgmma, the bulk copies and mbarriers): `--check` on every
     shape of every scheme (Hkv H, H/2, 1; T 1 to 1024; hd 64 and 128), `--large`; the second run
     bit-identical. Where the build is not sm_90a or the GPU not compute capability 9.0 the lab says SKIP.

  7  flash version 7, ./build/lab_attention_backward 7 (issue 59 part 2c; in attention_flash_versions.h,
     version 6's kernel templates with kVersion 7; runs after forward version 7; predicted here, not
     measured): version 6 with forward version 7's ping-pong. The two consumers take turns by
     named barriers 1 and 2 (Flash7Turns, forward version 7's protocol) to issue each group of wgmma:
     two turns a step, S^T and dP^T, then dV and dK (dQ kernel: S and dP, then dQ), so one consumer's
     exponentials and products run while the tensor cores work on the other's matmuls. A dK/dV
     consumer with nothing to compute in a step still takes both turns, so the rounds stay paired.
     Not here: the intra-warpgroup overlap (a step's S^T issued under the last step's dV and dK), and
     a third stage. Registers, shared memory and the ring as version 6's; ptxas (nvcc 13.0, sm_90a):
     168 registers at entry, 0 spills, 3 barriers (0 and the two turns), no C7508/C7514/C7517/C7519.
     Predicted (not measured), by the "overlap" model (the larger of wgmma and the elementwise work,
     times 1.10, plus the delta kernel), with the bubbles of two turns a step: a consumer's group
     waits for its own elementwise work and for the other's group before it, so the tensor pipe idles
     where the elementwise work of a score (about 0.11 SM-clocks: exp2 1/16, 6 FP32 operations / 128)
     outlasts the other consumer's group (two products at hd 64: 0.075 clocks a score at 3410 FLOPs a
     clock an SM). Per round of four groups: dK/dV 3 G1 + E against 4 G1 (1.12x the ideal) and dQ
     1.32x at hd 64; at hd 128 dK/dV none, dQ 1.08x:
       hd 64   T 1024: 0.088 ms   2048: 0.327   4096: 1.260   8192: 4.94   16384: 19.6
       hd 128  T 1024: 0.152 ms   4096: 2.167   16384: 33.6
     Against SDPA's measured backward on the H200 (hd 64, 0.252 / 0.535 / 1.588 ms): 2.9x, 1.6x and
     1.26x at T 1024, 2048 and 4096; version 6's "sum" prediction 1.49x, 1.51x and 1.51x version 7's
     times. The SASS facts are version 6's, plus BAR.SYNC and BAR.ARV with barriers 1 and 2.

  8  flash version 8, ./build/lab_attention_backward 8 (issue 59 part 2c; in attention_flash_versions.h;
     version 6's kernel templates with kVersion 8; runs after forward version 7; predicted, not
     measured): version 7 with FlashAttention-3's intra-warpgroup overlap. In each turn a consumer issues this step's scores
     (S^T and dP^T; dQ kernel: S and dP) and the last step's gradients (dV and dK; dQ) as two wgmma
     groups, waits for the first (wgmma.wait_group 1), and computes this step's P and dS while the
     gradients still run; then waits for them, releases the last step's stage and packs this step's
     fragments. Step 0's scores and the last gradients are peeled out of the loop (no branch around an
     issue, as forward version 7). One turn a step instead of version 7's two. The rings hold 3 stages
     (a step's operands stay while the next step's land): dK/dV 81 KiB, dQ 129 KiB of shared memory.
     Every dK/dV consumer computes every step, P^T 0 where its keys follow all of the step's queries
     (a skipped step would put a branch around the issues): T / 128 more 64 x 64 blocks a head, +6% of
     the dK/dV work at T 1024, +1.5% at 4096. Head size 64 only: at 128 a consumer's two steps (dK and
     dV 128 registers, S^T and dP^T 64, the in-flight fragments 32, addresses) pass its 240; ptxas
     spilled 216 bytes (dK/dV) and 192 (dQ) and serialized the wgmma (C7512), so version 8 at hd 128
     runs version 7's kernels. ptxas at hd 64 (nvcc 13.0, sm_90a): both kernels 168 registers at entry,
     0 spills, 3 barriers, 64 bytes of static shared memory, no C7508/C7512/C7514/C7517/C7519.
     Predicted (not measured), hd 64, B 8, H 12, by the "overlap" model (wgmma the larger unit at hd
     64, the elementwise work under the other groups: with one turn a step a consumer's next issue
     waits for its P and dS, 0.11 clocks a score, which end before the other consumer's group of four
     products, 0.15, does; so no bubble), times 1.10, plus the delta kernel:
       T 1024: 0.076 ms   2048: 0.277   4096: 1.057   8192: 4.12   16384: 16.3
     Against SDPA's measured backward on the H200 (0.252 / 0.535 / 1.588 ms): 3.3x, 1.93x and 1.50x at
     T 1024, 2048 and 4096; version 7's prediction 1.16x, 1.18x and 1.19x version 8's times. A register
     operand of a wgmma in flight written before its wait (the fragments packed before wait_group 0)
     is what the CPU runtime cannot see (it reads register operands at the issue): ptxas would
     serialize such a wgmma and say so (a C75xx note), and the report above has none (dev/TESTING.md).
     Checked on the CPU runtime: `--check` on every shape of every scheme, `--large`; planted bug m83
     (a stage released before the wait that retires its last reader) caught.

  ./build/lab_attention_backward [version] [--scheme s] [--seed n] [--check] [--bench] [--quick] [--large] [--long]

--check, for each version and each shape of lab_check_shapes (every scheme x Hkv in {H, H/2, 1}
where allowed x T in {1, 63, 64, 65, 200, 1024} x hd in {16 (version 1), 64, 128}; B 2, H 4): fresh N(0, 1)
inputs and datty per trial (seed printed); the version's forward, then, twice, its backward with
dqkv, dx, dqres and every scratch buffer poisoned with 0xFF (guards around each; version 3's dQ
accumulator and counters too, which its launcher zeroes): each stored
tensor's slice of dqkv ("dqkv[k=v]") against the CPU twin (dev/cpu/attention_tiled_cpu.h) and, for
versions >= 2, against version 1; no element of dqkv left unwritten; dx compared when the scheme
takes a role from x (and the return value 1 checked), else still 0xFF byte for byte (return 0);
dqres likewise for q_residual; inputs, atty and the forward's buffers unchanged; guards intact; the
second backward bit-identical to the first. One PASS/FAIL line per (version, scheme, shape); exit 1
on any FAIL. Tolerances: common.h. Without a GPU: one SKIP line, exit 0.
With version 2 selected, --check also runs version 2's delta kernel and the one it replaced against
double sums (check_delta), and --bench times both (bench_delta: the bench shapes and B 64, T 1024).
--large (BF16 builds; common.h's lab_attn_large): versions 2, 4, 5, 6, 7 and 8 at the largest shape the trainer
admits, as the forward lab's --large: from the twin's atty and lse in batch row B - 1, the delta
kernel's last block, the dK/dV CTAs of the last kv head and the dQ CTAs of the last head (only those on
the CPU runtime), their rows against the twin's gradients and D. Version 3's one-pass kernel cannot run
a part of its grid (its CTAs take tickets and wait for each other's dQ turns): its dQ store runs, the
one block whose grid-stride loop reaches the last pair (B T C / 2 pairs, 8 per thread of its capped
grid), and the pairs it owns in the last batch row must hold old + scale * dq_accum (mutant m61: one
pair per thread, issue 58's bug, fails there).
--bench: backward alone (after one forward) and forward + backward, ms (median of 25, L2 flushed
before each), TFLOP/s and GB/s from the two numbers above, at B 8 (T 1024, 2048, 4096) and at d12's
micro-step (B 64, T 1024: see the forward lab's --bench). PyTorch: python3 dev/cuda/sdpa_bench.py.
--long: backward and forward + backward on issue 59's grid, as the forward lab's --long.
*/
#define TESTING
#include "../../train_gpt2.cu"
#include "../cpu/attention_tiled_cpu.h"
#include "attention_flash_versions.h"
#include "common.h"

// ----------------------------------------------------------------------------
// version 2's delta kernel: D (B, H, T) = rowsum(dO * O) per head (BF16 builds: the flash kernels')
#if PRECISION_IS_BF16
//
// The two numbers at d12's micro-step (B 64, T 1024, H 12, hd 64): 2 x B T C x 2 bytes read (dO, O)
// + B H T x 4 written = 204.5 MB -> 0.068 ms a layer at 3 TB/s, 0.82 ms a step; 2 FLOPs an element,
// nothing. The H100 (2026-11-26) measured the kernel of the time, a warp per row with 2-byte loads,
// at 2.38 ms a step (0.20 ms a layer, 1.0 TB/s): 98,304 blocks of 8 warps that each read 256 bytes and
// then shuffle. The trainer's kernel since 2026-11-27 gives a row hd / 8 lanes of one x128 each
// (4 rows a warp at hd 64): a quarter of the warps, 16-byte loads, 3 shuffle steps not 5; predicted
// near the bytes' time, 0.07 ms a layer. --check compares both against the host's double sums,
// --bench times both at the bench shapes and at d12's.

// the kernel before 2026-11-27 (copied; the trainer no longer has it): a warp per (b, t, h)
__global__ void delta_warp_per_row_kernel(float* delta, const floatX* dout, const floatX* out, int B, int T, int H, int hd) {
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; // (b, t, h) flattened
    const int lane = threadIdx.x % 32;
    if (row >= B * T * H) { return; }
    const int h = row % H, t = (row / H) % T, b = row / (H * T);
    const size_t base = ((size_t)b * T + t) * ((size_t)H * hd) + (size_t)h * hd;
    float sum = 0.0f;
    for (int d = lane; d < hd; d += 32) { sum += x2f(dout[base + d]) * x2f(out[base + d]); }
    sum = warp_sum(sum);
    if (lane == 0) { delta[((size_t)b * H + h) * T + t] = sum; }
}

static void delta_run(int which, float* delta, const floatX* dout, const floatX* out, int B, int T, int H, int hd) {
    if (which == 0) {
        delta_warp_per_row_kernel<<<(B * T * H + 7) / 8, 256>>>(delta, dout, out, B, T, H, hd);
        launchCheck();
    } else {
        flash_attention_delta(delta, dout, out, B, T, H, hd);
    }
}
static const char* const kDeltaNames[2] = {"delta, a warp per row (before 2026-11-27)", "delta, hd / 8 lanes per row (the trainer's)"};

// both delta kernels against double sums of the same bf16 values: T in {1, 63, 65, 200} x hd {64, 128},
// B 2, H 3 (rows of one token's heads share a warp), delta poisoned, guarded, a second run bit-identical
static int check_delta(const LabArgs* a) {
    int failed = 0;
    for (int T : {1, 63, 65, 200}) {
        for (int hd : {64, 128}) {
            const int B = 2, H = 3;
            const size_t n = (size_t)B * T * H * hd, rows = (size_t)B * T * H;
            const unsigned long long seed = lab_trial_seed(a->seed, {T, hd, 77});
            unsigned long long rng = seed;
            const LabHostX dout = lab_host_x(lab_normal_vec(n, 0.0, 1.0, &rng)), out = lab_host_x(lab_normal_vec(n, 0.0, 1.0, &rng));
            std::vector<float> ref(rows);
            for (int b = 0; b < B; b++) {
                for (int t = 0; t < T; t++) {
                    for (int h = 0; h < H; h++) {
                        double acc = 0.0;
                        const size_t base = (((size_t)b * T + t) * H + h) * hd;
                        for (int d = 0; d < hd; d++) { acc += (double)dout.f[base + d] * out.f[base + d]; }
                        ref[((size_t)b * H + h) * T + t] = (float)acc;
                    }
                }
            }
            LabBuf d_dout = lab_buf_input(dout.x, "dout"), d_out = lab_buf_input(out.x, "out");
            LabBuf d_delta = lab_buf_alloc(rows * sizeof(float), "delta");
            for (int which = 0; which < 2; which++) {
                LabVerdict v;
                lab_verdict_init(&v);
                std::vector<unsigned char> first;
                for (int rep = 0; rep < 2; rep++) {
                    lab_buf_poison(&d_delta);
                    delta_run(which, (float*)d_delta.ptr, (const floatX*)d_dout.ptr, (const floatX*)d_out.ptr, B, T, H, hd);
                    cudaCheck(cudaDeviceSynchronize());
                    const std::vector<unsigned char> h = lab_buf_download(&d_delta);
                    if (rep == 0) { first = h; } else { lab_check_same(first, h, "delta", &v); }
                }
                lab_buf_guards_ok(&d_delta, &v.fail);
                lab_buf_intact(&d_dout, dout.x, &v.fail);
                lab_buf_intact(&d_out, out.x, &v.fail);
                const size_t left = lab_count_unwritten(first, sizeof(float));
                if (left > 0) { v.fail += "; " + std::to_string(left) + " elements of delta never written"; }
                char what[160];
                snprintf(what, sizeof(what), "%s T=%d hd=%d B=%d H=%d", kDeltaNames[which], T, hd, B, H);
                const std::vector<float> got = lab_f32_from_bytes(first);
                lab_compare_rows(what, 2, "delta", got.data(), ref.data(), rows, (size_t)T, 1e-5, &v);
                failed |= lab_verdict_print(a, 2, what, seed, 1, &v);
            }
            for (LabBuf* bf : {&d_dout, &d_out, &d_delta}) { lab_buf_free(bf); }
        }
    }
    return failed;
}

// both delta kernels at the bench shapes (B 8, H 12, hd 64) and at d12's micro-step (B 64, T 1024)
static void bench_delta(LabTimer* timer, const LabArgs* a) {
    const int shapes[4][2] = {{8, 1024}, {8, 2048}, {8, 4096}, {64, 1024}};
    for (const auto& sh : shapes) {
        const int B = sh[0], T = sh[1], H = LAB_BENCH_H, hd = LAB_BENCH_HD;
        const size_t n = (size_t)B * T * H * hd, rows = (size_t)B * T * H;
        const double bytes = 2.0 * n * sizeof(floatX) + 4.0 * rows;
        floatX* dout = (floatX*)device_malloc(n * sizeof(floatX), "bench dout");
        floatX* out = (floatX*)device_malloc(n * sizeof(floatX), "bench out");
        float* delta = (float*)device_malloc(rows * sizeof(float), "bench delta");
        init_normal_kernel<<<grid_for(n, 256), 256>>>(dout, NULL, 0, 0, n, 1.0f, a->seed, 1);
        init_normal_kernel<<<grid_for(n, 256), 256>>>(out, NULL, 0, 0, n, 1.0f, a->seed, 2);
        launchCheck();
        printf("predicted delta B=%d T=%d: %.1f MB -> %.4f ms at 3 TB/s\n", B, T, bytes / 1e6, bytes / LAB_PEAK_BYTES * 1e3);
        for (int which = 0; which < 2; which++) {
            const double ms = lab_time_median_ms(timer, LAB_BENCH_REPS, [&]() { delta_run(which, delta, dout, out, B, T, H, hd); });
            printf("bench delta B=%d T=%d ms=%.4f GB/s=%.1f (%s)\n", B, T, ms, bytes / (ms * 1e-3) / 1e9, kDeltaNames[which]);
        }
        cudaCheck(cudaFree(dout));
        cudaCheck(cudaFree(out));
        cudaCheck(cudaFree(delta));
    }
}
#endif

// what one version's backward produced, as floats (the baseline of later versions when it is version 1)
typedef struct {
    std::vector<float> dqkv, dx, dqres;
    int wrote_dx;
} BackwardOut;

// compares every stored tensor of the projection (its slice of dqkv), dx and dqres with ref
static void compare_grads(const char* prefix, int version, const char* against, const AttnShape* s, const LabInputs* in,
                          const BackwardOut* out, const std::vector<float>& ref_dqkv, const std::vector<float>& ref_dx,
                          const std::vector<float>& ref_dqres, int expect_dx, int expect_dqres, LabVerdict* v) {
    const LabShape* sh = &in->sh;
    const size_t BT = (size_t)sh->B * sh->T;
    for (int r = 0; r < 3; r++) {
        const QKVRole role = qkv_layout_role(&s->layout, r);
        if (s->owner[r] != r || role.source != QKV_SRC_PROJECTION) { continue; }
        const std::vector<float> o = lab_columns(out->dqkv.data(), BT, in->W, role.offset, role.channels);
        const std::vector<float> f = lab_columns(ref_dqkv.data(), BT, in->W, role.offset, role.channels);
        const std::string name = "dqkv[" + lab_stored_name(s, r) + "]";
        const LabIndex ix = lab_index_btchd(sh->B, sh->T, role.channels / sh->hd, sh->hd);
        lab_compare(prefix, version, name.c_str(), against, o.data(), f.data(), o.size(), &ix,
                    lab_floor_norm(in->datty.f, o.size()), LAB_TOL, v);
    }
    const LabIndex ic = lab_index_btchd(sh->B, sh->T, sh->H, sh->hd);
    if (expect_dx) {
        lab_compare(prefix, version, "dx", against, out->dx.data(), ref_dx.data(), ref_dx.size(), &ic,
                    lab_floor_norm(in->datty.f, ref_dx.size()), LAB_TOL, v);
    }
    if (expect_dqres) {
        lab_compare(prefix, version, "dqres", against, out->dqres.data(), ref_dqres.data(), ref_dqres.size(), &ic,
                    lab_floor_norm(in->datty.f, ref_dqres.size()), LAB_TOL, v);
    }
}

// one version on one trial; returns 1 on FAIL. Version 1 fills *v1 (the baseline of later versions).
static int check_version(const LabArgs* a, const LabVersion* ver, const LabInputs* in, const LabTwinGrads* ref,
                         BackwardOut* v1, int print) {
    AttnShape s;
    if (!lab_version_shape(ver, in, &s)) { return 0; }
    const LabShape* sh = &in->sh;
    const size_t BT = (size_t)sh->B * sh->T;
    char prefix[160];
    lab_shape_describe(sh, prefix, sizeof(prefix));
    LabVerdict v;
    lab_verdict_init(&v);
    LabAttn at;
    lab_attn_alloc(&at, &s, ver->variant, 1);
    LabBuf atty = lab_buf_alloc(BT * in->C * sizeof(floatX), "atty");
    LabBuf dqkv = lab_buf_alloc(BT * in->W * sizeof(floatX), "dqkv");
    LabBuf dx = lab_buf_alloc(BT * in->C * sizeof(floatX), "dx");
    LabBuf dqres = lab_buf_alloc(BT * in->C * sizeof(floatX), "dqres");
    const QKVSources<const floatX> src = lab_sources(in);
    const QKVSources<floatX> dsrc = qkv_sources<floatX>((floatX*)dqkv.ptr, (floatX*)dx.ptr, (floatX*)dqres.ptr);
    // the forward pass of this version, with its buffers poisoned first
    lab_attn_poison_forward(&at);
    lab_buf_poison(&atty);
    lab_attention_forward(&at, (floatX*)atty.ptr, src);
    cudaCheck(cudaDeviceSynchronize());
    const std::vector<unsigned char> fwd_before = lab_attn_forward_bytes(&at);
    const std::vector<unsigned char> atty_before = lab_buf_download(&atty);
    std::vector<unsigned char> first[3];
    int wrote_dx[2] = {0, 0};
    const int runs = lab_runs_per_trial(a);
    for (int rep = 0; rep < runs; rep++) {
        lab_attn_poison_backward(&at);
        lab_buf_poison(&dqkv);
        lab_buf_poison(&dx);
        lab_buf_poison(&dqres);
        wrote_dx[rep] = lab_attention_backward(&at, dsrc, lab_in(&in->datty), (const floatX*)atty.ptr, src);
        cudaCheck(cudaDeviceSynchronize());
        const std::vector<unsigned char> h[3] = {lab_buf_download(&dqkv), lab_buf_download(&dx), lab_buf_download(&dqres)};
        if (rep == 1) { // the second run: the same bytes
            lab_check_same(first[0], h[0], "dqkv", &v);
            lab_check_same(first[1], h[1], "dx", &v);
            lab_check_same(first[2], h[2], "dqres", &v);
            break;
        }
        for (int i = 0; i < 3; i++) { first[i] = h[i]; }
    }
    // what must not have changed
    lab_attn_guards_ok(&at, &v.fail);
    lab_buf_guards_ok(&atty, &v.fail);
    lab_buf_guards_ok(&dqkv, &v.fail);
    lab_buf_guards_ok(&dx, &v.fail);
    lab_buf_guards_ok(&dqres, &v.fail);
    lab_inputs_intact(in, &v.fail);
    if (lab_buf_download(&atty) != atty_before) { v.fail += "; the backward changed atty (an input)"; }
    if (lab_attn_forward_bytes(&at) != fwd_before) { v.fail += "; the backward changed the forward's buffers (inputs)"; }
    if (wrote_dx[0] != ref->expect_dx || (runs > 1 && wrote_dx[1] != ref->expect_dx)) {
        v.fail += "; attention_backward returned " + std::to_string(wrote_dx[0]) + ", expected " +
                  std::to_string(ref->expect_dx) + (ref->expect_dx ? " (a role is x)" : " (no role is x)");
    }
    const size_t unwritten = lab_count_unwritten(first[0], sizeof(floatX));
    if (unwritten > 0) { v.fail += "; " + std::to_string(unwritten) + " elements of dqkv never written (still 0xFF)"; }
    const char* untouched_names[2] = {"dx", "dqres"};
    const int expect[2] = {ref->expect_dx, ref->expect_dqres};
    for (int i = 0; i < 2; i++) {
        const std::vector<unsigned char>& h = first[1 + i];
        if (!expect[i]) {
            const size_t changed = h.size() - lab_count_poison_bytes(h.data(), h.size());
            if (changed > 0) {
                v.fail += std::string("; ") + untouched_names[i] + ": " + std::to_string(changed) +
                          " bytes written, but the scheme sends no gradient there";
            }
        } else {
            const size_t left = lab_count_unwritten(h, sizeof(floatX));
            if (left > 0) { v.fail += std::string("; ") + std::to_string(left) + " elements of " + untouched_names[i] + " never written"; }
        }
    }
    BackwardOut out;
    out.dqkv = lab_x_to_floats(first[0]);
    out.dx = lab_x_to_floats(first[1]);
    out.dqres = lab_x_to_floats(first[2]);
    out.wrote_dx = wrote_dx[0];
    if (print) {
        compare_grads(prefix, ver->version, "cpu", &s, in, &out, ref->dqkv, ref->dx, ref->dqres, ref->expect_dx,
                      ref->expect_dqres, &v);
        if (ver->version != 1 && v1 != NULL && !v1->dqkv.empty()) {
            compare_grads(prefix, ver->version, "v1", &s, in, &out, v1->dqkv, v1->dx, v1->dqres, ref->expect_dx,
                          ref->expect_dqres, &v);
        }
    }
    if (ver->version == 1 && v1 != NULL) { *v1 = out; }
    lab_buf_free(&dqres);
    lab_buf_free(&dx);
    lab_buf_free(&dqkv);
    lab_buf_free(&atty);
    lab_attn_free(&at);
    return print ? lab_attn_verdict(a, ver->version, in, &v) : 0;
}

static int check(const LabArgs* a) {
    const std::vector<LabShape> shapes = lab_check_shapes(a->scheme, a->quick);
    printf("check: %zu shapes (%s), tolerance %.0e\n", shapes.size(), a->quick ? "--quick" : "full", LAB_TOL);
    int failed = 0, ran = 0;
    for (size_t i = 0; i < shapes.size(); i++) {
        LabInputs in;
        lab_inputs_make(&in, &shapes[i], a->seed, 1);
        // the CPU twin: forward (out, lse), then the backward into zeroed gradients of the sources
        std::vector<float> out_ref, lse_ref;
        lab_twin_forward(&in, &out_ref, &lse_ref);
        LabTwinGrads ref;
        lab_twin_backward(&in, out_ref, lse_ref, &ref);
        BackwardOut v1;
        v1.wrote_dx = 0;
        for (int kk = 0; kk < lab_attn_num_versions(1); kk++) {
            const LabVersion* ver = &lab_attn_versions(1)[kk];
            const int selected = lab_version_selected(a, ver->version);
            if (!lab_version_runs(a, ver)) { continue; }
            AttnShape s;
            if (!lab_version_shape(ver, &in, &s)) { continue; }
            failed |= check_version(a, ver, &in, &ref, &v1, selected);
            ran += selected;
        }
        lab_inputs_free(&in);
    }
#if PRECISION_IS_BF16
    if (lab_version_selected(a, 2)) { failed |= check_delta(a); } // version 2's delta kernel, beside the one it replaced
#endif
    if (ran == 0) {
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
        const double f_fwd = lab_flops_forward(sh.B, sh.T, sh.H, sh.hd), f_bwd = lab_flops_backward(sh.B, sh.T, sh.H, sh.hd);
        const double b_fwd = lab_bytes_forward(sh.B, sh.T, sh.H, sh.Hkv, sh.hd);
        const double b_bwd = lab_bytes_backward(sh.B, sh.T, sh.H, sh.Hkv, sh.hd);
        lab_attn_bench_predicted("backward", f_bwd, b_bwd, &sh);
        lab_attn_bench_predicted("forward+backward", f_fwd + f_bwd, b_fwd + b_bwd, &sh);
        LabInputs in;
        lab_bench_inputs_make(&in, &sh, a->seed, 1);
        const size_t BT = (size_t)sh.B * sh.T;
        for (int k = 0; k < lab_attn_num_versions(1); k++) {
            const LabVersion* ver = &lab_attn_versions(1)[k];
            AttnShape s;
            if (!lab_bench_runs(a, ver) || !lab_version_shape(ver, &in, &s)) { continue; }
            LabAttn at;
            lab_attn_alloc(&at, &s, ver->variant, 1);
            LabBuf atty = lab_buf_alloc(BT * in.C * sizeof(floatX), "atty");
            LabBuf dqkv = lab_buf_alloc(BT * in.W * sizeof(floatX), "dqkv");
            floatX* d_atty = (floatX*)atty.ptr;
            const QKVSources<const floatX> src = lab_sources(&in);
            const QKVSources<floatX> dsrc = qkv_sources<floatX>((floatX*)dqkv.ptr, NULL, NULL);
            auto forward = [&]() { lab_attention_forward(&at, d_atty, src); };
            auto backward = [&]() { lab_attention_backward(&at, dsrc, lab_in(&in.datty), d_atty, src); };
            forward();
            const double ms_bwd = lab_time_median_ms(&timer, lab_bench_reps(a), backward);
            lab_attn_bench_line(ver->version, "backward", &sh, ms_bwd, f_bwd, b_bwd);
            const double ms_both = lab_time_median_ms(&timer, lab_bench_reps(a), [&]() { forward(); backward(); });
            lab_attn_bench_line(ver->version, "forward+backward", &sh, ms_both, f_fwd + f_bwd, b_fwd + b_bwd);
            lab_buf_free(&dqkv);
            lab_buf_free(&atty);
            lab_attn_free(&at);
        }
        lab_inputs_free(&in);
    }
#if PRECISION_IS_BF16
    if (lab_version_selected(a, 2) && !a->long_bench) { bench_delta(&timer, a); }
#endif
    lab_timer_free(&timer);
}

int main(int argc, char** argv) {
    const LabSpec spec = lab_attn_spec("lab_attention_backward", "causal attention backward of train_gpt2.cu",
                                       "time every version's backward, and forward + backward, at T = 1024, 2048, 4096\n"
                                       "                (B 8, H 12, hd 64, standard layout) and at d12's micro-step (B 64, T 1024)", 1);
    LabArgs a;
    if (!lab_parse_args(&a, argc, argv, &spec)) { return 0; }
    lab_attn_apply_args(&a);
    if (!lab_device_or_skip(&a)) { return 0; }
    if (!lab_attn_drop_unavailable(&a)) { return 0; }
    int failed = 0;
    if (a.check) { failed = check(&a); }
    if (a.bench) { bench(&a); }
    if (a.large) { failed = lab_attn_large(&a, 1); }
    return lab_verdict(a.name, a.check || a.large, failed);
}
