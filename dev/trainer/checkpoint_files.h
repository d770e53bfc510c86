/*
dev/trainer/checkpoint_files.h: both trainers' reading and checking of model and training-state
files (dev/FORMATS.md), host-only, so that every refusal happens before a model is built: the
model header (checkpoint.h), the state header, and the values (NaN, Inf, a negative second moment).
Needs the includer's precision (PRECISION_NAME, PRECISION_IS_BF16): it decides the file version.
*/
#ifndef DEV_TRAINER_CHECKPOINT_FILES_H
#define DEV_TRAINER_CHECKPOINT_FILES_H

#include "checkpoint.h"
#include "host.h"
#include "../../dataloader.h"

// ----------------------------------------------------------------------------
// checkpoint files (dev/FORMATS.md): host-only inspection, so that every refusal happens before
// a model is built

// fopen of a directory succeeds on Linux; it then seeks to a size of LLONG_MAX and reads nothing,
// which would be reported as a truncated file: the loaders ask this first
static int file_is_directory(FILE* f) {
    struct stat st;
    return fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode);
}

static long long file_size_of(FILE* f) {
    if (fseeko(f, 0, SEEK_END) != 0) { return -1; }
    const long long size = (long long)ftello(f);
    if (fseeko(f, 0, SEEK_SET) != 0) { return -1; }
    return size;
}

// Reads and checks a model file's header: magic, version, the config (with an optional attention
// scale override, < 0 = none), gpt2_config_check, this build's scheme and the file size.
// Returns 1, or 0 with a one-line message naming the file.
static int checkpoint_inspect(const char* path, float attn_scale_override, GPT2Config* config, int* version,
                              char* msg, size_t msg_size) {
    FILE* f = fopen(path, "rb");
    if (f == NULL) {
        snprintf(msg, msg_size, "%s: cannot open model file (%s) (HINT: -e takes d2|d4|d6|d12|d24|d36|d48 or a .bin checkpoint)",
                 path, strerror(errno));
        return 0;
    }
    if (file_is_directory(f)) {
        snprintf(msg, msg_size, "%s: is a directory, expected a model file (HINT: -e takes d2|d4|d6|d12|d24|d36|d48 or a "
                 ".bin checkpoint)", path);
        fclose(f);
        return 0;
    }
    const long long size = file_size_of(f);
    int header[256];
    if (size < 1024 || fread(header, sizeof(int), 256, f) != 256) {
        snprintf(msg, msg_size, "%s: truncated model file: %lld bytes, shorter than its 1024-byte header", path, size);
        fclose(f);
        return 0;
    }
    fclose(f);
    if (!checkpoint_validate(header, size, path, config, msg, msg_size)) { return 0; }
    *version = header[1];
    // an --attn_scale override (validated with the flags) replaces the file's scale
    if (attn_scale_override >= 0.0f) { config->attn_scale = attn_scale_override; }
    return 1;
}

// Training state (state_%08d.bin, next to the model file of the same step; the CPU trainer writes
// what an FP32 CUDA build writes, so either can resume the other's run):
//   header 256 int32: [0] magic 20240330, [1] version 1, [2] step, [3] scheme, [4] 1 if fp32 master
//   weights follow, [5] B, [6] T, [7] grad accumulation steps, [8..9] num_parameters (lo, hi),
//   [10..11] sampling rng state (lo, hi), [12] 1 for a BF16 build, [13] steps whose update was
//   skipped (non-finite or outlier loss/norm; AdamW's bias correction counts updates, not steps: t =
//   step - skipped; 0 in files from before the skipping), [14] 1 when [15] and [28..35] hold the
//   run's schedule (0 in files from before it was recorded), [15] the run's steps (-x, resolved),
//   [16..27] the shape as a v6/7 model header's [2..13] stores it, whatever the model file's
//   version, [28..35] the optimizer: lr (float bits), warmup steps, final fraction, weight decay,
//   beta1, beta2, eps, grad clip (float bits; a resume compares them, resume_schedule_check)
//   then the train DataLoaderState (64 bytes), then AdamW m, v (fp32, file order, num_parameters
//   each), then the master weights (fp32) when [4] is 1.
#define STATE_MAGIC 20240330
#define STATE_VERSION 1

// What a run's updates depend on besides the data: a resume that changes any of it changes the
// run from the step it resumes at, so the state records it and a resume compares
// (resume_schedule_check).
typedef struct {
    int num_steps; // -x, resolved (one epoch of -i when -x is -1): the cosine decays over it
    float lr, final_frac, weight_decay, beta1, beta2, eps, grad_clip;
    int warmup;
} OptimizerSchedule;

