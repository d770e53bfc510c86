/*
attention_tiled_cpu.h: the CPU twin of the CUDA trainer's fused (flash) attention.

The GPU kernels and these loops are one algorithm, step for step: the same tiles, loop bounds,
base-2 online softmax, backward passes and float accumulators. Here it is plain C++ (no CUDA,
OpenMP optional), so it is proven on the CPU, against the plain attention of
dev/cpu/train_gpt2_cpu.cpp and the float64 reference, before a GPU runs it. Read it side by side
with the kernels. Users: the CPU trainer built with -DATTENTION_TILED
(make build/test_gpt2_cpu_tiled_<scheme>) and dev/cpu/test_attention_tiled_cpu.cpp.

Names are FlashAttention-2's (FA2); in the paper's: Br = kBlockM, Bc = kBlockN, m_i = row_max,
l_i = row_sum, O_i before the division by l_i = acc_o, dK_j / dV_j / dQ_i = acc_dk / acc_dv / acc_dq.

  B batch, T sequence, H query heads, Hkv kv heads, hd head size, g = H / Hkv query heads per kv
  head (query head h reads kv head kvh = h / g), scale the attention scale.
  S2 = (q . k) * scale * log2(e): the scores in base 2, so every exponential is an exp2.

Forward, one work item (a GPU thread block) per (b, h, m_block):
  row_max = -inf, row_sum = 0, acc_o = 0
  for n_block = 0 .. n_block_max - 1, n_block_max = ceil(min(T, (m_block + 1) * kBlockM) / kBlockN)
      S2 = Q K^T * scale * log2(e), -inf where key > query or key >= T
      m_new = max(row_max, rowmax(S2)); corr = exp2(row_max - m_new); P = exp2(S2 - m_new)
      row_sum = row_sum * corr + rowsum(P); acc_o = acc_o * corr + P V; row_max = m_new
  out = acc_o / row_sum; lse = (row_max + log2(row_sum)) * ln(2)
lse (B, H, T) is the natural-log log-sum-exp of the scaled scores over the keys s <= t. It is all
the backward pass needs to recompute P: no (T, T) matrix is ever stored.

Backward:
  preprocess, per (b, h, t): delta = sum_d dO * O
  dK/dV pass, one work item per (b, kvh, n_block): acc_dk = acc_dv = 0; for each query head h of
  the group, for m_block = (first query tile that sees this key tile) .. ceil(T / kBlockM) - 1:
      P = exp2(S2 - lse * log2(e)), 0 where key > query, query >= T or key >= T
      acc_dv += P^T dO; dP = dO V^T; dS = P * (dP - delta); acc_dk += dS^T Q
  then acc_dk *= scale; dk += acc_dk and dv += acc_dv, or, when k and v are one storage
  (dk.ptr == dv.ptr: kv_shared, qkv_shared), that storage += acc_dk + acc_dv once. A kv head's
  gradient sums its g query heads in the accumulators: no separate reduction.
  dQ pass, one work item per (b, h, m_block): acc_dq = 0; for n_block up to the diagonal (as in
  the forward): recompute P, dP, dS; acc_dq += dS K; then dq += acc_dq * scale.

Gradients are added (+=) into the views dq, dk, dv, which may alias one another (q = k in
qk_shared, q = k = v in qkv_shared, k = v in kv_shared) or x (identity roles): aliased roles sum,
as everywhere in the CPU trainer. No two work items of one pass write the same element: an item
writes only its own rows (its tile) of its own head's columns, and two views written in one pass
(dk, dv) are either the same storage (written once, summed) or disjoint columns. dq aliases dk
only when Hkv == H; the dQ pass runs after the whole dK/dV pass, so aliased += never race.

Accumulators are float, as on the GPU (the trainer's other layers accumulate in double); this
still meets the 1e-5 relative error of dev/test/test_cpu.sh against the float64 reference.
*/
#ifndef ATTENTION_TILED_CPU_H
#define ATTENTION_TILED_CPU_H

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

// q, k, v and their gradients are read and written in place through QKVView<float> (a pointer and
// a row stride): element (b, t, head h, dim d) is ptr[(b * T + t) * stride + h * hd + d]
#include "../../attention_variants.cuh"

