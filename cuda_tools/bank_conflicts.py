"""The bank-conflict report: how many wavefronts each warp-wide shared-memory access of a kernel
takes, against the fewest possible, measured on the CPU emulator (issue 33).

Shared memory is 32 banks of 4-byte words; a bank serves one word per wavefront. A warp's load or
store takes as many wavefronts as the busiest bank holds distinct words among the lanes'
accesses: 32 lanes reading 32 consecutive floats take 1, 32 lanes reading floats 32 words apart
(the same bank) take 32, lanes reading the same word share it (a broadcast takes 1). Wider
accesses are split as the hardware splits them: a warp's 8-byte accesses into two phases of 16
lanes (half warps), its 16-byte accesses into four phases of 8 lanes (quarter warps), each phase
served as above; so 32 lanes storing consecutive 16-byte packs take 4 wavefronts, and that is
the ideal. This module runs kernels on the instrumented build of the emulator (the same one as
the coalescing report, cuda_tools/coalescing.py: every load and store of the .cu files calls a
recorder, cuda_tools/emu_trace.h) and counts, per access site on shared memory:

- a **request** is one warp-wide execution of a load or store: the accesses of one site by the
  lanes of one warp (32 consecutive linear thread ids of a block, x fastest), the n-th time each
  lane runs that site (loop iterations line up lane by lane);
- its **wavefronts**, summed over its phases as above;
- its **ideal**: one wavefront for each phase with an active lane;
- **ratio** = wavefronts / ideal per site and per kernel: 1.0 is conflict-free, 32.0 a 32-way
  conflict on every request.

What counts as shared memory: ``TF_SHARED`` and ``TF_DYNAMIC_SHARED`` arrays (the blocks' arenas,
cuda_tools/emu.h) and plain ``__shared__`` arrays (thread-locals in the instrumented build). Global
memory, locals and the emulator's state are left out. Lanes are lined up by occurrence, not by a
real warp's reconvergence (exact for straight-line and uniform code, as in the coalescing report).
The ratio is the hardware's rule applied to the addresses the kernel computes; what the compiler
makes of an access (one 16-byte access or four 4-byte ones) is the emulator's g++ build, so a
kernel that means a 16-byte access spells it as one (a 16-byte type).

    from cuda_tools import bank_conflicts
    with bank_conflicts.recording() as rec:
        tinyflow_cuda.kernels.im2col(x, (3, 3))
    print(rec.report().table())
    rec.report()["im2col_f32"].ratio

``python -m cuda_tools.bank_conflicts`` prints the report for representative launches: the
recurrence (LSTM and GRU, forward and backward, one block of the H100 plan at hidden 512 and
1024, batch 16 and 64; ``--weights bfloat16``: the autocast path), im2col / col2im and the
pools of AlexNet's first layers.
"""
from __future__ import annotations

import argparse
import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cuda_tools import coalescing, emulator
from tinyflow_cuda import runtime
from tinyflow_cuda.runtime import CSRC

BANKS = 32
WORD_BYTES = 4


@dataclass
class SiteBanks:
    """The shared-memory requests of one access site (one load or store instruction)."""

    kernel: str
    site: str  # "rnn.cu:180" (addr2line), or the code address where there is no line info
    kind: str  # "load" or "store"
    requests: int = 0  # warp-wide executions
    lanes: int = 0  # active lanes, summed over requests
    wavefronts: int = 0  # summed over requests
    ideal: int = 0  # one a phase with an active lane, summed over requests

    @property
    def ratio(self) -> float:
        """Wavefronts over the ideal: 1.0 conflict-free, n an n-way conflict throughout."""
        return self.wavefronts / self.ideal if self.ideal else 1.0

    @property
    def extra(self) -> int:
        """Wavefronts beyond the ideal (what the conflicts cost)."""
        return self.wavefronts - self.ideal

    def describe(self) -> str:
        return (f"{self.site} {self.kind}: {self.ratio:.2f}x ({self.wavefronts}/{self.ideal} "
                f"wavefronts, {self.requests} requests, {self.lanes / max(1, self.requests):.1f} lanes)")


