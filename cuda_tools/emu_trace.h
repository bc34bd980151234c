// The memory-access recorder behind the emulator's coalescing report (cuda_tools/coalescing.py)
// and its bank-conflict report (cuda_tools/bank_conflicts.py).
//
// emulator.py's instrumented build compiles the kernels (with emu.h) using g++'s
// `-fsanitize=thread` at compile time only: every load and store of the kernel code becomes a call
// `__tsan_read4(addr)` / `__tsan_write8(addr)` ... in front of the access. The library is linked
// WITHOUT libtsan; this file, compiled uninstrumented in a second translation unit, supplies those
// callbacks (and stubs for the rest of ThreadSanitizer's compile-time ABI). The kernels' source is
// untouched: the same .cu files, the same emu.h.
//
// What is recorded, per launch (emu_trace_begin .. emu_trace_end):
// - global memory: only accesses inside the launch's pointer arguments (ranges emulator.py passes
//   in); the emulator's own state and the stack are left out;
// - stray accesses: global accesses outside every argument but inside an argument's guard, the
//   bytes emulator.py puts around its copy of each argument for the launch (memory nothing else
//   owns, so no local, constant table or emulator state can lie there): counted per site and
//   argument (`stray`, and `reach`, the farthest byte from the argument), never grouped into
//   requests. An access that starts inside an argument and ends past it counts as `overhang`;
// - shared memory, where emu_trace_shared(1) asks for it: accesses inside the blocks' arenas
//   (TF_SHARED, TF_DYNAMIC_SHARED: emu.h) and to plain `__shared__` arrays, which the
//   instrumented build declares `static thread_local` (emu.h, TINYFLOW_EMU_TRACE) so that they
//   are the only kernel data in the library's thread-local block besides emu.h's own
//   (threadIdx, blockIdx, the scheduler), which are left out;
// - each access as (site = the return address of the callback, i.e. the instruction right after
//   the call, which is the access itself; the CUDA thread (threadIdx/blockIdx, read from emu.h's
//   thread-locals); the n-th time this thread has executed this site; for global memory the
//   32-byte sector of its address and the bytes of it (the launch runs on emulator.py's copies of
//   the arguments, each placed as its allocation would lie on a GPU: 256-byte aligned, a view at
//   its offset in it); for shared memory the address and size).
// Accesses are grouped as a GPU issues them: one request per (site, load or store, block, warp of
// 32 consecutive linear thread ids, occurrence).
// - Global, per request: `sectors` = distinct 32-byte sectors touched; `minimal` = ceil(distinct
//   bytes / 32), the fewest sectors those bytes could occupy if contiguous and aligned.
// - Shared, per request: the wavefronts the 32 banks of 4 bytes serve it in, as the hardware
//   splits it: a request of 1-4 byte accesses is one phase of 32 lanes, of 8-byte accesses two
//   phases of 16 lanes (half warps), of 16-byte accesses four of 8 (quarter warps); a phase takes
//   as many wavefronts as the most distinct 4-byte words any one bank holds among its lanes'
//   accesses (lanes reading the same word share it: a broadcast is free). `ideal` = the phases
//   with an active lane: one wavefront each.
// Per (site, kind) the sums come back to Python (emu_trace_rows, emu_trace_bank_rows).
//
// Blocks run in turn in the sequential and block-threads modes, so the events are folded into the
// sums block by block (bounded memory); in the grid-threads mode (persistent kernels) at the end.
#pragma once

#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <tuple>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace emu_trace {

constexpr unsigned kSectorBytes = 32;
constexpr unsigned kWarp = 32;
constexpr unsigned kBanks = 32;  // of shared memory, 4 bytes each
constexpr std::size_t kFoldAt = 1u << 20;  // fold buffered events at a block boundary past this

struct Event {
    std::uint64_t sector;  // the address's sector (address / 32) in argument `arg`
    std::uint32_t site;    // index into sites
    std::uint32_t block;   // linear block id
    std::uint32_t thread;  // linear thread id within the block (x fastest)
    std::uint32_t occurrence;  // how many times this thread ran this site before
    std::uint32_t mask;    // bytes of the sector touched
    std::uint16_t arg;     // which pointer argument
    std::uint16_t write;   // 1 for a store
};

