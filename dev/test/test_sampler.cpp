// test_sampler: dev/trainer/train_common.h's sample_token (--temperature, --top_k, --top_p), the rule both
// trainers sample with, against dev/test/sampler_reference.py's numpy version of it, on the cases
// that script writes (fixed logits of 1 to 50257 tokens, ties among them; temperature 0/0.5/1/2 x
// top_k 0/1/5/40 x top_p 1/0.9/0.5; fixed coins). Every token must be the reference's. Then the
// sampler's cost per token at V = 50257, per setting, on the broad (random-init-like) and peaked
// (trained-like) logits of the cases. Then dev/test/sampling_check.h's rule for explaining a sampled
// token that differs between two logit vectors d apart (the KV-cache tests'), on hand-built cut-offs.
//
//   /usr/bin/python3 dev/test/sampler_reference.py build/sampler_cases.bin
//   g++ -O2 -std=c++17 -I. dev/test/test_sampler.cpp -o build/test_sampler && ./build/test_sampler build/sampler_cases.bin
//
// One "PASS cpu sampler ..." / "FAIL ..." line, timings as indented lines; exit 1 on a FAIL.
#define PRECISION_NAME "fp32"
#define PRECISION_IS_BF16 0
#define TRAIN_COMMON_CUDA 0
#include "../trainer/train_common.h"
#include "sampling_check.h"

#include <map>

static int trainer_shape_check(const TrainArgs* a, char* msg, size_t msg_size) { return 1; }

struct SamplerCase {
    int set;
    SamplingSettings settings;
    float coin;
    int token;
};

static int read_i32(FILE* f, int* out) { return fread(out, sizeof(int), 1, f) == 1; }

// cases.bin (sampler_reference.py's docstring) -> logit sets and cases; 0 with a message
static int load_cases(const char* path, std::vector<std::vector<float>>* sets, std::vector<SamplerCase>* cases, char* msg,
                      size_t msg_size) {
    FILE* f = fopen(path, "rb");
    if (f == NULL) {
        snprintf(msg, msg_size, "%s: cannot open (%s) (HINT: /usr/bin/python3 dev/test/sampler_reference.py %s)", path,
                 strerror(errno), path);
        return 0;
    }
    int magic = 0, n_sets = 0, n_cases = 0, ok = read_i32(f, &magic) && magic == 20261128 && read_i32(f, &n_sets) &&
                                                 n_sets > 0 && n_sets < 1000;
    for (int s = 0; ok && s < n_sets; s++) {
        int V = 0;
        ok = read_i32(f, &V) && V > 0 && V <= (1 << 20);
        if (ok) {
            sets->emplace_back((size_t)V);
            ok = fread(sets->back().data(), sizeof(float), (size_t)V, f) == (size_t)V;
        }
    }
    ok = ok && read_i32(f, &n_cases) && n_cases > 0 && n_cases < (1 << 24);
    for (int c = 0; ok && c < n_cases; c++) {
        SamplerCase k;
        ok = read_i32(f, &k.set) && fread(&k.settings.temperature, 4, 1, f) == 1 && read_i32(f, &k.settings.top_k) &&
             fread(&k.settings.top_p, 4, 1, f) == 1 && fread(&k.coin, 4, 1, f) == 1 && read_i32(f, &k.token) &&
             k.set >= 0 && k.set < n_sets;
        cases->push_back(k);
    }
    ok = ok && fgetc(f) == EOF;
    fclose(f);
    if (!ok) { snprintf(msg, msg_size, "%s: not a sampler case file, or truncated (HINT: write it again)", path); }
    return ok;
}

static const char* setting_kind(const SamplingSettings* s) {
    if (s->temperature == 0.0f) { return "greedy"; }
    if (s->top_k > 0 && s->top_p < 1.0f) { return "top_k+top_p"; }
    if (s->top_k > 0) { return "top_k"; }
    if (s->top_p < 1.0f) { return "top_p"; }
    return "temperature";
}

