// Fused optimizer updates (tinyflow/kernels/optim.py is the reference), in every floating dtype.
//
// Per tensor (sgd_momentum_update, adam_update): one launch updates one parameter; the
// gradient, the state and the parameter are each read once and written once, instead of the
// five or six full passes that the same update costs as separate array expressions.
//
// Multi-tensor (sgd_multi_tensor_update, adam_multi_tensor_update): one launch updates every
// parameter of a dtype, as PyTorch's foreach path does. The tensors come as a device table
// (tinyflow_cuda/kernels/optim.py builds and caches it):
//
//   table[r * num_tensors + t]   row r's pointer for tensor t (0 for an absent state)
//   table[rows * num_tensors + t]  the element count of tensor t (each below 2^31)
//   table[(rows + 1) * num_tensors + t]  the first chunk of tensor t (a prefix sum; + 1 entry)
//   grads[t]                      tensor t's gradient (its own table: grads are new each step)
//
// Block b updates chunk b - first_chunk[t] of the tensor t found by a binary search over the
// first chunks (a few uniform loads per block): the grid is exactly the chunks, no block idles.
// A half-precision parameter (f16/bf16) steps in fp32: its states are fp32 (acc_t<T>) and its
// master weight is param + residual (an fp32 row), rounded back once per step.
//
// A CUDA graph replays its kernels with the arguments they were captured with, so inside a
// captured step the multi-tensor kernels read what changes from step to step from device memory:
//   scalars (non-null): the float64 hyper-parameters of this step, which tinyflow/capture.py
//     refills before each replay (SGD: lr, momentum, dampening, weight_decay; Adam: lr, beta1,
//     beta2, eps, weight_decay, step_size, bias2_sqrt), replacing the scalar arguments;
//   found_inf (non-null): GradScaler's overflow flag (fp32); non-zero skips the whole update.
// Null pointers: the scalar arguments, and no skip (the eager path).
#include "common.cuh"

// Whether GradScaler found an inf/NaN gradient this step (then no tensor is updated).
__device__ __forceinline__ bool skip_step(const float* found_inf) {
    return found_inf != nullptr && *found_inf != 0.0f;
}

// PyTorch's SGD on one element of the master weight p with gradient g; *buf is the momentum
// buffer (S: the state's storage type) or null without momentum. dampening_c = 1 - dampening.
// d = g + wd * p; buf = momentum * buf + (1 - dampening) * d (buf = d on the first step);
// d = nesterov ? d + momentum * buf : buf; p -= lr * d. Returns the new p.
template <typename A, typename S>
__device__ __forceinline__ A sgd_step(A p, A g, S* buf, A lr, A momentum, A dampening_c, A wd,
                                      int nesterov, int first_step) {
    if (wd != A(0)) g = g + p * wd;
    if (momentum != A(0)) {
        // PyTorch starts the buffer at the first gradient (no dampening on that step).
        const S stored = from_acc<S>(first_step ? g : to_acc(*buf) * momentum + g * dampening_c);
        *buf = stored;
        const A b = to_acc(stored);
        g = nesterov ? g + b * momentum : b;
    }
    return p + g * -lr;
}

// Adam's scalars in the compute type A, derived once per thread from the host's float64
// arguments exactly as the reference derives them in Python (float64, then rounded to A).
template <typename A>
struct AdamScalars {
    A weight, weight_c, beta2, beta2_c, eps, weight_decay, decay, step_size, bias2_sqrt;
    int decoupled, amsgrad;
    __device__ AdamScalars(double lr, double beta1, double beta2_, double eps_, double wd,
                           double step_size_, double bias2_sqrt_, int decoupled_, int amsgrad_)
        : weight(A(1.0 - beta1)), weight_c(A(1.0 - (1.0 - beta1))), beta2(A(beta2_)),
          beta2_c(A(1.0 - beta2_)), eps(A(eps_)), weight_decay(A(wd)), decay(A(1.0 - lr * wd)),
          step_size(A(step_size_)), bias2_sqrt(A(bias2_sqrt_)), decoupled(decoupled_),
          amsgrad(amsgrad_) {}
};

