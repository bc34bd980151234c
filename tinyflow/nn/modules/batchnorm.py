"""BatchNorm1d/2d/3d: batch normalisation with running statistics and PyTorch's buffers."""
from __future__ import annotations

from typing import Any

from tinyflow.autograd.grad_mode import no_grad
from tinyflow.nn import functional as F
from tinyflow.nn import init
from tinyflow.nn.modules.module import Module
from tinyflow.nn.parameter import Parameter
from tinyflow.tensor import Tensor, ones, tensor, zeros

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d"]


class _NormBase(Module):
    """Per-channel affine parameters and running statistics, PyTorch's names and update rules.

    Buffers ``running_mean``, ``running_var`` and ``num_batches_tracked`` (int64) are named as in
    PyTorch, so torchvision state dicts load. ``momentum=None`` gives a cumulative average.
    """

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True, device: Any = None,
                 dtype: Any = None, *, bias: bool = True) -> None:
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        if affine:
            self.weight = Parameter(ones(num_features, dtype=dtype, device=device))
            if bias:
                self.bias = Parameter(zeros(num_features, dtype=dtype, device=device))
            else:
                self.register_parameter("bias", None)
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

    def reset_parameters(self) -> None:
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}")


class _BatchNorm(_NormBase):
    _ndims: tuple[int, ...] = (4,)
    _layout = "(N, C, H, W)"

    def forward(self, x: Tensor) -> Tensor:
        name = type(self).__name__
        if x.ndim not in self._ndims:
            raise ValueError(f"{name}: expected {' or '.join(f'{n}-D' for n in self._ndims)} input {self._layout}, "
                             f"got {x.ndim}-D input of shape {tuple(x.shape)}")
        if x.shape[1] != self.num_features:
            raise ValueError(f"{name}: input {tuple(x.shape)} has {x.shape[1]} channels but the "
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


class BatchNorm1d(_BatchNorm):
    """Batch normalisation of (N, C) or (N, C, L) per channel."""

    _ndims, _layout = (2, 3), "(N, C) or (N, C, L)"


class BatchNorm2d(_BatchNorm):
    """Batch normalisation of (N, C, H, W) per channel (ResNets)."""

    _ndims, _layout = (4,), "(N, C, H, W)"


class BatchNorm3d(_BatchNorm):
    """Batch normalisation of (N, C, D, H, W) per channel."""

    _ndims, _layout = (5,), "(N, C, D, H, W)"
