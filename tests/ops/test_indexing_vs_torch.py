"""Indexing against PyTorch, by property: ``x[index]``, ``x[index] = value`` and the gradient of
``x[index]``, for index expressions that mix ints (negative and out of range), slices with steps,
None, Ellipsis, Python bools, lists and tuples (nested too), and integer, bool and uint8 tensors
(0-d ones too), in every position, over tensors of 0 to 4 dims with size-0 and size-1 dims.

Each case must give torch's shape, dtype and values, or an error of torch's type (the type, not
the text). Where torch's own result is unspecified (an assignment whose repeated indices write
different values to one position) those positions are left out of the comparison.
"""
from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import tinyflow as tf
from tinyflow.testing import gradcheck

torch = pytest.importorskip("torch")

wide = settings(max_examples=300, deadline=None)  # cheap: about 1 s each
seeds = st.integers(0, 2**31 - 1)


class T:
    """A tensor in an index (or a value), built as a torch and a tinyflow tensor from one array."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array

    def __repr__(self) -> str:
        return f"T({self.array.dtype}{list(self.array.shape)}: {self.array.tolist()})"


def build(item: Any, lib: Any) -> Any:
    """``item`` with every T made a tensor of ``lib`` (torch or tinyflow), lists and tuples kept."""
    if isinstance(item, T):
        return lib.tensor(item.array)
    if isinstance(item, list):
        return [build(i, lib) for i in item]
    if isinstance(item, tuple):
        return tuple(build(i, lib) for i in item)
    return item


# ---------------------------------------------------------------------------- strategies
@st.composite
def shapes(draw: Any) -> tuple[int, ...]:
    """0 to 4 dims of sizes 0 to 4 (size 0 rarer: any int index errors on it)."""
    sizes = st.sampled_from((0,) + (1,) * 2 + (2,) * 3 + (3,) * 3 + (4,) * 2)
    return tuple(draw(sizes) for _ in range(draw(st.integers(0, 4))))


def position(draw: Any, n: int) -> int:
    """An index into a dim of size n: in [-n, n) but now and then (always when n is 0) outside."""
    if n == 0 or draw(st.integers(0, 29)) == 0:
        return draw(st.sampled_from((n, -n - 1, n + 3)))
    return draw(st.integers(-n, n - 1))


BATCHES = ((1,), (2,), (2,), (3,), (0,), (1, 2), (2, 2), (2, 1))


def batch_shape(draw: Any, common: tuple[int, ...]) -> tuple[int, ...]:
    """The shape of an index tensor or list: mostly the index's common one (or one that broadcasts
    to it), now and then any, so that several of them broadcast together or (rarely) do not."""
    if draw(st.integers(0, 5)) == 0:
        return draw(st.sampled_from(BATCHES + ((),)))
    shape = common[draw(st.integers(0, len(common) - 1)):] if draw(st.integers(0, 3)) == 0 else common
    return tuple(1 if draw(st.integers(0, 4)) == 0 else k for k in shape)


def int_array(draw: Any, n: int, shape: tuple[int, ...]) -> np.ndarray:
    return np.array([position(draw, n) for _ in range(int(np.prod(shape)))], dtype=np.int64).reshape(shape)


def sequence(draw: Any, n: int, shape: tuple[int, ...]) -> list | tuple:
    """A list or tuple of positions of the given shape (1-d or 2-d, inner lists or tuples), now and
    then with a 0-d tensor, a NumPy integer or a bool among its entries (torch makes them int64)."""
    outer = draw(st.sampled_from((list, tuple)))
    inner = draw(st.sampled_from((list, tuple)))

    def entry() -> Any:
        p = position(draw, n)
        kind = draw(st.sampled_from(("int",) * 8 + ("0-d", "numpy", "bool")))
        if kind == "0-d":
            return T(np.array(p))
        if kind == "numpy":
            return np.int64(p)
        return bool(p) if kind == "bool" and p in (0, 1) else p

    if len(shape) == 2:
        return outer(inner(entry() for _ in range(shape[1])) for _ in range(shape[0]))
    return outer(entry() for _ in range(shape[0] if shape else 1))


def int_tensor(draw: Any, n: int, shape: tuple[int, ...]) -> T:
    dtype = draw(st.sampled_from((np.int64,) * 6 + (np.int32,) * 3 + (np.int16, np.uint8, np.float32)))
    a = int_array(draw, n, shape)
    if dtype == np.uint8:  # a uint8 tensor is a mask in torch (deprecated): 0-d only, so it fits
        return T(np.array(draw(st.booleans()), dtype=np.uint8))
    return T(a.astype(dtype))


def mask(draw: Any, sizes: tuple[int, ...], as_list: bool) -> Any:
    """A bool mask over the next dims (sizes), now and then one entry too long; as a bool list
    (1-d) or a bool / uint8 tensor."""
    sizes = list(sizes)
    if draw(st.integers(0, 14)) == 0:
        sizes[-1] += 1
    values = np.array([draw(st.booleans()) for _ in range(int(np.prod(sizes)))], dtype=bool).reshape(sizes)
    if as_list:
        return values.tolist()
    return T(values.astype(np.uint8) if draw(st.integers(0, 9)) == 0 else values)


def one_slice(draw: Any, n: int) -> slice:
    bounds = st.one_of(st.none(), st.integers(-n - 2, n + 2), st.integers(-n, 0), st.integers(0, n))
    step = draw(st.sampled_from((None, None, None, 1, 2, 3, -1, 0) if draw(st.integers(0, 9)) == 0
                                else (None, None, 1, 2, 3)))
    return slice(draw(bounds), draw(bounds), step)


@st.composite
def indexes(draw: Any, shape: tuple[int, ...]) -> Any:
    """An index for a tensor of ``shape``: items that address its dims in order (an Ellipsis skips
    some), with None, bools and 0-d bool tensors between them; a bare item, a tuple, or (torch's
    older rule) a list of them."""
    ndim = len(shape)
    common = draw(st.sampled_from(BATCHES))
    items: list[Any] = []
    at = 0  # the next dim of x an item addresses
    ellipses = 0
    while len(items) < 6:
        left = ndim - at
        kind = draw(st.sampled_from(
            ("stop",) * (3 if left == 0 else 1)
            + ("int", "slice", "slice", "list", "tuple", "int tensor", "int tensor", "bool tensor", "bool list")
            * (1 if left > 0 else 0)
            + ("none", "bool", "0-d bool", "ellipsis", "float", "extra int")
        ))
        if kind == "stop":
            if ellipses and left > 0 and draw(st.integers(0, 4)) > 0:
                continue  # after an Ellipsis the items address the last dims: go on to the end
            break
        n = shape[at] if left > 0 else 0
        if kind == "int":
            items.append(position(draw, n) if draw(st.integers(0, 5)) else T(np.array(position(draw, n))))
            at += 1
        elif kind == "extra int":  # past the last dim: too many indices
            if draw(st.integers(0, 3)) == 0:
                items.append(0)
                at += 1
        elif kind == "slice":
            items.append(one_slice(draw, n))
            at += 1
        elif kind in ("list", "tuple"):
            seq = sequence(draw, n, batch_shape(draw, common))
            items.append(list(seq) if kind == "list" and isinstance(seq, tuple) else seq)
            at += 1
        elif kind == "int tensor":
            items.append(int_tensor(draw, n, batch_shape(draw, common)))
            at += 1
        elif kind in ("bool tensor", "bool list"):
            width = 1 if kind == "bool list" or left == 1 else draw(st.integers(1, min(2, left)))
            items.append(mask(draw, shape[at:at + width], as_list=kind == "bool list"))
            at += width
        elif kind == "none":
            items.append(None)
        elif kind == "bool":
            items.append(draw(st.booleans()))
        elif kind == "0-d bool":
            items.append(T(np.array(draw(st.booleans()))))
        elif kind == "float":
            if draw(st.integers(0, 3)) == 0:
                items.append(1.0)
        elif kind == "ellipsis":
            if ellipses and draw(st.integers(0, 3)) > 0:
                continue  # a second Ellipsis now and then
            items.append(Ellipsis)
            ellipses += 1
            at += draw(st.integers(0, left)) if left > 0 else 0
    form = draw(st.sampled_from(("tuple", "tuple", "tuple", "bare", "list")))
    if form == "bare" and len(items) == 1:
        return items[0]
    if form == "list" and items:
        return list(items)
    return tuple(items)


@st.composite
def cases(draw: Any) -> tuple[np.ndarray, Any]:
    shape = draw(shapes())
    values = np.random.default_rng(draw(seeds)).standard_normal(shape)
    return values, draw(indexes(shape))


def reads_past_shape(index: Any, ndim: int) -> bool:
    """True for a slice after a second Ellipsis that stands for dims: torch's index then points
    past the tensor's last dim and it reads the slice's length from beyond its shape (its result
    depends on memory it does not own; tinyflow raises IndexError)."""
    items = index if isinstance(index, tuple) else tuple(index) if isinstance(index, list) else (index,)
    specified = sum(
        (i.array.ndim if i.array.dtype in (np.bool_, np.uint8) else 1) if isinstance(i, T)
        else 0 if i is None or i is Ellipsis or isinstance(i, bool) else 1
        for i in items
    )
    ellipses = [n for n, i in enumerate(items) if i is Ellipsis]
    return (len(ellipses) > 1 and specified < ndim
            and any(isinstance(i, slice) for i in items[ellipses[1] + 1:]))


# ---------------------------------------------------------------------------- comparing
def outcome(fn: Callable[[], Any]) -> tuple[Any, BaseException | None]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's deprecations (list-as-tuple, uint8 masks)
        try:
            return fn(), None
        except Exception as exc:  # noqa: BLE001 - the type is what is compared
            return None, exc


def same_outcome(ours: Callable[[], Any], theirs: Callable[[], Any], what: str,
                 empty_selection: Callable[[], bool]) -> tuple[Any, Any]:
    """Run both; torch's error must be met by an error of its type (or a subclass). Returns the two
    results, or (None, None) when both raised, or when tinyflow refuses an out-of-range index that
    selects nothing (``empty_selection()``), which torch lets through unchecked."""
    ref, ref_err = outcome(theirs)
    got, got_err = outcome(ours)
    if ref_err is not None:
        assert got_err is not None, f"{what}: torch raises {type(ref_err).__name__}({ref_err}); tinyflow gives {got!r}"
        assert isinstance(got_err, type(ref_err)), (
            f"{what}: torch raises {type(ref_err).__name__}({ref_err}); tinyflow {type(got_err).__name__}({got_err})"
        )
        return None, None
    if isinstance(got_err, IndexError) and empty_selection():
        return None, None  # torch checks an index tensor's bounds only when it gathers something
    assert got_err is None, f"{what}: tinyflow raises {type(got_err).__name__}({got_err}); torch gives {ref!r}"
    return got, ref


def same_tensor(ours: Any, ref: Any, what: str) -> None:
    assert tuple(ours.shape) == tuple(ref.shape), f"{what}: shape {tuple(ours.shape)}, torch {tuple(ref.shape)}"
    assert str(ours.dtype) == str(ref.dtype).replace("torch.", ""), f"{what}: dtype {ours.dtype}, torch {ref.dtype}"
    np.testing.assert_array_equal(ours.numpy(), ref.detach().numpy(), err_msg=what)


def ref_numel(xt: Any, index: Any) -> int:
    """The number of elements torch's ``xt[index]`` selects."""
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        return xt[build(index, torch)].numel()