// sampling_check.h's flip explanation (the KV-cache tests' rule) on hand-built logits: two near-tied
// tokens at a top-k or top-p cut-off trade places between the "full" and the "cached" logits (the
// kept set changes), and every coin of a fine grid whose token differs must be explained; a flip
// far from every boundary, with a tiny difference, must not be. Returns 1 when all hold.
static int check_flip_explanations() {
    const float base[16] = {0.30f, 0.10f, 0.52f, 0.21f, 0.45f, 0.05f, 0.38f, 0.15f,
                            0.60f, 0.27f, 0.33f, 0.01f, 0.49f, 0.12f, 0.41f, 0.24f};
    const int V = 16;
    const double d = 1e-3;
    const SamplingSettings grid[2] = {{1.0f, 5, 1.0f}, {0.7f, 0, 0.5f}}; // a top-k cut, a top-p cut
    int ok = 1;
    Sampler sampler;
    for (const SamplingSettings& settings : grid) {
        std::vector<float> full(base, base + V);
        // the nearest pair at the cut-off: made a near-tie in "full", swapped in "cached"
        std::vector<int> order((size_t)V);
        for (int v = 0; v < V; v++) { order[(size_t)v] = v; }
        std::sort(order.begin(), order.end(), LogitRank{full.data()});
        const SamplingCuts cuts = sampling_cuts(settings, full.data(), order, V);
        const int cut = settings.top_p < 1.0f ? cuts.nucleus : cuts.kept;
        const int kept = order[(size_t)cut - 1], excluded = order[(size_t)cut];
        full[(size_t)excluded] = full[(size_t)kept] - (float)d;
        std::vector<float> cached = full;
        std::swap(cached[(size_t)kept], cached[(size_t)excluded]);
        int flips = 0, unexplained = 0;
        sampler.settings = settings;
        for (int i = 0; i < 10000; i++) {
            const float coin = (float)i / 10000.0f;
            const int a = sample_token(&sampler, cached.data(), V, coin), b = sample_token(&sampler, full.data(), V, coin);
            if (a == b) { continue; }
            flips++;
            unexplained += !sampling_flip_explained(&sampler, full.data(), V, a, b, coin, d);
        }
        // far from every boundary: the middle of the pick's bin, another kept token, a tiny difference
        const int pick = sample_token(&sampler, full.data(), V, 0.5f);
        int other = -1;
        for (float c : {0.01f, 0.99f, 0.25f, 0.75f}) { // another kept token, not one of the near-tie
            const int v = sample_token(&sampler, full.data(), V, c);
            if (other < 0 && v != pick && v != kept && v != excluded) { other = v; }
        }
        const int far_explained =
            other >= 0 && sampling_flip_explained(&sampler, full.data(), V, other, pick, 0.5f, 1e-6);
        printf("  sampling_check T=%g top_k=%d top_p=%g: tokens %d/%d trade places at the cut-off: %d coins of 10000 "
               "flip, %d unexplained; a flip far from the boundaries %s\n", (double)settings.temperature, settings.top_k, (double)settings.top_p,
               kept, excluded, flips, unexplained, other < 0 ? "not built" : far_explained ? "explained (wrong)" : "not explained");
        ok = ok && flips > 0 && unexplained == 0 && other >= 0 && !far_explained;
    }
    printf("%s cpu sampling_check (a near-tie at a top-k or top-p cut-off swapped: every flip explained; a flip far "
           "from the boundaries not)\n", ok ? "PASS" : "FAIL");
    return ok;
}

