// im2col / col2im for convolution as a GEMM (tinyflow/kernels/conv.py is the reference).
//
// x is (N, C, H, W), contiguous. The column matrix holds, for every image n, row
// k = (c * KH + i) * KW + j and column l = oh * OW + ow, the input pixel that kernel tap
// (i, j) of channel c sees at output position (oh, ow), or 0 in the padding. Where that
// element lives is given by three strides (s_n, s_k, s_l), so one kernel writes any of the
// layouts the GEMM may want: (N, K, L), (K, N*L) or (N*L, K).
#include "common.cuh"

template <typename T>
__device__ void im2col_impl(const T* __restrict__ x, T* __restrict__ cols, int N, int C, int H,
                            int W, int KH, int KW, int SH, int SW, int PH, int PW, int DH, int DW,
                            int OH, int OW, long long s_n, long long s_k, long long s_l) {
    const long long total = (long long)N * C * KH * KW * OH * OW;
    FOR_EACH_INDEX(idx, total) {
        // idx enumerates (n, c, i, j, oh, ow) with ow fastest: consecutive threads read
        // neighbouring input pixels.
        long long t = idx;
        const int ow = t % OW; t /= OW;
        const int oh = t % OH; t /= OH;
        const int j = t % KW; t /= KW;
        const int i = t % KH; t /= KH;
        const int c = t % C;
        const int n = t / C;
        const int h = oh * SH - PH + i * DH;
        const int w = ow * SW - PW + j * DW;
        T v = T(0);
        if (h >= 0 && h < H && w >= 0 && w < W) v = x[(((long long)n * C + c) * H + h) * W + w];
        const long long k = ((long long)c * KH + i) * KW + j;
        const long long l = (long long)oh * OW + ow;
        cols[n * s_n + k * s_k + l * s_l] = v;
    }
}

// The adjoint of im2col: every input pixel gathers the column entries that copied it, so no
// two threads write the same address (no atomics, deterministic sums).
template <typename T>
__device__ void col2im_impl(const T* __restrict__ cols, T* __restrict__ dx, int N, int C, int H,
                            int W, int KH, int KW, int SH, int SW, int PH, int PW, int DH, int DW,
                            int OH, int OW, long long s_n, long long s_k, long long s_l) {
    const long long total = (long long)N * C * H * W;
    FOR_EACH_INDEX(idx, total) {
        long long t = idx;
        const int w = t % W; t /= W;
        const int h = t % H; t /= H;
        const int c = t % C;
        const int n = t / C;
        T sum = T(0);
        for (int i = 0; i < KH; ++i) {
            const int oh_s = h + PH - i * DH;  // = oh * SH when tap i of row oh reads h
            if (oh_s < 0 || oh_s % SH != 0) continue;
            const int oh = oh_s / SH;
            if (oh >= OH) continue;
            for (int j = 0; j < KW; ++j) {
                const int ow_s = w + PW - j * DW;
                if (ow_s < 0 || ow_s % SW != 0) continue;
                const int ow = ow_s / SW;
                if (ow >= OW) continue;
                const long long k = ((long long)c * KH + i) * KW + j;
                sum += cols[n * s_n + k * s_k + ((long long)oh * OW + ow) * s_l];
            }
        }
        dx[idx] = sum;
    }
}

// One entry point per dtype; the arguments are the geometry of im2col_impl.
extern "C" {
__global__ void im2col_f32(const float* x, float* cols, int N, int C, int H, int W, int KH, int KW, int SH, int SW, int PH, int PW,
                           int DH, int DW, int OH, int OW, long long s_n, long long s_k, long long s_l) {
    im2col_impl<float>(x, cols, N, C, H, W, KH, KW, SH, SW, PH, PW, DH, DW, OH, OW,
                       s_n, s_k, s_l);
}
__global__ void im2col_f64(const double* x, double* cols, int N, int C, int H, int W, int KH, int KW, int SH, int SW, int PH, int PW,
                           int DH, int DW, int OH, int OW, long long s_n, long long s_k, long long s_l) {
    im2col_impl<double>(x, cols, N, C, H, W, KH, KW, SH, SW, PH, PW, DH, DW, OH, OW,
                       s_n, s_k, s_l);
}
__global__ void col2im_f32(const float* cols, float* dx, int N, int C, int H, int W, int KH, int KW, int SH, int SW, int PH, int PW,
                           int DH, int DW, int OH, int OW, long long s_n, long long s_k, long long s_l) {
    col2im_impl<float>(cols, dx, N, C, H, W, KH, KW, SH, SW, PH, PW, DH, DW, OH, OW,
                       s_n, s_k, s_l);
}
__global__ void col2im_f64(const double* cols, double* dx, int N, int C, int H, int W, int KH, int KW, int SH, int SW, int PH, int PW,
                           int DH, int DW, int OH, int OW, long long s_n, long long s_k, long long s_l) {
    col2im_impl<double>(cols, dx, N, C, H, W, KH, KW, SH, SW, PH, PW, DH, DW, OH, OW,
                       s_n, s_k, s_l);
}
}
