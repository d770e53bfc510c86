/*
test_kv_cache_cpu.cpp: KV-cached generation (gpt2_decode_step) against the full forward pass.

  build/test_kv_cache_cpu_<scheme> <fixture name> <model.bin> <debug.bin>

Loads the fixture checkpoint, takes the first PROMPT tokens of the debug state's inputs as a
prompt and greedily generates up to GEN tokens twice:
  cached: one gpt2_decode_step per token (the prompt's tokens, then each generated one);
  full:   gpt2_forward with B = 1 on the whole sequence so far, the last position's logits
          (the model's activations are reallocated for each length).
Passes when the tokens are identical and ||logits_cached - logits_full|| / ||logits_full|| over all
steps is at most 1e-5, and
  - the cache's bytes per token are 4 x qkv_kv_cache_channels = 2 x qkv_kv_cache_bytes_per_token
    (fp32 here, bf16 there: attention_variants.cuh),
  - a step at position max_T (cache full) and a token outside the vocabulary are refused with a
    message, and the cache stays usable,
  - after kv_cache_reset the first step gives the same logits again,
  - decoding leaves the model's own activations untouched,
  - for each setting of dev/test/sampling_check.h's grid (greedy, temperature, top-k, top-p, both),
    the tokens sampled from the cached logits are those sampled from the full forward pass on the
    same tokens (teacher-forced) with the same coins; a flip only where the decision was within the
    measured logit difference of a boundary (sampling_flip_explained), counted;
  - 3 sequences decoded together (one cache, one step for all) give each sequence the tokens and,
    bit for bit, the logits it gets decoded alone (greedy and two sampled settings, each with its
    own coins); a bad token in one sequence of a batch is refused naming it.
Prints "PASS kv_cache_cpu <fixture> (...)" or "FAIL kv_cache_cpu <fixture> (...)". Bad input (missing
or corrupt files) prints one "error: ..." line and exits 1.
*/
#define TESTING
#include "train_gpt2_cpu.cpp"
#include "../test/debug_state.h"
#include "../test/sampling_check.h"

#include <string>
#include <vector>

static const double kThreshold = 1e-5;
static const int PROMPT = 4;
static const int GEN = 24;

static int die(const char* msg) {
    fprintf(stderr, "error: %s\n", msg);
    return 1;
}

static int argmax(const float* x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++) {
        if (x[i] > x[best]) { best = i; }
    }
    return best;
}

// drops the model's activations so that the next gpt2_forward allocates them for its own (B, T)
static void forget_batch_shape(GPT2* model) {
    free(model->acts_memory);
    free(model->inputs);
    free(model->targets);
    model->acts_memory = NULL;
    model->inputs = NULL;
    model->targets = NULL;
}

// For each setting of kSamplingGrid: gen tokens sampled from the cached logits after the prompt,
// then the full forward pass on the same tokens, sampled with the same coins (sampling_check.h).
// Adds a failure per setting with a mismatch; *summary: the counts.
static int check_sampling_grid(GPT2* model, const int* prompt, int gen, std::vector<std::string>* failures,
                               std::string* summary) {
    char msg[1024];
    const int V = model->config.vocab_size, Vp = model->config.padded_vocab_size;
    KVCache cache;
    if (!kv_cache_build(&cache, model, PROMPT + gen, 1, msg, sizeof(msg))) { return die(msg); }
    Sampler sampler;
    std::vector<float> step((size_t)V), cached((size_t)gen * V);
    int same = 0, flips = 0, mismatches = 0;
    double worst_d = 0.0;
    std::string per_setting;
    for (int s = 0; s < kSamplingGridSize; s++) {
        sampler.settings = kSamplingGrid[s].settings;
        const std::vector<float> coins = sampling_check_coins(1337 + (unsigned long long)s, gen);
        kv_cache_reset(&cache);
        std::vector<int> seq(prompt, prompt + PROMPT);
        for (int pos = 0; pos < PROMPT + gen - 1; pos++) {
            if (!gpt2_decode_step(model, &cache, &seq[(size_t)pos], step.data(), msg, sizeof(msg))) {
                kv_cache_free(&cache);
                return die(msg);
            }
            if (pos >= PROMPT - 1) {
                const int g = pos - (PROMPT - 1);
                memcpy(&cached[(size_t)g * V], step.data(), (size_t)V * sizeof(float));
                seq.push_back(sample_token(&sampler, step.data(), V, coins[(size_t)g]));
            }
        }
        int s_same = 0, s_flips = 0, s_bad = 0;
        for (int g = 0; g < gen; g++) {
            const int T = PROMPT + g; // the cached tokens so far: teacher forcing
            forget_batch_shape(model);
            if (!gpt2_forward(model, seq.data(), NULL, 1, T, msg, sizeof(msg))) {
                kv_cache_free(&cache);
                return die(msg);
            }
            const float* full = model->acts.logits + (size_t)(T - 1) * Vp;
            const int mine = seq[(size_t)T], theirs = sample_token(&sampler, full, V, coins[(size_t)g]);
            const double d = sampling_check_max_diff(&cached[(size_t)g * V], full, V);
            worst_d = fmax(worst_d, d);
            if (mine == theirs) {
                s_same++;
            } else if (sampling_flip_explained(&sampler, full, V, mine, theirs, coins[(size_t)g], d)) {
                s_flips++;
            } else {
                s_bad++;
                printf("  sampling %s step %d: cached token %d, the full pass's %d (coin %.7f, logit difference %.1e)\n",
                       kSamplingGrid[s].name, g, mine, theirs, (double)coins[(size_t)g], d);
            }
        }
        per_setting += std::string(s > 0 ? ", " : "") + kSamplingGrid[s].name + " " + std::to_string(s_same) + "/" +
                       std::to_string(gen) + (s_flips > 0 ? " (" + std::to_string(s_flips) + " flips)" : "");
        if (s_bad > 0) { failures->push_back(std::string("sampling ") + kSamplingGrid[s].name + ": " + std::to_string(s_bad) + " mismatches"); }
        same += s_same;
        flips += s_flips;
        mismatches += s_bad;
    }
    kv_cache_free(&cache);
    printf("  sampled tokens equal to the full pass's: %s\n", per_setting.c_str());
    char buf[256];
    snprintf(buf, sizeof(buf), "%d settings x %d sampled tokens: %d the full pass's, %d flips within the logit difference "
             "(at most %.1e), %d mismatches", kSamplingGridSize, gen, same, flips, worst_d, mismatches);
    *summary = buf;
    return 0;
}

