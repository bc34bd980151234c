// The gradient of an embedding lookup (tinyflow/kernels/embedding.py is the reference).
#include "common.cuh"

// out (V, D) += grad (N, D) scattered to the rows indices (N,); out starts zeroed. Rows equal to
// padding_idx (-1: none) and indices outside [0, V) are skipped. atomicAdd makes repeated
// indices add up (in an unspecified order: float sums may differ in the last bit run to run).
template <typename T>
__device__ void embedding_backward_impl(const T* __restrict__ grad,
                                        const long long* __restrict__ indices, T* __restrict__ out,
                                        long long N, int D, long long V, long long padding_idx) {
    FOR_EACH_INDEX(idx, N * D) {
        const long long row = indices[idx / D];
        if (row < 0 || row >= V || row == padding_idx) continue;
        atomicAdd(out + row * D + idx % D, grad[idx]);
    }
}

extern "C" {
__global__ void embedding_backward_f32(const float* grad, const long long* indices, float* out,
                                       long long N, int D, long long V, long long padding_idx) {
    embedding_backward_impl<float>(grad, indices, out, N, D, V, padding_idx);
}
__global__ void embedding_backward_f64(const double* grad, const long long* indices, double* out,
                                       long long N, int D, long long V, long long padding_idx) {
    embedding_backward_impl<double>(grad, indices, out, N, D, V, padding_idx);
}
}
