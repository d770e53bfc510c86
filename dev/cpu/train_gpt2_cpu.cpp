/*
train_gpt2_cpu.cpp: a float32 CPU reference trainer for GPT-2 with a compile-time Q/K/V scheme.

This is the file to read to learn how each scheme works, in the spirit of llm.c's train_gpt2.c:
every layer is a plain forward function and a plain backward function, one allocation holds the
parameters, one the activations. Nothing here is specific to a scheme: attention_variants.cuh
says where q, k and v come from (qkv_layout), which tensors exist (fill_param_sizes) and the
attention scale (gpt2_attn_scale); this file only knows the three kinds of source:

  - QKV_SRC_PROJECTION: a column range of the fused projection output y = x qkvw^T (+ qkvb).
    Two roles with the same offset (k = v, q = k, q = k = v) are literally the same memory, and
    in the backward pass both roles add their gradient into that one gradient buffer.
  - QKV_SRC_INPUT: x itself (the LN1 output); the role's gradient is added into dx, on top of
    what flows back through the fused projection.
  - QKV_SRC_RESIDUAL_QUERY (q_residual): q = x + LN_q(W2 gelu(W1 RMSNorm_q(x))), a sublayer of
    its own (qres_forward, qres_backward). attention_inputs_forward and _backward, which form a
    layer's q, k, v, are the one place that asks the layout whether q comes from it; the forward
    and backward passes and the decode step never do.

So each scheme is one row of qkv_layout (C = channels, KV = Hkv * hd; y is (B, T, width)):

  scheme       width    q              k              v              what the backward does
  standard     C + 2KV  y[0:C]         y[C:C+KV]      y[C+KV:C+2KV]  three disjoint gradient ranges
  q_identity   2KV      x              y[0:KV]        y[KV:2KV]      dq goes straight into dx
  k_identity   2C       y[0:C]         x              y[C:2C]        dk into dx (Hkv = H)
  v_identity   2C       y[0:C]         y[C:2C]        x              dv into dx (Hkv = H)
  kv_shared    C + KV   y[0:C]         y[C:C+KV]      = k            dk + dv in one range
  qk_shared    2C       y[0:C]         = q            y[C:2C]        dq + dk in one range (Hkv = H)
  qkv_shared   C        y[0:C]         = q            = q            dq + dk + dv in one range (Hkv = H)
  q_residual   2KV      x + f(x)       y[0:KV]        y[KV:2KV]      dq into dx and through f's weights

Apart from q_residual's own branch, a smaller width is the whole parameter saving: the fused
projection simply has fewer output columns.

Attention reads q, k, v in place through (pointer, row stride) views, the QKVView<float> of
qkv_role_view (attention_variants.cuh), so it never copies or rearranges them. GQA: query head h
reads kv head h / (H / Hkv).
Attention path: the plain one below, with its (B, H, T, T) matrix (read it to learn what attention
computes); built with -DATTENTION_TILED (make build/train_gpt2_cpu_tiled_<scheme>), the CPU twin of
the CUDA flash attention, dev/cpu/attention_tiled_cpu.h, which keeps only lse (B, H, T).

Reductions (dot products, norms, sums over the batch) accumulate in double: the test compares
against a float64 reference at 1e-5 relative error, and float accumulators over hundreds of
terms with cancellation get too close to that for comfort. Values are stored as float32.

Build (one binary per scheme):  make build/train_gpt2_cpu_<scheme>   (see the Makefile)
The test (dev/cpu/test_gpt2_cpu.cpp) #defines TESTING and #includes this file; the training
main() and the data loader are compiled only without TESTING.
*/
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif
// OpenMP is optional: without -fopenmp the pragmas are ignored (g++ -Wall says so once per pragma)

#include "../../attention_variants.cuh"
#include "../../tokenizer.h"
#include "attention_tiled_cpu.h"
// the flags, the file headers, the schedule and the sampling rule, shared with the CUDA trainer
#define PRECISION_NAME "fp32"
#define PRECISION_IS_BF16 0
#define TRAIN_COMMON_CUDA 0
#include "../trainer/train_common.h"
#include "../trainer/profile.h"

// --profile: during a profiled training step, each profile_mark charges the time since the previous
// mark to its row (dev/trainer/profile.h); outside one (and without --profile) it does nothing, so the
// validation and sampling passes are not counted
static ProfileTotals g_profile;
static int g_profile_active = 0;
static double g_profile_last = 0.0;

static void profile_mark(int row) {
    if (!g_profile_active) { return; }
    const double t = now_seconds();
    g_profile.seconds[row] += t - g_profile_last;
    g_profile.marks[row]++;
    g_profile_last = t;
}
static void profile_step_begin(void) {
    g_profile_active = 1;
    g_profile_last = now_seconds();
}
static void profile_step_end(double step_seconds) {
    g_profile_active = 0;
    g_profile.steps++;
    g_profile.step_seconds += step_seconds;
}

// which attention the binary runs: plain (default) or the tiled flash twin (-DATTENTION_TILED)
#ifdef ATTENTION_TILED
static const int kAttentionTiled = 1;
#else
static const int kAttentionTiled = 0;
#endif

// ----------------------------------------------------------------------------
// error-checking helpers: report file and line, exit(1) (never a crash)

static void* malloc_check(size_t size, const char* file, int line) {
    void* p = malloc(size > 0 ? size : 1);
    if (p == NULL) {
        fprintf(stderr, "error: malloc of %zu bytes failed at %s:%d (HINT: smaller -b/-t or model)\n", size, file, line);
        exit(1);
    }
    return p;
}
#define mallocCheck(size) malloc_check(size, __FILE__, __LINE__)

static void* calloc_check(size_t n, size_t size, const char* file, int line) {
    void* p = calloc(n > 0 ? n : 1, size > 0 ? size : 1);
    if (p == NULL) {
        fprintf(stderr, "error: calloc of %zu x %zu bytes failed at %s:%d\n", n, size, file, line);
        exit(1);
    }
    return p;
}
#define callocCheck(n, size) calloc_check(n, size, __FILE__, __LINE__)

// ----------------------------------------------------------------------------
// exp in float that the compiler can vectorize (libm's expf is a call per element): the
// softmaxes over the vocabulary, attention and GELU spend most of their time in exp.
// exp(x) = 2^n exp(r) with n = round(x / ln 2) and r = x - n ln 2 in [-ln2/2, ln2/2] (ln 2 split in
// two parts so r is exact), exp(r) by its Taylor series to r^7 (truncation error < 1e-8), and 2^n
// built directly in the exponent bits. About 2 ulp; exp(x) = 0 below -87.3, and x is clamped at 88
// above (exp(88) = 1.6e38, finite: GELU divides by 1 + exp(-2u) and gets 0 either way). NaN gives NaN.
static inline float exp_fast(float x) {
    const float xc = x > 88.0f ? 88.0f : (x < -87.0f ? -87.0f : x);
    // round to nearest by adding and removing 1.5 * 2^23 (floorf would not vectorize)
    const float shifted = xc * 1.44269504088896341f + 12582912.0f;
    const float n = shifted - 12582912.0f;
    const float r = (xc - n * 0.693145751953125f) - n * 1.428606765330187e-06f;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    // 2^n from the bits of `shifted` = 1.5 * 2^23 + n, whose last mantissa bits hold n: unsigned
    // integer arithmetic, defined for every x (converting a NaN n to int was undefined behaviour),
    // and as fast as that conversion was. A NaN x gives a NaN p, so NaN whatever these bits are.
    uint32_t shifted_bits;
    memcpy(&shifted_bits, &shifted, sizeof(shifted_bits));
    const uint32_t bits = (shifted_bits - 0x4B400000u + 127u) << 23; // 0x4B400000 = 1.5 * 2^23; n in [-126, 127]
    float scale;
    memcpy(&scale, &bits, sizeof(scale));
    return x < -87.3f ? 0.0f : p * scale;
}

// ----------------------------------------------------------------------------
// all the individual layers' forward and backward passes
// N = B * T rows, C channels; every backward ADDS (+=) into its gradient outputs, so gradients
// from several consumers of one tensor sum up (the caller zeroes them once per step)

void encoder_forward(float* out, const int* inp, const float* wte, const float* wpe, int B, int T, int C) {
    // out is (B,T,C): token embedding plus position embedding
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            float* out_bt = out + ((size_t)b * T + t) * C;
            const float* wte_ix = wte + (size_t)inp[b * T + t] * C;
            const float* wpe_t = wpe + (size_t)t * C;
            for (int i = 0; i < C; i++) { out_bt[i] = wte_ix[i] + wpe_t[i]; }
        }
    }
}

void encoder_backward(float* dwte, float* dwpe, const float* dout, const int* inp, int B, int T, int C) {
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            const float* dout_bt = dout + ((size_t)b * T + t) * C;
            float* dwte_ix = dwte + (size_t)inp[b * T + t] * C;
            float* dwpe_t = dwpe + (size_t)t * C;
            for (int i = 0; i < C; i++) {
                dwte_ix[i] += dout_bt[i];
                dwpe_t[i] += dout_bt[i];
            }
        }
    }
}

// LayerNorm over the last dimension, eps 1e-5; bias may be NULL (bias-free models, LN_q)
void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int N, int C) {
    // inp, out are (N,C); mean, rstd are (N) and cached for the backward pass
    const double eps = 1e-5;
    #pragma omp parallel for
    for (int n = 0; n < N; n++) {
        const float* x = inp + (size_t)n * C;
        double m = 0.0;
        for (int i = 0; i < C; i++) { m += x[i]; }
        m /= C;
        double v = 0.0;
        for (int i = 0; i < C; i++) { double d = x[i] - m; v += d * d; }
        v /= C;
        double s = 1.0 / sqrt(v + eps);
        float* o = out + (size_t)n * C;
        for (int i = 0; i < C; i++) {
            double norm = (x[i] - m) * s;
            o[i] = (float)(norm * weight[i] + (bias != NULL ? bias[i] : 0.0f));
        }
        mean[n] = (float)m;
        rstd[n] = (float)s;
    }
}

void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                        const float* weight, const float* mean, const float* rstd, int N, int C) {
    // dweight and dbias sum over all N rows: accumulate them in double, add once at the end
    double* dw = (double*)callocCheck((size_t)C, sizeof(double));
    double* db = (double*)callocCheck((size_t)C, sizeof(double));
    for (int n = 0; n < N; n++) {
        const float* x = inp + (size_t)n * C;
        const float* d = dout + (size_t)n * C;
        float* dx = dinp + (size_t)n * C;
        const double m = mean[n], s = rstd[n];
        // dx = s * (dnorm - mean(dnorm) - norm * mean(dnorm * norm)), dnorm = w * dout
        double dnorm_mean = 0.0, dnorm_norm_mean = 0.0;
        for (int i = 0; i < C; i++) {
            double norm = (x[i] - m) * s;
            double dnorm = (double)weight[i] * d[i];
            dnorm_mean += dnorm;
            dnorm_norm_mean += dnorm * norm;
        }
        dnorm_mean /= C;
        dnorm_norm_mean /= C;
        for (int i = 0; i < C; i++) {
            double norm = (x[i] - m) * s;
            double dnorm = (double)weight[i] * d[i];
            dw[i] += norm * d[i];
            db[i] += d[i];
            dx[i] += (float)(s * (dnorm - dnorm_mean - norm * dnorm_norm_mean));
        }
    }
    for (int i = 0; i < C; i++) {
        dweight[i] += (float)dw[i];
        if (dbias != NULL) { dbias[i] += (float)db[i]; }
    }
    free(dw);
    free(db);
}

// RMSNorm with a gain (q_residual's RMSNorm_q): out = x / sqrt(mean(x^2) + 1e-5) * weight
void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int N, int C) {
    const double eps = 1e-5;
    #pragma omp parallel for
    for (int n = 0; n < N; n++) {
        const float* x = inp + (size_t)n * C;
        double ms = 0.0;
        for (int i = 0; i < C; i++) { ms += (double)x[i] * x[i]; }
        double s = 1.0 / sqrt(ms / C + eps);
        float* o = out + (size_t)n * C;
        for (int i = 0; i < C; i++) { o[i] = (float)(x[i] * s * weight[i]); }
        rstd[n] = (float)s;
    }
}

void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                      const float* rstd, int N, int C) {
    double* dw = (double*)callocCheck((size_t)C, sizeof(double));
    for (int n = 0; n < N; n++) {
        const float* x = inp + (size_t)n * C;
        const float* d = dout + (size_t)n * C;
        float* dx = dinp + (size_t)n * C;
        const double s = rstd[n];
        // with xhat = x * s: dx = s * (dxhat - xhat * mean(dxhat * xhat)), dxhat = w * dout
        double dot = 0.0;
        for (int i = 0; i < C; i++) { dot += (double)weight[i] * d[i] * (x[i] * s); }
        dot /= C;
        for (int i = 0; i < C; i++) {
            double xhat = x[i] * s;
            dw[i] += xhat * d[i];
            dx[i] += (float)(s * ((double)weight[i] * d[i] - xhat * dot));
        }
    }
    for (int i = 0; i < C; i++) { dweight[i] += (float)dw[i]; }
    free(dw);
}

// ---- matmul: one blocked kernel for the three products of a linear layer ----
//
// gemm_accumulate adds C(i,j) += sum_k A(i,k) B(k,j) for i < m, j < n, where each operand is
// addressed with element strides, so one kernel serves every product without transposing:
//   A(i,k) = A[i*a_i + k*a_k],  B(k,j) = B[k*b_k + j*b_j],  C(i,j) = C[i*c_i + j*c_j]
//
// Blocking (the GotoBLAS scheme, simplified):
//  - C is cut into blocks of mc rows x GEMM_NC columns; the threads share out whole blocks, so
//    each C element is computed by exactly one thread (no reduction is ever split between
//    threads, and there is no barrier but the one at the end);
//  - within its block, a thread runs k in chunks of GEMM_KC. For each chunk it copies ("packs")
//    B's kc x GEMM_NC slice, widened to double, into panels of GEMM_NR columns, each stored
//    k-major (GEMM_NR consecutive values per k), so the inner loop reads it contiguously from cache;
//  - then, for each micro-panel of GEMM_MR rows, it packs A's GEMM_MR x kc slice k-major too and,
//    for each B panel, updates a GEMM_MR x GEMM_NR tile of sums in registers: per k, GEMM_MR
//    broadcasts of A times one GEMM_NR-wide row of B. That inner loop (gemm_tile) is plain C++
//    that the compiler vectorizes over the GEMM_NR columns (8 x 16 doubles: 16 AVX-512
//    registers of accumulators, each row of B reused for 8 rows of A);
//  - the block's sums live in a double buffer across the chunks and are added into C once.
// Accumulation is in double, k ascending: products of floats are exact in double, so each C
// element is its float value plus a sum that is rounded once, as accurate as a sequential double
// loop (the fixtures' chaotic 10-step AdamW runs need that: float sums of 128 terms fail them).
// The order does not depend on the blocks or on the thread that runs one, so the results are
// bit-identical for any OMP_NUM_THREADS.
enum { GEMM_MR = 8, GEMM_NR = 16, GEMM_KC = 256, GEMM_NC = 128 };

