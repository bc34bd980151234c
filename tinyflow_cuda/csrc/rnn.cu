// Fused LSTM and GRU cells, and the whole recurrence of a layer as one persistent kernel
// (tinyflow/kernels/rnn.py is the reference; docs/lstm.md draws who holds what).
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
// direction, the way Persistent RNNs (Diamos et al., 2016) do:
// - block b owns the hidden units [b * per, b * per + own) and copies its slice of W_hh into
//   shared memory ONCE for the whole sequence (forward: the G gate rows of its units, (G*own, H);
//   backward: the columns of its units, (own, G*H), i.e. its rows of W_hh^T);
// - at each step it stages the vector every unit needs, h_{t-1} (forward) or the step's gate
//   gradients dgates_t (backward), from global memory into shared memory once per block, in
//   chunks of `chunk` batch columns (coalesced loads along the batch, stored column-major with
//   one word of padding so that the dot products read consecutive banks);
// - `split` consecutive threads share one (unit, column) dot product, each summing every
//   split-th term, then add their partial sums through shared memory (a block reduction);
// - the cell (or cell backward) of the block's units runs right there; the running state of its
//   own units (c in the forward; dh and dc in the backward) never leaves shared memory;
// - the grid synchronises ONCE per step (grid_sync, cooperative groups): h_t (or dgates_t) is
//   then complete for every block.
// The *_tc_* entry points are the same kernels with the per-step products on tensor cores: the
// block's warps compute a chunk's products as 16 x 8 mma.sync tiles (mma.cuh: TF32 for f32, BF16 /
// FP16 for the 16-bit types, scalar inside f64) into shared memory (`prod`), then one thread a
// (unit, column) runs the cell from there (no split). The scalar kernels stay the reference path.
// The grid is at most the SMs' worth of blocks (a cooperative launch refuses more than can be
// resident). Where W_hh's slice and one staged column do not fit in a block's shared memory
// (large H), the host takes the per-step path instead: one cuBLAS GEMM and one fused cell
// kernel per step (tinyflow_cuda/kernels/rnn.py, plan_sequence, says where the switch is).
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

// ---- whole sequences: the building blocks -------------------------------------------------------

// A load of data another block wrote before the last grid_sync: through L2 (never a stale L1 line).
__device__ __forceinline__ float load_cg(const float* p) { return __ldcg(p); }
__device__ __forceinline__ double load_cg(const double* p) { return __ldcg(p); }
__device__ __forceinline__ f16_t load_cg(const f16_t* p) {
    return f16_t{__ldcg(reinterpret_cast<const unsigned short*>(p))};
}
__device__ __forceinline__ bf16_t load_cg(const bf16_t* p) {
    return bf16_t{__ldcg(reinterpret_cast<const unsigned short*>(p))};
}

__device__ __forceinline__ int imin(int a, int b) { return a < b ? a : b; }

// The (row, col) of flat index first, first + stride, ... in a space of `cols` columns, advanced
// with an add and a compare: one division per thread, none per element.
struct Walk {
    int row, col;
    int cols, drow, dcol;
    __device__ Walk(int first, int stride, int cols_)
        : row(first / cols_), col(first % cols_), cols(cols_), drow(stride / cols_),
          dcol(stride % cols_) {}
    __device__ void next() {
        row += drow;
        col += dcol;
        if (col >= cols) {
            col -= cols;
            ++row;
        }
    }
};

// Carves the launch's dynamic shared memory into arrays, each 16-byte aligned. The host's
// plan_sequence (tinyflow_cuda/kernels/rnn.py) sizes the launch by the same layout.
struct Carve {
    unsigned char* next;
    template <typename U>
    __device__ U* take(long long count) {
        U* out = reinterpret_cast<U*>(next);
        next += ((unsigned long long)count * sizeof(U) + 15ull) & ~15ull;
        return out;
    }
};

// The block's units: [j0, j0 + own), `per` a block (the last block may have fewer).
struct Units {
    int j0, own;
    __device__ Units(int H, int per) {
        j0 = (int)blockIdx.x * per;
        own = H - j0 < per ? H - j0 : per;
        if (own < 0) own = 0;
    }
};

