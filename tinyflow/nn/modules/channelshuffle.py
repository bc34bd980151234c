"""ChannelShuffle: ShuffleNet's channel shuffle (torch/nn/modules/channelshuffle.py)."""
from __future__ import annotations

from tinyflow.nn import functional as F
from tinyflow.nn.modules.module import Module
from tinyflow.tensor import Tensor

__all__ = ["ChannelShuffle"]


class ChannelShuffle(Module):
    """ShuffleNet's channel shuffle over (N, C, *)."""

    def __init__(self, groups: int) -> None:
        super().__init__()
        self.groups = groups

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002
        return F.channel_shuffle(input, self.groups)

    def extra_repr(self) -> str:
        return f"groups={self.groups}"
