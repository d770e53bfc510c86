/*
test_gpt2.cu: checks train_gpt2.cu (included below) against the reference's debug states.

For every fixture of dev/fixtures/manifest.tsv whose scheme is this binary's scheme:
  load the fixture checkpoint, run the forward pass on the recorded batch and compare every
  record of the debug state (activations, logits, loss, every parameter gradient: the gradients are
  formed as the trainer's gradient accumulation forms them, the batch as 2 micro-steps of half the
  dloss added into the gradients), then run the
  recorded AdamW steps and compare the step losses and gradient norms. Each tensor's relative
  error ||out - ref|| / ||ref|| is printed; a fixture passes when every one is at or under the
  precision's tolerance (FP32 build, TF32 off: 1e-4; BF16 build: 2e-2, and 1e-1 for the gradient
  norms of the 10-step trajectory, which BF16 rounding alone moves that far). A record this test does
  not know is a failure (the reference added something the trainers must follow), and so is a
  record it expects that is missing (every activation, gradient and step record of the model).
Then the resume check: a training run (2 accumulation steps, validation, sampling, an epoch
boundary after the resume point, batches staged during the step before) with checkpoints, resumed
from the middle, must give bit-identical losses and the same final sampling RNG state as the uninterrupted run (on the
scheme's first fixture, and again on its first fixture with a flash kernel: resume_<scheme>_fused); the
uninterrupted run's main.log must have one well-formed line per step. The standard scheme also
reads an llm.c version 5 (bf16) checkpoint. No fixture of this scheme in the manifest is a FAIL.

A fixture whose head size has a flash kernel (64, 128; BF16 builds) runs twice, as
<fixture>/fused (the flash kernels: forward version 3, backward version 4) and
<fixture>/unfused (the `--attention unfused` path): the fused paths check each layer's att_lse, the unfused path its att
probabilities; q, k and v are read in place, where attention reads them.
Output: "  <fixture> <tensor> rel_err=..." details, one "PASS cuda-<precision> <fixture> (...)" or
"FAIL ..." line per fixture and path, one "PASS/FAIL cuda-<precision> kv_cache <fixture>" line per
fixture (run_kv_cache_check: greedy KV-cached generation against the full forward pass, logits within
1e-2 in BF16 and 1e-4 in FP32, the cache's bytes per token against qkv_kv_cache_bytes_per_token; and 3
sequences decoded together against each decoded alone, run_kv_batch_check),
then lt_tune_<scheme> (the tuned matmuls against --lt_tune 0, and a resume reading lt_algos.bin: run_tuning_check),
resume_<scheme>, log_<scheme>, bad_steps (NaN weights and -sg skipping; and v5_read); "SKIP ..." when
there is no GPU. Exit status 1 on any FAIL.

  make test_gpt2cu QKV=<scheme> [PRECISION=BF16|FP32] && ./test_gpt2cu[_<scheme>][_fp32] [manifest.tsv] [--fixtures-only | --tuning | --resume]

--fixtures-only runs the fixtures and their KV-cache checks (what differs between schemes) and prints
one SKIP line for the rest (the two option sets, resume, log, bad_steps, v5_read): that rest checks
the training loop's host code and the scheme-independent kernel paths, and takes most of a scheme's
time on the CPU runtime (dev/cudacpu), so dev/test/test_cudacpu.sh runs it once per precision, on
standard. --tuning runs lt_tune_<scheme> alone, on the scheme's first fixture (on the CPU runtime: with
CUDA_CPU_LT_ALGOS set, dev/cudacpu/cublaslt_cpu.h). --resume runs resume_<scheme> alone, on the same
fixture (the mutation self-test's quick way to it).
*/
#define TESTING
#include "train_gpt2.cu"
#include "dev/test/debug_state.h"
#include "dev/test/sampling_check.h"

#include <set>
#include <string>

#if PRECISION_IS_BF16
static const double TOLERANCE = 2e-2;
// The gradient norms of the 10-step trajectory: BF16 rounding alone moves q_identity_hd64_mqa's by
// 5.4e-2 (its norms climb to 7.5, and steps 6 and 8 move by 7% and 16%; every other fixture 1.5e-2 or
// less), measured on the reference itself with fp32 master weights, bf16 compute and fp32
// accumulation: dev/reference/check_reference.py bf16floor, on every fixture, holds this number too.
static const double STEP_GRAD_NORMS_TOLERANCE = 1e-1;
#else
static const double TOLERANCE = 1e-4;
static const double STEP_GRAD_NORMS_TOLERANCE = 1e-4;
#endif
static const char* const LABEL = "cuda-" PRECISION_NAME;

// The mean of the losses of every forward pass with targets since the last call (waits for the GPU),
// or -1 when there was none
static float gpt2_mean_loss(GPT2* model) {
    double sum_rows[2];
    gpt2_loss_sums(model, sum_rows);
    return loss_mean_of(sum_rows);
}

// the norm, then the update; returns the norm before clipping
static float gpt2_update(GPT2* model, float lr, float beta1, float beta2, float eps, float weight_decay, float grad_clip,
                         int t) {
    const float norm = gpt2_grad_norm(model);
    gpt2_update_apply(model, lr, beta1, beta2, eps, weight_decay, grad_clip, t);
    return norm;
}

// FNV-1a, 64 bits: the fixture runs' digests
static uint64_t fnv1a_bytes(uint64_t h, const void* p, size_t n) {
    const unsigned char* b = (const unsigned char*)p;
    for (size_t i = 0; i < n; i++) { h = (h ^ b[i]) * 1099511628211ull; }
    return h;
}

// a device tensor of floatX values, as host floats
static std::vector<float> fetch_x(const floatX* d, size_t n) {
    std::vector<float> out(n);
    std::vector<unsigned char> raw(n * sizeof(floatX) + 1);
    cudaCheck(cudaMemcpy(raw.data(), d, n * sizeof(floatX), cudaMemcpyDeviceToHost));
    host_x_to_floats(out.data(), raw.data(), n);
    return out;
}
static std::vector<float> fetch_f(const float* d, size_t n) {
    std::vector<float> out(n);
    cudaCheck(cudaMemcpy(out.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost));
    return out;
}

// rows (n, cols) of a row-strided device matrix, as host floats
static std::vector<float> fetch_rows(const floatX* d, size_t n, size_t cols, size_t stride) {
    std::vector<float> all = fetch_x(d, (n - 1) * stride + cols);
    std::vector<float> out(n * cols);
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < cols; j++) { out[i * cols + j] = all[i * stride + j]; }
    }
    return out;
}

// this implementation's tensor for an activation record name ("encoded", "L1.att", "lnf", ...);
// returns 1 with the tensor, 0 for a name that is not an activation of this model, 2 for one that
// the model's attention path does not keep (the fused path has no probabilities, only their
// log-sum-exp; the unfused path the reverse), with the reason in *why
static int fetch_activation(GPT2* model, const char* name, std::vector<float>* out, const char** why) {
    const GPT2Config* c = &model->config;
    const int B = model->B, T = model->T, C = c->channels, H = c->num_heads;
    const int hd = qkv_head_dim(c), M = c->mlp_hidden;
    const size_t BT = (size_t)B * T;
    Activations* a = &model->acts;
    if (strcmp(name, "encoded") == 0) { *out = fetch_x(a->encoded, BT * C); return 1; }
    if (strcmp(name, "lnf") == 0) { *out = fetch_x(a->lnf, BT * C); return 1; }
    int l = -1, consumed = 0;
    if (sscanf(name, "L%d.%n", &l, &consumed) != 1 || consumed == 0 || l < 0 || l >= c->num_layers) { return 0; }
    const char* what = name + consumed;
    const size_t lC = (size_t)l * BT * C;
    const int qres = qkv_has_residual_query(&model->layout);
    if ((strcmp(what, "ln1") == 0 || strcmp(what, "ln2") == 0) && model->recompute >= 2 && l > 0) {
        *why = "not kept with -r 2 (one layer's buffer; layer 0's, recomputed last, is checked)";
        return 2;
    }
    if (strcmp(what, "fch_gelu") == 0 && model->recompute >= 1) {
        *why = "not kept with -r 1 or 2 (recomputed in the backward pass)";
        return 2;
    }
    if (strcmp(what, "ln1") == 0) { *out = fetch_x(a->ln1 + lC, BT * C); return 1; }
    if (strcmp(what, "qres_f") == 0 && qres) { *out = fetch_x(a->qres_f + lC, BT * C); return 1; }
    if (strcmp(what, "q") == 0 || strcmp(what, "k") == 0 || strcmp(what, "v") == 0) {
        // read where attention reads them: in place, in the projection output, x or the residual query
        const int r = what[0] == 'q' ? 0 : (what[0] == 'k' ? 1 : 2);
        const floatX* qres_q = qres ? a->qres_q + lC : NULL;
        const floatX* x = a->ln1 + (model->recompute >= 2 ? 0 : lC);
        const floatX* qkv = a->qkv + (size_t)l * BT * model->layout.width;
        const AttnRows rows = qkv_role_view(&model->layout, r, hd, qkv_sources<const floatX>(qkv, x, qres_q));
        if (rows.ptr == x && model->recompute >= 2 && l > 0) { // an identity role reads ln1 itself
            *why = "not kept with -r 2 (this role is ln1, one layer's buffer; layer 0's is checked)";
            return 2;
        }
        *out = fetch_rows(rows.ptr, BT, (size_t)rows.heads * hd, (size_t)rows.stride);
        return 1;
    }
    if (strcmp(what, "att") == 0) {
        if (model->attn_fused) { *why = "not kept by the fused path (its att_lse is checked)"; return 2; }
        const size_t n = (size_t)B * H * T * T;
        *out = fetch_x(a->att + (size_t)l * n, n);
        return 1;
    }
    if (strcmp(what, "att_lse") == 0) {
        if (!model->attn_fused) { *why = "not formed by the unfused path (its att is checked)"; return 2; }
        const size_t n = (size_t)B * H * T;
        *out = fetch_f(a->att_lse + (size_t)l * n, n);
        return 1;
    }
    if (strcmp(what, "atty") == 0) { *out = fetch_x(a->atty + lC, BT * C); return 1; }
    if (strcmp(what, "residual2") == 0) { *out = fetch_x(a->residual2 + lC, BT * C); return 1; }
    if (strcmp(what, "ln2") == 0) { *out = fetch_x(a->ln2 + lC, BT * C); return 1; }
    if (strcmp(what, "fch") == 0) { *out = fetch_x(a->fch + (size_t)l * BT * M, BT * M); return 1; }
    if (strcmp(what, "fch_gelu") == 0) { *out = fetch_x(a->fch_gelu + (size_t)l * BT * M, BT * M); return 1; }
    if (strcmp(what, "residual3") == 0) { *out = fetch_x(a->residual3 + lC, BT * C); return 1; }
    return 0;
}

