"""tinyflow.capture.Capture: the slots a captured CUDA graph reads, refilled before replays."""
from __future__ import annotations

import numpy as np


def test_a_capture_refills_its_slots_each_replay_and_its_constant_slots_once():
    """Per-step values (lr, seeds) are copied before every replay; a table of device addresses,
    which the graph fixes anyway, only before the first (no host-to-device copy a step for it)."""
    import tinyflow as tf
    from tinyflow.capture import Capture

    draws = iter(range(100))
    capture = Capture(tf.device("cpu"))
    step = capture.slot(lambda: next(draws), np.int64)
    table = capture.slot(lambda: [7, 8], np.uint64, 2, constant=True)
    calls = []
    table_value = capture.slots[1].value
    capture.slots[1].value = lambda: calls.append(1) or table_value()
    for _ in range(3):
        capture.refresh()
    assert step.tolist() == [2] and table.tolist() == [7, 8] and len(calls) == 1