// the register tile: c (GEMM_MR x GEMM_NR) += Ap (kc x GEMM_MR)^T Bp (kc x GEMM_NR), both k-major;
// c is a tile of the block's sums, with row stride ldc
static inline void gemm_tile(int kc, const double* __restrict Ap, const double* __restrict Bp,
                             double* __restrict csum, int ldc) {
    double c[GEMM_MR][GEMM_NR];
    for (int r = 0; r < GEMM_MR; r++) {
        #pragma omp simd
        for (int j = 0; j < GEMM_NR; j++) { c[r][j] = csum[(size_t)r * ldc + j]; }
    }
    for (int k = 0; k < kc; k++) {
        const double* a = Ap + (size_t)k * GEMM_MR;
        const double* b = Bp + (size_t)k * GEMM_NR;
        for (int r = 0; r < GEMM_MR; r++) {
            #pragma omp simd
            for (int j = 0; j < GEMM_NR; j++) { c[r][j] += a[r] * b[j]; }
        }
    }
    for (int r = 0; r < GEMM_MR; r++) {
        #pragma omp simd
        for (int j = 0; j < GEMM_NR; j++) { csum[(size_t)r * ldc + j] = c[r][j]; }
    }
}

static void gemm_accumulate(int m, int n, int K, const float* A, size_t a_i, size_t a_k,
                            const float* B, size_t b_k, size_t b_j, float* C, size_t c_i, size_t c_j) {
    if (m <= 0 || n <= 0 || K <= 0) { return; }
    // rows per block: up to 256, fewer when that leaves too few blocks to share out (each block
    // packs its own copy of B, so the blocks should not be needlessly small either)
    int nthreads = 1;
#ifdef _OPENMP
    nthreads = omp_get_max_threads();
#endif
    const int nblocks = (n + GEMM_NC - 1) / GEMM_NC;
    int mc = 256;
    while (mc > 4 * GEMM_MR && ((m + mc - 1) / mc) * nblocks < 4 * nthreads) { mc /= 2; }
    const int mblocks = (m + mc - 1) / mc;
    #pragma omp parallel
    {
        double* Bp = (double*)mallocCheck((size_t)GEMM_KC * GEMM_NC * sizeof(double));
        double* Ap = (double*)mallocCheck((size_t)GEMM_KC * GEMM_MR * sizeof(double));
        double* csum = (double*)mallocCheck((size_t)mc * GEMM_NC * sizeof(double)); // row stride GEMM_NC
        #pragma omp for schedule(dynamic)
        for (int blk = 0; blk < mblocks * nblocks; blk++) {
            const int ib = (blk / nblocks) * mc, jb = (blk % nblocks) * GEMM_NC;
            const int mb = m - ib < mc ? m - ib : mc;
            const int nb = n - jb < GEMM_NC ? n - jb : GEMM_NC;
            const int npanels = (nb + GEMM_NR - 1) / GEMM_NR;
            for (size_t i = 0; i < (size_t)mc * GEMM_NC; i++) { csum[i] = 0.0; }
            for (int k0 = 0; k0 < K; k0 += GEMM_KC) {
                const int kc = K - k0 < GEMM_KC ? K - k0 : GEMM_KC;
                // pack B(k0:k0+kc, jb:jb+nb) into panels; columns past n are zero
                for (int p = 0; p < npanels; p++) {
                    double* dst = Bp + (size_t)p * kc * GEMM_NR;
                    const int j0 = jb + p * GEMM_NR;
                    const int nr = n - j0 < GEMM_NR ? n - j0 : GEMM_NR;
                    for (int k = 0; k < kc; k++) {
                        const float* src = B + (size_t)(k0 + k) * b_k + (size_t)j0 * b_j;
                        for (int j = 0; j < GEMM_NR; j++) { dst[(size_t)k * GEMM_NR + j] = j < nr ? src[j * b_j] : 0.0; }
                    }
                }
                for (int i0 = 0; i0 < mb; i0 += GEMM_MR) {
                    const int mr = mb - i0 < GEMM_MR ? mb - i0 : GEMM_MR;
                    // pack A(ib+i0 : +GEMM_MR, k0:k0+kc) k-major; rows past the block are zero
                    for (int k = 0; k < kc; k++) {
                        const float* src = A + (size_t)(ib + i0) * a_i + (size_t)(k0 + k) * a_k;
                        for (int r = 0; r < GEMM_MR; r++) { Ap[(size_t)k * GEMM_MR + r] = r < mr ? src[r * a_i] : 0.0; }
                    }
                    for (int p = 0; p < npanels; p++) {
                        gemm_tile(kc, Ap, Bp + (size_t)p * kc * GEMM_NR, csum + (size_t)i0 * GEMM_NC + p * GEMM_NR, GEMM_NC);
                    }
                }
            }
            // C += the block's sums
            for (int i = 0; i < mb; i++) {
                float* dst = C + (size_t)(ib + i) * c_i + (size_t)jb * c_j;
                const double* src = csum + (size_t)i * GEMM_NC;
                if (c_j == 1) {
                    #pragma omp simd
                    for (int j = 0; j < nb; j++) { dst[j] = (float)((double)dst[j] + src[j]); }
                } else {
                    for (int j = 0; j < nb; j++) { dst[j * c_j] = (float)((double)dst[j * c_j] + src[j]); }
                }
            }
        }
        free(Bp);
        free(Ap);
        free(csum);
    }
}

// out = inp weight^T + bias; inp (N,C), weight (OC,C), bias (OC) or NULL, out (N,OC)
void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int N, int C, int OC) {
    #pragma omp parallel for
    for (int n = 0; n < N; n++) {
        float* o = out + (size_t)n * OC;
        #pragma omp simd
        for (int j = 0; j < OC; j++) { o[j] = bias != NULL ? bias[j] : 0.0f; }
    }
    // out(n, o) += sum_i inp(n, i) weight(o, i): B(k=i, j=o) = weight[o*C + i]
    gemm_accumulate(N, OC, C, inp, (size_t)C, 1, weight, 1, (size_t)C, out, (size_t)OC, 1);
}

void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int N, int C, int OC) {
    // dinp (N,C) += dout (N,OC) weight (OC,C)
    gemm_accumulate(N, C, OC, dout, (size_t)OC, 1, weight, (size_t)C, 1, dinp, (size_t)C, 1);
    // dweight (OC,C) += dout^T (OC,N) inp (N,C): A(i=o, k=n) = dout[n*OC + o]
    gemm_accumulate(OC, C, N, dout, 1, (size_t)OC, inp, (size_t)C, 1, dweight, (size_t)C, 1);
    // dbias (OC) += sum over rows of dout, in double, each thread a range of columns
    if (dbias != NULL) {
        const int JB = 256;
        #pragma omp parallel for
        for (int j0 = 0; j0 < OC; j0 += JB) {
            const int jn = OC - j0 < JB ? OC - j0 : JB;
            double acc[JB];
            for (int j = 0; j < jn; j++) { acc[j] = 0.0; }
            for (int n = 0; n < N; n++) {
                const float* d = dout + (size_t)n * OC + j0;
                #pragma omp simd
                for (int j = 0; j < jn; j++) { acc[j] += d[j]; }
            }
            for (int j = 0; j < jn; j++) { dbias[j0 + j] += (float)acc[j]; }
        }
    }
}

// GELU, tanh approximation (GPT-2's): gelu(x) = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3).
// Computed as x * sigmoid(2u) = x / (1 + exp(-2u)), the same function without tanh's cancellation
// in 1 + tanh(u) for negative x, and with the vectorizable exp_fast.
#define GELU_SCALING_FACTOR 0.7978845608028654 // sqrt(2 / pi)

void gelu_forward(float* out, const float* inp, size_t n) {
    const float k = (float)GELU_SCALING_FACTOR;
    #pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) {
        const float x = inp[i];
        const float u = k * (x + 0.044715f * x * x * x);
        out[i] = x / (1.0f + exp_fast(-2.0f * u));
    }
}

// d gelu / dx = s + x s (1 - s) 2 u'(x), with s = sigmoid(2u) (0.5 (1 + tanh u) = s, sech^2 u = 4 s (1 - s))
void gelu_backward(float* dinp, const float* inp, const float* dout, size_t n) {
    const float k = (float)GELU_SCALING_FACTOR;
    #pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) {
        const float x = inp[i];
        const float u = k * (x + 0.044715f * x * x * x);
        const float e = exp_fast(-2.0f * u);
        const float s = 1.0f / (1.0f + e), one_minus_s = e / (1.0f + e);
        const float local = s + 2.0f * x * s * one_minus_s * k * (1.0f + 3.0f * 0.044715f * x * x);
        dinp[i] += local * dout[i];
    }
}

void residual_forward(float* out, const float* inp1, const float* inp2, size_t n) {
    for (size_t i = 0; i < n; i++) { out[i] = inp1[i] + inp2[i]; }
}

void residual_backward(float* dinp1, float* dinp2, const float* dout, size_t n) {
    for (size_t i = 0; i < n; i++) {
        dinp1[i] += dout[i];
        dinp2[i] += dout[i];
    }
}

// The max of the first V of a row of logits (vectorized: max is exact in any order)
static inline float row_max(const float* l, int V) {
    float maxval = -INFINITY;
    #pragma omp simd reduction(max : maxval)
    for (int i = 0; i < V; i++) { maxval = l[i] > maxval ? l[i] : maxval; }
    return maxval;
}

// sum over i < V of exp(l[i] - maxval), also stored in e[i] when e != NULL: float partial sums
// over chunks of 256 values (vectorized; a fixed order), the chunks added up in double
static double sum_exp(const float* l, float maxval, int V, float* e) {
    double sum = 0.0;
    for (int i0 = 0; i0 < V; i0 += 256) {
        const int i1 = V - i0 < 256 ? V : i0 + 256;
        float s = 0.0f;
        if (e != NULL) {
            #pragma omp simd reduction(+ : s)
            for (int i = i0; i < i1; i++) { e[i] = exp_fast(l[i] - maxval); s += e[i]; }
        } else {
            #pragma omp simd reduction(+ : s)
            for (int i = i0; i < i1; i++) { s += exp_fast(l[i] - maxval); }
        }
        sum += s;
    }
    return sum;
}

// Causal multi-head attention with GQA, reading q, k, v in place through their views (a pointer and
// a row stride). q: (B,T,C) view, k and v: (B,T,Hkv*hd) views; out (B,T,C) contiguous;
// att (B,H,T,T) probabilities; lse (B,H,T) or NULL: each row's log-sum-exp of the scaled scores,
// log sum_{t2<=t} exp(scale q.k)
// Vectorized over the head dimension: dot products and sums over keys accumulate in double
// (exact float products), exp in float (exp_fast), each row's softmax sum in double (sum_exp).
void attention_forward(float* out, float* att, QKVView<float> q, QKVView<float> k, QKVView<float> v,
                       int B, int T, int C, int H, int Hkv, float scale, float* lse = NULL) {
    const int hd = C / H;
    const int group = H / Hkv; // query heads per kv head
    #pragma omp parallel
    {
        float* w = (float*)mallocCheck((size_t)T * sizeof(float));
        double* acc = (double*)mallocCheck((size_t)hd * sizeof(double));
        #pragma omp for collapse(3)
        for (int b = 0; b < B; b++) {
            for (int t = 0; t < T; t++) {
                for (int h = 0; h < H; h++) {
                    const int kvh = h / group;
                    const float* q_t = q.ptr + ((size_t)b * T + t) * q.stride + (size_t)h * hd;
                    float* att_bth = att + (((size_t)b * H + h) * T + t) * T;
                    // scaled scores against keys 0..t, and the max for a stable softmax
                    float maxval = -INFINITY;
                    for (int t2 = 0; t2 <= t; t2++) {
                        const float* k_t2 = k.ptr + ((size_t)b * T + t2) * k.stride + (size_t)kvh * hd;
                        double dot = 0.0;
                        #pragma omp simd reduction(+ : dot)
                        for (int i = 0; i < hd; i++) { dot += (double)q_t[i] * k_t2[i]; }
                        w[t2] = (float)(dot * scale);
                        maxval = w[t2] > maxval ? w[t2] : maxval;
                    }
                    const double sum = sum_exp(w, maxval, t + 1, w); // w[t2] = exp(w[t2] - max)
                    const float inv = (float)(1.0 / sum);
                    for (int t2 = 0; t2 < T; t2++) {
                        att_bth[t2] = t2 <= t ? w[t2] * inv : 0.0f; // causal: 0 above the diagonal
                    }
                    if (lse != NULL) { lse[((size_t)b * H + h) * T + t] = (float)(maxval + log(sum)); }
                    // out = att v
                    for (int i = 0; i < hd; i++) { acc[i] = 0.0; }
                    for (int t2 = 0; t2 <= t; t2++) {
                        const float* v_t2 = v.ptr + ((size_t)b * T + t2) * v.stride + (size_t)kvh * hd;
                        const double p = att_bth[t2];
                        #pragma omp simd
                        for (int i = 0; i < hd; i++) { acc[i] += p * v_t2[i]; }
                    }
                    float* out_bth = out + ((size_t)b * T + t) * C + (size_t)h * hd;
                    for (int i = 0; i < hd; i++) { out_bth[i] = (float)acc[i]; }
                }
            }
        }
        free(w);
        free(acc);
    }
}

