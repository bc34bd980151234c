"""The coalescing report: how many 32-byte sectors each warp-wide access of a kernel touches,
against the fewest possible, measured on the CPU emulator (issue 21).

A GPU serves a warp's load or store in 32-byte sectors: 32 lanes reading 32 consecutive floats
touch 4 sectors, 32 lanes reading floats 128 bytes apart touch 32 for the same 128 useful bytes.
This module runs kernels on an instrumented build of the emulator (``EmulatorRuntime.build(
instrument=True)``: the .cu files as they are, compiled with g++'s ``-fsanitize=thread`` pass so
that every load and store calls a recorder, cuda_tools/emu_trace.h) and counts, per access site:

- a **request** is one warp-wide execution of a load or store: the accesses of one site by the
  lanes of one warp (32 consecutive linear thread ids of a block, x fastest), the n-th time each
  lane runs that site (so loop iterations line up lane by lane);
- its **sectors** are the distinct 32-byte sectors it touches, the argument's allocation taken
  as aligned, as cudaMalloc's are (a view at its offset in it: emulator.device_address);
- its **minimal** sectors are ceil(distinct bytes / 32): the fewest sectors the bytes it really
  touches could occupy if they were contiguous and aligned. Lanes reading the same word count its
  bytes once (a broadcast is 1 of 1), inactive lanes (a masked tail) count nothing;
- **efficiency** = sum of minimal / sum of sectors, per site, per kind (load, store) and per kernel.

Only the memory of the launch's pointer arguments counts (global memory); ``__shared__`` arrays,
locals and the emulator's state are left out. The launch runs on copies of its arguments, each
with a guard of at least 64 KiB on either side (emulator.GUARD_BYTES): a site's accesses that
fall there, outside every argument, are its **stray** accesses (out of bounds: on a GPU they read
or write whatever lies beside the buffer), and those that start inside an argument and end past it
its **overhang** (a vector access across the buffer's end); ``reach`` is the farthest byte of
either from the argument. They are counted per lane, not grouped into requests, and
:meth:`Report.strays` lists the sites that have any. Lanes are lined up by occurrence, not by a real
warp's reconvergence: where a branch inside a loop skips an access for some lanes and not others,
later iterations pair up differently than on a GPU (exact for straight-line and uniform code).

    from cuda_tools import coalescing
    with coalescing.recording() as rec:
        tinyflow_cuda.kernels.im2col(x, (3, 3))
    print(rec.report().table())
    rec.report()["im2col_f32"].efficiency

``python -m cuda_tools.coalescing`` prints the report for a fixed set of representative
launches (AlexNet's convolutions and pools at batch 1, LRN, cross-entropy, dropout).
"""
from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cuda_tools import emulator
from tinyflow_cuda import runtime
from tinyflow_cuda.runtime import CSRC

SECTOR_BYTES = 32
TARGET = 0.80  # issue 21: im2col, col2im and the pooling kernels at or above this


@dataclass
class SiteStats:
    """The requests of one access site (one load or store instruction) on one argument."""

    kernel: str
    site: str  # "conv.cu:34" (addr2line), or the code address where there is no line info
    kind: str  # "load" or "store"
    argument: str  # the kernel's pointer parameter it reads or writes
    requests: int = 0  # warp-wide executions
    lanes: int = 0  # active lanes, summed over requests
    sectors: int = 0  # distinct 32-byte sectors, summed over requests
    minimal: int = 0  # ceil(distinct bytes / 32), summed over requests
    bytes: int = 0  # distinct bytes, summed over requests
    stray: int = 0  # accesses outside every argument, in this one's guard
    overhang: int = 0  # accesses that start inside the argument and end past it
    reach: int = 0  # the farthest byte of those from the argument, in bytes

    @property
    def outside(self) -> int:
        """Accesses with bytes outside every argument: stray and overhang."""
        return self.stray + self.overhang

    @property
    def efficiency(self) -> float:
        return self.minimal / self.sectors if self.sectors else 1.0

    @property
    def wasted(self) -> int:
        """Sectors moved beyond the fewest possible."""
        return self.sectors - self.minimal

    @property
    def sectors_per_request(self) -> float:
        return self.sectors / self.requests if self.requests else 0.0

    def describe(self) -> str:
        outside = (f", {self.stray} stray and {self.overhang} overhanging accesses up to "
                   f"{self.reach} bytes outside" if self.outside else "")
        return (f"{self.site} {self.kind} {self.argument}: {self.efficiency:.0%} "
                f"({self.sectors}/{self.minimal} sectors, {self.sectors_per_request:.1f} per request, "
                f"{self.lanes / max(1, self.requests):.1f} lanes{outside})")


