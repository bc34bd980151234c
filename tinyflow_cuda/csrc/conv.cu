// Convolution as a GEMM: im2col / col2im and the copies around the GEMM (tinyflow/kernels/conv.py
// is the reference; docs/convolution.md explains the grids and the decoding).
//
// x is (N, C, H, W), contiguous. The column matrix col is (KP, N*L), L = OH*OW: row
// k = (c*KH + i)*KW + j, column m = n*L + oh*OW + ow holds the input pixel that kernel tap (i, j)
// of channel c sees at output position (oh, ow) of image n, or 0 in the padding. Rows K..KP-1
// (K = C*KH*KW, KP rounded up to a multiple of 8 on the GPU) are zero, so that cuBLAS sees an
// aligned K.
//
// Written to run at the memory limit: no division by a runtime value per element (the row k is
// decoded once per block, the column m by a host-precomputed magic-number divisor or by walking
// the thread's run of columns; fastdiv.cuh), 32-bit offsets (the *_wide kernels, picked by the host only past
// 2^31 elements, take 64-bit row bases), 16-byte vector stores where the row length allows,
// and fp32 accumulation (acc_t) with one rounding for the half types; copies move raw bits.
#include "common.cuh"
#include "fastdiv.cuh"

namespace conv_detail {

using namespace index32;  // FastDiv, fast_div, fdiv, imin, imax (fastdiv.cuh)

// n / d for 0 <= n < 2^31 by a multiply-high, an add and a shift, with d's magic number from the
// host (fastdiv.cuh, tinyflow_cuda/kernels/_fastdiv.py).
__device__ __forceinline__ int quotient(int n, FastDiv f) { return (int)fdiv((unsigned)n, f); }

template <typename T>
__device__ __forceinline__ T zero() {
    return from_acc<T>(acc_t<T>(0));  // +0: all bits clear in every dtype
}

// 16 bytes of T: one vector store (st.global.v4 / v2) where the address is 16-byte aligned.
template <typename T>
struct alignas(16) Pack {
    T v[16 / sizeof(T)];
};

// The pixel of channel plane ``plane`` (H, W) at (h, w), or 0 outside it (the padding). The load
// is unconditional, from the nearest pixel inside: every lane of a warp loads at the same step, so
// the warp's request stays one run of addresses (the padding lanes read what their neighbours do).
template <typename T>
__device__ __forceinline__ T pixel(const T* __restrict__ plane, int h, int w, int H, int W) {
    const bool inside = (unsigned)h < (unsigned)H && (unsigned)w < (unsigned)W;
    const T v = plane[imin(imax(h, 0), H - 1) * W + imin(imax(w, 0), W - 1)];
    return inside ? v : zero<T>();
}

// One row k of col per block (blockIdx.y, folded past 65535), a tile of 256*V columns per
// blockIdx.x; the images run along the columns (m = n*L + l), so a row is one contiguous run of
// N*L elements and AlexNet's odd L (55*55, 27*27, 13*13) still gets vector stores when N*L is a
// multiple of V. Each thread loads V columns blockDim apart (consecutive lanes, consecutive
// columns: coalesced), each decoded by two magic divisions. ``vec`` (the host checked
// N*L % V == 0 and a 16-byte aligned col): the values go through shared memory and each thread
// stores V consecutive columns with one 16-byte store; else each stores its own, coalesced.
template <typename T>
__device__ void im2col_impl(const T* __restrict__ x, T* __restrict__ col, int N, int C, int H, int W,
                            int KH, int KW, int SH, int SW, int PH, int PW, int DH, int DW, int OH,
                            int OW, int K, int KP, int vec, unsigned long long magic_kk,
                            unsigned long long magic_kw, unsigned long long magic_l,
                            unsigned long long magic_ow) {
    constexpr int V = 16 / sizeof(T);
    const int L = OH * OW, NL = N * L, HW = H * W, CHW = C * HW, KK = KH * KW;
    const FastDiv by_kk = fast_div(KK, magic_kk), by_kw = fast_div(KW, magic_kw);
    const FastDiv by_l = fast_div(L, magic_l), by_ow = fast_div(OW, magic_ow);
    const int tile = blockIdx.x * (blockDim.x * V);  // this block's first column
    __shared__ Pack<T> stage_packs[256];  // the tile's 256*V values, staged for the vector stores
    T* stage = reinterpret_cast<T*>(stage_packs);
    for (int k = blockIdx.y; k < KP; k += gridDim.y) {
        T* __restrict__ row = col + k * NL;  // (N*L,)
        if (k >= K) {  // a padding row of the aligned GEMM: zeros
            if (vec) {
                const int m = tile + threadIdx.x * V;
                Pack<T> p;
#pragma unroll
                for (int r = 0; r < V; ++r) p.v[r] = zero<T>();
                if (m < NL) *reinterpret_cast<Pack<T>*>(row + m) = p;
            } else {
#pragma unroll
                for (int r = 0; r < V; ++r) {
                    const int m = tile + r * blockDim.x + threadIdx.x;
                    if (m < NL) row[m] = zero<T>();
                }
            }
            continue;
        }
        // decode the row once: k -> (c, i, j), and where tap (i, j) starts in the input plane
        const int c = quotient(k, by_kk), ij = k - c * KK;
        const int i = quotient(ij, by_kw), j = ij - i * KW;
        const int h0 = i * DH - PH, w0 = j * DW - PW;
        const T* __restrict__ xc = x + c * HW;  // channel c of image 0
        if (vec) {  // coalesced loads into shared memory, then one 16-byte store per thread
#pragma unroll
            for (int r = 0; r < V; ++r) {
                const int e = r * blockDim.x + threadIdx.x, m = tile + e;
                if (m < NL) {
                    const int n = quotient(m, by_l), l = m - n * L;
                    const int oh = quotient(l, by_ow), ow = l - oh * OW;
                    stage[e] = pixel(xc + n * CHW, oh * SH + h0, ow * SW + w0, H, W);
                }
            }
            __syncthreads();
            const int m = tile + threadIdx.x * V;
            if (m < NL) *reinterpret_cast<Pack<T>*>(row + m) = reinterpret_cast<const Pack<T>*>(stage)[threadIdx.x];
            __syncthreads();  // stage is refilled for the next row
        } else {  // coalesced scalar stores straight from the loads
#pragma unroll
            for (int r = 0; r < V; ++r) {
                const int m = tile + r * blockDim.x + threadIdx.x;
                if (m < NL) {
                    const int n = quotient(m, by_l), l = m - n * L;
                    const int oh = quotient(l, by_ow), ow = l - oh * OW;
                    row[m] = pixel(xc + n * CHW, oh * SH + h0, ow * SW + w0, H, W);
                }
            }
        }
    }
}

// The same copy past 2^31 elements: a 3-D grid of (column tile within an image, row k, image),
// y and z folded past 65535; 64-bit bases once per (row, image), 32-bit offsets within them (one
// image plane and one L-run stay below 2^31).
template <typename T>
__device__ void im2col_wide_impl(const T* __restrict__ x, T* __restrict__ col, int N, int C, int H,
                                 int W, int KH, int KW, int SH, int SW, int PH, int PW, int DH, int DW,
                                 int OH, int OW, int K, int KP, unsigned long long magic_kk,
                                 unsigned long long magic_kw, unsigned long long magic_ow) {
    const int L = OH * OW, HW = H * W, KK = KH * KW;
    const long long NL = (long long)N * L;
    const FastDiv by_kk = fast_div(KK, magic_kk), by_kw = fast_div(KW, magic_kw), by_ow = fast_div(OW, magic_ow);
    const int l = blockIdx.x * blockDim.x + threadIdx.x;
    if (l >= L) return;
    const int oh = quotient(l, by_ow), ow = l - oh * OW;
    for (int k = blockIdx.y; k < KP; k += gridDim.y) {
        const int c = quotient(k, by_kk), ij = k - c * KK;
        const int i = quotient(ij, by_kw), j = ij - i * KW;
        const int h = oh * SH + i * DH - PH, w = ow * SW + j * DW - PW;
        for (int n = blockIdx.z; n < N; n += gridDim.z) {
            T* __restrict__ run = col + (long long)k * NL + (long long)n * L;  // (L,)
            run[l] = k < K ? pixel(x + ((long long)n * C + c) * HW, h, w, H, W) : zero<T>();
        }
    }
}

// The adjoint of im2col: every input pixel gathers the column entries that copied it (no atomics,
// deterministic sums in acc_t, one rounding). A 3-D grid of (pixel tile within a plane, channel,
// image), y and z folded past 65535; a pixel (h, w) is decoded by one magic division.
//
// Closed-form tap ranges: the output rows that read row h (with hp = h + PH) are
// oh in [ceil((hp - (KH-1)*DH) / SH), floor(hp / SH)] clipped to [0, OH); tap row i = (hp - oh*SH)/DH
// must be whole. Its quotient and remainder are computed once at the first oh, then carried as oh
// steps by one (subtracting SH = SQ*DH + SR), so no % or / by a runtime value runs inside the tap
// loops; with DH = 1 every oh in the range is a tap. Columns the same way. Stride 1 (every layer
// after the first in AlexNet, VGG, most of ResNet) takes plain loops over all taps instead, the
// same for every lane, which keeps a warp's loads together (see the branch).
template <typename T, typename I>
__device__ void col2im_impl(const T* __restrict__ col, T* __restrict__ dx, int N, int C, int H, int W,
                            int KH, int KW, int SH, int SW, int PH, int PW, int DH, int DW, int OH,
                            int OW, int SQH, int SRH, int SQW, int SRW, unsigned long long magic_w,
                            unsigned long long magic_sh, unsigned long long magic_sw,
                            unsigned long long magic_dh, unsigned long long magic_dw) {
    using A = acc_t<T>;
    const int L = OH * OW, HW = H * W;
    const I NL = (I)N * L;
    const FastDiv by_w = fast_div(W, magic_w), by_sh = fast_div(SH, magic_sh), by_sw = fast_div(SW, magic_sw);
    const FastDiv by_dh = fast_div(DH, magic_dh), by_dw = fast_div(DW, magic_dw);
    const int p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= HW) return;
    const int h = quotient(p, by_w), w = p - h * W;
    // rows: the range of oh, and tap row i with its remainder at the first one
    const int hp = h + PH, h_lo = hp - (KH - 1) * DH;
    const int oh_lo = h_lo <= 0 ? 0 : quotient(h_lo + SH - 1, by_sh);
    const int oh_hi = imin(OH - 1, quotient(hp, by_sh));
    const int vh = hp - oh_lo * SH, i_lo = quotient(vh, by_dh), rh_lo = vh - i_lo * DH;
    // columns: the same for ow and tap column j
    const int wp = w + PW, w_lo = wp - (KW - 1) * DW;
    const int ow_lo = w_lo <= 0 ? 0 : quotient(w_lo + SW - 1, by_sw);
    const int ow_hi = imin(OW - 1, quotient(wp, by_sw));
    const int vw = wp - ow_lo * SW, j_lo = quotient(vw, by_dw), rw_lo = vw - j_lo * DW;
    for (int c = blockIdx.y; c < C; c += gridDim.y) {
        const T* __restrict__ col_c = col + (I)c * KH * KW * NL;  // rows of channel c
        for (int n = blockIdx.z; n < N; n += gridDim.z) {
            const T* __restrict__ col_cn = col_c + (I)n * L;  // and the columns of image n
            A sum = A(0);
            if (SH == 1 && SW == 1) {  // every tap is one output pixel: lane-uniform loops
                // (oh, ow) = (hp - i*DH, wp - j*DW): neighbouring pixels read neighbouring columns
                // of one row of col for every tap, across image rows too; a tap outside the output
                // loads its nearest column and adds nothing, so the lanes of a warp stay in step.
                for (int i = 0; i < KH; ++i) {
                    const int oh = hp - i * DH;
                    const bool row_in = (unsigned)oh < (unsigned)OH;
                    const T* __restrict__ taps = col_cn + (I)i * KW * NL + imin(imax(oh, 0), OH - 1) * OW;
                    for (int j = 0; j < KW; ++j) {
                        const int ow = wp - j * DW;
                        const T v = taps[(I)j * NL + imin(imax(ow, 0), OW - 1)];
                        sum += row_in && (unsigned)ow < (unsigned)OW ? to_acc(v) : A(0);  // a select, not a branch
                    }
                }
                dx[((I)n * C + c) * HW + p] = from_acc<T>(sum);
                continue;
            }
            int i = i_lo, rh = rh_lo;
            for (int oh = oh_lo; oh <= oh_hi; ++oh) {
                if (rh == 0) {  // tap row i reads row h at output row oh
                    const T* __restrict__ taps = col_cn + (I)i * KW * NL + oh * OW;
                    int j = j_lo, rw = rw_lo;
                    for (int ow = ow_lo; ow <= ow_hi; ++ow) {
                        if (rw == 0) sum += to_acc(taps[(I)j * NL + ow]);
                        j -= SQW;
                        rw -= SRW;
                        if (rw < 0) {
                            rw += DW;
                            --j;
                        }
                    }
                }
                i -= SQH;
                rh -= SRH;
                if (rh < 0) {
                    rh += DH;
                    --i;
                }
            }
            dx[((I)n * C + c) * HW + p] = from_acc<T>(sum);
        }
    }
}

