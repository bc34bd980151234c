"""What one benchmark step is: a zoo model, a synthetic batch held in memory, one SGD step.

``Workload`` describes the inputs of a zoo model at a batch size (images, feature vectors or
token ids) and what the throughput counts (images/s, examples/s, tokens/s). ``tinyflow_step``
and ``torch_step`` build the model and a fixed random batch on a device and return a
``Step``: ``train()`` (forward, cross-entropy, backward, SGD-momentum update), plus
``forward()`` and ``forward_backward()`` for the per-phase breakdown. The data never comes
from a loader, so only the framework is timed.
"""
from __future__ import annotations

import ast
import dataclasses
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tinyflow.device import Device


def zoo() -> Any:
    """The model zoo, ``tinyflow.models`` (imported on first use)."""
    import tinyflow.models as models

    return models


def parse_overrides(items: list[str] | None) -> dict[str, Any]:
    """``["hidden_size=512", "dropout=0.1"]`` -> {"hidden_size": 512, "dropout": 0.1} (Python literals)."""
    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"bad --config {item!r}: use FIELD=VALUE, e.g. hidden_size=512")
        try:
            out[key.strip()] = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError):
            out[key.strip()] = value.strip()
    return out


@dataclass
class Workload:
    """The inputs of ``model`` at ``batch`` examples per worker and what a step counts."""

    model: str
    batch: int
    kind: str  # "image" (N, C, H, W) | "vector" (N, F) | "tokens" (T, N)
    shape: tuple[int, ...]  # one example: (C, H, W), (F,) or (T,)
    classes: int  # classes, or the vocabulary for tokens
    overrides: dict[str, Any] = field(default_factory=dict)

    @property
    def items_per_step(self) -> int:
        """Examples per step, or tokens (seq_len x batch) for a language model."""
        return self.batch * (self.shape[0] if self.kind == "tokens" else 1)

    @property
    def unit(self) -> str:
        return {"image": "images/s", "vector": "examples/s", "tokens": "tokens/s"}[self.kind]

    def config(self) -> Any:
        return zoo().get_config(self.model, **self.overrides)


# CIFAR ResNets take 32x32 images, torchvision's ResNet 224x224; AlexNets and the rest say in their config.
_DEFAULT_SIDE = {"ResNetCifar": 32, "ResNet": 224}


def workload(model: str, batch: int, overrides: dict[str, Any] | None = None,
             image_size: int | None = None) -> Workload:
    """The Workload of zoo model ``model`` (config fields overridden by ``overrides``)."""
    models = zoo()
    if model not in models.MODELS:
        raise ValueError(f"unknown model {model!r}: choose one of {', '.join(sorted(models.MODELS))}")
    if batch < 1:
        raise ValueError(f"batch size must be >= 1, got {batch}")
    overrides = dict(overrides or {})
    cfg = models.get_config(model, **overrides)
    builder = models.MODELS[model][1].__name__
    if hasattr(cfg, "vocab_size"):
        return Workload(model, batch, "tokens", (int(cfg.seq_len),), int(cfg.vocab_size), overrides)
    if hasattr(cfg, "sizes") and not hasattr(cfg, "in_channels"):
        return Workload(model, batch, "vector", (int(cfg.sizes[0]),), int(cfg.num_classes), overrides)
    side = image_size or getattr(cfg, "image_size", None) or _DEFAULT_SIDE.get(builder, 64)
    return Workload(model, batch, "image", (int(cfg.in_channels), int(side), int(side)), int(cfg.num_classes), overrides)


