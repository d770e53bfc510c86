/*
Kernel lab: the encoder backward of train_gpt2.cu, the token-embedding gradient above all.

  dwte (V, C) fp32 += for each position p of the batch, dout[p, :] added to the row of its token inputs[p];
  dwpe (T, C) fp32 += sum over b of dout[b, t, :].
  No atomics: the positions are grouped by token on the host, so that each row of dwte has one writer
  and sums in a fixed order (runs bit-identical to themselves, which resume relies on).

The two numbers (benchmark shape: B 64, T 1024, so n = B * T = 65536 positions, C = 768, V = 50257,
Zipf tokens (below): U = 11963 distinct tokens, token 198 at 19768 positions, at the default seed 1337;
H100 ~790 TFLOP/s dense bf16, ~3 TB/s HBM3):
  wte: FLOPs = n * C adds = 0.050 GFLOP -> 0.0001 ms (0.0008 ms at the fp32 CUDA cores' ~67 TFLOP/s).
       bytes = 2 * n * C (dout, bf16, read once) + 8 * U * C (the present rows of dwte, read and written)
               + 4 * n (the positions in token order) = 100.7 + 73.5 + 0.3 = 174.4 MB -> 0.0581 ms: memory-bound.
  wpe: bytes = 2 * n * C (dout) + 8 * T * C (dwpe read and written) = 100.7 + 6.3 = 107.0 MB -> 0.0357 ms.
  Both read all of dout: one kernel for both would move 180.7 MB -> 0.0602 ms instead of 0.0938 ms.
  Host: grouping the positions by token, on the CPU: version 2 in gpt2_stage_batch while the GPU runs
  the previous micro-step, version 1 in the forward pass before any kernel (printed separately; on the
  machine that wrote this, v1 5 to 9 ms, v2 0.2 to 0.3 ms).

Versions (./build/lab_encoder_backward [version] [--seed n] [--check] [--bench]; registers from
`nvcc -Xptxas -v`, nvcc 13.0, sm_90; no spills, no shared memory):
  1  commit cce9b07's (copied below with a v1_ prefix). Host: std::sort of (token, position) pairs, one
     bucket per distinct token (O(n log n)), then three synchronous copies. wte: v1_encoder_backward_wte_kernel,
     grid (buckets, ceil(C / 128)) of 128 threads, a thread per (token, channel) walking every position of
     its token, one bf16 (2 bytes) per load: the Zipf case's token 198 is a chain of 19768 dependent-address
     loads per thread on ceil(C / 128) = 6 blocks; 28 registers. wpe: v1_encoder_backward_wpe_kernel,
     grid_for(T * C, 256) blocks of 256, a thread per (t, c) summing the B rows, scalar; 32 registers.
     Deterministic.
  2  the trainer's. Host: encoder_buckets_build (a counting sort over V + 1 counters, O(n + V)) into the
     staged batch's buffer (inputs | targets | buckets, gpt2_stage_batch's layout). wte:
     encoder_backward_wte_kernel, grid (chunks, col_blocks) of roundup32(C / 8) threads (96 at C = 768),
     a chunk = at most ENCODER_CHUNK = 64 positions of one token (12541 chunks at the benchmark), a thread
     per x128 (8 channels, 16-byte loads), 32 registers; a token's only chunk adds into dwte, the chunks of
     a token with several write scratch rows (643 at the benchmark, of encoder_scratch_rows(n) = 2049) that
     encoder_backward_wte_reduce_kernel, grid (tokens with several chunks: 65, col_blocks), adds in slot
     order, 40 registers. wpe: encoder_backward_wpe_kernel, a thread per (t, x128), ceil(T * C / 8 / 256)
     blocks of 256, 32 registers. Deterministic.

--check: every version, tokens uniform over V = 50257, Zipf-like (token 198 in 30% of the positions,
  the rest Zipf(1) over the vocabulary: the case version 1 serializes), or all one token (V - 1, the
  last row), for (B, T) in {(1, 1), (2, 32), (5, 13), (4, 25), (64, 1024)} (n = 1, 64, 65, 100, 65536:
  64 and 65 are one chunk and two) x C in {48, 768}. Fresh dout N(0, 1) in bf16 per case (seed printed);
  dwte and dwpe start from U(-1, 1) values (the kernels add to them); scratch filled with 0xFF (NaN)
  before each run; 1 KiB 0xFF guards around every buffer. dwte's rows of the tokens present ("dwte[present]",
  row = the k-th present token in id order) and all of dwpe against the float64 reference (dev/cpu/kernels_cpu.h, cpu_encoder_backward), rel_err =
  ||out - ref|| / ||ref|| within 1e-5 (fp32 sums; a host emulation of both versions' summation orders
  on this check's tokens gave at most 4.1e-7, at n = 65536 of one token); the rows of absent tokens
  byte for byte unchanged; guards and inputs (dout, bucket arrays) unchanged; a second run
  bit-identical. One PASS/FAIL line per (version, case); exit 1 on any FAIL. --quick (the CPU runtime,
  dev/cudacpu): C 768 (blocks of 96 threads; 32 at C 48) at (5, 13) only, n = 65: a token in two chunks;
  every shape at C 48 (a 50257 x 768 dwte per case is host work the CPU cannot spare).
--bench: the benchmark shape: host bucket ms (median of 5), then device ms (median of 25, L2 flushed
  before each) of wte and wpe per version, with GB/s of the minimum bytes above.
Without a CUDA device: one SKIP line, exit 0. BF16 builds only.
*/
#define TESTING
#include "../../train_gpt2.cu"
#include "../cpu/kernels_cpu.h"
#include "common.h"

