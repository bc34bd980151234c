"""``tinyflow.cpu``: what PyTorch programs ask of ``torch.cpu`` (the host is always there).

``amp`` is ``torch.cpu.amp``: ``autocast(dtype=bfloat16)``, i.e. ``tinyflow.autocast("cpu")``.
"""
from __future__ import annotations

from tinyflow.cpu import amp  # noqa: F401  (torch.cpu.amp.autocast)

__all__ = ["is_available", "device_count", "current_device", "synchronize", "amp"]


def is_available() -> bool:
    """The CPU is always available."""
    return True


def device_count() -> int:
    """One CPU device (all cores are one device, as in PyTorch)."""
    return 1


def current_device() -> str:
    return "cpu"


def synchronize(device: object = None) -> None:
    """CPU work is synchronous: nothing to wait for."""
