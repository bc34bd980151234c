"""Run the .cu kernels on the CPU, on NumPy arrays, by compiling them with g++.

This is a test tool for machines without a GPU: it checks the kernels' index arithmetic and
maths against the NumPy references, through the very wrappers of ``tinyflow_cuda.kernels``.
It says nothing about speed, coalescing, the GPU's memory model or NVRTC-specific compile errors
(``check_cu.sh`` and the gpu tests cover those). Persistent kernels (a ``barrier`` counter
parameter) run with all their blocks alive at once, so a missing grid barrier shows up as wrong
results. See emu.h (beside this file) for what is emulated: the kernels are the product's
(tinyflow_cuda/csrc), the emulator's headers this folder's.

    from cuda_tools import emulator
    from tinyflow_cuda import runtime
    with runtime.use(emulator.EmulatorRuntime.build()):
        cols = tinyflow_cuda.kernels.im2col(np_x, (3, 3))
"""
from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tinyflow_cuda.runtime import CSRC, KernelInfo, dim3, discover

TOOLS = Path(__file__).resolve().parent
"""This folder: emu.h and emu_trace.h, on g++'s include path before the kernels' folder."""

_CTYPES = {
    "pointer": ctypes.c_void_p,
    "int": ctypes.c_int,
    "long long": ctypes.c_longlong,
    "unsigned long long": ctypes.c_ulonglong,
    "float": ctypes.c_float,
    "double": ctypes.c_double,
}
_C_NAMES = {"pointer": "void*", "int": "int", "long long": "long long",
            "unsigned long long": "unsigned long long", "float": "float", "double": "double"}

_built: dict[str, EmulatorRuntime] = {}


def compiler() -> str | None:
    """The g++ the emulator needs (C++20 for std::barrier), or None when there is none."""
    return shutil.which("g++")


GRID_BARRIER_PARAM = "barrier"
"""A kernel with a pointer parameter of this name is persistent: it synchronises the whole grid on
that counter, so the emulator runs all its blocks at once (emu.h, grid threads)."""

RESIDENT_BLOCKS = 3
"""How many blocks a persistent kernel may launch under the emulator: a few, and not a power of
two, so that blocks own several hidden units and the split is uneven."""


def _mode(info: KernelInfo) -> int:
    """emu::Mode of a kernel: grid threads (persistent: TF_COOPERATIVE or a ``barrier`` counter),
    block threads (__syncthreads) or neither."""
    if info.cooperative or any(p.ctype == "pointer" and p.name == GRID_BARRIER_PARAM
                               for p in info.params):
        return 2
    return 1 if "__syncthreads" in info.source.read_text() else 0


def _shim(info: KernelInfo, mode: int) -> str:
    """A host function ``emu_<name>(grid, block, params...)`` that runs the kernel's threads."""
    params = ", ".join(f"{_C_NAMES[p.ctype]} {p.name}" for p in info.params)
    # cast the void* back to the kernel's own pointer types by calling through its signature
    args = ", ".join(
        f"reinterpret_cast<decltype(_arg_type<{i}>(&{info.name}))>({p.name})"
        if p.ctype == "pointer" else p.name
        for i, p in enumerate(info.params)
    )
    return (
        f'extern "C" void emu_{info.name}(unsigned emu_gx, unsigned emu_gy, unsigned emu_gz, unsigned emu_bx, '
        f"unsigned emu_by, unsigned emu_bz, {params}) {{\n"
        f"    emu::launch(dim3(emu_gx, emu_gy, emu_gz), dim3(emu_bx, emu_by, emu_bz), {mode}, [&] {{ {info.name}({args}); }});\n"
        f"}}\n"
    )


def _includes(csrc: Path) -> list[str]:
    """g++'s include path: this folder first (its emu.h over any a kernel folder holds), then the
    kernels' own (common.cuh and the other headers)."""
    return [f"-I{TOOLS}", f"-I{csrc}"]


_PRELUDE = """
#include <tuple>
// The type of parameter I of a function, for casting void* arguments back.
template <std::size_t I, typename... Args>
auto _arg_type(void (*)(Args...)) -> std::tuple_element_t<I, std::tuple<Args...>>;
// The dynamic shared memory of the next launch (TF_DYNAMIC_SHARED), per block.
extern "C" void emu_set_dynamic_shared(unsigned long long bytes) { emu::pending_dynamic_shared = bytes; }
"""

