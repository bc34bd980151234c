"""The Optimizer base class: parameter groups, per-parameter state, zero_grad and state dicts.

Follows ``torch.optim.Optimizer``: ``param_groups`` is a list of dicts (``"params"`` plus the
hyper-parameters), ``state`` maps each parameter to a dict of its buffers, and ``state_dict()``
has PyTorch's layout, so that checkpoints move between the two.

float16 and bfloat16 parameters are updated in float32 (float32 buffers, a float32 master weight),
so that updates far below the parameter's resolution (bfloat16: 1 + 2**-9 rounds to 1) accumulate.
The master weight is kept as ``param + state["master_residual"]``, the float32 remainder rounding
dropped: the sum rebuilds it exactly, and an edit of the parameter outside the optimizer
(``load_state_dict``, a broadcast, an EMA) is taken up instead of overwritten by a stale copy.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Union

import numpy as np

from tinyflow.autograd.grad_mode import enable_grad
from tinyflow.capture import state as capture_state
from tinyflow.device import array_module, device_of, move
from tinyflow.dtypes import is_floating, is_half
from tinyflow.tensor import Tensor

ParamsT = Union[Iterable[Tensor], Iterable[dict[str, Any]]]


def _is_half(param: Tensor) -> bool:
    """float16 or bfloat16 (the itemsize test first: it is asked per parameter per step)."""
    dtype = param.array.dtype
    return dtype.itemsize == 2 and is_half(dtype)


class _Required:
    """Marks a hyper-parameter that has no default (``lr`` of SGD)."""

    def __repr__(self) -> str:
        return "<required parameter>"


required = _Required()


class Optimizer:
    """Base class: holds ``param_groups`` and ``state``; subclasses implement ``step``.

    Inside a CUDA graph capture (``tinyflow.capture.state.capture`` is not None) only optimizers
    with ``_capturable = True`` (SGD, Adam, AdamW) step: through the multi-tensor kernels, which
    read what changes from step to step (lr, Adam's step count, ...) from a slot of the capture.
    Their states must exist by then (one eager step first), or creating them would be replayed.
    """

    _capturable = False  # whether step() can run inside a CUDA graph capture

    def __init__(self, params: ParamsT, defaults: dict[str, Any]) -> None:
        self.defaults = defaults
        # parameter -> its buffers; Tensors hash by identity, so they key a dict as in PyTorch
        self.state: defaultdict[Tensor, dict[str, Any]] = defaultdict(dict)
        self.param_groups: list[dict[str, Any]] = []
        if isinstance(params, Tensor):
            raise TypeError(f"{type(self).__name__}: params must be an iterable of Tensors or of dicts, got a "
                            "single Tensor; pass [tensor] or model.parameters()")
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError(f"{type(self).__name__} got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for group in param_groups:
            self.add_param_group(group)

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group of parameters with its own hyper-parameters (missing ones take defaults)."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, got {type(param_group).__name__}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            param_group["params"] = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters must be an ordered collection (list); sets change order "
                            "between runs, so state_dict indices would not match")
        else:
            param_group["params"] = list(params)
        for i, p in enumerate(param_group["params"]):
            if not isinstance(p, Tensor):
                raise TypeError(f"{type(self).__name__} can only optimize Tensors, but parameter {i} of the "
                                f"group is a {type(p).__name__}")
            if getattr(p, "grad_fn", None) is not None:
                raise ValueError(f"{type(self).__name__} can't optimize a non-leaf Tensor (parameter {i} of "
                                 f"the group, shape {tuple(p.shape)}); use a Parameter or x.detach()")
        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError(f"parameter group didn't specify a value of required optimization parameter {name!r}")
            param_group.setdefault(name, default)
        seen = {id(p) for group in self.param_groups for p in group["params"]}
        if len({id(p) for p in param_group["params"]}) != len(param_group["params"]):
            raise ValueError("a parameter appears more than once in one parameter group")
        if any(id(p) in seen for p in param_group["params"]):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset every parameter's gradient: to None (default, frees memory) or to zeros."""
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    p.grad.array.fill(0)

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Update the parameters from their ``.grad``; returns the closure's loss if given."""
        raise NotImplementedError

    @staticmethod
    def _run_closure(closure: Callable[[], Any] | None) -> Any:
        if closure is None:
            return None
        with enable_grad():
            return closure()

    # ------------------------------------------------------------------ state dicts
    def state_dict(self) -> dict[str, Any]:
        """The optimizer state in PyTorch's layout ``{"state": {index: {...}}, "param_groups":
        [{..., "params": [index]}]}``, the buffers by reference as PyTorch returns them."""
        index_of: dict[int, int] = {}
        packed_groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            for p in group["params"]:
                index_of.setdefault(id(p), len(index_of))
            packed["params"] = [index_of[id(p)] for p in group["params"]]
            packed_groups.append(packed)
        packed_state = {index_of[id(p)]: s for p, s in self.state.items() if id(p) in index_of}
        return {"state": packed_state, "param_groups": packed_groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a ``state_dict()`` (ours or PyTorch's): hyper-parameters and copied buffers."""
        if not isinstance(state_dict, dict) or not {"state", "param_groups"} <= set(state_dict):
            raise ValueError("optimizer state_dict must be a dict with 'state' and 'param_groups' keys, got "
                             f"{type(state_dict).__name__} with keys "
                             f"{sorted(map(str, state_dict)) if isinstance(state_dict, dict) else '-'}")
        groups = self.param_groups
        saved_groups = state_dict["param_groups"]
        if len(groups) != len(saved_groups):
            raise ValueError(f"loaded state dict has {len(saved_groups)} parameter groups, this "
                             f"{type(self).__name__} has {len(groups)}")
        for i, (g, s) in enumerate(zip(groups, saved_groups)):
            if len(g["params"]) != len(s["params"]):
                raise ValueError(f"loaded state dict's parameter group {i} has {len(s['params'])} parameters, "
                                 f"this {type(self).__name__}'s group {i} has {len(g['params'])}: the "
                                 "checkpoint is from another model or another optimizer setup")
        id_map: dict[Any, Tensor] = {}
        for g, s in zip(groups, saved_groups):
            for p, key in zip(g["params"], s["params"]):
                id_map[key] = p

        new_state: defaultdict[Tensor, dict[str, Any]] = defaultdict(dict)
        for key, value in state_dict["state"].items():
            if key not in id_map:
                # a JSON round trip elsewhere may have turned int indices into strings
                key = int(key) if isinstance(key, str) and key.isdigit() else key
            if key not in id_map:
                continue
            param = id_map[key]
            new_state[param] = {k: self._cast_state_value(param, k, v) for k, v in value.items()}
        self.state = new_state

        new_groups = []
        for g, s in zip(groups, saved_groups):
            new_group = {k: v for k, v in s.items() if k != "params"}
            if "betas" in new_group and isinstance(new_group["betas"], list):
                new_group["betas"] = tuple(new_group["betas"])
            new_group["params"] = g["params"]
            new_groups.append(new_group)
        self.param_groups = new_groups

    @staticmethod
    def _cast_state_value(param: Tensor, key: str, value: Any) -> Any:
        """Copy one saved state value onto ``param``'s device (and float dtype for buffers)."""
        if value is None or isinstance(value, (bool, str)):
            return value
        if key == "step":
            return int(float(np.asarray(value.array if isinstance(value, Tensor) else value)))
        if isinstance(value, (int, float)):
            return value
        arr = value.array if isinstance(value, Tensor) else value
        if not (isinstance(arr, np.ndarray) or hasattr(arr, "__cuda_array_interface__")):
            arr = np.asarray(arr)  # e.g. a torch CPU tensor or nested lists
        target = param.array
        dtype = Optimizer._state_dtype(param)
        if is_floating(arr.dtype) and arr.dtype != dtype:
            arr = arr.astype(dtype)
        arr = move(arr, device_of(target))
        return arr.copy()

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for k in sorted(group):
                if k != "params":
                    lines.append(f"    {k}: {group[k]}")
        lines.append(")")
        return "\n".join(lines)

    # ------------------------------------------------------------------ half-precision params
    @staticmethod
    def _state_dtype(param: Tensor) -> np.dtype:
        """The dtype of ``param``'s buffers: float32 for a float16/bfloat16 param, else its own."""
        return np.dtype(np.float32) if _is_half(param) else param.dtype

    def _master_weight(self, param: Tensor) -> Any:
        """The array a step updates in place: ``param.array`` itself, or for a float16/bfloat16
        param a fresh float32 master weight (``param + state["master_residual"]``, exact)."""
        if not _is_half(param):
            return param.array
        master = param.array.astype(np.float32)
        residual = self.state[param].get("master_residual")
        if residual is not None:
            master += residual
        return master

    def _write_back(self, param: Tensor, master: Any) -> None:
        """Round the updated float32 ``master`` into ``param`` and keep what rounding dropped."""
        if master is param.array:
            return
        param.array[...] = master  # round to nearest even
        state = self.state[param]
        xp = array_module(master)
        if state.get("master_residual") is None:
            state["master_residual"] = xp.empty_like(master)
        xp.subtract(master, param.array.astype(np.float32), out=state["master_residual"])

    @staticmethod
    def _master_grad(param: Tensor, grad: Any) -> Any:
        """``grad`` as the master weight's update needs it: float32 for a float16/bfloat16 param."""
        return grad.astype(np.float32) if _is_half(param) else grad

    def _gradients(self, group: dict[str, Any], raw: bool = False) -> Iterator[tuple[Tensor, Any]]:
        """(param, grad) for each parameter of ``group`` that has a gradient: the raw grad array
        checked against the parameter's shape, in float32 for a half-precision parameter, and
        negated where the group maximizes (with ``raw=True`` only checked: the multi-tensor kernels
        cast and negate it themselves). What every optimizer's step starts from."""
        index = 0  # the parameter's position over all groups, for the error message
        for other in self.param_groups:
            if other is group:
                break
            index += len(other["params"])
        name = type(self).__name__
        self._refuse_capture()
        for k, p in enumerate(group["params"]):
            if p.grad is None:
                continue
            grad = self._check_grad(p, index + k, name)
            if raw:
                yield p, grad
                continue
            grad = self._master_grad(p, grad)
            yield p, (-grad if group.get("maximize") else grad)

    @staticmethod
    def _check_grad(param: Tensor, index: int, name: str) -> Any:
        """The raw grad array of ``param``, checked to match its shape."""
        grad = param.grad.array
        if grad.shape != param.array.shape:
            raise ValueError(f"{name}: parameter {index} has shape {tuple(param.array.shape)} but its .grad has "
                             f"shape {tuple(grad.shape)}; gradients must match their parameter")
        return grad

    # ------------------------------------------------------------------ CUDA graph capture, multi-tensor
    def _refuse_capture(self) -> None:
        """Raise (one line) when a step of this optimizer is being captured and cannot be."""
        if capture_state.capture is not None and not self._capturable:
            name = type(self).__name__
            raise RuntimeError(f"{name}.step cannot be captured in a CUDA graph: its per-step values (lr, step "
                               f"counts) are kernel arguments fixed at capture; use SGD, Adam or AdamW with "
                               f"--cuda-graph, or step {name} eagerly")

    def _missing_in_capture(self, param: Tensor, what: str) -> None:
        """Raise when ``param``'s state ``what`` would be created inside a capture (its
        initialisation would be replayed every step): states come from an eager step first."""
        if capture_state.capture is not None:
            name = type(self).__name__
            raise RuntimeError(f"{name}.step: parameter of shape {tuple(param.shape)} has no {what} yet inside a "
                               f"CUDA graph capture (creating it there would replay every step); run an eager "
                               f"step (warm-up) before capturing, with every parameter getting a gradient")

    def _group_index(self, group: dict[str, Any]) -> int:
        return next(i for i, g in enumerate(self.param_groups) if g is group)

    def _check_structure(self, index: int, keys: tuple[str, ...], captured: tuple[Any, ...]) -> dict[str, Any]:
        """Group ``index`` at a replay, checked to keep the settings the captured kernels fixed."""
        group = self.param_groups[index]
        now = tuple(group[k] if k != "momentum" else group[k] != 0 for k in keys)
        if now != captured:
            raise RuntimeError(f"{type(self).__name__}: parameter group {index}'s {dict(zip(keys, now))} changed "
                               f"since its step was captured as a CUDA graph ({dict(zip(keys, captured))}); "
                               "capture the step again")
        return group

    @staticmethod
    def _use_foreach(group: dict[str, Any]) -> bool:
        """Whether ``group`` steps through the multi-tensor kernels: ``foreach=True``, PyTorch's default
        ``foreach=None`` with every parameter on a GPU (on the CPU the per-parameter loop is as fast
        and allocates less), and always inside a CUDA graph capture."""
        if capture_state.capture is not None:
            return True
        foreach = group.get("foreach")
        if foreach is None:
            return all(p.device.type == "cuda" for p in group["params"])
        return bool(foreach)

    def _master_residual(self, param: Tensor) -> Any:
        """The float32 master-weight remainder of a float16/bfloat16 ``param`` (zeros at first),
        or None for a full-precision one: the residual list a multi-tensor kernel takes."""
        if not _is_half(param):
            return None
        state = self.state[param]
        if state.get("master_residual") is None:
            self._missing_in_capture(param, "float32 master-weight residual")
            state["master_residual"] = array_module(param.array).zeros_like(param.array, dtype=np.float32)
        return state["master_residual"]

    @staticmethod
    def _batches(items: Iterable[tuple[Any, ...]], key: Callable[[tuple[Any, ...]], Any]
                 ) -> list[tuple[Any, list[list[Any]]]]:
        """``items`` (tuples) grouped by ``(device, key(item))``, each batch as columns: the lists
        one multi-tensor call takes (a call runs on one device; its twin splits dtypes)."""
        batches: dict[Any, list[tuple[Any, ...]]] = {}
        for item in items:
            device = item[0].device
            batches.setdefault((device.type, device.index, key(item)), []).append(item)
        return [(k[2], [list(col) for col in zip(*rows)]) for k, rows in batches.items()]
