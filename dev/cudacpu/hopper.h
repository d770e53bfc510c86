/*
hopper.h: Hopper's (sm_90a) asynchronous instructions on the CPU runtime (dev/cudacpu/README.md,
"Hopper"), each modelled so that a kernel that forgets one of their rules reads poison, deadlocks with
a message, or stops with a message; dev/cudacpu/test_hopper.cu checks each against host arithmetic and
plants each mistake. simt.h includes this file inside namespace cudacpu; cuda_cpu.h's PTX reader
calls it.

  mbarrier        init, arrive (with expect_tx), expect_tx, try_wait.parity, inval: a 64-bit object in
                  shared memory whose state the runtime keeps beside it (a store over it is found at the
                  next use). try_wait blocks the thread until the phase it waits for completes (a true
                  answer, as a GPU's may be after any number of false ones): a wait that can never end is
                  the CTA's deadlock, reported with the barrier's address, its init line and what it lacks.
  bulk copies     cp.async.bulk.tensor.{1-5}d global -> shared (tile mode, tensor maps made by the
                  runtime's cuTensorMapEncodeTiled: out-of-bounds fill, 32/64/128-byte swizzle) and the
                  plain cp.async.bulk, each completing bytes on an mbarrier: the source is read at issue,
                  the destination holds 0xFF from the issue until the copy lands, and it lands as late as
                  it can: when no thread of the CTA can run, not even one whose wgmma.wait_group or fence
                  could end (those end first), one copy at a time in issue order (the threads a landing
                  wakes run before the next lands). The reverse, shared -> global (bulk_group),
                  reads shared memory through the async proxy when the issuing thread's
                  cp.async.bulk.wait_group retires it.
  async proxy     the bulk copies' and wgmma's reads of shared memory see a second view of it, which
                  generic stores reach only at a fence.proxy.async (all of the CTA's stores so far, when no
                  thread can run: the unit is the CTA, as for __threadfence); the bulk copies write both
                  views. So a tile written by threads and read by wgmma or a bulk store without the fence
                  reads 0xFF, or what the view held before.
  wgmma           mma_async m64nNk16 f32 += bf16 x bf16, A from shared memory (a matrix descriptor) or
                  registers, B from shared memory; the descriptors' no-swizzle and 32/64/128-byte
                  swizzle layouts, K-major and MN-major (the PTX ISA's canonical layouts). A warpgroup
                  collective (128 threads, one line); computed at issue (products in double, rounded
                  once), but the accumulator registers hold kAccPoison (a NaN) until the issuing
                  thread's wgmma.wait_group retires its group, which waits until no other thread of the
                  CTA can run; a store into an operand while it is in flight, an accumulator written
                  while in flight, and an mma_async with no wgmma.fence since the thread's last wait
                  all stop the kernel.
  setmaxnreg      inc/dec: warpgroup-uniform (a collective), 24 to 256 in steps of 8, never past the
                  SM's 64K registers for the CTA's warpgroups, an inc never lowers and a dec never raises.
  named barriers  bar.sync / bar.arrive id, n (ids 1-15; 0 is __syncthreads'): a round completes when n
                  threads (a multiple of 32) have arrived, the waiting ones among them go on; every
                  arrival of a round must give the same n. A round that can never complete is the CTA's
                  deadlock, reported with the barrier's id, the line of its round's first arrival, and
                  the arrivals it has. (sm_70 PTX, here because warp-specialized kernels schedule their
                  warpgroups with it.)
*/
#ifndef CUDACPU_HOPPER_H
#define CUDACPU_HOPPER_H

static const uint32_t kAccPoison = 0x7FBADBADu; // an fp32 NaN that no arithmetic makes
static const int kWgmmaMaxN = 256;
static const uint64_t kMbarMagic = 0x4D42415200000000ull; // "MBAR", the barrier's index below it

// the tensor map as the runtime's cuTensorMapEncodeTiled packs it into CUtensorMap's 128 bytes
struct TensorMapPacked {
    uint64_t magic;
    uint64_t addr;
    uint64_t dim[5];
    uint64_t stride[4]; // bytes, of dimensions 1..4
    uint8_t box_m1[5];  // box size - 1 (1..256)
    uint8_t estride[5];
    uint8_t dtype, rank, elem, interleave, swizzle, oob;
};
static const uint64_t kTensorMapMagic = 0x434D415053555430ull;
static_assert(sizeof(TensorMapPacked) <= 128, "a tensor map is 128 bytes");

struct MBarrier {
    uint64_t addr = 0;
    int count = 0, pending = 0; // arrivals expected per phase, still missing in this one
    long long tx = 0;           // bytes expected and not yet complete in this phase
    long phase = 0;             // phases completed
    int init_line = 0;
    bool live = false;
};

// a bulk copy in flight into shared memory: the box's bytes (read at issue) in the order of the box,
// 16-byte chunks landing at dst + offset through the swizzle
struct BulkLoad {
    uint64_t dst = 0, mbar = 0;
    int swizzle_bits = 0; // 0 none, 1 32B, 2 64B, 3 128B
    std::vector<unsigned char> data;
    int line = 0;
};

// a bulk tensor store (shared -> global) waiting for its thread's cp.async.bulk.wait_group
struct BulkStore {
    TensorMapPacked map;
    int coord[5];
    uint64_t src = 0;
    long group = 0;
    int line = 0;
};

// what one wgmma.mma_async reads from shared memory: B (N x 16) and, unless A is in registers, A (64 x 16)
struct WgmmaOperands {
    uint64_t desc_a = 0, desc_b = 0;
    int N = 0, tnsp_a = 0, tnsp_b = 0, a_in_smem = 0, line = 0;
};

