/*
Kernel lab: the fused classifier of train_gpt2.cu (cross-entropy loss and dlogits, in place).

  losses (N) = logsumexp(logits[:, :V]) - logits[n, target[n]]; when write_dlogits, logits (N, Vp) is
  overwritten by dlogits = (softmax(logits[:, :V]) - onehot(target)) * dloss, padded columns V..Vp-1 0.

The two numbers (benchmark shape: 8192 rows (CLASSIFIER_CHUNK_ROWS, one chunk) x Vp = 50304 (V = 50257), bf16):
  bytes  the logits, 2 * rows * Vp = 824.2 MB, read at least once and overwritten once:
         minimum 2 x 824.2 MB = 1648.4 MB -> 0.549 ms at 3 TB/s (0.492 ms at the 3.35 TB/s peak)
  FLOPs  no matmul: per logit an exp, a subtraction, a max and a sum per pass; the exp decides, on the
         SFU (16 / clock / SM: about 3.6e12 / s on an H100 at 1.7 GHz): versions 1 and 3 2 exp per
         logit (0.82 G, 0.23 ms), version 2 2.25 (0.93 G, 0.26 ms); the fp32 arithmetic (~6 GFLOP at
         67 TFLOP/s, 0.09 ms) less. 790 TFLOP/s does not apply (no tensor-core work): memory-bound,
         predicted
         version 1: reads the row 3 times + writes it once = 3297 MB -> 1.099 ms
         version 2: reads it 2 times + writes it once     = 2473 MB -> 0.824 ms
         version 3: reads it once + writes it once        = 1648 MB -> 0.549 ms (0.492 ms at 3.35 TB/s)
         (all as if every read came from DRAM. A row is 100 KB; version 2's 2 blocks per SM keep
         264 rows, 26 MB, in flight, under the 50 MB L2, so its second read could hit L2 (floor
         0.549 ms) were its first pass not load128cs, evict-first; version 1's 4 blocks per SM, 53 MB.
         Version 3 holds 1 block per SM (62 registers x 1024 threads): an SM's next row is not loaded
         while its row is reduced (two butterflies and a barrier, ~1-2 us against the ~9 us a row's
         200 KB take at 1/132 of 3 TB/s), so it may land 10-20% over its floor, still under version 2)
  The whole chunk (matmul_forward, the kernel, matmul_backward) at C = 768 adds 3 matmuls of
  2 * rows * C * Vp = 1899 GFLOP in all, 2.404 ms at 790 TFLOP/s: the kernel is 25-30% of a chunk
  with version 2, 19% with version 3.

Versions (./build/lab_classifier [version]; one block per row, deterministic: fixed-order reductions,
no atomics; registers from -Xptxas -v, nvcc 13.0, sm_90):
  1  three passes: fused_classifier_kernel1, the trainer's kernel at commit cce9b07, copied below:
     grid rows, 512 threads, scalar bf16 loads; pass 1 the row max (block_max), pass 2 the sum of
     exp(x - max) (block_sum), pass 3 writes dlogits. 144 B static smem, 20 registers, no spills.
  2  online softmax: the trainer's fused_classifier_kernel (train_gpt2.cu), launched as version 3's
     launcher does where it falls back, grid rows, classifier_threads(Vp) threads (1024 at GPT-2's
     vocabulary, whole warps for the packs of a smaller one: 64 at Vp 512, 32 at 64): x128 loads
     (16 bytes, Vp % 8 == 0, rows 16-byte aligned); pass 1 keeps (max, sum) pairs merged by
     softmax_stats_merge (rescaling the sum when the max grows), butterflies over the warp, then over
     the warps (softmax_stats_block); pass 2 writes dlogits.
     272 B static smem, 32 registers, no spills (FP32 build: 28); __launch_bounds__(1024) keeps it
     <= 64, so 1024-thread blocks can launch. In the trainer: the fallback of version 3's launcher.
  3  one read: the trainer's fused_classifier (its launcher, as classifier_forward calls it), grid rows,
     classifier_threads(Vp) threads: fused_classifier_onepass_kernel<kPacks> where the row fits,
     kPacks in {1, 2, 4, 7} x128 per thread (the smallest holding ceil(Vp / 8 / threads): 7 at
     GPT-2's vocabulary, 1 at the small ones), else version 2's kernel (above 7 x 1024 packs: 57344
     columns in BF16, 28672 in FP32, so GPT-2's vocabulary in FP32 builds). Each thread loads its packs
     once (load128cs) into registers as 32-bit words (w128: two bf16 to a register), sets columns from
     V on to -inf there, takes its max (max.bf16x2 over the words) and its sum of exp(x - max), the
     block merges the threads' pairs as version 2 does (softmax_stats_block: the same butterflies,
     the same order), then each thread writes dlogits over its own packs from its registers.
     ptxas -v, sm_90, 272 B static smem, no stack frame, no spills (0 bytes stack frame: no LDL/STL
     possible; cuobjdump is not in this CUDA 13.0 install, so the SASS was not read):
       BF16: kPacks 1, 2, 4: 32 registers; 7: 62.   FP32: 1: 28; 2, 4: 32; 7: 64.
       (sm_80, the trainer's other architecture: kPacks 7 62 registers in both, no spills)
     kPacks 13 (GPT-2's row in FP32, 52 registers of data) does not fit: ptxas spills (BF16 64
     registers, 56 B stack, 76 B spill stores; FP32 64, 112 B stack, 220 B stores), so FP32 falls back
     to version 2; FP32 builds are the 1e-4 correctness builds, not timed. What kPacks 7 took (BF16
     spill stores before each step): the row as 32-bit words, not x128 (split into 16-bit values, a
     register each: 204 B); a constant stride between a thread's packs (one address pair: 120 B); the
     max on bf16x2 words (the compiler kept the max's 56 floats for the sum: 72 B); the sum converting
     with x2f, the dlogits with w128_get's shifts (with the same instructions the compiler kept the
     sum's floats across the barrier for the dlogits: 48 B).
  Besides, per version, the trainer's chunked path as a whole (gpt2_forward_staged's classifier loop):
  for R rows at a time, logits = lnf @ head^T (matmul_forward), the kernel, then matmul_backward into
  dlnf and dhead (+=), and loss_sum_kernel. Version 3 runs the trainer's classifier_forward itself:
  two logits buffers, chunk i's kernel on the classifier's stream beside chunk i + 1's matmul (issue
  55; the CPU runtime runs the two streams in an adversarial order, so a missing wait shows here too).

  ./build/lab_classifier [version] [--seed n] [--check] [--bench] [--quick]

--check (with neither --check nor --bench, both):
  kernel: V / Vp in {50257 / 50304, 60000 / 60032 (past version 3's registers: its launcher takes
  version 2's kernel), 500 / 512, 50 / 64} x rows in {1, 3, 1000} x logit patterns
  {random N(0, 3); one huge logit per row (1e4 or 3e38; at the target, in column V - 1 or elsewhere);
  all V logits equal (0 or N(0, 1000)); the row's max in column V - 1, the last pack}, padded columns
  NaN or +inf (alternating rows; the kernel must not read them as logits); targets 0 and V - 1 in
  rows 0 and 1, else uniform. Against cpu_classifier (kernels_cpu.h, float64) on the same bf16 values:
  losses per row and dlogits per element within the bounds below, padded columns exactly 0 (bits),
  losses all written; write_dlogits 0 leaves the logits byte for byte and gives the same losses
  (bits); a second run bit-identical; guards and targets unchanged.
  chunked path: (V 50257, C 64, N 3 and 1000), (V 500, C 768, N 1000), (V 50, C 64, N 8200: over
  8192) x R in {37, 8192}: lnf N(0, 1), head N(0, 1 / C) with its padded rows random (they must not
  matter), dhead starting random (+= checked), dloss = 1 / N; against float64 cross-entropy of
  lnf @ head^T (mean over N) and its gradients: per-row loss, mean loss (loss_sum_kernel), dlnf,
  dhead (padded rows unchanged, bits), the last chunk's dlogits; loss_sum_kernel's double sum against
  the sum of the losses it read (1e-10 of sum |loss|: only the order of a double sum differs,
  at most N 2^-53 of it).
  One PASS/FAIL line per (version, trial); exit 1 on any FAIL. Without a GPU: one SKIP line, exit 0.
  --quick (the CPU runtime, dev/cudacpu): the same without V 50257 and 60000 at 1000 rows (kernel and
  chunked): GPT-2's vocabulary (and the fallback's) at 1 and 3 rows, 1000 and 8200 rows at the small ones.
--bench: 8192 x 50304, median of 25 runs, L2 flushed before each (each run reads the dlogits the
  last one wrote: the same work): ms, GB/s over the minimum 1648 MB and over the version's own
  traffic; then the chunk at C = 768: ms, TFLOP/s.

Tolerances.
  Kernel (both sides read the same bf16 logits; only fp32 arithmetic and one bf16 rounding differ):
    eps_row = 2e-5 + 2^-22 * max(|lse|, |max|): the kernel's lse is off by the sum's rounding and the
    --use_fast_math exp/log (__expf 2 ulp plus 2^-24 |arg|, 16 merges' rescalings, __logf 2^-21.4
    absolute: <= 5e-6 at V = 50257), plus the rounding of lse itself (2^-24 |lse|, doubled for
    x - lse). A lost pack (8 of 50257 terms) moves lse by 1.6e-4: 8x the bound.
    loss:    |d| <= eps_row + 2^-23 |loss|
    dlogits: |d| <= 2^-7 |ref| + 2 eps_row p dloss + FLT_MIN: one bf16 ulp (the output's rounding may
             land on the other neighbour), p's relative error from lse, and the flush to zero of
             probabilities under 2^-126. At the target, ref = (p - 1) dloss loses p's absolute
             error, hence p (not |p - 1|) in the second term. With lse = 3e38 eps_row is 7e31: such a
             row checks only finiteness, exact zeros and the loss; the 1e4 rows check the one-hot.
    A C++ emulation of both kernels (their thread and reduction order, __expf as ex2 of the rounded
    x log2(e) times 1 +- 2^-22, __logf as lg2 +- 2^-22) over these trials: loss <= 0.21 of its bound,
    dlogits <= 0.5 (the half-ulp rounding against a one-ulp bound); the same with one pack dropped
    from the sum: 2..4e4 times the bound wherever the pack holds weight. Version 3 was not emulated:
    its terms are version 2's (a thread sums its 56 exps in order at one max, then the same
    merges), with no rescaling inside a thread; the CPU runtime's --quick gives its measured ratios.
  Chunked path (logits from a bf16 matmul: z rounded to bf16, |dz| <= 2^-9 |z|):
    loss per row, 1e-2 of max(1, |lse|, max |z|): the loss moves by sum_v p_v dz_v - dz_t, at most
    2^-8 max |z| (3.9e-3 of the scale), typically 10x less; a wrong target column moves it by ~|z|.
    mean loss, the same against max(1, |mean|).
    dlnf, dhead, dlogits: tensor rel_err 1e-2: each dlogit carries the output rounding (2^-9) and p's
    relative error from the rounded logits (dz_v - sum p dz, RMS ~2^-9 rms(z) / sqrt(3) ~ 1e-3 at
    logits of std 1); the matmuls accumulate in fp32. dhead starts at random values of its increment's
    size (larger ones would bury the increment's error in the norm). Emulated at these shapes: loss
    <= 0.2 of its tolerance, dlnf <= 2.5e-3, dhead's increment <= 2e-3, dlogits <= 2e-3; a dropped
    chunk or row gives 1e-1 or more.
*/
#define TESTING
#include "../../train_gpt2.cu"
#include "../cpu/kernels_cpu.h"
#include "common.h"

