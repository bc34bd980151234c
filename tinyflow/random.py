"""Random number generation: seeded generators for reproducible runs.

tinyflow draws every random array on the host from a NumPy ``Generator`` (PCG64) and moves it to
the tensor's device, so the same seed gives the same numbers on the CPU and on a GPU.
"""
from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["Generator", "manual_seed", "default_generator", "seed", "get_rng_state", "set_rng_state"]


class Generator:
    """A seeded source of random numbers, like ``torch.Generator``."""

    def __init__(self, seed: int | None = None) -> None:
        self.manual_seed(np.random.SeedSequence().entropy if seed is None else seed)

    def manual_seed(self, seed: int) -> Generator:
        self._seed = int(seed)
        self.rng = np.random.Generator(np.random.PCG64(self._seed))
        return self

    def initial_seed(self) -> int:
        return self._seed

    def get_state(self) -> dict[str, Any]:
        """The generator's full state (JSON-serialisable), for checkpoints."""
        return {"seed": self._seed, "bit_generator": self.rng.bit_generator.state}

    def set_state(self, state: dict[str, Any]) -> None:
        self._seed = int(state["seed"])
        self.rng = np.random.Generator(np.random.PCG64())
        self.rng.bit_generator.state = state["bit_generator"]


default_generator = Generator(0)


def manual_seed(seed: int) -> Generator:
    """Seed the default generator (and NumPy's legacy global one, for user code that uses it)."""
    np.random.seed(int(seed) % 2**32)
    return default_generator.manual_seed(seed)


def seed() -> int:
    """Seed the default generator from OS entropy and return the seed."""
    s = int(np.random.SeedSequence().entropy % 2**63)
    default_generator.manual_seed(s)
    return s


def get_rng_state() -> dict[str, Any]:
    return default_generator.get_state()


def set_rng_state(new_state: dict[str, Any]) -> None:
    default_generator.set_state(new_state)


def rng(generator: Generator | None = None) -> np.random.Generator:
    """The NumPy generator behind ``generator`` (the default one when None)."""
    return (generator or default_generator).rng
