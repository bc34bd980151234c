"""2-D convolution as im2col + one GEMM per group (col2im in backward); docs/convolution.md.

``col = im2col(x)`` is (C*kh*kw, N*OH*OW) and the weight is viewed as (O, C*kh*kw) with no copy,
so the whole batch is one GEMM per group::

    forward   out (O, N*OH*OW) = W (O, CKK)       @ col (CKK, N*OH*OW)
    weight    gW  (O, CKK)     = gout (O, N*OH*OW) @ col.T                  (BLAS transposes)
    input     gcol(CKK, N*OH*OW) = W.T            @ gout (O, N*OH*OW)      -> col2im

The kernels ``conv_output`` / ``conv_output_grad`` make the transposes around the GEMM, with the
bias (and, with ``relu=True``, an internal switch, the ReLU) in the same pass. On the CPU, where
``use_winograd`` says it pays, the op runs the Winograd kernels instead. The F functions at the end
(conv2d, conv_transpose2d; conv1d and conv3d with their transposes, built on them) check the
arguments, resolve padding='same' and apply autocast; the op computes the output size.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from tinyflow.amp import autocast_mode as amp
from tinyflow.arg_parser import FunctionalError, IntPair, Pair, pair, single, triple
from tinyflow.autograd.function import Function
from tinyflow.creation import stack
from tinyflow.device import matmul_array, safe_sum
from tinyflow.kernels._cpu import give_buffer, take_buffer, workspace
from tinyflow.kernels.conv import conv_output_size
from tinyflow.ops.elementwise import floating_or_int64, not_implemented_for
from tinyflow.ops.pad import pad
from tinyflow.tensor import Tensor

__all__ = ["Conv2dFunction", "ConvTranspose2dFunction", "use_winograd", "conv2d", "conv_transpose2d", "conv1d",
           "conv_transpose1d", "conv3d", "conv_transpose3d"]

# Stride-1 ungrouped 3x3 / 5x5 convolutions with at least this many input and output channels,
# and a batch of at least this many images, take the Winograd path on the CPU: with fewer
# channels its small GEMMs lose to the one im2col GEMM, with tiny batches its transforms (batch
# innermost) lose. WINOGRAD_MIN_CHANNELS = 0 turns the path off.
WINOGRAD_MIN_CHANNELS = 16
WINOGRAD_MIN_BATCH = 8
WINOGRAD_KERNELS = (3, 5, 6)  # kernel sides that split into 3x3 sub-kernels without much waste


def use_winograd(x, w, stride: Pair, dilation: Pair, groups: int) -> bool:
    """Whether conv2d(x (N, C, H, W), w (O, C/groups, kh, kw)) runs on the CPU's Winograd kernels
    (the CPU-only half of tinyflow/kernels/conv.py)."""
    n, c = x.shape[:2]
    o, _, kh, kw = w.shape
    return (WINOGRAD_MIN_CHANNELS > 0 and np.dtype(x.dtype) in (np.float32, np.float64)
            and kh in WINOGRAD_KERNELS and kw in WINOGRAD_KERNELS
            and stride == (1, 1) and dilation == (1, 1) and groups == 1
            and n >= max(1, WINOGRAD_MIN_BATCH) and min(c, o) >= WINOGRAD_MIN_CHANNELS)


class Conv2dFunction(Function):
    """y = conv(x, w) + b for x (N, C, H, W), w (O, C/groups, kh, kw), b (O,) or None.

    ``col`` lives in a reusable workspace (one per thread and device) and is rebuilt in backward
    instead of being saved: one more im2col per layer buys an activation memory like PyTorch's
    (x, not kh*kw copies of it). On the GPU (groups=1) K = C*kh*kw is padded to a multiple of 8
    (zero rows in ``col``, zero columns in the weight) so cuBLAS takes its aligned kernels.
    """

    @staticmethod
    def forward(ctx, x, w, b, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, relu=False):
        xp = ctx.xp
        if x.dtype.kind == "b":
            raise not_implemented_for("conv2d", x.dtype)
        n, c, h, wd = x.shape
        o, _, kh, kw = w.shape
        oh = conv_output_size(h, kh, stride[0], padding[0], dilation[0])
        ow = conv_output_size(wd, kw, stride[1], padding[1], dilation[1])
        if oh < 1 or ow < 1:
            raise FunctionalError(f"conv2d: input {tuple(x.shape)} is too small for kernel {(kh, kw)} with padding "
                                  f"{padding} and dilation {dilation} (output would be {oh}x{ow}); use a larger input")
        geom = ((kh, kw), stride, padding, dilation)
        ctx.x_shape, ctx.geom, ctx.groups = x.shape, geom, groups
        ctx.winograd = xp is np and use_winograd(x, w, stride, dilation, groups)
        if ctx.winograd:  # V (transformed input) and U (weight) are kept for the gradients
            y, ctx.winograd_v, u = ctx.kernels.winograd_conv2d_forward(x, w, b, padding, ctx.needs_input_grad[1])
            ctx.winograd_u = u if ctx.needs_input_grad[0] else None
            if relu:
                y = ctx.kernels.relu_forward(y)
            ctx.save_for_backward(x if ctx.needs_input_grad[1] else None,
                                  w if ctx.needs_input_grad[0] else None, y if relu else None)
            return y
        ckk, nl = c * kh * kw, n * oh * ow  # explicit sizes: reshape cannot infer -1 for an empty batch
        kp = _gemm_k(xp, ckk, groups)  # K, padded to a multiple of 8 on the GPU
        # a first layer on the CPU (x is data: no input gradient, a few channels) keeps its col for
        # the weight gradient in a recycled buffer (take_buffer): one im2col less per step
        keep_col = xp is np and ctx.needs_input_grad[1] and not ctx.needs_input_grad[0]
        if keep_col:
            buf = take_buffer((kp, nl), x.dtype)
        else:
            buf = workspace(xp, "conv2d.col", (kp, nl), x.dtype, like=x)
        col = ctx.kernels.im2col(x, *geom, out=buf)  # (Kp, N*OH*OW), written into buf
        ctx.col = col if keep_col else None
        w3 = _weight_matrix(xp, w, groups, kp)  # (G, O/G, Kp/G)
        col3 = col.reshape(groups, kp // groups, nl)  # (G, Kp/G, N*OH*OW), a view
        out = xp.empty((groups, o // groups, nl), dtype=x.dtype)
        for g in range(groups):
            matmul_array(xp, w3[g], col3[g], out=out[g])
        # (O, N*OH*OW) -> (N, O, OH, OW), the bias (and the ReLU) in the same copy
        y = ctx.kernels.conv_output(out.reshape(o, nl), b, (n, o, oh, ow), relu)
        # x is saved to rebuild col for the weight gradient, w for the input gradient, y for the ReLU's mask
        ctx.save_for_backward(x if ctx.needs_input_grad[1] else None,
                              w if ctx.needs_input_grad[0] else None, y if relu else None)
        return y

    @staticmethod
    def backward(ctx, gout):
        xp = ctx.xp
        x, w, relu_out = ctx.saved_tensors
        if ctx.winograd:  # V goes back to the kernel's buffers: a second backward rebuilds it
            v, ctx.winograd_v = ctx.winograd_v, None
            (ksize, _, padding, _), need = ctx.geom, ctx.needs_input_grad
            if relu_out is not None:
                gout = ctx.kernels.relu_backward(gout, relu_out)
            grads = ctx.kernels.winograd_conv2d_backward(gout, x, w, v, ctx.winograd_u, ctx.x_shape, ksize, padding, need)
            return (*grads, None)
        groups = ctx.groups
        n, o, oh, ow = gout.shape
        c, (kh, kw) = ctx.x_shape[1], ctx.geom[0]
        ckk, nl = c * kh * kw, n * oh * ow
        kp = _gemm_k(xp, ckk, groups)
        # (N, O, OH, OW) -> (O, N*OH*OW): the one copy on the way back, with the ReLU's mask and
        # the bias gradient in the same pass
        gy, gb = ctx.kernels.conv_output_grad(gout, relu_out, ctx.needs_input_grad[2])
        gy = gy.reshape(groups, o // groups, nl)
        # col and gcol take turns in the same workspace: col is dead once gW is computed
        buf = workspace(xp, "conv2d.col", (kp, nl), gout.dtype, like=gout)
        gx = gw = None
        if ctx.needs_input_grad[1]:
            col, ctx.col = ctx.col, None  # forward's, if it kept it (a second backward rebuilds it)
            col = col if col is not None else ctx.kernels.im2col(x, *ctx.geom, out=buf)
            col3 = col.reshape(groups, kp // groups, nl)
            gw = xp.empty((groups, o // groups, kp // groups), dtype=gout.dtype)
            for g in range(groups):
                matmul_array(xp, gy[g], col3[g].T, out=gw[g])  # BLAS reads col.T in place
            gw = gw.reshape(o, kp // groups)
            if kp != ckk:  # drop the padding columns (only an ungrouped layer pads)
                gw = xp.ascontiguousarray(gw[:, :ckk])
            gw = gw.reshape(o, c // groups, kh, kw)  # (O, C/G, kh, kw)
            if col is not buf:
                give_buffer(col)
        if ctx.needs_input_grad[0]:
            w3 = _weight_matrix(xp, w, groups, kp)
            gcol = buf.reshape(groups, kp // groups, nl)  # (G, Kp/G, N*OH*OW)
            for g in range(groups):
                matmul_array(xp, w3[g].T, gy[g], out=gcol[g])
            gx = ctx.kernels.col2im(buf[:ckk], ctx.x_shape, *ctx.geom)  # (N, C, H, W)
        return gx, gw, gb


GEMM_K_ALIGN = 8  # cuBLAS's aligned kernels want 16-byte multiples of K: 8 covers float16 and float32


def _gemm_k(xp, ckk: int, groups: int) -> int:
    """The K the GEMMs run with: C*kh*kw, rounded up to GEMM_K_ALIGN on the GPU for ungrouped layers."""
    if xp is np or groups != 1:
        return ckk
    return -(-ckk // GEMM_K_ALIGN) * GEMM_K_ALIGN


def _weight_matrix(xp, w, groups: int, kp: int):
    """w (O, C/G, kh, kw) as (G, O/G, Kp/G): a view, or (padded K) a copy with zero columns."""
    o = w.shape[0]
    ckk_g = w.size // o
    w3 = w.reshape(groups, o // groups, ckk_g)
    if kp == ckk_g * groups:
        return w3
    padded = xp.empty((1, o, kp), dtype=w.dtype)  # two small kernels, no memset (launch budgets)
    padded[0, :, :ckk_g] = w3[0]
    padded[0, :, ckk_g:] = 0
    return padded


class ConvTranspose2dFunction(Function):
    """The transposed convolution (the gradient of conv2d with respect to its input):
    x (N, Cin, H, W), w (Cin, Cout/groups, kh, kw), b (Cout,) or None -> (N, Cout, Hout, Wout).

    One GEMM per group makes ``col (Cout*kh*kw, N*H*W) = W.T @ x``, col2im sums it onto the full,
    unpadded output, and the result is its rows [padding, padding + Hout) (zero where output_padding
    reaches past). Backward is conv2d's forward: im2col of the output gradient in the full frame.
    """

    @staticmethod
    def forward(ctx, x, w, b, stride=(1, 1), padding=(0, 0), output_padding=(0, 0), dilation=(1, 1),
                groups=1):
        xp = ctx.xp
        floating_or_int64("conv_transpose2d", x)
        n, cin, h, wd = x.shape
        _, cog, kh, kw = w.shape
        cout = cog * groups
        full = ((h - 1) * stride[0] + dilation[0] * (kh - 1) + 1, (wd - 1) * stride[1] + dilation[1] * (kw - 1) + 1)
        out = tuple(f - 2 * p + op for f, p, op in zip(full, padding, output_padding))
        if min(out) < 1:
            raise FunctionalError(f"conv_transpose2d: input {tuple(x.shape)} with padding {padding} gives an empty "
                                  f"output ({out[0]}x{out[1]}); use less padding")
        ctx.geom = ((kh, kw), stride, (0, 0), dilation)
        ctx.groups, ctx.x_shape, ctx.frame = groups, x.shape, (full, padding, out)
        ctx.save_for_backward(x if ctx.needs_input_grad[1] else None, w if ctx.needs_input_grad[0] else None)
        nl = n * h * wd
        xg = x.transpose(1, 0, 2, 3).reshape(groups, cin // groups, nl)  # (G, Cin/G, N*H*W)
        wg = w.reshape(groups, cin // groups, cog * kh * kw)  # (G, Cin/G, Cout/G*kh*kw), a view
        col = xp.empty((groups, cog * kh * kw, nl), dtype=x.dtype)
        for g in range(groups):
            matmul_array(xp, wg[g].T, xg[g], out=col[g])
        y = ctx.kernels.col2im(col.reshape(cout * kh * kw, nl), (n, cout, *full), *ctx.geom)
        y = _reframe(xp, y, padding, out)  # (N, Cout, Hout, Wout)
        if b is not None:
            y += b.reshape(1, -1, 1, 1)
        return y

    @staticmethod
    def backward(ctx, gout):
        xp = ctx.xp
        x, w = ctx.saved_tensors
        groups, geom = ctx.groups, ctx.geom
        n, cin, h, wd = ctx.x_shape
        cout = gout.shape[1]
        (kh, kw) = geom[0]
        nl = n * h * wd
        gx = gw = gb = None
        if ctx.needs_input_grad[2]:
            gb = safe_sum(gout, axis=(0, 2, 3))
        if ctx.needs_input_grad[0] or ctx.needs_input_grad[1]:
            full, padding, _ = ctx.frame
            gfull = _reframe(xp, gout, tuple(-p for p in padding), full)  # back in the full frame
            col = ctx.kernels.im2col(gfull, *geom)  # (Cout*kh*kw, N*H*W)
            colg = col.reshape(groups, cout // groups * kh * kw, nl)
        if ctx.needs_input_grad[0]:
            wg = w.reshape(groups, cin // groups, -1)
            gxg = xp.empty((groups, cin // groups, nl), dtype=gout.dtype)
            for g in range(groups):
                matmul_array(xp, wg[g], colg[g], out=gxg[g])
            gx = gxg.reshape(cin, n, h, wd).transpose(1, 0, 2, 3)
        if ctx.needs_input_grad[1]:
            xg = x.transpose(1, 0, 2, 3).reshape(groups, cin // groups, nl)
            gwg = xp.empty((groups, cin // groups, cout // groups * kh * kw), dtype=gout.dtype)
            for g in range(groups):
                matmul_array(xp, xg[g], colg[g].T, out=gwg[g])
            gw = gwg.reshape(cin, cout // groups, kh, kw)
        return gx, gw, gb


def _reframe(xp, y, start, size):
    """The (H, W) window of ``y`` (N, C, H, W) that begins at ``start`` (negative: before y) and
    has ``size``, zeros where it reaches outside ``y``. A C-contiguous copy."""
    out = xp.zeros(y.shape[:2] + tuple(size), dtype=y.dtype)
    src, dst = [], []
    for s0, n, m in zip(start, size, y.shape[2:]):
        lo, hi = max(s0, 0), min(s0 + n, m)
        src.append(slice(lo, max(hi, lo)))
        dst.append(slice(lo - s0, lo - s0 + max(hi - lo, 0)))
    out[:, :, dst[0], dst[1]] = y[:, :, src[0], src[1]]
    return out


# ======================================================================= F (tinyflow.nn.functional)


def _same_padding(kernel: tuple[int, int], dilation: tuple[int, int],
                  stride: tuple[int, int]) -> tuple[tuple[int, int], tuple[int, int]]:
    """padding='same': (top, left) and (bottom, right); the extra row/column of an even total
    goes after, as PyTorch pads it."""
    if stride != (1, 1):
        raise FunctionalError("conv2d: padding='same' is not supported for strided convolutions (as in PyTorch)")
    total = [d * (k - 1) for k, d in zip(kernel, dilation)]
    before = (total[0] // 2, total[1] // 2)
    return before, (total[0] - before[0], total[1] - before[1])


def conv2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: IntPair = 1,  # noqa: A002
           padding: IntPair | str = 0, dilation: IntPair = 1, groups: int = 1) -> Tensor:
    """2-D cross-correlation over input (N, C, H, W) or (C, H, W), as ``torch.nn.functional.conv2d``.

    Inside ``tf.amp.autocast`` it computes in the autocast dtype (float32 weights get float32
    gradients through the casts).
    """
    x, weight, bias = amp.autocast_inputs(input, weight, bias)
    if weight.ndim != 4:
        raise FunctionalError(f"conv2d: weight must be 4-D (O, C/groups, kh, kw), got shape {tuple(weight.shape)}")
    unbatched = x.ndim == 3
    if unbatched:
        x = x.reshape(1, *x.shape)
    if x.ndim != 4:
        raise FunctionalError(f"conv2d: input must be (N, C, H, W) or (C, H, W), got shape {tuple(x.shape)}")
    stride, dilation = pair(stride, "stride", "conv2d"), pair(dilation, "dilation", "conv2d")
    o, cg, kh, kw = weight.shape
    if isinstance(padding, str):
        if padding not in ("valid", "same"):
            raise FunctionalError(f"conv2d: padding must be an int, a pair, 'valid' or 'same', got {padding!r}")
        if padding == "valid":
            padding = (0, 0)
        else:
            before, after = _same_padding((kh, kw), dilation, stride)
            padding = before
            if after != before:  # uneven: the extra row / column explicitly, then the even part
                x = pad(x, (0, after[1] - before[1], 0, after[0] - before[0]))
    padding = pair(padding, "padding", "conv2d")
    if min(stride) < 1 or min(dilation) < 1 or min(padding) < 0:
        raise FunctionalError(f"conv2d: need stride >= 1, dilation >= 1, padding >= 0; got stride={stride}, "
                              f"padding={padding}, dilation={dilation}")
    if not isinstance(groups, int) or groups < 1 or o % groups:
        raise FunctionalError(f"conv2d: groups={groups} must be a positive int dividing the {o} output "
                              f"channels of weight {tuple(weight.shape)}")
    c = x.shape[1]
    if c != cg * groups:
        raise FunctionalError(f"conv2d: input {tuple(x.shape)} has {c} channels but weight {tuple(weight.shape)} with "
                              f"groups={groups} expects {cg * groups}; check in_channels of the layer")
    if bias is not None and tuple(bias.shape) != (o,):
        raise FunctionalError(f"conv2d: bias shape {tuple(bias.shape)} must be ({o},) for weight "
                              f"{tuple(weight.shape)}")
    if x.dtype != weight.dtype:
        raise FunctionalError(f"conv2d: input dtype {x.dtype} and weight dtype {weight.dtype} differ; "
                              "convert one with .to(dtype)")
    y = Conv2dFunction.apply(x, weight, bias, stride=stride, padding=padding, dilation=dilation, groups=groups)
    return y.reshape(*y.shape[1:]) if unbatched else y


def conv_transpose2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: IntPair = 1,  # noqa: A002
                     padding: IntPair = 0, output_padding: IntPair = 0, groups: int = 1,
                     dilation: IntPair = 1) -> Tensor:
    """The transposed 2-D convolution (``torch.nn.functional.conv_transpose2d``): weight is
    (C_in, C_out/groups, kh, kw); the output is (N, C_out, H_out, W_out) with
    H_out = (H - 1) * stride - 2 * padding + dilation * (kh - 1) + output_padding + 1."""
    x, weight, bias = amp.autocast_inputs(input, weight, bias)
    op = "conv_transpose2d"
    if weight.ndim != 4:
        raise FunctionalError(f"{op}: weight must be 4-D (C_in, C_out/groups, kh, kw), got shape {tuple(weight.shape)}")
    unbatched = x.ndim == 3
    if unbatched:
        x = x.reshape(1, *x.shape)
    if x.ndim != 4:
        raise FunctionalError(f"{op}: input must be (N, C, H, W) or (C, H, W), got shape {tuple(input.shape)}")
    stride, padding = pair(stride, "stride", op), pair(padding, "padding", op)
    output_padding, dilation = pair(output_padding, "output_padding", op), pair(dilation, "dilation", op)
    if min(stride) < 1 or min(dilation) < 1 or min(padding) < 0 or min(output_padding) < 0:
        raise FunctionalError(f"{op}: need stride >= 1, dilation >= 1, padding >= 0 and output_padding >= 0; got "
                              f"stride={stride}, padding={padding}, output_padding={output_padding}, dilation={dilation}")
    if any(o >= s and o >= d for o, s, d in zip(output_padding, stride, dilation)):
        raise FunctionalError(f"{op}: output_padding {output_padding} must be smaller than either stride "
                              f"{stride} or dilation {dilation}")
    cin, cog = weight.shape[:2]
    if not isinstance(groups, int) or groups < 1 or cin % groups:
        raise FunctionalError(f"{op}: groups={groups} must be a positive int dividing the {cin} input "
                              f"channels of weight {tuple(weight.shape)}")
    if x.shape[1] != cin:
        raise FunctionalError(f"{op}: input {tuple(x.shape)} has {x.shape[1]} channels but weight "
                              f"{tuple(weight.shape)} expects {cin}; check in_channels of the layer")
    if bias is not None and tuple(bias.shape) != (cog * groups,):
        raise FunctionalError(f"{op}: bias shape {tuple(bias.shape)} must be ({cog * groups},) for weight "
                              f"{tuple(weight.shape)} with groups={groups}")
    if x.dtype != weight.dtype:
        raise FunctionalError(f"{op}: input dtype {x.dtype} and weight dtype {weight.dtype} differ; "
                              "convert one with .to(dtype)")
    y = ConvTranspose2dFunction.apply(x, weight, bias, stride, padding, output_padding, dilation, groups)
    return y.reshape(*y.shape[1:]) if unbatched else y


def conv1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,  # noqa: A002
           padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Tensor:
    """1-D cross-correlation over (N, C, L) or (C, L): conv2d on a height-1 image."""
    if weight.ndim != 3:
        raise FunctionalError(f"conv1d: weight must be 3-D (O, C/groups, k), got shape {tuple(weight.shape)}")
    if input.ndim not in (2, 3):
        raise FunctionalError(f"conv1d: input must be (N, C, L) or (C, L), got shape {tuple(input.shape)}")
    x = input.reshape(*input.shape[:-1], 1, input.shape[-1])  # (N, C, 1, L)
    w = weight.reshape(weight.shape[0], weight.shape[1], 1, weight.shape[2])
    widths = padding if isinstance(padding, str) else (0, single(padding, "padding", "conv1d"))
    y = conv2d(x, w, bias, (1, single(stride, "stride", "conv1d")), widths,
               (1, single(dilation, "dilation", "conv1d")), groups)
    return y.reshape(*y.shape[:-2], y.shape[-1])


def conv_transpose1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,  # noqa: A002
                     padding: Any = 0, output_padding: Any = 0, groups: int = 1, dilation: Any = 1) -> Tensor:
    """The transposed 1-D convolution: conv_transpose2d on a height-1 image."""
    op = "conv_transpose1d"
    if weight.ndim != 3:
        raise FunctionalError(f"{op}: weight must be 3-D (C_in, C_out/groups, k), got shape {tuple(weight.shape)}")
    if input.ndim not in (2, 3):
        raise FunctionalError(f"{op}: input must be (N, C, L) or (C, L), got shape {tuple(input.shape)}")
    x = input.reshape(*input.shape[:-1], 1, input.shape[-1])
    w = weight.reshape(weight.shape[0], weight.shape[1], 1, weight.shape[2])
    y = conv_transpose2d(x, w, bias, (1, single(stride, "stride", op)), (0, single(padding, "padding", op)),
                         (0, single(output_padding, "output_padding", op)), groups,
                         (1, single(dilation, "dilation", op)))
    return y.reshape(*y.shape[:-2], y.shape[-1])


def _depth_first(t: Tensor) -> Tensor:
    """(N, C, D, H, W) -> (N*D, C, H, W): every depth slice an image of the batch."""
    n, c, d, h, w = t.shape
    return t.permute(0, 2, 1, 3, 4).reshape(n * d, c, h, w)


def conv3d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1, padding: Any = 0,  # noqa: A002
           dilation: Any = 1, groups: int = 1) -> Tensor:
    """3-D cross-correlation over (N, C, D, H, W) or (C, D, H, W): one conv2d of every output
    depth's input slices per kernel depth offset, summed (weight (O, C/groups, kd, kh, kw))."""
    op = "conv3d"
    if weight.ndim != 5:
        raise FunctionalError(f"{op}: weight must be 5-D (O, C/groups, kd, kh, kw), got shape {tuple(weight.shape)}")
    unbatched = input.ndim == 4
    x = input.unsqueeze(0) if unbatched else input
    if x.ndim != 5:
        raise FunctionalError(f"{op}: input must be (N, C, D, H, W) or (C, D, H, W), got shape {tuple(input.shape)}")
    s, d = triple(stride, "stride", op), triple(dilation, "dilation", op)
    k = tuple(weight.shape[2:])
    if isinstance(padding, str):
        if padding not in ("valid", "same"):
            raise FunctionalError(f"{op}: padding must be an int, a triple, 'valid' or 'same', got {padding!r}")
        if padding == "same" and s != (1, 1, 1):
            raise FunctionalError(f"{op}: padding='same' is not supported for strided convolutions")
        total = [0, 0, 0] if padding == "valid" else [di * (ki - 1) for ki, di in zip(k, d)]
        widths = [(t // 2, t - t // 2) for t in total]
    else:
        widths = [(p, p) for p in triple(padding, "padding", op)]
    if x.shape[1] != weight.shape[1] * groups:
        raise FunctionalError(f"{op}: input {tuple(x.shape)} has {x.shape[1]} channels but weight "
                              f"{tuple(weight.shape)} with groups={groups} expects {weight.shape[1] * groups}")
    if any(lo or hi for lo, hi in widths):
        x = pad(x, tuple(w for side in reversed(widths) for w in side))
    depth = x.shape[2]
    od = (depth - d[0] * (k[0] - 1) - 1) // s[0] + 1
    if od < 1:
        raise FunctionalError(f"{op}: input {tuple(input.shape)} is too small for kernel {k} (output depth {od})")
    out = None
    for kd in range(k[0]):
        start = kd * d[0]
        part = x[:, :, start:start + (od - 1) * s[0] + 1:s[0]]  # (N, C, OD, H, W)
        y = conv2d(_depth_first(part), weight[:, :, kd], None, s[1:], 0, d[1:], groups)  # (N*OD, O, OH, OW)
        out = y if out is None else out + y
    n = x.shape[0]
    out = out.reshape(n, od, *out.shape[1:]).permute(0, 2, 1, 3, 4)  # (N, O, OD, OH, OW)
    if bias is not None:
        out = out + bias.reshape(1, -1, 1, 1, 1)
    return out.squeeze(0) if unbatched else out


def conv_transpose3d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,  # noqa: A002
                     padding: Any = 0, output_padding: Any = 0, groups: int = 1, dilation: Any = 1) -> Tensor:
    """The transposed 3-D convolution: per kernel depth offset, conv_transpose2d of every input
    depth slice, spread out by the depth stride and summed at its offset; then the depth padding
    is cropped (weight (C_in, C_out/groups, kd, kh, kw))."""
    op = "conv_transpose3d"
    if weight.ndim != 5:
        raise FunctionalError(f"{op}: weight must be 5-D (C_in, C_out/groups, kd, kh, kw), got {tuple(weight.shape)}")
    unbatched = input.ndim == 4
    x = input.unsqueeze(0) if unbatched else input
    if x.ndim != 5:
        raise FunctionalError(f"{op}: input must be (N, C, D, H, W) or (C, D, H, W), got shape {tuple(input.shape)}")
    s, p = triple(stride, "stride", op), triple(padding, "padding", op)
    op_, d = triple(output_padding, "output_padding", op), triple(dilation, "dilation", op)
    if any(o >= si and o >= di for o, si, di in zip(op_, s, d)):
        raise FunctionalError(f"{op}: output_padding {op_} must be smaller than either stride {s} or dilation {d}")
    n, _, depth = x.shape[:3]
    kd = weight.shape[2]
    full = (depth - 1) * s[0] + d[0] * (kd - 1) + 1
    spread_len = (depth - 1) * s[0] + 1
    total = None
    for i in range(kd):
        y = conv_transpose2d(_depth_first(x), weight[:, :, i], None, s[1:], p[1:], op_[1:], groups, d[1:])
        y = y.reshape(n, depth, *y.shape[1:]).permute(0, 2, 1, 3, 4)  # (N, Cout, D, OH, OW)
        if s[0] > 1:  # input depth i lands at depth i * stride: zeros in between
            y = stack([y] + [y * 0.0] * (s[0] - 1), dim=3).reshape(*y.shape[:2], depth * s[0], *y.shape[3:])
            y = y[:, :, :spread_len]
        front = i * d[0]
        y = pad(y, (0, 0, 0, 0, front, full - spread_len - front))
        total = y if total is None else total + y
    out = pad(total, (0, 0, 0, 0, -p[0], op_[0] - p[0]))  # crop the padding, extend by output_padding
    if bias is not None:
        out = out + bias.reshape(1, -1, 1, 1, 1)
    return out.squeeze(0) if unbatched else out
