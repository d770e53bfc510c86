/*
Kernel lab: the optimizer step of train_gpt2.cu and the parameter init before it, run through the
trainer's own launchers on a model that gpt2_build lays out (so the per-tensor offsets, the alignment
gaps and the weight-decay flags are the trainer's):
  gpt2_grad_norm     sum_squares_partial_kernel over every fp32 gradient (fixed grid, grid-stride in
                     f128 packs), then sum_partials_kernel: the squared global norm, left on the device
  gpt2_update_apply  adamw_kernel per parameter tensor: clipping decided on the device from that norm,
                     weight decay where param_tensor_decayed says, fp32 master weights rounded to the
                     bf16 parameters
  gpt2_init_random   init_normal_kernel (counter-based normals) for the weights, fill_kernel for the
                     norm gains (1) and biases (0); the padded vocabulary rows stay 0

The two numbers (benchmark shape: d12, P = 124,475,904 parameters, BF16 build with fp32 master
weights; H100 ~3.35 TB/s HBM3, ~790 TFLOP/s):
  grad norm  reads each fp32 gradient once: 4 P = 497.9 MB -> 0.149 ms; 2 P FLOPs = 0.25 GFLOP: nothing.
  AdamW      reads grad, m, v, master (16 P), writes m, v, master (12 P) and the bf16 parameter (2 P):
             30 P = 3734 MB -> 1.115 ms; ~20 P FLOPs = 2.5 GFLOP (fp32 CUDA cores, ~67 TFLOP/s: 0.04 ms).
  Both memory-bound. Predicted (nothing measured yet): norm ~0.17 ms, AdamW ~1.25 ms (90% of the HBM
  rate), ~1.4 ms a step in all, ~1% of a d12 step of 0.5M tokens.

Versions (./build/lab_optimizer [version] [--seed n] [--check] [--bench] [--quick]):
  1  the trainer's (train_gpt2.cu, through gpt2_grad_norm, gpt2_update_apply, gpt2_init_random):
     sum_squares_partial_kernel, min(512, ceil(P / 2048)) blocks of 512 threads, one f128 (4 floats)
     per thread and sweep, block_sum; sum_partials_kernel, 1 block of 1024 over the partials.
     adamw_kernel, ceil(n / 2048) blocks of 256 per tensor, one x128 (8 parameters) per thread, the
     tail of a tensor whose size is not a multiple of 8 one at a time. Deterministic (fixed grids,
     fixed-order sums, no atomics).

--check: every version, on three models (standard scheme, built by gpt2_build with B 1, T 16):
  tiny       1 layer, C 48, 4 heads, V 50 (Vp 64), biases, tied: P 32,208, the norm's grid a few blocks
  untied     1 layer, C 64, 4 heads, V 500 (Vp 512), no biases, an lm_head of its own: P 115,904
  two sweeps 2 layers, C 256, 4 heads, V 1000 (Vp 1024), biases, tied: P 1,846,272 > 512 x 512 x 4, so
             the norm's full grid of 512 blocks sweeps twice
  For each: gpt2_init_random (seed 1337) against the float64 normals of kernels_cpu.h (cpu_init_normal,
  std 0.02, or 0.02 / sqrt(2 L) for the residual projections; master fp32 within 1e-5, parameters exactly
  the master rounded to bf16), gains exactly 1, biases exactly 0, the padded vocabulary rows exactly 0.
  Then AdamW steps t in {1, 3} x clipping {off; on, with the norm 2x the clip (it applies); on, with
  the clip 2x the norm (it does not)}: fresh random gradients N(0, 1e-2^2), master weights N(0, 0.5^2)
  (the parameters their bf16 rounding), m N(0, 1e-3^2), v (1e-2 N(0, 1))^2, inside the tensors; the
  alignment gaps between tensors zero. lr 1e-2, betas 0.9 / 0.95, eps 1e-8, weight decay 0.1.
  Against float64 (cpu_sum_squares, cpu_grad_clip_scale, cpu_adamw per tensor with its decay):
  the squared norm within 1e-5 (fp32 sums of 4-float packs, then of the partials); m, v and the master
  weights within 1e-5 and the master's step (master - master before) within 1e-4; the parameters
  exactly the master rounded to bf16; the gradients and the gaps byte for byte unchanged; a second run
  from the same state bit-identical. One PASS/FAIL line per (version, model, trial); exit 1 on any FAIL.
  --quick (the CPU runtime, dev/cudacpu): the same (all of it is small).
--bench: d12 (P above): gpt2_grad_norm_sq and gpt2_update_apply, median of 25 runs (L2 flushed
  before each), ms and GB/s of the minimum bytes above.
Without a CUDA device: one SKIP line, exit 0. BF16 builds only.
*/
#define TESTING
#include "../../train_gpt2.cu"
#include "../cpu/kernels_cpu.h"
#include "common.h"

