// The head diagnostics of dev/trainer/attention_maps.h on hand-built attention patterns whose values are
// known in closed form (uniform, identity, previous-token, a pure induction head, symmetric and
// antisymmetric scores), the induction probe's tokens, and the maps file's round trip and its
// refusal of damaged files. One PASS/FAIL line per check, with the value found and the expected one.
//
//   g++ -O2 -std=c++17 dev/test/test_attention_maps.cpp -o build/test_attention_maps   (make does this)
//   ./build/test_attention_maps <scratch folder>
#include "../trainer/attention_maps.h"

#include <dirent.h>
#include <stdlib.h>
#include <unistd.h>

static int failures = 0;

static void check(const char* name, double got, double want, double tol) {
    const double err = fabs(got - want);
    const int ok = err <= tol;
    printf("%s %s: %.9g, expected %.9g (|diff| %.2e, tolerance %.0e)\n", ok ? "PASS" : "FAIL", name, got, want, err, tol);
    failures += !ok;
}

static void check_true(const char* name, int ok, const char* detail) {
    printf("%s %s: %s\n", ok ? "PASS" : "FAIL", name, detail);
    failures += !ok;
}

// a (T, T) causal map from a rule giving row t's weights before normalisation
template <typename F> static std::vector<float> pattern(int T, F weight) {
    std::vector<float> p((size_t)T * T, 0.0f);
    for (int t = 0; t < T; t++) {
        double sum = 0.0;
        for (int s = 0; s <= t; s++) { sum += weight(t, s); }
        for (int s = 0; s <= t; s++) { p[(size_t)t * T + s] = (float)(weight(t, s) / sum); }
    }
    return p;
}

