/*
profile.h: the per-sublayer profile of a training step, shared by both trainers' `--profile N` and
by `build/params profile`. Plain C++, no GPU code.

A step is split into rows (ProfileRow): one per sublayer and pass, summed over the layers. The
trainers place a mark after each sublayer (profile_mark in train_gpt2.cu: cudaEvents; in the CPU
trainer: a steady clock); the time since the previous mark is charged to the mark's row, so the
rows partition the step and add up to it. What a row covers:
  - a LayerNorm row includes the residual add before it (the CUDA trainer fuses the two);
  - fc is its matmul with the GELU epilogue, fcproj's backward includes GELU's backward;
  - classifier is the LM head's matmul, softmax, loss and their backward (the CUDA trainer runs
    them in one chunked pass during the forward);
  - the fused attention's backward (the trainer's flash version 4; the labs' version 2) is three
    rows, one per kernel: attn_bwd_delta (D = rowsum(dO * O)), attn_bwd_dkdv and attn_bwd_dq; the
    labs' flash version 3 (one kernel), the unfused and the CPU attention are one row, attn_bwd.

For each row, profile_costs gives two analytic numbers for one step:
  - FLOPs: the matmul work the model needs (2 m n k forward, 4 m n k backward; attention's two
    causal (T x T) products as llm.c counts them, C T FLOPs per token per product). Elementwise
    work is not counted: those rows are bound by memory. The sum over the rows plus 6 per token per
    parameter that is no matmul weight (biases, norm gains, wpe) is exactly llm.c's 6 N + 6 L C T
    (gpt2_flops_per_token), which dev/test/test_params.sh checks for every scheme.
  - bytes: the least memory traffic the row's job allows: each input read once, each output
    written once, in the activations' precision (gradients of weights in fp32, read and written);
    an intermediate a fused kernel need not store (the logits, attention scores) costs nothing.
The roofline time of a row is max(FLOPs / 790 TFLOP/s, bytes / 3.35 TB/s) (an H100 SXM's dense
bf16 and HBM3 peaks); "predicted" applies the cost model's efficiencies below to it.
*/
#ifndef PROFILE_H
#define PROFILE_H

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <string>

#include "../../attention_variants.cuh"
#include "parameters.h"

enum ProfileRow {
    PROF_ENCODER_FWD = 0,
    PROF_LN1_FWD,
    PROF_QKV_FWD,
    PROF_QRES_FWD,       // q_residual's query: RMSNorm, W1 + GELU, W2, LayerNorm, x + f(x)
    PROF_ATTN_FWD,
    PROF_ATTPROJ_FWD,
    PROF_LN2_FWD,
    PROF_FC_FWD,
    PROF_FCPROJ_FWD,
    PROF_LNF_FWD,
    PROF_CLASSIFIER,     // forward and backward
    PROF_LNF_BWD,
    PROF_RECOMPUTE,      // the CUDA trainer's -r 1 (GELU) and -r 2 (and the LayerNorms)
    PROF_FCPROJ_BWD,
    PROF_FC_BWD,
    PROF_LN2_BWD,
    PROF_ATTPROJ_BWD,
    PROF_ATTN_BWD,       // the whole attention backward (unfused, CPU)
    PROF_ATTN_BWD_DELTA, // the fused path's three kernels
    PROF_ATTN_BWD_DKDV,
    PROF_ATTN_BWD_DQ,
    PROF_QKV_BWD,
    PROF_QRES_BWD,
    PROF_LN1_BWD,
    PROF_ENCODER_BWD,
    PROF_ZERO_GRAD,
    PROF_GRAD_NORM,      // the CPU trainer also averages accumulated gradients here
    PROF_ADAMW,
    PROF_NUM_ROWS
};

static const char* const profile_row_names[PROF_NUM_ROWS] = {
    "encoder_fwd", "ln1_fwd", "qkv_fwd", "qres_fwd", "attn_fwd", "attproj_fwd", "ln2_fwd", "fc_fwd", "fcproj_fwd",
    "lnf_fwd", "classifier", "lnf_bwd", "recompute", "fcproj_bwd", "fc_bwd", "ln2_bwd", "attproj_bwd", "attn_bwd",
    "attn_bwd_delta", "attn_bwd_dkdv", "attn_bwd_dq", "qkv_bwd", "qres_bwd", "ln1_bwd", "encoder_bwd", "zero_grad",
    "grad_norm", "adamw",
};

