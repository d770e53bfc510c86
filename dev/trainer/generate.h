/*
dev/trainer/generate.h: what runs that do not train share: --generate's prompt, its printing and
report, and the inspection run's prompt, probe and report (dev/trainer/attention_maps.h).
*/
#ifndef DEV_TRAINER_GENERATE_H
#define DEV_TRAINER_GENERATE_H

#include "run.h"
#include "attention_maps.h"
#include "../../tokenizer.h"

// ----------------------------------------------------------------------------
// generation (--generate, and the samples during training): the trainers' KV-cached decode loops
// share these pieces

// the end-of-text token samples start from: the tokenizer file's, else GPT-2's 50256; 0 for a
// model whose vocabulary is smaller (the test fixtures)
static int sampling_eot_token(const Tokenizer* tokenizer, int vocab_size) {
    const int eot = tokenizer->init_ok ? tokenizer->eot_token : 50256;
    return eot >= 0 && eot < vocab_size ? eot : 0;
}

// The tokens a generation starts from: an end-of-text token (what GPT-2 saw before every
// document), then --prompt in GPT-2's BPE (dev/data/gpt2/encoder.json + vocab.bpe). Returns 1, or
// 0 with a one-line message.
static int generate_prompt(const TrainArgs* a, int eot, int vocab_size, std::vector<int>* tokens, char* msg, size_t msg_size) {
    tokens->assign(1, eot);
    if (a->prompt == NULL || a->prompt[0] == '\0') { return 1; }
    GPT2Encoder encoder;
    std::string err;
    if (!encoder.load_openai("dev/data/gpt2/encoder.json", "dev/data/gpt2/vocab.bpe", &err)) {
        snprintf(msg, msg_size, "--prompt: %s (HINT: bash dev/data/fetch_gpt2_vocab.sh fetches GPT-2's vocabulary)", err.c_str());
        return 0;
    }
    encoder.encode(a->prompt, strlen(a->prompt), tokens);
    for (size_t i = 0; i < tokens->size(); i++) {
        if ((*tokens)[i] >= vocab_size) {
            snprintf(msg, msg_size, "--prompt: token %d of the prompt is outside this model's vocabulary of %d",
                     (*tokens)[i], vocab_size);
            return 0;
        }
    }
    if (a->generate == 0 && (long long)tokens->size() > a->config.max_seq_len) { // the inspection run
        snprintf(msg, msg_size, "--prompt of %zu tokens (the end-of-text token before it included) is longer than the "
                 "model's context, max_seq_len %d (HINT: shorten the prompt)", tokens->size(), a->config.max_seq_len);
        return 0;
    }
    if ((long long)tokens->size() + a->generate > a->config.max_seq_len) {
        snprintf(msg, msg_size, "--prompt of %zu tokens + --generate %d exceed the model's max_seq_len %d",
                 tokens->size(), a->generate, a->config.max_seq_len);
        return 0;
    }
    return 1;
}

// --prompt_tokens FILE: token ids separated by whitespace or commas, each in the model's vocabulary,
// at least one and at most max_seq_len of them. Returns 1, or 0 with a one-line message.
static int read_prompt_tokens(const char* path, const GPT2Config* c, std::vector<int>* tokens, char* msg, size_t msg_size) {
    FILE* f = fopen(path, "rb");
    if (f == NULL) {
        snprintf(msg, msg_size, "--prompt_tokens %s: cannot open (%s)", path, strerror(errno));
        return 0;
    }
    tokens->clear();
    std::string word;
    int ch = 0, ok = 1;
    while (ok && ch != EOF) {
        ch = fgetc(f);
        if (ch != EOF && !isspace(ch) && ch != ',') {
            word.push_back((char)ch);
            ok = word.size() < 16;
            continue;
        }
        if (word.empty()) { continue; }
        const long v = strtol(word.c_str(), NULL, 10);
        ok = word.find_first_not_of("0123456789") == std::string::npos && v < c->vocab_size &&
             (long long)tokens->size() < c->max_seq_len; // digits only: no sign, no NUL byte inside
        if (!ok) { break; }
        tokens->push_back((int)v);
        word.clear();
    }
    fclose(f);
    if (!ok && (long long)tokens->size() >= c->max_seq_len) {
        snprintf(msg, msg_size, "--prompt_tokens %s: more than the model's context of max_seq_len %d tokens (HINT: "
                 "shorten the prompt)", path, c->max_seq_len);
        return 0;
    }
    if (!ok) {
        std::string shown;
        for (size_t i = 0; i < word.size(); i++) { shown += isprint((unsigned char)word[i]) ? word[i] : '?'; }
        snprintf(msg, msg_size, "--prompt_tokens %s: token %zu ('%.16s') is not a token id of this model's vocabulary "
                 "[0, %d) (HINT: decimal ids separated by whitespace or commas)", path, tokens->size() + 1, shown.c_str(),
                 c->vocab_size);
        return 0;
    }
    if (tokens->empty()) {
        snprintf(msg, msg_size, "--prompt_tokens %s: no tokens in the file, expected token ids separated by whitespace "
                 "or commas", path);
        return 0;
    }
    return 1;
}

