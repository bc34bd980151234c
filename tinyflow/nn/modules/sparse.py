"""``torch.nn.modules.sparse``: re-exports tinyflow.nn.sparse (where tinyflow keeps these layers)."""
from tinyflow.nn.sparse import *  # noqa: F401,F403
from tinyflow.nn.sparse import __all__  # noqa: F401
