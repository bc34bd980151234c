"""``torch.nn.modules.distance``: re-exports tinyflow.nn.distance (where tinyflow keeps these layers)."""
from tinyflow.nn.distance import *  # noqa: F401,F403
from tinyflow.nn.distance import __all__  # noqa: F401
