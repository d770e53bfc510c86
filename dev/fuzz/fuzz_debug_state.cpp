/*
Fuzz target: a reference debug state (dev/FORMATS.md, magic 20240327 v3) through debug_state_load
(dev/test/debug_state.h), which test_gpt2_cpu and test_gpt2.cu read. Input: the whole file. An
accepted file's records are then used as the tests use them (found by name, compared).
*/
#include "../test/debug_state.h"
#include "fuzz_common.h"

#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string path = fuzz_write("input.bin", data, size);
    char msg[1024];
    msg[0] = '\0';
    DebugState s;
    if (debug_state_load(path.c_str(), &s, msg, sizeof(msg))) {
        FUZZ_CHECK(s.num_tensors >= 1 && s.tensors != NULL, "accepted %d records", s.num_tensors);
        size_t bytes = 1024;
        for (int n = 0; n < s.num_tensors; n++) {
            const DebugTensor* t = &s.tensors[n];
            FUZZ_CHECK(debug_state_find(&s, t->name) != NULL, "record '%s' not found by name", t->name);
            bytes += 96 + t->numel * (t->dtype == DEBUG_F64 ? 8 : 4);
            if (t->f != NULL) {
                std::vector<float> out(t->numel);
                for (size_t k = 0; k < t->numel; k++) { out[k] = (float)t->f[k]; }
                (void)rel_error(out.data(), t->f, t->numel);
                (void)rel_error_strided(out.data(), 1, t->f, t->numel, 1);
            } else {
                FUZZ_CHECK(t->i != NULL, "record '%s' has no values", t->name);
            }
        }
        FUZZ_CHECK(bytes == size, "accepted %zu bytes, the records take %zu", size, bytes);
        debug_state_free(&s);
    } else {
        fuzz_check_message(msg);
        FUZZ_CHECK(strstr(msg, path.c_str()) != NULL, "message does not name the file: %s", msg);
        FUZZ_CHECK(s.tensors == NULL && s.num_tensors == 0, "refused state still holds %d records", s.num_tensors);
    }
    return 0;
}
