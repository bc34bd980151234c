"""F.dropout: inverted dropout. Channel (feature) dropout and SELU's alpha dropout are the PyTorch
surface, in dropout_extra.py."""
from __future__ import annotations

from tinyflow.creation import zeros_like
from tinyflow.nn.functional._utils import FunctionalError
from tinyflow.ops.elementwise import DropoutFunction, dropout_seed
from tinyflow.random import Generator, rng
from tinyflow.tensor import Tensor

__all__ = ["dropout"]


def _check_p(op: str, p: float) -> None:
    if not 0 <= p <= 1:
        raise FunctionalError(f"{op}: dropout probability has to be between 0 and 1, but got {p}")


def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False, *,  # noqa: A002
            generator: Generator | None = None) -> Tensor:
    """Inverted dropout; the identity when not training or p == 0."""
    _check_p("dropout", p)
    if not training or p == 0:
        return input
    if p == 1:  # zeros in the input's dtype (through the graph, for a zero gradient)
        return input * 0 if input.is_floating_point() else zeros_like(input)
    # an int now, or inside a CUDA graph capture a device slot drawn before each replay
    seed = dropout_seed(lambda: int(rng(generator).integers(0, 2**63 - 1)))
    return DropoutFunction.apply(input, p, seed)