// ----------------------------------------------------------------------------
// version 1: the three-pass kernel of commit cce9b07 (train_gpt2.cu), kept as it was; its block_max
// and block_sum are the trainer's (dev/trainer/cuda_common.cuh)

// One block per row of logits (N rows of Vp; the first V are real). Computes the row's loss
// -log softmax(logits)[target] and, when write_dlogits, overwrites the row IN PLACE with
// dlogits = (softmax - onehot(target)) * dloss (padded columns 0). No probability tensor is stored.
__global__ void fused_classifier_kernel1(floatX* logits, float* losses, const int* targets, int N, int V, int Vp,
                                         float dloss, int write_dlogits) {
    __shared__ float shared32[32];
    __shared__ float s_target_logit;
    const int row = blockIdx.x;
    if (row >= N) { return; }
    floatX* x = logits + (size_t)row * Vp;
    const int target = targets[row];
    // every read of the row happens before the first write (the block reductions synchronize)
    if (threadIdx.x == 0) { s_target_logit = x2f(x[target]); }
    float m = -INFINITY;
    for (int v = threadIdx.x; v < V; v += blockDim.x) { m = fmaxf(m, x2f(x[v])); }
    m = block_max(m, shared32);
    float s = 0.0f;
    for (int v = threadIdx.x; v < V; v += blockDim.x) { s += expf(x2f(x[v]) - m); }
    s = block_sum(s, shared32); // synchronizes: s_target_logit is visible below
    const float lse = m + logf(s);
    if (threadIdx.x == 0) { losses[row] = lse - s_target_logit; }
    if (!write_dlogits) { return; }
    for (int v = threadIdx.x; v < Vp; v += blockDim.x) {
        float d = 0.0f;
        if (v < V) { d = (expf(x2f(x[v]) - lse) - (v == target ? 1.0f : 0.0f)) * dloss; }
        x[v] = f2x(d);
    }
}

