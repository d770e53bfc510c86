/*
test_gpt2_cpu.cpp: checks the CPU trainer against the float64 PyTorch reference, llm.c's
test_gpt2.c style.

  build/test_gpt2_cpu_<scheme> <fixture name> <model.bin> <debug.bin>

Loads the checkpoint and the reference's debug state (dev/FORMATS.md), runs one forward and one
backward pass on the recorded batch and compares EVERY record of the debug file with this
trainer's tensor of the same name (a record it does not know is a failure: the reference adding a
record forces this test to follow). Then it runs the recorded number of AdamW steps on the same
batch and compares the losses and the gradient norms.

Built with -DATTENTION_TILED (build/test_gpt2_cpu_tiled_<scheme>) the trainer runs the tiled
attention twin, which keeps no attention matrix: "L<l>.att" then prints an info line instead of
a comparison, and "L<l>.att_lse" (each row's log-sum-exp, compared by both builds) checks the
softmax. Every layer's att_lse is required, like the loss, logits and gradients.

Prints one indented line per tensor ("  L0.q rel_err=1.2e-07") and then one line for the fixture:
"PASS cpu <fixture> (<n> tensors, worst rel_err=<x> at <name>)" or "FAIL cpu <fixture> (...)";
the tiled build says "cpu_tiled" instead of "cpu".
Bad input (missing/corrupt files) prints one "error: ..." line and exits 1 without a PASS/FAIL
line, so that the test script can check refusals.
*/
#define TESTING
#include "train_gpt2_cpu.cpp"
#include "../test/debug_state.h"

#include <string>
#include <vector>

// every tensor must be within this relative error of the float64 reference
static const double kThreshold = 1e-5;

typedef struct {
    const float* ptr; // NULL when this trainer has no such tensor
    size_t rows, cols, stride;
} OwnTensor;

static OwnTensor own(const float* ptr, size_t rows, size_t cols, size_t stride) {
    OwnTensor t;
    t.ptr = ptr;
    t.rows = rows;
    t.cols = cols;
    t.stride = stride;
    return t;
}

// this trainer's tensor for a debug-state record name (after forward + backward)
static OwnTensor find_own_tensor(const GPT2* model, const char* name) {
    const GPT2Config* c = &model->config;
    const size_t B = model->batch_size, T = model->seq_len, BT = B * T;
    const size_t C = c->channels, H = c->num_heads, M = c->mlp_hidden;
    const ActivationTensors* a = &model->acts;
    OwnTensor none = own(NULL, 0, 0, 0);
    if (strcmp(name, "encoded") == 0) { return own(a->encoded, 1, BT * C, 0); }
    if (strcmp(name, "lnf") == 0) { return own(a->lnf, 1, BT * C, 0); }
    if (strcmp(name, "logits") == 0) { return own(a->logits, BT, c->vocab_size, c->padded_vocab_size); }
    if (strcmp(name, "loss") == 0) { return own(&model->mean_loss, 1, 1, 0); }
    if (strncmp(name, "grad.", 5) == 0) {
        for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
            if (strcmp(name + 5, param_tensor_names[i]) == 0 && model->param_sizes[i] > 0) {
                size_t offset = 0;
                for (int j = 0; j < i; j++) { offset += model->param_sizes[j]; }
                return own(model->grads_memory + offset, 1, model->param_sizes[i], 0);
            }
        }
        return none;
    }
    int l = -1, consumed = 0;
    if (sscanf(name, "L%d.%n", &l, &consumed) != 1 || consumed == 0 || l < 0 || l >= c->num_layers) { return none; }
    const char* field = name + consumed;
    const size_t LC = (size_t)l * BT * C;
    if (strcmp(field, "ln1") == 0) { return own(a->ln1 + LC, 1, BT * C, 0); }
    if (strcmp(field, "qres_f") == 0) {
        return qkv_has_residual_query(&model->layout) ? own(a->qres_f + LC, 1, BT * C, 0) : none;
    }
    if (strcmp(field, "q") == 0 || strcmp(field, "k") == 0 || strcmp(field, "v") == 0) {
        const int r = field[0] == 'q' ? 0 : field[0] == 'k' ? 1 : 2;
        const QKVViews qkv = layer_qkv_views(model, a, l, BT);
        const QKVView<float> view = r == 0 ? qkv.q : r == 1 ? qkv.k : qkv.v;
        return own(view.ptr, BT, (size_t)qkv_layout_role(&model->layout, r).channels, (size_t)view.stride);
    }
    if (strcmp(field, "att") == 0) {
        return a->att != NULL ? own(a->att + (size_t)l * B * H * T * T, 1, B * H * T * T, 0) : none;
    }
    if (strcmp(field, "att_lse") == 0) { return own(a->att_lse + (size_t)l * B * H * T, 1, B * H * T, 0); }
    if (strcmp(field, "atty") == 0) { return own(a->atty + LC, 1, BT * C, 0); }
    if (strcmp(field, "residual2") == 0) { return own(a->residual2 + LC, 1, BT * C, 0); }
    if (strcmp(field, "ln2") == 0) { return own(a->ln2 + LC, 1, BT * C, 0); }
    if (strcmp(field, "fch") == 0) { return own(a->fch + (size_t)l * BT * M, 1, BT * M, 0); }
    if (strcmp(field, "fch_gelu") == 0) { return own(a->fch_gelu + (size_t)l * BT * M, 1, BT * M, 0); }
    if (strcmp(field, "residual3") == 0) { return own(a->residual3 + LC, 1, BT * C, 0); }
    return none;
}

