// Fused LSTM and GRU cells, and the whole recurrence of a layer as one persistent kernel
// (tinyflow/kernels/rnn.py is the reference; docs/lstm.md draws who holds what and what a step
// costs).
//
// Cells: the GEMMs stay in cuBLAS; these kernels do every element-wise step of one time step in
// a single pass, one thread per (hidden unit j, batch column b). The layout is the reference's
// feature-major one: states are (H, B) and a gate buffer is (G*H, B), so gate k of element
// idx = j * B + b sits at k * H * B + idx and consecutive threads touch consecutive addresses
// in every gate block. Gate order is PyTorch's: LSTM (i, f, g, o), GRU (r, z, n). Like the
// reference, the forward overwrites the pre-activations with the activated gates, which is
// what the backward needs. Every kernel exists for f32, f64, f16 and bf16 (TF_FLOAT_TYPES); the
// half types load to fp32, compute and keep their running state in fp32, and round once on store.
//
// Sequences (*_sequence_*): one cooperative launch runs all T steps of one layer in one
// direction, as Persistent RNNs (Diamos et al., 2016) do. One skeleton serves both cells and both
// directions (sequence_forward, sequence_backward); a cell functor (LstmForward, GruForward,
// LstmBackward, GruBackward) holds the cell's arrays and its element-wise step.
// - The grid is (unit groups) x (batch groups): block (ug, bg) owns hidden units
//   [ug * U, ug * U + own) and batch columns [bg * cols, bg * cols + bcols). It copies its units'
//   rows of W_hh into shared memory ONCE for the whole sequence (4 rows a unit, unit-major: row
//   u * 4 + k is gate k of unit u; the GRU's fourth is zero), rounded to the products' operand type.
// - Forward, each step: the block stages h_{t-1} (all H rows, its columns) into shared memory,
//   K-chunk by K-chunk where all of it does not fit, with 16-byte loads through L2, eight in flight
//   a thread (mma.cuh, in_flight); multiplies its W_hh rows by it (products split over K in
//   `split` slices so that every warp works, partial sums in shared memory); runs the cell of its
//   (unit, column) pairs, the running c of its units in shared memory; one grid barrier.
// - Backward, each step: the cell backward of its pairs gives the gate gradients dg of its units
//   (written gate-major to global memory for the weight GEMMs, and into shared memory); the block
//   multiplies ITS columns of W_hh^T by them: its share of dh_{t-1} for EVERY unit, an (H, cols)
//   partial sum written to a workspace (`partials`, two slots by step parity); one grid barrier;
//   then each block adds, for its own units, the partial sums of all unit groups (16-byte loads,
//   eight in flight). So a block moves H x cols values a step each way, not the 4H x cols of
//   dg_t, and no step waits on more than a handful of dependent global round trips.
// - Every shared-memory tile has a conflict-free layout (mma.cuh: A operands with rows 4 words
//   past a multiple of 8 words; B operands and products in swizzled rows of N columns).
// A launch's `mode` picks how the products run: scalar FMAs (the reference path), or tensor cores
// (mma.cuh: TF32 for f32, BF16 / FP16 for the 16-bit types; scalar for f64), where an f32 launch
// may take W_hh in bf16 or fp16 with fp32 states and accumulation (autocast).
// tinyflow_cuda/kernels/rnn.py (plan_sequence) cuts the launch and sizes its shared memory by the
// same layout; where W_hh's slice does not fit, it runs a GEMM and a fused cell kernel a step.
// States are (T+1, H, B) in the slots of sequence_slots: forward, step t reads slot t and writes
// t+1; reverse, it reads t+1 and writes t. The backward writes its gate gradients gate-major,
// (G*H, T, B), so that the op's weight-gradient GEMMs read them as a (G*H, T*B) matrix.
#include "common.cuh"
#include "mma.cuh"


template <typename T>
__device__ void lstm_forward_impl(T* __restrict__ gates, const T* __restrict__ c_prev,
                                  T* __restrict__ h, T* __restrict__ c, int H, int B) {
    using A = acc_t<T>;
    const long long HB = (long long)H * B;
    FOR_EACH_INDEX(idx, HB) {
        const A i = sigmoid(to_acc(gates[idx]));
        const A f = sigmoid(to_acc(gates[HB + idx]));
        const A g = tanh(to_acc(gates[2 * HB + idx]));
        const A o = sigmoid(to_acc(gates[3 * HB + idx]));
        gates[idx] = from_acc<T>(i);
        gates[HB + idx] = from_acc<T>(f);
        gates[2 * HB + idx] = from_acc<T>(g);
        gates[3 * HB + idx] = from_acc<T>(o);
        const A cell = f * to_acc(c_prev[idx]) + i * g;
        c[idx] = from_acc<T>(cell);
        h[idx] = from_acc<T>(o * tanh(cell));
    }
}

// dh, dc: gradients arriving at h and c (has_dc = 0 means dc is zero and may be null).
template <typename T>
__device__ void lstm_backward_impl(const T* __restrict__ dh, const T* __restrict__ dc, int has_dc,
                                   const T* __restrict__ acts, const T* __restrict__ c_prev,
                                   const T* __restrict__ c, T* __restrict__ dgates,
                                   T* __restrict__ dc_prev, int H, int B) {
    using A = acc_t<T>;
    const long long HB = (long long)H * B;
    FOR_EACH_INDEX(idx, HB) {
        const A i = to_acc(acts[idx]), f = to_acc(acts[HB + idx]);
        const A g = to_acc(acts[2 * HB + idx]), o = to_acc(acts[3 * HB + idx]);
        const A grad_h = to_acc(dh[idx]);
        const A tanh_c = tanh(to_acc(c[idx]));
        const A dc_total = (has_dc ? to_acc(dc[idx]) : A(0)) + grad_h * o * (A(1) - tanh_c * tanh_c);
        dgates[idx] = from_acc<T>(dc_total * g * i * (A(1) - i));
        dgates[HB + idx] = from_acc<T>(dc_total * to_acc(c_prev[idx]) * f * (A(1) - f));
        dgates[2 * HB + idx] = from_acc<T>(dc_total * i * (A(1) - g * g));
        dgates[3 * HB + idx] = from_acc<T>(grad_h * tanh_c * o * (A(1) - o));
        dc_prev[idx] = from_acc<T>(dc_total * f);
    }
}

