"""Differentiable ops: one Function subclass per op, one file per family.

A class that shares its concept with an nn layer carries the ``Function`` suffix
(``Conv2dFunction`` is the op, ``nn.Conv2d`` the layer). Users call them through Tensor methods
and ``tinyflow.nn.functional``, which also checks their arguments.
"""
from tinyflow.ops.activation import *  # noqa: F401,F403
from tinyflow.ops.conv import *  # noqa: F401,F403
from tinyflow.ops.copy import *  # noqa: F401,F403
from tinyflow.ops.distance import *  # noqa: F401,F403
from tinyflow.ops.elementwise import *  # noqa: F401,F403
from tinyflow.ops.embedding import *  # noqa: F401,F403
from tinyflow.ops.indexing import *  # noqa: F401,F403
from tinyflow.ops.interpolate import *  # noqa: F401,F403
from tinyflow.ops.linalg import *  # noqa: F401,F403
from tinyflow.ops.loss import *  # noqa: F401,F403
from tinyflow.ops.math import *  # noqa: F401,F403
from tinyflow.ops.norm import *  # noqa: F401,F403
from tinyflow.ops.pad import *  # noqa: F401,F403
from tinyflow.ops.pool import *  # noqa: F401,F403
from tinyflow.ops.reduce import *  # noqa: F401,F403
from tinyflow.ops.rnn import *  # noqa: F401,F403
from tinyflow.ops.scan import *  # noqa: F401,F403
from tinyflow.ops.shape import *  # noqa: F401,F403
from tinyflow.ops.sort import *  # noqa: F401,F403
