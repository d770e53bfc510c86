/*
attention_maps.h: what attention does, per layer and head, in a form people can look at (issue 31).
Both trainers' inspection run (--dump_attention FILE, --attention_csv FILE; README, "Looking inside
attention") computes the maps with their own attention code and hands them here, where they are

  - written to the maps file (dev/FORMATS.md, "Attention maps"): every layer's and head's causal
    softmax probabilities and pre-mask scores for each input sequence, float32;
  - reduced to the per-head diagnostics below, printed as a table and written as CSV.

Plain C++ with no trainer types, so the unit test (dev/test/test_attention_maps.cpp) drives it with
hand-built patterns whose diagnostics are known, and dev/tools/attention_maps.py reads its files.

The diagnostics of one head, each a mean over query positions t (the definitions the docs repeat):
  entropy     nats of the attention row: -sum_s p[t][s] ln p[t][s], over every t of the prompt
  distance    mean distance attended over: sum_s p[t][s] (t - s), over every t of the prompt
  sink        attention on the first token (the end-of-text token before the prompt): p[t][0]
  prev_token  attention on the token just before: p[t][t-1], over t >= 1
  induction   on [eot, r_1..r_R, r_1..r_R] (R random tokens, repeated): from each token of the repeat
              to the token after that token's earlier occurrence, p[t][t-R+1] over t in [R+1, 2R]
  asymmetry   of the pre-mask scores S (T x T, every t and s): ||S - S^T||_F / ||S||_F, 0 when
              S[t][s] == S[s][t] everywhere; exactly 0 for the Q = K schemes, whose q and k are one tensor
*/
#ifndef ATTENTION_MAPS_H
#define ATTENTION_MAPS_H

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <utility>
#include <vector>

#define ATTENTION_MAPS_MAGIC 20261127
#define ATTENTION_MAPS_VERSION 1
#define ATTENTION_MAPS_MAX_SEQUENCES 64
#define ATTENTION_MAPS_SEQ_FIELD 32 // header index of sequence 0's (T, kind, repeat); 3 ints per sequence
#define ATTENTION_MAPS_MAX_DIM (1 << 24) // a header field above it is refused before any arithmetic

// what a sequence of the maps file is: the prompt, or the induction probe (repeat = R)
enum AttentionSequenceKind { ATTENTION_SEQ_PROMPT = 0, ATTENTION_SEQ_INDUCTION = 1 };

// the induction probe: R random tokens, repeated once, after an end-of-text token; R this long, or
// (max_seq_len - 1) / 2 for a model with a shorter context. 50 is TransformerLens's usual length.
#define INDUCTION_REPEAT 50
#define INDUCTION_SEED 1337ULL // fixed, so every checkpoint is probed with the same tokens

typedef struct {
    int T;      // positions (tokens)
    int kind;   // AttentionSequenceKind
    int repeat; // induction: R, the repeated block's length; 0 for the prompt
    std::vector<int> tokens;   // (T)
    std::vector<float> probs;  // (L, H, T, T): row t is query position t's causal softmax; 0 above the diagonal
    std::vector<float> scores; // (L, H, T, T): scale * q_t . k_s for every t and s, before the causal mask
} AttentionSequence;

typedef struct {
    int num_layers, num_heads, num_kv_heads, head_dim;
    int scheme;        // enum QKVScheme of attention_variants.cuh
    int compute_bytes; // bytes per element of the activations the maps were computed from: 4 fp32, 2 bf16
    float scale;       // the attention scale the scores include
    int vocab_size;    // the model's: a reader knows whether GPT-2's tokenizer spells the tokens
    std::vector<AttentionSequence> seqs;
} AttentionMaps;

// one (T, T) map of layer l, head h
static inline size_t attention_map_offset(int l, int h, int H, int T) { return (((size_t)l * H + h) * T) * (size_t)T; }

// ----------------------------------------------------------------------------
// the induction probe's tokens

// [eot, r_1..r_n]: n tokens drawn uniformly from the vocabulary except eot, by splitmix64 from seed
// (the same tokens for every checkpoint of a vocabulary size)
static std::vector<int> random_tokens(int n, int vocab_size, int eot, uint64_t seed) {
    std::vector<int> t(1, eot);
    uint64_t state = seed;
    for (int i = 0; i < n; i++) {
        int token = eot;
        while (token == eot) {
            uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
            z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
            z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
            z ^= z >> 31;
            token = (int)(z % (uint64_t)vocab_size);
            if (vocab_size == 1) { break; }
        }
        t.push_back(token);
    }
    return t;
}

