/*
Kernel lab: the LayerNorm kernels of train_gpt2.cu, forward (fused with the residual add before it)
and backward (LayerNorm with and without bias, and RMSNorm, which shares the kernel).

  forward:  residual (N, C) = inp1 + inp2, rounded to bf16 as stored; out = (residual - mean) * rstd
            * weight (+ bias); mean, rstd (N) fp32, the statistics of the stored residual.
            inp2 NULL: out = LayerNorm(inp1) and residual is not touched.
  backward: n = (x - mean) * rstd (RMSNorm: mean NULL, n = x * rstd), dn = dout * weight;
            dinp = rstd * (dn - mean(dn) - n * mean(dn * n)) (RMSNorm: no mean(dn)), added to dinp
            when accumulate; dweight += sum over rows of dout * n; dbias += sum over rows of dout.

The two numbers (benchmark shape: N = B * T = 65536 (B 64, T 1024), C = 768, bf16; H100 ~790 TFLOP/s
dense bf16, ~3 TB/s HBM3):
  forward, residual add + LayerNorm with bias:
    bytes = 2*N*C*2 read (inp1, inp2) + 2*N*C*2 written (residual, out) + 8*N (mean, rstd) + 4*C (weight, bias)
          = 403.2 MB -> 0.1344 ms
    FLOPs ~ 9*N*C (add 1, sum 1, (x - m)^2 summed 3, (x - m) * r * w + b 4) = 0.453 GFLOP -> 0.0006 ms at
          790 TFLOP/s, which is tensor-core math these kernels do not use; 0.0068 ms at the fp32 CUDA cores'
          ~67 TFLOP/s. Memory-bound, 20x over.
    version 1 cannot reach that: the add writes residual and the norm reads it back, 10*N*C + 8*N + 4*C
          = 503.8 MB -> 0.1680 ms at best.
  backward, LayerNorm with bias, accumulate = 1 (LN1 and LN2 of every layer; the final LN has accumulate 0):
    bytes = 3*N*C*2 read (dout, inp, dinp's old value) + N*C*2 written (dinp) + 8*N (mean, rstd) + 2*C (weight)
            + 16*C (dweight, dbias read and written) = 403.2 MB -> 0.1344 ms
    FLOPs ~ 17*N*C (n, dn and the two row sums 6; dx 7; the dweight, dbias sums 3; + old dinp 1) = 0.856 GFLOP
          -> 0.0011 ms (0.0128 ms at the fp32 CUDA-core peak): memory-bound.
    version 1 reads dout and inp twice (the dx kernel, then the column sums): 12*N*C + 16*N = 605.0 MB -> 0.2017 ms.
    version 2 adds its partial sums, grid * 2C fp32 written and read once: 3.2 MB at the H100's grid of 264.
      But one block reads all 1.6 MB of them while the rest of the GPU waits: 264 rows x 384 chunks of
      16 bytes over 256 threads, each thread's loads unrolled by 4 (the PTX), is ~100 dependent rounds
      of an L2 hit (~0.4 us): ~40 us a launch, 25 launches a d12 step: ~1 ms (predicted). The H200's
      ncu capture (2026-11-26) measured norm_backward_kernel at 4.04 ms a step against 3.33 predicted
      for its bytes at 3 TB/s, 49% of DRAM throughput: the tail fits that gap.
    version 3 adds the partials in two levels: groups of 16 blocks, the last block of each group adds
      its 16 rows (17 groups at a grid of 264, side by side), the last group the 17 group rows: the
      serial part reads 33 rows, not 264, ~4 rounds of 4 loads per thread each level: ~4 us a launch,
      0.1 ms a step (predicted); + 17 x 2C fp32 group rows written and read (0.1 MB). Predicted step
      total 3.4 ms, as the bytes' time (the main pass unchanged).

  At C = 1600 (d48; also benched, see version 2's registers): 839.4 MB -> 0.2798 ms, forward and backward alike.

Versions (./build/lab_layernorm [version] [--seed n] [--check] [--bench]; registers from
`nvcc -Xptxas -v`, nvcc 13.0, sm_90; no spills unless said):
  1  the pre-fusion kernels of commit cce9b07 (copied below with a v1_ prefix; the trainer no longer has them).
     forward: v1_add_kernel, grid_for(N*C, 256) blocks of 256 threads, grid-stride, one bf16 per thread per
     step, 16 registers; then v1_layernorm_forward_kernel, (N + 7) / 8 blocks of 256 threads, a warp per row,
     lane-strided scalar bf16 loads (64-byte transactions per warp), three passes over the row, no shared
     memory, 32 registers.
     backward: v1_norm_backward_kernel, (N + 7) / 8 blocks of 256, a warp per row, scalar, dx only, 32
     registers; v1_column_sums_partial_kernel, grid (ceil(C / 32), min(N, 64) row chunks) x block (32, 8),
     2112 B static shared memory, 32 registers, partial (chunks, 2, C) fp32; v1_column_sums_finalize_kernel,
     ceil(C / 256) blocks of 256, 32 registers. Deterministic (fixed chunks, no atomics).
  2  the trainer's (train_gpt2.cu, called here through its launchers).
     forward: residual_layernorm_forward_kernel via residual_layernorm_forward / layernorm_forward,
     (N + 7) / 8 blocks of 256 threads, a warp per row, x128 (8 bf16, 16 bytes) per lane per step: the add and
     the store of residual in the first pass, variance and output re-read the row; no shared memory,
     40 registers (6 blocks, 48 warps per SM). Deterministic.
     backward: norm_backward_kernel<PACKS = ceil(C / 256)> via norm_backward, grid min(ceil(N / 8), 2 * SMs,
     512) blocks of 256 threads; a warp per row at a time, the row's x and dout held in registers (PACKS x128
     each), its dweight/dbias sums in registers (2 * PACKS * 8 fp32); 16400 B static shared memory (the
     block's sums for C <= 2048); partial (grid, 2, C) fp32 in g_reduce_partial; the last block (ticket
     counter g_reduce_counters[0], 0 before and after) adds the partials in block order. Registers by PACKS:
     1: 79, 2: 105, 3 (C = 768): 128, 4: 171, 5: 216, 6: 246, 7 (C = 1600): 255, 8: 255 with 58 B spilled
     (232 B of spill loads). At 256 threads a block, up to 128 registers give the 2 blocks per SM the grid of
     2 * SMs assumes; from PACKS 4 (C > 768: d24, d36, d48) only 1 block (8 warps) fits per SM and the grid
     runs in two waves. Deterministic for a fixed grid, that is for a given GPU (the grid follows its SMs).
     The partials' reduction with g_norm_backward_group = 0: one group, the last block adds every row.
  3  version 2 with the trainer's g_norm_backward_group = NORM_BACKWARD_GROUP (16, the trainer's default):
     the reduction in groups of 16 blocks (above). ptxas (nvcc 13.0, sm_90, --use_fast_math, 2026-11-27)
     by PACKS: 1: 108, 2: 123, 3 (C = 768): 128, 4: 190, 5: 223, 6: 247, 7: 255, 8: 255 with 58 B
     spilled; the same day's build of version 2 alone: 1: 90, 2: 119, the rest the same. So the
     occupancy the grid assumes is unchanged (2 blocks per SM up to PACKS 3). The same shared memory;
     the group rows after the blocks' rows in g_reduce_partial, tickets g_reduce_counters[0 .. groups]. Deterministic for a fixed grid, as version 2; its sums are added in
     another order than version 2's (a different rounding, within the fp32 tolerance). The forward is
     version 2's.
  4  (issue 55; not measured yet) version 3 with each warp's share of the column sums in its own slice of
     dynamic shared memory instead of registers (norm4_backward_kernel, here in the lab). ptxas (nvcc
     13.0, 2026-11-28) by PACKS, sm_90: 1-3: 80 registers, 4-6: 127-128, 7: 183, 8: 205; sm_80: at most
     127; no stack frame, no spills at any width (version 3: 128 at C = 768, 58 B spilled at 2048).
     Shared memory 16 KiB per pack + 4 B: at C = 768, 48 KiB and 80 registers, so 3 blocks (24 warps)
     fit an SM, against version 3's 2 (16); from C 1016 2 blocks, at C 1600 and 2048 one (114 and 131
     KiB), as version 3. A block adds its warps' sums in version 3's order; the grid (3 blocks an SM at
     C <= 768) differs, so the partials are added in another order (within the fp32 tolerance).
     Predicted: the same 403.2 MB at 3.0 TB/s or better, 0.134 ms at C = 768 (H200: 4.8 TB/s peak);
     25 launches a d12 step, 3.36 ms against version 3's 4.04 measured (2.47 TB/s). Why: version 3's
     warps load their row, then wait for two warp sums before their stores; half again as many warps
     resident keep half again as many rows' loads in flight while others reduce.

--check: every version, for N in {1, 7, 64, 4099} x C in {48, 64, 256, 768, 1016, 1272, 1528, 1600, 1784,
  2048} (every PACKS of norm_backward_kernel, 1 to 8):
  forward x bias {0, 1} x {residual: inp2 given, plain: inp2 NULL} (160 cases);
  backward x {LayerNorm with bias, LayerNorm without bias, RMSNorm} x accumulate {0, 1} (240 cases).
  --quick (the CPU runtime, dev/cudacpu): N 7 at every C, and N 4099 (each warp loops over rows, a full
  wave of blocks) at C 48, 768, 1600: 13 shapes of the 40.
  Fresh inputs per case (seed printed): N(0, 1) in bf16, inp1 and x with a row offset of +-[0.5, 2) (see the
  tolerances), weight 1 + 0.25 N(0, 1), bias 0.1 N(0, 1); backward: mean and rstd computed on the host from
  x (the forward's fp32 values), the old dinp, dweight and dbias N(0, 1) (they are added to).
  Outputs and scratch filled with 0xFF (NaN) before each run and 1 KiB of 0xFF guards around every buffer;
  each output against the float64 reference (dev/cpu/kernels_cpu.h) as "rel_err = ||out - ref|| / ||ref||";
  no element left unwritten, guards and inputs unchanged, plain mode leaves residual byte for byte
  untouched, versions 2 and 3's ticket counters back to 0, a second run bit-identical; the residual
  mode of versions 2 and 3 must equal, bit for bit, their plain LayerNorm of the residual it stored
  (what -r 2's recompute relies on).
  One PASS/FAIL line per (version, case); exit 1 on any FAIL.
--bench: the benchmark shape, then C = 1600: forward (residual, bias) and backward (LayerNorm, bias,
  accumulate 1), median of 25 runs, L2 flushed before each; ms and GB/s of the minimum bytes above.
Without a CUDA device: one SKIP line, exit 0. BF16 builds only.
*/
#define TESTING
#include "../../train_gpt2.cu"
#include "../cpu/kernels_cpu.h"
#include "common.h"

