/*
weak_memory.h: a GPU's weak memory for the CPU runtime (dev/cudacpu/README.md, "Memory"). simt.h
includes it; the scheduler calls it where the running CTA changes and where a CTA's fences complete,
the fault handler (cuda_cpu.h) where a kernel first writes a device page in a stretch, the atomics
after theirs.

What a GPU promises: a CTA's stores to global memory become visible to other CTAs only at a fence
(__threadfence), a release atomic, or the kernel's end. Until then another CTA may read the old
bytes. The model takes the worst case:
  - A CTA's stretch of running (its segment) starts when the scheduler switches to it and ends when
    it switches away: at an atomic (another CTA runs first), or when the CTA exits. Device pages are
    read-only; in a launch the first write to a page in a segment faults, and the handler saves a
    copy of the page (what the other CTAs see) and makes it writable. (Outside a launch the host's
    first write to a page makes it writable until the next launch.)
  - The end of a segment hides the CTA's writes: the bytes that differ from the saved copies go to
    the CTA's store buffer, and memory there gets 0xFF instead (NaN in fp32 and bf16). A GPU would
    show the old bytes; NaN makes a read of them show up whatever they held. When the CTA runs
    again its buffer is written back, so it reads its own stores.
  - A fence (simt.h's threadfence: it completes when no other thread of the CTA can run) makes
    everything the CTA stored so far visible. Its pages stay writable to the segment's end (a fault
    per thread and page would cost more than the kernel), so later writes to those pages in the same
    segment are visible too.
  - An atomic acts on memory at once and is visible at once: its bytes go into the saved copy, so
    they are never hidden.
  - At the kernel's end every buffer is written to memory, in the order the CTAs finished.
  - A kernel whose tracked launch reached no atomic and no fence cannot pass data between its CTAs;
    its later launches are not tracked (a fault per page and launch instead of per page and CTA:
    the mode then costs about 5% of a fixture run, not 50%).
So a writer that signals another CTA (a ticket, a flag) without a fence between its stores and the
signal lets the reader see NaN where the data should be. What it does not model (dev/TESTING.md):
loads are served from memory, as ld.global.cg (L2) loads are, so a missing fence on the reading side,
an L1 that holds stale lines and ld.global.nc go unseen; the unit is the CTA, so a fence publishes
the stores of every thread of its CTA that came before it in the scheduler's order (on a GPU only
those ordered before it by a barrier); a release atomic has no model (none is used: an asm one stops
the kernel); __device__ variables and pinned host memory are not tracked.

CUDA_CPU_WEAK_MEMORY=0 turns it off (memory is then sequentially consistent).
*/
#ifndef CUDACPU_WEAK_MEMORY_H
#define CUDACPU_WEAK_MEMORY_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <map>
#include <unordered_map>
#include <unordered_set>
#include <vector>
#include <sys/mman.h>
#include <unistd.h>

