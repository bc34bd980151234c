"""CUDA twins of ``tinyflow/kernels/allreduce.py``: the reductions inside the all-reduce
algorithms, on device memory and on the current stream (csrc/allreduce.cu), so a GPU ring never
copies its buffer to the host. float32, float64, float16 and bfloat16 buffers each have their
kernels (the half types add and scale in float32 and round once per element); other dtypes, mixed
dtypes and non-contiguous buffers take the in-place xp expression."""
from __future__ import annotations

from typing import Any

from tinyflow_cuda.kernels._launch import KernelCall

__all__ = ["reduce_add", "reduce_scale"]

Array = Any


def reduce_add(dst: Array, src: Array) -> Array:
    """dst += src on the device (a received all-reduce chunk into the local one); returns dst."""
    if dst.shape != src.shape:
        raise ValueError(f"reduce_add: dst {dst.shape} and src {src.shape} must have one shape")
    call = KernelCall("reduce_add", dst, src, op="all-reduce")
    if not call.supported or not dst.flags.c_contiguous:
        dst += src
        return dst
    with call:
        call.launch(dst.size, [dst, call.contiguous(src), dst.size])
    return dst


def reduce_scale(x: Array, factor: float) -> Array:
    """x *= factor on the device (the sum of N ranks into their mean); returns x."""
    call = KernelCall("reduce_scale", x, op="all-reduce")
    if not call.supported or not x.flags.c_contiguous:
        x *= factor
        return x
    with call:
        call.launch(x.size, [x, float(factor), x.size])
    return x
