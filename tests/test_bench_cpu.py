"""bench/bench_cpu.py and the real programs of bench/programs/: the worker's record, the report's
arithmetic, and the programs themselves (they train under tinyflow, and from the same weights
tinyflow and PyTorch compute the same loss). No timings are asserted."""
from __future__ import annotations

import importlib
import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tinyflow

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "bench" / "bench_cpu.py"
if str(ROOT / "bench") not in sys.path:
    sys.path.insert(0, str(ROOT / "bench"))  # the programs import `programs` (bench/programs/)


def _bench() -> object:
    spec = importlib.util.spec_from_file_location("bench_cpu", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bench = _bench()
PROGRAMS = [pytest.param(mod, id=name) for name, mod in bench.PROGRAMS.items()]
# Smaller than the bench's shapes, so that the tests take seconds: the code path is the same.
SMALL = {"word_lm": {"NTOKENS": 2000, "BPTT": 10}, "lstm_timeseries": {"SEQ": 24}, "char_rnn": {"SEQ": 20}}


@pytest.fixture
def small(monkeypatch: pytest.MonkeyPatch) -> None:
    for module, sizes in SMALL.items():
        for name, value in sizes.items():
            monkeypatch.setattr(_program(module), name, value)


def _program(module: str) -> object:
    return importlib.import_module(f"programs.{module}")


def _worker(spec: dict) -> list[dict]:
    env = bench.worker_env(1, 4)
    out = subprocess.run([sys.executable, str(SCRIPT), "--worker", json.dumps(spec)], capture_output=True,
                         text=True, env=env, timeout=300)
    records = [json.loads(line[len(bench.RESULT_MARK):]) for line in out.stdout.splitlines()
               if line.startswith(bench.RESULT_MARK)]
    assert records, out.stderr[-2000:]
    return records


# ---- the worker ------------------------------------------------------------------------------------
FIELDS = {"status", "workload", "framework", "threads", "items_per_step", "unit", "sizes", "params", "step_s",
          "cpu_s", "median_step_s", "median_cpu_s", "items_per_s", "peak_rss_mb", "last_loss", "loaded", "env"}


@pytest.mark.parametrize("framework", ["tinyflow", pytest.param("torch", marks=pytest.mark.slow)])
def test_worker_prints_one_record_with_its_fields(framework: str) -> None:
    if framework == "torch":
        pytest.importorskip("torch")
    spec = {"workload": "mnist-cnn", "frameworks": [framework], "threads": 1, "warmup": 0, "steps": 2}
    (record,) = _worker(spec)
    assert record["status"] == "ok", record
    assert FIELDS <= set(record)
    assert record["framework"] == framework and record["threads"] == 1
    assert len(record["step_s"]) == len(record["cpu_s"]) == 2 and min(record["step_s"]) > 0
    assert record["items_per_s"] == pytest.approx(record["items_per_step"] / record["median_step_s"])
    assert record["peak_rss_mb"] > 10 and math.isfinite(record["last_loss"])
    assert record["env"]["OMP_NUM_THREADS"] == record["env"]["OPENBLAS_NUM_THREADS"] == "1"
    assert record["loaded"] == [framework]  # a worker never loads the other framework


@pytest.mark.slow  # ~15 s: a torch and a tinyflow AlexNet in one process; the end-to-end test runs both
def test_same_process_worker_measures_both_in_one_process() -> None:
    pytest.importorskip("torch")
    records = _worker({"workload": "mnist-cnn", "frameworks": ["torch", "tinyflow"], "threads": 1, "warmup": 0,
                       "steps": 2})
    assert [r["framework"] for r in records] == ["torch", "tinyflow"]
    assert all(r["status"] == "ok" and r["same_process"] and r["loaded"] == ["tinyflow", "torch"] for r in records)
    assert records[0]["pid"] == records[1]["pid"] and records[0]["peak_rss_mb"] == records[1]["peak_rss_mb"]


def test_worker_reports_a_failure_as_a_record() -> None:
    (record,) = _worker({"workload": "no-such-workload", "frameworks": ["tinyflow"], "threads": 1,
                         "warmup": 0, "steps": 1})
    assert record["status"] == "error" and "no-such-workload" in record["message"]


def test_gemm_breakdown_times_every_gemm_of_the_step() -> None:
    (record,) = _worker({"workload": "lstm-timeseries", "frameworks": ["tinyflow"], "threads": 1, "warmup": 1,
                         "steps": 0, "profile": 2, "gemms": True})
    assert record["status"] == "ok", record
    head, columns, *rows = record["profile"].splitlines()
    step_ms, gemm_ms, rest_ms = (float(head.split(word)[1].split("ms")[0].split()[-1])
                                 for word in ("step ", "GEMMs ", "the rest "))
    assert 0 < gemm_ms < step_ms and rest_ms == pytest.approx(step_ms - gemm_ms, abs=0.2)
    assert rows and all(" @ " in row for row in rows)
    # the rows add up to the GEMM total (rounded to 0.01 ms each)
    assert sum(float(row.split()[-3]) for row in rows) == pytest.approx(gemm_ms, abs=0.1 + 0.01 * len(rows))


# ---- the arithmetic ----------------------------------------------------------------------------------
def _rec(framework: str, step_s: list[float], cpu_s: list[float] | None = None, rss: float = 100.0,
         items: int = 10) -> dict:
    return {"status": "ok", "framework": framework, "items_per_step": items, "unit": "images/s", "step_s": step_s,
            "cpu_s": cpu_s or step_s, "median_cpu_s": float(np.median(cpu_s or step_s)), "peak_rss_mb": rss}


def test_summary_pairs_rounds_and_reports_spread_and_rss() -> None:
    rounds = {
        # per-round medians: tinyflow 1.0, 2.0, 0.5 s/step; torch 0.5, 1.0, 0.5 s/step
        "tinyflow": [_rec("tinyflow", [1.0, 0.9, 1.2], rss=150), _rec("tinyflow", [2.0, 2.0, 3.0], rss=160),
                     _rec("tinyflow", [0.5, 0.4, 0.6], [1.0, 1.0, 1.0], rss=155)],
        "torch": [_rec("torch", [0.5, 0.5, 0.5], rss=200), _rec("torch", [1.0, 1.0, 1.0], rss=190),
                  _rec("torch", [0.5], [0.5], rss=195)],
    }
    s = bench.summarize(rounds)
    assert s["tinyflow"]["items_per_s"] == pytest.approx(10.0)  # median of 10, 5, 20 items/s
    assert s["tinyflow"]["spread"] == pytest.approx([5.0, 20.0])
    assert s["torch"]["items_per_s"] == pytest.approx(20.0) and s["torch"]["spread"] == pytest.approx([10.0, 20.0])
    assert s["round_ratios"] == pytest.approx([0.5, 0.5, 1.0])
    assert s["ratio"] == pytest.approx(0.5)  # median of the per-round ratios, not 10 / 20 by accident
    assert s["cpu_ratio"] == pytest.approx(0.5)  # CPU time: 0.5, 0.5, 0.5
    assert s["tinyflow"]["peak_rss_mb"] == 160 and s["torch"]["peak_rss_mb"] == 200
    assert s["rss_ratio"] == pytest.approx(0.8)


def test_summary_ratio_differs_from_ratio_of_medians_when_load_drifts() -> None:
    # The machine slows down from round to round; each round's pair sees the same load.
    tf_steps, torch_steps = [1.0, 3.0, 9.0], [2.0, 6.0, 3.0]
    rounds = {"tinyflow": [_rec("tinyflow", [t]) for t in tf_steps], "torch": [_rec("torch", [t]) for t in torch_steps]}
    s = bench.summarize(rounds)
    assert s["ratio"] == pytest.approx(2.0)  # per round: 2, 2, 1/3
    assert s["tinyflow"]["items_per_s"] / s["torch"]["items_per_s"] == pytest.approx(1.0)


def test_summary_keeps_going_past_a_failed_cell() -> None:
    rounds = {"tinyflow": [_rec("tinyflow", [1.0]), {"status": "oom", "message": "killed"}],
              "torch": [_rec("torch", [0.5]), _rec("torch", [0.5])]}
    s = bench.summarize(rounds)
    assert s["round_ratios"] == pytest.approx([0.5]) and s["tinyflow"]["failed_rounds"] == 1
    s = bench.summarize({"tinyflow": [{"status": "timeout", "message": "no result"}], "torch": [_rec("torch", [1.0])]})
    assert s["tinyflow"]["status"] == "timeout" and "ratio" not in s and "rss_ratio" not in s
    args = bench.parse_args(["--workloads", "fcn-r"])
    lines = bench.workload_lines("fcn-r", s, "sizes", args, "cpu")
    assert any("TIMEOUT" in line for line in lines)


def test_same_process_mode_labels_every_line() -> None:
    args = bench.parse_args(["--same-process", "--short"])
    assert (args.rounds, args.steps, args.warmup) == (1, 2, 1)
    meta = {"date": "d", "command": "c", "cpu": "cpu", "cores": 2, "load_start": "0", "openblas_thread_timeout": "4",
            "versions": {"numpy": "n", "torch": "t", "tinyflow": "f", "python": "p"}}
    s = bench.summarize({"tinyflow": [_rec("tinyflow", [1.0])], "torch": [_rec("torch", [1.0])]})
    lines = bench.header(args, meta) + bench.workload_lines("fcn-r", s, "sizes", args, "cpu")
    assert all(bench.SAME_PROCESS_LABEL in line for line in lines)
    assert bench.SAME_PROCESS_LABEL in bench.markdown([{"workload": "fcn-r", "sizes": "", "summary": s}],
                                                      lines, args)


# ---- the real programs ------------------------------------------------------------------------------------
@pytest.mark.parametrize("module", PROGRAMS)
def test_program_trains_under_tinyflow(module: str, small: None) -> None:
    program = _program(module).build(tinyflow)
    losses = [float(program.step().item()) for _ in range(2)]
    assert all(math.isfinite(v) for v in losses), losses
    assert program.items_per_step > 0 and program.unit.endswith("/s")


def _twins(module: str) -> tuple:
    """The program under tinyflow and under PyTorch, PyTorch's model holding tinyflow's weights,
    both in eval mode (no dropout)."""
    torch = pytest.importorskip("torch")
    from tinyflow.bench.torch_twins import load_tinyflow_state

    ours, theirs = _program(module).build(tinyflow), _program(module).build(torch)
    assert set(ours.model.state_dict()) == set(theirs.model.state_dict())
    assert load_tinyflow_state(theirs.model, ours.model) == []
    ours.model.eval()
    theirs.model.eval()
    return ours, theirs


@pytest.mark.parametrize("module", PROGRAMS)
def test_program_same_loss_as_torch_from_the_same_weights(module: str, small: None) -> None:
    ours, theirs = _twins(module)
    assert float(ours.loss().item()) == pytest.approx(float(theirs.loss().item()), rel=1e-5, abs=1e-6)


@pytest.mark.parametrize("module", PROGRAMS)
def test_program_same_training_step_as_torch(module: str, small: None) -> None:
    """One step each (optimizer, clipping, the carried hidden state), then the same loss again."""
    ours, theirs = _twins(module)
    for _ in range(2):
        a, b = float(ours.step().item()), float(theirs.step().item())
        assert a == pytest.approx(b, rel=1e-4, abs=1e-5)


# ---- the whole script ------------------------------------------------------------------------------------
def test_bench_cpu_short_runs_end_to_end(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    out = subprocess.run([sys.executable, str(SCRIPT), "--short", "--threads", "1", "--workloads", "mnist-cnn",
                          "--json", str(tmp_path / "r.json"), "--markdown", str(tmp_path / "r.md")],
                         capture_output=True, text=True, timeout=600, cwd=ROOT, env=dict(os.environ))
    assert out.returncode == 0, out.stderr[-3000:]
    assert "tinyflow / PyTorch" in out.stdout and "peak RSS" in out.stdout
    data = json.loads((tmp_path / "r.json").read_text())
    (result,) = data["results"]
    assert result["workload"] == "mnist-cnn"
    assert result["summary"]["tinyflow"]["status"] == result["summary"]["torch"]["status"] == "ok"
    assert result["summary"]["ratio"] > 0 and result["summary"]["rss_ratio"] > 0
    assert data["meta"]["threads"] == 1 and data["meta"]["cores"] >= 1
    assert "| mnist-cnn |" in (tmp_path / "r.md").read_text()
