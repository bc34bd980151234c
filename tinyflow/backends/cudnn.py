"""``torch.backends.cudnn``: settable flags, no effect (tinyflow has no cuDNN; its convolutions
are deterministic on the CPU and run its own kernels on a GPU)."""
from __future__ import annotations

enabled = True
benchmark = False
deterministic = False
allow_tf32 = True


def is_available() -> bool:
    return False


def version() -> None:
    return None
