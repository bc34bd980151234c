"""How the kernel tests (tests/gpu/test_cuda_kernels*.py) run a CUDA twin: on the emulator (the
.cu sources compiled by g++, on NumPy arrays) or on a GPU, recording the kernels launched.

The ``emu`` fixture (tests/gpu/conftest.py) hands a test one :class:`Backend` per backend.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import settings
from hypothesis import strategies as st

import tinyflow.kernels as ref
import tinyflow_cuda
import tinyflow_cuda.kernels as cuk
from cuda_tools import emulator
from tinyflow.device import kernels_of
from tinyflow_cuda import runtime

SETTINGS = settings(max_examples=20, deadline=None)
FLOATS = st.sampled_from([np.float32, np.float64])


class Recorder:
    """A runtime that forwards to another and records the kernels launched."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.xp = inner.xp
        self.kernels = inner.kernels
        self.launches: list[str] = []

    def launch(self, name: str, grid: int, block: int, args: Any, **options: Any) -> None:
        self.launches.append(name)
        self.inner.launch(name, grid, block, args, **options)  # shared_mem=

    def __getattr__(self, name: str) -> Any:  # the rest of the runtime (shared_memory_per_block)
        return getattr(self.inner, name)

    def resident_blocks(self, name: str, block: int) -> int:
        return self.inner.resident_blocks(name, block)

    def on_device_of(self, arr: Any) -> Any:
        return self.inner.on_device_of(arr)

    def owns(self, arr: Any) -> bool:
        return self.inner.owns(arr)

    def address(self, arr: Any) -> int:
        return self.inner.address(arr)


class Backend:
    """Runs a CUDA twin on NumPy inputs and hands back NumPy results, on one backend."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.emu = emulator.EmulatorRuntime.build() if kind == "emulator" else None

    def call(self, name: str, *args: Any, expect_kernel: bool = True, **kwargs: Any) -> Any:
        if self.kind == "emulator":
            rec = Recorder(self.emu)
            with runtime.use(rec):
                out = getattr(cuk, name)(*args, **kwargs)
        else:
            cp = tinyflow_cuda.array_module(0)
            to_dev = {id(a): cp.asarray(a) for a in _arrays_in((*args, *kwargs.values()))}

            def dev(a: Any) -> Any:  # an array, or a list of arrays (the multi-tensor kernels)
                return [to_dev.get(id(x), x) for x in a] if isinstance(a, list) else to_dev.get(id(a), a)

            dev_args = [dev(a) for a in args]
            dev_kwargs = {k: dev(v) for k, v in kwargs.items()}
            rec = Recorder(runtime.current())
            with runtime.use(rec):
                kernels = kernels_of(next(iter(to_dev.values()))) if to_dev else cuk  # (empty lists)
                assert kernels is cuk, f"{name}: the device picked {kernels.__name__}, not the CUDA twins"
                out = getattr(kernels, name)(*dev_args, **dev_kwargs)
            cp.cuda.Device().synchronize()
            back = {}
            for a in _arrays_in((*args, *kwargs.values())):
                a[...] = cp.asnumpy(to_dev[id(a)])  # in-place updates land in the inputs
                back[id(to_dev[id(a)])] = a

            def host(o: Any) -> Any:
                if isinstance(o, tuple):
                    return tuple(host(x) for x in o)
                if id(o) in back:
                    return back[id(o)]  # the kernel returned one of its inputs (in place)
                return cp.asnumpy(o) if isinstance(o, cp.ndarray) else o

            out = host(out)
        if expect_kernel:
            assert rec.launches, f"{name}: the wrapper fell back to the reference, no kernel ran"
        self.launches = rec.launches
        return out


def _arrays_in(values: Any) -> list[np.ndarray]:
    """The NumPy arrays among ``values`` and inside the lists among them."""
    out = []
    for v in values:
        out += [x for x in v if isinstance(x, np.ndarray)] if isinstance(v, list) else (
            [v] if isinstance(v, np.ndarray) else [])
    return out


def tol(dtype) -> dict:
    return {"rtol": 1e-5, "atol": 1e-6} if dtype == np.float32 else {"rtol": 1e-12, "atol": 1e-13}


def run(emu: Backend, name: str, *args, **kwargs):
    """Call the CUDA twin ``name`` on ``emu``'s backend and check that a .cu kernel ran."""
    return emu.call(name, *args, **kwargs)


def reference(name: str):
    """The CPU reference kernel ``name`` (tinyflow.kernels)."""
    return getattr(ref, name)