// gi (3H, B) is overwritten with the activated gates (r, z, n); gh is only read.
template <typename T>
__device__ void gru_forward_impl(T* __restrict__ gi, const T* __restrict__ gh,
                                 const T* __restrict__ h_prev, T* __restrict__ h, int H, int B) {
    using A = acc_t<T>;
    const long long HB = (long long)H * B;
    FOR_EACH_INDEX(idx, HB) {
        const A r = sigmoid(to_acc(gi[idx]) + to_acc(gh[idx]));
        const A z = sigmoid(to_acc(gi[HB + idx]) + to_acc(gh[HB + idx]));
        const A n = tanh(to_acc(gi[2 * HB + idx]) + r * to_acc(gh[2 * HB + idx]));
        gi[idx] = from_acc<T>(r);
        gi[HB + idx] = from_acc<T>(z);
        gi[2 * HB + idx] = from_acc<T>(n);
        h[idx] = from_acc<T>(n + z * (to_acc(h_prev[idx]) - n));
    }
}

template <typename T>
__device__ void gru_backward_impl(const T* __restrict__ dh, const T* __restrict__ acts,
                                  const T* __restrict__ gh, const T* __restrict__ h_prev,
                                  T* __restrict__ dgi, T* __restrict__ dgh, T* __restrict__ dh_prev,
                                  int H, int B) {
    using A = acc_t<T>;
    const long long HB = (long long)H * B;
    FOR_EACH_INDEX(idx, HB) {
        const A r = to_acc(acts[idx]), z = to_acc(acts[HB + idx]), n = to_acc(acts[2 * HB + idx]);
        const A g = to_acc(dh[idx]);
        const A dn = g * (A(1) - z) * (A(1) - n * n);
        const A dz = g * (to_acc(h_prev[idx]) - n) * z * (A(1) - z);
        const A dr = dn * to_acc(gh[2 * HB + idx]) * r * (A(1) - r);
        dgi[idx] = from_acc<T>(dr);
        dgi[HB + idx] = from_acc<T>(dz);
        dgi[2 * HB + idx] = from_acc<T>(dn);
        dgh[idx] = from_acc<T>(dr);
        dgh[HB + idx] = from_acc<T>(dz);
        dgh[2 * HB + idx] = from_acc<T>(dn * r);
        dh_prev[idx] = from_acc<T>(g * z);
    }
}

// ---- whole sequences: the cut of a launch -------------------------------------------------------

__device__ __forceinline__ int round16(int n) { return (n + 15) & ~15; }

// The rows of a block's gates, 4 a unit, as the backward's product takes them (its K): a multiple
// of the instruction's K step, 16 for 16-bit pairs, else 8 (tf32, scalar).
template <class Path>
__device__ __forceinline__ int gate_rows(int units) {
    return Path::kPairs ? round16(4 * units) : (4 * units + 7) & ~7;
}
__device__ __forceinline__ int imin(int a, int b) { return a < b ? a : b; }
__device__ __forceinline__ int imax(int a, int b) { return a > b ? a : b; }

// The launch's cut (kernels/rnn.py plan_sequence chooses it) and this block's place in it.
struct Geometry {
    int H, B, steps, reverse;
    int U, groups;         // units a block; unit groups, ceil(H / U)
    int cols, N, log_n;    // batch columns a block; the tiles' columns (a power of two >= 32)
    int split, log_split;  // K slices of the products (a power of two)
    int kchunk;            // rows of h staged at once (forward; a multiple of 16)
    int group, batch_group, j0, own, b0, bcols;  // this block: its units [j0, j0 + own), columns
    long long HB, TB;
    __device__ Geometry(int H_, int B_, int steps_, int reverse_, int U_, int cols_, int split_,
                        int kchunk_)
        : H(H_), B(B_), steps(steps_), reverse(reverse_), U(U_), cols(cols_), split(split_),
          kchunk(kchunk_) {
        groups = (H + U - 1) / U;
        N = 32;
        while (N < cols) N <<= 1;
        log_n = log2_of(N);
        log_split = log2_of(split);
        batch_group = (int)blockIdx.x / groups;
        group = (int)blockIdx.x - batch_group * groups;
        j0 = group * U;
        own = imax(0, imin(U, H - j0));
        b0 = batch_group * cols;
        bcols = imax(0, imin(cols, B - b0));
        HB = (long long)H * B;
        TB = (long long)steps * B;
    }
    __device__ int batch_groups() const { return (int)gridDim.x / groups; }
};

// Carves the launch's dynamic shared memory into arrays, each 16-byte aligned. The host's
// sequence_shared_bytes (kernels/rnn.py) sizes the launch by the same layout.
struct Carve {
    unsigned char* next;
    template <typename U>
    __device__ U* take(long long count) {
        U* out = reinterpret_cast<U*>(next);
        next += ((unsigned long long)count * sizeof(U) + 15ull) & ~15ull;
        return out;
    }
};

// How the products are computed: scalar FMAs on W (the reference path), or tensor cores on In
// operands (tf32 for fp32 data; bf16 / fp16 pairs). X: what a staged value (h, dg) is stored as.
template <typename W, typename A> struct Scalar {
    using Weight = W;
    using X = A;
    static constexpr bool kMma = false, kPairs = false;
};
template <typename In> struct TensorCores {
    using Weight = In;
    using X = unsigned;  // tf32 bits, or two 16-bit values along K
    static constexpr bool kMma = true, kPairs = !same_type<In, float>::value;
};

// Bit moves between 16-byte quads and values.
__device__ __forceinline__ float quad_value(const Quad& q, int e, float*) {
    return __uint_as_float(q.w[e]);
}
__device__ __forceinline__ double quad_value(const Quad& q, int e, double*) {
    const unsigned long long bits = ((unsigned long long)q.w[2 * e + 1] << 32) | q.w[2 * e];
    return __longlong_as_double((long long)bits);
}
template <typename Half>
__device__ __forceinline__ Half quad_value(const Quad& q, int e, Half*) {
    return Half{(unsigned short)(q.w[e >> 1] >> ((e & 1) * 16))};
}
__device__ __forceinline__ void quad_put_half(Quad& q, int e, unsigned short bits) {
    const int shift = (e & 1) * 16;
    q.w[e >> 1] = (q.w[e >> 1] & ~(0xffffu << shift)) | ((unsigned)bits << shift);
}
__device__ __forceinline__ void quad_put(Quad& q, int e, float v) { q.w[e] = __float_as_uint(v); }
__device__ __forceinline__ void quad_put(Quad& q, int e, unsigned v) { q.w[e] = v; }
__device__ __forceinline__ void quad_put(Quad& q, int e, f16_t v) { quad_put_half(q, e, v.bits); }
__device__ __forceinline__ void quad_put(Quad& q, int e, bf16_t v) { quad_put_half(q, e, v.bits); }
__device__ __forceinline__ void quad_put(Quad& q, int e, double v) {
    const unsigned long long bits = (unsigned long long)__double_as_longlong(v);
    q.w[2 * e] = (unsigned)bits;
    q.w[2 * e + 1] = (unsigned)(bits >> 32);
}

