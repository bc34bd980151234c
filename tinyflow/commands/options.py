"""argparse types that the commands share: a bad value is argparse's one-line error naming the
flag (``tinyflow train: error: argument --epochs: must be >= 1, got 0``), never a traceback
later on."""
from __future__ import annotations

import argparse
import math


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None


def positive_int(text: str) -> int:
    """An int >= 1 (epochs, batch size, workers to start, ...)."""
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def nonnegative_int(text: str) -> int:
    """An int >= 0 (seeds, loader processes, ...)."""
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def nonnegative_float(text: str) -> float:
    """A finite float >= 0 (a sampling temperature, ...); nan and inf are refused."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text}")
    return value


def device(text: str) -> str:
    """A device that exists here: cpu, or cuda[:N] where CUDA is available."""
    from tinyflow.device import Device, cuda_backend

    kind, colon, index = text.partition(":")
    if kind == "cuda" and colon and not index.isdigit():
        raise argparse.ArgumentTypeError(f"unknown device {text!r}: expected 'cpu', 'cuda' or 'cuda:N' (N = 0, 1, ...)")
    try:
        dev = Device(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if dev.type == "cuda":
        cuda = cuda_backend()  # tinyflow_cuda, which only device.py names
        if not cuda.is_available():
            raise argparse.ArgumentTypeError(f"{text!r}: CUDA is not available here ({cuda.unavailable_reason()}); "
                                             "install tinyflow[cuda] on a machine with an NVIDIA GPU, or use --device cpu")
    return text
