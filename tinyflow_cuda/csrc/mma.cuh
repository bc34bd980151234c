// Block-level tools of the persistent recurrences (rnn.cu): 16-byte moves with many loads in
// flight, the shared-memory tile layouts, and warp-level tensor-core tile products (mma.sync).
//
// Layouts (each conflict-free for the accesses made of it: cuda_tools/bank_conflicts.py,
// tests/test_bank_conflicts.py and tests/kernels/test_rnn_banks.py measure them):
// - an A operand (a W_hh slice) is row-major with rows `ld` 4-byte words apart, ld % 8 == 4
//   (lead_words): the 8 rows x 4 words of a fragment load then fall in 32 distinct banks;
// - a B operand or a product (staged h, gate gradients, partial sums) is "swizzled rows": N
//   elements a row (N a power of two >= 32, no padding), element (r, c) at r * N + swz(r, c),
//   swz(r, c) = c ^ ((r & 3) << 3). A row's 32-element groups stay whole, so 32 lanes on 32
//   consecutive columns and a quarter warp storing 8 consecutive 16-byte quads are conflict-free;
//   the 4 rows x 8 columns of a B fragment load land in 4 different 8-bank groups.
// 16-bit operands are stored as pairs along K in 32-bit words (the low half first): A rows hold
// K / 2 words, B holds K / 2 "pair rows" of N words; each fragment register is one word.
//
// The instructions, both D = A B + C with fp32 accumulators, A (M x K) row-major, B (K x N)
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
#pragma once
#include "common.cuh"

template <typename A, typename B> struct same_type { static constexpr bool value = false; };
template <typename A> struct same_type<A, A> { static constexpr bool value = true; };

// The lane and warp of the calling thread (threads numbered x fastest, as CUDA forms warps).
__device__ __forceinline__ unsigned mma_lane() {
    return (threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) & 31u;
}
__device__ __forceinline__ unsigned mma_warp() {
    return (threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) >> 5;
}

// log2 of a power of two.
__device__ __forceinline__ int log2_of(int n) {
    int s = 0;
    while ((1 << s) < n) ++s;
    return s;
}

// The row length (4-byte words) of an A operand holding `words` a row: the next one that is 4 more
// than a multiple of 8 (tinyflow_cuda/kernels/rnn.py's lead_words is the same). Rows g = 0..7
// then start at 8 distinct multiples of 4 banks (g * ld mod 32), and the 8 rows x 4 words of a
// fragment load fill the 32 banks.
__device__ __forceinline__ int lead_words(int words) { return words + (12 - words % 8) % 8; }

// Column c of row r of a swizzled tile (see the top).
__device__ __forceinline__ int swz(int r, int c) { return c ^ ((r & 3) << 3); }

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

// ---- 16-byte moves, many in flight --------------------------------------------------------------
struct alignas(16) Quad {
    unsigned w[4];
};

// Two floats stored as one 8-byte access (st.v2 / b64; one access in the emulator too, whose
// bank-conflict report then sees what the GPU does).
__device__ __forceinline__ void store_pair(float* p, float x, float y) {
    *reinterpret_cast<unsigned long long*>(p) =
        (unsigned long long)__float_as_uint(x) | ((unsigned long long)__float_as_uint(y) << 32);
}

// 16 bytes at p (16-byte aligned) written by another block before the last grid barrier: through
// L2 (ld.global.cg.v4: never a stale L1 line).
__device__ __forceinline__ Quad load_quad_cg(const void* p) {
    Quad q;
#ifdef TINYFLOW_EMULATOR
    q = *reinterpret_cast<const Quad*>(p);
#else
    asm volatile("ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(q.w[0]), "=r"(q.w[1]), "=r"(q.w[2]), "=r"(q.w[3])
                 : "l"(p));
#endif
    return q;
}

// One element written by another block before the last grid barrier, through L2.
__device__ __forceinline__ float load_cg(const float* p) { return __ldcg(p); }
__device__ __forceinline__ double load_cg(const double* p) { return __ldcg(p); }
__device__ __forceinline__ f16_t load_cg(const f16_t* p) {
    return f16_t{__ldcg(reinterpret_cast<const unsigned short*>(p))};
}
__device__ __forceinline__ bf16_t load_cg(const bf16_t* p) {
    return bf16_t{__ldcg(reinterpret_cast<const unsigned short*>(p))};
}

constexpr int kInFlight = 8;  // 16-byte loads each thread issues before it waits for the first

