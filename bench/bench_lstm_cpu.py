"""The LSTM language model: tinyflow vs PyTorch training throughput on the CPU, same run.

Model (dlbench's LSTM): vocabulary 128, embedding 128, 2 LSTM layers of 256, linear decoder;
batch 32, segments of 32 steps, truncated BPTT (the hidden state is carried into the next
segment, detached). One training step = forward, cross-entropy, backward, gradient clipping to
norm 0.25 and an SGD step. Both frameworks train the identical model (tinyflow's initial weights
are copied into PyTorch) on the same token stream with the same number of BLAS/OpenMP threads.
Runs alternate between the two so that machine noise hits both; the median run of each is
reported as tokens/s, and the ratio tinyflow / PyTorch (target >= 0.8x).

PyTorch's CPU LSTM is oneDNN's fused RNN primitive; tinyflow's is NumPy: one GEMM for the input
projection of all steps, the recurrent GEMM and one fused cell kernel per step (docs/lstm.md).

Threads default to 1. The recurrence is 2 x 32 small GEMMs per step, (1024, 256) x (256, 32), and
multi-threaded OpenBLAS on such GEMMs collapses when another process holds a core (measured on a
shared 2-core VM: 2 threads 3-20x slower than 1); oneDNN degrades far less. So the ratio with
--threads 2 on a busy machine measures the machine's load; on an idle machine pass --threads N.

    python bench/bench_lstm_cpu.py             # full measurement
    python bench/bench_lstm_cpu.py --short     # a quick check that it works
    python bench/bench_lstm_cpu.py --profile   # cProfile of tinyflow's training step
"""
from __future__ import annotations

import argparse
import os
import sys


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=1, help="BLAS/OpenMP threads for both (default: 1, see above)")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=32)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--iters", type=int, default=10, help="training steps per timed run")
    parser.add_argument("--runs", type=int, default=7, help="timed runs per framework (median reported)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps before measuring")
    parser.add_argument("--short", action="store_true", help="3 runs of 3 steps: proves the script works")
    parser.add_argument("--profile", action="store_true", help="cProfile tinyflow's step and print the top entries")
    parser.add_argument("--profile-steps", type=int, default=10)
    args = parser.parse_args()
    if args.short:
        args.iters, args.runs, args.warmup = 3, 3, 1
    return args


ARGS = parse_args()
# Thread pools are sized when the libraries load: set the environment before importing them.
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = str(ARGS.threads)

import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import tinyflow as tf  # noqa: E402
import tinyflow.nn.functional as F  # noqa: E402
from tinyflow.data.text import batchify, detach_state  # noqa: E402
from tinyflow.models.lstm_lm import LSTMLM, LSTMLMConfig  # noqa: E402
from tinyflow.optim import SGD  # noqa: E402
from tinyflow.optim.clip_grad import clip_grad_norm_  # noqa: E402

torch.set_num_threads(ARGS.threads)

VOCAB, EMBED, LAYERS = 128, 128, 2
LR, CLIP = 1.0, 0.25
STREAM_SEGMENTS = 16  # the token stream holds this many segments, cycled


class TorchLM(torch.nn.Module):
    """The same model in PyTorch, parameter names as tinyflow's LSTMLM."""

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.encoder = torch.nn.Embedding(VOCAB, EMBED)
        self.rnn = torch.nn.LSTM(EMBED, hidden, num_layers=LAYERS)
        self.decoder = torch.nn.Linear(hidden, VOCAB)

    def forward(self, ids: torch.Tensor, state: tuple | None) -> tuple:
        out, state = self.rnn(self.encoder(ids), state)  # (T, B, H)
        return self.decoder(out.reshape(-1, out.shape[-1])), state  # (T*B, V)


def make_stream() -> np.ndarray:
    """(N, B) token streams of random text (the speed does not depend on the tokens)."""
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, VOCAB, size=ARGS.batch * (ARGS.seq_len * STREAM_SEGMENTS + 1))
    return batchify(tokens, ARGS.batch)


class TinyflowTrainer:
    def __init__(self, model: LSTMLM, stream: np.ndarray) -> None:
        self.model = model
        self.opt = SGD(model.parameters(), lr=LR)
        T = ARGS.seq_len
        self.segments = [
            (tf.tensor(stream[i : i + T]), tf.tensor(stream[i + 1 : i + 1 + T].reshape(-1)))
            for i in range(0, T * STREAM_SEGMENTS, T)
        ]
        self.i, self.state = 0, None

    def step(self) -> tf.Tensor:
        x, y = self.segments[self.i % len(self.segments)]
        self.i += 1
        self.opt.zero_grad()
        logits, state = self.model(x, self.state)  # (T, B, V)
        self.state = detach_state(state)
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), y)
        loss.backward()
        clip_grad_norm_(self.model.parameters(), CLIP)
        self.opt.step()
        return loss


