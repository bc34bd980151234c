"""Temporary: ``tinyflow.nn.batchnorm`` moved to ``tinyflow.nn.modules.batchnorm`` (PyTorch's path).

Kept only until tinyflow/optim/swa_utils.py and tinyflow/func.py import the new path (issue 25);
then delete this file.
"""
from tinyflow.nn.modules.batchnorm import *  # noqa: F401,F403
from tinyflow.nn.modules.batchnorm import _BatchNorm, __all__  # noqa: F401