// [eot, r_1..r_R, r_1..r_R]: random_tokens of INDUCTION_SEED, repeated
static std::vector<int> induction_tokens(int R, int vocab_size, int eot) {
    std::vector<int> t = random_tokens(R, vocab_size, eot, INDUCTION_SEED);
    for (int i = 0; i < R; i++) { t.push_back(t[1 + i]); }
    return t;
}

static int induction_repeat_for(int max_seq_len) {
    const int fits = (max_seq_len - 1) / 2;
    return fits < INDUCTION_REPEAT ? fits : INDUCTION_REPEAT;
}

// ----------------------------------------------------------------------------
// diagnostics of one head's (T, T) map; sums in double

static double head_entropy(const float* p, int T) {
    double total = 0.0;
    for (int t = 0; t < T; t++) {
        double h = 0.0;
        for (int s = 0; s <= t; s++) {
            const double x = p[(size_t)t * T + s];
            if (x > 0.0) { h -= x * log(x); }
        }
        total += h;
    }
    return total / T;
}

static double head_distance(const float* p, int T) {
    double total = 0.0;
    for (int t = 0; t < T; t++) {
        for (int s = 0; s <= t; s++) { total += (double)p[(size_t)t * T + s] * (t - s); }
    }
    return total / T;
}

static double head_sink(const float* p, int T) {
    double total = 0.0;
    for (int t = 0; t < T; t++) { total += p[(size_t)t * T]; }
    return total / T;
}

// a one-token prompt has no previous token: 0
static double head_prev_token(const float* p, int T) {
    if (T < 2) { return 0.0; }
    double total = 0.0;
    for (int t = 1; t < T; t++) { total += p[(size_t)t * T + t - 1]; }
    return total / (T - 1);
}

// p of the induction probe, T = 2R + 1
static double head_induction(const float* p, int T, int R) {
    if (R < 1 || T != 2 * R + 1) { return 0.0; }
    double total = 0.0;
    for (int t = R + 1; t <= 2 * R; t++) { total += p[(size_t)t * T + t - R + 1]; }
    return total / R;
}

// 0 for a map of all-zero scores
static double head_asymmetry(const float* s, int T) {
    double diff = 0.0, norm = 0.0;
    for (int t = 0; t < T; t++) {
        for (int u = 0; u < T; u++) {
            const double a = s[(size_t)t * T + u], d = a - (double)s[(size_t)u * T + t];
            diff += d * d;
            norm += a * a;
        }
    }
    return norm > 0.0 ? sqrt(diff / norm) : 0.0;
}

typedef struct {
    int layer, head;
    double entropy, distance, sink, prev_token, induction, asymmetry;
} HeadDiagnostics;

#define HEAD_DIAGNOSTICS_CSV_HEADER "layer,head,entropy,distance,sink,prev_token,induction,asymmetry"

// Every head's diagnostics: entropy, distance, sink, prev_token and asymmetry from the first prompt
// sequence, induction from the first induction sequence (0 where the maps have none).
static std::vector<HeadDiagnostics> attention_diagnostics(const AttentionMaps* m) {
    const AttentionSequence* prompt = NULL;
    const AttentionSequence* probe = NULL;
    for (size_t i = 0; i < m->seqs.size(); i++) {
        if (m->seqs[i].kind == ATTENTION_SEQ_PROMPT && prompt == NULL) { prompt = &m->seqs[i]; }
        if (m->seqs[i].kind == ATTENTION_SEQ_INDUCTION && probe == NULL) { probe = &m->seqs[i]; }
    }
    std::vector<HeadDiagnostics> out;
    for (int l = 0; l < m->num_layers; l++) {
        for (int h = 0; h < m->num_heads; h++) {
            HeadDiagnostics d;
            memset(&d, 0, sizeof(d));
            d.layer = l;
            d.head = h;
            if (prompt != NULL) {
                const size_t o = attention_map_offset(l, h, m->num_heads, prompt->T);
                d.entropy = head_entropy(prompt->probs.data() + o, prompt->T);
                d.distance = head_distance(prompt->probs.data() + o, prompt->T);
                d.sink = head_sink(prompt->probs.data() + o, prompt->T);
                d.prev_token = head_prev_token(prompt->probs.data() + o, prompt->T);
                d.asymmetry = head_asymmetry(prompt->scores.data() + o, prompt->T);
            }
            if (probe != NULL) {
                const size_t o = attention_map_offset(l, h, m->num_heads, probe->T);
                d.induction = head_induction(probe->probs.data() + o, probe->T, probe->repeat);
            }
            out.push_back(d);
        }
    }
    return out;
}