#if !PRECISION_IS_BF16
#error "dev/cuda/layernorm.cu is a BF16 lab (its tolerances are bf16's): build it with -DENABLE_BF16"
#endif

// Tolerances, as rel_err of a whole tensor.
// bf16 outputs (out, dinp): 1e-2. One rounding to bf16 is at most 2^-8 relative per element and
// measured 1.8e-3 (dinp) and 1.9e-3 (out) as rel_err of the exactly computed values on this check's
// inputs; a wrong row, channel or term gives 1e-1 and more.
// residual: exact. It is one fp32 add of two bf16 values rounded once to bf16; the host does the same.
// mean, rstd, dweight, dbias (fp32): 1e-5. A host emulation of both versions' fp32 summation orders
// on this check's inputs and shapes gave at most 2.0e-8 (mean), 8.4e-8 (rstd), 3.1e-7 (dweight),
// 7.0e-8 (dbias); --use_fast_math's approximate division and square root add ~2 ulp (2.4e-7) to
// rstd. That needs rows whose mean is not rounding noise: a zero-mean row's mean has a condition
// number of ~sqrt(C), so inputs get a row offset of magnitude 0.5 to 2 (the residual stream's rows
// are not centred either).
static const double TOL_X = 1e-2;
static const double TOL_F32 = 1e-5;

// ----------------------------------------------------------------------------
// version 1: commit cce9b07's train_gpt2.cu (before the fusion), renamed with a v1_ prefix

// out = a + b (the residual connections; also dx += dq for q_residual's direct path); out may be a or b
__global__ void v1_add_kernel(floatX* out, const floatX* a, const floatX* b, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        out[i] = f2x(x2f(a[i]) + x2f(b[i]));
    }
}

__global__ void v1_layernorm_forward_kernel(floatX* out, float* mean, float* rstd, const floatX* inp,
                                            const floatX* weight, const floatX* bias, int N, int C) {
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (row >= N) { return; }
    const floatX* x = inp + (size_t)row * C;
    float s = 0.0f;
    for (int c = lane; c < C; c += 32) { s += x2f(x[c]); }
    const float m = warp_sum(s) / C;
    float v = 0.0f;
    for (int c = lane; c < C; c += 32) { const float d = x2f(x[c]) - m; v += d * d; }
    const float r = 1.0f / sqrtf(warp_sum(v) / C + 1e-5f); // biased variance, like GPT-2
    floatX* o = out + (size_t)row * C;
    for (int c = lane; c < C; c += 32) {
        float y = (x2f(x[c]) - m) * r * x2f(weight[c]);
        if (bias != NULL) { y += x2f(bias[c]); }
        o[c] = f2x(y);
    }
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = r;
    }
}