namespace cudacpu {
namespace weak {

static const size_t kPage = 4096;                 // x86-64 Linux (init checks)
static const size_t kWords = kPage / 8;
static const uint64_t kHidden = ~0ull;            // what another CTA reads of a store not yet visible

struct DirtyPage {
    unsigned char* page;
    unsigned char* saved; // the page as other CTAs see it
};
// a page's bytes that a CTA stored and other CTAs do not see yet: the page's words as the CTA left
// them, and a mask of the bytes it changed (0xFF per byte)
struct HiddenPage {
    unsigned char* page;
    uint64_t* words; // kWords of data, then kWords of mask
};
using StoreBuffer = std::vector<HiddenPage>;

struct State {
    bool on = true;
    bool active = false;               // a launch is running, tracked
    bool synced = false;               // it reached an atomic or a fence
    std::unordered_set<const char*> quiet; // kernels whose tracked launch reached neither
    std::vector<unsigned char*> host_written; // pages the host wrote since the last launch: writable
    std::map<uintptr_t, uintptr_t> regions; // device allocations' page spans [first, end), by first
    int owner = -1;                    // the CTA slot whose segment is open (only it has writable pages)
    std::vector<DirtyPage> dirty;      // its pages written in this segment
    std::unordered_map<uintptr_t, unsigned char*> saved_of; // the same, by page
    std::vector<unsigned char*> published; // its pages written before its fences completed: writable, visible
    std::vector<unsigned char*> spare_pages; // kPage buffers for saved copies
    std::vector<uint64_t*> spare_hidden;     // 2 kWords buffers for hidden pages
    std::vector<StoreBuffer> buffers;  // per CTA slot
    StoreBuffer finished;              // of CTAs that exited, for the kernel's end
    long long faults = 0, hidden_pages = 0;
};
inline State s;

static void init() {
    static bool done = false;
    if (done) { return; }
    done = true;
    const char* e = getenv("CUDA_CPU_WEAK_MEMORY");
    s.on = !(e && strcmp(e, "0") == 0);
    if (s.on && (size_t)sysconf(_SC_PAGESIZE) != kPage) {
        fprintf(stderr, "cuda-cpu: weak memory assumes 4 KiB pages (HINT: CUDA_CPU_WEAK_MEMORY=0 turns it off)\n");
        exit(2);
    }
}

// cudaMalloc / cudaFree: the data pages of a device allocation, read-only from now on but for the
// pages the host writes (on_write_fault) until the next launch
static void region_add(void* first, size_t bytes) {
    init();
    if (!s.on) { return; }
    s.regions[(uintptr_t)first] = (uintptr_t)first + bytes;
    mprotect(first, bytes, PROT_READ);
}
static void region_drop(void* first) {
    auto it = s.regions.find((uintptr_t)first);
    if (it == s.regions.end()) { return; }
    std::vector<unsigned char*> kept;
    for (unsigned char* p : s.host_written) {
        if ((uintptr_t)p < it->first || (uintptr_t)p >= it->second) { kept.push_back(p); }
    }
    s.host_written.swap(kept);
    s.regions.erase(it);
}

static bool in_region(uintptr_t page) {
    auto it = s.regions.upper_bound(page);
    if (it == s.regions.begin()) { return false; }
    --it;
    return page >= it->first && page < it->second;
}

template <class T> static T* take(std::vector<T*>& spare, size_t bytes) {
    if (!spare.empty()) {
        T* p = spare.back();
        spare.pop_back();
        return p;
    }
    T* p = (T*)malloc(bytes);
    if (p == nullptr) { abort(); }
    return p;
}

// the open segment's page, writable, its visible contents saved
static void track(unsigned char* page) {
    unsigned char* saved = take(s.spare_pages, kPage);
    memcpy(saved, page, kPage);
    mprotect(page, kPage, PROT_READ | PROT_WRITE);
    s.dirty.push_back({page, saved});
    s.saved_of[(uintptr_t)page] = saved;
    s.faults++;
}

// the saved copy of a page the open segment wrote, or null
static unsigned char* saved_copy(uintptr_t page) {
    auto it = s.saved_of.find(page);
    return it == s.saved_of.end() ? nullptr : it->second;
}

// the fault handler: a kernel's write to a read-only device page starts tracking it; the host's
// makes it writable until the next launch. False for any other fault (a guard page), which the
// handler reports.
static bool on_write_fault(void* addr) {
    const uintptr_t page = (uintptr_t)addr & ~(uintptr_t)(kPage - 1);
    if (!in_region(page)) { return false; }
    if (!s.active) {
        mprotect((void*)page, kPage, PROT_READ | PROT_WRITE);
        s.host_written.push_back((unsigned char*)page);
        return true;
    }
    if (s.owner < 0 || saved_copy(page) != nullptr) { return false; }
    track((unsigned char*)page);
    return true;
}

// 0xFF in every byte of x that is not zero
static inline uint64_t nonzero_bytes(uint64_t x) {
    x |= (x >> 4) & 0x0F0F0F0F0F0F0F0Full;
    x |= (x >> 2) & 0x3333333333333333ull;
    x |= (x >> 1) & 0x5555555555555555ull;
    return (x & 0x0101010101010101ull) * 0xFF;
}

// a hidden page's bytes written into memory (the others' bytes of the page as they are)
static void write_back(const HiddenPage& h) {
    uint64_t* w = (uint64_t*)h.page;
    const uint64_t *data = h.words, *mask = h.words + kWords;
    for (size_t i = 0; i < kWords; i++) { w[i] = (w[i] & ~mask[i]) | (data[i] & mask[i]); }
}

// a CTA's buffer emptied: its pages were written back (its segment started) or are visible
static void release(StoreBuffer& buf) {
    for (const HiddenPage& h : buf) { s.spare_hidden.push_back(h.words); }
    buf.clear();
}
// a CTA's hidden stores wait for the kernel's end, after those of the CTAs that exited before it
static void retire(StoreBuffer& buf) {
    s.finished.insert(s.finished.end(), buf.begin(), buf.end());
    buf.clear();
}
// the open segment's saved copies given back (its pages stay as they are)
static void forget_dirty() {
    for (const DirtyPage& d : s.dirty) { s.spare_pages.push_back(d.saved); }
    s.dirty.clear();
    s.saved_of.clear();
}

// ends the open segment: the bytes of its pages that differ from what other CTAs see move to the
// owner's store buffer, and memory shows kHidden there; every page is read-only again
static void segment_end() {
    if (s.owner < 0) { return; }
    StoreBuffer& buf = s.buffers[(size_t)s.owner];
    release(buf); // written back at the segment's start: the pages hold them
    for (const DirtyPage& d : s.dirty) {
        if (memcmp(d.page, d.saved, kPage) != 0) {
            HiddenPage h{d.page, take(s.spare_hidden, 2 * kPage)};
            uint64_t* w = (uint64_t*)d.page;
            const uint64_t* old = (const uint64_t*)d.saved;
            for (size_t i = 0; i < kWords; i++) {
                const uint64_t m = nonzero_bytes(w[i] ^ old[i]);
                h.words[i] = w[i];
                h.words[kWords + i] = m;
                w[i] = (w[i] & ~m) | (kHidden & m);
            }
            buf.push_back(h);
            s.hidden_pages++;
        }
        mprotect(d.page, kPage, PROT_READ);
    }
    for (unsigned char* page : s.published) { mprotect(page, kPage, PROT_READ); }
    forget_dirty();
    s.published.clear();
    s.owner = -1;
}

// CTA slot `slot` runs next: the open segment (another CTA's) ends, hidden, and slot's own buffered
// stores are written back where it alone reads them
static void enter(int slot) {
    if (!s.active || s.owner == slot) { return; }
    segment_end();
    s.owner = slot;
    for (const HiddenPage& h : s.buffers[(size_t)slot]) {
        if (saved_copy((uintptr_t)h.page) == nullptr) { track(h.page); }
        write_back(h);
    }
}

// the running CTA's fences completed: everything it stored so far is visible. Its written pages stay
// writable until the segment ends, visible.
static void fence() {
    if (!s.active || s.owner < 0) { return; }
    for (const DirtyPage& d : s.dirty) { s.published.push_back(d.page); }
    forget_dirty();
    release(s.buffers[(size_t)s.owner]); // written back at the segment's start, published now
}

// an atomic changed [p, p + n) in memory: visible to every CTA at once, never hidden
static void atomic_done(const void* p, size_t n) {
    if (!s.active) { return; }
    const uintptr_t a = (uintptr_t)p, page = a & ~(uintptr_t)(kPage - 1);
    unsigned char* saved = saved_copy(page);
    if (saved != nullptr) { memcpy(saved + (a - page), p, n); }
}

// the CTA in `slot` exited
static void cta_exit(int slot) {
    if (!s.active) { return; }
    if (s.owner == slot) { segment_end(); }
    retire(s.buffers[(size_t)slot]);
}

// A kernel that reaches no atomic and no fence cannot hand data from one CTA to another within the
// launch, so after one tracked launch that shows it, its launches run with memory as the host sees
// it (a write makes its page writable until the next tracked launch), at a fault per page rather
// than per CTA and page.
static void launch_begin(int slots, const char* kernel) {
    init();
    if (!s.on || s.quiet.count(kernel)) { return; }
    s.buffers.resize((size_t)slots);
    for (unsigned char* page : s.host_written) { mprotect(page, kPage, PROT_READ); }
    s.host_written.clear();
    s.active = true;
    s.synced = false;
    s.owner = -1;
}

// an atomic or a fence in the running launch
static void note_sync() { s.synced = true; }

// the kernel's end (or its failure): every store is visible
static void launch_end(const char* kernel) {
    if (!s.active) {
        if (s.synced) { s.quiet.erase(kernel); } // an untracked launch that did: tracked from now on
        s.synced = false;
        return;
    }
    if (!s.synced) { s.quiet.insert(kernel); }
    segment_end();
    s.active = false;
    for (StoreBuffer& buf : s.buffers) { retire(buf); } // CTAs a failed launch left live
    for (const HiddenPage& h : s.finished) { // written as the host writes (without a fault each)
        mprotect(h.page, kPage, PROT_READ | PROT_WRITE);
        s.host_written.push_back(h.page);
        write_back(h);
        s.spare_hidden.push_back(h.words);
    }
    s.finished.clear();
}

} // namespace weak
} // namespace cudacpu

#endif // CUDACPU_WEAK_MEMORY_H
