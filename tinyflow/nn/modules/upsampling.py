"""``torch.nn.modules.upsampling``: re-exports tinyflow.nn.upsampling (where tinyflow keeps these layers)."""
from tinyflow.nn.upsampling import *  # noqa: F401,F403
from tinyflow.nn.upsampling import __all__  # noqa: F401
