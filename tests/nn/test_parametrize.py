"""nn.utils.parametrize and nn.utils.parametrizations: float64 gradchecks through parametrized
layers with respect to the original tensors, PyTorch parity (values, gradients, state-dict keys,
optimizer steps), chaining, right_inverse, cached(), removal both ways, and PyTorch's errors."""
from __future__ import annotations

import copy

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tinyflow as tf
from tinyflow.nn.utils import parametrizations as PZ
from tinyflow.nn.utils import parametrize as P
from tinyflow.testing import gradcheck

torch = pytest.importorskip("torch")
TP = torch.nn.utils.parametrize
TPZ = torch.nn.utils.parametrizations

seeds = st.integers(0, 2**31 - 1)
few = settings(max_examples=10, deadline=None)


# ------------------------------------------------------------------------------ helpers
class Symmetric(tf.nn.Module):
    def forward(self, X):
        return X.triu() + X.triu(1).mT

    def right_inverse(self, A):
        return A.triu()


class TSymmetric(torch.nn.Module):
    def forward(self, X):
        return X.triu() + X.triu(1).mT

    def right_inverse(self, A):
        return A.triu()


class Scale(tf.nn.Module):
    def forward(self, X):
        return 2.0 * X

    def right_inverse(self, A):
        return A / 2.0


class TScale(torch.nn.Module):
    def forward(self, X):
        return 2.0 * X

    def right_inverse(self, A):
        return A / 2.0


class Square(tf.nn.Module):
    """No right_inverse: the original starts as the weight itself."""

    def forward(self, X):
        return X * X


class TSquare(torch.nn.Module):
    def forward(self, X):
        return X * X


def twin(ours, theirs, seed=0, dtype=np.float32):
    """The same layer in tinyflow and torch with the same random weights."""
    m, t = ours(), theirs()
    rng = np.random.default_rng(seed)
    state = {k: rng.standard_normal(tuple(v.shape)).astype(dtype) for k, v in t.state_dict().items()}
    m.load_state_dict(state)
    t.load_state_dict({k: torch.tensor(v) for k, v in state.items()})
    if dtype == np.float64:
        m.double()
        t.double()
    return m, t


def lin_pair(n_in=4, n_out=4, seed=0, dtype=np.float32):
    return twin(lambda: tf.nn.Linear(n_in, n_out), lambda: torch.nn.Linear(n_in, n_out), seed, dtype)


def close(a, b, rtol=1e-5, atol=1e-6):
    b = b.detach().numpy() if isinstance(b, torch.Tensor) else b
    np.testing.assert_allclose(a.numpy(), b, rtol=rtol, atol=atol)


def check_forward_backward(m, t, x, rtol=1e-5, atol=1e-6):
    """Outputs of the two layers on x, then the gradients of every parameter (by state-dict name)."""
    out, ref = m(tf.tensor(x)), t(torch.tensor(x))
    close(out, ref, rtol, atol)
    w = np.random.default_rng(1).standard_normal(tuple(ref.shape)).astype(x.dtype)
    (out * tf.tensor(w)).sum().backward()
    (ref * torch.tensor(w)).sum().backward()
    ours, theirs = dict(m.named_parameters()), dict(t.named_parameters())
    assert list(ours) == list(theirs)
    for name, p in ours.items():
        close(p.grad, theirs[name].grad, rtol=1e-4, atol=1e-5)


def gradcheck_originals(module, tensor_name, x):
    """gradcheck of module(x) with respect to the original tensor(s) of ``tensor_name``: each
    gradcheck input is put in place of the ParametrizationList's original before the forward."""
    plist = module.parametrizations[tensor_name]
    keys = ["original"] if plist.is_tensor else [f"original{i}" for i in range(plist.ntensors)]
    originals = [getattr(plist, k).detach().clone().requires_grad_(True) for k in keys]

    def fn(*args):
        for key, value in zip(keys, args[:-1]):
            plist._parameters[key] = value
        return module(args[-1])

    return gradcheck(fn, [*originals, tf.tensor(x, dtype=tf.float64, requires_grad=True)])


