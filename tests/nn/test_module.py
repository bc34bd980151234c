"""Module: registration, naming, state_dict round trips (incl. PyTorch's), modes, hooks, repr."""
from __future__ import annotations

import numpy as np
import pytest

import tinyflow as tf
import tinyflow.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
        self.scale = nn.Parameter(tf.ones(3))
        self.register_buffer("count", tf.zeros(1))
        self.heads = nn.ModuleList([nn.Linear(3, 2), nn.Linear(3, 2, bias=False)])

    def forward(self, x):
        return self.heads[0](self.body(x) * self.scale)


def test_registration_and_pytorch_names():
    net = Net()
    names = [n for n, _ in net.named_parameters()]
    assert names == ["scale", "body.0.weight", "body.0.bias", "body.2.weight", "body.2.bias",
                     "heads.0.weight", "heads.0.bias", "heads.1.weight"]
    assert list(net.state_dict()) == names[:1] + ["count"] + names[1:]
    assert [n for n, _ in net.named_buffers()] == ["count"]
    assert len(list(net.children())) == 2 and len(list(net.modules())) == 8
    assert net.body[0].weight.shape == (8, 4)


def test_shared_parameters_are_listed_once():
    lin = nn.Linear(2, 2)
    seq = nn.Sequential(lin, lin)
    assert len(list(seq.parameters())) == 2


def test_state_dict_round_trip_and_strict_errors():
    a, b = Net(), Net()
    b.load_state_dict(a.state_dict())
    for (n, p), (_, q) in zip(a.named_parameters(), b.named_parameters()):
        np.testing.assert_array_equal(p.numpy(), q.numpy(), err_msg=n)
    sd = dict(a.state_dict())
    sd.pop("scale")
    sd["extra.weight"] = np.zeros(1)
    with pytest.raises(KeyError, match=r"Missing keys: \['scale'\]. Unexpected keys: \['extra.weight'\]"):
        b.load_state_dict(sd)
    missing, unexpected = b.load_state_dict(sd, strict=False)
    assert missing == ["scale"] and unexpected == ["extra.weight"]
    sd = dict(a.state_dict())
    sd["body.0.weight"] = np.zeros((5, 4))
    with pytest.raises(ValueError, match=r"body.0.weight: checkpoint \(5, 4\) vs model \(8, 4\)"):
        b.load_state_dict(sd)


def test_loads_a_pytorch_state_dict_and_matches_outputs():
    torch = pytest.importorskip("torch")
    ref = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    ours = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))
    ours.load_state_dict(ref.state_dict())
    x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    np.testing.assert_allclose(ours(tf.tensor(x)).numpy(), ref(torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-6)


def test_default_init_matches_pytorch_statistics():
    # kaiming_uniform(a=sqrt(5)) gives U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for the weight and the bias
    lin = nn.Linear(400, 300)
    bound = 1 / np.sqrt(400)
    w = lin.weight.numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.95 * bound
    np.testing.assert_allclose(w.std(), bound / np.sqrt(3), rtol=0.05)
    assert np.abs(lin.bias.numpy()).max() <= bound


def test_init_functions():
    w = tf.empty(256, 128)
    nn.init.kaiming_normal_(w, nonlinearity="relu")
    np.testing.assert_allclose(w.numpy().std(), np.sqrt(2 / 128), rtol=0.05)
    nn.init.xavier_uniform_(w)
    assert np.abs(w.numpy()).max() <= np.sqrt(6 / (256 + 128))
    nn.init.zeros_(w)
    assert not w.numpy().any()


def test_train_eval_dropout_and_zero_grad():
    net = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
    net.eval()
    assert not net[1].training
    x = tf.ones(2, 4)
    np.testing.assert_array_equal(net(x).numpy(), net(x).numpy())
    net.train()
    net(x).sum().backward()
    assert net[0].weight.grad is not None
    net.zero_grad()
    assert net[0].weight.grad is None


def test_dropout_is_inverted_and_seeded():
    x = tf.ones(10_000)
    tf.manual_seed(0)
    y = nn.functional.dropout(x, 0.3)
    kept = y.numpy() != 0
    np.testing.assert_allclose(kept.mean(), 0.7, atol=0.02)
    np.testing.assert_allclose(y.numpy()[kept], 1 / 0.7, rtol=1e-6)
    tf.manual_seed(0)
    np.testing.assert_array_equal(nn.functional.dropout(x, 0.3).numpy(), y.numpy())


def test_to_dtype_casts_parameters_in_place():
    net = Net()
    p = net.body[0].weight
    net.to(tf.float64)
    assert net.body[0].weight is p and p.dtype == tf.float64
    assert net.count.dtype == tf.float64


def test_forward_hooks():
    lin = nn.Linear(2, 2)
    calls = []
    remove = lin.register_forward_hook(lambda m, inp, out: calls.append(out.shape))
    lin(tf.ones(3, 2))
    remove()
    lin(tf.ones(3, 2))
    assert calls == [(3, 2)]


def test_repr_like_pytorch():
    text = repr(nn.Sequential(nn.Linear(2, 3), nn.ReLU()))
    assert text == "Sequential(\n  (0): Linear(in_features=2, out_features=3, bias=True)\n  (1): ReLU()\n)"


def test_assigning_before_init_is_clear():
    class Bad(nn.Module):
        def __init__(self):
            self.lin = nn.Linear(1, 1)

    with pytest.raises(AttributeError, match="super\\(\\).__init__\\(\\)"):
        Bad()
