"""Max and average pooling (csrc/pool.cu) against tinyflow/kernels/pool.py, in all four dtypes,
on both paths (the tiled kernels that stage their source rows in shared memory, and the flat
fallback), and the magic-number division (csrc/fastdiv.cuh, tinyflow_cuda/kernels/_fastdiv.py)
they index by."""
from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel_backend import SETTINGS, reference, run
from tinyflow.kernels.pool import pool_output_shape
from tinyflow_cuda.kernels import _fastdiv
from tinyflow_cuda.kernels import pool as twin

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


def assert_ran(emu, kernel: str, dtype, flat: bool = False) -> None:
    """The .cu kernel of this dtype ran (no fallback to the reference's per-tap loop): the tiled
    one, or with ``flat`` the flat one."""
    want = f"{kernel}{'_flat' if flat else ''}_{SUFFIX[np.dtype(dtype).name]}"
    assert emu.launches and set(emu.launches) == {want}, emu.launches


@contextlib.contextmanager
def tiling(tile_bytes: int | None = None, max_blocks: int | None = None) -> Iterator[bool]:
    """Pool launches inside run with ``tile_bytes`` of shared memory a tile (None: the default;
    0: none, so the flat kernels run) and at most ``max_blocks`` blocks (so that a block walks
    several tiles). Yields whether the flat kernels are expected."""
    saved = (twin.TILE_BYTES, twin.STAGE_LIMIT, twin.MAX_BLOCKS)
    if tile_bytes is not None:
        twin.TILE_BYTES = tile_bytes
        twin.STAGE_LIMIT = tile_bytes if tile_bytes == 0 else saved[1]
    if max_blocks is not None:
        twin.MAX_BLOCKS = max_blocks
    try:
        yield tile_bytes == 0
    finally:
        twin.TILE_BYTES, twin.STAGE_LIMIT, twin.MAX_BLOCKS = saved


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
# "tile": the shared memory a tile may take (tiling above): None the default (small planes: tiles
# of several whole planes), 0 the flat kernels, else a budget that cuts tiles of whole planes or
# of a few rows (1 byte: one destination row a tile). "blocks": a cap on the grid, so that one
# block walks several tiles and restages.
pool_cases = st.fixed_dictionaries({
    "n": st.integers(1, 2), "c": st.integers(1, 3), "h": st.integers(3, 8), "w": st.integers(3, 8),
    "k": st.tuples(st.integers(1, 3), st.integers(1, 3)), "s": st.tuples(st.integers(1, 3), st.integers(1, 3)),
    "p": st.integers(0, 1), "d": st.tuples(st.integers(1, 2), st.integers(1, 3)), "ceil": st.booleans(),
    "include_pad": st.booleans(), "dtype": DTYPES, "seed": st.integers(0, 99), "ties": st.booleans(),
    "nan": st.booleans(), "tile": st.one_of(st.none(), st.just(0), st.integers(1, 1200)),
    "blocks": st.sampled_from([None, 1, 2]),
})
POOL_SETTINGS = settings(max_examples=40, deadline=None)


