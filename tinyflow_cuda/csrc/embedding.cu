// The gradient of an embedding lookup (tinyflow/kernels/embedding.py is the reference), for fp32,
// fp64, fp16 and bf16 gradients.
//
// Layout: a 2-D block, blockDim.x lanes along the embedding dimension D (coalesced) and
// blockDim.y gradient rows, each block striding over rows. No thread divides an element index
// by D, and a row's index is read once per row, not once per element.
//
// Accumulation: repeated indices add up with atomicAdd into an acc_t<T> buffer: the gradient
// itself for fp32/fp64, a zeroed fp32 (V, D) buffer for fp16/bf16, which embedding_grad_round
// then rounds once into the half-precision gradient. This is what PyTorch does for half
// weights (it accumulates embedding gradients in fp32). The alternative, a compare-and-swap on
// the 32-bit word that holds each 16-bit value, would round after every add: a word seen 4096
// times in a batch stalls at 256 (bf16) or 2048 (fp16) times the gradient. Determinism: fp32
// atomics add in an unspecified order, so the fp32 sums may differ in their last bits run to
// run; after the one rounding to 8 or 11 bits the half-precision gradient is the same unless a
// sum lies within those last fp32 bits of a rounding midpoint (rare; fp32/fp64 gradients carry
// the run-to-run difference in their last bits, as before).
#include "common.cuh"

// acc (V, D) += grad (N, D) scattered to the rows indices (N,); acc starts zeroed. Rows equal to
// padding_idx (-1: none) and indices outside [0, V) are skipped.
template <typename T>
__device__ void embedding_backward_impl(const T* __restrict__ grad,
                                        const long long* __restrict__ indices,
                                        acc_t<T>* __restrict__ acc, long long N, int D, long long V,
                                        long long padding_idx) {
    for (long long n = (long long)blockIdx.x * blockDim.y + threadIdx.y; n < N;
         n += (long long)gridDim.x * blockDim.y) {
        const long long row = indices[n];
        if (row < 0 || row >= V || row == padding_idx) continue;
        const T* g = grad + n * D;  // 64-bit row bases, 32-bit columns
        acc_t<T>* out = acc + row * D;
        for (int d = threadIdx.x; d < D; d += blockDim.x) atomicAdd(out + d, to_acc(g[d]));
    }
}

// out[i] = acc[i] rounded to nearest even, over the n elements of the (V, D) gradient (launched
// for fp16 and bf16 only; for fp32 and fp64 the accumulator is the gradient).
template <typename T>
__device__ void embedding_grad_round_impl(const acc_t<T>* __restrict__ acc, T* __restrict__ out,
                                          long long n) {
    if (n <= 0x7fffffffLL) {  // 32-bit index math wherever the gradient allows it
        // (i + stride stays below 2^32: i < 2^31 and the grid has fewer than 2^31 threads)
        const unsigned count = (unsigned)n, stride = blockDim.x * gridDim.x;
        for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride)
            out[i] = from_acc<T>(acc[i]);
        return;
    }
    FOR_EACH_INDEX(i, n) out[i] = from_acc<T>(acc[i]);
}

#define EMBEDDING_BACKWARD(sfx, T)                                                               \
    __global__ void embedding_backward_##sfx(const T* grad, const long long* indices,            \
                                             acc_t<T>* acc, long long N, int D, long long V,     \
                                             long long padding_idx) {                            \
        embedding_backward_impl<T>(grad, indices, acc, N, D, V, padding_idx);                    \
    }
#define EMBEDDING_GRAD_ROUND(sfx, T)                                                             \
    __global__ void embedding_grad_round_##sfx(const acc_t<T>* acc, T* out, long long n) {      \
        embedding_grad_round_impl<T>(acc, out, n);                                               \
    }

extern "C" {
TF_FLOAT_TYPES(EMBEDDING_BACKWARD)
TF_FLOAT_TYPES(EMBEDDING_GRAD_ROUND)
}
