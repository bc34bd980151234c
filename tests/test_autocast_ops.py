"""Autocast covers every GEMM: the dtype each op computes in under autocast("bf16"/"fp16"), fp32
gradients for fp32 parameters, batched half-precision GEMMs without CuPy's batched matmul, and
training steps of AlexNet-64 and the LSTM LM under autocast against float32.

Tolerances. float16 keeps 11 significant bits (rounding error 2**-11 ~ 5e-4), bfloat16 8 bits
(2**-8 ~ 4e-3); each GEMM rounds its output once and the activations between GEMMs are stored
rounded. For smooth networks (tanh, average pooling, the LSTM LM) we ask the loss and every
gradient to agree with float32 within 5e-3 (fp16) / 2e-2 (bf16), relative, gradients in L2 norm
(||g - g32|| / ||g32||; elementwise tolerances are meaningless for entries near zero). Measured:
at most 2e-3 / 8e-3.

AlexNet's gradients are another matter: with ReLU and max pooling, a rounding that flips the sign
of a pre-activation near zero, or the winner of a pooling window, reroutes that gradient. Rounding
only the *input image* to the half dtype, in an otherwise float32 network, already moves the conv
gradients by 3-8% (fp16) and 10-14% (bf16). So for AlexNet-64 the loss and the last layer's
gradient keep the tight tolerances, the gradient of all parameters together must agree within
5e-2 / 1.5e-1 (measured at most 2.5e-2 / 7.6e-2 over four seeds), and each parameter's within
0.2 / 0.5 (measured at most 9.5e-2 / 2.7e-1): loose enough for the switching, tight enough that a
wrong or missing gradient (an error near 1) fails.
"""
from __future__ import annotations

import numpy as np
import pytest

import tinyflow as tf
import tinyflow.nn as nn
import tinyflow.nn.functional as F
from tinyflow import amp
from tinyflow.dtypes import is_half
from tinyflow.models import get_model
from tinyflow.device import matmul_array

# (autocast name, tight tolerance, AlexNet all-parameters tolerance, AlexNet per-parameter tolerance)
PRECISIONS = [
    pytest.param("fp16", 5e-3, 5e-2, 0.2, id="fp16"),
    pytest.param("bf16", 2e-2, 1.5e-1, 0.5, id="bf16"),
]


def _half(name: str) -> np.dtype:
    if name == "bf16":
        ml_dtypes = pytest.importorskip("ml_dtypes")
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(np.float16)


def _rel_l2(got: np.ndarray, want: np.ndarray) -> float:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30))


def _t(shape, seed=0, scale=1.0, requires_grad=False) -> tf.Tensor:
    data = (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)
    return tf.tensor(data, requires_grad=requires_grad)


# ---- batched half-precision GEMMs ------------------------------------------------------------
class CupyLikeXp:
    """NumPy standing in for CuPy 14: a 2-D half GEMM returns the half dtype (cuBLAS, float32
    accumulation); a batched (> 2-D) half one raises. (CuPy's raises for bfloat16 and widens
    float16 to float32 GEMMs; matmul_array must use neither.)"""

    def __init__(self) -> None:
        self.calls: list[tuple[tuple[int, ...], tuple[int, ...]]] = []

    def __getattr__(self, name: str):
        return getattr(np, name)

    def matmul(self, a, b, out=None):
        self.calls.append((a.shape, b.shape))
        if is_half(a.dtype) and max(a.ndim, b.ndim) > 2:
            raise TypeError("data type E not understood")
        product = np.matmul(a.astype(np.float32), b.astype(np.float32)).astype(np.result_type(a, b))
        if out is None:
            return product
        out[...] = product
        return out


BATCHED_SHAPES = [
    ((3, 4, 5), (5, 2)),  # a batch against one matrix: folded into one GEMM
    ((2, 3, 4, 5), (5,)),  # a batch against a vector: folded too
    ((4, 5), (3, 5, 2)),  # one matrix against a batch: a GEMM per entry
    ((5,), (3, 5, 2)),  # a vector against a batch
    ((3, 4, 5), (3, 5, 2)),  # bmm
    ((2, 1, 4, 5), (3, 5, 2)),  # broadcast batch dimensions
]


