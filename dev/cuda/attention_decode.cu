/*
Kernel lab: the KV-cached decode attention of train_gpt2.cu (--generate, --num_samples), every
cache layout: k and v apart or one tensor (kv_shared, qkv_shared), GQA/MQA.

  For each of `batch` sequences decoded together, the new token at position t attends to that
  sequence's cached keys and values 0..t, query head h reading kv head h / (H / Hkv):
    out[b, h] = sum_j softmax_j(scale q[b, h] . k[b, j, kvh]) v[b, j, kvh]
  q (batch, q_stride): the step's q rows (the fused projection's, so q_stride is its width); the cache
  of one layer (batch, max_T, row): k at k_offset and v at v_offset of a row (the same offset when k
  and v are one tensor); rows past t hold whatever an earlier, longer sequence left there.

The two numbers (benchmark shapes: d12's heads, H 12, hd 64; a cache of 1024 positions, t = 1023;
bf16; row = 2 Hkv hd, or Hkv hd when k and v are one tensor):
  FLOPs = 4 batch H (t + 1) hd (q.k and p.v): 3.1 MFLOP per sequence, nothing on any GPU
  bytes = 2 batch (t + 1) row (every cached k and v element read once; q and out are 1.5 KB a sequence)
                           row    batch 1   batch 16   batch 64
    standard (Hkv 12)      1536   3.1 MB    50.3 MB    201.3 MB
    kv_shared (Hkv 12)      768   1.6 MB    25.2 MB    100.7 MB
    MQA (Hkv 1)             128   0.26 MB    4.2 MB     16.8 MB
    Q-MQA (Hkv 1, shared)    64   0.13 MB    2.1 MB      8.4 MB
  at the HBM rate (H200 ~4.8 TB/s; H100 ~3 TB/s), standard: 0.66 / 10.5 / 42 us (H100 1.0 / 17 / 67 us).
Predicted (not measured): version 1 is far from that floor, because it is latency-bound, not
bandwidth-bound. Its score pass gives each warp one key at a time (lanes over the head's 64
channels, 4 bytes a lane), then a 5-step shuffle sum: a dependent chain of one global load and the
shuffles per key, 128 keys per warp at t = 1023, ~0.5-0.8 us each from DRAM: ~60-100 us per block.
Its P V pass has each thread walk 256 keys for one channel, 2-byte loads: another ~50-150 us unless
the compiler overlaps the loads. So ~100-250 us per (sequence, head) block at t = 1023, whatever the
batch, as long as the blocks fit the GPU at once (12 at batch 1; 768 at batch 64 on 132 SMs, ~6 per
SM: still one wave). A layer's attention at batch 1, t = 1023, is then ~100x its bandwidth floor;
kv_shared's V pass reads the rows its score pass just read (from L2, ~2x lower latency), which is
how it can decode faster even at batch 1 (the GPU suite's --generate 256 rows: standard 533-559
tok/s, kv_shared 591-817 on the H200s of 2026-11-26 and 27, one run each).
The next version (not written): 16-byte loads (8 bf16 a lane: a warp covers 4 keys of hd 64), the
keys of a (sequence, head) split over several blocks (flash-decoding: each a partial max, sum and
P V, combined in a second pass), so that many loads are in flight per SM: bandwidth-bound at
batch 16 and 64 (the table above), and ~10 blocks per head at batch 1 to fill the SMs.

Versions (./build/lab_attention_decode [version] [--seed n] [--check] [--bench] [--quick]):
  1  the trainer's (attention_decode_forward, train_gpt2.cu): attention_decode_kernel, grid
     (H, batch), 256 threads; scores in dynamic shared memory ((t + 1) + hd + 256 floats: the cache
     must fit 48 KiB, kv_cache_build checks); fp32 softmax and sums; deterministic (fixed orders).
     40 registers, no spills, 128 bytes of static shared memory (ptxas -v, nvcc 13.0, sm_90).

--check: for each shape (H 4; hd 16, 64, 128 and 384 (wider than the block: each thread sums all keys
for its channels); Hkv 4, 2, 1; k and v apart or one tensor; t 0, 1, 63, 200; batch 1 and 3; --quick
a subset) fresh N(0, 1) q and cache (seed printed), the rows past t and every byte around the inputs
poisoned (0xFF: NaN), the output poisoned; out against a float64 reference on the same rounded
inputs (tolerance 1e-2 in BF16, 1e-5 in FP32), no element unwritten, the inputs and the guards
unchanged, a second run bit-identical. One PASS/FAIL line per (version, shape); exit 1 on any FAIL.
--bench: the benchmark shapes above, standard, kv_shared, MQA, Q-MQA at batch 1, 16, 64: median ms
of 25 (L2 flushed), GB/s of the minimum bytes.
Without a CUDA device: one SKIP line, exit 0.
*/
#define TESTING
#include "../../train_gpt2.cu"
#include "common.h"

static const LabVersion kVersions[] = {
    {1, "the trainer's: attention_decode_kernel, a block per (head, sequence), a warp per key", 0, 0},
};
#if PRECISION_IS_BF16
static const double TOL = 1e-2;
#else
static const double TOL = 1e-5;
#endif

