/*
cuda_cpu.h: a CUDA runtime on the CPU, so that the real train_gpt2.cu and test_gpt2.cu run as host
C++ with no GPU (dev/cudacpu/README.md). g++ force-includes this header (-include) into the output of
dev/cudacpu/rewrite.py, which changes only what C++ cannot spell: kernel launches, inline PTX and
`extern __shared__` arrays.

The CUDA headers themselves give the types, enums and declarations (cudaError_t, cudaDeviceProp,
dim3, cublasLt*, __nv_bfloat16 with its host conversions); this file defines the functions:
  - memory: cudaMalloc'd memory sits between guard pages (an access past either end faults: the
    fault handler names the kernel, block and thread) and is filled with 0xFF, a NaN in fp32 and
    bf16, so a read before any write shows up. Inside the trainer's activation allocations each
    tensor is followed by a poisoned red zone, inside its parameter-side buffers by a zero one, each
    checked after every kernel (the red zones below). An allocation of 64 MiB or more maps its
    poison from a shared file, copy-on-write: a test can allocate the largest shape the trainer
    admits and touch only its far end (with run_only, below, which runs a box of a grid's CTAs).
    cudaMallocHost memory is "pinned": asynchronous copies read and write it when they execute, not
    when they are issued.
  - a device queue per stream: kernel launches, async copies and memsets, cuBLASLt matmuls and event
    records are queued on their stream and run only when the host synchronizes (cudaDeviceSynchronize,
    an event or stream sync, a synchronous cudaMemcpy, cudaFree), until what it waits for has run, in
    an order that only events, stream waits and CUDA's legacy-stream rule constrain (see "the device
    queues" below: a missing wait shows). A pinned buffer that an async copy
    will write holds NaN until then, so a use before the copy has finished shows up; a pinned buffer
    that an async copy will read can still be changed by the host until the copy runs, as on a GPU.
  - launches: grid and block limits of an H100 (grid.y, grid.z <= 65535, 1024 threads, block.z <=
    64), dynamic shared memory <= 48 KiB unless cudaFuncSetAttribute raised the kernel's limit (at
    most 227 KiB): a bad launch is reported by cudaGetLastError, as by the driver. An error found
    while a kernel runs (a barrier or warp collective misuse, a deadlock) is printed with its
    kernel, block and thread and becomes the sticky cudaErrorLaunchFailure of the next sync.
  - device properties of an H100 SXM (132 SMs, 227 KiB opt-in shared memory, ...).
  - kernels (simt.h): threads as fibers, several live CTAs, real barriers, warp collectives, the
    PTX mma.sync m16n8k16 bf16 with the ISA's fragment layout, atomics as points where another CTA
    runs first.
  - weak memory (weak_memory.h): a CTA's stores are hidden from the other CTAs (they read NaN) until
    a fence of its own, or the kernel's end.
  - cuBLASLt (cublaslt_cpu.h): a reference GEMM behind cuBLASLt's own API.

CUDA_CPU_SCHEDULE=asc|desc|random|rotate (default rotate: launch k uses thread order and CTA order
k mod 3, and k / 3 mod 3) and CUDA_CPU_SEED pick the interleaving. What it does not model: see the
README.
*/
#ifndef CUDACPU_CUDA_CPU_H
#define CUDACPU_CUDA_CPU_H

#include <cuda_runtime.h>
#include <cuda.h> // CUtensorMap and its enums (hopper.h, runtime_api.h)
#include <cuda_profiler_api.h>
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <ctype.h>
#include <math.h>
#include <signal.h>
#include <time.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <initializer_list>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

// ---------------------------------------------------------------------------------------------
// CUDA's qualifiers as C++. rewrite.py turns every `__shared__` declaration into per-CTA storage
// (simt.h's shared_var), so one that is left is an error.
#undef __global__
#undef __device__
#undef __host__
#undef __forceinline__
#undef __noinline__
#undef __shared__
#undef __constant__
#undef __launch_bounds__
#undef __grid_constant__
#define __global__ inline
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __shared__ __shared___not_rewritten_by_dev_cudacpu_rewrite_py
#define __constant__ static
#define __launch_bounds__(...)
#define __grid_constant__

#include "simt.h"

// The trainer's activation allocations with a red zone after each tensor (the red zones below;
// dev/trainer/training_memory.h's defaults are a GPU's: none). TENSOR_RED_ZONES expands where the
// trainer carves a list of TensorAlloc (its offsets and sizes), after training_memory.h.
#define TENSOR_RED_ZONE_BYTES 256
#define TENSOR_RED_ZONES(base, list, names, n)                                                                   \
    do {                                                                                                         \
        for (int rz_ = 0; rz_ < (n); rz_++) {                                                                    \
            if ((list)[rz_].count == 0) { continue; }                                                            \
            const size_t rz_bytes_ = tensor_alloc_bytes(&(list)[rz_]);                                           \
            cudacpu::red_zone_add((base) + (list)[rz_].offset + rz_bytes_,                                       \
                                  qkv_round_up(rz_bytes_, TENSOR_ALIGN_BYTES) - rz_bytes_ + TENSOR_RED_ZONE_BYTES, \
                                  (names)[rz_]);                                                                 \
        }                                                                                                        \
    } while (0)
// The parameter-side buffers (parameters, gradients, AdamW's m and v, master weights) with a red zone
// of PARAM_RED_ZONE_ELEMS elements after each tensor. PARAM_RED_ZONES expands where the trainer has
// allocated them (a GPT2*, after parameters.h); m, v and the master weights hold the elements
// opt_lo..opt_hi of the layout (a ZeRO shard), the others all of it.
#define PARAM_RED_ZONE_ELEMS 128
#define PARAM_RED_ZONES(model)                                                                                   \
    do {                                                                                                         \
        const auto* rz_m_ = (model);                                                                             \
        auto rz_add_ = [&](const void* base, size_t elem_bytes, size_t lo, size_t hi, const char* buffer) {     \
            cudacpu::param_red_zones((unsigned char*)base, elem_bytes, lo, hi, rz_m_->param_sizes, rz_m_->param_offsets, \
                                     rz_m_->num_parameters_padded, param_tensor_names, NUM_PARAMETER_TENSORS, buffer); \
        };                                                                                                       \
        rz_add_(rz_m_->params_memory, sizeof(*rz_m_->params_memory), 0, rz_m_->num_parameters_padded, "parameters"); \
        rz_add_(rz_m_->grads_memory, sizeof(float), 0, rz_m_->num_parameters_padded, "parameter gradients");     \
        rz_add_(rz_m_->m_memory, sizeof(float), rz_m_->opt_lo, rz_m_->opt_hi, "AdamW m");                        \
        rz_add_(rz_m_->v_memory, sizeof(float), rz_m_->opt_lo, rz_m_->opt_hi, "AdamW v");                        \
        if (rz_m_->master_memory != NULL) {                                                                      \
            rz_add_(rz_m_->master_memory, sizeof(float), rz_m_->opt_lo, rz_m_->opt_hi, "fp32 master weights");   \
        }                                                                                                        \
    } while (0)

