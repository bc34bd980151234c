"""The timed cost model of ``auto``: ring, tree or the transport's native all-reduce per buffer size.

``auto`` (allreduce.py's default) chooses by a fixed size rule until a world has been timed here;
from then on its choice comes from an alpha-beta cost model fitted once per world (per
communicator, kept as ``comm.allreduce_model``): the
first time a world needs it, every rank times each candidate at a ladder of buffer sizes
(4 KB, 16 KB, ..., then doubling from 1 MB), the ranks take the slowest rank's time of each
(so every rank holds the same table and makes the same choice, which a collective needs), and
between two neighbouring sizes each algorithm is the straight line through its two times:

    t(n) = alpha_band + beta_band * n

i.e. a latency (alpha) and a per-byte cost (beta) per size band. Small buffers are
latency-bound and go to the candidate with the smallest alpha (MPI's own all-reduce on the
CPU, the tree over a plain ring), large ones to the smallest beta. One straight line over
all sizes does not fit real transports: MPI switches protocols with the size, and caches
make mid-sized buffers cheap; the bands follow that.

The ladder only grows as far as the largest buffer asked for (all ranks ask for the same
sizes in the same order, so all ranks extend it together). ``DataParallel(..., calibrate=True)``
(what ``tinyflow train`` builds) calibrates up to its largest bucket when it is built, so no
training step pays for it; a plain ``DataParallel`` never loads this module.
``calibrate(comm, n, measure=...)`` takes a fake timer (tests), ``set_model`` installs a table
directly.
"""
from __future__ import annotations

import bisect
import statistics
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tinyflow.device import array_module, to_host
from tinyflow.parallel.communicator import Communicator, has_native_allreduce
from tinyflow.parallel.gather import all_gather_object
from tinyflow.parallel.native import native_allreduce
from tinyflow.parallel.ring import ring_allreduce
from tinyflow.parallel.tree import tree_allreduce

CANDIDATES: dict[str, Callable[..., None]] = {
    "ring": ring_allreduce,
    "tree": tree_allreduce,
    "native": native_allreduce,
}
_K, _M = 1024, 1024 * 1024
LADDER = (4 * _K, 16 * _K, 64 * _K, 256 * _K, 1 * _M, 2 * _M, 4 * _M, 8 * _M, 16 * _M, 32 * _M,
          64 * _M, 128 * _M, 256 * _M)
BUDGET_SECONDS = 0.05  # timed seconds per (size, algorithm), at least MIN_ITERS calls
MIN_ITERS, MAX_ITERS = 5, 25

_models: weakref.WeakKeyDictionary[Communicator, AutoModel] = weakref.WeakKeyDictionary()
# the hot path: id(comm) -> (a weak reference to comm, {nbytes: algorithm function}); an entry
# counts only while its reference still points at the same communicator
_fast: dict[int, tuple[weakref.ref, dict[int, Callable[..., None]]]] = {}


@dataclass
class AutoModel:
    """Measured seconds of each candidate at each ladder size, and the choices they imply."""

    world: int
    candidates: tuple[str, ...]
    sizes: list[int] = field(default_factory=list)
    times: dict[str, list[float]] = field(default_factory=dict)
    _choices: dict[int, str] = field(default_factory=dict, repr=False, compare=False)  # nbytes -> choice

    def band(self, algorithm: str, nbytes: float) -> tuple[float, float]:
        """(alpha, beta) of ``algorithm`` in the size band around ``nbytes``."""
        sizes, times = self.sizes, self.times[algorithm]
        if len(sizes) == 1:
            return times[0], 0.0
        i = bisect.bisect_right(sizes, nbytes) - 1
        i = min(max(i, 0), len(sizes) - 2)
        beta = (times[i + 1] - times[i]) / (sizes[i + 1] - sizes[i])
        if nbytes > sizes[-1]:
            beta = max(beta, 0.0)  # extrapolating: time never falls with size
        return times[i] - beta * sizes[i], beta

    def predict(self, algorithm: str, nbytes: float) -> float:
        """Seconds for one all-reduce of ``nbytes`` bytes (the band's straight line)."""
        if not self.sizes:
            raise RuntimeError("auto all-reduce: the cost model has not been calibrated")
        if nbytes <= self.sizes[0]:
            return self.times[algorithm][0]  # below the ladder: latency-bound, as at its foot
        alpha, beta = self.band(algorithm, nbytes)
        return alpha + beta * nbytes

    def choose(self, nbytes: float) -> str:
        """The candidate with the smallest predicted time (the first listed on a tie).

        Remembered per size: a training step asks about the same few bucket sizes every time,
        and the choice must cost next to nothing beside a small all-reduce."""
        choice = self._choices.get(nbytes)
        if choice is None:
            choice = min(self.candidates, key=lambda a: self.predict(a, nbytes))
            self._choices[nbytes] = choice
        return choice

    def covers(self, nbytes: float) -> bool:
        """True when the ladder reaches ``nbytes`` (or its top, beyond which it extrapolates)."""
        return len(self.sizes) >= 2 and (self.sizes[-1] >= nbytes or self.sizes[-1] == LADDER[-1])

    def describe(self) -> str:
        """One line per ladder size: each candidate's time and the choice."""
        lines = [f"auto all-reduce cost model, {self.world} ranks (us per call; slowest rank)"]
        for i, size in enumerate(self.sizes):
            cells = "  ".join(f"{a} {self.times[a][i] * 1e6:9.1f}" for a in self.candidates)
            lines.append(f"  {_human(size):>5}: {cells}  -> {self.choose(size)}")
        return "\n".join(lines)


