"""pytorch/examples mnist: ``Net`` (two convolutions, max pool, dropout, two linear layers),
log_softmax + nll_loss, Adadelta(lr=1.0); batch 64 of 1x28x28 (random pixels, random labels)."""
from __future__ import annotations

from typing import Any

import numpy as np

from programs import Program

BATCH = 64


def build(torch: Any, batch_seed: int = 0) -> Program:
    nn = torch.nn
    F = torch.nn.functional

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(1, 32, 3, 1)
            self.conv2 = nn.Conv2d(32, 64, 3, 1)
            self.dropout1 = nn.Dropout(0.25)
            self.dropout2 = nn.Dropout(0.5)
            self.fc1 = nn.Linear(9216, 128)
            self.fc2 = nn.Linear(128, 10)

        def forward(self, x: Any) -> Any:
            x = self.conv1(x)  # (N, 32, 26, 26)
            x = F.relu(x)
            x = self.conv2(x)  # (N, 64, 24, 24)
            x = F.relu(x)
            x = F.max_pool2d(x, 2)  # (N, 64, 12, 12)
            x = self.dropout1(x)
            x = torch.flatten(x, 1)  # (N, 9216)
            x = self.fc1(x)
            x = F.relu(x)
            x = self.dropout2(x)
            x = self.fc2(x)  # (N, 10)
            output = F.log_softmax(x, dim=1)
            return output

    torch.manual_seed(1)
    model = Net()
    model.train()
    optimizer = torch.optim.Adadelta(model.parameters(), lr=1.0)
    rng = np.random.default_rng(batch_seed)
    data = torch.tensor(rng.standard_normal((BATCH, 1, 28, 28)).astype(np.float32))
    target = torch.tensor(rng.integers(0, 10, BATCH).astype(np.int64))

    def loss() -> Any:
        output = model(data)
        return F.nll_loss(output, target)

    def step() -> Any:
        optimizer.zero_grad()
        out = loss()
        out.backward()
        optimizer.step()
        return out

    return Program(model, optimizer, (data, target), loss, step, BATCH, "images/s",
                   f"batch {BATCH} x 1x28x28, conv 32-64, fc 9216-128-10, Adadelta")
