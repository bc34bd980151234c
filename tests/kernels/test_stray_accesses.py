"""No kernel touches global memory outside its arguments: the representative launches of every
.cu family, run on the instrumented emulator, make no stray access (the coalescing report's
``stray``: an access outside every argument buffer, in the guard the recorder puts around each).

An access that starts inside an argument and ends past it (``overhang``) is allowed only as a
16-byte vector load of the pack that holds the argument's last bytes: such a pack never leaves
the allocation on a GPU (allocations are 256-byte aligned and a page is 4 KiB), and the kernels
mask what it reads past the end (im2col's packs of x).

Convolution runs in all four dtypes, the rest in float32 (float16 where a family has a kernel
only the half types take). Each family is built with its own .cu files (coalescing.subset), in
the groups the other report tests build, so the instrumented libraries are shared (~10 s each the
first time, cached by content).

The proof that this catches the class: before issue 34's fix, im2col decoded the zero rows that
pad K to KP as channels past C and loaded a plane past x for the last image (masked to zero, so
the results were right): ``im2col_f32`` had 556 stray loads up to 824 bytes past x on the
(2, 3, 19, 19) 11x11/4 case below.
"""
from __future__ import annotations

from collections.abc import Callable

import ml_dtypes
import numpy as np
import pytest

from cuda_tools import coalescing, emulator
from tinyflow_cuda.runtime import CSRC, discover

pytestmark = pytest.mark.skipif(emulator.compiler() is None, reason="the emulator needs g++")

F32, F64, F16 = np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.float16)
BF16 = np.dtype(ml_dtypes.bfloat16)
CONV_DTYPES = [F32, F64, F16, BF16]
VECTOR_BYTES = 16

GROUPS = {  # the .cu files built together: the other instrumented tests' subsets, and the rest
    "conv": ["conv", "pool"], "pool": ["conv", "pool"], "rnn": ["rnn"],
    **{f: ["activation", "allreduce", "batchnorm", "embedding", "loss", "lrn", "optim", "dropout"]
       for f in ("activation", "allreduce", "batchnorm", "embedding", "loss", "lrn", "optim",
                 "dropout")},
}

Launch = Callable[[np.random.Generator, np.dtype], None]


