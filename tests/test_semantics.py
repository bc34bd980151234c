"""PyTorch's semantics where tinyflow used to differ: ``.data``, in-place ops in the graph, dtype
promotion, PyTorch's indexing rule, squeeze/unsqueeze ranges, 0-d reductions, pow at 0, the
RuntimeError classes, and tf.save/tf.load's PyTorch keywords. Each is compared with PyTorch
(CPU) where PyTorch has the behaviour; the new ops (Fill, SetItem) have float64 gradchecks."""
from __future__ import annotations

import operator

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import tinyflow as tf
import tinyflow.nn as nn
import tinyflow.nn.functional as F
from tinyflow.promotion import promote_types, result_type
from tinyflow.testing import gradcheck

seeds = st.integers(0, 2**31 - 1)


def both(values, dtype=np.float64, requires_grad=True):
    """The same values as a tinyflow and a torch leaf."""
    arr = np.asarray(values, dtype=dtype)
    return (tf.tensor(arr, requires_grad=requires_grad),
            torch.tensor(arr, requires_grad=requires_grad))


def close(t, ref, **kw):
    np.testing.assert_allclose(np.asarray(t.numpy() if hasattr(t, "numpy") else t),
                               ref.detach().numpy(), **({"rtol": 1e-6, "atol": 1e-8} | kw))


# ------------------------------------------------------------------------------------ .data
def test_data_is_a_tensor_over_the_same_array_outside_autograd():
    x = tf.randn(3, requires_grad=True)
    d = x.data
    assert isinstance(d, tf.Tensor) and not d.requires_grad and d.is_leaf and d.grad_fn is None
    assert d.array is x.array and isinstance(x.array, np.ndarray)  # .array: the raw array, no copy
    d.add_(1.0)
    np.testing.assert_array_equal(x.numpy(), d.numpy())
    # PyTorch's .data has its own version counter: edits through it are not seen by autograd
    tx = torch.randn(3, requires_grad=True)
    before = tx._version
    tx.data.add_(1.0)
    assert tx._version == before and x._version == 0


def test_data_edits_are_not_detected_at_backward_as_in_pytorch():
    def run(lib, x):
        y = x.exp()
        y.data.zero_()  # corrupts what exp saved: PyTorch does not notice either
        y.sum().backward()
        return x.grad

    x, tx = both([0.5, 1.0])
    close(run(tf, x), run(torch, tx))


def test_the_data_idioms_of_real_programs():
    tf.manual_seed(0)
    lin = nn.Linear(4, 3)
    lin.weight.data.normal_(0, 0.02)  # DCGAN's init
    lin.bias.data.fill_(0)
    assert abs(float(lin.weight.std())) < 0.1 and lin.bias.abs().sum().item() == 0
    h = tf.randn(2, 3, requires_grad=True) * 2
    assert h.data.view(-1).shape == (6,) and not h.data.view(-1).requires_grad
    # p.data.add_(g, alpha=-lr): a hand-written SGD step, as in PyTorch
    w, tw = both(np.random.default_rng(0).standard_normal((3, 2)))
    for p in (w, tw):
        for _ in range(3):
            loss = (p * p).sum()
            loss.backward()
            p.data.add_(p.grad.data, alpha=-0.1)
            p.grad.data.zero_()
    close(w, tw)


def test_assigning_data_replaces_the_storage_and_keeps_the_parameter():
    lin = nn.Linear(3, 2)
    w = lin.weight
    lin.weight.data = tf.zeros(4, 3)  # shape may change, as in PyTorch
    assert lin.weight is w and w.shape == (4, 3) and w.requires_grad
    assert lin.weight.data.shape == (4, 3)
    lin.bias.data = tf.ones(4)
    opt = tf.optim.SGD(lin.parameters(), lr=0.1, momentum=0.9)
    lin(tf.ones(2, 3)).sum().backward()
    opt.step()  # a Tensor assigned to .data used to crash SGD, Adam and save
    adam = tf.optim.Adam(lin.parameters())
    adam.step()
    np.testing.assert_allclose(lin.bias.numpy(), 1 - 0.1 * 2 - 1e-3, rtol=1e-5)
    with pytest.raises(TypeError, match="only assign a Tensor"):
        lin.weight.data = np.zeros((4, 3))


