"""How big is the core: the lines of tinyflow a reader must follow, measured by what actually runs.

    python bench/core_size.py                  # the table
    python bench/core_size.py --json out.json  # the table, and every figure as JSON
    python bench/core_size.py --check          # exit 1, one line per target missed (what CI runs)

Issue 25: the README promises a framework "small enough to read in an afternoon". This script
measures that promise in four figures (docs/core-size.md says what counts and why):

1. Lines loaded: in a fresh ``python -c`` subprocess per scenario (``import tinyflow``; one
   ``(x * x).sum().backward()``; one AlexNet-64 training step on the CPU), the tinyflow modules
   in ``sys.modules`` afterwards (names ``tinyflow``, ``tinyflow.*``, ``tinyflow_cuda``,
   ``tinyflow_cuda.*``; one file loaded under two names counts once) and the sum of their files'
   lines. The target figure is physical lines (``wc -l``: blank lines, comments and docstrings
   included, since a reader scrolls past them too); the non-blank count is printed beside it.
2. The largest import circle: the import graph of every .py file of the packages (an AST walk
   that counts imports at any depth: module level, inside functions, under ``if TYPE_CHECKING:``,
   relative ones resolved, and ``importlib.import_module("tinyflow....")`` with a literal
   string), its strongly connected components (Tarjan's algorithm, iterative), and the largest
   one's files. Files in one circle cannot be read (or tested, or moved) one at a time.
3. The 10 longest files under tinyflow/.
4. The targets of issue 25 beside each figure, and whether each is met.

Stdlib only, so that it runs before anything is installed (the scenarios need tinyflow's own
dependencies, NumPy first, in the interpreter given by ``--python``).
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# (module name prefix, folder): the packages measured. The model zoo lives in models/ and installs
# as tinyflow.models (pyproject.toml's package-dir); it overrides tinyflow/models/__init__.py, the
# few-line stand-in that an uninstalled checkout loads first and that hands over to models/.
SOURCE_ROOTS: tuple[tuple[str, str], ...] = (("tinyflow", "tinyflow"), ("tinyflow_cuda", "tinyflow_cuda"),
                                             ("tinyflow.models", "models"))
MEASURED_PACKAGES = ("tinyflow", "tinyflow_cuda")  # module names counted in sys.modules

# ----------------------------------------------------------------------------- scenarios

SCENARIOS: dict[str, tuple[str, str]] = {  # name: (what it is, the code run in a fresh interpreter)
    "import": ("import tinyflow", "import tinyflow\n"),
    "backward": ("one (x * x).sum().backward()",
                 "import tinyflow\n"
                 "x = tinyflow.randn(3, 4, requires_grad=True)\n"
                 "(x * x).sum().backward()\n"
                 "assert x.grad is not None\n"),
    # The step `tinyflow train alexnet` runs (tinyflow/recipes/vision.py: get_model, SGD with
    # momentum, cross_entropy), on a batch of 2 random 64x64 images: no data loading, no loop.
    "step": ("one AlexNet-64 training step (CPU)",
             "import numpy as np\n"
             "import tinyflow\n"
             "import tinyflow.nn.functional as F\n"
             "import tinyflow.optim as optim\n"
             "from tinyflow.models import get_model\n"
             "tinyflow.manual_seed(0)\n"
             "model = get_model('alexnet', num_classes=10)\n"
             "model.train()\n"
             "opt = optim.SGD(list(model.parameters()), lr=0.02, momentum=0.9, weight_decay=5e-4)\n"
             "x = tinyflow.tensor(np.random.default_rng(0).standard_normal((2, 3, 64, 64)).astype(np.float32))\n"
             "y = tinyflow.tensor(np.array([1, 7], dtype=np.int64))\n"
             "opt.zero_grad()\n"
             "loss = F.cross_entropy(model(x), y)\n"
             "loss.backward()\n"
             "opt.step()\n"
             "assert np.isfinite(float(loss.item()))\n"),
}

# Appended to each scenario: the (name, file) of every module loaded, after a marker line so that
# anything the scenario prints cannot be mistaken for it.
PROBE_MARKER = "@@core_size modules@@"
PROBE = ("\nimport json as _j, sys as _s\n"
         f"print({PROBE_MARKER!r})\n"
         "print(_j.dumps([[_n, getattr(_m, '__file__', None)] for _n, _m in list(_s.modules.items())]))\n")


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


def run_scenario(name: str, python: str = sys.executable, timeout: float = 300.0) -> LoadedCode:
    """Run scenario ``name`` in a fresh interpreter (the checkout first on its path, on the CPU)
    and count the tinyflow code it loaded."""
    _, code = SCENARIOS[name]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    env["CUDA_VISIBLE_DEVICES"] = ""  # the CPU step, as on a machine without a GPU
    proc = subprocess.run([python, "-c", code + PROBE], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=timeout)
    if proc.returncode != 0 or PROBE_MARKER not in proc.stdout:
        tail = proc.stderr.strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"core_size: scenario {name!r} failed in {python} (exit {proc.returncode}): {tail[0]}")
    modules = json.loads(proc.stdout.split(PROBE_MARKER, 1)[1].strip().splitlines()[0])
    return loaded_code(name, [tuple(m) for m in modules])


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

# Issue 25's targets: (figure key, what it is, the most allowed). The fourth target,
# tests/test_boundaries.py green, is a test: CI runs it with the rest of the suite.
TARGETS: tuple[tuple[str, str, int], ...] = (
    ("backward_lines", "lines loaded by one backward", 5_000),
    ("step_lines", "lines loaded by one AlexNet-64 step", 10_000),
    ("circle_files", "files in the largest import circle", 15),
)


def measure(scenarios: Sequence[str] = tuple(SCENARIOS), python: str = sys.executable) -> dict:
    """Every figure as one JSON-able dict: the scenarios, the circle, the longest files, the targets."""
    loaded = {name: run_scenario(name, python) for name in scenarios}
    circle = largest_circle()
    report = {
        "scenarios": {name: asdict(code) for name, code in loaded.items()},
        "circle": asdict(circle),
        "longest_files": longest_files(),
        "figures": {f"{name}_lines": code.lines for name, code in loaded.items()}
                   | {f"{name}_modules": code.modules for name, code in loaded.items()}
                   | {"circle_files": circle.files, "circle_lines": circle.lines},
    }
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

    def target(key: str) -> str:
        if key not in limits:
            return ""
        return f"<= {limits[key]:,}  {'met' if met.get(key) else 'MISSED'}"

    out = ["tinyflow code loaded (fresh interpreter; lines = physical lines of the tinyflow .py files "
           "in sys.modules)", f"  {'scenario':<40} {'modules':>7} {'lines':>8} {'non-blank':>9}  target"]
    for name, code in report["scenarios"].items():
        out.append(f"  {SCENARIOS[name][0]:<40} {code['modules']:>7} {code['lines']:>8,} "
                   f"{code['nonblank']:>9,}  {target(f'{name}_lines')}")
    circle = report["circle"]
    out += ["", f"largest import circle: {circle['files']} files, {circle['lines']:,} lines  {target('circle_files')}"]
    out += [f"  {m}" for m in circle["members"]]
    out += ["", "longest files under tinyflow/:"]
    out += [f"  {lines:>6,}  {path}" for path, lines in report["longest_files"]]
    out += ["", "tests/test_boundaries.py green: a target too, checked by the test suite, not here"]
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="How big is tinyflow's core (issue 25): lines loaded per "
                                     "scenario, the largest import circle, the longest files, the targets.")
    parser.add_argument("--json", metavar="PATH", help="also write every figure to PATH as JSON")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed (one line each)")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS),
                        help=f"comma-separated subset of {', '.join(SCENARIOS)} (default: all)")
    parser.add_argument("--python", default=sys.executable,
                        help="the interpreter that runs the scenarios (default: this one)")
    args = parser.parse_args(argv)
    chosen = [s for s in args.scenarios.split(",") if s]
    unknown = [s for s in chosen if s not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenario(s) {', '.join(unknown)}: choose from {', '.join(SCENARIOS)}")
    try:
        report = measure(chosen, args.python)
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
