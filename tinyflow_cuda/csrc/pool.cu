// Max and average pooling over NCHW in every floating dtype (tinyflow/kernels/pool.py is the
// reference; tinyflow_cuda/kernels/pool.py launches these and picks between the two kernels of
// each direction).
//
// Two ways to run each direction, written for the memory limit:
//
// - tiled (maxpool2d_forward, avgpool2d_forward, maxpool2d_backward, avgpool2d_backward): a block
//   per tile of destination rows. It stages the contiguous span of source rows its tile needs
//   (with the halo of the windows) in shared memory, consecutive threads on consecutive
//   elements, then computes every destination element of the tile from shared memory and
//   stores the tile, again consecutive threads on consecutive elements. Forward: destination =
//   out (and argmax), source = x; backward: destination = dx, source = gout (and argmax). The
//   stride-2 window reads of AlexNet's 3x3/2 pools (lanes 2 elements apart: twice the sectors
//   of the bytes they use) and the backward's uneven gathers now hit shared memory only; global
//   memory sees whole sectors. A tile is either several whole planes (small planes, e.g.
//   AlexNet's 27x27 and 13x13: one block does enough work and the staged span is contiguous
//   across the planes) or a run of rows of one plane (large planes). The first warp of each
//   global loop starts on a 32-byte sector boundary of every array it touches; the lanes before
//   the tile's first element repeat that element, so that every lane runs each access.
// - flat (the *_flat kernels): one thread per destination element, flat over the whole tensor,
//   reading its window from global memory. The host takes it where the staged span of a single
//   destination row would not fit in a block's shared memory (huge windows or dilations over
//   wide rows): tinyflow_cuda/kernels/pool.py, plan_tiles.
//
// Both share the window code (window_max, window_sum, gather_max, gather_avg), hence the same
// first-maximum and NaN rules and the same summation order, and both keep to 32-bit indices:
// the host launches at most 2^31 - 1 elements at a time (whole planes), and divides by runtime
// values only through host-computed magic numbers (fastdiv.cuh: one multiply-high each). The
// backward gathers (no atomics, deterministic even where AlexNet's 3x3 stride-2 windows overlap)
// and visits only the windows that cover its pixel: their range along each axis is computed once
// per pixel, and the tap of each window is stepped, not divided, inside the loop. fp16 / bf16 load
// to fp32 (to_acc), sum and compare there, round once (from_acc); the max itself is stored as the
// winner's raw bits. The argmax is the int32 window offset i * KW + j.
#include "common.cuh"
#include "fastdiv.cuh"