def grad_of(x: Any) -> np.ndarray:
    return np.zeros(tuple(x.shape)) if x.grad is None else x.grad.numpy()


# ---------------------------------------------------------------------------- getitem
@wide
@given(case=cases(), dtype=st.sampled_from(("float64",) * 4 + ("int32", "bool")))
def test_getitem_matches_torch(case: tuple[np.ndarray, Any], dtype: str) -> None:
    """Shape, dtype and values of x[index] (or torch's error type), and the gradient for float64:
    upstream gradients summed where an index repeats."""
    values, index = case
    assume(not reads_past_shape(index, values.ndim))
    grad = dtype == "float64"
    values = values.astype(dtype) if dtype != "bool" else values > 0
    x = tf.tensor(values, requires_grad=grad)
    xt = torch.tensor(values, requires_grad=grad)
    what = f"x of shape {values.shape} [{index!r}]"
    ours, ref = same_outcome(lambda: x[build(index, tf)], lambda: xt[build(index, torch)], what,
                             lambda: ref_numel(xt, index) == 0)
    if ref is None:
        return
    same_tensor(ours, ref, what)
    if grad:
        w = np.random.default_rng(1).standard_normal(tuple(ref.shape))
        (ours * tf.tensor(w)).sum().backward()
        (ref * torch.tensor(w)).sum().backward()
        np.testing.assert_allclose(grad_of(x), grad_of(xt), rtol=1e-12, atol=1e-12, err_msg=f"gradient of {what}")