typedef struct {
    double worst, worst_tolerance; // the record with the largest error relative to its tolerance
    std::string worst_name;
    int failed;
    std::string why; // first hard failure (unknown record, shape mismatch)
} Verdict;

static void note(Verdict* v, const char* fixture, const char* name, double err, double tolerance = TOLERANCE) {
    if (tolerance != TOLERANCE) { printf("  %s %s rel_err=%.3e (tolerance %.0e)\n", fixture, name, err, tolerance); }
    else { printf("  %s %s rel_err=%.3e\n", fixture, name, err); }
    // a NaN becomes the worst and stays there
    const bool worse = std::isnan(err) ? !std::isnan(v->worst) : (!std::isnan(v->worst) && err / tolerance > v->worst / v->worst_tolerance);
    if (v->worst_name.empty() || worse) {
        v->worst = err;
        v->worst_tolerance = tolerance;
        v->worst_name = name;
    }
    if (!(err <= tolerance)) { v->failed = 1; }
}

static void hard_fail(Verdict* v, const char* fixture, const std::string& why) {
    printf("  %s %s\n", fixture, why.c_str());
    v->failed = 1;
    if (v->why.empty()) { v->why = why; }
}

// the trainer's options a fixture run uses; the defaults are the trainer's
typedef struct {
    int recompute;   // -r
    int gelu_fusion; // --gelu_fusion
    int bias_fusion; // --bias_fusion
    int logits_rows; // > 0: the classifier's chunk in the passes with targets (at most the allocated rows)
} RunOptions;
static const RunOptions kDefaultRun = {0, 1, 1, 0};

// the trainer's globals that train_run sets from its flags
static void set_run_globals(const RunOptions* opt) {
    g_gelu_fusion = opt->gelu_fusion;
    g_bias_fusion = opt->bias_fusion;
}
static const int GRAD_CHECK_MICRO_STEPS = 2;

// fused: the flash attention path (where the head size has one), else the unfused path
static int run_fixture(const char* fixture, const char* model_path, const char* debug_path, int fused,
                       const RunOptions* opt = &kDefaultRun) {
    char msg[16384];
    DebugState ds;
    if (!debug_state_load(debug_path, &ds, msg, sizeof(msg))) {
        printf("FAIL %s %s: %s\n", LABEL, fixture, msg);
        return 0;
    }
    GPT2Config config;
    int version = 0;
    if (!checkpoint_inspect(model_path, -1.0f, &config, &version, msg, sizeof(msg))) {
        printf("FAIL %s %s: %s\n", LABEL, fixture, msg);
        debug_state_free(&ds);
        return 0;
    }
    if (ds.T > config.max_seq_len) {
        printf("FAIL %s %s: debug state T=%d exceeds the model's max_seq_len %d\n", LABEL, fixture, ds.T, config.max_seq_len);
        debug_state_free(&ds);
        return 0;
    }
    const int B = ds.B, T = ds.T;
    const size_t BT = (size_t)B * T;
    const DebugTensor* rin = debug_state_find(&ds, "inputs");
    const DebugTensor* rtg = debug_state_find(&ds, "targets");
    const DebugTensor* radam = debug_state_find(&ds, "adamw");
    if (rin == NULL || rtg == NULL || rin->i == NULL || rtg->i == NULL || rin->numel != BT || rtg->numel != BT) {
        printf("FAIL %s %s: %s has no int32 (B, T) inputs/targets records\n", LABEL, fixture, debug_path);
        debug_state_free(&ds);
        return 0;
    }
    GPT2 model;
    set_run_globals(opt);
    gpt2_build(&model, &config, B, T, 1, opt->recompute, fused); // gpt2_build keeps fused only where a flash kernel exists
    gpt2_load_params(&model, model_path, version);
    Verdict v;
    v.worst = 0.0;
    v.worst_tolerance = TOLERANCE;
    v.failed = 0;

    // logits: a forward pass without targets keeps them; the pass with targets replaces them by dlogits
    gpt2_forward(&model, rin->i, NULL, 0.0f);
    const int V = config.vocab_size, Vp = config.padded_vocab_size;
    std::vector<float> logits = fetch_x(model.acts.output, BT * Vp);
    if (opt->logits_rows > 0 && opt->logits_rows < model.logits_rows) { model.logits_rows = opt->logits_rows; }
    // The gradients are checked as the trainer forms them with -d: the batch as 2 micro-steps of
    // dloss = 1 / (2 B T) each, added into the gradients (a kernel that overwrites instead of adding
    // leaves half of them). The AdamW steps below run one micro-step each, so both paths are checked.
    gpt2_zero_grad(&model); // first: the forward pass with targets forms the classifier's gradients
    for (int micro = 0; micro < GRAD_CHECK_MICRO_STEPS; micro++) {
        gpt2_forward(&model, rin->i, rtg->i, 1.0f / (float)(BT * GRAD_CHECK_MICRO_STEPS));
        gpt2_backward(&model);
    }
    const float loss = gpt2_mean_loss(&model); // the mean over the micro-steps' B*T losses each
    cudaCheck(cudaDeviceSynchronize());

    std::set<std::string> seen; // every record the reference must have written, checked after the loop
    for (int n = 0; n < ds.num_tensors; n++) {
        const DebugTensor* r = &ds.tensors[n];
        const char* name = r->name;
        seen.insert(name);
        if (strcmp(name, "inputs") == 0 || strcmp(name, "targets") == 0 || strcmp(name, "adamw") == 0) { continue; }
        if (strcmp(name, "step_losses") == 0 || strcmp(name, "step_grad_norms") == 0) { continue; } // after the steps
        if (r->f == NULL) { hard_fail(&v, fixture, std::string("record ") + name + " is not a float tensor"); continue; }
        if (strcmp(name, "logits") == 0) {
            if (r->numel != BT * (size_t)V) { hard_fail(&v, fixture, "logits record has the wrong size"); continue; }
            note(&v, fixture, name, rel_error_strided(logits.data(), (size_t)Vp, r->f, BT, (size_t)V));
            continue;
        }
        if (strcmp(name, "loss") == 0) {
            note(&v, fixture, name, rel_error(&loss, r->f, 1));
            continue;
        }
        if (strncmp(name, "grad.", 5) == 0) {
            int idx = -1;
            for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
                if (strcmp(name + 5, param_tensor_names[i]) == 0) { idx = i; }
            }
            if (idx < 0 || model.param_sizes[idx] == 0) {
                hard_fail(&v, fixture, std::string("unknown record ") + name + " (no such parameter in this model)");
                continue;
            }
            if (r->numel != model.param_sizes[idx]) {
                hard_fail(&v, fixture, std::string("record ") + name + " has the wrong size");
                continue;
            }
            std::vector<float> g = fetch_f(model.grads[idx], model.param_sizes[idx]);
            note(&v, fixture, name, rel_error(g.data(), r->f, r->numel));
            continue;
        }
        std::vector<float> mine;
        const char* why = "";
        const int got = fetch_activation(&model, name, &mine, &why);
        if (got == 2) {
            printf("  %s %s %s\n", fixture, name, why);
            continue;
        }
        if (got == 0) {
            hard_fail(&v, fixture, std::string("unknown record ") + name + " (HINT: the reference records something "
                      "test_gpt2.cu does not know; teach fetch_activation)");
            continue;
        }
        if (mine.size() != r->numel) {
            hard_fail(&v, fixture, std::string("record ") + name + " has the wrong size");
            continue;
        }
        note(&v, fixture, name, rel_error(mine.data(), r->f, r->numel));
    }

    // a record the reference did not write is a check that did not happen: fail rather than pass it
    {
        std::vector<std::string> need = {"encoded", "lnf", "logits", "loss"};
        static const char* const per_layer[] = {"ln1", "q", "k", "v", "att", "att_lse", "atty", "residual2", "ln2", "fch",
                                                "fch_gelu", "residual3"};
        for (int l = 0; l < config.num_layers; l++) {
            for (const char* w : per_layer) { need.push_back("L" + std::to_string(l) + "." + w); }
            if (qkv_has_residual_query(&model.layout)) { need.push_back("L" + std::to_string(l) + ".qres_f"); }
        }
        for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
            if (model.param_sizes[i] > 0) { need.push_back(std::string("grad.") + param_tensor_names[i]); }
        }
        if (ds.num_steps > 0) { need.push_back("step_losses"); need.push_back("step_grad_norms"); need.push_back("adamw"); }
        for (const std::string& nm : need) {
            if (seen.count(nm) == 0) { hard_fail(&v, fixture, "missing record " + nm + " in " + debug_path); }
        }
        if (ds.num_steps == 0 && (seen.count("step_losses") || seen.count("step_grad_norms"))) {
            hard_fail(&v, fixture, "step records present but the header says 0 steps");
        }
    }

    // validation's pass over the same batch (targets, no gradients) in 37-row chunks, after the comparisons
    // above (with -r 2 it overwrites the recomputed layer's buffers): their cross-entropy on its own
    // stream, with no backward to order each logits buffer's reuse, must give the same losses (on the CPU
    // runtime bit for bit: a row's logits do not depend on its chunk there; on a GPU cuBLASLt may sum
    // another chunk's rows in another order)
    const int rows_before = model.logits_rows;
    model.logits_rows = rows_before < 37 ? rows_before : 37;
    gpt2_forward(&model, rin->i, rtg->i, 0.0f);
    const float val_loss = gpt2_mean_loss(&model);
    model.logits_rows = rows_before;
