"""``torch.distributed`` over tinyflow's communicators (tinyflow/parallel/).

A PyTorch data-parallel script runs unchanged with ``import tinyflow as torch``::

    import tinyflow.distributed as dist
    dist.init_process_group("gloo")          # under mpirun: the MPI world; alone: one rank
    model = torch.nn.parallel.DistributedDataParallel(model)
    dist.all_reduce(loss_sum)                # in place, every rank gets the sum

``init_process_group`` takes the communicator from how the program was started, never from a
rendezvous: under ``mpirun`` / ``tinyflow launch --nproc N`` the MPI world (``world().comm``);
in a thread rank of ``run_local`` that called ``tinyflow.parallel.set_world(comm)`` that
communicator; with no launcher and a world size of 1 a trivial single-rank group. torchrun's
``MASTER_ADDR`` / ``tcp://`` rendezvous is not implemented: such a start is an error saying how
to launch instead. The default group lives per process, or per thread for thread ranks.

Collectives run when called (tinyflow's all-reduce algorithms are blocking), so ``async_op=True``
returns a ``Work`` that is already complete. ``ReduceOp.SUM`` / ``AVG`` use the ring all-reduce;
``PRODUCT``, ``MIN``, ``MAX``, ``BAND``, ``BOR``, ``BXOR`` gather every rank's tensor and reduce it
locally (N times the memory: fine for metrics, not for gradients). Only the whole world is a
group: ``new_group`` of a subset of the ranks is an error. See docs/allreduce.md.
"""
from __future__ import annotations

import datetime
import enum
import functools
import importlib
import os
import pickle
import threading
import weakref
from typing import Any

import numpy as np

from tinyflow.device import array_module, cuda_backend, nccl_communicator
from tinyflow.parallel.allreduce import all_gather as _all_gather_arrays
from tinyflow.parallel.allreduce import all_gather_object as _all_gather_objects
from tinyflow.parallel.allreduce import allreduce as _allreduce
from tinyflow.parallel.allreduce import broadcast as _broadcast
from tinyflow.parallel.communicator import Communicator
from tinyflow.tensor import Tensor

__all__ = [
    "Backend", "GroupMember", "ProcessGroup", "ReduceOp", "Work", "all_gather", "all_gather_into_tensor",
    "all_gather_object", "all_reduce", "barrier", "broadcast", "broadcast_object_list", "destroy_process_group",
    "gather", "gather_object", "get_backend", "get_node_local_rank", "get_process_group_ranks", "get_rank",
    "get_world_size", "group", "init_process_group", "is_available", "is_gloo_available", "is_initialized",
    "is_mpi_available", "is_nccl_available", "is_torchelastic_launched", "new_group", "recv", "reduce",
    "reduce_scatter", "reduce_scatter_tensor", "scatter", "scatter_object_list", "send",
]

_ALGORITHM = "ring"  # all ranks end with bit-identical sums, on every transport
_P2P_GATHER_TAG = 320
_P2P_SCATTER_TAG = 321
_NOT_INITIALIZED = "Default process group has not been initialized, please make sure to call init_process_group."
_LAUNCH_HINT = (
    "start one process per rank with `mpirun -n N python script.py` or `tinyflow launch --nproc N script.py` "
    "(the ranks find each other through MPI), or run thread ranks with tinyflow.parallel.run_local and call "
    "tinyflow.parallel.set_world(comm) in each before init_process_group"
)


# ---- names ----------------------------------------------------------------------------------
class Backend(str):
    """A backend name, lower-cased and checked: ``Backend("GLOO") == "gloo"``.

    tinyflow's transports stand behind them: "gloo" and "mpi" are the MPI communicator under
    mpirun (CPU buffers, CuPy staged through the host), "nccl" the NCCL communicator (CUDA only).
    """

    UNDEFINED = "undefined"
    GLOO = "gloo"
    MPI = "mpi"
    NCCL = "nccl"
    backend_list = ["gloo", "mpi", "nccl"]

    def __new__(cls, name: str) -> Backend:
        if not isinstance(name, str):
            raise ValueError(f"Backend constructor parameter must be string-ish, got {type(name).__name__}")
        value = name.lower()
        if value not in cls.backend_list:
            raise ValueError(
                f"Invalid backend: {name!r}; tinyflow.distributed supports {', '.join(cls.backend_list)} "
                f"(ucc and custom backends are not implemented)"
            )
        return str.__new__(cls, value)


