"""``torch.nn.modules.dropout``: re-exports tinyflow.nn.dropout (where tinyflow keeps these layers)."""
from tinyflow.nn.dropout import *  # noqa: F401,F403
from tinyflow.nn.dropout import __all__  # noqa: F401