def synthetic_batch(w: Workload, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A fixed random batch: float32 inputs (token ids for a language model) and int64 targets."""
    rng = np.random.default_rng(seed)
    if w.kind == "tokens":
        steps = w.shape[0]
        x = rng.integers(0, w.classes, (steps, w.batch)).astype(np.int64)  # (T, N)
        y = rng.integers(0, w.classes, steps * w.batch).astype(np.int64)  # (T*N,)
        return x, y
    x = rng.standard_normal((w.batch, *w.shape)).astype(np.float32)  # (N, ...)
    return x, rng.integers(0, w.classes, w.batch).astype(np.int64)


@dataclass
class Step:
    """One framework's model on one batch: the three things a benchmark times."""

    model: Any
    train: Callable[[], None]  # forward, loss, backward, optimizer step
    forward: Callable[[], None]  # forward and loss (training mode, graph built)
    forward_backward: Callable[[], None]  # forward, loss, backward (no update)
    sync: Callable[[], None]  # wait for the device
    optimizer: Any = None
    params: int = 0


def tinyflow_step(w: Workload, device: str = "cpu", precision: str = "fp32",
                  wrap: Callable[[Any], Any] | None = None, seed: int = 0) -> Step:
    """The tinyflow model and batch on ``device``; ``wrap(model)`` e.g. puts DataParallel around it."""
    import tinyflow as tf
    import tinyflow.nn.functional as F
    from tinyflow.amp.autocast_mode import autocast

    tf.manual_seed(seed)
    model = zoo().get_model(w.model, **w.overrides).to(device)
    model.train()
    runner = wrap(model) if wrap is not None else model
    x_np, y_np = synthetic_batch(w, seed)
    x = tf.tensor(x_np, device=device)
    y = tf.tensor(y_np, dtype=tf.int64, device=device)
    opt = tf.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    half = {"bf16": "bf16", "fp16": "fp16"}.get(precision)

    def loss() -> Any:
        with autocast(half or "bf16", enabled=half is not None):
            out = runner(x)
        if w.kind == "tokens":
            out = out[0].reshape(-1, w.classes)  # (T*N, V)
        return F.cross_entropy(out.float(), y)

    def forward() -> None:
        loss()

    def forward_backward() -> None:
        opt.zero_grad()
        loss().backward()

    def train() -> None:
        forward_backward()
        opt.step()

    sync: Callable[[], None] = Device(device).synchronize

    params = sum(int(np.prod(p.shape)) for p in model.parameters())
    return Step(runner, train, forward, forward_backward, sync, opt, params)


def torch_step(w: Workload, device: str = "cpu", precision: str = "fp32", threads: int | None = None,
               seed: int = 0) -> Step:
    """The PyTorch twin (tinyflow.bench.torch_twins) on the same kind of batch and device."""
    import torch

    from tinyflow.bench.torch_twins import torch_model

    if threads:
        torch.set_num_threads(threads)
    torch.manual_seed(seed)
    dev = torch.device(device)
    model = torch_model(w.model, w.config()).to(dev)
    model.train()
    x_np, y_np = synthetic_batch(w, seed)
    x, y = torch.from_numpy(x_np).to(dev), torch.from_numpy(y_np).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    half = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)

    def loss() -> Any:
        with torch.autocast(dev.type, dtype=half or torch.bfloat16, enabled=half is not None):
            out = model(x)
        if w.kind == "tokens":
            out = out[0].reshape(-1, w.classes)
        return torch.nn.functional.cross_entropy(out.float(), y)

    def forward() -> None:
        loss()

    def forward_backward() -> None:
        opt.zero_grad(set_to_none=True)
        loss().backward()

    def train() -> None:
        forward_backward()
        opt.step()

    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    params = sum(p.numel() for p in model.parameters())
    return Step(model, train, forward, forward_backward, sync, opt, params)


# ---- what the scaling model needs: FLOPs, when gradient buckets are ready, the step's profile ----


def count_flops(model: Any, run: Callable[[], None]) -> float:
    """Forward multiply-adds x 2 of the convolutions, linear layers and recurrent layers in one
    ``run()`` (a forward), found with forward hooks from the weights and output shapes."""
    from tinyflow.nn.modules.module import Module

    total = [0.0]
    removers = []

    def hook(module: Any, inputs: Any, output: Any) -> None:
        out = output[0] if isinstance(output, tuple) else output
        params = dict(module.named_parameters(recurse=False))
        weight = params.get("weight")
        name = type(module).__name__
        if name == "Conv2d" and weight is not None:
            per_output = int(np.prod(weight.shape[1:]))  # (C_in/groups) * kh * kw
            total[0] += 2.0 * int(np.prod(out.shape)) * per_output
        elif name == "Linear" and weight is not None:
            total[0] += 2.0 * int(np.prod(out.shape)) * int(weight.shape[1])
        elif any(n.startswith("weight_ih") for n in params):
            per_token = sum(int(np.prod(p.shape)) for n, p in params.items() if n.startswith("weight_"))
            tokens = int(np.prod(out.shape[:-1]))  # (T, B, D*H) -> T*B
            total[0] += 2.0 * tokens * per_token

    for m in model.modules():
        if isinstance(m, Module):
            removers.append(m.register_forward_hook(hook))
    try:
        run()
    finally:
        for remove in removers:
            remove()
    return total[0]


