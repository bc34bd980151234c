"""tinyflow: a small deep-learning framework with a PyTorch-like API over NumPy and CuPy.

    import tinyflow as tf
    x = tf.tensor([[1.0, 2.0]], requires_grad=True)
    (x * x).sum().backward(); x.grad

This file gathers names and defines none. The core (Tensor, autograd, creation, dtypes) is
imported here; subpackages and the wider PyTorch surface (``tinyflow.sin``, ``tinyflow.linalg``,
...) load on first use, through ``__getattr__`` and the tables below.
"""
import os as _os

# OpenBLAS's worker threads keep spinning after each GEMM and take the cores that tinyflow's own
# kernels (im2col, pooling, Winograd transforms) need next; let them sleep almost at once.
# OpenBLAS reads this when NumPy first loads it, so it only applies if tinyflow is imported first.
_os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

from tinyflow import autograd  # noqa: E402
from tinyflow.kernels._cpu import tune_allocator as _tune_allocator  # noqa: E402

_tune_allocator()  # keep freed memory for the next training step (see there; TINYFLOW_TUNE_MALLOC=0: off)
from tinyflow import surface as _surface  # noqa: E402,F401 (attaches the surface's Tensor methods)
from tinyflow.autograd import detect_anomaly, enable_grad, is_grad_enabled, no_grad, set_grad_enabled  # noqa: E402
from tinyflow.creation import (  # noqa: E402
    arange, as_tensor, cat, empty, empty_like, full, full_like, linspace, ones, ones_like, pad, rand, rand_like,
    randint, randn, randn_like, randperm, split, stack, tensor, where, zeros, zeros_like,
)
from tinyflow.device import Device  # noqa: E402
from tinyflow.dtypes import (  # noqa: E402
    bool_, double, float16, float32, float64, get_default_dtype, half, int8, int16, int32, int64, long,
    set_default_dtype, short, uint8,
)
from tinyflow.promotion import can_cast, promote_types, result_type  # noqa: E402 (PyTorch's type promotion)
from tinyflow.random import Generator, get_rng_state, manual_seed, seed, set_rng_state  # noqa: E402
from tinyflow.return_types import Size  # noqa: E402
from tinyflow.tensor import Tensor  # noqa: E402

__version__ = "0.1.0"

device = Device

# Subpackages and modules that load on first use (``tinyflow.nn``, ``tinyflow.linalg``, ...).
_SUBMODULES = (
    "nn", "optim", "data", "parallel", "ops", "kernels", "testing", "amp", "serialization", "cuda", "cpu",
    "accelerator", "backends", "utils", "distributions", "linalg", "special", "jit", "distributed", "func", "onnx",
)
# Single names that live in a module loaded on first use: name -> (module, attribute).
_LAZY_NAMES = {
    "autocast": ("tinyflow.amp", "autocast"),  # torch.autocast(device_type, dtype=None, enabled=True)
    "vmap": ("tinyflow.func", "vmap"),  # torch.vmap is torch.func.vmap
    "save": ("tinyflow.serialization", "save"),
    "load": ("tinyflow.serialization", "load"),
    "set_printoptions": ("tinyflow._tensor_str", "set_printoptions"),
    "get_printoptions": ("tinyflow._tensor_str", "get_printoptions"),
    "explain": ("tinyflow.explainer", "explain"),  # `with tf.explain() as ex: <one step>; ex.save("step.html")`
}
# Everything else PyTorch has at top level (sin, gather, einsum, eye, FloatTensor, ...).
_FUNCTIONS_MODULE = "tinyflow.functions"


def __getattr__(name: str):  # noqa: ANN202
    """Subpackages, save/load and the PyTorch surface's functions load on first use."""
    import importlib

    from tinyflow import dtypes

    if name in _SUBMODULES:
        return importlib.import_module(f"tinyflow.{name}")
    if name in _LAZY_NAMES:
        module, attr = _LAZY_NAMES[name]
        return getattr(importlib.import_module(module), attr)
    if name in dtypes.BUILTIN_DTYPE_NAMES:  # tinyflow.float / int / bool: not defined here, where they
        return dtypes.BUILTIN_DTYPE_NAMES[name]  # would shadow Python's builtins
    if name == "bfloat16":  # needs ml_dtypes: resolved on first use, not at import
        return dtypes.bfloat16()
    functions = importlib.import_module(_FUNCTIONS_MODULE)
    if name == "__all__":  # `from tinyflow import *`: the names defined here and torch.*'s functions
        return sorted({n for n in globals() if not n.startswith("_")} | set(functions.__all__))
    if name in functions.__all__:
        return getattr(functions, name)
    raise AttributeError(f"module 'tinyflow' has no attribute {name!r}")


def __dir__() -> list[str]:
    import importlib

    return sorted(set(globals()) | set(_SUBMODULES) | set(_LAZY_NAMES)
                  | set(importlib.import_module(_FUNCTIONS_MODULE).__all__))