def test_save_after_data_assignment(tmp_path):
    lin = nn.Linear(3, 2)
    lin.weight.data = tf.ones(2, 3)
    tf.save(lin.state_dict(), tmp_path / "m.ckpt")
    assert tf.load(tmp_path / "m.ckpt")["weight"].tolist() == [[1.0] * 3] * 2


# ------------------------------------------------------------------------------ in-place ops
def test_residual_block_with_inplace_add_matches_pytorch():
    rng = np.random.default_rng(1)
    xs, ws = rng.standard_normal((2, 4)), [rng.standard_normal((4, 4)) for _ in range(2)]

    def block(lib, x, w1, w2):
        identity = x
        out = (x @ w1).relu()
        out = out @ w2
        out += identity  # torchvision's BasicBlock
        out = out.relu()
        return out.sum()

    x, tx = both(xs)
    (w1, tw1), (w2, tw2) = both(ws[0]), both(ws[1])
    block(tf, x, w1, w2).backward()
    block(torch, tx, tw1, tw2).backward()
    for a, b in ((x, tx), (w1, tw1), (w2, tw2)):
        close(a.grad, b.grad)


def test_loss_accumulated_in_place_as_in_char_rnn():
    w, tw = both([0.5, -1.0, 2.0])

    def run(lib, w):
        loss = 0
        for i in range(3):
            loss += ((w * (i + 1)) ** 2).sum()
        loss.backward()
        return loss

    close(run(tf, w), run(torch, tw))
    close(w.grad, tw.grad)


def test_inplace_rebases_history_and_earlier_uses_keep_the_old_value():
    def run(lib, a):
        x = a * 2
        y = x + 1  # recorded before the in-place op: its gradient goes to the old x
        x.mul_(a)  # x = (a * 2) * a, mul_ saves x's old value
        (x.sum() + (y * y).sum()).backward()
        return x

    a, ta = both([1.0, -2.0, 3.0])
    close(run(tf, a), run(torch, ta))
    close(a.grad, ta.grad)


@pytest.mark.parametrize("op", ["mul_", "div_", "pow_", "exp_", "sigmoid_", "tanh_", "sqrt_", "clamp_", "abs_"])
def test_inplace_methods_on_graph_tensors_match_pytorch(op):
    args = {"mul_": (3.0,), "div_": (2.0,), "pow_": (3.0,), "clamp_": (0.5, 2.0)}.get(op, ())

    def run(lib, a):
        x = a * 1.5
        getattr(x, op)(*args)
        (x * x).sum().backward()
        return x

    a, ta = both([0.5, 1.0, 2.0])
    close(run(tf, a), run(torch, ta))
    close(a.grad, ta.grad)


def test_inplace_on_a_view_moves_the_base_history():
    def run(lib, a, b):
        x = a * 1
        x[0].mul_(b)  # a view written in place: x's history takes it in (CopySlices)
        x[:, 1] += b
        x.t()[0].sub_(1.0)
        (x * x).sum().backward()
        return x

    rng = np.random.default_rng(2)
    (a, ta), (b, tb) = both(rng.standard_normal((3, 3))), both(rng.standard_normal(3))
    close(run(tf, a, b), run(torch, ta, tb))
    close(a.grad, ta.grad)
    close(b.grad, tb.grad)


def test_an_element_of_a_vector_is_a_view_as_in_pytorch():
    def run(lib, a):
        x = a * 1
        x[1].mul_(5)  # x[1] is a 0-d view: x changes too
        x[np.int64(2)].fill_(7.0)
        (x * x).sum().backward()
        return x

    a, ta = both([1.0, 2.0, 3.0])
    close(run(tf, a), run(torch, ta))
    close(a.grad, ta.grad)


def test_setitem_records_autograd_like_pytorch():
    def run(lib, h, idx):
        outs = lib.zeros(4, 3, dtype=h.dtype)
        for t in range(3):
            outs[t] = h * (t + 1)  # an RNN filling its outputs
        outs[3, idx] = h[:2]
        outs[0, :, None][1] = 5.0
        (outs * outs).sum().backward()
        return outs

    h, th = both([0.5, -1.0, 2.0])
    close(run(tf, h, tf.tensor([2, 0])), run(torch, th, torch.tensor([2, 0])))
    close(h.grad, th.grad)