// Every (row, col) of a rows x cols space, spread over the block's threads, kItems items a thread
// at a time: a thread issues the loads of its next kItems items (load(row, col)), then stores
// them (store(row, col, value)), so that no load waits for the one before it (kItems = kInFlight
// for one 16-byte load an item). Items run along the columns first (consecutive threads,
// consecutive columns). One division per thread (Walk); the stores walk the items again.
// `start`: Walk(threadIdx.x, blockDim.x, cols), made once where a kernel repeats the loop (per
// time step), so that no division runs inside its loops.
template <int kItems = kInFlight, typename Load, typename Store>
__device__ __forceinline__ void in_flight(Walk start, int rows, Load load, Store store) {
    const int threads = (int)blockDim.x, n = rows * start.cols;
    Walk at = start;
    for (int first = (int)threadIdx.x; first < n; first += kItems * threads) {
        decltype(load(0, 0)) value[kItems];
        Walk again = at;
#pragma unroll
        for (int i = 0; i < kItems; ++i) {
            if (first + i * threads < n) value[i] = load(at.row, at.col);
            at.next();
        }
#pragma unroll
        for (int i = 0; i < kItems; ++i) {
            if (first + i * threads < n) store(again.row, again.col, value[i]);
            again.next();
        }
    }
}
template <int kItems = kInFlight, typename Load, typename Store>
__device__ __forceinline__ void in_flight(int rows, int cols, Load load, Store store) {
    in_flight<kItems>(Walk((int)threadIdx.x, (int)blockDim.x, cols > 0 ? cols : 1), rows, load, store);
}

// ---- the instructions ---------------------------------------------------------------------------

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

// Deposit one lane's fragments as fp32: m16n8k8 (tf32 words) or m16n8k16 (16-bit pairs, widened).
inline void deposit_k8(Tiles& tiles, const unsigned (&a)[4], const unsigned (&b)[2]) {
    const unsigned lane = mma_lane(), g = lane >> 2, t = lane & 3u;
    for (int r = 0; r < 4; ++r)  // a0..a3: rows g, g + 8, g, g + 8; cols t, t, t + 4, t + 4
        tiles.a[g + ((r & 1) ? 8u : 0u)][t + (r >= 2 ? 4u : 0u)] = from_tf32(a[r]);
    for (int r = 0; r < 2; ++r) tiles.b[t + (r ? 4u : 0u)][g] = from_tf32(b[r]);
}
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

