/*
kernels_cpu.h: plain CPU references of the trainer's non-attention kernels (train_gpt2.cu, sections
"reductions" to "elementwise" and "classifier, optimizer, norms, init"): the math of
dev/FORMATS.md written the obvious way, one loop nest per formula, with no knowledge of how a kernel
splits the work. The CPU side of the kernel labs (layernorm, encoder_backward, classifier,
matmul_gelu, optimizer), which run on a GPU and, with --quick, on the CPU runtime of dev/cudacpu.

Conventions: tensors are row-major float arrays (a bf16 tensor passes as its exact float values);
every sum is accumulated in double and every result rounded once to float at the end, so a reference
is exact to fp32 rounding, far below any tolerance the comparisons use. Pointers documented "may be
NULL" turn that output or input off. Outputs never alias inputs unless stated.
*/
#ifndef KERNELS_CPU_H
#define KERNELS_CPU_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define CPU_NORM_EPS 1e-5 // LayerNorm and RMSNorm, as GPT-2 (biased variance)
#define CPU_GELU_SCALE 0.7978845608028654 // sqrt(2 / pi)

// out (B, T, C) = wte[inp[b, t], :] + wpe[t, :]
static inline void cpu_encoder_forward(float* out, const int* inp, const float* wte, const float* wpe, int B, int T, int C) {
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            const size_t bt = (size_t)b * T + t;
            const float* e = wte + (size_t)inp[bt] * C;
            const float* p = wpe + (size_t)t * C;
            for (int c = 0; c < C; c++) { out[bt * C + c] = (float)((double)e[c] + (double)p[c]); }
        }
    }
}

// dwte (V, C) += dout (B, T, C) summed into the row of each position's token; dwpe (T, C) += dout
// summed over b. Either output may be NULL.
static inline void cpu_encoder_backward(float* dwte, float* dwpe, const float* dout, const int* inp, int B, int T, int C, int V) {
    if (dwte != NULL) {
        double* acc = new double[(size_t)V * C]();
        for (size_t bt = 0; bt < (size_t)B * T; bt++) {
            for (int c = 0; c < C; c++) { acc[(size_t)inp[bt] * C + c] += dout[bt * C + c]; }
        }
        for (size_t i = 0; i < (size_t)V * C; i++) { dwte[i] = (float)((double)dwte[i] + acc[i]); }
        delete[] acc;
    }
    if (dwpe != NULL) {
        for (int t = 0; t < T; t++) {
            for (int c = 0; c < C; c++) {
                double s = dwpe[(size_t)t * C + c];
                for (int b = 0; b < B; b++) { s += dout[((size_t)b * T + t) * C + c]; }
                dwpe[(size_t)t * C + c] = (float)s;
            }
        }
    }
}

// LayerNorm over the C columns of each of N rows: n = (x - mean) * rstd, rstd = 1 / sqrt(var + eps)
// with the biased variance; out = n * weight + bias. bias, mean, rstd may be NULL.
static inline void cpu_layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                                  const float* bias, int N, int C) {
    for (int r = 0; r < N; r++) {
        const float* x = inp + (size_t)r * C;
        double m = 0.0, v = 0.0;
        for (int c = 0; c < C; c++) { m += x[c]; }
        m /= C;
        for (int c = 0; c < C; c++) { v += ((double)x[c] - m) * ((double)x[c] - m); }
        const double s = 1.0 / sqrt(v / C + CPU_NORM_EPS);
        for (int c = 0; c < C; c++) {
            double y = ((double)x[c] - m) * s * weight[c];
            if (bias != NULL) { y += bias[c]; }
            out[(size_t)r * C + c] = (float)y;
        }
        if (mean != NULL) { mean[r] = (float)m; }
        if (rstd != NULL) { rstd[r] = (float)s; }
    }
}

// residual = a + b (the residual stream), then out = LayerNorm(residual) as cpu_layernorm_forward.
// round (may be NULL) is the storage rounding of residual (bf16 builds: to bf16); the norm is of
// the stored values, as a kernel that normalizes what it wrote computes it.
static inline void cpu_residual_layernorm_forward(float* residual, float* out, float* mean, float* rstd, const float* a,
                                                  const float* b, const float* weight, const float* bias, int N, int C,
                                                  float (*round)(float)) {
    for (size_t i = 0; i < (size_t)N * C; i++) {
        const float r = (float)((double)a[i] + (double)b[i]);
        residual[i] = round != NULL ? round(r) : r;
    }
    cpu_layernorm_forward(out, mean, rstd, residual, weight, bias, N, C);
}

