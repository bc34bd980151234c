"""Linear algebra: matmul (batched, broadcasting, 1-D operands as NumPy) and linear."""
from __future__ import annotations

from typing import Any

from tinyflow.autograd import Context, Function, sum_to_shape


def _matmul_error(a: Any, b: Any) -> ValueError:
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
    return ValueError(f"matmul: shapes {sa} and {sb} cannot be multiplied: {why}")


def matmul_array(xp: Any, a: Any, b: Any) -> Any:
    """a @ b on raw arrays, with a shape error that names both shapes."""
    try:
        return xp.matmul(a, b)
    except ValueError:
        raise _matmul_error(a, b) from None


class MatMul(Function):
    @staticmethod
    def forward(ctx: Context, a: Any, b: Any) -> Any:
        if a.ndim == 0 or b.ndim == 0:
            raise _matmul_error(a, b)
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
            ga = sum_to_shape(xp.matmul(g2, xp.swapaxes(b2, -1, -2)), a2.shape).reshape(a.shape)
        if ctx.needs_input_grad[1]:
            gb = sum_to_shape(xp.matmul(xp.swapaxes(a2, -1, -2), g2), b2.shape).reshape(b.shape)
        return ga, gb


class Linear(Function):
    """y = x @ w.T + b with w of shape (out, in), as torch.nn.functional.linear.

    Leading dims of x are flattened into one GEMM; ``x @ w.T`` uses the transposed view of the
    row-major weight, which BLAS reads with its transpose flag and no copy.
    """

    @staticmethod
    def forward(ctx: Context, x: Any, w: Any, b: Any = None) -> Any:
        if x.ndim == 0 or w.ndim != 2 or x.shape[-1] != w.shape[1]:
            raise ValueError(
                f"linear: input of shape {tuple(x.shape)} does not match weight of shape "
                f"{tuple(w.shape)}: the input's last dimension must equal weight.shape[1] (in_features)"
            )
        if b is not None and tuple(b.shape) != (w.shape[0],):
            raise ValueError(f"linear: bias of shape {tuple(b.shape)} does not match weight of shape {tuple(w.shape)}")
        lead = x.shape[:-1]
        x2 = x.reshape(-1, x.shape[-1])  # (M, in)
        ctx.save_for_backward(x2, w)
        ctx.lead = lead
        out = x2 @ w.T  # (M, out)
        if b is not None:
            out += b
        return out.reshape(*lead, w.shape[0])

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        x2, w = ctx.saved_tensors
        g2 = g.reshape(-1, w.shape[0])  # (M, out)
        gx = (g2 @ w).reshape(*ctx.lead, w.shape[1]) if ctx.needs_input_grad[0] else None
        gw = g2.T @ x2 if ctx.needs_input_grad[1] else None
        gb = g2.sum(axis=0) if len(ctx.needs_input_grad) > 2 and ctx.needs_input_grad[2] else None
        return gx, gw, gb