// The rendezvous: every lane has put its A and B elements into its warp's tiles; each lane
// computes its four accumulators d (c0..c3 of the C/D fragment) += sum over k < K of A(row, k)
// B(k, col). `deposit` puts this lane's fragments in place first.
template <typename Deposit>
inline void multiply(float (&d)[4], int K, Deposit deposit) {
    Tiles& tiles = *reinterpret_cast<Tiles*>(emu::warp_scratch());
    deposit(tiles);
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
#define TF_MMA_EMULATED(K, deposit_call) \
    mma_emu::multiply(d, K, [&](mma_emu::Tiles& tiles) { deposit_call; })
#endif

// d (this lane's C/D fragment) += A (16 x 8, tf32) B (8 x 8, tf32), one warp, all 32 lanes.
__device__ __forceinline__ void mma_tf32_m16n8k8(float (&d)[4], const unsigned (&a)[4],
                                                 const unsigned (&b)[2]) {
#ifdef TINYFLOW_EMULATOR
    TF_MMA_EMULATED(8, mma_emu::deposit_k8(tiles, a, b));
#else
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

// d += A (16 x 16) B (16 x 8), 16-bit inputs (bf16, or fp16 where kBf16 is false), fp32 sums.
template <bool kBf16>
__device__ __forceinline__ void mma_m16n8k16(float (&d)[4], const unsigned (&a)[4],
                                             const unsigned (&b)[2]) {
#ifdef TINYFLOW_EMULATOR
    TF_MMA_EMULATED(16, mma_emu::deposit_k16(tiles, a, b,
                                             kBf16 ? mma_emu::from_bf16 : mma_emu::from_f16));
#else
    if constexpr (kBf16)
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
            "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    else
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
            "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}
__device__ __forceinline__ void mma_bf16_m16n8k16(float (&d)[4], const unsigned (&a)[4],
                                                  const unsigned (&b)[2]) {
    mma_m16n8k16<true>(d, a, b);
}
__device__ __forceinline__ void mma_f16_m16n8k16(float (&d)[4], const unsigned (&a)[4],
                                                 const unsigned (&b)[2]) {
    mma_m16n8k16<false>(d, a, b);
}

// ---- tiles of the shared-memory layouts ---------------------------------------------------------

// The instruction for operands of type In, its fragments loaded from the layouts above (words:
// tf32 values, or pairs of 16-bit values along K). a: the A operand, lda words a row; b: the B
// operand's swizzled rows of N words (pair rows for 16-bit). r0, n0: the tile's first row and
// column; k0: its first K index (a multiple of kK).
template <typename In> struct Mma;
template <> struct Mma<float> {  // tf32: the layouts hold values already rounded (to_tf32)
    static constexpr int kK = 8;
    __device__ static void load_a(unsigned (&fa)[4], const unsigned* a, int lda, int r0, int k0) {
        const unsigned lane = mma_lane();
        const unsigned* p = a + (r0 + (int)(lane >> 2)) * lda + k0 + (int)(lane & 3u);
        fa[0] = p[0];
        fa[1] = p[8 * lda];
        fa[2] = p[4];
        fa[3] = p[8 * lda + 4];
    }
    __device__ static void load_b(unsigned (&fb)[2], const unsigned* b, int N, int k0, int n0) {
        const unsigned lane = mma_lane();
        const int k = k0 + (int)(lane & 3u), c = n0 + (int)(lane >> 2);
        fb[0] = b[k * N + swz(k, c)];
        fb[1] = b[(k + 4) * N + swz(k + 4, c)];
    }
    __device__ static void mma(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
        mma_tf32_m16n8k8(d, a, b);
    }
};
template <typename Half> struct Mma16 {  // bf16 / fp16: pairs along K in each word
    static constexpr int kK = 16;
    __device__ static void load_a(unsigned (&fa)[4], const unsigned* a, int lda, int r0, int k0) {
        const unsigned lane = mma_lane();
        const unsigned* p = a + (r0 + (int)(lane >> 2)) * lda + k0 / 2 + (int)(lane & 3u);
        fa[0] = p[0];
        fa[1] = p[8 * lda];
        fa[2] = p[4];
        fa[3] = p[8 * lda + 4];
    }
    __device__ static void load_b(unsigned (&fb)[2], const unsigned* b, int N, int k0, int n0) {
        const unsigned lane = mma_lane();
        const int kp = k0 / 2 + (int)(lane & 3u), c = n0 + (int)(lane >> 2);
        fb[0] = b[kp * N + swz(kp, c)];
        fb[1] = b[(kp + 4) * N + swz(kp + 4, c)];
    }
    __device__ static void mma(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
        mma_m16n8k16<same_type<Half, bf16_t>::value>(d, a, b);
    }
};
template <> struct Mma<bf16_t> : Mma16<bf16_t> {};
template <> struct Mma<f16_t> : Mma16<f16_t> {};

// d += A[r0.., k_lo..k_hi) B[k_lo..k_hi), n0..): the tile's share of K in [k_lo, k_hi) (multiples of
// kK). B's rows are counted from b_row0 (the K index of its first row: a staged chunk).
template <typename In>
__device__ __forceinline__ void mma_span(float (&d)[4], const unsigned* a, int lda, const unsigned* b,
                                         int N, int b_row0, int r0, int n0, int k_lo, int k_hi) {
    for (int k0 = k_lo; k0 < k_hi; k0 += Mma<In>::kK) {
        unsigned fa[4], fb[2];
        Mma<In>::load_a(fa, a, lda, r0, k0);
        Mma<In>::load_b(fb, b, N, k0 - b_row0, n0);
        Mma<In>::mma(d, fa, fb);
    }
}

// Where this lane's four accumulators of a tile at (r0, n0) belong: (row, col) of c0 (c1 is the
// next column), and of c2 (c3 next).
struct FragmentPlace {
    int row0, row1, col;
    __device__ FragmentPlace(int r0, int n0) {
        const unsigned lane = mma_lane();
        row0 = r0 + (int)(lane >> 2);
        row1 = row0 + 8;
        col = n0 + 2 * (int)(lane & 3u);
    }
};

// Load a tile's accumulators from a swizzled fp32 tile of N columns, and store them (8-byte
// accesses: c0 c1, c2 c3).
__device__ __forceinline__ void load_tile_swizzled(float (&d)[4], const float* in, int N, int r0,
                                                   int n0) {
    const FragmentPlace at(r0, n0);
    const float* p0 = in + at.row0 * N + swz(at.row0, at.col);
    const float* p1 = in + at.row1 * N + swz(at.row1, at.col);
    const unsigned long long v0 = *reinterpret_cast<const unsigned long long*>(p0);
    const unsigned long long v1 = *reinterpret_cast<const unsigned long long*>(p1);
    d[0] = __uint_as_float((unsigned)v0), d[1] = __uint_as_float((unsigned)(v0 >> 32));
    d[2] = __uint_as_float((unsigned)v1), d[3] = __uint_as_float((unsigned)(v1 >> 32));
}
__device__ __forceinline__ void store_tile_swizzled(float* out, int N, const float (&d)[4], int r0,
                                                    int n0) {
    const FragmentPlace at(r0, n0);
    store_pair(out + at.row0 * N + swz(at.row0, at.col), d[0], d[1]);
    store_pair(out + at.row1 * N + swz(at.row1, at.col), d[2], d[3]);
}
