// CPU emulation of the small part of CUDA that tinyflow's kernels use.
//
// Compiled with g++ (never nvcc), this header lets the .cu sources run on a machine without a
// GPU, so that their index arithmetic can be tested against the NumPy references
// (cuda_tools/emulator.py). Three ways to run a launch (emulator.py picks one per kernel):
// - sequential: blocks one after another, the threads of a block one after another;
// - block threads (kernels that call __syncthreads()): blocks one after another, the threads of
//   a block as fibers (ucontext) on the launching thread, each running until __syncthreads, where
//   it waits for the rest of its block;
// - grid threads (persistent kernels, which take an ``unsigned int* barrier`` counter for a
//   grid-wide barrier): every thread of every block at once, as fibers, each block with its own
//   __syncthreads; a block spinning at the grid barrier (__nanosleep) lets the others run.
// __shared__ becomes `static`, which is per block only because blocks never overlap in the first
// two modes. Kernels that run in the grid-threads mode declare block-shared memory with
// TF_SHARED(T, name, n) or TF_DYNAMIC_SHARED(T, name) instead (common.cuh has the GPU spelling):
// here they point into an arena per running block (see "Per-block shared memory" below), so
// blocks alive at once never see each other's shared memory; `grid_sync()` (common.cuh) waits
// for every thread of the grid (emu::sync_grid), as cooperative groups' grid.sync() does.
// Performance means little here; only the results do. A launch runs on the calling OS thread
// (emulator.py admits one at a time).
#pragma once

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include <csetjmp>
#include <setjmp.h>
#include <ucontext.h>

struct uint3 { unsigned int x, y, z; };
struct dim3 {
    unsigned int x, y, z;
    dim3(unsigned int x_ = 1, unsigned int y_ = 1, unsigned int z_ = 1) : x(x_), y(y_), z(z_) {}
};

inline thread_local uint3 threadIdx{0, 0, 0};
inline thread_local uint3 blockIdx{0, 0, 0};
inline dim3 blockDim;
inline dim3 gridDim;

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
// A plain __shared__ array is a static (per block only where blocks run in turn, see the top); in
// the instrumented build (emulator.py, TRACE_FLAGS) a thread-local one, the same thing for the
// fibers of the launching thread, but where the bank-conflict recorder (emu_trace.h) can tell it
// apart from the library's other data: the thread-local block holds nothing else of the kernels'.
#ifdef TINYFLOW_EMU_TRACE
#define __shared__ static thread_local
#else
#define __shared__ static
#endif
#define __launch_bounds__(...)
#define TINYFLOW_EMULATOR 1

using std::exp;
using std::log;
using std::tanh;
using std::sqrt;
using std::pow;
using std::fabs;
using std::fmax;
using std::fmin;
using std::isfinite;

