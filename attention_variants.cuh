/*
attention_variants.cuh: the one place where the Q/K/V projection schemes differ.

Everything a trainer needs to know about a scheme lives here, as plain data and small
functions that compile with nvcc and with any C++11 compiler:

  - the scheme enumeration and its names (the `QKV=<id>` of the Makefile),
  - the compile-time choice QKV_SCHEME (one binary per scheme),
  - the model shape (GPT2Config) with the runtime knobs of VARIANTS.md,
  - the constraint check: a forbidden scheme/shape combination gives a message naming both,
  - the fused attention projection: its width and where q, k, v come from (QKVLayout), and where
    the fused attention backward sends their gradients (qkv_fused_grad_plan),
  - the parameter tensors (names, shapes, which are decayed), parameter counts,
  - the default attention scale, KV-cache bytes per token and FLOPs per token,
  - the CUDA trainer's training memory: the tensor lists its allocations are carved from
    (gpt2_training_memory; `build/params memory` prints them).

The specification is dev/SCHEMES.md (the schemes' math, constraints, counts and the papers' numbers).
To add a scheme: add an enum value and a name below, give it a layout in qkv_layout(),
its constraint in gpt2_config_check() and, if it has parameters of its own, tensors in
fill_param_sizes(); then teach the reference script (dev/reference/train_gpt2.py) and the
two trainers how to form q/k/v for the new QKVSource, if it introduces one (train_gpt2.cu:
attn_role_rows and qkv_fused_grad_plan; dev/cuda/attention_lab_common.h: lab_role_rows_host).
*/
#ifndef ATTENTION_VARIANTS_CUH
#define ATTENTION_VARIANTS_CUH

#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#ifdef __CUDACC__
#define QKV_HOST_DEVICE __host__ __device__
#else
#define QKV_HOST_DEVICE
#endif

// ----------------------------------------------------------------------------
// The schemes. The numeric ids are stored in checkpoints: never renumber, only append.

enum QKVScheme {
    QKV_STANDARD   = 0, // q = x Wq, k = x Wk, v = x Wv
    QKV_Q_IDENTITY = 1, // q = x                      (W_Q = I)
    QKV_K_IDENTITY = 2, // k = x                      (W_K = I), needs Hkv = H
    QKV_V_IDENTITY = 3, // v = x                      (W_V = I), needs Hkv = H
    QKV_KV_SHARED  = 4, // v = k, one tensor          (Q-K=V; with Hkv < H: Q-GQA / Q-MQA)
    QKV_QK_SHARED  = 5, // q = k, one tensor          (Q=K-V), needs Hkv = H
    QKV_QKV_SHARED = 6, // q = k = v, one tensor      (Q=K=V), needs Hkv = H
    QKV_Q_RESIDUAL = 7, // q = x + LN_q(W2 gelu(W1 RMSNorm_q(x)))
    QKV_NUM_SCHEMES = 8
};

static const char* const qkv_scheme_names[QKV_NUM_SCHEMES] = {
    "standard", "q_identity", "k_identity", "v_identity",
    "kv_shared", "qk_shared", "qkv_shared", "q_residual",
};

// The scheme this binary is built for: the Makefile passes -DQKV_SCHEME=QKV_<ID> from QKV=<id>.
// It is an enum constant, not a preprocessor number, on purpose: code asks the functions below
// what the scheme means instead of growing `#if QKV_SCHEME == ...` blocks.
#ifndef QKV_SCHEME
#define QKV_SCHEME QKV_STANDARD
#endif
static const int kQKVScheme = QKV_SCHEME;

static inline const char* qkv_scheme_name(int scheme) {
    if (scheme < 0 || scheme >= QKV_NUM_SCHEMES) { return "unknown"; }
    return qkv_scheme_names[scheme];
}

// returns the scheme id for a name, or -1
static inline int qkv_scheme_from_name(const char* name) {
    for (int s = 0; s < QKV_NUM_SCHEMES; s++) {
        if (strcmp(name, qkv_scheme_names[s]) == 0) { return s; }
    }
    return -1;
}

// ----------------------------------------------------------------------------
// The model shape. Every field is stored in the checkpoint header (see dev/FORMATS.md).

typedef struct {
    int scheme;            // QKVScheme
    int max_seq_len;       // max sequence length, e.g. 1024
    int vocab_size;        // vocab size, e.g. 50257
    int padded_vocab_size; // padded to e.g. %128==0, 50304
    int num_layers;        // number of layers, e.g. 12
    int num_heads;         // number of query heads in attention, e.g. 12
    int num_kv_heads;      // number of key/value heads (GQA groups), divides num_heads
    int channels;          // number of channels, e.g. 768
    int mlp_hidden;        // MLP hidden size, default 4 * channels
    int use_bias;          // 1: GPT-2 biases (linear and LayerNorm), 0: none anywhere
    int tied_head;         // 1: the LM head is wte, 0: a separate lm_head tensor
    float attn_scale;      // 0: the scheme's default (qkv_default_attn_scale), else the override
} GPT2Config;

// The largest value of any shape field (n_layer, n_head, n_kv_head, n_embd, mlp, T, vocab): far above
// any real model, and small enough that the int arithmetic on shapes (4 * n_embd, C + 2 * KV) cannot
// overflow. A header or a flag beyond it is refused before any arithmetic on it.
#define GPT2_MAX_DIM (1 << 24)

// GPT-2 as llm.c knows it: the shape implied by a v3/v5 checkpoint of the standard scheme.
static inline GPT2Config gpt2_config_default(int num_layers, int num_heads, int channels,
                                             int max_seq_len, int vocab_size, int padded_vocab_size) {
    GPT2Config c;
    c.scheme = QKV_STANDARD;
    c.max_seq_len = max_seq_len;
    c.vocab_size = vocab_size;
    c.padded_vocab_size = padded_vocab_size;
    c.num_layers = num_layers;
    c.num_heads = num_heads;
    c.num_kv_heads = num_heads;
    c.channels = channels;
    // saturates instead of overflowing for an absurd n_embd, which gpt2_config_check then refuses by name
    const long long mlp = 4LL * channels;
    c.mlp_hidden = mlp > INT_MAX ? INT_MAX : (mlp < INT_MIN ? INT_MIN : (int)mlp);
    c.use_bias = 1;
    c.tied_head = 1;
    c.attn_scale = 0.0f;
    return c;
}

