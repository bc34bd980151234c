"""``torch.nn.modules.instancenorm``: re-exports tinyflow.nn.instancenorm (where tinyflow keeps these layers)."""
from tinyflow.nn.instancenorm import *  # noqa: F401,F403
from tinyflow.nn.instancenorm import __all__  # noqa: F401
