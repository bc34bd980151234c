"""nn.Embedding: a lookup table of learnable vectors indexed by integer ids."""
from __future__ import annotations

from typing import Any

from tinyflow.autograd import no_grad
from tinyflow.nn import functional as F
from tinyflow.nn import init
from tinyflow.nn.module import Module
from tinyflow.nn.parameter import Parameter
from tinyflow.tensor import Tensor, empty

__all__ = ["Embedding"]


class Embedding(Module):
    """weight (num_embeddings, embedding_dim), N(0, 1) initialised; ids (*) -> vectors (*, embedding_dim).

    The row of ``padding_idx`` starts at zero and never receives a gradient, as in PyTorch.
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None = None,
                 device: Any = None, dtype: Any = None) -> None:  # fmt: skip
        super().__init__()
        if num_embeddings < 1 or embedding_dim < 1:
            raise ValueError(
                f"Embedding: num_embeddings ({num_embeddings}) and embedding_dim ({embedding_dim}) must be >= 1"
            )
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError(f"Embedding: padding_idx {padding_idx} is outside [-{num_embeddings}, {num_embeddings})")
            padding_idx %= num_embeddings
        self.num_embeddings, self.embedding_dim, self.padding_idx = num_embeddings, embedding_dim, padding_idx
        self.weight = Parameter(empty(num_embeddings, embedding_dim, device=device, dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with no_grad():
                self.weight.array[self.padding_idx] = 0

    @classmethod
    def from_pretrained(cls, embeddings: Any, freeze: bool = True, padding_idx: int | None = None) -> Embedding:
        """An Embedding holding ``embeddings`` (V, D); frozen (no gradient) unless ``freeze=False``."""
        weights = embeddings if isinstance(embeddings, Tensor) else Tensor(embeddings)
        if weights.ndim != 2:
            raise ValueError(f"Embedding.from_pretrained: embeddings must be 2-D (V, D), got shape {weights.shape}")
        module = cls(weights.shape[0], weights.shape[1], padding_idx=padding_idx, device=weights.device, dtype=weights.dtype)
        module.weight.array = weights.array.copy()
        module.weight.requires_grad = not freeze
        return module

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002
        return F.embedding(input, self.weight, self.padding_idx)

    def extra_repr(self) -> str:
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        return s if self.padding_idx is None else s + f", padding_idx={self.padding_idx}"
