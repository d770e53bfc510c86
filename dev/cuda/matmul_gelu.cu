/*
Kernel lab: the MLP's fc layer with its GELU (train_gpt2.cu's matmul_forward_gelu), and the backward
down to the GELU's input (matmul_backward_gelu), separate passes vs cuBLASLt's GELU epilogues, and the
bias gradient as a separate column sum vs the weight gradient's BGRADB epilogue.

  forward:  pre (N, OC) = inp (N, C) @ w (OC, C)^T [+ b (OC)], out = gelu(pre) (tanh approximation),
            both kept (pre for the backward)
  backward: of y (N, C) = out @ wp (C, OC)^T [+ bp (C)], from dy (N, C):
            dpre (N, OC) = (dy @ wp) * gelu'(pre), dwp (C, OC) += dy^T @ out (fp32), dbp (C) += colsums(dy)
            (gpt2_backward's call: matmul_backward_gelu(dbuf_m, dfcprojw, dfcprojb, dresidual, fch_gelu,
            fcprojw, fch, N, M, C); here M is OC)

The two numbers (benchmark shape: N = 65536 rows (B 64 x T 1024), C = 768, OC = 3072, d12's fc; bf16):
  forward   FLOPs 2 N C OC = 309.2 GFLOP                 -> 0.391 ms at 790 TFLOP/s
            bytes 2 (N C + OC C + OC + 2 N OC) = 910.7 MB -> 0.304 ms at 3 TB/s (inp, w, b read; pre, out written)
            compute-bound (340 FLOP/byte, the ridge is 263). Predicted:
            version 1: the matmul (0.391 ms; its 508 MB hidden under it) + gelu_forward_kernel reading pre and
                       writing out, 4 N OC = 805.3 MB -> 0.268 ms: ~0.66 ms
            version 2: one call, the epilogue's extra 403 MB write under the compute: ~0.39 ms
  backward  FLOPs 4 N C OC = 618.5 GFLOP (dy @ wp and dy^T @ out) -> 0.783 ms
            bytes 2 N C + 2 C OC + 3 x 2 N OC + 8 C OC + 8 C = 1332.2 MB -> 0.444 ms (dy, wp, pre, out read;
            dpre written; dwp read and written in fp32), compute-bound (464 FLOP/byte). Predicted:
            version 1: + gelu_backward_kernel reading dpre and pre and writing dpre, 6 N OC = 1208 MB
                       -> 0.403 ms: ~1.19 ms
            version 2: the DGELU epilogue reads pre inside the matmul: ~0.78 ms
            versions 1 and 2 + bias_backward_kernel reading dy again (100.7 MB, 0.034 ms at 3 TB/s; the
                       H200's ncu capture of a d12 step measured this kernel at 2.3x its bytes' time,
                       27% of DRAM bandwidth: ~0.08 ms here)
            version 3: version 2 with the bias gradient summed in the dwp GEMM's BGRADB epilogue, which
                       reads dy anyway, plus bias_sums_add_kernel (12 C bytes, a launch): ~0.78 ms,
                       if the epilogue's column sums cost the GEMM nothing (predicted; cuBLASLt
                       documents no cost, and one report has found BGRADB slower at large shapes)

Versions (./build/lab_matmul_gelu [version]; the trainer's launchers, the path picked by its globals
g_gelu_fusion and g_bias_fusion, as --gelu_fusion 0 / 1 and --bias_fusion 0 / 1 do). The matmuls are cuBLASLt's (fp32 accumulation, grid,
tiles and registers its own: the check prints the algorithm, tile and split-K it chose); the
trainer's kernels (ptxas -v, nvcc 13.0, sm_90; no spills, no shared memory unless said):
  1  g_gelu_fusion = 0, g_bias_fusion = 0. forward: matmul_forward (bias in cuBLASLt's BIAS epilogue, or add_bias_kernel,
     a grid-stride loop of 256 threads, 20 registers, when there is no algorithm with it), then
     gelu_forward_kernel: one thread per x128 (8 bf16), 256 threads, 26 registers.
     backward: the plain matmul dpre = dy @ wp, then gelu_backward_kernel in place (one thread per
     x128, 256 threads, 30 registers), then matmul_backward_params: cuBLASLt dwp += dy^T @ out (fp32 D,
     beta 1) and bias_backward_kernel (grid (column groups of 256, 2 per SM), block 32 x 8, 8 KiB
     static smem, 32 registers; fixed-order partial sums, the last block adds them).
  2  g_gelu_fusion = 1, g_bias_fusion = 0. forward: one cuBLASLt call, epilogue GELU_AUX_BIAS (GELU_AUX without a bias):
     out = gelu(acc + b) in fp32, rounded once, and pre written as the aux output (ld = OC).
     backward: one call, epilogue DGELU: dpre = acc * gelu'(pre), pre read as the aux input; then
     matmul_backward_params as version 1. When cuBLASLt has no algorithm for the epilogue, matmul_lt
     returns 0 and the launcher falls back to version 1's passes: the lab prints `fallback` then.
  3  g_gelu_fusion = 1, g_bias_fusion = 1 (the trainer's default). forward as version 2. backward: the
     DGELU call, then one cuBLASLt call dwp += dy^T @ out with epilogue BGRADB: the sums of dy's
     columns over the N rows written to the fp32 scratch g_bias_sums, then bias_sums_add_kernel (one
     thread per column, 256 threads) adds them to dbp. No algorithm with BGRADB: version 2's plain
     GEMM and bias_backward_kernel (the lab prints `fallback`).
  All deterministic (cuBLASLt's algorithm is fixed per configuration by matmul_lt's cache; split-k
  partial sums in fp32; bias_backward_kernel's order is fixed), checked by a bit-identical rerun.

  ./build/lab_matmul_gelu [version] [--seed n] [--check] [--bench]

--check (with neither --check nor --bench, both): N in {7, 64, 1024} x C in {64, 768} x OC in
  {256, 3072} x {with bias, without}, forward and backward, fresh inputs per trial (seed printed):
  inp, dy N(0, 1); w N(0, 1.5^2 / C) (pre of std ~1.5, where GELU bends); b N(0, 0.25);
  wp N(0, 1 / OC); pre N(0, 1.5^2), out = gelu(pre) rounded to bf16; dwp and dbp start at random
  values of their increment's size (+= checked). Outputs poisoned with 0xFF, 1 KiB guards around every
  buffer. Against float64 (the GELU of dev/cpu/kernels_cpu.h): pre, out, dpre (bf16) rel_err 1e-2;
  dwp, dbp (fp32) 1e-4; every element written, guards and inputs unchanged, a second run bit-identical.
  One PASS/FAIL line per (version, direction, shape) naming the path that ran (epilogue or
  fallback); a summary of the paths at the end (version 2's GELU epilogues, version 3's BGRADB). Exit 1 on any FAIL; without a GPU one SKIP line, exit 0.
--quick (the CPU runtime, dev/cudacpu): N 7 and 64 only (the reference GEMM in double cannot afford 1024).
--bench: the shape above, with bias, median of 25 runs (L2 flushed before each): ms, TFLOP/s, GB/s.

Tolerances. pre, out, dpre (bf16 outputs): the reference is float64 on the same bf16 inputs, so what
  differs is the outputs' rounding (2^-9 relative at most, 1.7e-3 RMS on these values), version 1's
  second rounding (pre, then gelu(pre); dy @ wp, then times gelu'(pre)), fp32 accumulation (~1e-6)
  and the epilogue's own GELU (cuBLASLt documents no formula: the erf and tanh forms differ by at most
  4.7e-4 absolute, 1.8e-4 RMS of gelu here). A C++ emulation of both paths at N 1024, C 768, OC 3072
  gave pre 1.7e-3, out 2.4e-3 (version 1) and 1.7e-3 (version 2, either GELU form), dpre 2.3e-3 and
  1.7e-3; 1e-2 is the attention labs' bf16 tolerance. A missing bias gives ~0.3, a GELU where its
  derivative belongs ~1.
  dwp, dbp (fp32): products of bf16 values are exact in fp32, only the additions round: <= N 2^-24 =
  6e-5 at N = 1024 if every rounding went one way, ~sqrt(N) 2^-24 = 2e-6 as they do; 1e-4.
*/
#define TESTING
#include "../../train_gpt2.cu"
#include "../cpu/kernels_cpu.h"
#include "common.h"

