// Max and average pooling over NCHW in every floating dtype (tinyflow/kernels/pool.py is the
// reference; tinyflow_cuda/kernels/pool.py launches these and picks between the two kernels of
// each direction).
//
// One skeleton runs all eight kernels: a sweep over the destination elements of a launch, each
// computed by a window functor (MaxForward, AvgForward, MaxBackward, AvgBackward) from the source
// planes, with the launch's geometry in one struct (PoolGeometry). Two sweeps, written for the
// memory limit:
//
// - tiled (maxpool2d_forward, avgpool2d_forward, maxpool2d_backward, avgpool2d_backward): a block
//   per tile of destination rows. It stages the contiguous span of source rows its tile needs
//   (with the halo of the windows) in shared memory, consecutive threads on consecutive
//   elements, STAGE_UNROLL independent loads in flight per thread, then computes every
//   destination element of the tile from shared memory and stores the tile, again consecutive
//   threads on consecutive elements. Forward: destination = out (and argmax), source = x;
//   backward: destination = dx, source = gout (and argmax). The stride-2 window reads of
//   AlexNet's 3x3/2 pools (lanes 2 elements apart: twice the sectors of the bytes they use) and
//   the backward's uneven gathers hit shared memory only; global memory sees whole sectors. A
//   tile is either several whole planes (small planes, e.g. AlexNet's 27x27 and 13x13: one block
//   does enough work and the staged span is contiguous across the planes) or a run of rows of
//   one plane (large planes). The first warp of each global loop starts on a 32-byte sector
//   boundary of every array it touches; the lanes before the tile's first element repeat that
//   element, so that every lane runs each access.
// - flat (the *_flat kernels): one thread per destination element, flat over the whole tensor,
//   reading its window from global memory. The host takes it where the staged span of a single
//   destination row would not fit in a block's shared memory (huge windows or dilations over
//   wide rows): tinyflow_cuda/kernels/pool.py, plan_tiles.
//
// A functor's window code is the same in both sweeps (only where its source rows lie differs),
// hence the same first-maximum and NaN rules and the same summation order; both sweeps keep to
// 32-bit indices: the host launches at most 2^31 - 1 elements at a time (whole planes), and
// divides by runtime values only through host-computed magic numbers (fastdiv.cuh: one
// multiply-high each). Every lane of a warp visits the same taps in the same order: a tap in the
// padding, or a window that does not cover a pixel, is loaded from the nearest staged element and
// masked, not branched around, so the lanes of a warp load together (shared memory and the
// coalescing and bank-conflict reports see one request a tap). The backward gathers (no atomics,
// deterministic even where AlexNet's 3x3 stride-2 windows overlap) and visits the windows that
// may cover its pixel: a fixed count along each axis, from the last one by one magic division,
// the tap of each stepped, not divided. fp16 / bf16 load to fp32 (to_acc), sum and compare there,
// round once (from_acc); the max itself is stored as the winner's raw bits. The argmax is the
// int32 window offset i * KW + j.
#include "common.cuh"
#include "fastdiv.cuh"