namespace pool_detail {
using namespace index32;

// ---- window code shared by the tiled and the flat kernels ------------------------------------
// A plane's rows are reached as ``rows + (h - s0) * W``: the plane in global memory (s0 = 0) or
// the rows s0.. of it staged in shared memory.

template <typename T>
struct MaxTap {
    T value;  // the winner's raw bits (-inf where every tap is padding)
    int k;    // its window offset i * KW + j
};

// The max of the window whose top-left tap is (h0, w0) (in the padding where negative).
template <typename T>
__device__ __forceinline__ MaxTap<T> window_max(const T* rows, int s0, int H, int W, int h0,
                                                int w0, int KH, int KW, int DH, int DW) {
    MaxTap<T> best{from_acc<T>(neg_inf(acc_t<T>(0))), 0};  // padding never wins
    acc_t<T> best_v = neg_inf(acc_t<T>(0));
    for (int i = 0, h = h0; i < KH; ++i, h += DH) {
        if (h < 0 || h >= H) continue;
        const T* row = rows + (h - s0) * W;
        for (int j = 0, w = w0; j < KW; ++j, w += DW) {
            if (w < 0 || w >= W) continue;
            const T raw = row[w];
            const acc_t<T> v = to_acc(raw);
            // strict: the first maximum in row-major order wins; a NaN wins over any number
            // (and the first NaN over later ones), so the maximum propagates NaN as PyTorch's
            if (v > best_v || (v != v && best_v == best_v)) {
                best_v = v;
                best.value = raw;
                best.k = i * KW + j;
            }
        }
    }
    return best;
}

// The element count PyTorch divides a window by, along one axis: with count_include_pad the
// padding counts but the ceil_mode overhang beyond it does not.
__device__ __forceinline__ int avg_count(int start, int kernel, int size, int pad,
                                         int count_include_pad) {
    if (count_include_pad) return imin(start + kernel, size + pad) - start;
    return imin(start + kernel, size) - imax(start, 0);
}

// The mean of the window whose top-left tap is (h0, w0), with PyTorch's divisor.
template <typename T>
__device__ __forceinline__ T window_mean(const T* rows, int s0, int H, int W, int h0, int w0,
                                         int KH, int KW, int PH, int PW, int count_include_pad) {
    using A = acc_t<T>;
    const int h_lo = imax(h0, 0), h_hi = imin(h0 + KH, H);  // the taps inside the image
    const int w_lo = imax(w0, 0), w_hi = imin(w0 + KW, W);
    A sum = A(0);
    for (int h = h_lo; h < h_hi; ++h) {
        const T* row = rows + (h - s0) * W;
        for (int w = w_lo; w < w_hi; ++w) sum += to_acc(row[w]);
    }
    const int count = avg_count(h0, KH, H, PH, count_include_pad) *
                      avg_count(w0, KW, W, PW, count_include_pad);
    return from_acc<T>(sum * reciprocal(A(count)));
}

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

// The first window covering coordinate p (ceil((p + pad - span) / S), at least 0).
__device__ __forceinline__ int first_window(int p, int pad, int span, FastDiv by_s) {
    const int pp = p + pad;
    return pp > span ? (int)fdiv((unsigned)(pp - span - 1), by_s) + 1 : 0;
}

// The last window covering coordinate p (floor((p + pad) / S), at most O - 1).
__device__ __forceinline__ int last_window(int p, int pad, int O, FastDiv by_s) {
    return imin((int)fdiv((unsigned)(p + pad), by_s), O - 1);
}

__device__ __forceinline__ TapRange tap_range(int p, int pad, int K, int S, int D, int O,
                                              FastDiv by_s, FastDiv by_d) {
    TapRange t;
    const int span = (K - 1) * D;
    t.hi = last_window(p, pad, O, by_s);
    t.lo = first_window(p, pad, span, by_s);
    const int r = p + pad - t.lo * S;  // in [0, span] when the range is not empty
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

// The gradient of input pixel p under max pooling: the sum of the output gradients whose
// window's winner it is. Output row oh of the plane is at g + (oh - s0) * OW (a + ... for the
// argmax).
template <typename T>
__device__ __forceinline__ acc_t<T> gather_max(const T* g, const int* a, int s0, int OW, int KW,
                                               const TapRange& rows, const TapRange& cols) {
    acc_t<T> sum = acc_t<T>(0);
    int i = rows.tap, ri = rows.rem;
    for (int oh = rows.lo; oh <= rows.hi; ++oh, next_window(i, ri, rows)) {
        if (ri != 0) continue;  // a dilated window that steps over this row
        const int o_row = (oh - s0) * OW;
        int j = cols.tap, rj = cols.rem;
        for (int ow = cols.lo; ow <= cols.hi; ++ow, next_window(j, rj, cols)) {
            if (rj == 0 && a[o_row + ow] == i * KW + j) sum += to_acc(g[o_row + ow]);
        }
    }
    return sum;
}

// The gradient of input pixel p under average pooling: each covering window's gradient over
// its divisor.
template <typename T>
__device__ __forceinline__ acc_t<T> gather_avg(const T* g, int s0, int H, int W, int OW, int KH,
                                               int KW, int SH, int SW, int PH, int PW,
                                               int count_include_pad, const TapRange& rows,
                                               const TapRange& cols) {
    using A = acc_t<T>;
    A sum = A(0);
    for (int oh = rows.lo; oh <= rows.hi; ++oh) {
        const int ch = avg_count(oh * SH - PH, KH, H, PH, count_include_pad);
        const T* g_row = g + (oh - s0) * OW;
        for (int ow = cols.lo; ow <= cols.hi; ++ow) {
            const int cw = avg_count(ow * SW - PW, KW, W, PW, count_include_pad);
            sum += to_acc(g_row[ow]) * reciprocal(A(ch * cw));
        }
    }
    return sum;
}

// ---- tiles -----------------------------------------------------------------------------------

// Elements per 32-byte sector of the narrower of T and the int32 argmax: a loop whose first
// warp starts at a multiple of it starts on a sector boundary of both arrays.
template <typename T>
__device__ __forceinline__ constexpr unsigned sector_elems() {
    return 32u / (sizeof(T) < sizeof(int) ? (unsigned)sizeof(T) : (unsigned)sizeof(int));
}

// A global loop over ``count`` elements from flat offset ``off`` runs e in [0, lead + count):
// its first warp starts ``lead`` = off % G elements early, on the sector boundary, and those
// lanes redo element 0 (load the same word, store the same value to the same place: a warp's
// request then covers whole sectors). They really load and store, unconditionally: a load
// whose value a lane would drop is one the compiler skips for that lane, and the coalescing
// report (which lines lanes up by the n-th time each runs an access) would pair the lanes of
// later rounds wrongly.
__device__ __forceinline__ unsigned element_of(unsigned e, unsigned lead) {
    return e < lead ? 0u : e - lead;
}

// How the host cut the launch's planes into tiles: groups of ``planes_per`` planes, each group
// into ``per_group`` tiles of ``rows_per`` destination rows (several whole planes when
// planes_per > 1, then per_group == 1). ``tiles`` = groups * per_group, walked grid-stride.
struct TileGrid {
    int planes;      // planes of this launch
    int planes_per;  // planes of a tile
    int rows_per;    // destination rows of a tile
    int per_group;   // tiles of a group of planes
    int tiles;       // all of them
    FastDiv by_group;
};

// One tile: planes [plane0, plane0 + planes), destination rows [r0, r0 + rows) of each, and the
// source rows [s0, s0 + srows) of each staged in shared memory (set by the direction).
struct Tile {
    unsigned plane0;
    int planes;
    int r0, rows;
    int s0, srows;
};

__device__ __forceinline__ Tile tile_at(unsigned t, const TileGrid& grid) {
    Tile tile;
    const unsigned group = fdiv(t, grid.by_group);
    const int part = (int)(t - group * (unsigned)grid.per_group);
    tile.plane0 = group * (unsigned)grid.planes_per;
    tile.planes = imin(grid.planes_per, grid.planes - (int)tile.plane0);
    tile.r0 = part * grid.rows_per;
    tile.rows = grid.rows_per;  // the last tile of a plane may be shorter: clipped by the caller
    tile.s0 = 0;
    tile.srows = 0;
    return tile;
}

// Copy ``count`` elements src[off, off + count) to dst[0, count) with the whole block,
// consecutive threads on consecutive elements, the first warp on a sector boundary.
template <typename S, unsigned G>
__device__ __forceinline__ void stage(const S* __restrict__ src, unsigned off, unsigned count,
                                      S* dst) {
    const unsigned lead = count == 0 ? 0u : off & (G - 1u);  // nothing to stage: read nothing at off
    for (unsigned e = threadIdx.x; e < lead + count; e += blockDim.x) {
        const unsigned k = element_of(e, lead);
        dst[k] = src[off + k];  // unconditional: the lanes before the tile copy element 0 again
    }
}

// The same for two arrays with one index (max-pool backward's gout and argmax).
template <typename S, typename U, unsigned G>
__device__ __forceinline__ void stage2(const S* __restrict__ src, const U* __restrict__ src2,
                                       unsigned off, unsigned count, S* dst, U* dst2) {
    const unsigned lead = count == 0 ? 0u : off & (G - 1u);  // nothing to stage: read nothing at off
    for (unsigned e = threadIdx.x; e < lead + count; e += blockDim.x) {
        const unsigned k = element_of(e, lead);
        dst[k] = src[off + k];
        dst2[k] = src2[off + k];
    }
}

// Forward: the x rows that the windows of output rows [r0, r0 + rows) touch (all H rows for a
// tile of whole planes, whose planes are staged back to back).
__device__ __forceinline__ void forward_source(Tile& tile, const TileGrid& grid, int OH, int H,
                                               int KH, int SH, int PH, int DH) {
    tile.rows = imin(tile.rows, OH - tile.r0);
    if (grid.planes_per > 1) {
        tile.s0 = 0;
        tile.srows = H;
        return;
    }
    tile.s0 = imax(tile.r0 * SH - PH, 0);
    const int s1 = imin((tile.r0 + tile.rows - 1) * SH - PH + (KH - 1) * DH + 1, H);
    tile.srows = imax(s1 - tile.s0, 0);  // 0 where every tap is padding
}

// Backward: the gout rows whose windows cover input rows [r0, r0 + rows) (all OH rows for a
// tile of whole planes).
__device__ __forceinline__ void backward_source(Tile& tile, const TileGrid& grid, int H, int OH,
                                                int KH, int PH, int DH, FastDiv by_sh) {
    tile.rows = imin(tile.rows, H - tile.r0);
    if (grid.planes_per > 1) {
        tile.s0 = 0;
        tile.srows = OH;
        return;
    }
    tile.s0 = first_window(tile.r0, PH, (KH - 1) * DH, by_sh);
    const int s1 = last_window(tile.r0 + tile.rows - 1, PH, OH, by_sh) + 1;
    tile.srows = imax(s1 - tile.s0, 0);
}

// Destination element q of a tile (row-major over its planes, rows and columns): its plane p in
// the tile and its row in the plane. In a tile of one plane r < rows <= the plane's rows, so
// p == 0; in a tile of whole planes r0 == 0.
struct TileSite {
    int p, row, col;
};

__device__ __forceinline__ TileSite tile_site(unsigned q, const Tile& tile, int width,
                                              int plane_rows, FastDiv by_width,
                                              FastDiv by_plane_rows) {
    TileSite s;
    const unsigned r = fdiv(q, by_width);
    s.col = (int)(q - r * (unsigned)width);
    s.p = (int)fdiv(r, by_plane_rows);
    s.row = tile.r0 + (int)r - s.p * plane_rows;
    return s;
}

// ---- tiled forward ---------------------------------------------------------------------------

template <typename T>
__device__ __forceinline__ void maxpool_forward_tiled(
    const T* __restrict__ x, T* __restrict__ out, int* __restrict__ argmax, const TileGrid& grid,
    int H, int W, int KH, int KW, int SH, int SW, int PH, int PW, int DH, int DW, int OH, int OW,
    FastDiv by_ow, FastDiv by_oh) {
    TF_DYNAMIC_SHARED(T, staged);  // (planes, srows, W) of x
    constexpr unsigned G = sector_elems<T>();
    for (unsigned t = blockIdx.x; t < (unsigned)grid.tiles; t += gridDim.x) {
        Tile tile = tile_at(t, grid);
        forward_source(tile, grid, OH, H, KH, SH, PH, DH);
        const unsigned srows_w = (unsigned)(tile.srows * W);
        stage<T, G>(x, (tile.plane0 * (unsigned)H + (unsigned)tile.s0) * (unsigned)W,
                    (unsigned)tile.planes * srows_w, staged);
        __syncthreads();
        const unsigned off = (tile.plane0 * (unsigned)OH + (unsigned)tile.r0) * (unsigned)OW;
        const unsigned count = (unsigned)(tile.planes * tile.rows * OW), lead = off & (G - 1u);
        for (unsigned e = threadIdx.x; e < lead + count; e += blockDim.x) {
            const unsigned q = element_of(e, lead);
            const TileSite s = tile_site(q, tile, OW, OH, by_ow, by_oh);
            const MaxTap<T> best = window_max(staged + s.p * srows_w, tile.s0, H, W,
                                              s.row * SH - PH, s.col * SW - PW, KH, KW, DH, DW);
            out[off + q] = best.value;
            argmax[off + q] = best.k;
        }
        __syncthreads();  // the next tile restages
    }
}

template <typename T>
__device__ __forceinline__ void avgpool_forward_tiled(
    const T* __restrict__ x, T* __restrict__ out, const TileGrid& grid, int H, int W, int KH,
    int KW, int SH, int SW, int PH, int PW, int OH, int OW, int count_include_pad, FastDiv by_ow,
    FastDiv by_oh) {
    TF_DYNAMIC_SHARED(T, staged);  // (planes, srows, W) of x
    constexpr unsigned G = sector_elems<T>();
    for (unsigned t = blockIdx.x; t < (unsigned)grid.tiles; t += gridDim.x) {
        Tile tile = tile_at(t, grid);
        forward_source(tile, grid, OH, H, KH, SH, PH, 1);
        const unsigned srows_w = (unsigned)(tile.srows * W);
        stage<T, G>(x, (tile.plane0 * (unsigned)H + (unsigned)tile.s0) * (unsigned)W,
                    (unsigned)tile.planes * srows_w, staged);
        __syncthreads();
        const unsigned off = (tile.plane0 * (unsigned)OH + (unsigned)tile.r0) * (unsigned)OW;
        const unsigned count = (unsigned)(tile.planes * tile.rows * OW), lead = off & (G - 1u);
        for (unsigned e = threadIdx.x; e < lead + count; e += blockDim.x) {
            const unsigned q = element_of(e, lead);
            const TileSite s = tile_site(q, tile, OW, OH, by_ow, by_oh);
            out[off + q] = window_mean(staged + s.p * srows_w, tile.s0, H, W, s.row * SH - PH,
                                       s.col * SW - PW, KH, KW, PH, PW, count_include_pad);
        }
        __syncthreads();
    }
}

// ---- tiled backward --------------------------------------------------------------------------

template <typename T>
__device__ __forceinline__ void maxpool_backward_tiled(
    const T* __restrict__ gout, const int* __restrict__ argmax, T* __restrict__ dx,
    const TileGrid& grid, int capacity, int H, int W, int KH, int KW, int SH, int SW, int PH,
    int PW, int DH, int DW, int OH, int OW, FastDiv by_w, FastDiv by_h, FastDiv by_sh,
    FastDiv by_sw, FastDiv by_dh, FastDiv by_dw) {
    // (planes, srows, OW) of gout, then of argmax at the next 16 bytes past ``capacity`` T's
    TF_DYNAMIC_SHARED(unsigned char, shared);
    T* staged_g = reinterpret_cast<T*>(shared);
    int* staged_a = reinterpret_cast<int*>(shared + ((unsigned)capacity * sizeof(T) + 15u) / 16u * 16u);
    constexpr unsigned G = sector_elems<T>();
    for (unsigned t = blockIdx.x; t < (unsigned)grid.tiles; t += gridDim.x) {
        Tile tile = tile_at(t, grid);
        backward_source(tile, grid, H, OH, KH, PH, DH, by_sh);
        const unsigned srows_w = (unsigned)(tile.srows * OW);
        stage2<T, int, G>(gout, argmax, (tile.plane0 * (unsigned)OH + (unsigned)tile.s0) * (unsigned)OW,
                          (unsigned)tile.planes * srows_w, staged_g, staged_a);
        __syncthreads();
        const unsigned off = (tile.plane0 * (unsigned)H + (unsigned)tile.r0) * (unsigned)W;
        const unsigned count = (unsigned)(tile.planes * tile.rows * W), lead = off & (G - 1u);
        for (unsigned e = threadIdx.x; e < lead + count; e += blockDim.x) {
            const unsigned q = element_of(e, lead);
            const TileSite s = tile_site(q, tile, W, H, by_w, by_h);
            const TapRange rows = tap_range(s.row, PH, KH, SH, DH, OH, by_sh, by_dh);
            const TapRange cols = tap_range(s.col, PW, KW, SW, DW, OW, by_sw, by_dw);
            dx[off + q] = from_acc<T>(gather_max(staged_g + s.p * srows_w, staged_a + s.p * srows_w,
                                                 tile.s0, OW, KW, rows, cols));
        }
        __syncthreads();
    }
}

template <typename T>
__device__ __forceinline__ void avgpool_backward_tiled(
    const T* __restrict__ gout, T* __restrict__ dx, const TileGrid& grid, int H, int W, int KH,
    int KW, int SH, int SW, int PH, int PW, int OH, int OW, int count_include_pad, FastDiv by_w,
    FastDiv by_h, FastDiv by_sh, FastDiv by_sw) {
    TF_DYNAMIC_SHARED(T, staged);  // (planes, srows, OW) of gout
    constexpr unsigned G = sector_elems<T>();
    const FastDiv one = fast_div(1, 1ULL);  // the magic of 1 (no dilation): m = 1, s = 0
    for (unsigned t = blockIdx.x; t < (unsigned)grid.tiles; t += gridDim.x) {
        Tile tile = tile_at(t, grid);
        backward_source(tile, grid, H, OH, KH, PH, 1, by_sh);
        const unsigned srows_w = (unsigned)(tile.srows * OW);
        stage<T, G>(gout, (tile.plane0 * (unsigned)OH + (unsigned)tile.s0) * (unsigned)OW,
                    (unsigned)tile.planes * srows_w, staged);
        __syncthreads();
        const unsigned off = (tile.plane0 * (unsigned)H + (unsigned)tile.r0) * (unsigned)W;
        const unsigned count = (unsigned)(tile.planes * tile.rows * W), lead = off & (G - 1u);
        for (unsigned e = threadIdx.x; e < lead + count; e += blockDim.x) {
            const unsigned q = element_of(e, lead);
            const TileSite s = tile_site(q, tile, W, H, by_w, by_h);
            const TapRange rows = tap_range(s.row, PH, KH, SH, 1, OH, by_sh, one);
            const TapRange cols = tap_range(s.col, PW, KW, SW, 1, OW, by_sw, one);
            dx[off + q] = from_acc<T>(gather_avg(staged + s.p * srows_w, tile.s0, H, W, OW, KH, KW,
                                                 SH, SW, PH, PW, count_include_pad, rows, cols));
        }
        __syncthreads();
    }
}

// ---- flat kernels (the fallback) -------------------------------------------------------------

// Decode flat index ``idx`` of (planes, rows, width) into its plane, row and column.
struct FlatSite {
    unsigned plane;
    int row, col;
};

__device__ __forceinline__ FlatSite flat_site(unsigned idx, int rows, int width, FastDiv by_width,
                                              FastDiv by_plane) {
    FlatSite s;
    s.plane = fdiv(idx, by_plane);
    const unsigned r = idx - s.plane * (unsigned)(rows * width);
    s.row = (int)fdiv(r, by_width);
    s.col = (int)r - s.row * width;
    return s;
}

template <typename T>
__device__ __forceinline__ void maxpool_forward_flat(const T* __restrict__ x, T* __restrict__ out,
                                                     int* __restrict__ argmax, int total, int H,
                                                     int W, int KH, int KW, int SH, int SW, int PH,
                                                     int PW, int DH, int DW, int OH, int OW,
                                                     unsigned long long magic_ow,
                                                     unsigned long long magic_plane) {
    const FastDiv by_ow = fast_div(OW, magic_ow), by_plane = fast_div(OH * OW, magic_plane);
    FOR_EACH_INDEX32(idx, total) {
        const FlatSite s = flat_site(idx, OH, OW, by_ow, by_plane);
        const MaxTap<T> best = window_max(x + s.plane * (unsigned)(H * W), 0, H, W,
                                          s.row * SH - PH, s.col * SW - PW, KH, KW, DH, DW);
        out[idx] = best.value;
        argmax[idx] = best.k;
    }
}

template <typename T>
__device__ __forceinline__ void avgpool_forward_flat(const T* __restrict__ x, T* __restrict__ out,
                                                     int total, int H, int W, int KH, int KW,
                                                     int SH, int SW, int PH, int PW, int OH, int OW,
                                                     int count_include_pad,
                                                     unsigned long long magic_ow,
                                                     unsigned long long magic_plane) {
    const FastDiv by_ow = fast_div(OW, magic_ow), by_plane = fast_div(OH * OW, magic_plane);
    FOR_EACH_INDEX32(idx, total) {
        const FlatSite s = flat_site(idx, OH, OW, by_ow, by_plane);
        out[idx] = window_mean(x + s.plane * (unsigned)(H * W), 0, H, W, s.row * SH - PH,
                               s.col * SW - PW, KH, KW, PH, PW, count_include_pad);
    }
}

template <typename T>
__device__ __forceinline__ void maxpool_backward_flat(
    const T* __restrict__ gout, const int* __restrict__ argmax, T* __restrict__ dx, int total, int H,
    int W, int KH, int KW, int SH, int SW, int PH, int PW, int DH, int DW, int OH, int OW,
    unsigned long long magic_w, unsigned long long magic_plane, unsigned long long magic_sh,
    unsigned long long magic_sw, unsigned long long magic_dh, unsigned long long magic_dw) {
    const FastDiv by_w = fast_div(W, magic_w), by_plane = fast_div(H * W, magic_plane);
    const FastDiv by_sh = fast_div(SH, magic_sh), by_sw = fast_div(SW, magic_sw);
    const FastDiv by_dh = fast_div(DH, magic_dh), by_dw = fast_div(DW, magic_dw);
    FOR_EACH_INDEX32(idx, total) {
        const FlatSite s = flat_site(idx, H, W, by_w, by_plane);
        const unsigned base = s.plane * (unsigned)(OH * OW);
        const TapRange rows = tap_range(s.row, PH, KH, SH, DH, OH, by_sh, by_dh);
        const TapRange cols = tap_range(s.col, PW, KW, SW, DW, OW, by_sw, by_dw);
        dx[idx] = from_acc<T>(gather_max(gout + base, argmax + base, 0, OW, KW, rows, cols));
    }
}

template <typename T>
__device__ __forceinline__ void avgpool_backward_flat(
    const T* __restrict__ gout, T* __restrict__ dx, int total, int H, int W, int KH, int KW, int SH,
    int SW, int PH, int PW, int OH, int OW, int count_include_pad, unsigned long long magic_w,
    unsigned long long magic_plane, unsigned long long magic_sh, unsigned long long magic_sw) {
    const FastDiv by_w = fast_div(W, magic_w), by_plane = fast_div(H * W, magic_plane);
    const FastDiv by_sh = fast_div(SH, magic_sh), by_sw = fast_div(SW, magic_sw);
    const FastDiv one = fast_div(1, 1ULL);
    FOR_EACH_INDEX32(idx, total) {
        const FlatSite s = flat_site(idx, H, W, by_w, by_plane);
        const TapRange rows = tap_range(s.row, PH, KH, SH, 1, OH, by_sh, one);
        const TapRange cols = tap_range(s.col, PW, KW, SW, 1, OW, by_sw, one);
        dx[idx] = from_acc<T>(gather_avg(gout + s.plane * (unsigned)(OH * OW), 0, H, W, OW, KH, KW,
                                         SH, SW, PH, PW, count_include_pad, rows, cols));
    }
}

}  // namespace pool_detail

// ---- entry points: <name>_f32, _f64, _f16, _bf16 ---------------------------------------------
// The tiled kernels take the tile grid as (planes, tile_planes, tile_rows, tiles_per_group,
// tiles, magic_group) and their dynamic shared memory from the launch (kernels/pool.py).

#define POOL_TILE_GRID                                                                        \
    pool_detail::TileGrid {                                                                   \
        planes, tile_planes, tile_rows, tiles_per_group, tiles,                               \
            index32::fast_div(tiles_per_group, magic_group)                                   \
    }

#define MAXPOOL2D_FORWARD(sfx, T)                                                             \
    __global__ void maxpool2d_forward_##sfx(                                                 \
        const T* x, T* out, int* argmax, int planes, int H, int W, int KH, int KW, int SH,   \
        int SW, int PH, int PW, int DH, int DW, int OH, int OW, int tile_planes,             \
        int tile_rows, int tiles_per_group, int tiles, unsigned long long magic_ow,          \
        unsigned long long magic_oh, unsigned long long magic_group) {                        \
        pool_detail::maxpool_forward_tiled<T>(x, out, argmax, POOL_TILE_GRID, H, W, KH, KW,  \
                                              SH, SW, PH, PW, DH, DW, OH, OW,                \
                                              index32::fast_div(OW, magic_ow),               \
                                              index32::fast_div(OH, magic_oh));              \
    }