typedef struct {
    int H, Hkv, hd, shared, t, batch;
} DecodeShape;

// the cache's layout for a shape: row elements, v's offset in a row (k at 0), positions held
static int shape_row(const DecodeShape* s) { return (s->shared ? 1 : 2) * s->Hkv * s->hd; }
static int shape_v_offset(const DecodeShape* s) { return s->shared ? 0 : s->Hkv * s->hd; }
static int shape_max_T(const DecodeShape* s) { return s->t + 1 + 5; } // 5 rows past t, poisoned

// float64: out (batch, H * hd) from q (batch, q_stride) and the cache (batch, max_T, row)
static std::vector<float> decode_reference(const DecodeShape* s, const std::vector<float>& q, int q_stride,
                                           const std::vector<float>& cache, float scale) {
    const int row = shape_row(s), max_T = shape_max_T(s), v_off = shape_v_offset(s), group = s->H / s->Hkv;
    std::vector<float> out((size_t)s->batch * s->H * s->hd);
    std::vector<double> w((size_t)s->t + 1);
    for (int b = 0; b < s->batch; b++) {
        const float* seq = &cache[(size_t)b * max_T * row];
        for (int h = 0; h < s->H; h++) {
            const int kvh = h / group;
            const float* qh = &q[(size_t)b * q_stride + (size_t)h * s->hd];
            double m = -INFINITY, l = 0.0;
            for (int j = 0; j <= s->t; j++) {
                const float* k = seq + (size_t)j * row + (size_t)kvh * s->hd;
                double dot = 0.0;
                for (int i = 0; i < s->hd; i++) { dot += (double)qh[i] * k[i]; }
                w[(size_t)j] = dot * scale;
                m = fmax(m, w[(size_t)j]);
            }
            for (int j = 0; j <= s->t; j++) { l += (w[(size_t)j] = exp(w[(size_t)j] - m)); }
            for (int i = 0; i < s->hd; i++) {
                double acc = 0.0;
                for (int j = 0; j <= s->t; j++) { acc += w[(size_t)j] * seq[(size_t)j * row + v_off + (size_t)kvh * s->hd + i]; }
                out[((size_t)b * s->H + h) * s->hd + i] = (float)(acc / l);
            }
        }
    }
    return out;
}

// a version on a cache of max_T positions per sequence
static void decode_run(int version, const DecodeShape* s, int max_T, floatX* out, const floatX* q, int q_stride,
                       const floatX* cache, float scale) {
    (void)version; // one version
    const size_t seq_stride = (size_t)max_T * shape_row(s);
    attention_decode_forward(out, q, q_stride, cache, cache + shape_v_offset(s), shape_row(s), seq_stride, s->batch, s->t,
                             s->H, s->Hkv, s->hd, scale);
}

static void shape_describe(const DecodeShape* s, char* buf, size_t n) {
    snprintf(buf, n, "H=%d Hkv=%d hd=%d %s t=%d batch=%d", s->H, s->Hkv, s->hd, s->shared ? "k=v" : "k,v", s->t, s->batch);
}

static int check_shape(const LabArgs* a, int version, const DecodeShape* s, int index) {
    const unsigned long long seed = lab_trial_seed(a->seed, {index, s->H, s->Hkv, s->hd, s->shared, s->t, s->batch});
    unsigned long long rng = seed;
    const int row = shape_row(s), max_T = shape_max_T(s);
    const int q_stride = s->H * s->hd + 24; // a row of the fused projection is wider than q
    const float scale = 1.0f / sqrtf((float)s->hd);
    const size_t nq = (size_t)s->batch * q_stride, ncache = (size_t)s->batch * max_T * row;
    const size_t nout = (size_t)s->batch * s->H * s->hd;
    LabHostX q = lab_host_x(lab_normal_vec(nq, 0.0, 1.0, &rng));
    LabHostX cache = lab_host_x(lab_normal_vec(ncache, 0.0, 1.0, &rng));
    // the rows past t: NaN (0xFF bytes), which a read would carry into the output
    for (int b = 0; b < s->batch; b++) {
        const size_t first = ((size_t)b * max_T + s->t + 1) * row, count = (size_t)(max_T - s->t - 1) * row;
        memset(&cache.x[first * sizeof(floatX)], LAB_POISON, count * sizeof(floatX));
    }
    const std::vector<float> ref = decode_reference(s, q.f, q_stride, cache.f, scale);
    LabBuf q_d = lab_buf_input(q.x, "q"), cache_d = lab_buf_input(cache.x, "cache");
    LabBuf out_d = lab_buf_alloc(nout * sizeof(floatX), "out");
    LabVerdict v;
    lab_verdict_init(&v);
    std::vector<unsigned char> first;
    for (int run = 0; run < 2; run++) {
        lab_buf_poison(&out_d);
        decode_run(version, s, max_T, (floatX*)out_d.ptr, (const floatX*)q_d.ptr, q_stride, (const floatX*)cache_d.ptr,
                   scale);
        cudaCheck(cudaDeviceSynchronize());
        const std::vector<unsigned char> bytes = lab_buf_download(&out_d);
        if (run == 1) {
            lab_check_same(first, bytes, "out", &v);
            break;
        }
        first = bytes;
        const size_t unwritten = lab_count_unwritten(bytes, sizeof(floatX));
        if (unwritten > 0) { v.fail += "; " + std::to_string(unwritten) + " output elements never written"; }
        const std::vector<float> out = lab_x_to_floats(bytes);
        char prefix[128];
        shape_describe(s, prefix, sizeof(prefix));
        lab_compare_rows(prefix, version, "out", out.data(), ref.data(), nout, (size_t)s->hd, TOL, &v);
    }
    lab_buf_intact(&q_d, q.x, &v.fail);
    lab_buf_intact(&cache_d, cache.x, &v.fail);
    lab_buf_guards_ok(&out_d, &v.fail);
    lab_buf_free(&q_d);
    lab_buf_free(&cache_d);
    lab_buf_free(&out_d);
    char what[128];
    shape_describe(s, what, sizeof(what));
    return lab_verdict_print(a, version, what, seed, 1, &v);
}

