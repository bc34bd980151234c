"""What a reader must follow: the files one training step enters, measured by what actually runs.

    python bench/core_size.py                  # the table
    python bench/core_size.py --json out.json  # the table, and every figure as JSON
    python bench/core_size.py --check          # exit 1, one line per target missed (what CI runs)

The README promises a framework a student can read in an afternoon, by following one training
step. This script measures that promise (docs/core-size.md says what counts and why):

1. The files one AlexNet-64 CPU training step enters, and their lines: in a fresh interpreter,
   the step runs under ``sys.setprofile`` (and ``threading.setprofile``), which sees every Python
   function (and module or class body) that runs; each distinct tinyflow file counts with all
   its lines (``wc -l``: a reader scrolls past comments and docstrings too). Cold: the first step
   after the model and the optimizer are built; warm: the second.
2. The files one op crosses from its layer to its kernel: per layer call (the innermost
   ``forward`` of a layer of tinyflow/nn/modules/) and per backward of an op, the tinyflow files
   entered meanwhile, minus the runtime every op passes through (``RUNTIME``: Tensor, autograd,
   the device, dtypes, amp, the CPU kernels' thread pool, ``Module.__call__``). A reader follows
   layer -> op file -> kernel: at most 3.
3. The largest import circle: the import graph of every .py file of the packages (an AST walk
   that counts imports at any depth: module level, inside functions, under ``if TYPE_CHECKING:``,
   relative ones resolved, and ``importlib.import_module("tinyflow....")`` with a literal
   string), its strongly connected components (Tarjan's algorithm, iteratively), and the largest
   one's files. Files in one circle cannot be read (or tested, or moved) one at a time.
4. The house: the files at the top of tinyflow/ (at most 20) and ``*_extra`` files (none).
5. ``import tinyflow`` against ``import torch`` (when torch is installed), in fresh interpreters,
   alternating: at most a third of torch's time.
6. Printed, no longer a target: the lines loaded (``sys.modules``) by ``import tinyflow``, one
   ``(x * x).sum().backward()`` and the step, and the 10 longest files.

Stdlib only, so that it runs before anything is installed (the scenarios need tinyflow's own
dependencies, NumPy first, in the interpreter given by ``--python``).
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import statistics
import subprocess
import sys
import threading
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]

# (module name prefix, folder): the packages measured. The model zoo lives in models/ and installs
# as tinyflow.models (pyproject.toml's package-dir); it overrides tinyflow/models/__init__.py, the
# few-line stand-in that an uninstalled checkout loads first and that hands over to models/.
SOURCE_ROOTS: tuple[tuple[str, str], ...] = (("tinyflow", "tinyflow"), ("tinyflow_cuda", "tinyflow_cuda"),
                                             ("tinyflow.models", "models"))
MEASURED_PACKAGES = ("tinyflow", "tinyflow_cuda")  # module names counted in sys.modules

# ----------------------------------------------------------------------------- scenarios

# The step `tinyflow train alexnet` runs (tinyflow/recipes/vision.py: get_model, SGD with momentum,
# cross_entropy), on a batch of 2 random 64x64 images: no data loading, no loop. ``step()`` is one
# training step; the "step" scenario runs it twice under the profiler (cold, then warm).
STEP_SETUP = (
    "import numpy as np\n"
    "import tinyflow\n"
    "import tinyflow.nn.functional as F\n"
    "import tinyflow.optim as optim\n"
    "from tinyflow.models import get_model\n"
    "tinyflow.manual_seed(0)\n"
    "model = get_model('alexnet', num_classes=10)\n"
    "model.train()\n"
    "opt = optim.SGD(list(model.parameters()), lr=0.02, momentum=0.9, weight_decay=5e-4)\n"
    "images = np.random.default_rng(0).standard_normal((2, 3, 64, 64)).astype(np.float32)\n"
    "def step():\n"
    "    x = tinyflow.tensor(images)\n"
    "    y = tinyflow.tensor(np.array([1, 7], dtype=np.int64))\n"
    "    opt.zero_grad()\n"
    "    loss = F.cross_entropy(model(x), y)\n"
    "    loss.backward()\n"
    "    opt.step()\n"
    "    assert np.isfinite(float(loss.item()))\n"
)

SCENARIOS: dict[str, tuple[str, str]] = {  # name: (what it is, the code run in a fresh interpreter)
    "import": ("import tinyflow", "import tinyflow\n"),
    "backward": ("one (x * x).sum().backward()",
                 "import tinyflow\n"
                 "x = tinyflow.randn(3, 4, requires_grad=True)\n"
                 "(x * x).sum().backward()\n"
                 "assert x.grad is not None\n"),
    "step": ("one AlexNet-64 training step (CPU)",
             STEP_SETUP
             + "import importlib.util as _u, json as _j, threading as _t\n"
             f"_spec = _u.spec_from_file_location('core_size', {str(Path(__file__).resolve())!r})\n"
             "_cs = __import__('sys').modules['core_size'] = _u.module_from_spec(_spec)\n"
             "_spec.loader.exec_module(_cs)\n"
             "_runs = {}\n"
             "for _phase in ('cold', 'warm'):\n"
             f"    _p = _cs.StepProfiler({str(REPO)!r})\n"
             "    _t.setprofile(_p)\n"
             "    _s = __import__('sys')\n"
             "    _s.setprofile(_p)\n"
             "    step()\n"
             "    _s.setprofile(None)\n"
             "    _t.setprofile(None)\n"
             "    _runs[_phase] = _p.result()\n"
             f"print({'@@core_size step@@'!r})\n"
             "print(_j.dumps(_runs))\n"),
}
STEP_MARKER = "@@core_size step@@"

# Appended to each scenario: the (name, file) of every module loaded, after a marker line so that
# anything the scenario prints cannot be mistaken for it.
PROBE_MARKER = "@@core_size modules@@"
PROBE = ("\nimport json as _j, sys as _s\n"
         f"print({PROBE_MARKER!r})\n"
         "print(_j.dumps([[_n, getattr(_m, '__file__', None)] for _n, _m in list(_s.modules.items())]))\n")

# The source folders of a step (repository paths): the package, its CUDA backend, the model zoo.
SOURCE_FOLDERS = ("tinyflow", "tinyflow_cuda", "models")

# The runtime every op passes through, left out of what an op crosses from its layer to its
# kernel: the Tensor and its creation and in-place methods, autograd, the device, dtypes and
# promotion, random numbers, amp, argument parsing, the CPU kernels' thread pool and workspaces,
# and ``Module.__call__``. A reader learns these once, not per op.
RUNTIME = (
    "tinyflow/tensor.py", "tinyflow/creation.py", "tinyflow/inplace.py", "tinyflow/autograd/",
    "tinyflow/device.py", "tinyflow/dtypes.py", "tinyflow/promotion.py",
    "tinyflow/random.py", "tinyflow/amp/", "tinyflow/arg_parser.py", "tinyflow/_indexing.py",
    "tinyflow/errors.py", "tinyflow/return_types.py", "tinyflow/kernels/_cpu.py",
    "tinyflow/nn/modules/module.py",
)


class StepProfiler:
    """A ``sys.setprofile`` function: which files of the repository's source folders run, and, per
    op, which of them it crosses (``groups``).

    A group starts at the innermost ``forward`` of a layer (a method of a class defined in
    tinyflow/nn/modules/: ``Conv2d.forward``), at the ``backward`` of an op (a ``Function`` of
    tinyflow/ops/: ``Conv2dFunction.backward``), or at an op file's function called outside any
    group (``F.cross_entropy`` from the training step); every file entered until it returns is
    the group's (per thread: the CPU kernels' worker threads have their own stacks).
    """

    def __init__(self, repo: str, folders: Sequence[str] = SOURCE_FOLDERS) -> None:
        self.repo = os.path.realpath(repo)
        self.roots = tuple(os.path.join(self.repo, d) + os.sep for d in folders)
        self.entered: set[str] = set()
        self.groups: dict[str, set[str]] = {}
        self._local = threading.local()
        self._paths: dict[str, str | None] = {}  # co_filename -> repository path, or None

    def _path(self, filename: str) -> str | None:
        path = self._paths.get(filename, "")
        if path == "":
            real = os.path.realpath(filename)
            path = os.path.relpath(real, self.repo).replace(os.sep, "/") if real.startswith(self.roots) else None
            self._paths[filename] = path
        return path

    def _group(self, frame: Any, path: str, stack: list) -> str | None:
        name = frame.f_code.co_name
        if name == "forward" and path.startswith("tinyflow/nn/modules/"):
            owner = frame.f_locals.get("self")
            return f"{type(owner).__name__}.forward" if owner is not None else f"{path}:forward"
        if name == "backward" and path.startswith("tinyflow/ops/"):
            fn = getattr(frame.f_locals.get("ctx"), "fn", None)
            return f"{fn.__name__}.backward" if fn is not None else f"{path}:backward"
        if not stack and path.startswith("tinyflow/ops/"):
            return f"{path}:{name}"
        return None

    def __call__(self, frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            path = self._path(frame.f_code.co_filename)
            if path is None:
                return
            self.entered.add(path)
            stack = getattr(self._local, "stack", None)
            if stack is None:
                stack = self._local.stack = []
            group = self._group(frame, path, stack)
            if group is not None:
                stack.append((frame, group))
            if stack:
                self.groups.setdefault(stack[-1][1], set()).add(path)
        elif event == "return":
            stack = getattr(self._local, "stack", None)
            if stack and stack[-1][0] is frame:
                stack.pop()

    def result(self) -> dict:
        return {"entered": sorted(self.entered),
                "groups": {g: sorted(files) for g, files in sorted(self.groups.items())}}


def crossed(files: Iterable[str], runtime: Sequence[str] = RUNTIME) -> list[str]:
    """The files of one op's group a reader follows: all but the runtime's."""
    return sorted(f for f in files if not f.startswith(tuple(runtime)))


@dataclass
class LoadedCode:
    """The tinyflow code one scenario loaded: distinct files, their physical and non-blank lines."""
    scenario: str
    modules: int
    lines: int
    nonblank: int
    files: list[str] = field(default_factory=list)  # relative to the repository, sorted


def count_lines(path: str | os.PathLike) -> tuple[int, int]:
    """(physical lines, non-blank lines) of a text file, as ``wc -l`` and ``grep -c .`` would say
    (a last line without its newline counts too)."""
    text = Path(path).read_text(encoding="utf-8", errors="replace")
    lines = text.splitlines()
    return len(lines), sum(1 for line in lines if line.strip())


def is_measured(name: str, packages: Sequence[str] = MEASURED_PACKAGES) -> bool:
    """Whether module ``name`` belongs to one of ``packages`` (the package itself or below it)."""
    return any(name == p or name.startswith(p + ".") for p in packages)


def loaded_code(scenario: str, modules: Iterable[tuple[str, str | None]],
                packages: Sequence[str] = MEASURED_PACKAGES) -> LoadedCode:
    """Count the tinyflow source files among ``modules`` ((name, __file__) pairs from sys.modules).

    A module without a .py file (a namespace, an alias object) adds nothing; a file registered
    under two names (a module aliased in sys.modules) counts once: the figure is what a reader reads.
    """
    files = sorted({os.path.realpath(f) for n, f in modules if f and f.endswith(".py") and is_measured(n, packages)})
    counts = [count_lines(f) for f in files]
    return LoadedCode(scenario, len(files), sum(c[0] for c in counts), sum(c[1] for c in counts),
                      [_relative(f) for f in files])


def run_scenario(name: str, python: str = sys.executable, timeout: float = 300.0) -> tuple[LoadedCode, dict]:
    """Run scenario ``name`` in a fresh interpreter (the checkout first on its path, on the CPU):
    the tinyflow code it loaded, and what the step scenario's profiler saw (else {})."""
    _, code = SCENARIOS[name]
    proc = _run_python(code + PROBE, python, timeout)
    if proc.returncode != 0 or PROBE_MARKER not in proc.stdout:
        tail = proc.stderr.strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"core_size: scenario {name!r} failed in {python} (exit {proc.returncode}): {tail[0]}")
    modules = json.loads(proc.stdout.split(PROBE_MARKER, 1)[1].strip().splitlines()[0])
    profiled = {}
    if STEP_MARKER in proc.stdout:
        profiled = json.loads(proc.stdout.split(STEP_MARKER, 1)[1].strip().splitlines()[0])
    return loaded_code(name, [tuple(m) for m in modules]), profiled


