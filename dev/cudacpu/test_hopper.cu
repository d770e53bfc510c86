/*
test_hopper.cu: Hopper's asynchronous instructions as the CPU runtime models them (dev/cudacpu/hopper.h),
checked against host arithmetic on the CPU runtime (make build/cudacpu/test_hopper) and on an H100 or
H200 (make build/test_hopper, sm_90a): the same source, the same expectations, so that a GPU run checks
the model itself.

  tma       cp.async.bulk.tensor 2d and 3d loads through tensor maps from cuTensorMapEncodeTiled (reached
            with cudaGetDriverEntryPointByVersion), completing on an mbarrier (init, arrive.expect_tx,
            try_wait.parity): 128B, 64B, 32B and no swizzle, boxes partly out of bounds at both ends (zero
            fill; NaN fill, any NaN); the shared bytes against the host's box, through the swizzle (16-byte
            chunk ^= 128-byte row, both of the address)
  store     a tile written by threads, fence.proxy.async, a 2d bulk tensor store (128B swizzle) partly
            out of bounds: the box's elements in bounds, nothing else written
  wgmma     m64n64k16 twice, chained on the same accumulators (K 32), A from shared memory or from
            registers, every operand layout of 16-bit types: K-major and MN-major, no swizzle and 32, 64,
            128-byte swizzle, the second instruction's descriptors advanced along K; D against A B (exact:
            small integers)
  setmaxnreg three warpgroups: one gives registers (dec 40), two take them (inc 232)
  bar       named barriers: two warpgroups take turns over a shared buffer (bar.arrive, bar.sync)
and, on the CPU runtime only, each mistake the model must catch (a planted bug: the same kernel with one
step left out or wrong, run in a child process, whose run must fail with the message named):
  an accumulator read before wgmma.wait_group (poison), no wgmma.fence, a store into a wgmma operand in
  flight, no fence.proxy.async before wgmma or before a bulk store (the async view's stale bytes), an
  mbarrier's missing arrive (a deadlock naming the barrier), a wait on the wrong parity (the tile read
  before it lands), the CTA exiting with a bulk copy in flight, setmaxnreg past the SM's registers or
  different in one warp of a warpgroup, a named barrier's missing arrival (a deadlock naming it).

./test_hopper prints one PASS/FAIL line per check and exits 1 on any FAIL; without an sm_90 GPU, SKIP.
*/
#include <cuda_runtime.h>
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <string>
#ifdef CUDACPU_CUDA_CPU_H
#include <sys/wait.h>
#include <unistd.h>
#endif

#define CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "test_hopper: %s failed: %s\n", #call, cudaGetErrorString(e_)); exit(1); } } while (0)

enum Plant { PLANT_NONE, PLANT_READ_EARLY, PLANT_NO_WGMMA_FENCE, PLANT_STORE_IN_FLIGHT, PLANT_NO_PROXY_FENCE, PLANT_MISSING_ARRIVE,
             PLANT_WRONG_PARITY, PLANT_EXIT_IN_FLIGHT, PLANT_TOO_MANY_REGS, PLANT_REGS_DIVERGE, PLANT_MISSING_BAR_ARRIVE };

__device__ __forceinline__ uint32_t smem_addr(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

// the first 1024-byte aligned byte of dynamic shared memory (the swizzle patterns repeat every 1024)
__device__ __forceinline__ unsigned char* align1024(unsigned char* p) { return p + (1024 - smem_addr(p) % 1024) % 1024; }

// the swizzle of a byte offset from a 1024-aligned base: 16-byte chunk bits [4, 4 + b) ^= bits [7, 7 + b)
__host__ __device__ inline uint32_t swizzle(uint32_t off, int b) { return b == 0 ? off : off ^ (((off >> 7) & ((1u << b) - 1)) << 4); }

__device__ __forceinline__ void mbar_init(uint32_t bar, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, int parity) {
    uint32_t done = 0;
    while (!done) {
        asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                     : "=r"(done) : "r"(bar), "r"(parity) : "memory");
    }
}
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