// The roofline: an H100 SXM (dense bf16 tensor cores, HBM3)
#define PROFILE_PEAK_FLOPS 790e12
#define PROFILE_PEAK_BYTES 3.35e12
// The cost model's efficiencies (assumptions, not measurements: the GPU's profile checks them):
// cuBLASLt GEMMs at 85% of peak, memory-bound kernels at 3.0 TB/s, the unfused attention at 35%;
// the flash kernels from the shared-memory model in the attention labs' headers
// (dev/cuda/attention_forward.cu, attention_backward.cu: shared memory at 128 bytes per clock per
// SM, mma.sync at 2/3 of peak): version 2's forward 35% and backward 21% (its three kernels),
// version 3's forward 54% and backward 34%, version 4's backward 28% (version 2's kernels, every
// operand by ldmatrix). The GPU measured version 2's and version 4's backward kernels at 2.0x this
// model's time (H200, 2026-11-27) and version 3's at 4.2x.
enum ProfileKind { PROF_KIND_MEMORY = 0, PROF_KIND_MATMUL, PROF_KIND_ATTENTION, PROF_KIND_FLASH2_BWD, PROF_KIND_FLASH3_FWD,
                   PROF_KIND_FLASH3_BWD, PROF_KIND_FLASH4_BWD };
static const double profile_kind_efficiency[7] = {3.0 / 3.35, 0.85, 0.35, 0.21, 0.54, 0.34, 0.28};

// what the costs depend on besides the model
typedef struct {
    int B, T;           // the micro-batch
    int micro_steps;    // micro-batches per step (gradient accumulation)
    int act_bytes;      // bytes of an activation or parameter value: 2 (bf16) or 4 (fp32)
    int master_weights; // 1: an fp32 master copy of the parameters (the CUDA trainer's bf16 -w 1)
    int flash;          // the fused attention forward's flash version (the trainer's 3; the labs' 2), 0: unfused
    int flash_bwd;      // the backward's (the trainer's 4, the labs' 2: three rows, delta, dK/dV, dQ; the
                        // labs' 3: one), 0: unfused. build/params prices the labs' versions too (--flash)
    int recompute;      // the CUDA trainer's -r: 0, 1 (GELU), 2 (GELU and the LayerNorms)
    int bias_fusion;    // 1: the bias gradients summed by the weight gradients' GEMMs (the CUDA trainer's
                        // --bias_fusion 1, cuBLASLt's BGRADB epilogue), 0: a column-sum pass of their own
} ProfileShape;

typedef struct {
    double flops, bytes; // per step; bytes: the minimum (the roofline's)
    double pass_bytes;   // read again by a separate memory-bound pass that a fused design would not need
                         // (the bias gradients' column sums re-reading dY after the matmuls, bias_fusion 0)
    int kind;            // ProfileKind
    int present;         // 0: this model and path have no such row
} ProfileCost;

static inline double profile_roofline_s(const ProfileCost* r) {
    const double tf = r->flops / PROFILE_PEAK_FLOPS, tb = r->bytes / PROFILE_PEAK_BYTES;
    return tf > tb ? tf : tb;
}

static inline double profile_predicted_s(const ProfileCost* r) {
    const double e = profile_kind_efficiency[r->kind], mem = PROFILE_PEAK_BYTES * profile_kind_efficiency[0];
    const double tf = r->flops / (PROFILE_PEAK_FLOPS * e), tb = r->bytes / mem;
    // the separate pass runs after the row's main kernel, so its time adds (the 2026-11-26 H200 ncu
    // capture: bias_backward_kernel 8.4 ms of the step, which the model had left out)
    return (tf > tb ? tf : tb) + r->pass_bytes / mem;
}

