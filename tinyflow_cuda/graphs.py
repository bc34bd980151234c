"""CUDA graphs through CuPy: capture on a side stream, allocate from a private pool, replay.

``tinyflow.cuda.graphs`` (PyTorch's ``CUDAGraph`` API) drives this; nothing in tinyflow/ names
CuPy. One ``StreamGraph`` is one capture and the graph it made:

- ``begin()``: a non-blocking side stream made current for this thread, after it waits for the
  work already queued on the current stream; the graph's memory pool (its own ``MemoryPool``, or a
  shared one) made this thread's allocator; ``Stream.begin_capture()`` in relaxed mode, since the
  pool may have to grow (cudaMalloc) during the capture, which the other modes forbid.
- ``end()``: ``Stream.end_capture()`` instantiates the graph; the stream and allocator are given
  back. The pool stays alive with the graph: the arrays the captured work allocated keep their
  addresses (the graph writes there at every replay) and no allocation outside a capture is served
  from it.
- ``launch()``: the graph on the current stream, so it is ordered after the input copies and before
  whatever reads its outputs.

On the strict CuPy stand-in the same calls run its fake capture (cuda_tools/strict_cupy/graph.py).
"""
from __future__ import annotations

import contextlib
from typing import Any

import tinyflow_cuda
from tinyflow_cuda import is_capturing  # defined there: to_device asks it too (re-exported here)

__all__ = ["StreamGraph", "new_pool", "is_capturing"]


def _cupy() -> Any:
    return tinyflow_cuda._require()


def new_pool() -> Any:
    """A private memory pool for one or more graphs (``torch.cuda.graph_pool_handle()``)."""
    return _cupy().cuda.MemoryPool()


class StreamGraph:
    """One capture on a side stream of device ``index``, from ``pool`` (a new pool if None)."""

    def __init__(self, index: int = 0, pool: Any = None) -> None:
        cp = _cupy()
        self.index = int(index)
        with cp.cuda.Device(self.index):
            self.pool = pool if pool is not None else cp.cuda.MemoryPool()
            self.slot_pool = cp.cuda.MemoryPool()  # the capture's slots: memory no graph node touches
            self.stream = cp.cuda.Stream(non_blocking=True)
        self.graph: Any = None
        self._scope: contextlib.ExitStack | None = None

    @property
    def capturing(self) -> bool:
        return self._scope is not None

    def begin(self) -> None:
        """Start capturing this thread's work (see the module docstring)."""
        if self._scope is not None:
            raise RuntimeError("tinyflow.cuda.graphs: capture_begin() twice without capture_end()")
        if self.graph is not None:
            raise RuntimeError("tinyflow.cuda.graphs: this CUDAGraph already holds a graph; reset() it before "
                               "capturing again")
        cp = _cupy()
        scope = contextlib.ExitStack()
        scope.enter_context(cp.cuda.Device(self.index))
        self.stream.wait_event(cp.cuda.get_current_stream().record())  # after what is queued already
        scope.enter_context(self.stream)
        scope.enter_context(cp.cuda.using_allocator(self.pool.malloc))
        try:
            self.stream.begin_capture(cp.cuda.runtime.streamCaptureModeRelaxed)
        except BaseException:
            scope.close()
            raise
        self._scope = scope

    def end(self) -> None:
        """Stop capturing and keep the graph (a capture that an error invalidated raises here)."""
        scope, self._scope = self._scope, None
        if scope is None:
            raise RuntimeError("tinyflow.cuda.graphs: capture_end() without capture_begin()")
        try:
            self.graph = self.stream.end_capture()
        finally:
            scope.close()

    def abort(self) -> None:
        """End a capture that failed, dropping what it recorded (its error was raised already)."""
        scope, self._scope = self._scope, None
        if scope is None:
            return
        try:
            self.stream.end_capture()
        except Exception:  # noqa: BLE001  (invalidated, as expected after the error that brought us here)
            pass
        finally:
            scope.close()

    def allocate_slot(self, shape: tuple[int, ...], dtype: Any) -> Any:
        """A slot of the capture (tinyflow.capture.Capture.allocate), from ``slot_pool``: never a block
        the captured work freed and reuses, so what refresh() writes there stays until it is read."""
        cp = _cupy()
        with cp.cuda.using_allocator(self.slot_pool.malloc):
            return cp.empty(shape, dtype=dtype)

    def launch(self) -> None:
        """Replay the graph on the current stream."""
        if self.graph is None:
            raise RuntimeError("tinyflow.cuda.graphs: replay() before a capture ended (capture_begin/capture_end "
                               "or `with tinyflow.cuda.graph(g):` first)")
        cp = _cupy()
        with cp.cuda.Device(self.index):
            self.graph.launch(cp.cuda.get_current_stream())

    def reset(self) -> None:
        """Drop the graph (its pool's arrays go when nothing else holds them)."""
        self.abort()
        self.graph = None