namespace pool_detail {
using namespace index32;

// ---- the launch's geometry -------------------------------------------------------------------

// A pooling launch: input planes H x W, output planes OH x OW, the window (kernel, stride,
// padding, dilation: 1 for average pooling) and average pooling's divisor rule; the magic
// divisors of the sizes and steps its decoding divides by (fast_div(1) where a kernel needs none).
struct PoolGeometry {
    int H, W, OH, OW, KH, KW, SH, SW, PH, PW, DH, DW;
    int count_include_pad;
    FastDiv by_w, by_h, by_ow, by_oh, by_sh, by_sw, by_dh, by_dw;
};

// The packed magic of 1: m = 1, s = 0 (n / 1 = umulhi(n, 1) + n >> 0 = n), for the divisors a
// direction does not divide by.
constexpr unsigned long long MAGIC_ONE = 1ULL;

// The forward's geometry: it decodes destination indices by OW and OH.
__device__ __forceinline__ PoolGeometry forward_geometry(
    int H, int W, int KH, int KW, int SH, int SW, int PH, int PW, int DH, int DW, int OH, int OW,
    int count_include_pad, unsigned long long magic_ow, unsigned long long magic_oh) {
    const FastDiv one = fast_div(1, MAGIC_ONE);
    return PoolGeometry{H, W, OH, OW, KH, KW, SH, SW, PH, PW, DH, DW, count_include_pad, one, one,
                        fast_div(OW, magic_ow), fast_div(OH, magic_oh), one, one, one, one};
}

// The backward's: it decodes destination indices by W and H and divides by the strides and
// dilations (fast_div(1) for average pooling's DH = DW = 1).
__device__ __forceinline__ PoolGeometry backward_geometry(
    int H, int W, int KH, int KW, int SH, int SW, int PH, int PW, int DH, int DW, int OH, int OW,
    int count_include_pad, unsigned long long magic_w, unsigned long long magic_h,
    unsigned long long magic_sh, unsigned long long magic_sw, unsigned long long magic_dh,
    unsigned long long magic_dw) {
    const FastDiv one = fast_div(1, MAGIC_ONE);
    return PoolGeometry{H, W, OH, OW, KH, KW, SH, SW, PH, PW, DH, DW, count_include_pad,
                        fast_div(W, magic_w), fast_div(H, magic_h), one, one,
                        fast_div(SH, magic_sh), fast_div(SW, magic_sw), fast_div(DH, magic_dh),
                        fast_div(DW, magic_dw)};
}

// ---- window code -----------------------------------------------------------------------------
// A source plane's rows are reached as ``rows + (h - s0) * width`` for the ``srows`` rows s0..
// held there: the plane in global memory (s0 = 0, all of its rows) or the rows staged in shared
// memory. A row outside them is read at the nearest one held (and masked by the caller).

__device__ __forceinline__ int held_row(int h, int s0, int srows) {
    return imin(imax(h - s0, 0), imax(srows - 1, 0));
}

template <typename T>
struct MaxTap {
    T value;  // the winner's raw bits (-inf where every tap is padding)
    int k;    // its window offset i * KW + j
};

// The max of the window whose top-left tap is (h0, w0) (in the padding where negative).
template <typename T>
__device__ __forceinline__ MaxTap<T> window_max(const T* rows, int s0, int srows,
                                                const PoolGeometry& g, int h0, int w0) {
    MaxTap<T> best{from_acc<T>(neg_inf(acc_t<T>(0))), 0};  // padding never wins
    acc_t<T> best_v = neg_inf(acc_t<T>(0));
    for (int i = 0, h = h0; i < g.KH; ++i, h += g.DH) {
        const bool row_in = (unsigned)h < (unsigned)g.H;
        const T* row = rows + held_row(h, s0, srows) * g.W;
        for (int j = 0, w = w0; j < g.KW; ++j, w += g.DW) {
            const bool in = row_in & ((unsigned)w < (unsigned)g.W);
            const T raw = row[imin(imax(w, 0), g.W - 1)];
            const acc_t<T> v = to_acc(raw);
            // strict: the first maximum in row-major order wins; a NaN wins over any number
            // (and the first NaN over later ones), so the maximum propagates NaN as PyTorch's.
            // Bitwise & throughout: every lane loads the tap before the padding is masked.
            if (((v > best_v) | ((v != v) & (best_v == best_v))) & in) {
                best_v = v;
                best.value = raw;
                best.k = i * g.KW + j;
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
__device__ __forceinline__ T window_mean(const T* rows, int s0, int srows, const PoolGeometry& g,
                                         int h0, int w0) {
    using A = acc_t<T>;
    A sum = A(0);
    for (int i = 0, h = h0; i < g.KH; ++i, ++h) {
        const bool row_in = (unsigned)h < (unsigned)g.H;
        const T* row = rows + held_row(h, s0, srows) * g.W;
        for (int j = 0, w = w0; j < g.KW; ++j, ++w)
            sum += to_acc(keep_if(row_in && (unsigned)w < (unsigned)g.W,
                                  row[imin(imax(w, 0), g.W - 1)]));
    }
    const int count = avg_count(h0, g.KH, g.H, g.PH, g.count_include_pad) *
                      avg_count(w0, g.KW, g.W, g.PW, g.count_include_pad);
    return from_acc<T>(sum * reciprocal(A(count)));
}

// The windows that may cover input coordinate p along one axis: o*S + t*D == p + pad for a tap
// t in [0, K). They lie in the ``count`` windows ending at o = floor((p + pad) / S), walked
// upwards from the first; walking up, the tap's offset r = p + pad - o*S falls by S, so the tap
// t = r / D and r % D are stepped by the constants S / D and S % D (no division in the loop). A
// window covers p where its o is in [0, O), r % D == 0 and t < K.
struct TapWalk {
    int o, tap, rem;  // the first window, its tap r / D and r % D
    int count;        // windows walked: floor((K - 1) * D / S) + 1, the same for every p
    int step, step_rem, D, K, O;
};

__device__ __forceinline__ TapWalk tap_walk(int p, int pad, int K, int S, int D, int O,
                                            FastDiv by_s, FastDiv by_d) {
    TapWalk t;
    const int pp = p + pad, hi = (int)fdiv((unsigned)pp, by_s);
    t.count = (int)fdiv((unsigned)((K - 1) * D), by_s) + 1;
    t.o = hi - (t.count - 1);
    const int r = pp - t.o * S;  // >= 0: the last window's offset plus (count - 1) * S
    t.tap = (int)fdiv((unsigned)r, by_d);
    t.rem = r - t.tap * D;
    t.step = (int)fdiv((unsigned)S, by_d);
    t.step_rem = S - t.step * D;
    t.D = D;
    t.K = K;
    t.O = O;
    return t;
}

__device__ __forceinline__ bool covers(const TapWalk& t, int o, int tap, int rem) {
    return (unsigned)o < (unsigned)t.O && rem == 0 && tap < t.K;
}

// Move (tap, rem) from window o to o + 1: r falls by S (it stays >= 0 over the walk: the last
// window's r is (p + pad) % S).
__device__ __forceinline__ void next_window(int& tap, int& rem, const TapWalk& t) {
    tap -= t.step;
    rem -= t.step_rem;
    if (rem < 0) {
        rem += t.D;
        tap -= 1;
    }
}

// The gradient of input pixel (rows, cols) under max pooling: the sum of the output gradients
// whose window's winner it is. Output row oh of the plane is held at g + held_row(oh) * OW (a +
// ... for the argmax).
template <typename T>
__device__ __forceinline__ acc_t<T> gather_max(const T* g, const int* a, int s0, int srows, int OW,
                                               int KW, const TapWalk& rows, const TapWalk& cols) {
    acc_t<T> sum = acc_t<T>(0);
    int i = rows.tap, ri = rows.rem;
    for (int u = 0, oh = rows.o; u < rows.count; ++u, ++oh, next_window(i, ri, rows)) {
        const bool row_in = covers(rows, oh, i, ri);
        const int held = held_row(oh, s0, srows) * OW;
        int j = cols.tap, rj = cols.rem;
        for (int v = 0, ow = cols.o; v < cols.count; ++v, ++ow, next_window(j, rj, cols)) {
            const int at = held + imin(imax(ow, 0), OW - 1);
            const bool won = (a[at] == i * KW + j) & row_in & covers(cols, ow, j, rj);
            sum += to_acc(keep_if(won, g[at]));  // every lane loads both (see keep_if)
        }
    }
    return sum;
}

// The gradient of input pixel (rows, cols) under average pooling: each covering window's gradient
// over its divisor (no dilation: every window of the walk whose tap is in range covers it).
template <typename T>
__device__ __forceinline__ acc_t<T> gather_avg(const T* g, int s0, int srows,
                                               const PoolGeometry& geo, const TapWalk& rows,
                                               const TapWalk& cols) {
    using A = acc_t<T>;
    A sum = A(0);
    int i = rows.tap, ri = rows.rem;
    for (int u = 0, oh = rows.o; u < rows.count; ++u, ++oh, next_window(i, ri, rows)) {
        const bool row_in = covers(rows, oh, i, ri);
        const int ch = avg_count(oh * geo.SH - geo.PH, geo.KH, geo.H, geo.PH,
                                 geo.count_include_pad);
        const T* g_row = g + held_row(oh, s0, srows) * geo.OW;
        int j = cols.tap, rj = cols.rem;
        for (int v = 0, ow = cols.o; v < cols.count; ++v, ++ow, next_window(j, rj, cols)) {
            const bool in = row_in && covers(cols, ow, j, rj);
            const int cw = avg_count(ow * geo.SW - geo.PW, geo.KW, geo.W, geo.PW,
                                     geo.count_include_pad);
            const A grad = to_acc(keep_if(in, g_row[imin(imax(ow, 0), geo.OW - 1)]));
            sum += grad * reciprocal(A(in ? ch * cw : 1));  // +0 where the window misses the pixel
        }
    }
    return sum;
}

// ---- tiles -----------------------------------------------------------------------------------

// Independent loads a thread has in flight in the staging loop.
constexpr int STAGE_UNROLL = 4;

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

// Destination element q of a tile (row-major over its planes, rows and columns): its plane p in
// the tile and its row and column in the plane. In a tile of one plane r < rows <= the plane's
// rows, so p == 0; in a tile of whole planes r0 == 0.
struct TileSite {
    int p, row, col;
};

__device__ __forceinline__ TileSite tile_site(unsigned q, int r0, int width, int plane_rows,
                                              FastDiv by_width, FastDiv by_plane_rows) {
    TileSite s;
    const unsigned r = fdiv(q, by_width);
    s.col = (int)(q - r * (unsigned)width);
    s.p = (int)fdiv(r, by_plane_rows);
    s.row = r0 + (int)r - s.p * plane_rows;
    return s;
}

// ---- the two directions ----------------------------------------------------------------------
// Which planes a kernel writes (destination) and reads (source), and the source rows a tile of
// destination rows needs. Forward: out (OH x OW) from the windows of x (H x W); backward: dx
// (H x W) gathered from gout (OH x OW).
struct Planes {
    int dst_rows, dst_width, src_rows, src_width;
    FastDiv by_dst_rows, by_dst_width;
};

__device__ __forceinline__ Planes planes_of(bool forward, const PoolGeometry& g) {
    return forward ? Planes{g.OH, g.OW, g.H, g.W, g.by_oh, g.by_ow}
                   : Planes{g.H, g.W, g.OH, g.OW, g.by_h, g.by_w};
}

// The forward's x rows of a tile: those its windows touch (all H rows for a tile of whole planes,
// whose planes are staged back to back).
__device__ __forceinline__ void forward_source(Tile& tile, const TileGrid& grid,
                                               const PoolGeometry& g) {
    tile.rows = imin(tile.rows, g.OH - tile.r0);
    tile.s0 = grid.planes_per > 1 ? 0 : imax(tile.r0 * g.SH - g.PH, 0);
    const int s1 = imin((tile.r0 + tile.rows - 1) * g.SH - g.PH + (g.KH - 1) * g.DH + 1, g.H);
    tile.srows = grid.planes_per > 1 ? g.H : imax(s1 - tile.s0, 0);  // 0: every tap is padding
}

// The backward's gout rows of a tile: those whose windows cover its dx rows (all OH rows for a
// tile of whole planes): from the first window of its first row, ceil((r0 + PH - span) / SH),
// to the last of its last row.
__device__ __forceinline__ void backward_source(Tile& tile, const TileGrid& grid,
                                                const PoolGeometry& g) {
    tile.rows = imin(tile.rows, g.H - tile.r0);
    const int span = (g.KH - 1) * g.DH, first = tile.r0 + g.PH;
    const int s0 = first > span ? (int)fdiv((unsigned)(first - span - 1), g.by_sh) + 1 : 0;
    const int last = imin((int)fdiv((unsigned)(tile.r0 + tile.rows - 1 + g.PH), g.by_sh), g.OH - 1);
    tile.s0 = grid.planes_per > 1 ? 0 : s0;
    tile.srows = grid.planes_per > 1 ? g.OH : imax(last + 1 - s0, 0);
}

// ---- the window functors ---------------------------------------------------------------------
// Each says how to stage one source element (``load`` it from global memory, ``keep`` it in the
// stage) and how to compute destination element ``i`` from a source plane's rows held in ``src``
// (``apply``): staged (``staged``) or in global memory (``global``, the flat sweep).

// The staging of a window that reads one source array (x forward, gout in average pooling's
// backward).
template <typename T>
struct OneSource {
    using Value = T;
    struct Rows {
        const T* src;
    };
    const T* __restrict__ src;
    T* stage;
    static constexpr unsigned G = sector_elems<T>();

    __device__ Value load(unsigned i) const { return src[i]; }
    __device__ void keep(unsigned k, const Value& v) const { stage[k] = v; }
    __device__ Rows staged(unsigned off) const { return Rows{stage + off}; }
    __device__ Rows global(unsigned off) const { return Rows{src + off}; }
};

template <typename T>
struct MaxForward : OneSource<T> {
    static constexpr bool forward = true;
    T* __restrict__ out;
    int* __restrict__ argmax;

    __device__ void apply(unsigned i, typename OneSource<T>::Rows x, int s0, int srows,
                          const TileSite& s, const PoolGeometry& g) const {
        const MaxTap<T> best =
            window_max(x.src, s0, srows, g, s.row * g.SH - g.PH, s.col * g.SW - g.PW);
        out[i] = best.value;
        argmax[i] = best.k;
    }
};

template <typename T>
struct AvgForward : OneSource<T> {
    static constexpr bool forward = true;
    T* __restrict__ out;

    __device__ void apply(unsigned i, typename OneSource<T>::Rows x, int s0, int srows,
                          const TileSite& s, const PoolGeometry& g) const {
        out[i] = window_mean(x.src, s0, srows, g, s.row * g.SH - g.PH, s.col * g.SW - g.PW);
    }
};

template <typename T>
struct AvgBackward : OneSource<T> {
    static constexpr bool forward = false;
    T* __restrict__ dx;

    __device__ void apply(unsigned i, typename OneSource<T>::Rows gout, int s0, int srows,
                          const TileSite& s, const PoolGeometry& g) const {
        const TapWalk rows = tap_walk(s.row, g.PH, g.KH, g.SH, 1, g.OH, g.by_sh, g.by_dh);
        const TapWalk cols = tap_walk(s.col, g.PW, g.KW, g.SW, 1, g.OW, g.by_sw, g.by_dw);
        dx[i] = from_acc<T>(gather_avg(gout.src, s0, srows, g, rows, cols));
    }
};

// Max pooling's backward stages gout and argmax, element by element together.
template <typename T>
struct GradWinner {
    T grad;
    int winner;
};

template <typename T>
struct MaxBackward {
    static constexpr bool forward = false;
    using Value = GradWinner<T>;
    struct Rows {
        const T* g;
        const int* a;
    };
    const T* __restrict__ gout;
    const int* __restrict__ argmax;
    T* __restrict__ dx;
    T* stage;           // gout's rows, then
    int* stage_argmax;  // argmax's, at the next 16 bytes past the host's capacity
    static constexpr unsigned G = sector_elems<T>();

    __device__ Value load(unsigned i) const { return Value{gout[i], argmax[i]}; }
    __device__ void keep(unsigned k, const Value& v) const {
        stage[k] = v.grad;
        stage_argmax[k] = v.winner;
    }
    __device__ Rows staged(unsigned off) const { return Rows{stage + off, stage_argmax + off}; }
    __device__ Rows global(unsigned off) const { return Rows{gout + off, argmax + off}; }
    __device__ void apply(unsigned i, Rows src, int s0, int srows, const TileSite& s,
                          const PoolGeometry& g) const {
        const TapWalk rows = tap_walk(s.row, g.PH, g.KH, g.SH, g.DH, g.OH, g.by_sh, g.by_dh);
        const TapWalk cols = tap_walk(s.col, g.PW, g.KW, g.SW, g.DW, g.OW, g.by_sw, g.by_dw);
        dx[i] = from_acc<T>(gather_max(src.g, src.a, s0, srows, g.OW, g.KW, rows, cols));
    }
};

// ---- the sweeps ------------------------------------------------------------------------------

// Copies the source elements [off, off + count) into the stage [0, count) with the whole block:
// consecutive threads on consecutive elements from the sector boundary below ``off`` (the lanes
// before it copy element 0 again), each thread STAGE_UNROLL elements blockDim apart, all loaded
// before any is kept: that many independent loads in flight. Past the end a lane loads nothing
// more (the lanes that stop stop for good: the others' loads keep their order).
template <typename Window>
__device__ __forceinline__ void stage_span(const Window& win, unsigned off, unsigned count) {
    const unsigned lead = count == 0 ? 0u : off & (Window::G - 1u);  // nothing staged: nothing read
    const unsigned end = lead + count, step = blockDim.x;
    for (unsigned e0 = threadIdx.x; e0 < end; e0 += STAGE_UNROLL * step) {
        typename Window::Value v[STAGE_UNROLL];
#pragma unroll
        for (int u = 0; u < STAGE_UNROLL; ++u) {
            const unsigned e = e0 + u * step;
            if (e >= end) break;
            v[u] = win.load(off + element_of(e, lead));
        }
#pragma unroll
        for (int u = 0; u < STAGE_UNROLL; ++u) {
            const unsigned e = e0 + u * step;
            if (e >= end) break;
            win.keep(element_of(e, lead), v[u]);
        }
    }
}

// The tiled sweep: a block per tile (grid-stride over the tiles), its source rows staged, then
// every destination element of the tile from the stage.
template <typename Window>
__device__ __forceinline__ void tiled_sweep(const Window& win, const PoolGeometry& g,
                                            const TileGrid& grid) {
    constexpr unsigned G = Window::G;
    const Planes pl = planes_of(Window::forward, g);
    for (unsigned t = blockIdx.x; t < (unsigned)grid.tiles; t += gridDim.x) {
        Tile tile = tile_at(t, grid);
        if (Window::forward)
            forward_source(tile, grid, g);
        else
            backward_source(tile, grid, g);
        const unsigned src_plane = (unsigned)(tile.srows * pl.src_width);  // a plane's staged rows
        const unsigned src_row0 = tile.plane0 * (unsigned)pl.src_rows + (unsigned)tile.s0;
        stage_span(win, src_row0 * (unsigned)pl.src_width, (unsigned)tile.planes * src_plane);
        __syncthreads();
        const unsigned dst_row0 = tile.plane0 * (unsigned)pl.dst_rows + (unsigned)tile.r0;
        const unsigned off = dst_row0 * (unsigned)pl.dst_width, lead = off & (G - 1u);
        const unsigned count = (unsigned)(tile.planes * tile.rows * pl.dst_width);
        for (unsigned e = threadIdx.x; e < lead + count; e += blockDim.x) {
            const unsigned q = element_of(e, lead);
            const TileSite s = tile_site(q, tile.r0, pl.dst_width, pl.dst_rows, pl.by_dst_width,
                                         pl.by_dst_rows);
            win.apply(off + q, win.staged((unsigned)s.p * src_plane), tile.s0, tile.srows, s, g);
        }
        __syncthreads();  // the next tile restages
    }
}

// The flat sweep: one thread per destination element of the launch, its window read from the
// source plane in global memory.
template <typename Window>
__device__ __forceinline__ void flat_sweep(const Window& win, const PoolGeometry& g, int total) {
    const Planes pl = planes_of(Window::forward, g);
    const unsigned src_plane = (unsigned)(pl.src_rows * pl.src_width);
    FOR_EACH_INDEX32(i, total) {
        const TileSite s =
            tile_site(i, 0, pl.dst_width, pl.dst_rows, pl.by_dst_width, pl.by_dst_rows);
        win.apply(i, win.global((unsigned)s.p * src_plane), 0, pl.src_rows, s, g);
    }
}

}  // namespace pool_detail

// ---- entry points: <name>_f32, _f64, _f16, _bf16 ---------------------------------------------
// Each takes the planes of the launch, the geometry (H, W, the window, OH, OW, and for average
// pooling count_include_pad), the tiled ones the tile grid (tile_planes, tile_rows,
// tiles_per_group, tiles, magic_group) and their dynamic shared memory from the launch
// (kernels/pool.py), then the magic divisors: of the destination plane's width and rows, and for
// the backward of the strides and dilations. It builds the geometry and the window functor and
// runs a sweep.

#define POOL_TILE_GRID                                                                             \
    pool_detail::TileGrid {                                                                        \
        planes, tile_planes, tile_rows, tiles_per_group, tiles,                                    \
            index32::fast_div(tiles_per_group, magic_group)                                        \
    }
#define POOL_ONE pool_detail::MAGIC_ONE

#define MAXPOOL2D_FORWARD(sfx, T)                                                                  \
    __global__ void maxpool2d_forward_##sfx(                                                       \
        const T* x, T* out, int* argmax, int planes, int H, int W, int KH, int KW, int SH,         \
        int SW, int PH, int PW, int DH, int DW, int OH, int OW, int tile_planes,                   \
        int tile_rows, int tiles_per_group, int tiles, unsigned long long magic_ow,                \
        unsigned long long magic_oh, unsigned long long magic_group) {                             \
        TF_DYNAMIC_SHARED(T, stage);                                                               \
        const pool_detail::MaxForward<T> win{{x, stage}, out, argmax};                             \
        const pool_detail::PoolGeometry geo = pool_detail::forward_geometry(                       \
            H, W, KH, KW, SH, SW, PH, PW, DH, DW, OH, OW, 0, magic_ow, magic_oh);                  \
        pool_detail::tiled_sweep(win, geo, POOL_TILE_GRID);                                        \
    }

#define AVGPOOL2D_FORWARD(sfx, T)                                                                  \
    __global__ void avgpool2d_forward_##sfx(                                                       \
        const T* x, T* out, int planes, int H, int W, int KH, int KW, int SH, int SW, int PH,      \
        int PW, int OH, int OW, int count_include_pad, int tile_planes, int tile_rows,             \
        int tiles_per_group, int tiles, unsigned long long magic_ow,                               \
        unsigned long long magic_oh, unsigned long long magic_group) {                             \
        TF_DYNAMIC_SHARED(T, stage);                                                               \
        const pool_detail::AvgForward<T> win{{x, stage}, out};                                     \
        const pool_detail::PoolGeometry geo = pool_detail::forward_geometry(                       \
            H, W, KH, KW, SH, SW, PH, PW, 1, 1, OH, OW, count_include_pad, magic_ow, magic_oh);    \
        pool_detail::tiled_sweep(win, geo, POOL_TILE_GRID);                                        \
    }

// max-pool backward stages argmax past ``capacity`` gradients, at the next 16 bytes
#define MAXPOOL2D_BACKWARD(sfx, T)                                                                 \
    __global__ void maxpool2d_backward_##sfx(                                                      \
        const T* gout, const int* argmax, T* dx, int planes, int H, int W, int KH, int KW,         \
        int SH, int SW, int PH, int PW, int DH, int DW, int OH, int OW, int tile_planes,           \
        int tile_rows, int tiles_per_group, int tiles, int capacity,                               \
        unsigned long long magic_w, unsigned long long magic_h,                                    \
        unsigned long long magic_group, unsigned long long magic_sh,                               \
        unsigned long long magic_sw, unsigned long long magic_dh, unsigned long long magic_dw) {   \
        TF_DYNAMIC_SHARED(unsigned char, shared);                                                  \
        const unsigned argmax_at = ((unsigned)capacity * sizeof(T) + 15u) / 16u * 16u;             \
        const pool_detail::MaxBackward<T> win{gout, argmax, dx, reinterpret_cast<T*>(shared),      \
                                              reinterpret_cast<int*>(shared + argmax_at)};         \
        const pool_detail::PoolGeometry geo = pool_detail::backward_geometry(                      \
            H, W, KH, KW, SH, SW, PH, PW, DH, DW, OH, OW, 0, magic_w, magic_h, magic_sh,           \
            magic_sw, magic_dh, magic_dw);                                                         \
        pool_detail::tiled_sweep(win, geo, POOL_TILE_GRID);                                        \
    }

#define AVGPOOL2D_BACKWARD(sfx, T)                                                                 \
    __global__ void avgpool2d_backward_##sfx(                                                      \
        const T* gout, T* dx, int planes, int H, int W, int KH, int KW, int SH, int SW, int PH,    \
        int PW, int OH, int OW, int count_include_pad, int tile_planes, int tile_rows,             \
        int tiles_per_group, int tiles, unsigned long long magic_w,                                \
        unsigned long long magic_h, unsigned long long magic_group,                                \
        unsigned long long magic_sh, unsigned long long magic_sw) {                                \
        TF_DYNAMIC_SHARED(T, stage);                                                               \
        const pool_detail::AvgBackward<T> win{{gout, stage}, dx};                                  \
        const pool_detail::PoolGeometry geo = pool_detail::backward_geometry(                      \
            H, W, KH, KW, SH, SW, PH, PW, 1, 1, OH, OW, count_include_pad, magic_w, magic_h,       \
            magic_sh, magic_sw, POOL_ONE, POOL_ONE);                                               \
        pool_detail::tiled_sweep(win, geo, POOL_TILE_GRID);                                        \
    }

