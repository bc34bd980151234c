"""Devices own their kernel module, and tinyflow reaches tinyflow_cuda only through device.py."""
from __future__ import annotations

import ast
from pathlib import Path

import numpy as np

import tinyflow as tf
import tinyflow.kernels
from tinyflow.autograd import Context, Function
from tinyflow.device import CPU, Device, kernel_module, kernels_of

PACKAGE = Path(tinyflow.__file__).resolve().parent


def _imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_only_device_py_imports_tinyflow_cuda_and_nothing_imports_cupy():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        mods = _imported_modules(path)
        if any(m == "cupy" or m.startswith("cupy.") for m in mods):
            offenders.append(f"{path.relative_to(PACKAGE)} imports cupy")
        if path.name != "device.py" and any(m.split(".")[0] == "tinyflow_cuda" for m in mods):
            offenders.append(f"{path.relative_to(PACKAGE)} imports tinyflow_cuda")
    assert not offenders, offenders


def test_the_cpu_device_is_served_by_the_reference_kernels():
    assert CPU.kernels is tinyflow.kernels
    assert kernels_of(np.zeros(3)) is tinyflow.kernels
    assert kernel_module(np) is tinyflow.kernels


def test_another_array_module_is_served_by_the_cuda_twins():
    """Any non-NumPy array module gets tinyflow_cuda.kernels (importable without CuPy)."""
    import tinyflow_cuda.kernels

    fake_xp = type("FakeXp", (), {})
    assert kernel_module(fake_xp) is tinyflow_cuda.kernels
    assert kernel_module(np) is tinyflow.kernels  # the cache keeps the two apart


def test_an_op_reaches_kernels_through_its_context():
    seen = []

    class Probe(Function):
        tensor_api = False  # tinyflow's op contract: forward/backward on raw arrays

        @staticmethod
        def forward(ctx: Context, x):
            seen.append(ctx.kernels)
            return ctx.kernels.reduce_scale(x.copy(), 2.0)

    out = Probe.apply(tf.tensor([1.0, 2.0]))
    assert seen == [tinyflow.kernels]
    np.testing.assert_array_equal(out.numpy(), [2.0, 4.0])
    assert Device("cpu").kernels is seen[0]