// The sums per (site, kind) that Python reads (layout mirrored in emulator.py's TraceRow).
struct Row {
    std::uint64_t site;  // the access's code address
    std::uint32_t write;
    std::uint32_t arg;
    std::uint64_t requests;  // warp-wide accesses (groups)
    std::uint64_t lanes;     // threads taking part, summed over requests
    std::uint64_t sectors;   // distinct sectors, summed over requests
    std::uint64_t minimal;   // fewest possible sectors, summed over requests
    std::uint64_t bytes;     // distinct bytes, summed over requests
    std::uint64_t stray;     // accesses (lanes) outside every argument, in this one's guard
    std::uint64_t overhang;  // accesses that start inside this argument and end past it
    std::uint64_t reach;     // the farthest byte of those from the argument, in bytes
};

// One lane's access to shared memory.
struct SharedEvent {
    std::uint64_t address;  // its first byte
    std::uint32_t site, block, thread, occurrence;
    std::uint16_t size;  // bytes
    std::uint16_t write;
};

// The sums per (site, kind) of shared-memory requests (layout mirrored in emulator.py's BankRow).
struct BankRow {
    std::uint64_t site;
    std::uint32_t write;
    std::uint32_t unused;
    std::uint64_t requests;    // warp-wide accesses
    std::uint64_t lanes;       // threads taking part, summed over requests
    std::uint64_t wavefronts;  // what the banks serve them in, summed over requests
    std::uint64_t ideal;       // one a phase with an active lane, summed over requests
};

// A byte range [lo, hi).
struct Range {
    std::uintptr_t lo = 0, hi = 0;
    bool holds(std::uintptr_t a) const { return a >= lo && a < hi; }
};

struct State {
    bool on = false;
    bool fold_by_block = true;
    std::vector<std::uintptr_t> lo, hi;  // the pointer arguments' byte ranges
    std::vector<std::uintptr_t> guard_lo, guard_hi;  // and the guarded buffers around them
    std::vector<Event> events;
    std::unordered_map<std::uintptr_t, std::uint32_t> site_index;
    std::vector<std::uintptr_t> sites;
    std::unordered_map<std::uint64_t, std::uint32_t> occurrences;  // (block, thread, site) -> count
    std::unordered_map<std::uint64_t, std::size_t> row_index;  // (site, write, arg) -> rows
    std::vector<Row> rows;
    std::uint32_t last_block = 0xffffffffu;
    // shared memory (emu_trace_shared)
    bool shared = false;
    Range tls;  // the library's thread-local block: plain __shared__ arrays, and emu.h's own
    std::vector<Range> not_shared;  // emu.h's thread-locals inside it
    std::vector<SharedEvent> shared_events;
    std::unordered_map<std::uint64_t, std::size_t> bank_row_index;  // (site, write) -> bank_rows
    std::vector<BankRow> bank_rows;
};
inline State state;

