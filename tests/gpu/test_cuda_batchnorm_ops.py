"""BatchNorm on cuda:0 against the CPU (gpu tests; where no GPU is, on the strict CuPy stand-in):
one BatchNorm2d layer's forward and backward are the batchnorm kernels and nothing else on the
GPU (two launches a training forward, one an eval forward, two a backward), and its output, input
and parameter gradients and running statistics match the CPU's. Before issue 21 the layer was
~25 CuPy kernels a direction (mean, subtract, multiply, sqrt, divide, ... each a launch)."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tinyflow as tf
import tinyflow.nn as nn

pytestmark = [pytest.mark.gpu, pytest.mark.cupy_strict]

TOL = {"float32": {"rtol": 2e-5, "atol": 2e-5}, "float64": {"rtol": 1e-10, "atol": 1e-11}}


def _layer_step(device: str, dtype: Any, x: np.ndarray, up: np.ndarray, affine: bool,
                training: bool, record: bool = False, x_dtype: Any = None) -> dict[str, Any]:
    """A BatchNorm2d of ``dtype`` forward and backward on ``device`` (the input in ``x_dtype``,
    ``dtype`` by default); the results, and with ``record`` the stand-in's calls of each direction."""
    from cuda_tools import strict_cupy

    tf.manual_seed(0)
    bn = nn.BatchNorm2d(x.shape[1], affine=affine).to(dtype).to(device)
    if affine:  # weights other than ones and zeros, so a dropped factor shows
        bn.load_state_dict({**bn.state_dict(), "weight": np.linspace(0.5, 2.0, x.shape[1]),
                            "bias": np.linspace(-1.0, 1.0, x.shape[1])})
    bn.train(training)
    x_dtype = dtype if x_dtype is None else x_dtype
    t = tf.tensor(x, dtype=x_dtype, device=device, requires_grad=True)
    g = tf.tensor(up, dtype=x_dtype, device=device)
    out: dict[str, Any] = {}
    with strict_cupy.record_calls() if record else _Nothing() as out["forward"]:
        y = bn(t)
    with strict_cupy.record_calls() if record else _Nothing() as out["backward"]:
        y.backward(g)
    assert y.dtype == t.dtype and t.grad.dtype == t.dtype
    out["y"], out["gx"] = y.numpy().astype(np.float64), t.grad.numpy().astype(np.float64)
    out["params"] = {name: p.grad.numpy() for name, p in bn.named_parameters()}
    out["buffers"] = {name: b.numpy() for name, b in bn.named_buffers()}
    return out


class _Nothing:
    def __enter__(self) -> list[str]:
        return []

    def __exit__(self, *exc: Any) -> None:
        return None


def _kernels(calls: list[str]) -> list[str]:
    return [str(c) for c in calls if c.startswith("kernel:")]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(("training", "affine"), [(True, True), (True, False), (False, True)],
                         ids=["train", "train-no-affine", "eval"])
def test_batchnorm2d_on_cuda_is_its_kernels_and_matches_cpu(dtype: str, training: bool, affine: bool) -> None:
    from cuda_tools.strict_cupy.launches import tally

    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 3, 6, 5)) * 2 + 1
    up = rng.standard_normal(x.shape)
    cpu = _layer_step("cpu", dtype, x, up, affine, training)
    gpu = _layer_step("cuda:0", dtype, x, up, affine, training, record=True)
    sfx = {"float32": "f32", "float64": "f64"}[dtype]
    forward = ["stats", "normalize"] if training else ["normalize"]
    assert _kernels(gpu["forward"]) == [f"kernel:batch_norm_{k}_{sfx}" for k in forward]
    # the one other launch of a training forward: BatchNorm2d's num_batches_tracked += 1 (PyTorch's too)
    assert tally(gpu["forward"]).kernels == len(forward) + training, tally(gpu["forward"]).table()
    backward = ["reduce", "elemt"] if training or affine else ["elemt"]
    assert _kernels(gpu["backward"]) == [f"kernel:batch_norm_backward_{k}_{sfx}" for k in backward]
    assert tally(gpu["backward"]).kernels == len(backward), tally(gpu["backward"]).table()
    tol = TOL[dtype]
    np.testing.assert_allclose(gpu["y"], cpu["y"], **tol, err_msg="y")
    np.testing.assert_allclose(gpu["gx"], cpu["gx"], **tol, err_msg="input gradient")
    assert gpu["params"].keys() == cpu["params"].keys() == ({"weight", "bias"} if affine else set())
    for name in cpu["params"]:
        np.testing.assert_allclose(gpu["params"][name], cpu["params"][name], **tol, err_msg=name)
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        np.testing.assert_allclose(gpu["buffers"][name], cpu["buffers"][name], **tol, err_msg=name)


def test_bfloat16_input_to_a_float32_layer_runs_the_bf16_kernels_with_float32_statistics() -> None:
    """PyTorch's mixed batch norm (a half activation, float32 weights and running statistics, as a
    hand-converted model or autocast gives): the bf16 kernels, no cast launches, a bf16 output and
    input gradient, float32 parameter gradients and running statistics."""
    from cuda_tools.strict_cupy.launches import tally

    bf16 = pytest.importorskip("ml_dtypes").bfloat16
    rng = np.random.default_rng(2)
    x = (rng.standard_normal((3, 4, 5, 5)) * 2 + 1).astype(bf16).astype(np.float64)  # exact in bf16
    up = rng.standard_normal(x.shape).astype(bf16).astype(np.float64)
    cpu = _layer_step("cpu", "float32", x, up, True, True, x_dtype=bf16)
    gpu = _layer_step("cuda:0", "float32", x, up, True, True, record=True, x_dtype=bf16)
    assert _kernels(gpu["forward"]) == ["kernel:batch_norm_stats_bf16", "kernel:batch_norm_normalize_bf16"]
    assert _kernels(gpu["backward"]) == ["kernel:batch_norm_backward_reduce_bf16",
                                         "kernel:batch_norm_backward_elemt_bf16"]
    assert tally(gpu["forward"]).kernels == 3 and tally(gpu["backward"]).kernels == 2
    np.testing.assert_allclose(gpu["y"], cpu["y"], rtol=2**-7, atol=2**-7, err_msg="y")
    np.testing.assert_allclose(gpu["gx"], cpu["gx"], rtol=2**-7, atol=2**-7, err_msg="input gradient")
    for name in ("weight", "bias"):
        np.testing.assert_allclose(gpu["params"][name], cpu["params"][name], rtol=1e-5, atol=1e-5, err_msg=name)
    for name in ("running_mean", "running_var"):
        assert gpu["buffers"][name].dtype == np.float32
        np.testing.assert_allclose(gpu["buffers"][name], cpu["buffers"][name], rtol=1e-5, atol=1e-6, err_msg=name)
