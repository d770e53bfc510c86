/*
train_gpt2.cu: GPT-2 training in one CUDA file, with the Q/K/V projection scheme chosen at
compile time (attention_variants.cuh, -DQKV_SCHEME=QKV_<ID>) and GQA/MQA as a runtime shape.

Every sublayer has an explicit forward and backward kernel (or cuBLASLt call); the math is the
one of dev/FORMATS.md and the reference dev/reference/train_gpt2.py. test_gpt2.cu includes this
file (with TESTING defined, which drops main) and checks it against the reference's dumps.

Precision:
  -DENABLE_BF16 (default): bf16 parameters and activations, fp32 master weights for AdamW,
                           fp32 parameter gradients, fp32 accumulation everywhere.
  -DENABLE_FP32:           fp32 everything; cuBLASLt with CUBLAS_COMPUTE_32F (no TF32), so the
                           result can be compared to the float64 reference at 1e-4.

Layout: the precision, then one section per op in the order of a training step: encoder,
LayerNorm, matmul, attention (the flash kernels, then the unfused path), GELU, residual, attention's
sources (the fused projection and the residual query), classifier, optimizer, init. In each, an
op's kernels come first and their launcher right after. Then the model (one allocation for the
parameters, one for the activations), the forward and backward passes and the update; last, the
training step (CudaTrainer), which the loop both trainers share (dev/trainer/train_loop.h) runs,
and main. The host code both trainers share is in the .h headers of dev/trainer/; this trainer's own
infrastructure is in the .cuh headers there, each included where it is needed: the utilities under
every kernel (cuda_common.cuh), --profile, the matmul tuner, checkpoints, the KV cache's decode
step, and generation.

Build: make train_gpt2cu QKV=<scheme> [PRECISION=BF16|FP32]; run ./train_gpt2cu -h for the flags.
*/
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <algorithm>
#include <utility>
#include <vector>

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>

#include "attention_variants.cuh"
#include "dev/trainer/training_memory.h"
#include "dataloader.h"
#include "tokenizer.h"

// ----------------------------------------------------------------------------
// precision

#if defined(ENABLE_FP32) && defined(ENABLE_BF16)
#error "define one of ENABLE_FP32 and ENABLE_BF16"
#endif

#if defined(ENABLE_FP32)
typedef float floatX;
#define PRECISION_NAME "fp32"
#define PRECISION_IS_BF16 0
static const cudaDataType CUBLAS_X_TYPE = CUDA_R_32F;
__device__ __forceinline__ float x2f(floatX v) { return v; }
__device__ __forceinline__ floatX f2x(float v) { return v; }
#else
typedef __nv_bfloat16 floatX;
#define PRECISION_NAME "bf16"
#define PRECISION_IS_BF16 1
static const cudaDataType CUBLAS_X_TYPE = CUDA_R_16BF;
__device__ __forceinline__ float x2f(floatX v) { return __bfloat162float(v); }
__device__ __forceinline__ floatX f2x(float v) { return __float2bfloat16(v); } // round to nearest even
#endif
// the flags, the file headers, the schedule and the sampling rule, shared with the CPU trainer
#define TRAIN_COMMON_CUDA 1
#include "dev/trainer/train_common.h"

// the utilities under every kernel (llm.c's llmc/cuda_common.h and cuda_utils.cuh): error checks,
// allocations, launch sizes, bf16 <-> float on the host, warp and block reductions, 16-byte loads
#include "dev/trainer/cuda_common.cuh"

// --profile's cudaEvents per sublayer, and the GPU's peak FLOP/s for the MFU of each step line
// (dev/trainer/profile.cuh; the rows and their costs: dev/trainer/profile.h)
#include "dev/trainer/profile.h"
#include "dev/trainer/profile.cuh"

// ----------------------------------------------------------------------------
// launch helpers: the settings and scratch the launchers below share

static int g_gelu_fusion = 1;   // 1: GELU (and its derivative) in the cuBLASLt epilogues (--gelu_fusion)
static int g_bias_fusion = 1;   // 1: bias gradients in the weight gradient's cuBLASLt epilogue (--bias_fusion)
static int g_reduce_blocks = 0; // blocks of a deterministic reduction: 2 per SM (cuda_setup), a fixed grid
static int g_num_sms = 0;       // streaming multiprocessors of the GPU (cuda_setup)

// Scratch of the one-kernel reductions (norm_backward_kernel, bias_backward_kernel): partial sums
// (REDUCE_MAX_BLOCKS, 2, max columns) and one ticket counter per column group, all 0 between launches;
// and the column sums that cuBLASLt's BGRADB epilogue writes (max columns, fp32) before they are added
// to a bias gradient. Every launch runs on the one stream, so they share it.
#define REDUCE_MAX_BLOCKS 512
static float* g_reduce_partial = NULL;
static unsigned int* g_reduce_counters = NULL;
static float* g_bias_sums = NULL;
static int g_reduce_max_cols = 0;

static void reduce_scratch_check(int cols, const char* what) {
    if (cols > g_reduce_max_cols) {
        fprintf(stderr, "error: internal: %s over %d columns, the reduction scratch holds %d\n", what, cols, g_reduce_max_cols);
        exit(EXIT_FAILURE);
    }
}

// a flat elementwise launch: one thread per x128, n a multiple of x128::size, below 2^31
static unsigned int grid_for_packs(size_t n, int block, const char* what) {
    if (n % x128::size != 0 || n > (size_t)INT_MAX) {
        fprintf(stderr, "error: internal: %s over %zu elements (expected a multiple of %d below 2^31)\n", what, n, x128::size);
        exit(EXIT_FAILURE);
    }
    const size_t packs = n / x128::size;
    return (unsigned int)((packs + block - 1) / block);
}

// norm_backward_kernel's reduction: blocks per first-level group (version 3); 0 = one group of every
// block, version 2's reduction (the layernorm lab sets it to compare the two; see the kernel)
#define NORM_BACKWARD_GROUP 16
static int g_norm_backward_group = NORM_BACKWARD_GROUP;

// The reductions' scratch for sums over up to max_cols columns: a row of partial sums per block and
// one per group of norm_backward_kernel's blocks; a ticket counter per column group of
// bias_backward_kernel, or per group of norm_backward_kernel plus one, whichever is more.
static size_t reduce_partial_floats(int max_cols) {
    return ((size_t)REDUCE_MAX_BLOCKS + REDUCE_MAX_BLOCKS / NORM_BACKWARD_GROUP + 1) * (size_t)max_cols;
}
static size_t reduce_counter_count(int max_cols) {
    const size_t col_groups = (size_t)max_cols / (32 * x128::size) + 1;
    const size_t norm_tickets = REDUCE_MAX_BLOCKS / NORM_BACKWARD_GROUP + 2;
    return col_groups > norm_tickets ? col_groups : norm_tickets;
}

// the reductions' scratch (g_reduce_partial, g_reduce_counters) for sums over up to max_cols columns
static void reduce_scratch_reserve(int max_cols) {
    if (max_cols <= g_reduce_max_cols) { return; }
    if (g_reduce_partial != NULL) { cudaCheck(cudaFree(g_reduce_partial)); }
    if (g_reduce_counters != NULL) { cudaCheck(cudaFree(g_reduce_counters)); }
    if (g_bias_sums != NULL) { cudaCheck(cudaFree(g_bias_sums)); }
    g_reduce_partial = (float*)device_malloc(reduce_partial_floats(max_cols) * sizeof(float), "reduction scratch");
    g_bias_sums = (float*)device_malloc((size_t)max_cols * sizeof(float), "bias gradient sums");
    const size_t counters = reduce_counter_count(max_cols);
    g_reduce_counters = (unsigned int*)device_malloc(counters * sizeof(unsigned int), "reduction counters");
    cudaCheck(cudaMemset(g_reduce_counters, 0, counters * sizeof(unsigned int)));
    g_reduce_max_cols = max_cols;
}

// ----------------------------------------------------------------------------
// encoder: token and position embeddings, and their gradients
// (row-major shapes in the comments; each op's kernels come first, then their launchers)

// out[b,t,:] = wte[inp[b,t],:] + wpe[t,:]; one thread per x128 of channels
__global__ void encoder_forward_kernel(floatX* out, const int* inp, const floatX* wte, const floatX* wpe,
                                       int B, int T, int C) {
    const int packs_per_row = C / x128::size;
    const int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= B * T * packs_per_row) { return; }
    const int bt = idx / packs_per_row;
    const int c = (idx % packs_per_row) * x128::size;
    const int t = bt % T;
    const x128 e = load128(wte + (size_t)inp[bt] * C + c);
    const x128 p = load128(wpe + (size_t)t * C + c);
    x128 o;
    for (int k = 0; k < x128::size; k++) { o[k] = f2x(x2f(e[k]) + x2f(p[k])); }
    store128(out + (size_t)bt * C + c, o);
}

// out (B, T, C) = wte[inp] + wpe[t]
static void encoder_forward(floatX* out, const int* inp, const floatX* wte, const floatX* wpe, int B, int T, int C) {
    const int threads = 256;
    const size_t packs = (size_t)B * T * (C / x128::size);
    encoder_forward_kernel<<<(unsigned)((packs + threads - 1) / threads), threads>>>(out, inp, wte, wpe, B, T, C);
    launchCheck();
}

// adds x128::size consecutive fp32 sums into dst (16-byte aligned), f128 at a time
__device__ __forceinline__ void add_into_f32(float* dst, const float* sums) {
    for (int k = 0; k < x128::size; k += f128::size) {
        f128 w = load128(dst + k);
        for (int j = 0; j < f128::size; j++) { w[j] += sums[k + j]; }
        store128(dst + k, w);
    }
}

// dwpe[t,c] += sum_b dout[b,t,c]; one thread per x128 of channels of a position
__global__ void encoder_backward_wpe_kernel(float* dwpe, const floatX* dout, int B, int T, int C) {
    const int packs_per_row = C / x128::size;
    const int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= T * packs_per_row) { return; }
    const int t = idx / packs_per_row;
    const int c = (idx % packs_per_row) * x128::size;
    float acc[x128::size] = {};
    for (int b = 0; b < B; b++) {
        const x128 d = load128(dout + ((size_t)b * T + t) * C + c);
        for (int k = 0; k < x128::size; k++) { acc[k] += x2f(d[k]); }
    }
    add_into_f32(dwpe + (size_t)t * C + c, acc);
}

// dwpe (T, C) += sum over b of dout (B, T, C)
static void encoder_backward_wpe(float* dwpe, const floatX* dout, int B, int T, int C) {
    const int packs = C / x128::size;
    encoder_backward_wpe_kernel<<<(T * packs + 255) / 256, 256>>>(dwpe, dout, B, T, C);
    launchCheck();
}

// dwte[tok,:] += sum of dout[p,:] over the positions p holding tok, without atomics and without one
// thread walking every occurrence of a frequent token. The host (encoder_buckets_build) sorts the
// positions by token and cuts each token's list into chunks of at most ENCODER_CHUNK positions:
// chunk u covers pos[chunk_start[u] .. chunk_start[u+1]) of token chunk_tok[u]. A token with one
// chunk is added into dwte by that chunk (chunk_slot[u] = -1); the chunks of a token with several
// write their sums to scratch rows chunk_slot[u], which encoder_backward_wte_reduce_kernel adds up
// in slot order. Either way every row of dwte is written by one thread per x128, in a fixed order.
// (The host side, encoder_buckets_build, follows the launcher.)
#define ENCODER_CHUNK 64
__global__ void encoder_backward_wte_kernel(float* dwte, float* scratch, const floatX* __restrict__ dout,
                                            const int* __restrict__ chunk_tok, const int* __restrict__ chunk_start,
                                            const int* __restrict__ chunk_slot, const int* __restrict__ pos, int C) {
    const int u = blockIdx.x;
    const int c = (blockIdx.y * blockDim.x + threadIdx.x) * x128::size;
    if (c >= C) { return; }
    float acc[x128::size] = {};
    // unrolled so that several position loads, then several row loads, are in flight at once
#pragma unroll 8
    for (int p = chunk_start[u]; p < chunk_start[u + 1]; p++) {
        const x128 d = load128(dout + (size_t)pos[p] * C + c);
        for (int k = 0; k < x128::size; k++) { acc[k] += x2f(d[k]); }
    }
    const int slot = chunk_slot[u];
    if (slot < 0) {
        add_into_f32(dwte + (size_t)chunk_tok[u] * C + c, acc);
    } else {
        for (int k = 0; k < x128::size; k += f128::size) {
            f128 w;
            for (int j = 0; j < f128::size; j++) { w[j] = acc[k + j]; }
            store128(scratch + (size_t)slot * C + c + k, w);
        }
    }
}

// the tokens with several chunks: token reduce_tok[r] owns scratch rows [reduce_start[r], reduce_start[r+1])
__global__ void encoder_backward_wte_reduce_kernel(float* dwte, const float* scratch, const int* reduce_tok,
                                                   const int* reduce_start, int C) {
    const int r = blockIdx.x;
    const int c = (blockIdx.y * blockDim.x + threadIdx.x) * x128::size;
    if (c >= C) { return; }
    float acc[x128::size] = {};
#pragma unroll 4
    for (int s = reduce_start[r]; s < reduce_start[r + 1]; s++) {
        for (int k = 0; k < x128::size; k += f128::size) {
            const f128 w = load128(scratch + (size_t)s * C + c + k);
            for (int j = 0; j < f128::size; j++) { acc[k + j] += w[j]; }
        }
    }
    add_into_f32(dwte + (size_t)reduce_tok[r] * C + c, acc);
}

// The host side of the buckets: where each array lives in a buffer of encoder_bucket_ints(cap) ints
// for at most cap positions, and how many scratch rows the frequent tokens need (a token with more
// than one chunk has at least ENCODER_CHUNK + 1 positions, so at most 2 chunks per ENCODER_CHUNK).
typedef struct { size_t chunk_tok, chunk_start, chunk_slot, reduce_tok, reduce_start, pos; } EncoderBuckets;
static inline size_t encoder_bucket_ints(size_t cap) { return 6 * cap + 2; }
static inline size_t encoder_scratch_rows(size_t cap) { return 2 * cap / ENCODER_CHUNK + 1; }
static inline EncoderBuckets encoder_buckets_layout(size_t base, size_t cap) {
    EncoderBuckets o;
    o.chunk_tok = base;
    o.chunk_start = o.chunk_tok + cap;
    o.chunk_slot = o.chunk_start + cap + 1;
    o.reduce_tok = o.chunk_slot + cap;
    o.reduce_start = o.reduce_tok + cap;
    o.pos = o.reduce_start + cap + 1;
    return o;
}

// dwte += dout's rows (C channels) summed by token, through the buckets of encoder_buckets_build
// (laid out as o in `buckets`, on the device; num_chunks, num_reduce as the builder returned them)
// and scratch (encoder_scratch_rows(B * T), C)
static void encoder_backward_wte(float* dwte, float* scratch, const floatX* dout, const int* buckets,
                                 const EncoderBuckets* o, int num_chunks, int num_reduce, int C) {
    const int packs = C / x128::size;
    int threads = (packs + 31) / 32 * 32;
    if (threads > 1024) { threads = 1024; }
    const unsigned col_blocks = (unsigned)((packs + threads - 1) / threads);
    if (num_chunks > 0) {
        encoder_backward_wte_kernel<<<dim3(num_chunks, col_blocks), threads>>>(
            dwte, scratch, dout, buckets + o->chunk_tok, buckets + o->chunk_start, buckets + o->chunk_slot,
            buckets + o->pos, C);
        launchCheck();
    }
    if (num_reduce > 0) {
        encoder_backward_wte_reduce_kernel<<<dim3(num_reduce, col_blocks), threads>>>(
            dwte, scratch, buckets + o->reduce_tok, buckets + o->reduce_start, C);
        launchCheck();
    }
}

// Fills the bucket arrays at buf (layout o) for the n token ids of inputs (each in [0, V)): positions
// sorted by token with a counting sort (stable: a token's positions stay in increasing order, so the
// sums run in a fixed order), cut into chunks of at most ENCODER_CHUNK; a token with several chunks
// gets consecutive scratch slots and a reduce entry. count: host scratch of V + 1 ints.
static void encoder_buckets_build(int* buf, const EncoderBuckets* o, const int* inputs, int n, int V,
                                  std::vector<int>* count, int* num_chunks, int* num_reduce) {
    count->assign((size_t)V + 1, 0);
    std::vector<int>& next = *count;
    for (int i = 0; i < n; i++) { next[(size_t)inputs[i] + 1]++; }
    for (int v = 0; v < V; v++) { next[(size_t)v + 1] += next[(size_t)v]; } // next[v]: first index of token v
    int* pos = buf + o->pos;
    for (int i = 0; i < n; i++) { pos[next[(size_t)inputs[i]]++] = i; } // next[v] ends one past token v's last
    int chunks = 0, reduce = 0, slot = 0;
    for (int begin = 0; begin < n;) {
        const int tok = inputs[pos[begin]];
        const int end = next[(size_t)tok];
        const int nchunks = (end - begin + ENCODER_CHUNK - 1) / ENCODER_CHUNK;
        if (nchunks > 1) {
            buf[o->reduce_tok + reduce] = tok;
            buf[o->reduce_start + reduce] = slot;
            reduce++;
        }
        for (int k = 0; k < nchunks; k++) {
            buf[o->chunk_tok + chunks] = tok;
            buf[o->chunk_start + chunks] = begin + k * ENCODER_CHUNK;
            buf[o->chunk_slot + chunks] = nchunks > 1 ? slot++ : -1;
            chunks++;
        }
        begin = end;
    }
    buf[o->chunk_start + chunks] = n;
    buf[o->reduce_start + reduce] = slot;
    *num_chunks = chunks;
    *num_reduce = reduce;
}

// ----------------------------------------------------------------------------
// LayerNorm (with or without bias) and RMSNorm, one warp per row

// residual = inp1 + inp2 (rounded to floatX, as stored), then out = LayerNorm(residual) * weight
// (+ bias): the residual connection and the next LayerNorm in one pass over the row. inp2 NULL:
// out = LayerNorm(inp1), residual is not touched (may be NULL). Either way the statistics are those
// of the stored (rounded) values, so a recompute from the stored residual is bit-identical.
__global__ void residual_layernorm_forward_kernel(floatX* residual, floatX* out, float* mean, float* rstd,
                                                  const floatX* inp1, const floatX* inp2, const floatX* weight,
                                                  const floatX* bias, int N, int C) {
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (row >= N) { return; }
    const size_t base = (size_t)row * C;
    const floatX* x = (inp2 != NULL ? residual : inp1) + base;
    const int step = 32 * x128::size;
    float s = 0.0f;
    for (int c = lane * x128::size; c < C; c += step) {
        x128 v;
        if (inp2 != NULL) {
            const x128 a = load128(inp1 + base + c), b = load128(inp2 + base + c);
            for (int k = 0; k < x128::size; k++) { v[k] = f2x(x2f(a[k]) + x2f(b[k])); }
            store128(residual + base + c, v); // read back below by this same thread
        } else {
            v = load128(x + c);
        }
        for (int k = 0; k < x128::size; k++) { s += x2f(v[k]); }
    }
    const float m = warp_sum(s) / C;
    float var = 0.0f;
    for (int c = lane * x128::size; c < C; c += step) {
        const x128 v = load128(x + c);
        for (int k = 0; k < x128::size; k++) { const float d = x2f(v[k]) - m; var += d * d; }
    }
    const float r = 1.0f / sqrtf(warp_sum(var) / C + 1e-5f); // biased variance, like GPT-2
    for (int c = lane * x128::size; c < C; c += step) {
        const x128 v = load128(x + c), w = load128(weight + c);
        x128 o;
        if (bias != NULL) {
            const x128 b = load128(bias + c);
            for (int k = 0; k < x128::size; k++) { o[k] = f2x((x2f(v[k]) - m) * r * x2f(w[k]) + x2f(b[k])); }
        } else {
            for (int k = 0; k < x128::size; k++) { o[k] = f2x((x2f(v[k]) - m) * r * x2f(w[k])); }
        }
        store128(out + base + c, o);
    }
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = r;
    }
}

// residual (N, C) = inp1 + inp2, out = LayerNorm(residual); inp2 NULL: out = LayerNorm(inp1)
static void residual_layernorm_forward(floatX* residual, floatX* out, float* mean, float* rstd, const floatX* inp1,
                                       const floatX* inp2, const floatX* weight, const floatX* bias, int N, int C) {
    residual_layernorm_forward_kernel<<<(N + 7) / 8, 256>>>(residual, out, mean, rstd, inp1, inp2, weight, bias, N, C);
    launchCheck();
}

static void layernorm_forward(floatX* out, float* mean, float* rstd, const floatX* inp, const floatX* weight,
                              const floatX* bias, int N, int C) {
    residual_layernorm_forward(NULL, out, mean, rstd, inp, NULL, weight, bias, N, C);
}

// q_residual's RMSNorm_q: out = x / sqrt(mean(x^2) + eps) * weight
__global__ void rmsnorm_forward_kernel(floatX* out, float* rstd, const floatX* inp, const floatX* weight, int N, int C) {
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (row >= N) { return; }
    const floatX* x = inp + (size_t)row * C;
    const int step = 32 * x128::size;
    float s = 0.0f;
    for (int c = lane * x128::size; c < C; c += step) {
        const x128 v = load128(x + c);
        for (int k = 0; k < x128::size; k++) { const float xv = x2f(v[k]); s += xv * xv; }
    }
    const float r = 1.0f / sqrtf(warp_sum(s) / C + 1e-5f);
    floatX* o = out + (size_t)row * C;
    for (int c = lane * x128::size; c < C; c += step) {
        const x128 v = load128(x + c), w = load128(weight + c);
        x128 y;
        for (int k = 0; k < x128::size; k++) { y[k] = f2x(x2f(v[k]) * r * x2f(w[k])); }
        store128(o + c, y);
    }
    if (lane == 0) { rstd[row] = r; }
}

static void rmsnorm_forward(floatX* out, float* rstd, const floatX* inp, const floatX* weight, int N, int C) {
    rmsnorm_forward_kernel<<<(N + 7) / 8, 256>>>(out, rstd, inp, weight, N, C);
    launchCheck();
}

// Gradient of LayerNorm (mean != NULL) or RMSNorm (mean == NULL), all three parts in one kernel:
//   n = (x - mean) * rstd (RMSNorm: x * rstd),  dn = dout * w,
//   dx = rstd * (dn - mean(dn) - n * mean(dn * n))  (RMSNorm: without mean(dn)), added to dinp when
//   accumulate (the residual stream gathers gradients), else written;
//   dweight += sum over rows of dout * n,  dbias += sum over rows of dout (dbias may be NULL).
// Warp w of block b takes rows b * nwarps + w + k * gridDim.x * nwarps, holds each row in registers
// for its two passes and sums its share of dweight/dbias in registers (lane: channels
// (j * 32 + lane) * x128::size, j < PACKS = ceil(C / (32 * x128::size))). The warps of a block then add
// their sums into shared memory one warp after the other and the block writes its row to partial
// (gridDim.x, 2, C). The rows are then added in a fixed order, whichever block does it: the blocks
// form groups of `group` (0: one group of all of them); the last block of group g to take a ticket
// from counter[g] adds the group's rows in block order, into dweight/dbias when there is one group,
// else into the group's row of partial (after the blocks' rows); the last group to finish (ticket
// counter[groups]) adds the group rows in group order into dweight/dbias. No atomic touches a sum: a
// fixed grid and group give bit-identical results. counter: 0 before the launch (gpt2_build), 0 after.
// Why groups (version 3): with one group (version 2) a single block reads all gridDim.x rows (1.6 MB at
// C 768 on an H100's grid of 264) while the GPU waits; with groups of 16 the last blocks of 17 groups
// read 16 rows each, side by side, and the last of them 17 group rows.
#define NORM_BACKWARD_MAX_C 2048
#define NORM_BACKWARD_THREADS 256

// The sum of rows [first, first + count) of rows (2C floats each: dweight's sums, then dbias's), in row
// order, the block's threads over 4-float chunks: stored to out (a 2C row) when out != NULL, else added
// to dweight and dbias (dbias may be NULL). The rows were written by other blocks: read past L1 (.cg).
__device__ void norm_sums_add_rows(float* out, float* dweight, float* dbias, const float* rows, int first, int count, int C) {
    for (int i = threadIdx.x * f128::size; i < 2 * C; i += blockDim.x * f128::size) {
        float tot[f128::size] = {};
        for (int r = first; r < first + count; r++) {
            const f128 v = load128cg(rows + (size_t)r * 2 * C + i);
            for (int j = 0; j < f128::size; j++) { tot[j] += v[j]; }
        }
        if (out != NULL) {
            f128 t;
            for (int j = 0; j < f128::size; j++) { t[j] = tot[j]; }
            store128(out + i, t);
            continue;
        }
        float* dst = i < C ? dweight + i : (dbias != NULL ? dbias + (i - C) : NULL);
        if (dst != NULL) {
            f128 gsum = load128(dst);
            for (int j = 0; j < f128::size; j++) { gsum[j] += tot[j]; }
            store128(dst, gsum);
        }
    }
}
// After every block wrote its 2C partial sums (row blockIdx.x of partial): the last block of each group
// of `group` blocks (0: one group of all) adds its group's rows into a group row, and the last group
// adds the group rows into dweight and dbias (one group: its last block adds straight into them). The
// ticket counters (one per group, then one) are back at 0 after. Deterministic: rows in block order.
// Every thread of the block calls it; s_last is the block's shared flag.
__device__ void norm_partials_reduce(float* partial, unsigned int* counter, float* dweight, float* dbias, int C, int group,
                                     unsigned int* s_last) {
    const int size = group > 0 ? group : (int)gridDim.x;
    const int groups = ((int)gridDim.x + size - 1) / size, g = blockIdx.x / size;
    const int first = g * size, count = min(size, (int)gridDim.x - first);
    __threadfence(); // this block's partial is visible to whichever block comes last
    __syncthreads();
    if (threadIdx.x == 0) { *s_last = atomicAdd(&counter[g], 1u) == (unsigned int)count - 1; }
    __syncthreads();
    if (!*s_last) { return; }
    __threadfence(); // acquire side: the group's other partials are read after their fences
    float* group_rows = partial + (size_t)gridDim.x * 2 * C;
    if (groups == 1) {
        norm_sums_add_rows(NULL, dweight, dbias, partial, first, count, C);
        if (threadIdx.x == 0) { counter[g] = 0u; }
        return;
    }
    norm_sums_add_rows(group_rows + (size_t)g * 2 * C, NULL, NULL, partial, first, count, C);
    if (threadIdx.x == 0) { counter[g] = 0u; }
    __threadfence(); // the group's row is visible to whichever group comes last
    __syncthreads();
    if (threadIdx.x == 0) { *s_last = atomicAdd(&counter[groups], 1u) == (unsigned int)groups - 1; }
    __syncthreads();
    if (!*s_last) { return; }
    __threadfence();
    norm_sums_add_rows(NULL, dweight, dbias, group_rows, 0, groups, C);
    if (threadIdx.x == 0) { counter[groups] = 0u; }
}

