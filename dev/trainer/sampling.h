/*
dev/trainer/sampling.h: how a token is drawn from the logits, the same in both trainers
(--temperature, --top_k, --top_p; dev/test/sampler_reference.py repeats it with numpy), and the
sampling RNG whose state a training state saves.
*/
#ifndef DEV_TRAINER_SAMPLING_H
#define DEV_TRAINER_SAMPLING_H

#include "host.h"

// ----------------------------------------------------------------------------
// sampling

// --num_samples' bound: the most sequences one KV cache decodes together (both trainers' kv_cache_build)
#define GENERATE_MAX_BATCH 1024

// the sampling RNG (xorshift64*): its state is saved in the training state, so a resumed run
// samples the same text as an uninterrupted one
static unsigned int random_u32(unsigned long long* state) {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return (unsigned int)((*state * 0x2545F4914F6CDD1DULL) >> 32);
}
static float random_f32(unsigned long long* state) { return (random_u32(state) >> 8) / 16777216.0f; }

// --temperature, --top_k, --top_p: how a token is drawn from the logits, for --generate and for the
// samples printed during training (-s)
typedef struct {
    float temperature; // 0 = greedy (argmax)
    int top_k;         // 0 (or >= V) = off
    float top_p;       // 1 = off
} SamplingSettings;

// Above this --temperature is refused: a typo, not a setting (at 100 the logits of a trained
// GPT-2, spread over ~30, already give a near-uniform distribution)
#define SAMPLING_TEMPERATURE_MAX 100.0f

// the settings and the sampler's scratch, kept between tokens so that a token allocates nothing
struct Sampler {
    SamplingSettings settings;
    std::vector<double> weight; // (V) exp(logit / temperature - max)
    std::vector<int> order;     // token ids, ranked for top-k/top-p, then the kept ones by id
};

// whether `a` ranks before `b`: the larger logit first, the lower id on ties, so that top-k and top-p
// keep the same tokens in both trainers (and in dev/test/sampler_reference.py)
struct LogitRank {
    const float* logits;
    bool operator()(int a, int b) const { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); }
};