static const LabVersion kVersions[] = {
    {1, "separate passes: matmul then gelu_forward_kernel / gelu_backward_kernel (g_gelu_fusion = 0)", 0, 0},
    {2, "GELU in cuBLASLt's epilogue: GELU_AUX_BIAS forward, DGELU backward (g_gelu_fusion = 1)", 0, 0},
    {3, "version 2, and the bias gradient in the weight gradient's BGRADB epilogue (g_bias_fusion = 1)", 0, 0},
};

static const double TOL_X = 1e-2;   // bf16 outputs
static const double TOL_F32 = 1e-4; // fp32 gradients

static void fc_forward(int version, floatX* out, floatX* pre, const floatX* inp, const floatX* w, const floatX* b,
                       int N, int C, int OC) {
    g_gelu_fusion = version >= 2;
    g_bias_fusion = version >= 3;
    matmul_forward_gelu(out, pre, inp, w, b, N, C, OC);
}

// as gpt2_backward calls it for the MLP: the fc width OC is matmul_backward_gelu's C, the output's C its OC
static void fc_backward(int version, floatX* dpre, float* dwp, float* dbp, const floatX* dy, const floatX* out,
                        const floatX* wp, const floatX* pre, int N, int C, int OC) {
    g_gelu_fusion = version >= 2;
    g_bias_fusion = version >= 3;
    matmul_backward_gelu(dpre, dwp, dbp, dy, out, wp, pre, N, OC, C);
}

