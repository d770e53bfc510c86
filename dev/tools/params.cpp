/*
params: prints parameter counts and KV-cache sizes for the configurations of VARIANTS.md,
computed from the shapes by attention_variants.cuh (nothing here is typed in but the shapes).
`make params` runs it; dev/test/test_params.sh checks its output against VARIANTS.md.

  params                 the VARIANTS.md table, one line per configuration
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
                 [--bias_fusion 0|1] [--csv FILE]
  params profile d12 T B [...]
                         the predicted per-sublayer table of one training step (dev/profile.h):
                         FLOPs, minimum bytes, roofline and the cost model's time per row (and as
                         CSV); then checks that the rows' FLOPs add up to llm.c's 6 N + 6 L C T
                         (exit 1 if not). --flash and --bias_fusion as the trainer's (defaults:
                         flash forward 3 and backward 4; bias fusion 1).
*/
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include "../../attention_variants.cuh"
#include "../checkpoint.h"
#include "../training_memory.h"
#include "../profile.h"

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
    const char* csv; // profile --csv FILE, else NULL
} RunShape;

static int parse_run_shape(int argc, char** argv, const char* usage, int allow_csv, RunShape* rs) {
    int scheme = QKV_STANDARD, L = 12, C = 768, H = 12, Hkv = 12, M = 3072, bias = 1, i = 0;
    rs->csv = NULL;
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
        } else if (allow_csv && strcmp(o, "--csv") == 0) {
            if (i + 1 >= argc || argv[i + 1][0] == '\0') { fprintf(stderr, "params: --csv needs a file name\n"); return 0; }
            if (rs->csv != NULL) { fprintf(stderr, "params: --csv given twice, expected it at most once\n"); return 0; }
            rs->csv = argv[++i];
            ok = 1;
        } else {
            fprintf(stderr, "params: option '%s' is not one of bf16, fp32, fused, unfused, --flash 2|3|4, -r 0|1|2, -w 0|1%s\n", o,
                    allow_csv ? ", --bias_fusion 0|1, --csv FILE" : "");
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
    rs->flash = flash_forward_version(flash < 0 ? 0 : flash);
    rs->flash_bwd = flash_backward_version(flash < 0 ? 0 : flash);
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
// params profile: the predicted per-sublayer table of one training step (dev/profile.h)

static const char* const profile_usage =
    "usage: params profile <scheme> n_layer n_embd n_head n_kv_head mlp bias T B [bf16|fp32] [fused|unfused] "
    "[--flash 2|3|4] [-r 0|1|2] [-w 0|1] [--bias_fusion 0|1] [--csv FILE], or params profile d12 T B [the same options]";

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

static int profile_main(int argc, char** argv) { // argv[0] is the first argument after "profile"
    RunShape rs;
    if (!parse_run_shape(argc, argv, profile_usage, 1, &rs)) { return 1; }
    const GPT2Config* c = &rs.c;
    ProfileShape shape = {rs.B, rs.T, 1, rs.bf16 ? 2 : 4, rs.master, rs.fused ? rs.flash : 0, rs.fused ? rs.flash_bwd : 0,
                          rs.recompute,
                          rs.bias_fusion};
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
           "attention=%s%s recompute=%d master_weights=%d bias_fusion=%d (predicted, one micro-step per step)\n",
           qkv_scheme_name(c->scheme), c->num_layers, c->channels, c->num_heads, c->num_kv_heads, c->mlp_hidden,
           c->use_bias, rs.B, rs.T, rs.bf16 ? "bf16" : "fp32", rs.fused ? "fused" : "unfused",
           rs.fused ? flash_name : "", rs.recompute, rs.master, rs.bias_fusion);
    profile_report(NULL, rows, csv);
    if (csv != NULL && fclose(csv) != 0) {
        fprintf(stderr, "params: --csv %s: write failed (%s)\n", rs.csv, strerror(errno));
        return 1;
    }
    double pred = 0.0, roof = 0.0;
    for (int r = 0; r < PROF_NUM_ROWS; r++) { pred += profile_predicted_s(&rows[r]); roof += profile_roofline_s(&rows[r]); }
    const double tokens = (double)rs.B * rs.T, model_flops = gpt2_flops_per_token(c, rs.T) * tokens;
    printf("profile predicted step %.2f ms: %.0f tokens/s, %.1f%% of 790 TFLOP/s by llm.c's formula "
           "(the roofline's %.2f ms: %.0f tokens/s)\n", 1e3 * pred, tokens / pred, 100.0 * model_flops / pred / PROFILE_PEAK_FLOPS,
           1e3 * roof, tokens / roof);
    return profile_flops_check(&rs) ? 0 : 1;
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
    // The configurations of VARIANTS.md: seed 000 (GPT-2 small without biases), seed 004 300M and 1.2B.
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
