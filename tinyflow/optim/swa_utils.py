"""``torch.optim.swa_utils``: Stochastic Weight Averaging and exponential moving averages of a model.

:class:`AveragedModel` keeps a deep copy of a model whose parameters (and, with ``use_buffers``,
buffers) are running averages of the model's; :class:`SWALR` anneals the learning rate to a fixed
SWA value; :func:`update_bn` recomputes BatchNorm statistics for the averaged weights. The update
formulas are PyTorch's CPU ones (``avg + (cur - avg) / (n + 1)`` for SWA, lerp for the multi-tensor
EMA), so averages match ``torch.optim.swa_utils`` float for float.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Sequence
from copy import deepcopy
from typing import Any

from tinyflow.autograd.grad_mode import no_grad
from tinyflow.dtypes import is_floating
from tinyflow.nn.modules.batchnorm import _BatchNorm
from tinyflow.nn.modules.module import Module
from tinyflow.optim.lr_scheduler import LRScheduler
from tinyflow.optim.optimizer import Optimizer
from tinyflow.tensor import Tensor, tensor

__all__ = ["AveragedModel", "update_bn", "SWALR", "get_ema_multi_avg_fn", "get_swa_multi_avg_fn",
           "get_ema_avg_fn", "get_swa_avg_fn"]

ParamList = Sequence[Tensor]


def _is_float(t: Tensor) -> bool:
    return is_floating(t.dtype) or t.is_complex()


def _check_decay(decay: float) -> None:
    if decay < 0.0 or decay > 1.0:
        raise ValueError(f"Invalid decay value {decay} provided. Please provide a value in [0,1] range.")


def get_ema_multi_avg_fn(decay: float = 0.999) -> Callable[[ParamList, ParamList, Any], None]:
    """The in-place multi-tensor EMA update ``ema = decay * ema + (1 - decay) * current`` (a lerp
    with weight ``1 - decay`` for floating tensors), for ``AveragedModel(multi_avg_fn=...)``."""
    _check_decay(decay)

    @no_grad()
    def ema_update(ema_param_list: ParamList, current_param_list: ParamList, _: Any) -> None:
        if _is_float(ema_param_list[0]):
            for p_ema, p_model in zip(ema_param_list, current_param_list):
                p_ema.lerp_(p_model, 1 - decay)
        else:
            for p_ema, p_model in zip(ema_param_list, current_param_list):
                p_ema.copy_(p_ema * decay + p_model * (1 - decay))

    return ema_update


def get_swa_multi_avg_fn() -> Callable[[ParamList, ParamList, Any], None]:
    """The in-place multi-tensor equal-weight average ``avg += (current - avg) / (n + 1)`` (a lerp
    with weight ``1 / (n + 1)`` for floating tensors), for ``AveragedModel(multi_avg_fn=...)``."""

    @no_grad()
    def swa_update(averaged_param_list: ParamList, current_param_list: ParamList, num_averaged: Tensor | int) -> None:
        n = int(num_averaged.item()) if isinstance(num_averaged, Tensor) else int(num_averaged)
        if _is_float(averaged_param_list[0]):
            for p_avg, p_model in zip(averaged_param_list, current_param_list):
                p_avg.lerp_(p_model, 1 / (n + 1))
        else:
            for p_avg, p_model in zip(averaged_param_list, current_param_list):
                p_avg.copy_(p_avg + (p_model - p_avg) / (n + 1))

    return swa_update


def get_ema_avg_fn(decay: float = 0.999) -> Callable[[Tensor, Tensor, Any], Tensor]:
    """The single-tensor EMA ``decay * ema + (1 - decay) * current`` (returned, not in place), for
    ``AveragedModel(avg_fn=...)``."""
    _check_decay(decay)

    @no_grad()
    def ema_update(ema_param: Tensor, current_param: Tensor, num_averaged: Any) -> Tensor:
        return decay * ema_param + (1 - decay) * current_param

    return ema_update


def get_swa_avg_fn() -> Callable[[Tensor, Tensor, Any], Tensor]:
    """The single-tensor equal-weight average ``avg + (current - avg) / (n + 1)`` (returned), for
    ``AveragedModel(avg_fn=...)``."""

    @no_grad()
    def swa_update(averaged_param: Tensor, current_param: Tensor, num_averaged: Tensor | int) -> Tensor:
        return averaged_param + (current_param - averaged_param) / (num_averaged + 1)

    return swa_update


class AveragedModel(Module):
    """A deep copy of ``model`` (moved to ``device`` if given) whose parameters are running averages
    of ``model``'s, updated by :meth:`update_parameters`: equal weights (SWA) by default, or
    ``avg_fn(avg, current, n_averaged)`` (returns the new value) or ``multi_avg_fn(avgs, currents,
    n_averaged)`` (updates in place); with ``use_buffers`` the buffers are averaged too, otherwise
    copied. ``forward`` calls the copy; the state dict holds ``module.<name>`` and ``n_averaged``.
    The first update copies the model's values."""

    def __init__(self, model: Module, device: Any = None,
                 avg_fn: Callable[[Tensor, Tensor, Tensor | int], Tensor] | None = None,
                 multi_avg_fn: Callable[[ParamList, ParamList, Tensor | int], None] | None = None,
                 use_buffers: bool = False) -> None:
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise AssertionError("Only one of avg_fn and multi_avg_fn should be provided")
        self.module = deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", tensor(0, dtype="int64", device=device))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """The averaged copy's forward."""
        return self.module(*args, **kwargs)

    def _pairs(self, model: Module) -> list[tuple[Tensor, Tensor]]:
        """(averaged, current) detached tensor pairs, the current ones moved to the averaged device."""
        if self.use_buffers:
            mine = itertools.chain(self.module.parameters(), self.module.buffers())
            theirs = itertools.chain(model.parameters(), model.buffers())
        else:
            mine, theirs = self.parameters(), model.parameters()
        return [(a.detach(), m.detach().to(a.device)) for a, m in zip(mine, theirs)]

    @no_grad()
    def update_parameters(self, model: Module) -> None:
        """Fold ``model``'s current parameters (and buffers with ``use_buffers``) into the averages;
        without ``use_buffers`` the buffers are copied from ``model``. Increments ``n_averaged``."""
        pairs = self._pairs(model)
        n = int(self.n_averaged.item())
        if n == 0:
            for p_avg, p_model in pairs:
                p_avg.copy_(p_model)
        else:
            self._average(pairs)
        if not self.use_buffers:
            for b_swa, b_model in zip(self.module.buffers(), model.buffers()):
                b_swa.detach().copy_(b_model.detach().to(b_swa.device))
        self.n_averaged.add_(1)

    def _average(self, pairs: list[tuple[Tensor, Tensor]]) -> None:
        if self.multi_avg_fn is not None:
            groups: dict[tuple[str, str], list[tuple[Tensor, Tensor]]] = {}
            for p_avg, p_model in pairs:  # grouped by device and dtype, as PyTorch
                groups.setdefault((str(p_avg.device), str(p_avg.dtype)), []).append((p_avg, p_model))
            for group in groups.values():
                n_averaged = self.n_averaged.to(group[0][0].device)
                self.multi_avg_fn([a for a, _ in group], [m for _, m in group], n_averaged)
            return
        avg_fn = self.avg_fn if self.avg_fn is not None else get_swa_avg_fn()
        for p_avg, p_model in pairs:
            p_avg.copy_(avg_fn(p_avg, p_model, self.n_averaged.to(p_avg.device)))