def test_errors_where_pytorch_raises():
    w = tf.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf"):
        w.add_(1)
    with pytest.raises(RuntimeError, match="view of a leaf"):
        w[0].mul_(2)
    with tf.no_grad():
        w.add_(1)  # an optimizer's update
    y = w.exp()
    y += 1  # exp saved its output: an error at backward, not here (as PyTorch)
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        y.sum().backward()
    with pytest.raises(RuntimeError, match="can't be cast"):
        tf.tensor([1, 2]).add_(1.5)
    with pytest.raises(RuntimeError, match="can't be cast"):
        torch.tensor([1, 2]).add_(1.5)
    with pytest.raises(RuntimeError):
        tf.zeros(3).add_(tf.ones(2, 3))  # cannot broadcast its own tensor
    with pytest.raises(RuntimeError):
        torch.zeros(3).add_(torch.ones(2, 3))


def test_copy_fill_zero_gradients_match_pytorch():
    def run(lib, a, s):
        x = a * 2
        x[:2].copy_(s * 3)
        x[2:].fill_(s.sum())
        y = a * 1
        y.zero_()
        (x * x).sum().backward()
        return x

    a, ta = both([1.0, 2.0, 3.0, 4.0])
    s, ts = both([0.5, -0.5])
    close(run(tf, a, s), run(torch, ta, ts))
    close(a.grad, ta.grad)
    close(s.grad, ts.grad)


@given(seed=seeds, data=st.data())
@settings(max_examples=15)
def test_fill_and_setitem_gradcheck(seed, data):
    rng = np.random.default_rng(seed)
    base = tf.tensor(rng.standard_normal((3, 4)), requires_grad=True)
    index = data.draw(st.sampled_from([(0,), (slice(1, 3), 2), (Ellipsis, [0, 2]), (1, slice(None), None)]))
    sel_shape = np.zeros((3, 4))[tuple(np.asarray(i) if isinstance(i, list) else i for i in index)].shape
    value = tf.tensor(rng.standard_normal(sel_shape[-1:] if sel_shape else ()), requires_grad=True)

    def assign(b, v):
        out = b * 1
        out[index] = v
        return out

    gradcheck(assign, [base, value])
    scalar = tf.tensor(rng.standard_normal(()), requires_grad=True)
    gradcheck(lambda b, v: (b * 1).fill_(v), [base, scalar])
    gradcheck(lambda b, v: (b * 1).copy_(v), [base, tf.tensor(rng.standard_normal(4), requires_grad=True)])


# --------------------------------------------------------------------------- dtype promotion
DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]


def test_promote_types_matches_pytorch():
    for a in DTYPES:
        for b in DTYPES:
            expected = str(torch.promote_types(getattr(torch, a), getattr(torch, b))).replace("torch.", "")
            assert str(promote_types(a, b)) == expected, (a, b)
            assert tf.can_cast(a, b) == torch.can_cast(getattr(torch, a), getattr(torch, b)), (a, b)
    assert tf.result_type(tf.tensor([1, 2]), 2.5) == tf.promote_types("int64", "float32") == tf.float32


@given(dtypes=st.lists(st.sampled_from(["bool", "uint8", "int32", "int64", "float16", "float32", "float64"]),
                       min_size=2, max_size=2),
       zero_dims=st.lists(st.booleans(), min_size=2, max_size=2),
       scalar=st.sampled_from([None, 2, 2.5, True]))