// ----------------------------------------------------------------------------
// the versions

static const LabVersion kVersions[] = {
    {1, "three passes (max, sum, write), scalar loads, 512 threads: fused_classifier_kernel of commit cce9b07", 0, 0},
    {2, "online softmax (max and sum in one pass), x128 loads, up to 1024 threads: the trainer's fused_classifier_kernel", 0, 0},
    {3, "one read: the row in registers (kPacks x128 per thread), then dlogits from them: the trainer's fused_classifier "
        "(version 2's kernel past 7 packs per thread)", 0, 0},
};

// the launch of each version: v1 as commit cce9b07 launched it, v2 as the trainer's launcher launches
// its fallback, v3 the trainer's launcher itself
static void classifier_launch(int version, floatX* logits, float* losses, const int* targets, int N, int V, int Vp,
                              float dloss, int write_dlogits) {
    if (version == 3) {
        fused_classifier(logits, losses, targets, N, V, Vp, dloss, write_dlogits);
        return;
    }
    if (version == 1) {
        fused_classifier_kernel1<<<N, 512>>>(logits, losses, targets, N, V, Vp, dloss, write_dlogits);
    } else {
        fused_classifier_kernel<<<N, classifier_threads(Vp)>>>(logits, losses, targets, N, V, Vp, dloss, write_dlogits);
    }
    launchCheck();
}

// gpt2_forward_staged's classifier loop (train_gpt2.cu, "the classifier, logits_rows rows at a time"):
// version 3 runs the trainer's classifier_forward, versions 1 and 2 the same steps with their kernels on one
// stream and one buffer. out: two buffers of R rows of Vp when N > R, else one.
static void classifier_chunked(int version, floatX* out, int R, float* losses, double* loss_sum, floatX* dlnf,
                               float* dhead, const floatX* lnf, const floatX* head, const int* targets, int N, int C,
                               int V, int Vp, float dloss) {
    if (version == 3) { // the trainer's own loop
        classifier_forward(out, losses, dlnf, dhead, lnf, head, targets, N, R, C, V, Vp, dloss, 1);
    }
    for (int r0 = 0; r0 < N && version != 3; r0 += R) {
        const int rows = N - r0 < R ? N - r0 : R;
        const floatX* lnf_rows = lnf + (size_t)r0 * C;
        matmul_forward(out, lnf_rows, head, NULL, rows, C, Vp);
        classifier_launch(version, out, losses + r0, targets + r0, rows, V, Vp, dloss, 1);
        matmul_backward(dlnf + (size_t)r0 * C, dhead, NULL, out, lnf_rows, head, rows, C, Vp, 0.0f);
    }
    loss_sum_kernel<<<1, 1024>>>(loss_sum, losses, N);
    launchCheck();
}

// ----------------------------------------------------------------------------
// kernel check: inputs

enum { PAT_RANDOM = 0, PAT_HUGE, PAT_EQUAL, PAT_LAST_PACK, NUM_PATTERNS };
static const char* const pattern_names[NUM_PATTERNS] = {"random", "huge", "equal", "max-last-pack"};

typedef struct {
    int V, Vp, rows, pattern;
    unsigned long long seed;
    float dloss;
    std::vector<float> f;          // (rows, Vp) the logits' values (padding NaN / +inf)
    std::vector<unsigned char> x;  // the same as bf16 bytes
    std::vector<int> targets;
} KernelTrial;

