// Warp-level tensor-core tile products (mma.sync) for the persistent recurrences of rnn.cu.
//
// Two instructions, both D = A B + C with fp32 accumulators, A (M x K) row-major, B (K x N)
// column-major ("row.col"), one 16 x 8 tile of D per warp:
// - mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32   (fp32 data rounded to TF32: 10-bit mantissa)
// - mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32  (and .f16.f16 for fp16 data)
// Each lane holds a fixed part of A, B and C/D in registers: the "fragments" of the PTX ISA
// ("Matrix Fragments for mma.m16n8k8" / "for mma.m16n8k16"). With g = lane / 4, t = lane % 4:
//   m16n8k8 tf32   A: a0 (g, t)  a1 (g+8, t)  a2 (g, t+4)  a3 (g+8, t+4)      one tf32 a register
//                  B: b0 (t, g)  b1 (t+4, g)
//   m16n8k16 16-bit A: reg0 = (g, 2t | 2t+1)  reg1 = (g+8, 2t | 2t+1)
//                      reg2 = (g, 2t+8 | 2t+9) reg3 = (g+8, 2t+8 | 2t+9)     low half = first
//                   B: reg0 = (2t | 2t+1, g)  reg1 = (2t+8 | 2t+9, g)
//   both          C/D: c0 (g, 2t)  c1 (g, 2t+1)  c2 (g+8, 2t)  c3 (g+8, 2t+1)
// On the GPU the instructions are inline PTX (sm_80 and later). Under TINYFLOW_EMULATOR a software
// twin runs instead, with the same fragment layout: each lane deposits its A and B elements at
// their (row, col) in a per-warp scratch tile, the warp meets (emu::sync_warp), each lane computes
// its own four D elements from the whole tiles (exact products, summed in double, added to its C,
// rounded once to fp32), and the warp meets again before the scratch is reused. A fragment put in
// the wrong place gives a wrong product there, which tests/kernels/test_mma_emulation.py checks.
//
// block_products() is what rnn.cu calls: a (M x N) = (M x K) (K x N) product of shared-memory
// operands by every warp of the block, zero-padded at the edges (M, N, K need not be multiples of
// the tile). Its double overload is the scalar fallback (there is no fp64 tensor-core path here).
#pragma once
#include "common.cuh"

// The lane of the calling thread (threads numbered x fastest, as CUDA forms warps).
__device__ __forceinline__ unsigned mma_lane() {
    return (threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) & 31u;
}
__device__ __forceinline__ unsigned mma_warp() {
    return (threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) >> 5;
}

// fp32 -> TF32 as cvt.rna.tf32.f32: round to nearest, ties away from zero, to a 10-bit mantissa
// (the low 13 bits become zero); infinities and NaN pass unchanged.
__device__ __forceinline__ unsigned to_tf32(float x) {
#ifdef TINYFLOW_EMULATOR
    const unsigned u = __float_as_uint(x);
    if ((u & 0x7f800000u) == 0x7f800000u) return u;
    return (u + 0x1000u) & 0xffffe000u;
#else
    unsigned r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return r;
#endif
}

// Two 16-bit values in one register, the first in the low half (the fragments' element order).
__device__ __forceinline__ unsigned pack16(unsigned short lo, unsigned short hi) {
    return (unsigned)lo | ((unsigned)hi << 16);
}