def test_result_type_matches_pytorch(dtypes, zero_dims, scalar):
    ours, theirs = [], []
    for dt, zero in zip(dtypes, zero_dims):
        shape = () if zero else (2,)
        ours.append(tf.ones(*shape, dtype=dt))
        theirs.append(torch.ones(shape, dtype=getattr(torch, dt)))
    if scalar is not None:
        ours[1], theirs[1] = scalar, scalar
    want = str(torch.result_type(theirs[0], theirs[1])).replace("torch.", "")
    assert str(result_type(*ours)) == want
    for a, b, ta, tb in ((ours[0], ours[1], theirs[0], theirs[1]), (ours[1], ours[0], theirs[1], theirs[0])):
        for op in (operator.add, operator.mul, operator.sub, "maximum"):
            if op == "maximum":
                if not (isinstance(a, tf.Tensor) and isinstance(b, tf.Tensor)):
                    continue
                got, want = a.maximum(b), ta.maximum(tb)
            else:
                if op is operator.sub and (scalar is True or "bool" in dtypes):
                    continue  # PyTorch refuses to subtract bools
                got, want = op(a, b), op(ta, tb)
            assert str(got.dtype) == str(want.dtype).replace("torch.", ""), (op, a, b)
            np.testing.assert_allclose(got.numpy().astype(np.float64), want.numpy().astype(np.float64))


@pytest.mark.parametrize("expr", [
    "x / 2", "x / y", "x * 1.5", "x + 1", "1.5 - x", "x ** 2", "x ** 0.5", "2 ** x", "f + x", "f * 2.5",
    "f + d0", "x + d0", "h * 2.0", "h + x", "b + 1", "b + b2", "x.exp()", "x.sqrt()", "x.sigmoid()",
    "x.maximum(f)", "u + 1000", "u + x",
])
def test_binary_op_dtypes_match_pytorch(expr):
    def env(lib):
        return {
            "x": lib.tensor([1, 2, 3]), "y": lib.tensor([2, 2, 2]), "f": lib.tensor([1.0, 2.0, 3.0]),
            "d0": lib.tensor(2.0, dtype=lib.float64), "h": lib.tensor([1.0, 2.0, 3.0], dtype=lib.float16),
            "b": lib.tensor([True, False, True]), "b2": lib.tensor([False, False, True]),
            "u": lib.tensor(np.array([1, 2, 3], dtype=np.uint8)),
        }
    ours, theirs = eval(expr, {}, env(tf)), eval(expr, {}, env(torch))
    assert str(ours.dtype) == str(theirs.dtype).replace("torch.", ""), expr
    np.testing.assert_allclose(ours.numpy().astype(np.float64), theirs.numpy().astype(np.float64), rtol=1e-3)


def test_constructor_dtypes_match_pytorch():
    for arr in (np.array([1, 2], np.int32), np.array([1, 2], np.uint8), np.array([1, 2], np.int16),
                np.array([1.0], np.float16), np.array([1.0], np.float64), np.array([True])):
        assert str(tf.tensor(arr).dtype) == str(torch.tensor(arr).dtype).replace("torch.", "")
    for value in (1, 1.5, True, [1, 2], [1.0, 2], np.float64(1.0), np.int32(3)):
        assert str(tf.tensor(value).dtype) == str(torch.tensor(value).dtype).replace("torch.", ""), value
    for args in ((0, 10, 4), (-10, 0, 4), (-7, 7, 6), (3, -3, 5)):
        for dt in ("int64", "int32", "float32", "float64"):
            ours = tf.linspace(*args, dtype=dt)
            theirs = torch.linspace(*args, dtype=getattr(torch, dt))
            np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6)
            assert str(ours.dtype) == str(theirs.dtype).replace("torch.", "")
    for args in ((0, 1, 0.1), (5,), (1, 2.5, 0.5), (-1.0, 1.0, 0.25)):
        np.testing.assert_array_equal(tf.arange(*args).numpy(), torch.arange(*args).numpy())
        assert str(tf.arange(*args).dtype) == str(torch.arange(*args).dtype).replace("torch.", "")
    with pytest.raises(RuntimeError):
        tf.arange(5, 0)


def test_reduction_and_pow_dtypes_match_pytorch():
    for arr in (np.array([200, 100], np.uint8), np.array([True, True]), np.array([1, 2], np.int32)):
        assert str(tf.tensor(arr).sum().dtype) == str(torch.tensor(arr).sum().dtype).replace("torch.", "")
        assert tf.tensor(arr).sum().item() == torch.tensor(arr).sum().item()
    x = tf.tensor([1, 2, 3])
    assert x.sum(dtype=tf.float64).dtype == np.float64 and x.mean(dtype=tf.float32).item() == 2.0
    assert (x ** -1.0).dtype == np.float32
    for lib in (tf, torch):
        with pytest.raises(RuntimeError, match="negative integer powers"):
            lib.tensor([1, 2]) ** -1


