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

// ``v`` where ``keep``, else +0, by masking its bits: a select after an unconditional load, so no
// compiler (g++ for the emulator, nvcc) can sink the load into a branch that only some lanes take.
__device__ __forceinline__ unsigned keep_mask(bool keep) { return 0u - (unsigned)keep; }
__device__ __forceinline__ float keep_if(bool keep, float v) {
    return __uint_as_float(__float_as_uint(v) & keep_mask(keep));
}
__device__ __forceinline__ double keep_if(bool keep, double v) {
#ifdef TINYFLOW_EMULATOR
    unsigned long long bits;
    __builtin_memcpy(&bits, &v, sizeof bits);
#else
    unsigned long long bits = (unsigned long long)__double_as_longlong(v);
#endif
    return __longlong_as_double((long long)(bits & (0ULL - (unsigned long long)keep)));
}
__device__ __forceinline__ f16_t keep_if(bool keep, f16_t v) {
    f16_t r;
    r.bits = (unsigned short)(v.bits & keep_mask(keep));
    return r;
}
__device__ __forceinline__ bf16_t keep_if(bool keep, bf16_t v) {
    bf16_t r;
    r.bits = (unsigned short)(v.bits & keep_mask(keep));
    return r;
}

// The pixel of channel plane ``plane`` (H, W) at (h, w), or 0 outside it (the padding). The load
// is unconditional, from the nearest pixel inside: every lane of a warp loads at the same step, so
// the warp's request stays one run of addresses (the padding lanes read what their neighbours do).
template <typename T>
__device__ __forceinline__ T pixel(const T* __restrict__ plane, int h, int w, int H, int W) {
    const bool inside = (unsigned)h < (unsigned)H && (unsigned)w < (unsigned)W;
    return keep_if(inside, plane[imin(imax(h, 0), H - 1) * W + imin(imax(w, 0), W - 1)]);
}

// The staged kernels' shared memory (kernels/conv.py mirrors these three numbers): a block stages
// what its tile reads, at most STAGE_BYTES, in runs that start on a 32-byte sector boundary, so
// that consecutive threads load consecutive, sector-aligned addresses whatever the stride.
constexpr int STAGE_BYTES = 24576;
constexpr int STAGE_ROWS = 512;   // im2col: the most input rows one tile stages
constexpr int COL2IM_PIXELS = 4;  // col2im: the pixels one thread sums

// The elements of one 32-byte sector: a run's start is rounded down to a multiple of this.
template <typename T>
__device__ __forceinline__ constexpr int sector_elements() {
    return 32 / (int)sizeof(T);
}

// One warp's part of staging a run: elements off .. off+31 of run[0, len) (run starts on a sector
// boundary) into dst[0 .. 31], lane by lane (dst has room for all 32: the stage's pitch is whole
// warps). A chunk past the run's end loads nothing (uniform over the warp); in the chunk holding
// the end, the lanes beyond it load the run's last element again into slots nobody reads. So
// every lane of the warp executes the same loads, consecutive lanes on consecutive addresses,
// and each warp-wide request is one sector-aligned run: on a GPU no divergence, and in the
// emulator's coalescing report (its lanes line up by how many times each ran a load) no drift.
// The store is unconditional on purpose: a guarded one would let the compiler sink the load
// into the guard.
template <typename T>
__device__ __forceinline__ void load_chunk(T* __restrict__ dst, const T* __restrict__ run, int off,
                                           int len, int lane) {
    if (off >= len) return;
    dst[lane] = run[imin(off + lane, len - 1)];
}

// Stores the V values of ``p`` at columns m .. m+V-1 of ``row`` (length NL): one 16-byte store
// where all V lie inside (the host made such an m 16-byte aligned), else one by one, skipping the
// columns outside [0, NL) (the ragged ends of a row).
template <typename T>
__device__ __forceinline__ void store_pack(T* __restrict__ row, int m, int NL, const Pack<T>& p) {
    constexpr int V = 16 / sizeof(T);
    if (m >= 0 && m + V <= NL) {
        *reinterpret_cast<Pack<T>*>(row + m) = p;
        return;
    }
#pragma unroll
    for (int r = 0; r < V; ++r)
        if (m + r >= 0 && m + r < NL) row[m + r] = p.v[r];
}

