"""Max-unpooling, the partial inverse of max pooling (F.max_unpool1d/2d): the PyTorch surface.
The framework's pooling ops (max, average, adaptive) are in pool.py."""
from __future__ import annotations

from tinyflow.autograd import Function
from tinyflow.device import device_check

__all__ = ["MaxUnpool2dFunction"]


class MaxUnpool2dFunction(Function):
    """max_unpool2d: each value written at its flat index into a zero (OH, OW) plane."""

    @staticmethod
    def forward(ctx, x, indices, output_size):
        xp = ctx.xp
        n, c = x.shape[:2]
        oh, ow = output_size
        flat = indices.reshape(n * c, -1)
        if flat.size:
            bad = (flat < 0) | (flat >= oh * ow)

            def error(index: int) -> IndexError:
                return IndexError(f"max_unpool2d: index {index} is outside the output plane of size {oh}x{ow}; "
                                  "check output_size (it must be the size of the pooled input)")

            device_check(bad.any(), flat.reshape(-1)[bad.reshape(-1).argmax()], error, key=("max_unpool2d", oh, ow))
        out = xp.zeros((n * c, oh * ow), dtype=x.dtype)
        xp.put_along_axis(out, flat, x.reshape(n * c, -1), axis=1)
        ctx.save_for_backward(flat)
        ctx.shape = x.shape
        return out.reshape(n, c, oh, ow)

    @staticmethod
    def backward(ctx, gout):
        (flat,) = ctx.saved_tensors
        n, c = gout.shape[:2]
        g = ctx.xp.take_along_axis(gout.reshape(n * c, -1), flat, axis=1)
        return g.reshape(ctx.shape), None, None
