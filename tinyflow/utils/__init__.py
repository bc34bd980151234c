"""``tinyflow.utils``: where PyTorch programs import ``torch.utils.data`` from.

``tinyflow.utils.data`` is ``tinyflow.data`` under PyTorch's path (``from tinyflow.utils.data
import DataLoader, TensorDataset``), its ``distributed`` module included.
"""
from tinyflow.utils import data  # noqa: F401

__all__ = ["data"]
