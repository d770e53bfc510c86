/*
bench_cpu.cpp: how fast the CPU trainer (train_gpt2_cpu.cpp) trains, without a checkpoint or data.

  make build/bench_cpu && OMP_NUM_THREADS=2 ./build/bench_cpu [-L 4] [-C 128] [-H 4] [-T 128] [-B 8]
                                                              [-V 50257] [-Vp 50304] [-n 3]

Builds a standard-scheme GPT-2 of that shape in memory (small random weights, LayerNorm gains 1,
biases 0), then times n training steps on random tokens: forward + zero_grad + backward + AdamW
update, and prints ms per step and tokens/s. Then a breakdown: each layer function called alone on
buffers of the step's shapes, as many times as one step calls it, so the rows add up to roughly
the step (they do not include the drivers' bookkeeping).
*/
#define TESTING
#include "train_gpt2_cpu.cpp"

#include <chrono>

static double now_s(void) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

static unsigned long long bench_rng = 42;
static float bench_uniform(void) { // xorshift64*, in [-1, 1)
    bench_rng ^= bench_rng >> 12;
    bench_rng ^= bench_rng << 25;
    bench_rng ^= bench_rng >> 27;
    return (float)((bench_rng * 2685821657736338717ULL) >> 40) / (float)(1 << 23) - 1.0f;
}
static void fill(float* p, size_t n, float scale) { for (size_t i = 0; i < n; i++) { p[i] = scale * bench_uniform(); } }
static float* rand_buffer(size_t n, float scale) {
    float* p = (float*)mallocCheck(n * sizeof(float));
    fill(p, n, scale);
    return p;
}

// gpt2_build_from_checkpoint without the file: random weights of the given shape
static void bench_build(GPT2* model, const GPT2Config* c) {
    gpt2_init_empty(model);
    model->config = *c;
    model->layout = qkv_layout(c);
    model->attn_scale = gpt2_attn_scale(c);
    model->num_parameters = fill_param_sizes(c, model->param_sizes);
    model->params_memory = (float*)mallocCheck(model->num_parameters * sizeof(float));
    point_parameters(&model->params, model->params_memory, model->param_sizes);
    float* it = model->params_memory;
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
        const char* name = param_tensor_names[i];
        const int is_gain = strstr(name, "ln") != NULL && name[strlen(name) - 1] == 'w'; // ln1w, ln2w, lnfw, ...
        const int is_bias = name[strlen(name) - 1] == 'b';
        for (size_t j = 0; j < model->param_sizes[i]; j++) {
            it[j] = is_gain ? 1.0f : is_bias ? 0.0f : 0.02f * bench_uniform();
        }
        it += model->param_sizes[i];
    }
}

typedef struct {
    const char* name;
    double seconds; // per step
} Row;

