"""CUDA twins of ``tinyflow/kernels/pool.py``: max and average pooling over csrc/pool.cu.

Every floating dtype (float32, float64, float16, bfloat16) has its kernels, so pooling never
falls back to the reference's per-tap slab loop on a GPU; fp16 / bf16 sum in fp32 and round
once. Each direction has two kernels (csrc/pool.cu says how they work):

- the tiled one (``maxpool2d_forward_<sfx>`` ...): a block per tile of destination rows stages
  the source rows the tile needs in shared memory with coalesced loads, computes the tile from
  there and stores it coalesced. :func:`plan_tiles` cuts the planes into tiles: several whole
  planes a tile where a plane is small (AlexNet's 55x55, 27x27, 13x13), else runs of rows of one
  plane, aiming at ``TILE_BYTES`` of shared memory a block;
- the flat one (``maxpool2d_forward_flat_<sfx>`` ...): one thread per destination element
  reading its window from global memory, taken where :func:`plan_tiles` returns None: the
  source rows of one destination row need more than ``STAGE_LIMIT`` bytes (a huge window, a
  large dilation, very wide rows).

Both index in 32 bits: the host computes the magic numbers that decode an index without a
division (``_fastdiv``), and launches a tensor of 2^31 elements or more a run of whole planes
at a time. The argmax of max pooling is the int32 offset ``i*kw + j`` of the winner inside its
window (the CPU reference keeps uint8 where it fits).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from tinyflow.kernels import pool as reference
from tinyflow.kernels.pool import pool_output_shape
from tinyflow_cuda.kernels import _fastdiv
from tinyflow_cuda.kernels._fastdiv import magic
from tinyflow_cuda.kernels._launch import KernelCall
from tinyflow_cuda.runtime import MAX_BLOCKS, THREADS

__all__ = ["maxpool2d_forward", "maxpool2d_backward", "avgpool2d_forward", "avgpool2d_backward"]

Array = Any
Pair = tuple[int, int]

TILE_BYTES = 16 * 1024
"""The shared memory a tile aims at: several blocks of 256 threads per SM (an H100 has 228 KB),
and tiles of AlexNet's 55x55 float32 planes (12 KB) that are whole planes."""

STAGE_LIMIT = 48 * 1024
"""The most shared memory a tiled launch takes (what a block has without the opt-in). Where the
source rows of a single destination row need more, the flat kernel runs instead."""

TILE_ELEMENTS = 4 * THREADS
"""The destination elements a tile of whole planes aims at (4 per thread): small planes (13x13
-> 6x6) are grouped so that a block's threads have work."""


@dataclass(frozen=True)
class TilePlan:
    """How the tiled kernel cuts the planes: tiles of ``planes`` whole planes (then ``per_group``
    is 1 and ``rows`` all of a plane's destination rows) or of ``rows`` destination rows of one
    plane (``per_group`` tiles a plane); at most ``capacity`` source elements staged a tile,
    ``shared_mem`` bytes of dynamic shared memory a block."""

    planes: int
    rows: int
    per_group: int
    capacity: int
    shared_mem: int

    def tiles(self, planes: int) -> int:
        """The tiles of a launch over ``planes`` planes."""
        return math.ceil(planes / self.planes) * self.per_group

    def grid(self, planes: int) -> list[int]:
        """The kernel's tile arguments for ``planes`` planes: tile_planes, tile_rows,
        tiles_per_group, tiles."""
        return [self.planes, self.rows, self.per_group, self.tiles(planes)]


