"""Where tinyflow/kernels/__init__.py's table still finds the Winograd kernels: they are the CPU-only
half of the conv family, tinyflow/kernels/conv.py. This file goes when that table names them there."""
from tinyflow.kernels.conv import winograd_conv2d_backward, winograd_conv2d_forward

__all__ = ["winograd_conv2d_forward", "winograd_conv2d_backward"]