def test_cat_stack_where_promote():
    i, f = tf.tensor([1, 2]), tf.tensor([0.5, 1.5])
    assert tf.cat([i, f]).dtype == torch.cat([torch.tensor([1, 2]), torch.tensor([0.5, 1.5])]).dtype.__str__().replace(
        "torch.", "")
    assert tf.stack([i, f]).dtype == np.float32
    cond = tf.tensor([True, False])
    assert tf.where(cond, i, 0.5).dtype == np.float32
    assert tf.where(cond, f.double(), 1).dtype == np.float64
    assert tf.where(cond, 1.0, 0.0).dtype == np.float32


# ---------------------------------------------------------------------------------- indexing
INDEX = st.one_of(st.integers(-2, 1), st.just(slice(None)), st.just(slice(1, None)),
                  st.just([0, 1, 1]), st.just([[1], [0]]), st.just(None))


@given(index=st.lists(INDEX, min_size=1, max_size=4), seed=seeds, ellipsis=st.booleans())
def test_indexing_places_dims_as_pytorch(index, seed, ellipsis):
    shape = (2, 3, 2, 2)
    arr = np.random.default_rng(seed).standard_normal(shape)
    if ellipsis:
        index = [*index[:1], Ellipsis, *index[1:]]
    if sum(i is not None and i is not Ellipsis for i in index) > len(shape):
        index = index[:len(shape)]

    def conv(lib, i):
        return lib.tensor(i) if isinstance(i, list) else i

    try:
        want = torch.tensor(arr)[tuple(conv(torch, i) for i in index)]
    except (IndexError, RuntimeError):
        return
    x = tf.tensor(arr, requires_grad=True)
    got = x[tuple(conv(tf, i) for i in index)]
    assert got.shape == tuple(want.shape), index
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    if got.numel():
        gradcheck(lambda t: t[tuple(conv(tf, i) for i in index)], [x])
        target = tf.tensor(arr) * 1
        target[tuple(conv(tf, i) for i in index)] = 7.0
        tt = torch.tensor(arr)
        tt[tuple(conv(torch, i) for i in index)] = 7.0
        np.testing.assert_array_equal(target.numpy(), tt.numpy())


def test_int_and_index_tensor_separated_by_a_slice():
    x = tf.arange(2 * 3 * 4 * 5).reshape(2, 3, 4, 5)
    tx = torch.arange(2 * 3 * 4 * 5).reshape(2, 3, 4, 5)
    idx = [0, 1, 1, 0, 1, 0, 0]
    for make in (lambda lib: (0, slice(None), lib.tensor(idx)),
                 lambda lib: (slice(None), 1, slice(None), lib.tensor(idx)),
                 lambda lib: (0, Ellipsis, lib.tensor(idx)),
                 lambda lib: (lib.tensor(1), slice(None), lib.tensor(idx))):
        got, want = x[make(tf)], tx[make(torch)]
        assert got.shape == tuple(want.shape)
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_squeeze_unsqueeze_ranges_as_pytorch():
    for shape in ((), (1,), (2, 1, 3)):
        x, tx = tf.zeros(*shape), torch.zeros(shape)
        n = len(shape)
        for d in range(-n - 3, n + 3):
            for name, lo, hi in (("squeeze", -max(n, 1), max(n, 1)), ("unsqueeze", -n - 1, n + 1)):
                if lo <= d < hi:
                    assert getattr(x, name)(d).shape == tuple(getattr(tx, name)(d).shape), (shape, name, d)
                else:
                    with pytest.raises(IndexError):
                        getattr(tx, name)(d)
                    with pytest.raises(IndexError):
                        getattr(x, name)(d)
    assert tf.zeros(1, 2, 1).squeeze((0, 2)).shape == (2,)


