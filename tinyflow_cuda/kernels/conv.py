"""CUDA twins of ``tinyflow/kernels/conv.py`` over csrc/conv.cu: im2col, col2im, and the copies
around the GEMM (conv_output, conv_output_grad), in float32, float64, float16 and bfloat16.

Same layout as the reference: ``col`` is (C*kh*kw, N*OH*OW) (on the GPU with K padded by zero
rows to a multiple of 8, see ops/conv.py), rows (channel, kernel row, kernel column), columns
(image, output row, output column). The GEMMs between them are ``xp.matmul`` calls in
ops/conv.py (cuBLAS through CuPy). The host does the integer work the kernels must not do per
element: magic-number divisors (``_fastdiv.magic``), the 32- or 64-bit variant
(:func:`index_kernel`), grids that keep y and z within 65535, which im2col gathers x by packs
(:func:`im2col_gathers`) or stages it, and the staged kernels' tiles and dynamic shared memory
(:func:`im2col_stage`, :func:`col2im_tile`; where none fits, the ``*_direct`` kernels, which read
x or col straight). See docs/convolution.md and docs/cuda.md.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tinyflow.kernels import conv as reference
from tinyflow.kernels.conv import conv_output_size
from tinyflow_cuda.kernels._fastdiv import magic
from tinyflow_cuda.kernels._launch import KernelCall
from tinyflow_cuda.runtime import THREADS

__all__ = ["im2col", "col2im", "conv_output", "conv_output_grad"]

Array = Any
Pair = tuple[int, int]

INDEX_LIMIT = 2**31
"""Arrays of at least this many elements take the *_wide kernels (64-bit row bases)."""
MAX_GRID_YZ = 65535
"""CUDA's limit on gridDim.y and gridDim.z; the kernels loop over what lies beyond it."""
VECTOR_BYTES = 16
"""The kernels load and store 16 bytes a thread where they can: 4 float32, 2 float64, 8 float16 /
bfloat16 (im2col's packs of x, col2im's of col, the staged im2col's stores)."""
SECTOR_BYTES = 32
WARP = 32
"""The staged kernels start every run they load on a 32-byte sector boundary."""
IM2COL_COLUMNS = 4
"""Columns an im2col thread gathers, blockDim apart (csrc/conv.cu IM2COL_COLUMNS)."""
STAGE_BYTES = 24576
"""The most dynamic shared memory a staged im2col block stages its input rows in."""
STAGE_ROWS = 512
"""The most input rows a staged im2col tile may stage."""
COL2IM_PIXELS = 4
"""Pixels a staged col2im thread sums (csrc/conv.cu COL2IM_PIXELS)."""
STAGE_BYTES_PER_THREAD = 96
"""The staged col2im's stage per thread of its block: 24 KB for 256 threads, so that 8 such blocks
(2,048 threads, an SM's most) stage 192 KB of an H100 SM's 228 KB."""
TAP_RUN_BYTES = 12
"""Shared memory per staged tap besides its run (csrc/conv.cu TapRun: three ints)."""
COPY_BYTES = 16
"""Bytes each thread of conv_output / conv_output_grad loads before it stores (csrc/conv.cu)."""


def index_kernel(name: str, *sizes: int) -> str:
    """``name`` or its 64-bit variant ``name_wide``: the wide one only when an array the kernel
    touches has 2**31 elements or more (32-bit offsets are cheaper per element)."""
    return f"{name}_wide" if max(sizes, default=0) >= INDEX_LIMIT else name


def _block_threads(n: int) -> int:
    """Threads for ``n`` items of work, one each: ``n`` rounded up to whole warps, at most THREADS.
    No thread idles beyond the last warp's tail (169 pixels: 192 threads, 23 idle, where a power
    of two, 256, idled 87)."""
    return min(THREADS, _warp_multiple(max(1, n)))


def _geometry(x_shape: tuple[int, ...], kernel_size: Pair, stride: Pair, padding: Pair,
              dilation: Pair) -> list[int]:
    """The kernels' shape arguments: N, C, H, W, KH, KW, SH, SW, PH, PW, DH, DW, OH, OW."""
    n, c, h, w = x_shape
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel_size, stride, padding, dilation
    oh = conv_output_size(h, kh, sh, ph, dh)
    ow = conv_output_size(w, kw, sw, pw, dw)
    return [n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow]


