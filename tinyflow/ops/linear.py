"""The dense layers' maths: matmul (batched, broadcasting, 1-D operands as NumPy), linear
(``LinearFunction`` and F.linear) and F.bilinear.

Every GEMM of the ops goes through :func:`matmul_array`, which computes half-precision
(float16 / bfloat16) products correctly on every device; see its docstring.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from tinyflow.amp import autocast_inputs
from tinyflow.arg_parser import FunctionalError
from tinyflow.autograd import Context, Function, sum_to_shape
from tinyflow.dtypes import is_half
from tinyflow.errors import ShapeError
from tinyflow.ops.elementwise import not_implemented_for
from tinyflow.tensor import Tensor

__all__ = ["MatMul", "LinearFunction", "matmul", "matmul_array", "safe_sum", "linear", "bilinear"]


def _matmul_error(a: Any, b: Any) -> ShapeError:
    sa, sb = tuple(a.shape), tuple(b.shape)
    if a.ndim == 0 or b.ndim == 0:
        why = "both operands need at least one dimension"
    else:
        k_a = sa[-1]
        k_b = sb[0] if b.ndim == 1 else sb[-2]
        why = (
            f"the last dimension of the first ({k_a}) must equal the "
            f"{'only' if b.ndim == 1 else 'second-to-last'} dimension of the second ({k_b})"
            if k_a != k_b
            else "their batch dimensions do not broadcast"
        )
    return ShapeError(f"matmul: shapes {sa} and {sb} cannot be multiplied: {why}")


def matmul_array(xp: Any, a: Any, b: Any, out: Any = None) -> Any:
    """``a @ b`` on raw arrays (NumPy's matmul rules), written into ``out`` if given.

    float32 / float64 (and mixed dtypes): ``xp.matmul``, i.e. BLAS or cuBLAS.

    float16 / bfloat16 (both operands of that dtype; the result has it too):

    * NumPy has no half-precision BLAS (its float16 matmul is a slow C loop, and ml_dtypes'
      bfloat16 matmul returns float32), so the operands are widened to float32, multiplied by
      BLAS and the product is rounded once to the half dtype: float32 accumulation, like cuBLAS.
    * Other backends (CuPy): 1-D and 2-D operands go to ``xp.matmul`` (cuBLAS with float32
      accumulation). Batched (> 2-D) products run as 2-D GEMMs, because CuPy's batched matmul
      sends bfloat16 to an integer fallback that fails ("data type E not understood") and
      widens float16 to float32: when ``b`` is a matrix or a vector, the batch is folded into
      the rows of one GEMM; otherwise one GEMM per batch entry (see :func:`_batched_as_2d`).
    """
    try:
        if a.dtype.itemsize == 2 and a.dtype == b.dtype and is_half(a.dtype):
            return _half_matmul(xp, a, b, out)
        return xp.matmul(a, b) if out is None else xp.matmul(a, b, out=out)
    except ValueError:
        raise _matmul_error(a, b) from None


def _half_matmul(xp: Any, a: Any, b: Any, out: Any) -> Any:
    if xp is np:
        product = np.matmul(a.astype(np.float32), b.astype(np.float32))  # one rounding below
        if out is None:
            return product.astype(a.dtype)
        out[...] = product
        return out
    if a.ndim <= 2 and b.ndim <= 2:
        return xp.matmul(a, b) if out is None else xp.matmul(a, b, out=out)
    return _batched_as_2d(xp, a, b, out)


def _batched_as_2d(xp: Any, a: Any, b: Any, out: Any) -> Any:
    """Batched ``a @ b`` (at least one operand > 2-D) with 2-D GEMMs only."""
    if b.ndim <= 2:  # (..., n, k) @ (k, m) or (k,): fold the batch into the rows of one GEMM
        product = xp.matmul(_rows(a), b)  # (B*n, m) or (B*n,)
        product = product.reshape(*a.shape[:-1], *b.shape[1:])  # (..., n, m) or (..., n)
    else:  # (..., n, k) or (k,) @ (..., k, m): one GEMM per entry of the broadcast batch
        a2 = a[None, :] if a.ndim == 1 else a  # (..., n, k)
        if a2.shape[-1] != b.shape[-2]:
            raise _matmul_error(a, b)
        batch = np.broadcast_shapes(a2.shape[:-2], b.shape[:-2])
        a_b = xp.broadcast_to(a2, batch + a2.shape[-2:])  # views: no copy of the smaller one
        b_b = xp.broadcast_to(b, batch + b.shape[-2:])
        product = xp.empty(batch + (a2.shape[-2], b.shape[-1]), dtype=a.dtype)  # (..., n, m)
        for index in np.ndindex(*batch):
            xp.matmul(a_b[index], b_b[index], out=product[index])
        if a.ndim == 1:
            product = product[..., 0, :]  # (..., m)
    if out is None:
        return product
    out[...] = product
    return out


def _rows(x: Any) -> Any:
    """(..., k) -> (prod(...), k); explicit sizes, as reshape cannot infer -1 for an empty batch."""
    return x.reshape(math.prod(x.shape[:-1]), x.shape[-1])


def safe_sum(a: Any, axis: Any) -> Any:
    """``a.sum(axis)`` in ``a``'s dtype, accumulated in float32 when ``a`` is half precision.

    Gradient reductions (bias gradients, broadcast batch dimensions) sum thousands of terms:
    bfloat16 accumulation stalls at 256 + 1 == 256, float16 overflows at 65504.
    """
    if a.dtype.itemsize == 2 and is_half(a.dtype):
        return a.sum(axis=axis, dtype=np.float32).astype(a.dtype)
    return a.sum(axis=axis)


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
            raise ShapeError(
                f"linear: input of shape {tuple(x.shape)} does not match weight of shape "
                f"{tuple(w.shape)}: the input's last dimension must equal weight.shape[1] (in_features)"
            )
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