#include <chrono>

#if !PRECISION_IS_BF16
#error "dev/cuda/encoder_backward.cu is a BF16 lab (dout is bf16 as in the trainer): build it with -DENABLE_BF16"
#endif

static const double TOL_F32 = 1e-5; // see the header: fp32 sums of bf16 values
#define LAB_V 50257                  // GPT-2's vocabulary (dwte's rows; the padding rows never get a token)
#define HOT_TOKEN 198                // the Zipf case's frequent token ("\n" in GPT-2's BPE)

// ----------------------------------------------------------------------------
// version 1: commit cce9b07's train_gpt2.cu, renamed with a v1_ prefix

// dwpe[t,c] += sum_b dout[b,t,c]
__global__ void v1_encoder_backward_wpe_kernel(float* dwpe, const floatX* dout, int B, int T, int C) {
    const size_t n = (size_t)T * C;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float s = 0.0f;
        for (int b = 0; b < B; b++) { s += x2f(dout[(size_t)b * n + i]); }
        dwpe[i] += s;
    }
}

// dwte[tok,c] += sum of dout[p,c] over the positions p holding tok. The host groups positions
// by token (bucket u: token bucket_tok[u], positions bucket_pos[bucket_start[u] .. bucket_start[u+1]))
// so that each row of dwte is written by one thread per channel, in a fixed order: no atomics.
__global__ void v1_encoder_backward_wte_kernel(float* dwte, const floatX* dout, const int* bucket_tok,
                                               const int* bucket_start, const int* bucket_pos, int C) {
    const int u = blockIdx.x;
    const int c = blockIdx.y * blockDim.x + threadIdx.x;
    if (c >= C) { return; }
    float s = 0.0f;
    for (int p = bucket_start[u]; p < bucket_start[u + 1]; p++) { s += x2f(dout[(size_t)bucket_pos[p] * C + c]); }
    dwte[(size_t)bucket_tok[u] * C + c] += s;
}

// cce9b07's prepare_encoder_buckets without the model: the arrays stay on the host (the caller copies)
typedef struct {
    std::vector<int> tok, start, pos;
} V1Buckets;