#ifdef CUDACPU_CUDA_CPU_H
    const double val_tol = 0.0;
#else
    const double val_tol = PRECISION_IS_BF16 ? 2e-3 : 1e-5;
#endif
    if (!(fabs((double)val_loss - loss) <= val_tol * fabs((double)loss))) {
        char why[256];
        snprintf(why, sizeof(why), "the pass without gradients in 37-row chunks gives loss %.9g, the training passes %.9g "
                 "(the same batch; limit %.0e relative)", (double)val_loss, (double)loss, val_tol);
        hard_fail(&v, fixture, why);
    }
    // the recorded AdamW steps on the same batch (the first one reuses the gradients above)
    const DebugTensor* rsl = debug_state_find(&ds, "step_losses");
    const DebugTensor* rsn = debug_state_find(&ds, "step_grad_norms");
    if (ds.num_steps > 0) {
        if (radam == NULL || radam->f == NULL || radam->numel != 6 || rsl == NULL || rsn == NULL || rsl->f == NULL ||
            rsn->f == NULL || (int)rsl->numel != ds.num_steps || (int)rsn->numel != ds.num_steps) {
            hard_fail(&v, fixture, "the adamw / step_losses / step_grad_norms records are missing or malformed");
        } else {
            const float lr = (float)radam->f[0], b1 = (float)radam->f[1], b2 = (float)radam->f[2];
            const float eps = (float)radam->f[3], wd = (float)radam->f[4], clip = (float)radam->f[5];
            std::vector<float> losses((size_t)ds.num_steps), norms((size_t)ds.num_steps);
            for (int s = 0; s < ds.num_steps; s++) {
                if (s > 0) {
                    gpt2_zero_grad(&model);
                    gpt2_forward(&model, rin->i, rtg->i, 1.0f / (float)BT);
                    losses[(size_t)s] = gpt2_mean_loss(&model);
                    gpt2_backward(&model);
                } else {
                    losses[0] = loss;
                }
                norms[(size_t)s] = gpt2_update(&model, lr, b1, b2, eps, wd, clip, s + 1);
            }
            cudaCheck(cudaDeviceSynchronize());
            note(&v, fixture, "step_losses", rel_error(losses.data(), rsl->f, rsl->numel));
            note(&v, fixture, "step_grad_norms", rel_error(norms.data(), rsn->f, rsn->numel), STEP_GRAD_NORMS_TOLERANCE);
            printf("  %s step losses: %.6f -> %.6f (reference %.6f -> %.6f)\n", fixture, losses[0],
                   losses[(size_t)ds.num_steps - 1], rsl->f[0], rsl->f[ds.num_steps - 1]);
        }
    }
    // the run's bits in one number: a refactor that claims "bits unchanged" shows the same digests before
    // and after (logits, the gradients of the last step, the parameters after the steps)
    {
        uint64_t digest = 1469598103934665603ull;
        digest = fnv1a_bytes(digest, logits.data(), logits.size() * sizeof(float));
        std::vector<float> grads = fetch_f(model.grads_memory, model.num_parameters_padded);
        digest = fnv1a_bytes(digest, grads.data(), grads.size() * sizeof(float));
        std::vector<unsigned char> params(model.num_parameters_padded * sizeof(floatX));
        cudaCheck(cudaMemcpy(params.data(), model.params_memory, params.size(), cudaMemcpyDeviceToHost));
        digest = fnv1a_bytes(digest, params.data(), params.size());
        printf("  %s digest %016llx\n", fixture, (unsigned long long)digest);
    }
    if (v.failed) {
        if (!v.why.empty()) {
            printf("FAIL %s %s (%s; worst %s rel_err=%.3e, tolerance %.0e)\n", LABEL, fixture, v.why.c_str(),
                   v.worst_name.c_str(), v.worst, v.worst_tolerance);
        } else {
            printf("FAIL %s %s (worst %s rel_err=%.3e > tolerance %.0e)\n", LABEL, fixture, v.worst_name.c_str(), v.worst,
                   v.worst_tolerance);
        }
    } else {
        printf("PASS %s %s (worst %s rel_err=%.3e <= %.0e; loss %.6f; %d steps)\n", LABEL, fixture,
               v.worst_name.c_str(), v.worst, v.worst_tolerance, (double)loss, ds.num_steps);
    }
    gpt2_free(&model);
    debug_state_free(&ds);
    return !v.failed;
}

// ----------------------------------------------------------------------------
// KV-cached generation: gpt2_decode_step against the full forward pass that sampling used before

#if PRECISION_IS_BF16
static const double KV_LOGITS_TOLERANCE = 1e-2;
#else
static const double KV_LOGITS_TOLERANCE = 1e-4;
#endif

static int argmax_of(const float* x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++) {
        if (x[i] > x[best]) { best = i; }
    }
    return best;
}

// Batched decoding: KV_BATCH sequences decoded together (one cache, one step for all of them) against
// each sequence decoded alone (a cache of one), from different prompts of P tokens, then gen tokens
// each; sequence b samples with dev/test/sampling_check.h's grid setting b (greedy first) and its own
// coins. On the CPU runtime every row of a step is computed by the same code whatever the batch, so
// the logits must agree bit for bit and the tokens exactly. On a GPU cuBLASLt may pick another
// algorithm for M = KV_BATCH rows than for M = 1: the logits within KV_LOGITS_TOLERANCE, and a
// sequence may part from its single run only at a token the measured difference explains
// (sampling_flip_explained), after which it is not compared (counted).
#ifdef CUDACPU_CUDA_CPU_H
static const int KV_BATCH_EXACT = 1;
#else
static const int KV_BATCH_EXACT = 0;
#endif
static const int KV_BATCH = 3;

// sequences [first, first + count) of seqs (each holding its P prompt tokens) decoded together:
// appends gen sampled tokens to each and the gen logit rows they were drawn from to logits[b]
static void kv_batch_decode(GPT2* model, int first, int count, int P, int gen, std::vector<std::vector<int>>* seqs,
                            std::vector<std::vector<float>>* logits) {
    const int V = model->config.vocab_size;
    KVCache cache;
    kv_cache_build(&cache, model, P + gen, count);
    std::vector<float> step((size_t)count * V);
    std::vector<int> tokens((size_t)count);
    for (int pos = 0; pos < P + gen - 1; pos++) {
        for (int b = 0; b < count; b++) { tokens[(size_t)b] = (*seqs)[(size_t)(first + b)][(size_t)pos]; }
        gpt2_decode_step(model, &cache, tokens.data(), step.data());
        if (pos >= P - 1) { sampling_check_batch_step(step.data(), V, first, count, pos - (P - 1), gen, seqs, logits); }
    }
    kv_cache_free(&cache);
}

// Returns 1 when the batch agrees with the single runs; *summary says how, or what differs.
static int run_kv_batch_check(GPT2* model, const char* fixture, int P, int gen, std::string* summary) {
    const int V = model->config.vocab_size, n = KV_BATCH;
    std::vector<std::vector<int>> batched((size_t)n), single((size_t)n);
    std::vector<std::vector<float>> batched_logits((size_t)n), single_logits((size_t)n);
    for (int b = 0; b < n; b++) {
        for (int i = 0; i < P; i++) { batched[(size_t)b].push_back((7 + 31 * i + 101 * b) % V); }
        single[(size_t)b] = batched[(size_t)b];
    }
    kv_batch_decode(model, 0, n, P, gen, &batched, &batched_logits);
    for (int b = 0; b < n; b++) { kv_batch_decode(model, b, 1, P, gen, &single, &single_logits); }
    int ok = 1, parted = 0, same = 0;
    double num = 0.0, den = 0.0, max_diff = 0.0;
    std::string detail;
    for (int b = 0; b < n; b++) {
        int g = 0; // steps with equal inputs: up to and including the first token that differs
        while (g < gen && batched[(size_t)b][(size_t)(P + g)] == single[(size_t)b][(size_t)(P + g)]) { g++; }
        const int compared = g < gen ? g + 1 : gen;
        for (size_t i = 0; i < (size_t)compared * V; i++) {
            const double d = (double)batched_logits[(size_t)b][i] - single_logits[(size_t)b][i];
            num += d * d;
            den += (double)single_logits[(size_t)b][i] * single_logits[(size_t)b][i];
            max_diff = fmax(max_diff, fabs(d));
        }
        if (g == gen) {
            same++;
            continue;
        }
        Sampler sampler;
        sampler.settings = kSamplingGrid[b % kSamplingGridSize].settings;
        const float* ref = &single_logits[(size_t)b][(size_t)g * V];
        const double d = sampling_check_max_diff(&batched_logits[(size_t)b][(size_t)g * V], ref, V);
        const float coin = sampling_check_coins(kBatchCoinSeed + (unsigned long long)b, gen)[(size_t)g];
        const int mine = batched[(size_t)b][(size_t)(P + g)], theirs = single[(size_t)b][(size_t)(P + g)];
        if (!KV_BATCH_EXACT && sampling_flip_explained(&sampler, ref, V, mine, theirs, coin, d)) {
            parted++;
        } else {
            ok = 0;
            detail += " sequence " + std::to_string(b) + " (" + kSamplingGrid[b % kSamplingGridSize].name + ") step " +
                      std::to_string(g) + ": token " + std::to_string(mine) + " batched, " + std::to_string(theirs) + " alone;";
        }
    }
    const double rel = den > 0.0 ? sqrt(num / den) : sqrt(num);
    if (KV_BATCH_EXACT ? max_diff != 0.0 : !(rel <= KV_LOGITS_TOLERANCE)) { ok = 0; }
    char buf[512];
    snprintf(buf, sizeof(buf), "%d sequences decoded together = each alone: %d of %d with the same %d tokens (%d parted at "
             "an explained near-tie), logits max |diff| %.1e rel_err %.1e (%s)%s", n, same, n, gen, parted, max_diff, rel,
             KV_BATCH_EXACT ? "the CPU runtime: bit for bit" : "a GPU: within the tolerance", detail.c_str());
    *summary = buf;
    if (!ok) { printf("  kv_cache %s batch:%s\n", fixture, detail.c_str()); }
    return ok;
}

