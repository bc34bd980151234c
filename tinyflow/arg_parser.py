"""Argument spellings PyTorch accepts besides its own: ``axis=`` for ``dim=`` (NumPy's name).

PyTorch's argument parser takes ``axis=`` wherever a function takes ``dim=``; tinyflow wraps such
functions and methods once, at import, with :func:`accept_axis_alias`.
"""
from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

__all__ = ["accept_axis_alias", "takes_dim", "add_axis_alias"]


def accept_axis_alias(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` that also takes ``axis=`` for its ``dim=`` parameter, as PyTorch's functions do."""

    @functools.wraps(fn)
    def with_axis(*args: Any, **kwargs: Any) -> Any:
        if "axis" in kwargs:
            if "dim" in kwargs:
                raise TypeError(f"{fn.__name__}(): give dim or axis, not both")
            kwargs["dim"] = kwargs.pop("axis")
        return fn(*args, **kwargs)

    return with_axis


def takes_dim(fn: Any) -> bool:
    """True for a function with a ``dim`` parameter and no ``axis`` one."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return "dim" in params and "axis" not in params


def add_axis_alias(cls: type) -> None:
    """Wrap every method defined on ``cls`` itself that takes ``dim`` with accept_axis_alias."""
    for name, fn in list(vars(cls).items()):
        if inspect.isfunction(fn) and takes_dim(fn) and not hasattr(fn, "__wrapped__"):
            setattr(cls, name, accept_axis_alias(fn))
