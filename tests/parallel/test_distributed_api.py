"""tinyflow.distributed (torch.distributed's API) and nn.parallel.DistributedDataParallel: a PyTorch
DDP script run on 1, 2 and 3 thread ranks trains exactly like one process on the full batch (checked
against torch), every collective gives the reduction numpy computes, and misuse fails clearly."""
from __future__ import annotations

import importlib
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tinyflow as tf
import tinyflow.distributed as dist
import tinyflow.nn as nn
import tinyflow.nn.functional as F
from tinyflow.nn.parallel import DistributedDataParallel as DDP
from tinyflow.parallel import run_local, set_world
from tinyflow.parallel.launch import find_mpirun, mpirun_command, mpirun_env
from tinyflow.utils.data import DataLoader, TensorDataset
from tinyflow.utils.data.distributed import DistributedSampler

IN, HIDDEN, OUT = 4, 6, 3
SAMPLES, GLOBAL_BATCH, EPOCHS = 24, 6, 2
LAUNCH_VARS = ("OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE", "WORLD_SIZE", "RANK", "MASTER_ADDR")
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


@pytest.fixture(autouse=True)
def _no_launcher(monkeypatch):
    """No launcher around the test process, and no process group left behind by a test."""
    for var in LAUNCH_VARS:
        monkeypatch.delenv(var, raising=False)
    yield
    if dist.is_initialized():
        dist.destroy_process_group()


def on_ranks(fn, world: int, init: bool = True, backend: str = "gloo"):
    """Run ``fn(rank)`` on ``world`` thread ranks, each inside its own default process group."""

    def rank_main(comm):
        set_world(comm)
        try:
            if init:
                dist.init_process_group(backend)
            return fn(comm.rank)
        finally:
            if dist.is_initialized():
                dist.destroy_process_group()
            set_world(None)

    return run_local(rank_main, world, timeout=20)


# ---- a PyTorch DDP script ---------------------------------------------------------------------------
def _data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    return rng.standard_normal((SAMPLES, IN)), rng.integers(0, OUT, size=SAMPLES)


def _initial_weights(seed: int, names_shapes) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {k: rng.standard_normal(shape) * 0.5 for k, shape in names_shapes}


def _mlp(seed: int) -> nn.Module:
    """A float64 MLP whose weights depend only on ``seed`` (no global RNG: thread ranks share it)."""
    model = nn.Sequential(nn.Linear(IN, HIDDEN), nn.Tanh(), nn.Linear(HIDDEN, OUT)).double()
    model.load_state_dict(_initial_weights(seed, [(k, v.shape) for k, v in model.state_dict().items()]))
    return model


def ddp_script(rank_seed: int) -> tuple[dict[str, np.ndarray], list[float]]:
    """Written as a torch DDP training script (tinyflow as torch); returns the final weights and the
    rank-averaged loss of every step."""
    torch = tf
    dist.init_process_group(backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    x, y = _data()
    dataset = TensorDataset(torch.tensor(x), torch.tensor(y))
    sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(dataset, batch_size=GLOBAL_BATCH // world, sampler=sampler)
    model = DDP(_mlp(seed=rank_seed))  # ranks start different: DDP broadcasts rank 0's weights
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    losses = []
    for epoch in range(EPOCHS):
        sampler.set_epoch(epoch)
        for inputs, targets in loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(inputs), targets)
            loss.backward()
            optimizer.step()
            logged = loss.detach().clone()
            dist.all_reduce(logged, op=dist.ReduceOp.AVG)
            losses.append(logged.item())
    state = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    dist.destroy_process_group()
    return state, losses


def torch_reference() -> tuple[dict[str, np.ndarray], list[float]]:
    """One torch process on the full batch, visiting the samples in the sampler's order."""
    torch = pytest.importorskip("torch")
    x, y = _data()
    model = torch.nn.Sequential(torch.nn.Linear(IN, HIDDEN), torch.nn.Tanh(), torch.nn.Linear(HIDDEN, OUT)).double()
    start = _initial_weights(0, [(k, tuple(v.shape)) for k, v in model.state_dict().items()])
    model.load_state_dict({k: torch.from_numpy(v) for k, v in start.items()})
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    losses = []
    for epoch in range(EPOCHS):
        order = DistributedSampler(range(SAMPLES), num_replicas=1, rank=0, shuffle=True, seed=0)
        order.set_epoch(epoch)
        order = list(order)
        for s in range(0, SAMPLES, GLOBAL_BATCH):
            idx = order[s : s + GLOBAL_BATCH]
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(torch.from_numpy(x[idx])), torch.from_numpy(y[idx]))
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    return {k: v.detach().numpy() for k, v in model.state_dict().items()}, losses