// the GPU kernels' tile: kBlockM query rows by kBlockN keys (the *_blocks functions take others)
#define ATTN_TILED_BLOCK_M 64
#define ATTN_TILED_BLOCK_N 64

// OpenMP is optional; without -fopenmp this expands to nothing (and no unknown-pragma warnings)
#ifdef _OPENMP
#define ATTN_TILED_OMP(directive) _Pragma(directive)
#else
#define ATTN_TILED_OMP(directive)
#endif

static const float kAttnTiledLog2e = 1.4426950408889634f; // log2(e)
static const float kAttnTiledLn2 = 0.6931471805599453f;   // ln(2)

// ----------------------------------------------------------------------------
// one work item's tiles: the GPU's shared memory and register fragments, carved from one buffer

typedef struct {
    float* memory;
    float* sQ;      // (kBlockM, hd)
    float* sdO;     // (kBlockM, hd)       backward
    float* sK;      // (kBlockN, hd)
    float* sV;      // (kBlockN, hd)
    float* acc_s;   // (kBlockM, kBlockN)  S2, then P in place
    float* dS;      // (kBlockM, kBlockN)  backward: dS = P * (dP - delta)
    float* acc_o;   // (kBlockM, hd)       forward
    float* acc_dq;  // (kBlockM, hd)       dQ pass
    float* acc_dk;  // (kBlockN, hd)       dK/dV pass
    float* acc_dv;  // (kBlockN, hd)       dK/dV pass
    float* row_max; // (kBlockM)           forward, base 2
    float* row_sum; // (kBlockM)           forward
    float* sLSE;    // (kBlockM)           backward: lse * log2(e), base 2 like S2
    float* sDelta;  // (kBlockM)           backward
} AttnTiledScratch;

static inline AttnTiledScratch attn_tiled_scratch_alloc(int kBlockM, int kBlockN, int hd) {
    const size_t M = (size_t)kBlockM, N = (size_t)kBlockN, D = (size_t)hd;
    const size_t total = 4 * M * D + 4 * N * D + 2 * M * N + 4 * M;
    AttnTiledScratch s;
    s.memory = (float*)malloc(total * sizeof(float));
    if (s.memory == NULL) {
        fprintf(stderr, "error: malloc of %zu floats (tiles %dx%d, hd %d) failed at %s:%d\n", total, kBlockM,
                kBlockN, hd, __FILE__, __LINE__);
        exit(1);
    }
    float* it = s.memory;
    s.sQ = it; it += M * D;
    s.sdO = it; it += M * D;
    s.acc_o = it; it += M * D;
    s.acc_dq = it; it += M * D;
    s.sK = it; it += N * D;
    s.sV = it; it += N * D;
    s.acc_dk = it; it += N * D;
    s.acc_dv = it; it += N * D;
    s.acc_s = it; it += M * N;
    s.dS = it; it += M * N;
    s.row_max = it; it += M;
    s.row_sum = it; it += M;
    s.sLSE = it; it += M;
    s.sDelta = it;
    return s;
}

static inline int attn_tiled_ceil_div(int a, int b) { return (a + b - 1) / b; }

// load tile: sX (rows, hd) = rows row0 .. row0 + rows - 1 of head `head`, batch b, of x
// x: (B, T, *) rows of stride x_stride. Rows at or past T are 0 (the GPU's predicated loads).
static inline void attn_tiled_load_tile(float* sX, const float* x, size_t x_stride, int b, int T, int head, int hd,
                                        int row0, int rows) {
    for (int r = 0; r < rows; r++) {
        const int t = row0 + r;
        float* dst = sX + (size_t)r * hd;
        if (t >= T) {
            for (int d = 0; d < hd; d++) { dst[d] = 0.0f; }
            continue;
        }
        const float* src = x + ((size_t)b * T + t) * x_stride + (size_t)head * hd;
        for (int d = 0; d < hd; d++) { dst[d] = src[d]; }
    }
}