// Input gradient of LayerNorm (mean != NULL) or RMSNorm (mean == NULL), one warp per row:
//   n = (x - mean) * rstd (RMSNorm: x * rstd),  dn = dout * w,
//   LayerNorm: dx = rstd * (dn - mean(dn) - n * mean(dn * n));  RMSNorm: dx = rstd * (dn - n * mean(dn * n)).
// accumulate: dinp += dx (the residual stream gathers gradients), else dinp = dx.
__global__ void v1_norm_backward_kernel(floatX* dinp, const floatX* dout, const floatX* inp, const floatX* weight,
                                        const float* mean, const float* rstd, int N, int C, int accumulate) {
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (row >= N) { return; }
    const size_t base = (size_t)row * C;
    const float m = mean != NULL ? mean[row] : 0.0f;
    const float r = rstd[row];
    float sum_dn = 0.0f, sum_dn_n = 0.0f;
    for (int c = lane; c < C; c += 32) {
        const float n = (x2f(inp[base + c]) - m) * r;
        const float dn = x2f(dout[base + c]) * x2f(weight[c]);
        sum_dn += dn;
        sum_dn_n += dn * n;
    }
    const float mean_dn = mean != NULL ? warp_sum(sum_dn) / C : 0.0f;
    const float mean_dn_n = warp_sum(sum_dn_n) / C;
    for (int c = lane; c < C; c += 32) {
        const float n = (x2f(inp[base + c]) - m) * r;
        const float dn = x2f(dout[base + c]) * x2f(weight[c]);
        float dx = r * (dn - mean_dn - n * mean_dn_n);
        if (accumulate) { dx += x2f(dinp[base + c]); }
        dinp[base + c] = f2x(dx);
    }
}

// Column sums over N rows, in two deterministic passes (partial sums of row chunks, then their sum):
//   plane 0: sum over rows of dout * n  with n the normalized input (when inp != NULL), the norm gain gradient
//   plane 1: sum over rows of dout                                                  , a bias gradient
// partial is (num_chunks, 2, C). Block (32, 8): 32 consecutive columns, 8 row lanes.
#define V1_COLSUM_MAX_CHUNKS 64
__global__ void v1_column_sums_partial_kernel(float* partial, const floatX* dout, const floatX* inp, const float* mean,
                                              const float* rstd, int N, int C, int rows_per_chunk) {
    __shared__ float s_n[8][33];
    __shared__ float s_b[8][33];
    const int c = blockIdx.x * 32 + threadIdx.x;
    const int chunk = blockIdx.y;
    const int row_end = min(N, (chunk + 1) * rows_per_chunk);
    float acc_n = 0.0f, acc_b = 0.0f;
    if (c < C) {
        for (int row = chunk * rows_per_chunk + threadIdx.y; row < row_end; row += blockDim.y) {
            const float d = x2f(dout[(size_t)row * C + c]);
            if (inp != NULL) {
                const float m = mean != NULL ? mean[row] : 0.0f;
                acc_n += d * (x2f(inp[(size_t)row * C + c]) - m) * rstd[row];
            }
            acc_b += d;
        }
    }
    s_n[threadIdx.y][threadIdx.x] = acc_n;
    s_b[threadIdx.y][threadIdx.x] = acc_b;
    __syncthreads();
    if (threadIdx.y == 0 && c < C) {
        float tn = 0.0f, tb = 0.0f;
        for (int y = 0; y < (int)blockDim.y; y++) { tn += s_n[y][threadIdx.x]; tb += s_b[y][threadIdx.x]; }
        partial[((size_t)chunk * 2 + 0) * C + c] = tn;
        partial[((size_t)chunk * 2 + 1) * C + c] = tb;
    }
}

// dgain[c] += sum_chunks plane 0, dbias[c] += sum_chunks plane 1 (either may be NULL)
__global__ void v1_column_sums_finalize_kernel(float* dgain, float* dbias, const float* partial, int num_chunks, int C) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) { return; }
    float tn = 0.0f, tb = 0.0f;
    for (int k = 0; k < num_chunks; k++) {
        tn += partial[((size_t)k * 2 + 0) * C + c];
        tb += partial[((size_t)k * 2 + 1) * C + c];
    }
    if (dgain != NULL) { dgain[c] += tn; }
    if (dbias != NULL) { dbias[c] += tb; }
}

// cce9b07's column_sums, with its scratch (V1_COLSUM_MAX_CHUNKS, 2, C) passed in instead of a global
static void v1_column_sums(float* dgain, float* dbias, float* partial, const floatX* dout, const floatX* inp,
                           const float* mean, const float* rstd, int N, int C) {
    if (dgain == NULL && dbias == NULL) { return; }
    int chunks = N < V1_COLSUM_MAX_CHUNKS ? N : V1_COLSUM_MAX_CHUNKS;
    const int rows_per_chunk = (N + chunks - 1) / chunks;
    chunks = (N + rows_per_chunk - 1) / rows_per_chunk;
    dim3 grid((C + 31) / 32, chunks), block(32, 8);
    v1_column_sums_partial_kernel<<<grid, block>>>(partial, dout, inp, mean, rstd, N, C, rows_per_chunk);
    launchCheck();
    v1_column_sums_finalize_kernel<<<(C + 255) / 256, 256>>>(dgain, dbias, partial, chunks, C);
    launchCheck();
}

// cce9b07's forward: add_forward (residual) then layernorm_forward; inp2 NULL: the norm alone
static void v1_residual_layernorm_forward(floatX* residual, floatX* out, float* mean, float* rstd, const floatX* inp1,
                                          const floatX* inp2, const floatX* weight, const floatX* bias, int N, int C) {
    const floatX* x = inp1;
    if (inp2 != NULL) {
        const size_t n = (size_t)N * C;
        v1_add_kernel<<<grid_for(n, 256), 256>>>(residual, inp1, inp2, n);
        launchCheck();
        x = residual;
    }
    v1_layernorm_forward_kernel<<<(N + 7) / 8, 256>>>(out, mean, rstd, x, weight, bias, N, C);
    launchCheck();
}

