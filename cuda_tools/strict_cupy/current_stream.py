"""Which stream this thread issues work to, and whether that stream captures a CUDA graph.

Every stand-in call asks "is the current stream capturing?" before it runs: the array
(array.py), the capture's own graph launches (graph.py) and the kernels of ``cupy.cuda``
(cuda.py). So the streams a thread has entered live here, below those three files: cuda.py's
``Stream`` pushes and pops itself on this stack (``with stream:``, ``use()``) and its
``get_current_stream()`` reads it; the null stream (an empty stack) never captures.
"""
from __future__ import annotations

import threading
from typing import Any


class _Entered(threading.local):
    """Per thread: the streams entered with ``with stream:`` (or made current by ``use()``)."""

    def __init__(self) -> None:
        self.stack: list[Any] = []


_entered = _Entered()


def stream_stack() -> list[Any]:
    """This thread's stack of entered streams (cuda.Stream objects); the last one is current."""
    return _entered.stack


def current_stream() -> Any:
    """The stream this thread issues work to (a cuda.Stream), or None for the null stream."""
    stack = _entered.stack
    return stack[-1] if stack else None


def capturing() -> Any:
    """The recording (graph.Recording) of the stream this thread issues work to, when that stream
    captures; else None."""
    stream = current_stream()
    return None if stream is None else stream._recording