// S2 = Q K^T * scale * log2(e), -inf where key > query (causal) or key >= T (past the sequence)
// acc_s: (kBlockM, kBlockN); sQ: (kBlockM, hd); sK: (kBlockN, hd)
static inline void attn_tiled_scores(float* acc_s, const float* sQ, const float* sK, int m_block, int n_block,
                                     int kBlockM, int kBlockN, int T, int hd, float scale_log2) {
    for (int i = 0; i < kBlockM; i++) {
        const int query = m_block * kBlockM + i;
        const float* q_i = sQ + (size_t)i * hd;
        for (int j = 0; j < kBlockN; j++) {
            const int key = n_block * kBlockN + j;
            const float* k_j = sK + (size_t)j * hd;
            float dot = 0.0f;
            for (int d = 0; d < hd; d++) { dot += q_i[d] * k_j[d]; }
            acc_s[(size_t)i * kBlockN + j] = (key > query || key >= T) ? -INFINITY : dot * scale_log2;
        }
    }
}

// rescale (FA2's softmax_rescale_o), per row i of the tile:
//   m_new = max(row_max, rowmax(S2)); corr = exp2(row_max - m_new); P = exp2(S2 - m_new)
//   row_sum = row_sum * corr + rowsum(P); acc_o *= corr; row_max = m_new
// acc_s: (kBlockM, kBlockN), S2 in, P out; row_max, row_sum: (kBlockM); acc_o: (kBlockM, hd)
// On the first tile row_max = -inf, so corr = 0. m_new is never -inf (no -inf - -inf = NaN): the
// n_blocks run upwards and tile 0 holds key 0, which every row sees (FA2 runs them downwards and
// needs a guard for rows whose first tile is all masked).
static inline void attn_tiled_softmax_rescale_o(float* acc_s, float* row_max, float* row_sum, float* acc_o,
                                                int kBlockM, int kBlockN, int hd) {
    for (int i = 0; i < kBlockM; i++) {
        float* s = acc_s + (size_t)i * kBlockN;
        float m_new = row_max[i];
        for (int j = 0; j < kBlockN; j++) { m_new = fmaxf(m_new, s[j]); }
        const float corr = exp2f(row_max[i] - m_new);
        float sum = 0.0f;
        for (int j = 0; j < kBlockN; j++) {
            s[j] = exp2f(s[j] - m_new);
            sum += s[j];
        }
        row_sum[i] = row_sum[i] * corr + sum;
        float* o = acc_o + (size_t)i * hd;
        for (int d = 0; d < hd; d++) { o[d] *= corr; }
        row_max[i] = m_new;
    }
}

// acc (kBlockM, hd) += A (kBlockM, kBlockN) X (kBlockN, hd)
// the forward's acc_o += P V, and the dQ pass's acc_dq += dS K
static inline void attn_tiled_acc_ab(float* acc, const float* A, const float* X, int kBlockM, int kBlockN, int hd) {
    for (int i = 0; i < kBlockM; i++) {
        float* acc_i = acc + (size_t)i * hd;
        for (int j = 0; j < kBlockN; j++) {
            const float a = A[(size_t)i * kBlockN + j];
            const float* x_j = X + (size_t)j * hd;
            for (int d = 0; d < hd; d++) { acc_i[d] += a * x_j[d]; }
        }
    }
}

// acc (kBlockN, hd) += A^T X, A (kBlockM, kBlockN), X (kBlockM, hd)
// the dK/dV pass's acc_dv += P^T dO and acc_dk += dS^T Q
static inline void attn_tiled_acc_atb(float* acc, const float* A, const float* X, int kBlockM, int kBlockN, int hd) {
    for (int j = 0; j < kBlockN; j++) {
        float* acc_j = acc + (size_t)j * hd;
        for (int i = 0; i < kBlockM; i++) {
            const float a = A[(size_t)i * kBlockN + j];
            const float* x_i = X + (size_t)i * hd;
            for (int d = 0; d < hd; d++) { acc_j[d] += a * x_i[d]; }
        }
    }
}

// epilogue: out = acc_o / row_sum; lse = (row_max + log2(row_sum)) * ln(2); rows past T are not written
// out: (B, T, H*hd) contiguous; lse: (B, H, T); acc_o: (kBlockM, hd); row_max, row_sum: (kBlockM)
static inline void attn_tiled_epilogue(float* out, float* lse, const float* acc_o, const float* row_max,
                                       const float* row_sum, int b, int h, int m_block, int kBlockM, int T, int H,
                                       int hd) {
    for (int i = 0; i < kBlockM; i++) {
        const int t = m_block * kBlockM + i;
        if (t >= T) { break; }
        float* out_t = out + ((size_t)b * T + t) * ((size_t)H * hd) + (size_t)h * hd;
        const float* o = acc_o + (size_t)i * hd;
        for (int d = 0; d < hd; d++) { out_t[d] = o[d] / row_sum[i]; }
        lse[((size_t)b * H + h) * T + t] = (row_max[i] + log2f(row_sum[i])) * kAttnTiledLn2;
    }
}

