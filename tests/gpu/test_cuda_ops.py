"""Every op forward and backward on cuda against the same op on cpu (gpu tests).

Each case builds its inputs once in float64 NumPy, runs the op on the CPU and on cuda:0 (with
the same values), backpropagates the same random upstream gradient, and compares the outputs
and every input gradient. float64 makes the comparison tight: any difference is a bug in the
CUDA path, not rounding. Models are imported lazily inside the tests that need them.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tinyflow as tf
import tinyflow.nn.functional as F

pytestmark = [pytest.mark.gpu, pytest.mark.cupy_strict]


def _compare(op: Callable[..., Any], arrays: list[np.ndarray], grads: list[bool] | None = None,
             rtol: float = 1e-9, atol: float = 1e-10, seed: int = 0) -> None:
    """Run ``op`` on cpu and cuda tensors made from ``arrays``; compare outputs and gradients."""
    grads = grads if grads is not None else [a.dtype.kind == "f" for a in arrays]
    results = {}
    for device in ("cpu", "cuda:0"):
        inputs = [tf.tensor(a, device=device, requires_grad=g) for a, g in zip(arrays, grads)]
        out = op(*inputs)
        outs = out if isinstance(out, (tuple, list)) else (out,)
        outs = [o for o in outs if isinstance(o, tf.Tensor)]
        assert all(o.device == tf.Device(device) for o in outs), f"{device}: output left the device"
        rng = np.random.default_rng(seed)
        total = None
        for o in outs:
            if o.dtype.kind != "f" or not o.requires_grad:
                continue
            upstream = tf.tensor(rng.standard_normal(o.shape), dtype=o.dtype, device=device)
            term = (o * upstream).sum()
            total = term if total is None else total + term
        if total is not None:
            total.backward()
        results[device] = ([o.numpy() for o in outs],
                           [None if not g else (t.grad.numpy() if t.grad is not None else None)
                            for t, g in zip(inputs, grads)])
    (cpu_out, cpu_grads), (gpu_out, gpu_grads) = results["cpu"], results["cuda:0"]
    for i, (c, g) in enumerate(zip(cpu_out, gpu_out)):
        np.testing.assert_allclose(g, c, rtol=rtol, atol=atol, err_msg=f"output {i}")
    for i, (c, g) in enumerate(zip(cpu_grads, gpu_grads)):
        if c is None:
            assert g is None, f"input {i}: gradient on cuda but not on cpu"
            continue
        np.testing.assert_allclose(g, c, rtol=rtol, atol=atol, err_msg=f"gradient of input {i}")


def rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed + sum(shape)).standard_normal(shape)


# ---- elementwise, reductions, shapes, linear algebra ---------------------------------------------
ELEMENTWISE = {
    "add": lambda a, b: a + b,
    "sub_broadcast": lambda a, b: a - b[0],
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / (b * b + 1.0),
    "pow": lambda a, b: (a * a + 1.0) ** 1.5,
    "exp_log": lambda a, b: (a.exp() + b.exp()).log(),
    "relu": lambda a, b: F.relu(a) * b,
    "sigmoid_tanh": lambda a, b: F.sigmoid(a) + F.tanh(b),
    "leaky_gelu": lambda a, b: F.leaky_relu(a, 0.1) + F.gelu(b),
    "softmax": lambda a, b: F.softmax(a, dim=-1) * b,
    "log_softmax_dim0": lambda a, b: F.log_softmax(a, dim=0),
    "logsumexp": lambda a, b: F.logsumexp(a, dim=1),
    "sum_mean": lambda a, b: a.sum(0) + b.mean(1).reshape(-1, 1),
    "max": lambda a, b: a.max(1),
    "matmul": lambda a, b: a @ b.transpose(1, 0),
    "reshape_cat": lambda a, b: tf.cat([a.reshape(-1), b.reshape(-1)]),
    "stack_index": lambda a, b: tf.stack([a, b])[:, 1:, ::2],
    "mse": lambda a, b: F.mse_loss(a, b),
}


@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
def test_elementwise_reduce_shape_ops(name):
    _compare(ELEMENTWISE[name], [rand(4, 6, seed=1), rand(4, 6, seed=2)])


def test_linear_batched():
    _compare(lambda x, w, b: F.linear(x, w, b), [rand(3, 5, 7), rand(4, 7), rand(4)])


# ---- convolution and pooling ---------------------------------------------------------------------
@pytest.mark.parametrize("stride,padding,dilation,groups", [
    (1, 0, 1, 1), (2, 1, 1, 1), (1, 2, 2, 1), (4, 2, 1, 1), (1, 1, 1, 2), (2, 0, 1, 4),
])
def test_conv2d(stride, padding, dilation, groups):
    _compare(lambda x, w, b: F.conv2d(x, w, b, stride=stride, padding=padding, dilation=dilation,
                                      groups=groups),
             [rand(2, 4, 11, 9), rand(8, 4 // groups, 3, 3), rand(8)])


@pytest.mark.parametrize("kernel,stride,padding,ceil_mode", [
    (3, 2, 0, False), (3, 2, 1, True), (2, 2, 0, False), (3, 1, 1, False),
])
def test_max_and_avg_pool(kernel, stride, padding, ceil_mode):
    x = rand(2, 3, 9, 8)
    _compare(lambda t: F.max_pool2d(t, kernel, stride, padding, ceil_mode=ceil_mode), [x])
    _compare(lambda t: F.avg_pool2d(t, kernel, stride, padding, ceil_mode=ceil_mode), [x])


def test_adaptive_avg_pool():
    _compare(lambda t: F.adaptive_avg_pool2d(t, (3, 2)), [rand(2, 3, 7, 5)])


def test_local_response_norm():
    _compare(lambda t: F.local_response_norm(t, 5, alpha=1e-2, beta=0.75, k=2.0),
             [rand(2, 7, 4, 3)])


def test_batch_norm_train_and_eval():
    x, w, b = rand(4, 3, 5, 5), rand(3), rand(3)
    for training in (True, False):
        def op(t, wt, bt, training=training):
            running_mean = tf.zeros(3, dtype=tf.float64, device=t.device)
            running_var = tf.ones(3, dtype=tf.float64, device=t.device)
            return F.batch_norm(t, running_mean, running_var, wt, bt, training=training)

        _compare(op, [x, w, b])


def test_dropout_zero_and_statistics():
    _compare(lambda t: F.dropout(t, p=0.0, training=True), [rand(5, 7)])
    x = tf.ones((256, 512), device="cuda:0")
    y = F.dropout(x, p=0.3, training=True).numpy()
    assert set(np.unique(y)) <= {0.0, np.float32(1 / 0.7)}
    assert abs((y == 0).mean() - 0.3) < 0.01


# ---- losses, embedding, recurrent layers -------------------------------------------------------
@pytest.mark.parametrize("kwargs", [{}, {"label_smoothing": 0.1}, {"ignore_index": 2},
                                    {"reduction": "sum"}])
def test_cross_entropy(kwargs):
    target = np.array([0, 2, 4, 1, 2])
    _compare(lambda z, t: F.cross_entropy(z, t, **kwargs), [rand(5, 6), target], grads=[True, False])


def test_embedding_with_repeats_and_padding():
    idx = np.array([[1, 3, 3], [0, 1, 1]])
    _compare(lambda i, w: F.embedding(i, w, padding_idx=0), [idx, rand(5, 4)], grads=[False, True])


@pytest.mark.parametrize("cell", ["LSTM", "GRU"])
@pytest.mark.parametrize("layers,bidirectional,batch_first", [(1, False, False), (2, True, True)])
def test_recurrent_layers(cell, layers, bidirectional, batch_first):
    tf.manual_seed(0)
    cpu = getattr(tf.nn, cell)(5, 6, num_layers=layers, bidirectional=bidirectional,
                               batch_first=batch_first).to(tf.float64)
    tf.manual_seed(0)
    gpu = getattr(tf.nn, cell)(5, 6, num_layers=layers, bidirectional=bidirectional,
                               batch_first=batch_first).to(tf.float64).to("cuda:0")
    x = rand(4, 3, 5)
    outs = {}
    for name, model in (("cpu", cpu), ("cuda:0", gpu)):
        t = tf.tensor(x, device=name, requires_grad=True)
        out, state = model(t)
        h = state[0] if isinstance(state, tuple) else state
        (out.sum() + (h * h).sum()).backward()
        outs[name] = (out.numpy(), h.numpy(), t.grad.numpy(),
                      {k: p.grad.numpy() for k, p in model.named_parameters()})
    for a, b in zip(outs["cpu"][:3], outs["cuda:0"][:3]):
        np.testing.assert_allclose(b, a, rtol=1e-9, atol=1e-10)
    for k, g in outs["cpu"][3].items():
        np.testing.assert_allclose(outs["cuda:0"][3][k], g, rtol=1e-9, atol=1e-10, err_msg=k)


# ---- float32 paths (the .cu kernels' f32 variants inside real ops) ------------------------------
def test_float32_conv_pool_lrn_chain_matches_cpu():
    x, w = rand(2, 3, 16, 16).astype(np.float32), rand(8, 3, 5, 5).astype(np.float32)

    def net(t, wt):
        y = F.relu(F.conv2d(t, wt, None, stride=2, padding=2))
        y = F.local_response_norm(y, 5, k=2.0)
        return F.max_pool2d(y, 3, 2)

    _compare(net, [x, w], rtol=2e-4, atol=2e-5)


# ---- linalg, special functions, statistics, layout (tinyflow/surface/linalg.py, ops/special.py, ...) -----
def spd(n: int, seed: int = 0) -> np.ndarray:
    """A well-conditioned symmetric positive-definite matrix."""
    m = rand(n, n, seed=seed)
    return m @ m.T + n * np.eye(n)


def _device_index(rows: list[list[int]], like: tf.Tensor) -> tf.Tensor:
    return tf.tensor(np.array(rows), device=like.device)


def positive(*shape: int, seed: int = 0) -> np.ndarray:
    return np.abs(rand(*shape, seed=seed)) + 0.5


NEWER_OPS: dict[str, tuple[Callable[..., Any], Callable[[], list[np.ndarray]]]] = {
    "linalg_inv_solve": (lambda a, b: tf.linalg.inv(a) + tf.linalg.solve(a, b), lambda: [spd(4), rand(4, 4)]),
    "linalg_det_slogdet": (lambda a: tf.linalg.det(a) + tf.linalg.slogdet(a).logabsdet, lambda: [spd(3)]),
    "linalg_cholesky": (lambda a: tf.linalg.cholesky(a), lambda: [spd(4)]),
    "linalg_qr": (lambda a: tf.linalg.qr(a).R.abs(), lambda: [rand(5, 3)]),
    "linalg_svdvals_eigvalsh": (lambda a, s: tf.linalg.svdvals(a).sum() + tf.linalg.eigvalsh(s).sum(),
                                lambda: [rand(4, 3), spd(3)]),
    "linalg_matrix_exp_pinv": (lambda a, b: tf.linalg.matrix_exp(a * 0.3) + tf.linalg.pinv(b).sum(),
                               lambda: [rand(3, 3), rand(3, 4)]),
    "linalg_norms": (lambda a: tf.linalg.matrix_norm(a, "nuc") + tf.linalg.vector_norm(a, 3.0), lambda: [rand(3, 4)]),
    "special_gamma_family": (lambda x: x.lgamma() + x.digamma() + tf.polygamma(1, x) + tf.special.gammaln(x),
                             lambda: [positive(3, 5)]),
    "special_erfc_bessel": (lambda x: x.erfc() + x.i0() + tf.special.i0e(x) + tf.special.i1(x) + tf.special.erfcx(x),
                            lambda: [rand(3, 5)]),
    "special_ndtr_logit": (lambda x, p: tf.special.ndtr(x) + tf.special.log_ndtr(x) + tf.special.ndtri(p.sigmoid())
                           + p.sigmoid().logit(), lambda: [rand(3, 5), rand(3, 5, seed=1)]),
    "special_xlogy_entr_sinc": (lambda x, y: tf.xlogy(x, y) + tf.special.entr(y) + x.sinc() + tf.hypot(x, y),
                                lambda: [rand(3, 5), positive(3, 5)]),
    "stats_nan_reductions": (lambda x: x.nansum(1) + x.nanmean(1) + x.quantile(0.3, dim=1), lambda: [rand(4, 6)]),
    "stats_cov_corrcoef": (lambda x: tf.cov(x).sum() + tf.corrcoef(x).sum(), lambda: [rand(3, 8)]),
    "stats_products": (lambda a, b: tf.kron(a, b).sum() + tf.tensordot(a, b.T, 1).sum() + tf.cdist(a, b).sum(),
                       lambda: [rand(3, 4), rand(2, 4)]),
    "stats_trapezoid_aminmax": (lambda y: tf.trapezoid(y, dim=1) + tf.aminmax(y, dim=1).max, lambda: [rand(3, 7)]),
    "layout_stack_split_rot": (lambda a, b: tf.hstack([a, b]).rot90(1, (0, 1))[:, :2] + a.tensor_split(2, 1)[0].sum(),
                               lambda: [rand(4, 3), rand(4, 2)]),
    "layout_diag_embed_scatter": (lambda a, d: a.diagonal_scatter(d) + tf.diag_embed(d)[0],
                                  lambda: [rand(3, 3), rand(3)]),
    "layout_index_put_copy": (lambda a, s: a.index_put((tf.tensor([0, 2], device=a.device),), s)
                              + a.index_copy(0, tf.tensor([1, 0], device=a.device), s)[:2].sum(),
                              lambda: [rand(3, 4), rand(2, 4)]),
    # the index grids of max/min, gather and cummax backward (cupy.indices has no sparse=), and
    # scatter_reduce's products, which CuPy cannot do with multiply.at (repeated positions: 0 and 2)
    "indexing_gather_scatter_prod": (
        lambda a, s: a.gather(1, _device_index([[0, 2], [1, 1], [3, 0]], a)).sum()
        + a.scatter_reduce(1, _device_index([[0, 2, 0, 2], [1, 1, 1, 3], [3, 0, 2, 2]], a), s, "prod")
        + a.scatter_reduce(1, _device_index([[2, 2, 2, 2]] * 3, a), s, "prod", include_self=False),
        lambda: [rand(3, 4), rand(3, 4, seed=1)]),
    "scan_cummax_cummin_max_dim": (lambda a: a.cummax(1).values + a.cummin(0).values + a.max(1, keepdim=True).values,
                                   lambda: [rand(3, 5)]),
    "layout_masked_slice_scatter": (lambda a, s: a.masked_scatter(a > 0, s).sum() + a.slice_scatter(s[:1], 0, 1, 2),
                                    lambda: [rand(3, 4), rand(3, 4, seed=1)]),
}


@pytest.mark.parametrize("name", sorted(NEWER_OPS))
def test_linalg_special_stats_layout_ops(name):
    op, make = NEWER_OPS[name]
    _compare(op, make(), rtol=1e-8, atol=1e-9)


def test_searchsorted_isin_unique_consecutive_histc():
    seq, vals = np.sort(rand(10)), rand(6, seed=3)
    for device in ("cpu", "cuda:0"):
        s, v = tf.tensor(seq, device=device), tf.tensor(vals, device=device)
        got = (tf.searchsorted(s, v), tf.isin(v, v[:3]), tf.tensor([1, 1, 2, 2, 3], device=device).unique_consecutive(),
               tf.histc(v, bins=4, min=-2, max=2))
        if device == "cpu":
            ref = [g.numpy() for g in got]
        else:
            for r, g in zip(ref, got):
                assert g.device == tf.Device(device)
                np.testing.assert_array_equal(g.numpy(), r)


@pytest.mark.parametrize("layer", ["LSTM", "GRU"])
def test_recurrent_layer_with_an_empty_batch_is_empty_as_on_the_cpu(layer: str) -> None:
    """(T, 0, I) in, (T, 0, H) out and zero gradients, as PyTorch: the sequence kernels are not
    planned for zero columns (the planner divided by the batch, a kernel by zero)."""
    module = getattr(tf.nn, layer)(3, 5).to("cuda:0")
    x = tf.zeros(4, 0, 3, device="cuda:0", requires_grad=True)
    out, _ = module(x)
    out.sum().backward()
    assert tuple(out.shape) == (4, 0, 5) and tuple(x.grad.shape) == (4, 0, 3)
    assert not module.weight_hh_l0.grad.numpy().any()
