"""Fixtures the GPU tests share. (The root conftest skips everything marked ``gpu``, with the
reason, where CUDA is unavailable; it also applies to ``pytest tests/gpu``.)"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tinyflow_cuda

sys.path.insert(0, str(Path(__file__).parent))  # kernel_backend, shared by the kernel tests
from kernel_backend import Backend  # noqa: E402
from cuda_tools import emulator  # noqa: E402


@pytest.fixture
def cp() -> Any:
    """The CuPy module (gpu tests only), with TF32 off so fp32 GEMMs compare tightly to NumPy."""
    cupy = tinyflow_cuda.array_module(0)
    return cupy


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)


@pytest.fixture(scope="module", params=[
    pytest.param("emulator", marks=pytest.mark.skipif(emulator.compiler() is None,
                                                      reason="the emulator needs g++")),
    pytest.param("cuda", marks=pytest.mark.gpu),
])
def emu(request) -> Backend:
    if request.param == "cuda" and not tinyflow_cuda.is_available():
        pytest.skip(f"needs a CUDA GPU: {tinyflow_cuda.unavailable_reason()}")
    return Backend(request.param)