class ReduceOp(enum.Enum):
    """How ``all_reduce`` / ``reduce`` / ``reduce_scatter`` combine the ranks' tensors (torch's RedOpType)."""

    SUM = 0
    AVG = 1
    PRODUCT = 2
    MIN = 3
    MAX = 4
    BAND = 5
    BOR = 6
    BXOR = 7
    PREMUL_SUM = 8


class ProcessGroup:
    """A group of ranks over one tinyflow Communicator: ``rank()``, ``size()``, ``comm``."""

    def __init__(self, comm: Communicator, backend: str) -> None:
        self.comm = comm
        self.backend = backend
        self.destroyed = False
        self._owners: weakref.WeakSet = weakref.WeakSet()  # DDP wrappers to close with the group

    def rank(self) -> int:
        """This process's (or thread's) rank in the group."""
        return self.comm.rank

    def size(self) -> int:
        """The number of ranks in the group."""
        return self.comm.size

    def name(self) -> str:
        return f"{self.backend}:{type(self.comm).__name__}"

    def __repr__(self) -> str:
        return f"ProcessGroup(backend={self.backend!r}, rank={self.comm.rank}, size={self.comm.size})"


class _WorldGroup:
    """``group.WORLD``: stands for the calling rank's default group (thread ranks have their own)."""

    def rank(self) -> int:
        return _default_group().rank()

    def size(self) -> int:
        return _default_group().size()

    @property
    def comm(self) -> Communicator:
        return _default_group().comm

    def __repr__(self) -> str:
        return "group.WORLD"


class group:  # noqa: N801 - torch's name
    """``dist.group.WORLD``: the default process group (pass it as ``group=`` anywhere)."""

    WORLD = _WorldGroup()


class GroupMember:
    """``GroupMember.WORLD`` is ``group.WORLD``; NON_GROUP_MEMBER marks ranks outside a group."""

    WORLD = group.WORLD
    NON_GROUP_MEMBER = -100


class Work:
    """The handle ``async_op=True`` returns. tinyflow's collectives are complete when they return,
    so ``wait()`` returns True at once and ``is_completed()`` is True."""

    def __init__(self, outputs: list[Tensor] | None = None) -> None:
        self._outputs = outputs or []

    def wait(self, timeout: Any = None) -> bool:
        """Block until the collective is done (it already is); True on success."""
        return True

    def is_completed(self) -> bool:
        return True

    def is_success(self) -> bool:
        return True

    def exception(self) -> None:
        return None

    def result(self) -> list[Tensor]:
        """The collective's output tensors."""
        return list(self._outputs)

    def synchronize(self) -> None:
        return None