// im2col, staged. One row k = (c, i, j) of col per block (blockIdx.y, folded past 65535), a tile
// of 256*V columns per blockIdx.x; the images run along the columns (m = n*L + oh*OW + ow), so a
// row is one run of N*L elements. The tile's columns fall on a few output rows g = n*OH + oh
// (m / OW = g); for each, the block first loads the input row h = oh*SH + i*DH - PH from the
// first to the last pixel its taps read ([wlo, whi], every column, SW apart) into shared memory
// with consecutive threads on consecutive addresses from a sector boundary: coalesced at any
// stride, where reading the taps straight from x puts a warp's lanes SW elements apart (16 bytes
// at AlexNet conv1's stride 4: 4 sectors for each sector's worth of data). Then each thread
// gathers V consecutive columns from the stage and stores them with one 16-byte store: the tile
// starts ``lead`` columns early so that its packs are 16-byte aligned (``head``: out's address
// in elements mod V), and the ragged ends of a row are stored one by one. Rows past the padding
// (h outside [0, H)) and columns in it read no memory.
//
// The host (kernels/conv.py im2col) launches this where a tile's rows fit STAGE_BYTES and
// STAGE_ROWS and SW * sizeof(T) <= 32 (there, every sector of the input row holds a tap, so
// staging moves no more sectors than the direct gather); elsewhere im2col_direct.
template <typename T>
__device__ void im2col_impl(const T* __restrict__ x, T* __restrict__ col, int N, int C, int H, int W,
                            int KH, int KW, int SH, int SW, int PH, int PW, int DH, int DW, int OH,
                            int OW, int K, int KP, int head, int pitch, unsigned long long magic_kk,
                            unsigned long long magic_kw, unsigned long long magic_ow,
                            unsigned long long magic_oh, unsigned long long magic_pitch) {
    constexpr int V = 16 / sizeof(T), SE = sector_elements<T>();
    const int L = OH * OW, NL = N * L, HW = H * W, KK = KH * KW;
    const FastDiv by_kk = fast_div(KK, magic_kk), by_kw = fast_div(KW, magic_kw);
    const FastDiv by_ow = fast_div(OW, magic_ow), by_oh = fast_div(OH, magic_oh);
    const FastDiv by_pitch = fast_div(pitch, magic_pitch);
    __shared__ Pack<T> stage_packs[STAGE_BYTES / 16];  // (rows, pitch): the input rows of the tile
    __shared__ int row_lead[STAGE_ROWS];  // per staged row: where pixel wlo sits in it, -1: padding
    T* stage = reinterpret_cast<T*>(stage_packs);
    const int tile = blockDim.x * V;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    for (int k = blockIdx.y; k < KP; k += gridDim.y) {
        T* __restrict__ row = col + k * NL;  // (N*L,)
        // this block's columns [m0, m0 + tile), shifted so that column m0 is 16-byte aligned
        const int m0 = blockIdx.x * tile - (int)(((unsigned)head + (unsigned)k * (unsigned)NL) & (V - 1));
        const int mt = m0 + threadIdx.x * V;  // this thread's V columns
        if (k >= K) {  // a padding row of the aligned GEMM: zeros
            Pack<T> p;
#pragma unroll
            for (int r = 0; r < V; ++r) p.v[r] = zero<T>();
            store_pack(row, mt, NL, p);
            continue;
        }
        const int first = imax(m0, 0), last = imin(m0 + tile, NL) - 1;
        if (first > last) continue;  // the spare last tile of a row with no lead: uniform per block
        // decode the row once: k -> (c, i, j), where tap (i, j) starts in the plane, and the
        // input columns its OW taps span
        const int c = quotient(k, by_kk), ij = k - c * KK;
        const int i = quotient(ij, by_kw), j = ij - i * KW;
        const int h0 = i * DH - PH, w0 = j * DW - PW;
        const int wlo = imax(w0, 0), whi = imin(W - 1, (OW - 1) * SW + w0);
        const int span = whi - wlo + 1;  // <= 0: every tap of the row is padding
        const int g0 = quotient(first, by_ow), rows = quotient(last, by_ow) - g0 + 1;
        // stage: row r (output row g0 + r) at stage[r * pitch], from the sector boundary at or
        // below pixel wlo of its input row, in chunks of 32 (pitch is a multiple of 32, so a
        // chunk lies in one row): one warp a chunk, every lane loading (see load_chunk)
        for (int q = warp; q < rows * (pitch >> 5); q += warps) {
            const int e0 = q << 5, r = quotient(e0, by_pitch), off = e0 - r * pitch;
            const int g = g0 + r, n = quotient(g, by_oh), h = (g - n * OH) * SH + h0;
            const bool inside = (unsigned)h < (unsigned)H && span > 0;  // uniform over the warp
            const int first_pixel = inside ? (n * C + c) * HW + h * W + wlo : 0;  // x index
            const int lead = first_pixel & (SE - 1);
            if (off == 0 && lane == 0) row_lead[r] = inside ? lead : -1;
            if (inside) load_chunk(stage + e0, x + (first_pixel - lead), off, span + lead, lane);
        }
        __syncthreads();
        // gather this thread's V columns (m -> g, ow stepped, one division) and store them
        Pack<T> p;
        const int ms = imin(imax(mt, first), last);
        int g = quotient(ms, by_ow), ow = ms - g * OW;
#pragma unroll
        for (int r = 0; r < V; ++r) {
            const int m = mt + r;
            T v = zero<T>();
            if (m >= first && m <= last) {
                const int lead = row_lead[g - g0], w = ow * SW + w0;
                if (lead >= 0 && (unsigned)w < (unsigned)W) v = stage[(g - g0) * pitch + lead + (w - wlo)];
                if (++ow == OW) {
                    ow = 0;
                    ++g;
                }
            }
            p.v[r] = v;
        }
        store_pack(row, mt, NL, p);
        __syncthreads();  // the stage is refilled for the next row
    }
}

