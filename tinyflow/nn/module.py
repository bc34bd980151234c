"""Temporary: ``tinyflow.nn.module`` moved to ``tinyflow.nn.modules.module`` (PyTorch's path).

Kept only until tinyflow/optim/swa_utils.py, tinyflow/func.py and tinyflow/parallel/data_parallel.py
import the new path (issue 25); then delete this file. Write ``from tinyflow.nn import Module``.
"""
from tinyflow.nn.modules.module import *  # noqa: F401,F403
from tinyflow.nn.modules.module import __all__  # noqa: F401