static void v1_prepare_encoder_buckets(V1Buckets* bk, const int* inputs, int BT) {
    std::vector<std::pair<int, int>> tp((size_t)BT);
    for (int i = 0; i < BT; i++) { tp[(size_t)i] = std::make_pair(inputs[i], i); }
    std::sort(tp.begin(), tp.end());
    bk->tok.clear();
    bk->start.clear();
    bk->pos.resize((size_t)BT);
    for (int i = 0; i < BT; i++) {
        if (i == 0 || tp[(size_t)i].first != tp[(size_t)i - 1].first) {
            bk->tok.push_back(tp[(size_t)i].first);
            bk->start.push_back(i);
        }
        bk->pos[(size_t)i] = tp[(size_t)i].second;
    }
    bk->start.push_back(BT);
}

// cce9b07's gpt2_backward, its last lines
static void v1_encoder_backward_wte(float* dwte, const floatX* dout, const int* tok, const int* start, const int* pos,
                                    int num_buckets, int C) {
    dim3 grid(num_buckets, (C + 127) / 128);
    v1_encoder_backward_wte_kernel<<<grid, 128>>>(dwte, dout, tok, start, pos, C);
    launchCheck();
}

static void v1_encoder_backward_wpe(float* dwpe, const floatX* dout, int B, int T, int C) {
    v1_encoder_backward_wpe_kernel<<<grid_for((size_t)T * C, 256), 256>>>(dwpe, dout, B, T, C);
    launchCheck();
}

// ----------------------------------------------------------------------------
// version 2: the trainer's kernels, launched as the end of gpt2_backward launches them (it has no
// launcher function of its own to call)

// the staged batch of a capacity of cap positions (gpt2_stage_batch): inputs | targets | buckets
typedef struct {
    std::vector<int> ints; // batch_ints(cap)
    size_t cap;
    int num_chunks, num_reduce;
} V2Batch;

static void v2_stage(V2Batch* sb, const int* inputs, int n, std::vector<int>* count) {
    sb->cap = (size_t)n;
    if (sb->ints.size() != batch_ints(sb->cap)) { sb->ints.assign(batch_ints(sb->cap), 0); } // allocated once, as pinned
    memcpy(sb->ints.data(), inputs, (size_t)n * sizeof(int));
    const EncoderBuckets o = encoder_buckets_layout(2 * sb->cap, sb->cap);
    encoder_buckets_build(sb->ints.data(), &o, inputs, n, LAB_V, count, &sb->num_chunks, &sb->num_reduce);
}

// version 2 is the trainer's launchers, as gpt2_backward calls them
static void v2_encoder_backward_wte(float* dwte, float* scratch, const floatX* dout, const int* batch_d, size_t cap,
                                    int num_chunks, int num_reduce, int C) {
    const EncoderBuckets o = encoder_buckets_layout(2 * cap, cap);
    encoder_backward_wte(dwte, scratch, dout, batch_d, &o, num_chunks, num_reduce, C);
}

static void v2_encoder_backward_wpe(float* dwpe, const floatX* dout, int B, int T, int C) {
    encoder_backward_wpe(dwpe, dout, B, T, C);
}

static const LabVersion kVersions[] = {
    {1, "cce9b07's: std::sort buckets, a thread per (token, channel) over all its positions", 0, 0},
    {2, "the trainer's: counting-sort buckets cut into chunks of 64, x128 threads, scratch + reduce", 0, 0},
};

// ----------------------------------------------------------------------------
// tokens

typedef enum { TOK_UNIFORM = 0, TOK_ZIPF = 1, TOK_ONE = 2 } TokenDist;
static const char* const kDistNames[3] = {"uniform", "zipf", "one-token"};