// cce9b07's layernorm_backward / rmsnorm_backward (mean NULL)
static void v1_norm_backward(floatX* dinp, float* dweight, float* dbias, float* colsum_partial, const floatX* dout,
                             const floatX* inp, const floatX* weight, const float* mean, const float* rstd, int N, int C,
                             int accumulate) {
    v1_norm_backward_kernel<<<(N + 7) / 8, 256>>>(dinp, dout, inp, weight, mean, rstd, N, C, accumulate);
    launchCheck();
    v1_column_sums(dweight, dbias, colsum_partial, dout, inp, mean, rstd, N, C);
}

// ----------------------------------------------------------------------------
// version 4: the backward's column sums in shared memory, not in registers (issue 55)

// Version 3 keeps each lane's share of the dweight and dbias sums in registers, 2 * PACKS * 8 fp32: 128
// registers at C = 768 (2 blocks, 16 warps an SM) and 232 bytes of spills at C = 2048. Here each warp
// keeps them in its own slice of dynamic shared memory, (2, PACKS * 8, 32) fp32, word (q, j * 8 + k, lane)
// for plane q (0 dweight, 1 dbias) and element k of pack j: a warp's 32 lanes touch 32 consecutive words
// (no bank conflict). The registers hold the row only (x and dout, PACKS x128 each: the loops over the
// packs unrolled, or the rows go to the stack), so at C <= 768 three
// blocks fit an SM (at most 85 registers; 48 KiB of shared memory each at PACKS 3). The block then adds
// its warps' slices in warp order, as version 3 adds its warps' registers, so a block's sums are version
// 3's bit for bit; the partials are reduced as the trainer's (norm_partials_reduce, groups of 16).
#define NORM4_THREADS 256
template <int PACKS>
__global__ void __launch_bounds__(NORM4_THREADS, PACKS <= 3 ? 3 : (PACKS <= 6 ? 2 : 1))
norm4_backward_kernel(floatX* dinp, float* dweight, float* dbias, float* partial, unsigned int* counter,
                      const floatX* dout, const floatX* inp, const floatX* weight, const float* mean, const float* rstd,
                      int N, int C, int accumulate, int group) {
    extern __shared__ float s_acc[]; // (warps, 2, PACKS * 8, 32), then norm_partials_reduce's flag
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nwarps = blockDim.x / 32;
    const int slice = 2 * PACKS * x128::size * 32, plane = PACKS * x128::size * 32;
    unsigned int* s_last = (unsigned int*)(s_acc + (size_t)nwarps * slice); // all dynamic: one opt-in covers it
    float* acc = s_acc + (size_t)warp * slice + lane; // this lane's word of element 0, plane 0
    for (int i = 0; i < 2 * PACKS * x128::size; i++) { acc[i * 32] = 0.0f; }
    for (int row = blockIdx.x * nwarps + warp; row < N; row += gridDim.x * nwarps) {
        const size_t base = (size_t)row * C;
        const float m = mean != NULL ? mean[row] : 0.0f;
        const float r = rstd[row];
        x128 xs[PACKS], ds[PACKS];
        float sum_dn = 0.0f, sum_dn_n = 0.0f;
#pragma unroll
        for (int j = 0; j < PACKS; j++) {
            const int c = (j * 32 + lane) * x128::size;
            if (c >= C) { continue; }
            xs[j] = load128(inp + base + c);
            ds[j] = load128cs(dout + base + c);
            const x128 w = load128(weight + c);
#pragma unroll
            for (int k = 0; k < x128::size; k++) {
                const float n = (x2f(xs[j][k]) - m) * r;
                const float dn = x2f(ds[j][k]) * x2f(w[k]);
                sum_dn += dn;
                sum_dn_n += dn * n;
            }
        }
        const float mean_dn = mean != NULL ? warp_sum(sum_dn) / C : 0.0f;
        const float mean_dn_n = warp_sum(sum_dn_n) / C;
#pragma unroll
        for (int j = 0; j < PACKS; j++) {
            const int c = (j * 32 + lane) * x128::size;
            if (c >= C) { continue; }
            const x128 w = load128(weight + c);
            x128 prev;
            if (accumulate) { prev = load128(dinp + base + c); }
            x128 dx;
#pragma unroll
            for (int k = 0; k < x128::size; k++) {
                const float n = (x2f(xs[j][k]) - m) * r;
                const float d = x2f(ds[j][k]);
                float v = r * (d * x2f(w[k]) - mean_dn - n * mean_dn_n);
                if (accumulate) { v += x2f(prev[k]); }
                dx[k] = f2x(v);
                acc[(j * x128::size + k) * 32] += d * n;
                acc[plane + (j * x128::size + k) * 32] += d;
            }
            store128(dinp + base + c, dx);
        }
    }
    __syncthreads();
    // the block's 2C sums, each column's warps added in warp order (version 3's order), into its row of partial
    float* mine = partial + (size_t)blockIdx.x * 2 * C;
    for (int i = threadIdx.x; i < 2 * C; i += blockDim.x) {
        const int q = i / C, c = i % C;
        const int word = q * plane + ((c / (32 * x128::size)) * x128::size + c % x128::size) * 32 + (c / x128::size) % 32;
        float sum = 0.0f;
        for (int w = 0; w < nwarps; w++) { sum += s_acc[(size_t)w * slice + word]; }
        mine[i] = sum;
    }
    norm_partials_reduce(partial, counter, dweight, dbias, C, group, s_last);
}

// version 4's launcher: as norm_backward (a wave of blocks, at most REDUCE_MAX_BLOCKS), the shared memory
// opted in once per instantiation (above 48 KiB from PACKS 3)
static void norm4_backward(floatX* dinp, float* dweight, float* dbias, const floatX* dout, const floatX* inp,
                           const floatX* weight, const float* mean, const float* rstd, int N, int C, int accumulate) {
    reduce_scratch_check(2 * C, "norm4_backward");
    const int packs = (C + 32 * x128::size - 1) / (32 * x128::size);
    const int warps = NORM4_THREADS / 32;
    static int blocks_per_sm[NORM_BACKWARD_MAX_PACKS + 1] = {};
    const int sms = g_num_sms > 0 ? g_num_sms : 1;
    int grid = (N + warps - 1) / warps;
#define NORM4_CASE(P) case P: { \
        const size_t smem = (size_t)warps * 2 * P * x128::size * 32 * sizeof(float) + sizeof(unsigned int); \
        if (blocks_per_sm[P] == 0) { \
            cudaCheck(cudaFuncSetAttribute(norm4_backward_kernel<P>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem)); \
            cudaCheck(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm[P], norm4_backward_kernel<P>, \
                                                                    NORM4_THREADS, smem)); \
            if (blocks_per_sm[P] < 1) { blocks_per_sm[P] = 1; } \
        } \
        if (grid > sms * blocks_per_sm[P]) { grid = sms * blocks_per_sm[P]; } \
        if (grid > REDUCE_MAX_BLOCKS) { grid = REDUCE_MAX_BLOCKS; } \
        norm4_backward_kernel<P><<<grid, NORM4_THREADS, smem>>>(dinp, dweight, dbias, g_reduce_partial, \
            g_reduce_counters, dout, inp, weight, mean, rstd, N, C, accumulate, NORM_BACKWARD_GROUP); \
        break; }
    switch (packs) {
        NORM4_CASE(1) NORM4_CASE(2) NORM4_CASE(3) NORM4_CASE(4) NORM4_CASE(5) NORM4_CASE(6) NORM4_CASE(7) NORM4_CASE(8)
        default:
            fprintf(stderr, "error: internal: norm4_backward over %d channels (at most %d)\n", C,
                    NORM_BACKWARD_MAX_PACKS * 32 * x128::size);
            exit(EXIT_FAILURE);
    }