#if !PRECISION_IS_BF16
#error "dev/cuda/optimizer.cu is a BF16 lab (it checks the fp32 master weights): build it with -DENABLE_BF16"
#endif

static const LabVersion kVersions[] = {
    {1, "the trainer's: gpt2_grad_norm, gpt2_update_apply, gpt2_init_random", 0, 0},
};
static const double TOL_F32 = 1e-5;   // fp32 results of fp32 arithmetic on exact inputs
static const double TOL_STEP = 1e-4;  // the master's step: a difference of two close fp32 values
static const float LR = 1e-2f, BETA1 = 0.9f, BETA2 = 0.95f, EPS = 1e-8f, WD = 0.1f;

typedef struct {
    const char* name;
    int L, C, H, V, Vp, bias, tied;
} ModelShape;

static const ModelShape kShapes[3] = {
    {"tiny", 1, 48, 4, 50, 64, 1, 1},
    {"untied", 1, 64, 4, 500, 512, 0, 0},
    {"two-sweeps", 2, 256, 4, 1000, 1024, 1, 1},
};

static GPT2Config shape_config(const ModelShape* s, int T) {
    GPT2Config c = gpt2_config_default(s->L, s->H, s->C, T, s->V, s->Vp);
    c.scheme = kQKVScheme;
    c.use_bias = s->bias;
    c.tied_head = s->tied;
    return c;
}

// the trainer's device arrays (the model's), as floats
static std::vector<float> download_f32(const float* d, size_t n) { return lab_f32_from_bytes(lab_download(d, n * sizeof(float))); }
static std::vector<float> download_x(const floatX* d, size_t n) { return lab_x_to_floats(lab_download(d, n * sizeof(floatX))); }
static float round_bf16(float v) { return host_bf16_to_f32(host_f32_to_bf16(v)); }

// 1 where an element of the padded layout belongs to no tensor (an alignment gap)
static std::vector<char> gap_mask(const GPT2* model) {
    std::vector<char> gap(model->num_parameters_padded, 1);
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
        for (size_t k = 0; k < model->param_sizes[i]; k++) { gap[model->param_offsets[i] + k] = 0; }
    }
    return gap;
}

// ----------------------------------------------------------------------------
// gpt2_init_random

