"""Where nn/modules/loss.py still finds ``_reduction``; F's losses are in tinyflow/ops/loss.py. This
file goes with the nn/functional package."""
from tinyflow.ops.loss import REDUCTIONS, _reduction  # noqa: F401