// A value of type V as the product's operand: fp32 / fp64 for the scalar path, tf32 bits, or the
// 16 bits of In (16-bit values of In pass unchanged).
template <class Path, typename V>
__device__ __forceinline__ typename Path::X operand(V v) {
    if constexpr (!Path::kMma) return to_acc(v);
    else return to_tf32(to_acc(v));
}
template <typename In, typename V>
__device__ __forceinline__ unsigned short half_operand(V v) {
    if constexpr (same_type<V, In>::value) return v.bits;
    else return from_acc<In>(to_acc(v)).bits;
}

// ---- whole sequences: shared-memory tiles -------------------------------------------------------

// The row length (4-byte words) of a W_hh slice of `count` elements a row: lead_words for the
// tensor cores' operands; an odd number of elements for 8-byte ones (scalar only), so that 16
// lanes on consecutive rows of a column store to 32 distinct banks.
template <typename W>
__device__ __forceinline__ int weight_lead(int count) {
    if constexpr (sizeof(W) == 8) return 2 * (count | 1);
    else return lead_words(count * (int)sizeof(W) / 4);
}

// The block's rows of W_hh, unit-major (row u * 4 + k = gate k of unit u, zero for the GRU's
// k = 3 and past its units), K = H columns padded to Kp with zeros; rows `ld` words apart
// (weight_lead). Forward: A operand (rows, K). Transposed (backward): A operand of W_hh^T, row m
// of it holds column m of the block's rows (rows Hp, K = its 4U rows).
template <class Path, int G>
__device__ void load_weights(unsigned* smem, int ld_words, const typename Path::Weight* w_hh,
                             const Geometry& g, bool transposed) {
    using W = typename Path::Weight;
    W* w = reinterpret_cast<W*>(smem);
    const int ld = ld_words * 4 / (int)sizeof(W);
    auto value = [&](int u, int k, int m) {  // W_hh[k * H + j0 + u, m] rounded as the products want
        const bool real = u < g.own && k < G && m < g.H;
        const W v = real ? w_hh[(k * g.H + g.j0 + u) * g.H + m] : from_acc<W>(acc_t<W>(0));
        if constexpr (Path::kMma && !Path::kPairs) return __uint_as_float(to_tf32(v));
        else return v;
    };
    if (!transposed) {  // rows u * 4 + k, consecutive threads on consecutive columns m
        in_flight(Path::kMma ? round16(4 * g.U) : 4 * g.U, round16(g.H),
                  [&](int r, int m) { return value(r >> 2, r & 3, m); },
                  [&](int r, int m, W v) { w[r * ld + m] = v; });
    } else if constexpr (sizeof(W) == 8) {  // row m, columns u * 4 + k: consecutive threads on m
        in_flight(gate_rows<Path>(g.U), round16(g.H),
                  [&](int r, int m) { return value(r >> 2, r & 3, m); },
                  [&](int r, int m, W v) { w[m * ld + r] = v; });
    } else {  // consecutive threads on (m, k), k fastest: 8 rows m x 4 words, 32 banks
        in_flight(gate_rows<Path>(g.U) / 4, round16(g.H) * 4,
                  [&](int u, int mk) { return value(u, mk & 3, mk >> 2); },
                  [&](int u, int mk, W v) { w[(mk >> 2) * ld + u * 4 + (mk & 3)] = v; });
    }
}

// 16-byte loads of src and the staged values they give: kRows source rows (2: pairs along K for
// 16-bit tensor-core operands) of kCols columns.
template <class Path, typename T>
struct Stage {
    using X = typename Path::X;
    static constexpr int kCols = 16 / (int)sizeof(T);
    static constexpr int kRows = Path::kPairs ? 2 : 1;
    static constexpr int kQuads = kCols * (Path::kPairs ? 4 : (int)sizeof(X)) / 16;  // stored
    struct Loaded {
        Quad q[kRows];
    };
};

// Stage rows [k_lo, k_hi) of h (H, B), the block's columns, into the swizzled tile xs (N columns;
// rows past H and columns past the block's are zero). 16-byte loads where rows and columns are
// aligned to them, else element by element; kInFlight a thread at a time either way.
// `start`: stage_start's Walk, made once a launch.
template <class Path, typename T>
__device__ void stage_rows(typename Path::X* xs, const T* __restrict__ h, const Geometry& g,
                           const Walk& start, int k_lo, int k_hi) {
    using S = Stage<Path, T>;
    const T* base = h + g.b0;
    const bool vec = g.B % S::kCols == 0 && g.bcols % S::kCols == 0 &&
                     (reinterpret_cast<unsigned long long>(h) & 15ull) == 0;
    auto load = [&](int row, int q) {
        typename S::Loaded v;
        const int c = q * S::kCols;
        for (int i = 0; i < S::kRows; ++i) {
            const int k = k_lo + row * S::kRows + i;
            const T* src = base + (long long)k * g.B + c;
            v.q[i] = Quad{{0u, 0u, 0u, 0u}};
            if (k >= g.H || c >= g.bcols) continue;
            if (vec) {
                v.q[i] = load_quad_cg(src);
            } else {
                for (int e = 0; e < S::kCols; ++e)
                    if (c + e < g.bcols) quad_put(v.q[i], e, load_cg(src + e));
            }
        }
        return v;
    };
    auto store = [&](int row, int q, const typename S::Loaded& v) {
        Quad out[S::kQuads];
        for (int e = 0; e < S::kCols; ++e) {
            T* tag = nullptr;
            if constexpr (Path::kPairs) {
                using In = typename Path::Weight;
                const unsigned lo = half_operand<In>(quad_value(v.q[0], e, tag));
                const unsigned hi = half_operand<In>(quad_value(v.q[1], e, tag));
                quad_put(out[e >> 2], e & 3, lo | (hi << 16));
            } else {
                constexpr int per = 16 / (int)sizeof(typename Path::X);
                quad_put(out[e / per], e % per, operand<Path>(quad_value(v.q[0], e, tag)));
            }
        }
        typename Path::X* dst = xs + row * g.N;
        constexpr int per_quad = 16 / (int)sizeof(typename Path::X);
        // two quads an item (16-bit data): lanes 4-7 of each 8 store their second one first, so
        // that each store of a quarter warp covers 8 distinct 16-byte bank groups
        const int flip = S::kQuads == 2 ? (int)(threadIdx.x >> 2) & 1 : 0;
        for (int i = 0; i < S::kQuads; ++i) {
            const int j = i ^ flip;
            *reinterpret_cast<Quad*>(dst + swz(row, q * S::kCols + j * per_quad)) =
                j == 0 ? out[0] : out[S::kQuads - 1];
        }
    };
    in_flight<kInFlight / S::kRows>(start, (k_hi - k_lo) / S::kRows, load, store);
}