@pytest.mark.parametrize("world", [1, 2, 3])
def test_ddp_script_trains_like_one_process_on_the_full_batch(world):
    expected, expected_losses = torch_reference()
    results = on_ranks(lambda rank: ddp_script(rank_seed=rank), world, init=False)
    first, _ = results[0]
    assert sorted(first) == sorted(f"module.{k}" for k in expected)
    for rank, (state, losses) in enumerate(results):
        for name, value in state.items():
            np.testing.assert_array_equal(value, first[name], err_msg=f"rank {rank} differs from rank 0: {name}")
            np.testing.assert_allclose(value, expected[name.removeprefix("module.")], rtol=1e-10, atol=1e-12,
                                       err_msg=f"rank {rank} {name}")
        np.testing.assert_allclose(losses, expected_losses, rtol=1e-10, err_msg=f"rank {rank} losses")


def test_single_process_group_without_launcher():
    assert tf.distributed is dist and tf.nn.parallel.DistributedDataParallel is DDP
    dist.init_process_group("gloo")
    assert dist.is_initialized() and dist.get_rank() == 0 and dist.get_world_size() == 1
    assert dist.get_backend() == "gloo" and dist.group.WORLD.size() == 1
    t = tf.tensor([1.0, -2.0])
    work = dist.all_reduce(t, op=dist.ReduceOp.SUM, async_op=True)
    assert work.wait() and work.is_completed() and work.result()[0] is t
    assert t.tolist() == [1.0, -2.0]
    ddp = DDP(_mlp(seed=3), process_group=dist.group.WORLD)
    assert ddp.process_group.size() == 1 and ddp.process_group.backend == "gloo"
    assert list(ddp.state_dict()) == [f"module.{k}" for k in ddp.module.state_dict()]
    ddp.load_state_dict(ddp.state_dict())
    dist.destroy_process_group()
    assert not dist.is_initialized()


# ---- DDP semantics ----------------------------------------------------------------------------------
def _grads(model: nn.Module) -> dict[str, np.ndarray]:
    return {n: p.grad.numpy().copy() for n, p in model.named_parameters()}


def _local_grads(model: nn.Module, batches) -> dict[str, np.ndarray]:
    """Gradients of a plain copy of ``model`` after backward over ``batches`` (accumulated)."""
    copy = _mlp(seed=0)
    copy.load_state_dict(model.state_dict())
    for xb, yb in batches:
        F.cross_entropy(copy(tf.tensor(xb)), tf.tensor(yb)).backward()
    return _grads(copy)


def test_no_sync_accumulates_locally_then_averages():
    x, y = _data()

    def fn(rank):
        model = DDP(_mlp(seed=rank))
        mine = [(x[rank * 4 : rank * 4 + 2], y[rank * 4 : rank * 4 + 2]), (x[rank * 4 + 2 : rank * 4 + 4],
                                                                           y[rank * 4 + 2 : rank * 4 + 4])]
        local = _local_grads(model.module, mine)
        with model.no_sync():
            F.cross_entropy(model(tf.tensor(mine[0][0])), tf.tensor(mine[0][1])).backward()
        after_first = _grads(model.module)
        F.cross_entropy(model(tf.tensor(mine[1][0])), tf.tensor(mine[1][1])).backward()
        return local, after_first, _grads(model.module)

    results = on_ranks(fn, 2)
    for name in results[0][0]:
        assert not np.allclose(results[0][1][name], results[1][1][name])  # inside no_sync: still local
        mean = (results[0][0][name] + results[1][0][name]) / 2
        for rank in range(2):
            np.testing.assert_allclose(results[rank][2][name], mean, rtol=1e-12, atol=1e-14, err_msg=name)