def _valid(case) -> bool:
    """PyTorch rejects padding > kernel/2; and every window must have an output position."""
    k, d, p = case["k"], case["d"], case["p"]
    return all(p <= k[a] // 2 and (case["h"], case["w"])[a] + 2 * p >= d[a] * (k[a] - 1) + 1 for a in (0, 1))


def _input(case, rng: np.random.Generator) -> np.ndarray:
    """x of the case: rounded to a few integers with ``ties`` (the first maximum must win), a
    tenth NaN with ``nan`` (the first NaN of a window is its maximum)."""
    shape = (case["n"], case["c"], case["h"], case["w"])
    x = rng.standard_normal(shape)
    if case["ties"]:
        x = np.round(x)
    if case["nan"]:
        x[rng.random(shape) < 0.1] = np.nan
    return x.astype(case["dtype"])


def _first_nan_offsets(x: np.ndarray, k, s, p, d, out_hw) -> np.ndarray:
    """(N, C, OH, OW): the offset i*kw + j of the first NaN of each window in row-major order,
    -1 where it has none. The kernels' argmax there (the NumPy reference keeps the first maximum
    before the NaN: its value is NaN, its argmax is not the NaN's)."""
    n, c, h, w = x.shape
    found = np.full((n, c, *out_hw), -1, np.int32)
    nan = np.isnan(wide(x))
    for oh in range(out_hw[0]):
        for ow in range(out_hw[1]):
            for i in reversed(range(k[0])):  # the last assignment is the first tap
                for j in reversed(range(k[1])):
                    hh, ww = oh * s[0] - p[0] + i * d[0], ow * s[1] - p[1] + j * d[1]
                    if 0 <= hh < h and 0 <= ww < w:
                        here = nan[:, :, hh, ww]
                        found[:, :, oh, ow][here] = i * k[1] + j
    return found


@POOL_SETTINGS
@given(case=pool_cases)
def test_maxpool_matches_reference(emu, case):
    if not _valid(case):
        return
    dtype, k, s, p, d = case["dtype"], case["k"], case["s"], (case["p"],) * 2, case["d"]
    rng = np.random.default_rng(case["seed"])
    x = _input(case, rng)
    out_ref, arg_ref = reference("maxpool2d_forward")(x, k, s, p, d, case["ceil"])
    with tiling(case["tile"], case["blocks"]) as flat:
        out, arg = run(emu, "maxpool2d_forward", x, k, s, p, d, case["ceil"])
        assert_ran(emu, "maxpool2d_forward", dtype, flat)
        assert out.dtype == dtype and arg.dtype == np.int32
        np.testing.assert_array_equal(wide(out), wide(out_ref))  # the max is exact in every dtype
        first_nan = _first_nan_offsets(x, k, s, p, d, out.shape[2:])
        np.testing.assert_array_equal(arg, np.where(first_nan >= 0, first_nan, arg_ref))

        g = rng.standard_normal(out.shape).astype(dtype)
        dx_ref = reference("maxpool2d_backward")(g, arg, x.shape, k, s, p, d)
        dx = run(emu, "maxpool2d_backward", g, arg, x.shape, k, s, p, d)
        assert_ran(emu, "maxpool2d_backward", dtype, flat)
    assert dx.dtype == dtype
    np.testing.assert_allclose(wide(dx), wide(dx_ref), **tol(dtype))


@POOL_SETTINGS
@given(case=pool_cases)
def test_avgpool_matches_reference(emu, case):
    case = {**case, "d": (1, 1)}
    if not _valid(case):
        return
    dtype, k, s, p = case["dtype"], case["k"], case["s"], (case["p"],) * 2
    rng = np.random.default_rng(case["seed"])
    x = _input(case, rng)
    args = (k, s, p, case["ceil"], case["include_pad"])
    out_ref = reference("avgpool2d_forward")(x, *args)
    g = rng.standard_normal(out_ref.shape).astype(dtype)
    gx_ref = reference("avgpool2d_backward")(g, x.shape, *args)
    with tiling(case["tile"], case["blocks"]) as flat:
        out = run(emu, "avgpool2d_forward", x, *args)
        assert_ran(emu, "avgpool2d_forward", dtype, flat)
        gx = run(emu, "avgpool2d_backward", g, x.shape, *args)
        assert_ran(emu, "avgpool2d_backward", dtype, flat)
    assert out.dtype == gx.dtype == dtype
    np.testing.assert_allclose(wide(out), wide(out_ref), **tol(dtype))  # NaN where the reference's
    np.testing.assert_allclose(wide(gx), wide(gx_ref), **tol(dtype))


# tile: the default (several whole planes a tile, or a whole plane), 1 byte (tiles of one output
# row, halo rows staged twice), 0 (the flat kernels)
TILINGS = [pytest.param(None, id="planes"), pytest.param(1, id="rows"), pytest.param(0, id="flat")]


@pytest.mark.parametrize("tile", TILINGS)
@pytest.mark.parametrize("dtype", [np.float32, BF16], ids=["f32", "bf16"])
def test_alexnet_pools_overlapping_windows(emu, dtype, tile):
    """AlexNet's 3x3 stride-2 pools (55 -> 27 -> 13 -> 6) and a 2x2/2: every interior pixel of a
    3x3/2 sits in up to four windows, so the gather must add exactly the windows it won, and a
    tile of rows must stage the halo row its neighbour tile also reads."""
    rng = np.random.default_rng(1)
    for side, k, s in [(55, 3, 2), (27, 3, 2), (13, 3, 2), (12, 2, 2)]:
        x = rng.standard_normal((2, 3, side, side)).astype(dtype)
        with tiling(tile) as flat:
            out, arg = run(emu, "maxpool2d_forward", x, (k, k), (s, s))
            assert_ran(emu, "maxpool2d_forward", dtype, flat)
            g = rng.standard_normal(out.shape).astype(dtype)
            dx = run(emu, "maxpool2d_backward", g, arg, x.shape, (k, k), (s, s))
            mean = run(emu, "avgpool2d_forward", x, (k, k), (s, s))
            gx = run(emu, "avgpool2d_backward", g, x.shape, (k, k), (s, s))
            assert_ran(emu, "avgpool2d_backward", dtype, flat)
        out_ref, arg_ref = reference("maxpool2d_forward")(x, (k, k), (s, s))
        np.testing.assert_array_equal(arg, arg_ref)
        np.testing.assert_array_equal(wide(out), wide(out_ref))
        np.testing.assert_allclose(wide(dx), wide(reference("maxpool2d_backward")(g, arg_ref, x.shape, (k, k), (s, s))),
                                   **tol(dtype))
        np.testing.assert_allclose(wide(mean), wide(reference("avgpool2d_forward")(x, (k, k), (s, s))), **tol(dtype))
        np.testing.assert_allclose(wide(gx), wide(reference("avgpool2d_backward")(g, x.shape, (k, k), (s, s))),
                                   **tol(dtype))


@pytest.mark.parametrize("tile", TILINGS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, BF16], ids=["f32", "f64", "f16", "bf16"])
def test_maxpool_propagates_nan_to_the_first_nan(emu, dtype, tile):
    """A NaN in a window is its maximum (PyTorch's rule), and the gradient goes to that NaN; of
    equal values the first wins."""
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    x[0, 0, 0, 1] = np.nan
    x[0, 0, 1, 0] = np.nan
    x[0, 0, 2, 2:] = x[0, 0, 3, 2:] = 20  # a tie: offset 0 wins
    second = x.copy()  # a second plane: window (1, 0) is [[5, 7], [NaN, NaN]]
    second[0, 0, 2:, :2] = [[5, 7], [np.nan, np.nan]]
    x = np.concatenate([x, second], axis=1).astype(dtype)
    with tiling(tile) as flat:
        out, arg = run(emu, "maxpool2d_forward", x, (2, 2), (2, 2))
        assert_ran(emu, "maxpool2d_forward", dtype, flat)
        dx = run(emu, "maxpool2d_backward", np.ones_like(out), arg, x.shape, (2, 2), (2, 2))
    assert np.isnan(wide(out[0, 0, 0, 0])) and arg[0, 0, 0, 0] == 1  # offset (0, 1): the first NaN
    assert wide(out[0, 0, 1, 1]) == 20 and arg[0, 0, 1, 1] == 0
    assert np.isnan(wide(out[0, 1, 1, 0])) and arg[0, 1, 1, 0] == 2  # the first NaN, after the 7
    assert wide(dx[0, 0, 0, 1]) == 1 and wide(dx[0, 0, 1, 0]) == 0 and wide(dx[0, 0, 1, 1]) == 0
    assert wide(dx[0, 0, 2, 2]) == 1 and wide(dx[0, 0, 3, 3]) == 0
    assert wide(dx[0, 1, 3, 0]) == 1 and wide(dx[0, 1, 3, 1]) == 0 and wide(dx[0, 1, 2, 1]) == 0


