"""Where tinyflow's .cu kernels come from and how they are launched.

Every ``extern "C" __global__`` function in ``tinyflow_cuda/csrc/*.cu`` is a kernel; its
parameter list, parsed from the source, says how to pass each Python argument (``int`` as a
32-bit int, ``long long`` as 64-bit, pointers as device arrays or None for a null pointer).

Two runtimes launch them behind one interface:

- ``CupyRuntime`` (the real one): compiles each .cu file once per device with NVRTC through
  ``cupy.RawModule`` and launches on the current stream.
- ``cuda_tools.emulator.EmulatorRuntime``: compiles the same sources with g++ against a
  CPU emulation of CUDA (csrc/emu.h) and runs them on NumPy arrays, so that a machine without a
  GPU can still test the kernels' arithmetic against the NumPy references.

``tinyflow_cuda.kernels`` asks ``current()`` for the runtime, allocates with its ``xp`` and
launches through it, so the same wrapper code runs under both.
"""
from __future__ import annotations

import contextlib
import math
import re
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

CSRC = Path(__file__).resolve().parent / "csrc"
THREADS = 256  # threads per block of every 1-D launch
MAX_BLOCKS = 65535 * 4  # grid-stride kernels stay correct with fewer blocks than elements

_SIGNATURE = re.compile(r"__global__\s+void\s+(\w+)\s*\(([^)]*)\)")
# A kernel written once for every floating dtype: ``__global__ void im2col_##sfx(const T* x, ...)``
# inside a macro that common.cuh's TF_FLOAT_TYPES instantiates as im2col_f32, _f64, _f16, _bf16.
_GENERIC_SIGNATURE = re.compile(r"__global__\s+void\s+(\w+)_##\s*sfx\s*\(([^)]*)\)")
FLOAT_SUFFIXES = ("f32", "f64", "f16", "bf16")
"""The suffixes TF_FLOAT_TYPES (csrc/common.cuh) gives a generic kernel, one per dtype."""
_SCALAR_TYPES = ("int", "long long", "unsigned long long", "float", "double")


@dataclass(frozen=True)
class Param:
    """One kernel parameter: its C type (``pointer`` for any pointer) and name."""

    ctype: str
    name: str


@dataclass(frozen=True)
class KernelInfo:
    """A kernel's name, the .cu file that defines it, and its parameters in order.

    ``cooperative``: declared ``TF_COOPERATIVE __global__ ...`` (csrc/common.cuh), a persistent
    kernel that calls grid_sync(): launched cooperatively, every block resident at once."""

    name: str
    source: Path
    params: tuple[Param, ...]
    cooperative: bool = False


COOPERATIVE_MARK = "TF_COOPERATIVE"


def _marked_cooperative(source: str, start: int) -> bool:
    """Whether the ``__global__`` at ``start`` follows the TF_COOPERATIVE mark (in a macro too)."""
    return source[:start].rstrip(" \t\n\\").endswith(COOPERATIVE_MARK)


def parse_params(text: str) -> tuple[Param, ...]:
    """Parse a C parameter list such as ``const float* x, int n`` into Params."""
    params = []
    for raw in text.split(","):
        tokens = raw.replace("*", " * ").split()
        tokens = [t for t in tokens if t not in ("const", "__restrict__")]
        if len(tokens) < 2:
            raise ValueError(f"cannot parse kernel parameter {raw.strip()!r}")
        name, ctype_tokens = tokens[-1], tokens[:-1]
        if "*" in ctype_tokens:
            ctype = "pointer"
        else:
            ctype = " ".join(ctype_tokens)
            if ctype not in _SCALAR_TYPES:
                raise ValueError(f"kernel parameter {raw.strip()!r}: unsupported type {ctype!r}")
        params.append(Param(ctype, name))
    return tuple(params)