// Adds the gradients of q, k, v into the views dq, dk, dv. The views may alias one another
// (shared roles) or dx (identity roles): every write is a +=, so aliased roles sum.
// A kv head's gradient sums over the H/Hkv query heads that read it. Work is split over
// (b, kv head): each writes only its own slice of dq, dk and dv, so threads never collide,
// even when the views alias (aliasing needs Hkv == H or k == v, both within one slice).
// Vectorized over the head dimension, double accumulators, like the forward pass.
void attention_backward(QKVView<float> dq, QKVView<float> dk, QKVView<float> dv, const float* dout,
                        QKVView<float> q, QKVView<float> k, QKVView<float> v, const float* att,
                        int B, int T, int C, int H, int Hkv, float scale) {
    const int hd = C / H;
    const int group = H / Hkv;
    #pragma omp parallel
    {
        double* datt = (double*)mallocCheck((size_t)T * sizeof(double));
        double* dq_acc = (double*)mallocCheck((size_t)hd * sizeof(double));
        double* dk_acc = (double*)mallocCheck((size_t)T * hd * sizeof(double));
        double* dv_acc = (double*)mallocCheck((size_t)T * hd * sizeof(double));
        #pragma omp for collapse(2)
        for (int b = 0; b < B; b++) {
            for (int kvh = 0; kvh < Hkv; kvh++) {
                for (size_t i = 0; i < (size_t)T * hd; i++) { dk_acc[i] = 0.0; dv_acc[i] = 0.0; }
                for (int h = kvh * group; h < (kvh + 1) * group; h++) {
                    for (int t = 0; t < T; t++) {
                        const float* q_t = q.ptr + ((size_t)b * T + t) * q.stride + (size_t)h * hd;
                        const float* att_bth = att + (((size_t)b * H + h) * T + t) * T;
                        const float* dout_bth = dout + ((size_t)b * T + t) * C + (size_t)h * hd;
                        // out = att v: datt = dout . v, dv += att * dout
                        double datt_dot_att = 0.0;
                        for (int t2 = 0; t2 <= t; t2++) {
                            const float* v_t2 = v.ptr + ((size_t)b * T + t2) * v.stride + (size_t)kvh * hd;
                            double* dv_t2 = dv_acc + (size_t)t2 * hd;
                            const double a = att_bth[t2];
                            double d = 0.0;
                            #pragma omp simd reduction(+ : d)
                            for (int i = 0; i < hd; i++) {
                                d += (double)dout_bth[i] * v_t2[i];
                                dv_t2[i] += a * dout_bth[i];
                            }
                            datt[t2] = d;
                            datt_dot_att += d * a;
                        }
                        // softmax backward: dscore = att * (datt - sum(att * datt)), then the scale
                        for (int i = 0; i < hd; i++) { dq_acc[i] = 0.0; }
                        for (int t2 = 0; t2 <= t; t2++) {
                            const float* k_t2 = k.ptr + ((size_t)b * T + t2) * k.stride + (size_t)kvh * hd;
                            double* dk_t2 = dk_acc + (size_t)t2 * hd;
                            const double dpre = (double)att_bth[t2] * (datt[t2] - datt_dot_att) * scale;
                            #pragma omp simd
                            for (int i = 0; i < hd; i++) {
                                dq_acc[i] += dpre * k_t2[i];
                                dk_t2[i] += dpre * q_t[i];
                            }
                        }
                        float* dq_t = dq.ptr + ((size_t)b * T + t) * dq.stride + (size_t)h * hd;
                        for (int i = 0; i < hd; i++) { dq_t[i] += (float)dq_acc[i]; }
                    }
                }
                for (int t2 = 0; t2 < T; t2++) {
                    float* dk_t2 = dk.ptr + ((size_t)b * T + t2) * dk.stride + (size_t)kvh * hd;
                    float* dv_t2 = dv.ptr + ((size_t)b * T + t2) * dv.stride + (size_t)kvh * hd;
                    for (int i = 0; i < hd; i++) {
                        dk_t2[i] += (float)dk_acc[(size_t)t2 * hd + i];
                        dv_t2[i] += (float)dv_acc[(size_t)t2 * hd + i];
                    }
                }
            }
        }
        free(datt);
        free(dq_acc);
        free(dk_acc);
        free(dv_acc);
    }
}

// Softmax over the first V of Vp logits (the padded columns get probability 0). exp in float
// (exp_fast, ~2 ulp), the normalizing sum in double (sum_exp).
void softmax_forward(float* probs, const float* logits, int N, int V, int Vp) {
    #pragma omp parallel for
    for (int n = 0; n < N; n++) {
        const float* l = logits + (size_t)n * Vp;
        float* p = probs + (size_t)n * Vp;
        const double sum = sum_exp(l, row_max(l, V), V, p);
        const float inv = (float)(1.0 / sum);
        #pragma omp simd
        for (int i = 0; i < V; i++) { p[i] *= inv; }
        for (int i = V; i < Vp; i++) { p[i] = 0.0f; }
    }
}

// losses (N) = -log probs[target]; computed from the logits (log-sum-exp) rather than from the
// rounded probability, which would lose relative precision on small probabilities
void crossentropy_forward(float* losses, const float* logits, const int* targets, int N, int V, int Vp) {
    #pragma omp parallel for
    for (int n = 0; n < N; n++) {
        const float* l = logits + (size_t)n * Vp;
        const float maxval = row_max(l, V);
        const double sum = sum_exp(l, maxval, V, NULL);
        losses[n] = (float)(log(sum) + (double)maxval - (double)l[targets[n]]);
    }
}

// dlogits = (probs - onehot(target)) * dloss, padded columns get no gradient
void crossentropy_softmax_backward(float* dlogits, const float* dlosses, const float* probs,
                                   const int* targets, int N, int V, int Vp) {
    #pragma omp parallel for
    for (int n = 0; n < N; n++) {
        float* dl = dlogits + (size_t)n * Vp;
        const float* p = probs + (size_t)n * Vp;
        const float d = dlosses[n];
        const int target = targets[n];
        #pragma omp simd
        for (int i = 0; i < V; i++) {
            const float indicator = i == target ? 1.0f : 0.0f;
            dl[i] += (p[i] - indicator) * d;
        }
    }
}

// one line naming the attention this binary runs (printed at start-up)
static const char* attention_path_description(void) {
    static char line[256];
    if (kAttentionTiled) {
        snprintf(line, sizeof(line), "attention: tiled like flash attention (%dx%d blocks, online softmax; the backward pass "
                 "recomputes the probabilities; dev/cpu/attention_tiled_cpu.h)", ATTN_TILED_BLOCK_M, ATTN_TILED_BLOCK_N);
    } else {
        snprintf(line, sizeof(line), "attention: textbook, each head's T x T probabilities kept for the backward pass "
                 "(build/train_gpt2_cpu_tiled_standard tiles it like flash attention)");
    }
    return line;
}

// ----------------------------------------------------------------------------
// GPT-2 model definition

// the parameter tensors, in the file order of param_tensor_names (attention_variants.cuh);
// a tensor the config does not have is NULL
typedef struct {
    float* wte;       // (Vp, C)
    float* wpe;       // (maxT, C)
    float* ln1w;      // (L, C)
    float* ln1b;      // (L, C)
    float* qkvw;      // (L, width, C)
    float* qkvb;      // (L, width)
    float* attprojw;  // (L, C, C)
    float* attprojb;  // (L, C)
    float* ln2w;      // (L, C)
    float* ln2b;      // (L, C)
    float* fcw;       // (L, M, C)
    float* fcb;       // (L, M)
    float* fcprojw;   // (L, C, M)
    float* fcprojb;   // (L, C)
    float* lnfw;      // (C)
    float* lnfb;      // (C)
    float* lm_head;   // (Vp, C), untied head only
    float* qres_rmsw; // (L, C)
    float* qres_w1;   // (L, C/2, C)
    float* qres_w2;   // (L, C, C/2)
    float* qres_lnw;  // (L, C)
} ParameterTensors;

static void point_parameters(ParameterTensors* p, float* memory, const size_t sizes[NUM_PARAMETER_TENSORS]) {
    float** ptrs[NUM_PARAMETER_TENSORS] = {
        &p->wte, &p->wpe, &p->ln1w, &p->ln1b, &p->qkvw, &p->qkvb, &p->attprojw, &p->attprojb,
        &p->ln2w, &p->ln2b, &p->fcw, &p->fcb, &p->fcprojw, &p->fcprojb, &p->lnfw, &p->lnfb,
        &p->lm_head, &p->qres_rmsw, &p->qres_w1, &p->qres_w2, &p->qres_lnw,
    };
    float* it = memory;
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
        *ptrs[i] = sizes[i] > 0 ? it : NULL;
        it += sizes[i];
    }
}


#define NUM_ACTIVATION_TENSORS 32
typedef struct {
    float* encoded;    // (B, T, C)
    float* ln1;        // (L, B, T, C)    x, the attention input
    float* ln1_mean;   // (L, B, T)
    float* ln1_rstd;   // (L, B, T)
    float* qkv;        // (L, B, T, width) the fused projection output
    float* qres_r;     // (L, B, T, C)    q_residual only: r = RMSNorm_q(x)
    float* qres_rrstd; // (L, B, T)
    float* qres_h;     // (L, B, T, C/2)  W1 r
    float* qres_hg;    // (L, B, T, C/2)  gelu(W1 r)
    float* qres_u;     // (L, B, T, C)    W2 gelu(W1 r)
    float* qres_mean;  // (L, B, T)
    float* qres_rstd;  // (L, B, T)
    float* qres_f;     // (L, B, T, C)    f = LN_q(u)
    float* qres_q;     // (L, B, T, C)    q = x + f
    float* att;        // (L, B, H, T, T) probabilities after the causal softmax (plain attention only)
    float* att_lse;    // (L, B, H, T)    log-sum-exp of each row's scaled scores
    float* atty;       // (L, B, T, C)
    float* attproj;    // (L, B, T, C)
    float* residual2;  // (L, B, T, C)
    float* ln2;        // (L, B, T, C)
    float* ln2_mean;   // (L, B, T)
    float* ln2_rstd;   // (L, B, T)
    float* fch;        // (L, B, T, M)
    float* fch_gelu;   // (L, B, T, M)
    float* fcproj;     // (L, B, T, C)
    float* residual3;  // (L, B, T, C)
    float* lnf;        // (B, T, C)
    float* lnf_mean;   // (B, T)
    float* lnf_rstd;   // (B, T)
    float* logits;     // (B, T, Vp)
    float* probs;      // (B, T, Vp)
    float* losses;     // (B, T)
} ActivationTensors;

// Sizes of the activations for a (B, T) batch. The q_residual tensors exist only when q comes
// from that branch; the (B, H, T, T) attention matrix only with the plain attention. `for_grads`:
// the gradient buffers skip the attention matrix, because attention_backward forms each row's
// softmax gradient on the fly; no gradient flows into att_lse either, so the tiled attention uses
// that slot as its (B, H, T) delta scratch (one layer at a time).
static void fill_activation_sizes(size_t sizes[NUM_ACTIVATION_TENSORS], const GPT2Config* c,
                                  const QKVLayout* layout, size_t B, size_t T, int for_grads) {
    const size_t L = c->num_layers, C = c->channels, H = c->num_heads, M = c->mlp_hidden;
    const size_t Vp = c->padded_vocab_size, W = layout->width;
    const size_t qres = qkv_has_residual_query(layout) ? 1 : 0;
    const size_t BT = B * T;
    size_t s[NUM_ACTIVATION_TENSORS] = {
        BT * C,                                        // encoded
        L * BT * C, L * BT, L * BT,                    // ln1, ln1_mean, ln1_rstd
        L * BT * W,                                    // qkv
        qres * L * BT * C, qres * L * BT,              // qres_r, qres_rrstd
        qres * L * BT * (C / 2), qres * L * BT * (C / 2), // qres_h, qres_hg
        qres * L * BT * C, qres * L * BT, qres * L * BT, // qres_u, qres_mean, qres_rstd
        qres * L * BT * C, qres * L * BT * C,          // qres_f, qres_q
        (for_grads || kAttentionTiled) ? 0 : L * B * H * T * T, // att
        for_grads ? (kAttentionTiled ? B * H * T : 0) : L * B * H * T, // att_lse (tiled grads: delta)
        L * BT * C, L * BT * C, L * BT * C,            // atty, attproj, residual2
        L * BT * C, L * BT, L * BT,                    // ln2, ln2_mean, ln2_rstd
        L * BT * M, L * BT * M,                        // fch, fch_gelu
        L * BT * C, L * BT * C,                        // fcproj, residual3
        BT * C, BT, BT,                                // lnf, lnf_mean, lnf_rstd
        BT * Vp, BT * Vp, BT,                          // logits, probs, losses
    };
    memcpy(sizes, s, sizeof(s));
}

static size_t activation_floats(const size_t sizes[NUM_ACTIVATION_TENSORS]) {
    size_t total = 0;
    for (int i = 0; i < NUM_ACTIVATION_TENSORS; i++) { total += sizes[i]; }
    return total;
}

// points the tensors of `sizes` one after the other into `memory` (activation_floats(sizes) floats)
static void point_activations(ActivationTensors* acts, float* memory, const size_t sizes[NUM_ACTIVATION_TENSORS]) {
    float** ptrs[NUM_ACTIVATION_TENSORS] = {
        &acts->encoded, &acts->ln1, &acts->ln1_mean, &acts->ln1_rstd, &acts->qkv,
        &acts->qres_r, &acts->qres_rrstd, &acts->qres_h, &acts->qres_hg, &acts->qres_u,
        &acts->qres_mean, &acts->qres_rstd, &acts->qres_f, &acts->qres_q,
        &acts->att, &acts->att_lse, &acts->atty, &acts->attproj, &acts->residual2,
        &acts->ln2, &acts->ln2_mean, &acts->ln2_rstd, &acts->fch, &acts->fch_gelu, &acts->fcproj, &acts->residual3,
        &acts->lnf, &acts->lnf_mean, &acts->lnf_rstd, &acts->logits, &acts->probs, &acts->losses,
    };
    float* it = memory;
    for (int i = 0; i < NUM_ACTIVATION_TENSORS; i++) {
        *ptrs[i] = sizes[i] > 0 ? it : NULL;
        it += sizes[i];
    }
}