// dst[c * (rows + 1) + r] = src[r * ld + c0 + c] for r < rows, c < cols: columns of a row-major
// global matrix, transposed into shared memory (one padding word a column), in the accumulate type.
template <typename T, typename A>
__device__ void stage_columns(A* dst, const T* src, long long ld, int rows, int c0, int cols) {
    const int n = rows * cols;
    Walk at((int)threadIdx.x, (int)blockDim.x, cols);
    for (int idx = threadIdx.x; idx < n; idx += blockDim.x, at.next())
        dst[at.col * (rows + 1) + at.row] = to_acc(load_cg(src + at.row * ld + c0 + at.col));
}

// acc[k] += sum over m = s, s + S, ... < K of w[k * w_stride + m] * x[m]: this thread's share
// of G dot products with one vector (the S threads of a group read consecutive words).
template <int G, typename T, typename A>
__device__ void partial_dots(A (&acc)[G], const T* w, long long w_stride, const A* x, int K, int s,
                             int S) {
    for (int m = s; m < K; m += S) {
        const A xv = x[m];
        for (int k = 0; k < G; ++k) acc[k] += to_acc(w[k * w_stride + m]) * xv;
    }
}

// The sums over each group of S consecutive threads, into the group's first thread (s == 0).
// Every thread of the block calls it (it synchronises the block when S > 1).
template <int G, typename A>
__device__ void reduce_split(A (&acc)[G], A* red, int s, int S) {
    if (S == 1) return;
    for (int k = 0; k < G; ++k) red[k * blockDim.x + threadIdx.x] = acc[k];
    __syncthreads();
    if (s == 0)
        for (int k = 0; k < G; ++k)
            for (int q = 1; q < S; ++q) acc[k] += red[k * blockDim.x + threadIdx.x + q];
    __syncthreads();  // red is free again
}

// ---- LSTM ---------------------------------------------------------------------------------------