class _TwoHeads(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(IN, OUT).double(), nn.Linear(IN, OUT).double()

    def forward(self, x, use_b: bool):
        return self.a(x) + self.b(x) if use_b else self.a(x)


def _two_heads() -> _TwoHeads:
    model = _TwoHeads()
    model.load_state_dict(_initial_weights(5, [(k, v.shape) for k, v in model.state_dict().items()]))
    return model


def test_find_unused_parameters_counts_them_as_zero():
    x = np.random.default_rng(1).standard_normal((4, IN))

    def fn(rank):
        model = DDP(_two_heads(), find_unused_parameters=True)
        plain = _two_heads()
        plain(tf.tensor(x[rank * 2 : rank * 2 + 2]), use_b=rank == 0).square().sum().backward()
        local = {n: (p.grad.numpy() if p.grad is not None else np.zeros(p.shape)) for n, p in plain.named_parameters()}
        for _ in range(2):  # a second step shows the first one finished
            model.module.zero_grad()
            model(tf.tensor(x[rank * 2 : rank * 2 + 2]), use_b=rank == 0).square().sum().backward()
        return local, _grads(model.module)

    (local0, got0), (local1, got1) = on_ranks(fn, 2)
    for name in local0:
        np.testing.assert_allclose(got0[name], (local0[name] + local1[name]) / 2, rtol=1e-12, err_msg=name)
        np.testing.assert_array_equal(got0[name], got1[name])


def test_unused_parameters_without_the_flag_are_torchs_error():
    x = tf.tensor(np.ones((2, IN)))

    def fn(rank):
        model = DDP(_two_heads())
        model(x, use_b=False).sum().backward()
        with pytest.raises(RuntimeError, match="find_unused_parameters=True"):
            model(x, use_b=False)
        model.synchronize()  # what lets the step finish (tinyflow.parallel.DataParallel's)
        model(x, use_b=True).sum().backward()
        return True

    assert on_ranks(fn, 2) == [True, True]


def test_ddp_broadcasts_buffers_and_keeps_torchs_attributes():
    def fn(rank):
        model = nn.Sequential(nn.Linear(IN, OUT), nn.BatchNorm1d(OUT)).double()
        ddp = DDP(model, bucket_cap_mb=1, device_ids=None)
        x = tf.tensor(np.random.default_rng(rank).standard_normal((3, IN)))
        ddp(x)
        first = model[1].running_mean.numpy().copy()  # from this rank's own batch
        ddp(x)  # starts from rank 0's statistics, as torch's DDP
        with tf.no_grad():
            batch_mean = model[0](x).mean(0).numpy()
        return ddp.bucket_bytes_cap, ddp.broadcast_buffers, first, model[1].running_mean.numpy().copy(), batch_mean

    results = on_ranks(fn, 2)
    assert results[0][:2] == (1024 * 1024, True)
    assert not np.allclose(results[0][2], results[1][2])
    for _, _, _, second, batch_mean in results:
        np.testing.assert_allclose(second, 0.9 * results[0][2] + 0.1 * batch_mean, rtol=1e-12)


# ---- collectives ------------------------------------------------------------------------------------
def _inputs(world: int, shape, dtype, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "b":
        return [rng.integers(0, 2, size=shape).astype(bool) for _ in range(world)]
    if np.dtype(dtype).kind in "iu":
        return [rng.integers(1, 5, size=shape).astype(dtype) for _ in range(world)]
    return [rng.uniform(0.5, 2.0, size=shape).astype(dtype) for _ in range(world)]


NUMPY_OPS = {
    "SUM": lambda a: a.sum(axis=0, dtype=a.dtype),
    "AVG": lambda a: a.mean(axis=0, dtype=a.dtype),
    "PRODUCT": lambda a: a.prod(axis=0, dtype=a.dtype),
    "MIN": lambda a: a.min(axis=0),
    "MAX": lambda a: a.max(axis=0),
    "BAND": lambda a: np.bitwise_and.reduce(a, axis=0),
    "BOR": lambda a: np.bitwise_or.reduce(a, axis=0),
    "BXOR": lambda a: np.bitwise_xor.reduce(a, axis=0),
}


@settings(max_examples=12, deadline=None)
@given(op=st.sampled_from(sorted(NUMPY_OPS)), world=st.integers(1, 3),
       shape=st.lists(st.integers(1, 4), min_size=0, max_size=3).map(tuple),
       dtype=st.sampled_from(["float64", "float32", "int64", "int32", "bool"]), seed=st.integers(0, 2**31 - 1))
def test_all_reduce_matches_numpy(op, world, shape, dtype, seed):
    bitwise = op in ("BAND", "BOR", "BXOR")
    if (dtype == "bool") != bitwise and not (bitwise and "int" in dtype):
        dtype = "bool" if bitwise else "float64"
    if op == "AVG" and "float" not in dtype:
        dtype = "float64"
    inputs = _inputs(world, shape, dtype, seed)
    expected = NUMPY_OPS[op](np.stack(inputs))

    def fn(rank):
        t = tf.tensor(inputs[rank].copy())
        version = t._version
        assert dist.all_reduce(t, op=getattr(dist.ReduceOp, op)) is None
        assert t._version > version  # an in-place edit, as torch counts it
        return t

    for t in on_ranks(fn, world):
        assert t.dtype == tf.tensor(inputs[0]).dtype and t.shape == tuple(shape)
        np.testing.assert_allclose(t.numpy(), expected, rtol=1e-6 if dtype == "float32" else 1e-12)


@pytest.mark.parametrize("world", [1, 2, 3])
def test_broadcast_reduce_and_gathers(world):
    def fn(rank):
        out = {}
        for src in range(world):
            t = tf.tensor(np.full((2, 3), rank, dtype=np.float32))
            work = dist.broadcast(t, src=src, async_op=True)
            assert work.wait() and work.is_completed()
            out[f"broadcast{src}"] = t.numpy().copy()
        t = tf.tensor(np.arange(3.0) + rank)
        dist.reduce(t, dst=0, op=dist.ReduceOp.MAX)
        out["reduce"] = t.numpy().copy()
        parts = [tf.zeros(2, dtype=tf.int64) for _ in range(world)]
        dist.all_gather(parts, tf.tensor([rank, 10 * rank]))
        out["all_gather"] = np.stack([p.numpy() for p in parts])
        stacked, flat = tf.zeros((world, 2)), tf.zeros(2 * world)
        dist.all_gather_into_tensor(stacked, tf.tensor([rank, -rank], dtype=tf.float32))
        dist.all_gather_into_tensor(flat, tf.tensor([rank, -rank], dtype=tf.float32))
        out["into"], out["into_flat"] = stacked.numpy(), flat.numpy()
        gathered = [tf.zeros(1) for _ in range(world)] if rank == 0 else None
        dist.gather(tf.tensor([float(rank * rank)]), gathered, dst=0)
        out["gather"] = None if gathered is None else [g.item() for g in gathered]
        mine = tf.zeros(2)
        dist.scatter(mine, [tf.tensor([float(r), 1.0]) for r in range(world)] if rank == world - 1 else None,
                     src=world - 1)
        out["scatter"] = mine.numpy()
        shard = tf.zeros(2)
        dist.reduce_scatter_tensor(shard, tf.tensor(np.arange(2.0 * world, dtype=np.float32) * (rank + 1)))
        out["reduce_scatter"] = shard.numpy()
        objs = [None] * world
        dist.all_gather_object(objs, {"rank": rank, "name": f"r{rank}"})
        out["objects"] = objs
        announced = [rank, "mine"]
        dist.broadcast_object_list(announced, src=world - 1)
        out["broadcast_objects"] = announced
        dist.barrier()
        return out

    results = on_ranks(fn, world)
    scale = world * (world + 1) / 2
    for rank, out in enumerate(results):
        for src in range(world):
            np.testing.assert_array_equal(out[f"broadcast{src}"], np.full((2, 3), src, np.float32))
        np.testing.assert_array_equal(out["reduce"], np.arange(3.0) + (world - 1 if rank == 0 else rank))  # dst 0
        np.testing.assert_array_equal(out["all_gather"], [[r, 10 * r] for r in range(world)])
        np.testing.assert_array_equal(out["into"], [[r, -r] for r in range(world)])
        np.testing.assert_array_equal(out["into_flat"], np.array([[r, -r] for r in range(world)]).reshape(-1))
        assert out["gather"] == ([float(r * r) for r in range(world)] if rank == 0 else None)
        np.testing.assert_array_equal(out["scatter"], [float(rank), 1.0])
        np.testing.assert_allclose(out["reduce_scatter"], np.arange(2.0 * world)[2 * rank : 2 * rank + 2] * scale)
        assert out["objects"] == [{"rank": r, "name": f"r{r}"} for r in range(world)]
        assert out["broadcast_objects"] == [world - 1, "mine"]


def test_send_recv_and_world_groups():
    def fn(rank):
        assert dist.new_group() is dist.group.WORLD and dist.new_group([1, 0]) is dist.group.WORLD
        assert dist.get_rank(dist.group.WORLD) == rank and dist.get_world_size(dist.group.WORLD) == 2
        assert dist.get_process_group_ranks(dist.group.WORLD) == [0, 1] and dist.get_node_local_rank() == rank
        t = tf.tensor([rank + 0.5, 2.0])
        if rank == 0:
            dist.send(t, dst=1)
            return None
        got = tf.zeros(2)
        assert dist.recv(got, src=0) == 0
        return got.tolist()

    assert on_ranks(fn, 2) == [None, [0.5, 2.0]]


# ---- errors -----------------------------------------------------------------------------------------
def test_uninitialized_group_is_torchs_error():
    message = "Default process group has not been initialized, please make sure to call init_process_group"
    assert dist.is_available() and not dist.is_initialized()
    for call in (dist.get_rank, dist.get_world_size, lambda: dist.all_reduce(tf.ones(2)), dist.barrier,
                 lambda: DDP(nn.Linear(2, 2))):
        with pytest.raises(ValueError, match=message):
            call()


def test_unsupported_ops_and_dtypes_are_clear_errors():
    dist.init_process_group()
    with pytest.raises(ValueError, match="PREMUL_SUM is not supported.*ReduceOp.SUM"):
        dist.all_reduce(tf.ones(2), op=dist.ReduceOp.PREMUL_SUM)
    with pytest.raises(TypeError, match="AVG needs a floating tensor, got int64"):
        dist.all_reduce(tf.tensor([1, 2]), op=dist.ReduceOp.AVG)
    with pytest.raises(TypeError, match="BXOR needs an integer or bool tensor, got float32"):
        dist.all_reduce(tf.tensor([1.0]), op=dist.ReduceOp.BXOR)
    with pytest.raises(TypeError, match="op must be a dist.ReduceOp"):
        dist.all_reduce(tf.ones(2), op="sum")
    with pytest.raises(TypeError, match="Expected parameter `tensor` of type torch.Tensor"):
        dist.all_reduce([tf.ones(2)])
    with pytest.raises(ValueError, match="initialize the default process group twice"):
        dist.init_process_group()


def test_bad_ranks_and_lists_are_clear_errors():
    def fn(rank):
        t = tf.ones(3)
        with pytest.raises(RuntimeError, match="broadcast: invalid root rank 2 .* of 2 rank"):
            dist.broadcast(t, src=2)
        with pytest.raises(RuntimeError, match="reduce: invalid root rank -1"):
            dist.reduce(t, dst=-1)
        with pytest.raises(RuntimeError, match="tensor_list has 3 tensor.*2 rank"):
            dist.all_gather([tf.ones(3)] * 3, t)
        with pytest.raises(RuntimeError, match=r"must hold world_size \(2\) times"):
            dist.all_gather_into_tensor(tf.zeros(5), t)
        if rank == 1:
            with pytest.raises(ValueError, match="``gather_list`` must NOT be specified on non-destination"):
                dist.gather(t, [tf.ones(3), tf.ones(3)], dst=0)
        else:
            with pytest.raises(ValueError, match="``gather_list`` must be specified on destination"):
                dist.gather(t, None, dst=0)
        with pytest.raises(NotImplementedError, match=r"only the whole world.*ranks \[1\] of 2"):
            dist.new_group([1])
        with pytest.raises(ValueError, match="rank 5 is out of range"):
            dist.new_group([0, 5])
        with pytest.raises(ValueError, match="src=None .* not supported"):
            dist.recv(t)
        return True

    assert on_ranks(fn, 2) == [True, True]


def test_launch_errors_say_how_to_launch(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")  # torchrun's env:// rendezvous, no MPI
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    with pytest.raises(RuntimeError, match="world_size 2 .* not started by an MPI launcher.*mpirun -n N"):
        dist.init_process_group("gloo", init_method="env://")
    monkeypatch.delenv("WORLD_SIZE")
    with pytest.raises(RuntimeError, match="tinyflow launch --nproc N"):
        dist.init_process_group("gloo", init_method="tcp://127.0.0.1:23456", world_size=4, rank=0)
    with pytest.raises(ValueError, match="rank=3 but the launcher made this process rank 0"):
        dist.init_process_group("gloo", rank=3)
    with pytest.raises(ValueError, match="Invalid backend: 'ucc'"):
        dist.init_process_group("ucc")
    assert not dist.is_initialized()
    if not dist.is_nccl_available():
        with pytest.raises(RuntimeError, match="backend 'nccl' needs CUDA.*backend='gloo'"):
            dist.init_process_group("nccl")
    dist.init_process_group("cpu:gloo,cuda:nccl")
    assert dist.get_backend() == "gloo"


def test_launcher_env_gives_torchruns_variables(monkeypatch):
    world_module = importlib.import_module("tinyflow.parallel.world")
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        monkeypatch.setenv(name, "")  # records the original, so that teardown restores it ...
        monkeypatch.delenv(name)  # ... after export_launcher_env wrote into os.environ
    assert dist.export_launcher_env() == {}  # not under a launcher: nothing set
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "3")
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "4")
    monkeypatch.setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1")
    monkeypatch.setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "7")  # the user's own value wins
    monkeypatch.setattr(world_module, "_process_world", None)
    try:
        assert dist.export_launcher_env() == {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2"}
        assert os.environ["LOCAL_RANK"] == "7"
    finally:
        world_module._process_world = None


def test_thread_ranks_without_set_world_are_told_to_call_it():
    def fn(comm):  # forgot set_world(comm): one rank makes a single-rank process group, the other fails
        try:
            dist.init_process_group("gloo")
        except ValueError as exc:
            return str(exc)
        return "initialized"

    outcomes = sorted(run_local(fn, 2, timeout=20))
    assert outcomes[0] == "initialized", outcomes
    assert "twice" in outcomes[1] and "set_world(comm)" in outcomes[1], outcomes
    assert dist.get_world_size() == 1  # the process-wide group the first rank made


def test_thread_ranks_world_size_must_match():
    def fn(rank):
        with pytest.raises(ValueError, match="world_size=3 but the launcher started 2"):
            dist.init_process_group("mpi", world_size=3)
        dist.init_process_group("MPI", world_size=2, rank=rank)
        return dist.get_backend(), dist.get_rank()

    assert on_ranks(fn, 2, init=False) == [("mpi", 0), ("mpi", 1)]


def test_ddp_argument_errors():
    dist.init_process_group()
    with pytest.raises(ValueError, match="device_ids can only be None or contain a single element"):
        DDP(nn.Linear(2, 2), device_ids=[0, 1])
    frozen = nn.Linear(2, 2).requires_grad_(False)
    with pytest.raises(RuntimeError, match="doesn't have any parameter that requires a gradient"):
        DDP(frozen)
    with pytest.raises(NotImplementedError, match="mixed_precision= is not implemented"):
        DDP(nn.Linear(2, 2), mixed_precision=object())
    with pytest.raises(NotImplementedError, match="register_comm_hook is not implemented"):
        DDP(nn.Linear(2, 2)).register_comm_hook(None, None)


# ---- a real mpirun ----------------------------------------------------------------------------------
MPI_SCRIPT = """
import os
import numpy as np
import tinyflow as torch
import tinyflow.distributed as dist
from tinyflow.nn.parallel import DistributedDataParallel as DDP

local_rank = int(os.environ["LOCAL_RANK"])  # torchrun's variables, set from mpirun's
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
assert (int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), local_rank) == (rank, world, rank)
model = torch.nn.Linear(3, 2).double()
rng = np.random.default_rng(rank)  # ranks start different: DDP broadcasts rank 0's weights
model.load_state_dict({k: rng.standard_normal(v.shape) for k, v in model.state_dict().items()})
ddp = DDP(model)
opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
x = torch.tensor(np.random.default_rng(100 + rank).standard_normal((4, 3)))
for _ in range(3):
    opt.zero_grad()
    ddp(x).square().mean().backward()
    opt.step()
total = torch.tensor([float(rank + 1)])
dist.all_reduce(total)
weights = [None] * world
dist.all_gather_object(weights, model.weight.detach().numpy().tolist())
assert all(w == weights[0] for w in weights), weights
print(f"OK {rank} of {world} sum {total.item():g}", flush=True)
dist.destroy_process_group()
"""


@pytest.mark.mpi
def test_ddp_script_under_mpirun(tmp_path):
    pytest.importorskip("mpi4py")
    if find_mpirun() is None:
        pytest.skip("mpirun not found")
    script = tmp_path / "ddp_script.py"
    script.write_text(MPI_SCRIPT)
    env = mpirun_env(nproc=2)
    env["PYTHONPATH"] = os.pathsep.join([ROOT, env.get("PYTHONPATH", "")])
    proc = subprocess.run(mpirun_command(2, [sys.executable, str(script)]), env=env, capture_output=True,
                          text=True, timeout=60)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    for rank in range(2):
        assert f"OK {rank} of 2 sum 3" in out, out
