"""The strict stand-in's count of GPU work per call (strict_cupy/launches.py): views launch nothing,
copies and elementwise calls one kernel each, zeros a memset, host data a memcpy. The launch-budget
tests (tests/test_launch_budget.py) add these up over a training step, so each rule is pinned here."""
from __future__ import annotations

import numpy as np
import pytest

from cuda_tools import strict_cupy
from cuda_tools.strict_cupy import strict_cupy as cp
from cuda_tools.strict_cupy.launches import tally


def work(fn) -> tuple[int, int]:
    """(kernels, memops) that ``fn()`` issues on the stand-in."""
    with strict_cupy.record_calls() as calls:
        fn()
    t = tally(calls)
    return t.kernels, t.memops


@pytest.fixture
def a():
    return cp.arange(24, dtype=cp.float32).reshape(2, 3, 4)


def test_views_launch_nothing_and_copies_launch_one_kernel(a):
    assert work(lambda: a.reshape(6, 4)) == (0, 0)
    assert work(lambda: a.transpose(2, 0, 1)) == (0, 0)
    assert work(lambda: a[:, 1:]) == (0, 0)
    assert work(lambda: cp.ascontiguousarray(a)) == (0, 0)  # already contiguous
    assert work(lambda: a.astype(cp.float32, copy=False)) == (0, 0)
    t = a.transpose(2, 0, 1)
    assert work(lambda: cp.ascontiguousarray(t)) == (1, 0)  # a strided copy kernel
    assert work(lambda: t.reshape(-1)) == (1, 0)  # cannot be a view
    assert work(lambda: a.astype(cp.float16)) == (1, 0)
    assert work(lambda: a[cp.asarray(np.array([1, 0]))]) == (1, 1)  # host indices in, a gather


def test_elementwise_reductions_gemms_and_kernels_launch_one_each(a):
    assert work(lambda: a + 1) == (1, 0)
    assert work(lambda: cp.maximum(a, 0, out=a)) == (1, 0)
    assert work(lambda: a.sum(axis=0)) == (1, 0)
    assert work(lambda: cp.matmul(a, a.transpose(0, 2, 1))) == (1, 0)

    def setitem():
        a[0] = 0

    assert work(setitem) == (1, 0)


def test_allocation_memset_and_host_copies(a):
    assert work(lambda: cp.empty((3, 4), cp.float32)) == (0, 0)
    assert work(lambda: cp.zeros((3, 4), cp.float32)) == (0, 1)
    assert work(lambda: cp.ones((3, 4), cp.float32)) == (1, 0)  # a fill kernel
    assert work(lambda: cp.asarray(np.ones(3))) == (0, 1)  # host to device
    assert work(lambda: cp.asarray(a)) == (0, 0)  # already on the device
    assert work(lambda: a.get()) == (0, 1)  # device to host
    assert work(lambda: a.copy()) == (0, 1)  # contiguous: a device-to-device memcpy
    assert work(lambda: cp.result_type(a, cp.float64)) == (0, 0)


def test_tally_names_the_calls_that_launch_most(a):
    with strict_cupy.record_calls() as calls:
        for _ in range(3):
            a + 1
        a.sum()
        a.reshape(-1)
    t = tally(calls)
    assert (t.kernels, t.memops) == (4, 0)
    assert t.by_name.most_common(1) == [("cupy.add", 3)]
    assert t.table().splitlines()[0].split() == ["3", "cupy.add"]
