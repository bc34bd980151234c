"""bench/gpu's scripts, the parts that need no GPU: the GPU-busy interval union and the kernel table
of kernel_profile.py on hand-made trace events, run_summary.py's pytest parsers on sample output,
bench_gpu.py's --merge and --child-timeout, run_all.sh's syntax and time budgets (--plan), and
(slow) one whole run_all.sh on the CPU with a phase that hangs."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[1]
GPU = ROOT / "bench" / "gpu"
RUN_ALL = GPU / "run_all.sh"


def _load(name: str) -> object:
    spec = importlib.util.spec_from_file_location(f"bench_gpu_scripts_{name}", GPU / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


kp = _load("kernel_profile")
summary = _load("run_summary")
bench = _load("bench_gpu")


# ---- kernel_profile: union of intervals, event filtering, the tables ---------------------------
@pytest.mark.parametrize(("intervals", "expected"), [
    ([], 0.0),
    ([(0, 10)], 10.0),
    ([(0, 10), (5, 15), (20, 30)], 25.0),  # overlap counted once, the gap not at all
    ([(20, 30), (0, 10), (5, 15)], 25.0),  # order does not matter
    ([(0, 100), (10, 20), (30, 40)], 100.0),  # nested in a long kernel
    ([(0, 1), (1, 2), (2, 3)], 3.0),  # touching
    ([(0, 4), (4, 4), (6, 6)], 4.0),  # zero-length
])
def test_union_length_counts_overlapping_kernels_once(intervals: list, expected: float) -> None:
    assert kp.union_length(intervals) == pytest.approx(expected)


def test_union_length_refuses_an_interval_that_ends_before_it_starts() -> None:
    with pytest.raises(ValueError):
        kp.union_length([(5, 1)])


def _event(name: str, start: float, end: float, **kw: object) -> SimpleNamespace:
    defaults = {"activity_type": None, "device_type": "DeviceType.CUDA", "is_user_annotation": False,
                "is_async": False, "cpu_parent": None}
    return SimpleNamespace(name=name, time_range=SimpleNamespace(start=start, end=end), **{**defaults, **kw})


def test_activities_keep_kernels_and_copies_and_drop_annotations_and_host_events() -> None:
    events = [
        _event("im2col_f32", 0, 10, activity_type="kernel"),
        _event("Memcpy HtoD (Pageable -> Device)", 10, 12, activity_type="gpu_memcpy"),
        _event("Memset (Device)", 12, 13, activity_type="gpu_memset"),
        _event("Optimizer.step#SGD.step", 0, 100, activity_type="gpu_user_annotation", is_user_annotation=True),
        _event("cudaLaunchKernel", 0, 1, activity_type="cuda_runtime", device_type="DeviceType.CPU"),
        _event("aten::mm", 0, 5, activity_type="cpu_op", device_type="DeviceType.CPU"),
        # older torch: no activity type, only the device type and the annotation flag
        _event("gemm_kernel", 20, 30),
        _event("Memcpy DtoD (Device -> Device)", 30, 31),
        _event("ProfilerStep#1", 0, 100, is_user_annotation=True),
    ]
    acts = kp.activities(events, on_gpu=True)
    assert [(a.name, a.kind) for a in acts] == [
        ("im2col_f32", "kernel"), ("Memcpy HtoD (Pageable -> Device)", "copy"), ("Memset (Device)", "copy"),
        ("gemm_kernel", "kernel"), ("Memcpy DtoD (Device -> Device)", "copy")]


def test_activities_on_the_cpu_take_top_level_ops_only() -> None:
    parent = _event("aten::linear", 0, 10, activity_type="cpu_op", device_type="DeviceType.CPU")
    events = [parent,
              _event("aten::addmm", 1, 9, activity_type="cpu_op", device_type="DeviceType.CPU", cpu_parent=parent),
              _event("async", 0, 50, activity_type="cpu_op", device_type="DeviceType.CPU", is_async=True)]
    assert [a.name for a in kp.activities(events, on_gpu=False)] == ["aten::linear"]


def test_summarize_gives_busy_fraction_per_step_figures_and_the_kernel_table() -> None:
    A = kp.Activity
    acts = [A("gemm", "kernel", 0, 40), A("relu", "kernel", 30, 50),  # two streams overlap 10 us
            A("gemm", "kernel", 100, 140), A("Memcpy HtoD", "copy", 150, 160)]
    got = kp.summarize(acts, steps=2, wall_s=400e-6)
    # union 50 + 40 + 10 = 100 us of 400 us; summed kernel time 40+20+40+10 = 110 us
    assert got["busy_fraction"] == pytest.approx(0.25)
    assert got["busy_ms"] == pytest.approx(0.05)
    assert got["wall_ms"] == pytest.approx(0.2)
    assert got["kernel_ms"] == pytest.approx(0.055)
    assert got["kernels_per_step"] == 1.5 and got["copies_per_step"] == 0.5
    rows = {r["name"]: r for r in got["rows"]}
    assert [r["name"] for r in got["rows"]] == ["gemm", "relu", "Memcpy HtoD"]  # by time
    assert rows["gemm"]["ms_per_step"] == pytest.approx(0.04) and rows["gemm"]["calls_per_step"] == 1
    assert sum(r["share"] for r in got["rows"]) == pytest.approx(1.0)


def _cell(framework: str, **kw: object) -> dict:
    acts = [kp.Activity("void kernel<a|b>(float*)", "kernel", 0, 30), kp.Activity("sgd", "kernel", 30, 40)]
    return {"workload": "lstm-lm", "precision": "tf32", "framework": framework, "wall_unprofiled_ms": 0.03,
            **kp.summarize(acts, 1, 50e-6), **kw}


def test_profile_markdown_has_a_row_per_cell_and_each_cells_kernels() -> None:
    record = {"device": "H100", "date": "2026-11-27", "steps": 1, "warmup": 3,
              "cells": [_cell("tinyflow"), {"workload": "lstm-lm", "precision": "tf32", "framework": "torch",
                                            "error": "torch lstm-lm tf32 timed out after 25s (killed):\n..."}]}
    md = kp.markdown(record)
    assert "| lstm-lm | tf32 | tinyflow | 0.03 | 0.05 | 0.04 | 80% | 2 | 0 |" in md
    assert "| lstm-lm | tf32 | torch | failed: torch lstm-lm tf32 timed out after 25s" in md
    assert "`void kernel<a\\|b>(float*)` | 0.030 | 1 | 75.0% |" in md  # the pipe cannot split the row
    text = kp.text_table(_cell("tinyflow"))
    assert "GPU busy 0.04 ms/step (80.0%)" in text and "void kernel<a|b>(float*)" in text


# ---- run_summary: pytest's last line, hangs, the summary ---------------------------------------
@pytest.mark.parametrize(("line", "expected"), [
    ("13 failed, 121 passed, 3 skipped in 28.92s", {"failed": 13, "passed": 121, "skipped": 3, "seconds": 28.92}),
    ("==== 1 failed, 2 passed, 1 error, 3 warnings in 125.01s (0:02:05) ====",
     {"failed": 1, "passed": 2, "errors": 1, "warnings": 3, "seconds": 125.01}),
    ("=================== 137 passed, 2 errors in 9.5s ===================", {"passed": 137, "errors": 2}),
    ("no tests ran in 0.01s", {"seconds": 0.01}),
    ("7403 deselected in 15.4s", {"deselected": 7403}),
])
def test_pytest_counts_reads_the_last_summary_line(line: str, expected: dict) -> None:
    text = "\n".join(["collected 140 items", "21.64s call     tests/gpu/test_x.py::test_slow",
                      "FAILED tests/gpu/test_x.py::test_a - AssertionError: 3 != 2", line, ""])
    got = summary.pytest_counts(text)
    assert got is not None and {k: got.get(k) for k in expected} == expected
    assert "passed" in got or "passed" not in expected


def test_pytest_counts_is_none_when_the_run_was_stopped_before_its_summary() -> None:
    assert summary.pytest_counts("bringing up nodes...\n....F...\n21.64s call  tests/a.py::b\n") is None
    assert summary.describe_counts(None).startswith("no pytest summary")


def test_pytest_troubles_names_failed_and_hung_tests() -> None:
    log = """......F[gw0] node down: Not properly terminated
