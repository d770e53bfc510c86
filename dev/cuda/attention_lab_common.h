/*
attention_lab_common.h: what the two attention labs share (dev/cuda/attention_forward.cu and
dev/cuda/attention_backward.cu): the version table, the command line, inputs with poisoned guards,
the CPU twin's views, the comparisons and the timer. The kernels are the trainer's own: it is
included under TESTING (its main dropped), as test_gpt2.cu does, so a lab runs exactly the code a
training step runs; the reference is the CPU twin of the flash kernels, dev/cpu/attention_tiled_cpu.h.

Shapes and names follow the trainer: B batch, T sequence, H query heads, Hkv kv heads, hd head size,
C = H * hd, W the fused projection's width (QKVLayout.width).
*/
#ifndef ATTENTION_LAB_COMMON_H
#define ATTENTION_LAB_COMMON_H

#define TESTING
#include "../../train_gpt2.cu"
#include "../cpu/attention_tiled_cpu.h"
#include "lab_basics.h"

#include <string>

// ----------------------------------------------------------------------------
// the versions: each is a path of the trainer's attention_forward/backward, chosen by the `fused`
// argument of attn_shape_make. A version 3 is one more row here (and its value of AttnShape.fused).

typedef struct {
    int version;
    const char* what;  // one line
    int fused;         // the AttnShape.fused this version runs; it exists for a shape when
                       // attn_shape_make(config, B, T, fused).fused == fused
    int bf16_only;     // 1: absent from FP32 builds
} LabVersion;

static const LabVersion lab_versions[] = {
    {1, "unfused: permute + cuBLASLt strided-batched matmuls + softmax kernels", 0, 0},
    {2, "fused flash: mma.sync bf16 tensor cores, 64x64 tiles", 1, 1},
};
static const int lab_num_versions = (int)(sizeof(lab_versions) / sizeof(lab_versions[0]));

static int lab_version_in_build(const LabVersion* v) { return !v->bf16_only || PRECISION_IS_BF16; }

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

#define LAB_GUARD 1024                 // bytes of 0xFF around each device buffer (see LabBuf)
static size_t g_lab_guard = LAB_GUARD; // 0 with --quick

// ----------------------------------------------------------------------------
// command line: <lab> [version] [--scheme s] [--seed n] [--check] [--bench] [--quick]

typedef struct {
    const char* name;        // lab_attention_forward[_fp32]
    int version;             // 0: every version of this build
    int scheme;              // -1: every scheme
    unsigned long long seed;
    int check, bench, quick;
} LabArgs;

static void lab_usage(const char* name, const char* what) {
    printf("Usage: %s [version] [--scheme s] [--seed n] [--check] [--bench] [--quick]\n", name);
    printf("  %s (%s build)\n", what, PRECISION_NAME);
    printf("  version       one of:");
    for (int i = 0; i < lab_num_versions; i++) {
        if (lab_version_in_build(&lab_versions[i])) { printf(" %d", lab_versions[i].version); }
    }
    printf(" (default: all of them)\n");
    for (int i = 0; i < lab_num_versions; i++) {
        printf("    %d  %s%s\n", lab_versions[i].version, lab_versions[i].what,
               lab_version_in_build(&lab_versions[i]) ? "" : " (not in FP32 builds: BF16-only)");
    }
    printf("  --scheme s    check one scheme (default: all):");
    for (int s = 0; s < QKV_NUM_SCHEMES; s++) { printf(" %s", qkv_scheme_name(s)); }
    printf("\n  --seed n      base seed of the random inputs (default 1337); each trial mixes in its scheme and shape\n");
    printf("  --check       compare every version with the CPU twin and with version 1 (with neither --check nor --bench: both)\n");
    printf("  --bench       time every version at T = 1024, 2048, 4096 (B 8, H 12, hd 64, standard layout)\n");
    printf("  --quick       with --check, for compute-sanitizer runs: T 65 and 200, hd 64 and 128, H 2, Hkv 2 and 1;\n");
    printf("                no guard bytes (memcheck sees each buffer's exact end), one run per version, and\n");
    printf("                version 1 runs only where selected (no baseline for later versions)\n");
    printf("Without a CUDA device: one SKIP line, exit 0.\n");
}

