"""The strict CuPy stand-in refuses what CuPy refuses (cuda_tools/strict_cupy).

If it were lenient, the cupy_strict tests would pass code that fails on a GPU; each test here
checks one refusal against CuPy 14.2's behaviour (messages as CuPy words them)."""
from __future__ import annotations

import numpy as np
import pytest

import tinyflow as tf
from cuda_tools import strict_cupy
from cuda_tools.strict_cupy import CupyAPIError
from cuda_tools.strict_cupy import strict_cupy as cp
from tinyflow.device import HostSyncError, count_host_reads, forbid_host_reads
from tinyflow_cuda import runtime

pytestmark = pytest.mark.cupy_strict


def test_not_an_ndarray_and_no_implicit_conversion() -> None:
    a = cp.arange(6, dtype=cp.float32).reshape(2, 3)
    assert not isinstance(a, np.ndarray)
    for convert in (np.asarray, np.array, lambda x: np.ascontiguousarray(x)):
        with pytest.raises(TypeError, match="Implicit conversion to a NumPy array is not allowed"):
            convert(a)
    np.testing.assert_array_equal(a.get(), np.arange(6, dtype=np.float32).reshape(2, 3))


def test_numpy_functions_dispatch_only_where_cupy_has_them() -> None:
    a = cp.arange(4.0)
    total = np.sum(a)  # CuPy's __array_function__: cupy.sum
    assert isinstance(total, cp.ndarray) and total.shape == ()
    with pytest.raises(TypeError, match="no implementation found"):
        np.busday_count(a, a)  # CuPy has no busday_count: NumPy's dispatch gives up


def test_numpy_operands_are_refused_as_cupy_refuses_them() -> None:
    a, host = cp.ones(3), np.ones(3)
    for op in (lambda: cp.add(a, host), lambda: a + host, lambda: host * a, lambda: cp.concatenate([a, host]),
               lambda: cp.ascontiguousarray(host)):
        with pytest.raises(TypeError, match="Unsupported type <class 'numpy.ndarray'>"):
            op()
    assert (a + np.float32(2.0)).dtype == np.float64  # NumPy scalars are fine, as in CuPy
    b = cp.asarray(host)  # creation functions copy host data to the device
    host[0] = 7.0
    assert b[0].item() == 1.0


def test_only_cupys_functions_keywords_and_ufunc_methods() -> None:
    a = cp.zeros((2, 3))
    with pytest.raises(CupyAPIError, match="unexpected keyword argument 'sparse'"):
        cp.indices((2, 3), sparse=True)
    with pytest.raises(NotImplementedError, match="`cupy_multiply.at` is not supported yet"):
        cp.multiply.at(a, (0, 1), 2.0)
    with pytest.raises(NotImplementedError, match="`cupy_maximum.reduce` is not supported yet"):
        cp.maximum.reduce(a)
    with pytest.raises(CupyAPIError, match="unexpected keyword argument 'where'"):
        cp.add(a, 1.0, where=a > 0)
    with pytest.raises(CupyAPIError, match="unexpected keyword argument 'where'"):
        a.sum(where=a > 0)
    with pytest.raises(AttributeError):
        cp.busday_count  # noqa: B018
    with pytest.raises(AttributeError, match="not in CuPy's ndarray API"):
        a.resize  # noqa: B018  (NumPy's ndarray has it, CuPy's has not)
    cp.add.at(a, (np.array([0, 0]), np.array([1, 1])), 1.0)  # add.at exists; host indices are fine
    assert a[0, 1].item() == 2.0


def test_host_reads_are_counted_and_forbidden_inside_forbid_host_reads() -> None:
    a = cp.full((), 3.0)
    before = strict_cupy.host_reads()
    assert float(a) == 3.0 and int(a) == 3 and bool(a) and a.item() == 3.0 and a.tolist() == 3.0
    assert strict_cupy.host_reads() - before == 5
    with forbid_host_reads():
        b = a * 2  # device work is fine
        for read in (lambda: float(b), lambda: bool(b), b.item, b.get, lambda: cp.asnumpy(b)):
            with pytest.raises(HostSyncError):
                read()


def test_the_stand_in_is_tinyflows_cuda_device_and_its_reads_go_through_to_host() -> None:
    import tinyflow_cuda

    outside = tinyflow_cuda._cupy
    with strict_cupy.installed():
        x = tf.tensor(np.arange(6.0).reshape(2, 3), device="cuda:0", requires_grad=True)
        assert isinstance(x.array, cp.ndarray) and x.device == tf.Device("cuda:0")
        before = strict_cupy.host_reads()
        with count_host_reads() as seen:
            loss = (x * x).sum()
            loss.backward()
            value = loss.item()
        assert value == 55.0 and seen.reasons == ["item"]
        assert strict_cupy.host_reads() - before == 1  # no read behind tinyflow's back
        np.testing.assert_array_equal(x.grad.cpu().numpy(), 2 * np.arange(6.0).reshape(2, 3))
    assert tinyflow_cuda._cupy is outside  # what was there before comes back


def test_kernels_run_through_the_emulator_and_refuse_host_arrays() -> None:
    with strict_cupy.installed():
        from tinyflow_cuda import kernels

        x = cp.asarray(np.random.default_rng(0).standard_normal((1, 2, 5, 5)).astype(np.float32))
        with strict_cupy.record_calls() as names:
            cols = kernels.im2col(x, (3, 3))
        assert "kernel:im2col_f32" in names and isinstance(cols, cp.ndarray)
        conv_cu = (runtime.CSRC / "conv.cu").read_text()
        kernel = cp.RawModule(code=conv_cu).get_function("im2col_f32")
        with pytest.raises(RuntimeError, match="named symbol not found"):
            cp.RawModule(code=conv_cu).get_function("maxpool_forward_f32")  # pool.cu's
        arity = len(runtime.discover()["im2col_f32"].params)
        with pytest.raises(TypeError, match="is a NumPy array"):
            kernel((1,), (32,), (np.zeros(3),) + (np.int32(0),) * (arity - 1))
        # CuPy 14's RawKernel passes its module's cooperative flag itself: a second one is a TypeError
        # (the first GPU run of the rewritten runtime would have failed every launch on it)
        with pytest.raises(TypeError, match="multiple values for keyword argument 'enable_cooperative_groups'"):
            kernel((1,), (32,), (x,) * arity, enable_cooperative_groups=False)


def test_device_checks_left_unread_on_the_stand_in_do_not_reach_the_next_host_read():
    """A cupy_strict test may end with a device check pending (read at the next sync); once the
    stand-in is uninstalled, nothing can read it, and a later CPU host read must not try."""
    from tinyflow.device import _reads, device_check

    with strict_cupy.installed():
        device_check(cp.asarray(np.array(False)), cp.asarray(np.array(0)), ValueError, key=("probe",))
        assert _reads.pending
    assert not _reads.pending
    assert tf.tensor([1.0, 2.0]).numpy().tolist() == [1.0, 2.0]