@pytest.mark.parametrize("name", ["fp16", "bf16"])
@pytest.mark.parametrize("a_shape,b_shape", BATCHED_SHAPES)
def test_batched_half_matmul_runs_as_2d_gemms_where_batched_matmul_fails(name, a_shape, b_shape):
    dtype = _half(name)
    rng = np.random.default_rng(0)
    a = rng.standard_normal(a_shape).astype(dtype)
    b = rng.standard_normal(b_shape).astype(dtype)
    xp = CupyLikeXp()
    with pytest.raises(TypeError, match="data type E not understood"):
        xp.matmul(a, b)  # the failure the helper avoids
    xp.calls.clear()
    got = matmul_array(xp, a, b)
    want = np.matmul(a.astype(np.float32), b.astype(np.float32))  # float32 on the same inputs
    assert got.dtype == dtype and got.shape == want.shape
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=1e-2 if name == "bf16" else 2e-3, atol=1e-2)
    assert all(len(sa) <= 2 and len(sb) <= 2 for sa, sb in xp.calls)
    if len(b_shape) <= 2:
        assert len(xp.calls) == 1  # the whole batch in one GEMM
    out = np.empty(want.shape, dtype)
    assert matmul_array(xp, a, b, out=out) is out
    np.testing.assert_array_equal(out.astype(np.float32), got.astype(np.float32))


def test_batched_half_matmul_shape_errors_name_both_shapes():
    a, b = np.ones((3, 4, 5), np.float16), np.ones((3, 6, 2), np.float16)
    with pytest.raises(ValueError, match=r"matmul: shapes \(3, 4, 5\) and \(3, 6, 2\) cannot be multiplied"):
        matmul_array(CupyLikeXp(), a, b)
    with pytest.raises(ValueError, match="batch dimensions do not broadcast"):
        matmul_array(CupyLikeXp(), np.ones((2, 4, 5), np.float16), np.ones((3, 5, 2), np.float16))


@pytest.mark.parametrize("name", ["fp16", "bf16"])
def test_half_matmul_on_numpy_is_float32_blas_rounded_once(name):
    dtype = _half(name)
    rng = np.random.default_rng(1)
    a = rng.standard_normal((2, 6, 7)).astype(dtype)
    b = rng.standard_normal((7, 3)).astype(dtype)
    got = matmul_array(np, a, b)
    assert got.dtype == dtype  # NumPy's own bf16 matmul would return float32
    np.testing.assert_array_equal(got, np.matmul(a.astype(np.float32), b.astype(np.float32)).astype(dtype))


# ---- the dtype each op computes in -----------------------------------------------------------
@pytest.mark.parametrize("name", ["fp16", "bf16"])
def test_gemm_ops_compute_in_the_autocast_dtype(name):
    dtype = _half(name)
    x, w, b = _t((2, 3, 8, 8)), _t((4, 3, 3, 3), 1), _t((4,), 2)
    m, v = _t((5, 6), 3), _t((6, 7), 4)
    batch_a, batch_b = _t((3, 5, 6), 5), _t((3, 6, 2), 6)
    with amp.autocast(name):
        assert F.conv2d(x, w, b, padding=1).dtype == dtype
        assert nn.Conv2d(3, 4, 3)(x).dtype == dtype
        assert F.linear(m, _t((7, 6), 7), _t((7,), 8)).dtype == dtype
        assert nn.Linear(6, 2)(m).dtype == dtype
        assert (m @ v).dtype == dtype and tf.matmul(m, v).dtype == dtype and m.matmul(v).dtype == dtype
        assert (batch_a @ batch_b).dtype == dtype  # bmm
        assert (batch_a @ v).dtype == dtype  # batch against a matrix
    # outside autocast nothing is cast
    assert F.conv2d(x, w, b).dtype == np.float32 and (m @ v).dtype == np.float32


