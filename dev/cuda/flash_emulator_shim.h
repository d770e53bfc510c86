/*
flash_emulator_shim.h: a small SIMT runtime on the CPU, enough to run kernels of train_gpt2.cu (their
source text, extracted by dev/cuda/kernel_emulator.sh) as host C++. It first ran the flash kernels;
those now run on dev/cudacpu, which is to replace this file too (issue 25).

What it provides to the extracted text: the CUDA qualifiers as nothing, floatX = __nv_bfloat16 (the
host side of cuda_bf16.h, round to nearest even), x2f/f2x, threadIdx/blockIdx/gridDim/blockDim,
__syncthreads(), __shfl_xor_sync(), warp_sum() (written as in the trainer), the per-CTA dynamic shared
memory behind `flash_smem`, and emu_mma_16816(): the warp-collective mma.sync.m16n8k16 (bf16 x bf16
+ fp32) that replaces the inline PTX of mma_16816. The mma gathers the 32 lanes' registers and
rebuilds A (16x16), B (16x8), C (16x8) from the PTX ISA fragment layout as written below (from the
ISA, not from the kernel's comment), computes D = A B + C and hands every lane its d[4].

Also used by dev/cuda/kernel_emulator.cpp (the trainer's other kernels), which defines
EMU_KERNEL_EMULATOR (static `__shared__` arrays, min/max, rsqrtf, integer atomics, fences and
cache-hinted loads as host code; see below) and, for its FP32 build, EMU_FP32 (floatX = float), and
launches through launch_dims(): 1-, 2- or 3-D blocks, CTAs in ascending, descending or random order.
The shuffles take any 1 to 8-byte value (xor, down, up, indexed) and __syncwarp is a warp collective.

Threads are fibers (user-level contexts, one OS thread), not std::threads: an OS-thread barrier costs
~150 us per warp collective on a 2-core machine (measured), which made the suite take minutes; a fiber
switch costs tens of nanoseconds. Fibers also make the interleaving a choice rather than luck: the
scheduler always resumes the runnable thread that comes first in a priority order (ascending thread
id, descending, or a random permutation per CTA), so one warp runs as far ahead of the others as the
barriers allow. A missing or misplaced __syncthreads then shows up as a wrong or schedule-dependent
result (the driver compares the outputs of the schedules bit for bit).

Checked at run time (each ends the launch with a message naming train_gpt2.cu's line):
  - __syncthreads reached at different lines by threads of one CTA, or while some threads exited;
  - a warp collective (shfl, mma) whose 32 lanes disagree on the operation or line, that a lane
    exited before, or with a mask other than 0xFFFFFFFF; deadlock (nobody runnable).
Not modelled: timing, the memory model (a store is visible to everyone at once), bank conflicts,
races between two barriers that do not change the result under the three schedules, fp32 rounding
inside the tensor core (D is summed in double, then rounded to fp32), fast-math exp2f/log2f.
*/
#ifndef FLASH_EMULATOR_SHIM_H
#define FLASH_EMULATOR_SHIM_H

#include <cuda_bf16.h>
#include <vector_types.h>
#include <vector_functions.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <functional>
#include <string>
#include <vector>
#include <random>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>
#if !defined(__x86_64__)
#include <ucontext.h>
#endif

// ---------------------------------------------------------------------------------------------
// CUDA spellings the extracted text uses
#undef __global__
#undef __device__
#undef __forceinline__
#if defined(EMU_KERNEL_EMULATOR)
// kernel_emulator.cpp (the trainer's other kernels): a `__shared__` array declared in a kernel is a
// static local, one per kernel, which the threads of a CTA share because CTAs run one at a time. All
// of them live in the section emu_shared, which launch_dims() fills with 0xFF before every CTA (a read of
// shared memory no thread of this CTA wrote gives NaN). GCC refuses to put COMDAT (inline, template)
// and plain functions' statics in one section, so every kernel and device function is inline.
#undef __shared__
#undef __constant__
#define __global__ inline
#define __device__ inline
#define __forceinline__
#define __shared__ static __attribute__((section("emu_shared")))
#define __constant__ inline
#else
#define __global__
#define __device__
#define __forceinline__ inline
#endif
#define __launch_bounds__(...)
// __align__(n) stays host_defines.h's __attribute__((aligned(n)))

