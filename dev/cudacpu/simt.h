/*
simt.h: the SIMT machine of the CPU runtime (dev/cudacpu/README.md): CUDA threads as fibers, CTAs,
barriers, warp collectives, atomics, shared memory. cuda_cpu.h includes it; kernels see it through
the macros at the end of cuda_cpu.h.

Threads are fibers (user-level contexts on one OS thread): a fiber switch costs tens of nanoseconds,
an OS-thread barrier ~150 us on a 2-core machine. Fibers also make the interleaving a choice: within
a CTA the scheduler always resumes the runnable thread that comes first in a priority order
(ascending thread id, descending, or a random permutation), so one warp runs as far ahead of the
others as the barriers allow, and a missing __syncthreads shows up as a wrong result.

Several CTAs are live at once (kLiveCtas). The running CTA keeps the processor until its threads
all wait or exit, or until one of them reaches an atomic: there the scheduler moves to another live
CTA, so that a cross-block protocol (a ticket counter, a partial written after the ticket)
interleaves with other blocks at exactly the points where it can go wrong. A __threadfence waits
until no other thread of the CTA can run (weak_memory.h: then the CTA's stores so far become visible
to the others). CTAs start in ascending, descending or random order (per launch).

Checked (each ends the launch with a message naming the kernel, the block, the thread and
train_gpt2.cu's line):
  - __syncthreads reached at different lines by threads of one CTA, or after some threads exited;
  - a warp collective whose 32 lanes disagree on the operation or line, in a partial warp, or with a
    mask other than 0xFFFFFFFF (one that a lane exited before never completes: a deadlock);
  - deadlock (no thread of a CTA can run);
  - ldmatrix: an address outside the CTA's shared memory or not 16-byte aligned;
  - cp.async: a destination outside shared memory, a misaligned source or destination, a thread that
    exits with copies in flight (a missing cp.async.wait_group).

cp.async (the model, stricter than any one GPU): a copy's 16 (8, 4) destination bytes hold 0xFF from
its issue until the wait that retires its group, and the source is read at issue. So a read of a
tile before its wait_group (RAW), and a copy issued into a buffer that another warp still reads
before a barrier separates them (WAR), both read NaN. A __syncthreads does not complete copies: only
the issuing thread's own cp.async.wait_group / wait_all does, as on a GPU.
*/
#ifndef CUDACPU_SIMT_H
#define CUDACPU_SIMT_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <functional>
#include <random>
#include <string>
#include <vector>
#include <sys/mman.h>
#include <unistd.h>

#include "weak_memory.h"

// the running thread's coordinates, set by the scheduler at every switch. External linkage (inline
// variables), so that the compiler must assume the context switch (an opaque call) changes them.
inline uint3 threadIdx, blockIdx;
inline dim3 blockDim, gridDim;