static int check_init(const LabArgs* a, GPT2* model, const ModelShape* s) {
    const unsigned long long seed = 1337;
    const size_t P = model->num_parameters_padded;
    cudaCheck(cudaMemset(model->params_memory, 0, P * sizeof(floatX))); // as gpt2_build leaves them
    cudaCheck(cudaMemset(model->master_memory, 0, P * sizeof(float)));
    gpt2_init_random(model, seed);
    const std::vector<float> params = download_x(model->params_memory, P), master = download_f32(model->master_memory, P);
    const GPT2Config* c = &model->config;
    const float std_res = 0.02f / sqrtf(2.0f * c->num_layers);
    LabVerdict v;
    lab_verdict_init(&v);
    std::vector<float> ref(P, 0.0f); // gaps and padded vocabulary rows: 0
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
        const size_t n = model->param_sizes[i], off = model->param_offsets[i];
        if (n == 0) { continue; }
        const int is_gain = i == PARAM_LN1W || i == PARAM_LN2W || i == PARAM_LNFW || i == PARAM_QRES_RMSW || i == PARAM_QRES_LNW;
        const int is_bias = i == PARAM_LN1B || i == PARAM_QKVB || i == PARAM_ATTPROJB || i == PARAM_LN2B ||
                            i == PARAM_FCB || i == PARAM_FCPROJB || i == PARAM_LNFB;
        if (is_gain || is_bias) {
            for (size_t k = 0; k < n; k++) { ref[off + k] = is_gain ? 1.0f : 0.0f; }
        } else {
            const size_t used = (i == PARAM_WTE || i == PARAM_LM_HEAD) ? (size_t)c->vocab_size * c->channels : n;
            cpu_init_normal(&ref[off], used, param_tensor_residual_scaled[i] ? std_res : 0.02f, seed, (unsigned long long)i);
        }
    }
    // the weights against float64 within 1e-5; everything that is not a normal exactly (gaps, padded
    // rows, gains, biases: the exact comparison below covers them, since a normal is never exactly 0 or 1)
    lab_compare_rows(s->name, 1, "init master", master.data(), ref.data(), P, 0, TOL_F32, &v);
    size_t exact_bad = 0, round_bad = 0;
    for (size_t k = 0; k < P; k++) {
        if ((ref[k] == 0.0f || ref[k] == 1.0f) && master[k] != ref[k]) { exact_bad++; }
        if (params[k] != round_bf16(master[k])) { round_bad++; }
    }
    if (exact_bad) { v.fail += "; " + std::to_string(exact_bad) + " gain/bias/gap/padded-row elements not exactly 1 or 0"; }
    if (round_bad) { v.fail += "; " + std::to_string(round_bad) + " parameters are not their master rounded to bf16"; }
    char what[96];
    snprintf(what, sizeof(what), "init %s P=%zu", s->name, model->num_parameters);
    return lab_verdict_print(a, 1, what, seed, 0, &v);
}

// ----------------------------------------------------------------------------
// gpt2_grad_norm + gpt2_update_apply

typedef struct {
    std::vector<float> grads, master, m, v; // the padded layout, gaps 0
} OptState;