int main(int argc, char** argv) {
    int L = 4, C = 128, H = 4, T = 128, B = 8, V = 50257, Vp = 50304, steps = 3;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char* f = argv[i];
        const int x = atoi(argv[i + 1]);
        if (strcmp(f, "-L") == 0) { L = x; } else if (strcmp(f, "-C") == 0) { C = x; }
        else if (strcmp(f, "-H") == 0) { H = x; } else if (strcmp(f, "-T") == 0) { T = x; }
        else if (strcmp(f, "-B") == 0) { B = x; } else if (strcmp(f, "-V") == 0) { V = x; }
        else if (strcmp(f, "-Vp") == 0) { Vp = x; } else if (strcmp(f, "-n") == 0) { steps = x; }
        else { fprintf(stderr, "usage: %s [-L n] [-C n] [-H n] [-T n] [-B n] [-V n] [-Vp n] [-n steps]\n", argv[0]); return 1; }
    }
    GPT2Config c = gpt2_config_default(L, H, C, T, V, Vp);
    GPT2 model;
    bench_build(&model, &c);
    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    char desc[256];
    gpt2_config_describe(&c, desc, sizeof(desc));
    printf("bench_cpu: %s B=%d T=%d, %zu parameters, %d OpenMP thread(s)\n", desc, B, T, model.num_parameters, threads);

    const size_t BT = (size_t)B * T;
    int* inputs = (int*)mallocCheck(BT * sizeof(int));
    int* targets = (int*)mallocCheck(BT * sizeof(int));
    for (size_t i = 0; i < BT; i++) {
        inputs[i] = (int)((bench_uniform() + 1.0f) * 0.5f * (V - 1));
        targets[i] = (int)((bench_uniform() + 1.0f) * 0.5f * (V - 1));
    }
    char msg[512];
    double best = 1e30, total = 0.0;
    for (int s = 0; s <= steps; s++) { // step 0 allocates: a warm-up, not counted
        const double t0 = now_s();
        if (!gpt2_forward(&model, inputs, targets, B, T, msg, sizeof(msg))) { fprintf(stderr, "error: %s\n", msg); return 1; }
        gpt2_zero_grad(&model);
        if (!gpt2_backward(&model, msg, sizeof(msg))) { fprintf(stderr, "error: %s\n", msg); return 1; }
        gpt2_update(&model, 1e-4f, 0.9f, 0.95f, 1e-8f, 0.0f, 1.0f, s + 1);
        const double dt = now_s() - t0;
        if (s > 0) {
            total += dt;
            if (dt < best) { best = dt; }
            printf("  step %d: loss %.4f, %.1f ms\n", s, model.mean_loss, dt * 1e3);
        }
    }
    if (steps > 0) {
        printf("step: mean %.1f ms, best %.1f ms; %.0f tokens/s (mean), %.0f tokens/s (best)\n", total / steps * 1e3,
               best * 1e3, BT * steps / total, BT / best);
    }

    // breakdown: each layer function on buffers of the step's shapes, times the calls per step
    const size_t M = (size_t)c.mlp_hidden, W = (size_t)model.layout.width;
    const size_t maxw = M > W ? M : W;
    float* x = rand_buffer(BT * maxw, 1.0f);
    float* y = rand_buffer(BT * maxw, 1.0f);
    float* dx = rand_buffer(BT * maxw, 1.0f);
    float* dy = rand_buffer(BT * maxw, 1e-3f);
    float* w = rand_buffer((size_t)Vp * C > maxw * C ? (size_t)Vp * C : maxw * C, 0.02f);
    float* dw = rand_buffer((size_t)Vp * C > maxw * C ? (size_t)Vp * C : maxw * C, 0.0f);
    float* bias = rand_buffer(maxw, 0.0f);
    float* dbias = rand_buffer(maxw, 0.0f);
    float* logits = rand_buffer(BT * Vp, 3.0f);
    float* probs = rand_buffer(BT * Vp, 0.0f);
    float* dlogits = rand_buffer(BT * Vp, 0.0f);
    float* stats = rand_buffer(BT * 2, 0.0f);
    float* att = rand_buffer((size_t)B * H * T * T, 0.0f);
    float* lse = rand_buffer((size_t)B * H * T, 0.0f);
    float* losses = rand_buffer(BT, 0.0f);
    for (size_t i = 0; i < BT; i++) { stats[i] = 0.0f; stats[BT + i] = 1.0f; losses[i] = 1.0f / BT; }
    const float* ones = bias; // any (C) weight will do
    // q, k, v of a standard layer: column ranges of the projection y (B*T, width); dq, dk, dv: those of dx
    auto role = [&](int r, float* proj) {
        return qkv_role_view(&model.layout, r, C / H, qkv_sources<float>(proj, x, NULL));
    };
    const QKVView<float> q = role(0, y), k = role(1, y), v = role(2, y);
    const QKVView<float> dq = role(0, dx), dk = role(1, dx), dv = role(2, dx);
    const int N = (int)BT;
    const float scale = model.attn_scale;
    Row rows[32];
    int nrows = 0;
    auto timeit = [&](const char* name, int calls_per_step, auto fn) {
        fn(); // warm-up
        int reps = 0;
        const double t0 = now_s();
        double dt = 0.0;
        do { fn(); reps++; dt = now_s() - t0; } while (dt < 0.2 && reps < 1000);
        rows[nrows].name = name;
        rows[nrows].seconds = dt / reps * calls_per_step;
        nrows++;
    };
    timeit("encoder fwd", 1, [&] { encoder_forward(x, inputs, model.params.wte, model.params.wpe, B, T, C); });
    timeit("layernorm fwd", 2 * L + 1, [&] { layernorm_forward(y, stats, stats + BT, x, ones, bias, N, C); });
    timeit("matmul fwd qkv", L, [&] { matmul_forward(y, x, w, bias, N, C, (int)W); });
    timeit("attention fwd", L, [&] { attention_forward(x, att, q, k, v, B, T, C, H, H, scale, lse); });
    timeit("matmul fwd attproj", L, [&] { matmul_forward(y, x, w, bias, N, C, C); });
    timeit("matmul fwd fc", L, [&] { matmul_forward(y, x, w, bias, N, C, (int)M); });
    timeit("gelu fwd", L, [&] { gelu_forward(y, x, BT * M); });
    timeit("matmul fwd fcproj", L, [&] { matmul_forward(y, x, w, bias, N, (int)M, C); });
    timeit("residual fwd", 2 * L, [&] { residual_forward(y, x, dx, BT * C); });
    timeit("matmul fwd lm_head", 1, [&] { matmul_forward(logits, x, w, NULL, N, C, Vp); });
    timeit("softmax fwd", 1, [&] { softmax_forward(probs, logits, N, V, Vp); });
    timeit("crossentropy fwd", 1, [&] { crossentropy_forward(losses + 0, logits, targets, N, V, Vp); });
    for (size_t i = 0; i < BT; i++) { losses[i] = 1.0f / BT; }
    timeit("crossentropy bwd", 1, [&] { crossentropy_softmax_backward(dlogits, losses, probs, targets, N, V, Vp); });
    timeit("matmul bwd lm_head", 1, [&] { matmul_backward(dx, dw, NULL, dlogits, x, w, N, C, Vp); });
    timeit("layernorm bwd", 2 * L + 1, [&] { layernorm_backward(dx, dbias, dbias, dy, x, ones, stats, stats + BT, N, C); });
    timeit("matmul bwd fcproj", L, [&] { matmul_backward(dx, dw, dbias, dy, x, w, N, (int)M, C); });
    timeit("gelu bwd", L, [&] { gelu_backward(dx, x, dy, BT * M); });
    timeit("matmul bwd fc", L, [&] { matmul_backward(dx, dw, dbias, dy, x, w, N, C, (int)M); });
    timeit("matmul bwd attproj", L, [&] { matmul_backward(dx, dw, dbias, dy, x, w, N, C, C); });
    timeit("attention bwd", L, [&] { attention_backward(dq, dk, dv, dy, q, k, v, att, B, T, C, H, H, scale); });
    timeit("matmul bwd qkv", L, [&] { matmul_backward(dx, dw, dbias, dy, x, w, N, C, (int)W); });
    timeit("residual bwd", 2 * L, [&] { residual_backward(dx, dy, y, BT * C); });
    timeit("encoder bwd", 1, [&] { encoder_backward(dw, dw, dy, inputs, B, T, C); });
    timeit("zero_grad + update", 1, [&] {
        gpt2_zero_grad(&model);
        gpt2_update(&model, 1e-4f, 0.9f, 0.95f, 1e-8f, 0.0f, 1.0f, 10);
    });
    double sum = 0.0;
    for (int i = 0; i < nrows; i++) { sum += rows[i].seconds; }
    printf("breakdown (each function alone x its calls per step; sum %.1f ms):\n", sum * 1e3);
    // grouped by kind
    const char* kinds[] = {"matmul fwd", "matmul bwd", "attention", "softmax", "crossentropy", "layernorm", "gelu",
                           "residual", "encoder", "zero_grad"};
    for (size_t k2 = 0; k2 < sizeof(kinds) / sizeof(kinds[0]); k2++) {
        double s = 0.0;
        for (int i = 0; i < nrows; i++) { if (strncmp(rows[i].name, kinds[k2], strlen(kinds[k2])) == 0) { s += rows[i].seconds; } }
        printf("  %-14s %8.1f ms  %5.1f%%\n", kinds[k2], s * 1e3, 100.0 * s / sum);
    }
    printf("per function:\n");
    for (int i = 0; i < nrows; i++) { printf("  %-20s %8.2f ms\n", rows[i].name, rows[i].seconds * 1e3); }
    gpt2_free(&model);
    return 0;
}
