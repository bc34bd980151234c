// Max and average pooling over NCHW in every floating dtype (tinyflow/kernels/pool.py is the
// reference; tinyflow_cuda/kernels/pool.py launches these).
//
// Written for the memory limit:
// - one thread per output element (forward) or per input element (backward), flat over the whole
//   tensor, so consecutive threads load and store consecutive w (coalesced), whatever the plane
//   size (AlexNet's last pool has 6x6 or 1x1 outputs: a 2-D tile would idle most of a warp);
// - 32-bit indices: the host launches at most 2^31 - 1 elements at a time (whole planes);
// - no division by a runtime value per element: the flat index is decoded into (plane, row,
//   column) with host-computed magic numbers (fastdiv.cuh, one multiply-high each);
// - the backward gathers (no atomics, deterministic even where AlexNet's 3x3 stride-2 windows
//   overlap), and visits only the windows that cover its pixel: their range along each axis is
//   computed once per pixel, and the tap of each window is stepped, not divided, inside the loop;
// - fp16 / bf16 load to fp32 (to_acc), sum and compare there, round once (from_acc); the max
//   itself is stored as the winner's raw bits. The argmax is the int32 window offset i * KW + j.
#include "common.cuh"
#include "fastdiv.cuh"

namespace pool_detail {
using namespace index32;

// ---- forward ---------------------------------------------------------------------------------

// Decode flat output index ``idx`` of (planes, OH, OW) into its plane and its window's top-left
// corner in input coordinates (which may lie in the padding).
struct PoolSite {
    unsigned plane;
    int h0, w0;  // oh * SH - PH, ow * SW - PW
    int oh, ow;
};

__device__ __forceinline__ PoolSite pool_site(unsigned idx, int OH, int OW, FastDiv by_ow,
                                              FastDiv by_plane, int SH, int SW, int PH, int PW) {
    PoolSite s;
    s.plane = fdiv(idx, by_plane);
    const unsigned r = idx - s.plane * (unsigned)(OH * OW);
    s.oh = (int)fdiv(r, by_ow);
    s.ow = (int)r - s.oh * OW;
    s.h0 = s.oh * SH - PH;
    s.w0 = s.ow * SW - PW;
    return s;
}

template <typename T>
__device__ __forceinline__ void maxpool_forward(const T* __restrict__ x, T* __restrict__ out,
                                                int* __restrict__ argmax, int total, int H, int W,
                                                int KH, int KW, int SH, int SW, int PH, int PW,
                                                int DH, int DW, int OH, int OW,
                                                unsigned long long magic_ow,
                                                unsigned long long magic_plane) {
    const FastDiv by_ow = fast_div(OW, magic_ow), by_plane = fast_div(OH * OW, magic_plane);
    FOR_EACH_INDEX32(idx, total) {
        const PoolSite s = pool_site(idx, OH, OW, by_ow, by_plane, SH, SW, PH, PW);
        const T* xs = x + s.plane * (unsigned)(H * W);
        T best = from_acc<T>(neg_inf(acc_t<T>(0)));  // padding never wins
        acc_t<T> best_v = neg_inf(acc_t<T>(0));
        int best_k = 0;
        for (int i = 0, h = s.h0; i < KH; ++i, h += DH) {
            if (h < 0 || h >= H) continue;
            const T* row = xs + h * W;
            for (int j = 0, w = s.w0; j < KW; ++j, w += DW) {
                if (w < 0 || w >= W) continue;
                const T raw = row[w];
                const acc_t<T> v = to_acc(raw);
                // strict: the first maximum in row-major order wins; a NaN wins over any number
                // (and the first NaN over later ones), so the maximum propagates NaN as PyTorch's
                if (v > best_v || (v != v && best_v == best_v)) {
                    best_v = v;
                    best = raw;
                    best_k = i * KW + j;
                }
            }
        }
        out[idx] = best;
        argmax[idx] = best_k;
    }
}

// The element count PyTorch divides a window by, along one axis: with count_include_pad the
// padding counts but the ceil_mode overhang beyond it does not.
__device__ __forceinline__ int avg_count(int start, int kernel, int size, int pad,
                                         int count_include_pad) {
    if (count_include_pad) return imin(start + kernel, size + pad) - start;
    return imin(start + kernel, size) - imax(start, 0);
}

template <typename T>
__device__ __forceinline__ void avgpool_forward(const T* __restrict__ x, T* __restrict__ out,
                                                int total, int H, int W, int KH, int KW, int SH,
                                                int SW, int PH, int PW, int OH, int OW,
                                                int count_include_pad, unsigned long long magic_ow,
                                                unsigned long long magic_plane) {
    using A = acc_t<T>;
    const FastDiv by_ow = fast_div(OW, magic_ow), by_plane = fast_div(OH * OW, magic_plane);
    FOR_EACH_INDEX32(idx, total) {
        const PoolSite s = pool_site(idx, OH, OW, by_ow, by_plane, SH, SW, PH, PW);
        const T* xs = x + s.plane * (unsigned)(H * W);
        const int h_lo = imax(s.h0, 0), h_hi = imin(s.h0 + KH, H);  // the taps inside the image
        const int w_lo = imax(s.w0, 0), w_hi = imin(s.w0 + KW, W);
        A sum = A(0);
        for (int h = h_lo; h < h_hi; ++h) {
            const T* row = xs + h * W;
            for (int w = w_lo; w < w_hi; ++w) sum += to_acc(row[w]);
        }
        const int count = avg_count(s.h0, KH, H, PH, count_include_pad) *
                          avg_count(s.w0, KW, W, PW, count_include_pad);
        out[idx] = from_acc<T>(sum * reciprocal(A(count)));
    }
}

// ---- backward --------------------------------------------------------------------------------

// The windows along one axis that cover input coordinate p: o*S + t*D == p + pad for a window
// o in [0, O) and a tap t in [0, K). They form the range [lo, hi]; walking it upwards the tap's
// offset r = p + pad - o*S falls by S, so the tap t = r / D and r % D are stepped by the
// constants S / D and S % D (no division in the loop). Without dilation (D == 1) every window
// of the range holds p, at tap r.
struct TapRange {
    int lo, hi;      // the windows o_lo..o_hi (empty when lo > hi)
    int tap, rem;    // r / D and r % D at o = lo
    int step, step_rem;  // S / D and S % D
    int D;
};

__device__ __forceinline__ TapRange tap_range(int p, int pad, int K, int S, int D, int O,
                                              FastDiv by_s, FastDiv by_d) {
    TapRange t;
    const int pp = p + pad, span = (K - 1) * D;
    t.hi = imin((int)fdiv((unsigned)pp, by_s), O - 1);
    t.lo = pp > span ? (int)fdiv((unsigned)(pp - span - 1), by_s) + 1 : 0;  // ceil((pp - span) / S)
    const int r = pp - t.lo * S;  // in [0, span] when the range is not empty
    t.tap = (int)fdiv((unsigned)imax(r, 0), by_d);
    t.rem = r - t.tap * D;
    t.step = (int)fdiv((unsigned)S, by_d);
    t.step_rem = S - t.step * D;
    t.D = D;
    return t;
}

// Move a TapRange's (tap, rem) from window o to o + 1: r falls by S.
__device__ __forceinline__ void next_window(int& tap, int& rem, const TapRange& t) {
    tap -= t.step;
    rem -= t.step_rem;
    if (rem < 0) {
        rem += t.D;
        tap -= 1;
    }
}

template <typename T>
__device__ __forceinline__ void maxpool_backward(
    const T* __restrict__ gout, const int* __restrict__ argmax, T* __restrict__ dx, int total, int H,
    int W, int KH, int KW, int SH, int SW, int PH, int PW, int DH, int DW, int OH, int OW,
    unsigned long long magic_w, unsigned long long magic_plane, unsigned long long magic_sh,
    unsigned long long magic_sw, unsigned long long magic_dh, unsigned long long magic_dw) {
    using A = acc_t<T>;
    const FastDiv by_w = fast_div(W, magic_w), by_plane = fast_div(H * W, magic_plane);
    const FastDiv by_sh = fast_div(SH, magic_sh), by_sw = fast_div(SW, magic_sw);
    const FastDiv by_dh = fast_div(DH, magic_dh), by_dw = fast_div(DW, magic_dw);
    FOR_EACH_INDEX32(idx, total) {
        const unsigned plane = fdiv(idx, by_plane);
        const unsigned r = idx - plane * (unsigned)(H * W);
        const int h = (int)fdiv(r, by_w), w = (int)r - h * W;
        const unsigned base = plane * (unsigned)(OH * OW);
        const T* g = gout + base;
        const int* a = argmax + base;
        const TapRange rows = tap_range(h, PH, KH, SH, DH, OH, by_sh, by_dh);
        const TapRange cols = tap_range(w, PW, KW, SW, DW, OW, by_sw, by_dw);
        A sum = A(0);
        int i = rows.tap, ri = rows.rem;
        for (int oh = rows.lo; oh <= rows.hi; ++oh, next_window(i, ri, rows)) {
            if (ri != 0) continue;  // a dilated window that steps over row h
            const int o_row = oh * OW;
            int j = cols.tap, rj = cols.rem;
            for (int ow = cols.lo; ow <= cols.hi; ++ow, next_window(j, rj, cols)) {
                if (rj == 0 && a[o_row + ow] == i * KW + j) sum += to_acc(g[o_row + ow]);
            }
        }
        dx[idx] = from_acc<T>(sum);
    }
}

template <typename T>
__device__ __forceinline__ void avgpool_backward(
    const T* __restrict__ gout, T* __restrict__ dx, int total, int H, int W, int KH, int KW, int SH,
    int SW, int PH, int PW, int OH, int OW, int count_include_pad, unsigned long long magic_w,
    unsigned long long magic_plane, unsigned long long magic_sh, unsigned long long magic_sw) {
    using A = acc_t<T>;
    const FastDiv by_w = fast_div(W, magic_w), by_plane = fast_div(H * W, magic_plane);
    const FastDiv by_sh = fast_div(SH, magic_sh), by_sw = fast_div(SW, magic_sw);
    const FastDiv one = fast_div(1, 1ULL);  // the magic of 1 (no dilation): m = 1, s = 0
    FOR_EACH_INDEX32(idx, total) {
        const unsigned plane = fdiv(idx, by_plane);
        const unsigned r = idx - plane * (unsigned)(H * W);
        const int h = (int)fdiv(r, by_w), w = (int)r - h * W;
        const T* g = gout + plane * (unsigned)(OH * OW);
        const TapRange rows = tap_range(h, PH, KH, SH, 1, OH, by_sh, one);
        const TapRange cols = tap_range(w, PW, KW, SW, 1, OW, by_sw, one);
        A sum = A(0);
        for (int oh = rows.lo; oh <= rows.hi; ++oh) {
            const int ch = avg_count(oh * SH - PH, KH, H, PH, count_include_pad);
            for (int ow = cols.lo; ow <= cols.hi; ++ow) {
                const int cw = avg_count(ow * SW - PW, KW, W, PW, count_include_pad);
                sum += to_acc(g[oh * OW + ow]) * reciprocal(A(ch * cw));
            }
        }
        dx[idx] = from_acc<T>(sum);
    }
}

}  // namespace pool_detail