// y = x w^T + b over n rows, k -> o: the forward and the backward (dx, dw += , db +=) of one layer.
// Gradients of weights are fp32, read and written (they accumulate over micro-steps). bp: the bias
// gradient's column sum as a pass of its own over dY (n x o), the CUDA trainer's bias_backward; with
// bias_fusion the dW GEMM sums dY as it reads it, predicted at no cost (its 8 o bytes of sums written
// and added are left out, as the bias gradient's own 8 o are not).
static inline void profile_linear(double n, double k, double o, int bias, double a, double* ff, double* fb,
                                  double* bf, double* bb, double* bp) {
    *ff = 2.0 * n * k * o;
    *fb = 4.0 * n * k * o;
    *bf = a * (n * k + k * o + n * o) + (bias ? a * o : 0.0);
    *bb = a * (n * o + n * k + k * o + n * k) + 8.0 * k * o + (bias ? 8.0 * o : 0.0);
    *bp = bias ? a * n * o : 0.0;
}

// The parameters that are no matmul weight: llm.c's formula charges 6 FLOPs per token for each, the
// rows nothing (they do no matmul). wte is the LM head's weight when tied, else only a lookup.
static inline double profile_nonmatmul_params(const GPT2Config* c) {
    size_t sizes[NUM_PARAMETER_TENSORS];
    fill_param_sizes(c, sizes);
    static const int nonmatmul[] = {PARAM_WPE, PARAM_LN1W, PARAM_LN1B, PARAM_QKVB, PARAM_ATTPROJB, PARAM_LN2W,
                                    PARAM_LN2B, PARAM_FCB, PARAM_FCPROJB, PARAM_LNFW, PARAM_LNFB, PARAM_QRES_RMSW,
                                    PARAM_QRES_LNW};
    double n = c->tied_head ? 0.0 : (double)sizes[PARAM_WTE];
    for (size_t i = 0; i < sizeof(nonmatmul) / sizeof(nonmatmul[0]); i++) { n += (double)sizes[nonmatmul[i]]; }
    return n;
}

