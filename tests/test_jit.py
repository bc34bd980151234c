"""tinyflow.jit: torch.jit's entry points for programs that script or trace their model."""
from __future__ import annotations

import numpy as np
import pytest

import tinyflow as tf
import tinyflow.nn as nn


class Branchy(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(3, 2)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        y = self.fc(x)
        return y * 2 if x.sum().item() > 0 else y  # data-dependent: eager keeps both branches

    @tf.jit.ignore
    def helper(self) -> int:
        return 7

    @tf.jit.export
    def other(self, x):
        return self.fc(x).sum()


def test_script_and_trace_return_the_same_model_that_still_trains():
    tf.manual_seed(0)
    model = Branchy()
    assert tf.jit.script(model) is model and model.helper() == 7
    x = tf.ones(4, 3)
    traced = tf.jit.trace(model, x)
    assert traced is model and model.calls == 1  # trace ran it once, on the example
    assert model.fc.weight.grad is None  # ... without recording gradients
    neg = -tf.ones(4, 3)
    np.testing.assert_allclose(traced(neg).numpy(), model.fc(neg).numpy())  # the other branch, eagerly
    traced(x).sum().backward()
    assert model.fc.weight.grad is not None
    assert tf.jit.trace_module(model, {"other": (x,)}) is model


def test_decorators_and_queries():
    @tf.jit.script
    def double(x):
        return x * 2

    @tf.jit.script()
    def triple(x):
        return x * 3

    assert double(tf.tensor(2.0)).item() == 4.0 and triple(tf.tensor(2.0)).item() == 6.0
    assert tf.jit.unused(double) is double and tf.jit.ignore(drop=True)(double) is double
    assert tf.jit.is_scripting() is False and tf.jit.is_tracing() is False
    assert tf.jit.annotate(list, [1]) == [1]
    assert not isinstance(double, tf.jit.ScriptModule)


def test_freeze_needs_eval_and_errors_are_one_clear_line(tmp_path):
    model = Branchy()
    with pytest.raises(RuntimeError, match="module is in training mode; call module.eval"):
        tf.jit.freeze(model)
    assert tf.jit.freeze(model.eval()) is model
    assert tf.jit.optimize_for_inference(Branchy()).training is False
    with pytest.raises(TypeError, match="jit.script: expected a Module or a function, got int"):
        tf.jit.script(3)
    with pytest.raises(ValueError, match="jit.trace: give example_inputs"):
        tf.jit.trace(model)
    with pytest.raises(RuntimeError, match=r"tinyflow.save\(model.state_dict\(\), path\)"):
        tf.jit.save(model, tmp_path / "m.pt")
    with pytest.raises(RuntimeError, match="cannot read TorchScript archives"):
        tf.jit.load(tmp_path / "m.pt")