static void kernel_trial_make(KernelTrial* t, int V, int Vp, int rows, int pattern, unsigned long long base_seed) {
    t->V = V;
    t->Vp = Vp;
    t->rows = rows;
    t->pattern = pattern;
    t->seed = lab_trial_seed(base_seed, {V, Vp, rows, pattern});
    unsigned long long rng = t->seed;
    t->dloss = 1.0f / (7.0f * rows); // not a power of two: the product is rounded too
    t->targets.resize(rows);
    for (int r = 0; r < rows; r++) {
        t->targets[r] = r == 0 ? 0 : r == 1 ? V - 1 : (int)(lab_uniform(&rng) * V);
    }
    t->f.assign((size_t)rows * Vp, 0.0f);
    for (int r = 0; r < rows; r++) {
        float* x = &t->f[(size_t)r * Vp];
        if (pattern == PAT_EQUAL) {
            const float c = r == 0 ? 0.0f : (float)(1000.0 * lab_normal(&rng));
            for (int v = 0; v < V; v++) { x[v] = c; }
        } else {
            for (int v = 0; v < V; v++) { x[v] = (float)(3.0 * lab_normal(&rng)); }
        }
        if (pattern == PAT_HUGE) {
            // 1e4: exp of every other logit underflows, the softmax is one-hot; 3e38 (bf16's largest
            // is 3.39e38): an exp of the raw logits, without the max subtracted, would overflow
            const int col = r % 3 == 0 ? t->targets[r] : r % 3 == 1 ? V - 1 : (int)(lab_uniform(&rng) * V);
            x[col] = r % 2 == 0 ? 1e4f : 3e38f;
        }
        if (pattern == PAT_LAST_PACK) {
            float m = x[0];
            for (int v = 1; v < V; v++) { m = fmaxf(m, x[v]); }
            x[V - 1] = m + 8.0f; // V - 1 shares its x128 pack with padding unless V % 8 == 0
        }
    }
    t->x.resize(t->f.size() * sizeof(floatX));
    host_floats_to_x(t->x.data(), t->f.data(), t->f.size());
    host_x_to_floats(t->f.data(), t->x.data(), t->f.size());
    uint16_t* bits = (uint16_t*)t->x.data();
    for (int r = 0; r < rows; r++) {
        const uint16_t pad = (r + pattern) % 2 ? 0x7F80u /* +inf */ : 0xFFFFu /* NaN */;
        for (int v = V; v < Vp; v++) {
            bits[(size_t)r * Vp + v] = pad;
            t->f[(size_t)r * Vp + v] = host_bf16_to_f32(pad);
        }
    }
}

// ----------------------------------------------------------------------------
// kernel check: one version on one trial

static int check_kernel_version(const LabArgs* a, int version, const KernelTrial* t, const std::vector<float>& loss_ref,
                                const std::vector<float>& dl_ref) {
    const int rows = t->rows, V = t->V, Vp = t->Vp;
    char trial[128];
    snprintf(trial, sizeof(trial), "kernel V=%d Vp=%d rows=%d %s", V, Vp, rows, pattern_names[t->pattern]);
    LabVerdict v;
    lab_verdict_init(&v);
    LabBuf logits = lab_buf_input(t->x, "logits");
    LabBuf losses = lab_buf_alloc((size_t)rows * sizeof(float), "losses");
    const std::vector<unsigned char> tb = lab_bytes_of(t->targets);
    LabBuf targets = lab_buf_input(tb, "targets");

    std::vector<unsigned char> dl_bytes, loss_bytes;
    for (int rep = 0; rep < 2; rep++) {
        lab_buf_upload(&logits, t->x.data());
        lab_buf_poison(&losses);
        classifier_launch(version, (floatX*)logits.ptr, (float*)losses.ptr, (const int*)targets.ptr, rows, V, Vp,
                          t->dloss, 1);
        cudaCheck(cudaDeviceSynchronize());
        const std::vector<unsigned char> d = lab_buf_download(&logits), l = lab_buf_download(&losses);
        if (rep == 0) { dl_bytes = d; loss_bytes = l; }
        else { lab_check_same(dl_bytes, d, "dlogits", &v); lab_check_same(loss_bytes, l, "losses", &v); }
    }
    // write_dlogits 0 (validation): the logits stay as they were, the losses are the same bits
    lab_buf_upload(&logits, t->x.data());
    lab_buf_poison(&losses);
    classifier_launch(version, (floatX*)logits.ptr, (float*)losses.ptr, (const int*)targets.ptr, rows, V, Vp, t->dloss, 0);
    cudaCheck(cudaDeviceSynchronize());
    if (lab_buf_download(&logits) != t->x) { v.fail += "; logits changed with write_dlogits 0"; }
    lab_check_same(loss_bytes, lab_buf_download(&losses), "losses of write_dlogits 0 vs 1", &v);
    lab_buf_guards_ok(&logits, &v.fail);
    lab_buf_guards_ok(&losses, &v.fail);
    lab_buf_intact(&targets, tb, &v.fail);
    const size_t unwritten = lab_count_unwritten(loss_bytes, sizeof(float));
    if (unwritten > 0) { v.fail += "; " + std::to_string(unwritten) + " losses never written (still 0xFF)"; }

    // losses: per row against eps_row (see the tolerances)
    const std::vector<float> loss = lab_f32_from_bytes(loss_bytes);
    std::vector<double> eps(rows);
    double worst_loss = 0.0, worst_loss_diff = 0.0;
    int worst_loss_row = 0;
    for (int r = 0; r < rows; r++) {
        const float* x = &t->f[(size_t)r * Vp];
        double m = x[0];
        for (int c = 1; c < V; c++) { m = fmax(m, (double)x[c]); }
        const double lse = (double)loss_ref[r] + x[t->targets[r]];
        eps[r] = 2e-5 + ldexp(fmax(fabs(lse), fabs(m)), -22);
        const double d = fabs((double)loss[r] - loss_ref[r]);
        const double ratio = isfinite(loss[r]) ? d / (eps[r] + ldexp(fabs((double)loss_ref[r]), -23)) : NAN;
        if (isnan(ratio) || (!isnan(worst_loss) && ratio > worst_loss)) {
            worst_loss = ratio;
            worst_loss_diff = d;
            worst_loss_row = r;
        }
    }
    printf("  %s loss max |d|/bound=%.3g (|d|=%.3g at row=%d: %.9g vs %.9g) (v%d vs cpu)\n", trial, worst_loss,
           worst_loss_diff, worst_loss_row, loss[worst_loss_row], loss_ref[worst_loss_row], version);
    char what[256];
    snprintf(what, sizeof(what), "loss |d|/bound %.3g at row %d vs cpu", worst_loss, worst_loss_row);
    lab_verdict_add(&v, worst_loss, what);

    // dlogits: per element against its bound, padded columns exactly +0 bits
    const std::vector<float> dl = lab_x_to_floats(dl_bytes);
    const uint16_t* dbits = (const uint16_t*)dl_bytes.data();
    double worst = 0.0;
    size_t worst_at = 0, beyond = 0, pad_nonzero = 0, first_pad = 0;
    for (int r = 0; r < rows; r++) {
        for (int c = 0; c < Vp; c++) {
            const size_t i = (size_t)r * Vp + c;
            if (c >= V) {
                if (dbits[i] != 0 && pad_nonzero++ == 0) { first_pad = i; }
                continue;
            }
            const double ref = dl_ref[i];
            const double p = ref / t->dloss + (c == t->targets[r] ? 1.0 : 0.0);
            const double bound = ldexp(fabs(ref), -7) + 2.0 * eps[r] * fabs(p) * t->dloss + FLT_MIN;
            const double ratio = isfinite(dl[i]) ? fabs((double)dl[i] - ref) / bound : NAN;
            if (isnan(ratio) || !(ratio <= 1.0)) { beyond++; }
            if (isnan(ratio) || (!isnan(worst) && ratio > worst)) { worst = ratio; worst_at = i; }
        }
    }
    std::vector<float> dl_real, ref_real;
    for (int r = 0; r < rows; r++) {
        dl_real.insert(dl_real.end(), dl.begin() + (size_t)r * Vp, dl.begin() + (size_t)r * Vp + V);
        ref_real.insert(ref_real.end(), dl_ref.begin() + (size_t)r * Vp, dl_ref.begin() + (size_t)r * Vp + V);
    }
    lab_compare_rows(trial, version, "dlogits", dl_real.data(), ref_real.data(), dl_real.size(), (size_t)V, 1e-2, &v);
    printf("  %s dlogits max |d|/bound=%.3g at row=%zu col=%zu (%.6g vs %.6g), %zu beyond their bound (v%d vs cpu)\n",
           trial, worst, worst_at / Vp, worst_at % Vp, dl[worst_at], dl_ref[worst_at], beyond, version);
    snprintf(what, sizeof(what), "dlogits |d|/bound %.3g at row %zu col %zu vs cpu (%zu beyond)", worst, worst_at / Vp,
             worst_at % Vp, beyond);
    lab_verdict_add(&v, worst, what);
    if (pad_nonzero > 0) {
        v.fail += "; " + std::to_string(pad_nonzero) + " padded dlogits not +0 (the first at row " +
                  std::to_string(first_pad / Vp) + " col " + std::to_string(first_pad % Vp) + ")";
    }
    lab_buf_free(&logits);
    lab_buf_free(&losses);
    lab_buf_free(&targets);
    return lab_verdict_print(a, version, trial, t->seed, 1, &v);
}

