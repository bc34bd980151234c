"""tinyflow: a small deep-learning framework with a PyTorch-like API over NumPy and CuPy.

    import tinyflow as tf
    x = tf.tensor([[1.0, 2.0]], requires_grad=True)
    (x * x).sum().backward(); x.grad
"""
import os as _os

# OpenBLAS's worker threads keep spinning after each GEMM and take the cores that tinyflow's own
# kernels (im2col, pooling, Winograd transforms) need next; let them sleep almost at once.
# OpenBLAS reads this when NumPy first loads it, so it only applies if tinyflow is imported first.
_os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

from tinyflow import autograd  # noqa: E402
from tinyflow.autograd import detect_anomaly, enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from tinyflow.device import Device
from tinyflow.random import Generator, get_rng_state, manual_seed, seed, set_rng_state
from tinyflow.tensor import (
    Tensor,
    arange,
    as_tensor,
    bool_,
    cat,
    empty,
    empty_like,
    float16,
    float32,
    float64,
    full,
    full_like,
    get_default_dtype,
    int32,
    int64,
    linspace,
    ones,
    ones_like,
    pad,
    rand,
    rand_like,
    randint,
    randn,
    randn_like,
    randperm,
    set_default_dtype,
    split,
    stack,
    tensor,
    where,
    zeros,
    zeros_like,
)

__version__ = "0.1.0"

device = Device


def _lazy(name: str):  # noqa: ANN202
    import importlib

    return importlib.import_module(f"tinyflow.{name}")


def __getattr__(name: str):  # noqa: ANN202
    """Subpackages (nn, optim, data, parallel, ...) and save/load load on first use."""
    if name in ("nn", "optim", "data", "parallel", "ops", "kernels", "testing", "amp", "serialization",
                "cuda", "accelerator", "backends"):
        return _lazy(name)
    if name in ("save", "load"):
        return getattr(_lazy("serialization"), name)
    if name == "bfloat16":  # needs ml_dtypes: resolved on first use, not at import
        return _lazy("dtypes").bfloat16()
    raise AttributeError(f"module 'tinyflow' has no attribute {name!r}")


def matmul(a: Tensor, b: Tensor) -> Tensor:
    return a @ b


def exp(x: Tensor) -> Tensor:
    return x.exp()


def log(x: Tensor) -> Tensor:
    return x.log()


def sqrt(x: Tensor) -> Tensor:
    return x.sqrt()


def tanh(x: Tensor) -> Tensor:
    return x.tanh()


def sigmoid(x: Tensor) -> Tensor:
    return x.sigmoid()


def relu(x: Tensor) -> Tensor:
    return x.relu()


def abs(x: Tensor) -> Tensor:  # noqa: A001
    return x.abs()


def clip(x: Tensor, min: float | None = None, max: float | None = None) -> Tensor:  # noqa: A002
    return x.clip(min, max)


clamp = clip


def sum(x: Tensor, dim=None, keepdim: bool = False) -> Tensor:  # noqa: A001, ANN001
    return x.sum(dim, keepdim)


def mean(x: Tensor, dim=None, keepdim: bool = False) -> Tensor:  # noqa: ANN001
    return x.mean(dim, keepdim)


def maximum(a: Tensor, b: Tensor) -> Tensor:
    return a.maximum(b)


def minimum(a: Tensor, b: Tensor) -> Tensor:
    return a.minimum(b)


def argmax(x: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    return x.argmax(dim, keepdim)


def logsumexp(x: Tensor, dim: int = -1, keepdim: bool = False) -> Tensor:
    return x.logsumexp(dim, keepdim)


def softmax(x: Tensor, dim: int = -1) -> Tensor:
    return x.softmax(dim)


def log_softmax(x: Tensor, dim: int = -1) -> Tensor:
    return x.log_softmax(dim)
