"""Pickles written before the house moved into folders (issue 34) still load.

A whole-model checkpoint names each class by the module that defined it when it was saved
(``tinyflow.nn.modules.activation_extra.SiLU``, ``tinyflow.grad_scaler.GradScaler``). Those files
are gone; tf.load reads each old name from the module that holds it now (serialization's
``_MOVED_MODULES`` and ``_MOVED_NAMES``, as torch.load reads ``torch.tensor`` as ``torch._tensor``),
and the weights_only allowlist sees the class under its new name. The old files are built here as
protocol-0 pickles (``c<module>\\n<name>\\n``), byte for byte what the old classes pickled to.
"""
from __future__ import annotations

import importlib
import pickle
import zipfile
from typing import Any

import numpy as np
import pytest

import tinyflow as tf
import tinyflow.nn as tnn
import tinyflow.nn.functional as F
from tinyflow import serialization


@pytest.fixture(autouse=True)
def _empty_allowlist() -> Any:
    serialization.clear_safe_globals()
    yield
    serialization.clear_safe_globals()


def _old_checkpoint(tmp_path: Any, body: bytes) -> str:
    """A whole-object checkpoint whose pickle is ``body`` (what an older tinyflow wrote)."""
    path = str(tmp_path / "old.pt")
    tf.save(tnn.Identity(), path)  # a checkpoint with one pickle member, then that member replaced
    with zipfile.ZipFile(path) as zf:
        members = {name: zf.read(name) for name in zf.namelist()}
    (pickled,) = [name for name in members if name.endswith(".pkl")]
    members[pickled] = body
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


def _global(module: str, name: str) -> bytes:
    return f"c{module}\n{name}\n".encode()


# (module a file written before issue 34 names, name, what it is now)
OLD_GLOBALS = [
    ("tinyflow.nn.modules.activation_extra", "SiLU", tnn.SiLU),
    ("tinyflow.nn.modules.activation_extra", "MultiheadAttention", tnn.MultiheadAttention),
    ("tinyflow.nn.modules.activation_extra", "NonDynamicallyQuantizableLinear",
     tnn.modules.linear.NonDynamicallyQuantizableLinear),
    ("tinyflow.nn.modules.conv_extra", "Conv1d", tnn.Conv1d),
    ("tinyflow.nn.modules.pooling_extra", "MaxPool1d", tnn.MaxPool1d),
    ("tinyflow.nn.modules.dropout_extra", "Dropout2d", tnn.Dropout2d),
    ("tinyflow.nn.modules.loss_extra", "HuberLoss", tnn.HuberLoss),
    ("tinyflow.nn.modules.linear_extra", "Bilinear", tnn.Bilinear),
    ("tinyflow.nn.modules.container_extra", "ParameterList", tnn.ParameterList),
    ("tinyflow.nn.functional.activation", "gelu", F.gelu),  # e.g. TransformerEncoderLayer.activation
    ("tinyflow.nn.functional.activation_extra", "silu", F.silu),
    ("tinyflow.nn.functional.pooling", "max_pool2d", F.max_pool2d),
    ("tinyflow.nn.init_extra", "trunc_normal_", tnn.init.trunc_normal_),
    ("tinyflow.functions", "add", tf.add),
    ("tinyflow.grad_scaler", "GradScaler", tf.amp.GradScaler),
    ("tinyflow.autograd_grad_mode", "no_grad", tf.no_grad),
    ("tinyflow.tensor_methods_stats", "aminmax", tf.return_types.aminmax),
    ("tinyflow.linalg", "linalg_qr", tf.return_types.linalg_qr),
]


@pytest.mark.parametrize(("module", "name", "now"), OLD_GLOBALS, ids=[f"{m}.{n}" for m, n, _ in OLD_GLOBALS])
def test_an_old_path_loads_as_what_it_names_now(tmp_path, module, name, now) -> None:
    with pytest.raises((ModuleNotFoundError, AttributeError)):
        getattr(importlib.import_module(module), name)  # the old path itself is gone: no alias
    path = _old_checkpoint(tmp_path, _global(module, name) + b".")
    assert tf.load(path, weights_only=False) is now
    with pytest.raises(pickle.UnpicklingError, match=f"GLOBAL {now.__module__}.{now.__qualname__} was not"):
        tf.load(path)  # weights_only: refused under its name of today ...
    with serialization.safe_globals([now]):
        assert tf.load(path) is now  # ... and allowlisted by it


def test_a_class_that_moved_home_is_allowlisted_by_its_new_name(tmp_path) -> None:
    """MultiheadAttention's out_proj class moved to nn/modules/linear.py (PyTorch's home); the old
    module still imports it, and a file naming it there is allowlisted as torch's programs list it."""
    moved = tnn.modules.linear.NonDynamicallyQuantizableLinear
    path = _old_checkpoint(tmp_path, _global("tinyflow.nn.modules.activation", moved.__name__) + b".")
    with pytest.raises(pickle.UnpicklingError, match="GLOBAL tinyflow.nn.modules.linear.NonDynamically"):
        tf.load(path)
    with serialization.safe_globals([moved]):
        assert tf.load(path) is moved


def test_an_old_whole_model_is_built_and_runs(tmp_path) -> None:
    """``c<old module>\\nSiLU\\n)R.``: call the class the file names with no arguments (REDUCE)."""
    path = _old_checkpoint(tmp_path, _global("tinyflow.nn.modules.activation_extra", "SiLU") + b")R.")
    with serialization.safe_globals([tnn.SiLU]):
        model = tf.load(path)
    assert type(model) is tnn.SiLU
    x = tf.tensor([-1.0, 0.0, 2.0])
    assert np.allclose(model(x).numpy(), F.silu(x).numpy())


def test_a_malicious_global_stays_refused_whatever_the_table_maps(tmp_path) -> None:
    path = _old_checkpoint(tmp_path, _global("os", "system") + b"(S'true'\ntR.")
    with pytest.raises(pickle.UnpicklingError, match=r"GLOBAL os\.system"):
        tf.load(path)


def test_every_entry_of_the_tables_names_a_module_that_imports() -> None:
    targets = set(serialization._MOVED_MODULES.values()) | set(serialization._MOVED_NAMES.values())
    for module in sorted(targets):
        importlib.import_module(module)
    for (module, name), target in serialization._MOVED_NAMES.items():
        assert hasattr(importlib.import_module(target), name), f"{module}.{name} -> {target}"
    for old in serialization._MOVED_MODULES:  # an old name that exists again would be read from the new one
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(old)


@pytest.mark.parametrize("result", [
    lambda x: x.qr(), lambda x: x.svd(), lambda x: x.slogdet(), lambda x: x.frexp(), lambda x: x.aminmax(),
    lambda x: x.nanmedian(0), lambda x: x.histogram(3), lambda x: tf.linalg.qr(x), lambda x: tf.linalg.svd(x),
    lambda x: tf.linalg.slogdet(x), lambda x: tf.linalg.inv_ex(x), lambda x: x.sort(),
])
def test_every_named_result_pickles_from_tinyflow_return_types(result) -> None:
    x = tf.tensor(np.random.default_rng(0).standard_normal((3, 3)))
    got = result(x)
    assert type(got).__module__ == "tinyflow.return_types"
    assert getattr(tf.return_types, type(got).__name__) is type(got)  # the name torch.return_types uses
    back = pickle.loads(pickle.dumps(got))
    assert type(back) is type(got) and back._fields == got._fields
    for a, b in zip(back, got):
        assert np.array_equal(np.asarray(a.numpy()), np.asarray(b.numpy()))
