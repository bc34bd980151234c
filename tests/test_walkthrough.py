"""docs/walkthrough.md stays true to the code (issue 25, item 4).

The walkthrough follows one AlexNet-64 training step on the CPU file by file. These checks keep it
honest as the code moves:

- every file the step enters is named in it: the step runs in a fresh interpreter under
  ``sys.setprofile``, which records the source file of every Python function (and module or class
  body) that runs, and each one under the repository's ``tinyflow/``, ``tinyflow_cuda/`` or
  ``models/`` must appear in the walkthrough by its repository path;
- it names at most ``MAX_FILES`` tinyflow files in all, so that a student has a short reading list;
- every `path.py:name` it cites is a real function, class or method;
- it gives the line count of each file the step enters, close to the file's ``wc -l``;
- the figures at its top are today's: the files the step enters and their lines, and the
  modules and lines the step loads, counted as ``bench/core_size.py`` counts them.
"""
from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WALKTHROUGH = ROOT / "docs" / "walkthrough.md"
CITATION = re.compile(r"`([\w/]+\.py):([\w.]+)`")

# Where the step's own code lives: the package, its CUDA backend, and the model zoo (installed as
# tinyflow.models, kept in the repository's top-level models/ folder).
SOURCE_FOLDERS = ("tinyflow", "tinyflow_cuda", "models")
# A repository path of one of those files, as the walkthrough writes it (not preceded by a word
# character or a slash, so that `tinyflow/models/x.py` is not also read as `models/x.py`).
FILE_PATH = re.compile(r"(?<![\w/])((?:tinyflow|tinyflow_cuda|models)/[\w/]*?\w+\.py)\b")
# Where the walkthrough gives a file's size: "`path.py` (L lines)", in a heading or in the text.
LINE_COUNT = re.compile(r"`([\w/]+\.py)`\s+\(([\d,]+)\s+lines\)")

MAX_FILES = 33  # issue 34: a warm step enters at most 33 files, and the walkthrough names no more
LINE_TOLERANCE = 0.15  # a stated line count may drift this far from wc -l before the doc is stale
# The figures at the top of the walkthrough: what the step enters, and what it loads.
ENTERED_FIGURES = re.compile(r"every\s+file\s+the\s+step\s+enters\*\*:\s+([\d,]+)\s+files,\s+([\d,]+)\s+lines")
LOADED_FIGURES = re.compile(r"training\s+step\s+\(CPU\)\"\s+row:\s+([\d,]+)\s+modules,\s+([\d,]+)\s+lines")

# One AlexNet-64 training step on the CPU, the step `tinyflow train alexnet` runs
# (tinyflow/recipes/vision.py) and bench/core_size.py's "step" scenario measures: the model and the
# optimizer are built first; the profile covers the batch, zero_grad, forward, cross-entropy,
# backward and the optimizer's step. Threads started inside the step (the CPU kernels' pool) are
# profiled too. After a marker, the script prints two JSON lines: the entered files, and the
# (name, file) of every module loaded at the end (bench/core_size.py's probe).
MARKER = "@@walkthrough entered@@"
STEP = f"""
import json, os, sys, threading
import numpy as np
import tinyflow
import tinyflow.nn.functional as F
import tinyflow.optim as optim
from tinyflow.models import get_model

roots = tuple(os.path.join(os.path.realpath({str(ROOT)!r}), d) + os.sep for d in {SOURCE_FOLDERS!r})
entered = set()

def profile(frame, event, arg):
    if event == "call":
        path = os.path.realpath(frame.f_code.co_filename)
        if path.startswith(roots):
            entered.add(path)

tinyflow.manual_seed(0)
model = get_model("alexnet", num_classes=10)
model.train()
opt = optim.SGD(list(model.parameters()), lr=0.02, momentum=0.9, weight_decay=5e-4)
images = np.random.default_rng(0).standard_normal((2, 3, 64, 64)).astype(np.float32)

threading.setprofile(profile)
sys.setprofile(profile)
x = tinyflow.tensor(images)
y = tinyflow.tensor(np.array([1, 7], dtype=np.int64))
opt.zero_grad()
loss = F.cross_entropy(model(x), y)
loss.backward()
opt.step()
sys.setprofile(None)
threading.setprofile(None)

assert np.isfinite(float(loss.item()))
print({MARKER!r})
print(json.dumps(sorted(os.path.relpath(p, os.path.realpath({str(ROOT)!r})) for p in entered)))
print(json.dumps([[n, getattr(m, "__file__", None)] for n, m in list(sys.modules.items())]))
"""


@dataclass
class Step:
    """What one profiled step did: the files it entered (repository paths, sorted) and the
    (name, file) of every module loaded by its end, imports and model building included."""
    entered: list[str]
    modules: list[tuple[str, str | None]]