#if defined(EMU_FP32)
// the trainer's FP32 build (-DENABLE_FP32); only kernel_emulator.cpp builds it
typedef float floatX;
#define PRECISION_IS_BF16 0
static inline float x2f(floatX v) { return v; }
static inline floatX f2x(float v) { return v; }
#else
typedef __nv_bfloat16 floatX;
#define PRECISION_IS_BF16 1
static inline float x2f(floatX v) { return __bfloat162float(v); }
static inline floatX f2x(float v) { return __float2bfloat16(v); } // round to nearest even
#endif

struct EmuDim3 { unsigned int x, y, z; };
// the running fiber's, set at each switch. External linkage (inline variables), so that the compiler
// must assume the context switch (an opaque call) changes them.
inline EmuDim3 threadIdx, blockIdx, gridDim, blockDim;

namespace emu {

// ---------------------------------------------------------------------------------------------
// context switch: save callee-saved registers on the current stack, store sp, load the other one
#if defined(__x86_64__)
extern "C" void emu_ctx_switch(void** save_sp, void* load_sp);
asm(".text\n"
    ".globl emu_ctx_switch\n"
    ".type emu_ctx_switch,@function\n"
    "emu_ctx_switch:\n"
    "    pushq %rbp\n    pushq %rbx\n    pushq %r12\n    pushq %r13\n    pushq %r14\n    pushq %r15\n"
    "    subq $8, %rsp\n    stmxcsr (%rsp)\n    fnstcw 4(%rsp)\n"
    "    movq %rsp, (%rdi)\n"
    "    movq %rsi, %rsp\n"
    "    ldmxcsr (%rsp)\n    fldcw 4(%rsp)\n    addq $8, %rsp\n"
    "    popq %r15\n    popq %r14\n    popq %r13\n    popq %r12\n    popq %rbx\n    popq %rbp\n"
    "    ret\n"
    ".size emu_ctx_switch,.-emu_ctx_switch\n");
#endif

enum State { RUNNABLE, WAIT_WARP, WAIT_BLOCK, DONE };
enum OpKind { OP_SHFL_XOR = 1, OP_MMA = 2, OP_SHFL_DOWN = 3, OP_SHFL_UP = 4, OP_SHFL_IDX = 5, OP_SYNCWARP = 6 };

struct LaneOp {
    int kind, line;
    unsigned mask;
    int lanemask; // shuffles: the lane mask, delta or source lane
    uint32_t v;   // shuffles: the value's bits
    uint32_t a[4], b[2];
    float c[4];
};

struct Fiber {
    void* sp = nullptr;
    unsigned char* stack_lo = nullptr; // usable stack [stack_lo, stack_lo + kStackBytes)
    int state = DONE;
    int line = 0; // where it waits
#if !defined(__x86_64__)
    ucontext_t uc;
#endif
};

static const size_t kStackBytes = 256 * 1024;
static const int kMaxThreads = 1024;

struct Runtime {
    std::vector<Fiber> fibers; // kMaxThreads, stacks made on first use
    void* sched_sp = nullptr;
#if !defined(__x86_64__)
    ucontext_t sched_uc;
#endif
    int nthreads = 0, cur = -1;
    const std::function<void()>* body = nullptr;
    unsigned char* smem = nullptr;
    // scheduling: rank_of[tid] is its priority (0 first); runnable bitset by rank
    std::vector<int> tid_of_rank, rank_of;
    uint64_t ready[kMaxThreads / 64];
    // barriers
    int block_arrived = 0, block_line = 0;
    std::vector<int> warp_arrived;
    std::vector<LaneOp> ops;     // per thread: its pending warp op
    std::vector<uint32_t> res_v; // per thread: shfl result (bits)
    std::vector<float> res_d;    // per thread x 4: mma result
    // errors and context for messages
    std::string error;
    const char* kernel_name = "";
    int done_count = 0;
    long long collectives = 0, switches = 0;
};
inline Runtime rt; // external linkage, for the same reason as threadIdx

static inline void set_ready(int tid) { const int r = rt.rank_of[tid]; rt.ready[r >> 6] |= 1ull << (r & 63); }
static inline void clear_ready(int tid) { const int r = rt.rank_of[tid]; rt.ready[r >> 6] &= ~(1ull << (r & 63)); }

static void switch_to_scheduler() {
    Fiber& f = rt.fibers[rt.cur];
#if defined(__x86_64__)
    emu_ctx_switch(&f.sp, rt.sched_sp);
#else
    swapcontext(&f.uc, &rt.sched_uc);
#endif
    // resumed: the scheduler set threadIdx and rt.cur
}

// ends the launch: the scheduler sees rt.error and abandons every fiber (they hold no resources)
[[noreturn]] static void fail(const std::string& msg) {
    if (rt.error.empty()) {
        char where[160];
        snprintf(where, sizeof where, "%s block (%u,%u) thread %d: ", rt.kernel_name, blockIdx.x, blockIdx.y, rt.cur);
        rt.error = std::string(where) + msg;
    }
    rt.fibers[rt.cur].state = DONE;
    clear_ready(rt.cur);
    switch_to_scheduler();
    abort(); // never resumed
}

static std::string line_str(int line) { return "train_gpt2.cu:" + std::to_string(line); }

// ---------------------------------------------------------------------------------------------
// the m16n8k16 fragment layout, from the PTX ISA (independent of the kernel's comment):
// groupID = lane >> 2, threadID_in_group = lane % 4; every register holds two bf16, the element
// with the lower column (A, C) or lower k (B) in the low 16 bits.
//   A 16x16 (row, col):  a0 (g, 2t..2t+1)  a1 (g+8, 2t..2t+1)  a2 (g, 2t+8..2t+9)  a3 (g+8, 2t+8..2t+9)
//   B 16x8  (k, n):      b0 (k 2t..2t+1, n g)  b1 (k 2t+8..2t+9, n g)
//   C/D 16x8 (row, col): c0 (g, 2t)  c1 (g, 2t+1)  c2 (g+8, 2t)  c3 (g+8, 2t+1)
static inline void frag_a_coord(int lane, int reg, int half, int* row, int* col) {
    const int g = lane >> 2, t = lane & 3;
    *row = g + ((reg & 1) ? 8 : 0);
    *col = 2 * t + half + ((reg & 2) ? 8 : 0);
}
static inline void frag_b_coord(int lane, int reg, int half, int* k, int* n) {
    const int g = lane >> 2, t = lane & 3;
    *k = 2 * t + half + (reg ? 8 : 0);
    *n = g;
}
static inline void frag_c_coord(int lane, int e, int* row, int* col) {
    const int g = lane >> 2, t = lane & 3;
    *row = g + (e >= 2 ? 8 : 0);
    *col = 2 * t + (e & 1);
}
static inline float bf16_bits_to_float(uint32_t bits16) {
    const uint32_t u = bits16 << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

// the layout maps are bijections onto the matrices (checked once at start-up)
static inline bool check_fragment_maps() {
    int a[16][16] = {}, b[16][8] = {}, c[16][8] = {};
    for (int lane = 0; lane < 32; lane++) {
        for (int reg = 0; reg < 4; reg++) {
            for (int half = 0; half < 2; half++) {
                int r, cl;
                frag_a_coord(lane, reg, half, &r, &cl);
                a[r][cl]++;
            }
        }
        for (int reg = 0; reg < 2; reg++) {
            for (int half = 0; half < 2; half++) {
                int k, n;
                frag_b_coord(lane, reg, half, &k, &n);
                b[k][n]++;
            }
        }
        for (int e = 0; e < 4; e++) {
            int r, cl;
            frag_c_coord(lane, e, &r, &cl);
            c[r][cl]++;
        }
    }
    for (int i = 0; i < 16; i++) {
        for (int j = 0; j < 16; j++) { if (a[i][j] != 1) { return false; } }
        for (int j = 0; j < 8; j++) { if (b[i][j] != 1 || c[i][j] != 1) { return false; } }
    }
    return true;
}

static void mma_compute(int warp0) {
    float A[16][16], B[16][8], Cm[16][8];
    for (int lane = 0; lane < 32; lane++) {
        const LaneOp& op = rt.ops[warp0 + lane];
        for (int reg = 0; reg < 4; reg++) {
            for (int half = 0; half < 2; half++) {
                int r, cl;
                frag_a_coord(lane, reg, half, &r, &cl);
                A[r][cl] = bf16_bits_to_float((op.a[reg] >> (16 * half)) & 0xFFFFu);
            }
        }
        for (int reg = 0; reg < 2; reg++) {
            for (int half = 0; half < 2; half++) {
                int k, n;
                frag_b_coord(lane, reg, half, &k, &n);
                B[k][n] = bf16_bits_to_float((op.b[reg] >> (16 * half)) & 0xFFFFu);
            }
        }
        for (int e = 0; e < 4; e++) {
            int r, cl;
            frag_c_coord(lane, e, &r, &cl);
            Cm[r][cl] = op.c[e];
        }
    }
    for (int lane = 0; lane < 32; lane++) {
        for (int e = 0; e < 4; e++) {
            int r, cl;
            frag_c_coord(lane, e, &r, &cl);
            double acc = Cm[r][cl];
            for (int k = 0; k < 16; k++) { acc += (double)A[r][k] * (double)B[k][cl]; }
            rt.res_d[(size_t)(warp0 + lane) * 4 + e] = (float)acc;
        }
    }
}

// a lane arrives at a warp collective; the last one checks agreement, computes, releases the warp
static void warp_collective(const LaneOp& op) {
    const int tid = rt.cur, warp = tid / 32, warp0 = warp * 32;
    if (warp0 + 32 > rt.nthreads) { fail("warp collective in a partial warp"); }
    rt.ops[tid] = op;
    for (int l = 0; l < 32; l++) {
        if (rt.fibers[warp0 + l].state == DONE) {
            fail("warp collective at " + line_str(op.line) + " while lane " + std::to_string(l) + " has exited");
        }
    }
    if (++rt.warp_arrived[warp] < 32) {
        rt.fibers[tid].state = WAIT_WARP;
        rt.fibers[tid].line = op.line;
        clear_ready(tid);
        switch_to_scheduler();
        return;
    }
    rt.warp_arrived[warp] = 0;
    rt.collectives++;
    for (int l = 0; l < 32; l++) {
        const LaneOp& o = rt.ops[warp0 + l];
        // a shfl_sync's source lane may differ per lane; every other argument must agree
        if (o.kind != op.kind || o.line != op.line || o.mask != op.mask ||
            (o.lanemask != op.lanemask && op.kind != OP_SHFL_IDX)) {
            fail("divergent warp collective: lane " + std::to_string(l) + " at " + line_str(o.line) + " (kind " +
                 std::to_string(o.kind) + "), last lane at " + line_str(op.line) + " (kind " + std::to_string(op.kind) + ")");
        }
    }
    if (op.kind == OP_MMA) {
        mma_compute(warp0);
    } else if (op.kind != OP_SYNCWARP) {
        for (int l = 0; l < 32; l++) {
            const int d = rt.ops[warp0 + l].lanemask;
            int src = l;
            if (op.kind == OP_SHFL_XOR) { src = l ^ d; }
            if (op.kind == OP_SHFL_DOWN && l + d < 32) { src = l + d; } // past the warp: the lane's own value
            if (op.kind == OP_SHFL_UP && l - d >= 0) { src = l - d; }
            if (op.kind == OP_SHFL_IDX) { src = d & 31; }
            rt.res_v[warp0 + l] = rt.ops[warp0 + src].v;
        }
    }
    for (int l = 0; l < 32; l++) {
        rt.fibers[warp0 + l].state = RUNNABLE;
        set_ready(warp0 + l);
    }
    // yield anyway, so that the priority order decides who runs next
    switch_to_scheduler();
}

static inline uint32_t shfl_bits(int kind, unsigned mask, uint32_t v, int arg, int line) {
    static const char* names[] = {"", "__shfl_xor_sync", "", "__shfl_down_sync", "__shfl_up_sync", "__shfl_sync"};
    if (mask != 0xFFFFFFFFu) { fail(std::string(names[kind]) + " with a partial mask at " + line_str(line)); }
    if (kind != OP_SHFL_IDX && (arg < 0 || arg > 31)) { fail(std::string(names[kind]) + " lane argument out of range at " + line_str(line)); }
    LaneOp op{};
    op.kind = kind;
    op.line = line;
    op.mask = mask;
    op.lanemask = arg;
    op.v = v;
    warp_collective(op);
    return rt.res_v[rt.cur];
}

// any 1, 2, 4 or 8-byte value (CUDA's overloads: int, unsigned, float, double, bf16, bf16x2, ...)
template <class T>
static inline T shfl(int kind, unsigned mask, T v, int arg, int line) {
    static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8, "shuffle of an unsupported type");
    uint32_t w[2] = {0, 0};
    memcpy(w, &v, sizeof(T));
    w[0] = shfl_bits(kind, mask, w[0], arg, line);
    if (sizeof(T) == 8) { w[1] = shfl_bits(kind, mask, w[1], arg, line); }
    T r;
    memcpy(&r, w, sizeof(T));
    return r;
}
static inline float shfl_xor_f32(unsigned mask, float v, int lanemask, int line) { return shfl(OP_SHFL_XOR, mask, v, lanemask, line); }

static inline void syncwarp(unsigned mask, int line) {
    if (mask != 0xFFFFFFFFu) { fail("__syncwarp with a partial mask at " + line_str(line)); }
    LaneOp op{};
    op.kind = OP_SYNCWARP;
    op.line = line;
    op.mask = mask;
    warp_collective(op);
}

static void syncthreads(int line) {
    const int tid = rt.cur;
    if (rt.done_count > 0) { fail("__syncthreads at " + line_str(line) + " after some threads of the CTA exited"); }
    if (rt.block_arrived > 0 && rt.block_line != line) {
        fail("__syncthreads at " + line_str(line) + " while others wait at " + line_str(rt.block_line));
    }
    rt.block_line = line;
    if (++rt.block_arrived < rt.nthreads) {
        rt.fibers[tid].state = WAIT_BLOCK;
        rt.fibers[tid].line = line;
        clear_ready(tid);
        switch_to_scheduler();
        return;
    }
    rt.block_arrived = 0;
    for (int t = 0; t < rt.nthreads; t++) {
        if (rt.fibers[t].state == WAIT_BLOCK || t == tid) {
            rt.fibers[t].state = RUNNABLE;
            set_ready(t);
        }
    }
    switch_to_scheduler();
}

static void fiber_main() {
    (*rt.body)();
    const int tid = rt.cur;
    rt.fibers[tid].state = DONE;
    rt.done_count++;
    clear_ready(tid);
    if (rt.block_arrived > 0) {
        fail("exited while other threads wait at __syncthreads (" + line_str(rt.block_line) + ")");
    }
    if (rt.warp_arrived[tid / 32] > 0) { fail("exited while its warp waits at a collective"); }
    switch_to_scheduler();
    abort();
}

#if defined(__x86_64__)
extern "C" void emu_fiber_entry() { fiber_main(); }
#endif

static void fiber_reset(Fiber& f) {
    if (f.stack_lo == nullptr) {
        const size_t page = (size_t)sysconf(_SC_PAGESIZE);
        unsigned char* m = (unsigned char*)mmap(nullptr, kStackBytes + page, PROT_READ | PROT_WRITE,
                                                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) { perror("mmap fiber stack"); exit(2); }
        mprotect(m, page, PROT_NONE); // overflow guard
        f.stack_lo = m + page;
    }
#if defined(__x86_64__)
    uint64_t* p = (uint64_t*)(f.stack_lo + kStackBytes); // 16-byte aligned
    *--p = 0;                                              // fake return address of the entry
    *--p = (uint64_t)(uintptr_t)&emu_fiber_entry;          // ret target
    for (int i = 0; i < 6; i++) { *--p = 0; }              // rbp rbx r12 r13 r14 r15
    *--p = (uint64_t)0x1F80u | ((uint64_t)0x037Fu << 32);  // mxcsr, x87 control word
    f.sp = p;
#else
    getcontext(&f.uc);
    f.uc.uc_stack.ss_sp = f.stack_lo;
    f.uc.uc_stack.ss_size = kStackBytes;
    f.uc.uc_link = nullptr;
    makecontext(&f.uc, (void (*)())fiber_main, 0);
#endif
    f.state = RUNNABLE;
    f.line = 0;
}

enum Schedule { SCHED_ASC = 0, SCHED_DESC = 1, SCHED_RANDOM = 2 };
static const char* schedule_name(int s) { return s == SCHED_ASC ? "asc" : (s == SCHED_DESC ? "desc" : "random"); }
static std::mt19937 sched_rng(12345);

// runs one CTA to completion; false (rt.error set) on a detected error
static bool run_cta(int schedule) {
    const int n = rt.nthreads;
    rt.tid_of_rank.resize(n);
    rt.rank_of.resize(n);
    for (int i = 0; i < n; i++) { rt.tid_of_rank[i] = schedule == SCHED_DESC ? n - 1 - i : i; }
    if (schedule == SCHED_RANDOM) { std::shuffle(rt.tid_of_rank.begin(), rt.tid_of_rank.end(), sched_rng); }
    for (int i = 0; i < n; i++) { rt.rank_of[rt.tid_of_rank[i]] = i; }
    memset(rt.ready, 0, sizeof rt.ready);
    rt.warp_arrived.assign((n + 31) / 32, 0);
    rt.block_arrived = 0;
    rt.done_count = 0;
    for (int t = 0; t < n; t++) {
        fiber_reset(rt.fibers[t]);
        set_ready(t);
    }
    for (;;) {
        int rank = -1;
        for (int w = 0; w < (n + 63) / 64; w++) {
            if (rt.ready[w]) { rank = w * 64 + __builtin_ctzll(rt.ready[w]); break; }
        }
        if (rank < 0) {
            if (rt.done_count == n) { return true; }
            std::string who;
            for (int t = 0; t < n && who.size() < 300; t++) {
                if (rt.fibers[t].state == WAIT_WARP || rt.fibers[t].state == WAIT_BLOCK) {
                    who += " t" + std::to_string(t) + (rt.fibers[t].state == WAIT_WARP ? "@warp:" : "@block:") +
                           std::to_string(rt.fibers[t].line);
                }
            }
            char where[160];
            snprintf(where, sizeof where, "%s block (%u,%u): ", rt.kernel_name, blockIdx.x, blockIdx.y);
            rt.error = std::string(where) + "deadlock, waiting:" + who;
            return false;
        }
        const int tid = rt.tid_of_rank[rank];
        rt.cur = tid;
        threadIdx.x = (unsigned)tid % blockDim.x; // CUDA's linear thread id: x fastest, then y, then z
        threadIdx.y = ((unsigned)tid / blockDim.x) % blockDim.y;
        threadIdx.z = (unsigned)tid / (blockDim.x * blockDim.y);
        rt.switches++;
#if defined(__x86_64__)
        emu_ctx_switch(&rt.sched_sp, rt.fibers[tid].sp);
#else
        swapcontext(&rt.sched_uc, &rt.fibers[tid].uc);
#endif
        if (!rt.error.empty()) { return false; }
    }
}

// ---------------------------------------------------------------------------------------------
// memory with guard pages: the data ends where a PROT_NONE page begins (and a guard page sits
// before the first data page), so a read or write past the end faults; 16-byte aligned
struct Guarded {
    unsigned char* map = nullptr;
    size_t map_len = 0;
    unsigned char* data = nullptr;
    size_t bytes = 0;
};
static Guarded guarded_alloc(size_t bytes) {
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    const size_t rounded = (bytes + 15) & ~(size_t)15;
    const size_t data_pages = (rounded + page - 1) / page + (rounded == 0 ? 1 : 0);
    Guarded g;
    g.map_len = (data_pages + 2) * page;
    g.map = (unsigned char*)mmap(nullptr, g.map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (g.map == MAP_FAILED) { perror("mmap"); exit(2); }
    mprotect(g.map, page, PROT_NONE);
    mprotect(g.map + (data_pages + 1) * page, page, PROT_NONE);
    g.data = g.map + (data_pages + 1) * page - rounded;
    g.bytes = bytes;
    return g;
}
static void guarded_free(Guarded& g) {
    if (g.map) { munmap(g.map, g.map_len); }
    g = Guarded();
}

// the static __shared__ variables of EMU_KERNEL_EMULATOR builds (null when there are none)
extern "C" __attribute__((weak)) unsigned char __start_emu_shared[];
extern "C" __attribute__((weak)) unsigned char __stop_emu_shared[];

// the order in which launch_dims runs the CTAs of a grid
enum CtaOrder { CTA_ASC = 0, CTA_DESC = 1, CTA_RANDOM = 2 };

// kernel<<<grid, block, smem>>>: CTAs one after another (x fastest, or as `order` says), each as
// `block` fibers on a shared-memory buffer of exactly `smem` bytes (guard page after it), filled
// with 0xFF (bf16 and fp32 NaN) before each CTA so that reading what no thread wrote shows up;
// the same for the static __shared__ variables
static inline bool launch_dims(const char* name, EmuDim3 grid, EmuDim3 block3, size_t smem, int schedule, int order,
                        const std::function<void()>& body, std::string* error) {
    const EmuDim3 g3{grid.x, grid.y, grid.z ? grid.z : 1u}, b3{block3.x, block3.y ? block3.y : 1u, block3.z ? block3.z : 1u};
    const long long nthreads = (long long)b3.x * b3.y * b3.z;
    if (nthreads <= 0 || nthreads > kMaxThreads || b3.z > 64) { *error = "bad block size"; return false; }
    const int block = (int)nthreads;
    if (rt.fibers.empty()) { rt.fibers.resize(kMaxThreads); }
    rt.ops.assign(block, LaneOp{});
    rt.res_v.assign(block, 0u);
    rt.res_d.assign((size_t)block * 4, 0.0f);
    rt.nthreads = block;
    rt.body = &body;
    rt.kernel_name = name;
    rt.error.clear();
    Guarded sm = guarded_alloc(smem);
    rt.smem = smem ? sm.data : nullptr;
    gridDim = g3;
    blockDim = b3;
    const size_t ctas = (size_t)g3.x * g3.y * g3.z;
    std::vector<size_t> seq(ctas);
    for (size_t i = 0; i < ctas; i++) { seq[i] = order == CTA_DESC ? ctas - 1 - i : i; }
    if (order == CTA_RANDOM) { std::shuffle(seq.begin(), seq.end(), sched_rng); }
    const size_t static_smem = __start_emu_shared != nullptr ? (size_t)(__stop_emu_shared - __start_emu_shared) : 0;
    bool ok = true;
    for (size_t i = 0; i < ctas && ok; i++) {
        const size_t c = seq[i];
        blockIdx = {(unsigned)(c % g3.x), (unsigned)((c / g3.x) % g3.y), (unsigned)(c / ((size_t)g3.x * g3.y))};
        if (smem) { memset(sm.data, 0xFF, smem); }
        if (static_smem) { memset(__start_emu_shared, 0xFF, static_smem); }
        ok = run_cta(schedule);
    }
    guarded_free(sm);
    rt.smem = nullptr;
    if (!ok) { *error = rt.error; }
    return ok;
}

// the flash emulator's entry: a 1-D block (a multiple of 32 threads), CTAs in ascending order
static inline bool launch(const char* name, EmuDim3 grid, int block, size_t smem, int schedule,
                   const std::function<void()>& body, std::string* error) {
    if (block <= 0 || block > kMaxThreads || block % 32 != 0) { *error = "bad block size"; return false; }
    return launch_dims(name, EmuDim3{grid.x, grid.y, 1}, EmuDim3{(unsigned)block, 1, 1}, smem, schedule, CTA_ASC, body, error);
}

// A crash in an emulated kernel (a guard page hit: an out-of-bounds global or shared access, or a
// fiber stack overflow) ends the run with one FAIL line naming the driver's tag, the case, the kernel,
// the block and the thread, written from an alternate stack (the fiber's may be the one that overflowed).
inline const char* fault_tag = "";
inline const char* fault_case = ""; // the driver sets it before each case
static void on_fault(int sig, siginfo_t* si, void*) {
    char msg[512];
    const int n = snprintf(msg, sizeof msg,
                           "FAIL %s %s: signal %d at address %p in %s block (%u,%u,%u) thread (%u,%u,%u) "
                           "(a guard page: out-of-bounds global/shared access, or fiber stack overflow)\n",
                           fault_tag, fault_case, sig, si->si_addr, rt.kernel_name, blockIdx.x, blockIdx.y, blockIdx.z,
                           threadIdx.x, threadIdx.y, threadIdx.z);
    if (n > 0) { ssize_t w = write(1, msg, (size_t)std::min(n, (int)sizeof msg - 1)); (void)w; }
    _exit(1);
}
static void install_fault_handler(const char* tag) {
    fault_tag = tag;
    static unsigned char altstack[64 * 1024];
    stack_t ss{};
    ss.ss_sp = altstack;
    ss.ss_size = sizeof altstack;
    sigaltstack(&ss, nullptr);
    struct sigaction sa{};
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigaction(SIGSEGV, &sa, nullptr);
    sigaction(SIGBUS, &sa, nullptr);
}

} // namespace emu

// ---------------------------------------------------------------------------------------------
// what the extracted text calls
#define __syncthreads() emu::syncthreads(__LINE__)
#define __shfl_xor_sync(mask, v, lanemask) emu::shfl(emu::OP_SHFL_XOR, (mask), (v), (lanemask), __LINE__)
#define __shfl_down_sync(mask, v, delta) emu::shfl(emu::OP_SHFL_DOWN, (mask), (v), (delta), __LINE__)
#define __shfl_up_sync(mask, v, delta) emu::shfl(emu::OP_SHFL_UP, (mask), (v), (delta), __LINE__)
#define __shfl_sync(mask, v, src_lane) emu::shfl(emu::OP_SHFL_IDX, (mask), (v), (src_lane), __LINE__)
#define __syncwarp(...) emu::syncwarp((__VA_ARGS__ + 0) ? (__VA_ARGS__ + 0) : 0xFFFFFFFFu, __LINE__)

#if !defined(EMU_KERNEL_EMULATOR)
// the trainer's warp_sum (train_gpt2.cu, "reductions"), the same butterfly; kernel_emulator.cpp
// extracts the section that defines it
static inline float warp_sum(float v) {
    for (int off = 16; off > 0; off >>= 1) { v += __shfl_xor_sync(0xFFFFFFFFu, v, off); }
    return v;
}
#else
// device functions of CUDA's headers the trainer's other kernels call, as host code (__expf and
// __logf are glibc's, exact). Atomics and fences are plain operations: one OS thread, CTAs one at a
// time, so every earlier CTA has finished
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }
static inline unsigned int min(unsigned int a, unsigned int b) { return a < b ? a : b; }
static inline unsigned int max(unsigned int a, unsigned int b) { return a > b ? a : b; }
static inline unsigned int min(int a, unsigned int b) { return min((unsigned int)a, b); } // CUDA's mixed overloads
static inline unsigned int min(unsigned int a, int b) { return min(a, (unsigned int)b); }
static inline unsigned int max(int a, unsigned int b) { return max((unsigned int)a, b); }
static inline unsigned int max(unsigned int a, int b) { return max(a, (unsigned int)b); }
static inline long long min(long long a, long long b) { return a < b ? a : b; }
static inline long long max(long long a, long long b) { return a > b ? a : b; }
static inline unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
static inline unsigned long long max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
static inline size_t min(size_t a, size_t b) { return a < b ? a : b; }
static inline size_t max(size_t a, size_t b) { return a > b ? a : b; }
static inline float min(float a, float b) { return fminf(a, b); }
static inline float max(float a, float b) { return fmaxf(a, b); }
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline float __fdividef(float a, float b) { return a / b; }
static inline unsigned int atomicAdd(unsigned int* p, unsigned int v) { const unsigned int o = *p; *p = o + v; return o; }
static inline int atomicAdd(int* p, int v) { const int o = *p; *p = (int)((unsigned int)o + (unsigned int)v); return o; }
static inline unsigned int atomicInc(unsigned int* p, unsigned int limit) { const unsigned int o = *p; *p = o >= limit ? 0u : o + 1u; return o; }
static inline unsigned int atomicExch(unsigned int* p, unsigned int v) { const unsigned int o = *p; *p = v; return o; }
static inline unsigned int atomicCAS(unsigned int* p, unsigned int cmp, unsigned int v) { const unsigned int o = *p; if (o == cmp) { *p = v; } return o; }
static inline void __threadfence() {}
static inline void __threadfence_block() {}
// cache-hinted loads and stores: plain ones of the same type (alignment checked by UBSan)
template <class T> static inline T __ldcs(const T* p) { return *p; }
template <class T> static inline T __ldcg(const T* p) { return *p; }
template <class T> static inline T __ldca(const T* p) { return *p; }
template <class T> static inline T __ldlu(const T* p) { return *p; }
template <class T> static inline T __ldcv(const T* p) { return *p; }
template <class T> static inline T __ldg(const T* p) { return *p; }
template <class T> static inline void __stcs(T* p, T v) { *p = v; }
template <class T> static inline void __stcg(T* p, T v) { *p = v; }
template <class T> static inline void __stwb(T* p, T v) { *p = v; }
template <class T> static inline void __stwt(T* p, T v) { *p = v; }
#endif

// the dynamic shared memory of the running CTA (replaces `extern __shared__ ... flash_smem[]`)
static inline unsigned char* emu_flash_smem() { return emu::rt.smem; }

// replaces the body of mma_16816: c (16x8 fp32) += a (16x16 bf16) b (16x8 bf16), warp-collective
static inline void emu_mma_16816_at(float c[4], const uint32_t a[4], const uint32_t b[2], int line) {
    emu::LaneOp op{};
    op.kind = emu::OP_MMA;
    op.line = line;
    op.mask = 0xFFFFFFFFu;
    for (int i = 0; i < 4; i++) { op.a[i] = a[i]; op.c[i] = c[i]; }
    op.b[0] = b[0];
    op.b[1] = b[1];
    emu::warp_collective(op);
    for (int i = 0; i < 4; i++) { c[i] = emu::rt.res_d[(size_t)emu::rt.cur * 4 + i]; }
}
#define emu_mma_16816(c, a, b) emu_mma_16816_at((c), (a), (b), __LINE__)

#endif // FLASH_EMULATOR_SHIM_H
