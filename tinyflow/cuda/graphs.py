"""CUDA graphs with PyTorch's names: ``CUDAGraph``, ``graph``, ``make_graphed_callables``.

A CUDA graph records a sequence of kernel launches once and replays it with one launch, so the
host's cost per kernel (10-30 us of Python and CuPy) is paid once at capture instead of every
step. What a replay reads and writes is fixed at capture: the same arrays (static inputs, the
outputs, every intermediate, allocated from the graph's private memory pool) and the same kernel
arguments. So whatever changes between replays must live in device memory:

- inputs: copy each new batch into the static input arrays before ``replay()``;
- values a step computes on the host (learning rate, Adam's step, dropout's seed, the loss scale):
  ops and optimizers take a *slot* of the capture (``tinyflow.capture.Capture``) instead of a kernel
  argument; ``replay()`` refills every slot, in the order they were taken, before the launch.

While capturing nothing runs (the captured work runs at the first replay), nothing may be read on
the host (a read raises, and the capture is void), and no Python-side state that the step would
change (a step counter, a generator) changes: the slots' functions do it at each replay.

The CUDA side (stream, pool, CuPy) is ``tinyflow_cuda.graphs``, reached through tinyflow.device.
"""
from __future__ import annotations

import contextlib
from typing import Any

from tinyflow.capture import Capture, capturing
from tinyflow.device import Device, _reads, cuda_backend, cuda_graphs, device_check, forbid_host_reads

__all__ = ["CUDAGraph", "graph", "make_graphed_callables", "graph_pool_handle", "is_current_stream_capturing"]

CAPTURE_ERROR_MODES = ("global", "thread_local", "relaxed")


def _require(what: str) -> None:
    if not cuda_backend().is_available():
        raise RuntimeError(f"tinyflow.cuda.{what}: CUDA graphs need a CUDA device "
                           f"({cuda_backend().unavailable_reason()}); on the CPU run the step as it is")


def is_current_stream_capturing() -> bool:
    """True while this thread's current CUDA stream is capturing a graph."""
    return cuda_backend().is_available() and cuda_graphs().is_capturing()


def graph_pool_handle() -> Any:
    """A memory pool that several graphs may share (``CUDAGraph.capture_begin(pool=...)``); safe
    when they are replayed in the order they were captured, as in PyTorch."""
    _require("graph_pool_handle()")
    return cuda_graphs().new_pool()