// Returns 1 to run, 0 after -h (exit 0); on a bad argument prints one "error:" line and exits 1.
static int lab_parse_args(LabArgs* a, int argc, char** argv, const char* base_name, const char* what) {
    static char name[64];
    snprintf(name, sizeof(name), "%s%s", base_name, LAB_SUFFIX);
    a->name = name;
    a->version = 0;
    a->scheme = -1;
    a->seed = 1337;
    a->check = a->bench = a->quick = 0;
    int have_version = 0;
    for (int i = 1; i < argc; i++) {
        const char* arg = argv[i];
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) { lab_usage(name, what); return 0; }
        if (strcmp(arg, "--check") == 0) { a->check = 1; continue; }
        if (strcmp(arg, "--bench") == 0) { a->bench = 1; continue; }
        if (strcmp(arg, "--quick") == 0) { a->quick = 1; continue; }
        if (strcmp(arg, "--scheme") == 0 || strcmp(arg, "--seed") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "error: %s: %s needs a value (%s)\n", name, arg,
                        arg[3] == 'c' ? "a scheme name, see -h" : "a non-negative integer");
                exit(EXIT_FAILURE);
            }
            const char* val = argv[++i];
            if (arg[3] == 'c') {
                a->scheme = qkv_scheme_from_name(val);
                if (a->scheme < 0) {
                    std::string names;
                    for (int s = 0; s < QKV_NUM_SCHEMES; s++) { names += std::string(" ") + qkv_scheme_name(s); }
                    fprintf(stderr, "error: %s: --scheme '%s': expected one of:%s\n", name, val, names.c_str());
                    exit(EXIT_FAILURE);
                }
            } else {
                char* end = NULL;
                errno = 0;
                const unsigned long long v = strtoull(val, &end, 10);
                if (val[0] == '\0' || val[0] == '-' || *end != '\0' || errno != 0) {
                    fprintf(stderr, "error: %s: --seed '%s': expected a non-negative integer\n", name, val);
                    exit(EXIT_FAILURE);
                }
                a->seed = v;
            }
            continue;
        }
        if (arg[0] == '-') {
            fprintf(stderr, "error: %s: unknown flag '%s' (expected [version] --scheme s --seed n --check --bench "
                    "--quick, or -h)\n", name, arg);
            exit(EXIT_FAILURE);
        }
        // the version, a positional number
        char* end = NULL;
        const long v = strtol(arg, &end, 10);
        const LabVersion* found = NULL;
        for (int k = 0; k < lab_num_versions && *end == '\0'; k++) {
            if (lab_versions[k].version == v) { found = &lab_versions[k]; }
        }
        if (have_version || found == NULL) {
            std::string list;
            for (int k = 0; k < lab_num_versions; k++) {
                if (lab_version_in_build(&lab_versions[k])) { list += " " + std::to_string(lab_versions[k].version); }
            }
            fprintf(stderr, "error: %s: version '%s': expected one version, one of:%s\n", name, arg, list.c_str());
            exit(EXIT_FAILURE);
        }
        if (!lab_version_in_build(found)) {
            fprintf(stderr, "error: %s: version %d (%s) does not exist in FP32 builds: the fused kernel is BF16-only "
                    "(HINT: build/%s, make labs)\n", name, found->version, found->what, base_name);
            exit(EXIT_FAILURE);
        }
        a->version = found->version;
        have_version = 1;
    }
    if (a->quick && !a->check) {
        fprintf(stderr, "error: %s: --quick: only with --check (it picks the check's shapes)\n", name);
        exit(EXIT_FAILURE);
    }
    if (!a->check && !a->bench) { a->check = a->bench = 1; }
    if (a->quick) { g_lab_guard = 0; }
    return 1;
}

// whether version v runs under these arguments
static int lab_version_selected(const LabArgs* a, const LabVersion* v) {
    return lab_version_in_build(v) && (a->version == 0 || a->version == v->version);
}

// whether version v runs in the check: selected, or version 1 as the baseline of later versions
// (not with --quick)
static int lab_version_runs(const LabArgs* a, const LabVersion* v) {
    return lab_version_selected(a, v) || (v->version == 1 && lab_version_in_build(v) && !a->quick);
}

// runs of each version per trial: two (the second must be bit-identical), one with --quick
static int lab_runs_per_trial(const LabArgs* a) { return a->quick ? 1 : 2; }

