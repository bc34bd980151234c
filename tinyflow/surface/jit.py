"""``torch.jit`` for programs that script or trace their model: tinyflow runs Python eagerly.

``script`` and ``trace`` return the module or function itself (``trace`` runs it once on the
example inputs first, so a shape error shows up where PyTorch's tracer would report it), and the
decorators (``ignore``, ``unused``, ``export``) leave what they decorate as it is. A program that
scripts its model for speed therefore runs unchanged, at eager speed.

What TorchScript adds beyond that has no equivalent here: ``save`` and ``load`` of a compiled
program (a file that runs without the model's Python class) raise one clear error that points to
``tinyflow.save(model.state_dict(), path)``, the way to keep a trained model.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["script", "trace", "trace_module", "ignore", "unused", "export", "is_scripting", "is_tracing",
           "annotate", "freeze", "optimize_for_inference", "save", "load", "Final", "ScriptModule",
           "ScriptFunction", "Error"]

T = TypeVar("T")
Final = Any  # torch.jit.Final[int] is a type annotation only
Error = RuntimeError


class ScriptModule:
    """Stands for ``torch.jit.ScriptModule`` in ``isinstance`` checks: no tinyflow object is one."""


class ScriptFunction:
    """Stands for ``torch.jit.ScriptFunction`` in ``isinstance`` checks: no tinyflow object is one."""


def _callable(op: str, obj: Any) -> Any:
    if not callable(obj):
        raise TypeError(f"jit.{op}: expected a Module or a function, got {type(obj).__name__}")
    return obj


def script(obj: Any = None, optimize: Any = None, _frames_up: int = 0, _rcb: Any = None,
           example_inputs: Any = None) -> Any:
    """``torch.jit.script``: the module or function itself (tinyflow does not compile)."""
    if obj is None:  # @torch.jit.script() used with parentheses
        return lambda fn: _callable("script", fn)
    return _callable("script", obj)


def trace(func: Any, example_inputs: Any = None, optimize: Any = None, check_trace: bool = True,
          check_inputs: Any = None, check_tolerance: float = 1e-5, strict: bool = True,
          example_kwarg_inputs: dict[str, Any] | None = None, **kwargs: Any) -> Any:
    """``torch.jit.trace``: runs ``func`` once on ``example_inputs`` (without recording gradients)
    and returns ``func`` itself; later calls run eagerly, so data-dependent control flow keeps
    working (where PyTorch's trace would freeze the branch it saw)."""
    from tinyflow.autograd.grad_mode import no_grad

    _callable("trace", func)
    if example_inputs is None and example_kwarg_inputs is None:
        raise ValueError("jit.trace: give example_inputs (a Tensor or a tuple of them) or example_kwarg_inputs")
    args = () if example_inputs is None else example_inputs if isinstance(example_inputs, tuple) else (example_inputs,)
    with no_grad():
        func(*args, **(example_kwarg_inputs or {}))
    return func


def trace_module(mod: Any, inputs: dict[str, Any], **kwargs: Any) -> Any:
    """``torch.jit.trace_module``: runs each named method once on its example inputs; returns ``mod``."""
    for method, example in inputs.items():
        trace(getattr(mod, method), example)
    return mod


def ignore(drop: Any = False, **kwargs: Any) -> Any:
    """``@torch.jit.ignore`` / ``@torch.jit.ignore(drop=True)``: the function as it is."""
    if callable(drop):
        return drop
    return lambda fn: fn


def unused(fn: Callable[..., T]) -> Callable[..., T]:
    """``@torch.jit.unused``: the function as it is."""
    return fn


def export(fn: Callable[..., T]) -> Callable[..., T]:
    """``@torch.jit.export``: the method as it is."""
    return fn


def is_scripting() -> bool:
    """False: tinyflow code never runs under TorchScript."""
    return False


def is_tracing() -> bool:
    """False: ``trace`` runs the function eagerly."""
    return False


def annotate(the_type: Any, the_value: T) -> T:
    """``torch.jit.annotate(List[int], [])``: the value."""
    return the_value


def freeze(mod: Any, preserved_attrs: Any = None, optimize_numerics: bool = True) -> Any:
    """``torch.jit.freeze``: the module, in eval mode as PyTorch requires of it."""
    if getattr(mod, "training", False):
        raise RuntimeError("jit.freeze: the module is in training mode; call module.eval() first (as in PyTorch)")
    return mod


def optimize_for_inference(mod: Any, other_methods: Any = None) -> Any:
    """``torch.jit.optimize_for_inference``: the module, switched to eval mode."""
    return mod.eval() if hasattr(mod, "eval") else mod


def save(m: Any, f: Any, _extra_files: Any = None) -> None:
    """Not available: a TorchScript archive runs without the model's Python code; tinyflow has none."""
    raise RuntimeError(
        "jit.save: tinyflow has no TorchScript archive; save the weights with "
        "tinyflow.save(model.state_dict(), path) and rebuild the model with its class to load them"
    )


def load(f: Any, map_location: Any = None, _extra_files: Any = None) -> Any:
    """Not available (see ``save``)."""
    raise RuntimeError(
        f"jit.load({f!r}): tinyflow cannot read TorchScript archives; build the model from its class and load "
        "weights saved with tinyflow.save(model.state_dict(), path) via model.load_state_dict(tinyflow.load(path))"
    )
