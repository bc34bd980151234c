"""Bernoulli from ``probs`` or ``logits``: sample, log_prob (a stable BCE), entropy."""
from __future__ import annotations

from typing import Any

from tinyflow.distributions.distribution import Distribution


class Bernoulli(Distribution):
    """1 with probability ``probs`` (or ``sigmoid(logits)``), else 0."""

    def __init__(self, probs: Any = None, logits: Any = None, validate_args: bool | None = None) -> None:
        import tinyflow as tf

        if (probs is None) == (logits is None):
            raise ValueError("Bernoulli: give either probs or logits, not both and not neither")
        if probs is not None:
            probs = probs if isinstance(probs, tf.Tensor) else tf.tensor(float(probs))
            eps = 1e-7 if probs.dtype != tf.float64 else 1e-15
            self.probs = probs
            clamped = probs.clamp(eps, 1 - eps)
            self.logits = clamped.log() - (1 - clamped).log()
        else:
            logits = logits if isinstance(logits, tf.Tensor) else tf.tensor(float(logits))
            self.logits = logits
            self.probs = logits.sigmoid()
        super().__init__(batch_shape=tuple(self.probs.shape))
        if validate_args is not False and probs is not None:
            self._check_parameter("probs", probs, (probs >= 0) & (probs <= 1), "Interval(lower_bound=0.0, upper_bound=1.0)")
        elif validate_args is not False:
            self._check_parameter("logits", self.logits, self.logits == self.logits, "Real()")

    @property
    def mean(self) -> Any:
        return self.probs

    @property
    def variance(self) -> Any:
        return self.probs * (1 - self.probs)

    def _sample(self, sample_shape: tuple[int, ...]) -> Any:
        import tinyflow as tf

        u = tf.rand(*self._extended_shape(sample_shape), dtype=self.probs.dtype, device=self.probs.device)
        return (u < self.probs).to(self.probs.dtype)

    def log_prob(self, value: Any) -> Any:
        import tinyflow as tf
        import tinyflow.nn.functional as F

        logits, value = self.logits, value.to(self.logits.dtype)
        shape = tuple(tf.broadcast_shapes(tuple(logits.shape), tuple(value.shape)))
        logits = logits.expand(*shape) if tuple(logits.shape) != shape else logits
        value = value.expand(*shape) if tuple(value.shape) != shape else value
        return -F.binary_cross_entropy_with_logits(logits, value, reduction="none")

    def entropy(self) -> Any:
        import tinyflow.nn.functional as F

        return F.binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none")
