/*
params: prints parameter counts and KV-cache sizes for the configurations of dev/SCHEMES.md
(section 6), computed from the shapes by attention_variants.cuh (nothing here is typed in but the
shapes).
`make params` runs it; dev/test/test_params.sh checks its output against those tables.

  params                 dev/SCHEMES.md's table, one line per configuration
  params <scheme> L C H Hkv M bias [T]
                         one line for a shape of your own (T defaults to 1024)
  params memory <scheme> L C H Hkv M bias T B [bf16|fp32] [fused|unfused] [-r 0|1|2] [-w 0|1]
  params memory d12 T B [...the same options]
                         the CUDA trainer's training memory at micro-batch (B, T), from the
                         tensor lists gpt2_build allocates with (gpt2_training_memory); d12 is
                         GPT-2 124M (standard, 12 layers, 768 channels, 12 heads, MLP 3072, biases).
                         Defaults as the trainer's: bf16, fused attention where the build has it
                         (bf16, head size 64 or 128) else unfused, -r 0, -w 1. wpe has
                         max(T, 1024) rows, vocab 50257 padded to 50304.
  params profile <scheme> L C H Hkv M bias T B [...the memory options] [--flash 2|3|4]
                 [--bias_fusion 0|1] [--micro_steps N] [--csv FILE] [--learn RECORD]
  params profile d12 T B [...]
                         the predicted per-sublayer table of one training step (dev/trainer/profile.h):
                         FLOPs, minimum bytes, roofline and the cost model's time per row (and as
                         CSV); then checks that the rows' FLOPs add up to llm.c's 6 N + 6 L C T
                         (exit 1 if not). --bias_fusion as the trainer's (default 1); --flash N
                         prices the attention labs' flash version N in both directions (4: a
                         backward only, after version 3's forward) where the trainer holds forward
                         3 and backward 4, the default; --micro_steps: micro-batches
                         per step (default 1; the bench's d12 step is B 128 x 4). --learn: the model
                         taught by a GPU's measured profile in a dev/results record (learned_profile
                         below): each row's measured efficiency, the measured bandwidth, and the
                         rows changed since, predicted; the step predicted for this build beside the
                         record's measured one.
*/
#include <string>
#include <vector>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include "../../attention_variants.cuh"
#include "../trainer/checkpoint.h"
#include "../trainer/training_memory.h"
#include "../trainer/profile.h"

static GPT2Config make_config(int scheme, int L, int C, int H, int Hkv, int M, int bias, int T) {
    GPT2Config c = gpt2_config_default(L, H, C, T, 50257, 50304);
    c.scheme = scheme;
    c.num_kv_heads = Hkv;
    c.mlp_hidden = M;
    c.use_bias = bias;
    return c;
}

// The counts are size_t: a huge shape (n_layer and mlp near 2^31) would wrap them into a plausible
// number. As checkpoint_validate does for a header, count in double first and refuse what cannot fit.
#define PARAMS_MAX_COUNT 1e18

static int print_line(const GPT2Config* c) {
    char msg[512];
    if (!gpt2_config_check(c, msg, sizeof(msg))) {
        fprintf(stderr, "params: %s\n", msg);
        return 0;
    }
    const double nparams = gpt2_num_parameters_double(c);
    if (nparams > PARAMS_MAX_COUNT) {
        char shape[256];
        gpt2_config_describe(c, shape, sizeof(shape));
        fprintf(stderr, "params: scheme %s %s has %.3g parameters, more than %.0e, expected a shape whose counts fit in "
                        "64 bits\n", qkv_scheme_name(c->scheme), shape, nparams, PARAMS_MAX_COUNT);
        return 0;
    }
    printf("scheme=%s n_layer=%d n_embd=%d n_head=%d n_kv_head=%d mlp=%d bias=%d total=%zu "
           "non_embedding=%zu kv_bytes_per_token=%zu\n",
           qkv_scheme_name(c->scheme), c->num_layers, c->channels, c->num_heads, c->num_kv_heads,
           c->mlp_hidden, c->use_bias, gpt2_num_parameters(c), gpt2_num_non_embedding_parameters(c),
           qkv_kv_cache_bytes_per_token(c));
    return 1;
}

// one shape argument: a whole number (the shape check then says which values fit a scheme)
static int parse_arg(const char* what, const char* s) {
    char* end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < 0 || v > INT_MAX) {
        fprintf(stderr, "params: %s is '%s', expected a whole number in 0..%d\n", what, s, INT_MAX);
        exit(1);
    }
    return (int)v;
}

// ----------------------------------------------------------------------------
// params memory: the CUDA trainer's training memory for a shape

static const char* const memory_usage =
    "usage: params memory <scheme> n_layer n_embd n_head n_kv_head mlp bias T B [bf16|fp32] [fused|unfused] "
    "[-r 0|1|2] [-w 0|1], or params memory d12 T B [the same options]";

