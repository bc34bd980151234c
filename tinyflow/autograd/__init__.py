"""``torch.autograd``: reverse-mode automatic differentiation, one file per part as in PyTorch.

- function.py: ``Function`` (the base class of every op) and the ``Context`` node one call records;
- engine.py: the backward engine (``run_backward``) and ``grad``;
- grad_mode.py: ``no_grad`` and the other switches of recording; anomaly_mode.py: ``detect_anomaly``;
- functional.py (``jacobian``, ``vjp``, ...) and variable.py (``Variable``, for old programs).

This file gathers names and defines none. See docs/autograd.md.
"""
from tinyflow.autograd import function
from tinyflow.autograd.anomaly_mode import detect_anomaly, is_anomaly_enabled, set_detect_anomaly
from tinyflow.autograd.engine import grad, run_backward, sum_to_shape
from tinyflow.autograd.function import Context, Function, FunctionCtx, once_differentiable
from tinyflow.autograd.grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from tinyflow.autograd.variable import Variable
from tinyflow.autograd import functional  # noqa: I001 (after the names it uses)

__all__ = [
    "Context", "Function", "FunctionCtx", "once_differentiable", "run_backward", "sum_to_shape", "grad",
    "no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled",
    "detect_anomaly", "set_detect_anomaly", "is_anomaly_enabled", "Variable", "function", "functional",
]