// The token a coin in [0, 1) picks from logits (V of them, finite: sample_logits_check), in this
// order, as HF's generate and nanoGPT's sample do it:
//   1. temperature: the logits are divided by it; 0 is greedy: the largest logit, the lowest id on
//      ties (the caller still draws the coin, see generate_tokens)
//   2. top-k: only the k tokens of largest logit are kept (ties: the lower id)
//   3. top-p: of those, the smallest set of the most probable whose probability, renormalized over
//      what top-k kept, adds up to p (always at least one token)
//   4. the coin picks from the kept tokens' renormalized distribution: the first kept token, by id,
//      whose cumulative probability exceeds the coin.
// Step 4 walks the kept tokens by id whatever filtered them, so a filter that keeps every token
// picks what no filter picks. Weights exp(z - max z) and every sum in double, summed in one fixed
// order (by id; top-p's running sum by rank), so both trainers pick the same token from the same
// logits and the numpy reference can repeat it exactly. Cost: one pass over the logits without
// filters (no sort); top-k an nth_element; top-p a partial sort of a prefix of the ranking that
// grows until it holds the nucleus (a full sort only when the nucleus is most of the vocabulary).
static int sample_token(Sampler* sampler, const float* logits, int V, float coin) {
    const SamplingSettings* s = &sampler->settings;
    if (s->temperature == 0.0f) {
        int best = 0;
        float best_logit = logits[0];
        for (int v = 1; v < V; v++) {
            if (logits[v] > best_logit) {
                best = v;
                best_logit = logits[v];
            }
        }
        return best;
    }
    const double temperature = (double)s->temperature;
    float max_logit = logits[0];
    for (int v = 1; v < V; v++) { max_logit = logits[v] > max_logit ? logits[v] : max_logit; } // fmaxf's NaN rule would not vectorize
    const double z_max = (double)max_logit / temperature;
    std::vector<double>& w = sampler->weight; // by id; with top-k only the kept tokens' are computed
    w.resize((size_t)V);
    const int top_k = s->top_k > 0 && s->top_k < V ? s->top_k : V;
    if (top_k == V) {
        for (int v = 0; v < V; v++) { w[(size_t)v] = exp((double)logits[v] / temperature - z_max); }
    }
    if (top_k == V && s->top_p >= 1.0f) {
        double total = 0.0;
        for (int v = 0; v < V; v++) { total += w[(size_t)v]; }
        const double target = (double)coin * total;
        double cdf = 0.0;
        for (int v = 0; v < V; v++) {
            cdf += w[(size_t)v];
            if (target < cdf) { return v; }
        }
        return V - 1; // rounding left the coin past the last bin
    }
    std::vector<int>& order = sampler->order;
    const LogitRank rank = {logits};
    int kept = V;
    if (top_k <= V / 16) {
        // one pass with a heap of the top_k best so far, the worst of them on top: most tokens are
        // turned away by one comparison (an nth_element over V ids costs several times more)
        order.clear();
        for (int v = 0; v < V; v++) {
            if ((int)order.size() < top_k) {
                order.push_back(v);
                std::push_heap(order.begin(), order.end(), rank);
            } else if (rank(v, order[0])) {
                std::pop_heap(order.begin(), order.end(), rank);
                order.back() = v;
                std::push_heap(order.begin(), order.end(), rank);
            }
        }
        kept = top_k;
    } else {
        order.resize((size_t)V);
        for (int v = 0; v < V; v++) { order[(size_t)v] = v; }
        if (top_k < V) {
            std::nth_element(order.begin(), order.begin() + top_k, order.end(), rank); // the first top_k: the largest
            kept = top_k;
        }
    }
    if (top_k < V) {
        for (int i = 0; i < kept; i++) {
            const int v = order[(size_t)i];
            w[(size_t)v] = exp((double)logits[v] / temperature - z_max);
        }
    }
    if (s->top_p < 1.0f) {
        if (kept < V) { std::sort(order.begin(), order.begin() + kept); } // by id, for the total in the fixed order
        double total = 0.0;
        for (int i = 0; i < kept; i++) { total += w[(size_t)order[(size_t)i]]; }
        const double threshold = (double)s->top_p * total;
        // rank a prefix 8x longer each round (the next ranks split off by nth_element, then sorted)
        // until the running sum reaches the threshold; all of them should rounding keep it below
        double cum = 0.0;
        int i = 0;
        for (int ranked = 0; ranked < kept && cum < threshold;) {
            const int longer = ranked > kept / 8 ? kept : std::max(64, ranked * 8);
            const int next = std::min(longer, kept);
            if (next < kept) { std::nth_element(order.begin() + ranked, order.begin() + next, order.begin() + kept, rank); }
            std::sort(order.begin() + ranked, order.begin() + next, rank);
            while (i < next && cum < threshold) { cum += w[(size_t)order[(size_t)i++]]; }
            ranked = next;
        }
        kept = i;
    }
    std::sort(order.begin(), order.begin() + kept); // step 4 walks by id
    double total = 0.0;
    for (int i = 0; i < kept; i++) { total += w[(size_t)order[(size_t)i]]; }
    const double target = (double)coin * total;
    double cdf = 0.0;
    for (int i = 0; i < kept; i++) {
        cdf += w[(size_t)order[(size_t)i]];
        if (target < cdf) { return order[(size_t)i]; }
    }
    return order[(size_t)kept - 1];
}


// The logits a token is sampled from: a non-finite one means the model's output is broken, and
// sampling from it would print end-of-text tokens as if all were well. Returns 1, or 0 with a message.
static int sample_logits_check(const float* logits, int V, int position, char* msg, size_t msg_size) {
    for (int v = 0; v < V; v++) {
        if (!isfinite(logits[v])) {
            snprintf(msg, msg_size, "sampling at position %d: logit %d is %g, nothing to sample from (HINT: the model holds "
                     "non-finite weights (--allow_nonfinite 1?) or its activations overflow)", position, v, (double)logits[v]);
            return 0;
        }
    }
    return 1;
}

#endif // DEV_TRAINER_SAMPLING_H
