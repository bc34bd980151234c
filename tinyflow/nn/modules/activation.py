"""``torch.nn.modules.activation``: re-exports tinyflow.nn.activation (where tinyflow keeps these layers)."""
from tinyflow.nn.activation import *  # noqa: F401,F403
from tinyflow.nn.activation import __all__  # noqa: F401
