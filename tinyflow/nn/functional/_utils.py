"""What the F family files share, at its new homes (tinyflow/arg_parser.py, tinyflow/creation.py);
this file goes once the F functions are in their ops files."""
from tinyflow.arg_parser import FunctionalError, broadcast_pair as _broadcast_pair, single as _single, triple as _triple  # noqa: F401
from tinyflow.creation import as_constant as _as_constant, target_array as _target  # noqa: F401
