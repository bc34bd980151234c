"""``torch.onnx``'s place: tinyflow has no ONNX exporter.

Programs written for PyTorch often import ``torch.onnx`` at the top (pytorch/examples' word
language model does) and export only when asked to. The import works here; ``export`` says plainly
that there is no exporter and what to do instead.
"""
from __future__ import annotations

from typing import Any

__all__ = ["export", "is_in_onnx_export"]


def export(model: Any, args: Any = (), f: Any = None, *rest: Any, **kwargs: Any) -> None:
    """Refuses: tinyflow cannot write ONNX. Save the weights with ``tinyflow.save(model.state_dict(),
    path)`` and load them into the same architecture in PyTorch to export from there."""
    raise NotImplementedError(
        f"tinyflow.onnx.export: tinyflow has no ONNX exporter (asked to export {type(model).__name__}"
        f"{f' to {f!r}' if isinstance(f, str) else ''}); save model.state_dict() with tinyflow.save, load "
        "it into the same model in PyTorch (names and shapes match) and call torch.onnx.export there")


def is_in_onnx_export() -> bool:
    """Always False: no export is ever running."""
    return False
