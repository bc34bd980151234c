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
    return keep_if(inside, plane[imin(imax(h, 0), H - 1) * W + imin(imax(w, 0), W - 1)]);
}

// The staged kernels stage what a tile reads in the launch's dynamic shared memory (sized by the
// host, kernels/conv.py), in runs that start on a 32-byte sector boundary, so that consecutive
// threads load consecutive, sector-aligned addresses whatever the stride.
constexpr int COL2IM_PIXELS = 4;  // col2im: the pixels one thread sums (kernels/conv.py mirrors it)

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

// im2col: one row k = (c, i, j) of col per blockIdx.y (folded past 65535), a tile of blockDim *
// IM2COL_COLUMNS columns per blockIdx.x; the images run along the columns (m = n*L + oh*OW + ow),
// so a row is one run of N*L elements. Each thread takes IM2COL_COLUMNS columns blockDim apart
// (consecutive lanes, consecutive columns), decodes each (two magic divisions) and loads the
// aligned 16-byte pack of x that holds its pixel: all its loads are independent (that many 16-byte
// loads in flight), and a warp's packs are consecutive whatever the stride, as long as a tap's
// columns lie at most 16 bytes apart (SW * sizeof(T) <= 16: AlexNet conv1's stride 4 in fp32), so
// every request is one run of whole packs, no sector loaded for nothing. The pixel is picked from
// its pack by a select (a pixel in the padding is read at the nearest one inside and masked), and
// stored with consecutive lanes on consecutive columns, the tile starting ``lead`` columns early
// so that its warps store whole sectors (``head``: col's first element past a sector boundary,
// read off col's address, so a view of a larger buffer is aligned as well); the lanes outside the
// row store its first or last column again. No shared memory, so no bank conflicts and no stage
// to size. The host launches it where x is 16-byte aligned; rows k >= K (the GEMM's padding of K)
// are zeros, stored the same way and decoded not at all (their channel k / KK would lie past x).
constexpr int IM2COL_COLUMNS = 4;

// Element ``at`` of a pack, by selects (a runtime index into registers would go to local memory).
template <typename T>
__device__ __forceinline__ T pick(const Pack<T>& p, int at) {
    T v = p.v[0];
#pragma unroll
    for (int r = 1; r < (int)(16 / sizeof(T)); ++r) v = at == r ? p.v[r] : v;
    return v;
}

template <typename T>
__device__ void im2col_impl(const T* __restrict__ x, T* __restrict__ col, int N, int C, int H, int W,
                            int KH, int KW, int SH, int SW, int PH, int PW, int DH, int DW, int OH,
                            int OW, int K, int KP, unsigned long long magic_kk,
                            unsigned long long magic_kw, unsigned long long magic_ow,
                            unsigned long long magic_oh) {
    constexpr int V = 16 / sizeof(T), SE = sector_elements<T>(), U = IM2COL_COLUMNS;
    const int L = OH * OW, NL = N * L, HW = H * W, KK = KH * KW;
    const FastDiv by_kk = fast_div(KK, magic_kk), by_kw = fast_div(KW, magic_kw);
    const FastDiv by_ow = fast_div(OW, magic_ow), by_oh = fast_div(OH, magic_oh);
    const Pack<T>* __restrict__ packs = reinterpret_cast<const Pack<T>*>(x);  // 16-byte aligned
    // col's first element past a sector boundary, in elements (the host checked col is aligned
    // to its element size)
    const int head = (int)((reinterpret_cast<unsigned long long>(col) / sizeof(T)) & (SE - 1));
    for (int k = blockIdx.y; k < KP; k += gridDim.y) {
        T* __restrict__ row = col + k * NL;  // (N*L,)
        const int lead = (head + k * NL) & (SE - 1);  // row's first column, in elements mod a sector
        const int m0 = (int)(blockIdx.x * blockDim.x) * U - lead;  // the tile's first column
        if (m0 >= NL) continue;  // the spare last tile of a row with a short lead: uniform
        if (k >= K) {  // a padding row of the aligned GEMM: zeros, stored as the pixels are
#pragma unroll
            for (int u = 0; u < U; ++u)
                row[imin(imax(m0 + u * (int)blockDim.x + (int)threadIdx.x, 0), NL - 1)] = zero<T>();
            continue;
        }
        // decode the row once: k -> (c, i, j), and where tap (i, j) starts in the plane
        const int c = quotient(k, by_kk), ij = k - c * KK;
        const int i = quotient(ij, by_kw), j = ij - i * KW;
        const int h0 = i * DH - PH, w0 = j * DW - PW;
        Pack<T> p[U];  // the packs, all loaded before any is used: U 16-byte loads in flight
        int at[U];     // the pixel's place in its pack, -1 in the padding
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int m = imin(imax(m0 + u * (int)blockDim.x + (int)threadIdx.x, 0), NL - 1);
            const int g = quotient(m, by_ow), ow = m - g * OW, n = quotient(g, by_oh);
            const int h = (g - n * OH) * SH + h0, w = ow * SW + w0;
            const bool inside = (unsigned)h < (unsigned)H && (unsigned)w < (unsigned)W;
            const int e = (n * C + c) * HW + imin(imax(h, 0), H - 1) * W + imin(imax(w, 0), W - 1);
            p[u] = packs[e / V];
            at[u] = inside ? e & (V - 1) : -1;
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int m = imin(imax(m0 + u * (int)blockDim.x + (int)threadIdx.x, 0), NL - 1);
            row[m] = keep_if(at[u] >= 0, pick(p[u], at[u]));
        }
    }
}