// Batched decoding: BATCH sequences decoded together (one cache, one step for all of them) against
// each decoded alone (a cache of one), from different prompts of PROMPT tokens, then gen tokens each;
// sequence b samples with the grid's setting b (greedy first) and its own coins. No layer function
// mixes rows, so the logits must agree bit for bit and the tokens exactly. Then a bad token in one
// sequence of the batch is refused, naming the sequence. Adds a failure per difference; *summary: the counts.
static const int BATCH = 3;

// sequences [first, first + count) of seqs (each holding its prompt) decoded together: appends gen
// sampled tokens to each and the logit rows they were drawn from to logits[b]. Returns 0, or 1 after
// an error message.
static int batch_decode(GPT2* model, int first, int count, int gen, std::vector<std::vector<int>>* seqs,
                        std::vector<std::vector<float>>* logits) {
    char msg[1024];
    const int V = model->config.vocab_size;
    KVCache cache;
    if (!kv_cache_build(&cache, model, PROMPT + gen, count, msg, sizeof(msg))) { return die(msg); }
    std::vector<float> step((size_t)count * V);
    std::vector<int> tokens((size_t)count);
    for (int pos = 0; pos < PROMPT + gen - 1; pos++) {
        for (int b = 0; b < count; b++) { tokens[(size_t)b] = (*seqs)[(size_t)(first + b)][(size_t)pos]; }
        if (!gpt2_decode_step(model, &cache, tokens.data(), step.data(), msg, sizeof(msg))) {
            kv_cache_free(&cache);
            return die(msg);
        }
        if (pos >= PROMPT - 1) {
            sampling_check_batch_step(step.data(), V, first, count, pos - (PROMPT - 1), gen, seqs, logits);
        }
    }
    kv_cache_free(&cache);
    return 0;
}

