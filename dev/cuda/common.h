/*
common.h: what the kernel labs of dev/cuda/ share (llm.c's dev/cuda/common.h, for labs whose
versions are the trainer's own kernels). It is the only header here; a lab includes it last:

    #define TESTING
    #include "../../train_gpt2.cu"   // the kernels under test, its main dropped (as test_gpt2.cu does)
    #include "../cpu/kernels_cpu.h"  // the float64 CPU reference (the attention labs: attention_tiled_cpu.h)
    #include "common.h"

and uses the trainer's cudaCheck, device_malloc, cuda_setup, floatX and host conversions.

Every lab keeps llm.c's pattern: a header comment with the two numbers (FLOPs and minimum bytes at
the benchmark shape) and the time they predict on an H100; a CPU reference; numbered versions; a
--check that draws fresh random inputs per trial (seed printed), poisons every output and scratch
buffer, compares each version with the reference and prints one PASS/FAIL line per (version, trial);
a --bench (median of LAB_BENCH_REPS runs, L2 flushed before each). The command line is the same in
every lab: <lab> [version] [--seed n] [--check] [--bench] [--quick], and --scheme s in the attention
labs.

Sections:
  the command line        LabVersion, LabSpec, LabArgs, lab_parse_args, lab_device_or_skip
  random numbers          splitmix64: lab_trial_seed, lab_uniform, lab_normal and their vectors
  device buffers          LabBuf: poisoned, with guard bytes on both sides
  host values             LabHostX (floats rounded to floatX, and their bytes), byte conversions
  comparisons, verdict    lab_compare (the rel_err lines), LabVerdict, lab_verdict_print, lab_verdict
  timing                  LabTimer, lab_time_median_ms, lab_bench_predicted, lab_bench_line
  float64 matmuls         the CPU side of classifier.cu and matmul_gelu.cu, cuBLASLt's choice
  the attention labs      their versions, tolerances, shapes, inputs and CPU-twin calls; compiled where
                          the lab included dev/cpu/attention_tiled_cpu.h
*/
#ifndef DEV_CUDA_COMMON_H
#define DEV_CUDA_COMMON_H

#include <algorithm>
#include <errno.h>
#include <stdarg.h>
#include <string>
#include <vector>

#if PRECISION_IS_BF16
#define LAB_SUFFIX ""
#else
#define LAB_SUFFIX "_fp32"
#endif

// ----------------------------------------------------------------------------
// the command line: <lab> [version] [--scheme s] [--seed n] [--check] [--bench] [--quick]

typedef struct {
    int version;
    const char* what;  // one line for -h
    int bf16_only;     // 1: absent from FP32 builds
    int variant;       // what the lab's code takes to run this version (the attention labs: 0 the unfused
                       // path, else the flash kernels' version, LabAttn.flash_fwd and flash_bwd)
} LabVersion;

// what a lab is, for the parser and -h
typedef struct {
    const char* name;            // "lab_layernorm" (FP32 builds append _fp32)
    const char* what;            // one line
    const LabVersion* versions;
    int num_versions;
    int schemes;                 // 1: --scheme s picks one Q/K/V scheme (the attention labs)
    const char* check;           // what --check, --bench and --quick run (-h); NULL: the general line
    const char* bench;
    const char* quick;
    const char* large;           // what --large runs (the attention labs); NULL: no --large
    const char* long_bench;      // what --long runs (the attention labs); NULL: no --long
} LabSpec;

typedef struct {
    const LabSpec* spec;
    char name[64];               // the binary: spec->name LAB_SUFFIX
    int version;                 // 0: every version of this build
    std::vector<int> versions;   // the versions to run: the one asked for, else every one of this build
    int scheme;                  // -1: every scheme
    unsigned long long seed;
    int check, bench;
    int quick;                   // --check on the lab's short list of shapes (implies --check)
    int large;                   // --large (LabSpec.large): the far end of the largest shape, instead of --check
    int long_bench;              // --long (LabSpec.long_bench): --bench on the long list of shapes (implies --bench)
} LabArgs;

#define LAB_COUNT(a) ((int)(sizeof(a) / sizeof((a)[0]))) // the rows of a static table

static int lab_version_in_build(const LabVersion* v) { return !v->bf16_only || PRECISION_IS_BF16; }

static const LabVersion* lab_find_version(const LabSpec* spec, long version) {
    for (int i = 0; i < spec->num_versions; i++) {
        if (spec->versions[i].version == version) { return &spec->versions[i]; }
    }
    return NULL;
}

// whether version runs under these arguments (it exists in this build and was asked for)
static int lab_version_selected(const LabArgs* a, int version) {
    return std::find(a->versions.begin(), a->versions.end(), version) != a->versions.end();
}

// " 1 2": the versions of this build
static std::string lab_version_list(const LabSpec* spec) {
    std::string list;
    for (int i = 0; i < spec->num_versions; i++) {
        if (lab_version_in_build(&spec->versions[i])) { list += " " + std::to_string(spec->versions[i].version); }
    }
    return list;
}

static void lab_usage(const LabArgs* a) {
    const LabSpec* spec = a->spec;
    printf("Usage: %s [version]%s [--seed n] [--check] [--bench] [--quick]%s%s\n", a->name, spec->schemes ? " [--scheme s]" : "",
           spec->large ? " [--large]" : "", spec->long_bench ? " [--long]" : "");
    printf("  %s (%s build)\n", spec->what, PRECISION_NAME);
    printf("  version       one of:%s (default: all of them)\n", lab_version_list(spec).c_str());
    for (int i = 0; i < spec->num_versions; i++) {
        printf("    %d  %s%s\n", spec->versions[i].version, spec->versions[i].what,
               lab_version_in_build(&spec->versions[i]) ? "" : " (not in FP32 builds: BF16-only)");
    }
    if (spec->schemes) {
        printf("  --scheme s    check one scheme (default: all):");
        for (int s = 0; s < QKV_NUM_SCHEMES; s++) { printf(" %s", qkv_scheme_name(s)); }
        printf("\n");
    }
    printf("  --seed n      base seed of the random inputs (default 1337); each trial mixes in its shape\n");
    printf("  --check       %s\n", spec->check ? spec->check : "every version against the float64 CPU reference");
    printf("  --bench       %s\n", spec->bench ? spec->bench : "time every version at the benchmark shape, L2 flushed before each run");
    printf("  --quick       %s\n", spec->quick ? spec->quick
           : "--check on a short list of shapes that still reaches every code path at the trainer's widths\n"
             "                (for dev/cudacpu, the CPU runtime; implies --check)");
    if (spec->large) { printf("  --large       %s\n", spec->large); }
    if (spec->long_bench) { printf("  --long        %s\n", spec->long_bench); }
    printf("With neither --check nor --bench: both. Without a CUDA device: one SKIP line, exit 0.\n");
}

// a bad argument: one "error:" line on stderr, exit 1
__attribute__((noreturn, format(printf, 2, 3))) static void lab_arg_error(const LabArgs* a, const char* fmt, ...) {
    fprintf(stderr, "error: %s: ", a->name);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    exit(EXIT_FAILURE);
}

// Parses argv, before any CUDA call. Returns 1 to run, 0 after -h (exit 0); on a bad argument it
// prints one "error:" line and exits 1.
static int lab_parse_args(LabArgs* a, int argc, char** argv, const LabSpec* spec) {
    a->spec = spec;
    snprintf(a->name, sizeof(a->name), "%s%s", spec->name, LAB_SUFFIX);
    a->version = 0;
    a->scheme = -1;
    a->seed = 1337;
    a->check = a->bench = a->quick = a->large = a->long_bench = 0;
    int have_version = 0;
    for (int i = 1; i < argc; i++) {
        const char* arg = argv[i];
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) { lab_usage(a); return 0; }
        if (strcmp(arg, "--check") == 0) { a->check = 1; continue; }
        if (strcmp(arg, "--bench") == 0) { a->bench = 1; continue; }
        if (strcmp(arg, "--quick") == 0) { a->quick = a->check = 1; continue; }
        if (spec->large && strcmp(arg, "--large") == 0) { a->large = 1; continue; }
        if (spec->long_bench && strcmp(arg, "--long") == 0) { a->long_bench = a->bench = 1; continue; }
        const int is_seed = strcmp(arg, "--seed") == 0, is_scheme = spec->schemes && strcmp(arg, "--scheme") == 0;
        if (is_seed || is_scheme) {
            if (i + 1 >= argc) {
                lab_arg_error(a, "%s needs a value (%s)", arg, is_seed ? "a non-negative integer" : "a scheme name, see -h");
            }
            const char* val = argv[++i];
            if (is_seed) {
                char* end = NULL;
                errno = 0;
                const unsigned long long v = strtoull(val, &end, 10);
                if (val[0] < '0' || val[0] > '9' || *end != '\0' || errno != 0) {
                    lab_arg_error(a, "--seed '%s': expected a non-negative integer", val);
                }
                a->seed = v;
            } else {
                a->scheme = qkv_scheme_from_name(val);
                if (a->scheme < 0) {
                    std::string names;
                    for (int s = 0; s < QKV_NUM_SCHEMES; s++) { names += std::string(" ") + qkv_scheme_name(s); }
                    lab_arg_error(a, "--scheme '%s': expected one of:%s", val, names.c_str());
                }
            }
            continue;
        }
        if (arg[0] == '-') {
            lab_arg_error(a, "unknown flag '%s' (expected [version]%s --seed n --check --bench --quick%s%s, or -h)", arg,
                          spec->schemes ? " --scheme s" : "", spec->large ? " --large" : "", spec->long_bench ? " --long" : "");
        }
        // the version, a positional number
        char* end = NULL;
        const long v = strtol(arg, &end, 10);
        const LabVersion* found = *end == '\0' ? lab_find_version(spec, v) : NULL;
        if (have_version || found == NULL) {
            lab_arg_error(a, "version '%s': expected one version, one of:%s", arg, lab_version_list(spec).c_str());
        }
        if (!lab_version_in_build(found)) {
            lab_arg_error(a, "version %d (%s) does not exist in FP32 builds: it is BF16-only (HINT: build/%s, make labs)",
                          found->version, found->what, spec->name);
        }
        a->version = found->version;
        have_version = 1;
    }
    if (a->large && (a->check || a->bench)) { lab_arg_error(a, "--large runs on its own (without --check, --bench, --quick)"); }
    if (!a->check && !a->bench && !a->large) { a->check = a->bench = 1; }
    a->versions.clear();
    for (int i = 0; i < spec->num_versions; i++) {
        const LabVersion* v = &spec->versions[i];
        if (lab_version_in_build(v) && (a->version == 0 || a->version == v->version)) { a->versions.push_back(v->version); }
    }
    return 1;
}

// 1 in a BF16 build, else one SKIP line and 0 (for a lab that compiles in FP32 builds but whose
// tolerances and byte counts are bf16's)
static int lab_bf16_or_skip(const LabArgs* a) {
    if (PRECISION_IS_BF16) { return 1; }
    printf("SKIP %s: a BF16-only lab, this is an FP32 build (HINT: make labs, without PRECISION=FP32)\n", a->name);
    return 0;
}