def candidates_for(comm: Communicator) -> tuple[str, ...]:
    """ring and tree always; native where the transport has its own all-reduce."""
    return ("ring", "tree", "native") if has_native_allreduce(comm) else ("ring", "tree")


def model_for(comm: Communicator) -> AutoModel | None:
    """The calibrated model of ``comm``'s world, or None before the first calibration."""
    return _models.get(comm)


def set_model(comm: Communicator, model: AutoModel) -> None:
    """Install a cost model for ``comm`` (every rank must install the same one)."""
    _models[comm] = comm.allreduce_model = model
    _fast.pop(id(comm), None)


def ladder_upto(nbytes: float) -> list[int]:
    """The ladder sizes needed to cover ``nbytes``: up to the first one >= it (at least two)."""
    sizes = []
    for size in LADDER:
        sizes.append(size)
        if size >= nbytes and len(sizes) >= 2:
            break
    return sizes


def calibrate(
    comm: Communicator,
    nbytes: float,
    like: Any = None,
    measure: Callable[[str, int], float] | None = None,
) -> AutoModel:
    """Make ``comm``'s model cover buffers of ``nbytes`` bytes (collective: every rank calls it).

    ``like``: an array whose device the timing buffers live on (default: NumPy).
    ``measure(algorithm, nbytes) -> seconds`` replaces the timing (for tests).
    """
    model = _models.get(comm)
    if model is None:
        model = AutoModel(comm.size, candidates_for(comm))
        _models[comm] = comm.allreduce_model = model  # from now on auto asks this model
    new = [s for s in ladder_upto(nbytes) if s not in model.sizes]
    if not new:
        return model
    if measure is not None:
        measured = {a: [float(measure(a, s)) for s in new] for a in model.candidates}
    else:
        measured = _time_candidates(comm, model.candidates, new, like)
    for algorithm in model.candidates:
        model.times.setdefault(algorithm, [])
    merged = sorted(zip(model.sizes + new, *(model.times[a] + measured[a] for a in model.candidates)))
    model.sizes = [row[0] for row in merged]
    model._choices.clear()
    _fast.pop(id(comm), None)
    for j, algorithm in enumerate(model.candidates, start=1):
        model.times[algorithm] = [row[j] for row in merged]
    return model


def _time_candidates(comm: Communicator, candidates: Sequence[str], sizes: Sequence[int],
                     like: Any) -> dict[str, list[float]]:
    """Each rank times each candidate at each size, alternating; the slowest rank's medians."""
    xp = array_module(like) if like is not None else np
    on_host = xp is np
    mine: dict[str, list[float]] = {a: [] for a in candidates}
    for size in sizes:
        buf = xp.zeros(max(1, size // 4), dtype=np.float32)  # zeros: sums stay finite and cheap
        first = [_timed(a, buf, comm, on_host) for a in candidates]  # warm-up, and how long one call takes
        slowest = max(max(t) for t in all_gather_object(first, comm))  # agreed: same count everywhere
        iters = int(min(MAX_ITERS, max(MIN_ITERS, BUDGET_SECONDS / max(slowest, 1e-9))))
        samples: dict[str, list[float]] = {a: [] for a in candidates}
        for _ in range(iters):
            for algorithm in candidates:  # alternate, so load changes hit every candidate alike
                samples[algorithm].append(_timed(algorithm, buf, comm, on_host))
        for algorithm in candidates:
            mine[algorithm].append(statistics.median(samples[algorithm]))
    everyone = all_gather_object(mine, comm)
    return {a: [max(rank[a][i] for rank in everyone) for i in range(len(sizes))] for a in candidates}


def _timed(algorithm: str, buf: Any, comm: Communicator, on_host: bool) -> float:
    start = time.perf_counter()
    CANDIDATES[algorithm](buf, comm)
    if not on_host:
        to_host(buf[:1], why="auto all-reduce calibration")  # wait for the device
    return time.perf_counter() - start


def choose_algorithm(comm: Communicator, nbytes: float, like: Any = None) -> str:
    """The algorithm auto uses for ``nbytes`` bytes on ``comm`` (calibrating first if needed)."""
    if comm.size == 1:
        return "ring"  # nothing to send; any algorithm returns at once
    model = _models.get(comm)
    if model is None or not model.covers(nbytes):
        model = calibrate(comm, nbytes, like=like)
    return model.choose(nbytes)


def algorithm_function(comm: Communicator, buf: Any) -> Callable[..., None]:
    """The all-reduce function auto runs for ``buf`` on ``comm``: a dictionary look-up once the
    size has been seen (the choice must cost next to nothing beside a 10 us MPI all-reduce)."""
    entry = _fast.get(id(comm))
    if entry is not None and entry[0]() is comm:
        fn = entry[1].get(buf.nbytes)
        if fn is not None:
            return fn
    fn = CANDIDATES[choose_algorithm(comm, buf.nbytes, like=buf)]
    entry = _fast.get(id(comm))
    if entry is None or entry[0]() is not comm:
        entry = _fast[id(comm)] = (weakref.ref(comm), {})
    entry[1][buf.nbytes] = fn
    return fn


def auto_allreduce(buf: Any, comm: Communicator, segment_bytes: int | None = None) -> None:
    """Sum ``buf`` over all ranks in place with the algorithm the cost model picks for its size."""
    if comm.size == 1:
        return
    algorithm_function(comm, buf)(buf, comm, segment_bytes=segment_bytes)


def _human(nbytes: float) -> str:
    for unit, scale in (("G", 1024**3), ("M", 1024**2), ("K", 1024)):
        if nbytes >= scale:
            return f"{nbytes / scale:g}{unit}"
    return f"{int(nbytes)}B"
