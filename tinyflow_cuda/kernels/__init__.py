"""The kernel module of ``cuda`` devices: CUDA twins of ``tinyflow.kernels``, file for file and
name for name (activation, conv, pool, lrn, rnn, embedding, loss, random, optim, allreduce).

``tinyflow.device.kernel_module`` hands this module to ops whose inputs are CuPy arrays
(``ctx.kernels.im2col(...)``). Each twin launches the hand-written kernel of
``csrc/<family>.cu`` through the shared launch helper (``_launch.KernelCall``); where a case is
outside what the .cu kernel handles (half precision, a non-contiguous output buffer,
log-softmax over a middle axis), it calls the reference of the same name, which is written
against ``xp`` and so runs on CuPy too. The arrows run one way: this package imports
``tinyflow.kernels``, never the reverse.

The GEMMs of convolution and of the recurrent layers are not here: they are ``xp.matmul``
calls in the ops (cuBLAS through CuPy). See docs/cuda.md for the layouts.
"""
import tinyflow_cuda

# Load CuPy now (a no-op when tinyflow_cuda already did): it registers CuPy's array type with the
# reference kernels, which a twin falls back to, also when a caller hands raw CuPy arrays here.
tinyflow_cuda._load()

from tinyflow_cuda.kernels import activation, allreduce, batchnorm, conv, dropout, embedding, loss, lrn, optim, pool, rnn  # noqa: E402
from tinyflow_cuda.kernels.activation import *  # noqa: F401,F403
from tinyflow_cuda.kernels.allreduce import *  # noqa: F401,F403
from tinyflow_cuda.kernels.batchnorm import *  # noqa: F401,F403
from tinyflow_cuda.kernels.conv import *  # noqa: F401,F403
from tinyflow_cuda.kernels.dropout import *  # noqa: F401,F403
from tinyflow_cuda.kernels.embedding import *  # noqa: F401,F403
from tinyflow_cuda.kernels.loss import *  # noqa: F401,F403
from tinyflow_cuda.kernels.lrn import *  # noqa: F401,F403
from tinyflow_cuda.kernels.optim import *  # noqa: F401,F403
from tinyflow_cuda.kernels.pool import *  # noqa: F401,F403
from tinyflow_cuda.kernels.rnn import *  # noqa: F401,F403

FAMILIES = (activation, allreduce, batchnorm, conv, dropout, embedding, loss, lrn, optim, pool, rnn)
"""The twin of each module in ``tinyflow.kernels.FAMILIES``, in the same order."""

__all__ = [name for family in FAMILIES for name in family.__all__]
