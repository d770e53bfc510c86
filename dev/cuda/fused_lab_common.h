/*
fused_lab_common.h: what the labs of the trainer's fused non-attention ops share
(dev/cuda/classifier.cu, dev/cuda/matmul_gelu.cu): the command line, device buffers with poisoned
guards, random inputs, the comparisons and the timer. As in attention_lab_common.h, train_gpt2.cu is
included under TESTING (its main dropped), so a lab's newest version is the trainer's own code; the
CPU side is dev/cuda/kernels_cpu.h (float64 math, rounded once to float) plus the float64 matmuls a
lab needs. These labs are BF16-only: an FP32 build compiles, and prints one SKIP line.
*/
#ifndef FUSED_LAB_COMMON_H
#define FUSED_LAB_COMMON_H

#define TESTING
#include "../../train_gpt2.cu"
#include "kernels_cpu.h"

#include <string>

#if PRECISION_IS_BF16
#define LAB_SUFFIX ""
#else
#define LAB_SUFFIX "_fp32"
#endif

// ----------------------------------------------------------------------------
// command line: <lab> [version] [--seed n] [--check] [--bench] [--quick]

typedef struct {
    int version;
    const char* what; // one line
} LabVersion;

typedef struct {
    const char* name;           // lab_classifier[_fp32]
    const LabVersion* versions; // the lab's table
    int num_versions;
    int version;                // 0: every version
    unsigned long long seed;
    int check, bench, quick;
} LabArgs;

#define LAB_GUARD 1024                 // bytes of 0xFF around each device buffer (see LabBuf)
static size_t g_lab_guard = LAB_GUARD; // 0 with --quick

static void lab_usage(const LabArgs* a, const char* what, const char* check_help, const char* bench_help) {
    printf("Usage: %s [version] [--seed n] [--check] [--bench] [--quick]\n", a->name);
    printf("  %s (BF16 builds; this one: %s)\n", what, PRECISION_NAME);
    printf("  version       one of:");
    for (int i = 0; i < a->num_versions; i++) { printf(" %d", a->versions[i].version); }
    printf(" (default: all of them)\n");
    for (int i = 0; i < a->num_versions; i++) { printf("    %d  %s\n", a->versions[i].version, a->versions[i].what); }
    printf("  --seed n      base seed of the random inputs (default 1337); each trial mixes in its shape\n");
    printf("  --check       %s\n", check_help);
    printf("  --bench       %s\n", bench_help);
    printf("                (with neither --check nor --bench: both)\n");
    printf("  --quick       with --check, for compute-sanitizer runs: a few small shapes, no guard bytes\n");
    printf("Without a CUDA device: one SKIP line, exit 0.\n");
}

// Returns 1 to run, 0 after -h (exit 0); a bad argument: one "error:" line, exit 1.
static int lab_parse_args(LabArgs* a, int argc, char** argv, const char* base_name, const LabVersion* versions,
                          int num_versions, const char* what, const char* check_help, const char* bench_help) {
    static char name[64];
    snprintf(name, sizeof(name), "%s%s", base_name, LAB_SUFFIX);
    a->name = name;
    a->versions = versions;
    a->num_versions = num_versions;
    a->version = 0;
    a->seed = 1337;
    a->check = a->bench = a->quick = 0;
    std::string list;
    for (int k = 0; k < num_versions; k++) { list += " " + std::to_string(versions[k].version); }
    for (int i = 1; i < argc; i++) {
        const char* arg = argv[i];
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) { lab_usage(a, what, check_help, bench_help); return 0; }
        if (strcmp(arg, "--check") == 0) { a->check = 1; continue; }
        if (strcmp(arg, "--bench") == 0) { a->bench = 1; continue; }
        if (strcmp(arg, "--quick") == 0) { a->quick = 1; continue; }
        if (strcmp(arg, "--seed") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "error: %s: --seed needs a value (a non-negative integer)\n", name);
                exit(EXIT_FAILURE);
            }
            const char* val = argv[++i];
            char* end = NULL;
            errno = 0;
            const unsigned long long v = strtoull(val, &end, 10);
            if (val[0] == '\0' || val[0] == '-' || *end != '\0' || errno != 0) {
                fprintf(stderr, "error: %s: --seed '%s': expected a non-negative integer\n", name, val);
                exit(EXIT_FAILURE);
            }
            a->seed = v;
            continue;
        }
        if (arg[0] == '-') {
            fprintf(stderr, "error: %s: unknown flag '%s' (expected [version] --seed n --check --bench --quick, or -h)\n",
                    name, arg);
            exit(EXIT_FAILURE);
        }
        char* end = NULL;
        const long v = strtol(arg, &end, 10);
        int found = 0;
        for (int k = 0; k < num_versions && *end == '\0' && arg[0] != '\0'; k++) { found |= versions[k].version == v; }
        if (a->version != 0 || !found) {
            fprintf(stderr, "error: %s: version '%s': expected one version, one of:%s\n", name, arg, list.c_str());
            exit(EXIT_FAILURE);
        }
        a->version = (int)v;
    }
    if (a->quick && !a->check) {
        fprintf(stderr, "error: %s: --quick: only with --check (it picks the check's shapes)\n", name);
        exit(EXIT_FAILURE);
    }
    if (!a->check && !a->bench) { a->check = a->bench = 1; }
    if (a->quick) { g_lab_guard = 0; }
    return 1;
}

