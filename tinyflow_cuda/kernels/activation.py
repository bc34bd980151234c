"""CUDA twin of ``tinyflow/kernels/activation.py``: ReLU in one kernel each way (csrc/activation.cu).

PyTorch-on-CuPy ReLU was four elementwise kernels and a bool temporary per layer and step
(maximum forward; less_equal, invert, multiply backward); here it is relu_forward_<dtype> and
relu_backward_<dtype>, 16-byte vector loads and stores where the arrays are aligned.
"""
from __future__ import annotations

from typing import Any

from tinyflow.kernels import activation as reference
from tinyflow_cuda.kernels._launch import KernelCall
from tinyflow_cuda.runtime import THREADS

__all__ = ["relu_forward", "relu_backward"]

Array = Any
VECTOR_BYTES = 16
"""Each thread moves 16 bytes: 4 float32, 2 float64, 8 float16 / bfloat16 (csrc/activation.cu)."""


def _launch_tiles(call: KernelCall, arrays: list[Array], n: int) -> None:
    """One block per tile of THREADS * V elements; ``vec`` when every array is 16-byte aligned."""
    per_thread = VECTOR_BYTES // arrays[0].dtype.itemsize
    tiles = -(-n // (THREADS * per_thread))
    vec = all(call.runtime.address(a) % VECTOR_BYTES == 0 for a in arrays)
    call.launch_grid(tiles, THREADS, [*arrays, n, int(vec)])


def relu_forward(x: Array) -> Array:
    """max(x, 0) in x's dtype, one launch (the reference for non-floating dtypes)."""
    call = KernelCall("relu_forward", x, op="relu")
    if not call.supported:
        return reference.relu_forward(x)
    with call:
        x = call.contiguous(x)
        y = call.empty(x.shape)
        if x.size:
            _launch_tiles(call, [x, y], x.size)
        return y


def relu_backward(g: Array, out: Array) -> Array:
    """g where the saved output ``out`` > 0 (or NaN), else 0: one launch, no bool temporary."""
    call = KernelCall("relu_backward", g, out, op="relu")
    if not call.supported or g.shape != out.shape:
        return reference.relu_backward(g, out)
    with call:
        g, out = call.contiguous(g, out)
        gx = call.empty(g.shape)
        if g.size:
            _launch_tiles(call, [g, out, gx], g.size)
        return gx
