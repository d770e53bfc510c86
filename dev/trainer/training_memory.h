/*
dev/trainer/training_memory.h: the CUDA trainer's device memory, as data.

Which tensors train_gpt2.cu allocates for a shape, their element counts and sizes, and where each
starts. gpt2_build and gpt2_build_grad_acts carve their allocations from gpt2_training_memory(),
and build/params prints the same numbers (`build/params memory`), so the report cannot drift from
the trainer. Nothing here touches a GPU.
*/
#ifndef TRAINING_MEMORY_H
#define TRAINING_MEMORY_H

#include "../../attention_variants.cuh"
#include "parameters.h"

// Parameter tensors start every PARAM_ALIGN_ELEMS elements on the device (256-byte boundaries for
// bf16 parameters, 512 for the fp32 gradients, moments and master weights); the gaps stay zero.
// In files they are contiguous in param_tensor_names order (dev/FORMATS.md).
#define PARAM_ALIGN_ELEMS 128
// Each activation and activation-gradient tensor starts on a 256-byte boundary of its allocation.
#define TENSOR_ALIGN_BYTES 256
// Bytes left free after each of those tensors, a multiple of TENSOR_ALIGN_BYTES: none on a GPU. The
// CPU runtime (dev/cudacpu/cuda_cpu.h, included before anything else there) leaves red zones and
// poisons them (TENSOR_RED_ZONES, called where the trainer carves its allocations), so that a kernel
// writing past its own tensor is caught, naming the kernel and the tensor, where on a GPU it would
// silently corrupt the next tensor of the one allocation.
#ifndef TENSOR_RED_ZONE_BYTES
#define TENSOR_RED_ZONE_BYTES 0
#define TENSOR_RED_ZONES(base, list, names, n) ((void)0)
#endif
// Elements left free after each parameter tensor, in the parameters, gradients, AdamW moments and
// master weights alike, a multiple of PARAM_ALIGN_ELEMS: none on a GPU. The CPU runtime leaves them
// and watches that they stay zero (PARAM_RED_ZONES, once the trainer has allocated them), so that
// a kernel writing past the last layer of a parameter tensor is caught there too.
#ifndef PARAM_RED_ZONE_ELEMS
#define PARAM_RED_ZONE_ELEMS 0
#define PARAM_RED_ZONES(model) ((void)0)
#endif
static_assert(PARAM_RED_ZONE_ELEMS % PARAM_ALIGN_ELEMS == 0, "parameter tensors start every PARAM_ALIGN_ELEMS elements");

static inline size_t qkv_round_up(size_t n, size_t multiple) { return (n + multiple - 1) / multiple * multiple; }

// The CUDA trainer's flash kernels exist for these head sizes in BF16 builds.
static inline int qkv_fused_attention_available(int head_dim, int bf16) {
    return bf16 && (head_dim == 64 || head_dim == 128);
}

// The device layout of the parameters: sizes (elements, 0 for absent tensors) and offsets
// (elements), each tensor padded to PARAM_ALIGN_ELEMS (then PARAM_RED_ZONE_ELEMS; absent tensors take
// nothing). Returns the padded total, the element count of each parameter-side buffer (parameters,
// gradients, m, v, master weights).
static inline size_t gpt2_param_layout(const GPT2Config* c, size_t sizes[NUM_PARAMETER_TENSORS],
                                       size_t offsets[NUM_PARAMETER_TENSORS]) {
    fill_param_sizes(c, sizes);
    size_t off = 0;
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
        offsets[i] = off;
        off += sizes[i] > 0 ? qkv_round_up(sizes[i], PARAM_ALIGN_ELEMS) + PARAM_RED_ZONE_ELEMS : 0;
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
// Two such buffers when the batch takes more than one chunk: chunk i's cross-entropy (on a stream of
// its own) reads one while chunk i + 1's logits matmul writes the other (train_gpt2.cu's classifier_forward)
static inline int gpt2_logits_buffers(int B, int T) { return (long long)B * T > gpt2_logits_rows(B, T) ? 2 : 1; }

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
    ACT_OUTPUT,         // (2, R, Vp)           logits, then dlogits, of R = gpt2_logits_rows rows at a time, two
                        //                      chunks' (one when B * T <= R: gpt2_logits_buffers)
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
// TENSOR_ALIGN_BYTES, then TENSOR_RED_ZONE_BYTES; absent tensors take nothing); returns the
// allocation's size in bytes
static inline size_t tensor_list_layout(TensorAlloc* list, int n) {
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        list[i].offset = off;
        if (list[i].count == 0) { continue; }
        off += qkv_round_up(tensor_alloc_bytes(&list[i]), TENSOR_ALIGN_BYTES) + TENSOR_RED_ZONE_BYTES;
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
    const int qres = qkv_has_residual_query(&lay), unfused = !attn_fused;
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
    QKV_TENSOR(a, ACT_OUTPUT, 1, (size_t)gpt2_logits_buffers(B, T) * gpt2_logits_rows(B, T) * Vp, X);
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

#endif // TRAINING_MEMORY_H