// Up to C = 768 (PACKS 3) two blocks fit an SM (at most 128 registers); the launcher sizes the grid
// by the occupancy of the instantiation it runs.
template <int PACKS>
__global__ void __launch_bounds__(NORM_BACKWARD_THREADS, PACKS <= 3 ? 2 : 1)
norm_backward_kernel(floatX* dinp, float* dweight, float* dbias, float* partial, unsigned int* counter,
                     const floatX* dout, const floatX* inp, const floatX* weight, const float* mean, const float* rstd,
                     int N, int C, int accumulate, int group) {
    __shared__ float s_sums[2 * NORM_BACKWARD_MAX_C]; // dweight's sums, then dbias's
    __shared__ unsigned int s_last; // norm_partials_reduce's
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nwarps = blockDim.x / 32;
    float acc_n[PACKS][x128::size] = {}, acc_b[PACKS][x128::size] = {};
    for (int row = blockIdx.x * nwarps + warp; row < N; row += gridDim.x * nwarps) {
        const size_t base = (size_t)row * C;
        const float m = mean != NULL ? mean[row] : 0.0f;
        const float r = rstd[row];
        x128 xs[PACKS], ds[PACKS];
        float sum_dn = 0.0f, sum_dn_n = 0.0f;
        for (int j = 0; j < PACKS; j++) {
            const int c = (j * 32 + lane) * x128::size;
            if (c >= C) { continue; }
            xs[j] = load128(inp + base + c);
            ds[j] = load128cs(dout + base + c);
            const x128 w = load128(weight + c);
            for (int k = 0; k < x128::size; k++) {
                const float n = (x2f(xs[j][k]) - m) * r;
                const float dn = x2f(ds[j][k]) * x2f(w[k]);
                sum_dn += dn;
                sum_dn_n += dn * n;
            }
        }
        const float mean_dn = mean != NULL ? warp_sum(sum_dn) / C : 0.0f;
        const float mean_dn_n = warp_sum(sum_dn_n) / C;
        for (int j = 0; j < PACKS; j++) {
            const int c = (j * 32 + lane) * x128::size;
            if (c >= C) { continue; }
            const x128 w = load128(weight + c);
            x128 prev;
            if (accumulate) { prev = load128(dinp + base + c); }
            x128 dx;
            for (int k = 0; k < x128::size; k++) {
                const float n = (x2f(xs[j][k]) - m) * r;
                const float d = x2f(ds[j][k]);
                float v = r * (d * x2f(w[k]) - mean_dn - n * mean_dn_n);
                if (accumulate) { v += x2f(prev[k]); }
                dx[k] = f2x(v);
                acc_n[j][k] += d * n;
                acc_b[j][k] += d;
            }
            store128(dinp + base + c, dx);
        }
    }
    // the block's sums: warp 0 writes, warps 1.. add, in warp order
    for (int w = 0; w < nwarps; w++) {
        if (warp == w) {
            for (int j = 0; j < PACKS; j++) {
                const int c = (j * 32 + lane) * x128::size;
                if (c >= C) { continue; }
                for (int k = 0; k < x128::size; k++) {
                    s_sums[c + k] = (w == 0 ? 0.0f : s_sums[c + k]) + acc_n[j][k];
                    s_sums[C + c + k] = (w == 0 ? 0.0f : s_sums[C + c + k]) + acc_b[j][k];
                }
            }
        }
        __syncthreads();
    }
    float* mine = partial + (size_t)blockIdx.x * 2 * C;
    for (int i = threadIdx.x * f128::size; i < 2 * C; i += blockDim.x * f128::size) {
        f128 v;
        for (int j = 0; j < f128::size; j++) { v[j] = s_sums[i + j]; }
        store128(mine + i, v);
    }
    norm_partials_reduce(partial, counter, dweight, dbias, C, group, &s_last);
}

// dinp (+)= the norm's input gradient; dweight, dbias += (dbias may be NULL: no bias; mean NULL: RMSNorm)
#define NORM_BACKWARD_MAX_PACKS 8
static void norm_backward(floatX* dinp, float* dweight, float* dbias, const floatX* dout, const floatX* inp,
                          const floatX* weight, const float* mean, const float* rstd, int N, int C, int accumulate) {
    reduce_scratch_check(2 * C, "norm_backward");
    const int packs = (C + 32 * x128::size - 1) / (32 * x128::size);
    const int warps = NORM_BACKWARD_THREADS / 32;
    // one wave: as many blocks as fit on the GPU at once for this instantiation (asked once per PACKS)
    static int blocks_per_sm[NORM_BACKWARD_MAX_PACKS + 1] = {};
    const int sms = g_num_sms > 0 ? g_num_sms : 1; // cuda_setup sets it
    int grid = (N + warps - 1) / warps;
#define NORM_BACKWARD_CASE(P) case P: \
        if (blocks_per_sm[P] == 0) { \
            cudaCheck(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm[P], norm_backward_kernel<P>, \
                                                                    NORM_BACKWARD_THREADS, 0)); \
            if (blocks_per_sm[P] < 1) { blocks_per_sm[P] = 1; } \
        } \
        if (grid > sms * blocks_per_sm[P]) { grid = sms * blocks_per_sm[P]; } \
        if (grid > REDUCE_MAX_BLOCKS) { grid = REDUCE_MAX_BLOCKS; } \
        norm_backward_kernel<P><<<grid, NORM_BACKWARD_THREADS>>>(dinp, dweight, dbias, g_reduce_partial, \
            g_reduce_counters, dout, inp, weight, mean, rstd, N, C, accumulate, g_norm_backward_group); \
        break;
    switch (packs) {
        NORM_BACKWARD_CASE(1) NORM_BACKWARD_CASE(2) NORM_BACKWARD_CASE(3) NORM_BACKWARD_CASE(4)
        NORM_BACKWARD_CASE(5) NORM_BACKWARD_CASE(6) NORM_BACKWARD_CASE(7) NORM_BACKWARD_CASE(8)
        default:
            fprintf(stderr, "error: internal: norm backward over %d channels (at most %d)\n", C,
                    NORM_BACKWARD_MAX_PACKS * 32 * x128::size);
            exit(EXIT_FAILURE);
    }
#undef NORM_BACKWARD_CASE
    launchCheck();
}

static void rmsnorm_backward(floatX* dinp, float* dweight, const floatX* dout, const floatX* inp, const floatX* weight,
                             const float* rstd, int N, int C, int accumulate) {
    norm_backward(dinp, dweight, NULL, dout, inp, weight, NULL, rstd, N, C, accumulate);
}

// ----------------------------------------------------------------------------
// matmul: every matmul of the model goes through cuBLASLt (matmul_lt); the bias kernels
// are for what its epilogues do not cover

// what runs in a matmul's epilogue besides the bias (see matmul_lt); LT_BGRADB: the bias is an output
typedef enum { LT_PLAIN = 0, LT_GELU = 1, LT_DGELU = 2, LT_BGRADB = 3 } LtActivation;

static cublasLtHandle_t g_cublaslt = NULL;
static void* g_cublaslt_workspace = NULL;
static const size_t CUBLASLT_WORKSPACE_SIZE = 32u << 20;

// the choice of an algorithm per matmul configuration, and the matmul tuner (--lt_tune): cuBLASLt's
// candidates timed on a run's first micro-step, and -o's lt_algos.bin (dev/trainer/matmul_tuning.cuh)
#include "dev/trainer/matmul_tuning.cuh"

// largest power of two <= 256 dividing the address and, for batched matmuls, the batch stride:
// cuBLASLt's heuristic assumes 256-byte alignment unless told, and tensors here start anywhere
// (a q column range of the fused projection, a layer's slice of a stacked parameter)
static uint32_t lt_alignment(const void* p, long long stride_bytes, int batch) {
    uint32_t a = 256;
    const uintptr_t addr = (uintptr_t)p;
    while (a > 1 && ((addr % a) != 0 || (batch > 1 && (stride_bytes % (long long)a) != 0))) { a >>= 1; }
    return a;
}

// One cuBLASLt matmul, column-major as cuBLAS sees it: D (m x n, ldd) = alpha * op(A) op(B) + beta * D
// [+ bias (m)], op(A) m x k (A stored k x m when transA), op(B) k x n (B stored n x k when transB).
typedef struct {
    int m, n, k, transA, transB;
    int lda, ldb, ldd;           // leading dimensions
    float alpha, beta;
    int batch;                   // > 1: strided batches with element strides sA, sB, sD
    long long sA, sB, sD;
    LtActivation act;            // the epilogue (below); LT_PLAIN with bias NULL: none
    const void* bias;
    const floatX* aux;
} LtMatmul;

// D = op(A) op(B) with packed operands (each leading dimension its stored row count), one batch, no epilogue
static LtMatmul lt_matmul(int transA, int transB, int m, int n, int k) {
    LtMatmul mm;
    mm.m = m; mm.n = n; mm.k = k; mm.transA = transA; mm.transB = transB;
    mm.lda = transA ? k : m; mm.ldb = transB ? n : k; mm.ldd = m;
    mm.alpha = 1.0f; mm.beta = 0.0f;
    mm.batch = 1; mm.sA = mm.sB = mm.sD = 0;
    mm.act = LT_PLAIN; mm.bias = NULL; mm.aux = NULL;
    return mm;
}
// the same as alpha * op(A) op(B) + beta * D
static LtMatmul lt_scaled(LtMatmul mm, float alpha, float beta) { mm.alpha = alpha; mm.beta = beta; return mm; }
// the same over `batch` strided batches
static LtMatmul lt_batched(LtMatmul mm, int batch, long long sA, long long sB, long long sD) {
    mm.batch = batch; mm.sA = sA; mm.sB = sB; mm.sD = sD;
    return mm;
}
// the same with an epilogue
static LtMatmul lt_epilogue(LtMatmul mm, LtActivation act, const void* bias, const floatX* aux) {
    mm.act = act; mm.bias = bias; mm.aux = aux;
    return mm;
}

// matmul_lt runs an LtMatmul. A and B are floatX; D (and its C input) has type d_type: floatX, or
// CUDA_R_32F for the fp32 parameter gradients.
// Compute is always CUBLAS_COMPUTE_32F: fp32 accumulation, never TF32.
// Epilogue: + bias (m, floatX) when bias != NULL; act LT_GELU: D = gelu(result), aux (laid out like D) =
// the result before the GELU; LT_DGELU: D = result * gelu'(aux), aux an input (bias must be NULL);
// LT_BGRADB: bias is an output of n values of D's type, the sums of op(B)'s columns over k (cuBLASLt's
// BGRADB: the weight gradient's GEMM sums dY while it reads it), written, never added to.
// Returns 1. When cuBLASLt has no algorithm, or the tuner measured the matmul without the epilogue plus
// the trainer's own kernel faster (LtChoice.own_epilogue): with a bias or an activation, returns 0 having
// done nothing (the caller does the epilogue's work itself); without, stops with a line naming the shape.
static int matmul_lt(void* D, cudaDataType d_type, const floatX* A, const floatX* Bm, const LtMatmul& mm) {
    const int m = mm.m, n = mm.n, k = mm.k, transA = mm.transA, transB = mm.transB;
    const int lda = mm.lda, ldb = mm.ldb, ldd = mm.ldd, batch = mm.batch;
    const long long sA = mm.sA, sB = mm.sB, sD = mm.sD;
    const float alpha = mm.alpha, beta = mm.beta;
    const LtActivation act = mm.act;
    const void* bias = mm.bias;
    const floatX* aux = mm.aux;
    const size_t d_size = d_type == CUDA_R_32F ? 4 : 2;
    const cublasLtEpilogue_t epilogue = lt_epilogue_of(act, bias);
    cublasLtMatmulDesc_t op = lt_op_create(transA, transB, epilogue, bias, act == LT_BGRADB ? d_type : CUBLAS_X_TYPE,
                                           act == LT_GELU || act == LT_DGELU ? aux : NULL, ldd);
    cublasLtMatrixLayout_t la, lb, ld;
    cublasCheck(cublasLtMatrixLayoutCreate(&la, CUBLAS_X_TYPE, transA ? k : m, transA ? m : k, lda));
    cublasCheck(cublasLtMatrixLayoutCreate(&lb, CUBLAS_X_TYPE, transB ? n : k, transB ? k : n, ldb));
    cublasCheck(cublasLtMatrixLayoutCreate(&ld, d_type, m, n, ldd));
    if (batch > 1) {
        const int32_t bc = batch;
        cublasCheck(cublasLtMatrixLayoutSetAttribute(la, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof(bc)));
        cublasCheck(cublasLtMatrixLayoutSetAttribute(lb, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof(bc)));
        cublasCheck(cublasLtMatrixLayoutSetAttribute(ld, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof(bc)));
        const int64_t s_a = sA, s_b = sB, s_d = sD;
        cublasCheck(cublasLtMatrixLayoutSetAttribute(la, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &s_a, sizeof(s_a)));
        cublasCheck(cublasLtMatrixLayoutSetAttribute(lb, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &s_b, sizeof(s_b)));
        cublasCheck(cublasLtMatrixLayoutSetAttribute(ld, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &s_d, sizeof(s_d)));
    }
    cublasLtMatmulPreference_t pref;
    cublasCheck(cublasLtMatmulPreferenceCreate(&pref));
    const size_t ws = CUBLASLT_WORKSPACE_SIZE;
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
    // split-k partial sums only in the fp32 compute type: never rounded to bf16 between parts
    const uint32_t reduction = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &reduction, sizeof(reduction)));
    const uint32_t al_a = lt_alignment(A, sA * (long long)sizeof(floatX), batch);
    const uint32_t al_b = lt_alignment(Bm, sB * (long long)sizeof(floatX), batch);
    const uint32_t al_d = lt_alignment(D, sD * (long long)d_size, batch);
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof(al_a)));
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof(al_b)));
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_d, sizeof(al_d)));
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_d, sizeof(al_d)));
    // one decision per distinct configuration (lt_choice): the same shape always runs the same algorithm
    LtKey key;
    memset(&key, 0, sizeof(key));
    // the heuristic reads the bias and aux pointers' values for their alignment, as it does A's, B's, D's.
    // (dev/cuda/common.h's lab_lt_lookup reads fields 0-4, 12, 13 and 17 by position.)
    const uint32_t al_aux = act == LT_GELU || act == LT_DGELU ? lt_alignment(aux, 0, 1) : 0;
    const uint32_t al_bias = bias != NULL ? lt_alignment(bias, 0, 1) : 0;
    const long long fields[] = {m, n, k, transA, transB, lda, ldb, ldd, batch, sA, sB, sD, (long long)d_type,
                                bias != NULL, al_a, al_b, al_d, (long long)act, al_aux, al_bias};
    memcpy(key.v, fields, sizeof(fields));
    const LtCall call = {op, la, lb, ld, pref, A, Bm, D, d_size, alpha, beta, act, bias, aux, m, n, k, ldd, batch, sD, epilogue,
                         transA, transB};
    const LtChoice* choice = lt_choice(&call, &key);
    const int ok = choice->found && !choice->own_epilogue;
    if (ok) {
        cublasCheck(cublasLtMatmul(g_cublaslt, op, &alpha, A, la, Bm, lb, &beta, D, ld, D, ld, &choice->algo,
                                   g_cublaslt_workspace, CUBLASLT_WORKSPACE_SIZE, 0));
        debugSync();
    }
    cublasCheck(cublasLtMatmulPreferenceDestroy(pref));
    cublasCheck(cublasLtMatrixLayoutDestroy(la));
    cublasCheck(cublasLtMatrixLayoutDestroy(lb));
    cublasCheck(cublasLtMatrixLayoutDestroy(ld));
    cublasCheck(cublasLtMatmulDescDestroy(op));
    if (!ok && bias == NULL && act == LT_PLAIN) {
        fprintf(stderr, "error: cuBLASLt has no algorithm for m=%d n=%d k=%d transA=%d transB=%d lda=%d ldb=%d ldd=%d "
                "batch=%d D %s (alignments %u/%u/%u bytes) (HINT: an unusual model shape; try n_embd and n_head "
                "giving a head size that is a multiple of 8)\n", m, n, k, transA, transB, lda, ldb, ldd, batch,
                d_type == CUDA_R_32F ? "fp32" : PRECISION_NAME, al_a, al_b, al_d);
        exit(EXIT_FAILURE);
    }
    return ok;
}

// out (N, OC) += bias (OC): only for a bias the cuBLASLt epilogue is not given (see matmul_forward);
// OC may be any width (a fused projection of an odd head size), so element by element
__global__ void add_bias_kernel(floatX* out, const floatX* bias, int N, int OC) {
    const int n = N * OC;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        out[i] = f2x(x2f(out[i]) + x2f(bias[i % OC]));
    }
}

// out (N, OC) = inp (N, C) @ weight^T (weight (OC, C)) + bias (OC), the bias in the epilogue.
// The bias goes to the epilogue when 16-byte aligned (a layer's slice of a stacked bias is, whenever
// OC is a multiple of 8: every GPT-2 shape), else it is added separately; its alignment is part of
// matmul_lt's algorithm cache key, as cuBLASLt's heuristic reads it from the pointer.
static void matmul_forward(floatX* out, const floatX* inp, const floatX* weight, const floatX* bias, int N, int C, int OC) {
    const LtMatmul mm = lt_matmul(1, 0, OC, N, C); // (OC, N) column-major
    int fuse = bias != NULL && ((uintptr_t)bias % 16) == 0;
    if (!matmul_lt(out, CUBLAS_X_TYPE, weight, inp, lt_epilogue(mm, LT_PLAIN, fuse ? bias : NULL, NULL))) {
        fuse = 0; // no algorithm with the bias epilogue for this shape: plain matmul, bias added below
        matmul_lt(out, CUBLAS_X_TYPE, weight, inp, mm);
    }
    if (bias != NULL && !fuse) {
        const int n = N * OC;
        add_bias_kernel<<<(n + 255) / 256, 256>>>(out, bias, N, OC);
        launchCheck();
    }
}

// dbias[c] += sum over N rows of dout[:, c] (a bias gradient; where the weight gradient's GEMM has no
// BGRADB epilogue, see matmul_backward_params), in one deterministic kernel. Block
// (32, BIAS_ROW_LANES): column group blockIdx.x (thread x: x128::size columns), row share blockIdx.y
// (rows blockIdx.y * lanes + y + k * gridDim.y * lanes). The row lanes add up in shared memory in
// lane order, the block writes partial[blockIdx.y] (its columns of an (gridDim.y, OC) array), and
// the last block of the column group (ticket counters[blockIdx.x], 0 before and after) adds the
// gridDim.y partials in order. OC % x128::size == 0 loads 16 bytes, any other width (a fused
// projection of an odd head size) element by element.
#define BIAS_ROW_LANES 8
__global__ void bias_backward_kernel(float* dbias, float* partial, unsigned int* counters, const floatX* dout,
                                     int N, int OC) {
    __shared__ float s_acc[BIAS_ROW_LANES][32 * x128::size];
    __shared__ unsigned int s_last;
    const int c0 = (blockIdx.x * 32 + threadIdx.x) * x128::size;
    const int packed = OC % x128::size == 0;
    float acc[x128::size] = {};
    if (c0 < OC) {
        for (int row = blockIdx.y * BIAS_ROW_LANES + threadIdx.y; row < N; row += gridDim.y * BIAS_ROW_LANES) {
            const floatX* src = dout + (size_t)row * OC + c0;
            if (packed) {
                const x128 d = load128cs(src);
                for (int k = 0; k < x128::size; k++) { acc[k] += x2f(d[k]); }
            } else {
                for (int k = 0; k < x128::size && c0 + k < OC; k++) { acc[k] += x2f(src[k]); }
            }
        }
    }
    for (int k = 0; k < x128::size; k++) { s_acc[threadIdx.y][threadIdx.x * x128::size + k] = acc[k]; }
    __syncthreads();
    if (threadIdx.y == 0 && c0 < OC) {
        for (int y = 1; y < BIAS_ROW_LANES; y++) {
            for (int k = 0; k < x128::size; k++) { acc[k] += s_acc[y][threadIdx.x * x128::size + k]; }
        }
        for (int k = 0; k < x128::size && c0 + k < OC; k++) { partial[(size_t)blockIdx.y * OC + c0 + k] = acc[k]; }
    }
    __threadfence(); // the partial is visible to whichever block of the group comes last
    __syncthreads();
    if (threadIdx.x == 0 && threadIdx.y == 0) { s_last = atomicAdd(&counters[blockIdx.x], 1u) == gridDim.y - 1; }
    __syncthreads();
    if (!s_last) { return; }
    __threadfence(); // acquire side, as in norm_backward_kernel
    if (threadIdx.y == 0 && c0 < OC) {
        float tot[x128::size] = {};
        for (int b = 0; b < (int)gridDim.y; b++) {
            for (int k = 0; k < x128::size && c0 + k < OC; k++) { tot[k] += __ldcg(partial + (size_t)b * OC + c0 + k); }
        }
        for (int k = 0; k < x128::size && c0 + k < OC; k++) { dbias[c0 + k] += tot[k]; }
    }
    if (threadIdx.x == 0 && threadIdx.y == 0) { counters[blockIdx.x] = 0u; }
}

// dbias (OC) += column sums of dout (N, OC)
static void bias_backward(float* dbias, const floatX* dout, int N, int OC) {
    reduce_scratch_check(OC, "bias_backward");
    const int col_groups = (OC + 32 * x128::size - 1) / (32 * x128::size);
    int row_shares = g_reduce_blocks / col_groups;
    const int max_shares = (N + BIAS_ROW_LANES - 1) / BIAS_ROW_LANES;
    if (row_shares > max_shares) { row_shares = max_shares; }
    if (row_shares > REDUCE_MAX_BLOCKS) { row_shares = REDUCE_MAX_BLOCKS; }
    if (row_shares < 1) { row_shares = 1; }
    bias_backward_kernel<<<dim3(col_groups, row_shares), dim3(32, BIAS_ROW_LANES)>>>(dbias, g_reduce_partial,
                                                                                   g_reduce_counters, dout, N, OC);
    launchCheck();
}

// dbias (OC) += sums (OC): a bias gradient's share of this micro-step, summed by the weight gradient's
// GEMM (cuBLASLt's BGRADB epilogue writes its sums; gradients accumulate over micro-steps)
__global__ void bias_sums_add_kernel(float* dbias, const float* sums, int OC) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < OC) { dbias[i] += sums[i]; }
}

// The parameter side of a linear layer's backward: dweight (OC, C) += dout^T @ inp (fp32), dbias +=
// column sums of dout. The GEMM reads all of dout (its B, k = the N rows), so its BGRADB epilogue sums
// the columns on the way, in fp32 into g_bias_sums, and a 4 * OC-byte add follows: dout is not read a
// second time. --bias_fusion 0, or no cuBLASLt algorithm with that epilogue: bias_backward_kernel
// reads dout again after the plain GEMM.
static void matmul_backward_params(float* dweight, float* dbias, const floatX* dout, const floatX* inp, int N, int C, int OC) {
    const LtMatmul dw = lt_scaled(lt_matmul(0, 1, C, OC, N), 1.0f, 1.0f); // (C, OC) column-major, added to dweight
    if (dbias != NULL && g_bias_fusion && g_bias_sums != NULL) {
        reduce_scratch_check(OC, "the bias gradient's epilogue");
        if (matmul_lt(dweight, CUDA_R_32F, inp, dout, lt_epilogue(dw, LT_BGRADB, g_bias_sums, NULL))) {
            bias_sums_add_kernel<<<(OC + 255) / 256, 256>>>(dbias, g_bias_sums, OC);
            launchCheck();
            return;
        }
    }
    matmul_lt(dweight, CUDA_R_32F, inp, dout, dw);
    if (dbias != NULL) { bias_backward(dbias, dout, N, OC); }
}

// dinp (N, C) = dout (N, OC) @ weight (OC, C), added to dinp's contents when dinp_beta = 1;
// dweight (OC, C) += dout^T @ inp (fp32); dbias (OC) += column sums of dout (when not NULL)
static void matmul_backward(floatX* dinp, float* dweight, float* dbias, const floatX* dout, const floatX* inp,
                            const floatX* weight, int N, int C, int OC, float dinp_beta) {
    matmul_lt(dinp, CUBLAS_X_TYPE, weight, dout, lt_scaled(lt_matmul(0, 0, C, N, OC), 1.0f, dinp_beta));
    matmul_backward_params(dweight, dbias, dout, inp, N, C, OC);
}

// ----------------------------------------------------------------------------
// attention: the build's scheme (attention_variants.cuh), GQA-aware. Two paths, one interface:
//
// fused (BF16 builds, head sizes 64 and 128, the default there): the flash kernels below read q, k
//   and v in place and write atty (B, T, C) and each row's log-sum-exp; the backward recomputes the
//   probabilities. Activations per layer: lse (B, H, T) fp32 instead of (B, H, T, T), ln(sum) + max.
//   One kernel per direction, the one the GPU measured fastest: forward version 3, backward version
//   4 (dev/cuda/attention_forward.cu and attention_backward.cu hold every version and their timings).
// unfused (every other head size, FP32 builds, and `--attention unfused`): q is gathered to
//   (B, H, T, hd), k and v to (B, Hkv, T, hd), each stored tensor once (a role that shares another's
//   storage points at it). With g = H / Hkv, query head h = kvh*g + j reads kv head kvh, so q viewed
//   as (B, Hkv, g*T, hd) puts the g query heads of a group one after the other: strided-batched
//   matmuls over B*Hkv batches then compute, without copying k or v,
//     scores (B, Hkv, g*T, T) = scale * q k^T     -- which is also (B, H, T, T): row r has t = r % T
//     att = causal softmax (in place),  y (B, Hkv, g*T, hd) = att v,  atty = y back to (B, T, C).
// FP32 builds take the unfused path: it is the one held to 1e-4 against the float64 reference, and
// the fused kernels are bf16 tensor-core code.

typedef struct {
    int B, T, C, H, Hkv, hd;
    float scale;
    QKVLayout layout;
    int owner[3]; // which stored tensor plays role r (0 q, 1 k, 2 v): owner[r] <= r
    int fused;    // 1: flash kernels, 0: cuBLASLt path
} AttnShape;

// the flash kernels exist for head sizes 64 and 128 in BF16 builds (the rule lives in the header,
// where the memory report reads it too)
static int attention_fused_supported(int head_dim) {
    return qkv_fused_attention_available(head_dim, PRECISION_IS_BF16);
}

// the flash kernels' grids put B * H (forward, dQ) or B * Hkv (dK/dV) in their y dimension
#define FLASH_MAX_GRID_Y 65535
static int attention_fused_grid_fits(long long B, long long H) { return B * H <= FLASH_MAX_GRID_Y; }

static void attn_owners(const QKVLayout* L, int owner[3]) {
    owner[0] = 0;
    owner[1] = qkv_roles_share(L->k, L->q) ? 0 : 1;
    owner[2] = qkv_roles_share(L->v, L->q) ? 0 : (qkv_roles_share(L->v, L->k) ? 1 : 2);
}

static AttnShape attn_shape_make(const GPT2Config* c, int B, int T, int fused) {
    AttnShape s;
    s.B = B;
    s.T = T;
    s.C = c->channels;
    s.H = c->num_heads;
    s.Hkv = c->num_kv_heads;
    s.hd = qkv_head_dim(c);
    s.scale = gpt2_attn_scale(c);
    s.layout = qkv_layout(c);
    attn_owners(&s.layout, s.owner);
    s.fused = fused && attention_fused_supported(s.hd);
    return s;
}

// What the forward pass keeps for the backward pass, one layer (buffers of the other path are NULL).
typedef struct {
    floatX* perm[3]; // unfused: q (B, H, T, hd), k and v (B, Hkv, T, hd); only perm[r] with owner[r] == r
    floatX* att;     // unfused: (B, H, T, T) probabilities
    floatX* yperm;   // unfused scratch: (B, H, T, hd)
    float* lse;      // fused: (B, H, T) natural-log log-sum-exp of each query row's scaled scores
} AttnBuffers;

// Scratch of the backward pass, one layer.
typedef struct {
    floatX* dperm[3]; // unfused: like perm
    floatX* datt;     // unfused: (B, H, T, T)
    floatX* dyperm;   // unfused: (B, H, T, hd)
    float* delta;     // fused: (B, H, T) rowsum(datty * atty) per head
} AttnGradBuffers;

// ----------------------------------------------------------------------------
// attention: the flash kernels (BF16 builds, head sizes 64 and 128)
//
// FlashAttention-2's loop order: a CTA per (query tile, batch x head) for the forward pass and for
// dQ, a CTA per (key tile, batch x kv head) for dK/dV. Nothing of size T x T exists: the forward
// keeps each row's log-sum-exp, the backward recomputes the probabilities from it. Names are FA2's:
// kBlockM query rows and kBlockN keys per tile (the paper's Br, Bc), row_max/row_sum (m_i, l_i),
// acc_o/acc_dk/acc_dv/acc_dq the fp32 accumulators. The CPU twin dev/cpu/attention_tiled_cpu.h
// runs the same tile loops and formulas in plain C++ (make test checks it on every fixture).
//
// q, k, v are read in place (QKVView, attention_variants.cuh: pointer and row stride into the
// projection output, x or the residual query); query head h reads kv head h / (H / Hkv). When k and v are one tensor
// (kv_shared, qkv_shared: the same pointer) one shared-memory tile serves as both.
//
// Every matmul is mma.sync m16n8k16, bf16 inputs and fp32 accumulation. Each warp owns 16 rows of
// a tile (query rows, or keys in dK/dV). Fragments per lane (PTX ISA; group = lane / 4,
// quad = lane % 4), two bf16 per 32-bit register, the lower index in the low half:
//   A (16 x 16, row major): a[0] (group, 2quad..+1)  a[1] (group+8, 2quad..+1)
//                           a[2] (group, 2quad+8..+9) a[3] (group+8, 2quad+8..+9)
//   B (16 x 8, k x n):      b[0] (k 2quad..+1, n group)  b[1] (k 2quad+8..+9, n group)
//   C (16 x 8, fp32):       c[0], c[1] (group, 2quad..+1)  c[2], c[3] (group+8, 2quad..+1)
// so the accumulators of two neighbouring 8-column tiles are, rounded to bf16, the A fragment of
// one 16-deep step: P and dS go from one matmul into the next without touching shared memory.