class CUDAGraph:
    """``torch.cuda.CUDAGraph``: one captured graph of device 0, its private pool and its slots.

    ``capture_begin(pool=None)`` ... ``capture_end()`` capture this thread's work (use
    ``with tinyflow.cuda.graph(g):``); ``replay()`` refreshes the slots and launches it;
    ``reset()`` drops it; ``pool()`` is its memory pool, to share with another graph.
    """

    def __init__(self, keep_graph: bool = False) -> None:
        self._backend: Any = None
        self._capture: Capture | None = None
        self._scope: contextlib.ExitStack | None = None
        self._checks: dict = {}  # the device checks (tinyflow.device.device_check) the captured step makes
        self._pending: dict | None = None  # those made before the capture, put back at its end
        self.device = Device("cuda", 0)

    @property
    def capture(self) -> Capture | None:
        """The slots this graph's replays refill (``tinyflow.capture.Capture``), once captured."""
        return self._capture

    def capture_begin(self, pool: Any = None, capture_error_mode: str = "global") -> None:
        """Start capturing on a side stream, allocating from ``pool`` (a new private pool if None).

        ``capture_error_mode`` is accepted as in PyTorch; CuPy captures in relaxed mode always,
        because its memory pool may call cudaMalloc during a capture, which the others forbid.
        """
        _require("CUDAGraph.capture_begin()")
        if capture_error_mode not in CAPTURE_ERROR_MODES:
            raise ValueError(f"CUDAGraph.capture_begin: capture_error_mode must be one of {CAPTURE_ERROR_MODES}, "
                             f"got {capture_error_mode!r}")
        if self._backend is not None:
            raise RuntimeError("CUDAGraph.capture_begin: this graph was captured already; reset() it first")
        backend = cuda_graphs().StreamGraph(self.device.index, pool)
        scope = contextlib.ExitStack()
        capture = scope.enter_context(capturing(Capture(self.device, allocate=backend.allocate_slot)))
        scope.enter_context(forbid_host_reads())  # a host read raises at once, naming the read
        try:
            backend.begin()
        except BaseException:
            scope.close()
            raise
        self._backend, self._capture, self._scope = backend, capture, scope
        # Device checks made while capturing flag arrays that the replays fill: keep them apart
        # (no OR with the checks pending from before, which would be captured too) and make them
        # pending again after every replay, so the next host read still checks each step.
        self._pending, _reads.pending = _reads.pending, None

    def capture_end(self) -> None:
        """End the capture; the graph is ready to ``replay()``."""
        if self._scope is None:
            raise RuntimeError("CUDAGraph.capture_end() without capture_begin()")
        scope, self._scope = self._scope, None
        self._checks, _reads.pending = _reads.pending or {}, self._pending
        try:
            self._backend.end()
        except BaseException:
            self._backend = self._capture = None
            raise
        finally:
            scope.close()

    def _abort(self) -> None:
        """Give up a capture that raised: nothing of it is kept."""
        scope, self._scope = self._scope, None
        if self._backend is not None:
            self._backend.abort()
        if scope is not None:
            scope.close()
            _reads.pending = self._pending
        if self._capture is not None:
            for undo in self._capture.on_abort:
                undo()
        self._backend = self._capture = None

    def replay(self) -> None:
        """Refill the slots (host-to-device copies, outside the graph), then launch the graph."""
        if self._backend is None or self._scope is not None or self._capture is None:
            raise RuntimeError("CUDAGraph.replay() before a capture ended")
        self._capture.refresh()
        self._backend.launch()
        for key, (bad, value, make_error) in self._checks.items():
            # a check pending for the first time keeps its arrays: copies, since the next replay
            # rewrites the graph's own flags before this one is read (later ones are OR-ed anew)
            first = not _reads.pending or key not in _reads.pending
            device_check(bad.copy() if first else bad, value.copy() if first else value, make_error, key,
                         defer=True)

    def reset(self) -> None:
        """Drop the graph and its slots (its pool goes when nothing else holds it)."""
        if self._scope is not None:
            self._abort()
        if self._backend is not None:
            self._backend.reset()
        self._backend = self._capture = None

    def pool(self) -> Any:
        """The memory pool of this graph, for ``capture_begin(pool=...)`` of another."""
        if self._backend is None:
            raise RuntimeError("CUDAGraph.pool(): capture first")
        return self._backend.pool

    @property
    def launches(self) -> int:
        """How many times the graph was replayed (the strict CuPy stand-in counts; else -1)."""
        graph = getattr(self._backend, "graph", None)
        return int(getattr(graph, "launches", -1))


class graph:  # noqa: N801 (PyTorch's name)
    """``with tinyflow.cuda.graph(g):`` captures the block into ``g`` (``torch.cuda.graph``).

    The device is synchronized first (so the capture starts from finished work); on an error in
    the block the capture is dropped and the error goes on. ``stream`` is accepted for PyTorch's
    signature: tinyflow always captures on a side stream of its own.
    """

    def __init__(self, cuda_graph: CUDAGraph, pool: Any = None, stream: Any = None,
                 capture_error_mode: str = "global") -> None:
        self.cuda_graph = cuda_graph
        self.pool = pool
        self.capture_error_mode = capture_error_mode

    def __enter__(self) -> None:
        _require("graph()")
        self.cuda_graph.device.synchronize()
        self.cuda_graph.capture_begin(self.pool, self.capture_error_mode)

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        if exc_type is not None:
            self.cuda_graph._abort()
            return False
        self.cuda_graph.capture_end()
        return False


# ---- make_graphed_callables -----------------------------------------------------------------------
def _flat(value: Any) -> list[Any]:
    from tinyflow.tensor import Tensor

    if isinstance(value, Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _flat(v)]
    raise TypeError(f"make_graphed_callables: outputs must be Tensors or tuples of Tensors, got {type(value).__name__}")


def make_graphed_callables(callables: Any, sample_args: Any, num_warmup_iters: int = 3,
                           allow_unused_input: bool = False, pool: Any = None) -> Any:
    """``torch.cuda.make_graphed_callables``: each callable (a Module or a function) becomes one
    whose forward is a graph replay and whose backward is another.

    ``sample_args`` (a tuple of Tensors per callable) are the static inputs: every later call must
    pass Tensors of the same shapes and dtypes, which are copied into them. Supported: positional
    Tensor arguments, outputs that are a Tensor or a tuple of Tensors, parameters of a Module
    (their gradients accumulate into ``.grad`` as usual). Not supported (as in PyTorch, or not
    yet): keyword arguments, outputs other than Tensors, a Module with hooks, double backward, a
    Module called in another train/eval mode than it was captured in.
    """
    single = not isinstance(callables, tuple)
    fns = (callables,) if single else callables
    samples = (sample_args,) if single else sample_args
    if len(fns) != len(samples):
        raise ValueError(f"make_graphed_callables: {len(fns)} callables but {len(samples)} sample_args tuples")
    made = [_graph_callable(fn, tuple(args), num_warmup_iters, allow_unused_input, pool)
            for fn, args in zip(fns, samples)]
    return made[0] if single else tuple(made)


