"""A tiny Chrome-trace recorder: spans of compute and all-reduce per rank and thread.

Open the JSON in chrome://tracing or https://ui.perfetto.dev. Each rank is a process row
(pid = rank) and each thread a track, so the comm thread's all-reduces show under the main
thread's forward/backward and the overlap is visible at a glance.
"""
from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


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
