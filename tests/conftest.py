"""Shared test configuration: hypothesis profiles and skipping of gpu tests without a GPU."""
from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

# CI gates every landing, so its examples are the same on every run (derandomize): a red CI is a
# real regression, never a new random example. HYPOTHESIS_PROFILE=thorough explores (random, 300).
settings.register_profile(
    "default", max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)
settings.register_profile("thorough", max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    import tinyflow_cuda

    if tinyflow_cuda.is_available():
        return
    skip = pytest.mark.skip(reason=f"needs a CUDA GPU: {tinyflow_cuda.unavailable_reason()}")
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip)
