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

// Half precision as raw 16 bits. No cuda_fp16.h / cuda_bf16.h: the emulator has neither, and a
// kernel never needs their arithmetic: it loads to fp32 (``to_acc``), computes in fp32, and rounds
// back to nearest even once (``from_acc``). Copies move the 16 bits untouched.
struct f16_t {
    unsigned short bits;
};
struct bf16_t {
    unsigned short bits;
};

// The type a kernel computes and accumulates in: fp32 for the half types, else the type itself.
template <typename T> struct acc_type { using type = T; };
template <> struct acc_type<f16_t> { using type = float; };
template <> struct acc_type<bf16_t> { using type = float; };
template <typename T> using acc_t = typename acc_type<T>::type;

__device__ __forceinline__ float to_acc(float v) { return v; }
__device__ __forceinline__ double to_acc(double v) { return v; }
__device__ __forceinline__ float to_acc(bf16_t v) { return __uint_as_float((unsigned)v.bits << 16); }
__device__ __forceinline__ float to_acc(f16_t v) {
    const unsigned sign = (unsigned)(v.bits & 0x8000u) << 16;
    const unsigned exponent = (v.bits >> 10) & 0x1fu, mantissa = v.bits & 0x3ffu;
    if (exponent == 0x1fu) return __uint_as_float(sign | 0x7f800000u | (mantissa << 13));  // inf, NaN
    if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24
        const float magnitude = (float)mantissa * 5.9604644775390625e-8f;
        return sign ? -magnitude : magnitude;
    }
    return __uint_as_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

// fp32 (or fp64 for the fp64 kernels) -> T, rounding to nearest even.
template <typename T> __device__ __forceinline__ T from_acc(acc_t<T> v) { return T(v); }
template <> __device__ __forceinline__ bf16_t from_acc<bf16_t>(float v) {
    const unsigned u = __float_as_uint(v);
    if ((u & 0x7fffffffu) > 0x7f800000u) return bf16_t{(unsigned short)((u >> 16) | 0x40u)};  // quiet NaN
    return bf16_t{(unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16)};
}
template <> __device__ __forceinline__ f16_t from_acc<f16_t>(float v) {
    const unsigned u = __float_as_uint(v);
    const unsigned short sign = (unsigned short)((u >> 16) & 0x8000u);
    const unsigned a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return f16_t{(unsigned short)(sign | 0x7e00u)};  // NaN
    if (a >= 0x477ff000u) return f16_t{(unsigned short)(sign | 0x7c00u)};  // rounds to >= 65520: inf
    if (a >= 0x38800000u) {  // normal in half: rebias the exponent, round the 13 dropped bits
        const unsigned r = a - 0x38000000u;
        return f16_t{(unsigned short)(sign | ((r + 0xfffu + ((r >> 13) & 1u)) >> 13))};
    }
    if (a <= 0x33000000u) return f16_t{sign};  // at most 2^-25: rounds (ties to even) to zero
    const unsigned shift = 126u - (a >> 23);  // subnormal in half: units of 2^-24
    const unsigned m = (a & 0x7fffffu) | 0x800000u;
    unsigned r = m >> shift;
    const unsigned rest = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rest > half || (rest == half && (r & 1u))) ++r;
    return f16_t{(unsigned short)(sign | r)};
}

// ``v`` where ``keep``, else +0, by masking its bits: a select after an unconditional load, so no
// compiler (g++ for the emulator, nvcc) can sink the load into a branch that only some lanes take
// (the lanes of a warp then load together: conv.cu's and pool.cu's taps in the padding).
__device__ __forceinline__ unsigned keep_mask(bool keep) { return 0u - (unsigned)keep; }
__device__ __forceinline__ float keep_if(bool keep, float v) {
    return __uint_as_float(__float_as_uint(v) & keep_mask(keep));
}
__device__ __forceinline__ double keep_if(bool keep, double v) {
#ifdef TINYFLOW_EMULATOR
    unsigned long long bits;
    __builtin_memcpy(&bits, &v, sizeof bits);
#else
    unsigned long long bits = (unsigned long long)__double_as_longlong(v);
#endif
    return __longlong_as_double((long long)(bits & (0ULL - (unsigned long long)keep)));
}
__device__ __forceinline__ f16_t keep_if(bool keep, f16_t v) {
    f16_t r;
    r.bits = (unsigned short)(v.bits & keep_mask(keep));
    return r;
}
__device__ __forceinline__ bf16_t keep_if(bool keep, bf16_t v) {
    bf16_t r;
    r.bits = (unsigned short)(v.bits & keep_mask(keep));
    return r;
}

// Instantiate a kernel macro ``X(sfx, T)`` once per floating dtype. A kernel written as
// ``#define IM2COL(sfx, T) __global__ void im2col_##sfx(const T* x, ...) {...}`` inside
// ``extern "C" { TF_FLOAT_TYPES(IM2COL) }`` becomes im2col_f32, _f64, _f16 and _bf16; runtime.py
// reads the ``name_##sfx(...)`` signature and knows all four. Scalar parameters are never T.
#define TF_FLOAT_TYPES(X) X(f32, float) X(f64, double) X(f16, f16_t) X(bf16, bf16_t)

// ---- Block-shared memory and the grid barrier of persistent kernels ---------------------------
// TF_SHARED(T, name, n) declares a block-shared array T name[n]; TF_DYNAMIC_SHARED(T, name) makes
// `name` a T* to the launch's dynamic shared memory (its shared_mem bytes; above 48 KB the
// runtime raises the kernel's max_dynamic_shared_size_bytes). Write these instead of __shared__:
// the emulator then gives each block its own memory (cuda_tools/emu.h), where a plain __shared__ would
// be one array for all blocks of a kernel that runs with all its blocks alive (TF_COOPERATIVE);
// and a plain __shared__ inside a template is a static the emulator's plain and instrumented
// libraries both export (static in one, thread_local in the other: loaded in one process, the
// second to run crashed).
#ifndef TINYFLOW_EMULATOR
#define TF_SHARED(T, name, n) __shared__ T name[n]
#define TF_DYNAMIC_SHARED(T, name)                                   \
    extern __shared__ __align__(16) unsigned char tf_dynamic_shared_[]; \
    T* name = reinterpret_cast<T*>(tf_dynamic_shared_)
#endif

// TF_COOPERATIVE before ``__global__`` marks a persistent kernel: one that calls grid_sync().
// runtime.discover() reads the mark: CupyRuntime compiles the file with cooperative groups and
// launches the kernel cooperatively (every block resident, or the launch fails instead of
// hanging), and the emulator runs all its blocks at once. It expands to nothing.
#define TF_COOPERATIVE

// grid_sync(): every thread of the grid waits here until all have arrived; writes before it are
// visible to every thread after it. cooperative_groups' grid.sync() on the GPU (NVRTC compiles
// it where CupyRuntime defines TF_COOPERATIVE_GROUPS; nvcc, check_cu.sh's compiler, always);
// the emulator's all-fibers barrier on the CPU.
#if defined(TINYFLOW_EMULATOR)
__device__ __forceinline__ void grid_sync() { emu::sync_grid(); }
#elif defined(TF_COOPERATIVE_GROUPS) || !defined(__CUDACC_RTC__)
#include <cooperative_groups.h>
__device__ __forceinline__ void grid_sync() { cooperative_groups::this_grid().sync(); }
#endif
