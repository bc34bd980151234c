"""pytorch/examples time_sequence_prediction: ``Sequence`` (two LSTMCells of 51 stepped in a
Python loop, a Linear(51, 1) per step), MSELoss, on the example's noisy sine waves.

The bench runs sequences of 200 steps (the example: 999) in float32 (the example: float64,
``.double()``) with Adam(lr=0.01) (the example: LBFGS, whose step calls the closure up to 20
times: the throughput would count line-search evaluations, not training steps). These are the
bench's choices: tinyflow runs the example's float64 and LBFGS as well."""
from __future__ import annotations

from typing import Any

import numpy as np

from programs import Program

HIDDEN, SEQ, WAVES, PERIOD = 51, 200, 100, 20  # batch = WAVES - 3 = 97, as the example's train set


def build(torch: Any, batch_seed: int = 0) -> Program:
    nn = torch.nn

    class Sequence(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lstm1 = nn.LSTMCell(1, HIDDEN)
            self.lstm2 = nn.LSTMCell(HIDDEN, HIDDEN)
            self.linear = nn.Linear(HIDDEN, 1)

        def forward(self, input: Any, future: int = 0) -> Any:
            outputs = []
            h_t = torch.zeros(input.size(0), HIDDEN)
            c_t = torch.zeros(input.size(0), HIDDEN)
            h_t2 = torch.zeros(input.size(0), HIDDEN)
            c_t2 = torch.zeros(input.size(0), HIDDEN)

            for input_t in input.split(1, dim=1):  # (B, 1) each
                h_t, c_t = self.lstm1(input_t, (h_t, c_t))
                h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
                output = self.linear(h_t2)  # (B, 1)
                outputs += [output]
            for i in range(future):  # if we should predict the future  # noqa: B007 (the example's code)
                h_t, c_t = self.lstm1(output, (h_t, c_t))
                h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
                output = self.linear(h_t2)
                outputs += [output]
            outputs = torch.cat(outputs, dim=1)  # (B, T)
            return outputs

    # the example's generate_sine_wave.py: shifted sine waves, one per row
    rng = np.random.default_rng(batch_seed)
    x = np.empty((WAVES, SEQ + 1), np.int64)
    x[:] = np.arange(SEQ + 1) + rng.integers(-4 * PERIOD, 4 * PERIOD, WAVES).reshape(WAVES, 1)
    waves = np.sin(x / 1.0 / PERIOD).astype(np.float32)  # (WAVES, SEQ+1)

    torch.manual_seed(0)
    input = torch.tensor(waves[3:, :-1])  # (97, SEQ)
    target = torch.tensor(waves[3:, 1:])
    seq = Sequence()
    seq.train()
    criterion = nn.MSELoss()
    optimizer = torch.optim.Adam(seq.parameters(), lr=0.01)

    def loss() -> Any:
        out = seq(input)
        return criterion(out, target)

    def step() -> Any:
        optimizer.zero_grad()
        out = loss()
        out.backward()
        optimizer.step()
        return out

    return Program(seq, optimizer, (input, target), loss, step, WAVES - 3, "sequences/s",
                   f"batch {WAVES - 3} x seq {SEQ}, 2 x LSTMCell {HIDDEN} in a Python loop, Adam")
