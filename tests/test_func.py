"""tinyflow.func (torch.func's single-level transforms) against torch.func: grad / grad_and_value,
vjp, jvp, jacrev / jacfwd, vmap (in_dims / out_dims trees, randomness), functional_call (tied
weights, strict, restoration) and stack_module_state, per-sample gradients and ensembles, and the
errors (nested autograd transforms, hessian, bad in_dims, ...)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tinyflow as tf
from tinyflow import func as tff

torch = pytest.importorskip("torch")
tfunc = torch.func

seeds = st.integers(0, 2**31 - 1)
shapes = st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple)
few = settings(max_examples=10, deadline=None)


def arr(shape, seed):
    return np.random.default_rng(seed).uniform(-2.0, 2.0, size=shape)


def pair(a):
    """The same float64 data as a tinyflow and a torch tensor (neither requires grad)."""
    return tf.tensor(a, dtype=tf.float64), torch.tensor(a, dtype=torch.float64)


def assert_tree_close(ours, theirs, rtol=1e-7, atol=1e-9):
    """Same pytree structure (tuples, lists, dicts) and, leaf by leaf, shapes, dtypes and values."""
    if isinstance(theirs, torch.Tensor):
        assert isinstance(ours, tf.Tensor), type(ours)
        assert tuple(ours.shape) == tuple(theirs.shape)
        assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
        np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=rtol, atol=atol)
    elif isinstance(theirs, dict):
        assert isinstance(ours, dict) and list(ours) == list(theirs)
        for k in theirs:
            assert_tree_close(ours[k], theirs[k], rtol, atol)
    elif isinstance(theirs, (tuple, list)):
        assert type(ours) is type(theirs) and len(ours) == len(theirs), (type(ours), type(theirs))
        for o, t in zip(ours, theirs):
            assert_tree_close(o, t, rtol, atol)
    else:
        assert ours == theirs


def mlp_pair(seed, sizes=(3, 5, 2)):
    """A tinyflow and a torch float64 MLP (Linear-Tanh-Linear) with the same weights."""
    torch.manual_seed(seed)
    th = torch.nn.Sequential(torch.nn.Linear(sizes[0], sizes[1]), torch.nn.Tanh(),
                             torch.nn.Linear(sizes[1], sizes[2])).double()
    ours = tf.nn.Sequential(tf.nn.Linear(sizes[0], sizes[1]), tf.nn.Tanh(), tf.nn.Linear(sizes[1], sizes[2])).double()
    ours.load_state_dict({k: v.detach().numpy() for k, v in th.state_dict().items()})
    return ours, th


# ----------------------------------------------------------------------------------------- grad
def f_two(lib):
    def f(x, y):
        return (lib.sin(x) * y).sum() + (x * x).mean()
    return f


@few
@given(shape=shapes, seed=seeds, argnums=st.sampled_from([0, 1, -1, (0, 1), (1, 0)]))
def test_grad_parity(shape, seed, argnums):
    x, tx = pair(arr(shape, seed))
    y, ty = pair(arr(shape, seed + 1))
    assert_tree_close(tff.grad(f_two(tf), argnums)(x, y), tfunc.grad(f_two(torch), argnums)(tx, ty))
    g, v = tff.grad_and_value(f_two(tf), argnums)(x, y)
    tg, tv = tfunc.grad_and_value(f_two(torch), argnums)(tx, ty)
    assert_tree_close((g, v), (tg, tv))
    assert not x.requires_grad and x.grad is None  # the caller's tensor is untouched


@few
@given(seed=seeds)
def test_grad_has_aux_and_trees(seed):
    def make(lib):
        def f(params, scale):
            out = (params["w"] * params["b"][0]).sum() * scale + lib.exp(params["b"]).sum()
            return out, {"out": out * 2, "n": [scale * params["b"]]}
        return f

    a, b = arr((2, 3), seed), arr((2,), seed + 1)
    ours = tff.grad(make(tf), has_aux=True)({"w": tf.tensor(a), "b": tf.tensor(b)}, 1.5)
    theirs = tfunc.grad(make(torch), has_aux=True)({"w": torch.tensor(a), "b": torch.tensor(b)}, 1.5)
    assert_tree_close(ours, theirs)
    assert not ours[1]["out"].requires_grad
    (g, (v, aux)) = tff.grad_and_value(make(tf), has_aux=True)({"w": tf.tensor(a), "b": tf.tensor(b)}, 1.5)
    (tg, (tv, taux)) = tfunc.grad_and_value(make(torch), has_aux=True)({"w": torch.tensor(a), "b": torch.tensor(b)}, 1.5)
    assert_tree_close((g, v, aux), (tg, tv, taux))


def test_grad_unused_input_and_constant_output_give_zeros():
    x, tx = pair(arr((3,), 0))
    y, ty = pair(arr((2,), 1))
    assert_tree_close(tff.grad(lambda a, b: (a * 2).sum(), argnums=(0, 1))(x, y),
                      tfunc.grad(lambda a, b: (a * 2).sum(), argnums=(0, 1))(tx, ty))
    assert_tree_close(tff.grad(lambda a: tf.tensor(1.0, dtype=tf.float64))(x),
                      tfunc.grad(lambda a: torch.tensor(1.0, dtype=torch.float64))(tx))


def test_grad_errors():
    x = tf.tensor(arr((3,), 0))
    with pytest.raises(RuntimeError, match="Expected f\\(\\*args\\) to return a scalar Tensor, got tensor with 1 dims"):
        tff.grad(lambda a: a * 2)(x)
    with pytest.raises(RuntimeError, match="Expected f\\(\\*args\\) to return a Tensor, got <class 'float'>"):
        tff.grad(lambda a: 1.0)(x)
    with pytest.raises(RuntimeError, match="output of function f should be a tuple: \\(output, aux\\)"):
        tff.grad(lambda a: a.sum(), has_aux=True)(x)
    with pytest.raises(RuntimeError, match="Expected tensors in aux, got unsupported type <class 'int'>"):
        tff.grad(lambda a: (a.sum(), {"n": 3}), has_aux=True)(x)
    with pytest.raises(RuntimeError, match="Got argnum=2, but only 1 positional inputs"):
        tff.grad(lambda a: a.sum(), argnums=2)(x)
    with pytest.raises(RuntimeError, match="argnums elements must be unique, got \\(0, 0\\)"):
        tff.grad(lambda a: a.sum(), argnums=(0, 0))(x)
    with pytest.raises(RuntimeError, match="argnums must be non-empty"):
        tff.grad(lambda a: a.sum(), argnums=())(x)
    with pytest.raises(RuntimeError, match="argnums must be int or Tuple"):
        tff.grad(lambda a: a.sum(), argnums=[0])(x)
    with pytest.raises(ValueError, match="Thing passed to transform API must be Tensor, got <class 'float'>"):
        tff.grad(lambda a: a * 2)(2.0)
    with pytest.raises(RuntimeError, match="only Tensors of floating point dtype"):
        tff.grad(lambda a: a.sum())(tf.tensor([1, 2]))


def test_nested_autograd_transforms_are_clear_errors():
    x = tf.tensor(arr((3,), 0))
    with pytest.raises(NotImplementedError, match="grad inside grad.*no higher-order gradients"):
        tff.grad(tff.grad(lambda a: a.sin().sum()))(x[0])
    with pytest.raises(NotImplementedError, match="jacrev inside jacrev"):
        tff.jacrev(tff.jacrev(lambda a: a.sin()))(x)
    with pytest.raises(NotImplementedError, match="vjp inside jacfwd"):
        tff.jacfwd(lambda a: tff.vjp(lambda b: b.sin(), a)[0])(x)
    with pytest.raises(NotImplementedError, match="func.hessian: second derivatives"):
        tff.hessian(lambda a: a.sin().sum())(x)
    # the guard is released after an error: a plain grad works again
    assert_tree_close(tff.grad(lambda a: a.sin().sum())(x), torch.cos(torch.tensor(x.numpy())))


# ----------------------------------------------------------------------------------------- vjp, jvp, jacobians
@few
@given(shape=shapes, seed=seeds)
def test_vjp_parity(shape, seed):
    def make(lib):
        return lambda x, y: (lib.sin(x) * y, (x * y).sum())

    (x, tx), (y, ty) = pair(arr(shape, seed)), pair(arr(shape, seed + 1))
    (w, tw), (s, ts) = pair(arr(shape, seed + 2)), pair(arr((), seed + 3))
    out, fn = tff.vjp(make(tf), x, y)
    tout, tfn = tfunc.vjp(make(torch), tx, ty)
    assert_tree_close(out, tout)
    assert_tree_close(fn((w, s)), tfn((tw, ts)))
    assert_tree_close(fn((w, s)), tfn((tw, ts)))  # callable more than once
    out, fn, aux = tff.vjp(lambda a: (a.exp(), {"a": a * 3}), x, has_aux=True)
    tout, tfn, taux = tfunc.vjp(lambda a: (a.exp(), {"a": a * 3}), tx, has_aux=True)
    assert_tree_close((out, fn(w), aux), (tout, tfn(tw), taux))


def test_vjp_errors():
    x = tf.tensor(arr((3,), 0))
    _, fn = tff.vjp(lambda a: (a.sin(), a.cos()), x)
    with pytest.raises(RuntimeError, match="Expected pytree structure of cotangents to be the same"):
        fn(tf.ones(3, dtype=tf.float64))
    with pytest.raises(RuntimeError, match="Mismatch in shape: grad_output\\[1\\] has a shape of \\(2,\\)"):
        fn((tf.ones(3, dtype=tf.float64), tf.ones(2, dtype=tf.float64)))
    with pytest.raises(NotImplementedError, match="create_graph=True"):
        fn((x, x), create_graph=True)
    with pytest.raises(RuntimeError, match="All outputs of f must be floating-point"):
        tff.vjp(lambda a: (a > 0), x)
    with pytest.raises(RuntimeError, match="non-empty output"):
        tff.vjp(lambda a: (), x)


@few
@given(seed=seeds, n=st.integers(1, 4), m=st.integers(1, 3), argnums=st.sampled_from([0, 1, (0, 1)]))
def test_jacrev_jacfwd_parity(seed, n, m, argnums):
    def make(lib):
        return lambda x, w: (lib.tanh(w @ x), (x * x).sum())

    (x, tx), (w, tw) = pair(arr((n,), seed)), pair(arr((m, n), seed + 1))
    expected = tfunc.jacrev(make(torch), argnums)(tx, tw)
    assert_tree_close(tff.jacrev(make(tf), argnums)(x, w), expected)
    assert_tree_close(tff.jacfwd(make(tf), argnums)(x, w), tfunc.jacfwd(make(torch), argnums)(tx, tw))


def test_jacrev_dict_input_and_aux():
    a, b = arr((2, 2), 3), arr((2,), 4)

    def make(lib):
        return lambda p: (p["w"] @ p["b"], {"norm": (p["b"] ** 2).sum()})

    ours = tff.jacrev(make(tf), has_aux=True)({"w": tf.tensor(a), "b": tf.tensor(b)})
    theirs = tfunc.jacrev(make(torch), has_aux=True)({"w": torch.tensor(a), "b": torch.tensor(b)})
    assert_tree_close(ours, theirs)
    with pytest.raises(ValueError, match="jacrev: `chunk_size` should be greater than 0"):
        tff.jacrev(make(tf), chunk_size=0)


@few
@given(shape=shapes, seed=seeds)
def test_jvp_parity(shape, seed):
    def make(lib):
        return lambda x, y: (lib.sin(x) * y, (x * y).sum())

    (x, tx), (y, ty) = pair(arr(shape, seed)), pair(arr(shape, seed + 1))
    (u, tu), (v, tv) = pair(arr(shape, seed + 2)), pair(arr(shape, seed + 3))
    assert_tree_close(tff.jvp(make(tf), (x, y), (u, v)), tfunc.jvp(make(torch), (tx, ty), (tu, tv)))
    with pytest.raises(RuntimeError, match="Expected primals and tangents to be tuples"):
        tff.jvp(make(tf), x, u)


def test_linearize_parity():
    def make(lib):
        return lambda x, y: {"a": lib.sin(x) * y, "b": (x * y).sum()}

    (x, tx), (y, ty) = pair(arr((2, 3), 0)), pair(arr((2, 3), 1))
    out, fn = tff.linearize(make(tf), x, y)
    tout, tfn = tfunc.linearize(make(torch), tx, ty)
    assert_tree_close(out, tout)
    for seed in (2, 3):
        (u, tu), (v, tv) = pair(arr((2, 3), seed)), pair(arr((2, 3), seed + 10))
        assert_tree_close(fn(u, v), tfn(tu, tv))
    with pytest.raises(RuntimeError, match="expected tangents with the structure and shapes of primals"):
        fn(u)


# ----------------------------------------------------------------------------------------- vmap
@few
@given(shape=shapes, seed=seeds, data=st.data())
def test_vmap_parity_in_out_dims(shape, seed, data):
    nd = len(shape)
    in_dim = data.draw(st.integers(-nd, nd - 1), label="in_dim")
    out_dim = data.draw(st.integers(-nd, nd - 1), label="out_dim")  # per-sample outputs have nd - 1 + 1 dims
    (x, tx), (c, tc) = pair(arr(shape, seed)), pair(arr((), seed + 1))

    def make(lib):
        return lambda a, k: (lib.sin(a) * k, a.sum() + k)

    ours = tff.vmap(make(tf), in_dims=(in_dim, None), out_dims=(out_dim, 0))(x, c)
    theirs = tfunc.vmap(make(torch), in_dims=(in_dim, None), out_dims=(out_dim, 0))(tx, tc)
    assert_tree_close(ours, theirs)


@few
@given(seed=seeds)
def test_vmap_gradients_flow_through(seed):
    """vmap is differentiable: gradients of a loss of its output reach the batched and unbatched inputs."""
    a, w = arr((4, 3), seed), arr((3, 2), seed + 1)
    x, wx = tf.tensor(a, requires_grad=True), tf.tensor(w, requires_grad=True)
    tx, twx = torch.tensor(a, requires_grad=True), torch.tensor(w, requires_grad=True)
    tff.vmap(lambda r, m: (r @ m).tanh(), in_dims=(0, None))(x, wx).sum().backward()
    tfunc.vmap(lambda r, m: (r @ m).tanh(), in_dims=(0, None))(tx, twx).sum().backward()
    assert_tree_close((x.grad, wx.grad), (tx.grad, twx.grad))


def test_vmap_trees_nested_and_kwargs():
    (x, tx), (y, ty), (z, tz) = pair(arr((3, 2), 0)), pair(arr((2, 3), 1)), pair(arr((3,), 2))

    def make(lib):
        def f(pair_arg, d, scale=1.0):
            a, b = pair_arg
            return {"sum": (a + b) * scale, "z": [d["z"] * 2, d["k"]]}
        return f

    in_dims = ((0, 1), {"z": 0, "k": None})
    ours = tff.vmap(make(tf), in_dims=in_dims)((x, y), {"z": z, "k": z}, scale=2.0)
    theirs = tfunc.vmap(make(torch), in_dims=in_dims)((tx, ty), {"z": tz, "k": tz}, scale=2.0)
    assert_tree_close(ours, theirs)
    # nested vmap: an outer product
    assert_tree_close(tff.vmap(tff.vmap(lambda a, b: a * b, (None, 0)), (0, None))(z, x[:, 0]),
                      tfunc.vmap(tfunc.vmap(lambda a, b: a * b, (None, 0)), (0, None))(tz, tx[:, 0]))
    # out_dims=None for an unbatched output
    ours = tff.vmap(lambda a, b: (a * 2, b), in_dims=(0, None), out_dims=(0, None))(z, y)
    theirs = tfunc.vmap(lambda a, b: (a * 2, b), in_dims=(0, None), out_dims=(0, None))(tz, ty)
    assert_tree_close(ours, theirs)


def test_vmap_errors():
    x, y = tf.tensor(arr((3, 2), 0)), tf.tensor(arr((4, 2), 1))

    def f(a, b):
        return a + b

    with pytest.raises(ValueError, match=r"vmap: Expected all tensors to have the same size in the mapped dimension, "
                                         r"got sizes \[3, 4\] for the mapped dimension"):
        tff.vmap(f)(x, y)
    with pytest.raises(ValueError, match=r"vmap\(f, in_dims=\(0, 0\), \.\.\.\)\(<inputs>\): Got in_dim=0 for an input "
                                         r"but the input is of type <class 'float'>"):
        tff.vmap(f, in_dims=(0, 0))(x, 1.0)
    with pytest.raises(ValueError, match=r"Got in_dim=2 for some input, but that input is a Tensor of dimensionality "
                                         r"2 so expected in_dim to satisfy -2 <= in_dim < 2"):
        tff.vmap(f, in_dims=(2, None))(x, 1.0)
    with pytest.raises(ValueError, match="in_dims is not compatible with the structure of `inputs`"):
        tff.vmap(f, in_dims=(0, None, 0))(x, y)
    with pytest.raises(ValueError, match="expected `in_dims` to be int or a \\(potentially nested\\) tuple"):
        tff.vmap(f, in_dims=[0, 0])(x, y)
    with pytest.raises(ValueError, match="Got in_dim=0.5 for an input but in_dim must be either an integer"):
        tff.vmap(f, in_dims=(0.5, None))(x, 1.0)
    with pytest.raises(ValueError, match="vmap: Expected at least one Tensor to vmap over"):
        tff.vmap(f, in_dims=(None, None))(x, y)
    with pytest.raises(ValueError, match="got no inputs"):
        tff.vmap(lambda: x)()
    with pytest.raises(ValueError, match=r"vmap: chunk_size should be None or greater than 0. \(got 0\)"):
        tff.vmap(f, chunk_size=0)
    with pytest.raises(RuntimeError, match="Only allowed values for randomness are 'error', 'different', or 'same'"):
        tff.vmap(f, randomness="sometimes")
    with pytest.raises(ValueError, match="must only return Tensors, got type <class 'float'>"):
        tff.vmap(lambda a: 1.0)(x)
    with pytest.raises(ValueError, match="can not return a BatchedTensor when out_dim is None"):
        tff.vmap(lambda a: a * 2, out_dims=None)(x)
    with pytest.raises(ValueError, match="out_dims is not compatible with the structure of `outputs`"):
        tff.vmap(lambda a: (a, a), out_dims=(0, 0, 0))(x)


def test_vmap_randomness():
    x = tf.zeros(4, 6, dtype=tf.float64)

    def noisy(a):
        return a + tf.randn(6, dtype=tf.float64)

    with pytest.raises(RuntimeError, match="vmap: called random operation while in randomness error mode"):
        tff.vmap(noisy)(x)
    tf.manual_seed(0)
    same = tff.vmap(noisy, randomness="same")(x)
    assert np.allclose(same.numpy(), same.numpy()[:1])
    different = tff.vmap(noisy, randomness="different")(x)
    assert not np.allclose(different.numpy(), different.numpy()[:1])


# ----------------------------------------------------------------------------------------- functional_call
class Tied(tf.nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = tf.nn.Linear(3, 3)
        self.l2 = tf.nn.Linear(3, 3)
        self.l2.weight = self.l1.weight
        self.register_buffer("shift", tf.ones(3))

    def forward(self, x):
        return self.l2(self.l1(x)) + self.shift


class TorchTied(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = torch.nn.Linear(3, 3)
        self.l2 = torch.nn.Linear(3, 3)
        self.l2.weight = self.l1.weight
        self.register_buffer("shift", torch.ones(3))

    def forward(self, x):
        return self.l2(self.l1(x)) + self.shift


def tied_pair():
    torch.manual_seed(0)
    th = TorchTied().double()
    ours = Tied().double()
    ours.load_state_dict({k: v.detach().numpy() for k, v in th.state_dict().items()})
    return ours, th


@few
@given(seed=seeds)
def test_functional_call_values_and_gradients(seed):
    ours, th = mlp_pair(seed)
    names = [k for k, _ in th.named_parameters()]
    values = [arr(tuple(p.shape), seed + i) for i, (_, p) in enumerate(th.named_parameters())]
    p = {k: tf.tensor(v, requires_grad=True) for k, v in zip(names, values)}
    tp = {k: torch.tensor(v, requires_grad=True) for k, v in zip(names, values)}
    x, tx = pair(arr((4, 3), seed + 9))
    out, tout = tff.functional_call(ours, p, x), tfunc.functional_call(th, tp, tx)
    assert_tree_close(out, tout)
    (out ** 2).sum().backward()
    (tout ** 2).sum().backward()
    assert_tree_close({k: v.grad for k, v in p.items()}, {k: v.grad for k, v in tp.items()})
    # the module's own parameters are back and got no gradient
    assert_tree_close(dict(ours.named_parameters()), dict(th.named_parameters()))
    assert all(q.grad is None for q in ours.parameters())
    # a tuple of dicts (args as a tuple, kwargs as a dict) and the deprecated nn.utils.stateless alias
    half = len(names) // 2
    split = ({k: p[k] for k in names[:half]}, {k: p[k] for k in names[half:]})
    assert_tree_close(tff.functional_call(ours, split, (x,), {}), tout)
    with pytest.warns(FutureWarning, match="torch.func.functional_call"):
        assert_tree_close(tf.nn.utils.stateless.functional_call(ours, p, x), tout)


@pytest.mark.parametrize("build", [
    lambda lib: lib.nn.GRU(3, 4, batch_first=True),
    lambda lib: lib.nn.MultiheadAttention(3, 1, batch_first=True),
    lambda lib: lib.nn.Conv1d(3, 2, 2),
], ids=["GRU", "MultiheadAttention", "Conv1d"])
def test_functional_call_layers(build):
    torch.manual_seed(1)
    th = build(torch).double()
    ours = build(tf).double()
    ours.load_state_dict({k: v.detach().numpy() for k, v in th.state_dict().items()})
    values = {k: arr(tuple(v.shape), i) for i, (k, v) in enumerate(th.named_parameters())}
    p = {k: tf.tensor(v, requires_grad=True) for k, v in values.items()}
    tp = {k: torch.tensor(v, requires_grad=True) for k, v in values.items()}
    x, tx = pair(arr((2, 3, 3), 7))
    n_args = 3 if isinstance(th, torch.nn.MultiheadAttention) else 1
    out, tout = tff.functional_call(ours, p, (x,) * n_args), tfunc.functional_call(th, tp, (tx,) * n_args)
    out, tout = (out[0], tout[0]) if isinstance(tout, tuple) else (out, tout)
    assert_tree_close(out, tout)
    out.sum().backward()
    tout.sum().backward()
    assert_tree_close({k: v.grad for k, v in p.items()}, {k: v.grad for k, v in tp.items()})


def test_functional_call_parametrized_module():
    """The ``parametrizations.<name>.original`` key goes through the parametrization, as PyTorch."""
    def sym(lib):
        class Sym(lib.nn.Module):
            def forward(self, w):
                return w.triu() + w.triu(1).T
        return Sym()

    th, ours = torch.nn.Linear(2, 2, bias=False).double(), tf.nn.Linear(2, 2, bias=False).double()
    torch.nn.utils.parametrize.register_parametrization(th, "weight", sym(torch))
    tf.nn.utils.parametrize.register_parametrization(ours, "weight", sym(tf))
    (w, tw), (x, tx) = pair(arr((2, 2), 0)), pair(arr((3, 2), 1))
    key = "parametrizations.weight.original"
    original = ours.parametrizations.weight.original
    assert_tree_close(tff.functional_call(ours, {key: w}, x), tfunc.functional_call(th, {key: tw}, tx))
    assert ours.parametrizations.weight.original is original


def test_replace_all_batch_norm_modules_():
    net, tnet = tf.nn.Sequential(tf.nn.Linear(3, 3), tf.nn.BatchNorm1d(3)), torch.nn.Sequential(
        torch.nn.Linear(3, 3), torch.nn.BatchNorm1d(3))
    assert tff.replace_all_batch_norm_modules_(net) is net
    tfunc.replace_all_batch_norm_modules_(tnet)
    assert [k for k, _ in net.named_buffers()] == [k for k, _ in tnet.named_buffers()] == []
    assert net[1].track_running_stats is tnet[1].track_running_stats is False
    x = tf.tensor(arr((4, 3), 0), dtype=tf.float32)
    assert tff.debug_unwrap(x) is x


def test_functional_call_restores_after_an_error():
    class Boom(tf.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = tf.nn.Linear(2, 2)

        def forward(self, x):
            self.lin(x)
            raise ValueError("boom")

    m = Boom()
    before = {k: v for k, v in m.named_parameters()}
    new = {"lin.weight": tf.zeros(2, 2), "lin.bias": tf.zeros(2), "lin.extra": tf.ones(1)}
    with pytest.raises(ValueError, match="boom"):
        tff.functional_call(m, new, tf.ones(1, 2))
    after = dict(m.named_parameters())
    assert list(after) == list(before) and all(after[k] is before[k] for k in before)
    assert not hasattr(m.lin, "extra")  # a name the module lacked is removed again


def test_functional_call_tied_weights_and_buffers():
    ours, th = tied_pair()
    w, tw = pair(arr((3, 3), 5))
    s, ts = pair(arr((3,), 6))
    x, tx = pair(arr((2, 3), 7))
    for kw in ({}, {"tie_weights": False}):
        assert_tree_close(tff.functional_call(ours, {"l1.weight": w, "shift": s}, x, **kw),
                          tfunc.functional_call(th, {"l1.weight": tw, "shift": ts}, tx, **kw))
    assert_tree_close(tff.functional_call(ours, {"l1.weight": w, "l2.weight": w}, x),
                      tfunc.functional_call(th, {"l1.weight": tw, "l2.weight": tw}, tx))
    with pytest.raises(ValueError, match=r"functional_call got multiple values for keys \['l1.weight', 'l2.weight'\], "
                                         "which are tied. Consider using tie_weights=False"):
        tff.functional_call(ours, {"l1.weight": w, "l2.weight": w * 2}, x)
    assert_tree_close(tff.functional_call(ours, {"l1.weight": w, "l2.weight": w * 2}, x, tie_weights=False),
                      tfunc.functional_call(th, {"l1.weight": tw, "l2.weight": tw * 2}, tx, tie_weights=False))
    assert ours.l1.weight is ours.l2.weight


def test_functional_call_strict_and_dict_errors():
    ours, th = tied_pair()
    x, tx = pair(arr((2, 3), 7))
    bad = {"l1.weight": x[:, :3].T @ x[:, :3], "nope": x}
    tbad = {"l1.weight": tx[:, :3].T @ tx[:, :3], "nope": tx}
    with pytest.raises(RuntimeError) as theirs:
        tfunc.functional_call(th, tbad, tx, strict=True)
    with pytest.raises(RuntimeError) as mine:
        tff.functional_call(ours, bad, x, strict=True)
    assert str(mine.value) == str(theirs.value).replace("TorchTied", "Tied")
    assert "Unexpected key(s): 'nope'." in str(mine.value) and "Missing key(s): 'l1.bias'" in str(mine.value)
    with pytest.raises(ValueError, match=r"\['l1.bias'\] appeared in multiple dictionaries; behavior of functional "
                                         "call is ambiguous"):
        tff.functional_call(ours, ({"l1.bias": x[0]}, {"l1.bias": x[0]}), x)
    with pytest.raises(ValueError, match="Expected all elements of parameter_and_buffer_dicts to be dictionaries"):
        tff.functional_call(ours, ({"l1.bias": x[0]}, 3), x)
    with pytest.raises(ValueError, match="Expected parameter_and_buffer_dicts to be a dict, or a list/tuple of dicts"):
        tff.functional_call(ours, 3, x)


def test_functional_call_buffer_updates_written_back():
    """BatchNorm in training mode updates its running stats during the call: the module keeps its
    own, and the given dict sees the new ones, as PyTorch."""
    torch.manual_seed(0)
    ours, th = tf.nn.BatchNorm1d(3).double(), torch.nn.BatchNorm1d(3).double()
    x, tx = pair(arr((5, 3), 1))
    state = {"running_mean": tf.zeros(3, dtype=tf.float64), "running_var": tf.ones(3, dtype=tf.float64)}
    tstate = {"running_mean": torch.zeros(3, dtype=torch.float64), "running_var": torch.ones(3, dtype=torch.float64)}
    assert_tree_close(tff.functional_call(ours, state, x), tfunc.functional_call(th, tstate, tx))
    assert_tree_close(state, tstate)
    np.testing.assert_array_equal(ours.running_mean.numpy(), np.zeros(3))


# ----------------------------------------------------------------------------------------- the common patterns
def loss_fn(lib, model):
    def f(params, x, y):
        out = (tff if lib is tf else tfunc).functional_call(model, params, (x[None],))
        return ((out - y[None]) ** 2).mean()
    return f


@few
@given(seed=seeds, batch=st.integers(1, 5))
def test_per_sample_gradients_match_torch(seed, batch):
    ours, th = mlp_pair(seed)
    params = {k: v.detach() for k, v in ours.named_parameters()}
    tparams = {k: v.detach() for k, v in th.named_parameters()}
    (x, tx), (y, ty) = pair(arr((batch, 3), seed + 1)), pair(arr((batch, 2), seed + 2))
    ours_g = tff.vmap(tff.grad(loss_fn(tf, ours)), in_dims=(None, 0, 0))(params, x, y)
    theirs_g = tfunc.vmap(tfunc.grad(loss_fn(torch, th)), in_dims=(None, 0, 0))(tparams, tx, ty)
    assert_tree_close(ours_g, theirs_g)
    # their mean is the batch gradient
    full = tff.grad(lambda p: sum(loss_fn(tf, ours)(p, x[i], y[i]) for i in range(batch)) / batch)(params)
    assert_tree_close({k: v.mean(0) for k, v in ours_g.items()}, {k: torch.tensor(v.numpy()) for k, v in full.items()})


@few
@given(seed=seeds, n_models=st.integers(1, 4))
def test_ensembling_with_stack_module_state(seed, n_models):
    pairs = [mlp_pair(seed + i) for i in range(n_models)]
    models, tmodels = [p[0] for p in pairs], [p[1] for p in pairs]
    params, buffers = tff.stack_module_state(models)
    tparams, tbuffers = tfunc.stack_module_state(tmodels)
    assert_tree_close((params, buffers), (tparams, tbuffers))
    assert all(v.requires_grad and v.is_leaf for v in params.values())
    x, tx = pair(arr((6, 3), seed))

    def make(lib, base):
        return lambda p, b, data: (tff if lib is tf else tfunc).functional_call(base, (p, b), (data,))

    out = tff.vmap(make(tf, models[0]), in_dims=(0, 0, None))(params, buffers, x)
    tout = tfunc.vmap(make(torch, tmodels[0]), in_dims=(0, 0, None))(tparams, tbuffers, tx)
    assert_tree_close(out, tout)
    out.tanh().sum().backward()
    tout.tanh().sum().backward()
    assert_tree_close({k: v.grad for k, v in params.items()}, {k: v.grad for k, v in tparams.items()})
    assert all(q.grad is None for m in models for q in m.parameters())


def test_stack_module_state_errors():
    with pytest.raises(RuntimeError, match="stack_module_state: Expected at least one model, got 0."):
        tff.stack_module_state([])
    with pytest.raises(RuntimeError, match="Expected all models to have the same training/eval mode"):
        tff.stack_module_state([tf.nn.Linear(2, 2), tf.nn.Linear(2, 2).eval()])
    with pytest.raises(RuntimeError, match="Expected all models to be of the same class"):
        tff.stack_module_state([tf.nn.Linear(2, 2), tf.nn.Bilinear(2, 2, 2)])
    a, b = tf.nn.Linear(2, 2), tf.nn.Linear(2, 2)
    b.weight.requires_grad_(False)
    with pytest.raises(RuntimeError, match="Expected weight from each model to have the same .requires_grad"):
        tff.stack_module_state([a, b])


def test_functionalize_and_module_access():
    assert tf.func.functionalize(np.sin) is np.sin
    with pytest.raises(RuntimeError, match="received invalid argument for remove=views"):
        tff.functionalize(np.sin, remove="views")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tf.func.vmap is tff.vmap
