"""``nn.utils`` as in PyTorch: gradient clipping lives in tinyflow.optim, re-exported here."""
from tinyflow.optim.clip_grad import clip_grad_norm_, clip_grad_value_  # noqa: F401
