// Fused LSTM and GRU cells (tinyflow/kernels/rnn.py is the reference).
//
// The GEMMs stay in cuBLAS; these kernels do every element-wise step of one time step in a
// single pass, one thread per (hidden unit j, batch column b). The layout is the reference's
// feature-major one: states are (H, B) and a gate buffer is (G*H, B), so gate k of element
// idx = j * B + b sits at k * H * B + idx and consecutive threads touch consecutive addresses
// in every gate block. Gate order is PyTorch's: LSTM (i, f, g, o), GRU (r, z, n). Like the
// reference, the forward overwrites the pre-activations with the activated gates, which is
// what the backward needs.
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
}
