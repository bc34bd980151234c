"""Who am I in the job: rank, world size, local rank, and the communicator (for trainers).

``world()`` reads the MPI launcher's environment (Open MPI, MPICH/PMI, PMIx), so it costs
nothing and needs no MPI call; ``world().comm`` opens the MPI communicator lazily the first
time it is asked for. Inside ``run_local`` threads, ``set_world(comm)`` overrides it per
thread. ``is_main_process()`` is what gates checkpoints, logs and plots (rank 0 only).
"""
from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field

from tinyflow.parallel.communicator import Communicator

_RANK_VARS = ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK")
_SIZE_VARS = ("OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE")
_LOCAL_RANK_VARS = ("OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "PMI_LOCAL_RANK")

_local = threading.local()
_process_world: World | None = None


def _env_int(names: tuple[str, ...], default: int) -> int:
    for name in names:
        value = os.environ.get(name)
        if value is not None and value.strip().lstrip("-").isdigit():
            return int(value)
    return default


@dataclass
class World:
    """This worker's place in the job. ``comm`` is None for a single process."""

    rank: int = 0
    size: int = 1
    local_rank: int = 0
    _comm: Communicator | None = field(default=None, repr=False)

    @property
    def comm(self) -> Communicator | None:
        """The communicator over all workers (opened on first use under MPI; None alone)."""
        if self._comm is None and self.size > 1:
            from tinyflow.parallel.mpi import mpi_comm

            self._comm = mpi_comm()
        return self._comm

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def device(self, kind: str = "cpu") -> str:
        """The device this worker should use: 'cpu', or 'cuda:<local_rank>' for kind='cuda'."""
        return "cpu" if kind == "cpu" else f"cuda:{self.local_rank}"


def launched_by_mpi() -> bool:
    """True when an MPI launcher (mpirun/mpiexec of Open MPI, MPICH/PMI or PMIx) started this
    process as one of several ranks: the one test of it, for `tinyflow train` and `bench`."""
    return _env_int(_SIZE_VARS, 1) > 1


def world() -> World:
    """The current worker's World: a per-thread override, else the MPI environment, else 1."""
    override = getattr(_local, "world", None)
    if override is not None:
        return override
    global _process_world
    if _process_world is None:
        _process_world = World(
            rank=_env_int(_RANK_VARS, 0),
            size=_env_int(_SIZE_VARS, 1),
            local_rank=_env_int(_LOCAL_RANK_VARS, 0),
        )
    return _process_world


def set_world(comm: Communicator | None, local_rank: int | None = None) -> World:
    """Make ``comm`` this thread's world (None clears the override); returns the World."""
    if comm is None:
        _local.world = None
        return world()
    w = World(rank=comm.rank, size=comm.size, local_rank=comm.rank if local_rank is None else local_rank, _comm=comm)
    _local.world = w
    return w


def is_main_process() -> bool:
    """True on rank 0: the only worker that writes checkpoints, logs and plots."""
    return world().rank == 0


def rank() -> int:
    return world().rank


def world_size() -> int:
    return world().size