// one allocation for all the tensors of `sizes`; returns it (and its number of floats in *total_out)
static float* malloc_and_point_activations(ActivationTensors* acts, const size_t sizes[NUM_ACTIVATION_TENSORS],
                                           size_t* total_out) {
    const size_t total = activation_floats(sizes);
    float* memory = (float*)mallocCheck(total * sizeof(float));
    point_activations(acts, memory, sizes);
    if (total_out != NULL) { *total_out = total; }
    return memory;
}

typedef struct {
    GPT2Config config;
    QKVLayout layout;    // where q, k, v come from
    float attn_scale;    // gpt2_attn_scale(&config)
    // the weights (parameters) of the model, and their sizes
    ParameterTensors params;
    size_t param_sizes[NUM_PARAMETER_TENSORS];
    float* params_memory;
    size_t num_parameters;
    // gradients of the weights
    ParameterTensors grads;
    float* grads_memory;
    // buffers for the AdamW optimizer: the moments of parameters [opt_lo, opt_hi), m_memory[j - opt_lo];
    // all of them, except in a ZeRO-1 run of several processes (dev/trainer/data_parallel.h: this one's shard)
    float* m_memory;
    float* v_memory;
    size_t opt_lo, opt_hi;
    // the activations of the model, and their sizes
    ActivationTensors acts;
    size_t act_sizes[NUM_ACTIVATION_TENSORS];
    float* acts_memory;
    // gradients of the activations
    ActivationTensors grads_acts;
    float* grads_acts_memory;
    size_t num_grad_acts; // floats in grads_acts_memory
    // other run state configuration
    int batch_size; // the batch size (B) of current forward pass
    int seq_len;    // the sequence length (T) of current forward pass
    int* inputs;    // the input tokens for the current forward pass
    int* targets;   // the target tokens for the current forward pass
    float mean_loss; // after a forward pass with targets, the mean loss; -1 without targets
} GPT2;

static void gpt2_init_empty(GPT2* model) {
    memset(model, 0, sizeof(*model));
    model->mean_loss = -1.0f;
}

// Reads a checkpoint (versions 3/5/6/7 of dev/FORMATS.md; bf16 is widened to fp32). Returns 1,
// or 0 with a one-line message in msg naming the file and what was expected (the header, scheme,
// shape and size checks are checkpoint_validate's, shared with the CUDA trainer).
int gpt2_build_from_checkpoint(GPT2* model, const char* path, char* msg, size_t msg_size) {
    gpt2_init_empty(model);
    FILE* f = fopen(path, "rb");
    if (f == NULL) {
        snprintf(msg, msg_size, "%s: cannot open model file (HINT: check the path; dev/reference/make_fixtures.py "
                 "writes test checkpoints, llm.c's gpt2_124M.bin also loads)", path);
        return 0;
    }
    if (file_is_directory(f)) {
        snprintf(msg, msg_size, "%s: is a directory, expected a model file", path);
        fclose(f);
        return 0;
    }
    int header[256];
    if (fread(header, sizeof(int), 256, f) != 256) {
        snprintf(msg, msg_size, "%s: truncated model file: shorter than its 1024-byte header", path);
        fclose(f);
        return 0;
    }
    fseek(f, 0, SEEK_END);
    const long long file_size = (long long)ftell(f);
    GPT2Config c;
    if (!checkpoint_validate(header, file_size, path, &c, msg, msg_size)) { fclose(f); return 0; }
    const int elem = checkpoint_version_is_bf16(header[1]) ? 2 : 4;
    const size_t nparams = fill_param_sizes(&c, model->param_sizes);
    fseek(f, 1024, SEEK_SET);

    model->config = c;
    model->layout = qkv_layout(&c);
    model->attn_scale = gpt2_attn_scale(&c);
    model->num_parameters = nparams;
    model->opt_hi = nparams;
    model->params_memory = (float*)mallocCheck(nparams * sizeof(float));
    size_t got;
    if (elem == 4) {
        got = fread(model->params_memory, sizeof(float), nparams, f);
    } else {
        // bf16 is the top half of an fp32: widen exactly
        uint16_t* tmp = (uint16_t*)mallocCheck(nparams * sizeof(uint16_t));
        got = fread(tmp, sizeof(uint16_t), nparams, f);
        for (size_t i = 0; i < got; i++) {
            uint32_t bits = (uint32_t)tmp[i] << 16;
            memcpy(&model->params_memory[i], &bits, sizeof(float));
        }
        free(tmp);
    }
    fclose(f);
    if (got != nparams) {
        snprintf(msg, msg_size, "%s: read %zu of %zu parameters", path, got, nparams);
        free(model->params_memory);
        model->params_memory = NULL;
        return 0;
    }
    point_parameters(&model->params, model->params_memory, model->param_sizes);
    return 1;
}

// what dev/trainer/train_common.h asks of a trainer: the CPU has no limits beyond gpt2_config_check
static int trainer_shape_check(const TrainArgs* a, char* msg, size_t msg_size) { return 1; }

// A new model of `config` with GPT-2's initialization, the CUDA trainer's numbers: gains 1, biases 0,
// every other weight normal(0, 0.02), the projections into the residual stream normal(0, 0.02 /
// sqrt(2 L)); padded vocabulary rows stay 0. The normals are counter-based (a hash of the seed,
// the tensor and the index, then Box-Muller), so they do not depend on the order of filling.
static uint64_t init_mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

int gpt2_build_random(GPT2* model, const GPT2Config* config, unsigned long long seed, char* msg, size_t msg_size) {
    gpt2_init_empty(model);
    if (!gpt2_config_check(config, msg, msg_size)) { return 0; }
    model->config = *config;
    model->layout = qkv_layout(config);
    model->attn_scale = gpt2_attn_scale(config);
    model->num_parameters = fill_param_sizes(config, model->param_sizes);
    model->opt_hi = model->num_parameters;
    model->params_memory = (float*)callocCheck(model->num_parameters, sizeof(float));
    point_parameters(&model->params, model->params_memory, model->param_sizes);
    const float std_res = 0.02f / sqrtf(2.0f * config->num_layers);
    float* p = model->params_memory;
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
        size_t n = model->param_sizes[i];
        if (n == 0) { continue; } // absent (lm_head when tied, biases with bias=0, ...)
        const int is_gain = i == PARAM_LN1W || i == PARAM_LN2W || i == PARAM_LNFW || i == PARAM_QRES_RMSW || i == PARAM_QRES_LNW;
        const int is_bias = i == PARAM_LN1B || i == PARAM_QKVB || i == PARAM_ATTPROJB || i == PARAM_LN2B ||
                            i == PARAM_FCB || i == PARAM_FCPROJB || i == PARAM_LNFB;
        if (is_gain) {
            for (size_t j = 0; j < n; j++) { p[j] = 1.0f; }
        } else if (!is_bias) {
            if (i == PARAM_WTE || i == PARAM_LM_HEAD) { n = (size_t)config->vocab_size * config->channels; }
            const float std = param_tensor_residual_scaled[i] ? std_res : 0.02f;
            for (size_t j = 0; j < n; j++) {
                const uint64_t h1 = init_mix64(seed * 0x9E3779B97F4A7C15ULL + (uint64_t)i * 0xD1B54A32D192ED03ULL + 2 * j + 1);
                const uint64_t h2 = init_mix64(h1 ^ 0xABC98388FB8FAC03ULL);
                const float u1 = ((float)(h1 >> 40) + 0.5f) / 16777216.0f; // in (0, 1)
                const float u2 = (float)(h2 >> 40) / 16777216.0f;
                p[j] = std * sqrtf(-2.0f * logf(u1)) * cosf(6.283185307179586f * u2);
            }
        }
        p += model->param_sizes[i];
    }
    return 1;
}

// The model file in fp32, written to a temporary name and renamed: llm.c's version 3 where llm.c
// can express the model (checkpoint_version_for), else version 6; what the FP32 CUDA build writes,
// so either trainer (and llm.c, for plain GPT-2) reads the other's checkpoints. The values are
// checked first (values_check_tensor). Returns 1, or 0 with a one-line message and nothing written.
static int tensors_check(const GPT2* model, const float* base, ValuesKind kind, const char* path, char* msg, size_t msg_size) {
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
        if (!values_check_tensor(base, model->param_sizes[i], kind, i, path, msg, msg_size)) { return 0; }
        base += model->param_sizes[i];
    }
    return 1;
}

int gpt2_write_checkpoint(const GPT2* model, const char* path, char* msg, size_t msg_size) {
    if (!tensors_check(model, model->params_memory, VALUES_WEIGHTS, path, msg, msg_size)) { return 0; }
    char tmp[4200];
    FILE* f = open_tmp_for(path, tmp, sizeof(tmp));
    int header[256];
    gpt2_config_to_header(&model->config, 0, header);
    fwrite_or_die(header, sizeof(int), 256, f, tmp);
    fwrite_or_die(model->params_memory, sizeof(float), model->num_parameters, f, tmp);
    close_and_rename(f, tmp, path);
    return 1;
}

// The training state (dev/trainer/train_common.h, above state_header_make): AdamW's m and v of every
// parameter (the model's own, or gathered from the processes of a ZeRO-1 run; NULL: before the first
// update, zeros), no master weights (the parameters are fp32 already). Returns 1, or 0 with a
// one-line message and nothing written.
int gpt2_write_state(const GPT2* model, const TrainState* st, const float* m, const float* v, const char* path, char* msg,
                     size_t msg_size) {
    if (m != NULL && (!tensors_check(model, m, VALUES_ADAM_M, path, msg, msg_size) ||
                      !tensors_check(model, v, VALUES_ADAM_V, path, msg, msg_size))) {
        return 0;
    }
    char tmp[4200];
    FILE* f = open_tmp_for(path, tmp, sizeof(tmp));
    int header[256];
    state_header_make(header, &model->config, st, 0);
    fwrite_or_die(header, sizeof(int), 256, f, tmp);
    fwrite_or_die(&st->loader, sizeof(DataLoaderState), 1, f, tmp);
    const size_t np = model->num_parameters;
    // before the first update the moments are still unallocated: they are zero
    float* zeros = m == NULL ? (float*)callocCheck(np, sizeof(float)) : NULL;
    fwrite_or_die(m != NULL ? m : zeros, sizeof(float), np, f, tmp);
    fwrite_or_die(v != NULL ? v : zeros, sizeof(float), np, f, tmp);
    free(zeros);
    close_and_rename(f, tmp, path);
    return 1;
}

// AdamW's moments, allocated (zeros) on first use: those of parameters [opt_lo, opt_hi)
static void gpt2_alloc_moments(GPT2* model) {
    if (model->m_memory == NULL) {
        const size_t n = model->opt_hi - model->opt_lo;
        model->m_memory = (float*)callocCheck(n > 0 ? n : 1, sizeof(float));
        model->v_memory = (float*)callocCheck(n > 0 ? n : 1, sizeof(float));
    }
}

// Loads the AdamW moments of a state file that state_inspect accepted, those of [opt_lo, opt_hi)
// (whatever number of processes wrote it: the file holds them all); master weights written by
// another build (fp32 copies of parameters this model already holds in fp32) are skipped.
int gpt2_load_state(GPT2* model, const char* path, char* msg, size_t msg_size) {
    const size_t np = model->num_parameters, lo = model->opt_lo, n = model->opt_hi - model->opt_lo;
    gpt2_alloc_moments(model);
    const long moments = 1024 + (long)sizeof(DataLoaderState);
    FILE* f = fopen(path, "rb");
    if (f == NULL || fseek(f, moments + (long)(lo * sizeof(float)), SEEK_SET) != 0 ||
        fread(model->m_memory, sizeof(float), n, f) != n ||
        fseek(f, moments + (long)((np + lo) * sizeof(float)), SEEK_SET) != 0 ||
        fread(model->v_memory, sizeof(float), n, f) != n) {
        snprintf(msg, msg_size, "cannot read the AdamW moments of the training state");
        if (f != NULL) { fclose(f); }
        return 0;
    }
    fclose(f);
    return 1;
}

// LM head weight: wte when tied, else lm_head
static const float* gpt2_lm_head_weight(const GPT2* model) {
    return model->config.tied_head ? model->params.wte : model->params.lm_head;
}

// ----------------------------------------------------------------------------
// A layer's attention inputs: the fused projection, and q_residual's query sublayer where the
// layout takes q from it. attention_inputs_forward and attention_inputs_backward are the one place
// that asks where q comes from: the training forward, the backward and the decode step form and
// differentiate their q, k and v only through them, and know nothing of the residual query.

// the residual query's weights for one layer, or their gradients
typedef struct {
    float* rmsw; // (C)       RMSNorm_q's gain
    float* w1;   // (C/2, C)
    float* w2;   // (C, C/2)
    float* lnw;  // (C)       LN_q's gain (LN_q has no bias)
} QResWeights;

// the residual query's activations for one layer, or their gradients
typedef struct {
    float* r;     // (B, T, C)   RMSNorm_q(x)
    float* rrstd; // (B, T)
    float* h;     // (B, T, C/2) W1 r
    float* hg;    // (B, T, C/2) gelu(h)
    float* u;     // (B, T, C)   W2 hg
    float* mean;  // (B, T)      LN_q's statistics of u
    float* rstd;  // (B, T)
    float* f;     // (B, T, C)   LN_q(u)
    float* q;     // (B, T, C)   x + f, attention's q
} QResActs;

// layer l's slices of the weights (or their gradients) and of the activations (or their gradients),
// at BT = B * T rows per layer
static QResWeights qres_weights(const ParameterTensors* p, size_t l, size_t C) {
    QResWeights w;
    w.rmsw = p->qres_rmsw + l * C;
    w.w1 = p->qres_w1 + l * (C / 2) * C;
    w.w2 = p->qres_w2 + l * C * (C / 2);
    w.lnw = p->qres_lnw + l * C;
    return w;
}

