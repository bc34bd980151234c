"""Data-parallel training: communicators, all-reduce algorithms, DataParallel, launcher helpers.

Algorithms (ring, tree, naive, native) are written once over the ``Communicator`` protocol;
transports are an in-process thread group (``run_local``) and MPI (``mpi_comm``). See
docs/allreduce.md for how the algorithms work and what they cost.
"""
from tinyflow.parallel.allreduce import (
    ALGORITHMS,
    all_gather,
    all_gather_object,
    allreduce,
    average_metrics,
    broadcast,
)
from tinyflow.parallel.communicator import (
    CommAbortedError,
    CommError,
    CommTimeoutError,
    Communicator,
    RankMismatchError,
)
from tinyflow.parallel.compression import FP16Compression, OneBitCompression
from tinyflow.parallel.data_parallel import DataParallel
from tinyflow.parallel.local import LocalComm, run_local
from tinyflow.parallel.mpi import mpi_available, mpi_comm
from tinyflow.parallel.trace import ChromeTracer
from tinyflow.parallel.world import World, is_main_process, launched_by_mpi, set_world, world

__all__ = [
    "ALGORITHMS",
    "CommAbortedError",
    "CommError",
    "CommTimeoutError",
    "ChromeTracer",
    "Communicator",
    "DataParallel",
    "FP16Compression",
    "LocalComm",
    "OneBitCompression",
    "RankMismatchError",
    "World",
    "all_gather",
    "all_gather_object",
    "allreduce",
    "average_metrics",
    "broadcast",
    "is_main_process",
    "launched_by_mpi",
    "mpi_available",
    "mpi_comm",
    "run_local",
    "set_world",
    "world",
]
