/*
Unit tests of attention_variants.cuh: the layouts, the constraint check and its messages, the
checkpoint header round trip and the refusals. The numbers of dev/SCHEMES.md (section 6) are checked by
test_params.sh against `make params`; this file checks the structure behind them.
Built with the default QKV_SCHEME (standard), which the scheme-mismatch test relies on.
*/
#include <limits.h>
#include <stdlib.h>
#include <string>
#include "../../attention_variants.cuh"
#include "../trainer/checkpoint.h"
#include "../trainer/training_memory.h"

static int failed = 0;

// `detail` is read here, after every argument was evaluated, so a message written by the
// checked call itself is the one printed
static void check(bool ok, const std::string& what, const char* detail = "") {
    printf("%s header %s%s%s\n", ok ? "PASS" : "FAIL", what.c_str(), detail[0] ? ": " : "", detail);
    failed += ok ? 0 : 1;
}

static GPT2Config tiny(int scheme, int Hkv) {
    GPT2Config c = gpt2_config_default(2, 4, 64, 64, 500, 512);
    c.scheme = scheme;
    c.num_kv_heads = Hkv;
    return c;
}

static bool contains(const char* s, const char* sub) { return strstr(s, sub) != NULL; }

// Every column of the fused projection is read by exactly one stored tensor, roles stay in range,
// and the roles that the scheme says are one tensor share an offset (and no others do).
static void test_layouts() {
    // expected sharing per scheme: q=k, k=v, q from x, k from x, v from x, q residual
    struct { int qk, kv, qx, kx, vx, qres; } expect[QKV_NUM_SCHEMES] = {
        {0, 0, 0, 0, 0, 0}, // standard
        {0, 0, 1, 0, 0, 0}, // q_identity
        {0, 0, 0, 1, 0, 0}, // k_identity
        {0, 0, 0, 0, 1, 0}, // v_identity
        {0, 1, 0, 0, 0, 0}, // kv_shared
        {1, 0, 0, 0, 0, 0}, // qk_shared
        {1, 1, 0, 0, 0, 0}, // qkv_shared
        {0, 0, 0, 0, 0, 1}, // q_residual
    };
    for (int s = 0; s < QKV_NUM_SCHEMES; s++) {
        int kv_options[3] = {4, 2, 1};
        for (int o = 0; o < 3; o++) {
            GPT2Config c = tiny(s, kv_options[o]);
            char msg[512];
            std::string name = std::string(qkv_scheme_name(s)) + " Hkv=" + std::to_string(kv_options[o]);
            if (!gpt2_config_check(&c, msg, sizeof(msg))) {
                // GQA/MQA refusals are tested below; multi-head attention is allowed for every scheme
                if (kv_options[o] == c.num_heads) { check(false, "layout " + name + " refused", msg); }
                continue;
            }
            QKVLayout L = qkv_layout(&c);
            const int C = c.channels, KV = qkv_kv_channels(&c);
            bool ok = L.q.channels == C && L.k.channels == KV && L.v.channels == KV;
            int coverage[1024] = {0};
            const QKVRole* roles[3] = {&L.q, &L.k, &L.v};
            for (int r = 0; r < 3; r++) {
                if (roles[r]->source == QKV_SRC_INPUT || roles[r]->source == QKV_SRC_RESIDUAL_QUERY) {
                    ok = ok && roles[r]->channels == C;
                    continue;
                }
                bool counted_already = false;
                for (int p = 0; p < r; p++) { counted_already = counted_already || qkv_roles_share(*roles[p], *roles[r]); }
                ok = ok && roles[r]->offset >= 0 && roles[r]->offset + roles[r]->channels <= L.width;
                for (int col = roles[r]->offset; !counted_already && col < roles[r]->offset + roles[r]->channels && col < 1024; col++) {
                    coverage[col]++;
                }
            }
            for (int col = 0; col < L.width; col++) { ok = ok && coverage[col] == 1; }
            ok = ok && qkv_roles_share(L.q, L.k) == expect[s].qk && qkv_roles_share(L.k, L.v) == expect[s].kv;
            ok = ok && (L.q.source == QKV_SRC_INPUT) == expect[s].qx && (L.k.source == QKV_SRC_INPUT) == expect[s].kx;
            ok = ok && (L.v.source == QKV_SRC_INPUT) == expect[s].vx;
            ok = ok && (L.q.source == QKV_SRC_RESIDUAL_QUERY) == expect[s].qres;
            std::string where = "width=" + std::to_string(L.width) + " q@" + std::to_string(L.q.offset) +
                                " k@" + std::to_string(L.k.offset) + " v@" + std::to_string(L.v.offset);
            check(ok, "layout " + name, where.c_str());
        }
    }
}

