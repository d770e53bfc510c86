/*
dev/cuda/attention_flash_versions.h: the flash attention versions the trainer does not hold.

train_gpt2.cu keeps one flash kernel per direction, the one the GPU measured fastest: forward
version 3 and backward version 4 (llm.c's rule: the trainer holds the winner, the lab the versions).
The versions that lost live here, included by both attention labs after the trainer (and before common.h), whose helpers
(mma_16816, the cp.async and ldmatrix wrappers, the epilogues, the delta kernel) they share:
  forward version 2   64-row tiles, 4 warps, tiles loaded synchronously, operands by scalar shared
                      loads (lab_attention_forward 2; the backward lab's version 2 runs it first)
  backward version 2  the delta kernel, then a dK/dV kernel and a dQ kernel, as version 4 but with
                      version 2's loads (lab_attention_backward 2)
  backward version 3  one pass, dQ summed in a fixed order across CTAs (lab_attention_backward 3)
and the two not yet measured, born here (each enters the trainer if a GPU times it faster than the
trainer's version of its direction):
  forward version 5   4 warps x 32 query rows, 128-key tiles at hd 64, one FFMA into exp2, O through
                      shared memory (lab_attention_forward 5; issue 58)
  backward version 5  version 4's two kernels in FlashAttention-2's shapes: 128-key dK/dV CTAs (32 keys
                      a warp at hd 64), three stages, one barrier a step; dQ in forward version 5's
                      shape (lab_attention_backward 5; issue 58)
  forward version 6   sm_90a, FlashAttention-3's design, its first cut: a producer warpgroup's bulk tensor
                      copies on mbarriers, two consumer warpgroups' wgmma (lab_attention_forward 6;
                      issue 59; a SKIP where the build is not sm_90a or the GPU not compute capability 9.0)
Their measurements and predictions are in the two labs' headers; the version dispatch is
lab_flash_forward / lab_flash_backward at the end of this file (common.h's lab_attention_forward and
lab_attention_backward call them).
*/
#ifndef DEV_CUDA_ATTENTION_FLASH_VERSIONS_H
#define DEV_CUDA_ATTENTION_FLASH_VERSIONS_H

#include <cuda.h>          // CUtensorMap (forward version 6)
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled, reached through cudaGetDriverEntryPointByVersion

// the flash version 3 backward's query rows per step: the registers decide (per warp, dK and dV hold
// 16 keys x hd in fp32 each)
#define FLASH3_BWD_BLOCK_M(head_dim) ((head_dim) == 64 ? 64 : 16)

// its sync words: [0] the work ticket, then per (b, h, query tile) the dQ order counter, then the D flag
// (training_memory.h sizes them for block_m 16, the smaller)
static __attribute__((unused)) inline size_t flash3_bwd_sync_words(int B, int H, int T, int block_m) {
    return 1 + 2 * (size_t)B * H * (size_t)((T + block_m - 1) / block_m);
}


#if PRECISION_IS_BF16
// ----------------------------------------------------------------------------
// version 2's tiles: 64 query rows (or keys) by 64, 4 warps of 16 rows

#define FLASH_BLOCK_M 64   // query rows per tile (kBlockM)
#define FLASH_BLOCK_N 64   // keys per tile (kBlockN); == FLASH_BLOCK_M, so the diagonal tile of
                           // query tile m is key tile m
#define FLASH_WARPS 4      // 4 warps x 16 rows = one 64-row tile
#define FLASH_THREADS (FLASH_WARPS * 32)
static_assert(FLASH_BLOCK_M == FLASH_BLOCK_N, "the causal loop bounds take the diagonal key tile of query tile m to be m");

// two consecutive bf16 of shared memory (even index) as one register
__device__ __forceinline__ uint32_t lds_bf16x2(const floatX* p) { return *reinterpret_cast<const uint32_t*>(p); }

// two bf16 one row apart (a column pair) as one register
__device__ __forceinline__ uint32_t lds_bf16_column_pair(const floatX* p, int stride) {
    return (uint32_t)__bfloat16_as_ushort(p[0]) | ((uint32_t)__bfloat16_as_ushort(p[stride]) << 16);
}

// A fragment of the 16 x 16 block at (row 0, column k0) of a row-major smem tile
__device__ __forceinline__ void load_frag_a(uint32_t a[4], const floatX* s, int stride, int k0, int group, int quad) {
    const floatX* p = s + group * stride + k0 + 2 * quad;
    a[0] = lds_bf16x2(p);
    a[1] = lds_bf16x2(p + 8 * stride);
    a[2] = lds_bf16x2(p + 8);
    a[3] = lds_bf16x2(p + 8 * stride + 8);
}

// B fragment (k0..k0+15, n0..n0+7) where the smem tile holds B transposed: row n, column k
// (K for S = Q K^T, Q for S^T = K Q^T): the k pair is contiguous
__device__ __forceinline__ void load_frag_b_nk(uint32_t b[2], const floatX* s, int stride, int n0, int k0, int group, int quad) {
    const floatX* p = s + (n0 + group) * stride + k0 + 2 * quad;
    b[0] = lds_bf16x2(p);
    b[1] = lds_bf16x2(p + 8);
}

// B fragment (k0..k0+15, n0..n0+7) where the smem tile holds B as is: row k, column n
// (V for O = P V, dO for dV = P^T dO, K for dQ = dS K, Q for dK = dS^T Q): the k pair is a column pair
__device__ __forceinline__ void load_frag_b_kn(uint32_t b[2], const floatX* s, int stride, int k0, int n0, int group, int quad) {
    const floatX* p = s + (k0 + 2 * quad) * stride + n0 + group;
    b[0] = lds_bf16_column_pair(p, stride);
    b[1] = lds_bf16_column_pair(p + 8 * stride, stride);
}

// sTile (kRows, kHeadDim), row stride kHeadDim + FLASH_SMEM_PAD  <-  rows row0.. of one head, g = the
// head's first element of batch row 0 (row stride `stride`); rows >= T are zeros. 16-byte loads.
template <int kRows, int kHeadDim>
__device__ __forceinline__ void flash_load_tile(floatX* sTile, const floatX* g, int stride, int row0, int T) {
    constexpr int kChunks = kHeadDim / 8;
    for (int i = threadIdx.x; i < kRows * kChunks; i += FLASH_THREADS) {
        const int r = i / kChunks, c = (i % kChunks) * 8;
        uint4 val = make_uint4(0u, 0u, 0u, 0u);
        if (row0 + r < T) { val = *reinterpret_cast<const uint4*>(g + (size_t)(row0 + r) * stride + c); }
        *reinterpret_cast<uint4*>(sTile + r * (kHeadDim + FLASH_SMEM_PAD) + c) = val;
    }
}

// S (16, kBlockN) = Q_w K^T for this warp's 16 rows of sQ against the key tile sK, fp32
template <int kHeadDim>
__device__ __forceinline__ void flash_scores(float (&s)[FLASH_BLOCK_N / 8][4], const floatX* sQw, const floatX* sK,
                                             int group, int quad) {
    constexpr int kStride = kHeadDim + FLASH_SMEM_PAD;
    for (int j = 0; j < FLASH_BLOCK_N / 8; j++) { s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f; }
    #pragma unroll
    for (int k0 = 0; k0 < kHeadDim; k0 += 16) {
        uint32_t a[4];
        load_frag_a(a, sQw, kStride, k0, group, quad);
        #pragma unroll
        for (int j = 0; j < FLASH_BLOCK_N / 8; j++) {
            uint32_t b[2];
            load_frag_b_nk(b, sK, kStride, j * 8, k0, group, quad);
            mma_16816(s[j], a, b);
        }
    }
}

// acc (16, kHeadDim) += P (16, kBlock) V (kBlock, kHeadDim), P from fp32 accumulators, V row-major in smem
template <int kHeadDim, int kBlock>
__device__ __forceinline__ void flash_acc_pv(float (&acc)[kHeadDim / 8][4], const float (&p)[kBlock / 8][4],
                                             const floatX* sV, int group, int quad) {
    constexpr int kStride = kHeadDim + FLASH_SMEM_PAD;
    #pragma unroll
    for (int kk = 0; kk < kBlock / 16; kk++) {
        uint32_t a[4];
        frag_a_from_acc<kBlock / 8>(a, p, kk);
        #pragma unroll
        for (int dj = 0; dj < kHeadDim / 8; dj++) {
            uint32_t b[2];
            load_frag_b_kn(b, sV, kStride, kk * 16, dj * 8, group, quad);
            mma_16816(acc[dj], a, b);
        }
    }
}

// Forward. Grid (ceil(T / kBlockM), B * H), FLASH_THREADS threads, dynamic smem 3 tiles.
//   out (B, T, H * kHeadDim), lse (B, H, T) natural-log log-sum-exp of each row's scaled scores;
//   q (B, T, H heads) view, k and v (B, T, Hkv heads) views; scale_log2 = scale * log2(e)
// dev/cuda/attention_forward.cu v2
template <int kHeadDim>
__global__ void __launch_bounds__(FLASH_THREADS)
flash_attention_forward_kernel(floatX* out, float* lse, AttnRows q, AttnRows k, AttnRows v, int T, int H, int Hkv,
                               float scale_log2) {
    constexpr int kStride = kHeadDim + FLASH_SMEM_PAD;
    constexpr int kTilesN = FLASH_BLOCK_N / 8, kTilesD = kHeadDim / 8;
    extern __shared__ __align__(16) unsigned char flash_smem[];
    floatX* sQ = reinterpret_cast<floatX*>(flash_smem); // (kBlockM, kHeadDim)
    floatX* sK = sQ + FLASH_BLOCK_M * kStride;          // (kBlockN, kHeadDim)
    floatX* sV = sK + FLASH_BLOCK_N * kStride;          // (kBlockN, kHeadDim), unused when v is k
    const bool kv_same = k.ptr == v.ptr;
    const floatX* sVk = kv_same ? sK : sV;
    const int m_block = gridDim.x - 1 - blockIdx.x; // the longest rows (most key tiles) start first
    const int b = blockIdx.y / H, h = blockIdx.y % H, kvh = h / (H / Hkv);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, group = lane / 4, quad = lane % 4;
    const floatX* gQ = q.ptr + (size_t)b * T * q.stride + (size_t)h * kHeadDim;
    const floatX* gK = k.ptr + (size_t)b * T * k.stride + (size_t)kvh * kHeadDim;
    const floatX* gV = v.ptr + (size_t)b * T * v.stride + (size_t)kvh * kHeadDim;
    const floatX* sQw = sQ + warp * 16 * kStride; // this warp's 16 query rows
    const int row0 = m_block * FLASH_BLOCK_M + warp * 16 + group; // query of c[0..1]; c[2..3] is row0 + 8

    flash_load_tile<FLASH_BLOCK_M, kHeadDim>(sQ, gQ, q.stride, m_block * FLASH_BLOCK_M, T);
    float acc_o[kTilesD][4]; // (16, kHeadDim) per warp: this warp's rows of O before the division by row_sum
    #pragma unroll
    for (int dj = 0; dj < kTilesD; dj++) { acc_o[dj][0] = acc_o[dj][1] = acc_o[dj][2] = acc_o[dj][3] = 0.0f; }
    float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.0f, 0.0f}; // per thread: rows row0, row0 + 8

    for (int n_block = 0; n_block <= m_block; n_block++) { // key tiles up to the diagonal only
        __syncthreads(); // every warp is done with the previous K/V tile
        flash_load_tile<FLASH_BLOCK_N, kHeadDim>(sK, gK, k.stride, n_block * FLASH_BLOCK_N, T);
        if (!kv_same) { flash_load_tile<FLASH_BLOCK_N, kHeadDim>(sV, gV, v.stride, n_block * FLASH_BLOCK_N, T); }
        __syncthreads(); // the tiles (and on the first pass sQ) are complete

        // S = scale * Q K^T in base 2, -inf where key > query (causal) or key >= T
        float s[kTilesN][4]; // (16, kBlockN) per warp: S, then P
        flash_scores<kHeadDim>(s, sQw, sK, group, quad);
        #pragma unroll
        for (int j = 0; j < kTilesN; j++) {
            #pragma unroll
            for (int e = 0; e < 4; e++) {
                const int key = n_block * FLASH_BLOCK_N + j * 8 + 2 * quad + (e & 1);
                const int query = row0 + (e >= 2 ? 8 : 0);
                s[j][e] = (key > query || key >= T) ? -INFINITY : s[j][e] * scale_log2;
            }
        }
        // online softmax: m_new = max(row_max, rowmax(S)); acc_o, row_sum *= 2^(row_max - m_new); P = 2^(S - m_new)
        #pragma unroll
        for (int r = 0; r < 2; r++) {
            float m_new = row_max[r];
            #pragma unroll
            for (int j = 0; j < kTilesN; j++) { m_new = fmaxf(m_new, fmaxf(s[j][2 * r], s[j][2 * r + 1])); }
            m_new = fmaxf(m_new, __shfl_xor_sync(0xFFFFFFFFu, m_new, 1)); // the 4 lanes of a quad share a row
            m_new = fmaxf(m_new, __shfl_xor_sync(0xFFFFFFFFu, m_new, 2));
            const float m_use = m_new == -INFINITY ? 0.0f : m_new; // a row with no allowed key yet stays all zero
            const float corr = exp2f(row_max[r] - m_use);
            row_max[r] = m_new;
            float sum = 0.0f;
            #pragma unroll
            for (int j = 0; j < kTilesN; j++) {
                s[j][2 * r] = exp2f(s[j][2 * r] - m_use);
                s[j][2 * r + 1] = exp2f(s[j][2 * r + 1] - m_use);
                sum += s[j][2 * r] + s[j][2 * r + 1];
            }
            row_sum[r] = row_sum[r] * corr + sum; // this lane's columns; the quad is summed at the end
            #pragma unroll
            for (int dj = 0; dj < kTilesD; dj++) { acc_o[dj][2 * r] *= corr; acc_o[dj][2 * r + 1] *= corr; }
        }
        // acc_o += P V, P rounded to bf16
        flash_acc_pv<kHeadDim, FLASH_BLOCK_N>(acc_o, s, sVk, group, quad);
    }

    // epilogue: O = acc_o / row_sum, lse = ln(row_sum) + row_max / log2(e)
    flash_store_o_lse<kHeadDim>(out, lse, acc_o, row_max, row_sum, b, h, H, T, row0, quad);
}

// dynamic shared memory of the flash kernels: forward 3 tiles (Q, K, V), backward 4 tiles (+ lse, D)
static size_t flash_smem_bytes(int hd, int tiles, int extra_floats) {
    return (size_t)tiles * FLASH_BLOCK_M * (hd + FLASH_SMEM_PAD) * sizeof(floatX) + (size_t)extra_floats * sizeof(float);
}

template <int kHeadDim>
static void flash_attention_forward_hd(floatX* out, float* lse, AttnRows q, AttnRows k, AttnRows v, int B, int T,
                                       int H, int Hkv, float scale) {
    const size_t smem = flash_smem_bytes(kHeadDim, 3, 0);
    static bool smem_opted_in = false;
    flash_smem_opt_in(flash_attention_forward_kernel<kHeadDim>, smem, &smem_opted_in);
    dim3 grid((T + FLASH_BLOCK_M - 1) / FLASH_BLOCK_M, B * H);
    flash_attention_forward_kernel<kHeadDim><<<grid, FLASH_THREADS, smem>>>(out, lse, q, k, v, T, H, Hkv, scale * FLASH_LOG2E);
    launchCheck();
}

// ----------------------------------------------------------------------------
// flash attention version 2: the backward (dev/cuda/attention_backward.cu v2)
//
// dK, dV. Grid (ceil(T / kBlockN), B * Hkv), FLASH_THREADS threads, dynamic smem 4 tiles + 2 x kBlockM floats.
// A CTA owns one key tile of one kv head and loops over the g = H / Hkv query heads of its group and
// over the query tiles from the diagonal on, so a kv head's gradient sums in registers (no atomics).
// Each warp owns 16 keys and works transposed (keys as rows): S^T = K Q^T.
//   dk, dv: (B, T, Hkv heads) views, where the gradients go; when k and v are one tensor (dk.rows.ptr == dv.rows.ptr)
//   dK + dV is written once. dout (B, T, H * kHeadDim) contiguous; lse, delta (B, H, T) fp32; q (B, T, H
//   heads), k and v (B, T, Hkv heads) views.
// dev/cuda/attention_backward.cu v2
template <int kHeadDim>
__global__ void __launch_bounds__(FLASH_THREADS)
flash_attention_backward_dkdv_kernel(AttnGradDest dk, AttnGradDest dv, const floatX* dout, const float* lse,
                                     const float* delta, AttnRows q, AttnRows k, AttnRows v, int T, int H, int Hkv,
                                     float scale, float scale_log2) {
    constexpr int kStride = kHeadDim + FLASH_SMEM_PAD;
    constexpr int kTilesM = FLASH_BLOCK_M / 8, kTilesD = kHeadDim / 8;
    extern __shared__ __align__(16) unsigned char flash_smem[];
    floatX* sK = reinterpret_cast<floatX*>(flash_smem); // (kBlockN, kHeadDim)
    floatX* sV = sK + FLASH_BLOCK_N * kStride;          // (kBlockN, kHeadDim), unused when v is k
    floatX* sQ = sV + FLASH_BLOCK_N * kStride;          // (kBlockM, kHeadDim)
    floatX* sdO = sQ + FLASH_BLOCK_M * kStride;         // (kBlockM, kHeadDim)
    float* s_lse = reinterpret_cast<float*>(sdO + FLASH_BLOCK_M * kStride); // (kBlockM)
    float* s_delta = s_lse + FLASH_BLOCK_M;                                 // (kBlockM)
    const bool kv_same = k.ptr == v.ptr;
    const floatX* sVk = kv_same ? sK : sV;
    const int n_block = blockIdx.x; // key tile 0 meets every query tile: the longest CTAs start first
    const int b = blockIdx.y / Hkv, kvh = blockIdx.y % Hkv, g = H / Hkv;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, group = lane / 4, quad = lane % 4;
    const int C = H * kHeadDim;
    const floatX* gK = k.ptr + (size_t)b * T * k.stride + (size_t)kvh * kHeadDim;
    const floatX* gV = v.ptr + (size_t)b * T * v.stride + (size_t)kvh * kHeadDim;
    const floatX* sKw = sK + warp * 16 * kStride;  // this warp's 16 keys
    const floatX* sVw = sVk + warp * 16 * kStride;
    const int key0 = n_block * FLASH_BLOCK_N + warp * 16 + group; // key of c[0..1]; c[2..3] is key0 + 8
    const int m_blocks = (T + FLASH_BLOCK_M - 1) / FLASH_BLOCK_M;

    flash_load_tile<FLASH_BLOCK_N, kHeadDim>(sK, gK, k.stride, n_block * FLASH_BLOCK_N, T);
    if (!kv_same) { flash_load_tile<FLASH_BLOCK_N, kHeadDim>(sV, gV, v.stride, n_block * FLASH_BLOCK_N, T); }
    float acc_dk[kTilesD][4], acc_dv[kTilesD][4]; // (16 keys, kHeadDim) per warp each
    #pragma unroll
    for (int dj = 0; dj < kTilesD; dj++) {
        #pragma unroll
        for (int e = 0; e < 4; e++) { acc_dk[dj][e] = 0.0f; acc_dv[dj][e] = 0.0f; }
    }

    for (int j = 0; j < g; j++) { // the query heads of this kv head
        const int h = kvh * g + j;
        const floatX* gQ = q.ptr + (size_t)b * T * q.stride + (size_t)h * kHeadDim;
        const floatX* gdO = dout + (size_t)b * T * C + (size_t)h * kHeadDim;
        const float* lse_bh = lse + ((size_t)b * H + h) * T;
        const float* delta_bh = delta + ((size_t)b * H + h) * T;
        for (int m_block = n_block; m_block < m_blocks; m_block++) { // query tiles from the diagonal on
            __syncthreads(); // every warp is done with the previous Q/dO tile (on the first pass: K/V loads issued)
            flash_load_tile<FLASH_BLOCK_M, kHeadDim>(sQ, gQ, q.stride, m_block * FLASH_BLOCK_M, T);
            flash_load_tile<FLASH_BLOCK_M, kHeadDim>(sdO, gdO, C, m_block * FLASH_BLOCK_M, T);
            for (int i = threadIdx.x; i < FLASH_BLOCK_M; i += FLASH_THREADS) {
                const int t = m_block * FLASH_BLOCK_M + i;
                s_lse[i] = t < T ? lse_bh[t] * FLASH_LOG2E : 0.0f;
                s_delta[i] = t < T ? delta_bh[t] : 0.0f;
            }
            __syncthreads(); // tiles complete

            // P^T = 2^(scale * K Q^T - lse), 0 where query < key (causal) or query >= T
            float pt[kTilesM][4]; // (16 keys, kBlockM queries) per warp: S^T, then P^T
            flash_scores<kHeadDim>(pt, sKw, sQ, group, quad);
            #pragma unroll
            for (int i = 0; i < kTilesM; i++) {
                #pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int col = i * 8 + 2 * quad + (e & 1);
                    const int query = m_block * FLASH_BLOCK_M + col;
                    const int key = key0 + (e >= 2 ? 8 : 0);
                    pt[i][e] = (query < key || query >= T) ? 0.0f : exp2f(pt[i][e] * scale_log2 - s_lse[col]);
                }
            }
            // acc_dv += P^T dO
            flash_acc_pv<kHeadDim, FLASH_BLOCK_M>(acc_dv, pt, sdO, group, quad);
            // dP^T = V dO^T, then dS^T = P^T * (dP^T - D)
            float dst[kTilesM][4]; // (16 keys, kBlockM queries) per warp: dP^T, then dS^T
            flash_scores<kHeadDim>(dst, sVw, sdO, group, quad);
            #pragma unroll
            for (int i = 0; i < kTilesM; i++) {
                #pragma unroll
                for (int e = 0; e < 4; e++) { dst[i][e] = pt[i][e] * (dst[i][e] - s_delta[i * 8 + 2 * quad + (e & 1)]); }
            }
            // acc_dk += dS^T Q (the scale is applied once, below)
            flash_acc_pv<kHeadDim, FLASH_BLOCK_M>(acc_dk, dst, sQ, group, quad);
        }
    }

    // epilogue: dK = scale * acc_dk; a shared k = v tensor gets dK + dV in one write
    flash_store_dkdv<kHeadDim>(dk, dv, acc_dk, acc_dv, b, kvh, T, key0, quad, scale, kv_same);
}

