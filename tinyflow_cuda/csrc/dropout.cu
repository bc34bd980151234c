// Dropout masks drawn on the device (tinyflow/kernels/dropout.py holds the reference).
//
// A counter-based generator: element i of a mask with seed s keeps its value when
// hash(s, i) / 2^32 >= p. There is no generator state to carry between threads or launches,
// so the mask is the same for any grid, and a seed (drawn from the tensor's Generator on the
// host) makes it reproducible. The hash is SplitMix64's finalizer, which passes BigCrush as a
// counter-based generator.
//
// The seed comes as a kernel argument, or (seed_ptr non-null) from device memory: a CUDA graph
// replays its kernels with the arguments they were captured with, so a captured step reads the
// seed that tinyflow/capture.py refills before each replay (one draw per step, as eagerly).
#include "common.cuh"

__device__ __forceinline__ unsigned int hash_uniform32(unsigned long long seed,
                                                       unsigned long long i) {
    unsigned long long z = seed + (i + 1ULL) * 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z = z ^ (z >> 31);
    return (unsigned int)(z >> 32);
}

// mask[i] = scale (= 1 / (1 - p)) where the element is kept, 0 where it is dropped.
// threshold = round(p * 2^32), computed on the host so every dtype keeps the same elements.
// seed_ptr: null (use seed) or the device word holding the seed.
template <typename T>
__device__ void dropout_mask_impl(T* __restrict__ mask, const unsigned long long* seed_ptr,
                                  unsigned long long seed, unsigned long long threshold,
                                  double scale, long long n) {
    if (seed_ptr) seed = *seed_ptr;  // one uniform load per thread, before the loop
    const T keep = from_acc<T>((acc_t<T>)scale), drop = from_acc<T>(acc_t<T>(0));
    FOR_EACH_INDEX(i, n) {
        mask[i] = (unsigned long long)hash_uniform32(seed, i) >= threshold ? keep : drop;
    }
}

#define DROPOUT_MASK(sfx, T)                                                                 \
    __global__ void dropout_mask_##sfx(T* mask, const unsigned long long* seed_ptr,        \
                                       unsigned long long seed, unsigned long long threshold,  \
                                       double scale, long long n) {                          \
        dropout_mask_impl<T>(mask, seed_ptr, seed, threshold, scale, n);                     \
    }
extern "C" {
TF_FLOAT_TYPES(DROPOUT_MASK)
}
