"""world(), is_main_process(), average_metrics and the mpirun command line."""
from __future__ import annotations

import os

import pytest

from tinyflow.parallel import average_metrics, is_main_process, run_local, set_world, world
from tinyflow.parallel.launch import mpirun_command, mpirun_env


def test_single_process_world():
    w = world()
    assert (w.rank, w.size, w.comm) == (0, 1, None) and is_main_process()
    assert w.device("cuda") == "cuda:0" and w.device() == "cpu"


def test_world_from_mpi_environment(monkeypatch):
    import sys

    wm = sys.modules["tinyflow.parallel.world"]  # the module (the package's `world` is the function)
    monkeypatch.setattr(wm, "_process_world", None)
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "3")
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "4")
    monkeypatch.setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1")
    w = wm.world()
    assert (w.rank, w.size, w.local_rank) == (3, 4, 1)
    assert not wm.is_main_process() and wm.launched_by_mpi() and w.device("cuda") == "cuda:1"
    monkeypatch.setattr(wm, "_process_world", None)


@pytest.mark.parametrize("env", [{"PMIX_RANK": "1", "PMIX_SIZE": "2"}, {"PMI_RANK": "1", "PMI_SIZE": "2"},
                                 {"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2"}])
def test_every_launcher_is_seen_alike(monkeypatch, env):
    """One test of 'started by an MPI launcher' (`tinyflow train` and `bench` ask it), agreeing with world()."""
    import sys

    from tinyflow.cli import build_parser
    from tinyflow.commands import train

    wm = sys.modules["tinyflow.parallel.world"]
    for var in ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMIX_SIZE", "PMI_RANK", "PMI_SIZE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(wm, "_process_world", None)
    assert not wm.launched_by_mpi()
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    monkeypatch.setattr(wm, "_process_world", None)
    assert wm.launched_by_mpi() and (wm.world().rank, wm.world().size) == (1, 2)
    relaunched = []
    monkeypatch.setattr(train, "_relaunch", lambda args: relaunched.append(args) or 0)
    monkeypatch.setattr("tinyflow.recipes.vision.run_train", lambda args: 7)
    args = build_parser().parse_args(["train", "alexnet", "--nproc", "2"])
    assert args.func(args) == 7 and not relaunched  # joins the world instead of starting workers
    monkeypatch.setattr(wm, "_process_world", None)


def test_set_world_per_thread_and_average_metrics():
    def fn(comm):
        set_world(comm)
        try:
            metrics = average_metrics({"loss": float(comm.rank), "acc": 1.0 + comm.rank}, world().comm)
            return is_main_process(), world().rank, metrics
        finally:
            set_world(None)

    results = run_local(fn, 3)
    assert [r[0] for r in results] == [True, False, False]
    assert [r[1] for r in results] == [0, 1, 2]
    for _, _, m in results:
        assert m == pytest.approx({"loss": 1.0, "acc": 2.0})
    assert average_metrics({"x": 2.0}, None) == {"x": 2.0}


def test_mpirun_command_line():
    cmd = mpirun_command(4, ["python", "-c", "pass"])
    assert cmd[1:5] == ["-n", "4", "--oversubscribe", "--bind-to"] and cmd[-3:] == ["python", "-c", "pass"]
    env = mpirun_env({})
    assert env["OMPI_ALLOW_RUN_AS_ROOT"] == "1" and env["TINYFLOW_LAUNCHED"] == "1"
    assert "OMP_NUM_THREADS" not in env
    threads = mpirun_env({}, nproc=2)["OPENBLAS_NUM_THREADS"]
    assert threads == str(max(1, (os.cpu_count() or 1) // 2))
    assert mpirun_env({"OMP_NUM_THREADS": "7"}, nproc=2)["OMP_NUM_THREADS"] == "7"  # the user's choice wins
    with pytest.raises(ValueError, match="--nproc must be >= 1"):
        mpirun_command(0, ["x"])
