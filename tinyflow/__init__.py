"""tinyflow: a small deep-learning framework with a PyTorch-like API over NumPy and CuPy.

    import tinyflow as tf
    x = tf.tensor([[1.0, 2.0]], requires_grad=True)
    (x * x).sum().backward(); x.grad

This file gathers names and defines none. It imports the core (Tensor, autograd, creation,
dtypes, amp) and the framework a training step uses (nn, optim, save/load) as plain imports;
then the one seam where the rest attaches (docs/design.md, "The rings"):

- the PyTorch surface (tinyflow/surface/): Tensor methods beyond the core, ``tinyflow.sin`` and
  the other ``tinyflow.*`` functions, ``tinyflow.linalg`` / ``special`` / ``func`` / ``jit`` /
  ``onnx``, from its one table (``surface.attach``);
- the subpackages a training step does not need, loaded on first use (``tinyflow.data``,
  ``tinyflow.parallel``, ``tinyflow.cuda``, ...: ``_SUBMODULES``), so that ``import tinyflow``
  stays fast and never loads CuPy, MPI or Pillow on its own.
"""
import os as _os
import sys as _sys

# OpenBLAS's worker threads keep spinning after each GEMM and take the cores that tinyflow's own
# kernels (im2col, pooling, Winograd transforms) need next; let them sleep almost at once.
# OpenBLAS reads this when NumPy first loads it, so it only applies if tinyflow is imported first.
_os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

from tinyflow.kernels._cpu import tune_allocator as _tune_allocator  # noqa: E402

_tune_allocator()  # keep freed memory for the next training step (see there; TINYFLOW_TUNE_MALLOC=0: off)
from tinyflow import autograd  # noqa: E402
from tinyflow.tensor import Tensor  # noqa: E402,I001 (before creation: tensor.py and inplace.py build on it)
from tinyflow import amp  # noqa: E402
from tinyflow._tensor_str import get_printoptions, set_printoptions  # noqa: E402
from tinyflow.amp import autocast  # noqa: E402 (torch.autocast(device_type, dtype=None, enabled=True))
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
from tinyflow.serialization import load, save  # noqa: E402
from tinyflow import nn, ops, optim, serialization  # noqa: E402,I001 (the framework, after the core)

__version__ = "0.1.0"

device = Device

# ------------------------------------------------------------------------------------ the seam
from tinyflow import surface as _surface  # noqa: E402

_surface.attach(_sys.modules[__name__])

# Subpackages and modules that load on first use: a training step needs none of them.
_SUBMODULES = (
    "data", "parallel", "kernels", "testing", "cuda", "cpu", "accelerator", "backends", "utils", "distributions",
    "distributed", "recipes", "models", "explainer",
)
_FIRST_USE_NAMES = {"explain": ("tinyflow.explainer", "explain")}  # `with tf.explain() as ex: <one step>; ex.save(...)`


def __getattr__(name: str):  # noqa: ANN202
    """A subpackage of ``_SUBMODULES`` or a ``tinyflow.*`` function of the surface's table, loaded on
    first use."""
    import importlib

    from tinyflow import dtypes

    if name in _SUBMODULES:
        return importlib.import_module(f"tinyflow.{name}")
    if name in _FIRST_USE_NAMES:
        module, attr = _FIRST_USE_NAMES[name]
        return getattr(importlib.import_module(module), attr)
    if name in dtypes.BUILTIN_DTYPE_NAMES:  # tinyflow.float / int / bool: not defined here, where they
        return dtypes.BUILTIN_DTYPE_NAMES[name]  # would shadow Python's builtins
    if name == "bfloat16":  # needs ml_dtypes: resolved on first use, not at import
        return dtypes.bfloat16()
    from tinyflow.surface import functions

    if name == "__all__":  # `from tinyflow import *`: the names defined here and torch.*'s functions
        return sorted({n for n in globals() if not n.startswith("_")} | set(functions.__all__))
    if name in functions.__all__:
        return getattr(functions, name)
    raise AttributeError(f"module 'tinyflow' has no attribute {name!r}")


def __dir__() -> list[str]:
    from tinyflow.surface import functions

    return sorted(set(globals()) | set(_SUBMODULES) | set(_FIRST_USE_NAMES) | set(functions.__all__))
