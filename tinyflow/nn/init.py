"""Weight initialisation, with PyTorch's formulas and defaults (all in place, no graph): the
initialisers the framework's layers use. The rest of torch.nn.init (trunc_normal_, orthogonal_, eye_,
dirac_, sparse_ and the deprecated names without the underscore) is the PyTorch surface, in
init_extra.py, and loads from there the first time one of its names is asked for here."""
from __future__ import annotations

import math
from typing import Any

from tinyflow._lazy_names import attach, by_module
from tinyflow.autograd import no_grad
from tinyflow.random import Generator
from tinyflow.tensor import Tensor

__all__ = [
    "calculate_gain", "uniform_", "normal_", "constant_", "zeros_", "ones_", "xavier_uniform_", "xavier_normal_",
    "kaiming_uniform_", "kaiming_normal_",
]


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended gain for a nonlinearity (PyTorch's table)."""
    linear = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
              "sigmoid", "identity")
    if nonlinearity in linear:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is not None and (isinstance(param, bool) or not isinstance(param, (int, float))):
            raise ValueError(f"calculate_gain: negative_slope {param!r} is not a valid number")
        slope = 0.01 if param is None else param
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"calculate_gain: unsupported nonlinearity {nonlinearity!r}")


def _fans(t: Tensor) -> tuple[int, int]:
    if t.ndim < 2:
        raise ValueError(f"fan in and fan out need a tensor with at least 2 dims, got shape {t.shape}")
    receptive = 1
    for s in t.shape[2:]:
        receptive *= s
    return t.shape[1] * receptive, t.shape[0] * receptive


def uniform_(t: Tensor, a: float = 0.0, b: float = 1.0, generator: Generator | None = None) -> Tensor:
    with no_grad():
        return t.uniform_(a, b, generator=generator)


def normal_(t: Tensor, mean: float = 0.0, std: float = 1.0, generator: Generator | None = None) -> Tensor:
    with no_grad():
        return t.normal_(mean, std, generator=generator)


def constant_(t: Tensor, value: float) -> Tensor:
    with no_grad():
        return t.fill_(value)


def zeros_(t: Tensor) -> Tensor:
    return constant_(t, 0.0)


def ones_(t: Tensor) -> Tensor:
    return constant_(t, 1.0)


def xavier_uniform_(t: Tensor, gain: float = 1.0, generator: Generator | None = None) -> Tensor:
    fan_in, fan_out = _fans(t)
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(t, -bound, bound, generator)


def xavier_normal_(t: Tensor, gain: float = 1.0, generator: Generator | None = None) -> Tensor:
    fan_in, fan_out = _fans(t)
    return normal_(t, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)), generator)


def _kaiming_std(t: Tensor, a: float, mode: str, nonlinearity: str) -> float:
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"kaiming init: mode must be 'fan_in' or 'fan_out', got {mode!r}")
    fan_in, fan_out = _fans(t)
    fan = fan_in if mode == "fan_in" else fan_out
    return calculate_gain(nonlinearity, a) / math.sqrt(fan)


def kaiming_uniform_(t: Tensor, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
                     generator: Generator | None = None) -> Tensor:
    bound = math.sqrt(3.0) * _kaiming_std(t, a, mode, nonlinearity)
    return uniform_(t, -bound, bound, generator)


def kaiming_normal_(t: Tensor, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
                    generator: Generator | None = None) -> Tensor:
    return normal_(t, 0.0, _kaiming_std(t, a, mode, nonlinearity), generator)


def default_linear_init_(weight: Tensor, bias: Tensor | None, generator: Any = None) -> None:
    """PyTorch's default for Linear and Conv: kaiming_uniform(a=sqrt(5)), bias U(-1/sqrt(fan_in), ..)."""
    kaiming_uniform_(weight, a=math.sqrt(5), generator=generator)
    if bias is not None:
        fan_in, _ = _fans(weight)
        bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
        uniform_(bias, -bound, bound, generator)


attach(__name__, by_module({"tinyflow.nn.init_extra": (
    "trunc_normal_", "orthogonal_", "eye_", "dirac_", "sparse_", "uniform", "normal", "constant", "xavier_uniform",
    "xavier_normal", "kaiming_uniform", "kaiming_normal", "orthogonal", "eye", "dirac", "sparse",
)}, submodules=False))  # and in __all__, as PyTorch lists them
