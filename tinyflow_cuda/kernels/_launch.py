"""The steps every CUDA twin repeats, in one place: pick the .cu kernel for the arrays' dtype,
make the inputs contiguous, allocate the outputs (an out-of-memory error names the op), launch.

A twin reads like this::

    call = KernelCall("lrn_forward", x, op="local_response_norm")
    if not call.supported:                      # a dtype without a .cu kernel (int64, mixed)
        return reference.lrn_forward(x, ...)    # the NumPy/xp reference runs on CuPy too
    with call:                                  # on the arrays' device
        x = call.contiguous(x)
        out = call.empty(x.shape)
        call.launch(x.size, [x, out, ...])      # lrn_forward_f32 or lrn_forward_f64

Arrays are allocated through the runtime's ``xp`` (tinyflow_cuda/runtime.py): CuPy on a GPU,
NumPy under the CPU emulator that the tests use on machines without one.
"""
from __future__ import annotations

import contextlib
from typing import Any

import numpy as np

from tinyflow_cuda import catch_oom
from tinyflow_cuda.runtime import THREADS, current, grid_for

Array = Any

SUFFIX = {"float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16"}
"""The dtypes the .cu kernels are instantiated for (by dtype name: ml_dtypes' bfloat16 is CuPy's),
and the suffix of their symbols (csrc/common.cuh, TF_FLOAT_TYPES)."""

MAX_ROW_BLOCKS = 65535  # one-block-per-row kernels loop over rows beyond this many blocks


def dtype_suffix(*arrays: Array | None) -> str | None:
    """'f32', 'f64', 'f16' or 'bf16' when every given array has that one dtype, else None."""
    dtypes = {np.dtype(a.dtype) for a in arrays if a is not None}
    if len(dtypes) != 1:
        return None
    return SUFFIX.get(dtypes.pop().name)


def all_contiguous(*arrays: Array | None) -> bool:
    """Whether every given array is C-contiguous (a kernel writes its outputs flat)."""
    return all(a is None or a.flags.c_contiguous for a in arrays)


class KernelCall:
    """One launch of the .cu kernel ``<name>_<suffix>`` on the device of ``arrays[0]``.

    ``arrays`` are the arrays whose dtype picks the kernel (None entries are ignored), unless
    ``dtype`` names it; ``op`` is the user-facing name an out-of-memory error reports (the kernel
    name by default).
    """

    def __init__(self, name: str, *arrays: Array | None, op: str | None = None,
                 dtype: Any = None) -> None:
        self.name = name
        self.op = op or name
        self.suffix = dtype_suffix(*arrays) if dtype is None else SUFFIX.get(np.dtype(dtype).name)
        self.anchor = next(a for a in arrays if a is not None)
        self.runtime = current()
        self.xp = self.runtime.xp
        self._device: contextlib.AbstractContextManager | None = None

    @property
    def supported(self) -> bool:
        """Whether a .cu kernel exists for these dtypes (else the caller runs the reference)."""
        return self.suffix is not None and self.kernel in self.runtime.kernels

    @property
    def kernel(self) -> str:
        return f"{self.name}_{self.suffix}"

    def __enter__(self) -> KernelCall:
        self._device = self.runtime.on_device_of(self.anchor)
        self._device.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        assert self._device is not None
        self._device.__exit__(*exc)

    def contiguous(self, *arrays: Array | None) -> Any:
        """Each array C-contiguous (a copy only where needed); one array in, one out."""
        out = tuple(None if a is None else self.xp.ascontiguousarray(a) for a in arrays)
        return out[0] if len(out) == 1 else out

    def empty(self, shape: tuple[int, ...], dtype: Any = None) -> Array:
        """An uninitialised output on the device (the anchor's dtype by default)."""
        with catch_oom(self.op, tuple(shape)):
            return self.xp.empty(tuple(shape), dtype=self.anchor.dtype if dtype is None else dtype)

    def zeros(self, shape: tuple[int, ...], dtype: Any = None) -> Array:
        """A zeroed output on the device (for scatter-adds)."""
        with catch_oom(self.op, tuple(shape)):
            return self.xp.zeros(tuple(shape), dtype=self.anchor.dtype if dtype is None else dtype)

    def launch(self, n: int, args: list[Any]) -> None:
        """A grid-stride launch over ``n`` elements (256 threads a block)."""
        self.runtime.launch(self.kernel, grid_for(n), THREADS, args)

    def launch_grid(self, grid: int | tuple[int, ...], block: int | tuple[int, ...],
                    args: list[Any]) -> None:
        """A launch on an explicit grid of blocks (ints or (x, y, z) tuples)."""
        self.runtime.launch(self.kernel, grid, block, args)

    def launch_rows(self, rows: int, args: list[Any]) -> None:
        """One block of 256 threads per row (the kernel loops when rows exceed the grid)."""
        self.runtime.launch(self.kernel, max(1, min(rows, MAX_ROW_BLOCKS)), THREADS, args)