// im2col, staged (where a tap's columns lie more than 16 bytes apart, so that im2col's packs
// would leave most of each sector unread). One row k = (c, i, j) of col per block (blockIdx.y,
// folded past 65535), a tile
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
// The host (kernels/conv.py im2col) launches this where 16 < SW * sizeof(T) <= 32 (there, every
// sector of the input row still holds a tap, so staging moves no more sectors than the direct
// gather) and a tile's ``stage_rows`` rows fit STAGE_BYTES and STAGE_ROWS; the launch's dynamic
// shared memory holds them (stage_rows * pitch elements) and a row_lead per row.
template <typename T>
__device__ void im2col_staged_impl(const T* __restrict__ x, T* __restrict__ col, int N, int C,
                                   int H, int W, int KH, int KW, int SH, int SW, int PH, int PW,
                                   int DH, int DW, int OH, int OW, int K, int KP, int head,
                                   int pitch, int stage_rows, unsigned long long magic_kk,
                                   unsigned long long magic_kw, unsigned long long magic_ow,
                                   unsigned long long magic_oh, unsigned long long magic_pitch) {
    constexpr int V = 16 / sizeof(T), SE = sector_elements<T>();
    const int L = OH * OW, NL = N * L, HW = H * W, KK = KH * KW;
    const FastDiv by_kk = fast_div(KK, magic_kk), by_kw = fast_div(KW, magic_kw);
    const FastDiv by_ow = fast_div(OW, magic_ow), by_oh = fast_div(OH, magic_oh);
    const FastDiv by_pitch = fast_div(pitch, magic_pitch);
    TF_DYNAMIC_SHARED(T, stage);  // (stage_rows, pitch): the input rows of the tile, then
    int* row_lead = reinterpret_cast<int*>(stage + stage_rows * pitch);  // where pixel wlo sits in
                                                                         // each row, -1: padding
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
    TF_SHARED(Pack<T>, stage_packs, 256);  // the tile's 256*V values, staged for the vector stores
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

// ---- col2im's stage --------------------------------------------------------------------------

// Independent 16-byte loads a thread has in flight in a staging loop.
constexpr int STAGE_UNROLL = 4;

// One tap's run of col in a col2im round: where it starts in col and how long it is, in 16-byte
// packs, whole 32-byte sectors from the boundary at or below its first element (two lanes a
// sector: a request moves whole sectors, as the GPU does anyway), and the stage index of its
// output position (oh, ow) = (0, 0) of the tile's first image.
struct TapRun {
    int src, packs, at;
};

// The run of tap f = (i, j) for the tile of rows [h0, h1) of images n0 .. n0+nb-1, staged as run
// ``g`` of its round (at g * pitch). A tap whose rows all fall in the padding (no output row reads
// the tile) has no packs: nothing is loaded for it, and what its slots hold is read and masked.
template <typename T>
__device__ __forceinline__ TapRun tap_run(int g, int f, int c, int n0, int nb, int h0, int h1,
                                          int KH, int KW, int SH, int PH, int DH, int OH, int OW,
                                          int L, int NL, int pitch, FastDiv by_kw, FastDiv by_sh) {
    constexpr int V = 16 / sizeof(T), SE = sector_elements<T>();
    const int i = quotient(f, by_kw), j = f - i * KW;
    const int lo = h0 + PH - i * DH, hi = h1 - 1 + PH - i * DH;  // oh*SH over the tile's rows
    const int oa = lo <= 0 ? 0 : quotient(lo + SH - 1, by_sh);
    const int ob = hi < 0 ? -1 : imin(OH - 1, quotient(hi, by_sh));
    if (oa > ob) return TapRun{0, 0, g * pitch};
    const int start = ((c * KH + i) * KW + j) * NL + n0 * L + oa * OW;  // col index of its first
    const int len = (nb - 1) * L + (ob - oa + 1) * OW, skip = start & (SE - 1);
    const int packs = (len + skip + SE - 1) / SE * (SE / V);  // whole sectors
    return TapRun{(start - skip) / V, packs, g * pitch + skip - oa * OW};
}

// Copies the ``total`` packs of a round into the stage: pack p = g*packs + k is pack k of run g (a
// run shorter than ``packs`` repeats its last pack into slots nobody reads). Consecutive threads
// take consecutive packs, each thread STAGE_UNROLL of them blockDim apart, all loaded before any is
// stored: that many independent 16-byte loads in flight, each warp-wide request a run of 512
// bytes. A lane loads nothing past ``total`` (in the last round: the lanes of a warp that skip a
// load skip every later one too, so each lane runs the loads of the others in the same order, see
// load_chunk) and nothing for an empty run (whose slots nobody reads). No load passes ``last``,
// src's last pack (a run's last sector may end past the array).
template <typename T>
__device__ __forceinline__ void stage_runs(Pack<T>* stage, const Pack<T>* __restrict__ src,
                                           int last, const TapRun* runs, int total, int packs,
                                           FastDiv by_packs) {
    for (int p0 = threadIdx.x; p0 < total; p0 += STAGE_UNROLL * (int)blockDim.x) {
        Pack<T> v[STAGE_UNROLL];
#pragma unroll
        for (int u = 0; u < STAGE_UNROLL; ++u) {
            const int p = p0 + u * (int)blockDim.x, g = quotient(p, by_packs);
            if (p >= total) break;
            const TapRun r = runs[g];
            if (r.packs > 0) v[u] = src[imin(r.src + imin(p - g * packs, r.packs - 1), last)];
        }
#pragma unroll
        for (int u = 0; u < STAGE_UNROLL; ++u) {
            const int p = p0 + u * (int)blockDim.x;
            if (p < total) stage[p] = v[u];
        }
    }
}

// The stage element of output position (oh, ow) of image offset ``image`` in the run at ``at``,
// which fills slots [lo, lo + pitch). Every lane of a warp loads it for every tap, also where the
// tap misses its pixel (a stride phase, the padding: the caller masks the value), at the same
// affine index, clamped into the run's slots: the words of a warp then run as its pixels do
// (consecutive at stride 1, where OW = W; shared at larger strides), at most 32 apart, and no
// two lanes meet in a bank at different words. A lane clamped to a neighbour's word is served
// with it. At a stride (SW > 1) the column is clamped into the row too, so that a warp wrapping
// from one image row to the next spans no more than a row of the run (fp64's half warps: 16
// words).
template <typename T>
__device__ __forceinline__ T gather_tap(const T* stage, int at, int lo, int pitch, int image,
                                        int oh, int ow, int OW, int SW) {
    const int col = SW > 1 ? imin(imax(ow, 0), OW - 1) : ow;
    return stage[imin(imax(at + image + oh * OW + col, lo), lo + pitch - 1)];
}

// (q, r) with q*S + r = v, 0 <= r < S, moved to v - D where D = QD*S + RD (0 <= RD < S): the
// output row (or column) and remainder of a pixel's next tap, without a division.
__device__ __forceinline__ void step_tap(int& q, int& r, int QD, int RD, int S) {
    q -= QD;
    r -= RD;
    if (r < 0) {
        r += S;
        --q;
    }
}

// col2im, staged: the adjoint of im2col, every input pixel gathering the column entries that
// copied it (no atomics, deterministic sums in acc_t, one rounding). A 3-D grid of (tile of TH
// input rows, channel c, group of NB images), y and z folded past 65535. A tile is TH rows of one
// image plane where planes are large, or NB whole planes (TH = H) of one channel where they are
// small (AlexNet's 13x13, ResNet's 8x8 and 7x7): every block then has 128-256 threads' work.
//
// Tap (i, j) maps the tile's rows [h0, h1) onto the output rows oh with oh*SH = h + PH - i*DH: a
// range [oa, ob], so for each tap the tile reads one run of col row (c, i, j), the columns
// n0*L + oa*OW ... (n0+NB-1)*L + (ob+1)*OW - 1 (the images of a channel are adjacent in a row
// of col). A round stages G taps' runs in the launch's dynamic shared memory (G * pitch
// elements, the host sizes it per launch), each run from the sector boundary at or below its
// start, as 16-byte packs: consecutive threads on consecutive packs, STAGE_UNROLL independent
// loads in flight per thread. Then every thread adds its pixels' taps from the stage. A pixel's
// tap (i, j) is whole where h + PH - i*DH = oh*SH, which the thread tracks without a division:
// (oh, remainder) at tap (0, 0) by one magic division, then carried as j and i step (DW = QDW*SW +
// RDW, DH = QDH*SH + RDH). Rounds run over the taps in row-major order, so a round may end and the
// next begin inside a row of taps.
//
// Each thread sums COL2IM_PIXELS pixels blockDim apart, from ``lead`` pixels before the tile, so
// that the warps' stores of dx start on a sector boundary. The host (kernels/conv.py col2im_tile)
// picks the tile (at most COL2IM_PIXELS * blockDim - SE + 1 pixels), the pitch (a run of the
// tile, its lead included, in whole packs) and G; it launches col2im_direct where a single image
// row is too wide for a tile or col is not 16-byte aligned.
template <typename T>
__device__ void col2im_impl(const T* __restrict__ col, T* __restrict__ dx, int N, int C, int H, int W,
                            int KH, int KW, int SH, int SW, int PH, int PW, int DH, int DW, int OH,
                            int OW, int TH, int NB, int G, int pitch, int QDH, int RDH, int QDW,
                            int RDW, unsigned long long magic_w, unsigned long long magic_plane,
                            unsigned long long magic_kw, unsigned long long magic_sh,
                            unsigned long long magic_sw, unsigned long long magic_packs) {
    using A = acc_t<T>;
    constexpr int V = 16 / sizeof(T), SE = sector_elements<T>(), P = COL2IM_PIXELS;
    const int L = OH * OW, NL = N * L, HW = H * W, KK = KH * KW, packs = pitch / V;
    const FastDiv by_w = fast_div(W, magic_w), by_plane = fast_div(TH * W, magic_plane);
    const FastDiv by_kw = fast_div(KW, magic_kw), by_sh = fast_div(SH, magic_sh);
    const FastDiv by_sw = fast_div(SW, magic_sw), by_packs = fast_div(packs, magic_packs);
    TF_DYNAMIC_SHARED(Pack<T>, stage_packs);  // (G, packs): G taps' runs of col, then their TapRuns
    const T* stage = reinterpret_cast<const T*>(stage_packs);
    TapRun* runs = reinterpret_cast<TapRun*>(stage_packs + G * packs);
    const Pack<T>* __restrict__ col_packs = reinterpret_cast<const Pack<T>*>(col);  // 16-aligned
    const int last_pack = (KK * C * NL - 1) / V;  // col's last pack (col has < 2^31 elements)
    const int h0 = blockIdx.x * TH, h1 = imin(H, h0 + TH);  // the tile's rows
    for (int c = blockIdx.y; c < C; c += gridDim.y) {
        for (int n0 = blockIdx.z * NB; n0 < N; n0 += gridDim.z * NB) {
            const int nb = imin(NB, N - n0), pixels = nb * (h1 - h0) * W;
            const int base = (n0 * C + c) * HW + h0 * W;  // dx index of the tile's first pixel
            const int lead = base & (SE - 1);
            // this thread's pixels t = e*blockDim + tid - lead of the tile: image b, and the output
            // row and column of tap (0, 0) with their remainders (h + PH = qh*SH + rh)
            A sum[P];
            int qh[P], rh[P], qw0[P], rw0[P], qw[P], rw[P], image[P];
            unsigned mine = 0;  // bit e: pixel e is in the tile (else the lane mimics its nearest)
#pragma unroll
            for (int e = 0; e < P; ++e) {
                const int t = e * (int)blockDim.x + (int)threadIdx.x - lead;
                mine |= (unsigned)(t >= 0 && t < pixels) << e;
                const int tt = imin(imax(t, 0), pixels - 1), b = quotient(tt, by_plane);
                const int tp = tt - b * (TH * W);
                const int hl = quotient(tp, by_w), hp = h0 + hl + PH, wp = tp - hl * W + PW;
                const int q = quotient(hp, by_sh);
                qh[e] = q;
                rh[e] = hp - q * SH;
                qw[e] = qw0[e] = quotient(wp, by_sw);
                rw[e] = rw0[e] = wp - qw0[e] * SW;
                image[e] = b * L;  // where image b's columns start in a staged run
                sum[e] = A(0);
            }
            int j = 0;  // the tap column the sums are at (uniform over the block)
            for (int f0 = 0; f0 < KK; f0 += G) {
                const int taps = imin(G, KK - f0);
                for (int g = threadIdx.x; g < taps; g += blockDim.x)
                    runs[g] = tap_run<T>(g, f0 + g, c, n0, nb, h0, h1, KH, KW, SH, PH, DH, OH, OW, L,
                                         NL, pitch, by_kw, by_sh);
                __syncthreads();
                stage_runs(stage_packs, col_packs, last_pack, runs, taps * packs, packs, by_packs);
                __syncthreads();
                for (int g = 0; g < taps; ++g) {
                    const int at = runs[g].at;
#pragma unroll
                    for (int e = 0; e < P; ++e) {  // every lane loads (gather_tap), a select keeps
                        const bool tap = (mine >> e & 1u) && rh[e] == 0 && rw[e] == 0 &&
                                         (unsigned)qh[e] < (unsigned)OH &&
                                         (unsigned)qw[e] < (unsigned)OW;
                        const T v =
                            gather_tap(stage, at, g * pitch, pitch, image[e], qh[e], qw[e], OW, SW);
                        sum[e] += to_acc(keep_if(tap, v));
                    }
                    if (++j < KW) {
#pragma unroll
                        for (int e = 0; e < P; ++e)  // the next tap column: w + PW - (j+1)*DW
                            step_tap(qw[e], rw[e], QDW, RDW, SW);
                    } else {  // the next row of taps: h + PH - (i+1)*DH, from tap column 0
                        j = 0;
#pragma unroll
                        for (int e = 0; e < P; ++e) {
                            qw[e] = qw0[e];
                            rw[e] = rw0[e];
                            step_tap(qh[e], rh[e], QDH, RDH, SH);
                        }
                    }
                }
                __syncthreads();  // the next round rewrites the stage and the runs
            }
#pragma unroll
            for (int e = 0; e < P; ++e) {  // pixel t of the tile is (image b, pixel tp of it)
                const int t = e * (int)blockDim.x + (int)threadIdx.x - lead;
                const int b = quotient(imax(t, 0), by_plane), tp = t - b * (TH * W);
                if (t >= 0 && t < pixels) dx[base + b * C * HW + tp] = from_acc<T>(sum[e]);
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
                        step_tap(j, rw, SQW, SRW, DW);
                    }
                }
                step_tap(i, rh, SQH, SRH, DH);
            }
            dx[((I)n * C + c) * HW + p] = from_acc<T>(sum);
        }
    }
}

