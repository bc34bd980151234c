"""csrc/mma.cuh's tensor-core twin under the emulator: the warp-level mma.sync instructions
(m16n8k8 TF32, m16n8k16 BF16 and FP16, fp32 accumulators) with the PTX ISA's fragment layout, the
TF32 rounding (cvt.rna.tf32.f32), and tile products through the shared-memory layouts rnn.cu
keeps its operands in.

The test kernels below spell each lane's fragments out again from the ISA's tables ("Matrix
Fragments for mma.m16n8k8 / m16n8k16"), independently of mma.cuh: an element the twin puts in the
wrong place gives a wrong product. Built from a scratch csrc folder (common.cuh, mma.cuh and this
file's kernels; cuda_tools/emu.h), like test_half_conversions.py.
"""
from __future__ import annotations

import shutil

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cuda_tools import emulator
from tinyflow_cuda.runtime import CSRC

ml_dtypes = pytest.importorskip("ml_dtypes")
pytestmark = pytest.mark.skipif(emulator.compiler() is None, reason="the emulator needs g++")
BF16 = np.dtype(ml_dtypes.bfloat16)

MMA_TEST_CU = r"""
#include "mma.cuh"
// g = lane / 4, t = lane % 4, as the ISA names them.
#define LANE_GT const unsigned lane = threadIdx.x & 31u, g = lane >> 2, t = lane & 3u

__device__ void store_d(float* d, const float (&acc)[4]) {  // D 16 x 8 row-major
    LANE_GT;
    d[g * 8 + 2 * t] = acc[0];
    d[g * 8 + 2 * t + 1] = acc[1];
    d[(g + 8) * 8 + 2 * t] = acc[2];
    d[(g + 8) * 8 + 2 * t + 1] = acc[3];
}
__device__ void load_c(float (&acc)[4], const float* c) {
    LANE_GT;
    acc[0] = c[g * 8 + 2 * t];
    acc[1] = c[g * 8 + 2 * t + 1];
    acc[2] = c[(g + 8) * 8 + 2 * t];
    acc[3] = c[(g + 8) * 8 + 2 * t + 1];
}

// out (M, N) = a (M, K) b (K, N), all row-major fp32 in global memory, through the shared-memory
// layouts of mma.cuh (a: rows lead_words apart; b and the product: swizzled rows; 16-bit operands
// as pairs along K), every warp taking 16 x 8 tiles in turn. M a multiple of 16, K of the
// instruction's K step, N a power of two >= 32.
template <typename In>
__device__ void tile_product(float* out, const float* a, const float* b, int M, int N, int K) {
    constexpr bool pairs = !same_type<In, float>::value;
    TF_DYNAMIC_SHARED(unsigned, smem);
    const int lda = lead_words(pairs ? K / 2 : K), brows = pairs ? K / 2 : K;
    unsigned* sa = smem;
    unsigned* sb = sa + M * lda;
    float* so = reinterpret_cast<float*>(sb + brows * N);
    unsigned short* halves_a = reinterpret_cast<unsigned short*>(sa);
    unsigned short* halves_b = reinterpret_cast<unsigned short*>(sb);
    for (int i = threadIdx.x; i < M * K; i += blockDim.x) {
        const int r = i / K, k = i % K;
        if constexpr (pairs) halves_a[2 * r * lda + k] = from_acc<In>(a[i]).bits;
        else sa[r * lda + k] = to_tf32(a[i]);
    }
    for (int i = threadIdx.x; i < K * N; i += blockDim.x) {
        const int k = i / N, c = i % N;
        if constexpr (pairs) halves_b[2 * ((k / 2) * N + swz(k / 2, c)) + (k & 1)] = from_acc<In>(b[i]).bits;
        else sb[k * N + swz(k, c)] = to_tf32(b[i]);
    }
    __syncthreads();
    const int tiles = (M / 16) * (N / 8);
    for (int tile = (int)mma_warp(); tile < tiles; tile += (int)(blockDim.x >> 5)) {
        const int r0 = tile / (N / 8) * 16, n0 = tile % (N / 8) * 8;
        float d[4] = {0.f, 0.f, 0.f, 0.f};
        mma_span<In>(d, sa, lda, sb, N, 0, r0, n0, 0, K);
        store_tile_swizzled(so, N, d, r0, n0);
    }
    __syncthreads();
    for (int i = threadIdx.x; i < M * N; i += blockDim.x) out[i] = so[(i / N) * N + swz(i / N, i % N)];
}
extern "C" {
__global__ void tf32_round(const float* x, float* y, long long n) {
    FOR_EACH_INDEX(i, n) y[i] = __uint_as_float(to_tf32(x[i]));
    __syncthreads();
}

// a (16, 8), b (8, 8) and c, d (16, 8), all row-major; one warp.
__global__ void mma_tile_tf32(const float* a, const float* b, const float* c, float* d) {
    LANE_GT;
    const unsigned fa[4] = {to_tf32(a[g * 8 + t]), to_tf32(a[(g + 8) * 8 + t]),
                            to_tf32(a[g * 8 + t + 4]), to_tf32(a[(g + 8) * 8 + t + 4])};
    const unsigned fb[2] = {to_tf32(b[t * 8 + g]), to_tf32(b[(t + 4) * 8 + g])};
    float acc[4];
    load_c(acc, c);
    mma_tf32_m16n8k8(acc, fa, fb);
    store_d(d, acc);
}

// a (16, 16), b (16, 8) as raw 16-bit patterns, c, d (16, 8) fp32; bf16 when is_bf16, else fp16.
__global__ void mma_tile_16(const unsigned short* a, const unsigned short* b, const float* c,
                            float* d, int is_bf16) {
    LANE_GT;
    // a_i: row g for i in {0, 1, 4, 5}, else g + 8; col 2t + (i & 1), + 8 for i >= 4
    unsigned short ea[8];
    for (int i = 0; i < 8; ++i) {
        const unsigned row = (i < 2 || (i >= 4 && i < 6)) ? g : g + 8;
        const unsigned col = 2 * t + (i & 1) + (i >= 4 ? 8 : 0);
        ea[i] = a[row * 16 + col];
    }
    // b_i: row 2t + (i & 1), + 8 for i >= 2; col g
    unsigned short eb[4];
    for (int i = 0; i < 4; ++i) eb[i] = b[(2 * t + (i & 1) + (i >= 2 ? 8 : 0)) * 8 + g];
    const unsigned fa[4] = {pack16(ea[0], ea[1]), pack16(ea[2], ea[3]), pack16(ea[4], ea[5]),
                            pack16(ea[6], ea[7])};
    const unsigned fb[2] = {pack16(eb[0], eb[1]), pack16(eb[2], eb[3])};
    float acc[4];
    load_c(acc, c);
    if (is_bf16) mma_bf16_m16n8k16(acc, fa, fb);
    else mma_f16_m16n8k16(acc, fa, fb);
    store_d(d, acc);
}

__global__ void tile_product_f32(float* out, const float* a, const float* b, int M, int N, int K) {
    tile_product<float>(out, a, b, M, N, K);
}
__global__ void tile_product_bf16(float* out, const float* a, const float* b, int M, int N, int K) {
    tile_product<bf16_t>(out, a, b, M, N, K);
}
__global__ void tile_product_f16(float* out, const float* a, const float* b, int M, int N, int K) {
    tile_product<f16_t>(out, a, b, M, N, K);
}
}
"""


