/*
test_attention_tiled_cpu.cpp: the tiled attention twin (dev/cpu/attention_tiled_cpu.h) against the
plain attention of the CPU trainer, on random inputs, without a model.

  make build/test_attention_tiled_cpu && ./build/test_attention_tiled_cpu [--seed n]

Shapes the fixtures do not reach: T = 1, 63, 64, 65, 130 (one tile, a partial tile, several),
Hkv = H, H/2 and 1, head sizes 12 and 64; q, k, v read in place from a fused projection with the
role sharing of the schemes (separate, k = v, q = k, q = k = v, q or k taken from x); the GPU's
64x64 tiles and others (rectangular, kBlockM != kBlockN, 1x1). For each case it checks out, lse
and the increments of every gradient buffer (prefilled with random values, so "=" instead of "+="
fails; the fused buffers have unowned columns, so a write outside a role's slice fails too; out
and lse are prefilled with NaN, so an unwritten value fails), and, with OpenMP, that 1 and 3
threads give bit-identical results.

Prints an indented line per failed case and one line per tile size:
"PASS cpu_tiled unit tiles <M>x<N> (<n> cases, worst rel_err=<x> at <case>)" or "FAIL ...".
*/
#define TESTING
#include "train_gpt2_cpu.cpp"

#include <string>
#include <vector>

static const double kThreshold = 1e-5; // as dev/cpu/test_gpt2_cpu.cpp against the float64 reference

static unsigned long long rng_state = 1;
static float rand_uniform(float lo, float hi) { // xorshift64*
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    const unsigned long long r = rng_state * 2685821657736338717ULL;
    return lo + (hi - lo) * (float)((r >> 40) / 16777216.0);
}
static void fill_uniform(std::vector<float>& x, float lo, float hi) {
    for (size_t i = 0; i < x.size(); i++) { x[i] = rand_uniform(lo, hi); }
}

// ||a - b|| / ||b|| in double, over the increments a - a0 and b - b0 when a0 is given; NaN is worst
static double rel_err(const std::vector<float>& a, const std::vector<float>& b, const std::vector<float>* a0) {
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < a.size(); i++) {
        const double x = (double)a[i] - (a0 != NULL ? (*a0)[i] : 0.0);
        const double y = (double)b[i] - (a0 != NULL ? (*a0)[i] : 0.0);
        num += (x - y) * (x - y);
        den += y * y;
    }
    if (!isfinite(num) || !isfinite(den)) { return INFINITY; }
    return den > 0.0 ? sqrt(num / den) : sqrt(num);
}

// where q, k, v live: a column offset into the fused buffer (width W), or -1 for x (B*T, C)
typedef struct {
    const char* name;
    int needs_hkv_eq_h; // q = k or an identity k: the kv heads are the query heads
    int q, k, v;        // offsets in units: 0 = 0, 1 = C, 2 = C + KV, -1 = x
} Layout;

static const Layout kLayouts[] = {
    {"separate", 0, 0, 1, 2},
    {"k=v", 0, 0, 1, 1},
    {"q=k", 1, 0, 0, 1},
    {"q=k=v", 1, 0, 0, 0},
    {"q=x", 0, -1, 0, 3},  // 3 = KV: k, v at 0 and KV (q_identity)
    {"k=x", 1, 0, -1, 1},  // k_identity
};

typedef struct {
    int compared;
    double worst;
    std::string worst_at;
    int failed;
} Tally;

static void check(Tally* t, const std::string& what, double err) {
    t->compared++;
    if (!(err <= t->worst)) { t->worst = err; t->worst_at = what; }
    if (!(err <= kThreshold)) {
        t->failed++;
        if (t->failed <= 10) { printf("  %s rel_err=%.1e > %.0e\n", what.c_str(), err, kThreshold); }
    }
}

typedef struct {
    std::vector<float> out, lse, proj_grad, x_grad;
} Results;

