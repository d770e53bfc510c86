/*
lab_common.h: what the LayerNorm, encoder, classifier and matmul_gelu labs share: the command line,
device buffers with poisoned guards, random inputs, the rel_err line with its PASS/FAIL verdict,
and the bench lines; the timer, random numbers and poison counting every lab shares are in
lab_basics.h.

Include it after train_gpt2.cu (under TESTING): it uses the trainer's cudaCheck, device_malloc,
floatX and host_floats_to_x. The attention labs keep attention_lab_common.h (its buffers have a
--quick mode without guards for the sanitizer runs); the names mean the same things in both.
*/
#ifndef LAB_COMMON_H
#define LAB_COMMON_H

#include <algorithm>
#include <string>
#include <vector>

#include "lab_basics.h"

// ----------------------------------------------------------------------------
// command line: <lab> [version] [--seed n] [--check] [--bench] [--quick]

typedef struct {
    const char* name;       // "lab_layernorm"
    int version;            // 0: every version
    unsigned long long seed;
    int check, bench;
    int quick;              // --check on the lab's short list of shapes (what the CPU runtime can afford)
} LabArgs;

// Parses argv, checked before any CUDA call. versions: the lab's version numbers; usage: the lines
// -h prints after the synopsis. Returns 1 to run, 0 after -h; a bad argument: one "error:" line
// on stderr, exit 1.
static int lab_parse_args(LabArgs* a, int argc, char** argv, const char* name, const std::vector<int>& versions,
                          const char* usage) {
    a->name = name;
    a->version = 0;
    a->seed = 1337;
    a->check = a->bench = 0;
    a->quick = 0;
    std::string list;
    for (int v : versions) { list += " " + std::to_string(v); }
    int have_version = 0;
    for (int i = 1; i < argc; i++) {
        const char* arg = argv[i];
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            printf("Usage: %s [version] [--seed n] [--check] [--bench] [--quick]\n%s", name, usage);
            printf("  version       one of:%s (default: all)\n", list.c_str());
            printf("  --seed n      base seed of the random inputs (default 1337); each trial mixes in its shape\n");
            printf("  --check       every version against the float64 CPU reference (neither flag: both)\n");
            printf("  --bench       time every version at the benchmark shape, L2 flushed before each run\n");
            printf("  --quick       --check on a short list of shapes that still reaches every code path at the\n"
                   "                trainer's widths (for dev/cudacpu, the CPU runtime; implies --check)\n");
            printf("Without a CUDA device: one SKIP line, exit 0.\n");
            return 0;
        }
        if (strcmp(arg, "--check") == 0) { a->check = 1; continue; }
        if (strcmp(arg, "--bench") == 0) { a->bench = 1; continue; }
        if (strcmp(arg, "--quick") == 0) { a->quick = a->check = 1; continue; }
        if (strcmp(arg, "--seed") == 0) {
            const char* val = i + 1 < argc ? argv[++i] : "";
            char* end = NULL;
            errno = 0;
            const unsigned long long v = strtoull(val, &end, 10);
            if (val[0] < '0' || val[0] > '9' || *end != '\0' || errno != 0) {
                fprintf(stderr, "error: %s: --seed '%s': expected a non-negative integer\n", name, val);
                exit(EXIT_FAILURE);
            }
            a->seed = v;
            continue;
        }
        if (arg[0] == '-') {
            fprintf(stderr, "error: %s: unknown flag '%s' (expected [version] --seed n --check --bench --quick, or -h)\n", name, arg);
            exit(EXIT_FAILURE);
        }
        char* end = NULL;
        const long v = strtol(arg, &end, 10);
        const int known = *end == '\0' && std::find(versions.begin(), versions.end(), (int)v) != versions.end();
        if (have_version || !known) {
            fprintf(stderr, "error: %s: version '%s': expected one version, one of:%s\n", name, arg, list.c_str());
            exit(EXIT_FAILURE);
        }
        a->version = (int)v;
        have_version = 1;
    }
    if (!a->check && !a->bench) { a->check = a->bench = 1; }
    return 1;
}

static int lab_version_selected(const LabArgs* a, int version) { return a->version == 0 || a->version == version; }

// 1 with a device, else one SKIP line and 0 (the caller exits 0: no GPU is not a failure)
static int lab_device_or_skip(const LabArgs* a) {
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count == 0) {
        printf("SKIP %s: no CUDA device (%s)\n", a->name, err != cudaSuccess ? cudaGetErrorString(err) : "0 devices found");
        return 0;
    }
    cuda_setup(); // g_reduce_blocks, as the trainer sets it
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, 0));
    printf("%s: %s build on %s (sm_%d%d, %d SMs), base seed %llu\n", a->name, PRECISION_NAME, prop.name, prop.major,
           prop.minor, prop.multiProcessorCount, a->seed);
    return 1;
}