@no_grad()
def update_bn(loader: Iterable[Any], model: Module, device: Any = None) -> None:
    """Recompute the running mean and variance of every BatchNorm layer of ``model`` with one pass
    over ``loader`` (batches are tensors, or lists/tuples whose first item is the input): the
    statistics are reset and averaged cumulatively over the batches (``momentum=None``), then
    each layer's momentum and the model's training mode are restored."""
    momenta: dict[_BatchNorm, float | None] = {}
    for module in model.modules():
        if isinstance(module, _BatchNorm):
            module.reset_running_stats()
            momenta[module] = module.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for module in momenta:
        module.momentum = None
    try:
        for batch in loader:
            if isinstance(batch, (list, tuple)):
                batch = batch[0]
            if device is not None:
                batch = batch.to(device)
            model(batch)
    finally:
        for module, momentum in momenta.items():
            module.momentum = momentum
        model.train(was_training)


class SWALR(LRScheduler):
    """Anneal each group's learning rate from its current value to ``swa_lr`` (one value, or one per
    group) over ``anneal_epochs`` epochs, by cosine (``"cos"``) or linear (``"linear"``)
    interpolation, then keep it there."""

    def __init__(self, optimizer: Optimizer, swa_lr: float | Sequence[float], anneal_epochs: int = 10,
                 anneal_strategy: str = "cos", last_epoch: int = -1) -> None:
        swa_lrs = self._format_swa_lr(optimizer, swa_lr)
        for value, group in zip(swa_lrs, optimizer.param_groups):
            group["swa_lr"] = value
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}")
        self._set_anneal_func(anneal_strategy)
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got {anneal_epochs}")
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    @staticmethod
    def _format_swa_lr(optimizer: Optimizer, swa_lr: Any) -> list[float]:
        if isinstance(swa_lr, (list, tuple)):
            if len(swa_lr) != len(optimizer.param_groups):
                raise ValueError(f"swa_lr must have the same length as optimizer.param_groups. swa_lr has "
                                 f"{len(swa_lr)} values, param_groups has {len(optimizer.param_groups)}.")
            return list(swa_lr)
        return [swa_lr] * len(optimizer.param_groups)

    @staticmethod
    def _linear_anneal(t: float) -> float:
        return t

    @staticmethod
    def _cosine_anneal(t: float) -> float:
        return (1 - math.cos(math.pi * t)) / 2

    @staticmethod
    def _get_initial_lr(lr: float, swa_lr: float, alpha: float) -> float:
        if alpha == 1:
            return swa_lr
        return (lr - alpha * swa_lr) / (1 - alpha)

    def _set_anneal_func(self, anneal_strategy: str) -> None:
        self._anneal_strategy = anneal_strategy
        self.anneal_func = self._cosine_anneal if anneal_strategy == "cos" else self._linear_anneal

    def get_lr(self) -> list[float]:
        """Interpolate between each group's lr (recovered from the previous step's mix) and its
        ``swa_lr`` by the annealing function of ``step / anneal_epochs`` (PyTorch's recursion)."""
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        prev_t = max(0, min(1, (step - 1) / max(1, self.anneal_epochs)))
        prev_alpha = self.anneal_func(prev_t)
        groups = self.optimizer.param_groups
        prev_lrs = [self._get_initial_lr(group["lr"], group["swa_lr"], prev_alpha) for group in groups]
        t = max(0, min(1, step / max(1, self.anneal_epochs)))
        alpha = self.anneal_func(t)
        return [group["swa_lr"] * alpha + lr * (1 - alpha) for group, lr in zip(groups, prev_lrs)]

    def state_dict(self) -> dict[str, Any]:
        """Every attribute except the optimizer and the annealing function (as PyTorch)."""
        return {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "anneal_func")}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore the attributes saved by ``state_dict()``."""
        self.__dict__.update(state_dict)
        self._set_anneal_func(self._anneal_strategy)
