"""Whether a CUDA graph is being captured, and the device values a captured step reads.

A CUDA graph replays its kernels with the arguments they were captured with. Whatever changes from
one step to the next (the learning rate a scheduler sets, Adam's step count and bias corrections,
dropout's seed, the loss scale) must therefore be read by the kernels from device memory. An op or
optimizer that runs inside a capture asks for it with ``current()`` and takes a *slot*: a small device
array, and a function that computes its host value. The capture does not call the function then (a
captured step does not run); before every replay it calls each slot's function, in the order the
slots were taken, and copies the values into the slots (host-to-device copies, outside the graph).
So a seed drawn by a slot's function is drawn once per replayed step, in the order an eager step
would draw it, and N replayed steps match N eager steps.

Outside a capture ``current()`` is None and ops pass their values as kernel arguments, as before.
``tinyflow/cuda/graphs.py`` (CUDAGraph) opens and closes captures; nothing here knows CUDA.
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Capture", "Slot", "capturing", "current", "state"]


@dataclass
class Slot:
    """A device array a captured kernel reads, refilled before each replay with ``value()``."""

    array: Any  # (size,) on the capture's device
    value: Callable[[], Any]  # -> what the array holds for the next replayed step (host values)
    constant: bool = False  # filled before the first replay only (e.g. a table of device addresses)
    filled: bool = False


@dataclass
class Capture:
    """One capture in progress (and, after it, the graph's list of slots to refresh)."""

    device: Any  # tinyflow.device.Device being captured
    slots: list[Slot] = field(default_factory=list)
    # Allocates a slot outside the memory the captured work uses (the CUDA backend passes one that
    # draws from a pool of its own): a slot taken from the graph's private pool could get the block
    # of a temporary an earlier node of the graph writes, which would overwrite the value that
    # refresh() put there before the kernel that reads it runs.
    allocate: Callable[[tuple[int, ...], np.dtype], Any] | None = None
    # What to undo when the capture fails: Python-side state the step changed while capturing (a
    # GradScaler's per-step flags), so that the eager step run instead starts clean.
    on_abort: list[Callable[[], None]] = field(default_factory=list)

    def slot(self, value: Callable[[], Any], dtype: Any, size: int = 1, constant: bool = False) -> Any:
        """A (size,) device array of ``dtype`` that holds ``value()`` at every replay (``constant``:
        at the first replay only, for values the graph fixes anyway, such as device addresses)."""
        allocate = self.allocate or (lambda shape, dt: self.device.xp.empty(shape, dtype=dt))
        array = allocate((size,), np.dtype(dtype))
        self.slots.append(Slot(array, value, constant))
        return array

    def refresh(self) -> None:
        """Before a replay: every slot's next value, in the order the slots were taken (a constant
        slot once: its host-to-device copy is not repeated at every step)."""
        for slot in self.slots:
            if slot.constant and slot.filled:
                continue
            host = np.asarray(slot.value(), dtype=slot.array.dtype).reshape(slot.array.shape)
            slot.array[...] = self.device.put(host) if self.device.type != "cpu" else host
            slot.filled = True


class _State(threading.local):
    capture: Capture | None = None  # the capture in progress on this thread


# Read on the hot path as ``state.capture`` (an attribute, not a call: every dropout and optimizer
# step asks, and outside a capture the answer is None).
state = _State()


def current() -> Capture | None:
    """The capture in progress on this thread, or None (ops then run as usual)."""
    return state.capture


@contextmanager
def capturing(capture: Capture) -> Iterator[Capture]:
    """Mark ``capture`` as in progress on this thread inside the block (CUDAGraph does this)."""
    if current() is not None:
        raise RuntimeError("tinyflow: a CUDA graph capture is already in progress on this thread; "
                           "captures do not nest")
    state.capture = capture
    try:
        yield capture
    finally:
        state.capture = None
