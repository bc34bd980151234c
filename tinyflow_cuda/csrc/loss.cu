// Fused log-softmax and cross-entropy (tinyflow/kernels/loss.py is the reference).
//
// Forward: one block of 256 threads per row of the (N, C) logits. The block reduces the row's
// maximum, then sum(exp(x - max)), writes the log-probabilities once, and thread 0 writes the
// row's loss; with label smoothing a third reduction sums w * lp. The row is read from DRAM
// two or three times and written once, against six passes for the unfused expression.
// Backward: one thread per element, recomputing p = exp(lp) on the fly.
#include "common.cuh"

#define XENT_THREADS 256

// Reduce `v` over the block (sum when is_max == 0, max otherwise); every thread gets the result.
template <typename T>
__device__ T block_reduce(T v, T* shared, int is_max) {
    shared[threadIdx.x] = v;
    __syncthreads();
    for (int stride = XENT_THREADS / 2; stride > 0; stride >>= 1) {
        if ((int)threadIdx.x < stride) {
            const T other = shared[threadIdx.x + stride];
            const T mine = shared[threadIdx.x];
            shared[threadIdx.x] = is_max ? (other > mine ? other : mine) : mine + other;
        }
        __syncthreads();
    }
    const T result = shared[0];
    __syncthreads();  // shared is reused by the next reduction
    return result;
}

// lp[r] = log_softmax(x[r]) for every row r of the (rows, C) array; the per-row loss is written
// when target is not null. weight may be null (all ones).
template <typename T>
__device__ void log_softmax_xent_impl(const T* __restrict__ x, T* __restrict__ lp,
                                      const long long* __restrict__ target,
                                      const T* __restrict__ weight, T* __restrict__ loss,
                                      long long rows, int C, long long ignore_index,
                                      T label_smoothing) {
    __shared__ T shared[XENT_THREADS];
    for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
        const T* xr = x + r * C;
        T* lpr = lp + r * C;
        T m = neg_inf(T(0));
        for (int j = threadIdx.x; j < C; j += XENT_THREADS) m = xr[j] > m ? xr[j] : m;
        m = block_reduce(m, shared, 1);
        T s = T(0);
        for (int j = threadIdx.x; j < C; j += XENT_THREADS) s += exp(xr[j] - m);
        const T log_z = m + log(block_reduce(s, shared, 0));
        T smooth = T(0);
        for (int j = threadIdx.x; j < C; j += XENT_THREADS) {
            const T v = xr[j] - log_z;
            lpr[j] = v;
            smooth += weight ? weight[j] * v : v;
        }
        if (target == nullptr) continue;
        if (label_smoothing != T(0)) smooth = block_reduce(smooth, shared, 0);
        if (threadIdx.x == 0) {
            const long long y = target[r];
            if (y == ignore_index) {
                loss[r] = T(0);
            } else if (y < 0 || y >= C) {
                loss[r] = T(0) / T(0);  // a target outside [0, C): NaN, never a wild read
            } else {
                // lp[y] is recomputed from x rather than read back, so no other thread's write
                // needs to be visible here
                T l = -(weight ? weight[y] : T(1)) * (xr[y] - log_z);
                if (label_smoothing != T(0))
                    l = (T(1) - label_smoothing) * l + label_smoothing * (-smooth / T(C));
                loss[r] = l;
            }
        }
    }
}

// grad[r, j] = scale_r * ((1 - eps) * w[y] * (p - [j == y]) + eps * (p * wsum - w[j]) / C)
// with scale_r = grad_loss[r] (0 for ignored rows); wsum points at sum(w) on the device
// (read only when weight is given).
template <typename T>
__device__ void xent_backward_impl(const T* __restrict__ lp, const long long* __restrict__ target,
                                   const T* __restrict__ grad_loss, const T* __restrict__ weight,
                                   const T* __restrict__ wsum, T* __restrict__ grad,
                                   long long rows, int C, long long ignore_index,
                                   T label_smoothing) {
    FOR_EACH_INDEX(idx, rows * C) {
        const long long r = idx / C;
        const int j = idx % C;
        const long long y = target[r];
        if (y == ignore_index) {
            grad[idx] = T(0);
            continue;
        }
        if (y < 0 || y >= C) {
            grad[idx] = T(0) / T(0);  // a target outside [0, C): NaN, never a wild read
            continue;
        }
        const T p = exp(lp[idx]);
        T g = p - (j == y ? T(1) : T(0));
        if (weight) g *= weight[y];
        if (label_smoothing != T(0)) {
            const T total = weight ? *wsum : T(C);
            const T wj = weight ? weight[j] : T(1);
            g = (T(1) - label_smoothing) * g + label_smoothing * (p * total - wj) / T(C);
        }
        grad[idx] = g * grad_loss[r];
    }
}

extern "C" {
__global__ void softmax_cross_entropy_forward_f32(const float* x, float* lp,
                                                  const long long* target, const float* weight,
                                                  float* loss, long long rows, int C,
                                                  long long ignore_index, float label_smoothing) {
    log_softmax_xent_impl<float>(x, lp, target, weight, loss, rows, C, ignore_index,
                                 label_smoothing);
}
__global__ void softmax_cross_entropy_forward_f64(const double* x, double* lp,
                                                  const long long* target, const double* weight,
                                                  double* loss, long long rows, int C,
                                                  long long ignore_index, double label_smoothing) {
    log_softmax_xent_impl<double>(x, lp, target, weight, loss, rows, C, ignore_index,
                                  label_smoothing);
}
__global__ void softmax_cross_entropy_backward_f32(const float* lp, const long long* target,
                                                   const float* grad_loss, const float* weight,
                                                   const float* wsum, float* grad, long long rows,
                                                   int C, long long ignore_index,
                                                   float label_smoothing) {
    xent_backward_impl<float>(lp, target, grad_loss, weight, wsum, grad, rows, C, ignore_index,
                              label_smoothing);
}
__global__ void softmax_cross_entropy_backward_f64(const double* lp, const long long* target,
                                                   const double* grad_loss, const double* weight,
                                                   const double* wsum, double* grad,
                                                   long long rows, int C, long long ignore_index,
                                                   double label_smoothing) {
    xent_backward_impl<double>(lp, target, grad_loss, weight, wsum, grad, rows, C, ignore_index,
                               label_smoothing);
}
__global__ void log_softmax_forward_f32(const float* x, float* lp, long long rows, int C) {
    log_softmax_xent_impl<float>(x, lp, nullptr, nullptr, nullptr, rows, C, -100, 0.0f);
}
__global__ void log_softmax_forward_f64(const double* x, double* lp, long long rows, int C) {
    log_softmax_xent_impl<double>(x, lp, nullptr, nullptr, nullptr, rows, C, -100, 0.0);
}
}
