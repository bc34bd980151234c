"""The ops that only the PyTorch surface calls (Tensor methods and ``tinyflow.*`` functions beyond a
training step): math, indexing, sort, scan, layout, decomposition, special, einsum; one file per
family, as tinyflow/ops/. This file gathers names and defines none: the surface's modules reach
every op, the core's (tinyflow.ops) and these, as ``ops.<Name>``."""
from tinyflow.surface.ops.decomposition import *  # noqa: F403
from tinyflow.surface.ops.einsum import *  # noqa: F403
from tinyflow.surface.ops.indexing import *  # noqa: F403
from tinyflow.surface.ops.layout import *  # noqa: F403
from tinyflow.surface.ops.math import *  # noqa: F403
from tinyflow.surface.ops.scan import *  # noqa: F403
from tinyflow.surface.ops.sort import *  # noqa: F403
from tinyflow.surface.ops.special import *  # noqa: F403
from tinyflow.ops import *  # noqa: F403,I001 (the core families, last: their VectorNorm is ops.VectorNorm)