// RMSNorm: out = x * rstd * weight, rstd = 1 / sqrt(mean(x^2) + eps). rstd may be NULL.
static inline void cpu_rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int N, int C) {
    for (int r = 0; r < N; r++) {
        const float* x = inp + (size_t)r * C;
        double ss = 0.0;
        for (int c = 0; c < C; c++) { ss += (double)x[c] * x[c]; }
        const double s = 1.0 / sqrt(ss / C + CPU_NORM_EPS);
        for (int c = 0; c < C; c++) { out[(size_t)r * C + c] = (float)((double)x[c] * s * weight[c]); }
        if (rstd != NULL) { rstd[r] = (float)s; }
    }
}

// Gradients of LayerNorm (mean != NULL) or RMSNorm (mean == NULL) from the forward's mean and rstd:
//   n = (x - mean) * rstd (RMSNorm: x * rstd), dn = dout * weight,
//   dx = rstd * (dn - mean(dn) - n * mean(dn * n))   (RMSNorm: without the mean(dn) term);
//   dinp = dx, or dinp + dx when accumulate; dweight += sum over rows of dout * n;
//   dbias += sum over rows of dout. dinp, dweight and dbias may each be NULL.
static inline void cpu_norm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                              const float* weight, const float* mean, const float* rstd, int N, int C, int accumulate) {
    double* gw = new double[C]();
    double* gb = new double[C]();
    for (int r = 0; r < N; r++) {
        const size_t base = (size_t)r * C;
        const double m = mean != NULL ? mean[r] : 0.0, s = rstd[r];
        double sum_dn = 0.0, sum_dn_n = 0.0;
        for (int c = 0; c < C; c++) {
            const double n = ((double)inp[base + c] - m) * s, dn = (double)dout[base + c] * weight[c];
            sum_dn += dn;
            sum_dn_n += dn * n;
            gw[c] += (double)dout[base + c] * n;
            gb[c] += dout[base + c];
        }
        const double mean_dn = mean != NULL ? sum_dn / C : 0.0, mean_dn_n = sum_dn_n / C;
        if (dinp == NULL) { continue; }
        for (int c = 0; c < C; c++) {
            const double n = ((double)inp[base + c] - m) * s, dn = (double)dout[base + c] * weight[c];
            double dx = s * (dn - mean_dn - n * mean_dn_n);
            if (accumulate) { dx += dinp[base + c]; }
            dinp[base + c] = (float)dx;
        }
    }
    for (int c = 0; c < C; c++) {
        if (dweight != NULL) { dweight[c] = (float)((double)dweight[c] + gw[c]); }
        if (dbias != NULL) { dbias[c] = (float)((double)dbias[c] + gb[c]); }
    }
    delete[] gw;
    delete[] gb;
}

// dbias (OC) += column sums of dout (N, OC): a matmul's bias gradient
static inline void cpu_bias_backward(float* dbias, const float* dout, int N, int OC) {
    for (int c = 0; c < OC; c++) {
        double s = dbias[c];
        for (int r = 0; r < N; r++) { s += dout[(size_t)r * OC + c]; }
        dbias[c] = (float)s;
    }
}

// GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
static inline void cpu_gelu_forward(float* out, const float* inp, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const double x = inp[i];
        out[i] = (float)(0.5 * x * (1.0 + tanh(CPU_GELU_SCALE * (x + 0.044715 * x * x * x))));
    }
}

// dinp = gelu'(inp) * dout; dinp may be dout
static inline void cpu_gelu_backward(float* dinp, const float* inp, const float* dout, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const double x = inp[i];
        const double th = tanh(CPU_GELU_SCALE * (x + 0.044715 * x * x * x));
        const double du = CPU_GELU_SCALE * (1.0 + 3.0 * 0.044715 * x * x);
        dinp[i] = (float)((0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * du) * dout[i]);
    }
}

// out = a + b; out may be a or b
static inline void cpu_add(float* out, const float* a, const float* b, size_t n) {
    for (size_t i = 0; i < n; i++) { out[i] = (float)((double)a[i] + (double)b[i]); }
}

