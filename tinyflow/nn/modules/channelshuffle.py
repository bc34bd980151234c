"""``torch.nn.modules.channelshuffle``: ChannelShuffle (kept in tinyflow.nn.pixelshuffle)."""
from tinyflow.nn.pixelshuffle import ChannelShuffle  # noqa: F401

__all__ = ["ChannelShuffle"]