static void print_memory_row(const char* what, size_t bytes, const char* note) {
    printf("%-16s %15zu bytes %10.1f MiB %7.2f GiB  %s\n", what, bytes, bytes / 1048576.0, bytes / 1073741824.0, note);
}

// an option given twice (bf16 then fp32, -r 0 then -r 1) is refused rather than silently overridden
static int set_once(int* slot, int value, const char* what, const char* arg) {
    if (*slot >= 0) {
        fprintf(stderr, "params: %s given twice (again as '%s'), expected it at most once\n", what, arg);
        return 0;
    }
    *slot = value;
    return 1;
}

// a training run's shape as `params memory` and `params profile` take it
typedef struct {
    GPT2Config c;
    int B, T, bf16, fused, recompute, master;
    int flash, flash_bwd; // the flash kernels' versions, forward and backward, where fused (--flash N: both N;
                          // default forward 3, backward 4, as the trainer's)
    int bias_fusion; // profile --bias_fusion 0|1 (default 1, the trainer's): the bias gradients in the dW GEMMs
    int micro_steps; // profile --micro_steps N (default 1): micro-batches per step
    const char* csv; // profile --csv FILE, else NULL
    const char* learn; // profile --learn RECORD, else NULL
} RunShape;

// a file name after a profile option (--csv, --learn), taken once
static int take_file_arg(int argc, char** argv, int* i, const char** slot) {
    const char* o = argv[*i];
    if (*i + 1 >= argc || argv[*i + 1][0] == '\0') { fprintf(stderr, "params: %s needs a file name\n", o); return 0; }
    if (*slot != NULL) { fprintf(stderr, "params: %s given twice, expected it at most once\n", o); return 0; }
    *slot = argv[++*i];
    return 1;
}