// The costs of every row for one step of model c at shape s.
static inline void profile_costs(const GPT2Config* c, const ProfileShape* s, ProfileCost rows[PROF_NUM_ROWS]) {
    const QKVLayout lay = qkv_layout(c);
    const double a = (double)s->act_bytes, N = (double)s->B * s->T, T = (double)s->T, Lyr = (double)c->num_layers;
    const double C = (double)c->channels, M = (double)c->mlp_hidden, W = (double)lay.width;
    const double Vp = (double)c->padded_vocab_size, V = (double)c->vocab_size;
    const double BHT = (double)s->B * c->num_heads * T; // one fp32 per query row: lse, delta
    const int bias = c->use_bias, qres = lay.q.source == QKV_SRC_RESIDUAL_QUERY;
    const double P = (double)gpt2_num_parameters(c);
    for (int r = 0; r < PROF_NUM_ROWS; r++) {
        rows[r].flops = rows[r].bytes = rows[r].pass_bytes = 0.0;
        rows[r].kind = PROF_KIND_MEMORY;
        rows[r].present = 0;
    }
    // per micro-step, then scaled below
#define ROW(id, f, b, k) do { rows[id].flops = (f); rows[id].bytes = (b); rows[id].kind = (k); rows[id].present = 1; } while (0)
#define PASS(id, b) (rows[id].pass_bytes = s->bias_fusion ? 0.0 : (b))
    double ff, fb, bf, bb, bp;
    const double ln_w = a * C * (bias ? 2.0 : 1.0);
    const double ln_plain = 2.0 * a * N * C + 8.0 * N + ln_w;          // x -> y, mean, rstd
    const double ln_fused = 4.0 * a * N * C + 8.0 * N + ln_w;          // r + d -> r', y, mean, rstd
    const double ln_bwd = 3.0 * a * N * C + 8.0 * N + ln_w + 2.0 * 4.0 * C * (bias ? 2.0 : 1.0); // dy, x -> dx
    const double ln_bwd_acc = ln_bwd + a * N * C;                       // dx +=
    ROW(PROF_ENCODER_FWD, 0.0, 4.0 * N + a * (2.0 * N * C + T * C), PROF_KIND_MEMORY);
    ROW(PROF_LN1_FWD, 0.0, ln_plain + (Lyr - 1.0) * ln_fused, PROF_KIND_MEMORY);
    profile_linear(N, C, W, bias, a, &ff, &fb, &bf, &bb, &bp);
    ROW(PROF_QKV_FWD, Lyr * ff, Lyr * bf, PROF_KIND_MATMUL);
    // qkv backward: dx accumulates into what the attention wrote there when a role is x itself
    const int input_role = lay.q.source == QKV_SRC_INPUT || lay.k.source == QKV_SRC_INPUT || lay.v.source == QKV_SRC_INPUT;
    ROW(PROF_QKV_BWD, Lyr * fb, Lyr * (bb + (input_role ? a * N * C : 0.0)), PROF_KIND_MATMUL);
    PASS(PROF_QKV_BWD, Lyr * bp);
    if (qres) { // RMSNorm, W1 (C -> C/2) + GELU (h and gelu(h) kept), W2 (C/2 -> C), LN_q, x + f
        double f1f, f1b, b1f, b1b, f2f, f2b, b2f, b2b, nobias;
        profile_linear(N, C, C / 2.0, 0, a, &f1f, &f1b, &b1f, &b1b, &nobias);
        profile_linear(N, C / 2.0, C, 0, a, &f2f, &f2b, &b2f, &b2b, &nobias);
        const double fwd = (2.0 * a * N * C + 4.0 * N) + (b1f + a * N * C / 2.0) + b2f + (2.0 * a * N * C + 8.0 * N) + 3.0 * a * N * C;
        const double bwd = 3.0 * a * N * C + (3.0 * a * N * C + 8.0 * N + 8.0 * C) + (b2b + a * N * C / 2.0) + b1b +
                           (4.0 * a * N * C + 4.0 * N + 8.0 * C);
        ROW(PROF_QRES_FWD, Lyr * (f1f + f2f), Lyr * fwd, PROF_KIND_MATMUL);
        ROW(PROF_QRES_BWD, Lyr * (f1b + f2b), Lyr * bwd, PROF_KIND_MATMUL);
    }
    // attention: the distinct stored tensors among q, k, v (a shared one is read, and its gradient
    // written, once); one product of the two is C T FLOPs per token (causal), forward 2, backward 4
    double qkv_ch = (double)lay.q.channels, kv_ch = (double)lay.k.channels;
    if (!qkv_roles_share(lay.k, lay.q)) { qkv_ch += lay.k.channels; }
    if (!qkv_roles_share(lay.v, lay.q) && !qkv_roles_share(lay.v, lay.k)) { qkv_ch += lay.v.channels; }
    if (!qkv_roles_share(lay.v, lay.k)) { kv_ch += lay.v.channels; }
    const int q_shares = qkv_roles_share(lay.q, lay.k) || qkv_roles_share(lay.q, lay.v);
    const double unit = N * C * T;
    ROW(PROF_ATTN_FWD, Lyr * 2.0 * unit, Lyr * (a * N * (qkv_ch + C) + 4.0 * BHT),
        s->flash == 3 ? PROF_KIND_FLASH3_FWD : PROF_KIND_ATTENTION);
    if (s->flash_bwd == 3) {
        // one kernel: the four products (and S recomputed, not counted); it reads q, k, v, dO, O and lse,
        // writes the gradients and D (its fp32 dQ sum stays in L2, no minimum bytes)
        ROW(PROF_ATTN_BWD, Lyr * 4.0 * unit, Lyr * (a * N * (2.0 * qkv_ch + 2.0 * C) + 8.0 * BHT), PROF_KIND_FLASH3_BWD);
    } else if (s->flash_bwd) {
        // the model's four backward products: dP, dV, dK in the dK/dV kernel, dQ in the dQ kernel (the
        // kernels also recompute what they need: the excess shows as time over the roofline); versions
        // 2 and 4 have the same kernels' shapes, and differ in the efficiency
        const int kind = s->flash_bwd == 4 ? PROF_KIND_FLASH4_BWD : PROF_KIND_FLASH2_BWD;
        ROW(PROF_ATTN_BWD_DELTA, 0.0, Lyr * (2.0 * a * N * C + 4.0 * BHT), PROF_KIND_MEMORY);
        ROW(PROF_ATTN_BWD_DKDV, Lyr * 3.0 * unit, Lyr * (a * N * (qkv_ch + C + kv_ch) + 8.0 * BHT), kind);
        ROW(PROF_ATTN_BWD_DQ, Lyr * unit, Lyr * (a * N * (qkv_ch + C + C * (q_shares ? 2.0 : 1.0)) + 8.0 * BHT), kind);
    } else {
        ROW(PROF_ATTN_BWD, Lyr * 4.0 * unit, Lyr * (a * N * (2.0 * qkv_ch + 2.0 * C) + 4.0 * BHT), PROF_KIND_ATTENTION);
    }
    profile_linear(N, C, C, bias, a, &ff, &fb, &bf, &bb, &bp);
    ROW(PROF_ATTPROJ_FWD, Lyr * ff, Lyr * bf, PROF_KIND_MATMUL);
    ROW(PROF_ATTPROJ_BWD, Lyr * fb, Lyr * bb, PROF_KIND_MATMUL);
    PASS(PROF_ATTPROJ_BWD, Lyr * bp);
    ROW(PROF_LN2_FWD, 0.0, Lyr * ln_fused, PROF_KIND_MEMORY);
    ROW(PROF_LN2_BWD, 0.0, Lyr * ln_bwd_acc, PROF_KIND_MEMORY);
    profile_linear(N, C, M, bias, a, &ff, &fb, &bf, &bb, &bp);
    ROW(PROF_FC_FWD, Lyr * ff, Lyr * (bf + a * N * M), PROF_KIND_MATMUL); // the pre-GELU values are kept too
    ROW(PROF_FC_BWD, Lyr * fb, Lyr * bb, PROF_KIND_MATMUL);
    PASS(PROF_FC_BWD, Lyr * bp);
    profile_linear(N, M, C, bias, a, &ff, &fb, &bf, &bb, &bp);
    ROW(PROF_FCPROJ_FWD, Lyr * ff, Lyr * bf, PROF_KIND_MATMUL);
    ROW(PROF_FCPROJ_BWD, Lyr * fb, Lyr * (bb + a * N * M), PROF_KIND_MATMUL); // GELU's backward reads the pre-GELU values
    PASS(PROF_FCPROJ_BWD, Lyr * bp);
    ROW(PROF_LNF_FWD, 0.0, ln_fused, PROF_KIND_MEMORY);
    ROW(PROF_LNF_BWD, 0.0, ln_bwd, PROF_KIND_MEMORY);
    // the head: lnf and the weight read, dlnf written, dhead accumulated; the logits need not be stored
    ROW(PROF_CLASSIFIER, 6.0 * N * Vp * C, a * (2.0 * N * C + Vp * C) + 8.0 * N + 8.0 * Vp * C, PROF_KIND_MATMUL);
    if (s->recompute >= 1) {
        ROW(PROF_RECOMPUTE, 0.0, Lyr * (2.0 * a * N * M + (s->recompute >= 2 ? 2.0 * ln_plain : 0.0)), PROF_KIND_MEMORY);
    }
    ROW(PROF_LN1_BWD, 0.0, Lyr * ln_bwd_acc, PROF_KIND_MEMORY);
    // dwte: at most min(N, V) distinct rows, read and written; dwpe: T rows
    ROW(PROF_ENCODER_BWD, 0.0, a * N * C + 4.0 * N + 8.0 * (N < V ? N : V) * C + 8.0 * T * C, PROF_KIND_MEMORY);
    for (int r = 0; r < PROF_NUM_ROWS; r++) {
        rows[r].flops *= s->micro_steps;
        rows[r].bytes *= s->micro_steps;
        rows[r].pass_bytes *= s->micro_steps;
    }
    // once per step
    ROW(PROF_ZERO_GRAD, 0.0, 4.0 * P, PROF_KIND_MEMORY);
    ROW(PROF_GRAD_NORM, 0.0, 4.0 * P, PROF_KIND_MEMORY);
    // params, grads, m, v read; params, m, v written; with master weights the fp32 copy is read and written
    ROW(PROF_ADAMW, 0.0, P * (2.0 * a + 4.0 + 16.0 + (s->master_weights ? 8.0 : 0.0)), PROF_KIND_MEMORY);
#undef ROW
#undef PASS
}

