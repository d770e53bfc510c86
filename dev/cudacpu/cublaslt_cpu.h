/*
cublaslt_cpu.h: a reference GEMM behind cuBLASLt's own API (the declarations of CUDA's cublasLt.h),
for the CPU runtime (cuda_cpu.h includes it).

It computes exactly what the descriptors ask, column-major as cuBLAS sees it:
  D (m x n, ldd) = epilogue(alpha * op(A) op(B) + beta * C), summed in double, rounded once to D's type
with strided batches, transposes, CUBLAS_COMPUTE_32F, and the epilogues DEFAULT, BIAS, GELU, GELU_BIAS,
GELU_AUX, GELU_AUX_BIAS (aux = the GELU's input), DGELU, DGELU_BGRAD (D = result * gelu'(aux)), BGRADA,
BGRADB (bias = the sum of op(A)'s rows / op(B)'s columns over k). The GELU is the tanh form.

It refuses what cuBLASLt documents it refuses, with its status codes, so that the trainer's own
fallbacks run: an attribute of the wrong size or value (INVALID_VALUE); inconsistent shapes, a leading
dimension below the rows, batch counts that differ (INVALID_VALUE); a type or compute combination it
has no kernel for, an epilogue aux leading dimension that is not a multiple of 8 or below D's rows, a
pointer or preference alignment below the element size (the heuristic: NOT_SUPPORTED, no algorithm);
and in cublasLtMatmul, a pointer less aligned than the preference promised when the algorithm was
chosen, or a workspace smaller than the algorithm needs (INVALID_VALUE). With CUDA_CPU_LT_NO_EPILOGUES=1
the heuristic has no algorithm for any epilogue (NOT_SUPPORTED), as a cuBLASLt without those kernels
for a shape would: the callers' fallbacks run instead; with =2 it refuses them as INVALID_VALUE.

Several algorithms (the trainer's --lt_tune): by default the heuristic offers one algorithm, the
reference above. CUDA_CPU_LT_ALGOS=N (1-8) offers N, each summing in its own order, as a GPU's tiles
and split-k do: algorithm 0 in double (the reference), algorithm v >= 1 in float over v interleaved
partial sums, added in order at the end. All are correct; their results differ in the last bits, so
which one a run chose shows in its numbers (a resume that forgot the choice is caught bit for bit).
Their speeds are modelled, so that a tuner's choice does not hang on this machine's load: algorithm
v's launches cost a modelled 100 ms * (1 + (v + h + e) % N) on top of their host time, seen by the
events (cudaEventElapsedTime) and nothing else; h is a hash of the shape and epilogue, e how many
times a tuner asked for that shape's candidates (a heuristic query for more than one) in this
process. So the fastest differs from shape to shape (the heuristic's first for about one in N), and
from one tuning to the next, as a GPU's timings may: only a saved choice repeats a run's.
CUDA_CPU_LT_BROKEN_ALGO=v makes algorithm v wrong (it sums only the first half of k) and the fastest
(no modelled cost): a tuner must reject it by comparing its results with the heuristic's first.
CUDA_CPU_LT_SLOW_EPILOGUE=gelu_aux_bias|gelu_aux|dgelu|bgradb (with N > 1) adds a modelled 1000 ms to
every launch with that epilogue, as the H200's GELU epilogue ran at 528 TFLOP/s where the same GEMM
without it ran at 805: the plain GEMM plus the trainer's own kernel is then faster, and a tuner that
compares the two must choose the pair.
*/
#ifndef CUDACPU_CUBLASLT_CPU_H
#define CUDACPU_CUBLASLT_CPU_H