// PyTorch's Adam / AdamW on one element, in the reference's exact order of operations:
// g += wd * p (Adam) or p *= 1 - lr * wd (AdamW); m = lerp(m, g, 1 - beta1);
// v = beta2 * v + (1 - beta2) * g * g; vmax = max(vmax, v) (amsgrad);
// p -= step_size * m / (sqrt(v or vmax) / bias2_sqrt + eps). Returns the new p.
template <typename A, typename S>
__device__ __forceinline__ A adam_step(A p, A g, S* m, S* v, S* vmax, const AdamScalars<A>& s) {
    if (s.weight_decay != A(0)) {
        if (s.decoupled) {
            p = p * s.decay;
        } else {
            g = g + p * s.weight_decay;
        }
    }
    // torch.lerp's two-sided formula, so that results match the reference bit for bit
    const A m0 = to_acc(*m);
    const S m_stored = from_acc<S>(s.weight < A(0.5) ? m0 + (g - m0) * s.weight
                                                      : g - (g - m0) * s.weight_c);
    const S v_stored = from_acc<S>(to_acc(*v) * s.beta2 + g * g * s.beta2_c);
    *m = m_stored;
    *v = v_stored;
    A denom_v = to_acc(v_stored);
    if (s.amsgrad) {
        const A old = to_acc(*vmax);
        denom_v = old > denom_v ? old : denom_v;
        *vmax = from_acc<S>(denom_v);
        denom_v = to_acc(*vmax);
    }
    const A denom = sqrt(denom_v) / s.bias2_sqrt + s.eps;
    return p + (to_acc(m_stored) / denom) * -s.step_size;
}

// ---- per tensor: every array in T, computed in acc_t<T> -----------------------------------------
template <typename T>
__device__ void sgd_impl(T* __restrict__ param, const T* __restrict__ grad, T* __restrict__ buf,
                         double lr, double momentum, double dampening, double weight_decay,
                         int nesterov, int first_step, long long n) {
    using A = acc_t<T>;
    FOR_EACH_INDEX(i, n) {
        const A p = sgd_step<A, T>(to_acc(param[i]), to_acc(grad[i]), buf ? buf + i : nullptr,
                                   A(lr), A(momentum), A(1.0 - dampening), A(weight_decay),
                                   nesterov, first_step);
        param[i] = from_acc<T>(p);
    }
}

template <typename T>
__device__ void adam_impl(T* __restrict__ param, const T* __restrict__ grad, T* __restrict__ m,
                          T* __restrict__ v, T* __restrict__ vmax, int amsgrad, double lr,
                          double beta1, double beta2, double eps, double weight_decay,
                          int decoupled, double step_size, double bias2_sqrt, long long n) {
    using A = acc_t<T>;
    const AdamScalars<A> s(lr, beta1, beta2, eps, weight_decay, step_size, bias2_sqrt, decoupled,
                           amsgrad);
    FOR_EACH_INDEX(i, n) {
        const A p = adam_step<A, T>(to_acc(param[i]), to_acc(grad[i]), m + i, v + i,
                                    amsgrad ? vmax + i : nullptr, s);
        param[i] = from_acc<T>(p);
    }
}

// ---- multi-tensor ------------------------------------------------------------------------------
struct TensorChunk {
    int tensor;  // which tensor of the table
    int begin;   // its first element of this block
    int end;     // one past its last
};

// This block's chunk: the last tensor whose first chunk is at or before blockIdx.x.
__device__ __forceinline__ TensorChunk find_chunk(const unsigned long long* table, int rows,
                                                  int num_tensors, int chunk) {
    const unsigned long long* sizes = table + rows * num_tensors;
    const unsigned long long* first_chunk = sizes + num_tensors;
    const unsigned long long block = blockIdx.x;
    int lo = 0, hi = num_tensors - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) >> 1;
        if (first_chunk[mid] <= block) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    const int n = (int)sizes[lo];
    const int begin = (int)(block - first_chunk[lo]) * chunk;
    return {lo, begin, n - begin < chunk ? n : begin + chunk};
}

template <typename T>
__device__ __forceinline__ T* table_pointer(const unsigned long long* table, int row,
                                            int num_tensors, int tensor) {
    return reinterpret_cast<T*>(table[row * num_tensors + tensor]);
}

// The master weight of element i (param + residual for a half parameter) and, after the step,
// its write-back: rounded into param, the remainder into residual.
template <typename T>
__device__ __forceinline__ acc_t<T> load_master(const T* param, const acc_t<T>* residual, int i) {
    const acc_t<T> p = to_acc(param[i]);
    return residual ? p + residual[i] : p;
}
template <typename T>
__device__ __forceinline__ void store_master(T* param, acc_t<T>* residual, int i, acc_t<T> p) {
    const T rounded = from_acc<T>(p);
    param[i] = rounded;
    if (residual) residual[i] = p - to_acc(rounded);
}