def _run_python(code: str, python: str = sys.executable, timeout: float = 300.0,
                bytecode: bool = False) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter, the checkout first on its path, on the CPU. ``bytecode``: let
    Python write and read its .pyc cache (an import timed as users see it, torch's included)."""
    env = dict(os.environ)
    if bytecode:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    env["CUDA_VISIBLE_DEVICES"] = ""  # the CPU step, as on a machine without a GPU
    return subprocess.run([python, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)


@dataclass
class Entered:
    """The files one step entered (repository paths, sorted) and their lines."""
    files: list[str]
    lines: int


def entered_code(files: Iterable[str], repo: Path = REPO) -> Entered:
    files = sorted(files)
    return Entered(files, sum(count_lines(repo / f)[0] for f in files))


def import_seconds(module: str, python: str = sys.executable, runs: int = 5) -> list[float]:
    """Seconds ``import module`` takes in ``runs`` fresh interpreters (measured inside each, so
    the interpreter's own start-up is left out), with Python's bytecode cache on."""
    code = (f"import time\nt = time.perf_counter()\nimport {module}\n"
            "print('@@seconds', time.perf_counter() - t)\n")
    out = []
    for _ in range(runs):
        proc = _run_python(code, python, timeout=120, bytecode=True)
        if proc.returncode != 0:
            raise ModuleNotFoundError(f"import {module} failed in {python}")
        out.append(float(proc.stdout.split("@@seconds", 1)[1].split()[0]))
    return out


def import_ratio(python: str = sys.executable, rounds: int = 5) -> dict | None:
    """``import tinyflow`` against ``import torch``: each in its own fresh interpreter, alternating
    rounds after one untimed import of each (so that both read their bytecode caches, as users'
    imports do), the medians and their ratio; None where torch is not installed."""
    ours, theirs = [], []
    try:
        import_seconds("torch", python, 1), import_seconds("tinyflow", python, 1)  # warm: caches written
        for _ in range(rounds):
            theirs += import_seconds("torch", python, 1)
            ours += import_seconds("tinyflow", python, 1)
    except ModuleNotFoundError:
        return None
    return {"tinyflow_s": statistics.median(ours), "torch_s": statistics.median(theirs),
            "percent": round(100 * statistics.median(ours) / statistics.median(theirs), 1)}


def top_level_files(package: Path = REPO / "tinyflow") -> list[str]:
    """The .py files at the top of the package (sub-packages are folders, not counted)."""
    return sorted(p.name for p in package.glob("*.py"))


def extra_files(roots: Sequence[Path] = (REPO / "tinyflow", REPO / "tinyflow_cuda", REPO / "models")) -> list[str]:
    """``*_extra.py`` files: a family split by what one model happens not to load."""
    return sorted(_relative(p) for root in roots for p in root.rglob("*_extra.py"))


def _relative(path: str | os.PathLike) -> str:
    try:
        return Path(path).resolve().relative_to(REPO).as_posix()
    except ValueError:  # a file outside the checkout (an installed copy)
        return str(path)


# ----------------------------------------------------------------------------- the import graph


def module_files(roots: Sequence[tuple[str, str | os.PathLike]]) -> dict[str, Path]:
    """Module name -> .py file for every file under each (prefix, folder) root; a later root wins
    where two name the same module (``pkg/__init__.py`` is module ``pkg``)."""
    found: dict[str, Path] = {}
    for prefix, folder in roots:
        folder = Path(folder)
        for path in sorted(folder.rglob("*.py")):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            if any(not p.isidentifier() for p in parts):  # not importable (e.g. a data folder with a dash)
                continue
            found[".".join([prefix, *parts])] = path
    return found


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The longest known module that ``name`` is or lies in (``pkg.mod.Class`` -> ``pkg.mod``)."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        candidate = ".".join(parts[:i])
        if candidate in known:
            return candidate
    return None


def _base_package(module: str, path: Path, level: int) -> str | None:
    """The package a relative import of ``level`` dots in ``module`` starts from (None: above the
    top package, an ImportError in Python, no edge here)."""
    parts = module.split(".") if _is_package(path) else module.split(".")[:-1]
    keep = len(parts) - (level - 1)
    return ".".join(parts[:keep]) if keep > 0 else None


def _import_module_target(node: ast.Call, module: str, path: Path) -> str | None:
    """The module named by ``importlib.import_module("...")`` / ``import_module(".x", __package__)``
    / ``__import__("...")`` with a literal string (f-strings with a placeholder name no one file)."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    if name not in ("import_module", "__import__") or not node.args:
        return None
    arg = node.args[0]
    if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
        return None
    target = arg.value
    if target.startswith("."):  # relative to the package argument: here, this module's package
        level = len(target) - len(target.lstrip("."))
        rest = target.lstrip(".")
        base = _base_package(module, path, level)
        if base is None:
            return None
        target = f"{base}.{rest}" if rest else base
    return target


def imports_of(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The known modules that ``module`` (file ``path``) imports anywhere in its code.

    An edge goes to the module a statement names: ``import a.b.c`` -> a.b.c; ``from a.b import c``
    -> a.b.c where c is a module, else a.b; and to a module reached through an imported one by
    attribute (``from a import b`` ... ``b.c.f()`` -> a.b.c). The packages above it (a, a.b) run too, but an edge to
    each ``__init__`` would put every file in a circle with its own package, which says nothing.
    """
    tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"), filename=str(path))
    targets: list[str] = []
    bound: dict[str, str] = {}  # a name this file binds to a module -> that module
    for node in ast.walk(tree):  # every depth: functions, classes, if TYPE_CHECKING:, try/except
        if isinstance(node, ast.Import):
            targets.extend(alias.name for alias in node.names)
            for alias in node.names:
                bound[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = _base_package(module, path, node.level)
                if base is None:
                    continue
                source = f"{base}.{node.module}" if node.module else base
            else:
                source = node.module or ""
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                targets.append(sub if sub in known else source)
                if sub in known:
                    bound[alias.asname or alias.name] = sub
        elif isinstance(node, ast.Call):
            target = _import_module_target(node, module, path)
            if target:
                targets.append(target)
    for node in ast.walk(tree):  # ``ops.shape.Reshape`` after ``from tinyflow import ops``: ops/shape.py runs
        if isinstance(node, ast.Attribute):
            chain, inner = [], node
            while isinstance(inner, ast.Attribute):
                chain.append(inner.attr)
                inner = inner.value
            if isinstance(inner, ast.Name) and inner.id in bound:
                base = bound[inner.id]
                target = _resolve(".".join([base, *reversed(chain)]), known)
                if target and target != _resolve(base, known):
                    targets.append(target)
    resolved = {_resolve(t, known) for t in targets if t}
    resolved.discard(None)
    resolved.discard(module)
    return resolved  # type: ignore[return-value]


def import_graph(known: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the modules it imports, for every module in ``known``."""
    return {module: imports_of(module, path, known) for module, path in known.items()}


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of ``graph``, iteratively (no recursion limit on a
    long import chain); each component sorted, the list in the order Tarjan completes them."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]  # (node, its successors still to visit)
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            advanced = False
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = counter
                    counter += 1
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(graph.get(succ, ())))))
                    advanced = True
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            if advanced:
                continue
            work.pop()
            if work:  # back in the caller: pass the low-link up
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(sorted(component))
    return components


@dataclass
class Circle:
    """The largest import circle: its files (relative paths, longest first) and their lines."""
    files: int
    lines: int
    members: list[str] = field(default_factory=list)


def largest_circle(roots: Sequence[tuple[str, str | os.PathLike]] = (), repo: Path = REPO) -> Circle:
    """The largest strongly connected component (by files, then lines) of the import graph of the
    packages under ``roots`` (default: SOURCE_ROOTS in ``repo``). A file alone is no circle: no
    circle at all gives 0 files."""
    roots = roots or [(prefix, repo / folder) for prefix, folder in SOURCE_ROOTS]
    known = module_files(roots)
    best = Circle(0, 0)
    for component in strongly_connected(import_graph(known)):
        if len(component) < 2:
            continue
        sized = sorted(((count_lines(known[m])[0], m) for m in component), reverse=True)
        lines = sum(n for n, _ in sized)
        if (len(component), lines) > (best.files, best.lines):
            best = Circle(len(component), lines, [f"{_relative(known[m])} ({n:,})" for n, m in sized])
    return best


# ----------------------------------------------------------------------------- the longest files


def longest_files(folder: Path = REPO / "tinyflow", n: int = 10) -> list[tuple[str, int]]:
    """The ``n`` longest .py files under ``folder``: (path relative to the repository, lines)."""
    sized = [(count_lines(p)[0], _relative(p)) for p in folder.rglob("*.py")]
    return [(path, lines) for lines, path in sorted(sized, key=lambda s: (-s[0], s[1]))[:n]]


# ----------------------------------------------------------------------------- targets and report

# The targets of issue 34: (figure key, what it is, the most allowed). tests/test_boundaries.py
# (the rings as folders) is a target too: CI runs it with the rest of the suite.
TARGETS: tuple[tuple[str, str, int], ...] = (
    ("step_warm_files", "files a warm AlexNet-64 CPU step enters", 33),
    ("step_cold_files", "files a cold AlexNet-64 CPU step enters", 35),
    ("step_warm_lines", "lines of the files a warm AlexNet-64 CPU step enters", 10_000),
    ("op_files", "tinyflow files one op crosses from its layer to its kernel", 3),
    ("circle_files", "files in the largest import circle", 12),
    ("top_files", "files at the top of tinyflow/", 20),
    ("extra_files", "*_extra files", 0),
    ("import_percent", "import tinyflow, in percent of import torch", 33),
)


def measure(scenarios: Sequence[str] = tuple(SCENARIOS), python: str = sys.executable,
            import_rounds: int = 5) -> dict:
    """Every figure as one JSON-able dict: the scenarios, the step's entered files and crossings,
    the circle, the house, the import times, the longest files, the targets."""
    loaded, profiled = {}, {}
    for name in scenarios:
        loaded[name], found = run_scenario(name, python)
        profiled.update(found)
    circle = largest_circle()
    report: dict = {
        "scenarios": {name: asdict(code) for name, code in loaded.items()},
        "circle": asdict(circle),
        "longest_files": longest_files(),
        "top_files": top_level_files(),
        "extra_files": extra_files(),
        "figures": {f"{name}_loaded_lines": code.lines for name, code in loaded.items()}
                   | {f"{name}_loaded_modules": code.modules for name, code in loaded.items()}
                   | {"circle_files": circle.files, "circle_lines": circle.lines,
                      "top_files": len(top_level_files()), "extra_files": len(extra_files())},
    }
    if profiled:
        report["entered"], report["ops"] = {}, {}
        for phase, run in profiled.items():
            entered = entered_code(run["entered"])
            report["entered"][phase] = asdict(entered)
            report["figures"][f"step_{phase}_files"] = len(entered.files)
            report["figures"][f"step_{phase}_lines"] = entered.lines
        for group, files in profiled["warm"]["groups"].items():
            report["ops"][group] = crossed(files)
        report["figures"]["op_files"] = max((len(f) for f in report["ops"].values()), default=0)
    if import_rounds:
        ratio = import_ratio(python, import_rounds)
        if ratio is not None:
            report["import"] = ratio
            report["figures"]["import_percent"] = ratio["percent"]
    report["targets"] = evaluate_targets(report["figures"])
    return report


def evaluate_targets(figures: dict[str, int], targets: Sequence[tuple[str, str, int]] = TARGETS) -> list[dict]:
    """Each target beside its figure: met True / False, or None where the figure was not measured."""
    return [{"figure": key, "what": what, "at_most": limit, "value": figures.get(key),
             "met": figures[key] <= limit if key in figures else None} for key, what, limit in targets]


def missed_targets(report: dict) -> list[str]:
    """One line per target measured and missed (a figure not measured is neither met nor missed)."""
    return [f"core_size: target missed: {t['what']}: {t['value']:,} (at most {t['at_most']:,})"
            for t in report["targets"] if t["met"] is False]


def format_table(report: dict) -> str:
    """The figures as a short plain-text table."""
    limits = {t["figure"]: t["at_most"] for t in report["targets"]}
    met = {t["figure"]: t["met"] for t in report["targets"]}
    figures = report["figures"]

    def target(key: str) -> str:
        if key not in limits or met.get(key) is None:
            return ""
        return f"<= {limits[key]:,}  {'met' if met[key] else 'MISSED'}"

    out = []
    if "entered" in report:
        out += ["files one AlexNet-64 CPU training step enters (sys.setprofile; lines = wc -l of each file)"]
        for phase in ("cold", "warm"):
            e = report["entered"][phase]
            out.append(f"  {phase + ' step':<12} {len(e['files']):>4} files {target(f'step_{phase}_files'):<20} "
                       f"{e['lines']:>7,} lines  {target(f'step_{phase}_lines')}")
        out += ["", f"files one op crosses from its layer to its kernel (runtime left out): at most "
                    f"{figures['op_files']}  {target('op_files')}"]
        out += [f"  {group:<38} {' -> '.join(files)}" for group, files in report["ops"].items()]
        out.append("")
    out += ["tinyflow code loaded (fresh interpreter; lines = physical lines of the tinyflow .py files "
            "in sys.modules; printed, not a target)", f"  {'scenario':<40} {'modules':>7} {'lines':>8} {'non-blank':>9}"]
    for name, code in report["scenarios"].items():
        out.append(f"  {SCENARIOS[name][0]:<40} {code['modules']:>7} {code['lines']:>8,} {code['nonblank']:>9,}")
    circle = report["circle"]
    out += ["", f"largest import circle: {circle['files']} files, {circle['lines']:,} lines  {target('circle_files')}"]
    out += [f"  {m}" for m in circle["members"]]
    out += ["", f"files at the top of tinyflow/: {figures['top_files']}  {target('top_files')}",
            f"*_extra files: {figures['extra_files']}  {target('extra_files')}"]
    out += [f"  {path}" for path in report["extra_files"]]
    if "import" in report:
        imp = report["import"]
        out += ["", f"import tinyflow {imp['tinyflow_s'] * 1e3:.0f} ms, import torch {imp['torch_s'] * 1e3:.0f} ms "
                    f"(medians, fresh interpreters): {imp['percent']:.0f}%  {target('import_percent')}"]
    out += ["", "longest files under tinyflow/:"]
    out += [f"  {lines:>6,}  {path}" for path, lines in report["longest_files"]]
    out += ["", "tests/test_boundaries.py green: a target too, checked by the test suite, not here"]
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="What a reader of tinyflow follows (issue 34): the files one "
                                     "training step enters, the files one op crosses, the largest import circle, "
                                     "the house, import time, the targets.")
    parser.add_argument("--json", metavar="PATH", help="also write every figure to PATH as JSON")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed (one line each)")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS),
                        help=f"comma-separated subset of {', '.join(SCENARIOS)} (default: all)")
    parser.add_argument("--python", default=sys.executable,
                        help="the interpreter that runs the scenarios (default: this one)")
    parser.add_argument("--import-rounds", type=int, default=5,
                        help="fresh interpreters per framework for the import times (0: skip; default: 5)")
    args = parser.parse_args(argv)
    chosen = [s for s in args.scenarios.split(",") if s]
    unknown = [s for s in chosen if s not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenario(s) {', '.join(unknown)}: choose from {', '.join(SCENARIOS)}")
    try:
        report = measure(chosen, args.python, args.import_rounds)
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        print(exc, file=sys.stderr)
        return 2
    print(format_table(report))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    missed = missed_targets(report)
    if args.check and missed:
        print("\n".join(missed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
