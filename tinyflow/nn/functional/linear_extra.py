"""F.bilinear, the two-input dense layer's maths: the PyTorch surface. F.linear is in linear.py."""
from __future__ import annotations

from tinyflow.nn.functional._utils import FunctionalError
from tinyflow.tensor import Tensor

__all__ = ["bilinear"]


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