static std::vector<DecodeShape> check_shapes(int quick) {
    std::vector<DecodeShape> shapes;
    const int H = 4;
    for (int hd : {16, 64, 128, 384}) {
        for (int Hkv : {4, 2, 1}) {
            for (int shared : {0, 1}) {
                for (int t : {0, 1, 63, 200}) {
                    for (int batch : {1, 3}) {
                        // --quick (the CPU runtime): every layout at t 63, batch 3; t 0, 1 and 200 on one layout each hd
                        if (quick && !(t == 63 && batch == 3) && !(Hkv == 2 && shared == 0 && batch == 3)) { continue; }
                        if (quick && hd == 384 && !(Hkv == 1 && t == 63)) { continue; }
                        shapes.push_back({H, Hkv, hd, shared, t, batch});
                    }
                }
            }
        }
    }
    return shapes;
}

static int check(const LabArgs* a) {
    const std::vector<DecodeShape> shapes = check_shapes(a->quick);
    printf("check: %zu shapes (H 4; hd 16, 64, 128, 384; Hkv 4, 2, 1; k,v apart or one tensor; t 0, 1, 63, 200; "
           "batch 1, 3%s), tolerance %.0e against float64\n", shapes.size(), a->quick ? ": --quick's subset" : "", TOL);
    int failed = 0;
    for (int version : a->versions) {
        for (size_t i = 0; i < shapes.size(); i++) { failed |= check_shape(a, version, &shapes[i], (int)i); }
    }
    return failed;
}

static void bench(const LabArgs* a) {
    struct { const char* name; int Hkv, shared; } layouts[] = {
        {"standard", 12, 0}, {"kv_shared", 12, 1}, {"MQA", 1, 0}, {"Q-MQA", 1, 1},
    };
    LabTimer timer;
    lab_timer_init(&timer);
    for (const auto& lay : layouts) {
        for (int batch : {1, 16, 64}) {
            const DecodeShape s = {12, lay.Hkv, 64, lay.shared, 1023, batch};
            const int row = shape_row(&s), max_T = s.t + 1, q_stride = s.H * s.hd;
            const size_t ncache = (size_t)batch * max_T * row, nq = (size_t)batch * q_stride;
            const double bytes = 2.0 * ncache, flops = 4.0 * batch * s.H * (s.t + 1) * s.hd;
            char what[96];
            snprintf(what, sizeof(what), "%s B=%d t=1023", lay.name, batch);
            lab_bench_predicted(what, flops, bytes);
            floatX* cache = (floatX*)device_malloc(ncache * sizeof(floatX), "bench cache");
            floatX* q = (floatX*)device_malloc(nq * sizeof(floatX), "bench q");
            floatX* out = (floatX*)device_malloc(nq * sizeof(floatX), "bench out");
            // finite values for timing only: 0x3C in every byte is ~0.0115 in bf16 and fp32
            cudaCheck(cudaMemset(cache, 0x3C, ncache * sizeof(floatX)));
            cudaCheck(cudaMemset(q, 0x3C, nq * sizeof(floatX)));
            for (int version : a->versions) {
                const double ms = lab_time_median_ms(&timer, LAB_BENCH_REPS, [&]() {
                    decode_run(version, &s, max_T, out, q, q_stride, cache, 0.125f);
                });
                lab_bench_line(version, what, ms, bytes);
            }
            cudaCheck(cudaFree(cache));
            cudaCheck(cudaFree(q));
            cudaCheck(cudaFree(out));
        }
    }
    lab_timer_free(&timer);
}

int main(int argc, char** argv) {
    const LabSpec spec = {"lab_attention_decode", "the KV-cached decode attention of train_gpt2.cu (--generate)", kVersions,
                          LAB_COUNT(kVersions), 0, NULL, NULL, NULL};
    LabArgs a;
    if (!lab_parse_args(&a, argc, argv, &spec)) { return 0; }
    if (!lab_device_or_skip(&a)) { return 0; }
    int failed = 0;
    if (a.check) { failed = check(&a); }
    if (a.bench) { bench(&a); }
    return lab_verdict(a.name, a.check, failed);
}
