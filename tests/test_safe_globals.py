"""``tinyflow.serialization.safe_globals`` / ``add_safe_globals`` / ``get_safe_globals``: PyTorch's
allowlist for ``load(weights_only=True)`` of a whole pickled object, checked beside torch's own.

The differential tests run one scenario on each framework (``fw`` is ``tinyflow`` or ``torch``):
save a whole model, then load it while adding, one by one, the globals the refusals name. Both
must refuse the same globals in the same order (mapped from torch.nn.* to tinyflow.nn.*), and
load once the same allowlist is given.
"""
from __future__ import annotations

import os
import pickle
from typing import Any

import numpy as np
import pytest

import tinyflow as tf
import tinyflow.nn as tnn
from tinyflow import serialization


@pytest.fixture(autouse=True)
def _empty_allowlist() -> Any:
    """Every test starts and ends with no user allowlist (it is process-wide, as PyTorch's)."""
    serialization.clear_safe_globals()
    yield
    serialization.clear_safe_globals()


def _word_lm(fw: Any) -> Any:
    """pytorch/examples' word language model: the module it saves whole and loads under safe_globals."""
    nn = fw.nn

    class RNNModel(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.drop = nn.Dropout(0.2)
            self.encoder = nn.Embedding(11, 4)
            self.rnn = nn.LSTM(4, 6, 2, dropout=0.2)
            self.decoder = nn.Linear(6, 11)
            self.nhid, self.nlayers = 6, 2

    RNNModel.__module__, RNNModel.__qualname__ = __name__, "RNNModel"
    globals()["RNNModel"] = RNNModel  # pickle finds a class by module and name, as the example's model.RNNModel
    return RNNModel()


def _refusals_until_loaded(fw: Any, path: str) -> list[str]:
    """Load ``path`` with weights_only=True, allowlisting each refused global in turn; the refused
    globals' names in order (a refusal must name one, in PyTorch's words)."""
    load = fw.load
    allow: list[Any] = []
    refused: list[str] = []
    for _ in range(10):
        try:
            with fw.serialization.safe_globals(allow):
                return refused if load(path, weights_only=True) is not None else refused
        except pickle.UnpicklingError as exc:
            message = str(exc)
            assert "Unsupported global: GLOBAL " in message and "was not an allowed global by default" in message
            name = message.split("Unsupported global: GLOBAL ", 1)[1].split()[0]
            refused.append(name)
            module, _, attr = name.rpartition(".")
            obj = globals()[attr] if module == __name__ else getattr(__import__(module, fromlist=[attr]), attr)
            allow.append(obj)
    raise AssertionError(f"{fw.__name__}: still refused after allowlisting {refused}")


def test_whole_model_refusals_and_allowlist_match_torch(tmp_path) -> None:
    torch = pytest.importorskip("torch")
    sequences = {}
    for fw in (tf, torch):
        path = str(tmp_path / f"{fw.__name__}.pt")
        fw.save(_word_lm(fw), path)
        sequences[fw.__name__] = _refusals_until_loaded(fw, path)
    ours = [name.replace("tinyflow.", "torch.", 1) for name in sequences["tinyflow"]]
    assert sequences["tinyflow"][0] == f"{__name__}.RNNModel"
    assert ours == sequences["torch"]


def test_safe_globals_loads_the_model_and_restores_the_allowlist(tmp_path) -> None:
    model = _word_lm(tf)
    path = tmp_path / "model.pt"
    tf.save(model, path)
    serialization.add_safe_globals([tnn.Dropout])
    before = serialization.get_safe_globals()
    with serialization.safe_globals([RNNModel, tnn.Embedding, tnn.LSTM, tnn.Linear]):  # noqa: F821
        assert len(serialization.get_safe_globals()) == 5
        back = tf.load(path)  # weights_only=True is the default
    assert serialization.get_safe_globals() == before
    assert type(back).__name__ == "RNNModel" and back.nhid == 6
    for (name, a), (name_b, b) in zip(model.state_dict().items(), back.state_dict().items()):
        assert name == name_b and np.array_equal(a.numpy(), b.numpy())
    with pytest.raises(pickle.UnpicklingError, match=r"GLOBAL .*RNNModel was not an allowed global"):
        tf.load(path)  # outside the block the model's class is refused again


def test_add_get_clear_and_pairs_for_moved_classes(tmp_path) -> None:
    model = tnn.Sequential(tnn.Linear(2, 3), tnn.ReLU())
    path = tmp_path / "seq.pt"
    tf.save(model, path)
    with pytest.raises(pickle.UnpicklingError, match="tinyflow.nn.modules.container.Sequential"):
        tf.load(path)
    serialization.add_safe_globals([tnn.Sequential, tnn.Linear])
    serialization.add_safe_globals([tnn.Sequential])  # twice: listed once
    assert serialization.get_safe_globals() == [tnn.Sequential, tnn.Linear]
    with pytest.raises(pickle.UnpicklingError, match="tinyflow.nn.modules.activation.ReLU"):
        tf.load(path)
    # A class the file names under another path (it has moved since): allowlisted as a pair.
    serialization.add_safe_globals([(tnn.ReLU, "tinyflow.nn.modules.activation.ReLU")])
    back = tf.load(path)
    assert np.allclose(back[0].weight.numpy(), model[0].weight.numpy())
    serialization.clear_safe_globals()
    assert serialization.get_safe_globals() == []
    with pytest.raises(TypeError, match="add_safe_globals"):
        serialization.add_safe_globals([3])


class _System:
    """Unpickles as os.system(command): what a malicious file does."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self) -> Any:
        return os.system, (self.command,)


class _Eval:
    def __init__(self, source: str) -> None:
        self.source = source

    def __reduce__(self) -> Any:
        return eval, (self.source,)


@pytest.mark.parametrize("framework", ["tinyflow", "torch"])
@pytest.mark.parametrize("payload", ["system", "eval"])
def test_a_malicious_pickle_is_refused_by_default_and_under_an_unrelated_allowlist(tmp_path, framework, payload) -> None:
    fw = tf if framework == "tinyflow" else pytest.importorskip("torch")
    marker = tmp_path / "pwned"
    evil = _System(f"touch {marker}") if payload == "system" else _Eval(f"open({str(marker)!r}, 'w').close()")
    path = tmp_path / "evil.pt"
    fw.save({"weights": fw.zeros(2), "config": evil}, path)
    with pytest.raises(pickle.UnpicklingError):
        fw.load(path)
    with fw.serialization.safe_globals([fw.nn.Linear, fw.nn.Sequential]), pytest.raises(pickle.UnpicklingError):
        fw.load(path)
    assert not marker.exists()


def test_refusal_is_one_line_naming_the_file_the_global_and_the_ways_out(tmp_path) -> None:
    path = tmp_path / "evil.pt"
    tf.save(_System("true"), path)
    with pytest.raises(serialization.WeightsOnlyUnpicklingError) as info:
        tf.load(path)
    message = str(info.value)
    assert "\n" not in message and str(path) in message
    assert "whose module" in message and "is blocked" in message  # os.system: PyTorch's words for a blocked module
    assert info.value.global_name.endswith(".system") and info.value.pickled_class.endswith("_System")
    assert "weights_only=False" in message and "state_dict()" in message


def test_default_allowlist_builds_tinyflow_types_without_user_entries(tmp_path) -> None:
    """Devices, dtypes, numpy scalars and OrderedDicts inside a pickled object need no allowlist,
    as torch.device and dtypes need none in PyTorch; the object's own class still does."""

    class Holder:
        pass

    Holder.__module__, Holder.__qualname__ = __name__, "Holder"
    globals()["Holder"] = Holder
    holder = Holder()
    holder.device, holder.dtype, holder.scale = tf.device("cpu"), np.dtype("float32"), np.float32(0.5)
    holder.table = __import__("collections").OrderedDict(a=1)
    path = tmp_path / "holder.pt"
    tf.save(holder, path)
    with serialization.safe_globals([Holder]):
        back = tf.load(path)
    assert back.device == tf.device("cpu") and back.dtype == np.float32 and back.scale == np.float32(0.5)
    assert back.table == {"a": 1}
