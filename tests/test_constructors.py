"""Creation and conversion as PyTorch spells them: dtype names, legacy constructors and type
names, .float()/.long()/..., new_* and *_like, from_numpy, eye, multinomial, manual_seed,
autograd.Variable, inference_mode."""
from __future__ import annotations

import numpy as np
import pytest

import tinyflow as tf
from tinyflow.autograd import Variable

torch = pytest.importorskip("torch")


def test_dtype_names_are_pytorchs():
    pairs = {"float": "float32", "double": "float64", "half": "float16", "long": "int64", "int": "int32",
             "int8": "int8", "uint8": "uint8", "int16": "int16", "short": "int16", "bool": "bool",
             "float32": "float32", "float64": "float64", "float16": "float16", "int32": "int32", "int64": "int64"}
    for name, dt in pairs.items():
        assert getattr(tf, name) == np.dtype(dt), name
        assert str(getattr(torch, name)) == "torch." + dt
    x = tf.ones(2)
    assert x.dtype == tf.float32 and x.dtype == tf.float and x.dtype != tf.double
    assert isinstance(x.dtype, tf.dtype)
    assert tf.ones(2, dtype=tf.long).dtype == tf.int64 and tf.zeros(1, dtype=tf.bool).dtype == tf.bool
    assert tf.finfo(tf.float32).eps == torch.finfo(torch.float32).eps
    assert tf.iinfo(tf.int32).max == torch.iinfo(torch.int32).max


def test_bfloat16_name():
    pytest.importorskip("ml_dtypes")
    assert tf.ones(2, dtype=tf.bfloat16).dtype == tf.bfloat16


@pytest.mark.parametrize("method, dtype", [("float", "float32"), ("double", "float64"), ("half", "float16"),
                                           ("long", "int64"), ("int", "int32"), ("bool", "bool"),
                                           ("byte", "uint8"), ("short", "int16"), ("char", "int8")])
def test_conversion_methods_match_torch(method, dtype):
    data = [[1.7, -2.2], [0.0, 3.5]]
    ours, ref = getattr(tf.tensor(data), method)(), getattr(torch.tensor(data), method)()
    assert str(ours.dtype) == dtype == str(ref.dtype).replace("torch.", "")
    np.testing.assert_array_equal(ours.numpy().astype(np.float64), ref.numpy().astype(np.float64))


def test_type_names_and_type_conversion():
    x = tf.ones(2, 3)
    assert x.type() == torch.ones(2, 3).type() == "torch.FloatTensor"
    for dt, name in [(tf.int64, "torch.LongTensor"), (tf.float64, "torch.DoubleTensor"), (tf.bool, "torch.BoolTensor"),
                     (tf.uint8, "torch.ByteTensor"), (tf.int32, "torch.IntTensor"), (tf.float16, "torch.HalfTensor")]:
        assert x.to(dt).type() == name
    assert x.type(tf.int32).dtype == tf.int32
    assert x.type("torch.LongTensor").dtype == tf.int64
    assert x.type(tf.DoubleTensor).dtype == tf.float64
    assert x.long().type(tf.float32).dtype == tf.float32


def test_legacy_constructors_match_torch():
    assert tf.FloatTensor(2, 3).shape == (2, 3) and tf.FloatTensor(2, 3).dtype == tf.float32
    assert tf.LongTensor([1.7, 2.2]).tolist() == torch.LongTensor([1.7, 2.2]).tolist()
    assert tf.LongTensor([1, 2]).dtype == tf.int64
    assert tf.DoubleTensor(np.ones(3)).dtype == tf.float64
    assert tf.ByteTensor([1, 2]).dtype == tf.uint8 and tf.BoolTensor([1, 0]).tolist() == [True, False]
    assert tf.IntTensor(4).shape == (4,) and tf.FloatTensor().shape == (0,)
    assert tf.Tensor([1, 2]).dtype == tf.float32 and tf.Tensor([1, 2]).tolist() == [1.0, 2.0]
    assert tf.Tensor(2, 3).shape == (2, 3)
    assert isinstance(tf.ones(2), tf.FloatTensor) and not isinstance(tf.ones(2), tf.LongTensor)
    assert isinstance(tf.ones(2).long(), tf.LongTensor) and isinstance(tf.ones(2), tf.Tensor)
    x = tf.ones(2, dtype=tf.int64)
    assert x.new(3).dtype == tf.int64 and x.new([1, 2]).tolist() == [1, 2]
    assert tf.FloatTensor(tf.tensor([1, 2])).dtype == tf.float32