#define AVGPOOL2D_FORWARD(sfx, T)                                                             \
    __global__ void avgpool2d_forward_##sfx(                                                 \
        const T* x, T* out, int planes, int H, int W, int KH, int KW, int SH, int SW, int PH, \
        int PW, int OH, int OW, int count_include_pad, int tile_planes, int tile_rows,       \
        int tiles_per_group, int tiles, unsigned long long magic_ow,                         \
        unsigned long long magic_oh, unsigned long long magic_group) {                        \
        pool_detail::avgpool_forward_tiled<T>(x, out, POOL_TILE_GRID, H, W, KH, KW, SH, SW,   \
                                              PH, PW, OH, OW, count_include_pad,             \
                                              index32::fast_div(OW, magic_ow),               \
                                              index32::fast_div(OH, magic_oh));              \
    }

#define MAXPOOL2D_BACKWARD(sfx, T)                                                              \
    __global__ void maxpool2d_backward_##sfx(                                                  \
        const T* gout, const int* argmax, T* dx, int planes, int H, int W, int KH, int KW,     \
        int SH, int SW, int PH, int PW, int DH, int DW, int OH, int OW, int tile_planes,       \
        int tile_rows, int tiles_per_group, int tiles, int capacity,                           \
        unsigned long long magic_w, unsigned long long magic_h,                                \
        unsigned long long magic_group, unsigned long long magic_sh,                           \
        unsigned long long magic_sw, unsigned long long magic_dh, unsigned long long magic_dw) { \
        pool_detail::maxpool_backward_tiled<T>(                                                \
            gout, argmax, dx, POOL_TILE_GRID, capacity, H, W, KH, KW, SH, SW, PH, PW, DH, DW,  \
            OH, OW, index32::fast_div(W, magic_w), index32::fast_div(H, magic_h),             \
            index32::fast_div(SH, magic_sh), index32::fast_div(SW, magic_sw),                 \
            index32::fast_div(DH, magic_dh), index32::fast_div(DW, magic_dw));                \
    }

