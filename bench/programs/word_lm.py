"""pytorch/examples word_language_model at its defaults: ``RNNModel('LSTM', 33278, 200, 200, 2,
dropout 0.2)`` (Wikitext-2's vocabulary), bptt 35, batch 20, the hidden state carried from
step to step and detached, clip_grad_norm_(0.25), SGD at lr 20.

Two formulations differ from the example, by the bench's choice (tinyflow runs the example's
own too): the loss is CrossEntropyLoss on the logits (the example's log_softmax + NLLLoss, the
same function), and the update is optim.SGD (the example writes ``p.data.add_(p.grad,
alpha=-lr)`` by hand: the same update)."""
from __future__ import annotations

from typing import Any

import numpy as np

from programs import Program

NTOKENS, EMSIZE, NHID, NLAYERS, DROPOUT = 33278, 200, 200, 2, 0.2
BPTT, BATCH, LR, CLIP = 35, 20, 20.0, 0.25


def build(torch: Any, batch_seed: int = 0) -> Program:
    nn = torch.nn

    class RNNModel(nn.Module):
        """Container module with an encoder, a recurrent module, and a decoder."""

        def __init__(self, ntoken: int, ninp: int, nhid: int, nlayers: int, dropout: float = 0.5) -> None:
            super().__init__()
            self.ntoken = ntoken
            self.drop = nn.Dropout(dropout)
            self.encoder = nn.Embedding(ntoken, ninp)
            self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
            self.decoder = nn.Linear(nhid, ntoken)
            self.init_weights()
            self.nhid = nhid
            self.nlayers = nlayers

        def init_weights(self) -> None:
            initrange = 0.1
            nn.init.uniform_(self.encoder.weight, -initrange, initrange)
            nn.init.zeros_(self.decoder.bias)
            nn.init.uniform_(self.decoder.weight, -initrange, initrange)

        def forward(self, input: Any, hidden: Any) -> Any:
            emb = self.drop(self.encoder(input))  # (T, B, ninp)
            output, hidden = self.rnn(emb, hidden)  # (T, B, nhid)
            output = self.drop(output)
            decoded = self.decoder(output)  # (T, B, ntoken)
            decoded = decoded.view(-1, self.ntoken)  # (T*B, ntoken)
            return decoded, hidden

        def init_hidden(self, bsz: int) -> Any:
            weight = next(self.parameters())
            return (weight.new_zeros(self.nlayers, bsz, self.nhid),
                    weight.new_zeros(self.nlayers, bsz, self.nhid))

    def repackage_hidden(h: Any) -> Any:
        """Wraps hidden states in new Tensors, to detach them from their history."""
        if isinstance(h, torch.Tensor):
            return h.detach()
        return tuple(repackage_hidden(v) for v in h)

    torch.manual_seed(1111)
    model = RNNModel(NTOKENS, EMSIZE, NHID, NLAYERS, DROPOUT)
    model.train()
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    rng = np.random.default_rng(batch_seed)
    stream = rng.integers(0, NTOKENS, (BPTT + 1, BATCH)).astype(np.int64)  # (T+1, B)
    data = torch.tensor(stream[:-1])  # (T, B)
    targets = torch.tensor(stream[1:].reshape(-1))  # (T*B,)
    state = {"hidden": model.init_hidden(BATCH)}

    def loss() -> Any:
        output, hidden = model(data, state["hidden"])
        state["next"] = hidden
        return criterion(output, targets)

    def step() -> Any:
        state["hidden"] = repackage_hidden(state["hidden"])
        model.zero_grad()
        out = loss()
        out.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        optimizer.step()
        state["hidden"] = state.pop("next")
        return out

    return Program(model, optimizer, (data, targets), loss, step, BPTT * BATCH, "tokens/s",
                   f"vocab {NTOKENS}, emb {EMSIZE}, LSTM {NLAYERS}x{NHID}, bptt {BPTT} x batch {BATCH}, "
                   f"clip {CLIP}, SGD lr {LR:g}")
