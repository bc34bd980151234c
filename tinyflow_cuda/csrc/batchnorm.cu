// Batch normalisation over the channel axis of (N, C, L) (L = the product of the spatial dims) in
// every floating dtype; tinyflow/kernels/batchnorm.py is the reference and
// tinyflow_cuda/kernels/batchnorm.py launches these. One BatchNorm layer costs two launches
// forward in training (one in eval) and two backward, against ~25 CuPy kernels unfused:
//
//   forward   batch_norm_stats      per-channel partial moments (count, mean, M2) of a few blocks
//             batch_norm_normalize  y = (x - mean) * weight * invstd + bias; each block combines its
//                                   channel's partials first, and the channel's first block writes
//                                   save_mean / save_invstd and updates the running statistics
//   backward  batch_norm_backward_reduce  per-channel partial sum(g) and sum(g * (x - mean))
//             batch_norm_backward_elemt   gx from the combined sums; the first block of a channel
//                                         writes gweight = sum(g * xhat) and gbias = sum(g)
//
// Layout: a 3-D grid (tiles of L, channel, groups of images) of 2-D blocks (TX, TY) with
// TX * TY = BN_THREADS and TX the power of two covering L (up to 256): a block's threads read
// TY images' runs of TX consecutive values of one channel, so loads are coalesced and no thread
// divides an index (the channel is the block's, the image and position are loop counters). Each
// reduction block writes one partial per channel (P = gridDim.x * gridDim.z of them, at most
// BN_THREADS); every block of the consumer kernel combines its channel's P partials in the same
// order, so all of them normalise with bit-identical statistics and no third launch is needed.
//
// Statistics: each thread accumulates shifted sums about its own first value (no division per
// element, and no cancellation of a large mean), turns them into (count, mean, M2) once, and the
// block combines those pairwise with Chan's formula (the parallel form of Welford's). fp16 / bf16
// load to fp32 (to_acc) and all statistics, weights and running statistics are acc_t<T> (fp32
// for the half types, as PyTorch keeps them under autocast); every stored value of T is rounded
// once (from_acc). Indices are 32-bit: the host launches tensors below 2^31 elements.
#include "common.cuh"

#define BN_THREADS 256

