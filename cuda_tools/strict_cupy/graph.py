"""The stand-in's CUDA stream capture and graphs (``Stream.begin_capture`` / ``end_capture``,
``cupy.cuda.Graph``).

While a stream captures, the work a thread issues to it does not run, as on a GPU: each call
allocates its outputs, *poisoned* (NaN for floats, the byte 0xA5 for integers, True for bools), so
host code that depends on a value computed during the capture shows it, and leaves a replay
closure; ``Graph.launch()`` runs the closures in order, each writing into the very arrays the
capture allocated (a view stays a view of the same memory). In-place work (``out=``,
``__setitem__``, ``fill``, kernel launches, ...) is only recorded. The shapes of a call's outputs
come from running it once on the inputs as they are (poisoned or not) and throwing the values
away; a call whose outputs change shape at replay (data-dependent shapes) fails there, naming it.

What CUDA refuses inside a capture raises ``CUDARuntimeError`` (cudaErrorStreamCaptureUnsupported)
and invalidates the capture, as on a GPU: host reads (``get``, ``item``, ``float``, ``bool``, ...),
copies of host arrays to the device (a 0-d host value is allowed: CuPy writes it with a fill
kernel, its value baked into the graph), and synchronizing the capturing stream or the device.

Each allocation made during a capture comes from the allocator in force
(``using_allocator(pool.malloc)``: that pool; else the default pool; memory.py): from the pool's own
blocks, never at the address of an array made before the capture (as on a GPU with a private pool,
so a cache keyed by address misses here too), and is counted in ``Recording.allocations`` and the
pool's ``captured_bytes``, so a test can check that a graph allocated only from its pool.

Where this file sits: above the array (array.py), the current stream (current_stream.py), the
errors and the pools, which it uses; below ``cupy.cuda`` (cuda.py), whose ``Stream`` starts and
ends a capture here. ``capturing``, ``using_allocator``, ``allocator_owner`` and ``IN_PLACE_METHODS``
live in those lower files and are importable from here too.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from cuda_tools.strict_cupy.array import IN_PLACE_METHODS, record  # noqa: F401  (IN_PLACE_METHODS: re-export)
from cuda_tools.strict_cupy.current_stream import capturing
from cuda_tools.strict_cupy.errors import CUDARuntimeError
from cuda_tools.strict_cupy.memory import allocator_owner, using_allocator  # noqa: F401  (re-export)

IN_PLACE_FUNCTIONS = {"copyto", "put", "place", "putmask", "fill_diagonal", "scatter_add", "scatter_max",
                      "scatter_min", "ufunc.at"}
"""Module functions that write into an argument instead of returning a new array."""

UNSUPPORTED = "cudaErrorStreamCaptureUnsupported: operation not permitted when stream is capturing"


def capture_error(what: str) -> Exception:
    """CuPy's error for ``what`` done while a stream captures (a CUDARuntimeError)."""
    return CUDARuntimeError(f"{UNSUPPORTED} ({what}; strict CuPy stand-in: a captured step cannot wait for "
                            "the device nor copy host data to it)")


# ---- poisoning ----------------------------------------------------------------------------------
def poison(a: np.ndarray) -> None:
    """Fill a fresh capture allocation with values no real step computes."""
    if a.size == 0:
        return
    if a.dtype == np.bool_:
        a.fill(True)
    elif np.issubdtype(a.dtype, np.integer):
        a.fill(np.full(a.dtype.itemsize, 0xA5, dtype=np.uint8).view(a.dtype)[0])
    else:
        a.fill(np.nan)  # floats (ml_dtypes' too) and complex


def _leaves(value: Any) -> list[np.ndarray]:
    if isinstance(value, np.ndarray):
        return [value]
    if isinstance(value, (tuple, list)):
        return [a for v in value for a in _leaves(v)]
    if isinstance(value, dict):
        return [a for v in value.values() for a in _leaves(v)]
    return []


def _map_leaves(value: Any, fn: Callable[[np.ndarray], np.ndarray]) -> Any:
    """``value`` with each array leaf replaced by ``fn(leaf)``, in ``_leaves`` order."""
    if isinstance(value, np.ndarray):
        return fn(value)
    if isinstance(value, tuple):
        return tuple(_map_leaves(v, fn) for v in value)
    if isinstance(value, list):
        return [_map_leaves(v, fn) for v in value]
    if isinstance(value, dict):
        return {k: _map_leaves(v, fn) for k, v in value.items()}
    return value


def _as_arrays(value: Any) -> Any:
    """NumPy scalars as 0-d arrays (memory the replay can write into), in nested results too."""
    if isinstance(value, np.generic):
        return np.array(value)
    if isinstance(value, tuple):
        return tuple(_as_arrays(v) for v in value)
    if isinstance(value, list):
        return [_as_arrays(v) for v in value]
    return value


def _root(a: np.ndarray) -> np.ndarray:
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


