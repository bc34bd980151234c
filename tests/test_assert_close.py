"""tinyflow.testing.assert_close against torch.testing.assert_close: the same pass/fail decisions."""
from __future__ import annotations

import numpy as np
import pytest

import tinyflow as tf

torch = pytest.importorskip("torch")

CASES = [  # (actual, expected, kwargs)
    ([1.0, 2.0], [1.0, 2.0 + 1e-6], {}),
    ([1.0, 2.0], [1.0, 2.0 + 1e-3], {}),
    ([1.0, 2.0], [1.0, 2.1], {"rtol": 0.1, "atol": 0.0}),
    ([1.0, float("nan")], [1.0, float("nan")], {}),
    ([1.0, float("nan")], [1.0, float("nan")], {"equal_nan": True}),
    ([0.0], [1e-6], {}),
    ([0.0], [2e-5], {}),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("actual, expected, kwargs", CASES)
def test_same_verdict_as_torch(actual, expected, kwargs, dtype):
    verdicts = []
    for lib, check in ((tf, tf.testing.assert_close), (torch, torch.testing.assert_close)):
        a = lib.tensor(np.array(actual, dtype=dtype))
        e = lib.tensor(np.array(expected, dtype=dtype))
        try:
            check(a, e, **kwargs)
            verdicts.append(True)
        except AssertionError:
            verdicts.append(False)
    assert verdicts[0] == verdicts[1]


def test_messages_nesting_and_argument_errors():
    with pytest.raises(AssertionError, match=r"Mismatched elements: 1 / 2 \(50.0%\)\nGreatest absolute difference: 0.5"):
        tf.testing.assert_close(tf.tensor([1.0, 2.0]), tf.tensor([1.0, 2.5]))
    with pytest.raises(AssertionError, match="not equal in dtype: float64 != float32"):
        tf.testing.assert_close(tf.zeros(2, dtype=tf.float64), tf.zeros(2))
    tf.testing.assert_close(tf.zeros(2, dtype=tf.float64), tf.zeros(2), check_dtype=False)
    with pytest.raises(AssertionError, match="not equal in shape"):
        tf.testing.assert_close(tf.zeros(2), tf.zeros(3))
    tf.testing.assert_close({"w": tf.ones(2), "n": [1, 2]}, {"w": tf.ones(2), "n": [1, 2]})
    with pytest.raises(AssertionError, match=r"\['n'\]\[1\]"):
        tf.testing.assert_close({"n": [1, 2]}, {"n": [1, 3]})
    with pytest.raises(AssertionError, match="custom"):
        tf.testing.assert_close(1.0, 2.0, msg="custom")
    with pytest.raises(ValueError, match="give both rtol and atol or neither"):
        tf.testing.assert_close(1.0, 1.0, rtol=0.1)
    with pytest.raises(TypeError, match="cannot compare a str"):
        tf.testing.assert_close("a", "a")