@pytest.fixture(scope="module")
def mma(tmp_path_factory):
    csrc = tmp_path_factory.mktemp("csrc")
    for name in ("common.cuh", "mma.cuh"):  # emu.h comes from cuda_tools
        shutil.copy(CSRC / name, csrc / name)
    (csrc / "mma_test.cu").write_text(MMA_TEST_CU)
    return emulator.EmulatorRuntime.build(csrc=csrc, cache_dir=csrc / "build")


def tf32(x: np.ndarray) -> np.ndarray:
    """cvt.rna.tf32.f32 in NumPy: round the magnitude to 10 mantissa bits, ties away from zero."""
    u = np.asarray(x, np.float32).view(np.uint32)
    special = (u & 0x7F800000) == 0x7F800000
    rounded = ((u.astype(np.uint64) + 0x1000) & 0xFFFFE000).astype(np.uint32)
    return np.where(special, u, rounded).view(np.float32)


def exact_product(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """c + a @ b with exact products summed in float64, rounded once to float32."""
    return (c.astype(np.float64) + a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)


def test_tf32_rounding_is_round_to_nearest_ties_away(mma):
    rng = np.random.default_rng(0)
    high = rng.integers(0, 2**19, 5000, dtype=np.uint64).astype(np.uint32) << 13
    edges = (high[:, None] | np.array([0x0FFF, 0x1000, 0x1001, 0x1FFF, 0], np.uint32)).ravel()
    x = np.concatenate([edges.view(np.float32),
                        np.array([1.0 + 2.0**-11, -(1.0 + 2.0**-11), 1.0 + 3 * 2.0**-11, np.inf,
                                  -np.inf, 3.4e38, 0.0, -0.0], np.float32)])
    y = np.empty_like(x)
    mma.launch("tf32_round", 16, 256, [x, y, x.size])
    finite = np.isfinite(x)
    np.testing.assert_array_equal(y[finite].view(np.uint32), tf32(x[finite]).view(np.uint32))
    # a tie goes away from zero (round-half-even would give 1.0 for the first): cvt.rna, not rn
    assert y[-8] == np.float32(1.0 + 2.0**-10) and y[-7] == -np.float32(1.0 + 2.0**-10)
    assert y[-6] == np.float32(1.0 + 4 * 2.0**-11)
    assert np.isnan(y[np.isnan(x)]).all()


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), scale=st.sampled_from([1e-3, 1.0, 1e3]))
def test_mma_tf32_tile_matches_numpy(mma, seed, scale):
    rng = np.random.default_rng(seed)
    a = (scale * rng.standard_normal((16, 8))).astype(np.float32)
    b = rng.standard_normal((8, 8)).astype(np.float32)
    c = rng.standard_normal((16, 8)).astype(np.float32)
    d = np.full((16, 8), np.nan, np.float32)
    mma.launch("mma_tile_tf32", 1, 32, [a, b, c, d])
    want = exact_product(tf32(a), tf32(b), c)  # the inputs rounded to TF32, the sum in fp32
    np.testing.assert_allclose(d, want, rtol=2e-7, atol=1e-30)
    # and they are rounded: the fp32 product differs by about TF32's 2^-11, not fp32's 2^-24
    fp32 = exact_product(a, b, c)
    assert np.abs(d - fp32).max() > 1e-5 * np.abs(a.astype(np.float64) @ b).max()


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), kind=st.sampled_from(["bf16", "f16"]))
def test_mma_16_bit_tile_is_exact_up_to_fp32_rounding(mma, seed, kind):
    rng = np.random.default_rng(seed)
    dtype = BF16 if kind == "bf16" else np.dtype(np.float16)
    a = rng.standard_normal((16, 16)).astype(dtype)
    b = rng.standard_normal((16, 8)).astype(dtype)
    c = rng.standard_normal((16, 8)).astype(np.float32)
    d = np.full((16, 8), np.nan, np.float32)
    mma.launch("mma_tile_16", 1, 32, [a.view(np.uint16), b.view(np.uint16), c, d,
                                      int(kind == "bf16")])
    want = exact_product(a.astype(np.float32), b.astype(np.float32), c)
    np.testing.assert_allclose(d, want, rtol=2e-7, atol=1e-30)