namespace emu {
enum Mode { kSequential = 0, kBlockThreads = 1, kGridThreads = 2 };
inline std::mutex atomic_mutex;

// The threads of the blocks that run at once, as fibers on the launching OS thread: a fiber runs
// until it reaches __syncthreads (it then waits until every thread of its block has arrived) or
// __nanosleep (it lets the others run), or until it ends. A fiber starts on its own stack through
// makecontext/swapcontext; after that, switches are _setjmp/_longjmp, which (unlike swapcontext)
// make no system call to save the signal mask: tens of nanoseconds a switch, where an OS thread
// per CUDA thread cost microseconds per barrier. (emulator.py builds without _FORTIFY_SOURCE,
// whose longjmp check refuses a jump to another stack.)
struct Fiber {
    ucontext_t context;  // where it starts
    jmp_buf resume;  // where it left off
    bool started = false;
    uint3 block_index{0, 0, 0};
    uint3 thread_index{0, 0, 0};
    unsigned block = 0;  // which of the running blocks (an index into Scheduler::arrived)
    unsigned block_id = 0;  // the block it runs now, numbered over the grid
    bool waiting = false;  // at __syncthreads
    bool done = false;
};

struct Scheduler {
    jmp_buf main;
    std::vector<Fiber> fibers;
    std::vector<unsigned> arrived;  // per running block: its threads waiting at __syncthreads
    unsigned block_threads = 0;
    unsigned rounds = 1;  // blocks each fiber runs in turn
    Fiber* current = nullptr;
    const std::function<void()>* body = nullptr;
    bool grid = false;  // all the grid's blocks alive at once (grid_sync() is allowed)
    std::size_t grid_arrived = 0;  // threads waiting at grid_sync()
    unsigned warps = 1;  // warps a block (the last one may be partial)
    std::vector<unsigned> warp_arrived;  // per running block and warp: lanes waiting at sync_warp
    std::vector<unsigned char> warp_scratch;  // per running block and warp: kWarpScratch bytes
};
inline thread_local Scheduler* scheduler = nullptr;
constexpr std::size_t kFiberStack = 256 * 1024;
// Fiber stacks, kept for the next launch of this OS thread (allocating them per block cost more
// than running the kernel).
inline thread_local std::vector<std::unique_ptr<char[]>> stacks;

inline void sync_block();

// Bytes of scratch memory a warp gets for warp-level emulations (mma.cuh's tensor-core twin: each
// lane deposits its fragments there, the warp meets at sync_warp, each lane reads what it needs).
constexpr std::size_t kWarpScratch = 4 * 1024;

inline uint3 block_coordinates(unsigned id) {
    return {id % gridDim.x, (id / gridDim.x) % gridDim.y, id / (gridDim.x * gridDim.y)};
}

[[noreturn]] inline void fiber_main() {
    Scheduler* s = scheduler;
    Fiber* me = s->current;
    for (unsigned round = 0; round < s->rounds; ++round) {  // the blocks this fiber's slot runs
        (*s->body)();
        if (round + 1 < s->rounds) {
            sync_block();  // the whole block is done with it (and with its __shared__) first
            me->block_id += 1;
            me->block_index = block_coordinates(me->block_id);
            blockIdx = me->block_index;
        }
    }
    me->done = true;
    _longjmp(s->main, 1);  // back to the scheduler, never to return here
}

inline void yield() {
    Scheduler* s = scheduler;
    if (_setjmp(s->current->resume) == 0) _longjmp(s->main, 1);
}

inline void sync_block() {
    Scheduler* s = scheduler;
    Fiber* me = s->current;
    if (++s->arrived[me->block] == s->block_threads) {  // the last one in releases the block
        s->arrived[me->block] = 0;
        for (Fiber& f : s->fibers)
            if (f.block == me->block) f.waiting = false;
        return;
    }
    me->waiting = true;
    yield();
}

// A barrier for every thread of the grid (grid-threads mode only): the last one in releases all.
// A thread that skips it (or waits at __syncthreads meanwhile) leaves the rest waiting, which the
// scheduler reports as a deadlock instead of hanging.
inline void sync_grid() {
    Scheduler* s = scheduler;
    if (s == nullptr || !s->grid) {
        std::fprintf(stderr, "emu: grid_sync() in a kernel that is not launched with all its blocks "
                             "alive: mark it TF_COOPERATIVE (common.cuh)\n");
        std::abort();
    }
    if (++s->grid_arrived == s->fibers.size()) {
        s->grid_arrived = 0;
        for (Fiber& f : s->fibers) f.waiting = false;
        return;
    }
    s->current->waiting = true;
    yield();
}

// The thread's index within its block, x fastest (as CUDA numbers lanes: lane = index % 32).
inline unsigned linear_thread(const uint3& t) {
    return t.x + blockDim.x * (t.y + blockDim.y * t.z);
}

// A barrier for the lanes of one warp (the 32 consecutive threads of a block, fewer in a partial
// last warp), as __syncwarp() with a full mask: the last lane in releases its warp. Only in the
// fiber modes (a kernel that calls __syncthreads, or a cooperative one).
inline void sync_warp() {
    Scheduler* s = scheduler;
    if (s == nullptr) {
        std::fprintf(stderr, "emu: a warp-level operation (sync_warp, mma) in a kernel that runs "
                             "sequentially: call __syncthreads() somewhere in its .cu file\n");
        std::abort();
    }
    Fiber* me = s->current;
    const unsigned warp = linear_thread(me->thread_index) / 32;
    const unsigned first = warp * 32;
    const unsigned lanes = s->block_threads - first < 32 ? s->block_threads - first : 32;
    unsigned& arrived = s->warp_arrived[me->block * s->warps + warp];
    if (++arrived == lanes) {
        arrived = 0;
        Fiber* base = &s->fibers[std::size_t(me->block) * s->block_threads + first];
        for (unsigned l = 0; l < lanes; ++l) base[l].waiting = false;
        return;
    }
    me->waiting = true;
    yield();
}

// The calling warp's kWarpScratch bytes (fiber modes only, like sync_warp).
inline unsigned char* warp_scratch() {
    Scheduler* s = scheduler;
    const unsigned warp = linear_thread(s->current->thread_index) / 32;
    return s->warp_scratch.data() + (std::size_t(s->current->block) * s->warps + warp) * kWarpScratch;
}

// ---- Per-block shared memory ------------------------------------------------------------------
// Each running block owns an arena: [dynamic shared memory (the launch's shared_mem bytes) |
// a canary | the static TF_SHARED region]. TF_SHARED declarations get a fixed offset in the
// static region the first time they run (one per declaration, like the GPU's static layout);
// TF_DYNAMIC_SHARED is the arena's start. The dynamic part is filled with 0xff bytes before each
// launch (a NaN in every float type: reading shared memory nobody wrote shows), and the canary
// is checked after it (a kernel that writes past its shared_mem stops the process, naming it).
constexpr std::size_t kStaticShared = 256 * 1024;  // room for every TF_SHARED of all kernels
constexpr std::size_t kCanary = 64;
constexpr unsigned char kCanaryByte = 0xa5;
inline std::mutex shared_mutex;
inline std::size_t static_shared_used = 0;
inline std::size_t pending_dynamic_shared = 0;  // set by emulator.py right before a launch
inline std::size_t dynamic_shared_bytes = 0;  // of the launch in progress
inline std::vector<std::unique_ptr<unsigned char[]>> arenas;  // one per running block
inline std::size_t arena_dynamic = 0;  // the static_offset() the arenas were cut for
inline unsigned arenas_alive = 0;  // the arenas of the launch running (none between launches)

inline std::size_t reserve_static_shared(std::size_t bytes, std::size_t align) {
    std::lock_guard<std::mutex> lock(shared_mutex);
    const std::size_t offset = (static_shared_used + align - 1) / align * align;
    if (offset + bytes > kStaticShared) {
        std::fprintf(stderr, "emu: TF_SHARED declarations exceed the emulator's %zu bytes\n",
                     kStaticShared);
        std::abort();
    }
    static_shared_used = offset + bytes;
    return offset;
}

// Where the static region starts: after the dynamic bytes and the canary right behind them.
inline std::size_t static_offset() { return (dynamic_shared_bytes + kCanary + 63) / 64 * 64; }

// Arenas for `count` blocks at once, the dynamic part poisoned and the canaries set.
inline void prepare_arenas(unsigned count) {
    const std::size_t dynamic = dynamic_shared_bytes;
    if (arena_dynamic != static_offset()) {
        arenas.clear();
        arena_dynamic = static_offset();
    }
    while (arenas.size() < count)
        arenas.emplace_back(new unsigned char[static_offset() + kStaticShared]);
    for (unsigned b = 0; b < count; ++b) {
        std::memset(arenas[b].get(), 0xff, dynamic);
        std::memset(arenas[b].get() + dynamic, kCanaryByte, kCanary);
    }
}

inline void check_arenas(unsigned count) {
    const std::size_t dynamic = dynamic_shared_bytes;
    for (unsigned b = 0; b < count; ++b)
        for (std::size_t i = 0; i < kCanary; ++i)
            if (arenas[b][dynamic + i] != kCanaryByte) {
                std::fprintf(stderr, "emu: a kernel wrote past its dynamic shared memory "
                                     "(shared_mem = %zu bytes)\n", dynamic_shared_bytes);
                std::abort();
            }
}

inline unsigned char* block_arena() {
    return arenas[scheduler != nullptr ? scheduler->current->block : 0].get();
}
inline unsigned char* dynamic_shared() { return block_arena(); }
inline unsigned char* static_shared() { return block_arena() + static_offset(); }

// Run `count` blocks at once, their threads as fibers, until all have ended; with `rounds` > 1
// (count 1) the fibers then go on to the next block, `rounds` blocks in turn.
inline void run_blocks(unsigned count, unsigned rounds, dim3 block, const std::function<void()>& body) {
    Scheduler s;
    s.grid = rounds == 1;
    s.block_threads = block.x * block.y * block.z;
    s.rounds = rounds;
    s.body = &body;
    s.arrived.assign(count, 0);
    s.warps = (s.block_threads + 31) / 32;
    s.warp_arrived.assign(std::size_t(count) * s.warps, 0);
    s.warp_scratch.assign(std::size_t(count) * s.warps * kWarpScratch, 0);
    s.fibers.resize(std::size_t(count) * s.block_threads);
    while (stacks.size() < s.fibers.size()) stacks.emplace_back(new char[kFiberStack]);
    Scheduler* outer = scheduler;
    scheduler = &s;
    for (unsigned b = 0; b < count; ++b)
        for (unsigned t = 0; t < s.block_threads; ++t) {
            Fiber& f = s.fibers[std::size_t(b) * s.block_threads + t];
            f.block_id = b;
            f.block_index = block_coordinates(b);
            f.thread_index = {t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
            f.block = b;
            getcontext(&f.context);
            f.context.uc_stack.ss_sp = stacks[std::size_t(b) * s.block_threads + t].get();
            f.context.uc_stack.ss_size = kFiberStack;
            f.context.uc_link = nullptr;
            makecontext(&f.context, fiber_main, 0);
        }
    for (;;) {
        bool all_done = true, ran = false;
        for (Fiber& f : s.fibers) {
            if (f.done) continue;
            all_done = false;
            if (f.waiting) continue;
            ran = true;
            blockIdx = f.block_index;
            threadIdx = f.thread_index;
            s.current = &f;
            if (_setjmp(s.main) == 0) {
                if (f.started) {
                    _longjmp(f.resume, 1);
                } else {
                    f.started = true;
                    ucontext_t from;
                    swapcontext(&from, &f.context);  // never returns: the fiber comes back by _longjmp
                }
            }
        }
        if (all_done) break;
        if (!ran) {
            std::fprintf(stderr, "emu: deadlock: every live thread waits at __syncthreads or "
                                 "grid_sync, and none can go on\n");
            std::abort();
        }
    }
    scheduler = outer;
}

// Run `body` once per thread of every block of the grid, as `mode` says (see the top).
inline void launch(dim3 grid, dim3 block, int mode, const std::function<void()>& body) {
    gridDim = grid;
    blockDim = block;
    const unsigned threads = block.x * block.y * block.z;
    const unsigned blocks = grid.x * grid.y * grid.z;
    dynamic_shared_bytes = pending_dynamic_shared;
    pending_dynamic_shared = 0;
    const unsigned alive = mode == kGridThreads ? blocks : 1;  // blocks with an arena at once
    prepare_arenas(alive);
    arenas_alive = alive;
    struct Check {  // the canaries, however the launch below returns
        unsigned alive;
        ~Check() {
            arenas_alive = 0;
            check_arenas(alive);
        }
    } check{alive};
    if (mode == kSequential) {
        for (unsigned b = 0; b < blocks; ++b)
            for (unsigned t = 0; t < threads; ++t) {
                blockIdx = {b % grid.x, (b / grid.x) % grid.y, b / (grid.x * grid.y)};
                threadIdx = {t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
                body();
            }
        return;
    }
    if (mode == kGridThreads) {  // every block alive at once: the grid barrier must see them all
        run_blocks(blocks, 1, block, body);
        return;
    }
    run_blocks(1, blocks, block, body);  // one block's threads, running the blocks in turn
}
}  // namespace emu

inline void __syncthreads() { emu::sync_block(); }

// Block-shared arrays that are per block in every mode (see the top; common.cuh defines the GPU's).
#define TF_SHARED(T, name, n)                                                                    \
    static const std::size_t name##_emu_offset = emu::reserve_static_shared(sizeof(T) * (n),      \
                                                                             alignof(T));          \
    T(&name)[n] = *reinterpret_cast<T(*)[n]>(emu::static_shared() + name##_emu_offset)
#define TF_DYNAMIC_SHARED(T, name) T* name = reinterpret_cast<T*>(emu::dynamic_shared())

template <typename T>
inline T atomicAdd(T* address, T value) {
    std::lock_guard<std::mutex> lock(emu::atomic_mutex);
    T old = *address;
    *address = old + value;
    return old;
}

// Memory ordering and loads of the grid-wide barrier and of the data it publishes.
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __nanosleep(unsigned) { emu::yield(); }  // let the other blocks run
template <typename T>
inline T __ldcg(const T* address) {
    return *reinterpret_cast<const volatile T*>(address);
}

inline float __int_as_float(unsigned int bits) {
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
}
inline float __uint_as_float(unsigned int bits) {
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
}
inline unsigned int __float_as_uint(float f) {
    unsigned int bits;
    std::memcpy(&bits, &f, sizeof bits);
    return bits;
}
inline long long __double_as_longlong(double d) {
    long long bits;
    std::memcpy(&bits, &d, sizeof bits);
    return bits;
}
inline double __longlong_as_double(long long bits) {
    double d;
    std::memcpy(&d, &bits, sizeof d);
    return d;
}
