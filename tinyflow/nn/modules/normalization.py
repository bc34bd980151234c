"""``torch.nn.modules.normalization``: re-exports tinyflow.nn.normalization (where tinyflow keeps these layers)."""
from tinyflow.nn.normalization import *  # noqa: F401,F403
from tinyflow.nn.normalization import __all__  # noqa: F401