#define AVGPOOL2D_BACKWARD(sfx, T)                                                              \
    __global__ void avgpool2d_backward_##sfx(                                                  \
        const T* gout, T* dx, int planes, int H, int W, int KH, int KW, int SH, int SW, int PH, \
        int PW, int OH, int OW, int count_include_pad, int tile_planes, int tile_rows,         \
        int tiles_per_group, int tiles, unsigned long long magic_w,                            \
        unsigned long long magic_h, unsigned long long magic_group,                            \
        unsigned long long magic_sh, unsigned long long magic_sw) {                            \
        pool_detail::avgpool_backward_tiled<T>(                                                \
            gout, dx, POOL_TILE_GRID, H, W, KH, KW, SH, SW, PH, PW, OH, OW, count_include_pad, \
            index32::fast_div(W, magic_w), index32::fast_div(H, magic_h),                     \
            index32::fast_div(SH, magic_sh), index32::fast_div(SW, magic_sw));                \
    }

#define MAXPOOL2D_FORWARD_FLAT(sfx, T)                                                          \
    __global__ void maxpool2d_forward_flat_##sfx(                                              \
        const T* x, T* out, int* argmax, int total, int H, int W, int KH, int KW, int SH,      \
        int SW, int PH, int PW, int DH, int DW, int OH, int OW, unsigned long long magic_ow,    \
        unsigned long long magic_plane) {                                                       \
        pool_detail::maxpool_forward_flat<T>(x, out, argmax, total, H, W, KH, KW, SH, SW, PH,  \
                                             PW, DH, DW, OH, OW, magic_ow, magic_plane);        \
    }

