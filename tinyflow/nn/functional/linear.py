"""F.linear: the dense layer's maths (F.bilinear is the PyTorch surface, in linear_extra.py)."""
from __future__ import annotations

from tinyflow import amp
from tinyflow.ops.linalg import LinearFunction
from tinyflow.tensor import Tensor

__all__ = ["linear"]


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """x @ weight.T + bias (in the autocast dtype inside ``tf.amp.autocast``)."""
    return LinearFunction.apply(*amp.autocast_inputs(x, weight, bias))
