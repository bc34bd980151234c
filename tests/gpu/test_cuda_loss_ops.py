"""Half-precision cross_entropy, embedding and all-reduce on cuda reach their fp16/bf16 kernels
(csrc/loss.cu, embedding.cu, allreduce.cu), not the xp reference's many small launches, and agree
with the same ops on the CPU.

They run on the strict CuPy stand-in (``record_calls`` lists each launch), also on GPU machines:
what they check is which kernels run, which only the stand-in records.
"""
from __future__ import annotations

import numpy as np
import pytest

import tinyflow as tf
import tinyflow.nn.functional as F
from cuda_tools import strict_cupy
from tinyflow.parallel import allreduce, run_local

pytestmark = [pytest.mark.cupy_strict]

ml_dtypes = pytest.importorskip("ml_dtypes")
HALF = {"bf16": ml_dtypes.bfloat16, "f16": np.float16}
TOL = {"bf16": {"rtol": 1.6e-2, "atol": 1e-4}, "f16": {"rtol": 2e-3, "atol": 1e-5}}
REFERENCE_CALLS = ("cupy.exp", "cupy.log", ".at")  # the xp reference's ufuncs and scatter-adds


def kernels(names: list[str]) -> list[str]:
    return [n.removeprefix("kernel:") for n in names if n.startswith("kernel:")]


def assert_no_reference(names: list[str]) -> None:
    slow = [n for n in names if any(r in n for r in REFERENCE_CALLS)]
    assert not slow, f"the xp reference ran on the device: {slow}"


def f64(t: tf.Tensor) -> np.ndarray:
    return t.numpy().astype(np.float64)


def cross_entropy_on(device: str, dtype, logits: np.ndarray, target: np.ndarray, **kw):
    """Loss and logits gradient of F.cross_entropy on ``device``, and the calls made there."""
    x = tf.tensor(logits, dtype=dtype, device=device, requires_grad=True)
    y = tf.tensor(target, device=device)
    with strict_cupy.record_calls() as names:
        loss = F.cross_entropy(x, y, **kw)
        loss.backward(tf.ones_like(loss))
    return loss, x.grad, names


@pytest.mark.parametrize("half", ["bf16", "f16"])
@pytest.mark.parametrize("case", [
    {},
    {"label_smoothing": 0.1, "weight": True},
    {"reduction": "sum", "ignore_index": 2},
    {"reduction": "none", "spatial": True},
])
def test_half_cross_entropy_launches_half_kernels(half, case):
    """Explicit half logits (outside autocast) run softmax_cross_entropy_forward/backward_<half>
    and nothing of the reference; loss and gradient agree with the CPU's."""
    dtype = HALF[half]
    rng = np.random.default_rng(0)
    shape = (4, 37, 3) if case.get("spatial") else (6, 37)
    logits = 4 * rng.standard_normal(shape)
    target = rng.integers(0, 37, (shape[0],) + shape[2:])
    target.reshape(-1)[1] = 2
    kw = {k: v for k, v in case.items() if k not in ("weight", "spatial")}
    weight = rng.uniform(0.5, 2, 37)
    results = {}
    for device in ("cpu", "cuda:0"):
        if case.get("weight"):
            kw["weight"] = tf.tensor(weight, dtype=dtype, device=device)
        results[device] = cross_entropy_on(device, dtype, logits, target, **kw)
    (loss_cpu, grad_cpu, _), (loss, grad, names) = results["cpu"], results["cuda:0"]
    assert kernels(names) == [f"softmax_cross_entropy_forward_{half}",
                              f"softmax_cross_entropy_backward_{half}"], kernels(names)
    assert_no_reference(names)
    assert loss.dtype == grad.dtype == np.dtype(dtype)
    np.testing.assert_allclose(f64(loss), f64(loss_cpu), **TOL[half])
    np.testing.assert_allclose(f64(grad), f64(grad_cpu), **TOL[half])


