"""tinyflow.utils.tensorboard.SummaryWriter: TensorBoard event files read back record by record."""
from __future__ import annotations

import io
import os

import numpy as np
import pytest

import tinyflow as tf
from tinyflow.utils.tensorboard import SummaryWriter, crc32c, read_events


def _only_file(log_dir) -> str:
    (name,) = [n for n in os.listdir(log_dir) if n.startswith("events.out.tfevents.")]
    return os.path.join(log_dir, name)


def test_crc32c_matches_the_standard_check_value():
    assert crc32c(b"123456789") == 0xE3069283
    assert crc32c(b"") == 0


def test_scalars_are_written_on_flush_and_read_back(tmp_path):
    writer = SummaryWriter(tmp_path / "run", max_queue=100)
    for step in range(5):
        writer.add_scalar("loss/train", tf.tensor(1.0 / (step + 1)), step)
    path = _only_file(tmp_path / "run")
    assert [e.get("file_version") for e in read_events(path)] == ["brain.Event:2"]  # queued, not yet written
    writer.flush()
    events = read_events(path)[1:]
    assert [e["step"] for e in events] == list(range(5))
    np.testing.assert_allclose([e["values"]["loss/train"] for e in events], [1.0 / (s + 1) for s in range(5)],
                               rtol=1e-7)
    assert all(e["wall_time"] > 1.6e9 for e in events)
    writer.close()


def test_add_scalars_histogram_image_text(tmp_path):
    with SummaryWriter(tmp_path) as writer:
        writer.add_scalars("acc", {"train": 0.5, "val": 0.25}, global_step=3)
        values = np.random.default_rng(0).normal(size=1000)
        writer.add_histogram("weights", tf.tensor(values), 7, bins=10)
        image = np.random.default_rng(1).uniform(size=(3, 4, 5))  # CHW floats in [0, 1]
        writer.add_image("sample", tf.tensor(image), 2)
        writer.add_text("note", "**hello**", 1)
    events = {tag: (e["step"], v) for e in read_events(_only_file(tmp_path)) for tag, v in e.get("values", {}).items()}
    step, histo = events["weights"]
    assert step == 7 and histo["num"] == 1000 and sum(histo["bucket"]) == 1000 and len(histo["bucket_limit"]) == 10
    assert histo["min"] == values.min() and histo["max"] == values.max()
    assert histo["sum_squares"] == pytest.approx(float(values @ values))
    from PIL import Image

    step, img = events["sample"]
    decoded = np.asarray(Image.open(io.BytesIO(img["png"])))
    assert (img["height"], img["width"], img["colorspace"]) == (4, 5, 3) and decoded.shape == (4, 5, 3)
    np.testing.assert_array_equal(decoded, (np.transpose(image, (1, 2, 0)) * 255 + 0.5).astype(np.uint8))
    assert events["note/text_summary"] == (1, {"text": "**hello**"})
    for tag, value in (("train", 0.5), ("val", 0.25)):  # each curve of add_scalars in its own run
        (event,) = [e for e in read_events(_only_file(tmp_path / f"acc_{tag}")) if "values" in e]
        assert event["step"] == 3 and event["values"] == {"acc": value}


def test_add_images_and_figure(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with SummaryWriter(tmp_path) as writer:
        writer.add_images("batch", np.zeros((10, 1, 6, 6), np.uint8))
        fig = plt.figure(figsize=(2, 1), dpi=50)
        plt.plot([0, 1], [1, 0])
        writer.add_figure("curve", fig)
    values = {k: v for e in read_events(_only_file(tmp_path)) for k, v in e.get("values", {}).items()}
    assert (values["batch"]["height"], values["batch"]["width"]) == (2 * 8 + 2, 8 * 8 + 2)  # 8 a row, padding 2
    assert (values["curve"]["height"], values["curve"]["width"]) == (50, 100)


def test_errors_are_one_clear_line(tmp_path):
    writer = SummaryWriter(tmp_path)
    with pytest.raises(ValueError, match="add_scalar: scalar_value must hold one number, got shape \\(2,\\)"):
        writer.add_scalar("x", [1.0, 2.0])
    with pytest.raises(ValueError, match="does not match dataformats 'CHW'"):
        writer.add_image("x", np.zeros((4, 4)))
    with pytest.raises(ValueError, match="hold NaN or inf"):
        writer.add_histogram("x", [1.0, float("nan")])
    with pytest.raises(NotImplementedError, match="add_graph: not supported"):
        writer.add_graph(tf.nn.Linear(2, 2))
    writer.close()
    with pytest.raises(RuntimeError, match="is closed; make a new one"):
        writer.add_scalar("x", 1.0)
    path = _only_file(tmp_path)
    with open(path, "r+b") as f:  # flip one byte of the first record's payload
        f.seek(14)
        byte = f.read(1)
        f.seek(14)
        f.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(ValueError, match="corrupt record at byte 0"):
        read_events(path)


def test_default_log_dir_is_runs_date_host_comment(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    writer = SummaryWriter(comment="_lr0.1")
    assert writer.get_logdir().startswith("runs" + os.sep) and writer.log_dir.endswith("_lr0.1")
    assert os.path.isdir(writer.log_dir)
    writer.close()


def test_tensorboard_reads_our_files(tmp_path):
    loader = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    with SummaryWriter(tmp_path) as writer:
        for step in range(3):
            writer.add_scalar("loss", 2.0 - step, step)
        writer.add_histogram("w", np.arange(10.0), 5, bins=5)
        writer.add_image("img", np.ones((1, 2, 3)), 6)
        writer.add_text("note", "hi", 7)
    acc = loader.EventAccumulator(str(tmp_path), size_guidance={"tensors": 0})
    acc.Reload()
    assert [(s.step, s.value) for s in acc.Scalars("loss")] == [(0, 2.0), (1, 1.0), (2, 0.0)]
    (histo,) = acc.Histograms("w")
    assert histo.step == 5 and histo.histogram_value.num == 10 and list(histo.histogram_value.bucket) == [2.0] * 5
    (image,) = acc.Images("img")
    assert (image.step, image.height, image.width) == (6, 2, 3)
    (text,) = acc.Tensors("note/text_summary")
    assert text.step == 7 and text.tensor_proto.string_val == [b"hi"]
