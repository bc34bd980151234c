"""A two-layer MLP on scikit-learn's bundled 8x8 digits: the smallest end-to-end training run.

    python -m tinyflow.recipes.digits      # trains in a few seconds and prints test accuracy
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

import tinyflow as tf
import tinyflow.nn as nn
import tinyflow.nn.functional as F


@dataclass
class DigitsConfig:
    hidden: int = 256
    epochs: int = 30
    batch_size: int = 32
    lr: float = 0.05
    momentum: float = 0.9
    weight_decay: float = 5e-4
    label_smoothing: float = 0.1
    seed: int = 0
    test_fraction: float = 0.25


def load_digits_split(cfg: DigitsConfig) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Digits standardised with the training set's statistics, split reproducibly."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = digits.data.astype(np.float32)  # (1797, 64), values 0..16
    y = digits.target.astype(np.int64)
    order = np.random.default_rng(cfg.seed).permutation(len(x))
    n_test = int(len(x) * cfg.test_fraction)
    test, train = order[:n_test], order[n_test:]
    mean, std = x[train].mean(0), x[train].std(0) + 0.1  # +0.1: some border pixels are always 0
    x = (x - mean) / std
    return x[train], y[train], x[test], y[test]


def accuracy(model: nn.Module, x: np.ndarray, y: np.ndarray) -> float:
    model.eval()
    with tf.no_grad():
        pred = model(tf.tensor(x)).argmax(1).numpy()
    model.train()
    return float((pred == y).mean())


def train_mlp_on_digits(cfg: DigitsConfig | None = None, verbose: bool = False) -> float:
    """Train the MLP with SGD-momentum and return its test accuracy."""
    cfg = cfg or DigitsConfig()
    tf.manual_seed(cfg.seed)
    xtr, ytr, xte, yte = load_digits_split(cfg)
    model = nn.Sequential(nn.Linear(64, cfg.hidden), nn.ReLU(), nn.Linear(cfg.hidden, 10))
    opt = tf.optim.SGD(model.parameters(), lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)
    schedule = tf.optim.CosineAnnealingLR(opt, T_max=cfg.epochs)
    rng = np.random.default_rng(cfg.seed)
    start = time.perf_counter()
    for epoch in range(cfg.epochs):
        order = rng.permutation(len(xtr))
        for i in range(0, len(order), cfg.batch_size):
            idx = order[i : i + cfg.batch_size]
            loss = F.cross_entropy(model(tf.tensor(xtr[idx])), ytr[idx], label_smoothing=cfg.label_smoothing)
            opt.zero_grad()
            loss.backward()
            opt.step()
        schedule.step()
        if verbose and (epoch + 1) % 10 == 0:
            print(f"epoch {epoch + 1:3d}  loss {loss.item():.4f}  test accuracy {accuracy(model, xte, yte):.4f}")
    acc = accuracy(model, xte, yte)
    if verbose:
        print(f"test accuracy {acc:.4f} after {cfg.epochs} epochs in {time.perf_counter() - start:.1f} s")
    return acc


if __name__ == "__main__":
    train_mlp_on_digits(verbose=True)