// proj (4H, T, B): W_ih x_t + biases; w_hh (4H, H); h0, c0 (H, B) or null (zeros);
// acts (T, 4H, B) out: activated gates; hs, cs (T+1, H, B) out.
template <typename T, bool TC>
__device__ void lstm_sequence_forward_impl(const T* __restrict__ proj, const T* __restrict__ w_hh,
                                           const T* __restrict__ h0, const T* __restrict__ c0,
                                           T* acts, T* hs, T* cs, int steps, int H, int B,
                                           int reverse, int per, int chunk, int split) {
    using A = acc_t<T>;
    const Units units(H, per);
    const long long HB = (long long)H * B, TB = (long long)steps * B;
    TF_DYNAMIC_SHARED(unsigned char, smem);
    Carve carve{smem};
    T* w = carve.take<T>(4LL * per * H);  // w[(k * per + u) * H + m] = W_hh[k * H + j0 + u, m]
    A* xs = carve.take<A>((long long)chunk * (H + 1));  // h_{t-1}[m, b0 + c] at xs[c * (H + 1) + m]
    A* red = carve.take<A>(4LL * blockDim.x);
    A* c_state = carve.take<A>((long long)per * B);  // c of the block's units, (own, B)
    A* prod = carve.take<A>(TC ? 4LL * per * chunk : 0);  // TC: a chunk's W h, (4 per, chunk)

    for (int k = 0; k < 4; ++k) {  // the block's slice of W_hh, for the whole sequence
        Walk at((int)threadIdx.x, (int)blockDim.x, H);
        for (int idx = threadIdx.x; idx < units.own * H; idx += blockDim.x, at.next())
            w[((long long)k * per + at.row) * H + at.col] =
                w_hh[((long long)k * H + units.j0 + at.row) * H + at.col];
    }
    const int init = reverse ? steps : 0;
    {
        Walk at((int)threadIdx.x, (int)blockDim.x, B);
        for (int idx = threadIdx.x; idx < units.own * B; idx += blockDim.x, at.next()) {
            const long long e = (long long)(units.j0 + at.row) * B + at.col;
            const A h = h0 ? to_acc(h0[e]) : A(0), c = c0 ? to_acc(c0[e]) : A(0);
            hs[init * HB + e] = from_acc<T>(h);
            cs[init * HB + e] = from_acc<T>(c);
            c_state[at.row * B + at.col] = c;
        }
    }
    __syncthreads();
    if (h0) grid_sync();  // every block reads all of h0 at the first step

    const int s_idx = threadIdx.x % split, group = threadIdx.x / split;
    const int groups = blockDim.x / split;
    for (int s = 0; s < steps; ++s) {
        const int t = reverse ? steps - 1 - s : s;
        const int prev = reverse ? t + 1 : t, next = reverse ? t : t + 1;
        const bool zero_h = !h0 && s == 0;  // no product with a zero initial state
        T* gates = acts + 4 * (long long)t * HB;  // (4H, B)
        for (int b0 = 0; b0 < B; b0 += chunk) {
            const int cols = imin(chunk, B - b0);
            __syncthreads();  // everyone is done with the previous chunk's xs
            if (!zero_h) stage_columns(xs, hs + prev * HB, B, H, b0, cols);
            __syncthreads();
            if (TC && !zero_h) {  // all (4 per) x cols products of the chunk, by the warps
                block_products(prod, chunk, w, H, xs, H + 1, 4 * per, cols, H);
                __syncthreads();
            }
            const int items = units.own * cols;  // (unit, column) pairs of this chunk
            Walk at(group, groups, cols);
            for (int base = 0; base < items; base += groups, at.next()) {  // same trips for all
                const bool active = base + group < items;
                A pre[4] = {A(0), A(0), A(0), A(0)};
                if (TC) {
                    if (active && !zero_h)
                        for (int k = 0; k < 4; ++k) pre[k] = prod[(k * per + at.row) * chunk + at.col];
                } else {
                    if (active && !zero_h)
                        partial_dots<4>(pre, w + (long long)at.row * H, (long long)per * H,
                                        xs + at.col * (H + 1), H, s_idx, split);
                    if (!zero_h) reduce_split<4>(pre, red, s_idx, split);
                }
                if (!active || s_idx != 0) continue;
                const int j = units.j0 + at.row, b = b0 + at.col;
                const long long e = (long long)j * B + b, col = (long long)t * B + b;
                for (int k = 0; k < 4; ++k) pre[k] += to_acc(proj[((long long)k * H + j) * TB + col]);
                const A i = sigmoid(pre[0]), f = sigmoid(pre[1]), g = tanh(pre[2]), o = sigmoid(pre[3]);
                gates[e] = from_acc<T>(i);
                gates[HB + e] = from_acc<T>(f);
                gates[2 * HB + e] = from_acc<T>(g);
                gates[3 * HB + e] = from_acc<T>(o);
                A& c = c_state[at.row * B + b];
                const A cell = f * c + i * g;
                c = cell;
                cs[next * HB + e] = from_acc<T>(cell);
                hs[next * HB + e] = from_acc<T>(o * tanh(cell));
            }
        }
        if (s + 1 < steps) grid_sync();  // h_t is complete everywhere
    }
}

