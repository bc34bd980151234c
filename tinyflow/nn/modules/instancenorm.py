"""InstanceNorm1d/2d/3d: each sample's channels normalised over their own positions."""
from __future__ import annotations

from typing import Any

from tinyflow.nn import functional as F
from tinyflow.nn.modules.batchnorm import _NormBase
from tinyflow.tensor import Tensor

__all__ = ["InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d"]


class _InstanceNorm(_NormBase):
    _spatial = 2

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = False,
                 track_running_stats: bool = False, device: Any = None, dtype: Any = None, *,
                 bias: bool = True) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002
        name, batched = type(self).__name__, self._spatial + 2
        if input.ndim not in (batched - 1, batched):
            raise ValueError(f"{name}: expected {batched - 1}D or {batched}D input, got {input.ndim}D input "
                             f"of shape {tuple(input.shape)}")
        unbatched = input.ndim == batched - 1
        x = input.reshape(1, *input.shape) if unbatched else input
        if self.affine and x.shape[1] != self.num_features:
            raise ValueError(f"{name}: expected input's size at dim 1 to match num_features "
                             f"({self.num_features}), but got {x.shape[1]} (input shape {tuple(input.shape)})")
        use_input_stats = self.training or not self.track_running_stats
        y = F.instance_norm(x, self.running_mean, self.running_var, self.weight, self.bias, use_input_stats,
                            0.1 if self.momentum is None else self.momentum, self.eps)
        return y.reshape(*input.shape) if unbatched else y


class InstanceNorm1d(_InstanceNorm):
    _spatial = 1


class InstanceNorm2d(_InstanceNorm):
    _spatial = 2


class InstanceNorm3d(_InstanceNorm):
    _spatial = 3