static inline int qkv_head_dim(const GPT2Config* c) { return c->channels / c->num_heads; }
static inline int qkv_kv_channels(const GPT2Config* c) { return c->num_kv_heads * qkv_head_dim(c); }

// one line, e.g. "n_layer=2 n_embd=64 n_head=4 n_kv_head=2 mlp=256 bias=1 tied=1 context=64 vocab=500/512":
// context is the longest sequence the model takes (max_seq_len; a run trains at its own -t <= it),
// vocab the tokens and, after the slash, the rows the embedding is padded to
static inline void gpt2_config_describe(const GPT2Config* c, char* out, size_t out_size) {
    snprintf(out, out_size, "n_layer=%d n_embd=%d n_head=%d n_kv_head=%d mlp=%d bias=%d tied=%d context=%d vocab=%d/%d",
             c->num_layers, c->channels, c->num_heads, c->num_kv_heads, c->mlp_hidden,
             c->use_bias, c->tied_head, c->max_seq_len, c->vocab_size, c->padded_vocab_size);
}

// Returns 1 when the scheme/shape combination is allowed; otherwise 0 with a one-line message
// in `msg` that names the scheme, the offending shape fields and what was expected.
static inline int gpt2_config_check(const GPT2Config* c, char* msg, size_t msg_size) {
    const char* name = qkv_scheme_name(c->scheme);
    msg[0] = '\0';
    if (c->scheme < 0 || c->scheme >= QKV_NUM_SCHEMES) {
        snprintf(msg, msg_size, "unknown scheme id %d (this build knows ids 0..%d)", c->scheme, QKV_NUM_SCHEMES - 1);
        return 0;
    }
    if (c->num_layers < 1 || c->num_heads < 1 || c->channels < 1 || c->max_seq_len < 1 ||
        c->vocab_size < 1 || c->mlp_hidden < 1) {
        snprintf(msg, msg_size, "scheme %s: n_layer=%d n_head=%d n_embd=%d T=%d vocab=%d mlp=%d must all be >= 1",
                 name, c->num_layers, c->num_heads, c->channels, c->max_seq_len, c->vocab_size, c->mlp_hidden);
        return 0;
    }
    const struct { const char* name; int value; } dims[] = {
        {"n_layer", c->num_layers}, {"n_head", c->num_heads}, {"n_kv_head", c->num_kv_heads}, {"n_embd", c->channels},
        {"mlp", c->mlp_hidden}, {"T", c->max_seq_len}, {"vocab", c->vocab_size}, {"padded vocab", c->padded_vocab_size},
    };
    for (size_t i = 0; i < sizeof(dims) / sizeof(dims[0]); i++) {
        if (dims[i].value > GPT2_MAX_DIM) {
            snprintf(msg, msg_size, "scheme %s: %s=%d is out of range, expected at most %d", name, dims[i].name,
                     dims[i].value, GPT2_MAX_DIM);
            return 0;
        }
    }
    if (c->padded_vocab_size < c->vocab_size) {
        snprintf(msg, msg_size, "scheme %s: padded vocab %d is smaller than vocab %d", name, c->padded_vocab_size, c->vocab_size);
        return 0;
    }
    if (c->channels % c->num_heads != 0) {
        snprintf(msg, msg_size, "scheme %s: n_embd=%d is not divisible by n_head=%d (heads are n_embd/n_head wide)",
                 name, c->channels, c->num_heads);
        return 0;
    }
    if (c->num_kv_heads < 1 || c->num_heads % c->num_kv_heads != 0) {
        snprintf(msg, msg_size, "scheme %s: n_kv_head=%d must be >= 1 and divide n_head=%d",
                 name, c->num_kv_heads, c->num_heads);
        return 0;
    }
    if (c->use_bias != 0 && c->use_bias != 1) {
        snprintf(msg, msg_size, "scheme %s: bias must be 0 or 1, got %d", name, c->use_bias);
        return 0;
    }
    if (c->tied_head != 0 && c->tied_head != 1) {
        snprintf(msg, msg_size, "scheme %s: tied must be 0 or 1, got %d", name, c->tied_head);
        return 0;
    }
    if (!(c->attn_scale >= 0.0f) || isinf(c->attn_scale)) {
        snprintf(msg, msg_size, "scheme %s: attention scale must be a finite number >= 0 (0 = default), got %g",
                 name, (double)c->attn_scale);
        return 0;
    }
    switch (c->scheme) {
        case QKV_K_IDENTITY:
        case QKV_V_IDENTITY:
        case QKV_QK_SHARED:
        case QKV_QKV_SHARED:
            if (c->num_kv_heads != c->num_heads) {
                const char* why =
                    c->scheme == QKV_K_IDENTITY ? "k = x has one key head per query head" :
                    c->scheme == QKV_V_IDENTITY ? "v = x has one value head per query head" :
                    "q and k are one tensor, so they have the same number of heads";
                snprintf(msg, msg_size, "scheme %s requires n_kv_head == n_head, got n_kv_head=%d with n_head=%d (%s)",
                         name, c->num_kv_heads, c->num_heads, why);
                return 0;
            }
            break;
        case QKV_Q_RESIDUAL:
            if (c->channels % 2 != 0) {
                snprintf(msg, msg_size, "scheme %s requires an even n_embd (W1 maps C to C/2), got n_embd=%d",
                         name, c->channels);
                return 0;
            }
            break;
        default:
            break;
    }
    return 1;
}

