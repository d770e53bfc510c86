/*
dev/trainer/parameters.h: the model's parameter tensors, as data.

Their file order (dev/FORMATS.md), names and shapes for a config, which AdamW decays and which are
initialized depth-scaled, the parameter counts dev/SCHEMES.md quotes, and the training FLOPs per token
that MFU is computed from. The shapes read the scheme's layout (attention_variants.cuh): the width
of the fused projection, and the residual query's tensors where the layout has one.
*/
#ifndef PARAMETERS_H
#define PARAMETERS_H

#include "../../attention_variants.cuh"

// Parameter tensors, in file order. The first 16 are llm.c's, so that the standard scheme with
// biases, a tied head and MLP 4C has exactly llm.c's layout (gpt2_124M.bin reads unchanged).
// A tensor the shape does not have (a bias with bias=0, lm_head when tied, qres_* outside
// q_residual) has size 0 and takes no space in the file.

enum {
    PARAM_WTE = 0,      // (Vp, C)
    PARAM_WPE,          // (maxT, C)
    PARAM_LN1W,         // (L, C)
    PARAM_LN1B,         // (L, C)            bias
    PARAM_QKVW,         // (L, width, C)     the fused projection of QKVLayout
    PARAM_QKVB,         // (L, width)        bias
    PARAM_ATTPROJW,     // (L, C, C)
    PARAM_ATTPROJB,     // (L, C)            bias
    PARAM_LN2W,         // (L, C)
    PARAM_LN2B,         // (L, C)            bias
    PARAM_FCW,          // (L, M, C)
    PARAM_FCB,          // (L, M)            bias
    PARAM_FCPROJW,      // (L, C, M)
    PARAM_FCPROJB,      // (L, C)            bias
    PARAM_LNFW,         // (C)
    PARAM_LNFB,         // (C)               bias
    PARAM_LM_HEAD,      // (Vp, C)           untied head only
    PARAM_QRES_RMSW,    // (L, C)            q_residual: RMSNorm_q gain
    PARAM_QRES_W1,      // (L, C/2, C)       q_residual: W1, C -> C/2
    PARAM_QRES_W2,      // (L, C, C/2)       q_residual: W2, C/2 -> C
    PARAM_QRES_LNW,     // (L, C)            q_residual: LN_q gain
    NUM_PARAMETER_TENSORS
};

static const char* const param_tensor_names[NUM_PARAMETER_TENSORS] = {
    "wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
    "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb",
    "lm_head", "qres_rmsw", "qres_w1", "qres_w2", "qres_lnw",
};

// AdamW weight decay goes to the 2-D weight matrices (embeddings included), as in nanoGPT and
// seed 000; biases and norm gains are not decayed.
static const int param_tensor_decayed[NUM_PARAMETER_TENSORS] = {
    1, 1, 0, 0, 1, 0, 1, 0,
    0, 0, 1, 0, 1, 0, 0, 0,
    1, 0, 1, 1, 0,
};

// Residual output projections, initialized with std 0.02/sqrt(2 L) (GPT-2); the q_residual
// weights are not depth-scaled (seed 002).
static const int param_tensor_residual_scaled[NUM_PARAMETER_TENSORS] = {
    0, 0, 0, 0, 0, 0, 1, 0,
    0, 0, 0, 0, 1, 0, 0, 0,
    0, 0, 0, 0, 0,
};