// im2col, direct (the kernel before staging): the fallback where a staged tile would not fit or
// SW * sizeof(T) > 32. The same grid; each thread loads V columns blockDim apart straight from x
// (consecutive lanes, consecutive columns: coalesced at stride 1, SW elements apart otherwise),
// each decoded by two magic divisions. ``vec`` (the host checked N*L % V == 0 and a 16-byte
// aligned col): the values go through shared memory and each thread stores V consecutive
// columns with one 16-byte store; else each stores its own, coalesced.
template <typename T>
__device__ void im2col_direct_impl(const T* __restrict__ x, T* __restrict__ col, int N, int C, int H,
                                   int W, int KH, int KW, int SH, int SW, int PH, int PW, int DH,
                                   int DW, int OH, int OW, int K, int KP, int vec,
                                   unsigned long long magic_kk, unsigned long long magic_kw,
                                   unsigned long long magic_l, unsigned long long magic_ow) {
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

// col2im, staged: the adjoint of im2col, every input pixel gathering the column entries that
// copied it (no atomics, deterministic sums in acc_t, one rounding). A 3-D grid of (tile of TH
// input rows, channel c, image n), y and z folded past 65535.
//
// Tap row i maps the tile's rows [h0, h1) onto the output rows oh with oh*SH = h + PH - i*DH:
// a range [oa, ob], so for each tap (i, j) the tile reads one run of col row (c, i, j): columns
// n*L + oa*OW ... n*L + (ob+1)*OW - 1. The block stages G taps' runs at a time in shared memory,
// each from the sector boundary at or below its start (consecutive threads on consecutive
// addresses: coalesced at any stride; read straight from col, a strided layer's lanes fall on
// SW different rows of col and every tap's run starts at its own misaligned column), then every
// thread adds its pixels' taps from the stage. A pixel's tap (i, j) is whole where
// h + PH - i*DH = oh*SH, which the thread tracks without a division: (oh, remainder) at i = 0 by
// one magic division, then carried as i steps (DH = QDH*SH + RDH); columns the same way.
//
// Each thread sums COL2IM_PIXELS pixels blockDim apart, from ``lead`` pixels before the tile, so
// that the warps' stores of dx start on a sector boundary. The host (kernels/conv.py col2im)
// picks TH so that a tile is at most COL2IM_PIXELS * blockDim - SE + 1 pixels and one tap's run
// fits the stage (``pitch`` elements a tap, G = STAGE_BYTES / pitch taps a round); where a single
// image row is too wide for that, it launches col2im_direct.
template <typename T>
__device__ void col2im_impl(const T* __restrict__ col, T* __restrict__ dx, int N, int C, int H, int W,
                            int KH, int KW, int SH, int SW, int PH, int PW, int DH, int DW, int OH,
                            int OW, int TH, int G, int pitch, int QDH, int RDH, int QDW, int RDW,
                            unsigned long long magic_w, unsigned long long magic_sh,
                            unsigned long long magic_sw, unsigned long long magic_pitch) {
    using A = acc_t<T>;
    constexpr int SE = sector_elements<T>(), P = COL2IM_PIXELS;
    const int L = OH * OW, NL = N * L, HW = H * W;
    const FastDiv by_w = fast_div(W, magic_w), by_sh = fast_div(SH, magic_sh);
    const FastDiv by_sw = fast_div(SW, magic_sw), by_pitch = fast_div(pitch, magic_pitch);
    __shared__ Pack<T> stage_packs[STAGE_BYTES / 16];  // (G, pitch): G taps' runs of col
    T* stage = reinterpret_cast<T*>(stage_packs);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    const int h0 = blockIdx.x * TH, h1 = imin(H, h0 + TH);  // the tile's rows
    const int pixels = (h1 - h0) * W;
    for (int c = blockIdx.y; c < C; c += gridDim.y) {
        for (int n = blockIdx.z; n < N; n += gridDim.z) {
            const int base = (n * C + c) * HW + h0 * W;  // dx index of the tile's first pixel
            const int lead = base & (SE - 1);
            // this thread's pixels t = e*blockDim + tid - lead of the tile, and for each the
            // output row and column of tap (0, 0) with their remainders (h + PH = qh*SH + rh)
            A sum[P];
            int qh[P], rh[P], qw0[P], rw0[P];
#pragma unroll
            for (int e = 0; e < P; ++e) {
                const int t = e * (int)blockDim.x + (int)threadIdx.x - lead;
                const bool mine = t >= 0 && t < pixels;
                const int tt = mine ? t : 0, hl = quotient(tt, by_w);
                const int hp = h0 + hl + PH, wp = tt - hl * W + PW, q = quotient(hp, by_sh);
                qh[e] = mine ? q : -OH - (KH - 1) * DH;  // not a pixel: never a tap (qh only falls)
                rh[e] = hp - q * SH;
                qw0[e] = quotient(wp, by_sw);
                rw0[e] = wp - qw0[e] * SW;
                sum[e] = A(0);
            }
            for (int i = 0; i < KH; ++i) {
                // the output rows [oa, ob] that tap row i maps the tile's rows onto
                const int lo = h0 + PH - i * DH, hi = h1 - 1 + PH - i * DH;
                const int oa = lo <= 0 ? 0 : quotient(lo + SH - 1, by_sh);
                const int ob = hi < 0 ? -1 : imin(OH - 1, quotient(hi, by_sh));
                if (oa <= ob) {  // uniform over the block, as every branch around a barrier here
                    const int run = (ob - oa + 1) * OW;  // elements of each tap's run
                    int qw[P], rw[P];
#pragma unroll
                    for (int e = 0; e < P; ++e) {
                        qw[e] = qw0[e];
                        rw[e] = rw0[e];
                    }
                    for (int j0 = 0; j0 < KW; j0 += G) {
                        const int taps = imin(G, KW - j0);
                        const int start = ((c * KH + i) * KW + j0) * NL + n * L + oa * OW;  // col index
                        for (int q = warp; q < taps * (pitch >> 5); q += warps) {  // see load_chunk
                            const int e0 = q << 5, g = quotient(e0, by_pitch), off = e0 - g * pitch;
                            const int first = start + g * NL, skip = first & (SE - 1);
                            load_chunk(stage + e0, col + (first - skip), off, run + skip, lane);
                        }
                        __syncthreads();
                        for (int g = 0; g < taps; ++g) {
                            // stage index of (oh, ow) in tap g's run: at + oh*OW + ow
                            const int at = g * pitch + ((start + g * NL) & (SE - 1)) - oa * OW;
#pragma unroll
                            for (int e = 0; e < P; ++e) {
                                if (rh[e] == 0 && rw[e] == 0 && (unsigned)qh[e] < (unsigned)OH &&
                                    (unsigned)qw[e] < (unsigned)OW)
                                    sum[e] += to_acc(stage[at + qh[e] * OW + qw[e]]);
                                qw[e] -= QDW;  // the next tap column: w + PW - (j+1)*DW
                                rw[e] -= RDW;
                                if (rw[e] < 0) {
                                    rw[e] += SW;
                                    --qw[e];
                                }
                            }
                        }
                        __syncthreads();  // the stage is refilled by the next round
                    }
                }
#pragma unroll
                for (int e = 0; e < P; ++e) {  // the next tap row: h + PH - (i+1)*DH
                    qh[e] -= QDH;
                    rh[e] -= RDH;
                    if (rh[e] < 0) {
                        rh[e] += SH;
                        --qh[e];
                    }
                }
            }
#pragma unroll
            for (int e = 0; e < P; ++e) {
                const int t = e * (int)blockDim.x + (int)threadIdx.x - lead;
                if (t >= 0 && t < pixels) dx[base + t] = from_acc<T>(sum[e]);
            }
        }
    }
}

// col2im, direct (the kernel before staging): one thread per pixel reading col straight, a 3-D
// grid of (pixel tile within a plane, channel, image), y and z folded past 65535; a pixel (h, w)
// is decoded by one magic division. col2im_direct is the fallback where an image row is too wide
// for a staged tile; col2im_wide (I = long long) runs it past 2^31 elements.
//
// Closed-form tap ranges: the output rows that read row h (with hp = h + PH) are
// oh in [ceil((hp - (KH-1)*DH) / SH), floor(hp / SH)] clipped to [0, OH); tap row i = (hp - oh*SH)/DH
// must be whole. Its quotient and remainder are computed once at the first oh, then carried as oh
// steps by one (subtracting SH = SQ*DH + SR), so no % or / by a runtime value runs inside the tap
// loops; with DH = 1 every oh in the range is a tap. Columns the same way. Stride 1 takes plain
// loops over all taps instead, the same for every lane, which keeps a warp's loads together.
template <typename T, typename I>
__device__ void col2im_direct_impl(const T* __restrict__ col, T* __restrict__ dx, int N, int C, int H,
                                   int W, int KH, int KW, int SH, int SW, int PH, int PW, int DH,
                                   int DW, int OH, int OW, int SQH, int SRH, int SQW, int SRW,
                                   unsigned long long magic_w, unsigned long long magic_sh,
                                   unsigned long long magic_sw, unsigned long long magic_dh,
                                   unsigned long long magic_dw) {
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
                        const bool in = row_in && (unsigned)ow < (unsigned)OW;
                        sum += to_acc(keep_if(in, taps[(I)j * NL + imin(imax(ow, 0), OW - 1)]));
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
                                 int K, int KP, int head, int pitch, unsigned long long magic_kk,  \
                                 unsigned long long magic_kw, unsigned long long magic_ow,         \
                                 unsigned long long magic_oh, unsigned long long magic_pitch) {    \
        conv_detail::im2col_impl<T>(x, col, N, C, H, W, KH, KW, SH, SW, PH, PW, DH, DW, OH, OW, K, \
                                    KP, head, pitch, magic_kk, magic_kw, magic_ow, magic_oh,       \
                                    magic_pitch);                                                   \
    }
#define IM2COL_DIRECT(sfx, T)                                                                       \
    __global__ void im2col_direct_##sfx(const T* x, T* col, int N, int C, int H, int W, int KH,     \
                                        int KW, int SH, int SW, int PH, int PW, int DH, int DW,     \
                                        int OH, int OW, int K, int KP, int vec,                     \
                                        unsigned long long magic_kk, unsigned long long magic_kw,   \
                                        unsigned long long magic_l, unsigned long long magic_ow) {  \
        conv_detail::im2col_direct_impl<T>(x, col, N, C, H, W, KH, KW, SH, SW, PH, PW, DH, DW, OH, \
                                           OW, K, KP, vec, magic_kk, magic_kw, magic_l, magic_ow);  \
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
                                 int TH, int G, int pitch, int QDH, int RDH, int QDW, int RDW,     \
                                 unsigned long long magic_w, unsigned long long magic_sh,          \
                                 unsigned long long magic_sw, unsigned long long magic_pitch) {    \
        conv_detail::col2im_impl<T>(col, dx, N, C, H, W, KH, KW, SH, SW, PH, PW, DH, DW, OH, OW,   \
                                    TH, G, pitch, QDH, RDH, QDW, RDW, magic_w, magic_sh, magic_sw, \
                                    magic_pitch);                                                   \
    }