static int parse_run_shape(int argc, char** argv, const char* usage, int allow_csv, RunShape* rs) {
    int scheme = QKV_STANDARD, L = 12, C = 768, H = 12, Hkv = 12, M = 3072, bias = 1, i = 0;
    rs->csv = NULL;
    rs->learn = NULL;
    rs->micro_steps = 1;
    if (argc >= 1 && strcmp(argv[0], "d12") == 0) {
        i = 1;
    } else {
        if (argc < 9) { fprintf(stderr, "%s\n", usage); return 0; }
        scheme = qkv_scheme_from_name(argv[0]);
        if (scheme < 0) {
            fprintf(stderr, "params: scheme is '%s', expected d12 or one of standard, q_identity, k_identity, "
                            "v_identity, kv_shared, qk_shared, qkv_shared, q_residual\n", argv[0]);
            return 0;
        }
        L = parse_arg("n_layer", argv[1]); C = parse_arg("n_embd", argv[2]); H = parse_arg("n_head", argv[3]);
        Hkv = parse_arg("n_kv_head", argv[4]); M = parse_arg("mlp", argv[5]); bias = parse_arg("bias", argv[6]);
        i = 7;
    }
    if (argc < i + 2) { fprintf(stderr, "%s\n", usage); return 0; }
    const int T = parse_arg("T", argv[i]), B = parse_arg("B", argv[i + 1]);
    if (T < 1) { fprintf(stderr, "params: T is '%s', expected a whole number >= 1\n", argv[i]); return 0; }
    if (B < 1) { fprintf(stderr, "params: B is '%s', expected a whole number >= 1\n", argv[i + 1]); return 0; }
    int bf16 = -1, fused = -1, recompute = -1, master = -1, flash = -1, bias_fusion = -1;
    for (i += 2; i < argc; i++) {
        const char* o = argv[i];
        int ok;
        if (strcmp(o, "bf16") == 0 || strcmp(o, "fp32") == 0) {
            ok = set_once(&bf16, strcmp(o, "bf16") == 0, "the precision (bf16|fp32)", o);
        } else if (strcmp(o, "fused") == 0 || strcmp(o, "unfused") == 0) {
            ok = set_once(&fused, strcmp(o, "fused") == 0, "the attention path (fused|unfused)", o);
        } else if (strcmp(o, "--flash") == 0 || strcmp(o, "-r") == 0 || strcmp(o, "-w") == 0 ||
                   (allow_csv && strcmp(o, "--bias_fusion") == 0)) {
            // a flag with one digit: --flash 2|3|4, -r 0|1|2, -w 0|1, --bias_fusion 0|1
            const char* v = i + 1 < argc ? argv[i + 1] : "";
            const int is_flash = o[2] == 'f', is_r = strcmp(o, "-r") == 0;
            const char* allowed = is_flash ? "234" : is_r ? "012" : "01";
            if (strlen(v) != 1 || strchr(allowed, v[0]) == NULL) {
                fprintf(stderr, "params: %s is '%s', expected %s\n", o, v, is_flash ? "2, 3 or 4" : is_r ? "0, 1 or 2" : "0 or 1");
                return 0;
            }
            int* slot = is_flash ? &flash : is_r ? &recompute : strcmp(o, "-w") == 0 ? &master : &bias_fusion;
            ok = set_once(slot, v[0] - '0', o, v);
            i++;
        } else if (allow_csv && (strcmp(o, "--csv") == 0 || strcmp(o, "--learn") == 0)) {
            ok = take_file_arg(argc, argv, &i, o[2] == 'c' ? &rs->csv : &rs->learn);
        } else if (allow_csv && strcmp(o, "--micro_steps") == 0) {
            const char* v = i + 1 < argc ? argv[i + 1] : "";
            char* end = NULL;
            errno = 0;
            const long n = strtol(v, &end, 10);
            if (v[0] == '\0' || *end != '\0' || errno != 0 || n < 1 || n > (1L << 24)) {
                fprintf(stderr, "params: --micro_steps is '%s', expected a whole number from 1 to %d\n", v, 1 << 24);
                return 0;
            }
            rs->micro_steps = (int)n;
            ok = 1;
            i++;
        } else {
            fprintf(stderr, "params: option '%s' is not one of bf16, fp32, fused, unfused, --flash 2|3|4, -r 0|1|2, -w 0|1%s\n", o,
                    allow_csv ? ", --bias_fusion 0|1, --micro_steps N, --csv FILE, --learn RECORD" : "");
            return 0;
        }
        if (!ok) { return 0; }
    }
    GPT2Config c = make_config(scheme, L, C, H, Hkv, M, bias, T > 1024 ? T : 1024);
    char msg[512];
    if (!gpt2_config_check(&c, msg, sizeof(msg))) {
        fprintf(stderr, "params: %s\n", msg);
        return 0;
    }
    // byte counts are size_t: refuse a shape whose counts could wrap (a typo such as B 64000000)
    const double per_token = (double)L * ((double)H * T + 16.0 * C + 2.0 * M) + 50304.0 + 8.0 * C;
    const double weights = (double)L * C * (4.0 * C + 2.0 * M) + 2.0 * 50304.0 * C + (double)c.max_seq_len * C;
    if ((double)B * T * per_token * 4.0 > 1e18 || weights * 20.0 > 1e18) {
        fprintf(stderr, "params: B=%d T=%d with this shape needs more than 1e18 bytes, expected a trainable shape\n", B, T);
        return 0;
    }
    const int hd = qkv_head_dim(&c);
    if (bf16 < 0) { bf16 = 1; }
    if (fused < 0) { fused = qkv_fused_attention_available(hd, bf16); }
    if (fused && !qkv_fused_attention_available(hd, bf16)) {
        fprintf(stderr, "params: fused attention needs bf16 and head size 64 or 128 (the trainer's flash kernels), "
                        "got %s with head size %d (HINT: use unfused)\n", bf16 ? "bf16" : "fp32", hd);
        return 0;
    }
    if (bias_fusion < 0) { bias_fusion = 1; }
    if (recompute < 0) { recompute = 0; }
    if (master < 0) { master = 1; }
    master = bf16 ? master : 0; // FP32 builds update their fp32 parameters in place
    rs->c = c;
    rs->B = B; rs->T = T; rs->bf16 = bf16; rs->fused = fused; rs->recompute = recompute; rs->master = master;
    rs->flash = flash == 2 || flash == 3 ? flash : 3; // the trainer's FLASH_FORWARD_VERSION unless --flash 2|3
    rs->flash_bwd = flash > 0 ? flash : 4;           // its FLASH_BACKWARD_VERSION unless --flash
    rs->bias_fusion = bias_fusion;
    return 1;
}

