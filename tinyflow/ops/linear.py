"""The dense layers' maths: matmul (batched, broadcasting, 1-D operands as NumPy), linear
(``LinearFunction`` and F.linear) and F.bilinear.

Every GEMM of the ops goes through ``matmul_array`` (tinyflow/device.py), which computes
half-precision (float16 / bfloat16) products correctly on every device; see its docstring.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from tinyflow.amp.autocast_mode import autocast_inputs
from tinyflow.arg_parser import FunctionalError
from tinyflow.autograd.engine import sum_to_shape
from tinyflow.autograd.function import Context, Function
from tinyflow.device import _matmul_error, _rows, matmul_array, safe_sum
from tinyflow.dtypes import is_half
from tinyflow.errors import ShapeError
from tinyflow.ops.elementwise import not_implemented_for
from tinyflow.tensor import Tensor

__all__ = ["MatMul", "LinearFunction", "matmul", "matmul_array", "safe_sum", "linear", "bilinear"]


def _sum_to(g: Any, shape: tuple[int, ...]) -> Any:
    """``sum_to_shape`` with float32 accumulation for half-precision gradients."""
    if tuple(g.shape) == tuple(shape) or not is_half(g.dtype):
        return sum_to_shape(g, shape)
    return sum_to_shape(g.astype(np.float32), shape).astype(g.dtype)


def _same_dtype(op: str, a: Any, *others: Any) -> None:
    """PyTorch multiplies matrices of one dtype only (no promotion: NumPy's would give float64)."""
    for o in others:
        if o is not None and o.dtype != a.dtype:
            raise RuntimeError(f"{op}: expected both operands to have the same dtype, got {a.dtype} and {o.dtype}; "
                               "convert one with .to(dtype)")


class MatMul(Function):
    @staticmethod
    def forward(ctx: Context, a: Any, b: Any) -> Any:
        if a.ndim == 0 or b.ndim == 0:
            raise _matmul_error(a, b)
        if a.dtype.kind == "b":
            raise not_implemented_for("matmul", a.dtype)
        _same_dtype("matmul", a, b)
        ctx.save_for_backward(a, b)
        return matmul_array(ctx.xp, a, b)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        xp = ctx.xp
        a, b = ctx.saved_tensors
        # Promote 1-D operands to matrices as matmul does, then undo it on the gradients.
        a2 = a[None, :] if a.ndim == 1 else a  # (..., n, k)
        b2 = b[:, None] if b.ndim == 1 else b  # (..., k, m)
        g2 = g
        if a.ndim == 1:
            g2 = xp.expand_dims(g2, -2 if b.ndim > 1 else 0)
        if b.ndim == 1:
            g2 = xp.expand_dims(g2, -1)
        ga = gb = None
        if ctx.needs_input_grad[0]:
            ga = _sum_to(matmul_array(xp, g2, xp.swapaxes(b2, -1, -2)), a2.shape).reshape(a.shape)
        if ctx.needs_input_grad[1]:
            if a2.ndim > 2 and b2.ndim == 2:  # a batch against one matrix: one GEMM sums the batch
                gb = matmul_array(xp, _rows(a2).T, _rows(g2))  # (k, B*n) @ (B*n, m)
            else:
                gb = _sum_to(matmul_array(xp, xp.swapaxes(a2, -1, -2), g2), b2.shape)
            gb = gb.reshape(b.shape)
        return ga, gb


def matmul(a: Any, b: Any) -> Any:
    """``a @ b`` for two Tensors, in autocast's dtype inside an autocast region (a GEMM op)."""
    return MatMul.apply(*autocast_inputs(a, b))


class LinearFunction(Function):
    """y = x @ w.T + b with w of shape (out, in), as torch.nn.functional.linear.

    Leading dims of x are flattened into one GEMM; ``x @ w.T`` uses the transposed view of the
    row-major weight, which BLAS reads with its transpose flag and no copy.
    """

    @staticmethod
    def forward(ctx: Context, x: Any, w: Any, b: Any = None) -> Any:
        if x.ndim == 0 or w.ndim != 2 or x.shape[-1] != w.shape[1]:
            raise ShapeError(f"linear: input of shape {tuple(x.shape)} does not match weight of shape "
                             f"{tuple(w.shape)}: the input's last dimension must equal weight.shape[1] (in_features)")
        if b is not None and tuple(b.shape) != (w.shape[0],):
            raise ShapeError(f"linear: bias of shape {tuple(b.shape)} does not match weight of shape {tuple(w.shape)}")
        if x.dtype.kind == "b":
            raise not_implemented_for("linear", x.dtype)
        _same_dtype("linear", x, w, b)
        lead = x.shape[:-1]
        x2 = x.reshape(-1, x.shape[-1])  # (M, in)
        ctx.save_for_backward(x2, w)
        ctx.lead = lead
        out = matmul_array(ctx.xp, x2, w.T)  # (M, out)
        if b is not None:
            out += b
        return out.reshape(*lead, w.shape[0])

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        xp = ctx.xp
        x2, w = ctx.saved_tensors
        g2 = g.reshape(-1, w.shape[0])  # (M, out)
        gx = matmul_array(xp, g2, w).reshape(*ctx.lead, w.shape[1]) if ctx.needs_input_grad[0] else None
        gw = matmul_array(xp, g2.T, x2) if ctx.needs_input_grad[1] else None
        gb = safe_sum(g2, axis=0) if len(ctx.needs_input_grad) > 2 and ctx.needs_input_grad[2] else None
        return gx, gw, gb


# ======================================================================= F (tinyflow.nn.functional)


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:  # noqa: A002
    """input @ weight.T + bias (in the autocast dtype inside ``tf.amp.autocast``)."""
    return LinearFunction.apply(*autocast_inputs(input, weight, bias))


def bilinear(input1: Tensor, input2: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """y[..., o] = input1 @ weight[o] @ input2 + bias[o]; weight (out, in1, in2)."""
    out, in1, in2 = weight.shape
    if input1.shape[-1] != in1 or input2.shape[-1] != in2 or tuple(input1.shape[:-1]) != tuple(input2.shape[:-1]):
        raise FunctionalError(f"bilinear: inputs {tuple(input1.shape)} and {tuple(input2.shape)} do not fit weight "
                              f"{tuple(weight.shape)}; they need the same leading dims and {in1} and {in2} features")
    lead = tuple(input1.shape[:-1])
    x1, x2 = input1.reshape(-1, in1), input2.reshape(-1, in2)
    t = (x1 @ weight.permute(1, 0, 2).reshape(in1, out * in2)).reshape(-1, out, in2)  # (B, out, in2)
    y = (t * x2.reshape(-1, 1, in2)).sum(dim=2)
    if bias is not None:
        y = y + bias
    return y.reshape(*lead, out)
