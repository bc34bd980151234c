"""The user's GPU path end to end on cuda:0: `tinyflow train` for a CNN and the LSTM LM,
checkpoints of device tensors, and bf16 autocast (gpu tests; where no GPU is, they run on the
strict CuPy stand-in, which refuses what CuPy refuses: the H100's first run found
`Module.to("cuda:0")` broken, and no CPU test could see it)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import tinyflow as tf
import tinyflow.nn.functional as F
from tinyflow import cli

pytestmark = [pytest.mark.gpu, pytest.mark.cupy_strict]

DEVICE = "cuda:0"


def _metrics(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]


def test_train_alexnet_on_cuda_then_resume(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tinyflow.data import synthetic

    monkeypatch.setenv("TINYFLOW_HOME", str(tmp_path / "home"))
    data = synthetic.generate(tmp_path / "data", train_per_class=3, val_per_class=1, size=64,
                              classes=("circle", "stripes"))
    run = tmp_path / "run"
    common = ["--data", str(data), "--batch-size", "3", "--device", DEVICE, "--checkpoint-dir", str(run),
              "--quiet", "--workers", "0"]
    assert cli.main(["train", "alexnet", "--epochs", "1", *common]) == 0
    first = _metrics(run)
    assert len(first) == 1 and np.isfinite(first[0]["train_loss"])
    # the checkpoint holds the device tensors' values; --resume puts them back on cuda:0
    assert cli.main(["train", "alexnet", "--epochs", "2", "--resume", *common]) == 0
    assert [m["epoch"] for m in _metrics(run)] == [1, 2]


def test_train_lstm_lm_on_cuda(tmp_path: Path) -> None:
    text = tmp_path / "corpus.txt"
    text.write_text("def add(a, b):\n    return a + b\n" * 6)  # a few steps: the emulated recurrence is slow
    run = tmp_path / "run"
    assert cli.main(["train", "lstm-lm", "--text", str(text), "--epochs", "1", "--batch-size", "4",
                     "--seq-len", "16", "--embedding-dim", "8", "--hidden-size", "16", "--device", DEVICE,
                     "--checkpoint-dir", str(run), "--quiet"]) == 0
    metrics = _metrics(run)
    assert len(metrics) == 1 and np.isfinite(metrics[0]["train_loss"])


def test_checkpoint_of_device_tensors_loads_back_on_the_device(tmp_path: Path) -> None:
    from tinyflow.models import get_model

    model = get_model("lstm-lm", vocab_size=20, embedding_dim=8, hidden_size=8).to(DEVICE)
    opt = tf.optim.Adam(model.parameters(), lr=1e-2)
    ids = tf.tensor(np.arange(24).reshape(6, 4) % 20, device=DEVICE)
    logits, _ = model(ids)
    F.cross_entropy(logits.reshape(-1, 20), ids.reshape(-1)).backward()
    opt.step()
    path = tmp_path / "ckpt.tf"
    tf.save({"model": model.state_dict(), "optim": opt.state_dict()}, path)
    back = tf.load(path)
    for name, value in model.state_dict().items():
        assert back["model"][name].device == tf.Device(DEVICE), name
        np.testing.assert_array_equal(back["model"][name].numpy(), value.numpy(), err_msg=name)
    on_cpu = tf.load(path, map_location="cpu")
    assert all(v.device == tf.Device("cpu") for v in on_cpu["model"].values())
    fresh = get_model("lstm-lm", vocab_size=20, embedding_dim=8, hidden_size=8).to(DEVICE)
    fresh.load_state_dict(back["model"])
    opt2 = tf.optim.Adam(fresh.parameters(), lr=1e-2)
    opt2.load_state_dict(back["optim"])
    for p, q in zip(model.parameters(), fresh.parameters()):
        np.testing.assert_array_equal(q.numpy(), p.numpy())


def test_bf16_autocast_training_step_on_cuda_matches_cpu() -> None:
    from tinyflow.models import get_model

    rng = np.random.default_rng(3)
    x, y = rng.standard_normal((2, 3, 64, 64)).astype(np.float32), rng.integers(0, 10, 2)
    tf.manual_seed(0)
    cpu_model = get_model("alexnet", num_classes=10, dropout=0.0)
    gpu_model = get_model("alexnet", num_classes=10, dropout=0.0)
    gpu_model.load_state_dict(cpu_model.state_dict())
    gpu_model.to(DEVICE)
    results = {}
    for device, model in (("cpu", cpu_model), (DEVICE, gpu_model)):
        with tf.autocast(tf.Device(device).type, dtype=tf.bfloat16):
            logits = model(tf.tensor(x, device=device))
            loss = F.cross_entropy(logits, tf.tensor(y, device=device))
        assert loss.dtype == np.float32  # the loss runs in float32 under autocast
        loss.backward()
        grads = {k: p.grad for k, p in model.named_parameters()}
        assert all(g.dtype == np.float32 and g.device == tf.Device(device) for g in grads.values())
        results[device] = (loss.item(), {k: g.numpy() for k, g in grads.items()})
    (cpu_loss, cpu_grads), (gpu_loss, gpu_grads) = results["cpu"], results[DEVICE]
    assert np.isfinite(gpu_loss) and abs(gpu_loss - cpu_loss) < 2e-2 * max(1.0, abs(cpu_loss))
    for k, g in cpu_grads.items():  # bf16 keeps 8 bits, summed in other orders: agree as vectors
        error = np.linalg.norm(gpu_grads[k] - g) / (np.linalg.norm(g) + 1e-12)
        assert error < 0.1, f"{k}: relative error {error:.3f}"
