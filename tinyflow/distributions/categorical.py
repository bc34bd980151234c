"""Categorical over K classes, from ``probs`` (normalised here) or ``logits`` (log-softmaxed)."""
from __future__ import annotations

from typing import Any

from tinyflow.distributions.distribution import Distribution
from tinyflow.dtypes import finfo


class Categorical(Distribution):
    """``Categorical(probs=p)`` or ``Categorical(logits=l)``: the last dimension is the classes."""

    def __init__(self, probs: Any = None, logits: Any = None, validate_args: bool | None = None) -> None:
        import tinyflow.nn.functional as F

        if (probs is None) == (logits is None):
            raise ValueError("Categorical: give either probs or logits, not both and not neither")
        if probs is not None:
            if probs.dim() < 1:
                raise ValueError(f"Categorical: probs must have at least one dimension, got shape {tuple(probs.shape)}")
            self.probs = probs / probs.sum(-1, keepdim=True)
            self.logits = self.probs.clamp(min=_tiny(probs)).log()
        else:
            if logits.dim() < 1:
                raise ValueError(f"Categorical: logits must have at least one dimension, got shape {tuple(logits.shape)}")
            self.logits = F.log_softmax(logits, dim=-1)  # normalised, as torch stores them
            self.probs = self.logits.exp()
        self._num_events = self.probs.shape[-1]
        self._validate = validate_args is not False  # PyTorch validates by default too
        super().__init__(batch_shape=tuple(self.probs.shape[:-1]))
        if self._validate and probs is not None:  # the normalised probs, as PyTorch checks them
            p = self.probs
            self._check_parameter("probs", p, (p >= 0).all(-1) & ((p.sum(-1) - 1).abs() < 1e-6), "Simplex()")
        elif self._validate:
            self._check_parameter("logits", self.logits, (self.logits == self.logits).all(-1),
                                  "IndependentConstraint(Real(), 1)")

    @property
    def param_shape(self) -> tuple[int, ...]:
        return tuple(self.probs.shape)

    @property
    def mean(self) -> Any:
        raise NotImplementedError("Categorical has no mean (its values are class indices)")

    def _sample(self, sample_shape: tuple[int, ...]) -> Any:
        import tinyflow as tf

        n = 1
        for s in sample_shape:
            n *= s
        flat = self.probs.reshape(-1, self._num_events)
        draws = tf.multinomial(flat, n, replacement=True)  # (batch, n)
        return draws.t().reshape(*sample_shape, *self.batch_shape)

    def log_prob(self, value: Any) -> Any:
        """log p(value) for class indices ``value`` (broadcast against the batch shape)."""
        import tinyflow as tf

        value = value.long() if isinstance(value, tf.Tensor) else tf.tensor(value, dtype=tf.int64)
        logits = self.logits
        shape = tf.broadcast_shapes(tuple(value.shape), self.batch_shape)
        value = value.expand(*shape) if tuple(value.shape) != shape else value
        logits = logits.expand(*shape, self._num_events) if tuple(logits.shape[:-1]) != shape else logits
        if self._validate and (int(value.min()) < 0 or int(value.max()) >= self._num_events):  # a host read
            raise ValueError(f"Categorical.log_prob: values must be class indices in [0, {self._num_events}), "
                             f"got values from {int(value.min())} to {int(value.max())}")
        return logits.gather(-1, value.unsqueeze(-1)).squeeze(-1)

    def entropy(self) -> Any:
        p_log_p = self.probs * self.logits.clamp(min=_lowest(self.logits))
        return -p_log_p.sum(-1)


def _tiny(t: Any) -> float:
    return float(finfo(t.dtype).tiny)


def _lowest(t: Any) -> float:
    return float(finfo(t.dtype).min)