#undef NORM4_CASE
    launchCheck();
}

// ----------------------------------------------------------------------------
// the versions behind one call each

static const LabVersion kVersions[] = {
    {1, "cce9b07's add_kernel + layernorm_forward_kernel; norm_backward_kernel + column sums", 0, 0},
    {2, "the trainer's residual_layernorm_forward; norm_backward (one kernel, last-block reduction)", 0, 0},
    {3, "version 2, norm_backward's partials added in groups of 16 blocks, then the groups (the trainer's)", 0, 0},
    {4, "version 3 with the column sums in shared memory: 3 blocks an SM at C <= 768 (the forward: version 2's)", 0, 0},
};

static void forward_version(int version, floatX* residual, floatX* out, float* mean, float* rstd, const floatX* inp1,
                            const floatX* inp2, const floatX* weight, const floatX* bias, int N, int C) {
    if (version == 1) { v1_residual_layernorm_forward(residual, out, mean, rstd, inp1, inp2, weight, bias, N, C); }
    else if (inp2 != NULL) { residual_layernorm_forward(residual, out, mean, rstd, inp1, inp2, weight, bias, N, C); }
    else { layernorm_forward(out, mean, rstd, inp1, weight, bias, N, C); }
}

static void backward_version(int version, floatX* dinp, float* dweight, float* dbias, float* v1_partial,
                             const floatX* dout, const floatX* inp, const floatX* weight, const float* mean,
                             const float* rstd, int N, int C, int accumulate) {
    if (version == 1) { v1_norm_backward(dinp, dweight, dbias, v1_partial, dout, inp, weight, mean, rstd, N, C, accumulate); return; }
    if (version == 4) { norm4_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C, accumulate); return; }
    g_norm_backward_group = version == 2 ? 0 : NORM_BACKWARD_GROUP;
    norm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C, accumulate);
    g_norm_backward_group = NORM_BACKWARD_GROUP;
}

// The scratch versions 2 and 3 share with the trainer's other reductions (gpt2_build allocates it):
// partial sums for up to REDUCE_MAX_BLOCKS blocks (and their groups) of max_cols columns, ticket
// counters at 0, sized as the trainer sizes them. Guarded buffers, so that a write past either end shows.
typedef struct {
    LabBuf partial, counters;
} ReduceScratch;

static ReduceScratch reduce_scratch_make(int max_cols) {
    ReduceScratch r;
    r.partial = lab_buf_alloc(reduce_partial_floats(max_cols) * sizeof(float), "g_reduce_partial");
    r.counters = lab_buf_alloc(reduce_counter_count(max_cols) * sizeof(unsigned int), "g_reduce_counters");
    cudaCheck(cudaMemset(r.counters.ptr, 0, r.counters.bytes));
    g_reduce_partial = (float*)r.partial.ptr;
    g_reduce_counters = (unsigned int*)r.counters.ptr;
    g_reduce_max_cols = max_cols;
    return r;
}

static void reduce_scratch_free(ReduceScratch* r) {
    lab_buf_free(&r->partial);
    lab_buf_free(&r->counters);
    g_reduce_partial = NULL;
    g_reduce_counters = NULL;
    g_reduce_max_cols = 0;
}

// ----------------------------------------------------------------------------
// inputs

// (N, C) values N(0, 1) plus, with offsets, a per-row offset of sign * U[0.5, 2)
static std::vector<float> random_rows(int N, int C, int offsets, unsigned long long* rng) {
    std::vector<float> v((size_t)N * C);
    for (int r = 0; r < N; r++) {
        double off = 0.0;
        if (offsets) {
            off = 0.5 + 1.5 * lab_uniform(rng);
            if (lab_uniform(rng) < 0.5) { off = -off; }
        }
        for (int c = 0; c < C; c++) { v[(size_t)r * C + c] = (float)(lab_normal(rng) + off); }
    }
    return v;
}

static const int kCheckN[] = {1, 7, 64, 4099};
// every PACKS of norm_backward_kernel (1: C <= 256, 3: 768, 4 to 8: 1016 to 2048; 7: 1600, d48)
static const int kCheckC[] = {48, 64, 256, 768, 1016, 1272, 1528, 1600, 1784, 2048};
// --quick: every width at N 7 (one row per warp); N 4099 (more rows than the grid has warps: each warp
// loops, the grid is the H100's full wave) at PACKS 1, 3 and 7
static int quick_keeps(int N, int C) { return N == 7 || (N == 4099 && (C == 48 || C == 768 || C == 1600)); }

// ----------------------------------------------------------------------------
// forward check

