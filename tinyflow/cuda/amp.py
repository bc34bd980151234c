"""``tinyflow.cuda.amp``: ``torch.cuda.amp``'s autocast and GradScaler over ``tinyflow.amp``.

Like PyTorch's, both turn themselves off with a warning where CUDA is not available: autocast
runs its block in full precision and the scaler passes every call through, so a CUDA training
script runs unchanged on a CPU-only machine.
"""
from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from typing import Any

from tinyflow import amp as _amp
from tinyflow.device import cuda_backend

__all__ = ["autocast", "GradScaler"]


@contextlib.contextmanager
def autocast(enabled: bool = True, dtype: Any = "float16", cache_enabled: bool = True) -> Iterator[None]:
    """Half-precision GEMMs inside the block on a GPU; full precision without CUDA."""
    if enabled and not cuda_backend().is_available():
        warnings.warn("User provided device_type of 'cuda', but CUDA is not available. Disabling",
                      UserWarning, stacklevel=3)
        enabled = False
    if not enabled:
        yield
        return
    with _amp.autocast(dtype=dtype):
        yield


def GradScaler(*args: Any, enabled: bool = True, **kwargs: Any) -> _amp.GradScaler:  # noqa: N802
    """A ``tinyflow.amp.GradScaler``, disabled (every call a pass-through) without CUDA."""
    if enabled and not cuda_backend().is_available():
        warnings.warn("torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  Disabling.",
                      UserWarning, stacklevel=2)
        enabled = False
    return _amp.GradScaler(*args, enabled=enabled, **kwargs)
