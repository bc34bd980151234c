"""Max and average pooling (csrc/pool.cu) against tinyflow/kernels/pool.py, in all four dtypes,
and the magic-number division (csrc/fastdiv.cuh, tinyflow_cuda/kernels/_fastdiv.py) it indexes by."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel_backend import SETTINGS, reference, run
from tinyflow_cuda.kernels import _fastdiv

BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = st.sampled_from([np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.float16), BF16])
SUFFIX = {"float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16"}


def tol(dtype) -> dict:
    """Kernel and reference sum in different orders (fp32 for the halves) and round once: a few
    units in the last place of the dtype apart."""
    return {"float32": {"rtol": 1e-5, "atol": 1e-6}, "float64": {"rtol": 1e-12, "atol": 1e-13},
            "float16": {"rtol": 2e-3, "atol": 1e-4}, "bfloat16": {"rtol": 1e-2, "atol": 1e-4}}[np.dtype(dtype).name]


def wide(a: np.ndarray) -> np.ndarray:
    return np.asarray(a).astype(np.float64)


def assert_ran(emu, kernel: str, dtype) -> None:
    """The .cu kernel of this dtype ran (no fallback to the reference's per-tap loop)."""
    want = f"{kernel}_{SUFFIX[np.dtype(dtype).name]}"
    assert emu.launches and set(emu.launches) == {want}, emu.launches


# ---- magic-number division -------------------------------------------------------------------
@settings(max_examples=300, deadline=None)
@given(d=st.integers(1, 2**31 - 1), n=st.integers(0, 2**31 - 1))
def test_magic_division_is_exact_below_2_31(d, n):
    packed = _fastdiv.magic(d)
    assert packed & 0xFFFFFFFF < 2**32
    assert _fastdiv.fast_divide(n, packed) == n // d


def test_magic_division_at_the_edges():
    for d in [1, 2, 3, 5, 6, 7, 13, 55, 3025, 2**16 + 1, 2**30, 2**31 - 1]:
        for n in [0, 1, d - 1, d, d + 1, 2 * d - 1, 2**31 - 2, 2**31 - 1]:
            if n >= 0:
                assert _fastdiv.fast_divide(n, _fastdiv.magic(d)) == n // d, (n, d)
    with pytest.raises(ValueError, match="divisor 0"):
        _fastdiv.magic(0)


# ---- pooling ---------------------------------------------------------------------------------
pool_cases = st.fixed_dictionaries({
    "n": st.integers(1, 2), "c": st.integers(1, 3), "h": st.integers(3, 8), "w": st.integers(3, 8),
    "k": st.tuples(st.integers(1, 3), st.integers(1, 3)), "s": st.tuples(st.integers(1, 3), st.integers(1, 3)),
    "p": st.integers(0, 1), "d": st.tuples(st.integers(1, 2), st.integers(1, 3)), "ceil": st.booleans(),
    "include_pad": st.booleans(), "dtype": DTYPES, "seed": st.integers(0, 99), "ties": st.booleans(),
})


def _valid(case) -> bool:
    """PyTorch rejects padding > kernel/2; and every window must have an output position."""
    k, d, p = case["k"], case["d"], case["p"]
    return all(p <= k[a] // 2 and (case["h"], case["w"])[a] + 2 * p >= d[a] * (k[a] - 1) + 1 for a in (0, 1))


@SETTINGS
@given(case=pool_cases)
def test_maxpool_matches_reference(emu, case):
    if not _valid(case):
        return
    dtype, k, s, p, d = case["dtype"], case["k"], case["s"], (case["p"],) * 2, case["d"]
    rng = np.random.default_rng(case["seed"])
    shape = (case["n"], case["c"], case["h"], case["w"])
    x = rng.standard_normal(shape)
    if case["ties"]:
        x = np.round(x)  # many equal values: the first maximum must win
    x = x.astype(dtype)
    out_ref, arg_ref = reference("maxpool2d_forward")(x, k, s, p, d, case["ceil"])
    out, arg = run(emu, "maxpool2d_forward", x, k, s, p, d, case["ceil"])
    assert_ran(emu, "maxpool2d_forward", dtype)
    assert out.dtype == dtype and arg.dtype == np.int32
    np.testing.assert_array_equal(wide(out), wide(out_ref))  # the max is exact in every dtype
    np.testing.assert_array_equal(arg, arg_ref)

    g = rng.standard_normal(out.shape).astype(dtype)
    dx_ref = reference("maxpool2d_backward")(g, arg_ref, shape, k, s, p, d)
    dx = run(emu, "maxpool2d_backward", g, arg, shape, k, s, p, d)
    assert_ran(emu, "maxpool2d_backward", dtype)
    assert dx.dtype == dtype
    np.testing.assert_allclose(wide(dx), wide(dx_ref), **tol(dtype))


@SETTINGS
@given(case=pool_cases)
def test_avgpool_matches_reference(emu, case):
    case = {**case, "d": (1, 1)}
    if not _valid(case):
        return
    dtype, k, s, p = case["dtype"], case["k"], case["s"], (case["p"],) * 2
    rng = np.random.default_rng(case["seed"])
    shape = (case["n"], case["c"], case["h"], case["w"])
    x = rng.standard_normal(shape).astype(dtype)
    args = (k, s, p, case["ceil"], case["include_pad"])
    out_ref = reference("avgpool2d_forward")(x, *args)
    out = run(emu, "avgpool2d_forward", x, *args)
    assert_ran(emu, "avgpool2d_forward", dtype)
    assert out.dtype == dtype
    np.testing.assert_allclose(wide(out), wide(out_ref), **tol(dtype))
    g = rng.standard_normal(out.shape).astype(dtype)
    gx_ref = reference("avgpool2d_backward")(g, shape, *args)
    gx = run(emu, "avgpool2d_backward", g, shape, *args)
    assert_ran(emu, "avgpool2d_backward", dtype)
    np.testing.assert_allclose(wide(gx), wide(gx_ref), **tol(dtype))


@pytest.mark.parametrize("dtype", [np.float32, BF16], ids=["f32", "bf16"])
def test_alexnet_pools_overlapping_windows(emu, dtype):
    """AlexNet's 3x3 stride-2 pools (55 -> 27 -> 13 -> 6): every interior pixel sits in up to four
    windows, so the gather must add exactly the windows it won."""
    rng = np.random.default_rng(1)
    for side in (55, 13):
        x = rng.standard_normal((2, 3, side, side)).astype(dtype)
        out, arg = run(emu, "maxpool2d_forward", x, (3, 3), (2, 2))
        out_ref, arg_ref = reference("maxpool2d_forward")(x, (3, 3), (2, 2))
        np.testing.assert_array_equal(arg, arg_ref)
        np.testing.assert_array_equal(wide(out), wide(out_ref))
        g = rng.standard_normal(out.shape).astype(dtype)
        dx = run(emu, "maxpool2d_backward", g, arg, x.shape, (3, 3), (2, 2))
        np.testing.assert_allclose(wide(dx), wide(reference("maxpool2d_backward")(g, arg_ref, x.shape, (3, 3), (2, 2))),
                                   **tol(dtype))


def test_maxpool_propagates_nan_to_the_first_nan(emu):
    """A NaN in a window is its maximum (PyTorch's rule), and the gradient goes to that NaN."""
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    x[0, 0, 0, 1] = np.nan
    x[0, 0, 1, 0] = np.nan
    out, arg = run(emu, "maxpool2d_forward", x, (2, 2), (2, 2))
    assert np.isnan(out[0, 0, 0, 0]) and arg[0, 0, 0, 0] == 1  # offset (0, 1): the first NaN
    assert out[0, 0, 1, 1] == 15 and arg[0, 0, 1, 1] == 3
    dx = run(emu, "maxpool2d_backward", np.ones_like(out), arg, x.shape, (2, 2), (2, 2))
    assert dx[0, 0, 0, 1] == 1 and dx[0, 0, 1, 0] == 0 and dx[0, 0, 1, 1] == 0


def test_a_tensor_past_the_32_bit_limit_launches_in_runs_of_planes(emu, monkeypatch):
    """Past 2^31 elements a launch covers whole planes, each run under the limit (a small limit
    here): same results, several launches."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 5, 7, 6)).astype(np.float32)  # 10 planes of 42 elements
    g_shape = reference("maxpool2d_forward")(x, (3, 3), (2, 1), (1, 1))[0].shape
    g = rng.standard_normal(g_shape).astype(np.float32)
    want = [run(emu, "maxpool2d_forward", x, (3, 3), (2, 1), (1, 1)),
            run(emu, "avgpool2d_forward", x, (3, 3), (2, 1), (1, 1)),
            run(emu, "avgpool2d_backward", g, x.shape, (3, 3), (2, 1), (1, 1))]
    monkeypatch.setattr(_fastdiv, "MAX_INDEX", 3 * 42)  # three planes a launch
    got = [run(emu, "maxpool2d_forward", x, (3, 3), (2, 1), (1, 1))]
    assert len(emu.launches) == 4  # ceil(10 / 3)
    got += [run(emu, "avgpool2d_forward", x, (3, 3), (2, 1), (1, 1)),
            run(emu, "avgpool2d_backward", g, x.shape, (3, 3), (2, 1), (1, 1))]
    dx = run(emu, "maxpool2d_backward", g, got[0][1], x.shape, (3, 3), (2, 1), (1, 1))
    assert len(emu.launches) == 4
    np.testing.assert_array_equal(got[0][0], want[0][0])
    np.testing.assert_array_equal(got[0][1], want[0][1])
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_array_equal(got[2], want[2])
    np.testing.assert_allclose(dx, reference("maxpool2d_backward")(g, want[0][1], x.shape, (3, 3), (2, 1), (1, 1)),
                               rtol=1e-6)
    with pytest.raises(ValueError, match="single plane of 42 elements"):
        monkeypatch.setattr(_fastdiv, "MAX_INDEX", 41)
        run(emu, "maxpool2d_forward", x, (3, 3), (2, 1), (1, 1))
