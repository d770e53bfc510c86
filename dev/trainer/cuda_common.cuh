/*
dev/trainer/cuda_common.cuh: the CUDA trainer's host-side utilities, included by train_gpt2.cu right
after its precision (floatX): error checks that name their call site, allocations that say what ran
out, host bf16 <-> float conversion, and launch sizes.
*/
#ifndef DEV_TRAINER_CUDA_COMMON_CUH
#define DEV_TRAINER_CUDA_COMMON_CUH

// ----------------------------------------------------------------------------
// error checking: one line naming the call site, then exit

static void cuda_check(cudaError_t err, const char* file, int line) {
    if (err != cudaSuccess) {
        fprintf(stderr, "error: CUDA error at %s:%d: %s\n", file, line, cudaGetErrorString(err));
        exit(EXIT_FAILURE);
    }
}
#define cudaCheck(err) (cuda_check((err), __FILE__, __LINE__))

static void cublas_check(cublasStatus_t status, const char* file, int line) {
    if (status != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "error: cuBLASLt error %d at %s:%d\n", (int)status, file, line);
        exit(EXIT_FAILURE);
    }
}
#define cublasCheck(status) (cublas_check((status), __FILE__, __LINE__))

// With CUDA_SYNC_CHECK=1 in the environment every kernel launch and cuBLASLt call is followed by a
// device synchronization, so that an error in the kernel's execution (an illegal address, ...) names
// its own call site instead of a later one. Off by default (it serializes the host with the GPU).
static int sync_check_enabled(void) {
    static int enabled = -1;
    if (enabled < 0) {
        const char* e = getenv("CUDA_SYNC_CHECK");
        enabled = e != NULL && e[0] == '1';
    }
    return enabled;
}
#define debugSync() do { if (sync_check_enabled()) { cudaCheck(cudaDeviceSynchronize()); } } while (0)
// a kernel launch is checked right away so that a bad configuration names its call site
#define launchCheck() do { cudaCheck(cudaGetLastError()); debugSync(); } while (0)

// ----------------------------------------------------------------------------
// allocations, and launch sizes

static void* host_malloc(size_t bytes, const char* what) {
    void* p = malloc(bytes > 0 ? bytes : 1);
    if (p == NULL) {
        fprintf(stderr, "error: out of host memory allocating %zu bytes for %s\n", bytes, what);
        exit(EXIT_FAILURE);
    }
    return p;
}

static void* device_malloc(size_t bytes, const char* what) {
    void* p = NULL;
    cudaError_t err = cudaMalloc(&p, bytes > 0 ? bytes : 1);
    if (err != cudaSuccess) {
        size_t free_b = 0, total_b = 0;
        cudaGetLastError(); // clear the sticky-free allocation error
        cudaMemGetInfo(&free_b, &total_b);
        fprintf(stderr, "error: out of GPU memory allocating %.1f MiB for %s (%.1f MiB free of %.1f MiB; "
                "HINT: lower -b, or recompute with -r 1 or -r 2)\n", bytes / 1048576.0, what, free_b / 1048576.0, total_b / 1048576.0);
        exit(EXIT_FAILURE);
    }
    return p;
}

// layer l's slice of a stacked (L, ...) tensor, NULL for an absent one
template <typename S>
static inline S* lslice(S* base, int l, size_t per_layer) { return base != NULL ? base + (size_t)l * per_layer : NULL; }

// grid size for an elementwise kernel with a grid-stride loop
static unsigned int grid_for(size_t n, int block) {
    size_t g = (n + (size_t)block - 1) / (size_t)block;
    if (g < 1) { g = 1; }
    if (g > 65536u * 8u) { g = 65536u * 8u; }
    return (unsigned int)g;
}

// ----------------------------------------------------------------------------
// host-side bfloat16 <-> float, round to nearest even like the reference's to_bf16_bits
#if PRECISION_IS_BF16
static inline uint16_t host_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x007FFFFFu) != 0) { return (uint16_t)((u >> 16) | 0x40); } // keep NaN a NaN
    u = u + 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
#endif
static inline float host_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
// n floats -> n floatX values at dst (host memory laid out as the device's floatX)
static void host_floats_to_x(void* dst, const float* src, size_t n) {
#if PRECISION_IS_BF16
    uint16_t* d = (uint16_t*)dst;
    for (size_t i = 0; i < n; i++) { d[i] = host_f32_to_bf16(src[i]); }
#else
    memcpy(dst, src, n * sizeof(float));
#endif
}
static void host_x_to_floats(float* dst, const void* src, size_t n) {
#if PRECISION_IS_BF16
    const uint16_t* s = (const uint16_t*)src;
    for (size_t i = 0; i < n; i++) { dst[i] = host_bf16_to_f32(s[i]); }
#else
    memcpy(dst, src, n * sizeof(float));
#endif
}

#endif // DEV_TRAINER_CUDA_COMMON_CUH