#define MAXPOOL2D_BACKWARD_FLAT(sfx, T)                                                          \
    __global__ void maxpool2d_backward_flat_##sfx(                                              \
        const T* gout, const int* argmax, T* dx, int total, int H, int W, int KH, int KW,       \
        int SH, int SW, int PH, int PW, int DH, int DW, int OH, int OW,                         \
        unsigned long long magic_w, unsigned long long magic_plane,                             \
        unsigned long long magic_sh, unsigned long long magic_sw, unsigned long long magic_dh,  \
        unsigned long long magic_dw) {                                                           \
        pool_detail::maxpool_backward_flat<T>(gout, argmax, dx, total, H, W, KH, KW, SH, SW, PH, \
                                              PW, DH, DW, OH, OW, magic_w, magic_plane,         \
                                              magic_sh, magic_sw, magic_dh, magic_dw);          \
    }

#define AVGPOOL2D_FORWARD_FLAT(sfx, T)                                                           \
    __global__ void avgpool2d_forward_flat_##sfx(                                               \
        const T* x, T* out, int total, int H, int W, int KH, int KW, int SH, int SW, int PH,    \
        int PW, int OH, int OW, int count_include_pad, unsigned long long magic_ow,             \
        unsigned long long magic_plane) {                                                        \
        pool_detail::avgpool_forward_flat<T>(x, out, total, H, W, KH, KW, SH, SW, PH, PW, OH,   \
                                             OW, count_include_pad, magic_ow, magic_plane);     \
    }