static int check_forward_case(const LabArgs* a, int N, int C, int has_bias, int fused) {
    const unsigned long long seed = lab_trial_seed(a->seed, {1, N, C, has_bias, fused});
    unsigned long long rng = seed;
    const size_t NC = (size_t)N * C;
    const LabHostX inp1 = lab_host_x(random_rows(N, C, 1, &rng));
    const LabHostX inp2 = lab_host_x(lab_normal_vec(NC, 0.0, 1.0, &rng));
    const LabHostX weight = lab_host_x(lab_normal_vec(C, 1.0, 0.25, &rng));
    const LabHostX bias = lab_host_x(lab_normal_vec(C, 0.0, 0.1, &rng));

    // the reference: residual as stored (one fp32 add, one rounding), then the norm in float64 of it
    std::vector<float> res_ref = inp1.f;
    if (fused) {
        std::vector<float> sum(NC);
        cpu_add(sum.data(), inp1.f.data(), inp2.f.data(), NC);
        res_ref = lab_host_x(sum).f;
    }
    std::vector<float> out_ref(NC), mean_ref(N), rstd_ref(N);
    cpu_layernorm_forward(out_ref.data(), mean_ref.data(), rstd_ref.data(), res_ref.data(), weight.f.data(),
                          has_bias ? bias.f.data() : NULL, N, C);

    LabBuf d_inp1 = lab_buf_input(inp1.x, "inp1"), d_inp2 = lab_buf_input(inp2.x, "inp2");
    LabBuf d_w = lab_buf_input(weight.x, "weight"), d_b = lab_buf_input(bias.x, "bias");
    LabBuf d_res = lab_buf_alloc(NC * sizeof(floatX), "residual"), d_out = lab_buf_alloc(NC * sizeof(floatX), "out");
    LabBuf d_mean = lab_buf_alloc(N * sizeof(float), "mean"), d_rstd = lab_buf_alloc(N * sizeof(float), "rstd");
    LabBuf* outs[4] = {&d_res, &d_out, &d_mean, &d_rstd};
    const char* names[4] = {"residual", "out", "mean", "rstd"};
    const size_t elem[4] = {sizeof(floatX), sizeof(floatX), sizeof(float), sizeof(float)};

    char what[128];
    snprintf(what, sizeof(what), "forward N=%d C=%d bias=%d %s", N, C, has_bias, fused ? "residual" : "plain");
    int failed = 0;
    for (int version : a->versions) {
        LabVerdict v;
        lab_verdict_init(&v);
        std::vector<unsigned char> first[4];
        for (int rep = 0; rep < 2; rep++) {
            for (LabBuf* b : outs) { lab_buf_poison(b); }
            forward_version(version, (floatX*)d_res.ptr, (floatX*)d_out.ptr, (float*)d_mean.ptr, (float*)d_rstd.ptr,
                            (const floatX*)d_inp1.ptr, fused ? (const floatX*)d_inp2.ptr : NULL, (const floatX*)d_w.ptr,
                            has_bias ? (const floatX*)d_b.ptr : NULL, N, C);
            cudaCheck(cudaDeviceSynchronize());
            for (int i = 0; i < 4; i++) {
                const std::vector<unsigned char> h = lab_buf_download(outs[i]);
                if (rep == 0) { first[i] = h; }
                else { lab_check_same(first[i], h, names[i], &v); }
            }
        }
        // residual: written exactly when there is an inp2
        if (fused) {
            const size_t left = lab_count_unwritten(first[0], sizeof(floatX));
            if (left > 0) { v.fail += "; " + std::to_string(left) + " elements of residual never written"; }
        } else if (lab_count_poison_bytes(first[0].data(), first[0].size()) != first[0].size()) {
            v.fail += "; residual written without an inp2 (it must stay untouched)";
        }
        for (int i = 1; i < 4; i++) {
            const size_t left = lab_count_unwritten(first[i], elem[i]);
            if (left > 0) { v.fail += "; " + std::to_string(left) + " elements of " + names[i] + " never written"; }
        }
        if (fused) {
            const std::vector<float> res = lab_x_to_floats(first[0]);
            lab_compare_rows(what, version, "residual", res.data(), res_ref.data(), NC, C, 0.0, &v);
        }
        const std::vector<float> out = lab_x_to_floats(first[1]);
        const std::vector<float> mean = lab_f32_from_bytes(first[2]), rstd = lab_f32_from_bytes(first[3]);
        lab_compare_rows(what, version, "out", out.data(), out_ref.data(), NC, C, TOL_X, &v);
        lab_compare_rows(what, version, "mean", mean.data(), mean_ref.data(), N, 1, TOL_F32, &v);
        lab_compare_rows(what, version, "rstd", rstd.data(), rstd_ref.data(), N, 1, TOL_F32, &v);
        // versions 2 and 3 (the same forward): the plain norm of the stored residual must repeat the
        // fused pass bit for bit (-r 2 recomputes ln1, ln2 that way in the backward pass)
        if (version >= 2 && fused) {
            const std::vector<unsigned char> res_bytes = first[0];
            for (int i = 1; i < 4; i++) { lab_buf_poison(outs[i]); }
            layernorm_forward((floatX*)d_out.ptr, (float*)d_mean.ptr, (float*)d_rstd.ptr, (const floatX*)d_res.ptr,
                              (const floatX*)d_w.ptr, has_bias ? (const floatX*)d_b.ptr : NULL, N, C);
            cudaCheck(cudaDeviceSynchronize());
            for (int i = 1; i < 4; i++) {
                if (lab_buf_download(outs[i]) != first[i]) {
                    v.fail += std::string("; the plain LayerNorm of the stored residual differs from the fused pass in ") + names[i];
                }
            }
            lab_buf_intact(&d_res, res_bytes, &v.fail);
        }
        for (LabBuf* b : outs) { lab_buf_guards_ok(b, &v.fail); }
        lab_buf_intact(&d_inp1, inp1.x, &v.fail);
        lab_buf_intact(&d_inp2, inp2.x, &v.fail);
        lab_buf_intact(&d_w, weight.x, &v.fail);
        lab_buf_intact(&d_b, bias.x, &v.fail);
        failed |= lab_verdict_print(a, version, what, seed, 1, &v);
    }
    for (LabBuf* b : outs) { lab_buf_free(b); }
    lab_buf_free(&d_inp1);
    lab_buf_free(&d_inp2);
    lab_buf_free(&d_w);
    lab_buf_free(&d_b);
    return failed;
}

// ----------------------------------------------------------------------------
// backward check

typedef enum { NORM_LN_BIAS = 0, NORM_LN = 1, NORM_RMS = 2 } NormKind;
static const char* const kNormNames[3] = {"layernorm+bias", "layernorm", "rmsnorm"};