// The prompt of --generate or of the inspection run, before anything is built: --prompt_tokens read,
// --prompt encoded, each checked against the model's vocabulary and context (declared in
// run_checks.h, whose host checks, --check_args' among them, call it). Returns 1, or 0 with a
// one-line message.
static int prompt_check(const TrainArgs* a, char* msg, size_t msg_size) {
    std::vector<int> tokens;
    if (a->prompt_tokens != NULL) { return read_prompt_tokens(a->prompt_tokens, &a->config, &tokens, msg, msg_size); }
    if (a->prompt != NULL) { return generate_prompt(a, 0, a->config.vocab_size, &tokens, msg, msg_size); } // 0: any eot in range
    return 1;
}

// The inspection run's inputs, before the model runs: the prompt (an end-of-text token, then
// --prompt or ATTENTION_PROBE_TEXT) and, where the context holds at least 3 positions, the induction
// probe; maps' shape fields from the config, its sequences with their tokens, probs and scores sized
// (L, H, T, T) and zero; *eot_out (unless NULL), the end-of-text token both start with (the
// tokenizer file's, as --generate's). Returns 1, or 0 with a one-line message.
static int inspect_prepare(const TrainArgs* a, int compute_bytes, AttentionMaps* maps, int* eot_out, char* msg,
                           size_t msg_size) {
    const GPT2Config* c = &a->config;
    Tokenizer tokenizer;
    tokenizer_init(&tokenizer, a->tokenizer_path);
    const int eot = sampling_eot_token(&tokenizer, c->vocab_size);
    if (eot_out != NULL) { *eot_out = eot; }
    tokenizer_free(&tokenizer);
    std::vector<int> prompt;
    if (a->prompt_tokens != NULL) {
        if (!read_prompt_tokens(a->prompt_tokens, c, &prompt, msg, msg_size)) { return 0; }
    } else if (a->prompt != NULL) {
        if (!generate_prompt(a, eot, c->vocab_size, &prompt, msg, msg_size)) { return 0; }
    } else if (c->vocab_size < GPT2_VOCAB_SIZE) { // the sentence's tokens would not fit: random ones
        const int n = ATTENTION_PROBE_SMALL_VOCAB_TOKENS < c->max_seq_len ? ATTENTION_PROBE_SMALL_VOCAB_TOKENS : c->max_seq_len - 1;
        prompt = random_tokens(n, c->vocab_size, eot, ATTENTION_PROBE_SEED);
    } else { // the probe sentence, its first max_seq_len tokens in a shorter context
        TrainArgs probe = *a;
        probe.prompt = ATTENTION_PROBE_TEXT;
        probe.config.max_seq_len = INT_MAX;
        if (!generate_prompt(&probe, eot, c->vocab_size, &prompt, msg, msg_size)) {
            const std::string why(msg); // "--prompt: <why>": the user gave no --prompt
            snprintf(msg, msg_size, "the probe sentence (no --prompt given)%s", why.c_str() + strlen("--prompt"));
            return 0;
        }
        if ((long long)prompt.size() > c->max_seq_len) { prompt.resize((size_t)c->max_seq_len); }
    }
    maps->num_layers = c->num_layers;
    maps->num_heads = c->num_heads;
    maps->num_kv_heads = c->num_kv_heads;
    maps->head_dim = qkv_head_dim(c);
    maps->scheme = (int)c->scheme;
    maps->compute_bytes = compute_bytes;
    maps->scale = gpt2_attn_scale(c); // with an --attn_scale override, as the trainers' attention
    maps->vocab_size = c->vocab_size;
    maps->seqs.clear();
    AttentionSequence s;
    s.kind = ATTENTION_SEQ_PROMPT;
    s.repeat = 0;
    s.tokens = prompt;
    maps->seqs.push_back(s);
    const int R = induction_repeat_for(c->max_seq_len);
    if (R >= 1) {
        s.kind = ATTENTION_SEQ_INDUCTION;
        s.repeat = R;
        s.tokens = induction_tokens(R, c->vocab_size, eot);
        maps->seqs.push_back(s);
    }
    for (size_t i = 0; i < maps->seqs.size(); i++) {
        AttentionSequence& q = maps->seqs[i];
        q.T = (int)q.tokens.size();
        if (q.T < 1 || q.T > c->max_seq_len) { // cannot happen: each source above holds to the context
            snprintf(msg, msg_size, "internal: inspection sequence %zu has %d tokens, the context %d", i, q.T, c->max_seq_len);
            return 0;
        }
        q.probs.assign((size_t)c->num_layers * c->num_heads * q.T * q.T, 0.0f);
        q.scores.assign(q.probs.size(), 0.0f);
    }
    return 1;
}