// ---- entry points: <name>_f32, _f64, _f16, _bf16 ---------------------------------------------

#define MAXPOOL2D_FORWARD(sfx, T)                                                            \
    __global__ void maxpool2d_forward_##sfx(                                                \
        const T* x, T* out, int* argmax, int total, int H, int W, int KH, int KW, int SH,   \
        int SW, int PH, int PW, int DH, int DW, int OH, int OW, unsigned long long magic_ow, \
        unsigned long long magic_plane) {                                                    \
        pool_detail::maxpool_forward<T>(x, out, argmax, total, H, W, KH, KW, SH, SW, PH, PW, \
                                        DH, DW, OH, OW, magic_ow, magic_plane);              \
    }

#define MAXPOOL2D_BACKWARD(sfx, T)                                                             \
    __global__ void maxpool2d_backward_##sfx(                                                 \
        const T* gout, const int* argmax, T* dx, int total, int H, int W, int KH, int KW,     \
        int SH, int SW, int PH, int PW, int DH, int DW, int OH, int OW,                       \
        unsigned long long magic_w, unsigned long long magic_plane,                           \
        unsigned long long magic_sh, unsigned long long magic_sw, unsigned long long magic_dh, \
        unsigned long long magic_dw) {                                                         \
        pool_detail::maxpool_backward<T>(gout, argmax, dx, total, H, W, KH, KW, SH, SW, PH,   \
                                         PW, DH, DW, OH, OW, magic_w, magic_plane, magic_sh,  \
                                         magic_sw, magic_dh, magic_dw);                       \
    }

