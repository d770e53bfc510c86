/*
Fuzz target: a training state file (state_%08d.bin, dev/FORMATS.md) through state_inspect
(dev/trainer/train_common.h), the check both trainers run before resuming, then state_check_values (its
moments and master weights). The model it must fit is
fixed: standard, n_layer 1, n_head 1, n_embd 4, T 4, vocab 8/8 (300 parameters; the seeds of
make_seeds.py are states of this model). Input: the whole file.
*/
#define PRECISION_NAME "fp32"
#define PRECISION_IS_BF16 0
#define TRAIN_COMMON_CUDA 0
#include "../trainer/train_common.h"
static int trainer_shape_check(const TrainArgs* a, char* msg, size_t msg_size) { return 1; }

#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const GPT2Config config = gpt2_config_default(1, 1, 4, 4, 8, 8);
    const std::string path = fuzz_write("input.bin", data, size);
    char msg[1024];
    msg[0] = '\0';
    TrainState st;
    memset(&st, 0, sizeof(st));
    if (state_inspect(path.c_str(), &config, &st, msg, sizeof(msg))) {
        // what the trainer then relies on
        FUZZ_CHECK(st.step >= 0 && st.B >= 1 && st.T >= 1 && st.grad_accum_steps >= 1 && (st.has_master == 0 || st.has_master == 1),
                   "accepted state with step %d B %d T %d accumulation %d master %d", st.step, st.B, st.T,
                   st.grad_accum_steps, st.has_master);
        FUZZ_CHECK((long long)size == 1024 + 64 + (long long)gpt2_num_parameters(&config) * 4 * (2 + st.has_master),
                   "accepted a state file of %zu bytes", size);
        // a recorded schedule that resume_schedule_check and learning_rate can compute with
        const OptimizerSchedule* o = &st.schedule;
        FUZZ_CHECK(!st.has_schedule || (o->num_steps >= st.step && o->warmup >= 0 && isfinite(o->lr) &&
                                        isfinite(o->final_frac) && isfinite(o->weight_decay) && isfinite(o->beta1) &&
                                        isfinite(o->beta2) && isfinite(o->eps) && isfinite(o->grad_clip)),
                   "accepted a schedule of %d steps at step %d, warmup %d, lr %g", o->num_steps, st.step, o->warmup,
                   (double)o->lr);
        // then the values (unless --allow_nonfinite 1): accepted means every moment finite, every
        // second moment >= 0, every master weight finite and within +-WEIGHT_ABS_MAX
        if (state_check_values(path.c_str(), &config, &st, msg, sizeof(msg))) {
            const uint8_t* values = data + 1024 + 64;
            const size_t np = gpt2_num_parameters(&config);
            for (size_t i = 0; i < np * (2 + st.has_master); i++) {
                float x;
                memcpy(&x, values + 4 * i, sizeof(x));
                const int ok = i < np ? isfinite(x) : i < 2 * np ? isfinite(x) && x >= 0.0f : fabsf(x) <= WEIGHT_ABS_MAX;
                FUZZ_CHECK(ok, "accepted a state whose value %zu is %g", i, (double)x);
            }
        } else {
            fuzz_check_message(msg);
            FUZZ_CHECK(strstr(msg, path.c_str()) != NULL, "message does not name the file: %s", msg);
        }
    } else {
        fuzz_check_message(msg);
        FUZZ_CHECK(strstr(msg, path.c_str()) != NULL, "message does not name the file: %s", msg);
    }
    return 0;
}