@pytest.mark.parametrize("name", ["fp16", "bf16"])
def test_losses_softmax_and_norms_compute_in_float32(name):
    dtype = _half(name)
    logits = _t((4, 5)).to(dtype)  # a half-precision activation, as a GEMM under autocast makes
    images = _t((2, 4, 3, 3), 1).to(dtype)
    target = tf.tensor(np.array([0, 2, 4, 1]), dtype=tf.int64)
    with amp.autocast(name):
        assert F.cross_entropy(logits, target).dtype == np.float32
        assert F.cross_entropy(logits, F.softmax(_t((4, 5), 2), dim=1)).dtype == np.float32  # soft targets
        assert F.nll_loss(F.log_softmax(logits, dim=1), target).dtype == np.float32
        assert F.softmax(logits, dim=1).dtype == np.float32
        assert F.log_softmax(logits, dim=1).dtype == np.float32
        assert F.mse_loss(logits, _t((4, 5), 3).to(dtype)).dtype == np.float32
        assert F.local_response_norm(images, size=3).dtype == np.float32
        assert nn.LocalResponseNorm(3)(images).dtype == np.float32
        bn = nn.BatchNorm2d(4)  # on no autocast list in PyTorch: cuDNN takes the half input as it is
        assert bn(images).dtype == dtype and F.batch_norm(
            images, bn.running_mean, bn.running_var, training=True).dtype == dtype
        assert bn.running_mean.dtype == np.float32
        assert nn.CrossEntropyLoss()(logits, target).dtype == np.float32
        assert F.relu(logits).dtype == dtype  # not on either list: the dtype it is given
    # outside autocast a half model stays half
    assert F.softmax(logits, dim=1).dtype == dtype


@pytest.mark.parametrize("name", ["fp16", "bf16"])
def test_float32_parameters_stay_float32_and_get_float32_gradients(name):
    dtype = _half(name)
    tf.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                          nn.LocalResponseNorm(3), nn.Flatten(), nn.Linear(4 * 6 * 6, 5))
    x = _t((2, 3, 6, 6), 1)
    target = tf.tensor(np.array([1, 3]), dtype=tf.int64)
    opt = tf.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    with amp.autocast(name):
        logits = model(x)
        loss = F.cross_entropy(logits, target)
    assert logits.dtype == dtype and loss.dtype == np.float32
    loss.backward()
    opt.step()
    for pname, p in model.named_parameters():
        assert p.dtype == np.float32, pname
        assert p.grad is not None and p.grad.dtype == np.float32, pname
        assert np.isfinite(p.numpy()).all(), pname


@pytest.mark.parametrize("name", ["fp16", "bf16"])
@pytest.mark.parametrize("a_shape,b_shape", [((2, 1, 4, 5), (3, 5, 2)), ((3, 4, 5), (5, 2)), ((5,), (3, 5, 2))])
def test_matmul_gradients_over_batches_under_autocast(name, a_shape, b_shape):
    """Gradients that sum over a (broadcast) batch reach float32 operands in float32."""
    a, b = _t(a_shape, requires_grad=True), _t(b_shape, 1, requires_grad=True)
    (a @ b).sum().backward()
    ga32, gb32 = a.grad.numpy(), b.grad.numpy()
    a.grad = b.grad = None
    with amp.autocast(name):
        y = a @ b
    y.sum().backward()
    assert a.grad.dtype == b.grad.dtype == np.float32
    tol = 2e-2 if name == "bf16" else 2e-3
    assert _rel_l2(a.grad.numpy(), ga32) < tol and _rel_l2(b.grad.numpy(), gb32) < tol


# ---- whole training steps ----------------------------------------------------------------------
def _step(model, batch, loss_fn, name):
    """Loss and gradients of one forward/backward, under autocast(name) or in float32 (None)."""
    model.zero_grad()
    with amp.autocast(name or "bf16", enabled=name is not None):
        loss = loss_fn(model, batch)
    loss.backward()
    grads = {n: p.grad.numpy().copy() for n, p in model.named_parameters()}
    assert loss.dtype == np.float32 and all(p.grad.dtype == np.float32 for p in model.parameters())
    return float(loss.numpy()), grads


