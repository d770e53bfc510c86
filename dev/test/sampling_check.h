// sampling_check.h: what the KV-cache tests of both trainers (dev/cpu/test_kv_cache_cpu.cpp,
// test_gpt2.cu run_kv_cache_check) need to check that tokens sampled from the cached logits are the
// ones sampled from the full forward pass, for each setting of a grid, with the same coins.
// Include after dev/trainer/train_common.h (sample_token, Sampler).
//
// The two passes' logits differ by rounding (1e-7 in fp32, 1e-2 in bf16), so a coin that lands
// within that distance of a boundary of the distribution (or a near-tie at the top-k/top-p
// cut-off, or greedy's top two) may pick another token. The tests teacher-force: the full pass
// reads the cached pass's tokens, so one such flip cannot turn every later step into a comparison
// of different sequences. A flip is explained only when it lies within the difference d measured at
// that step (the largest |cached - full| logit): with the cached token's logit raised by 2 d, or the
// full pass's token's lowered by 2 d, or both (which moves either across a near-tie at the top or
// at a top-k/top-p cut-off), the coins within eps = e^(2 d / T) - 1 of the drawn one (the most a
// cumulative probability moves when every logit moves by d) reach the cached token. The kept set
// itself can change too: two tokens within 2 d of each other at the top-k or top-p cut-off can
// trade places (seen on an H100, 2026-11-26: kv_shared BF16, T=0.7, top_k=40, top_p=0.5, d 2e-3),
// so each of the above is also tried with such a kept token lowered and an excluded one raised by
// d each (then ranked just above it), for each pair at a cut-off that are that close. Any other
// difference is a mismatch and fails the test; fp32's eps is ~1e-7.
#ifndef SAMPLING_CHECK_H
#define SAMPLING_CHECK_H

struct SamplingGridEntry {
    SamplingSettings settings;
    const char* name;
};
static const SamplingGridEntry kSamplingGrid[] = {
    {{0.0f, 0, 1.0f}, "greedy"},
    {{1.0f, 0, 1.0f}, "T=1"},
    {{0.8f, 5, 1.0f}, "T=0.8,top_k=5"},
    {{1.5f, 0, 0.9f}, "T=1.5,top_p=0.9"},
    {{0.7f, 40, 0.5f}, "T=0.7,top_k=40,top_p=0.5"},
};
static const int kSamplingGridSize = (int)(sizeof(kSamplingGrid) / sizeof(kSamplingGrid[0]));

// the coins of one setting's run: random_f32 from --seed's first state, one per token
static inline std::vector<float> sampling_check_coins(unsigned long long seed, int n) {
    unsigned long long rng = sampling_rng_init(seed);
    std::vector<float> coins((size_t)n);
    for (int i = 0; i < n; i++) { coins[(size_t)i] = random_f32(&rng); }
    return coins;
}

// The batch tests (a batch decoded together against each sequence alone): sequence s samples with
// the grid's setting s and the coins of seed kBatchCoinSeed + s. Step g's logits of sequences first.. (count
// rows of V) are appended to logits[s], the token drawn from them to seqs[s].
static const unsigned long long kBatchCoinSeed = 4242;
static inline void sampling_check_batch_step(const float* step, int V, int first, int count, int g, int gen,
                                             std::vector<std::vector<int>>* seqs,
                                             std::vector<std::vector<float>>* logits) {
    for (int b = 0; b < count; b++) {
        const int s = first + b;
        const float* row = step + (size_t)b * V;
        Sampler sampler;
        sampler.settings = kSamplingGrid[s % kSamplingGridSize].settings;
        const std::vector<float> coins = sampling_check_coins(kBatchCoinSeed + (unsigned long long)s, gen);
        (*logits)[(size_t)s].insert((*logits)[(size_t)s].end(), row, row + V);
        (*seqs)[(size_t)s].push_back(sample_token(&sampler, row, V, coins[(size_t)g]));
    }
}

// the largest |a - b| over V logits
static inline double sampling_check_max_diff(const float* a, const float* b, int V) {
    double d = 0.0;
    for (int i = 0; i < V; i++) { d = fmax(d, fabs((double)a[i] - (double)b[i])); }
    return d;
}

// Where the full pass's top-k and top-p cut the logits ranked best first (`order`, as sample_token
// ranks them): top-k keeps order[..kept), top-p then order[..nucleus); each is the previous one (V
// for top-k) where it cuts nothing
struct SamplingCuts {
    int kept;
    int nucleus;
};

static inline SamplingCuts sampling_cuts(const SamplingSettings& settings, const float* logits,
                                         const std::vector<int>& order, int V) {
    SamplingCuts cuts;
    cuts.kept = settings.top_k > 0 && settings.top_k < V ? settings.top_k : V;
    cuts.nucleus = cuts.kept;
    if (settings.top_p < 1.0f) {
        const double temperature = (double)settings.temperature, z_max = (double)logits[order[0]] / temperature;
        double total = 0.0, cum = 0.0;
        for (int i = 0; i < cuts.kept; i++) { total += exp((double)logits[order[(size_t)i]] / temperature - z_max); }
        cuts.nucleus = 0;
        while (cuts.nucleus < cuts.kept && cum < (double)settings.top_p * total) {
            cum += exp((double)logits[order[(size_t)cuts.nucleus++]] / temperature - z_max);
        }
    }
    return cuts;
}

