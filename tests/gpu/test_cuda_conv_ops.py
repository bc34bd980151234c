"""conv2d and relu on cuda:0 against the CPU, in float32 and bfloat16, forward and backward (gpu
tests; where no GPU is, on the strict CuPy stand-in). Each step must be its named .cu kernels of
the input's dtype: before issue 21 a bf16 conv fell back to the reference's per-tap slab loop on
the GPU, and ReLU was four elementwise kernels and a bool temporary."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tinyflow as tf
import tinyflow.nn.functional as F
from tinyflow.ops.conv import Conv2dFunction

pytestmark = [pytest.mark.gpu, pytest.mark.cupy_strict]

ml_dtypes = pytest.importorskip("ml_dtypes")
BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = [np.dtype(np.float32), BF16]
SUFFIX = {"float32": "f32", "bfloat16": "bf16"}
TOL = {"float32": {"rtol": 1e-4, "atol": 1e-5}, "bfloat16": {"rtol": 2e-2, "atol": 2e-2}}


def _kernels(calls: list[str]) -> list[str]:
    return [c.removeprefix("kernel:") for c in calls if c.startswith("kernel:")]


def _run(op: Any, arrays: list[np.ndarray], device: str, seed: int = 9) -> tuple:
    """op(*tensors) and the gradients of <op, up> on ``device``, with the stand-in's calls of each
    direction (on the CPU the lists stay empty)."""
    from cuda_tools import strict_cupy

    tensors = [tf.tensor(a, device=device, requires_grad=True) for a in arrays]
    calls: dict[str, list[str]] = {"forward": [], "backward": []}
    recording = device != "cpu"
    with strict_cupy.record_calls() if recording else _nothing() as calls["forward"]:
        y = op(*tensors)
    up = np.random.default_rng(seed).standard_normal(y.shape).astype(arrays[0].dtype)
    with strict_cupy.record_calls() if recording else _nothing() as calls["backward"]:
        y.backward(tf.tensor(up, device=device))
    assert y.dtype == arrays[0].dtype and all(t.grad.dtype == arrays[0].dtype for t in tensors)
    return y.numpy(), [t.grad.numpy() for t in tensors], calls


class _nothing:
    def __enter__(self) -> list[str]:
        return []

    def __exit__(self, *exc: Any) -> None:
        return None


def _close(got: np.ndarray, want: np.ndarray, dtype: np.dtype, what: str) -> None:
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), err_msg=what, **TOL[dtype.name])


CONVS = {
    # name: (x shape, w shape, F.conv2d keywords); K = C*kh*kw
    "3x3 pad K=27 (padded to 32)": ((2, 3, 9, 8), (4, 3, 3, 3), dict(padding=1)),
    "11x11 s4 p2 K=363 (AlexNet conv1)": ((2, 3, 23, 21), (5, 3, 11, 11), dict(stride=4, padding=2)),
    "5x3 s(2,1) d(1,2) K=30": ((2, 2, 11, 10), (3, 2, 5, 3), dict(stride=(2, 1), padding=(2, 1), dilation=(1, 2))),
    "groups=2 K=16 per group": ((2, 4, 7, 7), (6, 2, 2, 4), dict(groups=2, padding=(1, 0))),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "bf16"])
@pytest.mark.parametrize("name", list(CONVS))
def test_conv2d_on_cuda_is_its_kernels_and_matches_cpu(name: str, dtype: np.dtype) -> None:
    xs, ws, kw = CONVS[name]
    rng = np.random.default_rng(len(name))
    arrays = [rng.standard_normal(xs).astype(dtype), (rng.standard_normal(ws) * 0.3).astype(dtype),
              rng.standard_normal(ws[0]).astype(dtype)]
    op = lambda x, w, b: F.conv2d(x, w, b, **kw)  # noqa: E731
    y_cpu, g_cpu, _ = _run(op, arrays, "cpu")
    y_gpu, g_gpu, calls = _run(op, arrays, "cuda:0")
    sfx = SUFFIX[dtype.name]
    # forward: the columns, the GEMM(s) (cuBLAS, not a .cu kernel), the NCHW copy with the bias
    assert _kernels(calls["forward"]) == [f"im2col_{sfx}", f"conv_output_{sfx}"]
    # backward: the gradient's copy with the bias gradient, the columns again, their adjoint
    assert _kernels(calls["backward"]) == [f"conv_output_grad_{sfx}", f"im2col_{sfx}", f"col2im_{sfx}"]
    _close(y_gpu, y_cpu, dtype, "output")
    for what, got, want in zip(("x", "w", "b"), g_gpu, g_cpu):
        _close(got, want, dtype, f"gradient of {what}")


def test_the_gpu_gemm_runs_with_k_padded_to_a_multiple_of_8(monkeypatch) -> None:
    """im2col writes 32 rows for K = 27 (the last 5 zero) on the GPU, and the GEMMs read them;
    the results equal the CPU's, which runs with K = 27."""
    import tinyflow_cuda.kernels as cuk

    rows = []
    im2col = cuk.im2col

    def spy(x, *args, out=None):
        rows.append(None if out is None else out.shape[0])
        return im2col(x, *args, out=out)

    monkeypatch.setattr(cuk, "im2col", spy)
    arrays = [np.random.default_rng(0).standard_normal(s).astype(np.float32) for s in ((2, 3, 6, 5), (4, 3, 3, 3), (4,))]
    y_cpu, g_cpu, _ = _run(lambda x, w, b: F.conv2d(x, w, b, padding=1), arrays, "cpu")
    assert rows == []  # the CPU has its own kernel module
    y_gpu, g_gpu, _ = _run(lambda x, w, b: F.conv2d(x, w, b, padding=1), arrays, "cuda:0")
    assert rows == [32, 32]  # forward and backward
    np.testing.assert_allclose(y_gpu, y_cpu, rtol=1e-5, atol=1e-5)
    for got, want in zip(g_gpu, g_cpu):
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "bf16"])
def test_relu_is_one_kernel_each_way_and_matches_cpu(dtype: np.dtype) -> None:
    from cuda_tools.strict_cupy.launches import tally

    x = np.random.default_rng(3).standard_normal((3, 5, 7)).astype(dtype)
    x[0, 0, :3] = [0.0, -0.0, np.nan]
    y_cpu, (g_cpu,), _ = _run(F.relu, [x], "cpu")
    y_gpu, (g_gpu,), calls = _run(F.relu, [x], "cuda:0")
    sfx = SUFFIX[dtype.name]
    assert _kernels(calls["forward"]) == [f"relu_forward_{sfx}"]
    assert tally(calls["forward"]).kernels == 1, tally(calls["forward"]).table()
    assert _kernels(calls["backward"]) == [f"relu_backward_{sfx}"]
    assert tally(calls["backward"]).kernels <= 2, tally(calls["backward"]).table()  # + the engine's bookkeeping
    np.testing.assert_array_equal(y_gpu.astype(np.float64), y_cpu.astype(np.float64))  # exact both ways
    np.testing.assert_array_equal(g_gpu.astype(np.float64), g_cpu.astype(np.float64))