// dout (T, H, B): gradient of the outputs; dh_n, dc_n (H, B) or null (zeros); acts, cs from the
// forward; dgates (4H, T, B) out (gate-major); dh, dc (H, B) out: dh0 and dc0.
template <typename T, bool TC>
__device__ void lstm_sequence_backward_impl(const T* __restrict__ dout, const T* __restrict__ dh_n,
                                            const T* __restrict__ dc_n, const T* __restrict__ w_hh,
                                            const T* __restrict__ acts, const T* __restrict__ cs,
                                            T* dgates, T* dh, T* dc, int steps, int H, int B,
                                            int reverse, int per, int chunk, int split) {
    using A = acc_t<T>;
    const Units units(H, per);
    const int GH = 4 * H;
    const long long HB = (long long)H * B, TB = (long long)steps * B;
    TF_DYNAMIC_SHARED(unsigned char, smem);
    Carve carve{smem};
    T* wt = carve.take<T>((long long)per * GH);  // wt[u * 4H + r] = W_hh[r, j0 + u]
    A* xs = carve.take<A>((long long)chunk * (GH + 1));  // dgates_t[r, b0 + c] at xs[c * (4H + 1) + r]
    A* red = carve.take<A>(blockDim.x);
    A* dh_state = carve.take<A>((long long)per * B);  // gradient at h of the block's units
    A* dc_state = carve.take<A>((long long)per * B);  // and at c
    A* prod = carve.take<A>(TC ? (long long)per * chunk : 0);  // TC: a chunk's W^T dg, (per, chunk)

    {  // the block's columns of W_hh (its rows of W_hh^T), read along the rows of W_hh
        Walk at((int)threadIdx.x, (int)blockDim.x, units.own > 0 ? units.own : 1);
        for (int idx = threadIdx.x; idx < units.own * GH; idx += blockDim.x, at.next())
            wt[(long long)at.col * GH + at.row] = w_hh[(long long)at.row * H + units.j0 + at.col];
    }
    {
        Walk at((int)threadIdx.x, (int)blockDim.x, B);
        for (int idx = threadIdx.x; idx < units.own * B; idx += blockDim.x, at.next()) {
            const long long e = (long long)(units.j0 + at.row) * B + at.col;
            dh_state[at.row * B + at.col] = dh_n ? to_acc(dh_n[e]) : A(0);
            dc_state[at.row * B + at.col] = dc_n ? to_acc(dc_n[e]) : A(0);
        }
    }
    const int s_idx = threadIdx.x % split, group = threadIdx.x / split;
    const int groups = blockDim.x / split;
    for (int s = 0; s < steps; ++s) {
        const int t = reverse ? s : steps - 1 - s;  // the forward's steps, last first
        const int prev = reverse ? t + 1 : t, next = reverse ? t : t + 1;
        const T* a = acts + 4 * (long long)t * HB;
        __syncthreads();  // dh_state of the last step is complete
        {  // 1. the cell backward of the block's units, one thread a (unit, column)
            Walk at((int)threadIdx.x, (int)blockDim.x, B);
            for (int idx = threadIdx.x; idx < units.own * B; idx += blockDim.x, at.next()) {
                const int j = units.j0 + at.row, b = at.col;
                const long long e = (long long)j * B + b;
                const A i = to_acc(a[e]), f = to_acc(a[HB + e]);
                const A g = to_acc(a[2 * HB + e]), o = to_acc(a[3 * HB + e]);
                const A grad_h = dh_state[at.row * B + b] + to_acc(dout[(long long)t * HB + e]);
                const A tanh_c = tanh(to_acc(cs[next * HB + e]));
                A& dc_run = dc_state[at.row * B + b];
                const A dc_total = dc_run + grad_h * o * (A(1) - tanh_c * tanh_c);
                const A d[4] = {dc_total * g * i * (A(1) - i),
                                dc_total * to_acc(cs[prev * HB + e]) * f * (A(1) - f),
                                dc_total * i * (A(1) - g * g), grad_h * tanh_c * o * (A(1) - o)};
                for (int k = 0; k < 4; ++k)
                    dgates[((long long)k * H + j) * TB + (long long)t * B + b] = from_acc<T>(d[k]);
                dc_run = dc_total * f;
            }
        }
        grid_sync();  // dgates_t is complete everywhere
        // 2. dh_{t-1} = W_hh^T dgates_t for the block's units
        for (int b0 = 0; b0 < B; b0 += chunk) {
            const int cols = imin(chunk, B - b0);
            __syncthreads();
            stage_columns(xs, dgates + (long long)t * B, TB, GH, b0, cols);
            __syncthreads();
            if (TC) {  // all per x cols products of the chunk, by the warps
                block_products(prod, chunk, wt, GH, xs, GH + 1, per, cols, GH);
                __syncthreads();
            }
            const int items = units.own * cols;
            Walk at(group, groups, cols);
            for (int base = 0; base < items; base += groups, at.next()) {
                const bool active = base + group < items;
                A acc[1] = {A(0)};
                if (TC) {
                    if (active) acc[0] = prod[at.row * chunk + at.col];
                } else {
                    if (active)
                        partial_dots<1>(acc, wt + (long long)at.row * GH, 0, xs + at.col * (GH + 1),
                                        GH, s_idx, split);
                    reduce_split<1>(acc, red, s_idx, split);
                }
                if (active && s_idx == 0) dh_state[at.row * B + b0 + at.col] = acc[0];
            }
        }
    }
    __syncthreads();
    Walk at((int)threadIdx.x, (int)blockDim.x, B);
    for (int idx = threadIdx.x; idx < units.own * B; idx += blockDim.x, at.next()) {
        const long long e = (long long)(units.j0 + at.row) * B + at.col;
        dh[e] = from_acc<T>(dh_state[at.row * B + at.col]);
        dc[e] = from_acc<T>(dc_state[at.row * B + at.col]);
    }
}