// n token ids: uniform over V; Zipf-like (HOT_TOKEN with probability 0.3, else rank r with probability
// proportional to 1 / r, token r - 1); or all V - 1
static std::vector<int> make_tokens(int dist, int n, unsigned long long* rng) {
    std::vector<int> t((size_t)n);
    if (dist == TOK_ONE) {
        std::fill(t.begin(), t.end(), LAB_V - 1);
        return t;
    }
    static std::vector<double> cdf; // Zipf(1) over 1..V, built once
    if (cdf.empty()) {
        cdf.resize(LAB_V);
        double s = 0.0;
        for (int r = 1; r <= LAB_V; r++) { s += 1.0 / r; cdf[(size_t)r - 1] = s; }
        for (double& c : cdf) { c /= s; }
    }
    for (int i = 0; i < n; i++) {
        if (dist == TOK_UNIFORM) {
            t[(size_t)i] = (int)(lab_uniform(rng) * LAB_V);
        } else if (lab_uniform(rng) < 0.3) {
            t[(size_t)i] = HOT_TOKEN;
        } else {
            const long r = std::lower_bound(cdf.begin(), cdf.end(), lab_uniform(rng)) - cdf.begin();
            t[(size_t)i] = (int)std::min(r, (long)LAB_V - 1); // cdf's last value is 1, u < 1: a guard only
        }
    }
    return t;
}

// ----------------------------------------------------------------------------
// check

// the device side of one case: inputs and outputs of both versions, each a guarded buffer
typedef struct {
    LabBuf dout, dwte, dwpe;
    LabBuf v1_tok, v1_start, v1_pos; // version 1's buckets
    LabBuf batch, scratch;           // version 2's staged batch and scratch rows
} CaseBufs;

