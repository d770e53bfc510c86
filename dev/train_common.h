/*
train_common.h: the host-side code both trainers share, so that train_gpt2.cu (CUDA) and
dev/cpu/train_gpt2_cpu.cpp (CPU) take the same flags with the same meanings and read and write the
same files: the command line (TrainArgs, -h, parsing, the dN depth presets, checkpoint and resume
decisions), the checkpoint and training-state headers (dev/FORMATS.md), the learning-rate schedule,
the sampling RNG, the rule that turns logits into a sampled token and --generate's prompt and report.

Plain C++ with no GPU code. The includer defines, before including:
  PRECISION_NAME, PRECISION_IS_BF16   its parameter precision ("fp32"/0 on the CPU)
  TRAIN_COMMON_CUDA                   1 in the CUDA trainer: its own flags (-r, -w, --attention,
                                      --gelu_fusion, --bias_fusion) are accepted; the CPU trainer refuses them
and defines after it
  static int trainer_shape_check(const TrainArgs* a, char* msg, size_t msg_size);
                                      what its own kernels need of a shape beyond gpt2_config_check
*/
#ifndef TRAIN_COMMON_H
#define TRAIN_COMMON_H

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <glob.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "../attention_variants.cuh"
#include "attention_maps.h"
#include "checkpoint.h"
#include "data_parallel.h"
#include "../dataloader.h"
#include "../tokenizer.h"

#if !defined(PRECISION_NAME) || !defined(PRECISION_IS_BF16) || !defined(TRAIN_COMMON_CUDA)
#error "define PRECISION_NAME, PRECISION_IS_BF16 and TRAIN_COMMON_CUDA before including dev/train_common.h"
#endif

// ----------------------------------------------------------------------------
// small host utilities

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// --num_samples' bound: the most sequences one KV cache decodes together (both trainers' kv_cache_build)
#define GENERATE_MAX_BATCH 1024

// the sampling RNG (xorshift64*): its state is saved in the training state, so a resumed run
// samples the same text as an uninterrupted one
static unsigned int random_u32(unsigned long long* state) {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return (unsigned int)((*state * 0x2545F4914F6CDD1DULL) >> 32);
}
static float random_f32(unsigned long long* state) { return (random_u32(state) >> 8) / 16777216.0f; }

// --temperature, --top_k, --top_p: how a token is drawn from the logits, for --generate and for the
// samples printed during training (-s)
typedef struct {
    float temperature; // 0 = greedy (argmax)
    int top_k;         // 0 (or >= V) = off
    float top_p;       // 1 = off
} SamplingSettings;

// Above this --temperature is refused: a typo, not a setting (at 100 the logits of a trained
// GPT-2, spread over ~30, already give a near-uniform distribution)
#define SAMPLING_TEMPERATURE_MAX 100.0f

// the settings and the sampler's scratch, kept between tokens so that a token allocates nothing
struct Sampler {
    SamplingSettings settings;
    std::vector<double> weight; // (V) exp(logit / temperature - max)
    std::vector<int> order;     // token ids, ranked for top-k/top-p, then the kept ones by id
};

// whether `a` ranks before `b`: the larger logit first, the lower id on ties, so that top-k and top-p
// keep the same tokens in both trainers (and in dev/test/sampler_reference.py)
struct LogitRank {
    const float* logits;
    bool operator()(int a, int b) const { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); }
};

// The token a coin in [0, 1) picks from logits (V of them, finite: sample_logits_check), in this
// order, as HF's generate and nanoGPT's sample do it:
//   1. temperature: the logits are divided by it; 0 is greedy: the largest logit, the lowest id on
//      ties (the caller still draws the coin, see generate_tokens)
//   2. top-k: only the k tokens of largest logit are kept (ties: the lower id)
//   3. top-p: of those, the smallest set of the most probable whose probability, renormalized over
//      what top-k kept, adds up to p (always at least one token)
//   4. the coin picks from the kept tokens' renormalized distribution: the first kept token, by id,
//      whose cumulative probability exceeds the coin.
// Step 4 walks the kept tokens by id whatever filtered them, so a filter that keeps every token
// picks what no filter picks. Weights exp(z - max z) and every sum in double, summed in one fixed
// order (by id; top-p's running sum by rank), so both trainers pick the same token from the same
// logits and the numpy reference can repeat it exactly. Cost: one pass over the logits without
// filters (no sort); top-k an nth_element; top-p a partial sort of a prefix of the ranking that
// grows until it holds the nucleus (a full sort only when the nucleus is most of the vocabulary).
static int sample_token(Sampler* sampler, const float* logits, int V, float coin) {
    const SamplingSettings* s = &sampler->settings;
    if (s->temperature == 0.0f) {
        int best = 0;
        float best_logit = logits[0];
        for (int v = 1; v < V; v++) {
            if (logits[v] > best_logit) {
                best = v;
                best_logit = logits[v];
            }
        }
        return best;
    }
    const double temperature = (double)s->temperature;
    float max_logit = logits[0];
    for (int v = 1; v < V; v++) { max_logit = logits[v] > max_logit ? logits[v] : max_logit; } // fmaxf's NaN rule would not vectorize
    const double z_max = (double)max_logit / temperature;
    std::vector<double>& w = sampler->weight; // by id; with top-k only the kept tokens' are computed
    w.resize((size_t)V);
    const int top_k = s->top_k > 0 && s->top_k < V ? s->top_k : V;
    if (top_k == V) {
        for (int v = 0; v < V; v++) { w[(size_t)v] = exp((double)logits[v] / temperature - z_max); }
    }
    if (top_k == V && s->top_p >= 1.0f) {
        double total = 0.0;
        for (int v = 0; v < V; v++) { total += w[(size_t)v]; }
        const double target = (double)coin * total;
        double cdf = 0.0;
        for (int v = 0; v < V; v++) {
            cdf += w[(size_t)v];
            if (target < cdf) { return v; }
        }
        return V - 1; // rounding left the coin past the last bin
    }
    std::vector<int>& order = sampler->order;
    const LogitRank rank = {logits};
    int kept = V;
    if (top_k <= V / 16) {
        // one pass with a heap of the top_k best so far, the worst of them on top: most tokens are
        // turned away by one comparison (an nth_element over V ids costs several times more)
        order.clear();
        for (int v = 0; v < V; v++) {
            if ((int)order.size() < top_k) {
                order.push_back(v);
                std::push_heap(order.begin(), order.end(), rank);
            } else if (rank(v, order[0])) {
                std::pop_heap(order.begin(), order.end(), rank);
                order.back() = v;
                std::push_heap(order.begin(), order.end(), rank);
            }
        }
        kept = top_k;
    } else {
        order.resize((size_t)V);
        for (int v = 0; v < V; v++) { order[(size_t)v] = v; }
        if (top_k < V) {
            std::nth_element(order.begin(), order.begin() + top_k, order.end(), rank); // the first top_k: the largest
            kept = top_k;
        }
    }
    if (top_k < V) {
        for (int i = 0; i < kept; i++) {
            const int v = order[(size_t)i];
            w[(size_t)v] = exp((double)logits[v] / temperature - z_max);
        }
    }
    if (s->top_p < 1.0f) {
        if (kept < V) { std::sort(order.begin(), order.begin() + kept); } // by id, for the total in the fixed order
        double total = 0.0;
        for (int i = 0; i < kept; i++) { total += w[(size_t)order[(size_t)i]]; }
        const double threshold = (double)s->top_p * total;
        // rank a prefix 8x longer each round (the next ranks split off by nth_element, then sorted)
        // until the running sum reaches the threshold; all of them should rounding keep it below
        double cum = 0.0;
        int i = 0;
        for (int ranked = 0; ranked < kept && cum < threshold;) {
            const int longer = ranked > kept / 8 ? kept : std::max(64, ranked * 8);
            const int next = std::min(longer, kept);
            if (next < kept) { std::nth_element(order.begin() + ranked, order.begin() + next, order.begin() + kept, rank); }
            std::sort(order.begin() + ranked, order.begin() + next, rank);
            while (i < next && cum < threshold) { cum += w[(size_t)order[(size_t)i++]]; }
            ranked = next;
        }
        kept = i;
    }
    std::sort(order.begin(), order.begin() + kept); // step 4 walks by id
    double total = 0.0;
    for (int i = 0; i < kept; i++) { total += w[(size_t)order[(size_t)i]]; }
    const double target = (double)coin * total;
    double cdf = 0.0;
    for (int i = 0; i < kept; i++) {
        cdf += w[(size_t)order[(size_t)i]];
        if (target < cdf) { return order[(size_t)i]; }
    }
    return order[(size_t)kept - 1];
}

static void logf_line(FILE* logf, const char* line) {
    if (logf != NULL) {
        fprintf(logf, "%s\n", line);
        fflush(logf);
    }
}

static int make_dir(const char* dir) {
    struct stat st;
    if (stat(dir, &st) == 0) { return S_ISDIR(st.st_mode); }
    return mkdir(dir, 0755) == 0;
}

static int file_exists(const char* path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

// temp name + rename, so that a crash never leaves a half-written file under the real name
static FILE* open_tmp_for(const char* path, char* tmp, size_t tmp_size) { // tmp_size > strlen(path) + 4
    snprintf(tmp, tmp_size, "%s.tmp", path);
    FILE* f = fopen(tmp, "wb");
    if (f == NULL) {
        fprintf(stderr, "error: %s: cannot write (%s)\n", tmp, strerror(errno));
        exit(EXIT_FAILURE);
    }
    return f;
}
// The file's bytes reach the disk before the rename and the rename before we go on: without the
// first fsync a power loss after the rename can leave PATH empty or short (ext4 and xfs may commit
// the rename first); without the folder's fsync the new name itself may be lost, and -y 1 would
// resume an older checkpoint than the log says was written.
static void close_and_rename(FILE* f, const char* tmp, const char* path) {
    if (fflush(f) != 0 || ferror(f) || fsync(fileno(f)) != 0 || fclose(f) != 0) {
        fprintf(stderr, "error: %s: write failed (%s) (HINT: disk full?)\n", tmp, strerror(errno));
        exit(EXIT_FAILURE);
    }
    if (rename(tmp, path) != 0) {
        fprintf(stderr, "error: cannot rename %s to %s (%s)\n", tmp, path, strerror(errno));
        exit(EXIT_FAILURE);
    }
    char dir[4096];
    const char* slash = strrchr(path, '/');
    if (slash == NULL) { snprintf(dir, sizeof(dir), "."); }
    else { snprintf(dir, sizeof(dir), "%.*s", slash == path ? 1 : (int)(slash - path), path); }
    const int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0 || fsync(fd) != 0) {
        fprintf(stderr, "error: %s: cannot sync the folder after renaming %s into it (%s)\n", dir, path, strerror(errno));
        exit(EXIT_FAILURE);
    }
    close(fd);
}
static void fwrite_or_die(const void* p, size_t size, size_t n, FILE* f, const char* path) {
    if (fwrite(p, size, n, f) != n) {
        fprintf(stderr, "error: %s: write failed (%s) (HINT: disk full?)\n", path, strerror(errno));
        exit(EXIT_FAILURE);
    }
}

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

// The logits a token is sampled from: a non-finite one means the model's output is broken, and
// sampling from it would print end-of-text tokens as if all were well. Returns 1, or 0 with a message.
static int sample_logits_check(const float* logits, int V, int position, char* msg, size_t msg_size) {
    for (int v = 0; v < V; v++) {
        if (!isfinite(logits[v])) {
            snprintf(msg, msg_size, "sampling at position %d: logit %d is %g, nothing to sample from (HINT: the model holds "
                     "non-finite weights (--allow_nonfinite 1?) or its activations overflow)", position, v, (double)logits[v]);
            return 0;
        }
    }
    return 1;
}

// ----------------------------------------------------------------------------
// bad steps: the decision, after the backward pass and before AdamW, whether a step's update is
// applied (both trainers: the gradient norm first, then step_guard_decide, then the update or not)

// llm.c's window (llmc/outlier_detector.h): the last 128 steps
#define OUTLIER_WINDOW 128
// Non-finite steps in a row that stop the run. A skipped step leaves the model as it was, so only
// the data changes from one attempt to the next: one bad batch (an fp overflow on rare data) is
// skipped and the run goes on, but five batches in a row failing the same way mean the model or the
// learning rate is broken (NaN/Inf weights, a diverged run), and every further step would fail too.
#define NONFINITE_STEPS_MAX 5

// The last OUTLIER_WINDOW finite values of a series (a ring).
typedef struct {
    double values[OUTLIER_WINDOW];
    int count; // values held, up to OUTLIER_WINDOW
    int next;  // where the next value goes
} OutlierWindow;

// The z-score of x against the values already in the window: (x - mean) / std (population std),
// NAN while the window is not yet full (as llm.c: too few values to judge), 0 when all values are
// equal. Then x joins the window, dropping the oldest; a non-finite x returns NAN and is not
// added, so one NaN step cannot poison the window. Unlike llm.c, x is scored against the window
// before it joins: an outlier does not widen the spread it is measured against. Mean and variance
// are summed afresh each time (128 values): no running sums that drift.
static double outlier_window_push(OutlierWindow* w, double x) {
    if (!isfinite(x)) { return NAN; }
    double z = NAN;
    if (w->count == OUTLIER_WINDOW) {
        double mean = 0.0;
        for (int i = 0; i < OUTLIER_WINDOW; i++) { mean += w->values[i]; }
        mean /= OUTLIER_WINDOW;
        double var = 0.0;
        for (int i = 0; i < OUTLIER_WINDOW; i++) { var += (w->values[i] - mean) * (w->values[i] - mean); }
        const double sd = sqrt(var / OUTLIER_WINDOW);
        z = sd > 0.0 ? (x - mean) / sd : 0.0;
    }
    w->values[w->next] = x;
    w->next = (w->next + 1) % OUTLIER_WINDOW;
    if (w->count < OUTLIER_WINDOW) { w->count++; }
    return z;
}