static int lab_version_selected(const LabArgs* a, int version) { return a->version == 0 || a->version == version; }

// 1 with a device (cuBLASLt set up), else one SKIP line and 0. An FP32 build skips as well: the
// tolerances, the bench's byte counts and version 1 of the classifier are bf16's.
static int lab_device_or_skip(const LabArgs* a) {
    if (!PRECISION_IS_BF16) {
        printf("SKIP %s: a BF16-only lab, this is an FP32 build (HINT: make labs, without PRECISION=FP32)\n", a->name);
        return 0;
    }
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count == 0) {
        printf("SKIP %s: no CUDA device (%s)\n", a->name, err != cudaSuccess ? cudaGetErrorString(err) : "0 devices found");
        return 0;
    }
    cuda_setup();
    return 1;
}

static void lab_print_start(const LabArgs* a) {
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, 0));
    printf("%s: %s build on %s (sm_%d%d), versions:", a->name, PRECISION_NAME, prop.name, prop.major, prop.minor);
    for (int i = 0; i < a->num_versions; i++) {
        if (lab_version_selected(a, a->versions[i].version)) { printf(" %d", a->versions[i].version); }
    }
    printf(", base seed %llu\n", a->seed);
}

// ----------------------------------------------------------------------------
// random numbers (splitmix64), normal by Box-Muller; a trial's seed mixes the base seed with its
// shape, so that a trial has the same inputs whichever version runs