#define AVGPOOL2D_FORWARD(sfx, T)                                                             \
    __global__ void avgpool2d_forward_##sfx(                                                 \
        const T* x, T* out, int total, int H, int W, int KH, int KW, int SH, int SW, int PH, \
        int PW, int OH, int OW, int count_include_pad, unsigned long long magic_ow,          \
        unsigned long long magic_plane) {                                                     \
        pool_detail::avgpool_forward<T>(x, out, total, H, W, KH, KW, SH, SW, PH, PW, OH, OW,  \
                                        count_include_pad, magic_ow, magic_plane);            \
    }

#define AVGPOOL2D_BACKWARD(sfx, T)                                                              \
    __global__ void avgpool2d_backward_##sfx(                                                  \
        const T* gout, T* dx, int total, int H, int W, int KH, int KW, int SH, int SW, int PH, \
        int PW, int OH, int OW, int count_include_pad, unsigned long long magic_w,             \
        unsigned long long magic_plane, unsigned long long magic_sh,                           \
        unsigned long long magic_sw) {                                                          \
        pool_detail::avgpool_backward<T>(gout, dx, total, H, W, KH, KW, SH, SW, PH, PW, OH,    \
                                         OW, count_include_pad, magic_w, magic_plane,          \
                                         magic_sh, magic_sw);                                  \
    }

extern "C" {
TF_FLOAT_TYPES(MAXPOOL2D_FORWARD)
TF_FLOAT_TYPES(MAXPOOL2D_BACKWARD)
TF_FLOAT_TYPES(AVGPOOL2D_FORWARD)
TF_FLOAT_TYPES(AVGPOOL2D_BACKWARD)
}