// ----------------------------------------------------------------------------
// chunked path check

typedef struct {
    int V, Vp, C, N, R;
    unsigned long long seed;
    LabHostX lnf, head;                    // (N, C), (Vp, C)
    std::vector<int> targets;
    std::vector<float> dhead0;             // (Vp, C) fp32, what dhead holds before (checks +=)
    // reference (float64, rounded once)
    std::vector<float> loss, dz, dlnf, dhead, scale; // (N), (N, Vp), (N, C), (Vp, C), per-row loss scale
    double mean_loss;
} ChunkTrial;

static void chunk_trial_make(ChunkTrial* t, int V, int Vp, int C, int N, int R, unsigned long long base_seed) {
    t->V = V;
    t->Vp = Vp;
    t->C = C;
    t->N = N;
    t->R = R;
    // R is left out: both chunk sizes see the same inputs and the same reference
    t->seed = lab_trial_seed(base_seed, {V, Vp, C, N});
    unsigned long long rng = t->seed;
    t->lnf = lab_host_x(lab_normal_vec((size_t)N * C, 0.0, 1.0, &rng));
    t->head = lab_host_x(lab_normal_vec((size_t)Vp * C, 0.0, 1.0 / sqrt((double)C), &rng)); // logits of std ~1
    t->targets.resize(N);
    for (int r = 0; r < N; r++) { t->targets[r] = r == 0 ? 0 : r == 1 ? V - 1 : (int)(lab_uniform(&rng) * V); }
    // z = lnf @ head^T over the V real rows; padded columns 0 (never read by cpu_classifier)
    std::vector<float> z((size_t)N * Vp, 0.0f), zv((size_t)N * V);
    lab_matmul_nt(zv.data(), t->lnf.f.data(), t->head.f.data(), NULL, N, C, V);
    for (int r = 0; r < N; r++) { memcpy(&z[(size_t)r * Vp], &zv[(size_t)r * V], V * sizeof(float)); }
    const float dloss = 1.0f / N;
    t->loss.resize(N);
    t->dz.resize((size_t)N * Vp);
    cpu_classifier(t->loss.data(), t->dz.data(), z.data(), t->targets.data(), N, V, Vp, dloss);
    t->scale.resize(N);
    double sum = 0.0;
    for (int r = 0; r < N; r++) {
        double zmax = 0.0;
        for (int c = 0; c < V; c++) { zmax = fmax(zmax, fabs((double)zv[(size_t)r * V + c])); }
        const double lse = (double)t->loss[r] + zv[(size_t)r * V + t->targets[r]];
        t->scale[r] = (float)fmax(1.0, fmax(fabs(lse), zmax));
        sum += t->loss[r];
    }
    t->mean_loss = sum / N;
    t->dlnf.resize((size_t)N * C);
    lab_matmul_nn(t->dlnf.data(), t->dz.data(), Vp, t->head.f.data(), N, V, C);
    // dhead starts at random values of the gradient's own size: larger ones would hide the gradient's
    // error in the tensor's norm (and in fp32 rounding), zeros would not show a missing +=
    std::vector<float> inc((size_t)V * C);
    lab_matmul_tn(inc.data(), NULL, t->dz.data(), Vp, t->lnf.f.data(), N, V, C);
    const double rms = sqrt(cpu_sum_squares(inc.data(), inc.size()) / (double)inc.size());
    t->dhead0.resize((size_t)Vp * C);
    for (size_t i = 0; i < t->dhead0.size(); i++) { t->dhead0[i] = (float)(rms * lab_normal(&rng)); }
    t->dhead = t->dhead0;
    for (size_t i = 0; i < inc.size(); i++) { t->dhead[i] = (float)((double)t->dhead0[i] + inc[i]); }
}

