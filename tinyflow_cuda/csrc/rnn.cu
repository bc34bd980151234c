// Fused LSTM and GRU cells, and the whole recurrence of a layer as one persistent kernel
// (tinyflow/kernels/rnn.py is the reference).
//
// Cells: the GEMMs stay in cuBLAS; these kernels do every element-wise step of one time step in
// a single pass, one thread per (hidden unit j, batch column b). The layout is the reference's
// feature-major one: states are (H, B) and a gate buffer is (G*H, B), so gate k of element
// idx = j * B + b sits at k * H * B + idx and consecutive threads touch consecutive addresses
// in every gate block. Gate order is PyTorch's: LSTM (i, f, g, o), GRU (r, z, n). Like the
// reference, the forward overwrites the pre-activations with the activated gates, which is
// what the backward needs.
//
// Sequences (*_sequence_*): one launch runs all T steps of one layer in one direction, as
// cuDNN's persistent RNN does, instead of a GEMM and a cell launch per step from Python. Each
// block owns a contiguous slice of hidden units (and so the G gate rows of W_hh of those units)
// and, step after step, computes its gate rows from h_{t-1}, applies the cell to its units and
// writes h_t, c_t and the activated gates; a grid-wide barrier then publishes h_t to the other
// blocks. The grid is at most one block per SM (the twin asks the runtime), so every block is
// resident at once and the software barrier below cannot deadlock. Accumulation is in T (float
// for f32, double for f64). States are (T+1, H, B) in the slots of sequence_slots: forward,
// step t reads slot t and writes t+1; reverse, it reads t+1 and writes t.
#include "common.cuh"

template <typename T>
__device__ void lstm_forward_impl(T* __restrict__ gates, const T* __restrict__ c_prev,
                                  T* __restrict__ h, T* __restrict__ c, int H, int B) {
    const long long HB = (long long)H * B;
    FOR_EACH_INDEX(idx, HB) {
        const T i = sigmoid(gates[idx]);
        const T f = sigmoid(gates[HB + idx]);
        const T g = tanh(gates[2 * HB + idx]);
        const T o = sigmoid(gates[3 * HB + idx]);
        gates[idx] = i;
        gates[HB + idx] = f;
        gates[2 * HB + idx] = g;
        gates[3 * HB + idx] = o;
        const T cell = f * c_prev[idx] + i * g;
        c[idx] = cell;
        h[idx] = o * tanh(cell);
    }
}

// dh, dc: gradients arriving at h and c (has_dc = 0 means dc is zero and may be null).
template <typename T>
__device__ void lstm_backward_impl(const T* __restrict__ dh, const T* __restrict__ dc, int has_dc,
                                   const T* __restrict__ acts, const T* __restrict__ c_prev,
                                   const T* __restrict__ c, T* __restrict__ dgates,
                                   T* __restrict__ dc_prev, int H, int B) {
    const long long HB = (long long)H * B;
    FOR_EACH_INDEX(idx, HB) {
        const T i = acts[idx], f = acts[HB + idx], g = acts[2 * HB + idx], o = acts[3 * HB + idx];
        const T tanh_c = tanh(c[idx]);
        const T dc_total = (has_dc ? dc[idx] : T(0)) + dh[idx] * o * (T(1) - tanh_c * tanh_c);
        dgates[idx] = dc_total * g * i * (T(1) - i);
        dgates[HB + idx] = dc_total * c_prev[idx] * f * (T(1) - f);
        dgates[2 * HB + idx] = dc_total * i * (T(1) - g * g);
        dgates[3 * HB + idx] = dh[idx] * tanh_c * o * (T(1) - o);
        dc_prev[idx] = dc_total * f;
    }
}

