"""`tinyflow bench train` and `bench scaling`: the table's arithmetic, OOM cells, the PyTorch twins."""
from __future__ import annotations

import argparse
import json

import numpy as np
import pytest

from tinyflow.bench import scaling as bs
from tinyflow.bench import train as bt
from tinyflow.bench.workloads import count_flops, synthetic_batch, tinyflow_step, workload
from tinyflow.parallel.benchmark import busbw


def test_speedup_efficiency_and_busbw():
    assert bt.speedup(300.0, 100.0) == 3.0
    assert bt.efficiency(3.0, 4) == 0.75
    assert bt.speedup(None, 100.0) is None and bt.speedup(100.0, None) is None
    assert bt.efficiency(None, 4) is None
    assert busbw(1.0, 4) == pytest.approx(1.5)  # 2(N-1)/N
    assert busbw(2.0, 2) == pytest.approx(2.0) and busbw(2.0, 1) == 2.0


def test_cell_rate_spread_and_rounds():
    c = bt.Cell("tinyflow", "fp32", 2, 32, items_per_step=64, step_s=[0.5, 0.4, 0.8])
    assert c.rate == pytest.approx(64 / 0.5) and c.spread == pytest.approx((80.0, 160.0))
    c.merge(bt.Cell("tinyflow", "fp32", 2, 32, items_per_step=64, step_s=[0.2, 0.2], comm_s=0.1))
    assert c.step_s == [0.5, 0.4, 0.8, 0.2, 0.2] and c.rate == pytest.approx(64 / 0.4) and c.comm_s == 0.1
    c.merge(bt.Cell("tinyflow", "fp32", 2, 32, status="oom", message="out of memory"))
    assert not c.ok and c.label() == "OOM" and c.rate is None


def test_paired_ratio_cancels_load_between_rounds():
    # round 2 ran under load, 3x slower for both frameworks: per-round ratios stay 1.25
    ours = bt.Cell("tinyflow", "fp32", 1, 8, items_per_step=8, step_s=[1.0, 3.0, 1.0], round_step_s=[1.0, 3.0, 1.0])
    theirs = bt.Cell("torch", "fp32", 1, 8, items_per_step=8, step_s=[1.25, 3.75, 1.25],
                     round_step_s=[1.25, 3.75, 1.25])
    assert bt.paired_ratio(ours, theirs) == pytest.approx(1.25)
    assert bt.paired_ratio(ours, None) is None


def _fake_runner(oom_batch: int, calls: list):
    """Throughput that grows with batch and workers; batch ``oom_batch`` runs out of memory."""
    def run(spec, workers, timeout):
        calls.append((spec["framework"], workers, spec["batch"], spec["threads"]))
        if spec["batch"] == oom_batch:
            return {"status": "oom", "message": f"fake out-of-memory at batch size {oom_batch}"}
        per_step = 0.001 * spec["batch"] * (1.25 if workers > 1 else 1.0) * (1.1 if spec["framework"] == "torch" else 1)
        return {"status": "ok", "step_s": [per_step] * 3, "forward_s": [per_step / 3] * 3,
                "fwd_bwd_s": [per_step * 0.9] * 3, "items_per_step": spec["batch"] * workers,
                "unit": "images/s", "comm_s": 0.002 if workers > 1 else None,
                "exposed_s": 0.001 if workers > 1 else None, "algorithms": ["ring"] if workers > 1 else []}
    return run