// A captured step's hyper-parameters (``scalars`` non-null: what capture.py wrote for this replay)
// replace the launch's arguments, in order: uniform loads, once per thread.
template <int N>
__device__ __forceinline__ void replay_scalars(const double* __restrict__ scalars,
                                               double* const (&params)[N]) {
    if (scalars == nullptr) return;
#pragma unroll
    for (int k = 0; k < N; ++k) *params[k] = scalars[k];
}

// The skeleton of both multi-tensor updates: nothing where GradScaler found an overflow, else
// this block's chunk of one tensor of the table (``rows`` rows: param, the optimizer's states, the
// residual last), each element's master weight stepped by ``step`` with its (maximized) gradient
// and the tensor's state rows, then written back.
template <typename T, typename Step>
__device__ __forceinline__ void multi_tensor_sweep(const unsigned long long* __restrict__ table,
                                                   const unsigned long long* __restrict__ grads,
                                                   int rows, int num_tensors, int chunk,
                                                   int maximize, const float* found_inf,
                                                   const Step& step) {
    using A = acc_t<T>;
    if (skip_step(found_inf)) return;
    const TensorChunk c = find_chunk(table, rows, num_tensors, chunk);
    T* param = table_pointer<T>(table, 0, num_tensors, c.tensor);
    A* residual = table_pointer<A>(table, rows - 1, num_tensors, c.tensor);
    const T* grad = reinterpret_cast<const T*>(grads[c.tensor]);
    const typename Step::States states = step.states(table, num_tensors, c.tensor);
    for (int i = c.begin + (int)threadIdx.x; i < c.end; i += (int)blockDim.x) {
        const A g = to_acc(grad[i]);
        store_master(param, residual, i, step(load_master(param, residual, i), maximize ? -g : g,
                                              states, i));
    }
}

// SGD's step for the sweep; table rows: param, momentum_buffer, residual.
template <typename A>
struct SgdMulti {
    A lr, momentum, dampening_c, weight_decay;
    int nesterov, first_step;
    struct States {
        A* buf;  // null without momentum
    };
    __device__ States states(const unsigned long long* table, int num_tensors, int tensor) const {
        return States{table_pointer<A>(table, 1, num_tensors, tensor)};
    }
    __device__ A operator()(A p, A g, const States& s, int i) const {
        return sgd_step<A, A>(p, g, s.buf ? s.buf + i : nullptr, lr, momentum, dampening_c,
                              weight_decay, nesterov, first_step);
    }
};

// Adam's; table rows: param, exp_avg, exp_avg_sq, max_exp_avg_sq, residual.
template <typename A>
struct AdamMulti {
    AdamScalars<A> s;
    struct States {
        A *m, *v, *vmax;
    };
    __device__ States states(const unsigned long long* table, int num_tensors, int tensor) const {
        return States{table_pointer<A>(table, 1, num_tensors, tensor),
                      table_pointer<A>(table, 2, num_tensors, tensor),
                      table_pointer<A>(table, 3, num_tensors, tensor)};
    }
    __device__ A operator()(A p, A g, const States& st, int i) const {
        return adam_step<A, A>(p, g, st.m + i, st.v + i, s.amsgrad ? st.vmax + i : nullptr, s);
    }
};

template <typename T>
__device__ void sgd_multi_impl(const unsigned long long* __restrict__ table,
                               const unsigned long long* __restrict__ grads, int num_tensors,
                               int chunk, double lr, double momentum, double dampening,
                               double weight_decay, int nesterov, int maximize, int first_step,
                               const double* __restrict__ scalars,
                               const float* __restrict__ found_inf) {
    using A = acc_t<T>;
    replay_scalars(scalars, {&lr, &momentum, &dampening, &weight_decay});
    const SgdMulti<A> step{A(lr), A(momentum), A(1.0 - dampening), A(weight_decay), nesterov,
                           first_step};
    multi_tensor_sweep<T>(table, grads, 3, num_tensors, chunk, maximize, found_inf, step);
}

