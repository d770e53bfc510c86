/*
dataloader.h: reads llm.c token shards and serves (B, T) batches of inputs and next-token targets.

Shard format (llm.c's, so its data scripts and shards work unchanged):
  header: 256 int32, little-endian: [0] magic 20240520, [1] version 1, [2] number of tokens N
  then:   N tokens as uint16
A filename pattern is a glob(3) pattern ("dev/data/austen/austen_train_*.bin") or one file; the
matched files are taken in sorted order. Every shard's header and size are checked at init.

Windows and order (the definition every trainer relies on):
  - A batch is one window of B*T+1 consecutive tokens of one shard: inputs are its first B*T
    tokens, targets the last B*T (the same tokens shifted by one), both viewed as (B, T).
  - The windows of a shard of N tokens start at 0, B*T, 2*B*T, ... as long as the window fits:
    W = (N - 1) / (B*T) windows (consecutive windows share one token, like llm.c). The tail that
    does not fill a window is never read. A shard needs N >= B*T+1.
  - shuffle = 0: epoch after epoch, shards in sorted order and windows in order: exactly llm.c's
    sequential reading with one process.
  - shuffle = 1: in epoch e the shards are visited in a permutation seeded by (seed, e), and the
    windows of shard s (its index in sorted order) in a permutation seeded by (seed, e, s). Every
    window is visited exactly once per epoch. The generator is splitmix64 with Fisher-Yates and
    rejection sampling, so the order is the same on every platform and compiler.
  - After the last window of an epoch the next batch is the first window of the next epoch.
  - dataloader_skip_batch moves past a batch without reading it: the processes of a data-parallel
    run (dev/trainer/data_parallel.h) all walk this one order, each reading its own batches of it.

State: DataLoaderState (64 bytes, stored in training checkpoints) holds the seed, the epoch, the
position in the epoch's shard order and the position in the current shard's window order, plus
B, T, shuffle and a fingerprint of the data (shard count, total tokens, a hash of the shard sizes).
init + set_state + next_batch continues bit-identically to an uninterrupted run. set_state refuses
a state of other data or another B/T/shuffle with a one-line message; it adopts the state's seed
(resuming continues the stored run's order even if the command line's seed differs).

Errors: dataloader_init and dataloader_set_state return 0 and write a one-line message naming the
file or pattern and what was expected; they never exit. The only exit is a read failure in
dataloader_next_batch of a shard that passed the checks at init (changed on disk during the run).
*/
#ifndef DATALOADER_H
#define DATALOADER_H

#include <errno.h>
#include <glob.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define DATALOADER_MAGIC 20240520
#define DATALOADER_VERSION 1
#define DATALOADER_HEADER_INTS 256
#define DATALOADER_HEADER_BYTES (DATALOADER_HEADER_INTS * 4)
// tag in DataLoaderState.words[0]: "DLST" and the state layout version
#define DATALOADER_STATE_TAG ((0x444C5354ULL << 32) | 1ULL)

typedef struct { unsigned long long words[8]; } DataLoaderState; // fixed 64 bytes, stored in training checkpoints

typedef struct DataLoader {
    // public (read only for callers)
    size_t B, T;
    int* inputs;             // (B, T) current batch
    int* targets;            // (B, T) next tokens
    size_t num_tokens;       // tokens over all matched shards
    size_t num_batches;      // windows (batches) per epoch over all shards
    size_t num_shards;
    unsigned long long epoch; // epoch of the batch most recently loaded (0 before the first)
    // private
    int shuffle;
    unsigned long long seed;
    char** files;            // (num_shards) sorted paths
    size_t* shard_tokens;    // (num_shards) tokens of each shard
    size_t* shard_windows;   // (num_shards) windows of each shard
    size_t* shard_order;     // (num_shards) this epoch's shard order
    size_t* window_order;    // (max windows of a shard) order of the current shard's windows
    unsigned long long fingerprint; // identifies the data: shard count and sizes (DataLoaderState.words[7])
    // position of the NEXT window to load: epoch `next_epoch`, shard_order[shard_pos], window_pos
    unsigned long long next_epoch;
    size_t shard_pos;
    size_t window_pos;
    unsigned long long order_epoch; // epoch that shard_order was computed for
    size_t window_order_shard;      // shard that window_order was computed for (SIZE_MAX: none)
    unsigned long long window_order_epoch;
    FILE* fp;                // the open shard
    size_t fp_shard;         // which shard fp is (SIZE_MAX: none)
    uint16_t* buffer;        // (B*T+1) raw tokens of one window
} DataLoader;