// Forward with any tile size (the GPU: kBlockM = kBlockN = 64, attention_tiled_forward below).
// out: (B, T, H*hd) contiguous; lse: (B, H, T); q: (B, T, H*hd) view, stride q.stride;
// k, v: (B, T, Hkv*hd) views, strides k.stride, v.stride
static inline void attention_tiled_forward_blocks(float* out, float* lse, QKVView<float> q, QKVView<float> k,
                                                  QKVView<float> v, int B, int T, int H, int Hkv, int hd, float scale,
                                                  int kBlockM, int kBlockN) {
    const int g = H / Hkv;
    const int num_m_blocks = attn_tiled_ceil_div(T, kBlockM);
    const float scale_log2 = scale * kAttnTiledLog2e;
    ATTN_TILED_OMP("omp parallel")
    {
        AttnTiledScratch s = attn_tiled_scratch_alloc(kBlockM, kBlockN, hd);
        ATTN_TILED_OMP("omp for collapse(3)")
        for (int b = 0; b < B; b++) {
            for (int h = 0; h < H; h++) {
                for (int m_block = 0; m_block < num_m_blocks; m_block++) {
                    const int kvh = h / g;
                    attn_tiled_load_tile(s.sQ, q.ptr, q.stride, b, T, h, hd, m_block * kBlockM, kBlockM);
                    for (int i = 0; i < kBlockM; i++) { s.row_max[i] = -INFINITY; s.row_sum[i] = 0.0f; }
                    for (size_t i = 0; i < (size_t)kBlockM * hd; i++) { s.acc_o[i] = 0.0f; }
                    // key tiles up to the diagonal: later ones are masked out entirely
                    const int n_block_max = attn_tiled_ceil_div(T < (m_block + 1) * kBlockM ? T : (m_block + 1) * kBlockM,
                                                                kBlockN);
                    for (int n_block = 0; n_block < n_block_max; n_block++) {
                        attn_tiled_load_tile(s.sK, k.ptr, k.stride, b, T, kvh, hd, n_block * kBlockN, kBlockN);
                        attn_tiled_load_tile(s.sV, v.ptr, v.stride, b, T, kvh, hd, n_block * kBlockN, kBlockN);
                        attn_tiled_scores(s.acc_s, s.sQ, s.sK, m_block, n_block, kBlockM, kBlockN, T, hd, scale_log2);
                        attn_tiled_softmax_rescale_o(s.acc_s, s.row_max, s.row_sum, s.acc_o, kBlockM, kBlockN, hd);
                        attn_tiled_acc_ab(s.acc_o, s.acc_s, s.sV, kBlockM, kBlockN, hd); // acc_o += P V
                    }
                    attn_tiled_epilogue(out, lse, s.acc_o, s.row_max, s.row_sum, b, h, m_block, kBlockM, T, H, hd);
                }
            }
        }
        free(s.memory);
    }
}

// ----------------------------------------------------------------------------
// backward

// preprocess: delta[b, h, t] = sum_d dout[b, t, h*hd + d] * out[b, t, h*hd + d]   (FA2's dot_do_o, "D")
// delta: (B, H, T); dout, out: (B, T, H*hd) contiguous. One (b, h) row of delta.
static inline void attn_tiled_bwd_preprocess(float* delta, const float* dout, const float* out, int b, int h,
                                             int T, int H, int hd) {
    for (int t = 0; t < T; t++) {
        const size_t at = ((size_t)b * T + t) * ((size_t)H * hd) + (size_t)h * hd;
        float sum = 0.0f;
        for (int d = 0; d < hd; d++) { sum += dout[at + d] * out[at + d]; }
        delta[((size_t)b * H + h) * T + t] = sum;
    }
}