def test_half_cross_entropy_mean_of_a_batch_is_not_a_stalled_half_sum():
    """512 losses of log(2) = 0.69: their bfloat16 running sum stops at 256 (a step of 2 there),
    which would make the mean 0.5; the batch's sum is taken in fp32, as PyTorch."""
    rng = np.random.default_rng(1)
    logits, target = np.zeros((512, 2)), rng.integers(0, 2, 512)
    loss, grad, _ = cross_entropy_on("cuda:0", HALF["bf16"], logits, target)
    assert abs(loss.item() - np.log(2)) < 0.01, loss.item()
    np.testing.assert_allclose(np.abs(f64(grad)), 0.5 / 512, rtol=1e-2)


def test_autocast_keeps_cross_entropy_in_float32():
    """PyTorch's autocast policy: cross_entropy of bf16 logits inside autocast computes in fp32."""
    rng = np.random.default_rng(2)
    x = tf.tensor(rng.standard_normal((5, 11)), dtype=HALF["bf16"], device="cuda:0",
                  requires_grad=True)
    y = tf.tensor(rng.integers(0, 11, 5), device="cuda:0")
    with strict_cupy.record_calls() as names:
        with tf.autocast("cuda", dtype=tf.bfloat16):
            loss = F.cross_entropy(x, y)
        loss.backward()
    assert loss.dtype == np.float32 and x.grad.dtype == np.dtype(HALF["bf16"])
    assert {"softmax_cross_entropy_forward_f32", "softmax_cross_entropy_backward_f32"} <= set(kernels(names))


@pytest.mark.parametrize("half", ["bf16", "f16"])
def test_half_embedding_backward_launches_half_kernels(half):
    """The scatter into an fp32 accumulator and its one rounding, no add.at; 300 repeats of one id
    add up exactly as on the CPU (which also accumulates half gradients in fp32)."""
    dtype = HALF[half]
    rng = np.random.default_rng(3)
    ids = rng.integers(0, 9, (30, 12))
    ids[:25] = 4  # id 4: 300 repeats
    table = rng.standard_normal((9, 16))
    upstream = rng.standard_normal((30, 12, 16))
    grads = {}
    for device in ("cpu", "cuda:0"):
        w = tf.tensor(table, dtype=dtype, device=device, requires_grad=True)
        with strict_cupy.record_calls() as names:
            out = F.embedding(tf.tensor(ids, device=device), w, padding_idx=0)
            (out * tf.tensor(upstream, dtype=dtype, device=device)).sum().backward()
        grads[device] = (w.grad, names)
    (cpu, _), (grad, names) = grads["cpu"], grads["cuda:0"]
    assert [k for k in kernels(names) if k.startswith("embedding")] == [
        f"embedding_backward_{half}", f"embedding_grad_round_{half}"], kernels(names)
    assert_no_reference(names)
    assert grad.dtype == np.dtype(dtype) and (f64(grad)[0] == 0).all()
    np.testing.assert_allclose(f64(grad), f64(cpu), **TOL[half])


@pytest.mark.parametrize("algorithm", ["ring", "tree"])
def test_bf16_allreduce_mean_runs_the_bf16_kernels(cp, algorithm):
    """A bfloat16 buffer's all-reduce on device: reduce_add_bf16 for each received chunk and
    reduce_scale_bf16 for the mean, within a few bf16 steps of the fp32 mean."""
    rng = np.random.default_rng(4)
    host = [rng.standard_normal(1001).astype(HALF["bf16"]) for _ in range(3)]

    def fn(comm):
        buf = cp.asarray(host[comm.rank])
        with strict_cupy.record_calls() as names:
            allreduce(buf, comm, algorithm=algorithm, op="mean", segment_bytes=512)
        return cp.asnumpy(buf), kernels(names)

    want = np.mean([h.astype(np.float32) for h in host], axis=0)
    for got, launched in run_local(fn, 3, timeout=60, device="cuda:0"):
        assert got.dtype == np.dtype(HALF["bf16"])
        assert "reduce_scale_bf16" in launched and set(launched) <= {"reduce_add_bf16",
                                                                     "reduce_scale_bf16"}
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=3e-2, atol=2e-2)