static int check_chunk_version(const LabArgs* a, int version, const ChunkTrial* t) {
    const int V = t->V, Vp = t->Vp, C = t->C, N = t->N, R = t->R;
    const int Rr = N < R ? N : R; // the trainer's logits_rows: min(B * T, chunk)
    char trial[128];
    snprintf(trial, sizeof(trial), "chunked V=%d Vp=%d C=%d N=%d R=%d", V, Vp, C, N, R);
    LabVerdict v;
    lab_verdict_init(&v);
    const std::vector<unsigned char> tb = lab_bytes_of(t->targets);
    const std::vector<unsigned char> dhead0 = lab_bytes_of(t->dhead0);
    LabBuf lnf = lab_buf_input(t->lnf.x, "lnf"), head = lab_buf_input(t->head.x, "head"), targets = lab_buf_input(tb, "targets");
    LabBuf out = lab_buf_alloc((size_t)(N > Rr ? 2 : 1) * Rr * Vp * sizeof(floatX), "output (R rows of logits, twice)");
    LabBuf losses = lab_buf_alloc((size_t)N * sizeof(float), "losses");
    LabBuf loss_sum = lab_buf_alloc(sizeof(double), "loss sum");
    LabBuf dlnf = lab_buf_alloc((size_t)N * C * sizeof(floatX), "dlnf");
    LabBuf dhead = lab_buf_alloc(dhead0.size(), "dhead");
    std::vector<unsigned char> b_loss, b_sum, b_dlnf, b_dhead, b_out;
    for (int rep = 0; rep < 2; rep++) {
        lab_buf_poison(&out);
        lab_buf_poison(&losses);
        lab_buf_poison(&dlnf);
        cudaCheck(cudaMemset(loss_sum.ptr, 0, sizeof(double)));
        lab_buf_upload(&dhead, dhead0.data());
        classifier_chunked(version, (floatX*)out.ptr, Rr, (float*)losses.ptr, (double*)loss_sum.ptr, (floatX*)dlnf.ptr,
                           (float*)dhead.ptr, (const floatX*)lnf.ptr, (const floatX*)head.ptr, (const int*)targets.ptr,
                           N, C, V, Vp, 1.0f / N);
        cudaCheck(cudaDeviceSynchronize());
        const std::vector<unsigned char> l = lab_buf_download(&losses), s = lab_buf_download(&loss_sum),
                                         d = lab_buf_download(&dlnf), h = lab_buf_download(&dhead),
                                         o = lab_buf_download(&out);
        if (rep == 0) { b_loss = l; b_sum = s; b_dlnf = d; b_dhead = h; b_out = o; continue; }
        lab_check_same(b_loss, l, "losses", &v);
        lab_check_same(b_sum, s, "loss sum", &v);
        lab_check_same(b_dlnf, d, "dlnf", &v);
        lab_check_same(b_dhead, h, "dhead", &v);
    }
    for (const LabBuf* b : {&out, &losses, &loss_sum, &dlnf, &dhead}) { lab_buf_guards_ok(b, &v.fail); }
    lab_buf_intact(&lnf, t->lnf.x, &v.fail);
    lab_buf_intact(&head, t->head.x, &v.fail);
    lab_buf_intact(&targets, tb, &v.fail);
    const size_t lu = lab_count_unwritten(b_loss, sizeof(float)), du = lab_count_unwritten(b_dlnf, sizeof(floatX));
    if (lu > 0) { v.fail += "; " + std::to_string(lu) + " losses never written"; }
    if (du > 0) { v.fail += "; " + std::to_string(du) + " elements of dlnf never written"; }

    // losses per row, against 1e-2 of the row's scale
    const std::vector<float> loss = lab_f32_from_bytes(b_loss);
    double worst = 0.0;
    int at = 0;
    for (int r = 0; r < N; r++) {
        const double ratio = isfinite(loss[r]) ? fabs((double)loss[r] - t->loss[r]) / (1e-2 * t->scale[r]) : NAN;
        if (isnan(ratio) || (!isnan(worst) && ratio > worst)) { worst = ratio; at = r; }
    }
    printf("  %s loss max |d|/(1e-2 scale)=%.3g at row=%d (%.6g vs %.6g) (v%d vs cpu)\n", trial, worst, at, loss[at],
           t->loss[at], version);
    char what[256];
    snprintf(what, sizeof(what), "loss |d|/(1e-2 scale) %.3g at row %d vs cpu", worst, at);
    lab_verdict_add(&v, worst, what);
    // loss_sum_kernel: the double sum of the losses it read, any order (a row left out moves it by a loss)
    double sum = 0.0, host_sum = 0.0, abs_sum = 0.0;
    memcpy(&sum, b_sum.data(), sizeof(double));
    for (int r = 0; r < N; r++) { host_sum += loss[r]; abs_sum += fabs((double)loss[r]); }
    const double sum_ratio = fabs(sum - host_sum) / (1e-10 * abs_sum + DBL_MIN);
    snprintf(what, sizeof(what), "loss_sum_kernel vs the losses' own sum: |d|/(1e-10 sum |loss|) %.3g", sum_ratio);
    lab_verdict_add(&v, isfinite(sum) ? sum_ratio : NAN, what);
    const double mean = sum / N, mean_ratio = fabs(mean - t->mean_loss) / (1e-2 * fmax(1.0, fabs(t->mean_loss)));
    printf("  %s mean loss %.7f vs %.7f (loss_sum_kernel / N) |d|/(1e-2 max(1, |mean|))=%.3g (v%d vs cpu)\n", trial, mean,
           t->mean_loss, mean_ratio, version);
    snprintf(what, sizeof(what), "mean loss |d|/tol %.3g vs cpu", mean_ratio);
    lab_verdict_add(&v, isfinite(mean) ? mean_ratio : NAN, what);

    const std::vector<float> gdlnf = lab_x_to_floats(b_dlnf), gdhead = lab_f32_from_bytes(b_dhead);
    lab_compare_rows(trial, version, "dlnf", gdlnf.data(), t->dlnf.data(), gdlnf.size(), (size_t)C, 1e-2, &v);
    lab_compare_rows(trial, version, "dhead", gdhead.data(), t->dhead.data(), (size_t)V * C, (size_t)C, 1e-2, &v);
    // padded head rows: their dlogits are 0, so dhead keeps its bits there
    if (memcmp(b_dhead.data() + (size_t)V * C * 4, dhead0.data() + (size_t)V * C * 4, (size_t)(Vp - V) * C * 4) != 0) {
        v.fail += "; dhead's padded rows changed (dlogits of padded columns not 0)";
    }
    // the last chunk's dlogits, still in out: in its buffer, (chunks - 1) % 2, for the trainer's loop (version 3)
    const int last0 = (N - 1) / Rr * Rr, last_rows = N - last0;
    const size_t last_at = version == 3 ? (size_t)(((N - 1) / Rr) % 2) * Rr * Vp : 0;
    const std::vector<float> o = lab_x_to_floats(b_out);
    std::vector<float> got, ref;
    size_t pad_nonzero = 0;
    const uint16_t* obits = (const uint16_t*)b_out.data();
    for (int r = 0; r < last_rows; r++) {
        got.insert(got.end(), o.begin() + last_at + (size_t)r * Vp, o.begin() + last_at + (size_t)r * Vp + V);
        ref.insert(ref.end(), t->dz.begin() + (size_t)(last0 + r) * Vp, t->dz.begin() + (size_t)(last0 + r) * Vp + V);
        for (int c = V; c < Vp; c++) { pad_nonzero += obits[last_at + (size_t)r * Vp + c] != 0; }
    }
    lab_compare_rows(trial, version, "dlogits(last chunk)", got.data(), ref.data(), got.size(), (size_t)V, 1e-2, &v);
    if (pad_nonzero > 0) { v.fail += "; " + std::to_string(pad_nonzero) + " padded dlogits of the last chunk not +0"; }
    for (LabBuf* b : {&lnf, &head, &targets, &out, &losses, &loss_sum, &dlnf, &dhead}) { lab_buf_free(b); }
    return lab_verdict_print(a, version, trial, t->seed, 1, &v);
}