static int check_backward_case(const LabArgs* a, const ReduceScratch* rs, int N, int C, int kind, int accumulate) {
    const unsigned long long seed = lab_trial_seed(a->seed, {2, N, C, kind, accumulate});
    unsigned long long rng = seed;
    const size_t NC = (size_t)N * C;
    const int has_mean = kind != NORM_RMS, has_bias = kind == NORM_LN_BIAS;
    const LabHostX inp = lab_host_x(random_rows(N, C, 1, &rng));
    const LabHostX dout = lab_host_x(lab_normal_vec(NC, 0.0, 1.0, &rng));
    const LabHostX weight = lab_host_x(lab_normal_vec(C, 1.0, 0.25, &rng));
    const LabHostX dinp0 = lab_host_x(lab_normal_vec(NC, 0.0, 1.0, &rng));
    const std::vector<float> dweight0 = lab_normal_vec(C, 0.0, 1.0, &rng), dbias0 = lab_normal_vec(C, 0.0, 1.0, &rng);
    // the forward's statistics of x, in fp32 as the forward stores them
    std::vector<float> mean(N), rstd(N), scratch(NC);
    if (has_mean) { cpu_layernorm_forward(scratch.data(), mean.data(), rstd.data(), inp.f.data(), weight.f.data(), NULL, N, C); }
    else { cpu_rmsnorm_forward(scratch.data(), rstd.data(), inp.f.data(), weight.f.data(), N, C); }

    std::vector<float> dinp_ref = accumulate ? dinp0.f : std::vector<float>(NC, 0.0f);
    std::vector<float> dw_ref = dweight0, db_ref = dbias0;
    cpu_norm_backward(dinp_ref.data(), dw_ref.data(), has_bias ? db_ref.data() : NULL, dout.f.data(), inp.f.data(),
                      weight.f.data(), has_mean ? mean.data() : NULL, rstd.data(), N, C, accumulate);

    LabBuf d_inp = lab_buf_input(inp.x, "inp"), d_dout = lab_buf_input(dout.x, "dout"), d_w = lab_buf_input(weight.x, "weight");
    const std::vector<unsigned char> mean_b = lab_bytes_of(mean), rstd_b = lab_bytes_of(rstd);
    LabBuf d_mean = lab_buf_input(mean_b, "mean"), d_rstd = lab_buf_input(rstd_b, "rstd");
    const std::vector<unsigned char> dw0_b = lab_bytes_of(dweight0), db0_b = lab_bytes_of(dbias0);
    LabBuf d_dinp = lab_buf_alloc(NC * sizeof(floatX), "dinp"), d_dw = lab_buf_alloc(C * sizeof(float), "dweight");
    LabBuf d_db = lab_buf_alloc(C * sizeof(float), "dbias");
    LabBuf d_v1_partial = lab_buf_alloc((size_t)V1_COLSUM_MAX_CHUNKS * 2 * C * sizeof(float), "v1 column sums partial");

    char what[128];
    snprintf(what, sizeof(what), "backward N=%d C=%d %s accumulate=%d", N, C, kNormNames[kind], accumulate);
    int failed = 0;
    for (int version : a->versions) {
        LabVerdict v;
        lab_verdict_init(&v);
        std::vector<unsigned char> first[3];
        for (int rep = 0; rep < 2; rep++) {
            if (accumulate) { lab_buf_upload(&d_dinp, dinp0.x.data()); }
            else { lab_buf_poison(&d_dinp); }
            lab_buf_upload(&d_dw, dw0_b.data());
            if (has_bias) { lab_buf_upload(&d_db, db0_b.data()); }
            else { lab_buf_poison(&d_db); }
            lab_buf_poison(&d_v1_partial);
            lab_buf_poison(&rs->partial);
            backward_version(version, (floatX*)d_dinp.ptr, (float*)d_dw.ptr, has_bias ? (float*)d_db.ptr : NULL,
                             (float*)d_v1_partial.ptr, (const floatX*)d_dout.ptr, (const floatX*)d_inp.ptr,
                             (const floatX*)d_w.ptr, has_mean ? (const float*)d_mean.ptr : NULL,
                             (const float*)d_rstd.ptr, N, C, accumulate);
            cudaCheck(cudaDeviceSynchronize());
            const std::vector<unsigned char> h[3] = {lab_buf_download(&d_dinp), lab_buf_download(&d_dw),
                                                     lab_buf_download(&d_db)};
            for (int i = 0; i < 3; i++) {
                if (rep == 0) { first[i] = h[i]; }
                else { lab_check_same(first[i], h[i], i == 0 ? "dinp" : i == 1 ? "dweight" : "dbias", &v); }
            }
            // the ticket counter must be back at 0, or the next reduction's last block is picked wrong
            const std::vector<unsigned char> cnt = lab_buf_download(&rs->counters);
            if (std::any_of(cnt.begin(), cnt.end(), [](unsigned char c) { return c != 0; })) {
                v.fail += "; g_reduce_counters not 0 after the backward (run " + std::to_string(rep + 1) + ")";
                cudaCheck(cudaMemset(rs->counters.ptr, 0, rs->counters.bytes)); // one failure, not a cascade
            }
        }
        const size_t left = lab_count_unwritten(first[0], sizeof(floatX));
        if (left > 0) { v.fail += "; " + std::to_string(left) + " elements of dinp never written"; }
        const std::vector<float> dinp = lab_x_to_floats(first[0]);
        const std::vector<float> dw = lab_f32_from_bytes(first[1]), db = lab_f32_from_bytes(first[2]);
        lab_compare_rows(what, version, "dinp", dinp.data(), dinp_ref.data(), NC, C, TOL_X, &v);
        lab_compare_rows(what, version, "dweight", dw.data(), dw_ref.data(), C, C, TOL_F32, &v);
        if (has_bias) { lab_compare_rows(what, version, "dbias", db.data(), db_ref.data(), C, C, TOL_F32, &v); }
        lab_buf_guards_ok(&d_dinp, &v.fail);
        lab_buf_guards_ok(&d_dw, &v.fail);
        lab_buf_guards_ok(&d_db, &v.fail);
        lab_buf_guards_ok(&d_v1_partial, &v.fail);
        lab_buf_guards_ok(&rs->partial, &v.fail);
        lab_buf_guards_ok(&rs->counters, &v.fail);
        lab_buf_intact(&d_inp, inp.x, &v.fail);
        lab_buf_intact(&d_dout, dout.x, &v.fail);
        lab_buf_intact(&d_w, weight.x, &v.fail);
        lab_buf_intact(&d_mean, mean_b, &v.fail);
        lab_buf_intact(&d_rstd, rstd_b, &v.fail);
        failed |= lab_verdict_print(a, version, what, seed, 1, &v);
    }
    LabBuf* all[9] = {&d_inp, &d_dout, &d_w, &d_mean, &d_rstd, &d_dinp, &d_dw, &d_db, &d_v1_partial};
    for (LabBuf* b : all) { lab_buf_free(b); }
    return failed;
}

