"""The stand-in's ``cupy.cuda``: one device, streams and events that order nothing (the CPU runs
every call at once), memory pools that hold nothing (a pool only counts what a capture allocated
from it; strict_cupy/memory.py), stream capture into ``Graph``s (strict_cupy/graph.py), and
``RawModule`` kernels that run the .cu sources through the g++ emulator (cuda_tools/emulator.py)
on the arrays' NumPy memory.

The layer just below module.py: it gathers ``cupy.cuda``'s names from the files it builds on (the
errors, the pools, the graph) and adds the streams. A thread's stack of entered streams lives in
current_stream.py, below the array and the graph, so that they can ask whether a capture runs
without importing this file.
"""
from __future__ import annotations

import itertools
import math
import warnings
from types import SimpleNamespace
from typing import Any

import numpy as np

from cuda_tools.strict_cupy import graph as _graph
from cuda_tools.strict_cupy.array import _Device, ndarray, record
from cuda_tools.strict_cupy.current_stream import capturing, current_stream, stream_stack
from cuda_tools.strict_cupy.errors import CUDARuntimeError, OutOfMemoryError
from cuda_tools.strict_cupy.graph import Graph
from cuda_tools.strict_cupy.memory import MemoryPool, get_default_memory_pool, using_allocator  # noqa: F401  (cupy.cuda's)

Device = _Device


RESIDENT_BLOCKS = 3  # the emulator's blocks of a persistent kernel (cuda_tools.emulator)


def _properties(device: int) -> dict[str, Any]:
    return {"name": b"strict CuPy stand-in (CPU)", "multiProcessorCount": RESIDENT_BLOCKS,
            "totalGlobalMem": 1 << 34, "major": 9, "minor": 0, "sharedMemPerBlock": 48 * 1024,
            "sharedMemPerBlockOptin": 227 * 1024, "maxThreadsPerBlock": 1024, "warpSize": 32}


runtime = SimpleNamespace(
    CUDARuntimeError=CUDARuntimeError,
    getDeviceCount=lambda: 1,
    getDevice=lambda: 0,
    getDeviceProperties=lambda device: _properties(int(device)),
    runtimeGetVersion=lambda: 13000,
    streamCaptureModeGlobal=0,
    streamCaptureModeThreadLocal=1,
    streamCaptureModeRelaxed=2,
    driverGetVersion=lambda: 13000,
    memGetInfo=lambda: (1 << 34, 1 << 34),
)
memory = SimpleNamespace(OutOfMemoryError=OutOfMemoryError)

_pointers = itertools.count(0x100)  # stream handles (0: legacy default, 1, 2: its aliases)


class Event:
    """``cupy.cuda.Event``: on the CPU every queued call has already run, so it is always done."""

    def __init__(self, block: bool = False, disable_timing: bool = False, interprocess: bool = False) -> None:
        self.done = True

    def record(self, stream: Any = None) -> None:
        return None

    def synchronize(self) -> None:
        return None


class Stream:
    """``cupy.cuda.Stream``: current for this thread inside ``with``; ``ptr`` tells streams apart."""

    null: Stream

    def __init__(self, null: bool = False, non_blocking: bool = False, ptds: bool = False) -> None:
        self.ptr = 0 if null else next(_pointers)
        self.non_blocking = non_blocking
        self._recording: _graph.Recording | None = None  # while it captures

    def __enter__(self) -> Stream:
        stream_stack().append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        stream_stack().pop()

    def use(self) -> Stream:
        stream_stack()[:] = [self]
        return self

    def synchronize(self) -> None:
        if self._recording is not None:
            raise self._recording.refuse("Stream.synchronize() of the capturing stream")
        return None

    @property
    def done(self) -> bool:
        return True

    # ---- stream capture (CuPy 14: begin_capture(mode=None), end_capture() -> Graph, is_capturing())
    def begin_capture(self, mode: int | None = None) -> None:
        """Start capturing the work this stream is given (relaxed mode by default, as CuPy)."""
        if self.ptr in (0, 1):
            raise RuntimeError("cannot capture on the default (legacy) stream")
        if self._recording is not None:
            raise CUDARuntimeError("cudaErrorIllegalState: the stream is already capturing")
        self._recording = _graph.Recording(self, runtime.streamCaptureModeRelaxed if mode is None else int(mode))

    def end_capture(self) -> Graph:
        """Stop capturing; the graph of what was captured (an invalidated capture raises)."""
        recording = self._recording
        if recording is None:
            raise CUDARuntimeError("cudaErrorIllegalState: the stream is not capturing")
        self._recording = None
        if recording.invalidated is not None:
            raise CUDARuntimeError(f"cudaErrorStreamCaptureInvalidated: operation failed due to a previous error "
                                   f"during capture ({recording.invalidated})")
        graph = Graph._from_recording(recording)
        graph.recording = recording  # the stand-in's view of it: allocations, calls (tests)
        return graph

    def is_capturing(self) -> bool:
        return self._recording is not None

    def record(self, event: Event | None = None) -> Event:
        event = event if event is not None else Event()
        event.record(self)
        return event

    def wait_event(self, event: Event) -> None:
        if not isinstance(event, Event):
            raise TypeError(f"Stream.wait_event expects an Event, got {type(event).__name__}")