def test_oom_is_marked_in_its_cell_and_the_sweep_goes_on():
    settings = bt.BenchSettings(model="alexnet", batch_sizes=[16, 32, 64], workers=[1, 2], precisions=["fp32"],
                                compare=["torch"], breakdown=True, threads=1)
    calls: list = []
    cells = bt.run_bench(settings, runner=_fake_runner(32, calls))
    # every cell was tried once (torch only with one worker), the OOM did not stop the others
    assert sorted(calls) == sorted([("tinyflow", n, b, 1) for n in (1, 2) for b in (16, 32, 64)]
                                   + [("torch", 1, b, 1) for b in (16, 32, 64)])
    by = {(c.framework, c.workers, c.batch): c for c in cells}
    assert by[("tinyflow", 1, 32)].status == "oom" and by[("tinyflow", 2, 32)].status == "oom"
    assert by[("tinyflow", 1, 64)].ok and by[("tinyflow", 2, 64)].ok

    table = bt.format_tables(cells, settings)
    throughput = table.split("per batch")[0]  # the first table; the breakdown follows
    lines = {line.split("|")[1].strip(): line for line in throughput.splitlines() if line.startswith("| ")}
    assert "| 32 | OOM | OOM |" in lines["32"]
    # 2 workers: 2 x batch in 1.25x the time -> speedup 1.6x, efficiency 80%; PyTorch 1.1x slower
    assert "| 1.60x | 80% |" in lines["16"] and lines["16"].rstrip().endswith("| 1.10x |")
    assert "fake out-of-memory at batch size 32" in table
    assert "| 64 | tinyflow | 2 | 26.7 | 72.0 | 80.0 | 2.0 | 1.0 | ring |" in table

    record = json.loads(bt.to_json(cells, settings, model="alexnet"))
    two = [r for r in record["cells"] if r["workers"] == 2 and r["batch"] == 16][0]
    assert two["speedup"] == pytest.approx(1.6) and two["efficiency"] == pytest.approx(0.8)
    assert [r["status"] for r in record["cells"] if r["batch"] == 32] == ["oom"] * 3


def test_a_failed_cell_is_not_retried_in_later_rounds(tmp_path):
    settings = bt.BenchSettings(model="alexnet", batch_sizes=[8, 32], workers=[1], precisions=["fp32"], rounds=3,
                                threads=1)
    calls: list = []
    cells = bt.run_bench(settings, runner=_fake_runner(32, calls))
    assert [c[2] for c in calls].count(32) == 1 and [c[2] for c in calls].count(8) == 3
    assert len([c for c in cells if c.ok][0].step_s) == 9  # 3 rounds x 3 runs
    bt.plot(cells, settings, str(tmp_path / "t.png"))
    assert (tmp_path / "t.png").read_bytes()[:4] == b"\x89PNG"


def test_workloads_of_the_zoo():
    assert workload("alexnet", 8).shape == (3, 64, 64) and workload("alexnet", 8).unit == "images/s"
    assert workload("resnet20", 8).shape == (3, 32, 32)
    assert workload("resnet18", 8, image_size=64).shape == (3, 64, 64)
    lm = workload("lstm-lm", 4, {"seq_len": 16})
    assert lm.kind == "tokens" and lm.items_per_step == 64 and lm.unit == "tokens/s"
    assert workload("fcn-r", 4).shape == (784,)
    x, y = synthetic_batch(lm)
    assert x.shape == (16, 4) and y.shape == (64,)
    with pytest.raises(ValueError, match="unknown model"):
        workload("vgg", 4)


TINY = {  # small configs of every zoo architecture, for the twins
    "alexnet": {"channels": (8, 8, 8, 8, 8), "hidden": 16, "num_classes": 5},
    "alexnet-2012": {"channels": (8, 8, 8, 8, 8), "hidden": 16, "num_classes": 5, "image_size": 96},
    "resnet20": {"num_classes": 4},
    "resnet18": {"widths": (8, 8, 16, 16), "num_classes": 4},
    "fcn-r": {"sizes": (12, 16, 5)},
    "lstm-lm": {"vocab_size": 11, "embedding_dim": 6, "hidden_size": 8, "seq_len": 5},
}


@pytest.mark.parametrize("name", sorted(TINY))
def test_torch_twin_computes_the_same_function(name):
    torch = pytest.importorskip("torch")
    import tinyflow as tf
    from tinyflow.bench.torch_twins import load_tinyflow_state, torch_model

    w = workload(name, 2, TINY[name], image_size=32 if name == "resnet18" else None)
    step = tinyflow_step(w)
    twin = torch_model(name, w.config())
    assert load_tinyflow_state(twin, step.model) == []
    assert sum(p.numel() for p in twin.parameters()) == step.params
    x, _ = synthetic_batch(w)
    step.model.eval()
    twin.eval()
    with tf.no_grad():
        ours = step.model(tf.tensor(x))
    with torch.no_grad():
        theirs = twin(torch.from_numpy(x))
    if w.kind == "tokens":
        ours, theirs = ours[0], theirs[0]
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-4, atol=1e-5)
    assert count_flops(step.model, step.forward) > 0


