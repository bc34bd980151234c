"""``torch.nn.modules.linear``: re-exports tinyflow.nn.linear (where tinyflow keeps these layers)."""
from tinyflow.nn.linear import *  # noqa: F401,F403
from tinyflow.nn.linear import __all__  # noqa: F401