def discover(csrc: Path = CSRC) -> dict[str, KernelInfo]:
    """Every extern "C" kernel of every .cu file under ``csrc``, by name."""
    kernels: dict[str, KernelInfo] = {}
    for path in sorted(csrc.glob("*.cu")):
        source = path.read_text()
        extern_block = source[source.find('extern "C"'):] if 'extern "C"' in source else ""
        offset = len(source) - len(extern_block)
        found = [(m.group(1), m.group(2), _marked_cooperative(source, offset + m.start()))
                 for m in _SIGNATURE.finditer(extern_block)]
        for match in _GENERIC_SIGNATURE.finditer(source):  # defined in a macro, outside extern "C"
            params = match.group(2).replace("\\", " ")  # the macro's line continuations
            cooperative = _marked_cooperative(source, match.start())
            found += [(f"{match.group(1)}_{sfx}", params, cooperative) for sfx in FLOAT_SUFFIXES]
        for name, params, cooperative in found:
            if name in kernels:
                raise ValueError(f"kernel {name} is defined in both {kernels[name].source.name} "
                                 f"and {path.name}")
            kernels[name] = KernelInfo(name, path, parse_params(params), cooperative)
    return kernels


def dim3(value: int | Sequence[int]) -> tuple[int, int, int]:
    """A grid or block size as CUDA's (x, y, z): an int is (n, 1, 1)."""
    dims = (int(value),) if isinstance(value, int) else tuple(int(v) for v in value)
    if not 1 <= len(dims) <= 3 or any(d < 1 for d in dims):
        raise ValueError(f"a grid or block size is 1 to 3 positive ints, got {value!r}")
    return dims + (1,) * (3 - len(dims))  # type: ignore[return-value]