// ----------------------------------------------------------------------------
// The fused attention projection. Each layer has one matrix qkvw of shape (width, C) (and a bias
// (width) when biases are on): y = x qkvw^T + qkvb, shape (B, T, width). Each of q, k, v is then
// either a column range of y, the attention input x itself, or (q_residual) x + f(x).
// Two roles with the same source PROJECTION and the same offset are one tensor: the same storage
// in the forward pass, and in the backward pass their gradients are summed into it.

enum QKVSource {
    QKV_SRC_PROJECTION = 0,     // columns [offset, offset + channels) of the fused projection output
    QKV_SRC_INPUT = 1,          // x itself, the LN1 output (channels == C)
    QKV_SRC_RESIDUAL_QUERY = 2, // x + LN_q(W2 gelu(W1 RMSNorm_q(x))), the qres_* tensors
};

typedef struct {
    int source;   // QKVSource
    int offset;   // first column in the fused projection output (QKV_SRC_PROJECTION only, else 0)
    int channels; // q: H * hd = C; k, v: Hkv * hd
} QKVRole;

typedef struct {
    int width; // columns of the fused projection: qkvw is (width, C)
    QKVRole q, k, v;
} QKVLayout;

static inline QKVRole qkv_role(int source, int offset, int channels) {
    QKVRole r;
    r.source = source;
    r.offset = offset;
    r.channels = channels;
    return r;
}

QKV_HOST_DEVICE static inline int qkv_roles_share(QKVRole a, QKVRole b) {
    return a.source == QKV_SRC_PROJECTION && b.source == QKV_SRC_PROJECTION && a.offset == b.offset;
}

// The layout of a (checked) config. Roles are laid out in q, k, v order, each stored tensor once.
static inline QKVLayout qkv_layout(const GPT2Config* c) {
    const int C = c->channels;
    const int KV = qkv_kv_channels(c);
    QKVLayout L;
    switch (c->scheme) {
        case QKV_Q_IDENTITY:
            L.q = qkv_role(QKV_SRC_INPUT, 0, C);
            L.k = qkv_role(QKV_SRC_PROJECTION, 0, KV);
            L.v = qkv_role(QKV_SRC_PROJECTION, KV, KV);
            L.width = 2 * KV;
            break;
        case QKV_K_IDENTITY: // KV == C
            L.q = qkv_role(QKV_SRC_PROJECTION, 0, C);
            L.k = qkv_role(QKV_SRC_INPUT, 0, C);
            L.v = qkv_role(QKV_SRC_PROJECTION, C, C);
            L.width = 2 * C;
            break;
        case QKV_V_IDENTITY: // KV == C
            L.q = qkv_role(QKV_SRC_PROJECTION, 0, C);
            L.k = qkv_role(QKV_SRC_PROJECTION, C, C);
            L.v = qkv_role(QKV_SRC_INPUT, 0, C);
            L.width = 2 * C;
            break;
        case QKV_KV_SHARED:
            L.q = qkv_role(QKV_SRC_PROJECTION, 0, C);
            L.k = qkv_role(QKV_SRC_PROJECTION, C, KV);
            L.v = L.k;
            L.width = C + KV;
            break;
        case QKV_QK_SHARED: // KV == C
            L.k = qkv_role(QKV_SRC_PROJECTION, 0, C);
            L.q = L.k;
            L.v = qkv_role(QKV_SRC_PROJECTION, C, C);
            L.width = 2 * C;
            break;
        case QKV_QKV_SHARED: // KV == C
            L.k = qkv_role(QKV_SRC_PROJECTION, 0, C);
            L.q = L.k;
            L.v = L.k;
            L.width = C;
            break;
        case QKV_Q_RESIDUAL:
            L.q = qkv_role(QKV_SRC_RESIDUAL_QUERY, 0, C);
            L.k = qkv_role(QKV_SRC_PROJECTION, 0, KV);
            L.v = qkv_role(QKV_SRC_PROJECTION, KV, KV);
            L.width = 2 * KV;
            break;
        case QKV_STANDARD:
        default:
            L.q = qkv_role(QKV_SRC_PROJECTION, 0, C);
            L.k = qkv_role(QKV_SRC_PROJECTION, C, KV);
            L.v = qkv_role(QKV_SRC_PROJECTION, C + KV, KV);
            L.width = C + 2 * KV;
            break;
    }
    return L;
}

// How the fused attention backward routes the role gradients. Its dK/dV kernel writes k's and v's
// tensors first, then its dQ kernel writes q's. accumulate[r]: role r's write adds to what its
// destination already holds (q when it shares k's tensor; x's gradient after an earlier identity
// role), else it overwrites. kv_one_write: k and v are one tensor, which gets dK + dV in one write
// (accumulate[2] then equals accumulate[1]). wrote_input: some role is x, so dx was written.
typedef struct {
    int accumulate[3]; // q, k, v
    int kv_one_write;
    int wrote_input;
} QKVGradPlan;

static inline QKVGradPlan qkv_fused_grad_plan(const QKVLayout* L) {
    QKVGradPlan p;
    p.accumulate[0] = p.accumulate[1] = p.accumulate[2] = 0;
    p.wrote_input = 0;
    p.kv_one_write = qkv_roles_share(L->v, L->k);
    if (L->k.source == QKV_SRC_INPUT) { p.accumulate[1] = p.wrote_input; p.wrote_input = 1; }
    if (p.kv_one_write) { p.accumulate[2] = p.accumulate[1]; }
    else if (L->v.source == QKV_SRC_INPUT) { p.accumulate[2] = p.wrote_input; p.wrote_input = 1; }
    if (qkv_roles_share(L->q, L->k) || qkv_roles_share(L->q, L->v)) { p.accumulate[0] = 1; }
    else if (L->q.source == QKV_SRC_INPUT) { p.accumulate[0] = p.wrote_input; p.wrote_input = 1; }
    return p;
}

// Default 1/sqrt(hd); 1/(2 sqrt(hd)) where q is the raw LayerNorm output (q_identity) or
// x + f(x) (q_residual: seed 002's q = (x + f(x))/2 with the 1/2 folded in here, once).
static inline float qkv_default_attn_scale(int scheme, int head_dim) {
    float s = 1.0f / sqrtf((float)head_dim);
    if (scheme == QKV_Q_IDENTITY || scheme == QKV_Q_RESIDUAL) { s *= 0.5f; }
    return s;
}