#define AVGPOOL2D_BACKWARD_FLAT(sfx, T)                                                           \
    __global__ void avgpool2d_backward_flat_##sfx(                                               \
        const T* gout, T* dx, int total, int H, int W, int KH, int KW, int SH, int SW, int PH,   \
        int PW, int OH, int OW, int count_include_pad, unsigned long long magic_w,               \
        unsigned long long magic_plane, unsigned long long magic_sh,                             \
        unsigned long long magic_sw) {                                                            \
        pool_detail::avgpool_backward_flat<T>(gout, dx, total, H, W, KH, KW, SH, SW, PH, PW, OH, \
                                              OW, count_include_pad, magic_w, magic_plane,       \
                                              magic_sh, magic_sw);                               \
    }

extern "C" {
TF_FLOAT_TYPES(MAXPOOL2D_FORWARD)
TF_FLOAT_TYPES(MAXPOOL2D_BACKWARD)
TF_FLOAT_TYPES(AVGPOOL2D_FORWARD)
TF_FLOAT_TYPES(AVGPOOL2D_BACKWARD)
TF_FLOAT_TYPES(MAXPOOL2D_FORWARD_FLAT)
TF_FLOAT_TYPES(MAXPOOL2D_BACKWARD_FLAT)
TF_FLOAT_TYPES(AVGPOOL2D_FORWARD_FLAT)
TF_FLOAT_TYPES(AVGPOOL2D_BACKWARD_FLAT)
}
