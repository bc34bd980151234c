"""``torch.nn.DataParallel`` / ``torch.nn.parallel`` for programs that wrap their model on one
machine: tinyflow runs the wrapped module on its own device (one process drives one device;
data-parallel training over several devices is ``tinyflow.parallel.DataParallel``, one process
per device). The wrapper keeps PyTorch's ``.module`` attribute and ``module.`` state-dict prefix,
so checkpoints and code that unwrap it work unchanged.

``DistributedDataParallel`` is ``torch.nn.parallel.DistributedDataParallel`` for one process (or
thread rank) per replica: it wraps ``tinyflow.parallel.DataParallel`` over the communicator of
``tinyflow.distributed``'s process group, so gradients are averaged over the ranks during
backward (see docs/allreduce.md)."""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any

from tinyflow.nn.modules.module import Module

__all__ = ["DataParallel", "DistributedDataParallel", "data_parallel"]


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


_UNUSED_PARAMETERS = (
    "Expected to have finished reduction in the prior iteration before starting a new one. This error indicates "
    "that your module has parameters that were not used in producing loss. You can enable unused parameter "
    "detection by passing the keyword argument `find_unused_parameters=True` to "
    "`torch.nn.parallel.DistributedDataParallel`, and by making sure all `forward` function outputs participate "
    "in calculating loss."
)


