"""Local response normalisation (AlexNet 2012): the op, through the named ``lrn_forward`` /
``lrn_backward`` kernels, and F.local_response_norm, which checks the arguments and runs it in
float32 inside ``tf.amp.autocast``."""
from __future__ import annotations

from typing import Any

from tinyflow.amp import autocast_mode as amp
from tinyflow.arg_parser import FunctionalError
from tinyflow.autograd.function import Function
from tinyflow.dtypes import get_default_dtype, is_floating
from tinyflow.kernels.lrn import _channel_window_sum
from tinyflow.ops.elementwise import not_implemented_for
from tinyflow.tensor import Tensor

__all__ = ["LocalResponseNormFunction", "local_response_norm"]


class LocalResponseNormFunction(Function):
    """Cross-channel LRN through the named ``lrn_forward`` / ``lrn_backward`` kernels."""

    @staticmethod
    def forward(ctx, x, size, alpha, beta, k):
        if not is_floating(x.dtype):
            return _integer_lrn(x, size, alpha, beta, k)
        out, scale = ctx.kernels.lrn_forward(x, size, alpha, beta, k)
        if ctx.needs_input_grad[0]:
            ctx.save_for_backward(x, out, scale)
        ctx.params = (size, alpha, beta, k)
        return out

    @staticmethod
    def backward(ctx, gout):
        x, out, scale = ctx.saved_tensors
        return ctx.kernels.lrn_backward(gout, x, out, scale, *ctx.params)


def _integer_lrn(x: Any, size: int, alpha: float, beta: float, k: float) -> Any:
    """LRN of an int64 input as PyTorch computes it (its F composes avg_pool, which has an int64
    kernel and no other integer one): the window mean of the squares divided in int64 (toward
    zero), then ``x / (mean * alpha + k) ** beta`` in the default float dtype. No gradient."""
    if x.dtype.kind != "i" or x.dtype.itemsize != 8:
        raise not_implemented_for("local_response_norm", x.dtype)
    dtype = get_default_dtype()
    mean = _channel_window_sum(x * x, size // 2, (size - 1) // 2) // size  # the squares are >= 0
    scale = (mean.astype(dtype) * dtype.type(alpha) + dtype.type(k)) ** dtype.type(beta)
    return x.astype(dtype) / scale


# ======================================================================= F (tinyflow.nn.functional)


def local_response_norm(input: Tensor, size: int, alpha: float = 1e-4, beta: float = 0.75,  # noqa: A002
                        k: float = 1.0) -> Tensor:
    """Normalise each activation by the energy of its ``size`` neighbouring channels (N, C, *)."""
    if input.ndim < 3:
        raise FunctionalError(f"local_response_norm: input must be at least 3-D (N, C, *), got shape "
                         f"{tuple(input.shape)}")
    if not isinstance(size, int) or size < 1:
        raise FunctionalError(f"local_response_norm: size must be a positive int, got {size!r}")
    (x,) = amp.float32_inputs(input)
    return LocalResponseNormFunction.apply(x, size, float(alpha), float(beta), float(k))