typedef struct {
    int step, B, T, grad_accum_steps, has_master;
    int skipped; // steps before `step` whose update was skipped (step_guard_decide)
    unsigned long long rng_state;
    int has_schedule; // 0 in files written before the schedule was recorded
    OptimizerSchedule schedule;
    DataLoaderState loader;
} TrainState;

static int float_bits(float x) {
    int bits;
    memcpy(&bits, &x, sizeof(bits));
    return bits;
}
static float float_from_bits(int bits) {
    float x;
    memcpy(&x, &bits, sizeof(x));
    return x;
}

// the header of a state file for `st` (the writer then appends the loader state and the tensors)
static void state_header_make(int header[256], const GPT2Config* config, const TrainState* st, int has_master) {
    const size_t np = gpt2_num_parameters(config);
    memset(header, 0, 256 * sizeof(int));
    header[0] = STATE_MAGIC;
    header[1] = STATE_VERSION;
    header[2] = st->step;
    header[3] = config->scheme;
    header[4] = has_master;
    header[5] = st->B;
    header[6] = st->T;
    header[7] = st->grad_accum_steps;
    header[8] = (int)(uint32_t)(np & 0xFFFFFFFFu);
    header[9] = (int)(uint32_t)(np >> 32);
    header[10] = (int)(uint32_t)(st->rng_state & 0xFFFFFFFFu);
    header[11] = (int)(uint32_t)(st->rng_state >> 32);
    header[12] = PRECISION_IS_BF16;
    header[13] = st->skipped;
    header[14] = 1;
    header[15] = st->schedule.num_steps;
    // [16..27]: the model's shape (a version 6/7 model header's [2..13]), so a state only fits its model
    gpt2_config_to_fields(config, &header[16]);
    const OptimizerSchedule* o = &st->schedule;
    header[28] = float_bits(o->lr);
    header[29] = o->warmup;
    header[30] = float_bits(o->final_frac);
    header[31] = float_bits(o->weight_decay);
    header[32] = float_bits(o->beta1);
    header[33] = float_bits(o->beta2);
    header[34] = float_bits(o->eps);
    header[35] = float_bits(o->grad_clip);
}

// Reads a state file's header. Returns 1, or 0 with a one-line message.
static int state_inspect(const char* path, const GPT2Config* config, TrainState* st, char* msg, size_t msg_size) {
    FILE* f = fopen(path, "rb");
    if (f == NULL) {
        snprintf(msg, msg_size, "%s: cannot open training state (%s)", path, strerror(errno));
        return 0;
    }
    const long long size = file_size_of(f);
    int header[256];
    if (fread(header, sizeof(int), 256, f) != 256 || fread(&st->loader, sizeof(DataLoaderState), 1, f) != 1) {
        snprintf(msg, msg_size, "%s: truncated training state: shorter than its header", path);
        fclose(f);
        return 0;
    }
    fclose(f);
    if (header[0] != STATE_MAGIC || header[1] != STATE_VERSION) {
        snprintf(msg, msg_size, "%s: bad training state header (magic %d version %d), expected magic %d version %d",
                 path, header[0], header[1], STATE_MAGIC, STATE_VERSION);
        return 0;
    }
    if (header[3] != config->scheme) {
        snprintf(msg, msg_size, "%s: training state of scheme %s, but the model is scheme %s", path,
                 qkv_scheme_name(header[3]), qkv_scheme_name(config->scheme));
        return 0;
    }
    int fields[12];
    gpt2_config_to_fields(config, fields);
    if (memcmp(&header[16], fields, sizeof(fields)) != 0) {
        char desc[256];
        gpt2_config_describe(config, desc, sizeof(desc));
        snprintf(msg, msg_size, "%s: training state of another model shape than its model file (%s, scheme %s)", path, desc,
                 qkv_scheme_name(config->scheme));
        return 0;
    }
    const size_t np = (size_t)(uint32_t)header[8] | ((size_t)(uint32_t)header[9] << 32);
    if (np != gpt2_num_parameters(config)) {
        snprintf(msg, msg_size, "%s: training state for %zu parameters, but the model has %zu", path, np,
                 gpt2_num_parameters(config));
        return 0;
    }
    if (header[2] < 0 || (header[4] != 0 && header[4] != 1) || header[5] < 1 || header[6] < 1 || header[7] < 1 ||
        (header[12] != 0 && header[12] != 1) || header[13] < 0 || header[13] > header[2]) {
        snprintf(msg, msg_size, "%s: corrupt training state header (step %d, master %d, B %d, T %d, accumulation %d, bf16 %d, "
                 "skipped %d)", path, header[2], header[4], header[5], header[6], header[7], header[12], header[13]);
        return 0;
    }
    if (header[14] != 0 && header[14] != 1) {
        snprintf(msg, msg_size, "%s: corrupt training state header (schedule flag %d, expected 0 or 1)", path, header[14]);
        return 0;
    }
    st->has_schedule = header[14];
    if (st->has_schedule) {
        OptimizerSchedule* o = &st->schedule;
        o->num_steps = header[15];
        o->lr = float_from_bits(header[28]);
        o->warmup = header[29];
        o->final_frac = float_from_bits(header[30]);
        o->weight_decay = float_from_bits(header[31]);
        o->beta1 = float_from_bits(header[32]);
        o->beta2 = float_from_bits(header[33]);
        o->eps = float_from_bits(header[34]);
        o->grad_clip = float_from_bits(header[35]);
        const float floats[7] = {o->lr, o->final_frac, o->weight_decay, o->beta1, o->beta2, o->eps, o->grad_clip};
        int finite = 1;
        for (int i = 0; i < 7; i++) { finite = finite && isfinite(floats[i]); }
        if (o->num_steps < header[2] || o->warmup < 0 || !finite) {
            snprintf(msg, msg_size, "%s: corrupt training state header (at step %d of %d steps, warmup %d, lr %g, final "
                     "fraction %g, weight decay %g, betas %g %g, eps %g, clip %g)", path, header[2], o->num_steps, o->warmup,
                     (double)o->lr, (double)o->final_frac, (double)o->weight_decay, (double)o->beta1, (double)o->beta2,
                     (double)o->eps, (double)o->grad_clip);
            return 0;
        }
    }
    if (header[12] != PRECISION_IS_BF16) {
        snprintf(msg, msg_size, "%s: training state of a %s build, but this binary is a %s build (HINT: resume with the "
                 "binary that wrote it)", path, header[12] ? "bf16" : "fp32", PRECISION_NAME);
        return 0;
    }
    st->step = header[2];
    st->has_master = header[4];
    st->B = header[5];
    st->T = header[6];
    st->grad_accum_steps = header[7];
    st->skipped = header[13];
    st->rng_state = (unsigned long long)(uint32_t)header[10] | ((unsigned long long)(uint32_t)header[11] << 32);
    const long long expected = 1024 + (long long)sizeof(DataLoaderState) + (long long)np * 4 * (2 + (st->has_master ? 1 : 0));
    if (size != expected) {
        snprintf(msg, msg_size, "%s: training state is %lld bytes, expected %lld", path, size, expected);
        return 0;
    }
    return 1;
}