// ----------------------------------------------------------------------------

static int check(const LabArgs* a) {
    // 60000 / 60032: 7504 packs, past version 3's 7 x 1024 (BF16): its launcher takes version 2's kernel
    static const int Vs[4][2] = {{50257, 50304}, {60000, 60032}, {500, 512}, {50, 64}};
    const int rows_list[3] = {1, 3, 1000};
    int failed = 0, count = 0;
    printf("check: kernel trials (V x rows x pattern), then the chunked path; bounds in the header%s\n",
           a->quick ? " (--quick: V 50257 and 60000 at 1 and 3 rows; no chunked trial of V 50257 x 1000 rows)" : "");
    for (int vi = 0; vi < 4; vi++) {
        for (int rows : rows_list) {
            if (a->quick && Vs[vi][0] >= 50257 && rows == 1000) { continue; }
            for (int p = 0; p < NUM_PATTERNS; p++) {
                KernelTrial t;
                kernel_trial_make(&t, Vs[vi][0], Vs[vi][1], rows, p, a->seed);
                std::vector<float> loss_ref(rows), dl_ref((size_t)rows * t.Vp);
                cpu_classifier(loss_ref.data(), dl_ref.data(), t.f.data(), t.targets.data(), rows, t.V, t.Vp, t.dloss);
                for (int ver : a->versions) {
                    failed |= check_kernel_version(a, ver, &t, loss_ref, dl_ref);
                    count++;
                }
            }
        }
    }
    typedef struct { int V, Vp, C, N; } ChunkShape;
    const ChunkShape shapes[4] = {{50257, 50304, 64, 3}, {50257, 50304, 64, 1000}, {500, 512, 768, 1000}, {50, 64, 64, 8200}};
    const int Rs[2] = {37, CLASSIFIER_CHUNK_ROWS};
    for (const ChunkShape& s : shapes) {
        if (a->quick && s.V == 50257 && s.N == 1000) { continue; }
        ChunkTrial t;
        chunk_trial_make(&t, s.V, s.Vp, s.C, s.N, Rs[0], a->seed);
        for (int R : Rs) {
            t.R = R;
            for (int ver : a->versions) {
                failed |= check_chunk_version(a, ver, &t);
                count++;
            }
        }
    }
    printf("check: %d (version, trial) pairs\n", count);
    return failed;
}

