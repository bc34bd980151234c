// Fused log-softmax and cross-entropy (tinyflow/kernels/loss.py is the reference), for fp32, fp64,
// fp16 and bf16 logits.
//
// Forward: one block of 256 threads per row of the (N, C) logits. The block reduces the row's
// maximum, then sum(exp(x - max)), writes the log-probabilities once, and thread 0 writes the
// row's loss; with label smoothing a third reduction sums w * lp. The row is read from DRAM
// two or three times and written once, against six passes for the unfused expression.
// Backward: one block per row too (the row's target, weight and upstream gradient are read once,
// and no thread divides its element index by C), recomputing p = exp(lp) on the fly.
//
// Precision: every load goes through to_acc and all arithmetic, sums and maxima included, runs in
// acc_t<T> (fp32 for the half types, so a long row's sum of exponentials never stalls at 8 or 11
// bits); each stored value is rounded once, by from_acc. The loss is computed from the logits, not
// from the rounded log-probabilities.
#include "common.cuh"

#define XENT_THREADS 256

// Reduce `v` over the block (sum when is_max == 0, max otherwise); every thread gets the result.
// A is the accumulate type; `shared` holds XENT_THREADS of them.
template <typename A>
__device__ A block_reduce(A v, A* shared, int is_max) {
    shared[threadIdx.x] = v;
    __syncthreads();
    for (int stride = XENT_THREADS / 2; stride > 0; stride >>= 1) {
        if ((int)threadIdx.x < stride) {
            const A other = shared[threadIdx.x + stride];
            const A mine = shared[threadIdx.x];
            shared[threadIdx.x] = is_max ? (other > mine ? other : mine) : mine + other;
        }
        __syncthreads();
    }
    const A result = shared[0];
    __syncthreads();  // shared is reused by the next reduction
    return result;
}

// The sum of the C class weights (C when there are none), reduced by the whole block.
template <typename T>
__device__ acc_t<T> weight_total(const T* __restrict__ weight, int C, acc_t<T>* shared) {
    using A = acc_t<T>;
    if (weight == nullptr) return A(C);
    A total = A(0);
    for (int j = threadIdx.x; j < C; j += XENT_THREADS) total += to_acc(weight[j]);
    return block_reduce(total, shared, 0);
}

// lp[r] = log_softmax(x[r]) for every row r of the (rows, C) array; the per-row loss is written
// when target is not null. weight may be null (all ones).
template <typename T>
__device__ void log_softmax_xent_impl(const T* __restrict__ x, T* __restrict__ lp,
                                      const long long* __restrict__ target,
                                      const T* __restrict__ weight, T* __restrict__ loss,
                                      long long rows, int C, long long ignore_index,
                                      double label_smoothing) {
    using A = acc_t<T>;
    TF_SHARED(A, shared, XENT_THREADS);
    const A eps = (A)label_smoothing;
    for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
        const T* xr = x + r * C;  // the row's base in 64 bits, its columns in 32
        T* lpr = lp + r * C;
        A m = neg_inf(A(0));
        for (int j = threadIdx.x; j < C; j += XENT_THREADS) {
            const A v = to_acc(xr[j]);
            m = v > m ? v : m;  // a NaN never wins; it reaches the sum below and makes the row NaN
        }
        m = block_reduce(m, shared, 1);
        A s = A(0);
        for (int j = threadIdx.x; j < C; j += XENT_THREADS) s += exp(to_acc(xr[j]) - m);
        const A log_z = m + log(block_reduce(s, shared, 0));
        A smooth = A(0);
        for (int j = threadIdx.x; j < C; j += XENT_THREADS) {
            const A v = to_acc(xr[j]) - log_z;
            lpr[j] = from_acc<T>(v);
            if (weight) {
                smooth += to_acc(weight[j]) * v;
            } else {
                smooth += v;
            }
        }
        if (target == nullptr) continue;
        if (eps != A(0)) smooth = block_reduce(smooth, shared, 0);
        if (threadIdx.x == 0) {
            const long long y = target[r];
            A l;
            if (y == ignore_index) {
                l = A(0);
            } else if (y < 0 || y >= C) {
                l = A(0) / A(0);  // a target outside [0, C): NaN, never a wild read
            } else {
                // lp[y] is recomputed from x rather than read back, so no other thread's write
                // needs to be visible here (and it is the unrounded value)
                l = -(weight ? to_acc(weight[y]) : A(1)) * (to_acc(xr[y]) - log_z);
                if (eps != A(0)) l = (A(1) - eps) * l + eps * (-smooth / A(C));
            }
            loss[r] = from_acc<T>(l);
        }
    }
}