namespace cudacpu {

// ---------------------------------------------------------------------------------------------
// context switch: save callee-saved registers and the FP control words on the current stack, store
// sp, load the other one
#if !defined(__x86_64__)
#error "dev/cudacpu: the fiber switch is written for x86-64"
#endif
extern "C" void cudacpu_ctx_switch(void** save_sp, void* load_sp);
// the floating-point control words are not switched: no kernel changes them
asm(".text\n"
    ".globl cudacpu_ctx_switch\n"
    ".type cudacpu_ctx_switch,@function\n"
    "cudacpu_ctx_switch:\n"
    "    pushq %rbp\n    pushq %rbx\n    pushq %r12\n    pushq %r13\n    pushq %r14\n    pushq %r15\n"
    "    movq %rsp, (%rdi)\n"
    "    movq %rsi, %rsp\n"
    "    popq %r15\n    popq %r14\n    popq %r13\n    popq %r12\n    popq %rbx\n    popq %rbp\n"
    "    ret\n"
    ".size cudacpu_ctx_switch,.-cudacpu_ctx_switch\n");

// WAIT_QUIET: until no other thread of the CTA can run (wgmma.wait_group, fence.proxy.async: hopper.h);
// WAIT_MBAR: until the phase of an mbarrier it waits for completes; WAIT_NAMED: at a named barrier
// (bar.sync id, n: hopper.h)
enum FiberState { RUNNABLE, WAIT_WARP, WAIT_BLOCK, WAIT_FENCE, WAIT_QUIET, WAIT_MBAR, WAIT_NAMED, DONE };
enum OpKind { OP_SHFL_XOR = 1, OP_MMA = 2, OP_SHFL_DOWN = 3, OP_SHFL_UP = 4, OP_SHFL_IDX = 5, OP_SYNCWARP = 6,
              OP_BALLOT = 7, OP_LDMATRIX = 8 };
enum Schedule { SCHED_ASC = 0, SCHED_DESC = 1, SCHED_RANDOM = 2 };
static const int kMaxThreads = 1024;
static const int kLiveCtas = 4;
static const size_t kStackBytes = 64 * 1024;
static const uint64_t kStackCanary = 0x5AFE57AC4CA9A21Eull;

struct LaneOp {
    int kind, line;
    unsigned mask;
    int arg;    // shuffles: the lane mask, delta or source lane; ballot: the predicate; ldmatrix: the row address
    uint32_t v; // shuffles: the value's bits
    uint32_t a[4], b[2];
    float c[4];
};

// one cp.async in flight: its bytes were read at issue; they land in shared memory when the issuing
// thread's wait retires its group (group 0: issued after the last commit, in no group yet)
struct AsyncCopy {
    unsigned char* dst;
    int bytes;
    long group;
    unsigned char data[16];
};

struct Fiber {
    void* sp = nullptr;
    unsigned char* stack_lo = nullptr;
    unsigned char* stack_hi = nullptr; // where the stack starts, staggered (fibers_alloc)
    int state = DONE;
    int line = 0; // where it waits
    uint64_t wait_addr = 0; // WAIT_MBAR: the barrier's shared address; WAIT_NAMED: the barrier's id
    int wait_parity = 0;    // WAIT_MBAR: the phase parity it waits for; WAIT_QUIET: what completes then (hopper.h)
    uint3 tidx{0, 0, 0}; // its threadIdx (cta_start), so that a switch needs no division
};

struct HopperCta; // hopper.h: the CTA's mbarriers, bulk copies, wgmma in flight, async-proxy view

// one live CTA: its threads, barrier state and shared memory
struct Cta {
    bool live = false;
    uint3 idx{0, 0, 0};
    Fiber* fibers = nullptr; // kMaxThreads, stacks made on first use
    std::vector<int> tid_of_rank, rank_of;
    uint64_t ready[kMaxThreads / 64];
    int block_arrived = 0, block_line = 0, done_count = 0;
    int fence_waiting = 0; // threads at a __threadfence (threadfence below)
    std::vector<int> warp_arrived;
    std::vector<LaneOp> ops;
    std::vector<uint32_t> res_v;
    std::vector<float> res_d;       // mma: 4 per lane
    std::vector<uint32_t> res_r;    // ldmatrix: 4 registers per lane
    std::vector<std::vector<AsyncCopy>> async_copies; // per thread: its cp.async copies in flight
    std::vector<long> async_groups;                  // per thread: groups committed so far
    unsigned char* dyn_smem = nullptr; // this launch's dynamic shared memory, guard page after it
    unsigned char* dyn_map = nullptr;
    size_t dyn_map_len = 0;
    // the static __shared__ variables (rewrite.py: each declaration is a shared_var call with its own key)
    unsigned char* static_smem = nullptr; // kStaticSmemBytes, filled with 0xFF at the CTA's start
    size_t static_used = 0;
    std::vector<long> static_offset; // by declaration key; -1: not declared yet in this CTA
    HopperCta* hopper = nullptr;     // made on the CTA slot's first Hopper instruction (hopper.h)
};
static const size_t kStaticSmemBytes = 48 * 1024; // CUDA's limit for static shared memory

struct Machine {
    Cta ctas[kLiveCtas];
    int cur_cta = -1, cur = -1; // running CTA slot, thread
    int nthreads = 0;
    void* sched_sp = nullptr;
    const std::function<void()>* body = nullptr;
    bool yield_cta = false;     // the running thread asked the scheduler to move to another CTA
    int live_ctas = kLiveCtas;  // CTAs live at once (CUDA_CPU_LIVE_CTAS, 1 to kLiveCtas)
    size_t dyn_smem_bytes = 0;  // this launch's dynamic shared memory
    size_t smem_limit = 48 * 1024; // static + dynamic may not exceed it (227 KiB once the kernel opted in)
    int schedule = SCHED_ASC;
    std::string error;
    const char* kernel_name = "";
    int launch_line = 0;
    std::mt19937 rng{12345};
    long long switches = 0;
};
inline Machine m; // external linkage, for the same reason as threadIdx

static inline Cta& cta() { return m.ctas[m.cur_cta]; }
static inline void set_ready(Cta& c, int tid) { const int r = c.rank_of[tid]; c.ready[r >> 6] |= 1ull << (r & 63); }
static inline void clear_ready(Cta& c, int tid) { const int r = c.rank_of[tid]; c.ready[r >> 6] &= ~(1ull << (r & 63)); }

static void switch_to_scheduler() {
    cudacpu_ctx_switch(&cta().fibers[m.cur].sp, m.sched_sp);
    // resumed: the scheduler set threadIdx, blockIdx, m.cur_cta and m.cur
}

static int pick_fiber(Cta& c);
// a thread waits (barrier, warp collective): the next runnable thread of its CTA in the priority
// order runs, switched to directly (half the cost of a detour through the scheduler); with none,
// the scheduler decides (the CTA's end, a deadlock)
static void wait_and_run_next() {
    Cta& c = cta();
    const int next = pick_fiber(c);
    if (next < 0) { switch_to_scheduler(); return; }
    void** self = &c.fibers[m.cur].sp;
    m.cur = next;
    threadIdx = c.fibers[next].tidx;
    m.switches++;
    cudacpu_ctx_switch(self, c.fibers[next].sp);
}

static std::string line_str(int line) { return "train_gpt2.cu:" + std::to_string(line); }

// ends the launch: the scheduler sees m.error and abandons every fiber (they hold no resources)
[[noreturn]] static void fail(const std::string& msg) {
    if (m.error.empty()) {
        char where[256];
        snprintf(where, sizeof where, "%s (launched at %s) block (%u,%u,%u) thread (%u,%u,%u): ", m.kernel_name,
                 line_str(m.launch_line).c_str(), blockIdx.x, blockIdx.y, blockIdx.z, threadIdx.x, threadIdx.y, threadIdx.z);
        m.error = std::string(where) + msg;
    }
    Cta& c = cta();
    c.fibers[m.cur].state = DONE;
    clear_ready(c, m.cur);
    switch_to_scheduler();
    abort(); // never resumed
}

// ---------------------------------------------------------------------------------------------
// the shared-memory window: the 32-bit addresses that __cvta_generic_to_shared gives and that
// ldmatrix and cp.async take. The running CTA's static __shared__ variables sit at [0, 48 KiB), its
// dynamic shared memory at kDynWindow. An address maps back only into what the CTA has: the static
// variables declared so far, the launch's dynamic bytes.
static const uint64_t kDynWindow = 0x10000;

static inline uint64_t shared_window_addr(const void* p) {
    Cta& c = cta();
    const unsigned char* b = (const unsigned char*)p;
    if (c.static_smem && b >= c.static_smem && b < c.static_smem + c.static_used) { return (uint64_t)(b - c.static_smem); }
    if (c.dyn_smem && b >= c.dyn_smem && b <= c.dyn_smem + m.dyn_smem_bytes) { return kDynWindow + (uint64_t)(b - c.dyn_smem); }
    fail("__cvta_generic_to_shared of a pointer that is not this CTA's shared memory");
}

// `bytes` of the window at addr, `align`-aligned, for what (an instruction) at line
static unsigned char* shared_window_ptr(uint64_t addr, size_t bytes, size_t align, const char* what, int line) {
    Cta& c = cta();
    if (addr % align != 0) {
        fail(std::string(what) + " at " + line_str(line) + ": shared address " + std::to_string(addr) + " is not " +
             std::to_string(align) + "-byte aligned");
    }
    if (addr + bytes <= c.static_used) { return c.static_smem + addr; }
    if (addr >= kDynWindow && addr - kDynWindow + bytes <= m.dyn_smem_bytes) { return c.dyn_smem + (addr - kDynWindow); }
    fail(std::string(what) + " at " + line_str(line) + ": shared address " + std::to_string(addr) + " (+" +
         std::to_string(bytes) + " bytes) is outside this CTA's shared memory (static " + std::to_string(c.static_used) +
         " bytes at 0, dynamic " + std::to_string(m.dyn_smem_bytes) + " at " + std::to_string(kDynWindow) + ")");
}

// ---------------------------------------------------------------------------------------------
// the m16n8k16 fragment layout, from the PTX ISA (not from the kernel's comment):
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

// D = A B + C for one warp; the products summed in double, then rounded once to fp32. A and B are
// unpacked into doubles (B transposed, so that each output's 16 products read two contiguous rows),
// the sum in k order as before: the same bits. Not inlined: its fragments would otherwise sit in
// warp_collective's frame, on every waiting lane's stack
__attribute__((noinline)) static void mma_compute(Cta& c, int warp0) {
    double A[16][16], Bt[8][16];
    float C[16][8];
    for (int lane = 0; lane < 32; lane++) {
        const LaneOp& op = c.ops[warp0 + lane];
        for (int reg = 0; reg < 4; reg++) {
            for (int half = 0; half < 2; half++) {
                int r, cl;
                frag_a_coord(lane, reg, half, &r, &cl);
                A[r][cl] = (double)bf16_bits_to_float((op.a[reg] >> (16 * half)) & 0xFFFFu);
            }
        }
        for (int reg = 0; reg < 2; reg++) {
            for (int half = 0; half < 2; half++) {
                int k, n;
                frag_b_coord(lane, reg, half, &k, &n);
                Bt[n][k] = (double)bf16_bits_to_float((op.b[reg] >> (16 * half)) & 0xFFFFu);
            }
        }
        for (int e = 0; e < 4; e++) {
            int r, cl;
            frag_c_coord(lane, e, &r, &cl);
            C[r][cl] = op.c[e];
        }
    }
    for (int lane = 0; lane < 32; lane++) {
        float* d = &c.res_d[(size_t)(warp0 + lane) * 4];
        for (int e = 0; e < 4; e++) {
            int r, cl;
            frag_c_coord(lane, e, &r, &cl);
            const double* a = A[r];
            const double* b = Bt[cl];
            double acc = C[r][cl];
            for (int k = 0; k < 16; k++) { acc += a[k] * b[k]; }
            d[e] = (float)acc;
        }
    }
}

// ldmatrix.sync.aligned.m8n8.x{1,2,4}[.trans].shared.b16 for one warp (PTX ISA): lanes 8j..8j+7 give
// the addresses of matrix j's 8 rows (16 bytes each); register j of lane l receives matrix j's row l/4,
// elements 2(l%4) and 2(l%4)+1 (the lower in the low half), or with .trans its column l/4, rows
// 2(l%4) and 2(l%4)+1: the A/B fragment layout of mma.sync, read straight from a row-major tile
__attribute__((noinline)) static void ldmatrix_compute(Cta& c, int warp0, int line) {
    const LaneOp& op0 = c.ops[warp0];
    const int nmat = (int)op0.a[0], trans = (int)op0.a[1];
    uint16_t mat[4][8][8];
    for (int j = 0; j < nmat; j++) {
        for (int r = 0; r < 8; r++) {
            const uint64_t addr = (uint32_t)c.ops[warp0 + 8 * j + r].arg;
            memcpy(mat[j][r], shared_window_ptr(addr, 16, 16, "ldmatrix", line), 16);
        }
    }
    for (int l = 0; l < 32; l++) {
        for (int j = 0; j < nmat; j++) {
            const int i = l / 4, k = 2 * (l % 4);
            const uint16_t lo = trans ? mat[j][k][i] : mat[j][i][k], hi = trans ? mat[j][k + 1][i] : mat[j][i][k + 1];
            c.res_r[(size_t)(warp0 + l) * 4 + j] = (uint32_t)lo | ((uint32_t)hi << 16);
        }
    }
}

// a lane's slot for a warp collective, its operation filled in (in place: no copy to load back)
static inline LaneOp& lane_op(int kind, int line, unsigned mask, int arg) {
    LaneOp& op = cta().ops[m.cur];
    op.kind = kind;
    op.line = line;
    op.mask = mask;
    op.arg = arg;
    return op;
}

// a lane arrives at a warp collective (its lane_op filled in); the last one checks agreement,
// computes, releases the warp
static void warp_collective() {
    Cta& c = cta();
    const int tid = m.cur, warp = tid / 32, warp0 = warp * 32;
    const LaneOp& op = c.ops[tid];
    if (warp0 + 32 > m.nthreads) { fail("warp collective at " + line_str(op.line) + " in a partial warp"); }
    if (++c.warp_arrived[warp] < 32) {
        c.fibers[tid].state = WAIT_WARP;
        c.fibers[tid].line = op.line;
        clear_ready(c, tid);
        wait_and_run_next();
        return;
    }
    c.warp_arrived[warp] = 0;
    // a shfl_sync's source lane and a ballot's predicate may differ per lane; nothing else may
    const bool per_lane_arg = op.kind == OP_SHFL_IDX || op.kind == OP_BALLOT || op.kind == OP_LDMATRIX;
    for (int l = 0; l < 32; l++) {
        const LaneOp& o = c.ops[warp0 + l];
        if (o.kind != op.kind || o.line != op.line || o.mask != op.mask || (o.arg != op.arg && !per_lane_arg)) {
            fail("divergent warp collective: lane " + std::to_string(l) + " at " + line_str(o.line) + " (kind " +
                 std::to_string(o.kind) + "), last lane at " + line_str(op.line) + " (kind " + std::to_string(op.kind) + ")");
        }
    }
    if (op.kind == OP_MMA) {
        mma_compute(c, warp0);
    } else if (op.kind == OP_LDMATRIX) {
        ldmatrix_compute(c, warp0, op.line);
    } else if (op.kind == OP_BALLOT) {
        uint32_t bits = 0;
        for (int l = 0; l < 32; l++) { bits |= (c.ops[warp0 + l].arg != 0 ? 1u : 0u) << l; }
        for (int l = 0; l < 32; l++) { c.res_v[warp0 + l] = bits; }
    } else if (op.kind != OP_SYNCWARP) {
        const int kind = op.kind;
        for (int l = 0; l < 32; l++) {
            const int d = c.ops[warp0 + l].arg;
            int src = l;
            if (kind == OP_SHFL_XOR) { src = l ^ d; }
            if (kind == OP_SHFL_DOWN && l + d < 32) { src = l + d; } // past the warp: the lane's own value
            if (kind == OP_SHFL_UP && l - d >= 0) { src = l - d; }
            if (kind == OP_SHFL_IDX) { src = d & 31; }
            c.res_v[warp0 + l] = c.ops[warp0 + src].v;
        }
    }
    for (int l = 0; l < 32; l++) {
        c.fibers[warp0 + l].state = RUNNABLE;
        set_ready(c, warp0 + l);
    }
}

static inline uint32_t shfl_bits(int kind, unsigned mask, uint32_t v, int arg, int line) {
    static const char* names[] = {"", "__shfl_xor_sync", "", "__shfl_down_sync", "__shfl_up_sync", "__shfl_sync"};
    if (mask != 0xFFFFFFFFu) { fail(std::string(names[kind]) + " with a partial mask at " + line_str(line)); }
    if (kind != OP_SHFL_IDX && (arg < 0 || arg > 31)) { fail(std::string(names[kind]) + " lane argument out of range at " + line_str(line)); }
    lane_op(kind, line, mask, arg).v = v;
    warp_collective();
    return cta().res_v[m.cur];
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

static inline unsigned ballot(unsigned mask, int pred, int line) {
    if (mask != 0xFFFFFFFFu) { fail("__ballot_sync with a partial mask at " + line_str(line)); }
    lane_op(OP_BALLOT, line, mask, pred != 0);
    warp_collective();
    return cta().res_v[m.cur];
}

static inline void syncwarp(unsigned mask, int line) {
    if (mask != 0xFFFFFFFFu) { fail("__syncwarp with a partial mask at " + line_str(line)); }
    lane_op(OP_SYNCWARP, line, mask, 0);
    warp_collective();
}

static inline void mma_16816(float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4], int line) {
    LaneOp& op = lane_op(OP_MMA, line, 0xFFFFFFFFu, 0);
    for (int i = 0; i < 4; i++) { op.a[i] = a[i]; op.c[i] = c[i]; }
    op.b[0] = b[0];
    op.b[1] = b[1];
    warp_collective();
    for (int i = 0; i < 4; i++) { d[i] = cta().res_d[(size_t)m.cur * 4 + i]; }
}

// one lane's ldmatrix: its row address (the lanes past the matrices' 8 each are ignored, as on a GPU)
static inline void ldmatrix(uint32_t* d, int nmat, int trans, uint64_t addr, int line) {
    if (addr > 0xFFFFFFFFull) { fail("ldmatrix at " + line_str(line) + ": the address is not a 32-bit shared-memory address"); }
    LaneOp& op = lane_op(OP_LDMATRIX, line, 0xFFFFFFFFu, (int)(uint32_t)addr);
    op.a[0] = (uint32_t)nmat;
    op.a[1] = (uint32_t)trans;
    warp_collective();
    for (int j = 0; j < nmat; j++) { d[j] = cta().res_r[(size_t)m.cur * 4 + j]; }
}

// cp.async.{ca,cg}.shared.global [dst], [src], bytes(, src_bytes): the first src_bytes are read now
// (the rest of the copy is zeros), and dst holds 0xFF until the copy's group is waited for
static void cp_async(uint64_t dst_addr, const void* src, int bytes, int src_bytes, int line) {
    if (bytes != 4 && bytes != 8 && bytes != 16) { fail("cp.async at " + line_str(line) + ": copy size must be 4, 8 or 16"); }
    if (src_bytes < 0 || src_bytes > bytes) { fail("cp.async at " + line_str(line) + ": source size outside 0.." + std::to_string(bytes)); }
    if ((uintptr_t)src % (uintptr_t)bytes != 0) { fail("cp.async at " + line_str(line) + ": global source not " + std::to_string(bytes) + "-byte aligned"); }
    AsyncCopy cp;
    cp.dst = shared_window_ptr(dst_addr, (size_t)bytes, (size_t)bytes, "cp.async", line);
    cp.bytes = bytes;
    cp.group = 0;
    memset(cp.data, 0, sizeof cp.data);
    if (src_bytes > 0) { memcpy(cp.data, src, (size_t)src_bytes); }
    memset(cp.dst, 0xFF, (size_t)bytes);
    cta().async_copies[m.cur].push_back(cp);
}

// a thread's commit of asynchronous work (cp.async, hopper.h's bulk stores and wgmma): what it issued
// since its last commit (group 0) forms its next group, maybe empty
template <class Queue>
static void commit_group(Queue& issued, long& groups) {
    const long g = ++groups;
    for (auto& e : issued) { if (e.group == 0) { e.group = g; } }
}

// cp.async.commit_group
static void cp_async_commit() { commit_group(cta().async_copies[m.cur], cta().async_groups[m.cur]); }

// cp.async.wait_group n: every committed group but the newest n has landed (uncommitted copies wait)
static void cp_async_wait(long n, int line) {
    if (n < 0) { fail("cp.async.wait_group at " + line_str(line) + " with a negative count"); }
    Cta& c = cta();
    std::vector<AsyncCopy>& q = c.async_copies[m.cur];
    const long done = c.async_groups[m.cur] - n;
    size_t keep = 0;
    for (size_t i = 0; i < q.size(); i++) {
        if (q[i].group != 0 && q[i].group <= done) {
            memcpy(q[i].dst, q[i].data, (size_t)q[i].bytes);
        } else {
            q[keep++] = q[i];
        }
    }
    q.resize(keep);
}

static void syncthreads(int line) {
    Cta& c = cta();
    const int tid = m.cur;
    if (c.done_count > 0) { fail("__syncthreads at " + line_str(line) + " after some threads of the CTA exited"); }
    if (c.block_arrived > 0 && c.block_line != line) {
        fail("__syncthreads at " + line_str(line) + " while others wait at " + line_str(c.block_line));
    }
    c.block_line = line;
    if (++c.block_arrived < m.nthreads) {
        c.fibers[tid].state = WAIT_BLOCK;
        c.fibers[tid].line = line;
        clear_ready(c, tid);
        wait_and_run_next();
        return;
    }
    c.block_arrived = 0;
    for (int t = 0; t < m.nthreads; t++) {
        if (c.fibers[t].state == WAIT_BLOCK || t == tid) {
            c.fibers[t].state = RUNNABLE;
            set_ready(c, t);
        }
    }
    switch_to_scheduler(); // the priority order decides who runs first after the barrier
}

// __threadfence: the thread waits until no other thread of its CTA can run; then the fences of the
// threads waiting take effect together (weak_memory.h: the CTA's stores so far become visible to other
// CTAs) and they go on. So a fence comes after whatever the CTA's other threads can do before their
// next wait, never between one thread's stores and another's fence: one thread's fence does not
// publish the stores another thread makes after its own fence (the unit of weak_memory.h is the CTA).
static void threadfence() {
    weak::note_sync();
    Cta& c = cta();
    c.fibers[m.cur].state = WAIT_FENCE;
    clear_ready(c, m.cur);
    c.fence_waiting++;
    wait_and_run_next();
}
static void fences_complete(Cta& c) {
    weak::fence();
    for (int t = 0; t < m.nthreads; t++) {
        if (c.fibers[t].state == WAIT_FENCE) {
            c.fibers[t].state = RUNNABLE;
            set_ready(c, t);
        }
    }
    c.fence_waiting = 0;
}

// an atomic: another live CTA runs first (the running thread stays runnable)
static inline void cta_switch_point() {
    weak::note_sync();
    m.yield_cta = true;
    switch_to_scheduler();
}

// `__shared__ T name;` in a kernel (rewritten by rewrite.py to `T& name = shared_var<T>(key, align)`):
// every thread of the running CTA gets the same storage, each CTA its own, poisoned (0xFF) at its start
template <class T>
static T& shared_var(int key, size_t align) {
    Cta& c = cta();
    if ((size_t)key >= c.static_offset.size()) { c.static_offset.resize((size_t)key + 1, -1); }
    if (c.static_offset[(size_t)key] < 0) {
        const size_t off = (c.static_used + align - 1) / align * align;
        if (off + sizeof(T) > kStaticSmemBytes) { fail("static __shared__ memory over 48 KiB"); }
        if (off + sizeof(T) + m.dyn_smem_bytes > m.smem_limit) {
            fail("static __shared__ (" + std::to_string(off + sizeof(T)) + " bytes) plus dynamic (" +
                 std::to_string(m.dyn_smem_bytes) + ") over the kernel's limit of " + std::to_string(m.smem_limit) + " bytes");
        }
        memset(c.static_smem + off, 0xFF, sizeof(T));
        c.static_offset[(size_t)key] = (long)off;
        c.static_used = off + sizeof(T);
    }
    return *reinterpret_cast<T*>(c.static_smem + c.static_offset[(size_t)key]);
}

#include "hopper.h"

static void fiber_main() {
    (*m.body)();
    Cta& c = cta();
    const int tid = m.cur;
    c.fibers[tid].state = DONE;
    c.done_count++;
    clear_ready(c, tid);
    if (memcmp(c.fibers[tid].stack_lo, &kStackCanary, sizeof kStackCanary) != 0) {
        fprintf(stderr, "cuda-cpu: %s: a thread overflowed its %zu KiB stack\n", m.kernel_name, kStackBytes / 1024);
        abort();
    }
    if (c.block_arrived > 0) {
        fail("exited while other threads wait at __syncthreads (" + line_str(c.block_line) + ")");
    }
    if (c.warp_arrived[tid / 32] > 0) { fail("exited while its warp waits at a collective"); }
    hopper_thread_exit(c, tid);
    if (!c.async_copies[tid].empty()) {
        fail("exited with " + std::to_string(c.async_copies[tid].size()) +
             " cp.async copies in flight (a missing cp.async.wait_group: they never land)");
    }
    switch_to_scheduler();
    abort();
}
extern "C" void cudacpu_fiber_entry() { fiber_main(); }

// A CTA slot's stacks are one mapping (transparent huge pages where the kernel allows: one TLB entry
// covers 32 stacks, which matters with 1024 fibers); a canary at each stack's low end, checked when
// the thread exits, stands in for guard pages (which would split the huge pages).
static Fiber* fibers_alloc() {
    Fiber* f = new Fiber[kMaxThreads];
    const size_t bytes = (size_t)kMaxThreads * kStackBytes;
    unsigned char* p = (unsigned char*)mmap(nullptr, bytes + (2u << 20), PROT_READ | PROT_WRITE,
                                            MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) { perror("cudacpu: mmap fiber stacks"); exit(2); }
    unsigned char* base = (unsigned char*)(((uintptr_t)p + (2u << 20) - 1) & ~(uintptr_t)((2u << 20) - 1));
    madvise(base, bytes, MADV_HUGEPAGE);
    // Stacks 64 KiB apart would put every thread's hot frames in the same cache sets (L1 repeats every
    // 4 KiB, L2 every 64 KiB): the 32 lanes of a warp collective then evict each other at every switch.
    // Each stack starts at its own offset below its top (a multiple of 320 bytes, within 16 KiB).
    for (int t = 0; t < kMaxThreads; t++) {
        f[t].stack_lo = base + (size_t)t * kStackBytes;
        f[t].stack_hi = f[t].stack_lo + kStackBytes - (size_t)t * 320 % (16 * 1024);
    }
    return f;
}

static void fiber_reset(Fiber& f) {
    memcpy(f.stack_lo, &kStackCanary, sizeof kStackCanary);
    uint64_t* p = (uint64_t*)f.stack_hi; // 16-byte aligned
    *--p = 0;                                              // fake return address of the entry
    *--p = (uint64_t)(uintptr_t)&cudacpu_fiber_entry;      // ret target
    for (int i = 0; i < 6; i++) { *--p = 0; }              // rbp rbx r12 r13 r14 r15
    f.sp = p;
    f.state = RUNNABLE;
    f.line = 0;
}

// a CTA starts in a slot: fresh fibers, shared memory filled with 0xFF (a bf16 and fp32 NaN), so
// that reading what no thread of this CTA wrote shows up
static void cta_start(int slot, uint3 idx, size_t smem) {
    Cta& c = m.ctas[slot];
    const int n = m.nthreads;
    if (c.fibers == nullptr) { c.fibers = fibers_alloc(); }
    c.live = true;
    c.idx = idx;
    c.tid_of_rank.resize(n);
    c.rank_of.resize(n);
    for (int i = 0; i < n; i++) { c.tid_of_rank[i] = m.schedule == SCHED_DESC ? n - 1 - i : i; }
    if (m.schedule == SCHED_RANDOM) { std::shuffle(c.tid_of_rank.begin(), c.tid_of_rank.end(), m.rng); }
    for (int i = 0; i < n; i++) { c.rank_of[c.tid_of_rank[i]] = i; }
    memset(c.ready, 0, sizeof c.ready);
    c.warp_arrived.assign((n + 31) / 32, 0);
    c.ops.assign(n, LaneOp{});
    c.res_v.assign(n, 0u);
    c.res_d.assign((size_t)n * 4, 0.0f);
    c.res_r.assign((size_t)n * 4, 0u);
    if (c.async_copies.size() < (size_t)n) { c.async_copies.resize((size_t)n); }
    for (int t = 0; t < n; t++) { c.async_copies[t].clear(); }
    c.async_groups.assign(n, 0);
    c.block_arrived = 0;
    c.done_count = 0;
    c.fence_waiting = 0;
    hopper_cta_start(c);
    for (int t = 0; t < n; t++) {
        fiber_reset(c.fibers[t]);
        // CUDA's linear thread id: x fastest, then y, then z
        c.fibers[t].tidx = uint3{(unsigned)t % blockDim.x, ((unsigned)t / blockDim.x) % blockDim.y,
                                 (unsigned)t / (blockDim.x * blockDim.y)};
        set_ready(c, t);
    }
    if (smem) { memset(c.dyn_smem, 0xFF, smem); }
    if (c.static_smem == nullptr) { c.static_smem = (unsigned char*)aligned_alloc(256, kStaticSmemBytes); }
    memset(c.static_smem, 0xFF, c.static_used);
    c.static_used = 0;
    c.static_offset.clear();
}

static int pick_fiber(Cta& c) { // the first ready thread in the priority order
    for (int w = 0; w < (m.nthreads + 63) / 64; w++) {
        if (c.ready[w]) { return c.tid_of_rank[w * 64 + __builtin_ctzll(c.ready[w])]; }
    }
    return -1;
}

// the next live CTA after `from`: round robin, or a random one for the random schedule
static int next_live_cta(int from) {
    int live[kLiveCtas], n = 0;
    for (int k = 1; k <= kLiveCtas; k++) {
        const int s = (from + k) % kLiveCtas;
        if (m.ctas[s].live) { live[n++] = s; }
    }
    if (n == 0) { return -1; }
    return m.schedule == SCHED_RANDOM ? live[m.rng() % n] : live[0];
}

// the CTAs of a grid that run: all of them, unless a test named a box (cuda_cpu.h's run_only)
struct CtaBox {
    dim3 first, last; // inclusive
    bool all;
};
static bool cta_in_box(uint3 c, const CtaBox& box) {
    return box.all || (c.x >= box.first.x && c.x <= box.last.x && c.y >= box.first.y && c.y <= box.last.y &&
                       c.z >= box.first.z && c.z <= box.last.z);
}

static uint3 cta_coord(size_t c, dim3 g) {
    return uint3{(unsigned)(c % g.x), (unsigned)((c / g.x) % g.y), (unsigned)(c / ((size_t)g.x * g.y))};
}

// Runs a grid to completion: CTAs in `order` (x fastest for ascending), up to kLiveCtas at once,
// each as its block's fibers. Returns false with *error on a detected error.
static bool run_grid(const char* name, int launch_line, dim3 grid, dim3 block, size_t smem, size_t smem_limit, int schedule,
                     int order, const CtaBox& box, const std::function<void()>& body, std::string* error) {
    m.smem_limit = smem_limit;
    const int n = (int)(block.x * block.y * block.z);
    m.nthreads = n;
    m.body = &body;
    m.kernel_name = name;
    m.launch_line = launch_line;
    m.schedule = schedule;
    m.error.clear();
    m.yield_cta = false;
    gridDim = grid;
    blockDim = block;
    const size_t all_ctas = (size_t)grid.x * grid.y * grid.z;
    std::vector<size_t> seq;
    for (size_t i = 0; i < all_ctas; i++) {
        const size_t c = order == SCHED_DESC ? all_ctas - 1 - i : i;
        if (cta_in_box(cta_coord(c, grid), box)) { seq.push_back(c); }
    }
    const size_t ctas = seq.size();
    if (order == SCHED_RANDOM) { std::shuffle(seq.begin(), seq.end(), m.rng); }
    // dynamic shared memory: exactly smem bytes per slot, a guard page right after it
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    for (int s = 0; s < kLiveCtas; s++) {
        Cta& c = m.ctas[s];
        c.live = false;
        c.dyn_smem = nullptr;
        if (smem) {
            const size_t rounded = (smem + 15) & ~(size_t)15, pages = (rounded + page - 1) / page;
            c.dyn_map_len = (pages + 1) * page;
            c.dyn_map = (unsigned char*)mmap(nullptr, c.dyn_map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (c.dyn_map == MAP_FAILED) { perror("cudacpu: mmap shared memory"); exit(2); }
            mprotect(c.dyn_map + pages * page, page, PROT_NONE);
            c.dyn_smem = c.dyn_map + pages * page - rounded;
        }
    }
    m.dyn_smem_bytes = smem;
    weak::launch_begin(kLiveCtas, name);
    size_t next = 0;
    for (int s = 0; s < m.live_ctas && next < ctas; s++) { cta_start(s, cta_coord(seq[next++], grid), smem); }
    m.cur_cta = 0;
    bool ok = true;
    while (ok) {
        if (!m.ctas[m.cur_cta].live) {
            const int s = next_live_cta(m.cur_cta);
            if (s < 0) { break; } // every CTA has finished
            m.cur_cta = s;
        }
        Cta& c = m.ctas[m.cur_cta];
        const int tid = pick_fiber(c);
        if (tid < 0 && c.done_count < n && c.fence_waiting == 0 && hopper_quiesce(c)) { continue; } // copies land, waits end
        if (tid < 0 && c.fence_waiting > 0) { // no thread but those at a fence can run
            weak::enter(m.cur_cta); // (its segment is open already: a thread of it just waited)
            fences_complete(c);
            continue;
        }
        if (tid < 0) {
            if (c.done_count == n) { // finished: the next CTA of the grid takes the slot
                const std::string left = hopper_cta_exit(c);
                if (!left.empty()) {
                    char where[256];
                    snprintf(where, sizeof where, "%s (launched at %s) block (%u,%u,%u): ", name, line_str(launch_line).c_str(),
                             c.idx.x, c.idx.y, c.idx.z);
                    m.error = std::string(where) + left;
                    ok = false;
                    break;
                }
                weak::cta_exit(m.cur_cta);
                c.live = false;
                if (next < ctas) { cta_start(m.cur_cta, cta_coord(seq[next++], grid), smem); }
                continue;
            }
            std::string who;
            for (int t = 0; t < n && who.size() < 300; t++) {
                if (c.fibers[t].state == WAIT_MBAR || c.fibers[t].state == WAIT_QUIET || c.fibers[t].state == WAIT_NAMED) {
                    who += " t" + std::to_string(t) + hopper_wait_str(c, t);
                } else if (c.fibers[t].state == WAIT_WARP || c.fibers[t].state == WAIT_BLOCK) {
                    who += " t" + std::to_string(t) + (c.fibers[t].state == WAIT_WARP ? "@warp:" : "@block:") +
                           std::to_string(c.fibers[t].line);
                }
            }
            char where[256];
            snprintf(where, sizeof where, "%s (launched at %s) block (%u,%u,%u): ", name, line_str(launch_line).c_str(),
                     c.idx.x, c.idx.y, c.idx.z);
            m.error = std::string(where) + "deadlock, waiting:" + who;
            ok = false;
            break;
        }
        m.cur = tid;
        blockIdx = c.idx;
        threadIdx = c.fibers[tid].tidx;
        m.switches++;
        weak::enter(m.cur_cta);
        cudacpu_ctx_switch(&m.sched_sp, c.fibers[tid].sp);
        if (!m.error.empty()) { ok = false; break; }
        if (m.yield_cta) {
            m.yield_cta = false;
            const int s = next_live_cta(m.cur_cta);
            if (s >= 0) { m.cur_cta = s; }
        }
    }
    weak::launch_end(name);
    for (int s = 0; s < kLiveCtas; s++) {
        Cta& c = m.ctas[s];
        c.live = false;
        if (c.dyn_map) { munmap(c.dyn_map, c.dyn_map_len); }
        c.dyn_map = nullptr;
        c.dyn_smem = nullptr;
    }
    m.cur_cta = -1;
    if (!ok) { *error = m.error; }
    return ok;
}

} // namespace cudacpu

#endif // CUDACPU_SIMT_H