typedef struct {
    OutlierWindow loss, norm;
    int nonfinite_in_a_row;
    int skipped; // steps whose update was skipped, this run and the runs it resumes (TrainState.skipped)
} StepGuard;

typedef enum { STEP_UPDATE = 0, STEP_SKIP = 1, STEP_STOP = 2 } StepAction;

// A resumed run continues the count of skipped steps; the outlier windows start empty (they are not
// in the state file), so -sl/-sg judge again from the 129th step after a resume.
static void step_guard_init(StepGuard* g, int skipped) {
    memset(g, 0, sizeof(*g));
    g->skipped = skipped;
}

// Whether step `step` (1-based, as its log line) applies its update, from its mean loss and its
// gradient norm before clipping:
//   STEP_UPDATE   apply it; AdamW's t is then step - g->skipped
//   STEP_SKIP     a non-finite loss or norm, or a z-score above -sl / -sg (> 0): no update; *line
//                 says which, for stdout and main.log
//   STEP_STOP     the NONFINITE_STEPS_MAX-th non-finite step in a row: *line is the error
// Every finite loss and norm joins its window, skipped or not (as llm.c): a lasting change of level
// becomes the new normal instead of skipping every step after it.
static StepAction step_guard_decide(StepGuard* g, float skip_loss_z, float skip_grad_z, int step, double loss, double norm,
                                    char* line, size_t line_size) {
    line[0] = '\0';
    const double zl = outlier_window_push(&g->loss, loss);
    const double zg = outlier_window_push(&g->norm, norm);
    if (!isfinite(loss) || !isfinite(norm)) {
        g->nonfinite_in_a_row++;
        g->skipped++;
        char what[128];
        if (!isfinite(loss) && !isfinite(norm)) { snprintf(what, sizeof(what), "the loss (%g) and the gradient norm (%g) are", loss, norm); }
        else if (!isfinite(loss)) { snprintf(what, sizeof(what), "the loss (%g) is", loss); }
        else { snprintf(what, sizeof(what), "the gradient norm (%g) is", norm); }
        if (g->nonfinite_in_a_row >= NONFINITE_STEPS_MAX) {
            snprintf(line, line_size, "error: step %d: %s not finite, as in each of steps %d-%d: %d steps in a row, stopping "
                     "the run (HINT: lower -l, or check the model file for NaN/Inf weights)", step, what,
                     step - g->nonfinite_in_a_row + 1, step, g->nonfinite_in_a_row);
            return STEP_STOP;
        }
        snprintf(line, line_size, "skip step %d: %s not finite: no update (%d in a row; %d in a row stop the run)", step, what,
                 g->nonfinite_in_a_row, NONFINITE_STEPS_MAX);
        return STEP_SKIP;
    }
    g->nonfinite_in_a_row = 0;
    if (skip_loss_z > 0.0f && isfinite(zl) && zl > skip_loss_z) {
        g->skipped++;
        snprintf(line, line_size, "skip step %d: loss %.6f is %.2f standard deviations above the mean of the last %d steps "
                 "(-sl %g): no update", step, loss, zl, OUTLIER_WINDOW, (double)skip_loss_z);
        return STEP_SKIP;
    }
    if (skip_grad_z > 0.0f && isfinite(zg) && zg > skip_grad_z) {
        g->skipped++;
        snprintf(line, line_size, "skip step %d: gradient norm %.4f is %.2f standard deviations above the mean of the last %d "
                 "steps (-sg %g): no update", step, norm, zg, OUTLIER_WINDOW, (double)skip_grad_z);
        return STEP_SKIP;
    }
    return STEP_UPDATE;
}

// after a step's own line: the guard's line when it did not let the step update, on stdout (stderr
// when it stops the run) and in main.log
static void step_guard_report(StepAction action, const char* line, FILE* logf) {
    if (action == STEP_UPDATE) { return; }
    fprintf(action == STEP_STOP ? stderr : stdout, "%s\n", line);
    fflush(stdout);
    logf_line(logf, line);
}

// After the last step (not after a stop): a run whose last steps were all non-finite (fewer than
// NONFINITE_STEPS_MAX, or it would have stopped) applied no update at its end, and exit status 0
// would call it a success. Returns the exit status: 0, or 1 after the error line (stderr, main.log).
static int step_guard_finish(const StepGuard* g, int num_steps, FILE* logf) {
    if (g->nonfinite_in_a_row == 0) { return 0; }
    char line[512];
    snprintf(line, sizeof(line), "error: the run ended on %d non-finite step%s in a row (steps %d-%d): no update was "
             "applied for %s (HINT: lower -l, or check the model file for NaN/Inf weights)", g->nonfinite_in_a_row,
             g->nonfinite_in_a_row > 1 ? "s" : "", num_steps - g->nonfinite_in_a_row + 1, num_steps,
             g->nonfinite_in_a_row > 1 ? "them" : "it");
    fprintf(stderr, "%s\n", line);
    logf_line(logf, line);
    return 1;
}

// ----------------------------------------------------------------------------
// SIGINT and SIGTERM during training: the handler only records the signal; the loop sees it at
// the top of the next step, writes a checkpoint there and returns 128 + the signal. The handler
// puts the default action back, so a second signal kills at once (a stuck step can still be
// interrupted). SA_RESTART: a checkpoint being written when the signal comes is not cut short by
// EINTR. A signal ignored when the run starts stays ignored (nohup, a script's background job,
// which the shell starts with SIGINT ignored so that Ctrl-C at the terminal spares it).

static volatile sig_atomic_t g_train_stop_signal = 0;
static const int kTrainStopSignals[2] = {SIGINT, SIGTERM};
static int g_train_stop_caught[2] = {0, 0}; // which of them train_signals_install caught

static void train_stop_handler(int sig) {
    g_train_stop_signal = sig;
    struct sigaction dfl;
    memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    for (int i = 0; i < 2; i++) {
        if (g_train_stop_caught[i]) { sigaction(kTrainStopSignals[i], &dfl, NULL); }
    }
}

