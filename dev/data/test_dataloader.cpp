/*
Unit tests of dataloader.h. Writes small shards into a temporary directory and prints one
"PASS data <check>" / "FAIL data <check>" line per check; exits 1 if any check fails.
Build: make build/test_dataloader; run: ./build/test_dataloader
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <set>
#include <string>
#include <vector>

#include "../../dataloader.h"

static int g_failed = 0, g_passed = 0;

static void check(int ok, const char* name, const char* detail) {
    if (ok) { g_passed++; printf("PASS data %s%s%s\n", name, detail[0] ? " " : "", detail); }
    else    { g_failed++; printf("FAIL data %s%s%s\n", name, detail[0] ? " " : "", detail); }
    fflush(stdout);
}

static std::string g_dir;

static std::string path_of(const char* name) { return g_dir + "/" + name; }

static void remove_dir() {
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_dir.c_str());
    if (system(cmd) != 0) { fprintf(stderr, "could not remove %s\n", g_dir.c_str()); }
}

// a loader that later checks rely on: a refused init is a FAIL, and nothing after it can be checked
static void must_init(DataLoader* dl, const std::string& pattern, size_t B, size_t T, int shuffle,
                      unsigned long long seed) {
    char msg[1024];
    if (dataloader_init(dl, pattern.c_str(), B, T, shuffle, seed, msg, sizeof(msg))) { return; }
    check(0, "init", msg);
    remove_dir();
    exit(1);
}

// token i of shard `id`: distinct across shards so a window identifies where it came from
static uint16_t token_at(int id, size_t i) { return (uint16_t)((id * 7919 + i) % 65536); }

// writes a shard like llm.c's write_datafile, with header fields and size that can be broken on purpose
static void write_shard(const char* name, int id, size_t ntok, int magic = DATALOADER_MAGIC,
                        int version = DATALOADER_VERSION, long long header_ntok = -1, long long drop_bytes = 0) {
    std::string p = path_of(name);
    FILE* f = fopen(p.c_str(), "wb");
    if (!f) { perror(p.c_str()); exit(2); }
    int32_t header[256];
    memset(header, 0, sizeof(header));
    header[0] = magic;
    header[1] = version;
    header[2] = (int32_t)(header_ntok >= 0 ? header_ntok : (long long)ntok);
    std::vector<uint16_t> toks(ntok);
    for (size_t i = 0; i < ntok; i++) { toks[i] = token_at(id, i); }
    std::vector<char> bytes(sizeof(header) + 2 * ntok);
    memcpy(bytes.data(), header, sizeof(header));
    memcpy(bytes.data() + sizeof(header), toks.data(), 2 * ntok);
    size_t n = bytes.size() - (size_t)drop_bytes;
    if (fwrite(bytes.data(), 1, n, f) != n) { perror(p.c_str()); exit(2); }
    fclose(f);
}

// init must fail with a one-line message that contains each of `needles`
static void expect_init_error(const char* check_name, const char* pattern, size_t B, size_t T,
                              std::vector<std::string> needles) {
    DataLoader dl;
    char msg[1024];
    int ok = dataloader_init(&dl, pattern, B, T, 0, 1, msg, sizeof(msg));
    int good = !ok && strchr(msg, '\n') == NULL && strlen(msg) > 0;
    for (const std::string& s : needles) { good = good && strstr(msg, s.c_str()) != NULL; }
    char detail[1200];
    snprintf(detail, sizeof(detail), "msg=\"%s\"", msg);
    check(good, check_name, detail);
    if (ok) { dataloader_free(&dl); }
}

// identifies a batch: (shard id, first token index) recovered from the first input token
struct Window { int shard; size_t start; };

static Window window_of(const DataLoader* dl, const std::vector<int>& ids) {
    // the shards' token sequences start at distinct values; find which one this batch is in
    for (int id : ids) {
        size_t start = (size_t)((dl->inputs[0] - (int)token_at(id, 0) + 65536) % 65536);
        int match = start < 4096; // test shards are small; shard ids are 7919 tokens apart
        for (size_t i = 0; i < dl->B * dl->T && match; i++) {
            match = dl->inputs[i] == (int)token_at(id, start + i) && dl->targets[i] == (int)token_at(id, start + i + 1);
        }
        if (match) { return Window{id, start}; }
    }
    return Window{-1, 0};
}

static std::vector<std::pair<int, size_t>> run_batches(DataLoader* dl, const std::vector<int>& ids, size_t n) {
    std::vector<std::pair<int, size_t>> out;
    for (size_t i = 0; i < n; i++) {
        dataloader_next_batch(dl);
        Window w = window_of(dl, ids);
        out.push_back({w.shard, w.start});
    }
    return out;
}

int main(void) {
    char tmpl[] = "/tmp/test_dataloader_XXXXXX";
    if (mkdtemp(tmpl) == NULL) { perror("mkdtemp"); return 2; }
    g_dir = tmpl;
    char msg[1024];
    char detail[1400];
    const size_t B = 2, T = 8; // B*T = 16 tokens per batch, windows of 17

    // ------------------------------------------------------------------ errors
    expect_init_error("error_missing_file", path_of("nope_train_000000.bin").c_str(), B, T,
                      {"nope_train_000000.bin", "does not exist", "expected"});
    expect_init_error("error_empty_glob", path_of("nothing_*.bin").c_str(), B, T,
                      {"nothing_*.bin", "no file matches", "expected"});
    write_shard("magic.bin", 1, 100, 20240326);
    expect_init_error("error_bad_magic", path_of("magic.bin").c_str(), B, T,
                      {"magic.bin", "magic 20240326", "expected 20240520"});
    write_shard("version.bin", 1, 100, DATALOADER_MAGIC, 2);
    expect_init_error("error_bad_version", path_of("version.bin").c_str(), B, T,
                      {"version.bin", "version 2", "expected 1"});
    write_shard("truncated.bin", 1, 100, DATALOADER_MAGIC, 1, -1, 3);
    expect_init_error("error_size_disagrees_with_header", path_of("truncated.bin").c_str(), B, T,
                      {"truncated.bin", "1221 bytes", "100 tokens", "expected 1224 bytes"});
    write_shard("longer.bin", 1, 100, DATALOADER_MAGIC, 1, 90);
    expect_init_error("error_size_larger_than_header", path_of("longer.bin").c_str(), B, T,
                      {"longer.bin", "90 tokens", "expected 1204 bytes"});
    {
        FILE* f = fopen(path_of("short.bin").c_str(), "wb");
        fwrite("abc", 1, 3, f);
        fclose(f);
    }
    expect_init_error("error_shorter_than_header", path_of("short.bin").c_str(), B, T,
                      {"short.bin", "3 bytes", "expected at least the 1024-byte header"});
    write_shard("small.bin", 1, 16); // needs B*T+1 = 17
    expect_init_error("error_shard_too_small", path_of("small.bin").c_str(), B, T,
                      {"small.bin", "16 tokens", "expected at least B*T+1 = 17"});
    // one bad shard among good ones is named
    write_shard("mixa_000000.bin", 1, 100);
    write_shard("mixa_000001.bin", 2, 100, DATALOADER_MAGIC, 7);
    expect_init_error("error_names_the_bad_shard_of_a_glob", path_of("mixa_*.bin").c_str(), B, T,
                      {"mixa_000001.bin", "version 7"});
    write_shard("ok.bin", 1, 100);
    expect_init_error("error_zero_batch", path_of("ok.bin").c_str(), 0, T, {"ok.bin", "B=0", "expected"});
    expect_init_error("error_directory", g_dir.c_str(), B, T, {g_dir.c_str(), "not a regular file"});

    // ------------------------------------------------------------------ sequential reading
    // three shards, written out of order to check sorting; 17 -> 1 window, 50 -> 3 windows, 33 -> 2
    write_shard("seq_000002.bin", 3, 33);
    write_shard("seq_000000.bin", 1, 17);
    write_shard("seq_000001.bin", 2, 50);
    std::vector<int> ids = {1, 2, 3};
    std::string seq = path_of("seq_*.bin");
    DataLoader dl;
    int ok = dataloader_init(&dl, seq.c_str(), B, T, 0, 1337, msg, sizeof(msg));
    snprintf(detail, sizeof(detail), "num_tokens=%zu num_batches=%zu num_shards=%zu %s", ok ? dl.num_tokens : 0,
             ok ? dl.num_batches : 0, ok ? dl.num_shards : 0, ok ? "" : msg);
    check(ok && dl.num_tokens == 100 && dl.num_batches == 6 && dl.num_shards == 3, "init_counts", detail);
    if (!ok) { printf("0 further checks possible\n"); return 1; }
    {
        // llm.c order: shard 0 window 0; shard 1 windows at 0, 16, 32; shard 2 at 0, 16; then again
        std::vector<std::pair<int, size_t>> expected = {{1, 0}, {2, 0}, {2, 16}, {2, 32}, {3, 0}, {3, 16},
                                                        {1, 0}, {2, 0}};
        std::vector<std::pair<int, size_t>> got = run_batches(&dl, ids, expected.size());
        check(got == expected, "sequential_windows_and_shift", "inputs = window[0..B*T), targets = window[1..B*T+1), windows advance by B*T");
        check(dl.epoch == 1, "sequential_epoch_rollover", dl.epoch == 1 ? "epoch=1 after 8 of 6-per-epoch batches" : "wrong epoch");
        dataloader_reset(&dl);
        got = run_batches(&dl, ids, 2);
        check(got[0] == std::make_pair(1, (size_t)0) && got[1] == std::make_pair(2, (size_t)0) && dl.epoch == 0,
              "reset_to_start", "");
    }
    dataloader_free(&dl);

    // ------------------------------------------------------------------ shuffling
    // 3 shards of 10, 7 and 12 windows
    write_shard("shuf_000000.bin", 11, 10 * 16 + 1);
    write_shard("shuf_000001.bin", 12, 7 * 16 + 5);
    write_shard("shuf_000002.bin", 13, 12 * 16 + 16);
    std::vector<int> sids = {11, 12, 13};
    std::string shuf = path_of("shuf_*.bin");
    DataLoader a, b, c;
    must_init(&a, shuf, B, T, 1, 42);
    must_init(&b, shuf, B, T, 1, 42);
    must_init(&c, shuf, B, T, 1, 43);
    size_t nb = a.num_batches;
    std::vector<std::pair<int, size_t>> ra = run_batches(&a, sids, 3 * nb);
    std::vector<std::pair<int, size_t>> rb = run_batches(&b, sids, 3 * nb);
    std::vector<std::pair<int, size_t>> rc = run_batches(&c, sids, 3 * nb);
    check(ra == rb, "shuffle_same_seed_same_order", "3 epochs, seed 42 twice");
    check(ra != rc, "shuffle_other_seed_other_order", "seed 42 vs 43");
    {
        int all_once = 1, differs_from_sequential = 0;
        std::vector<std::vector<std::pair<int, size_t>>> epochs;
        for (size_t e = 0; e < 3; e++) {
            std::vector<std::pair<int, size_t>> ep(ra.begin() + e * nb, ra.begin() + (e + 1) * nb);
            std::set<std::pair<int, size_t>> seen(ep.begin(), ep.end());
            all_once = all_once && seen.size() == nb && nb == 29;
            for (const auto& w : ep) { all_once = all_once && w.first >= 0 && w.second % 16 == 0; }
            epochs.push_back(ep);
        }
        for (size_t i = 0; i + 1 < ra.size() && !differs_from_sequential; i++) {
            differs_from_sequential = ra[i].first == ra[i + 1].first && ra[i + 1].second != ra[i].second + 16;
        }
        snprintf(detail, sizeof(detail), "num_batches=%zu, 3 epochs", nb);
        check(all_once, "shuffle_every_window_once_per_epoch", detail);
        check(epochs[0] != epochs[1] && epochs[1] != epochs[2], "shuffle_epochs_differ", "");
        check(differs_from_sequential, "shuffle_windows_permuted_within_shard", "");
        // windows of one shard stay together within an epoch (one file open at a time)
        int grouped = 1;
        for (const auto& ep : epochs) {
            std::set<int> done;
            for (size_t i = 0; i < ep.size(); i++) {
                if (i > 0 && ep[i].first != ep[i - 1].first) { grouped = grouped && !done.count(ep[i].first); done.insert(ep[i - 1].first); }
            }
        }
        check(grouped, "shuffle_shard_windows_contiguous", "");
        check(a.epoch == 2, "shuffle_epoch_rollover", a.epoch == 2 ? "epoch=2 at the last batch of epoch 3" : "wrong epoch");
    }
    dataloader_free(&a);
    dataloader_free(&b);
    dataloader_free(&c);
    // the same shuffled order every time, pinned: a change of the generator shows up here
    {
        DataLoader p;
        must_init(&p, shuf, B, T, 1, 42);
        std::vector<std::pair<int, size_t>> first = run_batches(&p, sids, 4);
        std::vector<std::pair<int, size_t>> pinned = {{13, 32}, {13, 96}, {13, 0}, {13, 80}};
        snprintf(detail, sizeof(detail), "seed 42 first windows (shard id, start): (%d,%zu) (%d,%zu) (%d,%zu) (%d,%zu)",
                 first[0].first, first[0].second, first[1].first, first[1].second, first[2].first,
                 first[2].second, first[3].first, first[3].second);
        check(first == pinned, "shuffle_order_pinned", detail);
        dataloader_free(&p);
    }

    // ------------------------------------------------------------------ state save / restore
    {
        // stop at several points, including mid-shard, end of a shard, and across epoch boundaries
        size_t stops[] = {0, 1, 5, 10, nb - 1, nb, nb + 13, 2 * nb};
        int all_same = 1;
        for (int shuffle = 0; shuffle <= 1; shuffle++) {
            for (size_t s : stops) {
                DataLoader x, y;
                must_init(&x, shuf, B, T, shuffle, 7);
                run_batches(&x, sids, s);
                DataLoaderState st;
                dataloader_get_state(&x, &st);
                std::vector<std::pair<int, size_t>> cont = run_batches(&x, sids, nb + 3);
                // a fresh loader with another seed on the command line: the state's seed wins
                must_init(&y, shuf, B, T, shuffle, 999);
                int okset = dataloader_set_state(&y, &st, msg, sizeof(msg));
                std::vector<std::pair<int, size_t>> resumed = run_batches(&y, sids, nb + 3);
                int same = okset && cont == resumed;
                // bit-identical batches, not just the same window ids
                same = same && memcmp(x.inputs, y.inputs, B * T * sizeof(int)) == 0 &&
                       memcmp(x.targets, y.targets, B * T * sizeof(int)) == 0 && x.epoch == y.epoch;
                DataLoaderState sx, sy;
                dataloader_get_state(&x, &sx);
                dataloader_get_state(&y, &sy);
                same = same && memcmp(&sx, &sy, sizeof(sx)) == 0;
                if (!same) { printf("  state mismatch at shuffle=%d stop=%zu %s\n", shuffle, s, okset ? "" : msg); }
                all_same = all_same && same;
                dataloader_free(&x);
                dataloader_free(&y);
            }
        }
        check(all_same, "state_restore_continues_identically", "shuffle 0/1, 8 stop points, next num_batches+3 batches and the state equal");
    }
    {
        DataLoader x, y;
        DataLoaderState st;
        must_init(&x, shuf, B, T, 1, 7);
        run_batches(&x, sids, 3);
        dataloader_get_state(&x, &st);
        must_init(&y, seq, B, T, 1, 7);
        int okset = dataloader_set_state(&y, &st, msg, sizeof(msg));
        snprintf(detail, sizeof(detail), "msg=\"%s\"", msg);
        check(!okset && strstr(msg, "other data") && strstr(msg, "seq_000000.bin") && !strchr(msg, '\n'),
              "state_refused_for_other_data", detail);
        dataloader_free(&y);
        // same data, one shard's tokens changed in count
        write_shard("shuf2_000000.bin", 11, 10 * 16 + 1);
        write_shard("shuf2_000001.bin", 12, 7 * 16 + 6);
        write_shard("shuf2_000002.bin", 13, 12 * 16 + 15);
        std::string shuf2 = path_of("shuf2_*.bin");
        must_init(&y, shuf2, B, T, 1, 7);
        okset = dataloader_set_state(&y, &st, msg, sizeof(msg));
        snprintf(detail, sizeof(detail), "same total tokens, other shard sizes: msg=\"%s\"", msg);
        check(!okset && strstr(msg, "other data"), "state_refused_for_other_shard_sizes", detail);
        dataloader_free(&y);
        must_init(&y, shuf, B, 2 * T, 1, 7);
        okset = dataloader_set_state(&y, &st, msg, sizeof(msg));
        snprintf(detail, sizeof(detail), "msg=\"%s\"", msg);
        check(!okset && strstr(msg, "T=8") && strstr(msg, "T=16"), "state_refused_for_other_batch_shape", detail);
        dataloader_free(&y);
        must_init(&y, shuf, B, T, 1, 7);
        DataLoaderState zero;
        memset(&zero, 0, sizeof(zero));
        okset = dataloader_set_state(&y, &zero, msg, sizeof(msg));
        snprintf(detail, sizeof(detail), "msg=\"%s\"", msg);
        check(!okset && strstr(msg, "not a dataloader state"), "state_refused_when_empty", detail);
        // a refused state leaves the loader where it was
        std::vector<std::pair<int, size_t>> r1 = run_batches(&y, sids, 2);
        DataLoader z;
        must_init(&z, shuf, B, T, 1, 7);
        std::vector<std::pair<int, size_t>> r2 = run_batches(&z, sids, 2);
        check(r1 == r2, "state_refused_leaves_loader_unchanged", "");
        dataloader_free(&x);
        dataloader_free(&y);
        dataloader_free(&z);
    }

    // ------------------------------------------------------------------ cleanup
    remove_dir();
    printf("test_dataloader: %d checks, %d failed\n", g_passed + g_failed, g_failed);
    return g_failed ? 1 : 0;
}
