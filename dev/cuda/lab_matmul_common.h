/*
lab_matmul_common.h: what the classifier and matmul_gelu labs (dev/cuda/classifier.cu,
dev/cuda/matmul_gelu.cu) add to dev/cuda/lab_common.h: the trainer included under TESTING (its main
dropped, so a lab's newest version is the trainer's own code), the float64 matmuls of their CPU side
(the rest of it is dev/cpu/kernels_cpu.h), a verdict for bounds that are not a tensor's rel_err,
and which algorithm (or none) cuBLASLt gave matmul_lt. Both labs are BF16-only: an FP32 build
compiles and prints one SKIP line.
*/
#ifndef LAB_MATMUL_COMMON_H
#define LAB_MATMUL_COMMON_H

#define TESTING
#include "../../train_gpt2.cu"
#include "../cpu/kernels_cpu.h"
#include "lab_common.h"

// LAB_SUFFIX: lab_basics.h (through lab_common.h)

// 1 in a BF16 build, else one SKIP line and 0: the tolerances, the bench's byte counts and the
// classifier's version 1 are bf16's
static int lab_bf16_or_skip(const LabArgs* a) {
    if (PRECISION_IS_BF16) { return 1; }
    printf("SKIP %s: a BF16-only lab, this is an FP32 build (HINT: make labs, without PRECISION=FP32)\n", a->name);
    return 0;
}

// folds a bound's worst |error| / bound (NaN: a non-finite output) into the verdict, as lab_compare
// folds a rel_err / tolerance
static void lab_verdict_add(LabVerdict* v, double ratio, const std::string& what) {
    if (isnan(ratio) || !(ratio <= 1.0)) { v->fail += "; " + what; }
    if (isnan(ratio) || (!isnan(v->worst_ratio) && ratio > v->worst_ratio)) {
        v->worst_ratio = ratio;
        v->worst = what;
    }
}

static std::vector<unsigned char> lab_f32_bytes(const std::vector<float>& f) {
    std::vector<unsigned char> h(f.size() * sizeof(float));
    if (!f.empty()) { memcpy(h.data(), f.data(), h.size()); }
    return h;
}

// n values N(0, std), rounded to floatX (h->f the values the CPU side reads, h->x the bytes uploaded)
static void lab_host_x_normal(LabHostX* h, size_t n, double std, unsigned long long* rng) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; i++) { v[i] = (float)(std * lab_normal(rng)); }
    lab_host_x_from(h, v);
}

// ----------------------------------------------------------------------------
// float64 matmuls of the CPU side (row-major; each result summed in double, rounded once to float;
// OpenMP over output rows)

// out (N, OC) = inp (N, C) @ w (OC, C)^T [+ bias (OC)]
static void lab_matmul_nt(float* out, const float* inp, const float* w, const float* bias, int N, int C, int OC) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float* x = inp + (size_t)n * C;
        for (int o = 0; o < OC; o++) {
            const float* wr = w + (size_t)o * C;
            double s = bias != NULL ? (double)bias[o] : 0.0;
            for (int c = 0; c < C; c++) { s += (double)x[c] * wr[c]; }
            out[(size_t)n * OC + o] = (float)s;
        }
    }
}

// out (N, C) = dout (N, K; row stride ld_dout) @ w (K, C): the first K rows of w
static void lab_matmul_nn(float* out, const float* dout, int ld_dout, const float* w, int N, int K, int C) {
#pragma omp parallel
    {
        std::vector<double> acc(C);
#pragma omp for schedule(static)
        for (int n = 0; n < N; n++) {
            std::fill(acc.begin(), acc.end(), 0.0);
            for (int k = 0; k < K; k++) {
                const double d = dout[(size_t)n * ld_dout + k];
                if (d == 0.0) { continue; }
                const float* wr = w + (size_t)k * C;
                for (int c = 0; c < C; c++) { acc[c] += d * wr[c]; }
            }
            for (int c = 0; c < C; c++) { out[(size_t)n * C + c] = (float)acc[c]; }
        }
    }
}

// out (K, C) = init (K, C; may be NULL) + dout (N, K; row stride ld_dout)^T @ inp (N, C)
static void lab_matmul_tn(float* out, const float* init, const float* dout, int ld_dout, const float* inp, int N, int K,
                          int C) {
#pragma omp parallel
    {
        std::vector<double> acc(C);
#pragma omp for schedule(static)
        for (int k = 0; k < K; k++) {
            for (int c = 0; c < C; c++) { acc[c] = init != NULL ? (double)init[(size_t)k * C + c] : 0.0; }
            for (int n = 0; n < N; n++) {
                const double d = dout[(size_t)n * ld_dout + k];
                if (d == 0.0) { continue; }
                const float* x = inp + (size_t)n * C;
                for (int c = 0; c < C; c++) { acc[c] += d * x[c]; }
            }
            for (int c = 0; c < C; c++) { out[(size_t)k * C + c] = (float)acc[c]; }
        }
    }
}

// ----------------------------------------------------------------------------
// cuBLASLt: which algorithm (or none) matmul_lt chose for a configuration. matmul_lt remembers every
// heuristic answer in g_lt_cache, keyed by its `fields` (0 m, 1 n, 2 k, 3 transA, 4 transB, 12 D's type,
// 13 bias != NULL, 17 act; the alignments after them are not matched here); found = 0 means no
// algorithm: the caller's fallback ran. Returns -1 when matmul_lt never saw the configuration.

static int lab_lt_lookup(int m, int n, int k, int transA, int transB, cudaDataType d_type, int has_bias,
                         LtActivation act, std::string* algo) {
    int found = -1;
    if (algo != NULL) { *algo = "no algorithm"; }
    for (size_t i = 0; i < g_lt_cache.size(); i++) {
        const long long* f = g_lt_cache[i].first.v;
        if (f[0] != m || f[1] != n || f[2] != k || f[3] != transA || f[4] != transB || f[12] != (long long)d_type ||
            f[13] != has_bias || f[17] != (long long)act) {
            continue;
        }
        found = g_lt_cache[i].second.found;
        if (found && algo != NULL) {
            const cublasLtMatmulAlgo_t* al = &g_lt_cache[i].second.algo;
            int32_t id = -1, splitk = 1;
            uint32_t tile = 0, stages = 0;
            size_t written = 0;
            cublasLtMatmulAlgoConfigGetAttribute(al, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof(id), &written);
            cublasLtMatmulAlgoConfigGetAttribute(al, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof(tile), &written);
            cublasLtMatmulAlgoConfigGetAttribute(al, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof(splitk), &written);
            cublasLtMatmulAlgoConfigGetAttribute(al, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof(stages), &written);
            *algo = "algo " + std::to_string(id) + " tile " + std::to_string(tile) + " stages " + std::to_string(stages) +
                    " splitK " + std::to_string(splitk);
        }
    }
    return found;
}

#endif // LAB_MATMUL_COMMON_H
