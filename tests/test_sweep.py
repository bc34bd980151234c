"""`tinyflow sweep`: grids, slots, the scheduler (with fake runs), resuming, and a real 2x2 sweep."""
from __future__ import annotations

import argparse
import json
import os
import random
from pathlib import Path

import pytest

from tinyflow import sweep as sw


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