static int check_case(const LabArgs* a, int dist, int B, int T, int C) {
    const int n = B * T;
    const unsigned long long seed = lab_trial_seed(a->seed, {dist, B, T, C});
    unsigned long long rng = seed;
    const std::vector<int> tokens = make_tokens(dist, n, &rng);
    const LabHostX dout = lab_host_x(lab_normal_vec((size_t)n * C, 0.0, 1.0, &rng));
    const std::vector<float> dwte0 = lab_uniform_vec((size_t)LAB_V * C, -1.0, 1.0, &rng);
    const std::vector<float> dwpe0 = lab_uniform_vec((size_t)T * C, -1.0, 1.0, &rng);

    std::vector<float> wte_ref = dwte0, wpe_ref = dwpe0;
    cpu_encoder_backward(wte_ref.data(), wpe_ref.data(), dout.f.data(), tokens.data(), B, T, C, LAB_V);
    std::vector<char> present(LAB_V, 0);
    for (int t : tokens) { present[(size_t)t] = 1; }
    std::vector<int> rows; // the present tokens, ascending
    for (int v = 0; v < LAB_V; v++) {
        if (present[(size_t)v]) { rows.push_back(v); }
    }
    std::vector<float> ref_rows(rows.size() * C);
    for (size_t i = 0; i < rows.size(); i++) {
        memcpy(&ref_rows[i * C], &wte_ref[(size_t)rows[i] * C], C * sizeof(float));
    }

    V1Buckets v1;
    v1_prepare_encoder_buckets(&v1, tokens.data(), n);
    V2Batch v2;
    std::vector<int> count;
    v2_stage(&v2, tokens.data(), n, &count);

    CaseBufs d;
    d.dout = lab_buf_input(dout.x, "dout");
    d.dwte = lab_buf_alloc((size_t)LAB_V * C * sizeof(float), "dwte");
    d.dwpe = lab_buf_alloc((size_t)T * C * sizeof(float), "dwpe");
    const std::vector<unsigned char> b_tok = lab_bytes_of(v1.tok), b_start = lab_bytes_of(v1.start), b_pos = lab_bytes_of(v1.pos);
    const std::vector<unsigned char> b_batch = lab_bytes_of(v2.ints);
    d.v1_tok = lab_buf_input(b_tok, "v1 bucket_tok");
    d.v1_start = lab_buf_input(b_start, "v1 bucket_start");
    d.v1_pos = lab_buf_input(b_pos, "v1 bucket_pos");
    d.batch = lab_buf_input(b_batch, "v2 staged batch");
    d.scratch = lab_buf_alloc(encoder_scratch_rows(v2.cap) * C * sizeof(float), "v2 wte scratch");
    const std::vector<unsigned char> b_dwte0 = lab_bytes_of(dwte0), b_dwpe0 = lab_bytes_of(dwpe0);

    char what[160];
    snprintf(what, sizeof(what), "%s B=%d T=%d C=%d (%zu tokens; v1 %zu buckets; v2 %d chunks, %d reduced)",
             kDistNames[dist], B, T, C, rows.size(), v1.tok.size(), v2.num_chunks, v2.num_reduce);
    int failed = 0;
    for (int version : a->versions) {
        LabVerdict v;
        lab_verdict_init(&v);
        std::vector<unsigned char> first[2];
        for (int rep = 0; rep < 2; rep++) {
            lab_buf_upload(&d.dwte, b_dwte0.data());
            lab_buf_upload(&d.dwpe, b_dwpe0.data());
            lab_buf_poison(&d.scratch);
            if (version == 1) {
                v1_encoder_backward_wpe((float*)d.dwpe.ptr, (const floatX*)d.dout.ptr, B, T, C);
                v1_encoder_backward_wte((float*)d.dwte.ptr, (const floatX*)d.dout.ptr, (const int*)d.v1_tok.ptr,
                                        (const int*)d.v1_start.ptr, (const int*)d.v1_pos.ptr, (int)v1.tok.size(), C);
            } else {
                v2_encoder_backward_wpe((float*)d.dwpe.ptr, (const floatX*)d.dout.ptr, B, T, C);
                v2_encoder_backward_wte((float*)d.dwte.ptr, (float*)d.scratch.ptr, (const floatX*)d.dout.ptr,
                                        (const int*)d.batch.ptr, v2.cap, v2.num_chunks, v2.num_reduce, C);
            }
            cudaCheck(cudaDeviceSynchronize());
            const std::vector<unsigned char> h[2] = {lab_buf_download(&d.dwte), lab_buf_download(&d.dwpe)};
            for (int i = 0; i < 2; i++) {
                if (rep == 0) { first[i] = h[i]; }
                else { lab_check_same(first[i], h[i], i == 0 ? "dwte" : "dwpe", &v); }
            }
        }
        const std::vector<float> wte = lab_f32_from_bytes(first[0]), wpe = lab_f32_from_bytes(first[1]);
        std::vector<float> out_rows(rows.size() * C);
        size_t changed_absent = 0;
        for (size_t i = 0; i < rows.size(); i++) { memcpy(&out_rows[i * C], &wte[(size_t)rows[i] * C], C * sizeof(float)); }
        for (int t = 0; t < LAB_V; t++) {
            const size_t off = (size_t)t * C * sizeof(float);
            if (!present[(size_t)t] && memcmp(&first[0][off], &b_dwte0[off], C * sizeof(float)) != 0) { changed_absent++; }
        }
        if (changed_absent > 0) {
            v.fail += "; " + std::to_string(changed_absent) + " rows of dwte of tokens not in the batch changed";
        }
        lab_compare_rows(what, version, "dwte[present]", out_rows.data(), ref_rows.data(), out_rows.size(), C, TOL_F32, &v);
        lab_compare_rows(what, version, "dwpe", wpe.data(), wpe_ref.data(), wpe.size(), C, TOL_F32, &v);
        lab_buf_guards_ok(&d.dwte, &v.fail);
        lab_buf_guards_ok(&d.dwpe, &v.fail);
        lab_buf_guards_ok(&d.scratch, &v.fail);
        lab_buf_intact(&d.dout, dout.x, &v.fail);
        lab_buf_intact(&d.v1_tok, b_tok, &v.fail);
        lab_buf_intact(&d.v1_start, b_start, &v.fail);
        lab_buf_intact(&d.v1_pos, b_pos, &v.fail);
        lab_buf_intact(&d.batch, b_batch, &v.fail);
        failed |= lab_verdict_print(a, version, what, seed, 1, &v);
    }
    LabBuf* all[8] = {&d.dout, &d.dwte, &d.dwpe, &d.v1_tok, &d.v1_start, &d.v1_pos, &d.batch, &d.scratch};
    for (LabBuf* b : all) { lab_buf_free(b); }
    return failed;
}

