"""csrc/common.cuh's fp16/bf16 conversions, exhaustively, against NumPy's float16 and ml_dtypes'
bfloat16 (both round to nearest even): every 16-bit pattern to fp32, and fp32 values chosen to hit
every rounding case (ties, subnormals, overflow, NaN) back to 16 bits.

The conversions are compiled by the emulator from a scratch csrc folder holding common.cuh and a
test kernel, so the kernels under tinyflow_cuda/csrc stay what the GPU runs.
"""
from __future__ import annotations

import shutil

import numpy as np
import pytest

from cuda_tools import emulator
from tinyflow_cuda.runtime import CSRC

ml_dtypes = pytest.importorskip("ml_dtypes")
pytestmark = pytest.mark.skipif(emulator.compiler() is None, reason="the emulator needs g++")

CONVERT_CU = r"""
#include "common.cuh"
#define CONVERT(sfx, T)                                                                   \
    __global__ void widen_##sfx(const T* x, float* y, long long n) {                      \
        FOR_EACH_INDEX(i, n) y[i] = (float)to_acc(x[i]);                                   \
    }                                                                                      \
    __global__ void narrow_##sfx(const float* x, T* y, long long n) {                     \
        FOR_EACH_INDEX(i, n) y[i] = from_acc<T>((acc_t<T>)x[i]);                           \
    }
extern "C" {
TF_FLOAT_TYPES(CONVERT)
}
"""


@pytest.fixture(scope="module")
def convert(tmp_path_factory):
    csrc = tmp_path_factory.mktemp("csrc")
    shutil.copy(CSRC / "common.cuh", csrc / "common.cuh")  # emu.h comes from cuda_tools
    (csrc / "convert.cu").write_text(CONVERT_CU)
    runtime = emulator.EmulatorRuntime.build(csrc=csrc, cache_dir=csrc / "build")

    def run(kernel: str, x: np.ndarray, out_dtype) -> np.ndarray:
        out = np.empty(x.shape, out_dtype)
        runtime.launch(kernel, 64, 256, [x, out, x.size])
        return out

    return run


HALF = {"f16": np.dtype(np.float16), "bf16": np.dtype(ml_dtypes.bfloat16)}


@pytest.mark.parametrize("sfx", ["f16", "bf16"])
def test_every_16_bit_pattern_widens_exactly(convert, sfx):
    bits = np.arange(2**16, dtype=np.uint16)
    got = convert(f"widen_{sfx}", bits.view(HALF[sfx]), np.float32)
    want = bits.view(HALF[sfx]).astype(np.float32)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    assert np.array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32))  # -0 stays -0


def _rounding_cases() -> np.ndarray:
    rng = np.random.default_rng(0)
    random_bits = rng.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32)
    # every float32 whose low 16 bits sit at a rounding boundary of bf16, and of fp16 (13 bits)
    high = rng.integers(0, 2**16, 20_000, dtype=np.uint64).astype(np.uint32) << 16
    bf16_edges = (high[:, None] | np.array([0x7FFF, 0x8000, 0x8001, 0x0000, 0xFFFF], np.uint32)).ravel()
    high13 = rng.integers(0, 2**19, 20_000, dtype=np.uint64).astype(np.uint32) << 13
    f16_edges = (high13[:, None] | np.array([0x0FFF, 0x1000, 0x1001, 0x1FFF], np.uint32)).ravel()
    values = np.concatenate([random_bits, bf16_edges, f16_edges]).view(np.float32)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 65504.0, 65519.99, 65520.0, 1e10,
                        2.0**-24, 2.0**-25, 2.0**-25 * 1.0000001, 3 * 2.0**-26, 2.0**-14,
                        2.0**-14 * (1 - 2.0**-11), 6.1e-5, 1e-8, -1e-8, 3.4e38, 1.17e-38],
                       np.float32)
    # fp16's subnormal range, densely: every multiple of 2^-26 below 2^-14
    subnormals = (np.arange(2**12, dtype=np.float32) * np.float32(2.0**-26))
    return np.concatenate([values, special, subnormals, -subnormals])


@pytest.mark.parametrize("sfx", ["f16", "bf16"])
def test_fp32_narrows_to_nearest_even(convert, sfx):
    x = _rounding_cases()
    got = convert(f"narrow_{sfx}", x, HALF[sfx])
    with np.errstate(over="ignore", invalid="ignore"):
        want = x.astype(HALF[sfx])
    nan = np.isnan(want.astype(np.float32))
    assert np.array_equal(np.isnan(got.astype(np.float32)), nan)
    mismatch = np.flatnonzero(got.view(np.uint16)[~nan] != want.view(np.uint16)[~nan])
    assert mismatch.size == 0, (f"{mismatch.size} values round differently, e.g. "
                                f"{x[~nan][mismatch[:5]]!r}: got {got[~nan][mismatch[:5]]!r}, "
                                f"want {want[~nan][mismatch[:5]]!r}")


@pytest.mark.parametrize("sfx", ["f32", "f64"])
def test_fp32_and_fp64_entries_are_plain_copies(convert, sfx):
    dtype = {"f32": np.float32, "f64": np.float64}[sfx]
    x = _rounding_cases()
    with np.errstate(invalid="ignore"):
        want = x.astype(dtype)
    assert np.array_equal(convert(f"narrow_{sfx}", x, dtype), want, equal_nan=True)