// load the tile's rows of lse (times log2(e): base 2, as S2) and of delta; rows past T get 0
// sLSE, sDelta: (kBlockM); lse, delta: (B, H, T)
static inline void attn_tiled_bwd_load_lse_delta(float* sLSE, float* sDelta, const float* lse, const float* delta,
                                                 int b, int h, int m_block, int kBlockM, int T, int H) {
    for (int i = 0; i < kBlockM; i++) {
        const int t = m_block * kBlockM + i;
        const size_t at = ((size_t)b * H + h) * T + t;
        sLSE[i] = t < T ? lse[at] * kAttnTiledLog2e : 0.0f;
        sDelta[i] = t < T ? delta[at] : 0.0f;
    }
}

// P = exp2(S2 - lse * log2(e)), 0 where key > query or key >= T (S2 is -inf there) or query >= T
// acc_s: (kBlockM, kBlockN), S2 in, P out; sLSE: (kBlockM)
static inline void attn_tiled_bwd_recompute_p(float* acc_s, const float* sLSE, int m_block, int kBlockM, int kBlockN,
                                              int T) {
    for (int i = 0; i < kBlockM; i++) {
        const int query = m_block * kBlockM + i;
        float* s = acc_s + (size_t)i * kBlockN;
        for (int j = 0; j < kBlockN; j++) { s[j] = query < T ? exp2f(s[j] - sLSE[i]) : 0.0f; }
    }
}

// dP = dO V^T; dS = P * (dP - delta)   (the softmax backward, row by row)
// dS, P: (kBlockM, kBlockN); sdO: (kBlockM, hd); sV: (kBlockN, hd); sDelta: (kBlockM)
static inline void attn_tiled_bwd_ds(float* dS, const float* P, const float* sdO, const float* sV,
                                     const float* sDelta, int kBlockM, int kBlockN, int hd) {
    for (int i = 0; i < kBlockM; i++) {
        const float* do_i = sdO + (size_t)i * hd;
        for (int j = 0; j < kBlockN; j++) {
            const float* v_j = sV + (size_t)j * hd;
            float dp = 0.0f;
            for (int d = 0; d < hd; d++) { dp += do_i[d] * v_j[d]; }
            dS[(size_t)i * kBlockN + j] = P[(size_t)i * kBlockN + j] * (dp - sDelta[i]);
        }
    }
}

// epilogue of the dK/dV pass: acc_dk *= scale; then dk += acc_dk and dv += acc_dv, or, when k and
// v are one storage (dk.ptr == dv.ptr: kv_shared, qkv_shared), that storage += acc_dk + acc_dv once.
// Keys past T are not written. acc_dk, acc_dv: (kBlockN, hd); dk, dv: (B, T, Hkv*hd) views
static inline void attn_tiled_bwd_dkdv_epilogue(QKVView<float> dk, QKVView<float> dv, float* acc_dk,
                                                const float* acc_dv, int b, int kvh, int n_block, int kBlockN, int T,
                                                int hd, float scale) {
    for (size_t i = 0; i < (size_t)kBlockN * hd; i++) { acc_dk[i] *= scale; }
    const int kv_one_storage = dk.ptr == dv.ptr;
    for (int j = 0; j < kBlockN; j++) {
        const int t = n_block * kBlockN + j;
        if (t >= T) { break; }
        const float* a_dk = acc_dk + (size_t)j * hd;
        const float* a_dv = acc_dv + (size_t)j * hd;
        float* dk_t = dk.ptr + ((size_t)b * T + t) * dk.stride + (size_t)kvh * hd;
        float* dv_t = dv.ptr + ((size_t)b * T + t) * dv.stride + (size_t)kvh * hd;
        if (kv_one_storage) {
            for (int d = 0; d < hd; d++) { dk_t[d] += a_dk[d] + a_dv[d]; }
        } else {
            for (int d = 0; d < hd; d++) { dk_t[d] += a_dk[d]; }
            for (int d = 0; d < hd; d++) { dv_t[d] += a_dv[d]; }
        }
    }
}