@given(case=cases())
def test_getitem_gradcheck(case: tuple[np.ndarray, Any]) -> None:
    """Central differences agree with autograd for every index tinyflow accepts (float64, CPU)."""
    values, index = case
    x = tf.tensor(values, requires_grad=True)
    idx = build(index, tf)
    out, err = outcome(lambda: x[idx])
    if err is None and out.numel() and values.size <= 64:
        gradcheck(lambda t: t[idx], [x])


# ---------------------------------------------------------------------------- setitem
def value_shape(draw: Any, target: tuple[int, ...]) -> tuple[int, ...]:
    """A shape that broadcasts to target (leading dims dropped or added as 1s, dims made 1), or now
    and then one that does not."""
    shape = list(target[draw(st.integers(0, len(target))):])
    shape = [1 if draw(st.integers(0, 2)) == 0 else n for n in shape]
    shape = [1] * draw(st.sampled_from((0, 0, 0, 1, 2))) + shape
    if draw(st.integers(0, 14)) == 0:
        shape = shape + [2] if draw(st.booleans()) or not shape else shape[:-1] + [shape[-1] + 1]
    return tuple(shape)


def defined_positions(xt: Any, index: Any, value: Any) -> np.ndarray:
    """Where torch's ``xt[index] = value`` is defined: positions that no two differing values are
    written to (torch leaves the winner among repeated indices unspecified)."""
    ids = torch.arange(xt.numel()).reshape(xt.shape)
    if index is False:  # torch's x[False] = value writes nothing and checks nothing
        return np.ones(tuple(xt.shape), dtype=bool)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        written = ids[index]
    v = value.detach() if isinstance(value, torch.Tensor) else torch.tensor(value)
    while v.dim() > 0 and v.shape[0] == 1:
        v = v[0]  # torch drops a value's leading 1s
    vals = torch.broadcast_to(v, written.shape).numpy().reshape(-1)
    written = written.numpy().reshape(-1)
    ok = np.ones(xt.numel(), dtype=bool)
    first: dict[int, Any] = {}
    for pos, val in zip(written.tolist(), vals.tolist()):
        if pos in first and first[pos] != val:
            ok[pos] = False
        first.setdefault(pos, val)
    return ok.reshape(tuple(xt.shape))


