"""The device questions PyTorch programs ask: tf.cuda.*, tf.accelerator.*, tf.backends.* and
torch.cuda.amp's pair, answered through tinyflow/device.py (no GPU here: they say so)."""
from __future__ import annotations

import warnings

import pytest

import tinyflow as tf
import tinyflow_cuda

needs_no_gpu = pytest.mark.skipif(tinyflow_cuda.is_available(), reason="checks the answers without CUDA")


def test_cuda_answers_match_the_backend():
    assert tf.cuda.is_available() is tinyflow_cuda.is_available()
    assert tf.cuda.device_count() == tinyflow_cuda.device_count()
    assert tf.accelerator.is_available() is tf.cuda.is_available()
    assert tf.accelerator.device_count() == tf.cuda.device_count()


@needs_no_gpu
def test_the_usual_device_choice_picks_the_cpu_and_cuda_calls_that_need_a_gpu_say_why():
    device = tf.device("cuda" if tf.cuda.is_available() else "cpu")
    assert device == tf.device("cpu") and tf.tensor([1.0]).to(device).device == device
    assert tf.accelerator.current_accelerator() is None
    assert tf.cuda.memory_allocated() == 0 and tf.cuda.max_memory_allocated() == 0
    tf.cuda.empty_cache()
    tf.cuda.manual_seed(0)
    tf.cuda.manual_seed_all(0)
    assert tf.cuda.is_bf16_supported() is False
    for call in (tf.cuda.current_device, tf.cuda.get_device_name, tf.cuda.synchronize):
        with pytest.raises(RuntimeError, match="CUDA is not available"):
            call()


def test_backends_flags_are_settable_and_importable_as_modules():
    import tinyflow.backends.cudnn as cudnn

    tf.backends.cudnn.benchmark = True
    tf.backends.cudnn.deterministic = True
    assert cudnn.benchmark is True and cudnn.is_available() is False
    tf.backends.cuda.matmul.allow_tf32 = True
    assert tf.backends.mps.is_available() is False and tf.backends.mps.is_built() is False
    assert tf.backends.cuda.is_built() is tf.cuda.is_available()
    cudnn.benchmark = cudnn.deterministic = False


@needs_no_gpu
def test_cuda_amp_turns_itself_off_without_cuda_as_torch_does():
    from tinyflow.cuda.amp import GradScaler, autocast

    with pytest.warns(UserWarning, match="CUDA is not available"):
        scaler = GradScaler()
    assert scaler.enabled is False
    loss = tf.tensor(2.0, requires_grad=True)
    assert scaler.scale(loss) is loss
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with autocast():
            y = tf.ones(2, 2) @ tf.ones(2, 2)
    assert y.dtype == tf.float32
    assert tf.cuda.amp.GradScaler is GradScaler


def test_device_takes_torch_device_forms():
    assert tf.device(type="cuda", index=1) == tf.device("cuda:1") == tf.device("cuda", 1)
    assert tf.device(0) == tf.device("cuda:0") and tf.device() == tf.device("cpu")
    assert tf.device(tf.device("cpu")).type == "cpu"