// Where a thread's staging items start (stage_rows): one division a launch.
template <class Path, typename T>
__device__ Walk stage_start(const Geometry& g) {
    return Walk((int)threadIdx.x, (int)blockDim.x, g.N / Stage<Path, T>::kCols);
}

// ---- whole sequences: the per-step products ----------------------------------------------------

// A thread's first scalar item of chunk_products, threadIdx.x as (K slice, (unit, column) pair):
// one division a launch.
struct Item {
    int slice, pair;
};
__device__ __forceinline__ Item first_item(const Geometry& g) {
    const int pairs = g.U * g.N, s = (int)threadIdx.x / pairs;
    return Item{s, (int)threadIdx.x - s * pairs};
}

// The forward's products of one staged K-chunk, k in [k_lo, k_hi): the partial sums parts
// (split x Mp x N, swizzled rows) of out (rows, N) = W_slice (rows, Kp) x h (Kp, N), written by the
// first chunk and added to by the others (a shared-memory round trip per item and chunk, no
// accumulators to keep in registers across the chunks). Scalar: thread items ((unit, column)
// pair, K slice), the 4 gate rows of the unit at once (one load of h for 4 products),
// consecutive threads on consecutive columns of one unit and slice, the slice's K indices
// interleaved (s, s + split, ...). Tensor cores: warp items (16 x 8 tile, K slice), the slice a
// contiguous range of Kp / split.
// start: this thread's first scalar item (first_item).
template <class Path, typename A>
__device__ void chunk_products(A* parts, const unsigned* w_words, int ld_words,
                               const typename Path::X* xs, const Geometry& g, int Mp,
                               Item start, int k_lo, int k_hi, bool first) {
    if constexpr (Path::kMma) {
        using In = typename Path::Weight;
        const int log_tn = g.log_n - 3, span = round16(g.H) >> g.log_split;
        const int total = ((Mp >> 4) << log_tn) << g.log_split;
        for (int e = (int)mma_warp(); e < total; e += (int)(blockDim.x >> 5)) {  // warp-uniform
            const int slice = e & (g.split - 1), tile = e >> g.log_split;
            const int r0 = (tile >> log_tn) * 16, n0 = (tile & ((g.N >> 3) - 1)) * 8;
            const int lo = imax(k_lo, slice * span), hi = imin(k_hi, (slice + 1) * span);
            if ((lo >= hi && !first) || n0 >= g.bcols) continue;  // past the block's columns: unread
            float* out = parts + slice * Mp * g.N;
            float d[4] = {0.f, 0.f, 0.f, 0.f};
            if (!first) load_tile_swizzled(d, out, g.N, r0, n0);
            mma_span<In>(d, w_words, ld_words, xs, g.N, k_lo, r0, n0, lo, hi);
            store_tile_swizzled(out, g.N, d, r0, n0);
        }
    } else {
        using W = typename Path::Weight;
        const W* w = reinterpret_cast<const W*>(w_words);
        const int ld = ld_words * 4 / (int)sizeof(W), pairs = g.U * g.N;
        const int threads = (int)blockDim.x;
        int s = start.slice, p = start.pair;  // item (s, p)
        for (; s < g.split; p += threads) {
            while (p >= pairs) p -= pairs, ++s;
            if (s >= g.split) break;
            const int r0 = (p >> g.log_n) * 4, c = p & (g.N - 1);  // rows r0..r0+3: gates 0..3
            if (c >= g.bcols) continue;
            A* out = parts + s * Mp * g.N;
            A sum[4];
            for (int k = 0; k < 4; ++k) sum[k] = first ? A(0) : out[(r0 + k) * g.N + swz(r0 + k, c)];
            const W* wr = w + r0 * ld;
            for (int k = k_lo + ((s - k_lo) & (g.split - 1)); k < k_hi; k += g.split) {
                const A x = xs[(k - k_lo) * g.N + swz(k - k_lo, c)];
                for (int gate = 0; gate < 4; ++gate) sum[gate] += to_acc(wr[gate * ld + k]) * x;
            }
            for (int k = 0; k < 4; ++k) out[(r0 + k) * g.N + swz(r0 + k, c)] = sum[k];
        }
    }
}

