"""Write cupy_api.json: the functions, keyword arguments and ufunc methods the pinned CuPy has.

The strict CuPy stand-in (cuda_tools/strict_cupy) offers exactly what this file lists, so a
CPU test fails where a real GPU would. Regenerate it whenever the CuPy pin moves (CuPy installs
and imports on a machine without a GPU; nothing here touches a device):

    python3.11 -m venv /tmp/cupyenv && /tmp/cupyenv/bin/pip install cupy-cuda13x==14.2.0
    /tmp/cupyenv/bin/python cuda_tools/strict_cupy/generate.py

What is recorded, per module (cupy, cupy.linalg, cupy.random, cupy.fft, cupyx):
- functions: each callable's parameter names and whether it takes ``*args`` / ``**kwargs``
  (from ``inspect.signature``, else the first line of its docstring; ``null`` when neither says);
- ufuncs: ``nin``, ``nout``, the keyword arguments of a call, and which methods (reduce,
  accumulate, reduceat, outer, at) are implemented: an unsupported one raises
  NotImplementedError before it looks at its arguments, so probing with None tells;
- names: everything else (dtypes, constants, classes).
And the ``ndarray`` methods with their parameters, its attributes, and the names under
``cupy.cuda`` and ``cupy.cuda.runtime`` that the stand-in's fakes may use.
"""
from __future__ import annotations

import ast
import inspect
import json
import re
import sys
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent / "cupy_api.json"
MODULES = ("cupy", "cupy.linalg", "cupy.random", "cupy.fft", "cupyx")
UFUNC_METHODS = {"reduce": 1, "accumulate": 1, "reduceat": 2, "outer": 2, "at": 3}
_DOC_SIGNATURE = re.compile(r"^\s*[\w.]*?(\w+)\((.*)\)")


def _from_parameters(params: list[inspect.Parameter]) -> dict[str, Any]:
    names, varargs, varkw = [], False, False
    for p in params:
        if p.kind is p.VAR_POSITIONAL:
            varargs = True
        elif p.kind is p.VAR_KEYWORD:
            varkw = True
        elif p.kind is not p.POSITIONAL_ONLY:
            names.append(p.name)
    return {"params": names, "varargs": varargs, "varkw": varkw}


def _from_docstring(obj: Any) -> dict[str, Any] | None:
    """Parse ``name(a, b=1, *, c=None)`` from the first line of a Cython docstring."""
    doc = (getattr(obj, "__doc__", None) or "").strip().splitlines()
    if not doc:
        return None
    match = _DOC_SIGNATURE.match(doc[0].replace("\\*", "*"))
    if match is None:
        return None
    args = match.group(2)
    try:
        tree = ast.parse(f"def f({args}): pass")
    except SyntaxError:
        return None
    a = tree.body[0].args
    names = [x.arg for x in a.args + a.kwonlyargs if x.arg != "self"]
    return {"params": names, "varargs": a.vararg is not None, "varkw": a.kwarg is not None}


def signature_of(obj: Any) -> dict[str, Any] | None:
    try:
        return _from_parameters(list(inspect.signature(obj).parameters.values()))
    except (TypeError, ValueError):
        return _from_docstring(obj)


def ufunc_entry(u: Any) -> dict[str, Any]:
    methods = ["__call__"]
    for method, nargs in UFUNC_METHODS.items():
        try:
            getattr(u, method)(*([None] * nargs))
        except NotImplementedError:
            continue
        except Exception:  # it got past the "not supported" check and failed on the Nones
            pass
        methods.append(method)
    call = _from_docstring(u) or {"params": [], "varargs": True, "varkw": True}
    return {"nin": int(u.nin), "nout": int(u.nout), "kwargs": [p for p in call["params"]
            if p not in ("x", "x1", "x2", "x3", "y", "y1", "y2")], "methods": methods}


def module_entry(module: Any, ufunc_type: type) -> dict[str, Any]:
    functions, ufuncs, names = {}, {}, []
    for name in sorted(dir(module)):
        if name.startswith("_"):
            continue
        obj = getattr(module, name)
        if isinstance(obj, ufunc_type):
            ufuncs[name] = ufunc_entry(obj)
        elif callable(obj) and not isinstance(obj, type) and not inspect.ismodule(obj):
            functions[name] = signature_of(obj)
        elif not inspect.ismodule(obj):
            names.append(name)
    return {"functions": functions, "ufuncs": ufuncs, "names": names}


def ndarray_entry(ndarray: type) -> dict[str, Any]:
    methods, attributes = {}, []
    for name in sorted(dir(ndarray)):
        if name.startswith("_") and not (name.startswith("__") and name.endswith("__")):
            continue
        obj = getattr(ndarray, name)
        if callable(obj):
            methods[name] = signature_of(obj)
        else:
            attributes.append(name)
    return {"methods": methods, "attributes": attributes}


def main() -> None:
    import importlib

    import cupy

    ufunc_type = type(cupy.add)
    api: dict[str, Any] = {
        "cupy_version": cupy.__version__,
        "regenerate": "python cuda_tools/strict_cupy/generate.py (in a venv with the pinned cupy)",
        "modules": {name: module_entry(importlib.import_module(name), ufunc_type) for name in MODULES},
        "ndarray": ndarray_entry(cupy.ndarray),
        "cuda": sorted(n for n in dir(cupy.cuda) if not n.startswith("_")),
        "cuda.runtime": sorted(n for n in dir(cupy.cuda.runtime) if not n.startswith("_")),
    }
    OUT.write_text(json.dumps(api, indent=1, sort_keys=True) + "\n")
    counts = {name: len(entry["functions"]) + len(entry["ufuncs"]) for name, entry in api["modules"].items()}
    print(f"wrote {OUT} for CuPy {cupy.__version__}: {counts}", file=sys.stderr)


if __name__ == "__main__":
    main()
