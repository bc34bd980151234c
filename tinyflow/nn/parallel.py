"""``torch.nn.DataParallel`` / ``torch.nn.parallel`` for programs that wrap their model on one
machine: tinyflow runs the wrapped module on its own device (one process drives one device;
data-parallel training over several devices is ``tinyflow.parallel.DataParallel``, one process
per device). The wrapper keeps PyTorch's ``.module`` attribute and ``module.`` state-dict prefix,
so checkpoints and code that unwrap it work unchanged."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tinyflow.nn.module import Module

__all__ = ["DataParallel", "data_parallel"]


class DataParallel(Module):
    """``DataParallel(module, device_ids=None, output_device=None, dim=0)``: calls ``module``."""

    def __init__(self, module: Module, device_ids: Sequence[Any] | None = None, output_device: Any = None,
                 dim: int = 0) -> None:
        super().__init__()
        self.module = module
        self.device_ids = list(device_ids) if device_ids is not None else []
        self.output_device, self.dim = output_device, dim

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        return self.module(*inputs, **kwargs)


def data_parallel(module: Module, inputs: Any, device_ids: Sequence[Any] | None = None, output_device: Any = None,
                  dim: int = 0, module_kwargs: dict | None = None) -> Any:
    """``torch.nn.parallel.data_parallel``: ``module(*inputs)`` on its own device."""
    inputs = inputs if isinstance(inputs, tuple) else (inputs,)
    return module(*inputs, **(module_kwargs or {}))
