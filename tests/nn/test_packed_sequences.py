"""nn.utils.rnn (pad / pack / unpack) and RNN, LSTM, GRU on PackedSequence inputs against torch:
outputs, final states (taken at each sequence's end, reverse directions starting there) and
gradients, sorted or not, one or two layers, one or two directions, with or without hx."""
from __future__ import annotations

import numpy as np
import pytest

import tinyflow as tf
import tinyflow.nn as nn
from tinyflow.nn.utils import rnn as R

torch = pytest.importorskip("torch")
TR = torch.nn.utils.rnn
RNG = np.random.default_rng(0)


def test_pack_and_pad_round_trip_like_torch():
    x = RNG.standard_normal((5, 3, 2)).astype(np.float32)
    for lengths, batch_first, enforce in [([5, 3, 1], False, True), ([2, 5, 4], True, False)]:
        xx = x.transpose(1, 0, 2).copy() if batch_first else x
        ours = R.pack_padded_sequence(tf.tensor(xx), lengths, batch_first=batch_first, enforce_sorted=enforce)
        theirs = TR.pack_padded_sequence(torch.tensor(xx), lengths, batch_first=batch_first, enforce_sorted=enforce)
        np.testing.assert_array_equal(ours.data.numpy(), theirs.data.numpy())
        assert ours.batch_sizes.tolist() == theirs.batch_sizes.tolist()
        padded, lens = R.pad_packed_sequence(ours, batch_first=batch_first, padding_value=-1.0, total_length=6)
        ref, ref_lens = TR.pad_packed_sequence(theirs, batch_first=batch_first, padding_value=-1.0, total_length=6)
        np.testing.assert_array_equal(padded.numpy(), ref.numpy())
        assert lens.tolist() == ref_lens.tolist()
    with pytest.raises(RuntimeError, match="sorted in decreasing order"):
        R.pack_padded_sequence(tf.tensor(x), [1, 3, 2])
    seqs = [tf.tensor(RNG.standard_normal((n, 2)).astype(np.float32)) for n in (2, 4, 1)]
    packed = R.pack_sequence(seqs, enforce_sorted=False)
    for a, b in zip(R.unpack_sequence(packed), seqs):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize("cls", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("layers, bidirectional", [(1, False), (2, True), (1, True)])
@pytest.mark.parametrize("with_hx", [False, True])
def test_recurrent_layers_on_packed_sequences_match_torch(cls, layers, bidirectional, with_hx):
    torch.manual_seed(0)
    theirs = getattr(torch.nn, cls)(3, 4, layers, bidirectional=bidirectional)
    ours = getattr(nn, cls)(3, 4, layers, bidirectional=bidirectional)
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    lengths = [3, 6, 1, 6]
    x = RNG.standard_normal((6, 4, 3)).astype(np.float32)
    a, b = tf.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    pa = R.pack_padded_sequence(a, lengths, enforce_sorted=False)
    pb = TR.pack_padded_sequence(b, lengths, enforce_sorted=False)
    n_states = 2 if cls == "LSTM" else 1
    hx = [RNG.standard_normal((layers * (2 if bidirectional else 1), 4, 4)).astype(np.float32) for _ in range(n_states)]
    hx_a = [tf.tensor(h, requires_grad=True) for h in hx]
    hx_b = [torch.tensor(h, requires_grad=True) for h in hx]
    args_a = (tuple(hx_a) if cls == "LSTM" else hx_a[0]) if with_hx else None
    args_b = (tuple(hx_b) if cls == "LSTM" else hx_b[0]) if with_hx else None
    out_a, state_a = ours(pa, args_a)
    out_b, state_b = theirs(pb, args_b)
    assert isinstance(out_a, R.PackedSequence)
    np.testing.assert_allclose(out_a.data.numpy(), out_b.data.detach().numpy(), rtol=1e-5, atol=1e-6)
    states_a = state_a if cls == "LSTM" else (state_a,)
    states_b = state_b if cls == "LSTM" else (state_b,)
    for s, t in zip(states_a, states_b):
        np.testing.assert_allclose(s.numpy(), t.detach().numpy(), rtol=1e-5, atol=1e-6)
    padded_a, _ = R.pad_packed_sequence(out_a)
    padded_b, _ = TR.pad_packed_sequence(out_b)
    (padded_a.sum() + sum(s.sum() for s in states_a)).backward()
    (padded_b.sum() + sum(s.sum() for s in states_b)).backward()
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-4, atol=1e-5)
    if with_hx:
        for u, v in zip(hx_a, hx_b):
            np.testing.assert_allclose(u.grad.numpy(), v.grad.numpy(), rtol=1e-4, atol=1e-5)
    for (name, p), q in zip(ours.named_parameters(), theirs.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-4, atol=1e-5, err_msg=name)