static QResActs qres_acts(const ActivationTensors* a, size_t l, size_t BT, size_t C) {
    QResActs q;
    q.r = a->qres_r + l * BT * C;
    q.rrstd = a->qres_rrstd + l * BT;
    q.h = a->qres_h + l * BT * (C / 2);
    q.hg = a->qres_hg + l * BT * (C / 2);
    q.u = a->qres_u + l * BT * C;
    q.mean = a->qres_mean + l * BT;
    q.rstd = a->qres_rstd + l * BT;
    q.f = a->qres_f + l * BT * C;
    q.q = a->qres_q + l * BT * C;
    return q;
}

// q = x + LN_q(W2 gelu(W1 RMSNorm_q(x))); x: (B, T, C), N = B * T rows
void qres_forward(QResActs a, const float* x, QResWeights w, int N, int C) {
    rmsnorm_forward(a.r, a.rrstd, x, w.rmsw, N, C);                 // (B, T, C)
    matmul_forward(a.h, a.r, w.w1, NULL, N, C, C / 2);              // (B, T, C/2)
    gelu_forward(a.hg, a.h, (size_t)N * (C / 2));                   // (B, T, C/2)
    matmul_forward(a.u, a.hg, w.w2, NULL, N, C / 2, C);             // (B, T, C)
    layernorm_forward(a.f, a.mean, a.rstd, a.u, w.lnw, NULL, N, C); // (B, T, C)
    residual_forward(a.q, x, a.f, (size_t)N * C);                   // (B, T, C)
}

// d: the sublayer's gradients, d.q = dL/dq on entry; adds into dx (B, T, C) and the weight gradients dw
void qres_backward(QResActs d, QResActs a, QResWeights dw, QResWeights w, float* dx, const float* x, int N, int C) {
    residual_backward(dx, d.f, d.q, (size_t)N * C);
    layernorm_backward(d.u, dw.lnw, NULL, d.f, a.u, w.lnw, a.mean, a.rstd, N, C);
    matmul_backward(d.hg, dw.w2, NULL, d.u, a.hg, w.w2, N, C / 2, C);
    gelu_backward(d.h, a.h, d.hg, (size_t)N * (C / 2));
    matmul_backward(d.r, dw.w1, NULL, d.h, a.r, w.w1, N, C, C / 2);
    rmsnorm_backward(dx, dw.rmsw, d.r, x, w.rmsw, a.rrstd, N, C);
}
// The inspection run's maps of one layer (--dump_attention, --attention_csv; one sequence, B = 1):
// scores (H, T, T) = scale * q_t . k_s for every t and s, before the causal mask, and probs (H, T, T)
// their causal softmax, as attention_forward computes it. Each dot product sums in double in index
// order, with no vectorized reduction: where q and k are one tensor (Q = K) S[t][s] and S[s][t] are
// then the same sum of the same products, and the exact symmetry the test asks for is real.
void attention_maps_forward(float* scores, float* probs, QKVView<float> q, QKVView<float> k, int T, int H, int Hkv,
                            int hd, float scale) {
    const int group = H / Hkv;
    #pragma omp parallel for collapse(2)
    for (int h = 0; h < H; h++) {
        for (int t = 0; t < T; t++) {
            const float* q_t = q.ptr + (size_t)t * q.stride + (size_t)h * hd;
            float* s_row = scores + ((size_t)h * T + t) * T;
            float* p_row = probs + ((size_t)h * T + t) * T;
            for (int u = 0; u < T; u++) {
                const float* k_u = k.ptr + (size_t)u * k.stride + (size_t)(h / group) * hd;
                double dot = 0.0;
                for (int i = 0; i < hd; i++) { dot += (double)q_t[i] * k_u[i]; }
                s_row[u] = (float)(dot * scale);
            }
            float maxval = -INFINITY;
            for (int u = 0; u <= t; u++) { maxval = s_row[u] > maxval ? s_row[u] : maxval; }
            double sum = 0.0;
            for (int u = 0; u <= t; u++) { sum += exp((double)s_row[u] - maxval); }
            for (int u = 0; u < T; u++) { p_row[u] = u <= t ? (float)(exp((double)s_row[u] - maxval) / sum) : 0.0f; }
        }
    }
}

typedef struct {
    QKVView<float> q, k, v;
} QKVViews;

// Layer l's q, k, v in `a`. Given the activations, where attention reads them; given the activation
// gradients, where their gradients go: a role taken from x into dx, roles sharing a tensor into one
// buffer (qkv_role_view, attention_variants.cuh).
static QKVViews layer_qkv_views(const GPT2* model, const ActivationTensors* a, int l, size_t BT) {
    const size_t C = model->config.channels, W = model->layout.width, L = (size_t)l;
    const int hd = model->config.channels / model->config.num_heads;
    float* residual_query = a->qres_q != NULL ? a->qres_q + L * BT * C : NULL;
    const QKVSources<float> src = qkv_sources<float>(a->qkv + L * BT * W, a->ln1 + L * BT * C, residual_query);
    QKVViews v;
    v.q = qkv_role_view(&model->layout, 0, hd, src);
    v.k = qkv_role_view(&model->layout, 1, hd, src);
    v.v = qkv_role_view(&model->layout, 2, hd, src);
    return v;
}

// Forms layer l's q, k, v from x = LN1's output (a->ln1): the fused projection, then the residual
// query where q comes from it. `a` holds BT = B * T rows per layer (the decode step's scratch: 1).
static QKVViews attention_inputs_forward(const GPT2* model, const ActivationTensors* a, int l, size_t BT) {
    const int C = model->config.channels, W = model->layout.width;
    const size_t L = (size_t)l;
    const ParameterTensors* p = &model->params;
    const float* x = a->ln1 + L * BT * C;
    const float* qkvb = p->qkvb != NULL ? p->qkvb + L * W : NULL;
    matmul_forward(a->qkv + L * BT * W, x, p->qkvw + L * W * C, qkvb, (int)BT, C, W); // (B, T, width)
    profile_mark(PROF_QKV_FWD);
    if (qkv_has_residual_query(&model->layout)) {
        qres_forward(qres_acts(a, L, BT, C), x, qres_weights(p, L, C), (int)BT, C); // (B, T, C)
        profile_mark(PROF_QRES_FWD);
    }
    return layer_qkv_views(model, a, l, BT);
}

// The backward of attention_inputs_forward, once attention's backward has added dq, dk, dv where
// layer_qkv_views(ga) says: adds into dx = ga->ln1 (B, T, C) and the weights' gradients.
static void attention_inputs_backward(const GPT2* model, const ActivationTensors* a, const ActivationTensors* ga,
                                      int l, size_t BT) {
    const int C = model->config.channels, W = model->layout.width;
    const size_t L = (size_t)l;
    const ParameterTensors* p = &model->params;
    const ParameterTensors* g = &model->grads;
    const float* x = a->ln1 + L * BT * C;
    float* dx = ga->ln1 + L * BT * C;
    if (qkv_has_residual_query(&model->layout)) {
        qres_backward(qres_acts(ga, L, BT, C), qres_acts(a, L, BT, C), qres_weights(g, L, C), qres_weights(p, L, C),
                      dx, x, (int)BT, C);
        profile_mark(PROF_QRES_BWD);
    }
    float* dqkvb = g->qkvb != NULL ? g->qkvb + L * W : NULL;
    matmul_backward(dx, g->qkvw + L * W * C, dqkvb, ga->qkv + L * BT * W, x, p->qkvw + L * W * C, (int)BT, C, W);
    profile_mark(PROF_QKV_BWD);
}

// Forward pass on inputs (B, T); with targets (may be NULL) also the loss. Returns 1, or 0 with a
// message (tokens out of range, T too long).
int gpt2_forward(GPT2* model, const int* inputs, const int* targets, int B, int T, char* msg, size_t msg_size) {
    const GPT2Config* c = &model->config;
    const int V = c->vocab_size, Vp = c->padded_vocab_size, L = c->num_layers;
    const int C = c->channels, H = c->num_heads, Hkv = c->num_kv_heads, M = c->mlp_hidden;
    if (model->params_memory == NULL) {
        snprintf(msg, msg_size, "model was not initialized from a checkpoint");
        return 0;
    }
    if (B < 1 || T < 1 || T > c->max_seq_len) {
        snprintf(msg, msg_size, "batch B=%d T=%d: need B >= 1 and 1 <= T <= max_seq_len=%d", B, T, c->max_seq_len);
        return 0;
    }
    for (int i = 0; i < B * T; i++) {
        if (inputs[i] < 0 || inputs[i] >= V || (targets != NULL && (targets[i] < 0 || targets[i] >= V))) {
            snprintf(msg, msg_size, "token out of range at position %d (input %d, target %d), expected 0..%d "
                     "(HINT: was the data tokenized for this model's vocab?)", i, inputs[i],
                     targets != NULL ? targets[i] : 0, V - 1);
            return 0;
        }
    }
    // lazily allocate the activations for this (B, T); a larger batch later is an error, as in llm.c
    if (model->acts_memory == NULL) {
        model->batch_size = B;
        model->seq_len = T;
        fill_activation_sizes(model->act_sizes, c, &model->layout, B, T, 0);
        model->acts_memory = malloc_and_point_activations(&model->acts, model->act_sizes, NULL);
        model->inputs = (int*)mallocCheck((size_t)B * T * sizeof(int));
        model->targets = (int*)mallocCheck((size_t)B * T * sizeof(int));
    } else if (B != model->batch_size || T != model->seq_len) {
        snprintf(msg, msg_size, "batch shape changed: B=%d T=%d, the model was set up for B=%d T=%d",
                 B, T, model->batch_size, model->seq_len);
        return 0;
    }
    memcpy(model->inputs, inputs, (size_t)B * T * sizeof(int));
    if (targets != NULL) { memcpy(model->targets, targets, (size_t)B * T * sizeof(int)); }

    ParameterTensors p = model->params;
    ActivationTensors a = model->acts;
    const size_t BT = (size_t)B * T;
    encoder_forward(a.encoded, inputs, p.wte, p.wpe, B, T, C); // (B, T, C)
    profile_mark(PROF_ENCODER_FWD);
    for (int l = 0; l < L; l++) {
        const float* residual = l == 0 ? a.encoded : a.residual3 + (size_t)(l - 1) * BT * C;
        // this layer's weights
        const float* l_ln1w = p.ln1w + (size_t)l * C;
        const float* l_ln1b = p.ln1b != NULL ? p.ln1b + (size_t)l * C : NULL;
        const float* l_attprojw = p.attprojw + (size_t)l * C * C;
        const float* l_attprojb = p.attprojb != NULL ? p.attprojb + (size_t)l * C : NULL;
        const float* l_ln2w = p.ln2w + (size_t)l * C;
        const float* l_ln2b = p.ln2b != NULL ? p.ln2b + (size_t)l * C : NULL;
        const float* l_fcw = p.fcw + (size_t)l * M * C;
        const float* l_fcb = p.fcb != NULL ? p.fcb + (size_t)l * M : NULL;
        const float* l_fcprojw = p.fcprojw + (size_t)l * C * M;
        const float* l_fcprojb = p.fcprojb != NULL ? p.fcprojb + (size_t)l * C : NULL;
        // this layer's activations
        float* l_ln1 = a.ln1 + (size_t)l * BT * C;
        float* l_lse = a.att_lse + (size_t)l * B * H * T;
        float* l_atty = a.atty + (size_t)l * BT * C;
        float* l_attproj = a.attproj + (size_t)l * BT * C;
        float* l_residual2 = a.residual2 + (size_t)l * BT * C;
        float* l_ln2 = a.ln2 + (size_t)l * BT * C;
        float* l_fch = a.fch + (size_t)l * BT * M;
        float* l_fch_gelu = a.fch_gelu + (size_t)l * BT * M;
        float* l_fcproj = a.fcproj + (size_t)l * BT * C;
        float* l_residual3 = a.residual3 + (size_t)l * BT * C;

        layernorm_forward(l_ln1, a.ln1_mean + l * BT, a.ln1_rstd + l * BT, residual, l_ln1w, l_ln1b, (int)BT, C);
        profile_mark(PROF_LN1_FWD);
        const QKVViews qkv = attention_inputs_forward(model, &a, l, BT);
        if (kAttentionTiled) {
            attention_tiled_forward(l_atty, l_lse, qkv.q, qkv.k, qkv.v, B, T, H, Hkv, C / H, model->attn_scale);
        } else {
            float* l_att = a.att + (size_t)l * B * H * T * T;
            attention_forward(l_atty, l_att, qkv.q, qkv.k, qkv.v, B, T, C, H, Hkv, model->attn_scale, l_lse);
        }
        profile_mark(PROF_ATTN_FWD);
        matmul_forward(l_attproj, l_atty, l_attprojw, l_attprojb, (int)BT, C, C);
        profile_mark(PROF_ATTPROJ_FWD);
        residual_forward(l_residual2, residual, l_attproj, BT * C);
        layernorm_forward(l_ln2, a.ln2_mean + l * BT, a.ln2_rstd + l * BT, l_residual2, l_ln2w, l_ln2b, (int)BT, C);
        profile_mark(PROF_LN2_FWD);
        matmul_forward(l_fch, l_ln2, l_fcw, l_fcb, (int)BT, C, M); // (B, T, M)
        gelu_forward(l_fch_gelu, l_fch, BT * M);
        profile_mark(PROF_FC_FWD);
        matmul_forward(l_fcproj, l_fch_gelu, l_fcprojw, l_fcprojb, (int)BT, M, C);
        profile_mark(PROF_FCPROJ_FWD);
        residual_forward(l_residual3, l_residual2, l_fcproj, BT * C); // profiled with the next LayerNorm
    }
    const float* residual = a.residual3 + (size_t)(L - 1) * BT * C;
    layernorm_forward(a.lnf, a.lnf_mean, a.lnf_rstd, residual, p.lnfw, p.lnfb, (int)BT, C);
    profile_mark(PROF_LNF_FWD);
    matmul_forward(a.logits, a.lnf, gpt2_lm_head_weight(model), NULL, (int)BT, C, Vp); // (B, T, Vp)
    softmax_forward(a.probs, a.logits, (int)BT, V, Vp);

    if (targets != NULL) {
        crossentropy_forward(a.losses, a.logits, targets, (int)BT, V, Vp);
        double mean = 0.0;
        for (size_t i = 0; i < BT; i++) { mean += a.losses[i]; }
        model->mean_loss = (float)(mean / (double)BT);
    } else {
        model->mean_loss = -1.0f;
    }
    profile_mark(PROF_CLASSIFIER);
    return 1;
}

