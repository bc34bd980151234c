"""Testing helpers: numerical gradient checks for ops and user-written Functions."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tinyflow.autograd.grad_mode import no_grad
from tinyflow.tensor import Tensor, tensor

__all__ = ["gradcheck", "numerical_grad", "assert_close"]


def _scalar_output(out: Any, weights: list[np.ndarray]) -> Any:
    """Reduce one or several outputs to a scalar with fixed random weights (tests every entry)."""
    outs = out if isinstance(out, (tuple, list)) else (out,)
    total = None
    for i, o in enumerate(outs):
        if not isinstance(o, Tensor) or not o.is_floating_point():
            continue
        w = weights[i]
        term = (o * tensor(w, dtype=o.dtype, device=o.device)).sum()
        total = term if total is None else total + term
    return total


def numerical_grad(f: Callable[[], float], x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """Central differences of the scalar ``f()`` with respect to every entry of ``x``.

    ``x`` is perturbed in place (and restored), so ``f`` must read it; views work too.
    """
    grad = np.zeros(x.shape, dtype=np.float64)
    for idx in np.ndindex(x.shape):
        old = x[idx]
        x[idx] = old + eps
        hi = f()
        x[idx] = old - eps
        lo = f()
        x[idx] = old
        grad[idx] = (hi - lo) / (2 * eps)
    return grad


def gradcheck(
    fn: Callable[..., Any],
    inputs: Sequence[Any],
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-4,
    seed: int = 0,
) -> bool:
    """Check autograd's gradients of ``fn(*inputs)`` against central differences in float64.

    ``inputs`` may mix Tensors (float64 ones that require grad are checked) and other values.
    Several or non-scalar outputs are contracted with fixed random weights. Raises an
    AssertionError naming the input and the largest error when they disagree; returns True.
    """
    inputs = list(inputs)
    checked = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]
    if not checked:
        raise ValueError("gradcheck: no input requires grad")
    for i in checked:
        if inputs[i].dtype != np.float64:
            raise TypeError(f"gradcheck: input {i} is {inputs[i].dtype}; use float64 inputs for a meaningful check")
    probe = fn(*inputs)
    outs = probe if isinstance(probe, (tuple, list)) else (probe,)
    rng = np.random.default_rng(seed)
    weights = [rng.standard_normal(o.shape) if isinstance(o, Tensor) else None for o in outs]

    for i in checked:
        inputs[i].grad = None
    loss = _scalar_output(fn(*inputs), weights)
    if loss is None:
        raise ValueError("gradcheck: fn returned no floating point tensor")
    loss.backward()
    for i in checked:
        x = inputs[i]
        analytic = np.zeros(x.shape) if x.grad is None else x.grad.numpy()
        # Perturb a NumPy copy and rebuild the tensor on every call, so that ops which cache
        # nothing see exactly the perturbed value.
        base = x.numpy().astype(np.float64).copy()

        def f(i: int = i, base: np.ndarray = base, device: Any = x.device) -> float:
            args = list(inputs)
            args[i] = tensor(base, dtype=np.float64, device=device)
            with no_grad():
                out = _scalar_output(fn(*args), weights)
            return float(out.item())

        numeric = numerical_grad(f, base, eps)
        err = np.abs(analytic - numeric)
        tol = atol + rtol * np.abs(numeric)
        if not np.all(err <= tol):
            j = np.unravel_index(np.argmax(err - tol), err.shape)
            raise AssertionError(
                f"gradcheck failed for input {i} of shape {x.shape}: at index {tuple(int(v) for v in j)} "
                f"autograd gives {analytic[j]:.8g} but central differences give {numeric[j]:.8g} "
                f"(max abs error {err.max():.3g})"
            )
    return True


# ------------------------------------------------------------------------------ assert_close
_DEFAULT_TOLERANCES = {"float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5), "float32": (1.3e-6, 1e-5),
                       "float64": (1e-7, 1e-7), "complex64": (1.3e-6, 1e-5), "complex128": (1e-7, 1e-7)}


def assert_close(actual: Any, expected: Any, *, allow_subclasses: bool = True, rtol: float | None = None,
                 atol: float | None = None, equal_nan: bool = False, check_device: bool = True,
                 check_dtype: bool = True, check_layout: bool = True, check_stride: bool = False,
                 msg: str | None = None) -> None:
    """``torch.testing.assert_close``: ``|actual - expected| <= atol + rtol * |expected|`` elementwise,
    with the same shape (and dtype and device unless told otherwise). Tolerances default by dtype
    as PyTorch's (float32: rtol 1.3e-6, atol 1e-5; float64: 1e-7 each; integers and bools: exact);
    give both or neither. Tensors, NumPy arrays, numbers, and sequences or mappings of them
    (compared item by item). Raises AssertionError describing the mismatch."""
    if (rtol is None) != (atol is None):
        raise ValueError(f"assert_close: give both rtol and atol or neither, got rtol={rtol}, atol={atol}")
    _assert_close(actual, expected, "", rtol, atol, equal_nan, check_device, check_dtype, msg)


def _assert_close(actual: Any, expected: Any, where: str, rtol: float | None, atol: float | None, equal_nan: bool,
                  check_device: bool, check_dtype: bool, msg: str | None) -> None:
    if isinstance(expected, dict):
        if not isinstance(actual, dict) or set(actual) != set(expected):
            raise AssertionError(msg or f"assert_close{where}: the mappings have different keys: "
                                 f"{sorted(map(str, actual)) if isinstance(actual, dict) else type(actual).__name__} "
                                 f"!= {sorted(map(str, expected))}")
        for key in expected:
            _assert_close(actual[key], expected[key], f"{where}[{key!r}]", rtol, atol, equal_nan, check_device,
                          check_dtype, msg)
        return
    if isinstance(expected, (list, tuple)):
        if not isinstance(actual, (list, tuple)) or len(actual) != len(expected):
            raise AssertionError(msg or f"assert_close{where}: the sequences differ in length or type")
        for i, (a, e) in enumerate(zip(actual, expected)):
            _assert_close(a, e, f"{where}[{i}]", rtol, atol, equal_nan, check_device, check_dtype, msg)
        return
    a, a_device = _as_array(actual)
    e, e_device = _as_array(expected)
    what = "Tensor-likes" if isinstance(expected, (Tensor, np.ndarray)) else "Scalars"
    if check_device and a_device != e_device:
        raise AssertionError(msg or f"assert_close{where}: the values are on different devices ({a_device} and "
                             f"{e_device})")
    if check_dtype and isinstance(expected, (Tensor, np.ndarray)) and a.dtype != e.dtype:
        raise AssertionError(msg or f"assert_close{where}: the values are not equal in dtype: {a.dtype} != {e.dtype}")
    if a.shape != e.shape:
        raise AssertionError(msg or f"assert_close{where}: the values are not equal in shape: {a.shape} != {e.shape}")
    if rtol is None:
        rtol, atol = max((_DEFAULT_TOLERANCES.get(np.dtype(d).name, (0.0, 0.0)) for d in (a.dtype, e.dtype)),
                         key=lambda t: t[0])
    a64 = a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)
    e64 = e.astype(np.complex128 if e.dtype.kind == "c" else np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        close = np.isclose(a64, e64, rtol=rtol, atol=atol, equal_nan=equal_nan)
    if close.all():
        return
    if msg is not None:
        raise AssertionError(msg)
    diff = np.abs(a64 - e64)
    diff = np.where(np.isnan(diff), np.inf, diff)
    rel = diff / np.where(np.abs(e64) == 0, np.inf, np.abs(e64))
    bad = int((~close).sum())
    worst, worst_rel = np.unravel_index(np.argmax(diff), diff.shape), np.unravel_index(np.argmax(rel), rel.shape)
    raise AssertionError(
        f"{what} are not close{where}!\n\nMismatched elements: {bad} / {close.size} ({100 * bad / close.size:.1f}%)\n"
        f"Greatest absolute difference: {diff[worst]} at index {tuple(int(i) for i in worst)} (up to {atol} allowed)\n"
        f"Greatest relative difference: {rel[worst_rel]} at index {tuple(int(i) for i in worst_rel)} "
        f"(up to {rtol} allowed)"
    )


def _as_array(value: Any) -> tuple[np.ndarray, str]:
    if isinstance(value, Tensor):
        return value.detach().cpu().numpy(), str(value.device)
    if isinstance(value, (bool, int, float, complex, np.generic, np.ndarray)):
        return np.asarray(value), "cpu"
    raise TypeError(f"assert_close: cannot compare a {type(value).__name__}; give Tensors, arrays or numbers")