// Greedy generation of up to 16 tokens after a 4-token prompt with the KV cache; then, on the same
// tokens, the full forward pass with B = 1 that sample_text ran before the cache (T rounded up to 64,
// the model's attention path: fused where a flash kernel exists and `fused`), its last position's
// logits at each step. Passes when ||logits_cached - logits_full|| / ||logits_full|| over all steps is
// within KV_LOGITS_TOLERANCE, each generated token is the full pass's argmax (a different token only
// where the full pass's top two are within that tolerance of the row's largest |logit|: a near-tie,
// counted), the cache holds qkv_kv_cache_bytes_per_token x sizeof(floatX) / 2 bytes per token, and
// after kv_cache_reset the first step's logits come back bit for bit (the decode step is deterministic).
// The full pass reads the cached path's tokens (teacher forcing), so that one near-tie cannot turn
// every later step into a comparison of different sequences. Then, for each setting of
// dev/test/sampling_check.h's grid (greedy, temperature, top-k, top-p, both), the tokens sampled
// from the cached logits must be those sampled from the full pass on the same tokens with the same
// coins, a flip allowed only within the measured logit difference of a boundary (counted).
static int run_kv_cache_check(const char* fixture, const char* model_path, int fused) {
    char msg[16384];
    GPT2Config config;
    int version = 0;
    if (!checkpoint_inspect(model_path, -1.0f, &config, &version, msg, sizeof(msg))) {
        printf("FAIL %s kv_cache %s: %s\n", LABEL, fixture, msg);
        return 0;
    }
    const int V = config.vocab_size, Vp = config.padded_vocab_size;
    const int T = config.max_seq_len < 64 ? config.max_seq_len : 64;
    const int P = 4 < T ? 4 : T - 1;
    const int gen = T - P < 16 ? T - P : 16;
    if (P < 1 || gen < 1) {
        printf("FAIL %s kv_cache %s: max_seq_len %d is too short for a prompt and a generated token\n", LABEL, fixture, T);
        return 0;
    }
    GPT2 model;
    gpt2_build(&model, &config, 1, T, 1, 0, fused);
    gpt2_load_params(&model, model_path, version);
    KVCache cache;
    kv_cache_build(&cache, &model, P + gen, 1);
    std::vector<int> seq;
    for (int i = 0; i < P; i++) { seq.push_back((7 + 31 * i) % V); }
    std::vector<float> cached((size_t)gen * V), step((size_t)V), first((size_t)V);
    for (int pos = 0; pos < P + gen - 1; pos++) {
        gpt2_decode_step(&model, &cache, &seq[(size_t)pos], step.data());
        if (pos == 0) { first = step; }
        if (pos >= P - 1) {
            memcpy(&cached[(size_t)(pos - (P - 1)) * V], step.data(), (size_t)V * sizeof(float));
            seq.push_back(argmax_of(step.data(), V));
        }
    }
    kv_cache_reset(&cache);
    gpt2_decode_step(&model, &cache, &seq[0], step.data());
    const int reset_same = memcmp(step.data(), first.data(), (size_t)V * sizeof(float)) == 0;
    const size_t bytes = kv_cache_bytes_per_token(&cache);
    const size_t header_bf16 = qkv_kv_cache_bytes_per_token(&config);
    const int bytes_ok = bytes == header_bf16 * sizeof(floatX) / 2;
    kv_cache_free(&cache);

    std::vector<int> buf((size_t)T, 0);
    for (size_t i = 0; i < seq.size() && i < (size_t)T; i++) { buf[i] = seq[i]; }
    double num = 0.0, den = 0.0;
    int identical = 0, near_ties = 0, mismatches = 0;
    for (int g = 0; g < gen; g++) {
        const int len = P + g; // tokens the logits of generated token g see
        int T_pass = (len + 63) / 64 * 64;
        if (T_pass > model.T) { T_pass = model.T; }
        gpt2_stage_batch(&model, buf.data(), NULL, 1, T_pass);
        gpt2_forward_staged(&model, 0.0f);
        const std::vector<float> ref = fetch_x(model.acts.output + (size_t)(len - 1) * Vp, (size_t)V);
        const float* mine = &cached[(size_t)g * V];
        float max_abs = 0.0f;
        for (int i = 0; i < V; i++) {
            const double d = (double)mine[i] - ref[(size_t)i];
            num += d * d;
            den += (double)ref[(size_t)i] * ref[(size_t)i];
            max_abs = fmaxf(max_abs, fabsf(ref[(size_t)i]));
        }
        const int tok = seq[(size_t)(P + g)], best = argmax_of(ref.data(), V);
        if (tok == best) {
            identical++;
        } else if (ref[(size_t)best] - ref[(size_t)tok] <= KV_LOGITS_TOLERANCE * max_abs) {
            near_ties++;
        } else {
            mismatches++;
            printf("  kv_cache %s step %d: cached token %d, the full pass's argmax %d (logits %.6f vs %.6f)\n", fixture, g,
                   tok, best, ref[(size_t)tok], ref[(size_t)best]);
        }
    }
    const double rel = den > 0.0 ? sqrt(num / den) : sqrt(num);
    printf("  kv_cache %s logits rel_err=%.3e over %d steps; tokens:", fixture, rel, gen);
    for (int g = 0; g < gen; g++) { printf(" %d", seq[(size_t)(P + g)]); }
    printf("\n  kv_cache %s %zu bytes/token (header: %zu bf16 bytes/token)\n", fixture, bytes, header_bf16);

    // the sampling grid, each setting's tokens from the cache, then the full pass teacher-forced; 8
    // tokens per setting (the full passes are most of this check's time on the CPU runtime), on the
    // first fixture of a run only: the sampler is the same code for every fixture, and the greedy
    // check above compares every fixture's cached logits with the full pass's
    static int grid_runs = 0;
    const double grid_start = now_seconds();
    const int sgen = grid_runs++ == 0 ? (gen < 8 ? gen : 8) : 0;
    Sampler sampler;
    int s_same = 0, s_flips = 0, s_bad = 0;
    double worst_d = 0.0;
    std::string per_setting;
    kv_cache_build(&cache, &model, P + sgen, 1);
    for (int s = 0; sgen > 0 && s < kSamplingGridSize; s++) {
        sampler.settings = kSamplingGrid[s].settings;
        const std::vector<float> coins = sampling_check_coins(1337 + (unsigned long long)s, sgen);
        kv_cache_reset(&cache);
        std::vector<int> sseq(seq.begin(), seq.begin() + P);
        for (int pos = 0; pos < P + sgen - 1; pos++) {
            gpt2_decode_step(&model, &cache, &sseq[(size_t)pos], step.data());
            if (pos >= P - 1) {
                const int g = pos - (P - 1);
                memcpy(&cached[(size_t)g * V], step.data(), (size_t)V * sizeof(float));
                sseq.push_back(sample_token(&sampler, step.data(), V, coins[(size_t)g]));
            }
        }
        for (size_t i = 0; i < sseq.size() && i < (size_t)T; i++) { buf[i] = sseq[i]; }
        int same = 0, flips = 0, bad = 0;
        for (int g = 0; g < sgen; g++) {
            const int len = P + g;
            int T_pass = (len + 63) / 64 * 64;
            if (T_pass > model.T) { T_pass = model.T; }
            gpt2_stage_batch(&model, buf.data(), NULL, 1, T_pass);
            gpt2_forward_staged(&model, 0.0f);
            const std::vector<float> ref = fetch_x(model.acts.output + (size_t)(len - 1) * Vp, (size_t)V);
            const int mine = sseq[(size_t)len], theirs = sample_token(&sampler, ref.data(), V, coins[(size_t)g]);
            const double d = sampling_check_max_diff(&cached[(size_t)g * V], ref.data(), V);
            worst_d = fmax(worst_d, d);
            if (mine == theirs) {
                same++;
            } else if (sampling_flip_explained(&sampler, ref.data(), V, mine, theirs, coins[(size_t)g], d)) {
                flips++;
            } else {
                bad++;
                printf("  kv_cache %s sampling %s step %d: cached token %d, the full pass's %d (coin %.7f, logit "
                       "difference %.1e; %s)\n", fixture, kSamplingGrid[s].name, g, mine, theirs, (double)coins[(size_t)g], d,
                       sampling_flip_detail(sampler.settings, ref.data(), &cached[(size_t)g * V], V, mine, theirs, d).c_str());
            }
        }
        per_setting += std::string(s > 0 ? ", " : "") + kSamplingGrid[s].name + " " + std::to_string(same) + "/" +
                       std::to_string(sgen) + (flips > 0 ? " (" + std::to_string(flips) + " flips)" : "");
        s_same += same;
        s_flips += flips;
        s_bad += bad;
    }
    kv_cache_free(&cache);
    const double batch_start = now_seconds();
    std::string batch_summary;
    const int batch_ok = run_kv_batch_check(&model, fixture, P, gen, &batch_summary);
    printf("  kv_cache %s batch: %s (%.1f s)\n", fixture, batch_summary.c_str(), now_seconds() - batch_start);
    gpt2_free(&model);
    if (sgen > 0) {
        printf("  kv_cache %s sampled tokens equal to the full pass's: %s (%.1f s)\n", fixture, per_setting.c_str(),
               now_seconds() - grid_start);
    }
    const int ok = rel <= KV_LOGITS_TOLERANCE && mismatches == 0 && bytes_ok && reset_same && s_bad == 0 && batch_ok;
    char sampling[256];
    if (sgen > 0) {
        snprintf(sampling, sizeof(sampling), "%d settings x %d tokens: %d the full pass's, %d flips within the logit "
                 "difference (at most %.1e)", kSamplingGridSize, sgen, s_same, s_flips, worst_d);
    } else {
        snprintf(sampling, sizeof(sampling), "the grid ran on this run's first fixture");
    }
    if (ok) {
        printf("PASS %s kv_cache %s (%d greedy tokens: %d the full pass's argmax, %d near-ties; logits rel_err=%.3e <= %.0e; "
               "%zu bytes/token = the header's bf16 %zu x %zu / 2; reset repeats step 0 bit for bit; sampling: %s; %s)\n",
               LABEL, fixture, gen, identical, near_ties, rel, KV_LOGITS_TOLERANCE, bytes, header_bf16, sizeof(floatX),
               sampling, batch_summary.c_str());
    } else {
        printf("FAIL %s kv_cache %s (logits rel_err=%.3e (tolerance %.0e), %d of %d tokens not the full pass's argmax, "
               "%zu bytes/token (expected %zu), reset %s, %d sampled tokens not the full pass's beyond the logit "
               "difference; %s)\n", LABEL, fixture, rel, KV_LOGITS_TOLERANCE, mismatches, gen, bytes,
               header_bf16 * sizeof(floatX) / 2, reset_same ? "repeats step 0" : "does NOT repeat step 0", s_bad,
               batch_summary.c_str());
    }
    return ok;
}