namespace cudacpu {

struct LtHandle { int magic = 0x4C54; };
struct LtDesc {
    cublasComputeType_t compute;
    cudaDataType_t scale;
    cublasOperation_t transa = CUBLAS_OP_N, transb = CUBLAS_OP_N;
    cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    const void* bias = nullptr;
    int bias_type = -1; // -1: D's type
    void* aux = nullptr;
    int64_t aux_ld = 0;
};
struct LtLayout {
    cudaDataType_t type;
    uint64_t rows, cols;
    int64_t ld;
    int32_t batch = 1;
    int64_t stride = 0;
    int32_t order = CUBLASLT_ORDER_COL;
};
struct LtPref {
    size_t max_workspace = 0;
    uint32_t reduction_mask = CUBLASLT_REDUCTION_SCHEME_MASK;
    uint32_t align[4] = {256, 256, 256, 256}; // A, B, C, D: cuBLASLt assumes 256 unless told
};
// what the heuristic chose, kept in cublasLtMatmulAlgo_t's data
struct LtAlgo {
    uint32_t magic;
    uint32_t align[4]; // the alignments it was chosen for
    uint64_t workspace;
    uint32_t variant;  // its summation order (CUDA_CPU_LT_ALGOS): 0 the double reference
};
static_assert(sizeof(LtAlgo) <= sizeof(cublasLtMatmulAlgo_t), "LtAlgo must fit cublasLtMatmulAlgo_t");
static const uint32_t kAlgoMagic = 0xC0FFEE42u;

// CUDA_CPU_LT_ALGOS: how many algorithms the heuristic offers (1-8; 1 when unset)
static int lt_algo_count() {
    static const int n = [] {
        const char* e = getenv("CUDA_CPU_LT_ALGOS");
        if (e == nullptr) { return 1; }
        const int v = atoi(e);
        if (v < 1 || v > 8) {
            fprintf(stderr, "cuda-cpu: CUDA_CPU_LT_ALGOS=%s: expected 1 to 8 algorithms\n", e);
            exit(EXIT_FAILURE);
        }
        return v;
    }();
    return n;
}
// a shape's hash (its D's rows and columns, A's size, the epilogue), and how many times a tuner has
// asked for its candidates: the modelled speeds' inputs
static uint64_t lt_shape_hash(const LtDesc* d, const LtLayout* a, const LtLayout* dl) {
    uint64_t h = 1469598103934665603ULL;
    const uint64_t shape[4] = {dl->rows, dl->cols, a->rows * a->cols, (uint64_t)d->epilogue};
    for (uint64_t x : shape) { h = (h ^ x) * 1099511628211ULL; }
    return h;
}
inline std::map<uint64_t, uint64_t> lt_tunings;

// CUDA_CPU_LT_SLOW_EPILOGUE: the epilogue whose launches cost a modelled 1000 ms more (-1 when unset: none)
static int lt_slow_epilogue() {
    static const int slow = [] {
        const char* e = getenv("CUDA_CPU_LT_SLOW_EPILOGUE");
        if (e == nullptr) { return -1; }
        static const struct { const char* name; int epilogue; } names[] = {
            {"gelu_aux_bias", CUBLASLT_EPILOGUE_GELU_AUX_BIAS}, {"gelu_aux", CUBLASLT_EPILOGUE_GELU_AUX},
            {"dgelu", CUBLASLT_EPILOGUE_DGELU}, {"bgradb", CUBLASLT_EPILOGUE_BGRADB}};
        for (const auto& n : names) {
            if (strcmp(e, n.name) == 0) { return n.epilogue; }
        }
        fprintf(stderr, "cuda-cpu: CUDA_CPU_LT_SLOW_EPILOGUE=%s: expected gelu_aux_bias, gelu_aux, dgelu or bgradb\n", e);
        exit(EXIT_FAILURE);
    }();
    return slow;
}

// launches of an algorithm other than the heuristic's first (variant 0) in place, D the same buffer as C,
// as every matmul of the trainer's is (a tuner's timing runs write scratch): what a test reads to see
// that a tuner's choices run, not only that they were made
inline long long lt_calls_not_first = 0;

// CUDA_CPU_LT_BROKEN_ALGO: the algorithm that computes a wrong result (-1 when unset: none)
static int lt_broken_algo() {
    static const int b = [] {
        const char* e = getenv("CUDA_CPU_LT_BROKEN_ALGO");
        return e != nullptr ? atoi(e) : -1;
    }();
    return b;
}

static size_t lt_type_size(int t) { return t == CUDA_R_32F ? 4 : (t == CUDA_R_16BF || t == CUDA_R_16F) ? 2 : 0; }
static double lt_load(const void* p, int type, size_t i) {
    if (type == CUDA_R_32F) { return ((const float*)p)[i]; }
    return (double)__bfloat162float(((const __nv_bfloat16*)p)[i]);
}
static void lt_store(void* p, int type, size_t i, double v) {
    if (type == CUDA_R_32F) { ((float*)p)[i] = (float)v; }
    else { ((__nv_bfloat16*)p)[i] = __float2bfloat16((float)v); } // round to nearest even, as the GPU's epilogue
}
static inline double lt_gelu(double x) {
    const double s = 0.7978845608028654, u = s * (x + 0.044715 * x * x * x);
    return 0.5 * x * (1.0 + tanh(u));
}
static inline double lt_gelu_grad(double x) {
    const double s = 0.7978845608028654, u = s * (x + 0.044715 * x * x * x), t = tanh(u);
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * s * (1.0 + 3.0 * 0.044715 * x * x);
}
static bool lt_uses_aux(cublasLtEpilogue_t e) {
    return e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS || e == CUBLASLT_EPILOGUE_DGELU ||
           e == CUBLASLT_EPILOGUE_DGELU_BGRAD;
}
static bool lt_uses_bias(cublasLtEpilogue_t e) {
    return e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_GELU_BIAS || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS ||
           e == CUBLASLT_EPILOGUE_DGELU_BGRAD || e == CUBLASLT_EPILOGUE_BGRADA || e == CUBLASLT_EPILOGUE_BGRADB;
}
static bool lt_epilogue_known(cublasLtEpilogue_t e) {
    return e == CUBLASLT_EPILOGUE_DEFAULT || e == CUBLASLT_EPILOGUE_GELU || lt_uses_aux(e) || lt_uses_bias(e);
}
static uint32_t lt_ptr_alignment(const void* p) {
    uint32_t a = 256;
    while (a > 1 && ((uintptr_t)p % a) != 0) { a >>= 1; }
    return a;
}

// the checks cuBLASLt makes of a problem, before any algorithm: INVALID_VALUE for what is malformed
static cublasStatus_t lt_validate(const LtDesc* d, const LtLayout* a, const LtLayout* b, const LtLayout* c, const LtLayout* dl) {
    if (!d || !a || !b || !c || !dl) { return CUBLAS_STATUS_INVALID_VALUE; }
    const uint64_t m = dl->rows, n = dl->cols;
    const uint64_t am = d->transa == CUBLAS_OP_N ? a->rows : a->cols, ak = d->transa == CUBLAS_OP_N ? a->cols : a->rows;
    const uint64_t bk = d->transb == CUBLAS_OP_N ? b->rows : b->cols, bn = d->transb == CUBLAS_OP_N ? b->cols : b->rows;
    if (am != m || bn != n || ak != bk || c->rows != m || c->cols != n) { return CUBLAS_STATUS_INVALID_VALUE; }
    for (const LtLayout* l : {a, b, c, dl}) {
        if (l->ld < (int64_t)std::max<uint64_t>(1, l->rows) || l->batch < 1) { return CUBLAS_STATUS_INVALID_VALUE; }
    }
    if (a->batch != dl->batch || b->batch != dl->batch || c->batch != dl->batch) { return CUBLAS_STATUS_INVALID_VALUE; }
    return CUBLAS_STATUS_SUCCESS;
}

// whether cuBLASLt has a kernel for this problem at these alignments (NOT_SUPPORTED when not)
static bool lt_supported(const LtDesc* d, const LtLayout* a, const LtLayout* b, const LtLayout* c, const LtLayout* dl,
                         const uint32_t align[4]) {
    if (d->compute != CUBLAS_COMPUTE_32F || d->scale != CUDA_R_32F) { return false; }
    if (a->order != CUBLASLT_ORDER_COL || b->order != CUBLASLT_ORDER_COL || c->order != CUBLASLT_ORDER_COL ||
        dl->order != CUBLASLT_ORDER_COL) { return false; }
    if (a->type != b->type || c->type != dl->type) { return false; }
    if (a->type == CUDA_R_32F && dl->type != CUDA_R_32F) { return false; }
    if (a->type != CUDA_R_32F && a->type != CUDA_R_16BF) { return false; }
    if (dl->type != CUDA_R_32F && dl->type != a->type) { return false; }
    if (!lt_epilogue_known(d->epilogue)) { return false; }
    const size_t es[4] = {lt_type_size(a->type), lt_type_size(b->type), lt_type_size(c->type), lt_type_size(dl->type)};
    for (int i = 0; i < 4; i++) {
        if (align[i] < es[i]) { return false; }
    }
    if (lt_uses_bias(d->epilogue)) {
        const int bt = d->bias_type >= 0 ? d->bias_type : dl->type;
        if (bt != dl->type && bt != a->type) { return false; }
        // cublasLt.h: a bias gradient's elements are "the same type as the output elements (Ctype)"
        const bool grad = d->epilogue == CUBLASLT_EPILOGUE_DGELU_BGRAD || d->epilogue == CUBLASLT_EPILOGUE_BGRADA ||
                          d->epilogue == CUBLASLT_EPILOGUE_BGRADB;
        if (grad && bt != dl->type) { return false; }
        if (d->bias == nullptr || lt_ptr_alignment(d->bias) < lt_type_size(bt)) { return false; }
    }
    if (lt_uses_aux(d->epilogue)) {
        // cublasLt.h: the GELU input's leading dimension "must be divisible by 8 and be no less than
        // the number of rows in the output matrix"
        if (d->aux == nullptr || d->aux_ld % 8 != 0 || d->aux_ld < (int64_t)dl->rows) { return false; }
        if (lt_ptr_alignment(d->aux) < lt_type_size(dl->type)) { return false; }
        if (dl->batch > 1) { return false; } // no aux batch stride is set by this API's users
    }
    return true;
}

// sum of a[p] * b[p] in double (each product exact: two floats' 24-bit significands fit in 53 bits).
// Twelve partial sums in three four-lane vectors: the loop is bound by the adds' latency, not by their
// count. An AVX2 clone where the processor has it (chosen at load time), plain x86-64 otherwise.
typedef float lt_f4 __attribute__((vector_size(16)));
typedef double lt_d4 __attribute__((vector_size(32)));
#define LT_QUAD_PRODUCT(off)                                                             \
    ({                                                                                   \
        lt_f4 x_, y_;                                                                    \
        memcpy(&x_, a + p + (off), sizeof x_);                                           \
        memcpy(&y_, b + p + (off), sizeof y_);                                           \
        __builtin_convertvector(x_, lt_d4) * __builtin_convertvector(y_, lt_d4);         \
    })
__attribute__((target_clones("avx2", "default"))) static double lt_dot(const float* a, const float* b, int64_t k) {
    lt_d4 s0 = {0.0, 0.0, 0.0, 0.0}, s1 = s0, s2 = s0;
    int64_t p = 0;
    for (; p + 12 <= k; p += 12) {
        s0 += LT_QUAD_PRODUCT(0);
        s1 += LT_QUAD_PRODUCT(4);
        s2 += LT_QUAD_PRODUCT(8);
    }
    for (; p + 4 <= k; p += 4) { s0 += LT_QUAD_PRODUCT(0); }
    const lt_d4 s = (s0 + s1) + s2;
    double r = (s[0] + s[1]) + (s[2] + s[3]);
    for (; p < k; p++) { r += (double)a[p] * (double)b[p]; }
    return r;
}
#undef LT_QUAD_PRODUCT

// algorithm v >= 1's order: float sums over v interleaved parts (element p into part p % v), added in order
static double lt_dot_variant(const float* a, const float* b, int64_t k, uint32_t variant) {
    float part[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    for (int64_t p = 0; p < k; p++) { part[p % variant] += a[p] * b[p]; }
    float s = 0.0f;
    for (uint32_t i = 0; i < variant; i++) { s += part[i]; }
    return (double)s;
}

static void lt_compute(LtDesc d, LtLayout a, LtLayout b, LtLayout c, LtLayout dl, float alpha, float beta,
                       const void* A, const void* B, const void* C, void* D, uint32_t variant) {
    const int64_t m = (int64_t)dl.rows, n = (int64_t)dl.cols;
    const int64_t k = d.transa == CUBLAS_OP_N ? (int64_t)a.cols : (int64_t)a.rows;
    const int64_t k_summed = (int)variant == lt_broken_algo() ? k / 2 : k; // the broken algorithm's error
    const int bias_type = d.bias_type >= 0 ? d.bias_type : dl.type;
    const cublasLtEpilogue_t e = d.epilogue;
    std::vector<double> bgrad;
    if (e == CUBLASLT_EPILOGUE_DGELU_BGRAD || e == CUBLASLT_EPILOGUE_BGRADA) { bgrad.assign((size_t)m, 0.0); }
    if (e == CUBLASLT_EPILOGUE_BGRADB) { bgrad.assign((size_t)n, 0.0); }
    // op(A) as (m, k) and op(B)^T as (n, k) row-major floats: the dot products then run over
    // contiguous memory, summed in double
    std::vector<float> Af((size_t)m * k), Bf((size_t)n * k);
    for (int32_t bi = 0; bi < dl.batch; bi++) {
        const size_t oa = (size_t)(bi * a.stride), ob = (size_t)(bi * b.stride), oc = (size_t)(bi * c.stride), od = (size_t)(bi * dl.stride);
        for (int64_t i = 0; i < m; i++) {
            for (int64_t p = 0; p < k; p++) {
                const size_t ia = d.transa == CUBLAS_OP_N ? (size_t)(i + p * a.ld) : (size_t)(p + i * a.ld);
                Af[(size_t)(i * k + p)] = (float)lt_load(A, a.type, oa + ia);
            }
        }
        for (int64_t j = 0; j < n; j++) {
            for (int64_t p = 0; p < k; p++) {
                const size_t ib = d.transb == CUBLAS_OP_N ? (size_t)(p + j * b.ld) : (size_t)(j + p * b.ld);
                Bf[(size_t)(j * k + p)] = (float)lt_load(B, b.type, ob + ib);
            }
        }
        for (int64_t j = 0; j < n; j++) {
            const float* bj = &Bf[(size_t)(j * k)];
            for (int64_t i = 0; i < m; i++) {
                const float* ai = &Af[(size_t)(i * k)];
                const double dot = variant == 0 ? lt_dot(ai, bj, k_summed) : lt_dot_variant(ai, bj, k_summed, variant);
                double r = (double)alpha * dot;
                if (beta != 0.0f) { r += (double)beta * lt_load(C, c.type, oc + (size_t)(i + j * c.ld)); }
                if (e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_GELU_BIAS || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS) {
                    r += lt_load(d.bias, bias_type, (size_t)i);
                }
                const size_t iaux = (size_t)(i + j * d.aux_ld);
                if (e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS) {
                    lt_store(d.aux, dl.type, iaux, r);
                    r = lt_gelu(lt_load(d.aux, dl.type, iaux)); // the GELU of the stored (rounded) input
                } else if (e == CUBLASLT_EPILOGUE_GELU || e == CUBLASLT_EPILOGUE_GELU_BIAS) {
                    r = lt_gelu(r);
                } else if (e == CUBLASLT_EPILOGUE_DGELU || e == CUBLASLT_EPILOGUE_DGELU_BGRAD) {
                    r *= lt_gelu_grad(lt_load(d.aux, dl.type, iaux));
                    if (e == CUBLASLT_EPILOGUE_DGELU_BGRAD) { bgrad[(size_t)i] += r; }
                }
                lt_store(D, dl.type, od + (size_t)(i + j * dl.ld), r);
            }
        }
        if (e == CUBLASLT_EPILOGUE_BGRADA) {
            for (int64_t i = 0; i < m; i++) {
                for (int64_t p = 0; p < k; p++) {
                    const size_t ia = d.transa == CUBLAS_OP_N ? (size_t)(i + p * a.ld) : (size_t)(p + i * a.ld);
                    bgrad[(size_t)i] += lt_load(A, a.type, oa + ia);
                }
            }
        }
        if (e == CUBLASLT_EPILOGUE_BGRADB) {
            for (int64_t j = 0; j < n; j++) {
                for (int64_t p = 0; p < k; p++) {
                    const size_t ib = d.transb == CUBLAS_OP_N ? (size_t)(p + j * b.ld) : (size_t)(j + p * b.ld);
                    bgrad[(size_t)j] += lt_load(B, b.type, ob + ib);
                }
            }
        }
    }
    for (size_t i = 0; i < bgrad.size(); i++) { lt_store((void*)d.bias, bias_type, i, bgrad[i]); }
}

// an attribute's value of exactly the documented size
template <class T>
static cublasStatus_t lt_set(T* field, const void* buf, size_t size) {
    if (buf == nullptr || size != sizeof(T)) { return CUBLAS_STATUS_INVALID_VALUE; }
    memcpy(field, buf, sizeof(T));
    return CUBLAS_STATUS_SUCCESS;
}

} // namespace cudacpu

extern "C" {

// the library's version, as cublasLt.h gives it: the reference stands in for the cuBLASLt it compiled against
size_t cublasLtGetVersion(void) { return (size_t)CUBLAS_VERSION; }

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
    if (handle == nullptr) { return CUBLAS_STATUS_INVALID_VALUE; }
    *handle = reinterpret_cast<cublasLtHandle_t>(new cudacpu::LtHandle());
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
    delete reinterpret_cast<cudacpu::LtHandle*>(handle);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute, cudaDataType_t scale) {
    if (desc == nullptr) { return CUBLAS_STATUS_INVALID_VALUE; }
    cudacpu::LtDesc* d = new cudacpu::LtDesc();
    d->compute = compute;
    d->scale = scale;
    *desc = reinterpret_cast<cublasLtMatmulDesc_t>(d);
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
    delete reinterpret_cast<cudacpu::LtDesc*>(desc);
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const void* buf,
                                              size_t size) {
    cudacpu::LtDesc* d = reinterpret_cast<cudacpu::LtDesc*>(desc);
    if (d == nullptr) { return CUBLAS_STATUS_INVALID_VALUE; }
    switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA: return cudacpu::lt_set((int32_t*)&d->transa, buf, size);
    case CUBLASLT_MATMUL_DESC_TRANSB: return cudacpu::lt_set((int32_t*)&d->transb, buf, size);
    case CUBLASLT_MATMUL_DESC_EPILOGUE: return cudacpu::lt_set((uint32_t*)&d->epilogue, buf, size);
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: return cudacpu::lt_set(&d->bias, buf, size);
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: return cudacpu::lt_set((int32_t*)&d->bias_type, buf, size);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: return cudacpu::lt_set(&d->aux, buf, size);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: return cudacpu::lt_set(&d->aux_ld, buf, size);
    default: return CUBLAS_STATUS_INVALID_VALUE; // an attribute this reference does not know: not silently ignored
    }
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type, uint64_t rows, uint64_t cols,
                                          int64_t ld) {
    if (layout == nullptr || cudacpu::lt_type_size(type) == 0) { return CUBLAS_STATUS_INVALID_VALUE; }
    cudacpu::LtLayout* l = new cudacpu::LtLayout();
    l->type = type;
    l->rows = rows;
    l->cols = cols;
    l->ld = ld;
    *layout = reinterpret_cast<cublasLtMatrixLayout_t>(l);
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
    delete reinterpret_cast<cudacpu::LtLayout*>(layout);
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr,
                                                const void* buf, size_t size) {
    cudacpu::LtLayout* l = reinterpret_cast<cudacpu::LtLayout*>(layout);
    if (l == nullptr) { return CUBLAS_STATUS_INVALID_VALUE; }
    switch (attr) {
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: return cudacpu::lt_set(&l->batch, buf, size);
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET: return cudacpu::lt_set(&l->stride, buf, size);
    case CUBLASLT_MATRIX_LAYOUT_ORDER: return cudacpu::lt_set(&l->order, buf, size);
    default: return CUBLAS_STATUS_INVALID_VALUE;
    }
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
    if (pref == nullptr) { return CUBLAS_STATUS_INVALID_VALUE; }
    *pref = reinterpret_cast<cublasLtMatmulPreference_t>(new cudacpu::LtPref());
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
    delete reinterpret_cast<cudacpu::LtPref*>(pref);
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void* buf, size_t size) {
    cudacpu::LtPref* p = reinterpret_cast<cudacpu::LtPref*>(pref);
    if (p == nullptr) { return CUBLAS_STATUS_INVALID_VALUE; }
    switch (attr) {
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES: return cudacpu::lt_set((uint64_t*)&p->max_workspace, buf, size);
    case CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK: return cudacpu::lt_set(&p->reduction_mask, buf, size);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES: return cudacpu::lt_set(&p->align[0], buf, size);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES: return cudacpu::lt_set(&p->align[1], buf, size);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES: return cudacpu::lt_set(&p->align[2], buf, size);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES: return cudacpu::lt_set(&p->align[3], buf, size);
    default: return CUBLAS_STATUS_INVALID_VALUE;
    }
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a,
                                              cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                              cublasLtMatmulPreference_t pref, int requested,
                                              cublasLtMatmulHeuristicResult_t results[], int* returned) {
    using namespace cudacpu;
    if (handle == nullptr || pref == nullptr || results == nullptr || returned == nullptr || requested < 1) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    *returned = 0;
    const LtDesc* od = reinterpret_cast<const LtDesc*>(op);
    const LtLayout *la = reinterpret_cast<const LtLayout*>(a), *lb = reinterpret_cast<const LtLayout*>(b);
    const LtLayout *lc = reinterpret_cast<const LtLayout*>(c), *ld = reinterpret_cast<const LtLayout*>(d);
    const LtPref* p = reinterpret_cast<const LtPref*>(pref);
    const cublasStatus_t v = lt_validate(od, la, lb, lc, ld);
    if (v != CUBLAS_STATUS_SUCCESS) { return v; }
    if (!lt_supported(od, la, lb, lc, ld, p->align)) { return CUBLAS_STATUS_NOT_SUPPORTED; }
    // CUDA_CPU_LT_NO_EPILOGUES=1: no algorithm for any epilogue (a cuBLASLt without kernels for them at
    // this shape), so that every caller's own fallback runs (the trainer's add_bias, GELU and bias kernels);
    // =2: the same epilogues refused as INVALID_VALUE (a cuBLASLt that rejects the descriptor instead)
    static const int no_epilogues = [] {
        const char* e = getenv("CUDA_CPU_LT_NO_EPILOGUES");
        return e != nullptr && (e[0] == '1' || e[0] == '2') ? e[0] - '0' : 0;
    }();
    if (no_epilogues && od->epilogue != CUBLASLT_EPILOGUE_DEFAULT) {
        return no_epilogues == 2 ? CUBLAS_STATUS_INVALID_VALUE : CUBLAS_STATUS_NOT_SUPPORTED;
    }
    const int offered = std::min(requested, lt_algo_count());
    if (requested > 1) { lt_tunings[lt_shape_hash(od, la, ld)]++; }
    for (int v = 0; v < offered; v++) {
        memset(&results[v], 0, sizeof(results[v]));
        LtAlgo algo{kAlgoMagic, {p->align[0], p->align[1], p->align[2], p->align[3]}, 0, (uint32_t)v};
        memcpy(&results[v].algo, &algo, sizeof algo);
        results[v].workspaceSize = 0;
        results[v].state = CUBLAS_STATUS_SUCCESS;
        results[v].wavesCount = 1.0f;
    }
    *returned = offered;
    return CUBLAS_STATUS_SUCCESS;
}

