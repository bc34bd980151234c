"""2-D convolution as im2col + one GEMM per group (col2im in backward).

The layout (see docs/convolution.md): ``col = im2col(x)`` is (C*kh*kw, N*OH*OW), the weight is
viewed as (O, C*kh*kw) with no copy, and the whole batch is one GEMM per group::

    forward   out (O, N*OH*OW) = W (O, CKK)       @ col (CKK, N*OH*OW)
    weight    gW  (O, CKK)     = gout (O, N*OH*OW) @ col.T                  (BLAS transposes)
    input     gcol(CKK, N*OH*OW) = W.T            @ gout (O, N*OH*OW)      -> col2im

The only copies besides im2col itself are the (O, N, OH, OW) <-> (N, O, OH, OW) transposes of
the output and its gradient, which are ``kh*kw*C/O`` times smaller than ``col``: named kernels
(``conv_output`` / ``conv_output_grad``) that fuse the bias add into the first and the bias
gradient into the second, and, when the op is asked for a ReLU after it (``relu=True``, an
internal switch for callers that know a ReLU follows), the ReLU and its mask as well.
On the GPU (with groups=1) K = C*kh*kw is padded to a multiple of 8, zero rows in ``col`` (im2col
writes them) and zero columns in the weight matrix, so cuBLAS takes its aligned kernels (AlexNet's
conv1 has K = 363). ``col`` is not saved: backward rebuilds it (see Conv2dFunction).
It lives in one reusable workspace per thread and device (``tinyflow.kernels._cpu.workspace``),
on a GPU as on the CPU: im2col writes into it, and in backward gcol takes its place once gW is
done.

On the CPU, where ``use_winograd`` (below: the op picks its algorithm, the kernels compute) says it
pays (stride-1 ungrouped 3x3 and 5x5 layers with enough channels and images), the convolution runs on
the Winograd
kernels instead: 16 GEMMs over transformed 4x4 tiles (F(2x2, 3x3)) or, for outputs of 3x3 and
up, 36 over 6x6 tiles (F(4x4, 3x3)): 4x fewer multiplications for 3x3 (2.8x for 5x5) and no
im2col / col2im. Same results to float rounding; see docs/convolution.md and
tinyflow/kernels/winograd.py (a CPU-only kernel family: there is no CUDA twin).

The argument checks, padding='same' and autocast are F.conv2d's (tinyflow/nn/functional/conv.py).
"""
from __future__ import annotations

import numpy as np

from tinyflow.autograd import Function
from tinyflow.kernels._cpu import give_buffer, take_buffer, workspace
from tinyflow.kernels.shapes import conv_output_size
from tinyflow.ops.elementwise import floating_or_int64, not_implemented_for
from tinyflow.ops.linear import matmul_array, safe_sum

__all__ = ["Conv2dFunction", "ConvTranspose2dFunction", "use_winograd"]

Pair = tuple[int, int]

# Stride-1 ungrouped 3x3 / 5x5 convolutions with at least this many input and output channels,
# and a batch of at least this many images, take the Winograd path on the CPU (up to 4x fewer
# multiplications for 3x3, 2.8x for 5x5, no im2col / col2im). With fewer channels its small GEMMs
# lose to the one im2col GEMM; its transforms run over the batch innermost, so tiny batches lose
# too. Set WINOGRAD_MIN_CHANNELS to 0 to turn the path off.
WINOGRAD_MIN_CHANNELS = 16
WINOGRAD_MIN_BATCH = 8
WINOGRAD_KERNELS = (3, 5, 6)  # kernel sides that split into 3x3 sub-kernels without much waste


def use_winograd(x, w, stride: Pair, dilation: Pair, groups: int) -> bool:
    """Whether conv2d(x (N, C, H, W), w (O, C/groups, kh, kw)) runs on the CPU's Winograd kernels
    (tinyflow/kernels/winograd.py, loaded only when this says yes)."""
    n, c = x.shape[:2]
    o, _, kh, kw = w.shape
    return (WINOGRAD_MIN_CHANNELS > 0 and np.dtype(x.dtype) in (np.float32, np.float64)
            and kh in WINOGRAD_KERNELS and kw in WINOGRAD_KERNELS
            and stride == (1, 1) and dilation == (1, 1) and groups == 1
            and n >= max(1, WINOGRAD_MIN_BATCH) and min(c, o) >= WINOGRAD_MIN_CHANNELS)


class Conv2dFunction(Function):
    """y = conv(x, w) + b for x (N, C, H, W), w (O, C/groups, kh, kw), b (O,) or None.

    ``col`` lives in a reusable workspace (one per thread and device, CPU and GPU alike) and is
    rebuilt in backward instead of being saved: one more im2col per layer buys an activation
    memory like PyTorch's (x, not kh*kw copies of it) and no fresh 100 MB allocations per step.
    The exception is a first layer on the CPU (no gradient for x, so x is data with a few
    channels): its col is kept in a recycled buffer (``take_buffer``) for the weight gradient.
    """

    @staticmethod
    def forward(ctx, x, w, b, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, relu=False):
        xp = ctx.xp
        if x.dtype.kind == "b":
            raise not_implemented_for("conv2d", x.dtype)
        n, c, h, wd = x.shape
        o, _, kh, kw = w.shape
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
        oh = conv_output_size(h, kh, stride[0], padding[0], dilation[0])
        ow = conv_output_size(wd, kw, stride[1], padding[1], dilation[1])
        ckk, nl = c * kh * kw, n * oh * ow  # explicit sizes: reshape cannot infer -1 for an empty batch
        kp = _gemm_k(xp, ckk, groups)  # K, padded to a multiple of 8 on the GPU
        # A first layer (no input gradient: x is data, a few channels) keeps its col for the
        # weight gradient in a recycled buffer instead of rebuilding it: one im2col less per step
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


GEMM_K_ALIGN = 8
"""On the GPU, K of the convolution GEMMs is padded to a multiple of this (cuBLAS's aligned
kernels want 16-byte multiples; 8 covers every dtype up to float16 and float32 alike)."""


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

    One GEMM per group makes the columns, ``col (Cout*kh*kw, N*H*W) = W.T @ x``, and col2im
    sums them onto the full, unpadded output ((H-1)*stride + dilation*(kh-1) + 1 rows); the
    result is its rows [padding, padding + Hout), zero where output_padding reaches past it.
    Backward is conv2d's forward: im2col of the output gradient, placed back in the full frame.
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
