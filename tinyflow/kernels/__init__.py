"""The CPU reference kernels: the kernel module of the ``cpu`` device.

One file per family (activation, allreduce, batchnorm, conv, dropout, embedding, loss, lrn, optim,
pool, rnn). Each is a plain function over arrays, written against ``xp`` where it can be, and
the families of ``FAMILIES`` are the contract: ``tinyflow_cuda/kernels/<family>.py`` (over
``csrc/<family>.cu``) defines the same names with the same signatures for CUDA arrays. The
Winograd convolution is the one CPU-only part (``CPU_ONLY``: the names of its kernels, in
kernels/conv.py): a GPU convolution is im2col + a cuBLAS GEMM, so the convolution op asks for it
on NumPy arrays only.
``_cpu`` (workspaces, threads) is a helper, not a family.

Ops never import a kernel by name from here: they ask their context for the kernel module of
their inputs' device (``ctx.kernels.im2col(...)``; outside an op, ``tinyflow.device.kernels_of``).
That is the one place that decides whether the reference or its CUDA twin runs.

A re-export module: it imports every family and gathers their kernels, so ``ctx.kernels.<name>``
is a plain attribute of this module.
"""
from tinyflow.kernels import activation, allreduce, batchnorm, conv, dropout, embedding, loss, lrn, optim, pool, rnn
from tinyflow.kernels.activation import *
from tinyflow.kernels.allreduce import *
from tinyflow.kernels.batchnorm import *
from tinyflow.kernels.conv import *
from tinyflow.kernels.dropout import *
from tinyflow.kernels.conv import CPU_ONLY, winograd_conv2d_backward, winograd_conv2d_forward
from tinyflow.kernels.embedding import *
from tinyflow.kernels.loss import *
from tinyflow.kernels.lrn import *
from tinyflow.kernels.optim import *
from tinyflow.kernels.pool import *
from tinyflow.kernels.rnn import *

FAMILIES = (activation, allreduce, batchnorm, conv, dropout, embedding, loss, lrn, optim, pool, rnn)
"""The kernel families, each mirrored by tinyflow_cuda/kernels/<family>.py, in this order."""

__all__ = [name for family in FAMILIES for name in family.__all__] + list(CPU_ONLY)
