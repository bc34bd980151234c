"""Train an LSTM language model: the recipe behind `tinyflow train lstm-lm [--text FILE]`.

The text (``--text``, or by default the source of some Python standard library modules read
from the running interpreter, so it exists on every machine) becomes character-level token ids
(word level when ``args.level == "word"``), 90 / 10 train / validation. Model sizes are the
``lstm-lm`` preset, overridden by any of ``MODEL_OPTIONS`` present on ``args``. Training walks B
parallel streams in segments of ``--seq-len`` steps (truncated BPTT, the hidden state carried
across segments and detached), clips the gradient norm and reports the perplexity exp(mean loss)
per epoch. The loop is the shared one (tinyflow.recipes.loop.fit): this recipe gives it the
segments, the step and the metrics. `tinyflow sample` generates text from a checkpoint.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import asdict
from typing import Any

import numpy as np

from tinyflow.data.text import (
    Corpus,
    TruncatedBPTT,
    Vocab,
    batchify,
    default_corpus_text,
    detokenize,
    read_text_file,
)
from tinyflow.recipes.checkpoint import (
    BEST,
    Checkpointer,
    CheckpointMismatchError,
    load_checkpoint,
    load_model_state,
    options_of,
    resume_options,
    resume_path,
)
from tinyflow.recipes.loop import (
    LOG_EVERY,
    FitOptions,
    Hooks,
    InterruptGuard,
    StepOutput,
    check_amp,
    fit,
    make_optimizer,
)
from tinyflow.recipes.metrics import Metrics

MODEL_NAME = "lstm-lm"
DEFAULT_CORPUS_CHARS = 200_000
VALID_BATCH = 8
LANGUAGE_MODELING = Metrics(items="tokens", unit="tok", best="loss", higher_is_better=False,
                            derived=lambda means: {"ppl": math.exp(min(means["loss"], 50))})


def read_text(path: str | None) -> tuple[str, str]:
    """The training text and a description of where it came from."""
    if path is None:
        return default_corpus_text(DEFAULT_CORPUS_CHARS), "the embedded corpus (Python standard library source)"
    return read_text_file(path, what="--text"), path  # binary or non-UTF-8 files are refused, naming them


def evaluation_sums(model: Any, streams: np.ndarray, seq_len: int, device: Any = None) -> np.ndarray:
    """LANGUAGE_MODELING's sums over (N, B) streams, [loss * tokens, tokens] (eval mode, no grad).

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
                part = loss.array.astype(np.float64) * y.numel()
                total = part if total is None else total + part
                count += y.numel()
    finally:
        model.train(was_training)
    return np.array([float(to_host(total, "evaluate_loss")) if total is not None else 0.0, count], dtype=np.float64)


def evaluate_loss(model: Any, streams: np.ndarray, seq_len: int, device: Any = None) -> float:
    """Mean next-token cross-entropy of ``model`` over (N, B) streams (eval mode, no grad)."""
    total, count = evaluation_sums(model, streams, seq_len, device)
    return total / max(count, 1)


def _state_arrays(state: Any) -> list[np.ndarray] | None:
    return None if state is None else [s.numpy() for s in state]


def _state_tensors(arrays: Any, device: Any) -> Any:
    import tinyflow

    return None if arrays is None else tuple(tinyflow.tensor(a, device=device) for a in arrays)


