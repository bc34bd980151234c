"""Real PyTorch programs, written once, run by tinyflow unchanged (bench/bench_cpu.py).

Each module has ``build(torch, batch_seed=0)``: ``torch`` is the framework module (``torch`` or
``tinyflow``, whose API is PyTorch's: ``import tinyflow as torch``), and the code is the same for
both. It returns a ``Program``: the model, the optimizer, one fixed batch made with NumPy from
``batch_seed`` (the same numbers in both frameworks), ``loss()`` (forward and loss on that batch)
and ``step()`` (zero_grad, forward, loss, backward, clipping where the program clips, optimizer
step; returns the loss tensor). ``items_per_step`` and ``unit`` say what the throughput counts.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

NAMES = {"mnist-cnn": "mnist_cnn", "word-lm": "word_lm", "lstm-timeseries": "lstm_timeseries",
         "char-rnn": "char_rnn"}  # workload name -> module in this folder


@dataclass
class Program:
    """What one training step of a real program needs, in either framework."""

    model: Any
    optimizer: Any
    batch: tuple  # the fixed inputs and targets, framework tensors
    loss: Callable[[], Any]  # forward + loss on the batch (no backward, no update)
    step: Callable[[], Any]  # one training step; returns the loss tensor
    items_per_step: int
    unit: str
    sizes: str  # the shapes, in a line, for the report