// ----------------------------------------------------------------------------
// deterministic randomness: splitmix64 (same numbers on every platform)

static inline unsigned long long dataloader_splitmix64(unsigned long long* s) {
    unsigned long long z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

// uniform in [0, n), n >= 1, without modulo bias
static inline unsigned long long dataloader_random_below(unsigned long long* s, unsigned long long n) {
    unsigned long long limit = ~0ULL - (~0ULL % n); // accept r < limit: a multiple of n, so every residue is equally likely
    unsigned long long r;
    do { r = dataloader_splitmix64(s); } while (r >= limit);
    return r % n;
}

// the generator state of one permutation: a hash of (seed, epoch, stream) so permutations of
// different epochs and shards are independent
static inline unsigned long long dataloader_stream_seed(unsigned long long seed, unsigned long long epoch,
                                                        unsigned long long stream) {
    unsigned long long s = seed;
    unsigned long long h = dataloader_splitmix64(&s);
    s = h ^ (epoch * 0xD1B54A32D192ED03ULL);
    h = dataloader_splitmix64(&s);
    s = h ^ (stream * 0xABC98388FB8FAC03ULL);
    return dataloader_splitmix64(&s);
}

// out[0..n) = a permutation of 0..n-1 (identity when shuffle is off)
static inline void dataloader_permutation(size_t* out, size_t n, int shuffle, unsigned long long rng) {
    for (size_t i = 0; i < n; i++) { out[i] = i; }
    if (!shuffle) { return; }
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)dataloader_random_below(&rng, (unsigned long long)i);
        size_t tmp = out[i - 1]; out[i - 1] = out[j]; out[j] = tmp;
    }
}

// ----------------------------------------------------------------------------
// init / free

static inline void dataloader_zero(DataLoader* loader) {
    memset(loader, 0, sizeof(*loader));
    loader->window_order_shard = SIZE_MAX;
    loader->fp_shard = SIZE_MAX;
}

static inline void dataloader_free(DataLoader* loader) {
    if (loader->files != NULL) {
        for (size_t i = 0; i < loader->num_shards; i++) { free(loader->files[i]); }
    }
    free(loader->files);
    free(loader->shard_tokens);
    free(loader->shard_windows);
    free(loader->shard_order);
    free(loader->window_order);
    free(loader->inputs);
    free(loader->targets);
    free(loader->buffer);
    if (loader->fp != NULL) { fclose(loader->fp); }
    dataloader_zero(loader);
}