static int memory_main(int argc, char** argv) { // argv[0] is the first argument after "memory"
    RunShape rs;
    if (!parse_run_shape(argc, argv, memory_usage, 0, &rs)) { return 1; }
    const GPT2Config c = rs.c;
    const int B = rs.B, T = rs.T, bf16 = rs.bf16, fused = rs.fused, recompute = rs.recompute, master = rs.master;
    TrainingMemory m;
    gpt2_training_memory(&c, B, T, bf16 ? 2 : 4, master, recompute, fused, &m);
    printf("memory scheme=%s n_layer=%d n_embd=%d n_head=%d n_kv_head=%d mlp=%d bias=%d vocab=%d/%d max_seq_len=%d "
           "B=%d T=%d precision=%s attention=%s recompute=%d master_weights=%d\n",
           qkv_scheme_name(c.scheme), c.num_layers, c.channels, c.num_heads, c.num_kv_heads, c.mlp_hidden, c.use_bias,
           c.vocab_size, c.padded_vocab_size, c.max_seq_len, B, T, bf16 ? "bf16" : "fp32", fused ? "fused" : "unfused",
           recompute, master);
    int n_acts = 0, n_grads = 0;
    for (int k = 0; k < NUM_ACT_TENSORS; k++) { n_acts += m.acts[k].count > 0; }
    for (int k = 0; k < NUM_GRAD_ACT_TENSORS; k++) { n_grads += m.grad_acts[k].count > 0; }
    char note[256];
    snprintf(note, sizeof(note), "%zu elements (%zu real, each tensor padded to %d) x %d bytes", m.num_parameters_padded,
             gpt2_num_parameters(&c), PARAM_ALIGN_ELEMS, bf16 ? 2 : 4);
    print_memory_row("parameters", m.param_bytes, note);
    print_memory_row("gradients", m.grad_bytes, "fp32");
    print_memory_row("optimizer", m.optimizer_bytes, "AdamW m and v, fp32");
    print_memory_row("master_weights", m.master_bytes, master ? "fp32 copy of the parameters" : "none");
    snprintf(note, sizeof(note), "%d tensors, one allocation", n_acts);
    print_memory_row("activations", m.acts_bytes, note);
    snprintf(note, sizeof(note), "%d tensors of one layer, one allocation", n_grads);
    print_memory_row("activation_grads", m.grad_acts_bytes, note);
    print_memory_row("total", m.total_bytes, "plus small buffers (inputs, encoder buckets, column sums, cuBLASLt workspace)");
    printf("biggest activations:\n");
    int shown[NUM_ACT_TENSORS] = {0};
    for (int rank = 0; rank < 5; rank++) {
        int best = -1;
        for (int k = 0; k < NUM_ACT_TENSORS; k++) {
            if (shown[k] || m.acts[k].count == 0) { continue; }
            if (best < 0 || tensor_alloc_bytes(&m.acts[k]) > tensor_alloc_bytes(&m.acts[best])) { best = k; }
        }
        if (best < 0) { break; }
        shown[best] = 1;
        const size_t bytes = tensor_alloc_bytes(&m.acts[best]);
        printf("  %-10s %-18s elements=%-13zu bytes=%-13zu %10.1f MiB %5.1f%%\n", act_tensor_names[best],
               act_tensor_shapes[best], m.acts[best].count, bytes, bytes / 1048576.0, 100.0 * bytes / m.acts_bytes);
    }
    return 0;
}

// ----------------------------------------------------------------------------
// params profile: the predicted per-sublayer table of one training step (dev/trainer/profile.h)

static const char* const profile_usage =
    "usage: params profile <scheme> n_layer n_embd n_head n_kv_head mlp bias T B [bf16|fp32] [fused|unfused] "
    "[--flash 2|3|4] [-r 0|1|2] [-w 0|1] [--bias_fusion 0|1] [--micro_steps N] [--csv FILE] [--learn RECORD], or params "
    "profile d12 T B [the same options]";

// The rows' FLOPs plus llm.c's 6 per token for each parameter that is no matmul weight must be
// exactly gpt2_flops_per_token: checked on one sequence (B = 1), where every term is a whole number
// below 2^53 and so exact in double.
static int profile_flops_check(const RunShape* rs) {
    ProfileShape one = {1, rs->T, 1, rs->bf16 ? 2 : 4, rs->master, rs->fused ? rs->flash : 0, rs->fused ? rs->flash_bwd : 0,
                       rs->recompute,
                       rs->bias_fusion};
    ProfileCost rows[PROF_NUM_ROWS];
    profile_costs(&rs->c, &one, rows);
    double sum = 0.0;
    for (int r = 0; r < PROF_NUM_ROWS; r++) { sum += rows[r].flops; }
    const double nonmatmul = profile_nonmatmul_params(&rs->c);
    const double model = gpt2_flops_per_token(&rs->c, rs->T) * rs->T;
    const double total = sum + 6.0 * nonmatmul * rs->T;
    printf("profile flops per sequence of T=%d: rows %.0f + 6 x %.0f non-matmul parameters x T = %.0f, "
           "llm.c's (6 N + 6 L C T) x T = %.0f: %s\n", rs->T, sum, nonmatmul, total, model,
           total == model ? "exact" : "MISMATCH");
    return total == model;
}

// ----------------------------------------------------------------------------
// params profile --learn RECORD: the cost model taught by a GPU's measured profile, so that what a
// change is predicted to save is written down before a GPU measures it
//
// A record (dev/results/, written by record.sh: its "date:", "gpu:" and "commit:" lines) holds a
// trainer's --profile table as gpu_suite.sh's profile stage notes it, from "profile row ... ms/step"
// to "profile total". The first complete table is taken: the stage's first run, standard with the
// trainer's defaults. From it:
//   - each row's efficiency, its measured time over its roofline time (x_roof), which the learned
//     prediction applies to this shape's roofline (so it assumes a row's efficiency does not depend
//     on B, T or the micro-steps);
//   - the bandwidth the memory-bound rows (no FLOPs) reached together: their bytes over their time.
// A row whose kernels changed after the record was measured (kProfileChanges, by the change's commit
// time against the record's date) is predicted by that change's rule instead; a row the record does
// not have, by the cost model alone. Every number this prints but the record's is predicted.

