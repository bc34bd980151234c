"""``tinyflow.utils``: where PyTorch programs import ``torch.utils.data`` and
``torch.utils.checkpoint`` from.

``tinyflow.utils.data`` is ``tinyflow.data`` under PyTorch's path (``from tinyflow.utils.data
import DataLoader, TensorDataset``), its ``distributed`` module included;
``tinyflow.utils.checkpoint`` recomputes a block in backward instead of keeping its activations;
``tinyflow.utils.tensorboard.SummaryWriter`` writes TensorBoard event files (imported on use).
"""
from tinyflow.utils import checkpoint, data  # noqa: F401

__all__ = ["checkpoint", "data"]
