/*
test_ptx.cu: the inline PTX that the flash kernels use, checked against plain host arithmetic, on a
GPU (nvcc) and on the CPU runtime (make build/cudacpu/test_ptx). On a GPU it checks the runtime's
model of each instruction: the same source, the same expectations.

  ldmatrix  .x1 .x2 .x4, with and without .trans, feeding mma.sync m16n8k16: A (16 x 16) from a
            row-major tile, B from a tile stored (n, k) (non-transposed load) or (k, n) (.trans);
            D against a host matmul of the same bf16 values (exact: small integers), and each lane's
            registers against the PTX ISA's layout (register j of lane l: matrix j's row l / 4,
            columns 2 (l % 4) and +1; .trans: its column l / 4, rows 2 (l % 4) and +1).
  cp.async  .cg 16 bytes in two commit groups, with source sizes 16, 8 (the rest zero) and 0 (all
            zero): what lands after wait_group 1 (the first group, read by its own thread) and after
            wait_group 0 and a barrier (every chunk, read by another thread).
            On the CPU runtime only: the destination reads 0xFF between issue and wait (the model's
            poison: such a read is a race on a GPU, with no defined value to check).

./test_ptx prints one PASS/FAIL line per check and exits 1 on any FAIL; without a GPU (nvcc build), SKIP.
*/
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "test_ptx: %s failed: %s\n", #call, cudaGetErrorString(e_)); exit(1); } } while (0)

__device__ __forceinline__ uint32_t smem_addr(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

// ----------------------------------------------------------------------------
// ldmatrix into mma.sync

// tile values: small integers, exact in bf16 and in any summation order
static float tile_value(int tile, int r, int c) { return (float)(((r * 7 + c * 3 + tile * 5) % 9) - 4); }

// one warp. a (16 x 16) row-major; b_nk (8 x 16): b_nk[n][k] = B[k][n]; b_kn (16 x 8): b_kn[k][n] = B[k][n];
// d_nk, d_kn (16 x 8, fp32): A B with B loaded from b_nk (ldmatrix .x2) and from b_kn (.x2.trans);
// regs (32 lanes x 4): the x4 load of a, then x1 loads of b_nk and b_kn (.trans) for the layout check
__global__ void ldmatrix_mma_kernel(float* d_nk, float* d_kn, uint32_t* regs, const __nv_bfloat16* a,
                                    const __nv_bfloat16* b_nk, const __nv_bfloat16* b_kn) {
    __shared__ __align__(16) __nv_bfloat16 sA[16 * 16], sBnk[8 * 16], sBkn[16 * 8];
    const int lane = threadIdx.x;
    for (int i = lane; i < 256; i += 32) { sA[i] = a[i]; }
    for (int i = lane; i < 128; i += 32) { sBnk[i] = b_nk[i]; sBkn[i] = b_kn[i]; }
    __syncwarp();
    // A: matrices (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15), (rows 8-15, k 8-15) = a0..a3
    const int j = lane / 8, r = lane % 8;
    uint32_t af[4];
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(af[0]), "=r"(af[1]), "=r"(af[2]), "=r"(af[3])
                 : "r"(smem_addr(sA + (r + 8 * (j & 1)) * 16 + 8 * (j >> 1))));
    // B from (n, k): matrices (n 0-7, k 0-7) and (n 0-7, k 8-15); lanes 16-31's addresses are ignored
    uint32_t bf[2];
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(bf[0]), "=r"(bf[1])
                 : "r"(smem_addr(sBnk + r * 16 + 8 * (j & 1))));
    float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(af[0]), "r"(af[1]), "r"(af[2]), "r"(af[3]), "r"(bf[0]), "r"(bf[1]));
    const int g = lane / 4, t = lane % 4;
    for (int e = 0; e < 4; e++) { d_nk[(g + (e >= 2 ? 8 : 0)) * 8 + 2 * t + (e & 1)] = c[e]; }
    // B from (k, n), transposed on the way: matrices (k 0-7, n 0-7) and (k 8-15, n 0-7)
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(bf[0]), "=r"(bf[1])
                 : "r"(smem_addr(sBkn + (r + 8 * (j & 1)) * 8)));
    c[0] = c[1] = c[2] = c[3] = 0.0f;
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(af[0]), "r"(af[1]), "r"(af[2]), "r"(af[3]), "r"(bf[0]), "r"(bf[1]));
    for (int e = 0; e < 4; e++) { d_kn[(g + (e >= 2 ? 8 : 0)) * 8 + 2 * t + (e & 1)] = c[e]; }
    uint32_t x1, x1t;
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n" : "=r"(x1) : "r"(smem_addr(sBnk + r * 16 + 8)));
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n" : "=r"(x1t) : "r"(smem_addr(sBkn + (r + 8) * 8)));
    regs[lane * 4 + 0] = af[0];
    regs[lane * 4 + 1] = af[3];
    regs[lane * 4 + 2] = x1;
    regs[lane * 4 + 3] = x1t;
}

