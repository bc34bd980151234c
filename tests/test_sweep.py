"""`tinyflow sweep`: grids, slots, the scheduler (with fake runs), resuming, and a real 2x2 sweep."""
from __future__ import annotations

import argparse
import json
import os
import random
from pathlib import Path

import pytest

from tinyflow.recipes import sweep as sw


def test_grid_options_and_names():
    grid = sw.parse_grid("lr=0.01,0.1 batch-size=32,64 amp=bf16")
    assert grid == {"lr": [0.01, 0.1], "batch_size": [32, 64], "amp": ["bf16"]}
    runs = sw.expand(grid)
    assert runs[0] == {"lr": 0.01, "batch_size": 32, "amp": "bf16"} and len(runs) == 4
    assert [r["lr"] for r in runs] == [0.01, 0.01, 0.1, 0.1]  # the first key varies slowest
    assert sw.option_args({"batch_size": 32, "quiet": True, "resume": False}) == ["--batch-size", "32", "--quiet"]
    assert sw.run_name({"lr": 0.01, "data": "a/b c"}) == "lr=0.01_data=a-b-c"
    with pytest.raises(ValueError, match="bad --grid entry 'lr'"):
        sw.parse_grid("lr")


def test_config_file(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text('model = "resnet20"\nmetric = "val_loss"\n[options]\nepochs = 2\n'
                    '[grid]\nlr = [0.01, 0.1]\nbatch-size = 32\n')
    cfg = sw.load_config(path)
    assert (cfg.model, cfg.metric, cfg.options) == ("resnet20", "val_loss", {"epochs": 2})
    assert cfg.grid == {"lr": [0.01, 0.1], "batch_size": [32]}
    assert sw.metric_mode("val_loss") == "min" and sw.metric_mode("val_top1") == "max"
    path.write_text('model = "x"\nslots = 3\n')
    with pytest.raises(ValueError, match="unknown key"):
        sw.load_config(path)


def test_cpu_slots_split_the_cores():
    slots = sw.cpu_slots(2, cpus=[0, 1, 2, 3])
    assert [(s.cpus, s.threads) for s in slots] == [([0, 1], 2), ([2, 3], 2)]
    one_each = sw.cpu_slots(3, cpus=[0, 1])  # more slots than cores: one core each, shared
    assert [s.cpus for s in one_each] == [[0], [1], [0]] and all(s.threads == 1 for s in one_each)
    assert [s.device for s in sw.device_slots(["cuda:0", "cuda:1"])] == ["cuda:0", "cuda:1"]


class FakeRun:
    """A run that writes one epoch per poll and exits after ``epochs`` (or fails)."""

    def __init__(self, run: sw.Run, slot: sw.Slot, resume: bool, log: list, fail: bool, epochs: int = 2):
        self.run, self.fail, self.epochs, self.polls = run, fail, epochs, 0
        os.makedirs(run.dir, exist_ok=True)
        log.append(("start", run.name, slot.name, resume))
        self.log = log

    def poll(self):
        self.polls += 1
        running = sum(1 for e in self.log if e[0] == "start") - sum(1 for e in self.log if e[0] == "end")
        self.log.append(("running", running))
        if self.fail:
            (Path(self.run.dir) / "train.log").write_text("Traceback ...\nValueError: lr too high\n")
            self.log.append(("end", self.run.name))
            return 1
        lr = self.run.params["lr"]
        acc = lambda e: round(lr * 10 * e / self.epochs, 3)  # noqa: E731 - larger lr, better here
        records = [{"epoch": e, "train_loss": 1.0 / e, "val_top1": acc(e)} for e in range(1, self.polls + 1)]
        (Path(self.run.dir) / sw.METRICS_FILE).write_text("".join(json.dumps(r) + "\n" for r in records))
        (Path(self.run.dir) / sw.LAST_CHECKPOINT).write_text("ckpt")
        if self.polls >= self.epochs:
            self.log.append(("end", self.run.name))
            return 0
        return None

    def kill(self):
        pass


def _sweep(out: Path, log: list, failing: set[str]) -> sw.Sweep:
    grid = {"lr": [0.01, 0.05], "batch_size": [8, 16]}
    runs = [sw.Run(sw.run_name(p), p, str(out / sw.run_name(p))) for p in sw.expand(grid)]
    slots = sw.cpu_slots(2, cpus=[0, 1])
    launcher = lambda run, slot, resume: FakeRun(run, slot, resume, log, run.name in failing)  # noqa: E731
    return sw.Sweep(runs, slots, launcher, out, metric="val_top1", mode="max", poll_seconds=0.0, epochs=2)


def test_scheduler_two_slots_ranks_reports_failures_and_resumes(tmp_path):
    log: list = []
    bad = "lr=0.05_batch_size=16"
    sweep = _sweep(tmp_path, log, failing={bad})
    tables: list[str] = []
    sweep.on_change = lambda s: tables.append(sw.live_table(s))
    runs = sweep.run()
    assert max(e[1] for e in log if e[0] == "running") == 2  # never more runs than slots
    assert [e[1] for e in log if e[0] == "start"] == [r.name for r in runs]  # queued in order
    assert {r.name: r.status for r in runs} == {"lr=0.01_batch_size=8": "done", "lr=0.01_batch_size=16": "done",
                                               "lr=0.05_batch_size=8": "done", bad: "failed"}
    assert "ValueError: lr too high" in next(r for r in runs if r.name == bad).error
    assert any("| running |" in t for t in tables) and "3 done, 1 failed" in tables[-1]

    ranked = sweep.ranked()
    assert ranked[0].name == "lr=0.05_batch_size=8" and ranked[-1].name == bad
    table = sw.results_table(sweep)
    assert table.splitlines()[2].startswith("| 1 | lr=0.05_batch_size=8 | 0.05 | 8 | done | 2 | 0.5000 | 2 |")
    assert f"- {bad} failed: exit status 1" in table
    assert json.loads(sw.results_json(sweep))["runs"][0]["best"] == 0.5
    assert sw.plot_curves(sweep, tmp_path / "curves.png") and (tmp_path / "curves.png").exists()
    state = json.loads((tmp_path / sw.STATE_FILE).read_text())
    assert [r["status"] for r in state["runs"]].count("done") == 3

    # the same sweep again: finished runs stay finished, the failed one runs again from its checkpoint
    log2: list = []
    (tmp_path / bad / sw.LAST_CHECKPOINT).write_text("ckpt")
    again = _sweep(tmp_path, log2, failing=set())
    again.run()
    assert [(e[1], e[3]) for e in log2 if e[0] == "start"] == [(bad, True)]
    assert all(r.status == "done" for r in again.runs)


LM = ["--epochs", "1", "--hidden-size", "8", "--embedding-dim", "8", "--num-layers", "1", "--seq-len", "8",
      "--workers", "0"]


@pytest.mark.slow
def test_a_2x2_sweep_on_the_cpu_with_2_slots(tmp_path, capsys):
    from tinyflow.commands import sweep as command

    rng = random.Random(0)
    words = "the quick brown fox jumps over a lazy dog while cats sleep".split()
    text = tmp_path / "tiny.txt"
    text.write_text(" ".join(rng.choice(words) for _ in range(1500)))
    parser = argparse.ArgumentParser()
    command.register(parser.add_subparsers())
    out = tmp_path / "sweep"
    argv = ["sweep", "--grid", "lr=0.002,0.01 batch_size=8,16", "lstm-lm", "--text", str(text), *LM,
            "--slots", "2", "--out", str(out), "--poll", "0.2"]
    args = parser.parse_args(argv)
    assert args.func(args) == 0
    printed = capsys.readouterr().out
    assert "results, ranked by val_ppl (min is better)" in printed
    results = json.loads((out / "results.json").read_text())
    assert [r["status"] for r in results["runs"]] == ["done"] * 4
    best = [r["best"] for r in results["runs"]]
    assert best == sorted(best)  # perplexity: lower is better, best first
    assert (out / "results.md").read_text().count("| done |") == 4
    assert (out / "curves.png").read_bytes()[:4] == b"\x89PNG"
    for r in results["runs"]:
        assert (Path(r["dir"]) / "last.ckpt").exists() and "--checkpoint-dir" in (Path(r["dir"]) / "train.log").read_text()


def test_a_repeated_grid_point_is_refused_in_one_line(tmp_path, capsys):
    """Two runs of one grid point would train in one folder at once, and the sweep would show one
    as running after it exited: refused (a repeat is a typo for another value) before anything starts."""
    from tinyflow import cli

    with pytest.raises(ValueError, match="grid option lr lists 0.1 twice"):
        sw.parse_grid("lr=0.1,0.10 batch_size=8")
    with pytest.raises(ValueError, match=r"grid option lr lists 1 and 1.0 \(the same value\)"):
        sw.parse_grid("lr=1,1.0")
    with pytest.raises(ValueError, match="--grid names lr twice"):
        sw.parse_grid("lr=0.1 lr=0.2")
    with pytest.raises(ValueError, match=r"would both run in the folder 'data=a-b'"):
        sw.parse_grid("data=a/b,a-b")
    runs = [sw.Run("lr=0.1", {"lr": 0.1}, str(tmp_path / "lr=0.1"))] * 2
    with pytest.raises(ValueError, match=r"a sweep runs each grid point once: the runs' names \['lr=0.1'\] repeat"):
        sw.Sweep(runs, sw.cpu_slots(1, cpus=[0]), launcher=None, out=tmp_path)

    out = tmp_path / "sweep"
    with pytest.raises(SystemExit) as exit_:
        cli.main(["sweep", "--grid", "lr=0.1,0.1", "lstm-lm", "--out", str(out)])
    assert exit_.value.code == 2
    assert capsys.readouterr().err == ("tinyflow sweep: error: argument --grid: grid option lr lists 0.1 twice: each "
                                       "grid point must be run once; remove the repeat (or give the value you meant)\n")
    config = tmp_path / "s.toml"
    config.write_text('model = "lstm-lm"\n[grid]\nlr = [0.1, 0.1]\n')
    assert cli.main(["sweep", str(config), "--out", str(out)]) == 2
    assert capsys.readouterr().err.startswith(f"tinyflow sweep: error: {config}: grid option lr lists 0.1 twice")
    assert not out.exists()


@pytest.mark.parametrize("argv, message", [
    (["--grid", "lr=abc", "lstm-lm"], "run lr=abc: argument --lr: expected a number, got 'abc' (as a `tinyflow "
                                      "train` option)"),
    (["--grid", "lrr=0.1", "lstm-lm"], "run lrr=0.1: unrecognized arguments: --lrr 0.1"),
    (["--grid", "lr=0.1", "lstm-lm", "--epochs", "0"], "the train options: argument --epochs: must be >= 1, got 0"),
    (["--grid", "lr=0.1", "no-such-model"], "unknown model 'no-such-model': choose one of "),
    (["lstm-lm", "--grid", "lr=0.1", "--slots", "0"], "argument --slots: must be >= 1, got 0"),  # after the model too
])  # fmt: skip
def test_bad_train_options_of_a_sweep_are_refused_before_any_run(tmp_path, capsys, argv, message):
    from tinyflow import cli

    out = tmp_path / "sweep"
    assert cli.main(["sweep", *argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"tinyflow sweep: error: {message}") and err.count("\n") == 1, err
    assert not out.exists()  # nothing started
