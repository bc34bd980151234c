// Fused LSTM and GRU cells (tinyflow/kernels/rnn.py is the reference).
//
// The GEMMs stay in cuBLAS; these kernels do every element-wise step of one time step in a
// single pass, one thread per (batch row b, hidden unit j). Gate order is PyTorch's:
// LSTM (i, f, g, o), GRU (r, z, n); a (B, kH) gate buffer holds gate k of unit j of row b at
// b * kH + k * H + j. Like the reference, the forward overwrites the pre-activations with the
// activated gates, which is what the backward needs.
#include "common.cuh"

template <typename T>
__device__ void lstm_forward_impl(T* __restrict__ gates, const T* __restrict__ c_prev,
                                  T* __restrict__ h, T* __restrict__ c, int B, int H) {
    FOR_EACH_INDEX(idx, (long long)B * H) {
        const long long b = idx / H;
        const int j = idx % H;
        T* row = gates + b * 4 * H;
        const T i = sigmoid(row[j]);
        const T f = sigmoid(row[H + j]);
        const T g = tanh(row[2 * H + j]);
        const T o = sigmoid(row[3 * H + j]);
        row[j] = i;
        row[H + j] = f;
        row[2 * H + j] = g;
        row[3 * H + j] = o;
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
                                   T* __restrict__ dc_prev, int B, int H) {
    FOR_EACH_INDEX(idx, (long long)B * H) {
        const long long b = idx / H;
        const int j = idx % H;
        const T* a = acts + b * 4 * H;
        T* d = dgates + b * 4 * H;
        const T i = a[j], f = a[H + j], g = a[2 * H + j], o = a[3 * H + j];
        const T tanh_c = tanh(c[idx]);
        const T dc_total = (has_dc ? dc[idx] : T(0)) + dh[idx] * o * (T(1) - tanh_c * tanh_c);
        d[j] = dc_total * g * i * (T(1) - i);
        d[H + j] = dc_total * c_prev[idx] * f * (T(1) - f);
        d[2 * H + j] = dc_total * i * (T(1) - g * g);
        d[3 * H + j] = dh[idx] * tanh_c * o * (T(1) - o);
        dc_prev[idx] = dc_total * f;
    }
}

// gi (B, 3H) is overwritten with the activated gates (r, z, n); gh is only read.
template <typename T>
__device__ void gru_forward_impl(T* __restrict__ gi, const T* __restrict__ gh,
                                 const T* __restrict__ h_prev, T* __restrict__ h, int B, int H) {
    FOR_EACH_INDEX(idx, (long long)B * H) {
        const long long b = idx / H;
        const int j = idx % H;
        T* x = gi + b * 3 * H;
        const T* r_h = gh + b * 3 * H;
        const T r = sigmoid(x[j] + r_h[j]);
        const T z = sigmoid(x[H + j] + r_h[H + j]);
        const T n = tanh(x[2 * H + j] + r * r_h[2 * H + j]);
        x[j] = r;
        x[H + j] = z;
        x[2 * H + j] = n;
        h[idx] = n + z * (h_prev[idx] - n);
    }
}

template <typename T>
__device__ void gru_backward_impl(const T* __restrict__ dh, const T* __restrict__ acts,
                                  const T* __restrict__ gh, const T* __restrict__ h_prev,
                                  T* __restrict__ dgi, T* __restrict__ dgh, T* __restrict__ dh_prev,
                                  int B, int H) {
    FOR_EACH_INDEX(idx, (long long)B * H) {
        const long long b = idx / H;
        const int j = idx % H;
        const long long row = b * 3 * H;
        const T r = acts[row + j], z = acts[row + H + j], n = acts[row + 2 * H + j];
        const T gh_n = gh[row + 2 * H + j];
        const T g = dh[idx];
        const T dn = g * (T(1) - z) * (T(1) - n * n);
        const T dz = g * (h_prev[idx] - n) * z * (T(1) - z);
        const T dr = dn * gh_n * r * (T(1) - r);
        dgi[row + j] = dr;
        dgi[row + H + j] = dz;
        dgi[row + 2 * H + j] = dn;
        dgh[row + j] = dr;
        dgh[row + H + j] = dz;
        dgh[row + 2 * H + j] = dn * r;
        dh_prev[idx] = g * z;
    }
}

extern "C" {
__global__ void lstm_cell_forward_f32(float* gates, const float* c_prev, float* h, float* c,
                                      int B, int H) {
    lstm_forward_impl<float>(gates, c_prev, h, c, B, H);
}
__global__ void lstm_cell_forward_f64(double* gates, const double* c_prev, double* h, double* c,
                                      int B, int H) {
    lstm_forward_impl<double>(gates, c_prev, h, c, B, H);
}
__global__ void lstm_cell_backward_f32(const float* dh, const float* dc, int has_dc,
                                       const float* acts, const float* c_prev, const float* c,
                                       float* dgates, float* dc_prev, int B, int H) {
    lstm_backward_impl<float>(dh, dc, has_dc, acts, c_prev, c, dgates, dc_prev, B, H);
}
__global__ void lstm_cell_backward_f64(const double* dh, const double* dc, int has_dc,
                                       const double* acts, const double* c_prev, const double* c,
                                       double* dgates, double* dc_prev, int B, int H) {
    lstm_backward_impl<double>(dh, dc, has_dc, acts, c_prev, c, dgates, dc_prev, B, H);
}
__global__ void gru_cell_forward_f32(float* gi, const float* gh, const float* h_prev, float* h,
                                     int B, int H) {
    gru_forward_impl<float>(gi, gh, h_prev, h, B, H);
}
__global__ void gru_cell_forward_f64(double* gi, const double* gh, const double* h_prev, double* h,
                                     int B, int H) {
    gru_forward_impl<double>(gi, gh, h_prev, h, B, H);
}
__global__ void gru_cell_backward_f32(const float* dh, const float* acts, const float* gh,
                                      const float* h_prev, float* dgi, float* dgh, float* dh_prev,
                                      int B, int H) {
    gru_backward_impl<float>(dh, acts, gh, h_prev, dgi, dgh, dh_prev, B, H);
}
__global__ void gru_cell_backward_f64(const double* dh, const double* acts, const double* gh,
                                      const double* h_prev, double* dgi, double* dgh,
                                      double* dh_prev, int B, int H) {
    gru_backward_impl<double>(dh, acts, gh, h_prev, dgi, dgh, dh_prev, B, H);
}
}
