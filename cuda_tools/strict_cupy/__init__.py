"""A strict CuPy stand-in: CI on a machine without a GPU runs the CUDA path and fails where CuPy
would.

Its arrays (``ndarray``) keep their values in NumPy memory but refuse implicit conversion to
NumPy exactly as CuPy's do; its module offers only the functions, keyword arguments and ufunc
methods that the pinned CuPy has (``cupy_api.json``, written by ``generate.py`` from the real
package); its ``RawModule`` runs the .cu kernels through the g++ emulator. ``installed()``
makes it tinyflow's CUDA backend, so ``Device("cuda:0")``, ``.to("cuda:0")``, ``.cpu()``,
checkpoints, autocast, DataParallel's thread ranks and the training loop all run on it::

    from cuda_tools import strict_cupy
    with strict_cupy.installed() as cp:
        x = tf.ones(3, device="cuda:0")      # x.array is a strict_cupy.ndarray
        np.asarray(x.array)                   # TypeError, as on a GPU

Host reads of its arrays (``get``, ``item``, ``tolist``, ``float``, ``int``, ``bool``, ``repr``)
are counted per thread (``host_reads``) and raise inside tinyflow's ``forbid_host_reads()``.
``record_calls()`` lists every stand-in call and kernel launch of a block.
It says nothing about speed, streams running side by side, or the GPU's memory model.

Its files, each built only on the ones listed before it (so they can be read in this order):
api.py (the pinned CuPy's names, from cupy_api.json), launches.py (the GPU work a call stands
for), errors.py, current_stream.py (the stream a thread issues work to, and its capture),
array.py (``ndarray``), memory.py (pools and the allocator in force), graph.py (stream capture
and replay), cuda.py (``cupy.cuda``) and module.py (the ``cupy`` module, which it binds to the
array for its operators). generate.py writes cupy_api.json from the real CuPy.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from types import ModuleType

from cuda_tools.strict_cupy.api import CupyAPIError, api
from cuda_tools.strict_cupy.array import IMPLICIT_CONVERSION, _thread, host_reads, ndarray
from cuda_tools.strict_cupy.module import cupyx, strict_cupy

__all__ = ["CupyAPIError", "IMPLICIT_CONVERSION", "api", "cupyx", "host_reads", "installed", "ndarray",
           "record_calls", "strict_cupy"]


@contextlib.contextmanager
def installed() -> Iterator[ModuleType]:
    """Make the stand-in tinyflow's CUDA backend inside the block (``cuda:0`` exists there)."""
    import tinyflow_cuda
    from tinyflow_cuda import runtime

    saved = (tinyflow_cuda._cupy, tinyflow_cuda._reason, runtime._cupy_runtime)
    tinyflow_cuda._cupy, tinyflow_cuda._reason, runtime._cupy_runtime = strict_cupy, None, None
    tinyflow_cuda._register(strict_cupy)
    try:
        yield strict_cupy
    finally:
        tinyflow_cuda._cupy, tinyflow_cuda._reason, runtime._cupy_runtime = saved
        _drop_pending_checks()


def _drop_pending_checks() -> None:
    """Forget this thread's unread device checks on stand-in arrays (tinyflow.device.device_check):
    with the backend gone nothing can read them, and the next host read elsewhere would trip on
    arrays of a module that is no longer installed."""
    from tinyflow.device import _reads

    if _reads.pending:
        _reads.pending = {key: entry for key, entry in _reads.pending.items()
                          if not isinstance(entry[0], ndarray)} or None


@contextlib.contextmanager
def record_calls() -> Iterator[list[str]]:
    """``with record_calls() as names:`` every stand-in function, ufunc and method call
    (``"cupy.add"``) and every kernel launch (``"kernel:im2col_f32"``) of this thread, in order.
    Each name is a ``launches.Call`` that also says the kernels and memory operations it stands
    for; ``launches.tally(names)`` adds them up."""
    names: list[str] = []
    outer, _thread.calls = _thread.calls, names
    try:
        yield names
    finally:
        _thread.calls = outer