// ----------------------------------------------------------------------------
// resume: 10 steps uninterrupted vs. 5 steps, checkpoint, and a resumed process-equivalent run

static int write_token_shard(const char* path, int num_tokens, int vocab, unsigned long long seed) {
    FILE* f = fopen(path, "wb");
    if (f == NULL) { return 0; }
    int header[256];
    memset(header, 0, sizeof(header));
    header[0] = 20240520;
    header[1] = 1;
    header[2] = num_tokens;
    fwrite(header, sizeof(int), 256, f);
    unsigned long long s = seed | 1;
    for (int i = 0; i < num_tokens; i++) {
        const uint16_t tok = (uint16_t)(random_u32(&s) % (unsigned)vocab);
        fwrite(&tok, sizeof(uint16_t), 1, f);
    }
    return fclose(f) == 0;
}

static void resume_args(TrainArgs* a, const char* model_path, const char* shard, const char* out_dir, float* record) {
    train_args_defaults(a);
    a->model_arg = model_path;
    a->train_pattern = shard;
    a->output_dir = out_dir;
    a->B = 4;
    a->T = 32;
    a->max_steps = 10;
    a->lr = 1e-3f;
    a->warmup = 2;
    a->final_frac = 0.1f;
    a->weight_decay = 0.1f;
    // validation every 3 steps (at 0, 3, 6, 9, 10; the resumed run at 6, 9, 10: it must not disturb
    // training) and sampling every 5 steps (the resumed run must continue the saved RNG). The steps
    // without validation have their first batch staged during the step before (stages_ahead), the
    // step of the checkpoint at 5 included.
    a->val_pattern = shard;
    a->val_every = 3;
    a->val_max_steps = 2;
    a->sample_every = 5;
    a->gen_T = 4;
    a->total_batch = 2 * 4 * 32; // two accumulation steps: the data position moves twice per step
    a->loss_record = record;
    a->loss_record_size = 10;
    a->overwrite = 1; // the folders of this test's previous invocation
}

// a passed check's folder of its own (mkdtemp), removed; said when it cannot be
static void remove_run_folder(const char* dir, const char* check, const char* scheme) {
    const std::string rm = std::string("rm -rf '") + dir + "'";
    if (system(rm.c_str()) != 0) { printf("  %s%s: could not remove %s\n", check, scheme, dir); }
}

// a file's bytes (empty when it cannot be read)
static std::vector<char> file_bytes(const char* path) {
    std::vector<char> bytes;
    FILE* f = fopen(path, "rb");
    if (f == NULL) { return bytes; }
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0) { bytes.insert(bytes.end(), buf, buf + n); }
    fclose(f);
    return bytes;
}