@dataclass
class KernelBanks:
    """Every shared-memory access site of one kernel, summed over its recorded launches."""

    kernel: str
    launches: int = 0
    sites: list[SiteBanks] = field(default_factory=list)

    def _sum(self, attr: str, kind: str | None = None) -> int:
        return sum(getattr(s, attr) for s in self.sites if kind is None or s.kind == kind)

    @property
    def wavefronts(self) -> int:
        return self._sum("wavefronts")

    @property
    def ideal(self) -> int:
        return self._sum("ideal")

    @property
    def requests(self) -> int:
        return self._sum("requests")

    def _ratio(self, kind: str | None) -> float | None:
        ideal = self._sum("ideal", kind)
        return self._sum("wavefronts", kind) / ideal if ideal else None

    @property
    def ratio(self) -> float:
        """Wavefronts over the ideal, loads and stores together (1.0 without shared memory)."""
        value = self._ratio(None)
        return 1.0 if value is None else value

    @property
    def load_ratio(self) -> float | None:
        return self._ratio("load")

    @property
    def store_ratio(self) -> float | None:
        return self._ratio("store")

    @property
    def worst_ratio(self) -> float:
        """The highest ratio of any one site (1.0 without shared memory)."""
        return max((s.ratio for s in self.sites), default=1.0)

    def worst(self, count: int = 3) -> list[SiteBanks]:
        """The sites that cost the most wavefronts beyond the ideal, worst first."""
        conflicted = [s for s in self.sites if s.extra > 0]
        return sorted(conflicted, key=lambda s: (-s.extra, -s.ratio))[:count]

    def site(self, line: str, kind: str | None = None) -> SiteBanks:
        """The one site at ``line`` (e.g. "rnn.cu:180", or a suffix of it) of ``kind``."""
        found = [s for s in self.sites if s.site.endswith(line) and (kind is None or s.kind == kind)]
        if len(found) != 1:
            raise KeyError(f"bank-conflict report of {self.kernel}: {len(found)} sites match "
                           f"{line!r} {kind or ''} (sites: {', '.join(s.site for s in self.sites)})")
        return found[0]

    def summary(self, sites: int = 3) -> dict[str, Any]:
        """ratio, load_ratio, store_ratio, wavefronts, ideal, worst sites."""
        return {"ratio": self.ratio, "load_ratio": self.load_ratio, "store_ratio": self.store_ratio,
                "wavefronts": self.wavefronts, "ideal": self.ideal,
                "worst": [s.describe() for s in self.worst(sites)]}


@dataclass
class Report(coalescing.KernelReport):
    """Per kernel bank-conflict statistics: ratios (all, loads, stores, worst site) and
    wavefronts/ideal."""

    kernels: dict[str, KernelBanks]
    what = "bank-conflict report"
    label_width = 18

    def row(self, label: str, name: str, stats: KernelBanks) -> str:
        return _row(label, name, stats)


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


HEADER = (f"{'case':<18}{'kernel':<36}{'ratio':>7}{'loads':>7}{'stores':>7}{'worst':>7}"
          f"{'wavefronts/ideal':>22}")


def _row(label: str, name: str, stats: KernelBanks) -> str:
    return (f"{label:<18}{name:<36}{_ratio(stats.ratio):>7}{_ratio(stats.load_ratio):>7}"
            f"{_ratio(stats.store_ratio):>7}{_ratio(stats.worst_ratio):>7}"
            f"{f'{stats.wavefronts}/{stats.ideal}':>22}")


class Recorder(coalescing.SiteRecorder):
    """Collects the shared-memory rows of an instrumented emulator runtime (its ``bank_sink``)."""

    def __call__(self, kernel: str, rows: list[emulator.BankRow]) -> None:
        kept = [(r.site, r.write, r.requests, r.lanes, r.wavefronts, r.ideal) for r in rows]
        self._launches.append((kernel, kept))

    def _kernel_code(self, site: int) -> bool:
        """Whether a site is the kernels' code (a .cu file or a header beside it other than the
        emulator's own, emu.h): the emulator's bookkeeping also touches the blocks' arenas and
        its thread-locals (filling the canaries, growing its vectors), and is left out. A site
        addr2line cannot name is kept."""
        line = self._lines[site]
        if ":" not in line:
            return True
        return line.rsplit(":", 1)[0] in self._sources

    @property
    def _sources(self) -> set[str]:
        folders = {info.source.parent for info in self.runtime.kernels.values()}
        names = {p.name for folder in folders for p in folder.iterdir()
                 if p.suffix in (".cu", ".cuh", ".h")}
        return names - {"emu.h", "emu_trace.h"}

    def report(self) -> Report:
        """Per kernel: the shared-memory sites (merged over launches), wavefronts and ideal."""
        self._resolve({row[0] for _, rows in self._launches for row in rows})
        kernels: dict[str, KernelBanks] = {}
        by_site: dict[tuple[str, int, int], SiteBanks] = {}
        for kernel, rows in self._launches:
            stats = kernels.setdefault(kernel, KernelBanks(kernel))
            stats.launches += 1
            for site, write, requests, lanes, wavefronts, ideal in rows:
                if not self._kernel_code(site):
                    continue
                key = (kernel, site, write)
                if key not in by_site:
                    by_site[key] = SiteBanks(kernel, self._lines[site], "store" if write else "load")
                    stats.sites.append(by_site[key])
                s = by_site[key]
                s.requests += requests
                s.lanes += lanes
                s.wavefronts += wavefronts
                s.ideal += ideal
        return Report(kernels)


