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

// role r of a layout: 0 q, 1 k, 2 v
QKV_HOST_DEVICE static inline QKVRole qkv_layout_role(const QKVLayout* L, int r) {
    return r == 0 ? L->q : (r == 1 ? L->k : L->v);
}

// whether q comes from the residual query's MLP (its parameters, activations and sublayer exist)
QKV_HOST_DEVICE static inline int qkv_has_residual_query(const QKVLayout* L) {
    return L->q.source == QKV_SRC_RESIDUAL_QUERY;
}

// ----------------------------------------------------------------------------
// Where a role's rows are. Attention reads q, k and v in place: each is a (B*T, heads * hd) matrix
// inside one of a layer's three source tensors, with that tensor's row stride. Called with the
// gradient tensors instead, the same view says where the role's gradient goes: a role taken from x
// sends it into dx, and two roles of one tensor send theirs to the same place. Every trainer, lab
// and test finds its q, k and v through qkv_role_view. Elem is the caller's element type (floatX,
// const floatX, float, ...).

template <class Elem>
struct QKVView {
    Elem* ptr;  // token 0, head 0: element (token i, head h, dim d) is ptr[i * stride + h * hd + d]
    int stride; // elements from one token's row to the next
    int heads;  // H for q, Hkv for k and v
};

// A layer's source tensors (or their gradients): the fused projection's output (B*T, width), the
// attention input x = LN1(residual) (B*T, C), and the residual query (B*T, C), NULL where the layout
// has none.
template <class Elem>
struct QKVSources {
    Elem* projection;
    Elem* input;
    Elem* residual_query;
};

template <class Elem>
QKV_HOST_DEVICE static inline QKVView<Elem> qkv_role_view(const QKVLayout* L, int r, int head_dim, QKVSources<Elem> src) {
    const QKVRole role = qkv_layout_role(L, r);
    QKVView<Elem> v;
    v.heads = role.channels / head_dim;
    if (role.source == QKV_SRC_PROJECTION) {
        v.ptr = src.projection + role.offset;
        v.stride = L->width;
    } else { // x and the residual query are (B*T, C), and C is q's width
        v.ptr = role.source == QKV_SRC_INPUT ? src.input : src.residual_query;
        v.stride = L->q.channels;
    }
    return v;
}

template <class Elem>
QKV_HOST_DEVICE static inline QKVSources<Elem> qkv_sources(Elem* projection, Elem* input, Elem* residual_query) {
    QKVSources<Elem> s;
    s.projection = projection;
    s.input = input;
    s.residual_query = residual_query;
    return s;
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

#endif // ATTENTION_VARIANTS_CUH