// a thread's part of one wgmma in flight: its accumulator registers and their values
struct WgmmaPending {
    long group = 0;
    int n = 0; // registers
    float* reg[kWgmmaMaxN / 2];
    float *lo = nullptr, *hi = nullptr; // the lowest and highest of them (a register outside is not one)
    float val[kWgmmaMaxN / 2];
    // the warpgroup's first thread only: its operands and their bytes' hash, to find a store into them
    bool check = false;
    uint64_t hash = 0;
    WgmmaOperands ops;
};

// one thread's operands at a warpgroup collective (wgmma.mma_async, setmaxnreg)
struct WgLane {
    int kind = 0, line = 0, arg = 0;
    WgmmaOperands ops;
    uint32_t a[4];
    int scale_d = 0, scale_a = 1, scale_b = 1;
    float c[kWgmmaMaxN / 2];
    float d[kWgmmaMaxN / 2];
};
enum { WG_WGMMA = 1, WG_SETMAXNREG = 2 };
enum { QUIET_WGMMA = 1, QUIET_PROXY = 2 }; // what a WAIT_QUIET thread waits for (Fiber::wait_parity)

// a named barrier's current round
struct NamedBarrier {
    int arrived = 0, count = 0, line = 0;
};

struct HopperCta {
    NamedBarrier named[16];
    std::vector<MBarrier> mbar;
    std::vector<BulkLoad> loads;
    std::vector<std::vector<BulkStore>> stores; // per thread
    std::vector<long> store_groups;
    std::vector<std::vector<WgmmaPending>> wgmma; // per thread, oldest first
    std::vector<long> wgmma_groups;
    std::vector<char> wgmma_fenced;
    std::vector<WgLane> lanes;
    std::vector<int> wg_arrived;
    std::vector<int> maxnreg; // per warpgroup; 0: never set
    // the async proxy's view of shared memory: static variables and dynamic bytes
    std::vector<unsigned char> view_static, view_dyn;
    bool view_ready = false;
    bool used = false; // a Hopper instruction ran in this CTA
};

static HopperCta& hop() {
    Cta& c = cta();
    if (c.hopper == nullptr) { c.hopper = new HopperCta(); }
    HopperCta& h = *c.hopper;
    if (!h.used) {
        const size_t n = (size_t)m.nthreads;
        h.used = true;
        h.mbar.clear();
        h.loads.clear();
        h.stores.assign(n, {});
        h.store_groups.assign(n, 0);
        h.wgmma.assign(n, {});
        h.wgmma_groups.assign(n, 0);
        h.wgmma_fenced.assign(n, 0);
        if (h.lanes.size() < n) { h.lanes.resize(n); }
        h.wg_arrived.assign((n + 127) / 128, 0);
        h.maxnreg.assign((n + 127) / 128, 0);
        h.view_ready = false;
        for (NamedBarrier& b : h.named) { b = NamedBarrier(); }
    }
    return h;
}

static void hopper_cta_start(Cta& c) {
    if (c.hopper) { c.hopper->used = false; }
}

// ---------------------------------------------------------------------------------------------
// the async proxy's view: poison until the first fence.proxy.async or bulk copy writes it
static void view_ready(HopperCta& h) {
    if (h.view_ready) { return; }
    h.view_static.assign(kStaticSmemBytes, 0xFF);
    h.view_dyn.assign(m.dyn_smem_bytes, 0xFF);
    h.view_ready = true;
}
// the view's bytes at a shared address (shared_window_ptr's checks)
static unsigned char* view_ptr(HopperCta& h, uint64_t addr, size_t bytes, size_t align, const char* what, int line) {
    unsigned char* p = shared_window_ptr(addr, bytes, align, what, line);
    view_ready(h);
    Cta& c = cta();
    if (addr < kDynWindow) { return h.view_static.data() + (p - c.static_smem); }
    return h.view_dyn.data() + (p - c.dyn_smem);
}
// fence.proxy.async completing: every generic store of the CTA so far reaches the view
static void view_publish(HopperCta& h) {
    view_ready(h);
    Cta& c = cta();
    memcpy(h.view_static.data(), c.static_smem, c.static_used);
    if (m.dyn_smem_bytes) { memcpy(h.view_dyn.data(), c.dyn_smem, m.dyn_smem_bytes); }
}

// the swizzle of the 16-byte chunk bits [4, 4 + b) by the 128-byte row bits [7, 7 + b) of a shared
// address (CUTLASS's Swizzle<b, 4, 3>): the same function of the address for TMA and wgmma
static inline uint64_t swizzle_addr(uint64_t addr, int b) {
    if (b == 0) { return addr; }
    const uint64_t mask = (1ull << b) - 1;
    return addr ^ (((addr >> 7) & mask) << 4);
}

// ---------------------------------------------------------------------------------------------
// mbarrier

static std::string mbar_where(const MBarrier& b) {
    return "mbarrier at shared " + std::to_string(b.addr) + " (initialized at " + line_str(b.init_line) + ")";
}

// the barrier at addr, checked: initialized, and its 8 bytes not overwritten since
static MBarrier& mbar_at(uint64_t addr, const char* what, int line) {
    HopperCta& h = hop();
    uint64_t word;
    memcpy(&word, shared_window_ptr(addr, 8, 8, what, line), 8);
    const uint64_t idx = word & 0xFFFFFFFFull;
    if ((word & 0xFFFFFFFF00000000ull) != kMbarMagic || idx >= h.mbar.size() || !h.mbar[idx].live || h.mbar[idx].addr != addr) {
        fail(std::string(what) + " at " + line_str(line) + ": shared " + std::to_string(addr) +
             " holds no initialized mbarrier (never initialized, invalidated, or overwritten by a store)");
    }
    return h.mbar[idx];
}