# ------------------------------------------------------------------------------ register_parametrization
def test_parametrized_class_property_and_state_dict_keys():
    m, t = lin_pair()
    P.register_parametrization(m, "weight", Symmetric())
    TP.register_parametrization(t, "weight", TSymmetric())
    assert type(m).__name__ == "ParametrizedLinear" and isinstance(m, tf.nn.Linear)
    assert P.type_before_parametrizations(m) is tf.nn.Linear
    assert P.is_parametrized(m) and P.is_parametrized(m, "weight") and not P.is_parametrized(m, "bias")
    assert not P.is_parametrized(tf.nn.Linear(2, 2))
    assert list(m.state_dict()) == list(t.state_dict()) == ["bias", "parametrizations.weight.original"]
    assert [n for n, _ in m.named_parameters()] == [n for n, _ in t.named_parameters()]
    assert "weight" not in m._parameters
    close(m.parametrizations.weight.original, t.parametrizations.weight.original)  # right_inverse applied
    close(m.weight, t.weight)
    np.testing.assert_array_equal(m.weight.numpy(), m.weight.numpy().T)
    # recomputed on every access: an in-place change of the original shows at once
    with tf.no_grad():
        m.parametrizations.weight.original.mul_(3.0)
    np.testing.assert_allclose(m.weight.numpy(), 3.0 * t.weight.detach().numpy(), rtol=1e-6)
    assert type(tf.nn.Linear(2, 2)).__name__ == "Linear"  # other instances keep their class


@given(seeds)
@few
def test_parity_outputs_and_gradients(seed):
    m, t = lin_pair(seed=seed)
    P.register_parametrization(m, "weight", Symmetric())
    TP.register_parametrization(t, "weight", TSymmetric())
    x = np.random.default_rng(seed).standard_normal((3, 4)).astype(np.float32)
    check_forward_backward(m, t, x)


def test_no_right_inverse_keeps_the_weight_as_original():
    m, t = lin_pair(3, 2)
    w = m.weight
    P.register_parametrization(m, "weight", Square())
    TP.register_parametrization(t, "weight", TSquare())
    assert m.parametrizations.weight.original is w  # the same Parameter object, as PyTorch
    close(m.weight, t.weight)
    check_forward_backward(m, t, np.ones((2, 3), np.float32))


def test_chained_parametrizations_and_assignment():
    m, t = lin_pair(seed=3)
    for ours, theirs in ((Symmetric(), TSymmetric()), (Scale(), TScale())):
        P.register_parametrization(m, "weight", ours)
        TP.register_parametrization(t, "weight", theirs)
    assert len(m.parametrizations.weight) == 2
    assert list(m.state_dict()) == list(t.state_dict())
    close(m.weight, t.weight)
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    check_forward_backward(m, t, x)
    # assigning runs the right inverses, last registered first
    target = np.random.default_rng(5).standard_normal((4, 4)).astype(np.float32)
    target = target + target.T
    original = m.parametrizations.weight.original
    m.weight = tf.tensor(target)
    t.weight = torch.tensor(target)
    assert m.parametrizations.weight.original is original
    close(m.parametrizations.weight.original, t.parametrizations.weight.original)
    close(m.weight, target)


def test_parametrized_buffer():
    m, t = tf.nn.BatchNorm1d(3), torch.nn.BatchNorm1d(3)
    P.register_parametrization(m, "running_var", Scale())
    TP.register_parametrization(t, "running_var", TScale())
    assert list(m.state_dict()) == list(t.state_dict())
    assert "original" in m.parametrizations.running_var._buffers
    close(m.running_var, t.running_var)


