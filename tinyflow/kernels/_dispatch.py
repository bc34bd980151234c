"""Dispatch a named kernel to its CPU reference or its CUDA twin.

Every kernel in ``tinyflow.kernels`` is a plain function over arrays, decorated with
``@kernel``. Called with NumPy arrays it runs the reference body. Called with CuPy arrays it
runs ``tinyflow_cuda.kernels.<same name>`` when the CUDA backend defines one (a hand-written
.cu kernel), and otherwise the same reference body, which is written against ``xp`` and so
runs on CuPy too.
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

F = TypeVar("F", bound=Callable[..., Any])

REGISTRY: dict[str, Callable[..., Any]] = {}


def _first_array(args: tuple, kwargs: dict) -> Any:
    for a in (*args, *kwargs.values()):
        if hasattr(a, "__array_priority__") or hasattr(a, "shape"):
            return a
    return None


def kernel(fn: F) -> F:
    """Register ``fn`` as a named kernel with a possible CUDA twin of the same name."""
    name = fn.__name__
    REGISTRY[name] = fn

    @functools.wraps(fn)
    def dispatch(*args: Any, **kwargs: Any) -> Any:
        first = _first_array(args, kwargs)
        if first is None or isinstance(first, (np.ndarray, np.generic)):
            return fn(*args, **kwargs)
        import tinyflow_cuda.kernels as cuda_kernels

        twin = getattr(cuda_kernels, name, None)
        return (twin or fn)(*args, **kwargs)

    dispatch.reference = fn  # type: ignore[attr-defined]
    return dispatch  # type: ignore[return-value]