static void mbar_wake(Cta& c, const MBarrier& b) {
    const int parity = (int)(b.phase & 1);
    for (int t = 0; t < m.nthreads; t++) {
        Fiber& f = c.fibers[t];
        if (f.state == WAIT_MBAR && f.wait_addr == b.addr && f.wait_parity != parity) {
            f.state = RUNNABLE;
            set_ready(c, t);
        }
    }
}

// the phase completes when its arrivals and its bytes are all in
static void mbar_maybe_complete(Cta& c, MBarrier& b) {
    if (b.pending == 0 && b.tx == 0) {
        b.phase++;
        b.pending = b.count;
        mbar_wake(c, b);
    }
}

static void mbar_init(uint64_t addr, long count, int line) {
    HopperCta& h = hop();
    if (count < 1 || count > (1 << 20) - 1) {
        fail("mbarrier.init at " + line_str(line) + ": count " + std::to_string(count) + " outside 1..2^20-1");
    }
    unsigned char* p = shared_window_ptr(addr, 8, 8, "mbarrier.init", line);
    for (MBarrier& b : h.mbar) {
        if (b.live && b.addr == addr) { fail("mbarrier.init at " + line_str(line) + ": " + mbar_where(b) + " is live (inval it first)"); }
    }
    MBarrier b;
    b.addr = addr;
    b.count = b.pending = (int)count;
    b.init_line = line;
    b.live = true;
    const uint64_t word = kMbarMagic | (uint64_t)h.mbar.size();
    h.mbar.push_back(b);
    memcpy(p, &word, 8);
}

static void mbar_inval(uint64_t addr, int line) {
    MBarrier& b = mbar_at(addr, "mbarrier.inval", line);
    b.live = false;
    memset(shared_window_ptr(addr, 8, 8, "mbarrier.inval", line), 0xFF, 8);
}

static void mbar_expect_tx(uint64_t addr, long long bytes, int line) {
    MBarrier& b = mbar_at(addr, "mbarrier.expect_tx", line);
    if (bytes < 0 || bytes > (1 << 20) - 1) { fail("mbarrier expect_tx at " + line_str(line) + ": byte count outside 0..2^20-1"); }
    b.tx += bytes;
}

// returns the state token (the phase arrived in)
static uint64_t mbar_arrive(uint64_t addr, int line) {
    Cta& c = cta();
    MBarrier& b = mbar_at(addr, "mbarrier.arrive", line);
    if (b.pending <= 0) {
        fail("mbarrier.arrive at " + line_str(line) + ": " + mbar_where(b) + " already has its " + std::to_string(b.count) +
             " arrivals in this phase (an arrive too many, or one meant for the next phase)");
    }
    const uint64_t token = (uint64_t)b.phase;
    b.pending--;
    mbar_maybe_complete(c, b);
    return token;
}

static void mbar_complete_tx(uint64_t addr, long long bytes) {
    Cta& c = cta();
    HopperCta& h = hop();
    for (MBarrier& b : h.mbar) {
        if (b.live && b.addr == addr) {
            b.tx -= bytes;
            mbar_maybe_complete(c, b);
            return;
        }
    }
    // the barrier was invalidated while a copy was in flight: the copy's issue checked it
    m.error = "a bulk copy completed on an mbarrier at shared " + std::to_string(addr) + " that was invalidated while it was in flight";
}

// try_wait.parity: true once the phase of this parity has completed (the current phase's parity
// differs); until then the thread waits
static bool mbar_try_wait_parity(uint64_t addr, int parity, int line) {
    Cta& c = cta();
    MBarrier& b = mbar_at(addr, "mbarrier.try_wait.parity", line);
    if ((int)(b.phase & 1) != (parity & 1)) { return true; }
    Fiber& f = c.fibers[m.cur];
    f.state = WAIT_MBAR;
    f.line = line;
    f.wait_addr = addr;
    f.wait_parity = parity & 1;
    clear_ready(c, m.cur);
    wait_and_run_next();
    return true;
}

// ---------------------------------------------------------------------------------------------
// bulk copies

static const TensorMapPacked& tensor_map_at(uint64_t generic, int line) {
    const TensorMapPacked* t = (const TensorMapPacked*)(uintptr_t)generic;
    if (generic % 64 != 0) { fail("cp.async.bulk.tensor at " + line_str(line) + ": the tensor map's address is not 64-byte aligned"); }
    if (t->magic != kTensorMapMagic) {
        fail("cp.async.bulk.tensor at " + line_str(line) + ": the address holds no tensor map made by cuTensorMapEncodeTiled");
    }
    return *t;
}

static int tensor_map_swizzle_bits(const TensorMapPacked& t, int line) {
    if (t.swizzle == CU_TENSOR_MAP_SWIZZLE_NONE) { return 0; }
    const int bits = t.swizzle == CU_TENSOR_MAP_SWIZZLE_32B ? 1 : t.swizzle == CU_TENSOR_MAP_SWIZZLE_64B ? 2 : t.swizzle == CU_TENSOR_MAP_SWIZZLE_128B ? 3 : -1;
    if (bits < 0) { fail("cp.async.bulk.tensor at " + line_str(line) + ": this swizzle mode is not modelled (none, 32B, 64B, 128B are)"); }
    if ((uint32_t)(t.box_m1[0] + 1) * t.elem != (16u << bits)) {
        fail("cp.async.bulk.tensor at " + line_str(line) + ": a swizzled box whose inner row is not the swizzle span is not modelled");
    }
    return bits;
}