// ---- GRU ----------------------------------------------------------------------------------------

// proj (3H, T, B): W_ih x_t + b_ih; w_hh (3H, H); b_hh (3H) or null; h0 (H, B) or null;
// acts (T, 3H, B) out: activated gates (r, z, n); gh (T, 3H, B) out: W_hh h + b_hh; hs out.
template <typename T, bool TC>
__device__ void gru_sequence_forward_impl(const T* __restrict__ proj, const T* __restrict__ w_hh,
                                          const T* __restrict__ b_hh, const T* __restrict__ h0,
                                          T* acts, T* gh, T* hs, int steps, int H, int B,
                                          int reverse, int per, int chunk, int split) {
    using A = acc_t<T>;
    const Units units(H, per);
    const long long HB = (long long)H * B, TB = (long long)steps * B;
    TF_DYNAMIC_SHARED(unsigned char, smem);
    Carve carve{smem};
    T* w = carve.take<T>(3LL * per * H);  // w[(k * per + u) * H + m] = W_hh[k * H + j0 + u, m]
    A* xs = carve.take<A>((long long)chunk * (H + 1));  // h_{t-1}, as in the LSTM
    A* red = carve.take<A>(3LL * blockDim.x);
    A* prod = carve.take<A>(TC ? 3LL * per * chunk : 0);  // TC: a chunk's W h, (3 per, chunk)

    for (int k = 0; k < 3; ++k) {
        Walk at((int)threadIdx.x, (int)blockDim.x, H);
        for (int idx = threadIdx.x; idx < units.own * H; idx += blockDim.x, at.next())
            w[((long long)k * per + at.row) * H + at.col] =
                w_hh[((long long)k * H + units.j0 + at.row) * H + at.col];
    }
    const int init = reverse ? steps : 0;
    {
        Walk at((int)threadIdx.x, (int)blockDim.x, B);
        for (int idx = threadIdx.x; idx < units.own * B; idx += blockDim.x, at.next()) {
            const long long e = (long long)(units.j0 + at.row) * B + at.col;
            hs[init * HB + e] = h0 ? h0[e] : from_acc<T>(A(0));
        }
    }
    __syncthreads();
    if (h0) grid_sync();

    const int s_idx = threadIdx.x % split, group = threadIdx.x / split;
    const int groups = blockDim.x / split;
    for (int s = 0; s < steps; ++s) {
        const int t = reverse ? steps - 1 - s : s;
        const int prev = reverse ? t + 1 : t, next = reverse ? t : t + 1;
        const bool zero_h = !h0 && s == 0;
        T* r_gh = gh + 3 * (long long)t * HB;  // (3H, B)
        T* gates = acts + 3 * (long long)t * HB;
        for (int b0 = 0; b0 < B; b0 += chunk) {
            const int cols = imin(chunk, B - b0);
            __syncthreads();
            if (!zero_h) stage_columns(xs, hs + prev * HB, B, H, b0, cols);
            __syncthreads();
            if (TC && !zero_h) {  // all (3 per) x cols products of the chunk, by the warps
                block_products(prod, chunk, w, H, xs, H + 1, 3 * per, cols, H);
                __syncthreads();
            }
            const int items = units.own * cols;
            Walk at(group, groups, cols);
            for (int base = 0; base < items; base += groups, at.next()) {
                const bool active = base + group < items;
                A rec[3] = {A(0), A(0), A(0)};
                if (TC) {
                    if (active && !zero_h)
                        for (int k = 0; k < 3; ++k) rec[k] = prod[(k * per + at.row) * chunk + at.col];
                } else {
                    if (active && !zero_h)
                        partial_dots<3>(rec, w + (long long)at.row * H, (long long)per * H,
                                        xs + at.col * (H + 1), H, s_idx, split);
                    if (!zero_h) reduce_split<3>(rec, red, s_idx, split);
                }
                if (!active || s_idx != 0) continue;
                const int j = units.j0 + at.row, b = b0 + at.col;
                const long long e = (long long)j * B + b, col = (long long)t * B + b;
                if (b_hh)
                    for (int k = 0; k < 3; ++k) rec[k] += to_acc(b_hh[k * H + j]);
                const A r = sigmoid(to_acc(proj[(long long)j * TB + col]) + rec[0]);
                const A z = sigmoid(to_acc(proj[(long long)(H + j) * TB + col]) + rec[1]);
                const A n = tanh(to_acc(proj[(long long)(2 * H + j) * TB + col]) + r * rec[2]);
                const A h_prev = zero_h ? A(0) : xs[at.col * (H + 1) + j];
                for (int k = 0; k < 3; ++k) r_gh[k * HB + e] = from_acc<T>(rec[k]);
                gates[e] = from_acc<T>(r);
                gates[HB + e] = from_acc<T>(z);
                gates[2 * HB + e] = from_acc<T>(n);
                hs[next * HB + e] = from_acc<T>(n + z * (h_prev - n));
            }
        }
        if (s + 1 < steps) grid_sync();
    }
}