def test_sgd_steps_on_the_original_match_torch():
    m, t = lin_pair(seed=7)
    P.register_parametrization(m, "weight", Symmetric())
    TP.register_parametrization(t, "weight", TSymmetric())
    opt, topt = tf.optim.SGD(m.parameters(), lr=0.1), torch.optim.SGD(t.parameters(), lr=0.1)
    x = np.random.default_rng(2).standard_normal((5, 4)).astype(np.float32)
    for _ in range(3):
        opt.zero_grad()
        topt.zero_grad()
        (m(tf.tensor(x)) ** 2).sum().backward()
        (t(torch.tensor(x)) ** 2).sum().backward()
        opt.step()
        topt.step()
    close(m.weight, t.weight, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(m.weight.numpy(), m.weight.numpy().T)


def test_cached_computes_once_per_context():
    calls = []

    class Counting(Scale):
        def forward(self, X):
            calls.append(1)
            return super().forward(X)

    m = tf.nn.Linear(3, 3)
    P.register_parametrization(m, "weight", Counting())
    calls.clear()
    _ = (m.weight, m.weight)
    assert len(calls) == 2
    with P.cached():
        a = m.weight
        with P.cached():
            b = m.weight
        assert m.weight is a is b
    assert len(calls) == 3
    assert m.weight is not a and len(calls) == 4  # the cache is dropped on exit


def test_deepcopy_and_training_mode():
    m = tf.nn.Linear(3, 3)
    P.register_parametrization(m, "weight", Symmetric())
    c = copy.deepcopy(m)
    np.testing.assert_array_equal(c.weight.numpy(), m.weight.numpy())
    with tf.no_grad():
        c.parametrizations.weight.original.add_(1.0)
    assert not np.allclose(c.weight.numpy(), m.weight.numpy())
    m.eval()
    assert not m.parametrizations.weight[0].training
    p = Scale()
    P.register_parametrization(m, "bias", p)
    assert not p.training  # takes the module's mode on registration, as PyTorch


# ------------------------------------------------------------------------------ remove_parametrizations
@pytest.mark.parametrize("leave", [True, False])
def test_remove_parametrizations_both_ways(leave):
    m, t = lin_pair(seed=11)
    P.register_parametrization(m, "weight", Symmetric())
    TP.register_parametrization(t, "weight", TSymmetric())
    original = m.parametrizations.weight.original
    P.remove_parametrizations(m, "weight", leave_parametrized=leave)
    TP.remove_parametrizations(t, "weight", leave_parametrized=leave)
    assert type(m) is tf.nn.Linear and not P.is_parametrized(m)
    assert "parametrizations" not in m._modules
    assert m.weight is original  # the same object: an optimizer holding it keeps working
    assert isinstance(m.weight, tf.nn.Parameter)
    assert list(m.state_dict()) == list(t.state_dict())  # weight re-registered last, as PyTorch
    close(m.weight, t.weight)


def test_remove_one_of_two_keeps_the_class():
    m = tf.nn.Linear(3, 3)
    P.register_parametrization(m, "weight", Symmetric())
    P.register_parametrization(m, "bias", Scale())
    P.remove_parametrizations(m, "weight")
    assert type(m).__name__ == "ParametrizedLinear" and P.is_parametrized(m, "bias")
    P.remove_parametrizations(m, "bias")
    assert type(m) is tf.nn.Linear


def test_remove_weight_norm_needs_leave_parametrized():
    m, t = lin_pair(3, 5)
    PZ.weight_norm(m)
    TPZ.weight_norm(t)
    with pytest.raises(ValueError, match="Cannot leave unparametrized"):
        P.remove_parametrizations(m, "weight", leave_parametrized=False)
    with pytest.raises(ValueError, match="Cannot leave unparametrized"):
        TP.remove_parametrizations(t, "weight", leave_parametrized=False)
    P.remove_parametrizations(m, "weight")
    TP.remove_parametrizations(t, "weight")
    assert type(m) is tf.nn.Linear and isinstance(m.weight, tf.nn.Parameter) and m.weight.requires_grad
    close(m.weight, t.weight)


# ------------------------------------------------------------------------------ errors
def test_errors_as_torch():
    m, t = lin_pair(3, 2)
    unknown = "does not have a parameter, a buffer, or a parametrized element with name 'foo'"
    with pytest.raises(ValueError, match=unknown):
        P.register_parametrization(m, "foo", Symmetric())
    with pytest.raises(ValueError, match=unknown):
        TP.register_parametrization(t, "foo", TSymmetric())

    class Flatten(tf.nn.Module):
        def forward(self, X):
            return X.reshape(-1)

    class TFlatten(torch.nn.Module):
        def forward(self, X):
            return X.reshape(-1)

    with pytest.raises(ValueError, match="may not change the shape"):
        P.register_parametrization(m, "weight", Flatten())
    with pytest.raises(ValueError, match="may not change the shape"):
        TP.register_parametrization(t, "weight", TFlatten())
    assert not P.is_parametrized(m) and type(m) is tf.nn.Linear  # nothing half-registered
    P.register_parametrization(m, "weight", Flatten(), unsafe=True)
    assert tuple(m.weight.shape) == (6,)

    class ToDouble(tf.nn.Module):
        def forward(self, X):
            return X.double()

    m2 = tf.nn.Linear(2, 2)
    with pytest.raises(ValueError, match="may not change the dtype"):
        P.register_parametrization(m2, "weight", ToDouble())
    P.register_parametrization(m2, "weight", Scale())
    with pytest.raises(ValueError, match="may not change the shape"):  # chained: checked against module.weight
        P.register_parametrization(m2, "weight", Flatten())
    with pytest.raises(ValueError, match="does not have a parametrization on bias"):
        P.remove_parametrizations(m2, "bias")
    with pytest.raises(ValueError, match="does not have a parametrization on bias"):
        TP.remove_parametrizations(torch.nn.Linear(2, 2), "bias")
    with pytest.raises(KeyError, match="attribute 'weight' already exists"):
        m2.weight = tf.nn.Parameter(tf.ones(2, 2))
    tm = TP.register_parametrization(torch.nn.Linear(2, 2), "weight", TScale())
    with pytest.raises(KeyError, match="attribute 'weight' already exists"):
        tm.weight = torch.nn.Parameter(torch.ones(2, 2))


def test_assignment_without_right_inverse_raises():
    m = tf.nn.Linear(2, 2)
    P.register_parametrization(m, "weight", Square())
    with pytest.raises(RuntimeError, match="does not implement right_inverse"):
        m.weight = tf.ones(2, 2)


def test_parametrization_errors_of_the_builtins():
    with pytest.raises(ValueError, match="has no parameter or buffer with name 'foo'"):
        PZ.spectral_norm(tf.nn.Linear(2, 2), "foo")
    with pytest.raises(ValueError, match="has no parameter or buffer with name 'foo'"):
        TPZ.spectral_norm(torch.nn.Linear(2, 2), "foo")
    with pytest.raises(ValueError, match="Expected n_power_iterations to be positive"):
        PZ.spectral_norm(tf.nn.Linear(2, 2), n_power_iterations=0)
    with pytest.raises(IndexError, match="Dimension out of range"):
        PZ.spectral_norm(tf.nn.Linear(2, 2), dim=2)
    with pytest.raises(IndexError, match="Dimension out of range"):
        TPZ.spectral_norm(torch.nn.Linear(2, 2), dim=2)
    with pytest.raises(ValueError, match="Expected a matrix or batch of matrices"):
        PZ.orthogonal(tf.nn.Linear(2, 2), "bias")
    with pytest.raises(ValueError, match='orthogonal_map has to be one of "matrix_exp"'):
        PZ.orthogonal(tf.nn.Linear(2, 2), orthogonal_map="qr")
    with pytest.raises(ValueError, match='orthogonal_map has to be one of "matrix_exp"'):
        TPZ.orthogonal(torch.nn.Linear(2, 2), orthogonal_map="qr")
    m = PZ.orthogonal(tf.nn.Linear(3, 3), orthogonal_map="cayley", use_trivialization=False)
    with pytest.raises(NotImplementedError, match="not possible to assign"):
        m.weight = tf.eye(3)


# ------------------------------------------------------------------------------ weight_norm
@given(seeds, st.sampled_from([0, 1, None]))
@few
def test_weight_norm_parity(seed, dim):
    m, t = lin_pair(3, 5, seed=seed)
    PZ.weight_norm(m, dim=dim)
    TPZ.weight_norm(t, dim=dim)
    assert list(m.state_dict()) == list(t.state_dict())
    plist, tlist = m.parametrizations.weight, t.parametrizations.weight
    for key in ("original0", "original1"):
        assert tuple(getattr(plist, key).shape) == tuple(getattr(tlist, key).shape)
        close(getattr(plist, key), getattr(tlist, key))
    close(m.weight, t.weight)
    x = np.random.default_rng(seed).standard_normal((2, 3)).astype(np.float32)
    check_forward_backward(m, t, x)


def test_weight_norm_conv_parity():
    m, t = twin(lambda: tf.nn.Conv2d(2, 3, 3), lambda: torch.nn.Conv2d(2, 3, 3), seed=4)
    PZ.weight_norm(m)
    TPZ.weight_norm(t)
    check_forward_backward(m, t, np.random.default_rng(0).standard_normal((1, 2, 5, 5)).astype(np.float32))


# ------------------------------------------------------------------------------ spectral_norm
LAYERS = {
    "linear": (lambda: tf.nn.Linear(5, 3), lambda: torch.nn.Linear(5, 3), (2, 5)),
    "conv": (lambda: tf.nn.Conv2d(2, 3, 3), lambda: torch.nn.Conv2d(2, 3, 3), (1, 2, 5, 5)),
    "convT": (lambda: tf.nn.ConvTranspose2d(2, 3, 3), lambda: torch.nn.ConvTranspose2d(2, 3, 3), (1, 2, 4, 4)),
}


@pytest.mark.parametrize("layer", list(LAYERS))
def test_spectral_norm_parity(layer):
    ours, theirs, xshape = LAYERS[layer]
    m, t = twin(ours, theirs, seed=6)
    PZ.spectral_norm(m)
    TPZ.spectral_norm(t)
    assert list(m.state_dict()) == list(t.state_dict())
    # power iteration starts from random vectors: take torch's, then both iterate alike
    m.load_state_dict({k: v.numpy() for k, v in t.state_dict().items()})
    x = np.random.default_rng(0).standard_normal(xshape).astype(np.float32)
    for _ in range(2):  # training: each access runs one power iteration and updates _u, _v
        close(m.weight, t.weight)
    check_forward_backward(m, t, x)
    for key in ("parametrizations.weight.0._u", "parametrizations.weight.0._v"):
        close(m.state_dict()[key], t.state_dict()[key], rtol=1e-4, atol=1e-6)
    m.eval()
    t.eval()
    u = m.parametrizations.weight[0]._u.numpy().copy()
    close(m.weight, t.weight)
    np.testing.assert_array_equal(m.parametrizations.weight[0]._u.numpy(), u)  # no iteration in eval


def test_spectral_norm_converges_to_unit_spectral_norm():
    m = tf.nn.Linear(6, 4)
    PZ.spectral_norm(m, n_power_iterations=5)
    for _ in range(10):
        w = m.weight
    assert abs(np.linalg.svd(w.numpy(), compute_uv=False)[0] - 1.0) < 1e-4


def test_spectral_norm_of_a_vector_normalizes():
    m, t = tf.nn.Linear(3, 4), torch.nn.Linear(3, 4)
    t.bias.data = torch.tensor(m.bias.numpy())
    PZ.spectral_norm(m, "bias")
    TPZ.spectral_norm(t, "bias")
    close(m.bias, t.bias)


# ------------------------------------------------------------------------------ orthogonal
@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5)])
@pytest.mark.parametrize("omap", ["matrix_exp", "cayley", "householder"])
@pytest.mark.parametrize("triv", [True, False])
def test_orthogonal_parity(shape, omap, triv):
    m, t = lin_pair(shape[1], shape[0], seed=sum(shape), dtype=np.float64)
    PZ.orthogonal(m, orthogonal_map=omap, use_trivialization=triv)
    TPZ.orthogonal(t, orthogonal_map=omap, use_trivialization=triv)
    assert list(m.state_dict()) == list(t.state_dict())
    close(m.parametrizations.weight.original, t.parametrizations.weight.original, rtol=1e-9, atol=1e-12)
    w = m.weight.numpy()
    close(m.weight, t.weight, rtol=1e-9, atol=1e-12)
    gram = w.T @ w if shape[0] >= shape[1] else w @ w.T
    np.testing.assert_allclose(gram, np.eye(min(shape)), atol=1e-12)
    if shape[0] == shape[1] or not triv:  # a non-square base has random extra columns
        x = np.random.default_rng(0).standard_normal((2, shape[1]))
        check_forward_backward(m, t, x, rtol=1e-9, atol=1e-10)


