"""2-D convolution as im2col + one GEMM per group (col2im in backward).

The layout (see docs/convolution.md): ``col = im2col(x)`` is (C*kh*kw, N*OH*OW), the weight is
viewed as (O, C*kh*kw) with no copy, and the whole batch is one GEMM per group::

    forward   out (O, N*OH*OW) = W (O, CKK)       @ col (CKK, N*OH*OW)
    weight    gW  (O, CKK)     = gout (O, N*OH*OW) @ col.T                  (BLAS transposes)
    input     gcol(CKK, N*OH*OW) = W.T            @ gout (O, N*OH*OW)      -> col2im

The only copies besides im2col itself are the (O, N, OH, OW) <-> (N, O, OH, OW) transposes of
the output and its gradient, which are ``kh*kw*C/O`` times smaller than ``col``; the bias add is
fused into the first of them. ``col`` is not saved: backward rebuilds it (see Conv2d). It lives
in one reusable workspace per thread and device (``tinyflow.kernels._cpu.workspace``), on a GPU
as on the CPU: im2col writes into it, and in backward gcol takes its place once gW is done.

Inside ``tf.amp.autocast`` the input, weight and bias are cast to the autocast dtype and the
GEMMs run in half precision through ``matmul_array`` (float32 BLAS and one rounding on the CPU).

On the CPU, stride-1 ungrouped 3x3 and 5x5 layers with enough channels and images take the
Winograd F(2x2, 3x3) path instead (``_use_winograd``): 16 GEMMs over transformed 4x4 tiles,
2.25x fewer multiplications for 3x3 (1.56x for 5x5) and no im2col / col2im. Same results to
float rounding; see docs/convolution.md.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Union

import numpy as np

from tinyflow import amp
from tinyflow.autograd import Function
from tinyflow.kernels._cpu import give_buffer, parallel_for, take_buffer, workspace
from tinyflow.kernels.conv import conv_output_size
from tinyflow.kernels.winograd import (
    winograd_input,
    winograd_input_grad,
    winograd_output,
    winograd_output_grad,
    winograd_parts,
    winograd_tiles,
    winograd_weight,
    winograd_weight_grad,
)
from tinyflow.ops.linalg import matmul_array, safe_sum

if TYPE_CHECKING:
    from tinyflow.tensor import Tensor

__all__ = ["Conv2d", "conv2d"]

IntPair = Union[int, tuple[int, int]]


def _pair(v: IntPair, name: str, op: str = "conv2d") -> tuple[int, int]:
    """An int or a 2-sequence of ints as a (height, width) pair."""
    if isinstance(v, int):
        return (v, v)
    try:
        a, b = v
        return (int(a), int(b))
    except (TypeError, ValueError):
        raise ValueError(f"{op}: {name} must be an int or a pair of ints, got {v!r}") from None


# Stride-1 ungrouped 3x3 / 5x5 convolutions with at least this many input and output channels,
# and a batch of at least this many images, take the Winograd F(2x2, 3x3) path on the CPU (2.25x
# fewer multiplications for 3x3, 1.56x for 5x5, no im2col / col2im). With fewer channels its 16
# small GEMMs lose to the one im2col GEMM; its transforms run over the batch innermost, so tiny
# batches lose too. Set WINOGRAD_MIN_CHANNELS to 0 to turn the path off.
WINOGRAD_MIN_CHANNELS = 16
WINOGRAD_MIN_BATCH = 8
WINOGRAD_KERNELS = (3, 5, 6)  # kernel sides that split into 3x3 sub-kernels without much waste


def _use_winograd(xp, x_shape, w_shape, geom, groups: int, dtype=np.float32) -> bool:
    """Whether this convolution runs as Winograd F(2x2, 3x3) (see tinyflow/kernels/conv.py)."""
    (kh, kw), stride, _, dilation = geom
    n, c = x_shape[:2]
    return (xp is np and WINOGRAD_MIN_CHANNELS > 0 and np.dtype(dtype) in (np.float32, np.float64)
            and kh in WINOGRAD_KERNELS and kw in WINOGRAD_KERNELS
            and stride == (1, 1) and dilation == (1, 1) and groups == 1
            and n >= max(1, WINOGRAD_MIN_BATCH) and min(c, w_shape[0]) >= WINOGRAD_MIN_CHANNELS)


class Conv2d(Function):
    """y = conv(x, w) + b for x (N, C, H, W), w (O, C/groups, kh, kw), b (O,) or None.

    ``col`` lives in a reusable workspace (one per thread and device, CPU and GPU alike) and is
    rebuilt in backward instead of being saved: one more im2col per layer buys an activation
    memory like PyTorch's (x, not kh*kw copies of it) and no fresh 100 MB allocations per step.
    """

    @staticmethod
    def forward(ctx, x, w, b, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
        xp = ctx.xp
        n, c, h, wd = x.shape
        o, _, kh, kw = w.shape
        oh = conv_output_size(h, kh, stride[0], padding[0], dilation[0])
        ow = conv_output_size(wd, kw, stride[1], padding[1], dilation[1])
        geom = ((kh, kw), stride, padding, dilation)
        ctx.x_shape, ctx.geom, ctx.groups = x.shape, geom, groups
        ctx.winograd = _use_winograd(xp, x.shape, w.shape, geom, groups, x.dtype)
        ctx.save_for_backward(x if ctx.needs_input_grad[1] else None,
                              w if ctx.needs_input_grad[0] else None)
        if ctx.winograd:
            return Conv2d._winograd_forward(ctx, x, w, b, padding)
        buf = workspace(xp, "conv2d.col", (c * kh * kw, n * oh * ow), x.dtype, like=x)
        col = ctx.kernels.im2col(x, *geom, out=buf)  # (C*kh*kw, N*OH*OW), written into buf
        ckk, nl = col.shape  # explicit sizes below: reshape cannot infer -1 for an empty batch
        w3 = w.reshape(groups, o // groups, ckk // groups)  # (G, O/G, C/G*kh*kw), a view
        col3 = col.reshape(groups, ckk // groups, nl)  # (G, C/G*kh*kw, N*OH*OW), a view
        out = xp.empty((groups, o // groups, nl), dtype=x.dtype)
        for g in range(groups):
            matmul_array(xp, w3[g], col3[g], out=out[g])
        out = out.reshape(o, n, oh, ow).transpose(1, 0, 2, 3)  # (N, O, OH, OW) strided view
        y = xp.empty((n, o, oh, ow), dtype=x.dtype)

        def transpose_out(o0: int, o1: int) -> None:
            if b is None:
                y[:, o0:o1] = out[:, o0:o1]
            else:  # the bias add is fused into the transpose copy
                xp.add(out[:, o0:o1], b[o0:o1].reshape(1, -1, 1, 1), out=y[:, o0:o1])

        parallel_for(xp, o, transpose_out, work=y.size)
        return y  # x was saved to rebuild col for the weight gradient; w for the input gradient

    @staticmethod
    def backward(ctx, gout):
        xp = ctx.xp
        x, w = ctx.saved_tensors
        if ctx.winograd:
            return Conv2d._winograd_backward(ctx, x, w, gout)
        groups = ctx.groups
        n, o, oh, ow = gout.shape
        c, (kh, kw) = ctx.x_shape[1], ctx.geom[0]
        ckk, nl = c * kh * kw, n * oh * ow
        # (N, O, OH, OW) -> (O, N, OH, OW) -> (G, O/G, N*OH*OW): the one copy on the way back
        gy = xp.empty((o, n, oh, ow), dtype=gout.dtype)

        def transpose_gout(o0: int, o1: int) -> None:
            gy[o0:o1] = gout[:, o0:o1].transpose(1, 0, 2, 3)

        parallel_for(xp, o, transpose_gout, work=gy.size)
        gy = gy.reshape(groups, o // groups, nl)
        # col and gcol take turns in the same workspace: col is dead once gW is computed
        buf = workspace(xp, "conv2d.col", (ckk, nl), gout.dtype, like=gout)
        gx = gw = gb = None
        if ctx.needs_input_grad[2]:
            gb = safe_sum(gy.reshape(o, nl), axis=1)
        if ctx.needs_input_grad[1]:
            col3 = ctx.kernels.im2col(x, *ctx.geom, out=buf).reshape(groups, ckk // groups, nl)
            gw = xp.empty((groups, o // groups, ckk // groups), dtype=gout.dtype)
            for g in range(groups):
                matmul_array(xp, gy[g], col3[g].T, out=gw[g])  # BLAS reads col.T in place
            gw = gw.reshape(o, c // groups, kh, kw)  # (O, C/G, kh, kw)
        if ctx.needs_input_grad[0]:
            w3 = w.reshape(groups, o // groups, ckk // groups)
            gcol = buf.reshape(groups, ckk // groups, nl)  # (G, C/G*kh*kw, N*OH*OW)
            for g in range(groups):
                matmul_array(xp, w3[g].T, gy[g], out=gcol[g])
            gx = ctx.kernels.col2im(buf, ctx.x_shape, *ctx.geom)  # (N, C, H, W)
        return gx, gw, gb

    @staticmethod
    def _winograd_forward(ctx, x, w, b, padding):
        """y = A^T [(G w G^T) * (B^T x B)] A per 2x2 output tile: 16 GEMMs (O, Q*C) @ (Q*C, T).

        The transformed input V (for the weight gradient) and weight U (for the input gradient)
        are kept for backward; V lives in a recycled buffer, so a step allocates nothing large.
        """
        n, c, h, wd = x.shape
        o, _, kh, kw = w.shape
        oh, ow, th, tw = winograd_tiles(h, wd, padding, (kh, kw))
        qc = c * math.prod(winograd_parts((kh, kw)))  # input channels times 3x3 sub-kernels
        t = n * th * tw  # tiles in the batch
        keep_v = ctx.needs_input_grad[1]
        vbuf = take_buffer((16, qc, t), x.dtype) if keep_v else workspace(np, "conv2d.col", (16, qc, t), x.dtype)
        v = winograd_input(x, padding, vbuf, (kh, kw))  # (16, Q*C, T)
        u = winograd_weight(w)  # (16, O, Q*C)
        m = workspace(np, "conv2d.winograd.m", (16, o, t), x.dtype)
        np.matmul(u, v, out=m)  # (16, O, T)
        ctx.winograd_v = v if keep_v else None
        ctx.winograd_u = u if ctx.needs_input_grad[0] else None
        return winograd_output(m, (n, o, oh, ow), b)  # (N, O, OH, OW)

    @staticmethod
    def _winograd_backward(ctx, x, w, gout):
        """The adjoint of _winograd_forward: 16 GEMMs for gW, 16 for gx, transforms around them."""
        n, o, oh, ow = gout.shape
        c, h, wd = ctx.x_shape[1:]
        ksize, padding = ctx.geom[0], ctx.geom[2]
        th, tw = winograd_tiles(h, wd, padding, ksize)[2:]
        qc = c * math.prod(winograd_parts(ksize))
        t = n * th * tw
        gm, gtiles = winograd_output_grad(gout, workspace(np, "conv2d.winograd.m", (16, o, t), gout.dtype))
        gb = gtiles.reshape(4, o, t).sum(axis=2).sum(axis=0) if ctx.needs_input_grad[2] else None  # (O,)
        # V from forward (or rebuilt, after a first backward with retain_graph), then gV in its place
        v, ctx.winograd_v = ctx.winograd_v, None
        buf = v if v is not None else take_buffer((16, qc, t), gout.dtype)
        gx = gw = None
        if ctx.needs_input_grad[1]:
            if v is None:
                v = winograd_input(x, padding, buf, ksize)  # (16, Q*C, T)
            gu = np.matmul(gm, v.transpose(0, 2, 1))  # (16, O, Q*C)
            gw = winograd_weight_grad(gu, (o, c, *ksize))
        if ctx.needs_input_grad[0]:
            u = ctx.winograd_u if ctx.winograd_u is not None else winograd_weight(w)
            np.matmul(u.transpose(0, 2, 1), gm, out=buf)  # gV (16, Q*C, T)
            gx = winograd_input_grad(buf, ctx.x_shape, padding, ksize)  # (N, C, H, W)
        give_buffer(buf)
        return gx, gw, gb


def _same_padding(kernel: tuple[int, int], dilation: tuple[int, int],
                  stride: tuple[int, int]) -> tuple[int, int]:
    if stride != (1, 1):
        raise ValueError("conv2d: padding='same' is only supported with stride 1 (as in PyTorch)")
    total = [d * (k - 1) for k, d in zip(kernel, dilation)]
    if any(t % 2 for t in total):
        raise ValueError(
            f"conv2d: padding='same' with kernel {kernel} and dilation {dilation} needs uneven "
            "padding; pad the input explicitly (F.pad) and use padding=0"
        )
    return (total[0] // 2, total[1] // 2)


def conv2d(x: Tensor, weight: Tensor, bias: Tensor | None = None, stride: IntPair = 1,
           padding: IntPair | str = 0, dilation: IntPair = 1, groups: int = 1) -> Tensor:
    """2-D cross-correlation over x (N, C, H, W) or (C, H, W), as ``torch.nn.functional.conv2d``.

    Inside ``tf.amp.autocast`` it computes in the autocast dtype (float32 weights get float32
    gradients through the casts).
    """
    x, weight, bias = amp.autocast_inputs(x, weight, bias)
    if weight.ndim != 4:
        raise ValueError(f"conv2d: weight must be 4-D (O, C/groups, kh, kw), got shape {tuple(weight.shape)}")
    unbatched = x.ndim == 3
    if unbatched:
        x = x.reshape(1, *x.shape)
    if x.ndim != 4:
        raise ValueError(f"conv2d: input must be (N, C, H, W) or (C, H, W), got shape {tuple(x.shape)}")
    stride, dilation = _pair(stride, "stride"), _pair(dilation, "dilation")
    o, cg, kh, kw = weight.shape
    if isinstance(padding, str):
        if padding not in ("valid", "same"):
            raise ValueError(f"conv2d: padding must be an int, a pair, 'valid' or 'same', got {padding!r}")
        padding = (0, 0) if padding == "valid" else _same_padding((kh, kw), dilation, stride)
    padding = _pair(padding, "padding")
    if min(stride) < 1 or min(dilation) < 1 or min(padding) < 0:
        raise ValueError(f"conv2d: need stride >= 1, dilation >= 1, padding >= 0; got stride={stride}, "
                         f"padding={padding}, dilation={dilation}")
    if not isinstance(groups, int) or groups < 1 or o % groups:
        raise ValueError(f"conv2d: groups={groups} must be a positive int dividing the {o} output "
                         f"channels of weight {tuple(weight.shape)}")
    n, c, h, w = x.shape
    if c != cg * groups:
        raise ValueError(
            f"conv2d: input {tuple(x.shape)} has {c} channels but weight {tuple(weight.shape)} with "
            f"groups={groups} expects {cg * groups}; check in_channels of the layer"
        )
    if bias is not None and tuple(bias.shape) != (o,):
        raise ValueError(f"conv2d: bias shape {tuple(bias.shape)} must be ({o},) for weight {tuple(weight.shape)}")
    oh = conv_output_size(h, kh, stride[0], padding[0], dilation[0])
    ow = conv_output_size(w, kw, stride[1], padding[1], dilation[1])
    if oh < 1 or ow < 1:
        raise ValueError(
            f"conv2d: input {tuple(x.shape)} is too small for kernel {(kh, kw)} with padding "
            f"{padding} and dilation {dilation} (output would be {oh}x{ow}); use a larger input"
        )
    if x.dtype != weight.dtype:
        raise ValueError(f"conv2d: input dtype {x.dtype} and weight dtype {weight.dtype} differ; "
                         "convert one with .to(dtype)")
    y = Conv2d.apply(x, weight, bias, stride=stride, padding=padding, dilation=dilation, groups=groups)
    return y.reshape(*y.shape[1:]) if unbatched else y