enum ProfileChangeRule {
    CHANGE_AT_BANDWIDTH, // a memory-bound row at its minimum bytes, at the learned bandwidth
    CHANGE_GEMM_RATE,    // the faster of the learned time and the row's FLOPs at TUNED_GEMM_RATE
    CHANGE_SCALED,       // the learned time times a ratio of the cost model's efficiencies
};
// The rate predicted for the tuned GEMMs where the record's heuristic choices were slower: issue 55's
// estimate (the H200 measured them at 528-805 TFLOP/s with cuBLASLt's first choice, 2026-11-27)
#define TUNED_GEMM_RATE 700e12

typedef struct {
    int row;
    const char* since; // the change's commit time, "YYYY-MM-DD HH:MM" UTC: records measured before it lack it
    int rule;          // ProfileChangeRule
    double factor;     // CHANGE_SCALED's
    const char* what;
} ProfileChange;

static const double kFlash4OverFlash2 =
    profile_kind_efficiency[PROF_KIND_FLASH2_BWD] / profile_kind_efficiency[PROF_KIND_FLASH4_BWD];
static const ProfileChange kProfileChanges[] = {
    {PROF_ATTN_BWD_DKDV, "2026-11-27 17:38", CHANGE_SCALED, kFlash4OverFlash2, "flash backward version 4 the default"},
    {PROF_ATTN_BWD_DQ, "2026-11-27 17:38", CHANGE_SCALED, kFlash4OverFlash2, "flash backward version 4 the default"},
    {PROF_QKV_FWD, "2026-11-28 20:48", CHANGE_GEMM_RATE, 0.0, "tuned GEMMs"},
    {PROF_QRES_FWD, "2026-11-28 20:48", CHANGE_GEMM_RATE, 0.0, "tuned GEMMs"},
    {PROF_ATTPROJ_FWD, "2026-11-28 20:48", CHANGE_GEMM_RATE, 0.0, "tuned GEMMs"},
    {PROF_FC_FWD, "2026-11-28 20:48", CHANGE_GEMM_RATE, 0.0, "tuned GEMMs"},
    {PROF_FCPROJ_FWD, "2026-11-28 20:48", CHANGE_GEMM_RATE, 0.0, "tuned GEMMs"},
    {PROF_FCPROJ_BWD, "2026-11-28 20:48", CHANGE_GEMM_RATE, 0.0, "tuned GEMMs"},
    {PROF_FC_BWD, "2026-11-28 20:48", CHANGE_GEMM_RATE, 0.0, "tuned GEMMs"},
    {PROF_ATTPROJ_BWD, "2026-11-28 20:48", CHANGE_GEMM_RATE, 0.0, "tuned GEMMs"},
    {PROF_QKV_BWD, "2026-11-28 20:48", CHANGE_GEMM_RATE, 0.0, "tuned GEMMs"},
    {PROF_QRES_BWD, "2026-11-28 20:48", CHANGE_GEMM_RATE, 0.0, "tuned GEMMs"},
    {PROF_CLASSIFIER, "2026-11-28 21:41", CHANGE_GEMM_RATE, 0.0, "tuned GEMMs, the cross-entropy beside them"},
    {PROF_ENCODER_FWD, "2026-11-29 00:14", CHANGE_AT_BANDWIDTH, 0.0, "its batch staged during the step before"},
};
static const int kNumProfileChanges = (int)(sizeof(kProfileChanges) / sizeof(kProfileChanges[0]));

typedef struct {
    std::string date, gpu, commit; // record.sh's header
    int found[PROF_NUM_ROWS];
    double ms[PROF_NUM_ROWS], roof_ms[PROF_NUM_ROWS], flops[PROF_NUM_ROWS], bytes[PROF_NUM_ROWS];
    double total_ms;               // the table's total: the measured step
} ProfileRecord;

static std::string trimmed(const char* s) {
    while (*s == ' ' || *s == '\t') { s++; }
    std::string t(s);
    while (!t.empty() && (t.back() == '\n' || t.back() == '\r' || t.back() == ' ')) { t.pop_back(); }
    return t;
}

static int profile_row_index(const char* name) {
    for (int r = 0; r < PROF_NUM_ROWS; r++) {
        if (strcmp(profile_row_names[r], name) == 0) { return r; }
    }
    return -1;
}

