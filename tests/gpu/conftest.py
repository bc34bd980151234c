"""Fixtures the GPU tests share. (The root conftest skips everything marked ``gpu``, with the
reason, where CUDA is unavailable; it also applies to ``pytest tests/gpu``.)"""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tinyflow_cuda


@pytest.fixture
def cp() -> Any:
    """The CuPy module (gpu tests only), with TF32 off so fp32 GEMMs compare tightly to NumPy."""
    cupy = tinyflow_cuda.array_module(0)
    return cupy


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)
