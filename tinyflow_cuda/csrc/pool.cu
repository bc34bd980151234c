// Max and average pooling over NCHW (tinyflow/kernels/pool.py is the reference).
//
// One thread per output element in the forward; one thread per input element in the backward,
// which gathers from the windows that cover it instead of scattering with atomics, so
// overlapping windows (AlexNet's 3x3 stride 2) sum deterministically. The argmax is the
// window offset i * KW + j of the winner (int32), as in the reference.
#include "common.cuh"

template <typename T>
__device__ void maxpool_forward_impl(const T* __restrict__ x, T* __restrict__ out,
                                     int* __restrict__ argmax, int N, int C, int H, int W, int KH,
                                     int KW, int SH, int SW, int PH, int PW, int DH, int DW, int OH,
                                     int OW) {
    FOR_EACH_INDEX(idx, (long long)N * C * OH * OW) {
        const int ow = idx % OW;
        const int oh = (idx / OW) % OH;
        const long long plane = idx / ((long long)OH * OW);  // n * C + c
        const T* xs = x + plane * H * W;
        T best = neg_inf(T(0));  // padding never wins
        int best_k = 0;
        for (int i = 0; i < KH; ++i) {
            const int h = oh * SH - PH + i * DH;
            if (h < 0 || h >= H) continue;
            for (int j = 0; j < KW; ++j) {
                const int w = ow * SW - PW + j * DW;
                if (w < 0 || w >= W) continue;
                const T v = xs[h * W + w];
                if (v > best) {  // strict: the first maximum in row-major order wins
                    best = v;
                    best_k = i * KW + j;
                }
            }
        }
        out[idx] = best;
        argmax[idx] = best_k;
    }
}

template <typename T>
__device__ void maxpool_backward_impl(const T* __restrict__ gout, const int* __restrict__ argmax,
                                      T* __restrict__ dx, int N, int C, int H, int W, int KH,
                                      int KW, int SH, int SW, int PH, int PW, int DH, int DW,
                                      int OH, int OW) {
    FOR_EACH_INDEX(idx, (long long)N * C * H * W) {
        const int w = idx % W;
        const int h = (idx / W) % H;
        const long long plane = idx / ((long long)H * W);
        const T* g = gout + plane * OH * OW;
        const int* a = argmax + plane * OH * OW;
        T sum = T(0);
        for (int i = 0; i < KH; ++i) {
            const int oh_s = h + PH - i * DH;  // = oh * SH when tap i of window row oh is h
            if (oh_s < 0 || oh_s % SH != 0 || oh_s / SH >= OH) continue;
            const int oh = oh_s / SH;
            for (int j = 0; j < KW; ++j) {
                const int ow_s = w + PW - j * DW;
                if (ow_s < 0 || ow_s % SW != 0 || ow_s / SW >= OW) continue;
                const int o = oh * OW + ow_s / SW;
                if (a[o] == i * KW + j) sum += g[o];
            }
        }
        dx[idx] = sum;
    }
}

// The number of elements PyTorch divides a window by, along one axis: with count_include_pad
// the padding counts but the ceil_mode overhang beyond it does not.
__device__ __forceinline__ int avg_count(int start, int kernel, int size, int pad,
                                         int count_include_pad) {
    if (count_include_pad) {
        const int stop = start + kernel < size + pad ? start + kernel : size + pad;
        return stop - start;
    }
    const int stop = start + kernel < size ? start + kernel : size;
    return stop - (start > 0 ? start : 0);
}

template <typename T>
__device__ void avgpool_forward_impl(const T* __restrict__ x, T* __restrict__ out, int N, int C,
                                     int H, int W, int KH, int KW, int SH, int SW, int PH, int PW,
                                     int OH, int OW, int count_include_pad) {
    FOR_EACH_INDEX(idx, (long long)N * C * OH * OW) {
        const int ow = idx % OW;
        const int oh = (idx / OW) % OH;
        const long long plane = idx / ((long long)OH * OW);
        const T* xs = x + plane * H * W;
        const int h0 = oh * SH - PH, w0 = ow * SW - PW;
        T sum = T(0);
        for (int i = 0; i < KH; ++i) {
            const int h = h0 + i;
            if (h < 0 || h >= H) continue;
            for (int j = 0; j < KW; ++j) {
                const int w = w0 + j;
                if (w >= 0 && w < W) sum += xs[h * W + w];
            }
        }
        const int count = avg_count(h0, KH, H, PH, count_include_pad) *
                          avg_count(w0, KW, W, PW, count_include_pad);
        out[idx] = sum * (T(1) / T(count));
    }
}