@wide
@given(case=cases(), data=st.data())
def test_setitem_matches_torch(case: tuple[np.ndarray, Any], data: Any) -> None:
    """x[index] = value: a Python number, or a tensor that broadcasts to the selection (or not);
    with autograd recording, the gradients of x and of the value."""
    values, index = case
    assume(not reads_past_shape(index, values.ndim))
    dtype = data.draw(st.sampled_from(("float64", "float64", "int64")))
    values = values.astype(dtype) if dtype == "float64" else np.round(values * 10).astype(dtype)
    what = f"x of shape {values.shape} [{index!r}] = "
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            target = tuple(torch.tensor(values)[build(index, torch)].shape)
        except Exception:  # noqa: BLE001 - the assignment must then fail as torch's does
            target = ()
    kind = data.draw(st.sampled_from(("scalar", "tensor", "tensor", "tensor")))
    if kind == "scalar":
        value = data.draw(st.sampled_from((2.5, -3, True, 0)))
        val_ours = val_theirs = value
    else:
        shape = value_shape(data.draw, target)
        v = np.random.default_rng(data.draw(seeds)).standard_normal(shape)
        v = v.astype(dtype) if data.draw(st.integers(0, 9)) else v.astype("float32")  # now and then another dtype
        if dtype == "int64":
            v = np.round(v * 10).astype(dtype)
        value = T(v)
    record = dtype == "float64" and kind == "tensor" and value.array.dtype == np.float64
    what += repr(value)
    x0 = tf.tensor(values, requires_grad=record)
    xt0 = torch.tensor(values, requires_grad=record)
    if kind == "tensor":
        val_ours = tf.tensor(value.array, requires_grad=record)
        val_theirs = torch.tensor(value.array, requires_grad=record)
    x = x0 * 1 if record else x0
    xt = xt0 * 1 if record else xt0
    idx_ours, idx_theirs = build(index, tf), build(index, torch)

    def assign(t: Any, i: Any, v: Any) -> Any:
        t[i] = v
        return t

    ours, ref = same_outcome(lambda: assign(x, idx_ours, val_ours), lambda: assign(xt, idx_theirs, val_theirs), what,
                             lambda: ref_numel(xt, index) == 0)
    if ref is None:
        return
    assert tuple(ours.shape) == tuple(ref.shape) and str(ours.dtype) == str(ref.dtype).replace("torch.", "")
    ok = defined_positions(xt, idx_theirs, val_theirs)
    np.testing.assert_array_equal(ours.detach().numpy()[ok], ref.detach().numpy()[ok], err_msg=what)
    if record:
        w = np.random.default_rng(2).standard_normal(tuple(ref.shape))
        (ours * tf.tensor(w)).sum().backward()
        (ref * torch.tensor(w)).sum().backward()
        np.testing.assert_allclose(grad_of(x0), grad_of(xt0), rtol=1e-12, atol=1e-12, err_msg=f"x's gradient, {what}")
        np.testing.assert_allclose(grad_of(val_ours), grad_of(val_theirs), rtol=1e-12, atol=1e-12,
                                   err_msg=f"the value's gradient, {what}")