@dataclass
class KernelStats:
    """Every access site of one kernel (e.g. ``im2col_f32``), summed over its recorded launches."""

    kernel: str
    launches: int = 0
    sites: list[SiteStats] = field(default_factory=list)

    def _sum(self, attr: str, kind: str | None = None) -> int:
        return sum(getattr(s, attr) for s in self.sites if kind is None or s.kind == kind)

    @property
    def sectors(self) -> int:
        return self._sum("sectors")

    @property
    def minimal(self) -> int:
        return self._sum("minimal")

    @property
    def stray(self) -> int:
        """Accesses outside every argument, over all sites."""
        return self._sum("stray")

    @property
    def overhang(self) -> int:
        """Accesses that start inside an argument and end past it, over all sites."""
        return self._sum("overhang")

    def _efficiency(self, kind: str | None) -> float | None:
        sectors = self._sum("sectors", kind)
        return self._sum("minimal", kind) / sectors if sectors else None

    @property
    def efficiency(self) -> float:
        """Minimal over actual sectors, loads and stores together (1.0 with no global access)."""
        eff = self._efficiency(None)
        return 1.0 if eff is None else eff

    @property
    def load_efficiency(self) -> float | None:
        """The same over loads only; None when the kernel loads nothing from global memory."""
        return self._efficiency("load")

    @property
    def store_efficiency(self) -> float | None:
        """The same over stores only; None when the kernel stores nothing."""
        return self._efficiency("store")

    def worst(self, count: int = 3) -> list[SiteStats]:
        """The sites that waste the most sectors (beyond the minimum), worst first."""
        wasteful = [s for s in self.sites if s.wasted > 0]
        return sorted(wasteful, key=lambda s: (-s.wasted, s.efficiency))[:count]

    def summary(self, sites: int = 3) -> dict[str, Any]:
        """efficiency, load_efficiency, store_efficiency, sectors, minimal, stray, overhang,
        worst sites."""
        return {"efficiency": self.efficiency, "load_efficiency": self.load_efficiency,
                "store_efficiency": self.store_efficiency, "sectors": self.sectors,
                "minimal": self.minimal, "stray": self.stray, "overhang": self.overhang,
                "worst": [s.describe() for s in self.worst(sites)]}


@dataclass
class KernelReport:
    """Per kernel statistics of the launches recorded, by kernel name: what this report and the
    bank-conflict report (cuda_tools/bank_conflicts.py) share. A subclass names itself (``what``)
    and gives its table's row and the width of its label column."""

    kernels: dict[str, Any]
    what = "coalescing report"
    label_width = 14

    def __getitem__(self, name: str) -> Any:
        """A kernel by its full name (``im2col_f32``) or, if only one dtype ran, its base name."""
        if name in self.kernels:
            return self.kernels[name]
        matches = [k for k in self.kernels if k.rsplit("_", 1)[0] == name]
        if len(matches) == 1:
            return self.kernels[matches[0]]
        raise KeyError(f"{self.what}: no single kernel {name!r} recorded "
                       f"(recorded: {', '.join(sorted(self.kernels)) or 'none'})")

    def __contains__(self, name: str) -> bool:
        try:
            self[name]
        except KeyError:
            return False
        return True

    def summary(self, sites: int = 3) -> dict[str, dict[str, Any]]:
        return {name: stats.summary(sites) for name, stats in self.kernels.items()}

    def row(self, label: str, name: str, stats: Any) -> str:
        raise NotImplementedError

    def table(self, sites: int = 0, label: str = "") -> str:
        """One line per kernel (``row``), then its ``sites`` worst sites."""
        lines = []
        for name, stats in sorted(self.kernels.items()):
            lines.append(self.row(label, name, stats))
            lines += [f"{'':<{self.label_width}}    {s.describe()}" for s in stats.worst(sites)]
        return "\n".join(lines)