// grad[r, j] = scale_r * ((1 - eps) * w[y] * (p - [j == y]) + eps * (p * sum(w) - w[j]) / C)
// with scale_r = grad_loss[r] (0 for ignored rows). sum(w) is reduced by the block when both
// label smoothing and weights are given (C without weights).
template <typename T>
__device__ void xent_backward_impl(const T* __restrict__ lp, const long long* __restrict__ target,
                                   const T* __restrict__ grad_loss, const T* __restrict__ weight,
                                   T* __restrict__ grad, long long rows, int C,
                                   long long ignore_index, double label_smoothing) {
    using A = acc_t<T>;
    TF_SHARED(A, shared, XENT_THREADS);
    const A eps = (A)label_smoothing;
    const A keep = A(1) - eps;
    const A total = eps != A(0) ? weight_total(weight, C, shared) : A(0);
    const A eps_per_class = eps / A(C);  // once, not a division per element
    for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
        const T* lpr = lp + r * C;
        T* gr = grad + r * C;
        const long long y = target[r];
        if (y == ignore_index || y < 0 || y >= C) {
            // ignored: no gradient; outside [0, C): NaN, never a wild read
            const T fill = from_acc<T>(y == ignore_index ? A(0) : A(0) / A(0));
            for (int j = threadIdx.x; j < C; j += XENT_THREADS) gr[j] = fill;
            continue;
        }
        const int target_class = (int)y;
        const A scale = to_acc(grad_loss[r]);
        const A w_y = weight ? to_acc(weight[target_class]) : A(1);
        for (int j = threadIdx.x; j < C; j += XENT_THREADS) {
            const A p = exp(to_acc(lpr[j]));
            A g = (p - (j == target_class ? A(1) : A(0))) * w_y;
            if (eps != A(0)) {
                const A w_j = weight ? to_acc(weight[j]) : A(1);
                g = keep * g + eps_per_class * (p * total - w_j);
            }
            gr[j] = from_acc<T>(g * scale);
        }
    }
}

#define SOFTMAX_CROSS_ENTROPY_FORWARD(sfx, T)                                                     \
    __global__ void softmax_cross_entropy_forward_##sfx(const T* x, T* lp, const long long* target, \
                                                        const T* weight, T* loss, long long rows, \
                                                        int C, long long ignore_index,            \
                                                        double label_smoothing) {                 \
        log_softmax_xent_impl<T>(x, lp, target, weight, loss, rows, C, ignore_index,              \
                                 label_smoothing);                                                \
    }
#define SOFTMAX_CROSS_ENTROPY_BACKWARD(sfx, T)                                                    \
    __global__ void softmax_cross_entropy_backward_##sfx(const T* lp, const long long* target,    \
                                                         const T* grad_loss, const T* weight,     \
                                                         T* grad, long long rows, int C,          \
                                                         long long ignore_index,                  \
                                                         double label_smoothing) {                \
        xent_backward_impl<T>(lp, target, grad_loss, weight, grad, rows, C, ignore_index,         \
                              label_smoothing);                                                   \
    }
#define LOG_SOFTMAX_FORWARD(sfx, T)                                                               \
    __global__ void log_softmax_forward_##sfx(const T* x, T* lp, long long rows, int C) {         \
        log_softmax_xent_impl<T>(x, lp, nullptr, nullptr, nullptr, rows, C, -100, 0.0);           \
    }

extern "C" {
TF_FLOAT_TYPES(SOFTMAX_CROSS_ENTROPY_FORWARD)
TF_FLOAT_TYPES(SOFTMAX_CROSS_ENTROPY_BACKWARD)
TF_FLOAT_TYPES(LOG_SOFTMAX_FORWARD)
}