static int check_batch(GPT2* model, int gen, std::vector<std::string>* failures, std::string* summary) {
    char msg[1024];
    const int V = model->config.vocab_size;
    std::vector<std::vector<int>> batched((size_t)BATCH), single((size_t)BATCH);
    std::vector<std::vector<float>> batched_logits((size_t)BATCH), single_logits((size_t)BATCH);
    for (int b = 0; b < BATCH; b++) {
        for (int i = 0; i < PROMPT; i++) { batched[(size_t)b].push_back((7 + 31 * i + 101 * b) % V); }
        single[(size_t)b] = batched[(size_t)b];
    }
    if (batch_decode(model, 0, BATCH, gen, &batched, &batched_logits) != 0) { return 1; }
    for (int b = 0; b < BATCH; b++) {
        if (batch_decode(model, b, 1, gen, &single, &single_logits) != 0) { return 1; }
    }
    int same_tokens = 0, same_logits = 0;
    for (int b = 0; b < BATCH; b++) {
        const int tokens_ok = batched[(size_t)b] == single[(size_t)b];
        const int logits_ok = batched_logits[(size_t)b] == single_logits[(size_t)b]; // bit for bit
        same_tokens += tokens_ok;
        same_logits += logits_ok;
        if (!tokens_ok || !logits_ok) {
            failures->push_back("batched sequence " + std::to_string(b) + " (" + kSamplingGrid[b % kSamplingGridSize].name +
                                ") differs from its run alone in its " + (tokens_ok ? "logits" : "tokens"));
        }
    }
    // a bad token in sequence 1 of a batch: refused, naming the sequence
    KVCache cache;
    if (!kv_cache_build(&cache, model, PROMPT, BATCH, msg, sizeof(msg))) { return die(msg); }
    std::vector<int> tokens((size_t)BATCH, 0);
    std::vector<float> step((size_t)BATCH * V);
    tokens[1] = V;
    const int refused = !gpt2_decode_step(model, &cache, tokens.data(), step.data(), msg, sizeof(msg)) &&
                        strstr(msg, "(sequence 1)") != NULL && cache.len == 0;
    printf("  batch of %d: token %d in sequence 1 refused: %s\n", BATCH, V, refused ? msg : "NO");
    if (!refused) { failures->push_back("a bad token in sequence 1 of a batch was not refused naming it"); }
    kv_cache_free(&cache);
    printf("  batch of %d decoded together: %d of %d sequences with the tokens and %d with the logits (bit for bit) of "
           "their runs alone\n", BATCH, same_tokens, BATCH, same_logits);
    char buf[256];
    snprintf(buf, sizeof(buf), "%d sequences decoded together = each alone: %d/%d token for token, %d/%d logits bit for bit",
             BATCH, same_tokens, BATCH, same_logits, BATCH);
    *summary = buf;
    return 0;
}

