"""What GPU work each stand-in call stands for: kernel launches and memory operations.

CUPTI, on a GPU, counts a training step's kernels (elementwise, reductions, cuBLAS, tinyflow's .cu
kernels) apart from its memory operations (memcpy, memset). The stand-in cannot see CuPy's
internals, so it counts what CuPy does for each call, by rule:

- views (reshape, transpose, basic indexing, ``astype`` to the same dtype without copy, ...) launch
  nothing when the result shares the input's memory, and one copy kernel when CuPy must copy;
- ``empty`` allocates (no GPU work); ``zeros`` is a memset; ``asarray``/``array`` of host data is a
  host-to-device memcpy, ``get``/``asnumpy`` a device-to-host one, a contiguous ``copy`` a
  device-to-device memcpy;
- host-side queries (``result_type``, ``get_array_module``, ...) do nothing on the GPU;
- everything else (ufuncs, reductions, ``matmul``, fills, concatenation, advanced indexing, ...)
  is one kernel, and a .cu launch (``kernel:<name>``) is one kernel.

A few CuPy functions launch more than one kernel (sorting, ``nonzero``, ``var``); the counts here are
a floor for those, which tinyflow's training step does not call. The launch-budget tests
(tests/test_launch_budget.py) compare these counts with CUPTI's in the same step
(bench/gpu/kernel_profile.py) whenever a GPU run is made.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

HOST_ONLY = {"get_array_module", "isscalar", "ndim", "shape", "size", "result_type", "can_cast",
             "min_scalar_type", "promote_types", "iterable", "get_default_memory_pool"}
"""Functions that answer on the host without touching the device."""

ALLOCATE = {"empty", "empty_like"}
"""Allocation only: no kernel, no memory operation."""

MEMSET = {"zeros", "zeros_like"}

HOST_TO_DEVICE = {"array", "asarray", "asanyarray"}
"""A copy from host data; given a device array, a view or a conversion kernel instead."""

DEVICE_TO_HOST = {"asnumpy", "get"}

MAY_VIEW = {"reshape", "ravel", "transpose", "swapaxes", "moveaxis", "squeeze", "expand_dims",
            "broadcast_to", "view", "diagonal", "ascontiguousarray", "astype", "atleast_1d",
            "atleast_2d", "atleast_3d", "split", "array_split", "__getitem__", "flip", "real", "imag",
            "asfortranarray", "rollaxis"}
"""Calls that return a view when they can and copy (one kernel) when they must."""


class Call(str):
    """One recorded call: its name (``"cupy.add"``, ``"kernel:im2col_f32"``) and the GPU work it
    stands for, ``kernels`` launched and ``memops`` (memcpy or memset) issued."""

    kernels: int
    memops: int

    def __new__(cls, name: str, kernels: int = 0, memops: int = 0) -> Call:
        call = super().__new__(cls, name)
        call.kernels, call.memops = kernels, memops
        return call


def _arrays(value: Any) -> list[np.ndarray]:
    """The NumPy arrays in a (nested) argument or result."""
    if isinstance(value, np.ndarray):
        return [value]
    if isinstance(value, (tuple, list)):
        return [a for v in value for a in _arrays(v)]
    if isinstance(value, dict):
        return [a for v in value.values() for a in _arrays(v)]
    return []


def gpu_work(name: str, inputs: Any, result: Any, device_inputs: bool = True) -> tuple[int, int]:
    """(kernels, memops) of the call ``name`` (the last part of its qualified name) that turned
    ``inputs`` (the unwrapped arguments) into ``result``; ``device_inputs`` says whether the array
    inputs were device arrays (else they were copied from the host)."""
    if name in HOST_ONLY:
        return 0, 0
    if name in ALLOCATE:
        return 0, 0
    if name in MEMSET:
        return 0, 1
    if name in DEVICE_TO_HOST:
        return 0, 1
    outs, ins = _arrays(result), _arrays(inputs)
    if name in HOST_TO_DEVICE:
        if not device_inputs or not ins:
            return 0, 1
        name = "astype"  # of a device array: a view, or a conversion kernel
    if name == "copy":
        src = ins[0] if ins else None
        contiguous = src is not None and outs and src.dtype == outs[0].dtype and src.flags.c_contiguous
        return (0, 1) if contiguous else (1, 0)
    if name in MAY_VIEW:
        if outs and ins and all(any(np.may_share_memory(o, i) for i in ins) for o in outs):
            return 0, 0
        return (1, 0) if outs else (0, 0)
    return 1, 0


@dataclass
class Tally:
    """The GPU work of a list of recorded calls."""

    kernels: int
    memops: int
    by_name: Counter[str]  # kernels per call name

    def table(self, top: int = 15) -> str:
        """The most-launching call names, for a budget failure's message."""
        rows = [f"{count:5d}  {name}" for name, count in self.by_name.most_common(top)]
        return "\n".join(rows)


def tally(calls: list[str]) -> Tally:
    """Kernels and memory operations of ``calls`` (a ``record_calls()`` list)."""
    by_name: Counter[str] = Counter()
    kernels = memops = 0
    for call in calls:
        k, m = getattr(call, "kernels", 0), getattr(call, "memops", 0)
        kernels += k
        memops += m
        if k:
            by_name[str(call)] += k
    return Tally(kernels, memops, by_name)