static int check(const LabArgs* a) {
    static const int BTs[5][2] = {{1, 1}, {2, 32}, {5, 13}, {4, 25}, {64, 1024}};
    static const int Cs[2] = {48, 768};
    printf("check: tokens {uniform, zipf, one-token} over V=%d x (B, T) {(1,1), (2,32), (5,13), (4,25), (64,1024)} x "
           "C {48, 768}%s; tolerance %.0e (fp32), absent rows exact\n", LAB_V,
           a->quick ? " (--quick: C 768 at (5,13) only)" : "", TOL_F32);
    int failed = 0;
    for (int dist = 0; dist < 3; dist++) {
        for (int i = 0; i < 5; i++) {
            for (int C : Cs) {
                if (a->quick && C != 48 && BTs[i][0] * BTs[i][1] != 65) { continue; }
                failed |= check_case(a, dist, BTs[i][0], BTs[i][1], C);
            }
        }
    }
    return failed;
}

// ----------------------------------------------------------------------------
// bench

#define BENCH_B 64
#define BENCH_T 1024
#define BENCH_C 768
#define BENCH_HOST_REPS 5

template <typename F>
static double host_median_ms(F fn) {
    std::vector<double> ms(BENCH_HOST_REPS);
    for (int i = 0; i < BENCH_HOST_REPS; i++) {
        const auto t0 = std::chrono::steady_clock::now();
        fn();
        ms[(size_t)i] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    }
    std::sort(ms.begin(), ms.end());
    return ms[BENCH_HOST_REPS / 2];
}