template <typename T>
__device__ void adam_multi_impl(const unsigned long long* __restrict__ table,
                                const unsigned long long* __restrict__ grads, int num_tensors,
                                int chunk, double lr, double beta1, double beta2, double eps,
                                double weight_decay, int amsgrad, int decoupled, int maximize,
                                double step_size, double bias2_sqrt,
                                const double* __restrict__ scalars,
                                const float* __restrict__ found_inf) {
    using A = acc_t<T>;
    replay_scalars(scalars, {&lr, &beta1, &beta2, &eps, &weight_decay, &step_size, &bias2_sqrt});
    const AdamMulti<A> step{AdamScalars<A>(lr, beta1, beta2, eps, weight_decay, step_size,
                                           bias2_sqrt, decoupled, amsgrad)};
    multi_tensor_sweep<T>(table, grads, 5, num_tensors, chunk, maximize, found_inf, step);
}

// GradScaler.update on the device (PyTorch's _amp_update_scale_): after an overflow the scale
// backs off and the tracker restarts; after growth_interval clean steps in a row the scale grows
// (unless that overflows the scale's dtype) and the tracker restarts. One thread; the scale and
// the tracker stay on the device, so the update needs no host read and replays in a CUDA graph.
template <typename T>
__device__ void amp_update_scale_impl(T* scale, int* growth_tracker, const float* found_inf,
                                      double growth_factor, double backoff_factor,
                                      int growth_interval) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    const acc_t<T> current = to_acc(*scale);
    if (*found_inf != 0.0f) {
        *scale = from_acc<T>((acc_t<T>)((double)current * backoff_factor));
        *growth_tracker = 0;
        return;
    }
    const int clean = *growth_tracker + 1;
    if (clean >= growth_interval) {
        const T grown = from_acc<T>((acc_t<T>)((double)current * growth_factor));
        const acc_t<T> g = to_acc(grown);
        if (g - g == acc_t<T>(0)) *scale = grown;  // finite (inf - inf and NaN - NaN are NaN)
        *growth_tracker = 0;
    } else {
        *growth_tracker = clean;
    }
}

#define OPTIM_KERNELS(sfx, T)                                                                     \
    __global__ void sgd_momentum_update_##sfx(T* param, const T* grad, T* buf, double lr,        \
                                              double momentum, double dampening,                \
                                              double weight_decay, int nesterov, int first_step, \
                                              long long n) {                                      \
        sgd_impl<T>(param, grad, buf, lr, momentum, dampening, weight_decay, nesterov,            \
                    first_step, n);                                                               \
    }                                                                                             \
    __global__ void adam_update_##sfx(T* param, const T* grad, T* m, T* v, T* vmax, int amsgrad, \
                                      double lr, double beta1, double beta2, double eps,         \
                                      double weight_decay, int decoupled, double step_size,      \
                                      double bias2_sqrt, long long n) {                           \
        adam_impl<T>(param, grad, m, v, vmax, amsgrad, lr, beta1, beta2, eps, weight_decay,       \
                     decoupled, step_size, bias2_sqrt, n);                                        \
    }                                                                                             \
    __global__ void sgd_multi_tensor_update_##sfx(                                                \
        const unsigned long long* table, const unsigned long long* grads, int num_tensors,       \
        int chunk, double lr, double momentum, double dampening, double weight_decay,            \
        int nesterov, int maximize, int first_step, const double* scalars,                       \
        const float* found_inf) {                                                                 \
        sgd_multi_impl<T>(table, grads, num_tensors, chunk, lr, momentum, dampening,              \
                          weight_decay, nesterov, maximize, first_step, scalars, found_inf);      \
    }                                                                                             \
    __global__ void adam_multi_tensor_update_##sfx(                                               \
        const unsigned long long* table, const unsigned long long* grads, int num_tensors,       \
        int chunk, double lr, double beta1, double beta2, double eps, double weight_decay,       \
        int amsgrad, int decoupled, int maximize, double step_size, double bias2_sqrt,           \
        const double* scalars, const float* found_inf) {                                          \
        adam_multi_impl<T>(table, grads, num_tensors, chunk, lr, beta1, beta2, eps,               \
                           weight_decay, amsgrad, decoupled, maximize, step_size, bias2_sqrt,     \
                           scalars, found_inf);                                                   \
    }
#define AMP_KERNELS(sfx, T)                                                                       \
    __global__ void amp_update_scale_##sfx(T* scale, int* growth_tracker, const float* found_inf, \
                                           double growth_factor, double backoff_factor,          \
                                           int growth_interval) {                                 \
        amp_update_scale_impl<T>(scale, growth_tracker, found_inf, growth_factor, backoff_factor,  \
                                 growth_interval);                                                \
    }
extern "C" {
TF_FLOAT_TYPES(AMP_KERNELS)
TF_FLOAT_TYPES(OPTIM_KERNELS)
}
