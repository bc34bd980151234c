"""The PyTorch surface of Tensor and of ``tinyflow.*`` (tinyflow/surface/): declared once in a
table, attached at one seam as stand-ins that load their module on first look-up, and
indistinguishable from plain methods and functions afterwards (and, for signatures, before);
its public modules (tinyflow.linalg, ...) under their public names."""
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
from tinyflow import surface

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
        assert not isinstance(inspect.getattr_static(tf.Tensor, name), surface.StandIn), name
    for name in surface.INPLACE:
        assert callable(getattr(tf.Tensor, name + "_"))
    for name in surface.FUNCTIONS:
        assert callable(getattr(tf, name)), name


def test_import_and_a_backward_load_no_surface_module_and_the_first_look_up_does():
    out = _fresh(
        "import sys, tinyflow as tf\n"
        "x = tf.randn(3, 4, requires_grad=True); (x * x).sum().backward()\n"
        "print('tinyflow.surface.tensor_methods' in sys.modules)\n"
        "x.cumsum(0)\n"
        "print('tinyflow.surface.tensor_methods' in sys.modules)\n")
    assert out.splitlines() == ["False", "True"]


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


def test_stand_in_answers_as_the_real_attribute():
    """surface.StandIn on a class of its own: methods, dunders and properties."""

    class Box:
        def __init__(self, v):
            self.v = v

    calls = []

    def load():
        calls.append(1)
        Box.double = lambda self: self.v * 2
        Box.__iadd__ = lambda self, other: Box(self.v + other)
        Box.__setitem__ = lambda self, key, value: setattr(self, "v", value)
        Box.half = property(lambda self: self.v / 2)

    for name in ("double", "__iadd__", "__setitem__", "half"):
        setattr(Box, name, surface.StandIn(Box, name, load))
    b = Box(3)
    b += 1  # a special method, looked up on the type
    assert b.v == 4 and calls == [1]
    b[0] = 10
    assert b.double() == 20 and b.half == 5.0 and Box.double(b) == 20
    assert calls == [1]  # loaded once: the stand-ins are gone

    class Empty:
        pass

    Empty.gone = surface.StandIn(Empty, "gone", lambda: None)
    with pytest.raises(AttributeError, match="did not define it"):
        Empty().gone  # noqa: B018


def test_public_modules_are_one_module_under_their_public_names():
    out = _fresh(
        "import sys, tinyflow as tf\n"
        "import tinyflow.linalg, tinyflow.special as S\n"
        "from tinyflow.func import vmap\n"
        "from tinyflow.jit import script\n"
        "import tinyflow.onnx\n"
        "print(all(sys.modules['tinyflow.' + n] is sys.modules['tinyflow.surface.' + n] is getattr(tf, n)\n"
        "          for n in ('linalg', 'special', 'func', 'jit', 'onnx')))\n"
        "print(tf.linalg.norm(tf.tensor([3.0, 4.0])).item(), vmap is tf.func.vmap is tf.vmap)\n")
    assert out.splitlines() == ["True", "5.0 True"]
