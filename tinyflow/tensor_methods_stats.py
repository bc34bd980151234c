"""Tensor methods for NaN-aware and statistical reductions, products and PyTorch's aliases
(nansum, nanmean, quantile, histc, cov, corrcoef, aminmax, kron, tensordot, cross, ...).

``TensorMethods`` (tinyflow/tensor_methods.py) inherits ``StatsMethods``. ``METHOD_FUNCTIONS`` lists the
methods that are also ``tinyflow.<name>(input, ...)`` functions; ``FUNCTIONS`` the ``tinyflow.*``
functions that are not methods (tinyflow/functions.py exports both).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["StatsMethods", "METHOD_FUNCTIONS", "FUNCTIONS"]


class StatsMethods:
    """Mixed into Tensor through TensorMethods; see the module docstring."""


METHOD_FUNCTIONS: list[str] = []
FUNCTIONS: dict[str, Callable[..., Any]] = {}
