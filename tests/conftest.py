"""Shared test configuration: hypothesis profiles, skipping of gpu tests without a GPU, and the
strict CuPy stand-in for tests marked ``cupy_strict``."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

# The repository's root on the path: cuda_tools/ (the emulator, the strict CuPy stand-in, the
# reports; test machinery the wheel does not install) lives there, and the editable install maps
# only tinyflow and tinyflow_cuda. `python -m pytest` from the root has it already; `pytest` not.
ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# CI gates every landing, so its examples are the same on every run (derandomize): a red CI is a
# real regression, never a new random example. HYPOTHESIS_PROFILE=thorough explores (random, 300).
settings.register_profile(
    "default", max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)
settings.register_profile("thorough", max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


def _on_stand_in(item: pytest.Item, gpu: bool) -> bool:
    """A ``cupy_strict`` test runs on the stand-in, unless it is a gpu test too and a GPU is here."""
    return item.get_closest_marker("cupy_strict") is not None and not (
        gpu and item.get_closest_marker("gpu") is not None)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    import tinyflow_cuda

    gpu = tinyflow_cuda.is_available()
    no_gpu = pytest.mark.skip(reason=f"needs a CUDA GPU: {tinyflow_cuda.unavailable_reason()}")
    no_compiler = pytest.mark.skip(reason="the strict CuPy stand-in runs kernels through the g++ emulator: no g++")
    for item in items:
        if _on_stand_in(item, gpu):
            item.stand_in = True  # type: ignore[attr-defined]
            if shutil.which("g++") is None:
                item.add_marker(no_compiler)
        elif item.get_closest_marker("gpu") is not None and not gpu:
            item.add_marker(no_gpu)


@pytest.fixture(autouse=True)
def _strict_cupy_device(request: pytest.FixtureRequest) -> Iterator[None]:
    """Install the strict CuPy stand-in as the cuda device for the tests that run on it."""
    if not getattr(request.node, "stand_in", False):
        yield
        return
    from cuda_tools import strict_cupy

    with strict_cupy.installed():
        yield


@pytest.fixture
def fresh_python() -> Callable[[str], Any]:
    """``run(code)``: run ``code`` in a fresh interpreter (this checkout first on its path, no GPU),
    where it sets ``out`` to something JSON can hold, and return that ``out``. For what a program
    loads (sys.modules) and what happens on first use, which one process cannot see twice."""
    root = Path(__file__).resolve().parents[1]

    def run(code: str) -> Any:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]),
                   CUDA_VISIBLE_DEVICES="")
        probe = code + "\nimport json\nprint(json.dumps(out))\n"
        proc = subprocess.run([sys.executable, "-c", probe], cwd=root, env=env, capture_output=True, text=True,
                              timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return json.loads(proc.stdout.strip().splitlines()[-1])

    return run
