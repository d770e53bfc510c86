/*
dev/trainer/run_checks.h: every check a run makes before its first step, in both trainers: the
output folder (-o) against the run's inputs, the inspection run's flags, train_args_resolve (the
model, the resume and its schedule, the batch) and the data; --check_args 1 reports them.
*/
#ifndef DEV_TRAINER_RUN_CHECKS_H
#define DEV_TRAINER_RUN_CHECKS_H

#include "flags.h"

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

// A file a flag names for the run to write (--profile_csv, --dump_attention, --attention_csv): a file
// name, not a folder, in an existing folder this process may create files in. Checked before the run,
// so that a typo in the folder is not found after hours of training. Returns 1, or 0 with a one-line
// message.
static int output_file_check(const char* flag, const char* path, char* msg, size_t msg_size) {
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
    return 1;
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
        if (!output_file_check("--profile_csv", a->profile_csv, msg, msg_size)) { return 0; }
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
// the induction probe, and each head's diagnostics (dev/trainer/attention_maps.h, dev/ATTENTION_MAPS.md)

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
        if (!output_file_check(flag, path, msg, msg_size)) { return 0; }
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

// --prompt or --prompt_tokens, read and checked against the model as the run will (dev/trainer/generate.h)
static int prompt_check(const TrainArgs* a, char* msg, size_t msg_size);

// The data and the output folder, checked from the host too (shard headers only, no tokens read),
// so that a bad -i/-j/-o or a resume of other data is reported as such on a machine with no GPU.
// train_run opens the loaders again. Returns 1, or 0 with a one-line message.
static int train_args_check_data(const TrainArgs* a, char* msg, size_t msg_size) {
    char why[4096];
    if (a->generate > 0) { return prompt_check(a, msg, msg_size); } // generation reads no data and writes no files
    if (inspecting(a)) { return prompt_check(a, msg, msg_size) && inspect_outputs_check(a, msg, msg_size); } // no data either
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

#endif // DEV_TRAINER_RUN_CHECKS_H
