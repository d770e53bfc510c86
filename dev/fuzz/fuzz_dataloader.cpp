/*
Fuzz target: token shards and the loader's saved position (dataloader.h): dataloader_check_shard,
dataloader_init on the fuzzed shard, dataloader_set_state with fuzzed DataLoaderState bytes, then
a few dataloader_next_batch calls.

Input: 4 control bytes, 64 state bytes, then the shard file.
  control[0] bit 0: two shards (the same file twice), bit 1: shuffle, bit 2: the state is this
             loader's own (dataloader_get_state) with seed, epoch and the two positions taken from
             the input (positions modulo a little more than their range), else the 64 bytes as they are
  control[1]: B - 1 (mod 4), control[2]: T - 1 (mod 64), control[3]: batches to load - 1 (mod 8)
Every batch must hold tokens of the shard; a refusal is one line.
*/
#include "../../dataloader.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 4 + 64) { return 0; }
    const int two_shards = data[0] & 1, shuffle = (data[0] >> 1) & 1, own_state = (data[0] >> 2) & 1;
    const size_t B = 1 + data[1] % 4, T = 1 + data[2] % 64;
    const int batches = 1 + data[3] % 8;
    DataLoaderState state;
    memcpy(&state, data + 4, sizeof(state));
    const uint8_t* shard = data + 4 + 64;
    const size_t shard_size = size - 4 - 64;
    const std::string path = fuzz_write("shard_000.bin", shard, shard_size);
    std::string pattern = path;
    if (two_shards) {
        fuzz_write("shard_001.bin", shard, shard_size);
        pattern = std::string(fuzz_dir()) + "/shard_*.bin";
    } else {
        unlink((std::string(fuzz_dir()) + "/shard_001.bin").c_str());
    }

    char msg[1024];
    msg[0] = '\0';
    const long long ntok = dataloader_check_shard(path.c_str(), B, T, msg, sizeof(msg));
    if (ntok < 0) { fuzz_check_message(msg); }

    DataLoader loader;
    msg[0] = '\0';
    const int ok = dataloader_init(&loader, pattern.c_str(), B, T, shuffle, 42, msg, sizeof(msg));
    FUZZ_CHECK(ok == (ntok >= 0), "dataloader_init %d but dataloader_check_shard %lld: %s", ok, ntok, msg);
    if (!ok) {
        fuzz_check_message(msg);
        return 0;
    }
    FUZZ_CHECK(loader.num_tokens == (size_t)ntok * (two_shards ? 2 : 1) && loader.num_batches >= loader.num_shards,
               "%zu tokens, %zu batches of %zu shards", loader.num_tokens, loader.num_batches, loader.num_shards);
    if (own_state) {
        DataLoaderState own;
        dataloader_get_state(&loader, &own);
        own.words[1] = state.words[1];
        own.words[2] = state.words[2];
        own.words[3] = state.words[3] % (loader.num_shards + 1);
        own.words[4] = state.words[4] % (loader.num_batches + 2);
        state = own;
    }
    msg[0] = '\0';
    if (!dataloader_set_state(&loader, &state, msg, sizeof(msg))) { fuzz_check_message(msg); }
    for (int b = 0; b < batches; b++) {
        dataloader_next_batch(&loader);
        // every input and target is a token of the shard, and targets are inputs shifted by one
        for (size_t i = 0; i < B * T; i++) {
            FUZZ_CHECK(loader.inputs[i] >= 0 && loader.inputs[i] < 65536, "token %d", loader.inputs[i]);
            if (i + 1 < B * T) { FUZZ_CHECK(loader.targets[i] == loader.inputs[i + 1], "target %zu is not input %zu", i, i + 1); }
        }
        // the batch is one window of the shard: B*T+1 tokens starting at a multiple of B*T
        bool found = false;
        for (size_t w = 0; !found && w < ((size_t)ntok - 1) / (B * T); w++) {
            found = true;
            for (size_t i = 0; found && i <= B * T; i++) {
                uint16_t tok;
                memcpy(&tok, shard + 1024 + 2 * (w * B * T + i), 2); // unaligned in the input
                found = (i < B * T ? loader.inputs[i] : loader.targets[B * T - 1]) == (int)tok;
            }
        }
        FUZZ_CHECK(found, "batch %d is not a window of the shard", b);
    }
    DataLoaderState after;
    dataloader_get_state(&loader, &after);
    msg[0] = '\0';
    FUZZ_CHECK(dataloader_set_state(&loader, &after, msg, sizeof(msg)), "own state refused: %s", msg);
    dataloader_free(&loader);
    return 0;
}
