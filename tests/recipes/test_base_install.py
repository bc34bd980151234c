"""`tinyflow train alexnet` imports nothing beyond the base install (issue 20).

The test venv has the extras (torch, ml_dtypes, scikit-learn, mpi4py, ...), so an import of one
of them on the README's main path goes unnoticed here and breaks a newcomer's `pip install -e .`.
This runs the command in a subprocess where every installed package outside the base dependencies
(pyproject's ``dependencies`` and what they require) raises ImportError, as it would there. CI's
quickstart step (.ci/run) runs the real thing in a fresh base venv; this is the quick check.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _base_distributions() -> set[str]:
    """pyproject's dependencies and, recursively, theirs (those installed), plus pip/setuptools."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    requirements = pytest.importorskip("packaging.requirements")
    todo = list(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"])
    seen = {"tinyflow", "pip", "setuptools", "wheel"}
    while todo:
        req = requirements.Requirement(todo.pop())
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        name = _canonical(req.name)
        if name in seen:
            continue
        seen.add(name)
        try:
            todo += metadata.requires(req.name) or []
        except metadata.PackageNotFoundError:
            continue
    return seen


def _blocked_modules() -> list[str]:
    """Top-level modules of the installed distributions that a base install does not have."""
    base = _base_distributions()
    return sorted(module for module, dists in metadata.packages_distributions().items()
                  if not any(_canonical(d) in base for d in dists) and module.isidentifier()
                  and not module.startswith("tinyflow"))


SCRIPT = textwrap.dedent(
    """
    import importlib.abc, json, sys

    BLOCKED = set(json.loads(sys.argv[1]))

    class NotInstalled(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"No module named {name!r} (not in the base install)", name=name)
            return None

    sys.meta_path.insert(0, NotInstalled())
    from tinyflow import cli
    from tinyflow.data import synthetic

    data = synthetic.generate(sys.argv[2], train_per_class=2, val_per_class=1, size=64,
                              classes=("circle", "stripes"))
    rc = cli.main(["train", "alexnet", "--data", str(data), "--epochs", "1", "--batch-size", "4",
                   "--checkpoint-dir", sys.argv[3], "--quiet"])
    print("rc", rc)
    """
)


def test_train_alexnet_imports_only_the_base_install(tmp_path: Path) -> None:
    blocked = _blocked_modules()
    assert "torch" in blocked or "torch" not in metadata.packages_distributions()  # the block works
    out = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(blocked), str(tmp_path / "data"),
                          str(tmp_path / "run")], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                         env={**os.environ, "TINYFLOW_HOME": str(tmp_path / "home")})
    assert out.returncode == 0 and "rc 0" in out.stdout, out.stdout + out.stderr
    assert (tmp_path / "run" / "metrics.jsonl").exists()
