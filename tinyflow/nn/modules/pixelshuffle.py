"""``torch.nn.modules.pixelshuffle``: re-exports tinyflow.nn.pixelshuffle (where tinyflow keeps these layers)."""
from tinyflow.nn.pixelshuffle import *  # noqa: F401,F403
from tinyflow.nn.pixelshuffle import __all__  # noqa: F401
