"""``torch.nn.modules.padding``: re-exports tinyflow.nn.padding (where tinyflow keeps these layers)."""
from tinyflow.nn.padding import *  # noqa: F401,F403
from tinyflow.nn.padding import __all__  # noqa: F401