// The copies around the GEMM see the N*L columns of a channel o as one run: out[o] (O, N*L) is
// contiguous, y[:, o] (N, O, L) is N runs of L. A 2-D grid of (tile of the columns, channel o), y
// folded past 65535. Each thread takes COPY_BYTES / sizeof(T) columns blockDim apart, loaded
// before any is stored: that many independent loads in flight, each warp-wide request one run
// of consecutive columns. The column m = n*L + l is decoded by one magic division; the runs of L
// of the other side are stored (or loaded) coalesced, a warp crossing at most one image boundary
// per request. Blocks have as many threads as the columns need, up to 256 in whole warps, so no
// thread idles beyond the last warp of a run (13x13 planes: every thread of a block has work).
// Channel rows are reached by 64-bit pointer steps; offsets within them are 32-bit (the host runs
// the reference past 2^31 elements).
constexpr int COPY_BYTES = 16;

template <typename T>
__device__ __forceinline__ constexpr int copy_columns() {
    return COPY_BYTES / (int)sizeof(T);
}

// y (N, O, L) = out (O, N, L) + bias, ReLU'd when ``relu``: the GEMM output moved to NCHW in the
// copy that had to be made anyway. A thread's columns m = m0 + u*blockDim (u < U) before N*L.
template <typename T>
__device__ void conv_output_impl(const T* __restrict__ out, const T* __restrict__ bias,
                                 T* __restrict__ y, int N, int O, int L, int relu,
                                 unsigned long long magic_l) {
    using A = acc_t<T>;
    constexpr int U = copy_columns<T>();
    const int NL = N * L, OL = O * L, m0 = blockIdx.x * (blockDim.x * U) + threadIdx.x;
    const FastDiv by_l = fast_div(L, magic_l);
    const T* src = out + (long long)blockIdx.y * NL;  // out[o, :]
    T* dst = y + (long long)blockIdx.y * L;           // y[0, o, :]
    const long long src_step = (long long)gridDim.y * NL, dst_step = (long long)gridDim.y * L;
    for (int o = blockIdx.y; o < O; o += gridDim.y, src += src_step, dst += dst_step) {
        T v[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int m = m0 + u * (int)blockDim.x;
            if (m >= NL) break;
            v[u] = src[m];
        }
        const A b = bias != nullptr ? to_acc(bias[o]) : A(0);
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int m = m0 + u * (int)blockDim.x;
            if (m >= NL) break;
            const int n = quotient(m, by_l);
            T r = v[u];  // a plain copy moves the bits
            if (bias != nullptr || relu) {
                const A a = to_acc(r) + b;
                r = (relu && a <= A(0)) ? zero<T>() : from_acc<T>(a);  // NaN passes, as max(NaN, 0)
            }
            dst[n * OL + (m - n * L)] = r;  // y[n, o, l]
        }
    }
}