def test_orthogonal_default_map_and_assignment():
    m = PZ.orthogonal(tf.nn.Linear(3, 3))
    assert m.parametrizations.weight[0].orthogonal_map.name == "matrix_exp"
    assert PZ.orthogonal(tf.nn.Linear(2, 4)).parametrizations.weight[0].orthogonal_map.name == "householder"
    q = np.linalg.qr(np.random.default_rng(1).standard_normal((3, 3)))[0]
    m.weight = tf.tensor(q, dtype=tf.float32)
    np.testing.assert_allclose(m.weight.numpy(), q, atol=1e-5)


# ------------------------------------------------------------------------------ gradchecks (float64)
@given(seeds)
@few
def test_gradcheck_custom_chain(seed):
    m = tf.nn.Linear(3, 3).double()
    P.register_parametrization(m, "weight", Symmetric())
    P.register_parametrization(m, "weight", Square())
    x = np.random.default_rng(seed).standard_normal((2, 3))
    assert gradcheck_originals(m, "weight", x)


@given(seeds, st.sampled_from([0, 1, None]))
@few
def test_gradcheck_weight_norm(seed, dim):
    m, _ = lin_pair(3, 4, seed=seed, dtype=np.float64)
    PZ.weight_norm(m, dim=dim)
    assert gradcheck_originals(m, "weight", np.random.default_rng(seed).standard_normal((2, 3)))


