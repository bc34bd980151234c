"""``torch.nn.modules.container``: re-exports tinyflow.nn.container (where tinyflow keeps these layers)."""
from tinyflow.nn.container import *  # noqa: F401,F403
from tinyflow.nn.container import __all__  # noqa: F401
