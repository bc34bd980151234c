"""tinyflow.autograd.functional (jacobian, vjp, jvp) against torch.autograd.functional."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tinyflow as tf
from tinyflow.autograd.functional import hessian, jacobian, jvp, vjp

torch = pytest.importorskip("torch")

FUNCS = {  # name -> (f, number of inputs); the same code runs on both libraries' tensors
    "square": (lambda x: x**2 * 3, 1),
    "sum_of_sin": (lambda x: x.sin().sum(), 1),
    "matmul_tanh": (lambda a, b: (a @ b).tanh(), 2),
    "two_outputs": (lambda a, b: (a * b, (a + b).exp().sum()), 2),
    "softmax": (lambda x: x.softmax(-1), 1),
}


def _flat(result):
    """The tensors of a (nested) tuple result, in order, as NumPy arrays."""
    if isinstance(result, tuple):
        return [a for r in result for a in _flat(r)]
    return [np.asarray(result.detach().numpy())]


@settings(max_examples=10, deadline=None)
@given(st.sampled_from(sorted(FUNCS)), st.integers(1, 3), st.integers(0, 2**31 - 1))
def test_jacobian_vjp_jvp_match_torch(name, n, seed):
    f, arity = FUNCS[name]
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal((n, n)) for _ in range(arity)]
    ours = tuple(tf.tensor(a, dtype=tf.float64) for a in arrays)
    theirs = tuple(torch.tensor(a, dtype=torch.float64) for a in arrays)
    pick = (lambda t: t) if arity > 1 else (lambda t: t[0])
    for got, want in zip(_flat(jacobian(f, pick(ours))), _flat(torch.autograd.functional.jacobian(f, pick(theirs)))):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    outs = f(*ours)
    v_arrays = [rng.standard_normal(tuple(o.shape)) for o in (outs if isinstance(outs, tuple) else (outs,))]
    v_ours = tuple(tf.tensor(v, dtype=tf.float64) for v in v_arrays)
    v_theirs = tuple(torch.tensor(v, dtype=torch.float64) for v in v_arrays)
    one = (lambda t: t) if isinstance(outs, tuple) else (lambda t: t[0])
    for got, want in zip(_flat(vjp(f, pick(ours), one(v_ours))),
                         _flat(torch.autograd.functional.vjp(f, pick(theirs), one(v_theirs)))):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    t_arrays = [rng.standard_normal(a.shape) for a in arrays]
    for got, want in zip(_flat(jvp(f, pick(ours), pick(tuple(tf.tensor(t, dtype=tf.float64) for t in t_arrays)))),
                         _flat(torch.autograd.functional.jvp(f, pick(theirs),
                                                             pick(tuple(torch.tensor(t, dtype=torch.float64)
                                                                        for t in t_arrays))))):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_independent_inputs_strict_and_errors():
    f = lambda a, b: a * 2  # noqa: E731 (b unused)
    jac = jacobian(f, (tf.ones(2), tf.ones(3)))
    assert tuple(jac[1].shape) == (2, 3) and not jac[1].numpy().any()
    with pytest.raises(RuntimeError, match="output 0 is independent of input 1"):
        jacobian(f, (tf.ones(2), tf.ones(3)), strict=True)
    with pytest.raises(RuntimeError, match="v can be None only when func returns a single-element Tensor"):
        vjp(lambda x: x * 2, tf.ones(2))
    with pytest.raises(NotImplementedError, match="create_graph=True"):
        jacobian(lambda x: x, tf.ones(1), create_graph=True)
    with pytest.raises(NotImplementedError, match="second derivatives"):
        hessian(lambda x: (x**3).sum(), tf.ones(2))
    with pytest.raises(TypeError, match="inputs must be a Tensor or a tuple of Tensors"):
        jacobian(lambda x: x, [1.0])
    import tinyflow.autograd.functional as functional  # torch's import path works

    assert functional.jacobian is jacobian