template <int kHeadDim>
static void flash_attention_backward_dkdv(AttnGradDest dk, AttnGradDest dv, const floatX* dout, const float* lse,
                                          const float* delta, AttnRows q, AttnRows k, AttnRows v, int B, int T, int H,
                                          int Hkv, float scale) {
    const size_t smem = flash_smem_bytes(kHeadDim, 4, 2 * FLASH_BLOCK_M);
    static bool smem_opted_in = false;
    flash_smem_opt_in(flash_attention_backward_dkdv_kernel<kHeadDim>, smem, &smem_opted_in);
    const int tiles = (T + FLASH_BLOCK_N - 1) / FLASH_BLOCK_N;
    flash_attention_backward_dkdv_kernel<kHeadDim><<<dim3(tiles, B * Hkv), FLASH_THREADS, smem>>>(
        dk, dv, dout, lse, delta, q, k, v, T, H, Hkv, scale, scale * FLASH_LOG2E);
    launchCheck();
}

// dQ. Grid (ceil(T / kBlockM), B * H), FLASH_THREADS threads, dynamic smem 4 tiles. Recomputes P and
// dS for its query tile against the key tiles up to the diagonal: dQ = scale * dS K. A second kernel
// rather than atomics from the dK/dV kernel, so that every gradient is formed in a fixed order.
//   dq: (B, T, H heads) view (accumulate: add, where q shares k's tensor); dout (B, T, H * kHeadDim);
//   lse, delta (B, H, T) fp32; q (B, T, H heads), k and v (B, T, Hkv heads) views.
// dev/cuda/attention_backward.cu v2
template <int kHeadDim>
__global__ void __launch_bounds__(FLASH_THREADS)
flash_attention_backward_dq_kernel(AttnGradDest dq, const floatX* dout, const float* lse, const float* delta,
                                   AttnRows q, AttnRows k, AttnRows v, int T, int H, int Hkv, float scale,
                                   float scale_log2) {
    constexpr int kStride = kHeadDim + FLASH_SMEM_PAD;
    constexpr int kTilesN = FLASH_BLOCK_N / 8, kTilesD = kHeadDim / 8;
    extern __shared__ __align__(16) unsigned char flash_smem[];
    floatX* sQ = reinterpret_cast<floatX*>(flash_smem); // (kBlockM, kHeadDim)
    floatX* sdO = sQ + FLASH_BLOCK_M * kStride;         // (kBlockM, kHeadDim)
    floatX* sK = sdO + FLASH_BLOCK_M * kStride;         // (kBlockN, kHeadDim)
    floatX* sV = sK + FLASH_BLOCK_N * kStride;          // (kBlockN, kHeadDim), unused when v is k
    const bool kv_same = k.ptr == v.ptr;
    const floatX* sVk = kv_same ? sK : sV;
    const int m_block = gridDim.x - 1 - blockIdx.x;
    const int b = blockIdx.y / H, h = blockIdx.y % H, kvh = h / (H / Hkv);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, group = lane / 4, quad = lane % 4;
    const int C = H * kHeadDim;
    const floatX* gQ = q.ptr + (size_t)b * T * q.stride + (size_t)h * kHeadDim;
    const floatX* gdO = dout + (size_t)b * T * C + (size_t)h * kHeadDim;
    const floatX* gK = k.ptr + (size_t)b * T * k.stride + (size_t)kvh * kHeadDim;
    const floatX* gV = v.ptr + (size_t)b * T * v.stride + (size_t)kvh * kHeadDim;
    const floatX* sQw = sQ + warp * 16 * kStride;
    const floatX* sdOw = sdO + warp * 16 * kStride;
    const int row0 = m_block * FLASH_BLOCK_M + warp * 16 + group;
    float lse_r[2], delta_r[2]; // rows row0, row0 + 8 (lse in base 2)
    #pragma unroll
    for (int r = 0; r < 2; r++) {
        const int t = row0 + 8 * r;
        lse_r[r] = t < T ? lse[((size_t)b * H + h) * T + t] * FLASH_LOG2E : 0.0f;
        delta_r[r] = t < T ? delta[((size_t)b * H + h) * T + t] : 0.0f;
    }

    flash_load_tile<FLASH_BLOCK_M, kHeadDim>(sQ, gQ, q.stride, m_block * FLASH_BLOCK_M, T);
    flash_load_tile<FLASH_BLOCK_M, kHeadDim>(sdO, gdO, C, m_block * FLASH_BLOCK_M, T);
    float acc_dq[kTilesD][4]; // (16, kHeadDim) per warp
    #pragma unroll
    for (int dj = 0; dj < kTilesD; dj++) { acc_dq[dj][0] = acc_dq[dj][1] = acc_dq[dj][2] = acc_dq[dj][3] = 0.0f; }

    for (int n_block = 0; n_block <= m_block; n_block++) {
        __syncthreads(); // every warp is done with the previous K/V tile
        flash_load_tile<FLASH_BLOCK_N, kHeadDim>(sK, gK, k.stride, n_block * FLASH_BLOCK_N, T);
        if (!kv_same) { flash_load_tile<FLASH_BLOCK_N, kHeadDim>(sV, gV, v.stride, n_block * FLASH_BLOCK_N, T); }
        __syncthreads(); // tiles complete

        // P = 2^(scale * Q K^T - lse), 0 where key > query or key >= T
        float p[kTilesN][4]; // (16, kBlockN) per warp: S, then P
        flash_scores<kHeadDim>(p, sQw, sK, group, quad);
        #pragma unroll
        for (int j = 0; j < kTilesN; j++) {
            #pragma unroll
            for (int e = 0; e < 4; e++) {
                const int key = n_block * FLASH_BLOCK_N + j * 8 + 2 * quad + (e & 1);
                const int r = e >= 2 ? 1 : 0;
                p[j][e] = (key > row0 + 8 * r || key >= T) ? 0.0f : exp2f(p[j][e] * scale_log2 - lse_r[r]);
            }
        }
        // dP = dO V^T, dS = P * (dP - D)
        float ds[kTilesN][4]; // (16, kBlockN) per warp: dP, then dS
        flash_scores<kHeadDim>(ds, sdOw, sVk, group, quad);
        #pragma unroll
        for (int j = 0; j < kTilesN; j++) {
            #pragma unroll
            for (int e = 0; e < 4; e++) { ds[j][e] = p[j][e] * (ds[j][e] - delta_r[e >= 2 ? 1 : 0]); }
        }
        // acc_dq += dS K
        flash_acc_pv<kHeadDim, FLASH_BLOCK_N>(acc_dq, ds, sK, group, quad);
    }

    flash_store_dq<kHeadDim>(dq, acc_dq, b, h, T, row0, quad, scale);
}

template <int kHeadDim>
static void flash_attention_backward_dq(AttnGradDest dq, const floatX* dout, const float* lse, const float* delta,
                                        AttnRows q, AttnRows k, AttnRows v, int B, int T, int H, int Hkv, float scale) {
    const size_t smem = flash_smem_bytes(kHeadDim, 4, 0);
    static bool smem_opted_in = false;
    flash_smem_opt_in(flash_attention_backward_dq_kernel<kHeadDim>, smem, &smem_opted_in);
    const int tiles = (T + FLASH_BLOCK_M - 1) / FLASH_BLOCK_M;
    flash_attention_backward_dq_kernel<kHeadDim><<<dim3(tiles, B * H), FLASH_THREADS, smem>>>(
        dq, dout, lse, delta, q, k, v, T, H, Hkv, scale, scale * FLASH_LOG2E);
    launchCheck();
}

// dK/dV first, then dQ: where q shares storage with k (or v), dq adds to what dK/dV wrote
template <int kHeadDim>
static void flash_attention_backward_hd(AttnGradDest dq, AttnGradDest dk, AttnGradDest dv, const floatX* dout,
                                        const float* lse, const float* delta, AttnRows q, AttnRows k, AttnRows v,
                                        int B, int T, int H, int Hkv, float scale) {
    flash_attention_backward_dkdv<kHeadDim>(dk, dv, dout, lse, delta, q, k, v, B, T, H, Hkv, scale);
    profile_mark(PROF_ATTN_BWD_DKDV);
    flash_attention_backward_dq<kHeadDim>(dq, dout, lse, delta, q, k, v, B, T, H, Hkv, scale);
    profile_mark(PROF_ATTN_BWD_DQ);
}

// ----------------------------------------------------------------------------
// flash attention version 3: the backward in one pass (dev/cuda/attention_backward.cu v3)
//
// Version 2 forms dK/dV in one kernel and dQ in a second, which recomputes P and dP: 7 T^2 hd
// products where 5 suffice (S, dP, dV, dK, dQ). Version 3 is one kernel: a CTA owns 128 keys of one
// kv head (8 warps x 16 keys, K and V resident in shared memory) and walks the query tiles of the g
// query heads of its group from the diagonal on. Per step (one query tile of one head) it recomputes
// P^T and dP^T once, adds P^T dO to dV and dS^T Q to dK in registers, writes dS to shared memory,
// and forms the tile's dQ contribution dS K, which is added into an fp32 accumulator in a FIXED
// order: the runs stay bit-identical (resume depends on it), where FlashAttention-2 adds it with
// atomics.
//
// The order, and why it cannot deadlock. Query tile m of head h receives contributions from the
// key CTAs n = n_diag(m) (the CTA holding the tile's diagonal keys), n_diag - 1, ..., 0, in that
// order: the natural one, since CTA n reaches tile m at its step m - first(n), later the smaller n is.
// A per-(b, h, m) counter says how many have been added; CTA n waits for n_diag - n, adds (the first
// stores, the last, CTA 0, writes the final bf16 dQ times the scale), then publishes n_diag - n + 1.
// CTAs take their work from a ticket (an atomic counter), not from blockIdx, handing out the key
// tiles of a (b, kv head) in descending order: every CTA a CTA waits for took an earlier ticket, so
// it is already running, and runs to completion. Memory: the accumulator is fp32 (B, T, H * hd), the
// MLP gradient buffer dbuf_m while attention's backward runs (no extra memory), plus 2 words per
// (b, h, query tile) of counters; time: the accumulator's read and write per step, 2 x 16 KiB at
// head size 64, from L2 (predicted, dev/cuda/attention_backward.cu's header).
// The softmax term D = rowsum(dO * O) is folded in: the diagonal CTA of tile m, the first to reach
// it, computes D for its rows (it holds dO's tile already) and publishes it with a flag; the others
// reach the tile at least one step later and wait on the flag (which is set by then).
// q sharing k's or v's storage (AttnGradDest.accumulate of dq): dK/dV and the final dQ would add
// into the same rows from different CTAs, so then every contribution goes to the accumulator and
// flash3_dq_store adds it to the destination after the kernel, as version 2's second kernel does.
// Operands by ldmatrix (.trans where the mma needs column pairs), Q and dO tiles double-buffered by
// cp.async; shared rows padded as the forward's (no bank conflicts).

#define FLASH3_BWD_BLOCK_N 128 // keys per CTA
#define FLASH3_BWD_WARPS 8     // 8 warps x 16 keys
#define FLASH3_BWD_THREADS (FLASH3_BWD_WARPS * 32)
static_assert(FLASH3_BWD_BLOCK_N == FLASH3_BWD_WARPS * 16, "each warp owns 16 keys");