def test_new_and_like_constructors_match_torch():
    x, t = tf.ones(2, 3, dtype=tf.float64), torch.ones(2, 3, dtype=torch.float64)
    cases = [
        (lambda a: a.new_zeros(4), None), (lambda a: a.new_zeros((2, 2)), None), (lambda a: a.new_ones(3, 1), None),
        (lambda a: a.new_full((2,), 7), None), (lambda a: a.new_empty(5), None),
        (lambda a: a.new_tensor([1, 2]), None), (lambda a: a.new_zeros(2, dtype=tf.int64), lambda a: a.new_zeros(2, dtype=torch.int64)),
    ]
    for ours, theirs in cases:
        o, r = ours(x), (theirs or ours)(t)
        assert tuple(o.shape) == tuple(r.shape) and str(o.dtype) == str(r.dtype).replace("torch.", "")
        if "empty" not in str(ours.__code__.co_names):
            np.testing.assert_array_equal(o.numpy(), r.numpy())
    assert x.new_tensor([1, 2], requires_grad=True).requires_grad
    ints = tf.tensor([[1, 2]], dtype=tf.int32)
    for fn in ("zeros_like", "ones_like", "empty_like"):
        assert getattr(tf, fn)(ints).dtype == tf.int32 and getattr(tf, fn)(ints).shape == (1, 2)
    assert tf.full_like(ints, 4).tolist() == [[4, 4]] and tf.full_like(ints, 4).dtype == tf.int32
    assert tf.rand_like(x).dtype == tf.float64 and tf.randn_like(x).shape == (2, 3)
    r = tf.randint_like(ints, 5)
    assert r.dtype == tf.int32 and r.shape == (1, 2) and 0 <= r.min().item() and r.max().item() < 5
    r = tf.randint_like(x, 3, 6)
    assert r.dtype == tf.float64 and 3 <= r.min().item() and r.max().item() < 6


def test_from_numpy_shares_memory():
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    t = tf.from_numpy(a)
    assert t.dtype == tf.int32 and t.shape == (2, 3)
    a[0, 0] = 42
    assert t[0, 0].item() == 42
    t.add_(1)
    assert a[1, 2] == 6
    with pytest.raises(TypeError, match="from_numpy"):
        tf.from_numpy([1, 2])


def test_flatten_matches_torch():
    a = np.arange(24.0).reshape(2, 3, 4)
    for args in [(), (1,), (0, 1), (-2, -1), (1, 1)]:
        assert tf.tensor(a).flatten(*args).shape == tuple(torch.tensor(a).flatten(*args).shape)
        assert tf.flatten(tf.tensor(a), *args).shape == tuple(torch.flatten(torch.tensor(a), *args).shape)
    assert tf.tensor(3.0).flatten().shape == (1,)


def test_multinomial_and_manual_seed():
    tf.manual_seed(0)
    probs = tf.tensor([[0.0, 10.0, 0.0], [1.0, 1.0, 2.0]])
    a = probs.multinomial(500, replacement=True)
    assert a.dtype == tf.int64 and a.shape == (2, 500)
    assert (a[0] == 1).all().item()
    counts = np.bincount(a[1].numpy(), minlength=3) / 500
    np.testing.assert_allclose(counts, [0.25, 0.25, 0.5], atol=0.08)
    tf.manual_seed(0)
    b = tf.multinomial(probs, 500, replacement=True)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    c = tf.tensor([1.0, 2.0, 3.0, 4.0]).multinomial(4)
    assert sorted(c.tolist()) == [0, 1, 2, 3]
    with pytest.raises(RuntimeError, match="without replacement"):
        tf.tensor([1.0, 0.0]).multinomial(2)
    with pytest.raises(RuntimeError, match="non-negative"):
        tf.tensor([1.0, -1.0]).multinomial(1)
    tf.manual_seed(3)
    x1 = tf.randn(4)
    tf.manual_seed(3)
    assert tf.randn(4).equal(x1)


def test_bernoulli_and_normal():
    tf.manual_seed(1)
    p = tf.full((2000,), 0.3)
    draws = tf.bernoulli(p)
    assert draws.dtype == tf.float32 and abs(draws.mean().item() - 0.3) < 0.05
    n = tf.normal(2.0, 0.5, size=(3000,))
    assert abs(n.mean().item() - 2.0) < 0.05 and abs(n.std().item() - 0.5) < 0.05
    m = tf.normal(tf.zeros(2, 3), tf.ones(3))
    assert m.shape == (2, 3)