static unsigned long long lab_mix64(unsigned long long z) {
    z += 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static double lab_uniform(unsigned long long* state) { // in (0, 1)
    *state = lab_mix64(*state);
    return ((double)(*state >> 11) + 0.5) / 9007199254740992.0;
}

static double lab_normal(unsigned long long* state) {
    const double u1 = lab_uniform(state), u2 = lab_uniform(state);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

static unsigned long long lab_trial_seed(unsigned long long seed, const int* fields, int n) {
    unsigned long long z = lab_mix64(seed);
    for (int i = 0; i < n; i++) { z = lab_mix64(z ^ (unsigned long long)(unsigned)fields[i]); }
    return z;
}

// n values N(0, std) rounded to floatX: f holds the rounded values (what the CPU side reads), x the bytes
static void lab_fill_x(std::vector<float>* f, std::vector<unsigned char>* x, size_t n, double std,
                       unsigned long long* rng) {
    f->resize(n);
    for (size_t i = 0; i < n; i++) { (*f)[i] = (float)(std * lab_normal(rng)); }
    x->resize(n * sizeof(floatX));
    host_floats_to_x(x->data(), f->data(), n);
    host_x_to_floats(f->data(), x->data(), n);
}

// ----------------------------------------------------------------------------
// device buffers with poisoned guards
//
// LAB_GUARD bytes of 0xFF before and after each buffer (a multiple of 256, so the buffer keeps the
// 256-byte alignment the trainer's have). Outputs are filled with 0xFF before every run: NaN in
// fp32 and bf16, so an element a version does not write shows. After a run the guards must still be
// 0xFF. With --quick there are no guards: compute-sanitizer's memcheck then sees each buffer's end.

#define LAB_POISON 0xFF

typedef struct {
    unsigned char* base; // NULL: no buffer
    void* ptr;           // base + guard
    size_t bytes;
    size_t guard;
    const char* name;
} LabBuf;

static LabBuf lab_buf_alloc(size_t bytes, const char* name) {
    LabBuf b;
    b.guard = g_lab_guard;
    b.base = (unsigned char*)device_malloc(bytes + 2 * b.guard, name);
    b.ptr = b.base + b.guard;
    b.bytes = bytes;
    b.name = name;
    cudaCheck(cudaMemset(b.base, LAB_POISON, bytes + 2 * b.guard));
    return b;
}

static void lab_buf_free(LabBuf* b) {
    if (b->base != NULL) { cudaCheck(cudaFree(b->base)); }
    b->base = NULL;
    b->ptr = NULL;
}

static void lab_buf_poison(const LabBuf* b) { cudaCheck(cudaMemset(b->ptr, LAB_POISON, b->bytes)); }

static std::vector<unsigned char> lab_buf_download(const LabBuf* b) {
    std::vector<unsigned char> h(b->bytes);
    if (b->bytes > 0) { cudaCheck(cudaMemcpy(h.data(), b->ptr, b->bytes, cudaMemcpyDeviceToHost)); }
    return h;
}

static void lab_buf_upload(const LabBuf* b, const void* h) {
    if (b->bytes > 0) { cudaCheck(cudaMemcpy(b->ptr, h, b->bytes, cudaMemcpyHostToDevice)); }
}

// a device copy of host bytes, with guards
static LabBuf lab_buf_from(const std::vector<unsigned char>& h, const char* name) {
    LabBuf b = lab_buf_alloc(h.size(), name);
    lab_buf_upload(&b, h.data());
    return b;
}

// appends a reason to *why and returns 0 when a guard byte of b changed
static int lab_buf_guards_ok(const LabBuf* b, std::string* why) {
    if (b->base == NULL || b->guard == 0) { return 1; }
    std::vector<unsigned char> g(2 * b->guard);
    cudaCheck(cudaMemcpy(g.data(), b->base, b->guard, cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(g.data() + b->guard, b->base + b->guard + b->bytes, b->guard, cudaMemcpyDeviceToHost));
    size_t before = 0, after = 0;
    for (size_t i = 0; i < b->guard; i++) {
        before += g[i] != LAB_POISON;
        after += g[b->guard + i] != LAB_POISON;
    }
    if (before == 0 && after == 0) { return 1; }
    *why += "; wrote outside " + std::string(b->name) + " (" + std::to_string(before) + " bytes before it, " +
            std::to_string(after) + " after it changed)";
    return 0;
}

// 0 with a reason when the device bytes of an input differ from what was uploaded
static int lab_buf_same(const LabBuf* b, const std::vector<unsigned char>& expect, const char* what, std::string* why) {
    const std::vector<unsigned char> now = lab_buf_download(b);
    if (now.size() == expect.size() && memcmp(now.data(), expect.data(), now.size()) == 0) { return 1; }
    *why += "; " + std::string(b->name) + " " + what;
    return 0;
}

// elements still entirely 0xFF bytes (never written)
static size_t lab_count_unwritten(const std::vector<unsigned char>& h, size_t elem) {
    size_t n = 0;
    for (size_t i = 0; i + elem <= h.size(); i += elem) {
        size_t k = 0;
        while (k < elem && h[i + k] == LAB_POISON) { k++; }
        n += k == elem;
    }
    return n;
}

static std::vector<float> lab_x_to_floats(const std::vector<unsigned char>& h) {
    std::vector<float> f(h.size() / sizeof(floatX));
    host_x_to_floats(f.data(), h.data(), f.size());
    return f;
}

static std::vector<float> lab_f32_from_bytes(const std::vector<unsigned char>& h) {
    std::vector<float> f(h.size() / sizeof(float));
    if (!f.empty()) { memcpy(f.data(), h.data(), f.size() * sizeof(float)); }
    return f;
}

static std::vector<unsigned char> lab_f32_bytes(const std::vector<float>& f) {
    std::vector<unsigned char> h(f.size() * sizeof(float));
    if (!f.empty()) { memcpy(h.data(), f.data(), h.size()); }
    return h;
}

// ----------------------------------------------------------------------------
// verdicts: one PASS/FAIL line per (version, trial), naming the worst tensor against its tolerance

typedef struct {
    double worst_ratio; // error / tolerance of the worst comparison (NaN: a NaN)
    std::string worst;
    std::string fail;   // "; ..." reasons, empty when it passes
    std::string note;   // printed after the verdict (e.g. which path ran)
} LabVerdict;

static void lab_verdict_init(LabVerdict* v) {
    v->worst_ratio = -1.0;
    v->worst.clear();
    v->fail.clear();
    v->note.clear();
}

static void lab_verdict_add(LabVerdict* v, double ratio, const std::string& what) {
    if (isnan(ratio) || !(ratio <= 1.0)) { v->fail += "; " + what; }
    if (isnan(ratio) || (!isnan(v->worst_ratio) && ratio > v->worst_ratio)) {
        v->worst_ratio = ratio;
        v->worst = what;
    }
}

// the bytes of two runs of a deterministic version must be equal
static void lab_check_same(const std::vector<unsigned char>& a, const std::vector<unsigned char>& b, const char* what,
                           LabVerdict* v) {
    if (a.size() != b.size() || memcmp(a.data(), b.data(), a.size()) != 0) {
        v->fail += std::string("; ") + what + " differs between two runs (not deterministic)";
    }
}

// rel_err = ||out - ref|| / ||ref|| over n values laid out (rows, cols); prints
// "  <prefix> <tensor> rel_err=... max_abs=... at row=.. col=.. (vN vs <against>)" and folds it into v
static double lab_compare(const char* prefix, int version, const char* tensor, const char* against, const float* out,
                          const float* ref, size_t n, size_t cols, double tol, LabVerdict* v) {
    double diff2 = 0.0, ref2 = 0.0, max_abs = 0.0;
    size_t at = 0, nonfinite = 0;
    for (size_t i = 0; i < n; i++) {
        ref2 += (double)ref[i] * ref[i];
        if (!isfinite(out[i])) {
            if (nonfinite++ == 0) { at = i; }
            continue;
        }
        const double d = fabs((double)out[i] - (double)ref[i]);
        diff2 += d * d;
        if (nonfinite == 0 && d > max_abs) { max_abs = d; at = i; }
    }
    double rel = ref2 > 0.0 ? sqrt(diff2 / ref2) : (diff2 > 0.0 ? INFINITY : 0.0);
    if (nonfinite > 0) { rel = NAN; }
    const size_t row = cols > 0 ? at / cols : 0, col = cols > 0 ? at % cols : 0;
    if (nonfinite > 0) {
        printf("  %s %s rel_err=nan (%zu of %zu not finite, the first at row=%zu col=%zu) (v%d vs %s)\n", prefix, tensor,
               nonfinite, n, row, col, version, against);
    } else {
        printf("  %s %s rel_err=%.3e max_abs=%.3e at row=%zu col=%zu (v%d vs %s)\n", prefix, tensor, rel, max_abs, row, col,
               version, against);
    }
    char what[256];
    snprintf(what, sizeof(what), "%s rel_err %.3g vs %s, tolerance %.0e", tensor, rel, against, tol);
    lab_verdict_add(v, rel / tol, what);
    return rel;
}

static int lab_verdict_print(const LabArgs* a, int version, const char* trial, unsigned long long seed,
                             const LabVerdict* v) {
    const int failed = !v->fail.empty();
    printf("%s %s v%d %s (inputs seed 0x%016llx; worst: %s%s%s)%s%s\n", failed ? "FAIL" : "PASS", a->name, version, trial,
           seed, v->worst.c_str(), failed || a->quick ? "" : "; bit-identical rerun", failed ? v->fail.c_str() : "",
           v->note.empty() ? "" : " ", v->note.c_str());
    fflush(stdout);
    return failed;
}

// ----------------------------------------------------------------------------
// float64 matmuls for the CPU side (row-major; sums in double, each result rounded once to float;
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
// heuristic answer in g_lt_cache, keyed by its `fields` (0 m, 1 n, 2 k, 13 bias != NULL, 17 act);
// found = 0 means no algorithm: the caller's fallback ran. Returns -1 when matmul_lt never saw it.

static int lab_lt_lookup(int m, int n, int k, int has_bias, LtActivation act, std::string* algo) {
    int found = -1;
    for (size_t i = 0; i < g_lt_cache.size(); i++) {
        const long long* f = g_lt_cache[i].first.v;
        if (f[0] != m || f[1] != n || f[2] != k || f[13] != has_bias || f[17] != (long long)act) { continue; }
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

// ----------------------------------------------------------------------------
// timing: median of reps runs, L2 flushed before each (a memset of twice its size), CUDA events
// around the run only; prepare() runs before the flush (e.g. restoring an input a run overwrites)

#define LAB_BENCH_REPS 25
static const double LAB_PEAK_FLOPS = 790e12; // H100, dense bf16 tensor cores (the trainer's MFU peak)
static const double LAB_PEAK_BYTES = 3e12;   // H100 HBM3, ~3 TB/s

typedef struct {
    void* flush;
    size_t flush_bytes;
    cudaEvent_t start, stop;
} LabTimer;

static void lab_timer_init(LabTimer* t) {
    int l2 = 0;
    cudaCheck(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
    t->flush_bytes = (size_t)(l2 > 0 ? l2 : (50 << 20)) * 2;
    t->flush = device_malloc(t->flush_bytes, "L2 flush buffer");
    cudaCheck(cudaEventCreate(&t->start));
    cudaCheck(cudaEventCreate(&t->stop));
}

static void lab_timer_free(LabTimer* t) {
    cudaCheck(cudaFree(t->flush));
    cudaCheck(cudaEventDestroy(t->start));
    cudaCheck(cudaEventDestroy(t->stop));
}

// two warm-up runs first: cuBLASLt's heuristic query and first-launch costs stay out of the median
template <typename P, typename F>
static double lab_time_median_ms(LabTimer* t, int reps, P prepare, F fn) {
    for (int i = 0; i < 2; i++) { prepare(); fn(); }
    cudaCheck(cudaDeviceSynchronize());
    std::vector<float> ms(reps);
    for (int i = 0; i < reps; i++) {
        prepare();
        cudaCheck(cudaMemset(t->flush, i & 0xFF, t->flush_bytes));
        cudaCheck(cudaEventRecord(t->start));
        fn();
        cudaCheck(cudaEventRecord(t->stop));
        cudaCheck(cudaEventSynchronize(t->stop));
        cudaCheck(cudaEventElapsedTime(&ms[i], t->start, t->stop));
    }
    std::sort(ms.begin(), ms.end());
    return reps % 2 ? ms[reps / 2] : 0.5 * (ms[reps / 2 - 1] + ms[reps / 2]);
}

static void lab_bench_predicted(const char* what, double flops, double bytes) {
    const double tc = flops / LAB_PEAK_FLOPS * 1e3, tm = bytes / LAB_PEAK_BYTES * 1e3;
    printf("predicted %s: %.1f GFLOP / 790 TFLOP/s = %.3f ms, %.1f MB / 3 TB/s = %.3f ms: %s-bound\n", what, flops / 1e9,
           tc, bytes / 1e6, tm, tc >= tm ? "compute" : "memory");
}

#endif // FUSED_LAB_COMMON_H