// the kernels' versions in the labs' numbering (dev/cuda/attention_forward.cu, attention_backward.cu),
// which the profile's cost model and the run's header name
#define FLASH_FORWARD_VERSION 3
#define FLASH_BACKWARD_VERSION 4

#define FLASH_SMEM_PAD 8   // bf16 per smem row beyond the head: rows 16 bytes apart mod 128, so the
                           // 8 rows one fragment load touches fall in different banks
#define FLASH_LOG2E 1.4426950408889634f
#define FLASH_LN2 0.6931471805599453f

// one role's rows (qkv_role_view): element (b, t, head h, dim d) at ptr[(b * T + t) * stride + h * hd + d]
typedef QKVView<const floatX> AttnRows;
// where a role's gradient goes (qkv_role_view of the gradient tensors), and whether the kernel adds
// to what the destination holds (qkv_fused_grad_plan) or overwrites it
typedef struct { QKVView<floatX> rows; int accumulate; } AttnGradDest;

#if PRECISION_IS_BF16
// c (16 x 8) += a (16 x 16) b (16 x 8)
__device__ __forceinline__ void mma_16816(float c[4], const uint32_t a[4], const uint32_t b[2]) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return (uint32_t)__bfloat16_as_ushort(v.x) | ((uint32_t)__bfloat16_as_ushort(v.y) << 16);
}

// the A fragment of k step kk from the fp32 accumulators of 8-column tiles 2kk and 2kk+1, in bf16
template <int kTiles>
__device__ __forceinline__ void frag_a_from_acc(uint32_t a[4], const float (&acc)[kTiles][4], int kk) {
    a[0] = pack_bf16x2(acc[2 * kk][0], acc[2 * kk][1]);
    a[1] = pack_bf16x2(acc[2 * kk][2], acc[2 * kk][3]);
    a[2] = pack_bf16x2(acc[2 * kk + 1][0], acc[2 * kk + 1][1]);
    a[3] = pack_bf16x2(acc[2 * kk + 1][2], acc[2 * kk + 1][3]);
}

// p[0..1] = (a, b), or += when accumulate; p is 4-byte aligned (even column, even row stride)
__device__ __forceinline__ void flash_store_pair(floatX* p, float a, float b, int accumulate) {
    __nv_bfloat162* p2 = reinterpret_cast<__nv_bfloat162*>(p);
    if (accumulate) {
        const __nv_bfloat162 old = *p2;
        a += __bfloat162float(old.x);
        b += __bfloat162float(old.y);
    }
    *p2 = __floats2bfloat162_rn(a, b);
}

// A forward's epilogue, every version: the quad's row_sum summed, then this thread's rows row0 and
// row0 + 8 of O = acc_o / row_sum (B, T, H * kHeadDim) and lse = ln(row_sum) + row_max / log2(e) (B, H, T)
template <int kHeadDim>
__device__ __forceinline__ void flash_store_o_lse(floatX* out, float* lse, const float (&acc_o)[kHeadDim / 8][4],
                                                  const float row_max[2], float row_sum[2], int b, int h, int H,
                                                  int T, int row0, int quad) {
    #pragma unroll
    for (int r = 0; r < 2; r++) {
        row_sum[r] += __shfl_xor_sync(0xFFFFFFFFu, row_sum[r], 1);
        row_sum[r] += __shfl_xor_sync(0xFFFFFFFFu, row_sum[r], 2);
        const int t = row0 + 8 * r;
        if (t >= T) { continue; }
        const float inv = 1.0f / row_sum[r];
        floatX* o = out + ((size_t)b * T + t) * ((size_t)H * kHeadDim) + (size_t)h * kHeadDim + 2 * quad;
        #pragma unroll
        for (int dj = 0; dj < kHeadDim / 8; dj++) { flash_store_pair(o + dj * 8, acc_o[dj][2 * r] * inv, acc_o[dj][2 * r + 1] * inv, 0); }
        if (quad == 0) { lse[((size_t)b * H + h) * T + t] = (row_max[r] + log2f(row_sum[r])) * FLASH_LN2; }
    }
}

// A backward's dK/dV epilogue, every version: this thread's keys key0 and key0 + 8 of kv head kvh,
// dK = scale * acc_dk and dV = acc_dv; a shared k = v tensor gets dK + dV in one write
template <int kHeadDim>
__device__ __forceinline__ void flash_store_dkdv(AttnGradDest dk, AttnGradDest dv, const float (&acc_dk)[kHeadDim / 8][4],
                                                 const float (&acc_dv)[kHeadDim / 8][4], int b, int kvh, int T, int key0,
                                                 int quad, float scale, bool kv_same) {
    #pragma unroll
    for (int r = 0; r < 2; r++) {
        const int key = key0 + 8 * r;
        if (key >= T) { continue; }
        floatX* pk = dk.rows.ptr + ((size_t)b * T + key) * dk.rows.stride + (size_t)kvh * kHeadDim + 2 * quad;
        floatX* pv = dv.rows.ptr + ((size_t)b * T + key) * dv.rows.stride + (size_t)kvh * kHeadDim + 2 * quad;
        #pragma unroll
        for (int dj = 0; dj < kHeadDim / 8; dj++) {
            const float k0 = acc_dk[dj][2 * r] * scale, k1 = acc_dk[dj][2 * r + 1] * scale;
            const float v0 = acc_dv[dj][2 * r], v1 = acc_dv[dj][2 * r + 1];
            if (kv_same) {
                flash_store_pair(pk + dj * 8, k0 + v0, k1 + v1, dk.accumulate);
            } else {
                flash_store_pair(pk + dj * 8, k0, k1, dk.accumulate);
                flash_store_pair(pv + dj * 8, v0, v1, dv.accumulate);
            }
        }
    }
}

// The dQ kernels' epilogue (versions 2 and 4): this thread's rows row0 and row0 + 8 of head h,
// dQ = scale * acc_dq, added to what is there where q shares k's storage (dq.accumulate)
template <int kHeadDim>
__device__ __forceinline__ void flash_store_dq(AttnGradDest dq, const float (&acc_dq)[kHeadDim / 8][4], int b, int h,
                                               int T, int row0, int quad, float scale) {
    #pragma unroll
    for (int r = 0; r < 2; r++) {
        const int t = row0 + 8 * r;
        if (t >= T) { continue; }
        floatX* p = dq.rows.ptr + ((size_t)b * T + t) * dq.rows.stride + (size_t)h * kHeadDim + 2 * quad;
        #pragma unroll
        for (int dj = 0; dj < kHeadDim / 8; dj++) {
            flash_store_pair(p + dj * 8, acc_dq[dj][2 * r] * scale, acc_dq[dj][2 * r + 1] * scale, dq.accumulate);
        }
    }
}

// More than 48 KiB of dynamic shared memory is opt-in, per kernel: each launcher opts its kernel in
// once, at its first launch (*opted_in: the launcher's own static flag, one per instantiation)
template <typename Kernel>
static void flash_smem_opt_in(Kernel kernel, size_t smem, bool* opted_in) {
    if (!*opted_in) {
        cudaCheck(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        *opted_in = true;
    }
}

// The kernels load 16-byte chunks of every row: views must start 16-byte aligned with row strides a
// multiple of 8 elements. Always so in the trainer (buffers 256-byte aligned, offsets and strides
// multiples of the head size); a lab or test that breaks it stops here with the view named.
static void flash_check_rows(const void* ptr, int stride, const char* what) {
    if (((uintptr_t)ptr % 16) != 0 || stride % 8 != 0) {
        fprintf(stderr, "error: flash attention: %s view at %p with row stride %d is not 16-byte aligned "
                "(HINT: use --attention unfused)\n", what, ptr, stride);
        exit(EXIT_FAILURE);
    }
}

// ----------------------------------------------------------------------------
// flash attention version 3: the forward (dev/cuda/attention_forward.cu v3)
//
// What changes from version 2, and why:
//   - 128 query rows per CTA (8 warps x 16): each K/V tile in shared memory serves twice the rows, so
//     a query row costs half the K/V tile loads (global and shared memory) of version 2.
//   - Q's fragments stay in registers for the whole key loop: version 2 reloads them from shared
//     memory for every key tile.
//   - ldmatrix: one instruction gives a lane 4 registers of an mma operand (8 x 8 bf16 matrices, 16
//     bytes a row) where version 2 issues 4-8 scalar shared loads, and .trans reads V's column pairs
//     (the B operand of P V) straight from V's row-major tile.
//   - cp.async double buffering: the next K/V tile streams into the other buffer while this one is
//     computed, and the copies need no registers.
//   - the grid is (B * H, query tiles): consecutive CTAs are the heads of one batch row, so the g query
//     heads of a GQA group (h = kvh * g + j) run side by side and read their kv head's tiles from L2.
// Shared rows keep version 2's pad (hd + 8 bf16: 144 or 272 bytes, 4 banks past a multiple of 128
// bytes), so the 8 rows that one phase of an ldmatrix reads (16 bytes each) start 4 banks apart and
// cover the 32 banks once: no conflicts. cp.async writes 16-byte chunks, 8 per 128 contiguous bytes.

#define FLASH3_BLOCK_M 128 // query rows per CTA
#define FLASH3_BLOCK_N 64  // keys per tile
#define FLASH3_WARPS 8     // 8 warps x 16 rows
#define FLASH3_THREADS (FLASH3_WARPS * 32)
static_assert(FLASH3_BLOCK_M == FLASH3_WARPS * 16, "each warp owns 16 query rows");

// a shared-memory pointer as the 32-bit address that ldmatrix and cp.async take
__device__ __forceinline__ uint32_t smem_u32(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

// 16 bytes global -> shared (at a 32-bit shared address) without registers; src_bytes 0 zero-fills
// the destination (rows >= T)
__device__ __forceinline__ void cp_async_16(uint32_t smem, const void* gmem, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(smem), "l"(gmem), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// every committed group of this thread but the newest kPending has landed
template <int kPending>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" :: "n"(kPending) : "memory"); }

// four 8 x 8 bf16 matrices; this lane gives the 32-bit shared address of row lane % 8 of matrix
// lane / 8 (32-bit addresses rather than pointers: half the registers, and constant offsets fold into
// the instruction)
__device__ __forceinline__ void ldmatrix_x4(uint32_t r[4], uint32_t row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(row));
}
// the same, each matrix transposed: register j holds a column pair of matrix j
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t r[4], uint32_t row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(row));
}

// sTile (kRows, kHeadDim), row stride kHeadDim + FLASH_SMEM_PAD  <-  rows row0.. of one head (as
// flash_load_tile), by cp.async; rows >= T are zero-filled (their source address stays in bounds)
template <int kRows, int kHeadDim, int kThreads>
__device__ __forceinline__ void flash_cp_async_tile(uint32_t sTile, const floatX* g, int stride, int row0, int T) {
    constexpr int kChunks = kHeadDim / 8, kRowsPerPass = kThreads / kChunks;
    static_assert(kThreads % kChunks == 0 && kRows % kRowsPerPass == 0, "whole rows per pass of the block");
    const int c = (threadIdx.x % kChunks) * 8; // this thread's 16-byte chunk of every row it copies
    #pragma unroll
    for (int r = threadIdx.x / kChunks; r < kRows; r += kRowsPerPass) {
        const int t = row0 + r;
        cp_async_16(sTile + (uint32_t)(r * (kHeadDim + FLASH_SMEM_PAD) + c) * sizeof(floatX),
                    g + (size_t)min(t, T - 1) * stride + c, t < T ? 16 : 0);
    }
}

// Forward, version 3. Grid (B * H, ceil(T / 128)), FLASH3_THREADS threads, dynamic smem: Q (128 rows)
// and two stages of K and V (64 rows each; V's unused when v is k). Same arguments and outputs as
// flash_attention_forward_kernel:
//   out (B, T, H * kHeadDim), lse (B, H, T) natural-log log-sum-exp of each row's scaled scores;
//   q (B, T, H heads) view, k and v (B, T, Hkv heads) views; scale_log2 = scale * log2(e)
template <int kHeadDim>
__global__ void __launch_bounds__(FLASH3_THREADS, kHeadDim == 64 ? 2 : 1)
flash3_attention_forward_kernel(floatX* out, float* lse, AttnRows q, AttnRows k, AttnRows v, int T, int H, int Hkv,
                                float scale_log2) {
    constexpr int kStride = kHeadDim + FLASH_SMEM_PAD;
    constexpr int kTilesN = FLASH3_BLOCK_N / 8, kTilesD = kHeadDim / 8, kStepsD = kHeadDim / 16;
    constexpr uint32_t kRowBytes = kStride * sizeof(floatX), kTileBytes = FLASH3_BLOCK_N * kRowBytes;
    extern __shared__ __align__(16) unsigned char flash_smem[];
    // shared memory as 32-bit addresses: Q (128 rows), then stage s's K at sKV + 2s tiles, V one tile after
    const uint32_t sQ = smem_u32(flash_smem);
    const uint32_t sKV = sQ + FLASH3_BLOCK_M * kRowBytes;
    const bool kv_same = k.ptr == v.ptr;
    const int m_block = gridDim.y - 1 - blockIdx.y; // the longest rows (most key tiles) start first
    const int b = blockIdx.x / H, h = blockIdx.x % H, kvh = h / (H / Hkv);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, group = lane / 4, quad = lane % 4;
    const floatX* gQ = q.ptr + (size_t)b * T * q.stride + (size_t)h * kHeadDim;
    const floatX* gK = k.ptr + (size_t)b * T * k.stride + (size_t)kvh * kHeadDim;
    const floatX* gV = v.ptr + (size_t)b * T * v.stride + (size_t)kvh * kHeadDim;
    const int warp_row0 = m_block * FLASH3_BLOCK_M + warp * 16;
    const int row0 = warp_row0 + group; // query of c[0..1]; c[2..3] is row0 + 8
    // key tiles up to the CTA's last row (causal) and T
    const int n_last = (min(m_block * FLASH3_BLOCK_M + FLASH3_BLOCK_M, T) - 1) / FLASH3_BLOCK_N;
    // ldmatrix rows: lane / 8 picks the matrix, lane % 8 its row. This lane's byte offset into a tile
    // for K's B fragments, matrices (keys 0-7, dims 0-7), (keys 0-7, dims 8-15), (keys 8-15, dims 0-7),
    // (keys 8-15, dims 8-15); for Q's A fragments and V's (transposed) B fragments, matrices (rows 0-7,
    // cols 0-7), (rows 8-15, cols 0-7), (rows 0-7, cols 8-15), (rows 8-15, cols 8-15)
    const int lm_row = lane % 8, lm_mat = lane / 8;
    const uint32_t lane_nk = (lm_row + 8 * (lm_mat >> 1)) * kRowBytes + 8 * (lm_mat & 1) * sizeof(floatX);
    const uint32_t lane_kn = (lm_row + 8 * (lm_mat & 1)) * kRowBytes + 8 * (lm_mat >> 1) * sizeof(floatX);

    auto load_kv = [&](int n_block, int stage) {
        const uint32_t sK = sKV + 2 * stage * kTileBytes;
        flash_cp_async_tile<FLASH3_BLOCK_N, kHeadDim, FLASH3_THREADS>(sK, gK, k.stride, n_block * FLASH3_BLOCK_N, T);
        if (!kv_same) { flash_cp_async_tile<FLASH3_BLOCK_N, kHeadDim, FLASH3_THREADS>(sK + kTileBytes, gV, v.stride, n_block * FLASH3_BLOCK_N, T); }
        cp_async_commit();
    };
    flash_cp_async_tile<FLASH3_BLOCK_M, kHeadDim, FLASH3_THREADS>(sQ, gQ, q.stride, m_block * FLASH3_BLOCK_M, T);
    cp_async_commit();
    load_kv(0, 0);
    cp_async_wait<1>(); // Q has landed (K/V tile 0 may still be in flight)
    __syncthreads();    // ... every thread's share of it
    // this warp's 16 rows of Q as A fragments (a[0..3] = the 4 matrices), one per 16-wide step over the head
    uint32_t q_frag[kStepsD][4];
    #pragma unroll
    for (int kk = 0; kk < kStepsD; kk++) { ldmatrix_x4(q_frag[kk], sQ + warp * 16 * kRowBytes + lane_kn + kk * 32); }

    float acc_o[kTilesD][4]; // (16, kHeadDim) per warp: this warp's rows of O before the division by row_sum
    #pragma unroll
    for (int dj = 0; dj < kTilesD; dj++) { acc_o[dj][0] = acc_o[dj][1] = acc_o[dj][2] = acc_o[dj][3] = 0.0f; }
    float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.0f, 0.0f}; // per thread: rows row0, row0 + 8

    for (int n_block = 0; n_block <= n_last; n_block++) {
        const int stage = n_block & 1;
        if (n_block < n_last) { // the next tile streams in while this one is computed
            load_kv(n_block + 1, stage ^ 1);
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads(); // tile n_block is complete: every thread's copies have landed
        const uint32_t sK = sKV + 2 * stage * kTileBytes;
        const uint32_t sV = kv_same ? sK : sK + kTileBytes;
        const int key0 = n_block * FLASH3_BLOCK_N;
        if (key0 <= warp_row0 + 15) { // else every key of the tile is after this warp's rows: nothing to add
            // S = Q K^T: B fragments of two 8-key tiles per ldmatrix
            float s[kTilesN][4]; // (16, 64) per warp: S, then P
            #pragma unroll
            for (int j = 0; j < kTilesN; j++) { s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f; }
            #pragma unroll
            for (int kk = 0; kk < kStepsD; kk++) {
                #pragma unroll
                for (int j = 0; j < kTilesN; j += 2) {
                    uint32_t kb[4];
                    ldmatrix_x4(kb, sK + j * 8 * kRowBytes + lane_nk + kk * 32);
                    mma_16816(s[j], q_frag[kk], kb);
                    mma_16816(s[j + 1], q_frag[kk], kb + 2);
                }
            }
            // scale to base 2; -inf where key > query (causal: only tiles that reach past the warp's
            // first row) or key >= T
            const bool masked = key0 + FLASH3_BLOCK_N - 1 > warp_row0 || key0 + FLASH3_BLOCK_N > T;
            #pragma unroll
            for (int j = 0; j < kTilesN; j++) {
                #pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int key = key0 + j * 8 + 2 * quad + (e & 1);
                    const int query = row0 + (e >= 2 ? 8 : 0);
                    s[j][e] = (masked && (key > query || key >= T)) ? -INFINITY : s[j][e] * scale_log2;
                }
            }
            // online softmax, as version 2
            #pragma unroll
            for (int r = 0; r < 2; r++) {
                float m_new = row_max[r];
                #pragma unroll
                for (int j = 0; j < kTilesN; j++) { m_new = fmaxf(m_new, fmaxf(s[j][2 * r], s[j][2 * r + 1])); }
                m_new = fmaxf(m_new, __shfl_xor_sync(0xFFFFFFFFu, m_new, 1));
                m_new = fmaxf(m_new, __shfl_xor_sync(0xFFFFFFFFu, m_new, 2));
                const float m_use = m_new == -INFINITY ? 0.0f : m_new;
                const float corr = exp2f(row_max[r] - m_use);
                row_max[r] = m_new;
                float sum = 0.0f;
                #pragma unroll
                for (int j = 0; j < kTilesN; j++) {
                    s[j][2 * r] = exp2f(s[j][2 * r] - m_use);
                    s[j][2 * r + 1] = exp2f(s[j][2 * r + 1] - m_use);
                    sum += s[j][2 * r] + s[j][2 * r + 1];
                }
                row_sum[r] = row_sum[r] * corr + sum;
                #pragma unroll
                for (int dj = 0; dj < kTilesD; dj++) { acc_o[dj][2 * r] *= corr; acc_o[dj][2 * r + 1] *= corr; }
            }
            // acc_o += P V: V's B fragments by ldmatrix.trans, two 8-dim tiles per instruction
            #pragma unroll
            for (int kk = 0; kk < FLASH3_BLOCK_N / 16; kk++) {
                uint32_t a[4];
                frag_a_from_acc<kTilesN>(a, s, kk);
                #pragma unroll
                for (int dj = 0; dj < kTilesD; dj += 2) {
                    uint32_t vb[4];
                    ldmatrix_x4_trans(vb, sV + kk * 16 * kRowBytes + lane_kn + dj * 16);
                    mma_16816(acc_o[dj], a, vb);
                    mma_16816(acc_o[dj + 1], a, vb + 2);
                }
            }
        }
        __syncthreads(); // every warp is done with this stage before the next iteration's copies refill it
    }

    // epilogue, as version 2
    flash_store_o_lse<kHeadDim>(out, lse, acc_o, row_max, row_sum, b, h, H, T, row0, quad);
}

// dynamic shared memory of the version 3 forward: Q (128 rows) and two stages of K and V (64 rows)
static size_t flash3_forward_smem_bytes(int hd) {
    return (size_t)(FLASH3_BLOCK_M + 4 * FLASH3_BLOCK_N) * (hd + FLASH_SMEM_PAD) * sizeof(floatX);
}

template <int kHeadDim>
static void flash3_attention_forward_hd(floatX* out, float* lse, AttnRows q, AttnRows k, AttnRows v, int B, int T,
                                        int H, int Hkv, float scale) {
    const size_t smem = flash3_forward_smem_bytes(kHeadDim);
    static bool smem_opted_in = false;
    flash_smem_opt_in(flash3_attention_forward_kernel<kHeadDim>, smem, &smem_opted_in);
    dim3 grid(B * H, (T + FLASH3_BLOCK_M - 1) / FLASH3_BLOCK_M);
    flash3_attention_forward_kernel<kHeadDim><<<grid, FLASH3_THREADS, smem>>>(out, lse, q, k, v, T, H, Hkv, scale * FLASH_LOG2E);
    launchCheck();
}

// delta (B, H, T) = rowsum(dout * out) per head, the softmax backward's correction term D, the flash
// backward's first kernel. A row (b, t, h) is hd / 8 lanes, each with one x128 of dout and of out: rows
// follow (b, t, h) with h fastest, so a warp reads 512 contiguous bytes of each tensor per load (4 rows
// at hd 64, 2 at 128); each lane sums its 8 products, then the row's lanes add theirs by xor shuffles,
// a fixed tree (the attention backward lab keeps the warp-per-row kernel it replaced, and its times).
// dout and out (B, T, H * hd); hd / 8 a power of two <= 32.
__global__ void flash_attention_delta_kernel(float* delta, const floatX* dout, const floatX* out, int B, int T, int H, int hd) {
    const int lanes = hd / x128::size; // per row
    const size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const size_t row = idx / lanes, rows = (size_t)B * T * H; // (b, t, h) flattened, h fastest
    const int part = (int)(idx % lanes);
    float sum = 0.0f;
    if (row < rows) {
        const size_t at = row * hd + (size_t)part * x128::size; // (B, T, H * hd) is (rows, hd)
        const x128 d = load128(dout + at), o = load128cs(out + at); // dout is read again by dK/dV and dQ
        for (int k = 0; k < x128::size; k++) { sum += x2f(d[k]) * x2f(o[k]); }
    }
    for (int offset = lanes / 2; offset > 0; offset /= 2) { sum += __shfl_xor_sync(0xffffffffu, sum, offset); }
    if (row < rows && part == 0) {
        const int h = (int)(row % H), t = (int)((row / H) % T), b = (int)(row / ((size_t)H * T));
        delta[((size_t)b * H + h) * T + t] = sum;
    }
}

// delta (B, H, T) from dout and out (B, T, H * hd); hd 64 or 128 (the flash kernels' head sizes)
static void flash_attention_delta(float* delta, const floatX* dout, const floatX* out, int B, int T, int H, int hd) {
    const int lanes = hd / x128::size;
    if (hd % x128::size != 0 || lanes > 32 || (lanes & (lanes - 1)) != 0) {
        fprintf(stderr, "error: internal: flash_attention_delta at head size %d (expected 8 x a power of two, at most 256)\n", hd);
        exit(EXIT_FAILURE);
    }
    const size_t threads = (size_t)B * T * H * lanes;
    flash_attention_delta_kernel<<<(unsigned int)((threads + 255) / 256), 256>>>(delta, dout, out, B, T, H, hd);
    launchCheck();
}

// ----------------------------------------------------------------------------
// flash attention version 4: version 2's two backward kernels with version 3's machinery
// (dev/cuda/attention_backward.cu v4)
//
// Version 3's one pass (5 products, dQ summed in a fixed order across CTAs) measured slower than
// version 2's two kernels (7 products, no order to keep): its waits serialize the key CTAs. Version
// 2's kernels, though, load each tile synchronously (every warp waits on global memory at every step;
// the lab's header has the profile) and read mma operands with scalar shared loads, column pairs two
// 16-bit loads at a time. Version 4 keeps version 2's decomposition and its
// order of sums (deterministic, no atomics) and changes how the operands arrive:
//   - cp.async double buffering of what streams: Q and dO in the dK/dV kernel (lse and D through
//     registers, loaded as the tiles are issued), K and V in the dQ kernel; the next tile lands while
//     this one is computed;
//   - every mma operand by ldmatrix, .trans where the mma needs column pairs (dO and Q as B of dV and
//     dK, K as B of dQ), as version 3;
//   - the dQ kernel takes 128 query rows per CTA (8 warps, version 3's forward shape), so a K/V tile
//     serves twice the rows; the dK/dV kernel keeps 64 keys (4 warps): dK and dV, 16 keys x hd fp32
//     each per warp, already take 64 (hd 64) or 128 (hd 128) registers a thread.
// The delta kernel (D = rowsum(dO * O)) is version 2's. Shared rows keep the pad of versions 2 and 3
// (no ldmatrix bank conflicts).

#define FLASH4_BLOCK_N 64      // keys per dK/dV CTA and per dQ tile
#define FLASH4_BLOCK_M 64      // query rows per dK/dV step
#define FLASH4_DKDV_WARPS 4    // 4 warps x 16 keys
#define FLASH4_DKDV_THREADS (FLASH4_DKDV_WARPS * 32)
#define FLASH4_DQ_BLOCK_M 128  // query rows per dQ CTA
#define FLASH4_DQ_WARPS 8      // 8 warps x 16 rows
#define FLASH4_DQ_THREADS (FLASH4_DQ_WARPS * 32)
static_assert(FLASH4_BLOCK_N == FLASH4_DKDV_WARPS * 16 && FLASH4_DQ_BLOCK_M == FLASH4_DQ_WARPS * 16,
              "each warp owns 16 keys (dK/dV) or 16 query rows (dQ)");
static_assert(FLASH4_BLOCK_M == FLASH4_BLOCK_N, "the dK/dV kernel's diagonal step: query tile n_block of key tile n_block");
static_assert(FLASH4_DKDV_THREADS >= FLASH4_BLOCK_M, "the dK/dV kernel's lse and D: one row per thread");

// dynamic smem of the dK/dV kernel: K and V (64 rows), two stages of Q and dO (64 rows each), and
// two stages of lse and D (64 floats each)
static size_t flash4_dkdv_smem_bytes(int hd) {
    return (size_t)(2 * FLASH4_BLOCK_N + 4 * FLASH4_BLOCK_M) * (hd + FLASH_SMEM_PAD) * sizeof(floatX) +
           4 * FLASH4_BLOCK_M * sizeof(float);
}
// dynamic smem of the dQ kernel: Q and dO (128 rows each), two stages of K and V (64 rows each)
static size_t flash4_dq_smem_bytes(int hd) {
    return (size_t)(2 * FLASH4_DQ_BLOCK_M + 4 * FLASH4_BLOCK_N) * (hd + FLASH_SMEM_PAD) * sizeof(floatX);
}

