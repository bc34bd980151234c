"""Compression round trips, the bytes it saves, and error feedback keeping the long-run sum."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tinyflow.parallel import allreduce, run_local
from tinyflow.parallel.compression import (
    FP16Compression,
    OneBitCompression,
    get_compression,
)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 2000), seed=st.integers(0, 10_000))
def test_fp16_round_trip_within_half_precision(n, seed):
    x = np.random.default_rng(seed).standard_normal(n).astype(np.float32)
    c = FP16Compression()
    packed = c.compress(x)
    assert packed.dtype == np.float16 and packed.nbytes * 2 == x.nbytes
    out = np.empty_like(x)
    c.decompress(packed, out)
    np.testing.assert_allclose(out, x, rtol=1e-3, atol=1e-4)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 3000), block=st.sampled_from([8, 64, 512]), seed=st.integers(0, 10_000))
def test_onebit_round_trip_keeps_signs_block_sums_and_residual(n, block, seed):
    x = np.random.default_rng(seed).standard_normal(n).astype(np.float64)
    c = OneBitCompression(block=block)
    bits, scales = c.compress(x, key="g")
    assert bits.dtype == np.uint8 and bits.size == -(-(-(-n // block) * block) // 8)
    assert scales.shape == (-(-n // block), 2)
    out = np.empty_like(x)
    c.decompress(bits, scales, out)
    assert np.all((out >= 0) == (x >= 0)), "every value keeps its sign"
    for b in range(0, n, block):  # each block's sum survives (scales are float32)
        np.testing.assert_allclose(out[b : b + block].sum(), x[b : b + block].sum(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(c.residuals["g"], x - out, atol=1e-12)


def test_onebit_error_feedback_keeps_the_long_run_sum():
    rng = np.random.default_rng(0)
    c = OneBitCompression(block=64)
    true_sum = np.zeros(1000)
    sent_sum = np.zeros(1000)
    residual_norms = []
    for _ in range(200):
        g = rng.standard_normal(1000) + 0.1  # a biased gradient, as in real training
        bits, scales = c.compress(g, key=0)
        out = np.empty_like(g)
        c.decompress(bits, scales, out)
        true_sum += g
        sent_sum += out
        residual_norms.append(np.abs(c.residuals[0]).max())
    # telescoping: what was sent = what was meant - what is still owed
    np.testing.assert_allclose(sent_sum, true_sum - c.residuals[0], atol=1e-6)
    # and what is owed stays bounded instead of growing with the number of steps
    assert max(residual_norms[100:]) < 3 * max(residual_norms[:100]) + 1
    assert np.abs(true_sum - sent_sum).max() < 0.05 * np.abs(true_sum).max()
    # without feedback the error grows like the number of steps
    c2 = OneBitCompression(block=64)
    drift = np.zeros(1000)
    for _ in range(200):
        g = rng.standard_normal(1000) + 0.1
        c2.residuals.clear()
        bits, scales = c2.compress(g)
        out = np.empty_like(g)
        c2.decompress(bits, scales, out)
        drift += g - out
    assert np.abs(drift).max() > 3 * np.abs(true_sum - sent_sum).max()


@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_compressed_allreduce_sums_and_bytes(world):
    length = 4096
    rng = np.random.default_rng(world)
    grads = [rng.standard_normal(length).astype(np.float32) for _ in range(world)]
    exact = np.sum(grads, axis=0)

    def fn(comm):
        results = {}
        for name in ("none", "fp16", "1bit"):
            buf = grads[comm.rank].copy()
            comm.reset_counters()
            comp = get_compression(name)
            if comp is None:
                allreduce(buf, comm, algorithm="ring")
            else:
                comp.allreduce_sum(buf, comm, algorithm="ring", key="bucket0")
            results[name] = (buf, comm.bytes_sent, comp)
        return results

    outs = run_local(fn, world)
    for res in outs:
        np.testing.assert_allclose(res["none"][0], exact, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(res["fp16"][0], exact, rtol=2e-3, atol=5e-3)
        np.testing.assert_array_equal(res["1bit"][0], outs[0]["1bit"][0])  # identical on all ranks
        # what every rank decoded = sum over ranks of (gradient - that rank's residual)
        owed = sum(o["1bit"][2].residuals["bucket0"] for o in outs)
        np.testing.assert_allclose(res["1bit"][0], exact - owed, rtol=1e-4, atol=1e-4)
        if world > 1:
            assert res["fp16"][1] * 2 == res["none"][1]
            full = res["none"][1]
            onebit = res["1bit"][1]
            nblocks = length // 512
            # all-gather: (N-1) blocks of bits + scales (and the 8-byte length of nothing else)
            assert onebit == (world - 1) * (length // 8 + nblocks * 2 * 4)
            assert onebit < full / 8
        else:
            assert res["none"][1] == res["fp16"][1] == res["1bit"][1] == 0


def test_get_compression_names():
    assert get_compression(None) is None and get_compression("none") is None
    assert isinstance(get_compression("fp16"), FP16Compression)
    assert isinstance(get_compression("1bit"), OneBitCompression)
    with pytest.raises(ValueError, match="unknown compression 'int8'"):
        get_compression("int8")
