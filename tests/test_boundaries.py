"""The three rings (docs/design.md, "The rings"), as folders, checked on the source.

An AST walk over every .py file of tinyflow/, tinyflow_cuda/ and models/ (which installs as
``tinyflow.models``) collects every place a file names another tinyflow module:

- ``import`` / ``from ... import`` at any depth: module level, inside functions and classes, under
  ``if TYPE_CHECKING:``; relative imports resolved against the file's package;
- ``importlib.import_module("...")`` and ``__import__("...")`` with a literal string;
- string constants that are exactly a module of the tree (``sys.modules["tinyflow.tensor"]``, the
  values of a table ``{"linalg": "tinyflow.surface.linalg"}``);
- attribute chains through an imported module (``from tinyflow import ops`` ... ``ops.conv.f``
  names tinyflow.ops.conv). A name that is both a
  submodule and a function of a package (``F.linear``, ``tf.tensor``) counts as the submodule:
  where the function lives, as a rule.

Each file belongs to one ring (``RINGS`` below: a handful of folder patterns, first match wins)
and the tests say:

1. the core imports only the core;
2. the framework imports only the core and the framework;
3. nothing in the core or the framework imports the surface;
4. re-export modules (package ``__init__`` files, the public ``nn.functional``) define nothing;
5. the one import circle of more than one file is tensor <-> autograd <-> the core ops, at most
   12 files;
6. no core file is over 1,000 lines (tensor.py 800, autograd/function.py and engine.py 550);
and the walker is tested on small synthetic packages, so that it can fail.

Importing a re-export module counts as importing what it imports eagerly (at module level, not
under TYPE_CHECKING, through further re-export modules): that is what runs. Such a violation is
reported once, at the re-export module's own line, with the places in core or framework code that
load it. A package's ``__init__`` also runs before every module below it, but that alone does not
count: ``from tinyflow.ops.elementwise import Add`` names one module, not the package.

The import graph helpers (Tarjan's components, relative-import resolution, line counts) are those
of bench/core_size.py, which prints the same circle as a figure.
"""
from __future__ import annotations

