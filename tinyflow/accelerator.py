"""``tinyflow.accelerator``: ``torch.accelerator``'s questions (is there a GPU, which one).

tinyflow's one accelerator type is CUDA; ``current_accelerator()`` is ``device('cuda')`` where
CUDA is available and None otherwise, so ``tf.accelerator.current_accelerator() or "cpu"``
picks the device as in PyTorch.
"""
from __future__ import annotations

from typing import Any

from tinyflow import cuda
from tinyflow.device import Device

__all__ = ["is_available", "current_accelerator", "device_count", "current_device_index",
           "set_device_index", "synchronize"]


def is_available() -> bool:
    return cuda.is_available()


def current_accelerator(check_available: bool = False) -> Device | None:
    """``Device('cuda')`` when CUDA is available, else None (tinyflow is built for CUDA only)."""
    return Device("cuda") if cuda.is_available() else None


def device_count() -> int:
    return cuda.device_count()


def current_device_index() -> int:
    return cuda.current_device()


def set_device_index(device: Any) -> None:
    cuda.set_device(device)


set_device_idx = set_device_index
current_device_idx = current_device_index


def synchronize(device: Any = None) -> None:
    cuda.synchronize(device)