# ---------------------------------------------------------------------------- named cases
# The classes of behaviour the sweep found wrong, one case each, so a regression names its class.
idx = T(np.array([0, 3]))
NAMED: dict[str, Callable[[], Any]] = {
    # a tuple inside the index is one index tensor, as a list (was: several indexes, shape (2, 2))
    "tuple_in_index": lambda: (0, (2, 1), idx),
    "nested_tuples": lambda: (0, ((0, 1), (1, 2))),
    "tuple_of_tuples_alone": lambda: ((0, 1), (1, 2)),
    "tuple_beside_slice": lambda: (slice(None), (3, 0, 3)),
    # torch's older rule: a short list holding a slice, None, Ellipsis, a tensor or a sequence is a tuple
    "list_with_slice": lambda: [0, slice(None)],
    "list_with_none": lambda: [0, None],
    "list_with_ellipsis": lambda: [Ellipsis, 1],
    "list_with_tensor": lambda: [0, idx],
    "list_with_lists": lambda: [[0, 1], [1, 2]],
    "list_of_32_lists": lambda: [[0, 1]] * 32,  # 32 or more: one index tensor
    "list_of_numbers": lambda: [2, 0, 2],
    "list_of_floats": lambda: [1.7, -1.5],  # cut to ints
    "list_of_bools": lambda: [True, False, True],  # a mask
    "list_with_0d_tensor": lambda: [T(np.array(1)), 2],
    # ints select first; index tensors gather on what is left
    "int_slice_tensor": lambda: (0, slice(None), idx),
    "0d_tensor_as_int": lambda: (T(np.array(0)), slice(None), idx),
    # Python bools and 0-d bool tensors: a new dim of size 1 (taken) or 0, an index tensor there
    "bool_among_tensors": lambda: (0, True, slice(1, None), idx),
    "false_after_tensor": lambda: ([[0, 1]], slice(None), False),
    "0d_bool_tensor": lambda: (T(np.array(True)), 1),
    "0d_uint8_tensor": lambda: T(np.array(1, dtype=np.uint8)),
    "uint8_mask": lambda: T(np.array([1, 0, 1], dtype=np.uint8)),
    "mask_then_slice": lambda: (T(np.array([[True, False, True, True]] * 3)), slice(1, 4, 2)),
    # Ellipsis: each one stands for the dims no item addresses
    "two_ellipses": lambda: (Ellipsis, 0, Ellipsis),
    "ellipsis_after_tensor": lambda: (T(np.array([2])), Ellipsis, 1),
    # errors of torch's types
    "negative_step": lambda: (slice(None, None, -1),),
    "zero_step": lambda: slice(None, None, 0),
    "float": lambda: 1.0,
    "float_tensor": lambda: T(np.array([1.0])),
    "int16_tensor": lambda: T(np.array([1], dtype=np.int16)),
    "string": lambda: "a",
    "slice_in_list": lambda: (0, [slice(None)]),
    "ragged_list": lambda: (0, [[0, 1], [2]]),
    "tensor_in_list": lambda: (0, [idx, idx]),
    "too_many": lambda: (0, 0, 0, 0),
    "mask_of_wrong_size": lambda: T(np.array([True, False])),
    "empty_mask_of_wrong_size": lambda: (slice(None), slice(0, 0), T(np.zeros((2, 0), dtype=bool))),
    "out_of_range": lambda: (slice(None), [0, 4]),
    "int_out_of_range_before_step_error": lambda: (5, slice(None, None, -1)),
    "step_error_before_dtype_error": lambda: (T(np.array([0], dtype=np.int16)), slice(None, None, -1)),
}


