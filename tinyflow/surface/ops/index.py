"""Every op, the core's (tinyflow.ops) and the surface's (this package), as one namespace: what the
surface's Tensor methods reach as ``ops.<Name>``. It gathers names and defines none."""
from tinyflow.surface.ops.decomposition import *  # noqa: F403
from tinyflow.surface.ops.einsum import *  # noqa: F403
from tinyflow.surface.ops.indexing import *  # noqa: F403
from tinyflow.surface.ops.layout import *  # noqa: F403
from tinyflow.surface.ops.math import *  # noqa: F403
from tinyflow.surface.ops.scan import *  # noqa: F403
from tinyflow.surface.ops.sort import *  # noqa: F403
from tinyflow.surface.ops.special import *  # noqa: F403
from tinyflow.ops import *  # noqa: F403,I001 (the core families, last: their VectorNorm is ops.VectorNorm)