static void test_constraints() {
    char msg[512];
    // allowed: GQA/MQA where the scheme lets k and v have their own heads
    int gqa_ok[4] = {QKV_STANDARD, QKV_Q_IDENTITY, QKV_KV_SHARED, QKV_Q_RESIDUAL};
    for (int i = 0; i < 4; i++) {
        for (int Hkv = 1; Hkv <= 2; Hkv++) {
            GPT2Config c = tiny(gqa_ok[i], Hkv);
            check(gpt2_config_check(&c, msg, sizeof(msg)) == 1,
                  std::string("allows ") + qkv_scheme_name(gqa_ok[i]) + " with n_kv_head=" + std::to_string(Hkv), msg);
        }
    }
    // forbidden by dev/SCHEMES.md (section 4): Hkv < H where k or v is tied to the query heads
    int need_mha[4] = {QKV_K_IDENTITY, QKV_V_IDENTITY, QKV_QK_SHARED, QKV_QKV_SHARED};
    for (int i = 0; i < 4; i++) {
        for (int Hkv = 1; Hkv <= 2; Hkv++) {
            GPT2Config c = tiny(need_mha[i], Hkv);
            int ok = gpt2_config_check(&c, msg, sizeof(msg));
            check(!ok && contains(msg, qkv_scheme_name(need_mha[i])) && contains(msg, "n_kv_head"),
                  std::string("refuses ") + qkv_scheme_name(need_mha[i]) + " with n_kv_head=" + std::to_string(Hkv), msg);
        }
    }
    GPT2Config odd = tiny(QKV_Q_RESIDUAL, 3);
    odd.channels = 63; odd.num_heads = 3; odd.mlp_hidden = 252;
    check(!gpt2_config_check(&odd, msg, sizeof(msg)) && contains(msg, "q_residual") && contains(msg, "n_embd=63"),
          "refuses q_residual with odd n_embd", msg);
    odd.scheme = QKV_STANDARD;
    check(gpt2_config_check(&odd, msg, sizeof(msg)) == 1, "allows standard with odd n_embd", msg);
    GPT2Config bad = tiny(QKV_STANDARD, 3);
    check(!gpt2_config_check(&bad, msg, sizeof(msg)) && contains(msg, "n_kv_head=3"), "refuses n_kv_head not dividing n_head", msg);
    bad = tiny(QKV_KV_SHARED, 4);
    bad.num_heads = 5;
    check(!gpt2_config_check(&bad, msg, sizeof(msg)) && contains(msg, "n_embd=64"), "refuses n_embd not divisible by n_head", msg);
    bad = tiny(QKV_NUM_SCHEMES, 4);
    check(!gpt2_config_check(&bad, msg, sizeof(msg)) && contains(msg, "unknown scheme"), "refuses an unknown scheme id", msg);
    bad = tiny(QKV_STANDARD, 4);
    bad.attn_scale = -1.0f;
    check(!gpt2_config_check(&bad, msg, sizeof(msg)) && contains(msg, "scale"), "refuses a negative attention scale", msg);
}

static void test_scales_and_names() {
    bool ok = true;
    for (int s = 0; s < QKV_NUM_SCHEMES; s++) {
        ok = ok && qkv_scheme_from_name(qkv_scheme_name(s)) == s;
        float expected = 1.0f / sqrtf(16.0f) * ((s == QKV_Q_IDENTITY || s == QKV_Q_RESIDUAL) ? 0.5f : 1.0f);
        GPT2Config c = tiny(s, 4);
        ok = ok && gpt2_attn_scale(&c) == expected;
        c.attn_scale = 0.3f;
        ok = ok && gpt2_attn_scale(&c) == 0.3f;
    }
    ok = ok && qkv_scheme_from_name("nope") == -1;
    check(ok, "names round-trip; default scale 1/sqrt(hd), 1/(2 sqrt(hd)) for q_identity and q_residual; override wins");
}