// a Layout as the trainers' QKVLayout, so that the views come from qkv_role_view as theirs do
static QKVRole unit_role(int unit, int channels, int C, int KV) {
    if (unit < 0) { return qkv_role(QKV_SRC_INPUT, 0, channels); }
    const int offsets[4] = {0, C, C + KV, KV};
    return qkv_role(QKV_SRC_PROJECTION, offsets[unit], channels);
}

static QKVLayout qkv_layout_of(const Layout& lay, int W, int C, int KV) {
    QKVLayout L;
    L.width = W;
    L.q = unit_role(lay.q, C, C, KV);
    L.k = unit_role(lay.k, KV, C, KV);
    L.v = unit_role(lay.v, KV, C, KV);
    return L;
}

// q, k, v of a layout: column ranges of `fused` (B*T, W), or x (B*T, C); given the gradient buffers,
// where dq, dk, dv go
typedef struct {
    QKVView<float> q, k, v;
} RoleViews;

static RoleViews role_views(const QKVLayout* L, int hd, float* fused, float* x) {
    const QKVSources<float> src = qkv_sources<float>(fused, x, NULL);
    RoleViews r;
    r.q = qkv_role_view(L, 0, hd, src);
    r.k = qkv_role_view(L, 1, hd, src);
    r.v = qkv_role_view(L, 2, hd, src);
    return r;
}

// one case: the plain attention (double accumulators, the (B, H, T, T) matrix) against the twin
static void run_case(Tally* tally, int B, int T, int H, int Hkv, int hd, float scale, const Layout& lay,
                     int kBlockM, int kBlockN, int check_threads) {
    const int C = H * hd, KV = Hkv * hd;
    const int W = C + 2 * KV + 5; // 5 columns no role owns
    char name[160];
    snprintf(name, sizeof(name), "B=%d T=%d H=%d Hkv=%d hd=%d scale=%g %s tiles %dx%d", B, T, H, Hkv, hd, scale,
             lay.name, kBlockM, kBlockN);
    const size_t BT = (size_t)B * T;
    const QKVLayout L = qkv_layout_of(lay, W, C, KV);
    std::vector<float> fused(BT * W), x(BT * C), dout(BT * C);
    std::vector<float> proj_grad0(BT * W), x_grad0(BT * C);
    fill_uniform(fused, -1.5f, 1.5f);
    fill_uniform(x, -1.5f, 1.5f);
    fill_uniform(dout, -1.0f, 1.0f);
    fill_uniform(proj_grad0, -0.1f, 0.1f);
    fill_uniform(x_grad0, -0.1f, 0.1f);

    // plain
    Results ref;
    ref.out.assign(BT * C, 0.0f);
    ref.lse.assign((size_t)B * H * T, 0.0f);
    ref.proj_grad = proj_grad0;
    ref.x_grad = x_grad0;
    std::vector<float> att((size_t)B * H * T * T);
    {
        const RoleViews in = role_views(&L, hd, fused.data(), x.data());
        const RoleViews d = role_views(&L, hd, ref.proj_grad.data(), ref.x_grad.data());
        attention_forward(ref.out.data(), att.data(), in.q, in.k, in.v, B, T, C, H, Hkv, scale, ref.lse.data());
        attention_backward(d.q, d.k, d.v, dout.data(), in.q, in.k, in.v, att.data(), B, T, C, H, Hkv, scale);
    }

    // tiled, with 1 thread and (if OpenMP) 3
    Results got[2];
    const int runs = check_threads ? 2 : 1;
    for (int run = 0; run < runs; run++) {
#ifdef _OPENMP
        const int saved = omp_get_max_threads();
        omp_set_num_threads(run == 0 ? 1 : 3);
#endif
        Results& r = got[run];
        r.out.assign(BT * C, NAN);
        r.lse.assign((size_t)B * H * T, NAN);
        r.proj_grad = proj_grad0;
        r.x_grad = x_grad0;
        std::vector<float> delta((size_t)B * H * T, NAN);
        const RoleViews in = role_views(&L, hd, fused.data(), x.data());
        const RoleViews d = role_views(&L, hd, r.proj_grad.data(), r.x_grad.data());
        attention_tiled_forward_blocks(r.out.data(), r.lse.data(), in.q, in.k, in.v, B, T, H, Hkv, hd, scale, kBlockM,
                                       kBlockN);
        attention_tiled_backward_blocks(d.q, d.k, d.v, delta.data(), dout.data(), r.out.data(), r.lse.data(), in.q,
                                        in.k, in.v, B, T, H, Hkv, hd, scale, kBlockM, kBlockN);
#ifdef _OPENMP
        omp_set_num_threads(saved);
#endif
    }
    const std::string n = name;
    check(tally, n + " out", rel_err(got[0].out, ref.out, NULL));
    check(tally, n + " lse", rel_err(got[0].lse, ref.lse, NULL));
    check(tally, n + " fused grads", rel_err(got[0].proj_grad, ref.proj_grad, &proj_grad0));
    check(tally, n + " x grads", rel_err(got[0].x_grad, ref.x_grad, &x_grad0));
    if (runs == 2) {
        const int same = got[0].out == got[1].out && got[0].lse == got[1].lse &&
                         got[0].proj_grad == got[1].proj_grad && got[0].x_grad == got[1].x_grad;
        // bit-identical or not: reported as an error of 0 or infinity
        check(tally, n + " 1 vs 3 threads", same ? 0.0 : INFINITY);
    }
}

