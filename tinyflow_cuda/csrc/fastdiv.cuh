// 32-bit index math without a division instruction: integer division by a runtime divisor through
// a magic number computed once on the host (tinyflow_cuda/kernels/_fastdiv.py), IEEE reciprocals,
// and a 32-bit grid-stride loop. Used by pool.cu and lrn.cu.
//
// A divisor d (1 <= d < 2^31) travels to a kernel as one ``unsigned long long``: the low 32 bits
// hold the magic m, the next bits the shift s, with (the method of Granlund and Montgomery, as
// PyTorch's IntDivider):
//     s = ceil(log2 d),  m = floor(2^32 (2^s - d) / d) + 1,  n / d = (umulhi(n, m) + n) >> s
// exact for every 0 <= n < 2^31 (umulhi(n, m) <= n, so the sum fits 32 bits). One multiply-high,
// one add and one shift, where a ``/`` by a runtime int compiles to a ~20-instruction sequence.
#pragma once

#include "common.cuh"

// In a namespace: all .cu files share one translation unit under the emulator, and conv.cu has
// its own conv_detail::FastDiv. A family uses these with ``using namespace index32;`` inside its
// own detail namespace.
namespace index32 {

// A divisor decoded from its packed magic; ``d`` is kept for remainders (n - q * d).
struct FastDiv {
    unsigned d, magic, shift;
};

__device__ __forceinline__ FastDiv fast_div(int d, unsigned long long packed) {
    return FastDiv{(unsigned)d, (unsigned)(packed & 0xffffffffULL), (unsigned)(packed >> 32)};
}

__device__ __forceinline__ unsigned mul_hi_u32(unsigned a, unsigned b) {
#ifdef TINYFLOW_EMULATOR
    return (unsigned)(((unsigned long long)a * b) >> 32);
#else
    return __umulhi(a, b);
#endif
}

// n / f.d for 0 <= n < 2^31.
__device__ __forceinline__ unsigned fdiv(unsigned n, FastDiv f) {
    return (mul_hi_u32(n, f.magic) + n) >> f.shift;
}

// 1 / v rounded to nearest (rcp.rn: the value ``1 / v`` gives, without a division instruction).
__device__ __forceinline__ float reciprocal(float v) {
#ifdef TINYFLOW_EMULATOR
    return 1.0f / v;
#else
    return __frcp_rn(v);
#endif
}
__device__ __forceinline__ double reciprocal(double v) {
#ifdef TINYFLOW_EMULATOR
    return 1.0 / v;
#else
    return __drcp_rn(v);
#endif
}

// int min / max (CUDA's overloads exist under NVRTC, not under the g++ emulator).
__device__ __forceinline__ int imin(int a, int b) { return a < b ? a : b; }
__device__ __forceinline__ int imax(int a, int b) { return a > b ? a : b; }

}  // namespace index32

// Grid-stride loop over [0, n) in 32-bit unsigned arithmetic (the host keeps n < 2^31 by
// splitting a launch, so i + stride never wraps): consecutive threads take consecutive indices.
#define FOR_EACH_INDEX32(i, n)                                                  \
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < (unsigned)(n); \
         i += blockDim.x * gridDim.x)