// Sums the block's ``v`` (one per thread) into the returned total; every thread must call it.
// blockDim.x is any multiple of 32 up to 256: a tree over the next power of two, in a fixed order.
template <typename A>
__device__ __forceinline__ A block_sum(A v, A* sums) {
    const int tid = threadIdx.x, n = blockDim.x;
    sums[tid] = v;
    __syncthreads();
    int half = 1;
    while (2 * half < n) half *= 2;
    for (; half > 0; half /= 2) {
        if (tid < half && tid + half < n) sums[tid] += sums[tid + half];
        __syncthreads();
    }
    const A total = sums[0];
    __syncthreads();  // sums is reused by the next call
    return total;
}

// The way back: gy (O, N*L) = gout (N, O, L), zeroed where the fused ReLU's output y <= 0 (when y
// is given), and each block's sum of its gy for the bias gradient in ``partial`` (when given):
// partial[o, blockIdx.x] over the block's columns (the host sums the row of a channel).
template <typename T>
__device__ void conv_output_grad_impl(const T* __restrict__ gout, const T* __restrict__ y,
                                      T* __restrict__ gy, acc_t<T>* __restrict__ partial, int N,
                                      int O, int L, unsigned long long magic_l) {
    using A = acc_t<T>;
    constexpr int U = copy_columns<T>();
    TF_SHARED(A, sums, 256);
    const int NL = N * L, OL = O * L, m0 = blockIdx.x * (blockDim.x * U) + threadIdx.x;
    const FastDiv by_l = fast_div(L, magic_l);
    const T* src = gout + (long long)blockIdx.y * L;         // gout[0, o, :]
    const T* relu_out = y != nullptr ? y + (long long)blockIdx.y * L : nullptr;
    T* dst = gy + (long long)blockIdx.y * NL;               // gy[o, :]
    const long long src_step = (long long)gridDim.y * L, dst_step = (long long)gridDim.y * NL;
    for (int o = blockIdx.y; o < O; o += gridDim.y, src += src_step, dst += dst_step) {
        T v[U], mask[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int m = m0 + u * (int)blockDim.x, n = quotient(m, by_l);
            if (m >= NL) break;
            const int at = n * OL + (m - n * L);  // (n, o, l)
            v[u] = src[at];
            if (relu_out != nullptr) mask[u] = relu_out[at];
        }
        A sum = A(0);
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int m = m0 + u * (int)blockDim.x;
            if (m >= NL) break;
            if (relu_out != nullptr && to_acc(mask[u]) <= A(0)) v[u] = zero<T>();
            dst[m] = v[u];
            sum += to_acc(v[u]);
        }
        if (relu_out != nullptr) relu_out += src_step;
        if (partial == nullptr) continue;  // uniform over the grid: no thread skips a barrier alone
        const A total = block_sum(sum, sums);
        if (threadIdx.x == 0) partial[o * (int)gridDim.x + (int)blockIdx.x] = total;
    }
}

}  // namespace conv_detail

