/*
dev/trainer/checkpoint.cuh: the CUDA trainer's model and training-state files (dev/FORMATS.md), included
by train_gpt2.cu after the model: the tensors move between the files and the device, and
write_checkpoint writes a step's checkpoint from every process of a run.
*/
#ifndef DEV_TRAINER_CHECKPOINT_CUH
#define DEV_TRAINER_CHECKPOINT_CUH

// ----------------------------------------------------------------------------
// checkpoint files (dev/FORMATS.md): dev/trainer/train_common.h reads and checks their headers before the
// GPU is touched; here the tensors move between the files and the device

// Loads the parameters of an inspected file into a built model (and its master weights, from the
// file's own values: fp32 files give exact fp32 masters).
static void gpt2_load_params(GPT2* model, const char* path, int version) {
    FILE* f = fopen(path, "rb");
    if (f == NULL || fseeko(f, 1024, SEEK_SET) != 0) {
        fprintf(stderr, "error: %s: cannot reopen model file\n", path);
        exit(EXIT_FAILURE);
    }
    const int file_bf16 = checkpoint_version_is_bf16(version);
    size_t max_n = 0;
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) { if (model->param_sizes[i] > max_n) { max_n = model->param_sizes[i]; } }
    void* raw = host_malloc(max_n * (file_bf16 ? 2 : 4), "checkpoint read buffer");
    float* vals = (float*)host_malloc(max_n * sizeof(float), "checkpoint read buffer");
    void* xs = host_malloc(max_n * sizeof(floatX), "checkpoint read buffer");
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
        const size_t n = model->param_sizes[i];
        if (n == 0) { continue; }
        if (fread(raw, file_bf16 ? 2 : 4, n, f) != n) {
            fprintf(stderr, "error: %s: truncated model file while reading tensor %s\n", path, param_tensor_names[i]);
            exit(EXIT_FAILURE);
        }
        if (file_bf16) {
            for (size_t j = 0; j < n; j++) { vals[j] = host_bf16_to_f32(((const uint16_t*)raw)[j]); }
        } else {
            memcpy(vals, raw, n * sizeof(float));
        }
        host_floats_to_x(xs, vals, n);
        cudaCheck(cudaMemcpy(model->params[i], xs, n * sizeof(floatX), cudaMemcpyHostToDevice));
        size_t lo, hi, state_index;
        opt_window(model, model->param_offsets[i], n, &lo, &hi, &state_index);
        if (model->master_memory != NULL && hi > lo) {
            cudaCheck(cudaMemcpy(model->master_memory + state_index, vals + lo, (hi - lo) * sizeof(float),
                                 cudaMemcpyHostToDevice));
        }
    }
    fclose(f);
    free(raw);
    free(vals);
    free(xs);
}

// A write given up: its temporary file goes, the file of that name (an older checkpoint) stays.
static void abandon_tmp(FILE* f, const char* tmp) {
    fclose(f);
    unlink(tmp);
}

// model file: bf16 from BF16 builds, fp32 from FP32 builds; llm.c's version 5/3 where llm.c can
// express the model (checkpoint_version_for: plain GPT-2), so that llm.c loads it, else our 7/6.
// Each tensor's values are checked on their way to the file (values_check_tensor). Returns 1, or 0
// with a one-line message and nothing written.
static int gpt2_write_checkpoint(const GPT2* model, const char* path, char* msg, size_t msg_size) { // path < 4096 bytes
    char tmp[4200];
    FILE* f = open_tmp_for(path, tmp, sizeof(tmp));
    int header[256];
    gpt2_config_to_header(&model->config, PRECISION_IS_BF16, header);
    fwrite_or_die(header, sizeof(int), 256, f, tmp);
    size_t max_n = 0;
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) { if (model->param_sizes[i] > max_n) { max_n = model->param_sizes[i]; } }
    void* xs = host_malloc(max_n * sizeof(floatX), "checkpoint write buffer");
    float* vals = (float*)host_malloc(max_n * sizeof(float), "checkpoint write buffer");
    int ok = 1;
    for (int i = 0; i < NUM_PARAMETER_TENSORS && ok; i++) {
        const size_t n = model->param_sizes[i];
        if (n == 0) { continue; }
        cudaCheck(cudaMemcpy(xs, model->params[i], n * sizeof(floatX), cudaMemcpyDeviceToHost));
        host_x_to_floats(vals, xs, n);
        ok = values_check_tensor(vals, n, VALUES_WEIGHTS, i, path, msg, msg_size);
        if (ok) { fwrite_or_die(xs, sizeof(floatX), n, f, tmp); }
    }
    free(xs);
    free(vals);
    if (!ok) {
        abandon_tmp(f, tmp);
        return 0;
    }
    close_and_rename(f, tmp, path);
    return 1;
}