static void test_header_round_trip() {
    char msg[512];
    for (int s = 0; s < QKV_NUM_SCHEMES; s++) {
        GPT2Config c = tiny(s, (s == QKV_STANDARD || s == QKV_KV_SHARED) ? 2 : 4);
        c.mlp_hidden = 224; c.use_bias = s % 2; c.tied_head = (s / 2) % 2; c.attn_scale = 0.125f;
        int header[256];
        gpt2_config_to_header(&c, s % 2, header);
        GPT2Config back;
        int ok = gpt2_config_from_header(header, "x.bin", &back, msg, sizeof(msg));
        ok = ok && memcmp(&c, &back, sizeof(c)) == 0 && header[1] == (s % 2 ? 7 : 6);
        check(ok, std::string("checkpoint header round trip ") + qkv_scheme_name(s), msg);
    }
    // llm.c v3: the shape llm.c knows, standard scheme
    int header[256] = {0};
    header[0] = 20240326; header[1] = 3; header[2] = 1024; header[3] = 50257; header[4] = 12;
    header[5] = 12; header[6] = 768; header[7] = 50304;
    GPT2Config c;
    int ok = gpt2_config_from_header(header, "gpt2_124M.bin", &c, msg, sizeof(msg));
    check(ok && c.scheme == QKV_STANDARD && c.num_kv_heads == 12 && c.mlp_hidden == 3072 && c.use_bias && c.tied_head &&
          gpt2_num_parameters(&c) == 124475904, "llm.c v3 header reads as GPT-2 124M (124,475,904 parameters)",
          std::to_string(gpt2_num_parameters(&c)).c_str());
    header[0] = 1234;
    ok = gpt2_config_from_header(header, "weird.bin", &c, msg, sizeof(msg));
    check(!ok && contains(msg, "weird.bin") && contains(msg, "magic"), "bad magic refused naming the file", msg);
    header[0] = 20240326; header[1] = 4;
    ok = gpt2_config_from_header(header, "weird.bin", &c, msg, sizeof(msg));
    check(!ok && contains(msg, "weird.bin") && contains(msg, "version 4"), "unknown version refused naming the file", msg);
}

// The writers' version choice (both trainers write through gpt2_config_to_header): a model llm.c
// can express is written as llm.c's version 3 (fp32) or 5 (bf16), with llm.c's zero fields 8..255,
// and reads back as the same config; a model with anything llm.c's header cannot store (another
// scheme, GQA, another MLP width, no biases, an untied head, an attention scale) stays 6 or 7.
static void test_llmc_versions() {
    char msg[512];
    for (int bf16 = 0; bf16 <= 1; bf16++) {
        const GPT2Config plain = gpt2_config_default(2, 4, 64, 64, 500, 512);
        int header[256];
        gpt2_config_to_header(&plain, bf16, header);
        int zeros = 1;
        for (int k = 8; k < 256; k++) { zeros = zeros && header[k] == 0; }
        GPT2Config back;
        const int read = gpt2_config_from_header(header, "plain.bin", &back, msg, sizeof(msg));
        char detail[64];
        snprintf(detail, sizeof(detail), "version %d", header[1]);
        check(header[1] == (bf16 ? 5 : 3) && zeros && read && memcmp(&plain, &back, sizeof(plain)) == 0,
              std::string("plain GPT-2 written as llm.c's version ") + (bf16 ? "5 (bf16)" : "3 (fp32)") +
              ", fields 8..255 zero, reads back as the same config", detail);
        struct { const char* what; GPT2Config c; } others[QKV_NUM_SCHEMES + 5];
        int n = 0;
        for (int s = 1; s < QKV_NUM_SCHEMES; s++) {
            others[n].what = qkv_scheme_name(s);
            others[n].c = plain;
            others[n++].c.scheme = s;
        }
        others[n].what = "n_kv_head=2"; others[n].c = plain; others[n++].c.num_kv_heads = 2;
        others[n].what = "mlp=192"; others[n].c = plain; others[n++].c.mlp_hidden = 192;
        others[n].what = "bias=0"; others[n].c = plain; others[n++].c.use_bias = 0;
        others[n].what = "tied=0"; others[n].c = plain; others[n++].c.tied_head = 0;
        others[n].what = "attn_scale=0.25"; others[n].c = plain; others[n++].c.attn_scale = 0.25f;
        std::string wrong;
        for (int i = 0; i < n; i++) {
            gpt2_config_to_header(&others[i].c, bf16, header);
            const int ok = header[1] == (bf16 ? 7 : 6) && gpt2_config_from_header(header, "x.bin", &back, msg, sizeof(msg)) &&
                           memcmp(&others[i].c, &back, sizeof(back)) == 0;
            if (!ok) { wrong += std::string(wrong.empty() ? "" : ", ") + others[i].what; }
        }
        check(wrong.empty(), std::string("models llm.c cannot express stay version ") + (bf16 ? "7" : "6") + " (" +
              std::to_string(n) + " cases: every other scheme, GQA, MLP width, no bias, untied, attention scale)",
              wrong.c_str());
    }
}

