"""Where code written before the move still finds the output sizes and the int-or-pair reader:
``conv_output_size`` is the conv family's (tinyflow/kernels/conv.py), ``pool_output_shape`` the pool
family's (tinyflow/kernels/pool.py), ``pair`` / ``IntPair`` tinyflow/arg_parser.py's. This file goes
when tinyflow_cuda/kernels/{conv,pool}.py and nn/modules import them from there."""
from tinyflow.arg_parser import IntPair, Pair, pair  # noqa: F401
from tinyflow.kernels.conv import conv_output_size  # noqa: F401
from tinyflow.kernels.pool import pool_output_shape  # noqa: F401


def _pair(v: IntPair, name: str, op: str = "conv2d") -> Pair:
    """``tinyflow.arg_parser.pair`` with its old default for ``op``."""
    return pair(v, name, op)
