// ReLU, one kernel each way (tinyflow/kernels/activation.py is the reference).
//
// Forward y = max(x, 0); backward gx = g where the saved output y > 0 (or NaN), else 0: no
// boolean temporary, no second pass. Each block owns one tile of 256*V elements (V = 16 bytes of
// T): its 64-bit base is computed once, offsets inside it are 32-bit, and where the host saw
// every array 16-byte aligned (``vec``) a thread loads and stores its V elements as one vector.
// Comparisons run in acc_t (fp32 for the half types); values are moved as raw bits.
#include "common.cuh"

namespace activation_detail {

template <typename T>
struct alignas(16) Pack {
    T v[16 / sizeof(T)];
};

template <typename T>
__device__ __forceinline__ T zero() {
    return from_acc<T>(acc_t<T>(0));
}

template <typename T>
__device__ __forceinline__ T relu(T v) {
    return to_acc(v) <= acc_t<T>(0) ? zero<T>() : v;  // NaN is not <= 0: it passes
}

template <typename T>
__device__ __forceinline__ T relu_grad(T g, T y) {
    return to_acc(y) <= acc_t<T>(0) ? zero<T>() : g;
}

// The tile of this block: [base, base + count) with count <= 256*V.
template <typename T>
__device__ __forceinline__ int tile_count(long long n, long long* base) {
    constexpr int V = 16 / sizeof(T);
    const long long tile = (long long)blockDim.x * V;
    *base = (long long)blockIdx.x * tile;
    const long long rest = n - *base;
    return (int)(rest < tile ? rest : tile);
}

template <typename T>
__device__ void relu_forward_impl(const T* __restrict__ x, T* __restrict__ y, long long n, int vec) {
    constexpr int V = 16 / sizeof(T);
    long long base;
    const int count = tile_count<T>(n, &base);
    x += base;
    y += base;
    const int first = threadIdx.x * V;
    if (vec && first + V <= count) {  // a whole vector: one 16-byte load and store
        Pack<T> p = *reinterpret_cast<const Pack<T>*>(x + first);
#pragma unroll
        for (int r = 0; r < V; ++r) p.v[r] = relu(p.v[r]);
        *reinterpret_cast<Pack<T>*>(y + first) = p;
    } else if (vec) {  // the tail of the last tile
        for (int e = first; e < count && e < first + V; ++e) y[e] = relu(x[e]);
    } else {
#pragma unroll
        for (int r = 0; r < V; ++r) {  // coalesced scalars, blockDim apart
            const int e = r * blockDim.x + threadIdx.x;
            if (e < count) y[e] = relu(x[e]);
        }
    }
}

template <typename T>
__device__ void relu_backward_impl(const T* __restrict__ g, const T* __restrict__ y,
                                   T* __restrict__ gx, long long n, int vec) {
    constexpr int V = 16 / sizeof(T);
    long long base;
    const int count = tile_count<T>(n, &base);
    g += base;
    y += base;
    gx += base;
    const int first = threadIdx.x * V;
    if (vec && first + V <= count) {
        Pack<T> pg = *reinterpret_cast<const Pack<T>*>(g + first);
        const Pack<T> py = *reinterpret_cast<const Pack<T>*>(y + first);
#pragma unroll
        for (int r = 0; r < V; ++r) pg.v[r] = relu_grad(pg.v[r], py.v[r]);
        *reinterpret_cast<Pack<T>*>(gx + first) = pg;
    } else if (vec) {
        for (int e = first; e < count && e < first + V; ++e) gx[e] = relu_grad(g[e], y[e]);
    } else {
#pragma unroll
        for (int r = 0; r < V; ++r) {
            const int e = r * blockDim.x + threadIdx.x;
            if (e < count) gx[e] = relu_grad(g[e], y[e]);
        }
    }
}

}  // namespace activation_detail

#define RELU_FORWARD(sfx, T)                                                                   \
    __global__ void relu_forward_##sfx(const T* x, T* y, long long n, int vec) {               \
        activation_detail::relu_forward_impl<T>(x, y, n, vec);                                 \
    }
#define RELU_BACKWARD(sfx, T)                                                                  \
    __global__ void relu_backward_##sfx(const T* g, const T* y, T* gx, long long n, int vec) { \
        activation_detail::relu_backward_impl<T>(g, y, gx, n, vec);                            \
    }
extern "C" {
TF_FLOAT_TYPES(RELU_FORWARD)
TF_FLOAT_TYPES(RELU_BACKWARD)
}
