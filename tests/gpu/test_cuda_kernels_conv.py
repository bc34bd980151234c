"""im2col / col2im (csrc/conv.cu) against tinyflow/kernels/conv.py, on the emulator and a GPU."""
from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from kernel_backend import FLOATS, SETTINGS, reference, run, tol


# ---- convolution ----------------------------------------------------------------------------
conv_cases = st.fixed_dictionaries({
    "n": st.integers(1, 2), "c": st.integers(1, 3), "h": st.integers(3, 7), "w": st.integers(3, 7),
    "kh": st.integers(1, 3), "kw": st.integers(1, 3), "sh": st.integers(1, 3),
    "sw": st.integers(1, 2), "ph": st.integers(0, 2), "pw": st.integers(0, 1),
    "dh": st.integers(1, 2), "dw": st.integers(1, 2), "dtype": FLOATS, "seed": st.integers(0, 99),
})


@SETTINGS
@given(case=conv_cases)
def test_im2col_and_col2im_match_reference(emu, case):
    k = (case["kh"], case["kw"])
    geo = dict(stride=(case["sh"], case["sw"]), padding=(case["ph"], case["pw"]),
               dilation=(case["dh"], case["dw"]))
    if case["h"] + 2 * case["ph"] < case["dh"] * (case["kh"] - 1) + 1 or \
            case["w"] + 2 * case["pw"] < case["dw"] * (case["kw"] - 1) + 1:
        return  # no output position: the op rejects this before any kernel runs
    rng = np.random.default_rng(case["seed"])
    x = rng.standard_normal((case["n"], case["c"], case["h"], case["w"])).astype(case["dtype"])
    expected = reference("im2col")(x, k, **geo)
    got = run(emu, "im2col", x, k, **geo)
    assert got.shape == expected.shape and got.dtype == x.dtype
    np.testing.assert_array_equal(got, expected)  # a pure copy: exact

    col = rng.standard_normal(expected.shape).astype(case["dtype"])
    dx_ref = reference("col2im")(col, x.shape, k, **geo)
    dx = run(emu, "col2im", col, x.shape, k, **geo)
    assert dx.shape == x.shape
    np.testing.assert_allclose(dx, dx_ref, **tol(case["dtype"]))


def test_im2col_strided_input_and_odd_dtype_fall_back(emu):
    """A non-contiguous input is made contiguous; float16 runs the reference body."""
    x = np.arange(2 * 3 * 6 * 6, dtype=np.float32).reshape(2, 3, 6, 6)[:, :, ::2, ::2]
    np.testing.assert_array_equal(run(emu, "im2col", x, (2, 2)), reference("im2col")(x, (2, 2)))
    half = x.astype(np.float16)
    out = emu.call("im2col", half, (2, 2), expect_kernel=False)
    assert emu.launches == []  # float16 has no .cu kernel: the reference body ran
    np.testing.assert_array_equal(out, reference("im2col")(half, (2, 2)))