// shape of each tensor: up to 3 dims, ndims[i] == 0 for a tensor the config does not have
static inline void fill_param_shapes(const GPT2Config* c, int ndims[NUM_PARAMETER_TENSORS],
                                     size_t dims[NUM_PARAMETER_TENSORS][3]) {
    const size_t Vp = (size_t)c->padded_vocab_size, maxT = (size_t)c->max_seq_len, C = (size_t)c->channels;
    const size_t L = (size_t)c->num_layers, M = (size_t)c->mlp_hidden;
    const QKVLayout layout = qkv_layout(c);
    const size_t W = (size_t)layout.width;
    const int b = c->use_bias, qres = qkv_has_residual_query(&layout);
#define QKV_SHAPE(i, present, n, d0, d1, d2) do { ndims[i] = (present) ? (n) : 0; \
        dims[i][0] = (d0); dims[i][1] = (d1); dims[i][2] = (d2); } while (0)
    QKV_SHAPE(PARAM_WTE, 1, 2, Vp, C, 1);
    QKV_SHAPE(PARAM_WPE, 1, 2, maxT, C, 1);
    QKV_SHAPE(PARAM_LN1W, 1, 2, L, C, 1);
    QKV_SHAPE(PARAM_LN1B, b, 2, L, C, 1);
    QKV_SHAPE(PARAM_QKVW, 1, 3, L, W, C);
    QKV_SHAPE(PARAM_QKVB, b, 2, L, W, 1);
    QKV_SHAPE(PARAM_ATTPROJW, 1, 3, L, C, C);
    QKV_SHAPE(PARAM_ATTPROJB, b, 2, L, C, 1);
    QKV_SHAPE(PARAM_LN2W, 1, 2, L, C, 1);
    QKV_SHAPE(PARAM_LN2B, b, 2, L, C, 1);
    QKV_SHAPE(PARAM_FCW, 1, 3, L, M, C);
    QKV_SHAPE(PARAM_FCB, b, 2, L, M, 1);
    QKV_SHAPE(PARAM_FCPROJW, 1, 3, L, C, M);
    QKV_SHAPE(PARAM_FCPROJB, b, 2, L, C, 1);
    QKV_SHAPE(PARAM_LNFW, 1, 1, C, 1, 1);
    QKV_SHAPE(PARAM_LNFB, b, 1, C, 1, 1);
    QKV_SHAPE(PARAM_LM_HEAD, !c->tied_head, 2, Vp, C, 1);
    QKV_SHAPE(PARAM_QRES_RMSW, qres, 2, L, C, 1);
    QKV_SHAPE(PARAM_QRES_W1, qres, 3, L, C / 2, C);
    QKV_SHAPE(PARAM_QRES_W2, qres, 3, L, C, C / 2);
    QKV_SHAPE(PARAM_QRES_LNW, qres, 2, L, C, 1);
#undef QKV_SHAPE
}

// the total counted in double: fill_param_sizes' size_t products wrap for a huge shape (a corrupt header,
// n_layer and mlp near 2^31) into a plausible number; callers refuse a shape whose double count is too large
static inline double gpt2_num_parameters_double(const GPT2Config* c) {
    int ndims[NUM_PARAMETER_TENSORS];
    size_t dims[NUM_PARAMETER_TENSORS][3];
    fill_param_shapes(c, ndims, dims);
    double total = 0.0;
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
        double n = ndims[i] > 0 ? 1.0 : 0.0;
        for (int d = 0; d < ndims[i]; d++) { n *= (double)dims[i][d]; }
        total += n;
    }
    return total;
}

// number of elements of each tensor (0 for absent tensors); returns the total
static inline size_t fill_param_sizes(const GPT2Config* c, size_t sizes[NUM_PARAMETER_TENSORS]) {
    int ndims[NUM_PARAMETER_TENSORS];
    size_t dims[NUM_PARAMETER_TENSORS][3];
    fill_param_shapes(c, ndims, dims);
    size_t total = 0;
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
        sizes[i] = 0;
        if (ndims[i] > 0) {
            sizes[i] = 1;
            for (int d = 0; d < ndims[i]; d++) { sizes[i] *= dims[i][d]; }
        }
        total += sizes[i];
    }
    return total;
}

static inline size_t gpt2_num_parameters(const GPT2Config* c) {
    size_t sizes[NUM_PARAMETER_TENSORS];
    return fill_param_sizes(c, sizes);
}

// "non-embedding" as dev/SCHEMES.md (section 6) counts it: everything but wte and wpe (an untied head counts)
static inline size_t gpt2_num_non_embedding_parameters(const GPT2Config* c) {
    size_t sizes[NUM_PARAMETER_TENSORS];
    size_t total = fill_param_sizes(c, sizes);
    return total - sizes[PARAM_WTE] - sizes[PARAM_WPE];
}

// Training FLOPs per token, llm.c's formula (gpt2_estimate_mfu): 6 N for the parameters plus
// 6 L C T for attention's two (T x T) matmuls, forward and backward, causal (half of PaLM's 12 L C T),
// so that our MFU and llm.c's are the same number for the same speed. Used for MFU; N counts every
// parameter, so a scheme with fewer weights is charged less.
static inline double gpt2_flops_per_token(const GPT2Config* c, int T) {
    return 6.0 * (double)gpt2_num_parameters(c) + 6.0 * (double)c->num_layers * (double)c->channels * (double)T;
}

#endif // PARAMETERS_H