#define COL2IM_DIRECT(sfx, T)                                                                       \
    __global__ void col2im_direct_##sfx(const T* col, T* dx, int N, int C, int H, int W, int KH,    \
                                        int KW, int SH, int SW, int PH, int PW, int DH, int DW,     \
                                        int OH, int OW, int SQH, int SRH, int SQW, int SRW,         \
                                        unsigned long long magic_w, unsigned long long magic_sh,    \
                                        unsigned long long magic_sw, unsigned long long magic_dh,   \
                                        unsigned long long magic_dw) {                              \
        conv_detail::col2im_direct_impl<T, int>(col, dx, N, C, H, W, KH, KW, SH, SW, PH, PW, DH,   \
                                                DW, OH, OW, SQH, SRH, SQW, SRW, magic_w, magic_sh, \
                                                magic_sw, magic_dh, magic_dw);                      \
    }
#define COL2IM_WIDE(sfx, T)                                                                         \
    __global__ void col2im_wide_##sfx(const T* col, T* dx, int N, int C, int H, int W, int KH,      \
                                      int KW, int SH, int SW, int PH, int PW, int DH, int DW,       \
                                      int OH, int OW, int SQH, int SRH, int SQW, int SRW,           \
                                      unsigned long long magic_w, unsigned long long magic_sh,      \
                                      unsigned long long magic_sw, unsigned long long magic_dh,     \
                                      unsigned long long magic_dw) {                                \
        conv_detail::col2im_direct_impl<T, long long>(col, dx, N, C, H, W, KH, KW, SH, SW, PH,    \
                                                      PW, DH, DW, OH, OW, SQH, SRH, SQW, SRW,      \
                                                      magic_w, magic_sh, magic_sw, magic_dh,       \
                                                      magic_dw);                                    \
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
TF_FLOAT_TYPES(IM2COL_DIRECT)
TF_FLOAT_TYPES(IM2COL_WIDE)
TF_FLOAT_TYPES(COL2IM)
TF_FLOAT_TYPES(COL2IM_DIRECT)
TF_FLOAT_TYPES(COL2IM_WIDE)
TF_FLOAT_TYPES(CONV_OUTPUT)
TF_FLOAT_TYPES(CONV_OUTPUT_GRAD)
}
