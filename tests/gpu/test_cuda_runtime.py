"""The CUDA backend's runtime on a GPU: moves between devices, memory statistics, the
out-of-memory error, kernel compilation, and mixed precision with CuPy arrays (gpu tests; those
marked cupy_strict also run on the strict CuPy stand-in where no GPU is)."""
from __future__ import annotations

import numpy as np
import pytest

import tinyflow as tf
import tinyflow.nn.functional as F
import tinyflow_cuda
from tinyflow import amp

pytestmark = pytest.mark.gpu


def test_backend_reports_a_device():
    assert tinyflow_cuda.is_available() and tinyflow_cuda.unavailable_reason() is None
    assert tinyflow_cuda.device_count() >= 1
    with pytest.raises(RuntimeError, match="does not exist"):
        _ = tf.Device(f"cuda:{tinyflow_cuda.device_count()}").xp


@pytest.mark.cupy_strict
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.float16])
def test_tensor_round_trip_keeps_values_dtype_and_grad_flow(dtype):
    a = (np.arange(12).reshape(3, 4) * 0.5).astype(dtype)
    t = tf.tensor(a)
    g = t.to("cuda:0")
    assert g.device == tf.Device("cuda:0") and g.dtype == a.dtype
    assert isinstance(g.array, tf.Device("cuda:0").xp.ndarray) and not isinstance(g.array, np.ndarray)
    back = g.to("cpu")
    np.testing.assert_array_equal(back.numpy(), a)
    if a.dtype.kind == "f":
        leaf = tf.tensor(a.astype(np.float64), requires_grad=True)
        (leaf.to("cuda:0") * 3.0).sum().backward()  # the gradient travels back to the cpu leaf
        np.testing.assert_array_equal(leaf.grad.numpy(), np.full(a.shape, 3.0))


def test_memory_statistics_track_allocation_peak_and_reset():
    tinyflow_cuda.synchronize()
    tinyflow_cuda.reset_peak_memory_stats()
    base = tinyflow_cuda.memory_allocated()
    big = tf.zeros((16, 1024, 1024), device="cuda:0")  # 64 MiB of float32
    during = tinyflow_cuda.memory_allocated()
    assert during - base >= 64 * 2**20
    del big
    after = tinyflow_cuda.memory_allocated()
    assert after <= during - 64 * 2**20
    assert tinyflow_cuda.max_memory_allocated() >= during  # the peak survives the free
    tinyflow_cuda.reset_peak_memory_stats()
    assert tinyflow_cuda.max_memory_allocated() == tinyflow_cuda.memory_allocated()
    assert tinyflow_cuda.memory_reserved() >= tinyflow_cuda.memory_allocated()


def test_out_of_memory_names_the_op_shape_and_batch_size():
    cp = tinyflow_cuda.array_module(0)
    shape = (1 << 22, 1 << 22)  # 64 TiB of float32
    with pytest.raises(tinyflow_cuda.OutOfMemoryError) as info:
        with tinyflow_cuda.catch_oom("conv2d", shape):
            cp.empty(shape, dtype=cp.float32)
    text = str(info.value)
    assert "conv2d" in text and str(shape) in text and "--batch-size" in text
    assert isinstance(info.value, MemoryError)


def test_kernel_wrappers_turn_oom_into_the_named_error():
    import tinyflow_cuda.kernels as cuk

    cp = tinyflow_cuda.array_module(0)
    gout = cp.zeros((1, 1, 1, 1), dtype=cp.float32)
    argmax = cp.zeros((1, 1, 1, 1), dtype=cp.int32)
    huge = (1 << 20, 1 << 20, 1, 1)  # a 4 TiB input gradient
    with pytest.raises(tinyflow_cuda.OutOfMemoryError, match="max_pool2d backward") as info:
        cuk.maxpool2d_backward(gout, argmax, huge, (1, 1), (1, 1))
    assert str(huge) in str(info.value)


def test_every_cu_file_compiles_with_nvrtc_once_per_device():
    from tinyflow_cuda import runtime

    rt = runtime.current()
    for name in rt.kernels:
        rt._function(name)  # compiles its module on first use
    files = {info.source for info in rt.kernels.values()}
    device = tinyflow_cuda.array_module(0).cuda.runtime.getDevice()
    assert {path for path, dev in rt._modules if dev == device} == files


@pytest.mark.cupy_strict
def test_autocast_bf16_runs_gemms_in_bf16_with_float32_master_gradients():
    x = tf.randn(8, 16, device="cuda:0")
    w = tf.randn(4, 16, device="cuda:0", requires_grad=True)
    with amp.autocast("bf16"):
        y = F.linear(x, w)
    assert y.dtype == amp.bfloat16(), "F.linear must call tinyflow.amp.autocast_inputs"
    y.to(tf.float32).sum().backward()
    assert w.grad.dtype == np.float32
    np.testing.assert_allclose(w.grad.numpy(), np.tile(x.numpy().sum(0), (4, 1)), rtol=2e-2,
                               atol=2e-2)