// ----------------------------------------------------------------------------
// the values in model and state files. One NaN or Inf weight reaches every activation within one
// forward pass: the loss is NaN from the first step, a run trains nothing, and --generate prints
// end-of-text tokens, all with exit status 0. So the loaders refuse such a file, naming the tensor
// and the first bad index, unless --allow_nonfinite 1 (for debugging); and the checkpoint writers
// check what they write, so that no run leaves such a file behind (whatever let a NaN in).

// A weight above sqrt(FLT_MAX) = 1.84e19 overflows fp32 in its first product with a value of its own
// size (a LayerNorm's variance, a matmul): as good as Inf. Trained GPT-2 weights stay below 1e3.
#define WEIGHT_ABS_MAX 1.8e19f

// what a tensor of a file holds: weights (parameters, fp32 master weights) or one of AdamW's moments
typedef enum { VALUES_WEIGHTS = 0, VALUES_MASTER = 1, VALUES_ADAM_M = 2, VALUES_ADAM_V = 3 } ValuesKind;

static const char* values_what(ValuesKind kind) {
    return kind == VALUES_ADAM_M ? "AdamW's first moment of" : kind == VALUES_ADAM_V ? "AdamW's second moment of"
         : kind == VALUES_MASTER ? "the master copy of" : "tensor";
}

// The index of the first value in v[0..n) that a tensor of `kind` cannot hold, or -1: NaN, Inf, a
// weight beyond +-WEIGHT_ABS_MAX, a negative second moment (its square root is NaN). Blocks of 1024
// with no early exit inside, so that the compiler vectorizes the test; only a bad block is searched.
static long long values_first_bad(const float* v, size_t n, ValuesKind kind) {
    const float hi = kind == VALUES_WEIGHTS || kind == VALUES_MASTER ? WEIGHT_ABS_MAX : FLT_MAX;
    const float lo = kind == VALUES_ADAM_V ? 0.0f : -hi;
    for (size_t i0 = 0; i0 < n; i0 += 1024) {
        const size_t i1 = i0 + 1024 < n ? i0 + 1024 : n;
        int bad = 0;
        for (size_t i = i0; i < i1; i++) { bad |= !((v[i] >= lo) & (v[i] <= hi)); } // a NaN fails both
        if (!bad) { continue; }
        for (size_t i = i0; i < i1; i++) {
            if (!((v[i] >= lo) & (v[i] <= hi))) { return (long long)i; }
        }
    }
    return -1;
}

