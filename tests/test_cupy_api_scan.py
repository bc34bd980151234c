"""Every ``xp.*`` call in the sources against the pinned CuPy's API (issue 20).

Ops are written once against ``xp``, NumPy or CuPy. A NumPy-only function, keyword argument or
ufunc method (``indices(sparse=True)``, ``multiply.at``) passes every CPU test and fails on the
first GPU. This walks the AST of every module in tinyflow/ and tinyflow_cuda/ and checks each
call through an array-module name (``xp``, ``cp``, ``cupy``, ``ctx.xp``, ``self.xp``, ...) against
cuda_tools/strict_cupy/cupy_api.json: the function exists in CuPy's module, its keyword
arguments are CuPy's, and a ufunc method is one CuPy implements.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from cuda_tools.strict_cupy import api

ROOT = Path(__file__).resolve().parents[1]
MODULE_NAMES = {"xp", "cp", "cupy"}  # names an array module goes by in the sources
SUBMODULES = {"linalg": "cupy.linalg", "random": "cupy.random", "fft": "cupy.fft"}


def _module_expr(node: ast.expr) -> bool:
    """``xp``, ``cp``, ``cupy``, or ``<anything>.xp``."""
    return (isinstance(node, ast.Name) and node.id in MODULE_NAMES) or (
        isinstance(node, ast.Attribute) and node.attr == "xp")


def _calls(tree: ast.AST):
    """(line, module, name, method, keywords) of each call ``xp.name(...)``, ``xp.name.method(...)``
    or ``xp.linalg.name(...)``."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        func = node.func
        keywords = [k.arg for k in node.keywords if k.arg is not None]
        if _module_expr(func.value):
            yield node.lineno, "cupy", func.attr, None, keywords
        elif isinstance(func.value, ast.Attribute) and _module_expr(func.value.value):
            inner = func.value.attr
            if inner in SUBMODULES:
                yield node.lineno, SUBMODULES[inner], func.attr, None, keywords
            elif inner != "cuda":  # xp.cuda.* is CuPy's runtime, checked by the stand-in's fakes
                yield node.lineno, "cupy", inner, func.attr, keywords


def _problems(path: Path) -> list[str]:
    cupy = api()
    found = []
    rel = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name
    for line, module, name, method, keywords in _calls(ast.parse(path.read_text(), str(path))):
        entry = cupy.modules[module]
        where = f"{rel}:{line}: {module}.{name}"
        if name in entry["ufuncs"]:
            ufunc = entry["ufuncs"][name]
            if method is not None and method not in ufunc["methods"]:
                found.append(f"{where}.{method}: CuPy {cupy.version} does not implement this ufunc method")
            elif method is None:
                bad = [k for k in keywords if k not in ufunc["kwargs"]]
                if bad:
                    found.append(f"{where}(): CuPy's ufunc takes no keyword {bad[0]!r}")
        elif name in entry["functions"]:
            params = entry["functions"][name]
            if method is None and params is not None and not params["varkw"]:
                bad = [k for k in keywords if k not in params["params"]]
                if bad:
                    found.append(f"{where}(): CuPy's {name} takes no keyword {bad[0]!r} "
                                 f"(it takes {', '.join(params['params'])})")
        elif name not in entry["names"] and name != "ndarray":
            found.append(f"{where}: not in CuPy {cupy.version}")
    return found


def _sources() -> list[Path]:
    """The product's modules (the stand-in itself lives in cuda_tools/, outside them)."""
    return sorted((ROOT / "tinyflow").rglob("*.py")) + sorted((ROOT / "tinyflow_cuda").rglob("*.py"))


def test_every_array_module_call_is_in_cupys_api() -> None:
    problems = [p for path in _sources() for p in _problems(path)]
    assert not problems, "calls CuPy would refuse:\n" + "\n".join(problems)


@pytest.mark.parametrize("source,complaint", [
    ("xp.indices(shape, sparse=True)", "takes no keyword 'sparse'"),
    ("ctx.xp.multiply.at(out, where, s)", "does not implement this ufunc method"),
    ("xp.maximum.reduce(a)", "does not implement this ufunc method"),
    ("self.xp.add(a, b, where=m)", "takes no keyword 'where'"),
    ("cp.busday_count(x)", "not in CuPy"),
])
def test_the_scan_catches_what_cupy_refuses(tmp_path: Path, source: str, complaint: str) -> None:
    bad = tmp_path / "probe.py"
    bad.write_text(f"def f(xp, cp, ctx, self, shape, out, where, s, a, b, m, x):\n    return {source}\n")
    problems = _problems(bad)
    assert len(problems) == 1 and complaint in problems[0], problems


def test_the_api_list_is_the_pinned_cupy() -> None:
    """cupy_api.json is generated from the CuPy the cuda extra installs; regenerate it when the pin
    moves (cuda_tools/strict_cupy/generate.py says how)."""
    tomllib = pytest.importorskip("tomllib")
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    pin = next(req for req in extras["cuda"] if req.startswith("cupy"))
    assert f"=={api().version}" in pin, (pin, api().version)