@pytest.mark.parametrize("tile", [pytest.param(None, id="tiled"), pytest.param(0, id="flat")])
def test_a_tensor_past_the_32_bit_limit_launches_in_runs_of_planes(emu, monkeypatch, tile):
    """Past 2^31 elements a launch covers whole planes, each run under the limit (a small limit
    here): same results, several launches."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 5, 7, 6)).astype(np.float32)  # 10 planes of 42 elements
    g_shape = reference("maxpool2d_forward")(x, (3, 3), (2, 1), (1, 1))[0].shape
    g = rng.standard_normal(g_shape).astype(np.float32)
    with tiling(tile):
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


def test_windows_too_tall_for_shared_memory_take_the_flat_kernels(emu):
    """The switch, unforced: a 7x1 window over float64 rows of 1000 needs 7 rows (56 KB) staged
    for one output row, past STAGE_LIMIT (48 KB): the flat kernels run, with the same results."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 2, 16, 1000))
    k, s = (7, 1), (1, 1)
    assert 7 * 1000 * 8 > twin.STAGE_LIMIT >= 6 * 1000 * 8
    out, arg = run(emu, "maxpool2d_forward", x, k, s)
    assert_ran(emu, "maxpool2d_forward", x.dtype, flat=True)
    out_ref, arg_ref = reference("maxpool2d_forward")(x, k, s)
    np.testing.assert_array_equal(out, out_ref)
    np.testing.assert_array_equal(arg, arg_ref)
    g = rng.standard_normal(out.shape)
    dx = run(emu, "maxpool2d_backward", g, arg, x.shape, k, s)
    assert_ran(emu, "maxpool2d_backward", x.dtype, flat=True)  # 7 rows of gout and argmax: 84 KB
    np.testing.assert_allclose(dx, reference("maxpool2d_backward")(g, arg_ref, x.shape, k, s), **tol(x.dtype))
    mean = run(emu, "avgpool2d_forward", x, k, s)
    assert_ran(emu, "avgpool2d_forward", x.dtype, flat=True)
    np.testing.assert_allclose(mean, reference("avgpool2d_forward")(x, k, s), **tol(x.dtype))
    # a 6x1 window fits (48 KB): tiles of one output row
    out6, _ = run(emu, "maxpool2d_forward", x, (6, 1), s)
    assert_ran(emu, "maxpool2d_forward", x.dtype)
    np.testing.assert_array_equal(out6, reference("maxpool2d_forward")(x, (6, 1), s)[0])