// 1 with a device (set up as the trainer sets it up: cuBLASLt, g_reduce_blocks) and the lab's first
// line printed; else one SKIP line and 0 (the caller exits 0: no GPU is not a failure)
static int lab_device_or_skip(const LabArgs* a) {
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count == 0) {
        printf("SKIP %s: no CUDA device (%s)\n", a->name, err != cudaSuccess ? cudaGetErrorString(err) : "0 devices found");
        return 0;
    }
    cuda_setup();
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, 0));
    std::string list;
    for (int v : a->versions) { list += " " + std::to_string(v); }
    printf("%s: %s build on %s (sm_%d%d, %d SMs), versions:%s, base seed %llu\n", a->name, PRECISION_NAME, prop.name,
           prop.major, prop.minor, prop.multiProcessorCount, list.c_str(), a->seed);
    for (int i = 0; i < a->spec->num_versions; i++) {
        const LabVersion* v = &a->spec->versions[i];
        if (!lab_version_in_build(v)) { printf("version %d (%s): not in FP32 builds, it is BF16-only\n", v->version, v->what); }
    }
    return 1;
}

// ----------------------------------------------------------------------------
// random numbers: splitmix64, so that a trial's inputs depend on (seed, shape) alone

static unsigned long long lab_mix64(unsigned long long z) {
    z += 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

// the inputs' seed of one trial: the base seed mixed with the fields that name the trial (its shape,
// case), so that a trial has the same inputs whatever the command line selects
static unsigned long long lab_trial_seed(unsigned long long seed, const std::vector<long long>& fields) {
    unsigned long long z = lab_mix64(seed);
    for (long long f : fields) { z = lab_mix64(z ^ (unsigned long long)f); }
    return z;
}

static double lab_uniform(unsigned long long* state) { // in (0, 1)
    *state = lab_mix64(*state);
    return ((double)(*state >> 11) + 0.5) / 9007199254740992.0;
}

static double lab_normal(unsigned long long* state) { // Box-Muller, one value per draw: simple beats fast here
    const double u1 = lab_uniform(state), u2 = lab_uniform(state);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

// n values mean + std * N(0, 1)
static std::vector<float> lab_normal_vec(size_t n, double mean, double std, unsigned long long* rng) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; i++) { v[i] = (float)(mean + std * lab_normal(rng)); }
    return v;
}

// n values N(0, 1), both of each Box-Muller draw (cos, then sin): the attention labs' inputs
static std::vector<float> lab_normal_vec_paired(size_t n, unsigned long long* rng) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; i += 2) {
        const double u1 = lab_uniform(rng), u2 = lab_uniform(rng);
        const double r = sqrt(-2.0 * log(u1));
        v[i] = (float)(r * cos(6.283185307179586 * u2));
        if (i + 1 < n) { v[i + 1] = (float)(r * sin(6.283185307179586 * u2)); }
    }
    return v;
}

// n values uniform in [lo, hi)
static std::vector<float> lab_uniform_vec(size_t n, double lo, double hi, unsigned long long* rng) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; i++) { v[i] = (float)(lo + (hi - lo) * lab_uniform(rng)); }
    return v;
}

// ----------------------------------------------------------------------------
// poison and device buffers
//
// Every buffer has g_lab_guard bytes of 0xFF before and after it (LAB_GUARD, a multiple of 256: the
// buffer keeps the trainer's 256-byte alignment). Outputs and scratch are filled with 0xFF before
// every run: NaN in fp32 and in bf16, so an element a version never writes, or scratch it reads
// before writing, shows. After a run the guards must still be 0xFF (nothing written outside a
// buffer) and the inputs unchanged. The attention labs' --quick (the compute-sanitizer runs) sets
// g_lab_guard to 0: each buffer is then its own allocation, so memcheck sees its exact end.

#define LAB_POISON 0xFF
#define LAB_GUARD 1024
static size_t g_lab_guard = LAB_GUARD;

static size_t lab_count_poison_bytes(const unsigned char* p, size_t n) {
    size_t c = 0;
    for (size_t i = 0; i < n; i++) { c += p[i] == LAB_POISON; }
    return c;
}

// elements of elem_bytes still all 0xFF: never written
static size_t lab_count_unwritten(const std::vector<unsigned char>& h, size_t elem_bytes) {
    size_t c = 0;
    for (size_t i = 0; i + elem_bytes <= h.size(); i += elem_bytes) { c += lab_count_poison_bytes(&h[i], elem_bytes) == elem_bytes; }
    return c;
}

typedef struct {
    unsigned char* base; // NULL: no buffer
    void* ptr;           // base + guard
    size_t bytes;
    size_t guard;        // bytes of 0xFF on each side
    const char* name;
} LabBuf;

static LabBuf lab_buf_none(const char* name) {
    LabBuf b;
    b.base = NULL;
    b.ptr = NULL;
    b.bytes = 0;
    b.guard = 0;
    b.name = name;
    return b;
}

static LabBuf lab_buf_alloc(size_t bytes, const char* name) {
    LabBuf b;
    b.guard = g_lab_guard;
    b.base = (unsigned char*)device_malloc(bytes + 2 * b.guard, name);
    b.ptr = b.base + b.guard;
    b.bytes = bytes;
    b.name = name;
#ifndef CUDACPU_CUDA_CPU_H
    cudaCheck(cudaMemset(b.base, LAB_POISON, bytes + 2 * b.guard));
#endif // the CPU runtime's fresh allocations are 0xFF already, the large ones without touching a page (--large)
    return b;
}

static void lab_buf_free(LabBuf* b) {
    if (b->base != NULL) { cudaCheck(cudaFree(b->base)); }
    *b = lab_buf_none(b->name);
}

static void lab_buf_poison(const LabBuf* b) {
    if (b->base != NULL) { cudaCheck(cudaMemset(b->ptr, LAB_POISON, b->bytes)); }
}

static void lab_buf_upload(const LabBuf* b, const void* h) {
    if (b->base != NULL && b->bytes > 0) { cudaCheck(cudaMemcpy(b->ptr, h, b->bytes, cudaMemcpyHostToDevice)); }
}

// bytes of device memory (a buffer of the lab's, or one the trainer allocated)
static std::vector<unsigned char> lab_download(const void* d, size_t bytes) {
    std::vector<unsigned char> h(bytes);
    if (d != NULL && bytes > 0) { cudaCheck(cudaMemcpy(h.data(), d, bytes, cudaMemcpyDeviceToHost)); }
    return h;
}

static std::vector<unsigned char> lab_buf_download(const LabBuf* b) { return lab_download(b->ptr, b->bytes); }

// a device copy of host bytes, guarded (an input: lab_buf_intact checks it afterwards)
static LabBuf lab_buf_input(const std::vector<unsigned char>& h, const char* name) {
    LabBuf b = lab_buf_alloc(h.size(), name);
    lab_buf_upload(&b, h.data());
    return b;
}

// appends "; wrote outside <name> ..." to *why when a guard changed
static void lab_buf_guards_ok(const LabBuf* b, std::string* why) {
    if (b->base == NULL || b->guard == 0) { return; }
    const std::vector<unsigned char> before = lab_download(b->base, b->guard);
    const std::vector<unsigned char> after = lab_download(b->base + b->guard + b->bytes, b->guard);
    const size_t nb = b->guard - lab_count_poison_bytes(before.data(), b->guard);
    const size_t na = b->guard - lab_count_poison_bytes(after.data(), b->guard);
    if (nb > 0 || na > 0) {
        *why += "; wrote outside " + std::string(b->name) + " (" + std::to_string(nb) + " guard bytes before it, " +
                std::to_string(na) + " after it changed)";
    }
}

// an input buffer: guards intact and the same bytes as uploaded
static void lab_buf_intact(const LabBuf* b, const std::vector<unsigned char>& h, std::string* why) {
    if (b->base == NULL) { return; }
    lab_buf_guards_ok(b, why);
    if (lab_buf_download(b) != h) { *why += "; input " + std::string(b->name) + " changed"; }
}

// ----------------------------------------------------------------------------
// host values

// floats rounded to floatX: f the values the kernel will see (the reference reads these), x their
// floatX bytes (what is uploaded)
typedef struct {
    std::vector<float> f;
    std::vector<unsigned char> x;
} LabHostX;

// rounds h->f to floatX in place and fills h->x with the bytes
static void lab_host_x_round(LabHostX* h) {
    h->x.resize(h->f.size() * sizeof(floatX));
    host_floats_to_x(h->x.data(), h->f.data(), h->f.size());
    host_x_to_floats(h->f.data(), h->x.data(), h->f.size());
}

static LabHostX lab_host_x(const std::vector<float>& v) {
    LabHostX h;
    h.f = v;
    lab_host_x_round(&h);
    return h;
}

// floatX bytes -> floats
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

// the bytes of a vector (floats, ints): what a buffer of them holds
template <typename T>
static std::vector<unsigned char> lab_bytes_of(const std::vector<T>& v) {
    std::vector<unsigned char> h(v.size() * sizeof(T));
    if (!v.empty()) { memcpy(h.data(), v.data(), h.size()); }
    return h;
}

// ----------------------------------------------------------------------------
// comparisons and the verdict of one (version, trial)

// where an element is, for the comparison lines: up to 4 dimensions, row-major
typedef struct {
    int ndim;
    size_t dims[4];
    const char* names[4];
} LabIndex;

// (n / cols, cols) as "row=.. col=.."; cols 0: "i=.."
static LabIndex lab_index_rows(size_t n, size_t cols) {
    LabIndex ix = {2, {cols > 0 ? n / cols : 0, cols}, {"row", "col", "", ""}};
    if (cols == 0) { ix = LabIndex{1, {n, 0}, {"i", "", "", ""}}; }
    return ix;
}

static std::string lab_where(const LabIndex* ix, size_t i) {
    size_t coord[4] = {0, 0, 0, 0};
    for (int d = ix->ndim - 1; d >= 0; d--) {
        const size_t dim = ix->dims[d] > 0 ? ix->dims[d] : 1;
        coord[d] = d > 0 ? i % dim : i;
        i /= dim;
    }
    std::string s;
    for (int d = 0; d < ix->ndim; d++) { s += (d ? " " : "") + std::string(ix->names[d]) + "=" + std::to_string(coord[d]); }
    return s;
}

typedef struct {
    double worst_ratio;  // error / tolerance of the worst tensor so far (NaN: a NaN)
    std::string worst;   // "out rel_err 1.2e-03 vs cpu, tolerance 1e-02"
    std::string fail;    // "; ..." reasons; empty: PASS
} LabVerdict;

static void lab_verdict_init(LabVerdict* v) {
    v->worst_ratio = -1.0;
    v->worst.clear();
    v->fail.clear();
}

// folds one error / tolerance ratio (NaN: a non-finite output) into the verdict: a FAIL above 1
static void lab_verdict_add(LabVerdict* v, double ratio, const std::string& what) {
    if (isnan(ratio) || !(ratio <= 1.0)) { v->fail += "; " + what; }
    if (isnan(ratio) || (!isnan(v->worst_ratio) && ratio > v->worst_ratio)) {
        v->worst_ratio = ratio;
        v->worst = what;
    }
}

// sum of squares-based norm of n values; NaN in, NaN out
static double lab_norm(const float* a, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) { s += (double)a[i] * (double)a[i]; }
    return sqrt(s);
}