def _warp_multiple(n: int) -> int:
    """``n`` rounded up to a multiple of 32: the staged kernels load in whole-warp chunks of 32
    elements, and a chunk must not straddle two staged runs."""
    return -(-n // WARP) * WARP


def im2col_gathers(geo: list[int], itemsize: int) -> bool:
    """Whether im2col's packs read x without loading sectors for nothing: a tap's columns at most
    16 bytes apart (SW * itemsize <= 16), so that a warp's packs are consecutive (the kernel also
    needs x 16-byte aligned, which the caller checks)."""
    return geo[7] * itemsize <= VECTOR_BYTES


def im2col_stage(geo: list[int], itemsize: int, stage_bytes: int | None = None
                 ) -> tuple[int, int] | None:
    """(pitch, rows) of a staged im2col tile, or None where the staged kernel does not apply: a
    tile of THREADS * V columns spans at most ``rows`` = ceil(tile / OW) + 1 output rows (and at
    most N*OH), each staging the input pixels its taps span (at most min(W, (OW-1)*SW + 1)) from
    the sector boundary below (``pitch``: rounded up to whole warps); they must fit
    ``stage_bytes`` (the launch's dynamic shared memory, with an int a row) and STAGE_ROWS. And
    SW * itemsize <= 32: beyond, the taps of a row are more than a sector apart, and loading the
    whole row would move more sectors than reading the taps straight (im2col_direct)."""
    stage_bytes = STAGE_BYTES if stage_bytes is None else stage_bytes
    w, sw, ow = geo[3], geo[7], geo[13]
    if sw * itemsize > SECTOR_BYTES:
        return None
    tile = THREADS * (VECTOR_BYTES // itemsize)
    rows = min(-(-tile // ow) + 1, geo[0] * geo[12])  # and no more than the N*OH there are
    pitch = _warp_multiple(min(w, (ow - 1) * sw + 1) + SECTOR_BYTES // itemsize - 1)
    if rows > STAGE_ROWS or rows * (pitch * itemsize + 4) > stage_bytes:
        return None
    return pitch, rows


def im2col(x: Array, kernel_size: Pair, stride: Pair = (1, 1), padding: Pair = (0, 0),
           dilation: Pair = (1, 1), out: Array | None = None) -> Array:
    """Unfold ``x`` (N, C, H, W) into the column matrix (C*kh*kw, N*OH*OW), one launch.

    ``out``, if given, is a C-contiguous workspace of that shape and dtype to write into; it may
    have more rows (K padded for an aligned GEMM), which the kernel zeroes.
    """
    call = KernelCall("im2col", x)
    if not call.supported or (out is not None and not out.flags.c_contiguous):
        return reference.im2col(x, kernel_size, stride, padding, dilation, out=out)
    with call:
        x = call.contiguous(x)
        geo = _geometry(x.shape, kernel_size, stride, padding, dilation)
        n, c, kh, kw, oh, ow = geo[0], geo[1], geo[4], geo[5], geo[12], geo[13]
        k, nl = c * kh * kw, n * oh * ow
        if out is None:
            out = call.empty((k, nl))
        else:
            reference.check_columns_out(out, x.dtype, (k, nl))
        kp = out.shape[0]
        if out.size == 0:
            return out
        divisors = [magic(kh * kw), magic(kw)]
        if index_kernel("im2col", x.size, out.size) == "im2col_wide":
            wide = KernelCall("im2col_wide", x)
            grid = (-(-(oh * ow) // THREADS), min(kp, MAX_GRID_YZ), min(n, MAX_GRID_YZ))
            wide.launch_grid(grid, THREADS, [x, out, *geo, k, kp, *divisors, magic(ow)])
            return out
        itemsize = x.dtype.itemsize
        per_thread, sector = VECTOR_BYTES // itemsize, SECTOR_BYTES // itemsize
        address = call.runtime.address(out)
        aligned_x = call.runtime.address(x) % VECTOR_BYTES == 0
        if address % itemsize == 0 and aligned_x and im2col_gathers(geo, itemsize):
            # tiles of blockDim * IM2COL_COLUMNS columns, each starting up to a sector early so
            # that its warps store whole sectors (the kernel reads where out's sectors start off
            # its address, a view's included): one spare tile per row
            columns = nl + sector - 1
            threads = _block_threads(-(-columns // IM2COL_COLUMNS))
            grid = (-(-columns // (threads * IM2COL_COLUMNS)), min(kp, MAX_GRID_YZ))
            call.launch_grid(grid, threads, [x, out, *geo, k, kp, *divisors, magic(ow), magic(oh)])
            return out
        stage = im2col_stage(geo, itemsize) if address % itemsize == 0 else None
        if stage is not None:
            # tiles of THREADS * V columns, each starting up to V-1 columns early so that its
            # 16-byte stores are aligned: one spare tile per row
            (pitch, rows), staged = stage, KernelCall("im2col_staged", x)
            head = address // itemsize % per_thread  # out's first element, in elements mod V
            grid = (-(-(nl + per_thread - 1) // (THREADS * per_thread)), min(kp, MAX_GRID_YZ))
            staged.runtime.launch(staged.kernel, grid, THREADS,
                                  [x, out, *geo, k, kp, head, pitch, rows, *divisors, magic(ow),
                                   magic(oh), magic(pitch)],
                                  shared_mem=rows * (pitch * itemsize + 4))
            return out
        direct = KernelCall("im2col_direct", x)
        # vector stores: every row starts 16-byte aligned, so the rows' length must allow it
        vec = nl % per_thread == 0 and address % VECTOR_BYTES == 0
        grid = (-(-nl // (THREADS * per_thread)), min(kp, MAX_GRID_YZ))
        direct.launch_grid(grid, THREADS, [x, out, *geo, k, kp, int(vec), *divisors,
                                           magic(oh * ow), magic(ow)])
        return out


@dataclass(frozen=True)
class Col2imTile:
    """How the staged col2im cuts the work: blocks of ``threads`` over ``rows`` image rows of
    ``images`` images of one channel (``images`` > 1 only with whole planes, rows == H), staging
    ``taps`` taps' runs of col a round, ``pitch`` elements each (whole 16-byte packs), in
    ``shared_mem`` bytes of dynamic shared memory (the stage and a TapRun per tap)."""

    rows: int
    images: int
    taps: int
    pitch: int
    threads: int
    shared_mem: int


def col2im_tile(geo: list[int], itemsize: int, stage_bytes: int | None = None,
                max_images: int | None = None) -> Col2imTile | None:
    """The staged col2im's tile, or None where it does not apply (col2im_direct).

    A block sums at most COL2IM_PIXELS * THREADS pixels, less the sector lead of its stores: TH
    whole image rows where a plane is larger, else NB whole planes of one channel (as many as fit,
    spread evenly over the batch), so that small planes (13x13, 7x7) still give a block 128-256
    threads (and a tile of at most 256 pixels one thread a pixel). Each tap's run of col spans
    NB-1 images and ceil(TH / SH) output rows, plus up to a sector less one element before it
    (it is staged from a sector boundary): ``pitch``, in whole sectors. A round stages as many taps as
    ``stage_bytes`` holds (STAGE_BYTES_PER_THREAD per thread by default: the stage of a full SM of
    such blocks fits its shared memory); where not even one tap's run fits, fewer rows. None where
    a single image row is wider than a tile. ``max_images`` caps the images of a tile (tests)."""
    n, h, w, kh, kw, sh, oh, ow = geo[0], geo[2], geo[3], geo[4], geo[5], geo[6], geo[12], geo[13]
    sector = SECTOR_BYTES // itemsize
    lead = sector - 1
    capacity = COL2IM_PIXELS * THREADS - lead  # pixels a block sums
    if h * w <= capacity:
        th, most = h, min(n, capacity // (h * w), max_images or n)
        images = -(-n // -(-n // most))  # the groups of the batch, evenly filled
    else:
        most = capacity // w
        th, images = (-(-h // -(-h // most)) if most else 0), 1  # tiles of the plane, evenly filled
    while th >= 1:
        slots = images * th * w + lead  # a thread's pixels are blockDim apart, from the lead
        threads = _block_threads(max(-(-slots // COL2IM_PIXELS), min(slots, THREADS)))
        budget = STAGE_BYTES_PER_THREAD * threads if stage_bytes is None else stage_bytes
        run = (images - 1) * oh * ow + min(oh, -(-th // sh)) * ow
        pitch = -(-(run + lead) // sector) * sector
        per_tap = pitch * itemsize + TAP_RUN_BYTES
        taps = min(kh * kw, budget // per_tap)
        if taps >= 1:
            shared = -(-(taps * per_tap) // VECTOR_BYTES) * VECTOR_BYTES
            return Col2imTile(th, images, taps, pitch, threads, shared)
        if images > 1:
            images = max(1, images // 2)
        else:
            th -= 1
    return None


def col2im(col: Array, x_shape: tuple[int, int, int, int], kernel_size: Pair,
           stride: Pair = (1, 1), padding: Pair = (0, 0), dilation: Pair = (1, 1)) -> Array:
    """The adjoint of :func:`im2col`: (C*kh*kw, N*OH*OW) -> (N, C, H, W), gathered per pixel."""
    call = KernelCall("col2im", col)
    if not call.supported:
        return reference.col2im(col, x_shape, kernel_size, stride, padding, dilation)
    with call:
        col = call.contiguous(col)
        geo = _geometry(tuple(x_shape), kernel_size, stride, padding, dilation)
        n, c, h, w, kh, kw, sh, sw, _, _, dh, dw, oh, ow = geo
        if col.shape != (c * kh * kw, n * oh * ow):
            raise ValueError(f"col2im: col {tuple(col.shape)} does not match x_shape "
                             f"{tuple(x_shape)} with kernel {kernel_size}: expected "
                             f"{(c * kh * kw, n * oh * ow)}")
        dx = call.empty(tuple(x_shape))
        if dx.size == 0:
            return dx
        wide = index_kernel("col2im", col.size, dx.size) == "col2im_wide"
        aligned = call.runtime.address(col) % VECTOR_BYTES == 0  # the stage loads 16-byte packs
        tile = None if wide or not aligned else col2im_tile(geo, col.dtype.itemsize)
        if tile is not None:
            grid = (-(-h // tile.rows), min(c, MAX_GRID_YZ), min(-(-n // tile.images), MAX_GRID_YZ))
            # a tap step moves h + PH - i*DH by -dh: its quotient and remainder by sh
            steps = [*divmod(dh, sh), *divmod(dw, sw)]
            divisors = [magic(w), magic(tile.rows * w), magic(kw), magic(sh), magic(sw),
                        magic(tile.pitch * col.dtype.itemsize // VECTOR_BYTES)]
            call.runtime.launch(call.kernel, grid, tile.threads,
                                [col, dx, *geo, tile.rows, tile.images, tile.taps, tile.pitch,
                                 *steps, *divisors], shared_mem=tile.shared_mem)
            return dx
        call = KernelCall("col2im_wide" if wide else "col2im_direct", col)
        threads = _block_threads(h * w)
        grid = (-(-(h * w) // threads), min(c, MAX_GRID_YZ), min(n, MAX_GRID_YZ))
        # a step of one output row moves the tap row by -sh / dh: its quotient and remainder
        steps = [*divmod(sh, dh), *divmod(sw, dw)]
        divisors = [magic(d) for d in (w, sh, sw, dh, dw)]
        call.launch_grid(grid, threads, [col, dx, *geo, *steps, *divisors])
        return dx


def _copy_grid(columns: int, channels: int, itemsize: int) -> tuple[tuple[int, int], int]:
    """The grid and block of conv_output / conv_output_grad over ``channels`` runs of ``columns``:
    COPY_BYTES per thread (that many bytes of loads in flight), as many threads as the columns
    need up to THREADS in whole warps, y folded past 65535."""
    per_thread = COPY_BYTES // itemsize
    threads = _block_threads(-(-columns // per_thread))
    return (-(-columns // (threads * per_thread)), min(channels, MAX_GRID_YZ)), threads


def conv_output(out: Array, bias: Array | None, shape: tuple[int, int, int, int],
                relu: bool = False) -> Array:
    """The GEMM result ``out`` (O, N*OH*OW) as y (N, O, OH, OW) + bias, ReLU'd when ``relu``:
    one launch over a channel's N*OH*OW columns a grid row (see csrc/conv.cu); past 2^31
    elements the reference's xp ops (a tensor of 8 GB and more: the copy's cost is no concern)."""
    call = KernelCall("conv_output", out, bias, op="conv2d")
    if not call.supported or out.size >= INDEX_LIMIT:  # 32-bit offsets within a channel's rows
        return reference.conv_output(out, bias, shape, relu)
    with call:
        out, bias = call.contiguous(out, bias)
        n, o, oh, ow = shape
        y = call.empty(tuple(shape))
        if y.size == 0:
            return y
        grid, threads = _copy_grid(n * oh * ow, o, out.dtype.itemsize)
        call.launch_grid(grid, threads, [out, bias, y, n, o, oh * ow, int(relu), magic(oh * ow)])
        return y


def conv_output_grad(gout: Array, relu_out: Array | None = None,
                     bias_grad: bool = False) -> tuple[Array, Array | None]:
    """``gout`` (N, O, OH, OW) -> (gy (O, N*OH*OW), gb (O,) or None), in one launch (plus the sum
    of a few partials per channel for gb): the transpose, the fused ReLU's mask (``relu_out``, its
    output) and the bias gradient's sums (in float32 for the half types) in one pass."""
    call = KernelCall("conv_output_grad", gout, relu_out, op="conv2d")
    if (not call.supported or (relu_out is not None and relu_out.shape != gout.shape)
            or gout.size >= INDEX_LIMIT):  # 32-bit offsets within a channel's rows
        return reference.conv_output_grad(gout, relu_out, bias_grad)
    with call:
        gout, relu_out = call.contiguous(gout, relu_out)
        n, o, oh, ow = gout.shape
        gy = call.empty((o, n * oh * ow))
        if gy.size == 0:
            return gy, (call.zeros((o,)) if bias_grad else None)
        grid, threads = _copy_grid(n * oh * ow, o, gout.dtype.itemsize)
        acc = np.float64 if gout.dtype == np.float64 else np.float32
        partial = call.empty((o, grid[0]), dtype=acc) if bias_grad else None
        call.launch_grid(grid, threads, [gout, relu_out, gy, partial, n, o, oh * ow, magic(oh * ow)])
        gb = None
        if bias_grad:
            gb = partial.sum(axis=1).astype(gout.dtype, copy=False)
        return gy, gb
