// The arithmetic of the ring and tree all-reduce on GPU buffers: the received chunk is added
// into the local one, and the final sum is scaled (to a mean), both on device memory and on
// the communicator's stream, so no chunk ever visits the host.
#include "common.cuh"

template <typename T>
__device__ void add_impl(T* __restrict__ dst, const T* __restrict__ src, long long n) {
    FOR_EACH_INDEX(i, n) dst[i] += src[i];
}

template <typename T>
__device__ void scale_impl(T* __restrict__ x, T factor, long long n) {
    FOR_EACH_INDEX(i, n) x[i] *= factor;
}

extern "C" {
__global__ void reduce_add_f32(float* dst, const float* src, long long n) {
    add_impl<float>(dst, src, n);
}
__global__ void reduce_add_f64(double* dst, const double* src, long long n) {
    add_impl<double>(dst, src, n);
}
__global__ void reduce_scale_f32(float* x, float factor, long long n) {
    scale_impl<float>(x, factor, n);
}
__global__ void reduce_scale_f64(double* x, double factor, long long n) {
    scale_impl<double>(x, factor, n);
}
}