// y (N, O, L) = out (O, N, L) + bias, ReLU'd when ``relu``: the GEMM output moved to NCHW in
// the copy that had to be made anyway. A 3-D grid of (tile of L, channel o, image n), y and z
// folded past 65535: both rows are contiguous runs of L, so there is no decoding at all. The
// row pointers start at the block's (o, n) and step by whole rows (64-bit strides computed once,
// pointer adds in the loops), offsets within a row are 32-bit.
template <typename T>
__device__ void conv_output_impl(const T* __restrict__ out, const T* __restrict__ bias,
                                 T* __restrict__ y, int N, int O, int L, int relu) {
    using A = acc_t<T>;
    const int l = blockIdx.x * blockDim.x + threadIdx.x;
    if (l >= L) return;
    const long long src_n = (long long)gridDim.z * L, dst_n = (long long)gridDim.z * O * L;
    const long long src_o = (long long)gridDim.y * N * L, dst_o = (long long)gridDim.y * L;
    const T* src_row = out + ((long long)blockIdx.y * N + blockIdx.z) * L;  // out[o, n, :]
    T* dst_row = y + ((long long)blockIdx.z * O + blockIdx.y) * L;           // y[n, o, :]
    for (int o = blockIdx.y; o < O; o += gridDim.y, src_row += src_o, dst_row += dst_o) {
        const A b = bias != nullptr ? to_acc(bias[o]) : A(0);
        const T* src = src_row;
        T* dst = dst_row;
        for (int n = blockIdx.z; n < N; n += gridDim.z, src += src_n, dst += dst_n) {
            const T v = src[l];
            T r = v;  // a plain copy moves the bits
            if (bias != nullptr || relu) {
                const A a = to_acc(v) + b;
                r = (relu && a <= A(0)) ? zero<T>() : from_acc<T>(a);  // NaN passes, as max(NaN, 0)
            }
            dst[l] = r;
        }
    }
}