// One entry point per dtype (TF_FLOAT_TYPES): f32, f64, f16, bf16. The magic_* arguments are
// _fastdiv.magic(d) of the divisor their name says.
#define IM2COL(sfx, T)                                                                              \
    __global__ void im2col_##sfx(const T* x, T* col, int N, int C, int H, int W, int KH, int KW,    \
                                 int SH, int SW, int PH, int PW, int DH, int DW, int OH, int OW,    \
                                 int K, int KP, unsigned long long magic_kk,                       \
                                 unsigned long long magic_kw, unsigned long long magic_ow,         \
                                 unsigned long long magic_oh) {                                    \
        conv_detail::im2col_impl<T>(x, col, N, C, H, W, KH, KW, SH, SW, PH, PW, DH, DW, OH, OW, K, \
                                    KP, magic_kk, magic_kw, magic_ow, magic_oh);                   \
    }
#define IM2COL_STAGED(sfx, T)                                                                       \
    __global__ void im2col_staged_##sfx(const T* x, T* col, int N, int C, int H, int W, int KH,     \
                                        int KW, int SH, int SW, int PH, int PW, int DH, int DW,     \
                                        int OH, int OW, int K, int KP, int head, int pitch,         \
                                        int stage_rows, unsigned long long magic_kk,                \
                                        unsigned long long magic_kw, unsigned long long magic_ow,   \
                                        unsigned long long magic_oh,                                \
                                        unsigned long long magic_pitch) {                           \
        conv_detail::im2col_staged_impl<T>(x, col, N, C, H, W, KH, KW, SH, SW, PH, PW, DH, DW, OH, \
                                           OW, K, KP, head, pitch, stage_rows, magic_kk, magic_kw,  \
                                           magic_ow, magic_oh, magic_pitch);                        \
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
                                 int TH, int NB, int G, int pitch, int QDH, int RDH, int QDW,      \
                                 int RDW, unsigned long long magic_w,                              \
                                 unsigned long long magic_plane, unsigned long long magic_kw,      \
                                 unsigned long long magic_sh, unsigned long long magic_sw,         \
                                 unsigned long long magic_packs) {                                 \
        conv_detail::col2im_impl<T>(col, dx, N, C, H, W, KH, KW, SH, SW, PH, PW, DH, DW, OH, OW,   \
                                    TH, NB, G, pitch, QDH, RDH, QDW, RDW, magic_w, magic_plane,    \
                                    magic_kw, magic_sh, magic_sw, magic_packs);                    \
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
                                      int relu, unsigned long long magic_l) {                       \
        conv_detail::conv_output_impl<T>(out, bias, y, N, O, L, relu, magic_l);                     \
    }
#define CONV_OUTPUT_GRAD(sfx, T)                                                                    \
    __global__ void conv_output_grad_##sfx(const T* gout, const T* y, T* gy, acc_t<T>* partial,     \
                                           int N, int O, int L, unsigned long long magic_l) {       \
        conv_detail::conv_output_grad_impl<T>(gout, y, gy, partial, N, O, L, magic_l);              \
    }
extern "C" {
TF_FLOAT_TYPES(IM2COL)
TF_FLOAT_TYPES(IM2COL_STAGED)
TF_FLOAT_TYPES(IM2COL_DIRECT)
TF_FLOAT_TYPES(IM2COL_WIDE)
TF_FLOAT_TYPES(COL2IM)
TF_FLOAT_TYPES(COL2IM_DIRECT)
TF_FLOAT_TYPES(COL2IM_WIDE)
TF_FLOAT_TYPES(CONV_OUTPUT)
TF_FLOAT_TYPES(CONV_OUTPUT_GRAD)
}
