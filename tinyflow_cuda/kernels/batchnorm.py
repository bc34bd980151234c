"""CUDA twins of ``tinyflow/kernels/batchnorm.py``: batch normalisation over csrc/batchnorm.cu.

A training forward is two launches (per-channel partial moments, then normalise: every block
combines its channel's partials itself, and the channel's first block updates the running
statistics), an eval forward one, a backward two (per-channel partial sums, then gx; the first
block of each channel writes gweight and gbias). Every floating dtype has its kernels; the
per-channel arrays (statistics, weight, bias, running statistics, parameter gradients) are in the
accumulate dtype, float32 for float16 / bfloat16 inputs: parameters in another dtype are cast once
(a (C,) copy), running statistics in another dtype are updated through such a copy and written
back. A tensor of 2^31 elements or more, or a non-floating one, runs the reference.
"""
from __future__ import annotations

import math
from typing import Any

from tinyflow.dtypes import is_floating
from tinyflow.kernels import batchnorm as reference
from tinyflow_cuda.kernels._launch import KernelCall

__all__ = ["batch_norm_forward", "batch_norm_backward"]

Array = Any

THREADS = 256  # BN_THREADS of csrc/batchnorm.cu: every launch has TX * TY = 256 threads
MAX_PARTIALS = 64  # reduction blocks per channel; the consumers combine them (<= THREADS)
TARGET_BLOCKS = 1024  # enough 256-thread blocks to fill an H100 (132 SMs x 8 resident)
MIN_PER_THREAD = 4  # values per thread below which more blocks only add partials
MAX_GRID_Y = 65535  # channels beyond this many are looped over by the blocks
INDEX_LIMIT = 2**31  # the kernels' 32-bit indices


def launch_shape(n: int, c: int, length: int) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """(block, grid) of every batchnorm launch over (N, C, L): blocks of (TX, TY) threads with TX the
    power of two covering L (at most 256) and TY = 256 / TX images; a grid of (tiles of L,
    channels, groups of images) with at most MAX_PARTIALS blocks per channel."""
    tx = min(THREADS, 1 << max(0, (length - 1).bit_length()))
    ty = THREADS // tx
    per_channel = max(1, min(MAX_PARTIALS, -(-TARGET_BLOCKS // c),
                             -(-(n * length) // (THREADS * MIN_PER_THREAD))))
    gz = min(-(-n // ty), per_channel)
    gx = min(-(-length // tx), max(1, per_channel // gz))
    return (tx, ty, 1), (gx, min(c, MAX_GRID_Y), gz)


def _acc_copy(call: KernelCall, a: Array | None, acc: Any) -> Array | None:
    """``a`` (C,) as a contiguous array of the accumulate dtype: itself when it is one, else a copy."""
    if a is None:
        return None
    if a.dtype == acc and a.flags.c_contiguous:
        return a
    return call.xp.ascontiguousarray(a.astype(acc))


def _native(x: Array, *per_channel: Array | None) -> bool:
    """Whether the kernels take these arrays: a floating x of 1 to 2^31 - 1 elements, (N, C, *),
    floating per-channel arrays."""
    return (x.ndim >= 2 and 0 < x.size < INDEX_LIMIT
            and all(a is None or is_floating(a.dtype) for a in per_channel))


def batch_norm_forward(x: Array, weight: Array | None, bias: Array | None,
                       running_mean: Array | None, running_var: Array | None, training: bool,
                       momentum: float, eps: float) -> tuple[Array, Array, Array]:
    """Normalise ``x`` (N, C, *) per channel; returns (y, save_mean, save_invstd), the last two (C,)."""
    call = KernelCall("batch_norm_normalize", x, op="batch_norm")
    stats = KernelCall("batch_norm_stats", x, op="batch_norm")
    if (not (call.supported and stats.supported) or not _native(x, weight, bias, running_mean, running_var)
            or (not training and (running_mean is None or running_var is None))):
        return reference.batch_norm_forward(x, weight, bias, running_mean, running_var, training,
                                            momentum, eps)
    acc = reference.acc_dtype(x.dtype)
    with call:
        x = call.contiguous(x)
        n, c = x.shape[:2]
        length = math.prod(x.shape[2:])
        w, b, rm, rv = (_acc_copy(call, a, acc) for a in (weight, bias, running_mean, running_var))
        y = call.empty(x.shape)
        save_mean, save_invstd = call.empty((c,), acc), call.empty((c,), acc)
        block, grid = launch_shape(n, c, length)
        partial, parts = None, 0
        if training:
            parts = grid[0] * grid[2]
            partial = call.empty((c, parts, 3), acc)  # (count, mean, M2) per channel and block
            stats.launch_grid(grid, block, [x, partial, n, c, length])
        count = n * length
        call.launch_grid(grid, block, [x, y, partial, parts, rm, rv, w, b, save_mean, save_invstd,
                                       n, c, length, float(momentum), float(eps),
                                       count / max(count - 1, 1)])
        if training:  # running statistics updated through an accumulate-dtype copy: write back
            for given, used in ((running_mean, rm), (running_var, rv)):
                if given is not None and used is not given:
                    given[...] = used
        return y, save_mean, save_invstd


def batch_norm_backward(gout: Array, x: Array, weight: Array | None, save_mean: Array,
                        save_invstd: Array, training: bool,
                        output_mask: tuple[bool, bool, bool] = (True, True, True),
                        ) -> tuple[Array | None, Array | None, Array | None]:
    """Gradients (gx, gweight, gbias) of :func:`batch_norm_forward` from its saved statistics."""
    want_gx, want_gw, want_gb = output_mask
    if gout.dtype != x.dtype and is_floating(gout.dtype) and is_floating(x.dtype):
        gout = gout.astype(x.dtype)  # one cast launch, not the reference's dozen
    call = KernelCall("batch_norm_backward_elemt", gout, x, op="batch_norm backward")
    reduce = KernelCall("batch_norm_backward_reduce", gout, x, op="batch_norm backward")
    if not (call.supported and reduce.supported) or not _native(x, weight, save_mean, save_invstd):
        return reference.batch_norm_backward(gout, x, weight, save_mean, save_invstd, training,
                                             output_mask)
    if not any(output_mask):
        return None, None, None
    acc = reference.acc_dtype(x.dtype)
    with call:
        gout, x = call.contiguous(gout, x)
        n, c = x.shape[:2]
        length = math.prod(x.shape[2:])
        mean, invstd = _acc_copy(call, save_mean, acc), _acc_copy(call, save_invstd, acc)
        w = _acc_copy(call, weight, acc) if want_gx else None
        block, grid = launch_shape(n, c, length)
        partial, parts = None, 0
        if want_gw or want_gb or (training and want_gx):
            parts = grid[0] * grid[2]
            partial = call.empty((c, parts, 2), acc)  # (sum g, sum g * (x - mean)) per block
            reduce.launch_grid(grid, block, [gout, x, mean, partial, n, c, length])
        gx = call.empty(x.shape) if want_gx else None
        gweight = call.empty((c,), acc) if want_gw else None
        gbias = call.empty((c,), acc) if want_gb else None
        # without gx, one block per channel only finalises gweight / gbias
        elemt_grid = grid if want_gx else (1, grid[1], 1)
        call.launch_grid(elemt_grid, block, [gout, x, mean, invstd, w, partial, parts, gx, gweight,
                                             gbias, n, c, length, int(bool(training)),
                                             1.0 / (n * length)])
        return gx, gweight, gbias