static inline float gpt2_attn_scale(const GPT2Config* c) {
    return c->attn_scale > 0.0f ? c->attn_scale : qkv_default_attn_scale(c->scheme, qkv_head_dim(c));
}

// ----------------------------------------------------------------------------
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
    const size_t W = (size_t)qkv_layout(c).width;
    const int b = c->use_bias, qres = c->scheme == QKV_Q_RESIDUAL;
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

// "non-embedding" as VARIANTS.md counts it: everything but wte and wpe (an untied head counts)
static inline size_t gpt2_num_non_embedding_parameters(const GPT2Config* c) {
    size_t sizes[NUM_PARAMETER_TENSORS];
    size_t total = fill_param_sizes(c, sizes);
    return total - sizes[PARAM_WTE] - sizes[PARAM_WPE];
}

// Inference KV cache: what one token adds to it. Each layer caches k and v as the layout has them
// (a projection's columns, or x itself for k_identity / v_identity), a tensor shared by k and v
// (kv_shared, qkv_shared) once; GQA keeps only the Hkv heads (k.channels = Hkv * hd). Q is never
// cached (a new token's query meets only cached keys), so q = k sharing saves nothing here.
// Per layer: the values of one cached row ([k | v], or the one shared tensor).
static inline size_t qkv_kv_cache_layer_channels(const GPT2Config* c) {
    const QKVLayout L = qkv_layout(c);
    size_t channels = (size_t)L.k.channels;
    if (!qkv_roles_share(L.k, L.v)) { channels += (size_t)L.v.channels; }
    return channels;
}

// over all layers: values per token (the CPU trainer's fp32 cache is 4 bytes x this)
static inline size_t qkv_kv_cache_channels(const GPT2Config* c) {
    return (size_t)c->num_layers * qkv_kv_cache_layer_channels(c);
}

// bf16: 2 bytes x n_layer x (k channels + v channels, a shared tensor once)
static inline size_t qkv_kv_cache_bytes_per_token(const GPT2Config* c) {
    return 2 * qkv_kv_cache_channels(c);
}

// Training FLOPs per token, llm.c's formula (gpt2_estimate_mfu): 6 N for the parameters plus
// 6 L C T for attention's two (T x T) matmuls, forward and backward, causal (half of PaLM's 12 L C T),
// so that our MFU and llm.c's are the same number for the same speed. Used for MFU; N counts every
// parameter, so a scheme with fewer weights is charged less.
static inline double gpt2_flops_per_token(const GPT2Config* c, int T) {
    return 6.0 * (double)gpt2_num_parameters(c) + 6.0 * (double)c->num_layers * (double)c->channels * (double)T;
}

// ----------------------------------------------------------------------------
// Checkpoint header <-> config (layout in dev/FORMATS.md). Shared by every reader and writer so
// that a file is judged the same way by the CPU trainer, the CUDA trainer and the tools.

#define CHECKPOINT_MAGIC 20240326
#define CHECKPOINT_VERSION_LLMC_FP32 3
#define CHECKPOINT_VERSION_LLMC_BF16 5
#define CHECKPOINT_VERSION_FP32 6
#define CHECKPOINT_VERSION_BF16 7

static inline int checkpoint_version_is_bf16(int version) {
    return version == CHECKPOINT_VERSION_LLMC_BF16 || version == CHECKPOINT_VERSION_BF16;
}

// Parses a 256-int header into *c. Returns 1 on success, else 0 with a one-line message naming
// `path` and what was expected. Does not run gpt2_config_check (the caller does, after overrides).
static inline int gpt2_config_from_header(const int header[256], const char* path, GPT2Config* c,
                                          char* msg, size_t msg_size) {
    if (header[0] != CHECKPOINT_MAGIC) {
        snprintf(msg, msg_size, "%s: bad magic %d in model file, expected %d (HINT: is this a GPT-2 checkpoint? "
                 "see dev/FORMATS.md)", path, header[0], CHECKPOINT_MAGIC);
        return 0;
    }
    const int v = header[1];
    if (v != CHECKPOINT_VERSION_LLMC_FP32 && v != CHECKPOINT_VERSION_LLMC_BF16 &&
        v != CHECKPOINT_VERSION_FP32 && v != CHECKPOINT_VERSION_BF16) {
        snprintf(msg, msg_size, "%s: unsupported model file version %d, expected 3 or 5 (llm.c) or 6 or 7 "
                 "(see dev/FORMATS.md)", path, v);
        return 0;
    }
    // every shape field is range-checked before any arithmetic on it (gpt2_config_default computes
    // 4 * n_embd, qkv_layout C + 2 * KV); 0 is left to gpt2_config_check, which names the scheme
    const int extended = v == CHECKPOINT_VERSION_FP32 || v == CHECKPOINT_VERSION_BF16;
    const struct { int index; const char* name; } fields[] = {
        {2, "max_seq_len"}, {3, "vocab_size"}, {4, "n_layer"}, {5, "n_head"}, {6, "n_embd"}, {7, "padded_vocab_size"},
        {9, "n_kv_head"}, {10, "mlp_hidden"},
    };
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        const int value = header[fields[i].index];
        if ((fields[i].index <= 7 || extended) && (value < 0 || value > GPT2_MAX_DIM)) {
            snprintf(msg, msg_size, "%s: header field %s (int %d) is %d, expected 1..%d (HINT: corrupt or not a "
                     "GPT-2 checkpoint? see dev/FORMATS.md)", path, fields[i].name, fields[i].index, value, GPT2_MAX_DIM);
            return 0;
        }
    }
    *c = gpt2_config_default(header[4], header[5], header[6], header[2], header[3], header[7]);
    if (extended) {
        c->scheme = header[8];
        c->num_kv_heads = header[9];
        c->mlp_hidden = header[10];
        c->use_bias = header[11];
        c->tied_head = header[12];
        memcpy(&c->attn_scale, &header[13], sizeof(float));
    }
    return 1;
}