static void bench(const LabArgs* a) {
    const int B = BENCH_B, T = BENCH_T, C = BENCH_C, n = B * T;
    unsigned long long rng = lab_trial_seed(a->seed, {TOK_ZIPF, B, T, C});
    const std::vector<int> tokens = make_tokens(TOK_ZIPF, n, &rng);
    std::vector<char> present(LAB_V, 0);
    for (int t : tokens) { present[(size_t)t] = 1; }
    const long long U = std::count(present.begin(), present.end(), 1);
    const long long hot = std::count(tokens.begin(), tokens.end(), HOT_TOKEN);
    const double wte_bytes = 2.0 * n * C + 8.0 * U * C + 4.0 * n, wpe_bytes = 2.0 * n * C + 8.0 * T * C;
    printf("bench: B=%d T=%d C=%d V=%d, zipf tokens: %lld distinct, token %d at %lld positions; %s, device: median of "
           "%d runs, L2 flushed before each; host: median of %d\n", B, T, C, LAB_V, U, HOT_TOKEN, hot, PRECISION_NAME,
           LAB_BENCH_REPS, BENCH_HOST_REPS);
    lab_bench_predicted("wte", (double)n * C, wte_bytes);
    lab_bench_predicted("wpe", (double)n * C, wpe_bytes);

    V1Buckets v1;
    V2Batch v2;
    std::vector<int> count;
    const double host_v1 = host_median_ms([&]() { v1_prepare_encoder_buckets(&v1, tokens.data(), n); });
    const double host_v2 = host_median_ms([&]() { v2_stage(&v2, tokens.data(), n, &count); });
    size_t largest = 0;
    for (size_t u = 0; u + 1 < v1.start.size(); u++) { largest = std::max(largest, (size_t)(v1.start[u + 1] - v1.start[u])); }
    printf("bench v1 host buckets (std::sort)            ms=%.3f (%zu buckets, the largest %zu positions)\n", host_v1,
           v1.tok.size(), largest);
    printf("bench v2 host buckets (encoder_buckets_build) ms=%.3f (%d chunks, %d tokens reduced, %zu scratch rows)\n",
           host_v2, v2.num_chunks, v2.num_reduce, encoder_scratch_rows(v2.cap));

    LabTimer timer;
    lab_timer_init(&timer);
    const LabHostX dout = lab_host_x(lab_uniform_vec((size_t)n * C, -1.0, 1.0, &rng));
    LabBuf d_dout = lab_buf_input(dout.x, "dout");
    LabBuf d_dwte = lab_buf_alloc((size_t)LAB_V * C * sizeof(float), "dwte"), d_dwpe = lab_buf_alloc((size_t)T * C * sizeof(float), "dwpe");
    cudaCheck(cudaMemset(d_dwte.ptr, 0, d_dwte.bytes));
    cudaCheck(cudaMemset(d_dwpe.ptr, 0, d_dwpe.bytes));
    LabBuf d_tok = lab_buf_input(lab_bytes_of(v1.tok), "v1 bucket_tok"), d_start = lab_buf_input(lab_bytes_of(v1.start), "v1 bucket_start");
    LabBuf d_pos = lab_buf_input(lab_bytes_of(v1.pos), "v1 bucket_pos"), d_batch = lab_buf_input(lab_bytes_of(v2.ints), "v2 staged batch");
    LabBuf d_scratch = lab_buf_alloc(encoder_scratch_rows(v2.cap) * C * sizeof(float), "v2 wte scratch");
    for (int version : a->versions) {
        const double ms_wte = lab_time_median_ms(&timer, LAB_BENCH_REPS, [&]() {
            if (version == 1) {
                v1_encoder_backward_wte((float*)d_dwte.ptr, (const floatX*)d_dout.ptr, (const int*)d_tok.ptr,
                                        (const int*)d_start.ptr, (const int*)d_pos.ptr, (int)v1.tok.size(), C);
            } else {
                v2_encoder_backward_wte((float*)d_dwte.ptr, (float*)d_scratch.ptr, (const floatX*)d_dout.ptr,
                                        (const int*)d_batch.ptr, v2.cap, v2.num_chunks, v2.num_reduce, C);
            }
        });
        lab_bench_line(version, "wte B=64 T=1024 C=768 zipf", ms_wte, wte_bytes);
        const double ms_wpe = lab_time_median_ms(&timer, LAB_BENCH_REPS, [&]() {
            if (version == 1) { v1_encoder_backward_wpe((float*)d_dwpe.ptr, (const floatX*)d_dout.ptr, B, T, C); }
            else { v2_encoder_backward_wpe((float*)d_dwpe.ptr, (const floatX*)d_dout.ptr, B, T, C); }
        });
        lab_bench_line(version, "wpe B=64 T=1024 C=768", ms_wpe, wpe_bytes);
    }
    LabBuf* all[8] = {&d_dout, &d_dwte, &d_dwpe, &d_tok, &d_start, &d_pos, &d_batch, &d_scratch};
    for (LabBuf* b : all) { lab_buf_free(b); }
    lab_timer_free(&timer);
}

int main(int argc, char** argv) {
    const LabSpec spec = {"lab_encoder_backward", "encoder backward of train_gpt2.cu: dwte (by token, no atomics) and dwpe",
                          kVersions, LAB_COUNT(kVersions), 0, NULL, NULL, NULL};
    LabArgs a;
    if (!lab_parse_args(&a, argc, argv, &spec)) { return 0; }
    if (!lab_device_or_skip(&a)) { return 0; }
    int failed = 0;
    if (a.check) { failed = check(&a); }
    if (a.bench) { bench(&a); }
    return lab_verdict(a.name, a.check, failed);
}