// dout (T, H, B); dh_n (H, B) or null; dgi, dgh (3H, T, B) out (gate-major); dh (H, B) out: dh0.
template <typename T, bool TC>
__device__ void gru_sequence_backward_impl(const T* __restrict__ dout, const T* __restrict__ dh_n,
                                           const T* __restrict__ w_hh, const T* __restrict__ acts,
                                           const T* __restrict__ gh, const T* __restrict__ hs,
                                           T* dgi, T* dgh, T* dh, int steps, int H, int B,
                                           int reverse, int per, int chunk, int split) {
    using A = acc_t<T>;
    const Units units(H, per);
    const int GH = 3 * H;
    const long long HB = (long long)H * B, TB = (long long)steps * B;
    TF_DYNAMIC_SHARED(unsigned char, smem);
    Carve carve{smem};
    T* wt = carve.take<T>((long long)per * GH);  // wt[u * 3H + r] = W_hh[r, j0 + u]
    A* xs = carve.take<A>((long long)chunk * (GH + 1));  // dgh_t columns
    A* red = carve.take<A>(blockDim.x);
    A* dh_state = carve.take<A>((long long)per * B);
    A* prod = carve.take<A>(TC ? (long long)per * chunk : 0);  // TC: a chunk's W^T dgh, (per, chunk)

    {
        Walk at((int)threadIdx.x, (int)blockDim.x, units.own > 0 ? units.own : 1);
        for (int idx = threadIdx.x; idx < units.own * GH; idx += blockDim.x, at.next())
            wt[(long long)at.col * GH + at.row] = w_hh[(long long)at.row * H + units.j0 + at.col];
    }
    {
        Walk at((int)threadIdx.x, (int)blockDim.x, B);
        for (int idx = threadIdx.x; idx < units.own * B; idx += blockDim.x, at.next()) {
            const long long e = (long long)(units.j0 + at.row) * B + at.col;
            dh_state[at.row * B + at.col] = dh_n ? to_acc(dh_n[e]) : A(0);
        }
    }
    const int s_idx = threadIdx.x % split, group = threadIdx.x / split;
    const int groups = blockDim.x / split;
    for (int s = 0; s < steps; ++s) {
        const int t = reverse ? s : steps - 1 - s;
        const int prev = reverse ? t + 1 : t;
        const T* a = acts + 3 * (long long)t * HB;
        const T* r_gh = gh + 3 * (long long)t * HB;
        __syncthreads();
        {  // 1. the cell backward of the block's units; dh_state keeps the direct part dh * z
            Walk at((int)threadIdx.x, (int)blockDim.x, B);
            for (int idx = threadIdx.x; idx < units.own * B; idx += blockDim.x, at.next()) {
                const int j = units.j0 + at.row, b = at.col;
                const long long e = (long long)j * B + b, tb = (long long)t * B + b;
                const A r = to_acc(a[e]), z = to_acc(a[HB + e]), n = to_acc(a[2 * HB + e]);
                A& dh_run = dh_state[at.row * B + b];
                const A g = dh_run + to_acc(dout[(long long)t * HB + e]);
                const A dn = g * (A(1) - z) * (A(1) - n * n);
                const A dz = g * (to_acc(hs[prev * HB + e]) - n) * z * (A(1) - z);
                const A dr = dn * to_acc(r_gh[2 * HB + e]) * r * (A(1) - r);
                const A d_in[3] = {dr, dz, dn}, d_rec[3] = {dr, dz, dn * r};
                for (int k = 0; k < 3; ++k) {
                    dgi[((long long)k * H + j) * TB + tb] = from_acc<T>(d_in[k]);
                    dgh[((long long)k * H + j) * TB + tb] = from_acc<T>(d_rec[k]);
                }
                dh_run = g * z;
            }
        }
        grid_sync();  // dgh_t is complete everywhere
        // 2. dh_{t-1} = dh * z + W_hh^T dgh_t for the block's units
        for (int b0 = 0; b0 < B; b0 += chunk) {
            const int cols = imin(chunk, B - b0);
            __syncthreads();
            stage_columns(xs, dgh + (long long)t * B, TB, GH, b0, cols);
            __syncthreads();
            if (TC) {  // all per x cols products of the chunk, by the warps
                block_products(prod, chunk, wt, GH, xs, GH + 1, per, cols, GH);
                __syncthreads();
            }
            const int items = units.own * cols;
            Walk at(group, groups, cols);
            for (int base = 0; base < items; base += groups, at.next()) {
                const bool active = base + group < items;
                A acc[1] = {A(0)};
                if (TC) {
                    if (active) acc[0] = prod[at.row * chunk + at.col];
                } else {
                    if (active)
                        partial_dots<1>(acc, wt + (long long)at.row * GH, 0, xs + at.col * (GH + 1),
                                        GH, s_idx, split);
                    reduce_split<1>(acc, red, s_idx, split);
                }
                if (active && s_idx == 0) dh_state[at.row * B + b0 + at.col] += acc[0];
            }
        }
    }
    __syncthreads();
    Walk at((int)threadIdx.x, (int)blockDim.x, B);
    for (int idx = threadIdx.x; idx < units.own * B; idx += blockDim.x, at.next())
        dh[(long long)(units.j0 + at.row) * B + at.col] = from_acc<T>(dh_state[at.row * B + at.col]);
}

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

