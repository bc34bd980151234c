// Local response normalisation across channels, PyTorch semantics (tinyflow/kernels/lrn.py is
// the reference). x is viewed as (N, C, S) with S the product of the trailing dims.
//   scale[c] = k + alpha / size * sum_{c' = c - size/2 .. c + (size-1)/2} x[c']^2
//   out[c]   = x[c] * scale[c]^-beta
// One thread per element; each sums its `size` channel neighbours (5 in AlexNet), which sit
// S elements apart, so a warp of consecutive spatial positions reads coalesced rows.
#include "common.cuh"

template <typename T>
__device__ void lrn_forward_impl(const T* __restrict__ x, T* __restrict__ out,
                                 T* __restrict__ scale, int N, int C, long long S, int size,
                                 T alpha, T beta, T k) {
    FOR_EACH_INDEX(idx, (long long)N * C * S) {
        const long long s = idx % S;
        const int c = (idx / S) % C;
        const T* xs = x + (idx / (S * C)) * C * S + s;  // channel 0 of this (n, s)
        const int lo = c - size / 2 > 0 ? c - size / 2 : 0;
        const int hi = c + (size - 1) / 2 < C - 1 ? c + (size - 1) / 2 : C - 1;
        T sum = T(0);
        for (int cc = lo; cc <= hi; ++cc) sum += xs[cc * S] * xs[cc * S];
        const T sc = k + alpha / T(size) * sum;
        scale[idx] = sc;
        out[idx] = x[idx] * pow(sc, -beta);
    }
}

// gx[j] = g[j] * scale[j]^-beta - 2 alpha beta / size * x[j] * sum_{c : j in window(c)} g[c] out[c] / scale[c]
template <typename T>
__device__ void lrn_backward_impl(const T* __restrict__ gout, const T* __restrict__ x,
                                  const T* __restrict__ out, const T* __restrict__ scale,
                                  T* __restrict__ gx, int N, int C, long long S, int size, T alpha,
                                  T beta) {
    FOR_EACH_INDEX(idx, (long long)N * C * S) {
        const long long s = idx % S;
        const int c = (idx / S) % C;
        const long long base = (idx / (S * C)) * C * S + s;
        // the channels whose window holds c: c - (size-1)/2 .. c + size/2
        const int lo = c - (size - 1) / 2 > 0 ? c - (size - 1) / 2 : 0;
        const int hi = c + size / 2 < C - 1 ? c + size / 2 : C - 1;
        T back = T(0);
        for (int cc = lo; cc <= hi; ++cc) {
            const long long o = base + cc * S;
            back += gout[o] * out[o] / scale[o];
        }
        gx[idx] = gout[idx] * pow(scale[idx], -beta) -
                  T(2) * alpha * beta / T(size) * x[idx] * back;
    }
}

extern "C" {
__global__ void lrn_forward_f32(const float* x, float* out, float* scale, int N, int C,
                                long long S, int size, float alpha, float beta, float k) {
    lrn_forward_impl<float>(x, out, scale, N, C, S, size, alpha, beta, k);
}
__global__ void lrn_forward_f64(const double* x, double* out, double* scale, int N, int C,
                                long long S, int size, double alpha, double beta, double k) {
    lrn_forward_impl<double>(x, out, scale, N, C, S, size, alpha, beta, k);
}
__global__ void lrn_backward_f32(const float* gout, const float* x, const float* out,
                                 const float* scale, float* gx, int N, int C, long long S,
                                 int size, float alpha, float beta) {
    lrn_backward_impl<float>(gout, x, out, scale, gx, N, C, S, size, alpha, beta);
}
__global__ void lrn_backward_f64(const double* gout, const double* x, const double* out,
                                 const double* scale, double* gx, int N, int C, long long S,
                                 int size, double alpha, double beta) {
    lrn_backward_impl<double>(gout, x, out, scale, gx, N, C, S, size, alpha, beta);
}
}
