/*
dev/trainer/flags.h: the command line both trainers share, parsed before the GPU is touched:
TrainArgs, the defaults and the dN depth presets, -h, the parser, the learning-rate schedule, and
what a run of several processes is (-pn, -pr, -pi, launchers).
*/
#ifndef DEV_TRAINER_FLAGS_H
#define DEV_TRAINER_FLAGS_H

#include "sampling.h"
#include "step_guard.h"
#include "attention_maps.h"
#include "checkpoint_files.h"
#include "data_parallel.h"
#include "../../dataloader.h"

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
    int profile_steps;              // --profile N: time N steps after a warm-up step per sublayer (dev/trainer/profile.h)
    const char* profile_csv;        // --profile_csv FILE: that table as CSV too, NULL = not written
    int check_args;                 // --check_args 1: every check a run makes before its first step, then exit
    int allow_nonfinite;            // --allow_nonfinite 1: load NaN/Inf weights and moments (debugging)
    int reschedule;                 // --reschedule 1: a resume may change -x, -l, -u, -q, -c (resume_schedule_check)
    int model_given;                // -e was on the command line (not the default d12)
    // data parallelism (dev/trainer/data_parallel.h; llm.c's flags)
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
    printf("Profiling (dev/trainer/profile.h):\n");
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
    printf("More than one process (dev/trainer/data_parallel.h; the processes train one run with the global batch -d):\n");
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

// A hash of the flags that shape a run's updates, for the processes' agreement (dev/trainer/data_parallel.h),
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

#endif // DEV_TRAINER_FLAGS_H