namespace cudacpu {

// ---------------------------------------------------------------------------------------------
// memory

struct Allocation {
    unsigned char* map;
    size_t map_len;
    size_t bytes;
    bool pinned; // cudaMallocHost: host memory the device queue reads and writes when it runs
};
inline std::map<uintptr_t, Allocation> allocations; // by data address
inline size_t device_bytes_in_use = 0;
static const size_t kDeviceMemoryBytes = 80ull << 30; // an H100 SXM's 80 GB

// data between two guard pages, ending where the second begins (16-byte aligned end)
static unsigned char* guarded_alloc(size_t bytes, Allocation* a) {
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    const size_t rounded = (bytes + 255) & ~(size_t)255; // cudaMalloc's 256-byte alignment
    const size_t data_pages = (rounded + page - 1) / page + (rounded == 0 ? 1 : 0);
    a->map_len = (data_pages + 2) * page;
    a->map = (unsigned char*)mmap(nullptr, a->map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (a->map == MAP_FAILED) { return nullptr; }
    mprotect(a->map, page, PROT_NONE);
    mprotect(a->map + (data_pages + 1) * page, page, PROT_NONE);
    a->bytes = bytes;
    // past the end faults only at the next page: the data ends 256-byte rounded before the guard
    return a->map + (data_pages + 1) * page - rounded;
}

// Poison without memory: a large allocation's data pages map, copy-on-write, a shared file of 0xFF
// (kPoisonFileBytes, written once per process), so that they read as 0xFF and only the pages a
// kernel or the host writes take memory of their own. A test can then allocate tensors of the largest
// shape the trainer admits (dev/cuda/common.h's --large: 40 GB and more) and touch only their far
// end. Smaller allocations are filled by memset as before (fewer mappings).
static const size_t kPoisonFileBytes = 16ull << 20;
static const size_t kLazyPoisonBytes = 64ull << 20; // allocations from this size on
static int poison_file() {
    static int fd = -1;
    if (fd >= 0) { return fd; }
    fd = memfd_create("cudacpu-poison", 0);
    if (fd < 0 || ftruncate(fd, (off_t)kPoisonFileBytes) != 0) { perror("cudacpu: memfd_create (the poison file)"); exit(2); }
    std::vector<unsigned char> ff(1u << 20, 0xFF);
    for (size_t off = 0; off < kPoisonFileBytes; off += ff.size()) {
        if (pwrite(fd, ff.data(), ff.size(), (off_t)off) != (ssize_t)ff.size()) { perror("cudacpu: the poison file"); exit(2); }
    }
    return fd;
}
// [first, first + bytes), whole pages of one mapping, to 0xFF by mapping the poison file over them
static void poison_pages(unsigned char* first, size_t bytes) {
    const int fd = poison_file();
    for (size_t off = 0; off < bytes; off += kPoisonFileBytes) {
        const size_t n = std::min(kPoisonFileBytes, bytes - off);
        if (mmap(first + off, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED | MAP_NORESERVE, fd, 0) == MAP_FAILED) {
            perror("cudacpu: mmap of the poison file");
            exit(2);
        }
    }
}

// the allocation holding [p, p + n), or null
static const Allocation* find_allocation(const void* p, size_t n, uintptr_t* base = nullptr) {
    const uintptr_t a = (uintptr_t)p;
    auto it = allocations.upper_bound(a);
    if (it == allocations.begin()) { return nullptr; }
    --it;
    if (a < it->first || a + n > it->first + it->second.bytes) { return nullptr; }
    if (base) { *base = it->first; }
    return &it->second;
}
static bool is_device(const void* p, size_t n) { const Allocation* a = find_allocation(p, n); return a && !a->pinned; }
static bool is_pinned(const void* p, size_t n) { const Allocation* a = find_allocation(p, n); return a && a->pinned; }

// ---------------------------------------------------------------------------------------------
// red zones: the trainer carves its activations (and their gradients) from one allocation each, so
// the guard pages around a cudaMalloc do not see a kernel that writes past one tensor into the next.
// Here the layout leaves TENSOR_RED_ZONE_BYTES after each tensor (dev/trainer/training_memory.h),
// TENSOR_RED_ZONES poisons the gap from the tensor's last byte on, and every kernel is followed by a
// check of every gap: a byte written there names the kernel and the tensor, and becomes the sticky
// cudaErrorLaunchFailure of the next sync. (A write that jumps over the gap, or one inside the
// tensor's own span of layers, is not seen.)
// The parameter-side buffers get PARAM_RED_ZONE_ELEMS elements after each tensor (PARAM_RED_ZONES),
// watched the same way, but they hold zeros, not poison: every gap of those buffers must stay zero,
// since the gradient norm and the all-reduce read the gradients' flat buffer, and the parameters and
// master weights are copied into each other over a shard's flat range. A stray write of zero is
// therefore not seen there.
struct RedZone {
    unsigned char* start; // the byte after the tensor's last
    size_t bytes;         // to the next tensor's start
    std::string tensor;
    unsigned char fill;   // what it holds while intact
};
inline std::vector<RedZone> red_zones;
static const unsigned char kRedZonePoison = 0xA5; // not 0xFF, what a fresh cudaMalloc holds
static void red_zone_add(void* start, size_t bytes, const std::string& tensor, unsigned char fill = kRedZonePoison) {
    memset(start, fill, bytes);
    red_zones.push_back({(unsigned char*)start, bytes, tensor, fill});
}
// PARAM_RED_ZONES: the zone after each present tensor i, from its last element to where the next
// tensor starts (an absent tensor takes nothing, so that is offsets[i + 1]; after the last, the
// layout's total), the part of it inside lo..hi, zero
static void param_red_zones(unsigned char* base, size_t elem_bytes, size_t lo, size_t hi, const size_t* sizes,
                            const size_t* offsets, size_t total, const char* const* names, int n, const char* buffer) {
    for (int i = 0; i < n; i++) {
        if (sizes[i] == 0) { continue; }
        const size_t first = std::max(offsets[i] + sizes[i], lo);
        const size_t end = std::min(i + 1 < n ? offsets[i + 1] : total, hi);
        if (first >= end) { continue; }
        red_zone_add(base + (first - lo) * elem_bytes, (end - first) * elem_bytes,
                     std::string(names[i]) + " (" + buffer + ")", 0);
    }
}
// the zones inside [lo, hi) go with the allocation that held them (cudaFree)
static void red_zones_drop(const unsigned char* lo, const unsigned char* hi) {
    std::vector<RedZone> kept;
    for (const RedZone& z : red_zones) {
        if (z.start < lo || z.start >= hi) { kept.push_back(z); }
    }
    red_zones.swap(kept);
}
// after a kernel: the first zone written, reported with the kernel (and filled again, so that it is
// reported once); false then
static bool red_zones_intact(const char* kernel, int line) {
    static unsigned char blocks[2][4096]; // what an intact zone holds (poison, zeros), compared a block at a time
    if (blocks[0][0] != kRedZonePoison) { memset(blocks[0], kRedZonePoison, sizeof(blocks[0])); }
    for (const RedZone& z : red_zones) {
        const unsigned char* intact_block = blocks[z.fill == kRedZonePoison ? 0 : 1];
        bool intact = true;
        for (size_t at = 0; at < z.bytes && intact; at += sizeof(blocks[0])) {
            intact = memcmp(z.start + at, intact_block, std::min(sizeof(blocks[0]), z.bytes - at)) == 0;
        }
        if (intact) { continue; }
        for (size_t i = 0; i < z.bytes; i++) {
            if (z.start[i] == z.fill) { continue; }
            fprintf(stderr, "cuda-cpu: kernel %s (launched at train_gpt2.cu:%d) wrote past the end of tensor %s: %zu "
                    "bytes after its last, into the red zone between it and the next tensor of its allocation\n",
                    kernel, line, z.tensor.c_str(), i);
            memset(z.start, z.fill, z.bytes);
            return false;
        }
    }
    return true;
}

// ---------------------------------------------------------------------------------------------
// errors

inline cudaError_t last_error = cudaSuccess;   // cudaGetLastError's (a launch's configuration)
inline cudaError_t sticky_error = cudaSuccess; // a kernel failed: every later call reports it
static cudaError_t set_last(cudaError_t e) { if (e != cudaSuccess) { last_error = e; } return e; }

// ---------------------------------------------------------------------------------------------
// the device queues: one per stream, run only when the host synchronizes (and until what it waits for
// has run), one item at a time, in an order that only the program's events, stream waits and CUDA's
// legacy-stream rule constrain (a GPU's freedom), chosen to expose what they leave unordered: each
// next item is the runnable head of the most recently created stream (CUDA_CPU_STREAMS=later, the
// default: a consumer stream that forgot to wait for its producer runs first), of the legacy stream
// and the oldest (=earlier: a producer's consumer that forgot to wait runs before it), or of each
// stream in turn (=alternate: the streams interleaved at kernel boundaries).

struct Stream;
struct Work {
    std::function<void()> run; // empty: a wait, until stream wait_on has run wait_pos items
    Stream* wait_on = nullptr;
    long long wait_pos = 0;
};
struct Stream {
    int id;        // creation order: 0 is the legacy default stream (stream 0, cudaStreamLegacy)
    bool blocking; // not cudaStreamNonBlocking: ordered with the legacy stream both ways, as CUDA's are
    std::deque<Work> q;
    long long issued = 0, done = 0; // items (work and waits) queued and run
};
inline std::vector<Stream*> streams; // the live ones, in creation order; [0] the legacy stream
inline int streams_created = 0;
inline long long queued_items = 0;    // over every stream
// modelled device time the queues have run so far (cublaslt_cpu.h's algorithms' speeds), in ms: the
// events' stamps add it to the host clock
inline double modelled_ms = 0.0;

static Stream* legacy_stream() {
    if (streams.empty()) { streams.push_back(new Stream{streams_created++, true, {}, 0, 0}); }
    return streams[0];
}
static int stream_order() {
    static const int order = [] { // 0 later, 1 earlier, 2 alternate
        const char* e = getenv("CUDA_CPU_STREAMS");
        if (e == nullptr || strcmp(e, "later") == 0) { return 0; }
        if (strcmp(e, "earlier") == 0) { return 1; }
        if (strcmp(e, "alternate") == 0) { return 2; }
        fprintf(stderr, "cuda-cpu: CUDA_CPU_STREAMS=%s: expected later, earlier or alternate\n", e);
        exit(EXIT_FAILURE);
    }();
    return order;
}

static bool head_runnable(const Stream* s) {
    const Work& w = s->q.front();
    return w.run || w.wait_on == nullptr || w.wait_on->done >= w.wait_pos;
}
static void run_head(Stream* s) {
    Work w = std::move(s->q.front());
    s->q.pop_front();
    if (w.run && sticky_error == cudaSuccess) { w.run(); }
    s->done++;
    queued_items--;
}
// the next item to run: a runnable head, by the CUDA_CPU_STREAMS order
inline size_t alternate_turn = 0;
static Stream* next_stream() {
    const size_t n = streams.size();
    for (size_t k = 0; k < n; k++) {
        const size_t i = stream_order() == 0 ? n - 1 - k : stream_order() == 1 ? k : (alternate_turn + k) % n;
        if (!streams[i]->q.empty() && head_runnable(streams[i])) {
            alternate_turn = i + 1;
            return streams[i];
        }
    }
    fprintf(stderr, "cuda-cpu: internal: queued work, none of it runnable\n"); // a wait names earlier work
    abort();
}
// until stream s has run its first pos items (whatever else runs first, by the order)
static void run_until(Stream* s, long long pos) {
    while (s->done < pos) { run_head(next_stream()); }
}
static void run_stream(Stream* s) { run_until(s, s->issued); }
// everything queued: a device synchronization
static void drain() {
    while (queued_items > 0) { run_head(next_stream()); }
}
static void push(Stream* s, Work w) {
    s->q.push_back(std::move(w));
    s->issued++;
    queued_items++;
}
static void push_wait(Stream* s, Stream* on, long long pos) {
    if (on != s && on->done < pos) { push(s, Work{nullptr, on, pos}); }
}
// work on stream s, after what CUDA orders before it: the legacy stream waits for every blocking
// stream's work so far, a blocking stream for the legacy stream's
static void enqueue_on(Stream* s, std::function<void()> f) {
    if (s->id == 0) {
        for (Stream* b : streams) {
            if (b->blocking) { push_wait(s, b, b->issued); }
        }
    } else if (s->blocking) {
        push_wait(s, legacy_stream(), legacy_stream()->issued);
    }
    push(s, Work{std::move(f), nullptr, 0});
    if (queued_items > 4096) { drain(); } // a bound on the memory the captured arguments hold
}
// what a synchronous call on the legacy stream waits for (cudaMemcpy): it, and every blocking stream
static void legacy_sync() {
    for (size_t i = 1; i < streams.size(); i++) {
        if (streams[i]->blocking) { run_stream(streams[i]); }
    }
    run_stream(legacy_stream());
}
} // namespace cudacpu

// a stream handle: cudaStream_t points at one (0, cudaStreamLegacy and cudaStreamPerThread: the legacy stream)
struct CUstream_st {
    cudacpu::Stream* s;
};
namespace cudacpu {
static Stream* stream_of(cudaStream_t st) {
    if (st == nullptr || st == cudaStreamLegacy || st == cudaStreamPerThread) { return legacy_stream(); }
    return st->s;
}

// ---------------------------------------------------------------------------------------------
// launches

struct KernelAttrs {
    int max_dynamic_smem = 48 * 1024;
};
inline std::map<const void*, KernelAttrs> kernel_attrs;
static const int kSmemOptinMax = 232448; // an H100's sharedMemPerBlockOptin (227 KiB)
inline long long launch_count = 0;

static int env_schedule() {
    static int s = -2;
    if (s == -2) {
        const char* e = getenv("CUDA_CPU_SCHEDULE");
        s = -1; // rotate
        if (e && strcmp(e, "asc") == 0) { s = SCHED_ASC; }
        if (e && strcmp(e, "desc") == 0) { s = SCHED_DESC; }
        if (e && strcmp(e, "random") == 0) { s = SCHED_RANDOM; }
        const char* live = getenv("CUDA_CPU_LIVE_CTAS");
        if (live) { m.live_ctas = std::max(1, std::min(kLiveCtas, atoi(live))); }
        const char* seed = getenv("CUDA_CPU_SEED");
        if (seed) { m.rng.seed((unsigned)strtoul(seed, nullptr, 10)); }
    }
    return s;
}

inline const char* fault_kernel = nullptr; // the running kernel (for the fault handler), else null

// CUDA_CPU_PROFILE=1: seconds and launches per kernel (and for the cuBLASLt reference), printed at exit
struct ProfileEntry { double seconds = 0.0; long long calls = 0; long long threads = 0; };
inline std::map<std::string, ProfileEntry> profile;
static bool profiling() {
    static int on = -1;
    if (on < 0) { const char* e = getenv("CUDA_CPU_PROFILE"); on = e != nullptr && e[0] == '1'; }
    return on == 1;
}
static double now_seconds() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
static void profile_print() {
    std::vector<std::pair<std::string, ProfileEntry>> rows(profile.begin(), profile.end());
    std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
    double total = 0.0;
    for (const auto& r : rows) { total += r.second.seconds; }
    fprintf(stderr, "cuda-cpu profile: %.2f s in device work\n", total);
    fprintf(stderr, "  weak memory: %lld pages tracked (a CTA's first write in a segment), %lld hidden at a segment's end\n",
            weak::s.faults, weak::s.hidden_pages);
    for (const auto& r : rows) {
        fprintf(stderr, "  %8.3f s %7lld calls %12lld threads  %s\n", r.second.seconds, r.second.calls, r.second.threads, r.first.c_str());
    }
}
static void profile_add(const char* name, double seconds, long long threads) {
    static bool registered = false;
    if (!registered) { atexit(profile_print); registered = true; }
    ProfileEntry& e = profile[name];
    e.seconds += seconds;
    e.calls++;
    e.threads += threads;
}

// run_only: a test of a huge shape's far end (dev/cuda/common.h's --large) runs only the CTAs that
// compute it, a box of each kernel's grid. While any box is named, a launch of a kernel without one
// fails, and so does a box outside its grid: a test cannot run a whole huge grid, or none of it, by
// mistake. The box is the kernel's at its launch (run_only_clear may follow before the queue runs).
struct RunOnly {
    std::string kernel; // the launch's name up to its template arguments
    CtaBox box;
};
inline std::vector<RunOnly> run_only_boxes;
static const unsigned kGridEnd = 0xFFFFFFFFu; // a box coordinate: the grid's last in that dimension
static void run_only(const char* kernel, dim3 first, dim3 last) { run_only_boxes.push_back({kernel, {first, last, false}}); }
static void run_only_clear() { run_only_boxes.clear(); }
// the box of a launch of `name` (as rewrite.py spells it: "kernel<kHeadDim>"), or false with *why
static bool run_only_box(const char* name, dim3 grid, CtaBox* box, std::string* why) {
    *box = CtaBox{dim3(), dim3(), true};
    if (run_only_boxes.empty()) { return true; }
    const std::string base = std::string(name).substr(0, std::string(name).find('<'));
    for (const RunOnly& r : run_only_boxes) {
        if (r.kernel != base) { continue; }
        auto at = [](unsigned c, unsigned n) { return c == kGridEnd ? n - 1 : c; };
        *box = CtaBox{dim3(at(r.box.first.x, grid.x), at(r.box.first.y, grid.y), at(r.box.first.z, grid.z)),
                      dim3(at(r.box.last.x, grid.x), at(r.box.last.y, grid.y), at(r.box.last.z, grid.z)), false};
        const CtaBox& b = *box;
        if (b.first.x > b.last.x || b.first.y > b.last.y || b.first.z > b.last.z || b.last.x >= grid.x ||
            b.last.y >= grid.y || b.last.z >= grid.z) {
            *why = "run_only's CTAs (" + std::to_string(b.first.x) + "," + std::to_string(b.first.y) + "," +
                   std::to_string(b.first.z) + ")..(" + std::to_string(b.last.x) + "," + std::to_string(b.last.y) + "," +
                   std::to_string(b.last.z) + ") are not in its grid (" + std::to_string(grid.x) + "," +
                   std::to_string(grid.y) + "," + std::to_string(grid.z) + ")";
            return false;
        }
        return true;
    }
    *why = "launched while run_only names other kernels only";
    return false;
}

static void run_kernel(const char* name, int line, dim3 grid, dim3 block, size_t smem, size_t smem_limit,
                       const CtaBox& box, const std::function<void()>& body) {
    const int forced = env_schedule();
    const long long k = launch_count++;
    const int schedule = forced >= 0 ? forced : (int)(k % 3);
    const int order = forced >= 0 ? forced : (int)((k / 3) % 3);
    std::string error;
    fault_kernel = name;
    const double t0 = profiling() ? now_seconds() : 0.0;
    const bool ok = run_grid(name, line, grid, block, smem, smem_limit, schedule, order, box, body, &error);
    if (profiling()) { profile_add(name, now_seconds() - t0, (long long)grid.x * grid.y * grid.z * block.x * block.y * block.z); }
    fault_kernel = nullptr;
    if (!ok) {
        fprintf(stderr, "cuda-cpu: kernel error: %s\n", error.c_str());
        sticky_error = cudaErrorLaunchFailure;
    }
    if (!red_zones.empty() && !red_zones_intact(name, line)) { sticky_error = cudaErrorLaunchFailure; }
}

// kernel<<<grid, block, smem, stream>>>(args...) becomes
// cudacpu::Launch("kernel", __LINE__, grid, block, smem, stream)(kernel, args...) (rewrite.py):
// the arguments are converted to the kernel's parameter types at the launch, as CUDA copies them
struct Launch {
    const char* name;
    int line;
    dim3 grid, block;
    size_t smem;
    cudaStream_t stream;
    Launch(const char* n, int l, dim3 g, dim3 b, size_t s = 0, cudaStream_t st = 0)
        : name(n), line(l), grid(g), block(b), smem(s), stream(st) {}
    // the arguments' types are not deduced (only the kernel's), so each converts to its parameter
    // at the call, where `NULL` is still a null pointer constant
    template <class T> struct as_is { using type = T; };
    template <class... P>
    void operator()(void (*kernel)(P...), typename as_is<P>::type... args) const {
        if (sticky_error != cudaSuccess) { return; }
        const long long threads = (long long)block.x * block.y * block.z;
        const auto attrs = kernel_attrs.find((const void*)kernel);
        const size_t smem_limit = attrs != kernel_attrs.end() ? (size_t)attrs->second.max_dynamic_smem : 48 * 1024;
        if (grid.x == 0 || grid.y == 0 || grid.z == 0 || block.x == 0 || block.y == 0 || block.z == 0 ||
            grid.x > 2147483647u || grid.y > 65535u || grid.z > 65535u || block.x > 1024u || block.y > 1024u ||
            block.z > 64u || threads > 1024) {
            set_last(cudaErrorInvalidConfiguration);
            return;
        }
        if (smem > smem_limit) { set_last(cudaErrorInvalidValue); return; }
        // static plus dynamic: 48 KiB, or the 227 KiB of an H100's block once the kernel opted in to more
        // (CUDA checks attribute + static <= 227 KiB when the attribute is set; the static bytes are known
        // here only as the kernel declares them)
        const size_t total_limit = smem_limit > 48 * 1024 ? 227 * 1024 : 48 * 1024;
        CtaBox box;
        std::string why;
        if (!run_only_box(name, grid, &box, &why)) {
            fprintf(stderr, "cuda-cpu: kernel %s (launched at train_gpt2.cu:%d): %s\n", name, line, why.c_str());
            sticky_error = cudaErrorLaunchFailure;
            return;
        }
        std::tuple<typename std::decay<P>::type...> params(args...);
        const char* nm = name;
        const int ln = line;
        const dim3 g = grid, b = block;
        const size_t sm = smem;
        enqueue_on(stream_of(stream), [=]() {
            const std::function<void()> body = [&]() { std::apply(kernel, params); };
            run_kernel(nm, ln, g, b, sm, total_limit, box, body);
        });
    }
};

// the running CTA's dynamic shared memory (replaces `extern __shared__ T name[];`)
static inline void* dynamic_smem() { return cta().dyn_smem; }

// ---------------------------------------------------------------------------------------------
// faults: a guard page hit (out of bounds) or a fiber stack overflow, in a kernel or on the host
static void on_fault(int sig, siginfo_t* si, void*) {
    if (sig == SIGSEGV && weak::on_write_fault(si->si_addr)) { return; } // a first write in a segment, not a fault
    char msg[512];
    int n;
    if (fault_kernel != nullptr) {
        n = snprintf(msg, sizeof msg,
                     "cuda-cpu: kernel %s (launched at train_gpt2.cu:%d) block (%u,%u,%u) thread (%u,%u,%u): signal %d at "
                     "address %p (a guard page: an out-of-bounds global or shared access, or a thread's stack overflow)\n",
                     fault_kernel, m.launch_line, blockIdx.x, blockIdx.y, blockIdx.z, threadIdx.x, threadIdx.y, threadIdx.z,
                     sig, si->si_addr);
    } else {
        n = snprintf(msg, sizeof msg, "cuda-cpu: signal %d at address %p outside a kernel (a host access past a "
                     "buffer's end, or a bug of the host code)\n", sig, si->si_addr);
    }
    if (n > 0) { ssize_t w = write(2, msg, (size_t)std::min(n, (int)sizeof msg - 1)); (void)w; }
    _exit(3);
}
struct FaultHandlerInstaller {
    FaultHandlerInstaller() {
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
};
inline FaultHandlerInstaller fault_handler_installer;

// ---------------------------------------------------------------------------------------------
// PTX: the inline PTX the kernels use, read from the asm statement's own text (rewrite.py passes the
// template and the operands): mma.sync m16n8k16 bf16 (simt.h), ldmatrix m8n8 .x1/.x2/.x4 [.trans]
// b16, cp.async.{ca,cg}.shared.global with its commit_group / wait_group / wait_all, and Hopper's
// (hopper.h): mbarrier, cp.async.bulk[.tensor], fence.proxy.async, wgmma, setmaxnreg, named barriers
// (bar.sync / bar.arrive id, n). A template may
// be a block, `{ .reg .pred p; setp.ne.b32 p, %4, 0; ...; selp.u32 %0, 1, 0, p; }`: its statements run
// in order, with predicate registers (setp, selp, a predicate operand, @p / @!p guards). Anything else
// stops the kernel with a message.
struct PtxOperand {
    char constraint; // 'f', 'r', 'l', 'n', ...
    bool output;
    void* ptr;       // an output's location
    uint64_t bits;   // an input's value (a pointer's address for "l")
    int width;       // an output's bytes
};
static inline PtxOperand ptx_out(const char* c, float* p) { return PtxOperand{c[strlen(c) - 1], true, p, 0, 4}; }
static inline PtxOperand ptx_out(const char* c, uint32_t* p) { return PtxOperand{c[strlen(c) - 1], true, p, 0, 4}; }
static inline PtxOperand ptx_out(const char* c, int32_t* p) { return PtxOperand{c[strlen(c) - 1], true, p, 0, 4}; }
static inline PtxOperand ptx_out(const char* c, unsigned long* p) { return PtxOperand{c[strlen(c) - 1], true, p, 0, 8}; }
static inline PtxOperand ptx_out(const char* c, unsigned long long* p) { return PtxOperand{c[strlen(c) - 1], true, p, 0, 8}; }
template <class T>
static inline PtxOperand ptx_in(const char* c, T v) {
    uint64_t b = 0;
    if constexpr (std::is_pointer<T>::value) {
        b = (uint64_t)(uintptr_t)v;
    } else if constexpr (std::is_same<T, float>::value) {
        uint32_t u;
        memcpy(&u, &v, 4);
        b = u;
    } else {
        static_assert(std::is_integral<T>::value, "PTX input of an unsupported type");
        b = (uint64_t)v;
    }
    return PtxOperand{c[strlen(c) - 1], false, nullptr, b, 0};
}

// one operand of an instruction: {%a, %b, ...}, [%n], [%n+imm] or [%n, {%c, ...}] (a tensor map and
// its coordinates), %n, an integer literal, a predicate register, or the sink `_`
struct PtxArg {
    enum Kind { GROUP, ADDRESS, REG, IMM, PRED, SINK } kind;
    std::vector<int> regs;   // GROUP: the operand numbers; ADDRESS, REG: regs[0]
    std::vector<int> coords; // ADDRESS: the coordinates' operand numbers
    long long imm = 0;       // IMM: the value; ADDRESS: the offset; PRED: the register's index
};

enum PtxOp { PTX_UNKNOWN, PTX_MMA, PTX_LDMATRIX, PTX_CP_ASYNC, PTX_CP_COMMIT, PTX_CP_WAIT, PTX_CP_WAIT_ALL, PTX_SETP, PTX_SELP,
             PTX_MBAR_INIT, PTX_MBAR_ARRIVE, PTX_MBAR_ARRIVE_TX, PTX_MBAR_EXPECT_TX, PTX_MBAR_TRY_WAIT, PTX_MBAR_INVAL, PTX_NOP,
             PTX_FENCE_PROXY_ASYNC, PTX_BULK_TENSOR_LOAD, PTX_BULK_TENSOR_STORE, PTX_BULK_LOAD, PTX_BULK_COMMIT, PTX_BULK_WAIT,
             PTX_WGMMA_FENCE, PTX_WGMMA_COMMIT, PTX_WGMMA_WAIT, PTX_WGMMA, PTX_SETMAXNREG, PTX_BAR_SYNC, PTX_BAR_ARRIVE };
struct PtxStmt {
    PtxOp op = PTX_UNKNOWN;
    std::string mnemonic;
    std::vector<PtxArg> args;
    int guard = -1;         // @p: the predicate's index
    bool guard_neg = false; // @!p
    int nmat = 0, trans = 0; // ldmatrix
    int cp_bytes = 0;        // cp.async's copy size (its third operand)
    int setp_eq = 0;         // setp.eq (else .ne)
    int dims = 0;            // cp.async.bulk.tensor.<dims>d
    int wgmma_n = 0;         // wgmma's N
    bool mma_shaped = false; // mma.sync with {D 4}, {A 4}, {B 2}, {C 4}: their operand numbers, in that order
    int mma_ops[14] = {};
    int inc = 0;             // setmaxnreg.inc
};
// an asm statement's template, as read
struct PtxParsed {
    std::vector<PtxStmt> stmts;
    std::vector<std::string> preds; // the block's predicate registers
    std::string error;
    // an asm statement that is one well-formed mma.sync alone (the flash kernels' hottest): ptx() runs
    // it without the interpreter's setup
    bool mma_alone = false;
};

static bool ptx_mnemonic_has(const std::string& m, const char* part) {
    const std::string p = std::string(".") + part;
    const size_t i = m.find(p);
    return i != std::string::npos && (i + p.size() == m.size() || m[i + p.size()] == '.');
}
static bool ptx_starts(const std::string& m, const char* prefix) { return m.rfind(prefix, 0) == 0; }

static std::string ptx_trim(const std::string& s) {
    const size_t a = s.find_first_not_of(" \t\r\n"), b = s.find_last_not_of(" \t\r\n");
    return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

static std::vector<PtxArg> ptx_args(const std::string& s, const std::vector<std::string>& preds, std::string* error) {
    std::vector<PtxArg> out;
    size_t i = 0;
    auto operand_numbers = [](const std::string& in, std::vector<int>* v) {
        for (size_t k = 0; k < in.size(); k++) {
            if (in[k] == '%') { v->push_back(atoi(in.c_str() + k + 1)); }
        }
    };
    while (i < s.size()) {
        while (i < s.size() && (s[i] == ' ' || s[i] == ',' || s[i] == '\t')) { i++; }
        if (i >= s.size()) { break; }
        PtxArg a;
        if (s[i] == '{' || s[i] == '[') {
            const char close = s[i] == '{' ? '}' : ']';
            const size_t e = s.find(close, i);
            const std::string in = s.substr(i + 1, (e == std::string::npos ? s.size() : e) - i - 1);
            a.kind = s[i] == '{' ? PtxArg::GROUP : PtxArg::ADDRESS;
            const size_t brace = in.find('{');
            if (a.kind == PtxArg::ADDRESS && brace != std::string::npos) { // [%map, {%c0, %c1}]
                operand_numbers(in.substr(0, brace), &a.regs);
                operand_numbers(in.substr(brace), &a.coords);
            } else {
                operand_numbers(in, &a.regs);
            }
            const size_t plus = in.find('+');
            if (a.kind == PtxArg::ADDRESS && plus != std::string::npos) { a.imm = strtoll(in.c_str() + plus + 1, nullptr, 0); }
            i = e == std::string::npos ? s.size() : e + 1;
        } else {
            size_t e = i;
            while (e < s.size() && s[e] != ',') { e++; }
            const std::string tok = ptx_trim(s.substr(i, e - i));
            i = e;
            if (tok[0] == '%') {
                a.kind = PtxArg::REG;
                a.regs.push_back(atoi(tok.c_str() + 1));
            } else if (tok == "_") {
                a.kind = PtxArg::SINK;
            } else if (isalpha((unsigned char)tok[0]) || tok[0] == '_') {
                a.kind = PtxArg::PRED;
                const auto it = std::find(preds.begin(), preds.end(), tok);
                if (it == preds.end()) { *error = "'" + tok + "' is not a predicate register declared in the block"; }
                a.imm = it - preds.begin();
            } else {
                a.kind = PtxArg::IMM;
                a.imm = strtoll(tok.c_str(), nullptr, 0);
            }
        }
        out.push_back(a);
    }
    return out;
}

static void ptx_classify(PtxStmt& p) {
    const std::string& mn = p.mnemonic;
    if (mn == "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32") {
        p.op = PTX_MMA;
    } else if (ptx_starts(mn, "ldmatrix.sync.aligned.m8n8.") && ptx_mnemonic_has(mn, "shared") && ptx_mnemonic_has(mn, "b16")) {
        p.nmat = ptx_mnemonic_has(mn, "x1") ? 1 : ptx_mnemonic_has(mn, "x2") ? 2 : ptx_mnemonic_has(mn, "x4") ? 4 : 0;
        p.trans = ptx_mnemonic_has(mn, "trans") ? 1 : 0;
        if (p.nmat > 0) { p.op = PTX_LDMATRIX; }
    } else if (ptx_starts(mn, "cp.async.ca.shared.global") || ptx_starts(mn, "cp.async.cg.shared.global")) {
        p.op = PTX_CP_ASYNC;
        if (p.args.size() >= 3 && p.args[2].kind == PtxArg::IMM) { p.cp_bytes = (int)p.args[2].imm; }
    } else if (mn == "cp.async.commit_group") {
        p.op = PTX_CP_COMMIT;
    } else if (mn == "cp.async.wait_group") {
        p.op = PTX_CP_WAIT;
    } else if (mn == "cp.async.wait_all") {
        p.op = PTX_CP_WAIT_ALL;
    } else if (mn == "setp.ne.b32" || mn == "setp.ne.u32" || mn == "setp.ne.s32" || mn == "setp.eq.b32" || mn == "setp.eq.u32" ||
               mn == "setp.eq.s32") {
        p.op = PTX_SETP;
        p.setp_eq = ptx_mnemonic_has(mn, "eq");
    } else if (mn == "selp.b32" || mn == "selp.u32" || mn == "selp.s32") {
        p.op = PTX_SELP;
    } else if (ptx_starts(mn, "mbarrier.")) {
        if (!ptx_mnemonic_has(mn, "b64") || (!ptx_mnemonic_has(mn, "shared::cta") && !ptx_mnemonic_has(mn, "shared"))) { return; }
        p.op = ptx_starts(mn, "mbarrier.init.") ? PTX_MBAR_INIT
             : ptx_starts(mn, "mbarrier.arrive.expect_tx.") ? PTX_MBAR_ARRIVE_TX
             : ptx_starts(mn, "mbarrier.arrive.") ? PTX_MBAR_ARRIVE
             : ptx_starts(mn, "mbarrier.expect_tx.") ? PTX_MBAR_EXPECT_TX
             : ptx_starts(mn, "mbarrier.try_wait.parity.") ? PTX_MBAR_TRY_WAIT
             : ptx_starts(mn, "mbarrier.inval.") ? PTX_MBAR_INVAL : PTX_UNKNOWN;
    } else if (ptx_starts(mn, "fence.mbarrier_init.") || ptx_starts(mn, "prefetch.tensormap")) {
        p.op = PTX_NOP; // a CTA's own barriers need nothing more; a prefetch only warms a cache
    } else if (mn == "fence.proxy.async" || mn == "fence.proxy.async.shared::cta") {
        p.op = PTX_FENCE_PROXY_ASYNC;
    } else if (ptx_starts(mn, "cp.async.bulk.tensor.") && mn.size() > 22 && mn[22] == 'd' && mn[21] >= '1' && mn[21] <= '5') {
        if (ptx_mnemonic_has(mn, "multicast::cluster") || ptx_mnemonic_has(mn, "L2::cache_hint") || ptx_mnemonic_has(mn, "im2col")) { return; }
        p.dims = mn[21] - '0';
        const std::string rest = mn.substr(23);
        if ((ptx_starts(rest, ".shared::cluster.global") || ptx_starts(rest, ".shared::cta.global")) &&
            ptx_mnemonic_has(mn, "mbarrier::complete_tx::bytes")) {
            p.op = PTX_BULK_TENSOR_LOAD;
        } else if (ptx_starts(rest, ".global.shared::cta") && ptx_mnemonic_has(mn, "bulk_group")) {
            p.op = PTX_BULK_TENSOR_STORE;
        }
    } else if (mn == "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes" ||
               mn == "cp.async.bulk.shared::cta.global.mbarrier::complete_tx::bytes") {
        p.op = PTX_BULK_LOAD;
    } else if (mn == "cp.async.bulk.commit_group") {
        p.op = PTX_BULK_COMMIT;
    } else if (mn == "cp.async.bulk.wait_group" || mn == "cp.async.bulk.wait_group.read") {
        p.op = PTX_BULK_WAIT;
    } else if (mn == "wgmma.fence.sync.aligned") {
        p.op = PTX_WGMMA_FENCE;
    } else if (mn == "wgmma.commit_group.sync.aligned") {
        p.op = PTX_WGMMA_COMMIT;
    } else if (mn == "wgmma.wait_group.sync.aligned") {
        p.op = PTX_WGMMA_WAIT;
    } else if (ptx_starts(mn, "wgmma.mma_async.sync.aligned.m64n") && mn.size() > 34) {
        const size_t k = mn.find("k16.f32.bf16.bf16", 33);
        if (k != std::string::npos && k + 17 == mn.size()) {
            p.wgmma_n = atoi(mn.c_str() + 33);
            p.op = PTX_WGMMA;
        }
    } else if (mn == "bar.sync" || mn == "barrier.sync" || mn == "barrier.sync.aligned") {
        p.op = PTX_BAR_SYNC;
    } else if (mn == "bar.arrive" || mn == "barrier.arrive" || mn == "barrier.arrive.aligned") {
        p.op = PTX_BAR_ARRIVE;
    } else if (mn == "setmaxnreg.inc.sync.aligned.u32" || mn == "setmaxnreg.dec.sync.aligned.u32") {
        p.op = PTX_SETMAXNREG;
        p.inc = ptx_mnemonic_has(mn, "inc");
    }
}

// an asm statement's slot (rewrite.py gives each its own __COUNTER__): the template as read, once
template <int N>
static inline const PtxParsed*& ptx_site() {
    static const PtxParsed* parsed = nullptr;
    return parsed;
}

static const PtxParsed* ptx_parse(const char* tmpl) {
    PtxParsed p;
    std::string s = ptx_trim(tmpl);
    if (!s.empty() && s[0] == '{' && s.back() == '}') { s = s.substr(1, s.size() - 2); } // a block
    size_t start = 0;
    while (start <= s.size()) {
        size_t end = s.find(';', start);
        if (end == std::string::npos) { end = s.size(); }
        std::string st = ptx_trim(s.substr(start, end - start));
        start = end + 1;
        if (st.empty()) { continue; }
        if (ptx_starts(st, ".reg")) { // .reg .pred a, b
            std::string names = ptx_trim(st.substr(4));
            if (!ptx_starts(names, ".pred")) { p.error = "a .reg declaration other than .pred"; break; }
            names = names.substr(5);
            size_t q = 0;
            while (q < names.size()) {
                size_t e = names.find(',', q);
                if (e == std::string::npos) { e = names.size(); }
                const std::string n = ptx_trim(names.substr(q, e - q));
                if (!n.empty()) { p.preds.push_back(n); }
                q = e + 1;
            }
            continue;
        }
        PtxStmt stmt;
        if (st[0] == '@') { // a guard
            const size_t sp = st.find_first_of(" \t");
            std::string g = st.substr(1, sp == std::string::npos ? std::string::npos : sp - 1);
            if (!g.empty() && g[0] == '!') { stmt.guard_neg = true; g = g.substr(1); }
            const auto pi = std::find(p.preds.begin(), p.preds.end(), g);
            if (pi == p.preds.end()) { p.error = "the guard @" + g + " names no declared predicate"; break; }
            stmt.guard = (int)(pi - p.preds.begin());
            st = ptx_trim(sp == std::string::npos ? "" : st.substr(sp));
        }
        const size_t sp = st.find_first_of(" \t");
        stmt.mnemonic = st.substr(0, sp);
        if (sp != std::string::npos) { stmt.args = ptx_args(st.substr(sp), p.preds, &p.error); }
        ptx_classify(stmt);
        if (stmt.op == PTX_MMA && stmt.args.size() == 4) { // its operand numbers, read once
            const size_t want[4] = {4, 4, 2, 4};
            bool shaped = true;
            for (int g = 0; g < 4; g++) { shaped = shaped && stmt.args[g].kind == PtxArg::GROUP && stmt.args[g].regs.size() == want[g]; }
            int k = 0;
            for (int g = 0; g < 4 && shaped; g++) {
                for (int r : stmt.args[g].regs) { stmt.mma_ops[k++] = r; }
            }
            stmt.mma_shaped = shaped;
        }
        p.stmts.push_back(std::move(stmt));
    }
    p.mma_alone = p.error.empty() && p.stmts.size() == 1 && p.stmts[0].mma_shaped && p.stmts[0].guard < 0;
    return new PtxParsed(std::move(p)); // kept for the process's life, as its site is
}

// mma.sync m16n8k16 with the operand numbers ops (D 4, A 4, B 2, C 4) among an asm statement's n
// operands (GCC's numbering: the nout outputs, then the inputs; a "+" operand's input is its output's value)
static void ptx_mma(const int* ops, const PtxOperand* out_ops, int nout, const PtxOperand* in_ops, int n, int line) {
    auto operand = [&](int i) -> const PtxOperand& {
        if (i < 0 || i >= n) { fail("PTX operand %" + std::to_string(i) + " out of range at " + line_str(line)); }
        return i < nout ? out_ops[i] : in_ops[i - nout];
    };
    auto bits = [&](int i) -> uint32_t {
        const PtxOperand& o = operand(i);
        uint32_t b = (uint32_t)o.bits;
        if (o.output) { memcpy(&b, o.ptr, 4); }
        return b;
    };
    uint32_t ar[4], br[2];
    float cr[4], dr[4];
    for (int i = 0; i < 4; i++) {
        ar[i] = bits(ops[4 + i]);
        const uint32_t cb = bits(ops[10 + i]);
        memcpy(&cr[i], &cb, 4);
    }
    br[0] = bits(ops[8]);
    br[1] = bits(ops[9]);
    mma_16816(dr, ar, br, cr, line);
    for (int i = 0; i < 4; i++) {
        const PtxOperand& o = operand(ops[i]);
        if (!o.output || o.constraint != 'f') { fail("mma.sync's D operand is not an fp32 output at " + line_str(line)); }
        memcpy(o.ptr, &dr[i], 4);
    }
}

static void ptx(const PtxParsed*& site, int line, const char* tmpl, std::initializer_list<PtxOperand> outs,
                std::initializer_list<PtxOperand> ins) {
    // GCC's numbering: outputs, then inputs ("+" operands once)
    const PtxOperand* const out_ops = outs.begin();
    const PtxOperand* const in_ops = ins.begin();
    const int nout = (int)outs.size(), n = nout + (int)ins.size();
    if (site == nullptr) { site = ptx_parse(tmpl); }
    const PtxParsed& parsed = *site;
    if (parsed.mma_alone) {
        ptx_mma(parsed.stmts[0].mma_ops, out_ops, nout, in_ops, n, line);
        return;
    }
    if (!parsed.error.empty()) { fail("inline PTX at " + line_str(line) + ": " + parsed.error); }
    bool pred[8] = {false, false, false, false, false, false, false, false};
    if (parsed.preds.size() > 8) { fail("inline PTX at " + line_str(line) + ": more than 8 predicate registers"); }
    auto operand = [&](int i) -> const PtxOperand& {
        if (i < 0 || i >= n) { fail("PTX operand %" + std::to_string(i) + " out of range at " + line_str(line)); }
        return i < nout ? out_ops[i] : in_ops[i - nout];
    };
    auto value = [&](int i) -> uint64_t {
        const PtxOperand& o = operand(i);
        if (o.output) { // a "+" operand's input
            if (o.width == 8) { uint64_t b; memcpy(&b, o.ptr, 8); return b; }
            uint32_t b; memcpy(&b, o.ptr, 4); return b;
        }
        return o.bits;
    };
    for (const PtxStmt& p : parsed.stmts) {
        if (p.guard >= 0 && pred[p.guard] == p.guard_neg) { continue; }
        auto malformed = [&]() { fail("malformed " + p.mnemonic + " operands at " + line_str(line)); };
        // an operand that is a register (%n) or a literal
        auto scalar = [&](const PtxArg& a) -> uint64_t {
            if (a.kind == PtxArg::IMM) { return (uint64_t)a.imm; }
            if (a.kind != PtxArg::REG) { malformed(); }
            return value(a.regs[0]);
        };
        // ... or a predicate register (a predicate's value, 0 or 1)
        auto scalar_or_pred = [&](const PtxArg& a) -> uint64_t { return a.kind == PtxArg::PRED ? (uint64_t)pred[a.imm] : scalar(a); };
        auto address = [&](const PtxArg& a) -> uint64_t {
            if (a.kind != PtxArg::ADDRESS || a.regs.size() != 1 || !a.coords.empty()) { malformed(); }
            return value(a.regs[0]) + (uint64_t)a.imm;
        };
        auto write = [&](const PtxArg& a, uint64_t v, const char* what) { // a register output or the sink
            if (a.kind == PtxArg::SINK) { return; }
            if (a.kind != PtxArg::REG) { malformed(); }
            const PtxOperand& o = operand(a.regs[0]);
            if (!o.output) { fail(std::string(what) + "'s destination is not an output at " + line_str(line)); }
            if (o.width == 8) { memcpy(o.ptr, &v, 8); } else { const uint32_t w = (uint32_t)v; memcpy(o.ptr, &w, 4); }
        };
        auto set_pred = [&](const PtxArg& a, bool v) {
            if (a.kind != PtxArg::PRED) { fail(p.mnemonic + "'s destination is not a predicate register at " + line_str(line)); }
            pred[a.imm] = v;
        };
        switch (p.op) {
        case PTX_MMA:
            if (!p.mma_shaped) { malformed(); }
            ptx_mma(p.mma_ops, out_ops, nout, in_ops, n, line);
            break;
        case PTX_LDMATRIX: {
            if (p.args.size() != 2 || p.args[0].kind != PtxArg::GROUP || (int)p.args[0].regs.size() != p.nmat) { malformed(); }
            uint32_t r[4];
            ldmatrix(r, p.nmat, p.trans, address(p.args[1]), line);
            for (int j = 0; j < p.nmat; j++) {
                const PtxOperand& o = operand(p.args[0].regs[j]);
                if (!o.output || o.constraint != 'r') { fail("ldmatrix's destination is not a 32-bit register output at " + line_str(line)); }
                memcpy(o.ptr, &r[j], 4);
            }
            break;
        }
        case PTX_CP_ASYNC: {
            if (p.args.size() != 3 && p.args.size() != 4) { malformed(); }
            const int src_bytes = p.args.size() == 4 ? (int)scalar(p.args[3]) : p.cp_bytes;
            if (ptx_starts(p.mnemonic, "cp.async.cg") && p.cp_bytes != 16) { fail("cp.async.cg copies 16 bytes only (" + line_str(line) + ")"); }
            cp_async(address(p.args[0]), (const void*)(uintptr_t)address(p.args[1]), p.cp_bytes, src_bytes, line);
            break;
        }
        case PTX_CP_COMMIT: cp_async_commit(); break;
        case PTX_CP_WAIT:
            if (p.args.size() != 1) { malformed(); }
            cp_async_wait((long)scalar(p.args[0]), line);
            break;
        case PTX_CP_WAIT_ALL: cp_async_commit(); cp_async_wait(0, line); break;
        case PTX_SETP: {
            if (p.args.size() != 3) { malformed(); }
            const uint32_t a = (uint32_t)scalar(p.args[1]), b = (uint32_t)scalar(p.args[2]);
            set_pred(p.args[0], p.setp_eq ? a == b : a != b);
            break;
        }
        case PTX_SELP: {
            if (p.args.size() != 4 || p.args[3].kind != PtxArg::PRED) { malformed(); }
            write(p.args[0], pred[p.args[3].imm] ? scalar(p.args[1]) : scalar(p.args[2]), "selp");
            break;
        }
        case PTX_MBAR_INIT:
            if (p.args.size() != 2) { malformed(); }
            mbar_init(address(p.args[0]), (long)scalar(p.args[1]), line);
            break;
        case PTX_MBAR_ARRIVE:
            if (p.args.size() != 2) { malformed(); }
            write(p.args[0], mbar_arrive(address(p.args[1]), line), "mbarrier.arrive");
            break;
        case PTX_MBAR_ARRIVE_TX: {
            if (p.args.size() != 3) { malformed(); }
            const uint64_t a = address(p.args[1]);
            mbar_expect_tx(a, (long long)scalar(p.args[2]), line);
            write(p.args[0], mbar_arrive(a, line), "mbarrier.arrive.expect_tx");
            break;
        }
        case PTX_MBAR_EXPECT_TX:
            if (p.args.size() != 2) { malformed(); }
            mbar_expect_tx(address(p.args[0]), (long long)scalar(p.args[1]), line);
            break;
        case PTX_MBAR_TRY_WAIT:
            if (p.args.size() != 3) { malformed(); }
            set_pred(p.args[0], mbar_try_wait_parity(address(p.args[1]), (int)scalar(p.args[2]), line));
            break;
        case PTX_MBAR_INVAL:
            if (p.args.size() != 1) { malformed(); }
            mbar_inval(address(p.args[0]), line);
            break;
        case PTX_NOP: break;
        case PTX_FENCE_PROXY_ASYNC: fence_proxy_async(line); break;
        case PTX_BULK_TENSOR_LOAD:
        case PTX_BULK_TENSOR_STORE: {
            const bool load = p.op == PTX_BULK_TENSOR_LOAD;
            if (p.args.size() != (load ? 3u : 2u)) { malformed(); }
            const PtxArg& map = p.args[load ? 1 : 0];
            if (map.kind != PtxArg::ADDRESS || map.regs.size() != 1 || (int)map.coords.size() != p.dims) { malformed(); }
            int coord[5];
            for (int d = 0; d < p.dims; d++) { coord[d] = (int)(uint32_t)value(map.coords[d]); }
            if (load) {
                bulk_tensor_load(address(p.args[0]), value(map.regs[0]), coord, p.dims, address(p.args[2]), line);
            } else {
                bulk_tensor_store(value(map.regs[0]), coord, p.dims, address(p.args[1]), line);
            }
            break;
        }
        case PTX_BULK_LOAD:
            if (p.args.size() != 4) { malformed(); }
            bulk_load(address(p.args[0]), (const void*)(uintptr_t)address(p.args[1]), (long long)scalar(p.args[2]), address(p.args[3]), line);
            break;
        case PTX_BULK_COMMIT: bulk_commit(); break;
        case PTX_BULK_WAIT:
            if (p.args.size() != 1) { malformed(); }
            bulk_wait((long)scalar(p.args[0]), line);
            break;
        case PTX_WGMMA_FENCE: wgmma_fence(); break;
        case PTX_WGMMA_COMMIT: wgmma_commit(); break;
        case PTX_WGMMA_WAIT:
            if (p.args.size() != 1) { malformed(); }
            wgmma_wait((long)scalar(p.args[0]), line);
            break;
        case PTX_WGMMA: {
            // SS: d, a-desc, b-desc, scale-d, imm-scale-a, imm-scale-b, imm-trans-a, imm-trans-b
            // RS: d, {a0, a1, a2, a3}, b-desc, scale-d, imm-scale-a, imm-scale-b, imm-trans-b
            const bool rs = p.args.size() == 7 && p.args[1].kind == PtxArg::GROUP;
            if ((!rs && p.args.size() != 8) || p.args[0].kind != PtxArg::GROUP || (int)p.args[0].regs.size() != p.wgmma_n / 2) { malformed(); }
            float* regs[kWgmmaMaxN / 2];
            for (int i = 0; i < p.wgmma_n / 2; i++) {
                const PtxOperand& o = operand(p.args[0].regs[i]);
                if (!o.output || o.constraint != 'f') { fail("wgmma's accumulator is not an fp32 \"+f\" operand at " + line_str(line)); }
                regs[i] = (float*)o.ptr;
            }
            uint32_t a_regs[4];
            uint64_t desc_a = 0;
            if (rs) {
                if (p.args[1].regs.size() != 4) { malformed(); }
                for (int i = 0; i < 4; i++) { a_regs[i] = (uint32_t)value(p.args[1].regs[i]); }
            } else {
                desc_a = scalar(p.args[1]);
            }
            auto sign = [&](const PtxArg& a) -> int {
                const long long v = (long long)scalar(a);
                if (v != 1 && v != -1) { fail("wgmma's imm-scale is 1 or -1 at " + line_str(line)); }
                return (int)v;
            };
            const int tnsp_a = rs ? 0 : (int)scalar(p.args[6]), tnsp_b = (int)scalar(p.args[rs ? 6 : 7]);
            wgmma_mma(regs, p.wgmma_n, desc_a, rs ? a_regs : nullptr, scalar(p.args[2]), (int)(scalar_or_pred(p.args[3]) != 0),
                      sign(p.args[4]), sign(p.args[5]), tnsp_a, tnsp_b, line);
            break;
        }
        case PTX_SETMAXNREG:
            if (p.args.size() != 1) { malformed(); }
            setmaxnreg(p.inc, (long)scalar(p.args[0]), line);
            break;
        case PTX_BAR_SYNC:
        case PTX_BAR_ARRIVE:
            if (p.args.size() != 1 && p.args.size() != 2) { malformed(); }
            named_barrier((long)scalar(p.args[0]), p.args.size() == 2 ? (long)scalar(p.args[1]) : m.nthreads, p.op == PTX_BAR_SYNC, line);
            break;
        case PTX_UNKNOWN:
            fail("inline PTX '" + p.mnemonic + "' is not modelled by dev/cudacpu (" + line_str(line) + ")");
        }
    }
}

} // namespace cudacpu

// ---------------------------------------------------------------------------------------------
// device functions and intrinsics the kernels call
#define __syncthreads() cudacpu::syncthreads(__LINE__)
#define __shfl_xor_sync(mask, v, lanemask) cudacpu::shfl(cudacpu::OP_SHFL_XOR, (mask), (v), (lanemask), __LINE__)
#define __shfl_down_sync(mask, v, delta) cudacpu::shfl(cudacpu::OP_SHFL_DOWN, (mask), (v), (delta), __LINE__)
#define __shfl_up_sync(mask, v, delta) cudacpu::shfl(cudacpu::OP_SHFL_UP, (mask), (v), (delta), __LINE__)
#define __shfl_sync(mask, v, src_lane) cudacpu::shfl(cudacpu::OP_SHFL_IDX, (mask), (v), (src_lane), __LINE__)
#define __ballot_sync(mask, pred) cudacpu::ballot((mask), (pred), __LINE__)
#define __syncwarp(...) cudacpu::syncwarp((__VA_ARGS__ + 0) ? (__VA_ARGS__ + 0) : 0xFFFFFFFFu, __LINE__)

// CUDA's device overloads of min and max (mixed signedness goes unsigned, as in CUDA's headers)
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }
static inline unsigned int min(unsigned int a, unsigned int b) { return a < b ? a : b; }
static inline unsigned int max(unsigned int a, unsigned int b) { return a > b ? a : b; }
static inline unsigned int min(int a, unsigned int b) { return min((unsigned int)a, b); }
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
// Fast-math intrinsics: computed exactly (glibc); their documented error on the GPU is not modelled
// (README, "What only a GPU can prove"); __expf, __logf are glibc's own (exact)
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline float __fdividef(float a, float b) { return a / b; }
static inline float __frcp_rn(float x) { return 1.0f / x; }
static inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }

// atomics: another live CTA runs first, then the read-modify-write happens at once, visible to every
// CTA (weak_memory.h); a fence makes the CTA's stores so far visible to the others
template <class T, class F> static inline T atomic_rmw(T* p, F next) {
    cudacpu::cta_switch_point();
    const T o = *p;
    *p = next(o);
    cudacpu::weak::atomic_done(p, sizeof *p);
    return o;
}
static inline unsigned int atomicAdd(unsigned int* p, unsigned int v) { return atomic_rmw(p, [=](unsigned int o) { return o + v; }); }
static inline int atomicAdd(int* p, int v) { return atomic_rmw(p, [=](int o) { return (int)((unsigned int)o + (unsigned int)v); }); }
static inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) { return atomic_rmw(p, [=](unsigned long long o) { return o + v; }); }
static inline float atomicAdd(float* p, float v) { return atomic_rmw(p, [=](float o) { return o + v; }); }
static inline unsigned int atomicInc(unsigned int* p, unsigned int limit) { return atomic_rmw(p, [=](unsigned int o) { return o >= limit ? 0u : o + 1u; }); }
static inline unsigned int atomicExch(unsigned int* p, unsigned int v) { return atomic_rmw(p, [=](unsigned int) { return v; }); }
static inline unsigned int atomicCAS(unsigned int* p, unsigned int cmp, unsigned int v) { return atomic_rmw(p, [=](unsigned int o) { return o == cmp ? v : o; }); }
static inline unsigned int atomicMax(unsigned int* p, unsigned int v) { return atomic_rmw(p, [=](unsigned int o) { return v > o ? v : o; }); }
static inline void __threadfence() { cudacpu::threadfence(); }
static inline void __threadfence_block() {}
// a shared-memory pointer's 32-bit address for ldmatrix and cp.async (simt.h's window)
static inline size_t __cvta_generic_to_shared(const void* p) { return (size_t)cudacpu::shared_window_addr(p); }
// cache-hinted loads and stores: plain ones of the same type
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

#include "runtime_api.h"
#include "cublaslt_cpu.h"
#ifdef DP_NCCL
#include "nccl_cpu.h" // the CUDA trainer's data parallelism (dev/trainer/data_parallel.h) over processes on this machine
#endif

#endif // CUDACPU_CUDA_CPU_H