// ----------------------------------------------------------------------------
// cp.async

#define CP_CHUNKS 64 // 16-byte chunks, one per thread; chunks 0-31 are group 1, 32-63 group 2

static int cp_src_bytes(int i) { return i % 5 == 0 ? 0 : (i % 7 == 0 ? 8 : 16); }

// out (CP_CHUNKS x 16 bytes): chunk (i + 17) % 64 as thread i sees it after both waits and a barrier;
// own (32 x 16 bytes): thread i < 32's own chunk right after wait_group 1; early (CP_CHUNKS): the first
// 4 bytes of each thread's chunk read before any wait
__global__ void cp_async_kernel(uint4* out, uint4* own, uint32_t* early, const uint4* src) {
    __shared__ __align__(16) uint4 s[CP_CHUNKS];
    const int i = threadIdx.x;
    const int bytes = i % 5 == 0 ? 0 : (i % 7 == 0 ? 8 : 16);
    if (i < 32) {
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(smem_addr(&s[i])), "l"(src + i), "r"(bytes));
    }
    asm volatile("cp.async.commit_group;\n" ::);
    if (i >= 32) {
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(smem_addr(&s[i])), "l"(src + i), "r"(bytes));
    }
    early[i] = *reinterpret_cast<volatile uint32_t*>(&s[i]);
    asm volatile("cp.async.commit_group;\n" ::);
    asm volatile("cp.async.wait_group 1;\n" ::);
    if (i < 32) { own[i] = s[i]; }
    asm volatile("cp.async.wait_group %0;\n" :: "n"(0));
    __syncthreads();
    out[i] = s[(i + 17) % CP_CHUNKS];
}

// ----------------------------------------------------------------------------

static int g_fail = 0;
static void verdict(const char* what, int bad) {
    printf("%s %s\n", bad ? "FAIL" : "PASS", what);
    if (bad) { g_fail = 1; }
}

static uint16_t bf16_bits(float f) { __nv_bfloat16 b = __float2bfloat16(f); uint16_t u; memcpy(&u, &b, 2); return u; }

