"""ParameterList and ParameterDict, the containers of bare parameters: the PyTorch surface. The
module containers (Sequential, ModuleList, ModuleDict) are in container.py."""
from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator
from typing import Any

from tinyflow.nn.modules.module import Module
from tinyflow.nn.parameter import Parameter
from tinyflow.tensor import Tensor

__all__ = ["ParameterList", "ParameterDict"]


def _as_parameter(value: Any) -> Any:
    return value if isinstance(value, Parameter) or not isinstance(value, Tensor) else Parameter(value)


class ParameterList(Module):
    """A list of parameters registered under "0", "1", ... (Tensors become Parameters)."""

    def __init__(self, values: Iterable[Any] | None = None) -> None:
        super().__init__()
        for v in values or []:
            self.append(v)

    def append(self, value: Any) -> ParameterList:
        self.register_parameter(str(len(self)), _as_parameter(value))
        return self

    def extend(self, values: Iterable[Any]) -> ParameterList:
        for v in values:
            self.append(v)
        return self

    def __getitem__(self, idx: int | slice) -> Any:
        items = list(self._parameters.values())
        return ParameterList(items[idx]) if isinstance(idx, slice) else items[idx]

    def __setitem__(self, idx: int, value: Any) -> None:
        key = list(self._parameters.keys())[idx]
        self._parameters[key] = _as_parameter(value)

    def __len__(self) -> int:
        return len(self._parameters)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._parameters.values())

    def __iadd__(self, values: Iterable[Any]) -> ParameterList:
        return self.extend(values)


class ParameterDict(Module):
    """A dict of named parameters (Tensors become Parameters)."""

    def __init__(self, parameters: Any = None) -> None:
        super().__init__()
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key: str) -> Any:
        return self._parameters[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.register_parameter(key, _as_parameter(value))

    def __delitem__(self, key: str) -> None:
        del self._parameters[key]

    def __contains__(self, key: str) -> bool:
        return key in self._parameters

    def __len__(self) -> int:
        return len(self._parameters)

    def __iter__(self) -> Iterator[str]:
        return iter(self._parameters)

    def keys(self) -> Any:
        return self._parameters.keys()

    def values(self) -> Any:
        return self._parameters.values()

    def items(self) -> Any:
        return self._parameters.items()

    def update(self, parameters: Any) -> None:
        """Add (name, parameter) pairs; a plain dict is added in sorted key order, as PyTorch does."""
        if isinstance(parameters, (OrderedDict, ParameterDict)):
            items = list(parameters.items())
        elif hasattr(parameters, "items"):
            items = sorted(parameters.items())
        else:
            items = list(parameters)
        for k, v in items:
            self[k] = v

    def pop(self, key: str) -> Any:
        return self._parameters.pop(key)