@pytest.mark.cupy_strict
def test_fp16_autocast_with_grad_scaler_trains_like_fp32():
    """A small classifier trained 30 steps in fp16 + GradScaler ends near the fp32 run."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((256, 20)).astype(np.float32)
    y = (x[:, :5].sum(1) > 0).astype(np.int64)

    def train(use_amp: bool) -> float:
        tf.manual_seed(0)
        net = tf.nn.Sequential(tf.nn.Linear(20, 64), tf.nn.ReLU(), tf.nn.Linear(64, 2)).to("cuda:0")
        opt = tf.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
        scaler = amp.GradScaler(enabled=use_amp)
        xt, yt = tf.tensor(x, device="cuda:0"), tf.tensor(y, device="cuda:0")
        for _ in range(30):
            opt.zero_grad()
            with amp.autocast("fp16", enabled=use_amp):
                loss = F.cross_entropy(net(xt).to(tf.float32), yt)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        assert all(p.dtype == np.float32 for p in net.parameters())  # master weights
        return loss.item()

    fp32, fp16 = train(False), train(True)
    assert fp16 < 0.5 and abs(fp16 - fp32) < 0.05


# ---- cooperative launches: refused past the resident blocks, per call (issue 33) ----------------
def _cooperative_kernel(rt) -> str:
    """A TF_COOPERATIVE kernel (the recurrence's sequence kernels) and arguments that convert."""
    names = sorted(name for name, info in rt.kernels.items() if info.cooperative)
    assert names, "no TF_COOPERATIVE kernel in csrc/: nothing here launches cooperatively"
    return names[0]


def _dummy_args(rt, name: str) -> list:
    return [None if p.ctype == "pointer" else 0 for p in rt.kernels[name].params]


@pytest.mark.cupy_strict
def test_a_cooperative_grid_past_the_resident_blocks_is_refused_not_shrunk(monkeypatch):
    """CuPy shrinks a 1-D cooperative grid that cannot be resident (with a warning) and a
    persistent kernel would skip the missing blocks' work: the runtime refuses such a launch with
    one line, from the kernel's occupancy (threads and shared memory a block), and launches the
    largest resident grid untouched, without a warning."""
    import warnings

    from tinyflow_cuda import runtime

    rt = runtime.current()
    name = _cooperative_kernel(rt)
    grids = []
    emu = rt.xp.RawModule(code=rt.kernels[name].source.read_text()).emulator
    monkeypatch.setattr(emu, "launch", lambda kernel, grid, block, args, shared_mem=0: grids.append(grid))
    sms = rt.xp.cuda.runtime.getDeviceProperties(0)["multiProcessorCount"]
    assert rt.max_resident(name, 256) == 8 * sms  # 2,048 threads an SM hold 8 blocks of 256
    assert rt.max_resident(name, 256, 100 * 1024) == 2 * sms  # 228 KB an SM: 2 blocks of 100 KB
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        rt.launch(name, 8 * sms, 256, _dummy_args(rt, name))
        rt.launch(name, 2 * sms, 256, _dummy_args(rt, name), shared_mem=100 * 1024)
        for blocks, shared in ((8 * sms + 1, 0), (2 * sms + 1, 100 * 1024)):
            with pytest.raises(runtime.CooperativeLaunchError,
                               match=rf"kernel {name}: a cooperative launch of {blocks} blocks of 256 threads"):
                rt.launch(name, blocks, 256, _dummy_args(rt, name), shared_mem=shared)
    assert grids == [(8 * sms, 1, 1), (2 * sms, 1, 1)]  # nothing shrunk, nothing refused ran
    assert [str(w.message) for w in seen] == []


@pytest.mark.cupy_strict
def test_cooperative_launches_on_thread_ranks_leave_the_warnings_filters_alone(monkeypatch):
    """Ranks as threads: two ranks inside cooperative launches at once (the first returns while
    the second is inside) and a third rank warning meanwhile. The warning stays a warning, and the
    process's filters are as they were (a warnings filter set to "error" around each launch, as
    before, turned the third rank's warning into an exception and, restored out of order, left
    every later warning of the process an error)."""
    import threading
    import warnings

    from tinyflow_cuda import runtime

    rt = runtime.current()
    name = _cooperative_kernel(rt)
    emu = rt.xp.RawModule(code=rt.kernels[name].source.read_text()).emulator
    first_in, second_in, first_out, warned = (threading.Event() for _ in range(4))

    def launch(kernel, grid, block, args, shared_mem=0):  # the ranks' kernels, held inside the launch
        if threading.current_thread().name == "rank0":
            first_in.set()
            assert second_in.wait(10) and warned.wait(10)
        else:
            second_in.set()
            assert first_out.wait(10)

    monkeypatch.setattr(emu, "launch", launch)
    errors = []

    def rank(role: str) -> None:
        try:
            if role == "rank2":
                assert first_in.wait(10) and second_in.wait(10)
                warnings.warn("rank 2 warns while ranks 0 and 1 launch", UserWarning, stacklevel=1)
                warned.set()
                return
            if role == "rank1":
                assert first_in.wait(10)
            rt.launch(name, 1, 256, _dummy_args(rt, name))
            if role == "rank0":
                first_out.set()
        except BaseException as exc:  # noqa: BLE001 (reported below, with the rank)
            errors.append(f"{role}: {type(exc).__name__}: {exc}")
            first_out.set()
            warned.set()

    before = list(warnings.filters)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        inside = list(warnings.filters)
        threads = [threading.Thread(target=rank, args=(f"rank{i}",), name=f"rank{i}") for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert warnings.filters == inside
    assert errors == []
    assert [str(w.message) for w in seen] == ["rank 2 warns while ranks 0 and 1 launch"]
    assert warnings.filters == before