// calls f(box offset in bytes, global element pointer or null when out of bounds) for each element
template <class F>
static void tensor_box_walk(const TensorMapPacked& t, const int* coord, F f) {
    const int r = t.rank;
    uint32_t box[5] = {1, 1, 1, 1, 1};
    for (int d = 0; d < r; d++) { box[d] = t.box_m1[d] + 1u; }
    uint64_t off = 0;
    for (uint32_t i4 = 0; i4 < box[4]; i4++) {
        for (uint32_t i3 = 0; i3 < box[3]; i3++) {
            for (uint32_t i2 = 0; i2 < box[2]; i2++) {
                for (uint32_t i1 = 0; i1 < box[1]; i1++) {
                    for (uint32_t i0 = 0; i0 < box[0]; i0++, off += t.elem) {
                        const uint32_t idx[5] = {i0, i1, i2, i3, i4};
                        bool in = true;
                        uint64_t g = t.addr;
                        for (int d = 0; d < r; d++) {
                            const long long x = (long long)coord[d] + idx[d];
                            if (x < 0 || x >= (long long)t.dim[d]) { in = false; break; }
                            g += (uint64_t)x * (d == 0 ? t.elem : t.stride[d - 1]);
                        }
                        f(off, in ? (unsigned char*)(uintptr_t)g : nullptr);
                    }
                }
            }
        }
    }
}

static uint64_t tensor_box_bytes(const TensorMapPacked& t) {
    uint64_t n = t.elem;
    for (int d = 0; d < t.rank; d++) { n *= t.box_m1[d] + 1u; }
    return n;
}

// the 16-byte chunks of a box at dst: poisoned in both views now
static void bulk_poison(HopperCta& h, uint64_t dst, uint64_t bytes, int swz, const char* what, int line) {
    for (uint64_t o = 0; o < bytes; o += 16) {
        const uint64_t a = swizzle_addr(dst + o, swz);
        memset(shared_window_ptr(a, 16, 16, what, line), 0xFF, 16);
        memset(view_ptr(h, a, 16, 16, what, line), 0xFF, 16);
    }
}

static void bulk_tensor_load(uint64_t dst, uint64_t map_addr, const int* coord, int dims, uint64_t mbar, int line) {
    HopperCta& h = hop();
    const TensorMapPacked& t = tensor_map_at(map_addr, line);
    if (dims != t.rank) {
        fail("cp.async.bulk.tensor." + std::to_string(dims) + "d at " + line_str(line) + " with a tensor map of rank " + std::to_string(t.rank));
    }
    if (dst % 128 != 0) { fail("cp.async.bulk.tensor at " + line_str(line) + ": shared destination " + std::to_string(dst) + " not 128-byte aligned"); }
    mbar_at(mbar, "cp.async.bulk.tensor's mbarrier", line);
    BulkLoad L;
    L.dst = dst;
    L.mbar = mbar;
    L.line = line;
    L.swizzle_bits = tensor_map_swizzle_bits(t, line);
    const uint64_t bytes = tensor_box_bytes(t);
    L.data.assign(bytes, 0);
    const bool nan_fill = t.oob == CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA;
    tensor_box_walk(t, coord, [&](uint64_t off, const unsigned char* g) {
        if (g) {
            memcpy(&L.data[off], g, t.elem);
        } else if (nan_fill) {
            memset(&L.data[off], 0xFF, t.elem);
        }
    });
    bulk_poison(h, dst, bytes, L.swizzle_bits, "cp.async.bulk.tensor", line);
    h.loads.push_back(std::move(L));
}

// cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [dst], [src], size, [mbar]
static void bulk_load(uint64_t dst, const void* src, long long bytes, uint64_t mbar, int line) {
    HopperCta& h = hop();
    if (bytes <= 0 || bytes % 16 != 0) { fail("cp.async.bulk at " + line_str(line) + ": size must be a positive multiple of 16"); }
    if (dst % 16 != 0 || (uintptr_t)src % 16 != 0) { fail("cp.async.bulk at " + line_str(line) + ": addresses must be 16-byte aligned"); }
    mbar_at(mbar, "cp.async.bulk's mbarrier", line);
    BulkLoad L;
    L.dst = dst;
    L.mbar = mbar;
    L.line = line;
    L.data.assign((const unsigned char*)src, (const unsigned char*)src + bytes);
    bulk_poison(h, dst, (uint64_t)bytes, 0, "cp.async.bulk", line);
    h.loads.push_back(std::move(L));
}

// the oldest copy in flight lands (scheduler context: no thread runs). One at a time, so that the
// threads a landing wakes run before the next copy lands: a phase that completes early (too few bytes
// expected) lets its waiters read the copies still in flight
static void bulk_land_oldest(HopperCta& h) {
    BulkLoad L = std::move(h.loads.front());
    h.loads.erase(h.loads.begin());
    for (uint64_t o = 0; o < L.data.size(); o += 16) {
        const uint64_t a = swizzle_addr(L.dst + o, L.swizzle_bits);
        memcpy(shared_window_ptr(a, 16, 16, "a bulk copy landing", L.line), &L.data[o], 16);
        memcpy(view_ptr(h, a, 16, 16, "a bulk copy landing", L.line), &L.data[o], 16);
    }
    mbar_complete_tx(L.mbar, (long long)L.data.size());
}