@pytest.mark.parametrize("name", NAMED)
def test_named_index_matches_torch(name: str) -> None:
    values = np.random.default_rng(0).standard_normal((3, 4, 5))
    index = NAMED[name]()
    x, xt = tf.tensor(values, requires_grad=True), torch.tensor(values, requires_grad=True)
    what = f"{name}: x of shape (3, 4, 5) [{index!r}]"
    ours, ref = same_outcome(lambda: x[build(index, tf)], lambda: xt[build(index, torch)], what, lambda: False)
    if ref is None:
        return
    same_tensor(ours, ref, what)
    w = np.random.default_rng(1).standard_normal(tuple(ref.shape))
    (ours * tf.tensor(w)).sum().backward()
    (ref * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(grad_of(x), grad_of(xt), rtol=1e-12, atol=1e-12, err_msg=what)
    v = np.arange(float(max(ref.numel(), 1))).reshape(tuple(ref.shape) if ref.numel() else ())
    x2, xt2 = tf.tensor(values), torch.tensor(values)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        x2[build(index, tf)] = tf.tensor(v)
        xt2[build(index, torch)] = torch.tensor(v)
    ok = defined_positions(torch.tensor(values), build(index, torch), torch.tensor(v))
    np.testing.assert_array_equal(x2.numpy()[ok], xt2.numpy()[ok], err_msg=f"setitem {what}")


def test_tuple_inside_an_index_is_a_list() -> None:
    """The reported case: x[0, (2, 1), idx] is x[0, [2, 1], idx], shape (2,) as in torch."""
    x = tf.arange(60.0).reshape(3, 4, 5)
    i = tf.tensor([0, 3])
    assert x[0, (2, 1), i].shape == (2,)
    assert x[0, (2, 1), i].tolist() == x[0, [2, 1], i].tolist() == [10.0, 8.0]


def test_list_read_as_a_tuple_warns_as_torch() -> None:
    x = tf.zeros(3, 4)
    with pytest.warns(UserWarning, match="tuple"):
        assert x[[0, slice(None)]].shape == (4,)


def test_uint8_mask_warns_as_torch() -> None:
    x = tf.zeros(3)
    with pytest.warns(UserWarning, match="uint8"):
        assert x[tf.tensor([1, 0, 1], dtype=tf.uint8)].shape == (2,)


SET_NAMED: dict[str, tuple[Callable[[], Any], Callable[[], Any]]] = {
    # a list or a tuple as the value: torch refuses (TypeError); tinyflow takes a NumPy array (its
    # storage) as a tensor of x's dtype, where torch refuses it too (test_array_value_is_a_tensor)
    "list_value": (lambda: 0, lambda: [1.0, 2.0, 3.0, 4.0]),
    "tuple_value": (lambda: 0, lambda: (1.0, 2.0, 3.0, 4.0)),
    "none_value": (lambda: 0, lambda: None),
    "string_value": (lambda: 0, lambda: "a"),
    # through index tensors the value must have x's dtype; through a view it is converted
    "other_dtype_gathered": (lambda: [0, 1], lambda: T(np.ones(4, dtype=np.float32))),
    "other_dtype_view": (lambda: 0, lambda: T(np.ones(4, dtype=np.float32))),
    "other_dtype_mask_fill": (lambda: T(np.array([True, False, True])), lambda: T(np.ones(1, dtype=np.float32))),
    # leading 1-sized dims of the value are dropped
    "leading_ones": (lambda: 0, lambda: T(np.ones((1, 1, 4)))),
    "leading_ones_gathered": (lambda: [[0, 1]], lambda: T(np.ones((1, 1, 4)))),
    "leading_ones_on_mask": (lambda: T(np.array([True, False, True])), lambda: T(np.ones((1, 1)))),
    # x[False] = anything writes nothing
    "false_index": (lambda: False, lambda: T(np.ones(7))),
    "false_tensor_index": (lambda: T(np.array(False)), lambda: T(np.ones(7))),
    # the value's shape is checked before the indices' bounds
    "bad_value_and_bad_index": (lambda: [2, 5], lambda: T(np.ones(3))),
    "bad_index": (lambda: [2, 5], lambda: T(np.ones(4))),
    "mask_and_2d_value": (lambda: T(np.array([True, True, False])), lambda: T(np.ones((2, 2)))),
    # a uint8 mask with a one-element value: torch's masked_fill_ refuses it
    "uint8_mask_fill": (lambda: T(np.array([1, 0, 1], dtype=np.uint8)), lambda: 5.0),
    "uint8_mask_values": (lambda: T(np.array([1, 0, 1], dtype=np.uint8)), lambda: T(np.ones((2, 4)))),
    "duplicate_indices_same_value": (lambda: [0, 0, 2], lambda: 7.0),
}


@pytest.mark.parametrize("name", SET_NAMED)
def test_named_setitem_matches_torch(name: str) -> None:
    make_index, make_value = SET_NAMED[name]
    values = np.arange(12.0).reshape(3, 4)
    x, xt = tf.tensor(values), torch.tensor(values)
    index, value = make_index(), make_value()

    def assign(t: Any, lib: Any) -> Any:
        t[build(index, lib)] = build(value, lib)
        return t

    ours, ref = same_outcome(lambda: assign(x, tf), lambda: assign(xt, torch), f"{name}: x[{index!r}] = {value!r}",
                             lambda: False)
    if ref is not None:
        same_tensor(ours, ref, name)


def test_array_value_is_a_tensor_of_x_dtype() -> None:
    """tinyflow's one widening here: a NumPy array value is taken as tinyflow.tensor(value, dtype=x.dtype)."""
    x = tf.zeros(3, 4)
    x[0] = np.arange(4.0)
    x[[1, 2]] = np.ones((1, 1, 4), dtype=np.float64)  # leading 1s dropped, converted to float32
    assert x.dtype == np.float32 and x.tolist() == [[0.0, 1.0, 2.0, 3.0], [1.0] * 4, [1.0] * 4]


@pytest.mark.parametrize("index", [slice(None, None, -1), slice(None, None, 0), slice(1, None), (slice(None, None, -1),),
                                   (0, slice(None, None, -1))])
def test_a_zero_dim_tensor_reports_what_torch_reports_first(index: Any) -> None:
    """A lone slice's step is checked before the dims (x[::-1] on a 0-d tensor is ValueError), a
    slice inside a tuple after them (IndexError): PyTorch's order."""
    x, xt = tf.tensor(0.75), torch.tensor(0.75)
    same_outcome(lambda: x[index], lambda: xt[index], f"0-d tensor [{index!r}]", lambda: False)