int main(int argc, char** argv) {
    unsigned long long seed = 1;
    if (argc == 3 && strcmp(argv[1], "--seed") == 0) {
        seed = strtoull(argv[2], NULL, 10);
    } else if (argc != 1) {
        fprintf(stderr, "usage: %s [--seed n]\n", argv[0]);
        return 1;
    }
    rng_state = seed * 0x9E3779B97F4A7C15ULL + 1;
    printf("  seed %llu\n", seed);
    const int tiles[][2] = {{ATTN_TILED_BLOCK_M, ATTN_TILED_BLOCK_N}, {16, 32}, {32, 16}, {48, 80}, {1, 1}};
    const int Ts[] = {1, 63, 64, 65, 130};
    const int Hkvs[] = {4, 2, 1}; // H = 4
    int all_ok = 1;
    for (const auto& tile : tiles) {
        Tally tally = {0, 0.0, "-", 0};
        int cases = 0;
        for (int T : Ts) {
            // 1x1 tiles: the smallest T only (one item per row and key, slow and says nothing more at 130)
            if (tile[0] == 1 && T > 65) { continue; }
            for (int Hkv : Hkvs) {
                for (const Layout& lay : kLayouts) {
                    if (lay.needs_hkv_eq_h && Hkv != 4) { continue; }
                    // head size 12 everywhere; 64 (the GPU's) for the one-kv-head and all-heads cases
                    for (int hd : {12, 64}) {
                        if (hd == 64 && Hkv == 2) { continue; }
                        // a large scale makes the softmax peaky and the running max move between tiles
                        const float scale = (cases % 3 == 2) ? 1.0f : 1.0f / sqrtf((float)hd);
                        run_case(&tally, 2, T, 4, Hkv, hd, scale, lay, tile[0], tile[1], cases % 4 == 0);
                        cases++;
                    }
                }
            }
        }
        const int ok = tally.failed == 0 && tally.compared > 0;
        all_ok &= ok;
        printf("%s cpu_tiled unit tiles %dx%d (%d cases, %d checks%s, worst rel_err=%.1e at %s)\n",
               ok ? "PASS" : "FAIL", tile[0], tile[1], cases, tally.compared,
               tally.failed > 0 ? (", " + std::to_string(tally.failed) + " failed").c_str() : "",
               tally.worst, tally.worst_at.c_str());
    }
    return all_ok ? 0 : 1;
}
