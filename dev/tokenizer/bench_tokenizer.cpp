// Encoding speed of tokenizer.h on one core (one thread), not a test.
//
//   make build/bench_tokenizer
//   ./build/bench_tokenizer [--vocab DIR] [FILE...]
//
// FILE defaults to the six Austen novels of dev/data/austen/text/ (written by
// dev/data/prepare_austen.sh), concatenated. Prints MB/s of encode_ordinary with an empty piece cache
// (a fresh encoder, the speed on a first pass over new text) and with a warm cache (the best of
// five further passes), and of decode.
#include "../../tokenizer.h"

#include <chrono>
#include <string>
#include <vector>

static double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

static bool read_all(const char* path, std::string* out) {
    FILE* f = fopen(path, "rb");
    if (f == NULL) { return false; }
    bool ok = read_all_bytes(f, out);
    fclose(f);
    return ok;
}

int main(int argc, char** argv) {
    std::string vocab = "dev/data/gpt2";
    std::vector<std::string> files;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--vocab") == 0 && i + 1 < argc) { vocab = argv[++i]; }
        else if (argv[i][0] == '-') { fprintf(stderr, "usage: %s [--vocab DIR] [FILE...]\n", argv[0]); return 2; }
        else { files.push_back(argv[i]); }
    }
    if (files.empty()) {
        const char* names[] = {"1_sensesensibility", "2_prideprejudice", "3_mansfieldpark", "4_emma", "5_northangerabbey", "6_persuasion"};
        for (const char* n : names) { files.push_back(std::string("dev/data/austen/text/") + n + ".txt"); }
    }
    std::string text;
    for (auto& f : files) {
        if (!read_all(f.c_str(), &text)) {
            fprintf(stderr, "ERROR: cannot read %s; HINT: bash dev/data/prepare_austen.sh writes the Austen texts, or pass files\n", f.c_str());
            return 1;
        }
    }
    double mb = text.size() / 1e6;

    std::string err;
    GPT2Encoder enc;
    double t0 = now_s();
    if (!enc.load_openai((vocab + "/encoder.json").c_str(), (vocab + "/vocab.bpe").c_str(), &err)) {
        fprintf(stderr, "ERROR: %s\n", err.c_str());
        return 1;
    }
    double t_load = now_s() - t0;

    std::vector<int> ids;
    ids.reserve(text.size() / 2);
    t0 = now_s();
    enc.encode_ordinary(text.data(), text.size(), &ids);
    double t_cold = now_s() - t0;

    double t_warm = 1e30;
    for (int rep = 0; rep < 5; rep++) {
        ids.clear();
        t0 = now_s();
        enc.encode_ordinary(text.data(), text.size(), &ids);
        t_warm = std::min(t_warm, now_s() - t0);
    }

    std::string dec;
    dec.reserve(text.size());
    t0 = now_s();
    enc.decode(ids.data(), ids.size(), &dec);
    double t_dec = now_s() - t0;
    if (dec != text) { fprintf(stderr, "ERROR: decode(encode(text)) != text\n"); return 1; }

    printf("text: %zu files, %.2f MB, %zu tokens (%.2f bytes/token); vocabulary loaded in %.3f s\n",
           files.size(), mb, ids.size(), text.size() / (double)ids.size(), t_load);
    printf("encode, empty cache (first pass): %.3f s  %.1f MB/s\n", t_cold, mb / t_cold);
    printf("encode, warm cache (best of 5):   %.3f s  %.1f MB/s\n", t_warm, mb / t_warm);
    printf("decode:                           %.3f s  %.1f MB/s\n", t_dec, mb / t_dec);
    return 0;
}