# ---- the tile plans (host only) --------------------------------------------------------------

@pytest.mark.parametrize("shape, k, s, itemsize, want", [
    ((128 * 64, 55, 55), 3, 2, 4, (1, 27, 1)),  # AlexNet pool1: a 12 KB plane a block
    ((128 * 192, 27, 27), 3, 2, 4, (5, 13, 1)),  # pool2: 5 planes (14.6 KB) a block
    ((128 * 256, 13, 13), 3, 2, 4, (24, 6, 1)),  # pool5: 24 planes (16 KB, 864 outputs) a block
    ((128 * 256, 13, 13), 3, 2, 2, (29, 6, 1)),  # bf16: 29 planes reach 1024 outputs
    ((64, 224, 224), 2, 2, 4, (1, 9, 13)),  # a VGG pool: 9 output rows (18 input rows) a block
    ((64, 55, 55), 3, 2, 8, (1, 18, 2)),  # float64 pool1: two tiles of a plane
])
def test_forward_tile_plans_of_real_pools(shape, k, s, itemsize, want):
    planes, h, w = shape
    oh = ow = (h - k) // s + 1
    plan = twin._forward_plan(planes, h, w, oh, ow, (k, k), (s, s), (1, 1), itemsize)
    assert (plan.planes, plan.rows, plan.per_group) == want
    assert plan.shared_mem <= twin.TILE_BYTES


