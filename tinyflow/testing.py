"""Testing helpers: numerical gradient checks for ops and user-written Functions."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tinyflow.autograd import no_grad
from tinyflow.tensor import Tensor, tensor

__all__ = ["gradcheck", "numerical_grad"]


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
