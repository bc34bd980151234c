"""Train an LSTM language model: the recipe behind `tinyflow train lstm-lm [--text FILE]`.

The text (``--text``, or by default the source of some Python standard library modules read
from the running interpreter, so it exists on every machine) becomes character-level token ids
(word level when ``args.level == "word"``), 90 / 10 train / validation. Model sizes are the
``lstm-lm`` preset, overridden by any of ``MODEL_OPTIONS`` present on ``args``. Training walks B parallel
streams in segments of ``--seq-len`` steps (truncated BPTT, the hidden state carried across
segments and detached), clips the gradient norm and reports the perplexity exp(mean loss) per
epoch. No segment reads the device: the losses are read once every ``--log-every`` segments
(``StepLog``). The progress bar, metrics log and plot, checkpoints, resume and Ctrl-C handling
are the shared harness of ``tinyflow.recipes.common``. `tinyflow sample` generates text from a checkpoint.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from tinyflow.data.text import Corpus, TruncatedBPTT, Vocab, batchify, default_corpus_text, detokenize
from tinyflow.recipes.common import (
    BEST,
    LAST,
    LOG_EVERY,
    CheckpointMismatchError,
    InterruptGuard,
    MetricsLog,
    Progress,
    StepLog,
    load_checkpoint,
    load_model_state,
    make_optimizer,
    resume_path,
    rng_state,
    save_checkpoint,
    set_rng_state,
)
from tinyflow.recipes.common import (
    fill_defaults as common_fill_defaults,
)

MODEL_NAME = "lstm-lm"
DEFAULTS = {"epochs": 3, "batch_size": 32, "optimizer": "adam", "clip": 1.0, "momentum": 0.9, "weight_decay": 0.0}
DEFAULT_LR = {"adam": 2e-3, "sgd": 1.0}
DEFAULT_CORPUS_CHARS = 200_000
VALID_BATCH = 8


def fill_defaults(args: argparse.Namespace) -> argparse.Namespace:
    """Options left at None (shared with the image recipes) get their language-model defaults."""
    common_fill_defaults(args, DEFAULTS, DEFAULT_LR)
    if getattr(args, "checkpoint_dir", None) is None:
        args.checkpoint_dir = os.path.join("runs", MODEL_NAME)
    return args


def read_text(path: str | None) -> tuple[str, str]:
    """The training text and a description of where it came from."""
    if path is None:
        return default_corpus_text(DEFAULT_CORPUS_CHARS), "the embedded corpus (Python standard library source)"
    if not os.path.isfile(path):
        raise FileNotFoundError(f"--text {path!r} does not exist or is not a file")
    text = Path(path).read_text(encoding="utf-8", errors="replace")
    if not text.strip():
        raise ValueError(f"--text {path!r} is empty: a language model needs some text")
    return text, path


def evaluate_loss(model: Any, streams: np.ndarray, seq_len: int, device: Any = None) -> float:
    """Mean next-token cross-entropy of ``model`` over (N, B) streams (eval mode, no grad).

    The sum stays on the device until the end: one host read per evaluation.
    """
    import tinyflow
    import tinyflow.nn.functional as F
    from tinyflow.device import to_host

    was_training = model.training
    model.eval()
    total: Any = None  # float64 sum of loss * tokens, on the device
    count = 0
    bptt = TruncatedBPTT(streams, seq_len, device=device)
    try:
        with tinyflow.no_grad():
            for x, y in bptt:
                logits, bptt.state = model(x, bptt.state)  # (T, B, V)
                loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
                part = loss.data.astype(np.float64) * y.numel()
                total = part if total is None else total + part
                count += y.numel()
    finally:
        model.train(was_training)
    return (float(to_host(total, "evaluate_loss")) if total is not None else 0.0) / max(count, 1)


def _state_arrays(state: Any) -> list[np.ndarray] | None:
    return None if state is None else [s.numpy() for s in state]


def _state_tensors(arrays: Any, device: Any) -> Any:
    import tinyflow

    return None if arrays is None else tuple(tinyflow.tensor(a, device=device) for a in arrays)


MODEL_OPTIONS = ("seq_len", "embedding_dim", "hidden_size", "num_layers", "dropout", "tie_weights")


def train_language_model(args: argparse.Namespace, text: str, source: str, progress: bool = True,
                         guard: InterruptGuard | None = None,
                         on_step: Callable[[int, int, Any], None] | None = None) -> dict[str, Any]:  # fmt: skip
    """Build the corpus and model, train for ``args.epochs`` and return the last epoch's record.

    Model sizes come from the ``lstm-lm`` preset, overridden by any of ``MODEL_OPTIONS`` set on
    ``args``. A Ctrl-C (or ``guard.request()``) saves a checkpoint after the current segment and
    returns ``{"interrupted": True, ...}``; ``on_step(epoch, step, loss)`` runs after each step
    (the loss a 0-d Tensor on the device). The losses are read to the host every
    ``args.log_every`` segments and at the end of the epoch (see ``tinyflow.recipes.common.fit``:
    a non-finite loss is found there, up to ``log_every - 1`` segments late).
    """
    import models
    import tinyflow
    import tinyflow.nn.functional as F
    from tinyflow.amp import GradScaler, autocast
    from tinyflow.optim import clip_grad_norm_

    level = getattr(args, "level", None) or "char"
    device = getattr(args, "device", None) or "cpu"
    amp = getattr(args, "amp", None)
    scaler = GradScaler(enabled=amp == "fp16")
    ckpt_dir = Path(args.checkpoint_dir)
    resume = resume_path(args)
    state: dict[str, Any] | None = None
    if resume is not None:
        state = load_checkpoint(resume, MODEL_NAME)
        vocab, level = Vocab(state["vocab"]), state["level"]
        config = models.get_config(MODEL_NAME, **state["model_config"])
    else:
        vocab = None
        config = None
    corpus = Corpus(text, level=level, vocab=vocab, valid_fraction=0.1)
    if config is None:
        overrides: dict[str, Any] = {"vocab_size": len(corpus.vocab)}
        overrides.update({k: getattr(args, k) for k in MODEL_OPTIONS if getattr(args, k, None) is not None})
        config = models.get_config(MODEL_NAME, **overrides)
    seq_len = config.seq_len
    train_streams = batchify(corpus.train, args.batch_size)  # (N, B)
    valid_batch = min(VALID_BATCH, len(corpus.valid) // 2) if len(corpus.valid) >= 4 else 0
    valid_streams = batchify(corpus.valid, valid_batch) if valid_batch else None

    tinyflow.manual_seed(args.seed)
    model = models.build(MODEL_NAME, config).to(device)
    optimizer = make_optimizer(args.optimizer, list(model.parameters()), args.lr, args.momentum, args.weight_decay)
    meta = {"model_name": MODEL_NAME, "model_config": asdict(config), "vocab": corpus.vocab.itos,
            "level": level, "seed": args.seed, "source": source}  # fmt: skip
    bptt = TruncatedBPTT(train_streams, seq_len, device=device)
    start_epoch, start_step, history, best = 0, 0, [], math.inf
    sums = {"loss": 0.0, "tokens": 0}
    steplog = StepLog(getattr(args, "log_every", None) or LOG_EVERY, 1)  # each segment's loss, on the device
    sizes: list[int] = []  # tokens of each segment in steplog
    carried = None
    if state is not None:
        load_model_state(model, state["model"], os.fspath(resume))
        optimizer.load_state_dict(state["optimizer"])
        set_rng_state(state["rng"])
        if state.get("scaler") is not None:
            scaler.load_state_dict(state["scaler"])
        start_epoch, start_step, history = state["epoch"], state["step"], list(state["history"])
        best, sums = state["best"], dict(state["sums"])
        carried = _state_tensors(state.get("hidden"), device)
        print(f"resuming from {resume} at epoch {start_epoch + 1}, segment {start_step + 1}", file=sys.stderr)

    ckpt_dir.mkdir(parents=True, exist_ok=True)
    log = MetricsLog(ckpt_dir, records=history)
    print(f"data: {source}: {len(corpus.train)} train / {len(corpus.valid)} valid {level} tokens, vocabulary "
          f"{len(corpus.vocab)}; model: {config}", file=sys.stderr)  # fmt: skip

    def checkpoint(epoch: int, step: int, hidden: Any, name: str = LAST) -> str:
        path = ckpt_dir / name
        save_checkpoint(path, {**meta, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                               "rng": rng_state(), "epoch": epoch, "step": step, "sums": dict(sums),
                               "history": log.records, "best": best, "hidden": _state_arrays(hidden),
                               "scaler": scaler.state_dict() if scaler.enabled else None})  # fmt: skip
        return str(path)

    def log_point(epoch: int, step: int, bar: Progress) -> None:
        """Read the segments since the last log point (one host read) into the sums and the bar."""
        rows = steplog.read()  # (k, 1)
        first = step - len(rows)
        for i, (value, n) in enumerate(zip(rows[:, 0].tolist(), sizes)):
            if not math.isfinite(value):
                bad = first + i + 1
                late = (f" (found at segment {step}: the updates of segments {bad}-{step} are applied in memory; "
                        "the checkpoints on disk predate them)") if bad < step else ""
                raise FloatingPointError(f"the training loss became {value} at epoch {epoch + 1}, "
                                         f"segment {bad}: lower --lr or --clip{late}")  # fmt: skip
            sums["loss"] += value * n
            sums["tokens"] += n
        if len(rows):
            bar.update(sum(sizes), float(rows[:, 0].mean()), steps=len(rows))
        sizes.clear()

    record: dict[str, Any] = {}
    guard = guard or InterruptGuard()
    with guard:
        for epoch in range(start_epoch, args.epochs):
            model.train()
            bar = Progress(len(bptt), start_step, f"epoch {epoch + 1}/{args.epochs}", unit="tok", enabled=progress)
            t0 = time.perf_counter()
            step = 0
            try:
                for x, y in bptt:
                    if step < start_step:  # resuming mid-epoch: skip the segments already trained
                        step += 1
                        continue
                    if step == start_step and carried is not None:
                        bptt.state = carried
                    with autocast(amp or "bf16", enabled=amp is not None):
                        logits, bptt.state = model(x, bptt.state)  # (T, B, V); the state is stored detached
                    logits = logits.float()  # the loss is always computed in float32
                    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
                    optimizer.zero_grad()
                    scaler.scale(loss).backward()
                    if args.clip and args.clip > 0:
                        scaler.unscale_(optimizer)  # clip the true gradients, not the scaled ones
                        clip_grad_norm_(model.parameters(), args.clip)
                    scaler.step(optimizer)  # = optimizer.step() without fp16
                    scaler.update()
                    full = steplog.add(loss)  # stays on the device: nothing read here
                    sizes.append(y.numel())
                    step += 1
                    if full or step == len(bptt):
                        log_point(epoch, step, bar)
                    if on_step is not None:
                        on_step(epoch, step, loss.detach())
                    if guard.interrupted:
                        break
                log_point(epoch, step, bar)  # segments after the last log point (Ctrl-C)
            finally:
                bar.close()
            if guard.interrupted:
                path = checkpoint(epoch, step, bptt.state)
                print(f"saved {path} (epoch {epoch + 1}, segment {step}); continue with --resume", file=sys.stderr)
                return {"interrupted": True, "checkpoint": path}
            elapsed = time.perf_counter() - t0
            train_loss = sums["loss"] / max(sums["tokens"], 1)
            record = {"epoch": epoch + 1, "train_loss": train_loss, "train_ppl": math.exp(min(train_loss, 50))}
            if valid_streams is not None:
                val_loss = evaluate_loss(model, valid_streams, seq_len, device)
                record.update({"val_loss": val_loss, "val_ppl": math.exp(min(val_loss, 50))})
            record.update({"lr": args.lr, "time_s": round(elapsed, 3),
                           "tokens_per_s": round(sums["tokens"] / max(elapsed, 1e-9), 1)})  # fmt: skip
            log.append(record)
            print("  ".join(f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}" for k, v in record.items()),
                  file=sys.stderr, flush=True)  # fmt: skip
            sums, start_step, carried = {"loss": 0.0, "tokens": 0}, 0, None
            score = record.get("val_loss", train_loss)
            improved = score < best
            best = min(best, score)
            checkpoint(epoch + 1, 0, None)
            if improved:
                checkpoint(epoch + 1, 0, None, BEST)
    return record


def run_train(args: argparse.Namespace) -> int:
    """`tinyflow train lstm-lm`: returns the exit status (0 done, 2 bad input, 130 interrupted)."""
    fill_defaults(args)
    try:
        text, source = read_text(getattr(args, "text", None))
        record = train_language_model(args, text, source, progress=not getattr(args, "quiet", False))
    except (CheckpointMismatchError, FileNotFoundError, ValueError) as exc:
        print(f"tinyflow train: error: {exc}", file=sys.stderr)
        return 2
    except MemoryError:
        print(f"tinyflow train: error: out of memory at batch size {args.batch_size}: try a smaller --batch-size",
              file=sys.stderr)  # fmt: skip
        return 1
    if record.get("interrupted"):
        return 130
    if record:
        shown = ", ".join(f"{k} {record[k]:.3f}" for k in ("train_ppl", "val_ppl") if k in record)
        print(f"finished {MODEL_NAME}: {shown}; checkpoints, metrics.jsonl and metrics.png in {args.checkpoint_dir}; "
              f"try `tinyflow sample --checkpoint {os.path.join(args.checkpoint_dir, BEST)} --prompt \"def \"`",
              file=sys.stderr)  # fmt: skip
    return 0


# ----------------------------------------------------------------------------- sampling


def load_language_model(path: str, device: Any = "cpu") -> tuple[Any, Vocab, str]:
    """The model (eval mode), vocabulary and token level stored in a `tinyflow train lstm-lm` checkpoint."""
    import models

    state = load_checkpoint(path, MODEL_NAME)
    model = models.build(MODEL_NAME, models.get_config(MODEL_NAME, **state["model_config"]))
    load_model_state(model, state["model"], path)
    model.to(device).eval()
    return model, Vocab(state["vocab"]), state["level"]


def generate(model: Any, vocab: Vocab, level: str, prompt: str, length: int, temperature: float = 0.8,
             seed: int = 0, device: Any = "cpu") -> str:  # fmt: skip
    """``length`` tokens sampled after ``prompt`` from softmax(logits / temperature) (0 = greedy)."""
    import tinyflow
    from tinyflow.data.text import tokenize

    if temperature < 0:
        raise ValueError(f"sample: --temperature must be >= 0 (0 picks the most likely token), got {temperature}")
    if length < 0:
        raise ValueError(f"sample: --length must be >= 0, got {length}")
    rng = np.random.default_rng(seed)
    ids = vocab.encode(tokenize(prompt, level)) if prompt else np.array([vocab.stoi.get("\n", 0)], dtype=np.int64)
    if len(ids) == 0:  # a word-level prompt of only spaces
        ids = np.array([0], dtype=np.int64)
    out: list[int] = []
    with tinyflow.no_grad():
        logits, state = model(tinyflow.tensor(ids.reshape(-1, 1), device=device))  # (T, 1, V)
        for _ in range(length):
            last = logits.numpy()[-1, 0].astype(np.float64)  # (V,)
            if temperature == 0:
                token = int(last.argmax())
            else:
                p = np.exp((last - last.max()) / temperature)
                token = int(rng.choice(len(p), p=p / p.sum()))
            out.append(token)
            logits, state = model(tinyflow.tensor(np.array([[token]]), device=device), state)
    text = detokenize(vocab.decode(out), level)
    return prompt + text if level == "char" else f"{prompt} {text}"