// Prints "  <prefix> <tensor> rel_err=.. max_abs=.. at <where> (vN vs <against>)" and folds it into
// the verdict: rel_err = ||out - ref|| / ||ref|| over n values laid out as ix; a non-finite output
// is the worst error (NaN). floor_norm: the denominator's lower bound, for a reference that is zero
// in exact arithmetic (0: none). tol 0: the values must be equal (one rounding, reproduced exactly
// on the host). against: "cpu", "v1".
static void lab_compare(const char* prefix, int version, const char* tensor, const char* against, const float* out,
                        const float* ref, size_t n, const LabIndex* ix, double floor_norm, double tol, LabVerdict* v) {
    double diff2 = 0.0, max_abs = -1.0;
    size_t at = 0, nonfinite = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(out[i])) {
            if (nonfinite++ == 0) { at = i; }
            continue;
        }
        const double d = fabs((double)out[i] - (double)ref[i]);
        diff2 += d * d;
        if (nonfinite == 0 && d > max_abs) { max_abs = d; at = i; }
    }
    const double ref_norm = lab_norm(ref, n);
    const int floored = ref_norm < floor_norm;
    const double denom = floored ? floor_norm : ref_norm;
    double rel = denom > 0.0 ? sqrt(diff2) / denom : (diff2 > 0.0 ? INFINITY : 0.0);
    if (nonfinite > 0) { rel = NAN; }
    if (nonfinite > 0) {
        printf("  %s %s rel_err=nan (%zu of %zu not finite, the first at %s) (v%d vs %s)\n", prefix, tensor, nonfinite, n,
               lab_where(ix, at).c_str(), version, against);
    } else {
        printf("  %s %s rel_err=%.3e max_abs=%.3e at %s (v%d vs %s%s)\n", prefix, tensor, rel, max_abs < 0.0 ? 0.0 : max_abs,
               n > 0 ? lab_where(ix, at).c_str() : "-", version, against,
               floored ? "; ref ~ 0: against 1e-3 rms(datty)" : "");
    }
    const double ratio = tol > 0.0 ? rel / tol : (rel == 0.0 ? 0.0 : (isnan(rel) ? NAN : INFINITY));
    char tol_s[32], what[256];
    if (tol > 0.0) { snprintf(tol_s, sizeof(tol_s), "%.0e", tol); }
    else { snprintf(tol_s, sizeof(tol_s), "0 (exact)"); }
    snprintf(what, sizeof(what), "%s rel_err %.3g vs %s, tolerance %s", tensor, rel, against, tol_s);
    lab_verdict_add(v, ratio, what);
}

// lab_compare against the CPU reference, n values as (n / cols, cols) rows (cols 0: a flat vector)
static void lab_compare_rows(const char* prefix, int version, const char* tensor, const float* out, const float* ref,
                             size_t n, size_t cols, double tol, LabVerdict* v) {
    const LabIndex ix = lab_index_rows(n, cols);
    lab_compare(prefix, version, tensor, "cpu", out, ref, n, &ix, 0.0, tol, v);
}

// a rerun must give the same bytes: every version in these labs is deterministic (no atomics on sums)
static void lab_check_same(const std::vector<unsigned char>& a, const std::vector<unsigned char>& b, const char* what,
                           LabVerdict* v) {
    if (a != b) { v->fail += std::string("; ") + what + " differs between two runs (not deterministic)"; }
}

// "PASS <lab> vN <trial> (inputs seed 0x..; worst: ..; bit-identical rerun)" or FAIL with the
// reasons; reran: the trial ran twice and the rerun was compared. Returns 1 on FAIL.
static int lab_verdict_print(const LabArgs* a, int version, const char* what, unsigned long long seed, int reran,
                             const LabVerdict* v) {
    const int failed = !v->fail.empty();
    printf("%s %s v%d %s (inputs seed 0x%016llx; worst: %s%s%s)\n", failed ? "FAIL" : "PASS", a->name, version, what, seed,
           v->worst.c_str(), failed || !reran ? "" : "; bit-identical rerun", failed ? v->fail.c_str() : "");
    fflush(stdout);
    return failed;
}

// a lab's last line (after --check; nothing after --bench alone) and its exit status: 1 on a FAIL
static int lab_verdict(const char* name, int checked, int failed) {
    if (checked) { printf("%s: %s\n", name, failed ? "FAIL (see the FAIL lines)" : "every check passed"); }
    return failed ? 1 : 0;
}

// ----------------------------------------------------------------------------
// timing: median of reps runs, each after a memset of twice the L2 (so every run reads from DRAM),
// CUDA events around the run alone. The predicted times are stated against an H100's rates.

#define LAB_BENCH_REPS 25
static const double LAB_PEAK_FLOPS = 790e12; // H100 dense bf16 tensor cores (the trainer's MFU peak)
static const double LAB_PEAK_BYTES = 3e12;   // H100 HBM3

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