// Whether llm.c's version 3/5 header describes c completely. It has no fields beyond the shape, so
// it implies what gpt2_config_from_header fills in for it (gpt2_config_default): the standard
// scheme, Hkv = H, MLP 4C, biases, tied head, the default attention scale.
static inline int gpt2_config_is_llmc(const GPT2Config* c) {
    return c->scheme == QKV_STANDARD && c->num_kv_heads == c->num_heads && (long long)c->mlp_hidden == 4LL * c->channels &&
           c->use_bias == 1 && c->tied_head == 1 && c->attn_scale == 0.0f;
}

// The version a writer uses: llm.c's 3 (fp32) or 5 (bf16) wherever llm.c can express the model, so
// that llm.c loads plain GPT-2 checkpoints of ours; our 6 or 7 for everything else.
static inline int checkpoint_version_for(const GPT2Config* c, int bf16) {
    if (gpt2_config_is_llmc(c)) { return bf16 ? CHECKPOINT_VERSION_LLMC_BF16 : CHECKPOINT_VERSION_LLMC_FP32; }
    return bf16 ? CHECKPOINT_VERSION_BF16 : CHECKPOINT_VERSION_FP32;
}

// A model file header's fields [2..13] as versions 6/7 store them: the whole config. (The
// training state keeps these too, whatever version its model file has.)
static inline void gpt2_config_to_fields(const GPT2Config* c, int fields[12]) {
    fields[0] = c->max_seq_len;
    fields[1] = c->vocab_size;
    fields[2] = c->num_layers;
    fields[3] = c->num_heads;
    fields[4] = c->channels;
    fields[5] = c->padded_vocab_size;
    fields[6] = c->scheme;
    fields[7] = c->num_kv_heads;
    fields[8] = c->mlp_hidden;
    fields[9] = c->use_bias;
    fields[10] = c->tied_head;
    memcpy(&fields[11], &c->attn_scale, sizeof(float));
}

// The header every checkpoint writer uses (both trainers), version from checkpoint_version_for;
// fields 8..13 stay zero in llm.c's versions 3/5, as llm.c writes them.
static inline void gpt2_config_to_header(const GPT2Config* c, int bf16, int header[256]) {
    memset(header, 0, 256 * sizeof(int));
    header[0] = CHECKPOINT_MAGIC;
    header[1] = checkpoint_version_for(c, bf16);
    const int llmc = header[1] == CHECKPOINT_VERSION_LLMC_FP32 || header[1] == CHECKPOINT_VERSION_LLMC_BF16;
    int fields[12];
    gpt2_config_to_fields(c, fields);
    memcpy(&header[2], fields, (llmc ? 6 : 12) * sizeof(int));
}

// A binary is built for one scheme: refuse a checkpoint of another, naming both.
static inline int qkv_check_scheme_matches_build(const GPT2Config* c, const char* path, char* msg, size_t msg_size) {
    if (c->scheme == kQKVScheme) { return 1; }
    snprintf(msg, msg_size, "%s was written by scheme %s, but this binary is built for scheme %s "
             "(HINT: use the binary built with QKV=%s, or load a %s checkpoint)", path, qkv_scheme_name(c->scheme),
             qkv_scheme_name(kQKVScheme), qkv_scheme_name(c->scheme), qkv_scheme_name(kQKVScheme));
    return 0;
}

// Everything a trainer checks before reading a checkpoint's weights, from its header and its size
// in bytes, in the order that gives the most useful message: the header itself, the scheme of this
// build (a file of another scheme is refused as such, whatever its shape), the shape allowed for
// the scheme, then the size. The parameter count is first computed in double, so that an absurd
// header cannot overflow size_t into a size that happens to match. Returns 1 with *c filled in, or
// 0 with a one-line message naming `path` and what was expected.
static inline int checkpoint_validate_shape(const int header[256], long long file_size, const char* path,
                                            const GPT2Config* c, char* msg, size_t msg_size);
static inline int checkpoint_validate(const int header[256], long long file_size, const char* path,
                                      GPT2Config* c, char* msg, size_t msg_size) {
    if (!gpt2_config_from_header(header, path, c, msg, msg_size)) { return 0; }
    if (!qkv_check_scheme_matches_build(c, path, msg, msg_size)) { return 0; }
    return checkpoint_validate_shape(header, file_size, path, c, msg, msg_size);
}

// checkpoint_validate after the scheme check: the shape allowed for the scheme, then the size (the
// fuzzer, dev/fuzz/, runs it for every scheme in one binary)
static inline int checkpoint_validate_shape(const int header[256], long long file_size, const char* path,
                                            const GPT2Config* c, char* msg, size_t msg_size) {
    char why[512];
    if (!gpt2_config_check(c, why, sizeof(why))) {
        snprintf(msg, msg_size, "%s: %s", path, why);
        return 0;
    }
    char shape[256];
    gpt2_config_describe(c, shape, sizeof(shape));
    const int elem = checkpoint_version_is_bf16(header[1]) ? 2 : 4;
    const double nparams_d = gpt2_num_parameters_double(c);
    if (nparams_d * elem > 1e13) {
        snprintf(msg, msg_size, "%s: implausible shape in header (%s: %.3g parameters)", path, shape, nparams_d);
        return 0;
    }
    const size_t nparams = gpt2_num_parameters(c);
    const long long expected = 1024 + (long long)nparams * elem;
    if (file_size != expected) {
        snprintf(msg, msg_size, "%s: %s model file: file size %lld bytes, expected %lld = 1024-byte header + %zu "
                 "parameters x %d bytes (version %d, scheme %s, %s) (HINT: truncated or corrupt file?)", path,
                 file_size < expected ? "truncated" : "oversized", file_size, expected, nparams, elem, header[1],
                 qkv_scheme_name(c->scheme), shape);
        return 0;
    }
    return 1;
}