// the longest sequence of the inspection run: the one forward pass's T, the shorter ones padded
static int inspect_max_T(const AttentionMaps* maps) {
    int T = 1;
    for (size_t i = 0; i < maps->seqs.size(); i++) { T = maps->seqs[i].T > T ? maps->seqs[i].T : T; }
    return T;
}

// sequence i's tokens padded with `pad` to T positions: causal attention makes the maps of the
// first positions independent of what follows them
static std::vector<int> inspect_padded_tokens(const AttentionSequence* s, int T, int pad) {
    std::vector<int> t = s->tokens;
    t.resize((size_t)T, pad);
    return t;
}

// The inspection run's end, once the maps hold the model's values: the diagnostics table, then the
// files of --attention_csv and --dump_attention. Returns 1, or 0 with a one-line message.
static int inspect_report(const TrainArgs* a, const AttentionMaps* maps, char* msg, size_t msg_size) {
    const AttentionSequence& prompt = maps->seqs[0];
    const char* what = a->prompt_tokens != NULL ? "--prompt_tokens, as given"
                     : a->prompt != NULL ? "an end-of-text token, then --prompt"
                     : a->config.vocab_size < GPT2_VOCAB_SIZE
                         ? "an end-of-text token, then random tokens: the vocabulary is smaller than GPT-2's"
                         : "an end-of-text token, then the probe sentence";
    printf("attention maps: %d layers x %d heads | prompt of %d tokens (%s)", maps->num_layers, maps->num_heads,
           prompt.T, what);
    if (maps->seqs.size() > 1) {
        printf(" | induction probe: end-of-text + %d random tokens, repeated (seed %llu)", maps->seqs[1].repeat,
               (unsigned long long)INDUCTION_SEED);
    }
    printf("\n");
    const std::vector<HeadDiagnostics> d = attention_diagnostics(maps);
    attention_diagnostics_print(d);
    if (a->attention_csv != NULL) {
        if (!attention_diagnostics_write_csv(d, a->attention_csv, msg, msg_size)) { return 0; }
        printf("wrote %s (a row per head)\n", a->attention_csv);
    }
    if (a->dump_attention != NULL) {
        if (!attention_maps_write(maps, a->dump_attention, msg, msg_size)) { return 0; }
        printf("wrote %s (%zu sequences; read it with dev/tools/attention_maps.py)\n", a->dump_attention, maps->seqs.size());
    }
    return 1;
}

// one generated token as text (token ids where there is no tokenizer file)
static void print_token(Tokenizer* tokenizer, int token) {
    if (tokenizer->init_ok && (unsigned)token < tokenizer->vocab_size) {
        safe_printf(tokenizer_decode(tokenizer, (unsigned)token));
    } else {
        printf("%d ", token);
    }
    fflush(stdout);
}

