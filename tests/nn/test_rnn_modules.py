"""nn.LSTM, nn.GRU, their cells and nn.Embedding against PyTorch, with PyTorch's weights loaded.

Every comparison checks outputs, final states and the gradient of every parameter, of the input
and of the initial states, for a loss that weights every output entry differently.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import tinyflow as tf
import tinyflow.nn as nn

torch = pytest.importorskip("torch")

CONFIGS = list(itertools.product([1, 2], [False, True], [False, True]))  # layers, bidirectional, batch_first


def _t(a: np.ndarray, grad: bool = True) -> tuple:
    """The same float64 values as a torch tensor and a tinyflow tensor, both requiring grad."""
    return torch.tensor(a, requires_grad=grad), tf.tensor(a, dtype=tf.float64, requires_grad=grad)


def _close(ours: tf.Tensor, theirs, what: str, tol: float = 1e-10) -> None:
    np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=tol, atol=tol, err_msg=what)


def _compare_params(ours: nn.Module, theirs, tol: float = 1e-10) -> None:
    names = [n for n, _ in theirs.named_parameters()]
    assert [n for n, _ in ours.named_parameters()] == names
    ours_params = dict(ours.named_parameters())
    for name, p in theirs.named_parameters():
        _close(ours_params[name].grad, p.grad, f"gradient of {name}", tol)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
@pytest.mark.parametrize("layers,bidirectional,batch_first", CONFIGS)
def test_rnn_matches_pytorch(kind, layers, bidirectional, batch_first):
    rng = np.random.default_rng(layers * 4 + bidirectional * 2 + batch_first)
    steps, batch, inputs, hidden = 5, 3, 4, 6
    theirs = getattr(torch.nn, kind)(inputs, hidden, num_layers=layers, bidirectional=bidirectional,
                                     batch_first=batch_first).double()  # fmt: skip
    ours = getattr(nn, kind)(inputs, hidden, num_layers=layers, bidirectional=bidirectional,
                             batch_first=batch_first, dtype=tf.float64)  # fmt: skip
    ours.load_state_dict(theirs.state_dict())

    shape = (batch, steps, inputs) if batch_first else (steps, batch, inputs)
    x_t, x_o = _t(rng.normal(size=shape))
    state_shape = (layers * (2 if bidirectional else 1), batch, hidden)
    h_t, h_o = _t(rng.normal(size=state_shape))
    c_t, c_o = _t(rng.normal(size=state_shape))
    if kind == "LSTM":
        out_t, (hn_t, cn_t) = theirs(x_t, (h_t, c_t))
        out_o, (hn_o, cn_o) = ours(x_o, (h_o, c_o))
        finals = [(hn_o, hn_t), (cn_o, cn_t)]
    else:
        out_t, hn_t = theirs(x_t, h_t)
        out_o, hn_o = ours(x_o, h_o)
        finals = [(hn_o, hn_t)]
    _close(out_o, out_t, "output")
    for o, t in finals:
        _close(o, t, "final state")

    # A loss that reaches every output and final state with different weights.
    weights = [rng.normal(size=t.shape) for _, t in [(out_o, out_t)] + finals]
    loss_t = sum((t * torch.tensor(w)).sum() for (_, t), w in zip([(out_o, out_t)] + finals, weights))
    loss_o = sum((o * tf.tensor(w, dtype=tf.float64)).sum() for (o, _), w in zip([(out_o, out_t)] + finals, weights))
    loss_t.backward()
    loss_o.backward()
    _close(x_o.grad, x_t.grad, "input gradient")
    _close(h_o.grad, h_t.grad, "h0 gradient")
    if kind == "LSTM":
        _close(c_o.grad, c_t.grad, "c0 gradient")
    _compare_params(ours, theirs)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_rnn_without_bias_or_initial_state_and_unbatched_input(kind):
    rng = np.random.default_rng(7)
    theirs = getattr(torch.nn, kind)(3, 4, bias=False).double()
    ours = getattr(nn, kind)(3, 4, bias=False, dtype=tf.float64)
    assert "bias_ih_l0" not in dict(ours.named_parameters())
    ours.load_state_dict(theirs.state_dict())
    for shape in [(6, 2, 3), (6, 3)]:  # batched and unbatched (seq_len, input_size)
        x_t, x_o = _t(rng.normal(size=shape))
        out_t, _ = theirs(x_t)
        out_o, _ = ours(x_o)
        assert out_o.shape == tuple(out_t.shape)
        _close(out_o, out_t, f"output for input {shape}")
        out_t.sum().backward()
        out_o.sum().backward()
        _close(x_o.grad, x_t.grad, "input gradient")
    _compare_params(ours, theirs)


def test_lstm_float32_matches_pytorch_and_default_init_range():
    rng = np.random.default_rng(3)
    theirs = torch.nn.LSTM(8, 16, num_layers=2)
    ours = nn.LSTM(8, 16, num_layers=2)
    bound = 1 / np.sqrt(16)
    for p in ours.parameters():  # PyTorch's U(-1/sqrt(H), 1/sqrt(H)), float32
        assert p.dtype == tf.float32 and np.abs(p.numpy()).max() <= bound
    ours.load_state_dict(theirs.state_dict())
    x = rng.normal(size=(12, 4, 8)).astype(np.float32)
    out_t, _ = theirs(torch.tensor(x))
    out_o, _ = ours(tf.tensor(x))
    assert out_o.dtype == tf.float32
    _close(out_o, out_t, "float32 output", tol=1e-5)
    out_t.square().sum().backward()
    (out_o * out_o).sum().backward()
    _compare_params(ours, theirs, tol=1e-4)


def test_lstm_dropout_between_layers_only_in_training():
    tf.manual_seed(0)
    lstm = nn.LSTM(3, 5, num_layers=2, dropout=0.5)
    x = tf.randn(4, 2, 3)
    out_a, _ = lstm(x)
    out_b, _ = lstm(x)
    assert not np.allclose(out_a.numpy(), out_b.numpy())  # a fresh mask each call
    lstm.eval()
    out_c, _ = lstm(x)
    out_d, _ = lstm(x)
    np.testing.assert_array_equal(out_c.numpy(), out_d.numpy())
    with pytest.warns(UserWarning, match="does nothing with num_layers=1"):
        nn.LSTM(3, 5, dropout=0.5)


def test_rnn_bad_input_errors_name_the_layer_and_shapes():
    lstm = nn.LSTM(3, 5, num_layers=2)
    with pytest.raises(ValueError, match="LSTM: input has 4 features, the layer expects input_size=3"):
        lstm(tf.randn(2, 2, 4))
    with pytest.raises(ValueError, match=r"initial state has shape \(1, 2, 5\), expected .* \(2, 2, 5\)"):
        lstm(tf.randn(2, 2, 3), (tf.zeros(1, 2, 5), tf.zeros(1, 2, 5)))
    with pytest.raises(ValueError, match="GRU: input must be"):
        nn.GRU(3, 5)(tf.randn(3))


@pytest.mark.parametrize("kind", ["LSTMCell", "GRUCell"])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("features", [4, 1])  # 1: the time-series cells (an outer product, not a GEMM)
def test_cells_match_pytorch(kind, bias, features):
    rng = np.random.default_rng(11)
    theirs = getattr(torch.nn, kind)(features, 5, bias=bias).double()
    ours = getattr(nn, kind)(features, 5, bias=bias, dtype=tf.float64)
    ours.load_state_dict(theirs.state_dict())
    x_t, x_o = _t(rng.normal(size=(3, features)))
    h_t, h_o = _t(rng.normal(size=(3, 5)))
    c_t, c_o = _t(rng.normal(size=(3, 5)))
    w1, w2 = rng.normal(size=(3, 5)), rng.normal(size=(3, 5))
    if kind == "LSTMCell":
        (h1_t, c1_t), (h1_o, c1_o) = theirs(x_t, (h_t, c_t)), ours(x_o, (h_o, c_o))
        _close(c1_o, c1_t, "c1")
        loss_t = (h1_t * torch.tensor(w1)).sum() + (c1_t * torch.tensor(w2)).sum()
        loss_o = (h1_o * tf.tensor(w1, dtype=tf.float64)).sum() + (c1_o * tf.tensor(w2, dtype=tf.float64)).sum()
    else:
        h1_t, h1_o = theirs(x_t, h_t), ours(x_o, h_o)
        loss_t = (h1_t * torch.tensor(w1)).sum()
        loss_o = (h1_o * tf.tensor(w1, dtype=tf.float64)).sum()
    _close(h1_o, h1_t, "h1")
    loss_t.backward()
    loss_o.backward()
    _close(x_o.grad, x_t.grad, "input gradient")
    _close(h_o.grad, h_t.grad, "h gradient")
    if kind == "LSTMCell":
        _close(c_o.grad, c_t.grad, "c gradient")
    _compare_params(ours, theirs)
    # No state means zeros; unbatched input gives unbatched output.
    out = ours(tf.tensor(rng.normal(size=features), dtype=tf.float64))
    first = out[0] if kind == "LSTMCell" else out
    assert first.shape == (5,)


def test_embedding_matches_pytorch_with_padding_idx():
    rng = np.random.default_rng(5)
    theirs = torch.nn.Embedding(7, 3, padding_idx=2).double()
    ours = nn.Embedding(7, 3, padding_idx=2, dtype=tf.float64)
    np.testing.assert_array_equal(ours.weight.numpy()[2], 0.0)  # the padding row starts at zero
    ours.load_state_dict(theirs.state_dict())
    ids = rng.integers(0, 7, size=(4, 5))
    ids[0, :3] = 2  # padding ids, and plenty of repeats
    w = rng.normal(size=(4, 5, 3))
    out_t, out_o = theirs(torch.tensor(ids)), ours(tf.tensor(ids))
    _close(out_o, out_t, "embedding output")
    (out_t * torch.tensor(w)).sum().backward()
    (out_o * tf.tensor(w, dtype=tf.float64)).sum().backward()
    _close(ours.weight.grad, theirs.weight.grad, "embedding gradient")
    np.testing.assert_array_equal(ours.weight.grad.numpy()[2], 0.0)


def test_embedding_rejects_bad_ids():
    emb = nn.Embedding(4, 2)
    with pytest.raises(IndexError, match=r"embedding: index 4 is out of range for a weight of 4 rows"):
        emb(tf.tensor([1, 4]))
    with pytest.raises(TypeError, match="indices must be an integer tensor"):
        emb(tf.tensor([1.0, 2.0]))
    frozen = nn.Embedding.from_pretrained(np.eye(3))
    assert frozen.weight.requires_grad is False
    np.testing.assert_array_equal(frozen(tf.tensor([2])).numpy(), [[0, 0, 1]])