// the checks every trainer runs on a checkpoint before reading its weights
static void test_checkpoint_validate() {
    char msg[1024];
    GPT2Config c = tiny(QKV_STANDARD, 2), back;
    int header[256];
    gpt2_config_to_header(&c, 0, header);
    const long long exact = 1024 + (long long)gpt2_num_parameters(&c) * 4;
    check(checkpoint_validate(header, exact, "ok.bin", &back, msg, sizeof(msg)) == 1 && memcmp(&c, &back, sizeof(c)) == 0,
          "checkpoint_validate accepts a file of the right size", msg);
    int ok = checkpoint_validate(header, exact - 4, "short.bin", &back, msg, sizeof(msg));
    check(!ok && contains(msg, "short.bin") && contains(msg, "truncated") && contains(msg, "file size"),
          "checkpoint_validate refuses a truncated file", msg);
    ok = checkpoint_validate(header, exact + 4, "long.bin", &back, msg, sizeof(msg));
    check(!ok && contains(msg, "oversized"), "checkpoint_validate refuses an oversized file", msg);
    // a huge shape whose parameter count would wrap size_t must not pass on a lucky file size
    header[4] = 1 << 20; header[5] = 1 << 10; header[6] = 1 << 20; header[9] = 1 << 10; header[10] = 1 << 20;
    ok = checkpoint_validate(header, exact, "huge.bin", &back, msg, sizeof(msg));
    check(!ok && contains(msg, "huge.bin") && contains(msg, "implausible"), "checkpoint_validate refuses an absurd shape", msg);
    GPT2Config other = tiny(QKV_Q_IDENTITY, 2);
    other.num_kv_heads = 3; // forbidden too, but the scheme is what is reported first
    gpt2_config_to_header(&other, 0, header);
    ok = checkpoint_validate(header, exact, "other.bin", &back, msg, sizeof(msg));
    check(!ok && contains(msg, "q_identity") && contains(msg, "standard"), "checkpoint_validate reports another scheme first", msg);
    GPT2Config bad = tiny(QKV_STANDARD, 3);
    gpt2_config_to_header(&bad, 0, header);
    ok = checkpoint_validate(header, 0, "bad.bin", &back, msg, sizeof(msg));
    check(!ok && contains(msg, "bad.bin") && contains(msg, "n_kv_head=3") && !contains(msg, "file size"),
          "checkpoint_validate reports a forbidden shape before the size", msg);
}