#define RNN_SEQUENCE_KERNELS(sfx, T)                                                                \
    TF_COOPERATIVE __global__ void lstm_sequence_forward_##sfx(                                     \
        const T* proj, const T* w_hh, const T* h0, const T* c0, T* acts, T* hs, T* cs, int steps,   \
        int H, int B, int reverse, int per, int chunk, int split) {                                 \
        lstm_sequence_forward_impl<T, false>(proj, w_hh, h0, c0, acts, hs, cs, steps, H, B, reverse, per,  \
                                      chunk, split);                                                \
    }                                                                                               \
    TF_COOPERATIVE __global__ void lstm_sequence_backward_##sfx(                                    \
        const T* dout, const T* dh_n, const T* dc_n, const T* w_hh, const T* acts, const T* cs,     \
        T* dgates, T* dh, T* dc, int steps, int H, int B, int reverse, int per, int chunk,          \
        int split) {                                                                                \
        lstm_sequence_backward_impl<T, false>(dout, dh_n, dc_n, w_hh, acts, cs, dgates, dh, dc, steps, H,  \
                                       B, reverse, per, chunk, split);                              \
    }                                                                                               \
    TF_COOPERATIVE __global__ void gru_sequence_forward_##sfx(                                      \
        const T* proj, const T* w_hh, const T* b_hh, const T* h0, T* acts, T* gh, T* hs, int steps, \
        int H, int B, int reverse, int per, int chunk, int split) {                                 \
        gru_sequence_forward_impl<T, false>(proj, w_hh, b_hh, h0, acts, gh, hs, steps, H, B, reverse, per, \
                                     chunk, split);                                                 \
    }                                                                                               \
    TF_COOPERATIVE __global__ void gru_sequence_backward_##sfx(                                     \
        const T* dout, const T* dh_n, const T* w_hh, const T* acts, const T* gh, const T* hs,       \
        T* dgi, T* dgh, T* dh, int steps, int H, int B, int reverse, int per, int chunk,            \
        int split) {                                                                                \
        gru_sequence_backward_impl<T, false>(dout, dh_n, w_hh, acts, gh, hs, dgi, dgh, dh, steps, H, B,    \
                                      reverse, per, chunk, split);                                  \
    }

