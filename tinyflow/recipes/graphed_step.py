"""`--cuda-graph`: the training loop's step captured once as a CUDA graph and replayed.

``fit`` (tinyflow/recipes/loop.py) hands every step to a ``GraphedStep`` when
``FitOptions.cuda_graph`` is on. It runs ``WARMUP_STEPS`` steps eagerly (as PyTorch recommends:
lazily made state such as optimizer buffers, cuBLAS handles and kernel modules exists before the
capture), then captures one whole step (zero_grad, forward under autocast, loss, backward,
clipping, optimizer step) into a ``tinyflow.cuda.CUDAGraph`` whose inputs are static device
tensors. From then on each batch is copied into them and the graph replayed: one launch per step
instead of hundreds. The loss and counts the step returns are the graph's output arrays, which
every replay overwrites; the loop copies them into its step log right after the replay and reads
them at log points only. The schedule stays outside: it writes ``group['lr']``, which the
optimizer reads through a slot of the capture (tinyflow/capture.py) at each replay.

What cannot be captured runs eagerly and says why in one line (once): a step that reads a value
on the host or copies host data to the device (found while capturing: the capture is dropped, that
batch and every later one run eagerly), a batch of another shape (the last partial batch), and a
data-parallel step (its all-reduce runs on MPI or in-process threads, which a graph cannot hold).
"""
from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

WARMUP_STEPS = 3
"""Eager steps before the capture (PyTorch's recommendation for whole-network capture)."""


def _tensors(batch: Any) -> list[Any]:
    """The Tensors of a batch (a Tensor, or tuples and lists of them), in order."""
    from tinyflow.tensor import Tensor

    if isinstance(batch, Tensor):
        return [batch]
    if isinstance(batch, (tuple, list)):
        return [t for b in batch for t in _tensors(b)]
    raise TypeError(f"--cuda-graph: a batch must hold Tensors, got {type(batch).__name__}")


def _static_copy(batch: Any, device: Any) -> Any:
    """A batch of the same structure whose Tensors are fresh device copies (the static inputs)."""
    from tinyflow.device import move
    from tinyflow.tensor import Tensor

    if isinstance(batch, Tensor):
        array = move(batch.array, device)
        return Tensor._from_array(array.copy() if array is batch.array else array, device=device)
    return type(batch)(_static_copy(b, device) for b in batch)


class GraphedStep:
    """One ``fit``'s steps under ``--cuda-graph``: eager warm-up, one capture, then replays.

    ``eager(batch, epoch)`` is the loop's whole training step; ``say`` prints a line (the writing process
    only). ``reason`` says why the steps run eagerly, once that is decided.
    """

    def __init__(self, eager: Callable[[Any, int], Any], device: Any, say: Callable[[str], None],
                 warmup: int = WARMUP_STEPS, data_parallel: bool = False) -> None:
        self.eager = eager
        self.device = device
        self.say = say
        self.warmup = warmup
        self.steps = 0  # steps so far (eager and replayed)
        self.graph: Any = None
        self.static_batch: Any = None
        self.static_out: Any = None
        self.reason: str | None = None
        self.replays = 0
        self.eager_batches = 0  # batches that did not fit the graph (partial ones)
        if device.type != "cuda":
            raise ValueError(f"--cuda-graph needs a CUDA device, the model is on {device}: use --device cuda:0 "
                             "or leave --cuda-graph out")
        if data_parallel:
            self.fall_back("a data-parallel step's all-reduce runs on MPI or in-process threads, which a CUDA "
                           "graph cannot capture (an NCCL all-reduce could be: not wired yet)")

    def fall_back(self, why: str) -> None:
        """Run every step from here on eagerly, saying why once."""
        if self.reason is None:
            self.reason = why
            self.say(f"--cuda-graph: running eagerly: {why}")

    def __call__(self, batch: Any, epoch: int) -> Any:
        self.steps += 1
        if self.reason is not None or self.steps <= self.warmup:
            return self.eager(batch, epoch)
        if self.graph is None:
            return self.capture(batch, epoch)
        if not self.fits(batch):
            if self.eager_batches == 0:
                self.say("--cuda-graph: a batch of another shape (the last partial one) runs eagerly")
            self.eager_batches += 1
            return self.eager(batch, epoch)
        self.load(batch)
        self.graph.replay()
        self.replays += 1
        return self.static_out

    def capture(self, batch: Any, epoch: int) -> Any:
        """Capture one step on a static copy of ``batch``; replay it for this batch. A step that
        cannot be captured runs eagerly (this batch too: the failed capture ran nothing)."""
        from tinyflow.cuda.graphs import CUDAGraph, graph

        self.static_batch = _static_copy(batch, self.device)
        cuda_graph = CUDAGraph()
        try:
            with graph(cuda_graph):
                out = self.eager(self.static_batch, epoch)
        except Exception as exc:  # noqa: BLE001  (any capture failure: said in one line, then eager)
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            self.fall_back(f"the step cannot be captured ({type(exc).__name__}: {first})")
            self.static_batch = None
            return self.eager(batch, epoch)
        self.graph, self.static_out = cuda_graph, out
        cuda_graph.replay()  # the captured step ran nothing: this runs it on this batch
        self.replays += 1
        return out

    def fits(self, batch: Any) -> bool:
        """Whether ``batch`` has the static inputs' structure, shapes and dtypes."""
        try:
            new = _tensors(batch)
        except TypeError:
            return False
        old = _tensors(self.static_batch)
        return len(new) == len(old) and all(tuple(a.shape) == tuple(b.shape) and a.dtype == b.dtype
                                            for a, b in zip(new, old))

    def load(self, batch: Any) -> None:
        """Copy ``batch`` into the static inputs (device-to-device, or host-to-device outside the graph)."""
        from tinyflow.device import move

        for static, new in zip(_tensors(self.static_batch), _tensors(batch)):
            static.array[...] = move(new.array, self.device)


def say_on_stderr(enabled: bool) -> Callable[[str], None]:
    """A ``say`` for GraphedStep: a line on stderr when ``enabled`` (the writing process)."""
    def say(line: str) -> None:
        if enabled:
            print(line, file=sys.stderr, flush=True)

    return say