# ---- the default group ----------------------------------------------------------------------
def export_launcher_env() -> dict[str, str]:
    """Under an MPI launcher, set torchrun's variables from the launcher's own (unless already set):
    RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE, so that a DDP script's
    ``int(os.environ["LOCAL_RANK"])`` works under ``mpirun`` / ``tinyflow launch``. Runs when this
    module is imported; returns what it set."""
    w = _world_module()
    if not w.launched_by_mpi():
        return {}
    here = w.world()
    local_size = w._env_int(("OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "PMI_LOCAL_SIZE"), here.size)
    values = {"RANK": here.rank, "WORLD_SIZE": here.size, "LOCAL_RANK": here.local_rank, "LOCAL_WORLD_SIZE": local_size}
    exported = {}
    for name, value in values.items():
        if name not in os.environ:
            os.environ[name] = exported[name] = str(value)
    return exported


_thread_state = threading.local()
_process_group: ProcessGroup | None = None


def _current() -> ProcessGroup | None:
    mine = getattr(_thread_state, "group", None)
    return mine if mine is not None else _process_group


def _default_group() -> ProcessGroup:
    pg = _current()
    if pg is None:
        raise ValueError(_NOT_INITIALIZED)
    return pg


def _resolve(pg: Any) -> ProcessGroup:
    """The ProcessGroup behind ``group=`` (None and group.WORLD: the default one)."""
    default = _default_group()
    if pg is None or isinstance(pg, _WorldGroup) or pg is default:
        return default
    if isinstance(pg, ProcessGroup):
        raise ValueError(
            f"{pg!r} is not this rank's default process group (it was destroyed or belongs to another "
            f"rank); tinyflow.distributed has one group per rank: pass group=None"
        )
    raise TypeError(f"group must be a ProcessGroup, group.WORLD or None, got {type(pg).__name__}")


def is_available() -> bool:
    """True: tinyflow always has its distributed package (thread ranks need nothing; MPI needs mpi4py)."""
    return True


def is_initialized() -> bool:
    """Whether ``init_process_group`` has been called (in this process, or this thread rank)."""
    return _current() is not None


def is_mpi_available() -> bool:
    """True when mpi4py (and an MPI library) can be imported."""
    from tinyflow.parallel.mpi import mpi_available

    return mpi_available()


def is_gloo_available() -> bool:
    """True: "gloo" runs on tinyflow's own communicators (threads, or MPI under mpirun)."""
    return True


def is_nccl_available() -> bool:
    """True when tinyflow's CUDA backend (CuPy with a visible GPU) can make an NCCL communicator."""
    try:
        backend = cuda_backend()
    except ImportError:
        return False
    return bool(backend.is_available())


def is_torchelastic_launched() -> bool:
    """False: torchrun / torchelastic launches are not supported (see init_process_group)."""
    return False


def _world_module() -> Any:
    return importlib.import_module("tinyflow.parallel.world")


def _thread_comm() -> Communicator | None:
    """The communicator that ``set_world`` gave this thread (run_local's thread ranks), if any."""
    override = getattr(_world_module()._local, "world", None)
    return None if override is None else override._comm


def _timeout_seconds(timeout: Any) -> float | None:
    if timeout is None:
        return None
    if isinstance(timeout, datetime.timedelta):
        return timeout.total_seconds()
    return float(timeout)


def _backend_name(backend: Any) -> str:
    """"gloo" | "mpi" | "nccl" from torch's forms (None, "GLOO", "cpu:gloo,cuda:nccl")."""
    if backend is None:
        return Backend.GLOO
    text = str(backend)
    if ":" in text:  # "cpu:gloo,cuda:nccl": tinyflow's communicators carry both kinds of buffer
        names = [Backend(part.split(":", 1)[1].strip()) for part in text.split(",") if part.strip()]
        return Backend.GLOO if Backend.GLOO in names or not names else names[0]
    return Backend(text)


def _requested_size(world_size: int) -> int:
    if world_size is not None and int(world_size) != -1:
        return int(world_size)
    env = os.environ.get("WORLD_SIZE", "").strip()
    return int(env) if env.isdigit() else 1


def _nccl_comm(timeout: float | None) -> Communicator:
    if not is_nccl_available():
        raise RuntimeError(
            f"init_process_group: backend 'nccl' needs CUDA ({cuda_backend().unavailable_reason()}); "
            f"use backend='gloo' for CPU tensors"
        )
    return nccl_communicator(timeout=timeout)


def _choose_comm(backend: str, world_size: int, timeout: float | None) -> tuple[Communicator, bool]:
    """(the communicator for the default group, whether it belongs to this thread only)."""
    if backend == Backend.NCCL and not is_nccl_available():
        _nccl_comm(timeout)  # raises the error that says why
    comm = _thread_comm()
    if comm is not None:
        return comm, True
    w = _world_module()
    if w.launched_by_mpi():
        if backend == Backend.NCCL:
            return _nccl_comm(timeout), False
        return w.world().comm, False
    size = _requested_size(world_size)
    if size == 1:
        from tinyflow.parallel.local import LocalComm, LocalGroup

        return LocalComm(LocalGroup(1), 0, timeout), False
    raise RuntimeError(
        f"init_process_group: world_size {size} was asked for, but this process was not started by an MPI "
        f"launcher and tinyflow has no TCP/env:// rendezvous (torchrun's MASTER_ADDR); {_LAUNCH_HINT}"
    )


def _check_not_initialized() -> None:
    """torch's error for a second init_process_group (in the scope the new group would live in)."""
    per_thread = _thread_comm() is not None
    existing = getattr(_thread_state, "group", None) if per_thread else _process_group
    if existing is None:
        return
    hint = ""
    if not per_thread and threading.current_thread() is not threading.main_thread():
        hint = " (thread ranks of run_local: call tinyflow.parallel.set_world(comm) in each before init_process_group)"
    raise ValueError("trying to initialize the default process group twice!" + hint)


def init_process_group(
    backend: str | None = None,
    init_method: str | None = None,
    timeout: datetime.timedelta | None = None,
    world_size: int = -1,
    rank: int = -1,
    store: Any = None,
    group_name: str = "",
    pg_options: Any = None,
    device_id: Any = None,
) -> None:
    """Initialize the default process group of this rank.

    The communicator comes from how the program was started (see the module docstring):
    mpirun's MPI world, this thread's ``set_world`` communicator, or a single-rank group.
    ``init_method`` and ``store`` are accepted and ignored (there is no rendezvous); ``world_size``
    and ``rank``, when given, must match the launcher's. ``timeout`` bounds every wait (a silent
    rank becomes a CommTimeoutError naming it). ``backend``: "gloo", "mpi" or "nccl" (CUDA only).
    """
    global _process_group
    name = _backend_name(backend)
    seconds = _timeout_seconds(timeout)
    _check_not_initialized()
    comm, per_thread = _choose_comm(name, world_size, seconds)
    if world_size not in (None, -1) and int(world_size) != comm.size:
        raise ValueError(
            f"init_process_group: world_size={world_size} but the launcher started {comm.size} rank(s); "
            f"leave world_size=-1 or pass {comm.size}"
        )
    if rank not in (None, -1) and int(rank) != comm.rank:
        raise ValueError(
            f"init_process_group: rank={rank} but the launcher made this process rank {comm.rank}; "
            f"leave rank=-1 (tinyflow takes the rank from the launcher)"
        )
    if seconds is not None:
        comm.timeout = seconds
    pg = ProcessGroup(comm, name)
    if per_thread:
        _thread_state.group = pg
    else:
        _process_group = pg


def destroy_process_group(group: Any = None) -> None:
    """Tear down the default process group (and stop the DDP wrappers built on it)."""
    global _process_group
    pg = _resolve(group)
    for owner in list(pg._owners):
        owner.close()
    pg.destroyed = True
    if getattr(_thread_state, "group", None) is pg:
        _thread_state.group = None
    elif _process_group is pg:
        _process_group = None


def new_group(ranks: list[int] | None = None, timeout: Any = None, backend: str | None = None,
              pg_options: Any = None, use_local_synchronization: bool = False, group_desc: str | None = None,
              device_id: Any = None, sort_ranks: bool = True) -> Any:
    """A group of ``ranks``; tinyflow supports only the whole world (returns ``group.WORLD``)."""
    pg = _default_group()
    if ranks is None:
        return group.WORLD
    wanted = sorted(int(r) for r in ranks)
    for r in wanted:
        if not 0 <= r < pg.size():
            raise ValueError(
                f"new_group: rank {r} is out of range. Valid ranks are 0 to {pg.size() - 1} for this world"
            )
    if wanted != list(range(pg.size())):
        raise NotImplementedError(
            f"new_group: tinyflow.distributed supports only the whole world as a group, got ranks {wanted} of "
            f"{pg.size()}; use group=None, or start a separate job for the subset"
        )
    return group.WORLD


def get_rank(group: Any = None) -> int:
    """This rank's index in the group (0 .. world size - 1)."""
    return _resolve(group).rank()


def get_world_size(group: Any = None) -> int:
    """The number of ranks in the group."""
    return _resolve(group).size()


def get_backend(group: Any = None) -> str:
    """The group's backend name ("gloo", "mpi" or "nccl")."""
    return _resolve(group).backend


def get_node_local_rank(fallback_rank: int | None = None) -> int:
    """This rank's index among the ranks on its host: ``LOCAL_RANK`` if set (torchrun), else the MPI
    launcher's local rank or the thread rank (``tinyflow.parallel.world().local_rank``)."""
    env = os.environ.get("LOCAL_RANK", "").strip()
    if env.isdigit():
        return int(env)
    return _world_module().world().local_rank


def get_process_group_ranks(group: Any) -> list[int]:
    """The global ranks of the group's members (the whole world: 0 .. N - 1)."""
    return list(range(_resolve(group).size()))


def _comm(pg: Any) -> Communicator:
    return _resolve(pg).comm


# ---- tensors --------------------------------------------------------------------------------
def _check_tensor(t: Any, name: str) -> Tensor:
    if not isinstance(t, Tensor):
        raise TypeError(
            f"Invalid function argument. Expected parameter `{name}` of type torch.Tensor but got {type(t)} instead."
        )
    return t


def _check_tensor_list(ts: Any, name: str) -> list[Tensor]:
    if not isinstance(ts, (list, tuple)) or not all(isinstance(t, Tensor) for t in ts):
        raise TypeError(
            f"Invalid function argument. Expected parameter `{name}` of type List[torch.Tensor] but got {type(ts)}"
        )
    return list(ts)


def _write(t: Tensor, value: Any) -> None:
    """Copy ``value`` into ``t`` in place (an in-place edit: bumps its version counter)."""
    t.array[...] = value
    t._versions[0] += 1


def _check_root(what: str, root: int | None, alt: int | None, size: int, name: str) -> int:
    if root is None:
        root = 0 if alt is None else alt
    if not isinstance(root, (int, np.integer)) or not 0 <= int(root) < size:
        raise RuntimeError(
            f"{what}: invalid root rank {root} ({name}) for a world of {size} rank(s); pass 0..{size - 1}"
        )
    return int(root)


def _check_op(op: Any, what: str) -> ReduceOp:
    if not isinstance(op, ReduceOp):
        raise TypeError(f"{what}: op must be a dist.ReduceOp (e.g. ReduceOp.SUM), got {op!r}")
    if op is ReduceOp.PREMUL_SUM:
        raise ValueError(
            f"{what}: ReduceOp.PREMUL_SUM is not supported by tinyflow.distributed; multiply the tensor by the "
            f"factor first and use ReduceOp.SUM"
        )
    return op


_BITWISE = {ReduceOp.BAND: "bitwise_and", ReduceOp.BOR: "bitwise_or", ReduceOp.BXOR: "bitwise_xor"}


def _reduce_array(buf: Any, comm: Communicator, op: ReduceOp, what: str) -> None:
    """Reduce the raw array ``buf`` over every rank of ``comm`` in place with ``op``."""
    kind = np.dtype(buf.dtype).kind
    if op in (ReduceOp.SUM, ReduceOp.AVG):
        if op is ReduceOp.AVG and kind not in "fc":
            raise TypeError(
                f"{what}: ReduceOp.AVG needs a floating tensor, got {buf.dtype} {tuple(buf.shape)}; "
                f"convert it with .float() or use ReduceOp.SUM and divide"
            )
        _allreduce(buf, comm, algorithm=_ALGORITHM, op="mean" if op is ReduceOp.AVG else "sum")
        return
    if op in _BITWISE and kind not in "biu":
        raise TypeError(f"{what}: ReduceOp.{op.name} needs an integer or bool tensor, got {buf.dtype}")
    if kind == "c" and op in (ReduceOp.MIN, ReduceOp.MAX):
        raise TypeError(f"{what}: ReduceOp.{op.name} is not defined for complex tensors ({buf.dtype})")
    xp = array_module(buf)
    everyone = _all_gather_arrays(xp.ascontiguousarray(buf), comm)  # (N, *shape)
    if op is ReduceOp.PRODUCT:
        result = xp.prod(everyone, axis=0, dtype=buf.dtype)
    elif op is ReduceOp.MIN:
        result = everyone.min(axis=0)
    elif op is ReduceOp.MAX:
        result = everyone.max(axis=0)
    else:
        combine = getattr(xp, _BITWISE[op])
        result = functools.reduce(combine, list(everyone))
    buf[...] = result


def _done(async_op: bool, outputs: list[Tensor]) -> Work | None:
    return Work(outputs) if async_op else None


# ---- collectives ----------------------------------------------------------------------------
def all_reduce(tensor: Tensor, op: ReduceOp = ReduceOp.SUM, group: Any = None, async_op: bool = False) -> Work | None:
    """Reduce ``tensor`` over all ranks in place, so that every rank holds the result.

    SUM and AVG run tinyflow's ring all-reduce (AVG: floating dtypes only); PRODUCT, MIN, MAX and
    the bitwise ops all-gather the tensors and reduce locally. PREMUL_SUM is not supported.
    """
    _check_tensor(tensor, "tensor")
    _check_op(op, "all_reduce")
    _reduce_array(tensor.array, _comm(group), op, "all_reduce")
    tensor._versions[0] += 1
    return _done(async_op, [tensor])


def reduce(tensor: Tensor, dst: int | None = None, op: ReduceOp = ReduceOp.SUM, group: Any = None,
           async_op: bool = False, group_dst: int | None = None) -> Work | None:
    """Reduce ``tensor`` over all ranks; only rank ``dst`` receives the result (others keep theirs)."""
    _check_tensor(tensor, "tensor")
    comm = _comm(group)
    root = _check_root("reduce", dst, group_dst, comm.size, "dst")
    _check_op(op, "reduce")
    work = array_module(tensor.array).array(tensor.array, copy=True)
    _reduce_array(work, comm, op, "reduce")
    if comm.rank == root:
        _write(tensor, work)
    return _done(async_op, [tensor])


def broadcast(tensor: Tensor, src: int | None = None, group: Any = None, async_op: bool = False,
              group_src: int | None = None) -> Work | None:
    """Copy rank ``src``'s ``tensor`` into ``tensor`` on every rank (in place)."""
    _check_tensor(tensor, "tensor")
    comm = _comm(group)
    root = _check_root("broadcast", src, group_src, comm.size, "src")
    _broadcast(tensor.array, comm, root=root)
    tensor._versions[0] += 1
    return _done(async_op, [tensor])


def all_gather(tensor_list: list[Tensor], tensor: Tensor, group: Any = None, async_op: bool = False) -> Work | None:
    """Fill ``tensor_list[i]`` with rank i's ``tensor``, on every rank."""
    outputs = _check_tensor_list(tensor_list, "tensor_list")
    _check_tensor(tensor, "tensor")
    comm = _comm(group)
    if len(outputs) != comm.size:
        raise RuntimeError(
            f"all_gather: tensor_list has {len(outputs)} tensor(s) but the world has {comm.size} rank(s); "
            f"pass one output tensor per rank"
        )
    for i, out in enumerate(outputs):
        if out.shape != tensor.shape or out.dtype != tensor.dtype:
            raise RuntimeError(
                f"all_gather: tensor_list[{i}] is {tuple(out.shape)} {out.dtype} but the input tensor is "
                f"{tuple(tensor.shape)} {tensor.dtype}; every output must match the input"
            )
    everyone = _all_gather_arrays(tensor.array, comm)
    for i, out in enumerate(outputs):
        _write(out, everyone[i])
    return _done(async_op, outputs)


def all_gather_into_tensor(output_tensor: Tensor, input_tensor: Tensor, group: Any = None,
                           async_op: bool = False) -> Work | None:
    """Gather every rank's ``input_tensor`` into ``output_tensor``, concatenated along dim 0 (shape
    (N * d0, ...)) or stacked (shape (N, d0, ...)), in rank order."""
    _check_tensor(output_tensor, "output_tensor")
    _check_tensor(input_tensor, "input_tensor")
    comm = _comm(group)
    if output_tensor.numel() != comm.size * input_tensor.numel() or output_tensor.dtype != input_tensor.dtype:
        raise RuntimeError(
            f"all_gather_into_tensor: output tensor {tuple(output_tensor.shape)} {output_tensor.dtype} must hold "
            f"world_size ({comm.size}) times the input {tuple(input_tensor.shape)} {input_tensor.dtype}"
        )
    everyone = _all_gather_arrays(input_tensor.array, comm)
    _write(output_tensor, everyone.reshape(output_tensor.shape))
    return _done(async_op, [output_tensor])


def reduce_scatter_tensor(output: Tensor, input: Tensor, op: ReduceOp = ReduceOp.SUM, group: Any = None,
                          async_op: bool = False) -> Work | None:
    """Reduce ``input`` (world_size chunks along dim 0) over all ranks; rank i gets chunk i in ``output``."""
    _check_tensor(output, "output")
    _check_tensor(input, "input")
    comm = _comm(group)
    _check_op(op, "reduce_scatter_tensor")
    if input.numel() != comm.size * output.numel() or output.dtype != input.dtype:
        raise RuntimeError(
            f"reduce_scatter_tensor: input {tuple(input.shape)} {input.dtype} must hold world_size ({comm.size}) "
            f"times the output {tuple(output.shape)} {output.dtype}"
        )
    work = array_module(input.array).array(input.array, copy=True).reshape(comm.size, -1)
    _reduce_array(work, comm, op, "reduce_scatter_tensor")
    _write(output, work[comm.rank].reshape(output.shape))
    return _done(async_op, [output])


def reduce_scatter(output: Tensor, input_list: list[Tensor], op: ReduceOp = ReduceOp.SUM, group: Any = None,
                   async_op: bool = False) -> Work | None:
    """Reduce ``input_list[i]`` over all ranks into rank i's ``output``."""
    _check_tensor(output, "output")
    inputs = _check_tensor_list(input_list, "input_list")
    comm = _comm(group)
    _check_op(op, "reduce_scatter")
    if len(inputs) != comm.size or any(t.shape != output.shape or t.dtype != output.dtype for t in inputs):
        raise RuntimeError(
            f"reduce_scatter: input_list must hold {comm.size} tensor(s) shaped like the output "
            f"{tuple(output.shape)} {output.dtype}"
        )
    xp = array_module(output.array)
    work = xp.stack([t.array for t in inputs])
    _reduce_array(work, comm, op, "reduce_scatter")
    _write(output, work[comm.rank])
    return _done(async_op, [output])


def gather(tensor: Tensor, gather_list: list[Tensor] | None = None, dst: int | None = None, group: Any = None,
           async_op: bool = False, group_dst: int | None = None) -> Work | None:
    """Send every rank's ``tensor`` to rank ``dst``, which receives them in ``gather_list`` (rank order)."""
    _check_tensor(tensor, "tensor")
    comm = _comm(group)
    root = _check_root("gather", dst, group_dst, comm.size, "dst")
    if comm.rank != root:
        if gather_list:
            raise ValueError("Argument ``gather_list`` must NOT be specified on non-destination ranks.")
        comm.send(array_module(tensor.array).ascontiguousarray(tensor.array), root, _P2P_GATHER_TAG)
        return _done(async_op, [])
    if gather_list is None:
        raise ValueError("Argument ``gather_list`` must be specified on destination rank.")
    outputs = _check_tensor_list(gather_list, "gather_list")
    if len(outputs) != comm.size or any(t.shape != tensor.shape or t.dtype != tensor.dtype for t in outputs):
        raise RuntimeError(
            f"gather: gather_list must hold {comm.size} tensor(s) shaped like the input {tuple(tensor.shape)} "
            f"{tensor.dtype}, got {len(outputs)}"
        )
    xp = array_module(tensor.array)
    for r, out in enumerate(outputs):
        if r == root:
            _write(out, tensor.array)
            continue
        got = xp.empty(tensor.shape, tensor.array.dtype)
        comm.recv(got, r, _P2P_GATHER_TAG)
        _write(out, got)
    return _done(async_op, outputs)


def scatter(tensor: Tensor, scatter_list: list[Tensor] | None = None, src: int | None = None, group: Any = None,
            async_op: bool = False, group_src: int | None = None) -> Work | None:
    """Rank ``src`` sends ``scatter_list[i]`` to rank i, which receives it in ``tensor``."""
    _check_tensor(tensor, "tensor")
    comm = _comm(group)
    root = _check_root("scatter", src, group_src, comm.size, "src")
    if comm.rank != root:
        if scatter_list:
            raise ValueError("Argument ``scatter_list`` must NOT be specified on non-source ranks.")
        got = array_module(tensor.array).empty(tensor.shape, tensor.array.dtype)
        comm.recv(got, root, _P2P_SCATTER_TAG)
        _write(tensor, got)
        return _done(async_op, [tensor])
    if scatter_list is None:
        raise ValueError("Argument ``scatter_list`` must be specified on source rank.")
    inputs = _check_tensor_list(scatter_list, "scatter_list")
    if len(inputs) != comm.size or any(t.shape != tensor.shape or t.dtype != tensor.dtype for t in inputs):
        raise RuntimeError(
            f"scatter: scatter_list must hold {comm.size} tensor(s) shaped like the output {tuple(tensor.shape)} "
            f"{tensor.dtype}, got {len(inputs)}"
        )
    for r, t in enumerate(inputs):
        if r != root:
            comm.send(array_module(t.array).ascontiguousarray(t.array), r, _P2P_SCATTER_TAG)
    _write(tensor, inputs[root].array)
    return _done(async_op, [tensor])


def send(tensor: Tensor, dst: int | None = None, group: Any = None, tag: int = 0, group_dst: int | None = None) -> None:
    """Send ``tensor`` to rank ``dst`` (the receiver calls ``recv`` with the same shape, dtype and tag)."""
    _check_tensor(tensor, "tensor")
    comm = _comm(group)
    peer = _check_root("send", dst, group_dst, comm.size, "dst")
    if peer == comm.rank:
        raise ValueError(f"send: rank {peer} cannot send to itself")
    comm.send(array_module(tensor.array).ascontiguousarray(tensor.array), peer, int(tag))


def recv(tensor: Tensor, src: int | None = None, group: Any = None, tag: int = 0, group_src: int | None = None) -> int:
    """Receive into ``tensor`` from rank ``src``; returns ``src``. tinyflow needs ``src`` (no any-source)."""
    _check_tensor(tensor, "tensor")
    comm = _comm(group)
    if src is None and group_src is None:
        raise ValueError("recv: src=None (receive from any rank) is not supported by tinyflow; pass src=<rank>")
    peer = _check_root("recv", src, group_src, comm.size, "src")
    if peer == comm.rank:
        raise ValueError(f"recv: rank {peer} cannot receive from itself")
    got = array_module(tensor.array).empty(tensor.shape, tensor.array.dtype)
    comm.recv(got, peer, int(tag))
    _write(tensor, got)
    return peer


def barrier(group: Any = None, async_op: bool = False, device_ids: Any = None, timeout: Any = None) -> Work | None:
    """Wait until every rank of the group reaches the barrier."""
    _comm(group).barrier()
    return _done(async_op, [])


# ---- picklable objects ----------------------------------------------------------------------
def all_gather_object(object_list: list[Any], obj: Any, group: Any = None) -> None:
    """Fill ``object_list`` (of world-size length) with every rank's picklable ``obj``, in rank order."""
    comm = _comm(group)
    if len(object_list) != comm.size:
        raise ValueError(
            f"all_gather_object: object_list has {len(object_list)} element(s) but the world has {comm.size} "
            f"rank(s); pass [None] * world_size"
        )
    object_list[:] = _all_gather_objects(obj, comm)


def gather_object(obj: Any, object_gather_list: list[Any] | None = None, dst: int | None = None, group: Any = None,
                  group_dst: int | None = None) -> None:
    """Rank ``dst`` receives every rank's picklable ``obj`` in ``object_gather_list`` (rank order)."""
    comm = _comm(group)
    root = _check_root("gather_object", dst, group_dst, comm.size, "dst")
    if comm.rank == root and (object_gather_list is None or len(object_gather_list) != comm.size):
        raise ValueError(
            f"gather_object: on the destination rank object_gather_list must be a list of {comm.size} element(s)"
        )
    everyone = _all_gather_objects(obj, comm)
    if comm.rank == root:
        object_gather_list[:] = everyone


def broadcast_object_list(object_list: list[Any], src: int | None = None, group: Any = None, device: Any = None,
                          group_src: int | None = None) -> None:
    """Replace every rank's ``object_list`` items with rank ``src``'s (picklable objects, same length)."""
    comm = _comm(group)
    root = _check_root("broadcast_object_list", src, group_src, comm.size, "src")
    if comm.size == 1:
        return
    payload = pickle.dumps(list(object_list)) if comm.rank == root else b""
    length = np.array([len(payload)], dtype=np.int64)
    _broadcast(length, comm, root=root)
    data = np.frombuffer(payload, dtype=np.uint8).copy() if comm.rank == root else np.empty(int(length[0]), np.uint8)
    _broadcast(data, comm, root=root)
    objects = pickle.loads(data.tobytes())
    if len(objects) != len(object_list):
        raise ValueError(
            f"broadcast_object_list: rank {root} sent {len(objects)} object(s) but rank {comm.rank}'s object_list "
            f"has {len(object_list)}; every rank must pass a list of the same length"
        )
    object_list[:] = objects


def scatter_object_list(scatter_object_output_list: list[Any], scatter_object_input_list: list[Any] | None = None,
                        src: int | None = None, group: Any = None, group_src: int | None = None) -> None:
    """Rank i receives rank ``src``'s ``scatter_object_input_list[i]`` as ``scatter_object_output_list[0]``."""
    comm = _comm(group)
    root = _check_root("scatter_object_list", src, group_src, comm.size, "src")
    if not isinstance(scatter_object_output_list, list) or len(scatter_object_output_list) < 1:
        raise ValueError("Expected argument scatter_object_output_list to be a list of size at least 1.")
    if comm.rank == root and (scatter_object_input_list is None or len(scatter_object_input_list) != comm.size):
        raise ValueError(f"scatter_object_list: the source rank must pass {comm.size} input object(s)")
    holder = [list(scatter_object_input_list) if comm.rank == root else None]
    broadcast_object_list(holder, src=root, group=group)
    scatter_object_output_list[0] = holder[0][comm.rank]


export_launcher_env()