// gi (3H, B) is overwritten with the activated gates (r, z, n); gh is only read.
template <typename T>
__device__ void gru_forward_impl(T* __restrict__ gi, const T* __restrict__ gh,
                                 const T* __restrict__ h_prev, T* __restrict__ h, int H, int B) {
    const long long HB = (long long)H * B;
    FOR_EACH_INDEX(idx, HB) {
        const T r = sigmoid(gi[idx] + gh[idx]);
        const T z = sigmoid(gi[HB + idx] + gh[HB + idx]);
        const T n = tanh(gi[2 * HB + idx] + r * gh[2 * HB + idx]);
        gi[idx] = r;
        gi[HB + idx] = z;
        gi[2 * HB + idx] = n;
        h[idx] = n + z * (h_prev[idx] - n);
    }
}

template <typename T>
__device__ void gru_backward_impl(const T* __restrict__ dh, const T* __restrict__ acts,
                                  const T* __restrict__ gh, const T* __restrict__ h_prev,
                                  T* __restrict__ dgi, T* __restrict__ dgh, T* __restrict__ dh_prev,
                                  int H, int B) {
    const long long HB = (long long)H * B;
    FOR_EACH_INDEX(idx, HB) {
        const T r = acts[idx], z = acts[HB + idx], n = acts[2 * HB + idx];
        const T g = dh[idx];
        const T dn = g * (T(1) - z) * (T(1) - n * n);
        const T dz = g * (h_prev[idx] - n) * z * (T(1) - z);
        const T dr = dn * gh[2 * HB + idx] * r * (T(1) - r);
        dgi[idx] = dr;
        dgi[HB + idx] = dz;
        dgi[2 * HB + idx] = dn;
        dgh[idx] = dr;
        dgh[HB + idx] = dz;
        dgh[2 * HB + idx] = dn * r;
        dh_prev[idx] = g * z;
    }
}

// ---- whole sequences --------------------------------------------------------------------------

// Grid-wide barrier on a zeroed global counter: every block adds one per barrier and waits
// until all gridDim.x blocks have; ``target`` is the running total (gridDim.x per barrier),
// uniform across the threads. The fences make the writes before the barrier visible to every
// block after it (the pattern of cooperative_groups' grid sync); data other blocks wrote is
// then read with __ldcg (L2, never a stale L1 line).
__device__ __forceinline__ void grid_barrier(unsigned int* counter, unsigned int& target) {
    target += gridDim.x;
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        atomicAdd(counter, 1u);
        while (*(volatile unsigned int*)counter < target) {
#if defined(TINYFLOW_EMULATOR) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700)
            __nanosleep(32);
#endif
        }
        __threadfence();
    }
    __syncthreads();
}

// The hidden units [j0, j0 + own) of this block: ceil(H / gridDim.x) each, the last ones fewer.
struct UnitSlice {
    int j0, own;
    __device__ UnitSlice(int H) {
        const int per = (H + (int)gridDim.x - 1) / (int)gridDim.x;
        j0 = (int)blockIdx.x * per;
        const int end = j0 + per < H ? j0 + per : H;
        own = end > j0 ? end - j0 : 0;
    }
};

