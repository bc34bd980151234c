"""``torch.nn.modules.transformer``: re-exports tinyflow.nn.transformer (where tinyflow keeps these layers)."""
from tinyflow.nn.transformer import *  # noqa: F401,F403
from tinyflow.nn.transformer import __all__  # noqa: F401
