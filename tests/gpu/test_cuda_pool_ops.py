"""max_pool2d, avg_pool2d, adaptive_avg_pool2d and local_response_norm on cuda:0 against the CPU,
in float32 and bfloat16, forward and backward (gpu tests; where no GPU is, on the strict CuPy
stand-in). Each direction must be its one .cu kernel of the input's dtype: before issue 21 a
bf16 pool or LRN fell back to the reference's per-tap loop on the GPU (a launch per tap)."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tinyflow as tf
import tinyflow.nn.functional as F

pytestmark = [pytest.mark.gpu, pytest.mark.cupy_strict]

ml_dtypes = pytest.importorskip("ml_dtypes")
BF16 = np.dtype(ml_dtypes.bfloat16)
SUFFIX = {"float32": "f32", "bfloat16": "bf16"}
TOL = {"float32": {"rtol": 1e-5, "atol": 1e-6}, "bfloat16": {"rtol": 1e-2, "atol": 1e-3}}

OPS: dict[str, tuple[Callable[[Any], Any], str]] = {
    # name: (op, the kernel family prefix its forward and backward launch)
    "max_pool2d 3x3 s2": (lambda t: F.max_pool2d(t, 3, 2), "maxpool2d"),
    "max_pool2d pad ceil dilation": (lambda t: F.max_pool2d(t, (3, 2), (2, 1), 1, dilation=(1, 2), ceil_mode=True),
                                     "maxpool2d"),
    "avg_pool2d pad": (lambda t: F.avg_pool2d(t, 3, 2, 1), "avgpool2d"),
    "avg_pool2d ceil no-pad-count": (lambda t: F.avg_pool2d(t, 2, 3, 1, ceil_mode=True, count_include_pad=False),
                                     "avgpool2d"),
    "adaptive_avg_pool2d even": (lambda t: F.adaptive_avg_pool2d(t, (3, 4)), "avgpool2d"),  # 9x8 -> 3x4
    "local_response_norm": (lambda t: F.local_response_norm(t, 5, alpha=1e-2, beta=0.75, k=2.0), "lrn"),
}


def _run(op: Callable[[Any], Any], x: np.ndarray, up_seed: int, device: str, record: bool = False):
    """op(x) and d(op(x) . up)/dx on ``device``; with ``record``, the stand-in's calls of each
    direction as well."""
    from cuda_tools import strict_cupy

    t = tf.tensor(x, device=device, requires_grad=True)
    calls: dict[str, list[str]] = {}
    if record:
        with strict_cupy.record_calls() as calls["forward"]:
            y = op(t)
    else:
        y = op(t)
    up = np.random.default_rng(up_seed).standard_normal(y.shape).astype(x.dtype)
    g = tf.tensor(up, device=device)
    if record:
        with strict_cupy.record_calls() as calls["backward"]:
            y.backward(g)
    else:
        y.backward(g)
    assert y.dtype == x.dtype and t.grad.dtype == x.dtype
    return y.numpy(), t.grad.numpy(), calls


@pytest.mark.parametrize("dtype", [np.dtype(np.float32), BF16], ids=["f32", "bf16"])
@pytest.mark.parametrize("name", list(OPS))
def test_op_on_cuda_is_its_kernel_and_matches_cpu(name: str, dtype: np.dtype) -> None:
    from cuda_tools.strict_cupy.launches import tally

    op, family = OPS[name]
    x = np.random.default_rng(0).standard_normal((2, 6, 9, 8)).astype(dtype)
    y_cpu, gx_cpu, _ = _run(op, x, 1, "cpu")
    y_gpu, gx_gpu, calls = _run(op, x, 1, "cuda:0", record=True)
    sfx = SUFFIX[dtype.name]
    # forward: the one kernel, nothing else on the GPU
    assert [c for c in calls["forward"] if c.startswith("kernel:")] == [f"kernel:{family}_forward_{sfx}"]
    assert tally(calls["forward"]).kernels == 1, tally(calls["forward"]).table()
    # backward: its kernel, and no per-tap slab loop around it (a handful of launches at most:
    # the engine's gradient bookkeeping)
    assert [c for c in calls["backward"] if c.startswith("kernel:")] == [f"kernel:{family}_backward_{sfx}"]
    assert tally(calls["backward"]).kernels <= 3, tally(calls["backward"]).table()
    np.testing.assert_allclose(y_gpu.astype(np.float64), y_cpu.astype(np.float64), **TOL[dtype.name])
    np.testing.assert_allclose(gx_gpu.astype(np.float64), gx_cpu.astype(np.float64), **TOL[dtype.name])


def test_adaptive_avg_pool_uneven_windows_still_match_cpu() -> None:
    """Windows that do not tile the input (7 -> 3) keep the averaging-matrix GEMMs."""
    x = np.random.default_rng(2).standard_normal((2, 3, 7, 5)).astype(np.float32)
    op = lambda t: F.adaptive_avg_pool2d(t, (3, 2))  # noqa: E731
    y_cpu, gx_cpu, _ = _run(op, x, 3, "cpu")
    y_gpu, gx_gpu, _ = _run(op, x, 3, "cuda:0")
    np.testing.assert_allclose(y_gpu, y_cpu, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gx_gpu, gx_cpu, rtol=1e-5, atol=1e-6)


PATHS: dict[str, tuple[tuple[int, ...], Callable[[Any], Any], str]] = {
    # name: (x shape, op, the kernel prefix of both directions). A 120x80 plane (38 KB in f32,
    # 19 KB in bf16) is over a tile's 16 KB: tiles of a few rows, halos staged twice. A 7x1
    # window over rows of 4000 needs 7 staged rows (56 KB in bf16) for one output row, past the
    # 48 KB a tile may take: the flat kernels, both ways (backward stages 7 gout and argmax rows).
    "max_pool2d row tiles": ((1, 2, 120, 80), lambda t: F.max_pool2d(t, 3, 2, 1), "maxpool2d"),
    "avg_pool2d row tiles": ((1, 2, 120, 80), lambda t: F.avg_pool2d(t, 3, 2, 1, ceil_mode=True), "avgpool2d"),
    "max_pool2d flat": ((1, 1, 16, 4000), lambda t: F.max_pool2d(t, (7, 1), 1), "maxpool2d_flat"),
    "avg_pool2d flat": ((1, 1, 16, 4000), lambda t: F.avg_pool2d(t, (7, 1), 1), "avgpool2d_flat"),
}


@pytest.mark.parametrize("dtype", [np.dtype(np.float32), BF16], ids=["f32", "bf16"])
@pytest.mark.parametrize("name", list(PATHS))
def test_large_planes_and_windows_take_their_path_and_match_cpu(name: str, dtype: np.dtype) -> None:
    """Planes too large for one tile run the tiled kernels over tiles of rows; windows too tall
    for shared memory run the flat kernels; either way one kernel a direction, as on the CPU."""
    shape, op, family = PATHS[name]
    x = np.random.default_rng(4).standard_normal(shape).astype(dtype)
    y_cpu, gx_cpu, _ = _run(op, x, 5, "cpu")
    y_gpu, gx_gpu, calls = _run(op, x, 5, "cuda:0", record=True)
    sfx = SUFFIX[dtype.name]
    base, _, flat = family.partition("_")
    suffix = f"_{flat}" if flat else ""
    for direction in ("forward", "backward"):
        kernels = [c for c in calls[direction] if c.startswith("kernel:")]
        assert kernels == [f"kernel:{base}_{direction}{suffix}_{sfx}"], kernels
    np.testing.assert_allclose(y_gpu.astype(np.float64), y_cpu.astype(np.float64), **TOL[dtype.name])
    np.testing.assert_allclose(gx_gpu.astype(np.float64), gx_cpu.astype(np.float64), **TOL[dtype.name])