// Reads the record's header and its first complete profile table. Returns 1, or 0 with a one-line message.
static int read_profile_record(const char* path, ProfileRecord* rec, char* msg, size_t msg_size) {
    FILE* f = fopen(path, "r");
    if (f == NULL) {
        snprintf(msg, msg_size, "--learn %s: cannot read it (%s)", path, strerror(errno));
        return 0;
    }
    memset(rec->found, 0, sizeof(rec->found));
    rec->total_ms = -1.0;
    int in_table = 0, line_no = 0, ok = 1;
    char buf[4096];
    while (ok && rec->total_ms < 0.0 && fgets(buf, sizeof(buf), f) != NULL) {
        line_no++;
        const std::string line = trimmed(buf);
        const char* t = line.c_str();
        if (!in_table) {
            if (rec->date.empty() && strncmp(t, "date:", 5) == 0) { rec->date = trimmed(t + 5).substr(0, 16); }
            if (rec->gpu.empty() && strncmp(t, "gpu:", 4) == 0) { rec->gpu = trimmed(t + 4); }
            if (rec->commit.empty() && strncmp(t, "commit:", 7) == 0) { // "c32bccf (as given by RECORD_COMMIT)"
                const std::string v = trimmed(t + 7);
                rec->commit = v.substr(0, v.find(' '));
            }
            in_table = strncmp(t, "profile row ", 12) == 0 && strstr(t, "ms/step") != NULL;
            continue;
        }
        // profile <row> <ms> <pct>% <GFLOP> <MB> <TFLOP/s> <GB/s> <roof_ms> <x_roof> <pred_ms> (profile_report)
        char name[64];
        double ms, pct, gflop, mb, tflops, gbs, roof;
        if (sscanf(t, "profile %63s %lf %lf%% %lf %lf %lf %lf %lf", name, &ms, &pct, &gflop, &mb, &tflops, &gbs, &roof) != 8) {
            snprintf(msg, msg_size, "--learn %s: line %d: '%.80s' is no row of a profile table (expected 'profile <row> "
                     "<ms/step> <%%step> <GFLOP> <MB> ...', as the trainer's --profile prints it)", path, line_no, t);
            ok = 0;
        } else if (strcmp(name, "total") == 0) {
            rec->total_ms = ms;
        } else {
            const int r = profile_row_index(name);
            if (r < 0 || rec->found[r]) {
                snprintf(msg, msg_size, "--learn %s: line %d: row '%s' %s", path, line_no, name,
                         r < 0 ? "is not one of dev/trainer/profile.h's rows" : "twice in one table");
                ok = 0;
            } else {
                rec->found[r] = 1;
                rec->ms[r] = ms;
                rec->roof_ms[r] = roof;
                rec->flops[r] = gflop * 1e9;
                rec->bytes[r] = mb * 1e6;
            }
        }
    }
    fclose(f);
    if (!ok) { return 0; }
    if (rec->total_ms < 0.0) {
        snprintf(msg, msg_size, "--learn %s: no complete profile table in it (expected a trainer's --profile table from "
                 "'profile row ... ms/step' to 'profile total', as gpu_suite.sh's profile stage records it)", path);
        return 0;
    }
    if (rec->date.size() != 16) {
        snprintf(msg, msg_size, "--learn %s: no 'date: YYYY-MM-DD HH:MM' line (expected a record of dev/results/record.sh)", path);
        return 0;
    }
    return 1;
}

// The change to row r that the record predates, or NULL
static const ProfileChange* change_after(const ProfileRecord* rec, int r) {
    for (int i = 0; i < kNumProfileChanges; i++) {
        if (kProfileChanges[i].row == r && rec->date < kProfileChanges[i].since) { return &kProfileChanges[i]; }
    }
    return NULL;
}