// ----------------------------------------------------------------------------
// random numbers: splitmix64, so that a trial's inputs depend on (seed, shape) alone

static unsigned long long lab_trial_seed(unsigned long long seed, const std::vector<long long>& fields) {
    unsigned long long z = lab_mix64(seed);
    for (long long f : fields) { z = lab_mix64(z ^ (unsigned long long)f); }
    return z;
}

static double lab_normal(unsigned long long* state) { // Box-Muller, one value per call: simple beats fast here
    const double u1 = lab_uniform(state), u2 = lab_uniform(state);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

// floats rounded to floatX: f keeps the values the kernel will see (the reference reads these),
// x their floatX bytes (what is uploaded)
typedef struct {
    std::vector<float> f;
    std::vector<unsigned char> x;
} LabHostX;

static void lab_host_x_from(LabHostX* h, const std::vector<float>& v) {
    h->x.resize(v.size() * sizeof(floatX));
    h->f.resize(v.size());
    host_floats_to_x(h->x.data(), v.data(), v.size());
    host_x_to_floats(h->f.data(), h->x.data(), v.size());
}

// ----------------------------------------------------------------------------
// device buffers with poisoned guards
//
// LAB_GUARD bytes of 0xFF on each side (a multiple of 256, so the buffer keeps the trainer's
// alignment). Outputs and scratch are filled with 0xFF before every run: NaN in fp32 and bf16, so an
// element a version never writes, or scratch it reads before writing, shows up. The guards must
// still be 0xFF after the run (nothing written outside the buffer).

#define LAB_GUARD 1024

typedef struct {
    unsigned char* base; // NULL: no buffer
    void* ptr;           // base + LAB_GUARD
    size_t bytes;
    const char* name;
} LabBuf;

static LabBuf lab_buf_alloc(size_t bytes, const char* name) {
    LabBuf b;
    b.base = (unsigned char*)device_malloc(bytes + 2 * LAB_GUARD, name);
    b.ptr = b.base + LAB_GUARD;
    b.bytes = bytes;
    b.name = name;
    cudaCheck(cudaMemset(b.base, LAB_POISON, bytes + 2 * LAB_GUARD));
    return b;
}

static void lab_buf_free(LabBuf* b) {
    if (b->base != NULL) { cudaCheck(cudaFree(b->base)); }
    b->base = NULL;
    b->ptr = NULL;
}

static void lab_buf_poison(const LabBuf* b) { cudaCheck(cudaMemset(b->ptr, LAB_POISON, b->bytes)); }

static void lab_buf_upload(const LabBuf* b, const void* h) { cudaCheck(cudaMemcpy(b->ptr, h, b->bytes, cudaMemcpyHostToDevice)); }

static std::vector<unsigned char> lab_buf_download(const LabBuf* b) {
    std::vector<unsigned char> h(b->bytes);
    cudaCheck(cudaMemcpy(h.data(), b->ptr, b->bytes, cudaMemcpyDeviceToHost));
    return h;
}

// a device copy of host bytes, guarded (an input: lab_buf_intact checks it afterwards)
static LabBuf lab_buf_input(const std::vector<unsigned char>& h, const char* name) {
    LabBuf b = lab_buf_alloc(h.size(), name);
    lab_buf_upload(&b, h.data());
    return b;
}

// appends "; wrote outside <name> ..." to *why when a guard changed
static void lab_buf_guards_ok(const LabBuf* b, std::string* why) {
    if (b->base == NULL) { return; }
    unsigned char g[2][LAB_GUARD];
    cudaCheck(cudaMemcpy(g[0], b->base, LAB_GUARD, cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(g[1], b->base + LAB_GUARD + b->bytes, LAB_GUARD, cudaMemcpyDeviceToHost));
    const size_t before = LAB_GUARD - lab_count_poison_bytes(g[0], LAB_GUARD);
    const size_t after = LAB_GUARD - lab_count_poison_bytes(g[1], LAB_GUARD);
    if (before > 0 || after > 0) {
        *why += "; wrote outside " + std::string(b->name) + " (" + std::to_string(before) + " guard bytes before it, " +
                std::to_string(after) + " after it changed)";
    }
}

// an input buffer: guards intact and the same bytes as uploaded
static void lab_buf_intact(const LabBuf* b, const std::vector<unsigned char>& h, std::string* why) {
    if (b->base == NULL) { return; }
    lab_buf_guards_ok(b, why);
    if (lab_buf_download(b) != h) { *why += "; input " + std::string(b->name) + " changed"; }
}

static std::vector<float> lab_x_to_floats(const std::vector<unsigned char>& h) {
    std::vector<float> f(h.size() / sizeof(floatX));
    host_x_to_floats(f.data(), h.data(), f.size());
    return f;
}

static std::vector<float> lab_f32_from_bytes(const std::vector<unsigned char>& h) {
    std::vector<float> f(h.size() / sizeof(float));
    memcpy(f.data(), h.data(), f.size() * sizeof(float));
    return f;
}

// ----------------------------------------------------------------------------
// comparison lines and the verdict of one (version, case)

typedef struct {
    double worst_ratio;  // rel_err / tolerance of the worst tensor so far (NaN: a NaN)
    std::string worst;   // "out rel_err 1.2e-03, tolerance 1e-02"
    std::string fail;    // "; ..." reasons; empty: PASS
} LabVerdict;

static void lab_verdict_init(LabVerdict* v) {
    v->worst_ratio = -1.0;
    v->worst.clear();
    v->fail.clear();
}

// "  <prefix> <tensor> rel_err=.. max_abs=.. at row=.. col=.. (vN vs cpu)": rel_err = ||out - ref|| /
// ||ref|| over n values laid out (n / cols, cols); a non-finite output is the worst error (NaN).
// tol 0: the values must be equal (an operation with one rounding, reproduced exactly on the host).
static void lab_compare(const char* prefix, int version, const char* tensor, const float* out, const float* ref, size_t n,
                        size_t cols, double tol, LabVerdict* v) {
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
        printf("  %s %s rel_err=nan (%zu of %zu not finite, the first at row=%zu col=%zu) (v%d vs cpu)\n", prefix, tensor,
               nonfinite, n, row, col, version);
    } else {
        printf("  %s %s rel_err=%.3e max_abs=%.3e at row=%zu col=%zu (v%d vs cpu)\n", prefix, tensor, rel, max_abs, row,
               col, version);
    }
    const double ratio = tol > 0.0 ? rel / tol : (rel == 0.0 ? 0.0 : INFINITY);
    char tol_s[32], worst[160];
    if (tol > 0.0) { snprintf(tol_s, sizeof(tol_s), "%.0e", tol); }
    else { snprintf(tol_s, sizeof(tol_s), "0 (exact)"); }
    snprintf(worst, sizeof(worst), "%s rel_err %.3g, tolerance %s", tensor, rel, tol_s);
    if (!(ratio <= 1.0)) { v->fail += std::string("; ") + worst; }
    if (isnan(ratio) || (!isnan(v->worst_ratio) && ratio > v->worst_ratio)) {
        v->worst_ratio = ratio;
        v->worst = worst;
    }
}

// a rerun must give the same bytes: every version in these labs is deterministic (no atomics on sums)
static void lab_check_same(const std::vector<unsigned char>& a, const std::vector<unsigned char>& b, const char* what,
                           LabVerdict* v) {
    if (a != b) { v->fail += std::string("; ") + what + " differs between two runs (not deterministic)"; }
}

// one PASS/FAIL line; returns 1 on FAIL
static int lab_verdict_print(const LabArgs* a, int version, const char* what, unsigned long long seed, const LabVerdict* v) {
    const int failed = !v->fail.empty();
    printf("%s %s v%d %s (inputs seed 0x%016llx; worst: %s%s%s)\n", failed ? "FAIL" : "PASS", a->name, version, what, seed,
           v->worst.c_str(), failed ? "" : "; bit-identical rerun", failed ? v->fail.c_str() : "");
    fflush(stdout);
    return failed;
}

// "predicted <what>: F GFLOP / 790 TFLOP/s = .. ms, B MB / 3 TB/s = .. ms: memory-bound"
static void lab_bench_predicted(const char* what, double flops, double bytes) {
    const double tc = flops / LAB_PEAK_FLOPS * 1e3, tm = bytes / LAB_PEAK_BYTES * 1e3;
    printf("predicted %s: %.3f GFLOP / 790 TFLOP/s = %.4f ms, %.1f MB / 3 TB/s = %.4f ms: %s-bound\n", what, flops / 1e9,
           tc, bytes / 1e6, tm, tc >= tm ? "compute" : "memory");
}

// GB/s of the minimum bytes: a version that moves more than the minimum shows as a lower rate
static void lab_bench_line(int version, const char* what, double ms, double bytes) {
    printf("bench v%d %-28s ms=%.4f GB/s=%.1f (of the minimum %.1f MB; %.0f%% of 3 TB/s)\n", version, what, ms,
           bytes / (ms * 1e-3) / 1e9, bytes / 1e6, 100.0 * bytes / (ms * 1e-3) / LAB_PEAK_BYTES);
    fflush(stdout);
}

#endif // LAB_COMMON_H
