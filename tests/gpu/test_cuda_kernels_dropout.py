"""Dropout masks (csrc/dropout.cu): rate, values, determinism."""
from __future__ import annotations

import numpy as np
import pytest

from kernel_backend import run


# ---- dropout ------------------------------------------------------------------------------------
@pytest.mark.parametrize("p", [0.0, 0.1, 0.5, 0.9])
def test_dropout_mask_rate_values_and_determinism(emu, p):
    like = np.empty((64, 1000), np.float32)
    mask = run(emu, "dropout_mask", like, p, 1234)
    scale = np.float32(1 / (1 - p))
    assert mask.shape == like.shape and mask.dtype == np.float32
    assert set(np.unique(mask)) <= {np.float32(0), scale}
    kept = (mask != 0).mean()
    # 64000 Bernoulli draws: 6 standard deviations of the keep rate
    assert abs(kept - (1 - p)) <= 6 * np.sqrt(p * (1 - p) / mask.size) + 1e-12
    np.testing.assert_array_equal(mask, run(emu, "dropout_mask", like, p, 1234))
    if 0 < p:
        assert not np.array_equal(mask, run(emu, "dropout_mask", like, p, 1235))
    # neighbouring elements are uncorrelated (a counter hash with a weak mix would fail this)
    flat = (mask.reshape(-1) != 0).astype(np.float64)
    if 0 < p:
        corr = np.corrcoef(flat[:-1], flat[1:])[0, 1]
        assert abs(corr) < 0.05


# ---- the seed read from device memory (a captured step's slot) ------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_dropout_mask_reads_its_seed_from_a_device_word(emu, dtype):
    """A (1,) uint64 seed array gives the mask of the int seed it holds, in every dtype; the
    kernel takes it as the seed_ptr argument (the scalar seed is then ignored)."""
    if dtype == "bfloat16":
        dtype = pytest.importorskip("ml_dtypes").bfloat16
    like = np.empty((3, 1000), dtype)
    for seed in (0, 1234, 2**63 - 2, 2**64 - 1):
        by_value = run(emu, "dropout_mask", like, 0.3, seed)
        by_pointer = run(emu, "dropout_mask", like, 0.3, np.array([seed], np.uint64))
        np.testing.assert_array_equal(by_pointer.astype(np.float32), by_value.astype(np.float32))
    other = run(emu, "dropout_mask", like, 0.3, np.array([1235], np.uint64))
    assert not np.array_equal(other.astype(np.float32),
                              run(emu, "dropout_mask", like, 0.3, 1234).astype(np.float32))


def test_dropout_mask_launch_passes_the_pointer_and_rejects_bad_seed_arrays(emu):
    if emu.kind != "emulator":
        pytest.skip("inspects the emulator's launch arguments")
    from tinyflow_cuda import runtime
    from tinyflow_cuda.kernels import dropout as twin

    seen = []

    class Spy:
        def __init__(self, inner):
            self.inner = inner

        def launch(self, name, grid, block, args, **kw):
            seen.append((name, list(args)))
            self.inner.launch(name, grid, block, args, **kw)

        def __getattr__(self, name):
            return getattr(self.inner, name)

    seed = np.array([77], np.uint64)
    with runtime.use(Spy(emu.emu)):
        twin.dropout_mask(np.empty(10, np.float32), 0.5, seed)
        twin.dropout_mask(np.empty(10, np.float32), 0.5, 77)
    (name, args), (_, args_int) = seen
    assert name == "dropout_mask_f32" and args[1] is seed and args[2] == 0
    assert args_int[1] is None and args_int[2] == 77
    for bad in (np.array([1, 2], np.uint64), np.array([1], np.int64), 1.5):
        with pytest.raises(TypeError, match="dropout_mask: seed must be an int or a \\(1,\\) uint64"):
            twin.dropout_mask(np.empty(10, np.float32), 0.5, bad)


def test_reference_dropout_mask_takes_the_seed_as_an_array_too():
    from tinyflow.kernels import dropout as ref

    like = np.empty((4, 50), np.float32)
    np.testing.assert_array_equal(ref.dropout_mask(like, 0.4, np.array([9], np.uint64)),
                                  ref.dropout_mask(like, 0.4, 9))
    assert not np.array_equal(ref.dropout_mask(like, 0.4, np.array([10], np.uint64)),
                              ref.dropout_mask(like, 0.4, 9))