def test_variable_and_inference_mode():
    a = tf.ones(2)
    assert Variable(a) is a
    v = Variable(a, requires_grad=True)
    assert v.requires_grad and not a.requires_grad
    (v * 2).sum().backward()
    assert v.grad.tolist() == [2.0, 2.0]
    assert tf.autograd.Variable([1.0, 2.0]).dtype == tf.float32
    with tf.inference_mode():
        assert not (v * 2).requires_grad
    with tf.inference_mode(False):
        assert (v * 2).requires_grad


def test_axis_alias_everywhere():
    x = tf.tensor([[1.0, 5.0], [3.0, 2.0]])
    assert x.sum(axis=0).tolist() == [4.0, 7.0]
    assert tf.sum(x, axis=1).tolist() == [6.0, 5.0]
    assert x.mean(axis=1).tolist() == [3.0, 2.5]
    assert x.argmax(axis=1).tolist() == [1, 0]
    assert x.std(axis=0).shape == (2,) and x.var(axis=1, keepdim=True).shape == (2, 1)
    assert x.prod(axis=0).tolist() == [3.0, 10.0]
    assert x.cumsum(axis=0).tolist() == [[1.0, 5.0], [4.0, 7.0]]
    assert tf.max(x, axis=1).values.tolist() == [5.0, 3.0]
    assert x.any(axis=0).tolist() == [True, True] and x.all(axis=1).shape == (2,)
    with pytest.raises(TypeError, match="dim or axis"):
        x.sum(dim=0, axis=0)


def _lib(t):
    return torch if isinstance(t, torch.Tensor) else tf


def test_std_var_correction_and_unbiased_match_torch():
    a = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    x, t = tf.tensor(a), torch.tensor(a)
    for call in [lambda m: m.std(), lambda m: m.std(1), lambda m: m.std(1, False), lambda m: m.std(False),
                 lambda m: m.std(0, unbiased=False, keepdim=True), lambda m: m.std(dim=1, correction=0),
                 lambda m: m.var(1, True, True), lambda m: m.var(correction=2), lambda m: m.var(dim=(0, 1)),
                 lambda m: _lib(m).std_mean(m, 1)[0], lambda m: _lib(m).var_mean(m, 0, correction=0)[1]]:
        np.testing.assert_allclose(call(x).numpy(), call(t).numpy(), rtol=1e-5, atol=1e-6)


def test_all_any_match_torch():
    a = np.array([[0, 1, 2], [3, 4, 5]])
    for call in [lambda m: m.all(), lambda m: m.any(), lambda m: m.all(1), lambda m: m.any(0, keepdim=True),
                 lambda m: (m > 0).all(dim=-1)]:
        o, r = call(tf.tensor(a)), call(torch.tensor(a))
        assert o.dtype == tf.bool and o.tolist() == r.tolist()


def test_size_indices_random_and_device_queries():
    x = tf.ones(2, 3)
    assert x.size() == tf.Size([2, 3]) and tf.Size([2, 3]).numel() == 6
    assert x.ndimension() == 2 and x.get_device() == -1
    np.testing.assert_array_equal(tf.tril_indices(3, 3).numpy(), torch.tril_indices(3, 3).numpy())
    np.testing.assert_array_equal(tf.triu_indices(3, 4, 1).numpy(), torch.triu_indices(3, 4, 1).numpy())
    tf.manual_seed(0)
    r = tf.empty(200, dtype=tf.long).random_(3)
    assert r.dtype == tf.int64 and set(r.tolist()) == {0, 1, 2}
    r = tf.empty(200).random_(2, 5)
    assert r.dtype == tf.float32 and set(r.tolist()) == {2.0, 3.0, 4.0}


def test_randint_takes_pytorchs_two_signatures():
    torch = pytest.importorskip("torch")
    for args, kwargs in [((50, (1, 3)), {}), ((0, 5, (2,)), {}), ((5,), {"size": (4,)}), ((3, 9), {"size": [2, 2]})]:
        ours, theirs = tf.randint(*args, **kwargs), torch.randint(*args, **kwargs)
        assert tuple(ours.shape) == tuple(theirs.shape) and ours.dtype == tf.int64
        low, high = (0, args[0]) if len(args) == 1 or isinstance(args[1], tuple) else args[:2]
        assert low <= ours.min().item() and ours.max().item() < high
    with pytest.raises(RuntimeError, match="randint: expects low < high, but got low=5 >= high=5"):
        tf.randint(5, 5, (2,))
    with pytest.raises(TypeError, match="randint: got two sizes"):
        tf.randint(5, (2,), (3,))
