"""Stop requests (issue 12, item 2): Ctrl-C, SIGTERM and SIGUSR1 stop a run with a checkpoint;
`tinyflow train --nproc N` passes Ctrl-C and SIGTERM on to every worker as SIGUSR1 (mpirun
forwards that one), the workers agree, rank 0 saves, the exit status is 130, and the run resumes
exactly."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import tinyflow as tf
import tinyflow.nn as nn
from tinyflow.data import DataLoader, Dataset
from tinyflow.parallel.launch import find_mpirun, mpirun_command, mpirun_env, run_workers
from tinyflow.recipes import checkpoint as ckpts
from tinyflow.recipes.loop import FitOptions, Hooks, InterruptGuard, fit, stop_signals_interrupt
from tinyflow.recipes.vision import CLASSIFICATION, classification_step

ROOT = Path(__file__).resolve().parents[2]
needs_mpi = pytest.mark.skipif(find_mpirun() is None or not __import__("importlib").util.find_spec("mpi4py"),
                               reason="mpirun / mpi4py not installed")


# ----------------------------------------------------------------------------- one process


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGUSR1])
def test_the_guard_takes_every_stop_signal_and_a_second_one_aborts(sig: int, capsys) -> None:
    before = signal.getsignal(sig)
    with InterruptGuard() as guard:
        os.kill(os.getpid(), sig)
        assert guard.interrupted
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), sig)
    assert signal.getsignal(sig) is before
    assert "saving a checkpoint, then stopping (Ctrl-C again to abort)" in capsys.readouterr().err


def test_outside_the_loop_sigterm_and_sigusr1_are_keyboard_interrupts() -> None:
    before = signal.getsignal(signal.SIGTERM)
    for sig in (signal.SIGTERM, signal.SIGUSR1):
        with pytest.raises(KeyboardInterrupt), stop_signals_interrupt():
            os.kill(os.getpid(), sig)
            time.sleep(1)  # the handler runs before this ends
    assert signal.getsignal(signal.SIGTERM) is before


class Blobs(Dataset):
    def __init__(self, n: int):
        rng = np.random.default_rng(0)
        self.y = rng.integers(0, 3, n)
        self.x = (rng.normal(size=(3, 6))[self.y] + rng.normal(size=(n, 6))).astype(np.float32)

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int):
        return self.x[i], int(self.y[i])


def _fit(run: Path, resume: bool = False, on_step=None):  # noqa: ANN001, ANN202
    tf.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    opt = tf.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    result = fit(model, DataLoader(Blobs(48), batch_size=6, shuffle=True, seed=1), classification_step, epochs=2,
                 optimizer=opt, metrics=CLASSIFICATION,
                 checkpoints=ckpts.Checkpointer(run, {"model_name": "m"}, resume=run / "last.ckpt" if resume else None),
                 options=FitOptions(progress=False, log_every=3), hooks=Hooks(on_step=on_step))
    return {k: v.numpy() for k, v in model.state_dict().items()}, result


def test_sigterm_saves_a_checkpoint_and_the_run_resumes_exactly(tmp_path: Path) -> None:
    ref, _ = _fit(tmp_path / "ref")

    def term(epoch: int, step: int, loss) -> None:  # noqa: ANN001
        if (epoch, step) == (1, 2):
            os.kill(os.getpid(), signal.SIGTERM)

    _, cut = _fit(tmp_path / "run", on_step=term)
    assert cut.interrupted and (cut.epoch, cut.step) == (1, 2)
    params, res = _fit(tmp_path / "run", resume=True)
    assert not res.interrupted
    for k, v in ref.items():
        np.testing.assert_array_equal(params[k], v, err_msg=k)


# ----------------------------------------------------------------------------- the launcher


FAKE_MPIRUN = textwrap.dedent("""
    import pathlib, signal, sys, time
    log = pathlib.Path(sys.argv[1])
    def usr1(signum, frame):
        with log.open("a") as f:
            f.write("USR1\\n")
        if sys.argv[2] == "exit":
            sys.exit(130)
    signal.signal(signal.SIGUSR1, usr1)
    log.write_text("ready\\n")
    time.sleep(30)
    sys.exit(3)
