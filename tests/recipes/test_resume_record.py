"""A resume never silently changes the run (issue 36, item 2): a checkpoint records every option that
shaped its run (optimizer, precision and fp16's loss scaler, seed, data and model settings, the
number of workers); on resume an option left out is taken from the checkpoint and said so once, one
given with another value is an error naming both, unless it may change (epochs, learning rate and
schedule, batch size, workers, where the data lives), which the resume line names as changed. A
checkpoint written before the record still resumes, saying what could not be checked. Also: a
whole-model pickle given to the command line is one line saying what it is and how to load it."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import tinyflow as tf
import tinyflow.nn as nn
from tinyflow import cli
from tinyflow.recipes import checkpoint as ckpts
from tinyflow.recipes import vision


def _resume_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("resuming from")]
    assert len(lines) == 1, err
    return lines[0]


def _error(err: str) -> str:
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if "error" in line]
    assert len(lines) == 1, err
    return lines[0]


# ----------------------------------------------------------------------------- taken from the checkpoint


def test_options_left_out_are_taken_from_the_checkpoint_and_said_once(tiny: Path, tmp_path: Path, capsys, train) -> None:
    """The reported case: an fp16 run resumed without --amp went on in float32 and dropped its loss
    scaler. Now it goes on in fp16 from the saved loss scale, and the resume line says what it took."""
    assert train(tiny, tmp_path, "--epochs", "1", "--amp", "fp16", "--seed", "3", "--crop-scale", "0.5") == 0
    state = ckpts.load_checkpoint(tmp_path / "last.ckpt")
    assert state["options"]["amp"] == "fp16" and state["scaler"] is not None
    assert state["world_size"] == 1 and state["options"]["data"] == str(tiny)
    # Mark the saved scaler state, to see that the resumed run goes on from it rather than afresh.
    scaler = {**state["scaler"], "scale": 1024.0, "_growth_tracker": 5}
    ckpts.save_checkpoint(tmp_path / "last.ckpt", {**{k: v for k, v in state.items() if k != "format"},
                                                   "scaler": scaler})
    capsys.readouterr()
    assert train(tiny, tmp_path, "--epochs", "2", "--resume") == 0
    err = capsys.readouterr().err
    line = _resume_line(err)
    assert line.endswith("at epoch 2; the run's own --amp fp16, --seed 3, --crop-scale 0.5; changed --epochs 1 -> 2: "
                         "learning rate 0.00015 from here")
    assert err.count("--amp fp16") == 1 and "note:" not in err
    resumed = ckpts.load_checkpoint(tmp_path / "last.ckpt")
    assert resumed["options"]["amp"] == "fp16" and resumed["amp"] == "fp16"
    assert resumed["scaler"]["scale"] == 1024.0 and resumed["scaler"]["_growth_tracker"] == 5 + 4  # 4 more steps


def test_the_language_models_sizes_are_taken_from_the_checkpoint(tmp_path: Path, capsys) -> None:
    text = tmp_path / "t.txt"
    text.write_text("the cat sat on the mat. the dog sat on the log. " * 10)
    lm = ["train", "lstm-lm", "--text", str(text), "--checkpoint-dir", str(tmp_path / "run"), "--quiet",
          "--seq-len", "4", "--batch-size", "4", "--embedding-dim", "8", "--num-layers", "1"]
    assert cli.main([*lm, "--epochs", "1", "--hidden-size", "12"]) == 0
    capsys.readouterr()
    assert cli.main([*lm, "--epochs", "2", "--resume"]) == 0  # --hidden-size left out: the run's 12, not the preset's
    line = _resume_line(capsys.readouterr().err)
    assert "the run's own --hidden-size 12;" in line and "--embedding-dim" not in line  # given again, the same
    state = ckpts.load_checkpoint(tmp_path / "run" / "last.ckpt")
    assert state["model_config"]["hidden_size"] == 12 and state["options"]["hidden_size"] == 12

    # ----- a conflicting value: an error naming both, nothing trained
    assert cli.main([*lm, "--epochs", "3", "--resume", "--hidden-size", "16"]) == 2
    assert _error(capsys.readouterr().err) == (
        f"tinyflow train: error: --hidden-size 16: checkpoint {str(tmp_path / 'run' / 'last.ckpt')!r} was trained "
        "with --hidden-size 12, which shaped what it learned and stays for the rest of the run; leave --hidden-size "
        "out (or give --hidden-size 12) to resume it, or start a new run in another --checkpoint-dir")
    assert ckpts.load_checkpoint(tmp_path / "run" / "last.ckpt")["epoch"] == 2


# ----------------------------------------------------------------------------- conflicts


@pytest.mark.parametrize("extra, message", [
    (["--seed", "5"], "--seed 5: checkpoint {path} was trained with --seed 0, which shaped"),
    (["--amp", "fp16"], "--amp fp16: checkpoint {path} was trained with no --amp, which shaped what it learned and "
                        "stays for the rest of the run; leave --amp out to resume it"),
    (["--augment", "none"], "--augment none: checkpoint {path} was trained with --augment auto, which shaped"),
    (["--image-size", "16"], "--image-size 16: checkpoint {path} was trained with --image-size 8, which shaped"),
])  # fmt: skip
def test_a_conflicting_option_is_an_error_naming_both(tiny: Path, tmp_path: Path, capsys, extra: list[str],
                                                      message: str, train) -> None:
    assert train(tiny, tmp_path, "--epochs", "1") == 0
    before = (tmp_path / "last.ckpt").read_bytes()
    capsys.readouterr()
    assert train(tiny, tmp_path, "--epochs", "2", "--resume", *extra) == 2
    line = _error(capsys.readouterr().err)
    assert line.startswith("tinyflow train: error: " + message.format(path=repr(str(tmp_path / "last.ckpt"))))
    assert (tmp_path / "last.ckpt").read_bytes() == before  # refused before any training


def test_other_workers_classes_or_precision_in_the_loop_are_errors(tiny: Path, tmp_path: Path, capsys, train) -> None:
    assert train(tiny, tmp_path, "--epochs", "1") == 0
    state = ckpts.load_checkpoint(tmp_path / "last.ckpt")
    path = repr(str(tmp_path / "last.ckpt"))
    rest = {k: v for k, v in state.items() if k != "format"}
    ckpts.save_checkpoint(tmp_path / "last.ckpt", {**rest, "world_size": 2})
    capsys.readouterr()
    assert train(tiny, tmp_path, "--epochs", "2", "--resume") == 2
    assert _error(capsys.readouterr().err) == (f"tinyflow train: error: checkpoint {path} was trained by 2 workers "
                                               "(--nproc 2), this run has 1: resume it with --nproc 2, or start a "
                                               "new run in another --checkpoint-dir")
    ckpts.save_checkpoint(tmp_path / "last.ckpt", {**rest, "classes": ["circle", "square"]})
    assert train(tiny, tmp_path, "--epochs", "2", "--resume") == 2
    assert (f"checkpoint {path} was trained on classes ['circle', 'square'] but {tiny} has classes ['circle', "
            "'stripes']: resume on data with the same class folders") in _error(capsys.readouterr().err)
    # fit itself (a program's own loop) refuses to drop an fp16 checkpoint's loss scaler.
    from tinyflow.recipes.loop import _Loop

    loop = _Loop.__new__(_Loop)
    loop.options, loop.scaler = vision.FitOptions(amp=None), tf.amp.GradScaler(enabled=False)
    with pytest.raises(ckpts.ResumeError, match=r"was trained with amp='fp16', this run has no amp \(float32\)"):
        loop.resume_scaler({"scaler": {"scale": 2.0}}, "c.ckpt")


# ----------------------------------------------------------------------------- may change


def test_options_that_may_change_are_named_as_changed(tiny: Path, tmp_path: Path, capsys, train) -> None:
    assert train(tiny, tmp_path / "run", "--epochs", "1", "--lr", "0.01") == 0
    moved = tmp_path / "moved"
    shutil.copytree(tiny, moved)  # the data set now lives elsewhere: its classes are the same
    capsys.readouterr()
    assert train(moved, tmp_path / "run", "--epochs", "2", "--resume", "--lr", "0.02", "--workers", "1") == 0
    line = _resume_line(capsys.readouterr().err)
    assert line.endswith(f"at epoch 2; changed --epochs 1 -> 2, --lr 0.01 -> 0.02, --data {tiny} -> {moved}, "
                         "--workers 0 -> 1: learning rate 0.01 from here")
    options = ckpts.load_checkpoint(tmp_path / "run" / "last.ckpt")["options"]
    assert (options["lr"], options["workers"], options["data"]) == (0.02, 1, str(moved))


# ----------------------------------------------------------------------------- older checkpoints


def test_a_checkpoint_without_the_record_resumes_and_says_what_could_not_be_checked(tiny: Path, tmp_path: Path,
                                                                                   capsys, train) -> None:
    assert train(tiny, tmp_path, "--epochs", "1", "--optimizer", "sgd") == 0
    state = ckpts.load_checkpoint(tmp_path / "last.ckpt")
    recorded = ("format", "amp", "epoch_time_s", "world_size")
    old = {k: v for k, v in state.items() if k not in recorded}
    old["options"] = {k: v for k, v in state["options"].items() if k in ckpts.RESUMED_OPTIONS}  # as written before
    ckpts.save_checkpoint(tmp_path / "last.ckpt", old)
    capsys.readouterr()
    assert train(tiny, tmp_path, "--epochs", "2", "--resume") == 0
    err = capsys.readouterr().err
    assert "the run's own --optimizer sgd" in _resume_line(err)
    note = [line for line in err.splitlines() if line.startswith("note:")]
    assert note == [f"note: {tmp_path / 'last.ckpt'} was written before checkpoints recorded --amp, --data, "
                    "--augment, --crop-scale, --workers: this command line's values are used, unchecked against "
                    "the run's"]  # the seed and image size it recorded apart: checked


# ----------------------------------------------------------------------------- whole-model pickles


def test_a_whole_model_checkpoint_is_one_line_saying_how_to_load_it(tiny: Path, tmp_path: Path, capsys, train) -> None:
    whole = tmp_path / "whole.ckpt"
    tf.save(nn.Sequential(nn.Flatten(), nn.Linear(192, 2)), str(whole))
    expected = (f"{str(whole)!r} holds a pickled tinyflow.nn.modules.container.Sequential (a whole object saved "
                "with tf.save(model)), not a checkpoint written by `tinyflow train`, and the command line does not "
                f"unpickle objects (that runs code from the file); load it in Python with tinyflow.load({str(whole)!r}, "
                "weights_only=False) if you trust the file, or save model.state_dict() instead, which tinyflow.load "
                "reads without unpickling")
    for argv, command in ((["eval", "tiny", "--checkpoint", str(whole), "--data", str(tiny)], "eval"),
                          (["sample", "--checkpoint", str(whole)], "sample")):
        assert cli.main(argv) == 2
        assert _error(capsys.readouterr().err) == f"tinyflow {command}: error: {expected}"
    assert train(tiny, tmp_path / "run", "--epochs", "1", "--resume", str(whole)) == 2
    line = _error(capsys.readouterr().err)
    assert line == f"tinyflow train: error: {expected}" and "add_safe_globals" not in line