// proj (4H, T, B): W_ih x_t + biases; w_hh (4H, H); h0, c0 (H, B) or null (zeros);
// acts (T, 4H, B) out: activated gates; hs, cs (T+1, H, B) out.
template <typename T>
__device__ void lstm_sequence_forward_impl(const T* __restrict__ proj, const T* __restrict__ w_hh,
                                           const T* __restrict__ h0, const T* __restrict__ c0,
                                           T* acts, T* hs, T* cs, int steps, int H, int B,
                                           int reverse, unsigned int* barrier) {
    const UnitSlice units(H);
    const long long HB = (long long)H * B, TB = (long long)steps * B;
    const int cells = units.own * B;  // (unit, column) pairs of this block
    const long long base = (long long)units.j0 * B;  // their offset in an (H, B) block
    unsigned int target = 0;
    const int init = reverse ? steps : 0;
    for (int idx = threadIdx.x; idx < cells; idx += blockDim.x) {
        hs[init * HB + base + idx] = h0 ? h0[base + idx] : T(0);
        cs[init * HB + base + idx] = c0 ? c0[base + idx] : T(0);
    }
    if (h0) grid_barrier(barrier, target);  // every block reads all of h0 at the first step
    for (int s = 0; s < steps; ++s) {
        const int t = reverse ? steps - 1 - s : s;
        const int prev = reverse ? t + 1 : t, next = reverse ? t : t + 1;
        const T* h_prev = hs + prev * HB;
        T* gates = acts + 4 * (long long)t * HB;  // (4H, B)
        // One thread per (unit, column) pair: its 4 gate rows from one pass over h_{t-1} (each
        // value read once for 4 products), then the cell. No GEMM on a zero initial h.
        for (int idx = threadIdx.x; idx < cells; idx += blockDim.x) {
            const int j = units.j0 + idx / B, b = idx % B;
            const long long e = base + idx, col = (long long)t * B + b;
            T pre[4];
            for (int k = 0; k < 4; ++k) pre[k] = proj[((long long)k * H + j) * TB + col];
            if (h0 || s > 0) {
                const T* w = w_hh + (long long)j * H;  // row j of gate k is w[k * H * H + m]
                const long long gate_stride = (long long)H * H;
                for (int m = 0; m < H; ++m) {
                    const T h = __ldcg(h_prev + (long long)m * B + b);
                    for (int k = 0; k < 4; ++k) pre[k] += w[k * gate_stride + m] * h;
                }
            }
            const T i = sigmoid(pre[0]);
            const T f = sigmoid(pre[1]);
            const T g = tanh(pre[2]);
            const T o = sigmoid(pre[3]);
            gates[e] = i;
            gates[HB + e] = f;
            gates[2 * HB + e] = g;
            gates[3 * HB + e] = o;
            const T cell = f * cs[prev * HB + e] + i * g;
            cs[next * HB + e] = cell;
            hs[next * HB + e] = o * tanh(cell);
        }
        if (s + 1 < steps) grid_barrier(barrier, target);  // h_t is complete everywhere
    }
}

// dout (T, H, B): gradient of the outputs; dh_n, dc_n (H, B) or null (zeros); acts, cs from the
// forward; dgates (T, 4H, B) out; dh, dc (H, B) out: the running gradients, dh0 and dc0 at the end.
template <typename T>
__device__ void lstm_sequence_backward_impl(const T* __restrict__ dout, const T* __restrict__ dh_n,
                                            const T* __restrict__ dc_n, const T* __restrict__ w_hh,
                                            const T* __restrict__ acts, const T* __restrict__ cs,
                                            T* dgates, T* dh, T* dc, int steps, int H, int B,
                                            int reverse, unsigned int* barrier) {
    const UnitSlice units(H);
    const long long HB = (long long)H * B;
    const int cells = units.own * B;
    const long long base = (long long)units.j0 * B;
    unsigned int target = 0;
    for (int idx = threadIdx.x; idx < cells; idx += blockDim.x) {
        dh[base + idx] = dh_n ? dh_n[base + idx] : T(0);
        dc[base + idx] = dc_n ? dc_n[base + idx] : T(0);
    }
    for (int s = 0; s < steps; ++s) {
        const int t = reverse ? s : steps - 1 - s;  // the forward's steps, last first
        const int prev = reverse ? t + 1 : t, next = reverse ? t : t + 1;
        const T* a = acts + 4 * (long long)t * HB;
        T* dg = dgates + 4 * (long long)t * HB;
        // 1. the cell backward of the block's pairs (it reads and writes only its own units)
        for (int idx = threadIdx.x; idx < cells; idx += blockDim.x) {
            const long long e = base + idx;
            const T i = a[e], f = a[HB + e], g = a[2 * HB + e], o = a[3 * HB + e];
            const T grad_h = dh[e] + dout[(long long)t * HB + e];
            const T tanh_c = tanh(cs[next * HB + e]);
            const T dc_total = dc[e] + grad_h * o * (T(1) - tanh_c * tanh_c);
            dg[e] = dc_total * g * i * (T(1) - i);
            dg[HB + e] = dc_total * cs[prev * HB + e] * f * (T(1) - f);
            dg[2 * HB + e] = dc_total * i * (T(1) - g * g);
            dg[3 * HB + e] = grad_h * tanh_c * o * (T(1) - o);
            dc[e] = dc_total * f;
        }
        grid_barrier(barrier, target);  // dgates_t is complete everywhere
        // 2. dh_{t-1} = W_hh^T dgates_t for the block's units (a column of W_hh per unit)
        for (int idx = threadIdx.x; idx < cells; idx += blockDim.x) {
            const int j = units.j0 + idx / B, b = idx % B;
            T acc = T(0);
            for (int r = 0; r < 4 * H; ++r)
                acc += w_hh[(long long)r * H + j] * __ldcg(dg + (long long)r * B + b);
            dh[base + idx] = acc;
        }
    }
}