// The way back: gy (O, N, L) = gout (N, O, L), zeroed where the fused ReLU's output y <= 0 (when
// y is given), and each block's sum of its gy for the bias gradient in ``partial`` (when given):
// partial[o, blockIdx.x, blockIdx.z] over the images n = blockIdx.z*NB ... (the host sums the
// few partials of a channel). A 3-D grid of (tile of L, channel o, group of NB images); rows are
// reached by pointer steps as in conv_output.
template <typename T>
__device__ void conv_output_grad_impl(const T* __restrict__ gout, const T* __restrict__ y,
                                      T* __restrict__ gy, acc_t<T>* __restrict__ partial, int N,
                                      int O, int L, int NB) {
    using A = acc_t<T>;
    __shared__ A sums[256];
    const int l = blockIdx.x * blockDim.x + threadIdx.x;
    const int n0 = blockIdx.z * NB, n1 = imin(N, n0 + NB);
    const long long src_n = (long long)O * L, src_o = (long long)gridDim.y * L;
    const long long dst_o = (long long)gridDim.y * N * L;
    const long long src_first = ((long long)n0 * O + blockIdx.y) * L;            // gout[n0, o, :]
    const long long dst_first = ((long long)blockIdx.y * N + n0) * L;            // gy[o, n0, :]
    const long long part_o = (long long)gridDim.y * gridDim.x * gridDim.z;
    long long part = ((long long)blockIdx.y * gridDim.x + blockIdx.x) * gridDim.z + blockIdx.z;
    const T* g_row = gout + src_first;
    const T* y_row = y != nullptr ? y + src_first : nullptr;
    T* d_row = gy + dst_first;
    for (int o = blockIdx.y; o < O; o += gridDim.y, g_row += src_o, d_row += dst_o, part += part_o) {
        A sum = A(0);
        if (l < L) {
            const T* g = g_row;
            const T* m = y_row;
            T* d = d_row;
#pragma unroll 1  // pointer steps, not base + n*stride products (unrolling made 64-bit multiplies)
            for (int n = n0; n < n1; ++n, g += src_n, d += L) {
                T v = g[l];
                if (m != nullptr) {
                    if (to_acc(m[l]) <= A(0)) v = zero<T>();
                    m += src_n;
                }
                d[l] = v;
                sum += to_acc(v);
            }
        }
        if (y_row != nullptr) y_row += src_o;
        if (partial == nullptr) continue;  // uniform over the grid: no thread skips a barrier alone
        sums[threadIdx.x] = sum;
        __syncthreads();
        for (int half = blockDim.x / 2; half > 0; half /= 2) {  // blockDim.x is a power of two
            if ((int)threadIdx.x < half) sums[threadIdx.x] += sums[threadIdx.x + half];
            __syncthreads();
        }
        if (threadIdx.x == 0) partial[part] = sums[0];
        __syncthreads();  // sums is reused by the next channel
    }
}

}  // namespace conv_detail