void gpt2_zero_grad(GPT2* model) {
    if (model->grads_memory != NULL) { memset(model->grads_memory, 0, model->num_parameters * sizeof(float)); }
    if (model->grads_acts_memory != NULL) { memset(model->grads_acts_memory, 0, model->num_grad_acts * sizeof(float)); }
}

// Backward pass of the last forward (which must have had targets): gradients into model->grads
// (+=, call gpt2_zero_grad first). Returns 1, or 0 with a message.
int gpt2_backward(GPT2* model, char* msg, size_t msg_size) {
    if (model->mean_loss == -1.0f) {
        snprintf(msg, msg_size, "backward called without a forward pass with targets");
        return 0;
    }
    if (model->grads_memory == NULL) {
        model->grads_memory = (float*)callocCheck(model->num_parameters, sizeof(float));
        point_parameters(&model->grads, model->grads_memory, model->param_sizes);
        size_t sizes[NUM_ACTIVATION_TENSORS];
        fill_activation_sizes(sizes, &model->config, &model->layout, model->batch_size, model->seq_len, 1);
        model->grads_acts_memory = malloc_and_point_activations(&model->grads_acts, sizes, &model->num_grad_acts);
        gpt2_zero_grad(model);
    }
    // The activations' gradients are this pass's alone (the layers add into them: residual branches,
    // shared q/k/v roles); only the parameters' gradients accumulate over the micro-batches of a
    // step. Without this, the second micro-batch of -d added onto the first's activation gradients.
    memset(model->grads_acts_memory, 0, model->num_grad_acts * sizeof(float));
    const GPT2Config* c = &model->config;
    const int B = model->batch_size, T = model->seq_len;
    const int V = c->vocab_size, Vp = c->padded_vocab_size, L = c->num_layers;
    const int C = c->channels, H = c->num_heads, Hkv = c->num_kv_heads, M = c->mlp_hidden;
    const size_t BT = (size_t)B * T;
    ParameterTensors p = model->params;
    ParameterTensors g = model->grads;
    ActivationTensors a = model->acts;
    ActivationTensors ga = model->grads_acts;

    // the loss is the mean over B*T positions
    const float dloss_mean = 1.0f / (float)BT;
    for (size_t i = 0; i < BT; i++) { ga.losses[i] = dloss_mean; }
    crossentropy_softmax_backward(ga.logits, ga.losses, a.probs, model->targets, (int)BT, V, Vp);
    float* dlm_head = c->tied_head ? g.wte : g.lm_head;
    matmul_backward(ga.lnf, dlm_head, NULL, ga.logits, a.lnf, gpt2_lm_head_weight(model), (int)BT, C, Vp);
    profile_mark(PROF_CLASSIFIER);
    const float* residual = a.residual3 + (size_t)(L - 1) * BT * C;
    float* dresidual = ga.residual3 + (size_t)(L - 1) * BT * C;
    layernorm_backward(dresidual, g.lnfw, g.lnfb, ga.lnf, residual, p.lnfw, a.lnf_mean, a.lnf_rstd, (int)BT, C);
    profile_mark(PROF_LNF_BWD);

    for (int l = L - 1; l >= 0; l--) {
        residual = l == 0 ? a.encoded : a.residual3 + (size_t)(l - 1) * BT * C;
        dresidual = l == 0 ? ga.encoded : ga.residual3 + (size_t)(l - 1) * BT * C;
        // this layer's weights and their gradients
        const float* l_ln1w = p.ln1w + (size_t)l * C;
        const float* l_attprojw = p.attprojw + (size_t)l * C * C;
        const float* l_ln2w = p.ln2w + (size_t)l * C;
        const float* l_fcw = p.fcw + (size_t)l * M * C;
        const float* l_fcprojw = p.fcprojw + (size_t)l * C * M;
        float* dl_ln1w = g.ln1w + (size_t)l * C;
        float* dl_ln1b = g.ln1b != NULL ? g.ln1b + (size_t)l * C : NULL;
        float* dl_attprojw = g.attprojw + (size_t)l * C * C;
        float* dl_attprojb = g.attprojb != NULL ? g.attprojb + (size_t)l * C : NULL;
        float* dl_ln2w = g.ln2w + (size_t)l * C;
        float* dl_ln2b = g.ln2b != NULL ? g.ln2b + (size_t)l * C : NULL;
        float* dl_fcw = g.fcw + (size_t)l * M * C;
        float* dl_fcb = g.fcb != NULL ? g.fcb + (size_t)l * M : NULL;
        float* dl_fcprojw = g.fcprojw + (size_t)l * C * M;
        float* dl_fcprojb = g.fcprojb != NULL ? g.fcprojb + (size_t)l * C : NULL;
        // this layer's activations and their gradients
        const float* l_atty = a.atty + (size_t)l * BT * C;
        const float* l_residual2 = a.residual2 + (size_t)l * BT * C;
        const float* l_ln2 = a.ln2 + (size_t)l * BT * C;
        const float* l_fch = a.fch + (size_t)l * BT * M;
        const float* l_fch_gelu = a.fch_gelu + (size_t)l * BT * M;
        float* dl_ln1 = ga.ln1 + (size_t)l * BT * C;
        float* dl_atty = ga.atty + (size_t)l * BT * C;
        float* dl_attproj = ga.attproj + (size_t)l * BT * C;
        float* dl_residual2 = ga.residual2 + (size_t)l * BT * C;
        float* dl_ln2 = ga.ln2 + (size_t)l * BT * C;
        float* dl_fch = ga.fch + (size_t)l * BT * M;
        float* dl_fch_gelu = ga.fch_gelu + (size_t)l * BT * M;
        float* dl_fcproj = ga.fcproj + (size_t)l * BT * C;
        float* dl_residual3 = ga.residual3 + (size_t)l * BT * C;

        // MLP
        residual_backward(dl_residual2, dl_fcproj, dl_residual3, BT * C);
        matmul_backward(dl_fch_gelu, dl_fcprojw, dl_fcprojb, dl_fcproj, l_fch_gelu, l_fcprojw, (int)BT, M, C);
        gelu_backward(dl_fch, l_fch, dl_fch_gelu, BT * M);
        profile_mark(PROF_FCPROJ_BWD);
        matmul_backward(dl_ln2, dl_fcw, dl_fcb, dl_fch, l_ln2, l_fcw, (int)BT, C, M);
        profile_mark(PROF_FC_BWD);
        layernorm_backward(dl_residual2, dl_ln2w, dl_ln2b, dl_ln2, l_residual2, l_ln2w,
                           a.ln2_mean + l * BT, a.ln2_rstd + l * BT, (int)BT, C);
        profile_mark(PROF_LN2_BWD);
        // attention
        residual_backward(dresidual, dl_attproj, dl_residual2, BT * C);
        matmul_backward(dl_atty, dl_attprojw, dl_attprojb, dl_attproj, l_atty, l_attprojw, (int)BT, C, C);
        profile_mark(PROF_ATTPROJ_BWD);
        // q, k, v gradients land where the roles live (layer_qkv_views): the fused projection output
        // (shared roles in one place), dx for roles taken from x
        const QKVViews qkv = layer_qkv_views(model, &a, l, BT);
        const QKVViews dqkv = layer_qkv_views(model, &ga, l, BT);
        if (kAttentionTiled) {
            // recomputes the probabilities from lse and the output; ga.att_lse is the delta scratch
            const float* l_lse = a.att_lse + (size_t)l * B * H * T;
            attention_tiled_backward(dqkv.q, dqkv.k, dqkv.v, ga.att_lse, dl_atty, l_atty, l_lse, qkv.q, qkv.k, qkv.v,
                                     B, T, H, Hkv, C / H, model->attn_scale);
        } else {
            const float* l_att = a.att + (size_t)l * B * H * T * T;
            attention_backward(dqkv.q, dqkv.k, dqkv.v, dl_atty, qkv.q, qkv.k, qkv.v, l_att, B, T, C, H, Hkv,
                               model->attn_scale);
        }
        profile_mark(PROF_ATTN_BWD);
        attention_inputs_backward(model, &a, &ga, l, BT);
        layernorm_backward(dresidual, dl_ln1w, dl_ln1b, dl_ln1, residual, l_ln1w,
                           a.ln1_mean + l * BT, a.ln1_rstd + l * BT, (int)BT, C);
        profile_mark(PROF_LN1_BWD);
    }
    encoder_backward(g.wte, g.wpe, ga.encoded, model->inputs, B, T, C);
    profile_mark(PROF_ENCODER_BWD);
    return 1;
}

// the sum of the squared gradients [lo, hi), in double
double gpt2_grad_sum_squares(const GPT2* model, size_t lo, size_t hi) {
    double sum = 0.0;
    #pragma omp simd reduction(+ : sum)
    for (size_t i = lo; i < hi; i++) {
        double g = model->grads_memory[i];
        sum += g * g;
    }
    return sum;
}

// global L2 norm of all parameter gradients
double gpt2_grad_norm(const GPT2* model) { return sqrt(gpt2_grad_sum_squares(model, 0, model->num_parameters)); }

// One AdamW step (dev/FORMATS.md) of the parameters [opt_lo, opt_hi) (all of them, but for a
// ZeRO-1 process) given the global gradient norm (gpt2_grad_norm, taken first so that the trainer can
// skip the update of a bad step): clip by it, decay only the tensors of param_tensor_decayed. t counts
// the updates, from 1.
void gpt2_update_with_norm(GPT2* model, float learning_rate, float beta1, float beta2, float eps,
                           float weight_decay, float grad_clip, int t, double norm) {
    gpt2_alloc_moments(model);
    const double scale = (grad_clip > 0.0f && norm > grad_clip) ? grad_clip / norm : 1.0;
    const double bc1 = 1.0 - pow(beta1, t), bc2 = 1.0 - pow(beta2, t);
    const size_t o = model->opt_lo; // the moments of parameter j are at j - o
    size_t base = 0;
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
        const double wd = param_tensor_decayed[i] ? weight_decay : 0.0;
        const size_t lo = std::max(base, model->opt_lo), hi = std::min(base + model->param_sizes[i], model->opt_hi);
        #pragma omp parallel for simd
        for (size_t j = lo; j < hi; j++) {
            const double g = model->grads_memory[j] * scale;
            const double m = beta1 * (double)model->m_memory[j - o] + (1.0 - beta1) * g;
            const double v = beta2 * (double)model->v_memory[j - o] + (1.0 - beta2) * g * g;
            model->m_memory[j - o] = (float)m;
            model->v_memory[j - o] = (float)v;
            const double mhat = m / bc1, vhat = v / bc2;
            const double p = model->params_memory[j];
            model->params_memory[j] = (float)(p - learning_rate * (mhat / (sqrt(vhat) + eps) + wd * p));
        }
        base += model->param_sizes[i];
    }
}

// the norm, then the update. Returns the norm before clipping.
double gpt2_update(GPT2* model, float learning_rate, float beta1, float beta2, float eps,
                   float weight_decay, float grad_clip, int t) {
    const double norm = gpt2_grad_norm(model);
    gpt2_update_with_norm(model, learning_rate, beta1, beta2, eps, weight_decay, grad_clip, t, norm);
    return norm;
}

void gpt2_free(GPT2* model) {
    free(model->params_memory);
    free(model->grads_memory);
    free(model->m_memory);
    free(model->v_memory);
    free(model->acts_memory);
    free(model->grads_acts_memory);
    free(model->inputs);
    free(model->targets);
    gpt2_init_empty(model);
}

// ----------------------------------------------------------------------------
// KV-cached generation: one token's forward pass per new token, against a cache of every earlier
// token's k and v per layer, instead of a full forward pass over the whole sequence per token; for
// a batch of sequences decoded together (--num_samples), one token of each per step, all at the
// same position, so that each matmul reads the weights once for the whole batch.
//
// What a layer caches is what attention reads as k and v, as qkv_layout() says: a column range of
// the fused projection, or x itself (k_identity, v_identity); a tensor k and v share (kv_shared,
// qkv_shared) is stored once; with GQA only the Hkv heads exist. q is never cached (q_residual's
// branch, like every q, is computed for the new token only). A row of layer l holds [k | v], or the
// one shared tensor: qkv_kv_cache_layer_channels() floats, so the cache per token and sequence is
// 4 x qkv_kv_cache_channels() bytes (attention_variants.cuh; the header's bf16 figure is half).
// The decode step reuses the layer functions above with N = batch rows; its scratch activations
// live in the cache, so it never touches the model's training activations or gradients. No layer
// function mixes rows, so a sequence decoded in a batch is the one decoded alone (tested bit for bit).

typedef struct {
    GPT2Config config;      // the model it was built for (gpt2_decode_step refuses another)
    int batch;              // sequences decoded together: every step feeds one token to each
    int max_T;              // positions it holds per sequence
    int len;                // positions filled: the next decode step runs at position len
    size_t row;             // floats of one cached row of one layer
    size_t k_offset;        // where k starts in a row
    size_t v_offset;        // where v starts in a row (== k_offset when k and v are one tensor)
    float* kv;              // (L, batch, max_T, row): layer l's sequence b at kv + (l * batch + b) * max_T * row
    size_t kv_floats;       // L * batch * max_T * row
    ActivationTensors acts; // a step's rows (B = batch, T = 1) of every activation: the decode step's scratch
    float* memory;          // the one allocation: kv, then acts
} KVCache;

