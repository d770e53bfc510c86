/*
dev/trainer/profile.cuh: the CUDA trainer's --profile (a cudaEvent per sublayer mark, charged to its row)
and the GPU's dense peak FLOP/s by name, which each step line's MFU divides by. Included by
train_gpt2.cu among its utilities, before the first kernel that marks a row.
*/
#ifndef DEV_TRAINER_PROFILE_CUH
#define DEV_TRAINER_PROFILE_CUH

// ----------------------------------------------------------------------------
// --profile (dev/trainer/profile.h). During a profiled training step each profile_mark records a cudaEvent
// in stream order; the GPU time since the previous event is charged to the mark's row, so the rows
// partition the step. profile_step_end waits for the step's last event and adds the intervals up:
// one wait per profiled step, which the step's own closing synchronization already makes. Outside a
// profiled step, and in every run without --profile, a mark is one test of a flag.

static ProfileTotals g_profile;
static int g_profile_active = 0;
static std::vector<cudaEvent_t> g_profile_events; // reused step after step; [0] is the step's start
static std::vector<int> g_profile_rows;           // the row each event closes
static size_t g_profile_count = 0;                // events recorded in this step

static void profile_record(int row) {
    if (g_profile_count == g_profile_events.size()) {
        cudaEvent_t e;
        cudaCheck(cudaEventCreate(&e));
        g_profile_events.push_back(e);
        g_profile_rows.push_back(row);
    }
    g_profile_rows[g_profile_count] = row;
    cudaCheck(cudaEventRecord(g_profile_events[g_profile_count], 0));
    g_profile_count++;
}

static void profile_mark(int row) {
    if (g_profile_active) { profile_record(row); }
}

static void profile_step_begin(void) {
    g_profile_active = 1;
    g_profile_count = 0;
    profile_record(-1);
}

static void profile_step_end(double step_seconds) {
    g_profile_active = 0;
    cudaCheck(cudaEventSynchronize(g_profile_events[g_profile_count - 1]));
    for (size_t i = 1; i < g_profile_count; i++) {
        float ms = 0.0f;
        cudaCheck(cudaEventElapsedTime(&ms, g_profile_events[i - 1], g_profile_events[i]));
        g_profile.seconds[g_profile_rows[i]] += 1e-3 * ms;
        g_profile.marks[g_profile_rows[i]]++;
    }
    g_profile.steps++;
    g_profile.step_seconds += step_seconds;
}

static void profile_free(void) {
    for (cudaEvent_t e : g_profile_events) { cudaCheck(cudaEventDestroy(e)); }
    g_profile_events.clear();
    g_profile_rows.clear();
}

// ----------------------------------------------------------------------------
// MFU: dense peak FLOP/s by GPU name (bf16 tensor cores; fp32 builds: plain fp32, TF32 is off)

// Beside the datasheet's peak: the dense bf16 matmul rate measured on this project's H100 and H200
// (cuBLASLt, large square GEMMs), the ceiling a training step can actually approach. Printed as a
// second fraction on every step line.
#define MEASURED_MATMUL_PEAK 790.0e12

typedef struct { const char* name; double bf16; double fp32; } GpuPeak;
// first match wins: the more specific names come first (GH200 before H200, H100 PCIe before H100)
static const GpuPeak gpu_peaks[] = {
    {"GH200", 989.4e12, 66.9e12},
    {"H200 NVL", 835.0e12, 60.0e12},
    {"H200", 989.4e12, 66.9e12},
    {"H100 PCIe", 756.0e12, 51.2e12},
    {"H100 NVL", 835.0e12, 60.0e12},
    {"H100", 989.4e12, 66.9e12},
    {"H800", 989.4e12, 66.9e12},
    {"A100", 312.0e12, 19.5e12},
    {"A800", 312.0e12, 19.5e12},
    {"L40S", 362.0e12, 91.6e12},
    {"L40", 181.0e12, 90.5e12},
    {"L4", 121.0e12, 30.3e12},
    {"A10G", 70.0e12, 31.2e12},
    {"A10", 125.0e12, 31.2e12},
    {"RTX 4090", 165.2e12, 82.6e12},
    {"RTX 3090", 71.0e12, 35.6e12},
};

// peak FLOP/s of this device for this build's precision, or 0 when the GPU is not in the table
static double gpu_peak_flops(const char* device_name) {
    for (size_t i = 0; i < sizeof(gpu_peaks) / sizeof(gpu_peaks[0]); i++) {
        if (strstr(device_name, gpu_peaks[i].name) != NULL) { return PRECISION_IS_BF16 ? gpu_peaks[i].bf16 : gpu_peaks[i].fp32; }
    }
    return 0.0;
}

#endif // DEV_TRAINER_PROFILE_CUH