// One entry point per dtype (TF_FLOAT_TYPES): f32, f64, f16, bf16. The magic_* arguments are
// _fastdiv.magic(d) of the divisor their name says.
#define IM2COL(sfx, T)                                                                              \
    __global__ void im2col_##sfx(const T* x, T* col, int N, int C, int H, int W, int KH, int KW,    \
                                 int SH, int SW, int PH, int PW, int DH, int DW, int OH, int OW,    \
                                 int K, int KP, int vec, unsigned long long magic_kk,              \
                                 unsigned long long magic_kw, unsigned long long magic_l,          \
                                 unsigned long long magic_ow) {                                    \
        conv_detail::im2col_impl<T>(x, col, N, C, H, W, KH, KW, SH, SW, PH, PW, DH, DW, OH, OW, K, \
                                    KP, vec, magic_kk, magic_kw, magic_l, magic_ow);               \
    }
#define IM2COL_WIDE(sfx, T)                                                                         \
    __global__ void im2col_wide_##sfx(const T* x, T* col, int N, int C, int H, int W, int KH,       \
                                      int KW, int SH, int SW, int PH, int PW, int DH, int DW,       \
                                      int OH, int OW, int K, int KP, unsigned long long magic_kk,   \
                                      unsigned long long magic_kw, unsigned long long magic_ow) {   \
        conv_detail::im2col_wide_impl<T>(x, col, N, C, H, W, KH, KW, SH, SW, PH, PW, DH, DW, OH,   \
                                         OW, K, KP, magic_kk, magic_kw, magic_ow);                  \
    }
