"""The rest of F's convolutions: conv1d, conv3d and their transposes: the PyTorch surface. The
framework's image convolutions (conv2d, conv_transpose2d) are in conv.py; these are built on them:
1-d runs them on a height-1 image, 3-d as a sum of 2-d convolutions over the kernel's depth offsets.
"""
from __future__ import annotations

from typing import Any

from tinyflow.nn.functional._utils import FunctionalError, _single, _triple
from tinyflow.nn.functional.conv import conv2d, conv_transpose2d
from tinyflow.ops.pad import pad
from tinyflow.tensor import Tensor

__all__ = ["conv1d", "conv_transpose1d", "conv3d", "conv_transpose3d"]


def conv1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,  # noqa: A002
           padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Tensor:
    """1-D cross-correlation over (N, C, L) or (C, L): conv2d on a height-1 image."""
    if weight.ndim != 3:
        raise FunctionalError(f"conv1d: weight must be 3-D (O, C/groups, k), got shape {tuple(weight.shape)}")
    if input.ndim not in (2, 3):
        raise FunctionalError(f"conv1d: input must be (N, C, L) or (C, L), got shape {tuple(input.shape)}")
    x = input.reshape(*input.shape[:-1], 1, input.shape[-1])  # (N, C, 1, L)
    w = weight.reshape(weight.shape[0], weight.shape[1], 1, weight.shape[2])
    pad = padding if isinstance(padding, str) else (0, _single(padding, "padding", "conv1d"))
    y = conv2d(x, w, bias, (1, _single(stride, "stride", "conv1d")), pad,
               (1, _single(dilation, "dilation", "conv1d")), groups)
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
    y = conv_transpose2d(x, w, bias, (1, _single(stride, "stride", op)), (0, _single(padding, "padding", op)),
                         (0, _single(output_padding, "output_padding", op)), groups,
                         (1, _single(dilation, "dilation", op)))
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
    s, d = _triple(stride, "stride", op), _triple(dilation, "dilation", op)
    k = tuple(weight.shape[2:])
    if isinstance(padding, str):
        if padding not in ("valid", "same"):
            raise FunctionalError(f"{op}: padding must be an int, a triple, 'valid' or 'same', got {padding!r}")
        if padding == "same" and s != (1, 1, 1):
            raise FunctionalError(f"{op}: padding='same' is not supported for strided convolutions")
        total = [0, 0, 0] if padding == "valid" else [di * (ki - 1) for ki, di in zip(k, d)]
        widths = [(t // 2, t - t // 2) for t in total]
    else:
        widths = [(p, p) for p in _triple(padding, "padding", op)]
    if x.shape[1] != weight.shape[1] * groups:
        raise FunctionalError(f"{op}: input {tuple(x.shape)} has {x.shape[1]} channels but weight "
                              f"{tuple(weight.shape)} with groups={groups} expects {weight.shape[1] * groups}")
    if any(lo or hi for lo, hi in widths):
        x = pad(x, tuple(w for pair in reversed(widths) for w in pair))
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
    s, p = _triple(stride, "stride", op), _triple(padding, "padding", op)
    op_, d = _triple(output_padding, "output_padding", op), _triple(dilation, "dilation", op)
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
            from tinyflow.tensor import stack

            y = stack([y] + [y * 0.0] * (s[0] - 1), dim=3).reshape(*y.shape[:2], depth * s[0], *y.shape[3:])
            y = y[:, :, :spread_len]
        front = i * d[0]
        y = pad(y, (0, 0, 0, 0, front, full - spread_len - front))
        total = y if total is None else total + y
    out = pad(total, (0, 0, 0, 0, -p[0], op_[0] - p[0]))  # crop the padding, extend by output_padding
    if bias is not None:
        out = out + bias.reshape(1, -1, 1, 1, 1)
    return out.squeeze(0) if unbatched else out