// The backward's product of a step: its share of dh_{t-1} for every unit, out (H, cols) =
// W_slice^T (H, 4U) x dg (4U, N), written to the block's slot of the partial sums (rows CP apart).
template <class Path, typename A>
__device__ void product_to_partials(A* out, int CP, const unsigned* wt_words, int ld_words,
                                    const typename Path::X* dg, const Geometry& g) {
    const int K = gate_rows<Path>(g.U);
    if constexpr (Path::kMma) {
        using In = typename Path::Weight;
        const int tiles_n = g.N >> 3, log_tn = g.log_n - 3, tiles = (round16(g.H) >> 4) * tiles_n;
        for (int tile = (int)mma_warp(); tile < tiles; tile += (int)(blockDim.x >> 5)) {
            float d[4] = {0.f, 0.f, 0.f, 0.f};
            const int r0 = (tile >> log_tn) * 16, n0 = (tile & (tiles_n - 1)) * 8;
            if (n0 >= CP) continue;  // past the block's columns (warp-uniform)
            mma_span<In>(d, wt_words, ld_words, dg, g.N, 0, r0, n0, 0, K);
            const FragmentPlace at(r0, n0);
            if (at.col < CP) {
                if (at.row0 < g.H) store_pair(out + at.row0 * CP + at.col, d[0], d[1]);
                if (at.row1 < g.H) store_pair(out + at.row1 * CP + at.col, d[2], d[3]);
            }
        }
    } else {
        using W = typename Path::Weight;
        const W* wt = reinterpret_cast<const W*>(wt_words);
        const int ld = ld_words * 4 / (int)sizeof(W), n = g.H << g.log_n;
        for (int o = (int)threadIdx.x; o < n; o += (int)blockDim.x) {
            const int m = o >> g.log_n, c = o & (g.N - 1);
            if (c >= CP) continue;
            A sum = A(0);
            for (int r = 0; r < K; ++r) sum += to_acc(wt[m * ld + r]) * dg[r * g.N + swz(r, c)];
            out[m * CP + c] = sum;
        }
    }
}

// The sums over unit groups of the partial sums of the block's units: red[z][u * CP + c], z < Z
// (a few sums a value, added by the cell), from `groups` slots of (H, CP) values. A thread takes
// a quad p of the block's own x CP values and every Z-th group, kInFlight loads at a time.
template <typename A>
struct Reduce {
    static constexpr int kQ = 16 / (int)sizeof(A);  // values a quad
    int quads, Z, z, first, step;
    __device__ Reduce(const Geometry& g, int CP) {
        quads = g.own * CP / kQ;
        const int threads = (int)blockDim.x, tid = (int)threadIdx.x;
        if (quads == 0) {
            Z = 1, z = 0, first = 0, step = 1;
        } else if (quads <= threads) {
            Z = threads / quads;
            z = tid / quads;
            first = z < Z ? tid - z * quads : quads;
            step = quads;
        } else {
            Z = 1, z = 0, first = tid, step = threads;
        }
    }
    // slot0: the block's units in the first group's slot; stride: from one group's to the next
    __device__ void run(const A* slot0, long long stride, int groups, A* red) const {
        for (int p = first; p < quads; p += step) {
            A sum[kQ];
            for (int e = 0; e < kQ; ++e) sum[e] = A(0);
            const A* src = slot0 + z * stride + p * kQ;
            for (int group = z; group < groups;
                 group += kInFlight * Z, src += kInFlight * Z * stride) {
                Quad v[kInFlight];
#pragma unroll
                for (int i = 0; i < kInFlight; ++i)
                    if (group + i * Z < groups) v[i] = load_quad_cg(src + i * Z * stride);
#pragma unroll
                for (int i = 0; i < kInFlight; ++i)
                    if (group + i * Z < groups)
                        for (int e = 0; e < kQ; ++e) sum[e] += quad_value(v[i], e, (A*)nullptr);
            }
            Quad out;
            for (int e = 0; e < kQ; ++e) quad_put(out, e, sum[e]);
            *reinterpret_cast<Quad*>(red + (z * quads + p) * kQ) = out;
        }
    }
    __device__ A total(const A* red, int at) const {  // at = u * CP + c
        A sum = A(0);
        for (int i = 0; i < Z; ++i) sum += red[i * quads * kQ + at];
        return sum;
    }
};

// ---- whole sequences: the skeleton --------------------------------------------------------------

// Every (unit u, column c) pair of the block, consecutive threads on consecutive columns:
// visit(u, c, j, b, e) with j = j0 + u, b = b0 + c, e = j * B + b.
template <typename Visit>
__device__ __forceinline__ void for_each_pair(const Geometry& g, Visit visit) {
    const int n = g.own << g.log_n;
    for (int p = (int)threadIdx.x; p < n; p += (int)blockDim.x) {
        const int u = p >> g.log_n, c = p & (g.N - 1);
        if (c >= g.bcols) continue;
        const int j = g.j0 + u, b = g.b0 + c;
        visit(u, c, j, b, (long long)j * g.B + b);
    }
}

// All T steps forward: per step, stage h_{t-1}, multiply, run the cell of every pair (Cell: see
// LstmForward), one grid barrier.
template <class Path, class Cell>
__device__ void sequence_forward(const Cell& cell, const typename Path::Weight* __restrict__ w_hh,
                                 const Geometry& g) {
    using T = typename Cell::T;
    using A = acc_t<T>;
    using X = typename Path::X;
    const int Mp = Path::kMma ? round16(4 * g.U) : 4 * g.U, Kp = round16(g.H);  // m16 tiles
    const int ld = weight_lead<typename Path::Weight>(Kp);
    TF_DYNAMIC_SHARED(unsigned char, smem);
    Carve carve{smem};
    unsigned* w = carve.take<unsigned>((long long)Mp * ld);
    X* xs = carve.take<X>((long long)(Path::kPairs ? g.kchunk / 2 : g.kchunk) * g.N);
    A* parts = carve.take<A>((long long)g.split * Mp * g.N);
    A* state = carve.take<A>((long long)g.U * g.N);  // the running c (LSTM; unused by the GRU)

    load_weights<Path, Cell::G>(w, ld, w_hh, g, false);
    for_each_pair(g, [&](int u, int c, int j, int b, long long e) {
        cell.start(g, e, state[(u << g.log_n) + c]);
    });
    const Walk staging = stage_start<Path, T>(g);
    const Item item = first_item(g);
    for (int s = 0; s < g.steps; ++s) {
        const int t = g.reverse ? g.steps - 1 - s : s;
        const int next = g.reverse ? t : t + 1;
        const T* h = s == 0 ? cell.h0 : cell.hs + (g.reverse ? t + 1 : t) * g.HB;  // null: zeros
        for (int k_lo = 0; h != nullptr && k_lo < Kp; k_lo += g.kchunk) {
            const int k_hi = imin(Kp, k_lo + g.kchunk);
            __syncthreads();  // the chunk before is consumed
            stage_rows<Path>(xs, h, g, staging, k_lo, k_hi);
            __syncthreads();
            chunk_products<Path>(parts, w, ld, xs, g, Mp, item, k_lo, k_hi, k_lo == 0);
        }
        __syncthreads();
        for_each_pair(g, [&](int u, int c, int j, int b, long long e) {
            A rec[4];
            for (int k = 0; k < 4; ++k) {
                const int r = u * 4 + k;
                A sum = A(0);
                for (int sl = 0; h != nullptr && sl < g.split; ++sl)
                    sum += parts[(sl * Mp + r) * g.N + swz(r, c)];
                rec[k] = sum;
            }
            cell.step(g, t, next, j, b, e, h, rec, state[(u << g.log_n) + c]);
        });
        if (s + 1 < g.steps) grid_sync();  // h_t is complete everywhere
    }
}