// version 4's two products, as version 2's flash_scores and flash_acc_pv with every operand by
// ldmatrix (tiles at 32-bit shared addresses, rows of kHeadDim + FLASH_SMEM_PAD; lane_kn and lane_nk
// as the version 3 forward's)
// c (16, kN) = A B^T: A this warp's 16 rows of a (rows, kHeadDim) tile at sAw, B a (kN, kHeadDim) tile at sB
template <int kHeadDim, int kN>
__device__ __forceinline__ void flash4_scores(float (&c)[kN / 8][4], uint32_t sAw, uint32_t sB, uint32_t lane_kn,
                                              uint32_t lane_nk) {
    constexpr uint32_t kRowBytes = (kHeadDim + FLASH_SMEM_PAD) * sizeof(floatX);
    #pragma unroll
    for (int j = 0; j < kN / 8; j++) { c[j][0] = c[j][1] = c[j][2] = c[j][3] = 0.0f; }
    #pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; kk++) {
        uint32_t a[4];
        ldmatrix_x4(a, sAw + lane_kn + kk * 32);
        #pragma unroll
        for (int j = 0; j < kN / 8; j += 2) { // B fragments of two 8-row tiles per ldmatrix
            uint32_t b[4];
            ldmatrix_x4(b, sB + j * 8 * kRowBytes + lane_nk + kk * 32);
            mma_16816(c[j], a, b);
            mma_16816(c[j + 1], a, b + 2);
        }
    }
}
// acc (16, kHeadDim) += P B: P (16, kK) from fp32 accumulators, B a (kK, kHeadDim) tile at sB, its
// column pairs by ldmatrix.trans (two 8-column tiles per instruction)
template <int kHeadDim, int kK>
__device__ __forceinline__ void flash4_acc_pv(float (&acc)[kHeadDim / 8][4], const float (&p)[kK / 8][4], uint32_t sB,
                                              uint32_t lane_kn) {
    constexpr uint32_t kRowBytes = (kHeadDim + FLASH_SMEM_PAD) * sizeof(floatX);
    #pragma unroll
    for (int kk = 0; kk < kK / 16; kk++) {
        uint32_t a[4];
        frag_a_from_acc<kK / 8>(a, p, kk);
        #pragma unroll
        for (int dj = 0; dj < kHeadDim / 8; dj += 2) {
            uint32_t b[4];
            ldmatrix_x4_trans(b, sB + kk * 16 * kRowBytes + lane_kn + dj * 16);
            mma_16816(acc[dj], a, b);
            mma_16816(acc[dj + 1], a, b + 2);
        }
    }
}

// dK, dV, version 4. Grid (ceil(T / 64), B * Hkv), FLASH4_DKDV_THREADS threads. A CTA owns 64 keys of one
// kv head (K and V resident) and walks, as version 2, the g query heads of its group and their query
// tiles from the diagonal on, one step per (head, query tile), the next step's Q, dO, lse and D
// streaming into the other stage. Each warp owns 16 keys and works transposed (keys as rows). Same
// arguments and outputs as flash_attention_backward_dkdv_kernel.
template <int kHeadDim>
__global__ void __launch_bounds__(FLASH4_DKDV_THREADS)
flash4_attention_backward_dkdv_kernel(AttnGradDest dk, AttnGradDest dv, const floatX* dout, const float* lse,
                                      const float* delta, AttnRows q, AttnRows k, AttnRows v, int T, int H, int Hkv,
                                      float scale, float scale_log2) {
    constexpr int kStride = kHeadDim + FLASH_SMEM_PAD;
    constexpr int kTilesM = FLASH4_BLOCK_M / 8, kTilesD = kHeadDim / 8;
    constexpr uint32_t kRowBytes = kStride * sizeof(floatX);
    constexpr uint32_t kKeyTileBytes = FLASH4_BLOCK_N * kRowBytes, kQueryTileBytes = FLASH4_BLOCK_M * kRowBytes;
    extern __shared__ __align__(16) unsigned char flash_smem[];
    // K, V; stage s's Q at sQdO + 2s query tiles, its dO one tile after; then the floats: stage s's
    // lse (base 2) at s_stats + 2s * 64, its D 64 floats after
    const uint32_t sK = smem_u32(flash_smem);
    const bool kv_same = k.ptr == v.ptr;
    const uint32_t sV = kv_same ? sK : sK + kKeyTileBytes;
    const uint32_t sQdO = sK + 2 * kKeyTileBytes;
    float* s_stats = reinterpret_cast<float*>(flash_smem + 2 * kKeyTileBytes + 4 * kQueryTileBytes);
    const int n_block = blockIdx.x;
    const int b = blockIdx.y / Hkv, kvh = blockIdx.y % Hkv, g = H / Hkv;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, group = lane / 4, quad = lane % 4;
    const int C = H * kHeadDim;
    const int key0 = n_block * FLASH4_BLOCK_N + warp * 16 + group; // key of c[0..1]; c[2..3] is key0 + 8
    const int per_head = (T + FLASH4_BLOCK_M - 1) / FLASH4_BLOCK_M - n_block; // query tiles from the diagonal on
    const int steps = g * per_head;
    // ldmatrix rows, as the version 3 forward: lane_nk for B operands stored (n, k), lane_kn for A
    // operands and for B operands stored (k, n) read with .trans
    const int lm_row = lane % 8, lm_mat = lane / 8;
    const uint32_t lane_nk = (lm_row + 8 * (lm_mat >> 1)) * kRowBytes + 8 * (lm_mat & 1) * sizeof(floatX);
    const uint32_t lane_kn = (lm_row + 8 * (lm_mat & 1)) * kRowBytes + 8 * (lm_mat >> 1) * sizeof(floatX);
    const uint32_t sKw = sK + warp * 16 * kRowBytes, sVw = sV + warp * 16 * kRowBytes; // this warp's 16 keys

    // step -> (query head h = kvh * g + step / per_head, query tile n_block + step % per_head)
    auto load_step = [&](int step, int stage) { // the step's Q and dO tiles, one cp.async group
        const int h = kvh * g + step / per_head, m_block = n_block + step % per_head;
        const uint32_t sQ = sQdO + 2 * stage * kQueryTileBytes;
        flash_cp_async_tile<FLASH4_BLOCK_M, kHeadDim, FLASH4_DKDV_THREADS>(
            sQ, q.ptr + (size_t)b * T * q.stride + (size_t)h * kHeadDim, q.stride, m_block * FLASH4_BLOCK_M, T);
        flash_cp_async_tile<FLASH4_BLOCK_M, kHeadDim, FLASH4_DKDV_THREADS>(
            sQ + kQueryTileBytes, dout + (size_t)b * T * C + (size_t)h * kHeadDim, C, m_block * FLASH4_BLOCK_M, T);
        cp_async_commit();
    };
    // the step's lse (base 2) and D, row threadIdx.x: loaded into registers when the step's tiles are
    // issued, stored to its stage only at the end of the step before (the barrier there publishes
    // them), so that no thread waits on these loads before computing
    float row_lse = 0.0f, row_delta = 0.0f;
    auto load_stats = [&](int step) {
        const int h = kvh * g + step / per_head, t = (n_block + step % per_head) * FLASH4_BLOCK_M + threadIdx.x;
        if (threadIdx.x < FLASH4_BLOCK_M && t < T) {
            row_lse = lse[((size_t)b * H + h) * T + t] * FLASH_LOG2E;
            row_delta = delta[((size_t)b * H + h) * T + t];
        } else {
            row_lse = row_delta = 0.0f;
        }
    };
    auto store_stats = [&](int stage) {
        if (threadIdx.x < FLASH4_BLOCK_M) {
            s_stats[2 * stage * FLASH4_BLOCK_M + threadIdx.x] = row_lse;
            s_stats[(2 * stage + 1) * FLASH4_BLOCK_M + threadIdx.x] = row_delta;
        }
    };
    flash_cp_async_tile<FLASH4_BLOCK_N, kHeadDim, FLASH4_DKDV_THREADS>(
        sK, k.ptr + (size_t)b * T * k.stride + (size_t)kvh * kHeadDim, k.stride, n_block * FLASH4_BLOCK_N, T);
    if (!kv_same) {
        flash_cp_async_tile<FLASH4_BLOCK_N, kHeadDim, FLASH4_DKDV_THREADS>(
            sV, v.ptr + (size_t)b * T * v.stride + (size_t)kvh * kHeadDim, v.stride, n_block * FLASH4_BLOCK_N, T);
    }
    cp_async_commit();
    load_step(0, 0);
    load_stats(0);
    store_stats(0);

    float acc_dk[kTilesD][4], acc_dv[kTilesD][4]; // (16 keys, kHeadDim) per warp each
    #pragma unroll
    for (int dj = 0; dj < kTilesD; dj++) {
        #pragma unroll
        for (int e = 0; e < 4; e++) { acc_dk[dj][e] = 0.0f; acc_dv[dj][e] = 0.0f; }
    }

    for (int step = 0; step < steps; step++) {
        const int stage = step & 1;
        if (step + 1 < steps) { // the next step's tiles (and its lse, D) stream in while this one is computed
            load_step(step + 1, stage ^ 1);
            load_stats(step + 1);
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads(); // this step's tiles (and, at step 0, K and V) are complete: every thread's copies landed
        const int m_block = n_block + step % per_head;
        const uint32_t sQ = sQdO + 2 * stage * kQueryTileBytes, sdO = sQ + kQueryTileBytes;
        const float* s_lse = s_stats + 2 * stage * FLASH4_BLOCK_M;
        const float* s_delta = s_lse + FLASH4_BLOCK_M;

        // S^T = K_w Q^T
        float pt[kTilesM][4]; // (16 keys, 64 queries) per warp: S^T, then P^T
        flash4_scores<kHeadDim, FLASH4_BLOCK_M>(pt, sKw, sQ, lane_kn, lane_nk);
        // P^T = 2^(scale * S^T - lse), 0 where query < key (only the diagonal tile) or query >= T (the last)
        const bool masked = m_block == n_block || (m_block + 1) * FLASH4_BLOCK_M > T;
        #pragma unroll
        for (int i = 0; i < kTilesM; i++) {
            #pragma unroll
            for (int e = 0; e < 4; e++) {
                const int col = i * 8 + 2 * quad + (e & 1);
                const int query = m_block * FLASH4_BLOCK_M + col;
                const int key = key0 + (e >= 2 ? 8 : 0);
                pt[i][e] = (masked && (query < key || query >= T)) ? 0.0f : exp2f(pt[i][e] * scale_log2 - s_lse[col]);
            }
        }
        // acc_dv += P^T dO
        flash4_acc_pv<kHeadDim, FLASH4_BLOCK_M>(acc_dv, pt, sdO, lane_kn);
        // dP^T = V_w dO^T, then dS^T = P^T * (dP^T - D)
        float dst[kTilesM][4]; // (16 keys, 64 queries) per warp: dP^T, then dS^T
        flash4_scores<kHeadDim, FLASH4_BLOCK_M>(dst, sVw, sdO, lane_kn, lane_nk);
        #pragma unroll
        for (int i = 0; i < kTilesM; i++) {
            #pragma unroll
            for (int e = 0; e < 4; e++) { dst[i][e] = pt[i][e] * (dst[i][e] - s_delta[i * 8 + 2 * quad + (e & 1)]); }
        }
        // acc_dk += dS^T Q (the scale is applied once, in the epilogue)
        flash4_acc_pv<kHeadDim, FLASH4_BLOCK_M>(acc_dk, dst, sQ, lane_kn);
        // the next step's lse and D into the other stage (read last in the step before this one)
        if (step + 1 < steps) { store_stats(stage ^ 1); }
        __syncthreads(); // every warp is done with this stage before step + 2's copies refill it
    }

    // epilogue, as version 2: dK = scale * acc_dk; a shared k = v tensor gets dK + dV in one write
    flash_store_dkdv<kHeadDim>(dk, dv, acc_dk, acc_dv, b, kvh, T, key0, quad, scale, kv_same);
}

template <int kHeadDim>
static void flash4_attention_backward_dkdv(AttnGradDest dk, AttnGradDest dv, const floatX* dout, const float* lse,
                                           const float* delta, AttnRows q, AttnRows k, AttnRows v, int B, int T, int H,
                                           int Hkv, float scale) {
    const size_t smem = flash4_dkdv_smem_bytes(kHeadDim);
    static bool smem_opted_in = false;
    flash_smem_opt_in(flash4_attention_backward_dkdv_kernel<kHeadDim>, smem, &smem_opted_in);
    const int tiles = (T + FLASH4_BLOCK_N - 1) / FLASH4_BLOCK_N;
    flash4_attention_backward_dkdv_kernel<kHeadDim><<<dim3(tiles, B * Hkv), FLASH4_DKDV_THREADS, smem>>>(
        dk, dv, dout, lse, delta, q, k, v, T, H, Hkv, scale, scale * FLASH_LOG2E);
    launchCheck();
}

// dQ, version 4. Grid (B * H, ceil(T / 128)), FLASH4_DQ_THREADS threads. A CTA owns 128 query rows of
// one head (Q and dO resident) and walks the key tiles up to its diagonal, the next K/V tile
// streaming into the other stage; it recomputes P and dS as version 2 and adds dQ = scale * dS K to
// what the dK/dV kernel wrote where q shares k's storage (dq.accumulate). Same arguments and outputs
// as flash_attention_backward_dq_kernel.
template <int kHeadDim>
__global__ void __launch_bounds__(FLASH4_DQ_THREADS, kHeadDim == 64 ? 2 : 1)
flash4_attention_backward_dq_kernel(AttnGradDest dq, const floatX* dout, const float* lse, const float* delta,
                                    AttnRows q, AttnRows k, AttnRows v, int T, int H, int Hkv, float scale,
                                    float scale_log2) {
    constexpr int kStride = kHeadDim + FLASH_SMEM_PAD;
    constexpr int kTilesN = FLASH4_BLOCK_N / 8, kTilesD = kHeadDim / 8;
    constexpr uint32_t kRowBytes = kStride * sizeof(floatX), kTileBytes = FLASH4_BLOCK_N * kRowBytes;
    extern __shared__ __align__(16) unsigned char flash_smem[];
    // Q, dO (128 rows each), then stage s's K at sKV + 2s tiles, its V one tile after
    const uint32_t sQ = smem_u32(flash_smem);
    const uint32_t sdO = sQ + FLASH4_DQ_BLOCK_M * kRowBytes;
    const uint32_t sKV = sdO + FLASH4_DQ_BLOCK_M * kRowBytes;
    const bool kv_same = k.ptr == v.ptr;
    const int m_block = gridDim.y - 1 - blockIdx.y; // the longest rows (most key tiles) start first
    const int b = blockIdx.x / H, h = blockIdx.x % H, kvh = h / (H / Hkv);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, group = lane / 4, quad = lane % 4;
    const int C = H * kHeadDim;
    const floatX* gK = k.ptr + (size_t)b * T * k.stride + (size_t)kvh * kHeadDim;
    const floatX* gV = v.ptr + (size_t)b * T * v.stride + (size_t)kvh * kHeadDim;
    const int warp_row0 = m_block * FLASH4_DQ_BLOCK_M + warp * 16;
    const int row0 = warp_row0 + group; // query of c[0..1]; c[2..3] is row0 + 8
    const int n_last = (min(m_block * FLASH4_DQ_BLOCK_M + FLASH4_DQ_BLOCK_M, T) - 1) / FLASH4_BLOCK_N;
    const int lm_row = lane % 8, lm_mat = lane / 8; // ldmatrix rows, as the dK/dV kernel
    const uint32_t lane_nk = (lm_row + 8 * (lm_mat >> 1)) * kRowBytes + 8 * (lm_mat & 1) * sizeof(floatX);
    const uint32_t lane_kn = (lm_row + 8 * (lm_mat & 1)) * kRowBytes + 8 * (lm_mat >> 1) * sizeof(floatX);
    const uint32_t sQw = sQ + warp * 16 * kRowBytes, sdOw = sdO + warp * 16 * kRowBytes; // this warp's 16 rows
    float lse_r[2], delta_r[2]; // rows row0, row0 + 8 (lse in base 2)
    #pragma unroll
    for (int r = 0; r < 2; r++) {
        const int t = row0 + 8 * r;
        lse_r[r] = t < T ? lse[((size_t)b * H + h) * T + t] * FLASH_LOG2E : 0.0f;
        delta_r[r] = t < T ? delta[((size_t)b * H + h) * T + t] : 0.0f;
    }

    auto load_kv_stage = [&](int n_block, int stage) {
        const uint32_t sK = sKV + 2 * stage * kTileBytes;
        flash_cp_async_tile<FLASH4_BLOCK_N, kHeadDim, FLASH4_DQ_THREADS>(sK, gK, k.stride, n_block * FLASH4_BLOCK_N, T);
        if (!kv_same) { flash_cp_async_tile<FLASH4_BLOCK_N, kHeadDim, FLASH4_DQ_THREADS>(sK + kTileBytes, gV, v.stride, n_block * FLASH4_BLOCK_N, T); }
        cp_async_commit();
    };
    flash_cp_async_tile<FLASH4_DQ_BLOCK_M, kHeadDim, FLASH4_DQ_THREADS>(
        sQ, q.ptr + (size_t)b * T * q.stride + (size_t)h * kHeadDim, q.stride, m_block * FLASH4_DQ_BLOCK_M, T);
    flash_cp_async_tile<FLASH4_DQ_BLOCK_M, kHeadDim, FLASH4_DQ_THREADS>(
        sdO, dout + (size_t)b * T * C + (size_t)h * kHeadDim, C, m_block * FLASH4_DQ_BLOCK_M, T);
    cp_async_commit();
    load_kv_stage(0, 0);

    float acc_dq[kTilesD][4]; // (16, kHeadDim) per warp
    #pragma unroll
    for (int dj = 0; dj < kTilesD; dj++) { acc_dq[dj][0] = acc_dq[dj][1] = acc_dq[dj][2] = acc_dq[dj][3] = 0.0f; }

    for (int n_block = 0; n_block <= n_last; n_block++) {
        const int stage = n_block & 1;
        if (n_block < n_last) { // the next tile streams in while this one is computed
            load_kv_stage(n_block + 1, stage ^ 1);
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads(); // tile n_block (and, at the first, Q and dO) is complete: every thread's copies landed
        const uint32_t sK = sKV + 2 * stage * kTileBytes;
        const uint32_t sV = kv_same ? sK : sK + kTileBytes;
        const int key0 = n_block * FLASH4_BLOCK_N;
        if (key0 <= warp_row0 + 15) { // else every key of the tile is after this warp's rows: nothing to add
            // S = Q_w K^T
            float p[kTilesN][4]; // (16, 64) per warp: S, then P
            flash4_scores<kHeadDim, FLASH4_BLOCK_N>(p, sQw, sK, lane_kn, lane_nk);
            // P = 2^(scale * S - lse), 0 where key > query (tiles that reach past the warp's first row)
            // or key >= T
            const bool masked = key0 + FLASH4_BLOCK_N - 1 > warp_row0 || key0 + FLASH4_BLOCK_N > T;
            #pragma unroll
            for (int j = 0; j < kTilesN; j++) {
                #pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int key = key0 + j * 8 + 2 * quad + (e & 1);
                    const int r = e >= 2 ? 1 : 0;
                    p[j][e] = (masked && (key > row0 + 8 * r || key >= T)) ? 0.0f : exp2f(p[j][e] * scale_log2 - lse_r[r]);
                }
            }
            // dP = dO_w V^T, then dS = P * (dP - D)
            float ds[kTilesN][4]; // (16, 64) per warp: dP, then dS
            flash4_scores<kHeadDim, FLASH4_BLOCK_N>(ds, sdOw, sV, lane_kn, lane_nk);
            #pragma unroll
            for (int j = 0; j < kTilesN; j++) {
                #pragma unroll
                for (int e = 0; e < 4; e++) { ds[j][e] = p[j][e] * (ds[j][e] - delta_r[e >= 2 ? 1 : 0]); }
            }
            // acc_dq += dS K
            flash4_acc_pv<kHeadDim, FLASH4_BLOCK_N>(acc_dq, ds, sK, lane_kn);
        }
        __syncthreads(); // every warp is done with this K/V stage before the next tile's copies refill it
    }

    flash_store_dq<kHeadDim>(dq, acc_dq, b, h, T, row0, quad, scale);
}

template <int kHeadDim>
static void flash4_attention_backward_dq(AttnGradDest dq, const floatX* dout, const float* lse, const float* delta,
                                         AttnRows q, AttnRows k, AttnRows v, int B, int T, int H, int Hkv, float scale) {
    const size_t smem = flash4_dq_smem_bytes(kHeadDim);
    static bool smem_opted_in = false;
    flash_smem_opt_in(flash4_attention_backward_dq_kernel<kHeadDim>, smem, &smem_opted_in);
    const int tiles = (T + FLASH4_DQ_BLOCK_M - 1) / FLASH4_DQ_BLOCK_M;
    flash4_attention_backward_dq_kernel<kHeadDim><<<dim3(B * H, tiles), FLASH4_DQ_THREADS, smem>>>(
        dq, dout, lse, delta, q, k, v, T, H, Hkv, scale, scale * FLASH_LOG2E);
    launchCheck();
}

// version 4's backward after the delta kernel: dK/dV first, then dQ (which adds to dK/dV's write where
// q shares k's storage)
template <int kHeadDim>
static void flash4_attention_backward_hd(AttnGradDest dq, AttnGradDest dk, AttnGradDest dv, const floatX* dout,
                                         const float* lse, const float* delta, AttnRows q, AttnRows k, AttnRows v,
                                         int B, int T, int H, int Hkv, float scale) {
    flash4_attention_backward_dkdv<kHeadDim>(dk, dv, dout, lse, delta, q, k, v, B, T, H, Hkv, scale);
    profile_mark(PROF_ATTN_BWD_DKDV);
    flash4_attention_backward_dq<kHeadDim>(dq, dout, lse, delta, q, k, v, B, T, H, Hkv, scale);
    profile_mark(PROF_ATTN_BWD_DQ);
}

// version 4's dK/dV kernel puts B * Hkv in its grid's y dimension, the forward and the dQ kernel put
// B * H in x (a lab's versions check the same limits)
static void flash_check_grid(const AttnShape* s) {
    if (!attention_fused_grid_fits(s->B, s->H)) {
        fprintf(stderr, "error: flash attention: B * n_head = %d * %d exceeds the %d CUDA blocks of a grid's y "
                "dimension (HINT: lower -b or use --attention unfused)\n", s->B, s->H, FLASH_MAX_GRID_Y);
        exit(EXIT_FAILURE);
    }
}

// what every forward and backward kernel of the flash path needs of its views
static void flash_check_forward(AttnRows q, AttnRows k, AttnRows v, const AttnShape* s) {
    flash_check_grid(s);
    flash_check_rows(q.ptr, q.stride, "q");
    flash_check_rows(k.ptr, k.stride, "k");
    flash_check_rows(v.ptr, v.stride, "v");
}
static void flash_check_backward(AttnGradDest dq, AttnGradDest dk, AttnGradDest dv, const floatX* dout, AttnRows q,
                                 AttnRows k, AttnRows v, const AttnShape* s) {
    flash_check_forward(q, k, v, s);
    flash_check_rows(dq.rows.ptr, dq.rows.stride, "dq");
    flash_check_rows(dk.rows.ptr, dk.rows.stride, "dk");
    flash_check_rows(dv.rows.ptr, dv.rows.stride, "dv");
    flash_check_rows(dout, s->H * s->hd, "dout");
}
#endif

// out (B, T, H * hd), lse (B, H, T) from the q (H heads), k, v (Hkv heads) views
static void flash_attention_forward(floatX* out, float* lse, AttnRows q, AttnRows k, AttnRows v, const AttnShape* s) {
#if PRECISION_IS_BF16
    flash_check_forward(q, k, v, s);
    if (s->hd == 64) { flash3_attention_forward_hd<64>(out, lse, q, k, v, s->B, s->T, s->H, s->Hkv, s->scale); return; }
    if (s->hd == 128) { flash3_attention_forward_hd<128>(out, lse, q, k, v, s->B, s->T, s->H, s->Hkv, s->scale); return; }
#endif
    fprintf(stderr, "error: internal: no flash attention kernel for head size %d in a %s build\n", s->hd, PRECISION_NAME);
    exit(EXIT_FAILURE);
}

// dq, dk, dv (the destinations with their accumulate flags) from dout = datty (B, T, H * hd), the
// forward output `out` and lse. delta (B, H, T) is scratch. k and v with one pointer are one tensor:
// dk then receives dK + dV (and dv must be the same destination).
static void flash_attention_backward(AttnGradDest dq, AttnGradDest dk, AttnGradDest dv, float* delta,
                                     const floatX* dout, const floatX* out, const float* lse, AttnRows q, AttnRows k,
                                     AttnRows v, const AttnShape* s) {
#if PRECISION_IS_BF16
    flash_check_backward(dq, dk, dv, dout, q, k, v, s);
    flash_attention_delta(delta, dout, out, s->B, s->T, s->H, s->hd);
    profile_mark(PROF_ATTN_BWD_DELTA);
    if (s->hd == 64) { flash4_attention_backward_hd<64>(dq, dk, dv, dout, lse, delta, q, k, v, s->B, s->T, s->H, s->Hkv, s->scale); return; }
    if (s->hd == 128) { flash4_attention_backward_hd<128>(dq, dk, dv, dout, lse, delta, q, k, v, s->B, s->T, s->H, s->Hkv, s->scale); return; }
#endif
    fprintf(stderr, "error: internal: no flash attention kernel for head size %d in a %s build\n", s->hd, PRECISION_NAME);
    exit(EXIT_FAILURE);
}

// ----------------------------------------------------------------------------
// attention: the unfused path's kernels (permutes and the causal softmax) and the two paths' launchers

// the grid of permute_heads_kernel / unpermute_heads_kernel: x covers one (b, h) plane of T * hd
// elements, y the B * NH planes (the kernels read the plane from blockIdx.y)
static dim3 heads_grid(int B, int NH, int T, int hd, int block) {
    const long long planes = (long long)B * NH;
    if (planes > 65535) {
        fprintf(stderr, "error: the unfused attention needs B * heads = %lld <= 65535 (grid.y) (HINT: lower -b)\n", planes);
        exit(EXIT_FAILURE);
    }
    return dim3((unsigned)(((long long)T * hd + block - 1) / block), (unsigned)planes);
}

// dst (B, NH, T, hd) <- the NH*hd columns starting at src_offset of src rows (B, T, src_stride).
// Grid (ceil(T * hd / block), B * NH): a block row per (b, h) plane, 32-bit index arithmetic in it.
__global__ void permute_heads_kernel(floatX* dst, const floatX* src, int B, int T, int NH, int hd,
                                     int src_stride, int src_offset) {
    const int bh = blockIdx.y;
    const int i = blockIdx.x * blockDim.x + threadIdx.x; // t * hd + d
    if (i >= T * hd) { return; }
    const int b = bh / NH, h = bh % NH, t = i / hd, d = i % hd;
    dst[(size_t)bh * T * hd + i] = src[((size_t)b * T + t) * src_stride + src_offset + h * hd + d];
}

static void permute_heads(floatX* dst, const floatX* src, int B, int T, int NH, int hd, int src_stride, int src_offset) {
    permute_heads_kernel<<<heads_grid(B, NH, T, hd, 256), 256>>>(dst, src, B, T, NH, hd, src_stride, src_offset);
    launchCheck();
}

// dst rows (B, T, dst_stride), columns [dst_offset, dst_offset + NH*hd)  <-  src (B, NH, T, hd);
// accumulate: added to what dst holds, else written. Grid as permute_heads_kernel.
__global__ void unpermute_heads_kernel(floatX* dst, const floatX* src, int B, int T, int NH, int hd,
                                       int dst_stride, int dst_offset, int accumulate) {
    const int bh = blockIdx.y;
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= T * hd) { return; }
    const int b = bh / NH, h = bh % NH, t = i / hd, d = i % hd;
    float v = x2f(src[(size_t)bh * T * hd + i]);
    const size_t o = ((size_t)b * T + t) * dst_stride + dst_offset + h * hd + d;
    if (accumulate) { v += x2f(dst[o]); }
    dst[o] = f2x(v);
}

static void unpermute_heads(floatX* dst, const floatX* src, int B, int T, int NH, int hd, int dst_stride, int dst_offset,
                            int accumulate) {
    unpermute_heads_kernel<<<heads_grid(B, NH, T, hd, 256), 256>>>(dst, src, B, T, NH, hd, dst_stride, dst_offset, accumulate);
    launchCheck();
}