class Segments:
    """The training segments of an epoch, with what the loop needs to resume in the middle of one.

    ``set_epoch(epoch, start_batch)`` skips the segments already trained; the hidden state carried
    into the next segment goes into checkpoints (``state_dict``) and back (``load_state_dict``).
    ``state`` is the hidden state the step reads and writes (stored detached, see TruncatedBPTT).
    """

    def __init__(self, bptt: TruncatedBPTT, device: Any = None):
        self.bptt, self.device = bptt, device
        self.batch_size = bptt.streams.shape[1]
        self.start = 0  # segments of this epoch already trained (resuming)
        self.carried: Any = None  # the hidden state to begin segment ``start`` with (resuming)

    @property
    def state(self) -> Any:
        return self.bptt.state

    @state.setter
    def state(self, value: Any) -> None:
        self.bptt.state = value

    def __len__(self) -> int:
        return len(self.bptt)

    def set_epoch(self, epoch: int, start_batch: int = 0, start_sample: int | None = None) -> None:
        """Begin the next pass at segment ``start_batch``; ``start_sample`` counts stream-segments
        (segments x streams, so the same share of the tokens under another batch size)."""
        self.start = start_batch if start_sample is None else start_sample // self.batch_size

    def __iter__(self) -> Iterator[tuple[Any, Any]]:
        start, self.start = self.start, 0
        for i, (x, y) in enumerate(self.bptt):  # (T, B) each; a new pass starts from state None
            if i < start:
                continue
            if i == start and self.carried is not None:
                self.bptt.state, self.carried = self.carried, None
            yield x, y
        self.bptt.state = None  # the epoch is over: nothing is carried into the next one

    def state_dict(self) -> dict[str, Any]:
        return {"hidden": _state_arrays(self.bptt.state)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        hidden = state.get("hidden")
        if hidden is not None and any(np.shape(h)[1] != self.batch_size for h in hidden):
            hidden = None  # another --batch-size: other streams, whose state starts afresh
        self.carried = _state_tensors(hidden, self.device)


def language_model_step(segments: Segments) -> Callable[[Any, Any], StepOutput]:
    """The step over ``segments``: the next-token cross-entropy, the hidden state carried on."""
    import tinyflow.nn.functional as F

    def step(model: Any, batch: tuple[Any, Any]) -> StepOutput:
        x, y = batch  # (T, B) token ids each
        logits, segments.state = model(x, segments.state)  # (T, B, V); the state is stored detached
        logits = logits.float()  # the loss is always computed in float32
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        return StepOutput(loss, (), y.numel())

    return step


MODEL_OPTIONS = ("seq_len", "embedding_dim", "hidden_size", "num_layers", "dropout", "tie_weights")
# The options that shaped a language model's run, recorded in its checkpoints and reconciled on
# resume (tinyflow.recipes.checkpoint.resume_options; no --schedule here).
RUN_OPTIONS = ("optimizer", "epochs", "batch_size", "lr", "momentum", "weight_decay", "clip", "amp", "seed", "text",
               "level", *MODEL_OPTIONS)


def train_language_model(args: argparse.Namespace, text: str | None = None, source: str | None = None,
                         progress: bool = True, guard: InterruptGuard | None = None,
                         on_step: Callable[[int, int, Any], None] | None = None) -> dict[str, Any]:  # fmt: skip
    """Build the corpus and model, train for ``args.epochs`` and return the last epoch's record.

    ``text`` (and where it came from, ``source``): the training text; None reads ``args.text``
    (once a resumed run has taken it from its checkpoint when the command line leaves it out).
    Model sizes come from the ``lstm-lm`` preset, overridden by any of ``MODEL_OPTIONS`` set on
    ``args``; a resumed run keeps its own (another value given is a ResumeError). A Ctrl-C (or ``guard.request()``) saves a checkpoint after the current segment and
    returns ``{"interrupted": True, ...}``; ``on_step(epoch, step, loss)`` runs after each step
    (the loss a 0-d Tensor on the device). The losses are read to the host every
    ``args.log_every`` segments and at the end of the epoch (see ``tinyflow.recipes.loop.fit``:
    a non-finite loss is found there, up to ``log_every - 1`` segments late).
    """
    import tinyflow
    from tinyflow import models

    level = getattr(args, "level", None) or "char"
    device = getattr(args, "device", None) or "cpu"
    checkpoints = Checkpointer(args.checkpoint_dir, {"model_name": MODEL_NAME}, resume=resume_path(args))
    state = checkpoints.resume_state()
    if state is not None:  # the vocabulary and model sizes of the run resumed, its options where not given
        preset = models.get_config(MODEL_NAME)
        resolved = {"level": level, **{k: getattr(preset, k) for k in MODEL_OPTIONS
                                       if getattr(args, k, None) is None and hasattr(preset, k)}}
        checkpoints.resumed = resume_options(args, state, checkpoints.resume, RUN_OPTIONS, resolved)
        check_amp(getattr(args, "amp", None))  # perhaps the checkpoint's
        vocab, level = Vocab(state["vocab"]), state["level"]
        config = models.get_config(MODEL_NAME, **state["model_config"])
    else:
        vocab = None
        config = None
    if text is None:
        text, source = read_text(getattr(args, "text", None))
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
    run_options = {**options_of(args, RUN_OPTIONS), "level": level,
                   **{k: getattr(config, k) for k in MODEL_OPTIONS if hasattr(config, k)}}  # as trained, not as given
    checkpoints.meta.update({"model_config": asdict(config), "vocab": corpus.vocab.itos, "level": level,
                             "seed": args.seed, "source": source, "options": run_options})  # fmt: skip
    segments = Segments(TruncatedBPTT(train_streams, seq_len, device=device), device)
    print(f"data: {source}: {len(corpus.train)} train / {len(corpus.valid)} valid {level} tokens, vocabulary "
          f"{len(corpus.vocab)}; model: {config}", file=sys.stderr)  # fmt: skip

    result = fit(model, segments, language_model_step(segments), epochs=args.epochs, optimizer=optimizer,
                 metrics=LANGUAGE_MODELING,
                 evaluate=(lambda m: evaluation_sums(m, valid_streams, seq_len, device)) if valid_streams is not None else None,
                 checkpoints=checkpoints,
                 options=FitOptions(amp=getattr(args, "amp", None), clip=args.clip,
                                    log_every=getattr(args, "log_every", None) or LOG_EVERY, progress=progress),
                 hooks=Hooks(on_step=on_step, guard=guard))  # fmt: skip
    if result.interrupted:
        return {"interrupted": True, "checkpoint": result.checkpoint}
    return result.history[-1] if result.history else {}


def run_train(args: argparse.Namespace) -> int:
    """`tinyflow train lstm-lm`: returns the exit status (0 done, 1 failed, 2 bad input, 130 interrupted)."""
    from tinyflow.serialization import CheckpointWriteError

    try:
        # A fresh run's text is read first (a bad --text fails before anything is written); a
        # resumed run's once its checkpoint has said which.
        text, source = (None, None) if resume_path(args) else read_text(getattr(args, "text", None))
        record = train_language_model(args, text, source, progress=not getattr(args, "quiet", False))
    except (CheckpointMismatchError, FileNotFoundError, ValueError) as exc:
        print(f"tinyflow train: error: {exc}", file=sys.stderr)
        return 2
    except (FloatingPointError, CheckpointWriteError) as exc:  # a diverged run; a full disk
        print(f"tinyflow train: error: {exc}", file=sys.stderr)
        return 1
    except MemoryError as exc:
        msg = str(exc) if "batch size" in str(exc) else f"out of memory at batch size {args.batch_size}: try a smaller --batch-size"
        print(f"tinyflow train: error: {msg}", file=sys.stderr)
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
    from tinyflow import models

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

    if not math.isfinite(temperature) or temperature < 0:
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
