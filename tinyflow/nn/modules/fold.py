"""``torch.nn.modules.fold``: re-exports tinyflow.nn.fold (where tinyflow keeps these layers)."""
from tinyflow.nn.fold import *  # noqa: F401,F403
from tinyflow.nn.fold import __all__  # noqa: F401