// The learned table of this shape's rows, and the step it predicts beside the record's measured one
static int learned_profile(const char* path, const ProfileRecord& rec, const ProfileCost rows[PROF_NUM_ROWS],
                           double tokens_per_step) {
    double mem_bytes = 0.0, mem_s = 0.0; // the memory-bound rows the record measured on today's kernels
    for (int r = 0; r < PROF_NUM_ROWS; r++) {
        if (rec.found[r] && rec.flops[r] == 0.0 && change_after(&rec, r) == NULL) {
            mem_bytes += rec.bytes[r];
            mem_s += rec.ms[r] / 1e3;
        }
    }
    if (mem_s <= 0.0) {
        fprintf(stderr, "params: --learn %s: no memory-bound row (no FLOPs) in its table to learn the bandwidth from\n", path);
        return 0;
    }
    const double bandwidth = mem_bytes / mem_s;
    printf("profile learned from %s: %s, commit %s, measured %s UTC; its memory-bound rows together at %.2f TB/s\n", path,
           rec.gpu.c_str(), rec.commit.c_str(), rec.date.c_str(), bandwidth / 1e12);
    printf("profile %-15s %9s %10s %9s  %s\n", "row", "rec_ms", "learned_ms", "model_ms", "how (rec_ms at the record's shape)");
    double learned_total = 0.0, model_total = 0.0;
    int changed = 0, unmeasured = 0;
    for (int r = 0; r < PROF_NUM_ROWS; r++) {
        if (!rows[r].present) { continue; }
        const double model = profile_predicted_s(&rows[r]), roof = profile_roofline_s(&rows[r]);
        const double x_roof = rec.found[r] && rec.roof_ms[r] > 0.0 ? rec.ms[r] / rec.roof_ms[r] : 0.0;
        double learned = x_roof * roof;
        char how[256];
        snprintf(how, sizeof(how), "the record's efficiency, %.2fx the roofline", x_roof);
        const ProfileChange* ch = rec.found[r] ? change_after(&rec, r) : NULL;
        if (!rec.found[r]) {
            learned = model;
            snprintf(how, sizeof(how), "not in the record: the cost model's");
            unmeasured++;
        } else if (ch != NULL) {
            const double at_rate = rows[r].flops / TUNED_GEMM_RATE;
            learned = ch->rule == CHANGE_AT_BANDWIDTH ? rows[r].bytes / bandwidth
                    : ch->rule == CHANGE_GEMM_RATE ? (at_rate < learned ? at_rate : learned)
                    : learned * ch->factor;
            snprintf(how, sizeof(how), "changed %s, %s: %s", ch->since, ch->what,
                     ch->rule == CHANGE_AT_BANDWIDTH ? "its bytes at the learned bandwidth"
                     : ch->rule == CHANGE_GEMM_RATE ? "at most its FLOPs at 700 TFLOP/s"
                     : "x the cost model's ratio of the two versions");
            changed++;
        }
        learned_total += learned;
        model_total += model;
        char measured[32] = "-";
        if (rec.found[r]) { snprintf(measured, sizeof(measured), "%.3f", rec.ms[r]); }
        printf("profile %-15s %9s %10.3f %9.3f  %s\n", profile_row_names[r], measured, 1e3 * learned, 1e3 * model, how);
    }
    printf("profile %-15s %9.3f %10.3f %9.3f\n", "total", rec.total_ms, 1e3 * learned_total, 1e3 * model_total);
    printf("profile step: measured %.2f ms (%s, %s, at the record's shape) | predicted for this build and shape %.2f ms, "
           "%.0f tokens/s (learned: %d rows changed since, %d not in the record) | the cost model alone %.2f ms\n",
           rec.total_ms, rec.gpu.c_str(), rec.commit.c_str(), 1e3 * learned_total, tokens_per_step / learned_total, changed,
           unmeasured, 1e3 * model_total);
    return 1;
}

static int profile_main(int argc, char** argv) { // argv[0] is the first argument after "profile"
    RunShape rs;
    if (!parse_run_shape(argc, argv, profile_usage, 1, &rs)) { return 1; }
    ProfileRecord rec;
    char msg[1024];
    if (rs.learn != NULL && !read_profile_record(rs.learn, &rec, msg, sizeof(msg))) {
        fprintf(stderr, "params: %s\n", msg);
        return 1;
    }
    const GPT2Config* c = &rs.c;
    ProfileShape shape = {rs.B, rs.T, rs.micro_steps, rs.bf16 ? 2 : 4, rs.master, rs.fused ? rs.flash : 0,
                          rs.fused ? rs.flash_bwd : 0, rs.recompute, rs.bias_fusion};
    ProfileCost rows[PROF_NUM_ROWS];
    profile_costs(c, &shape, rows);
    FILE* csv = NULL;
    if (rs.csv != NULL && (csv = fopen(rs.csv, "w")) == NULL) {
        fprintf(stderr, "params: --csv %s: cannot write it (%s)\n", rs.csv, strerror(errno));
        return 1;
    }
    char flash_name[64];
    snprintf(flash_name, sizeof(flash_name), " (flash forward %d, backward %d)", rs.flash, rs.flash_bwd);
    printf("profile scheme=%s n_layer=%d n_embd=%d n_head=%d n_kv_head=%d mlp=%d bias=%d B=%d T=%d precision=%s "
           "attention=%s%s recompute=%d master_weights=%d bias_fusion=%d (predicted, %d micro-step%s per step)\n",
           qkv_scheme_name(c->scheme), c->num_layers, c->channels, c->num_heads, c->num_kv_heads, c->mlp_hidden,
           c->use_bias, rs.B, rs.T, rs.bf16 ? "bf16" : "fp32", rs.fused ? "fused" : "unfused",
           rs.fused ? flash_name : "", rs.recompute, rs.master, rs.bias_fusion, rs.micro_steps, rs.micro_steps > 1 ? "s" : "");
    profile_report(NULL, rows, csv);
    if (csv != NULL && fclose(csv) != 0) {
        fprintf(stderr, "params: --csv %s: write failed (%s)\n", rs.csv, strerror(errno));
        return 1;
    }
    double pred = 0.0, roof = 0.0;
    for (int r = 0; r < PROF_NUM_ROWS; r++) { pred += profile_predicted_s(&rows[r]); roof += profile_roofline_s(&rows[r]); }
    const double tokens = (double)rs.B * rs.T * rs.micro_steps, model_flops = gpt2_flops_per_token(c, rs.T) * tokens;
    printf("profile predicted step %.2f ms: %.0f tokens/s, %.1f%% of 790 TFLOP/s by llm.c's formula "
           "(the roofline's %.2f ms: %.0f tokens/s)\n", 1e3 * pred, tokens / pred, 100.0 * model_flops / pred / PROFILE_PEAK_FLOPS,
           1e3 * roof, tokens / roof);
    if (!profile_flops_check(&rs)) { return 1; }
    return rs.learn == NULL || learned_profile(rs.learn, rec, rows, tokens) ? 0 : 1;
}