def grid_for(n: int, threads: int = THREADS) -> int:
    """Blocks for a grid-stride launch over ``n`` elements (at least one)."""
    return max(1, min((int(n) + threads - 1) // threads, MAX_BLOCKS))


class CooperativeLaunchError(RuntimeError):
    """A cooperative launch whose blocks cannot all be resident at once. CuPy would shrink such a
    grid (with a warning) and a persistent kernel would then skip the work of the missing blocks;
    the runtime refuses it before CuPy sees it."""


class Runtime(Protocol):
    """What ``tinyflow_cuda.kernels`` needs from a runtime."""

    xp: Any  # the array module its arrays belong to

    def launch(self, name: str, grid: int | tuple[int, ...], block: int | tuple[int, ...],
               args: Sequence[Any], shared_mem: int = 0) -> None:
        """Run kernel ``name`` on a ``grid`` of ``block``s (ints or (x, y, z) tuples), with
        ``shared_mem`` bytes of dynamic shared memory a block (TF_DYNAMIC_SHARED)."""
        ...

    def shared_memory_per_block(self) -> int:
        """The most shared memory one block may have (bytes, with the opt-in above 48 KB)."""
        ...

    def resident_blocks(self, name: str, block: int) -> int:
        """The most blocks of ``block`` threads of kernel ``name`` that are sure to run at once:
        the grid of a persistent kernel, whose blocks wait for each other at grid barriers."""
        ...

    def on_device_of(self, arr: Any) -> contextlib.AbstractContextManager: ...

    def owns(self, arr: Any) -> bool: ...

    def address(self, arr: Any) -> int:
        """The device address of ``arr``'s first element (for tables of pointers a kernel reads)."""
        ...


def headers_digest(csrc: Path = CSRC) -> str:
    """A short digest of the headers the .cu files include (csrc/*.cuh and *.h)."""
    import hashlib

    digest = hashlib.sha256()
    for path in sorted([*csrc.glob("*.cuh"), *csrc.glob("*.h")]):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


class CupyRuntime:
    """Compile the .cu files with NVRTC (once per file and device) and launch on CuPy arrays."""

    # NVRTC options: C++17, csrc/ on the include path for common.cuh, and a digest of the headers
    # there: CuPy's kernel cache keys on the source text and options, not on what it #includes, so
    # an edited common.cuh would otherwise load the cubin built from the old one
    options = ("-std=c++17", f"-I{CSRC}", f"-DTF_HEADERS={headers_digest()}")
    # and for a file with TF_COOPERATIVE kernels, compiled with enable_cooperative_groups
    cooperative_options = options + ("-DTF_COOPERATIVE_GROUPS",)
    default_shared = 48 * 1024  # dynamic shared memory a launch may use without the opt-in

    def __init__(self, cupy: Any) -> None:
        import numpy as np

        self.xp = cupy
        self._np = np
        self.kernels = discover()
        self._modules: dict[tuple[Path, int], Any] = {}
        self._functions: dict[tuple[str, int], Any] = {}
        self._sm_counts: dict[int, int] = {}
        self._shared_limits: dict[int, int] = {}
        self._shared_set: dict[tuple[str, int], int] = {}  # max_dynamic_shared_size_bytes given
        self._occupancy: dict[tuple[str, int, int, int], int] = {}  # blocks an SM holds, by launch shape
        self._compile_lock = threading.Lock()
        self._scalar = {"int": np.int32, "long long": np.int64, "unsigned long long": np.uint64,
                        "float": np.float32, "double": np.float64}

    def _function(self, name: str) -> Any:
        device = self.xp.cuda.runtime.getDevice()
        key = (name, device)
        fn = self._functions.get(key)
        if fn is None:
            with self._compile_lock:  # thread ranks may ask for the same kernel at once: compile it once
                fn = self._functions.get(key)
                if fn is None:
                    info = self.kernels[name]
                    module = self._modules.get((info.source, device))
                    if module is None:
                        cooperative = any(k.cooperative for k in self.kernels.values()
                                          if k.source == info.source)
                        module = self.xp.RawModule(
                            code=info.source.read_text(),
                            options=self.cooperative_options if cooperative else self.options,
                            enable_cooperative_groups=cooperative)
                        self._modules[(info.source, device)] = module
                    fn = self._functions[key] = module.get_function(name)
        return fn

    def convert(self, name: str, args: Sequence[Any]) -> tuple[Any, ...]:
        """Arguments typed as the kernel's parameters say (None -> a null pointer)."""
        params = self.kernels[name].params
        if len(args) != len(params):
            raise TypeError(f"kernel {name} takes {len(params)} arguments, got {len(args)}")
        out = []
        for param, value in zip(params, args):
            if param.ctype == "pointer":
                out.append(self._np.uint64(0) if value is None else value)
            else:
                out.append(self._scalar[param.ctype](value))
        return tuple(out)

    def launch(self, name: str, grid: int | tuple[int, ...], block: int | tuple[int, ...],
               args: Sequence[Any], shared_mem: int = 0) -> None:
        fn = self._function(name)
        if shared_mem > self.default_shared:  # the opt-in, once per kernel, device and size
            key = (name, self.xp.cuda.runtime.getDevice())
            if self._shared_set.get(key, 0) < shared_mem:
                fn.max_dynamic_shared_size_bytes = int(shared_mem)
                self._shared_set[key] = int(shared_mem)
        # RawKernel.__call__ passes its module's cooperative flag itself (passing it too is a
        # TypeError) and would launch every kernel of a cooperative module cooperatively; its
        # compiled Function (``.kernel``) takes the flag per launch: cooperative only for the
        # TF_COOPERATIVE kernels, whose grids plan_sequence sized to be resident at once.
        launch = getattr(fn, "kernel", fn)
        cooperative = self.kernels[name].cooperative
        if cooperative:  # checked here, per call: no process-wide warnings filter (thread ranks)
            self._refuse_unresident(name, launch, dim3(grid), dim3(block), int(shared_mem))
        launch(dim3(grid), dim3(block), self.convert(name, args), shared_mem=int(shared_mem),
               enable_cooperative_groups=cooperative)

    def _refuse_unresident(self, name: str, function: Any, grid: tuple[int, int, int],
                           block: tuple[int, int, int], shared_mem: int) -> None:
        """Raise CooperativeLaunchError where the grid has more blocks than the device holds at
        once: the test CuPy's launch makes (the kernel's occupancy per SM times the SMs), made
        first, so that CuPy never shrinks the grid of a persistent kernel."""
        blocks, threads = math.prod(grid), math.prod(block)
        limit = self.max_resident(name, threads, shared_mem, function)
        if blocks > limit:
            raise CooperativeLaunchError(
                f"kernel {name}: a cooperative launch of {blocks} blocks of {threads} threads with "
                f"{shared_mem} bytes of shared memory each cannot have every block resident: the device "
                f"holds {limit} at once (CuPy would shrink the grid and the persistent kernel would skip "
                f"the missing blocks' work); plan at most {limit} blocks, or fewer threads or less "
                "shared memory a block")

    def max_resident(self, name: str, threads: int, shared_mem: int = 0, function: Any = None) -> int:
        """The blocks of kernel ``name`` (``threads`` threads and ``shared_mem`` bytes of dynamic
        shared memory each) that the current device runs at once: the compiled kernel's occupancy
        per SM (its registers and shared memory, from the driver) times the SMs."""
        device = self.xp.cuda.runtime.getDevice()
        key = (name, device, int(threads), int(shared_mem))
        per_sm = self._occupancy.get(key)
        if per_sm is None:
            if function is None:
                function = getattr(self._function(name), "kernel", self._function(name))
            per_sm = int(self.xp.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(
                function.ptr, int(threads), int(shared_mem)))
            self._occupancy[key] = per_sm  # the same value whichever thread rank writes it
        return per_sm * self._sm_count(device)

    def shared_memory_per_block(self) -> int:
        """sharedMemPerBlockOptin of the current device (227 KB on an H100)."""
        device = self.xp.cuda.runtime.getDevice()
        limit = self._shared_limits.get(device)
        if limit is None:
            props = self.xp.cuda.runtime.getDeviceProperties(device)
            limit = int(props.get("sharedMemPerBlockOptin", props.get("sharedMemPerBlock", 48 * 1024)))
            self._shared_limits[device] = limit
        return limit

    def resident_blocks(self, name: str, block: int) -> int:
        """One block per SM of the current device. A block of 256 threads without shared memory
        fits on any SM (even at 255 registers a thread), so all of them run at once; other work
        on the GPU can only delay some. A persistent kernel's software grid barrier relies on it
        (and a cooperative launch past what the SMs hold is refused: ``max_resident``)."""
        return self._sm_count(self.xp.cuda.runtime.getDevice())

    def _sm_count(self, device: int) -> int:
        count = self._sm_counts.get(device)
        if count is None:
            props = self.xp.cuda.runtime.getDeviceProperties(device)
            count = self._sm_counts[device] = max(1, int(props["multiProcessorCount"]))
        return count

    def on_device_of(self, arr: Any) -> contextlib.AbstractContextManager:
        return arr.device

    def owns(self, arr: Any) -> bool:
        return isinstance(arr, self.xp.ndarray)

    def address(self, arr: Any) -> int:
        return int(arr.data.ptr)


_override: list[Runtime] = []
_cupy_runtime: CupyRuntime | None = None


def current() -> Runtime:
    """The runtime in force: an override set by ``use()``, else CuPy's."""
    global _cupy_runtime
    if _override:
        return _override[-1]
    if _cupy_runtime is None:
        import tinyflow_cuda

        _cupy_runtime = CupyRuntime(tinyflow_cuda._require())
    return _cupy_runtime


@contextlib.contextmanager
def use(runtime: Runtime) -> Iterator[Runtime]:
    """Run the kernels through ``runtime`` inside the block (the emulator in CPU tests)."""
    _override.append(runtime)
    try:
        yield runtime
    finally:
        _override.pop()