def test_flops_of_a_linear_net_by_hand():
    w = workload("fcn-r", 3, {"sizes": (12, 16, 5)})
    step = tinyflow_step(w)
    assert count_flops(step.model, step.forward) == 2 * 3 * (12 * 16 + 16 * 5)


def test_scaling_from_a_profile_with_a_preset_link():
    record = {"status": "ok", "forward_s": 0.01, "backward_s": 0.02, "update_s": 0.002,
              "buckets": [[8_000_000, 0.005], [40_000_000, 0.02]], "items_per_step": 32, "unit": "images/s",
              "flops": 3.2e11, "params": 12_000_000}
    settings = bs.ScalingSettings(model="alexnet", batch=32, workers=[1, 2, 8, 64], link="pcie3",
                                  algorithms=["ring", "naive"], tflops=10.0)
    result = bs.run_scaling(settings, runner=lambda spec, n, timeout: record, log=lambda line: None)
    assert result.profile.compute_s == pytest.approx(3.2e11 / 10e12)  # compute priced at 10 TFLOPS
    ring, naive = result.predictions["ring"], result.predictions["naive"]
    assert ring[0].speedup == 1.0 and naive[0].speedup == 1.0
    assert ring[-1].efficiency > naive[-1].efficiency  # host aggregation stops scaling
    assert naive[-1].speedup < naive[-2].speedup * 8 / 8 + 1  # naive hardly gains from 8 to 64
    text = bs.format_result(result, settings)
    assert "| 64 |" in text and "ring speedup" in text and "MB of gradients to all-reduce per GFLOP" in text


def test_scaling_validation_reports_the_error(monkeypatch):
    profile = {"status": "ok", "forward_s": 0.01, "backward_s": 0.02, "update_s": 0.0,
               "buckets": [[1_000_000, 0.02]], "items_per_step": 8, "unit": "images/s", "flops": 1e9,
               "params": 250_000}

    def runner(spec, workers, timeout):
        if spec.get("mode") == "profile":
            return profile
        step = 0.03 * (1.0 if workers == 1 else 2.2)  # measured: a bit worse than the 2x of halved cores
        return {"status": "ok", "step_s": [step] * 3, "items_per_step": 8 * workers, "unit": "images/s"}

    def links(files, log=None):
        from tinyflow.parallel.cost_model import Link

        return {a: Link(a, 1e-4, 1e-9) for a in ("ring", "tree", "naive", "native")}, ["fake.json"]

    monkeypatch.setattr(bs, "measured_links", links)
    settings = bs.ScalingSettings(model="alexnet", batch=8, workers=[1, 2], link="measured", algorithms=["ring"],
                                  validate=[2], cores=2)
    result = bs.run_scaling(settings, runner=runner, log=lambda line: None)
    assert result.measured[("ring", 2)] == pytest.approx(2 / 2.2)
    text = bs.format_result(result, settings)
    assert "| 2 | ring |" in text and "prediction off by" in text


def test_bench_train_command_end_to_end_with_a_fake_oom(tmp_path, monkeypatch, capsys):
    from tinyflow.commands import bench

    monkeypatch.setenv("TINYFLOW_BENCH_FAKE_OOM", "4")
    parser = argparse.ArgumentParser()
    bench.register(parser.add_subparsers())
    args = parser.parse_args(["bench", "train", "fcn-r", "--config", "sizes=(12,16,5)", "--batch-sizes", "2,4",
                              "--steps", "1", "--runs", "1", "--warmup", "0", "--breakdown", "--out", str(tmp_path)])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "| 4 | OOM |" in out and "examples/s" in out
    record = json.loads((tmp_path / "train_fcn-r_cpu.json").read_text())
    assert [c["status"] for c in record["cells"]] == ["ok", "oom"]
    assert (tmp_path / "train_fcn-r_cpu.png").exists() and (tmp_path / "train_fcn-r_cpu.md").exists()