// 1 with a device (cuBLASLt set up), else one SKIP line and 0
static int lab_device_or_skip(const LabArgs* a) {
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
    for (int i = 0; i < lab_num_versions; i++) {
        if (lab_version_selected(a, &lab_versions[i])) { printf(" %d", lab_versions[i].version); }
    }
    printf(", base seed %llu\n", a->seed);
    for (int i = 0; i < lab_num_versions; i++) {
        if (!lab_version_in_build(&lab_versions[i])) {
            printf("version %d (%s): not in FP32 builds, the fused kernel is BF16-only\n", lab_versions[i].version,
                   lab_versions[i].what);
        }
    }
}

// ----------------------------------------------------------------------------
// device buffers with poisoned guards
//
// Every buffer has LAB_GUARD bytes of 0xFF before and after it (a multiple of 256: the buffer stays
// 256-byte aligned, as the trainer's are). Outputs and scratch are filled with 0xFF before every run:
// NaN in fp32 and in bf16, so an element a version does not write, or a scratch value it reads before
// writing, shows as NaN. After every run the guards must still be 0xFF (no write outside a buffer).
// With --quick (the compute-sanitizer runs) there are no guards: each buffer is its own cudaMalloc,
// so that memcheck sees every access past its exact end.


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
    cudaCheck(cudaMemset(b.base, LAB_POISON, bytes + 2 * b.guard));
    return b;
}

static void lab_buf_free(LabBuf* b) {
    if (b->base != NULL) { cudaCheck(cudaFree(b->base)); }
    *b = lab_buf_none(b->name);
}

static void lab_buf_poison(const LabBuf* b) {
    if (b->base != NULL) { cudaCheck(cudaMemset(b->ptr, LAB_POISON, b->bytes)); }
}

static std::vector<unsigned char> lab_buf_download(const LabBuf* b) {
    std::vector<unsigned char> h(b->bytes);
    if (b->base != NULL && b->bytes > 0) { cudaCheck(cudaMemcpy(h.data(), b->ptr, b->bytes, cudaMemcpyDeviceToHost)); }
    return h;
}

static void lab_buf_upload(const LabBuf* b, const std::vector<unsigned char>& h) {
    if (b->base != NULL && b->bytes > 0) { cudaCheck(cudaMemcpy(b->ptr, h.data(), b->bytes, cudaMemcpyHostToDevice)); }
}