// epilogue of the dQ pass: dq += acc_dq * scale; rows past T are not written
// acc_dq: (kBlockM, hd); dq: (B, T, H*hd) view
static inline void attn_tiled_bwd_dq_epilogue(QKVView<float> dq, const float* acc_dq, int b, int h, int m_block,
                                              int kBlockM, int T, int hd, float scale) {
    for (int i = 0; i < kBlockM; i++) {
        const int t = m_block * kBlockM + i;
        if (t >= T) { break; }
        const float* a = acc_dq + (size_t)i * hd;
        float* dq_t = dq.ptr + ((size_t)b * T + t) * dq.stride + (size_t)h * hd;
        for (int d = 0; d < hd; d++) { dq_t[d] += a[d] * scale; }
    }
}

// Backward with any tile size (the GPU: 64 x 64, attention_tiled_backward below): adds (+=) the
// gradients of q, k, v into dq: (B, T, H*hd) view, dk, dv: (B, T, Hkv*hd) views (may alias, see the top).
// delta: (B, H, T) scratch; dout, out: (B, T, H*hd) contiguous; lse: (B, H, T) from the forward;
// q, k, v: the forward's views
static inline void attention_tiled_backward_blocks(QKVView<float> dq, QKVView<float> dk, QKVView<float> dv,
                                                   float* delta, const float* dout, const float* out, const float* lse,
                                                   QKVView<float> q, QKVView<float> k, QKVView<float> v, int B, int T,
                                                   int H, int Hkv, int hd, float scale, int kBlockM, int kBlockN) {
    const int g = H / Hkv;
    const size_t out_stride = (size_t)H * hd;
    const int num_m_blocks = attn_tiled_ceil_div(T, kBlockM);
    const int num_n_blocks = attn_tiled_ceil_div(T, kBlockN);
    const float scale_log2 = scale * kAttnTiledLog2e;
    ATTN_TILED_OMP("omp parallel")
    {
        AttnTiledScratch s = attn_tiled_scratch_alloc(kBlockM, kBlockN, hd);
        ATTN_TILED_OMP("omp for collapse(2)")
        for (int b = 0; b < B; b++) {
            for (int h = 0; h < H; h++) { attn_tiled_bwd_preprocess(delta, dout, out, b, h, T, H, hd); }
        }
        // (the implicit barrier after each `omp for`: the dK/dV pass reads all of delta)

        // dK/dV pass: one item per (b, kvh, n_block) owns rows n_block of kv head kvh in dk and dv
        ATTN_TILED_OMP("omp for collapse(3)")
        for (int b = 0; b < B; b++) {
            for (int kvh = 0; kvh < Hkv; kvh++) {
                for (int n_block = 0; n_block < num_n_blocks; n_block++) {
                    attn_tiled_load_tile(s.sK, k.ptr, k.stride, b, T, kvh, hd, n_block * kBlockN, kBlockN);
                    attn_tiled_load_tile(s.sV, v.ptr, v.stride, b, T, kvh, hd, n_block * kBlockN, kBlockN);
                    for (size_t i = 0; i < (size_t)kBlockN * hd; i++) { s.acc_dk[i] = 0.0f; s.acc_dv[i] = 0.0f; }
                    // the first query tile that sees this key tile: the one holding query = its first key
                    const int m_block_min = n_block * kBlockN / kBlockM;
                    for (int h = kvh * g; h < (kvh + 1) * g; h++) {
                        for (int m_block = m_block_min; m_block < num_m_blocks; m_block++) {
                            attn_tiled_load_tile(s.sQ, q.ptr, q.stride, b, T, h, hd, m_block * kBlockM, kBlockM);
                            attn_tiled_load_tile(s.sdO, dout, out_stride, b, T, h, hd, m_block * kBlockM, kBlockM);
                            attn_tiled_bwd_load_lse_delta(s.sLSE, s.sDelta, lse, delta, b, h, m_block, kBlockM, T, H);
                            attn_tiled_scores(s.acc_s, s.sQ, s.sK, m_block, n_block, kBlockM, kBlockN, T, hd, scale_log2);
                            attn_tiled_bwd_recompute_p(s.acc_s, s.sLSE, m_block, kBlockM, kBlockN, T);
                            attn_tiled_acc_atb(s.acc_dv, s.acc_s, s.sdO, kBlockM, kBlockN, hd); // acc_dv += P^T dO
                            attn_tiled_bwd_ds(s.dS, s.acc_s, s.sdO, s.sV, s.sDelta, kBlockM, kBlockN, hd);
                            attn_tiled_acc_atb(s.acc_dk, s.dS, s.sQ, kBlockM, kBlockN, hd);     // acc_dk += dS^T Q
                        }
                    }
                    attn_tiled_bwd_dkdv_epilogue(dk, dv, s.acc_dk, s.acc_dv, b, kvh, n_block, kBlockN, T, hd, scale);
                }
            }
        }
        // (implicit barrier: every dk += is done before any dq +=, which may be the same storage)

        // dQ pass: one item per (b, h, m_block) owns rows m_block of head h in dq
        ATTN_TILED_OMP("omp for collapse(3)")
        for (int b = 0; b < B; b++) {
            for (int h = 0; h < H; h++) {
                for (int m_block = 0; m_block < num_m_blocks; m_block++) {
                    const int kvh = h / g;
                    attn_tiled_load_tile(s.sQ, q.ptr, q.stride, b, T, h, hd, m_block * kBlockM, kBlockM);
                    attn_tiled_load_tile(s.sdO, dout, out_stride, b, T, h, hd, m_block * kBlockM, kBlockM);
                    attn_tiled_bwd_load_lse_delta(s.sLSE, s.sDelta, lse, delta, b, h, m_block, kBlockM, T, H);
                    for (size_t i = 0; i < (size_t)kBlockM * hd; i++) { s.acc_dq[i] = 0.0f; }
                    const int n_block_max = attn_tiled_ceil_div(T < (m_block + 1) * kBlockM ? T : (m_block + 1) * kBlockM,
                                                                kBlockN);
                    for (int n_block = 0; n_block < n_block_max; n_block++) {
                        attn_tiled_load_tile(s.sK, k.ptr, k.stride, b, T, kvh, hd, n_block * kBlockN, kBlockN);
                        attn_tiled_load_tile(s.sV, v.ptr, v.stride, b, T, kvh, hd, n_block * kBlockN, kBlockN);
                        attn_tiled_scores(s.acc_s, s.sQ, s.sK, m_block, n_block, kBlockM, kBlockN, T, hd, scale_log2);
                        attn_tiled_bwd_recompute_p(s.acc_s, s.sLSE, m_block, kBlockM, kBlockN, T);
                        attn_tiled_bwd_ds(s.dS, s.acc_s, s.sdO, s.sV, s.sDelta, kBlockM, kBlockN, hd);
                        attn_tiled_acc_ab(s.acc_dq, s.dS, s.sK, kBlockM, kBlockN, hd); // acc_dq += dS K
                    }
                    attn_tiled_bwd_dq_epilogue(dq, s.acc_dq, b, h, m_block, kBlockM, T, hd, scale);
                }
            }
        }
        free(s.memory);
    }
}