// proj (3H, T, B): W_ih x_t + b_ih; w_hh (3H, H); b_hh (3H) or null; h0 (H, B) or null;
// acts (T, 3H, B) out: activated gates (r, z, n); gh (T, 3H, B) out: W_hh h + b_hh; hs out.
template <typename T>
__device__ void gru_sequence_forward_impl(const T* __restrict__ proj, const T* __restrict__ w_hh,
                                          const T* __restrict__ b_hh, const T* __restrict__ h0,
                                          T* acts, T* gh, T* hs, int steps, int H, int B,
                                          int reverse, unsigned int* barrier) {
    const UnitSlice units(H);
    const long long HB = (long long)H * B, TB = (long long)steps * B;
    const int cells = units.own * B;
    const long long base = (long long)units.j0 * B;
    unsigned int target = 0;
    const int init = reverse ? steps : 0;
    for (int idx = threadIdx.x; idx < cells; idx += blockDim.x)
        hs[init * HB + base + idx] = h0 ? h0[base + idx] : T(0);
    grid_barrier(barrier, target);
    for (int s = 0; s < steps; ++s) {
        const int t = reverse ? steps - 1 - s : s;
        const int prev = reverse ? t + 1 : t, next = reverse ? t : t + 1;
        const T* h_prev = hs + prev * HB;
        T* r_gh = gh + 3 * (long long)t * HB;  // (3H, B)
        T* gates = acts + 3 * (long long)t * HB;
        // One thread per (unit, column) pair: its 3 recurrent rows W_hh h_{t-1} + b_hh, then the
        // cell; gi is read from proj, the activated gates go to acts.
        for (int idx = threadIdx.x; idx < cells; idx += blockDim.x) {
            const int j = units.j0 + idx / B, b = idx % B;
            const long long e = base + idx, col = (long long)t * B + b;
            T rec[3];
            for (int k = 0; k < 3; ++k) rec[k] = b_hh ? b_hh[k * H + j] : T(0);
            const T* w = w_hh + (long long)j * H;
            const long long gate_stride = (long long)H * H;
            for (int m = 0; m < H; ++m) {
                const T h = __ldcg(h_prev + (long long)m * B + b);
                for (int k = 0; k < 3; ++k) rec[k] += w[k * gate_stride + m] * h;
            }
            const T r = sigmoid(proj[(long long)j * TB + col] + rec[0]);
            const T z = sigmoid(proj[(long long)(H + j) * TB + col] + rec[1]);
            const T n = tanh(proj[(long long)(2 * H + j) * TB + col] + r * rec[2]);
            r_gh[e] = rec[0];
            r_gh[HB + e] = rec[1];
            r_gh[2 * HB + e] = rec[2];
            gates[e] = r;
            gates[HB + e] = z;
            gates[2 * HB + e] = n;
            hs[next * HB + e] = n + z * (hs[prev * HB + e] - n);
        }
        if (s + 1 < steps) grid_barrier(barrier, target);
    }
}