// Header fields are range-checked before any arithmetic on them: n_embd >= 2^29 overflowed 4 * n_embd
// in gpt2_config_default and n_embd >= 2^30 C + 2 * KV in qkv_layout (signed overflow; build with
// -fsanitize=undefined to see it), before the shape checks could refuse the file.
static void test_header_ranges() {
    char msg[1024];
    GPT2Config c = tiny(QKV_STANDARD, 4), back;
    int header[256];
    const int cases[][3] = { // field index, value, then whether a v3 header reads it too
        {6, 1 << 29, 1}, {6, 1 << 30, 1}, {6, INT_MAX, 1}, {4, -5, 1}, {2, INT_MIN, 1}, {7, (1 << 24) + 1, 1},
        {9, 1 << 30, 0}, {10, INT_MAX, 0},
    };
    const char* names[] = {"", "", "max_seq_len", "vocab_size", "n_layer", "n_head", "n_embd", "padded_vocab_size", "",
                           "n_kv_head", "mlp_hidden"};
    for (const auto& t : cases) {
        for (int version = 3; version <= 6; version += 3) {
            gpt2_config_to_header(&c, 0, header);
            header[1] = version;
            if (version == 3) { memset(&header[8], 0, 248 * sizeof(int)); }
            header[t[0]] = t[1];
            if (t[0] == 6) { header[5] = 1 << 10; header[9] = 1 << 10; } // heads that divide it
            int ok = checkpoint_validate(header, 1 << 20, "big.bin", &back, msg, sizeof(msg));
            const bool refused = !ok && contains(msg, "big.bin") && contains(msg, names[t[0]]) && contains(msg, "expected 1..16777216");
            // a v3 header has no n_kv_head / mlp_hidden: its value is ignored (then the size is wrong)
            check(t[2] || version == 6 ? refused : (!ok && !contains(msg, "header field")),
                  "v" + std::to_string(version) + " header " + names[t[0]] + "=" + std::to_string(t[1]) +
                  (t[2] || version == 6 ? " refused naming the field" : " ignored"), msg);
        }
    }
    // the largest allowed values pass the header and are then judged by shape and size
    gpt2_config_to_header(&c, 0, header);
    header[2] = header[3] = header[7] = 1 << 24;
    msg[0] = '\0';
    int ok = gpt2_config_from_header(header, "edge.bin", &back, msg, sizeof(msg));
    check(ok && back.max_seq_len == 1 << 24 && back.vocab_size == 1 << 24, "header fields of 2^24 are read", msg);
    // configs made from flags: gpt2_config_default saturates, gpt2_config_check refuses by name, and
    // a checked config never reaches qkv_layout's arithmetic out of range
    GPT2Config big = gpt2_config_default(2, 1 << 10, 1 << 30, 64, 500, 512);
    ok = gpt2_config_check(&big, msg, sizeof(msg));
    check(!ok && contains(msg, "n_embd=1073741824") && contains(msg, "out of range"), "n_embd=2^30 from flags refused", msg);
    big = tiny(QKV_STANDARD, 4);
    big.channels = 1 << 30; big.num_heads = 1 << 10; big.num_kv_heads = 1 << 10;
    ok = gpt2_config_check(&big, msg, sizeof(msg));
    if (ok) { ok = qkv_layout(&big).width > 0; }
    check(!ok && contains(msg, "n_embd=1073741824"), "n_embd=2^30 with a small mlp refused before qkv_layout", msg);
}

static void test_scheme_mismatch() {
    char msg[512];
    GPT2Config c = tiny(QKV_Q_IDENTITY, 4);
    int ok = qkv_check_scheme_matches_build(&c, "q.bin", msg, sizeof(msg));
    check(kQKVScheme == QKV_STANDARD && !ok && contains(msg, "q.bin") && contains(msg, "q_identity") && contains(msg, "standard"),
          "checkpoint of another scheme refused naming both", msg);
    c.scheme = QKV_STANDARD;
    check(qkv_check_scheme_matches_build(&c, "s.bin", msg, sizeof(msg)) == 1, "checkpoint of the build's scheme accepted");
}

// seed 004: at 32,000 tokens the 300M standard cache is 2.62 GB, kv_shared 1.31 GB
static void test_kv_cache_paper_figures() {
    GPT2Config c = gpt2_config_default(20, 16, 1024, 2048, 50257, 50304);
    double standard_gb = 32000.0 * qkv_kv_cache_bytes_per_token(&c) / 1e9;
    c.scheme = QKV_KV_SHARED;
    double shared_gb = 32000.0 * qkv_kv_cache_bytes_per_token(&c) / 1e9;
    char detail[128];
    snprintf(detail, sizeof(detail), "standard %.2f GB, kv_shared %.2f GB", standard_gb, shared_gb);
    check(fabs(standard_gb - 2.62) < 0.005 && fabs(shared_gb - 1.31) < 0.005, "KV cache at 32k tokens as seed 004 reports", detail);
}