def bucket_layout(model: Any, bucket_mb: float) -> list[list[Any]]:
    """The parameters of each DataParallel bucket, in launch order (DataParallel's own packing)."""
    from tinyflow.parallel.communicator import Communicator
    from tinyflow.parallel.data_parallel import DataParallel

    solo = DataParallel(model, Communicator(0, 1), algorithm="ring", bucket_mb=bucket_mb)
    try:
        return [[slot.param for slot in b.slots] for b in solo.buckets]
    finally:
        solo.close()


def ready_times(model: Any, buckets: list[list[Any]], forward_backward: Callable[[], Any],
                clock: Callable[[], float]) -> tuple[list[float], float, float]:
    """Run ``forward_backward`` once; (seconds after backward began at which each bucket's
    gradients were all ready, forward seconds, backward seconds).

    Backward begins when the forward's last module returns (a forward hook on the model)."""
    marks: dict[int, float] = {}
    removers = [p.register_post_accumulate_grad_hook(lambda p: marks.__setitem__(id(p), clock()))
                for group in buckets for p in group]
    t: dict[str, float] = {}
    removers.append(model.register_forward_pre_hook(lambda m, i: t.__setitem__("start", clock())))
    removers.append(model.register_forward_hook(lambda m, i, o: t.__setitem__("forward_end", clock())))
    try:
        forward_backward()
        end = clock()
    finally:
        for remove in removers:
            remove()
    begin = t["forward_end"]
    ready = [max(marks.get(id(p), end) for p in group) - begin for group in buckets]
    return ready, begin - t["start"], end - begin


def measure_profile(w: Any, spec: dict[str, Any]) -> dict[str, Any]:
    """Phase times, bucket sizes and ready times, and FLOPs of one worker's step (JSON record):
    step 1 of `tinyflow bench scaling` (tinyflow.bench.scaling), run in a worker process by
    tinyflow.bench.train (spec mode "profile"). Here, beside the pieces it uses, so that neither
    of those two files imports the other."""
    step = tinyflow_step(w, spec.get("device", "cpu"), spec.get("precision", "fp32"))
    buckets = bucket_layout(step.model, spec.get("bucket_mb", 25.0))
    sizes = [sum(int(p.numel()) * p.dtype.itemsize for p in group) for group in buckets]
    for _ in range(spec.get("warmup", 2)):
        step.train()
    forward, backward, update, ready = [], [], [], []

    def clock() -> float:
        step.sync()
        return time.perf_counter()

    for _ in range(max(1, spec.get("steps", 5))):
        r, f, b = ready_times(step.model, buckets, step.forward_backward, clock)
        start = clock()
        step.optimizer.step()
        update.append(clock() - start)
        forward.append(f)
        backward.append(b)
        ready.append(r)
    flops = 3.0 * count_flops(step.model, step.forward)  # backward costs about twice the forward
    return {"status": "ok", "forward_s": statistics.median(forward), "backward_s": statistics.median(backward),
            "update_s": statistics.median(update),
            "buckets": [[n, statistics.median(r[i] for r in ready)] for i, n in enumerate(sizes)],
            "items_per_step": w.items_per_step, "unit": w.unit, "flops": flops, "params": step.params,
            "threads": spec.get("threads")}


def describe_config(w: Workload) -> dict[str, Any]:
    cfg = w.config()
    return {k: v for k, v in dataclasses.asdict(cfg).items() if isinstance(v, (int, float, str, bool))}
