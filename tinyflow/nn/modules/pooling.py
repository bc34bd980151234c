"""``torch.nn.modules.pooling``: re-exports tinyflow.nn.pooling (where tinyflow keeps these layers)."""
from tinyflow.nn.pooling import *  # noqa: F401,F403
from tinyflow.nn.pooling import __all__  # noqa: F401