// --generate's output: each sample between '---' lines, the prompt (after its end-of-text token)
// then the sample's tokens. A batch of one streams its tokens between print_sample_start and
// print_samples_end (samples NULL); a larger batch prints every sample at the end, from samples
// (batch, n_new).
static void print_sample_start(Tokenizer* tokenizer, const std::vector<int>& prompt) {
    printf("---\n");
    for (size_t i = 1; i < prompt.size(); i++) { print_token(tokenizer, prompt[i]); } // [0] is the end-of-text token
}
static void print_samples_end(Tokenizer* tokenizer, const std::vector<int>& prompt, const int* samples, int batch,
                              int n_new) {
    if (samples == NULL) { printf("\n"); }
    for (int b = 0; samples != NULL && b < batch; b++) {
        print_sample_start(tokenizer, prompt);
        for (int i = 0; i < n_new; i++) { print_token(tokenizer, samples[(size_t)b * n_new + i]); }
        printf("\n");
    }
    printf("---\n");
}

// The tokens generate_tokens feeds at step i (0 <= i < n_prompt + n_new) of a batch: the prompt's
// token i to every sequence, then each sequence's next token drawn from its row of logits (batch, V)
// with its own generator rngs[b] (one random_f32 each, greedy too), also into out[b * n_new + j] for
// the j-th new token where out is not NULL; a batch of one prints it as it comes. Returns 1 when a
// decode step of tokens follows, 0 after the last new token (sampled, not fed back), -1 with
// sample_logits_check's message when the logits are not finite.
static int generate_feed(int i, const int* prompt, int n_prompt, int n_new, Sampler* sampler, const float* logits, int V,
                         int batch, unsigned long long* rngs, int position, Tokenizer* tokenizer, int* tokens, int* out,
                         char* msg, size_t msg_size) {
    if (i < n_prompt) {
        for (int b = 0; b < batch; b++) { tokens[b] = prompt[i]; }
        return 1;
    }
    const int j = i - n_prompt;
    for (int b = 0; b < batch; b++) {
        const float* row = logits + (size_t)b * V;
        if (!sample_logits_check(row, V, position, msg, msg_size)) { return -1; }
        tokens[b] = sample_token(sampler, row, V, random_f32(&rngs[b]));
        if (out != NULL) { out[(size_t)b * n_new + j] = tokens[b]; }
    }
    if (batch == 1) { print_token(tokenizer, tokens[0]); }
    return i + 1 < n_prompt + n_new;
}

// Feeds the prompt through the cache (the same tokens to every sequence), then samples n_new tokens
// per sequence after it: one decode step per position for the whole batch (cache->batch sequences),
// instead of a forward pass over the whole sequence so far. Sequence b draws from its own generator
// rngs[b] (generate_feed: one random_f32 per sampled token, greedy too, so that the RNG state a
// training state saves does not depend on --temperature/--top_k/--top_p); its tokens go to
// out[b * n_new + i] (out may be NULL); a batch of one prints them as they come. step_s (may be NULL)
// adds the seconds of the decode steps: the forward passes and the logits' copy back, without the
// sampling. The decode step is the trainer's own gpt2_decode_step (the CUDA trainer's
// dev/trainer/kv_cache.cuh, the CPU trainer's), found for its Model and Cache when the trainer calls
// this. Returns 1, or 0 with a one-line message (the logits not finite: sample_logits_check).
template <typename Model, typename Cache>
static int generate_tokens(Model* model, Cache* cache, const int* prompt, int n_prompt, int n_new, Sampler* sampler,
                           unsigned long long* rngs, Tokenizer* tokenizer, float* logits /* (batch, V) */, int* out,
                           double* step_s, char* msg, size_t msg_size) {
    const int V = model->config.vocab_size, n = cache->batch;
    std::vector<int> tokens((size_t)n);
    int feed = 1;
    for (int i = 0; i < n_prompt + n_new; i++) {
        feed = generate_feed(i, prompt, n_prompt, n_new, sampler, logits, V, n, rngs, cache->len, tokenizer, tokens.data(),
                             out, msg, msg_size);
        if (feed != 1) { break; }
        const double t0 = now_seconds();
        if (!gpt2_decode_step(model, cache, tokens.data(), logits, msg, msg_size)) { return 0; }
        if (step_s != NULL) { *step_s += now_seconds() - t0; }
    }
    return feed >= 0;
}

// --num_samples' generators: sample b draws from the generator of --seed + b, so that it is the
// text a run with --seed + b and --num_samples 1 prints (dev/test/test_cpu.sh and test_cudacpu.sh
// compare them token for token)
static std::vector<unsigned long long> sampling_rngs(unsigned long long seed, int batch) {
    std::vector<unsigned long long> rngs((size_t)batch);
    for (int b = 0; b < batch; b++) { rngs[(size_t)b] = sampling_rng_init(seed + (unsigned long long)b); }
    return rngs;
}

