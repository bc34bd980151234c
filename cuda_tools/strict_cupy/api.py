"""CuPy's API as recorded in cupy_api.json (generate.py writes it from the pinned CuPy)."""
from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

API_FILE = Path(__file__).resolve().parent / "cupy_api.json"


class CupyAPIError(TypeError):
    """A call the pinned CuPy does not have: a missing function, keyword argument or ufunc method."""


class API:
    """What one CuPy version offers: per module its functions (with parameters), ufuncs (with
    keyword arguments and methods) and other names; the ndarray's methods and attributes."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.version: str = data["cupy_version"]
        self.modules: dict[str, dict[str, Any]] = data["modules"]
        self.ndarray_methods: dict[str, Any] = data["ndarray"]["methods"]
        self.ndarray_attributes: list[str] = data["ndarray"]["attributes"]
        self.cuda: list[str] = data["cuda"]
        self.cuda_runtime: list[str] = data["cuda.runtime"]

    def has(self, module: str, name: str) -> bool:
        entry = self.modules[module]
        return name in entry["functions"] or name in entry["ufuncs"] or name in entry["names"]

    def check_kwargs(self, what: str, params: dict[str, Any] | None, kwargs: dict[str, Any]) -> None:
        """Raise CupyAPIError for a keyword argument that CuPy's ``what`` does not take."""
        if params is None or params["varkw"]:
            return
        unknown = [k for k in kwargs if k not in params["params"]]
        if unknown:
            raise CupyAPIError(
                f"{what}() got an unexpected keyword argument {unknown[0]!r}: CuPy {self.version} "
                f"takes ({', '.join(params['params'])}) (strict CuPy stand-in; see "
                "cuda_tools/strict_cupy/cupy_api.json)")


@functools.cache
def api() -> API:
    return API(json.loads(API_FILE.read_text()))