inline std::uint32_t linear_block() {
    return (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
}
inline std::uint32_t linear_thread() {
    return (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
}

inline Row& row_for(std::uint32_t site, std::uint32_t write, std::uint32_t arg) {
    const std::uint64_t key = (std::uint64_t(site) << 32) | (std::uint64_t(arg) << 1) | write;
    auto found = state.row_index.find(key);
    if (found != state.row_index.end()) return state.rows[found->second];
    state.row_index.emplace(key, state.rows.size());
    state.rows.push_back(Row{state.sites[site], write, arg, 0, 0, 0, 0, 0, 0, 0, 0});
    return state.rows.back();
}

// A request: one site's load or store by the lanes of one warp, the n-th time each runs it.
template <typename E>
inline auto request_of(const E& e) {
    return std::make_tuple(e.site, e.write, e.block, e.thread / kWarp, e.occurrence);
}
template <typename E>
inline bool same_request(const E& a, const E& b) {
    return request_of(a) == request_of(b);
}

// Sort events by request, and within one by `within`.
template <typename E, typename Less>
inline void sort_requests(std::vector<E>& events, Less within) {
    std::sort(events.begin(), events.end(), [&](const E& a, const E& b) {
        const auto ra = request_of(a), rb = request_of(b);
        return ra != rb ? ra < rb : within(a, b);
    });
}

inline BankRow& bank_row_for(std::uint32_t site, std::uint32_t write) {
    const std::uint64_t key = (std::uint64_t(site) << 1) | write;
    auto found = state.bank_row_index.find(key);
    if (found != state.bank_row_index.end()) return state.bank_rows[found->second];
    state.bank_row_index.emplace(key, state.bank_rows.size());
    state.bank_rows.push_back(BankRow{state.sites[site], write, 0, 0, 0, 0, 0});
    return state.bank_rows.back();
}

// The wavefronts of one phase: the most distinct 4-byte words in any one bank. `words` holds
// (bank, word) pairs of the phase's lanes (sorted and made unique here).
inline std::uint64_t phase_wavefronts(std::vector<std::pair<unsigned, std::uint64_t>>& words) {
    std::sort(words.begin(), words.end());
    words.erase(std::unique(words.begin(), words.end()), words.end());
    std::uint64_t most = 0, run = 0;
    for (std::size_t i = 0; i < words.size(); ++i) {
        run = (i > 0 && words[i].first == words[i - 1].first) ? run + 1 : 1;
        most = std::max(most, run);
    }
    return most;
}

// Group the buffered shared-memory events into warp-wide requests and add them to the bank rows.
inline void fold_shared() {
    auto& ev = state.shared_events;
    sort_requests(ev, [](const SharedEvent& a, const SharedEvent& b) { return a.thread < b.thread; });
    std::vector<std::pair<unsigned, std::uint64_t>> words;
    for (std::size_t begin = 0; begin < ev.size();) {
        std::size_t end = begin + 1;
        while (end < ev.size() && same_request(ev[begin], ev[end])) ++end;
        unsigned size = 0;
        std::uint32_t lanes = 0;  // one bit per lane of the warp that took part
        for (std::size_t i = begin; i < end; ++i) {
            size = std::max<unsigned>(size, ev[i].size);
            lanes |= 1u << (ev[i].thread % kWarp);
        }
        const unsigned phases = size >= 16 ? 4 : size >= 8 ? 2 : 1;
        const unsigned width = kWarp / phases;  // lanes a phase
        std::uint64_t wavefronts = 0, ideal = 0;
        for (unsigned p = 0; p < phases; ++p) {
            words.clear();
            for (std::size_t i = begin; i < end; ++i) {
                if ((ev[i].thread % kWarp) / width != p) continue;
                const std::uint64_t first = ev[i].address / 4, last = (ev[i].address + ev[i].size - 1) / 4;
                for (std::uint64_t w = first; w <= last; ++w) words.emplace_back(unsigned(w % kBanks), w);
            }
            if (words.empty()) continue;
            wavefronts += phase_wavefronts(words);
            ideal += 1;
        }
        BankRow& row = bank_row_for(ev[begin].site, ev[begin].write);
        row.requests += 1;
        row.lanes += __builtin_popcount(lanes);
        row.wavefronts += wavefronts;
        row.ideal += ideal;
        begin = end;
    }
    ev.clear();
}

// Group the buffered events into warp-wide requests and add them to the rows.
inline void fold() {
    auto& ev = state.events;
    sort_requests(ev, [](const Event& a, const Event& b) {
        return std::tie(a.arg, a.sector, a.thread) < std::tie(b.arg, b.sector, b.thread);
    });
    for (std::size_t begin = 0; begin < ev.size();) {
        std::size_t end = begin + 1;
        while (end < ev.size() && same_request(ev[begin], ev[end])) ++end;
        std::uint64_t sectors = 0, bytes = 0;
        std::uint32_t lanes = 0;  // one bit per lane of the warp that took part
        for (std::size_t i = begin; i < end;) {  // one sector (of one argument) at a time
            std::size_t j = i;
            std::uint32_t mask = 0;
            while (j < end && ev[j].arg == ev[i].arg && ev[j].sector == ev[i].sector) mask |= ev[j++].mask;
            sectors += 1;
            bytes += __builtin_popcount(mask);
            i = j;
        }
        for (std::size_t i = begin; i < end; ++i) lanes |= 1u << (ev[i].thread % kWarp);
        Row& row = row_for(ev[begin].site, ev[begin].write, ev[begin].arg);
        row.requests += 1;
        row.lanes += __builtin_popcount(lanes);
        row.sectors += sectors;
        row.minimal += (bytes + kSectorBytes - 1) / kSectorBytes;
        row.bytes += bytes;
        begin = end;
    }
    ev.clear();
    fold_shared();
    state.occurrences.clear();  // folded blocks never run again
}

// Whether addr is block-shared memory: a block's arena (TF_SHARED, TF_DYNAMIC_SHARED) or a plain
// __shared__ array (in the thread-local block, outside emu.h's own thread-locals).
inline bool is_shared(std::uintptr_t addr) {
    if (state.tls.holds(addr)) {
        for (const Range& r : state.not_shared)
            if (r.holds(addr)) return false;
        return true;
    }
    // the arenas of the running launch only: emu.h cuts and checks them around it (the vector
    // holding them may be mid-update then)
    const std::size_t arena_bytes = emu::static_offset() + emu::kStaticShared;
    for (unsigned b = 0; b < emu::arenas_alive; ++b) {
        const auto lo = reinterpret_cast<std::uintptr_t>(emu::arenas[b].get());
        if (addr >= lo && addr < lo + arena_bytes) return true;
    }
    return false;
}

// The site's index, and the count of this thread's earlier executions of it (then one more).
inline std::pair<std::uint32_t, std::uint32_t> site_and_occurrence(void* site, std::uint32_t block,
                                                                   std::uint32_t thread) {
    if (block != state.last_block) {
        const std::size_t buffered = state.events.size() + state.shared_events.size();
        if (state.fold_by_block && buffered >= kFoldAt) fold();  // earlier blocks are done
        state.last_block = block;
    }
    auto [it, added] = state.site_index.emplace(reinterpret_cast<std::uintptr_t>(site), state.sites.size());
    if (added) state.sites.push_back(reinterpret_cast<std::uintptr_t>(site));
    const std::uint32_t site_id = it->second;
    const std::uint64_t key = (std::uint64_t(block) << 32) | (std::uint64_t(thread) << 16) | site_id;
    return {site_id, state.occurrences[key]++};
}

// The argument whose guard holds addr, the nearest one where guards meet; count if none.
inline std::size_t guard_of(std::uintptr_t addr) {
    const std::size_t count = state.lo.size();
    std::size_t best = count;
    std::uintptr_t best_distance = 0;
    for (std::size_t arg = 0; arg < count; ++arg) {
        if (addr < state.guard_lo[arg] || addr >= state.guard_hi[arg]) continue;
        const std::uintptr_t d = addr < state.lo[arg] ? state.lo[arg] - addr : addr - state.hi[arg];
        if (best == count || d < best_distance) best = arg, best_distance = d;
    }
    return best;
}

// Count an access (some of) whose bytes lie outside argument `arg`: `stray` when it starts
// outside, `overhang` when it starts inside and ends past it; `reach` keeps the farthest byte.
inline void count_outside(std::uint32_t site_id, std::uint32_t write, std::size_t arg,
                          std::uintptr_t addr, std::uint32_t size) {
    Row& row = row_for(site_id, write, static_cast<std::uint32_t>(arg));
    const std::uintptr_t lo = state.lo[arg], hi = state.hi[arg];
    if (addr >= lo && addr < hi) row.overhang += 1;
    else row.stray += 1;
    const std::uint64_t reach = addr < lo ? lo - addr : addr + size - hi;
    row.reach = std::max<std::uint64_t>(row.reach, reach);
}

inline void record(std::uintptr_t addr, std::uint32_t size, std::uint32_t write, void* site) {
    if (!state.on) return;
    std::size_t arg = 0;
    while (arg < state.lo.size() && !(addr >= state.lo[arg] && addr < state.hi[arg])) ++arg;
    const std::uint32_t block = linear_block(), thread = linear_thread();
    if (arg == state.lo.size()) {  // not a kernel argument's memory: shared, a guard, or neither
        if (state.shared && is_shared(addr)) {
            const auto [site_id, occurrence] = site_and_occurrence(site, block, thread);
            state.shared_events.push_back(SharedEvent{addr, site_id, block, thread, occurrence,
                                                      static_cast<std::uint16_t>(size),
                                                      static_cast<std::uint16_t>(write)});
            return;
        }
        const std::size_t near = guard_of(addr);
        if (near == state.lo.size()) return;  // locals, constants, the emulator's own state
        // an execution of the site all the same: the lane's later ones keep their place
        const std::uint32_t site_id = site_and_occurrence(site, block, thread).first;
        count_outside(site_id, write, near, addr, size);
        return;
    }
    const auto [site_id, occurrence] = site_and_occurrence(site, block, thread);
    if (addr + size > state.hi[arg]) count_outside(site_id, write, arg, addr, size);
    std::uint64_t offset = addr;
    while (size > 0) {  // split at sector boundaries (an unaligned or range access)
        const std::uint32_t in_sector = offset % kSectorBytes;
        const std::uint32_t take = std::min<std::uint32_t>(size, kSectorBytes - in_sector);
        const std::uint32_t mask = take == 32 ? 0xffffffffu : ((1u << take) - 1u) << in_sector;
        state.events.push_back(Event{offset / kSectorBytes, site_id, block, thread, occurrence, mask,
                                     static_cast<std::uint16_t>(arg), static_cast<std::uint16_t>(write)});
        offset += take;
        size -= take;
    }
}

}  // namespace emu_trace

extern "C" {

// Start recording a launch whose pointer argument i spans [ranges[4i], ranges[4i+1]) inside the
// guarded buffer [ranges[4i+2], ranges[4i+3]).
void emu_trace_begin(const unsigned long long* ranges, int count, int fold_by_block) {
    using emu_trace::state;
    state.lo.clear();
    state.hi.clear();
    state.guard_lo.clear();
    state.guard_hi.clear();
    for (int i = 0; i < count; ++i) {
        state.lo.push_back(ranges[4 * i]);
        state.hi.push_back(ranges[4 * i + 1]);
        state.guard_lo.push_back(ranges[4 * i + 2]);
        state.guard_hi.push_back(ranges[4 * i + 3]);
    }
    state.events.clear();
    state.occurrences.clear();
    state.rows.clear();
    state.row_index.clear();
    state.shared = false;
    state.shared_events.clear();
    state.bank_rows.clear();
    state.bank_row_index.clear();
    state.last_block = 0xffffffffu;
    state.fold_by_block = fold_by_block != 0;
    state.on = true;
}

// Where the library is loaded: site - base is the address addr2line understands.
unsigned long long emu_trace_base() {
    Dl_info info;
    if (dladdr(reinterpret_cast<void*>(&emu_trace_base), &info) == 0) return 0;
    return reinterpret_cast<unsigned long long>(info.dli_fbase);
}

// Record shared-memory accesses too, in the launch that emu_trace_begin started (call it on the
// launching thread: the thread-local block of plain __shared__ arrays is that thread's).
void emu_trace_shared(int on) {
    using emu_trace::Range;
    using emu_trace::state;
    state.shared = on != 0;
    state.tls = Range{};
    state.not_shared.clear();
    if (!on) return;
    auto range_of = [](const void* p, std::size_t n) {
        return Range{reinterpret_cast<std::uintptr_t>(p), reinterpret_cast<std::uintptr_t>(p) + n};
    };
    // emu.h's thread-locals (touching them also makes the loader allocate this thread's block)
    state.not_shared = {range_of(&threadIdx, sizeof threadIdx), range_of(&blockIdx, sizeof blockIdx),
                        range_of(&emu::scheduler, sizeof emu::scheduler),
                        range_of(&emu::stacks, sizeof emu::stacks)};
    struct Search {
        std::uintptr_t base;
        Range found;
    } search{static_cast<std::uintptr_t>(emu_trace_base()), {}};
    dl_iterate_phdr(
        [](dl_phdr_info* info, std::size_t, void* data) {
            auto* s = static_cast<Search*>(data);
            if (info->dlpi_addr != s->base || info->dlpi_tls_data == nullptr) return 0;
            for (int i = 0; i < info->dlpi_phnum; ++i)
                if (info->dlpi_phdr[i].p_type == PT_TLS) {
                    const auto lo = reinterpret_cast<std::uintptr_t>(info->dlpi_tls_data);
                    s->found = Range{lo, lo + info->dlpi_phdr[i].p_memsz};
                }
            return 1;
        },
        &search);
    state.tls = search.found;
}

// Stop recording, fold what is left; the number of rows emu_trace_rows will copy.
int emu_trace_end() {
    emu_trace::state.on = false;
    emu_trace::fold();
    return static_cast<int>(emu_trace::state.rows.size());
}

void emu_trace_rows(emu_trace::Row* out) {
    std::copy(emu_trace::state.rows.begin(), emu_trace::state.rows.end(), out);
}

// After emu_trace_end: the number of shared-memory rows, and the rows.
int emu_trace_bank_count() { return static_cast<int>(emu_trace::state.bank_rows.size()); }

void emu_trace_bank_rows(emu_trace::BankRow* out) {
    std::copy(emu_trace::state.bank_rows.begin(), emu_trace::state.bank_rows.end(), out);
}

// ThreadSanitizer's compile-time ABI. Plain accesses are recorded; function entry/exit and
// initialisation are no-ops; atomics do their operation (sequentially consistent) and record it.
#define EMU_TRACE_HOOK(name, n, write) \
    void name(void* p) { emu_trace::record((std::uintptr_t)p, n, write, __builtin_return_address(0)); }
#define EMU_TRACE_ACCESS(n)                                                              \
    EMU_TRACE_HOOK(__tsan_read##n, n, 0) EMU_TRACE_HOOK(__tsan_write##n, n, 1)           \
    EMU_TRACE_HOOK(__tsan_unaligned_read##n, n, 0) EMU_TRACE_HOOK(__tsan_unaligned_write##n, n, 1) \
    EMU_TRACE_HOOK(__tsan_volatile_read##n, n, 0) EMU_TRACE_HOOK(__tsan_volatile_write##n, n, 1)
EMU_TRACE_ACCESS(1)
EMU_TRACE_ACCESS(2)
EMU_TRACE_ACCESS(4)
EMU_TRACE_ACCESS(8)
EMU_TRACE_ACCESS(16)
#undef EMU_TRACE_ACCESS
#undef EMU_TRACE_HOOK

void __tsan_read_range(void* p, unsigned long size) {
    emu_trace::record((std::uintptr_t)p, (std::uint32_t)size, 0, __builtin_return_address(0));
}
void __tsan_write_range(void* p, unsigned long size) {
    emu_trace::record((std::uintptr_t)p, (std::uint32_t)size, 1, __builtin_return_address(0));
}
void __tsan_init() {}
void __tsan_func_entry(void*) {}
void __tsan_func_exit() {}
void __tsan_vptr_update(void**, void*) {}
void __tsan_vptr_read(void**) {}

// The atomics: record the access (a store for every read-modify-write), then do it.
#define EMU_TRACE_RECORD(a, write) \
    emu_trace::record((std::uintptr_t)(a), sizeof(*(a)), write, __builtin_return_address(0))
#define EMU_TRACE_RMW(bits, T, op)                                        \
    T __tsan_atomic##bits##_##op(volatile T* a, T v, int) {               \
        EMU_TRACE_RECORD(a, 1);                                           \
        return __atomic_##op(a, v, __ATOMIC_SEQ_CST);                     \
    }
#define EMU_TRACE_CAS(bits, T, kind, weak)                                                   \
    int __tsan_atomic##bits##_compare_exchange_##kind(volatile T* a, T* c, T v, int, int) { \
        EMU_TRACE_RECORD(a, 1);                                                              \
        return __atomic_compare_exchange_n(a, c, v, weak, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST); \
    }
#define EMU_TRACE_ATOMICS(bits, T)                                                              \
    T __tsan_atomic##bits##_load(const volatile T* a, int) {                                    \
        EMU_TRACE_RECORD(a, 0);                                                                 \
        return __atomic_load_n(a, __ATOMIC_SEQ_CST);                                            \
    }                                                                                           \
    void __tsan_atomic##bits##_store(volatile T* a, T v, int) {                                 \
        EMU_TRACE_RECORD(a, 1);                                                                 \
        __atomic_store_n(a, v, __ATOMIC_SEQ_CST);                                               \
    }                                                                                           \
    T __tsan_atomic##bits##_exchange(volatile T* a, T v, int) {                                 \
        EMU_TRACE_RECORD(a, 1);                                                                 \
        return __atomic_exchange_n(a, v, __ATOMIC_SEQ_CST);                                     \
    }                                                                                           \
    EMU_TRACE_RMW(bits, T, fetch_add) EMU_TRACE_RMW(bits, T, fetch_sub)                         \
    EMU_TRACE_RMW(bits, T, fetch_and) EMU_TRACE_RMW(bits, T, fetch_or)                          \
    EMU_TRACE_RMW(bits, T, fetch_xor) EMU_TRACE_RMW(bits, T, fetch_nand)                        \
    EMU_TRACE_CAS(bits, T, strong, false) EMU_TRACE_CAS(bits, T, weak, true)                    \
    T __tsan_atomic##bits##_compare_exchange_val(volatile T* a, T c, T v, int, int) {           \
        EMU_TRACE_RECORD(a, 1);                                                                 \
        __atomic_compare_exchange_n(a, &c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);       \
        return c;                                                                               \
    }
EMU_TRACE_ATOMICS(8, unsigned char)
EMU_TRACE_ATOMICS(16, unsigned short)
EMU_TRACE_ATOMICS(32, unsigned int)
EMU_TRACE_ATOMICS(64, unsigned long long)
#undef EMU_TRACE_ATOMICS
#undef EMU_TRACE_CAS
#undef EMU_TRACE_RMW
#undef EMU_TRACE_RECORD

void __tsan_atomic_thread_fence(int) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
void __tsan_atomic_signal_fence(int) { __atomic_signal_fence(__ATOMIC_SEQ_CST); }

}  // extern "C"