@dataclass
class Report(KernelReport):
    """Per kernel memory-coalescing statistics: efficiency (all, loads, stores), sectors
    actual/minimal and the accesses outside the arguments (stray and overhang)."""

    kernels: dict[str, KernelStats]

    def row(self, label: str, name: str, stats: KernelStats) -> str:
        return _row(label, name, stats)

    def strays(self) -> list[SiteStats]:
        """The sites of every kernel with accesses outside their arguments (stray or overhang),
        by kernel and site."""
        return [s for _, stats in sorted(self.kernels.items()) for s in stats.sites if s.outside]


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


HEADER = (f"{'case':<14}{'kernel':<34}{'eff':>6}{'loads':>7}{'stores':>7}"
          f"{'sectors actual/minimal':>26}{'stray':>7}")


def _row(label: str, name: str, stats: KernelStats) -> str:
    return (f"{label:<14}{name:<34}{_percent(stats.efficiency):>6}"
            f"{_percent(stats.load_efficiency):>7}{_percent(stats.store_efficiency):>7}"
            f"{f'{stats.sectors}/{stats.minimal}':>26}{stats.stray + stats.overhang:>7}")


class SiteRecorder:
    """What this recorder and the bank-conflict one share: the launches recorded (each a tuple
    whose first entry is the kernel's name) and the file:line of each code site."""

    def __init__(self, rt: emulator.EmulatorRuntime) -> None:
        self.runtime = rt
        self._launches: list[tuple[Any, ...]] = []
        self._lines: dict[int, str] = {}

    def clear(self) -> None:
        """Forget the launches recorded so far."""
        self._launches.clear()

    @property
    def launches(self) -> list[str]:
        """The kernels recorded, in order."""
        return [launch[0] for launch in self._launches]

    def _resolve(self, sites: set[int]) -> None:
        """file:line of each site through addr2line (the code address where that fails)."""
        todo = sorted(s for s in sites if s not in self._lines)
        if not todo:
            return
        base = self.runtime.trace_base()
        # a site is the return address of the recorder call, which sits right before the access
        names = [f"{site - base:#x}" for site in todo]
        lines = _addr2line(self.runtime.library_path, [f"{site - base - 1:#x}" for site in todo])
        for site, name, line in zip(todo, names, lines or [None] * len(todo)):
            self._lines[site] = line or name


class Recorder(SiteRecorder):
    """Collects the traced launches of an instrumented emulator runtime (its ``trace_sink``)."""

    def __call__(self, kernel: str, arguments: list[str], rows: list[emulator.TraceRow]) -> None:
        kept = [(r.site, r.write, r.arg, r.requests, r.lanes, r.sectors, r.minimal, r.bytes,
                 r.stray, r.overhang, r.reach) for r in rows]
        self._launches.append((kernel, arguments, kept))

    def report(self) -> Report:
        """Per kernel: the sites (merged over launches), their sectors and efficiencies."""
        self._resolve({row[0] for _, _, rows in self._launches for row in rows})
        kernels: dict[str, KernelStats] = {}
        by_site: dict[tuple[str, int, int, str], SiteStats] = {}
        for kernel, arguments, rows in self._launches:
            stats = kernels.setdefault(kernel, KernelStats(kernel))
            stats.launches += 1
            for (site, write, arg, requests, lanes, sectors, minimal, nbytes, stray, overhang,
                 reach) in rows:
                key = (kernel, site, write, arguments[arg])
                if key not in by_site:
                    by_site[key] = SiteStats(kernel, self._lines[site], "store" if write else "load",
                                             arguments[arg])
                    stats.sites.append(by_site[key])
                s = by_site[key]
                s.requests += requests
                s.lanes += lanes
                s.sectors += sectors
                s.minimal += minimal
                s.bytes += nbytes
                s.stray += stray
                s.overhang += overhang
                s.reach = max(s.reach, reach)
        return Report(kernels)