def plan_tiles(planes: int, dst_rows: int, dst_width: int, src_rows: int, src_width: int,
               staged_rows: Callable[[int], int], shared_bytes: Callable[[int], int]
               ) -> TilePlan | None:
    """Tiles for a tiled pool kernel, or None where the flat kernel must run.

    ``dst_rows`` x ``dst_width`` is a destination plane (out forward, dx backward), ``src_rows``
    x ``src_width`` a source plane (x forward, gout backward); ``staged_rows(r)`` bounds the
    source rows that ``r`` consecutive destination rows read, and ``shared_bytes(n)`` is the
    shared memory that ``n`` staged source elements take. Whole planes where a plane fits in
    ``TILE_BYTES`` (as many as reach ``TILE_ELEMENTS`` destination elements a tile), else the
    most rows whose staged span fits in ``TILE_BYTES`` (at least one); None where one row's span
    needs more than ``STAGE_LIMIT``: this is the switch to the flat kernel.
    """
    budget = min(TILE_BYTES, STAGE_LIMIT)
    plane = src_rows * src_width
    if shared_bytes(plane) <= budget:
        want = math.ceil(TILE_ELEMENTS / (dst_rows * dst_width))
        fit = max(1, budget // max(1, shared_bytes(plane)))
        count = max(1, min(want, fit, planes))
        while count > 1 and shared_bytes(count * plane) > budget:
            count -= 1
        if count > 1:
            return TilePlan(count, dst_rows, 1, count * plane, shared_bytes(count * plane))
    lo, hi = 1, dst_rows  # the most rows whose staged span fits the budget (spans grow with rows)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if shared_bytes(staged_rows(mid) * src_width) <= budget:
            lo = mid
        else:
            hi = mid - 1
    capacity = staged_rows(lo) * src_width
    if shared_bytes(capacity) > STAGE_LIMIT:
        return None
    return TilePlan(1, lo, math.ceil(dst_rows / lo), capacity, shared_bytes(capacity))


def _forward_plan(planes: int, h: int, w: int, oh: int, ow: int, kernel_size: Pair, stride: Pair,
                  dilation: Pair, itemsize: int) -> TilePlan | None:
    """Forward tiles: x rows staged for output rows (a row's windows span (KH-1)*DH+1 rows)."""
    span = (kernel_size[0] - 1) * dilation[0] + 1
    return plan_tiles(planes, oh, ow, h, w, lambda r: min(h, (r - 1) * stride[0] + span),
                      lambda n: n * itemsize)


def _backward_plan(planes: int, h: int, w: int, oh: int, ow: int, kernel_size: Pair,
                   stride: Pair, dilation: Pair, itemsize: int, with_argmax: bool
                   ) -> TilePlan | None:
    """Backward tiles: gout rows (and argmax rows) staged for input rows."""
    span = (kernel_size[0] - 1) * dilation[0]

    def shared_bytes(n: int) -> int:  # argmax after the gradients, at the next 16 bytes
        return (n * itemsize + 15) // 16 * 16 + 4 * n if with_argmax else n * itemsize

    return plan_tiles(planes, h, w, oh, ow, lambda r: min(oh, (r - 1 + span) // stride[0] + 1),
                      shared_bytes)


def _launch_tiles(call: KernelCall, plan: TilePlan, planes: int, args: list[Any]) -> None:
    """A tiled kernel over ``planes`` planes: a block per tile (grid-stride beyond MAX_BLOCKS)."""
    blocks = max(1, min(plan.tiles(planes), MAX_BLOCKS))
    call.runtime.launch(call.kernel, blocks, THREADS, args, shared_mem=plan.shared_mem)


def maxpool2d_forward(x: Array, kernel_size: Pair, stride: Pair, padding: Pair = (0, 0),
                      dilation: Pair = (1, 1), ceil_mode: bool = False) -> tuple[Array, Array]:
    """Max over each window of ``x`` (N, C, H, W): (out, argmax int32 window offset i*kw+j)."""
    call = KernelCall("maxpool2d_forward", x, op="max_pool2d")
    if not call.supported:  # not a floating dtype
        return reference.maxpool2d_forward(x, kernel_size, stride, padding, dilation, ceil_mode)
    with call:
        x = call.contiguous(x)
        n, c, h, w = x.shape
        oh, ow = pool_output_shape(h, w, kernel_size, stride, padding, dilation, ceil_mode)
        out = call.empty((n, c, oh, ow))  # (N, C, OH, OW)
        argmax = call.empty((n, c, oh, ow), np.int32)
        if out.size == 0:
            return out, argmax
        geometry = [h, w, *kernel_size, *stride, *padding, *dilation, oh, ow]
        planes = (x.reshape(n * c, h, w), out.reshape(n * c, oh, ow), argmax.reshape(n * c, oh, ow))
        plan = _forward_plan(n * c, h, w, oh, ow, kernel_size, stride, dilation, x.dtype.itemsize)
        flat = KernelCall("maxpool2d_forward_flat", x, op="max_pool2d")
        for p0, p1 in _fastdiv.chunks(n * c, max(h * w, oh * ow)):
            xs, os_, am = (a[p0:p1] for a in planes)
            if plan is None:
                flat.launch(os_.size, [xs, os_, am, os_.size, *geometry, magic(ow), magic(oh)])
            else:
                _launch_tiles(call, plan, p1 - p0, [xs, os_, am, p1 - p0, *geometry, *plan.grid(p1 - p0),
                                                    magic(ow), magic(oh), magic(plan.per_group)])
        return out, argmax


def maxpool2d_backward(gout: Array, argmax: Array, x_shape: tuple[int, int, int, int],
                       kernel_size: Pair, stride: Pair, padding: Pair = (0, 0),
                       dilation: Pair = (1, 1)) -> Array:
    """Route each output gradient to its window's winner; returns (N, C, H, W)."""
    call = KernelCall("maxpool2d_backward", gout, op="max_pool2d backward")
    if not call.supported:  # not a floating dtype
        return reference.maxpool2d_backward(gout, argmax, x_shape, kernel_size, stride, padding,
                                            dilation)
    with call:
        gout, argmax = call.contiguous(gout, argmax)
        if np.dtype(argmax.dtype) != np.int32:  # the CPU reference's uint8 offsets, moved here
            argmax = argmax.astype(np.int32)
        n, c, h, w = x_shape
        oh, ow = gout.shape[2:]
        dx = call.empty(tuple(x_shape))  # (N, C, H, W)
        if dx.size == 0:
            return dx
        if gout.size == 0:
            dx.fill(0)
            return dx
        (sh, sw), (dh, dw) = stride, dilation
        geometry = [h, w, *kernel_size, *stride, *padding, *dilation, oh, ow]
        steps = [magic(sh), magic(sw), magic(dh), magic(dw)]
        planes = (gout.reshape(n * c, oh, ow), argmax.reshape(n * c, oh, ow), dx.reshape(n * c, h, w))
        plan = _backward_plan(n * c, h, w, oh, ow, kernel_size, stride, dilation,
                              gout.dtype.itemsize, with_argmax=True)
        flat = KernelCall("maxpool2d_backward_flat", gout, op="max_pool2d backward")
        for p0, p1 in _fastdiv.chunks(n * c, max(h * w, oh * ow)):
            g, a, d = (arr[p0:p1] for arr in planes)
            if plan is None:
                flat.launch(d.size, [g, a, d, d.size, *geometry, magic(w), magic(h), *steps])
            else:
                _launch_tiles(call, plan, p1 - p0, [g, a, d, p1 - p0, *geometry, *plan.grid(p1 - p0),
                                                    plan.capacity, magic(w), magic(h),
                                                    magic(plan.per_group), *steps])
        return dx


def avgpool2d_forward(x: Array, kernel_size: Pair, stride: Pair, padding: Pair = (0, 0),
                      ceil_mode: bool = False, count_include_pad: bool = True) -> Array:
    """Mean over each window of ``x`` (N, C, H, W) -> (N, C, OH, OW), PyTorch's divisors."""
    call = KernelCall("avgpool2d_forward", x, op="avg_pool2d")
    if not call.supported:  # not a floating dtype
        return reference.avgpool2d_forward(x, kernel_size, stride, padding, ceil_mode,
                                           count_include_pad)
    with call:
        x = call.contiguous(x)
        n, c, h, w = x.shape
        oh, ow = pool_output_shape(h, w, kernel_size, stride, padding, (1, 1), ceil_mode)
        out = call.empty((n, c, oh, ow))  # (N, C, OH, OW)
        if out.size == 0:
            return out
        geometry = [h, w, *kernel_size, *stride, *padding, oh, ow, int(count_include_pad)]
        planes = (x.reshape(n * c, h, w), out.reshape(n * c, oh, ow))
        plan = _forward_plan(n * c, h, w, oh, ow, kernel_size, stride, (1, 1), x.dtype.itemsize)
        flat = KernelCall("avgpool2d_forward_flat", x, op="avg_pool2d")
        for p0, p1 in _fastdiv.chunks(n * c, max(h * w, oh * ow)):
            xs, os_ = (a[p0:p1] for a in planes)
            if plan is None:
                flat.launch(os_.size, [xs, os_, os_.size, *geometry, magic(ow), magic(oh)])
            else:
                _launch_tiles(call, plan, p1 - p0, [xs, os_, p1 - p0, *geometry, *plan.grid(p1 - p0),
                                                    magic(ow), magic(oh), magic(plan.per_group)])
        return out


def avgpool2d_backward(gout: Array, x_shape: tuple[int, int, int, int], kernel_size: Pair,
                       stride: Pair, padding: Pair = (0, 0), ceil_mode: bool = False,
                       count_include_pad: bool = True) -> Array:
    """Spread each output gradient evenly over its window; returns (N, C, H, W)."""
    call = KernelCall("avgpool2d_backward", gout, op="avg_pool2d backward")
    if not call.supported:  # not a floating dtype
        return reference.avgpool2d_backward(gout, x_shape, kernel_size, stride, padding,
                                            ceil_mode, count_include_pad)
    with call:
        gout = call.contiguous(gout)
        n, c, h, w = x_shape
        oh, ow = gout.shape[2:]
        dx = call.empty(tuple(x_shape))  # (N, C, H, W)
        if dx.size == 0:
            return dx
        if gout.size == 0:
            dx.fill(0)
            return dx
        sh, sw = stride
        geometry = [h, w, *kernel_size, *stride, *padding, oh, ow, int(count_include_pad)]
        planes = (gout.reshape(n * c, oh, ow), dx.reshape(n * c, h, w))
        plan = _backward_plan(n * c, h, w, oh, ow, kernel_size, stride, (1, 1),
                              gout.dtype.itemsize, with_argmax=False)
        flat = KernelCall("avgpool2d_backward_flat", gout, op="avg_pool2d backward")
        for p0, p1 in _fastdiv.chunks(n * c, max(h * w, oh * ow)):
            g, d = (a[p0:p1] for a in planes)
            if plan is None:
                flat.launch(d.size, [g, d, d.size, *geometry, magic(w), magic(h), magic(sh), magic(sw)])
            else:
                _launch_tiles(call, plan, p1 - p0, [g, d, p1 - p0, *geometry, *plan.grid(p1 - p0),
                                                    magic(w), magic(h), magic(plan.per_group),
                                                    magic(sh), magic(sw)])
        return dx