Stream.null = Stream(null=True)


def get_current_stream(device_id: int = -1) -> Stream:
    stream = current_stream()
    return Stream.null if stream is None else stream


# ---- occupancy: cupy.cuda.driver -----------------------------------------------------------------
SM_THREADS, SM_BLOCKS, SM_SHARED = 2048, 32, 228 * 1024  # what one H100 SM holds at once
BLOCK_SHARED_RESERVED = 1024  # shared memory CUDA reserves per resident block
_functions: dict[int, RawFunction] = {}  # the compiled kernels by handle (``Function.ptr``)


def _occupancy(func: int, block_size: int, dynamic_smem: int) -> int:
    """``cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(func, blockSize,
    dynamicSMemSize)``: the blocks of the kernel with handle ``func`` that one SM holds at once,
    by an H100 SM's threads, blocks and shared memory (the stand-in knows no register counts)."""
    if int(func) not in _functions:
        raise CUDARuntimeError(f"CUDA_ERROR_INVALID_HANDLE: no kernel has handle {func}")
    if not 1 <= block_size <= 1024:
        return 0
    return min(SM_BLOCKS, SM_THREADS // block_size, SM_SHARED // (int(dynamic_smem) + BLOCK_SHARED_RESERVED))


driver = SimpleNamespace(occupancyMaxActiveBlocksPerMultiprocessor=_occupancy)


def _cooperative_grid(grid: tuple[int, ...], limit: int) -> tuple[int, ...]:
    """What CuPy 14's launch does with a cooperative grid of more blocks than can be resident
    (cupy/cuda/function.pyx, _launch): a 1-D grid shrinks to ``limit`` with a warning, any other
    is refused."""
    if math.prod(grid) <= limit:
        return grid
    g0, g1, g2 = (*grid, 1, 1)[:3]
    if g1 == g2 == 1:
        warnings.warn(f"The grid size will be reduced from {g0} to {limit}, as the specified grid size "
                      "exceeds the limit.", stacklevel=3)  # CuPy warns from inside its launch
        return (limit, *grid[1:])
    raise ValueError(f"The specified grid size ({g0} * {g1} * {g2}) exceeds the limit ({limit}).")


# ---- kernels: RawModule through the emulator --------------------------------------------------
class RawFunction:
    """``cupy.cuda.function.Function``: one compiled kernel; ``fn(grid, block, args, shared_mem=,
    enable_cooperative_groups=)`` runs it in the emulator.

    As on a GPU, dynamic shared memory above 48 KB needs ``max_dynamic_shared_size_bytes`` set
    first, and a TF_COOPERATIVE kernel (grid_sync) a cooperative launch from a module compiled
    with ``enable_cooperative_groups=True``; otherwise the launch fails. A cooperative grid of more
    blocks than the SMs hold at once (``driver``'s occupancy) is shrunk with a warning or refused,
    as CuPy does. ``ptr`` is its handle for ``cupy.cuda.driver``."""

    DEFAULT_SHARED = 48 * 1024

    def __init__(self, emulator: Any, name: str, cooperative_module: bool = False) -> None:
        self.emulator = emulator
        self.name = name
        self.params = emulator.kernels[name].params
        self.cooperative = emulator.kernels[name].cooperative
        self.cooperative_module = cooperative_module
        self.max_dynamic_shared_size_bytes = self.DEFAULT_SHARED
        self.ptr = next(_pointers)
        _functions[self.ptr] = self

    def __call__(self, grid: tuple[int, ...], block: tuple[int, ...], args: tuple[Any, ...], *,
                 shared_mem: int = 0, stream: Any = None, enable_cooperative_groups: bool = False) -> None:
        if shared_mem > max(self.DEFAULT_SHARED, self.max_dynamic_shared_size_bytes):
            raise CUDARuntimeError(f"kernel {self.name}: shared_mem={shared_mem} bytes without "
                                   "max_dynamic_shared_size_bytes raised to it (CUDA_ERROR_INVALID_VALUE)")
        if self.cooperative and not (enable_cooperative_groups and self.cooperative_module):
            raise CUDARuntimeError(f"kernel {self.name} calls grid_sync: it needs a module compiled "
                                   "with enable_cooperative_groups=True and a cooperative launch")
        if not isinstance(grid, tuple) or not isinstance(block, tuple):
            raise TypeError(f"kernel {self.name}: grid and block must be tuples, as CuPy's "
                            f"RawKernel takes them, got {grid!r} and {block!r}")
        if enable_cooperative_groups:
            per_sm = _occupancy(self.ptr, math.prod(block), shared_mem)
            grid = _cooperative_grid(grid, per_sm * _properties(0)["multiProcessorCount"])
        if len(args) != len(self.params):
            raise TypeError(f"kernel {self.name} takes {len(self.params)} arguments, got {len(args)}")
        converted = []
        for param, value in zip(self.params, args):
            if isinstance(value, np.ndarray):
                raise TypeError(f"kernel {self.name}: argument {param.name} is a NumPy array; a kernel "
                                "takes device arrays (CuPy cannot pass host memory)")
            if param.ctype == "pointer":
                if isinstance(value, ndarray):
                    converted.append(value._a)
                elif isinstance(value, (np.integer, int)) and int(value) == 0:
                    converted.append(None)
                else:
                    raise TypeError(f"kernel {self.name}: argument {param.name} must be a device array "
                                    f"or a null pointer, got {type(value).__name__}")
            else:
                if not isinstance(value, np.generic):
                    raise TypeError(f"kernel {self.name}: scalar argument {param.name} must be a NumPy "
                                    f"scalar of the C type (CuPy needs the width), got {type(value).__name__}")
                converted.append(value.item())
        record(f"kernel:{self.name}", kernels=1)
        recording = capturing()
        if recording is not None:  # captured: it runs at each replay, with these very arguments
            recording.defer(lambda: self.emulator.launch(self.name, grid, block, converted, shared_mem=int(shared_mem)))
            return
        self.emulator.launch(self.name, grid, block, converted, shared_mem=int(shared_mem))


class RawModule:
    """``cupy.RawModule(code=..., options=...)``: the kernels of ``code``, run by the emulator
    (compiled once for all .cu files under tinyflow_cuda/csrc)."""

    def __init__(self, code: str | None = None, path: str | None = None, options: tuple = (),
                 backend: str = "nvrtc", translate_cucomplex: bool = False, *, enable_cooperative_groups: bool = False,
                 name_expressions: Any = None, log_stream: Any = None, jitify: bool = False) -> None:
        from cuda_tools.emulator import EmulatorRuntime

        if code is None:
            raise NotImplementedError("strict CuPy stand-in: RawModule(path=) is not emulated; pass code=")
        self.code = code
        self.enable_cooperative_groups = enable_cooperative_groups
        self.emulator = EmulatorRuntime.build()

    def get_function(self, name: str) -> RawKernel:
        info = self.emulator.kernels.get(name)
        if info is None or info.source.read_text() != self.code:  # a kernel of another file
            raise RuntimeError(f"CUDA_ERROR_NOT_FOUND: named symbol not found: {name}")
        return RawKernel(RawFunction(self.emulator, name, self.enable_cooperative_groups),
                         self.enable_cooperative_groups)


class RawKernel:
    """``cupy.RawKernel`` as ``RawModule.get_function`` returns it (CuPy 14): calling it launches its
    compiled ``kernel`` (a RawFunction) with the module's cooperative flag, so passing
    ``enable_cooperative_groups`` again is CuPy's TypeError; ``kernel(...)`` takes the flag per launch."""

    def __init__(self, kernel: RawFunction, enable_cooperative_groups: bool) -> None:
        self.kernel = kernel
        self.enable_cooperative_groups = enable_cooperative_groups

    @property
    def max_dynamic_shared_size_bytes(self) -> int:
        return self.kernel.max_dynamic_shared_size_bytes

    @max_dynamic_shared_size_bytes.setter
    def max_dynamic_shared_size_bytes(self, value: int) -> None:
        self.kernel.max_dynamic_shared_size_bytes = int(value)

    def __call__(self, grid: tuple[int, ...], block: tuple[int, ...], args: tuple[Any, ...], **kwargs: Any) -> None:
        self.kernel(grid, block, args, enable_cooperative_groups=self.enable_cooperative_groups, **kwargs)
