/*
dev/trainer/generate.cuh: the CUDA trainer's runs that decode or look inside a model, included by
train_gpt2.cu after cuda_setup: the sample printed during training (sample_text), --generate
(generate_run) and --dump_attention / --attention_csv (inspect_run). What they share with the CPU
trainer (the prompt, the decode loop generate_tokens, the sampler, the reports) is
dev/trainer/generate.h.
*/
#ifndef DEV_TRAINER_GENERATE_CUH
#define DEV_TRAINER_GENERATE_CUH

// The sample printed during training: gen_T - 1 tokens after an end-of-text token.
static int sample_text(GPT2* model, const TrainArgs* a, Tokenizer* tokenizer, unsigned long long* rng, char* msg,
                       size_t msg_size) {
    const int eot = sampling_eot_token(tokenizer, model->config.vocab_size);
    KVCache cache;
    kv_cache_build(&cache, model, a->gen_T, 1);
    float* logits = (float*)host_malloc((size_t)model->config.vocab_size * sizeof(float), "sampling logits");
    Sampler sampler;
    sampler.settings = a->sampling;
    printf("generating:\n---\n");
    const int ok = generate_tokens(model, &cache, &eot, 1, a->gen_T - 1, &sampler, rng, tokenizer, logits, NULL, NULL,
                                   msg, msg_size);
    printf("\n---\n");
    kv_cache_free(&cache);
    free(logits);
    return ok;
}

// --generate: the model of -e (a checkpoint, or a random init of dN), the prompt, N new tokens
// with the KV cache for --num_samples sequences decoded together (the prompt fed once to all of
// them), then their speed and the cache's size. Returns the process exit code.
static int generate_run(const TrainArgs* a) {
    char msg[4096];
    cuda_setup();
    Tokenizer tokenizer;
    tokenizer_init(&tokenizer, a->tokenizer_path);
    const int V = a->config.vocab_size;
    const int eot = sampling_eot_token(&tokenizer, V);
    std::vector<int> prompt;
    if (!generate_prompt(a, eot, V, &prompt, msg, sizeof(msg))) {
        fprintf(stderr, "error: %s\n", msg);
        return 1;
    }
    // the decode step uses only the parameters and the cache: the smallest training shape will do
    GPT2 model;
    gpt2_build(&model, &a->config, 1, a->config.max_seq_len < 64 ? a->config.max_seq_len : 64, 0, 0, 1);
    if (a->from_file) { gpt2_load_params(&model, a->model_path, a->file_version); }
    else { gpt2_init_random(&model, a->seed); }
    printf("model: scheme %s | %zu parameters | %s | %s\n", qkv_scheme_name(model.config.scheme), model.num_parameters,
           a->from_file ? a->model_path : "random init", PRECISION_NAME);
    KVCache cache;
    kv_cache_build(&cache, &model, (int)prompt.size() + a->generate, a->num_samples);
    std::vector<float> logits((size_t)a->num_samples * V);
    const int ok = generate_samples(&model, &cache, a, prompt, &tokenizer, logits.data(), (int)sizeof(floatX), msg,
                                    sizeof(msg));
    if (!ok) { fprintf(stderr, "error: %s\n", msg); }
    kv_cache_free(&cache);
    tokenizer_free(&tokenizer);
    gpt2_free(&model);
    return ok ? 0 : 1;
}

// --dump_attention / --attention_csv: the model of -e on the unfused path, whose softmax keeps each
// layer's probabilities (B, H, T, T), one forward pass per sequence (the prompt, the induction
// probe) at that sequence's length; then per layer those probabilities and the scores again from the
// q and k the pass kept (attention_scores, the forward's own matmul), to the host as float32.
// Returns the process exit code.
static int inspect_run(const TrainArgs* a) {
    char msg[4096];
    cuda_setup();
    AttentionMaps maps;
    // NULL: each sequence is staged at its own length, nothing to pad with an end-of-text token
    if (!inspect_prepare(a, (int)sizeof(floatX), &maps, NULL, msg, sizeof(msg))) {
        fprintf(stderr, "error: %s\n", msg);
        return 1;
    }
    const int T_max = inspect_max_T(&maps), H = a->config.num_heads, L = a->config.num_layers;
    GPT2 model;
    gpt2_build(&model, &a->config, 1, T_max, 0, 0, 0); // 0: the unfused path
    if (a->from_file) { gpt2_load_params(&model, a->model_path, a->file_version); }
    else { gpt2_init_random(&model, a->seed); }
    printf("model: scheme %s | %zu parameters | %s | %s | attention: unfused (the probabilities are kept)\n",
           qkv_scheme_name(model.config.scheme), model.num_parameters, a->from_file ? a->model_path : "random init",
           PRECISION_NAME);
    const size_t plane_max = (size_t)H * T_max * T_max;
    floatX* scores_d = (floatX*)device_malloc(plane_max * sizeof(floatX), "inspection scores");
    void* host_x = host_malloc(plane_max * sizeof(floatX), "inspection maps");
    for (size_t i = 0; i < maps.seqs.size(); i++) {
        AttentionSequence& seq = maps.seqs[i];
        const int T = seq.T;
        const size_t plane = (size_t)H * T * T;
        gpt2_stage_batch(&model, seq.tokens.data(), NULL, 1, T);
        gpt2_forward_staged(&model, 0.0f);
        const AttnShape shape = gpt2_attn_shape(&model, 1, T);
        for (int l = 0; l < L; l++) {
            const AttnBuffers bufs = gpt2_attn_buffers(&model, l, 1, T);
            cudaCheck(cudaMemcpy(host_x, bufs.att, plane * sizeof(floatX), cudaMemcpyDeviceToHost));
            host_x_to_floats(seq.probs.data() + attention_map_offset(l, 0, H, T), host_x, plane);
            attention_scores(scores_d, bufs.perm[shape.owner[0]], bufs.perm[shape.owner[1]], &shape);
            cudaCheck(cudaMemcpy(host_x, scores_d, plane * sizeof(floatX), cudaMemcpyDeviceToHost));
            host_x_to_floats(seq.scores.data() + attention_map_offset(l, 0, H, T), host_x, plane);
        }
    }
    cudaCheck(cudaFree(scores_d));
    free(host_x);
    gpt2_free(&model);
    if (!inspect_report(a, &maps, msg, sizeof(msg))) {
        fprintf(stderr, "error: %s\n", msg);
        return 1;
    }
    return 0;
}

#endif // DEV_TRAINER_GENERATE_CUH
