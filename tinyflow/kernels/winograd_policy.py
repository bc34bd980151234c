"""Where the CPU's convolution takes the Winograd kernels (tinyflow/kernels/winograd.py): the rule
and its thresholds, in a file of their own so that a step that never qualifies (small batches, few
channels, strided or grouped layers) does not load the kernels to hear "no".
"""
from __future__ import annotations

import numpy as np

__all__ = ["use_winograd"]

Pair = tuple[int, int]

# Stride-1 ungrouped 3x3 / 5x5 convolutions with at least this many input and output channels,
# and a batch of at least this many images, take the Winograd path (up to 4x fewer
# multiplications for 3x3, 2.8x for 5x5, no im2col / col2im). With fewer channels its small GEMMs
# lose to the one im2col GEMM; its transforms run over the batch innermost, so tiny batches lose
# too. Set WINOGRAD_MIN_CHANNELS to 0 to turn the path off.
WINOGRAD_MIN_CHANNELS = 16
WINOGRAD_MIN_BATCH = 8
WINOGRAD_KERNELS = (3, 5, 6)  # kernel sides that split into 3x3 sub-kernels without much waste


def use_winograd(x, w, stride: Pair, dilation: Pair, groups: int) -> bool:
    """Whether conv2d(x (N, C, H, W), w (O, C/groups, kh, kw)) runs on the Winograd kernels here."""
    n, c = x.shape[:2]
    o, _, kh, kw = w.shape
    return (WINOGRAD_MIN_CHANNELS > 0 and np.dtype(x.dtype) in (np.float32, np.float64)
            and kh in WINOGRAD_KERNELS and kw in WINOGRAD_KERNELS
            and stride == (1, 1) and dilation == (1, 1) and groups == 1
            and n >= max(1, WINOGRAD_MIN_BATCH) and min(c, o) >= WINOGRAD_MIN_CHANNELS)
