"""flip, roll, repeat, tile, repeat_interleave, unflatten, unfold, narrow, chunk, split, stack,
tril, triu, diag, diagonal, movedim and friends: float64 gradchecks over random shapes and
PyTorch parity of values, shapes and gradients."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tinyflow as tf
from tinyflow.testing import gradcheck

torch = pytest.importorskip("torch")

few = settings(max_examples=10, deadline=None)
shapes = st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple)
seeds = st.integers(0, 2**31 - 1)


def f64(shape, seed):
    return tf.tensor(np.random.default_rng(seed).standard_normal(shape), dtype=tf.float64, requires_grad=True)


def parity(fn, *arrays, theirs=None):
    """fn(tinyflow tensors) against (theirs or fn)(torch tensors): every output's shape, dtype and
    values, and the gradients of a random weighting of the float outputs."""
    theirs = theirs or fn
    grads = [a.dtype.kind == "f" for a in arrays]
    xs = [tf.tensor(a, requires_grad=g) for a, g in zip(arrays, grads)]
    ts = [torch.tensor(a, requires_grad=g) for a, g in zip(arrays, grads)]
    out, ref = fn(*xs), theirs(*ts)
    outs, refs = (list(out), list(ref)) if isinstance(ref, (tuple, list)) else ([out], [ref])
    assert len(outs) == len(refs)
    loss_tf, loss_th = None, None
    rng = np.random.default_rng(0)
    for o, r in zip(outs, refs):
        assert tuple(o.shape) == tuple(r.shape), (o.shape, r.shape)
        assert str(o.dtype) == str(r.dtype).replace("torch.", "")
        np.testing.assert_allclose(o.numpy(), r.detach().numpy(), rtol=1e-6, atol=1e-6)
        if r.requires_grad:
            w = rng.standard_normal(tuple(r.shape)).astype(np.float32)
            lt, lh = (o * tf.tensor(w)).sum(), (r * torch.tensor(w)).sum()
            loss_tf = lt if loss_tf is None else loss_tf + lt
            loss_th = lh if loss_th is None else loss_th + lh
    if loss_th is not None:
        loss_tf.backward()
        loss_th.backward()
        for x, t in zip(xs, ts):
            if t.requires_grad:
                np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-6, atol=1e-6)


@few
@given(shape=shapes, seed=seeds, data=st.data())
def test_shape_ops_gradcheck(shape, seed, data):
    nd = len(shape)
    x = f64(shape, seed)
    dim = data.draw(st.integers(-nd, nd - 1))
    n = shape[dim]
    dims = data.draw(st.lists(st.integers(0, nd - 1), unique=True, max_size=nd))
    gradcheck(lambda t: t.flip(dims), [x])
    shift = data.draw(st.integers(-5, 5))
    gradcheck(lambda t: t.roll(shift, dim), [x])
    gradcheck(lambda t: t.roll(3), [x])
    sizes = data.draw(st.lists(st.integers(1, 3), min_size=nd, max_size=nd + 1))
    gradcheck(lambda t: t.repeat(*sizes), [x])
    gradcheck(lambda t: t.tile((2,)), [x])
    reps = data.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    gradcheck(lambda t: t.repeat_interleave(tf.tensor(reps), dim=dim), [x])
    gradcheck(lambda t: t.repeat_interleave(2), [x])
    size = data.draw(st.integers(1, n))
    step = data.draw(st.integers(1, 3))
    gradcheck(lambda t: t.unfold(dim, size, step), [x])
    start = data.draw(st.integers(0, n - 1))
    gradcheck(lambda t: t.narrow(dim, start, n - start), [x])
    chunks = data.draw(st.integers(1, 4))
    gradcheck(lambda t: t.chunk(chunks, dim)[-1], [x])
    gradcheck(lambda t: t.movedim(0, -1), [x])
    if nd >= 2:
        k = data.draw(st.integers(-2, 2))
        gradcheck(lambda t: t.tril(k), [x])
        gradcheck(lambda t: t.triu(k), [x])
        gradcheck(lambda t: t.diagonal(k, dim, (dim + 1) % nd), [x])
    if nd <= 2:
        offset = data.draw(st.integers(-1, 1))
        gradcheck(lambda t: t.diag(offset), [x])


CASES = {
    "flip": lambda t: t.flip(0),
    "flip_dims": lambda t: t.flip(dims=(0, 2)),
    "flip_list": lambda t: torch.flip(t, [1, -1]) if isinstance(t, torch.Tensor) else tf.flip(t, [1, -1]),
    "fliplr": lambda t: t.fliplr(),
    "flipud": lambda t: t.flipud(),
    "roll": lambda t: t.roll(1, 0),
    "roll_flat": lambda t: t.roll(-5),
    "roll_many": lambda t: t.roll((1, -2), (0, 2)),
    "repeat": lambda t: t.repeat(2, 1, 3),
    "repeat_new_dims": lambda t: t.repeat(2, 1, 1, 2),
    "tile": lambda t: t.tile((2,)),
    "tile_many": lambda t: t.tile((2, 1, 1, 1)),
    "repeat_interleave": lambda t: t.repeat_interleave(2),
    "repeat_interleave_dim": lambda t: t.repeat_interleave(3, dim=1),
    "unflatten": lambda t: t.unflatten(2, (2, 2)),
    "unflatten_neg": lambda t: t.unflatten(-1, (-1, 2)),
    "unfold": lambda t: t.unfold(2, 2, 1),
    "unfold_step": lambda t: t.unfold(1, 2, 2),
    "narrow": lambda t: t.narrow(2, 1, 2),
    "narrow_neg": lambda t: t.narrow(-1, -3, 2),
    "chunk": lambda t: t.chunk(2, 2),
    "chunk_uneven": lambda t: t.chunk(3, 1),
    "chunk_more": lambda t: t.chunk(5, 0),
    "split_int": lambda t: t.split(3, 2),
    "split_list": lambda t: t.split([1, 3], dim=2),
    "split_fn": lambda t: (torch if isinstance(t, torch.Tensor) else tf).split(t, [1, 2], 1),
    "unbind": lambda t: t.unbind(1),
    "select": lambda t: t.select(1, -1),
    "movedim": lambda t: t.movedim(0, 2),
    "movedim_many": lambda t: t.movedim((0, 1), (2, 0)),
    "swapaxes": lambda t: t.swapaxes(0, 2),
    "flatten": lambda t: t.flatten(1),
    "flatten_mid": lambda t: t.flatten(0, 1),
    "ravel": lambda t: t.ravel(),
    "tril": lambda t: t.tril(),
    "triu_k": lambda t: t.triu(1),
    "tril_neg": lambda t: t.tril(-1),
    "diagonal": lambda t: t.diagonal(),
    "diagonal_off": lambda t: t.diagonal(1, 1, 2),
    "diagonal_neg": lambda t: t.diagonal(-1, 2, 0),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_shape_ops_match_torch(name):
    a = np.random.default_rng(3).standard_normal((2, 3, 4)).astype(np.float32)
    parity(CASES[name], a)
    parity(CASES[name], np.arange(24).reshape(2, 3, 4))


def test_matrix_ops_match_torch():
    rng = np.random.default_rng(4)
    v, m = rng.standard_normal(3).astype(np.float32), rng.standard_normal((3, 4)).astype(np.float32)
    for fn in [lambda t: t.diag(), lambda t: t.diag(1), lambda t: t.diag(-2)]:
        parity(fn, v)
        parity(fn, m)
    parity(lambda t: (torch if isinstance(t, torch.Tensor) else tf).tril(t, 1), m)
    parity(lambda t: (torch if isinstance(t, torch.Tensor) else tf).triu(t, -1), m)
    parity(lambda t: (torch if isinstance(t, torch.Tensor) else tf).diagonal(t, 0), m)
    parity(lambda t: t.trace(), m[:, :3].copy())


def test_stack_and_cat_match_torch():
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal((2, 3)).astype(np.float32)
    for dim in (0, 1, 2, -1):
        parity(lambda x, y, d=dim: tf.stack([x, y], d), a, b, theirs=lambda x, y, d=dim: torch.stack([x, y], d))
    parity(lambda x, y: tf.stack((x, y), axis=1), a, b, theirs=lambda x, y: torch.stack((x, y), axis=1))
    parity(lambda x, y: tf.cat([x, y], axis=1), a, b, theirs=lambda x, y: torch.cat([x, y], axis=1))
    parity(lambda x, y: tf.concat([x, y], -1), a, b, theirs=lambda x, y: torch.concat([x, y], -1))
    with pytest.raises(RuntimeError, match="stack"):
        tf.stack([tf.ones(2), tf.ones(3)])


def test_eye_meshgrid_broadcast():
    np.testing.assert_array_equal(tf.eye(3).numpy(), torch.eye(3).numpy())
    np.testing.assert_array_equal(tf.eye(2, 4, dtype=tf.int64).numpy(), torch.eye(2, 4, dtype=torch.int64).numpy())
    assert tf.eye(3).dtype == tf.float32 and tf.eye(2, dtype=tf.long).dtype == tf.int64
    x, y = tf.arange(3), tf.arange(2)
    for indexing in ("ij", "xy"):
        for ours, ref in zip(tf.meshgrid(x, y, indexing=indexing), torch.meshgrid(torch.arange(3), torch.arange(2),
                                                                                  indexing=indexing)):
            np.testing.assert_array_equal(ours.numpy(), ref.numpy())
    a, b = tf.broadcast_tensors(tf.ones(3, 1), tf.ones(2))
    assert a.shape == b.shape == (3, 2)
    assert tf.broadcast_shapes((3, 1), (2,)) == (3, 2)


def test_shape_op_errors():
    x = tf.ones(2, 3)
    with pytest.raises(RuntimeError, match="repeat"):
        x.repeat(2)
    with pytest.raises(RuntimeError, match="unfold"):
        x.unfold(1, 4, 1)
    with pytest.raises(IndexError, match="narrow"):
        x.narrow(1, 2, 2)
    with pytest.raises(RuntimeError, match="tril"):
        tf.ones(3).tril()
    with pytest.raises(RuntimeError, match="diag"):
        tf.ones(2, 2, 2).diag()
    with pytest.raises(RuntimeError, match="unflatten"):
        x.unflatten(1, (2, 2))
    with pytest.raises(IndexError, match="flip: dim 2"):
        x.flip(2)
    with pytest.raises(RuntimeError, match="repeat_interleave"):
        x.repeat_interleave(tf.tensor([1, 2]), dim=1)