// ----------------------------------------------------------------------------
// the interface, with the GPU kernels' tiles (kBlockM = kBlockN = 64)

// out: (B, T, H*hd) contiguous; lse: (B, H, T), natural log; q: (B, T, H*hd) view; k, v: (B, T, Hkv*hd) views
static inline void attention_tiled_forward(float* out, float* lse, QKVView<float> q, QKVView<float> k, QKVView<float> v,
                                           int B, int T, int H, int Hkv, int hd, float scale) {
    attention_tiled_forward_blocks(out, lse, q, k, v, B, T, H, Hkv, hd, scale, ATTN_TILED_BLOCK_M, ATTN_TILED_BLOCK_N);
}

// dq, dk, dv: += views like q, k, v (may alias); delta: (B, H, T) scratch; dout, out: (B, T, H*hd)
// contiguous; lse: (B, H, T) from attention_tiled_forward
static inline void attention_tiled_backward(QKVView<float> dq, QKVView<float> dk, QKVView<float> dv, float* delta,
                                            const float* dout, const float* out, const float* lse,
                                            QKVView<float> q, QKVView<float> k, QKVView<float> v,
                                            int B, int T, int H, int Hkv, int hd, float scale) {
    attention_tiled_backward_blocks(dq, dk, dv, delta, dout, out, lse, q, k, v, B, T, H, Hkv, hd, scale,
                                    ATTN_TILED_BLOCK_M, ATTN_TILED_BLOCK_N);
}

#endif // ATTENTION_TILED_CPU_H