// the mean of every head's diagnostics (layer and head -1)
static HeadDiagnostics attention_diagnostics_mean(const std::vector<HeadDiagnostics>& d) {
    HeadDiagnostics m;
    memset(&m, 0, sizeof(m));
    m.layer = m.head = -1;
    for (size_t i = 0; i < d.size(); i++) {
        m.entropy += d[i].entropy;
        m.distance += d[i].distance;
        m.sink += d[i].sink;
        m.prev_token += d[i].prev_token;
        m.induction += d[i].induction;
        m.asymmetry += d[i].asymmetry;
    }
    const double n = d.empty() ? 1.0 : (double)d.size();
    m.entropy /= n; m.distance /= n; m.sink /= n; m.prev_token /= n; m.induction /= n; m.asymmetry /= n;
    return m;
}

// the printed table: a row per head, then the means
static void attention_diagnostics_print(const std::vector<HeadDiagnostics>& d) {
    printf("layer head | entropy distance   sink prev_token induction asymmetry\n");
    for (size_t i = 0; i <= d.size(); i++) {
        const HeadDiagnostics r = i < d.size() ? d[i] : attention_diagnostics_mean(d);
        if (i < d.size()) { printf("%5d %4d |", r.layer, r.head); } else { printf(" mean      |"); }
        printf(" %7.3f %8.2f %6.3f %10.3f %9.3f %9.2e\n", r.entropy, r.distance, r.sink, r.prev_token, r.induction,
               r.asymmetry);
    }
}

// ----------------------------------------------------------------------------
// files: written to "<path>.tmp" and renamed, so a failed write never replaces what was there

// The pieces (pointer, bytes) written in order to a new file "<path>.XXXXXX" (mkstemp: never a name
// that exists, so neither another output nor an input is truncated on the way), then renamed to
// path: a d12's maps of a 1024-token prompt are 1.2 GB, streamed from where they are, never copied.
// Returns 1, or 0 with a one-line message naming the flag and the file (the temporary file removed).
static int write_then_rename(const char* path, const std::vector<std::pair<const void*, size_t>>& pieces, const char* flag,
                             char* msg, size_t msg_size) {
    std::string tmp = std::string(path) + ".XXXXXX";
    const int fd = mkstemp(&tmp[0]);
    FILE* f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (f == NULL) {
        snprintf(msg, msg_size, "%s %s: cannot create a file beside it (%s)", flag, path, strerror(errno));
        if (fd >= 0) { close(fd); remove(tmp.c_str()); }
        return 0;
    }
    fchmod(fd, 0644); // mkstemp's 0600 would make the maps private, unlike every other file a run writes
    int ok = 1, err = 0;
    for (size_t i = 0; i < pieces.size() && ok; i++) {
        ok = pieces[i].second == 0 || fwrite(pieces[i].first, 1, pieces[i].second, f) == pieces[i].second;
        if (!ok) { err = errno; }
    }
    if (fclose(f) != 0 && ok) { ok = 0; err = errno; }
    if (ok && rename(tmp.c_str(), path) != 0) { ok = 0; err = errno; }
    if (!ok) {
        snprintf(msg, msg_size, "%s %s: writing failed (%s)", flag, path, strerror(err));
        remove(tmp.c_str());
        return 0;
    }
    return 1;
}

static int attention_diagnostics_write_csv(const std::vector<HeadDiagnostics>& d, const char* path, char* msg, size_t msg_size) {
    std::string text = HEAD_DIAGNOSTICS_CSV_HEADER "\n";
    char line[256];
    for (size_t i = 0; i < d.size(); i++) {
        snprintf(line, sizeof(line), "%d,%d,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g\n", d[i].layer, d[i].head, d[i].entropy,
                 d[i].distance, d[i].sink, d[i].prev_token, d[i].induction, d[i].asymmetry);
        text += line;
    }
    return write_then_rename(path, {{text.data(), text.size()}}, "--attention_csv", msg, msg_size);
}

// The maps file (dev/FORMATS.md): a header of 256 int32, then per sequence its tokens (int32),
// probabilities and scores (float32, (L, H, T, T) each).
static int attention_maps_write(const AttentionMaps* m, const char* path, char* msg, size_t msg_size) {
    int32_t header[256];
    memset(header, 0, sizeof(header));
    header[0] = ATTENTION_MAPS_MAGIC;
    header[1] = ATTENTION_MAPS_VERSION;
    header[2] = m->num_layers;
    header[3] = m->num_heads;
    header[4] = m->num_kv_heads;
    header[5] = m->head_dim;
    header[6] = m->scheme;
    header[7] = m->compute_bytes;
    memcpy(&header[8], &m->scale, sizeof(float));
    header[9] = (int32_t)m->seqs.size();
    header[10] = m->vocab_size;
    for (size_t i = 0; i < m->seqs.size(); i++) {
        header[ATTENTION_MAPS_SEQ_FIELD + 3 * i] = m->seqs[i].T;
        header[ATTENTION_MAPS_SEQ_FIELD + 3 * i + 1] = m->seqs[i].kind;
        header[ATTENTION_MAPS_SEQ_FIELD + 3 * i + 2] = m->seqs[i].repeat;
    }
    std::vector<std::pair<const void*, size_t>> pieces(1, {header, sizeof(header)});
    for (size_t i = 0; i < m->seqs.size(); i++) {
        const AttentionSequence& s = m->seqs[i];
        pieces.push_back({s.tokens.data(), s.tokens.size() * sizeof(int32_t)});
        pieces.push_back({s.probs.data(), s.probs.size() * sizeof(float)});
        pieces.push_back({s.scores.data(), s.scores.size() * sizeof(float)});
    }
    return write_then_rename(path, pieces, "--dump_attention", msg, msg_size);
}