def _addr2line(library: Path, addresses: list[str]) -> list[str | None] | None:
    tool = shutil.which("addr2line")
    if tool is None:
        return None
    done = subprocess.run([tool, "-e", str(library), *addresses], capture_output=True, text=True)
    if done.returncode != 0:
        return None
    out: list[str | None] = []
    for line in done.stdout.splitlines():
        line = re.sub(r"\s*\(discriminator \d+\)", "", line.strip())
        out.append(None if line.startswith("??") else f"{Path(line.rsplit(':', 1)[0]).name}:"
                   f"{line.rsplit(':', 1)[1]}")
    return out if len(out) == len(addresses) else None


def subset(families: Sequence[str], csrc: Path = CSRC) -> Path:
    """A folder holding ``csrc``'s headers and only the given families' .cu files (``conv``,
    ``pool``...), so that the instrumented build compiles just those (the whole set takes minutes
    under -fsanitize=thread). The folder's name is fixed per family set: the emulator's cache is
    keyed by the sources' paths and contents, so a later call reuses the library."""
    missing = [f for f in families if not (csrc / f"{f}.cu").is_file()]
    if missing:
        raise ValueError(f"coalescing.subset: no {', '.join(f'{m}.cu' for m in missing)} in {csrc}")
    folder = Path(tempfile.gettempdir()) / f"tinyflow_coalescing_{'-'.join(sorted(set(families)))}"
    folder.mkdir(exist_ok=True)
    wanted = {p for p in csrc.iterdir() if p.is_file() and p.suffix != ".cu"}
    wanted |= {csrc / f"{f}.cu" for f in families}
    for stale in folder.iterdir():
        if stale.is_file() and stale.name not in {p.name for p in wanted}:
            stale.unlink(missing_ok=True)
    for path in wanted:
        text = path.read_text()
        target = folder / path.name
        if not target.exists() or target.read_text() != text:
            tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
            tmp.write_text(text)
            tmp.replace(target)  # atomic: a parallel test worker never reads half a file
    return folder


@contextlib.contextmanager
def recording(csrc: Path = CSRC, cache_dir: Path | None = None,
              families: Sequence[str] | None = None) -> Iterator[Recorder]:
    """Make the instrumented emulator the current runtime and record every launch made inside.

    ``families`` (e.g. ``["conv", "pool"]``) builds only those .cu files (see :func:`subset`);
    by default every kernel under ``csrc``. ``rec.runtime`` is the runtime
    (``rec.runtime.launch(...)`` for kernels without a twin). A build is cached by content.
    """
    if families is not None:
        csrc = subset(families, csrc)
    rt = emulator.EmulatorRuntime.build(csrc=csrc, cache_dir=cache_dir, instrument=True)
    if rt.trace_sink is not None:
        raise RuntimeError("coalescing.recording: already recording on this runtime "
                           "(recordings do not nest)")
    rec = Recorder(rt)
    rt.trace_sink = rec
    try:
        with runtime.use(rt):
            yield rec
    finally:
        rt.trace_sink = None


# --- the representative launches of the CLI ---------------------------------------------------

Case = tuple[str, Callable[[np.random.Generator, int, Any], None]]

ALEXNET_CONVS = [  # (name, C, H=W, kernel, stride, padding): AlexNet224 (torchvision's widths)
    ("conv1", 3, 224, 11, 4, 2),
    ("conv2", 64, 27, 5, 1, 2),
    ("conv3", 192, 13, 3, 1, 1),
    ("conv4", 384, 13, 3, 1, 1),
    ("conv5", 256, 13, 3, 1, 1),
]


def _conv_case(name: str, c: int, size: int, k: int, s: int, p: int) -> list[Case]:
    def im2col(rng: np.random.Generator, batch: int, dtype: Any) -> None:
        from tinyflow_cuda import kernels
        kernels.im2col(rng.random((batch, c, size, size)).astype(dtype), (k, k), (s, s), (p, p))

    def col2im(rng: np.random.Generator, batch: int, dtype: Any) -> None:
        from tinyflow_cuda import kernels
        out = (size + 2 * p - k) // s + 1
        cols = rng.random((c * k * k, batch * out * out)).astype(dtype)
        kernels.col2im(cols, (batch, c, size, size), (k, k), (s, s), (p, p))

    return [(f"{name} im2col", im2col), (f"{name} col2im", col2im)]