// The pairs (kept, excluded) at the full pass's top-k and top-p cut-offs whose logits are within 2 d
// of each other: the tokens that rounding of d can swap in or out of the kept set (flat logits, a
// random model's, hold several such tokens at a cut: the 8 nearest on each side are paired)
static inline std::vector<std::pair<int, int>> sampling_close_cutoffs(const SamplingSettings& settings,
                                                                      const float* logits, int V, double d) {
    std::vector<std::pair<int, int>> pairs;
    if (settings.temperature == 0.0f || (settings.top_k <= 0 && settings.top_p >= 1.0f)) { return pairs; }
    std::vector<int> order((size_t)V);
    for (int v = 0; v < V; v++) { order[(size_t)v] = v; }
    std::sort(order.begin(), order.end(), LogitRank{logits}); // best first, as sample_token ranks
    const SamplingCuts cuts = sampling_cuts(settings, logits, order, V);
    auto pair_up = [&](int cut) { // order[..cut) kept, order[cut..) excluded
        if (cut <= 0 || cut >= V) { return; }
        for (int i = cut - 1; i >= 0 && i >= cut - 8; i--) {
            for (int j = cut; j < V && j < cut + 8; j++) {
                if ((double)logits[order[(size_t)i]] - (double)logits[order[(size_t)j]] <= 2.0 * d) {
                    pairs.push_back({order[(size_t)i], order[(size_t)j]});
                }
            }
        }
    };
    if (cuts.kept < V) { pair_up(cuts.kept); }
    if (cuts.nucleus < cuts.kept) { pair_up(cuts.nucleus); }
    return pairs;
}

// Whether the full pass's logits pick `cached_token` instead of `full_token` within the measured
// difference d (the header comment): with the cached token's logit raised by 2 d, the full pass's
// lowered by 2 d, or both, the cached token lies between the tokens of the coins coin - eps and
// coin + eps (the pick moves to higher ids as the coin grows), with top-p's p, or p -/+ eps (the
// nucleus' running sum moves by eps too)
static inline int sampling_flip_explained(Sampler* sampler, const float* full_logits, int V, int cached_token,
                                          int full_token, float coin, double d) {
    const SamplingSettings settings = sampler->settings;
    const double temperature = settings.temperature > 0.0f ? (double)settings.temperature : 1.0;
    const double eps = expm1(2.0 * d / temperature);
    const float lo = (float)fmax(0.0, (double)coin - eps), hi = (float)fmin(1.0 - 1.0 / 16777216.0, (double)coin + eps);
    const double top_ps[3] = {(double)settings.top_p, (double)settings.top_p - eps, (double)settings.top_p + eps};
    const double raise_cached[3] = {2.0 * d, 0.0, 2.0 * d}, lower_full[3] = {0.0, 2.0 * d, 2.0 * d};
    std::vector<std::pair<int, int>> swaps = sampling_close_cutoffs(settings, full_logits, V, d);
    swaps.insert(swaps.begin(), {-1, -1}); // first: the kept set as it is
    int explained = 0;
    for (size_t c = 0; c < swaps.size() && !explained; c++) {
        for (int n = 0; n < 3 && !explained; n++) {
            std::vector<float> nudged(full_logits, full_logits + V);
            if (swaps[c].first >= 0) { // each moved by d: now within rounding of trading places
                nudged[(size_t)swaps[c].first] = (float)((double)nudged[(size_t)swaps[c].first] - d);
                nudged[(size_t)swaps[c].second] = (float)((double)nudged[(size_t)swaps[c].second] + d);
                if (LogitRank{nudged.data()}(swaps[c].first, swaps[c].second)) { // a tie the id breaks: one ulp more
                    nudged[(size_t)swaps[c].second] = nextafterf(nudged[(size_t)swaps[c].first], INFINITY);
                }
            }
            nudged[(size_t)cached_token] = (float)((double)nudged[(size_t)cached_token] + raise_cached[n]);
            nudged[(size_t)full_token] = (float)((double)nudged[(size_t)full_token] - lower_full[n]);
            for (int i = 0; i < (settings.top_p < 1.0f ? 3 : 1) && !explained; i++) {
                sampler->settings.top_p = (float)fmin(1.0, fmax(1e-6, top_ps[i]));
                explained = sample_token(sampler, nudged.data(), V, lo) <= cached_token &&
                            cached_token <= sample_token(sampler, nudged.data(), V, hi);
            }
            sampler->settings = settings;
        }
    }
    return explained;
}

// What a test prints beside a flip it cannot explain, for the next look: each token's rank (by logit,
// 0 the best) in both passes, and the close pairs at the cut-offs
static inline std::string sampling_flip_detail(const SamplingSettings& settings, const float* full_logits,
                                               const float* cached_logits, int V, int cached_token, int full_token,
                                               double d) {
    auto rank_of = [&](const float* logits, int token) {
        int r = 0;
        for (int v = 0; v < V; v++) { r += LogitRank{logits}(v, token); }
        return r;
    };
    char buf[256];
    snprintf(buf, sizeof(buf), "ranks (full, cached): cached token %d (%d, %d), full token %d (%d, %d); %zu close "
             "pairs at the cut-offs", cached_token, rank_of(full_logits, cached_token), rank_of(cached_logits, cached_token), full_token,
             rank_of(full_logits, full_token), rank_of(cached_logits, full_token),
             sampling_close_cutoffs(settings, full_logits, V, d).size());
    return std::string(buf);
}

#endif // SAMPLING_CHECK_H
