"""F.linear: the dense layer's maths (F.bilinear is the PyTorch surface, in linear_extra.py)."""
from __future__ import annotations

from tinyflow import amp
from tinyflow.ops.linalg import LinearFunction
from tinyflow.tensor import Tensor

__all__ = ["linear"]


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:  # noqa: A002
    """input @ weight.T + bias (in the autocast dtype inside ``tf.amp.autocast``)."""
    return LinearFunction.apply(*amp.autocast_inputs(input, weight, bias))