worker 'gw0' crashed while running 'tests/gpu/test_nccl.py::test_hangs'
=========================== short test summary info ============================
FAILED tests/gpu/test_x.py::test_fails - AssertionError: the values differ
FAILED tests/gpu/test_nccl.py::test_hangs - worker 'gw0' crashed while...
2 failed, 6 passed in 13.09s
"""
    got = summary.pytest_troubles(log)
    assert got["crashed"] == ["tests/gpu/test_nccl.py::test_hangs"]
    assert got["workers_down"] == 1 and len(got["failed"]) == 2
    assert summary.describe_counts(summary.pytest_counts(log)) == "2 failed, 6 passed in 13.1s"


def test_summary_renders_each_phase_with_its_result(tmp_path: Path) -> None:
    tests_log = tmp_path / "gpu-tests.log"
    tests_log.write_text("FAILED tests/gpu/test_x.py::test_a - boom\n1 failed, 9 passed in 3.00s\n")
    bench_json = tmp_path / "bench-lstm-lm.json"
    bench_json.write_text(json.dumps({"results": [
        {"workload": "lstm-lm", "precision": "tf32", "ratio": 0.16, "tinyflow": 74558.5, "torch": 477236.4,
         "unit": "tokens/s"},
        {"workload": "lstm-lm", "precision": "bf16", "tinyflow": {"error": "tinyflow lstm-lm bf16 timed out after 25s"},
         "torch": {"step_s": [0.01]}}]}))
    bench_log = tmp_path / "bench-alexnet-64.log"
    bench_log.write_text("== bench...\nTraceback (most recent call last):\nRuntimeError: no driver\n== bench: FAILED\n")
    rows = [
        "env\tcmd\tok\t0\t3\t30\t" + str(tmp_path / "env.txt") + "\t\t",
        f"gpu-tests\tpytest\tFAILED\t1\t31\t90\t{tests_log}\t\tpytest-xdist -n 8",
        f"bench-lstm-lm\tbench\tok\t0\t20\t50\t{tmp_path / 'x.log'}\t{bench_json}\t",
        f"bench-alexnet-64\tbench\tFAILED\t1\t4\t50\t{bench_log}\t{tmp_path / 'missing.json'}\t",
        "train\tcmd\tSKIPPED\t\t0\t40\t\t\tno time left",
    ]
    (tmp_path / "phases.tsv").write_text("\n".join(rows) + "\n")
    md = summary.render(summary.read_phases(tmp_path / "phases.tsv"), "gpu: NVIDIA H100 80GB HBM3\n", "t", "465")
    assert md.startswith("# GPU run summary: NVIDIA H100 80GB HBM3, t")
    assert "| gpu-tests | FAILED | 1 | 31 (90) | 1 failed, 9 passed in 3.0s; pytest-xdist -n 8 |" in md
    assert "tf32 0.16x (74558 vs 477236 tokens/s), bf16 failed (tinyflow: timed out)" in md
    assert "no result file; last output: RuntimeError: no driver" in md
    assert "| train | SKIPPED |  | 0 (40) | no time left |" in md
    assert "    FAILED tests/gpu/test_x.py::test_a - boom" in md


# ---- bench_gpu.py: --merge, --child-timeout ----------------------------------------------------
def test_merge_joins_the_workloads_runs_and_skips_missing_files(tmp_path: Path) -> None:
    def result(workload: str) -> dict:
        return {"workload": workload, "precision": "tf32", "unit": "images/s", "tinyflow": 10.0, "torch": 20.0,
                "ratio": 0.5, "raw": {"tinyflow": {"peak_bytes": 2**30}, "torch": {"peak_bytes": None}}}
    for w in ("alexnet-224", "alexnet-64"):
        (tmp_path / f"bench-{w}.json").write_text(json.dumps(
            {"kind": "bench", "device": "H100", "date": "d", "steps": 5, "runs": 2, "rounds": 1, "results": [result(w)]}))
    args = bench.parse_args(["--merge", str(tmp_path / "bench-alexnet-224.json"), str(tmp_path / "bench-alexnet-64.json"),
                             str(tmp_path / "bench-lstm-lm.json"), "--json", str(tmp_path / "all.json"),
                             "--markdown", str(tmp_path / "all.md")])
    assert bench.merge(args) == 0
    merged = json.loads((tmp_path / "all.json").read_text())
    assert [r["workload"] for r in merged["results"]] == ["alexnet-224", "alexnet-64"]
    md = (tmp_path / "all.md").read_text()
    assert "| alexnet-64 | tf32 | 10.0 images/s | 20.0 images/s | 0.50x | 1.00 GiB / n/a |" in md


def test_merge_of_profiles_and_of_nothing(tmp_path: Path) -> None:
    (tmp_path / "p.json").write_text(json.dumps({"kind": "profile", "device": "H100", "date": "d", "steps": 3,
                                                 "warmup": 3, "cells": [_cell("tinyflow")]}))
    args = bench.parse_args(["--profile", "--merge", str(tmp_path / "p.json"), str(tmp_path / "gone.json"),
                             "--markdown", str(tmp_path / "p.md")])
    assert bench.merge(args) == 0
    assert "| lstm-lm | tf32 | tinyflow |" in (tmp_path / "p.md").read_text()
    args = bench.parse_args(["--merge", str(tmp_path / "gone.json"), "--json", str(tmp_path / "none.json")])
    assert bench.merge(args) == 1  # nothing merged, but the file exists, empty
    assert json.loads((tmp_path / "none.json").read_text())["results"] == []
    (tmp_path / "b.json").write_text(json.dumps({"results": []}))
    args = bench.parse_args(["--merge", str(tmp_path / "p.json"), str(tmp_path / "b.json")])
    assert bench.merge(args) == 2  # bench and profile records do not mix


def test_a_cuda_graph_cell_says_so_in_json_and_markdown(tmp_path: Path) -> None:
    cell = {"workload": "alexnet-64", "precision": "bf16", "cuda_graph": True, "unit": "images/s", "tinyflow": 30.0,
            "torch": 20.0, "ratio": 1.5, "raw": {"tinyflow": {"peak_bytes": None}, "torch": {"peak_bytes": None}}}
    eager = {**cell, "cuda_graph": False}
    (tmp_path / "g.json").write_text(json.dumps({"kind": "bench", "device": "H100", "date": "d", "steps": 5, "runs": 2,
                                                 "rounds": 1, "results": [cell, eager]}))
    args = bench.parse_args(["--merge", str(tmp_path / "g.json"), "--json", str(tmp_path / "all.json"),
                             "--markdown", str(tmp_path / "all.md")])
    assert bench.merge(args) == 0
    assert json.loads((tmp_path / "all.json").read_text())["results"][0]["cuda_graph"] is True
    md = (tmp_path / "all.md").read_text()
    assert "| alexnet-64 | bf16 (graph) | 30.0 images/s | 20.0 images/s | 1.50x |" in md
    assert "| alexnet-64 | bf16 | 30.0 images/s |" in md
    assert bench.parse_args(["--cuda-graph"]).cuda_graph and not bench.parse_args([]).cuda_graph


def test_a_measurement_process_past_child_timeout_is_killed_and_its_cell_marked(tmp_path: Path) -> None:
    out = tmp_path / "b.json"
    done = subprocess.run([sys.executable, str(GPU / "bench_gpu.py"), "--device", "cpu", "--tiny", "--short",
                           "--workload", "lstm-lm", "--child-timeout", "0.01", "--json", str(out),
                           "--markdown", str(tmp_path / "b.md")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    (cell,) = json.loads(out.read_text())["results"]
    assert cell["tinyflow"]["error"].startswith("tinyflow lstm-lm fp32 timed out after 0.01s")
    assert "| lstm-lm | fp32 | timed out | timed out | | |" in (tmp_path / "b.md").read_text()


# ---- run_all.sh: syntax, budgets ---------------------------------------------------------------
def _plan(**env: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(RUN_ALL), "--plan"], capture_output=True, text=True, timeout=60,
                          env={**os.environ, **env}, cwd=ROOT)


def test_run_all_parses() -> None:
    assert subprocess.run(["bash", "-n", str(RUN_ALL)], capture_output=True).returncode == 0


def test_run_all_budgets_fit_in_eight_minutes() -> None:
    done = _plan()
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [line.split() for line in done.stdout.splitlines()]
    budgets = {w[1]: int(w[3]) for w in lines if w[0] == "phase" and w[2] == "budget"}
    kill_after = next(int(w[1]) for w in lines if w[0] == "kill_after")
    total = next(int(w[3]) for w in lines if w[0] == "total")
    final = next(int(w[1]) for w in lines if w[0] == "final_reserve")
    assert {"env", "gpu-tests", "bench-alexnet-224", "bench-alexnet-64", "bench-lstm-lm", "profile-alexnet-224",
            "profile-alexnet-64", "profile-lstm-lm"} <= set(budgets)
    assert ("cupy-strict" in budgets) == ("cupy_strict" in (ROOT / "pyproject.toml").read_text())
    worst = sum(b + kill_after for b in budgets.values())
    assert worst <= total  # every phase at its limit, and the kill after each, end by the deadline
    assert total + final < 480  # and the merges, summary and archive after it too


def test_run_all_cuda_graph_phase_is_planned_when_asked_and_must_fit() -> None:
    assert "graph-" not in _plan().stdout  # the default budgets leave no room for it
    done = _plan(GPU_GRAPH_WORKLOADS="alexnet-64", GPU_BENCH_WORKLOADS="alexnet-64 lstm-lm")
    assert done.returncode == 0 and "phase graph-alexnet-64 budget 40" in done.stdout
    assert _plan(GPU_GRAPH_WORKLOADS="alexnet-64").returncode != 0  # on top of every workload: over budget


def test_run_all_plan_refuses_budgets_over_eight_minutes() -> None:
    assert _plan(BUDGET_BENCH="200").returncode != 0
    assert _plan(TOTAL_BUDGET="600").returncode != 0
    assert _plan(TOTAL_BUDGET="465").returncode != 0  # no room left for the summary and the archive


# ---- one whole run on the CPU, with a hang -----------------------------------------------------
@pytest.mark.slow
def test_run_all_on_the_cpu_survives_a_hung_phase_and_leaves_at_most_eight_files(tmp_path: Path) -> None:
    """The env phase's Python hangs (a fake python that sleeps on `python -`): it is stopped at its
    limit, recorded as TIMEOUT, and the tests, the benchmark and the profile still run."""
    fake = tmp_path / "python"
    fake.write_text(f'#!/usr/bin/env bash\nif [ "${{1:-}}" = - ]; then sleep 600; fi\nexec {sys.executable} "$@"\n')
    fake.chmod(0o755)
    out = tmp_path / "out"
    env = {**os.environ, "PYTHON": str(fake), "GPU_BENCH_WORKLOADS": "lstm-lm",
           "GPU_BENCH_ARGS": "--device cpu --tiny --short", "GPU_TEST_PATHS": "tests/gpu/test_cuda_kernels.py",
           "STRICT_TEST_PATHS": "tests/gpu/test_cuda_kernels.py", "BUDGET_ENV": "6", "BUDGET_GPU_TESTS": "120",
           "BUDGET_CUPY_STRICT": "120", "BUDGET_BENCH": "150", "BUDGET_PROFILE": "240", "CHILD_TIMEOUT": "100",
           "BUDGET_TRAIN": "0"}
    plan = _plan(**env).stdout.split("total ")[1].split()[0]
    env["TOTAL_BUDGET"] = plan  # no spare time: the env phase gets its 6 s
    done = subprocess.run(["bash", str(RUN_ALL), str(out)], capture_output=True, text=True, timeout=900,
                          env=env, cwd=ROOT)
    files = sorted(p.name for p in out.iterdir())
    assert files == ["bench.json", "bench.md", "env.txt", "logs.tar.gz", "profile.json", "profile.md", "summary.md"]
    md = (out / "summary.md").read_text()
    assert "| env | TIMEOUT | 124 |" in md, md
    assert "| gpu-tests | ok | 0 |" in md and "skipped" in md
    assert "| bench-lstm-lm | ok | 0 |" in md and "fp32 " in md
    assert "| profile-lstm-lm | ok | 0 |" in md and "torch " in md and "% busy" in md
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]  # the gpu tests passed (skipped)
    assert json.loads((out / "profile.json").read_text())["cells"][1]["rows"]  # torch's ops on the CPU