#define MAXPOOL2D_FORWARD_FLAT(sfx, T)                                                             \
    __global__ void maxpool2d_forward_flat_##sfx(                                                  \
        const T* x, T* out, int* argmax, int total, int H, int W, int KH, int KW, int SH,          \
        int SW, int PH, int PW, int DH, int DW, int OH, int OW, unsigned long long magic_ow,       \
        unsigned long long magic_oh) {                                                             \
        const pool_detail::MaxForward<T> win{{x, nullptr}, out, argmax};                           \
        const pool_detail::PoolGeometry geo = pool_detail::forward_geometry(                       \
            H, W, KH, KW, SH, SW, PH, PW, DH, DW, OH, OW, 0, magic_ow, magic_oh);                  \
        pool_detail::flat_sweep(win, geo, total);                                                  \
    }

#define AVGPOOL2D_FORWARD_FLAT(sfx, T)                                                             \
    __global__ void avgpool2d_forward_flat_##sfx(                                                  \
        const T* x, T* out, int total, int H, int W, int KH, int KW, int SH, int SW, int PH,       \
        int PW, int OH, int OW, int count_include_pad, unsigned long long magic_ow,                \
        unsigned long long magic_oh) {                                                             \
        const pool_detail::AvgForward<T> win{{x, nullptr}, out};                                   \
        const pool_detail::PoolGeometry geo = pool_detail::forward_geometry(                       \
            H, W, KH, KW, SH, SW, PH, PW, 1, 1, OH, OW, count_include_pad, magic_ow, magic_oh);    \
        pool_detail::flat_sweep(win, geo, total);                                                  \
    }

