"""tinyflow without a GPU: the CUDA backend imports, says it is unavailable and why, and every
request for a CUDA device fails with a clear error. Plus the nvcc compile check of every .cu
source where nvcc exists (no GPU needed)."""
from __future__ import annotations

import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

import tinyflow_cuda
from tinyflow.device import Device

needs_no_gpu = pytest.mark.skipif(tinyflow_cuda.is_available(),
                                  reason="checks the behaviour on a machine without CUDA")

CU_FILES = sorted((Path(tinyflow_cuda.__file__).parent / "csrc").glob("*.cu"))


@needs_no_gpu
def test_backend_imports_and_reports_why_it_is_unavailable():
    assert tinyflow_cuda.is_available() is False
    reason = tinyflow_cuda.unavailable_reason()
    assert isinstance(reason, str) and ("CuPy" in reason or "CUDA" in reason)
    assert tinyflow_cuda.device_count() == 0


@needs_no_gpu
@pytest.mark.parametrize("spec", ["cuda", "cuda:0", "cuda:1"])
def test_cuda_device_xp_raises_a_helpful_runtime_error(spec):
    with pytest.raises(RuntimeError) as info:
        _ = Device(spec).xp
    message = str(info.value)
    assert "CUDA is not available" in message
    assert tinyflow_cuda.unavailable_reason() in message
    assert "device='cpu'" in message  # says what to do instead


@needs_no_gpu
def test_every_cuda_entry_point_raises_the_same_error():
    for call in (tinyflow_cuda.synchronize, tinyflow_cuda.memory_allocated,
                 tinyflow_cuda.max_memory_allocated, tinyflow_cuda.reset_peak_memory_stats,
                 lambda: tinyflow_cuda.to_device(np.zeros(2), 0)):
        with pytest.raises(RuntimeError, match="CUDA is not available"):
            call()


@needs_no_gpu
def test_moving_a_tensor_to_cuda_fails_clearly():
    tf = pytest.importorskip("tinyflow")
    t = tf.tensor([1.0, 2.0])
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        t.to("cuda:0")


def test_numpy_arrays_are_not_mistaken_for_device_arrays():
    with pytest.raises(TypeError, match="NumPy or CuPy"):
        tinyflow_cuda.array_module_of([1, 2, 3])


def test_oom_error_names_op_shape_and_batch_size():
    err = tinyflow_cuda.oom_error("conv2d", (256, 96, 55, 55), MemoryError("out of memory"))
    assert isinstance(err, MemoryError)
    text = str(err)
    assert "conv2d" in text and "(256, 96, 55, 55)" in text and "--batch-size" in text
    assert err.op == "conv2d" and err.shape == (256, 96, 55, 55)


def test_catch_oom_leaves_other_errors_alone():
    with pytest.raises(ValueError, match="unrelated"):
        with tinyflow_cuda.catch_oom("linear", (2, 3)):
            raise ValueError("unrelated")
    # without CuPy even a host MemoryError is not relabelled as a CUDA one
    with pytest.raises(MemoryError) as info:
        with tinyflow_cuda.catch_oom("linear", (2, 3)):
            raise MemoryError("host")
    assert not isinstance(info.value, tinyflow_cuda.OutOfMemoryError) or tinyflow_cuda.is_available()


def test_kernel_signatures_parse_and_every_family_has_float_and_double():
    from tinyflow_cuda.runtime import discover

    kernels = discover()
    import tinyflow.kernels

    # one .cu file per kernel family, named as the family's module in tinyflow/kernels/
    assert {p.stem for p in CU_FILES} == {m.__name__.rsplit(".", 1)[1] for m in tinyflow.kernels.FAMILIES}
    families = {name.rsplit("_", 1)[0] for name in kernels}
    for family in families:
        assert f"{family}_f32" in kernels and f"{family}_f64" in kernels, family


def _nvcc(path: Path) -> tuple[Path, subprocess.CompletedProcess]:
    cmd = ["nvcc", "-std=c++17", "-arch=sm_90", "-c", str(path), "-o", "/dev/null"]
    return path, subprocess.run(cmd, capture_output=True, text=True)


@pytest.mark.slow  # 8 nvcc runs: ~15-30 s on two busy cores
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
def test_every_cu_file_compiles_with_nvcc():
    """The same command as cuda_tools/check_cu.sh (files compiled two at a time)."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(_nvcc, CU_FILES))
    failures = {p.name: r.stderr[-2000:] for p, r in results if r.returncode != 0}
    assert not failures, f"nvcc failed on: {failures}"


def test_cupy_runtime_types_arguments_from_the_kernel_signature():
    """CupyRuntime's plumbing with a stand-in for CuPy: one NVRTC module per file and device,
    arguments typed as the C signature says, None as a null pointer, a wrong count refused."""
    from tinyflow_cuda.runtime import CupyRuntime

    calls: list[tuple] = []
    compiled: list[tuple] = []

    class FakeModule:
        def __init__(self, code: str, options: tuple, enable_cooperative_groups: bool = False) -> None:
            compiled.append((code, options))

        def get_function(self, name: str):
            return lambda grid, block, args, **launch: calls.append((name, grid, block, args))

    class FakeCupy:
        RawModule = FakeModule
        ndarray = np.ndarray

        class cuda:  # noqa: N801
            class runtime:  # noqa: N801
                device = 0

                @staticmethod
                def getDevice() -> int:  # noqa: N802
                    return FakeCupy.cuda.runtime.device

    rt = CupyRuntime(FakeCupy)
    x = np.zeros(4, np.float32)
    rt.launch("lstm_cell_backward_f32", 2, 256, [x, None, 0, x, x, x, x, x, 3, 5])
    name, grid, block, args = calls[-1]
    assert (name, grid, block) == ("lstm_cell_backward_f32", (2, 1, 1), (256, 1, 1))
    assert args[1] == 0 and args[1].dtype == np.uint64  # null pointer
    assert args[2].dtype == np.int32 and args[8].dtype == np.int32
    rt.launch("dropout_mask_f32", 1, 256, [x, None, 7, 2**31, 2.0, 4])
    seed_ptr, seed, threshold, scale, n = calls[-1][3][1:]
    assert seed_ptr == 0 and seed_ptr.dtype == np.uint64  # no device seed: the scalar one
    assert (seed.dtype, threshold.dtype, scale.dtype, n.dtype) == (np.uint64, np.uint64, np.float64, np.int64)
    rt.launch("dropout_mask_bf16", (3, 2), (32, 8), [x, None, 7, 2**31, 2.0, 4])  # TF_FLOAT_TYPES' entries
    assert calls[-1][:3] == ("dropout_mask_bf16", (3, 2, 1), (32, 8, 1))
    rt.launch("gru_cell_forward_f32", 1, 256, [x, x, x, x, 1, 1])  # rnn.cu: already compiled
    assert len(compiled) == 2 and all(f"-I{rt.kernels['im2col_f32'].source.parent}" in o for _, o in compiled)
    FakeCupy.cuda.runtime.device = 1
    rt.launch("gru_cell_forward_f32", 1, 256, [x, x, x, x, 1, 1])  # another device: recompiled
    assert len(compiled) == 3
    with pytest.raises(TypeError, match="takes 3 arguments, got 2"):
        rt.launch("reduce_scale_f32", 1, 256, [x, 2.0])