def test_relu_layer_inplace_keeps_pytorch_semantics_on_cuda() -> None:
    """nn.ReLU(inplace=True) still returns max(x, 0) with the same gradient on the GPU."""
    x = np.random.default_rng(4).standard_normal((4, 6)).astype(np.float32)
    layer = tf.nn.ReLU(inplace=True)
    y_cpu, (g_cpu,), _ = _run(lambda t: layer(t * 1.0), [x], "cpu")
    y_gpu, (g_gpu,), _ = _run(lambda t: layer(t * 1.0), [x], "cuda:0")
    np.testing.assert_array_equal(y_gpu, y_cpu)
    np.testing.assert_array_equal(g_gpu, g_cpu)
    assert repr(layer) == "ReLU(inplace=True)"


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "bf16"])
def test_conv_with_fused_relu_matches_conv_then_relu(dtype: np.dtype) -> None:
    """Conv2dFunction(relu=True): the ReLU in conv_output's copy, its mask in conv_output_grad's;
    the same values as conv2d followed by relu on the CPU, and no relu kernel of its own."""
    rng = np.random.default_rng(5)
    arrays = [rng.standard_normal((2, 3, 8, 7)).astype(dtype), (rng.standard_normal((4, 3, 3, 3)) * 0.3).astype(dtype),
              rng.standard_normal(4).astype(dtype)]
    geometry = dict(stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1)
    y_cpu, g_cpu, _ = _run(lambda x, w, b: F.relu(F.conv2d(x, w, b, padding=1)), arrays, "cpu")
    fused = lambda x, w, b: Conv2dFunction.apply(x, w, b, relu=True, **geometry)  # noqa: E731
    y_gpu, g_gpu, calls = _run(fused, arrays, "cuda:0")
    y_fused_cpu, g_fused_cpu, _ = _run(fused, arrays, "cpu")
    sfx = SUFFIX[dtype.name]
    assert _kernels(calls["forward"]) == [f"im2col_{sfx}", f"conv_output_{sfx}"]
    assert _kernels(calls["backward"]) == [f"conv_output_grad_{sfx}", f"im2col_{sfx}", f"col2im_{sfx}"]
    assert (y_cpu > 0).any() and (y_cpu == 0).any()  # the mask matters
    for y in (y_gpu, y_fused_cpu):
        _close(y, y_cpu, dtype, "output")
    for grads in (g_gpu, g_fused_cpu):
        for what, got, want in zip(("x", "w", "b"), grads, g_cpu):
            _close(got, want, dtype, f"gradient of {what}")


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "bf16"])
def test_conv2d_falls_back_to_the_direct_kernels_where_a_stage_does_not_fit(dtype: np.dtype) -> None:
    """A 9x9 / 9 patchify conv (its taps 18 or 36 bytes apart: staging would move more sectors
    than reading them) takes im2col_direct in f32 and im2col_staged in bf16; image rows of 1100
    pixels (over a col2im tile) take col2im_direct. Both match the CPU."""
    rng = np.random.default_rng(6)
    cases = [((2, 3, 19, 20), (4, 3, 9, 9), dict(stride=9), "im2col_direct" if dtype == np.float32 else "im2col_staged", "col2im"),
             ((1, 2, 3, 1100), (3, 2, 3, 3), dict(padding=1), "im2col", "col2im_direct")]
    for xs, ws, kw, forward_im2col, backward_col2im in cases:
        arrays = [rng.standard_normal(xs).astype(dtype), (rng.standard_normal(ws) * 0.3).astype(dtype),
                  rng.standard_normal(ws[0]).astype(dtype)]
        op = lambda x, w, b: F.conv2d(x, w, b, **kw)  # noqa: E731
        y_cpu, g_cpu, _ = _run(op, arrays, "cpu")
        y_gpu, g_gpu, calls = _run(op, arrays, "cuda:0")
        sfx = SUFFIX[dtype.name]
        assert _kernels(calls["forward"]) == [f"{forward_im2col}_{sfx}", f"conv_output_{sfx}"]
        assert _kernels(calls["backward"]) == [f"conv_output_grad_{sfx}", f"{forward_im2col}_{sfx}",
                                               f"{backward_col2im}_{sfx}"]
        _close(y_gpu, y_cpu, dtype, "output")
        for what, got, want in zip(("x", "w", "b"), g_gpu, g_cpu):
            # in bf16, an x gradient sums 27 products that the GPU's GEMM and the CPU's round apart
            tol = dict(rtol=2e-2, atol=6e-2) if dtype == BF16 else TOL[dtype.name]
            np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                       err_msg=f"gradient of {what}", **tol)