// dout (T, H, B); dh_n (H, B) or null; dgi, dgh (T, 3H, B) out; dh (H, B) out: the running
// gradient, dh0 at the end.
template <typename T>
__device__ void gru_sequence_backward_impl(const T* __restrict__ dout, const T* __restrict__ dh_n,
                                           const T* __restrict__ w_hh, const T* __restrict__ acts,
                                           const T* __restrict__ gh, const T* __restrict__ hs,
                                           T* dgi, T* dgh, T* dh, int steps, int H, int B,
                                           int reverse, unsigned int* barrier) {
    const UnitSlice units(H);
    const long long HB = (long long)H * B;
    const int cells = units.own * B;
    const long long base = (long long)units.j0 * B;
    unsigned int target = 0;
    for (int idx = threadIdx.x; idx < cells; idx += blockDim.x)
        dh[base + idx] = dh_n ? dh_n[base + idx] : T(0);
    for (int s = 0; s < steps; ++s) {
        const int t = reverse ? s : steps - 1 - s;
        const int prev = reverse ? t + 1 : t;
        const T* a = acts + 3 * (long long)t * HB;
        const T* r_gh = gh + 3 * (long long)t * HB;
        T* di = dgi + 3 * (long long)t * HB;
        T* dr_gh = dgh + 3 * (long long)t * HB;
        // 1. the cell backward of the block's pairs; dh keeps the direct part dh * z
        for (int idx = threadIdx.x; idx < cells; idx += blockDim.x) {
            const long long e = base + idx;
            const T r = a[e], z = a[HB + e], n = a[2 * HB + e];
            const T g = dh[e] + dout[(long long)t * HB + e];
            const T dn = g * (T(1) - z) * (T(1) - n * n);
            const T dz = g * (hs[prev * HB + e] - n) * z * (T(1) - z);
            const T dr = dn * r_gh[2 * HB + e] * r * (T(1) - r);
            di[e] = dr;
            di[HB + e] = dz;
            di[2 * HB + e] = dn;
            dr_gh[e] = dr;
            dr_gh[HB + e] = dz;
            dr_gh[2 * HB + e] = dn * r;
            dh[e] = g * z;
        }
        grid_barrier(barrier, target);  // dgh_t is complete everywhere
        // 2. dh_{t-1} += W_hh^T dgh_t for the block's units
        for (int idx = threadIdx.x; idx < cells; idx += blockDim.x) {
            const int j = units.j0 + idx / B, b = idx % B;
            T acc = dh[base + idx];
            for (int r = 0; r < 3 * H; ++r)
                acc += w_hh[(long long)r * H + j] * __ldcg(dr_gh + (long long)r * B + b);
            dh[base + idx] = acc;
        }
    }
}