""")


def _signal_when(log: Path, lines: int, sig: int = signal.SIGINT) -> threading.Thread:
    """Send ``sig`` to this process once ``log`` has ``lines`` lines."""

    def wait_and_send() -> None:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if log.exists() and len(log.read_text().splitlines()) >= lines:
                os.kill(os.getpid(), sig)
                return
            time.sleep(0.02)

    thread = threading.Thread(target=wait_and_send, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_the_launcher_passes_a_stop_request_on_as_sigusr1(tmp_path: Path, sig: int, capsys) -> None:
    script, log = tmp_path / "fake_mpirun.py", tmp_path / "log"
    script.write_text(FAKE_MPIRUN)
    before = signal.getsignal(sig)
    _signal_when(log, 1, sig)
    started = time.monotonic()
    status = run_workers([sys.executable, str(script), str(log), "exit"], stop_message="stopping: saving")
    assert status == 130 and time.monotonic() - started < 15
    assert log.read_text().splitlines() == ["ready", "USR1"]
    assert "stopping: saving" in capsys.readouterr().err
    assert signal.getsignal(sig) is before


def test_a_second_ctrl_c_at_the_launcher_ends_the_workers(tmp_path: Path) -> None:
    script, log = tmp_path / "fake_mpirun.py", tmp_path / "log"
    script.write_text(FAKE_MPIRUN)
    _signal_when(log, 1)
    _signal_when(log, 2)  # after the first was passed on: the child ignores it, so this one must end it
    started = time.monotonic()
    assert run_workers([sys.executable, str(script), str(log), "stay"]) == 130  # SIGTERM killed it
    assert time.monotonic() - started < 15


@needs_mpi
@pytest.mark.mpi
def test_mpirun_forwards_the_stop_request_to_every_rank(tmp_path: Path) -> None:
    script, log = tmp_path / "rank.py", tmp_path / "log"
    script.write_text(textwrap.dedent(f"""
        import os, pathlib, signal, sys, time
        got = []
        signal.signal(signal.SIGUSR1, lambda s, f: got.append(s))
        rank = os.environ["OMPI_COMM_WORLD_RANK"]
        with open({str(log)!r}, "a") as f:
            f.write(f"ready {{rank}}\\n")
        deadline = time.monotonic() + 30
        while not got and time.monotonic() < deadline:
            time.sleep(0.02)
        with open({str(log)!r}, "a") as f:
            f.write(f"stopped {{rank}}\\n" if got else f"timeout {{rank}}\\n")
        sys.exit(130 if got else 3)
    """))
    _signal_when(log, 2)
    cmd = mpirun_command(2, [sys.executable, str(script)])
    assert run_workers(cmd, mpirun_env(nproc=2)) == 130
    assert sorted(log.read_text().splitlines()) == ["ready 0", "ready 1", "stopped 0", "stopped 1"]


@needs_mpi
@pytest.mark.mpi
@pytest.mark.slow
def test_ctrl_c_on_train_nproc_2_saves_and_resumes_exactly(tmp_path: Path) -> None:
    """The real thing: SIGINT to `tinyflow train --nproc 2` (~30 s: three two-worker runs)."""
    from tinyflow.data import synthetic

    data = synthetic.generate(tmp_path / "data", train_per_class=48, val_per_class=8, size=8,
                              classes=("circle", "stripes"))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))

    def train(run: Path, *extra: str) -> subprocess.Popen:
        argv = [sys.executable, "-m", "tinyflow.cli", "train", "resnet20", "--data", str(data), "--image-size", "8",
                "--nproc", "2", "--epochs", "2", "--batch-size", "4", "--workers", "0", "--log-every", "1",
                "--quiet", "--checkpoint-dir", str(run), *extra]
        return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    ref = train(tmp_path / "ref")
    assert ref.wait(timeout=300) == 0, ref.stdout.read()

    cut = train(tmp_path / "run")
    steps = tmp_path / "run" / "steps.jsonl"  # rank 0 writes a line per step (--log-every 1)
    deadline = time.monotonic() + 240
    while not (steps.exists() and len(steps.read_text().splitlines()) >= 3) and time.monotonic() < deadline:
        time.sleep(0.05)
    cut.send_signal(signal.SIGINT)
    assert cut.wait(timeout=300) == 130
    out = cut.stdout.read()
    assert out.count("stopping: every worker saves a checkpoint") == 1
    assert out.count("continue with --resume") == 1, out  # rank 0 alone saved
    state = ckpts.load_checkpoint(tmp_path / "run" / "last.ckpt")
    assert (state["epoch"], state["step"]) != (2, 0)  # stopped before the end

    again = train(tmp_path / "run", "--resume")
    assert again.wait(timeout=300) == 0, again.stdout.read()
    a = ckpts.load_checkpoint(tmp_path / "ref" / "last.ckpt")["model"]
    b = ckpts.load_checkpoint(tmp_path / "run" / "last.ckpt")["model"]
    for k in a:
        np.testing.assert_array_equal(np.asarray(b[k]), np.asarray(a[k]), err_msg=k)
