"""nn.BatchNorm2d (ResNets): batch normalisation with running statistics, PyTorch's buffers."""
from __future__ import annotations

from typing import Any

from tinyflow.autograd import no_grad
from tinyflow.nn import functional as F
from tinyflow.nn.module import Module
from tinyflow.nn.parameter import Parameter
from tinyflow.tensor import Tensor, ones, tensor, zeros

__all__ = ["BatchNorm2d"]


class BatchNorm2d(Module):
    """Batch normalisation of (N, C, H, W) per channel, PyTorch's state and update rules.

    Buffers ``running_mean``, ``running_var`` and ``num_batches_tracked`` (int64) are named as in
    PyTorch, so torchvision state dicts load. ``momentum=None`` gives a cumulative average.
    """

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        if affine:
            self.weight = Parameter(ones(num_features, dtype=dtype, device=device))
            self.bias = Parameter(zeros(num_features, dtype=dtype, device=device))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", zeros(num_features, dtype=dtype, device=device))
            self.register_buffer("running_var", ones(num_features, dtype=dtype, device=device))
            self.register_buffer("num_batches_tracked", tensor(0, dtype="int64", device=device))
        else:
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                self.register_buffer(name, None)

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            with no_grad():
                self.running_mean.zero_()
                self.running_var.fill_(1.0)
                self.num_batches_tracked.zero_()

    def forward(self, x: Tensor) -> Tensor:
        if x.ndim != 4:
            raise ValueError(f"BatchNorm2d: expected 4-D input (N, C, H, W), got shape {tuple(x.shape)}")
        if x.shape[1] != self.num_features:
            raise ValueError(f"BatchNorm2d: input {tuple(x.shape)} has {x.shape[1]} channels but the "
                             f"layer was built for num_features={self.num_features}")
        momentum = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            with no_grad():
                self.num_batches_tracked.add_(1)
            if self.momentum is None:  # cumulative moving average
                momentum = 1.0 / int(self.num_batches_tracked.item())
        use_batch_stats = self.training or not self.track_running_stats
        # in training, running stats are updated in place (when tracked); in eval they are used
        track = not self.training or self.track_running_stats
        return F.batch_norm(x, self.running_mean if track else None, self.running_var if track else None,
                            self.weight, self.bias, use_batch_stats, momentum, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"track_running_stats={self.track_running_stats}")