// Attention of one new token: the query row q (C: H heads) at position t against the cached keys
// and values of positions 0..t, k and v (t + 1, Hkv * hd) views; out (C). It is attention_forward's
// row t with the causal mask being the end of the cache: the same GQA mapping (query head h reads kv
// head h / (H / Hkv)) and the same math in double (dot products, max-subtracted softmax, the
// unrounded probabilities times v); the blocked matmuls of the full pass sum in another order, so
// cached and full-forward logits agree to float rounding (test_kv_cache_cpu checks 1e-5).
// No probabilities are kept: nothing goes backward through generation.
void attention_decode_forward(float* out, const float* q, QKVView<float> k, QKVView<float> v, int t, int C, int H,
                              int Hkv, float scale) {
    const int hd = C / H;
    const int group = H / Hkv;
    #pragma omp parallel
    {
        double* w = (double*)mallocCheck((size_t)(t + 1) * sizeof(double));
        double* acc = (double*)mallocCheck((size_t)hd * sizeof(double));
        #pragma omp for
        for (int h = 0; h < H; h++) {
            const int kvh = h / group;
            const float* q_h = q + (size_t)h * hd;
            double maxval = -INFINITY;
            for (int t2 = 0; t2 <= t; t2++) {
                const float* k_t2 = k.ptr + (size_t)t2 * k.stride + (size_t)kvh * hd;
                double dot = 0.0;
                for (int i = 0; i < hd; i++) { dot += (double)q_h[i] * k_t2[i]; }
                w[t2] = dot * scale;
                if (w[t2] > maxval) { maxval = w[t2]; }
            }
            double sum = 0.0;
            for (int t2 = 0; t2 <= t; t2++) {
                w[t2] = exp(w[t2] - maxval);
                sum += w[t2];
            }
            for (int i = 0; i < hd; i++) { acc[i] = 0.0; }
            for (int t2 = 0; t2 <= t; t2++) {
                const float* v_t2 = v.ptr + (size_t)t2 * v.stride + (size_t)kvh * hd;
                const double p = w[t2] / sum;
                for (int i = 0; i < hd; i++) { acc[i] += p * v_t2[i]; }
            }
            float* out_h = out + (size_t)h * hd;
            for (int i = 0; i < hd; i++) { out_h[i] = (float)acc[i]; }
        }
        free(w);
        free(acc);
    }
}

// A cache for `batch` sequences of max_T positions each (at most the model's max_seq_len: wpe has
// that many rows) of a built model. Returns 1, or 0 with a one-line message.
int kv_cache_build(KVCache* cache, const GPT2* model, int max_T, int batch, char* msg, size_t msg_size) {
    memset(cache, 0, sizeof(*cache));
    const GPT2Config* c = &model->config;
    if (model->params_memory == NULL) {
        snprintf(msg, msg_size, "kv cache: the model has no parameters (build it from a checkpoint or -e dN first)");
        return 0;
    }
    if (max_T < 1 || max_T > c->max_seq_len) {
        snprintf(msg, msg_size, "kv cache: %d positions requested, expected 1..max_seq_len=%d", max_T, c->max_seq_len);
        return 0;
    }
    if (batch < 1 || batch > GENERATE_MAX_BATCH) {
        snprintf(msg, msg_size, "kv cache: %d sequences requested, expected 1..%d (HINT: --num_samples)", batch,
                 GENERATE_MAX_BATCH);
        return 0;
    }
    // the row layout from the scheme's layout: v after k, or on top of it when they are one tensor
    const QKVLayout* lay = &model->layout;
    cache->config = *c;
    cache->batch = batch;
    cache->max_T = max_T;
    cache->k_offset = 0;
    cache->v_offset = qkv_roles_share(lay->k, lay->v) ? cache->k_offset : cache->k_offset + (size_t)lay->k.channels;
    cache->row = cache->v_offset + (size_t)lay->v.channels;
    cache->kv_floats = (size_t)c->num_layers * batch * max_T * cache->row;
    size_t sizes[NUM_ACTIVATION_TENSORS];
    fill_activation_sizes(sizes, c, lay, batch, 1, 0);
    cache->memory = (float*)mallocCheck((cache->kv_floats + activation_floats(sizes)) * sizeof(float));
    cache->kv = cache->memory;
    point_activations(&cache->acts, cache->memory + cache->kv_floats, sizes);
    return 1;
}

// empties the cache (the next step runs at position 0), keeping its memory. The rows need no
// clearing: the decode step at position t writes row t before its attention reads rows 0..t.
void kv_cache_reset(KVCache* cache) { cache->len = 0; }

void kv_cache_free(KVCache* cache) {
    free(cache->memory);
    memset(cache, 0, sizeof(*cache));
}

// the k/v bytes allocated per position of one sequence (not the scratch): 4 x qkv_kv_cache_channels(config)
size_t kv_cache_bytes_per_token(const KVCache* cache) {
    return cache->max_T > 0 ? cache->kv_floats * sizeof(float) / ((size_t)cache->max_T * cache->batch) : 0;
}

// One step at position cache->len: tokens[b] (batch of them) is sequence b's next token. Appends
// their k and v to every layer's cache, and writes the logits over the V real tokens into `logits`
// (batch, V); then len++. Returns 1, or 0 with a one-line message (the cache belongs to another
// model, a token out of range, cache full).
int gpt2_decode_step(GPT2* model, KVCache* cache, const int* tokens, float* logits, char* msg, size_t msg_size) {
    const GPT2Config* c = &model->config;
    const int V = c->vocab_size, Vp = c->padded_vocab_size, L = c->num_layers;
    const int C = c->channels, H = c->num_heads, Hkv = c->num_kv_heads, M = c->mlp_hidden;
    if (model->params_memory == NULL || cache->memory == NULL || memcmp(&cache->config, c, sizeof(*c)) != 0) {
        snprintf(msg, msg_size, "decode step: the kv cache was not built for this model (kv_cache_build)");
        return 0;
    }
    const int n = cache->batch;
    for (int b = 0; b < n; b++) {
        if (tokens[b] < 0 || tokens[b] >= V) {
            snprintf(msg, msg_size, "decode step: token %d (sequence %d) out of range, expected 0..%d", tokens[b], b, V - 1);
            return 0;
        }
    }
    const int t = cache->len;
    if (t >= cache->max_T) {
        snprintf(msg, msg_size, "decode step: kv cache full: position %d, the cache holds %d positions (HINT: "
                 "kv_cache_reset, or build it with more)", t, cache->max_T);
        return 0;
    }
    const QKVLayout* lay = &model->layout;
    ParameterTensors p = model->params;
    ActivationTensors a = cache->acts; // n rows: layer l's slice of an (L, n, 1, X) tensor is at l * n * X
    const size_t N = (size_t)n, seq_stride = (size_t)cache->max_T * cache->row;
    encoder_forward(a.encoded, tokens, p.wte, p.wpe + (size_t)t * C, n, 1, C); // position t's embedding, every sequence
    for (int l = 0; l < L; l++) {
        const float* residual = l == 0 ? a.encoded : a.residual3 + (size_t)(l - 1) * N * C;
        const float* l_ln1b = p.ln1b != NULL ? p.ln1b + (size_t)l * C : NULL;
        const float* l_attprojb = p.attprojb != NULL ? p.attprojb + (size_t)l * C : NULL;
        const float* l_ln2b = p.ln2b != NULL ? p.ln2b + (size_t)l * C : NULL;
        const float* l_fcb = p.fcb != NULL ? p.fcb + (size_t)l * M : NULL;
        const float* l_fcprojb = p.fcprojb != NULL ? p.fcprojb + (size_t)l * C : NULL;
        float* l_ln1 = a.ln1 + (size_t)l * N * C;
        float* l_atty = a.atty + (size_t)l * N * C;
        float* l_attproj = a.attproj + (size_t)l * N * C;
        float* l_residual2 = a.residual2 + (size_t)l * N * C;
        float* l_ln2 = a.ln2 + (size_t)l * N * C;
        float* l_fch = a.fch + (size_t)l * N * M;
        float* l_fch_gelu = a.fch_gelu + (size_t)l * N * M;
        float* l_fcproj = a.fcproj + (size_t)l * N * C;
        float* l_residual3 = a.residual3 + (size_t)l * N * C;

        layernorm_forward(l_ln1, a.ln1_mean + l * N, a.ln1_rstd + l * N, residual, p.ln1w + (size_t)l * C, l_ln1b, n, C);
        // the new tokens' q, k, v, a row each; k and v join each sequence's cache at row t
        const QKVViews qkv = attention_inputs_forward(model, &a, l, N);
        float* layer_kv = cache->kv + (size_t)l * N * seq_stride;
        for (int b = 0; b < n; b++) {
            float* seq_kv = layer_kv + (size_t)b * seq_stride;
            float* row_t = seq_kv + (size_t)t * cache->row;
            memcpy(row_t + cache->k_offset, qkv.k.ptr + (size_t)b * qkv.k.stride, (size_t)lay->k.channels * sizeof(float));
            memcpy(row_t + cache->v_offset, qkv.v.ptr + (size_t)b * qkv.v.stride, // shared: k again
                   (size_t)lay->v.channels * sizeof(float));
            const QKVView<float> k_cached = {seq_kv + cache->k_offset, (int)cache->row, Hkv};
            const QKVView<float> v_cached = {seq_kv + cache->v_offset, (int)cache->row, Hkv};
            attention_decode_forward(l_atty + (size_t)b * C, qkv.q.ptr + (size_t)b * qkv.q.stride, k_cached, v_cached, t,
                                     C, H, Hkv, model->attn_scale);
        }
        matmul_forward(l_attproj, l_atty, p.attprojw + (size_t)l * C * C, l_attprojb, n, C, C);
        residual_forward(l_residual2, residual, l_attproj, N * C);
        layernorm_forward(l_ln2, a.ln2_mean + l * N, a.ln2_rstd + l * N, l_residual2, p.ln2w + (size_t)l * C, l_ln2b, n, C);
        matmul_forward(l_fch, l_ln2, p.fcw + (size_t)l * M * C, l_fcb, n, C, M); // (n, M)
        gelu_forward(l_fch_gelu, l_fch, N * M);
        matmul_forward(l_fcproj, l_fch_gelu, p.fcprojw + (size_t)l * C * M, l_fcprojb, n, M, C);
        residual_forward(l_residual3, l_residual2, l_fcproj, N * C);
    }
    layernorm_forward(a.lnf, a.lnf_mean, a.lnf_rstd, a.residual3 + (size_t)(L - 1) * N * C, p.lnfw, p.lnfb, n, C);
    matmul_forward(a.logits, a.lnf, gpt2_lm_head_weight(model), NULL, n, C, Vp); // (n, Vp)
    for (int b = 0; b < n; b++) { memcpy(logits + (size_t)b * V, a.logits + (size_t)b * Vp, (size_t)V * sizeof(float)); }
    cache->len = t + 1;
    return 1;
}

// ----------------------------------------------------------------------------
// training: the CUDA trainer's flags (dev/trainer/train_common.h) and its training loop
// (dev/trainer/train_loop.h), on the CPU
#ifndef TESTING
#include <sys/resource.h>

// peak resident memory of this process, the CPU's "peak memory"
static double peak_rss_mib(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0; // KiB on Linux
}

// The sample printed during training: gen_T - 1 tokens after an end-of-text token.
static int sample_text(GPT2* model, int gen_T, const SamplingSettings* settings, Tokenizer* tokenizer,
                       unsigned long long* rng, char* msg, size_t msg_size) {
    const int eot = sampling_eot_token(tokenizer, model->config.vocab_size);
    KVCache cache;
    if (!kv_cache_build(&cache, model, gen_T, 1, msg, msg_size)) { return 0; }
    float* logits = (float*)mallocCheck((size_t)model->config.vocab_size * sizeof(float));
    Sampler sampler;
    sampler.settings = *settings;
    printf("generating:\n---\n");
    const int ok = generate_tokens(model, &cache, &eot, 1, gen_T - 1, &sampler, rng, tokenizer, logits, NULL, NULL, msg,
                                   msg_size);
    printf("\n---\n");
    kv_cache_free(&cache);
    free(logits);
    return ok;
}

// What a run holds besides the model. train_run and generate_run free it all in one place, on
// every return, so an error exit leaks nothing (the sanitizer builds check, dev/test/test_sanitize.sh).
// Zeroed, every member is safe to free.
typedef struct {
    DataLoader train_loader, val_loader;
    Tokenizer tokenizer;
    KVCache cache;
    float* logits;
} RunResources;

static void run_resources_free(RunResources* r) {
    dataloader_free(&r->train_loader);
    dataloader_free(&r->val_loader);
    tokenizer_free(&r->tokenizer);
    kv_cache_free(&r->cache);
    free(r->logits);
    memset(r, 0, sizeof(*r));
}

// --generate: the prompt, N new tokens with the KV cache for --num_samples sequences decoded
// together (the prompt fed once to all of them), then their speed and the cache's size.
static int generate_body(const TrainArgs* a, GPT2* model, RunResources* r) {
    char msg[4096];
    Tokenizer& tokenizer = r->tokenizer;
    KVCache& cache = r->cache;
    tokenizer_init(&tokenizer, a->tokenizer_path);
    const int V = model->config.vocab_size, N = a->num_samples;
    const int eot = sampling_eot_token(&tokenizer, V);
    std::vector<int> prompt;
    if (!generate_prompt(a, eot, V, &prompt, msg, sizeof(msg)) ||
        !kv_cache_build(&cache, model, (int)prompt.size() + a->generate, N, msg, sizeof(msg))) {
        fprintf(stderr, "error: %s\n", msg);
        return 1;
    }
    r->logits = (float*)mallocCheck((size_t)N * V * sizeof(float));
    if (!generate_samples(model, &cache, a, prompt, &tokenizer, r->logits, (int)sizeof(float), msg, sizeof(msg))) {
        fprintf(stderr, "error: %s\n", msg);
        return 1;
    }
    return 0;
}

static int generate_run(const TrainArgs* a, GPT2* model) {
    RunResources r;
    memset(&r, 0, sizeof(r));
    const int rc = generate_body(a, model, &r);
    run_resources_free(&r);
    return rc;
}