@given(seeds)
@few
def test_gradcheck_spectral_norm(seed):
    m, _ = lin_pair(3, 4, seed=seed, dtype=np.float64)
    PZ.spectral_norm(m)
    m.eval()  # no power iteration between the perturbed evaluations
    assert gradcheck_originals(m, "weight", np.random.default_rng(seed).standard_normal((2, 3)))


@given(seeds, st.sampled_from(["matrix_exp", "cayley", "householder"]), st.sampled_from([(3, 3), (4, 2), (2, 4)]))
@few
def test_gradcheck_orthogonal(seed, omap, shape):
    m, _ = lin_pair(shape[1], shape[0], seed=seed, dtype=np.float64)
    PZ.orthogonal(m, orthogonal_map=omap)
    with tf.no_grad():  # move away from the -I starting point so every entry matters
        m.parametrizations.weight.original.add_(
            tf.tensor(0.3 * np.random.default_rng(seed).standard_normal(shape)))
    assert gradcheck_originals(m, "weight", np.random.default_rng(seed).standard_normal((2, shape[1])))


def test_transfer_parametrizations_and_params():
    src, tsrc = lin_pair(seed=12)
    P.register_parametrization(src, "weight", Symmetric())
    TP.register_parametrization(tsrc, "weight", TSymmetric())
    dst, tdst = lin_pair(seed=13)
    P.transfer_parametrizations_and_params(src, dst)
    TP.transfer_parametrizations_and_params(tsrc, tdst)
    assert type(dst).__name__ == "ParametrizedLinear"
    assert dst.parametrizations.weight.original is src.parametrizations.weight.original  # shared, as PyTorch
    assert list(dst.state_dict()) == list(tdst.state_dict())
    close(dst.weight, tdst.weight)
    assert P.transfer_parametrizations_and_params(tf.nn.Linear(2, 2), dst) is dst  # nothing to transfer