// Which path the last run took, from matmul_lt's cache (the same configuration always gets the same
// answer). *epilogue: 1 when version 2's epilogue ran, 0 when it fell back (meaningless for version 1).
static std::string forward_path(int version, int N, int C, int OC, int has_bias, int* epilogue) {
    std::string algo;
    *epilogue = 0;
    if (version >= 2) {
        const int f = lab_lt_lookup(OC, N, C, 1, 0, CUBLAS_X_TYPE, has_bias, LT_GELU, &algo);
        if (f == 1) {
            *epilogue = 1;
            return std::string("epilogue ") + (has_bias ? "GELU_AUX_BIAS" : "GELU_AUX") + " (" + algo + ")";
        }
        if (f == 0) { return "fallback: no cuBLASLt algorithm with the GELU epilogue, version 1's passes ran"; }
        return "fallback: the GELU epilogue not tried (bias not 16-byte aligned), version 1's passes ran";
    }
    if (has_bias && lab_lt_lookup(OC, N, C, 1, 0, CUBLAS_X_TYPE, 1, LT_PLAIN, &algo) == 1) {
        return "matmul with BIAS epilogue (" + algo + ") + gelu_forward_kernel";
    }
    lab_lt_lookup(OC, N, C, 1, 0, CUBLAS_X_TYPE, 0, LT_PLAIN, &algo);
    return std::string("matmul (") + algo + ")" + (has_bias ? " + add_bias_kernel" : "") + " + gelu_forward_kernel";
}