template <typename T>
__device__ void avgpool_backward_impl(const T* __restrict__ gout, T* __restrict__ dx, int N, int C,
                                      int H, int W, int KH, int KW, int SH, int SW, int PH, int PW,
                                      int OH, int OW, int count_include_pad) {
    FOR_EACH_INDEX(idx, (long long)N * C * H * W) {
        const int w = idx % W;
        const int h = (idx / W) % H;
        const long long plane = idx / ((long long)H * W);
        const T* g = gout + plane * OH * OW;
        T sum = T(0);
        for (int i = 0; i < KH; ++i) {
            const int oh_s = h + PH - i;
            if (oh_s < 0 || oh_s % SH != 0 || oh_s / SH >= OH) continue;
            const int oh = oh_s / SH;
            for (int j = 0; j < KW; ++j) {
                const int ow_s = w + PW - j;
                if (ow_s < 0 || ow_s % SW != 0 || ow_s / SW >= OW) continue;
                const int ow = ow_s / SW;
                const int count = avg_count(oh * SH - PH, KH, H, PH, count_include_pad) *
                                  avg_count(ow * SW - PW, KW, W, PW, count_include_pad);
                sum += g[oh * OW + ow] * (T(1) / T(count));
            }
        }
        dx[idx] = sum;
    }
}

extern "C" {
__global__ void maxpool2d_forward_f32(const float* x, float* out, int* argmax, int N, int C, int H,
                                      int W, int KH, int KW, int SH, int SW, int PH, int PW,
                                      int DH, int DW, int OH, int OW) {
    maxpool_forward_impl<float>(x, out, argmax, N, C, H, W, KH, KW, SH, SW, PH, PW, DH, DW, OH,
                                OW);
}
__global__ void maxpool2d_forward_f64(const double* x, double* out, int* argmax, int N, int C,
                                      int H, int W, int KH, int KW, int SH, int SW, int PH, int PW,
                                      int DH, int DW, int OH, int OW) {
    maxpool_forward_impl<double>(x, out, argmax, N, C, H, W, KH, KW, SH, SW, PH, PW, DH, DW, OH,
                                 OW);
}
__global__ void maxpool2d_backward_f32(const float* gout, const int* argmax, float* dx, int N,
                                       int C, int H, int W, int KH, int KW, int SH, int SW, int PH,
                                       int PW, int DH, int DW, int OH, int OW) {
    maxpool_backward_impl<float>(gout, argmax, dx, N, C, H, W, KH, KW, SH, SW, PH, PW, DH, DW, OH,
                                 OW);
}
__global__ void maxpool2d_backward_f64(const double* gout, const int* argmax, double* dx, int N,
                                       int C, int H, int W, int KH, int KW, int SH, int SW, int PH,
                                       int PW, int DH, int DW, int OH, int OW) {
    maxpool_backward_impl<double>(gout, argmax, dx, N, C, H, W, KH, KW, SH, SW, PH, PW, DH, DW,
                                  OH, OW);
}
__global__ void avgpool2d_forward_f32(const float* x, float* out, int N, int C, int H, int W,
                                      int KH, int KW, int SH, int SW, int PH, int PW, int OH,
                                      int OW, int count_include_pad) {
    avgpool_forward_impl<float>(x, out, N, C, H, W, KH, KW, SH, SW, PH, PW, OH, OW,
                                count_include_pad);
}
__global__ void avgpool2d_forward_f64(const double* x, double* out, int N, int C, int H, int W,
                                      int KH, int KW, int SH, int SW, int PH, int PW, int OH,
                                      int OW, int count_include_pad) {
    avgpool_forward_impl<double>(x, out, N, C, H, W, KH, KW, SH, SW, PH, PW, OH, OW,
                                 count_include_pad);
}
__global__ void avgpool2d_backward_f32(const float* gout, float* dx, int N, int C, int H, int W,
                                       int KH, int KW, int SH, int SW, int PH, int PW, int OH,
                                       int OW, int count_include_pad) {
    avgpool_backward_impl<float>(gout, dx, N, C, H, W, KH, KW, SH, SW, PH, PW, OH, OW,
                                 count_include_pad);
}
__global__ void avgpool2d_backward_f64(const double* gout, double* dx, int N, int C, int H, int W,
                                       int KH, int KW, int SH, int SW, int PH, int PW, int OH,
                                       int OW, int count_include_pad) {
    avgpool_backward_impl<double>(gout, dx, N, C, H, W, KH, KW, SH, SW, PH, PW, OH, OW,
                                  count_include_pad);
}
}