// ----------------------------------------------------------------------------
// tma: one box into shared memory; out gets the shared bytes as they lie (swizzled)
__global__ void tma_load_kernel(const __grid_constant__ CUtensorMap map, int dims, int c0, int c1, int c2, unsigned bytes,
                                unsigned char* out, int plant) {
    extern __shared__ unsigned char smem_raw[];
    unsigned char* tile = align1024(smem_raw);
    __shared__ __align__(8) uint64_t bar;
    const uint32_t b = smem_addr(&bar);
    if (threadIdx.x == 0) {
        mbar_init(b, 1);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        if (plant == PLANT_MISSING_ARRIVE) { // the bytes expected, the arrival never made
            asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;" :: "r"(b), "r"(bytes) : "memory");
        } else {
            asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(b), "r"(bytes) : "memory");
        }
        if (dims == 2) {
            asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                         :: "r"(smem_addr(tile)), "l"(&map), "r"(c0), "r"(c1), "r"(b) : "memory");
        } else {
            asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];"
                         :: "r"(smem_addr(tile)), "l"(&map), "r"(c0), "r"(c1), "r"(c2), "r"(b) : "memory");
        }
    }
    if (plant == PLANT_EXIT_IN_FLIGHT) { return; }
    mbar_wait(b, plant == PLANT_WRONG_PARITY ? 1 : 0);
    for (unsigned i = threadIdx.x; i < bytes; i += blockDim.x) { out[i] = tile[i]; }
    if (plant == PLANT_WRONG_PARITY) { mbar_wait(b, 0); } // the copy waited for after all: only the read was early
}

// store: a 32 x 64 bf16 tile (128B swizzle) from src, written by the threads, stored at (c0, c1)
__global__ void tma_store_kernel(const __grid_constant__ CUtensorMap map, int c0, int c1, const __nv_bfloat16* src, int plant) {
    extern __shared__ unsigned char smem_raw[];
    unsigned char* tile = align1024(smem_raw);
    for (int i = threadIdx.x; i < 32 * 64; i += blockDim.x) {
        *reinterpret_cast<__nv_bfloat16*>(tile + swizzle((uint32_t)i * 2, 3)) = src[i];
    }
    if (plant != PLANT_NO_PROXY_FENCE) { fence_proxy_async(); }
    __syncthreads();
    if (threadIdx.x == 0) {
        asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%0, {%1, %2}], [%3];"
                     :: "l"(&map), "r"(c0), "r"(c1), "r"(smem_addr(tile)) : "memory");
        asm volatile("cp.async.bulk.commit_group;" ::: "memory");
        asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
    }
}

// ----------------------------------------------------------------------------
// wgmma: an operand's byte offset (from a 1024-aligned base) of element (mn, k) of a 64 x 32 tile in
// one of the canonical layouts (the descriptor's LBO and SBO below; swizzle b: 0 none, 1 32B, 2 64B,
// 3 128B), and the offset where the k-th 16-wide slice starts (the second instruction's descriptor)
struct OperandLayout {
    int b, tnsp;
    uint32_t lbo, sbo;
};
__host__ __device__ inline OperandLayout operand_layout(int b, int tnsp) {
    const uint32_t w = 16u << b;
    if (b == 0) { return OperandLayout{0, tnsp, 128, 512}; } // core matrices: K groups 128 apart, MN groups 512
    if (tnsp == 0) { return OperandLayout{b, 0, 16, 8 * w}; } // K-major: LBO unused
    return OperandLayout{b, 1, 4 * 8 * w, 8 * w};            // MN-major: MN runs after the tile's 4 k-groups
}
__host__ __device__ inline uint32_t operand_offset(OperandLayout L, int mn, int k) {
    const uint32_t w = 16u << L.b, per = w / 2;
    uint32_t off;
    if (L.b == 0) {
        off = L.tnsp == 0 ? (mn / 8) * L.sbo + (k / 8) * L.lbo + (mn % 8) * 16 + (k % 8) * 2
                          : (mn / 8) * L.sbo + (k / 8) * L.lbo + (k % 8) * 16 + (mn % 8) * 2;
    } else if (L.tnsp == 0) { // rows of per k-elements; k past a row goes to the next slab of 64 rows
        off = (k / per) * 8 * L.sbo + (mn / 8) * L.sbo + (mn % 8) * w + (k % per) * 2;
    } else {
        off = (mn / per) * L.lbo + (mn % per) * 2 + (k % 8) * w + (k / 8) * L.sbo;
    }
    return off;
}
__host__ __device__ inline uint64_t operand_desc(uint32_t base_addr, OperandLayout L, int k0) {
    const uint32_t start = base_addr + operand_offset(L, 0, k0);
    const uint64_t mode = L.b == 3 ? 1 : L.b == 2 ? 2 : L.b == 1 ? 3 : 0;
    return (uint64_t)((start >> 4) & 0x3FFF) | (uint64_t)((L.lbo >> 4) & 0x3FFF) << 16 | (uint64_t)((L.sbo >> 4) & 0x3FFF) << 32 | mode << 62;
}