#define MAXPOOL2D_BACKWARD_FLAT(sfx, T)                                                            \
    __global__ void maxpool2d_backward_flat_##sfx(                                                 \
        const T* gout, const int* argmax, T* dx, int total, int H, int W, int KH, int KW,          \
        int SH, int SW, int PH, int PW, int DH, int DW, int OH, int OW,                            \
        unsigned long long magic_w, unsigned long long magic_h, unsigned long long magic_sh,       \
        unsigned long long magic_sw, unsigned long long magic_dh, unsigned long long magic_dw) {   \
        const pool_detail::MaxBackward<T> win{gout, argmax, dx, nullptr, nullptr};                 \
        const pool_detail::PoolGeometry geo = pool_detail::backward_geometry(                      \
            H, W, KH, KW, SH, SW, PH, PW, DH, DW, OH, OW, 0, magic_w, magic_h, magic_sh,           \
            magic_sw, magic_dh, magic_dw);                                                         \
        pool_detail::flat_sweep(win, geo, total);                                                  \
    }

#define AVGPOOL2D_BACKWARD_FLAT(sfx, T)                                                            \
    __global__ void avgpool2d_backward_flat_##sfx(                                                 \
        const T* gout, T* dx, int total, int H, int W, int KH, int KW, int SH, int SW, int PH,     \
        int PW, int OH, int OW, int count_include_pad, unsigned long long magic_w,                 \
        unsigned long long magic_h, unsigned long long magic_sh, unsigned long long magic_sw) {    \
        const pool_detail::AvgBackward<T> win{{gout, nullptr}, dx};                                \
        const pool_detail::PoolGeometry geo = pool_detail::backward_geometry(                      \
            H, W, KH, KW, SH, SW, PH, PW, 1, 1, OH, OW, count_include_pad, magic_w, magic_h,       \
            magic_sh, magic_sw, POOL_ONE, POOL_ONE);                                               \
        pool_detail::flat_sweep(win, geo, total);                                                  \
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