static void state_upload(GPT2* model, const OptState* st) {
    const size_t P = model->num_parameters_padded;
    std::vector<uint16_t> params(P);
    for (size_t k = 0; k < P; k++) { params[k] = host_f32_to_bf16(st->master[k]); }
    cudaCheck(cudaMemcpy(model->grads_memory, st->grads.data(), P * sizeof(float), cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(model->master_memory, st->master.data(), P * sizeof(float), cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(model->params_memory, params.data(), P * sizeof(floatX), cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(model->m_memory, st->m.data(), P * sizeof(float), cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(model->v_memory, st->v.data(), P * sizeof(float), cudaMemcpyHostToDevice));
}

// clip_case 0: off; 1: the norm is twice the clip; 2: the clip is twice the norm
static int check_step(const LabArgs* a, GPT2* model, const ModelShape* s, int shape_index, int t, int clip_case) {
    const size_t P = model->num_parameters_padded;
    const unsigned long long seed = lab_trial_seed(a->seed, {shape_index, t, clip_case});
    unsigned long long rng = seed;
    const std::vector<char> gap = gap_mask(model);
    OptState st;
    st.grads.assign(P, 0.0f);
    st.master.assign(P, 0.0f);
    st.m.assign(P, 0.0f);
    st.v.assign(P, 0.0f);
    for (size_t k = 0; k < P; k++) {
        if (gap[k]) { continue; }
        st.grads[k] = (float)(1e-2 * lab_normal(&rng));
        st.master[k] = (float)(0.5 * lab_normal(&rng));
        st.m[k] = (float)(1e-3 * lab_normal(&rng));
        const double r = 1e-2 * lab_normal(&rng);
        st.v[k] = (float)(r * r);
    }
    const double norm_sq_ref = cpu_sum_squares(st.grads.data(), P);
    const double norm_ref = sqrt(norm_sq_ref);
    const float clip = clip_case == 0 ? 0.0f : (float)(clip_case == 1 ? 0.5 * norm_ref : 2.0 * norm_ref);

    // the float64 step, tensor by tensor with its own weight decay
    const double grad_scale = cpu_grad_clip_scale(norm_sq_ref, clip);
    std::vector<float> rmaster = st.master, rm = st.m, rv = st.v;
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
        const size_t n = model->param_sizes[i], off = model->param_offsets[i];
        if (n == 0) { continue; }
        cpu_adamw(&rmaster[off], &rm[off], &rv[off], &st.grads[off], n, LR, BETA1, BETA2, EPS,
                  param_tensor_decayed[i] ? WD : 0.0f, (float)grad_scale, t);
    }

    LabVerdict v;
    lab_verdict_init(&v);
    std::vector<unsigned char> first[5];
    for (int run = 0; run < 2; run++) {
        state_upload(model, &st);
        const float norm = gpt2_grad_norm(model); // waits for the device
        gpt2_update_apply(model, LR, BETA1, BETA2, EPS, WD, clip, t);
        cudaCheck(cudaDeviceSynchronize());
        const std::vector<unsigned char> bytes[5] = {
            lab_download(model->params_memory, P * sizeof(floatX)), lab_download(model->master_memory, P * sizeof(float)),
            lab_download(model->m_memory, P * sizeof(float)), lab_download(model->v_memory, P * sizeof(float)),
            lab_download(model->norm_partial_d + NORM_BLOCKS, sizeof(float))};
        if (run == 1) {
            const char* names[5] = {"params", "master", "m", "v", "norm_sq"};
            for (int k = 0; k < 5; k++) { lab_check_same(first[k], bytes[k], names[k], &v); }
            break;
        }
        for (int k = 0; k < 5; k++) { first[k] = bytes[k]; }
        float norm_sq; // what adamw_kernel's clipping reads
        memcpy(&norm_sq, bytes[4].data(), sizeof norm_sq);
        const float norm_sq_ref_f = (float)norm_sq_ref;
        if (norm != sqrtf(norm_sq)) { v.fail += "; gpt2_grad_norm's value is not the root of the squared norm on the device"; }
        lab_compare_rows(s->name, 1, "norm_sq", &norm_sq, &norm_sq_ref_f, 1, 0, TOL_F32, &v);
        const std::vector<float> params = download_x(model->params_memory, P), master = download_f32(model->master_memory, P);
        const std::vector<float> m = download_f32(model->m_memory, P), vv = download_f32(model->v_memory, P);
        lab_compare_rows(s->name, 1, "m", m.data(), rm.data(), P, 0, TOL_F32, &v);
        lab_compare_rows(s->name, 1, "v", vv.data(), rv.data(), P, 0, TOL_F32, &v);
        lab_compare_rows(s->name, 1, "master", master.data(), rmaster.data(), P, 0, TOL_F32, &v);
        std::vector<float> step(P), rstep(P);
        for (size_t k = 0; k < P; k++) {
            step[k] = (float)((double)master[k] - st.master[k]);
            rstep[k] = (float)((double)rmaster[k] - st.master[k]);
        }
        lab_compare_rows(s->name, 1, "master step", step.data(), rstep.data(), P, 0, TOL_STEP, &v);
        size_t round_bad = 0, gap_bad = 0;
        for (size_t k = 0; k < P; k++) {
            if (params[k] != round_bf16(master[k])) { round_bad++; }
            if (gap[k] && (params[k] != 0.0f || master[k] != 0.0f || m[k] != 0.0f || vv[k] != 0.0f)) { gap_bad++; }
        }
        if (round_bad) { v.fail += "; " + std::to_string(round_bad) + " parameters are not their master rounded to bf16"; }
        if (gap_bad) { v.fail += "; " + std::to_string(gap_bad) + " gap elements written"; }
        if (download_f32(model->grads_memory, P) != st.grads) { v.fail += "; the gradients were written"; }
    }
    static const char* const clip_names[3] = {"clip off", "clip applies", "clip does not apply"};
    char what[128];
    snprintf(what, sizeof(what), "adamw %s P=%zu t=%d %s (norm %.4g, clip %.4g)", s->name, model->num_parameters, t,
             clip_names[clip_case], norm_ref, clip);
    return lab_verdict_print(a, 1, what, seed, 1, &v);
}

static int check(const LabArgs* a) {
    printf("check: models {tiny, untied, two-sweeps} x {init; AdamW t {1, 3} x clip {off, applies, does not}}; "
           "tolerances fp32 %.0e, master step %.0e, bf16 parameters exact\n", TOL_F32, TOL_STEP);
    int failed = 0;
    for (int si = 0; si < 3; si++) {
        const ModelShape* s = &kShapes[si];
        const GPT2Config c = shape_config(s, 16);
        char msg[512];
        if (!gpt2_config_check(&c, msg, sizeof(msg))) {
            printf("FAIL %s %s: test setup: %s\n", a->name, s->name, msg);
            failed = 1;
            continue;
        }
        GPT2 model;
        gpt2_build(&model, &c, 1, 16, 1, 0, 0);
        failed |= check_init(a, &model, s);
        for (int t : {1, 3}) {
            for (int clip_case = 0; clip_case < 3; clip_case++) { failed |= check_step(a, &model, s, si, t, clip_case); }
        }
        gpt2_free(&model);
    }
    return failed;
}

// ----------------------------------------------------------------------------
// bench

static void bench(const LabArgs* a) {
    (void)a;
    const GPT2Config c = gpt2_config_default(12, 12, 768, 1024, 50257, 50304);
    GPT2 model;
    gpt2_build(&model, &c, 1, 64, 1, 0, 0);
    const size_t P = model.num_parameters;
    const double norm_bytes = 4.0 * P, adamw_bytes = 30.0 * P;
    char what[96];
    snprintf(what, sizeof(what), "grad norm, d12 P=%zu", P);
    lab_bench_predicted(what, 2.0 * P, norm_bytes);
    snprintf(what, sizeof(what), "AdamW, d12 P=%zu", P);
    lab_bench_predicted(what, 20.0 * P, adamw_bytes);
    // finite values for timing only: 0x3C in every byte is 0.0115 in fp32 (and v > 0)
    const size_t Pp = model.num_parameters_padded;
    cudaCheck(cudaMemset(model.grads_memory, 0x3C, Pp * sizeof(float)));
    cudaCheck(cudaMemset(model.m_memory, 0x3C, Pp * sizeof(float)));
    cudaCheck(cudaMemset(model.v_memory, 0x3C, Pp * sizeof(float)));
    gpt2_init_random(&model, 1337);
    LabTimer timer;
    lab_timer_init(&timer);
    const double norm_ms = lab_time_median_ms(&timer, LAB_BENCH_REPS, [&]() { gpt2_grad_norm_sq(&model); });
    lab_bench_line(1, "grad norm (d12)", norm_ms, norm_bytes);
    const double adamw_ms = lab_time_median_ms(&timer, LAB_BENCH_REPS, [&]() {
        gpt2_update_apply(&model, LR, BETA1, BETA2, EPS, WD, 1.0f, 1);
    });
    lab_bench_line(1, "AdamW (d12)", adamw_ms, adamw_bytes);
    lab_timer_free(&timer);
    gpt2_free(&model);
}

int main(int argc, char** argv) {
    const LabSpec spec = {"lab_optimizer", "the optimizer step of train_gpt2.cu (gradient norm, AdamW) and its parameter init",
                          kVersions, LAB_COUNT(kVersions), 0, NULL, NULL, NULL};
    LabArgs a;
    if (!lab_parse_args(&a, argc, argv, &spec)) { return 0; }
    if (!lab_device_or_skip(&a)) { return 0; }
    int failed = 0;
    if (a.check) { failed = check(&a); }
    if (a.bench) { bench(&a); }
    return lab_verdict(a.name, a.check, failed);
}