// In place over rows of T scores (already scaled): causal softmax. Row r is query position
// t = r % T (rows are (B, H, T) flattened); keys s > t get probability exactly 0. One warp per row.
__global__ void softmax_causal_forward_kernel(floatX* att, int rows, int T) {
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (row >= rows) { return; }
    const int t = row % T;
    floatX* a = att + (size_t)row * T;
    float m = -INFINITY;
    for (int s = lane; s <= t; s += 32) { m = fmaxf(m, x2f(a[s])); }
    m = warp_max(m);
    float sum = 0.0f;
    for (int s = lane; s <= t; s += 32) { sum += expf(x2f(a[s]) - m); }
    const float inv = 1.0f / warp_sum(sum);
    for (int s = lane; s < T; s += 32) { a[s] = f2x(s <= t ? expf(x2f(a[s]) - m) * inv : 0.0f); }
}

static void softmax_causal_forward(floatX* att, int rows, int T) {
    softmax_causal_forward_kernel<<<(rows + 7) / 8, 256>>>(att, rows, T);
    launchCheck();
}

// In place: datt (gradient of the probabilities) -> gradient of the raw scores q.k, times scale:
//   dS[s] = scale * P[s] * (dP[s] - sum_s' P[s'] dP[s']) for s <= t, 0 above the diagonal.
__global__ void softmax_causal_backward_kernel(floatX* datt, const floatX* att, int rows, int T, float scale) {
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (row >= rows) { return; }
    const int t = row % T;
    floatX* d = datt + (size_t)row * T;
    const floatX* p = att + (size_t)row * T;
    float dot = 0.0f;
    for (int s = lane; s <= t; s += 32) { dot += x2f(p[s]) * x2f(d[s]); }
    dot = warp_sum(dot);
    for (int s = lane; s < T; s += 32) {
        d[s] = f2x(s <= t ? scale * x2f(p[s]) * (x2f(d[s]) - dot) : 0.0f);
    }
}

static void softmax_causal_backward(floatX* datt, const floatX* att, int rows, int T, float scale) {
    softmax_causal_backward_kernel<<<(rows + 7) / 8, 256>>>(datt, att, rows, T, scale);
    launchCheck();
}

// The unfused path's scores, (B, Hkv, g*T, T) = (B, H, T, T): scale * q k^T per batch of B * Hkv,
// from q (B, H, T, hd) and k (B, Hkv, T, hd) as permuted. Every t and s: the causal mask is the
// softmax's. attention_forward's first matmul, and the inspection run's scores (inspect_run).
static void attention_scores(floatX* scores, const floatX* q, const floatX* k, const AttnShape* s) {
    const int g = s->H / s->Hkv, gT = g * s->T, T = s->T, hd = s->hd;
    const long long s_q = (long long)gT * hd, s_kv = (long long)T * hd, s_att = (long long)gT * T;
    const LtMatmul mm = lt_batched(lt_matmul(1, 0, T, gT, hd), s->B * s->Hkv, s_kv, s_q, s_att);
    matmul_lt(scores, CUBLAS_X_TYPE, k, q, lt_scaled(mm, s->scale, 0.0f));
}

// The forward pass of one layer's attention: atty (B, T, C) from q, k and v where the layout puts
// them in src (the projection (B, T, width), x = LN1 output (B, T, C), the residual query (B, T, C));
// bufs: what the backward pass needs, of the shape's path.
static void attention_forward(floatX* atty, const AttnBuffers* bufs, QKVSources<const floatX> src, const AttnShape* s) {
    if (s->fused) {
        flash_attention_forward(atty, bufs->lse, qkv_role_view(&s->layout, 0, s->hd, src),
                                qkv_role_view(&s->layout, 1, s->hd, src), qkv_role_view(&s->layout, 2, s->hd, src), s);
        return;
    }
    const int B = s->B, T = s->T, C = s->C, H = s->H, Hkv = s->Hkv, hd = s->hd;
    const floatX* role_ptr[3];
    for (int r = 0; r < 3; r++) {
        if (s->owner[r] != r) { role_ptr[r] = bufs->perm[s->owner[r]]; continue; }
        const AttnRows rows = qkv_role_view(&s->layout, r, s->hd, src);
        permute_heads(bufs->perm[r], rows.ptr, B, T, rows.heads, hd, rows.stride, 0);
        role_ptr[r] = bufs->perm[r];
    }
    const floatX* q = role_ptr[0];
    const floatX* k = role_ptr[1];
    const floatX* v = role_ptr[2];
    floatX* att = bufs->att;
    const int g = H / Hkv, gT = g * T, batches = B * Hkv;
    const long long s_q = (long long)gT * hd, s_kv = (long long)T * hd, s_att = (long long)gT * T;
    attention_scores(att, q, k, s); // per batch (gT, T) = scale * q (gT, hd) @ k^T
    const int rows = B * H * T;
    softmax_causal_forward(att, rows, T);
    // y: per batch (gT, hd) = att (gT, T) @ v (T, hd)
    matmul_lt(bufs->yperm, CUBLAS_X_TYPE, v, att, lt_batched(lt_matmul(0, 0, hd, gT, T), batches, s_kv, s_att, s_q));
    unpermute_heads(atty, bufs->yperm, B, T, H, hd, C, 0, 0);
}

// The fused path's gradient destinations, role by role, and their write order (qkv_fused_grad_plan,
// attention_variants.cuh); returns 1 when they write dsrc.input
static int attention_fused_grad_dests(AttnGradDest dst[3], QKVSources<floatX> dsrc, const AttnShape* s) {
    const QKVGradPlan plan = qkv_fused_grad_plan(&s->layout);
    for (int r = 0; r < 3; r++) {
        dst[r].rows = qkv_role_view(&s->layout, r, s->hd, dsrc);
        dst[r].accumulate = plan.accumulate[r];
    }
    return plan.wrote_input;
}

// The backward pass of one layer's attention, from datty (B, T, C), into dsrc, the gradients of the
// forward's sources. Each stored tensor's gradient goes where its values came from, and roles
// sharing storage get the sum of their gradients:
//   projection columns -> dsrc.projection (B, T, width) (every column is written exactly once),
//   x itself           -> dsrc.input (B, T, C): written by the first such role, added by the next,
//   residual query     -> dsrc.residual_query (B, T, C).
// Returns 1 when dsrc.input was written (the caller then adds the projection's input gradient to it).
// atty is the forward output (the fused path's D = rowsum(datty * atty)); gbufs is scratch.
static int attention_backward(QKVSources<floatX> dsrc, const AttnGradBuffers* gbufs, const floatX* datty,
                              const floatX* atty, const AttnBuffers* bufs, QKVSources<const floatX> src,
                              const AttnShape* s) {
    const int B = s->B, T = s->T, C = s->C, H = s->H, Hkv = s->Hkv, hd = s->hd;
    int wrote_dx = 0;
    if (s->fused) {
        AttnGradDest dst[3];
        wrote_dx = attention_fused_grad_dests(dst, dsrc, s);
        flash_attention_backward(dst[0], dst[1], dst[2], gbufs->delta, datty, atty, bufs->lse,
                                 qkv_role_view(&s->layout, 0, hd, src), qkv_role_view(&s->layout, 1, hd, src),
                                 qkv_role_view(&s->layout, 2, hd, src), s);
        return wrote_dx;
    }
    const floatX* q = bufs->perm[s->owner[0]];
    const floatX* k = bufs->perm[s->owner[1]];
    const floatX* v = bufs->perm[s->owner[2]];
    floatX* dq = gbufs->dperm[s->owner[0]];
    floatX* dk = gbufs->dperm[s->owner[1]];
    floatX* dv = gbufs->dperm[s->owner[2]];
    floatX* datt = gbufs->datt;
    floatX* dyperm = gbufs->dyperm;
    const floatX* att = bufs->att;
    int written[3] = {0, 0, 0}; // by stored tensor
    const int g = H / Hkv, gT = g * T, batches = B * Hkv;
    const long long s_q = (long long)gT * hd, s_kv = (long long)T * hd, s_att = (long long)gT * T;
    // dy in the head layout of y
    permute_heads(dyperm, datty, B, T, H, hd, C, 0);
    // datt (gT, T) = dy (gT, hd) @ v^T
    matmul_lt(datt, CUBLAS_X_TYPE, v, dyperm, lt_batched(lt_matmul(1, 0, T, gT, hd), batches, s_kv, s_q, s_att));
    // dv (T, hd) = att^T (T, gT) @ dy (gT, hd), added to a shared role's gradient already written
    const LtMatmul dkv = lt_batched(lt_matmul(0, 1, hd, T, gT), batches, s_q, s_att, s_kv);
    matmul_lt(dv, CUBLAS_X_TYPE, dyperm, att, lt_scaled(dkv, 1.0f, written[s->owner[2]] ? 1.0f : 0.0f));
    written[s->owner[2]] = 1;
    // datt -> dscores (times the scale, so that dq and dk below are plain matmuls)
    const int rows = B * H * T;
    softmax_causal_backward(datt, att, rows, T, s->scale);
    // dq (gT, hd) = dscores (gT, T) @ k (T, hd)
    const LtMatmul dqm = lt_batched(lt_matmul(0, 0, hd, gT, T), batches, s_kv, s_att, s_q);
    matmul_lt(dq, CUBLAS_X_TYPE, k, datt, lt_scaled(dqm, 1.0f, written[s->owner[0]] ? 1.0f : 0.0f));
    written[s->owner[0]] = 1;
    // dk (T, hd) = dscores^T (T, gT) @ q (gT, hd)
    matmul_lt(dk, CUBLAS_X_TYPE, q, datt, lt_scaled(dkv, 1.0f, written[s->owner[1]] ? 1.0f : 0.0f));
    written[s->owner[1]] = 1;
    for (int r = 0; r < 3; r++) {
        if (s->owner[r] != r) { continue; }
        const QKVView<floatX> dst = qkv_role_view(&s->layout, r, hd, dsrc);
        const int into_dx = qkv_layout_role(&s->layout, r).source == QKV_SRC_INPUT;
        unpermute_heads(dst.ptr, gbufs->dperm[r], B, T, dst.heads, hd, dst.stride, 0, into_dx && wrote_dx);
        wrote_dx |= into_dx;
    }
    profile_mark(PROF_ATTN_BWD); // the fused path marks its three kernels instead
    return wrote_dx;
}

// ----------------------------------------------------------------------------
// GELU (tanh approximation): the fc layer's activation, in cuBLASLt's epilogue when it can be
// (elementwise kernels: n a multiple of x128::size, 16-byte aligned, one thread per x128)

#define GELU_SCALE 0.7978845608028654f // sqrt(2 / pi)

__device__ __forceinline__ float gelu_tanh(float x) {
    const float u = GELU_SCALE * (x + 0.044715f * x * x * x);
    return 0.5f * x * (1.0f + tanhf(u));
}
__device__ __forceinline__ float gelu_tanh_grad(float x) {
    const float u = GELU_SCALE * (x + 0.044715f * x * x * x);
    const float th = tanhf(u);
    const float du = GELU_SCALE * (1.0f + 3.0f * 0.044715f * x * x);
    return 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * du;
}

// used where the GELU is not fused into the fc matmul (no cuBLASLt algorithm, --gelu_fusion 0) and
// by -r 1 to recompute gelu(fch) in the backward pass
__global__ void gelu_forward_kernel(floatX* out, const floatX* inp, int n) {
    const int i = (blockIdx.x * blockDim.x + threadIdx.x) * x128::size;
    if (i >= n) { return; }
    const x128 x = load128(inp + i);
    x128 o;
    for (int k = 0; k < x128::size; k++) { o[k] = f2x(gelu_tanh(x2f(x[k]))); }
    store128(out + i, o);
}

static void gelu_forward(floatX* out, const floatX* inp, size_t n) {
    gelu_forward_kernel<<<grid_for_packs(n, 256, "gelu_forward"), 256>>>(out, inp, (int)n);
    launchCheck();
}

// dinp = gelu'(inp) * dout; dinp may be dout
__global__ void gelu_backward_kernel(floatX* dinp, const floatX* inp, const floatX* dout, int n) {
    const int i = (blockIdx.x * blockDim.x + threadIdx.x) * x128::size;
    if (i >= n) { return; }
    const x128 x = load128cs(inp + i), d = load128(dout + i);
    x128 o;
    for (int k = 0; k < x128::size; k++) { o[k] = f2x(gelu_tanh_grad(x2f(x[k])) * x2f(d[k])); }
    store128(dinp + i, o);
}

static void gelu_backward(floatX* dinp, const floatX* inp, const floatX* dout, size_t n) {
    gelu_backward_kernel<<<grid_for_packs(n, 256, "gelu_backward"), 256>>>(dinp, inp, dout, (int)n);
    launchCheck();
}

// The fc layer and its GELU: pre (N, OC) = inp (N, C) @ weight^T + bias, out = gelu(pre), both kept
// (pre for the GELU's derivative in the backward pass). Fused: one cuBLASLt call whose epilogue adds
// the bias, writes pre as its aux output and out = gelu(pre), so (N, OC) is not read back and
// written again by a separate kernel. Else (--gelu_fusion 0, an unaligned bias, no algorithm with
// that epilogue) the matmul, then gelu_forward_kernel.
static void matmul_forward_gelu(floatX* out, floatX* pre, const floatX* inp, const floatX* weight, const floatX* bias,
                                int N, int C, int OC) {
    const int bias_aligned = bias == NULL || ((uintptr_t)bias % 16) == 0;
    if (g_gelu_fusion && bias_aligned &&
        matmul_lt(out, CUBLAS_X_TYPE, weight, inp, lt_epilogue(lt_matmul(1, 0, OC, N, C), LT_GELU, bias, pre))) {
        return;
    }
    matmul_forward(pre, inp, weight, bias, N, C, OC);
    gelu_forward(out, pre, (size_t)N * OC);
}

// The backward of out = inp @ weight^T + bias with inp = gelu(pre) (the MLP's projection), down to pre:
// dpre (N, C) = (dout (N, OC) @ weight (OC, C)) * gelu'(pre), the derivative in cuBLASLt's epilogue
// (DGELU) when fused, else a separate gelu_backward_kernel; dweight += dout^T @ inp; dbias += colsums.
static void matmul_backward_gelu(floatX* dpre, float* dweight, float* dbias, const floatX* dout, const floatX* inp,
                                 const floatX* weight, const floatX* pre, int N, int C, int OC) {
    const LtMatmul mm = lt_matmul(0, 0, C, N, OC); // (C, N) column-major
    if (!g_gelu_fusion || !matmul_lt(dpre, CUBLAS_X_TYPE, weight, dout, lt_epilogue(mm, LT_DGELU, NULL, pre))) {
        matmul_lt(dpre, CUBLAS_X_TYPE, weight, dout, mm);
        gelu_backward(dpre, pre, dpre, (size_t)N * C);
    }
    matmul_backward_params(dweight, dbias, dout, inp, N, C, OC);
}

// ----------------------------------------------------------------------------
// residual: an elementwise add (the residual stream's own adds are fused into
// residual_layernorm_forward; this one is the residual query's q = x + f and dx += dq)

// out = a + b (q_residual's q = x + f and dx += dq); out may be a or b
__global__ void add_kernel(floatX* out, const floatX* a, const floatX* b, int n) {
    const int i = (blockIdx.x * blockDim.x + threadIdx.x) * x128::size;
    if (i >= n) { return; }
    const x128 va = load128(a + i), vb = load128(b + i);
    x128 o;
    for (int k = 0; k < x128::size; k++) { o[k] = f2x(x2f(va[k]) + x2f(vb[k])); }
    store128(out + i, o);
}

static void add_forward(floatX* out, const floatX* a, const floatX* b, size_t n) {
    add_kernel<<<grid_for_packs(n, 256, "add"), 256>>>(out, a, b, (int)n);
    launchCheck();
}

// ----------------------------------------------------------------------------
// attention's sources: the fused projection and the residual query
//
// The residual query (QKV_SRC_RESIDUAL_QUERY in attention_variants.cuh) is q = x + f(x) with
// f(x) = LN_q(W2 gelu(W1 RMSNorm_q(x))), a small MLP of the layer's own (W1: C -> C/2, W2: C/2 -> C,
// no biases). qkv_forward and qkv_backward are the one place that asks the layout whether it runs.

// one layer's residual-query activations over N rows: what its backward pass reads
typedef struct {
    floatX* r;   // (N, C)   RMSNorm_q(x)
    float* rrms; // (N)      RMSNorm_q's 1 / rms
    floatX* h;   // (N, C/2) W1 r
    floatX* hg;  // (N, C/2) gelu(h)
    floatX* u;   // (N, C)   W2 hg
    floatX* f;   // (N, C)   LN_q(u)
    float* mean; // (N)      LN_q's statistics
    float* rstd; // (N)
    floatX* q;   // (N, C)   x + f: attention's q
} QResActs;

// the backward pass's scratch
typedef struct {
    floatX* du;  // (N, C)
    floatX* dhg; // (N, C/2)
    floatX* dr;  // (N, C)
} QResGradScratch;

// q = x + f(x) (N, C) from x (N, C), with layer l's weights in p
static void qres_forward(const QResActs* a, const floatX* x, floatX* const* p, int l, int N, int C) {
    const size_t Ch = (size_t)C / 2;
    rmsnorm_forward(a->r, a->rrms, x, lslice(p[PARAM_QRES_RMSW], l, C), N, C);
    matmul_forward_gelu(a->hg, a->h, a->r, lslice(p[PARAM_QRES_W1], l, Ch * C), NULL, N, C, C / 2);
    matmul_forward(a->u, a->hg, lslice(p[PARAM_QRES_W2], l, C * Ch), NULL, N, C / 2, C);
    layernorm_forward(a->f, a->mean, a->rstd, a->u, lslice(p[PARAM_QRES_LNW], l, C), NULL, N, C);
    add_forward(a->q, x, a->f, (size_t)N * C);
}

// dx (N, C) += dq directly and through f; layer l's weight gradients into gr (accumulated)
static void qres_backward(floatX* dx, const QResGradScratch* scratch, const floatX* dq, const QResActs* a,
                          const floatX* x, floatX* const* p, float* const* gr, int l, int N, int C) {
    const size_t Ch = (size_t)C / 2;
    add_forward(dx, dx, dq, (size_t)N * C);
    norm_backward(scratch->du, lslice(gr[PARAM_QRES_LNW], l, C), NULL, dq, a->u, lslice(p[PARAM_QRES_LNW], l, C), a->mean,
                  a->rstd, N, C, 0);
    matmul_backward_gelu(scratch->dhg, lslice(gr[PARAM_QRES_W2], l, C * Ch), NULL, scratch->du, a->hg,
                         lslice(p[PARAM_QRES_W2], l, C * Ch), a->h, N, C / 2, C);
    matmul_backward(scratch->dr, lslice(gr[PARAM_QRES_W1], l, Ch * C), NULL, scratch->dhg, a->r,
                    lslice(p[PARAM_QRES_W1], l, Ch * C), N, C, C / 2, 0.0f);
    rmsnorm_backward(dx, lslice(gr[PARAM_QRES_RMSW], l, C), scratch->dr, x, lslice(p[PARAM_QRES_RMSW], l, C), a->rrms,
                     N, C, 1);
}

// Layer l's attention sources from x = LN1 output (N, C): the fused projection qkv (N, width) and,
// where the layout takes q from it, the residual query (qres). Returns where they are, for
// qkv_role_view.
static QKVSources<const floatX> qkv_forward(floatX* qkv, const QResActs* qres, const floatX* x, const QKVLayout* layout,
                                            floatX* const* p, int l, int N, int C) {
    const int W = layout->width;
    matmul_forward(qkv, x, lslice(p[PARAM_QKVW], l, (size_t)W * C), lslice(p[PARAM_QKVB], l, W), N, C, W);
    profile_mark(PROF_QKV_FWD);
    const floatX* q_residual = NULL;
    if (qkv_has_residual_query(layout)) {
        qres_forward(qres, x, p, l, N, C);
        profile_mark(PROF_QRES_FWD);
        q_residual = qres->q;
    }
    return qkv_sources<const floatX>(qkv, x, q_residual);
}

// The backward pass of qkv_forward, after attention_backward filled dsrc: dsrc.input = dx (N, C) gets
// the projection's input gradient (added to what attention wrote there when wrote_dx) and the
// residual query's; layer l's weight gradients into gr.
static void qkv_backward(QKVSources<floatX> dsrc, int wrote_dx, const QResGradScratch* qres_scratch, const QResActs* qres,
                         const floatX* x, const QKVLayout* layout, floatX* const* p, float* const* gr, int l, int N, int C) {
    const int W = layout->width;
    const size_t Wc = (size_t)W * C;
    matmul_backward(dsrc.input, lslice(gr[PARAM_QKVW], l, Wc), lslice(gr[PARAM_QKVB], l, W), dsrc.projection, x,
                    lslice(p[PARAM_QKVW], l, Wc), N, C, W, wrote_dx ? 1.0f : 0.0f);
    profile_mark(PROF_QKV_BWD);
    if (qkv_has_residual_query(layout)) {
        qres_backward(dsrc.input, qres_scratch, dsrc.residual_query, qres, x, p, gr, l, N, C);
        profile_mark(PROF_QRES_BWD);
    }
}

// ----------------------------------------------------------------------------
// classifier: the LM head's softmax cross-entropy, fused with its backward, and the loss sum

// (max, sum of exp(x - max)) pairs: combining two gives the pair of the union; (-inf, 0) is empty
__device__ __forceinline__ void softmax_stats_merge(float* m, float* s, float m2, float s2) {
    const float mm = fmaxf(*m, m2);
    if (mm == -INFINITY) { return; } // both empty
    *s = *s * expf(*m - mm) + s2 * expf(m2 - mm);
    *m = mm;
}

// The block's (max, sum) pair from each thread's (m, s), in every thread: a butterfly within the
// warps, then every warp over the warps' pairs (fixed order: bit-identical reruns, no atomics).
// s_m, s_s: (32) shared. Synchronizes the block: a classifier kernel's reads of its row come before
// its first write.
__device__ __forceinline__ void softmax_stats_block(float* m, float* s, float* s_m, float* s_s) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
    for (int off = 16; off > 0; off >>= 1) {
        const float m2 = __shfl_xor_sync(0xFFFFFFFFu, *m, off), s2 = __shfl_xor_sync(0xFFFFFFFFu, *s, off);
        softmax_stats_merge(m, s, m2, s2);
    }
    if (lane == 0) { s_m[warp] = *m; s_s[warp] = *s; }
    __syncthreads(); // the warps' pairs written before any warp reads them; every read of the row before a write
    *m = lane < nwarps ? s_m[lane] : -INFINITY;
    *s = lane < nwarps ? s_s[lane] : 0.0f;
    for (int off = 16; off > 0; off >>= 1) {
        const float m2 = __shfl_xor_sync(0xFFFFFFFFu, *m, off), s2 = __shfl_xor_sync(0xFFFFFFFFu, *s, off);
        softmax_stats_merge(m, s, m2, s2);
    }
}

// the classifier's block: one x128 pack per thread and sweep. GPT-2's 50304 columns fill 1024
// threads; a small vocabulary gets whole warps for its packs and no idle ones.
static int classifier_threads(int Vp) {
    const int packs = Vp / x128::size; // Vp is a multiple of x128::size (the kernels' loads)
    return packs >= 1024 ? 1024 : (packs + 31) / 32 * 32;
}

// A pack of floatX held as its four 32-bit words (two bf16 to a word, the lower half first): an x128
// kept in registers is split by the compiler into 16-bit values, a 32-bit register each, twice the
// pack's size in BF16 (ptxas spilled fused_classifier_onepass_kernel<7> so).
typedef Packed128<uint32_t> w128;
// element k of a w128 as float, by a shift or a mask
__device__ __forceinline__ float w128_get(const w128& w, int k) {
#if PRECISION_IS_BF16
    const uint32_t u = k % 2 == 0 ? w[k / 2] << 16 : w[k / 2] & 0xFFFF0000u;
#else
    const uint32_t u = w[k];
#endif
    float f;
    memcpy(&f, &u, 4);
    return f;
}
// element k of w set to -inf
__device__ __forceinline__ void w128_set_neg_inf(w128* w, int k) {
#if PRECISION_IS_BF16
    (*w)[k / 2] = k % 2 == 0 ? ((*w)[k / 2] & 0xFFFF0000u) | 0xFF80u : ((*w)[k / 2] & 0xFFFFu) | 0xFF800000u;
#else
    (*w)[k] = 0xFF800000u;
#endif
}
// the max over kPacks packs. BF16: max.bf16x2 over the words (exact: a max selects), then the two
// halves; converting each element to float here would have the compiler keep those floats for the
// sum of exponentials, twice the packs' registers
template <int kPacks>
__device__ __forceinline__ float w128_max(const w128 (&v)[kPacks]) {
#if PRECISION_IS_BF16
    __nv_bfloat162_raw raw;
    memcpy(&raw, &v[0][0], 4);
    __nv_bfloat162 m2 = raw;
#pragma unroll
    for (int j = 0; j < kPacks; j++) {
#pragma unroll
        for (int q = 0; q < 4; q++) {
            memcpy(&raw, &v[j][q], 4);
            m2 = __hmax2(m2, __nv_bfloat162(raw));
        }
    }
    return fmaxf(__low2float(m2), __high2float(m2));
#else
    float m = -INFINITY;
#pragma unroll
    for (int j = 0; j < kPacks; j++) {
#pragma unroll
        for (int k = 0; k < x128::size; k++) { m = fmaxf(m, w128_get(v[j], k)); }
    }
    return m;
#endif
}
// sum of exp(x - m) over kPacks packs, in order. The elements go through x2f (cvt.f32.bf16), not
// w128_get: with the same shifts as the dlogits' conversions after the block's barrier, the compiler
// keeps this sum's floats for those, live across the barrier (ptxas: kPacks 7 spilled)
template <int kPacks>
__device__ __forceinline__ float w128_sum_exp(const w128 (&v)[kPacks], float m) {
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < kPacks; j++) {
        x128 p;
        memcpy(&p, &v[j], sizeof(p));
#pragma unroll
        for (int k = 0; k < x128::size; k++) { s += expf(x2f(p[k]) - m); }
    }
    return s;
}

// One block per row of logits (N rows of Vp, Vp a multiple of x128::size; the first V are real),
// reading the row once: losses[row] = lse - x[target] and, when write_dlogits, the row overwritten
// IN PLACE with dlogits = (softmax - onehot(target)) * dloss (padded columns 0); no probability
// tensor is stored. Each thread loads its kPacks x128 of the row into registers, takes its max and
// then its sum of exp(x - max) from them (no rescaling within a thread), softmax_stats_block merges
// the threads' pairs, and each thread writes dlogits over the packs it read, from the same
// registers: one read and one write of the row, 2 exps per logit (fused_classifier_kernel below:
// two reads, 2.25). Pack j of thread t is pack t + 1024 j of the row, so a warp's loads of one j are
// 512 contiguous bytes. Needs Vp <= kPacks * 1024 * x128::size and, for kPacks > 1, 1024 threads (the
// launcher's choice). Each thread writes only what it read itself; thread 0's read of x[target]
// comes before the block's barrier, every write after it. Rows in reverse (see fused_classifier_kernel).
// kPacks <= CLASSIFIER_MAX_PACKS: 7 x 16 bytes of the row are 28 of the 64 registers a 1024-thread
// block allows; ptxas (sm_90) takes 62 in BF16, 64 in FP32, no spills; 13 packs (GPT-2's row in FP32)
// spill 56 to 220 bytes (dev/cuda/classifier.cu's header has the counts).
#define CLASSIFIER_MAX_PACKS 7
template <int kPacks>
__global__ void __launch_bounds__(1024) fused_classifier_onepass_kernel(floatX* logits, float* losses,
                                                                        const int* targets, int N, int V, int Vp,
                                                                        float dloss, int write_dlogits) {
    __shared__ float s_m[32], s_s[32];
    __shared__ float s_target_logit;
    if ((int)blockIdx.x >= N) { return; }
    const int row = N - 1 - (int)blockIdx.x;
    floatX* x = logits + (size_t)row * Vp;
    const int target = targets[row];
    if (threadIdx.x == 0) { s_target_logit = x2f(x[target]); }
    // pack j at column i0 + j * kStride: a constant stride makes the packs' addresses one register
    // pair plus constant offsets (kPacks 1, the only one with fewer threads, never uses it)
    constexpr int kStride = 1024 * x128::size;
    const int i0 = threadIdx.x * x128::size;
    floatX* xt = x + i0;
    w128 v[kPacks]; // (kPacks, x128::size): this thread's packs of the row; read once, streamed past the caches
#pragma unroll
    for (int j = 0; j < kPacks; j++) {
        const int i = i0 + j * kStride;
        if (i < Vp) { v[j] = load128cs(reinterpret_cast<const uint32_t*>(xt + j * kStride)); }
        // columns from V on (padding, packs past the row) become -inf: the max and the sum below
        // need no test per logit. At most one pack of a row holds both kinds.
        if (i + x128::size > V) {
#pragma unroll
            for (int k = 0; k < x128::size; k++) { if (i + k >= V) { w128_set_neg_inf(&v[j], k); } }
        }
    }
    // m = max of the thread's logits, s = sum of exp(x - m); (-inf, 0) where it holds no real column
    float m = w128_max(v);
    float s = w128_sum_exp(v, m);
    if (m == -INFINITY) { s = 0.0f; } // exp(-inf - -inf) is NaN
    softmax_stats_block(&m, &s, s_m, s_s); // s_target_logit is visible below
    const float lse = m + logf(s);
    if (threadIdx.x == 0) { losses[row] = lse - s_target_logit; }
    if (!write_dlogits) { return; }
#pragma unroll
    for (int j = 0; j < kPacks; j++) {
        const int i = i0 + j * kStride;
        if (i >= Vp) { continue; }
        x128 d;
#pragma unroll
        for (int k = 0; k < x128::size; k++) {
            const int col = i + k;
            const float g = col < V ? (expf(w128_get(v[j], k) - lse) - (col == target ? 1.0f : 0.0f)) * dloss : 0.0f;
            d[k] = f2x(g);
        }
        store128cs(xt + j * kStride, d);
    }
}