int main(int argc, char** argv) {
    char msg[1024];
    if (argc != 2) {
        fprintf(stderr, "usage: %s <cases.bin from dev/test/sampler_reference.py>\n", argv[0]);
        return 1;
    }
    std::vector<std::vector<float>> sets;
    std::vector<SamplerCase> cases;
    if (!load_cases(argv[1], &sets, &cases, msg, sizeof(msg))) {
        printf("FAIL cpu sampler: %s\n", msg);
        return 1;
    }
    Sampler sampler;
    std::map<int, int> by_vocab_total, by_vocab_same;
    std::map<std::string, int> by_kind_total, by_kind_same;
    int same = 0, shown = 0;
    for (const SamplerCase& k : cases) {
        const std::vector<float>& logits = sets[(size_t)k.set];
        const int V = (int)logits.size();
        sampler.settings = k.settings;
        const int token = sample_token(&sampler, logits.data(), V, k.coin);
        const int ok = token == k.token;
        same += ok;
        by_vocab_total[V]++;
        by_vocab_same[V] += ok;
        by_kind_total[setting_kind(&k.settings)]++;
        by_kind_same[setting_kind(&k.settings)] += ok;
        if (!ok && shown++ < 20) {
            printf("  mismatch: set %d (V=%d) temperature %g top_k %d top_p %g coin %.9g: token %d, the reference %d\n", k.set,
                   V, (double)k.settings.temperature, k.settings.top_k, (double)k.settings.top_p, (double)k.coin, token, k.token);
        }
    }
    std::string vocab_counts, kind_counts;
    for (const auto& e : by_vocab_total) {
        vocab_counts += (vocab_counts.empty() ? "" : ", ") + std::string("V=") + std::to_string(e.first) + " " +
                        std::to_string(by_vocab_same[e.first]) + "/" + std::to_string(e.second);
    }
    for (const auto& e : by_kind_total) {
        kind_counts += (kind_counts.empty() ? "" : ", ") + e.first + " " + std::to_string(by_kind_same[e.first]) + "/" +
                       std::to_string(e.second);
    }
    printf("  sampler cases by vocabulary: %s\n  sampler cases by setting: %s\n", vocab_counts.c_str(), kind_counts.c_str());

    // cost per token at V = 50257: the broad and the peaked logits (the last two sets), each setting
    // timed over repeated draws with fresh coins for about 50 ms
    std::string costs;
    const SamplingSettings timed[] = {{0.0f, 0, 1.0f}, {1.0f, 0, 1.0f}, {0.8f, 40, 1.0f}, {0.8f, 0, 0.9f}, {0.8f, 40, 0.9f}};
    const char* const timed_names[] = {"greedy", "T=1", "T=0.8 top_k 40", "T=0.8 top_p 0.9", "T=0.8 top_k 40 top_p 0.9"};
    for (size_t s = 0; s < sets.size(); s++) {
        if (sets[s].size() != 50257) { continue; }
        const char* shape = s + 1 == sets.size() ? "peaked" : "broad";
        printf("  sampler cost per token at V=50257, %s logits:", shape);
        for (size_t t = 0; t < sizeof(timed) / sizeof(timed[0]); t++) {
            sampler.settings = timed[t];
            unsigned long long rng = sampling_rng_init(7);
            int draws = 0, sink = 0;
            const double t0 = now_seconds();
            double elapsed = 0.0;
            while (elapsed < 0.05 && draws < 2000) {
                sink += sample_token(&sampler, sets[s].data(), 50257, random_f32(&rng));
                draws++;
                elapsed = now_seconds() - t0;
            }
            const double us = 1e6 * elapsed / draws;
            printf(" %s %.0f us%s", timed_names[t], us, sink < 0 ? "!" : "");
            char part[96];
            snprintf(part, sizeof(part), "%s%s %s %.0f us", costs.empty() ? "" : ", ", shape, timed_names[t], us);
            costs += part;
            fflush(stdout);
        }
        printf("\n");
    }
    const int n = (int)cases.size();
    if (same == n) {
        printf("PASS cpu sampler (%d of %d cases: the token of dev/test/sampler_reference.py; %zu logit sets, V=1..50257, "
               "ties broken by id)\n", same, n, sets.size());
    } else {
        printf("FAIL cpu sampler (%d of %d cases differ from dev/test/sampler_reference.py's token, first ones above)\n",
               n - same, n);
    }
    const int flips_ok = check_flip_explanations();
    return same == n && flips_ok ? 0 : 1;
}
