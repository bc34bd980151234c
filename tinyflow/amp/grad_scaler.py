"""Dynamic loss scaling for float16 training: ``tinyflow.amp.GradScaler`` (torch.amp.GradScaler).

See tinyflow/amp/autocast_mode.py for autocast and how the two work together.
"""
from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from tinyflow.amp.autocast_mode import _cuda_available
from tinyflow.device import array_module, kernels_of, to_host
from tinyflow.dtypes import is_half

__all__ = ["GradScaler"]


class GradScaler:
    """Dynamic loss scaling for float16 training (``torch.amp.GradScaler``'s rule).

    ``scale(loss)`` multiplies the loss by the current scale; ``unscale_(optimizer)`` divides
    every gradient by it in place and records whether any is inf/NaN; ``step(optimizer)``
    unscales if needed and runs the optimizer only when all gradients are finite; ``update()``
    halves the scale after an overflow and doubles it after ``growth_interval`` clean steps.
    With ``enabled=False`` every method is a pass-through, so one training loop serves fp32,
    bf16 and fp16. PyTorch's signature: ``GradScaler("cuda", init_scale=...)``; ``"cuda"`` where
    CUDA is not available warns and disables the scaler (no device: it scales on any device).

    As in PyTorch, the scale (float32), the growth tracker (int32) and the step's overflow flag
    (float32) live on the loss's device from the first ``scale()`` on, and ``update()`` adjusts
    them there (the ``amp_update_scale`` kernel): no host read. Eagerly ``step`` reads the flag
    to decide whether to call the optimizer (one host read per step, as before). Inside a CUDA
    graph capture it reads nothing: the optimizer (SGD, Adam, AdamW) gets the flag as
    ``found_inf`` and its kernels skip the update on the device; skipped steps are counted on
    the device too (``skipped_steps`` reads them).
    """

    def __init__(self, device: Any = None, init_scale: float = 2.0**16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000,
                 enabled: bool = True) -> None:
        if isinstance(device, (int, float)) and not isinstance(device, bool):  # GradScaler(1024.0)
            device, init_scale = None, device
        if enabled and device is not None and str(device).startswith("cuda") and not _cuda_available():
            import warnings  # torch.amp.GradScaler("cuda") on a machine without CUDA

            warnings.warn("torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  Disabling.",
                          UserWarning, stacklevel=2)
            enabled = False
        if growth_factor <= 1.0:
            raise ValueError(f"GradScaler: growth_factor must be > 1, got {growth_factor}")
        if not 0.0 < backoff_factor < 1.0:
            raise ValueError(f"GradScaler: backoff_factor must be in (0, 1), got {backoff_factor}")
        if growth_interval < 1:
            raise ValueError(f"GradScaler: growth_interval must be >= 1, got {growth_interval}")
        if init_scale <= 0 or not math.isfinite(init_scale):
            raise ValueError(f"GradScaler: init_scale must be a positive finite number, got {init_scale}")
        self.enabled = enabled
        # host values until the first scale() puts them on a device (then the arrays rule)
        self._scale = float(np.float32(init_scale))
        self._growth_tracker = 0  # clean steps since the last change of scale
        self._scale_array: Any = None  # (1,) float32 on the loss's device
        self._tracker_array: Any = None  # (1,) int32
        self._found_inf_array: Any = None  # (1,) float32: this iteration's overflow flag
        self._skipped_array: Any = None  # (1,) int32: skipped steps inside captured steps
        self.growth_factor = float(growth_factor)
        self.backoff_factor = float(backoff_factor)
        self.growth_interval = int(growth_interval)
        self._unscaled: set[int] = set()  # ids of optimizers unscaled in this iteration
        self._found_inf = False  # eager steps: the flag read on the host
        self._skipped_host = 0

    # ---------------------------------------------------------------- device state
    def _device_state(self, like: Any) -> Any:
        """The (1,) float32 scale array on ``like``'s device, made from the host values once."""
        if self._scale_array is None:
            from tinyflow.capture import state as capture_state

            if capture_state.capture is not None:
                raise RuntimeError("GradScaler: its scale would be created inside a CUDA graph "
                                   "capture (and reset at every replay); run an eager step first")
            xp = array_module(like)
            self._scale_array = xp.full((1,), self._scale, dtype=np.float32)
            self._tracker_array = xp.full((1,), self._growth_tracker, dtype=np.int32)
            self._skipped_array = xp.zeros((1,), dtype=np.int32)
        return self._scale_array

    def _capturing(self) -> bool:
        from tinyflow.capture import state as capture_state

        return capture_state.capture is not None

    def get_scale(self) -> float:
        """The current scale (a host read of the device value, as PyTorch's ``get_scale``)."""
        if not self.enabled:
            return 1.0
        if self._scale_array is None:
            return self._scale
        return float(to_host(self._scale_array, "GradScaler.get_scale")[0])

    def _get_growth_tracker(self) -> int:
        if self._tracker_array is None:
            return self._growth_tracker
        return int(to_host(self._tracker_array, "GradScaler growth tracker")[0])

    @property
    def skipped_steps(self) -> int:
        """Steps skipped after an overflow (those of captured steps read from the device)."""
        if self._skipped_array is None:
            return self._skipped_host
        return self._skipped_host + int(to_host(self._skipped_array, "GradScaler.skipped_steps")[0])

    @skipped_steps.setter
    def skipped_steps(self, value: int) -> None:
        self._skipped_host = int(value)
        if self._skipped_array is not None:
            self._skipped_array[...] = 0

    def scale(self, loss: Any) -> Any:
        """``loss * scale`` in float32 (a Tensor, so backward gives scaled gradients).

        A half-precision loss is cast to float32 first: the scale itself (2**16 by default) is
        beyond float16's range. Gradients that overflow on their way back into float16 ops are
        what the inf/NaN check of ``step`` catches (then the scale backs off). The scale is read
        on the device (a captured step multiplies by this step's scale).
        """
        if not self.enabled:
            return loss
        dtype = getattr(loss, "dtype", None)
        if dtype is not None and is_half(dtype):
            loss = loss.to(np.dtype(np.float32))
        if not hasattr(loss, "array"):
            return loss * self.get_scale()
        from tinyflow.tensor import Tensor

        scale = self._device_state(loss.array).reshape(())  # a 0-d view: the loss keeps its shape
        return loss * Tensor._from_array(scale, loss.device)

    def _grads(self, optimizer: Any) -> Iterator[Any]:
        for group in optimizer.param_groups:
            for p in group["params"]:
                if getattr(p, "grad", None) is not None:
                    yield p.grad

    def unscale_(self, optimizer: Any) -> bool:
        """Divide ``optimizer``'s gradients by the scale, in place; True when any is inf/NaN.

        Gradients are float32 (the master weights' dtype); the multiply by 1/scale is exact for
        the power-of-two scales used here. The overflow flag is kept on the device; eagerly it
        is also read (one host read), inside a CUDA graph capture it is not (False is returned).
        """
        if not self.enabled:
            return False
        if id(optimizer) in self._unscaled:
            raise RuntimeError("GradScaler.unscale_() was already called on this optimizer since "
                               "the last update(); call it once per step")
        grads = [g.array for g in self._grads(optimizer)]
        if grads:
            xp = array_module(grads[0])
            inv = xp.reciprocal(self._device_state(grads[0])).reshape(())  # 0-d float32
            found = (xp.zeros((1,), dtype=np.float32) if self._found_inf_array is None
                     else self._found_inf_array)
            for data in grads:
                data *= inv.astype(data.dtype)
                # one reduction per gradient, OR-ed into the device flag
                found = xp.maximum(found, (~xp.isfinite(data).all()).astype(np.float32))
            self._found_inf_array = found
            if not self._capturing():
                self._found_inf = self._found_inf or bool(to_host(found, "GradScaler found_inf")[0])
        from tinyflow.capture import state as capture_state

        capture = capture_state.capture
        if capture is not None and not self._unscaled:  # a failed capture leaves this step's flags unset
            capture.on_abort.append(self._reset_step)
        self._unscaled.add(id(optimizer))
        return self._found_inf

    def _reset_step(self) -> None:
        """Forget what this step's unscale_ calls recorded (a capture that failed ran none of it)."""
        self._unscaled.clear()
        self._found_inf = False
        self._found_inf_array = None

    def step(self, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
        """Unscale (if not done yet) and run ``optimizer.step()`` unless a gradient overflowed.

        Inside a CUDA graph capture the optimizer always runs, with ``found_inf=`` the device
        flag (its kernels skip the update there); an optimizer without that (any but SGD, Adam
        and AdamW) cannot be captured with a scaler and says so."""
        if not self.enabled:
            return optimizer.step(*args, **kwargs)
        if id(optimizer) not in self._unscaled:
            self.unscale_(optimizer)
        if self._capturing():
            if not getattr(optimizer, "_capturable", False):
                raise RuntimeError(
                    f"GradScaler.step: {type(optimizer).__name__} cannot skip an overflowed step on "
                    "the device, so it cannot be captured in a CUDA graph with a GradScaler; use SGD, "
                    "Adam or AdamW, or train without --cuda-graph")
            found = self._found_inf_array
            if found is None:  # no gradients: nothing overflowed
                return optimizer.step(*args, **kwargs)
            self._skipped_array += (found != 0).astype(np.int32)
            return optimizer.step(*args, found_inf=found, **kwargs)
        if self._found_inf:
            self._skipped_host += 1
            return None
        return optimizer.step(*args, **kwargs)

    def update(self, new_scale: float | None = None) -> None:
        """Adjust the scale for the next iteration (back off after an overflow, grow after
        ``growth_interval`` clean steps) and forget this iteration's unscale state. On the
        device (no host read) once the scale is there."""
        if not self.enabled:
            return
        if new_scale is not None:
            if self._capturing():
                raise RuntimeError("GradScaler.update(new_scale) inside a CUDA graph capture would "
                                   "bake the value into the graph; call it between replays")
            value = float(to_host(new_scale.array, "GradScaler.update") if hasattr(new_scale, "array")
                          else new_scale)
            self._scale, self._growth_tracker = float(np.float32(value)), 0
            if self._scale_array is not None:
                self._scale_array[...] = self._scale
                self._tracker_array[...] = 0
        elif self._scale_array is not None:
            found = self._found_inf_array
            if found is None:  # no gradient was unscaled: a clean step
                found = array_module(self._scale_array).zeros((1,), dtype=np.float32)
            kernels_of(self._scale_array).amp_update_scale(
                self._scale_array, self._tracker_array, found, self.growth_factor,
                self.backoff_factor, self.growth_interval)
        else:  # nothing scaled yet: the host values
            self._host_update(self._found_inf)
        self._found_inf = False
        self._found_inf_array = None
        self._unscaled.clear()

    def _host_update(self, found_inf: bool) -> None:
        """The update rule on the host values (before the scale reaches a device)."""
        if found_inf:
            self._scale = float(np.float32(self._scale * self.backoff_factor))
            self._growth_tracker = 0
            return
        self._growth_tracker += 1
        if self._growth_tracker >= self.growth_interval:
            grown = self._scale * self.growth_factor
            if grown <= np.finfo(np.float32).max:  # else the float32 scale would be inf: keep it
                self._scale = float(np.float32(grown))
            self._growth_tracker = 0

    def state_dict(self) -> dict[str, Any]:
        """The scaler's state, for checkpoints (torch's keys; device values read on the host)."""
        return {
            "scale": self.get_scale() if self.enabled else self._scale,
            "growth_factor": self.growth_factor,
            "backoff_factor": self.backoff_factor,
            "growth_interval": self.growth_interval,
            "_growth_tracker": self._get_growth_tracker(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._scale = float(np.float32(state["scale"]))
        self.growth_factor = float(state["growth_factor"])
        self.backoff_factor = float(state["backoff_factor"])
        self.growth_interval = int(state["growth_interval"])
        self._growth_tracker = int(state["_growth_tracker"])
        if self._scale_array is not None:
            self._scale_array[...] = self._scale
            self._tracker_array[...] = self._growth_tracker

    def __repr__(self) -> str:
        return f"GradScaler(scale={self.get_scale():g}, enabled={self.enabled})"