// *bgrad_epilogue: 1 when version 3's BGRADB epilogue ran, 0 when the column-sum kernel did
static std::string backward_path(int version, int N, int C, int OC, int has_bias, int* epilogue, int* bgrad_epilogue) {
    std::string algo, path;
    *epilogue = *bgrad_epilogue = 0;
    if (version >= 2) {
        const int f = lab_lt_lookup(OC, N, C, 0, 0, CUBLAS_X_TYPE, 0, LT_DGELU, &algo);
        if (f == 1) {
            *epilogue = 1;
            path = "epilogue DGELU (" + algo + ")";
        } else {
            path = "fallback: no cuBLASLt algorithm with the DGELU epilogue, version 1's passes ran";
        }
    } else {
        lab_lt_lookup(OC, N, C, 0, 0, CUBLAS_X_TYPE, 0, LT_PLAIN, &algo);
        path = "matmul (" + algo + ") + gelu_backward_kernel";
    }
    if (!has_bias) { return path; }
    // dwp (OC, C) += dy^T @ out: matmul_lt's m = OC, n = C, k = N, B = dy transposed
    if (version >= 3) {
        if (lab_lt_lookup(OC, C, N, 0, 1, CUDA_R_32F, 1, LT_BGRADB, &algo) == 1) {
            *bgrad_epilogue = 1;
            return path + "; dbp: epilogue BGRADB (" + algo + ") + bias_sums_add_kernel";
        }
        return path + "; dbp: fallback: no cuBLASLt algorithm with the BGRADB epilogue, bias_backward_kernel ran";
    }
    return path + "; dbp: bias_backward_kernel";
}

// ----------------------------------------------------------------------------
// the check

typedef struct {
    int N, C, OC, bias;
} Shape;

// epilogue / fallback counts for the summary: version 2's forward and backward GELU, version 3's BGRADB
typedef struct {
    int epilogue[3], fallback[3];
    std::string fallback_shapes[3];
} PathTally;

static int check_forward(const LabArgs* a, const Shape* s, PathTally* tally) {
    const int N = s->N, C = s->C, OC = s->OC;
    const unsigned long long seed = lab_trial_seed(a->seed, {N, C, OC, s->bias, 0});
    unsigned long long rng = seed;
    const LabHostX inp = lab_host_x(lab_normal_vec((size_t)N * C, 0.0, 1.0, &rng));
    const LabHostX w = lab_host_x(lab_normal_vec((size_t)OC * C, 0.0, 1.5 / sqrt((double)C), &rng));
    const LabHostX b = lab_host_x(s->bias ? lab_normal_vec(OC, 0.0, 0.5, &rng) : std::vector<float>());
    std::vector<float> pre_ref((size_t)N * OC), out_ref((size_t)N * OC);
    lab_matmul_nt(pre_ref.data(), inp.f.data(), w.f.data(), s->bias ? b.f.data() : NULL, N, C, OC);
    cpu_gelu_forward(out_ref.data(), pre_ref.data(), pre_ref.size());

    LabBuf d_inp = lab_buf_input(inp.x, "inp"), d_w = lab_buf_input(w.x, "w");
    LabBuf d_b = s->bias ? lab_buf_input(b.x, "b") : lab_buf_none("b");
    LabBuf d_pre = lab_buf_alloc((size_t)N * OC * sizeof(floatX), "pre");
    LabBuf d_out = lab_buf_alloc((size_t)N * OC * sizeof(floatX), "out");
    char trial[128];
    snprintf(trial, sizeof(trial), "forward N=%d C=%d OC=%d %s", N, C, OC, s->bias ? "bias" : "no-bias");
    int failed = 0;
    for (int ver : a->versions) {
        LabVerdict v;
        lab_verdict_init(&v);
        std::vector<unsigned char> b_pre, b_out;
        for (int rep = 0; rep < 2; rep++) {
            lab_buf_poison(&d_pre);
            lab_buf_poison(&d_out);
            fc_forward(ver, (floatX*)d_out.ptr, (floatX*)d_pre.ptr, (const floatX*)d_inp.ptr, (const floatX*)d_w.ptr,
                       (const floatX*)d_b.ptr, N, C, OC);
            cudaCheck(cudaDeviceSynchronize());
            const std::vector<unsigned char> p = lab_buf_download(&d_pre), o = lab_buf_download(&d_out);
            if (rep == 0) { b_pre = p; b_out = o; continue; }
            lab_check_same(b_pre, p, "pre", &v);
            lab_check_same(b_out, o, "out", &v);
        }
        lab_buf_guards_ok(&d_pre, &v.fail);
        lab_buf_guards_ok(&d_out, &v.fail);
        lab_buf_intact(&d_inp, inp.x, &v.fail);
        lab_buf_intact(&d_w, w.x, &v.fail);
        lab_buf_intact(&d_b, b.x, &v.fail);
        const size_t up = lab_count_unwritten(b_pre, sizeof(floatX)), uo = lab_count_unwritten(b_out, sizeof(floatX));
        if (up > 0) { v.fail += "; " + std::to_string(up) + " elements of pre never written"; }
        if (uo > 0) { v.fail += "; " + std::to_string(uo) + " elements of out never written"; }
        const std::vector<float> pre = lab_x_to_floats(b_pre), out = lab_x_to_floats(b_out);
        lab_compare_rows(trial, ver, "pre", pre.data(), pre_ref.data(), pre.size(), (size_t)OC, TOL_X, &v);
        lab_compare_rows(trial, ver, "out", out.data(), out_ref.data(), out.size(), (size_t)OC, TOL_X, &v);
        int epi = 0;
        const std::string what = std::string(trial) + ", path: " + forward_path(ver, N, C, OC, s->bias, &epi);
        if (ver == 2) {
            tally->epilogue[0] += epi;
            tally->fallback[0] += !epi;
            if (!epi) { tally->fallback_shapes[0] += std::string(" (") + (trial + 8) + ")"; }
        }
        failed |= lab_verdict_print(a, ver, what.c_str(), seed, 1, &v);
    }
    for (LabBuf* bf : {&d_inp, &d_w, &d_b, &d_pre, &d_out}) { lab_buf_free(bf); }
    return failed;
}