static void bench(const LabArgs* a) {
    const int rows = CLASSIFIER_CHUNK_ROWS, V = 50257, Vp = 50304, C = 768;
    const double bytes = 2.0 * rows * Vp;                        // the logits once
    const double traffic[4] = {0.0, 4.0 * bytes, 3.0 * bytes, 2.0 * bytes}; // v1: 3 reads + 1 write; v2: 2 + 1; v3: 1 + 1
    LabTimer timer;
    lab_timer_init(&timer);
    printf("bench: rows=%d V=%d Vp=%d, bf16, median of %d runs, L2 (%zu MiB) flushed before each\n",
           rows, V, Vp, LAB_BENCH_REPS, timer.flush_bytes / 2 >> 20);
    printf("predicted kernel: read once + write once (v3) %.1f MB / 3 TB/s = %.3f ms (floor); v1 3 reads + 1 write "
           "%.3f ms; v2 2 reads + 1 write %.3f ms: memory-bound\n", 2.0 * bytes / 1e6, 2.0 * bytes / LAB_PEAK_BYTES * 1e3,
           traffic[1] / LAB_PEAK_BYTES * 1e3, traffic[2] / LAB_PEAK_BYTES * 1e3);
    const size_t n = (size_t)rows * Vp;
    // each run overwrites the logits with dlogits and the next run reads those: the same bytes and
    // the same exps whatever the values (all finite), so the logits are not restored between runs
    floatX* logits = (floatX*)device_malloc(n * sizeof(floatX), "bench logits");
    float* losses = (float*)device_malloc(rows * sizeof(float), "bench losses");
    init_normal_kernel<<<grid_for(n, 256), 256>>>(logits, NULL, 0, 0, n, 3.0f, a->seed, 1);
    launchCheck();
    std::vector<int> ht(rows);
    unsigned long long rng = lab_mix64(a->seed);
    for (int r = 0; r < rows; r++) { ht[r] = (int)(lab_uniform(&rng) * V); }
    int* targets = (int*)device_malloc(rows * sizeof(int), "bench targets");
    cudaCheck(cudaMemcpy(targets, ht.data(), rows * sizeof(int), cudaMemcpyHostToDevice));
    for (int ver : a->versions) {
        const double ms = lab_time_median_ms(&timer, LAB_BENCH_REPS, [&]() {
            classifier_launch(ver, logits, losses, targets, rows, V, Vp, 1.0f / rows, 1);
        });
        printf("bench v%d kernel rows=%d Vp=%d ms=%.4f GB/s=%.1f (over the minimum %.0f MB) GB/s_own=%.1f (over its "
               "%.0f MB)\n", ver, rows, Vp, ms, 2.0 * bytes / (ms * 1e-3) / 1e9, 2.0 * bytes / 1e6,
               traffic[ver] / (ms * 1e-3) / 1e9, traffic[ver] / 1e6);
        fflush(stdout);
    }
    // the chunk as gpt2_forward_staged runs it (d12's C), to put the kernel's share in context
    floatX* lnf = (floatX*)device_malloc((size_t)rows * C * sizeof(floatX), "bench lnf");
    floatX* head = (floatX*)device_malloc((size_t)Vp * C * sizeof(floatX), "bench head");
    floatX* dlnf = (floatX*)device_malloc((size_t)rows * C * sizeof(floatX), "bench dlnf");
    float* dhead = (float*)device_malloc((size_t)Vp * C * sizeof(float), "bench dhead");
    double* loss_sum = (double*)device_malloc(sizeof(double), "bench loss sum");
    init_normal_kernel<<<grid_for((size_t)rows * C, 256), 256>>>(lnf, NULL, 0, 0, (size_t)rows * C, 1.0f, a->seed, 2);
    launchCheck();
    init_normal_kernel<<<grid_for((size_t)Vp * C, 256), 256>>>(head, NULL, 0, 0, (size_t)Vp * C, 0.036f, a->seed, 3);
    launchCheck();
    cudaCheck(cudaMemset(dhead, 0, (size_t)Vp * C * sizeof(float)));
    const double flops = 3.0 * 2.0 * rows * (double)C * Vp;
    printf("predicted chunk at C=%d: 3 matmuls, %.1f GFLOP / 790 TFLOP/s = %.3f ms, plus the kernel\n", C, flops / 1e9,
           flops / LAB_PEAK_FLOPS * 1e3);
    for (int ver : a->versions) {
        const double ms = lab_time_median_ms(&timer, LAB_BENCH_REPS, [&]() {
            classifier_chunked(ver, logits, rows, losses, loss_sum, dlnf, dhead, lnf, head, targets, rows, C, V, Vp,
                               1.0f / rows);
        });
        printf("bench v%d chunk rows=%d C=%d Vp=%d ms=%.4f TFLOP/s=%.1f (3 matmuls' FLOPs)\n", ver, rows, C, Vp, ms,
               flops / (ms * 1e-3) / 1e12);
        fflush(stdout);
    }
    void* bufs[] = {logits, losses, targets, lnf, head, dlnf, dhead, loss_sum};
    for (void* p : bufs) { cudaCheck(cudaFree(p)); }
    lab_timer_free(&timer);
}

int main(int argc, char** argv) {
    const LabSpec spec = {"lab_classifier", "the fused classifier of train_gpt2.cu (loss and dlogits in place) and its "
                          "chunked path", kVersions, LAB_COUNT(kVersions), 0,
                          "V x rows x logit patterns against float64, then the chunked path (R = 37, 8192)",
                          "8192 rows x Vp 50304: ms, GB/s; then the chunk at C 768: ms, TFLOP/s", NULL};
    LabArgs a;
    if (!lab_parse_args(&a, argc, argv, &spec)) { return 0; }
    if (!lab_bf16_or_skip(&a) || !lab_device_or_skip(&a)) { return 0; }
    int failed = 0;
    if (a.check) { failed = check(&a); }
    if (a.bench) { bench(&a); }
    return lab_verdict(a.name, a.check, failed);
}