// an algorithm as the labs print it: id = its summation order (0 the reference GEMM), no tile, no
// stages, no split-k
cublasStatus_t cublasLtMatmulAlgoConfigGetAttribute(const cublasLtMatmulAlgo_t* algo, cublasLtMatmulAlgoConfigAttributes_t attr,
                                                    void* buf, size_t size, size_t* written) {
    using namespace cudacpu;
    LtAlgo a;
    if (algo == nullptr) { return CUBLAS_STATUS_INVALID_VALUE; }
    memcpy(&a, algo, sizeof a);
    if (a.magic != kAlgoMagic) { return CUBLAS_STATUS_INVALID_VALUE; }
    int32_t value;
    switch (attr) {
    case CUBLASLT_ALGO_CONFIG_ID: value = (int32_t)a.variant; break;
    case CUBLASLT_ALGO_CONFIG_TILE_ID: value = 0; break; // CUBLASLT_MATMUL_TILE_UNDEFINED
    case CUBLASLT_ALGO_CONFIG_SPLITK_NUM: value = 1; break;
    case CUBLASLT_ALGO_CONFIG_STAGES_ID: value = 0; break; // CUBLASLT_MATMUL_STAGES_UNDEFINED
    default: return CUBLAS_STATUS_INVALID_VALUE;
    }
    if (written != nullptr) { *written = sizeof value; }
    if (buf == nullptr || size != sizeof value) { return CUBLAS_STATUS_INVALID_VALUE; }
    memcpy(buf, &value, sizeof value);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t op, const void* alpha, const void* A,
                              cublasLtMatrixLayout_t a, const void* B, cublasLtMatrixLayout_t b, const void* beta, const void* C,
                              cublasLtMatrixLayout_t c, void* D, cublasLtMatrixLayout_t d, const cublasLtMatmulAlgo_t* algo,
                              void* workspace, size_t workspace_bytes, cudaStream_t stream) {
    using namespace cudacpu;
    if (handle == nullptr || alpha == nullptr || beta == nullptr || algo == nullptr) { return CUBLAS_STATUS_INVALID_VALUE; }
    const LtDesc* od = reinterpret_cast<const LtDesc*>(op);
    const LtLayout *la = reinterpret_cast<const LtLayout*>(a), *lb = reinterpret_cast<const LtLayout*>(b);
    const LtLayout *lc = reinterpret_cast<const LtLayout*>(c), *ld = reinterpret_cast<const LtLayout*>(d);
    const cublasStatus_t v = lt_validate(od, la, lb, lc, ld);
    if (v != CUBLAS_STATUS_SUCCESS) { return v; }
    LtAlgo chosen;
    memcpy(&chosen, algo, sizeof chosen);
    if (chosen.magic != kAlgoMagic) { return CUBLAS_STATUS_INVALID_VALUE; } // not from the heuristic
    if (workspace_bytes < chosen.workspace || (chosen.workspace > 0 && workspace == nullptr)) { return CUBLAS_STATUS_INVALID_VALUE; }
    // the algorithm was chosen for the alignments the preference promised: the pointers must keep them
    const void* ptrs[4] = {A, B, C, D};
    for (int i = 0; i < 4; i++) {
        if (lt_ptr_alignment(ptrs[i]) < chosen.align[i]) { return CUBLAS_STATUS_INVALID_VALUE; }
    }
    if (!lt_supported(od, la, lb, lc, ld, chosen.align)) { return CUBLAS_STATUS_NOT_SUPPORTED; }
    if (C != D && memcmp(lc, ld, sizeof *lc) != 0) { return CUBLAS_STATUS_NOT_SUPPORTED; }
    // every matrix inside device memory (cuBLASLt would read or write out of bounds)
    const LtLayout* lays[4] = {la, lb, lc, ld};
    for (int i = 0; i < 4; i++) {
        const LtLayout* l = lays[i];
        const size_t span = ((size_t)(l->batch - 1) * (size_t)l->stride + (size_t)(l->cols - 1) * (size_t)l->ld + l->rows) *
                            lt_type_size(l->type);
        if (l->rows * l->cols > 0 && !is_device(ptrs[i], span)) {
            fprintf(stderr, "cuda-cpu: cublasLtMatmul: matrix %c (%llu x %llu, ld %lld, batch %d) is not inside one device allocation\n",
                    "ABCD"[i], (unsigned long long)l->rows, (unsigned long long)l->cols, (long long)l->ld, l->batch);
            return CUBLAS_STATUS_INVALID_VALUE;
        }
    }
    // the bias vector too: D's rows long (BIAS, BGRADA, DGELU_BGRAD; read or written), D's columns (BGRADB)
    if (lt_uses_bias(od->epilogue)) {
        const int bt = od->bias_type >= 0 ? od->bias_type : ld->type;
        const uint64_t len = od->epilogue == CUBLASLT_EPILOGUE_BGRADB ? ld->cols : ld->rows;
        if (len > 0 && !is_device(od->bias, (size_t)len * lt_type_size(bt))) {
            fprintf(stderr, "cuda-cpu: cublasLtMatmul: the bias vector (%llu elements) is not inside one device allocation\n",
                    (unsigned long long)len);
            return CUBLAS_STATUS_INVALID_VALUE;
        }
    }
    if ((int)chosen.variant >= lt_algo_count()) { return CUBLAS_STATUS_INVALID_VALUE; } // not one the heuristic offers
    const float al = *(const float*)alpha, be = *(const float*)beta;
    const LtDesc dd = *od;
    const LtLayout A_ = *la, B_ = *lb, C_ = *lc, D_ = *ld;
    // the modelled speed (see the header): the events between which this runs see it
    double extra_ms = 0.0;
    if (lt_algo_count() > 1 && (int)chosen.variant != lt_broken_algo()) {
        const uint64_t h = lt_shape_hash(od, la, ld), e = lt_tunings[h], n = (uint64_t)lt_algo_count();
        extra_ms = 100.0 * (double)(1 + (chosen.variant + h % n + e % n) % n);
        if ((int)od->epilogue == lt_slow_epilogue()) { extra_ms += 1000.0; }
    }
    const uint32_t variant = chosen.variant;
    if (variant != 0 && C == D) { lt_calls_not_first++; }
    enqueue_on(stream_of(stream), [=]() {
        const double t0 = profiling() ? now_seconds() : 0.0;
        modelled_ms += extra_ms;
        lt_compute(dd, A_, B_, C_, D_, al, be, A, B, C, D, variant);
        if (profiling()) { profile_add("cublasLtMatmul (reference GEMM)", now_seconds() - t0, 0); }
    });
    return CUBLAS_STATUS_SUCCESS;
}

} // extern "C"

#endif // CUDACPU_CUBLASLT_CPU_H
