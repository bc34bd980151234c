// The memory-access recorder behind the emulator's coalescing report (tinyflow_cuda/coalescing.py).
//
// emulator.py's instrumented build compiles the kernels (with emu.h) using g++'s
// `-fsanitize=thread` at compile time only: every load and store of the kernel code becomes a call
// `__tsan_read4(addr)` / `__tsan_write8(addr)` ... in front of the access. The library is linked
// WITHOUT libtsan; this file, compiled uninstrumented in a second translation unit, supplies those
// callbacks (and stubs for the rest of ThreadSanitizer's compile-time ABI). The kernels' source is
// untouched: the same .cu files, the same emu.h.
//
// What is recorded, per launch (emu_trace_begin .. emu_trace_end):
// - only accesses inside the launch's pointer arguments (ranges emulator.py passes in); the
//   emulator's own state, the stack and __shared__ (static) are left out;
// - each access as (site = the return address of the callback, i.e. the instruction right after
//   the call, which is the access itself; the CUDA thread (threadIdx/blockIdx, read from emu.h's
//   thread-locals); the n-th time this thread has executed this site; the 32-byte sector, counted
//   from the start of its argument, which is taken as aligned as cudaMalloc's; the bytes of it).
// Accesses are grouped as a GPU issues them: one request per (site, load or store, block, warp of
// 32 consecutive linear thread ids, occurrence). Per request: `sectors` = distinct 32-byte sectors
// touched; `minimal` = ceil(distinct bytes / 32), the fewest sectors those bytes could occupy if
// contiguous and aligned. Per (site, kind) the sums come back to Python (emu_trace_rows).
//
// Blocks run in turn in the sequential and block-threads modes, so the events are folded into the
// sums block by block (bounded memory); in the grid-threads mode (persistent kernels) at the end.
#pragma once

#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace emu_trace {

constexpr unsigned kSectorBytes = 32;
constexpr unsigned kWarp = 32;
constexpr std::size_t kFoldAt = 1u << 20;  // fold buffered events at a block boundary past this

struct Event {
    std::uint64_t sector;  // sector index from the start of argument `arg`
    std::uint32_t site;    // index into sites
    std::uint32_t block;   // linear block id
    std::uint32_t thread;  // linear thread id within the block (x fastest)
    std::uint32_t occurrence;  // how many times this thread ran this site before
    std::uint32_t mask;    // bytes of the sector touched
    std::uint16_t arg;     // which pointer argument
    std::uint16_t write;   // 1 for a store
};

// The sums per (site, kind) that Python reads (layout mirrored in emulator.py's _TraceRow).
struct Row {
    std::uint64_t site;  // the access's code address
    std::uint32_t write;
    std::uint32_t arg;
    std::uint64_t requests;  // warp-wide accesses (groups)
    std::uint64_t lanes;     // threads taking part, summed over requests
    std::uint64_t sectors;   // distinct sectors, summed over requests
    std::uint64_t minimal;   // fewest possible sectors, summed over requests
    std::uint64_t bytes;     // distinct bytes, summed over requests
};

struct State {
    bool on = false;
    bool fold_by_block = true;
    std::vector<std::uintptr_t> lo, hi;  // the pointer arguments' byte ranges
    std::vector<Event> events;
    std::unordered_map<std::uintptr_t, std::uint32_t> site_index;
    std::vector<std::uintptr_t> sites;
    std::unordered_map<std::uint64_t, std::uint32_t> occurrences;  // (block, thread, site) -> count
    std::unordered_map<std::uint64_t, std::size_t> row_index;  // (site, write, arg) -> rows
    std::vector<Row> rows;
    std::uint32_t last_block = 0xffffffffu;
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
    state.rows.push_back(Row{state.sites[site], write, arg, 0, 0, 0, 0, 0});
    return state.rows.back();
}