// the cached decode of a loaded model against its full forward pass: the PASS/FAIL line, or an
// error; returns the exit code
static int check_fixture(const char* fixture, const char* model_path, const char* debug_path, GPT2* model,
                         const DebugState* ds) {
    char msg[1024];
    const DebugTensor* inputs = debug_state_find(ds, "inputs");
    if (inputs == NULL || inputs->i == NULL || inputs->numel < (size_t)PROMPT) {
        snprintf(msg, sizeof(msg), "%s: needs an int32 record 'inputs' of at least %d tokens", debug_path, PROMPT);
        return die(msg);
    }
    const GPT2Config* c = &model->config;
    const int V = c->vocab_size, Vp = c->padded_vocab_size;
    const int gen = c->max_seq_len - PROMPT < GEN ? c->max_seq_len - PROMPT : GEN;
    if (gen < 1) {
        snprintf(msg, sizeof(msg), "%s: max_seq_len %d leaves no room after a %d-token prompt", model_path, c->max_seq_len, PROMPT);
        return die(msg);
    }
    const int max_T = PROMPT + gen; // the prompt, gen - 1 generated tokens fed back, one spare position
    std::vector<std::string> failures;

    // the model's own activations before decoding (a forward pass over the prompt), to check afterwards
    if (!gpt2_forward(model, inputs->i, NULL, 1, PROMPT, msg, sizeof(msg))) { return die(msg); }
    const std::vector<float> acts_before(model->acts_memory, model->acts_memory + activation_floats(model->act_sizes));

    // cached: the prompt, then each generated token fed back
    KVCache cache;
    if (!kv_cache_build(&cache, model, max_T, 1, msg, sizeof(msg))) { return die(msg); }
    std::vector<int> tok_cached;
    std::vector<float> logits_cached((size_t)gen * V), first_logits(V), step_logits(V);
    int next = -1;
    for (int pos = 0; pos < PROMPT + gen - 1; pos++) {
        const int token = pos < PROMPT ? inputs->i[pos] : next;
        if (!gpt2_decode_step(model, &cache, &token, step_logits.data(), msg, sizeof(msg))) {
            kv_cache_free(&cache);
            return die(msg);
        }
        if (pos == 0) { first_logits = step_logits; }
        if (pos >= PROMPT - 1) {
            memcpy(&logits_cached[(size_t)(pos - (PROMPT - 1)) * V], step_logits.data(), (size_t)V * sizeof(float));
            next = argmax(step_logits.data(), V);
            tok_cached.push_back(next);
        }
    }
    if (memcmp(acts_before.data(), model->acts_memory, acts_before.size() * sizeof(float)) != 0) {
        failures.push_back("decoding changed the model's activations");
    }

    // refusals: a token outside the vocabulary, then position max_T once the last spare position is used
    int refused_token = !gpt2_decode_step(model, &cache, &V, step_logits.data(), msg, sizeof(msg));
    printf("  token %d refused: %s\n", V, refused_token ? msg : "NO");
    if (!refused_token) { failures.push_back("token V was accepted"); }
    const int spare_ok = gpt2_decode_step(model, &cache, &tok_cached.back(), step_logits.data(), msg, sizeof(msg));
    if (!spare_ok) { failures.push_back(std::string("the last position was refused: ") + msg); }
    const int zero = 0;
    const int refused_full = !gpt2_decode_step(model, &cache, &zero, step_logits.data(), msg, sizeof(msg));
    printf("  position %d refused: %s\n", max_T, refused_full ? msg : "NO");
    if (!refused_full || cache.len != max_T) { failures.push_back("position max_T was not refused"); }
    // reset: the same first step again
    kv_cache_reset(&cache);
    if (!gpt2_decode_step(model, &cache, &inputs->i[0], step_logits.data(), msg, sizeof(msg)) ||
        memcmp(step_logits.data(), first_logits.data(), (size_t)V * sizeof(float)) != 0) {
        failures.push_back("after kv_cache_reset the first step differs");
    }

    // bytes per token: fp32 here, the header's figure is bf16
    const size_t bytes = kv_cache_bytes_per_token(&cache);
    const size_t header_bf16 = qkv_kv_cache_bytes_per_token(c);
    const size_t channels = qkv_kv_cache_channels(c);
    printf("  kv cache %zu bytes/token (fp32; header: %zu channels, %zu bf16 bytes/token)\n", bytes, channels, header_bf16);
    if (bytes != 2 * header_bf16 || bytes != channels * sizeof(float)) {
        failures.push_back("cache bytes per token " + std::to_string(bytes) + " != 2 x qkv_kv_cache_bytes_per_token " +
                           std::to_string(header_bf16));
    }
    kv_cache_free(&cache);

    // full forward on the growing sequence
    std::vector<int> seq(inputs->i, inputs->i + PROMPT);
    std::vector<int> tok_full;
    double num = 0.0, den = 0.0;
    for (int g = 0; g < gen; g++) {
        const int T = (int)seq.size();
        forget_batch_shape(model);
        if (!gpt2_forward(model, seq.data(), NULL, 1, T, msg, sizeof(msg))) { return die(msg); }
        const float* last = model->acts.logits + (size_t)(T - 1) * Vp;
        const float* mine = &logits_cached[(size_t)g * V];
        for (int i = 0; i < V; i++) {
            const double d = (double)mine[i] - last[i];
            num += d * d;
            den += (double)last[i] * last[i];
        }
        tok_full.push_back(argmax(last, V));
        seq.push_back(tok_full.back());
    }
    const double rel = den > 0.0 ? sqrt(num / den) : sqrt(num);
    int same = 0;
    while (same < gen && tok_cached[same] == tok_full[same]) { same++; }
    printf("  tokens (cached):");
    for (int g = 0; g < gen; g++) { printf(" %d", tok_cached[g]); }
    printf("\n  logits rel_err=%.1e over %d steps\n", rel, gen);
    if (same != gen) { failures.push_back("tokens differ from step " + std::to_string(same)); }
    if (!(rel <= kThreshold)) {
        char buf[96];
        snprintf(buf, sizeof(buf), "logits rel_err=%.1e > %.0e", rel, kThreshold);
        failures.push_back(buf);
    }
    std::string sampling;
    if (check_sampling_grid(model, inputs->i, gen, &failures, &sampling) != 0) { return 1; }
    std::string batch;
    if (check_batch(model, gen, &failures, &batch) != 0) { return 1; }

    if (failures.empty()) {
        printf("PASS kv_cache_cpu %s (%d greedy tokens identical to the full forward, logits rel_err=%.1e; "
               "%zu bytes/token = 2 x the header's bf16 %zu; position %d refused; sampling: %s; %s)\n", fixture, gen, rel, bytes,
               header_bf16, max_T, sampling.c_str(), batch.c_str());
    } else {
        std::string all = failures[0];
        for (size_t i = 1; i < failures.size(); i++) { all += "; " + failures[i]; }
        printf("FAIL kv_cache_cpu %s (%s)\n", fixture, all.c_str());
    }
    return failures.empty() ? 0 : 1;
}

int main(int argc, char** argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s <fixture name> <model.bin> <debug.bin>  (this binary: scheme %s)\n",
                argc > 0 ? argv[0] : "test_kv_cache_cpu", qkv_scheme_name(kQKVScheme));
        return 1;
    }
    char msg[1024];
    GPT2 model;
    if (!gpt2_build_from_checkpoint(&model, argv[2], msg, sizeof(msg))) { return die(msg); }
    DebugState ds;
    if (!debug_state_load(argv[3], &ds, msg, sizeof(msg))) { gpt2_free(&model); return die(msg); }
    // one cleanup for every exit of the check, errors included (the sanitizer builds look for leaks)
    const int rc = check_fixture(argv[1], argv[2], argv[3], &model, &ds);
    debug_state_free(&ds);
    gpt2_free(&model);
    return rc;
}
