// CPU emulation of the small part of CUDA that tinyflow's kernels use.
//
// Compiled with g++ (never nvcc), this header lets the .cu sources run on a machine without a
// GPU, so that their index arithmetic can be tested against the NumPy references
// (tinyflow_cuda/emulator.py). Three ways to run a launch (emulator.py picks one per kernel):
// - sequential: blocks one after another, the threads of a block one after another;
// - block threads (kernels that call __syncthreads()): blocks one after another, the threads of
//   a block as real std::threads meeting at a std::barrier;
// - grid threads (persistent kernels, which take an ``unsigned int* barrier`` counter for a
//   grid-wide barrier): every thread of every block at once, as std::threads, each block with
//   its own std::barrier; so a block can spin until all the others arrive.
// __shared__ becomes `static`, which is per block only because blocks never overlap in the first
// two modes: a grid-threads kernel must not use __shared__. Performance means nothing here; only
// the results do.
#pragma once

#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

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
#define __shared__ static
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
inline thread_local std::barrier<>* block_barrier = nullptr;  // the __syncthreads of this thread's block
inline std::mutex atomic_mutex;

// Run `body` once per thread of every block of the grid, as `mode` says (see the top).
inline void launch(dim3 grid, dim3 block, int mode, const std::function<void()>& body) {
    gridDim = grid;
    blockDim = block;
    const unsigned threads = block.x * block.y * block.z;
    auto thread_index = [block](unsigned t) {
        return uint3{t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
    };
    if (mode == kGridThreads) {
        const unsigned blocks = grid.x * grid.y * grid.z;
        std::vector<std::unique_ptr<std::barrier<>>> barriers;
        for (unsigned b = 0; b < blocks; ++b) barriers.push_back(std::make_unique<std::barrier<>>(threads));
        std::vector<std::thread> pool;
        pool.reserve(std::size_t(blocks) * threads);
        for (unsigned b = 0; b < blocks; ++b)
            for (unsigned t = 0; t < threads; ++t)
                pool.emplace_back([&, b, t] {
                    blockIdx = {b % grid.x, (b / grid.x) % grid.y, b / (grid.x * grid.y)};
                    threadIdx = thread_index(t);
                    block_barrier = barriers[b].get();
                    body();
                });
        for (auto& th : pool) th.join();
        return;
    }
    for (unsigned bz = 0; bz < grid.z; ++bz)
        for (unsigned by = 0; by < grid.y; ++by)
            for (unsigned bx = 0; bx < grid.x; ++bx) {
                if (mode == kSequential) {
                    for (unsigned t = 0; t < threads; ++t) {
                        blockIdx = {bx, by, bz};
                        threadIdx = thread_index(t);
                        body();
                    }
                    continue;
                }
                std::barrier<> bar(threads);
                std::vector<std::thread> pool;
                for (unsigned t = 0; t < threads; ++t)
                    pool.emplace_back([&, t] {
                        blockIdx = {bx, by, bz};
                        threadIdx = thread_index(t);
                        block_barrier = &bar;
                        body();
                    });
                for (auto& th : pool) th.join();
            }
}
}  // namespace emu

inline void __syncthreads() { emu::block_barrier->arrive_and_wait(); }

template <typename T>
inline T atomicAdd(T* address, T value) {
    std::lock_guard<std::mutex> lock(emu::atomic_mutex);
    T old = *address;
    *address = old + value;
    return old;
}

// Memory ordering and loads of the grid-wide barrier and of the data it publishes.
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __nanosleep(unsigned) { std::this_thread::yield(); }  // let the other blocks run
template <typename T>
inline T __ldcg(const T* address) {
    return *reinterpret_cast<const volatile T*>(address);
}

inline float __int_as_float(unsigned int bits) {
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
}
inline double __longlong_as_double(long long bits) {
    double d;
    std::memcpy(&d, &bits, sizeof d);
    return d;
}