class TorchTrainer:
    def __init__(self, model: TorchLM, stream: np.ndarray) -> None:
        self.model = model
        self.opt = torch.optim.SGD(model.parameters(), lr=LR)
        T = ARGS.seq_len
        self.segments = [
            (torch.from_numpy(stream[i : i + T].copy()), torch.from_numpy(stream[i + 1 : i + 1 + T].reshape(-1).copy()))
            for i in range(0, T * STREAM_SEGMENTS, T)
        ]
        self.i, self.state = 0, None

    def step(self) -> torch.Tensor:
        x, y = self.segments[self.i % len(self.segments)]
        self.i += 1
        self.opt.zero_grad()
        logits, state = self.model(x, self.state)
        self.state = tuple(s.detach() for s in state)
        loss = torch.nn.functional.cross_entropy(logits, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), CLIP)
        self.opt.step()
        return loss


def new_models() -> tuple[LSTMLM, TorchLM]:
    tf.manual_seed(0)
    ours = LSTMLM(LSTMLMConfig(vocab_size=VOCAB, embedding_dim=EMBED, hidden_size=ARGS.hidden, num_layers=LAYERS,
                               seq_len=ARGS.seq_len))  # fmt: skip
    theirs = TorchLM(ARGS.hidden)
    theirs.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in ours.state_dict().items()})
    return ours, theirs


def check_same_training(stream: np.ndarray, steps: int = 3) -> float:
    """Largest relative loss difference over the first steps: both must train the same model."""
    ours, theirs = new_models()
    a, b = TinyflowTrainer(ours, stream), TorchTrainer(theirs, stream)
    worst = 0.0
    for _ in range(steps):
        la, lb = float(a.step().item()), float(b.step().item())
        worst = max(worst, abs(la - lb) / max(abs(lb), 1e-12))
    return worst


def timed_run(trainer, iters: int) -> tuple[float, float]:
    """Tokens per second over ``iters`` training steps, by the wall clock and by process CPU time.

    On a machine shared with other jobs the wall clock also counts the time this process waited
    for a core; CPU time does not, so its ratio is the steadier one there (for --threads 1).
    """
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(iters):
        trainer.step()
    tokens = iters * ARGS.batch * ARGS.seq_len
    return tokens / (time.perf_counter() - wall), tokens / max(time.process_time() - cpu, 1e-9)


def profile_tinyflow(trainer: TinyflowTrainer, steps: int) -> None:
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(steps):
        trainer.step()
    profiler.disable()
    stats = pstats.Stats(profiler, stream=sys.stdout)
    print(f"\n== cProfile of {steps} tinyflow training steps (sorted by own time) ==")
    stats.sort_stats("tottime").print_stats(20)


def main() -> None:
    print(f"LSTM LM: vocab {VOCAB}, embedding {EMBED}, {LAYERS} x LSTM {ARGS.hidden}, batch {ARGS.batch}, "
          f"seq {ARGS.seq_len}; SGD lr={LR}, clip {CLIP}")  # fmt: skip
    print(f"threads: {ARGS.threads} (OMP/OpenBLAS/MKL env, torch.get_num_threads()={torch.get_num_threads()}); "
          f"numpy {np.__version__}, torch {torch.__version__}")  # fmt: skip
    stream = make_stream()
    diff = check_same_training(stream)
    print(f"same model check: largest relative loss difference over 3 steps = {diff:.2e}")
    if diff > 1e-3:
        raise SystemExit("tinyflow and PyTorch do not train the same model: the comparison would be meaningless")

    ours, theirs = new_models()
    trainers = {"tinyflow": TinyflowTrainer(ours, stream), "pytorch": TorchTrainer(theirs, stream)}
    if ARGS.profile:
        profile_tinyflow(trainers["tinyflow"], ARGS.profile_steps)
        return
    for trainer in trainers.values():
        for _ in range(ARGS.warmup):
            trainer.step()
    rates: dict[str, list[tuple[float, float]]] = {name: [] for name in trainers}
    for _ in range(ARGS.runs):  # alternate, so that load changes on the machine hit both
        for name, trainer in trainers.items():
            rates[name].append(timed_run(trainer, ARGS.iters))
    for clock, k in (("wall", 0), ("cpu", 1)):
        medians = {name: statistics.median(r[k] for r in runs) for name, runs in rates.items()}
        for name, runs in rates.items():
            shown = ", ".join(f"{r[k]:.0f}" for r in runs)
            print(f"{clock:4s} {name:9s} median {medians[name]:8.0f} tokens/s   runs: {shown}")
        ratio = medians["tinyflow"] / medians["pytorch"]
        print(f"{clock:4s} ratio tinyflow / pytorch = {ratio:.2f}x (target >= 0.8x)")


if __name__ == "__main__":
    main()