// All T steps backward: per step, the partial sums of the step before (s > 0) give dh at the
// block's units, the cell backward of every pair gives dg, the block's product with it goes to
// the partial sums, one grid barrier. At the end the last partial sums give dh0.
template <class Path, class Cell>
__device__ void sequence_backward(const Cell& cell, const typename Path::Weight* __restrict__ w_hh,
                                  acc_t<typename Cell::T>* partials, const Geometry& g) {
    using T = typename Cell::T;
    using A = acc_t<T>;
    using X = typename Path::X;
    const int Hp = round16(g.H), K = gate_rows<Path>(g.U);
    const int ld = weight_lead<typename Path::Weight>(K);
    const int CP = (g.cols + Reduce<A>::kQ - 1) / Reduce<A>::kQ * Reduce<A>::kQ;  // a slot's row
    TF_DYNAMIC_SHARED(unsigned char, smem);
    Carve carve{smem};
    unsigned* wt = carve.take<unsigned>((long long)Hp * ld);
    const int dg_rows = Path::kPairs ? K / 2 : K;
    X* dg = carve.take<X>((long long)dg_rows * g.N);
    const int red_quads = imax((int)blockDim.x, g.U * CP / Reduce<A>::kQ);
    A* red = carve.take<A>((long long)red_quads * Reduce<A>::kQ);
    A* carry = carve.take<A>((long long)g.U * g.N);  // dh not yet through W_hh^T (GRU: dh * z)
    A* dc = carve.take<A>((long long)g.U * g.N);     // the running dc (LSTM)

    load_weights<Path, Cell::G>(wt, ld, w_hh, g, true);
    for (int i = (int)threadIdx.x; i < dg_rows * g.N; i += (int)blockDim.x) dg[i] = X(0);
    for_each_pair(g, [&](int u, int c, int j, int b, long long e) {
        cell.start(g, e, carry[(u << g.log_n) + c], dc[(u << g.log_n) + c]);
    });
    const Reduce<A> reduce(g, CP);
    const long long slot = (long long)g.H * CP;  // one block's partial sums
    A* const mine = partials + ((long long)g.batch_group * g.groups + g.group) * slot;
    const long long parity_stride = (long long)g.batch_groups() * g.groups * slot;
    auto sums_of = [&](int s) {  // the block's units in group 0's slot of step s's partial sums
        return partials + (s & 1) * parity_stride + (long long)g.batch_group * g.groups * slot +
               (long long)g.j0 * CP;
    };
    for (int s = 0; s < g.steps; ++s) {
        const int t = g.reverse ? s : g.steps - 1 - s;  // the forward's steps, last first
        if (s > 0) reduce.run(sums_of(s - 1), slot, g.groups, red);
        __syncthreads();
        for_each_pair(g, [&](int u, int c, int j, int b, long long e) {
            const int at = (u << g.log_n) + c;
            const A dh_rec = s > 0 ? reduce.total(red, u * CP + c) : A(0);
            T d[4];  // the gate gradients as stored (the product takes them so, as the reference)
            cell.step(g, t, j, b, e, dh_rec, carry[at], dc[at], d);
            if constexpr (Path::kPairs) {  // pair rows u * 2, u * 2 + 1: gates (0, 1), (2, 3)
                using In = typename Path::Weight;
                for (int h = 0; h < 2; ++h) {
                    const int r = u * 2 + h;
                    dg[r * g.N + swz(r, c)] = half_operand<In>(d[2 * h]) |
                                              ((unsigned)half_operand<In>(d[2 * h + 1]) << 16);
                }
            } else {
                for (int k = 0; k < 4; ++k) {
                    const int r = u * 4 + k;
                    dg[r * g.N + swz(r, c)] = operand<Path>(d[k]);
                }
            }
        });
        __syncthreads();
        product_to_partials<Path>(mine + (s & 1) * parity_stride, CP, wt, ld, dg, g);
        grid_sync();  // every block's partial sums of this step are complete
    }
    reduce.run(sums_of(g.steps - 1), slot, g.groups, red);
    __syncthreads();
    for_each_pair(g, [&](int u, int c, int j, int b, long long e) {
        const int at = (u << g.log_n) + c;
        cell.finish(e, reduce.total(red, u * CP + c) + carry[at], dc[at]);
    });
}

// ---- whole sequences: the cells -----------------------------------------------------------------

// proj (4H, T, B): W_ih x_t + biases; h0, c0 (H, B) or null (zeros); acts (T, 4H, B) out: the
// activated gates; hs, cs (T+1, H, B) out.
template <typename T_>
struct LstmForward {
    using T = T_;
    using A = acc_t<T>;
    static constexpr int G = 4;  // gates
    const T *proj, *h0, *c0;
    T *acts, *hs, *cs;
    __device__ void start(const Geometry& g, long long e, A& c_run) const {
        const long long init = (g.reverse ? g.steps : 0) * g.HB + e;
        const A h = h0 ? to_acc(h0[e]) : A(0), c = c0 ? to_acc(c0[e]) : A(0);
        hs[init] = from_acc<T>(h);
        cs[init] = from_acc<T>(c);
        c_run = c;
    }
    __device__ void step(const Geometry& g, int t, int next, int j, int b, long long e, const T*,
                         const A (&rec)[4], A& c_run) const {
        T* gates = acts + 4 * (long long)t * g.HB;
        const long long col = (long long)t * g.B + b;
        A pre[4];
        for (int k = 0; k < 4; ++k)
            pre[k] = rec[k] + to_acc(proj[(long long)(k * g.H + j) * g.TB + col]);
        const A i = sigmoid(pre[0]), f = sigmoid(pre[1]), gg = tanh(pre[2]), o = sigmoid(pre[3]);
        const A act[4] = {i, f, gg, o};
        for (int k = 0; k < 4; ++k) gates[k * g.HB + e] = from_acc<T>(act[k]);
        const A cell = f * c_run + i * gg;
        c_run = cell;
        cs[next * g.HB + e] = from_acc<T>(cell);
        hs[next * g.HB + e] = from_acc<T>(o * tanh(cell));
    }
};