// --lt_tune (matmul_lt's tuner) on the trainer's own runs of 10 steps (resume_args) with checkpoints at
// steps 5 and 10, each starting with an empty choice cache as a fresh process does: U with --lt_tune 0;
// T tuned; R resumes T from step 5 (T's step-10 pair moved aside), reading T's lt_algos.bin. T's losses
// must be U's within what another summation order can change (1e-5 relative in FP32, 1e-2 in BF16:
// tuning never changes the training), and R's step-10 model and state T's bit for bit (the file, not a
// new tuning, decides: a loss seldom shows a last bit). On the CPU runtime with CUDA_CPU_LT_ALGOS > 1
// the tuning must choose some candidate other than the heuristic's first, run it (the runtime counts the
// calls that do), and its other summation order must show in T's step-10 model against U's (or the check
// proves nothing); with
// CUDA_CPU_LT_BROKEN_ALGO it must reject that algorithm, and with CUDA_CPU_LT_SLOW_EPILOGUE it must
// choose, and run, the matmul without that epilogue plus the trainer's own kernel.
static int run_tuning_check(const char* model_path) {
    char msg[16384];
    const char* scheme = qkv_scheme_name(kQKVScheme);
    char dir[512], shard[640], dir_u[640], dir_t[640];
    // a folder of its own: the mutation self-test runs several of these at once
    snprintf(dir, sizeof(dir), "build/test_cuda_lt_tune_%s_%s_XXXXXX", scheme, PRECISION_NAME);
    const int made = make_dir("build") && mkdtemp(dir) != NULL;
    snprintf(shard, sizeof(shard), "%s/tokens_train_000.bin", dir);
    snprintf(dir_u, sizeof(dir_u), "%s/untuned", dir);
    snprintf(dir_t, sizeof(dir_t), "%s/tuned", dir);
    GPT2Config config;
    int version = 0;
    if (!made || !make_dir(dir_u) || !make_dir(dir_t) ||
        !checkpoint_inspect(model_path, -1.0f, &config, &version, msg, sizeof(msg)) ||
        !write_token_shard(shard, 4 * 32 * 13 + 1, config.vocab_size, 7)) {
        printf("FAIL %s lt_tune_%s: cannot set up %s (%s)\n", LABEL, scheme, dir, msg);
        return 0;
    }
    float lu[10], lt[10], lr[10];
    for (int i = 0; i < 10; i++) { lu[i] = lt[i] = lr[i] = NAN; }
    TrainArgs u, t, r;
    resume_args(&u, model_path, shard, dir_u, lu);
    u.lt_tune = 0;
    u.checkpoint_every = 5;
    g_lt_cache.clear();
    int ok = train_args_resolve(&u, msg, sizeof(msg)) && train_run(&u) == 0;
    resume_args(&t, model_path, shard, dir_t, lt);
    t.checkpoint_every = 5;
    g_lt_cache.clear();
#ifdef CUDACPU_CUDA_CPU_H
    cudacpu::lt_calls_not_first = 0;
#endif
    ok = ok && train_args_resolve(&t, msg, sizeof(msg)) && train_run(&t) == 0;
#ifdef CUDACPU_CUDA_CPU_H
    const long long calls_not_first = cudacpu::lt_calls_not_first; // T's calls that ran a choice other than the first
#endif
    // pairs: configurations whose epilogue our own kernel does (own_epilogue); fallbacks_run: those whose
    // caller's matmul without the epilogue (its m, n, k, LT_PLAIN: key fields 0-2 and 17) ran in the window
    int configs = 0, pairs = 0, fallbacks_run = 0;
    for (size_t i = 0; i < g_lt_cache.size(); i++) {
        configs += g_lt_cache[i].second.in_pass;
        if (!g_lt_cache[i].second.own_epilogue) { continue; }
        pairs++;
        const LtKey* e = &g_lt_cache[i].first;
        for (size_t j = 0; j < g_lt_cache.size(); j++) {
            const LtKey* f = &g_lt_cache[j].first;
            if (f->v[0] == e->v[0] && f->v[1] == e->v[1] && f->v[2] == e->v[2] && f->v[17] == LT_PLAIN &&
                g_lt_cache[j].second.pass_calls > 0) {
                fallbacks_run++;
                break;
            }
        }
    }
    const int not_first = g_lt_tuner.not_first, rejected = g_lt_tuner.rejected, timed = g_lt_tuner.timed;
    char model_u[1024], model_t[1024], state_t[1024], model_t_kept[1100], state_t_kept[1100];
    snprintf(model_u, sizeof(model_u), "%s/model_%08d.bin", dir_u, 10);
    snprintf(model_t, sizeof(model_t), "%s/model_%08d.bin", dir_t, 10);
    snprintf(state_t, sizeof(state_t), "%s/state_%08d.bin", dir_t, 10);
    snprintf(model_t_kept, sizeof(model_t_kept), "%s.uninterrupted", model_t);
    snprintf(state_t_kept, sizeof(state_t_kept), "%s.uninterrupted", state_t);
    ok = ok && rename(model_t, model_t_kept) == 0 && rename(state_t, state_t_kept) == 0;
    resume_args(&r, model_path, shard, dir_t, lr);
    r.resume = 1;
    r.overwrite = 0;
    r.checkpoint_every = 5;
    g_lt_cache.clear();
    ok = ok && train_args_resolve(&r, msg, sizeof(msg)) && r.resuming && r.state.step == 5 && train_run(&r) == 0;
    const int read = g_lt_tuner.read;
    g_lt_cache.clear(); // the next checks start as a fresh process does
    if (!ok) {
        printf("FAIL %s lt_tune_%s: a run failed (%s)\n", LABEL, scheme, msg);
        return 0;
    }
    double worst = 0.0;
    for (int i = 0; i < 10; i++) { worst = fmax(worst, fabs((double)lt[i] - lu[i]) / fmax(fabs((double)lu[i]), 1e-30)); }
    const double tol = PRECISION_IS_BF16 ? 1e-2 : 1e-5;
    const std::vector<char> mt = file_bytes(model_t_kept), mr = file_bytes(model_t), mu = file_bytes(model_u);
    const int same_resumed = memcmp(lt + 5, lr + 5, 5 * sizeof(float)) == 0 && !mt.empty() && mt == mr &&
                             file_bytes(state_t_kept) == file_bytes(state_t);
    const char* vacuous = NULL; // what makes the check prove nothing on this runtime
#ifdef CUDACPU_CUDA_CPU_H
    if (cudacpu::lt_algo_count() > 1 && not_first == 0) { vacuous = "several algorithms offered, yet every choice was the first"; }
    if (cudacpu::lt_algo_count() > 1 && (calls_not_first == 0 || mt == mu)) {
        vacuous = "other algorithms chosen, yet every call ran the heuristic's first (or the tuned model is the untuned one bit for bit)";
    }
    if (cudacpu::lt_broken_algo() >= 0 && rejected == 0) { vacuous = "a broken algorithm offered, yet none was rejected"; }
    if (cudacpu::lt_slow_epilogue() >= 0 && pairs == 0) {
        vacuous = "a slow epilogue offered, yet the tuning never chose the matmul without it and our own kernel";
    }
#endif
    if (fallbacks_run < pairs) { vacuous = "the matmul without the epilogue was chosen, yet its caller never ran it"; }
    printf("  lt_tune_%s: %d configurations, %d timed, %d not cuBLASLt's first choice, %d epilogues as the matmul without "
           "it and our own kernel (%d of them run), %d candidates rejected; the resume read %d choices; losses tuned vs "
           "--lt_tune 0 within %.3g (limit %.0e), step-10 models %s; resumed to step 10: %s\n", scheme, configs, timed,
           not_first, pairs, fallbacks_run, rejected, read, worst, tol, mt == mu ? "the same" : "differ",
           same_resumed ? "losses, model and state bit-identical" : "differ");
    if (worst <= tol && same_resumed && read == configs && vacuous == NULL && isfinite(lt[9])) {
        remove_run_folder(dir, "lt_tune_", scheme);
        printf("PASS %s lt_tune_%s (%d configurations, %d not cuBLASLt's first, %d epilogues by our own kernel; losses "
               "within %.3g of --lt_tune 0; resumed from lt_algos.bin: model and state bit for bit)\n", LABEL, scheme,
               configs, not_first, pairs, worst);
        return 1;
    }
    printf("FAIL %s lt_tune_%s (%s; the runs are in %s)\n", LABEL, scheme,
           vacuous != NULL ? vacuous :
           !(worst <= tol) ? "the tuned run's losses differ from --lt_tune 0's beyond the limit" :
           !same_resumed ? "the resumed losses differ from the tuned run's: the saved choices were not used" :
           read != configs ? "the resume did not read every choice from lt_algos.bin" : "non-finite loss", dir);
    return 0;
}

// tag: "" for the scheme's first fixture, "_fused" for its first fixture on the flash attention path.
// own_dir: a new folder, removed after a pass (--resume: the mutation self-test runs several at once);
// else the fixed one, whose uninterrupted main.log check_main_log reads next.
static int run_resume_check(const char* model_path, const char* tag, int own_dir) {
    char msg[16384];
    char scheme[128];
    snprintf(scheme, sizeof(scheme), "%s%s", qkv_scheme_name(kQKVScheme), tag);
    char dir[512], shard[640], dir_a[640], dir_b[640];
    snprintf(dir, sizeof(dir), "build/test_cuda_resume_%s_%s%s", scheme, PRECISION_NAME, own_dir ? "_XXXXXX" : "");
    const int made = make_dir("build") && (own_dir ? mkdtemp(dir) != NULL : make_dir(dir));
    snprintf(shard, sizeof(shard), "%s/tokens_train_000.bin", dir);
    snprintf(dir_a, sizeof(dir_a), "%s/uninterrupted", dir);
    snprintf(dir_b, sizeof(dir_b), "%s/resumed", dir);
    if (!made || !make_dir(dir_a) || !make_dir(dir_b)) {
        printf("FAIL %s resume_%s: cannot create %s\n", LABEL, scheme, dir);
        return 0;
    }
    GPT2Config config;
    int version = 0;
    if (!checkpoint_inspect(model_path, -1.0f, &config, &version, msg, sizeof(msg))) {
        printf("FAIL %s resume_%s: %s\n", LABEL, scheme, msg);
        return 0;
    }
    // 13 windows of B*T: epoch 0 ends inside step 7, after the resume point (the state must carry the epoch)
    if (!write_token_shard(shard, 4 * 32 * 13 + 1, config.vocab_size, 7)) {
        printf("FAIL %s resume_%s: cannot write %s\n", LABEL, scheme, shard);
        return 0;
    }
    float la[10], lb[10], lc[10];
    for (int i = 0; i < 10; i++) { la[i] = lb[i] = lc[i] = NAN; }
    // A: 10 steps, no checkpoints, validating at every step (on one batch: no more validation time than
    // B's): so no step's first batch is staged during the step before, and B's and C's, which are, must
    // read the same batches
    TrainArgs a;
    resume_args(&a, model_path, shard, dir_a, la);
    a.val_every = 1;
    a.val_max_steps = 1;
    if (!train_args_resolve(&a, msg, sizeof(msg)) || train_run(&a) != 0) {
        printf("FAIL %s resume_%s: the uninterrupted run failed: %s\n", LABEL, scheme, msg);
        return 0;
    }
    // B: the same run writing checkpoints at steps 5 and 10; then the step-10 pair is removed and
    // C resumes from step 5
    TrainArgs b;
    resume_args(&b, model_path, shard, dir_b, lb);
    b.checkpoint_every = 5;
    if (!train_args_resolve(&b, msg, sizeof(msg)) || train_run(&b) != 0) {
        printf("FAIL %s resume_%s: the checkpointing run failed: %s\n", LABEL, scheme, msg);
        return 0;
    }
    char path[1024];
    snprintf(path, sizeof(path), "%s/model_%08d.bin", dir_b, 10);
    remove(path);
    snprintf(path, sizeof(path), "%s/state_%08d.bin", dir_b, 10);
    remove(path);
    TrainArgs c;
    resume_args(&c, "d12", shard, dir_b, lc); // -e is ignored when a checkpoint is found
    c.resume = 1;
    c.overwrite = 0;
    c.checkpoint_every = 5;
    if (!train_args_resolve(&c, msg, sizeof(msg))) {
        printf("FAIL %s resume_%s: %s\n", LABEL, scheme, msg);
        return 0;
    }
    if (!c.resuming || c.state.step != 5) {
        printf("FAIL %s resume_%s: expected to resume from step 5 in %s\n", LABEL, scheme, dir_b);
        return 0;
    }
    if (train_run(&c) != 0) {
        printf("FAIL %s resume_%s: the resumed run failed\n", LABEL, scheme);
        return 0;
    }
    int same_ab = memcmp(la, lb, sizeof(la)) == 0;
    int same_ac = memcmp(la + 5, lc + 5, 5 * sizeof(float)) == 0;
    const int same_rng = a.final_rng == b.final_rng && a.final_rng == c.final_rng;
    printf("  resume_%s sampling rng at the end: uninterrupted %016llx checkpointing %016llx resumed %016llx\n", scheme,
           a.final_rng, b.final_rng, c.final_rng);
    for (int i = 0; i < 10; i++) {
        printf("  resume_%s step %d loss uninterrupted %.9g checkpointing %.9g resumed %.9g\n", scheme, i + 1, la[i], lb[i],
               i >= 5 ? lc[i] : NAN);
    }
    if (same_ab && same_ac && same_rng && isfinite(la[9])) {
        if (own_dir) { remove_run_folder(dir, "resume_", scheme); }
        printf("PASS %s resume_%s (steps 6-10 after resuming at step 5 are bit-identical to the uninterrupted run; "
               "final loss %.6f)\n", LABEL, scheme, la[9]);
        return 1;
    }
    printf("FAIL %s resume_%s (%s)\n", LABEL, scheme,
           !same_ab ? "a run writing checkpoints differs from one that does not"
                    : (!same_ac ? "the resumed losses differ from the uninterrupted run"
                                : (!same_rng ? "the sampling RNG of the resumed run differs" : "non-finite loss")));
    return 0;
}