// base: on the device (from cudaMemcpyDeviceToHost), or in host memory (cudaMemcpyHostToHost)
static int fwrite_tensors_f32(const GPT2* model, const float* base, cudaMemcpyKind from, ValuesKind kind, FILE* f,
                              const char* tmp, const char* path, float* scratch, char* msg, size_t msg_size) {
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
        const size_t n = model->param_sizes[i];
        if (n == 0) { continue; }
        cudaCheck(cudaMemcpy(scratch, base + model->param_offsets[i], n * sizeof(float), from));
        if (!values_check_tensor(scratch, n, kind, i, path, msg, msg_size)) { return 0; }
        fwrite_or_die(scratch, sizeof(float), n, f, tmp);
    }
    return 1;
}

// the training state file (layout above state_header_make in dev/trainer/train_common.h) of AdamW's m, v and
// master weights (NULL: none) for every parameter, in the device layout: the model's own on the
// device (from cudaMemcpyDeviceToHost), or what a ZeRO-1 run gathered into host memory
// (cudaMemcpyHostToHost). Returns 1, or 0 with a one-line message and nothing written.
static int gpt2_write_state(const GPT2* model, const TrainState* st, const float* m, const float* v, const float* master,
                            cudaMemcpyKind from, const char* path, char* msg, size_t msg_size) {
    char tmp[4200];
    FILE* f = open_tmp_for(path, tmp, sizeof(tmp));
    int header[256];
    state_header_make(header, &model->config, st, master != NULL);
    fwrite_or_die(header, sizeof(int), 256, f, tmp);
    fwrite_or_die(&st->loader, sizeof(DataLoaderState), 1, f, tmp);
    size_t max_n = 0;
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) { if (model->param_sizes[i] > max_n) { max_n = model->param_sizes[i]; } }
    float* scratch = (float*)host_malloc(max_n * sizeof(float), "state write buffer");
    const int ok = fwrite_tensors_f32(model, m, from, VALUES_ADAM_M, f, tmp, path, scratch, msg, msg_size) &&
                   fwrite_tensors_f32(model, v, from, VALUES_ADAM_V, f, tmp, path, scratch, msg, msg_size) &&
                   (master == NULL ||
                    fwrite_tensors_f32(model, master, from, VALUES_MASTER, f, tmp, path, scratch, msg, msg_size));
    free(scratch);
    if (!ok) {
        abandon_tmp(f, tmp);
        return 0;
    }
    close_and_rename(f, tmp, path);
    return 1;
}

// one kind of the state's values: this process's part of them into base (NULL: read past them)
static void fread_tensors_f32(GPT2* model, float* base, FILE* f, const char* path, float* scratch) {
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
        const size_t n = model->param_sizes[i];
        if (n == 0) { continue; }
        if (fread(scratch, sizeof(float), n, f) != n) {
            fprintf(stderr, "error: %s: truncated training state\n", path);
            exit(EXIT_FAILURE);
        }
        size_t lo, hi, state_index; // base holds [opt_lo, opt_hi) of the parameters
        opt_window(model, model->param_offsets[i], n, &lo, &hi, &state_index);
        if (base != NULL && hi > lo) {
            cudaCheck(cudaMemcpy(base + state_index, scratch + lo, (hi - lo) * sizeof(float), cudaMemcpyHostToDevice));
        }
    }
}

