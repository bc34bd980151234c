"""``torch.nn.modules.conv``: re-exports tinyflow.nn.conv (where tinyflow keeps these layers)."""
from tinyflow.nn.conv import *  # noqa: F401,F403
from tinyflow.nn.conv import __all__  # noqa: F401
