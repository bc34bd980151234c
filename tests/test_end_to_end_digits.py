"""End to end: an MLP trained with SGD-momentum on scikit-learn's digits reaches >= 97% test accuracy."""
from __future__ import annotations

import pytest

pytest.importorskip("sklearn")


def test_mlp_learns_digits():
    from tinyflow.recipes.digits import train_mlp_on_digits

    assert train_mlp_on_digits() >= 0.97