// Loads AdamW moments and master weights of an inspected state into a model whose parameters
// were loaded from the model file of the same step. With master weights in the file, params are
// re-rounded from them (identical to the saved bf16 params, which were rounded from them). A ZeRO-1
// process keeps its shard of them and re-rounds that part of the parameters.
static void gpt2_load_state(GPT2* model, const char* path, const TrainState* st) {
    FILE* f = fopen(path, "rb");
    if (f == NULL || fseeko(f, 1024 + (off_t)sizeof(DataLoaderState), SEEK_SET) != 0) {
        fprintf(stderr, "error: %s: cannot reopen training state\n", path);
        exit(EXIT_FAILURE);
    }
    size_t max_n = 0;
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) { if (model->param_sizes[i] > max_n) { max_n = model->param_sizes[i]; } }
    float* scratch = (float*)host_malloc(max_n * sizeof(float), "state read buffer");
    fread_tensors_f32(model, model->m_memory, f, path, scratch);
    fread_tensors_f32(model, model->v_memory, f, path, scratch);
    if (st->has_master) {
        fread_tensors_f32(model, model->master_memory, f, path, scratch); // skipped (read, not stored) without masters
        if (model->master_memory != NULL) {
            copy_master_to_params(model->params_memory + model->opt_lo, model->master_memory, model->opt_hi - model->opt_lo);
        }
    } else if (model->master_memory != NULL) {
        params_to_master(model->master_memory, model->params_memory + model->opt_lo, model->opt_hi - model->opt_lo);
    }
    fclose(f);
    free(scratch);
    cudaCheck(cudaDeviceSynchronize());
}

// A checkpoint at `step`, on every process: rank 0 writes the model (every process holds all of it)
// and the state, whose AdamW state a ZeRO-1 run first gathers from every process into rank 0's host
// memory (12 bytes a parameter with master weights; its GPU needs one shard's buffer only). Returns 1,
// or 0 after rank 0 printed the error; every process returns the same, so a failed write stops them
// all at this step.
static int write_checkpoint(const GPT2* model, DataParallel* dp, const TrainState* st, const char* model_path,
                            const char* state_path, FILE* logf) {
    char msg[16384];
    const float *m = model->m_memory, *v = model->v_memory, *master = model->master_memory;
    float* gathered = NULL;
    if (dp->zero) {
        const size_t N = model->num_parameters_padded;
        const int kinds = master != NULL ? 3 : 2;
        if (dp->rank == 0) { gathered = (float*)host_malloc(kinds * N * sizeof(float), "the AdamW state a checkpoint gathers"); }
        const float* shards[3] = {model->m_memory, model->v_memory, model->master_memory};
        const char* whats[3] = {"the gather of AdamW's m for a checkpoint", "the gather of AdamW's v for a checkpoint",
                                "the gather of the master weights for a checkpoint"};
        for (int k = 0; k < kinds; k++) {
            if (!dp->backend->gather(dp, shards[k], gathered != NULL ? gathered + k * N : NULL, DP_F32, whats[k])) { return 0; }
        }
        if (gathered != NULL) {
            m = gathered;
            v = gathered + N;
            master = kinds == 3 ? gathered + 2 * N : NULL;
        }
    }
    int ok = 1;
    if (dp->rank == 0) {
        // the model first: a state file marks a complete pair
        ok = gpt2_write_checkpoint(model, model_path, msg, sizeof(msg)) &&
             gpt2_write_state(model, st, m, v, master, gathered != NULL ? cudaMemcpyHostToHost : cudaMemcpyDeviceToHost,
                              state_path, msg, sizeof(msg));
        if (ok) {
            printf("wrote checkpoint %s + %s\n", model_path, state_path);
        } else {
            train_error(logf, st->step, msg);
        }
    }
    free(gathered);
    return dp_all_ok(dp, ok, "the agreement on the checkpoint");
}

#endif // DEV_TRAINER_CHECKPOINT_CUH