// checks one shard's header and size; returns its token count, or -1 with msg set
static inline long long dataloader_check_shard(const char* path, size_t B, size_t T, char* msg, size_t msg_size) {
    FILE* f = fopen(path, "rb");
    if (f == NULL) {
        snprintf(msg, msg_size, "dataloader: cannot open shard '%s': %s (expected an llm.c token shard)",
                 path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(msg, msg_size, "dataloader: '%s' is not a regular file (expected an llm.c token shard)", path);
        fclose(f);
        return -1;
    }
    long long size = (long long)st.st_size;
    if (size < DATALOADER_HEADER_BYTES) {
        snprintf(msg, msg_size, "dataloader: '%s' is %lld bytes, expected at least the %d-byte header of an llm.c token shard",
                 path, size, DATALOADER_HEADER_BYTES);
        fclose(f);
        return -1;
    }
    int32_t header[DATALOADER_HEADER_INTS];
    size_t got = fread(header, sizeof(int32_t), DATALOADER_HEADER_INTS, f);
    fclose(f);
    if (got != DATALOADER_HEADER_INTS) {
        snprintf(msg, msg_size, "dataloader: cannot read the header of '%s' (expected %d bytes)", path, DATALOADER_HEADER_BYTES);
        return -1;
    }
    if (header[0] != DATALOADER_MAGIC) {
        snprintf(msg, msg_size, "dataloader: '%s' has magic %d, expected %d (an llm.c token shard; HINT: is this a model checkpoint or another file?)",
                 path, (int)header[0], DATALOADER_MAGIC);
        return -1;
    }
    if (header[1] != DATALOADER_VERSION) {
        snprintf(msg, msg_size, "dataloader: '%s' has version %d, expected %d (uint16 tokens)",
                 path, (int)header[1], DATALOADER_VERSION);
        return -1;
    }
    long long ntok = header[2];
    if (ntok < 0 || size != DATALOADER_HEADER_BYTES + 2 * ntok) {
        snprintf(msg, msg_size, "dataloader: '%s' is %lld bytes but its header says %lld tokens, expected %lld bytes (1024 + 2 * tokens; HINT: truncated or still being written?)",
                 path, size, ntok, (long long)DATALOADER_HEADER_BYTES + 2 * ntok);
        return -1;
    }
    if ((unsigned long long)ntok < (unsigned long long)(B * T + 1)) {
        snprintf(msg, msg_size, "dataloader: '%s' has %lld tokens, expected at least B*T+1 = %zu for one batch (B=%zu, T=%zu; HINT: use a smaller -b/-t)",
                 path, ntok, B * T + 1, B, T);
        return -1;
    }
    return ntok;
}

static inline int dataloader_has_glob_chars(const char* s) {
    return strpbrk(s, "*?[") != NULL;
}

// returns 1 on success, else 0 with a one-line message (names the file/pattern, what was expected)
static inline int dataloader_init(DataLoader* loader, const char* filename_pattern, size_t B, size_t T,
                                  int shuffle, unsigned long long seed, char* msg, size_t msg_size) {
    dataloader_zero(loader);
    if (msg_size > 0) { msg[0] = '\0'; }
    if (filename_pattern == NULL || filename_pattern[0] == '\0') {
        snprintf(msg, msg_size, "dataloader: empty filename pattern (expected a shard file or a glob like dir/name_train_*.bin)");
        return 0;
    }
    if (B == 0 || T == 0 || B > (1u << 24) || T > (1u << 24)) {
        snprintf(msg, msg_size, "dataloader: B=%zu, T=%zu for '%s', expected 1 <= B, T <= 16777216", B, T, filename_pattern);
        return 0;
    }
    glob_t g;
    memset(&g, 0, sizeof(g));
    int rc = glob(filename_pattern, 0, NULL, &g);
    if (rc != 0 || g.gl_pathc == 0) {
        if (rc == GLOB_NOMATCH && !dataloader_has_glob_chars(filename_pattern)) {
            snprintf(msg, msg_size, "dataloader: shard file '%s' does not exist (expected an llm.c token shard; HINT: prepare the data, e.g. bash dev/data/prepare_austen.sh)",
                     filename_pattern);
        } else if (rc == GLOB_NOMATCH || rc == 0) {
            snprintf(msg, msg_size, "dataloader: no file matches '%s' (expected at least one llm.c token shard; HINT: prepare the data, e.g. bash dev/data/prepare_austen.sh)",
                     filename_pattern);
        } else {
            snprintf(msg, msg_size, "dataloader: cannot expand the pattern '%s' (glob error %d; expected a readable directory)",
                     filename_pattern, rc);
        }
        globfree(&g);
        return 0;
    }
    size_t n = g.gl_pathc;
    loader->num_shards = n;
    loader->files = (char**)calloc(n, sizeof(char*));
    loader->shard_tokens = (size_t*)calloc(n, sizeof(size_t));
    loader->shard_windows = (size_t*)calloc(n, sizeof(size_t));
    loader->shard_order = (size_t*)calloc(n, sizeof(size_t));
    if (!loader->files || !loader->shard_tokens || !loader->shard_windows || !loader->shard_order) {
        snprintf(msg, msg_size, "dataloader: out of memory for %zu shards of '%s'", n, filename_pattern);
        globfree(&g);
        dataloader_free(loader);
        return 0;
    }
    loader->B = B;
    loader->T = T;
    // FNV-1a over (shard count, each shard's tokens): identifies the data for set_state
    unsigned long long fp = 0xCBF29CE484222325ULL;
    size_t max_windows = 0;
    for (size_t i = 0; i < n; i++) {
        loader->files[i] = strdup(g.gl_pathv[i]);
        if (loader->files[i] == NULL) {
            snprintf(msg, msg_size, "dataloader: out of memory for the shard names of '%s'", filename_pattern);
            globfree(&g);
            dataloader_free(loader);
            return 0;
        }
        long long ntok = dataloader_check_shard(loader->files[i], B, T, msg, msg_size);
        if (ntok < 0) {
            globfree(&g);
            dataloader_free(loader);
            return 0;
        }
        loader->shard_tokens[i] = (size_t)ntok;
        loader->shard_windows[i] = ((size_t)ntok - 1) / (B * T);
        loader->num_tokens += (size_t)ntok;
        loader->num_batches += loader->shard_windows[i];
        if (loader->shard_windows[i] > max_windows) { max_windows = loader->shard_windows[i]; }
        for (int b = 0; b < 8; b++) {
            fp ^= ((unsigned long long)ntok >> (8 * b)) & 0xFF;
            fp *= 0x100000001B3ULL;
        }
    }
    globfree(&g);
    loader->fingerprint = fp ^ ((unsigned long long)n * 0x9E3779B97F4A7C15ULL) ^ ((unsigned long long)n << 40);
    loader->shuffle = shuffle ? 1 : 0;
    loader->seed = seed;
    loader->window_order = (size_t*)calloc(max_windows, sizeof(size_t));
    loader->inputs = (int*)calloc(B * T, sizeof(int));
    loader->targets = (int*)calloc(B * T, sizeof(int));
    loader->buffer = (uint16_t*)calloc(B * T + 1, sizeof(uint16_t));
    if (!loader->window_order || !loader->inputs || !loader->targets || !loader->buffer) {
        snprintf(msg, msg_size, "dataloader: out of memory for B=%zu, T=%zu batches of '%s'", B, T, filename_pattern);
        dataloader_free(loader);
        return 0;
    }
    loader->next_epoch = 0;
    loader->shard_pos = 0;
    loader->window_pos = 0;
    loader->order_epoch = ~0ULL; // computed on first use
    return 1;
}

// ----------------------------------------------------------------------------
// reading

static inline void dataloader_compute_shard_order(DataLoader* loader) {
    if (loader->order_epoch == loader->next_epoch) { return; }
    dataloader_permutation(loader->shard_order, loader->num_shards, loader->shuffle,
                           dataloader_stream_seed(loader->seed, loader->next_epoch, 0));
    loader->order_epoch = loader->next_epoch;
}

static inline void dataloader_compute_window_order(DataLoader* loader, size_t shard) {
    if (loader->window_order_shard == shard && loader->window_order_epoch == loader->next_epoch) { return; }
    dataloader_permutation(loader->window_order, loader->shard_windows[shard], loader->shuffle,
                           dataloader_stream_seed(loader->seed, loader->next_epoch, 1 + (unsigned long long)shard));
    loader->window_order_shard = shard;
    loader->window_order_epoch = loader->next_epoch;
}

// Moves to the next window and returns it (its shard in *shard_out): the order of the batches,
// without reading them.
static inline size_t dataloader_advance(DataLoader* loader, size_t* shard_out) {
    // move past finished shards and epochs (every shard has >= 1 window, checked at init)
    dataloader_compute_shard_order(loader);
    while (loader->window_pos >= loader->shard_windows[loader->shard_order[loader->shard_pos]]) {
        loader->window_pos = 0;
        loader->shard_pos++;
        if (loader->shard_pos >= loader->num_shards) {
            loader->shard_pos = 0;
            loader->next_epoch++;
            dataloader_compute_shard_order(loader);
        }
    }
    size_t shard = loader->shard_order[loader->shard_pos];
    dataloader_compute_window_order(loader, shard);
    size_t window = loader->window_order[loader->window_pos];
    loader->epoch = loader->next_epoch;
    loader->window_pos++;
    *shard_out = shard;
    return window;
}

// Passes over the next batch without reading it: a data-parallel process skips the batches of the
// others (dev/trainer/data_parallel.h), so that every process walks the same order of batches.
static inline void dataloader_skip_batch(DataLoader* loader) {
    size_t shard;
    dataloader_advance(loader, &shard);
}

// loads the next B*T+1 window into inputs/targets
static inline void dataloader_next_batch(DataLoader* loader) {
    size_t B = loader->B, T = loader->T;
    size_t shard;
    const size_t window = dataloader_advance(loader, &shard);
    if (loader->fp_shard != shard) {
        if (loader->fp != NULL) { fclose(loader->fp); }
        loader->fp = fopen(loader->files[shard], "rb");
        if (loader->fp == NULL) {
            fprintf(stderr, "dataloader: cannot reopen shard '%s': %s (it passed the checks at init; changed during the run?)\n",
                    loader->files[shard], strerror(errno));
            exit(EXIT_FAILURE);
        }
        loader->fp_shard = shard;
    }
    long long offset = DATALOADER_HEADER_BYTES + 2LL * (long long)(window * B * T);
    if (fseeko(loader->fp, (off_t)offset, SEEK_SET) != 0 ||
        fread(loader->buffer, sizeof(uint16_t), B * T + 1, loader->fp) != B * T + 1) {
        fprintf(stderr, "dataloader: cannot read %zu tokens at byte %lld of shard '%s' (it passed the checks at init; changed during the run?)\n",
                B * T + 1, offset, loader->files[shard]);
        exit(EXIT_FAILURE);
    }
    for (size_t i = 0; i < B * T; i++) {
        loader->inputs[i] = (int)loader->buffer[i];
        loader->targets[i] = (int)loader->buffer[i + 1];
    }
}

// back to the start of epoch 0
static inline void dataloader_reset(DataLoader* loader) {
    loader->next_epoch = 0;
    loader->shard_pos = 0;
    loader->window_pos = 0;
    loader->epoch = 0;
}

// ----------------------------------------------------------------------------
// state

static inline void dataloader_get_state(const DataLoader* loader, DataLoaderState* state) {
    memset(state, 0, sizeof(*state));
    state->words[0] = DATALOADER_STATE_TAG;
    state->words[1] = loader->seed;
    state->words[2] = loader->next_epoch;
    state->words[3] = (unsigned long long)loader->shard_pos;
    state->words[4] = (unsigned long long)loader->window_pos;
    state->words[5] = (unsigned long long)loader->num_tokens;
    state->words[6] = (unsigned long long)loader->B | ((unsigned long long)loader->T << 24) |
                      ((unsigned long long)loader->shuffle << 48);
    state->words[7] = loader->fingerprint;
}

static inline int dataloader_set_state(DataLoader* loader, const DataLoaderState* state, char* msg, size_t msg_size) {
    const char* where = loader->num_shards > 0 ? loader->files[0] : "(no shards)";
    if (msg_size > 0) { msg[0] = '\0'; }
    if (state->words[0] != DATALOADER_STATE_TAG) {
        snprintf(msg, msg_size, "dataloader: the saved data position is not a dataloader state (tag %016llx, expected %016llx; HINT: checkpoint written without one?)",
                 state->words[0], DATALOADER_STATE_TAG);
        return 0;
    }
    unsigned long long sB = state->words[6] & 0xFFFFFFULL;
    unsigned long long sT = (state->words[6] >> 24) & 0xFFFFFFULL;
    unsigned long long sshuffle = (state->words[6] >> 48) & 0xFFULL;
    if (state->words[5] != (unsigned long long)loader->num_tokens || state->words[7] != loader->fingerprint) {
        snprintf(msg, msg_size, "dataloader: the saved data position is for other data (%llu tokens), expected the data of '%s' and %zu more shards (%zu tokens; HINT: resume with the same data files)",
                 state->words[5], where, loader->num_shards - 1, loader->num_tokens);
        return 0;
    }
    if (sB != loader->B || sT != loader->T || sshuffle != (unsigned long long)loader->shuffle) {
        snprintf(msg, msg_size, "dataloader: the saved data position is for B=%llu, T=%llu, shuffle=%llu, expected this loader's B=%zu, T=%zu, shuffle=%d (data '%s'; HINT: resume with the same -b/-t)",
                 sB, sT, sshuffle, loader->B, loader->T, loader->shuffle, where);
        return 0;
    }
    unsigned long long shard_pos = state->words[3], window_pos = state->words[4];
    if (shard_pos >= loader->num_shards) {
        snprintf(msg, msg_size, "dataloader: the saved data position has shard %llu, expected < %zu (data '%s')",
                 shard_pos, loader->num_shards, where);
        return 0;
    }
    // the shard at that position depends on the stored seed and epoch: compute that epoch's order in
    // shard_order, which is then the order of the resumed run (or recomputed if the state is refused)
    dataloader_permutation(loader->shard_order, loader->num_shards, loader->shuffle,
                           dataloader_stream_seed(state->words[1], state->words[2], 0));
    size_t windows = loader->shard_windows[loader->shard_order[shard_pos]];
    if (window_pos > windows) {
        loader->order_epoch = ~0ULL;
        snprintf(msg, msg_size, "dataloader: the saved data position has window %llu, expected <= %zu (data '%s')",
                 window_pos, windows, where);
        return 0;
    }
    loader->seed = state->words[1];
    loader->next_epoch = state->words[2];
    loader->shard_pos = (size_t)shard_pos;
    loader->order_epoch = loader->next_epoch;
    loader->window_order_shard = SIZE_MAX;
    loader->window_pos = (size_t)window_pos;
    loader->epoch = loader->next_epoch;
    return 1;
}

#endif // DATALOADER_H