static void bulk_tensor_store(uint64_t map_addr, const int* coord, int dims, uint64_t src, int line) {
    HopperCta& h = hop();
    const TensorMapPacked& t = tensor_map_at(map_addr, line);
    if (dims != t.rank) {
        fail("cp.async.bulk.tensor." + std::to_string(dims) + "d at " + line_str(line) + " with a tensor map of rank " + std::to_string(t.rank));
    }
    if (src % 128 != 0) { fail("cp.async.bulk.tensor at " + line_str(line) + ": shared source " + std::to_string(src) + " not 128-byte aligned"); }
    tensor_map_swizzle_bits(t, line);
    BulkStore S;
    S.map = t;
    for (int d = 0; d < 5; d++) { S.coord[d] = d < dims ? coord[d] : 0; }
    S.src = src;
    S.line = line;
    h.stores[m.cur].push_back(S);
}

static void bulk_commit() { commit_group(hop().stores[m.cur], hop().store_groups[m.cur]); }

// cp.async.bulk.wait_group[.read] n: the stores of every committed group but the newest n read shared
// memory (the async view) now and write global memory
static void bulk_wait(long n, int line) {
    HopperCta& h = hop();
    if (n < 0) { fail("cp.async.bulk.wait_group at " + line_str(line) + " with a negative count"); }
    std::vector<BulkStore>& q = h.stores[m.cur];
    const long done = h.store_groups[m.cur] - n;
    size_t keep = 0;
    for (size_t i = 0; i < q.size(); i++) {
        const BulkStore& s = q[i];
        if (s.group != 0 && s.group <= done) {
            const int swz = tensor_map_swizzle_bits(s.map, s.line);
            tensor_box_walk(s.map, s.coord, [&](uint64_t off, unsigned char* g) {
                if (g) {
                    const uint64_t a = swizzle_addr(s.src + off / 16 * 16, swz) + off % 16;
                    memcpy(g, view_ptr(h, a, s.map.elem, s.map.elem, "cp.async.bulk.tensor (store)", s.line), s.map.elem);
                }
            });
        } else {
            q[keep++] = s;
        }
    }
    q.resize(keep);
}

// ---------------------------------------------------------------------------------------------
// warpgroup collectives

// a thread arrives with its WgLane filled in; the last of the 128 checks agreement, runs `compute`
template <class F>
static void warpgroup_collective(F compute) {
    Cta& c = cta();
    HopperCta& h = hop();
    const int tid = m.cur, wg = tid / 128, wg0 = wg * 128;
    const WgLane& me = h.lanes[tid];
    if (wg0 + 128 > m.nthreads) { fail("a warpgroup instruction at " + line_str(me.line) + " in a partial warpgroup (the block is not a multiple of 128 threads)"); }
    if (++h.wg_arrived[wg] < 128) {
        c.fibers[tid].state = WAIT_WARP;
        c.fibers[tid].line = me.line;
        clear_ready(c, tid);
        wait_and_run_next();
        return;
    }
    h.wg_arrived[wg] = 0;
    for (int l = 0; l < 128; l++) {
        const WgLane& o = h.lanes[wg0 + l];
        if (o.kind != me.kind || o.line != me.line || o.arg != me.arg) {
            fail("divergent warpgroup instruction: thread " + std::to_string(wg0 + l) + " at " + line_str(o.line) +
                 ", the last thread of the warpgroup at " + line_str(me.line));
        }
    }
    compute(wg0);
    for (int l = 0; l < 128; l++) {
        c.fibers[wg0 + l].state = RUNNABLE;
        set_ready(c, wg0 + l);
    }
}

// setmaxnreg.{inc,dec}.sync.aligned.u32 n
static void setmaxnreg(int inc, long n, int line) {
    HopperCta& h = hop();
    if (n < 24 || n > 256 || n % 8 != 0) { fail("setmaxnreg at " + line_str(line) + ": " + std::to_string(n) + " registers (24 to 256, a multiple of 8)"); }
    WgLane& me = h.lanes[m.cur];
    me.kind = WG_SETMAXNREG;
    me.line = line;
    me.arg = (int)n * 2 + inc;
    warpgroup_collective([&](int wg0) {
        const int wg = wg0 / 128, old = h.maxnreg[wg];
        if (old != 0 && inc && n < old) { fail("setmaxnreg.inc at " + line_str(line) + " to " + std::to_string(n) + " below the warpgroup's " + std::to_string(old)); }
        if (old != 0 && !inc && n > old) { fail("setmaxnreg.dec at " + line_str(line) + " to " + std::to_string(n) + " above the warpgroup's " + std::to_string(old)); }
        h.maxnreg[wg] = (int)n;
        long total = 0;
        for (int r : h.maxnreg) { total += 128L * r; }
        if (total > 65536) {
            fail("setmaxnreg at " + line_str(line) + ": the CTA's warpgroups now ask for " + std::to_string(total) +
                 " registers, more than the SM's 65536");
        }
    });
}

// ---------------------------------------------------------------------------------------------
// wgmma

// the shared address of element (mn, k) of a wgmma operand (the PTX ISA's canonical layouts; 16-bit
// elements: T = 8 per 16 bytes): K-major (tnsp 0) or MN-major (tnsp 1), no swizzle or W = 32/64/128
// bytes. K-major swizzled: rows of W bytes, 8-row groups SBO apart (LBO unused); MN-major swizzled:
// runs of W bytes along MN, W-byte runs LBO apart, K rows W apart, 8-row groups SBO apart; no swizzle:
// 8 x 16-byte core matrices, LBO apart along K (K-major) or along K (MN-major), SBO along MN
static inline uint64_t wgmma_elem_addr(uint64_t desc, int mn, int k, int tnsp) {
    const uint64_t start = (desc & 0x3FFF) << 4, lbo = ((desc >> 16) & 0x3FFF) << 4, sbo = ((desc >> 32) & 0x3FFF) << 4;
    const int mode = (int)(desc >> 62);
    const int b = mode == 1 ? 3 : mode == 2 ? 2 : mode == 3 ? 1 : 0;
    uint64_t off;
    if (b == 0) {
        off = tnsp == 0 ? (uint64_t)(mn / 8) * sbo + (uint64_t)(k / 8) * lbo + (uint64_t)(mn % 8) * 16 + (uint64_t)(k % 8) * 2
                        : (uint64_t)(mn / 8) * sbo + (uint64_t)(k / 8) * lbo + (uint64_t)(k % 8) * 16 + (uint64_t)(mn % 8) * 2;
    } else {
        const int w = 16 << b, per = w / 2; // bytes of a swizzle row, elements in it
        off = tnsp == 0 ? (uint64_t)(mn / 8) * sbo + (uint64_t)(mn % 8) * w + (uint64_t)k * 2
                        : (uint64_t)(mn / per) * lbo + (uint64_t)(mn % per) * 2 + (uint64_t)(k % 8) * w + (uint64_t)(k / 8) * sbo;
    }
    return swizzle_addr(start + off, b);
}