namespace bn_detail {

// Moments of a set of values: how many, their mean, and M2 = the sum of squared deviations.
template <typename A>
struct Moments {
    A n, mean, m2;
};

// The moments of the union of two disjoint sets (Chan, Golub and LeVeque): exact in exact
// arithmetic, and stable because only the difference of the two means is squared.
template <typename A>
__device__ __forceinline__ Moments<A> combine(Moments<A> a, Moments<A> b) {
    if (b.n == A(0)) return a;
    if (a.n == A(0)) return b;
    const A n = a.n + b.n;
    const A delta = b.mean - a.mean;
    const A wb = b.n / n;
    return Moments<A>{n, a.mean + delta * wb, a.m2 + b.m2 + delta * delta * a.n * wb};
}

__device__ __forceinline__ int flat_thread() { return threadIdx.y * blockDim.x + threadIdx.x; }

// Combine every thread's moments into one (each thread gets it). The block has BN_THREADS
// threads (the host launches TX * TY = BN_THREADS); the pairing is fixed, so the result is the
// same in every block that combines the same inputs.
template <typename A>
__device__ Moments<A> block_moments(Moments<A> m, A* s_n, A* s_mean, A* s_m2) {
    const int tid = flat_thread();
    s_n[tid] = m.n;
    s_mean[tid] = m.mean;
    s_m2[tid] = m.m2;
    __syncthreads();
    for (int stride = BN_THREADS / 2; stride > 0; stride >>= 1) {
        if (tid < stride) {
            const Moments<A> r = combine(Moments<A>{s_n[tid], s_mean[tid], s_m2[tid]},
                                         Moments<A>{s_n[tid + stride], s_mean[tid + stride],
                                                    s_m2[tid + stride]});
            s_n[tid] = r.n;
            s_mean[tid] = r.mean;
            s_m2[tid] = r.m2;
        }
        __syncthreads();
    }
    const Moments<A> result{s_n[0], s_mean[0], s_m2[0]};
    __syncthreads();  // the arrays are reused by the next channel
    return result;
}

// Sum two values over the block (each thread gets both sums); fixed pairing, as above.
template <typename A>
__device__ void block_sum2(A& a, A& b, A* s_a, A* s_b) {
    const int tid = flat_thread();
    s_a[tid] = a;
    s_b[tid] = b;
    __syncthreads();
    for (int stride = BN_THREADS / 2; stride > 0; stride >>= 1) {
        if (tid < stride) {
            s_a[tid] += s_a[tid + stride];
            s_b[tid] += s_b[tid + stride];
        }
        __syncthreads();
    }
    a = s_a[0];
    b = s_b[0];
    __syncthreads();
}

// The loop bounds every kernel shares: this thread's first image and position, and the steps.
struct Walk {
    int n0, n_step, l0, l_step;
};

__device__ __forceinline__ Walk walk() {
    return Walk{(int)(blockIdx.z * blockDim.y + threadIdx.y), (int)(blockDim.y * gridDim.z),
                (int)(blockIdx.x * blockDim.x + threadIdx.x), (int)(blockDim.x * gridDim.x)};
}

// Whether this block is the first of its channel (it writes the channel's per-channel outputs).
__device__ __forceinline__ bool first_block() { return blockIdx.x == 0 && blockIdx.z == 0; }

// ---- forward ---------------------------------------------------------------------------------

// partial[c, p] = (count, mean, M2) of the values of channel c that block p (of the P =
// gridDim.x * gridDim.z blocks of the channel) reads. partial is (C, P, 3).
template <typename T>
__device__ void stats_impl(const T* __restrict__ x, acc_t<T>* __restrict__ partial, int N, int C,
                           int L) {
    using A = acc_t<T>;
    TF_SHARED(A, s_n, BN_THREADS);
    TF_SHARED(A, s_mean, BN_THREADS);
    TF_SHARED(A, s_m2, BN_THREADS);
    const Walk w = walk();
    const int P = gridDim.x * gridDim.z, p = blockIdx.z * gridDim.x + blockIdx.x;
    const int image = C * L;
    for (int c = blockIdx.y; c < C; c += gridDim.y) {
        const T* xc = x + c * L;
        A shift = A(0), s1 = A(0), s2 = A(0);
        int count = 0;
        if (w.n0 < N && w.l0 < L) shift = to_acc(xc[w.n0 * image + w.l0]);
        for (int n = w.n0; n < N; n += w.n_step) {
            const T* row = xc + n * image;
            for (int l = w.l0; l < L; l += w.l_step) {
                const A d = to_acc(row[l]) - shift;
                s1 += d;
                s2 += d * d;
                ++count;
            }
        }
        Moments<A> m{A(count), A(0), A(0)};
        if (count > 0) {
            const A mean_d = s1 / A(count);  // once per thread and channel
            const A m2 = s2 - s1 * mean_d;
            m.mean = shift + mean_d;
            m.m2 = m2 > A(0) ? m2 : A(0);
        }
        m = block_moments(m, s_n, s_mean, s_m2);
        if (flat_thread() == 0) {
            A* out = partial + (c * P + p) * 3;
            out[0] = m.n;
            out[1] = m.mean;
            out[2] = m.m2;
        }
    }
}

// y = (x - mean) * (weight * invstd) + bias per channel. Training (partial given): mean and the
// biased variance come from the P partials of the channel, and the channel's first block updates
// running_mean / running_var (either may be null) with momentum, the variance made unbiased by
// ``unbias`` = M / (M - 1). Eval (partial null): mean and var are running_mean / running_var.
// Either way the first block writes save_mean and save_invstd. weight and bias may be null.
template <typename T>
__device__ void normalize_impl(const T* __restrict__ x, T* __restrict__ y,
                               const acc_t<T>* __restrict__ partial, int P,
                               acc_t<T>* __restrict__ running_mean, acc_t<T>* __restrict__ running_var,
                               const acc_t<T>* __restrict__ weight, const acc_t<T>* __restrict__ bias,
                               acc_t<T>* __restrict__ save_mean, acc_t<T>* __restrict__ save_invstd,
                               int N, int C, int L, double momentum, double eps, double unbias) {
    using A = acc_t<T>;
    TF_SHARED(A, s_n, BN_THREADS);
    TF_SHARED(A, s_mean, BN_THREADS);
    TF_SHARED(A, s_m2, BN_THREADS);
    const Walk w = walk();
    const int tid = flat_thread(), image = C * L;
    for (int c = blockIdx.y; c < C; c += gridDim.y) {
        A mean, var;
        if (partial != nullptr) {  // uniform over the grid: every thread reaches the barriers
            Moments<A> m{A(0), A(0), A(0)};
            if (tid < P) {
                const A* in = partial + (c * P + tid) * 3;
                m = Moments<A>{in[0], in[1], in[2]};
            }
            m = block_moments(m, s_n, s_mean, s_m2);
            mean = m.mean;
            var = m.m2 / m.n;  // biased, for normalising
            if (first_block() && tid == 0) {
                const A keep = A(1.0 - momentum), take = A(momentum);
                if (running_mean != nullptr) running_mean[c] = running_mean[c] * keep + take * mean;
                if (running_var != nullptr)
                    running_var[c] = running_var[c] * keep + take * (var * A(unbias));
            }
        } else {
            mean = running_mean[c];
            var = running_var[c];
        }
        const A invstd = A(1) / sqrt(var + A(eps));
        if (first_block() && tid == 0) {
            save_mean[c] = mean;
            save_invstd[c] = invstd;
        }
        const A scale = weight != nullptr ? weight[c] * invstd : invstd;
        const A shift = bias != nullptr ? bias[c] : A(0);
        const T* xc = x + c * L;
        T* yc = y + c * L;
        for (int n = w.n0; n < N; n += w.n_step) {
            const int row = n * image;
            for (int l = w.l0; l < L; l += w.l_step)
                yc[row + l] = from_acc<T>((to_acc(xc[row + l]) - mean) * scale + shift);
        }
    }
}

// ---- backward --------------------------------------------------------------------------------

// partial[c, p] = (sum g, sum g * (x - mean[c])) over the values of channel c that block p reads;
// partial is (C, P, 2).
template <typename T>
__device__ void backward_reduce_impl(const T* __restrict__ gout, const T* __restrict__ x,
                                     const acc_t<T>* __restrict__ mean,
                                     acc_t<T>* __restrict__ partial, int N, int C, int L) {
    using A = acc_t<T>;
    TF_SHARED(A, s_a, BN_THREADS);
    TF_SHARED(A, s_b, BN_THREADS);
    const Walk w = walk();
    const int P = gridDim.x * gridDim.z, p = blockIdx.z * gridDim.x + blockIdx.x;
    const int image = C * L;
    for (int c = blockIdx.y; c < C; c += gridDim.y) {
        const A m = mean[c];
        const T* gc = gout + c * L;
        const T* xc = x + c * L;
        A sum_g = A(0), sum_gd = A(0);
        for (int n = w.n0; n < N; n += w.n_step) {
            const int row = n * image;
            for (int l = w.l0; l < L; l += w.l_step) {
                const A g = to_acc(gc[row + l]);
                sum_g += g;
                sum_gd += g * (to_acc(xc[row + l]) - m);
            }
        }
        block_sum2(sum_g, sum_gd, s_a, s_b);
        if (flat_thread() == 0) {
            A* out = partial + (c * P + p) * 2;
            out[0] = sum_g;
            out[1] = sum_gd;
        }
    }
}

// The sums of the P partials of channel c (partial null: none, both 0), then per channel
// gweight = sum(g * xhat) and gbias = sum(g) (first block; either may be null) and, when gx is
// given, gx = weight * invstd * (g - sum(g) / M - xhat * sum(g * xhat) / M) in training
// (inv_count = 1 / M), gx = weight * invstd * g in eval.
template <typename T>
__device__ void backward_elemt_impl(const T* __restrict__ gout, const T* __restrict__ x,
                                    const acc_t<T>* __restrict__ mean,
                                    const acc_t<T>* __restrict__ invstd,
                                    const acc_t<T>* __restrict__ weight,
                                    const acc_t<T>* __restrict__ partial, int P, T* __restrict__ gx,
                                    acc_t<T>* __restrict__ gweight, acc_t<T>* __restrict__ gbias,
                                    int N, int C, int L, int training, double inv_count) {
    using A = acc_t<T>;
    TF_SHARED(A, s_a, BN_THREADS);
    TF_SHARED(A, s_b, BN_THREADS);
    const Walk w = walk();
    const int tid = flat_thread(), image = C * L;
    for (int c = blockIdx.y; c < C; c += gridDim.y) {
        A sum_g = A(0), sum_gd = A(0);
        if (partial != nullptr) {  // uniform over the grid
            if (tid < P) {
                sum_g = partial[(c * P + tid) * 2];
                sum_gd = partial[(c * P + tid) * 2 + 1];
            }
            block_sum2(sum_g, sum_gd, s_a, s_b);
        }
        const A m = mean[c], istd = invstd[c];
        const A sum_gxhat = sum_gd * istd;
        if (first_block() && tid == 0) {
            if (gweight != nullptr) gweight[c] = sum_gxhat;
            if (gbias != nullptr) gbias[c] = sum_g;
        }
        if (gx == nullptr) continue;
        const A k = weight != nullptr ? weight[c] * istd : istd;
        // training: gx = k * (g - a - (x - mean) * b) with a = mean of g, b = invstd * mean of g*xhat
        const A a = training ? sum_g * A(inv_count) : A(0);
        const A b = training ? sum_gxhat * A(inv_count) * istd : A(0);
        const T* gc = gout + c * L;
        const T* xc = x + c * L;
        T* oc = gx + c * L;
        for (int n = w.n0; n < N; n += w.n_step) {
            const int row = n * image;
            for (int l = w.l0; l < L; l += w.l_step) {
                const A d = to_acc(xc[row + l]) - m;
                oc[row + l] = from_acc<T>(k * (to_acc(gc[row + l]) - a - d * b));
            }
        }
    }
}

}  // namespace bn_detail

