"""The base class: shapes, argument checks and the methods every distribution shares."""
from __future__ import annotations

from typing import Any


class Distribution:
    """``batch_shape`` is the shape of the parameters' batch; ``event_shape`` that of one draw."""

    has_rsample = False

    def __init__(self, batch_shape: tuple[int, ...] = (), event_shape: tuple[int, ...] = ()) -> None:
        self._batch_shape = tuple(batch_shape)
        self._event_shape = tuple(event_shape)

    def _check_parameter(self, name: str, value: Any, valid: Any, constraint: str) -> None:
        """PyTorch's check of a parameter against its constraint (``validate_args``, on by default;
        one host read): a ValueError naming the parameter, the constraint and the values."""
        if not bool(valid.all()):
            raise ValueError(f"Expected parameter {name} (Tensor of shape {tuple(value.shape)}) of distribution "
                             f"{type(self).__name__} to satisfy the constraint {constraint}, but found invalid "
                             f"values:\n{value}")

    @property
    def batch_shape(self) -> tuple[int, ...]:
        return self._batch_shape

    @property
    def event_shape(self) -> tuple[int, ...]:
        return self._event_shape

    def _extended_shape(self, sample_shape: Any = ()) -> tuple[int, ...]:
        return (*tuple(sample_shape), *self._batch_shape, *self._event_shape)

    def sample(self, sample_shape: Any = ()) -> Any:
        """A draw of shape ``sample_shape + batch_shape + event_shape``, outside autograd."""
        import tinyflow as tf

        with tf.no_grad():
            return self.rsample(sample_shape) if self.has_rsample else self._sample(tuple(sample_shape))

    def rsample(self, sample_shape: Any = ()) -> Any:
        raise NotImplementedError(f"{type(self).__name__} has no reparameterized sample (rsample)")

    def _sample(self, sample_shape: tuple[int, ...]) -> Any:
        raise NotImplementedError

    def log_prob(self, value: Any) -> Any:
        raise NotImplementedError

    def entropy(self) -> Any:
        raise NotImplementedError

    @property
    def stddev(self) -> Any:
        return self.variance.sqrt()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(batch_shape={list(self._batch_shape)})"
