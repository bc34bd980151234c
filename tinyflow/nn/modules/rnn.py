"""``torch.nn.modules.rnn``: re-exports tinyflow.nn.rnn (where tinyflow keeps these layers)."""
from tinyflow.nn.rnn import *  # noqa: F401,F403
from tinyflow.nn.rnn import __all__  # noqa: F401
