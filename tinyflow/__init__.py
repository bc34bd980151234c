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
from tinyflow.kernels._cpu import tune_allocator as _tune_allocator  # noqa: E402

_tune_allocator()  # keep freed memory for the next training step (see there; TINYFLOW_TUNE_MALLOC=0: off)
from tinyflow.autograd import detect_anomaly, enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from tinyflow.device import Device
from tinyflow.functions import *  # noqa: F403 (sin, gather, sort, einsum, eye, dtype names, LongTensor, ...)
from tinyflow.functions import BUILTIN_DTYPE_NAMES as _BUILTIN_DTYPE_NAMES
from tinyflow.promotion import can_cast, promote_types, result_type  # PyTorch's type promotion
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
    get_printoptions,
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
    set_printoptions,
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
                "cuda", "cpu", "accelerator", "backends", "utils", "distributions", "linalg", "special", "jit", "distributed", "func", "onnx"):
        return _lazy(name)
    if name == "autocast":  # torch.autocast(device_type, dtype=None, enabled=True)
        return _lazy("amp").autocast
    if name == "vmap":  # torch.vmap is torch.func.vmap
        return _lazy("func").vmap
    if name in ("save", "load"):
        return getattr(_lazy("serialization"), name)
    if name in _BUILTIN_DTYPE_NAMES:  # tinyflow.float / int / bool: not defined here, where they
        return _BUILTIN_DTYPE_NAMES[name]  # would shadow Python's builtins
    if name == "bfloat16":  # needs ml_dtypes: resolved on first use, not at import
        return _lazy("dtypes").bfloat16()
    raise AttributeError(f"module 'tinyflow' has no attribute {name!r}")