// one CTA per (key tile, b, kv head), FLASH3_BWD_THREADS threads; see above. dq, dk, dv: where the
// gradients go (views and accumulate flags, as version 2); dq_accum fp32 (B, T, H * hd) scratch; sync:
// flash3_bwd_sync_words zeroed words; delta (B, H, T) is written (D); dout, out (B, T, H * hd); lse
// (B, H, T); q (H heads), k, v (Hkv heads) views.
template <int kHeadDim>
__global__ void __launch_bounds__(FLASH3_BWD_THREADS)
flash3_attention_backward_kernel(AttnGradDest dq, AttnGradDest dk, AttnGradDest dv, float* dq_accum, unsigned int* sync,
                                 float* delta, const floatX* dout, const floatX* out, const float* lse, AttnRows q,
                                 AttnRows k, AttnRows v, int B, int T, int H, int Hkv, float scale, float scale_log2) {
    constexpr int kBlockM = FLASH3_BWD_BLOCK_M(kHeadDim), kBlockN = FLASH3_BWD_BLOCK_N;
    constexpr int kStride = kHeadDim + FLASH_SMEM_PAD;
    constexpr uint32_t kRowBytes = kStride * sizeof(floatX);
    constexpr int kTilesM = kBlockM / 8, kStepsM = kBlockM / 16, kTilesD = kHeadDim / 8, kStepsD = kHeadDim / 16;
    constexpr uint32_t kSRowBytes = (kBlockM + FLASH_SMEM_PAD) * sizeof(floatX); // a row of dS^T: one key's queries
    constexpr int kRowGroups = kBlockM / 16, kDqTiles = kBlockM * kHeadDim / (16 * 8 * FLASH3_BWD_WARPS);
    static_assert(kDqTiles >= 2 && kDqTiles % 2 == 0, "each warp forms pairs of m16n8 tiles of the step's dQ");
    extern __shared__ __align__(16) unsigned char flash_smem[];
    // K, V (128 keys), two stages of Q and dO (kBlockM rows), dS^T (128 keys x kBlockM), lse and D (kBlockM)
    const uint32_t sK = smem_u32(flash_smem), sV = sK + kBlockN * kRowBytes;
    const uint32_t sStages = sV + kBlockN * kRowBytes; // stage s: Q at + 2s tiles, dO one tile after
    constexpr uint32_t kTileBytes = kBlockM * kRowBytes;
    const uint32_t sdS = sStages + 4 * kTileBytes;
    unsigned char* sdS_ptr = flash_smem + (sdS - sK);
    float* s_lse = reinterpret_cast<float*>(sdS_ptr + kBlockN * kSRowBytes); // base 2
    float* s_delta = s_lse + kBlockM;
    __shared__ unsigned int s_item;

    const int NB = (T + kBlockN - 1) / kBlockN, MB = (T + kBlockM - 1) / kBlockM;
    if (threadIdx.x == 0) { s_item = atomicAdd(&sync[0], 1u); } // the work in ticket order
    __syncthreads();
    const int item = (int)s_item;
    const int n_block = NB - 1 - item % NB; // descending within a (b, kv head): see above
    const int b = (item / NB) / Hkv, kvh = (item / NB) % Hkv, g = H / Hkv;
    unsigned int* dq_order = sync + 1;                         // (B, H, MB)
    unsigned int* d_ready = dq_order + (size_t)B * H * MB;     // (B, H, MB)
    const bool kv_same = k.ptr == v.ptr;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, group = lane / 4, quad = lane % 4;
    const int lm_row = lane % 8, lm_mat = lane / 8;
    const uint32_t lane_nk = (lm_row + 8 * (lm_mat >> 1)) * kRowBytes + 8 * (lm_mat & 1) * sizeof(floatX);
    const uint32_t lane_kn = (lm_row + 8 * (lm_mat & 1)) * kRowBytes + 8 * (lm_mat >> 1) * sizeof(floatX);
    const int C = H * kHeadDim;
    const int key_w0 = n_block * kBlockN + warp * 16; // this warp's first key
    const int key0 = key_w0 + group;                   // key of c[0..1]; c[2..3] is key0 + 8
    const int m_first = n_block * kBlockN / kBlockM;   // the first query tile that meets these keys
    const int steps = g * (MB - m_first);              // (head j, query tile m), j outer

    flash_cp_async_tile<kBlockN, kHeadDim, FLASH3_BWD_THREADS>(sK, k.ptr + (size_t)b * T * k.stride + (size_t)kvh * kHeadDim,
                                                               k.stride, n_block * kBlockN, T);
    if (!kv_same) {
        flash_cp_async_tile<kBlockN, kHeadDim, FLASH3_BWD_THREADS>(sV, v.ptr + (size_t)b * T * v.stride + (size_t)kvh * kHeadDim,
                                                                   v.stride, n_block * kBlockN, T);
    }
    const uint32_t sVk = kv_same ? sK : sV;
    auto load_step = [&](int step, int stage) { // Q and dO of the step's query tile into a stage
        const int h = kvh * g + step / (MB - m_first), m = m_first + step % (MB - m_first);
        const uint32_t sQ = sStages + 2 * stage * kTileBytes;
        flash_cp_async_tile<kBlockM, kHeadDim, FLASH3_BWD_THREADS>(sQ, q.ptr + (size_t)b * T * q.stride + (size_t)h * kHeadDim,
                                                                   q.stride, m * kBlockM, T);
        flash_cp_async_tile<kBlockM, kHeadDim, FLASH3_BWD_THREADS>(sQ + kTileBytes, dout + (size_t)b * T * C + (size_t)h * kHeadDim,
                                                                   C, m * kBlockM, T);
        cp_async_commit();
    };
    load_step(0, 0); // one group: K, V and the first step's tiles

    float acc_dk[kTilesD][4], acc_dv[kTilesD][4]; // (16 keys, kHeadDim) per warp each
    #pragma unroll
    for (int dj = 0; dj < kTilesD; dj++) {
        #pragma unroll
        for (int e = 0; e < 4; e++) { acc_dk[dj][e] = 0.0f; acc_dv[dj][e] = 0.0f; }
    }

    for (int step = 0; step < steps; step++) {
        const int stage = step & 1;
        const int j = step / (MB - m_first), m = m_first + step % (MB - m_first), h = kvh * g + j;
        const int q0 = m * kBlockM; // the tile's first query
        const size_t tile_id = ((size_t)b * H + h) * MB + m;
        const int n_diag = q0 / kBlockN; // the tile's first (diagonal) key CTA
        const uint32_t sQ = sStages + 2 * stage * kTileBytes, sdO = sQ + kTileBytes;
        cp_async_wait<0>(); // this step's tiles (the only group in flight)
        __syncthreads();    // ... every thread's, and every warp is done with the previous step
        if (step + 1 < steps) { load_step(step + 1, stage ^ 1); } // streams in while this step computes

        // lse and D of the tile's rows; the diagonal CTA computes D = rowsum(dO * O) and publishes it
        if (n_block == n_diag) {
            constexpr int kLanesPerRow = FLASH3_BWD_THREADS / kBlockM, kDims = kHeadDim / kLanesPerRow;
            const int r = threadIdx.x / kLanesPerRow, d0 = (threadIdx.x % kLanesPerRow) * kDims, t = q0 + r;
            float sum = 0.0f;
            if (t < T) {
                const floatX* o = out + ((size_t)b * T + t) * C + (size_t)h * kHeadDim + d0;
                const floatX* sdo_row = reinterpret_cast<const floatX*>(flash_smem + (sdO - sK) + r * kRowBytes) + d0;
                #pragma unroll
                for (int d = 0; d < kDims; d += x128::size) {
                    const x128 ov = load128(o + d);
                    const x128 gv = *reinterpret_cast<const x128*>(sdo_row + d);
                    #pragma unroll
                    for (int e = 0; e < x128::size; e++) { sum += x2f(ov[e]) * x2f(gv[e]); }
                }
            }
            #pragma unroll
            for (int off = 1; off < kLanesPerRow; off *= 2) { sum += __shfl_xor_sync(0xFFFFFFFFu, sum, off); }
            if (threadIdx.x % kLanesPerRow == 0) {
                s_delta[r] = sum;
                if (t < T) { delta[((size_t)b * H + h) * T + t] = sum; }
            }
            __threadfence(); // D in memory before the flag below
        } else {
            if (threadIdx.x == 0) {
                while (atomicAdd(&d_ready[tile_id], 0u) == 0u) {} // set a step or more ago, normally
                __threadfence();
            }
            __syncthreads();
            for (int i = threadIdx.x; i < kBlockM; i += FLASH3_BWD_THREADS) {
                s_delta[i] = q0 + i < T ? __ldcg(&delta[((size_t)b * H + h) * T + q0 + i]) : 0.0f;
            }
        }
        for (int i = threadIdx.x; i < kBlockM; i += FLASH3_BWD_THREADS) {
            s_lse[i] = q0 + i < T ? lse[((size_t)b * H + h) * T + q0 + i] * FLASH_LOG2E : 0.0f;
        }
        __syncthreads(); // lse and D complete
        if (n_block == n_diag && threadIdx.x == 0) { atomicExch(&d_ready[tile_id], 1u); }

        // this warp's 16 keys against the tile's queries; nothing when every key is after every query
        float dst[kTilesM][4]; // (16 keys, kBlockM queries): dP^T, then dS^T
        const bool active = key_w0 <= q0 + kBlockM - 1 && key_w0 < T;
        if (active) {
            // S^T = K_w Q^T, then P^T = 2^(scale S^T - lse), 0 where query < key or query >= T
            float pt[kTilesM][4];
            #pragma unroll
            for (int i = 0; i < kTilesM; i++) { pt[i][0] = pt[i][1] = pt[i][2] = pt[i][3] = 0.0f; dst[i][0] = dst[i][1] = dst[i][2] = dst[i][3] = 0.0f; }
            #pragma unroll
            for (int kk = 0; kk < kStepsD; kk++) {
                uint32_t ka[4];
                ldmatrix_x4(ka, sK + warp * 16 * kRowBytes + lane_kn + kk * 32);
                #pragma unroll
                for (int i = 0; i < kTilesM; i += 2) {
                    uint32_t qb[4];
                    ldmatrix_x4(qb, sQ + i * 8 * kRowBytes + lane_nk + kk * 32);
                    mma_16816(pt[i], ka, qb);
                    mma_16816(pt[i + 1], ka, qb + 2);
                }
            }
            // dP^T = V_w dO^T
            #pragma unroll
            for (int kk = 0; kk < kStepsD; kk++) {
                uint32_t va[4];
                ldmatrix_x4(va, sVk + warp * 16 * kRowBytes + lane_kn + kk * 32);
                #pragma unroll
                for (int i = 0; i < kTilesM; i += 2) {
                    uint32_t ob[4];
                    ldmatrix_x4(ob, sdO + i * 8 * kRowBytes + lane_nk + kk * 32);
                    mma_16816(dst[i], va, ob);
                    mma_16816(dst[i + 1], va, ob + 2);
                }
            }
            const bool masked = key_w0 + 15 > q0 || q0 + kBlockM > T;
            #pragma unroll
            for (int i = 0; i < kTilesM; i++) {
                #pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int col = i * 8 + 2 * quad + (e & 1), query = q0 + col, key = key0 + (e >= 2 ? 8 : 0);
                    const float p = (masked && (query < key || query >= T)) ? 0.0f : exp2f(pt[i][e] * scale_log2 - s_lse[col]);
                    pt[i][e] = p;
                    dst[i][e] = p * (dst[i][e] - s_delta[col]); // dS^T = P^T * (dP^T - D)
                }
            }
            // dV += P^T dO, dK += dS^T Q (the scale is applied once, at the end): B by ldmatrix.trans
            #pragma unroll
            for (int kk = 0; kk < kStepsM; kk++) {
                uint32_t pa[4], sa[4];
                frag_a_from_acc<kTilesM>(pa, pt, kk);
                frag_a_from_acc<kTilesM>(sa, dst, kk);
                #pragma unroll
                for (int dj = 0; dj < kTilesD; dj += 2) {
                    uint32_t ob[4], qb[4];
                    ldmatrix_x4_trans(ob, sdO + kk * 16 * kRowBytes + lane_kn + dj * 16);
                    mma_16816(acc_dv[dj], pa, ob);
                    mma_16816(acc_dv[dj + 1], pa, ob + 2);
                    ldmatrix_x4_trans(qb, sQ + kk * 16 * kRowBytes + lane_kn + dj * 16);
                    mma_16816(acc_dk[dj], sa, qb);
                    mma_16816(acc_dk[dj + 1], sa, qb + 2);
                }
            }
        } else {
            #pragma unroll
            for (int i = 0; i < kTilesM; i++) { dst[i][0] = dst[i][1] = dst[i][2] = dst[i][3] = 0.0f; }
        }
        // dS^T (bf16) to shared memory, this warp's 16 key rows: the A operand of the tile's dQ
        {
            unsigned char* row = sdS_ptr + (warp * 16 + group) * kSRowBytes + 2 * quad * sizeof(floatX);
            #pragma unroll
            for (int i = 0; i < kTilesM; i++) {
                *reinterpret_cast<uint32_t*>(row + i * 8 * sizeof(floatX)) = pack_bf16x2(dst[i][0], dst[i][1]);
                *reinterpret_cast<uint32_t*>(row + 8 * kSRowBytes + i * 8 * sizeof(floatX)) = pack_bf16x2(dst[i][2], dst[i][3]);
            }
        }
        __syncthreads(); // dS complete

        // the tile's dQ contribution (kBlockM, hd) = dS K: warp w forms rows 16 (w % kRowGroups).., kDqTiles
        // 8-wide column tiles from 8 kDqTiles (w / kRowGroups); A = dS from dS^T by ldmatrix.trans, B = K by .trans
        const int rg = warp % kRowGroups, d_base = (warp / kRowGroups) * kDqTiles * 8;
        float acc_dq[kDqTiles][4];
        #pragma unroll
        for (int i = 0; i < kDqTiles; i++) { acc_dq[i][0] = acc_dq[i][1] = acc_dq[i][2] = acc_dq[i][3] = 0.0f; }
        #pragma unroll
        for (int kk = 0; kk < kBlockN / 16; kk++) {
            uint32_t sa[4];
            ldmatrix_x4_trans(sa, sdS + (kk * 16 + lm_row + 8 * (lm_mat >> 1)) * kSRowBytes + (rg * 16 + 8 * (lm_mat & 1)) * sizeof(floatX));
            #pragma unroll
            for (int i = 0; i < kDqTiles; i += 2) {
                uint32_t kb[4];
                ldmatrix_x4_trans(kb, sK + kk * 16 * kRowBytes + lane_kn + (d_base + i * 8) * sizeof(floatX));
                mma_16816(acc_dq[i], sa, kb);
                mma_16816(acc_dq[i + 1], sa, kb + 2);
            }
        }
        // added in the fixed order n_diag, n_diag - 1, ..., 0
        const unsigned int turn = (unsigned int)(n_diag - n_block);
        if (threadIdx.x == 0 && turn > 0) {
            while (atomicAdd(&dq_order[tile_id], 0u) != turn) {}
            __threadfence();
        }
        __syncthreads();
        const bool last = n_block == 0 && !dq.accumulate; // the final dQ goes straight to its destination
        #pragma unroll
        for (int r = 0; r < 2; r++) {
            const int t = q0 + rg * 16 + group + 8 * r;
            if (t >= T) { continue; }
            float* acc_row = dq_accum + ((size_t)b * T + t) * C + (size_t)h * kHeadDim + d_base + 2 * quad;
            floatX* dq_row = dq.rows.ptr + ((size_t)b * T + t) * dq.rows.stride + (size_t)h * kHeadDim + d_base + 2 * quad;
            #pragma unroll
            for (int i = 0; i < kDqTiles; i++) {
                float2 v2 = make_float2(acc_dq[i][2 * r], acc_dq[i][2 * r + 1]);
                if (turn > 0) {
                    const float2 prev = __ldcg(reinterpret_cast<const float2*>(acc_row + i * 8));
                    v2.x += prev.x;
                    v2.y += prev.y;
                }
                if (last) {
                    flash_store_pair(dq_row + i * 8, v2.x * scale, v2.y * scale, 0);
                } else {
                    __stcg(reinterpret_cast<float2*>(acc_row + i * 8), v2);
                }
            }
        }
        __threadfence(); // this contribution in memory before the counter moves on
        __syncthreads();
        if (threadIdx.x == 0) { atomicExch(&dq_order[tile_id], turn + 1); }
    }

    // epilogue, as version 2
    flash_store_dkdv<kHeadDim>(dk, dv, acc_dk, acc_dv, b, kvh, T, key0, quad, scale, kv_same);
}

// where dq accumulates (q shares k's or v's storage): dq (B, T, H heads) += scale * dq_accum, after
// the kernel above has written dK and dV.
__global__ void flash3_dq_store_kernel(AttnGradDest dq, const float* dq_accum, int B, int T, int H, int hd, float scale) {
    const size_t C = (size_t)H * hd, pairs = (size_t)B * T * C / 2;
    // grid-stride: grid_for caps the grid, and B T C / 2 pairs may outnumber its threads
    for (size_t pair = (size_t)blockIdx.x * blockDim.x + threadIdx.x; pair < pairs; pair += (size_t)gridDim.x * blockDim.x) {
        const size_t row = pair * 2 / C, col = pair * 2 % C;
        const float2 a = *reinterpret_cast<const float2*>(dq_accum + row * C + col);
        flash_store_pair(dq.rows.ptr + row * dq.rows.stride + col, a.x * scale, a.y * scale, dq.accumulate);
    }
}

static void flash3_dq_store(AttnGradDest dq, const float* dq_accum, int B, int T, int H, int hd, float scale) {
    const size_t pairs = (size_t)B * T * H * hd / 2;
    flash3_dq_store_kernel<<<grid_for(pairs, 256), 256>>>(dq, dq_accum, B, T, H, hd, scale);
    launchCheck();
}

// dynamic shared memory of the version 3 backward: K, V (128 rows), two stages of Q and dO (kBlockM
// rows), dS^T (128 x kBlockM), lse and D
static size_t flash3_backward_smem_bytes(int hd) {
    const size_t block_m = (size_t)FLASH3_BWD_BLOCK_M(hd), row = (size_t)(hd + FLASH_SMEM_PAD) * sizeof(floatX);
    return (2 * FLASH3_BWD_BLOCK_N + 4 * block_m) * row + FLASH3_BWD_BLOCK_N * (block_m + FLASH_SMEM_PAD) * sizeof(floatX) +
           2 * block_m * sizeof(float);
}

template <int kHeadDim>
static void flash3_attention_backward_hd(AttnGradDest dq, AttnGradDest dk, AttnGradDest dv, float* dq_accum,
                                         unsigned int* sync, float* delta, const floatX* dout, const floatX* out,
                                         const float* lse, AttnRows q, AttnRows k, AttnRows v, int B, int T, int H,
                                         int Hkv, float scale) {
    const size_t smem = flash3_backward_smem_bytes(kHeadDim);
    static bool smem_opted_in = false;
    flash_smem_opt_in(flash3_attention_backward_kernel<kHeadDim>, smem, &smem_opted_in);
    // the tickets and counters start at zero every launch
    cudaCheck(cudaMemsetAsync(sync, 0, flash3_bwd_sync_words(B, H, T, FLASH3_BWD_BLOCK_M(kHeadDim)) * sizeof(unsigned int)));
    const int ctas = (T + FLASH3_BWD_BLOCK_N - 1) / FLASH3_BWD_BLOCK_N * B * Hkv;
    flash3_attention_backward_kernel<kHeadDim><<<ctas, FLASH3_BWD_THREADS, smem>>>(
        dq, dk, dv, dq_accum, sync, delta, dout, out, lse, q, k, v, B, T, H, Hkv, scale, scale * FLASH_LOG2E);
    launchCheck();
    if (dq.accumulate) { flash3_dq_store(dq, dq_accum, B, T, H, kHeadDim, scale); }
}

// ----------------------------------------------------------------------------
// forward version 5: FlashAttention-2's tile shapes (dev/cuda/attention_forward.cu v5; issue 58)
//
// What changes from version 3, and why (the lab header has the numbers):
//   - each warp owns 32 query rows, two m16 tiles, so every K and V fragment that ldmatrix brings
//     from shared memory feeds two mma instead of one: half the shared-memory traffic per score.
//     4 warps x 32 rows = the same 128-row CTA, in 128 threads.
//   - keys in tiles of 128 at head size 64: one barrier pair and one online-softmax round per 128
//     keys instead of per 64. At head size 128 O alone takes 128 registers a thread: tiles of 64
//     keys (barriers as version 3), each computed in two parts of 32 (an S and a softmax round each,
//     twice version 3's rounds per score; S of 64 keys spilled).
//   - Q's fragments are read from shared memory at each 16-wide step (8 ldmatrix per warp per key
//     tile) rather than held: with S (128 registers at hd 64) and O (64) in registers, Q's 32 more
//     would spill.
//   - the softmax keeps the running max in raw score units, so that each probability is one FFMA
//     (score * scale_log2 - max * scale_log2) feeding exp2, where version 3 scales, then subtracts;
//     P is packed to bf16 right after its exp2, so S's registers are free for the P V loop.
//   - only the parts that cross a warp's diagonal (or T) are masked; keys past a warp's last row are
//     skipped, tiles past the CTA's last row never loaded.
//   - O goes out through shared memory (the warp's own Q rows, free after the last S): 16-byte rows,
//     full 128-byte lines at hd 64, where version 3 stores 4-byte pairs.
//   - GQA: the g query heads of a kv head are consecutive CTAs (grid (B * H, query tiles)), which
//     read the kv head's tiles from L2 together; one CTA holding several heads would need their O and
//     S in registers too, which this budget does not have.
// Rows of shared memory keep hd + 8 bf16, conflict-free for ldmatrix and cp.async as in version 3.

#define FLASH5_BLOCK_M 128                                 // query rows per CTA
#define FLASH5_BLOCK_N(head_dim) ((head_dim) == 64 ? 128 : 64) // keys per tile (per barrier pair)
#define FLASH5_SUB_N(head_dim) ((head_dim) == 64 ? 128 : 32)   // keys per S and softmax round
#define FLASH5_WARPS 4                                     // 4 warps x 32 rows
#define FLASH5_THREADS (FLASH5_WARPS * 32)
static_assert(FLASH5_BLOCK_M == FLASH5_WARPS * 32, "each warp owns 32 query rows");

// dynamic shared memory of the version 5 forward: Q (128 rows) and two stages of K and V
static size_t flash5_forward_smem_bytes(int hd) {
    return (size_t)(FLASH5_BLOCK_M + 4 * FLASH5_BLOCK_N(hd)) * (hd + FLASH_SMEM_PAD) * sizeof(floatX);
}