// gpt2_training_memory, the lists the CUDA trainer allocates with: for every scheme, both attention
// paths and both precisions, tensors are 256-byte aligned, in order, non-overlapping, and present
// exactly where the path, the scheme's shared storage and q_residual say
static void test_training_memory() {
    bool names_ok = true;
    for (int i = 0; i < NUM_ACT_TENSORS; i++) {
        for (int j = 0; j < i; j++) { names_ok = names_ok && strcmp(act_tensor_names[i], act_tensor_names[j]) != 0; }
    }
    for (int i = 0; i < NUM_GRAD_ACT_TENSORS; i++) {
        for (int j = 0; j < i; j++) { names_ok = names_ok && strcmp(grad_act_tensor_names[i], grad_act_tensor_names[j]) != 0; }
    }
    check(names_ok && strcmp(act_tensor_names[ACT_ATT_LSE], "att_lse") == 0 &&
          strcmp(grad_act_tensor_names[GACT_ATTN_DELTA], "attn_delta") == 0, "memory: tensor names distinct and in enum order");
    check(qkv_fused_attention_available(64, 1) && qkv_fused_attention_available(128, 1) &&
          !qkv_fused_attention_available(64, 0) && !qkv_fused_attention_available(32, 1) &&
          !qkv_fused_attention_available(96, 1) && !qkv_fused_attention_available(256, 1),
          "memory: fused attention only for bf16 and head size 64 or 128");
    for (int s = 0; s < QKV_NUM_SCHEMES; s++) {
        for (int variant = 0; variant < 4; variant++) {
            const int fused = variant & 1, bf16 = variant >> 1;
            GPT2Config c = tiny(s, 4);
            c.use_bias = 0;
            const int B = 3, T = 5; // odd sizes, so that the 256-byte rounding matters
            TrainingMemory m;
            gpt2_training_memory(&c, B, T, bf16 ? 2 : 4, bf16, 1, fused, &m);
            const QKVLayout L = qkv_layout(&c);
            std::string why;
            size_t sizes[NUM_PARAMETER_TENSORS], offsets[NUM_PARAMETER_TENSORS];
            const size_t np = gpt2_param_layout(&c, sizes, offsets);
            for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
                if (offsets[i] % PARAM_ALIGN_ELEMS != 0) { why += std::string(" param ") + param_tensor_names[i] + " unaligned;"; }
            }
            if (np != m.num_parameters_padded || np < gpt2_num_parameters(&c) || m.param_bytes != np * (bf16 ? 2 : 4) ||
                m.master_bytes != (bf16 ? np * 4 : 0)) { why += " parameter side;"; }
            // expected presence of the attention-path and scheme-specific tensors
            const bool qres = s == QKV_Q_RESIDUAL;
            const bool own_k = !qkv_roles_share(L.k, L.q), own_v = !qkv_roles_share(L.v, L.q) && !qkv_roles_share(L.v, L.k);
            struct { int id; bool present; } acts[] = {
                {ACT_PERM_Q, !fused}, {ACT_PERM_K, !fused && own_k}, {ACT_PERM_V, !fused && own_v}, {ACT_ATT, !fused},
                {ACT_YPERM, !fused}, {ACT_ATT_LSE, (bool)fused}, {ACT_QRES_Q, qres}, {ACT_QRES_RRMS, qres}, {ACT_QKV, true},
            };
            for (size_t k = 0; k < sizeof(acts) / sizeof(acts[0]); k++) {
                if ((m.acts[acts[k].id].count > 0) != acts[k].present) { why += std::string(" ") + act_tensor_names[acts[k].id] + ";"; }
            }
            struct { int id; bool present; } grads[] = {
                {GACT_DPERM_Q, !fused}, {GACT_DPERM_K, !fused && own_k}, {GACT_DPERM_V, !fused && own_v},
                {GACT_DATT, !fused}, {GACT_DYPERM, !fused}, {GACT_ATTN_DELTA, (bool)fused},
                {GACT_DQRES, qres},
            };
            for (size_t k = 0; k < sizeof(grads) / sizeof(grads[0]); k++) {
                if ((m.grad_acts[grads[k].id].count > 0) != grads[k].present) {
                    why += std::string(" ") + grad_act_tensor_names[grads[k].id] + ";";
                }
            }
            if (fused && (m.acts[ACT_ATT_LSE].count != (size_t)c.num_layers * B * c.num_heads * T ||
                          m.acts[ACT_ATT_LSE].elem != 4 || m.grad_acts[GACT_ATTN_DELTA].count != (size_t)B * c.num_heads * T)) {
                why += " att_lse / attn_delta shape;";
            }
            // the flash backward's fp32 dQ sum lives in dbuf_m: (B, T, C) fp32 must fit
            if (fused && tensor_alloc_bytes(&m.grad_acts[GACT_DBUF_M]) < (size_t)B * T * c.channels * 4) { why += " dbuf_m < dQ sum;"; }
            if (!fused && m.acts[ACT_ATT].count != (size_t)c.num_layers * B * c.num_heads * T * T) { why += " att shape;"; }
            // each list: offsets 256-byte aligned, in order, each tensor inside the allocation
            const TensorAlloc* lists[2] = {m.acts, m.grad_acts};
            const int counts[2] = {NUM_ACT_TENSORS, NUM_GRAD_ACT_TENSORS};
            const size_t totals[2] = {m.acts_bytes, m.grad_acts_bytes};
            for (int li = 0; li < 2; li++) {
                size_t end = 0;
                for (int i = 0; i < counts[li]; i++) {
                    const TensorAlloc* t = &lists[li][i];
                    if (t->offset % TENSOR_ALIGN_BYTES != 0 || t->offset < end) { why += " offsets;"; }
                    if (t->count > 0) { end = t->offset + tensor_alloc_bytes(t); }
                }
                if (end > totals[li] || totals[li] - end >= TENSOR_ALIGN_BYTES || totals[li] % TENSOR_ALIGN_BYTES != 0) {
                    why += " allocation size;";
                }
            }
            if (m.total_bytes != m.param_bytes + m.grad_bytes + m.optimizer_bytes + m.master_bytes + m.acts_bytes +
                                 m.grad_acts_bytes) { why += " total;"; }
            check(why.empty(), std::string("memory ") + qkv_scheme_name(s) + (fused ? " fused" : " unfused") +
                  (bf16 ? " bf16" : " fp32"), why.c_str());
        }
    }
}

