"""``torch.nn.modules.loss``: re-exports tinyflow.nn.loss (where tinyflow keeps these layers)."""
from tinyflow.nn.loss import *  # noqa: F401,F403
from tinyflow.nn.loss import __all__  # noqa: F401