// ----------------------------------------------------------------------------
// The CUDA trainer's device memory, as data: which tensors train_gpt2.cu allocates for a shape,
// their element counts and sizes, and where each starts. gpt2_build and gpt2_build_grad_acts carve
// their allocations from gpt2_training_memory(), and build/params prints the same numbers, so the
// report cannot drift from the trainer. Nothing here touches a GPU.

// Parameter tensors start every PARAM_ALIGN_ELEMS elements on the device (256-byte boundaries for
// bf16 parameters, 512 for the fp32 gradients, moments and master weights); the gaps stay zero.
// In files they are contiguous in param_tensor_names order (dev/FORMATS.md).
#define PARAM_ALIGN_ELEMS 128
// Each activation and activation-gradient tensor starts on a 256-byte boundary of its allocation.
#define TENSOR_ALIGN_BYTES 256

static inline size_t qkv_round_up(size_t n, size_t multiple) { return (n + multiple - 1) / multiple * multiple; }

// The CUDA trainer's flash kernels exist for these head sizes in BF16 builds.
static inline int qkv_fused_attention_available(int head_dim, int bf16) {
    return bf16 && (head_dim == 64 || head_dim == 128);
}

// The device layout of the parameters: sizes (elements, 0 for absent tensors) and offsets
// (elements), each tensor padded to PARAM_ALIGN_ELEMS. Returns the padded total, the element count
// of each parameter-side buffer (parameters, gradients, m, v, master weights).
static inline size_t gpt2_param_layout(const GPT2Config* c, size_t sizes[NUM_PARAMETER_TENSORS],
                                       size_t offsets[NUM_PARAMETER_TENSORS]) {
    fill_param_sizes(c, sizes);
    size_t off = 0;
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
        offsets[i] = off;
        off += qkv_round_up(sizes[i], PARAM_ALIGN_ELEMS);
    }
    return off;
}

// The classifier runs over chunks of at most this many rows (B * T positions): its logits (and
// dlogits) never exist for the whole batch at once; 8192 rows of GPT-2's 50304 padded vocabulary
// are 0.8 GB in bf16, instead of 6.6 GB for B 64, T 1024, and the chunk's matmuls stay large.
// The chunk is at least T rows, so that sampling's B = 1 passes keep all their logits.
#define CLASSIFIER_CHUNK_ROWS 8192
static inline int gpt2_logits_rows(int B, int T) {
    const long long bt = (long long)B * T, chunk = T > CLASSIFIER_CHUNK_ROWS ? T : CLASSIFIER_CHUNK_ROWS;
    return (int)(bt < chunk ? bt : chunk);
}

// Activation tensors (train_gpt2.cu's Activations), in allocation order. Elements are the build's
// floatX unless marked fp32. "unfused" / "fused": only on that attention path.
enum {
    ACT_ENCODED = 0,    // (B, T, C)
    ACT_LN1,            // (L, B, T, C), one layer's (B, T, C) with recompute 2
    ACT_LN1_MEAN,       // (L, B, T)            fp32
    ACT_LN1_RSTD,       // (L, B, T)            fp32
    ACT_QKV,            // (L, B, T, width)     the fused projection
    ACT_QRES_R,         // (L, B, T, C)         q_residual: RMSNorm_q(x)
    ACT_QRES_RRMS,      // (L, B, T)            q_residual, fp32
    ACT_QRES_H,         // (L, B, T, C/2)       q_residual: W1 r
    ACT_QRES_HG,        // (L, B, T, C/2)       q_residual: gelu(W1 r)
    ACT_QRES_U,         // (L, B, T, C)         q_residual: W2 gelu(W1 r)
    ACT_QRES_F,         // (L, B, T, C)         q_residual: LN_q(u)
    ACT_QRES_MEAN,      // (L, B, T)            q_residual, fp32
    ACT_QRES_RSTD,      // (L, B, T)            q_residual, fp32
    ACT_QRES_Q,         // (L, B, T, C)         q_residual: q = x + f
    ACT_PERM_Q,         // (L, B, H, T, hd)     unfused: perm[0]
    ACT_PERM_K,         // (L, B, Hkv, T, hd)   unfused: perm[1], absent when k is q's tensor
    ACT_PERM_V,         // (L, B, Hkv, T, hd)   unfused: perm[2], absent when v is q's or k's tensor
    ACT_ATT,            // (L, B, H, T, T)      unfused: softmax probabilities
    ACT_ATT_LSE,        // (L, B, H, T)         fused, fp32: log-sum-exp of each query row
    ACT_ATTY,           // (L, B, T, C)
    ACT_RESIDUAL2,      // (L, B, T, C)
    ACT_LN2,            // (L, B, T, C), one layer's (B, T, C) with recompute 2
    ACT_LN2_MEAN,       // (L, B, T)            fp32
    ACT_LN2_RSTD,       // (L, B, T)            fp32
    ACT_FCH,            // (L, B, T, M)
    ACT_FCH_GELU,       // (L, B, T, M), one layer's (B, T, M) with recompute 1 or 2
    ACT_RESIDUAL3,      // (L, B, T, C)
    ACT_LNF,            // (B, T, C)
    ACT_LNF_MEAN,       // (B, T)               fp32
    ACT_LNF_RSTD,       // (B, T)               fp32
    ACT_OUTPUT,         // (R, Vp)              logits, then dlogits, of R = gpt2_logits_rows rows at a time
    ACT_LOSSES,         // (B, T)               fp32
    ACT_PROJ_OUT,       // (B, T, C)            scratch
    ACT_YPERM,          // (B, H, T, hd)        unfused, scratch
    NUM_ACT_TENSORS
};

static const char* const act_tensor_names[NUM_ACT_TENSORS] = {
    "encoded", "ln1", "ln1_mean", "ln1_rstd", "qkv", "qres_r", "qres_rrms", "qres_h", "qres_hg", "qres_u",
    "qres_f", "qres_mean", "qres_rstd", "qres_q", "perm_q", "perm_k", "perm_v", "att", "att_lse", "atty",
    "residual2", "ln2", "ln2_mean", "ln2_rstd", "fch", "fch_gelu", "residual3", "lnf", "lnf_mean", "lnf_rstd",
    "output", "losses", "proj_out", "yperm",
};

