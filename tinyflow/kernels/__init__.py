"""The CPU reference kernels: the contract that ``tinyflow_cuda.kernels`` mirrors name for name.

One file per family; every public function here is decorated with ``@kernel`` (see
``_dispatch.py``) so that CuPy inputs reach the CUDA twin of the same name.
"""
from tinyflow.kernels._dispatch import REGISTRY, kernel

__all__ = ["REGISTRY", "kernel"]
# Each family adds its line below: from tinyflow.kernels.<family> import *  # noqa: F401,F403
from tinyflow.kernels.allreduce import *  # noqa: F401,F403,E402
from tinyflow.kernels.conv import *  # noqa: F401,F403,E402
from tinyflow.kernels.loss import *  # noqa: F401,F403,E402
from tinyflow.kernels.lrn import *  # noqa: F401,F403,E402
from tinyflow.kernels.optim import *  # noqa: F401,F403,E402
from tinyflow.kernels.pool import *  # noqa: F401,F403,E402
from tinyflow.kernels.random import *  # noqa: F401,F403,E402
from tinyflow.kernels.rnn import *  # noqa: F401,F403,E402
