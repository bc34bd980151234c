// The arithmetic of the ring and tree all-reduce on GPU buffers, for fp32, fp64, fp16 and bf16:
// the received chunk is added into the local one, and the final sum is scaled (to a mean), both
// on device memory and on the communicator's stream, so no chunk ever visits the host.
//
// Half-precision buffers (bf16/fp16 gradients): each add loads both values to fp32, sums them in
// fp32 and rounds the sum once to nearest even, as a half-precision add does; a ring of R ranks
// therefore rounds R - 1 times along a chunk's path, once per add, never per partial bit. The scale
// multiplies in fp32 by the fp32 factor (1/R), one rounding.
#include "common.cuh"

// dst[i] += src[i] for i in [0, n); 32-bit indices wherever n allows (the usual case: a segment
// of a gradient bucket), 64-bit beyond 2^31 elements.
template <typename T>
__device__ void reduce_add_impl(T* __restrict__ dst, const T* __restrict__ src, long long n) {
    if (n <= 0x7fffffffLL) {
        // i + stride stays below 2^32: i < 2^31 and the grid has fewer than 2^31 threads
        const unsigned count = (unsigned)n, stride = blockDim.x * gridDim.x;
        for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride)
            dst[i] = from_acc<T>(to_acc(dst[i]) + to_acc(src[i]));
        return;
    }
    FOR_EACH_INDEX(i, n) dst[i] = from_acc<T>(to_acc(dst[i]) + to_acc(src[i]));
}

// x[i] *= factor for i in [0, n), in acc_t<T> (factor taken to that type once).
template <typename T>
__device__ void reduce_scale_impl(T* __restrict__ x, double factor, long long n) {
    const acc_t<T> f = (acc_t<T>)factor;
    if (n <= 0x7fffffffLL) {
        const unsigned count = (unsigned)n, stride = blockDim.x * gridDim.x;
        for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride)
            x[i] = from_acc<T>(to_acc(x[i]) * f);
        return;
    }
    FOR_EACH_INDEX(i, n) x[i] = from_acc<T>(to_acc(x[i]) * f);
}

#define REDUCE_ADD(sfx, T)                                                                       \
    __global__ void reduce_add_##sfx(T* dst, const T* src, long long n) {                        \
        reduce_add_impl<T>(dst, src, n);                                                         \
    }
#define REDUCE_SCALE(sfx, T)                                                                     \
    __global__ void reduce_scale_##sfx(T* x, double factor, long long n) {                       \
        reduce_scale_impl<T>(x, factor, n);                                                      \
    }

extern "C" {
TF_FLOAT_TYPES(REDUCE_ADD)
TF_FLOAT_TYPES(REDUCE_SCALE)
}