// The one-line refusal for v[index] of tensor `tensor` (param_tensor_names) in `path`.
static void values_message(char* msg, size_t msg_size, const char* path, ValuesKind kind, int tensor, long long index,
                           size_t n, float value, const char* hint) {
    const char* expected = kind == VALUES_WEIGHTS || kind == VALUES_MASTER ? "a finite weight within +-1.8e19"
                         : kind == VALUES_ADAM_V ? "a finite value >= 0" : "a finite value";
    snprintf(msg, msg_size, "%s: %s %s holds %g at index %lld of %zu, expected %s (HINT: %s)", path, values_what(kind),
             param_tensor_names[tensor], (double)value, index, n, expected, hint);
}

#define VALUES_LOAD_HINT "the file is corrupt or its run diverged; --allow_nonfinite 1 loads it anyway, for debugging"

// Checks one tensor's values (fp32, n of them) before a writer writes them. Returns 1, or 0 with a
// one-line message naming the file the writer would have written.
static int values_check_tensor(const float* v, size_t n, ValuesKind kind, int tensor, const char* path, char* msg,
                               size_t msg_size) {
    const long long bad = values_first_bad(v, n, kind);
    if (bad < 0) { return 1; }
    values_message(msg, msg_size, path, kind, tensor, bad, n, v[bad],
                   "not written: the training went non-finite (lower -l, or -sl/-sg); the previous checkpoint stays");
    return 0;
}

// Reads the tensors of `config` from f's position (file order, fp32 or bf16) and checks them.
// Returns 1, or 0 with a one-line message naming path.
static int file_tensors_check(FILE* f, const char* path, const GPT2Config* config, int bf16, ValuesKind kind, char* msg,
                              size_t msg_size) {
    size_t sizes[NUM_PARAMETER_TENSORS];
    fill_param_sizes(config, sizes);
    const size_t chunk = (size_t)1 << 20;
    std::vector<float> vals(chunk);
    std::vector<uint16_t> raw(bf16 ? chunk : 0);
    for (int t = 0; t < NUM_PARAMETER_TENSORS; t++) {
        for (size_t done = 0; done < sizes[t];) {
            const size_t n = sizes[t] - done < chunk ? sizes[t] - done : chunk;
            const size_t got = bf16 ? fread(raw.data(), 2, n, f) : fread(vals.data(), 4, n, f);
            if (got != n) {
                snprintf(msg, msg_size, "%s: cannot read tensor %s (%s)", path, param_tensor_names[t],
                         ferror(f) ? strerror(errno) : "the file shrank since it was opened");
                return 0;
            }
            for (size_t i = 0; bf16 && i < n; i++) { // bf16 is the top half of an fp32: widen exactly
                const uint32_t bits = (uint32_t)raw[i] << 16;
                memcpy(&vals[i], &bits, sizeof(float));
            }
            const long long bad = values_first_bad(vals.data(), n, kind);
            if (bad >= 0) {
                values_message(msg, msg_size, path, kind, t, (long long)done + bad, sizes[t], vals[bad], VALUES_LOAD_HINT);
                return 0;
            }
            done += n;
        }
    }
    return 1;
}

// The parameters of a model file that checkpoint_inspect accepted. Returns 1, or 0 with a message.
static int checkpoint_check_values(const char* path, const GPT2Config* config, int version, char* msg, size_t msg_size) {
    FILE* f = fopen(path, "rb");
    if (f == NULL || fseeko(f, 1024, SEEK_SET) != 0) {
        snprintf(msg, msg_size, "%s: cannot reopen model file (%s)", path, strerror(errno));
        if (f != NULL) { fclose(f); }
        return 0;
    }
    const int ok = file_tensors_check(f, path, config, checkpoint_version_is_bf16(version), VALUES_WEIGHTS, msg, msg_size);
    fclose(f);
    return ok;
}

// AdamW's moments and the master weights of a state file that state_inspect accepted.
static int state_check_values(const char* path, const GPT2Config* config, const TrainState* st, char* msg, size_t msg_size) {
    FILE* f = fopen(path, "rb");
    if (f == NULL || fseeko(f, 1024 + (off_t)sizeof(DataLoaderState), SEEK_SET) != 0) {
        snprintf(msg, msg_size, "%s: cannot reopen training state (%s)", path, strerror(errno));
        if (f != NULL) { fclose(f); }
        return 0;
    }
    const int ok = file_tensors_check(f, path, config, 0, VALUES_ADAM_M, msg, msg_size) &&
                   file_tensors_check(f, path, config, 0, VALUES_ADAM_V, msg, msg_size) &&
                   (!st->has_master || file_tensors_check(f, path, config, 0, VALUES_MASTER, msg, msg_size));
    fclose(f);
    return ok;
}

#endif // DEV_TRAINER_CHECKPOINT_FILES_H
