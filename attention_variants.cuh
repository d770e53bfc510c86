/*
attention_variants.cuh: the one place where the Q/K/V projection schemes differ.

Everything a trainer needs to know about a scheme lives here, as plain data and small
functions that compile with nvcc and with any C++11 compiler:

  - the scheme enumeration and its names (the `QKV=<id>` of the Makefile),
  - the compile-time choice QKV_SCHEME (one binary per scheme),
  - the model shape (GPT2Config) with the runtime knobs of dev/SCHEMES.md,
  - the constraint check: a forbidden scheme/shape combination gives a message naming both,
  - the fused attention projection: its width and where q, k, v come from (QKVLayout: a column
    range of the projection, the attention input x, or the residual query's MLP), where each
    role's rows are (qkv_role_view, the one view every trainer, lab and test uses), and where the
    fused attention backward sends their gradients (qkv_fused_grad_plan),
  - the default attention scale and the KV-cache bytes per token.

The parameter tensors (whose shapes read the layout) are in dev/trainer/parameters.h, the checkpoint
header in dev/trainer/checkpoint.h, the CUDA trainer's memory plan in dev/trainer/training_memory.h. The
specification is dev/SCHEMES.md (the schemes' math, constraints, counts and the papers' numbers).

To add a scheme: add an enum value and a name below, give it a layout in qkv_layout(), its
constraint in gpt2_config_check() and, if it has parameters of its own, tensors in
dev/trainer/parameters.h; then teach the reference script (dev/reference/train_gpt2.py) the scheme. A new
QKVSource also needs its place in QKVSources and qkv_role_view, and its sublayer in both trainers,
run from the one place each resolves the sources (train_gpt2.cu: qkv_forward / qkv_backward;
dev/cpu/train_gpt2_cpu.cpp: attention_inputs_forward / attention_inputs_backward).
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

#endif // ATTENTION_VARIANTS_CUH
