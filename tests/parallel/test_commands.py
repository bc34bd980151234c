"""`tinyflow bench allreduce`, `tinyflow launch` and `tinyflow train --nproc` end to end."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tinyflow.cli import main
from tinyflow.parallel.benchmark import parse_size, parse_sizes
from tinyflow.parallel.launch import find_mpirun

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_skip_without_mpi = pytest.mark.skipif(
    find_mpirun() is None or not __import__("importlib").util.find_spec("mpi4py"),
    reason="mpirun / mpi4py not installed",
)


def needs_mpi(test):  # noqa: ANN001, ANN201
    """Skip without MPI; mark as an mpirun test."""
    return pytest.mark.mpi(_skip_without_mpi(test))


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))


def test_parse_sizes():
    assert parse_size("4K") == 4096 and parse_size("64M") == 64 << 20 and parse_size("100") == 100
    assert parse_sizes("4K:32K") == [4096, 8192, 16384, 32768]
    assert parse_sizes("1M,3K") == [1 << 20, 3072]
    with pytest.raises(ValueError, match="bad size '4Q'"):
        parse_size("4Q")


def test_bench_allreduce_local_table_json_and_plot(tmp_path, capsys):
    code = main(["bench", "allreduce", "--nproc", "3", "--transport", "local", "--sizes", "4K:16K",
                 "--iters", "1", "--algorithms", "ring,naive", "--out", str(tmp_path)])
    assert code == 0
    out = capsys.readouterr().out
    assert "| size | count | algorithm | time (us) | algbw (GB/s) | busbw (GB/s) |" in out
    assert "ring / naive busbw at the largest size" in out
    rows = json.loads((tmp_path / "allreduce_np3_local.json").read_text())["rows"]
    assert [(r["size"], r["algorithm"]) for r in rows] == [
        (s, a) for s in (4096, 8192, 16384) for a in ("ring", "naive")
    ]
    for r in rows:
        assert r["correct"]
        np.testing.assert_allclose(r["busbw"], r["algbw"] * 2 * 2 / 3)
        np.testing.assert_allclose(r["algbw"], r["size"] / (r["time_us"] * 1e-6) / 1e9)
        expected_sent = r["size"] * 4 // 3 if r["algorithm"] == "ring" else 2 * r["size"]
        assert abs(r["bytes_sent"] - expected_sent) <= 8  # ring: 2(N-1)/N of the buffer
    png = (tmp_path / "allreduce_np3_local.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"


def test_bench_rejects_bad_sizes(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["bench", "allreduce", "--transport", "local", "--sizes", "big"])
    assert exit_.value.code == 2
    assert "argument --sizes: bad size 'big'" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["--algorithms", "ring,bogus"], "argument --algorithms: unknown 'bogus': choose a comma list of auto, ring, tree, naive, native"),
    (["--algorithms", ","], "argument --algorithms: ',' has an empty item: expected a comma list of names out of auto, ring, tree, naive, native, e.g. auto,ring"),
    (["--iters", "0"], "argument --iters: must be >= 1, got 0"),
    (["--warmup", "-1"], "argument --warmup: must be >= 0, got -1"),
    (["--nproc", "0"], "argument --nproc: must be >= 1, got 0"),
    (["--timeout", "0"], "argument --timeout: must be > 0, got 0"),
])
def test_bench_allreduce_checks_its_options_before_mpirun_starts(argv, message, capsys, monkeypatch):
    """Issue 12 (and 36: checked when parsed): one line, exit 2, and no worker started (mpirun would fail N times over)."""
    import tinyflow.parallel.launch as launch

    monkeypatch.setattr(launch, "mpirun_command", lambda *a, **k: pytest.fail("mpirun was started"))
    with pytest.raises(SystemExit) as exit_:
        main(["bench", "allreduce", "--nproc", "2", "--sizes", "4K", *argv])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.strip() == f"tinyflow bench allreduce: error: {message}", err


@needs_mpi
def test_bench_allreduce_under_mpirun(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "tinyflow.cli", "bench", "allreduce", "--nproc", "2", "--sizes", "64K",
         "--iters", "1", "--out", str(tmp_path)],
        env=_env(), capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = json.loads((tmp_path / "allreduce_np2_mpi.json").read_text())["rows"]
    assert {r["algorithm"] for r in rows} == {"ring", "tree", "naive", "native"}
    assert all(r["correct"] for r in rows)
    assert sum(line.startswith("| 64K |") for line in proc.stdout.splitlines()) == 4  # rank 0 only


@needs_mpi
def test_launch_runs_a_script_on_n_workers(tmp_path):
    script = tmp_path / "hello.py"
    script.write_text(
        "import numpy as np\n"
        "from tinyflow.parallel import world, allreduce\n"
        "w = world()\n"
        "buf = np.array([w.rank + 1.0])\n"
        "allreduce(buf, w.comm)\n"
        "print(f'rank {w.rank}/{w.size} sum {buf[0]:.0f}', flush=True)\n"
    )
    proc = subprocess.run([sys.executable, "-m", "tinyflow.cli", "launch", "--nproc", "3", str(script)],
                          env=_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(line for line in proc.stdout.splitlines() if line.startswith("rank")) == [
        "rank 0/3 sum 6", "rank 1/3 sum 6", "rank 2/3 sum 6"
    ]


@needs_mpi
@pytest.mark.slow
def test_train_nproc_2_writes_once_and_traces(tmp_path):
    from PIL import Image

    rng = np.random.default_rng(0)
    for c in ("a", "b"):
        (tmp_path / "data" / c).mkdir(parents=True)
        for i in range(6):
            Image.fromarray(rng.integers(0, 255, (72, 72, 3), dtype=np.uint8)).save(tmp_path / "data" / c / f"{i}.png")
    run_dir = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "tinyflow.cli", "train", "alexnet", "--data", str(tmp_path / "data"), "--epochs", "1",
         "--batch-size", "4", "--nproc", "2", "--workers", "0", "--quiet", "--checkpoint-dir", str(run_dir),
         "--trace", str(run_dir / "trace.json"), "--allreduce", "tree"],
        env=_env(), capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stderr.count("finished alexnet on 2 workers") == 1  # only rank 0 reports
    assert (run_dir / "last.ckpt").exists() and (run_dir / "metrics.jsonl").exists()
    steps = [json.loads(line) for line in (run_dir / "steps.jsonl").read_text().splitlines()]
    assert steps and all(s["compute_s"] > 0 and s["comm_s"] > 0 and s["bytes_sent"] > 0 for s in steps)
    events = json.loads((run_dir / "trace.json").read_text())["traceEvents"]
    for rank in (0, 1):
        names = {e["name"].split(" bucket")[0] for e in events if e["pid"] == rank}
        assert {"forward", "backward", "allreduce", "optimizer step"} <= names


@needs_mpi
def test_train_ranks_started_with_different_batch_sizes_fail_on_every_rank(tmp_path):
    """Issue 12: workers started with different --batch-size went out of step at the epoch's end
    (a wrong sum or a crash inside MPI); now every rank stops at once with one line naming both."""
    from tinyflow.parallel.launch import find_mpirun, mpirun_env

    def worker(batch: int) -> list[str]:
        return ["-n", "1", sys.executable, "-m", "tinyflow.cli", "train", "alexnet", "--epochs", "1",
                "--batch-size", str(batch), "--workers", "0", "--quiet", "--checkpoint-dir", str(tmp_path / "run")]

    cmd = [find_mpirun(), "--oversubscribe", "--bind-to", "none", *worker(8), ":", *worker(16)]
    proc = subprocess.run(cmd, env=mpirun_env(_env(), nproc=2), capture_output=True, text=True, timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    errors = [line for line in out.splitlines() if line.startswith("tinyflow train: error")]
    assert errors, out
    for line in errors:
        assert ("the workers' options differ between ranks: rank 0 has --batch-size 8, "
                "rank 1 has --batch-size 16; start every rank with the same --batch-size") in line, out
    assert "Traceback" not in out and "Segmentation" not in out, out
    assert not (tmp_path / "run" / "last.ckpt").exists()