plan_cases = st.fixed_dictionaries({
    "planes": st.integers(1, 40), "h": st.integers(1, 120), "w": st.integers(1, 3000),
    "k": st.integers(1, 12), "s": st.integers(1, 4), "d": st.integers(1, 3), "p": st.integers(0, 6),
    "ceil": st.booleans(), "itemsize": st.sampled_from([2, 4, 8]),
    "tile": st.one_of(st.none(), st.integers(1, 40000)),
})


def _forward_staged(r0: int, r1: int, h: int, k: int, s: int, p: int, d: int) -> tuple[int, int]:
    """The x rows pool.cu's forward_source stages for output rows [r0, r1) of one plane."""
    return max(r0 * s - p, 0), min((r1 - 1) * s - p + (k - 1) * d + 1, h)


def _backward_staged(r0: int, r1: int, oh: int, k: int, s: int, p: int, d: int) -> tuple[int, int]:
    """The gout rows pool.cu's backward_source stages for input rows [r0, r1) of one plane."""
    span = (k - 1) * d
    first = (r0 + p - span - 1) // s + 1 if r0 + p > span else 0
    return first, min((r1 - 1 + p) // s, oh - 1) + 1


@settings(max_examples=200, deadline=None)
@given(case=plan_cases)
def test_tile_plans_stage_every_row_their_windows_read(case):
    """For any geometry: the tiles cover every destination row once; a tile's staged rows hold
    every source row its destination rows read (found by brute force over the windows) and fit
    its capacity; shared memory stays within STAGE_LIMIT; None only where one row's span of
    source rows would not fit."""
    planes, h, w, k, s, d, p, itemsize = (case[key] for key in ("planes", "h", "w", "k", "s", "d", "p", "itemsize"))
    if p > k // 2 or h + 2 * p < d * (k - 1) + 1:
        return
    oh, _ = pool_output_shape(h, 1, (k, 1), (s, 1), (p, 0), (d, 1), case["ceil"])
    with tiling(case["tile"]):
        forward = twin._forward_plan(planes, h, w, oh, w, (k, 1), (s, 1), (d, 1), itemsize)
        backward = twin._backward_plan(planes, h, w, oh, w, (k, 1), (s, 1), (d, 1), itemsize, True)
        limit = twin.STAGE_LIMIT
    reads = [{o * s - p + i * d for i in range(k)} & set(range(h)) for o in range(oh)]  # x rows of output row o
    covers = [{o for o in range(oh) if r in reads[o]} for r in range(h)]  # output rows reading x row r
    # the most source rows one destination row may stage: a window's span, a covering range
    one_row = {"forward": min(h, (k - 1) * d + 1), "backward": min(oh, (k - 1) * d // s + 1)}
    for name, plan, rows, src_rows, used, staged, per_elem in [
            ("forward", forward, oh, h, reads, lambda a, b: _forward_staged(a, b, h, k, s, p, d), itemsize),
            ("backward", backward, h, oh, covers, lambda a, b: _backward_staged(a, b, oh, k, s, p, d),
             itemsize + 4)]:
        if plan is None:
            assert one_row[name] * w * per_elem > limit - 16, name
            continue
        assert plan.shared_mem <= limit
        assert plan.capacity * per_elem <= plan.shared_mem <= plan.capacity * per_elem + 16
        if plan.planes > 1:  # whole planes, staged back to back
            assert plan.per_group == 1 and plan.rows == rows and plan.planes <= planes
            assert plan.capacity == plan.planes * src_rows * w
            continue
        assert (plan.per_group - 1) * plan.rows < rows <= plan.per_group * plan.rows
        for r0 in range(0, rows, plan.rows):
            r1 = min(r0 + plan.rows, rows)
            a, b = staged(r0, r1)
            needed = set().union(*used[r0:r1])
            assert needed <= set(range(a, b)), (r0, r1, a, b, sorted(needed))
            assert max(b - a, 0) * w <= plan.capacity