__device__ __forceinline__ void wgmma_ss(float* d, uint64_t da, uint64_t db, int scale_d, int ta, int tb);
__device__ __forceinline__ void wgmma_rs(float* d, const uint32_t* a, uint64_t db, int scale_d, int tb);

// a (64 x 32) row-major, b (32 x 64) row-major [k][n], d (64 x 64) row-major
template <int TA, int TB>
__global__ void wgmma_kernel(const __nv_bfloat16* a, const __nv_bfloat16* b, float* d, int a_swz, int b_swz, int a_regs, int plant) {
    extern __shared__ unsigned char smem_raw[];
    unsigned char* sA = align1024(smem_raw);
    unsigned char* sB = sA + 16384;
    const OperandLayout LA = operand_layout(a_swz, TA), LB = operand_layout(b_swz, TB);
    const int tid = threadIdx.x;
    for (int i = tid; i < 64 * 32; i += 128) {
        const int mn = i / 32, k = i % 32; // A (m, k); B (n, k)
        *reinterpret_cast<__nv_bfloat16*>(sA + swizzle(operand_offset(LA, mn, k), LA.b)) = a[mn * 32 + k];
        *reinterpret_cast<__nv_bfloat16*>(sB + swizzle(operand_offset(LB, mn, k), LB.b)) = b[k * 64 + mn];
    }
    if (plant != PLANT_NO_PROXY_FENCE) { fence_proxy_async(); }
    __syncthreads();
    float acc[32];
    for (int i = 0; i < 32; i++) { acc[i] = 0.0f; }
    const int w = tid / 32, g = (tid % 32) / 4, t = tid % 4;
    if (plant != PLANT_NO_WGMMA_FENCE) { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
    for (int kb = 0; kb < 2; kb++) {
        const uint64_t db = operand_desc(smem_addr(sB), LB, 16 * kb);
        if (a_regs) { // mma.sync's A fragment of this warp's 16 rows
            uint32_t fr[4];
            for (int r = 0; r < 4; r++) {
                const int row = 16 * w + g + 8 * (r & 1), col = 16 * kb + 2 * t + 8 * (r >> 1);
                __nv_bfloat162 v = __halves2bfloat162(a[row * 32 + col], a[row * 32 + col + 1]);
                fr[r] = *reinterpret_cast<uint32_t*>(&v);
            }
            wgmma_rs(acc, fr, db, kb, TB);
        } else {
            wgmma_ss(acc, operand_desc(smem_addr(sA), LA, 16 * kb), db, kb, TA, TB);
        }
    }
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    if (plant == PLANT_READ_EARLY) { d[tid] = acc[0]; }
    if (plant == PLANT_STORE_IN_FLIGHT && tid == 0) { sB[0] = 0; }
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    for (int i = 0; i < 32; i++) {
        const int row = 16 * w + g + 8 * ((i % 4) / 2), col = 8 * (i / 4) + 2 * t + (i % 2);
        if (plant != PLANT_READ_EARLY || row * 64 + col >= 128) { d[row * 64 + col] = acc[i]; }
    }
}

__device__ __forceinline__ void wgmma_ss(float* d, uint64_t da, uint64_t db, int scale_d, int ta, int tb) {
    if (ta == 0 && tb == 0) {
        asm volatile("{ .reg .pred p; setp.ne.b32 p, %34, 0; "
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, "
                     "%14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0; }"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                       "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                       "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                       "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                     : "l"(da), "l"(db), "r"(scale_d));
    } else if (ta == 0 && tb == 1) {
        asm volatile("{ .reg .pred p; setp.ne.b32 p, %34, 0; "
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, "
                     "%14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 1; }"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                       "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                       "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                       "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                     : "l"(da), "l"(db), "r"(scale_d));
    } else if (ta == 1 && tb == 0) {
        asm volatile("{ .reg .pred p; setp.ne.b32 p, %34, 0; "
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, "
                     "%14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 1, 0; }"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                       "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                       "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                       "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                     : "l"(da), "l"(db), "r"(scale_d));
    } else {
        asm volatile("{ .reg .pred p; setp.ne.b32 p, %34, 0; "
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, "
                     "%14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 1, 1; }"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                       "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                       "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                       "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                     : "l"(da), "l"(db), "r"(scale_d));
    }
}

__device__ __forceinline__ void wgmma_rs(float* d, const uint32_t* a, uint64_t db, int scale_d, int tb) {
    if (tb == 0) {
        asm volatile("{ .reg .pred p; setp.ne.b32 p, %37, 0; "
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, "
                     "%14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, 0; }"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                       "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                       "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                       "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d));
    } else {
        asm volatile("{ .reg .pred p; setp.ne.b32 p, %37, 0; "
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, "
                     "%14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, 1; }"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                       "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                       "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                       "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d));
    }
}

// setmaxnreg: warpgroup 0 gives registers back, 1 and 2 take them (FlashAttention-3's producer/consumers)
__global__ void __launch_bounds__(384, 1) setmaxnreg_kernel(int* out, int plant) {
    const int wg = threadIdx.x / 128;
    if (plant == PLANT_TOO_MANY_REGS) {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 240;");
    } else if (plant == PLANT_REGS_DIVERGE && threadIdx.x / 32 == 1) { // one warp of warpgroup 0 asks for another count
        asm volatile("setmaxnreg.dec.sync.aligned.u32 32;");
    } else if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
    }
    out[threadIdx.x] = wg + 1;
}

// named barriers: two warpgroups hand a buffer back and forth four times, as FlashAttention-3's
// consumers take turns: warpgroup 0 writes a round's values and arrives at barrier 1; warpgroup 1 waits
// there, doubles them, arrives at barrier 2, where warpgroup 0 waits to read them back
__global__ void pingpong_kernel(int* out, int plant) {
    __shared__ int buf[128];
    const int wg = threadIdx.x / 128, i = threadIdx.x % 128;
    int acc = 0;
    for (int r = 0; r < 4; r++) {
        if (wg == 0) {
            buf[i] = r * 1000 + i + acc;
            if (plant != PLANT_MISSING_BAR_ARRIVE || r != 2) { asm volatile("bar.arrive 1, 256;" ::: "memory"); }
            asm volatile("bar.sync 2, 256;" ::: "memory");
            acc = buf[i];
        } else {
            asm volatile("bar.sync 1, 256;" ::: "memory");
            buf[i] = 2 * buf[i];
            asm volatile("bar.arrive 2, 256;" ::: "memory");
        }
    }
    if (wg == 0) { out[i] = acc; }
}

// ----------------------------------------------------------------------------
// host

static int g_fail = 0;
static void verdict(const char* what, int bad) {
    printf("%s hopper %s\n", bad ? "FAIL" : "PASS", what);
    if (bad) { g_fail = 1; }
}
static float small_value(int i, int salt) { return (float)(((i * 7 + salt * 3) % 9) - 4); }
static uint16_t bf16_bits(float f) { __nv_bfloat16 b = __float2bfloat16(f); uint16_t u; memcpy(&u, &b, 2); return u; }

static PFN_cuTensorMapEncodeTiled_v12000 encode_tiled() {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult q;
    CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q));
    if (fn == nullptr || q != cudaDriverEntryPointSuccess) { fprintf(stderr, "test_hopper: no cuTensorMapEncodeTiled\n"); exit(1); }
    return (PFN_cuTensorMapEncodeTiled_v12000)fn;
}

// a bf16 tensor of `rows` rows of 64 (2d) or a float tensor (dims x0 8, x1 12, x2 5; 3d), its map
// with the given box and swizzle, a load at the coordinates: the shared bytes against the host's box
static int tma_case(int dims, int swz_bits, int c0, int c1, int c2, int nan_fill, int plant, std::string* why) {
    alignas(64) CUtensorMap map;
    const int elem = dims == 2 ? 2 : 4;
    const cuuint64_t gdim[3] = {dims == 2 ? 64u : 8u, dims == 2 ? 40u : 12u, 5u};
    const cuuint32_t box[3] = {dims == 2 ? (swz_bits ? (16u << swz_bits) / 2 : 32u) : 8u, dims == 2 ? 32u : 4u, 2u};
    const cuuint64_t strides[2] = {gdim[0] * elem, gdim[0] * gdim[1] * elem};
    const cuuint32_t estr[3] = {1, 1, 1};
    const size_t n = gdim[0] * gdim[1] * (dims == 3 ? gdim[2] : 1);
    std::string host(n * elem, 0);
    for (size_t i = 0; i < n; i++) {
        if (elem == 2) { const uint16_t v = bf16_bits(small_value((int)i, 1)); memcpy(&host[i * 2], &v, 2); }
        else { const float v = small_value((int)i, 2) + 0.5f; memcpy(&host[i * 4], &v, 4); }
    }
    void* dsrc;
    unsigned char* dout;
    CHECK(cudaMalloc(&dsrc, n * elem));
    CHECK(cudaMemcpy(dsrc, host.data(), n * elem, cudaMemcpyHostToDevice));
    const CUtensorMapSwizzle sw = swz_bits == 3 ? CU_TENSOR_MAP_SWIZZLE_128B : swz_bits == 2 ? CU_TENSOR_MAP_SWIZZLE_64B
                                : swz_bits == 1 ? CU_TENSOR_MAP_SWIZZLE_32B : CU_TENSOR_MAP_SWIZZLE_NONE;
    CUresult r = encode_tiled()(&map, dims == 2 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT32, dims, dsrc, gdim,
                                strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE, sw, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                                nan_fill ? CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA : CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) { *why = "cuTensorMapEncodeTiled refused the map"; return 1; }
    unsigned bytes = (unsigned)(box[0] * box[1] * (dims == 3 ? box[2] : 1) * elem);
    CHECK(cudaMalloc(&dout, bytes));
    CHECK(cudaFuncSetAttribute(tma_load_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024));
    tma_load_kernel<<<1, 128, bytes + 1024>>>(map, dims, c0, c1, c2, bytes, dout, plant);
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) { *why = std::string("the kernel failed: ") + cudaGetErrorString(e); return 1; }
    std::string got(bytes, 0);
    CHECK(cudaMemcpy(&got[0], dout, bytes, cudaMemcpyDeviceToHost));
    int bad = 0;
    unsigned off = 0;
    for (unsigned i2 = 0; i2 < (dims == 3 ? box[2] : 1); i2++) {
        for (unsigned i1 = 0; i1 < box[1]; i1++) {
            for (unsigned i0 = 0; i0 < box[0]; i0++, off += elem) {
                const long x0 = c0 + (long)i0, x1 = c1 + (long)i1, x2 = c2 + (long)i2;
                const bool in = x0 >= 0 && x0 < (long)gdim[0] && x1 >= 0 && x1 < (long)gdim[1] && (dims == 2 || (x2 >= 0 && x2 < (long)gdim[2]));
                std::string want(elem, 0);
                if (in) { want = host.substr((size_t)((x2 * gdim[1] + x1) * gdim[0] + x0) * elem, elem); }
                const uint32_t at = swizzle(off / 16 * 16, swz_bits) + off % 16;
                if (!in && nan_fill) { // some NaN (its bits are the hardware's choice): exponent all ones, mantissa not 0
                    uint16_t h;
                    memcpy(&h, &got[at], 2);
                    bad += elem != 2 || (h & 0x7F80) != 0x7F80 || (h & 0x007F) == 0;
                } else {
                    bad += memcmp(&got[at], want.data(), elem) != 0;
                }
            }
        }
    }
    CHECK(cudaFree(dsrc));
    CHECK(cudaFree(dout));
    if (bad) { *why = std::to_string(bad) + " elements differ"; }
    return bad;
}

// the 32 x 64 tile stored at (c0, c1) into a 40 x 64 tensor of 0x1111: the box's elements in bounds
static int tma_store_case(int c0, int c1, int plant, std::string* why) {
    alignas(64) CUtensorMap map;
    const cuuint64_t gdim[2] = {64, 40}, strides[1] = {128};
    const cuuint32_t box[2] = {64, 32}, estr[2] = {1, 1};
    __nv_bfloat16 *dt, *dsrc;
    CHECK(cudaMalloc(&dt, 64 * 40 * 2));
    CHECK(cudaMemset(dt, 0x11, 64 * 40 * 2));
    uint16_t src[32 * 64];
    for (int i = 0; i < 32 * 64; i++) { src[i] = bf16_bits(small_value(i, 4)); }
    CHECK(cudaMalloc(&dsrc, sizeof src));
    CHECK(cudaMemcpy(dsrc, src, sizeof src, cudaMemcpyHostToDevice));
    if (encode_tiled()(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, dt, gdim, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
                       CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS) {
        *why = "cuTensorMapEncodeTiled refused the map";
        return 1;
    }
    CHECK(cudaFuncSetAttribute(tma_store_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024));
    tma_store_kernel<<<1, 128, 4096 + 1024>>>(map, c0, c1, dsrc, plant);
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) { *why = std::string("the kernel failed: ") + cudaGetErrorString(e); return 1; }
    uint16_t got[64 * 40];
    CHECK(cudaMemcpy(got, dt, sizeof got, cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int y = 0; y < 40; y++) {
        for (int x = 0; x < 64; x++) {
            const int i1 = y - c1, i0 = x - c0;
            const bool in_box = i0 >= 0 && i0 < 64 && i1 >= 0 && i1 < 32;
            bad += got[y * 64 + x] != (in_box ? src[i1 * 64 + i0] : 0x1111);
        }
    }
    CHECK(cudaFree(dt));
    CHECK(cudaFree(dsrc));
    if (bad) { *why = std::to_string(bad) + " elements differ"; }
    return bad;
}

static int wgmma_case(int a_swz, int ta, int b_swz, int tb, int a_regs, int plant, std::string* why) {
    __nv_bfloat16 ha[64 * 32], hb[32 * 64];
    for (int i = 0; i < 64 * 32; i++) { ha[i] = __float2bfloat16(small_value(i, 5)); hb[i] = __float2bfloat16(small_value(i, 6)); }
    __nv_bfloat16 *da, *db;
    float* dd;
    CHECK(cudaMalloc(&da, sizeof ha));
    CHECK(cudaMalloc(&db, sizeof hb));
    CHECK(cudaMalloc(&dd, 64 * 64 * sizeof(float)));
    CHECK(cudaMemcpy(da, ha, sizeof ha, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(db, hb, sizeof hb, cudaMemcpyHostToDevice));
    void (*k)(const __nv_bfloat16*, const __nv_bfloat16*, float*, int, int, int, int) =
        ta ? (tb ? wgmma_kernel<1, 1> : wgmma_kernel<1, 0>) : (tb ? wgmma_kernel<0, 1> : wgmma_kernel<0, 0>);
    CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024));
    k<<<1, 128, 32768 + 1024>>>(da, db, dd, a_swz, b_swz, a_regs, plant);
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) { *why = std::string("the kernel failed: ") + cudaGetErrorString(e); return 1; }
    float d[64 * 64];
    CHECK(cudaMemcpy(d, dd, sizeof d, cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int r = 0; r < 64; r++) {
        for (int c = 0; c < 64; c++) {
            float ref = 0.0f;
            for (int kk = 0; kk < 32; kk++) { ref += __bfloat162float(ha[r * 32 + kk]) * __bfloat162float(hb[kk * 64 + c]); }
            bad += d[r * 64 + c] != ref;
        }
    }
    CHECK(cudaFree(da));
    CHECK(cudaFree(db));
    CHECK(cudaFree(dd));
    if (bad) { *why = std::to_string(bad) + " of 4096 elements of D differ from A B"; }
    return bad;
}

static int setmaxnreg_case(int plant, std::string* why) {
    int* dout;
    CHECK(cudaMalloc(&dout, 384 * sizeof(int)));
    setmaxnreg_kernel<<<1, 384>>>(dout, plant);
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) { *why = std::string("the kernel failed: ") + cudaGetErrorString(e); return 1; }
    int out[384];
    CHECK(cudaMemcpy(out, dout, sizeof out, cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int i = 0; i < 384; i++) { bad += out[i] != i / 128 + 1; }
    CHECK(cudaFree(dout));
    if (bad) { *why = std::to_string(bad) + " threads did not run past setmaxnreg"; }
    return bad;
}

static int pingpong_case(int plant, std::string* why) {
    int* dout;
    CHECK(cudaMalloc(&dout, 128 * sizeof(int)));
    pingpong_kernel<<<1, 256>>>(dout, plant);
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) { *why = std::string("the kernel failed: ") + cudaGetErrorString(e); return 1; }
    int out[128], bad = 0;
    CHECK(cudaMemcpy(out, dout, sizeof out, cudaMemcpyDeviceToHost));
    for (int i = 0; i < 128; i++) {
        int acc = 0;
        for (int r = 0; r < 4; r++) { acc = 2 * (r * 1000 + i + acc); }
        bad += out[i] != acc;
    }
    CHECK(cudaFree(dout));
    if (bad) { *why = std::to_string(bad) + " of 128 values differ"; }
    return bad;
}

#ifdef CUDACPU_CUDA_CPU_H
// a planted bug, in a child process (a kernel's error is sticky): its run must fail, and the runtime's
// message or the check's must contain `expect`
static void planted(const char* what, const char* expect, int (*run)(std::string*)) {
    int fds[2];
    if (pipe(fds) != 0) { perror("pipe"); exit(1); }
    fflush(stdout);
    const pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        std::string why;
        const int bad = run(&why);
        fprintf(stderr, "%s\n", why.c_str());
        fflush(stderr);
        _exit(bad ? 3 : 0);
    }
    close(fds[1]);
    std::string text;
    char buf[4096];
    ssize_t k;
    while ((k = read(fds[0], buf, sizeof buf)) > 0) { text.append(buf, (size_t)k); }
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    const bool failed = !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    const bool named = text.find(expect) != std::string::npos;
    std::string first = text.substr(0, text.find('\n'));
    for (size_t p = text.find('\n'); p != std::string::npos && first.find(expect) == std::string::npos; p = text.find('\n', p + 1)) {
        first = text.substr(p + 1, text.find('\n', p + 1) - p - 1);
    }
    printf("%s hopper planted %s: %s\n", failed && named ? "PASS" : "FAIL", what,
           !failed ? "the run passed with the bug in place" : named ? ("caught: " + first).c_str() : ("failed without '" + std::string(expect) + "': " + first).c_str());
    if (!(failed && named)) { g_fail = 1; }
}
#endif

int main(void) {
    int devices = 0, major = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) { printf("SKIP test_hopper: no GPU\n"); return 0; }
    CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
    if (major != 9) { printf("SKIP test_hopper: compute capability %d.x, not 9.0 (Hopper)\n", major); return 0; }
    std::string why;
    struct { int dims, swz, c0, c1, c2, nan_fill; const char* what; } tma[] = {
        {2, 3, 0, 24, 0, 0, "tma 2d bf16 128B swizzle, rows 24-55 of 40 (zero fill past the end)"},
        {2, 2, 32, -8, 0, 0, "tma 2d bf16 64B swizzle, columns 32-63, rows -8-23 (zero fill before the start)"},
        {2, 1, 48, 30, 0, 1, "tma 2d bf16 32B swizzle, columns 48-63, rows 30-61 (NaN fill)"},
        {2, 0, 16, 3, 0, 0, "tma 2d bf16 no swizzle, columns 16-47"},
        {3, 0, 4, 10, -1, 0, "tma 3d fp32 no swizzle, a box past every edge of its 8 x 12 x 5 tensor"},
    };
    for (auto& c : tma) {
        why.clear();
        const int bad = tma_case(c.dims, c.swz, c.c0, c.c1, c.c2, c.nan_fill, PLANT_NONE, &why);
        verdict((std::string(c.what) + (bad ? ": " + why : "")).c_str(), bad);
    }
    why.clear();
    int bad = tma_store_case(0, 16, PLANT_NONE, &why);
    verdict(("store 2d bf16 128B swizzle at rows 16-47 of 40 (the rest clipped)" + (bad ? ": " + why : "")).c_str(), bad);
    struct { int a_swz, ta, b_swz, tb, a_regs; const char* what; } wg[] = {
        {3, 0, 3, 0, 0, "wgmma m64n64k16 x2: A, B K-major 128B swizzle"},
        {2, 0, 1, 0, 0, "wgmma: A K-major 64B, B K-major 32B"},
        {0, 0, 0, 0, 0, "wgmma: A, B K-major no swizzle"},
        {3, 1, 3, 1, 0, "wgmma: A, B MN-major 128B swizzle"},
        {1, 1, 2, 1, 0, "wgmma: A MN-major 32B, B MN-major 64B"},
        {0, 1, 0, 1, 0, "wgmma: A, B MN-major no swizzle"},
        {0, 0, 3, 1, 1, "wgmma: A from registers, B MN-major 128B swizzle"},
        {0, 0, 2, 0, 1, "wgmma: A from registers, B K-major 64B swizzle"},
    };
    for (auto& c : wg) {
        why.clear();
        bad = wgmma_case(c.a_swz, c.ta, c.b_swz, c.tb, c.a_regs, PLANT_NONE, &why);
        verdict((std::string(c.what) + ", D == A B exactly" + (bad ? ": " + why : "")).c_str(), bad);
    }
    why.clear();
    bad = setmaxnreg_case(PLANT_NONE, &why);
    verdict(("setmaxnreg: dec 40 in warpgroup 0, inc 232 in 1 and 2" + (bad ? ": " + why : "")).c_str(), bad);
    why.clear();
    bad = pingpong_case(PLANT_NONE, &why);
    verdict(("named barriers: two warpgroups take turns four times (bar.arrive, bar.sync 1 and 2, 256 threads)" +
             (bad ? ": " + why : "")).c_str(), bad);
#ifdef CUDACPU_CUDA_CPU_H
    planted("an accumulator read before wgmma.wait_group", "of 4096 elements of D differ",
            [](std::string* w) { return wgmma_case(3, 0, 3, 0, 0, PLANT_READ_EARLY, w); });
    planted("no wgmma.fence before the first wgmma.mma_async", "with no wgmma.fence",
            [](std::string* w) { return wgmma_case(3, 0, 3, 0, 0, PLANT_NO_WGMMA_FENCE, w); });
    planted("a store into B while its wgmma is in flight", "operands changed before the wgmma.wait_group",
            [](std::string* w) { return wgmma_case(3, 0, 3, 0, 0, PLANT_STORE_IN_FLIGHT, w); });
    planted("no fence.proxy.async between the threads' stores and wgmma", "of 4096 elements of D differ",
            [](std::string* w) { return wgmma_case(3, 0, 3, 0, 0, PLANT_NO_PROXY_FENCE, w); });
    planted("no fence.proxy.async before a bulk tensor store", "elements differ",
            [](std::string* w) { return tma_store_case(0, 16, PLANT_NO_PROXY_FENCE, w); });
    planted("an mbarrier's arrival missing", "deadlock, waiting: t0@mbarrier",
            [](std::string* w) { return tma_case(2, 3, 0, 24, 0, 0, PLANT_MISSING_ARRIVE, w); });
    planted("a wait on the wrong phase parity", "elements differ",
            [](std::string* w) { return tma_case(2, 3, 0, 24, 0, 0, PLANT_WRONG_PARITY, w); });
    planted("the CTA exiting with a bulk copy in flight", "bulk copies in flight",
            [](std::string* w) { return tma_case(2, 3, 0, 24, 0, 0, PLANT_EXIT_IN_FLIGHT, w); });
    planted("setmaxnreg past the SM's registers", "more than the SM's 65536",
            [](std::string* w) { return setmaxnreg_case(PLANT_TOO_MANY_REGS, w); });
    planted("setmaxnreg with another count in one warp of a warpgroup", "divergent warpgroup instruction",
            [](std::string* w) { return setmaxnreg_case(PLANT_REGS_DIVERGE, w); });
    planted("a named barrier's arrival missing", "of 256 threads arrived, the round begun at",
            [](std::string* w) { return pingpong_case(PLANT_MISSING_BAR_ARRIVE, w); });
#endif
    return g_fail;
}
