"""``torch.nn.modules.flatten``: re-exports tinyflow.nn.flatten (where tinyflow keeps these layers)."""
from tinyflow.nn.flatten import *  # noqa: F401,F403
from tinyflow.nn.flatten import __all__  # noqa: F401