static int check_backward(const LabArgs* a, const Shape* s, PathTally* tally) {
    const int N = s->N, C = s->C, OC = s->OC;
    const unsigned long long seed = lab_trial_seed(a->seed, {N, C, OC, s->bias, 1});
    unsigned long long rng = seed;
    const LabHostX dy = lab_host_x(lab_normal_vec((size_t)N * C, 0.0, 1.0, &rng));
    const LabHostX wp = lab_host_x(lab_normal_vec((size_t)C * OC, 0.0, 1.0 / sqrt((double)OC), &rng));
    const LabHostX pre = lab_host_x(lab_normal_vec((size_t)N * OC, 0.0, 1.5, &rng));
    std::vector<float> g((size_t)N * OC); // what the forward stored: gelu(pre) in bf16
    cpu_gelu_forward(g.data(), pre.f.data(), g.size());
    const LabHostX out = lab_host_x(g);

    // reference: dpre = (dy @ wp) * gelu'(pre); dwp = dwp0 + dy^T @ out; dbp = dbp0 + colsums(dy)
    std::vector<float> dh((size_t)N * OC), dpre_ref((size_t)N * OC), dw_inc((size_t)C * OC), db_inc(C, 0.0f);
    lab_matmul_nn(dh.data(), dy.f.data(), C, wp.f.data(), N, C, OC);
    cpu_gelu_backward(dpre_ref.data(), pre.f.data(), dh.data(), dh.size());
    lab_matmul_tn(dw_inc.data(), NULL, dy.f.data(), C, out.f.data(), N, C, OC);
    cpu_bias_backward(db_inc.data(), dy.f.data(), N, C);
    // the starting gradients at their increment's size: a missing += shows, the increment's error
    // is not lost in a larger norm
    const double rw = sqrt(cpu_sum_squares(dw_inc.data(), dw_inc.size()) / dw_inc.size());
    const double rb = sqrt(cpu_sum_squares(db_inc.data(), db_inc.size()) / db_inc.size());
    std::vector<float> dw0(dw_inc.size()), db0(C), dw_ref(dw_inc.size()), db_ref(C);
    for (size_t i = 0; i < dw0.size(); i++) {
        dw0[i] = (float)(rw * lab_normal(&rng));
        dw_ref[i] = (float)((double)dw0[i] + dw_inc[i]);
    }
    for (int i = 0; i < C; i++) {
        db0[i] = (float)(rb * lab_normal(&rng));
        db_ref[i] = (float)((double)db0[i] + db_inc[i]);
    }
    const std::vector<unsigned char> dw0_b = lab_bytes_of(dw0), db0_b = lab_bytes_of(db0);

    LabBuf d_dy = lab_buf_input(dy.x, "dy"), d_wp = lab_buf_input(wp.x, "wp"), d_pre = lab_buf_input(pre.x, "pre");
    LabBuf d_out = lab_buf_input(out.x, "out");
    LabBuf d_dpre = lab_buf_alloc((size_t)N * OC * sizeof(floatX), "dpre");
    LabBuf d_dw = lab_buf_alloc(dw0_b.size(), "dwp");
    LabBuf d_db = s->bias ? lab_buf_alloc(db0_b.size(), "dbp") : lab_buf_none("dbp");
    char trial[128];
    snprintf(trial, sizeof(trial), "backward N=%d C=%d OC=%d %s", N, C, OC, s->bias ? "bias" : "no-bias");
    int failed = 0;
    for (int ver : a->versions) {
        LabVerdict v;
        lab_verdict_init(&v);
        std::vector<unsigned char> b_dpre, b_dw, b_db;
        for (int rep = 0; rep < 2; rep++) {
            lab_buf_poison(&d_dpre);
            lab_buf_upload(&d_dw, dw0_b.data());
            if (s->bias) { lab_buf_upload(&d_db, db0_b.data()); }
            fc_backward(ver, (floatX*)d_dpre.ptr, (float*)d_dw.ptr, (float*)d_db.ptr, (const floatX*)d_dy.ptr,
                        (const floatX*)d_out.ptr, (const floatX*)d_wp.ptr, (const floatX*)d_pre.ptr, N, C, OC);
            cudaCheck(cudaDeviceSynchronize());
            const std::vector<unsigned char> p = lab_buf_download(&d_dpre), w = lab_buf_download(&d_dw),
                                             bb = s->bias ? lab_buf_download(&d_db) : std::vector<unsigned char>();
            if (rep == 0) { b_dpre = p; b_dw = w; b_db = bb; continue; }
            lab_check_same(b_dpre, p, "dpre", &v);
            lab_check_same(b_dw, w, "dwp", &v);
            lab_check_same(b_db, bb, "dbp", &v);
        }
        for (const LabBuf* bf : {&d_dpre, &d_dw, &d_db}) { lab_buf_guards_ok(bf, &v.fail); }
        lab_buf_intact(&d_dy, dy.x, &v.fail);
        lab_buf_intact(&d_wp, wp.x, &v.fail);
        lab_buf_intact(&d_pre, pre.x, &v.fail);
        lab_buf_intact(&d_out, out.x, &v.fail);
        const size_t ud = lab_count_unwritten(b_dpre, sizeof(floatX));
        if (ud > 0) { v.fail += "; " + std::to_string(ud) + " elements of dpre never written"; }
        const std::vector<float> dpre = lab_x_to_floats(b_dpre), dw = lab_f32_from_bytes(b_dw);
        lab_compare_rows(trial, ver, "dpre", dpre.data(), dpre_ref.data(), dpre.size(), (size_t)OC, TOL_X, &v);
        lab_compare_rows(trial, ver, "dwp", dw.data(), dw_ref.data(), dw.size(), (size_t)OC, TOL_F32, &v);
        if (s->bias) {
            const std::vector<float> db = lab_f32_from_bytes(b_db);
            lab_compare_rows(trial, ver, "dbp", db.data(), db_ref.data(), db.size(), (size_t)C, TOL_F32, &v);
        }
        int epi = 0, bgrad = 0;
        const std::string what = std::string(trial) + ", path: " + backward_path(ver, N, C, OC, s->bias, &epi, &bgrad);
        if (ver == 2) {
            tally->epilogue[1] += epi;
            tally->fallback[1] += !epi;
            if (!epi) { tally->fallback_shapes[1] += std::string(" (") + (trial + 9) + ")"; }
        }
        if (ver == 3 && s->bias) {
            tally->epilogue[2] += bgrad;
            tally->fallback[2] += !bgrad;
            if (!bgrad) { tally->fallback_shapes[2] += std::string(" (") + (trial + 9) + ")"; }
        }
        failed |= lab_verdict_print(a, ver, what.c_str(), seed, 1, &v);
    }
    for (LabBuf* bf : {&d_dy, &d_wp, &d_pre, &d_out, &d_dpre, &d_dw, &d_db}) { lab_buf_free(bf); }
    return failed;
}