SHARED_MEMORY_PER_BLOCK = 227 * 1024
"""The shared memory a block may use under the emulator: an H100's (sharedMemPerBlockOptin), so
that the twins plan their launches as they would there."""


TRACE_FLAGS = ["-g", "-fsanitize=thread", "-fno-gnu-unique", "-DTINYFLOW_EMU_TRACE"]  # no unique symbols: a
# template's static __shared__ (a thread_local in this build) stays in the library that made it
"""How the instrumented variant compiles the kernels (``build(instrument=True)``): g++'s
ThreadSanitizer pass at compile time only, which puts a ``__tsan_read4(addr)``-style call before
every load and store; the library links without libtsan and emu_trace.h answers the calls
(the coalescing report, cuda_tools/coalescing.py; the bank-conflict report,
cuda_tools/bank_conflicts.py). ``-g`` lets addr2line name the access sites;
TINYFLOW_EMU_TRACE makes plain ``__shared__`` arrays thread-locals, where the recorder finds them
(emu.h)."""


class TraceRow(ctypes.Structure):
    """Sums over the warp-wide requests of one access site of a launch, and the accesses of that
    site outside the argument's bytes (emu_trace.h's Row)."""

    _fields_ = [("site", ctypes.c_uint64), ("write", ctypes.c_uint32), ("arg", ctypes.c_uint32),
                ("requests", ctypes.c_uint64), ("lanes", ctypes.c_uint64),
                ("sectors", ctypes.c_uint64), ("minimal", ctypes.c_uint64), ("bytes", ctypes.c_uint64),
                ("stray", ctypes.c_uint64), ("overhang", ctypes.c_uint64), ("reach", ctypes.c_uint64)]


class BankRow(ctypes.Structure):
    """Sums over the warp-wide shared-memory requests of one access site of a launch
    (emu_trace.h's BankRow)."""

    _fields_ = [("site", ctypes.c_uint64), ("write", ctypes.c_uint32), ("unused", ctypes.c_uint32),
                ("requests", ctypes.c_uint64), ("lanes", ctypes.c_uint64),
                ("wavefronts", ctypes.c_uint64), ("ideal", ctypes.c_uint64)]


ALLOCATION_ALIGNMENT = 256
"""cudaMalloc's alignment. A traced launch takes each NumPy allocation (an array that owns its
data, or the one a view's chain of bases ends at) as starting on such a boundary, less its real
misalignment below 16 bytes (which the kernels' 16-byte accesses see), and a view at its byte
offset from there (:func:`device_address`): its copies of the arguments lie so, and a kernel that
aligns to sectors by its pointers finds the boundaries the recorder counts."""

GUARD_BYTES = 64 * 1024
"""The least guard a traced launch puts before and after its copy of each argument (more for an
argument larger than this: as many bytes as it holds). An access there is a stray one."""

GUARD_FILL = 0xFF
"""What the guards hold: NaN in every float type, so a stray load that reaches a result shows."""


def device_address(arr: np.ndarray) -> int:
    """``arr``'s address as it would be on a GPU modulo ALLOCATION_ALIGNMENT: its allocation (the
    array its chain of bases ends at) starting on a 256-byte boundary plus that allocation's real
    misalignment below 16 bytes, and ``arr`` at its byte offset in it."""
    root = arr
    while isinstance(root.base, np.ndarray):
        root = root.base
    start = int(root.__array_interface__["data"][0])
    address = int(arr.__array_interface__["data"][0])
    return address - start % ALLOCATION_ALIGNMENT + start % 16