@contextlib.contextmanager
def recording(csrc: Path = CSRC, cache_dir: Path | None = None,
              families: Sequence[str] | None = None) -> Iterator[Recorder]:
    """Make the instrumented emulator the current runtime and record the shared-memory accesses
    of every launch made inside.

    ``families`` (e.g. ``["rnn"]``) builds only those .cu files (coalescing.subset); by default
    every kernel under ``csrc``. ``rec.runtime`` is the runtime (``rec.runtime.launch(...)`` for
    kernels without a twin). The build is the coalescing report's (cached by content); the two
    recordings may run at once on it.
    """
    if families is not None:
        csrc = coalescing.subset(families, csrc)
    rt = emulator.EmulatorRuntime.build(csrc=csrc, cache_dir=cache_dir, instrument=True)
    if rt.bank_sink is not None:
        raise RuntimeError("bank_conflicts.recording: already recording on this runtime "
                           "(recordings do not nest)")
    rec = Recorder(rt)
    rt.bank_sink = rec
    try:
        with runtime.use(rt):
            yield rec
    finally:
        rt.bank_sink = None


# --- the representative launches of the CLI ---------------------------------------------------

Case = tuple[str, str, Callable[[np.random.Generator, Any], None]]
"""(label, the .cu family it launches, fn(rng, dtype) calling the CUDA twins)."""

RECURRENCE_SIZES = (512, 1024)
RECURRENCE_BATCHES = (16, 64)


def _recurrence_cases(weight_dtype: Any = None) -> list[Case]:
    """One block of the H100 plan of each recurrence kernel (the blocks are alike: one shows the
    layout), one time step, at hidden 512 and 1024, batch 16 and 64; ``weight_dtype`` (bf16 or
    fp16 with float32 data): the autocast path, tensor cores only."""
    out: list[Case] = []
    for hidden in RECURRENCE_SIZES:
        for batch in RECURRENCE_BATCHES:
            for layer in ("lstm", "gru"):
                for backward in (False, True):
                    for tc in (False, True) if weight_dtype is None else (True,):
                        def launch(rng: np.random.Generator, dtype: Any, layer: str = layer,
                                   hidden: int = hidden, batch: int = batch,
                                   backward: bool = backward, tc: bool = tc) -> None:
                            from tinyflow_cuda.kernels import rnn
                            rnn.probe_block(layer, hidden, batch, dtype, backward=backward,
                                            tensor_cores=tc, rng=rng, weight_dtype=weight_dtype)
                        kind = f"{'bwd' if backward else 'fwd'}{' tc' if tc else ''}"
                        out.append((f"{layer} {hidden}x{batch} {kind}", "rnn", launch))
    return out


def _conv_and_pool_cases() -> list[Case]:
    """im2col / col2im of AlexNet's first two convolutions and pool1, batch 1."""
    out: list[Case] = []
    for conv in coalescing.ALEXNET_CONVS[:2]:
        for label, fn in coalescing._conv_case(*conv):
            out.append((label, "conv", lambda rng, dtype, fn=fn: fn(rng, 1, dtype)))
    for label, fn in coalescing._pool_cases():
        out.append((label, "pool", lambda rng, dtype, fn=fn: fn(rng, 1, dtype)))
    return out


def cases(weight_dtype: Any = None) -> list[Case]:
    """The CLI's launches (each built with its .cu family only)."""
    return _recurrence_cases(weight_dtype) + _conv_and_pool_cases()


def _dtype(name: str) -> np.dtype:
    if name == "bfloat16":
        import ml_dtypes
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m cuda_tools.bank_conflicts",
        description="Shared-memory wavefronts per warp-wide access against the ideal, per kernel, "
                    "for representative launches on the instrumented CPU emulator.")
    parser.add_argument("--dtype", default="float32",
                        choices=["float32", "float64", "float16", "bfloat16"])
    parser.add_argument("--sites", type=int, default=2,
                        help="most conflicted access sites to list under a kernel above 1.0")
    parser.add_argument("--only", default="", help="run only the cases whose label contains this")
    parser.add_argument("--weights", default=None, choices=["float16", "bfloat16"],
                        help="the recurrence with half W_hh and float32 data (autocast)")
    args = parser.parse_args(argv)
    if emulator.compiler() is None:
        print("bank_conflicts: the CUDA emulator needs g++ on PATH")
        return 2
    dtype, weights = _dtype(args.dtype), args.weights and _dtype(args.weights)
    print(f"shared-memory wavefronts per warp request vs the ideal ({BANKS} banks of {WORD_BYTES} "
          f"bytes; {dtype.name}{f', {weights.name} W_hh' if weights else ''}); 1.00 is conflict-free")
    print(HEADER)
    for label, family, fn in cases(weights):
        if args.only not in label:
            continue
        with recording(families=[family]) as rec:
            fn(np.random.default_rng(0), dtype)
        report = rec.report()
        for name, stats in sorted(report.kernels.items()):
            print(_row(label, name, stats))
            if stats.worst_ratio > 1.0:
                for site in stats.worst(args.sites):
                    print(f"{'':<18}    {site.describe()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
