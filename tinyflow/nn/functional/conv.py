"""The image convolutions: conv2d and conv_transpose2d check their arguments and call the
differentiable ops of tinyflow/ops/conv.py. The 1-d and 3-d forms are the PyTorch surface, in
conv_extra.py (built on these)."""
from __future__ import annotations

from tinyflow import amp
from tinyflow.kernels.shapes import IntPair, _pair, conv_output_size
from tinyflow.nn.functional._utils import FunctionalError
from tinyflow.ops.conv import Conv2dFunction, ConvTranspose2dFunction
from tinyflow.tensor import Tensor

__all__ = ["conv2d", "conv_transpose2d"]


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
    stride, dilation = _pair(stride, "stride"), _pair(dilation, "dilation")
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
                from tinyflow.ops.pad import pad  # only here: a step need not load F.pad

                x = pad(x, (0, after[1] - before[1], 0, after[0] - before[0]))
    padding = _pair(padding, "padding")
    if min(stride) < 1 or min(dilation) < 1 or min(padding) < 0:
        raise FunctionalError(f"conv2d: need stride >= 1, dilation >= 1, padding >= 0; got stride={stride}, "
                              f"padding={padding}, dilation={dilation}")
    if not isinstance(groups, int) or groups < 1 or o % groups:
        raise FunctionalError(f"conv2d: groups={groups} must be a positive int dividing the {o} output "
                              f"channels of weight {tuple(weight.shape)}")
    n, c, h, w = x.shape
    if c != cg * groups:
        raise FunctionalError(
            f"conv2d: input {tuple(x.shape)} has {c} channels but weight {tuple(weight.shape)} with "
            f"groups={groups} expects {cg * groups}; check in_channels of the layer"
        )
    if bias is not None and tuple(bias.shape) != (o,):
        raise FunctionalError(f"conv2d: bias shape {tuple(bias.shape)} must be ({o},) for weight "
                              f"{tuple(weight.shape)}")
    oh = conv_output_size(h, kh, stride[0], padding[0], dilation[0])
    ow = conv_output_size(w, kw, stride[1], padding[1], dilation[1])
    if oh < 1 or ow < 1:
        raise FunctionalError(
            f"conv2d: input {tuple(x.shape)} is too small for kernel {(kh, kw)} with padding "
            f"{padding} and dilation {dilation} (output would be {oh}x{ow}); use a larger input"
        )
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
    stride, padding = _pair(stride, "stride", op), _pair(padding, "padding", op)
    output_padding, dilation = _pair(output_padding, "output_padding", op), _pair(dilation, "dilation", op)
    if min(stride) < 1 or min(dilation) < 1 or min(padding) < 0 or min(output_padding) < 0:
        raise FunctionalError(f"{op}: need stride >= 1, dilation >= 1, padding >= 0 and output_padding >= 0; got "
                              f"stride={stride}, padding={padding}, output_padding={output_padding}, dilation={dilation}")
    if any(o >= s and o >= d for o, s, d in zip(output_padding, stride, dilation)):
        raise FunctionalError(f"{op}: output_padding {output_padding} must be smaller than either stride "
                              f"{stride} or dilation {dilation}")
    cin, cog, kh, kw = weight.shape
    if not isinstance(groups, int) or groups < 1 or cin % groups:
        raise FunctionalError(f"{op}: groups={groups} must be a positive int dividing the {cin} input "
                              f"channels of weight {tuple(weight.shape)}")
    if x.shape[1] != cin:
        raise FunctionalError(f"{op}: input {tuple(x.shape)} has {x.shape[1]} channels but weight "
                              f"{tuple(weight.shape)} expects {cin}; check in_channels of the layer")
    if bias is not None and tuple(bias.shape) != (cog * groups,):
        raise FunctionalError(f"{op}: bias shape {tuple(bias.shape)} must be ({cog * groups},) for weight "
                              f"{tuple(weight.shape)} with groups={groups}")
    h, w = x.shape[-2:]
    hout = (h - 1) * stride[0] - 2 * padding[0] + dilation[0] * (kh - 1) + output_padding[0] + 1
    wout = (w - 1) * stride[1] - 2 * padding[1] + dilation[1] * (kw - 1) + output_padding[1] + 1
    if hout < 1 or wout < 1:
        raise FunctionalError(f"{op}: input {tuple(x.shape)} with padding {padding} gives an empty output "
                              f"({hout}x{wout}); use less padding")
    if x.dtype != weight.dtype:
        raise FunctionalError(f"{op}: input dtype {x.dtype} and weight dtype {weight.dtype} differ; "
                              "convert one with .to(dtype)")
    y = ConvTranspose2dFunction.apply(x, weight, bias, stride, padding, output_padding, dilation, groups)
    return y.reshape(*y.shape[1:]) if unbatched else y