def test_a_misplaced_fragment_would_show(mma):
    """The check above can fail: a product whose A has two columns swapped (what a wrong lane
    layout amounts to) is far from the emulated one."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((16, 8)).astype(np.float32)
    b = rng.standard_normal((8, 8)).astype(np.float32)
    c = np.zeros((16, 8), np.float32)
    d = np.empty((16, 8), np.float32)
    mma.launch("mma_tile_tf32", 1, 32, [a, b, c, d])
    swapped = a[:, [0, 1, 2, 3, 5, 4, 6, 7]]
    assert not np.allclose(d, exact_product(tf32(swapped), tf32(b), c), rtol=1e-3)


@settings(max_examples=12, deadline=None)
@given(m=st.sampled_from([16, 32, 48]), n=st.sampled_from([32, 64]), k=st.sampled_from([16, 32, 48]),
       kind=st.sampled_from(["f32", "bf16", "f16"]), threads=st.sampled_from([32, 64, 96]),
       seed=st.integers(0, 99))
def test_tile_products_through_the_shared_memory_layouts(mma, m, n, k, kind, threads, seed):
    """The layouts rnn.cu keeps its operands in (mma.cuh: A rows lead_words apart, B in swizzled
    rows, 16-bit values paired along K) and the fragment loads from them give the product: every
    warp of the block takes tiles, each lane's fragments read from their swizzled places."""
    rng = np.random.default_rng(seed)
    dtype = {"f32": np.float32, "bf16": BF16, "f16": np.float16}[kind]
    a = rng.standard_normal((m, k)).astype(dtype).astype(np.float32)  # representable in `kind`
    b = rng.standard_normal((k, n)).astype(dtype).astype(np.float32)
    out = np.full((m, n), np.nan, np.float32)
    lda = k // (2 if kind != "f32" else 1)
    lda += (12 - lda % 8) % 8
    shared = 4 * (m * lda + (k // (2 if kind != "f32" else 1)) * n + m * n)
    mma.launch(f"tile_product_{kind}", 1, threads, [out, a, b, m, n, k], shared_mem=shared)
    if kind == "f32":
        a, b = tf32(a), tf32(b)
    np.testing.assert_allclose(out, exact_product(a, b, np.zeros((m, n), np.float32)), rtol=1e-6,
                               atol=1e-6)