// an operand's rows x 16 elements from shared memory: through the async view (values), or the generic
// one (the hash that finds a store into it while in flight). In every layout 8 elements along the
// contiguous dimension (k when K-major, mn when MN-major) from a multiple of 8 fill one 16-byte chunk
// (the swizzle moves whole chunks), so the operand is read a chunk at a time
static uint64_t wgmma_gather(HopperCta& h, uint64_t desc, int rows, int tnsp, bool view, double (*out)[16], int line) {
    if (((desc >> 49) & 7) != 0) { fail("wgmma at " + line_str(line) + ": a descriptor with a matrix base offset is not modelled"); }
    uint64_t hash = 1469598103934665603ull;
    for (int r0 = 0; r0 < rows; r0 += tnsp ? 8 : 1) {
        for (int k0 = 0; k0 < 16; k0 += tnsp ? 1 : 8) {
            const uint64_t a = wgmma_elem_addr(desc, r0, k0, tnsp);
            uint16_t chunk[8];
            memcpy(chunk, view ? view_ptr(h, a, 16, 16, "wgmma.mma_async", line) : shared_window_ptr(a, 16, 16, "wgmma.mma_async", line), 16);
            for (int e = 0; e < 8; e++) {
                if (out) { (tnsp ? out[r0 + e][k0] : out[r0][k0 + e]) = (double)bf16_bits_to_float(chunk[e]); }
                hash = (hash ^ chunk[e] ^ ((a + 2 * e) << 16)) * 1099511628211ull;
            }
        }
    }
    return hash;
}

static uint64_t wgmma_operands_hash(HopperCta& h, const WgmmaOperands& p) {
    uint64_t hash = wgmma_gather(h, p.desc_b, p.N, p.tnsp_b, false, nullptr, p.line);
    if (p.a_in_smem) { hash ^= wgmma_gather(h, p.desc_a, 64, p.tnsp_a, false, nullptr, p.line) * 31; }
    return hash;
}

// D (64 x N) = A (64 x 16) B (16 x N) [+ D], over the warpgroup whose first thread is wg0
__attribute__((noinline)) static void wgmma_compute(HopperCta& h, int wg0) {
    const WgLane& l0 = h.lanes[wg0];
    const WgmmaOperands& op = l0.ops;
    const int N = op.N, line = op.line;
    for (int l = 1; l < 128; l++) {
        const WgLane& o = h.lanes[wg0 + l];
        if (o.ops.N != N || o.ops.desc_b != op.desc_b || o.scale_d != l0.scale_d || o.ops.tnsp_b != op.tnsp_b ||
            (op.a_in_smem && (o.ops.desc_a != op.desc_a || o.ops.tnsp_a != op.tnsp_a))) {
            fail("wgmma.mma_async at " + line_str(line) + ": the warpgroup's threads give different descriptors or scale-d (thread " +
                 std::to_string(wg0 + l) + ")");
        }
    }
    static double A[64][16], B[kWgmmaMaxN][16];
    wgmma_gather(h, op.desc_b, N, op.tnsp_b, true, B, line);
    if (op.a_in_smem) {
        wgmma_gather(h, op.desc_a, 64, op.tnsp_a, true, A, line);
    } else {
        for (int l = 0; l < 128; l++) { // each warp's 16 rows in mma.sync's A fragment layout
            const WgLane& o = h.lanes[wg0 + l];
            const int w = l / 32, lane = l % 32;
            for (int reg = 0; reg < 4; reg++) {
                for (int half = 0; half < 2; half++) {
                    int r, cl;
                    frag_a_coord(lane, reg, half, &r, &cl);
                    A[16 * w + r][cl] = (double)bf16_bits_to_float((o.a[reg] >> (16 * half)) & 0xFFFFu);
                }
            }
        }
    }
    const double sab = (double)l0.scale_a * l0.scale_b; // +-1: the products' signs, exact
    for (int l = 0; l < 128; l++) {
        WgLane& o = h.lanes[wg0 + l];
        const int w = l / 32, g = (l % 32) / 4, t = l % 4;
        for (int i = 0; i < N / 2; i++) {
            const int row = 16 * w + g + 8 * ((i % 4) / 2), col = 8 * (i / 4) + 2 * t + (i % 2);
            double acc = l0.scale_d ? (double)o.c[i] : 0.0;
            for (int k = 0; k < 16; k++) { acc += sab * (A[row][k] * B[col][k]); }
            o.d[i] = (float)acc;
        }
    }
}

