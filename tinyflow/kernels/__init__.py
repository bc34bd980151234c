"""The CPU reference kernels: the kernel module of the ``cpu`` device.

One file per family (activation, conv, winograd, pool, lrn, rnn, embedding, loss, random, optim,
allreduce). Each is a plain function over arrays, written against ``xp`` where it can be, and the
families of ``FAMILIES`` are the contract: ``tinyflow_cuda/kernels/<family>.py`` (over
``csrc/<family>.cu``) defines the same names with the same signatures for CUDA arrays. Winograd
is the one CPU-only family (``CPU_ONLY``): a GPU convolution is im2col + a cuBLAS GEMM, so the
convolution op asks for it on NumPy arrays only. ``shapes`` (output sizes, int-or-pair
arguments) and ``_cpu`` (workspaces, threads) are helpers, not families.

Ops never import a kernel by name from here: they ask their context for the kernel module of
their inputs' device (``ctx.kernels.im2col(...)``; outside an op, ``tinyflow.device.kernels_of``).
That is the one place that decides whether the reference or its CUDA twin runs.
"""
from tinyflow.kernels import activation, allreduce, batchnorm, conv, embedding, loss, lrn, optim, pool, random, rnn, winograd
from tinyflow.kernels.activation import *  # noqa: F401,F403
from tinyflow.kernels.allreduce import *  # noqa: F401,F403
from tinyflow.kernels.batchnorm import *  # noqa: F401,F403
from tinyflow.kernels.conv import *  # noqa: F401,F403
from tinyflow.kernels.embedding import *  # noqa: F401,F403
from tinyflow.kernels.loss import *  # noqa: F401,F403
from tinyflow.kernels.lrn import *  # noqa: F401,F403
from tinyflow.kernels.optim import *  # noqa: F401,F403
from tinyflow.kernels.pool import *  # noqa: F401,F403
from tinyflow.kernels.random import *  # noqa: F401,F403
from tinyflow.kernels.rnn import *  # noqa: F401,F403
from tinyflow.kernels.winograd import *  # noqa: F401,F403

FAMILIES = (activation, allreduce, batchnorm, conv, embedding, loss, lrn, optim, pool, random, rnn)
"""The kernel families, each mirrored by a module of the same name in tinyflow_cuda/kernels/."""

CPU_ONLY = (winograd,)
"""Families with no CUDA twin: ops call them on NumPy arrays only."""

__all__ = [name for family in FAMILIES + CPU_ONLY for name in family.__all__]
