"""A character-level GRU language model (char-rnn on tiny-shakespeare's 65 characters):
Embedding(65, 128), GRU(128, 256, batch_first=True), Linear(256, 65); batch 64 x 100
characters, CrossEntropyLoss, Adam(lr=2e-3)."""
from __future__ import annotations

from typing import Any

import numpy as np

from programs import Program

VOCAB, EMBED, HIDDEN, BATCH, SEQ = 65, 128, 256, 64, 100


def build(torch: Any, batch_seed: int = 0) -> Program:
    nn = torch.nn

    class CharRNN(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(VOCAB, EMBED)
            self.gru = nn.GRU(EMBED, HIDDEN, num_layers=1, batch_first=True)
            self.head = nn.Linear(HIDDEN, VOCAB)

        def forward(self, x: Any, hidden: Any = None) -> Any:
            out, hidden = self.gru(self.embed(x), hidden)  # (B, T, H)
            return self.head(out), hidden  # (B, T, V)

    torch.manual_seed(0)
    model = CharRNN()
    model.train()
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    rng = np.random.default_rng(batch_seed)
    text = rng.integers(0, VOCAB, (BATCH, SEQ + 1)).astype(np.int64)  # (B, T+1)
    x = torch.tensor(text[:, :-1])  # (B, T)
    y = torch.tensor(text[:, 1:])

    def loss() -> Any:
        logits, _ = model(x)
        return criterion(logits.reshape(-1, VOCAB), y.reshape(-1))

    def step() -> Any:
        optimizer.zero_grad()
        out = loss()
        out.backward()
        optimizer.step()
        return out

    return Program(model, optimizer, (x, y), loss, step, BATCH * SEQ, "tokens/s",
                   f"vocab {VOCAB}, emb {EMBED}, GRU {HIDDEN}, batch {BATCH} x seq {SEQ}, Adam")