import ast
import functools
import importlib.util
import re
import sys
import textwrap
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load_core_size():
    """bench/core_size.py as a module (it is a script, not a package); the one test_core_size.py
    loaded if it is already there."""
    path = ROOT / "bench" / "core_size.py"
    loaded = sys.modules.get("core_size")
    if loaded is not None and Path(getattr(loaded, "__file__", "")).resolve() == path:
        return loaded
    spec = importlib.util.spec_from_file_location("core_size", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["core_size"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


cs = _load_core_size()

# ============================================================================ the rings
#
# (ring, pattern) pairs; a file's path relative to the repository takes the ring of the FIRST
# pattern it matches. In a pattern ``**/`` is any number of folders, ``*`` any part of one name,
# ``{a,b}`` either a or b. A file that matches none fails test_every_file_has_a_ring: a new file
# must be placed in a ring here, on purpose.

REEXPORT, CORE, FRAMEWORK, SURFACE = "re-export", "core", "framework", "surface"

RINGS: tuple[tuple[str, str], ...] = (
    # Packages whose __init__ is a module of its own, not an index: the CUDA backend (core); the
    # torch.cuda / torch.cpu / torch.backends answers (framework); the surface's table and seam.
    (CORE, "tinyflow_cuda/{,kernels/}__init__.py"),
    (FRAMEWORK, "tinyflow/{cuda,cpu,backends}/__init__.py"),
    (SURFACE, "tinyflow/surface/__init__.py"),
    # RE-EXPORT modules: every other package __init__, and the public nn.functional (an index of
    # the ops' F functions). They gather names and define nothing (test 4).
    (REEXPORT, "**/__init__.py"),
    (REEXPORT, "tinyflow/nn/functional.py"),
    # SURFACE: the PyTorch breadth beyond a training step. May import anything; nothing in the core
    # or the framework imports it (test 3): it attaches itself at one seam (docs/design.md).
    (SURFACE, "tinyflow/{surface,distributions,utils}/**"),
    # torch.nn.utils.parametrizations at its PyTorch path (orthogonal needs linalg's QR and
    # matrix_exp): the seam imports it, nn.utils does not.
    (SURFACE, "tinyflow/nn/utils/parametrizations.py"),
    # The transport contract that tinyflow_cuda/nccl.py implements, as kernels/ is the contract
    # that tinyflow_cuda/kernels/ implements.
    (CORE, "tinyflow/parallel/communicator.py"),
    # FRAMEWORK: layers, optimizers, data, data parallelism, recipes, the model zoo, the command
    # line, the explainer, benchmarks, the torch.cuda / torch.cpu / torch.backends answers, and the
    # framework's files at the top. Imports the core and the framework (test 2).
    (FRAMEWORK, "tinyflow/{nn,optim,data,parallel,recipes,commands,explainer,bench,cuda,cpu,backends,models}/**"),
    (FRAMEWORK, "models/**"),  # the model zoo, installed as tinyflow.models
    (FRAMEWORK, "tinyflow/{cli,serialization,distributed,testing,accelerator}.py"),
    # CORE: Tensor, autograd, device, dtypes, amp, random, the ops and their kernels, the CUDA
    # backend. Imports only the core (test 1).
    (CORE, "tinyflow/*.py"),
    (CORE, "tinyflow/{autograd,amp,ops,kernels}/**"),
    (CORE, "tinyflow_cuda/**"),
)

# What each ring may import (test 1, test 2); the surface may import anything.
MAY_IMPORT: dict[str, frozenset[str]] = {
    CORE: frozenset({CORE}),
    FRAMEWORK: frozenset({CORE, FRAMEWORK}),
}

# The packages walked: (module prefix, folder); models/ installs as tinyflow.models. cuda_tools/
# (the emulator, the strict CuPy stand-in, the reports) is test machinery, in no ring: not walked.
SOURCE_ROOTS: tuple[tuple[str, str], ...] = cs.SOURCE_ROOTS

# Test 4: statements a re-export module may hold beyond imports, docstrings, __all__, constant
# tables, aliases of imported names, ``del`` and the __getattr__ / __dir__ of the one seam.
# (file, statement as written): why.
ALLOWED_STATEMENTS: dict[tuple[str, str], str] = {
    ("tinyflow/__init__.py", '_os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")'):
        "environment setup that must run before NumPy loads OpenBLAS, i.e. in the first tinyflow module",
    ("tinyflow/__init__.py", "_tune_allocator()"):
        "process setup (malloc tuning) that must run once at import, before the first tensor",
    ("tinyflow/__init__.py", '__version__ = "0.1.0"'):
        "the package version, where tools look for it",
    ("tinyflow/__init__.py", "_surface.attach(_sys.modules[__name__])"):
        "the one seam: the PyTorch surface attaches itself to tinyflow (docs/design.md, 'The rings')",
    # tinyflow/models/__init__.py is the stand-in that an uninstalled checkout imports; it hands the
    # name tinyflow.models to models/__init__.py (an installed tinyflow never reads it).
    ("tinyflow/models/__init__.py", '_ZOO = Path(__file__).resolve().parents[2] / "models"'):
        "checkout stand-in: where the zoo's folder is",
    ("tinyflow/models/__init__.py", '_spec = importlib.util.spec_from_file_location(__name__, _ZOO / "__init__.py", '
                                    'submodule_search_locations=[str(_ZOO)])'):
        "checkout stand-in: load models/__init__.py as tinyflow.models",
    ("tinyflow/models/__init__.py", "_zoo = importlib.util.module_from_spec(_spec)"):
        "checkout stand-in: load models/__init__.py as tinyflow.models",
    ("tinyflow/models/__init__.py", "sys.modules[__name__] = _zoo"):
        "checkout stand-in: the import system hands out what sys.modules holds",
    ("tinyflow/models/__init__.py", "_spec.loader.exec_module(_zoo)"):
        "checkout stand-in: run models/__init__.py",
}

# Tests 1-3: eager imports of a re-export module that do not count against the code that imports
# the re-export module. (re-export file, module it imports): why.
ALLOWED_EAGER_IMPORTS: dict[tuple[str, str], str] = {
    ("tinyflow/__init__.py", "tinyflow.surface"):
        "the one seam (docs/design.md, 'The rings'): the surface attaches its Tensor methods, tinyflow.* "
        "functions and public modules at `import tinyflow`; nothing in the core or the framework imports it",
}

# Test 5: the one circle allowed, its anchor and its size; test 6: line limits.
CIRCLE_ANCHOR = "tinyflow/tensor.py"
MAX_CIRCLE_FILES = 12
MAX_CORE_FILE_LINES = 1000  # a family file holds its whole family (ops/loss.py: every loss)
LINE_LIMITS: dict[str, int] = {"tinyflow/tensor.py": 800, "tinyflow/autograd/function.py": 550, "tinyflow/autograd/engine.py": 550}


def _pattern(glob: str) -> re.Pattern[str]:
    """A path pattern as a regular expression: ``**/`` any folders, ``*`` within one name, ``{a,b}``."""
    out, i = [], 0
    while i < len(glob):
        if glob.startswith("**/", i):
            out.append("(?:[^/]+/)*")
            i += 3
        elif glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif glob[i] == "*":
            out.append("[^/]*")
            i += 1
        elif glob[i] == "{":
            end = glob.index("}", i)
            out.append("(?:" + "|".join(re.escape(a) for a in glob[i + 1:end].split(",")) + ")")
            i = end + 1
        else:
            out.append(re.escape(glob[i]))
            i += 1
    return re.compile("".join(out))


def ring_classifier(rings: Sequence[tuple[str, str]]) -> Callable[[str], str | None]:
    """path -> the ring of the first pattern it matches, or None."""
    compiled = [(ring, _pattern(glob)) for ring, glob in rings]

    def ring_of(path: str) -> str | None:
        return next((ring for ring, rx in compiled if rx.fullmatch(path)), None)

    return ring_of


# ============================================================================ the walk


@dataclass(frozen=True)
class Ref:
    """One place where a file names a module of the tree."""
    line: int
    text: str  # the statement or expression, on one line
    target: str  # the module named: the longest module of the tree that the name is or lies in
    kind: str  # "import", "importlib", "attribute" or "string"
    eager: bool  # runs when the file is imported: module or class level, not under TYPE_CHECKING


@dataclass
class Source:
    """One .py file: its path (relative, with /), module name, text, line count and references."""
    path: str
    module: str
    text: str
    lines: int
    refs: list[Ref] = field(default_factory=list)

    @property
    def is_package(self) -> bool:
        return self.path.endswith("/__init__.py")

    @functools.cached_property
    def tree(self) -> ast.Module:
        """The syntax tree, parsed again when asked for: keeping every file's tree alive would make
        the garbage collector rescan them all, the slowest part of a walk."""
        return ast.parse(self.text, filename=self.path)

    @functools.cached_property
    def _encoded_lines(self) -> list[bytes]:
        return [line.encode() for line in self.text.split("\n")]

    def segment(self, node: ast.AST) -> str:
        """The source text of ``node`` on one line (ast.get_source_segment, without re-splitting
        the whole file at every call; AST columns count UTF-8 bytes)."""
        lines = self._encoded_lines[node.lineno - 1:node.end_lineno]
        lines[-1] = lines[-1][:node.end_col_offset]
        lines[0] = lines[0][node.col_offset:]
        return _one_line(b"\n".join(lines).decode(errors="replace"))


@dataclass
class Tree:
    """Every file walked, by path, and which file Python loads for each module name."""
    files: dict[str, Source]
    modules: dict[str, str]  # module -> path; where two files claim one name, the later root wins

    def file_of(self, module: str) -> Source:
        return self.files[self.modules[module]]


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _one_line(text: str, limit: int = 110) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


class _Walker:
    """Collects the references of one file (see the module docstring for what counts).

    Statements are walked with whether they run at import (``eager``): not inside a function,
    not under ``if TYPE_CHECKING:``. Expressions are walked with an explicit stack, not an
    ast.NodeVisitor: the walk of every file is most of this test's time.
    """

    def __init__(self, source: Source, known: dict[str, str], prefixes: tuple[str, ...]):
        self.source, self.known, self.prefixes = source, known, prefixes
        self.path = Path(source.path)
        self.found: dict[tuple[int, str], Ref] = {}  # (line, target): the first way it was named
        self.aliases: dict[str, str] = {}  # name bound by an import -> the module it is

    def run(self, tree: ast.Module) -> list[Ref]:
        self._bind_aliases(tree.body)
        self.walk_expressions = self._may_name_modules_in_expressions()
        self._statements(tree.body, eager=True)
        return sorted(self.found.values(), key=lambda r: (r.line, r.target))

    def _may_name_modules_in_expressions(self) -> bool:
        """Whether the text holds what an expression that names a module needs: an import_module /
        __import__ call, a quoted module path, or ``alias.sub`` where sub is a module below the
        alias's. Most files hold none, and walking every expression is most of the time."""
        text = self.source.text
        if "import_module" in text or "__import__" in text:
            return True
        if any(f"{quote}{prefix}" in text for quote in "\"'" for prefix in self.prefixes):
            return True
        for alias, module in self.aliases.items():
            below = {m[len(module) + 1:].split(".")[0] for m in self.known if m.startswith(module + ".")}
            if below and re.search(rf"\b{re.escape(alias)}\.(?:{'|'.join(map(re.escape, below))})\b", text):
                return True
        return False

    # -- helpers
    def _add(self, node: ast.AST, target: str | None, kind: str, eager: bool) -> None:
        target = cs._resolve(target, self.known) if target else None
        if target is not None and target != self.source.module:
            self.found.setdefault((node.lineno, target), Ref(node.lineno, self.source.segment(node), target, kind, eager))

    def _from_source(self, node: ast.ImportFrom) -> str | None:
        """The module a ``from X import ...`` statement reads (relative levels resolved)."""
        if not node.level:
            return node.module or ""
        base = cs._base_package(self.source.module, self.path, node.level)
        if base is None:
            return None
        return f"{base}.{node.module}" if node.module else base

    def _bind_aliases(self, body: list[ast.stmt]) -> None:
        """Names that import statements bind to modules of the tree, anywhere in the file (an
        attribute chain ``alias.sub`` then names the module below it)."""
        for stmt in body:
            if isinstance(stmt, ast.Import):
                for alias in stmt.names:
                    bound = alias.name if alias.asname else alias.name.split(".")[0]
                    if bound in self.known:
                        self.aliases[alias.asname or bound] = bound
            elif isinstance(stmt, ast.ImportFrom):
                base = self._from_source(stmt)
                for alias in stmt.names if base else ():
                    if f"{base}.{alias.name}" in self.known:
                        self.aliases[alias.asname or alias.name] = f"{base}.{alias.name}"
            else:
                for name in ("body", "orelse", "finalbody"):
                    self._bind_aliases(getattr(stmt, name, None) or [])
                for part in [*getattr(stmt, "handlers", []), *getattr(stmt, "cases", [])]:
                    self._bind_aliases(part.body)

    # -- statements
    def _statements(self, body: list[ast.stmt], eager: bool) -> None:
        for stmt in body:
            if isinstance(stmt, ast.Import):
                for alias in stmt.names:
                    self._add(stmt, alias.name, "import", eager)
            elif isinstance(stmt, ast.ImportFrom):
                base = self._from_source(stmt)
                for alias in stmt.names if base else ():
                    sub = f"{base}.{alias.name}"
                    self._add(stmt, sub if sub in self.known else base, "import", eager)
            elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = stmt.args
                self._expressions([*stmt.decorator_list, *args.defaults, *args.kw_defaults], eager)  # run by the def
                self._expressions([args, stmt.returns], False)  # annotations
                self._statements(stmt.body, False)  # runs on call
            elif isinstance(stmt, ast.If) and _is_type_checking(stmt.test):
                self._statements(stmt.body, False)
                self._statements(stmt.orelse, eager)
            elif not self.walk_expressions and not any(
                    isinstance(getattr(stmt, name, None), list) for name in ("body", "handlers", "cases")):
                continue  # a simple statement: nothing to find in it
            else:  # any other statement: its expressions, then the statements it holds
                for _, value in ast.iter_fields(stmt):
                    for item in value if isinstance(value, list) else [value]:
                        if isinstance(item, ast.stmt):
                            self._statements([item], eager)
                        elif isinstance(item, (ast.excepthandler, ast.match_case)):
                            self._expressions([getattr(item, "type", None), getattr(item, "guard", None)], eager)
                            self._statements(item.body, eager)
                        elif isinstance(item, ast.AST):
                            self._expressions([item], eager)

    # -- expressions
    def _expressions(self, roots: Iterable[ast.AST | None], eager: bool) -> None:
        if not self.walk_expressions:
            return
        stack = [(node, eager) for node in roots if node is not None]
        while stack:
            node, now = stack.pop()
            if isinstance(node, ast.Lambda):  # the body runs on call
                stack += [(d, now) for d in [*node.args.defaults, *node.args.kw_defaults] if d is not None]
                stack.append((node.body, False))
                continue
            if isinstance(node, ast.Attribute) and self._attribute(node, now):
                continue  # the chain named a module: its shorter prefixes say nothing more
            if isinstance(node, ast.Call):
                target = cs._import_module_target(node, self.source.module, self.path)
                if target:
                    self._add(node, target, "importlib", now)
            elif isinstance(node, ast.Constant):
                if isinstance(node.value, str) and "." in node.value and node.value in self.known:
                    self._add(node, node.value, "string", False)
            elif isinstance(node, ast.Dict):
                for value in node.values:  # a lazy table's values: "pkg.module" or "pkg.module:Name"
                    if isinstance(value, ast.Constant) and isinstance(value.value, str):
                        name = value.value.split(":")[0]
                        if name.startswith(self.prefixes):
                            self._add(value, name, "string", False)
            stack += [(child, now) for child in ast.iter_child_nodes(node)]

    def _attribute(self, node: ast.Attribute, eager: bool) -> bool:
        """Record ``alias.sub.name`` as naming module ``<alias's module>.sub``; whether it did."""
        chain, inner = [node.attr], node.value
        while isinstance(inner, ast.Attribute):
            chain.append(inner.attr)
            inner = inner.value
        base = self.aliases.get(inner.id) if isinstance(inner, ast.Name) else None
        if base is None:
            return False
        target = cs._resolve(".".join([base, *reversed(chain)]), self.known)
        if target is None or target == base:  # an attribute of the module itself
            return False
        self._add(node, target, "attribute", eager)
        return True


def scan(repo: Path, roots: Sequence[tuple[str, str]] = SOURCE_ROOTS) -> Tree:
    """Walk every .py file under each (module prefix, folder) root of ``repo``."""
    files: dict[str, Source] = {}
    modules: dict[str, str] = {}
    for prefix, folder in roots:
        base = repo / folder
        for path in sorted(base.rglob("*.py")):
            parts = list(path.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            if any(not p.isidentifier() for p in parts):  # not importable (a data folder with a dash)
                continue
            rel = path.relative_to(repo).as_posix()
            module = ".".join([prefix, *parts])
            files[rel] = Source(rel, module, path.read_text(encoding="utf-8", errors="replace"), cs.count_lines(path)[0])
            modules[module] = rel
    prefixes = tuple(f"{prefix}." for prefix, _ in roots)
    for source in files.values():
        tree = ast.parse(source.text, filename=source.path)  # not kept: see Source.tree
        source.refs = _Walker(source, modules, prefixes).run(tree)
    return Tree(files, modules)


@functools.lru_cache(maxsize=1)
def _repo_tree() -> Tree:
    return scan(ROOT)


# ============================================================================ the rules
#
# Tests 1-3 report each offending statement once, where it is written:
# - a core or framework file that names a module of a ring it may not import (at any depth): at
#   that file's line;
# - a re-export module that core or framework code loads (a file of that ring names it, or a
#   re-export module that such code loads imports it at module level) and that imports, at module
#   level, a module of a ring that code may not import: at the re-export module's line, with the
#   places that load it (ALLOWED_EAGER_IMPORTS lists the exceptions). A package's __init__ also
#   runs before any module below it, but that alone does not count: ``from tinyflow.ops.elementwise
#   import Add`` names one module, not the package.


def _lines(refs: Iterable[Ref]) -> dict[int, list[Ref]]:
    """References by line (one ``from x import a, b`` may name several modules)."""
    lines: dict[int, list[Ref]] = {}
    for ref in refs:
        lines.setdefault(ref.line, []).append(ref)
    return dict(sorted(lines.items()))


def loaders(tree: Tree, ring_of: Callable[[str], str | None]) -> dict[str, dict[str, list[str]]]:
    """For each re-export module: ring (core / framework) -> the places where code of that ring
    loads it (``file:line``)."""
    why: dict[str, dict[str, list[str]]] = {p: {} for p in sorted(tree.files) if ring_of(p) == REEXPORT}
    for path, source in sorted(tree.files.items()):
        ring = ring_of(path)
        if ring in (CORE, FRAMEWORK):
            for ref in source.refs:
                target = tree.modules[ref.target]
                if target in why and f"{path}:{ref.line}" not in why[target].get(ring, []):
                    why[target].setdefault(ring, []).append(f"{path}:{ref.line}")
    changed = True
    while changed:  # what a loaded re-export module imports eagerly is loaded too, to a fixed point
        changed = False
        for path in why:
            for ring in list(why[path]):
                for ref in tree.files[path].refs:
                    target = tree.modules[ref.target]
                    if ref.eager and target in why and ring not in why[target]:
                        why[target][ring] = [f"{path}:{ref.line}, which {ring} code loads"]
                        changed = True
    return why


def _leaves(tree: Tree, ring_of: Callable[[str], str | None], refs: Iterable[Ref], ring: str,
            forbidden: Callable[[str, str | None], bool], allowed: Iterable[str] = ()) -> list[str]:
    """The files named by ``refs`` (re-export modules left out: checked where they are written;
    the modules in ``allowed`` too) whose ring code of ``ring`` may not load, with their rings."""
    out = []
    for ref in refs:
        if ref.target in allowed:
            continue
        path = tree.modules[ref.target]
        target_ring = ring_of(path)
        if target_ring not in (REEXPORT, None) and forbidden(ring, target_ring):
            out.append(f"{path} [{target_ring}]")
    return sorted(set(out))


def _some(items: Sequence[str], n: int = 3) -> str:
    return ", ".join(items[:n]) + (f" (and {len(items) - n} more)" if len(items) > n else "")


def ring_violations(tree: Tree, ring_of: Callable[[str], str | None], sources: Iterable[str],
                    forbidden: Callable[[str, str | None], bool],
                    allowed_eager: Iterable[tuple[str, str]] = ALLOWED_EAGER_IMPORTS) -> list[str]:
    """One line per statement through which code of a ring in ``sources`` loads a module whose ring
    ``forbidden(code's ring, module's ring)`` rejects: ``file:line: 'statement' (kind) loads ...``.
    ``allowed_eager``: (re-export file, module) pairs that are not counted."""
    sources = [r for r in (CORE, FRAMEWORK) if r in set(sources)]  # strictest first
    out: list[str] = []
    for path, source in sorted(tree.files.items()):
        ring = ring_of(path)
        if ring in sources:  # a core / framework file: every reference, at any depth
            for line, refs in _lines(source.refs).items():
                bad = _leaves(tree, ring_of, refs, ring, forbidden)
                if bad:
                    out.append(f"{path}:{line}: {refs[0].text!r} ({refs[0].kind}) loads {', '.join(bad)}")
    why = loaders(tree, ring_of)
    for path in sorted(why):  # a re-export module: its eager imports, as the code that loads it may
        allowed = {module for file, module in allowed_eager if file == path}
        for line, refs in _lines(r for r in tree.files[path].refs if r.eager).items():
            for ring in sources:
                bad = _leaves(tree, ring_of, refs, ring, forbidden, allowed)
                if bad and ring in why[path]:
                    out.append(f"{path}:{line}: {refs[0].text!r} ({refs[0].kind}) loads {', '.join(bad)}; "
                               f"{ring} code loads {path}: {_some(why[path][ring])}")
                    break
    return out


def _may_not_import(ring: str, target: str | None) -> bool:
    return target not in MAY_IMPORT[ring]


def _is_surface(ring: str, target: str | None) -> bool:
    return target == SURFACE


_MODULE_PATH = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+(?::\w+)?")


def _constant_table(value: ast.expr | None) -> bool:
    """A lazy table: a dict / tuple / list / set literal whose leaves are all string constants
    (nested literals allowed), or one string that is a module path (``"tinyflow.functions"``)."""
    if isinstance(value, ast.Constant):
        return isinstance(value.value, str) and _MODULE_PATH.fullmatch(value.value) is not None

    def strings(node: ast.expr | None) -> bool:
        if isinstance(node, ast.Constant):
            return isinstance(node.value, str)
        if isinstance(node, ast.Dict):
            return all(k is not None and strings(k) for k in node.keys) and all(strings(v) for v in node.values)
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return all(strings(e) for e in node.elts)
        return False

    return isinstance(value, (ast.Dict, ast.Tuple, ast.List, ast.Set)) and strings(value)


def definitions(source: Source, allowed: Iterable[tuple[str, str]] = ALLOWED_STATEMENTS) -> list[tuple[int, str]]:
    """The module-level statements of a re-export module that define something: (line, what).

    Allowed: imports, docstrings (and other bare strings), ``__all__``, tables (constant literals
    of strings), an alias of an imported name (``device = Device``) or a tuple of them (kernels'
    ``FAMILIES``), ``del``, ``pass``, the
    ``__getattr__`` / ``__dir__`` of the seam, if / try blocks of those, and the (file,
    statement) pairs of ``allowed``.
    """
    module_level = list(_statements_of(source.tree.body))
    imported = {alias.asname or alias.name.split(".")[0]
                for node in module_level if isinstance(node, (ast.Import, ast.ImportFrom)) for alias in node.names}
    exceptions = {ast.unparse(ast.parse(text)) for (path, text) in allowed if path == source.path}
    found: list[tuple[int, str]] = []
    for stmt in module_level:
        if isinstance(stmt, (ast.Import, ast.ImportFrom, ast.Pass, ast.Delete, ast.If, ast.Try)):
            continue  # an if / try block: its statements are checked one by one
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
            continue
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name in ("__getattr__", "__dir__"):
            continue
        if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            if len(names) == len(targets) and (
                    names == ["__all__"] or _constant_table(stmt.value)
                    or (isinstance(stmt.value, ast.Name) and stmt.value.id in imported)
                    or (isinstance(stmt.value, (ast.Tuple, ast.List))  # a tuple of imported names
                        and all(isinstance(e, ast.Name) and e.id in imported for e in stmt.value.elts))):
                continue
        if ast.unparse(stmt) in exceptions:
            continue
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            what = f"{'class' if isinstance(stmt, ast.ClassDef) else 'def'} {stmt.name}"
        else:
            what = _one_line(source.segment(stmt), 90)
        found.append((stmt.lineno, what))
    return found


def _statements_of(body: list[ast.stmt]) -> Iterable[ast.stmt]:
    """The statements of a module body, and those inside its if / try blocks (module level too)."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, (ast.If, ast.Try)):
            yield from _statements_of([*stmt.body, *stmt.orelse, *getattr(stmt, "finalbody", []),
                                       *[s for h in getattr(stmt, "handlers", []) for s in h.body]])


def circles(tree: Tree) -> list[list[str]]:
    """The strongly connected components of more than one file of the import graph, as sorted file
    paths, largest first. Its edges are the imports at any depth, the import_module strings and the
    attribute chains through a module (code that runs); not the other strings, which name a module
    (a lazy table's entry, ``python -m tinyflow.cli``) without running it."""
    graph = {path: {tree.modules[r.target] for r in s.refs if r.kind != "string"} for path, s in tree.files.items()}
    components = [c for c in cs.strongly_connected(graph) if len(c) > 1]
    return sorted(components, key=lambda c: (-len(c), c))


def circle_violations(tree: Tree, ring_of: Callable[[str], str | None], anchor: str, max_files: int) -> list[str]:
    """Every circle other than the anchor's, the anchor's if too large or not all core."""
    out = []
    for component in circles(tree):
        lines = sum(tree.files[p].lines for p in component)
        members = ", ".join(f"{p} [{ring_of(p)}]" for p in component)
        if anchor not in component:
            out.append(f"a circle of {len(component)} files ({lines:,} lines) besides {anchor}'s: {members}")
            continue
        not_core = [p for p in component if ring_of(p) != CORE]
        if len(component) > max_files or not_core:
            why = [f"{len(component)} files, at most {max_files}"] if len(component) > max_files else []
            why += [f"not core: {', '.join(not_core)}"] if not_core else []
            out.append(f"{anchor}'s circle ({lines:,} lines): {'; '.join(why)}. Members: {members}")
    return out


def _fail(title: str, violations: list[str]) -> None:
    if violations:
        pytest.fail(f"{title} ({len(violations)}):\n  " + "\n  ".join(violations), pytrace=False)


# ============================================================================ the tests on tinyflow

ring_of = ring_classifier(RINGS)


def test_every_file_has_a_ring():
    unclassified = sorted(p for p in _repo_tree().files if ring_of(p) is None)
    _fail("files in no ring: add a pattern to RINGS in tests/test_boundaries.py (core, framework, "
          "surface or re-export; see docs/design.md, 'The rings')", unclassified)


def test_core_imports_only_core():
    _fail("core files that import outside the core (file:line: the import, what it loads)",
          ring_violations(_repo_tree(), ring_of, [CORE], _may_not_import))


def test_framework_imports_only_core_and_framework():
    _fail("framework files that import the surface (file:line: the import, what it loads)",
          ring_violations(_repo_tree(), ring_of, [FRAMEWORK], _may_not_import))


def test_nothing_in_core_or_framework_imports_the_surface():
    _fail("core and framework files that import the surface (file:line: the import, what it loads)",
          ring_violations(_repo_tree(), ring_of, [CORE, FRAMEWORK], _is_surface))


def test_reexport_modules_define_nothing():
    tree = _repo_tree()
    out = []
    for path, source in sorted(tree.files.items()):
        if ring_of(path) == REEXPORT:
            found = definitions(source)
            out += [f"{path}:{line}: {what}" for line, what in found[:25]]
            if len(found) > 25:
                out.append(f"{path}: ... and {len(found) - 25} more")
    _fail("re-export modules that define something (move it to a module of its ring and import it; "
          "an exception goes in ALLOWED_STATEMENTS with its reason)", out)


def test_allowed_exceptions_still_exist():
    """An exception that matches nothing any more is removed, so that the lists stay true."""
    tree = _repo_tree()
    stale = []
    for path, text in ALLOWED_STATEMENTS:
        statements = {ast.unparse(s) for s in _statements_of(tree.files[path].tree.body)} if path in tree.files else set()
        if ast.unparse(ast.parse(text)) not in statements:
            stale.append(f"ALLOWED_STATEMENTS: {path}: {text}")
    for path, module in ALLOWED_EAGER_IMPORTS:
        if path not in tree.files or module not in {r.target for r in tree.files[path].refs if r.eager}:
            stale.append(f"ALLOWED_EAGER_IMPORTS: {path} does not import {module} at module level")
    _fail("exceptions that match nothing (remove them)", stale)


def test_one_import_circle_tensor_autograd_core_ops():
    _fail("import circles", circle_violations(_repo_tree(), ring_of, CIRCLE_ANCHOR, MAX_CIRCLE_FILES))


def test_core_files_are_short():
    tree = _repo_tree()
    long = []
    for path, source in sorted(tree.files.items()):
        limit = LINE_LIMITS.get(path, MAX_CORE_FILE_LINES if ring_of(path) == CORE else None)
        if limit is not None and source.lines > limit:
            long.append(f"{path}: {source.lines:,} lines, at most {limit:,}")
    _fail("core files over their line limit", long)


# ============================================================================ the checker checked


def _write(root: Path, files: dict[str, str]) -> Tree:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text))
    return scan(root, [("pkg", "pkg")])


# pkg.base is core, pkg.frame framework, pkg.extra* surface; pkg/__init__ gathers lazily.
SYNTHETIC_RINGS = (
    (REEXPORT, "**/__init__.py"),
    (SURFACE, "pkg/extra*.py"),
    (CORE, "pkg/{base,tensor,ops}.py"),
    (FRAMEWORK, "pkg/frame.py"),
)

SYNTHETIC = {
    "pkg/__init__.py": """\
        '''The package.'''
        from pkg.base import thing
        from pkg.frame import Model
        _LAZY = {"Extra": "pkg.extra"}
        __all__ = ["thing", "Extra"]
        def __getattr__(name):
            import importlib
            return getattr(importlib.import_module(_LAZY[name]), name)
        def helper():
            return 1
        """,
    "pkg/base.py": """\
        from typing import TYPE_CHECKING
        import importlib
        import numpy as np
        from . import tensor
        if TYPE_CHECKING:
            from pkg.frame import Model
        def late():
            from pkg import extra
            return extra
        def by_name():
            return importlib.import_module("pkg.extra2")
        def by_dunder():
            return __import__("pkg.extra3")
        """,
    "pkg/tensor.py": """\
        import pkg
        def f():
            from .ops import add
            return pkg.extra4.g()
        """,
    "pkg/ops.py": """\
        from pkg.tensor import f
        TABLE = {"sum": "pkg.extra:total"}
        """,
    "pkg/frame.py": "import pkg.base\n",
    "pkg/extra.py": "from pkg.frame import Model\n",
    "pkg/extra2.py": "",
    "pkg/extra3.py": "",
    "pkg/extra4.py": "from pkg import extra\nimport pkg.extra\n",
    "pkg/sub/__init__.py": "from pkg.extra import total\n",
    "pkg/sub/mod.py": "",
}


@pytest.fixture
def synthetic(tmp_path: Path) -> Tree:
    return _write(tmp_path, SYNTHETIC)


def _refs(tree: Tree, path: str) -> set[tuple[int, str, str, bool]]:
    return {(r.line, r.target, r.kind, r.eager) for r in tree.files[path].refs}


def test_walker_finds_imports_at_every_depth(synthetic):
    assert _refs(synthetic, "pkg/base.py") == {
        (4, "pkg.tensor", "import", True),  # relative, module level (numpy is not in the tree)
        (6, "pkg.frame", "import", False),  # under if TYPE_CHECKING:
        (8, "pkg.extra", "import", False),  # inside a function
        (11, "pkg.extra2", "importlib", False),  # importlib.import_module("...")
        (13, "pkg.extra3", "importlib", False),  # __import__("...")
    }
    assert _refs(synthetic, "pkg/tensor.py") == {
        (1, "pkg", "import", True),
        (3, "pkg.ops", "import", False),  # `from .ops import add` in a function
        (4, "pkg.extra4", "attribute", False),  # pkg.extra4.g(): a module reached through the package
    }
    assert _refs(synthetic, "pkg/ops.py") == {(1, "pkg.tensor", "import", True),
                                              (2, "pkg.extra", "string", False)}  # "module:Name" table value
    assert _refs(synthetic, "pkg/__init__.py") == {(2, "pkg.base", "import", True), (3, "pkg.frame", "import", True),
                                                   (4, "pkg.extra", "string", False)}  # a lazy table's value
    assert synthetic.modules["pkg"] == "pkg/__init__.py" and synthetic.files["pkg/sub/mod.py"].module == "pkg.sub.mod"


def test_rules_catch_violations(synthetic):
    rings = ring_classifier(SYNTHETIC_RINGS)
    core = ring_violations(synthetic, rings, [CORE], _may_not_import)
    assert [v.split(": ", 1)[0] for v in core] == [
        "pkg/base.py:6", "pkg/base.py:8", "pkg/base.py:11", "pkg/base.py:13", "pkg/ops.py:2", "pkg/tensor.py:4",
        "pkg/__init__.py:3"]  # pkg/tensor.py imports pkg, whose __init__ imports pkg/frame.py eagerly
    assert core[0] == "pkg/base.py:6: 'from pkg.frame import Model' (import) loads pkg/frame.py [framework]"
    assert core[5] == "pkg/tensor.py:4: 'pkg.extra4.g' (attribute) loads pkg/extra4.py [surface]"
    assert core[6] == ("pkg/__init__.py:3: 'from pkg.frame import Model' (import) loads pkg/frame.py [framework]; "
                       "core code loads pkg/__init__.py: pkg/tensor.py:1")
    assert ring_violations(synthetic, rings, [FRAMEWORK], _may_not_import) == []  # framework -> core, re-export
    assert ring_violations(synthetic, rings, [CORE, FRAMEWORK], _is_surface) == [
        v for v in core if "[surface]" in v]


def test_rules_follow_reexports_eager_imports_only(tmp_path):
    tree = _write(tmp_path, {
        "pkg/__init__.py": "from pkg.extra import x\n",  # runs before pkg/base.py, which does not name it
        "pkg/base.py": "",
        "pkg/frame.py": "import pkg.sub\n",  # names a re-export module whose eager imports load the surface
        "pkg/extra.py": "",
        "pkg/sub/__init__.py": """\
            from pkg.sub.more import *
            def __getattr__(name):
                from pkg import extra2  # lazily: fine
                return getattr(extra2, name)
            """,
        "pkg/sub/more/__init__.py": "from pkg.extra import y\n",  # loaded through pkg.sub: reported here
    })
    rings = ring_classifier(SYNTHETIC_RINGS)
    assert ring_violations(tree, rings, [CORE], _may_not_import) == []
    assert ring_violations(tree, rings, [FRAMEWORK], _may_not_import) == [
        "pkg/sub/more/__init__.py:1: 'from pkg.extra import y' (import) loads pkg/extra.py [surface]; "
        "framework code loads pkg/sub/more/__init__.py: pkg/sub/__init__.py:1, which framework code loads"]


def test_reexport_rule_catches_definitions(synthetic):
    assert definitions(synthetic.files["pkg/__init__.py"], {}) == [(9, "def helper")]
    allowed = {("pkg/__init__.py", "def helper():\n    return 1"): "a reason"}
    assert definitions(synthetic.files["pkg/__init__.py"], allowed) == []


def test_circles_are_found(synthetic):
    rings = ring_classifier(SYNTHETIC_RINGS)
    # base -> tensor -> pkg/__init__ -> base; ops <-> tensor (a function-level import); base -> frame
    # (TYPE_CHECKING) -> base; base -> extra (in a function) -> frame; tensor -> extra4 (attribute)
    # -> extra. Not extra2 / extra3 (nothing comes back) and not ops -> extra (a string: no edge).
    (component,) = circles(synthetic)
    assert component == ["pkg/__init__.py", "pkg/base.py", "pkg/extra.py", "pkg/extra4.py", "pkg/frame.py",
                         "pkg/ops.py", "pkg/tensor.py"]
    (violation,) = circle_violations(synthetic, rings, "pkg/tensor.py", 3)
    assert "7 files, at most 3" in violation
    assert "not core: pkg/__init__.py, pkg/extra.py, pkg/extra4.py, pkg/frame.py" in violation
    (violation,) = circle_violations(synthetic, rings, "pkg/extra2.py", 99)
    assert violation.startswith("a circle of 7 files")
