/*
dev/trainer/checkpoint.h: the model file's 256-int header <-> GPT2Config (layout in dev/FORMATS.md).

Shared by every reader and writer, so that a file is judged the same way by the CPU trainer, the
CUDA trainer and the tools: llm.c's versions 3 (fp32) and 5 (bf16) for plain GPT-2, our 6 and 7
for every other scheme or shape, and the checks a header and a file size must pass before any
weight is read.
*/
#ifndef CHECKPOINT_H
#define CHECKPOINT_H

#include "../../attention_variants.cuh"
#include "parameters.h"

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

#endif // CHECKPOINT_H