// the shapes of the enum's comments, for reports
static const char* const act_tensor_shapes[NUM_ACT_TENSORS] = {
    "(B, T, C)", "(L or 1, B, T, C)", "(L, B, T)", "(L, B, T)", "(L, B, T, width)", "(L, B, T, C)", "(L, B, T)",
    "(L, B, T, C/2)", "(L, B, T, C/2)", "(L, B, T, C)", "(L, B, T, C)", "(L, B, T)", "(L, B, T)", "(L, B, T, C)",
    "(L, B, H, T, hd)", "(L, B, Hkv, T, hd)", "(L, B, Hkv, T, hd)", "(L, B, H, T, T)", "(L, B, H, T)",
    "(L, B, T, C)", "(L, B, T, C)", "(L or 1, B, T, C)", "(L, B, T)", "(L, B, T)", "(L, B, T, M)",
    "(L or 1, B, T, M)", "(L, B, T, C)", "(B, T, C)", "(B, T)", "(B, T)", "(chunk, Vp)", "(B, T)", "(B, T, C)",
    "(B, H, T, hd)",
};

// Activation gradients (train_gpt2.cu's GradActivations), one layer at a time, in allocation order.
enum {
    GACT_DRESIDUAL = 0, // (B, T, C)            gradient of the residual stream
    GACT_DBUF_C,        // (B, T, C)            dlnf, dln2, datty
    GACT_DBUF_M,        // (B, T, M)            dfch
    GACT_DLN1,          // (B, T, C)
    GACT_DQKV,          // (B, T, width)
    GACT_DPERM_Q,       // (B, H, T, hd)        unfused: dperm[0]
    GACT_DPERM_K,       // (B, Hkv, T, hd)      unfused: dperm[1], like perm[1]
    GACT_DPERM_V,       // (B, Hkv, T, hd)      unfused: dperm[2], like perm[2]
    GACT_DYPERM,        // (B, H, T, hd)        unfused
    GACT_DATT,          // (B, H, T, T)         unfused
    GACT_ATTN_DELTA,    // (B, H, T)            fused, fp32: rowsum(dout * out)
    GACT_DQRES,         // (B, T, C)            q_residual
    GACT_DU,            // (B, T, C)            q_residual
    GACT_DHG,           // (B, T, C/2)          q_residual
    GACT_DR,            // (B, T, C)            q_residual
    NUM_GRAD_ACT_TENSORS
};

static const char* const grad_act_tensor_names[NUM_GRAD_ACT_TENSORS] = {
    "dresidual", "dbuf_c", "dbuf_m", "dln1", "dqkv", "dperm_q", "dperm_k", "dperm_v", "dyperm", "datt",
    "attn_delta", "dqres", "du", "dhg", "dr",
};

typedef struct {
    size_t count;  // elements; 0: not allocated for this shape and attention path
    size_t elem;   // bytes per element: the build's floatX, or 4 for fp32 tensors
    size_t offset; // bytes from the start of its allocation, a multiple of TENSOR_ALIGN_BYTES
} TensorAlloc;

static inline size_t tensor_alloc_bytes(const TensorAlloc* t) { return t->count * t->elem; }

typedef struct {
    size_t num_parameters_padded;                // elements of each parameter-side buffer
    size_t param_bytes;                          // parameters, floatX
    size_t grad_bytes;                           // parameter gradients, fp32
    size_t optimizer_bytes;                      // AdamW m and v, fp32 each
    size_t master_bytes;                         // fp32 master weights, or 0
    TensorAlloc acts[NUM_ACT_TENSORS];           // one allocation of acts_bytes
    size_t acts_bytes;
    TensorAlloc grad_acts[NUM_GRAD_ACT_TENSORS]; // one allocation of grad_acts_bytes
    size_t grad_acts_bytes;
    size_t total_bytes;                          // all of the above
} TrainingMemory;

// gives each tensor of a list its offset in one allocation (in list order, each rounded up to
// TENSOR_ALIGN_BYTES; absent tensors take nothing); returns the allocation's size in bytes
static inline size_t tensor_list_layout(TensorAlloc* list, int n) {
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        list[i].offset = off;
        off += qkv_round_up(tensor_alloc_bytes(&list[i]), TENSOR_ALIGN_BYTES);
    }
    return off;
}

