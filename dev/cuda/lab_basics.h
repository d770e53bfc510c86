/*
lab_basics.h: what every kernel lab shares, whichever common header it uses (attention_lab_common.h
for the attention labs, lab_common.h for the others): the binary's precision suffix, the seeded
random numbers, the poison byte and how to count what is still poisoned, the L2-flushed median
timer with the H100 rates the predicted bounds are stated against, and the closing verdict.

Include it after train_gpt2.cu (under TESTING): it uses the trainer's cudaCheck and device_malloc.
*/
#ifndef LAB_BASICS_H
#define LAB_BASICS_H

#include <algorithm>
#include <vector>

#if PRECISION_IS_BF16
#define LAB_SUFFIX ""
#else
#define LAB_SUFFIX "_fp32"
#endif

// ----------------------------------------------------------------------------
// random numbers: splitmix64, so that a trial's inputs depend on (seed, shape) alone

static unsigned long long lab_mix64(unsigned long long z) {
    z += 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static double lab_uniform(unsigned long long* state) { // in (0, 1)
    *state = lab_mix64(*state);
    return ((double)(*state >> 11) + 0.5) / 9007199254740992.0;
}

// ----------------------------------------------------------------------------
// poison: outputs and scratch are filled with 0xFF before a run (NaN in fp32 and in bf16)

#define LAB_POISON 0xFF

static size_t lab_count_poison_bytes(const unsigned char* p, size_t n) {
    size_t c = 0;
    for (size_t i = 0; i < n; i++) { c += p[i] == LAB_POISON; }
    return c;
}

// elements of elem_bytes still all 0xFF: never written
static size_t lab_count_unwritten(const std::vector<unsigned char>& h, size_t elem_bytes) {
    size_t c = 0;
    for (size_t i = 0; i + elem_bytes <= h.size(); i += elem_bytes) { c += lab_count_poison_bytes(&h[i], elem_bytes) == elem_bytes; }
    return c;
}

// ----------------------------------------------------------------------------
// a lab's last line (after --check; nothing after --bench alone) and its exit status: 1 on a FAIL
static int lab_verdict(const char* name, int checked, int failed) {
    if (checked) { printf("%s: %s\n", name, failed ? "FAIL (see the FAIL lines)" : "every check passed"); }
    return failed ? 1 : 0;
}

// timing: median of reps runs, each after a memset of twice the L2 (so every run reads from DRAM),
// CUDA events around the run alone

#define LAB_BENCH_REPS 25
static const double LAB_PEAK_FLOPS = 790e12; // H100 dense bf16 tensor cores (the trainer's MFU peak)
static const double LAB_PEAK_BYTES = 3e12;   // H100 HBM3

typedef struct {
    void* flush;
    size_t flush_bytes;
    cudaEvent_t start, stop;
} LabTimer;

static void lab_timer_init(LabTimer* t) {
    int l2 = 0;
    cudaCheck(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
    t->flush_bytes = (size_t)(l2 > 0 ? l2 : (50 << 20)) * 2;
    t->flush = device_malloc(t->flush_bytes, "L2 flush buffer");
    cudaCheck(cudaEventCreate(&t->start));
    cudaCheck(cudaEventCreate(&t->stop));
}

static void lab_timer_free(LabTimer* t) {
    cudaCheck(cudaFree(t->flush));
    cudaCheck(cudaEventDestroy(t->start));
    cudaCheck(cudaEventDestroy(t->stop));
}

// two warm-up runs first (lazy module loading, cuBLASLt's heuristic, first-touch of the buffers)
template <typename F>
static double lab_time_median_ms(LabTimer* t, int reps, F fn) {
    for (int i = 0; i < 2; i++) { fn(); }
    cudaCheck(cudaDeviceSynchronize());
    std::vector<float> ms(reps);
    for (int i = 0; i < reps; i++) {
        cudaCheck(cudaMemset(t->flush, i & 0xFF, t->flush_bytes));
        cudaCheck(cudaEventRecord(t->start));
        fn();
        cudaCheck(cudaEventRecord(t->stop));
        cudaCheck(cudaEventSynchronize(t->stop));
        cudaCheck(cudaEventElapsedTime(&ms[i], t->start, t->stop));
    }
    std::sort(ms.begin(), ms.end());
    return reps % 2 ? ms[reps / 2] : 0.5 * (ms[reps / 2 - 1] + ms[reps / 2]);
}

#endif // LAB_BASICS_H