// Forward, version 5. Grid (B * H, ceil(T / 128)), FLASH5_THREADS threads, dynamic smem
// flash5_forward_smem_bytes. Arguments and outputs as flash_attention_forward_kernel.
template <int kHeadDim>
__global__ void __launch_bounds__(FLASH5_THREADS, 2)
flash5_attention_forward_kernel(floatX* out, float* lse, AttnRows q, AttnRows k, AttnRows v, int T, int H, int Hkv,
                                float scale_log2) {
    constexpr int kBlockN = FLASH5_BLOCK_N(kHeadDim), kSubN = FLASH5_SUB_N(kHeadDim);
    constexpr int kStride = kHeadDim + FLASH_SMEM_PAD;
    constexpr int kTilesN = kSubN / 8, kTilesD = kHeadDim / 8, kStepsD = kHeadDim / 16, kStepsN = kSubN / 16;
    constexpr uint32_t kRowBytes = kStride * sizeof(floatX), kTileBytes = kBlockN * kRowBytes;
    extern __shared__ __align__(16) unsigned char flash_smem[];
    // Q (128 rows), then stage s's K at sKV + 2s tiles, V one tile after
    const uint32_t sQ = smem_u32(flash_smem);
    const uint32_t sKV = sQ + FLASH5_BLOCK_M * kRowBytes;
    const bool kv_same = k.ptr == v.ptr;
    const int m_block = gridDim.y - 1 - blockIdx.y; // the longest rows (most key tiles) start first
    const int b = blockIdx.x / H, h = blockIdx.x % H, kvh = h / (H / Hkv);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, group = lane / 4, quad = lane % 4;
    const floatX* gQ = q.ptr + (size_t)b * T * q.stride + (size_t)h * kHeadDim;
    const floatX* gK = k.ptr + (size_t)b * T * k.stride + (size_t)kvh * kHeadDim;
    const floatX* gV = v.ptr + (size_t)b * T * v.stride + (size_t)kvh * kHeadDim;
    const int warp_row0 = m_block * FLASH5_BLOCK_M + warp * 32; // rows warp_row0 + 16 i + group (+ 8)
    const int n_last = (min(m_block * FLASH5_BLOCK_M + FLASH5_BLOCK_M, T) - 1) / kBlockN;
    // ldmatrix lane offsets, as version 3
    const int lm_row = lane % 8, lm_mat = lane / 8;
    const uint32_t lane_nk = (lm_row + 8 * (lm_mat >> 1)) * kRowBytes + 8 * (lm_mat & 1) * sizeof(floatX);
    const uint32_t lane_kn = (lm_row + 8 * (lm_mat & 1)) * kRowBytes + 8 * (lm_mat >> 1) * sizeof(floatX);
    const uint32_t sQw = sQ + warp * 32 * kRowBytes + lane_kn; // this lane's row of the warp's Q

    auto load_kv = [&](int n_block, int stage) {
        const uint32_t sK = sKV + 2 * stage * kTileBytes;
        flash_cp_async_tile<kBlockN, kHeadDim, FLASH5_THREADS>(sK, gK, k.stride, n_block * kBlockN, T);
        if (!kv_same) { flash_cp_async_tile<kBlockN, kHeadDim, FLASH5_THREADS>(sK + kTileBytes, gV, v.stride, n_block * kBlockN, T); }
        cp_async_commit();
    };
    flash_cp_async_tile<FLASH5_BLOCK_M, kHeadDim, FLASH5_THREADS>(sQ, gQ, q.stride, m_block * FLASH5_BLOCK_M, T);
    cp_async_commit();
    load_kv(0, 0);

    float acc_o[2][kTilesD][4]; // (32, kHeadDim) per warp: O before the division by row_sum
    #pragma unroll
    for (int i = 0; i < 2; i++) {
        #pragma unroll
        for (int dj = 0; dj < kTilesD; dj++) { acc_o[i][dj][0] = acc_o[i][dj][1] = acc_o[i][dj][2] = acc_o[i][dj][3] = 0.0f; }
    }
    // per thread: rows warp_row0 + 16 i + group + 8 r at [i][r]; row_max in raw score units
    float row_max[2][2] = {{-INFINITY, -INFINITY}, {-INFINITY, -INFINITY}}, row_sum[2][2] = {{0.0f, 0.0f}, {0.0f, 0.0f}};

    for (int n_block = 0; n_block <= n_last; n_block++) {
        const int stage = n_block & 1;
        if (n_block < n_last) { // the next tile streams in while this one is computed
            load_kv(n_block + 1, stage ^ 1);
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads(); // tile n_block (and, the first time, Q) has landed: every thread's copies
        const uint32_t sKt = sKV + 2 * stage * kTileBytes;
        const uint32_t sVt = kv_same ? sKt : sKt + kTileBytes;
        // the tile in parts of kSubN keys (one at hd 64; two at 128, where O takes 128 registers and
        // S of 64 keys would spill), each an S and an online-softmax round; a part whose keys all come
        // after the warp's rows is skipped, and so are the parts after it
        #pragma unroll 1
        for (int part = 0; part < kBlockN / kSubN; part++) {
            const int key0 = n_block * kBlockN + part * kSubN;
            if (key0 > warp_row0 + 31) { break; }
            const uint32_t sK = sKt + part * kSubN * kRowBytes, sV = sVt + part * kSubN * kRowBytes;
            // S = Q K^T for both m16 tiles: each K fragment feeds two mma
            float s[2][kTilesN][4];
            #pragma unroll
            for (int i = 0; i < 2; i++) {
                #pragma unroll
                for (int j = 0; j < kTilesN; j++) { s[i][j][0] = s[i][j][1] = s[i][j][2] = s[i][j][3] = 0.0f; }
            }
            #pragma unroll
            for (int kk = 0; kk < kStepsD; kk++) {
                uint32_t qa[2][4];
                ldmatrix_x4(qa[0], sQw + kk * 32);
                ldmatrix_x4(qa[1], sQw + 16 * kRowBytes + kk * 32);
                #pragma unroll
                for (int j = 0; j < kTilesN; j += 2) {
                    uint32_t kb[4];
                    ldmatrix_x4(kb, sK + j * 8 * kRowBytes + lane_nk + kk * 32);
                    mma_16816(s[0][j], qa[0], kb);
                    mma_16816(s[0][j + 1], qa[0], kb + 2);
                    mma_16816(s[1][j], qa[1], kb);
                    mma_16816(s[1][j + 1], qa[1], kb + 2);
                }
            }
            // -inf where key > query or key >= T, in the parts that reach past the warp's first row or T
            if (key0 + kSubN - 1 > warp_row0 || key0 + kSubN > T) {
                #pragma unroll
                for (int i = 0; i < 2; i++) {
                    #pragma unroll
                    for (int j = 0; j < kTilesN; j++) {
                        #pragma unroll
                        for (int e = 0; e < 4; e++) {
                            const int key = key0 + j * 8 + 2 * quad + (e & 1);
                            const int query = warp_row0 + 16 * i + group + (e >= 2 ? 8 : 0);
                            if (key > query || key >= T) { s[i][j][e] = -INFINITY; }
                        }
                    }
                }
            }
            // online softmax; P packed to bf16 A fragments as it is made
            uint32_t p[2][kStepsN][4];
            #pragma unroll
            for (int i = 0; i < 2; i++) {
                #pragma unroll
                for (int r = 0; r < 2; r++) {
                    float m_new = row_max[i][r];
                    #pragma unroll
                    for (int j = 0; j < kTilesN; j++) { m_new = fmaxf(m_new, fmaxf(s[i][j][2 * r], s[i][j][2 * r + 1])); }
                    m_new = fmaxf(m_new, __shfl_xor_sync(0xFFFFFFFFu, m_new, 1));
                    m_new = fmaxf(m_new, __shfl_xor_sync(0xFFFFFFFFu, m_new, 2));
                    // the max in base-2 units; a row with no allowed key yet stays all zero
                    const float m_scaled = m_new == -INFINITY ? 0.0f : m_new * scale_log2;
                    const float corr = exp2f(row_max[i][r] * scale_log2 - m_scaled); // 0 from -inf
                    row_max[i][r] = m_new;
                    float sum = 0.0f;
                    #pragma unroll
                    for (int j = 0; j < kTilesN; j++) {
                        s[i][j][2 * r] = exp2f(fmaf(s[i][j][2 * r], scale_log2, -m_scaled));
                        s[i][j][2 * r + 1] = exp2f(fmaf(s[i][j][2 * r + 1], scale_log2, -m_scaled));
                        sum += s[i][j][2 * r] + s[i][j][2 * r + 1];
                    }
                    row_sum[i][r] = row_sum[i][r] * corr + sum; // this lane's columns; the quad is summed at the end
                    #pragma unroll
                    for (int dj = 0; dj < kTilesD; dj++) { acc_o[i][dj][2 * r] *= corr; acc_o[i][dj][2 * r + 1] *= corr; }
                }
                #pragma unroll
                for (int kk = 0; kk < kStepsN; kk++) { frag_a_from_acc<kTilesN>(p[i][kk], s[i], kk); }
            }
            // acc_o += P V: each V fragment (ldmatrix.trans) feeds two mma
            #pragma unroll
            for (int kk = 0; kk < kStepsN; kk++) {
                #pragma unroll
                for (int dj = 0; dj < kTilesD; dj += 2) {
                    uint32_t vb[4];
                    ldmatrix_x4_trans(vb, sV + kk * 16 * kRowBytes + lane_kn + dj * 16);
                    mma_16816(acc_o[0][dj], p[0][kk], vb);
                    mma_16816(acc_o[0][dj + 1], p[0][kk], vb + 2);
                    mma_16816(acc_o[1][dj], p[1][kk], vb);
                    mma_16816(acc_o[1][dj + 1], p[1][kk], vb + 2);
                }
            }
        }
        __syncthreads(); // every warp is done with this stage before the next iteration's copies refill it
    }

    // epilogue: O = acc_o / row_sum into the warp's own Q rows of shared memory (bf16 pairs: conflict-free,
    // rows 4 banks apart), then out in 16-byte chunks, a row's head contiguous; lse by the quad's lane 0
    floatX* sO = reinterpret_cast<floatX*>(flash_smem) + warp * 32 * kStride;
    #pragma unroll
    for (int i = 0; i < 2; i++) {
        #pragma unroll
        for (int r = 0; r < 2; r++) {
            float sum = row_sum[i][r];
            sum += __shfl_xor_sync(0xFFFFFFFFu, sum, 1);
            sum += __shfl_xor_sync(0xFFFFFFFFu, sum, 2);
            const float inv = 1.0f / sum;
            const int row = 16 * i + group + 8 * r, t = warp_row0 + row;
            #pragma unroll
            for (int dj = 0; dj < kTilesD; dj++) {
                *reinterpret_cast<__nv_bfloat162*>(sO + row * kStride + dj * 8 + 2 * quad) =
                    __floats2bfloat162_rn(acc_o[i][dj][2 * r] * inv, acc_o[i][dj][2 * r + 1] * inv);
            }
            if (quad == 0 && t < T) { lse[((size_t)b * H + h) * T + t] = (row_max[i][r] * scale_log2 + log2f(sum)) * FLASH_LN2; }
        }
    }
    __syncwarp(); // the warp's rows of O are in shared memory
    constexpr int kChunks = kHeadDim / 8;
    #pragma unroll
    for (int c = lane; c < 32 * kChunks; c += 32) {
        const int row = c / kChunks, col = (c % kChunks) * 8, t = warp_row0 + row;
        if (t < T) {
            *reinterpret_cast<uint4*>(out + ((size_t)b * T + t) * ((size_t)H * kHeadDim) + (size_t)h * kHeadDim + col) =
                *reinterpret_cast<const uint4*>(sO + row * kStride + col);
        }
    }
}

template <int kHeadDim>
static void flash5_attention_forward_hd(floatX* out, float* lse, AttnRows q, AttnRows k, AttnRows v, int B, int T,
                                        int H, int Hkv, float scale) {
    const size_t smem = flash5_forward_smem_bytes(kHeadDim);
    static bool smem_opted_in = false;
    flash_smem_opt_in(flash5_attention_forward_kernel<kHeadDim>, smem, &smem_opted_in);
    dim3 grid(B * H, (T + FLASH5_BLOCK_M - 1) / FLASH5_BLOCK_M);
    flash5_attention_forward_kernel<kHeadDim><<<grid, FLASH5_THREADS, smem>>>(out, lse, q, k, v, T, H, Hkv, scale * FLASH_LOG2E);
    launchCheck();
}


// ----------------------------------------------------------------------------
// backward version 5: FlashAttention-2's tile shapes for version 4's two kernels
// (dev/cuda/attention_backward.cu v5; issue 58)
//
// What changes from version 4, and why (the lab header has the numbers):
//   - dK/dV CTAs of 128 keys (version 4: 64), so each Q and dO tile brought into shared memory
//     serves twice the keys: half the L2 traffic of the streamed tiles.
//   - at head size 64 each warp owns 32 keys, two m16 tiles, so every Q and dO fragment that ldmatrix
//     brings feeds two mma: 24 KiB of shared reads per 1024 scores where version 4 reads 36. dK and
//     dV then take 128 registers a thread, so a step is 32 queries (S^T and dP^T 32 registers each).
//     At head size 128, 32 keys would need 256 registers for dK and dV alone: 8 warps of 16 keys,
//     steps of 32 queries too (64, version 4's, fit the registers, but three stages of them take
//     171.5 KiB of shared memory, past the A100's 163 KiB a block).
//   - three stages of Q, dO, lse and D: the copies for step s + 2 are issued right after step s's
//     barrier, into the stage step s - 1 used, so one barrier per step instead of two.
//   - the grid is (B * Hkv, key tiles): linear dispatch starts every (b, kv head)'s key tile 0, the
//     one with the most query steps, first (version 4's (key tiles, B * Hkv) started the last key
//     tiles of the first rows first and the longest CTAs of the last rows in the final wave).
//   - a warp skips the steps whose queries all precede its keys and masks only the steps that cross
//     its diagonal (or T).
//   - the dQ kernel is forward version 5's shape: 4 warps x 32 query rows, each K and V fragment
//     feeding two mma; keys in tiles of 128 at head size 64 (two parts of 64, each an S, dP and dQ
//     round) and 32 at head size 128 (Q and dO resident take 68 KiB there; 32-key stages keep two
//     CTAs per SM). It recomputes S and dP as version 4: reading dS from the dK/dV kernel instead
//     would move 4 bytes of HBM per score (written, read) to save 4 hd FLOPs, 64 FLOPs a byte at hd
//     64 against the H200's 165 (790 TFLOP/s over 4.8 TB/s): slower, and B H T^2 bytes of memory.
// Deterministic as version 4: every sum in a fixed order, no atomics.

#define FLASH5_BWD_BLOCK_N 128                                  // keys per dK/dV CTA
#define FLASH5_BWD_WARP_KEYS(head_dim) ((head_dim) == 64 ? 32 : 16) // keys per dK/dV warp
#define FLASH5_BWD_THREADS(head_dim) (FLASH5_BWD_BLOCK_N / FLASH5_BWD_WARP_KEYS(head_dim) * 32)
#define FLASH5_BWD_BLOCK_M 32                                   // query rows per dK/dV step
#define FLASH5_BWD_STAGES 3                                     // Q, dO, lse, D buffers (dK/dV kernel)
#define FLASH5_DQ_BLOCK_N(head_dim) ((head_dim) == 64 ? 128 : 32)   // keys per dQ tile (per barrier pair)
#define FLASH5_DQ_SUB_N(head_dim) ((head_dim) == 64 ? 64 : 32)      // keys per S, dP and dQ round

// dynamic shared memory of the version 5 dK/dV kernel: K and V (128 rows), three stages of Q and dO
// (BLOCK_M rows each), and three of lse and D (BLOCK_M floats each)
static size_t flash5_dkdv_smem_bytes(int hd) {
    const size_t block_m = (size_t)FLASH5_BWD_BLOCK_M;
    return (2 * FLASH5_BWD_BLOCK_N + 2 * FLASH5_BWD_STAGES * block_m) * (hd + FLASH_SMEM_PAD) * sizeof(floatX) +
           2 * FLASH5_BWD_STAGES * block_m * sizeof(float);
}
// dynamic shared memory of the version 5 dQ kernel: Q and dO (128 rows each), two stages of K and V,
// the rows' lse and D
static size_t flash5_dq_smem_bytes(int hd) {
    return (size_t)(2 * FLASH5_BLOCK_M + 4 * FLASH5_DQ_BLOCK_N(hd)) * (hd + FLASH_SMEM_PAD) * sizeof(floatX) +
           2 * FLASH5_BLOCK_M * sizeof(float);
}

// c (16 kMTiles, kN) = A B^T for a warp's kMTiles m16 tiles: A's rows at sA, B a (kN, kHeadDim) tile at
// sB, both 32-bit shared addresses with this lane's ldmatrix offset added (lane_kn to sA, lane_nk to
// sB); each B fragment feeds kMTiles x 2 mma
template <int kHeadDim, int kMTiles, int kN>
__device__ __forceinline__ void flash5_scores(float (&c)[kMTiles][kN / 8][4], uint32_t sA, uint32_t sB) {
    constexpr uint32_t kRowBytes = (kHeadDim + FLASH_SMEM_PAD) * sizeof(floatX);
    #pragma unroll
    for (int i = 0; i < kMTiles; i++) {
        #pragma unroll
        for (int j = 0; j < kN / 8; j++) { c[i][j][0] = c[i][j][1] = c[i][j][2] = c[i][j][3] = 0.0f; }
    }
    // two 16-wide steps of the head per iteration, not all of them: unrolled whole, ptxas hoists the
    // next steps' ldmatrix into registers the accumulators need and spills 4-24 bytes (sm_80, sm_90)
    #pragma unroll 2
    for (int kk = 0; kk < kHeadDim / 16; kk++) {
        uint32_t a[kMTiles][4];
        #pragma unroll
        for (int i = 0; i < kMTiles; i++) { ldmatrix_x4(a[i], sA + i * 16 * kRowBytes + kk * 32); }
        #pragma unroll
        for (int j = 0; j < kN / 8; j += 2) {
            uint32_t bf[4];
            ldmatrix_x4(bf, sB + j * 8 * kRowBytes + kk * 32);
            #pragma unroll
            for (int i = 0; i < kMTiles; i++) {
                mma_16816(c[i][j], a[i], bf);
                mma_16816(c[i][j + 1], a[i], bf + 2);
            }
        }
    }
}
// acc (16 kMTiles, kHeadDim) += P B: P (16 kMTiles, kK) from fp32 accumulators, B a (kK, kHeadDim) tile
// at sB (lane_kn added), its column pairs by ldmatrix.trans; each B fragment feeds kMTiles x 2 mma
template <int kHeadDim, int kMTiles, int kK>
__device__ __forceinline__ void flash5_acc(float (&acc)[kMTiles][kHeadDim / 8][4], const float (&p)[kMTiles][kK / 8][4],
                                           uint32_t sB) {
    constexpr uint32_t kRowBytes = (kHeadDim + FLASH_SMEM_PAD) * sizeof(floatX);
    #pragma unroll
    for (int kk = 0; kk < kK / 16; kk++) {
        uint32_t a[kMTiles][4];
        #pragma unroll
        for (int i = 0; i < kMTiles; i++) { frag_a_from_acc<kK / 8>(a[i], p[i], kk); }
        #pragma unroll
        for (int dj = 0; dj < kHeadDim / 8; dj += 2) {
            uint32_t bf[4];
            ldmatrix_x4_trans(bf, sB + kk * 16 * kRowBytes + dj * 16);
            #pragma unroll
            for (int i = 0; i < kMTiles; i++) {
                mma_16816(acc[i][dj], a[i], bf);
                mma_16816(acc[i][dj + 1], a[i], bf + 2);
            }
        }
    }
}

// dK, dV, version 5. Grid (B * Hkv, ceil(T / 128)), FLASH5_BWD_THREADS(hd) threads, dynamic smem
// flash5_dkdv_smem_bytes. A CTA owns 128 keys of one kv head (K and V resident) and walks the g query
// heads of its group and their query tiles (BLOCK_M rows) from the diagonal on, one step per (head,
// query tile), the tiles of step s + 2 streaming in during step s. Each warp owns WARP_KEYS keys and
// works transposed (keys as rows). Arguments and outputs as flash_attention_backward_dkdv_kernel.
template <int kHeadDim>
__global__ void __launch_bounds__(FLASH5_BWD_THREADS(kHeadDim), kHeadDim == 64 ? 2 : 1)
flash5_attention_backward_dkdv_kernel(AttnGradDest dk, AttnGradDest dv, const floatX* dout, const float* lse,
                                      const float* delta, AttnRows q, AttnRows k, AttnRows v, int T, int H, int Hkv,
                                      float scale, float scale_log2) {
    constexpr int kThreads = FLASH5_BWD_THREADS(kHeadDim), kWarpKeys = FLASH5_BWD_WARP_KEYS(kHeadDim);
    constexpr int kKeyTiles = kWarpKeys / 16, kBlockM = FLASH5_BWD_BLOCK_M, kStages = FLASH5_BWD_STAGES;
    constexpr int kTilesM = kBlockM / 8, kTilesD = kHeadDim / 8;
    constexpr uint32_t kRowBytes = (kHeadDim + FLASH_SMEM_PAD) * sizeof(floatX);
    constexpr uint32_t kKeyTileBytes = FLASH5_BWD_BLOCK_N * kRowBytes, kQueryTileBytes = kBlockM * kRowBytes;
    static_assert(kThreads >= kBlockM, "lse and D: one row per thread");
    extern __shared__ __align__(16) unsigned char flash_smem[];
    // K, V; stage s's Q at sQdO + 2s query tiles, its dO one tile after; then the floats: stage s's
    // lse (base 2) at s_stats + 2s * BLOCK_M, its D BLOCK_M floats after
    const uint32_t sK = smem_u32(flash_smem);
    const bool kv_same = k.ptr == v.ptr;
    const uint32_t sV = kv_same ? sK : sK + kKeyTileBytes;
    const uint32_t sQdO = sK + 2 * kKeyTileBytes;
    float* s_stats = reinterpret_cast<float*>(flash_smem + 2 * kKeyTileBytes + 2 * kStages * kQueryTileBytes);
    const int b = blockIdx.x / Hkv, kvh = blockIdx.x % Hkv, g = H / Hkv;
    const int n_block = blockIdx.y; // key tile 0 has the most steps: the grid's first row starts them all
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, group = lane / 4, quad = lane % 4;
    const int C = H * kHeadDim;
    const int warp_key0 = n_block * FLASH5_BWD_BLOCK_N + warp * kWarpKeys; // keys warp_key0 + 16 i + group (+ 8)
    const int m_first = n_block * FLASH5_BWD_BLOCK_N / kBlockM;             // the diagonal query tile
    const int per_head = (T + kBlockM - 1) / kBlockM - m_first;
    const int steps = g * per_head;
    // ldmatrix lane offsets, as version 3's forward
    const int lm_row = lane % 8, lm_mat = lane / 8;
    const uint32_t lane_nk = (lm_row + 8 * (lm_mat >> 1)) * kRowBytes + 8 * (lm_mat & 1) * sizeof(floatX);
    const uint32_t lane_kn = (lm_row + 8 * (lm_mat & 1)) * kRowBytes + 8 * (lm_mat >> 1) * sizeof(floatX);
    const uint32_t sKw = sK + warp * kWarpKeys * kRowBytes + lane_kn, sVw = sV + warp * kWarpKeys * kRowBytes + lane_kn;

    // step -> (query head h = kvh * g + step / per_head, query tile m_first + step % per_head)
    auto load_step = [&](int step, int stage) { // the step's Q and dO tiles, one cp.async group
        const int h = kvh * g + step / per_head, m_block = m_first + step % per_head;
        const uint32_t sQ = sQdO + 2 * stage * kQueryTileBytes;
        flash_cp_async_tile<kBlockM, kHeadDim, kThreads>(
            sQ, q.ptr + (size_t)b * T * q.stride + (size_t)h * kHeadDim, q.stride, m_block * kBlockM, T);
        flash_cp_async_tile<kBlockM, kHeadDim, kThreads>(
            sQ + kQueryTileBytes, dout + (size_t)b * T * C + (size_t)h * kHeadDim, C, m_block * kBlockM, T);
        cp_async_commit();
    };
    // the step's lse (base 2) and D, row threadIdx.x: loaded into registers when the step's tiles are
    // issued and stored to its stage at the end of the step that issued them (the next step's barrier
    // publishes them), so that no thread waits on these loads before computing
    float row_lse = 0.0f, row_delta = 0.0f;
    auto load_stats = [&](int step) {
        const int h = kvh * g + step / per_head, t = (m_first + step % per_head) * kBlockM + threadIdx.x;
        if (threadIdx.x < kBlockM && t < T) {
            row_lse = lse[((size_t)b * H + h) * T + t] * FLASH_LOG2E;
            row_delta = delta[((size_t)b * H + h) * T + t];
        } else {
            row_lse = row_delta = 0.0f;
        }
    };
    auto store_stats = [&](int stage) {
        if (threadIdx.x < kBlockM) {
            s_stats[2 * stage * kBlockM + threadIdx.x] = row_lse;
            s_stats[(2 * stage + 1) * kBlockM + threadIdx.x] = row_delta;
        }
    };
    // prologue: K, V and step 0 (one group), step 1 (the next); both steps' stats stored now
    flash_cp_async_tile<FLASH5_BWD_BLOCK_N, kHeadDim, kThreads>(
        sK, k.ptr + (size_t)b * T * k.stride + (size_t)kvh * kHeadDim, k.stride, n_block * FLASH5_BWD_BLOCK_N, T);
    if (!kv_same) {
        flash_cp_async_tile<FLASH5_BWD_BLOCK_N, kHeadDim, kThreads>(
            sV, v.ptr + (size_t)b * T * v.stride + (size_t)kvh * kHeadDim, v.stride, n_block * FLASH5_BWD_BLOCK_N, T);
    }
    for (int step = 0; step < 2 && step < steps; step++) {
        load_step(step, step);
        load_stats(step);
        store_stats(step);
    }

    float acc_dk[kKeyTiles][kTilesD][4], acc_dv[kKeyTiles][kTilesD][4]; // (WARP_KEYS, kHeadDim) per warp each
    #pragma unroll
    for (int i = 0; i < kKeyTiles; i++) {
        #pragma unroll
        for (int dj = 0; dj < kTilesD; dj++) {
            #pragma unroll
            for (int e = 0; e < 4; e++) { acc_dk[i][dj][e] = 0.0f; acc_dv[i][dj][e] = 0.0f; }
        }
    }

    for (int step = 0; step < steps; step++) {
        const int stage = step % kStages, stage_ahead = (step + 2) % kStages; // this step's, step + 2's
        if (step + 1 < steps) { cp_async_wait<1>(); } else { cp_async_wait<0>(); } // step + 1's may be in flight
        // this step's tiles and stats are complete and visible, and every warp is done with step - 1,
        // whose stage the copies of step + 2 refill
        __syncthreads();
        const bool prefetch = step + 2 < steps;
        if (prefetch) {
            load_step(step + 2, stage_ahead);
            load_stats(step + 2);
        }
        const int query0 = (m_first + step % per_head) * kBlockM;
        if (query0 + kBlockM - 1 >= warp_key0) { // else every query of the step precedes the warp's keys: P^T = 0
            const uint32_t sQ = sQdO + 2 * stage * kQueryTileBytes, sdO = sQ + kQueryTileBytes;
            const float* s_lse = s_stats + 2 * stage * kBlockM;
            const float* s_delta = s_lse + kBlockM;
            // S^T = K_w Q^T
            float pt[kKeyTiles][kTilesM][4]; // (WARP_KEYS, BLOCK_M) per warp: S^T, then P^T
            flash5_scores<kHeadDim, kKeyTiles, kBlockM>(pt, sKw, sQ + lane_nk);
            // P^T = 2^(S^T * scale_log2 - lse), one FFMA into exp2; 0 where query < key or query >= T, in the
            // steps that cross the warp's diagonal or reach past T
            const bool masked = query0 < warp_key0 + kWarpKeys - 1 || query0 + kBlockM > T;
            #pragma unroll
            for (int i = 0; i < kKeyTiles; i++) {
                #pragma unroll
                for (int j = 0; j < kTilesM; j++) {
                    #pragma unroll
                    for (int e = 0; e < 4; e++) {
                        const int col = j * 8 + 2 * quad + (e & 1), query = query0 + col;
                        const int key = warp_key0 + 16 * i + group + (e >= 2 ? 8 : 0);
                        pt[i][j][e] = (masked && (query < key || query >= T)) ? 0.0f
                                                                              : exp2f(fmaf(pt[i][j][e], scale_log2, -s_lse[col]));
                    }
                }
            }
            // acc_dv += P^T dO
            flash5_acc<kHeadDim, kKeyTiles, kBlockM>(acc_dv, pt, sdO + lane_kn);
            // dP^T = V_w dO^T, then dS^T = P^T * (dP^T - D)
            float dst[kKeyTiles][kTilesM][4]; // (WARP_KEYS, BLOCK_M) per warp: dP^T, then dS^T
            flash5_scores<kHeadDim, kKeyTiles, kBlockM>(dst, sVw, sdO + lane_nk);
            #pragma unroll
            for (int i = 0; i < kKeyTiles; i++) {
                #pragma unroll
                for (int j = 0; j < kTilesM; j++) {
                    #pragma unroll
                    for (int e = 0; e < 4; e++) { dst[i][j][e] = pt[i][j][e] * (dst[i][j][e] - s_delta[j * 8 + 2 * quad + (e & 1)]); }
                }
            }
            // acc_dk += dS^T Q (the scale is applied once, in the epilogue)
            flash5_acc<kHeadDim, kKeyTiles, kBlockM>(acc_dk, dst, sQ + lane_kn);
        }
        // step + 2's lse and D into its stage (step - 1's, read by no one since this step's barrier)
        if (prefetch) { store_stats(stage_ahead); }
    }

    // epilogue, as version 2: dK = scale * acc_dk; a shared k = v tensor gets dK + dV in one write
    #pragma unroll
    for (int i = 0; i < kKeyTiles; i++) {
        flash_store_dkdv<kHeadDim>(dk, dv, acc_dk[i], acc_dv[i], b, kvh, T, warp_key0 + 16 * i + group, quad, scale, kv_same);
    }
}

// dQ, version 5. Grid (B * H, ceil(T / 128)), FLASH5_THREADS threads, dynamic smem flash5_dq_smem_bytes.
// A CTA owns 128 query rows of one head (Q and dO resident), 32 per warp, and walks the key tiles up
// to its diagonal, the next K/V tile streaming into the other stage; it recomputes P and dS as version
// 4 and adds dQ = scale * dS K to what the dK/dV kernel wrote where q shares k's storage
// (dq.accumulate). Arguments and outputs as flash_attention_backward_dq_kernel.
template <int kHeadDim>
__global__ void __launch_bounds__(FLASH5_THREADS, 2)
flash5_attention_backward_dq_kernel(AttnGradDest dq, const floatX* dout, const float* lse, const float* delta,
                                    AttnRows q, AttnRows k, AttnRows v, int T, int H, int Hkv, float scale,
                                    float scale_log2) {
    constexpr int kBlockN = FLASH5_DQ_BLOCK_N(kHeadDim), kSubN = FLASH5_DQ_SUB_N(kHeadDim);
    constexpr int kTilesN = kSubN / 8, kTilesD = kHeadDim / 8;
    constexpr uint32_t kRowBytes = (kHeadDim + FLASH_SMEM_PAD) * sizeof(floatX), kTileBytes = kBlockN * kRowBytes;
    extern __shared__ __align__(16) unsigned char flash_smem[];
    // Q, dO (128 rows each), then stage s's K at sKV + 2s tiles, its V one tile after
    const uint32_t sQ = smem_u32(flash_smem);
    const uint32_t sdO = sQ + FLASH5_BLOCK_M * kRowBytes;
    const uint32_t sKV = sdO + FLASH5_BLOCK_M * kRowBytes;
    const bool kv_same = k.ptr == v.ptr;
    const int m_block = gridDim.y - 1 - blockIdx.y; // the longest rows (most key tiles) start first
    const int b = blockIdx.x / H, h = blockIdx.x % H, kvh = h / (H / Hkv);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, group = lane / 4, quad = lane % 4;
    const int C = H * kHeadDim;
    const floatX* gK = k.ptr + (size_t)b * T * k.stride + (size_t)kvh * kHeadDim;
    const floatX* gV = v.ptr + (size_t)b * T * v.stride + (size_t)kvh * kHeadDim;
    const int warp_row0 = m_block * FLASH5_BLOCK_M + warp * 32; // rows warp_row0 + 16 i + group (+ 8)
    const int n_last = (min(m_block * FLASH5_BLOCK_M + FLASH5_BLOCK_M, T) - 1) / kBlockN;
    const int lm_row = lane % 8, lm_mat = lane / 8; // ldmatrix lane offsets, as version 3's forward
    const uint32_t lane_nk = (lm_row + 8 * (lm_mat >> 1)) * kRowBytes + 8 * (lm_mat & 1) * sizeof(floatX);
    const uint32_t lane_kn = (lm_row + 8 * (lm_mat & 1)) * kRowBytes + 8 * (lm_mat >> 1) * sizeof(floatX);
    const uint32_t sQw = sQ + warp * 32 * kRowBytes + lane_kn, sdOw = sdO + warp * 32 * kRowBytes + lane_kn;
    // the CTA's rows' lse (base 2) and D in shared memory, row threadIdx.x (the first barrier publishes
    // them): 8 registers a thread fewer than holding each thread's four rows, which spilled
    float* s_lse = reinterpret_cast<float*>(flash_smem + (2 * FLASH5_BLOCK_M + 4 * kBlockN) * kRowBytes);
    float* s_delta = s_lse + FLASH5_BLOCK_M;
    {
        const int t = m_block * FLASH5_BLOCK_M + threadIdx.x;
        s_lse[threadIdx.x] = t < T ? lse[((size_t)b * H + h) * T + t] * FLASH_LOG2E : 0.0f;
        s_delta[threadIdx.x] = t < T ? delta[((size_t)b * H + h) * T + t] : 0.0f;
    }
    static_assert(FLASH5_THREADS == FLASH5_BLOCK_M, "lse and D: one row per thread");

    auto load_kv = [&](int n_block, int stage) {
        const uint32_t sK = sKV + 2 * stage * kTileBytes;
        flash_cp_async_tile<kBlockN, kHeadDim, FLASH5_THREADS>(sK, gK, k.stride, n_block * kBlockN, T);
        if (!kv_same) { flash_cp_async_tile<kBlockN, kHeadDim, FLASH5_THREADS>(sK + kTileBytes, gV, v.stride, n_block * kBlockN, T); }
        cp_async_commit();
    };
    flash_cp_async_tile<FLASH5_BLOCK_M, kHeadDim, FLASH5_THREADS>(
        sQ, q.ptr + (size_t)b * T * q.stride + (size_t)h * kHeadDim, q.stride, m_block * FLASH5_BLOCK_M, T);
    flash_cp_async_tile<FLASH5_BLOCK_M, kHeadDim, FLASH5_THREADS>(
        sdO, dout + (size_t)b * T * C + (size_t)h * kHeadDim, C, m_block * FLASH5_BLOCK_M, T);
    cp_async_commit();
    load_kv(0, 0);

    float acc_dq[2][kTilesD][4]; // (32, kHeadDim) per warp
    #pragma unroll
    for (int i = 0; i < 2; i++) {
        #pragma unroll
        for (int dj = 0; dj < kTilesD; dj++) { acc_dq[i][dj][0] = acc_dq[i][dj][1] = acc_dq[i][dj][2] = acc_dq[i][dj][3] = 0.0f; }
    }

    for (int n_block = 0; n_block <= n_last; n_block++) {
        const int stage = n_block & 1;
        if (n_block < n_last) { // the next tile streams in while this one is computed
            load_kv(n_block + 1, stage ^ 1);
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads(); // tile n_block (and, the first time, Q and dO) has landed: every thread's copies
        const uint32_t sKt = sKV + 2 * stage * kTileBytes;
        const uint32_t sVt = kv_same ? sKt : sKt + kTileBytes;
        // the tile in parts of SUB_N keys; a part whose keys all come after the warp's rows is skipped,
        // and so are the parts after it
        #pragma unroll 1
        for (int part = 0; part < kBlockN / kSubN; part++) {
            const int key0 = n_block * kBlockN + part * kSubN;
            if (key0 > warp_row0 + 31) { break; }
            const uint32_t sK = sKt + part * kSubN * kRowBytes, sV = sVt + part * kSubN * kRowBytes;
            // S = Q_w K^T, both m16 tiles: each K fragment feeds two mma
            float p[2][kTilesN][4]; // (32, SUB_N) per warp: S, then P
            flash5_scores<kHeadDim, 2, kSubN>(p, sQw, sK + lane_nk);
            // P = 2^(S * scale_log2 - lse), one FFMA into exp2; 0 where key > query (then also key >= T
            // for every row < T), in the parts that reach past the warp's first row or T
            const bool masked = key0 + kSubN - 1 > warp_row0 || key0 + kSubN > T;
            #pragma unroll
            for (int i = 0; i < 2; i++) {
                #pragma unroll
                for (int j = 0; j < kTilesN; j++) {
                    #pragma unroll
                    for (int e = 0; e < 4; e++) {
                        const int key = key0 + j * 8 + 2 * quad + (e & 1);
                        const int row = warp * 32 + 16 * i + group + (e >= 2 ? 8 : 0), query = m_block * FLASH5_BLOCK_M + row;
                        p[i][j][e] = (masked && (key > query || key >= T)) ? 0.0f : exp2f(fmaf(p[i][j][e], scale_log2, -s_lse[row]));
                    }
                }
            }
            // dP = dO_w V^T, then dS = P * (dP - D)
            float ds[2][kTilesN][4]; // (32, SUB_N) per warp: dP, then dS
            flash5_scores<kHeadDim, 2, kSubN>(ds, sdOw, sV + lane_nk);
            #pragma unroll
            for (int i = 0; i < 2; i++) {
                #pragma unroll
                for (int j = 0; j < kTilesN; j++) {
                    #pragma unroll
                    for (int e = 0; e < 4; e++) { ds[i][j][e] = p[i][j][e] * (ds[i][j][e] - s_delta[warp * 32 + 16 * i + group + (e >= 2 ? 8 : 0)]); }
                }
            }
            // acc_dq += dS K: each K fragment (ldmatrix.trans) feeds two mma
            flash5_acc<kHeadDim, 2, kSubN>(acc_dq, ds, sK + lane_kn);
        }
        __syncthreads(); // every warp is done with this K/V stage before the next tile's copies refill it
    }

    #pragma unroll
    for (int i = 0; i < 2; i++) { flash_store_dq<kHeadDim>(dq, acc_dq[i], b, h, T, warp_row0 + 16 * i + group, quad, scale); }
}

// version 5's backward after the delta kernel: dK/dV first, then dQ (which adds to dK/dV's write where
// q shares k's storage)
template <int kHeadDim>
static void flash5_attention_backward_hd(AttnGradDest dq, AttnGradDest dk, AttnGradDest dv, const floatX* dout,
                                         const float* lse, const float* delta, AttnRows q, AttnRows k, AttnRows v,
                                         int B, int T, int H, int Hkv, float scale) {
    const size_t smem_dkdv = flash5_dkdv_smem_bytes(kHeadDim), smem_dq = flash5_dq_smem_bytes(kHeadDim);
    static bool dkdv_opted_in = false, dq_opted_in = false;
    flash_smem_opt_in(flash5_attention_backward_dkdv_kernel<kHeadDim>, smem_dkdv, &dkdv_opted_in);
    flash_smem_opt_in(flash5_attention_backward_dq_kernel<kHeadDim>, smem_dq, &dq_opted_in);
    const int key_tiles = (T + FLASH5_BWD_BLOCK_N - 1) / FLASH5_BWD_BLOCK_N;
    flash5_attention_backward_dkdv_kernel<kHeadDim><<<dim3(B * Hkv, key_tiles), FLASH5_BWD_THREADS(kHeadDim), smem_dkdv>>>(
        dk, dv, dout, lse, delta, q, k, v, T, H, Hkv, scale, scale * FLASH_LOG2E);
    launchCheck();
    profile_mark(PROF_ATTN_BWD_DKDV);
    const int query_tiles = (T + FLASH5_BLOCK_M - 1) / FLASH5_BLOCK_M;
    flash5_attention_backward_dq_kernel<kHeadDim><<<dim3(B * H, query_tiles), FLASH5_THREADS, smem_dq>>>(
        dq, dout, lse, delta, q, k, v, T, H, Hkv, scale, scale * FLASH_LOG2E);
    launchCheck();
    profile_mark(PROF_ATTN_BWD_DQ);
}

// ----------------------------------------------------------------------------
// forward version 6 (issue 59): sm_90a, FlashAttention-3's design, the first cut. Its prediction and
// design are in dev/cuda/attention_forward.cu's header. 384 threads: warpgroup 0 the producer (one
// thread issues the bulk tensor copies), warpgroups 1 and 2 the consumers (64 query rows each, wgmma);
// Q once and K, V in a ring of 2 stages, each tile 128 rows in 64-column panels of 128-byte rows,
// 128-byte swizzled (the copy engine writes the swizzle, wgmma's descriptors read it). Not in this
// first cut: the S of tile j + 1 issued before the softmax of tile j, and the consumers' ping-pong.

#define FLASH6_BLOCK_M 128  // query rows per CTA: 2 consumer warpgroups x 64
#define FLASH6_BLOCK_N 128  // keys per tile
#define FLASH6_THREADS 384  // producer + 2 consumers
#define FLASH6_STAGES 2
#define FLASH6_PANEL_BYTES (128 * 128) // 128 rows x 64 bf16

// whether version 6 can run here: an sm_90a build (wgmma, setmaxnreg) on a compute capability 9.0 GPU
// (the CPU runtime is one)
static int flash6_available() {
#if defined(CUDACPU_CUDA_CPU_H) || defined(LAB_SM90A)
    int major = 0;
    cudaCheck(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
    return major == 9;
#else
    return 0;
#endif
}

// a role's rows as the copy engine reads them: 3-d (columns of its heads, T, B), row stride in bytes,
// boxes of 64 columns x box_rows rows (128, or 64 for the backward's query tiles), 128-byte swizzle,
// zeros past T
static void flash6_tensor_map(CUtensorMap* map, AttnRows rows, int B, int T, int columns, int box_rows) {
    static PFN_cuTensorMapEncodeTiled_v12000 encode = nullptr;
    if (encode == nullptr) {
        void* fn = nullptr;
        cudaDriverEntryPointQueryResult found;
        cudaCheck(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found));
        if (fn == nullptr || found != cudaDriverEntryPointSuccess) {
            fprintf(stderr, "error: flash version 6: the driver has no cuTensorMapEncodeTiled (HINT: a CUDA 12 driver or newer)\n");
            exit(EXIT_FAILURE);
        }
        encode = (PFN_cuTensorMapEncodeTiled_v12000)fn;
    }
    const cuuint64_t dims[3] = {(cuuint64_t)columns, (cuuint64_t)T, (cuuint64_t)B};
    const cuuint64_t strides[2] = {(cuuint64_t)rows.stride * sizeof(floatX), (cuuint64_t)T * rows.stride * sizeof(floatX)};
    const cuuint32_t box[3] = {64, (cuuint32_t)box_rows, 1}, element_strides[3] = {1, 1, 1};
    const CUresult r = encode(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, (void*)rows.ptr, dims, strides, box, element_strides,
                              CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                              CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) {
        fprintf(stderr, "error: flash version 6: cuTensorMapEncodeTiled refused a role's rows (error %d; rows 16-byte aligned, "
                "strides a multiple of 16 bytes)\n", (int)r);
        exit(EXIT_FAILURE);
    }
}

// a wgmma descriptor of a 128-byte swizzled operand at shared address addr (lbo, sbo in bytes)
__device__ __forceinline__ uint64_t flash6_desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
    return (uint64_t)((addr >> 4) & 0x3FFF) | (uint64_t)((lbo >> 4) & 0x3FFF) << 16 | (uint64_t)((sbo >> 4) & 0x3FFF) << 32 | 1ull << 62;
}

__device__ __forceinline__ void flash6_mbar_init(uint32_t bar, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void flash6_mbar_arrive(uint32_t bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(bar) : "memory");
}
__device__ __forceinline__ void flash6_mbar_expect(uint32_t bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void flash6_mbar_wait(uint32_t bar, int parity) {
    uint32_t done = 0;
    while (!done) {
        asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                     : "=r"(done) : "r"(bar), "r"(parity) : "memory");
    }
}
// one 64-column panel of 128 rows, (column c0, row t0, batch b), completing on bar
__device__ __forceinline__ void flash6_copy_panel(uint32_t dst, const CUtensorMap* map, int c0, int t0, int b, uint32_t bar) {
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];"
                 :: "r"(dst), "l"(map), "r"(c0), "r"(t0), "r"(b), "r"(bar) : "memory");
}
__device__ __forceinline__ void flash6_wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void flash6_wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void flash6_wgmma_wait0() { asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory"); }

// wgmma m64n128k16 with A and B from shared memory, both K-major (S = Q K^T over 128 keys); d: the
// thread's 64 accumulators; scale_d 0 overwrites them
__device__ __forceinline__ void flash6_wgmma_qk(float* d, uint64_t desc_a, uint64_t desc_b, int scale_d) {
    asm volatile("{ .reg .pred p; setp.ne.b32 p, %66, 0; "
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
                 "%64, %65, p, 1, 1, 0, 0; }"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                   "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                   "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                   "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                   "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

// wgmma m64n{64,128}k16 with A from registers (P, in mma.sync's A fragment layout) and B from shared
// memory MN-major (V's row-major tile): O += P V; d: the thread's kHeadDim / 2 accumulators
template <int kHeadDim>
__device__ __forceinline__ void flash6_wgmma_pv(float* d, const uint32_t* a, uint64_t desc_b) {
    const int scale_d = 1;
    if constexpr (kHeadDim == 64) {
        asm volatile("{ .reg .pred p; setp.ne.b32 p, %37, 0; "
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                     "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
                     "{%32, %33, %34, %35}, %36, p, 1, 1, 1; }"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                       "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                       "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                       "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d));
    } else {
        asm volatile("{ .reg .pred p; setp.ne.b32 p, %69, 0; "
                     "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                     "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                     "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                     "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
                     "{%64, %65, %66, %67}, %68, p, 1, 1, 1; }"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                       "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                       "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                       "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                       "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                       "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                       "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                       "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d));
    }
}

// the pieces of versions 6 and 7

// a CTA's work: its block of 128 query rows (the longest rows, with the most key tiles, first), batch
// row, query head, kv head, and its last key tile (the diagonal one)
struct Flash6Block {
    int m_block, b, h, kvh, n_last;
};
__device__ __forceinline__ Flash6Block flash6_block(int T, int H, int Hkv) {
    Flash6Block w;
    w.m_block = gridDim.y - 1 - blockIdx.y;
    w.b = blockIdx.x / H;
    w.h = blockIdx.x % H;
    w.kvh = w.h / (H / Hkv);
    w.n_last = (min(w.m_block * FLASH6_BLOCK_M + FLASH6_BLOCK_M, T) - 1) / FLASH6_BLOCK_N;
    return w;
}

// the mbarriers of a ring of kStages: the resident tiles' (copied once: the forward's Q; the backward's
// K and V, or Q and dO), and each stage's "full" (the copies' bytes) and "empty" (every consumer
// thread, when done with the stage)
template <int kStages>
struct Flash6Barriers {
    uint64_t resident, full[kStages], empty[kStages];
};
// thread 0 initializes them; every thread goes on once it has
template <int kStages>
__device__ __forceinline__ void flash6_init_barriers(Flash6Barriers<kStages>* bar) {
    if (threadIdx.x == 0) {
        flash6_mbar_init(smem_u32(&bar->resident), 1);
        for (int s = 0; s < kStages; s++) {
            flash6_mbar_init(smem_u32(&bar->full[s]), 1);
            flash6_mbar_init(smem_u32(&bar->empty[s]), 256);
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
}

// a tile of kRows rows (128, or the backward's 64-query tiles) x kHeadDim columns from column col0, row
// row0 of batch row b: kHeadDim / 64 panels of kRows rows of 128 bytes, completing on bar
template <int kHeadDim, int kRows>
__device__ __forceinline__ void flash6_copy_tile(uint32_t dst, const CUtensorMap* map, int col0, int row0, int b, uint32_t bar) {
    #pragma unroll
    for (int p = 0; p < kHeadDim / 64; p++) { flash6_copy_panel(dst + p * kRows * 128, map, col0 + 64 * p, row0, b, bar); }
}

// the producer's one thread: the block's 128 rows of Q (and of dO, the backward's dQ kernel, when tdo
// is not null) once on bar->resident, then the K and V tiles 0 .. n_last through a ring of kStages after
// them (stage s at sQ + tile (resident + 2 s)), V after K (one copy a tile when kv_same), each stage
// filled on bar->full[stage] once all 256 consumer threads released its previous tile on bar->empty[stage]
template <int kHeadDim, int kStages>
__device__ __forceinline__ void flash6_produce(const CUtensorMap* tq, const CUtensorMap* tdo, const CUtensorMap* tk,
                                               const CUtensorMap* tv, int kv_same, uint32_t sQ, Flash6Barriers<kStages>* bar,
                                               const Flash6Block& w) {
    constexpr uint32_t kTileBytes = (kHeadDim / 64) * FLASH6_PANEL_BYTES;
    const int resident = tdo != nullptr ? 2 : 1;
    const uint32_t full_resident = smem_u32(&bar->resident);
    flash6_mbar_expect(full_resident, resident * kTileBytes);
    flash6_copy_tile<kHeadDim, 128>(sQ, tq, w.h * kHeadDim, w.m_block * FLASH6_BLOCK_M, w.b, full_resident);
    if (tdo != nullptr) { flash6_copy_tile<kHeadDim, 128>(sQ + kTileBytes, tdo, w.h * kHeadDim, w.m_block * FLASH6_BLOCK_M, w.b, full_resident); }
    for (int n = 0; n <= w.n_last; n++) {
        const int stage = n % kStages;
        const uint32_t sK = sQ + kTileBytes * (resident + 2 * stage), full = smem_u32(&bar->full[stage]);
        if (n >= kStages) { flash6_mbar_wait(smem_u32(&bar->empty[stage]), (n / kStages - 1) & 1); } // tile n - kStages released
        flash6_mbar_expect(full, kv_same ? kTileBytes : 2 * kTileBytes);
        flash6_copy_tile<kHeadDim, 128>(sK, tk, w.kvh * kHeadDim, n * FLASH6_BLOCK_N, w.b, full);
        if (!kv_same) { flash6_copy_tile<kHeadDim, 128>(sK + kTileBytes, tv, w.kvh * kHeadDim, n * FLASH6_BLOCK_N, w.b, full); }
    }
}

// warpgroup 0, the producer: it gives its registers to the consumers, and its thread 0 issues every
// copy while the others leave
template <int kHeadDim, int kStages>
__device__ __forceinline__ void flash6_producer(const CUtensorMap* tq, const CUtensorMap* tdo, const CUtensorMap* tk,
                                                const CUtensorMap* tv, int kv_same, uint32_t sQ, Flash6Barriers<kStages>* bar,
                                                const Flash6Block& w) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 24;");
    if (threadIdx.x == 0) { flash6_produce<kHeadDim, kStages>(tq, tdo, tk, tv, kv_same, sQ, bar, w); }
}

// issues S (64 x 128) = Q K^T for a consumer's 64 rows of Q at sQc and the tile's K at sK: hd / 16
// wgmma, each a 16-wide slice of both (32 bytes into a panel's rows); s's 64 registers are overwritten
template <int kHeadDim>
__device__ __forceinline__ void flash6_issue_qk(float* s, uint32_t sQc, uint32_t sK) {
    #pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; kk++) {
        const uint32_t at = (kk / 4) * FLASH6_PANEL_BYTES + (kk % 4) * 32;
        flash6_wgmma_qk(s, flash6_desc(sQc + at, 16, 1024), flash6_desc(sK + at, 16, 1024), kk > 0);
    }
}

// issues O += P V for a tile of kRows keys: V's 16-key slice j is 16 rows of 128 bytes into each panel
// (MN-major: panels kRows x 128 bytes apart along hd, 8-row groups 1024 bytes apart along the keys).
// The backward's dV += P^T dO, dK += dS^T Q (64-query tiles) and dQ += dS K are the same product
template <int kHeadDim, int kRows = 128>
__device__ __forceinline__ void flash6_issue_pv(float* o, const uint32_t (*p)[4], uint32_t sV) {
    #pragma unroll
    for (int j = 0; j < kRows / 16; j++) { flash6_wgmma_pv<kHeadDim>(o, p[j], flash6_desc(sV + j * 16 * 128, kRows * 128, 1024)); }
}

// accumulator i of an m64nN tile: row g + 8 ((i % 4) / 2) of the warp's 16, column 8 (i / 4) + 2 t + (i % 2)
// -inf where key > query or key >= T (only the diagonal tile n_last reaches past either)
__device__ __forceinline__ void flash6_mask(float* s, int n, int row0, int t, int T) {
    #pragma unroll
    for (int i = 0; i < 64; i++) {
        const int key = n * FLASH6_BLOCK_N + 8 * (i / 4) + 2 * t + (i % 2), query = row0 + 8 * ((i % 4) / 2);
        if (key > query || key >= T) { s[i] = -INFINITY; }
    }
}

// the online softmax of the thread's two rows over one tile (the quad holds a row's 128 columns): s
// becomes the unnormalized probabilities, row_max (raw score units) and row_sum move on, and corr[r]
// is the factor the row's O must be scaled by before this tile's P V is added
__device__ __forceinline__ void flash6_softmax(float* s, float* row_max, float* row_sum, float* corr, float scale_log2) {
    #pragma unroll
    for (int r = 0; r < 2; r++) {
        float m_new = row_max[r];
        #pragma unroll
        for (int i = 2 * r; i < 64; i += 4) { m_new = fmaxf(m_new, fmaxf(s[i], s[i + 1])); }
        m_new = fmaxf(m_new, __shfl_xor_sync(0xFFFFFFFFu, m_new, 1));
        m_new = fmaxf(m_new, __shfl_xor_sync(0xFFFFFFFFu, m_new, 2));
        const float m_scaled = m_new == -INFINITY ? 0.0f : m_new * scale_log2; // a row with no key yet stays 0
        corr[r] = exp2f(row_max[r] * scale_log2 - m_scaled);
        row_max[r] = m_new;
        float sum = 0.0f;
        #pragma unroll
        for (int i = 2 * r; i < 64; i += 4) {
            s[i] = exp2f(fmaf(s[i], scale_log2, -m_scaled));
            s[i + 1] = exp2f(fmaf(s[i + 1], scale_log2, -m_scaled));
            sum += s[i] + s[i + 1];
        }
        row_sum[r] = row_sum[r] * corr[r] + sum;
    }
}

template <int kHeadDim>
__device__ __forceinline__ void flash6_rescale(float* o, const float* corr) {
    #pragma unroll
    for (int i = 0; i < kHeadDim / 2; i++) { o[i] *= corr[(i % 4) / 2]; }
}

// P in bf16 as wgmma's A fragments: the 16 keys of slice j are accumulators 8 j .. 8 j + 7 (kSlices:
// 8 for 128 columns, 4 for the backward's 64)
template <int kSlices = 8>
__device__ __forceinline__ void flash6_pack_p(uint32_t (*p)[4], const float* s) {
    #pragma unroll
    for (int j = 0; j < kSlices; j++) {
        #pragma unroll
        for (int q = 0; q < 4; q++) {
            __nv_bfloat162 v2 = __floats2bfloat162_rn(s[8 * j + 2 * q], s[8 * j + 2 * q + 1]);
            p[j][q] = *reinterpret_cast<uint32_t*>(&v2);
        }
    }
}

// the epilogue: O / row_sum as bf16 pairs into out's rows row0 and row0 + 8, lse by the quad's lane 0
template <int kHeadDim>
__device__ __forceinline__ void flash6_store(const float* o, const float* row_max, const float* row_sum, floatX* out, float* lse,
                                             int b, int h, int H, int T, int row0, int t, float scale_log2) {
    #pragma unroll
    for (int r = 0; r < 2; r++) {
        float sum = row_sum[r];
        sum += __shfl_xor_sync(0xFFFFFFFFu, sum, 1);
        sum += __shfl_xor_sync(0xFFFFFFFFu, sum, 2);
        const float inv = 1.0f / sum;
        const int query = row0 + 8 * r;
        if (query < T) {
            floatX* orow = out + ((size_t)b * T + query) * ((size_t)H * kHeadDim) + (size_t)h * kHeadDim;
            #pragma unroll
            for (int i = 2 * r; i < kHeadDim / 2; i += 4) {
                *reinterpret_cast<__nv_bfloat162*>(orow + 8 * (i / 4) + 2 * t) = __floats2bfloat162_rn(o[i] * inv, o[i + 1] * inv);
            }
            if (t == 0) { lse[((size_t)b * H + h) * T + query] = (row_max[r] * scale_log2 + log2f(sum)) * FLASH_LN2; }
        }
    }
}

// dynamic shared memory of versions 6 and 7: 1024 bytes to align, Q (128 rows), then each stage's K and V
static size_t flash6_forward_smem_bytes(int hd, int stages) {
    return 1024 + (size_t)(1 + 2 * stages) * FLASH6_BLOCK_M * hd * sizeof(floatX);
}

// Forward, version 6. Grid (B * H, ceil(T / 128)), 384 threads, dynamic smem flash6_forward_smem_bytes.
// tq, tk, tv: the roles' tensor maps (flash6_tensor_map); kv_same: K and V are one tensor (one copy a
// tile). out (B, T, H * hd), lse (B, H, T) as flash_attention_forward_kernel.
template <int kHeadDim>
__global__ void __launch_bounds__(FLASH6_THREADS, 1)
flash6_attention_forward_kernel(const __grid_constant__ CUtensorMap tq, const __grid_constant__ CUtensorMap tk,
                                const __grid_constant__ CUtensorMap tv, int kv_same, floatX* out, float* lse, int T, int H,
                                int Hkv, float scale_log2) {
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
    // not an sm_90a build: flash6_available() keeps the launcher from coming here
#else
    constexpr uint32_t kTileBytes = (kHeadDim / 64) * FLASH6_PANEL_BYTES; // 128 rows x kHeadDim
    extern __shared__ __align__(16) unsigned char flash_smem[];
    __shared__ __align__(8) Flash6Barriers<FLASH6_STAGES> bar;
    const uint32_t raw = smem_u32(flash_smem);
    const uint32_t sQ = raw + (1024 - raw % 1024) % 1024; // the swizzle repeats every 1024 bytes
    auto sK = [&](int stage) { return sQ + kTileBytes * (1 + 2 * stage); };
    const Flash6Block w = flash6_block(T, H, Hkv);
    const int n_last = w.n_last, wg = threadIdx.x / 128;
    flash6_init_barriers(&bar);
    if (wg == 0) {
        flash6_producer<kHeadDim, FLASH6_STAGES>(&tq, nullptr, &tk, &tv, kv_same, sQ, &bar, w);
    } else { // a consumer: 64 query rows, each warp 16 (rows row0 and row0 + 8 of this thread)
        asm volatile("setmaxnreg.inc.sync.aligned.u32 240;");
        const int c = wg - 1, lane = threadIdx.x % 32, warp = (threadIdx.x % 128) / 32, t = lane % 4;
        const int row0 = w.m_block * FLASH6_BLOCK_M + 64 * c + 16 * warp + lane / 4;
        const uint32_t sQc = sQ + 64 * c * 128; // this consumer's 64 rows of each Q panel
        float o[kHeadDim / 2];
        #pragma unroll
        for (int i = 0; i < kHeadDim / 2; i++) { o[i] = 0.0f; }
        float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.0f, 0.0f}; // raw score units, this thread's columns
        flash6_mbar_wait(smem_u32(&bar.resident), 0);
        for (int n = 0; n <= n_last; n++) {
            const int stage = n % FLASH6_STAGES;
            flash6_mbar_wait(smem_u32(&bar.full[stage]), (n / FLASH6_STAGES) & 1);
            const uint32_t sKs = sK(stage), sVs = kv_same ? sKs : sKs + kTileBytes;
            float s[64];
            #pragma unroll
            for (int i = 0; i < 64; i++) { s[i] = 0.0f; }
            flash6_wgmma_fence();
            flash6_issue_qk<kHeadDim>(s, sQc, sKs);
            flash6_wgmma_commit();
            flash6_wgmma_wait0();
            if (n == n_last) { flash6_mask(s, n, row0, t, T); }
            float corr[2];
            flash6_softmax(s, row_max, row_sum, corr, scale_log2);
            flash6_rescale<kHeadDim>(o, corr);
            uint32_t p[8][4];
            flash6_pack_p(p, s);
            flash6_wgmma_fence();
            flash6_issue_pv<kHeadDim>(o, p, sVs);
            flash6_wgmma_commit();
            flash6_wgmma_wait0();
            flash6_mbar_arrive(smem_u32(&bar.empty[stage])); // this thread is done with the stage
        }
        flash6_store<kHeadDim>(o, row_max, row_sum, out, lse, w.b, w.h, H, T, row0, t, scale_log2);
    }
#endif
}

// versions 6 and 7's tensor maps, one a role (a K=V scheme's K and V are one tensor: kv_same)
struct Flash6Maps {
    CUtensorMap q, k, v; // the type carries the alignment the driver needs
};
static void flash6_maps(Flash6Maps* m, AttnRows q, AttnRows k, AttnRows v, int B, int T, int H, int Hkv, int hd) {
    flash6_tensor_map(&m->q, q, B, T, H * hd, 128);
    flash6_tensor_map(&m->k, k, B, T, Hkv * hd, 128);
    flash6_tensor_map(&m->v, v, B, T, Hkv * hd, 128);
}

template <int kHeadDim>
static void flash6_attention_forward_hd(floatX* out, float* lse, AttnRows q, AttnRows k, AttnRows v, int B, int T,
                                        int H, int Hkv, float scale) {
    Flash6Maps maps;
    flash6_maps(&maps, q, k, v, B, T, H, Hkv, kHeadDim);
    const size_t smem = flash6_forward_smem_bytes(kHeadDim, FLASH6_STAGES);
    static bool smem_opted_in = false;
    flash_smem_opt_in(flash6_attention_forward_kernel<kHeadDim>, smem, &smem_opted_in);
    dim3 grid(B * H, (T + FLASH6_BLOCK_M - 1) / FLASH6_BLOCK_M);
    flash6_attention_forward_kernel<kHeadDim><<<grid, FLASH6_THREADS, smem>>>(maps.q, maps.k, maps.v, k.ptr == v.ptr, out, lse, T, H,
                                                                              Hkv, scale * FLASH_LOG2E);
    launchCheck();
}

// ----------------------------------------------------------------------------
// forward version 7 (issue 59): version 6 with FlashAttention-3's two overlaps (its prediction is in
// dev/cuda/attention_forward.cu's header). Inside a consumer, tile n's S is issued together with tile
// n - 1's P V, and tile n's softmax runs while P V is in flight (wgmma.wait_group 1); between the two
// consumers, named barriers 1 and 2 hand the turn to issue wgmma back and forth, so one's softmax runs
// under the other's matmuls. The ring has 3 stages at hd 64.

template <int kHeadDim>
struct Flash7Config {
    static constexpr int kStages = kHeadDim == 64 ? 3 : 2; // 113 KiB or 161 KiB of shared memory
};

// named barrier kId counted over both consumers' 256 threads: wait for the round (bar.sync) or only
// arrive (bar.arrive); the id a constant, so ptxas knows which of the 16 barriers the kernel uses
template <int kId>
__device__ __forceinline__ void flash7_bar_sync() { asm volatile("bar.sync %0, 256;" :: "n"(kId) : "memory"); }
template <int kId>
__device__ __forceinline__ void flash7_bar_arrive() { asm volatile("bar.arrive %0, 256;" :: "n"(kId) : "memory"); }
__device__ __forceinline__ void flash7_wgmma_wait1() { asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory"); }

// the consumers' turns to issue wgmma (forward version 7, backward version 7): consumer c issues after
// bar.sync on barrier 1 + c and hands the turn on by bar.arrive on the other's; consumer 1 gives
// consumer 0 the first turn (begin) and, so that every round completes, skips the hand-on after its last
struct Flash7Turns {
    int c;
    __device__ __forceinline__ void begin() const {
        if (c == 1) { flash7_bar_arrive<1>(); }
    }
    __device__ __forceinline__ void take() const { c == 0 ? flash7_bar_sync<1>() : flash7_bar_sync<2>(); }
    __device__ __forceinline__ void hand_on(bool last) const {
        if (c == 0) { flash7_bar_arrive<2>(); }
        else if (!last) { flash7_bar_arrive<1>(); }
    }
};

// Forward, version 7. Grid, threads, arguments and outputs as version 6's; dynamic smem
// flash6_forward_smem_bytes(hd, Flash7Config<hd>::kStages).
template <int kHeadDim>
__global__ void __launch_bounds__(FLASH6_THREADS, 1)
flash7_attention_forward_kernel(const __grid_constant__ CUtensorMap tq, const __grid_constant__ CUtensorMap tk,
                                const __grid_constant__ CUtensorMap tv, int kv_same, floatX* out, float* lse, int T, int H,
                                int Hkv, float scale_log2) {
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
    // not an sm_90a build: flash6_available() keeps the launcher from coming here
#else
    constexpr int kStages = Flash7Config<kHeadDim>::kStages;
    constexpr uint32_t kTileBytes = (kHeadDim / 64) * FLASH6_PANEL_BYTES; // 128 rows x kHeadDim
    extern __shared__ __align__(16) unsigned char flash_smem[];
    __shared__ __align__(8) Flash6Barriers<kStages> bar;
    const uint32_t raw = smem_u32(flash_smem);
    const uint32_t sQ = raw + (1024 - raw % 1024) % 1024; // the swizzle repeats every 1024 bytes
    auto sK = [&](int n) { return sQ + kTileBytes * (1 + 2 * (n % kStages)); };              // tile n's K
    auto sV = [&](int n) { return kv_same ? sK(n) : sK(n) + kTileBytes; };                  // and its V
    auto release = [&](int n) { flash6_mbar_arrive(smem_u32(&bar.empty[n % kStages])); }; // tile n's stage
    const Flash6Block w = flash6_block(T, H, Hkv);
    const int n_last = w.n_last, wg = threadIdx.x / 128;
    flash6_init_barriers(&bar);
    if (wg == 0) {
        flash6_producer<kHeadDim, kStages>(&tq, nullptr, &tk, &tv, kv_same, sQ, &bar, w);
    } else { // a consumer: 64 query rows, each warp 16 (rows row0 and row0 + 8 of this thread)
        asm volatile("setmaxnreg.inc.sync.aligned.u32 240;");
        const int c = wg - 1, lane = threadIdx.x % 32, warp = (threadIdx.x % 128) / 32, t = lane % 4;
        const int row0 = w.m_block * FLASH6_BLOCK_M + 64 * c + 16 * warp + lane / 4;
        const uint32_t sQc = sQ + 64 * c * 128; // this consumer's 64 rows of each Q panel
        const Flash7Turns turns{c};
        turns.begin();
        float o[kHeadDim / 2];
        #pragma unroll
        for (int i = 0; i < kHeadDim / 2; i++) { o[i] = 0.0f; }
        float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.0f, 0.0f}; // raw score units, this thread's columns
        float s[64], corr[2];
        uint32_t p[8][4]; // P of the tile whose P V is issued next
        flash6_mbar_wait(smem_u32(&bar.resident), 0);
        // tile 0: its S alone (O is still zero: no rescale). Peeled rather than a branch around the
        // P V issue inside the loop: the branch would make the compiler copy O's registers where the
        // two paths meet, reads of accumulators in flight that ptxas answers by serializing the wgmma
        flash6_mbar_wait(smem_u32(&bar.full[0]), 0);
        #pragma unroll
        for (int i = 0; i < 64; i++) { s[i] = 0.0f; }
        turns.take();
        flash6_wgmma_fence();
        flash6_issue_qk<kHeadDim>(s, sQc, sK(0));
        flash6_wgmma_commit();
        turns.hand_on(false);
        flash6_wgmma_wait0();
        if (n_last == 0) { flash6_mask(s, 0, row0, t, T); }
        flash6_softmax(s, row_max, row_sum, corr, scale_log2);
        flash6_pack_p(p, s);
        for (int n = 1; n <= n_last; n++) {
            flash6_mbar_wait(smem_u32(&bar.full[n % kStages]), (n / kStages) & 1);
            #pragma unroll
            for (int i = 0; i < 64; i++) { s[i] = 0.0f; }
            turns.take();
            flash6_wgmma_fence();
            flash6_issue_qk<kHeadDim>(s, sQc, sK(n));
            flash6_wgmma_commit();
            flash6_issue_pv<kHeadDim>(o, p, sV(n - 1)); // tile n - 1's P V, behind tile n's S
            flash6_wgmma_commit();
            turns.hand_on(false);
            flash7_wgmma_wait1(); // S is in; P V may still run: nothing below touches O or P until wait0
            if (n == n_last) { flash6_mask(s, n, row0, t, T); }
            flash6_softmax(s, row_max, row_sum, corr, scale_log2);
            flash6_wgmma_wait0();
            release(n - 1);
            flash6_rescale<kHeadDim>(o, corr);
            flash6_pack_p(p, s);
        }
        turns.take(); // the last tile's P V
        flash6_wgmma_fence();
        flash6_issue_pv<kHeadDim>(o, p, sV(n_last));
        flash6_wgmma_commit();
        turns.hand_on(true);
        flash6_wgmma_wait0();
        release(n_last);
        flash6_store<kHeadDim>(o, row_max, row_sum, out, lse, w.b, w.h, H, T, row0, t, scale_log2);
    }
#endif
}

template <int kHeadDim>
static void flash7_attention_forward_hd(floatX* out, float* lse, AttnRows q, AttnRows k, AttnRows v, int B, int T,
                                        int H, int Hkv, float scale) {
    Flash6Maps maps;
    flash6_maps(&maps, q, k, v, B, T, H, Hkv, kHeadDim);
    const size_t smem = flash6_forward_smem_bytes(kHeadDim, Flash7Config<kHeadDim>::kStages);
    static bool smem_opted_in = false;
    flash_smem_opt_in(flash7_attention_forward_kernel<kHeadDim>, smem, &smem_opted_in);
    dim3 grid(B * H, (T + FLASH6_BLOCK_M - 1) / FLASH6_BLOCK_M);
    flash7_attention_forward_kernel<kHeadDim><<<grid, FLASH6_THREADS, smem>>>(maps.q, maps.k, maps.v, k.ptr == v.ptr, out, lse, T, H,
                                                                              Hkv, scale * FLASH_LOG2E);
    launchCheck();
}

// ----------------------------------------------------------------------------
// backward versions 6, 7 and 8 (issue 59): sm_90a (dev/cuda/attention_backward.cu's header has their
// predictions). Version 5's decomposition, deterministic the same way (every sum in a fixed order, no
// atomics): the delta kernel, then a dK/dV kernel and a dQ kernel, each in forward version 6's shape:
// 384 threads, a producer warpgroup whose one thread issues the bulk tensor copies into a ring of 2
// stages (3 in version 8) on mbarriers, two consumer warpgroups computing with wgmma from shared memory.
//   dK/dV: a CTA owns 128 keys of one kv head (K and V resident), a consumer 64 of them; the steps
//     walk the g query heads of the group and their 64-row query tiles from the diagonal on (Q and dO
//     streamed). Per step and consumer: S^T = K_c Q^T and dP^T = V_c dO^T (m64n64, both operands
//     K-major), P^T and dS^T in registers, dV += P^T dO and dK += dS^T Q (m64n{hd}, A from registers,
//     dO and Q MN-major: their row-major tiles need no transpose).
//   dQ: a CTA owns 128 query rows of one head (Q and dO resident), a consumer 64; the key tiles of 128
//     stream as in the forward. Per tile: S = Q K^T and dP = dO V^T (m64n128), P and dS in registers,
//     dQ += dS K (K MN-major).
// Version 7 adds forward version 7's ping-pong: the consumers take turns by named barriers
// 1 and 2 to issue each group of wgmma (two turns a step: S^T and dP^T, then dV and dK; S and dP, then
// dQ), so one consumer's exponentials and products run under the other's matmuls; version 8 the
// intra-warpgroup overlap (below). One kernel template of each, kVersion 6, 7 or 8.

#define FLASH6_BWD_BLOCK_M 64 // query rows per step of the dK/dV kernel: S^T and dP^T 32 registers each

// wgmma m64n64k16 with A and B from shared memory, both K-major (S^T = K Q^T over a 64-query tile); d:
// the thread's 32 accumulators; scale_d 0 overwrites them
__device__ __forceinline__ void flash6_wgmma_ss_n64(float* d, uint64_t desc_a, uint64_t desc_b, int scale_d) {
    asm volatile("{ .reg .pred p; setp.ne.b32 p, %34, 0; "
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
                 "%32, %33, p, 1, 1, 0, 0; }"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

// issues d (64 x 64) = A B^T: A a consumer's 64 rows of a 128-row tile at sA (panels FLASH6_PANEL_BYTES
// apart), B a 64-row tile at sB (panels half that apart); hd / 16 wgmma, each a 16-wide slice of both
template <int kHeadDim>
__device__ __forceinline__ void flash6_issue_ss_n64(float* d, uint32_t sA, uint32_t sB) {
    #pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; kk++) {
        const uint32_t at = (kk % 4) * 32;
        flash6_wgmma_ss_n64(d, flash6_desc(sA + (kk / 4) * FLASH6_PANEL_BYTES + at, 16, 1024),
                            flash6_desc(sB + (kk / 4) * (FLASH6_PANEL_BYTES / 2) + at, 16, 1024), kk > 0);
    }
}

// the m64nN accumulators of a thread seen as the mma.sync fragments the trainer's epilogues take
// (accumulator i is fragment [i / 4][i % 4]: the same row and column)
template <int kHeadDim>
__device__ __forceinline__ const float (&flash6_as_frags(const float* acc))[kHeadDim / 8][4] {
    return *reinterpret_cast<const float(*)[kHeadDim / 8][4]>(acc);
}

// a dK/dV consumer's P^T = 2^(S^T scale_log2 - lse) and dS^T = P^T (dP^T - D) in place of S^T and dP^T
// (64 keys from key_c0, this thread's keys key0 and key0 + 8; 64 queries from query0 as columns), each
// query's lse (base 2) and D read from its head's row of lse and delta (L2-resident: 128 floats a step);
// P^T 0 where query < key or query >= T, in the steps that cross the consumer's diagonal or reach past T
__device__ __forceinline__ void flash6_bwd_probs_t(float* pt, float* dst, const float* lse_row, const float* delta_row, int query0,
                                                   int key_c0, int key0, int t, int T, float scale_log2) {
    const bool masked = query0 < key_c0 + 63 || query0 + FLASH6_BWD_BLOCK_M > T;
    #pragma unroll
    for (int j = 0; j < 8; j++) {
        #pragma unroll
        for (int e = 0; e < 2; e++) {
            const int query = query0 + 8 * j + 2 * t + e;
            const float lse2 = query < T ? lse_row[query] * FLASH_LOG2E : 0.0f;
            const float d = query < T ? delta_row[query] : 0.0f;
            #pragma unroll
            for (int r = 0; r < 2; r++) {
                const int i = 4 * j + 2 * r + e, key = key0 + 8 * r;
                const float p = masked && (query < key || query >= T) ? 0.0f : exp2f(fmaf(pt[i], scale_log2, -lse2));
                pt[i] = p;
                dst[i] = p * (dst[i] - d);
            }
        }
    }
}

// a dQ consumer's P = 2^(S scale_log2 - lse) and dS = P (dP - D) in place of S and dP (its thread's two
// rows' lse2 and d; S already -inf where masked)
__device__ __forceinline__ void flash6_bwd_probs(float* p, float* ds, const float* lse2, const float* d, float scale_log2) {
    #pragma unroll
    for (int i = 0; i < 64; i++) {
        const int r = (i % 4) / 2;
        p[i] = exp2f(fmaf(p[i], scale_log2, -lse2[r]));
        ds[i] = p[i] * (ds[i] - d[r]);
    }
}

// a dQ consumer thread's rows row0 and row0 + 8: their lse (base 2) and D, 0 past T
__device__ __forceinline__ void flash6_bwd_row_stats(float* lse2, float* d, const float* lse, const float* delta,
                                                     const Flash6Block& w, int H, int T, int row0) {
    #pragma unroll
    for (int r = 0; r < 2; r++) {
        const int query = row0 + 8 * r;
        const size_t at = ((size_t)w.b * H + w.h) * T + query;
        lse2[r] = query < T ? lse[at] * FLASH_LOG2E : 0.0f;
        d[r] = query < T ? delta[at] : 0.0f;
    }
}

// a dK/dV CTA's work: batch row, kv head, its 128 keys (block n), and its steps: step s is query head
// kvh g + s / per_head, query tile m_first + s % per_head (64 rows), from the diagonal tile on
struct Flash6BwdBlock {
    int b, kvh, g, n_block, m_first, per_head, steps;
    __device__ __forceinline__ int head(int step) const { return kvh * g + step / per_head; }
    __device__ __forceinline__ int query0(int step) const { return (m_first + step % per_head) * FLASH6_BWD_BLOCK_M; }
};
__device__ __forceinline__ Flash6BwdBlock flash6_bwd_block(int T, int H, int Hkv) {
    Flash6BwdBlock w;
    w.b = blockIdx.x / Hkv;
    w.kvh = blockIdx.x % Hkv;
    w.g = H / Hkv;
    w.n_block = blockIdx.y; // key tile 0 has the most steps: the grid's first row starts them all
    w.m_first = w.n_block * FLASH6_BLOCK_N / FLASH6_BWD_BLOCK_M;
    w.per_head = (T + FLASH6_BWD_BLOCK_M - 1) / FLASH6_BWD_BLOCK_M - w.m_first;
    w.steps = w.g * w.per_head;
    return w;
}

// the dK/dV producer's one thread: K and V (128 rows; one copy when kv_same) once on bar->resident, then
// each step's Q and dO tiles (64 rows each) into stage s of the ring at sQdO + s (2 query tiles)
template <int kHeadDim, int kStages>
__device__ __forceinline__ void flash6_produce_dkdv(const CUtensorMap* tq, const CUtensorMap* tdo, const CUtensorMap* tk,
                                                    const CUtensorMap* tv, int kv_same, uint32_t sK, uint32_t sQdO,
                                                    Flash6Barriers<kStages>* bar, const Flash6BwdBlock& w) {
    constexpr uint32_t kKeyTileBytes = (kHeadDim / 64) * FLASH6_PANEL_BYTES, kQueryTileBytes = kKeyTileBytes / 2;
    const uint32_t full_resident = smem_u32(&bar->resident);
    flash6_mbar_expect(full_resident, kv_same ? kKeyTileBytes : 2 * kKeyTileBytes);
    flash6_copy_tile<kHeadDim, 128>(sK, tk, w.kvh * kHeadDim, w.n_block * FLASH6_BLOCK_N, w.b, full_resident);
    if (!kv_same) { flash6_copy_tile<kHeadDim, 128>(sK + kKeyTileBytes, tv, w.kvh * kHeadDim, w.n_block * FLASH6_BLOCK_N, w.b, full_resident); }
    for (int step = 0; step < w.steps; step++) {
        const int stage = step % kStages;
        const uint32_t sQ = sQdO + 2 * stage * kQueryTileBytes, full = smem_u32(&bar->full[stage]);
        if (step >= kStages) { flash6_mbar_wait(smem_u32(&bar->empty[stage]), (step / kStages - 1) & 1); } // step - kStages released
        flash6_mbar_expect(full, 2 * kQueryTileBytes);
        flash6_copy_tile<kHeadDim, FLASH6_BWD_BLOCK_M>(sQ, tq, w.head(step) * kHeadDim, w.query0(step), w.b, full);
        flash6_copy_tile<kHeadDim, FLASH6_BWD_BLOCK_M>(sQ + kQueryTileBytes, tdo, w.head(step) * kHeadDim, w.query0(step), w.b, full);
    }
}

// dynamic shared memory of the dK/dV kernel: 1024 bytes to align, K and V (128 rows), each stage's Q
// and dO (64 rows); of the dQ kernel: 1024, Q and dO (128 rows), each stage's K and V (128 rows)
static size_t flash6_bwd_dkdv_smem_bytes(int hd, int stages) {
    return 1024 + (size_t)(2 * FLASH6_BLOCK_N + 2 * stages * FLASH6_BWD_BLOCK_M) * hd * sizeof(floatX);
}
static size_t flash6_bwd_dq_smem_bytes(int hd, int stages) {
    return 1024 + (size_t)(2 + 2 * stages) * FLASH6_BLOCK_M * hd * sizeof(floatX);
}

// Version 8's rings hold 3 stages, so that a step's operands stay while the next step's scores are
// issued (dK/dV 81 KiB of shared memory, dQ 129 KiB at hd 64); versions 6 and 7 hold 2
#define FLASH8_STAGES 3
template <int kVersion>
struct Flash6BwdConfig {
    static constexpr int kStages = kVersion == 8 ? FLASH8_STAGES : FLASH6_STAGES;
};

// Version 8 adds FlashAttention-3's intra-warpgroup overlap to version 7 (its prediction is in
// dev/cuda/attention_backward.cu's header). In each turn a consumer issues this step's scores (S^T and
// dP^T; the dQ kernel's S and dP) as one wgmma group and the last step's gradients (dV and dK; dQ) as a
// second, waits for the first only (wgmma.wait_group 1), and computes this step's P and dS while the
// second still runs: version 7's arithmetic in version 7's order, only issued earlier. Step 0's scores
// go alone and the last step's gradients after the loop (peeled, as in forward version 7: no branch
// around an issue); every dK/dV consumer computes every step (version 6's skip of a step whose queries
// all precede its keys would put a branch around the issues: P^T is 0 there, 1.5% more dK/dV work at T
// 4096). Head size 64 only: at 128 two steps' registers (dK, dV 128, S^T and dP^T 64, the in-flight
// fragments 32, addresses) pass the 240 a consumer has, and ptxas spilled 216 bytes and serialized the
// wgmma (C7512); version 8 at hd 128 runs version 7.

// a version 8 consumer's steps 0 .. last: step s's scores issued together with step s - 1's gradients,
// step s's P and dS computed while those still run, step 0's scores alone and the last step's
// gradients after the loop. The kernel gives the pieces: wait_full(s) (the step's stage has landed),
// zero() (the score registers, overwritten by the first wgmma), issue_scores(s), issue_grads(s),
// compute(s) (P and dS from the scores), pack() (the fragments of the next gradients) and release(s)
template <class WaitFull, class Zero, class IssueScores, class IssueGrads, class Compute, class Pack, class Release>
__device__ __forceinline__ void flash8_steps(int last, const Flash7Turns& turns, WaitFull wait_full, Zero zero,
                                             IssueScores issue_scores, IssueGrads issue_grads, Compute compute, Pack pack,
                                             Release release) {
    wait_full(0);
    zero();
    turns.take();
    flash6_wgmma_fence();
    issue_scores(0);
    flash6_wgmma_commit();
    turns.hand_on(false);
    flash6_wgmma_wait0();
    compute(0);
    pack();
    for (int s = 1; s <= last; s++) {
        wait_full(s);
        zero();
        turns.take();
        flash6_wgmma_fence();
        issue_scores(s);
        flash6_wgmma_commit();
        issue_grads(s - 1); // behind step s's scores
        flash6_wgmma_commit();
        turns.hand_on(false);
        flash7_wgmma_wait1(); // the scores are in; compute touches neither the gradients' accumulators nor their fragments
        compute(s);
        flash6_wgmma_wait0();
        release(s - 1);
        pack();
    }
    turns.take();
    flash6_wgmma_fence();
    issue_grads(last);
    flash6_wgmma_commit();
    turns.hand_on(true);
    flash6_wgmma_wait0();
    release(last);
}

// a version 6 or 7 consumer's step s in series: the scores, then P and dS, then the gradients, each
// wgmma group waited for before the next piece; version 7 (kTurns) issues each group on its turn, and
// its hand-on after the gradients of step `last` is Flash7Turns' last one. The pieces are flash8_steps'
// (the stage's wait and release stay in the kernel's loop: a dK/dV consumer also skips steps)
template <bool kTurns, class Zero, class IssueScores, class IssueGrads, class Compute, class Pack>
__device__ __forceinline__ void flash7_serial_step(int s, int last, const Flash7Turns& turns, Zero zero,
                                                   IssueScores issue_scores, IssueGrads issue_grads, Compute compute,
                                                   Pack pack) {
    zero();
    if constexpr (kTurns) { turns.take(); }
    flash6_wgmma_fence();
    issue_scores(s);
    flash6_wgmma_commit();
    if constexpr (kTurns) { turns.hand_on(false); }
    flash6_wgmma_wait0();
    compute(s);
    pack();
    if constexpr (kTurns) { turns.take(); }
    flash6_wgmma_fence();
    issue_grads(s);
    flash6_wgmma_commit();
    if constexpr (kTurns) { turns.hand_on(s == last); }
    flash6_wgmma_wait0();
}

// dK, dV, versions 6, 7 and 8 (kVersion). Grid (B * Hkv, ceil(T / 128)), 384 threads, dynamic smem
// flash6_bwd_dkdv_smem_bytes(hd, Flash6BwdConfig<kVersion>::kStages). tq, tdo: Q's and dO's tensor maps in
// boxes of 64 rows; tk, tv: K's and V's in boxes of 128 (kv_same: one tensor). dk, dv, lse, delta as
// flash_attention_backward_dkdv_kernel.
template <int kHeadDim, int kVersion>
__global__ void __launch_bounds__(FLASH6_THREADS, 1)
flash6_attention_backward_dkdv_kernel(const __grid_constant__ CUtensorMap tq, const __grid_constant__ CUtensorMap tdo,
                                      const __grid_constant__ CUtensorMap tk, const __grid_constant__ CUtensorMap tv, int kv_same,
                                      AttnGradDest dk, AttnGradDest dv, const float* lse, const float* delta, int T, int H,
                                      int Hkv, float scale, float scale_log2) {
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
    // not an sm_90a build: flash6_available() keeps the launcher from coming here
#else
    static_assert(kVersion != 8 || kHeadDim == 64, "version 8 at hd 128 is version 7 (the registers)");
    constexpr int kStages = Flash6BwdConfig<kVersion>::kStages;
    constexpr bool kTurns = kVersion >= 7;
    constexpr uint32_t kKeyTileBytes = (kHeadDim / 64) * FLASH6_PANEL_BYTES, kQueryTileBytes = kKeyTileBytes / 2;
    extern __shared__ __align__(16) unsigned char flash_smem[];
    __shared__ __align__(8) Flash6Barriers<kStages> bar;
    const uint32_t raw = smem_u32(flash_smem);
    const uint32_t sK = raw + (1024 - raw % 1024) % 1024; // the swizzle repeats every 1024 bytes
    const uint32_t sV = kv_same ? sK : sK + kKeyTileBytes, sQdO = sK + 2 * kKeyTileBytes;
    auto sQ = [&](int step) { return sQdO + 2 * (step % kStages) * kQueryTileBytes; };         // step's Q
    auto sdO = [&](int step) { return sQ(step) + kQueryTileBytes; };                           // and its dO
    auto release = [&](int step) { flash6_mbar_arrive(smem_u32(&bar.empty[step % kStages])); }; // step's stage
    const Flash6BwdBlock w = flash6_bwd_block(T, H, Hkv);
    const int wg = threadIdx.x / 128;
    flash6_init_barriers(&bar);
    if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 24;");
        if (threadIdx.x == 0) { flash6_produce_dkdv<kHeadDim, kStages>(&tq, &tdo, &tk, &tv, kv_same, sK, sQdO, &bar, w); }
    } else { // a consumer: 64 keys, each warp 16 (keys key0 and key0 + 8 of this thread), the queries as columns
        asm volatile("setmaxnreg.inc.sync.aligned.u32 240;");
        const int c = wg - 1, lane = threadIdx.x % 32, warp = (threadIdx.x % 128) / 32, t = lane % 4;
        const int key_c0 = w.n_block * FLASH6_BLOCK_N + 64 * c, key0 = key_c0 + 16 * warp + lane / 4;
        const uint32_t sKc = sK + 64 * c * 128, sVc = sV + 64 * c * 128; // this consumer's 64 rows of each panel
        const Flash7Turns turns{c}; // version 7: two turns a step, around each group of wgmma; version 8: one
        if constexpr (kTurns) { turns.begin(); }
        float acc_dk[kHeadDim / 2], acc_dv[kHeadDim / 2];
        #pragma unroll
        for (int i = 0; i < kHeadDim / 2; i++) { acc_dk[i] = 0.0f; acc_dv[i] = 0.0f; }
        float pt[32], dst[32];                // (64 keys, 64 queries): S^T then P^T; dP^T then dS^T
        uint32_t p_frag[4][4], ds_frag[4][4]; // the step whose gradients are issued next
        // a step's pieces, as flash8_steps and flash7_serial_step take them
        auto wait_full = [&](int step) { flash6_mbar_wait(smem_u32(&bar.full[step % kStages]), (step / kStages) & 1); };
        auto zero = [&]() {
            #pragma unroll
            for (int i = 0; i < 32; i++) { pt[i] = 0.0f; dst[i] = 0.0f; }
        };
        auto issue_scores = [&](int step) {
            flash6_issue_ss_n64<kHeadDim>(pt, sKc, sQ(step));
            flash6_issue_ss_n64<kHeadDim>(dst, sVc, sdO(step));
        };
        auto issue_grads = [&](int step) {
            flash6_issue_pv<kHeadDim, FLASH6_BWD_BLOCK_M>(acc_dv, p_frag, sdO(step));
            flash6_issue_pv<kHeadDim, FLASH6_BWD_BLOCK_M>(acc_dk, ds_frag, sQ(step));
        };
        auto probs = [&](int step) {
            const size_t stat_row = ((size_t)w.b * H + w.head(step)) * T;
            flash6_bwd_probs_t(pt, dst, lse + stat_row, delta + stat_row, w.query0(step), key_c0, key0, t, T, scale_log2);
        };
        auto pack = [&]() {
            flash6_pack_p<4>(p_frag, pt);
            flash6_pack_p<4>(ds_frag, dst);
        };
        flash6_mbar_wait(smem_u32(&bar.resident), 0);
        if constexpr (kVersion == 8) {
            flash8_steps(w.steps - 1, turns, wait_full, zero, issue_scores, issue_grads, probs, pack, release);
        } else {
            for (int step = 0; step < w.steps; step++) {
                const bool last = step == w.steps - 1;
                // every step's stage is waited for and released, computed or not: the 256 arrivals of a
                // phase must all be for the same step
                wait_full(step);
                if (w.query0(step) + FLASH6_BWD_BLOCK_M - 1 >= key_c0) { // else every query precedes the consumer's keys: P^T = 0
                    flash7_serial_step<kTurns>(step, w.steps - 1, turns, zero, issue_scores, issue_grads, probs, pack);
                } else if constexpr (kTurns) { // both turns, with nothing to issue: the rounds stay paired
                    turns.take();
                    turns.hand_on(false);
                    turns.take();
                    turns.hand_on(last);
                }
                release(step); // this thread is done with the stage
            }
        }
        flash_store_dkdv<kHeadDim>(dk, dv, flash6_as_frags<kHeadDim>(acc_dk), flash6_as_frags<kHeadDim>(acc_dv), w.b, w.kvh, T,
                                   key0, t, scale, kv_same);
    }
#endif
}

// dQ, versions 6, 7 and 8 (kVersion). Grid (B * H, ceil(T / 128)), 384 threads, dynamic smem
// flash6_bwd_dq_smem_bytes(hd, Flash6BwdConfig<kVersion>::kStages). tq, tdo, tk, tv: the tensor maps in
// boxes of 128 rows; it adds dQ = scale * dS K to what the dK/dV kernel wrote where q shares k's storage
// (dq.accumulate). lse, delta as flash_attention_backward_dq_kernel.
template <int kHeadDim, int kVersion>
__global__ void __launch_bounds__(FLASH6_THREADS, 1)
flash6_attention_backward_dq_kernel(const __grid_constant__ CUtensorMap tq, const __grid_constant__ CUtensorMap tdo,
                                    const __grid_constant__ CUtensorMap tk, const __grid_constant__ CUtensorMap tv, int kv_same,
                                    AttnGradDest dq, const float* lse, const float* delta, int T, int H, int Hkv, float scale,
                                    float scale_log2) {
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
    // not an sm_90a build: flash6_available() keeps the launcher from coming here
#else
    static_assert(kVersion != 8 || kHeadDim == 64, "version 8 at hd 128 is version 7 (the registers)");
    constexpr int kStages = Flash6BwdConfig<kVersion>::kStages;
    constexpr bool kTurns = kVersion >= 7;
    constexpr uint32_t kTileBytes = (kHeadDim / 64) * FLASH6_PANEL_BYTES; // 128 rows x kHeadDim
    extern __shared__ __align__(16) unsigned char flash_smem[];
    __shared__ __align__(8) Flash6Barriers<kStages> bar;
    const uint32_t raw = smem_u32(flash_smem);
    const uint32_t sQ = raw + (1024 - raw % 1024) % 1024, sdO = sQ + kTileBytes; // the swizzle repeats every 1024 bytes
    auto sK = [&](int n) { return sQ + kTileBytes * (2 + 2 * (n % kStages)); };           // tile n's K
    auto sV = [&](int n) { return kv_same ? sK(n) : sK(n) + kTileBytes; };               // and its V
    auto release = [&](int n) { flash6_mbar_arrive(smem_u32(&bar.empty[n % kStages])); }; // tile n's stage
    const Flash6Block w = flash6_block(T, H, Hkv);
    const int wg = threadIdx.x / 128;
    flash6_init_barriers(&bar);
    if (wg == 0) {
        flash6_producer<kHeadDim, kStages>(&tq, &tdo, &tk, &tv, kv_same, sQ, &bar, w);
    } else { // a consumer: 64 query rows, each warp 16 (rows row0 and row0 + 8 of this thread)
        asm volatile("setmaxnreg.inc.sync.aligned.u32 240;");
        const int c = wg - 1, lane = threadIdx.x % 32, warp = (threadIdx.x % 128) / 32, t = lane % 4;
        const int row0 = w.m_block * FLASH6_BLOCK_M + 64 * c + 16 * warp + lane / 4;
        const uint32_t sQc = sQ + 64 * c * 128, sdOc = sdO + 64 * c * 128; // this consumer's 64 rows of each panel
        const Flash7Turns turns{c}; // version 7: two turns a tile, around each group of wgmma; version 8: one
        if constexpr (kTurns) { turns.begin(); }
        float lse2[2], d[2]; // this thread's rows' lse (base 2) and D
        flash6_bwd_row_stats(lse2, d, lse, delta, w, H, T, row0);
        float acc_dq[kHeadDim / 2];
        #pragma unroll
        for (int i = 0; i < kHeadDim / 2; i++) { acc_dq[i] = 0.0f; }
        float p[64], ds[64];    // (64 rows, 128 keys): S then P; dP then dS
        uint32_t ds_frag[8][4]; // dS of the tile whose dQ product is issued next
        auto zero = [&]() {
            #pragma unroll
            for (int i = 0; i < 64; i++) { p[i] = 0.0f; ds[i] = 0.0f; }
        };
        auto issue_scores = [&](int n) {
            flash6_issue_qk<kHeadDim>(p, sQc, sK(n));
            flash6_issue_qk<kHeadDim>(ds, sdOc, sV(n));
        };
        auto issue_grads = [&](int n) { flash6_issue_pv<kHeadDim>(acc_dq, ds_frag, sK(n)); };
        auto probs = [&](int n) {
            if (n == w.n_last) { flash6_mask(p, n, row0, t, T); } // -inf: P 0 where key > query or key >= T
            flash6_bwd_probs(p, ds, lse2, d, scale_log2);
        };
        auto pack = [&]() { flash6_pack_p(ds_frag, ds); };
        auto wait_full = [&](int n) { flash6_mbar_wait(smem_u32(&bar.full[n % kStages]), (n / kStages) & 1); };
        flash6_mbar_wait(smem_u32(&bar.resident), 0);
        if constexpr (kVersion == 8) {
            flash8_steps(w.n_last, turns, wait_full, zero, issue_scores, issue_grads, probs, pack, release);
        } else {
            for (int n = 0; n <= w.n_last; n++) {
                wait_full(n);
                flash7_serial_step<kTurns>(n, w.n_last, turns, zero, issue_scores, issue_grads, probs, pack);
                release(n); // this thread is done with the stage
            }
        }
        flash_store_dq<kHeadDim>(dq, flash6_as_frags<kHeadDim>(acc_dq), w.b, w.h, T, row0, t, scale);
    }
#endif
}

// the backward's tensor maps: forward version 6's (boxes of 128 rows: K and V of both kernels, Q of the
// dQ kernel), dO's in boxes of 128 (the dQ kernel) and Q's and dO's in boxes of 64 (the dK/dV kernel)
struct Flash6BwdMaps {
    Flash6Maps m;
    CUtensorMap dout, q64, dout64;
};
static void flash6_bwd_maps(Flash6BwdMaps* maps, const floatX* dout, AttnRows q, AttnRows k, AttnRows v, int B, int T, int H,
                            int Hkv, int hd) {
    flash6_maps(&maps->m, q, k, v, B, T, H, Hkv, hd);
    AttnRows drows;
    drows.ptr = dout;
    drows.stride = H * hd;
    flash6_tensor_map(&maps->dout, drows, B, T, H * hd, 128);
    flash6_tensor_map(&maps->q64, q, B, T, H * hd, FLASH6_BWD_BLOCK_M);
    flash6_tensor_map(&maps->dout64, drows, B, T, H * hd, FLASH6_BWD_BLOCK_M);
}

// versions 6, 7 and 8 (kVersion) of the backward after the delta kernel: dK/dV first, then dQ (which
// adds to dK/dV's write where q shares k's storage)
template <int kHeadDim, int kVersion>
static void flash6_attention_backward_hd(AttnGradDest dq, AttnGradDest dk, AttnGradDest dv, const floatX* dout,
                                         const float* lse, const float* delta, AttnRows q, AttnRows k, AttnRows v,
                                         int B, int T, int H, int Hkv, float scale) {
    Flash6BwdMaps maps;
    flash6_bwd_maps(&maps, dout, q, k, v, B, T, H, Hkv, kHeadDim);
    const int kv_same = k.ptr == v.ptr;
    constexpr int kStages = Flash6BwdConfig<kVersion>::kStages;
    const size_t smem_dkdv = flash6_bwd_dkdv_smem_bytes(kHeadDim, kStages), smem_dq = flash6_bwd_dq_smem_bytes(kHeadDim, kStages);
    static bool dkdv_opted_in = false, dq_opted_in = false;
    flash_smem_opt_in(flash6_attention_backward_dkdv_kernel<kHeadDim, kVersion>, smem_dkdv, &dkdv_opted_in);
    flash_smem_opt_in(flash6_attention_backward_dq_kernel<kHeadDim, kVersion>, smem_dq, &dq_opted_in);
    const int tiles = (T + FLASH6_BLOCK_N - 1) / FLASH6_BLOCK_N; // 128 keys or 128 query rows each
    flash6_attention_backward_dkdv_kernel<kHeadDim, kVersion><<<dim3(B * Hkv, tiles), FLASH6_THREADS, smem_dkdv>>>(
        maps.q64, maps.dout64, maps.m.k, maps.m.v, kv_same, dk, dv, lse, delta, T, H, Hkv, scale, scale * FLASH_LOG2E);
    launchCheck();
    profile_mark(PROF_ATTN_BWD_DKDV);
    flash6_attention_backward_dq_kernel<kHeadDim, kVersion><<<dim3(B * H, tiles), FLASH6_THREADS, smem_dq>>>(
        maps.m.q, maps.dout, maps.m.k, maps.m.v, kv_same, dq, lse, delta, T, H, Hkv, scale, scale * FLASH_LOG2E);
    launchCheck();
    profile_mark(PROF_ATTN_BWD_DQ);
}

#endif // PRECISION_IS_BF16

// ----------------------------------------------------------------------------
// the labs' version dispatch: versions 2, 3, 5, 6, 7 (and the backward's 8) of a direction run here; the trainer's own version
// (FLASH_FORWARD_VERSION, FLASH_BACKWARD_VERSION) and the unfused path run through the trainer's
// launchers (common.h's lab_attention_forward and lab_attention_backward choose)

// forward version `version` of the flash path: out, lse as flash_attention_forward
static void lab_flash_forward(int version, floatX* out, float* lse, AttnRows q, AttnRows k, AttnRows v, const AttnShape* s) {
#if PRECISION_IS_BF16
    if (version == 2) {
        flash_check_forward(q, k, v, s);
        if (s->hd == 64) { flash_attention_forward_hd<64>(out, lse, q, k, v, s->B, s->T, s->H, s->Hkv, s->scale); return; }
        if (s->hd == 128) { flash_attention_forward_hd<128>(out, lse, q, k, v, s->B, s->T, s->H, s->Hkv, s->scale); return; }
    }
    if (version == 5) {
        flash_check_forward(q, k, v, s);
        if (s->hd == 64) { flash5_attention_forward_hd<64>(out, lse, q, k, v, s->B, s->T, s->H, s->Hkv, s->scale); return; }
        if (s->hd == 128) { flash5_attention_forward_hd<128>(out, lse, q, k, v, s->B, s->T, s->H, s->Hkv, s->scale); return; }
    }
    if (version == 6 && flash6_available()) {
        flash_check_forward(q, k, v, s);
        if (s->hd == 64) { flash6_attention_forward_hd<64>(out, lse, q, k, v, s->B, s->T, s->H, s->Hkv, s->scale); return; }
        if (s->hd == 128) { flash6_attention_forward_hd<128>(out, lse, q, k, v, s->B, s->T, s->H, s->Hkv, s->scale); return; }
    }
    if (version == 7 && flash6_available()) {
        flash_check_forward(q, k, v, s);
        if (s->hd == 64) { flash7_attention_forward_hd<64>(out, lse, q, k, v, s->B, s->T, s->H, s->Hkv, s->scale); return; }
        if (s->hd == 128) { flash7_attention_forward_hd<128>(out, lse, q, k, v, s->B, s->T, s->H, s->Hkv, s->scale); return; }
    }
#endif
    // the trainer's own version never comes here (common.h's lab_attention_forward runs it)
    fprintf(stderr, "error: internal: no lab flash forward version %d for head size %d in a %s build\n", version, s->hd,
            PRECISION_NAME);
    exit(EXIT_FAILURE);
}

// backward version `version` of the flash path: dq, dk, dv as flash_attention_backward; delta (B, H, T),
// and version 3's dq_accum (B, T, C) fp32 and sync (flash3_bwd_sync_words) are scratch
static void lab_flash_backward(int version, AttnGradDest dq, AttnGradDest dk, AttnGradDest dv, float* delta,
                               float* dq_accum, unsigned int* sync, const floatX* dout, const floatX* out,
                               const float* lse, AttnRows q, AttnRows k, AttnRows v, const AttnShape* s) {
#if PRECISION_IS_BF16
    if ((version == 2 || version == 3 || version == 5 || (version >= 6 && version <= 8 && flash6_available())) &&
        (s->hd == 64 || s->hd == 128)) {
        flash_check_backward(dq, dk, dv, dout, q, k, v, s);
        if (version == 3) { // one kernel, D folded in
            if (s->hd == 64) {
                flash3_attention_backward_hd<64>(dq, dk, dv, dq_accum, sync, delta, dout, out, lse, q, k, v, s->B, s->T,
                                                 s->H, s->Hkv, s->scale);
            } else {
                flash3_attention_backward_hd<128>(dq, dk, dv, dq_accum, sync, delta, dout, out, lse, q, k, v, s->B, s->T,
                                                  s->H, s->Hkv, s->scale);
            }
            profile_mark(PROF_ATTN_BWD);
            return;
        }
        // versions 2, 5, 6, 7 and 8: the delta kernel, then their dK/dV and dQ kernels
        flash_attention_delta(delta, dout, out, s->B, s->T, s->H, s->hd);
        profile_mark(PROF_ATTN_BWD_DELTA);
        if (version == 2 && s->hd == 64) { flash_attention_backward_hd<64>(dq, dk, dv, dout, lse, delta, q, k, v, s->B, s->T, s->H, s->Hkv, s->scale); }
        else if (version == 2) { flash_attention_backward_hd<128>(dq, dk, dv, dout, lse, delta, q, k, v, s->B, s->T, s->H, s->Hkv, s->scale); }
        else if (version == 5 && s->hd == 64) { flash5_attention_backward_hd<64>(dq, dk, dv, dout, lse, delta, q, k, v, s->B, s->T, s->H, s->Hkv, s->scale); }
        else if (version == 5) { flash5_attention_backward_hd<128>(dq, dk, dv, dout, lse, delta, q, k, v, s->B, s->T, s->H, s->Hkv, s->scale); }
        else if (version == 6 && s->hd == 64) { flash6_attention_backward_hd<64, 6>(dq, dk, dv, dout, lse, delta, q, k, v, s->B, s->T, s->H, s->Hkv, s->scale); }
        else if (version == 6) { flash6_attention_backward_hd<128, 6>(dq, dk, dv, dout, lse, delta, q, k, v, s->B, s->T, s->H, s->Hkv, s->scale); }
        else if (version == 7 && s->hd == 64) { flash6_attention_backward_hd<64, 7>(dq, dk, dv, dout, lse, delta, q, k, v, s->B, s->T, s->H, s->Hkv, s->scale); }
        else if (s->hd == 64) { flash6_attention_backward_hd<64, 8>(dq, dk, dv, dout, lse, delta, q, k, v, s->B, s->T, s->H, s->Hkv, s->scale); }
        else { flash6_attention_backward_hd<128, 7>(dq, dk, dv, dout, lse, delta, q, k, v, s->B, s->T, s->H, s->Hkv, s->scale); } // 7, and 8 at hd 128
        return;
    }
#endif
    // the trainer's own version never comes here (common.h's lab_attention_backward runs it)
    fprintf(stderr, "error: internal: no lab flash backward version %d for head size %d in a %s build\n", version, s->hd,
            PRECISION_NAME);
    exit(EXIT_FAILURE);
}

#endif // DEV_CUDA_ATTENTION_FLASH_VERSIONS_H