typedef struct {
    int compared;
    int failed;
    double worst;
    std::string worst_name;
    std::string first_failure;
} Tally;

static void record_failure(Tally* t, const std::string& what) {
    t->failed++;
    if (t->first_failure.empty()) { t->first_failure = what; }
}

static void compare(Tally* tally, const char* name, const OwnTensor& mine, const DebugTensor* ref) {
    if (mine.rows * mine.cols != ref->numel) {
        printf("  %s size mismatch: reference has %zu values, this trainer %zu\n", name, ref->numel, mine.rows * mine.cols);
        record_failure(tally, std::string(name) + " size mismatch");
        return;
    }
    double err = mine.rows == 1 ? rel_error(mine.ptr, ref->f, ref->numel)
                                : rel_error_strided(mine.ptr, mine.stride, ref->f, mine.rows, mine.cols);
    printf("  %s rel_err=%.1e\n", name, err);
    tally->compared++;
    if (!(err <= kThreshold)) {
        char buf[128];
        snprintf(buf, sizeof(buf), "%s rel_err=%.1e > %.0e", name, err, kThreshold);
        record_failure(tally, buf);
    }
    if (!(err <= tally->worst)) { // NaN/inf also becomes the worst
        tally->worst = err;
        tally->worst_name = name;
    }
}

// the field of a per-layer record name ("L1.att" -> "att"), or NULL
static const char* layer_field(const char* name) {
    int l = -1, consumed = 0;
    if (sscanf(name, "L%d.%n", &l, &consumed) != 1 || consumed == 0) { return NULL; }
    return name + consumed;
}

static int die(const char* msg) {
    fprintf(stderr, "error: %s\n", msg);
    return 1;
}