// The same four with the per-step products on tensor cores (mma.cuh: TF32 for f32, BF16 / FP16
// mma for the 16-bit types; scalar FMAs inside the f64 ones, which exist for the naming rule):
// the twin picks these where TF32 is allowed for f32 data, and for 16-bit data.
#define RNN_SEQUENCE_TC_KERNELS(sfx, T)                                                             \
    TF_COOPERATIVE __global__ void lstm_sequence_forward_tc_##sfx(                                  \
        const T* proj, const T* w_hh, const T* h0, const T* c0, T* acts, T* hs, T* cs, int steps,   \
        int H, int B, int reverse, int per, int chunk, int split) {                                 \
        lstm_sequence_forward_impl<T, true>(proj, w_hh, h0, c0, acts, hs, cs, steps, H, B, reverse, \
                                            per, chunk, split);                                     \
    }                                                                                               \
    TF_COOPERATIVE __global__ void lstm_sequence_backward_tc_##sfx(                                 \
        const T* dout, const T* dh_n, const T* dc_n, const T* w_hh, const T* acts, const T* cs,     \
        T* dgates, T* dh, T* dc, int steps, int H, int B, int reverse, int per, int chunk,          \
        int split) {                                                                                \
        lstm_sequence_backward_impl<T, true>(dout, dh_n, dc_n, w_hh, acts, cs, dgates, dh, dc,      \
                                             steps, H, B, reverse, per, chunk, split);              \
    }                                                                                               \
    TF_COOPERATIVE __global__ void gru_sequence_forward_tc_##sfx(                                   \
        const T* proj, const T* w_hh, const T* b_hh, const T* h0, T* acts, T* gh, T* hs, int steps, \
        int H, int B, int reverse, int per, int chunk, int split) {                                 \
        gru_sequence_forward_impl<T, true>(proj, w_hh, b_hh, h0, acts, gh, hs, steps, H, B,         \
                                           reverse, per, chunk, split);                             \
    }                                                                                               \
    TF_COOPERATIVE __global__ void gru_sequence_backward_tc_##sfx(                                  \
        const T* dout, const T* dh_n, const T* w_hh, const T* acts, const T* gh, const T* hs,       \
        T* dgi, T* dgh, T* dh, int steps, int H, int B, int reverse, int per, int chunk,            \
        int split) {                                                                                \
        gru_sequence_backward_impl<T, true>(dout, dh_n, w_hh, acts, gh, hs, dgi, dgh, dh, steps, H, \
                                            B, reverse, per, chunk, split);                         \
    }

extern "C" {
TF_FLOAT_TYPES(RNN_CELL_KERNELS)
TF_FLOAT_TYPES(RNN_SEQUENCE_KERNELS)
TF_FLOAT_TYPES(RNN_SEQUENCE_TC_KERNELS)
}