// --dump_attention / --attention_csv: one forward pass per sequence (the prompt, the induction
// probe) at the longest one's T, then each layer's maps from the q and k that pass formed.
static int inspect_run(const TrainArgs* a, GPT2* model) {
    char msg[4096];
    AttentionMaps maps;
    int eot = 0;
    if (!inspect_prepare(a, (int)sizeof(float), &maps, &eot, msg, sizeof(msg))) {
        fprintf(stderr, "error: %s\n", msg);
        return 1;
    }
    const GPT2Config* c = &model->config;
    const int T = inspect_max_T(&maps), H = c->num_heads, hd = c->channels / c->num_heads;
    for (size_t i = 0; i < maps.seqs.size(); i++) {
        AttentionSequence& s = maps.seqs[i];
        const std::vector<int> tokens = inspect_padded_tokens(&s, T, eot);
        if (!gpt2_forward(model, tokens.data(), NULL, 1, T, msg, sizeof(msg))) {
            fprintf(stderr, "error: %s\n", msg);
            return 1;
        }
        for (int l = 0; l < c->num_layers; l++) {
            const QKVViews qkv = layer_qkv_views(model, &model->acts, l, (size_t)T);
            const size_t o = attention_map_offset(l, 0, H, s.T);
            attention_maps_forward(s.scores.data() + o, s.probs.data() + o, qkv.q, qkv.k, s.T, H, c->num_kv_heads, hd,
                                   model->attn_scale);
        }
    }
    if (!inspect_report(a, &maps, msg, sizeof(msg))) {
        fprintf(stderr, "error: %s\n", msg);
        return 1;
    }
    return 0;
}

// A checkpoint at `step`: rank 0 writes the model (every rank holds all of it) and the state, whose
// moments a ZeRO-1 run gathers from every rank first (all ranks call this). Returns 1, or 0 after
// printing the error.
static int write_checkpoint(GPT2* model, DataParallel* dp, const TrainState* st, const char* model_path,
                            const char* state_path, FILE* logf) {
    char msg[16384];
    float *m = model->m_memory, *v = model->v_memory, *full = NULL;
    if (dp->zero) {
        gpt2_alloc_moments(model); // before the first update: zeros, on every rank alike
        if (dp->rank == 0) { full = (float*)mallocCheck(2 * model->num_parameters * sizeof(float)); }
        m = full;
        v = full != NULL ? full + model->num_parameters : NULL;
        if (!dp->backend->gather(dp, model->m_memory, m, DP_F32, "the gather of AdamW's m for a checkpoint") ||
            !dp->backend->gather(dp, model->v_memory, v, DP_F32, "the gather of AdamW's v for a checkpoint")) {
            free(full);
            return 0;
        }
    }
    int ok = 1;
    if (dp->rank == 0) {
        // the model first: a state file marks a complete pair
        ok = gpt2_write_checkpoint(model, model_path, msg, sizeof(msg)) &&
             gpt2_write_state(model, st, m, v, state_path, msg, sizeof(msg));
        if (ok) {
            printf("wrote checkpoint %s + %s\n", model_path, state_path);
        } else {
            train_error(logf, st->step, msg);
        }
    }
    free(full);
    return ok;
}

// the training loop both trainers share: validation, samples, checkpoints, the stop signal, the
// step guard and the step's line, around a Trainer's work
#include "../trainer/train_loop.h"

// This trainer's work in the shared loop, on the CPU
struct CpuTrainer : Trainer {
    GPT2* model;
    TrainRun* run;
    Tokenizer* tokenizer;    // the samples' (-s > 0)
    double loss_sum = 0.0;   // the mean losses of the forward passes since the last mean_loss,
    double loss_count = 0.0; // and their number

    // one forward pass with targets; 0 after printing the error, which names the data (-i or -j)
    int forward(const int* inputs, const int* targets, const char* flag, const char* pattern, int backward) {
        char msg[4096];
        if (!gpt2_forward(model, inputs, targets, run->a->B, run->a->T, msg, sizeof(msg)) ||
            (backward && !gpt2_backward(model, msg, sizeof(msg)))) {
            fprintf(stderr, "error: %s %s: %s\n", flag, pattern, msg);
            return 0;
        }
        loss_sum += model->mean_loss;
        loss_count += 1.0;
        return 1;
    }
    int eval_forward(const DataLoader* batch) override {
        return forward(batch->inputs, batch->targets, "-j", run->a->val_pattern, 0);
    }
    int mean_loss(double* loss, const char* what) override {
        double sums[2] = {loss_sum, loss_count}; // every forward pass has B*T losses: the mean of the means
        loss_sum = loss_count = 0.0;
        if (!dp_sum_doubles(run->dp, sums, 2, what)) { return 0; }
        *loss = sums[1] > 0 ? sums[0] / sums[1] : 0.0;
        return 1;
    }
    int gradients(int step, double* loss, double* norm, DataLoaderState* data_after) override {
        (void)step;
        const TrainArgs* a = run->a;
        DataParallel* dp = run->dp;
        DataLoader* loader = run->train_loader;
        gpt2_zero_grad(model);
        profile_mark(PROF_ZERO_GRAD);
        int seen = 0; // the step's micro-batches walked, this process's and the others'
        for (int micro = 0; micro < a->grad_accum_steps / dp->world; micro++) { // this process's
            next_own_batch(loader, dp, &seen);
            if (!forward(loader->inputs, loader->targets, "-i", a->train_pattern, 1)) { return 0; }
        }
        for (; seen < a->grad_accum_steps; seen++) { dataloader_skip_batch(loader); } // the others' after ours
        dataloader_get_state(loader, data_after);
        // the sums over the processes: the gradients (all, or this process's shard), the norm, the loss
        if (!dp_reduce_gradients(dp, model->grads_memory, DP_F32)) { return 0; }
        if (a->grad_accum_steps > 1) { // each micro-step's gradient is of its own mean loss: average them
            const float inv = 1.0f / (float)a->grad_accum_steps;
            for (size_t i = dp->lo; i < dp->hi; i++) { model->grads_memory[i] *= inv; }
        }
        double norm2 = gpt2_grad_sum_squares(model, dp->lo, dp->hi);
        if (dp->zero && !dp_sum_doubles(dp, &norm2, 1, "the gradient norm's all-reduce")) { return 0; }
        *norm = sqrt(norm2);
        if (!mean_loss(loss, "the loss's all-reduce")) { return 0; }
        profile_mark(PROF_GRAD_NORM);
        return 1;
    }
    int update(float lr, int t, double norm) override {
        const TrainArgs* a = run->a;
        gpt2_update_with_norm(model, lr, a->beta1, a->beta2, a->eps, a->weight_decay, a->grad_clip, t, norm);
        return dp_gather_parameters(run->dp, model->params_memory, DP_F32);
    }
    int sample(unsigned long long* rng, char* msg, size_t msg_size) override {
        return sample_text(model, run->a->gen_T, &run->a->sampling, tokenizer, rng, msg, msg_size);
    }
    int checkpoint(const TrainState* st, const char* model_path, const char* state_path, FILE* logf) override {
        return write_checkpoint(model, run->dp, st, model_path, state_path, logf);
    }
    double peak_memory_mib() override { return peak_rss_mib(); }
    ProfileShape profile_shape() override { // column sums: a pass of their own
        return {run->a->B, run->a->T, run->a->grad_accum_steps, 4, 0, 0, 0, 0, 0};
    }
};

// The training run of resolved arguments, on every process of a data-parallel run (dp; one process:
// a world of one, whose collectives do nothing): the data, the resumed state, then the shared loop.
// Returns the process exit code.
static int train_body(TrainArgs* a, GPT2* model, DataParallel* dp, RunResources* r) {
    char msg[16384];
    int ok = train_data_open(a, &r->train_loader, &r->val_loader); // on every process before any goes on
    if (ok && a->resuming && (!gpt2_load_state(model, a->state_path, msg, sizeof(msg)) ||
                              !dataloader_set_state(&r->train_loader, &a->state.loader, msg, sizeof(msg)))) {
        fprintf(stderr, "error: %s: %s\n", a->state_path, msg);
        ok = 0;
    }
    if (!train_data_agree(a, dp, ok, &r->train_loader, &r->val_loader)) { return 1; }
    TrainRun run = {a, dp, &model->config, &r->train_loader, &r->val_loader, 0, 0, 0, sampling_rng_init(a->seed), NULL};
    if (a->resuming) {
        run.start_step = a->state.step;
        run.rng = a->state.rng_state;
    }
    if (!train_run_plan(&run)) { return 1; }
    if (a->sample_every > 0) { tokenizer_init(&r->tokenizer, a->tokenizer_path); }
    train_run_describe(&run);
    if (a->resuming) { printf("resuming from %s at step %d%s\n", a->state_path, run.start_step, resume_model_note(a)); }
    fflush(stdout);
    CpuTrainer trainer;
    trainer.model = model;
    trainer.run = &run;
    trainer.tokenizer = &r->tokenizer;
    return train_loop(&trainer, &run);
}

static int train_run(TrainArgs* a, GPT2* model, DataParallel* dp) {
    RunResources r;
    memset(&r, 0, sizeof(r));
    const int rc = train_body(a, model, dp, &r);
    run_resources_free(&r);
    return rc;
}

// OpenMP's idle threads spin between parallel regions (libgomp: about 300,000 spins before they
// sleep). The trainer's regions are short and many, so on a machine shared with other jobs the
// spinning threads take the cores those jobs, and our own next region, need: a loaded 2-core machine
// ran a step at half speed and --generate 17x slower (issue 28). Passive waiting costs nothing
// measurable on an idle machine (README, "Training on a CPU"). libgomp reads OMP_WAIT_POLICY once,
// when it loads, before main; so when the variable is unset the trainer sets it and executes
// itself again, and every entry point (make train, make ablate, --generate, a plain command) runs
// the same way. An explicit OMP_WAIT_POLICY is kept.
static void openmp_wait_passively(char** argv) {
#ifdef _OPENMP
    if (getenv("OMP_WAIT_POLICY") != NULL) { return; }
    if (setenv("OMP_WAIT_POLICY", "passive", 1) != 0) { return; }
    execv("/proc/self/exe", argv);
    unsetenv("OMP_WAIT_POLICY"); // no /proc: run with the default policy, which the device line then names
#endif
}

// the wait policy the device line names
static const char* openmp_wait_policy(void) {
    const char* policy = getenv("OMP_WAIT_POLICY");
    return policy != NULL ? policy : "default (spinning)";
}

static int run_main(int argc, char** argv, DataParallel* dp) {
    char msg[16384];
    const char* who = dp->world > 1 ? "rank " : ""; // errors name their rank in a run of several
    char rank_text[32] = "";
    if (dp->world > 1) { snprintf(rank_text, sizeof(rank_text), "%d: ", dp->rank); }
    TrainArgs args;
    train_args_defaults(&args);
    args.world = dp->world;
    args.rank = dp->rank;
    const int parsed = train_args_parse(&args, argc, argv, msg, sizeof(msg));
    if (parsed == 2) {
        print_usage(argv[0]);
        return 0;
    }
    const char* transport = strcmp(dp->backend->name, "none") != 0 ? dp->backend->name : NULL;
    int ok = parsed != 0 && processes_check(&args, transport, dp->world, dp->rank, msg, sizeof(msg)) &&
             train_args_resolve(&args, msg, sizeof(msg)) && train_args_check_data(&args, msg, sizeof(msg));
    ok = ok && processes_work_check(&args, dp->world, msg, sizeof(msg));
    if (!ok) { fprintf(stderr, "error: %s%s%s\n", who, rank_text, msg); }
    if (!checks_agree(&args, dp, ok)) { return 1; } // a rank that failed stops them all
    dp->timeout_s = args.collective_timeout;
    if (args.check_args) { return check_args_report(&args); }
    GPT2 model;
    if (args.from_file) {
        ok = gpt2_build_from_checkpoint(&model, args.model_path, msg, sizeof(msg));
        if (!ok) { fprintf(stderr, "error: %s%s%s\n", who, rank_text, msg); }
        model.config.attn_scale = args.config.attn_scale; // an --attn_scale override
        model.attn_scale = gpt2_attn_scale(&model.config);
    } else {
        ok = gpt2_build_random(&model, &args.config, args.seed, msg, sizeof(msg));
        if (!ok) { fprintf(stderr, "error: %s%s-e %s: %s\n", who, rank_text, args.model_arg, msg); }
    }
    if (ok && !dp_setup_params(dp, model.num_parameters, args.zero_stage, 1, msg, sizeof(msg))) {
        fprintf(stderr, "error: %s%s%s\n", who, rank_text, msg);
        ok = 0;
    }
    if (!dp_all_ok(dp, ok, "the agreement on the model")) { return 1; }
    char desc[256];
    gpt2_config_describe(&model.config, desc, sizeof(desc));
#ifdef _OPENMP
    const int threads = omp_get_max_threads();
#else
    const int threads = 1;
#endif
    printf("device: CPU, %d OpenMP threads (OMP_WAIT_POLICY %s) | precision fp32\n", threads, openmp_wait_policy());
    printf("%s\n", attention_path_description());
    printf("model: scheme %s | %s | attn_scale %g | %zu parameters | %s\n", qkv_scheme_name(model.config.scheme), desc,
           (double)model.attn_scale, model.num_parameters, args.from_file ? args.model_path : "random init");
    model.opt_lo = dp->lo;
    model.opt_hi = dp->hi;
    if (dp->world > 1) { processes_describe(dp, &args); }
    fflush(stdout);
    if (dp->world > 1 && !run_agree(dp, &args, &model.config, model.params_memory, model.num_parameters * sizeof(float))) {
        return 1;
    }
    const int rc = args.generate > 0 ? generate_run(&args, &model)
                   : inspecting(&args)  ? inspect_run(&args, &model)
                                        : train_run(&args, &model, dp);
    gpt2_free(&model);
    return rc;
}

int main(int argc, char** argv) {
    openmp_wait_passively(argv);
    DataParallel dp;
    dp_init_host_process(&dp, &argc, &argv); // MPI's world in a build with MPI, else one process
    if (dp.rank > 0 && freopen("/dev/null", "w", stdout) == NULL) { return 1; } // rank 0 speaks for the run
    const int rc = run_main(argc, argv, &dp);
    // An error of this rank alone may leave the others waiting in a collective: end the whole job now
    // (MPI_Finalize would wait for them). An end every rank agreed on (dp.agreed_exit) finalizes.
    if (rc != 0 && !dp.agreed_exit && dp.world > 1) {
        fflush(stdout);
        fflush(stderr);
        dp.backend->abort_job(&dp);
    }
    dp_finish(&dp);
    return rc;
}
#endif