static int check(const LabArgs* a) {
    const int Ns[3] = {7, 64, 1024}, Cs[2] = {64, 768}, OCs[2] = {256, 3072};
    PathTally tally = {{0, 0, 0}, {0, 0, 0}, {"", "", ""}};
    int failed = 0, count = 0;
    printf("check: forward and backward, N x C x OC x bias%s; tolerances bf16 %.0e, fp32 %.0e\n",
           a->quick ? " (--quick: N 7 and 64)" : "", TOL_X, TOL_F32);
    for (int N : Ns) {
        if (a->quick && N > 64) { continue; }
        for (int C : Cs) {
            for (int OC : OCs) {
                for (int bias = 1; bias >= 0; bias--) {
                    const Shape s = {N, C, OC, bias};
                    failed |= check_forward(a, &s, &tally);
                    failed |= check_backward(a, &s, &tally);
                    count += 2;
                }
            }
        }
    }
    printf("check: %d (direction, shape) trials\n", count);
    const char* dir[3] = {"v2 forward (GELU_AUX[_BIAS])", "v2 backward (DGELU)", "v3 bias gradient (BGRADB)"};
    for (int d = 0; d < 3; d++) {
        if (!lab_version_selected(a, d < 2 ? 2 : 3)) { continue; }
        printf("paths %s: epilogue on %d shapes, fallback on %d%s%s\n", dir[d], tally.epilogue[d], tally.fallback[d],
               tally.fallback[d] ? ":" : "", tally.fallback_shapes[d].c_str());
    }
    return failed;
}

