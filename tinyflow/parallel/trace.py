"""Where the time of a data-parallel step goes: a Chrome-trace recorder and the step timer.

``ChromeTracer`` records spans of compute and all-reduce per rank and thread. Open the JSON in
chrome://tracing or https://ui.perfetto.dev. Each rank is a process row (pid = rank) and each
thread a track, so the comm thread's all-reduces show under the main thread's forward/backward
and the overlap is visible at a glance.

``StepTimer`` splits each training step of a DataParallel model into compute and communication
and writes one JSON line per step (steps.jsonl): ``step_s`` (wall), ``comm_s`` (all-reduce time
on the communication thread, mostly hidden behind backward) and ``wait_s`` (communication that
backward had to wait for: the exposed part), with ``compute_s = step_s - wait_s``.
"""
from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tinyflow.device import array_module, to_host


class ChromeTracer:
    """Collects complete events ("ph": "X") in microseconds since the tracer was created."""

    def __init__(self, rank: int = 0, enabled: bool = True):
        self.rank = rank
        self.enabled = enabled
        self.events: list[dict[str, Any]] = []
        self._t0 = time.perf_counter()
        self._lock = threading.Lock()

    def now(self) -> float:
        return time.perf_counter()

    def add(self, name: str, start: float, end: float, cat: str = "compute", **args: Any) -> None:
        """Record a span from ``start`` to ``end`` (``perf_counter`` seconds) on this thread."""
        if not self.enabled:
            return
        event = {
            "name": name,
            "cat": cat,
            "ph": "X",
            "ts": (start - self._t0) * 1e6,
            "dur": max(0.0, end - start) * 1e6,
            "pid": self.rank,
            "tid": threading.current_thread().name,
        }
        if args:
            event["args"] = args
        with self._lock:
            self.events.append(event)

    @contextmanager
    def span(self, name: str, cat: str = "compute", **args: Any) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, start, time.perf_counter(), cat, **args)

    def to_json(self) -> dict[str, Any]:
        meta = [{"name": "process_name", "ph": "M", "pid": self.rank, "args": {"name": f"rank {self.rank}"}}]
        return {"traceEvents": meta + self.events, "displayTimeUnit": "ms"}

    def save(self, path: str) -> None:
        """Write this rank's trace to ``path``."""
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w") as f:
            json.dump(self.to_json(), f)


def merge_traces(parts: list[dict[str, Any]], path: str) -> None:
    """Write the traces of several ranks (``to_json()`` dicts) into one file."""
    events: list[dict[str, Any]] = []
    for part in parts:
        events.extend(part["traceEvents"])
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump({"traceEvents": events, "displayTimeUnit": "ms"}, f)


class StepTimer:
    """Per-step compute/communication split of a DataParallel model and the trace's compute spans.

    Hook it into the model (``register_forward_pre_hook(timer.pre_forward)``,
    ``register_forward_hook(timer.post_forward)``) and into the training loop (``after_backward``,
    which also finishes the step's all-reduce, and ``on_step``). With ``path`` it appends one JSON
    line per step there; the lines wait for the step losses, kept on the device, and are written
    ``flush_every`` steps at a time with one host read (at the training loop's log points).
    """

    def __init__(self, dp: Any, path: str | None = None, tracer: ChromeTracer | None = None, flush_every: int = 20):
        self.dp = dp
        self.tracer = tracer
        self.file = open(path, "a") if path else None  # noqa: SIM115 - closed in close()
        self.forward_start = self.forward_end = self.backward_end = None
        self.totals = {"step_s": 0.0, "comm_s": 0.0, "wait_s": 0.0, "steps": 0}
        self.flush_every = max(1, flush_every)
        self.pending: list[tuple[dict[str, Any], Any]] = []  # (record, loss still on the device)

    def pre_forward(self, module: Any, inputs: Any) -> None:
        self.forward_start = time.perf_counter()

    def post_forward(self, module: Any, inputs: Any, output: Any) -> None:
        self.forward_end = time.perf_counter()
        if self.tracer is not None:
            name = "forward" if module.training else "eval forward"
            self.tracer.add(name, self.forward_start, self.forward_end, cat="compute")

    def after_backward(self) -> None:
        """Finish the step's gradient all-reduce (``dp.synchronize``) and time backward."""
        self.dp.synchronize()
        self.backward_end = time.perf_counter()
        if self.tracer is not None and self.forward_end is not None:
            self.tracer.add("backward", self.forward_end, self.backward_end, cat="compute")

    def on_step(self, epoch: int, step: int, loss: Any) -> None:
        """Time the step; ``loss`` (a 0-d Tensor on the device) is kept there until the next flush."""
        now = time.perf_counter()
        if self.tracer is not None and self.backward_end is not None:
            self.tracer.add("optimizer step", self.backward_end, now, cat="compute")
        stats = self.dp.last_step
        step_s = now - (self.forward_start or now)
        record = {"epoch": epoch + 1, "step": step, "step_s": round(step_s, 6),
                  "compute_s": round(step_s - stats.wait_seconds, 6), "comm_s": round(stats.comm_seconds, 6),
                  "wait_s": round(stats.wait_seconds, 6), "bytes_sent": stats.bytes_sent}
        self.totals["step_s"] += step_s
        self.totals["comm_s"] += stats.comm_seconds
        self.totals["wait_s"] += stats.wait_seconds
        self.totals["steps"] += 1
        if self.file is not None:
            self.pending.append((record, loss))
            if step % self.flush_every == 0 or len(self.pending) >= self.flush_every:  # with fit's log points
                self.flush()

    def flush(self) -> None:
        """Write the pending lines: their losses come from the device in one host read."""
        if self.file is None or not self.pending:
            return
        arrays = [loss.array.reshape(1) for _, loss in self.pending]  # still on the device
        xp = array_module(arrays[0])
        losses = to_host(xp.concatenate(arrays), why="step log losses").astype(float).tolist()
        for (record, _), loss in zip(self.pending, losses):
            self.file.write(json.dumps({**record, "loss": round(loss, 6)}) + "\n")
        self.file.flush()
        self.pending.clear()

    def summary(self) -> str:
        t = self.totals
        n = max(t["steps"], 1)
        return (f"per step: {t['step_s'] / n * 1e3:.1f} ms total, {(t['step_s'] - t['wait_s']) / n * 1e3:.1f} ms compute, "
                f"{t['comm_s'] / n * 1e3:.1f} ms all-reduce of which {t['wait_s'] / n * 1e3:.1f} ms not hidden "
                f"behind backward")

    def close(self) -> None:
        if self.file is not None:
            self.flush()
            self.file.close()
            self.file = None