// fused_classifier_onepass_kernel's job for a row of any length (its fallback, for rows that do not
// fit a block's registers), reading the row twice: once for its max and sum of exponentials together
// (online softmax: the sum is rescaled when the max grows), once to overwrite it with dlogits.
// Blocks of at most 1024 threads.
// Rows run in reverse: the matmul that wrote the logits finished with the last rows, some of them
// still in L2. The first read keeps the row cached for the second, the second read and the dlogits
// store stream past the caches (dlogits are read back by the next matmuls, long after).
__global__ void __launch_bounds__(1024) fused_classifier_kernel(floatX* logits, float* losses, const int* targets,
                                                                int N, int V, int Vp, float dloss, int write_dlogits) {
    __shared__ float s_m[32], s_s[32];
    __shared__ float s_target_logit;
    if ((int)blockIdx.x >= N) { return; }
    const int row = N - 1 - (int)blockIdx.x;
    floatX* x = logits + (size_t)row * Vp;
    const int target = targets[row];
    if (threadIdx.x == 0) { s_target_logit = x2f(x[target]); }
    float m = -INFINITY, s = 0.0f;
    for (int i = threadIdx.x * x128::size; i < V; i += blockDim.x * x128::size) {
        const x128 v = load128(x + i);
        float pm = -INFINITY;
        for (int k = 0; k < x128::size; k++) { if (i + k < V) { pm = fmaxf(pm, x2f(v[k])); } }
        float ps = 0.0f;
        for (int k = 0; k < x128::size; k++) { if (i + k < V) { ps += expf(x2f(v[k]) - pm); } }
        softmax_stats_merge(&m, &s, pm, ps);
    }
    softmax_stats_block(&m, &s, s_m, s_s); // s_target_logit is visible below
    const float lse = m + logf(s);
    if (threadIdx.x == 0) { losses[row] = lse - s_target_logit; }
    if (!write_dlogits) { return; }
    for (int i = threadIdx.x * x128::size; i < Vp; i += blockDim.x * x128::size) {
        const x128 v = load128cs(x + i);
        x128 d;
        for (int k = 0; k < x128::size; k++) {
            const int col = i + k;
            const float g = col < V ? (expf(x2f(v[k]) - lse) - (col == target ? 1.0f : 0.0f)) * dloss : 0.0f;
            d[k] = f2x(g);
        }
        store128cs(x + i, d);
    }
}

// losses (N) of the targets (N) over logits (N, Vp), and with write_dlogits the logits replaced in
// place by dlogits = dloss * (softmax - onehot). fused_classifier_onepass_kernel where the row fits
// the block's registers, with the smallest kPacks holding the thread's packs (BF16: GPT-2's 50304
// columns are 6.1 packs per thread, kPacks 7); else fused_classifier_kernel, reading the row twice:
// above 7 x 1024 packs, 57344 columns in BF16, 28672 in FP32 (GPT-2's vocabulary in FP32 builds,
// 12.3 packs per thread: 13 spill, see CLASSIFIER_MAX_PACKS).
static void fused_classifier(floatX* logits, float* losses, const int* targets, int N, int V, int Vp, float dloss,
                             int write_dlogits, cudaStream_t stream = 0) {
    const int threads = classifier_threads(Vp);
    const int packs = (Vp / x128::size + threads - 1) / threads; // per thread
#define CLASSIFIER_ONEPASS(P) \
    fused_classifier_onepass_kernel<P><<<N, threads, 0, stream>>>(logits, losses, targets, N, V, Vp, dloss, write_dlogits)
    if (packs <= 1) { CLASSIFIER_ONEPASS(1); }
    else if (packs <= 2) { CLASSIFIER_ONEPASS(2); }
    else if (packs <= 4) { CLASSIFIER_ONEPASS(4); }
    else if (packs <= CLASSIFIER_MAX_PACKS) { CLASSIFIER_ONEPASS(CLASSIFIER_MAX_PACKS); }
    else { fused_classifier_kernel<<<N, threads, 0, stream>>>(logits, losses, targets, N, V, Vp, dloss, write_dlogits); }
#undef CLASSIFIER_ONEPASS
    launchCheck();
}

// The classifier's stream and events (cuda_setup): chunk i's cross-entropy runs on g_loss_stream
// beside chunk i + 1's logits matmul; g_logits_ready[b] says buffer b's logits are written,
// g_loss_done[b] that its cross-entropy has read them (and written its dlogits).
static cudaStream_t g_loss_stream = NULL;
static cudaEvent_t g_logits_ready[2], g_loss_done[2];
static void classifier_stream_setup(void) {
    if (g_loss_stream != NULL) { return; }
    // non-blocking: the legacy default stream, where everything else runs, would serialize with it
    cudaCheck(cudaStreamCreateWithFlags(&g_loss_stream, cudaStreamNonBlocking));
    for (int b = 0; b < 2; b++) {
        cudaCheck(cudaEventCreateWithFlags(&g_logits_ready[b], cudaEventDisableTiming));
        cudaCheck(cudaEventCreateWithFlags(&g_loss_done[b], cudaEventDisableTiming));
    }
}

// The classifier over N rows (lnf (N, C) @ head^T), R rows at a time, so that the (N, Vp) logits never
// exist at once: chunk i's logits go to buffer i % 2 of out (R rows of Vp each; one buffer when N <= R),
// the losses (N) of the targets; with backward (training), each chunk's logits replaced in place by
// dlogits = dloss * (softmax - onehot), then dlnf (N, C) = dlogits @ head and dhead (Vp, C) +=
// dlogits^T @ lnf, chunk by chunk. The cross-entropy kernel of chunk i runs on g_loss_stream while the
// logits matmul of chunk i + 1 runs on the default stream; three waits order every use of a buffer
// after the one before (each marked below). The same kernels on the same rows, dhead's sums in chunk
// order: bit for bit the one-stream order's results.
static void classifier_forward(floatX* out, float* losses, floatX* dlnf, float* dhead, const floatX* lnf,
                               const floatX* head, const int* targets, int N, int R, int C, int V, int Vp, float dloss,
                               int backward) {
    classifier_stream_setup(); // (cuda_setup made them; a kernel lab may not have called it)
    const int chunks = (N + R - 1) / R;
    for (int i = 0; i <= chunks; i++) {
        if (i < chunks) {
            const int r0 = i * R, rows = N - r0 < R ? N - r0 : R, b = i % 2;
            floatX* logits = out + (size_t)b * R * Vp;
            // wait 1: chunk i - 2's cross-entropy has read this buffer (training: its backward has too)
            if (i >= 2) { cudaCheck(cudaStreamWaitEvent(0, g_loss_done[b], 0)); }
            matmul_forward(logits, lnf + (size_t)r0 * C, head, NULL, rows, C, Vp);
            cudaCheck(cudaEventRecord(g_logits_ready[b], 0));
            // wait 2: the cross-entropy reads this chunk's logits once they are written
            cudaCheck(cudaStreamWaitEvent(g_loss_stream, g_logits_ready[b], 0));
            fused_classifier(logits, losses + r0, targets + r0, rows, V, Vp, dloss, backward, g_loss_stream);
            cudaCheck(cudaEventRecord(g_loss_done[b], g_loss_stream));
        }
        if (i >= 1) { // chunk i - 1's backward matmuls, beside chunk i's cross-entropy
            const int p = i - 1, r0 = p * R, rows = N - r0 < R ? N - r0 : R, b = p % 2;
            // wait 3: its dlogits (training), or its losses (the loss sum after the last chunk), are written
            if (backward || i == chunks) { cudaCheck(cudaStreamWaitEvent(0, g_loss_done[b], 0)); }
            if (backward) {
                matmul_backward(dlnf + (size_t)r0 * C, dhead, NULL, out + (size_t)b * R * Vp, lnf + (size_t)r0 * C, head,
                                rows, C, Vp, 0.0f);
            }
        }
    }
}

// *accum += sum of losses[0 .. n) in double, by one block in a fixed order: the losses of a whole
// step stay on the device and reach the host in one copy when the step ends
__global__ void __launch_bounds__(1024) loss_sum_kernel(double* accum, const float* losses, int n) {
    __shared__ double s_warp[32];
    double v = 0.0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) { v += (double)losses[i]; }
    for (int off = 16; off > 0; off >>= 1) { v += __shfl_xor_sync(0xFFFFFFFFu, v, off); }
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
    if (lane == 0) { s_warp[warp] = v; }
    __syncthreads();
    if (threadIdx.x == 0) {
        double t = 0.0;
        for (int w = 0; w < nwarps; w++) { t += s_warp[w]; }
        *accum += t;
    }
}

static void loss_sum(double* accum, const float* losses, int n) {
    loss_sum_kernel<<<1, 1024>>>(accum, losses, n);
    launchCheck();
}

// ----------------------------------------------------------------------------
// optimizer: AdamW, and the global gradient norm its clipping reads

// AdamW on n parameters (FORMATS.md): g = grad * grad_scale, m, v moments, bias corrections
// bc1 = 1 - b1^t, bc2 = 1 - b2^t, p -= lr * (m^ / (sqrt(v^) + eps) + wd * p).
// With master weights (fp32) p is read from and written to master, then rounded into params.
// grad_scale clips the global norm: min(1, clip / norm) with norm = sqrt(*norm_sq), read here on the
// device so that the host never waits for the norm inside a step (clip <= 0: no clipping).
// One thread per x128::size parameters (16-byte loads; the tail of n element by element).
__device__ __forceinline__ void adamw_one(floatX* params, float* master, const float* grads, float* m_mem,
                                          float* v_mem, int i, float lr, float beta1, float beta2, float bc1,
                                          float bc2, float eps, float wd, float grad_scale) {
    const float g = grads[i] * grad_scale;
    const float m = beta1 * m_mem[i] + (1.0f - beta1) * g;
    const float v = beta2 * v_mem[i] + (1.0f - beta2) * g * g;
    m_mem[i] = m;
    v_mem[i] = v;
    float p = master != NULL ? master[i] : x2f(params[i]);
    p -= lr * ((m / bc1) / (sqrtf(v / bc2) + eps) + wd * p);
    if (master != NULL) { master[i] = p; }
    params[i] = f2x(p);
}
__global__ void adamw_kernel(floatX* params, float* master, const float* grads, float* m_mem, float* v_mem, int n,
                             float lr, float beta1, float beta2, float bc1, float bc2, float eps, float wd,
                             const float* norm_sq, float grad_clip) {
    const int i0 = (blockIdx.x * blockDim.x + threadIdx.x) * x128::size;
    if (i0 >= n) { return; }
    const float norm = sqrtf(*norm_sq);
    const float grad_scale = (grad_clip > 0.0f && norm > grad_clip) ? grad_clip / norm : 1.0f;
    if (i0 + x128::size > n) { // the tail
        for (int i = i0; i < n; i++) { adamw_one(params, master, grads, m_mem, v_mem, i, lr, beta1, beta2, bc1, bc2, eps, wd, grad_scale); }
        return;
    }
    float p[x128::size];
    if (master != NULL) {
        for (int k = 0; k < x128::size; k += f128::size) {
            const f128 w = load128(master + i0 + k);
            for (int j = 0; j < f128::size; j++) { p[k + j] = w[j]; }
        }
    } else {
        const x128 w = load128(params + i0);
        for (int k = 0; k < x128::size; k++) { p[k] = x2f(w[k]); }
    }
    x128 out;
    for (int k = 0; k < x128::size; k += f128::size) {
        const f128 g = load128cs(grads + i0 + k);
        f128 m = load128(m_mem + i0 + k), v = load128(v_mem + i0 + k);
        for (int j = 0; j < f128::size; j++) {
            const float gs = g[j] * grad_scale;
            m[j] = beta1 * m[j] + (1.0f - beta1) * gs;
            v[j] = beta2 * v[j] + (1.0f - beta2) * gs * gs;
            float& pk = p[k + j];
            pk -= lr * ((m[j] / bc1) / (sqrtf(v[j] / bc2) + eps) + wd * pk);
            out[k + j] = f2x(pk);
        }
        store128(m_mem + i0 + k, m);
        store128(v_mem + i0 + k, v);
        if (master != NULL) {
            f128 w;
            for (int j = 0; j < f128::size; j++) { w[j] = p[k + j]; }
            store128(master + i0 + k, w);
        }
    }
    store128(params + i0, out);
}

// one parameter tensor's update (n elements); norm_sq, grad_clip: the clipping, decided on the device
static void adamw_update(floatX* params, float* master, const float* grads, float* m_mem, float* v_mem, size_t n,
                         float lr, float beta1, float beta2, float bc1, float bc2, float eps, float wd,
                         const float* norm_sq, float grad_clip) {
    const unsigned blocks = (unsigned)((n + 256 * x128::size - 1) / (256 * x128::size));
    adamw_kernel<<<blocks, 256>>>(params, master, grads, m_mem, v_mem, (int)n, lr, beta1, beta2, bc1, bc2, eps, wd,
                                  norm_sq, grad_clip);
    launchCheck();
}

// sum of squares, per block (fixed grid, fixed order; n a multiple of f128::size); the launcher
// sums the blocks with sum_partials_kernel
#define NORM_BLOCKS 512
#define NORM_THREADS 512
__global__ void sum_squares_partial_kernel(float* partial, const float* x, size_t n) {
    __shared__ float shared32[32];
    float s = 0.0f;
    const size_t stride = (size_t)gridDim.x * blockDim.x * f128::size;
    for (size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * f128::size; i < n; i += stride) {
        const f128 v = load128cs(x + i);
        for (int j = 0; j < f128::size; j++) { s += v[j] * v[j]; }
    }
    s = block_sum(s, shared32);
    if (threadIdx.x == 0) { partial[blockIdx.x] = s; }
}

__global__ void sum_partials_kernel(float* out, const float* partial, int n) {
    __shared__ float shared32[32];
    float s = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) { s += partial[i]; }
    s = block_sum(s, shared32);
    if (threadIdx.x == 0) { out[0] = s; }
}

// out[0] = sum of squares of x (n elements), partial: NORM_BLOCKS floats of scratch. At most NORM_BLOCKS
// blocks, fewer when x does not fill them (no block without a pack to read); the grid depends on n
// only, so the sum's order, and its bits, are the same at every call.
static void sum_squares(float* out, float* partial, const float* x, size_t n) {
    const unsigned int blocks = std::min(grid_for(n, NORM_THREADS * f128::size), (unsigned int)NORM_BLOCKS);
    sum_squares_partial_kernel<<<blocks, NORM_THREADS>>>(partial, x, n);
    launchCheck();
    sum_partials_kernel<<<1, 1024>>>(out, partial, (int)blocks);
    launchCheck();
}

// ----------------------------------------------------------------------------
// parameter init and the master-weight copies

// counter-based normal numbers: the same init for a seed on every GPU and launch shape
__device__ __forceinline__ unsigned long long mix64(unsigned long long z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}
// master, when not NULL, holds the fp32 values of the window [master_lo, master_hi) of the n (this
// process's share of AdamW's state: dev/trainer/data_parallel.h); master[0] is element master_lo
__global__ void init_normal_kernel(floatX* params, float* master, size_t master_lo, size_t master_hi, size_t n, float std,
                                   unsigned long long seed, unsigned long long stream) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const unsigned long long h1 = mix64(seed * 0x9E3779B97F4A7C15ULL + stream * 0xD1B54A32D192ED03ULL + 2 * i + 1);
        const unsigned long long h2 = mix64(h1 ^ 0xABC98388FB8FAC03ULL);
        const float u1 = ((float)(h1 >> 40) + 0.5f) / 16777216.0f; // in (0, 1)
        const float u2 = (float)(h2 >> 40) / 16777216.0f;
        const float z = sqrtf(-2.0f * logf(u1)) * cosf(6.283185307179586f * u2);
        const float p = std * z;
        params[i] = f2x(p);
        if (master != NULL && i >= master_lo && i < master_hi) { master[i - master_lo] = p; }
    }
}

__global__ void fill_kernel(floatX* params, float* master, size_t master_lo, size_t master_hi, size_t n, float value) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        params[i] = f2x(value);
        if (master != NULL && i >= master_lo && i < master_hi) { master[i - master_lo] = value; }
    }
}

static void init_normal(floatX* params, float* master, size_t master_lo, size_t master_hi, size_t n, float std,
                        unsigned long long seed, unsigned long long stream) {
    init_normal_kernel<<<grid_for(n, 256), 256>>>(params, master, master_lo, master_hi, n, std, seed, stream);
    launchCheck();
}

static void fill_params(floatX* params, float* master, size_t master_lo, size_t master_hi, size_t n, float value) {
    fill_kernel<<<grid_for(n, 256), 256>>>(params, master, master_lo, master_hi, n, value);
    launchCheck();
}

// params = round(master): used after loading master weights from a training state
__global__ void copy_master_to_params_kernel(floatX* params, const float* master, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        params[i] = f2x(master[i]);
    }
}

__global__ void params_to_master_kernel(float* master, const floatX* params, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        master[i] = x2f(params[i]);
    }
}

static void copy_master_to_params(floatX* params, const float* master, size_t n) {
    copy_master_to_params_kernel<<<grid_for(n, 256), 256>>>(params, master, n);
    launchCheck();
}

static void params_to_master(float* master, const floatX* params, size_t n) {
    params_to_master_kernel<<<grid_for(n, 256), 256>>>(master, params, n);
    launchCheck();
}

// ----------------------------------------------------------------------------
// the model

// A batch as the host prepares it while the GPU works on the previous one (gpt2_stage_batch): tokens
// checked, copied into pinned memory, and the encoder buckets of the wte gradient built; the forward
// pass then copies it to the device without waiting (cudaMemcpyAsync). Layout of `host` and of the
// device's batch_d, for a capacity of cap = B * T positions (the allocated shape):
//   inputs [0, cap) | targets [cap, 2 cap) | the encoder buckets (EncoderBuckets, encoder_buckets_build)
typedef struct {
    int* host;          // pinned, batch_ints(cap) ints
    cudaEvent_t copied; // recorded after the copy that reads `host`: the buffer is free again after it
    int B, T;
    int has_targets;
    int num_chunks;     // encoder buckets (encoder_buckets_build): chunks of at most ENCODER_CHUNK positions
    int num_reduce;     // tokens with several chunks
} StagedBatch;

static inline size_t batch_ints(size_t cap) { return 2 * cap + encoder_bucket_ints(cap); }

// Which of these tensors exist for a shape, their sizes and offsets in the one allocation of
// Activations and of GradActivations, and the padding of the parameters (PARAM_ALIGN_ELEMS): the
// lists of attention_variants.cuh (gpt2_training_memory), which build/params prints.
typedef struct {
    floatX* encoded;                 // (B, T, C)
    floatX* ln1;                     // (L, B, T, C)
    float* ln1_mean; float* ln1_rstd; // (L, B, T)
    floatX* qkv;                     // (L, B, T, width)
    floatX* qres_r;                  // (L, B, T, C)    q_residual: RMSNorm_q(x)
    float* qres_rrms;                // (L, B, T)
    floatX* qres_h;                  // (L, B, T, C/2)  W1 r
    floatX* qres_hg;                 // (L, B, T, C/2)  gelu(W1 r)
    floatX* qres_u;                  // (L, B, T, C)    W2 gelu(W1 r)
    floatX* qres_f;                  // (L, B, T, C)    f = LN_q(u)
    float* qres_mean; float* qres_rstd; // (L, B, T)
    floatX* qres_q;                  // (L, B, T, C)    q = x + f
    floatX* perm[3];                 // unfused: q (L, B, H, T, hd), k and v (L, B, Hkv, T, hd); NULL when shared
    floatX* att;                     // unfused: (L, B, H, T, T)
    float* att_lse;                  // (L, B, H, T) fused path: log-sum-exp of each query row
    floatX* atty;                    // (L, B, T, C)
    floatX* residual2;               // (L, B, T, C)
    floatX* ln2;                     // (L, B, T, C)
    float* ln2_mean; float* ln2_rstd; // (L, B, T)
    floatX* fch;                     // (L, B, T, M)
    floatX* fch_gelu;                // (L, B, T, M), or one (B, T, M) with recompute
    floatX* residual3;               // (L, B, T, C)
    floatX* lnf;                     // (B, T, C)
    float* lnf_mean; float* lnf_rstd; // (B, T)
    floatX* output;                  // (B, T, Vp) logits, overwritten by dlogits in training
    float* losses;                   // (B, T)
    floatX* proj_out;                // (B, T, C) scratch: attention / MLP projection before the residual add
    floatX* yperm;                   // unfused: (B, H, T, hd) scratch
} Activations;

typedef struct {
    floatX* dresidual;   // (B, T, C) gradient of the residual stream
    floatX* dbuf_c;      // (B, T, C) dlnf, dln2, datty
    floatX* dbuf_m;      // (B, T, M) dfch
    floatX* dln1;        // (B, T, C)
    floatX* dqkv;        // (B, T, width)
    floatX* dperm[3];    // unfused: like perm, one layer
    floatX* dyperm;      // unfused: (B, H, T, hd)
    floatX* datt;        // unfused: (B, H, T, T)
    float* attn_delta;   // (B, H, T) fused path: rowsum(dout * out)
    floatX* dqres;       // (B, T, C)   q_residual
    floatX* du;          // (B, T, C)
    floatX* dhg;         // (B, T, C/2)
    floatX* dr;          // (B, T, C)
} GradActivations;

typedef struct {
    GPT2Config config;
    QKVLayout layout;
    int owner[3];
    size_t param_sizes[NUM_PARAMETER_TENSORS];   // elements, 0 for absent tensors
    size_t param_offsets[NUM_PARAMETER_TENSORS]; // element offset on the device
    size_t num_parameters;                       // real elements (the file's count)
    size_t num_parameters_padded;                // device elements, alignment gaps included (kept zero)
    floatX* params_memory;
    floatX* params[NUM_PARAMETER_TENSORS];       // NULL for absent tensors
    float* grads_memory;
    float* grads[NUM_PARAMETER_TENSORS];
    // AdamW's state, m, v and the fp32 master weights (BF16 builds with -w 1, else master_memory is NULL),
    // is kept for the parameters [opt_lo, opt_hi) of the device layout: all of them, or this process's
    // shard under ZeRO-1 (dev/trainer/data_parallel.h); m_memory[0] is parameter opt_lo's
    float* master_memory;
    float* m_memory;
    float* v_memory;
    size_t opt_lo, opt_hi;
    int use_master_weights;
    int recompute;                               // 1: fch_gelu, 2: also ln1, ln2 recomputed in the backward pass
    int attn_fused;                              // 1: fused (flash) attention: att_lse, attn_delta; 0: perm, att, ...
    int B, T;                                    // allocated batch shape
    TrainingMemory memory;                       // what gpt2_build allocates (attention_variants.cuh)
    void* acts_memory;
    size_t acts_bytes;
    Activations acts;
    void* grad_acts_memory;
    size_t grad_acts_bytes;
    GradActivations grad_acts;
    int* batch_d;                                // the staged batch on the device (StagedBatch's layout)
    int* inputs_d; int* targets_d;               // (B, T) each, in batch_d
    StagedBatch staging[2];                      // pinned host buffers, used in turn
    StagedBatch* staged;                         // the batch the next gpt2_forward_staged runs, or NULL
    int next_staging;
    int cur_B, cur_T;                            // the shape of the last forward pass
    int cur_chunks, cur_reduce;                  // its encoder buckets (EncoderBuckets of the staged batch)
    float* wte_scratch_d;                        // (ENCODER_SCRATCH_ROWS(B*T), C) partial sums of frequent tokens
    float* norm_partial_d;                       // (NORM_BLOCKS + 1): the last is the squared gradient norm
    double* loss_sum_d;                          // sum of the losses since gpt2_loss_sums last read it
    long long loss_rows;                         // how many losses that sum holds
    int logits_rows;                             // rows of acts.output: the classifier's chunk
    int targets_present;                         // the last forward formed the classifier's gradients
} GPT2;

static void gpt2_layout_params(GPT2* model) {
    model->layout = qkv_layout(&model->config);
    attn_owners(&model->layout, model->owner);
    model->num_parameters = gpt2_num_parameters(&model->config);
    model->num_parameters_padded = gpt2_param_layout(&model->config, model->param_sizes, model->param_offsets);
}

// Where each tensor of attention_variants.cuh's lists (ACT_*, GACT_*) lives in Activations and
// GradActivations: slots[id] is the address of its pointer field.
static void activation_slots(Activations* a, void** slots[NUM_ACT_TENSORS]) {
    for (int i = 0; i < NUM_ACT_TENSORS; i++) { slots[i] = NULL; }
    slots[ACT_ENCODED] = (void**)&a->encoded;
    slots[ACT_LN1] = (void**)&a->ln1;
    slots[ACT_LN1_MEAN] = (void**)&a->ln1_mean;
    slots[ACT_LN1_RSTD] = (void**)&a->ln1_rstd;
    slots[ACT_QKV] = (void**)&a->qkv;
    slots[ACT_QRES_R] = (void**)&a->qres_r;
    slots[ACT_QRES_RRMS] = (void**)&a->qres_rrms;
    slots[ACT_QRES_H] = (void**)&a->qres_h;
    slots[ACT_QRES_HG] = (void**)&a->qres_hg;
    slots[ACT_QRES_U] = (void**)&a->qres_u;
    slots[ACT_QRES_F] = (void**)&a->qres_f;
    slots[ACT_QRES_MEAN] = (void**)&a->qres_mean;
    slots[ACT_QRES_RSTD] = (void**)&a->qres_rstd;
    slots[ACT_QRES_Q] = (void**)&a->qres_q;
    slots[ACT_PERM_Q] = (void**)&a->perm[0];
    slots[ACT_PERM_K] = (void**)&a->perm[1];
    slots[ACT_PERM_V] = (void**)&a->perm[2];
    slots[ACT_ATT] = (void**)&a->att;
    slots[ACT_ATT_LSE] = (void**)&a->att_lse;
    slots[ACT_ATTY] = (void**)&a->atty;
    slots[ACT_RESIDUAL2] = (void**)&a->residual2;
    slots[ACT_LN2] = (void**)&a->ln2;
    slots[ACT_LN2_MEAN] = (void**)&a->ln2_mean;
    slots[ACT_LN2_RSTD] = (void**)&a->ln2_rstd;
    slots[ACT_FCH] = (void**)&a->fch;
    slots[ACT_FCH_GELU] = (void**)&a->fch_gelu;
    slots[ACT_RESIDUAL3] = (void**)&a->residual3;
    slots[ACT_LNF] = (void**)&a->lnf;
    slots[ACT_LNF_MEAN] = (void**)&a->lnf_mean;
    slots[ACT_LNF_RSTD] = (void**)&a->lnf_rstd;
    slots[ACT_OUTPUT] = (void**)&a->output;
    slots[ACT_LOSSES] = (void**)&a->losses;
    slots[ACT_PROJ_OUT] = (void**)&a->proj_out;
    slots[ACT_YPERM] = (void**)&a->yperm;
}