def test_reductions_of_a_0d_tensor():
    x, tx = both(3.0)
    for dim in (0, -1):
        close(x.sum(dim), tx.sum(dim))
        close(x.mean(dim, keepdim=True), tx.mean(dim, keepdim=True))
        values, indices = x.max(dim)
        tvalues, tindices = tx.max(dim)
        close(values, tvalues)
        assert indices.item() == tindices.item() == 0
    x.sum(0).backward()
    assert x.grad.item() == 1.0
    with pytest.raises(IndexError):
        x.sum(1)


def test_pow_gradients_at_zero_match_pytorch():
    base = [0.0, 0.0, 1.5, -2.0, 0.0]
    expo = [0.0, 2.0, 0.0, 3.0, 0.5]
    for p in (0.0, 0, 2.0, 3):
        x, tx = both(base)
        (x ** p).sum().backward()
        (tx ** p).sum().backward()
        close(x.grad, tx.grad)
    (x, tx), (e, te) = both(base), both(expo)
    (x ** e).sum().backward()
    (tx ** te).sum().backward()
    close(x.grad, tx.grad)
    close(e.grad, te.grad)


@given(seed=seeds)
@settings(max_examples=10)
def test_pow_gradcheck_away_from_zero(seed):
    rng = np.random.default_rng(seed)
    a = tf.tensor(rng.uniform(0.5, 2.0, (3,)), requires_grad=True)
    b = tf.tensor(rng.uniform(-2.0, 2.0, (3,)), requires_grad=True)
    gradcheck(lambda a, b: a ** b, [a, b])
    gradcheck(lambda a: a ** 0.0 + a ** 2.5, [a])


# --------------------------------------------------------------------------- RuntimeErrors
@pytest.mark.parametrize("case", [
    lambda lib, F: lib.ones(2, 3) @ lib.ones(2, 3),
    lambda lib, F: lib.ones(2, 3) + lib.ones(4),
    lambda lib, F: lib.ones(6).reshape(4, 2),
    lambda lib, F: lib.cat([lib.ones(2, 3), lib.ones(2, 4)]),
    lambda lib, F: lib.stack([lib.ones(2), lib.ones(3)]),
    lambda lib, F: lib.ones(2, 3).expand(4, 4),
    lambda lib, F: lib.ones(3).item(),
    lambda lib, F: F.linear(lib.ones(2, 3), lib.ones(4, 5)),
    lambda lib, F: lib.ones(2, 2, 2).t(),
    lambda lib, F: lib.ones(2, 3).max(),  # fine
])
def test_shape_errors_are_runtime_errors_as_in_pytorch(case):
    import torch.nn.functional as TF

    try:
        case(torch, TF)
    except RuntimeError:
        with pytest.raises(RuntimeError):
            case(tf, F)
    else:
        case(tf, F)


def test_backward_twice_and_nonscalar_backward_are_runtime_errors():
    x = tf.ones(2, requires_grad=True)
    y = (x * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="second time"):
        y.backward()
    with pytest.raises(RuntimeError):
        (x * 2).backward()


# --------------------------------------------------------------------- a program, imports swapped
_PROGRAM = '''
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.emb = nn.Embedding(10, 4)
        self.rnn = nn.LSTM(4, 6)
        self.fc = nn.Linear(6 + 4 * 4 * 4, 10)

    def forward(self, img, tokens, hidden):
        identity = self.conv(img)
        x = self.bn(self.conv(img))
        x += identity                                 # residual, in place (torchvision)
        x = F.relu(x)
        x = F.max_pool2d(x, 2).flatten(1)
        out, hidden = self.rnn(self.emb(tokens), hidden)
        h = out[-1]
        return self.fc(torch.cat([h, x], 1)), hidden

def weights_init(m):
    classname = m.__class__.__name__
    if classname.find("Conv") != -1:
        m.weight.data.normal_(0.0, 0.02)
    elif classname.find("BatchNorm") != -1:
        m.weight.data.normal_(1.0, 0.02)
        m.bias.data.fill_(0)

def run(state):
    net = Net()
    net.apply(weights_init)
    net.load_state_dict({k: torch.tensor(v) for k, v in state.items()})
    img = torch.tensor(IMG)
    tokens = torch.tensor(TOK)
    target = torch.tensor(TGT)
    hidden = (torch.zeros(1, 2, 6), torch.zeros(1, 2, 6))
    losses = []
    for step in range(3):
        net.zero_grad()
        hidden = tuple(h.detach() for h in hidden)
        loss = 0
        for t in range(2):
            out, hidden = net(img, tokens, hidden)
            loss += F.cross_entropy(out, target)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 0.5)
        for p in net.parameters():
            p.data.add_(p.grad, alpha=-0.1)
        losses.append(loss.item())
    return losses, {k: v.detach().numpy().copy() for k, v in net.state_dict().items()}
'''