// out (N, OC) += bias (OC)
static inline void cpu_add_bias(float* out, const float* bias, int N, int OC) {
    for (size_t i = 0; i < (size_t)N * OC; i++) { out[i] = (float)((double)out[i] + (double)bias[i % OC]); }
}

// Classifier over N rows of logits (N, Vp), the first V columns real: losses[r] =
// logsumexp(logits[r, :V]) - logits[r, targets[r]]; dlogits (N, Vp), when not NULL (it may be
// logits itself) = (softmax(logits[r, :V]) - onehot(targets[r])) * dloss, and 0 in the Vp - V
// padded columns.
static inline void cpu_classifier(float* losses, float* dlogits, const float* logits, const int* targets, int N, int V, int Vp,
                           float dloss) {
    for (int r = 0; r < N; r++) {
        const float* x = logits + (size_t)r * Vp;
        double m = -INFINITY;
        for (int v = 0; v < V; v++) { m = x[v] > m ? x[v] : m; }
        double s = 0.0;
        for (int v = 0; v < V; v++) { s += exp((double)x[v] - m); }
        const double lse = m + log(s);
        const double target_logit = x[targets[r]];
        if (losses != NULL) { losses[r] = (float)(lse - target_logit); }
        if (dlogits == NULL) { continue; }
        float* d = dlogits + (size_t)r * Vp;
        for (int v = 0; v < Vp; v++) {
            d[v] = v < V ? (float)((exp((double)x[v] - lse) - (v == targets[r] ? 1.0 : 0.0)) * dloss) : 0.0f;
        }
    }
}

// AdamW step t (1, 2, ...) on n parameters p (fp32: the master weights, or the parameters' values),
// FORMATS.md: g = grad * grad_scale; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
// p -= lr * (m / (1 - b1^t) / (sqrt(v / (1 - b2^t)) + eps) + wd * p). p, m, v are updated in place.
static inline void cpu_adamw(float* p, float* m, float* v, const float* grad, size_t n, float lr, float beta1, float beta2,
                      float eps, float wd, float grad_scale, int t) {
    const double bc1 = 1.0 - pow((double)beta1, (double)t), bc2 = 1.0 - pow((double)beta2, (double)t);
    for (size_t i = 0; i < n; i++) {
        const double g = (double)grad[i] * grad_scale;
        const double mi = beta1 * (double)m[i] + (1.0 - beta1) * g;
        const double vi = beta2 * (double)v[i] + (1.0 - beta2) * g * g;
        const double pi = p[i];
        p[i] = (float)(pi - lr * (mi / bc1 / (sqrt(vi / bc2) + eps) + wd * pi));
        m[i] = (float)mi;
        v[i] = (float)vi;
    }
}

// the factor AdamW's gradients are scaled by: clip / norm when clipping is on (clip > 0) and the
// global norm sqrt(norm_sq) exceeds it, else 1
static inline double cpu_grad_clip_scale(double norm_sq, double clip) {
    const double norm = sqrt(norm_sq);
    return clip > 0.0 && norm > clip ? clip / norm : 1.0;
}

// *accum += the sum of losses[0 .. n) (the mean loss's numerator, kept in double)
static inline void cpu_loss_sum(double* accum, const float* losses, int n) {
    double s = 0.0;
    for (int i = 0; i < n; i++) { s += losses[i]; }
    *accum += s;
}

// sum of x[i]^2 (the squared global gradient norm)
static inline double cpu_sum_squares(const float* x, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) { s += (double)x[i] * x[i]; }
    return s;
}

// the trainer's counter-based normal numbers (init_normal_kernel): element i of a stream is
// std * sqrt(-2 ln u1) cos(2 pi u2), u1 and u2 from a 64-bit mix of (seed, stream, i)
static inline unsigned long long cpu_mix64(unsigned long long z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}
static inline void cpu_init_normal(float* out, size_t n, float std, unsigned long long seed, unsigned long long stream) {
    for (size_t i = 0; i < n; i++) {
        const unsigned long long h1 = cpu_mix64(seed * 0x9E3779B97F4A7C15ULL + stream * 0xD1B54A32D192ED03ULL + 2 * i + 1);
        const unsigned long long h2 = cpu_mix64(h1 ^ 0xABC98388FB8FAC03ULL);
        const double u1 = ((double)(h1 >> 40) + 0.5) / 16777216.0, u2 = (double)(h2 >> 40) / 16777216.0;
        out[i] = (float)(std * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
    }
}

#endif // KERNELS_CPU_H