// proj (3H, T, B): W_ih x_t + b_ih; b_hh (3H) or null; h0 (H, B) or null; acts (T, 3H, B) out:
// activated gates (r, z, n); gh (T, 3H, B) out: W_hh h + b_hh; hs out.
template <typename T_>
struct GruForward {
    using T = T_;
    using A = acc_t<T>;
    static constexpr int G = 3;  // gates
    const T *proj, *b_hh, *h0;
    T *acts, *gh, *hs;
    __device__ void start(const Geometry& g, long long e, A&) const {
        hs[(g.reverse ? g.steps : 0) * g.HB + e] = h0 ? h0[e] : from_acc<T>(A(0));
    }
    __device__ void step(const Geometry& g, int t, int next, int j, int b, long long e, const T* h,
                         const A (&rec_in)[4], A&) const {
        const long long col = (long long)t * g.B + b, gt = 3 * (long long)t * g.HB;
        A rec[3];
        for (int k = 0; k < 3; ++k) rec[k] = rec_in[k] + (b_hh ? to_acc(b_hh[k * g.H + j]) : A(0));
        const A r = sigmoid(to_acc(proj[(long long)j * g.TB + col]) + rec[0]);
        const A z = sigmoid(to_acc(proj[(long long)(g.H + j) * g.TB + col]) + rec[1]);
        const A n = tanh(to_acc(proj[(long long)(2 * g.H + j) * g.TB + col]) + r * rec[2]);
        const A h_prev = h ? to_acc(load_cg(h + e)) : A(0);
        const A act[3] = {r, z, n};
        for (int k = 0; k < 3; ++k) {
            gh[gt + k * g.HB + e] = from_acc<T>(rec[k]);
            acts[gt + k * g.HB + e] = from_acc<T>(act[k]);
        }
        hs[next * g.HB + e] = from_acc<T>(n + z * (h_prev - n));
    }
};

// dout (T, H, B): gradient of the outputs; dh_n, dc_n (H, B) or null (zeros); acts, cs from the
// forward; dgates (4H, T, B) out (gate-major); dh, dc (H, B) out: dh0 and dc0.
template <typename T_>
struct LstmBackward {
    using T = T_;
    using A = acc_t<T>;
    static constexpr int G = 4;  // gates
    const T *dout, *dh_n, *dc_n, *acts, *cs;
    T *dgates, *dh, *dc;
    __device__ void start(const Geometry&, long long e, A& carry, A& dc_run) const {
        carry = dh_n ? to_acc(dh_n[e]) : A(0);
        dc_run = dc_n ? to_acc(dc_n[e]) : A(0);
    }
    // dh_rec: (W_hh^T dgates_{t+1}) at (j, b); dq out: the gate gradients as stored
    __device__ void step(const Geometry& g, int t, int j, int b, long long e, A dh_rec, A& carry,
                         A& dc_run, T (&dq)[4]) const {
        const int prev = g.reverse ? t + 1 : t, next = g.reverse ? t : t + 1;
        const T* a = acts + 4 * (long long)t * g.HB;
        const A i = to_acc(a[e]), f = to_acc(a[g.HB + e]), gg = to_acc(a[2 * g.HB + e]);
        const A o = to_acc(a[3 * g.HB + e]);
        const A grad_h = carry + dh_rec + to_acc(dout[t * g.HB + e]);
        const A tanh_c = tanh(to_acc(cs[next * g.HB + e]));
        const A dc_total = dc_run + grad_h * o * (A(1) - tanh_c * tanh_c);
        const A d[4] = {dc_total * gg * i * (A(1) - i),
                        dc_total * to_acc(cs[prev * g.HB + e]) * f * (A(1) - f),
                        dc_total * i * (A(1) - gg * gg), grad_h * tanh_c * o * (A(1) - o)};
        for (int k = 0; k < 4; ++k) {
            dq[k] = from_acc<T>(d[k]);
            dgates[(long long)(k * g.H + j) * g.TB + (long long)t * g.B + b] = dq[k];
        }
        carry = A(0);  // from now on dh arrives through the partial sums
        dc_run = dc_total * f;
    }
    __device__ void finish(long long e, A dh_total, A dc_run) const {
        dh[e] = from_acc<T>(dh_total);
        dc[e] = from_acc<T>(dc_run);
    }
};

// dout (T, H, B); dh_n (H, B) or null; dgi, dgh (3H, T, B) out (gate-major); dh (H, B) out: dh0.
template <typename T_>
struct GruBackward {
    using T = T_;
    using A = acc_t<T>;
    static constexpr int G = 3;  // gates
    const T *dout, *dh_n, *acts, *gh, *hs;
    T *dgi, *dgh, *dh;
    __device__ void start(const Geometry&, long long e, A& carry, A&) const {
        carry = dh_n ? to_acc(dh_n[e]) : A(0);
    }
    __device__ void step(const Geometry& g, int t, int j, int b, long long e, A dh_rec, A& carry,
                         A&, T (&dq)[4]) const {
        const int prev = g.reverse ? t + 1 : t;
        const long long gt = 3 * (long long)t * g.HB;
        const A r = to_acc(acts[gt + e]), z = to_acc(acts[gt + g.HB + e]);
        const A n = to_acc(acts[gt + 2 * g.HB + e]);
        const A grad = carry + dh_rec + to_acc(dout[t * g.HB + e]);
        const A dn = grad * (A(1) - z) * (A(1) - n * n);
        const A dz = grad * (to_acc(hs[prev * g.HB + e]) - n) * z * (A(1) - z);
        const A dr = dn * to_acc(gh[gt + 2 * g.HB + e]) * r * (A(1) - r);
        const A d_in[3] = {dr, dz, dn}, d_rec[3] = {dr, dz, dn * r};
        for (int k = 0; k < 3; ++k) {
            const long long at = (long long)(k * g.H + j) * g.TB + (long long)t * g.B + b;
            dgi[at] = from_acc<T>(d_in[k]);
            dq[k] = from_acc<T>(d_rec[k]);
            dgh[at] = dq[k];
        }
        dq[3] = from_acc<T>(A(0));
        carry = grad * z;  // the direct part of dh_{t-1}
    }
    __device__ void finish(long long e, A dh_total, A) const { dh[e] = from_acc<T>(dh_total); }
};

