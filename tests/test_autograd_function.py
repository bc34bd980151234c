"""User-defined ``torch.autograd.Function`` subclasses: PyTorch's contract (Tensors in and out of
forward and backward, ctx.save_for_backward / saved_tensors / needs_input_grad /
mark_non_differentiable), checked against the same classes run by PyTorch and by gradcheck."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tinyflow as tf
from tinyflow.testing import gradcheck

torch = pytest.importorskip("torch")


def make_functions(lib):
    """The same user code for tinyflow and torch: only the module differs."""

    class MyReLU(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.clamp(min=0)

        @staticmethod
        def backward(ctx, grad_output):
            (x,) = ctx.saved_tensors
            grad = grad_output.clone()
            grad[x < 0] = 0
            return grad

    class ScaledMul(lib.autograd.Function):
        """x * y * scale, scale a Python number; gradients only where needed."""

        @staticmethod
        def forward(ctx, x, y, scale):
            ctx.save_for_backward(x, y)
            ctx.scale = scale
            return x * y * scale

        @staticmethod
        def backward(ctx, g):
            x, y = ctx.saved_tensors
            gx = g * y * ctx.scale if ctx.needs_input_grad[0] else None
            gy = g * x * ctx.scale if ctx.needs_input_grad[1] else None
            return gx, gy, None

    class SortWithIndices(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            values, indices = x.sort(dim=-1)
            ctx.mark_non_differentiable(indices)
            ctx.save_for_backward(indices)
            return values, indices

        @staticmethod
        def backward(ctx, g_values, g_indices):
            (indices,) = ctx.saved_tensors
            return lib.zeros_like(g_values).scatter(-1, indices, g_values)

    class StraightThroughRound(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.round()

        @staticmethod
        def backward(ctx, g):
            return g

    return MyReLU, ScaledMul, SortWithIndices, StraightThroughRound


TF_FNS, TORCH_FNS = make_functions(tf), make_functions(torch)


def _both(index, arrays, extra=()):
    ins_tf = [tf.tensor(a, requires_grad=True) for a in arrays]
    ins_th = [torch.tensor(a, requires_grad=True) for a in arrays]
    out_tf = TF_FNS[index].apply(*ins_tf, *extra)
    out_th = TORCH_FNS[index].apply(*ins_th, *extra)
    return ins_tf, ins_th, out_tf, out_th


@settings(max_examples=10, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple), st.integers(0, 2**31 - 1))
def test_user_functions_match_torch_and_gradcheck(shape, seed):
    rng = np.random.default_rng(seed)
    x, y = rng.uniform(-2, 2, shape), rng.uniform(-2, 2, shape)
    x = np.where(np.abs(x) < 1e-3, 0.5, x)  # away from the ReLU's kink
    for index, arrays, extra in [(0, [x], ()), (1, [x, y], (1.5,))]:
        ins_tf, ins_th, out_tf, out_th = _both(index, arrays, extra)
        np.testing.assert_allclose(out_tf.numpy(), out_th.detach().numpy(), rtol=1e-12)
        weights = rng.standard_normal(shape)
        (out_tf * tf.tensor(weights)).sum().backward()
        (out_th * torch.tensor(weights)).sum().backward()
        for a, b in zip(ins_tf, ins_th):
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-12)
        gradcheck(lambda *t, i=index, e=extra: TF_FNS[i].apply(*t, *e),
                  [tf.tensor(a, dtype=tf.float64, requires_grad=True) for a in arrays])


def test_forward_sees_tensors_outside_autograd_and_backward_returns_tensors():
    seen = {}

    class Probe(tf.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):
            seen["forward"] = (type(x), x.requires_grad, tf.is_grad_enabled(), k)
            return x * k

        @staticmethod
        def backward(ctx, g):
            seen["backward"] = (type(g), ctx.needs_input_grad)
            return g * 3, None

    x = tf.tensor([1.0, 2.0], requires_grad=True)
    y = Probe.apply(x, 3)
    assert y.requires_grad and y.grad_fn is not None
    y.sum().backward()
    assert seen == {"forward": (tf.Tensor, False, False, 3), "backward": (tf.Tensor, (True, False))}
    assert x.grad.tolist() == [3.0, 3.0]
    with tf.no_grad():
        assert not Probe.apply(x, 2).requires_grad


def test_mark_non_differentiable_and_unused_outputs():
    x = np.array([[3.0, 1.0, 2.0], [0.5, -1.0, 4.0]])
    ins_tf, ins_th, (v_tf, i_tf), (v_th, i_th) = _both(2, [x])
    assert v_tf.requires_grad and not i_tf.requires_grad and not i_th.requires_grad
    np.testing.assert_array_equal(i_tf.numpy(), i_th.numpy())
    (v_tf * tf.tensor(x)).sum().backward()
    (v_th * torch.tensor(x)).sum().backward()
    np.testing.assert_allclose(ins_tf[0].grad.numpy(), ins_th[0].grad.numpy())


def test_straight_through_estimator_trains():
    ins_tf, ins_th, out_tf, out_th = _both(3, [np.array([0.2, 0.7, -1.4])])
    assert out_tf.tolist() == out_th.tolist() == [0.0, 1.0, -1.0]
    out_tf.sum().backward()
    assert ins_tf[0].grad.tolist() == [1.0, 1.0, 1.0]


def test_torch_autograd_function_module_and_clear_errors():
    from tinyflow.autograd.function import FunctionCtx, once_differentiable

    class Bad(tf.autograd.Function):
        @staticmethod
        def forward(ctx: FunctionCtx, x):
            return x.numpy()  # not a Tensor

        @staticmethod
        @once_differentiable
        def backward(ctx, g):
            return g

    with pytest.raises(TypeError, match="Bad.forward: expected Tensors \\(or None\\) to be returned, got ndarray"):
        Bad.apply(tf.ones(2, requires_grad=True))
    assert tf.autograd.Function.tensor_api is False and TF_FNS[0].tensor_api is True
