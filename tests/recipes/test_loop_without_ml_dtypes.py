"""The training loop on a base install, where ml_dtypes is missing (issue 20).

`pip install -e .` leaves out ml_dtypes (only the test and cuda extras bring it), and the loop ran
every step under ``autocast("bf16", enabled=False)``, which imported it: the README's first
command died on its first step. Amp off must not need ml_dtypes; ``amp="bf16"`` without it must
fail before the first step, saying how to install it.
"""
from __future__ import annotations

import sys

import numpy as np
import pytest

import tinyflow as tf
import tinyflow.nn as nn
from tinyflow import amp
from tinyflow.data import DataLoader, Dataset
from tinyflow.recipes.loop import FitOptions, fit
from tinyflow.recipes.vision import CLASSIFICATION, classification_step


@pytest.fixture
def no_ml_dtypes(monkeypatch: pytest.MonkeyPatch) -> None:
    """`import ml_dtypes` raises ImportError, as on a base install."""
    monkeypatch.setitem(sys.modules, "ml_dtypes", None)


class Blobs(Dataset):
    def __init__(self, n: int) -> None:
        rng = np.random.default_rng(0)
        self.y = rng.integers(0, 3, n)
        self.x = (self.y[:, None] + 0.5 * rng.normal(size=(n, 4))).astype(np.float32)

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int):
        return self.x[i], int(self.y[i])


def _fit(amp_dtype: str | None, steps: list[int]) -> tuple[nn.Module, dict[str, np.ndarray]]:
    tf.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    before = {k: v.numpy().copy() for k, v in model.state_dict().items()}

    def step(m, batch):  # noqa: ANN001, ANN202
        steps.append(1)
        return classification_step(m, batch)

    fit(model, DataLoader(Blobs(16), batch_size=8, shuffle=True, seed=1), step, epochs=1,
        optimizer=tf.optim.SGD(model.parameters(), lr=0.1), metrics=CLASSIFICATION,
        options=FitOptions(amp=amp_dtype, progress=False))
    return model, before


def test_fit_with_amp_off_needs_no_ml_dtypes(no_ml_dtypes: None) -> None:
    steps: list[int] = []
    model, before = _fit(None, steps)
    assert len(steps) == 2
    after = model.state_dict()
    assert all(after[k].dtype == np.float32 for k in before)
    assert any(not np.array_equal(after[k].numpy(), v) for k, v in before.items())  # it trained
    assert "ml_dtypes" not in [name for name, module in sys.modules.items() if module is not None]


def test_fit_with_bf16_amp_without_ml_dtypes_says_how_to_install_it(no_ml_dtypes: None) -> None:
    steps: list[int] = []
    with pytest.raises(TypeError, match=r"pip install ml_dtypes.*cuda") as info:
        _fit("bf16", steps)
    assert steps == []  # before the first step
    assert info.value.__suppress_context__ or info.value.__context__ is None  # one message, no chained traceback


def test_fit_with_fp16_amp_needs_no_ml_dtypes(no_ml_dtypes: None) -> None:
    steps: list[int] = []
    _fit("fp16", steps)
    assert len(steps) == 2


def test_a_disabled_autocast_needs_no_ml_dtypes(no_ml_dtypes: None) -> None:
    for disabled in (amp.autocast("bf16", enabled=False), amp.autocast(enabled=False),
                     amp.autocast("cpu", enabled=False), amp.autocast("cpu", dtype="bfloat16", enabled=False)):
        with disabled as dtype:
            assert dtype is None and amp.autocast_dtype() is None
    with amp.autocast("fp16"):  # a float32 island inside an enabled block
        with amp.autocast("bf16", enabled=False):
            assert amp.autocast_dtype() is None
        assert amp.autocast_dtype() == np.float16
    with pytest.raises(ValueError, match="autocast"):  # names are still checked, enabled or not
        amp.autocast("fp8", enabled=False)


def test_an_enabled_bf16_autocast_without_ml_dtypes_says_how_to_install_it(no_ml_dtypes: None) -> None:
    for make in (lambda: amp.autocast("bf16"), lambda: amp.autocast("cpu"), lambda: amp.autocast(dtype="bfloat16")):
        with pytest.raises(TypeError, match=r"`pip install ml_dtypes`"):
            make()
    with pytest.raises(TypeError, match=r"`pip install ml_dtypes`"):  # the dtype of a disabled one, asked for
        amp.autocast("bf16", enabled=False).fast_dtype  # noqa: B018


def test_fast_dtype_of_a_disabled_autocast_is_still_its_dtype() -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    assert amp.autocast("bf16", enabled=False).fast_dtype == np.dtype(ml_dtypes.bfloat16)
    assert amp.autocast("fp16", enabled=False).fast_dtype == np.float16
    assert amp.autocast("cpu", enabled=False).fast_dtype == np.dtype(ml_dtypes.bfloat16)


def test_train_amp_bf16_without_ml_dtypes_is_one_clear_line(no_ml_dtypes: None, tmp_path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    from tinyflow import cli

    rc = cli.main(["train", "alexnet", "--amp", "bf16", "--data", str(tmp_path / "missing"),
                   "--checkpoint-dir", str(tmp_path / "run"), "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err
    assert "--amp bf16" in err and "pip install ml_dtypes" in err and len(err.strip().splitlines()) == 1