// Group the buffered events into warp-wide requests and add them to the rows.
inline void fold() {
    auto& ev = state.events;
    auto request_less = [](const Event& a, const Event& b) {
        if (a.site != b.site) return a.site < b.site;
        if (a.write != b.write) return a.write < b.write;
        if (a.block != b.block) return a.block < b.block;
        if (a.thread / kWarp != b.thread / kWarp) return a.thread / kWarp < b.thread / kWarp;
        if (a.occurrence != b.occurrence) return a.occurrence < b.occurrence;
        if (a.arg != b.arg) return a.arg < b.arg;
        if (a.sector != b.sector) return a.sector < b.sector;
        return a.thread < b.thread;
    };
    auto same_request = [](const Event& a, const Event& b) {
        return a.site == b.site && a.write == b.write && a.block == b.block &&
               a.thread / kWarp == b.thread / kWarp && a.occurrence == b.occurrence;
    };
    std::sort(ev.begin(), ev.end(), request_less);
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
    state.occurrences.clear();  // folded blocks never run again
}

inline void record(std::uintptr_t addr, std::uint32_t size, std::uint32_t write, void* site) {
    if (!state.on) return;
    std::size_t arg = 0;
    while (arg < state.lo.size() && !(addr >= state.lo[arg] && addr < state.hi[arg])) ++arg;
    if (arg == state.lo.size()) return;  // not a kernel argument's memory
    const std::uint32_t block = linear_block();
    if (block != state.last_block) {
        if (state.fold_by_block && state.events.size() >= kFoldAt) fold();  // earlier blocks are done
        state.last_block = block;
    }
    auto [it, added] = state.site_index.emplace(reinterpret_cast<std::uintptr_t>(site), state.sites.size());
    if (added) state.sites.push_back(reinterpret_cast<std::uintptr_t>(site));
    const std::uint32_t site_id = it->second;
    const std::uint32_t thread = linear_thread();
    const std::uint64_t key = (std::uint64_t(block) << 32) | (std::uint64_t(thread) << 16) | site_id;
    const std::uint32_t occurrence = state.occurrences[key]++;
    std::uint64_t offset = addr - state.lo[arg];
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

// Start recording a launch whose pointer arguments span [ranges[2i], ranges[2i+1]).
void emu_trace_begin(const unsigned long long* ranges, int count, int fold_by_block) {
    using emu_trace::state;
    state.lo.clear();
    state.hi.clear();
    for (int i = 0; i < count; ++i) {
        state.lo.push_back(ranges[2 * i]);
        state.hi.push_back(ranges[2 * i + 1]);
    }
    state.events.clear();
    state.occurrences.clear();
    state.rows.clear();
    state.row_index.clear();
    state.last_block = 0xffffffffu;
    state.fold_by_block = fold_by_block != 0;
    state.on = true;
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

// Where the library is loaded: site - base is the address addr2line understands.
unsigned long long emu_trace_base() {
    Dl_info info;
    if (dladdr(reinterpret_cast<void*>(&emu_trace_base), &info) == 0) return 0;
    return reinterpret_cast<unsigned long long>(info.dli_fbase);
}

// ThreadSanitizer's compile-time ABI. Plain accesses are recorded; function entry/exit and
// initialisation are no-ops; atomics do their operation (sequentially consistent) and record it.
#define EMU_TRACE_ACCESS(n)                                                                          \
    void __tsan_read##n(void* p) { emu_trace::record((std::uintptr_t)p, n, 0, __builtin_return_address(0)); } \
    void __tsan_write##n(void* p) { emu_trace::record((std::uintptr_t)p, n, 1, __builtin_return_address(0)); } \
    void __tsan_unaligned_read##n(void* p) { emu_trace::record((std::uintptr_t)p, n, 0, __builtin_return_address(0)); } \
    void __tsan_unaligned_write##n(void* p) { emu_trace::record((std::uintptr_t)p, n, 1, __builtin_return_address(0)); } \
    void __tsan_volatile_read##n(void* p) { emu_trace::record((std::uintptr_t)p, n, 0, __builtin_return_address(0)); } \
    void __tsan_volatile_write##n(void* p) { emu_trace::record((std::uintptr_t)p, n, 1, __builtin_return_address(0)); }
EMU_TRACE_ACCESS(1)
EMU_TRACE_ACCESS(2)
EMU_TRACE_ACCESS(4)
EMU_TRACE_ACCESS(8)
EMU_TRACE_ACCESS(16)
#undef EMU_TRACE_ACCESS

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

#define EMU_TRACE_ATOMICS(bits, T)                                                                   \
    T __tsan_atomic##bits##_load(const volatile T* a, int) {                                         \
        emu_trace::record((std::uintptr_t)a, sizeof(T), 0, __builtin_return_address(0));             \
        return __atomic_load_n(a, __ATOMIC_SEQ_CST);                                                 \
    }                                                                                                \
    void __tsan_atomic##bits##_store(volatile T* a, T v, int) {                                      \
        emu_trace::record((std::uintptr_t)a, sizeof(T), 1, __builtin_return_address(0));             \
        __atomic_store_n(a, v, __ATOMIC_SEQ_CST);                                                    \
    }                                                                                                \
    T __tsan_atomic##bits##_exchange(volatile T* a, T v, int) {                                      \
        emu_trace::record((std::uintptr_t)a, sizeof(T), 1, __builtin_return_address(0));             \
        return __atomic_exchange_n(a, v, __ATOMIC_SEQ_CST);                                          \
    }                                                                                                \
    T __tsan_atomic##bits##_fetch_add(volatile T* a, T v, int) {                                     \
        emu_trace::record((std::uintptr_t)a, sizeof(T), 1, __builtin_return_address(0));             \
        return __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST);                                           \
    }                                                                                                \
    T __tsan_atomic##bits##_fetch_sub(volatile T* a, T v, int) {                                     \
        emu_trace::record((std::uintptr_t)a, sizeof(T), 1, __builtin_return_address(0));             \
        return __atomic_fetch_sub(a, v, __ATOMIC_SEQ_CST);                                           \
    }                                                                                                \
    T __tsan_atomic##bits##_fetch_and(volatile T* a, T v, int) {                                     \
        emu_trace::record((std::uintptr_t)a, sizeof(T), 1, __builtin_return_address(0));             \
        return __atomic_fetch_and(a, v, __ATOMIC_SEQ_CST);                                           \
    }                                                                                                \
    T __tsan_atomic##bits##_fetch_or(volatile T* a, T v, int) {                                      \
        emu_trace::record((std::uintptr_t)a, sizeof(T), 1, __builtin_return_address(0));             \
        return __atomic_fetch_or(a, v, __ATOMIC_SEQ_CST);                                            \
    }                                                                                                \
    T __tsan_atomic##bits##_fetch_xor(volatile T* a, T v, int) {                                     \
        emu_trace::record((std::uintptr_t)a, sizeof(T), 1, __builtin_return_address(0));             \
        return __atomic_fetch_xor(a, v, __ATOMIC_SEQ_CST);                                           \
    }                                                                                                \
    T __tsan_atomic##bits##_fetch_nand(volatile T* a, T v, int) {                                    \
        emu_trace::record((std::uintptr_t)a, sizeof(T), 1, __builtin_return_address(0));             \
        return __atomic_fetch_nand(a, v, __ATOMIC_SEQ_CST);                                          \
    }                                                                                                \
    int __tsan_atomic##bits##_compare_exchange_strong(volatile T* a, T* c, T v, int, int) {          \
        emu_trace::record((std::uintptr_t)a, sizeof(T), 1, __builtin_return_address(0));             \
        return __atomic_compare_exchange_n(a, c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);      \
    }                                                                                                \
    int __tsan_atomic##bits##_compare_exchange_weak(volatile T* a, T* c, T v, int, int) {            \
        emu_trace::record((std::uintptr_t)a, sizeof(T), 1, __builtin_return_address(0));             \
        return __atomic_compare_exchange_n(a, c, v, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);       \
    }                                                                                                \
    T __tsan_atomic##bits##_compare_exchange_val(volatile T* a, T c, T v, int, int) {                \
        emu_trace::record((std::uintptr_t)a, sizeof(T), 1, __builtin_return_address(0));             \
        __atomic_compare_exchange_n(a, &c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);            \
        return c;                                                                                    \
    }
EMU_TRACE_ATOMICS(8, unsigned char)
EMU_TRACE_ATOMICS(16, unsigned short)
EMU_TRACE_ATOMICS(32, unsigned int)
EMU_TRACE_ATOMICS(64, unsigned long long)
#undef EMU_TRACE_ATOMICS

void __tsan_atomic_thread_fence(int) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
void __tsan_atomic_signal_fence(int) { __atomic_signal_fence(__ATOMIC_SEQ_CST); }

}  // extern "C"