// two warm-up runs first (lazy module loading, cuBLASLt's heuristic, first-touch of the buffers)
template <typename F>
static double lab_time_median_ms(LabTimer* t, int reps, F fn) {
    for (int i = 0; i < 2; i++) { fn(); }
    cudaCheck(cudaDeviceSynchronize());
    std::vector<float> ms(reps);
    for (int i = 0; i < reps; i++) {
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

// ----------------------------------------------------------------------------
// float64 matmuls: the CPU side of classifier.cu and matmul_gelu.cu (the rest of it is
// dev/cpu/kernels_cpu.h). Row-major; each result summed in double, rounded once to float; OpenMP
// over output rows.

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

// Which algorithm (or none) cuBLASLt gave matmul_lt for a configuration. matmul_lt remembers every
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

#ifdef ATTENTION_TILED_CPU_H
// ============================================================================
// The attention labs (attention_forward.cu, attention_backward.cu): compiled where the lab included
// the CPU twin of the flash kernels, dev/cpu/attention_tiled_cpu.h, their reference. Their versions
// are the trainer's attention_forward/backward (the unfused path, and its flash kernels: forward 3,
// backward 4) and the flash versions of attention_flash_versions.h; the checks cover every scheme.
// Shapes and names follow the trainer: B batch, T sequence, H query heads, Hkv kv heads, hd head
// size, C = H * hd, W the fused projection's width (QKVLayout.width).

// The versions of each lab: the `fused` argument of attn_shape_make and LabAttn.flash_fwd/flash_bwd
// (LabVersion.variant: 0 unfused, else the flash version). Versions 1 to 3 are in both labs (version 3:
// forward 128-row tiles, the trainer's; backward one pass); version 4 is the backward lab's alone (the
// trainer's backward, run after version 3's forward); version 5 is in both, the lab's own (issue 58: the
// backward runs after the forward's version 5).
#define LAB_ATTN_V1 {1, "unfused: permute + cuBLASLt strided-batched matmuls + softmax kernels", 0, 0}
#define LAB_ATTN_V2 {2, "fused flash: mma.sync bf16 tensor cores, 64x64 tiles", 1, 2}
#define LAB_ATTN_V3 {3, "fused flash v3: ldmatrix, cp.async; forward 128-row tiles, backward one pass (ordered dQ sum)", 1, 3}
static const LabVersion lab_attn_forward_versions[] = {
    LAB_ATTN_V1, LAB_ATTN_V2, LAB_ATTN_V3,
    {5, "fused flash v5: 32 query rows per warp, 128-key tiles at hd 64, one-FFMA exp2, O through shared memory", 1, 5},
    {6, "fused flash v6 (sm_90a): a producer warpgroup's bulk tensor copies on mbarriers, two consumers' wgmma", 1, 6},
    {7, "fused flash v7 (sm_90a): v6 with S issued under the last P V, the consumers' ping-pong, 3 stages at hd 64", 1, 7},
};
static const LabVersion lab_attn_backward_versions[] = {
    LAB_ATTN_V1, LAB_ATTN_V2, LAB_ATTN_V3,
    {4, "fused flash v4 (v3's forward): v2's two kernels, tiles by cp.async, operands by ldmatrix", 1, 4},
    {5, "fused flash v5 (v5's forward): 128-key dK/dV CTAs (32 keys a warp at hd 64), 3 stages; 32-row dQ warps", 1, 5},
    {6, "fused flash v6 (sm_90a, v6's forward): v5's two kernels as a producer warpgroup's bulk copies and two consumers' wgmma", 1, 6},
    {7, "fused flash v7 (sm_90a, v7's forward): v6 with the consumers' ping-pong, two turns a step", 1, 7},
    {8, "fused flash v8 (sm_90a, v7's forward): v7 with each step's P and dS under the last step's gradient wgmma, 3 stages", 1, 8},
};
// one lab's table: the forward's or the backward's
static const LabVersion* lab_attn_versions(int backward) { return backward ? lab_attn_backward_versions : lab_attn_forward_versions; }
static int lab_attn_num_versions(int backward) {
    return backward ? LAB_COUNT(lab_attn_backward_versions) : LAB_COUNT(lab_attn_forward_versions);
}

static LabSpec lab_attn_spec(const char* name, const char* what, const char* bench, int backward) {
    LabSpec s;
    s.name = name;
    s.what = what;
    s.versions = lab_attn_versions(backward);
    s.num_versions = lab_attn_num_versions(backward);
    s.schemes = 1;
    s.check = "compare every version with the CPU twin and with version 1";
    s.bench = bench;
    s.quick = "--check for compute-sanitizer runs (implies --check): T 65 and 200, hd 64 and 128, H 2,\n"
              "                Hkv 2 and 1; no guard bytes (memcheck sees each buffer's exact end), one run per\n"
              "                version, and version 1 runs only where selected (no baseline for later versions)";
    s.large = "the flash versions' index arithmetic at the largest shape the trainer admits (B*T*C just\n"
              "                under 2^31, the projection past 2^32): each kernel's CTAs of the last head of the last\n"
              "                batch row (only those on the CPU runtime) against the CPU twin of that row";
    s.long_bench = "--bench on issue 59's grid instead: B 8, H 12, T 1024 to 16384, hd 64 and 128, the flash\n"
                   "                versions (not version 1: its (B, H, T, T) buffers), median of 10 runs; sdpa_bench.py --long";
    return s;
}

// versions 6 and 7 of both labs (and the backward's 8) need an sm_90a build on a compute capability 9.0 GPU (flash6_available):
// elsewhere one SKIP line each says so and the other versions run; 0 when they were all that was asked for
static int lab_attn_drop_unavailable(LabArgs* a) {
#if PRECISION_IS_BF16
    if (flash6_available()) { return 1; }
    for (int v : {6, 7, 8}) {
        if (!lab_version_selected(a, v)) { continue; }
        printf("SKIP %s v%d: needs an sm_90a build (make labs on an H100 or H200) and a compute capability 9.0 GPU\n", a->name, v);
        a->versions.erase(std::remove(a->versions.begin(), a->versions.end(), v), a->versions.end());
    }
    return !a->versions.empty();
#else
    return 1;
#endif
}

// the attention labs' own use of --quick: no guard bytes
static void lab_attn_apply_args(const LabArgs* a) {
    if (a->quick) { g_lab_guard = 0; }
    if (a->large && !PRECISION_IS_BF16) {
        lab_arg_error(a, "--large checks the flash kernels, which BF16 builds have (HINT: build/%s, make labs)", a->spec->name);
    }
}

// ----------------------------------------------------------------------------
// tolerances (relative error ||out - ref|| / ||ref|| of a whole tensor)
//
// BF16, 1e-2. bf16 keeps 8 significant bits (unit roundoff 2^-9 = 2e-3). Both labs feed the CPU twin
// the same bf16-rounded inputs, so what remains is rounding inside each path: the outputs (one bf16
// rounding, 2^-9 relative per element); version 1 also stores the scores S, the probabilities P and
// dP, dS in bf16 between its kernels; version 2 rounds P and dS to bf16 before their matmuls (the
// mma inputs) and keeps S, row_max, row_sum, lse and the accumulators in fp32. A numpy emulation of
// both paths (each rounding placed as in the kernels, inputs N(0, 1), scores of std 1, T 63..1024,
// hd 64 and 128) gave, against float64: version 1 3e-3..5e-3, version 2 2e-3..3e-3, version 2 vs
// version 1 <= 5.2e-3. 1e-2 is twice the worst of these; a logic error (a wrong mask, a dropped
// tile, a wrong head or row offset) gives 1e-1 or more. The inputs are therefore drawn N(0, 1): with
// larger scores (std 4) version 1 reaches 1.2e-2 (its bf16 S and dP).
// lse (version 2), 1e-4: fp32 arithmetic on both sides (mma with fp32 accumulation vs float loops),
// only the summation order and the approximate exp2/log2 of --use_fast_math differ (emulated 6e-8).
// FP32 (version 1 only), 1e-5: no rounding to 16 bits anywhere, cuBLASLt with CUBLAS_COMPUTE_32F
// (TF32 off) vs the twin's float loops: summation order only (emulated <= 5e-7 at T >= 63).
// Where q and k are one tensor (qk_shared, qkv_shared) each row's score with itself is scale |k_t|^2
// ~ sqrt(hd) = 8..11: attention is nearly one-hot and dq + dk, one buffer, cancels to a few percent of
// its terms, ill-conditioned for any bf16 path (emulated: 1.4e-2 .. 0.7 against float64 for both
// versions at hd 64 and 128). Their shared columns are therefore drawn with variance 1 / sqrt(hd)
// (self-score ~ 1; emulated then <= 4e-3, version 2 vs version 1 included).
// A gradient that is zero in exact arithmetic (dq and dk at T = 1: one key, P = 1) is noise on both
// sides; its error is measured against 1e-3 of datty's root mean square instead (lab_floor_norm).
#if PRECISION_IS_BF16
static const double LAB_TOL = 1e-2;
#else
static const double LAB_TOL = 1e-5;
#endif
static const double LAB_TOL_LSE = 1e-4;

// whether version v runs in the check: selected, or version 1 as the baseline of later versions
// (not with --quick)
static int lab_version_runs(const LabArgs* a, const LabVersion* v) {
    return lab_version_selected(a, v->version) || (v->version == 1 && lab_version_in_build(v) && !a->quick);
}

// runs of each version per trial: two (the second must be bit-identical), one with --quick
static int lab_runs_per_trial(const LabArgs* a) { return a->quick ? 1 : 2; }

// ----------------------------------------------------------------------------
// the shapes of the check

typedef struct {
    int scheme, B, T, H, Hkv, hd;
} LabShape;

static GPT2Config lab_config(const LabShape* sh) {
    // one layer; vocabulary and MLP do not matter to attention, but the config must be a valid one
    GPT2Config c = gpt2_config_default(1, sh->H, sh->H * sh->hd, sh->T, 64, 64);
    c.scheme = sh->scheme;
    c.num_kv_heads = sh->Hkv;
    return c;
}

static void lab_shape_describe(const LabShape* sh, char* out, size_t n) {
    snprintf(out, n, "%s T=%d H=%d Hkv=%d hd=%d", qkv_scheme_name(sh->scheme), sh->T, sh->H, sh->Hkv, sh->hd);
}

// Every scheme (or the one asked for) x Hkv in {H, H/2, 1} where gpt2_config_check allows it x
// T in {1, 63, 64, 65, 200, 1024} x hd in {16 (version 1 only), 64, 128}, B = 2, H = 4.
// quick (compute-sanitizer runs): T in {65, 200}, hd in {64, 128}, H = 2, Hkv in {H, 1}.
static std::vector<LabShape> lab_check_shapes(int scheme_filter, int quick) {
    static const int Ts[] = {1, 63, 64, 65, 200, 1024};
    static const int Ts_quick[] = {65, 200};
    static const int hds[] = {16, 64, 128};
    static const int hds_quick[] = {64, 128};
    const int B = 2, H = quick ? 2 : 4;
    const int Hkvs[] = {H, H / 2, 1};
    std::vector<LabShape> out;
    for (int s = 0; s < QKV_NUM_SCHEMES; s++) {
        if (scheme_filter >= 0 && s != scheme_filter) { continue; }
        for (int ki = 0; ki < 3; ki++) {
            if (quick && ki == 1) { continue; }
            for (int hi = 0; hi < (quick ? 2 : 3); hi++) {
                for (int ti = 0; ti < (quick ? 2 : 6); ti++) {
                    LabShape sh;
                    sh.scheme = s;
                    sh.B = B;
                    sh.H = H;
                    sh.Hkv = Hkvs[ki];
                    sh.hd = quick ? hds_quick[hi] : hds[hi];
                    sh.T = quick ? Ts_quick[ti] : Ts[ti];
                    GPT2Config c = lab_config(&sh);
                    char msg[512];
                    if (gpt2_config_check(&c, msg, sizeof(msg))) { out.push_back(sh); }
                }
            }
        }
    }
    return out;
}

// ----------------------------------------------------------------------------
// inputs: x (B, T, C), qkv (B, T, W), qres (B, T, C) for q_residual, datty (B, T, C); N(0, 1),
// rounded to floatX (shared q = k columns scaled, see the tolerances). The host keeps both the floatX
// bytes and their float values (what the CPU twin reads, so that both sides see the same numbers).

struct LabTensor : LabHostX { // and its device copy
    LabBuf d;
};

// host only: values and bytes; no device copy yet (lab_tensor_upload)
static void lab_tensor_fill(LabTensor* t, size_t n, unsigned long long* rng, const char* name) {
    t->d = lab_buf_none(name);
    t->f = lab_normal_vec_paired(n, rng);
    lab_host_x_round(t);
}

// multiplies columns [c0, c0 + cols) of t, rows of `stride`, by `factor`, rounding again to floatX
static void lab_tensor_scale_columns(LabTensor* t, size_t stride, size_t c0, size_t cols, float factor) {
    const size_t rows = t->f.size() / stride;
    for (size_t r = 0; r < rows; r++) {
        for (size_t c = c0; c < c0 + cols; c++) { t->f[r * stride + c] *= factor; }
    }
    lab_host_x_round(t);
}

static void lab_tensor_upload(LabTensor* t) {
    if (!t->f.empty()) { t->d = lab_buf_input(t->x, t->d.name); }
}

static void lab_tensor_free(LabTensor* t) {
    lab_buf_free(&t->d);
    t->f.clear();
    t->x.clear();
}

typedef struct {
    LabShape sh;
    GPT2Config cfg;
    unsigned long long seed;
    int C, W;
    int has_qres;
    LabTensor x, qkv, qres, datty; // qres: q_residual only; datty: with gradients only
} LabInputs;

// host only (the CPU twin needs no device); lab_inputs_make also copies them to the device
static void lab_inputs_fill(LabInputs* in, const LabShape* sh, unsigned long long base_seed, int with_grad) {
    in->sh = *sh;
    in->cfg = lab_config(sh);
    in->seed = lab_trial_seed(base_seed, {sh->scheme, sh->B, sh->T, sh->H, sh->Hkv, sh->hd});
    in->C = sh->H * sh->hd;
    const QKVLayout layout = qkv_layout(&in->cfg);
    in->W = layout.width;
    in->has_qres = qkv_has_residual_query(&layout);
    unsigned long long rng = in->seed;
    const size_t BT = (size_t)sh->B * sh->T;
    lab_tensor_fill(&in->x, BT * in->C, &rng, "x");
    lab_tensor_fill(&in->qkv, BT * in->W, &rng, "qkv");
    const QKVLayout L = qkv_layout(&in->cfg);
    if (qkv_roles_share(L.q, L.k)) { // see the tolerances: self-scores ~ 1 instead of ~ sqrt(hd)
        lab_tensor_scale_columns(&in->qkv, (size_t)in->W, (size_t)L.k.offset, (size_t)L.k.channels,
                                 powf((float)sh->hd, -0.25f));
    }
    in->qres.f.clear();
    in->qres.d = lab_buf_none("qres");
    in->datty.f.clear();
    in->datty.d = lab_buf_none("datty");
    if (in->has_qres) { lab_tensor_fill(&in->qres, BT * in->C, &rng, "qres"); }
    if (with_grad) { lab_tensor_fill(&in->datty, BT * in->C, &rng, "datty"); }
}

static void lab_inputs_make(LabInputs* in, const LabShape* sh, unsigned long long base_seed, int with_grad) {
    lab_inputs_fill(in, sh, base_seed, with_grad);
    lab_tensor_upload(&in->x);
    lab_tensor_upload(&in->qkv);
    lab_tensor_upload(&in->qres);
    lab_tensor_upload(&in->datty);
}

static void lab_inputs_free(LabInputs* in) {
    lab_tensor_free(&in->x);
    lab_tensor_free(&in->qkv);
    lab_tensor_free(&in->qres);
    lab_tensor_free(&in->datty);
}

// appends a reason to *why when a device copy changed (inputs are read-only to both passes)
static void lab_inputs_intact(const LabInputs* in, std::string* why) {
    lab_buf_intact(&in->x.d, in->x.x, why);
    lab_buf_intact(&in->qkv.d, in->qkv.x, why);
    lab_buf_intact(&in->qres.d, in->qres.x, why);
    lab_buf_intact(&in->datty.d, in->datty.x, why);
}

static const floatX* lab_in(const LabTensor* t) { return (const floatX*)t->d.ptr; }

// the layer's source tensors on the device, as the trainer passes them: projection, x, q_residual's
// query (NULL where the scheme has none)
static QKVSources<const floatX> lab_sources(const LabInputs* in) {
    return qkv_sources<const floatX>(lab_in(&in->qkv), lab_in(&in->x), lab_in(&in->qres));
}

// "q", "k=v", "q=k=v": the roles stored in tensor r (owner r)
static std::string lab_stored_name(const AttnShape* s, int r) {
    static const char* const names[3] = {"q", "k", "v"};
    std::string n;
    for (int i = 0; i < 3; i++) {
        if (s->owner[i] == r) { n += (n.empty() ? "" : "=") + std::string(names[i]); }
    }
    return n;
}

// The CPU twin's forward on the trial's (rounded) inputs: out (B, T, C), lse (B, H, T). q, k, v are
// found as on the device: qkv_role_view of the host copies of the sources.
static void lab_twin_forward(LabInputs* in, std::vector<float>* out, std::vector<float>* lse) {
    const LabShape* sh = &in->sh;
    const AttnShape s = attn_shape_make(&in->cfg, sh->B, sh->T, 0);
    const QKVSources<float> src =
        qkv_sources<float>(in->qkv.f.data(), in->x.f.data(), in->has_qres ? in->qres.f.data() : NULL);
    out->assign((size_t)sh->B * sh->T * in->C, 0.0f);
    lse->assign((size_t)sh->B * sh->H * sh->T, 0.0f);
    attention_tiled_forward(out->data(), lse->data(), qkv_role_view(&s.layout, 0, sh->hd, src),
                            qkv_role_view(&s.layout, 1, sh->hd, src), qkv_role_view(&s.layout, 2, sh->hd, src), sh->B,
                            sh->T, sh->H, sh->Hkv, sh->hd, s.scale);
}

// The twin's gradients, sent where the trainer sends them: zeroed dqkv (B, T, W), dx and dqres
// (B, T, C), then += through views of the same layout (aliased roles sum, as in the CPU trainer).
// out, lse: lab_twin_forward's. expect_dx: a role is x; expect_dqres: q is q_residual's query.
typedef struct {
    std::vector<float> dqkv, dx, dqres;
    int expect_dx, expect_dqres;
} LabTwinGrads;

static void lab_twin_backward(LabInputs* in, const std::vector<float>& out, const std::vector<float>& lse,
                              LabTwinGrads* g) {
    const LabShape* sh = &in->sh;
    const size_t BT = (size_t)sh->B * sh->T;
    const AttnShape s = attn_shape_make(&in->cfg, sh->B, sh->T, 0);
    g->dqkv.assign(BT * in->W, 0.0f);
    g->dx.assign(BT * in->C, 0.0f);
    g->dqres.assign(BT * in->C, 0.0f);
    g->expect_dx = 0;
    for (int r = 0; r < 3; r++) { g->expect_dx |= qkv_layout_role(&s.layout, r).source == QKV_SRC_INPUT; }
    g->expect_dqres = s.layout.q.source == QKV_SRC_RESIDUAL_QUERY;
    const QKVSources<float> src =
        qkv_sources<float>(in->qkv.f.data(), in->x.f.data(), in->has_qres ? in->qres.f.data() : NULL);
    const QKVSources<float> dsrc =
        qkv_sources<float>(g->dqkv.data(), g->dx.data(), in->has_qres ? g->dqres.data() : NULL);
    std::vector<float> delta((size_t)sh->B * sh->H * sh->T);
    attention_tiled_backward(qkv_role_view(&s.layout, 0, sh->hd, dsrc), qkv_role_view(&s.layout, 1, sh->hd, dsrc),
                             qkv_role_view(&s.layout, 2, sh->hd, dsrc), delta.data(), in->datty.f.data(), out.data(),
                             lse.data(), qkv_role_view(&s.layout, 0, sh->hd, src),
                             qkv_role_view(&s.layout, 1, sh->hd, src), qkv_role_view(&s.layout, 2, sh->hd, src), sh->B,
                             sh->T, sh->H, sh->Hkv, sh->hd, s.scale);
}

// ----------------------------------------------------------------------------
// the buffers of one path (AttnBuffers, AttnGradBuffers), each a LabBuf with guards

typedef struct {
    AttnShape s;
    int flash_fwd, flash_bwd;              // the fused path's versions (lab_attn_alloc)
    LabBuf perm[3], att, yperm, lse;       // forward: unfused perm/att/yperm, fused lse
    LabBuf dperm[3], datt, dyperm, delta;  // backward scratch
    LabBuf dq_accum, sync;                 // backward scratch of flash version 3
    AttnBuffers bufs;
    AttnGradBuffers gbufs;
} LabAttn;

static void lab_attn_alloc(LabAttn* a, const AttnShape* s, int flash_version, int with_grad) {
    static const char* const perm_names[3] = {"perm[0]", "perm[1]", "perm[2]"};
    static const char* const dperm_names[3] = {"dperm[0]", "dperm[1]", "dperm[2]"};
    a->s = *s;
    // every flash version runs its own forward but two backward ones: 4 after version 3's (the trainer's
    // pair; version 5's backward after forward version 5, the pair issue 58 would move into the trainer
    // together) and 8 after version 7's (there is no forward 8: the forward's overlaps are version 7's).
    // No list of versions here: a new forward version left off one ran version 3 in its place, and its
    // checks passed (mutants m77 and m78 showed it)
    a->flash_fwd = flash_version == 4 || flash_version == 0 ? 3 : flash_version == 8 ? 7 : flash_version;
    a->flash_bwd = flash_version;
    const size_t B = (size_t)s->B, T = (size_t)s->T, H = (size_t)s->H, hd = (size_t)s->hd, X = sizeof(floatX);
    const size_t nheads[3] = {H, (size_t)s->Hkv, (size_t)s->Hkv};
    for (int r = 0; r < 3; r++) {
        const int stored = !s->fused && s->owner[r] == r;
        a->perm[r] = stored ? lab_buf_alloc(B * nheads[r] * T * hd * X, perm_names[r]) : lab_buf_none(perm_names[r]);
        a->dperm[r] = stored && with_grad ? lab_buf_alloc(B * nheads[r] * T * hd * X, dperm_names[r])
                                          : lab_buf_none(dperm_names[r]);
    }
    a->att = !s->fused ? lab_buf_alloc(B * H * T * T * X, "att") : lab_buf_none("att");
    a->yperm = !s->fused ? lab_buf_alloc(B * H * T * hd * X, "yperm") : lab_buf_none("yperm");
    a->lse = s->fused ? lab_buf_alloc(B * H * T * sizeof(float), "lse") : lab_buf_none("lse");
    a->datt = !s->fused && with_grad ? lab_buf_alloc(B * H * T * T * X, "datt") : lab_buf_none("datt");
    a->dyperm = !s->fused && with_grad ? lab_buf_alloc(B * H * T * hd * X, "dyperm") : lab_buf_none("dyperm");
    a->delta = s->fused && with_grad ? lab_buf_alloc(B * H * T * sizeof(float), "delta") : lab_buf_none("delta");
    const int v3 = s->fused && a->flash_bwd == 3 && with_grad;
    a->dq_accum = v3 ? lab_buf_alloc(B * T * H * hd * sizeof(float), "dq_accum") : lab_buf_none("dq_accum");
    a->sync = v3 ? lab_buf_alloc(flash3_bwd_sync_words(s->B, s->H, s->T, FLASH3_BWD_BLOCK_M(s->hd)) * sizeof(unsigned int), "sync")
                 : lab_buf_none("sync");
    for (int r = 0; r < 3; r++) {
        a->bufs.perm[r] = (floatX*)a->perm[r].ptr;
        a->gbufs.dperm[r] = (floatX*)a->dperm[r].ptr;
    }
    a->bufs.att = (floatX*)a->att.ptr;
    a->bufs.yperm = (floatX*)a->yperm.ptr;
    a->bufs.lse = (float*)a->lse.ptr;
    a->gbufs.datt = (floatX*)a->datt.ptr;
    a->gbufs.dyperm = (floatX*)a->dyperm.ptr;
    a->gbufs.delta = (float*)a->delta.ptr;
}

// every buffer of the path, forward ones first
static std::vector<LabBuf*> lab_attn_bufs(LabAttn* a) {
    return {&a->perm[0], &a->perm[1], &a->perm[2], &a->att, &a->yperm, &a->lse,
            &a->dperm[0], &a->dperm[1], &a->dperm[2], &a->datt, &a->dyperm, &a->delta, &a->dq_accum, &a->sync};
}

static void lab_attn_free(LabAttn* a) {
    for (LabBuf* b : lab_attn_bufs(a)) { lab_buf_free(b); }
}

static void lab_attn_poison_forward(LabAttn* a) {
    const std::vector<LabBuf*> all = lab_attn_bufs(a);
    for (size_t i = 0; i < 6; i++) { lab_buf_poison(all[i]); }
}

static void lab_attn_poison_backward(LabAttn* a) {
    const std::vector<LabBuf*> all = lab_attn_bufs(a);
    for (size_t i = 6; i < all.size(); i++) { lab_buf_poison(all[i]); }
}

static void lab_attn_guards_ok(LabAttn* a, std::string* why) {
    for (LabBuf* b : lab_attn_bufs(a)) { lab_buf_guards_ok(b, why); }
}

// the forward buffers' bytes (what the backward pass reads and must not change; yperm is forward scratch)
static std::vector<unsigned char> lab_attn_forward_bytes(const LabAttn* a) {
    std::vector<unsigned char> all;
    const LabBuf* bs[5] = {&a->perm[0], &a->perm[1], &a->perm[2], &a->att, &a->lse};
    for (int i = 0; i < 5; i++) {
        const std::vector<unsigned char> h = lab_buf_download(bs[i]);
        all.insert(all.end(), h.begin(), h.end());
    }
    return all;
}

// the AttnShape of a version for the trial's config, or 0 when the version has no kernel for it
static int lab_version_shape(const LabVersion* v, const LabInputs* in, AttnShape* s) {
    *s = attn_shape_make(&in->cfg, in->sh.B, in->sh.T, v->variant != 0);
    return s->fused == (v->variant != 0);
}

// the lab's attention_forward: the trainer's, with the version's own flash kernel where it is not the trainer's
static void lab_attention_forward(const LabAttn* at, floatX* atty, QKVSources<const floatX> src) {
    const AttnShape* s = &at->s;
    if (!s->fused || at->flash_fwd == FLASH_FORWARD_VERSION) {
        attention_forward(atty, &at->bufs, src, s);
        return;
    }
    lab_flash_forward(at->flash_fwd, atty, at->bufs.lse, qkv_role_view(&s->layout, 0, s->hd, src),
                      qkv_role_view(&s->layout, 1, s->hd, src), qkv_role_view(&s->layout, 2, s->hd, src), s);
}

// the lab's attention_backward, likewise; returns 1 when dsrc.input was written
static int lab_attention_backward(const LabAttn* at, QKVSources<floatX> dsrc, const floatX* datty, const floatX* atty,
                                  QKVSources<const floatX> src) {
    const AttnShape* s = &at->s;
    if (!s->fused || at->flash_bwd == FLASH_BACKWARD_VERSION) {
        return attention_backward(dsrc, &at->gbufs, datty, atty, &at->bufs, src, s);
    }
    AttnGradDest dst[3];
    const int wrote_dx = attention_fused_grad_dests(dst, dsrc, s);
    lab_flash_backward(at->flash_bwd, dst[0], dst[1], dst[2], at->gbufs.delta, (float*)at->dq_accum.ptr,
                       (unsigned int*)at->sync.ptr, datty, atty, at->bufs.lse, qkv_role_view(&s->layout, 0, s->hd, src),
                       qkv_role_view(&s->layout, 1, s->hd, src), qkv_role_view(&s->layout, 2, s->hd, src), s);
    return wrote_dx;
}

// ----------------------------------------------------------------------------
// comparisons: "  <scheme> T=.. H=.. Hkv=.. hd=.. <tensor> rel_err=... max_abs=... at b=.. t=.. (vN vs ref)"

static LabIndex lab_index_btchd(int B, int T, int heads, int hd) { // (B, T, heads * hd)
    LabIndex ix = {4, {(size_t)B, (size_t)T, (size_t)heads, (size_t)hd}, {"b", "t", "h", "d"}};
    return ix;
}
static LabIndex lab_index_bht(int B, int H, int T) { // (B, H, T)
    LabIndex ix = {3, {(size_t)B, (size_t)H, (size_t)T, 1}, {"b", "h", "t", ""}};
    return ix;
}

// 1e-3 of datty's root mean square, over n elements: the size under which a gradient counts as zero
static double lab_floor_norm(const std::vector<float>& datty, size_t n) {
    const double rms = datty.empty() ? 0.0 : lab_norm(datty.data(), datty.size()) / sqrt((double)datty.size());
    return 1e-3 * rms * sqrt((double)n);
}

// columns [c0, c0 + cols) of rows (n_rows, stride): a contiguous (n_rows, cols) copy
static std::vector<float> lab_columns(const float* a, size_t n_rows, size_t stride, size_t c0, size_t cols) {
    std::vector<float> out(n_rows * cols);
    for (size_t r = 0; r < n_rows; r++) { memcpy(&out[r * cols], a + r * stride + c0, cols * sizeof(float)); }
    return out;
}

// one PASS/FAIL line per (version, scheme, shape); returns 1 on FAIL
static int lab_attn_verdict(const LabArgs* a, int version, const LabInputs* in, const LabVerdict* v) {
    char what[192];
    lab_shape_describe(&in->sh, what, sizeof(what));
    snprintf(what + strlen(what), sizeof(what) - strlen(what), " B=%d", in->sh.B);
    return lab_verdict_print(a, version, what, in->seed, !a->quick, v);
}

// ----------------------------------------------------------------------------
// benchmark: the d12 model's heads (H = 12, hd = 64), standard layout; B 8 at T 1024, 2048, 4096 (the
// shapes dev/cuda/sdpa_bench.py times too), then d12's micro-step, B 64 at T 1024: 12 times that is the
// flash rows of a d12 training step (`--profile`), so a lab version's effect on the step is read before
// it enters the trainer

#define LAB_BENCH_B 8
#define LAB_BENCH_H 12
#define LAB_BENCH_HD 64
#define LAB_BENCH_LONG_REPS 10 // --long: its largest shapes take ~50 ms a backward
typedef struct { int B, T, hd; } LabBenchBT;
static const LabBenchBT lab_bench_shapes[4] = {
    {LAB_BENCH_B, 1024, LAB_BENCH_HD}, {LAB_BENCH_B, 2048, LAB_BENCH_HD}, {LAB_BENCH_B, 4096, LAB_BENCH_HD}, {64, 1024, LAB_BENCH_HD}};
// --long: issue 59's grid, where its bar is 1.0x PyTorch SDPA at every T from 1024 to 16384, hd 64 and 128
// (dev/cuda/sdpa_bench.py --long times the same)
static const LabBenchBT lab_bench_long_shapes[10] = {
    {LAB_BENCH_B, 1024, 64},  {LAB_BENCH_B, 2048, 64},  {LAB_BENCH_B, 4096, 64},  {LAB_BENCH_B, 8192, 64},  {LAB_BENCH_B, 16384, 64},
    {LAB_BENCH_B, 1024, 128}, {LAB_BENCH_B, 2048, 128}, {LAB_BENCH_B, 4096, 128}, {LAB_BENCH_B, 8192, 128}, {LAB_BENCH_B, 16384, 128}};
static std::vector<LabBenchBT> lab_bench_list(const LabArgs* a) {
    return a->long_bench ? std::vector<LabBenchBT>(lab_bench_long_shapes, lab_bench_long_shapes + LAB_COUNT(lab_bench_long_shapes))
                         : std::vector<LabBenchBT>(lab_bench_shapes, lab_bench_shapes + LAB_COUNT(lab_bench_shapes));
}
static int lab_bench_reps(const LabArgs* a) { return a->long_bench ? LAB_BENCH_LONG_REPS : LAB_BENCH_REPS; }
// whether the bench times version v: selected, and in --long a flash version
static int lab_bench_runs(const LabArgs* a, const LabVersion* v) {
    return lab_version_selected(a, v->version) && (!a->long_bench || v->variant != 0);
}

// FLOPs: causal, QK^T and PV over half of the T x T square: 2 matmuls x 2 B H T^2 hd / 2
static double lab_flops_forward(int B, int T, int H, int hd) { return 2.0 * B * H * (double)T * T * hd; }
static double lab_flops_backward(int B, int T, int H, int hd) { return 2.5 * lab_flops_forward(B, T, H, hd); }
// bytes: q, O (H heads), k, v (Hkv heads) of floatX and lse (fp32) once
static double lab_bytes_forward(int B, int T, int H, int Hkv, int hd) {
    return (double)sizeof(floatX) * B * T * hd * (2.0 * H + 2.0 * Hkv) + 4.0 * B * H * T;
}
// plus dO, dq (H heads), dk, dv (Hkv heads)
static double lab_bytes_backward(int B, int T, int H, int Hkv, int hd) {
    return lab_bytes_forward(B, T, H, Hkv, hd) + (double)sizeof(floatX) * B * T * hd * (2.0 * H + 2.0 * Hkv);
}

// "predicted <pass> T=.. B=..: ..." (lab_bench_predicted)
static void lab_attn_bench_predicted(const char* pass, double flops, double bytes, const LabShape* sh) {
    char what[64];
    snprintf(what, sizeof(what), "%s T=%d B=%d hd=%d", pass, sh->T, sh->B, sh->hd);
    lab_bench_predicted(what, flops, bytes);
}

// "bench vN <pass> T=.. B=.. H=.. hd=.. ms=.. TFLOP/s=.. GB/s=..": dev/cuda/sdpa_bench.py prints the
// same, and dev/test/gpu_suite.sh compares the two
static void lab_attn_bench_line(int version, const char* pass, const LabShape* sh, double ms, double flops, double bytes) {
    printf("bench v%d %-16s T=%d B=%d H=%d hd=%d ms=%.4f TFLOP/s=%.1f GB/s=%.1f\n", version, pass, sh->T, sh->B, sh->H,
           sh->hd, ms, flops / (ms * 1e-3) / 1e12, bytes / (ms * 1e-3) / 1e9);
    fflush(stdout);
}

// the bench's inputs: standard layout, the same allocation as the check
static LabShape lab_bench_shape(LabBenchBT bt) {
    LabShape sh;
    sh.scheme = QKV_STANDARD;
    sh.B = bt.B;
    sh.T = bt.T;
    sh.H = LAB_BENCH_H;
    sh.Hkv = LAB_BENCH_H;
    sh.hd = bt.hd;
    return sh;
}

// the bench's first line: the shapes, the runs, the flush
static void lab_attn_bench_header(const LabArgs* a, const LabTimer* timer) {
    if (a->long_bench) {
        printf("bench --long: B=%d H=Hkv=%d, T 1024 to 16384, hd 64 then 128, standard layout, %s, the flash versions, median of "
               "%d runs, L2 (%zu MiB) flushed before each\n", LAB_BENCH_B, LAB_BENCH_H, PRECISION_NAME, lab_bench_reps(a),
               timer->flush_bytes / 2 >> 20);
    } else {
        printf("bench: B=%d (then 64 at T 1024: d12's micro-step) H=Hkv=%d hd=%d, standard layout (q, k, v columns of qkv "
               "(B, T, 3C)), %s, median of %d runs, L2 (%zu MiB) flushed before each\n", LAB_BENCH_B, LAB_BENCH_H, LAB_BENCH_HD,
               PRECISION_NAME, lab_bench_reps(a), timer->flush_bytes / 2 >> 20);
    }
}

// the bench's inputs, x, qkv and (with_grad) datty N(0, 1), drawn on the device by the trainer's init kernel (the
// host's draws of --long's largest projection, 0.6 G elements, would take tens of seconds of GPU time)
static void lab_bench_inputs_make(LabInputs* in, const LabShape* sh, unsigned long long base_seed, int with_grad) {
    in->sh = *sh;
    in->cfg = lab_config(sh);
    in->seed = lab_trial_seed(base_seed, {sh->scheme, sh->B, sh->T, sh->H, sh->Hkv, sh->hd});
    in->C = sh->H * sh->hd;
    in->W = qkv_layout(&in->cfg).width;
    in->has_qres = 0; // the standard layout
    const size_t BT = (size_t)sh->B * sh->T;
    LabTensor* const tensors[3] = {&in->x, &in->qkv, &in->datty};
    const size_t counts[3] = {BT * in->C, BT * in->W, BT * in->C};
    const char* const names[3] = {"x", "qkv", "datty"};
    for (int i = 0; i < 3; i++) {
        tensors[i]->f.clear();
        tensors[i]->x.clear();
        if (i == 2 && !with_grad) { // the forward's bench: no datty
            tensors[i]->d = lab_buf_none(names[i]);
            continue;
        }
        tensors[i]->d = lab_buf_alloc(counts[i] * sizeof(floatX), names[i]);
        init_normal_kernel<<<grid_for(counts[i], 256), 256>>>((floatX*)tensors[i]->d.ptr, NULL, 0, 0, counts[i], 1.0f, in->seed, i + 1);
        launchCheck();
    }
    in->qres.f.clear();
    in->qres.x.clear();
    in->qres.d = lab_buf_none("qres");
}

// ----------------------------------------------------------------------------
// --large: the far end of the largest shape the trainer admits
//
// Every index a flash kernel computes must stay valid up to the largest shape trainer_shape_check
// admits: B * T * C <= 2^31 - 1 elements (for the labs' one-layer config, whose MLP is narrower than C,
// C is the widest tensor) and B * H <= 65535 (the grids' y). At T 512 and C 256 that is B 16383:
// (B, T, C) tensors of 2^31 - 131072 elements and the projection (B, T, 3C) past 2^32, so an index
// taken in 32 bits, signed or not, lands elsewhere (a guard page, or rows another check finds
// unwritten). Only batch row B - 1 holds data: a fresh B = 1 trial's inputs, whose CPU twin gives the
// expected values; every other byte is poison, mapped without memory on the CPU runtime (cuda_cpu.h).
// Each kernel runs its CTAs of the last head (or kv head) of batch row B - 1, every tile of it, and
// the delta kernel its last block: on the CPU runtime only those (run_only), on a GPU the whole grid
// (NaN elsewhere). That head's rows, every one written, are compared with the twin, and the rest of
// batch row B - 1 must still be poison. Shapes: every scheme (or --scheme), hd 64 (H 4) and 128 (H 2),
// Hkv H and 1.

#define LAB_LARGE_T 512
#define LAB_LARGE_C 256
#define LAB_LARGE_B 16383

#ifdef CUDACPU_CUDA_CPU_H
// which CTAs of kernel run: those of the last head row, where heads_dim ('x' or 'y') is the grid
// dimension of B * H (or B * Hkv) and the other one its tiles; a 1-D grid with 'x', its last block
static void lab_far_ctas(const char* kernel, char heads_dim) {
    const unsigned E = cudacpu::kGridEnd;
    cudacpu::run_only(kernel, heads_dim == 'x' ? dim3(E, 0, 0) : dim3(0, E, 0), dim3(E, E, 0));
}
static void lab_far_ctas_clear() { cudacpu::run_only_clear(); }
#else
static void lab_far_ctas(const char*, char) {} // a GPU runs each whole grid
static void lab_far_ctas_clear() {}
#endif

// the largest shape's LabShape of a trial (B = 1: the trial; B = LAB_LARGE_B: the device's)
static LabShape lab_large_shape(int scheme, int hd, int kv_one, int B) {
    LabShape sh;
    sh.scheme = scheme;
    sh.B = B;
    sh.T = LAB_LARGE_T;
    sh.hd = hd;
    sh.H = LAB_LARGE_C / hd;
    sh.Hkv = kv_one ? 1 : sh.H;
    return sh;
}

// a (B, T, width) tensor of the large shape whose batch row B - 1 is `row` (T * width floatX bytes), the rest poison
static LabBuf lab_large_tensor(const std::vector<unsigned char>& row, size_t width, const char* name) {
    LabBuf b = lab_buf_alloc((size_t)LAB_LARGE_B * LAB_LARGE_T * width * sizeof(floatX), name);
    if (!row.empty()) {
        cudaCheck(cudaMemcpy((unsigned char*)b.ptr + (b.bytes - row.size()), row.data(), row.size(), cudaMemcpyHostToDevice));
    }
    return b;
}

// batch row B - 1 of a (B, ...) buffer of the large shape: its last 1 / B
static std::vector<unsigned char> lab_large_last_row(const LabBuf* b) {
    const size_t row = b->bytes / LAB_LARGE_B;
    return lab_download((const unsigned char*)b->ptr + (b->bytes - row), row);
}

// One tensor of a large trial, batch row B - 1 only: the twin's values (its B = 1 trial), the device's
// bytes (floatX, or fp32 for lse and delta), and which elements a comparison covered
typedef struct {
    const char* name;
    size_t width;                    // elements per row: (T, width), or (1, H * T) for (B, H, T)
    size_t elem;                     // sizeof(floatX) or sizeof(float)
    const float* want;               // the twin's
    std::vector<unsigned char> got;  // the device's
    std::vector<char> covered;
} LabLargeRow;

static LabLargeRow lab_large_row(const char* name, size_t width, size_t elem, const float* want, const LabBuf* dev) {
    LabLargeRow r;
    r.name = name;
    r.width = width;
    r.elem = elem;
    r.want = want;
    r.got = lab_large_last_row(dev);
    r.covered.assign(r.got.size() / elem, 0);
    return r;
}

static float lab_large_value(const LabLargeRow* r, size_t i) {
    if (r->elem == sizeof(float)) { float f; memcpy(&f, &r->got[i * sizeof(float)], sizeof(float)); return f; }
    float f;
    host_x_to_floats(&f, &r->got[i * sizeof(floatX)], 1);
    return f;
}

// compares `rows` rows of `len` elements from element `col` on (a head's columns, or a (H, T) row's
// head) with the twin, and marks them covered
static void lab_large_compare(const char* prefix, int version, LabLargeRow* r, size_t rows, size_t col, size_t len,
                              double floor_norm, double tol, LabVerdict* v) {
    std::vector<float> got, want;
    for (size_t t = 0; t < rows; t++) {
        for (size_t d = 0; d < len; d++) {
            const size_t i = t * r->width + col + d;
            got.push_back(lab_large_value(r, i));
            want.push_back(r->want[i]);
            r->covered[i] = 1;
        }
    }
    const LabIndex ix = lab_index_rows(got.size(), len);
    lab_compare(prefix, version, r->name, "cpu", got.data(), want.data(), got.size(), &ix, floor_norm, tol, v);
}

// what the comparisons did not cover must still be poison: nothing else of batch row B - 1 written
// (on the CPU runtime: a GPU runs every CTA, so it writes the other heads too)
static void lab_large_rest_poison(const LabLargeRow* r, LabVerdict* v) {
#ifdef CUDACPU_CUDA_CPU_H
    size_t written = 0, first = 0;
    for (size_t i = 0; i < r->covered.size(); i++) {
        if (!r->covered[i] && lab_count_poison_bytes(&r->got[i * r->elem], r->elem) != r->elem) {
            if (written++ == 0) { first = i; }
        }
    }
    if (written > 0) {
        v->fail += "; " + std::to_string(written) + " elements of " + r->name + "'s last batch row outside the compared " +
                   "head written (the first at row " + std::to_string(first / r->width) + " col " +
                   std::to_string(first % r->width) + ")";
    }
#else
    (void)r;
    (void)v;
#endif
}

// the stored tensor (of rows[0..n)) a view over the twin's tensors points into, and its column there
static LabLargeRow* lab_large_find(LabLargeRow* rows, int n, const float* ptr, size_t* col) {
    for (int i = 0; i < n; i++) {
        const float* base = rows[i].want;
        if (base != NULL && ptr >= base && ptr < base + rows[i].covered.size()) {
            *col = (size_t)(ptr - base);
            return &rows[i];
        }
    }
    fprintf(stderr, "error: internal: --large: a role's view points into none of its tensors\n");
    exit(EXIT_FAILURE);
}

// "PASS lab vN large <scheme> T=.. H=.. Hkv=.. hd=.. B=16383 (...)"
static int lab_large_verdict(const LabArgs* a, int version, const LabShape* big, unsigned long long seed,
                             const LabVerdict* v) {
    char what[192];
    snprintf(what, sizeof(what), "large ");
    lab_shape_describe(big, what + strlen(what), sizeof(what) - strlen(what));
    snprintf(what + strlen(what), sizeof(what) - strlen(what), " B=%d (the last head of the last batch row)", big->B);
    return lab_verdict_print(a, version, what, seed, 0, v);
}

// a large trial: the B = 1 inputs, their twin, and the device sources whose last batch row they are
typedef struct {
    LabShape big;
    GPT2Config cfg_big;
    LabInputs in;
    std::vector<float> out_ref, lse_ref; // the twin's forward
    LabBuf qkv, x, qres;
} LabLarge;

static void lab_large_make(LabLarge* L, const LabShape* one, const LabShape* big, unsigned long long seed, int with_grad) {
    L->big = *big;
    L->cfg_big = lab_config(big);
    lab_inputs_fill(&L->in, one, seed, with_grad);
    lab_twin_forward(&L->in, &L->out_ref, &L->lse_ref);
    L->qkv = lab_large_tensor(L->in.qkv.x, (size_t)L->in.W, "qkv");
    L->x = lab_large_tensor(L->in.x.x, (size_t)L->in.C, "x");
    L->qres = L->in.has_qres ? lab_large_tensor(L->in.qres.x, (size_t)L->in.C, "qres") : lab_buf_none("qres");
}

static void lab_large_free(LabLarge* L) {
    lab_buf_free(&L->qkv);
    lab_buf_free(&L->x);
    lab_buf_free(&L->qres);
    lab_inputs_free(&L->in);
}

static QKVSources<const floatX> lab_large_sources(const LabLarge* L) {
    return qkv_sources<const floatX>((const floatX*)L->qkv.ptr, (const floatX*)L->x.ptr, (const floatX*)L->qres.ptr);
}

// the forward of flash version `version` on the large shape: atty and lse of the last head
static int lab_large_forward(const LabArgs* a, const LabVersion* ver, LabLarge* L) {
    const LabShape* big = &L->big;
    const int B = big->B, T = big->T, H = big->H, hd = big->hd, C = H * hd;
    char prefix[192];
    lab_shape_describe(big, prefix, sizeof(prefix));
    AttnShape s = attn_shape_make(&L->cfg_big, B, T, 1);
    LabAttn at;
    lab_attn_alloc(&at, &s, ver->variant, 0);
    LabBuf atty = lab_buf_alloc((size_t)B * T * C * sizeof(floatX), "atty");
    if (at.flash_fwd == 3) { lab_far_ctas("flash3_attention_forward_kernel", 'x'); }
    else if (at.flash_fwd == 5) { lab_far_ctas("flash5_attention_forward_kernel", 'x'); }
    else if (at.flash_fwd == 6) { lab_far_ctas("flash6_attention_forward_kernel", 'x'); }
    else if (at.flash_fwd == 7) { lab_far_ctas("flash7_attention_forward_kernel", 'x'); }
    else { lab_far_ctas("flash_attention_forward_kernel", 'y'); }
    lab_attention_forward(&at, (floatX*)atty.ptr, lab_large_sources(L));
    const cudaError_t err = cudaDeviceSynchronize();
    lab_far_ctas_clear();
    cudaCheck(err);
    LabVerdict v;
    lab_verdict_init(&v);
    LabLargeRow out = lab_large_row("atty", (size_t)C, sizeof(floatX), L->out_ref.data(), &atty);
    LabLargeRow lse = lab_large_row("lse", (size_t)H * T, sizeof(float), L->lse_ref.data(), &at.lse);
    lab_large_compare(prefix, ver->version, &out, (size_t)T, (size_t)(H - 1) * hd, (size_t)hd, 0.0, LAB_TOL, &v);
    lab_large_compare(prefix, ver->version, &lse, 1, (size_t)(H - 1) * T, (size_t)T, 0.0, LAB_TOL_LSE, &v);
    lab_large_rest_poison(&out, &v);
    lab_large_rest_poison(&lse, &v);
    lab_buf_free(&atty);
    lab_attn_free(&at);
    return lab_large_verdict(a, ver->version, big, L->in.seed, &v);
}

// the backward of flash version `version` (2, 4 or 5: a delta kernel, a dK/dV kernel, a dQ kernel) on the
// large shape, from the twin's atty and lse: dq of the last head, dk and dv of the last kv head, and
// the delta kernel's last block (the rest of the row's delta is the host's, as the other two read it)
static int lab_large_backward(const LabArgs* a, const LabVersion* ver, LabLarge* L) {
    const LabShape* big = &L->big;
    const int B = big->B, T = big->T, H = big->H, Hkv = big->Hkv, hd = big->hd, C = H * hd, W = L->in.W;
    char prefix[192];
    lab_shape_describe(big, prefix, sizeof(prefix));
    // the twin's backward from the rounded forward output, and D = rowsum(datty * atty) per (h, t)
    LabHostX out_x;
    out_x.f = L->out_ref;
    lab_host_x_round(&out_x);
    LabTwinGrads g;
    lab_twin_backward(&L->in, out_x.f, L->lse_ref, &g);
    std::vector<float> delta_ref((size_t)H * T);
    for (int h = 0; h < H; h++) {
        for (int t = 0; t < T; t++) {
            float sum = 0.0f;
            for (int d = 0; d < hd; d++) {
                const size_t i = (size_t)t * C + (size_t)h * hd + d;
                sum += L->in.datty.f[i] * out_x.f[i];
            }
            delta_ref[(size_t)h * T + t] = sum;
        }
    }
    // the delta kernel's last block: 256 threads of hd / 8 lanes a row, rows j = (t, h) with h fastest,
    // at delta_at(j) in the (H, T) row of delta
    const int delta_rows = 256 / (hd / 8);
    auto delta_at = [&](int j) { return (size_t)(j % H) * T + j / H; };
    std::vector<float> delta_row = delta_ref; // what dK/dV and dQ read of the rest; the last block's rows poison
    for (int j = T * H - delta_rows; j < T * H; j++) {
        const uint32_t nan_bits = 0xFFFFFFFFu;
        memcpy(&delta_row[delta_at(j)], &nan_bits, sizeof(float));
    }
    AttnShape s = attn_shape_make(&L->cfg_big, B, T, 1);
    LabAttn at;
    lab_attn_alloc(&at, &s, ver->variant, 1);
    LabBuf atty = lab_large_tensor(out_x.x, (size_t)C, "atty");
    LabBuf datty = lab_large_tensor(L->in.datty.x, (size_t)C, "datty");
    const size_t stat_row = (size_t)H * T * sizeof(float);
    cudaCheck(cudaMemcpy((unsigned char*)at.lse.ptr + at.lse.bytes - stat_row, L->lse_ref.data(), stat_row, cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy((unsigned char*)at.delta.ptr + at.delta.bytes - stat_row, delta_row.data(), stat_row, cudaMemcpyHostToDevice));
    LabBuf dqkv = lab_buf_alloc((size_t)B * T * W * sizeof(floatX), "dqkv");
    LabBuf dx = lab_buf_alloc((size_t)B * T * C * sizeof(floatX), "dx");
    LabBuf dqres = lab_buf_alloc((size_t)B * T * C * sizeof(floatX), "dqres");
    const QKVSources<floatX> dsrc = qkv_sources<floatX>((floatX*)dqkv.ptr, (floatX*)dx.ptr, (floatX*)dqres.ptr);
    lab_far_ctas("flash_attention_delta_kernel", 'x');
    if (ver->version == 4) {
        lab_far_ctas("flash4_attention_backward_dkdv_kernel", 'y');
        lab_far_ctas("flash4_attention_backward_dq_kernel", 'x');
    } else if (ver->version == 5) {
        lab_far_ctas("flash5_attention_backward_dkdv_kernel", 'x');
        lab_far_ctas("flash5_attention_backward_dq_kernel", 'x');
    } else if (ver->version >= 6) { // one kernel template of each, kVersion 6, 7 or 8
        lab_far_ctas("flash6_attention_backward_dkdv_kernel", 'x');
        lab_far_ctas("flash6_attention_backward_dq_kernel", 'x');
    } else {
        lab_far_ctas("flash_attention_backward_dkdv_kernel", 'y');
        lab_far_ctas("flash_attention_backward_dq_kernel", 'y');
    }
    lab_attention_backward(&at, dsrc, (const floatX*)datty.ptr, (const floatX*)atty.ptr, lab_large_sources(L));
    const cudaError_t err = cudaDeviceSynchronize();
    lab_far_ctas_clear();
    cudaCheck(err);
    LabVerdict v;
    lab_verdict_init(&v);
    LabLargeRow rows[3] = {lab_large_row("dqkv", (size_t)W, sizeof(floatX), g.dqkv.data(), &dqkv),
                           lab_large_row("dx", (size_t)C, sizeof(floatX), g.dx.data(), &dx),
                           lab_large_row("dqres", (size_t)C, sizeof(floatX), g.dqres.data(), &dqres)};
    const QKVSources<float> twin = qkv_sources<float>(g.dqkv.data(), g.dx.data(), g.dqres.data());
    const double floor_norm = lab_floor_norm(L->in.datty.f, (size_t)T * hd);
    for (int r = 0; r < 3; r++) { // q: the last head; k, v: the last kv head (shared roles: the same rows)
        const QKVView<float> view = qkv_role_view(&s.layout, r, hd, twin);
        size_t col = 0;
        LabLargeRow* row = lab_large_find(rows, 3, view.ptr, &col);
        const int head = r == 0 ? H - 1 : Hkv - 1;
        lab_large_compare(prefix, ver->version, row, (size_t)T, col + (size_t)head * hd, (size_t)hd, floor_norm, LAB_TOL, &v);
    }
    // delta: the last block's rows against the host's sums; the rest of the row what was uploaded
    const std::vector<unsigned char> delta_got = lab_large_last_row(&at.delta);
    std::vector<float> dgot, dwant;
    for (int j = T * H - delta_rows; j < T * H; j++) {
        const size_t i = delta_at(j);
        float f;
        memcpy(&f, &delta_got[i * sizeof(float)], sizeof(float));
        dgot.push_back(f);
        dwant.push_back(delta_ref[i]);
    }
    const LabIndex id = lab_index_rows(dgot.size(), 0);
    lab_compare(prefix, ver->version, "delta", "cpu", dgot.data(), dwant.data(), dgot.size(), &id, 0.0, LAB_TOL_LSE, &v);
#ifdef CUDACPU_CUDA_CPU_H // (a GPU runs the delta kernel's every block: its sums replace the host's)
    for (int j = 0; j < T * H - delta_rows; j++) {
        const size_t i = delta_at(j);
        if (memcmp(&delta_got[i * sizeof(float)], &delta_row[i], sizeof(float)) != 0) {
            v.fail += "; delta (h " + std::to_string(j % H) + ", t " + std::to_string(j / H) + ") changed outside the delta kernel's last block";
            break;
        }
    }
#endif
    for (int i = 0; i < 3; i++) { lab_large_rest_poison(&rows[i], &v); }
    lab_buf_free(&dqres);
    lab_buf_free(&dx);
    lab_buf_free(&dqkv);
    lab_buf_free(&datty);
    lab_buf_free(&atty);
    lab_attn_free(&at);
    return lab_large_verdict(a, ver->version, big, L->in.seed, &v);
}

// backward version 3's dQ store (where q shares k's storage it adds scale * dq_accum to dq after the
// one-pass kernel): its grid-stride loop at the large shape, where the B T C / 2 pairs outnumber the
// threads of its capped grid (grid_for) 8 to 1. On the CPU runtime only the block whose loop reaches
// the last pair runs: its pairs in the last batch row must hold old + scale * dq_accum, every other
// element its old value (on a GPU every pair is written).
#if PRECISION_IS_BF16
static int lab_large_dq_store(const LabArgs* a) {
    const int B = LAB_LARGE_B, T = LAB_LARGE_T, C = LAB_LARGE_C, hd = 64, H = C / hd;
    const float scale = 0.125f;
    const size_t pairs = (size_t)B * T * C / 2, row_pairs = (size_t)T * C / 2, first = pairs - row_pairs;
    const size_t threads = (size_t)grid_for(pairs, 256) * 256;
    const unsigned owner = (unsigned)(((pairs - 1) % threads) / 256);
    unsigned long long rng = lab_trial_seed(a->seed, {B, T, C});
    const unsigned long long seed = rng;
    const std::vector<float> acc_row = lab_normal_vec_paired((size_t)T * C, &rng);
    LabHostX old;
    old.f = lab_normal_vec_paired((size_t)T * C, &rng);
    lab_host_x_round(&old);
    LabBuf acc = lab_buf_alloc((size_t)B * T * C * sizeof(float), "dq_accum");
    cudaCheck(cudaMemcpy((unsigned char*)acc.ptr + acc.bytes - acc_row.size() * sizeof(float), acc_row.data(),
                         acc_row.size() * sizeof(float), cudaMemcpyHostToDevice));
    LabBuf dq = lab_large_tensor(old.x, (size_t)C, "dq");
    AttnGradDest dest;
    dest.rows.ptr = (floatX*)dq.ptr;
    dest.rows.stride = C;
    dest.accumulate = 1;
#ifdef CUDACPU_CUDA_CPU_H
    cudacpu::run_only("flash3_dq_store_kernel", dim3(owner, 0, 0), dim3(owner, 0, 0));
    const int whole_grid = 0;
#else
    const int whole_grid = 1;
#endif
    flash3_dq_store(dest, (const float*)acc.ptr, B, T, H, hd, scale);
    const cudaError_t err = cudaDeviceSynchronize();
    lab_far_ctas_clear();
    cudaCheck(err);
    const std::vector<unsigned char> got = lab_large_last_row(&dq);
    LabVerdict v;
    lab_verdict_init(&v);
    std::vector<float> out, want;
    size_t unchanged_wrong = 0;
    for (size_t p = 0; p < row_pairs; p++) {
        const int ours = whole_grid || ((first + p) % threads) / 256 == owner;
        for (int e = 0; e < 2; e++) {
            const size_t i = 2 * p + e;
            if (ours) {
                float f;
                host_x_to_floats(&f, &got[i * sizeof(floatX)], 1);
                out.push_back(f);
                want.push_back(old.f[i] + scale * acc_row[i]);
            } else if (memcmp(&got[i * sizeof(floatX)], &old.x[i * sizeof(floatX)], sizeof(floatX)) != 0) {
                unchanged_wrong++;
            }
        }
    }
    char prefix[160];
    snprintf(prefix, sizeof(prefix), "dq_store B=%d T=%d C=%d", B, T, C);
    const LabIndex ix = lab_index_rows(out.size(), 0);
    lab_compare(prefix, 3, "dq", "cpu", out.data(), want.data(), out.size(), &ix, 0.0, LAB_TOL, &v);
    if (out.empty()) { v.fail += "; no pair of the last batch row is the run block's (internal)"; }
    if (unchanged_wrong > 0) { v.fail += "; " + std::to_string(unchanged_wrong) + " elements of dq outside the run block's pairs changed"; }
    lab_buf_free(&dq);
    lab_buf_free(&acc);
    char what[192];
    snprintf(what, sizeof(what), "large dq_store B=%d T=%d C=%d (%zu pairs, %zu threads; block %u's pairs of the last batch row)",
             B, T, C, pairs, threads, owner);
    return lab_verdict_print(a, 3, what, seed, 0, &v);
}
#endif

// --large: every selected flash version of the lab (backward: its direction) on every large shape
static int lab_attn_large(const LabArgs* a, int backward) {
    printf("large: B=%d T=%d C=%d (B*T*C = %lld elements; the largest the trainer admits is 2^31 - 1), hd 64 and 128, "
           "Hkv H and 1, %s\n", LAB_LARGE_B, LAB_LARGE_T, LAB_LARGE_C, (long long)LAB_LARGE_B * LAB_LARGE_T * LAB_LARGE_C,
           a->scheme >= 0 ? qkv_scheme_name(a->scheme) : "every scheme");
    int failed = 0, ran = 0;
    for (int scheme = 0; scheme < QKV_NUM_SCHEMES; scheme++) {
        if (a->scheme >= 0 && scheme != a->scheme) { continue; }
        for (int hd = 64; hd <= 128; hd *= 2) {
            for (int kv_one = 0; kv_one < 2; kv_one++) {
                const LabShape one = lab_large_shape(scheme, hd, kv_one, 1), big = lab_large_shape(scheme, hd, kv_one, LAB_LARGE_B);
                GPT2Config c = lab_config(&big);
                char msg[512];
                if (!gpt2_config_check(&c, msg, sizeof(msg))) { continue; }
                if ((long long)big.B * big.T * big.H * big.hd > (long long)INT_MAX || !attention_fused_grid_fits(big.B, big.H)) {
                    fprintf(stderr, "error: internal: --large's shape is beyond what trainer_shape_check admits\n");
                    exit(EXIT_FAILURE);
                }
                LabLarge L;
                bool made = false;
                for (int k = 0; k < lab_attn_num_versions(backward); k++) {
                    const LabVersion* ver = &lab_attn_versions(backward)[k];
                    // backward version 3's CTAs wait on each other (a ticket, the ordered dQ): its part is the dQ store below
                    if (ver->variant == 0 || !lab_version_selected(a, ver->version) || (backward && ver->version == 3)) { continue; }
                    if (!made) { lab_large_make(&L, &one, &big, a->seed, backward); made = true; }
                    failed |= backward ? lab_large_backward(a, ver, &L) : lab_large_forward(a, ver, &L);
                    ran++;
                }
                if (made) { lab_large_free(&L); }
            }
        }
    }
#if PRECISION_IS_BF16
    if (backward && lab_version_selected(a, 3)) {
        failed |= lab_large_dq_store(a);
        ran++;
    }
#endif
    if (ran == 0) {
        printf("FAIL %s: --large ran nothing (version %d has no flash kernel)\n", a->name, a->version);
        return 1;
    }
    return failed;
}

#endif // ATTENTION_TILED_CPU_H

#endif // DEV_CUDA_COMMON_H