// ---- entry points, one per dtype ----------------------------------------------------------------
#define RNN_CELL_KERNELS(sfx, T)                                                                    \
    __global__ void lstm_cell_forward_##sfx(T* gates, const T* c_prev, T* h, T* c, int H, int B) {  \
        lstm_forward_impl<T>(gates, c_prev, h, c, H, B);                                            \
    }                                                                                               \
    __global__ void lstm_cell_backward_##sfx(const T* dh, const T* dc, int has_dc, const T* acts,   \
                                             const T* c_prev, const T* c, T* dgates, T* dc_prev,    \
                                             int H, int B) {                                        \
        lstm_backward_impl<T>(dh, dc, has_dc, acts, c_prev, c, dgates, dc_prev, H, B);              \
    }                                                                                               \
    __global__ void gru_cell_forward_##sfx(T* gi, const T* gh, const T* h_prev, T* h, int H,        \
                                           int B) {                                                 \
        gru_forward_impl<T>(gi, gh, h_prev, h, H, B);                                               \
    }                                                                                               \
    __global__ void gru_cell_backward_##sfx(const T* dh, const T* acts, const T* gh,                \
                                            const T* h_prev, T* dgi, T* dgh, T* dh_prev, int H,     \
                                            int B) {                                                \
        gru_backward_impl<T>(dh, acts, gh, h_prev, dgi, dgh, dh_prev, H, B);                        \
    }


// The product path of a launch, from its `mode` (kernels/rnn.py, sequence_mode): bit 2 set,
// tensor cores on T (f64: scalar FMAs anyway), where an f32 launch takes bf16 (bits 0-1 = 1) or
// fp16 (2) weights with fp32 states (autocast); clear, scalar FMAs on weights of the data's dtype.
template <typename T, typename Run>
__device__ __forceinline__ void with_path(int mode, Run run) {
    const bool tensor_cores = (mode & 4) != 0;
    const int weights = mode & 3;
    if constexpr (same_type<T, double>::value) {
        run(Scalar<T, acc_t<T>>{});
    } else if (!tensor_cores) {
        run(Scalar<T, acc_t<T>>{});
    } else if constexpr (same_type<T, float>::value) {
        if (weights == 1) run(TensorCores<bf16_t>{});
        else if (weights == 2) run(TensorCores<f16_t>{});
        else run(TensorCores<float>{});
    } else {
        run(TensorCores<T>{});
    }
}

template <class Cell>
__device__ void run_forward(const Cell& cell, const void* w_hh, int mode, const Geometry& g) {
    with_path<typename Cell::T>(mode, [&](auto path) {
        using P = decltype(path);
        sequence_forward<P>(cell, static_cast<const typename P::Weight*>(w_hh), g);
    });
}
template <class Cell>
__device__ void run_backward(const Cell& cell, const void* w_hh, int mode,
                             acc_t<typename Cell::T>* partials, const Geometry& g) {
    with_path<typename Cell::T>(mode, [&](auto path) {
        using P = decltype(path);
        sequence_backward<P>(cell, static_cast<const typename P::Weight*>(w_hh), partials, g);
    });
}

// Every sequence kernel takes the cut last: steps, H, B, reverse, mode (with_path), units, cols,
// split, kchunk (kernels/rnn.py, plan_sequence). At most 512 threads a block: up to 128 registers
// a thread (kernels/rnn.py GPU_THREAD_CHOICES).
#define RNN_GEOMETRY Geometry(H, B, steps, reverse, units, cols, split, kchunk)
#define RNN_SEQUENCE_KERNELS(sfx, T)                                                                \
    __launch_bounds__(512) TF_COOPERATIVE __global__ void lstm_sequence_forward_##sfx(              \
        const T* proj, const void* w_hh, const T* h0, const T* c0, T* acts, T* hs, T* cs,           \
        int steps, int H, int B, int reverse, int mode, int units, int cols, int split,             \
        int kchunk) {                                                                               \
        run_forward(LstmForward<T>{proj, h0, c0, acts, hs, cs}, w_hh, mode, RNN_GEOMETRY);          \
    }                                                                                               \
    __launch_bounds__(512) TF_COOPERATIVE __global__ void gru_sequence_forward_##sfx(               \
        const T* proj, const void* w_hh, const T* b_hh, const T* h0, T* acts, T* gh, T* hs,         \
        int steps, int H, int B, int reverse, int mode, int units, int cols, int split,             \
        int kchunk) {                                                                               \
        run_forward(GruForward<T>{proj, b_hh, h0, acts, gh, hs}, w_hh, mode, RNN_GEOMETRY);         \
    }                                                                                               \
    __launch_bounds__(512) TF_COOPERATIVE __global__ void lstm_sequence_backward_##sfx(             \
        const T* dout, const T* dh_n, const T* dc_n, const void* w_hh, const T* acts, const T* cs,  \
        T* dgates, T* dh, T* dc, acc_t<T>* partials, int steps, int H, int B, int reverse,          \
        int mode, int units, int cols, int split, int kchunk) {                                     \
        run_backward(LstmBackward<T>{dout, dh_n, dc_n, acts, cs, dgates, dh, dc}, w_hh, mode,       \
                     partials, RNN_GEOMETRY);                                                       \
    }                                                                                               \
    __launch_bounds__(512) TF_COOPERATIVE __global__ void gru_sequence_backward_##sfx(              \
        const T* dout, const T* dh_n, const void* w_hh, const T* acts, const T* gh, const T* hs,    \
        T* dgi, T* dgh, T* dh, acc_t<T>* partials, int steps, int H, int B, int reverse, int mode,  \
        int units, int cols, int split, int kchunk) {                                               \
        run_backward(GruBackward<T>{dout, dh_n, acts, gh, hs, dgi, dgh, dh}, w_hh, mode, partials,  \
                     RNN_GEOMETRY);                                                                 \
    }

extern "C" {
TF_FLOAT_TYPES(RNN_CELL_KERNELS)
TF_FLOAT_TYPES(RNN_SEQUENCE_KERNELS)
}