class DistributedDataParallel(Module):
    """``DistributedDataParallel(module, device_ids=None, ..., process_group=None, bucket_cap_mb=None, ...)``.

    Synchronizes ``module``'s gradients over the ranks of ``process_group`` (the default group of
    ``tinyflow.distributed.init_process_group``): at construction every rank checks it holds the
    same parameters and takes rank 0's values (and buffers); during ``loss.backward()`` the
    gradients are all-reduced in buckets of ``bucket_cap_mb`` MB (25 by default) while backward
    runs, so they are averaged over the ranks when backward returns. ``broadcast_buffers`` copies
    rank 0's buffers at each training forward; ``no_sync()`` accumulates gradients locally;
    ``find_unused_parameters=True`` lets parameters that the forward did not use count as zero
    gradients. ``state_dict()`` keys carry the ``module.`` prefix, as PyTorch's.

    tinyflow limits: ``init_sync=False``, ``gradient_as_bucket_view``, ``static_graph`` and
    ``check_reduction`` change nothing (the replicas are always synchronized at construction;
    gradients are copied out of the buckets); ``mixed_precision``, ``device_mesh``,
    ``delay_all_reduce_named_params``, ``param_to_hook_all_reduce`` and ``register_comm_hook``
    are not implemented. Globally unused parameters get a zero gradient instead of None.
    """

    def __init__(self, module: Module, device_ids: Sequence[Any] | None = None, output_device: Any = None,
                 dim: int = 0, broadcast_buffers: bool | None = True, init_sync: bool = True,
                 process_group: Any = None, bucket_cap_mb: float | None = None, find_unused_parameters: bool = False,
                 check_reduction: bool = False, gradient_as_bucket_view: bool = False, static_graph: bool = False,
                 delay_all_reduce_named_params: Any = None, param_to_hook_all_reduce: Any = None,
                 mixed_precision: Any = None, device_mesh: Any = None, skip_all_reduce_unused_params: bool = False,
                 bucket_cap_mb_list: list[int] | None = None, batched_grad_copy: bool = False,
                 forward_sync_buffers: bool | None = None) -> None:
        super().__init__()
        import tinyflow.distributed as dist
        from tinyflow.parallel.data_parallel import DataParallel as _Replicas

        pg = dist._resolve(process_group)  # ValueError "Default process group has not been initialized ..."
        _check_unsupported(mixed_precision=mixed_precision, device_mesh=device_mesh,
                           delay_all_reduce_named_params=delay_all_reduce_named_params,
                           param_to_hook_all_reduce=param_to_hook_all_reduce, bucket_cap_mb_list=bucket_cap_mb_list)
        if device_ids is not None and len(device_ids) > 1:
            raise ValueError("device_ids can only be None or contain a single element.")
        if not any(p.requires_grad for p in module.parameters()):
            raise RuntimeError(
                "DistributedDataParallel is not needed when a module doesn't have any parameter that requires a "
                "gradient."
            )
        cap = 25.0 if bucket_cap_mb is None else float(bucket_cap_mb)
        self.module = module
        self.device_ids = list(device_ids) if device_ids is not None else None
        self.output_device, self.dim = output_device, dim
        self.broadcast_buffers = True if broadcast_buffers is None else bool(broadcast_buffers)
        self.find_unused_parameters = bool(find_unused_parameters)
        self.gradient_as_bucket_view, self.static_graph = bool(gradient_as_bucket_view), bool(static_graph)
        self.bucket_bytes_cap = int(cap * 1024 * 1024)
        replicas = _Replicas(module, pg.comm, bucket_mb=cap, broadcast_buffers=self.broadcast_buffers)
        object.__setattr__(self, "process_group", pg)
        object.__setattr__(self, "_replicas", replicas)  # not a submodule: state_dict stays module.*
        pg._owners.add(self)

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        """Run ``module(*inputs, **kwargs)``; its backward averages the gradients over the ranks."""
        replicas = self._replicas
        if replicas._step_open:
            raise RuntimeError(_UNUSED_PARAMETERS)
        replicas.training = self.training
        output = replicas(*inputs, **kwargs)
        if self.find_unused_parameters and replicas.comm.size > 1:
            self._count_unused_as_zero(output)
        return output

    def no_sync(self) -> AbstractContextManager[None]:
        """Inside this block backward accumulates gradients locally; the first backward after it averages
        the accumulated gradients."""
        return self._replicas.no_sync()

    def synchronize(self) -> None:
        """Finish a step whose backward left some gradients missing (tinyflow.parallel.DataParallel's)."""
        self._replicas.synchronize()

    def close(self) -> None:
        """Stop gradient synchronization (destroy_process_group calls it)."""
        self._replicas.close()

    def register_comm_hook(self, state: Any, hook: Any) -> None:
        """Not implemented in tinyflow: gradients are always averaged by the bucketed all-reduce."""
        raise NotImplementedError(
            "DistributedDataParallel.register_comm_hook is not implemented in tinyflow; for compressed "
            "all-reduce use tinyflow.parallel.DataParallel(model, comm, compression='fp16' or '1bit')"
        )

    def _count_unused_as_zero(self, output: Any) -> None:
        """Find the parameters ``output`` does not depend on; when backward reaches ``output``, hand them
        to the all-reduce with their current gradient (zero if none), as DDP's unused-parameter search."""
        from tinyflow import autograd
        from tinyflow.tensor import Tensor

        roots = [t for t in _tensors_in(output) if isinstance(t, Tensor) and t.requires_grad]
        if not roots or not autograd.is_grad_enabled():
            return
        used: dict[int, int] = {id(t): 1 for t in roots if t._ctx is None}
        autograd.engine._topological_order([t._ctx for t in roots if t._ctx is not None], used)
        unused = [p for p in self.module.parameters() if p.requires_grad and id(p) not in used]
        if not unused:
            return
        started = [False]
        replicas = self._replicas

        def on_backward_start(grad: Any) -> None:
            if started[0]:
                return None
            started[0] = True
            for p in unused:
                if p.grad is None:
                    p.grad = Tensor._from_array(p.array * 0, device=p.device)
                replicas._on_grad_ready(p)
            return None

        for t in roots:
            t.register_hook(on_backward_start)


def _check_unsupported(**options: Any) -> None:
    for name, value in options.items():
        if value is not None:
            raise NotImplementedError(
                f"DistributedDataParallel: {name}= is not implemented in tinyflow; leave it None"
            )


def _tensors_in(value: Any) -> Iterator[Any]:
    """Every object inside nested tuples, lists and dicts (the forward's outputs)."""
    if isinstance(value, (list, tuple)):
        for v in value:
            yield from _tensors_in(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _tensors_in(v)
    else:
        yield value
