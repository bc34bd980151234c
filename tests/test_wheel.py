"""The wheel holds the product and nothing else (issue 34): tinyflow (its modules and the explain
page's assets), the model zoo from models/ as tinyflow.models, and tinyflow_cuda's modules with
the .cu / .cuh kernels NVRTC compiles at run time. The test machinery - cuda_tools/: the g++
emulator and its headers, the strict CuPy stand-in and its API snapshot, the reports, the PTX lint
and check_cu.sh - stays in the checkout, and no product module imports it.

The wheel is built offline from a copy of the packaging inputs (pip wheel --no-deps
--no-build-isolation: the venv's setuptools, no index), ~1-3 s.
"""
from __future__ import annotations

import ast
import importlib.util
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGING = ("pyproject.toml", "README.md", "tinyflow", "tinyflow_cuda", "models", "cuda_tools")
"""What the build reads (cuda_tools/ too: beside the packages, it must stay out all the same)."""
PRODUCT_ROOTS = ("tinyflow", "tinyflow_cuda", "models")
TOOL_MARKS = ("cuda_tools", "strict_cupy", "emu.h", "emu_trace.h", "emulator", "check_cu", "ptx_lint",
              "ptx_inflight", "coalescing", "bank_conflicts", "cupy_api.json")


def _source_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


def expected_files(root: Path = ROOT) -> dict[str, Path]:
    """The wheel's product files (path in the wheel -> file in the checkout): every module of
    tinyflow/ but the uninstalled checkout's tinyflow/models stand-in, the explain page's assets,
    models/*.py as tinyflow/models/, every module of tinyflow_cuda/ and its csrc/*.cu, *.cuh."""
    out: dict[str, Path] = {}
    for path in _source_files(root / "tinyflow"):
        rel = path.relative_to(root).as_posix()
        if rel.startswith("tinyflow/models/"):
            continue  # models/ installs there instead
        if path.suffix == ".py" or rel.startswith("tinyflow/explainer/assets/"):
            out[rel] = path
    for path in _source_files(root / "models"):
        if path.suffix == ".py":
            out["tinyflow/models/" + path.relative_to(root / "models").as_posix()] = path
    for path in _source_files(root / "tinyflow_cuda"):
        rel = path.relative_to(root).as_posix()
        if path.suffix == ".py" or (rel.startswith("tinyflow_cuda/csrc/") and path.suffix in (".cu", ".cuh")):
            out[rel] = path
    return out


def tool_files(names: list[str]) -> list[str]:
    """The entries of a wheel that belong to the test machinery."""
    return [n for n in names if any(mark in n for mark in TOOL_MARKS) or n.endswith((".sh", ".h"))]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    if importlib.util.find_spec("pip") is None or importlib.util.find_spec("setuptools") is None:
        pytest.skip("building the wheel needs pip and setuptools in this interpreter")
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    src.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build", "dist")
    for name in PACKAGING:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=ignore)
        else:
            shutil.copy2(ROOT / name, src / name)
    env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps",
                           "--no-build-isolation", "-q", "-w", str(tmp / "dist")],
                          cwd=src, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    (built,) = (tmp / "dist").glob("tinyflow-*.whl")
    return zipfile.ZipFile(built)


def test_the_wheel_holds_the_product_files_and_nothing_else(wheel: zipfile.ZipFile):
    names = [n for n in wheel.namelist() if not n.endswith("/")]
    meta = [n for n in names if n.split("/")[0].endswith(".dist-info")]
    files = sorted(set(names) - set(meta))
    assert tool_files(files) == []
    expected = expected_files()
    assert sorted(set(files) - set(expected)) == [], "in the wheel, not product files of the checkout"
    assert sorted(set(expected) - set(files)) == [], "product files of the checkout missing from the wheel"
    for name in files:  # the model zoo is models/'s, not the checkout's stand-in
        assert wheel.read(name) == expected[name].read_bytes(), name
    top_level = next(n for n in meta if n.endswith("top_level.txt"))
    assert wheel.read(top_level).decode().split() == ["tinyflow", "tinyflow_cuda"]
    assert any(n.startswith("tinyflow_cuda/csrc/") and n.endswith(".cu") for n in files)


def test_the_tool_check_flags_what_the_machinery_would_bring():
    names = ["tinyflow/tensor.py", "tinyflow_cuda/csrc/conv.cu", "tinyflow_cuda/csrc/common.cuh",
             "cuda_tools/emulator.py", "tinyflow_cuda/csrc/emu.h", "tinyflow_cuda/strict_cupy/cupy_api.json",
             "tinyflow_cuda/check_cu.sh", "tinyflow_cuda/coalescing.py"]
    assert tool_files(names) == names[3:]


def _imports_of(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import in ``path``, at any depth, and of importlib / __import__
    calls with a literal name."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str) and (
                    getattr(node.func, "attr", None) == "import_module" or getattr(node.func, "id", None) == "__import__"):
            found.append((node.lineno, node.args[0].value))
    return found


def test_no_product_module_imports_the_test_machinery():
    offending = [f"{path.relative_to(ROOT)}:{line}: {module}"
                 for folder in PRODUCT_ROOTS for path in _source_files(ROOT / folder) if path.suffix == ".py"
                 for line, module in _imports_of(path) if module.split(".")[0] == "cuda_tools"]
    assert offending == []


def test_the_import_walk_sees_every_spelling(tmp_path: Path):
    probe = tmp_path / "probe.py"
    probe.write_text("import cuda_tools.emulator\n"
                     "def f():\n    from cuda_tools import strict_cupy\n"
                     "    import importlib\n    importlib.import_module('cuda_tools.coalescing')\n"
                     "    __import__('cuda_tools')\n")
    assert [m for _, m in _imports_of(probe)] == ["cuda_tools.emulator", "cuda_tools", "importlib",
                                                  "cuda_tools.coalescing", "cuda_tools"]
