"""The stand-in's CUDA errors, CuPy's ``cupy.cuda.runtime.CUDARuntimeError`` and
``cupy.cuda.memory.OutOfMemoryError``.

A file of their own, at the bottom of the stand-in, because every layer raises them: the array
(array.py: a device that does not exist), the capture (graph.py: what CUDA refuses while a stream
captures) and ``cupy.cuda`` (cuda.py, which offers them under CuPy's names).
"""
from __future__ import annotations


class CUDARuntimeError(RuntimeError):
    """``cupy.cuda.runtime.CUDARuntimeError``."""


class OutOfMemoryError(MemoryError):
    """``cupy.cuda.memory.OutOfMemoryError``."""