// --generate's closing lines: speed, and the cache the scheme needs per token, measured (what the
// trainer allocated) beside attention_variants.cuh's formula. n_new tokens for each of `batch`
// sequences decoded together; forward_s is the part of decode_s in the decode steps (forward passes
// and the logits' copy back), the rest is sampling on the host. dev/bench/gen_bench.py reads these lines.
static void generate_report(const GPT2Config* c, int n_prompt, int n_new, int batch, double prefill_s, double decode_s,
                            double forward_s, size_t cache_bytes_per_token, int elem_bytes) {
    const double all_new = (double)n_new * batch;
    const int steps = n_new - 1; // the first new token comes from the prompt's logits, the last is not fed back
    char samples[96] = "";
    if (batch > 1) { snprintf(samples, sizeof(samples), "; %d samples of %d decoded together after the one prompt", batch, n_new); }
    printf("generate: %d prompt tokens in %.1f ms, %.0f new tokens in %.1f ms (%.1f tok/s, one forward pass of %d "
           "token%s per step%s)\n", n_prompt, prefill_s * 1e3, all_new, decode_s * 1e3, decode_s > 0 ? all_new / decode_s : 0.0,
           batch, batch > 1 ? "s" : "", samples);
    printf("decode: %d steps of %d token%s, %.1f ms in the forward passes (%.1f tok/s), %.1f ms sampling on the host\n",
           steps, batch, batch > 1 ? "s" : "", forward_s * 1e3, forward_s > 0 ? (double)steps * batch / forward_s : 0.0,
           (decode_s - forward_s) * 1e3);
    printf("kv cache: %zu bytes per token allocated (%d-byte elements; qkv_kv_cache_bytes_per_token, bf16: %zu), "
           "%.1f KiB for %d sequence%s of %d positions\n", cache_bytes_per_token, elem_bytes, qkv_kv_cache_bytes_per_token(c),
           cache_bytes_per_token * (double)(n_prompt + n_new) * batch / 1024.0, batch, batch > 1 ? "s" : "", n_prompt + n_new);
}

// --generate's decoding, once the prompt is built and the cache allocated (for a->num_samples
// sequences): the prompt fed to every sequence, then a->generate new tokens each, printed as
// print_samples_end says, then the speed and the cache (generate_report; elem_bytes: the cache's
// element size). logits: (num_samples, V) on the host. Returns 1, or 0 with msg.
template <typename Model, typename Cache>
static int generate_samples(Model* model, Cache* cache, const TrainArgs* a, const std::vector<int>& prompt,
                            Tokenizer* tokenizer, float* logits, int elem_bytes, char* msg, size_t msg_size) {
    const int n_prompt = (int)prompt.size(), N = a->num_samples;
    std::vector<int> samples((size_t)N * a->generate);
    std::vector<unsigned long long> rngs = sampling_rngs(a->seed, N);
    Sampler sampler;
    sampler.settings = a->sampling;
    char sampling[256];
    sampling_describe(a, sampling, sizeof(sampling));
    printf("sampling: %s | %d sample%s\n", sampling, N, N > 1 ? "s" : "");
    double t0 = now_seconds();
    int ok = generate_tokens(model, cache, prompt.data(), n_prompt, 0, &sampler, rngs.data(), tokenizer, logits, NULL, NULL,
                             msg, msg_size);
    const double prefill_s = now_seconds() - t0;
    if (ok && N == 1) { print_sample_start(tokenizer, prompt); } // its tokens follow as they come
    double forward_s = 0.0;
    t0 = now_seconds();
    ok = ok && generate_tokens(model, cache, NULL, 0, a->generate, &sampler, rngs.data(), tokenizer, logits,
                               samples.data(), &forward_s, msg, msg_size);
    const double decode_s = now_seconds() - t0;
    if (!ok) { return 0; }
    print_samples_end(tokenizer, prompt, N > 1 ? samples.data() : NULL, N, a->generate);
    generate_report(&model->config, n_prompt, a->generate, N, prefill_s, decode_s, forward_s,
                    kv_cache_bytes_per_token(cache), elem_bytes);
    return 1;
}

#endif // DEV_TRAINER_GENERATE_H
