"""Tensor methods of torch.linalg's surface (det, inverse, logdet, slogdet, pinverse, svd, qr,
cholesky, matrix_power, ...): each calls tinyflow.linalg (tinyflow/linalg.py).

``TensorMethods`` (tinyflow/tensor_methods.py) inherits ``LinalgMethods``. ``METHOD_FUNCTIONS`` lists the
methods that are also ``tinyflow.<name>(input, ...)`` functions; ``FUNCTIONS`` the ``tinyflow.*``
functions that are not methods (tinyflow/functions.py exports both).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["LinalgMethods", "METHOD_FUNCTIONS", "FUNCTIONS"]


class LinalgMethods:
    """Mixed into Tensor through TensorMethods; see the module docstring."""


METHOD_FUNCTIONS: list[str] = []
FUNCTIONS: dict[str, Callable[..., Any]] = {}
