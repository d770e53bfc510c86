// sampling_check.h: what the KV-cache tests of both trainers (dev/cpu/test_kv_cache_cpu.cpp,
// test_gpt2.cu run_kv_cache_check) need to check that tokens sampled from the cached logits are the
// ones sampled from the full forward pass, for each setting of a grid, with the same coins.
// Include after dev/train_common.h (sample_token, Sampler).
//
// The two passes' logits differ by rounding (1e-7 in fp32, 1e-2 in bf16), so a coin that lands
// within that distance of a boundary of the distribution (or a near-tie at the top-k/top-p
// cut-off, or greedy's top two) may pick another token. The tests teacher-force: the full pass
// reads the cached pass's tokens, so one such flip cannot turn every later step into a comparison
// of different sequences. A flip is explained only when it lies within the difference d measured at
// that step (the largest |cached - full| logit): with the cached token's logit raised by 2 d, or the
// full pass's token's lowered by 2 d, or both (which moves either across a near-tie at the top or
// at a top-k/top-p cut-off), the coins within eps = e^(2 d / T) - 1 of the drawn one (the most a
// cumulative probability moves when every logit moves by d) reach the cached token. Any other
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
static std::vector<float> sampling_check_coins(unsigned long long seed, int n) {
    unsigned long long rng = sampling_rng_init(seed);
    std::vector<float> coins((size_t)n);
    for (int i = 0; i < n; i++) { coins[(size_t)i] = random_f32(&rng); }
    return coins;
}

// the largest |a - b| over V logits
static double sampling_check_max_diff(const float* a, const float* b, int V) {
    double d = 0.0;
    for (int i = 0; i < V; i++) { d = fmax(d, fabs((double)a[i] - (double)b[i])); }
    return d;
}

// Whether the full pass's logits pick `cached_token` instead of `full_token` within the measured
// difference d (the header comment): with the cached token's logit raised by 2 d, the full pass's
// lowered by 2 d, or both, the cached token lies between the tokens of the coins coin - eps and
// coin + eps (the pick moves to higher ids as the coin grows), with top-p's p, or p -/+ eps (the
// nucleus' running sum moves by eps too)
static int sampling_flip_explained(Sampler* sampler, const float* full_logits, int V, int cached_token, int full_token,
                                   float coin, double d) {
    const SamplingSettings settings = sampler->settings;
    const double temperature = settings.temperature > 0.0f ? (double)settings.temperature : 1.0;
    const double eps = expm1(2.0 * d / temperature);
    const float lo = (float)fmax(0.0, (double)coin - eps), hi = (float)fmin(1.0 - 1.0 / 16777216.0, (double)coin + eps);
    const double top_ps[3] = {(double)settings.top_p, (double)settings.top_p - eps, (double)settings.top_p + eps};
    const double raise_cached[3] = {2.0 * d, 0.0, 2.0 * d}, lower_full[3] = {0.0, 2.0 * d, 2.0 * d};
    int explained = 0;
    for (int n = 0; n < 3 && !explained; n++) {
        std::vector<float> nudged(full_logits, full_logits + V);
        nudged[(size_t)cached_token] = (float)((double)nudged[(size_t)cached_token] + raise_cached[n]);
        nudged[(size_t)full_token] = (float)((double)nudged[(size_t)full_token] - lower_full[n]);
        for (int i = 0; i < (settings.top_p < 1.0f ? 3 : 1) && !explained; i++) {
            sampler->settings.top_p = (float)fmin(1.0, fmax(1e-6, top_ps[i]));
            explained = sample_token(sampler, nudged.data(), V, lo) <= cached_token &&
                        cached_token <= sample_token(sampler, nudged.data(), V, hi);
        }
        sampler->settings = settings;
    }
    return explained;
}

#endif // SAMPLING_CHECK_H
