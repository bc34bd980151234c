// CPU emulation of the small part of CUDA that tinyflow's kernels use.
//
// Compiled with g++ (never nvcc), this header lets the .cu sources run on a machine without a
// GPU, so that their index arithmetic can be tested against the NumPy references
// (tinyflow_cuda/emulator.py). Blocks run one after another; the threads of a block run
// either one after another or, for kernels that call __syncthreads(), as real std::threads
// meeting at a std::barrier. __shared__ becomes `static`, which is per block because blocks
// never overlap. Performance means nothing here; only the results do.
#pragma once

#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
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
inline std::barrier<>* block_barrier = nullptr;
inline std::mutex atomic_mutex;

// Run `body` once per thread of every block of the grid.
inline void launch(dim3 grid, dim3 block, bool concurrent, const std::function<void()>& body) {
    gridDim = grid;
    blockDim = block;
    const unsigned threads = block.x * block.y * block.z;
    for (unsigned bz = 0; bz < grid.z; ++bz)
        for (unsigned by = 0; by < grid.y; ++by)
            for (unsigned bx = 0; bx < grid.x; ++bx) {
                auto run_thread = [&, bx, by, bz](unsigned t) {
                    blockIdx = {bx, by, bz};
                    threadIdx = {t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
                    body();
                };
                if (!concurrent) {
                    for (unsigned t = 0; t < threads; ++t) run_thread(t);
                    continue;
                }
                std::barrier<> bar(threads);
                block_barrier = &bar;
                std::vector<std::thread> pool;
                for (unsigned t = 0; t < threads; ++t) pool.emplace_back(run_thread, t);
                for (auto& th : pool) th.join();
                block_barrier = nullptr;
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
