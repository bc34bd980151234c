"""Max and average pooling (csrc/pool.cu) against tinyflow/kernels/pool.py."""
from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from kernel_backend import FLOATS, SETTINGS, reference, run, tol


# ---- pooling --------------------------------------------------------------------------------
pool_cases = st.fixed_dictionaries({
    "n": st.integers(1, 2), "c": st.integers(1, 3), "h": st.integers(3, 8), "w": st.integers(3, 8),
    "k": st.integers(1, 3), "s": st.integers(1, 3), "p": st.integers(0, 1),
    "d": st.integers(1, 2), "ceil": st.booleans(), "include_pad": st.booleans(),
    "dtype": FLOATS, "seed": st.integers(0, 99), "ties": st.booleans(),
})


@SETTINGS
@given(case=pool_cases)
def test_pools_match_reference(emu, case):
    k, s, p, d = (case["k"],) * 2, (case["s"],) * 2, (case["p"],) * 2, (case["d"],) * 2
    span = case["d"] * (case["k"] - 1) + 1
    if case["p"] > case["k"] // 2 or min(case["h"], case["w"]) + 2 * case["p"] < span:
        return  # PyTorch rejects padding > kernel/2; and no output position
    rng = np.random.default_rng(case["seed"])
    shape = (case["n"], case["c"], case["h"], case["w"])
    x = rng.standard_normal(shape).astype(case["dtype"])
    if case["ties"]:
        x = np.round(x).astype(case["dtype"])  # many equal values: the first maximum must win
    out_ref, arg_ref = reference("maxpool2d_forward")(x, k, s, p, d, case["ceil"])
    out, arg = run(emu, "maxpool2d_forward", x, k, s, p, d, case["ceil"])
    np.testing.assert_array_equal(out, out_ref)
    np.testing.assert_array_equal(arg, arg_ref)
    assert arg.dtype == np.int32

    g = rng.standard_normal(out.shape).astype(case["dtype"])
    dx_ref = reference("maxpool2d_backward")(g, arg_ref, shape, k, s, p, d)
    dx = run(emu, "maxpool2d_backward", g, arg, shape, k, s, p, d)
    np.testing.assert_allclose(dx, dx_ref, **tol(case["dtype"]))

    avg_ref = reference("avgpool2d_forward")(x, k, s, p, case["ceil"], case["include_pad"])
    avg = run(emu, "avgpool2d_forward", x, k, s, p, case["ceil"], case["include_pad"])
    np.testing.assert_allclose(avg, avg_ref, **tol(case["dtype"]))
    ga = rng.standard_normal(avg.shape).astype(case["dtype"])
    gx_ref = reference("avgpool2d_backward")(ga, shape, k, s, p, case["ceil"], case["include_pad"])
    gx = run(emu, "avgpool2d_backward", ga, shape, k, s, p, case["ceil"], case["include_pad"])
    np.testing.assert_allclose(gx, gx_ref, **tol(case["dtype"]))