// ----------------------------------------------------------------------------
// the table

typedef struct {
    double seconds[PROF_NUM_ROWS]; // summed over the profiled steps
    long long marks[PROF_NUM_ROWS];
    int steps;
    double step_seconds;           // the trainer's own measurement of those steps, summed
} ProfileTotals;

static inline void profile_totals_clear(ProfileTotals* t) { memset(t, 0, sizeof(*t)); }

// measured (t != NULL: per profiled step) or predicted (t == NULL) table, on stdout, each line
// starting with "profile"; and the same rows as CSV into csv (may be NULL). Returns the sum of the
// rows and the measured step apart in % (0 when predicted).
static inline double profile_report(const ProfileTotals* t, const ProfileCost rows[PROF_NUM_ROWS], FILE* csv) {
    const int measured = t != NULL;
    const double steps = measured && t->steps > 0 ? (double)t->steps : 1.0;
    double total_s = 0.0, total_flops = 0.0, total_bytes = 0.0, total_roof = 0.0, total_pred = 0.0;
    for (int r = 0; r < PROF_NUM_ROWS; r++) {
        total_s += measured ? t->seconds[r] / steps : profile_predicted_s(&rows[r]);
        total_flops += rows[r].flops;
        total_bytes += rows[r].bytes;
        total_roof += profile_roofline_s(&rows[r]);
        total_pred += profile_predicted_s(&rows[r]);
    }
    if (measured) {
        printf("profile %-15s %9s %6s %9s %9s %8s %8s %9s %7s %9s\n", "row", "ms/step", "%step", "GFLOP", "MB",
               "TFLOP/s", "GB/s", "roof_ms", "x_roof", "pred_ms");
        if (csv) { fprintf(csv, "row,ms,pct,flops,bytes,tflops,gbs,roofline_ms,ratio,predicted_ms\n"); }
    } else {
        printf("profile %-15s %9s %6s %9s %9s %9s %7s\n", "row", "pred_ms", "%step", "GFLOP", "MB", "roof_ms", "x_roof");
        if (csv) { fprintf(csv, "row,flops,bytes,roofline_ms,predicted_ms,pct\n"); }
    }
    for (int r = 0; r <= PROF_NUM_ROWS; r++) {
        const int is_total = r == PROF_NUM_ROWS;
        if (!is_total && !rows[r].present && !(measured && t->marks[r] > 0)) { continue; }
        const char* name = is_total ? "total" : profile_row_names[r];
        const double flops = is_total ? total_flops : rows[r].flops, bytes = is_total ? total_bytes : rows[r].bytes;
        const double roof = is_total ? total_roof : profile_roofline_s(&rows[r]);
        const double pred = is_total ? total_pred : profile_predicted_s(&rows[r]);
        const double sec = is_total ? total_s : (measured ? t->seconds[r] / steps : pred);
        const double pct = total_s > 0.0 ? 100.0 * sec / total_s : 0.0;
        if (measured) {
            const double tflops = sec > 0.0 ? flops / sec / 1e12 : 0.0, gbs = sec > 0.0 ? bytes / sec / 1e9 : 0.0;
            const double ratio = roof > 0.0 ? sec / roof : 0.0;
            printf("profile %-15s %9.3f %5.1f%% %9.2f %9.1f %8.2f %8.1f %9.3f %7.2f %9.3f\n", name, 1e3 * sec, pct,
                   flops / 1e9, bytes / 1e6, tflops, gbs, 1e3 * roof, ratio, 1e3 * pred);
            if (csv) {
                fprintf(csv, "%s,%.6f,%.3f,%.0f,%.0f,%.4f,%.3f,%.6f,%.4f,%.6f\n", name, 1e3 * sec, pct, flops, bytes,
                        tflops, gbs, 1e3 * roof, ratio, 1e3 * pred);
            }
        } else {
            printf("profile %-15s %9.3f %5.1f%% %9.2f %9.1f %9.3f %7.2f\n", name, 1e3 * pred, pct, flops / 1e9,
                   bytes / 1e6, 1e3 * roof, roof > 0.0 ? pred / roof : 0.0);
            if (csv) { fprintf(csv, "%s,%.0f,%.0f,%.6f,%.6f,%.3f\n", name, flops, bytes, 1e3 * roof, 1e3 * pred, pct); }
        }
    }
    if (!measured) { return 0.0; }
    const double step_s = t->steps > 0 ? t->step_seconds / steps : 0.0;
    const double apart = step_s > 0.0 ? 100.0 * fabs(total_s - step_s) / step_s : 100.0;
    printf("profile sum of rows %.3f ms vs measured step %.3f ms: %.1f%% apart (%s 5%%)\n", 1e3 * total_s, 1e3 * step_s,
           apart, apart <= 5.0 ? "within" : "NOT within");
    return apart;
}

