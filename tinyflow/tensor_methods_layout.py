"""Tensor methods that stack, split, rotate, scatter into and index-fill tensors (tensor_split,
hsplit, rot90, index_copy, index_fill, index_put, masked_scatter, slice_scatter, ...).

``TensorMethods`` (tinyflow/tensor_methods.py) inherits ``LayoutMethods``. ``METHOD_FUNCTIONS`` lists the
methods that are also ``tinyflow.<name>(input, ...)`` functions; ``FUNCTIONS`` the ``tinyflow.*``
functions that are not methods (tinyflow/functions.py exports both).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["LayoutMethods", "METHOD_FUNCTIONS", "FUNCTIONS"]


class LayoutMethods:
    """Mixed into Tensor through TensorMethods; see the module docstring."""


METHOD_FUNCTIONS: list[str] = []
FUNCTIONS: dict[str, Callable[..., Any]] = {}