// forward, backward and the recorded AdamW steps of a loaded model against the debug state: the
// PASS/FAIL line, or an error; returns the exit code
static int check_fixture(const char* fixture, const char* debug_path, GPT2* model, DebugState* ds) {
    char msg[1024];
    const int B = ds->B, T = ds->T;
    const DebugTensor* inputs = debug_state_find(ds, "inputs");
    const DebugTensor* targets = debug_state_find(ds, "targets");
    const DebugTensor* adamw = debug_state_find(ds, "adamw");
    if (inputs == NULL || targets == NULL || inputs->i == NULL || targets->i == NULL ||
        inputs->numel != (size_t)B * T || targets->numel != (size_t)B * T) {
        snprintf(msg, sizeof(msg), "%s: needs int32 records 'inputs' and 'targets' of shape (B=%d, T=%d)", debug_path, B, T);
        return die(msg);
    }
    if (ds->num_steps > 0 && (adamw == NULL || adamw->f == NULL || adamw->numel != 6)) {
        snprintf(msg, sizeof(msg), "%s: records %d optimizer steps but no float record 'adamw' of 6 values", debug_path, ds->num_steps);
        return die(msg);
    }
    if (!gpt2_forward(model, inputs->i, targets->i, B, T, msg, sizeof(msg))) {
        char full[1200];
        snprintf(full, sizeof(full), "%s: %s", debug_path, msg);
        return die(full);
    }
    gpt2_zero_grad(model);
    if (!gpt2_backward(model, msg, sizeof(msg))) { return die(msg); }

    printf("  %s\n", attention_path_description());
    Tally tally;
    tally.compared = 0;
    tally.failed = 0;
    tally.worst = 0.0;
    tally.worst_name = "-";
    const DebugTensor* step_losses = NULL;
    const DebugTensor* step_grad_norms = NULL;
    for (int n = 0; n < ds->num_tensors; n++) {
        const DebugTensor* ref = &ds->tensors[n];
        if (strcmp(ref->name, "inputs") == 0 || strcmp(ref->name, "targets") == 0 || strcmp(ref->name, "adamw") == 0) {
            continue; // the inputs of the test, not results
        }
        if (strcmp(ref->name, "step_losses") == 0) { step_losses = ref; continue; }
        if (strcmp(ref->name, "step_grad_norms") == 0) { step_grad_norms = ref; continue; }
        const char* field = layer_field(ref->name);
        if (kAttentionTiled && field != NULL && strcmp(field, "att") == 0) {
            printf("  %s: not stored by the tiled attention (info, not compared: see att_lse and atty)\n", ref->name);
            continue;
        }
        OwnTensor mine = find_own_tensor(model, ref->name);
        if (mine.ptr == NULL || ref->f == NULL) {
            printf("  %s: not a tensor this trainer knows (or not a float record)\n", ref->name);
            record_failure(&tally, std::string("unknown record ") + ref->name);
            continue;
        }
        compare(&tally, ref->name, mine, ref);
    }
    // the reference must at least cover the loss, the logits, every gradient and every layer's
    // att_lse (the one check of the tiled attention's softmax)
    std::vector<std::string> required = {"loss", "logits"};
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
        if (model->param_sizes[i] > 0) { required.push_back(std::string("grad.") + param_tensor_names[i]); }
    }
    for (int l = 0; l < model->config.num_layers; l++) { required.push_back("L" + std::to_string(l) + ".att_lse"); }
    for (size_t i = 0; i < required.size(); i++) {
        if (debug_state_find(ds, required[i].c_str()) == NULL) {
            printf("  %s: missing from the debug state\n", required[i].c_str());
            record_failure(&tally, "missing record " + required[i]);
        }
    }

    // the recorded AdamW steps on this same batch
    if (ds->num_steps > 0) {
        if (step_losses == NULL || step_grad_norms == NULL || step_losses->f == NULL || step_grad_norms->f == NULL ||
            step_losses->numel != (size_t)ds->num_steps || step_grad_norms->numel != (size_t)ds->num_steps) {
            printf("  step_losses/step_grad_norms: missing or not of %d values\n", ds->num_steps);
            record_failure(&tally, "step records missing");
        } else {
            const double* hp = adamw->f; // lr, beta1, beta2, eps, weight_decay, grad_clip
            std::vector<float> losses(ds->num_steps), norms(ds->num_steps);
            for (int step = 1; step <= ds->num_steps; step++) {
                if (!gpt2_forward(model, inputs->i, targets->i, B, T, msg, sizeof(msg))) { return die(msg); }
                gpt2_zero_grad(model);
                if (!gpt2_backward(model, msg, sizeof(msg))) { return die(msg); }
                losses[step - 1] = model->mean_loss;
                norms[step - 1] = (float)gpt2_update(model, (float)hp[0], (float)hp[1], (float)hp[2], (float)hp[3],
                                                     (float)hp[4], (float)hp[5], step);
                printf("  step %d: loss %.6f (ref %.6f) grad norm %.6f (ref %.6f)\n", step, losses[step - 1],
                       step_losses->f[step - 1], norms[step - 1], step_grad_norms->f[step - 1]);
            }
            compare(&tally, "step_losses", own(losses.data(), 1, ds->num_steps, 0), step_losses);
            compare(&tally, "step_grad_norms", own(norms.data(), 1, ds->num_steps, 0), step_grad_norms);
        }
    } else if (step_losses != NULL || step_grad_norms != NULL) {
        printf("  step records present but the header records 0 steps\n");
        record_failure(&tally, "step records without steps");
    }

    const char* path = kAttentionTiled ? "cpu_tiled" : "cpu";
    if (tally.failed == 0 && tally.compared > 0) {
        printf("PASS %s %s (%d tensors, worst rel_err=%.1e at %s)\n", path, fixture, tally.compared, tally.worst,
               tally.worst_name.c_str());
    } else {
        printf("FAIL %s %s (%d failed of %d records: %s; worst rel_err=%.1e at %s)\n", path, fixture, tally.failed,
               tally.compared + tally.failed, tally.compared == 0 ? "nothing compared" : tally.first_failure.c_str(),
               tally.worst, tally.worst_name.c_str());
    }
    return tally.failed == 0 && tally.compared > 0 ? 0 : 1;
}

int main(int argc, char** argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s <fixture name> <model.bin> <debug.bin>  (this binary: scheme %s, %s)\n",
                argc > 0 ? argv[0] : "test_gpt2_cpu", qkv_scheme_name(kQKVScheme), attention_path_description());
        return 1;
    }
    const char* fixture = argv[1];
    const char* model_path = argv[2];
    const char* debug_path = argv[3];
    char msg[1024];

    GPT2 model;
    if (!gpt2_build_from_checkpoint(&model, model_path, msg, sizeof(msg))) { return die(msg); }
    DebugState ds;
    if (!debug_state_load(debug_path, &ds, msg, sizeof(msg))) { gpt2_free(&model); return die(msg); }
    // one cleanup for every exit of the check, errors included (the sanitizer builds look for leaks)
    const int rc = check_fixture(fixture, debug_path, &model, &ds);
    debug_state_free(&ds);
    gpt2_free(&model);
    return rc;
}