def _conv(rng: np.random.Generator, dtype: np.dtype) -> None:
    """im2col by packs, staged and direct, with K padded to KP as the op does (K = 363 -> 368, 27
    -> 32, 36 -> 40), into an offset view too; col2im staged and direct; the copies around the
    GEMM."""
    from tinyflow_cuda import kernels

    def x_of(shape):
        return rng.standard_normal(shape).astype(dtype)

    for shape, k, s, p in [((2, 3, 19, 19), 11, 4, 2),  # AlexNet conv1's geometry: K = 363
                           ((2, 3, 9, 9), 3, 1, 1),      # K = 27, not a multiple of the pack
                           ((1, 4, 20, 20), 3, 6, 0),    # stride 6: staged in fp32
                           ((1, 4, 30, 30), 3, 9, 1)]:   # stride 9: direct in fp32
        x = x_of(shape)
        oh = (shape[2] + 2 * p - k) // s + 1
        kk, nl = shape[1] * k * k, shape[0] * oh * oh
        out = np.empty((-(-kk // 8) * 8, nl), dtype)
        kernels.im2col(x, (k, k), (s, s), (p, p), out=out)
        kernels.col2im(x_of((kk, nl)), shape, (k, k), (s, s), (p, p))
    # x and col one element off 16 bytes: the staged and direct kernels, whatever the stride
    x = x_of((2 * 3 * 9 * 9 + 1,))[1:].reshape(2, 3, 9, 9)
    kernels.im2col(x, (3, 3), (1, 1), (1, 1))
    kernels.col2im(x_of((27 * 162 + 1,))[1:].reshape(27, 162), (2, 3, 9, 9), (3, 3), (1, 1), (1, 1))
    # the GEMM's result into y (+ bias, ReLU) and back
    gemm = x_of((5, 2 * 7 * 7))
    y = kernels.conv_output(gemm, x_of((5,)), (2, 5, 7, 7), relu=True)
    kernels.conv_output_grad(x_of((2, 5, 7, 7)), y, bias_grad=True)
    kernels.conv_output(gemm, None, (2, 5, 7, 7))
    kernels.conv_output_grad(x_of((2, 5, 7, 7)))


def _pool(rng: np.random.Generator, dtype: np.dtype) -> None:
    """Max and average pooling, tiled (whole planes, rows of a plane) and flat, forward and back."""
    from tinyflow_cuda import kernels
    for shape, k, s, p in [((2, 4, 13, 13), 3, 2, 0), ((1, 2, 55, 55), 3, 2, 1),
                           ((1, 1, 40, 1280), (30, 1), (1, 1), (0, 0))]:  # rows > 48 KB: flat
        k, s, p = (v if isinstance(v, tuple) else (v, v) for v in (k, s, p))
        x = rng.standard_normal(shape).astype(dtype)
        out, argmax = kernels.maxpool2d_forward(x, k, s, p)
        kernels.maxpool2d_backward(rng.standard_normal(out.shape).astype(dtype), argmax, shape, k,
                                   s, p)
        out = kernels.avgpool2d_forward(x, k, s, p)
        kernels.avgpool2d_backward(rng.standard_normal(out.shape).astype(dtype), shape, k, s, p)


def _lrn(rng: np.random.Generator, dtype: np.dtype) -> None:
    from tinyflow_cuda import kernels
    x = rng.standard_normal((2, 7, 5, 5)).astype(dtype)
    out, scale = kernels.lrn_forward(x, 5, 1e-4, 0.75, 2.0)
    kernels.lrn_backward(rng.standard_normal(x.shape).astype(dtype), x, out, scale, 5, 1e-4, 0.75, 2.0)


def _loss(rng: np.random.Generator, dtype: np.dtype) -> None:
    from tinyflow_cuda import kernels
    n, c = 5, 37
    logits = rng.standard_normal((n, c)).astype(dtype)
    target = rng.integers(0, c, n)
    target[1] = -100  # ignored
    weight = rng.random(c).astype(dtype)
    kernels.log_softmax_forward(logits)
    for smoothing, w in ((0.0, None), (0.1, weight)):
        _, lp = kernels.softmax_cross_entropy_forward(logits, target, label_smoothing=smoothing,
                                                      weight=w)
        kernels.softmax_cross_entropy_backward(lp, target, np.ones(n, dtype),
                                               label_smoothing=smoothing, weight=w)


def _batchnorm(rng: np.random.Generator, dtype: np.dtype) -> None:
    from tinyflow_cuda import kernels
    x = rng.standard_normal((3, 4, 5, 7)).astype(dtype)
    w, b = rng.standard_normal((2, 4)).astype(dtype)
    mean, var = np.zeros(4, dtype), np.ones(4, dtype)
    _, save_mean, save_invstd = kernels.batch_norm_forward(x, w, b, mean, var, True, 0.1, 1e-5)
    kernels.batch_norm_forward(x, w, b, mean, var, False, 0.1, 1e-5)
    gout = rng.standard_normal(x.shape).astype(dtype)
    kernels.batch_norm_backward(gout, x, w, save_mean, save_invstd, True)
    kernels.batch_norm_backward(gout, x, w, save_mean, save_invstd, False, (False, True, True))


def _embedding(rng: np.random.Generator, dtype: np.dtype) -> None:
    from tinyflow_cuda import kernels
    for d in (dtype, F16):  # the half types add in float32 and round in a second kernel
        grad = rng.standard_normal((9, 13)).astype(d)
        kernels.embedding_backward(grad, rng.integers(0, 6, 9), 6, padding_idx=2)


def _dropout(rng: np.random.Generator, dtype: np.dtype) -> None:
    from tinyflow_cuda import kernels
    kernels.dropout_mask(rng.standard_normal((3, 333)).astype(dtype), 0.5, 1234)
    kernels.dropout_mask(rng.standard_normal(77).astype(dtype), 0.25, np.array([99], np.uint64))


def _optim(rng: np.random.Generator, dtype: np.dtype) -> None:
    from tinyflow_cuda import kernels

    def tensors(count=1):
        return [rng.standard_normal(n).astype(dtype) for n in (1000, 3, 517)[:count]] if count > 1 \
            else rng.standard_normal(1003).astype(dtype)

    p, g, m = tensors(), tensors(), tensors()
    kernels.sgd_momentum_update(p, g, m, 0.1, momentum=0.9, weight_decay=1e-4, nesterov=True)
    v, vmax = tensors(), np.abs(tensors())
    kernels.adam_update(p, g, m, np.abs(v), vmax, 3, 1e-3, amsgrad=True)
    ps, gs, ms, vs = (tensors(3) for _ in range(4))
    kernels.sgd_multi_tensor_update(ps, gs, ms, None, 0.1, momentum=0.9)
    kernels.adam_multi_tensor_update(ps, gs, ms, [np.abs(a) for a in vs], None, None, 2, 1e-3)
    kernels.amp_update_scale(np.array([1024.0], np.float32), np.zeros(1, np.int32),
                             np.zeros(1, np.float32), 2.0, 0.5, 2000)


def _rnn(rng: np.random.Generator, dtype: np.dtype) -> None:
    """The fused cells and the persistent sequence kernels at a small size."""
    from tinyflow_cuda import kernels
    steps, hidden, batch = 3, 5, 3
    h, c = rng.standard_normal((2, hidden, batch)).astype(dtype)
    gates = rng.standard_normal((4 * hidden, batch)).astype(dtype)
    h1, c1, acts = kernels.lstm_cell_forward(gates, c)
    kernels.lstm_cell_backward(h, c, acts, c, c1)
    gi, gh = rng.standard_normal((2, 3 * hidden, batch)).astype(dtype)
    _, gacts = kernels.gru_cell_forward(gi, gh, h)
    kernels.gru_cell_backward(h, gacts, gh, h)
    for gates, layer in ((4, "lstm"), (3, "gru")):
        proj = rng.standard_normal((gates * hidden, steps, batch)).astype(dtype)
        w_hh = (rng.standard_normal((gates * hidden, hidden)) / hidden).astype(dtype)
        dout = rng.standard_normal((steps, hidden, batch)).astype(dtype)
        if layer == "lstm":
            acts, hs, cs = kernels.lstm_sequence_forward(proj, w_hh, h, c)
            kernels.lstm_sequence_backward(dout, h, c, w_hh, acts, cs)
        else:
            b_hh = rng.standard_normal(gates * hidden).astype(dtype)
            acts, gh, hs = kernels.gru_sequence_forward(proj, w_hh, b_hh, h)
            kernels.gru_sequence_backward(dout, h, w_hh, acts, gh, hs)


def _activation(rng: np.random.Generator, dtype: np.dtype) -> None:
    from tinyflow_cuda import kernels
    for x in (rng.standard_normal(1001).astype(dtype),           # a ragged tail of the packs
              rng.standard_normal(1025).astype(dtype)[1:]):      # misaligned: scalar loads
        y = kernels.relu_forward(x)
        kernels.relu_backward(rng.standard_normal(x.shape).astype(dtype), y)


def _allreduce(rng: np.random.Generator, dtype: np.dtype) -> None:
    from tinyflow_cuda import kernels
    dst = rng.standard_normal(1003).astype(dtype)
    kernels.reduce_add(dst, rng.standard_normal(1003).astype(dtype))
    kernels.reduce_scale(dst, 0.25)


CASES: dict[str, tuple[Launch, list[np.dtype]]] = {
    "conv": (_conv, CONV_DTYPES), "pool": (_pool, [F32]), "lrn": (_lrn, [F32]),
    "loss": (_loss, [F32]), "batchnorm": (_batchnorm, [F32]), "embedding": (_embedding, [F32]),
    "dropout": (_dropout, [F32]), "optim": (_optim, [F32]), "rnn": (_rnn, [F32]),
    "activation": (_activation, [F32]), "allreduce": (_allreduce, [F32]),
}

# kernels no launch above reaches: the 64-bit variants past 2^31 elements, and the ones the
# twins keep for other callers
UNREACHED = {"im2col_wide", "col2im_wide"}


def _families() -> list[str]:
    return sorted({info.source.stem for info in discover(CSRC).values()})


def test_every_family_has_its_launches():
    assert sorted(CASES) == _families()
    assert set(GROUPS) == set(CASES)


def _record(family: str) -> coalescing.Report:
    launch, dtypes = CASES[family]
    with coalescing.recording(families=GROUPS[family]) as rec:
        for dtype in dtypes:
            launch(np.random.default_rng(0), dtype)
    return rec.report()


@pytest.mark.parametrize("family", sorted(CASES))
def test_no_kernel_accesses_memory_outside_its_arguments(family):
    report = _record(family)
    ran = {name.rsplit("_", 1)[0] for name in report.kernels}
    mine = {name.rsplit("_", 1)[0] for name, info in discover(CSRC).items()
            if info.source.stem == family}
    assert mine - ran <= UNREACHED, f"{family}: no launch of {sorted(mine - ran - UNREACHED)}"
    strays = [f"{s.kernel} {s.describe()}" for s in report.strays() if s.stray]
    assert not strays, f"{family}: accesses outside every argument:\n" + "\n".join(strays)
    for site in report.strays():  # overhang: only a 16-byte pack holding the argument's end
        assert site.reach < VECTOR_BYTES and site.kind == "load", f"{site.kernel} {site.describe()}"