def _pool_cases() -> list[Case]:
    shape = (64, 55, 55)  # pool1's input: conv1's output

    def maxpool(rng: np.random.Generator, batch: int, dtype: Any) -> None:
        from tinyflow_cuda import kernels
        x = rng.random((batch, *shape)).astype(dtype)
        out, argmax = kernels.maxpool2d_forward(x, (3, 3), (2, 2))
        kernels.maxpool2d_backward(rng.random(out.shape).astype(dtype), argmax, x.shape, (3, 3),
                                   (2, 2))

    def avgpool(rng: np.random.Generator, batch: int, dtype: Any) -> None:
        from tinyflow_cuda import kernels
        x = rng.random((batch, *shape)).astype(dtype)
        out = kernels.avgpool2d_forward(x, (3, 3), (2, 2))
        kernels.avgpool2d_backward(rng.random(out.shape).astype(dtype), x.shape, (3, 3), (2, 2))

    return [("pool1 max", maxpool), ("pool1 avg", avgpool)]


def _other_cases() -> list[Case]:
    def lrn(rng: np.random.Generator, batch: int, dtype: Any) -> None:
        from tinyflow_cuda import kernels
        x = rng.random((batch, 64, 55, 55)).astype(dtype)
        out, scale = kernels.lrn_forward(x, 5, 1e-4, 0.75, 2.0)
        kernels.lrn_backward(rng.random(x.shape).astype(dtype), x, out, scale, 5, 1e-4, 0.75, 2.0)

    def cross_entropy(rng: np.random.Generator, batch: int, dtype: Any) -> None:
        from tinyflow_cuda import kernels
        n = max(batch, 4)
        logits = rng.standard_normal((n, 1000)).astype(dtype)
        target = rng.integers(0, 1000, n)
        _, lp = kernels.softmax_cross_entropy_forward(logits, target)
        kernels.softmax_cross_entropy_backward(lp, target, np.ones(n, dtype))

    def dropout(rng: np.random.Generator, batch: int, dtype: Any) -> None:
        from tinyflow_cuda import kernels
        kernels.dropout_mask(rng.random((batch, 4096)).astype(dtype), 0.5, 1234)

    return [("lrn1", lrn), ("cross-entropy", cross_entropy), ("dropout", dropout)]


FAMILIES = ["conv", "pool", "lrn", "loss", "dropout"]  # the .cu files the CLI's cases launch


def cases() -> list[Case]:
    """The CLI's launches: (label, fn(rng, batch, dtype)) calling the CUDA twins."""
    out: list[Case] = []
    for conv in ALEXNET_CONVS:
        out += _conv_case(*conv)
    return out + _pool_cases() + _other_cases()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m cuda_tools.coalescing",
        description="Sectors per warp-wide access against the fewest possible, per kernel, for "
                    "representative launches on the instrumented CPU emulator.")
    parser.add_argument("--batch", type=int, default=1, help="images per launch (default 1)")
    parser.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    parser.add_argument("--sites", type=int, default=2,
                        help="worst access sites to list under a kernel below the target")
    parser.add_argument("--only", default="", help="run only the cases whose label contains this")
    args = parser.parse_args(argv)
    if emulator.compiler() is None:
        print("coalescing: the CUDA emulator needs g++ on PATH")
        return 2
    dtype = np.dtype(args.dtype)
    print(f"sectors of {SECTOR_BYTES} bytes per warp-wide access vs the fewest possible "
          f"(batch {args.batch}, {dtype.name}); target {TARGET:.0%} for im2col, col2im, pools")
    print(HEADER)
    for label, fn in cases():
        if args.only not in label:
            continue
        with recording(families=FAMILIES) as rec:
            fn(np.random.default_rng(0), args.batch, dtype)
        report = rec.report()
        for name, stats in sorted(report.kernels.items()):
            print(_row(label, name, stats))
            listed = stats.worst(args.sites) if stats.efficiency < TARGET else []
            listed += [site for site in stats.sites if site.outside and site not in listed]
            for site in listed:
                print(f"{'':<14}    {site.describe()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