// ----------------------------------------------------------------------------
// the bench

static void bench(const LabArgs* a) {
    const int N = 65536, C = 768, OC = 3072;
    const size_t NC = (size_t)N * C, NO = (size_t)N * OC, CO = (size_t)C * OC;
    LabTimer timer;
    lab_timer_init(&timer);
    printf("bench: N=%d C=%d OC=%d with bias, bf16, median of %d runs, L2 (%zu MiB) flushed before each\n", N, C, OC,
           LAB_BENCH_REPS, timer.flush_bytes / 2 >> 20);
    const double f_fwd = 2.0 * N * (double)C * OC, f_bwd = 2.0 * f_fwd;
    const double b_fwd = 2.0 * ((double)NC + CO + OC + 2.0 * NO);
    const double b_bwd = 2.0 * NC + 2.0 * CO + 3.0 * 2.0 * NO + 8.0 * CO + 8.0 * C;
    lab_bench_predicted("forward", f_fwd, b_fwd);
    printf("predicted forward: v1 + gelu_forward_kernel's %.1f MB = %.3f ms; v2 the matmul alone\n", 4.0 * NO / 1e6,
           4.0 * NO / LAB_PEAK_BYTES * 1e3);
    lab_bench_predicted("backward", f_bwd, b_bwd);
    printf("predicted backward: v1 + gelu_backward_kernel's %.1f MB = %.3f ms; v2 the matmuls alone; v1 and v2 + "
           "bias_backward's %.1f MB = %.3f ms; v3 the matmuls alone\n", 6.0 * NO / 1e6, 6.0 * NO / LAB_PEAK_BYTES * 1e3,
           2.0 * NC / 1e6, 2.0 * NC / LAB_PEAK_BYTES * 1e3);
    floatX* inp = (floatX*)device_malloc(NC * sizeof(floatX), "bench inp");
    floatX* w = (floatX*)device_malloc(CO * sizeof(floatX), "bench w");
    floatX* b = (floatX*)device_malloc(OC * sizeof(floatX), "bench b");
    floatX* pre = (floatX*)device_malloc(NO * sizeof(floatX), "bench pre");
    floatX* out = (floatX*)device_malloc(NO * sizeof(floatX), "bench out");
    floatX* dy = (floatX*)device_malloc(NC * sizeof(floatX), "bench dy");
    floatX* wp = (floatX*)device_malloc(CO * sizeof(floatX), "bench wp");
    floatX* dpre = (floatX*)device_malloc(NO * sizeof(floatX), "bench dpre");
    float* dwp = (float*)device_malloc(CO * sizeof(float), "bench dwp");
    float* dbp = (float*)device_malloc(C * sizeof(float), "bench dbp");
    struct { floatX* p; size_t n; float std; } fills[] = {
        {inp, NC, 1.0f}, {w, CO, 1.5f / sqrtf((float)C)}, {b, (size_t)OC, 0.5f}, {dy, NC, 1.0f}, {wp, CO, 1.0f / sqrtf((float)OC)}};
    for (int i = 0; i < 5; i++) {
        init_normal_kernel<<<grid_for(fills[i].n, 256), 256>>>(fills[i].p, NULL, 0, 0, fills[i].n, fills[i].std, a->seed, i);
        launchCheck();
    }
    cudaCheck(cudaMemset(dwp, 0, CO * sizeof(float)));
    cudaCheck(cudaMemset(dbp, 0, C * sizeof(float)));
    fc_forward(1, out, pre, inp, w, b, N, C, OC); // the backward's pre and out
    for (int ver : a->versions) {
        const double ms = lab_time_median_ms(&timer, LAB_BENCH_REPS, [&]() {
            fc_forward(ver, out, pre, inp, w, b, N, C, OC);
        });
        int epi = 0;
        printf("bench v%d forward  N=%d C=%d OC=%d ms=%.4f TFLOP/s=%.1f GB/s=%.1f (path: %s)\n", ver, N, C, OC, ms,
               f_fwd / (ms * 1e-3) / 1e12, b_fwd / (ms * 1e-3) / 1e9, forward_path(ver, N, C, OC, 1, &epi).c_str());
        fflush(stdout);
    }
    for (int ver : a->versions) {
        const double ms = lab_time_median_ms(&timer, LAB_BENCH_REPS, [&]() {
            fc_backward(ver, dpre, dwp, dbp, dy, out, wp, pre, N, C, OC);
        });
        int epi = 0, bgrad = 0;
        printf("bench v%d backward N=%d C=%d OC=%d ms=%.4f TFLOP/s=%.1f GB/s=%.1f (path: %s)\n", ver, N, C, OC, ms,
               f_bwd / (ms * 1e-3) / 1e12, b_bwd / (ms * 1e-3) / 1e9, backward_path(ver, N, C, OC, 1, &epi, &bgrad).c_str());
        fflush(stdout);
    }
    void* bufs[] = {inp, w, b, pre, out, dy, wp, dpre, dwp, dbp};
    for (void* p : bufs) { cudaCheck(cudaFree(p)); }
    lab_timer_free(&timer);
}

int main(int argc, char** argv) {
    const LabSpec spec = {"lab_matmul_gelu", "the fc layer with GELU of train_gpt2.cu (matmul_forward_gelu, "
                          "matmul_backward_gelu)", kVersions, LAB_COUNT(kVersions), 0,
                          "forward and backward, N x C x OC x bias against float64, naming the path that ran",
                          "N 65536, C 768, OC 3072: ms, TFLOP/s, GB/s, forward and backward", NULL};
    LabArgs a;
    if (!lab_parse_args(&a, argc, argv, &spec)) { return 0; }
    if (!lab_bf16_or_skip(&a) || !lab_device_or_skip(&a)) { return 0; }
    reduce_scratch_reserve(3072); // the trainer's allocation (gpt2_build)
    int failed = 0;
    if (a.check) { failed = check(&a); }
    if (a.bench) { bench(&a); }
    return lab_verdict(a.name, a.check, failed);
}