def _execute(header: str, data: dict) -> dict:
    env = dict(data)
    exec(header + _PROGRAM, env)  # the same source text, only the imports differ
    return env


def test_a_program_with_data_idioms_and_inplace_residuals_runs_with_only_the_imports_changed():
    rng = np.random.default_rng(0)
    data = {"IMG": rng.standard_normal((2, 1, 8, 8)).astype(np.float32), "TOK": rng.integers(0, 10, (5, 2)),
            "TGT": rng.integers(0, 10, (2,))}
    theirs = _execute("import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n", data)
    ours = _execute("import tinyflow as torch\nimport tinyflow.nn as nn\nimport tinyflow.nn.functional as F\n", data)
    torch.manual_seed(0)
    state = {k: v.detach().numpy().copy() for k, v in theirs["Net"]().state_dict().items()}
    want_losses, want_state = theirs["run"](state)
    got_losses, got_state = ours["run"](state)
    np.testing.assert_allclose(got_losses, want_losses, rtol=1e-5)
    for k in want_state:
        np.testing.assert_allclose(got_state[k], want_state[k], rtol=1e-4, atol=1e-5, err_msg=k)


def test_inplace_on_a_saved_output_fails_at_backward_in_both():
    for lib in (tf, torch):
        x = lib.ones(3, requires_grad=True)
        y = (x * 1).relu()  # relu saves its output
        y += x
        with pytest.raises(RuntimeError, match="modified by an inplace operation|modified by an in-place operation"):
            y.sum().backward()


# ----------------------------------------------------------------------------- save / load
def test_loading_a_whole_module_says_what_to_do(tmp_path):
    """As torch 2.6+: saving a whole module pickles it; loading refuses unless weights_only=False."""
    import pickle

    tf.save(nn.Linear(2, 2), tmp_path / "m.ckpt")
    with pytest.raises(pickle.UnpicklingError, match=r"weights_only=False.*state_dict\(\)"):
        tf.load(tmp_path / "m.ckpt")
    opt = tf.optim.SGD(nn.Linear(2, 2).parameters(), lr=0.1)
    tf.save({"opt": opt}, tmp_path / "o.ckpt")
    back = tf.load(tmp_path / "o.ckpt", weights_only=False)["opt"]
    assert type(back) is tf.optim.SGD and back.param_groups[0]["lr"] == 0.1


def test_load_takes_pytorchs_keywords(tmp_path):
    model = nn.Linear(3, 2)
    path = tmp_path / "m.ckpt"
    tf.save(model.state_dict(), path, pickle_protocol=2, _use_new_zipfile_serialization=True)
    for where in (None, "cpu", tf.device("cpu"), {"cpu": "cpu"}, {"cuda:0": "cpu"},
                  lambda storage, loc: storage, lambda storage, loc: "cpu"):
        for weights_only in (True, False, None):
            state = tf.load(path, map_location=where, weights_only=weights_only)
            assert state["weight"].device == tf.device("cpu")
            np.testing.assert_array_equal(state["weight"].numpy(), model.weight.numpy())
    model.load_state_dict(tf.load(path, map_location="cpu", weights_only=True))
    with open(path, "rb") as f:
        assert tf.load(f, map_location=lambda s, loc: s)["bias"].shape == (2,)
    with pytest.raises(TypeError, match="map_location"):
        tf.load(path, map_location="tpu")
    with pytest.raises(TypeError):
        tf.load(path, strict=True)
