"""Zeros, infinities, NaN and overflow through the ops, against PyTorch: same values, no warning.

PyTorch computes ``log(0) = -inf``, ``1 / 0 = inf``, ``inf * 0 = nan`` and float16 overflow
without a word. NumPy, under tinyflow's CPU kernels, warns (a RuntimeWarning, which ``-W error``
or pytest's ``filterwarnings = error`` turn into an exception in the middle of a training step).
Each case runs the same program in both libraries under ``warnings.simplefilter("error")``, on
every special value (unary ops) or every pair of them (binary ops, as an outer grid in one call),
and compares dtype and values, NaN where torch has NaN. Integer division by zero is an error in
PyTorch (on the CPU): the same error type here.
"""
from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tinyflow as tf
import tinyflow.nn.functional as TFF

torch = pytest.importorskip("torch")
TF = torch.nn.functional

SPECIALS = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, 1e30, -1e30, 1e-30, float("inf"), float("-inf"), float("nan")]
FLOATS = ["float32", "float64", "float16", "bfloat16"]


def _tensor(lib: Any, values: Any, dtype: str, requires_grad: bool = False) -> Any:
    array = np.asarray(values, dtype=np.float64)
    if lib is torch:
        return torch.tensor(array, dtype=getattr(torch, dtype), requires_grad=requires_grad)
    return tf.tensor(array, dtype=getattr(tf, dtype), requires_grad=requires_grad)


def _numpy(t: Any) -> np.ndarray:
    if "bfloat16" in str(t.dtype):
        t = t.float()
    return np.asarray(t.detach().numpy())


# Where tinyflow keeps the exact answer and PyTorch's CPU formula gives NaN (reasoned, not pending):
# the inputs left out of the comparison, per op.
def _gelu_limits(dtype: str, x: np.ndarray) -> np.ndarray:
    """gelu(+-inf): tinyflow gives the limits of x Phi(x), inf and -0; torch's x * 0.5 * (1 +
    erf(x / sqrt 2)) gives inf * 0 = NaN (float64: at -inf; float32's vector path: at both)."""
    with np.errstate(over="ignore"):
        return np.isinf(x.astype(dtype))  # -1e30 is -inf in float16