def _graph_callable(fn: Any, static_inputs: tuple[Any, ...], warmup: int, allow_unused: bool, pool: Any) -> Any:
    """One graphed callable: warm up eagerly, capture forward, then backward, from one pool."""
    from tinyflow.autograd.engine import grad
    from tinyflow.autograd.function import Function
    from tinyflow.autograd.grad_mode import is_grad_enabled
    from tinyflow.nn import Module
    from tinyflow.tensor import Tensor, ones_like, zeros_like

    _require("make_graphed_callables()")
    if not all(isinstance(t, Tensor) for t in static_inputs):
        raise TypeError("make_graphed_callables: sample_args must be Tensors (positional arguments only)")
    params = tuple(p for p in fn.parameters() if p.requires_grad) if isinstance(fn, Module) else ()
    train = is_grad_enabled() and (any(t.requires_grad for t in static_inputs) or bool(params))
    wrt = [t for t in static_inputs if t.requires_grad] + list(params)

    def backward_of(outputs: list[Any], grad_outputs: list[Any]) -> tuple[Any, ...]:
        differentiable = [(o, g) for o, g in zip(outputs, grad_outputs) if o.requires_grad]
        return grad([o for o, _ in differentiable], wrt, grad_outputs=[g for _, g in differentiable],
                    allow_unused=allow_unused)

    for _ in range(warmup):  # eager: lazily made state (cuBLAS handles, autocast caches) exists before capture
        outs = _flat(fn(*static_inputs))
        if train:
            backward_of(outs, [ones_like(o) for o in outs])
    forward_graph = CUDAGraph()
    with graph(forward_graph, pool=pool):
        static_outputs = _flat(fn(*static_inputs))
    backward_graph = CUDAGraph()
    static_grad_outputs = [zeros_like(o) for o in static_outputs]
    static_grads: tuple[Any, ...] = ()
    if train:
        with graph(backward_graph, pool=forward_graph.pool()):
            static_grads = backward_of(static_outputs, static_grad_outputs)
    grads_by_id = {id(t): g for t, g in zip(wrt, static_grads)}
    n_in = len(static_inputs)

    class Graphed(Function):
        """The captured forward and backward as one autograd op over (*inputs, *params)."""

        @staticmethod
        def forward(ctx: Any, *arrays: Any) -> Any:
            for static, new in zip(static_inputs, arrays[:n_in]):
                if static.array is not new:
                    static.array[...] = new
            forward_graph.replay()
            outs = tuple(o.array for o in static_outputs)
            return outs if len(outs) > 1 else outs[0]

        @staticmethod
        def backward(ctx: Any, *grads: Any) -> tuple[Any, ...]:
            if not train:
                raise RuntimeError("make_graphed_callables: this callable was captured without gradients "
                                   "(no input or parameter required them)")
            for static, g in zip(static_grad_outputs, grads):
                if g is None:
                    static.array.fill(0)
                else:
                    static.array[...] = g
            backward_graph.replay()
            found = [grads_by_id.get(id(t)) for t in (*static_inputs, *params)]
            # copies: the next replay overwrites the static gradients, which autograd may keep as .grad
            return tuple(None if g is None else g.array.copy() for g in found)

    def graphed(*args: Any) -> Any:
        if len(args) != n_in:
            raise TypeError(f"graphed callable: captured with {n_in} arguments, called with {len(args)}")
        for i, (static, new) in enumerate(zip(static_inputs, args)):
            if tuple(new.shape) != tuple(static.shape) or new.dtype != static.dtype:
                raise ValueError(f"graphed callable: argument {i} is {tuple(new.shape)} {new.dtype}, captured as "
                                 f"{tuple(static.shape)} {static.dtype}: a graph replays fixed shapes")
        return Graphed.apply(*args, *params)

    if isinstance(fn, Module):
        fn.forward = graphed  # the module now replays (as PyTorch's graphed module does)
        return fn
    return graphed

