"""The PyTorch surface of Tensor and of ``tinyflow.*`` (tinyflow/surface.py): declared once in a
table, attached as stand-ins that load their module on first look-up, and indistinguishable from
plain methods and functions afterwards (and, for signatures, before)."""
from __future__ import annotations

import inspect
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tinyflow as tf
from tinyflow import _lazy_names, surface

ROOT = Path(__file__).resolve().parents[1]


def _fresh(code: str) -> str:
    """stdout of ``code`` in a fresh interpreter (nothing of the surface loaded yet)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_every_table_entry_resolves_to_a_method_property_or_function():
    for name in surface.METHODS:
        getattr(tf.Tensor, name)  # loads the module of the entry, which replaces the stand-in
        assert not isinstance(inspect.getattr_static(tf.Tensor, name), _lazy_names.StandIn), name
    for name in surface.INPLACE:
        assert callable(getattr(tf.Tensor, name + "_"))
    for name in surface.FUNCTIONS:
        assert callable(getattr(tf, name)), name


def test_import_and_a_backward_load_no_surface_module_and_the_first_look_up_does():
    out = _fresh(
        "import sys, tinyflow as tf\n"
        "x = tf.randn(3, 4, requires_grad=True); (x * x).sum().backward()\n"
        "print(sorted(m for m in sys.modules if m.startswith('tinyflow.tensor_methods') or m == 'tinyflow.functions'))\n"
        "x.cumsum(0)\n"
        "print(sorted(m for m in sys.modules if m.startswith('tinyflow.tensor_methods')))\n")
    before, after = out.splitlines()
    assert before == "[]" and after == "['tinyflow.tensor_methods']"


def test_signatures_are_the_real_ones_before_any_use():
    out = _fresh("import inspect, tinyflow as tf\n"
                 "print(inspect.signature(tf.Tensor.det)); print(tf.Tensor.sin.__qualname__)\n")
    assert out.splitlines() == ["(self) -> 'Tensor'", "TensorMethods.sin"]


def test_methods_properties_dunders_in_place_forms_and_axis_alias():
    x = tf.tensor([[1.0, 2.0], [3.0, 4.0]])
    np.testing.assert_allclose(x.cumsum(axis=0).numpy(), [[1, 2], [4, 6]])
    np.testing.assert_allclose(x.mH.numpy(), x.numpy().T)
    assert (tf.tensor([6, 5]) & tf.tensor([3, 3])).tolist() == [2, 1]
    y = x.clone()
    assert y.sin_() is y
    np.testing.assert_allclose(y.numpy(), np.sin(x.numpy()), rtol=1e-6)
    with pytest.raises(RuntimeError, match="sin_: result type float32 can't be cast to the desired output type int64"):
        tf.tensor([1, 2]).sin_()
    out = tf.empty(0)
    assert tf.cos(x, out=out) is out and out.shape == (2, 2)


def test_methods_and_functions_pickle_as_themselves_after_use():
    tf.tensor([1.0, 2.0]).cumsum(0)
    for fn in (tf.Tensor.cumsum, tf.Tensor.sin, tf.sin, tf.trapezoid, tf.cumsum):
        assert pickle.loads(pickle.dumps(fn)) is fn


def test_star_import_gives_torch_functions_and_no_internals():
    namespace: dict = {}
    exec("from tinyflow import *", namespace)
    assert {"sin", "eye", "einsum", "FloatTensor", "cumsum", "Tensor", "zeros", "float32"} <= set(namespace)
    assert not {"np", "builtins", "function", "FUNCTIONS", "float", "int", "bool"} & set(namespace)
    for internal in ("np", "builtins", "function", "write_out", "FUNCTIONS", "CPU"):
        assert not hasattr(tf, internal), internal
