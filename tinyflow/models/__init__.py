"""``tinyflow.models``, the model zoo, as seen from a checkout that is not installed.

The zoo's code lives in the repository's top-level ``models/`` folder. An installed tinyflow
(``pip install .``, or ``-e .``) ships that folder as this package (pyproject.toml maps
``tinyflow.models`` to ``models/``) and never reads this file. A checkout used through
``PYTHONPATH`` (bench/gpu/run_all.sh, test subprocesses) finds this file instead: it loads
``models/__init__.py`` under the name ``tinyflow.models``, with ``models/`` as the package path,
so that ``tinyflow.models.alexnet`` and the rest resolve to the same files either way.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_ZOO = Path(__file__).resolve().parents[2] / "models"
_spec = importlib.util.spec_from_file_location(__name__, _ZOO / "__init__.py", submodule_search_locations=[str(_ZOO)])
_zoo = importlib.util.module_from_spec(_spec)
sys.modules[__name__] = _zoo  # the import system hands out what sys.modules holds at the end
_spec.loader.exec_module(_zoo)