// Reads a maps file back (the round-trip test; dev/tools/attention_maps.py is the usual reader).
// Returns 1, or 0 with a one-line message naming the file.
static int attention_maps_read(AttentionMaps* m, const char* path, char* msg, size_t msg_size) {
    FILE* f = fopen(path, "rb");
    if (f == NULL) {
        snprintf(msg, msg_size, "%s: cannot open (%s)", path, strerror(errno));
        return 0;
    }
    int32_t header[256];
    int ok = fread(header, sizeof(header), 1, f) == 1;
    if (!ok || header[0] != ATTENTION_MAPS_MAGIC || header[1] != ATTENTION_MAPS_VERSION) {
        snprintf(msg, msg_size, "%s: not an attention maps file of version %d (expected magic %d)", path,
                 ATTENTION_MAPS_VERSION, ATTENTION_MAPS_MAGIC);
        fclose(f);
        return 0;
    }
    const int n = header[9];
    for (int i = 2; i < 8; i++) { ok = ok && header[i] >= (i < 4 ? 1 : 0) && header[i] <= ATTENTION_MAPS_MAX_DIM; }
    ok = ok && header[10] >= 0 && header[10] <= ATTENTION_MAPS_MAX_DIM;
    ok = ok && n >= 0 && n <= ATTENTION_MAPS_MAX_SEQUENCES;
    for (int i = 0; ok && i < n; i++) {
        const int T = header[ATTENTION_MAPS_SEQ_FIELD + 3 * i];
        ok = T >= 1 && T <= ATTENTION_MAPS_MAX_DIM;
    }
    if (!ok) {
        snprintf(msg, msg_size, "%s: a header field is out of range (layers, heads, sequences or a length)", path);
        fclose(f);
        return 0;
    }
    // the size the header implies, in double (no overflow), against the file's, before allocating
    double expected = (double)sizeof(header);
    for (int i = 0; i < n; i++) {
        const double T = header[ATTENTION_MAPS_SEQ_FIELD + 3 * i];
        expected += 4.0 * T + 8.0 * (double)header[2] * header[3] * T * T;
    }
    struct stat st;
    memset(&st, 0, sizeof(st));
    if (fstat(fileno(f), &st) != 0 || (double)st.st_size != expected) {
        snprintf(msg, msg_size, "%s: %lld bytes, its header says %.0f", path, (long long)st.st_size, expected);
        fclose(f);
        return 0;
    }
    m->num_layers = header[2];
    m->num_heads = header[3];
    m->num_kv_heads = header[4];
    m->head_dim = header[5];
    m->scheme = header[6];
    m->compute_bytes = header[7];
    memcpy(&m->scale, &header[8], sizeof(float));
    m->vocab_size = header[10];
    m->seqs.assign(n, AttentionSequence());
    for (int i = 0; i < n && ok; i++) {
        AttentionSequence& s = m->seqs[i];
        s.T = header[ATTENTION_MAPS_SEQ_FIELD + 3 * i];
        s.kind = header[ATTENTION_MAPS_SEQ_FIELD + 3 * i + 1];
        s.repeat = header[ATTENTION_MAPS_SEQ_FIELD + 3 * i + 2];
        const size_t maps = (size_t)m->num_layers * m->num_heads * s.T * s.T;
        s.tokens.resize(s.T);
        s.probs.resize(maps);
        s.scores.resize(maps);
        ok = fread(s.tokens.data(), sizeof(int32_t), s.T, f) == (size_t)s.T &&
             fread(s.probs.data(), sizeof(float), maps, f) == maps && fread(s.scores.data(), sizeof(float), maps, f) == maps;
    }
    ok = ok && fgetc(f) == EOF;
    fclose(f);
    if (!ok) { snprintf(msg, msg_size, "%s: the file size does not match its header", path); }
    return ok;
}

#endif // ATTENTION_MAPS_H