extern "C" {
__global__ void lstm_cell_forward_f32(float* gates, const float* c_prev, float* h, float* c,
                                      int H, int B) {
    lstm_forward_impl<float>(gates, c_prev, h, c, H, B);
}
__global__ void lstm_cell_forward_f64(double* gates, const double* c_prev, double* h, double* c,
                                      int H, int B) {
    lstm_forward_impl<double>(gates, c_prev, h, c, H, B);
}
__global__ void lstm_cell_backward_f32(const float* dh, const float* dc, int has_dc,
                                       const float* acts, const float* c_prev, const float* c,
                                       float* dgates, float* dc_prev, int H, int B) {
    lstm_backward_impl<float>(dh, dc, has_dc, acts, c_prev, c, dgates, dc_prev, H, B);
}
__global__ void lstm_cell_backward_f64(const double* dh, const double* dc, int has_dc,
                                       const double* acts, const double* c_prev, const double* c,
                                       double* dgates, double* dc_prev, int H, int B) {
    lstm_backward_impl<double>(dh, dc, has_dc, acts, c_prev, c, dgates, dc_prev, H, B);
}
__global__ void gru_cell_forward_f32(float* gi, const float* gh, const float* h_prev, float* h,
                                     int H, int B) {
    gru_forward_impl<float>(gi, gh, h_prev, h, H, B);
}
__global__ void gru_cell_forward_f64(double* gi, const double* gh, const double* h_prev, double* h,
                                     int H, int B) {
    gru_forward_impl<double>(gi, gh, h_prev, h, H, B);
}
__global__ void gru_cell_backward_f32(const float* dh, const float* acts, const float* gh,
                                      const float* h_prev, float* dgi, float* dgh, float* dh_prev,
                                      int H, int B) {
    gru_backward_impl<float>(dh, acts, gh, h_prev, dgi, dgh, dh_prev, H, B);
}
__global__ void gru_cell_backward_f64(const double* dh, const double* acts, const double* gh,
                                      const double* h_prev, double* dgi, double* dgh,
                                      double* dh_prev, int H, int B) {
    gru_backward_impl<double>(dh, acts, gh, h_prev, dgi, dgh, dh_prev, H, B);
}
__global__ void lstm_sequence_forward_f32(const float* proj, const float* w_hh, const float* h0,
                                          const float* c0, float* acts, float* hs, float* cs,
                                          int steps, int H, int B, int reverse,
                                          unsigned int* barrier) {
    lstm_sequence_forward_impl<float>(proj, w_hh, h0, c0, acts, hs, cs, steps, H, B, reverse,
                                      barrier);
}
__global__ void lstm_sequence_forward_f64(const double* proj, const double* w_hh, const double* h0,
                                          const double* c0, double* acts, double* hs, double* cs,
                                          int steps, int H, int B, int reverse,
                                          unsigned int* barrier) {
    lstm_sequence_forward_impl<double>(proj, w_hh, h0, c0, acts, hs, cs, steps, H, B, reverse,
                                       barrier);
}
__global__ void lstm_sequence_backward_f32(const float* dout, const float* dh_n, const float* dc_n,
                                           const float* w_hh, const float* acts, const float* cs,
                                           float* dgates, float* dh, float* dc, int steps, int H,
                                           int B, int reverse, unsigned int* barrier) {
    lstm_sequence_backward_impl<float>(dout, dh_n, dc_n, w_hh, acts, cs, dgates, dh, dc, steps, H,
                                       B, reverse, barrier);
}
__global__ void lstm_sequence_backward_f64(const double* dout, const double* dh_n,
                                           const double* dc_n, const double* w_hh,
                                           const double* acts, const double* cs, double* dgates,
                                           double* dh, double* dc, int steps, int H, int B,
                                           int reverse, unsigned int* barrier) {
    lstm_sequence_backward_impl<double>(dout, dh_n, dc_n, w_hh, acts, cs, dgates, dh, dc, steps,
                                        H, B, reverse, barrier);
}
__global__ void gru_sequence_forward_f32(const float* proj, const float* w_hh, const float* b_hh,
                                         const float* h0, float* acts, float* gh, float* hs,
                                         int steps, int H, int B, int reverse,
                                         unsigned int* barrier) {
    gru_sequence_forward_impl<float>(proj, w_hh, b_hh, h0, acts, gh, hs, steps, H, B, reverse,
                                     barrier);
}
__global__ void gru_sequence_forward_f64(const double* proj, const double* w_hh,
                                         const double* b_hh, const double* h0, double* acts,
                                         double* gh, double* hs, int steps, int H, int B,
                                         int reverse, unsigned int* barrier) {
    gru_sequence_forward_impl<double>(proj, w_hh, b_hh, h0, acts, gh, hs, steps, H, B, reverse,
                                      barrier);
}
__global__ void gru_sequence_backward_f32(const float* dout, const float* dh_n, const float* w_hh,
                                          const float* acts, const float* gh, const float* hs,
                                          float* dgi, float* dgh, float* dh, int steps, int H,
                                          int B, int reverse, unsigned int* barrier) {
    gru_sequence_backward_impl<float>(dout, dh_n, w_hh, acts, gh, hs, dgi, dgh, dh, steps, H, B,
                                      reverse, barrier);
}
__global__ void gru_sequence_backward_f64(const double* dout, const double* dh_n,
                                          const double* w_hh, const double* acts,
                                          const double* gh, const double* hs, double* dgi,
                                          double* dgh, double* dh, int steps, int H, int B,
                                          int reverse, unsigned int* barrier) {
    gru_sequence_backward_impl<double>(dout, dh_n, w_hh, acts, gh, hs, dgi, dgh, dh, steps, H, B,
                                       reverse, barrier);
}
}
