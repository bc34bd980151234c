"""Tensor methods for the special and extra elementwise functions (lgamma, digamma, erfc, logit,
xlogy, hypot, sinc, ...): each calls an op of tinyflow/ops/special.py.

``TensorMethods`` (tinyflow/tensor_methods.py) inherits ``SpecialMethods``. ``METHOD_FUNCTIONS`` lists the
methods that are also ``tinyflow.<name>(input, ...)`` functions; ``FUNCTIONS`` the ``tinyflow.*``
functions that are not methods (tinyflow/functions.py exports both).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["SpecialMethods", "METHOD_FUNCTIONS", "FUNCTIONS"]


class SpecialMethods:
    """Mixed into Tensor through TensorMethods; see the module docstring."""


METHOD_FUNCTIONS: list[str] = []
FUNCTIONS: dict[str, Callable[..., Any]] = {}