// llm.c's bf16 checkpoint (version 5, gpt2_124M_bf16.bin's format): an fp32 model of llm.c's
// shape is rounded to bf16 (nearest even) into a v5 file; loading it must give exactly the rounded
// values, tensor by tensor (and loading the fp32 file, rounded the same way in BF16 builds).
static uint16_t test_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    u = u + 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
static int run_v5_check(const char* fp32_path) {
    char msg[16384];
    GPT2Config config;
    int version = 0;
    if (!checkpoint_inspect(fp32_path, -1.0f, &config, &version, msg, sizeof(msg))) {
        printf("FAIL %s v5_read: %s\n", LABEL, msg);
        return 0;
    }
    const char* v5_path = "build/test_cuda_v5_" PRECISION_NAME ".bin";
    FILE* in = fopen(fp32_path, "rb");
    FILE* out = fopen(v5_path, "wb");
    const size_t np = gpt2_num_parameters(&config);
    std::vector<float> vals(np);
    int header[256];
    int ok = in != NULL && out != NULL && fread(header, sizeof(int), 256, in) == 256 && fread(vals.data(), sizeof(float), np, in) == np;
    if (ok) {
        header[1] = CHECKPOINT_VERSION_LLMC_BF16;
        for (int k = 8; k < 256; k++) { header[k] = 0; }
        std::vector<uint16_t> h(np);
        for (size_t i = 0; i < np; i++) { h[i] = test_f32_to_bf16(vals[i]); }
        ok = fwrite(header, sizeof(int), 256, out) == 256 && fwrite(h.data(), sizeof(uint16_t), np, out) == np;
        for (size_t i = 0; i < np; i++) { vals[i] = host_bf16_to_f32(h[i]); } // what the v5 file holds
    }
    if (in != NULL) { fclose(in); }
    if (out != NULL && fclose(out) != 0) { ok = 0; }
    if (!ok) {
        printf("FAIL %s v5_read: cannot convert %s (a version 6 fp32 file of llm.c's shape) into %s\n", LABEL, fp32_path, v5_path);
        return 0;
    }
    GPT2Config c5;
    int v5 = 0;
    if (!checkpoint_inspect(v5_path, -1.0f, &c5, &v5, msg, sizeof(msg)) || v5 != CHECKPOINT_VERSION_LLMC_BF16) {
        printf("FAIL %s v5_read: %s\n", LABEL, msg);
        return 0;
    }
    GPT2 model;
    gpt2_build(&model, &c5, 1, 1, 1, 0, 0);
    gpt2_load_params(&model, v5_path, v5);
    size_t mismatches = 0, off = 0;
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
        const size_t n = model.param_sizes[i];
        if (n == 0) { continue; }
        std::vector<float> got = fetch_x(model.params[i], n);
        for (size_t j = 0; j < n; j++) { mismatches += memcmp(&got[j], &vals[off + j], sizeof(float)) != 0; }
        if (model.master_memory != NULL) {
            std::vector<float> mw = fetch_f(model.master_memory + model.param_offsets[i], n);
            for (size_t j = 0; j < n; j++) { mismatches += memcmp(&mw[j], &vals[off + j], sizeof(float)) != 0; }
        }
        off += n;
    }
    gpt2_free(&model);
    if (mismatches == 0 && off == np) {
        printf("PASS %s v5_read (%s: %zu bf16 parameters load exactly)\n", LABEL, v5_path, np);
        return 1;
    }
    printf("FAIL %s v5_read (%s: %zu of %zu values differ from the file's bf16 values)\n", LABEL, v5_path, mismatches, np);
    return 0;
}

// The uninterrupted run's -o log: one line per step with loss, lr, norm, ms, tok/s and MFU, the
// validation lines (it validates at every step, 0 to 10: run_resume_check) and the summary.
static int check_main_log(void) {
    const char* scheme = qkv_scheme_name(kQKVScheme);
    char path[640];
    snprintf(path, sizeof(path), "build/test_cuda_resume_%s_%s/uninterrupted/main.log", scheme, PRECISION_NAME);
    FILE* f = fopen(path, "r");
    if (f == NULL) {
        printf("FAIL %s log_%s: %s was not written\n", LABEL, scheme, path);
        return 0;
    }
    char line[2048];
    int steps = 0, bad = 0, vals = 0, summary = 0, matmuls = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        int s = 0, n = 0;
        if (sscanf(line, "step %d/%d |", &s, &n) == 2) {
            steps++;
            if (s != steps || n != 10 || !strstr(line, "| loss ") || !strstr(line, "| lr ") || !strstr(line, "| norm ") ||
                !strstr(line, " ms |") || !strstr(line, " tok/s |") || !strstr(line, "| MFU ")) { bad++; }
        } else if (strstr(line, "| val loss ") != NULL) {
            vals++;
        } else if (strncmp(line, "summary:", 8) == 0) {
            summary++;
        } else if (strncmp(line, "matmuls: ", 9) == 0 && strstr(line, " configurations, ") != NULL) {
            matmuls++; // the tuning's report (--lt_tune 1, the default)
        } else {
            bad++;
        }
    }
    fclose(f);
    if (steps == 10 && bad == 0 && vals == 11 && summary == 1 && matmuls == 1) {
        printf("PASS %s log_%s (%s: 10 step lines with loss, lr, norm, ms, tok/s, MFU; 11 val lines; the matmul tuning's "
               "line; a summary)\n", LABEL, scheme, path);
        return 1;
    }
    printf("FAIL %s log_%s (%s: %d step lines, %d malformed lines, %d val lines, %d tuning lines, %d summaries; expected "
           "10, 0, 11, 1, 1)\n", LABEL, scheme, path, steps, bad, vals, matmuls, summary);
    return 0;
}

// counts the lines of a file that start with `prefix`, or -1 when it cannot be read
static int count_lines_starting(const char* path, const char* prefix) {
    FILE* f = fopen(path, "r");
    if (f == NULL) { return -1; }
    char line[4096];
    int n = 0;
    while (fgets(line, sizeof(line), f) != NULL) { n += strncmp(line, prefix, strlen(prefix)) == 0; }
    fclose(f);
    return n;
}

// the runs of run_bad_steps_check: `steps` steps of B 4, T 32 from `model` on `shard` into a fresh
// `out`, without validation or samples
static void bad_steps_args(TrainArgs* a, const char* model, const char* shard, const char* out, int steps) {
    train_args_defaults(a);
    a->model_arg = model;
    a->train_pattern = shard;
    a->output_dir = out;
    a->overwrite = 1;
    a->B = 4;
    a->T = 32;
    a->max_steps = steps;
    a->val_every = 0;
    a->sample_every = 0;
}