def _errors(model, batch, loss_fn, name):
    """(relative loss error, {parameter: relative L2 gradient error}, all-parameters error)."""
    loss32, grads32 = _step(model, batch, loss_fn, None)
    loss16, grads16 = _step(model, batch, loss_fn, name)
    errors = {n: _rel_l2(grads16[n], g) for n, g in grads32.items()}
    flat = _rel_l2(np.concatenate([g.ravel() for g in grads16.values()]),
                   np.concatenate([g.ravel() for g in grads32.values()]))
    return abs(loss16 - loss32) / abs(loss32), errors, flat


def _assert_below(errors: dict, tol: float, name: str) -> None:
    worst = max(errors, key=errors.get)
    assert errors[worst] < tol, f"{worst}: relative L2 gradient error {errors[worst]:.2e} under {name}"


@pytest.mark.parametrize("name,tight,_all,_each", PRECISIONS)
def test_smooth_conv_net_step_under_autocast_matches_float32(name, tight, _all, _each):
    """conv (grouped too), tanh, average pooling, linear: no switching, so rounding is all there is."""
    _half(name)
    tf.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 16, 5, stride=2, padding=2), nn.Tanh(), nn.AvgPool2d(2),
                          nn.Conv2d(16, 32, 3, padding=1, groups=2), nn.Tanh(),
                          nn.Conv2d(32, 32, 3, padding=1), nn.Tanh(), nn.Flatten(), nn.Linear(32 * 8 * 8, 10))
    batch = (_t((4, 3, 32, 32), 1), tf.tensor(np.arange(4), dtype=tf.int64))
    loss_err, errors, _ = _errors(model, batch, lambda m, b: F.cross_entropy(m(b[0]), b[1]), name)
    assert loss_err < tight
    _assert_below(errors, tight, name)


@pytest.mark.parametrize("name,tight,all_tol,each_tol", PRECISIONS)
def test_alexnet_64_training_step_under_autocast_matches_float32(name, tight, all_tol, each_tol):
    _half(name)
    tf.manual_seed(0)
    model = get_model("alexnet", num_classes=10, dropout=0.0)
    batch = (_t((2, 3, 64, 64), 1), tf.tensor(np.array([3, 7]), dtype=tf.int64))
    with amp.autocast(name):
        assert model(batch[0]).dtype == _half(name)
    loss_err, errors, flat = _errors(model, batch, lambda m, b: F.cross_entropy(m(b[0]), b[1]), name)
    assert loss_err < tight
    _assert_below({n: e for n, e in errors.items() if n.startswith("classifier.6.")}, tight, name)
    assert flat < all_tol, f"all parameters: relative L2 gradient error {flat:.2e} under {name}"
    _assert_below(errors, each_tol, name)


@pytest.mark.parametrize("name,tight,_all,_each", PRECISIONS)
def test_lstm_lm_training_step_under_autocast_matches_float32(name, tight, _all, _each):
    _half(name)
    tf.manual_seed(0)
    model = get_model("lstm-lm", vocab_size=20, embedding_dim=8, hidden_size=12, num_layers=2,
                      seq_len=5, dropout=0.0)
    batch = (tf.randint(0, 20, (6, 3)), tf.randint(0, 20, (6, 3)))

    def loss_fn(m, b):
        logits, _ = m(b[0])  # (T, N, vocab)
        return F.cross_entropy(logits.reshape(-1, 20), b[1].reshape(-1))

    loss_err, errors, _ = _errors(model, batch, loss_fn, name)
    assert loss_err < tight
    _assert_below(errors, tight, name)


def test_fp16_step_with_grad_scaler_under_autocast_updates_float32_master_weights():
    tf.manual_seed(0)
    model = get_model("alexnet", num_classes=10, dropout=0.0)
    before = {n: p.numpy().copy() for n, p in model.named_parameters()}
    opt = tf.optim.SGD(model.parameters(), lr=0.01)
    scaler = amp.GradScaler(init_scale=2.0**10)
    x, y = _t((2, 3, 64, 64), 1), tf.tensor(np.array([3, 7]), dtype=tf.int64)
    with amp.autocast("fp16"):
        loss = F.cross_entropy(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    assert scaler.skipped_steps == 0
    for n, p in model.named_parameters():
        assert p.dtype == np.float32 and p.grad.dtype == np.float32, n
        assert not np.array_equal(p.numpy(), before[n]), n
