"""Bad input and faults are one `error:` line naming the flag or file and what to do, never a
traceback, and lose nothing (issue 12): bad option values, a NaN or diverging loss, a full disk,
an impossible --checkpoint-dir, an empty class folder, binary --text, a failed loader worker;
stale temporaries are cleaned; best.ckpt is copied the way tf.save writes."""
from __future__ import annotations

import errno
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import tinyflow.nn as nn
from tinyflow import cli, serialization
from tinyflow.data import synthetic
from tinyflow.recipes import checkpoint as ckpts
from tinyflow.recipes import metrics, vision


@pytest.fixture
def tiny(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Model 'tiny' (an MLP over 8x8 images) and a small two-class data set."""
    monkeypatch.setattr(vision, "build_model", lambda name, num_classes: nn.Sequential(
        nn.Flatten(), nn.Linear(192, 16), nn.ReLU(), nn.Linear(16, num_classes)))
    monkeypatch.setattr(vision, "available_models", lambda: ["tiny"])
    return synthetic.generate(tmp_path_factory.mktemp("data"), train_per_class=12, val_per_class=4, size=8,
                              classes=("circle", "stripes"))


def _train(data: Path, run: Path, *extra: str) -> int:
    return cli.main(["train", "tiny", "--data", str(data), "--image-size", "8", "--checkpoint-dir", str(run),
                     "--workers", "0", "--quiet", "--batch-size", "4", "--epochs", "2", *extra])


def _error_line(err: str, command: str = "train") -> str:
    """The one error line of ``err`` (and no traceback, no Python warning)."""
    assert "Traceback" not in err and "Warning:" not in err, err
    lines = [line for line in err.splitlines() if "error" in line.lower()]
    assert len(lines) == 1, err
    assert lines[0].startswith(f"tinyflow {command}: error: "), err
    return lines[0]


# ----------------------------------------------------------------------------- option values


@pytest.mark.parametrize("argv, message", [
    (["train", "m", "--epochs", "0"], "argument --epochs: must be >= 1, got 0"),
    (["train", "m", "--epochs", "-3"], "argument --epochs: must be >= 1, got -3"),
    (["train", "m", "--nproc", "0"], "argument --nproc: must be >= 1, got 0"),
    (["train", "m", "--nproc", "-2"], "argument --nproc: must be >= 1, got -2"),
    (["train", "m", "--batch-size", "0"], "argument --batch-size: must be >= 1, got 0"),
    (["train", "m", "--seed", "-1"], "argument --seed: must be >= 0, got -1"),
    (["train", "m", "--device", "tpu"], "argument --device: unknown device 'tpu': expected 'cpu', 'cuda' or 'cuda:N'"),
    (["train", "m", "--device", "cuda:x"], "argument --device: unknown device 'cuda:x'"),
    (["eval", "m", "--checkpoint", "c", "--device", "tpu"], "argument --device: unknown device 'tpu'"),
    (["sample", "--checkpoint", "c", "--temperature", "nan"], "argument --temperature: must be a finite number >= 0, got nan"),
    (["sample", "--checkpoint", "c", "--temperature", "-1"], "argument --temperature: must be >= 0, got -1"),
    (["sample", "--checkpoint", "c", "--temperature", "inf"], "argument --temperature: must be a finite number >= 0"),
    (["data", "pack", "a", "b", "--size", "0"], "argument --size: must be >= 1, got 0"),
    # bench train once printed a negative images/s marked ok (exit 0), divided by zero, failed a cell
    # for no reason, or listed no "bad values"; now each is refused as train refuses its own.
    (["bench", "train", "alexnet", "--steps", "-1"], "argument --steps: must be >= 1, got -1"),
    (["bench", "train", "alexnet", "--steps", "0"], "argument --steps: must be >= 1, got 0"),
    (["bench", "train", "alexnet", "--runs", "0"], "argument --runs: must be >= 1, got 0"),
    (["bench", "train", "alexnet", "--batch-sizes", "16,x"], "argument --batch-sizes: 'x' in '16,x' is not a whole number"),
    (["bench", "train", "alexnet", "--nproc", ""], "argument --nproc: expected a comma list of whole numbers, got ''"),
    (["bench", "train", "alexnet", "--nproc", "1,1"], "argument --nproc: 1 appears twice in '1,1'"),
    (["bench", "train", "alexnet", "--device", ""], "argument --device: expected a device: 'cpu', 'cuda' or 'cuda:N'"),
    (["bench", "train", "alexnet", "--precision", "fp8"], "argument --precision: unknown 'fp8': choose a comma list "
                                                          "of fp32, bf16, fp16"),
    (["bench", "train", "alexnet", "--compare", "pytorch"], "argument --compare: unknown 'pytorch': choose torch"),
    (["bench", "scaling", "alexnet", "--workers", "0,2"], "argument --workers: every value must be >= 1, got 0"),
    (["bench", "scaling", "alexnet", "--algorithms", "ring,"], "argument --algorithms: 'ring,' has an empty item"),
    (["bench", "allreduce", "--sizes", "64M:4K"], "argument --sizes: bad size range '64M:4K': need 0 < min <= max"),
    (["bench", "allreduce", "--algorithms", "rng"], "argument --algorithms: unknown 'rng': choose a comma list of"),
    (["launch", "--nproc", "0", "x.py"], "argument --nproc: must be >= 1, got 0"),
])  # fmt: skip
def test_bad_option_values_are_refused_in_one_line(argv: list[str], message: str, capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert message in _error_line(err, " ".join(argv[:2]) if argv[0] in ("data", "bench") else argv[0])
    assert len(err.splitlines()) == 1  # the error alone: `tinyflow COMMAND --help` has the usage


def test_bench_settings_of_a_program_are_checked_too() -> None:
    from tinyflow.bench.train import BenchSettings

    good = {"model": "alexnet", "batch_sizes": [8], "workers": [1], "precisions": ["fp32"]}
    BenchSettings(**good)
    for bad, message in (({"steps": -1}, "--steps: must be >= 1, got -1"), ({"runs": 0}, "--runs: must be >= 1"),
                         ({"batch_sizes": []}, "--batch-sizes: expected a comma list"),
                         ({"precisions": ["fp8"]}, "--precision: unknown ['fp8']")):
        with pytest.raises(ValueError, match=re.escape(message)):
            BenchSettings(**{**good, **bad})


def test_a_cuda_device_without_cupy_is_refused_in_one_line(capsys) -> None:
    import tinyflow.cuda

    if tinyflow.cuda.is_available():
        pytest.skip("CUDA is available here")
    for argv in (["train", "m", "--device", "cuda:0"], ["sample", "--checkpoint", "c", "--device", "cuda"]):
        with pytest.raises(SystemExit):
            cli.main(argv)
        line = _error_line(capsys.readouterr().err, argv[0])
        assert "CUDA is not available here" in line and "use --device cpu" in line


def test_sampling_refuses_a_nan_temperature() -> None:
    from tinyflow.recipes.language_model import generate

    with pytest.raises(ValueError, match="--temperature must be >= 0.*got nan"):
        generate(None, None, "char", "x", 3, temperature=float("nan"))


def test_lstm_lm_refuses_nproc(capsys) -> None:
    assert cli.main(["train", "lstm-lm", "--nproc", "2"]) == 2
    assert "--nproc 2: lstm-lm trains in one process" in _error_line(capsys.readouterr().err)


# ----------------------------------------------------------------------------- losses


def test_a_nan_loss_is_one_line_and_writes_nothing(tiny: Path, tmp_path: Path, capsys) -> None:
    assert _train(tiny, tmp_path, "--optimizer", "sgd", "--lr", "1e30") == 1
    line = _error_line(capsys.readouterr().err)
    assert "the training loss became nan at epoch 1, batch 2: lower --lr" in line
    assert not (tmp_path / "last.ckpt").exists() and not (tmp_path / "best.ckpt").exists()


def test_a_diverging_loss_stops_the_run(tiny: Path, tmp_path: Path, capsys) -> None:
    assert _train(tiny, tmp_path, "--optimizer", "adam", "--lr", "1e9") == 1  # the loss stays finite (~1e19)
    line = _error_line(capsys.readouterr().err)
    assert "the training loss grew to" in line and "over 1000 times its first value" in line
    assert "the run diverged" in line and "lower --lr" in line
    assert not (tmp_path / "best.ckpt").exists()


# ----------------------------------------------------------------------------- files


def test_a_full_disk_is_one_line_and_keeps_the_last_checkpoint(tiny: Path, tmp_path: Path, monkeypatch,
                                                               capsys) -> None:
    real, saves = serialization._write_npz, []

    def fill_up_on_the_second_save(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        saves.append(1)
        if len(saves) == 2:  # last.ckpt of epoch 2
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(*args, **kwargs)

    monkeypatch.setattr(serialization, "_write_npz", fill_up_on_the_second_save)
    assert _train(tiny, tmp_path) == 1
    line = _error_line(capsys.readouterr().err)
    last = tmp_path / "last.ckpt"
    assert line == (f"tinyflow train: error: tf.save: no space left in {str(tmp_path)!r} (No space left on device) "
                    f"while writing {str(last)!r}; the previous {str(last)!r} is unchanged. Free some space or "
                    "save to another directory")
    assert ckpts.load_checkpoint(last)["epoch"] == 1
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".") or p.name.endswith(".tmp")]


def test_a_full_disk_while_writing_the_metrics_is_one_line(tiny: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    def no_space(records, path) -> None:  # noqa: ANN001
        Path(f"{path}.tmp.png").write_bytes(b"\x89PNG")  # half written
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(metrics, "plot_metrics", no_space)
    assert _train(tiny, tmp_path) == 1
    line = _error_line(capsys.readouterr().err)
    assert line == (f"tinyflow train: error: could not write {str(tmp_path / 'metrics.png')!r} (No space left on "
                    "device); free some space or pass another --checkpoint-dir")
    assert ckpts.load_checkpoint(tmp_path / "last.ckpt")["epoch"] == 1  # saved before the metrics
    assert not any(p.name.endswith(".tmp") or p.name.endswith(".tmp.png") for p in tmp_path.iterdir())


def test_an_impossible_checkpoint_dir_is_one_line(tiny: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    a_file = tmp_path / "f"
    a_file.write_text("not a directory")
    for run, why in ((a_file, f"{str(a_file)!r} is a file, not a folder"),
                     (a_file / "run", f"{str(a_file / 'run')!r} cannot be created: {str(a_file)!r} is a file")):
        with pytest.raises(SystemExit) as exit_:  # refused with the options, before any work
            _train(tiny, run)
        assert exit_.value.code == 2
        line = _error_line(capsys.readouterr().err)
        assert line == f"tinyflow train: error: argument --checkpoint-dir: {why}"
    # The default folder (runs/MODEL) is not an option value: the Checkpointer says it, as before.
    with pytest.raises(serialization.CheckpointWriteError, match=r"checkpoint directory .* cannot be created \('.*f' is a file\); pass another"):
        ckpts.Checkpointer(a_file / "run")

    def refuse(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        raise PermissionError(errno.EACCES, "Permission denied", str(self))

    monkeypatch.setattr(Path, "mkdir", refuse)
    assert _train(tiny, tmp_path / "locked") == 1
    assert (f"checkpoint directory {str(tmp_path / 'locked')!r} cannot be created (Permission denied); pass "
            "another --checkpoint-dir") in _error_line(capsys.readouterr().err)


def test_a_damaged_checkpoint_to_resume_from_is_one_line(tiny: Path, tmp_path: Path, capsys) -> None:
    assert _train(tiny, tmp_path, "--epochs", "1") == 0
    last = tmp_path / "last.ckpt"
    last.write_bytes(last.read_bytes()[: last.stat().st_size // 2])  # a copy cut short
    capsys.readouterr()
    assert _train(tiny, tmp_path, "--resume") == 2
    line = _error_line(capsys.readouterr().err)
    assert str(last) in line and "truncated" in line
    assert cli.main(["eval", "tiny", "--checkpoint", str(last), "--data", str(tiny)]) == 2
    assert str(last) in _error_line(capsys.readouterr().err, "eval")


def test_stale_temporaries_are_removed_at_start(tmp_path: Path, capsys) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = tmp_path / f".last.ckpt.{serialization._host_tag()}.{int(dead.stdout)}.0123456789ab.tmp"
    live = tmp_path / f".last.ckpt.{serialization._host_tag()}.{os.getppid()}.0123456789ab.tmp"
    stale.write_bytes(b"half a checkpoint")
    live.write_bytes(b"being written")
    ckpts.Checkpointer(tmp_path, writer=False)  # a rank that does not write leaves the directory alone
    assert stale.exists() and capsys.readouterr().err == ""
    ckpts.Checkpointer(tmp_path)
    assert not stale.exists() and live.exists()
    assert capsys.readouterr().err == (f"note: removed 1 temporary file(s) that an interrupted save left in "
                                       f"{str(tmp_path)!r} ({stale.name})\n")


def test_best_ckpt_is_copied_through_a_tagged_temporary(tmp_path: Path, monkeypatch) -> None:
    checkpoints = ckpts.Checkpointer(tmp_path)
    first = checkpoints.save({"epoch": 1})
    checkpoints.mark_best(first)
    links = []
    real_link = os.link
    monkeypatch.setattr(os, "link", lambda src, dst: (links.append(dst), real_link(src, dst)))
    second = checkpoints.save({"epoch": 2})
    checkpoints.mark_best(second)
    assert serialization._TEMPORARY.match(os.path.basename(links[0]))  # hidden, host and pid: cleaned if killed
    assert ckpts.load_checkpoint(tmp_path / "best.ckpt")["epoch"] == 2

    def no_link(src, dst):  # noqa: ANN001, ANN202
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    def copy_then_fill_up(src, dst):  # noqa: ANN001, ANN202
        Path(dst).write_bytes(b"PK\x03\x04 half")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "link", no_link)
    monkeypatch.setattr(shutil, "copyfile", copy_then_fill_up)
    third = checkpoints.save({"epoch": 3})
    with pytest.raises(serialization.CheckpointWriteError, match=r"could not write .*best\.ckpt.* \(No space left on "
                                                                 r"device\); the previous one is unchanged"):
        checkpoints.mark_best(third)
    assert ckpts.load_checkpoint(tmp_path / "best.ckpt")["epoch"] == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best.ckpt", "last.ckpt"]


# ----------------------------------------------------------------------------- data


def test_an_empty_class_folder_is_a_warning_line_or_with_strict_an_error(tiny: Path, tmp_path: Path,
                                                                         capsys) -> None:
    data = tmp_path / "data"
    shutil.copytree(tiny, data)
    (data / "train" / "zebra").mkdir()
    (data / "val" / "zebra").mkdir()
    (data / "val" / "zebra" / "notes.txt").write_text("no images here")
    assert _train(data, tmp_path / "run", "--epochs", "1") == 0
    err = capsys.readouterr().err
    warned = [line for line in err.splitlines() if line.startswith("tinyflow train: warning: ")]
    assert len(warned) == 2 and "Warning:" not in err
    assert f"class folder {str(data / 'train' / 'zebra')!r} has no images" in warned[0]
    assert _train(data, tmp_path / "strict", "--epochs", "1", "--strict") == 2
    line = _error_line(capsys.readouterr().err)
    assert f"class folder {str(data / 'train' / 'zebra')!r} has no images" in line and "remove it" in line


def test_binary_text_is_refused(tmp_path: Path, capsys) -> None:
    blob = tmp_path / "model.bin"
    blob.write_bytes(b"\x7fELF\x00\x01\x02" * 100)
    assert cli.main(["train", "lstm-lm", "--text", str(blob), "--checkpoint-dir", str(tmp_path / "run")]) == 2
    line = _error_line(capsys.readouterr().err)
    assert line == (f"tinyflow train: error: --text {str(blob)!r} is not a text file (a NUL byte at offset 4: "
                    "binary data?); give a UTF-8 text file")


def test_a_failing_loader_worker_is_one_line(tiny: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    real = vision._WithTransform.__getitem__

    def broken(self, i):  # noqa: ANN001, ANN202
        if os.getpid() != parent:
            raise RuntimeError("decoder crashed")
        return real(self, i)

    parent = os.getpid()
    monkeypatch.setattr(vision._WithTransform, "__getitem__", broken)
    assert _train(tiny, tmp_path, "--workers", "1") == 1
    line = _error_line(capsys.readouterr().err)
    assert line.startswith("tinyflow train: error: Caught RuntimeError in DataLoader worker process 0 while loading "
                           "a batch with indices [")
    assert line.endswith("]: decoder crashed (rerun with --workers 0 to see the traceback)")


def test_a_loader_worker_raising_a_value_error_is_one_line_not_a_bad_option(tiny: Path, tmp_path: Path, monkeypatch,
                                                                          capsys) -> None:
    """A worker's ValueError comes back as a ValueError (PyTorch's behaviour) and is still the loader's
    failure (exit 1, one line), not taken for a bad option (exit 2, the whole traceback printed)."""
    real = vision._WithTransform.__getitem__

    def broken(self, i):  # noqa: ANN001, ANN202
        if os.getpid() != parent:
            raise ValueError("pixel values out of range")
        return real(self, i)

    parent = os.getpid()
    monkeypatch.setattr(vision._WithTransform, "__getitem__", broken)
    assert _train(tiny, tmp_path, "--workers", "1") == 1
    line = _error_line(capsys.readouterr().err)
    assert line.startswith("tinyflow train: error: Caught ValueError in DataLoader worker process 0")
    assert line.endswith(": pixel values out of range (rerun with --workers 0 to see the traceback)")


def test_other_warnings_pass_through() -> None:
    """warnings_as_lines turns EmptyClassWarning into lines and leaves other warnings alone."""
    import warnings

    from tinyflow.data import EmptyClassWarning

    def load() -> int:
        warnings.warn("kept", UserWarning, stacklevel=1)
        warnings.warn("shown as a line", EmptyClassWarning, stacklevel=1)
        return 7

    with pytest.warns(UserWarning, match="kept") as caught:
        assert vision.warnings_as_lines(load, "train", show=False) == 7
    assert [str(w.message) for w in caught] == ["kept"]
