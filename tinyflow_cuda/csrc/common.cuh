// Shared helpers for tinyflow's CUDA kernels.
#pragma once

// Grid-stride loop over [0, n): every kernel is launched with a grid sized for the work, but
// stays correct for any grid (and under the CPU emulator, which may launch a small one).
#define FOR_EACH_INDEX(i, n)                                                        \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
         i += (long long)blockDim.x * gridDim.x)

template <typename T>
__device__ __forceinline__ T sigmoid(T x) {
    return T(1) / (T(1) + exp(-x));
}

// -infinity, spelt with intrinsics because NVRTC compiles without <cmath>'s INFINITY.
__device__ __forceinline__ float neg_inf(float) { return __int_as_float(0xff800000); }
__device__ __forceinline__ double neg_inf(double) {
    return __longlong_as_double((long long)0xfff0000000000000ULL);
}