// The trainers' closing report of --profile: the table of the profiled steps against the costs
// of model c at shape s, and the CSV into csv_path (NULL: none), through csv_path.tmp and a rename,
// so that a failed write leaves whatever had that name. Returns 0 when the CSV could not be written
// (the message names the file), else 1.
static inline int profile_write(const ProfileTotals* t, const GPT2Config* c, const ProfileShape* s, const char* csv_path) {
    ProfileCost rows[PROF_NUM_ROWS];
    profile_costs(c, s, rows);
    FILE* csv = NULL;
    std::string tmp = csv_path != NULL ? std::string(csv_path) + ".tmp" : "";
    if (csv_path != NULL) {
        unlink(tmp.c_str()); // a fresh file: never write through a link left at that name
        if ((csv = fopen(tmp.c_str(), "w")) == NULL) {
            fprintf(stderr, "error: --profile_csv %s: cannot write it (%s)\n", csv_path, strerror(errno));
            return 0;
        }
    }
    printf("profile: %d steps after a warm-up step | scheme %s | B %d T %d x %d micro-steps | roofline %.0f TFLOP/s, "
           "%.2f TB/s | predicted: GEMMs %.0f%%, flash v2 %.0f%% / %.0f%%, v3 %.0f%% / %.0f%% (forward / backward), "
           "v4 backward %.0f%%, unfused attention %.0f%% of it, memory %.1f TB/s\n", t->steps,
           qkv_scheme_name(c->scheme), s->B, s->T, s->micro_steps, PROFILE_PEAK_FLOPS / 1e12, PROFILE_PEAK_BYTES / 1e12,
           100.0 * profile_kind_efficiency[PROF_KIND_MATMUL], 100.0 * profile_kind_efficiency[PROF_KIND_ATTENTION],
           100.0 * profile_kind_efficiency[PROF_KIND_FLASH2_BWD], 100.0 * profile_kind_efficiency[PROF_KIND_FLASH3_FWD],
           100.0 * profile_kind_efficiency[PROF_KIND_FLASH3_BWD], 100.0 * profile_kind_efficiency[PROF_KIND_FLASH4_BWD],
           100.0 * profile_kind_efficiency[PROF_KIND_ATTENTION],
           PROFILE_PEAK_BYTES * profile_kind_efficiency[PROF_KIND_MEMORY] / 1e12);
    profile_report(t, rows, csv);
    if (csv != NULL) {
        const int written = fflush(csv) == 0 && !ferror(csv);
        const int closed = fclose(csv) == 0;
        if (!written || !closed || rename(tmp.c_str(), csv_path) != 0) {
            fprintf(stderr, "error: --profile_csv %s: write failed (%s)\n", csv_path, strerror(errno));
            unlink(tmp.c_str());
            return 0;
        }
        printf("profile: wrote %s\n", csv_path);
    }
    return 1;
}

#endif // PROFILE_H
