"""``torch.nn.modules.module``: re-exports tinyflow.nn.module (where tinyflow keeps these layers)."""
from tinyflow.nn.module import *  # noqa: F401,F403
from tinyflow.nn.module import __all__  # noqa: F401
