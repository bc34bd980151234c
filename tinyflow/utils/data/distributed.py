"""``torch.utils.data.distributed``: DistributedSampler (tinyflow/data/distributed.py)."""
from tinyflow.data.distributed import DistributedSampler  # noqa: F401

__all__ = ["DistributedSampler"]
