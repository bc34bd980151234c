"""`tinyflow train` / `tinyflow eval` / `tinyflow data` end to end on small synthetic data."""
from __future__ import annotations

import json
import os
import signal
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import tinyflow.nn as nn
from tinyflow import cli
from tinyflow.data import PackedDataset, synthetic
from tinyflow.recipes import vision
from tinyflow.recipes.loop import Hooks

EASY = ("circle", "stripes")  # two synthetic classes that a tiny CNN tells apart in a few epochs


@dataclass
class TinyConfig:
    num_classes: int = 10
    image_size: int = 32
    in_channels: int = 3


class TinyNet(nn.Module):
    """A three-conv CNN with batch norm: seconds per epoch on a few hundred 32x32 images."""

    def __init__(self, config: TinyConfig) -> None:
        super().__init__()
        self.config = config
        c = config.in_channels
        self.net = nn.Sequential(
            nn.Conv2d(c, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, config.num_classes))

    def forward(self, x):  # noqa: ANN001, ANN201
        return self.net(x)


@pytest.fixture
def tiny_model(monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201
    """Register TinyNet as model 'tiny' for the recipe (the real registry lives in models/)."""
    settings = {"in_channels": 3}

    def build(name: str, num_classes: int) -> nn.Module:
        assert name == "tiny"
        return TinyNet(TinyConfig(num_classes=num_classes, in_channels=settings["in_channels"]))

    monkeypatch.setattr(vision, "build_model", build)
    monkeypatch.setattr(vision, "available_models", lambda: ["tiny"])
    return settings


@pytest.fixture(scope="module")
def easy_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synthetic.generate(tmp_path_factory.mktemp("easy"), train_per_class=100, val_per_class=40,
                              size=32, classes=EASY)


def _train(data: Path, ckpt: Path, *extra: str) -> int:
    return cli.main(["train", "tiny", "--data", str(data), "--image-size", "32", "--checkpoint-dir", str(ckpt),
                     "--workers", "0", "--quiet", *extra])


def _metrics(ckpt: Path) -> list[dict]:
    return [json.loads(line) for line in (ckpt / "metrics.jsonl").read_text().splitlines()]


def test_train_tiny_model_beats_chance_then_eval_agrees(tiny_model, easy_data: Path, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture) -> None:
    ckpt = tmp_path / "run"
    rc = _train(easy_data, ckpt, "--epochs", "5", "--batch-size", "16", "--optimizer", "adam", "--lr", "0.01",
                "--crop-scale", "1.0")
    assert rc == 0
    history = _metrics(ckpt)
    assert len(history) == 5
    assert history[-1]["val_top1"] >= 0.75, history[-1]  # chance is 0.5 (80 images: 0.75 is 4.5 sigma above)
    assert history[-1]["train_loss"] < history[0]["train_loss"]
    assert {"best.ckpt", "last.ckpt", "metrics.jsonl", "metrics.png"} <= {p.name for p in ckpt.iterdir()}
    capsys.readouterr()
    rc = cli.main(["eval", "tiny", "--checkpoint", str(ckpt / "last.ckpt"), "--data", str(easy_data)])
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert rc == 0 and out["images"] == 80
    assert out["eval_top1"] == pytest.approx(history[-1]["val_top1"])
    assert out["eval_loss"] == pytest.approx(history[-1]["val_loss"], rel=1e-5)


def test_cli_ctrl_c_then_resume_continues_to_the_uninterrupted_result(tiny_model, easy_data: Path, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    args = ("--epochs", "2", "--batch-size", "32", "--seed", "4")
    assert _train(easy_data, tmp_path / "a", *args) == 0

    real_fit = vision.fit

    def fit_with_ctrl_c(*a, **k):  # noqa: ANN002, ANN003, ANN202
        def press(epoch: int, step: int, loss: float) -> None:
            if (epoch, step) == (1, 2):
                os.kill(os.getpid(), signal.SIGINT)

        return real_fit(*a, **{**k, "hooks": Hooks(on_step=press)})

    monkeypatch.setattr(vision, "fit", fit_with_ctrl_c)
    assert _train(easy_data, tmp_path / "b", *args) == 130  # stopped by Ctrl-C, checkpoint saved
    monkeypatch.setattr(vision, "fit", real_fit)
    assert _train(easy_data, tmp_path / "b", *args, "--resume") == 0

    def strip(records: list[dict]) -> list[dict]:
        return [{k: v for k, v in r.items() if k not in ("time_s", "images_per_s")} for r in records]

    assert strip(_metrics(tmp_path / "a")) == strip(_metrics(tmp_path / "b"))
    from tinyflow.recipes.checkpoint import load_checkpoint

    a, b = load_checkpoint(tmp_path / "a" / "last.ckpt"), load_checkpoint(tmp_path / "b" / "last.ckpt")
    for k in a["model"]:
        np.testing.assert_array_equal(np.asarray(a["model"][k]), np.asarray(b["model"][k]), err_msg=k)


def test_empty_data_folder_is_a_clear_error(tiny_model, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "empty").mkdir()
    assert _train(tmp_path / "empty", tmp_path / "run", "--epochs", "1") == 2
    err = capsys.readouterr().err
    assert "no class folders" in err and str(tmp_path / "empty") in err


def test_wrong_image_size_and_channels_are_clear_errors(tiny_model, easy_data: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture) -> None:
    assert cli.main(["train", "tiny", "--data", str(easy_data), "--image-size", "24", "--checkpoint-dir",
                     str(tmp_path / "r"), "--workers", "0", "--quiet", "--epochs", "1"]) == 2
    err = capsys.readouterr().err
    assert "expects 32x32 images" in err and "24x24" in err and str(easy_data) in err and "--image-size 32" in err
    tiny_model["in_channels"] = 1
    assert _train(easy_data, tmp_path / "r2", "--epochs", "1") == 2
    err = capsys.readouterr().err
    assert "expects 1-channel images" in err and "gives 3 channels" in err and str(easy_data) in err


def test_eval_refuses_a_checkpoint_of_another_model(tiny_model, easy_data: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture) -> None:
    assert _train(easy_data, tmp_path / "run", "--epochs", "1", "--batch-size", "64") == 0
    capsys.readouterr()
    rc = cli.main(["eval", "alexnet", "--checkpoint", str(tmp_path / "run" / "last.ckpt"), "--data", str(easy_data)])
    err = capsys.readouterr().err
    assert rc == 2 and "written for model 'tiny', not 'alexnet'" in err


def test_out_of_memory_names_the_batch_size(tiny_model, easy_data: Path, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    def hungry(self, x):  # noqa: ANN001, ANN202
        if x.shape[0] > 8:
            raise MemoryError("Unable to allocate 12.0 GiB")
        return self.net(x)

    monkeypatch.setattr(TinyNet, "forward", hungry)
    assert _train(easy_data, tmp_path / "run", "--epochs", "1", "--batch-size", "48") == 1
    err = capsys.readouterr().err
    assert "batch size 48" in err and "--batch-size" in err


def test_the_model_zoo_is_tinyflow_models_not_a_top_level_package() -> None:
    import importlib.metadata

    from tinyflow import models

    assert vision.available_models() == sorted(models.MODELS) and "alexnet" in models.MODELS
    assert type(models.get_model("fcn-r")).__module__ == "tinyflow.models.fcn"
    assert vision.default_image_size("alexnet") == 64 and vision.default_image_size("alexnet-224") == 224
    top_level = importlib.metadata.distribution("tinyflow").read_text("top_level.txt") or ""
    assert "models" not in top_level.split()  # `pip install tinyflow` leaves a user's own `models` alone


def test_data_layouts_class_root_and_packed(easy_data: Path, tmp_path: Path) -> None:
    flat = vision.build_data(str(easy_data / "train"), 32, seed=0)  # DIR/<class>/...: split 90/10
    assert flat.classes == sorted(EASY) and len(flat.train) == 180 and len(flat.val) == 20
    x, y = flat.train[0]
    assert x.shape == (3, 32, 32) and x.dtype == np.float32
    assert cli.main(["data", "pack", str(easy_data), str(tmp_path / "packed"), "--size", "32", "--workers", "0"]) == 0
    packed_train = PackedDataset(tmp_path / "packed" / "train")
    assert len(packed_train) == 200 and packed_train.classes == sorted(EASY)
    packed = vision.build_data(str(tmp_path / "packed"), 32, seed=0)
    split = vision.build_data(str(easy_data), 32, seed=0)
    assert packed.classes == split.classes and len(packed.train) == len(split.train) == 200
    xp, yp = packed.val[7]
    xs, ys = split.val[7]
    assert yp == ys and np.abs(xp - xs).max() < 1e-5  # the packed pixels are the decoded ones


def test_train_and_val_with_different_classes_is_an_error(tmp_path: Path) -> None:
    for split, names in (("train", ("a", "b")), ("val", ("a", "c"))):
        for n in names:
            (tmp_path / split / n).mkdir(parents=True)
            Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(tmp_path / split / n / "x.png")
    with pytest.raises(ValueError, match="same class folders"):
        vision.build_data(str(tmp_path), 8)


@pytest.mark.slow
def test_train_alexnet_on_the_default_data_beats_chance(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's main job: `tinyflow train alexnet` (synthetic data, CPU, default settings)."""
    monkeypatch.setenv("TINYFLOW_HOME", str(tmp_path / "home"))  # generate the data set afresh, not in ~/.cache
    ckpt = tmp_path / "alexnet"
    assert cli.main(["train", "alexnet", "--checkpoint-dir", str(ckpt), "--quiet"]) == 0
    last = _metrics(ckpt)[-1]
    assert last["val_top1"] >= 0.25, last  # ten classes: chance is 0.1 (a 3-epoch run measured 0.37)


def test_train_reports_and_skips_a_corrupt_image(tiny_model, easy_data: Path, tmp_path: Path) -> None:
    import shutil

    data = tmp_path / "data"
    shutil.copytree(easy_data, data)
    bad = data / "train" / "circle" / "circle_0000.jpg"  # the very first training image
    bad.write_bytes(bad.read_bytes()[:40])  # truncated JPEG
    ckpt = tmp_path / "run"
    with pytest.warns(UserWarning, match="circle_0000.jpg"):
        assert _train(data, ckpt, "--epochs", "1", "--batch-size", "64") == 0
    assert (ckpt / "skipped.txt").read_text().split("\t")[0] == str(bad)
    assert len(_metrics(ckpt)) == 1  # the epoch went on