#ifdef TINYFLOW_EMULATOR
namespace mma_emu {
// A warp's tiles in its emu::warp_scratch(): A up to 16 x 16, B up to 16 x 8, in fp32 (exact for
// tf32, bf16 and fp16 values).
struct Tiles {
    float a[16][16];
    float b[16][8];
};
static_assert(sizeof(Tiles) <= emu::kWarpScratch, "mma_emu::Tiles must fit a warp's scratch");

inline float from_tf32(unsigned bits) { return __uint_as_float(bits & 0xffffe000u); }
inline float from_bf16(unsigned short bits) { return to_acc(bf16_t{bits}); }
inline float from_f16(unsigned short bits) { return to_acc(f16_t{bits}); }

// The rendezvous: every lane has put its A and B elements into `tiles`; each lane computes its
// four accumulators d (c0..c3 of the C/D fragment) += sum over k < K of A(row, k) B(k, col).
inline void multiply(float (&d)[4], const Tiles& tiles, int K) {
    emu::sync_warp();  // all fragments deposited
    const unsigned lane = mma_lane(), g = lane >> 2, t = lane & 3u;
    for (int i = 0; i < 4; ++i) {
        const unsigned row = g + (i >= 2 ? 8u : 0u), col = 2u * t + (unsigned)(i & 1);
        double sum = 0.0;  // products of tf32 / 16-bit values are exact in double
        for (int k = 0; k < K; ++k) sum += (double)tiles.a[row][k] * (double)tiles.b[k][col];
        d[i] = (float)(sum + (double)d[i]);
    }
    emu::sync_warp();  // all lanes done reading before the scratch is reused
}
}  // namespace mma_emu
#endif