def _run_step() -> Step:
    """Run one CPU training step under the profiler in a fresh interpreter (the checkout first
    on its path, no GPU)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    env["CUDA_VISIBLE_DEVICES"] = ""
    proc = subprocess.run([sys.executable, "-c", STEP], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0 and MARKER in proc.stdout, f"the profiled step failed:\n{proc.stderr[-3000:]}"
    entered_line, modules_line = proc.stdout.split(MARKER, 1)[1].strip().splitlines()[:2]
    return Step([Path(p).as_posix() for p in json.loads(entered_line)],
                [(name, file) for name, file in json.loads(modules_line)])


@pytest.fixture(scope="module")
def step() -> Step:
    return _run_step()


@pytest.fixture(scope="module")
def entered(step: Step) -> list[str]:
    return step.entered


def _core_size():
    """bench/core_size.py as a module (it is a script, not a package); loaded once per session."""
    if "core_size" in sys.modules:  # tests/test_core_size.py loads it under this name too
        return sys.modules["core_size"]
    spec = importlib.util.spec_from_file_location("core_size", ROOT / "bench" / "core_size.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["core_size"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def _lines(path: str) -> int:
    """``wc -l`` of a repository file (0 when it does not exist)."""
    file = ROOT / path
    return len(file.read_text().splitlines()) if file.is_file() else 0


def _close(stated: int, actual: int) -> bool:
    return abs(stated - actual) <= LINE_TOLERANCE * max(actual, 1)


def _number(text: str) -> int:
    return int(text.replace(",", ""))


def named_files(text: str) -> set[str]:
    """The distinct tinyflow source files (repository paths) that ``text`` mentions."""
    return set(FILE_PATH.findall(text))


def _by_folder(files: list[str]) -> str:
    counts = Counter(str(Path(f).parent) for f in files)
    return ", ".join(f"{folder}/: {n}" for folder, n in sorted(counts.items()))


def test_walkthrough_names_every_file_the_step_enters(entered):
    assert "tinyflow/tensor.py" in entered and "models/alexnet.py" in entered, entered  # the probe works
    missing = sorted(set(entered) - named_files(WALKTHROUGH.read_text()))
    assert not missing, (f"one training step enters {len(missing)} file(s) that docs/walkthrough.md does not name: "
                         f"{missing}")


def test_walkthrough_names_at_most_33_files(entered):
    named = named_files(WALKTHROUGH.read_text())
    assert len(named) <= MAX_FILES, (
        f"docs/walkthrough.md names {len(named)} tinyflow files, at most {MAX_FILES} allowed; the step alone "
        f"enters {len(entered)} ({_by_folder(entered)}); named but not entered: {sorted(named - set(entered))}")


def stated_line_counts(text: str) -> dict[str, int]:
    """{path: lines} for every "`path.py` (N lines)" in ``text``."""
    return {path: _number(lines) for path, lines in LINE_COUNT.findall(text)}


def test_walkthrough_gives_each_entered_file_its_line_count(entered):
    uncounted = sorted(set(entered) - set(stated_line_counts(WALKTHROUGH.read_text())))
    assert not uncounted, f"docs/walkthrough.md names these files without \"`path.py` (N lines)\": {uncounted}"


def test_stated_line_counts_match_the_files():
    stated = stated_line_counts(WALKTHROUGH.read_text())
    assert stated, "docs/walkthrough.md gives each file's line count: `path.py` (N lines)"
    stale = [f"{path}: says {lines}, wc -l {_lines(path)}" for path, lines in stated.items()
             if not _close(lines, _lines(path))]
    assert not stale, f"docs/walkthrough.md's line counts are stale: {stale}"


def test_the_figures_at_the_top_are_todays(step):
    text = WALKTHROUGH.read_text()
    entered, loaded = ENTERED_FIGURES.search(text), LOADED_FIGURES.search(text)
    assert entered and loaded, ("docs/walkthrough.md states at its top \"every file the step enters**: N files, "
                                "L lines\" and core_size's \"... training step (CPU)\" row: N modules, L lines\"")
    lines = sum(_lines(f) for f in step.entered)
    assert _number(entered.group(1)) == len(step.entered) and _close(_number(entered.group(2)), lines), (
        f"docs/walkthrough.md says the step enters {entered.group(1)} files, {entered.group(2)} lines; "
        f"today it enters {len(step.entered)} files, {lines:,} lines")
    code = _core_size().loaded_code("step", step.modules)
    assert _close(_number(loaded.group(1)), code.modules) and _close(_number(loaded.group(2)), code.lines), (
        f"docs/walkthrough.md says the step loads {loaded.group(1)} modules, {loaded.group(2)} lines; "
        f"bench/core_size.py counts {code.modules} modules, {code.lines:,} lines today")


def _defines(path: Path, dotted: str) -> bool:
    """Whether ``path`` defines ``dotted`` (a function, a class, or Class.method) at top level."""
    scope: list[ast.stmt] = ast.parse(path.read_text(), str(path)).body
    for part in dotted.split("."):
        found = next((node for node in scope
                      if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                      and node.name == part), None)
        if found is None:
            return False
        scope = found.body
    return True


def test_every_cited_function_exists():
    citations = CITATION.findall(WALKTHROUGH.read_text())
    assert len(citations) >= 40, "the walkthrough should trace the step through its functions"
    missing = [f"{path}:{name}" for path, name in citations
               if not (ROOT / path).is_file() or not _defines(ROOT / path, name)]
    assert not missing, f"docs/walkthrough.md cites names that do not exist: {missing}"


def test_the_checker_catches_a_wrong_name(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("class A:\n    def f(self):\n        pass\n\ndef g():\n    pass\n")
    assert _defines(module, "A.f") and _defines(module, "g")
    assert not _defines(module, "A.g") and not _defines(module, "h")


def test_file_paths_are_read_as_the_walkthrough_writes_them():
    text = ("`tinyflow/nn/modules/conv.py:Conv2d.forward`, tinyflow/tensor.py (793 lines), `models/alexnet.py`, "
            "the stand-in tinyflow/models/__init__.py, tinyflow_cuda/kernels/conv.py; not a folder tinyflow/ops/ "
            "nor mytinyflow/x.py")
    assert named_files(text) == {"tinyflow/nn/modules/conv.py", "tinyflow/tensor.py", "models/alexnet.py",
                                 "tinyflow/models/__init__.py", "tinyflow_cuda/kernels/conv.py"}
    assert stated_line_counts(text + " `tinyflow/autograd.py`\n(1,234 lines)") == {
        "tinyflow/autograd.py": 1234}