class _GuardedCopy:
    """The pointer arguments of a traced launch that share bytes (one array passed twice, views
    that overlap), copied into one buffer with a guard on each side: [guard | copy | guard]. The
    copy starts where the arguments' allocation would on a GPU (device_address, mod 256), so the
    recorder's sectors are the GPU's; nothing but this launch's arguments lies in the buffer, so
    an access to its guards is an access outside every argument, never a local, a constant or the
    emulator's own state."""

    def __init__(self, arrays: list[np.ndarray]) -> None:
        self.arrays = arrays
        starts = [int(a.__array_interface__["data"][0]) for a in arrays]
        self.lo = min(starts)
        self.hi = max(s + a.nbytes for s, a in zip(starts, arrays))
        span = self.hi - self.lo
        lowest = arrays[starts.index(self.lo)]
        guard = -(-max(GUARD_BYTES, span) // ALLOCATION_ALIGNMENT) * ALLOCATION_ALIGNMENT
        self.buffer = np.full(2 * guard + span + ALLOCATION_ALIGNMENT, GUARD_FILL, np.uint8)
        base = int(self.buffer.ctypes.data)
        shift = (device_address(lowest) - (base + guard)) % ALLOCATION_ALIGNMENT
        self.start = base + guard + shift  # where self.lo is copied
        self.guard = (base, base + self.buffer.nbytes)
        ctypes.memmove(self.start, self.lo, span)

    def pointer(self, arr: np.ndarray) -> int:
        """Where ``arr`` (one of the arrays) lies in the copy."""
        return self.start + int(arr.__array_interface__["data"][0]) - self.lo

    def restore(self) -> None:
        """Copy the launch's writes back (unless every array is read-only: none may be written)."""
        if any(a.flags.writeable for a in self.arrays):
            ctypes.memmove(self.lo, self.start, self.hi - self.lo)


def _guarded_copies(arrays: list[np.ndarray]) -> list[_GuardedCopy]:
    """One :class:`_GuardedCopy` per group of ``arrays`` whose bytes overlap."""
    spans = sorted((int(a.__array_interface__["data"][0]), a.nbytes, n) for n, a in enumerate(arrays))
    groups: list[tuple[int, list[np.ndarray]]] = []  # (end of the group's bytes, its arrays)
    for start, nbytes, n in spans:
        if groups and start < groups[-1][0]:
            end, members = groups[-1]
            groups[-1] = (max(end, start + nbytes), members + [arrays[n]])
        else:
            groups.append((start + nbytes, [arrays[n]]))
    return [_GuardedCopy(members) for _, members in groups]


TraceSink = Callable[[str, list[str], list[TraceRow]], None]
"""Receives each traced launch: kernel name, its pointer parameters' names (a row's ``arg``
indexes them) and the rows."""

BankSink = Callable[[str, list[BankRow]], None]
"""Receives each launch traced for shared memory: kernel name and its rows."""


class EmulatorRuntime:
    """A runtime (see tinyflow_cuda.runtime) whose arrays are NumPy and whose GPU is g++."""

    xp = np

    def __init__(self, library: ctypes.CDLL, kernels: dict[str, KernelInfo]) -> None:
        self.kernels = kernels
        self._lib = library
        self._fns: dict[str, Any] = {}
        for name, info in kernels.items():
            fn = getattr(library, f"emu_{name}")
            fn.argtypes = [ctypes.c_uint] * 6 + [_CTYPES[p.ctype] for p in info.params]
            fn.restype = None
            self._fns[name] = fn
        self.launches: list[str] = []  # the kernels run, in order (tests check the twin ran)
        # One launch at a time: emu.h's gridDim/blockDim are process-wide, and ctypes lets thread
        # ranks call in side by side (a GPU would queue their kernels on its streams).
        self._lock = threading.Lock()
        # The instrumented variant (build(instrument=True)) records the memory accesses of each
        # launch while trace_sink is set, and hands them to it.
        self.instrumented = hasattr(library, "emu_trace_begin")
        self.library_path = Path(library._name)
        self.trace_sink: TraceSink | None = None
        self.bank_sink: BankSink | None = None  # shared-memory requests (bank_conflicts.py)

    @classmethod
    def build(cls, csrc: Path = CSRC, cache_dir: Path | None = None,
              instrument: bool = False) -> EmulatorRuntime:
        """Compile every .cu file under ``csrc`` into one shared library (cached by content).

        ``instrument=True`` builds a separate library (its own cache entry) whose launches can
        record their memory accesses (see ``TRACE_FLAGS`` and cuda_tools/coalescing.py); the
        plain one is unchanged.
        """
        gxx = compiler()
        if gxx is None:
            raise RuntimeError("the CUDA emulator needs g++ on PATH")
        kernels = discover(csrc)
        files = sorted({info.source for info in kernels.values()})
        unit = ["#include \"emu.h\"", _PRELUDE]
        unit += [f'#include "{path}"' for path in files]
        for info in kernels.values():
            unit.append(_shim(info, _mode(info)))
        text = "\n".join(unit)
        sources = [p for p in sorted(csrc.glob("*")) if p.is_file()] + [TOOLS / "emu.h"]
        digest = hashlib.sha256((text + "".join(p.read_text() for p in sources)).encode()).hexdigest()[:16]
        if instrument:
            return cls._build_instrumented(text, digest, kernels, csrc, cache_dir)
        if digest in _built:
            return _built[digest]
        cache = cache_dir or Path(tempfile.gettempdir()) / "tinyflow_cuda_emu"
        cache.mkdir(parents=True, exist_ok=True)
        lib_path = cache / f"kernels_{digest}.so"
        if not lib_path.exists():
            src_path = cache / f"kernels_{digest}.cpp"
            src_path.write_text(text)
            tmp = cache / f"kernels_{digest}.{os.getpid()}.tmp.so"
            # no _FORTIFY_SOURCE: its longjmp check refuses emu.h's switches between fiber stacks
            cmd = [gxx, "-std=c++20", "-O1", "-U_FORTIFY_SOURCE", "-shared", "-fPIC", "-pthread",
                   *_includes(csrc), "-x", "c++", str(src_path), "-o", str(tmp)]
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode != 0:
                raise RuntimeError(f"emulator build failed:\n{' '.join(cmd)}\n{done.stderr}")
            tmp.replace(lib_path)  # atomic: parallel test workers never load a half-written .so
        runtime = _built[digest] = cls(ctypes.CDLL(str(lib_path)), kernels)
        return runtime

    @classmethod
    def _build_instrumented(cls, text: str, digest: str, kernels: dict[str, KernelInfo],
                            csrc: Path, cache_dir: Path | None) -> EmulatorRuntime:
        """The kernels compiled with ``TRACE_FLAGS`` (-c), the recorder uninstrumented, linked."""
        gxx = compiler()
        assert gxx is not None
        recorder = TOOLS / "emu_trace.h"
        tag = hashlib.sha256((digest + " ".join(TRACE_FLAGS) + recorder.read_text()).encode())
        digest = "trace_" + tag.hexdigest()[:16]
        if digest in _built:
            return _built[digest]
        cache = cache_dir or Path(tempfile.gettempdir()) / "tinyflow_cuda_emu"
        cache.mkdir(parents=True, exist_ok=True)
        lib_path = cache / f"kernels_{digest}.so"
        if not lib_path.exists():
            pid = os.getpid()
            kernels_src, trace_src = cache / f"kernels_{digest}.cpp", cache / f"recorder_{digest}.cpp"
            kernels_src.write_text(text)
            trace_src.write_text(f'#include "emu.h"\n#include "{recorder}"\n')
            base = [gxx, "-std=c++20", "-O1", "-U_FORTIFY_SOURCE", "-fPIC", "-pthread",
                    *_includes(csrc), "-x", "c++"]
            objects = [cache / f"kernels_{digest}.{pid}.o", cache / f"recorder_{digest}.{pid}.o"]
            tmp = cache / f"kernels_{digest}.{pid}.tmp.so"
            compiles = [base + TRACE_FLAGS + ["-c", str(kernels_src), "-o", str(objects[0])],
                        base + ["-c", str(trace_src), "-o", str(objects[1])]]
            # no libtsan: -Wl,--no-undefined fails on any hook emu_trace.h does not supply
            link = [gxx, "-shared", "-pthread", "-Wl,--no-undefined", *map(str, objects), "-ldl",
                    "-o", str(tmp)]
            running = [(cmd, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                              text=True)) for cmd in compiles]  # side by side
            results = [(cmd, proc.communicate()[1], proc.returncode) for cmd, proc in running]
            done = subprocess.run(link, capture_output=True, text=True)
            for cmd, stderr, code in [*results, (link, done.stderr, done.returncode)]:
                if code != 0:
                    raise RuntimeError(f"instrumented emulator build failed:\n{' '.join(cmd)}\n"
                                       f"{stderr}")
            tmp.replace(lib_path)
            for obj in objects:
                obj.unlink(missing_ok=True)
        runtime = _built[digest] = cls(ctypes.CDLL(str(lib_path)), kernels)
        runtime._lib.emu_trace_begin.argtypes = [ctypes.POINTER(ctypes.c_ulonglong), ctypes.c_int,
                                                 ctypes.c_int]
        runtime._lib.emu_trace_end.restype = ctypes.c_int
        runtime._lib.emu_trace_base.restype = ctypes.c_ulonglong
        runtime._lib.emu_trace_bank_count.restype = ctypes.c_int
        return runtime

    def trace_base(self) -> int:
        """The load address of the instrumented library (a site minus it is what addr2line reads)."""
        return int(self._lib.emu_trace_base())

    def launch(self, name: str, grid: int | tuple[int, ...], block: int | tuple[int, ...],
               args: Sequence[Any], shared_mem: int = 0) -> None:
        info = self.kernels[name]
        if not 0 <= shared_mem <= self.shared_memory_per_block():
            raise ValueError(f"kernel {name}: shared_mem={shared_mem} bytes, the most a block may "
                             f"have is {self.shared_memory_per_block()}")
        if len(args) != len(info.params):
            raise TypeError(f"kernel {name} takes {len(info.params)} arguments, got {len(args)}")
        converted = []
        for param, value in zip(info.params, args):
            if param.ctype == "pointer":
                if value is None:
                    converted.append(None)
                    continue
                if not isinstance(value, np.ndarray) or not value.flags.c_contiguous:
                    raise TypeError(f"kernel {name}: argument {param.name} must be a contiguous "
                                    f"NumPy array, got {type(value).__name__}")
                converted.append(value.ctypes.data)
            else:
                converted.append(value)
        with self._lock:
            self.launches.append(name)
            self._lib.emu_set_dynamic_shared(ctypes.c_ulonglong(shared_mem))
            if (self.trace_sink is not None or self.bank_sink is not None) and self.instrumented:
                self._traced_launch(info, dim3(grid), dim3(block), args, converted)
            else:
                self._fns[name](*dim3(grid), *dim3(block), *converted)

    def _traced_launch(self, info: KernelInfo, grid: tuple[int, int, int],
                       block: tuple[int, int, int], args: Sequence[Any], converted: list[Any]) -> None:
        """Run a launch recording the accesses to its pointer arguments (and to shared memory
        where bank_sink is set); hand them to trace_sink (and bank_sink). The kernel runs on
        guarded copies of the arguments (:class:`_GuardedCopy`), written back after it."""
        pointers = [(n, param.name, value) for n, (param, value) in enumerate(zip(info.params, args))
                    if param.ctype == "pointer" and value is not None]
        copies = _guarded_copies([value for _, _, value in pointers])
        owner = {id(a): copy for copy in copies for a in copy.arrays}
        names, ranges = [], []
        for n, name, value in pointers:
            copy = owner[id(value)]
            converted[n] = start = copy.pointer(value)
            names.append(name)
            ranges += [start, start + value.nbytes, *copy.guard]
        table = (ctypes.c_ulonglong * max(1, len(ranges)))(*ranges)
        fold_by_block = 0 if _mode(info) == 2 else 1  # persistent kernels interleave their blocks
        self._lib.emu_trace_begin(table, len(names), fold_by_block)
        self._lib.emu_trace_shared(int(self.bank_sink is not None))
        try:
            self._fns[info.name](*grid, *block, *converted)
        finally:
            count = self._lib.emu_trace_end()
            for copy in copies:
                copy.restore()
        if self.trace_sink is not None:
            rows = (TraceRow * max(1, count))()
            self._lib.emu_trace_rows(rows)
            self.trace_sink(info.name, names, list(rows[:count]))
        if self.bank_sink is not None:
            banks = self._lib.emu_trace_bank_count()
            bank_rows = (BankRow * max(1, banks))()
            self._lib.emu_trace_bank_rows(bank_rows)
            self.bank_sink(info.name, list(bank_rows[:banks]))

    def shared_memory_per_block(self) -> int:
        return SHARED_MEMORY_PER_BLOCK

    def resident_blocks(self, name: str, block: int) -> int:
        """Blocks of a persistent kernel that run at once: all of them, as threads; a few."""
        return RESIDENT_BLOCKS

    def on_device_of(self, arr: Any) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()

    def owns(self, arr: Any) -> bool:
        return isinstance(arr, np.ndarray)

    def address(self, arr: Any) -> int:
        return int(arr.__array_interface__["data"][0])  # the emulator's "device" is host memory