# ---- a capture in progress ----------------------------------------------------------------------
class Recording:
    """What one stream capture has recorded: replay closures in order, the calls they stand for
    (``launches.Call``), the allocations and the pool of each."""

    def __init__(self, stream: Any, mode: int) -> None:
        self.stream = stream
        self.mode = mode
        self.nodes: list[Callable[[], None]] = []
        self.calls: list[Any] = []  # the record() entries made while capturing
        self.allocations: list[tuple[int, Any]] = []  # (bytes, pool)
        self.invalidated: str | None = None  # why, once a refused operation invalidated the capture
        self._fresh: set[int] = set()  # ids of the root arrays allocated (poisoned) here

    # -- refusals
    def refuse(self, what: str) -> Exception:
        """Invalidate the capture and return the error to raise for ``what``."""
        self.invalidated = self.invalidated or what
        return capture_error(what)

    # -- allocation
    def allocate(self, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        """A new array from the allocator in force (its pool's own memory), poisoned."""
        owner = allocator_owner()
        a = owner._capture_array(tuple(shape), dtype)
        self.allocations.append((int(a.nbytes), owner))
        self._fresh.add(id(_root(a)))
        poison(a)
        return a

    # -- calls
    def defer(self, work: Callable[[], Any]) -> None:
        """In-place work: recorded for replay, not run now."""
        self.nodes.append(lambda: (work(), None)[1])

    def run(self, name: str, impl: Callable[..., Any], args: Any, kwargs: dict[str, Any],
            replay: bool = True) -> Any:
        """A call that returns new arrays (or views): its outputs now (fresh ones allocated and
        poisoned), and a replay closure that recomputes them into the same memory. ``replay=False``
        for an allocation only (``empty``): no graph node, its memory is what the work after it
        (or a slot's refresh, before the launch) writes there."""
        inputs = _leaves(args) + _leaves(kwargs)
        try:
            result = _as_arrays(impl(*args, **kwargs))
        except Exception:  # a poisoned index out of range, ...: shape it with zeros in their place
            result = _as_arrays(impl(*self._zeroed(args), **self._zeroed(kwargs)))
        outputs = _leaves(result)
        fresh = {i: self.allocate(o.shape, o.dtype) for i, o in enumerate(outputs)
                 if not any(np.may_share_memory(o, a) for a in inputs)}  # views stay views
        if fresh and replay:
            self.nodes.append(lambda: _replay_into(name, len(outputs), fresh, impl, args, kwargs))
        swapped = iter(range(len(outputs)))
        return _map_leaves(result, lambda o: fresh.get(next(swapped), o))

    def _zeroed(self, value: Any) -> Any:
        if isinstance(value, np.ndarray):
            return np.zeros_like(value) if id(_root(value)) in self._fresh else value
        if isinstance(value, tuple):
            return tuple(self._zeroed(v) for v in value)
        if isinstance(value, list):
            return [self._zeroed(v) for v in value]
        if isinstance(value, dict):
            return {k: self._zeroed(v) for k, v in value.items()}
        return value


def _replay_into(name: str, count: int, fresh: dict[int, np.ndarray], impl: Callable[..., Any], args: Any,
                 kwargs: dict[str, Any]) -> None:
    """Recompute a captured call; write the outputs that were new at capture (``fresh``, by
    position among the ``count`` outputs) where the capture put them."""
    outputs = _leaves(_as_arrays(impl(*args, **kwargs)))
    if len(outputs) != count:
        raise RuntimeError(f"replaying a CUDA graph: {name} returned {len(outputs)} arrays, {count} when captured "
                           "(data-dependent outputs cannot be captured: run that step eagerly)")
    for i, target in fresh.items():
        value = outputs[i]
        if value.shape != target.shape:
            raise RuntimeError(f"replaying a CUDA graph: {name} returned shape {value.shape}, {target.shape} when "
                               "captured (a data-dependent shape cannot be captured: run that step eagerly)")
        target[...] = value


# ---- the graph ----------------------------------------------------------------------------------
class Graph:
    """``cupy.cuda.Graph``: made by ``Stream.end_capture()`` (not by the user, as in CuPy);
    ``launch(stream=None)`` replays the captured work in order."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError("currently this class cannot be initiated by the user and must be created "
                                  "via stream capture")

    @classmethod
    def _from_recording(cls, recording: Recording) -> Graph:
        graph = object.__new__(cls)
        graph._nodes = list(recording.nodes)
        graph._kernels = sum(getattr(c, "kernels", 0) for c in recording.calls)
        graph._memops = sum(getattr(c, "memops", 0) for c in recording.calls)
        graph.launches = 0  # how many times it was launched (tests)
        return graph

    def launch(self, stream: Any = None) -> None:
        """Run every captured call, in capture order (into the capture's arrays)."""
        recording = capturing()
        if recording is not None:  # launched inside another capture: a child graph
            recording.defer(lambda: self.launch(stream))
            return
        record("cuda.Graph.launch", kernels=self._kernels, memops=self._memops)
        self.launches += 1
        for node in self._nodes:
            node()

    def upload(self, stream: Any = None) -> None:
        return None
