// Local response normalisation across channels, PyTorch semantics, in every floating dtype
// (tinyflow/kernels/lrn.py is the reference; tinyflow_cuda/kernels/lrn.py launches these).
// x is viewed as (N, C, S) with S the product of the trailing dims:
//   scale[c] = k + alpha / size * sum_{c' = c - size/2 .. c + (size-1)/2} x[c']^2
//   out[c]   = x[c] * scale[c]^-beta
// One thread per element, flat over the tensor: consecutive threads take consecutive spatial
// positions s, so each of the `size` channel neighbours (5 in AlexNet), S elements apart, is a
// coalesced row load, mostly from cache. The flat index is 32-bit (the host launches whole
// images, < 2^31 elements at a time) and decoded into (image, channel, s) with host-computed
// magic divisors (fastdiv.cuh): no division per element. fp16 / bf16 load to fp32, compute
// there and round once; the window sums are direct, never a running sum, so an inf in one
// channel cannot turn the channels after it into NaN (inf - inf).
#include "common.cuh"
#include "fastdiv.cuh"

namespace lrn_detail {
using namespace index32;

// Decode flat index idx of (N, C, S): its channel c and the offset of channel 0 of its (n, s).
struct LrnSite {
    int c;
    unsigned base;  // n * C * S + s
};

__device__ __forceinline__ LrnSite lrn_site(unsigned idx, int C, int S, FastDiv by_s,
                                            FastDiv by_c) {
    const unsigned q = fdiv(idx, by_s);        // n * C + c
    const unsigned n = fdiv(q, by_c);
    LrnSite site;
    site.c = (int)(q - n * (unsigned)C);
    site.base = idx - (unsigned)site.c * (unsigned)S;
    return site;
}

template <typename T>
__device__ __forceinline__ void lrn_forward(const T* __restrict__ x, T* __restrict__ out,
                                            T* __restrict__ scale, int total, int C, int S,
                                            int size, double alpha_over_size, double beta,
                                            double k, unsigned long long magic_s,
                                            unsigned long long magic_c) {
    using A = acc_t<T>;
    const FastDiv by_s = fast_div(S, magic_s), by_c = fast_div(C, magic_c);
    const A a_over_n = A(alpha_over_size), neg_beta = A(-beta), kk = A(k);
    FOR_EACH_INDEX32(idx, total) {
        const LrnSite site = lrn_site(idx, C, S, by_s, by_c);
        const int lo = imax(site.c - size / 2, 0), hi = imin(site.c + (size - 1) / 2, C - 1);
        const T* col = x + site.base;  // channel 0 of this (n, s); channels S apart
        A sum = A(0);
        for (int cc = lo; cc <= hi; ++cc) {
            const A v = to_acc(col[(unsigned)cc * (unsigned)S]);
            sum += v * v;
        }
        const A sc = kk + a_over_n * sum;
        scale[idx] = from_acc<T>(sc);
        out[idx] = from_acc<T>(to_acc(x[idx]) * pow(sc, neg_beta));
    }
}

// gx[j] = g[j] scale[j]^-beta - 2 alpha beta / size * x[j] * sum_{c : j in window(c)} g[c] out[c] / scale[c]
template <typename T>
__device__ __forceinline__ void lrn_backward(const T* __restrict__ gout, const T* __restrict__ x,
                                             const T* __restrict__ out,
                                             const T* __restrict__ scale, T* __restrict__ gx,
                                             int total, int C, int S, int size, double coef_,
                                             double beta, unsigned long long magic_s,
                                             unsigned long long magic_c) {
    using A = acc_t<T>;
    const FastDiv by_s = fast_div(S, magic_s), by_c = fast_div(C, magic_c);
    const A coef = A(coef_), neg_beta = A(-beta);  // coef_ = 2 alpha beta / size, from the host
    FOR_EACH_INDEX32(idx, total) {
        const LrnSite site = lrn_site(idx, C, S, by_s, by_c);
        // the channels whose window holds c: c - (size-1)/2 .. c + size/2
        const int lo = imax(site.c - (size - 1) / 2, 0), hi = imin(site.c + size / 2, C - 1);
        A back = A(0);
        for (int cc = lo; cc <= hi; ++cc) {
            const unsigned o = site.base + (unsigned)cc * (unsigned)S;
            back += to_acc(gout[o]) * to_acc(out[o]) * reciprocal(to_acc(scale[o]));
        }
        gx[idx] = from_acc<T>(to_acc(gout[idx]) * pow(to_acc(scale[idx]), neg_beta) -
                              coef * to_acc(x[idx]) * back);
    }
}

}  // namespace lrn_detail

#define LRN_FORWARD(sfx, T)                                                                  \
    __global__ void lrn_forward_##sfx(const T* x, T* out, T* scale, int total, int C, int S, \
                                      int size, double alpha_over_size, double beta,        \
                                      double k, unsigned long long magic_s,                 \
                                      unsigned long long magic_c) {                         \
        lrn_detail::lrn_forward<T>(x, out, scale, total, C, S, size, alpha_over_size, beta,  \
                                   k, magic_s, magic_c);                                     \
    }

#define LRN_BACKWARD(sfx, T)                                                                   \
    __global__ void lrn_backward_##sfx(const T* gout, const T* x, const T* out,              \
                                       const T* scale, T* gx, int total, int C, int S,       \
                                       int size, double coef, double beta,                   \
                                       unsigned long long magic_s,                           \
                                       unsigned long long magic_c) {                         \
        lrn_detail::lrn_backward<T>(gout, x, out, scale, gx, total, C, S, size, coef, beta,  \
                                    magic_s, magic_c);                                       \
    }

extern "C" {
TF_FLOAT_TYPES(LRN_FORWARD)
TF_FLOAT_TYPES(LRN_BACKWARD)
}