int main(void) {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) { printf("SKIP test_ptx: no GPU\n"); return 0; }
    // ldmatrix + mma
    __nv_bfloat16 ha[256], hbnk[128], hbkn[128];
    float A[16][16], B[16][8];
    for (int r = 0; r < 16; r++) { for (int c = 0; c < 16; c++) { A[r][c] = tile_value(0, r, c); ha[r * 16 + c] = __float2bfloat16(A[r][c]); } }
    for (int k = 0; k < 16; k++) {
        for (int n = 0; n < 8; n++) {
            B[k][n] = tile_value(1, k, n);
            hbnk[n * 16 + k] = __float2bfloat16(B[k][n]);
            hbkn[k * 8 + n] = __float2bfloat16(B[k][n]);
        }
    }
    __nv_bfloat16 *da, *dbnk, *dbkn;
    float *dd_nk, *dd_kn;
    uint32_t* dregs;
    CHECK(cudaMalloc(&da, sizeof ha));
    CHECK(cudaMalloc(&dbnk, sizeof hbnk));
    CHECK(cudaMalloc(&dbkn, sizeof hbkn));
    CHECK(cudaMalloc(&dd_nk, 128 * sizeof(float)));
    CHECK(cudaMalloc(&dd_kn, 128 * sizeof(float)));
    CHECK(cudaMalloc(&dregs, 128 * sizeof(uint32_t)));
    CHECK(cudaMemcpy(da, ha, sizeof ha, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dbnk, hbnk, sizeof hbnk, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dbkn, hbkn, sizeof hbkn, cudaMemcpyHostToDevice));
    ldmatrix_mma_kernel<<<1, 32>>>(dd_nk, dd_kn, dregs, da, dbnk, dbkn);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    float d_nk[128], d_kn[128];
    uint32_t regs[128];
    CHECK(cudaMemcpy(d_nk, dd_nk, sizeof d_nk, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(d_kn, dd_kn, sizeof d_kn, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(regs, dregs, sizeof regs, cudaMemcpyDeviceToHost));
    int bad_nk = 0, bad_kn = 0;
    for (int r = 0; r < 16; r++) {
        for (int n = 0; n < 8; n++) {
            float ref = 0.0f;
            for (int k = 0; k < 16; k++) { ref += A[r][k] * B[k][n]; }
            bad_nk += d_nk[r * 8 + n] != ref;
            bad_kn += d_kn[r * 8 + n] != ref;
        }
    }
    verdict("ldmatrix x4 (A) + x2 (B from (n, k)) -> mma.sync: D == A B exactly", bad_nk);
    verdict("ldmatrix x4 (A) + x2.trans (B from (k, n)) -> mma.sync: D == A B exactly", bad_kn);
    int bad_layout = 0;
    for (int l = 0; l < 32; l++) {
        const int i = l / 4, k = 2 * (l % 4);
        // x4's register 0: matrix 0 = A rows 0-7, columns 0-7; register 3: A rows 8-15, columns 8-15
        const uint32_t a0 = bf16_bits(A[i][k]) | (uint32_t)bf16_bits(A[i][k + 1]) << 16;
        const uint32_t a3 = bf16_bits(A[8 + i][8 + k]) | (uint32_t)bf16_bits(A[8 + i][8 + k + 1]) << 16;
        // x1 of b_nk rows 0-7 (n), columns 8-15 (k): row i = n, columns k, k+1 -> B[8 + k][i], B[8 + k + 1][i]
        const uint32_t x1 = bf16_bits(B[8 + k][i]) | (uint32_t)bf16_bits(B[8 + k + 1][i]) << 16;
        // x1.trans of b_kn rows 8-15 (k), columns 0-7 (n): column i, rows k, k+1 -> B[8 + k][i], B[8 + k + 1][i]
        bad_layout += regs[l * 4 + 0] != a0 || regs[l * 4 + 1] != a3 || regs[l * 4 + 2] != x1 || regs[l * 4 + 3] != x1;
    }
    verdict("ldmatrix registers per lane (x4, x1, x1.trans) as the PTX ISA lays them out", bad_layout);

    // cp.async
    uint4 hsrc[CP_CHUNKS];
    for (int i = 0; i < CP_CHUNKS; i++) { hsrc[i] = make_uint4(0x01010101u * (i + 1), 0x1000u + i, 0x2000u + i, 0x3000u + i); }
    uint4 *dsrc, *dout, *down;
    uint32_t* dearly;
    CHECK(cudaMalloc(&dsrc, sizeof hsrc));
    CHECK(cudaMalloc(&dout, sizeof hsrc));
    CHECK(cudaMalloc(&down, 32 * sizeof(uint4)));
    CHECK(cudaMalloc(&dearly, CP_CHUNKS * sizeof(uint32_t)));
    CHECK(cudaMemcpy(dsrc, hsrc, sizeof hsrc, cudaMemcpyHostToDevice));
    cp_async_kernel<<<1, CP_CHUNKS>>>(dout, down, dearly, dsrc);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    uint4 hout[CP_CHUNKS], hown[32];
    uint32_t hearly[CP_CHUNKS];
    CHECK(cudaMemcpy(hout, dout, sizeof hout, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(hown, down, sizeof hown, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(hearly, dearly, sizeof hearly, cudaMemcpyDeviceToHost));
    auto expect = [&](int i) {
        uint32_t w[4] = {hsrc[i].x, hsrc[i].y, hsrc[i].z, hsrc[i].w};
        const int bytes = cp_src_bytes(i);
        for (int q = 0; q < 4; q++) { if (4 * q >= bytes) { w[q] = 0u; } }
        return make_uint4(w[0], w[1], w[2], w[3]);
    };
    auto same = [](uint4 a, uint4 b) { return a.x == b.x && a.y == b.y && a.z == b.z && a.w == b.w; };
    int bad_own = 0, bad_all = 0;
    for (int i = 0; i < 32; i++) { bad_own += !same(hown[i], expect(i)); }
    for (int i = 0; i < CP_CHUNKS; i++) { bad_all += !same(hout[i], expect((i + 17) % CP_CHUNKS)); }
    verdict("cp.async.cg: wait_group 1 lands the first group (source sizes 16, 8, 0)", bad_own);
    verdict("cp.async.cg: wait_group 0 and a barrier: every chunk, as seen by another thread", bad_all);
#ifdef CUDACPU_CUDA_CPU_H
    int bad_poison = 0;
    for (int i = 0; i < CP_CHUNKS; i++) { bad_poison += hearly[i] != 0xFFFFFFFFu; }
    verdict("cp.async (CPU runtime): the destination reads 0xFF before its wait", bad_poison);
#endif
    return g_fail;
}