// d (this lane's C/D fragment) += A (16 x 8, tf32) B (8 x 8, tf32), one warp, all 32 lanes.
__device__ __forceinline__ void mma_tf32_m16n8k8(float (&d)[4], const unsigned (&a)[4],
                                                 const unsigned (&b)[2]) {
#ifdef TINYFLOW_EMULATOR
    using namespace mma_emu;
    Tiles& tiles = *reinterpret_cast<Tiles*>(emu::warp_scratch());
    const unsigned lane = mma_lane(), g = lane >> 2, t = lane & 3u;
    tiles.a[g][t] = from_tf32(a[0]);
    tiles.a[g + 8][t] = from_tf32(a[1]);
    tiles.a[g][t + 4] = from_tf32(a[2]);
    tiles.a[g + 8][t + 4] = from_tf32(a[3]);
    tiles.b[t][g] = from_tf32(b[0]);
    tiles.b[t + 4][g] = from_tf32(b[1]);
    multiply(d, tiles, 8);
#else
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

#ifdef TINYFLOW_EMULATOR
namespace mma_emu {
// Deposit one lane's m16n8k16 fragments (16-bit pairs) as fp32, widened by `widen`.
template <typename Widen>
inline void deposit_k16(Tiles& tiles, const unsigned (&a)[4], const unsigned (&b)[2], Widen widen) {
    const unsigned lane = mma_lane(), g = lane >> 2, t = lane & 3u;
    for (int r = 0; r < 4; ++r) {  // reg r: rows g (r even) or g + 8 (r odd), cols 2t (+8 for r >= 2)
        const unsigned row = g + ((r & 1) ? 8u : 0u), col = 2u * t + (r >= 2 ? 8u : 0u);
        tiles.a[row][col] = widen((unsigned short)(a[r] & 0xffffu));
        tiles.a[row][col + 1] = widen((unsigned short)(a[r] >> 16));
    }
    for (int r = 0; r < 2; ++r) {  // reg r: rows 2t, 2t + 1 (+8 for r = 1), col g
        const unsigned row = 2u * t + (r ? 8u : 0u);
        tiles.b[row][g] = widen((unsigned short)(b[r] & 0xffffu));
        tiles.b[row + 1][g] = widen((unsigned short)(b[r] >> 16));
    }
}
}  // namespace mma_emu
#endif

// d += A (16 x 16, bf16) B (16 x 8, bf16), fp32 accumulators, one warp.
__device__ __forceinline__ void mma_bf16_m16n8k16(float (&d)[4], const unsigned (&a)[4],
                                                  const unsigned (&b)[2]) {
#ifdef TINYFLOW_EMULATOR
    using namespace mma_emu;
    Tiles& tiles = *reinterpret_cast<Tiles*>(emu::warp_scratch());
    deposit_k16(tiles, a, b, from_bf16);
    multiply(d, tiles, 16);
#else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

// d += A (16 x 16, fp16) B (16 x 8, fp16), fp32 accumulators, one warp.
__device__ __forceinline__ void mma_f16_m16n8k16(float (&d)[4], const unsigned (&a)[4],
                                                 const unsigned (&b)[2]) {
#ifdef TINYFLOW_EMULATOR
    using namespace mma_emu;
    Tiles& tiles = *reinterpret_cast<Tiles*>(emu::warp_scratch());
    deposit_k16(tiles, a, b, from_f16);
    multiply(d, tiles, 16);
#else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

// ---- block-wide products of shared-memory operands ---------------------------------------------

// One operand element in the instruction's input format, zero outside the matrix (padded tiles).
// TF32 bits from fp32 data; raw 16 bits from bf16 / fp16 data or from fp32 values that are exactly
// representable (the staged columns of a 16-bit recurrence: rounding them is exact).
template <typename In> struct MmaInput;
template <> struct MmaInput<float> {  // tf32
    static constexpr int kK = 8;
    __device__ static unsigned get(float v) { return to_tf32(v); }
    __device__ static void mma(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
        mma_tf32_m16n8k8(d, a, b);
    }
};
template <> struct MmaInput<bf16_t> {
    static constexpr int kK = 16;
    __device__ static void mma(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
        mma_bf16_m16n8k16(d, a, b);
    }
    __device__ static unsigned short get(bf16_t v) { return v.bits; }
    __device__ static unsigned short get(float v) { return from_acc<bf16_t>(v).bits; }
};
template <> struct MmaInput<f16_t> {
    static constexpr int kK = 16;
    __device__ static void mma(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
        mma_f16_m16n8k16(d, a, b);
    }
    __device__ static unsigned short get(f16_t v) { return v.bits; }
    __device__ static unsigned short get(float v) { return from_acc<f16_t>(v).bits; }
};

// A (row r, col k) = a[r * lda + k], r < M, k < K, else zero.
template <typename In, typename TA>
__device__ __forceinline__ auto mma_a(const TA* a, int lda, int M, int K, int r, int k) {
    using R = decltype(MmaInput<In>::get(TA{}));
    return (r < M && k < K) ? MmaInput<In>::get(a[r * lda + k]) : R(0);
}

// The tile loop shared by both shapes: warps take 16 x 8 tiles of D in turn; every lane of a warp
// runs the same trips (mma.sync needs the whole warp).
//   out[r * ldo + c] = sum over k < K of a[r * lda + k] * b[c * ldb + k],  r < M, c < N
// a (M, K) row-major, b (K, N) column-major (each column contiguous: the staged columns of
// rnn.cu), out (M, N) row-major, all in shared memory. Called by every thread of the block.
template <typename In, typename TA>
__device__ void block_products_tc(float* out, int ldo, const TA* a, int lda, const float* b,
                                  int ldb, int M, int N, int K) {
    constexpr int KK = MmaInput<In>::kK;
    const unsigned lane = mma_lane(), g = lane >> 2, t = lane & 3u;
    const int warps = (int)((blockDim.x * blockDim.y * blockDim.z) >> 5);
    if (M <= 0 || N <= 0) return;
    const int tiles_m = (M + 15) / 16, tiles_n = (N + 7) / 8;
    // warp w takes tiles w, w + warps, ... in row-major order, as (tile row, tile col) advanced by
    // subtraction: no division (warps is at most 32, a tile row usually wider)
    int tile_r = 0, tile_c = (int)mma_warp();
    while (tile_c >= tiles_n) {
        tile_c -= tiles_n;
        ++tile_r;
    }
    for (; tile_r < tiles_m; tile_c += warps) {
        while (tile_c >= tiles_n) {
            tile_c -= tiles_n;
            ++tile_r;
        }
        if (tile_r >= tiles_m) break;
        const int r0 = tile_r * 16, c0 = tile_c * 8;
        const int ra = r0 + (int)g, rb = ra + 8, col = c0 + (int)g;  // A rows, B column of this lane
        float d[4] = {0.f, 0.f, 0.f, 0.f};
        for (int k0 = 0; k0 < K; k0 += KK) {
            unsigned fa[4], fb[2];
            if constexpr (KK == 8) {  // tf32 m16n8k8
                const int k = k0 + (int)t;
                fa[0] = mma_a<In>(a, lda, M, K, ra, k);
                fa[1] = mma_a<In>(a, lda, M, K, rb, k);
                fa[2] = mma_a<In>(a, lda, M, K, ra, k + 4);
                fa[3] = mma_a<In>(a, lda, M, K, rb, k + 4);
                fb[0] = mma_a<In>(b, ldb, N, K, col, k);  // B (k, col) = b[col * ldb + k]
                fb[1] = mma_a<In>(b, ldb, N, K, col, k + 4);
                MmaInput<In>::mma(d, fa, fb);
            } else {  // 16-bit m16n8k16
                const int k = k0 + 2 * (int)t;
                fa[0] = pack16(mma_a<In>(a, lda, M, K, ra, k), mma_a<In>(a, lda, M, K, ra, k + 1));
                fa[1] = pack16(mma_a<In>(a, lda, M, K, rb, k), mma_a<In>(a, lda, M, K, rb, k + 1));
                fa[2] = pack16(mma_a<In>(a, lda, M, K, ra, k + 8),
                               mma_a<In>(a, lda, M, K, ra, k + 9));
                fa[3] = pack16(mma_a<In>(a, lda, M, K, rb, k + 8),
                               mma_a<In>(a, lda, M, K, rb, k + 9));
                fb[0] = pack16(mma_a<In>(b, ldb, N, K, col, k), mma_a<In>(b, ldb, N, K, col, k + 1));
                fb[1] = pack16(mma_a<In>(b, ldb, N, K, col, k + 8),
                               mma_a<In>(b, ldb, N, K, col, k + 9));
                MmaInput<In>::mma(d, fa, fb);
            }
        }
        const int rows[2] = {ra, rb};
        for (int i = 0; i < 4; ++i) {  // c0 c1 on row g, c2 c3 on row g + 8; cols 2t, 2t + 1
            const int r = rows[i >> 1], c = c0 + 2 * (int)t + (i & 1);
            if (r < M && c < N) out[r * ldo + c] = d[i];
        }
    }
}

// block_products: the same product in the accumulate type of the data T: tensor cores for fp32
// (TF32), bf16 and fp16 data; scalar FMAs for fp64 (no fp64 mma here), one output a thread.
__device__ inline void block_products(float* out, int ldo, const float* a, int lda,
                                      const float* b, int ldb, int M, int N, int K) {
    block_products_tc<float>(out, ldo, a, lda, b, ldb, M, N, K);
}
__device__ inline void block_products(float* out, int ldo, const bf16_t* a, int lda,
                                      const float* b, int ldb, int M, int N, int K) {
    block_products_tc<bf16_t>(out, ldo, a, lda, b, ldb, M, N, K);
}
__device__ inline void block_products(float* out, int ldo, const f16_t* a, int lda,
                                      const float* b, int ldb, int M, int N, int K) {
    block_products_tc<f16_t>(out, ldo, a, lda, b, ldb, M, N, K);
}
__device__ inline void block_products(double* out, int ldo, const double* a, int lda,
                                      const double* b, int ldb, int M, int N, int K) {
    const int threads = (int)(blockDim.x * blockDim.y * blockDim.z);
    const int tid = (int)(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z));
    if (M <= 0 || N <= 0) return;
    int r = 0, c = tid;  // this thread's outputs tid, tid + threads, ... as (row, col): no division
    for (;; c += threads) {
        while (c >= N) {
            c -= N;
            ++r;
        }
        if (r >= M) break;
        double sum = 0.0;
        for (int k = 0; k < K; ++k) sum += a[r * lda + k] * b[c * ldb + k];
        out[r * ldo + c] = sum;
    }
}
