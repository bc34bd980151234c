"""The CPU reference kernels: the kernel module of the ``cpu`` device.

One file per family (conv, pool, lrn, rnn, embedding, loss, random, optim, allreduce; plus the
CPU-only Winograd transforms). Each is a plain function over arrays, written against ``xp`` where
it can be, and it is the contract: ``tinyflow_cuda/kernels/<family>.py`` defines the same names
with the same signatures for CUDA arrays.

Ops never import a kernel by name from here: they ask their context for the kernel module of
their inputs' device (``ctx.kernels.im2col(...)``; outside an op, ``tinyflow.device.kernels_of``).
That is the one place that decides whether the reference or its CUDA twin runs.
"""
from tinyflow.kernels import allreduce, conv, embedding, loss, lrn, optim, pool, random, rnn
from tinyflow.kernels.allreduce import *  # noqa: F401,F403
from tinyflow.kernels.conv import *  # noqa: F401,F403
from tinyflow.kernels.embedding import *  # noqa: F401,F403
from tinyflow.kernels.loss import *  # noqa: F401,F403
from tinyflow.kernels.lrn import *  # noqa: F401,F403
from tinyflow.kernels.optim import *  # noqa: F401,F403
from tinyflow.kernels.pool import *  # noqa: F401,F403
from tinyflow.kernels.random import *  # noqa: F401,F403
from tinyflow.kernels.rnn import *  # noqa: F401,F403

FAMILIES = (allreduce, conv, embedding, loss, lrn, optim, pool, random, rnn)
"""The kernel families, each mirrored by a module of the same name in tinyflow_cuda/kernels/."""

__all__ = [name for family in FAMILIES for name in family.__all__]
