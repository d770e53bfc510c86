/*
params: prints parameter counts and KV-cache sizes for the configurations of VARIANTS.md,
computed from the shapes by attention_variants.cuh (nothing here is typed in but the shapes).
`make params` runs it; dev/test/test_params.sh checks its output against VARIANTS.md.

  params                 the VARIANTS.md table, one line per configuration
  params <scheme> L C H Hkv M bias [T]
                         one line for a shape of your own (T defaults to 1024)
*/
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include "../../attention_variants.cuh"

static GPT2Config make_config(int scheme, int L, int C, int H, int Hkv, int M, int bias, int T) {
    GPT2Config c = gpt2_config_default(L, H, C, T, 50257, 50304);
    c.scheme = scheme;
    c.num_kv_heads = Hkv;
    c.mlp_hidden = M;
    c.use_bias = bias;
    return c;
}

static int print_line(const GPT2Config* c) {
    char msg[512];
    if (!gpt2_config_check(c, msg, sizeof(msg))) {
        fprintf(stderr, "params: %s\n", msg);
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

int main(int argc, char** argv) {
    if (argc > 1) {
        if (argc < 8 || argc > 9) {
            fprintf(stderr, "usage: params [<scheme> n_layer n_embd n_head n_kv_head mlp bias [T]]\n");
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