// wgmma.mma_async: regs are the thread's N/2 accumulator registers
static void wgmma_mma(float* const* regs, int N, uint64_t desc_a, const uint32_t* a_regs, uint64_t desc_b, int scale_d,
                      int scale_a, int scale_b, int tnsp_a, int tnsp_b, int line) {
    HopperCta& h = hop();
    const int tid = m.cur;
    if (N < 8 || N > kWgmmaMaxN || N % 8 != 0) { fail("wgmma.mma_async at " + line_str(line) + ": N " + std::to_string(N) + " (8 to 256, a multiple of 8)"); }
    if (!h.wgmma_fenced[tid]) {
        fail("wgmma.mma_async at " + line_str(line) + " with no wgmma.fence since the thread's last wgmma.wait_group (or its start): "
             "the accumulator registers may still be written by earlier instructions");
    }
    WgLane& me = h.lanes[tid];
    me.kind = WG_WGMMA;
    me.line = line;
    me.arg = N;
    me.ops.desc_a = desc_a;
    me.ops.desc_b = desc_b;
    me.ops.N = N;
    me.ops.tnsp_a = tnsp_a;
    me.ops.tnsp_b = tnsp_b;
    me.ops.a_in_smem = a_regs == nullptr;
    me.ops.line = line;
    for (int i = 0; i < 4; i++) { me.a[i] = a_regs ? a_regs[i] : 0u; }
    me.scale_d = scale_d;
    me.scale_a = scale_a;
    me.scale_b = scale_b;
    // the accumulator's input: an earlier wgmma of this thread still in flight on the same register
    // hands its result on (the hardware chains them), else the register; none with scale-d 0 (D = A B)
    std::vector<WgmmaPending>& q = h.wgmma[tid];
    for (int i = 0; i < N / 2 && scale_d; i++) {
        bool found = false;
        for (size_t p = q.size(); p-- > 0 && !found;) {
            if (regs[i] < q[p].lo || regs[i] > q[p].hi) { continue; }
            if (i < q[p].n && q[p].reg[i] == regs[i]) { me.c[i] = q[p].val[i]; found = true; }
            for (int j = 0; j < q[p].n && !found; j++) {
                if (q[p].reg[j] == regs[i]) { me.c[i] = q[p].val[j]; found = true; }
            }
        }
        if (!found) { me.c[i] = *regs[i]; }
    }
    const bool first_lane = tid % 128 == 0;
    warpgroup_collective([&](int wg0) { wgmma_compute(h, wg0); });
    WgmmaPending p;
    p.n = N / 2;
    p.ops.line = line; // every thread's record names its issue (the first lane's also keeps the operands)
    p.lo = p.hi = regs[0];
    for (int i = 0; i < N / 2; i++) {
        p.reg[i] = regs[i];
        p.lo = std::min(p.lo, regs[i]);
        p.hi = std::max(p.hi, regs[i]);
        p.val[i] = h.lanes[tid].d[i];
        memcpy(regs[i], &kAccPoison, 4);
    }
    if (first_lane) {
        p.check = true;
        p.ops = h.lanes[tid].ops;
        p.hash = wgmma_operands_hash(h, p.ops);
    }
    q.push_back(p);
}

static void wgmma_fence() { hop().wgmma_fenced[m.cur] = 1; }

static void wgmma_commit() { commit_group(hop().wgmma[m.cur], hop().wgmma_groups[m.cur]); }

// a thread waits until no other thread of its CTA can run (hopper_quiesce ends the wait)
static void quiet_wait(int what, int line) {
    Cta& c = cta();
    Fiber& f = c.fibers[m.cur];
    f.state = WAIT_QUIET;
    f.line = line;
    f.wait_parity = what;
    clear_ready(c, m.cur);
    wait_and_run_next();
}

// wgmma.wait_group n: as late as it can be, every committed group but the newest n completes: its
// results reach the registers (which must still hold the poison the issue left), its operands are
// checked unchanged
static void wgmma_wait(long n, int line) {
    HopperCta& h = hop();
    if (n < 0 || n > 7) { fail("wgmma.wait_group at " + line_str(line) + ": count outside 0..7"); }
    quiet_wait(QUIET_WGMMA, line);
    std::vector<WgmmaPending>& q = h.wgmma[m.cur];
    const long done = h.wgmma_groups[m.cur] - n;
    size_t first_kept = 0;
    while (first_kept < q.size() && q[first_kept].group != 0 && q[first_kept].group <= done) { first_kept++; }
    for (size_t i = 0; i < first_kept; i++) {
        const WgmmaPending& p = q[i];
        if (p.check && wgmma_operands_hash(h, p.ops) != p.hash) {
            fail("wgmma.mma_async issued at " + line_str(p.ops.line) + ": its shared-memory operands changed before the wgmma.wait_group at " +
                 line_str(line) + " (a store or copy into a tile still being read)");
        }
        for (int r = 0; r < p.n; r++) {
            // a later wgmma still in flight on this register keeps it poisoned; one retiring now writes it next
            bool later = false;
            for (size_t j = i + 1; j < q.size() && !later; j++) {
                const WgmmaPending& o = q[j];
                if (p.reg[r] < o.lo || p.reg[r] > o.hi) { continue; }
                later = r < o.n && o.reg[r] == p.reg[r]; // a chain of wgmma on the same registers
                for (int s = 0; s < o.n && !later; s++) { later = o.reg[s] == p.reg[r]; }
            }
            uint32_t bits;
            memcpy(&bits, p.reg[r], 4);
            if (bits != kAccPoison) {
                fail("wgmma.wait_group at " + line_str(line) + ": an accumulator register of the wgmma issued at " + line_str(p.ops.line) +
                     " was written while the wgmma was in flight");
            }
            if (!later) { memcpy(p.reg[r], &p.val[r], 4); }
        }
    }
    q.erase(q.begin(), q.begin() + (long)first_kept);
    h.wgmma_fenced[m.cur] = 0;
}