int main(int argc, char** argv) {
    const char* dir = argc > 1 ? argv[1] : "/tmp";
    const int T = 9;
    const double tol = 1e-6; // float32 maps, double sums

    // uniform: p[t][s] = 1 / (t + 1)
    {
        const std::vector<float> p = pattern(T, [](int, int) { return 1.0; });
        double entropy = 0.0, distance = 0.0, sink = 0.0, prev = 0.0;
        for (int t = 0; t < T; t++) {
            entropy += log(t + 1.0);
            distance += t / 2.0;
            sink += 1.0 / (t + 1);
            if (t >= 1) { prev += 1.0 / (t + 1); }
        }
        check("uniform entropy = mean ln(t + 1)", head_entropy(p.data(), T), entropy / T, tol);
        check("uniform distance = mean t / 2", head_distance(p.data(), T), distance / T, tol);
        check("uniform sink = mean 1 / (t + 1)", head_sink(p.data(), T), sink / T, tol);
        check("uniform prev_token = mean over t >= 1 of 1 / (t + 1)", head_prev_token(p.data(), T), prev / (T - 1), tol);
    }
    // identity: every position attends to itself
    {
        const std::vector<float> p = pattern(T, [](int t, int s) { return s == t ? 1.0 : 0.0; });
        check("identity entropy = 0", head_entropy(p.data(), T), 0.0, tol);
        check("identity distance = 0", head_distance(p.data(), T), 0.0, tol);
        check("identity sink = 1 / T (position 0 only)", head_sink(p.data(), T), 1.0 / T, tol);
        check("identity prev_token = 0", head_prev_token(p.data(), T), 0.0, tol);
    }
    // previous token: t attends to t - 1 (position 0 to itself)
    {
        const std::vector<float> p = pattern(T, [](int t, int s) { return s == (t > 0 ? t - 1 : 0) ? 1.0 : 0.0; });
        check("previous-token prev_token = 1", head_prev_token(p.data(), T), 1.0, tol);
        check("previous-token entropy = 0", head_entropy(p.data(), T), 0.0, tol);
        check("previous-token distance = (T - 1) / T", head_distance(p.data(), T), (T - 1.0) / T, tol);
        check("previous-token sink = 2 / T (positions 0 and 1)", head_sink(p.data(), T), 2.0 / T, tol);
        check("previous-token induction (T = 2R + 1, R = 4) = 0", head_induction(p.data(), T, 4), 0.0, tol);
    }
    // pure induction on [eot, r_1..r_R, r_1..r_R]: the repeat attends to the token after the earlier
    // occurrence; the first half, with nothing to recall, to the sink
    {
        const int R = 4, TI = 2 * R + 1;
        const std::vector<float> p = pattern(TI, [R](int t, int s) { return s == (t > R ? t - R + 1 : 0) ? 1.0 : 0.0; });
        check("induction pattern induction = 1", head_induction(p.data(), TI, R), 1.0, tol);
        check("induction pattern prev_token = 1 / 2R (only position 1, whose sink is its previous token)",
              head_prev_token(p.data(), TI), 1.0 / (2 * R), tol);
        const std::vector<float> u = pattern(TI, [](int, int) { return 1.0; });
        double want = 0.0;
        for (int t = R + 1; t <= 2 * R; t++) { want += 1.0 / (t + 1); }
        check("uniform induction = mean over the repeat of 1 / (t + 1)", head_induction(u.data(), TI, R), want / R, tol);
        check("induction of a map of the wrong length = 0", head_induction(p.data(), TI, R + 1), 0.0, 0.0);
    }
    // asymmetry of the scores: symmetric 0 (exactly), antisymmetric 2, one-sided sqrt(2)
    {
        std::vector<float> sym((size_t)T * T), anti((size_t)T * T), upper((size_t)T * T, 0.0f);
        for (int t = 0; t < T; t++) {
            for (int s = 0; s < T; s++) {
                sym[(size_t)t * T + s] = sinf((float)(t + s)) + (float)(t * s);
                anti[(size_t)t * T + s] = (float)(t - s);
                if (s > t) { upper[(size_t)t * T + s] = 1.0f; }
            }
        }
        check("symmetric scores asymmetry = 0 exactly", head_asymmetry(sym.data(), T), 0.0, 0.0);
        check("antisymmetric scores asymmetry = 2", head_asymmetry(anti.data(), T), 2.0, tol);
        check("strictly upper scores asymmetry = sqrt(2)", head_asymmetry(upper.data(), T), sqrt(2.0), tol);
    }
    // the induction probe's tokens
    {
        const int R = 50, V = 50257, eot = 50256;
        const std::vector<int> t = induction_tokens(R, V, eot);
        int ok = (int)t.size() == 2 * R + 1 && t[0] == eot, distinct = 0;
        for (int i = 0; ok && i < R; i++) { ok = t[1 + i] == t[1 + R + i] && t[1 + i] >= 0 && t[1 + i] < V && t[1 + i] != eot; }
        for (int i = 1; i < R; i++) { distinct += t[1 + i] != t[i]; }
        check_true("induction probe: eot, then R tokens in [0, V) except eot, repeated", ok, ok ? "as specified" : "not so");
        check_true("induction probe: the tokens vary", distinct >= R / 2, distinct >= R / 2 ? "yes" : "mostly equal");
        check_true("induction probe: the same tokens every time", induction_tokens(R, V, eot) == t, "compared twice");
        check("induction probe length for a 1024 context", induction_repeat_for(1024), 50, 0);
        check("induction probe length for a 64 context", induction_repeat_for(64), 31, 0);
    }
    // the maps file: written, read back bit for bit; damaged copies refused with a message
    {
        AttentionMaps m;
        m.num_layers = 2;
        m.num_heads = 3;
        m.num_kv_heads = 1;
        m.head_dim = 16;
        m.scheme = 6;
        m.compute_bytes = 2;
        m.scale = 0.125f;
        m.vocab_size = 500;
        for (int i = 0; i < 2; i++) {
            AttentionSequence s;
            s.T = i == 0 ? 5 : 7;
            s.kind = i;
            s.repeat = i == 0 ? 0 : 3;
            for (int t = 0; t < s.T; t++) { s.tokens.push_back(100 * i + t); }
            for (size_t k = 0; k < (size_t)2 * 3 * s.T * s.T; k++) {
                s.probs.push_back((float)k * 0.5f + (float)i);
                s.scores.push_back(-(float)k / 3.0f);
            }
            m.seqs.push_back(s);
        }
        const std::string path = std::string(dir) + "/roundtrip_maps.bin";
        char msg[1024] = "";
        AttentionMaps back;
        const int wrote = attention_maps_write(&m, path.c_str(), msg, sizeof(msg));
        const int read = wrote && attention_maps_read(&back, path.c_str(), msg, sizeof(msg));
        int same = read && back.num_layers == 2 && back.num_heads == 3 && back.num_kv_heads == 1 && back.head_dim == 16 &&
                   back.scheme == 6 && back.compute_bytes == 2 && back.scale == 0.125f && back.vocab_size == 500 &&
                   back.seqs.size() == 2;
        for (size_t i = 0; same && i < 2; i++) {
            const AttentionSequence &a = m.seqs[i], &b = back.seqs[i];
            same = a.T == b.T && a.kind == b.kind && a.repeat == b.repeat && a.tokens == b.tokens &&
                   memcmp(a.probs.data(), b.probs.data(), a.probs.size() * 4) == 0 && b.probs.size() == a.probs.size() &&
                   memcmp(a.scores.data(), b.scores.data(), a.scores.size() * 4) == 0 && b.scores.size() == a.scores.size();
        }
        check_true("maps file round trip: header, tokens, probs and scores bit for bit", same, same ? "identical" : msg);
        // the temporary name is mkstemp's "<path>.XXXXXX": nothing of that shape may stay behind
        std::string left;
        DIR* d = opendir(dir);
        for (struct dirent* e = d != NULL ? readdir(d) : NULL; e != NULL; e = readdir(d)) {
            if (strncmp(e->d_name, "roundtrip_maps.bin.", 19) == 0) { left += std::string(" ") + e->d_name; }
        }
        if (d != NULL) { closedir(d); }
        check_true("maps file: no temporary file left beside it", left.empty(), left.empty() ? "none" : left.c_str());
        // one byte short, then the magic damaged
        FILE* f = fopen(path.c_str(), "rb");
        std::string bytes;
        int c;
        while (f != NULL && (c = fgetc(f)) != EOF) { bytes.push_back((char)c); }
        if (f != NULL) { fclose(f); }
        const std::string bad = std::string(dir) + "/damaged_maps.bin";
        const struct { const char* name; std::string content; const char* expect; } cases[] = {
            {"maps file one byte short refused", bytes.substr(0, bytes.size() - 1), "its header says"},
            {"maps file with a wrong magic refused", std::string("XXXX") + bytes.substr(4), "not an attention maps file"},
            {"maps file of 10 bytes refused", bytes.substr(0, 10), "not an attention maps file"},
        };
        for (const auto& k : cases) {
            f = fopen(bad.c_str(), "wb");
            fwrite(k.content.data(), 1, k.content.size(), f);
            fclose(f);
            AttentionMaps x;
            msg[0] = '\0';
            const int refused = !attention_maps_read(&x, bad.c_str(), msg, sizeof(msg)) && strstr(msg, k.expect) != NULL;
            check_true(k.name, refused, msg);
        }
        remove(path.c_str());
        remove(bad.c_str());
    }
    printf("%s: %d failed\n", failures ? "FAIL test_attention_maps" : "test_attention_maps", failures);
    return failures ? 1 : 0;
}