def _quotient_overflows(dtype: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """fmod / remainder where |a / b| is beyond the dtype's range (1e30 by 1e-30 in float32):
    tinyflow gives C's exact fmod, torch's vector path a - trunc(a / b) * b = NaN."""
    with np.errstate(all="ignore"):
        return np.isfinite(a) & np.isfinite(b) & (b != 0) & (np.abs(a / b) > torch.finfo(getattr(torch, dtype)).max)


def _bfloat16_nan_sign(dtype: str, a: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
    """bfloat16 only: torch's sign(NaN) is 0 there (NaN in every other dtype), and its float -> bfloat16
    conversion sets NaN's sign bit, which copysign copies; tinyflow keeps NaN and its sign."""
    return np.isnan(a if b is None else b) & (dtype == "bfloat16")


KNOWN = {"gelu": _gelu_limits, "fmod": _quotient_overflows, "remainder": _quotient_overflows,
         "sign": _bfloat16_nan_sign, "copysign": _bfloat16_nan_sign}


def _same(name: str, got: Any, want: Any, skip: np.ndarray | None = None) -> None:
    assert str(got.dtype).replace("tinyflow.", "") == str(want.dtype).replace("torch.", ""), (name, got.dtype, want.dtype)
    g, w = _numpy(got).astype(np.float64), _numpy(want).astype(np.float64)
    assert g.shape == w.shape, (name, g.shape, w.shape)
    rtol = {"torch.float16": 2e-3, "torch.bfloat16": 1.6e-2}.get(str(want.dtype), 1e-5)
    atol = 1e-6 if rtol > 1e-5 else 0.0  # half types: erf(1e-30), sinc(1) are 0 to their precision
    bad = ~((np.isnan(g) & np.isnan(w)) | (g == w) | np.isclose(g, w, rtol=rtol, atol=atol))
    if skip is not None:
        bad &= ~skip
    assert not bad.any(), f"{name}: at {np.argwhere(bad)[:5].tolist()}: tinyflow {g[bad][:5]} torch {w[bad][:5]}"


def _run(fn: Callable[[Any, Any], Any], lib: Any, *args: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a NumPy RuntimeWarning would raise here
        return fn(lib, *args)


def _F(lib: Any) -> Any:
    return TF if lib is torch else TFF


def _function(name: str) -> Callable[..., Any]:
    """``L.<name>(*tensors)`` in either library."""
    return lambda L, *tensors: getattr(L, name)(*tensors)


UNARY: dict[str, Callable[[Any, Any], Any]] = {
    name: _function(name)
    for name in ["abs", "neg", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "reciprocal",
                 "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh",
                 "sigmoid", "relu", "erf", "erfc", "floor", "ceil", "round", "trunc", "frac", "sign", "square",
                 "lgamma", "digamma", "logit", "sinc", "nan_to_num", "isnan", "isinf", "isfinite", "signbit",
                 "deg2rad", "rad2deg"]
}
UNARY.update({
    "pow_2": lambda L, x: x ** 2, "pow_-1": lambda L, x: x ** -1, "pow_0.5": lambda L, x: x ** 0.5,
    "pow_-0.5": lambda L, x: x ** -0.5, "rpow_2": lambda L, x: 2 ** x, "div_0": lambda L, x: x / 0,
    "mul_inf": lambda L, x: x * float("inf"), "softplus": lambda L, x: _F(L).softplus(x),
    "gelu": lambda L, x: _F(L).gelu(x), "silu": lambda L, x: _F(L).silu(x), "elu": lambda L, x: _F(L).elu(x),
    "selu": lambda L, x: _F(L).selu(x), "mish": lambda L, x: _F(L).mish(x),
    "logsigmoid": lambda L, x: _F(L).logsigmoid(x), "leaky_relu": lambda L, x: _F(L).leaky_relu(x),
    "hardtanh": lambda L, x: _F(L).hardtanh(x), "softmax": lambda L, x: _F(L).softmax(x, 0),
    "log_softmax": lambda L, x: _F(L).log_softmax(x, 0), "sum": lambda L, x: x.sum(), "mean": lambda L, x: x.mean(),
    "prod": lambda L, x: x.prod(), "amax": lambda L, x: x.amax(), "amin": lambda L, x: x.amin(),
    "std": lambda L, x: x.std(), "var": lambda L, x: x.var(), "logsumexp": lambda L, x: x.logsumexp(0),
    "norm": lambda L, x: x.norm(), "cumsum": lambda L, x: x.cumsum(0), "cumprod": lambda L, x: x.cumprod(0),
    "to_float16": lambda L, x: x.to(L.float16), "normalize": lambda L, x: _F(L).normalize(x.reshape(1, -1)),
    "layer_norm": lambda L, x: _F(L).layer_norm(x, x.shape),
})

BINARY: dict[str, Callable[[Any, Any, Any], Any]] = {
    name: _function(name)
    for name in ["add", "sub", "mul", "div", "floor_divide", "remainder", "fmod", "pow", "atan2", "maximum",
                 "minimum", "fmax", "fmin", "hypot", "xlogy", "copysign", "logaddexp", "eq", "lt", "ge"]
}
BINARY.update({
    "div_floor": lambda L, a, b: L.div(a, b, rounding_mode="floor"),
    "div_trunc": lambda L, a, b: L.div(a, b, rounding_mode="trunc"),
    "mse_loss": lambda L, a, b: _F(L).mse_loss(a, b, reduction="none"),
    "l1_loss": lambda L, a, b: _F(L).l1_loss(a, b, reduction="none"),
    "smooth_l1_loss": lambda L, a, b: _F(L).smooth_l1_loss(a, b, reduction="none"),
})


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary_op_on_special_values(op: str, dtype: str) -> None:
    fn = UNARY[op]
    try:
        want = fn(torch, _tensor(torch, SPECIALS, dtype))
    except (RuntimeError, NotImplementedError, TypeError) as exc:
        with pytest.raises(type(exc)):
            _run(fn, tf, _tensor(tf, SPECIALS, dtype))
        return
    skip = KNOWN[op](dtype, np.asarray(SPECIALS)) if op in KNOWN else None
    _same(op, _run(fn, tf, _tensor(tf, SPECIALS, dtype)), want, skip)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", sorted(BINARY))
def test_binary_op_on_every_pair_of_special_values(op: str, dtype: str) -> None:
    fn = BINARY[op]
    a = np.repeat(SPECIALS, len(SPECIALS))
    b = np.tile(SPECIALS, len(SPECIALS))
    try:
        want = fn(torch, _tensor(torch, a, dtype), _tensor(torch, b, dtype))
    except (RuntimeError, NotImplementedError, TypeError) as exc:
        with pytest.raises(type(exc)):
            _run(fn, tf, _tensor(tf, a, dtype), _tensor(tf, b, dtype))
        return
    skip = KNOWN[op](dtype, a, b) if op in KNOWN else None
    _same(op, _run(fn, tf, _tensor(tf, a, dtype), _tensor(tf, b, dtype)), want, skip)


@pytest.mark.parametrize("op", ["log", "sqrt", "rsqrt", "reciprocal", "pow_-1", "div_0", "logit", "acos", "atanh",
                                "xlogy_self", "norm", "std", "log_softmax", "normalize"])
def test_gradient_through_special_values(op: str) -> None:
    """The backward of the ops where 0, inf and NaN meet (1 / 0, inf * 0): same values, no warning."""
    fn = {**UNARY, "xlogy_self": lambda L, x: L.xlogy(x, x)}[op]

    def grad(L: Any) -> np.ndarray:
        x = _tensor(L, SPECIALS, "float64", requires_grad=True)
        out = fn(L, x)
        out.backward(L.ones_like(out))
        return x.grad

    _same(op + " backward", _run(lambda L: grad(L), tf), grad(torch))


@pytest.mark.parametrize("op", ["add_", "sub_", "mul_", "div_", "pow_", "addcdiv_", "exp_", "log_", "sqrt_"])
def test_in_place_ops_on_special_values(op: str) -> None:
    def run(L: Any) -> Any:
        x = _tensor(L, SPECIALS, "float32")
        y = _tensor(L, SPECIALS[::-1], "float32")
        args = {"add_": (y,), "sub_": (y,), "mul_": (y,), "div_": (y,), "pow_": (y,), "addcdiv_": (y, x)}.get(op, ())
        getattr(x, op)(*args)
        return x

    _same(op, _run(run, tf), run(torch))


def test_float16_overflow_and_creation_out_of_range() -> None:
    def run(L: Any) -> Any:
        big = L.tensor([60000.0, -60000.0, 1e10], dtype=L.float16)  # 1e10 is inf in float16, silently
        return big * 4 + L.tensor([1e300], dtype=L.float64).to(L.float32)

    _same("float16 overflow", _run(run, tf), run(torch))


@pytest.mark.parametrize("op", ["floor_divide", "remainder", "div_floor", "div_trunc", "fmod"])
@pytest.mark.parametrize("dtype", ["int32", "int64", "uint8"])
def test_integer_division_by_zero_is_an_error_as_in_pytorch(op: str, dtype: str) -> None:
    fn = BINARY[op]

    def run(L: Any) -> Any:
        a = L.tensor([7, 3, 0], dtype=getattr(L, dtype))
        b = L.tensor([2, 0, 5], dtype=getattr(L, dtype))
        return fn(L, a, b)

    with pytest.raises(RuntimeError, match="ZeroDivisionError") as torch_error:
        run(torch)
    with pytest.raises(type(torch_error.value), match="ZeroDivisionError"):
        _run(run, tf)


@pytest.mark.parametrize("op", ["floor_divide", "remainder", "div_floor", "div_trunc", "fmod"])
def test_integer_division_without_zero_divisors_matches(op: str) -> None:
    fn = BINARY[op]

    def run(L: Any) -> Any:
        return fn(L, L.tensor([7, -7, 0, 9, -9]), L.tensor([2, 2, 5, -4, -4]))

    _same(op, _run(run, tf), run(torch))


def test_the_callers_numpy_error_state_is_left_as_it_was() -> None:
    with np.errstate(all="raise"):
        tf.log(tf.zeros(2))  # quiet inside the op ...
        with pytest.raises(FloatingPointError):
            np.log(np.zeros(1))  # ... and the caller's "raise" afterwards
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(RuntimeWarning):
            np.log(np.zeros(1))  # the default "warn" is back outside


NUMBERS = [300, 255, -1, -255, -256, 127, -129, 2**31, 70000, 2.7, -1.5, 255.9, 1e10, 1e39, float("inf"),
           float("-inf"), float("nan"), True]
WRITES: dict[str, Callable[[Any, Any, Any], Any]] = {
    "fill_": lambda L, x, v: x.fill_(v),
    "full": lambda L, x, v: L.full(tuple(x.shape), v, dtype=x.dtype),
    "setitem": lambda L, x, v: (x.__setitem__(slice(0, 2), v), x)[1],
    "masked_fill": lambda L, x, v: x.masked_fill(L.tensor([True, False, True]), v),
}


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int32", "int64", "float16", "bfloat16", "float32", "bool"])
@pytest.mark.parametrize("op", sorted(WRITES))
def test_a_number_written_into_a_tensor_is_checked_as_in_pytorch(op: str, dtype: str) -> None:
    """PyTorch's checked conversion of a Python number (fill_, full, setitem, masked_fill): uint8
    takes -255..255 (-1 is 255), other integers their range, floats their finite range (inf and NaN
    pass); anything else is a RuntimeError, not NumPy's OverflowError or a silent inf."""
    for value in NUMBERS:
        def run(L: Any, value: Any = value) -> Any:
            return WRITES[op](L, L.zeros(3, dtype=getattr(L, dtype)), value)

        try:
            want = run(torch)
        except RuntimeError:
            with pytest.raises(RuntimeError, match="without overflow"):
                _run(lambda L: run(L), tf)
            continue
        if dtype.startswith(("int", "uint")) and isinstance(value, float) and not np.isfinite(value):
            continue  # torch's result is unspecified there
        _same(f"{op}({value!r})", _run(lambda L: run(L), tf), want)