// The fused attention backward's gradient routing, written out per scheme by hand (not derived from
// the layout, so that a change to qkv_fused_grad_plan or qkv_layout that moves a gradient fails here)
static void test_fused_grad_plan() {
    struct Row { int scheme; int acc_q, acc_k, acc_v, kv_one_write, wrote_input; };
    const Row rows[] = {
        {QKV_STANDARD,   0, 0, 0, 0, 0}, // three disjoint column ranges, each written once
        {QKV_Q_IDENTITY, 0, 0, 0, 0, 1}, // dq overwrites dx
        {QKV_K_IDENTITY, 0, 0, 0, 0, 1}, // dk overwrites dx
        {QKV_V_IDENTITY, 0, 0, 0, 0, 1}, // dv overwrites dx
        {QKV_KV_SHARED,  0, 0, 0, 1, 0}, // dK + dV in one write
        {QKV_QK_SHARED,  1, 0, 0, 0, 0}, // dK written, then dQ added
        {QKV_QKV_SHARED, 1, 0, 0, 1, 0}, // dK + dV written, then dQ added
        {QKV_Q_RESIDUAL, 0, 0, 0, 0, 0}, // dq overwrites q_residual's own buffer
    };
    check(sizeof(rows) / sizeof(rows[0]) == QKV_NUM_SCHEMES, "fused gradient plan: a row for every scheme");
    for (const Row& r : rows) {
        for (int Hkv : {4, 2, 1}) {
            GPT2Config c = tiny(r.scheme, Hkv);
            char msg[512];
            if (!gpt2_config_check(&c, msg, sizeof(msg))) { continue; }
            const QKVLayout L = qkv_layout(&c);
            const QKVGradPlan p = qkv_fused_grad_plan(&L);
            char got[128];
            snprintf(got, sizeof(got), "got accumulate %d %d %d, kv_one_write %d, wrote_input %d", p.accumulate[0],
                     p.accumulate[1], p.accumulate[2], p.kv_one_write, p.wrote_input);
            check(p.accumulate[0] == r.acc_q && p.accumulate[1] == r.acc_k && p.accumulate[2] == r.acc_v &&
                  p.kv_one_write == r.kv_one_write && p.wrote_input == r.wrote_input,
                  std::string("fused gradient plan ") + qkv_scheme_name(r.scheme) + " n_kv_head=" + std::to_string(Hkv), got);
        }
    }
}

int main() {
    test_layouts();
    test_constraints();
    test_scales_and_names();
    test_header_round_trip();
    test_llmc_versions();
    test_scheme_mismatch();
    test_checkpoint_validate();
    test_header_ranges();
    test_kv_cache_paper_figures();
    test_training_memory();
    test_fused_grad_plan();
    return failed == 0 ? 0 : 1;
}
