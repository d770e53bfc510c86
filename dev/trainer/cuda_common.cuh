/*
dev/trainer/cuda_common.cuh: the utilities under every kernel of the CUDA trainer, as llm.c keeps
them in llmc/cuda_common.h and cuda_utils.cuh; included by train_gpt2.cu right after its precision
(floatX). On the host: error checks that name their call site, allocations that say what ran out,
launch sizes, bf16 <-> float. On the device: warp and block reductions, 16-byte packed loads.
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

// ----------------------------------------------------------------------------
// reductions (fixed order: every kernel here is deterministic; the one atomic is a ticket counter
// that picks which block finishes a reduction, never the order of a sum)

__device__ __forceinline__ float warp_sum(float v) {
    for (int off = 16; off > 0; off >>= 1) { v += __shfl_xor_sync(0xFFFFFFFFu, v, off); }
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int off = 16; off > 0; off >>= 1) { v = fmaxf(v, __shfl_xor_sync(0xFFFFFFFFu, v, off)); }
    return v;
}
// sum (or max, kMax) over the block (blockDim.x a multiple of 32, at most 1024); every thread gets
// the result
template <bool kMax>
__device__ float block_reduce(float v, float* shared32) {
    __syncthreads(); // shared32 may still be read by a previous call
    v = kMax ? warp_max(v) : warp_sum(v);
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
    if (lane == 0) { shared32[warp] = v; }
    __syncthreads();
    const float t = lane < nwarps ? shared32[lane] : kMax ? -INFINITY : 0.0f;
    return kMax ? warp_max(t) : warp_sum(t);
}
__device__ float block_sum(float v, float* shared32) { return block_reduce<false>(v, shared32); }
__device__ float block_max(float v, float* shared32) { return block_reduce<true>(v, shared32); }

// ----------------------------------------------------------------------------
// 16-byte packed loads and stores. A warp moving 2-byte elements one per thread issues 64-byte
// transactions; moving x128 (8 bf16, or 4 fp32 in FP32 builds) per thread it issues 512-byte ones,
// which is what it takes to get near the memory bandwidth. Kernels using them need the element
// count of a row (C, M, Vp) to be a multiple of x128::size and 16-byte aligned rows, which
// train_args_resolve and the launchers check.

template <class Element>
struct alignas(16) Packed128 {
    static constexpr int size = 16 / (int)sizeof(Element);
    Element v[size];
    __device__ __forceinline__ Element& operator[](int i) { return v[i]; }
    __device__ __forceinline__ const Element& operator[](int i) const { return v[i]; }
};
typedef Packed128<floatX> x128;
typedef Packed128<float> f128;

template <class Element>
__device__ __forceinline__ Packed128<Element> load128(const Element* p) {
    return *reinterpret_cast<const Packed128<Element>*>(p);
}
template <class Element>
__device__ __forceinline__ void store128(Element* p, const Packed128<Element>& value) {
    *reinterpret_cast<Packed128<Element>*>(p) = value;
}
// 16 bytes that a load intrinsic returned as an int4, as a Packed128
template <class Element>
__device__ __forceinline__ Packed128<Element> packed128_of(int4 bits) {
    Packed128<Element> out;
    memcpy(&out, &bits, sizeof(bits));
    return out;
}
// a value read once by the whole step (logits, the MLP's hidden layer): streamed past the caches
template <class Element>
__device__ __forceinline__ Packed128<Element> load128cs(const Element* p) {
    return packed128_of<Element>(__ldcs(reinterpret_cast<const int4*>(p)));
}
template <class Element>
__device__ __forceinline__ void store128cs(Element* p, const Packed128<Element>& value) {
    int4 bits;
    memcpy(&bits, &value, sizeof(bits));
    __stcs(reinterpret_cast<int4*>(p), bits);
}
// read through L2 only: data written by other blocks of the same launch (L1 is not coherent)
template <class Element>
__device__ __forceinline__ Packed128<Element> load128cg(const Element* p) {
    return packed128_of<Element>(__ldcg(reinterpret_cast<const int4*>(p)));
}

#endif // DEV_TRAINER_CUDA_COMMON_CUH