// Bad steps on the GPU (the decision is dev/trainer/train_common.h's, tested on the CPU; this checks the
// CUDA loop's wiring): (1) a model whose weights are all NaN: refused at load, then loaded with
// --allow_nonfinite 1: steps 1-4 are skipped with a line each, step 5 stops the run with an error
// and train_run returns 1; (2) -sg 1e-6 over 140 steps:
// once the 128-step window is full, steps are skipped as outliers, the run ends normally, and the
// state file of the last step counts exactly the skipped steps (AdamW's t on resume).
static int run_bad_steps_check(const char* model_path) {
    char msg[16384];
    char dir[512], shard[640], nan_model[640], dir_nan[640], dir_sg[640];
    snprintf(dir, sizeof(dir), "build/test_cuda_bad_steps_%s_%s", qkv_scheme_name(kQKVScheme), PRECISION_NAME);
    snprintf(shard, sizeof(shard), "%s/tokens_train_000.bin", dir);
    snprintf(nan_model, sizeof(nan_model), "%s/nan_model.bin", dir);
    snprintf(dir_nan, sizeof(dir_nan), "%s/nan", dir);
    snprintf(dir_sg, sizeof(dir_sg), "%s/sg", dir);
    GPT2Config config;
    int version = 0;
    if (!make_dir("build") || !make_dir(dir) || !checkpoint_inspect(model_path, -1.0f, &config, &version, msg, sizeof(msg)) ||
        !write_token_shard(shard, 4 * 32 * 13 + 1, config.vocab_size, 11)) {
        printf("FAIL %s bad_steps: cannot prepare %s\n", LABEL, dir);
        return 0;
    }
    // the model with every parameter byte 0xFF: NaN in fp32 and in bf16 files alike
    FILE* in = fopen(model_path, "rb");
    FILE* out = fopen(nan_model, "wb");
    int copied = in != NULL && out != NULL;
    long long pos = 0;
    for (int c; copied && (c = fgetc(in)) != EOF; pos++) { fputc(pos < 1024 ? c : 0xFF, out); }
    if (in != NULL) { fclose(in); }
    if (out == NULL || fclose(out) != 0 || !copied) {
        printf("FAIL %s bad_steps: cannot write %s\n", LABEL, nan_model);
        return 0;
    }
    TrainArgs a;
    bad_steps_args(&a, nan_model, shard, dir_nan, 10);
    // refused at load (the values check, dev/trainer/train_common.h), then loaded anyway for the loop's part
    const int refused = !train_args_resolve(&a, msg, sizeof(msg)) && strstr(msg, "tensor wte holds") != NULL;
    if (!refused) {
        printf("FAIL %s bad_steps: the all-NaN model was not refused at load (%s)\n", LABEL, msg);
        return 0;
    }
    bad_steps_args(&a, nan_model, shard, dir_nan, 10);
    a.allow_nonfinite = 1;
    if (!train_args_resolve(&a, msg, sizeof(msg))) {
        printf("FAIL %s bad_steps: %s\n", LABEL, msg);
        return 0;
    }
    const int rc_nan = train_run(&a);
    char log[700];
    snprintf(log, sizeof(log), "%s/main.log", dir_nan);
    const int skips_nan = count_lines_starting(log, "skip step "), errors_nan = count_lines_starting(log, "error: step 5: ");
    // (2) outliers by the gradient norm
    TrainArgs b;
    bad_steps_args(&b, model_path, shard, dir_sg, 140);
    b.checkpoint_every = 140;
    b.lr = 0.0f; // the model stays as it is: the norms of the batches stay alike, and about half are above the mean
    b.skip_grad_z = 1e-6f;
    if (!train_args_resolve(&b, msg, sizeof(msg))) {
        printf("FAIL %s bad_steps: %s\n", LABEL, msg);
        return 0;
    }
    const int rc_sg = train_run(&b);
    snprintf(log, sizeof(log), "%s/main.log", dir_sg);
    const int skips_sg = count_lines_starting(log, "skip step ");
    char model_140[4096], state_140[4096];
    checkpoint_paths(dir_sg, 140, model_140, state_140);
    TrainState st;
    memset(&st, 0, sizeof(st));
    const int state_ok = state_inspect(state_140, &config, &st, msg, sizeof(msg));
    printf("  bad_steps all-NaN model: train_run %d, %d skip lines, %d error lines; -sg 1e-6: train_run %d, %d skip lines, "
           "state skipped %d\n", rc_nan, skips_nan, errors_nan, rc_sg, skips_sg, state_ok ? st.skipped : -1);
    if (rc_nan == 1 && skips_nan == NONFINITE_STEPS_MAX - 1 && errors_nan == 1 && rc_sg == 0 && skips_sg > 0 && state_ok &&
        st.skipped == skips_sg) {
        printf("PASS %s bad_steps (NaN weights: refused at load; with --allow_nonfinite 1, %d skipped steps then a stop with exit 1; -sg: %d outlier steps skipped, "
               "counted in the state file)\n", LABEL, skips_nan, skips_sg);
        return 1;
    }
    printf("FAIL %s bad_steps (NaN weights: train_run %d, %d skip lines, %d error lines, expected 1, %d, 1; -sg 1e-6: "
           "train_run %d, %d skip lines, state skipped %d, expected 0, > 0, the same)\n", LABEL, rc_nan, skips_nan, errors_nan,
           NONFINITE_STEPS_MAX - 1, rc_sg, skips_sg, state_ok ? st.skipped : -1);
    return 0;
}

int main(int argc, char** argv) {
    char msg[16384];
    const char* manifest = "dev/fixtures/manifest.tsv";
    const char* scheme = qkv_scheme_name(kQKVScheme);
    int fixtures_only = 0, tuning_only = 0, resume_only = 0, positional = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--fixtures-only") == 0) {
            fixtures_only = 1;
        } else if (strcmp(argv[i], "--tuning") == 0) {
            tuning_only = 1;
        } else if (strcmp(argv[i], "--resume") == 0) {
            resume_only = 1;
        } else if (argv[i][0] != '-' && positional++ == 0) {
            manifest = argv[i];
        } else {
            printf("FAIL %s %s: unknown argument '%s' (HINT: test_gpt2cu [manifest.tsv] [--fixtures-only | --tuning | --resume])\n", LABEL,
                   scheme, argv[i]);
            return 1;
        }
    }
    if (!cuda_device_check(msg, sizeof(msg))) {
        printf("SKIP %s %s: %s\n", LABEL, scheme, msg);
        return 0;
    }
    FILE* f = fopen(manifest, "r");
    if (f == NULL) {
        printf("FAIL %s %s: cannot open %s (HINT: /usr/bin/python3 dev/reference/make_fixtures.py --out dev/fixtures)\n",
               LABEL, scheme, manifest);
        return 1;
    }
    cuda_setup();
    int passed = 0, failed = 0, ran = 0;
    std::string first_model, first_fused_model;
    char line[8192];
    while (fgets(line, sizeof(line), f) != NULL) {
        line[strcspn(line, "\r\n")] = '\0';
        if (line[0] == '\0' || line[0] == '#') { continue; }
        char* fields[4] = {NULL, NULL, NULL, NULL};
        char* p = line;
        int nf = 0;
        while (nf < 4) {
            fields[nf++] = p;
            char* tab = strchr(p, '\t');
            if (tab == NULL) { break; }
            *tab = '\0';
            p = tab + 1;
        }
        if (nf != 4) {
            printf("FAIL %s manifest: malformed line in %s (expected name, scheme, model, debug separated by tabs)\n",
                   LABEL, manifest);
            failed++;
            continue;
        }
        if (qkv_scheme_from_name(fields[1]) < 0) {
            printf("FAIL %s manifest: %s names unknown scheme '%s' (expected one of attention_variants.cuh's names)\n",
                   LABEL, manifest, fields[1]);
            failed++;
            continue;
        }
        if (strcmp(fields[1], scheme) != 0) { continue; }
        ran++;
        if (first_model.empty()) { first_model = fields[2]; }
        if (tuning_only || resume_only) { break; } // the first fixture's model is all --tuning and --resume need
        // both attention paths where a flash kernel exists for the fixture's head size, else the unfused one
        GPT2Config fc;
        int fversion = 0;
        const int both = checkpoint_inspect(fields[2], -1.0f, &fc, &fversion, msg, sizeof(msg)) &&
                         attention_fused_supported(qkv_head_dim(&fc));
        if (both && first_fused_model.empty()) { first_fused_model = fields[2]; }
        if (both) { // the flash path and the unfused path
            const std::string name = fields[0];
            if (run_fixture((name + "/fused").c_str(), fields[2], fields[3], 1)) { passed++; } else { failed++; }
            if (run_fixture((name + "/unfused").c_str(), fields[2], fields[3], 0)) { passed++; } else { failed++; }
        } else if (run_fixture(fields[0], fields[2], fields[3], 0)) {
            passed++;
        } else {
            failed++;
        }
        // KV-cached generation against the full forward pass, on the fixture's default attention path
        if (run_kv_cache_check(fields[0], fields[2], both)) { passed++; } else { failed++; }
        // the scheme's first fixture twice more, through every non-default path of the trainer: the
        // classifier in chunks of 37 rows (several chunks, the last one partial), the GELU and its
        // derivative as separate kernels, the bias gradients by the column-sum kernel and -r 2 (GELU
        // and both LayerNorms recomputed); then -r 1 with the fused GELU (the backward recomputes gelu
        // from the rounded pre-activation)
        if (ran == 1 && !fixtures_only) {
            const RunOptions other[2] = {{2, 0, 0, 37}, {1, 1, 1, 0}};
            const char* const suffix[2] = {"/chunk37_nogelufusion_nobiasfusion_r2", "/r1"};
            for (int k = 0; k < 2; k++) {
                const std::string name = std::string(fields[0]) + suffix[k];
                if (run_fixture(name.c_str(), fields[2], fields[3], both, &other[k])) { passed++; } else { failed++; }
            }
            set_run_globals(&kDefaultRun);
        }
        fflush(stdout);
    }
    fclose(f);
    if (ran == 0) { // nothing of this scheme was checked: that must not read as a pass
        printf("FAIL %s %s: no fixture of scheme %s in %s (HINT: /usr/bin/python3 dev/reference/make_fixtures.py "
               "--out dev/fixtures)\n", LABEL, scheme, scheme, manifest);
        failed++;
    } else if (tuning_only) {
        if (run_tuning_check(first_model.c_str())) { passed++; } else { failed++; }
    } else if (resume_only) {
        if (run_resume_check(first_model.c_str(), "", 1)) { passed++; } else { failed++; }
    } else if (fixtures_only) {
        printf("SKIP %s %s option sets, resume, log, bad_steps, v5_read, lt_tune: --fixtures-only\n", LABEL, scheme);
    } else {
#ifdef CUDACPU_CUDA_CPU_H
        if (cudacpu::lt_algo_count() == 1) { // one algorithm: the tuning would have nothing to choose from
            printf("SKIP %s lt_tune_%s: the CPU runtime offers one algorithm a shape (dev/test/test_cudacpu.sh runs "
                   "--tuning with CUDA_CPU_LT_ALGOS=4)\n", LABEL, scheme);
        } else
#endif
        if (run_tuning_check(first_model.c_str())) { passed++; } else { failed++; }
        if (run_resume_check(first_model.c_str(), "", 0)) { passed++; } else { failed++; }
        if (!first_fused_model.empty()) { // the flash kernels must be as deterministic as the rest
            if (run_resume_check(first_fused_model.c_str(), "_fused", 0)) { passed++; } else { failed++; }
        }
        if (check_main_log()) { passed++; } else { failed++; }
        if (run_bad_steps_check(first_model.c_str())) { passed++; } else { failed++; }
        if (kQKVScheme == QKV_STANDARD) {
            if (run_v5_check("dev/fixtures/standard_tiny_model.bin")) { passed++; } else { failed++; }
        }
    }
    printf("%s %s: %d passed, %d failed\n", LABEL, scheme, passed, failed);
    return failed > 0 ? 1 : 0;
}
