"""Normal(loc, scale): differentiable ``rsample`` (loc + scale * eps), log_prob, entropy."""
from __future__ import annotations

import math
from typing import Any

from tinyflow.distributions.distribution import Distribution


class Normal(Distribution):
    """A Gaussian with mean ``loc`` and standard deviation ``scale`` (broadcast together)."""

    has_rsample = True

    def __init__(self, loc: Any, scale: Any, validate_args: bool | None = None) -> None:
        import tinyflow as tf

        loc = loc if isinstance(loc, tf.Tensor) else tf.tensor(float(loc))
        scale = scale if isinstance(scale, tf.Tensor) else tf.tensor(float(scale), dtype=loc.dtype)
        shape = tf.broadcast_shapes(tuple(loc.shape), tuple(scale.shape))
        self.loc = loc.expand(*shape) if tuple(loc.shape) != shape else loc
        self.scale = scale.expand(*shape) if tuple(scale.shape) != shape else scale
        super().__init__(batch_shape=shape)
        if validate_args is not False:  # a NaN scale fails too, as PyTorch's
            self._check_parameter("loc", self.loc, self.loc == self.loc, "Real()")
            self._check_parameter("scale", self.scale, self.scale > 0, "GreaterThan(lower_bound=0.0)")

    @property
    def mean(self) -> Any:
        return self.loc

    @property
    def variance(self) -> Any:
        return self.scale ** 2

    def rsample(self, sample_shape: Any = ()) -> Any:
        """loc + scale * eps with eps ~ N(0, 1): gradients reach loc and scale."""
        import tinyflow as tf

        eps = tf.randn(*self._extended_shape(sample_shape), dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + self.scale * eps

    def log_prob(self, value: Any) -> Any:
        var = self.scale ** 2
        return -((value - self.loc) ** 2) / (2 * var) - self.scale.log() - math.log(math.sqrt(2 * math.pi))

    def entropy(self) -> Any:
        return 0.5 + 0.5 * math.log(2 * math.pi) + self.scale.log()