// appends to *why and returns 0 when a guard of b changed
static int lab_buf_guards_ok(const LabBuf* b, std::string* why) {
    if (b->base == NULL || b->guard == 0) { return 1; }
    unsigned char g[2][LAB_GUARD];
    cudaCheck(cudaMemcpy(g[0], b->base, b->guard, cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(g[1], b->base + b->guard + b->bytes, b->guard, cudaMemcpyDeviceToHost));
    const size_t before = b->guard - lab_count_poison_bytes(g[0], b->guard);
    const size_t after = b->guard - lab_count_poison_bytes(g[1], b->guard);
    if (before == 0 && after == 0) { return 1; }
    char line[256];
    snprintf(line, sizeof(line), "; wrote outside %s (%zu bytes before it, %zu after it changed)", b->name, before, after);
    *why += line;
    return 0;
}

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
// T in {1, 63, 64, 65, 200} x hd in {16 (version 1 only), 64, 128}, B = 2, H = 4.
// quick (compute-sanitizer runs): T in {65, 200}, hd in {64, 128}, H = 2, Hkv in {H, 1}.
static std::vector<LabShape> lab_check_shapes(int scheme_filter, int quick) {
    static const int Ts[] = {1, 63, 64, 65, 200};
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
                for (int ti = 0; ti < (quick ? 2 : 5); ti++) {
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

// the inputs' seed of one trial: the base seed mixed with the scheme and the shape, so that a trial
// has the same inputs whatever --scheme or version selects
static unsigned long long lab_trial_seed(unsigned long long seed, const LabShape* sh) {
    unsigned long long z = lab_mix64(seed);
    const int fields[] = {sh->scheme, sh->B, sh->T, sh->H, sh->Hkv, sh->hd};
    for (int i = 0; i < 6; i++) { z = lab_mix64(z ^ (unsigned long long)(unsigned)fields[i]); }
    return z;
}

// ----------------------------------------------------------------------------
// inputs: x (B, T, C), qkv (B, T, W), qres (B, T, C) for q_residual, datty (B, T, C); N(0, 1),
// rounded to floatX (shared q = k columns scaled, see the tolerances). The host keeps both the floatX
// bytes and their float values (what the CPU twin reads, so that both sides see the same numbers).

typedef struct {
    std::vector<float> f;          // values, after rounding to floatX
    std::vector<unsigned char> x;  // floatX bytes
    LabBuf d;                      // on the device
} LabTensor;

// host only: values and bytes; no device copy yet (lab_tensor_upload)
static void lab_tensor_fill(LabTensor* t, size_t n, unsigned long long* rng, const char* name) {
    t->d = lab_buf_none(name);
    t->f.resize(n);
    for (size_t i = 0; i < n; i += 2) {
        const double u1 = lab_uniform(rng), u2 = lab_uniform(rng);
        const double r = sqrt(-2.0 * log(u1));
        t->f[i] = (float)(r * cos(6.283185307179586 * u2));
        if (i + 1 < n) { t->f[i + 1] = (float)(r * sin(6.283185307179586 * u2)); }
    }
    t->x.resize(n * sizeof(floatX));
    host_floats_to_x(t->x.data(), t->f.data(), n);
    host_x_to_floats(t->f.data(), t->x.data(), n);
}

// multiplies columns [c0, c0 + cols) of t, rows of `stride`, by `factor`, rounding again to floatX
static void lab_tensor_scale_columns(LabTensor* t, size_t stride, size_t c0, size_t cols, float factor) {
    const size_t rows = t->f.size() / stride;
    for (size_t r = 0; r < rows; r++) {
        for (size_t c = c0; c < c0 + cols; c++) { t->f[r * stride + c] *= factor; }
    }
    host_floats_to_x(t->x.data(), t->f.data(), t->f.size());
    host_x_to_floats(t->f.data(), t->x.data(), t->f.size());
}

static void lab_tensor_upload(LabTensor* t) {
    if (t->f.empty()) { return; }
    t->d = lab_buf_alloc(t->x.size(), t->d.name);
    lab_buf_upload(&t->d, t->x);
}

static void lab_tensor_free(LabTensor* t) {
    lab_buf_free(&t->d);
    t->f.clear();
    t->x.clear();
}

// 0 with a reason when the device copy changed (inputs are read-only to both passes)
static int lab_tensor_intact(const LabTensor* t, std::string* why) {
    if (t->d.base == NULL) { return 1; }
    int ok = lab_buf_guards_ok(&t->d, why);
    const std::vector<unsigned char> now = lab_buf_download(&t->d);
    if (memcmp(now.data(), t->x.data(), t->x.size()) != 0) {
        *why += std::string("; input ") + t->d.name + " changed";
        ok = 0;
    }
    return ok;
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
    in->seed = lab_trial_seed(base_seed, sh);
    in->C = sh->H * sh->hd;
    in->W = qkv_layout(&in->cfg).width;
    in->has_qres = sh->scheme == QKV_Q_RESIDUAL;
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

static int lab_inputs_intact(const LabInputs* in, std::string* why) {
    int ok = lab_tensor_intact(&in->x, why);
    ok &= lab_tensor_intact(&in->qkv, why);
    ok &= lab_tensor_intact(&in->qres, why);
    ok &= lab_tensor_intact(&in->datty, why);
    return ok;
}

static const floatX* lab_in(const LabTensor* t) { return (const floatX*)t->d.ptr; }

// where role r lives in host float arrays of the trainer's layout, as attn_role_rows on the device:
// projection columns (stride W), x or q_residual's query (stride C)
static TiledRows lab_role_rows_host(const AttnShape* s, int r, float* x, float* qkv, float* qres) {
    const QKVRole role = attn_role(s, r);
    TiledRows v;
    if (role.source == QKV_SRC_PROJECTION) { v.ptr = qkv + role.offset; v.stride = (size_t)s->layout.width; }
    else if (role.source == QKV_SRC_INPUT) { v.ptr = x; v.stride = (size_t)s->C; }
    else { v.ptr = qres; v.stride = (size_t)s->C; }
    return v;
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

// The CPU twin's forward on the trial's (rounded) inputs: out (B, T, C), lse (B, H, T)
static void lab_twin_forward(LabInputs* in, std::vector<float>* out, std::vector<float>* lse) {
    const LabShape* sh = &in->sh;
    const AttnShape s = attn_shape_make(&in->cfg, sh->B, sh->T, 0);
    float* qres = in->has_qres ? in->qres.f.data() : NULL;
    out->assign((size_t)sh->B * sh->T * in->C, 0.0f);
    lse->assign((size_t)sh->B * sh->H * sh->T, 0.0f);
    attention_tiled_forward(out->data(), lse->data(), lab_role_rows_host(&s, 0, in->x.f.data(), in->qkv.f.data(), qres),
                            lab_role_rows_host(&s, 1, in->x.f.data(), in->qkv.f.data(), qres),
                            lab_role_rows_host(&s, 2, in->x.f.data(), in->qkv.f.data(), qres), sh->B, sh->T, sh->H,
                            sh->Hkv, sh->hd, s.scale);
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
    float* qres = in->has_qres ? in->qres.f.data() : NULL;
    g->dqkv.assign(BT * in->W, 0.0f);
    g->dx.assign(BT * in->C, 0.0f);
    g->dqres.assign(BT * in->C, 0.0f);
    g->expect_dx = 0;
    for (int r = 0; r < 3; r++) { g->expect_dx |= attn_role(&s, r).source == QKV_SRC_INPUT; }
    g->expect_dqres = s.layout.q.source == QKV_SRC_RESIDUAL_QUERY;
    float* dqres = in->has_qres ? g->dqres.data() : NULL;
    std::vector<float> delta((size_t)sh->B * sh->H * sh->T);
    TiledRows q = lab_role_rows_host(&s, 0, in->x.f.data(), in->qkv.f.data(), qres);
    TiledRows k = lab_role_rows_host(&s, 1, in->x.f.data(), in->qkv.f.data(), qres);
    TiledRows v = lab_role_rows_host(&s, 2, in->x.f.data(), in->qkv.f.data(), qres);
    attention_tiled_backward(lab_role_rows_host(&s, 0, g->dx.data(), g->dqkv.data(), dqres),
                             lab_role_rows_host(&s, 1, g->dx.data(), g->dqkv.data(), dqres),
                             lab_role_rows_host(&s, 2, g->dx.data(), g->dqkv.data(), dqres), delta.data(),
                             in->datty.f.data(), out.data(), lse.data(), q, k, v, sh->B, sh->T, sh->H, sh->Hkv,
                             sh->hd, s.scale);
}

// ----------------------------------------------------------------------------
// the buffers of one path (AttnBuffers, AttnGradBuffers), each a LabBuf with guards

typedef struct {
    AttnShape s;
    LabBuf perm[3], att, yperm, lse;       // forward: unfused perm/att/yperm, fused lse
    LabBuf dperm[3], datt, dyperm, delta;  // backward scratch
    AttnBuffers bufs;
    AttnGradBuffers gbufs;
} LabAttn;

static void lab_attn_alloc(LabAttn* a, const AttnShape* s, int with_grad) {
    static const char* const perm_names[3] = {"perm[0]", "perm[1]", "perm[2]"};
    static const char* const dperm_names[3] = {"dperm[0]", "dperm[1]", "dperm[2]"};
    a->s = *s;
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

static void lab_attn_free(LabAttn* a) {
    for (int r = 0; r < 3; r++) { lab_buf_free(&a->perm[r]); lab_buf_free(&a->dperm[r]); }
    lab_buf_free(&a->att);
    lab_buf_free(&a->yperm);
    lab_buf_free(&a->lse);
    lab_buf_free(&a->datt);
    lab_buf_free(&a->dyperm);
    lab_buf_free(&a->delta);
}

static void lab_attn_poison_forward(const LabAttn* a) {
    for (int r = 0; r < 3; r++) { lab_buf_poison(&a->perm[r]); }
    lab_buf_poison(&a->att);
    lab_buf_poison(&a->yperm);
    lab_buf_poison(&a->lse);
}

static void lab_attn_poison_backward(const LabAttn* a) {
    for (int r = 0; r < 3; r++) { lab_buf_poison(&a->dperm[r]); }
    lab_buf_poison(&a->datt);
    lab_buf_poison(&a->dyperm);
    lab_buf_poison(&a->delta);
}

static int lab_attn_guards_ok(const LabAttn* a, std::string* why) {
    int ok = 1;
    for (int r = 0; r < 3; r++) { ok &= lab_buf_guards_ok(&a->perm[r], why); ok &= lab_buf_guards_ok(&a->dperm[r], why); }
    ok &= lab_buf_guards_ok(&a->att, why);
    ok &= lab_buf_guards_ok(&a->yperm, why);
    ok &= lab_buf_guards_ok(&a->lse, why);
    ok &= lab_buf_guards_ok(&a->datt, why);
    ok &= lab_buf_guards_ok(&a->dyperm, why);
    ok &= lab_buf_guards_ok(&a->delta, why);
    return ok;
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
    *s = attn_shape_make(&in->cfg, in->sh.B, in->sh.T, v->fused);
    return s->fused == v->fused;
}

// ----------------------------------------------------------------------------
// comparisons: "  <scheme> T=.. H=.. Hkv=.. hd=.. <tensor> rel_err=... max_abs=... at b=.. t=.. (vN vs ref)"

// an index decomposition for "where": up to 4 dimensions, row-major
typedef struct {
    int ndim;
    int dims[4];
    const char* names[4];
} LabIndex;

static LabIndex lab_index_btchd(int B, int T, int heads, int hd) { // (B, T, heads * hd)
    LabIndex ix = {4, {B, T, heads, hd}, {"b", "t", "h", "d"}};
    return ix;
}
static LabIndex lab_index_bht(int B, int H, int T) { // (B, H, T)
    LabIndex ix = {3, {B, H, T, 1}, {"b", "h", "t", ""}};
    return ix;
}

static std::string lab_where(const LabIndex* ix, size_t i) {
    int coord[4] = {0, 0, 0, 0};
    for (int d = ix->ndim - 1; d >= 0; d--) {
        coord[d] = (int)(i % (size_t)ix->dims[d]);
        i /= (size_t)ix->dims[d];
    }
    std::string s;
    for (int d = 0; d < ix->ndim; d++) { s += (d ? " " : "") + std::string(ix->names[d]) + "=" + std::to_string(coord[d]); }
    return s;
}

// the verdict of one (version, scheme, shape): the worst tensor relative to its tolerance and the
// reasons for a failure
typedef struct {
    double worst_ratio;   // rel_err / tolerance of the worst tensor (NaN: a NaN)
    std::string worst;    // "atty rel_err 1.2e-03 vs cpu, tolerance 1e-02"
    std::string fail;     // "; ..." reasons, empty when it passes
} LabVerdict;

static void lab_verdict_init(LabVerdict* v) {
    v->worst_ratio = -1.0;
    v->worst.clear();
    v->fail.clear();
}

// sum of squares-based norm of n values; NaN in, NaN out
static double lab_norm(const float* a, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) { s += (double)a[i] * (double)a[i]; }
    return sqrt(s);
}

// 1e-3 of datty's root mean square, over n elements: the size under which a gradient counts as zero
static double lab_floor_norm(const std::vector<float>& datty, size_t n) {
    const double rms = datty.empty() ? 0.0 : lab_norm(datty.data(), datty.size()) / sqrt((double)datty.size());
    return 1e-3 * rms * sqrt((double)n);
}

// Compares out with ref (n values, laid out as ix), prints one line and folds it into the verdict.
// floor_norm: the denominator's lower bound (0: none). against: "cpu", "v1".
static void lab_compare(const char* prefix, int version, const char* tensor, const char* against, const float* out,
                        const float* ref, size_t n, const LabIndex* ix, double floor_norm, double tol, LabVerdict* v) {
    double diff2 = 0.0, max_abs = -1.0;
    size_t at = 0, nonfinite = 0;
    for (size_t i = 0; i < n; i++) {
        const double d = (double)out[i] - (double)ref[i];
        if (!isfinite(out[i])) {
            if (nonfinite == 0) { at = i; }
            nonfinite++;
            continue;
        }
        diff2 += d * d;
        if (nonfinite == 0 && fabs(d) > max_abs) { max_abs = fabs(d); at = i; }
    }
    const double ref_norm = lab_norm(ref, n);
    const int floored = ref_norm < floor_norm;
    const double denom = floored ? floor_norm : ref_norm;
    double rel = denom > 0.0 ? sqrt(diff2) / denom : (diff2 > 0.0 ? INFINITY : 0.0);
    if (nonfinite > 0) { rel = NAN; }
    char line[512];
    if (nonfinite > 0) {
        snprintf(line, sizeof(line), "%s %s rel_err=nan (%zu of %zu not finite, the first at %s) (v%d vs %s)", prefix,
                 tensor, nonfinite, n, lab_where(ix, at).c_str(), version, against);
    } else {
        snprintf(line, sizeof(line), "%s %s rel_err=%.3e max_abs=%.3e at %s (v%d vs %s%s)", prefix, tensor, rel,
                 max_abs < 0.0 ? 0.0 : max_abs, n > 0 ? lab_where(ix, at).c_str() : "-", version, against,
                 floored ? "; ref ~ 0: against 1e-3 rms(datty)" : "");
    }
    printf("  %s\n", line);
    const double ratio = rel / tol;
    char worst[256];
    snprintf(worst, sizeof(worst), "%s rel_err %.3g vs %s, tolerance %.0e", tensor, rel, against, tol);
    if (isnan(ratio) || !(ratio <= 1.0)) { v->fail += std::string("; ") + worst; }
    if (isnan(ratio) || (!isnan(v->worst_ratio) && ratio > v->worst_ratio)) {
        v->worst_ratio = ratio;
        v->worst = worst;
    }
}

// bytes of one run must equal the first run's: every path here is deterministic (no atomics)
static void lab_check_same(const std::vector<unsigned char>& a, const std::vector<unsigned char>& b, const char* what,
                           LabVerdict* v) {
    if (a.size() != b.size() || memcmp(a.data(), b.data(), a.size()) != 0) {
        v->fail += std::string("; ") + what + " differs between two runs (not deterministic)";
    }
}

// one PASS/FAIL line; returns 1 on FAIL
static int lab_verdict_print(const LabArgs* a, int version, const LabInputs* in, const LabVerdict* v) {
    char shape[160];
    lab_shape_describe(&in->sh, shape, sizeof(shape));
    const int failed = !v->fail.empty();
    printf("%s %s v%d %s B=%d (inputs seed 0x%016llx; worst: %s%s%s)\n", failed ? "FAIL" : "PASS", a->name, version,
           shape, in->sh.B, in->seed, v->worst.c_str(), failed || a->quick ? "" : "; bit-identical rerun",
           failed ? v->fail.c_str() : "");
    fflush(stdout);
    return failed;
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

// columns [c0, c0 + cols) of rows (n_rows, stride): a contiguous (n_rows, cols) copy
static std::vector<float> lab_columns(const float* a, size_t n_rows, size_t stride, size_t c0, size_t cols) {
    std::vector<float> out(n_rows * cols);
    for (size_t r = 0; r < n_rows; r++) { memcpy(&out[r * cols], a + r * stride + c0, cols * sizeof(float)); }
    return out;
}

// ----------------------------------------------------------------------------
// benchmark: the d12 model's heads (H = 12, hd = 64), B = 8 at every T, standard layout

#define LAB_BENCH_B 8
#define LAB_BENCH_H 12
#define LAB_BENCH_HD 64
static const int lab_bench_T[3] = {1024, 2048, 4096}; // LAB_BENCH_REPS, LAB_PEAK_*: lab_basics.h

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

static void lab_bench_predicted(const char* what, double flops, double bytes, int T) {
    const double tc = flops / LAB_PEAK_FLOPS * 1e3, tm = bytes / LAB_PEAK_BYTES * 1e3;
    printf("predicted %s T=%d: %.2f GFLOP / 790 TFLOP/s = %.4f ms, %.1f MB / 3 TB/s = %.4f ms: %s-bound\n", what, T,
           flops / 1e9, tc, bytes / 1e6, tm, tc >= tm ? "compute" : "memory");
}

static void lab_bench_line(int version, const char* what, int T, double ms, double flops, double bytes) {
    printf("bench v%d %-16s T=%d B=%d H=%d hd=%d ms=%.4f TFLOP/s=%.1f GB/s=%.1f\n", version, what, T, LAB_BENCH_B,
           LAB_BENCH_H, LAB_BENCH_HD, ms, flops / (ms * 1e-3) / 1e12, bytes / (ms * 1e-3) / 1e9);
    fflush(stdout);
}

// the bench's inputs: standard layout, no guards needed but the same allocation as the check
static LabShape lab_bench_shape(int T) {
    LabShape sh;
    sh.scheme = QKV_STANDARD;
    sh.B = LAB_BENCH_B;
    sh.T = T;
    sh.H = LAB_BENCH_H;
    sh.Hkv = LAB_BENCH_H;
    sh.hd = LAB_BENCH_HD;
    return sh;
}

#endif // ATTENTION_LAB_COMMON_H
