"""GPU tests: everything marked ``gpu`` is skipped, with the reason, where CUDA is unavailable.

The root conftest does the same for the whole suite; this one also keeps tests/gpu/ runnable
on its own (``pytest tests/gpu``) and provides the fixtures the GPU tests share.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tinyflow_cuda


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if tinyflow_cuda.is_available():
        return
    skip = pytest.mark.skip(reason=f"needs a CUDA GPU: {tinyflow_cuda.unavailable_reason()}")
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip)


@pytest.fixture
def cp() -> Any:
    """The CuPy module (gpu tests only), with TF32 off so fp32 GEMMs compare tightly to NumPy."""
    cupy = tinyflow_cuda.array_module(0)
    return cupy


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)