static void grad_activation_slots(GradActivations* g, void** slots[NUM_GRAD_ACT_TENSORS]) {
    for (int i = 0; i < NUM_GRAD_ACT_TENSORS; i++) { slots[i] = NULL; }
    slots[GACT_DRESIDUAL] = (void**)&g->dresidual;
    slots[GACT_DBUF_C] = (void**)&g->dbuf_c;
    slots[GACT_DBUF_M] = (void**)&g->dbuf_m;
    slots[GACT_DLN1] = (void**)&g->dln1;
    slots[GACT_DQKV] = (void**)&g->dqkv;
    slots[GACT_DPERM_Q] = (void**)&g->dperm[0];
    slots[GACT_DPERM_K] = (void**)&g->dperm[1];
    slots[GACT_DPERM_V] = (void**)&g->dperm[2];
    slots[GACT_DYPERM] = (void**)&g->dyperm;
    slots[GACT_DATT] = (void**)&g->datt;
    slots[GACT_ATTN_DELTA] = (void**)&g->attn_delta;
    slots[GACT_DQRES] = (void**)&g->dqres;
    slots[GACT_DU] = (void**)&g->du;
    slots[GACT_DHG] = (void**)&g->dhg;
    slots[GACT_DR] = (void**)&g->dr;
}

// Points each tensor of a list into its allocation at `base` (NULL for those not allocated).
static void carve_tensors(char* base, const TensorAlloc* list, void** const* slots, const char* const* names, int n) {
    for (int i = 0; i < n; i++) {
        if (slots[i] == NULL) {
            fprintf(stderr, "error: tensor %s of attention_variants.cuh's list has no field in train_gpt2.cu "
                    "(HINT: add it to activation_slots / grad_activation_slots) at %s:%d\n", names[i], __FILE__, __LINE__);
            exit(EXIT_FAILURE);
        }
        *slots[i] = list[i].count > 0 ? base + list[i].offset : NULL;
    }
    TENSOR_RED_ZONES(base, list, names, n); // on the CPU runtime: the gap after each tensor (training_memory.h)
}

// Sets up everything on the device for a (checked) config: parameters (zero), gradients, AdamW
// moments, master weights, activations for (B, T) on one attention path (attn_fused 1: the fused
// flash path, see qkv_fused_attention_available; 0: unfused). What is allocated, how big and where
// is gpt2_training_memory's (attention_variants.cuh), the numbers build/params prints.
// Parameters are filled by gpt2_init_random or gpt2_load_params afterwards.
// opt_lo, opt_hi: the parameters whose AdamW state this process keeps (clamped to the layout's count:
// 0, SIZE_MAX is all of them).
static void gpt2_build_sharded(GPT2* model, const GPT2Config* config, int B, int T, int use_master_weights, int recompute,
                               int attn_fused, size_t opt_lo, size_t opt_hi) {
    memset(model, 0, sizeof(*model));
    model->config = *config;
    model->B = B;
    model->T = T;
    model->use_master_weights = PRECISION_IS_BF16 ? use_master_weights : 0;
    model->recompute = recompute;
    // a caller's request for the fused path only stands where a flash kernel exists: the unfused
    // code must never run on the fused path's buffers
    model->attn_fused = attn_fused && attention_fused_supported(qkv_head_dim(config));
    gpt2_layout_params(model);
    const TrainingMemory* mem = &model->memory;
    gpt2_training_memory(&model->config, B, T, sizeof(floatX), model->use_master_weights, recompute,
                         model->attn_fused, &model->memory);
    model->opt_hi = opt_hi < model->num_parameters_padded ? opt_hi : model->num_parameters_padded;
    model->opt_lo = opt_lo < model->opt_hi ? opt_lo : model->opt_hi;
    const size_t opt_floats = model->opt_hi - model->opt_lo;
    const int has_master = mem->master_bytes > 0;
    if (opt_floats < model->num_parameters_padded) { // a shard: the memory line counts what is allocated
        const size_t whole = mem->optimizer_bytes + mem->master_bytes;
        model->memory.optimizer_bytes = 2 * opt_floats * sizeof(float);
        model->memory.master_bytes = has_master ? opt_floats * sizeof(float) : 0;
        model->memory.total_bytes -= whole - mem->optimizer_bytes - mem->master_bytes;
    }
    // an empty shard (the last process of a small model) still gets a buffer: a NULL master_memory
    // means "no master weights"
    const size_t moment_bytes = opt_floats > 0 ? opt_floats * sizeof(float) : 16; // m and v alike
    const size_t master_bytes = has_master ? moment_bytes : 0;
    model->params_memory = (floatX*)device_malloc(mem->param_bytes, "parameters");
    model->grads_memory = (float*)device_malloc(mem->grad_bytes, "parameter gradients");
    model->m_memory = (float*)device_malloc(moment_bytes, "AdamW m");
    model->v_memory = (float*)device_malloc(moment_bytes, "AdamW v");
    cudaCheck(cudaMemset(model->params_memory, 0, mem->param_bytes));
    cudaCheck(cudaMemset(model->grads_memory, 0, mem->grad_bytes));
    cudaCheck(cudaMemset(model->m_memory, 0, moment_bytes));
    cudaCheck(cudaMemset(model->v_memory, 0, moment_bytes));
    if (master_bytes > 0) {
        model->master_memory = (float*)device_malloc(master_bytes, "fp32 master weights");
        cudaCheck(cudaMemset(model->master_memory, 0, master_bytes));
    }
    PARAM_RED_ZONES(model); // on the CPU runtime: the zeros after each tensor, watched (training_memory.h)
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
        const int present = model->param_sizes[i] > 0;
        model->params[i] = present ? model->params_memory + model->param_offsets[i] : NULL;
        model->grads[i] = present ? model->grads_memory + model->param_offsets[i] : NULL;
    }

    // activations: one allocation, carved by the list
    void** slots[NUM_ACT_TENSORS];
    activation_slots(&model->acts, slots);
    model->acts_bytes = mem->acts_bytes;
    model->acts_memory = device_malloc(mem->acts_bytes, "activations");
    carve_tensors((char*)model->acts_memory, mem->acts, slots, act_tensor_names, NUM_ACT_TENSORS);

    const GPT2Config* c = &model->config;
    const size_t C = c->channels, M = c->mlp_hidden, W = model->layout.width;
    const size_t BT = (size_t)B * T;
    model->logits_rows = gpt2_logits_rows(B, T);
    model->batch_d = (int*)device_malloc(batch_ints(BT) * sizeof(int), "batch");
    model->inputs_d = model->batch_d;
    model->targets_d = model->batch_d + BT;
    for (int i = 0; i < 2; i++) {
        StagedBatch* sb = &model->staging[i];
        cudaCheck(cudaMallocHost((void**)&sb->host, batch_ints(BT) * sizeof(int)));
        cudaCheck(cudaEventCreateWithFlags(&sb->copied, cudaEventDisableTiming));
    }
    model->wte_scratch_d = (float*)device_malloc(encoder_scratch_rows(BT) * C * sizeof(float), "wte gradient scratch");
    model->norm_partial_d = (float*)device_malloc((NORM_BLOCKS + 1) * sizeof(float), "gradient norm");
    model->loss_sum_d = (double*)device_malloc(sizeof(double), "loss sum");
    cudaCheck(cudaMemset(model->loss_sum_d, 0, sizeof(double)));

    // the reductions' scratch, sized for the widest bias / norm (2 C, M or the fused projection)
    int max_cols = 2 * (int)C;
    if ((int)M > max_cols) { max_cols = (int)M; }
    if ((int)W > max_cols) { max_cols = (int)W; }
    reduce_scratch_reserve(max_cols);
}

// moments, master weights, activations for (B, T) on one attention path (gpt2_build_sharded), with
// AdamW's state for every parameter
static void gpt2_build(GPT2* model, const GPT2Config* config, int B, int T, int use_master_weights, int recompute,
                       int attn_fused) {
    gpt2_build_sharded(model, config, B, T, use_master_weights, recompute, attn_fused, 0, SIZE_MAX);
}

// The part of parameter tensor i (its n elements at offset off) inside [opt_lo, opt_hi): element
// *lo to *hi of the tensor (an empty window when *lo == *hi), whose state is at state_index.
static void opt_window(const GPT2* model, size_t off, size_t n, size_t* lo, size_t* hi, size_t* state_index) {
    const size_t a = off > model->opt_lo ? off : model->opt_lo;
    const size_t b = off + n < model->opt_hi ? off + n : model->opt_hi;
    *lo = a < b ? a - off : 0;
    *hi = a < b ? b - off : 0;
    *state_index = a < b ? a - model->opt_lo : 0;
}

// the activation gradients (one layer's, reused by every layer): one allocation, carved by the
// list of gpt2_training_memory that gpt2_build computed
static void gpt2_build_grad_acts(GPT2* model) {
    if (model->grad_acts_memory != NULL) { return; }
    const TrainingMemory* mem = &model->memory;
    void** slots[NUM_GRAD_ACT_TENSORS];
    grad_activation_slots(&model->grad_acts, slots);
    model->grad_acts_bytes = mem->grad_acts_bytes;
    model->grad_acts_memory = device_malloc(mem->grad_acts_bytes, "activation gradients");
    carve_tensors((char*)model->grad_acts_memory, mem->grad_acts, slots, grad_act_tensor_names, NUM_GRAD_ACT_TENSORS);
}

static void gpt2_free(GPT2* model) {
    cudaCheck(cudaFree(model->params_memory));
    cudaCheck(cudaFree(model->grads_memory));
    cudaCheck(cudaFree(model->m_memory));
    cudaCheck(cudaFree(model->v_memory));
    if (model->master_memory != NULL) { cudaCheck(cudaFree(model->master_memory)); }
    cudaCheck(cudaFree(model->acts_memory));
    if (model->grad_acts_memory != NULL) { cudaCheck(cudaFree(model->grad_acts_memory)); }
    cudaCheck(cudaFree(model->batch_d));
    for (int i = 0; i < 2; i++) {
        cudaCheck(cudaEventDestroy(model->staging[i].copied));
        cudaCheck(cudaFreeHost(model->staging[i].host));
    }
    cudaCheck(cudaFree(model->wte_scratch_d));
    cudaCheck(cudaFree(model->norm_partial_d));
    cudaCheck(cudaFree(model->loss_sum_d));
    memset(model, 0, sizeof(*model));
}

// GPT-2 init (the reference's init_weights): N(0, 0.02), residual projections N(0, 0.02/sqrt(2L)),
// biases 0, norm gains 1, q_residual's W1/W2 N(0, 0.02); padded vocab rows stay 0.
static void gpt2_init_random(GPT2* model, unsigned long long seed) {
    const GPT2Config* c = &model->config;
    const float std_res = 0.02f / sqrtf(2.0f * c->num_layers);
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
        size_t n = model->param_sizes[i];
        if (n == 0) { continue; }
        floatX* p = model->params[i];
        size_t mlo, mhi, state_index;
        opt_window(model, model->param_offsets[i], n, &mlo, &mhi, &state_index);
        float* mw = model->master_memory != NULL ? model->master_memory + state_index : NULL;
        const int is_gain = i == PARAM_LN1W || i == PARAM_LN2W || i == PARAM_LNFW || i == PARAM_QRES_RMSW || i == PARAM_QRES_LNW;
        const int is_bias = i == PARAM_LN1B || i == PARAM_QKVB || i == PARAM_ATTPROJB || i == PARAM_LN2B ||
                            i == PARAM_FCB || i == PARAM_FCPROJB || i == PARAM_LNFB;
        if (is_gain) {
            fill_params(p, mw, mlo, mhi, n, 1.0f);
        } else if (is_bias) {
            fill_params(p, mw, mlo, mhi, n, 0.0f);
        } else {
            if (i == PARAM_WTE || i == PARAM_LM_HEAD) { n = (size_t)c->vocab_size * c->channels; }
            const float std = param_tensor_residual_scaled[i] ? std_res : 0.02f;
            init_normal(p, mw, mlo, mhi, n, std, seed, (unsigned long long)i);
        }
    }
    cudaCheck(cudaDeviceSynchronize());
}

// checkpoint files: the tensors between the files and the device, and the checkpoint of a step on
// every process (dev/trainer/checkpoint.cuh; dev/trainer/checkpoint_files.h reads and checks the headers)
#include "dev/trainer/checkpoint.cuh"

// ----------------------------------------------------------------------------
// forward, backward, update

static AttnShape gpt2_attn_shape(const GPT2* model, int B, int T) {
    return attn_shape_make(&model->config, B, T, model->attn_fused);
}

// layer l's attention buffers for a (B, T) pass (each NULL where the model's attention path has none)
static AttnBuffers gpt2_attn_buffers(const GPT2* model, int l, int B, int T) {
    const GPT2Config* c = &model->config;
    const size_t BT = (size_t)B * T, H = c->num_heads;
    const size_t kv_size[3] = {(size_t)c->channels, (size_t)qkv_kv_channels(c), (size_t)qkv_kv_channels(c)};
    const Activations* a = &model->acts;
    AttnBuffers bufs;
    for (int r = 0; r < 3; r++) { bufs.perm[r] = lslice(a->perm[r], l, BT * kv_size[r]); }
    bufs.att = lslice(a->att, l, (size_t)B * H * T * T);
    bufs.yperm = a->yperm;
    bufs.lse = lslice(a->att_lse, l, (size_t)B * H * T);
    return bufs;
}

// layer l's residual-query activations for a pass of BT rows (NULL pointers where the layout has none)
static QResActs gpt2_qres_acts(const GPT2* model, int l, size_t BT) {
    const Activations* a = &model->acts;
    const size_t C = (size_t)model->config.channels;
    QResActs q;
    q.r = lslice(a->qres_r, l, BT * C);
    q.rrms = lslice(a->qres_rrms, l, BT);
    q.h = lslice(a->qres_h, l, BT * (C / 2));
    q.hg = lslice(a->qres_hg, l, BT * (C / 2));
    q.u = lslice(a->qres_u, l, BT * C);
    q.f = lslice(a->qres_f, l, BT * C);
    q.mean = lslice(a->qres_mean, l, BT);
    q.rstd = lslice(a->qres_rstd, l, BT);
    q.q = lslice(a->qres_q, l, BT * C);
    return q;
}

static void check_tokens(const int* tokens, size_t n, int V, const char* what) {
    for (size_t i = 0; i < n; i++) {
        if (tokens[i] < 0 || tokens[i] >= V) {
            fprintf(stderr, "error: %s token %d at position %zu is outside the model's vocabulary [0, %d) "
                    "(HINT: data tokenized for another vocabulary?)\n", what, tokens[i], i, V);
            exit(EXIT_FAILURE);
        }
    }
}

// Prepares a (B, T) batch on the host for the next gpt2_forward_staged (B * T at most the allocated
// positions, T at most the allocated T): checks the tokens, copies them into a pinned buffer and,
// with targets, builds the encoder buckets. Waits only for the copy that last read that buffer, two
// batches ago, so it runs while the GPU works on the previous batch.
static void gpt2_stage_batch(GPT2* model, const int* inputs, const int* targets, int B, int T) {
    const size_t cap = (size_t)model->B * model->T, n = (size_t)B * T;
    if (B < 1 || T < 1 || n > cap || T > model->T) {
        fprintf(stderr, "error: internal: a (%d, %d) batch for a model built for (%d, %d)\n", B, T, model->B, model->T);
        exit(EXIT_FAILURE);
    }
    if (model->staged != NULL) { // its forward pass has not run: a second batch would take its place
        fprintf(stderr, "error: internal: a batch staged while another waits for its forward pass\n");
        exit(EXIT_FAILURE);
    }
    const int V = model->config.vocab_size;
    StagedBatch* sb = &model->staging[model->next_staging];
    model->next_staging ^= 1;
    cudaCheck(cudaEventSynchronize(sb->copied));
    check_tokens(inputs, n, V, "input");
    memcpy(sb->host, inputs, n * sizeof(int));
    sb->B = B;
    sb->T = T;
    sb->has_targets = targets != NULL;
    sb->num_chunks = sb->num_reduce = 0;
    if (targets != NULL) {
        check_tokens(targets, n, V, "target");
        memcpy(sb->host + cap, targets, n * sizeof(int));
        static std::vector<int> count; // host scratch, reused
        const EncoderBuckets o = encoder_buckets_layout(2 * cap, cap);
        encoder_buckets_build(sb->host, &o, inputs, (int)n, V, &count, &sb->num_chunks, &sb->num_reduce);
        const int slots = sb->host[o.reduce_start + sb->num_reduce];
        if ((size_t)slots > encoder_scratch_rows(cap)) { // cannot happen: encoder_scratch_rows is a bound
            fprintf(stderr, "error: internal: %d wte scratch rows needed, %zu allocated\n", slots, encoder_scratch_rows(cap));
            exit(EXIT_FAILURE);
        }
    }
    model->staged = sb;
}

// The forward pass over the staged batch. With targets: per-position losses, added on the device to
// the sum gpt2_mean_loss reads; and, when dloss > 0 (training), the classifier's backward right away:
// dlogits = dloss * (softmax - onehot) in place of each chunk's logits, dlnf (grad_acts.dbuf_c) and
// dhead += ..., so gpt2_zero_grad must come before it. dloss = 1 / (B * T * grad_accum_steps) makes
// the accumulated gradient the mean's. Without targets the logits stay in acts.output (B * T at most
// logits_rows: sampling, the test). Nothing here waits for the GPU.
static void gpt2_forward_staged(GPT2* model, float dloss) {
    StagedBatch* sb = model->staged;
    if (sb == NULL) {
        fprintf(stderr, "error: internal: gpt2_forward_staged without a staged batch\n");
        exit(EXIT_FAILURE);
    }
    model->staged = NULL;
    const GPT2Config* c = &model->config;
    const int B = sb->B, T = sb->T, C = c->channels, L = c->num_layers, M = c->mlp_hidden;
    const int V = c->vocab_size, Vp = c->padded_vocab_size, W = model->layout.width;
    const int N = B * T;
    const size_t BT = (size_t)N;
    const int has_targets = sb->has_targets;
    if (!has_targets && N > model->logits_rows) {
        fprintf(stderr, "error: internal: a forward pass without targets keeps %d rows of logits, this one has %d\n",
                model->logits_rows, N);
        exit(EXIT_FAILURE);
    }
    const size_t cap = (size_t)model->B * model->T;
    const size_t ints = has_targets ? batch_ints(cap) : BT; // without targets the inputs are all there is
    cudaCheck(cudaMemcpyAsync(model->batch_d, sb->host, ints * sizeof(int), cudaMemcpyHostToDevice, 0));
    cudaCheck(cudaEventRecord(sb->copied, 0));
    model->cur_B = B;
    model->cur_T = T;
    model->cur_chunks = sb->num_chunks;
    model->cur_reduce = sb->num_reduce;
    model->targets_present = has_targets && dloss > 0.0f; // the classifier's gradients are formed below
    Activations* a = &model->acts;
    floatX* const* p = model->params;
    const size_t CC = (size_t)C * C, MC = (size_t)M * C;
    const size_t ln_stride = model->recompute >= 2 ? 0 : BT * C; // -r 2: one layer's ln1 and ln2, recomputed
    const AttnShape shape = gpt2_attn_shape(model, B, T);

    encoder_forward(a->encoded, model->inputs_d, p[PARAM_WTE], p[PARAM_WPE], B, T, C);
    profile_mark(PROF_ENCODER_FWD);
    // every LayerNorm after the first runs fused with the residual add before it (residual_layernorm_forward)
    layernorm_forward(a->ln1, a->ln1_mean, a->ln1_rstd, a->encoded, p[PARAM_LN1W], p[PARAM_LN1B], N, C);
    profile_mark(PROF_LN1_FWD);
    for (int l = 0; l < L; l++) {
        const floatX* residual = l == 0 ? a->encoded : a->residual3 + (size_t)(l - 1) * BT * C;
        floatX* ln1 = a->ln1 + (size_t)l * ln_stride;
        floatX* qkv = a->qkv + (size_t)l * BT * W;
        floatX* atty = a->atty + (size_t)l * BT * C;
        floatX* residual2 = a->residual2 + (size_t)l * BT * C;
        floatX* ln2 = a->ln2 + (size_t)l * ln_stride;
        float* ln2_mean = a->ln2_mean + (size_t)l * BT;
        float* ln2_rstd = a->ln2_rstd + (size_t)l * BT;
        floatX* fch = a->fch + (size_t)l * BT * M;
        floatX* fch_gelu = a->fch_gelu + (model->recompute >= 1 ? 0 : (size_t)l * BT * M);
        floatX* residual3 = a->residual3 + (size_t)l * BT * C;
        const AttnBuffers attn_bufs = gpt2_attn_buffers(model, l, B, T);
        const QResActs qres = gpt2_qres_acts(model, l, BT);

        const QKVSources<const floatX> attn_src = qkv_forward(qkv, &qres, ln1, &model->layout, p, l, N, C);
        attention_forward(atty, &attn_bufs, attn_src, &shape);
        profile_mark(PROF_ATTN_FWD);
        matmul_forward(a->proj_out, atty, lslice(p[PARAM_ATTPROJW], l, CC), lslice(p[PARAM_ATTPROJB], l, C), N, C, C);
        profile_mark(PROF_ATTPROJ_FWD);
        residual_layernorm_forward(residual2, ln2, ln2_mean, ln2_rstd, residual, a->proj_out, lslice(p[PARAM_LN2W], l, C),
                                   lslice(p[PARAM_LN2B], l, C), N, C);
        profile_mark(PROF_LN2_FWD);
        matmul_forward_gelu(fch_gelu, fch, ln2, lslice(p[PARAM_FCW], l, MC), lslice(p[PARAM_FCB], l, M), N, C, M);
        profile_mark(PROF_FC_FWD);
        matmul_forward(a->proj_out, fch_gelu, lslice(p[PARAM_FCPROJW], l, MC), lslice(p[PARAM_FCPROJB], l, C), N, M, C);
        profile_mark(PROF_FCPROJ_FWD);
        if (l + 1 < L) { // residual3, then the next layer's ln1 from it
            residual_layernorm_forward(residual3, a->ln1 + (size_t)(l + 1) * ln_stride, a->ln1_mean + (size_t)(l + 1) * BT,
                                       a->ln1_rstd + (size_t)(l + 1) * BT, residual2, a->proj_out,
                                       lslice(p[PARAM_LN1W], l + 1, C), lslice(p[PARAM_LN1B], l + 1, C), N, C);
        } else {
            residual_layernorm_forward(residual3, a->lnf, a->lnf_mean, a->lnf_rstd, residual2, a->proj_out,
                                       p[PARAM_LNFW], p[PARAM_LNFB], N, C);
        }
        profile_mark(l + 1 < L ? PROF_LN1_FWD : PROF_LNF_FWD);
    }
    const floatX* head = c->tied_head ? p[PARAM_WTE] : p[PARAM_LM_HEAD];
    if (!has_targets) {
        matmul_forward(a->output, a->lnf, head, NULL, N, C, Vp);
        return;
    }
    // the classifier, logits_rows rows at a time (classifier_forward)
    float* dhead = c->tied_head ? model->grads[PARAM_WTE] : model->grads[PARAM_LM_HEAD];
    if (model->targets_present) { gpt2_build_grad_acts(model); }
    GradActivations* g = &model->grad_acts;
    const int R = model->logits_rows;
    if ((size_t)(N > R ? 2 : 1) * R * Vp > model->memory.acts[ACT_OUTPUT].count) { // a test's smaller chunk must fit twice
        fprintf(stderr, "error: internal: the classifier's %s of %d rows do not fit its buffer\n", N > R ? "two chunks" : "chunk", R);
        exit(EXIT_FAILURE);
    }
    classifier_forward(a->output, a->losses, model->targets_present ? g->dbuf_c : NULL, dhead, a->lnf, head,
                       model->targets_d, N, model->logits_rows, C, V, Vp, dloss, model->targets_present);
    loss_sum(model->loss_sum_d, a->losses, N);
    profile_mark(PROF_CLASSIFIER);
    model->loss_rows += N;
}

// stages and runs one forward pass (the test, validation and sampling; training overlaps the two)
static void gpt2_forward(GPT2* model, const int* inputs, const int* targets, float dloss) {
    gpt2_stage_batch(model, inputs, targets, model->B, model->T);
    gpt2_forward_staged(model, dloss);
}