static void train_signals_install(void) {
    g_train_stop_signal = 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = train_stop_handler;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    for (int i = 0; i < 2; i++) {
        struct sigaction old;
        g_train_stop_caught[i] = sigaction(kTrainStopSignals[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN &&
                                 sigaction(kTrainStopSignals[i], &sa, NULL) == 0;
    }
}

static const char* train_signal_name(int sig) { return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "a signal"; }

// ----------------------------------------------------------------------------
// command line: parsed and checked before the GPU is touched

typedef struct {
    const char* train_pattern;
    const char* val_pattern;
    const char* output_dir;
    const char* model_arg;
    const char* tokenizer_path;
    int B, T;
    long long total_batch;
    int max_steps;
    float lr;
    int warmup;
    float final_frac;
    float weight_decay;
    int val_every, val_max_steps, sample_every, gen_T, checkpoint_every, resume, recompute, master_weights;
    int attn_unfused; // --attention unfused: the cuBLASLt path even where a flash kernel exists
    int gelu_fusion;  // --gelu_fusion: GELU in the cuBLASLt epilogues
    int bias_fusion;  // --bias_fusion: bias gradients in the weight gradients' cuBLASLt epilogue
    int lt_tune;      // --lt_tune: time cuBLASLt's candidates for each matmul and keep the fastest (-o's lt_algos.bin)
    // model shape flags; -1 = not given
    int n_kv_head, mlp_hidden, bias, tied, n_layer, n_embd, n_head;
    float attn_scale; // < 0 = not given
    unsigned long long seed;
    float beta1, beta2, eps, grad_clip;
    int generate;       // --generate N: generate N tokens and exit, no training
    const char* prompt; // --prompt, NULL = one end-of-text token (the inspection run: ATTENTION_PROBE_TEXT)
    const char* prompt_tokens;  // --prompt_tokens FILE: the inspection run's prompt as token ids, used as given
    const char* dump_attention; // --dump_attention FILE: the inspection run writes the attention maps there
    const char* attention_csv;  // --attention_csv FILE: the inspection run writes the head diagnostics there
    SamplingSettings sampling;  // --temperature, --top_k, --top_p
    int num_samples;            // --num_samples N: N samples from one prompt (--generate)
    const char* sampling_flag;  // the first of --temperature/--top_k/--top_p given, as typed; NULL = none
    int num_samples_given;      // --num_samples was on the command line
    float skip_loss_z, skip_grad_z; // -sl, -sg: skip the update of a step this many standard deviations above; 0 = off
    int overwrite;                  // --overwrite 1: a fresh run may replace the run in -o
    int profile_steps;              // --profile N: time N steps after a warm-up step per sublayer (dev/profile.h)
    const char* profile_csv;        // --profile_csv FILE: that table as CSV too, NULL = not written
    int check_args;                 // --check_args 1: every check a run makes before its first step, then exit
    int allow_nonfinite;            // --allow_nonfinite 1: load NaN/Inf weights and moments (debugging)
    int reschedule;                 // --reschedule 1: a resume may change -x, -l, -u, -q, -c (resume_schedule_check)
    int model_given;                // -e was on the command line (not the default d12)
    // data parallelism (dev/data_parallel.h; llm.c's flags)
    int zero_stage;                 // -z 0|1: 1 shards AdamW's state over the processes (ZeRO-1)
    int processes_given;            // -pn N: the processes of the run (checked against MPI's, or the fs rendezvous's)
    int rank_given;                 // -pr R: this process's rank (the fs rendezvous); -1 = not given
    const char* init_method;        // -pi mpi|fs: how the processes meet (default mpi)
    const char* rendezvous_dir;     // -pf DIR: the fs rendezvous's shared folder
    float collective_timeout;       // --collective_timeout S: the longest a collective waits for the others
    int world, rank;                // the processes of the run and this one's rank (set by the trainer)
    // resolved by train_args_resolve
    GPT2Config config;
    int from_file;
    int file_version;
    char model_path[4096];
    int resuming;
    char state_path[4096];
    TrainState state;
    int grad_accum_steps;
    // for tests: per-step train losses (index = step), NULL when not recorded
    float* loss_record;
    int loss_record_size;
    unsigned long long final_rng; // the sampling RNG state at the end of train_run
} TrainArgs;

static void train_args_defaults(TrainArgs* a) {
    memset(a, 0, sizeof(*a));
    a->train_pattern = "dev/data/austen/austen_train_*.bin";
    a->val_pattern = "dev/data/austen/austen_val_*.bin";
    a->output_dir = NULL;
    a->model_arg = "d12";
    a->tokenizer_path = "dev/data/gpt2/gpt2_tokenizer.bin";
    a->B = 4;
    a->T = 1024;
    a->total_batch = -1;
    a->max_steps = -1;
    a->lr = 3e-4f;
    a->warmup = 0;
    a->final_frac = 1.0f;
    a->weight_decay = 0.0f;
    a->val_every = 20;
    a->val_max_steps = 20;
    a->sample_every = 20;
    a->gen_T = -1; // 64, or T when T < 64
    a->checkpoint_every = 0;
    a->resume = 0;
    a->recompute = 0;
    a->master_weights = 1;
    a->attn_unfused = 0;
    a->gelu_fusion = 1;
    a->lt_tune = 1;
    a->bias_fusion = 1;
    a->n_kv_head = a->mlp_hidden = a->bias = a->tied = a->n_layer = a->n_embd = a->n_head = -1;
    a->attn_scale = -1.0f;
    a->seed = 1337;
    a->beta1 = 0.9f;
    a->beta2 = 0.95f;
    a->eps = 1e-8f;
    a->grad_clip = 1.0f;
    a->sampling.temperature = 1.0f;
    a->sampling.top_k = 0;
    a->sampling.top_p = 1.0f;
    a->num_samples = 1;
    a->zero_stage = 0;
    a->processes_given = 0;
    a->rank_given = -1;
    a->init_method = "mpi";
    a->rendezvous_dir = NULL;
    a->collective_timeout = 600.0f;
    a->world = 1;
    a->rank = 0;
}

// Steps 0..num_steps-1: linear warmup lr/warmup, 2 lr/warmup, ..., lr at step warmup-1; then
// cosine from lr at step `warmup` to exactly lr * final_frac at the last step num_steps-1 (the last
// update really uses the final fraction; llm.c's (num_steps - warmup) denominator never reaches it).
static float learning_rate(const TrainArgs* a, int step, int num_steps) {
    if (step < a->warmup) { return a->lr * (float)(step + 1) / (float)a->warmup; }
    const float min_lr = a->lr * a->final_frac;
    const int decay_steps = num_steps - 1 - a->warmup;
    if (decay_steps <= 0) { return a->lr; } // no step after the warmup but the last: nothing to decay over
    float ratio = (float)(step - a->warmup) / (float)decay_steps;
    if (ratio > 1.0f) { ratio = 1.0f; }
    const float coeff = 0.5f * (1.0f + cosf((float)M_PI * ratio));
    return min_lr + coeff * (a->lr - min_lr);
}

static void print_usage(const char* prog) {
    printf("Usage: %s [options]\n", prog);
    printf("GPT-2 trainer, Q/K/V scheme '%s' (compile time), %s precision.\n\n", qkv_scheme_name(kQKVScheme), PRECISION_NAME);
    printf("Data and output:\n");
    printf("  -i <pattern>  train token shards (default dev/data/austen/austen_train_*.bin)\n");
    printf("  -j <pattern>  validation token shards (default dev/data/austen/austen_val_*.bin)\n");
    printf("  -o <dir>      output folder: main.log and checkpoints (default none: no log file, no checkpoints)\n");
    printf("  -e <model>    d2|d4|d6|d12|d24|d36|d48: new model of that depth, random init; or a checkpoint file\n");
    printf("                (llm.c version 3/5 for the standard scheme, or versions 6/7) (default d12)\n");
    printf("Batch and schedule:\n");
    printf("  -b <int>      micro-batch size B (default 4)\n");
    printf("  -t <int>      sequence length T, <= the model's max_seq_len (default 1024)\n");
    printf("  -d <int>      total batch size in tokens, a multiple of B*T (default -1: B*T, no accumulation)\n");
    printf("  -x <int>      number of steps (default -1: one epoch of the train data)\n");
    printf("  -l <float>    peak learning rate (default 3e-4)\n");
    printf("  -u <int>      linear warmup steps (default 0)\n");
    printf("  -q <float>    final learning rate as a fraction of the peak, cosine decay (default 1.0)\n");
    printf("  -c <float>    AdamW weight decay of the 2-D weights (default 0.0)\n");
    printf("Evaluation and checkpoints:\n");
    printf("  -v <int>      validation loss every N steps, 0 = never (default 20)\n");
    printf("  -m <int>      validation batches, -1 = the whole validation set (default 20)\n");
    printf("  -s <int>      sample text every N steps, 0 = never (default 20); --temperature, --top_k, --top_p apply\n");
    printf("  -g <int>      tokens to sample, <= T (default 64, or T when shorter)\n");
    printf("  -n <int>      checkpoint every N steps into -o, 0 = never (default 0)\n");
    printf("  -y <0|1>      resume from the latest checkpoint in -o; an error when there is none (default 0).\n");
    printf("                -b, -t and -d must be the checkpoint's; so must -x, -l, -u, -q and -c, unless\n");
    printf("  --reschedule <0|1>  1: a resume takes this run's -x, -l, -u, -q and -c, and prints what changes\n");
    printf("                from which step (default 0: a difference is refused, naming the flags)\n");
    printf("  --overwrite <0|1>  1: a fresh run (no -y 1) may use an -o holding another run: its main.log\n");
    printf("                and checkpoints are removed first; 0 refuses such an -o (default 0)\n");
    printf("Profiling (dev/profile.h):\n");
    printf("  --profile <int>      after the first step (a warm-up), time the next N steps per sublayer and\n");
    printf("                       print a table: ms, %% of the step, FLOPs and bytes, against the H100's roofline\n");
    printf("                       and the cost model; the run needs at least N + 1 steps (default 0 = off)\n");
    printf("  --profile_csv <file> that table as CSV too (needs --profile)\n");
    printf("Bad steps (a skipped step changes neither the weights nor AdamW's state or step count):\n");
    printf("  -sl <float>   skip the update of a step whose loss is more than this many standard deviations\n");
    printf("                above the mean of the last %d steps, 0 = off (default 0; llm.c's -sl)\n", OUTLIER_WINDOW);
    printf("  -sg <float>   the same for the gradient norm (default 0 = off; llm.c's -sg)\n");
    printf("                A non-finite loss or gradient norm always skips the update; %d such steps in a row\n", NONFINITE_STEPS_MAX);
    printf("                stop the run with an error. SIGINT/SIGTERM: the current step ends, a checkpoint is\n");
    printf("                written into -o, and the exit status is 128 + the signal; a second signal kills.\n");
#if TRAIN_COMMON_CUDA
    printf("Memory:\n");
    printf("  -r <0|1|2>    recompute in the backward pass to save activation memory: 1 the GELU,\n");
    printf("                2 also both LayerNorms of each layer (default 0; build/params memory shows each)\n");
    printf("  -w <0|1>      keep fp32 master weights for AdamW in BF16 builds (default 1)\n");
    printf("Attention:\n");
    printf("  --attention <fused|unfused>  fused: flash kernels (BF16 builds, head size 64 or 128; other\n");
    printf("                       shapes use the unfused path); unfused: scores in memory, cuBLASLt\n");
    printf("                       matmuls, for any head size (default fused)\n");
    printf("  --gelu_fusion <0|1>  1: the MLP's GELU and its derivative in the cuBLASLt matmul epilogues;\n");
    printf("                       0: separate kernels (default 1)\n");
    printf("  --bias_fusion <0|1>  1: each bias gradient summed by its weight gradient's cuBLASLt matmul (the\n");
    printf("                       BGRADB epilogue); 0: a separate column-sum kernel (default 1)\n");
    printf("Matmuls:\n");
    printf("  --lt_tune <0|1>      1: before the first step, time cuBLASLt's best algorithms (up to 16) for each\n");
    printf("                       matmul and keep the fastest whose result matches its first choice; the\n");
    printf("                       choices go to -o's lt_algos.bin, which -y 1 reads, so that a resumed run\n");
    printf("                       continues bit for bit (another GPU or cuBLASLt re-tunes, and says so);\n");
    printf("                       0: cuBLASLt's first choice everywhere, untimed (default 1)\n");
#endif
    printf("More than one process (dev/data_parallel.h; the processes train one run with the global batch -d):\n");
#if TRAIN_COMMON_CUDA
#ifdef DP_NCCL
    printf("  -pi <fs>      how the processes meet: fs, a folder they share (-pf), over NCCL; one process per GPU\n");
    printf("                (default: none, one process alone; -pi fs -pn 1 takes the NCCL path alone)\n");
    printf("  -pf <dir>     the folder of -pi fs, where rank 0 leaves NCCL's id for the others\n");
    printf("  -pn <int>     the number of processes (default: the launcher's, mpirun or srun, else 1)\n");
    printf("  -pr <int>     this process's rank, 0 to -pn - 1 (default: the launcher's); its GPU is its rank\n");
    printf("                on its machine (the launcher's local rank, else -pr) modulo the GPUs it sees\n");
#else
    printf("  -pn <int>     the number of processes: 1 (this build has no NCCL, which more than one needs; make\n");
    printf("                builds with it where it finds it; -pr above 0, -pi fs and -pf are refused too)\n");
#endif
#else
    printf("  -pn <int>     the number of processes: checked against mpirun's -np (build/train_gpt2_cpu_mpi_<scheme>)\n");
    printf("  -pr <int>     this process's rank: checked against MPI's\n");
    printf("  -pi <mpi>     how the processes meet: mpi, the CPU trainer's only way (default mpi)\n");
#endif
    printf("  -z <0|1>      ZeRO stage: 1 shards AdamW's state (m, v%s) over the processes, 0 keeps it whole\n",
           TRAIN_COMMON_CUDA ? ", master weights" : "");
    printf("                on each (default 0)\n");
    printf("  --collective_timeout <float>  seconds a collective waits for the other processes before the job\n");
    printf("                ends with an error (default 600)\n");
    printf("Model shape (for -e dN; a checkpoint carries its own shape):\n");
    printf("  --n_kv_head <int>    key/value heads, divides the query heads (GQA; 1 = MQA) (default n_head)\n");
    printf("  --mlp_hidden <int>   MLP hidden size (default 4 * n_embd)\n");
    printf("  --bias <0|1>         GPT-2 biases in linears and LayerNorms (default 1)\n");
    printf("  --tied <0|1>         LM head tied to the token embedding (default 1)\n");
    printf("  --n_layer, --n_embd, --n_head <int>   override the depth preset's values\n");
    printf("  --attn_scale <float> attention scale, 0 = the scheme's default (1/sqrt(hd), halved for\n");
    printf("                       q_identity and q_residual); also overrides a checkpoint's\n");
    printf("  --seed <int>         seed of the init, the data order and sampling (default 1337)\n");
    printf("Checks:\n");
    printf("  --check_args <0|1>   1: make every check a run makes before its first step (flags, model file\n");
    printf("                       and its values, training state, data headers, -o), print one line and exit;\n");
    printf("                       nothing is trained, created or written, no GPU is used (default 0)\n");
    printf("  --allow_nonfinite <0|1>  1: load a model or training state holding NaN, Inf or weights above\n");
    printf("                       %.1e, for debugging; they are refused by default (default 0). A\n", (double)WEIGHT_ABS_MAX);
    printf("                       checkpoint is never written from non-finite weights or moments\n");
    printf("  -h                   this help\n");
    printf("Generation (instead of training; no data needed):\n");
    printf("  --generate <int>     load or build the model of -e, generate N tokens after --prompt with the\n");
    printf("                       KV cache, print them, tokens/s and the cache's bytes, and exit (default 0: train)\n");
    printf("  --prompt <text>      the prompt, GPT-2 tokens from dev/data/gpt2/encoder.json + vocab.bpe\n");
    printf("                       (default: one end-of-text token)\n");
    printf("  --num_samples <int>  N samples from the one prompt (1..%d), each printed between --- lines,\n",
           GENERATE_MAX_BATCH);
    printf("                       decoded together: one forward pass of N tokens per step; sample i draws\n");
    printf("                       from --seed + i's generator, the text --seed + i alone gives (default 1)\n");
    printf("Looking inside attention (instead of training; no data needed; dev/ATTENTION_MAPS.md):\n");
    printf("  --dump_attention <file>  load or build the model of -e, run it on --prompt (default: a fixed\n");
    printf("                       probe sentence) and on an induction probe (%d random tokens, repeated),\n", INDUCTION_REPEAT);
    printf("                       write every layer's and head's attention probabilities and pre-mask scores\n");
    printf("                       (dev/FORMATS.md), print each head's diagnostics, and exit\n");
    printf("  --attention_csv <file>   the same run; the head diagnostics (entropy, distance, sink,\n");
    printf("                       prev_token, induction, asymmetry) as CSV there. Either flag, or both\n");
    printf("  --prompt_tokens <file>   the prompt as token ids (whitespace or commas between them), used as\n");
    printf("                       given: no end-of-text token is put before them (instead of --prompt)\n");
    printf("Sampling (--generate, and the samples of -s; applied in this order, as HF and nanoGPT do):\n");
    printf("  --temperature <float> the logits are divided by it; 0 = greedy: the largest logit, the lowest\n");
    printf("                       token id on ties; at most %g (default 1.0)\n", (double)SAMPLING_TEMPERATURE_MAX);
    printf("  --top_k <int>        keep the k tokens of largest logit, ties to the lower id; 0 = off, at most\n");
    printf("                       the model's vocabulary (default 0)\n");
    printf("  --top_p <float>      then keep the smallest set of the most probable tokens whose probability\n");
    printf("                       reaches p (at least one), in (0, 1]; 1 = off (default 1)\n");
    printf("                       --top-k and --top-p are the same flags. One random number per sampled token\n");
    printf("                       (--seed), whatever the settings: greedy draws it too, so a run's random\n");
    printf("                       stream (saved in its training states) does not depend on them. Refused on\n");
    printf("                       a run that samples nothing (-s 0 and no --generate)\n");
#if !TRAIN_COMMON_CUDA
    printf("The CUDA trainer's -r, -w, --attention, --gelu_fusion, --bias_fusion and --lt_tune do not apply\n");
    printf("here and are refused.\n");
#endif
}

static int parse_ll(const char* flag, const char* s, long long lo, long long hi, long long* out, char* msg, size_t msg_size) {
    char* end = NULL;
    errno = 0;
    const long long v = strtoll(s, &end, 10);
    if (s[0] == '\0' || end == NULL || *end != '\0' || errno != 0) {
        snprintf(msg, msg_size, "%s %s: expected an integer (HINT: run with -h for usage)", flag, s);
        return 0;
    }
    if (v < lo || v > hi) {
        snprintf(msg, msg_size, "%s %s: expected an integer in [%lld, %lld] (HINT: run with -h for usage)", flag, s, lo, hi);
        return 0;
    }
    *out = v;
    return 1;
}

static int parse_f(const char* flag, const char* s, float lo, float hi, float* out, char* msg, size_t msg_size) {
    char* end = NULL;
    errno = 0;
    const double v = strtod(s, &end);
    if (s[0] == '\0' || end == NULL || *end != '\0' || errno != 0 || !isfinite(v)) {
        snprintf(msg, msg_size, "%s %s: expected a finite number (HINT: run with -h for usage)", flag, s);
        return 0;
    }
    if (v < lo || v > hi) {
        snprintf(msg, msg_size, "%s %s: expected a number in [%g, %g] (HINT: run with -h for usage)", flag, s, (double)lo, (double)hi);
        return 0;
    }
    *out = (float)v;
    return 1;
}

// Returns 1 when parsed, 2 for -h, 0 with a one-line message for a bad flag or value.
static int train_args_parse(TrainArgs* a, int argc, char** argv, char* msg, size_t msg_size) {
    const long long IMAX = 2147483647LL;
    for (int i = 1; i < argc; i++) {
        const char* arg = argv[i];
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) { return 2; }
        char flag[64];
        const char* val = NULL;
        if (strncmp(arg, "--", 2) == 0) {
            const char* eq = strchr(arg, '=');
            const size_t len = eq != NULL ? (size_t)(eq - arg) : strlen(arg);
            if (len >= sizeof(flag)) {
                snprintf(msg, msg_size, "unknown flag %.60s... (HINT: run with -h for usage)", arg);
                return 0;
            }
            memcpy(flag, arg, len);
            flag[len] = '\0';
            if (eq != NULL) { val = eq + 1; }
        } else if ((arg[0] == '-' && arg[1] != '\0' && arg[2] == '\0') || strcmp(arg, "-sl") == 0 || strcmp(arg, "-sg") == 0 ||
                   strcmp(arg, "-pn") == 0 || strcmp(arg, "-pr") == 0 || strcmp(arg, "-pi") == 0 || strcmp(arg, "-pf") == 0) {
            snprintf(flag, sizeof(flag), "%s", arg);
        } else {
            snprintf(msg, msg_size, "unexpected argument '%s': flags are -<letter> <value> or --<name> <value> "
                     "(HINT: run with -h for usage)", arg);
            return 0;
        }
        static const char* const known[] = {"-i", "-j", "-o", "-e", "-b", "-t", "-d", "-x", "-l", "-u", "-q", "-c",
                                            "-v", "-m", "-s", "-g", "-n", "-y", "-r", "-w", "--n_kv_head",
                                            "--mlp_hidden", "--bias", "--tied", "--attn_scale", "--seed",
                                            "--n_layer", "--n_embd", "--n_head", "--gelu_fusion", "--bias_fusion", "--attention", "--lt_tune",
                                            "--generate", "--prompt", "--prompt_tokens", "--dump_attention", "--attention_csv",
                                            "-sl", "-sg", "--overwrite",
                                            "--temperature", "--top_k", "--top-k", "--top_p", "--top-p", "--num_samples",
                                            "--profile", "--profile_csv", "--check_args", "--allow_nonfinite", "--reschedule",
                                            "-z", "-pn", "-pr", "-pi", "-pf", "--collective_timeout"};
        static const char* const cuda_only[] = {"-r", "-w", "--gelu_fusion", "--bias_fusion", "--attention", "--lt_tune"};
        int is_known = 0, is_cuda_only = 0;
        for (size_t k = 0; k < sizeof(known) / sizeof(known[0]); k++) { is_known |= strcmp(flag, known[k]) == 0; }
        for (size_t k = 0; k < sizeof(cuda_only) / sizeof(cuda_only[0]); k++) { is_cuda_only |= strcmp(flag, cuda_only[k]) == 0; }
        if (strcmp(flag, "--flash") == 0) { // retired, and the one a script of the days before may still pass
            snprintf(msg, msg_size, "--flash is no longer a flag: the trainer holds one flash kernel per direction, the "
                     "fastest measured (HINT: drop it; dev/cuda/attention_forward.cu and attention_backward.cu hold "
                     "the other versions)");
            return 0;
        }
        if (!is_known) {
            snprintf(msg, msg_size, "unknown flag %s (HINT: run with -h for usage)", flag);
            return 0;
        }
        if (is_cuda_only && !TRAIN_COMMON_CUDA) {
            snprintf(msg, msg_size, "%s is a flag of the CUDA trainer (GPU memory and kernel choices); the CPU trainer "
                     "has no such choice (HINT: drop it)", flag);
            return 0;
        }
        if (val == NULL) {
            if (i + 1 >= argc) {
                snprintf(msg, msg_size, "flag %s needs a value (HINT: run with -h for usage)", flag);
                return 0;
            }
            val = argv[++i];
        }
        long long v = 0;
        int ok = 1;
        if (strcmp(flag, "-i") == 0) { a->train_pattern = val; }
        else if (strcmp(flag, "-j") == 0) { a->val_pattern = val; }
        else if (strcmp(flag, "-o") == 0) { a->output_dir = val; }
        else if (strcmp(flag, "-e") == 0) { a->model_arg = val; a->model_given = 1; }
        else if (strcmp(flag, "-b") == 0) { ok = parse_ll(flag, val, 1, 1 << 20, &v, msg, msg_size); a->B = (int)v; }
        else if (strcmp(flag, "-t") == 0) { ok = parse_ll(flag, val, 1, 1 << 20, &v, msg, msg_size); a->T = (int)v; }
        else if (strcmp(flag, "-d") == 0) {
            ok = parse_ll(flag, val, -1, 1LL << 40, &v, msg, msg_size);
            if (ok && v == 0) { snprintf(msg, msg_size, "-d 0: expected -1 (B*T) or a positive number of tokens"); ok = 0; }
            a->total_batch = v;
        }
        else if (strcmp(flag, "-x") == 0) { ok = parse_ll(flag, val, -1, IMAX - 1, &v, msg, msg_size); a->max_steps = (int)v; }
        else if (strcmp(flag, "-l") == 0) { ok = parse_f(flag, val, 0.0f, 1e3f, &a->lr, msg, msg_size); }
        else if (strcmp(flag, "-u") == 0) { ok = parse_ll(flag, val, 0, IMAX, &v, msg, msg_size); a->warmup = (int)v; }
        else if (strcmp(flag, "-q") == 0) { ok = parse_f(flag, val, 0.0f, 1.0f, &a->final_frac, msg, msg_size); }
        else if (strcmp(flag, "-c") == 0) { ok = parse_f(flag, val, 0.0f, 1e3f, &a->weight_decay, msg, msg_size); }
        else if (strcmp(flag, "-v") == 0) { ok = parse_ll(flag, val, 0, IMAX, &v, msg, msg_size); a->val_every = (int)v; }
        else if (strcmp(flag, "-m") == 0) {
            ok = parse_ll(flag, val, -1, IMAX, &v, msg, msg_size);
            if (ok && v == 0) { snprintf(msg, msg_size, "-m 0: expected -1 (all) or a positive number of batches"); ok = 0; }
            a->val_max_steps = (int)v;
        }
        else if (strcmp(flag, "-s") == 0) { ok = parse_ll(flag, val, 0, IMAX, &v, msg, msg_size); a->sample_every = (int)v; }
        else if (strcmp(flag, "-g") == 0) { ok = parse_ll(flag, val, 1, 1 << 20, &v, msg, msg_size); a->gen_T = (int)v; }
        else if (strcmp(flag, "-n") == 0) { ok = parse_ll(flag, val, 0, IMAX, &v, msg, msg_size); a->checkpoint_every = (int)v; }
        else if (strcmp(flag, "-y") == 0) { ok = parse_ll(flag, val, 0, 1, &v, msg, msg_size); a->resume = (int)v; }
        else if (strcmp(flag, "-r") == 0) { ok = parse_ll(flag, val, 0, 2, &v, msg, msg_size); a->recompute = (int)v; }
        else if (strcmp(flag, "--gelu_fusion") == 0) { ok = parse_ll(flag, val, 0, 1, &v, msg, msg_size); a->gelu_fusion = (int)v; }
        else if (strcmp(flag, "--lt_tune") == 0) { ok = parse_ll(flag, val, 0, 1, &v, msg, msg_size); a->lt_tune = (int)v; }
        else if (strcmp(flag, "--bias_fusion") == 0) { ok = parse_ll(flag, val, 0, 1, &v, msg, msg_size); a->bias_fusion = (int)v; }
        else if (strcmp(flag, "-w") == 0) { ok = parse_ll(flag, val, 0, 1, &v, msg, msg_size); a->master_weights = (int)v; }
        else if (strcmp(flag, "--n_kv_head") == 0) { ok = parse_ll(flag, val, 1, 1 << 16, &v, msg, msg_size); a->n_kv_head = (int)v; }
        else if (strcmp(flag, "--mlp_hidden") == 0) { ok = parse_ll(flag, val, 1, 1 << 20, &v, msg, msg_size); a->mlp_hidden = (int)v; }
        else if (strcmp(flag, "--bias") == 0) { ok = parse_ll(flag, val, 0, 1, &v, msg, msg_size); a->bias = (int)v; }
        else if (strcmp(flag, "--tied") == 0) { ok = parse_ll(flag, val, 0, 1, &v, msg, msg_size); a->tied = (int)v; }
        else if (strcmp(flag, "--n_layer") == 0) { ok = parse_ll(flag, val, 1, 1 << 12, &v, msg, msg_size); a->n_layer = (int)v; }
        else if (strcmp(flag, "--n_embd") == 0) { ok = parse_ll(flag, val, 1, 1 << 16, &v, msg, msg_size); a->n_embd = (int)v; }
        else if (strcmp(flag, "--n_head") == 0) { ok = parse_ll(flag, val, 1, 1 << 12, &v, msg, msg_size); a->n_head = (int)v; }
        else if (strcmp(flag, "--attn_scale") == 0) { ok = parse_f(flag, val, 0.0f, 1e6f, &a->attn_scale, msg, msg_size); }
        else if (strcmp(flag, "--attention") == 0) {
            if (strcmp(val, "fused") == 0) { a->attn_unfused = 0; }
            else if (strcmp(val, "unfused") == 0) { a->attn_unfused = 1; }
            else { snprintf(msg, msg_size, "--attention %s: expected fused or unfused (HINT: run with -h for usage)", val); ok = 0; }
        }
        else if (strcmp(flag, "--generate") == 0) { ok = parse_ll(flag, val, 0, 1 << 20, &v, msg, msg_size); a->generate = (int)v; }
        else if (strcmp(flag, "--prompt") == 0) { a->prompt = val; }
        else if (strcmp(flag, "--prompt_tokens") == 0) { a->prompt_tokens = val; }
        else if (strcmp(flag, "--dump_attention") == 0) { a->dump_attention = val; }
        else if (strcmp(flag, "--attention_csv") == 0) { a->attention_csv = val; }
        else if (strcmp(flag, "--temperature") == 0) {
            ok = parse_f(flag, val, 0.0f, SAMPLING_TEMPERATURE_MAX, &a->sampling.temperature, msg, msg_size);
            if (!ok) {
                snprintf(msg, msg_size, "%s %s: expected a number in [0, %g], 0 = greedy (HINT: run with -h for usage)", flag,
                         val, (double)SAMPLING_TEMPERATURE_MAX);
            }
            if (a->sampling_flag == NULL) { a->sampling_flag = "--temperature"; }
        }
        else if (strcmp(flag, "--top_k") == 0 || strcmp(flag, "--top-k") == 0) { // the vocabulary bound: train_args_resolve
            ok = parse_ll(flag, val, 0, 1 << 30, &v, msg, msg_size);
            a->sampling.top_k = (int)v;
            if (a->sampling_flag == NULL) { a->sampling_flag = "--top_k"; }
        }
        else if (strcmp(flag, "--top_p") == 0 || strcmp(flag, "--top-p") == 0) {
            ok = parse_f(flag, val, 0.0f, 1.0f, &a->sampling.top_p, msg, msg_size) && a->sampling.top_p > 0.0f;
            if (!ok) { snprintf(msg, msg_size, "%s %s: expected a number in (0, 1], 1 = off (HINT: run with -h for usage)", flag, val); }
            if (a->sampling_flag == NULL) { a->sampling_flag = "--top_p"; }
        }
        else if (strcmp(flag, "--num_samples") == 0) {
            ok = parse_ll(flag, val, 1, GENERATE_MAX_BATCH, &v, msg, msg_size);
            a->num_samples = (int)v;
            a->num_samples_given = 1;
        }
        else if (strcmp(flag, "-sl") == 0) { ok = parse_f(flag, val, 0.0f, 1e6f, &a->skip_loss_z, msg, msg_size); }
        else if (strcmp(flag, "-sg") == 0) { ok = parse_f(flag, val, 0.0f, 1e6f, &a->skip_grad_z, msg, msg_size); }
        else if (strcmp(flag, "--overwrite") == 0) { ok = parse_ll(flag, val, 0, 1, &v, msg, msg_size); a->overwrite = (int)v; }
        else if (strcmp(flag, "--profile") == 0) { ok = parse_ll(flag, val, 0, 1 << 20, &v, msg, msg_size); a->profile_steps = (int)v; }
        else if (strcmp(flag, "--profile_csv") == 0) {
            if (val[0] == '\0') { snprintf(msg, msg_size, "--profile_csv: expected a file name"); ok = 0; }
            a->profile_csv = val;
        }
        else if (strcmp(flag, "--check_args") == 0) { ok = parse_ll(flag, val, 0, 1, &v, msg, msg_size); a->check_args = (int)v; }
        else if (strcmp(flag, "--allow_nonfinite") == 0) { ok = parse_ll(flag, val, 0, 1, &v, msg, msg_size); a->allow_nonfinite = (int)v; }
        else if (strcmp(flag, "--reschedule") == 0) { ok = parse_ll(flag, val, 0, 1, &v, msg, msg_size); a->reschedule = (int)v; }
        else if (strcmp(flag, "-z") == 0) { ok = parse_ll(flag, val, 0, 1, &v, msg, msg_size); a->zero_stage = (int)v; }
        else if (strcmp(flag, "-pn") == 0) { ok = parse_ll(flag, val, 1, 1 << 16, &v, msg, msg_size); a->processes_given = (int)v; }
        else if (strcmp(flag, "-pr") == 0) { ok = parse_ll(flag, val, 0, (1 << 16) - 1, &v, msg, msg_size); a->rank_given = (int)v; }
        else if (strcmp(flag, "-pi") == 0) {
            a->init_method = val;
            if (strcmp(val, "mpi") != 0 && strcmp(val, "fs") != 0) {
                snprintf(msg, msg_size, "-pi %s: expected mpi or fs (HINT: run with -h for usage)", val);
                ok = 0;
            }
        }
        else if (strcmp(flag, "-pf") == 0) {
            if (val[0] == '\0') { snprintf(msg, msg_size, "-pf: expected a folder"); ok = 0; }
            a->rendezvous_dir = val;
        }
        else if (strcmp(flag, "--collective_timeout") == 0) {
            ok = parse_f(flag, val, 1.0f, 1e7f, &a->collective_timeout, msg, msg_size);
        }
        else if (strcmp(flag, "--seed") == 0) { ok = parse_ll(flag, val, 0, 9223372036854775807LL, &v, msg, msg_size); a->seed = (unsigned long long)v; }
        if (!ok) { return 0; }
    }
    return 1;
}

// an integer from the first of the launcher's environment variables that is set, else -1
static int launcher_env_int(const char* const* names, int n) {
    for (int i = 0; i < n; i++) {
        const char* v = getenv(names[i]);
        char* end = NULL;
        if (v != NULL && v[0] != '\0') {
            const long x = strtol(v, &end, 10);
            if (*end == '\0' && x >= 0 && x < (1 << 16)) { return (int)x; }
        }
    }
    return -1;
}

// The CUDA trainer's processes under -pi fs: -pn and -pr, else what the launcher that started them
// says (mpirun's, srun's, MPICH's environment), else a world of one; rank -1: not known. local_rank:
// this process's index on its machine (its GPU), the launcher's, else the rank.
static const char* const launcher_world_vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"};
static void processes_from_flags(const TrainArgs* a, int* world, int* rank, int* local_rank) {
    static const char* const rank_vars[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"};
    static const char* const local_vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"};
    const int env_world = launcher_env_int(launcher_world_vars, 3);
    *world = a->processes_given > 0 ? a->processes_given : env_world > 0 ? env_world : 1;
    *rank = a->rank_given >= 0 ? a->rank_given : launcher_env_int(rank_vars, 3);
    if (*rank < 0 && *world == 1) { *rank = 0; }
    const int local = launcher_env_int(local_vars, 3);
    *local_rank = a->rank_given < 0 && local >= 0 ? local : *rank;
}

// The CUDA trainer under a launcher (mpirun, srun) that started several processes: without -pi fs
// they would train as many separate runs into one -o; with it, -pn must be the launcher's count when
// the ranks are the launcher's. fs: -pi fs. Returns 1, or 0 with a one-line message.
static int launcher_check(const TrainArgs* a, int fs, char* msg, size_t msg_size) {
    const int env_world = launcher_env_int(launcher_world_vars, 3);
    if (!fs && env_world > 1) {
        snprintf(msg, msg_size, "this process is one of %d that a launcher (mpirun, srun) started: the CUDA trainer's "
                 "processes train one run together only with -pi fs -pf DIR (HINT: add -pi fs -pf DIR, or start one "
                 "process)", env_world);
        return 0;
    }
    if (fs && env_world > 0 && a->processes_given > 0 && a->rank_given < 0 && a->processes_given != env_world) {
        snprintf(msg, msg_size, "-pn %d: the launcher started %d processes, whose ranks these are (HINT: drop -pn, or give "
                 "each process its -pr)", a->processes_given, env_world);
        return 0;
    }
    return 1;
}

// -pn, -pr, -pi and -pf against the processes the run has: `world` and `rank` from the transport
// (MPI's; the CUDA trainer's -pi fs: processes_from_flags'; else 1 and 0); transport: "MPI", "NCCL" or
// NULL (this run has none). Returns 1, or 0 with a one-line message.
static int processes_check(const TrainArgs* a, const char* transport, int world, int rank, char* msg, size_t msg_size) {
#ifdef DP_NCCL
    const int has_nccl = 1;
#else
    const int has_nccl = 0;
#endif
    const int fs = strcmp(a->init_method, "fs") == 0;
    if (fs && !TRAIN_COMMON_CUDA) {
        snprintf(msg, msg_size, "-pi fs: the shared-folder rendezvous belongs to the CUDA trainer's NCCL data parallelism; "
                 "the CPU trainer's processes meet through MPI, started by mpirun (HINT: -pi mpi)");
        return 0;
    }
    if (fs && !has_nccl) {
        snprintf(msg, msg_size, "-pi fs: this build of the CUDA trainer has no NCCL (HINT: make builds with NCCL where it finds "
                 "nccl.h and libnccl under CUDA_HOME, or NCCL_HOME=DIR; NO_NCCL=1 builds without)");
        return 0;
    }
    if (fs) {
        if (a->rendezvous_dir == NULL) {
            snprintf(msg, msg_size, "-pi fs: -pf DIR is missing, the folder where the processes meet (HINT: a folder every "
                     "process can read and write, on a filesystem they share)");
            return 0;
        }
        if (rank < 0) {
            snprintf(msg, msg_size, "-pi fs -pn %d: this process's rank is not known (HINT: -pr R, from 0 to %d; mpirun and "
                     "srun name it themselves)", world, world - 1);
            return 0;
        }
        if (rank >= world) {
            snprintf(msg, msg_size, "-pr %d: the ranks of -pn %d go from 0 to %d", rank, world, world - 1);
            return 0;
        }
        return 1;
    }
    if (transport == NULL && (a->processes_given > 1 || a->rank_given > 0)) {
        const char* flag = a->processes_given > 1 ? "-pn" : "-pr";
        const int value = a->processes_given > 1 ? a->processes_given : a->rank_given;
        if (TRAIN_COMMON_CUDA) {
            snprintf(msg, msg_size, "%s %d: the CUDA trainer's processes meet with -pi fs -pf DIR, over NCCL%s (HINT: %s)",
                     flag, value, has_nccl ? "" : ", which this build does not have",
                     has_nccl ? "-pn N -pr R -pi fs -pf DIR on each process, or mpirun -np N ... -pi fs -pf DIR"
                              : "make finds NCCL under CUDA_HOME, or NCCL_HOME=DIR");
        } else {
            snprintf(msg, msg_size, "%s %d: this binary has no MPI to reach other processes (HINT: make "
                     "build/train_gpt2_cpu_mpi_<scheme>, then mpirun -np N build/train_gpt2_cpu_mpi_<scheme> ...)", flag, value);
        }
        return 0;
    }
    if (a->processes_given > 0 && a->processes_given != world) {
        snprintf(msg, msg_size, "-pn %d: this run has %d process%s (HINT: mpirun -np %d, or drop -pn)", a->processes_given,
                 world, world == 1 ? "" : "es", a->processes_given);
        return 0;
    }
    if (a->rank_given >= 0 && a->rank_given != rank) {
        snprintf(msg, msg_size, "-pr %d: this process has rank %d of %d (HINT: drop -pr: mpirun sets the ranks)", a->rank_given,
                 rank, world);
        return 0;
    }
    if (a->rendezvous_dir != NULL) {
        snprintf(msg, msg_size, "-pf %s: the folder of -pi fs, which this run does not use (HINT: drop -pf)", a->rendezvous_dir);
        return 0;
    }
    return 1;
}

static int inspecting(const TrainArgs* a);

// what one process does alone: refused in a run of several. Returns 1, or 0 with a one-line message.
static int processes_work_check(const TrainArgs* a, int world, char* msg, size_t msg_size) {
    if (world > 1 && (a->generate > 0 || inspecting(a) || a->profile_steps > 0)) {
        snprintf(msg, msg_size, "%s is one process's work (HINT: run it as one process)",
                 a->generate > 0 ? "--generate" : inspecting(a) ? "the inspection run" : "--profile");
        return 0;
    }
    return 1;
}

// A hash of the flags that shape a run's updates, for the processes' agreement (dev/data_parallel.h),
// onto h (the trainer's hash of the model)
static uint64_t train_flags_hash(uint64_t h, const TrainArgs* a) {
    const long long ints[] = {a->B, a->T, a->total_batch, a->max_steps, a->warmup, a->val_every, a->val_max_steps,
                              a->checkpoint_every, a->output_dir != NULL, a->resume, a->zero_stage, (long long)a->seed,
                              a->resuming ? a->state.step : -1, a->master_weights};
    const float floats[] = {a->lr, a->final_frac, a->weight_decay, a->beta1, a->beta2, a->eps, a->grad_clip,
                            a->skip_loss_z, a->skip_grad_z};
    h = dp_hash(h, ints, sizeof(ints));
    return dp_hash(h, floats, sizeof(floats));
}
#define TRAIN_FLAGS_HASHED "-e, -b, -t, -d, -x, -l, -u, -q, -c, -v, -m, -n, -o, -y, -z, --seed, -sl, -sg" TRAIN_FLAGS_HASHED_OWN

#if TRAIN_COMMON_CUDA
#define TRAIN_FLAGS_HASHED_OWN ", -w" // master weights or not: another update, and another checkpoint
#else
#define TRAIN_FLAGS_HASHED_OWN ""
#endif

// the data's part of the agreement: the shards' fingerprints and sizes
static uint64_t train_data_hash(const DataLoader* train, const DataLoader* val) {
    uint64_t h = dp_hash(DP_HASH_SEED, &train->fingerprint, sizeof(train->fingerprint));
    h = dp_hash(h, &train->num_tokens, sizeof(train->num_tokens));
    return val != NULL ? dp_hash(h, &val->fingerprint, sizeof(val->fingerprint)) : h;
}

// the run's line on its processes (rank 0 prints it)
static void processes_describe(const DataParallel* dp, const TrainArgs* a) {
    printf("processes: %d over %s | each trains %d of the %d micro-batches of a step | -z %d: %s\n", dp->world,
           dp->backend->name, a->grad_accum_steps / dp->world, a->grad_accum_steps, a->zero_stage,
           dp->zero ? "AdamW's state sharded, the parameters all-gathered after each update" : "AdamW's state whole "
           "on every process");
}

// "d12" -> 12, else -1
static int parse_depth_descriptor(const char* s) {
    if (s[0] != 'd' || s[1] == '\0') { return -1; }
    for (const char* p = s + 1; *p; p++) { if (!isdigit((unsigned char)*p)) { return -1; } }
    return atoi(s + 1);
}

// the two files of the checkpoint at `step` in dir (-n writes them, -y 1 looks for them)
static void checkpoint_paths(const char* dir, int step, char model_path[4096], char state_path[4096]) {
    snprintf(model_path, 4096, "%s/model_%08d.bin", dir, step);
    snprintf(state_path, 4096, "%s/state_%08d.bin", dir, step);
}

// the latest step with both model_<step>.bin and state_<step>.bin in dir, or -1
static int find_latest_checkpoint(const char* dir) {
    DIR* d = opendir(dir);
    if (d == NULL) { return -1; }
    int best = -1;
    struct dirent* ent;
    while ((ent = readdir(d)) != NULL) {
        int step = -1;
        char tail[8] = {0};
        if (sscanf(ent->d_name, "state_%d.bi%1s", &step, tail) == 2 && strcmp(tail, "n") == 0 && step > best) {
            char model_path[4096], state_path[4096];
            checkpoint_paths(dir, step, model_path, state_path);
            char name[64];
            snprintf(name, sizeof(name), "state_%08d.bin", step);
            if (strcmp(name, ent->d_name) == 0 && file_exists(state_path) && file_exists(model_path)) { best = step; }
        }
    }
    closedir(d);
    return best;
}

// ----------------------------------------------------------------------------
// the output folder (-o): one run's main.log and checkpoints

// a file a training run writes into -o: main.log, model_N.bin, state_N.bin, the CUDA trainer's
// lt_algos.bin (its matmul choices), or the .tmp of one of the last three left by a run killed while
// writing it
static int is_run_file(const char* name) {
    if (strcmp(name, "main.log") == 0 || strcmp(name, "lt_algos.bin") == 0 || strcmp(name, "lt_algos.bin.tmp") == 0) { return 1; }
    if (strncmp(name, "model_", 6) != 0 && strncmp(name, "state_", 6) != 0) { return 0; }
    const char* p = name + 6;
    if (!isdigit((unsigned char)*p)) { return 0; }
    while (isdigit((unsigned char)*p)) { p++; }
    return strcmp(p, ".bin") == 0 || strcmp(p, ".bin.tmp") == 0;
}

// the run files in dir, sorted. Returns 0 (errno set) when dir cannot be read.
static int run_files_in(const char* dir, std::vector<std::string>* names) {
    names->clear();
    DIR* d = opendir(dir);
    if (d == NULL) { return 0; }
    struct dirent* ent;
    while ((ent = readdir(d)) != NULL) {
        if (is_run_file(ent->d_name)) { names->push_back(ent->d_name); }
    }
    closedir(d);
    std::sort(names->begin(), names->end());
    return 1;
}

static int same_file(const char* p, const char* q) {
    struct stat a, b;
    return stat(p, &a) == 0 && stat(q, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

// The files a run reads: the model file (-e, or the checkpoint it resumes), every shard of -i and
// -j, and the tokenizer. Each as its path; the caller compares them with its outputs by identity.
static std::vector<std::string> run_input_files(const TrainArgs* a) {
    std::vector<std::string> inputs;
    if (a->from_file || a->resuming) { inputs.push_back(a->model_path); }
    if (a->resuming) { inputs.push_back(a->state_path); }
    const char* patterns[2] = {a->train_pattern, a->val_every > 0 ? a->val_pattern : NULL};
    for (int k = 0; k < 2; k++) {
        glob_t g;
        if (patterns[k] == NULL || glob(patterns[k], 0, NULL, &g) != 0) { continue; }
        for (size_t i = 0; i < g.gl_pathc; i++) { inputs.push_back(g.gl_pathv[i]); }
        globfree(&g);
    }
    inputs.push_back(a->tokenizer_path);
    return inputs;
}

// Whether `path` names `other` once both exist: the same device and inode, so a symlink or another
// spelling (./x, a/../x) of the same file is caught. Two paths of which one does not exist yet are
// compared by their folders' identity and their last names.
static int same_file_or_name(const char* path, const char* other) {
    if (same_file(path, other)) { return 1; }
    struct stat a, b;
    if (stat(path, &a) == 0 && stat(other, &b) == 0) { return 0; } // both exist: different files
    const std::string p(path), q(other);
    const size_t ps = p.rfind('/'), qs = q.rfind('/');
    const std::string pdir = ps == std::string::npos ? "." : p.substr(0, ps == 0 ? 1 : ps);
    const std::string qdir = qs == std::string::npos ? "." : q.substr(0, qs == 0 ? 1 : qs);
    const std::string pname = ps == std::string::npos ? p : p.substr(ps + 1);
    const std::string qname = qs == std::string::npos ? q : q.substr(qs + 1);
    return pname == qname && same_file(pdir.c_str(), qdir.c_str());
}

// What a run writes (main.log and the checkpoints in -o, --profile_csv) against what it reads:
// writing one would destroy an input a user had. Returns 1, or 0 with a one-line message.
static int outputs_vs_inputs_check(const TrainArgs* a, char* msg, size_t msg_size) {
    std::vector<std::pair<std::string, std::string>> outputs; // (path, what writes it)
    if (a->output_dir != NULL) {
        outputs.push_back({std::string(a->output_dir) + "/main.log", "-o"});
        std::vector<std::string> files;
        if (run_files_in(a->output_dir, &files)) { // a fresh run replaces them all (--overwrite 1), a resumed one the later ones
            for (size_t i = 0; i < files.size(); i++) { outputs.push_back({std::string(a->output_dir) + "/" + files[i], "-o"}); }
        }
    }
    if (a->profile_csv != NULL) { outputs.push_back({a->profile_csv, "--profile_csv"}); }
    const std::vector<std::string> inputs = run_input_files(a);
    for (size_t i = 0; i < outputs.size(); i++) {
        const char* out = outputs[i].first.c_str();
        for (size_t j = 0; j < inputs.size(); j++) {
            if (a->resuming && (inputs[j] == a->model_path || inputs[j] == a->state_path)) { continue; } // in -o by design
            if (same_file_or_name(out, inputs[j].c_str())) {
                snprintf(msg, msg_size, "%s would write %s, which is %s, an input of this run: writing it would destroy it "
                         "(HINT: choose another %s)", outputs[i].second.c_str(), out, inputs[j].c_str(), outputs[i].second.c_str());
                return 0;
            }
        }
    }
    if (a->profile_csv != NULL) {
        struct stat st;
        if (stat(a->profile_csv, &st) == 0 && !S_ISREG(st.st_mode)) {
            snprintf(msg, msg_size, "--profile_csv %s: exists and is not a file (HINT: name a new file)", a->profile_csv);
            return 0;
        }
        for (size_t i = 0; a->output_dir != NULL && i < outputs.size(); i++) {
            if (outputs[i].second == "-o" && same_file_or_name(a->profile_csv, outputs[i].first.c_str())) {
                snprintf(msg, msg_size, "--profile_csv %s is %s, a file this run writes into -o (HINT: name another file)",
                         a->profile_csv, outputs[i].first.c_str());
                return 0;
            }
        }
    }
    return 1;
}

// -o of a training run: a folder, created when missing, and one that holds no other run's files
// unless this run continues it (-y 1) or replaces it (--overwrite 1; output_dir_clear then removes
// them as the run starts). A fresh run writing into an old one would truncate its log and replace
// its checkpoints at the same steps, and a later -y 1 would resume a mix of the two.
// Every name a run writes must be free for a file (a folder named state_00000009.bin would be found
// only at that checkpoint, after the model file of the step was replaced), and the folder must let
// a file be created and renamed, as every checkpoint is; both are tried here, before the first step.
// --check_args 1 creates nothing: a missing -o must have a writable parent. Returns 1, or 0 with a
// one-line message.
static int output_dir_check(const TrainArgs* a, char* msg, size_t msg_size) {
    if (a->output_dir == NULL) { return outputs_vs_inputs_check(a, msg, msg_size); }
    const char* dir = a->output_dir;
    // only rank 0 of a data-parallel run writes into -o: the others check it as --check_args does
    const int check_only = a->check_args || a->rank > 0;
    struct stat st;
    if (stat(dir, &st) == 0) {
        if (!S_ISDIR(st.st_mode)) {
            snprintf(msg, msg_size, "-o %s: exists and is not a folder (HINT: -o names the folder for main.log and the "
                     "checkpoints; a new name creates it)", dir);
            return 0;
        }
    } else if (check_only) {
        const std::string d(dir);
        const size_t slash = d.find_last_of('/', d.find_last_not_of('/'));
        const std::string parent = slash == std::string::npos ? "." : d.substr(0, slash == 0 ? 1 : slash);
        if (stat(parent.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || access(parent.c_str(), W_OK | X_OK) != 0) {
            snprintf(msg, msg_size, "-o %s: missing, and %s is no folder it can be created in (HINT: create the folders "
                     "above it first)", dir, parent.c_str());
            return 0;
        }
        return outputs_vs_inputs_check(a, msg, msg_size);
    } else if (mkdir(dir, 0755) != 0) {
        snprintf(msg, msg_size, "-o %s: cannot create the output folder (%s)", dir, strerror(errno));
        return 0;
    }
    std::vector<std::string> files;
    if (!run_files_in(dir, &files)) {
        snprintf(msg, msg_size, "-o %s: cannot read the folder (%s)", dir, strerror(errno));
        return 0;
    }
    for (size_t i = 0; i < files.size(); i++) {
        const std::string path = std::string(dir) + "/" + files[i];
        // (a symlink to a file is fine: the rename replaces the link, never what it points to)
        if (stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
            snprintf(msg, msg_size, "-o %s: %s is %s, where this run writes a file of that name (HINT: move it out of %s)",
                     dir, path.c_str(), S_ISDIR(st.st_mode) ? "a folder" : "not a file", dir);
            return 0;
        }
    }
    if (check_only) {
        if (access(dir, W_OK | X_OK) != 0) {
            snprintf(msg, msg_size, "-o %s: cannot write into the output folder (%s)", dir, strerror(errno));
            return 0;
        }
    } else { // a file created, renamed and removed, as each checkpoint will be
        char probe[4200], renamed[4200];
        snprintf(probe, sizeof(probe), "%s/.write_check_%d.tmp", dir, (int)getpid());
        snprintf(renamed, sizeof(renamed), "%s/.write_check_%d", dir, (int)getpid());
        const int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL, 0644);
        if (fd < 0) {
            snprintf(msg, msg_size, "-o %s: cannot create a file in the output folder (%s)", dir, strerror(errno));
            return 0;
        }
        close(fd);
        const int renamed_ok = rename(probe, renamed) == 0;
        const int err = errno;
        unlink(renamed_ok ? renamed : probe);
        if (!renamed_ok) {
            snprintf(msg, msg_size, "-o %s: cannot rename a file in the output folder (%s), as every checkpoint is written",
                     dir, strerror(err));
            return 0;
        }
    }
    if (!a->resuming && !files.empty() && !a->overwrite) {
        std::string some;
        for (size_t i = 0; i < files.size() && i < 3; i++) { some += (i > 0 ? ", " : "") + files[i]; }
        if (files.size() > 3) { some += ", ..."; }
        snprintf(msg, msg_size, "-o %s holds another run's files (%s: %zu in all) (HINT: -y 1 resumes that run, "
                 "--overwrite 1 replaces it, or choose another -o)", dir, some.c_str(), files.size());
        return 0;
    }
    for (size_t i = 0; !a->resuming && i < files.size(); i++) { // never delete the model this run starts from
        const std::string path = std::string(dir) + "/" + files[i];
        if (a->from_file && same_file(path.c_str(), a->model_path)) {
            snprintf(msg, msg_size, "--overwrite 1 would remove -e %s, the model this run starts from, from -o %s "
                     "(HINT: copy it out of %s first)", a->model_path, dir, dir);
            return 0;
        }
    }
    return outputs_vs_inputs_check(a, msg, msg_size);
}

// --overwrite 1, as the run starts (after output_dir_check, once the model is loaded): removes the
// old run's files from -o, saying which. Returns 1, or 0 after printing the error.
static int output_dir_clear(const TrainArgs* a) {
    if (a->output_dir == NULL || a->resuming || !a->overwrite) { return 1; }
    std::vector<std::string> files;
    if (!run_files_in(a->output_dir, &files)) {
        fprintf(stderr, "error: -o %s: cannot read the folder (%s)\n", a->output_dir, strerror(errno));
        return 0;
    }
    if (files.empty()) { return 1; }
    std::string removed;
    for (size_t i = 0; i < files.size(); i++) {
        const std::string path = std::string(a->output_dir) + "/" + files[i];
        if (unlink(path.c_str()) != 0) {
            fprintf(stderr, "error: --overwrite 1: cannot remove %s (%s)\n", path.c_str(), strerror(errno));
            return 0;
        }
        removed += " " + files[i];
    }
    printf("--overwrite 1: removed the previous run's files from %s:%s\n", a->output_dir, removed.c_str());
    fflush(stdout);
    return 1;
}

// what the including trainer's kernels need of a shape and batch beyond gpt2_config_check (defined
// by the includer; the CUDA trainer's 16-byte loads, 32-bit indices and grid limits)
static int trainer_shape_check(const TrainArgs* a, char* msg, size_t msg_size);

// The config of -e dN with the shape flags: GPT-2's sizes, 64 channels and one head of 64 per unit
// of depth up to d12. Returns 1, or 0 with a one-line message.
static int depth_config(const TrainArgs* a, int depth, GPT2Config* config, char* msg, size_t msg_size) {
    int L = 0, C = 0, H = 0;
    switch (depth) {
        case 2: L = 2; C = 128; H = 2; break;
        case 4: L = 4; C = 256; H = 4; break;
        case 6: L = 6; C = 384; H = 6; break;
        case 12: L = 12; C = 768; H = 12; break;
        case 24: L = 24; C = 1024; H = 16; break;
        case 36: L = 36; C = 1280; H = 20; break;
        case 48: L = 48; C = 1600; H = 25; break;
        default:
            snprintf(msg, msg_size, "-e %s: unknown depth, expected d2, d4, d6, d12, d24, d36, d48 or a checkpoint file", a->model_arg);
            return 0;
    }
    if (a->n_layer > 0) { L = a->n_layer; }
    if (a->n_embd > 0) { C = a->n_embd; }
    if (a->n_head > 0) { H = a->n_head; }
    *config = gpt2_config_default(L, H, C, 1024, 50257, 50304);
    config->scheme = kQKVScheme;
    if (a->n_kv_head > 0) { config->num_kv_heads = a->n_kv_head; }
    if (a->mlp_hidden > 0) { config->mlp_hidden = a->mlp_hidden; }
    if (a->bias >= 0) { config->use_bias = a->bias; }
    if (a->tied >= 0) { config->tied_head = a->tied; }
    if (a->attn_scale >= 0.0f) { config->attn_scale = a->attn_scale; }
    char why[1024];
    if (!gpt2_config_check(config, why, sizeof(why))) {
        snprintf(msg, msg_size, "-e %s: %s", a->model_arg, why);
        return 0;
    }
    return 1;
}

// -e with -y 1: the run resumes the model in -o, so -e is not read. It may still name the model the
// run started from (a script that adds -y 1 to the same command), but not a model of another shape:
// that caller means another run. Returns 1, or 0 with a one-line message.
static int resume_model_arg_check(const TrainArgs* a, char* msg, size_t msg_size) {
    if (!a->model_given) { return 1; }
    GPT2Config given;
    int version = 0;
    const int depth = parse_depth_descriptor(a->model_arg);
    if (depth >= 0 && !file_exists(a->model_arg)) {
        if (!depth_config(a, depth, &given, msg, msg_size)) { return 0; }
    } else if (!checkpoint_inspect(a->model_arg, -1.0f, &given, &version, msg, msg_size)) {
        return 0;
    }
    int want[12], got[12];
    gpt2_config_to_fields(&a->config, want);
    gpt2_config_to_fields(&given, got);
    if (memcmp(want, got, 11 * sizeof(int)) != 0) { // [11], the attention scale, is no part of the shape
        char desc_given[256], desc_resumed[256];
        gpt2_config_describe(&given, desc_given, sizeof(desc_given));
        gpt2_config_describe(&a->config, desc_resumed, sizeof(desc_resumed));
        snprintf(msg, msg_size, "-e %s (%s) with -y 1: the run in -o %s resumes %s, a model of another shape (%s) "
                 "(HINT: drop -e to resume that run, or drop -y 1 and choose another -o for a new one)", a->model_arg,
                 desc_given, a->output_dir, a->model_path, desc_resumed);
        return 0;
    }
    return 1;
}

// the end of the "resuming from" line: why -e, when given, was not read (resume_model_arg_check
// allowed it: the same shape)
static const char* resume_model_note(const TrainArgs* a) {
    return a->resuming && a->model_given ? " (-e is not read: a resumed run continues the model in -o)" : "";
}

// ----------------------------------------------------------------------------
// the inspection run (--dump_attention, --attention_csv): the attention maps of one prompt and of
// the induction probe, and each head's diagnostics (dev/attention_maps.h, dev/ATTENTION_MAPS.md)

// the prompt when --prompt is not given: one fixed sentence, so that runs and checkpoints compare
#define ATTENTION_PROBE_TEXT "When Mr. Darcy came into the room, Elizabeth looked up from her book, and she " \
                             "saw that her sister Jane was watching him too."

// a model of a smaller vocabulary than GPT-2's (the tests' toys) is probed with this many random
// tokens instead, after the end-of-text token (ATTENTION_PROBE_SEED, not the induction probe's seed)
#define GPT2_VOCAB_SIZE 50257
#define ATTENTION_PROBE_SMALL_VOCAB_TOKENS 29
#define ATTENTION_PROBE_SEED 2026ULL

static int inspecting(const TrainArgs* a) { return a->dump_attention != NULL || a->attention_csv != NULL; }

// the flags of an inspection run, before the model is known. Returns 1, or 0 with a one-line message.
static int inspect_args_check(const TrainArgs* a, char* msg, size_t msg_size) {
    if (!inspecting(a)) { return 1; }
    const char* flag = a->dump_attention != NULL ? "--dump_attention" : "--attention_csv";
    if (a->generate > 0) {
        snprintf(msg, msg_size, "%s looks at attention on a prompt; --generate %d samples after it: give one of them",
                 flag, a->generate);
        return 0;
    }
    if (a->profile_steps > 0) {
        snprintf(msg, msg_size, "%s trains no step; --profile %d times training steps: give one of them", flag,
                 a->profile_steps);
        return 0;
    }
    if (a->output_dir != NULL || a->resume) {
        snprintf(msg, msg_size, "%s writes only its own file; -o/-y belong to a training run (HINT: -e <dir>/model_"
                 "NNNNNNNN.bin names a run's checkpoint)", flag);
        return 0;
    }
    if (a->prompt != NULL && a->prompt_tokens != NULL) {
        snprintf(msg, msg_size, "--prompt and --prompt_tokens %s both give the prompt: give one of them", a->prompt_tokens);
        return 0;
    }
    if (a->prompt != NULL && a->prompt[0] == '\0') {
        snprintf(msg, msg_size, "--prompt is empty: expected text whose attention to look at (HINT: drop --prompt for "
                 "the fixed probe sentence)");
        return 0;
    }
    return 1;
}

// Whether an output of the inspection run may replace what is at path: nothing, an empty file, or
// what that flag writes (a maps file's magic, the diagnostics CSV's header line). A typo naming a
// checkpoint or a notes file is refused instead of replacing it.
static int inspect_output_replaceable(const char* path, int maps_file) {
    struct stat st;
    if (stat(path, &st) != 0 || (S_ISREG(st.st_mode) && st.st_size == 0)) { return 1; }
    if (!S_ISREG(st.st_mode)) { return 0; }
    FILE* f = fopen(path, "rb");
    if (f == NULL) { return 0; }
    char head[sizeof(HEAD_DIAGNOSTICS_CSV_HEADER)] = {0};
    const size_t got = fread(head, 1, sizeof(head) - 1, f);
    fclose(f);
    if (maps_file) {
        int32_t magic = 0;
        memcpy(&magic, head, got >= 4 ? 4 : 0);
        return got >= 4 && magic == ATTENTION_MAPS_MAGIC;
    }
    return got == sizeof(head) - 1 && strcmp(head, HEAD_DIAGNOSTICS_CSV_HEADER) == 0;
}

// Where the inspection run writes: files (not folders) in existing writable folders, neither one
// the other nor an input (the model, the tokenizer files), and nothing there but what the same flag
// wrote before: each is written under a new temporary name and renamed over it. Returns 1, or 0
// with a one-line message.
static int inspect_outputs_check(const TrainArgs* a, char* msg, size_t msg_size) {
    const std::pair<const char*, const char*> outputs[2] = {{a->dump_attention, "--dump_attention"},
                                                            {a->attention_csv, "--attention_csv"}};
    std::vector<std::string> inputs;
    if (a->from_file) { inputs.push_back(a->model_path); }
    if (a->prompt_tokens != NULL) { inputs.push_back(a->prompt_tokens); }
    inputs.push_back(a->tokenizer_path);
    inputs.push_back("dev/data/gpt2/encoder.json");
    inputs.push_back("dev/data/gpt2/vocab.bpe");
    for (int i = 0; i < 2; i++) {
        const char* path = outputs[i].first;
        const char* flag = outputs[i].second;
        if (path == NULL) { continue; }
        struct stat st;
        const std::string p(path);
        const size_t slash = p.rfind('/');
        const std::string dir = slash == std::string::npos ? "." : p.substr(0, slash == 0 ? 1 : slash);
        if (p.empty() || p[p.size() - 1] == '/' || (stat(path, &st) == 0 && S_ISDIR(st.st_mode))) {
            snprintf(msg, msg_size, "%s %s: expected a file name, this is a folder", flag, path);
            return 0;
        }
        if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || access(dir.c_str(), W_OK | X_OK) != 0) {
            snprintf(msg, msg_size, "%s %s: cannot write into %s (%s) (HINT: an existing folder you may write to)", flag,
                     path, dir.c_str(), access(dir.c_str(), F_OK) != 0 ? "no such folder" : "not writable");
            return 0;
        }
        for (size_t j = 0; j < inputs.size(); j++) {
            if (same_file_or_name(path, inputs[j].c_str())) {
                snprintf(msg, msg_size, "%s %s is %s, an input of this run: writing it would destroy it (HINT: choose "
                         "another file)", flag, path, inputs[j].c_str());
                return 0;
            }
        }
        if (!inspect_output_replaceable(path, i == 0)) {
            snprintf(msg, msg_size, "%s %s exists and is not %s: replacing it could destroy what a user saved (HINT: "
                     "choose another file, or remove it first)", flag, path,
                     i == 0 ? "an attention maps file" : "a head diagnostics CSV");
            return 0;
        }
    }
    if (a->dump_attention != NULL && a->attention_csv != NULL && same_file_or_name(a->dump_attention, a->attention_csv)) {
        snprintf(msg, msg_size, "--dump_attention and --attention_csv both name %s: expected two files", a->dump_attention);
        return 0;
    }
    return 1;
}

// The model config, checkpoint and resume decisions, all from the host: every refusal (bad
// shape, forbidden scheme/shape, a checkpoint of another scheme, an inconsistent resume) is
// reported here, before a model is built. Returns 1, or 0 with a one-line message.
static int train_args_resolve(TrainArgs* a, char* msg, size_t msg_size) {
    if (a->resume && a->output_dir == NULL) {
        snprintf(msg, msg_size, "-y 1 needs -o <dir>, the folder holding the checkpoints to resume from");
        return 0;
    }
    if (a->checkpoint_every > 0 && a->output_dir == NULL) {
        snprintf(msg, msg_size, "-n %d needs -o <dir>, the folder to write checkpoints into", a->checkpoint_every);
        return 0;
    }
    if (a->reschedule && !a->resume) {
        snprintf(msg, msg_size, "--reschedule 1 changes the schedule of a resumed run; without -y 1 this run starts anew "
                 "and takes its flags as given (HINT: add -y 1, or drop --reschedule)");
        return 0;
    }
    if (a->resume && a->overwrite) {
        snprintf(msg, msg_size, "-y 1 resumes the run in -o %s, --overwrite 1 replaces it: give one of them", a->output_dir);
        return 0;
    }
    if (a->profile_csv != NULL && a->profile_steps == 0) {
        snprintf(msg, msg_size, "--profile_csv %s: needs --profile N, the steps to profile", a->profile_csv);
        return 0;
    }
    if (a->prompt != NULL && a->generate == 0 && !inspecting(a)) { // training never reads it: the caller meant to generate
        snprintf(msg, msg_size, "--prompt needs --generate N (N > 0) or --dump_attention FILE: without either this run "
                 "trains and never reads the prompt (HINT: add --generate 64, or drop --prompt)");
        return 0;
    }
    if (a->prompt_tokens != NULL && !inspecting(a)) {
        snprintf(msg, msg_size, "--prompt_tokens %s is the prompt of the inspection run: it needs --dump_attention FILE "
                 "or --attention_csv FILE", a->prompt_tokens);
        return 0;
    }
    if (!inspect_args_check(a, msg, msg_size)) { return 0; }
    if (a->num_samples_given && a->generate == 0) { // training prints one sample per -s N steps
        snprintf(msg, msg_size, "--num_samples %d needs --generate N (N > 0): training samples one text every -s steps "
                 "(HINT: add --generate 64, or drop --num_samples)", a->num_samples);
        return 0;
    }
    if (a->sampling_flag != NULL && a->generate == 0 && a->sample_every == 0) { // it would be silently ignored
        snprintf(msg, msg_size, "%s needs a run that samples: with -s 0 and no --generate nothing is sampled (HINT: drop "
                 "%s, or sample with -s N or --generate N)", a->sampling_flag, a->sampling_flag);
        return 0;
    }
    if (a->profile_steps > 0 && a->generate > 0) {
        snprintf(msg, msg_size, "--profile %d profiles training steps; --generate %d trains none: give one of them",
                 a->profile_steps, a->generate);
        return 0;
    }
    a->resuming = 0;
    if (a->resume) {
        const int step = find_latest_checkpoint(a->output_dir);
        if (step < 0) { // starting afresh instead would silently throw away what the caller meant to continue
            snprintf(msg, msg_size, "-y 1: no checkpoint to resume from in -o %s (no state_NNNNNNNN.bin beside its "
                     "model_NNNNNNNN.bin) (HINT: drop -y 1 to start a fresh run)", a->output_dir);
            return 0;
        }
        a->resuming = 1;
        checkpoint_paths(a->output_dir, step, a->model_path, a->state_path);
    }
    const int depth = a->resuming ? -1 : parse_depth_descriptor(a->model_arg);
    if (depth >= 0 && !file_exists(a->model_arg)) {
        if (!depth_config(a, depth, &a->config, msg, msg_size)) { return 0; }
        a->from_file = 0;
    } else {
        if (!a->resuming) { snprintf(a->model_path, sizeof(a->model_path), "%s", a->model_arg); }
        if (!checkpoint_inspect(a->model_path, a->attn_scale, &a->config, &a->file_version, msg, msg_size)) { return 0; }
        if (a->resuming && !resume_model_arg_check(a, msg, msg_size)) { return 0; }
        // one more pass over the parameters (README.md, "Bad values": 70-90 ms for d12), before any memory is allocated
        if (!a->allow_nonfinite && !checkpoint_check_values(a->model_path, &a->config, a->file_version, msg, msg_size)) {
            return 0;
        }
        a->from_file = 1;
        // the shape comes from the file: a shape flag may only repeat it
        const struct { const char* flag; int given; int has; } shape[] = {
            {"--n_kv_head", a->n_kv_head, a->config.num_kv_heads}, {"--mlp_hidden", a->mlp_hidden, a->config.mlp_hidden},
            {"--bias", a->bias, a->config.use_bias}, {"--tied", a->tied, a->config.tied_head},
            {"--n_layer", a->n_layer, a->config.num_layers}, {"--n_embd", a->n_embd, a->config.channels},
            {"--n_head", a->n_head, a->config.num_heads},
        };
        for (size_t k = 0; k < sizeof(shape) / sizeof(shape[0]); k++) {
            if (shape[k].given >= 0 && shape[k].given != shape[k].has) {
                snprintf(msg, msg_size, "%s %d: the model file %s has %s %d; a checkpoint's shape cannot be changed "
                         "(only --attn_scale overrides it)", shape[k].flag, shape[k].given, a->model_path, shape[k].flag + 2,
                         shape[k].has);
                return 0;
            }
        }
    }
    if ((a->generate > 0 || inspecting(a)) && a->T > a->config.max_seq_len) { a->T = a->config.max_seq_len; } // no -t there
    if (a->T > a->config.max_seq_len) {
        snprintf(msg, msg_size, "-t %d: expected T <= the model's max_seq_len %d", a->T, a->config.max_seq_len);
        return 0;
    }
    if (a->gen_T < 0) { a->gen_T = a->T < 64 ? a->T : 64; }
    if (a->gen_T > a->T) {
        snprintf(msg, msg_size, "-g %d: expected at most T = %d tokens to sample", a->gen_T, a->T);
        return 0;
    }
    if (a->generate > a->config.max_seq_len - 1) { // the prompt takes at least one position
        snprintf(msg, msg_size, "--generate %d: expected at most max_seq_len - 1 = %d tokens", a->generate,
                 a->config.max_seq_len - 1);
        return 0;
    }
    if (a->sampling.top_k > a->config.vocab_size) {
        snprintf(msg, msg_size, "--top_k %d: expected at most the model's vocabulary of %d tokens, 0 = off",
                 a->sampling.top_k, a->config.vocab_size);
        return 0;
    }
    if (!trainer_shape_check(a, msg, msg_size)) { return 0; }
    const long long BT = (long long)a->B * a->T;
    if (a->total_batch == -1) { a->total_batch = BT; }
    if (a->total_batch % BT != 0) {
        snprintf(msg, msg_size, "-d %lld: expected a multiple of B*T = %lld (-b %d -t %d)", a->total_batch, BT, a->B, a->T);
        return 0;
    }
    if (a->total_batch / BT > (1LL << 24)) {
        snprintf(msg, msg_size, "-d %lld: %lld accumulation steps of B*T = %lld tokens, expected at most 2^24 (HINT: raise -b)",
                 a->total_batch, a->total_batch / BT, BT);
        return 0;
    }
    a->grad_accum_steps = (int)(a->total_batch / BT); // over all processes: each trains its share (data_parallel.h)
    if (a->world > 1 && a->grad_accum_steps % a->world != 0) {
        snprintf(msg, msg_size, "-d %lld: %d micro-batches of B*T = %lld tokens per step do not split over %d processes "
                 "(HINT: -d a multiple of B*T*%d = %lld)", a->total_batch, a->grad_accum_steps, BT, a->world, a->world,
                 BT * a->world);
        return 0;
    }
    if (a->resuming) {
        if (!state_inspect(a->state_path, &a->config, &a->state, msg, msg_size)) { return 0; }
        if (!a->allow_nonfinite && !state_check_values(a->state_path, &a->config, &a->state, msg, msg_size)) { return 0; }
        if (a->state.B != a->B || a->state.T != a->T || a->state.grad_accum_steps != a->grad_accum_steps) {
            snprintf(msg, msg_size, "-y 1: %s was trained with -b %d -t %d and %d accumulation steps, this run has -b %d -t %d "
                     "and %d (HINT: resume with the same -b, -t and -d)", a->state_path, a->state.B, a->state.T,
                     a->state.grad_accum_steps, a->B, a->T, a->grad_accum_steps);
            return 0;
        }
    }
    return 1;
}

// The schedule and optimizer settings this run trains with (recorded in its training states)
static OptimizerSchedule run_schedule(const TrainArgs* a, int num_steps) {
    OptimizerSchedule o;
    memset(&o, 0, sizeof(o));
    o.num_steps = num_steps;
    o.lr = a->lr;
    o.warmup = a->warmup;
    o.final_frac = a->final_frac;
    o.weight_decay = a->weight_decay;
    o.beta1 = a->beta1;
    o.beta2 = a->beta2;
    o.eps = a->eps;
    o.grad_clip = a->grad_clip;
    return o;
}

// The settings where this run differs from the checkpoint it resumes, as "-x 250 -> 500, -l ..."
// (empty when none). Float flags print with %g: the parser reads that text back to the same float.
static void schedule_differences(const OptimizerSchedule* was, const OptimizerSchedule* now, char* out, size_t out_size) {
    out[0] = '\0';
    size_t n = 0;
    auto add = [&](const char* name, const char* from, const char* to) {
        if (n < out_size) { n += (size_t)snprintf(out + n, out_size - n, "%s%s %s -> %s", n > 0 ? ", " : "", name, from, to); }
    };
    char from[64], to[64];
    if (was->num_steps != now->num_steps) {
        snprintf(from, sizeof(from), "%d", was->num_steps);
        snprintf(to, sizeof(to), "%d", now->num_steps);
        add("-x", from, to);
    }
    if (was->warmup != now->warmup) {
        snprintf(from, sizeof(from), "%d", was->warmup);
        snprintf(to, sizeof(to), "%d", now->warmup);
        add("-u", from, to);
    }
    const struct { const char* name; float was, now; } floats[] = {
        {"-l", was->lr, now->lr}, {"-q", was->final_frac, now->final_frac}, {"-c", was->weight_decay, now->weight_decay},
        {"AdamW beta1", was->beta1, now->beta1}, {"AdamW beta2", was->beta2, now->beta2}, {"AdamW eps", was->eps, now->eps},
        {"gradient clip", was->grad_clip, now->grad_clip}};
    for (const auto& f : floats) {
        if (float_bits(f.was) != float_bits(f.now)) {
            snprintf(from, sizeof(from), "%g", (double)f.was);
            snprintf(to, sizeof(to), "%g", (double)f.now);
            add(f.name, from, to);
        }
    }
}

// A resume continues the checkpoint's run: with other -x, -l, -u, -q or -c the learning rate of
// the steps still to come would change (a longer -x stretches the cosine: the rate jumps up at the
// resumed step), so a difference is refused unless --reschedule 1 asks for it, and then
// resume_schedule_note says what changes. Returns 1, or 0 with a one-line message.
static int resume_schedule_check(const TrainArgs* a, int num_steps, char* msg, size_t msg_size) {
    if (!a->resuming || !a->state.has_schedule || a->reschedule) { return 1; }
    const OptimizerSchedule now = run_schedule(a, num_steps);
    char diff[1024];
    schedule_differences(&a->state.schedule, &now, diff, sizeof(diff));
    if (diff[0] == '\0') { return 1; }
    // steps as the step lines number them: the checkpoint of step N resumes at step N + 1
    snprintf(msg, msg_size, "-y 1: this run's settings differ from those of the run it resumes (%s, after step %d): %s%s; "
             "resuming would change that run from step %d on (HINT: give the checkpoint's values to continue "
             "that run unchanged, or add --reschedule 1 to change them from step %d)", a->state_path, a->state.step, diff,
             a->max_steps < 0 && now.num_steps != a->state.schedule.num_steps ? " (-x -1 is one epoch of -i)" : "",
             a->state.step + 1, a->state.step + 1);
    return 0;
}

// The line a resumed run prints (and logs) about its schedule: what --reschedule 1 changes from
// which step, or that an old checkpoint recorded nothing to compare. Returns 0 when there is
// nothing to say.
static int resume_schedule_note(const TrainArgs* a, int num_steps, char* line, size_t line_size) {
    if (!a->resuming) { return 0; }
    if (!a->state.has_schedule) {
        snprintf(line, line_size, "resume: %s is from before training states recorded the schedule: -x, -l, -u, -q and "
                 "-c are taken from this command line unchecked", a->state_path);
        return 1;
    }
    const OptimizerSchedule now = run_schedule(a, num_steps);
    char diff[1024];
    schedule_differences(&a->state.schedule, &now, diff, sizeof(diff));
    if (diff[0] == '\0') { return 0; }
    TrainArgs was = *a;
    was.lr = a->state.schedule.lr;
    was.warmup = a->state.schedule.warmup;
    was.final_frac = a->state.schedule.final_frac;
    const int step = a->state.step; // 0-based: the step lines call it step + 1
    snprintf(line, line_size, "reschedule: from step %d/%d on, %s; the learning rate of step %d goes from %.4e to %.4e "
             "(--reschedule 1)", step + 1, num_steps, diff, step + 1,
             (double)learning_rate(&was, step, a->state.schedule.num_steps), (double)learning_rate(a, step, num_steps));
    return 1;
}

// The steps this run trains (num_steps, from start_step after a resume): a resumed checkpoint past
// the end is refused, its schedule must be this run's (resume_schedule_check), and --profile N
// needs a warm-up step and N more. Returns 1, or 0 with a one-line message.
static int run_steps_check(const TrainArgs* a, int start_step, int num_steps, char* msg, size_t msg_size) {
    if (start_step > num_steps) {
        snprintf(msg, msg_size, "-y 1: %s is at step %d, past this run's %d steps (HINT: raise -x)", a->state_path,
                 start_step, num_steps);
        return 0;
    }
    if (!resume_schedule_check(a, num_steps, msg, msg_size)) { return 0; }
    if (a->profile_steps > 0 && num_steps - start_step < a->profile_steps + 1) {
        snprintf(msg, msg_size, "--profile %d: this run trains %d steps%s, expected at least %d: a warm-up step, then "
                 "the %d profiled (HINT: raise -x)", a->profile_steps, num_steps - start_step,
                 start_step > 0 ? " after resuming" : "", a->profile_steps + 1, a->profile_steps);
        return 0;
    }
    return 1;
}

static int train_num_steps(const TrainArgs* a, size_t train_tokens);

// The data and the output folder, checked from the host too (shard headers only, no tokens read),
// so that a bad -i/-j/-o or a resume of other data is reported as such on a machine with no GPU.
// train_run opens the loaders again. Returns 1, or 0 with a one-line message.
static int train_args_check_data(const TrainArgs* a, char* msg, size_t msg_size) {
    char why[4096];
    if (a->generate > 0) { return 1; } // generation reads no data and writes no files
    if (inspecting(a)) { return inspect_outputs_check(a, msg, msg_size); } // no data either
    DataLoader loader;
    if (!dataloader_init(&loader, a->train_pattern, (size_t)a->B, (size_t)a->T, 1, a->seed, why, sizeof(why))) {
        snprintf(msg, msg_size, "-i %s: %s", a->train_pattern, why);
        return 0;
    }
    if (a->resuming && !dataloader_set_state(&loader, &a->state.loader, why, sizeof(why))) {
        snprintf(msg, msg_size, "%s: %s", a->state_path, why);
        dataloader_free(&loader);
        return 0;
    }
    const int num_steps = train_num_steps(a, loader.num_tokens);
    dataloader_free(&loader);
    if (!run_steps_check(a, a->resuming ? a->state.step : 0, num_steps, msg, msg_size)) { return 0; }
    if (a->val_every > 0) {
        if (!dataloader_init(&loader, a->val_pattern, (size_t)a->B, (size_t)a->T, 0, a->seed, why, sizeof(why))) {
            snprintf(msg, msg_size, "-j %s: %s (HINT: -v 0 turns validation off)", a->val_pattern, why);
            return 0;
        }
        dataloader_free(&loader);
    }
    return output_dir_check(a, msg, msg_size);
}

// An error that ends a training run at the top of `step` (a checkpoint that cannot be written,
// a sample from non-finite logits): on stderr and in main.log. Returns the exit status, 1.
static int train_error(FILE* logf, int step, const char* msg) {
    char line[16384 + 64];
    snprintf(line, sizeof(line), "error: step %d: %s", step, msg);
    fprintf(stderr, "%s\n", line);
    logf_line(logf, line);
    return 1;
}

// how this run samples, in words: --generate's "sampling:" line and --check_args' report
static void sampling_describe(const TrainArgs* a, char* out, size_t out_size) {
    const SamplingSettings* s = &a->sampling;
    char k[32], p[32];
    if (s->top_k > 0) { snprintf(k, sizeof(k), "%d", s->top_k); } else { snprintf(k, sizeof(k), "off"); }
    if (s->top_p < 1.0f) { snprintf(p, sizeof(p), "%g", (double)s->top_p); } else { snprintf(p, sizeof(p), "off"); }
    snprintf(out, out_size, "temperature %g%s | top_k %s | top_p %s | seed %llu", (double)s->temperature,
             s->temperature == 0.0f ? " (greedy)" : "", k, p, a->seed);
}

// --check_args 1, once every check passed: what the run would do, in one line (exit status 0).
static int check_args_report(const TrainArgs* a) {
    char desc[256];
    gpt2_config_describe(&a->config, desc, sizeof(desc));
    const char* model = a->resuming ? a->state_path : a->from_file ? a->model_path : "random init";
    if (inspecting(a)) {
        printf("check_args: ok | scheme %s | %s | %s | would look at attention on %s and the induction probe, "
               "writing%s%s%s%s | nothing run or written\n", qkv_scheme_name(a->config.scheme), desc, model,
               a->prompt_tokens != NULL ? a->prompt_tokens : a->prompt != NULL ? "--prompt" : "the probe sentence",
               a->dump_attention != NULL ? " " : "",
               a->dump_attention != NULL ? a->dump_attention : "", a->attention_csv != NULL ? " " : "",
               a->attention_csv != NULL ? a->attention_csv : "");
    } else if (a->generate > 0) {
        char sampling[256];
        sampling_describe(a, sampling, sizeof(sampling));
        printf("check_args: ok | scheme %s | %s | %s | would generate %d tokens x %d sample%s | %s | nothing run or "
               "written\n", qkv_scheme_name(a->config.scheme), desc, model, a->generate, a->num_samples,
               a->num_samples > 1 ? "s" : "", sampling);
    } else {
        printf("check_args: ok | scheme %s | %s | %s | -b %d -t %d, %d accumulation steps | -o %s | nothing trained, "
               "created or written\n", qkv_scheme_name(a->config.scheme), desc, model, a->B, a->T, a->grad_accum_steps,
               a->output_dir != NULL ? a->output_dir : "none");
    }
    return 0;
}

// ----------------------------------------------------------------------------
// the training loop's bookkeeping, the same in both trainers

// the sampling RNG's first state for --seed (xorshift64* must not start at 0)
static unsigned long long sampling_rng_init(unsigned long long seed) {
    const unsigned long long rng = seed * 0x9E3779B97F4A7C15ULL + 0x2545F4914F6CDD1DULL;
    return rng != 0 ? rng : 1;
}

// the steps of the run: -x, or one epoch of the train data (at least one step)
static int train_num_steps(const TrainArgs* a, size_t train_tokens) {
    if (a->max_steps >= 0) { return a->max_steps; }
    const int steps = (int)(train_tokens / (size_t)a->total_batch);
    return steps >= 1 ? steps : 1;
}

// batches per validation: the whole validation set, or its first -m batches
static int val_num_batches(const TrainArgs* a, size_t loader_batches) {
    const int all = (int)loader_batches;
    return a->val_max_steps > 0 && a->val_max_steps < all ? a->val_max_steps : all;
}

// Whether the loop, at the top of `step` (0..num_steps, before that step's update), samples text or
// writes a checkpoint: every N steps and at the end, never at step 0. A resumed run skips the step
// it starts from: the interrupted run sampled there before it saved the RNG state, and that
// checkpoint is the one it resumes from.
// validation runs at the top of every val_every-th step and of the last one
static int val_due(const TrainArgs* a, int step, int num_steps) {
    return a->val_every > 0 && (step % a->val_every == 0 || step == num_steps);
}
static int sample_due(const TrainArgs* a, int step, int start_step, int num_steps) {
    return a->sample_every > 0 && step > 0 && !(a->resuming && step == start_step) &&
           (step % a->sample_every == 0 || step == num_steps);
}
static int checkpoint_due(const TrainArgs* a, int step, int start_step, int num_steps) {
    return a->checkpoint_every > 0 && step > 0 && step != start_step &&
           (step % a->checkpoint_every == 0 || step == num_steps);
}

// A signal seen at the top of `step` (g_train_stop_signal) ends the run there, after the sample
// due at that step (so that the saved RNG state is the one an uninterrupted run has there): a
// checkpoint at `step` when there is -o and a step was trained since the run started; the
// checkpoint at `step` is then the one -n would write, and -y 1 continues exactly.
static int stop_checkpoint_due(const TrainArgs* a, int step, int start_step) {
    return a->output_dir != NULL && step != start_step;
}
// says how the run ended on signal `sig` at the top of `step`, on stdout and in main.log; returns the
// exit code (128 + sig, the shell's convention for a process ended by a signal)
static int stop_report(const TrainArgs* a, int sig, int step, int start_step, const char* model_path, FILE* logf) {
    const char* name = train_signal_name(sig);
    char line[8400];
    const size_t line_size = sizeof(line);
    if (a->output_dir == NULL) {
        snprintf(line, line_size, "stopped by %s at step %d: no checkpoint was written (no -o)", name, step);
    } else if (step == start_step && a->resuming) {
        snprintf(line, line_size, "stopped by %s at step %d, before any step of this run: no new checkpoint, %s is still "
                 "the latest", name, step, a->state_path);
    } else if (step == start_step) {
        snprintf(line, line_size, "stopped by %s before the first step: nothing trained, no checkpoint was written", name);
    } else {
        snprintf(line, line_size, "stopped by %s at step %d: checkpoint %s written (-y 1 resumes from it)", name, step,
                 model_path);
    }
    printf("%s\n", line);
    logf_line(logf, line);
    return 128 + sig;
}

// what a checkpoint at `step` saves beside the model
// loader: where the training data stands at the top of `step` (dataloader_get_state)
static TrainState train_state_at(const TrainArgs* a, int step, int num_steps, int skipped, unsigned long long rng,
                                 const DataLoaderState* loader) {
    TrainState st;
    memset(&st, 0, sizeof(st));
    st.step = step;
    st.skipped = skipped;
    st.B = a->B;
    st.T = a->T;
    st.grad_accum_steps = a->grad_accum_steps;
    st.rng_state = rng;
    st.has_schedule = 1;
    st.schedule = run_schedule(a, num_steps);
    st.loader = *loader;
    return st;
}

// -o's main.log, appended to by a resumed run. Returns 1 with *logf (NULL without -o), or 0 after
// printing the error.
static int main_log_open(const TrainArgs* a, FILE** logf) {
    *logf = NULL;
    if (a->output_dir == NULL) { return 1; }
    char log_path[4096];
    snprintf(log_path, sizeof(log_path), "%s/main.log", a->output_dir);
    *logf = fopen(log_path, a->resuming ? "a" : "w");
    if (*logf == NULL) {
        fprintf(stderr, "error: %s: cannot open the log file (%s)\n", log_path, strerror(errno));
        return 0;
    }
    return 1;
}

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

#endif // TRAIN_COMMON_H