// The CUDA trainer's training memory for a (checked) config at micro-batch (B, T): x_size is the
// build's floatX size (2 for BF16, 4 for FP32); master_weights 1 when it keeps fp32 master weights
// (BF16 builds with -w 1); recompute (-r): 1 recomputes fch_gelu in the backward pass, 2 also ln1 and ln2;
// attn_fused 1 on the fused (flash) attention path (see qkv_fused_attention_available).
// Small device buffers outside these (inputs, targets, encoder buckets, column sums) are not counted.
static inline void gpt2_training_memory(const GPT2Config* c, int B, int T, size_t x_size, int master_weights,
                                        int recompute, int attn_fused, TrainingMemory* m) {
    memset(m, 0, sizeof(*m));
    size_t sizes[NUM_PARAMETER_TENSORS], offsets[NUM_PARAMETER_TENSORS];
    const size_t np = gpt2_param_layout(c, sizes, offsets);
    const size_t F = sizeof(float), X = x_size;
    m->num_parameters_padded = np;
    m->param_bytes = np * X;
    m->grad_bytes = np * F;
    m->optimizer_bytes = 2 * np * F;
    m->master_bytes = master_weights ? np * F : 0;

    const QKVLayout lay = qkv_layout(c);
    const size_t L = (size_t)c->num_layers, C = (size_t)c->channels, H = (size_t)c->num_heads;
    const size_t M = (size_t)c->mlp_hidden, Vp = (size_t)c->padded_vocab_size, W = (size_t)lay.width;
    const size_t KV = (size_t)qkv_kv_channels(c), BT = (size_t)B * (size_t)T, BHT = (size_t)B * H * (size_t)T;
    const int qres = c->scheme == QKV_Q_RESIDUAL, unfused = !attn_fused;
    // the unfused path copies each stored q/k/v tensor once into (B, heads, T, hd)
    const int own_k = !qkv_roles_share(lay.k, lay.q);
    const int own_v = !qkv_roles_share(lay.v, lay.q) && !qkv_roles_share(lay.v, lay.k);
#define QKV_TENSOR(list, id, present, n, size) do { (list)[id].count = (present) ? (size_t)(n) : 0; \
        (list)[id].elem = (size); } while (0)
    TensorAlloc* a = m->acts;
    QKV_TENSOR(a, ACT_ENCODED, 1, BT * C, X);
    const size_t ln_layers = recompute >= 2 ? 1 : L, gelu_layers = recompute >= 1 ? 1 : L;
    QKV_TENSOR(a, ACT_LN1, 1, ln_layers * BT * C, X);
    QKV_TENSOR(a, ACT_LN1_MEAN, 1, L * BT, F);
    QKV_TENSOR(a, ACT_LN1_RSTD, 1, L * BT, F);
    QKV_TENSOR(a, ACT_QKV, 1, L * BT * W, X);
    QKV_TENSOR(a, ACT_QRES_R, qres, L * BT * C, X);
    QKV_TENSOR(a, ACT_QRES_RRMS, qres, L * BT, F);
    QKV_TENSOR(a, ACT_QRES_H, qres, L * BT * (C / 2), X);
    QKV_TENSOR(a, ACT_QRES_HG, qres, L * BT * (C / 2), X);
    QKV_TENSOR(a, ACT_QRES_U, qres, L * BT * C, X);
    QKV_TENSOR(a, ACT_QRES_F, qres, L * BT * C, X);
    QKV_TENSOR(a, ACT_QRES_MEAN, qres, L * BT, F);
    QKV_TENSOR(a, ACT_QRES_RSTD, qres, L * BT, F);
    QKV_TENSOR(a, ACT_QRES_Q, qres, L * BT * C, X);
    QKV_TENSOR(a, ACT_PERM_Q, unfused, L * BT * C, X);
    QKV_TENSOR(a, ACT_PERM_K, unfused && own_k, L * BT * KV, X);
    QKV_TENSOR(a, ACT_PERM_V, unfused && own_v, L * BT * KV, X);
    QKV_TENSOR(a, ACT_ATT, unfused, L * BHT * T, X);
    QKV_TENSOR(a, ACT_ATT_LSE, attn_fused, L * BHT, F);
    QKV_TENSOR(a, ACT_ATTY, 1, L * BT * C, X);
    QKV_TENSOR(a, ACT_RESIDUAL2, 1, L * BT * C, X);
    QKV_TENSOR(a, ACT_LN2, 1, ln_layers * BT * C, X);
    QKV_TENSOR(a, ACT_LN2_MEAN, 1, L * BT, F);
    QKV_TENSOR(a, ACT_LN2_RSTD, 1, L * BT, F);
    QKV_TENSOR(a, ACT_FCH, 1, L * BT * M, X);
    QKV_TENSOR(a, ACT_FCH_GELU, 1, gelu_layers * BT * M, X);
    QKV_TENSOR(a, ACT_RESIDUAL3, 1, L * BT * C, X);
    QKV_TENSOR(a, ACT_LNF, 1, BT * C, X);
    QKV_TENSOR(a, ACT_LNF_MEAN, 1, BT, F);
    QKV_TENSOR(a, ACT_LNF_RSTD, 1, BT, F);
    QKV_TENSOR(a, ACT_OUTPUT, 1, (size_t)gpt2_logits_rows(B, T) * Vp, X);
    QKV_TENSOR(a, ACT_LOSSES, 1, BT, F);
    QKV_TENSOR(a, ACT_PROJ_OUT, 1, BT * C, X);
    QKV_TENSOR(a, ACT_YPERM, unfused, BT * C, X);
    m->acts_bytes = tensor_list_layout(a, NUM_ACT_TENSORS);

    TensorAlloc* g = m->grad_acts;
    QKV_TENSOR(g, GACT_DRESIDUAL, 1, BT * C, X);
    QKV_TENSOR(g, GACT_DBUF_C, 1, BT * C, X);
    QKV_TENSOR(g, GACT_DBUF_M, 1, BT * M, X);
    QKV_TENSOR(g, GACT_DLN1, 1, BT * C, X);
    QKV_TENSOR(g, GACT_DQKV, 1, BT * W, X);
    QKV_TENSOR(g, GACT_DPERM_Q, unfused, BT * C, X);
    QKV_TENSOR(g, GACT_DPERM_K, unfused && own_k, BT * KV, X);
    QKV_TENSOR(g, GACT_DPERM_V, unfused && own_v, BT * KV, X);
    QKV_TENSOR(g, GACT_DYPERM, unfused, BT * C, X);
    QKV_TENSOR(g, GACT_DATT, unfused, BHT * T, X);
    QKV_TENSOR(g, GACT_ATTN_DELTA, attn_fused, BHT, F);
    QKV_TENSOR(g, GACT_DQRES, qres, BT * C, X);
    QKV_TENSOR(g, GACT_DU, qres, BT * C, X);
    QKV_TENSOR(g, GACT_DHG, qres, BT * (C / 2), X);
    QKV_TENSOR(g, GACT_DR, qres, BT * C, X);
#undef QKV_TENSOR
    m->grad_acts_bytes = tensor_list_layout(g, NUM_GRAD_ACT_TENSORS);

    m->total_bytes = m->param_bytes + m->grad_bytes + m->optimizer_bytes + m->master_bytes +
                     m->acts_bytes + m->grad_acts_bytes;
}

#endif // ATTENTION_VARIANTS_CUH
