/*
Fuzz target: a model checkpoint (dev/FORMATS.md) through checkpoint_inspect (dev/trainer/train_common.h,
what both trainers run before reading weights) and, for every scheme in this one binary,
gpt2_config_from_header + checkpoint_validate_shape (attention_variants.cuh).

Input: the first 1024 bytes are the header; the next 8 (little-endian) the file size, so that the
size check can be reached for any shape without gigabyte inputs: the file is the header made
sparse up to that size (mod 2^36). An input shorter than 1032 bytes is the whole file (the
truncated-header path). A file that passes must then be usable: its derived sizes (layout,
parameter count, KV cache, training memory) are computed, and must agree with the file size.
*/
#define PRECISION_NAME "fp32"
#define PRECISION_IS_BF16 0
#define TRAIN_COMMON_CUDA 0
#include "../trainer/train_common.h"
#include "../trainer/training_memory.h"
static int trainer_shape_check(const TrainArgs* a, char* msg, size_t msg_size) { return 1; }

#include "fuzz_common.h"

// what a trainer computes from an accepted config: must not overflow (UBSan) and must agree with
// the file size checkpoint_validate accepted
static void use_config(const GPT2Config* c, int version, long long file_size) {
    char msg[512];
    FUZZ_CHECK(gpt2_config_check(c, msg, sizeof(msg)), "accepted config fails gpt2_config_check: %s", msg);
    const size_t np = gpt2_num_parameters(c);
    const long long elem = checkpoint_version_is_bf16(version) ? 2 : 4;
    FUZZ_CHECK(file_size == 1024 + (long long)np * elem, "accepted file of %lld bytes for %zu parameters", file_size, np);
    const QKVLayout L = qkv_layout(c);
    FUZZ_CHECK(L.width >= 0 && L.q.channels > 0 && L.k.channels > 0 && L.v.channels > 0, "bad layout width %d", L.width);
    (void)qkv_kv_cache_bytes_per_token(c);
    (void)gpt2_flops_per_token(c, c->max_seq_len);
    (void)gpt2_attn_scale(c);
    TrainingMemory m;
    gpt2_training_memory(c, 1, c->max_seq_len < 64 ? c->max_seq_len : 64, 2, 1, 0, 1, &m);
    gpt2_training_memory(c, 1, c->max_seq_len < 64 ? c->max_seq_len : 64, 4, 0, 2, 0, &m);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string path;
    long long file_size;
    int header[256];
    memset(header, 0, sizeof(header));
    if (size < 1032) {
        path = fuzz_write("input.bin", data, size);
        file_size = (long long)size;
        memcpy(header, data, size < 1024 ? size : 1024);
    } else {
        memcpy(header, data, 1024);
        file_size = (long long)(fuzz_le64(data + 1024) & ((1ULL << 36) - 1));
        path = fuzz_write("input.bin", data, file_size < 1024 ? (size_t)file_size : 1024);
        if (file_size > 1024 && truncate(path.c_str(), (off_t)file_size) != 0) { return 0; } // no room: not a finding
    }

    // the trainers' path: this binary is built for the standard scheme
    char msg[1024];
    msg[0] = '\0';
    GPT2Config c;
    int version = 0;
    if (checkpoint_inspect(path.c_str(), -1.0f, &c, &version, msg, sizeof(msg))) {
        FUZZ_CHECK(c.scheme == kQKVScheme, "accepted a checkpoint of scheme %d", c.scheme);
        use_config(&c, version, file_size);
    } else {
        fuzz_check_message(msg);
        FUZZ_CHECK(strstr(msg, path.c_str()) != NULL, "message does not name the file: %s", msg);
    }

    // every scheme's shape and size checks, as a binary built for that scheme runs them
    if (size >= 1024) {
        msg[0] = '\0';
        if (gpt2_config_from_header(header, path.c_str(), &c, msg, sizeof(msg))) {
            if (checkpoint_validate_shape(header, file_size, path.c_str(), &c, msg, sizeof(msg))) {
                use_config(&c, header[1], file_size);
            } else {
                fuzz_check_message(msg);
                FUZZ_CHECK(strstr(msg, path.c_str()) != NULL, "message does not name the file: %s", msg);
            }
        } else {
            fuzz_check_message(msg);
        }
    }
    return 0;
}
