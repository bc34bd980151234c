// Fused optimizer updates over flat parameter buffers (tinyflow/kernels/optim.py is the
// reference). One launch updates every parameter of a bucket: the gradient, the optimizer
// state and the parameter are each read once and written once, instead of the five or six
// full passes that the same update costs as separate array expressions.
#include "common.cuh"

// PyTorch's SGD: d = grad + wd * p; buf = momentum * buf + (1 - dampening) * d (buf = d on
// the first step); d = nesterov ? d + momentum * buf : buf (when momentum != 0); p -= lr * d.
template <typename T>
__device__ void sgd_impl(T* __restrict__ param, const T* __restrict__ grad, T* __restrict__ buf,
                         T lr, T momentum, T dampening, T weight_decay, int nesterov,
                         int first_step, long long n) {
    FOR_EACH_INDEX(i, n) {
        T g = grad[i] + param[i] * weight_decay;
        if (momentum != T(0)) {
            // PyTorch starts the buffer at the first gradient (no dampening on that step).
            const T b = first_step ? g : momentum * buf[i] + (T(1) - dampening) * g;
            buf[i] = b;
            g = nesterov ? g + momentum * b : b;
        }
        param[i] -= lr * g;
    }
}

// PyTorch's Adam / AdamW, in the reference's exact order of operations:
// g += wd * p (Adam) or p *= 1 - lr * wd (AdamW); m = lerp(m, g, 1 - beta1);
// v = beta2 * v + (1 - beta2) * g * g; vmax = max(vmax, v) (amsgrad);
// p -= step_size * m / (sqrt(v or vmax) / bias2_sqrt + eps).
// step_size = lr / (1 - beta1^t) and bias2_sqrt = sqrt(1 - beta2^t) come from the host.
template <typename T>
__device__ void adam_impl(T* __restrict__ param, const T* __restrict__ grad, T* __restrict__ m,
                          T* __restrict__ v, T* __restrict__ vmax, int amsgrad, T lr, T beta1,
                          T beta2, T eps, T weight_decay, int decoupled, T step_size,
                          T bias2_sqrt, long long n) {
    const T weight = T(1) - beta1;
    FOR_EACH_INDEX(i, n) {
        T g = grad[i];
        T p = param[i];
        if (weight_decay != T(0)) {
            if (decoupled) {
                p *= T(1) - lr * weight_decay;
            } else {
                g += p * weight_decay;
            }
        }
        // torch.lerp's two-sided formula, so that results match the reference bit for bit
        const T mi = weight < T(0.5) ? m[i] + weight * (g - m[i]) : g - (g - m[i]) * (T(1) - weight);
        const T vi = beta2 * v[i] + g * g * (T(1) - beta2);
        m[i] = mi;
        v[i] = vi;
        T denom_v = vi;
        if (amsgrad) {
            denom_v = vmax[i] > vi ? vmax[i] : vi;
            vmax[i] = denom_v;
        }
        const T denom = sqrt(denom_v) / bias2_sqrt + eps;
        param[i] = p + (mi / denom) * -step_size;
    }
}

extern "C" {
__global__ void sgd_momentum_update_f32(float* param, const float* grad, float* buf, float lr,
                                        float momentum, float dampening, float weight_decay,
                                        int nesterov, int first_step, long long n) {
    sgd_impl<float>(param, grad, buf, lr, momentum, dampening, weight_decay, nesterov,
                    first_step, n);
}
__global__ void sgd_momentum_update_f64(double* param, const double* grad, double* buf,
                                        double lr, double momentum, double dampening,
                                        double weight_decay, int nesterov, int first_step,
                                        long long n) {
    sgd_impl<double>(param, grad, buf, lr, momentum, dampening, weight_decay, nesterov,
                     first_step, n);
}
__global__ void adam_update_f32(float* param, const float* grad, float* m, float* v, float* vmax,
                                int amsgrad, float lr, float beta1, float beta2, float eps,
                                float weight_decay, int decoupled, float step_size,
                                float bias2_sqrt, long long n) {
    adam_impl<float>(param, grad, m, v, vmax, amsgrad, lr, beta1, beta2, eps, weight_decay,
                     decoupled, step_size, bias2_sqrt, n);
}
__global__ void adam_update_f64(double* param, const double* grad, double* m, double* v,
                                double* vmax, int amsgrad, double lr, double beta1, double beta2,
                                double eps, double weight_decay, int decoupled, double step_size,
                                double bias2_sqrt, long long n) {
    adam_impl<double>(param, grad, m, v, vmax, amsgrad, lr, beta1, beta2, eps, weight_decay,
                      decoupled, step_size, bias2_sqrt, n);
}
}