static int check(const LabArgs* a, const ReduceScratch* rs) {
    printf("check: N {1, 7, 64, 4099} x C {48, 64, 256, 768, 1016, 1272, 1528, 1600, 1784, 2048}%s; forward x bias x "
           "{residual, plain}, backward x {layernorm+bias, layernorm, rmsnorm} x accumulate; tolerances: bf16 %.0e, "
           "fp32 %.0e, residual exact\n", a->quick ? " (--quick: N 7, and N 4099 at C 48, 768, 1600)" : "", TOL_X, TOL_F32);
    int failed = 0;
    for (int N : kCheckN) {
        for (int C : kCheckC) {
            if (a->quick && !quick_keeps(N, C)) { continue; }
            for (int fused = 1; fused >= 0; fused--) {
                for (int has_bias = 1; has_bias >= 0; has_bias--) { failed |= check_forward_case(a, N, C, has_bias, fused); }
            }
        }
    }
    for (int N : kCheckN) {
        for (int C : kCheckC) {
            if (a->quick && !quick_keeps(N, C)) { continue; }
            for (int kind = 0; kind < 3; kind++) {
                for (int acc = 0; acc < 2; acc++) { failed |= check_backward_case(a, rs, N, C, kind, acc); }
            }
        }
    }
    return failed;
}

// ----------------------------------------------------------------------------
// bench

#define BENCH_N 65536

// values for timing only: uniform in [-2, 2), one hash per element (50M normals would take seconds)
static LabBuf bench_buf(size_t n, size_t elem, const char* name, unsigned long long seed) {
    unsigned long long rng = seed;
    const std::vector<float> v = lab_uniform_vec(n, -2.0, 2.0, &rng);
    LabBuf b = lab_buf_alloc(n * elem, name);
    if (elem == sizeof(float)) { lab_buf_upload(&b, v.data()); }
    else { lab_buf_upload(&b, lab_host_x(v).x.data()); }
    return b;
}

// C = 768 is the benchmark shape; C = 1600 (d48) is where norm_backward_kernel<7> has 1 block per SM
static void bench_shape(const LabArgs* a, LabTimer* timer, int C) {
    const int N = BENCH_N;
    const size_t NC = (size_t)N * C;
    const double fwd_bytes = 8.0 * NC + 8.0 * N + 4.0 * C, fwd_flops = 9.0 * NC;
    const double bwd_bytes = 8.0 * NC + 8.0 * N + 2.0 * C + 16.0 * C, bwd_flops = 17.0 * NC;
    char what[96];
    snprintf(what, sizeof(what), "forward N=%d C=%d (residual + LayerNorm, bias)", N, C);
    lab_bench_predicted(what, fwd_flops, fwd_bytes);
    snprintf(what, sizeof(what), "backward N=%d C=%d (LayerNorm, bias, accumulate)", N, C);
    lab_bench_predicted(what, bwd_flops, bwd_bytes);
    LabBuf x1 = bench_buf(NC, sizeof(floatX), "inp1", a->seed), x2 = bench_buf(NC, sizeof(floatX), "inp2", a->seed + 1);
    LabBuf dout = bench_buf(NC, sizeof(floatX), "dout", a->seed + 2), dinp = bench_buf(NC, sizeof(floatX), "dinp", a->seed + 3);
    LabBuf w = bench_buf(C, sizeof(floatX), "weight", a->seed + 4), b = bench_buf(C, sizeof(floatX), "bias", a->seed + 5);
    LabBuf res = lab_buf_alloc(NC * sizeof(floatX), "residual"), out = lab_buf_alloc(NC * sizeof(floatX), "out");
    LabBuf mean = lab_buf_alloc(N * sizeof(float), "mean"), rstd = lab_buf_alloc(N * sizeof(float), "rstd");
    LabBuf dw = bench_buf(C, sizeof(float), "dweight", a->seed + 6), db = bench_buf(C, sizeof(float), "dbias", a->seed + 7);
    LabBuf v1_partial = lab_buf_alloc((size_t)V1_COLSUM_MAX_CHUNKS * 2 * C * sizeof(float), "v1 partial");
    for (int version : a->versions) {
        const double ms = lab_time_median_ms(timer, LAB_BENCH_REPS, [&]() {
            forward_version(version, (floatX*)res.ptr, (floatX*)out.ptr, (float*)mean.ptr, (float*)rstd.ptr,
                            (const floatX*)x1.ptr, (const floatX*)x2.ptr, (const floatX*)w.ptr, (const floatX*)b.ptr, N, C);
        });
        snprintf(what, sizeof(what), "forward N=%d C=%d", N, C);
        lab_bench_line(version, what, ms, fwd_bytes);
    }
    // the backward reads the forward's statistics of residual (finite, as the forward leaves them)
    forward_version(2, (floatX*)res.ptr, (floatX*)out.ptr, (float*)mean.ptr, (float*)rstd.ptr, (const floatX*)x1.ptr,
                    (const floatX*)x2.ptr, (const floatX*)w.ptr, (const floatX*)b.ptr, N, C);
    for (int version : a->versions) {
        const double ms = lab_time_median_ms(timer, LAB_BENCH_REPS, [&]() {
            backward_version(version, (floatX*)dinp.ptr, (float*)dw.ptr, (float*)db.ptr, (float*)v1_partial.ptr,
                             (const floatX*)dout.ptr, (const floatX*)res.ptr, (const floatX*)w.ptr,
                             (const float*)mean.ptr, (const float*)rstd.ptr, N, C, 1);
        });
        snprintf(what, sizeof(what), "backward N=%d C=%d", N, C);
        lab_bench_line(version, what, ms, bwd_bytes);
    }
    LabBuf* all[13] = {&x1, &x2, &dout, &dinp, &w, &b, &res, &out, &mean, &rstd, &dw, &db, &v1_partial};
    for (LabBuf* p : all) { lab_buf_free(p); }
}

static void bench(const LabArgs* a) {
    printf("bench: N=%d (B 64, T 1024), C=768 (and 1600), %s, median of %d runs, L2 flushed before each\n", BENCH_N,
           PRECISION_NAME, LAB_BENCH_REPS);
    LabTimer timer;
    lab_timer_init(&timer);
    bench_shape(a, &timer, 768);
    bench_shape(a, &timer, 1600);
    lab_timer_free(&timer);
}

int main(int argc, char** argv) {
    const LabSpec spec = {"lab_layernorm", "LayerNorm of train_gpt2.cu: residual add + norm forward, norm backward "
                          "(LayerNorm, RMSNorm)", kVersions, LAB_COUNT(kVersions), 0, NULL, NULL, NULL};
    LabArgs a;
    if (!lab_parse_args(&a, argc, argv, &spec)) { return 0; }
    if (!lab_device_or_skip(&a)) { return 0; }
    ReduceScratch rs = reduce_scratch_make(2 * kCheckC[sizeof(kCheckC) / sizeof(kCheckC[0]) - 1]);
    int failed = 0;
    if (a.check) { failed = check(&a, &rs); }
    if (a.bench) { bench(&a); }
    reduce_scratch_free(&rs);
    return lab_verdict(a.name, a.check, failed);
}