// The sum of those losses and their count, into sum_rows[0] and [1] (the processes of a data-parallel
// run add theirs up before they divide); both 0 when there was none. Waits for the GPU.
static void gpt2_loss_sums(GPT2* model, double sum_rows[2]) {
    sum_rows[0] = 0.0;
    sum_rows[1] = (double)model->loss_rows;
    if (model->loss_rows == 0) { return; }
    cudaCheck(cudaMemcpy(&sum_rows[0], model->loss_sum_d, sizeof(double), cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemset(model->loss_sum_d, 0, sizeof(double)));
    model->loss_rows = 0;
}

// the mean of sums of losses, or -1 for none
static float loss_mean_of(const double sum_rows[2]) {
    return sum_rows[1] > 0 ? (float)(sum_rows[0] / sum_rows[1]) : -1.0f;
}

static void gpt2_zero_grad(GPT2* model) {
    cudaCheck(cudaMemsetAsync(model->grads_memory, 0, model->num_parameters_padded * sizeof(float), 0));
}

// Adds this micro-batch's gradients to model->grads (the classifier's are already there). Needs
// gpt2_forward_staged with targets and dloss > 0 just before.
static void gpt2_backward(GPT2* model) {
    if (!model->targets_present) {
        fprintf(stderr, "error: internal: gpt2_backward without a forward pass with targets\n");
        exit(EXIT_FAILURE);
    }
    const GPT2Config* c = &model->config;
    const int B = model->cur_B, T = model->cur_T, C = c->channels, L = c->num_layers, M = c->mlp_hidden;
    const int W = model->layout.width;
    const int N = B * T;
    const size_t BT = (size_t)N;
    Activations* a = &model->acts;
    GradActivations* g = &model->grad_acts;
    floatX* const* p = model->params;
    float* const* gr = model->grads;
    const size_t CC = (size_t)C * C, MC = (size_t)M * C;
    const size_t ln_stride = model->recompute >= 2 ? 0 : BT * C;
    const AttnShape shape = gpt2_attn_shape(model, B, T);
    AttnGradBuffers attn_gbufs;
    for (int r = 0; r < 3; r++) { attn_gbufs.dperm[r] = g->dperm[r]; }
    attn_gbufs.datt = g->datt;
    attn_gbufs.dyperm = g->dyperm;
    attn_gbufs.delta = g->attn_delta;
    const QResGradScratch qres_scratch = {g->du, g->dhg, g->dr};
    const QKVSources<floatX> dattn_src = qkv_sources<floatX>(g->dqkv, g->dln1, g->dqres);

    // dbuf_c holds dlnf (the forward pass ran the classifier's backward)
    const floatX* last = a->residual3 + (size_t)(L - 1) * BT * C;
    norm_backward(g->dresidual, gr[PARAM_LNFW], gr[PARAM_LNFB], g->dbuf_c, last, p[PARAM_LNFW],
                       a->lnf_mean, a->lnf_rstd, N, C, 0);
    profile_mark(PROF_LNF_BWD);

    for (int l = L - 1; l >= 0; l--) {
        const floatX* residual = l == 0 ? a->encoded : a->residual3 + (size_t)(l - 1) * BT * C;
        floatX* ln1 = a->ln1 + (size_t)l * ln_stride;
        float* ln1_mean = a->ln1_mean + (size_t)l * BT;
        float* ln1_rstd = a->ln1_rstd + (size_t)l * BT;
        const floatX* atty = a->atty + (size_t)l * BT * C;
        const floatX* residual2 = a->residual2 + (size_t)l * BT * C;
        floatX* ln2 = a->ln2 + (size_t)l * ln_stride;
        float* ln2_mean = a->ln2_mean + (size_t)l * BT;
        float* ln2_rstd = a->ln2_rstd + (size_t)l * BT;
        const floatX* fch = a->fch + (size_t)l * BT * M;
        floatX* fch_gelu = a->fch_gelu + (model->recompute >= 1 ? 0 : (size_t)l * BT * M);
        const floatX* qkv = a->qkv + (size_t)l * BT * W;
        const QResActs qres = gpt2_qres_acts(model, l, BT);
        const QKVSources<const floatX> attn_src = qkv_sources<const floatX>(qkv, ln1, qres.q);
        const AttnBuffers attn_bufs = gpt2_attn_buffers(model, l, B, T);

        // -r 2: this layer's LayerNorm outputs again, from the stored residuals (the same kernel on the
        // same inputs: bit-identical to the forward pass's)
        if (model->recompute >= 2) {
            layernorm_forward(ln1, ln1_mean, ln1_rstd, residual, lslice(p[PARAM_LN1W], l, C), lslice(p[PARAM_LN1B], l, C), N, C);
            layernorm_forward(ln2, ln2_mean, ln2_rstd, residual2, lslice(p[PARAM_LN2W], l, C), lslice(p[PARAM_LN2B], l, C), N, C);
        }
        // MLP: residual3 = residual2 + fcproj(gelu(fc(ln2(residual2)))); dresidual is d residual3
        if (model->recompute >= 1) {
            gelu_forward(fch_gelu, fch, BT * M);
            profile_mark(PROF_RECOMPUTE);
        }
        matmul_backward_gelu(g->dbuf_m, lslice(gr[PARAM_FCPROJW], l, MC), lslice(gr[PARAM_FCPROJB], l, C), g->dresidual,
                             fch_gelu, lslice(p[PARAM_FCPROJW], l, MC), fch, N, M, C);
        profile_mark(PROF_FCPROJ_BWD);
        matmul_backward(g->dbuf_c, lslice(gr[PARAM_FCW], l, MC), lslice(gr[PARAM_FCB], l, M), g->dbuf_m, ln2,
                        lslice(p[PARAM_FCW], l, MC), N, C, M, 0.0f);
        profile_mark(PROF_FC_BWD);
        // dresidual becomes d residual2: the skip path plus LN2's input gradient
        norm_backward(g->dresidual, lslice(gr[PARAM_LN2W], l, C), lslice(gr[PARAM_LN2B], l, C), g->dbuf_c,
                           residual2, lslice(p[PARAM_LN2W], l, C), ln2_mean, ln2_rstd, N, C, 1);
        profile_mark(PROF_LN2_BWD);

        // attention: residual2 = residual + attproj(attention(ln1(residual)))
        matmul_backward(g->dbuf_c, lslice(gr[PARAM_ATTPROJW], l, CC), lslice(gr[PARAM_ATTPROJB], l, C), g->dresidual,
                        atty, lslice(p[PARAM_ATTPROJW], l, CC), N, C, C, 0.0f);
        profile_mark(PROF_ATTPROJ_BWD);
        const int wrote_dln1 = attention_backward(dattn_src, &attn_gbufs, g->dbuf_c, atty, &attn_bufs, attn_src, &shape);
        qkv_backward(dattn_src, wrote_dln1, &qres_scratch, &qres, ln1, &model->layout, p, gr, l, N, C);
        // dresidual becomes d residual (this layer's input): skip path plus LN1's input gradient
        norm_backward(g->dresidual, lslice(gr[PARAM_LN1W], l, C), lslice(gr[PARAM_LN1B], l, C), g->dln1, residual,
                           lslice(p[PARAM_LN1W], l, C), ln1_mean, ln1_rstd, N, C, 1);
        profile_mark(PROF_LN1_BWD);
    }
    // encoder: dresidual is d encoded
    const size_t cap = (size_t)model->B * model->T;
    const EncoderBuckets o = encoder_buckets_layout(2 * cap, cap);
    encoder_backward_wpe(gr[PARAM_WPE], g->dresidual, B, T, C);
    encoder_backward_wte(gr[PARAM_WTE], model->wte_scratch_d, g->dresidual, model->batch_d, &o, model->cur_chunks,
                         model->cur_reduce, C);
    profile_mark(PROF_ENCODER_BWD);
}

// Global L2 norm of every gradient, squared, into norm_partial_d[NORM_BLOCKS] (fixed-order reduction,
// stays on the device: AdamW reads it there for the clipping). A ZeRO-1 process's part of it: the
// gradients of its shard [opt_lo, opt_hi), the only ones its reduce-scatter summed.
static void gpt2_grad_norm_sq(GPT2* model) {
    float* out = model->norm_partial_d + NORM_BLOCKS;
    if (model->opt_hi == model->opt_lo) { // an empty shard
        cudaCheck(cudaMemsetAsync(out, 0, sizeof(float), 0));
        return;
    }
    sum_squares(out, model->norm_partial_d, model->grads_memory + model->opt_lo, model->opt_hi - model->opt_lo);
}

// The global gradient norm before clipping, on the host: the step's wait for the GPU, before the
// trainer decides whether the step updates at all (step_guard_decide). The squared norm stays on
// the device too, where gpt2_update_apply's clipping reads it.
static float gpt2_grad_norm_read(GPT2* model) {
    float sumsq = 0.0f;
    cudaCheck(cudaMemcpy(&sumsq, model->norm_partial_d + NORM_BLOCKS, sizeof(float), cudaMemcpyDeviceToHost));
    return sqrtf(sumsq);
}
static __attribute__((unused)) float gpt2_grad_norm(GPT2* model) { // the tests' and the optimizer lab's
    gpt2_grad_norm_sq(model);
    return gpt2_grad_norm_read(model);
}

// One AdamW step (t counts the updates: 1, 2, ...) with global gradient-norm clipping, after
// gpt2_grad_norm (the clipping is decided on the device from the norm it left there). Launches only.
static void gpt2_update_apply(GPT2* model, float lr, float beta1, float beta2, float eps, float weight_decay,
                              float grad_clip, int t) {
    const float* norm_sq = model->norm_partial_d + NORM_BLOCKS;
    const float bc1 = (float)(1.0 - pow((double)beta1, (double)t));
    const float bc2 = (float)(1.0 - pow((double)beta2, (double)t));
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) { // each tensor's part in [opt_lo, opt_hi)
        size_t lo, hi, state_index;
        opt_window(model, model->param_offsets[i], model->param_sizes[i], &lo, &hi, &state_index);
        if (hi == lo) { continue; }
        const size_t off = model->param_offsets[i] + lo;
        const float wd = param_tensor_decayed[i] ? weight_decay : 0.0f;
        adamw_update(model->params_memory + off, model->master_memory != NULL ? model->master_memory + state_index : NULL,
                     model->grads_memory + off, model->m_memory + state_index, model->v_memory + state_index, hi - lo,
                     lr, beta1, beta2, bc1, bc2, eps, wd, norm_sq, grad_clip);
    }
}

// KV-cached generation (--generate, and the samples during training): the decode step, one forward
// pass per new token against a cache of every earlier token's k and v, with its two kernels
// (dev/trainer/kv_cache.cuh; it runs the layers' launchers above)
#include "dev/trainer/kv_cache.cuh"

// ----------------------------------------------------------------------------
// command line: dev/trainer/train_common.h parses and resolves the flags both trainers share, all before
// the GPU is touched; this is what the CUDA kernels add to its checks

// What the kernels need of a model's shape beyond gpt2_config_check: rows of 16-byte loads (n_embd,
// mlp_hidden, q_residual's C/2 and the padded vocabulary multiples of 8), a LayerNorm row that fits
// norm_backward_kernel's registers, elementwise sizes with 32-bit indices and the attention grid.
static int trainer_shape_check(const TrainArgs* a, char* msg, size_t msg_size) {
    const GPT2Config* c = &a->config;
    const char* model_arg = a->model_arg;
    const int C = c->channels, M = c->mlp_hidden, Vp = c->padded_vocab_size;
    const int max_c = NORM_BACKWARD_MAX_PACKS * 32 * x128::size;
    const char* fix = "(HINT: the CUDA kernels move 8 channels per 16-byte load; choose a multiple of 8)";
    if (C % 8 != 0) { snprintf(msg, msg_size, "-e %s: n_embd %d is not a multiple of 8 %s", model_arg, C, fix); return 0; }
    if (M % 8 != 0) { snprintf(msg, msg_size, "-e %s: mlp_hidden %d is not a multiple of 8 %s", model_arg, M, fix); return 0; }
    const QKVLayout layout = qkv_layout(c);
    if (qkv_has_residual_query(&layout) && (C / 2) % 8 != 0) {
        snprintf(msg, msg_size, "-e %s: q_residual's hidden width n_embd / 2 = %d is not a multiple of 8 %s", model_arg, C / 2, fix);
        return 0;
    }
    if (Vp % 8 != 0) { snprintf(msg, msg_size, "-e %s: padded_vocab_size %d is not a multiple of 8 %s", model_arg, Vp, fix); return 0; }
    if (C > max_c) {
        snprintf(msg, msg_size, "-e %s: n_embd %d exceeds the %d channels the %s LayerNorm backward holds in registers",
                 model_arg, C, max_c, PRECISION_NAME);
        return 0;
    }
    const long long BT = (long long)a->B * a->T;
    const long long widest = M > C ? M : C;
    if (BT * widest > (long long)INT_MAX) { // the elementwise kernels index (B, T, M) with 32 bits
        snprintf(msg, msg_size, "-b %d -t %d: B*T*%lld = %lld elements exceed 2^31 - 1 (HINT: lower -b, use -d to keep "
                 "the total batch)", a->B, a->T, widest, BT * widest);
        return 0;
    }
    if (!attention_fused_grid_fits(a->B, c->num_heads)) { // the unfused path's permute grid has the same limit
        snprintf(msg, msg_size, "-b %d: B * n_head = %lld exceeds the %d blocks of the attention kernels' grid "
                 "(HINT: lower -b, use -d to keep the total batch)", a->B, (long long)a->B * c->num_heads,
                 FLASH_MAX_GRID_Y);
        return 0;
    }
    return 1;
}

// 1 when a CUDA device is usable, else 0 with a one-line message. Nothing else in CUDA runs before it.
static int cuda_device_check(char* msg, size_t msg_size) {
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count == 0) {
        snprintf(msg, msg_size, "no CUDA device (%s) (HINT: this trainer needs an NVIDIA GPU and driver; -h and the "
                 "flag checks work without one)", err != cudaSuccess ? cudaGetErrorString(err) : "0 devices found");
        return 0;
    }
    return 1;
}

static void cuda_setup(void) {
    if (g_cublaslt != NULL) { return; }
    int device = 0; // the current one: 0, or the GPU a data-parallel process chose (main) before
    cudaCheck(cudaGetDevice(&device));
    cublasCheck(cublasLtCreate(&g_cublaslt));
    g_cublaslt_workspace = device_malloc(CUBLASLT_WORKSPACE_SIZE, "cuBLASLt workspace");
    int sms = 0;
    cudaCheck(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    g_num_sms = sms;
    g_reduce_blocks = 2 * sms < REDUCE_MAX_BLOCKS ? 2 * sms : REDUCE_MAX_BLOCKS;
    classifier_stream_setup();
}

// ----------------------------------------------------------------------------
// training

static size_t device_memory_in_use(void) {
    size_t free_b = 0, total_b = 0;
    cudaCheck(cudaMemGetInfo(&free_b, &total_b));
    return total_b - free_b;
}

// the runs that decode or look inside: the sample during training (sample_text), --generate
// (generate_run) and --dump_attention (inspect_run)
#include "dev/trainer/generate.cuh"

// the parameters' type for the collectives
static const DPType DP_FLOATX = PRECISION_IS_BF16 ? DP_BF16 : DP_F32;

// the training loop both trainers share: validation, samples, checkpoints, the stop signal, the
// step guard and the step's line, around a Trainer's work
#include "dev/trainer/train_loop.h"

// reads and stages this process's first micro-batch of a step (seen: the step's batches walked)
static void stage_first_batch(GPT2* model, DataLoader* loader, const DataParallel* dp, int* seen) {
    *seen = 0;
    next_own_batch(loader, dp, seen);
    gpt2_stage_batch(model, loader->inputs, loader->targets, model->B, model->T);
}

// Whether `next`'s first batch may be staged during the step before it: when there is a next step to
// train, and no validation first, whose forward passes stage batches of their own. (A sample decodes
// from its own buffers.) A stop signal may still end the run at `next`'s top: the staged batch is
// then dropped, and the checkpoint saves the loader's position before it.
static int stages_ahead(const TrainArgs* a, int next, int num_steps) {
    return next < num_steps && !val_due(a, next, num_steps);
}

// This trainer's work in the shared loop, on the GPU. The host stays ahead of it: while micro-step i
// runs, the host reads and stages batch i + 1 (data, token checks, encoder buckets), and a step's one
// wait is for its norm and loss.
struct CudaTrainer : Trainer {
    GPT2* model;
    TrainRun* run;
    Tokenizer* tokenizer;  // the samples' (-s > 0)
    float dloss;           // each micro-step's loss gradient: 1 / (B T micro-steps), the step's mean
    double peak;           // the device's dense FLOP/s (gpu_peak_flops), 0 when unknown: no MFU
    double flops_per_step; // this process's share of a step's FLOPs: each GPU's MFU is of its own peak
    int seen = 0;          // the step's micro-batches walked so far, this process's and the others'
    size_t peak_mem = 0;

    int eval_forward(const DataLoader* batch) override {
        gpt2_forward(model, batch->inputs, batch->targets, 0.0f);
        return 1;
    }
    int mean_loss(double* loss, const char* what) override {
        double sums[2]; // every forward pass has B*T losses: the mean of the means
        gpt2_loss_sums(model, sums);
        if (!dp_sum_doubles(run->dp, sums, 2, what)) { return 0; }
        *loss = loss_mean_of(sums);
        return 1;
    }
    int gradients(int step, double* loss, double* norm, DataLoaderState* data_after) override {
        const TrainArgs* a = run->a;
        DataParallel* dp = run->dp;
        gpt2_zero_grad(model);
        profile_mark(PROF_ZERO_GRAD);
        // this process's micro-batches of the step (all of them when it is alone); the first is
        // usually staged already, during the step before
        const int own_batches = a->grad_accum_steps / dp->world;
        if (model->staged == NULL) { stage_first_batch(model, run->train_loader, dp, &seen); }
        for (int micro = 0; micro < own_batches; micro++) {
            const int tuning = a->lt_tune && step == run->start_step && micro == 0; // every process's first micro-step
            const double tune_t0 = tuning ? now_seconds() : 0.0;
            g_lt_tuner.open = tuning;
            gpt2_forward_staged(model, dloss);
            gpt2_backward(model);
            if (tuning) {
                cudaCheck(cudaDeviceSynchronize());
                g_lt_tuner.open = 0;
                lt_tune_report(a, dp, run->logf, now_seconds() - tune_t0);
            }
            if (micro + 1 < own_batches) {
                next_own_batch(run->train_loader, dp, &seen);
                gpt2_stage_batch(model, run->train_loader->inputs, run->train_loader->targets, a->B, a->T);
            }
        }
        for (; seen < a->grad_accum_steps; seen++) { dataloader_skip_batch(run->train_loader); } // the others' after ours
        dataloader_get_state(run->train_loader, data_after);
        // the sums over the processes (the gradients: all, or this process's shard; the norm's part
        // of each shard; the loss), then the norm and the loss: the step's waits for the GPU
        if (!dp_reduce_gradients(dp, model->grads_memory, DP_F32)) { return 0; }
        gpt2_grad_norm_sq(model);
        if (dp->zero && !dp->backend->allreduce(dp, model->norm_partial_d + NORM_BLOCKS, 1, DP_F32, DP_SUM,
                                                "the gradient norm's all-reduce")) {
            return 0;
        }
        // the next step's first batch, read and staged while the GPU finishes this step, before the
        // wait for the norm: the next step's encoder then waits for nothing
        if (stages_ahead(a, step + 1, run->num_steps)) { stage_first_batch(model, run->train_loader, dp, &seen); }
        *norm = gpt2_grad_norm_read(model);
        if (!mean_loss(loss, "the loss's all-reduce")) { return 0; }
        profile_mark(PROF_GRAD_NORM); // with the step's wait for the norm and the loss
        return 1;
    }
    int update(float lr, int t, double norm) override {
        (void)norm; // the clipping reads the squared norm that gradients() left on the device
        const TrainArgs* a = run->a;
        gpt2_update_apply(model, lr, a->beta1, a->beta2, a->eps, a->weight_decay, a->grad_clip, t);
        return dp_gather_parameters(run->dp, model->params_memory, DP_FLOATX);
    }
    int sample(unsigned long long* rng, char* msg, size_t msg_size) override {
        return sample_text(model, run->a, tokenizer, rng, msg, msg_size);
    }
    int checkpoint(const TrainState* st, const char* model_path, const char* state_path, FILE* logf) override {
        return write_checkpoint(model, run->dp, st, model_path, state_path, logf);
    }
    double step_clock_start(int profiler_window) override {
        cudaCheck(cudaDeviceSynchronize());
        if (profiler_window) { cudaCheck(cudaProfilerStart()); }
        return now_seconds();
    }
    double step_clock_stop(double t0, int profiler_window) override {
        cudaCheck(cudaDeviceSynchronize());
        const double dt = now_seconds() - t0;
        if (profiler_window) { cudaCheck(cudaProfilerStop()); }
        const size_t mem = device_memory_in_use();
        if (mem > peak_mem) { peak_mem = mem; }
        return dt;
    }
    void flop_rates(double seconds, int steps, char* mfu, char* share, size_t size) override {
        const double percent_s = 100.0 * flops_per_step * steps / seconds; // 100 x FLOP/s
        if (peak > 0) { snprintf(mfu, size, " | MFU %.2f%%", percent_s / peak); }
        else { snprintf(mfu, size, " | MFU n/a"); }
        snprintf(share, size, " | %.1f%% of %.0f TFLOP/s", percent_s / MEASURED_MATMUL_PEAK, MEASURED_MATMUL_PEAK / 1e12);
    }
    double peak_memory_mib() override { return peak_mem / 1048576.0; }
    ProfileShape profile_shape() override {
        return {run->a->B, run->a->T, run->a->grad_accum_steps, (int)sizeof(floatX), model->master_memory != NULL,
                model->attn_fused ? FLASH_FORWARD_VERSION : 0, model->attn_fused ? FLASH_BACKWARD_VERSION : 0,
                model->recompute, g_bias_fusion};
    }
};

// The training of a built model on opened data: the resumed state, what the run will do, then the
// shared loop (train_loop). Returns the process exit code.
static int train_model(TrainArgs* a, DataParallel* dp, GPT2* model, DataLoader* train_loader, DataLoader* val_loader,
                       Tokenizer* tokenizer) {
    char msg[16384];
    TrainRun run = {a, dp, &model->config, train_loader, val_loader, 0, 0, 0, sampling_rng_init(a->seed), NULL};
    if (a->resuming) {
        gpt2_load_state(model, a->state_path, &a->state);
        if (!dataloader_set_state(train_loader, &a->state.loader, msg, sizeof(msg))) {
            fprintf(stderr, "error: %s: %s\n", a->state_path, msg);
            return 1;
        }
        // a ZeRO-1 process re-rounded its shard of the parameters from the master weights
        if (!dp_gather_parameters(dp, model->params_memory, DP_FLOATX)) { return 1; }
        run.start_step = a->state.step;
        run.rng = a->state.rng_state;
    }
    if (!dp->alone) { // the parameters on the host, for the agreement's hash
        const size_t bytes = model->num_parameters_padded * sizeof(floatX);
        void* host = host_malloc(bytes, "the parameters' agreement hash");
        cudaCheck(cudaMemcpy(host, model->params_memory, bytes, cudaMemcpyDeviceToHost));
        const int agreed = run_agree(dp, a, &model->config, host, bytes);
        free(host);
        if (!agreed) { return 1; }
    }
    if (!train_run_plan(&run)) { return 1; }
    if (a->sample_every > 0) { tokenizer_init(tokenizer, a->tokenizer_path); }

    int device = 0;
    cudaCheck(cudaGetDevice(&device));
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, device));
    const double peak = gpu_peak_flops(prop.name);
    char desc[256];
    gpt2_config_describe(&model->config, desc, sizeof(desc));
    printf("device: %s | precision %s | peak %s\n", prop.name, PRECISION_NAME, peak > 0 ? "known" : "unknown (no MFU)");
    printf("model: scheme %s | %s | attn_scale %g | %zu parameters | %s\n", qkv_scheme_name(model->config.scheme), desc,
           (double)gpt2_attn_scale(&model->config), model->num_parameters, a->from_file ? a->model_path : "random init");
    train_run_describe(&run);
    if (!dp->alone) { processes_describe(dp, a); }
    const int hd = qkv_head_dim(&model->config);
    if (model->attn_fused) {
        printf("attention: fused flash-attention kernels (head size %d; forward version %d, backward version %d): "
               "the T x T scores never reach memory\n", hd, FLASH_FORWARD_VERSION, FLASH_BACKWARD_VERSION);
    } else {
        printf("attention: unfused, cuBLASLt matmuls with each head's T x T scores in memory (%s)\n",
               a->attn_unfused ? "--attention unfused" :
               !PRECISION_IS_BF16 ? "FP32 build" : "no flash kernel for this head size: 64 and 128 have one");
    }
    const TrainingMemory* mem = &model->memory; // the numbers of `build/params memory` for this run
    printf("memory: parameters, gradients, AdamW state %.1f MiB | activations %.1f MiB | activation gradients "
           "%.1f MiB | total %.1f MiB\n",
           (mem->param_bytes + mem->grad_bytes + mem->optimizer_bytes + mem->master_bytes) / 1048576.0,
           mem->acts_bytes / 1048576.0, mem->grad_acts_bytes / 1048576.0, mem->total_bytes / 1048576.0);
    if (a->resuming) { printf("resuming from %s at step %d%s\n", a->state_path, run.start_step, resume_model_note(a)); }
    if (a->lt_tune) { // before -o's log is touched: a damaged lt_algos.bin stops the run here
        lt_tune_prepare(a, dp);
    } else if (dp->rank == 0) {
        printf("matmuls: cuBLASLt's first choice for every configuration, untimed (--lt_tune 0)\n");
    }
    fflush(stdout);

    CudaTrainer trainer;
    trainer.model = model;
    trainer.run = &run;
    trainer.tokenizer = tokenizer;
    trainer.dloss = 1.0f / (float)((double)a->B * a->T * a->grad_accum_steps);
    trainer.peak = peak;
    trainer.flops_per_step = gpt2_flops_per_token(&model->config, a->T) * (double)a->total_batch / dp->world;
    const int rc = train_loop(&trainer, &run);
    profile_free();
    return rc;
}

// The training run of resolved arguments on a checked device, on every process of a data-parallel
// run (dp, NULL: one process alone): the data and the model, trained by train_model, then freed.
// Returns the process exit code.
static int train_run(TrainArgs* a, DataParallel* dp_run = NULL) {
    char msg[16384];
    DataParallel alone;
    dp_init_single(&alone);
    DataParallel* dp = dp_run != NULL ? dp_run : &alone;
    cuda_setup();
    // the data and -o, on every process before any goes on
    DataLoader train_loader, val_loader;
    memset(&train_loader, 0, sizeof(train_loader)); // zeroed, a loader is safe to free
    memset(&val_loader, 0, sizeof(val_loader));
    int ok = train_data_open(a, &train_loader, &val_loader);
    if (ok && !output_dir_check(a, msg, sizeof(msg))) { // again: the tests call train_run without train_args_check_data
        fprintf(stderr, "error: %s\n", msg);
        ok = 0;
    }
    int rc = 1;
    if (train_data_agree(a, dp, ok, &train_loader, &val_loader)) {
        g_gelu_fusion = a->gelu_fusion;
        g_bias_fusion = a->bias_fusion;
        // the processes' shards of AdamW's state over the device layout (-z 1; else every process keeps
        // all of it), each starting on a tensor boundary's alignment for the 16-byte loads
        size_t layout_sizes[NUM_PARAMETER_TENSORS], layout_offsets[NUM_PARAMETER_TENSORS];
        dp_set_params(dp, gpt2_param_layout(&a->config, layout_sizes, layout_offsets), a->zero_stage, PARAM_ALIGN_ELEMS);
        GPT2 model;
        gpt2_build_sharded(&model, &a->config, a->B, a->T, a->master_weights, a->recompute,
                           !a->attn_unfused, dp->lo, dp->hi); // fused where a flash kernel exists: gpt2_build decides
        if (a->from_file) {
            gpt2_load_params(&model, a->model_path, a->file_version);
        } else {
            gpt2_init_random(&model, a->seed);
        }
        Tokenizer tokenizer;
        memset(&tokenizer, 0, sizeof(tokenizer));
        rc = train_model(a, dp, &model, &train_loader, &val_loader, &tokenizer);
        if (a->sample_every > 0) { tokenizer_free(&tokenizer); }
        gpt2_free(&model);
    }
    dataloader_free(&train_loader);
    dataloader_free(&val_loader);
    return rc;
}

#ifndef TESTING
// the run of checked arguments on a checked device
static int run_checked(TrainArgs* args, DataParallel* dp) {
    return args->check_args     ? check_args_report(args)
           : args->generate > 0 ? generate_run(args)
           : inspecting(args)   ? inspect_run(args)
                                : train_run(args, dp);
}

int main(int argc, char** argv) {
    char msg[16384];
    TrainArgs args;
    train_args_defaults(&args);
    const int parsed = train_args_parse(&args, argc, argv, msg, sizeof(msg));
    if (parsed == 2) {
        print_usage(argv[0]);
        return 0;
    }
    // The processes (dev/trainer/data_parallel.h): one alone, or with -pi fs those of -pn and -pr (or of the
    // launcher), each on its own GPU, meeting in the folder of -pf over NCCL
    int world = 1, rank = 0, local_rank = 0;
    const int nccl = parsed != 0 && strcmp(args.init_method, "fs") == 0;
    if (nccl) { processes_from_flags(&args, &world, &rank, &local_rank); }
#ifdef DP_NCCL
    const char* transport = nccl ? "NCCL" : NULL;
#else
    const char* transport = NULL;
#endif
    if (parsed == 0 || !launcher_check(&args, nccl, msg, sizeof(msg)) ||
        !processes_check(&args, transport, world, rank, msg, sizeof(msg))) {
        fprintf(stderr, "error: %s\n", msg);
        return 1;
    }
    args.world = world;
    args.rank = rank;
    char who[32] = ""; // errors name their rank in a run of several
    if (world > 1) { snprintf(who, sizeof(who), "rank %d: ", rank); }
    const int ok = train_args_resolve(&args, msg, sizeof(msg)) && train_args_check_data(&args, msg, sizeof(msg)) &&
                   processes_work_check(&args, world, msg, sizeof(msg));
    if (!ok) { fprintf(stderr, "error: %s%s\n", who, msg); }
    if (!nccl) { // one process alone, as before data parallelism
        if (!ok) { return 1; }
        if (!args.check_args && !cuda_device_check(msg, sizeof(msg))) {
            fprintf(stderr, "error: %s\n", msg);
            return 1;
        }
        return run_checked(&args, NULL);
    }
    DataParallel dp;
    dp_init_single(&dp);
#ifdef DP_NCCL
    // A process whose checks of the run failed (above) still meets the others, so that they all stop
    // now (dp_all_ok). One that cannot meet them (its processes' flags, no GPU, no rendezvous) ends
    // here; the others then end at the rendezvous's deadline (--collective_timeout).
    if (!cuda_device_check(msg, sizeof(msg))) {
        fprintf(stderr, "error: %s%s\n", who, msg);
        return 1;
    }
    int devices = 1;
    cudaCheck(cudaGetDeviceCount(&devices));
    cudaCheck(cudaSetDevice(local_rank % devices));
    if (!dp_nccl_init(&dp, world, rank, args.rendezvous_dir, args.collective_timeout, msg, sizeof(msg))) {
        fprintf(stderr, "error: %s%s\n", who, msg);
        return 1;
    }
    if (rank > 0 && freopen("/dev/null", "w", stdout) == NULL) { return 1; } // rank 0 speaks for the run
#endif
    int rc = 1;
    if (checks_agree(&args, &dp, ok)) { rc = run_checked(&args, &dp); }
    if (args.check_args) { dp.agreed_exit = 1; }
    // An error of this process alone may leave the others waiting in a collective: it ends its part of
    // the job now (the others' deadlines, or NCCL's error on the lost peer, end theirs); an end every
    // process agreed on finalizes.
    if (rc != 0 && !dp.agreed_exit) {
        fflush(stdout);
        fflush(stderr);
        dp.backend->abort_job(&dp);
    }
    dp_finish(&dp);
    return rc;
}
#endif