// fence.proxy.async: the CTA's generic stores so far reach the async view (when no thread can run)
static void fence_proxy_async(int line) {
    hop();
    quiet_wait(QUIET_PROXY, line);
}

// ---------------------------------------------------------------------------------------------
// named barriers: bar.sync (arrive and wait) and bar.arrive (arrive only) id, n

static void named_barrier(long id, long n, bool wait, int line) {
    Cta& c = cta();
    HopperCta& h = hop();
    const char* what = wait ? "bar.sync" : "bar.arrive";
    if (id < 1 || id > 15) { fail(std::string(what) + " at " + line_str(line) + ": barrier " + std::to_string(id) + " (1 to 15 here; 0 is __syncthreads')"); }
    if (n <= 0 || n % 32 != 0 || n > m.nthreads) {
        fail(std::string(what) + " at " + line_str(line) + ": " + std::to_string(n) + " threads (a multiple of 32, at most the block's " +
             std::to_string(m.nthreads) + ")");
    }
    NamedBarrier& b = h.named[id];
    if (b.arrived > 0 && b.count != n) {
        fail(std::string(what) + " at " + line_str(line) + " counts " + std::to_string(n) + " threads on barrier " + std::to_string(id) +
             ", whose round begun at " + line_str(b.line) + " counts " + std::to_string(b.count));
    }
    if (b.arrived == 0) { b.line = line; }
    b.count = (int)n;
    if (++b.arrived == n) { // the round completes: its waiters go on
        b.arrived = 0;
        for (int t = 0; t < m.nthreads; t++) {
            Fiber& f = c.fibers[t];
            if (f.state == WAIT_NAMED && f.wait_addr == (uint64_t)id) {
                f.state = RUNNABLE;
                set_ready(c, t);
            }
        }
        return;
    }
    if (!wait) { return; }
    Fiber& f = c.fibers[m.cur];
    f.state = WAIT_NAMED;
    f.line = line;
    f.wait_addr = (uint64_t)id;
    clear_ready(c, m.cur);
    wait_and_run_next();
}

// ---------------------------------------------------------------------------------------------
// the scheduler's hooks (simt.h)

// no thread of the CTA can run: the quiet waits end; with none, the oldest copy in flight lands (a
// copy lands as late as it can: a thread whose wgmma.wait_group or fence can end runs first, so a tile
// read after such a wait without its own mbarrier's phase is still in flight). False: nothing to do
static bool hopper_quiesce(Cta& c) {
    HopperCta* h = c.hopper;
    if (h == nullptr || !h->used) { return false; }
    bool any = false, proxy = false;
    for (int t = 0; t < m.nthreads; t++) {
        if (c.fibers[t].state == WAIT_QUIET) {
            any = true;
            proxy = proxy || c.fibers[t].wait_parity == QUIET_PROXY;
        }
    }
    if (!any) {
        if (h->loads.empty()) { return false; }
        bulk_land_oldest(*h);
        return true;
    }
    if (proxy) { view_publish(*h); }
    for (int t = 0; t < m.nthreads; t++) {
        if (c.fibers[t].state == WAIT_QUIET) {
            c.fibers[t].state = RUNNABLE;
            set_ready(c, t);
        }
    }
    return true;
}

// a thread exits (its own context): nothing of its own may be in flight
static void hopper_thread_exit(Cta& c, int tid) {
    HopperCta* h = c.hopper;
    if (h == nullptr || !h->used) { return; }
    if (!h->wgmma[tid].empty()) {
        fail("exited with " + std::to_string(h->wgmma[tid].size()) + " wgmma.mma_async in flight (a missing wgmma.wait_group)");
    }
    if (!h->stores[tid].empty()) {
        fail("exited with " + std::to_string(h->stores[tid].size()) + " bulk tensor stores not waited for (a missing cp.async.bulk.wait_group)");
    }
    if (h->wg_arrived[tid / 128] > 0) { fail("exited while its warpgroup waits at a warpgroup instruction"); }
}

// the CTA's last thread exited: an error message if copies are still in flight
static std::string hopper_cta_exit(Cta& c) {
    HopperCta* h = c.hopper;
    if (h == nullptr || !h->used || h->loads.empty()) { return ""; }
    return "the CTA exited with " + std::to_string(h->loads.size()) + " bulk copies in flight (the first issued at " +
           line_str(h->loads[0].line) + "): nothing waited for its mbarrier";
}

// what a thread blocked in hopper.h waits for, for the deadlock message
static std::string hopper_wait_str(Cta& c, int t) {
    const Fiber& f = c.fibers[t];
    if (f.state == WAIT_QUIET) { return "@quiet:" + std::to_string(f.line); }
    if (f.state == WAIT_NAMED) {
        const NamedBarrier& b = c.hopper->named[f.wait_addr];
        return "@bar:" + std::to_string(f.line) + " (named barrier " + std::to_string(f.wait_addr) + ": " + std::to_string(b.arrived) +
               " of " + std::to_string(b.count) + " threads arrived, the round begun at " + line_str(b.line) + ")";
    }
    std::string s = "@mbarrier:" + std::to_string(f.line);
    if (c.hopper) {
        for (const MBarrier& b : c.hopper->mbar) {
            if (b.live && b.addr == f.wait_addr) {
                s += " (" + mbar_where(b) + ", waiting for the phase of parity " + std::to_string(f.wait_parity) + ": " +
                     std::to_string(b.pending) + " of " + std::to_string(b.count) + " arrivals and " + std::to_string(b.tx) +
                     " bytes missing)";
            }
        }
    }
    return s;
}

#endif // CUDACPU_HOPPER_H