#define COL2IM(sfx, T)                                                                              \
    __global__ void col2im_##sfx(const T* col, T* dx, int N, int C, int H, int W, int KH, int KW,   \
                                 int SH, int SW, int PH, int PW, int DH, int DW, int OH, int OW,    \
                                 int SQH, int SRH, int SQW, int SRW, unsigned long long magic_w,   \
                                 unsigned long long magic_sh, unsigned long long magic_sw,         \
                                 unsigned long long magic_dh, unsigned long long magic_dw) {       \
        conv_detail::col2im_impl<T, int>(col, dx, N, C, H, W, KH, KW, SH, SW, PH, PW, DH, DW, OH,  \
                                         OW, SQH, SRH, SQW, SRW, magic_w, magic_sh, magic_sw,      \
                                         magic_dh, magic_dw);                                      \
    }
#define COL2IM_WIDE(sfx, T)                                                                         \
    __global__ void col2im_wide_##sfx(const T* col, T* dx, int N, int C, int H, int W, int KH,      \
                                      int KW, int SH, int SW, int PH, int PW, int DH, int DW,       \
                                      int OH, int OW, int SQH, int SRH, int SQW, int SRW,           \
                                      unsigned long long magic_w, unsigned long long magic_sh,      \
                                      unsigned long long magic_sw, unsigned long long magic_dh,     \
                                      unsigned long long magic_dw) {                                \
        conv_detail::col2im_impl<T, long long>(col, dx, N, C, H, W, KH, KW, SH, SW, PH, PW, DH,    \
                                               DW, OH, OW, SQH, SRH, SQW, SRW, magic_w, magic_sh,  \
                                               magic_sw, magic_dh, magic_dw);                      \
    }
#define CONV_OUTPUT(sfx, T)                                                                         \
    __global__ void conv_output_##sfx(const T* out, const T* bias, T* y, int N, int O, int L,       \
                                      int relu) {                                                   \
        conv_detail::conv_output_impl<T>(out, bias, y, N, O, L, relu);                              \
    }
#define CONV_OUTPUT_GRAD(sfx, T)                                                                    \
    __global__ void conv_output_grad_##sfx(const T* gout, const T* y, T* gy, acc_t<T>* partial,     \
                                           int N, int O, int L, int NB) {                           \
        conv_detail::conv_output_grad_impl<T>(gout, y, gy, partial, N, O, L, NB);                   \
    }
extern "C" {
TF_FLOAT_TYPES(IM2COL)
TF_FLOAT_TYPES(IM2COL_WIDE)
TF_FLOAT_TYPES(COL2IM)
TF_FLOAT_TYPES(COL2IM_WIDE)
TF_FLOAT_TYPES(CONV_OUTPUT)
TF_FLOAT_TYPES(CONV_OUTPUT_GRAD)
}
