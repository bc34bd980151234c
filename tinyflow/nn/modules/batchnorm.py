"""``torch.nn.modules.batchnorm``: re-exports tinyflow.nn.batchnorm (where tinyflow keeps these layers)."""
from tinyflow.nn.batchnorm import *  # noqa: F401,F403
from tinyflow.nn.batchnorm import __all__  # noqa: F401