int main(int argc, char** argv) {
    if (argc > 1 && strcmp(argv[1], "profile") == 0) { return profile_main(argc - 2, argv + 2); }
    if (argc > 1 && strcmp(argv[1], "memory") == 0) { return memory_main(argc - 2, argv + 2); }
    if (argc > 1) {
        if (argc < 8 || argc > 9) {
            fprintf(stderr, "usage: params [<scheme> n_layer n_embd n_head n_kv_head mlp bias [T]], or params memory ... "
                            "(params memory with no more arguments says what)\n");
            return 1;
        }
        int scheme = qkv_scheme_from_name(argv[1]);
        if (scheme < 0) {
            fprintf(stderr, "params: unknown scheme '%s' (expected one of standard, q_identity, k_identity, "
                            "v_identity, kv_shared, qk_shared, qkv_shared, q_residual)\n", argv[1]);
            return 1;
        }
        GPT2Config c = make_config(scheme, parse_arg("n_layer", argv[2]), parse_arg("n_embd", argv[3]),
                                   parse_arg("n_head", argv[4]), parse_arg("n_kv_head", argv[5]),
                                   parse_arg("mlp", argv[6]), parse_arg("bias", argv[7]),
                                   argc == 9 ? parse_arg("T", argv[8]) : 1024);
        return print_line(&c) ? 0 : 1;
    }
    // The configurations of dev/SCHEMES.md, section 6: seed 000 (GPT-2 small without biases), seed 004 300M and 1.2B.
    struct { int scheme, L, C, H, Hkv, M, bias, T; } table[] = {
        {QKV_STANDARD,   12,  768, 12, 12, 3072, 0, 1024},
        {QKV_Q_IDENTITY, 12,  768, 12, 12, 3072, 0, 1024},
        {QKV_STANDARD,   12,  768, 12, 12, 2688, 0, 1024},
        {QKV_STANDARD,   12,  744, 12, 12, 2976, 0, 1024},
        {QKV_Q_IDENTITY, 12,  768, 12, 12, 3456, 0, 1024},
        {QKV_Q_RESIDUAL, 12,  768, 12, 12, 3072, 0, 1024},
        {QKV_STANDARD,   20, 1024, 16, 16, 4096, 1, 2048},
        {QKV_KV_SHARED,  20, 1024, 16, 16, 4096, 1, 2048},
        {QKV_QK_SHARED,  20, 1024, 16, 16, 4096, 1, 2048},
        {QKV_QKV_SHARED, 20, 1024, 16, 16, 4096, 1, 2048},
        {QKV_STANDARD,   20, 1024, 16,  4, 4096, 1, 2048},
        {QKV_STANDARD,   20, 1024, 16,  1, 4096, 1, 2048},
        {QKV_KV_SHARED,  20, 1024, 16,  4, 4096, 1, 2048},
        {QKV_KV_SHARED,  20, 1024, 16,  1, 4096, 1, 2048},
        {QKV_STANDARD,   22, 2048, 32, 32, 8192, 1, 2048},
        {QKV_KV_SHARED,  22, 2048, 32, 32, 8192, 1, 2048},
        {QKV_STANDARD,   22, 2048, 32,  8, 8192, 1, 2048},
        {QKV_STANDARD,   22, 2048, 32,  1, 8192, 1, 2048},
        {QKV_KV_SHARED,  22, 2048, 32,  8, 8192, 1, 2048},
        {QKV_KV_SHARED,  22, 2048, 32,  1, 8192, 1, 2048},
    };
    int ok = 1;
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
        GPT2Config c = make_config(table[i].scheme, table[i].L, table[i].C, table[i].H, table[i].Hkv,
                                   table[i].M, table[i].bias, table[i].T);
        ok &= print_line(&c);
    }
    return ok ? 0 : 1;
}