// One entry point per dtype (TF_FLOAT_TYPES). Pointers to the per-channel arrays (statistics,
// weights, running statistics, partials, parameter gradients) are float for the half types.
#define BATCH_NORM_STATS(sfx, T)                                                                  \
    __global__ void batch_norm_stats_##sfx(const T* x, acc_t<T>* partial, int N, int C, int L) { \
        bn_detail::stats_impl<T>(x, partial, N, C, L);                                            \
    }
#define BATCH_NORM_NORMALIZE(sfx, T)                                                              \
    __global__ void batch_norm_normalize_##sfx(                                                   \
        const T* x, T* y, const acc_t<T>* partial, int P, acc_t<T>* running_mean,                 \
        acc_t<T>* running_var, const acc_t<T>* weight, const acc_t<T>* bias, acc_t<T>* save_mean, \
        acc_t<T>* save_invstd, int N, int C, int L, double momentum, double eps, double unbias) { \
        bn_detail::normalize_impl<T>(x, y, partial, P, running_mean, running_var, weight, bias,   \
                                     save_mean, save_invstd, N, C, L, momentum, eps, unbias);     \
    }
#define BATCH_NORM_BACKWARD_REDUCE(sfx, T)                                                        \
    __global__ void batch_norm_backward_reduce_##sfx(const T* gout, const T* x,                   \
                                                     const acc_t<T>* mean, acc_t<T>* partial,     \
                                                     int N, int C, int L) {                       \
        bn_detail::backward_reduce_impl<T>(gout, x, mean, partial, N, C, L);                      \
    }
#define BATCH_NORM_BACKWARD_ELEMT(sfx, T)                                                         \
    __global__ void batch_norm_backward_elemt_##sfx(                                              \
        const T* gout, const T* x, const acc_t<T>* mean, const acc_t<T>* invstd,                  \
        const acc_t<T>* weight, const acc_t<T>* partial, int P, T* gx, acc_t<T>* gweight,         \
        acc_t<T>* gbias, int N, int C, int L, int training, double inv_count) {                   \
        bn_detail::backward_elemt_impl<T>(gout, x, mean, invstd, weight, partial, P, gx, gweight, \
                                          gbias, N, C, L, training, inv_count);                   \
    }

extern "C" {
TF_FLOAT_TYPES(BATCH_NORM_STATS)
TF_FLOAT_TYPES(BATCH_NORM_NORMALIZE)
TF_FLOAT_TYPES(BATCH_NORM_BACKWARD_REDUCE)
TF_FLOAT_TYPES(BATCH_NORM_BACKWARD_ELEMT)
}
