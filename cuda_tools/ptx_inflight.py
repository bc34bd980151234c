"""Loads in flight in the compiled staging loops of a kernel, and the serial global round trips a
time step of the persistent recurrence waits through (issue 33).

A step of the recurrence (csrc/rnn.cu) is latency-bound: what it costs is how many times a thread
waits a whole global round trip (a few hundred ns through L2 on an H100; docs/lstm.md), one after
the other. Two checks,
each on what the GPU would run, not on the source:

- ``staging_loops``: compiles a .cu file to PTX the way NVRTC does (ptx_lint's flags, ``-lineinfo``
  for source lines) and finds, in each kernel, its staging loops: the innermost loops that issue
  16-byte global loads (``ld.global*.v4``, or ``cp.async`` of 16 bytes). In each it counts the
  16-byte loads a thread issues before the first instruction that reads one of their results
  (``in_flight``): loads whose latencies overlap, one round trip for all. A ``mov`` only renames a
  register (nvcc's phi moves; ptxas coalesces them) and is followed, not counted as a use; a
  barrier or the end of the loop body stops the count. The count is over the loop's blocks in
  program order, so loads in mutually exclusive branches (a fallback path) are never counted as
  overlapping a use on the other path: only the 16-byte loads and what flows from them are
  tracked.
- ``round_trips``: the serial global round trips a thread waits through per time step, from the
  planner's trip counts (tinyflow_cuda/kernels/rnn.py, plan_sequence): the rounds of
  ``IN_FLIGHT`` loads that stage h (forward) or reduce the partial sums of dh (backward), the
  cell's loads (independent: one trip), the grid barrier (two: the arrival at L2, the wait).
  The rounds assume IN_FLIGHT loads in flight, which ``staging_loops`` checks in the PTX.

The issue's targets (``TARGET_IN_FLIGHT``, ``TARGET_TRIPS``): at least 8 independent 16-byte loads
in flight per thread in every staging loop; at most 8 serial global round trips per thread per
time step, forward and backward, at hidden 512 and 1024, batch 16 and 64.

PTX, not SASS: ptxas schedules the loads again (it may only keep them as they are or issue more
before a use, never fewer, as long as it has the registers: the kernels use no more than their
launch bounds allow, without spills; ptx_lint checks that). ``python -m cuda_tools.ptx_inflight``
prints both tables and exits 1 where a target is missed.
"""
from __future__ import annotations

import argparse
import hashlib
import re
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cuda_tools import ptx_lint
from cuda_tools.ptx_lint import Block, Function, Instruction

CSRC = ptx_lint.CSRC  # tinyflow_cuda/csrc
TARGET_IN_FLIGHT = 8
TARGET_TRIPS = 8
HIDDEN = (512, 1024)
BATCH = (16, 64)

_REGISTER = re.compile(r"%[a-z]+\d+")


@dataclass(frozen=True)
class StagingLoop:
    """One staging loop of a kernel: the source lines of its 16-byte loads, how many it issues
    in its body, and how many of them a thread has in flight before the first use."""

    kernel: str
    lines: tuple[str, ...]
    loads: int
    in_flight: int

    def describe(self) -> str:
        return (f"{self.kernel}: {self.in_flight} of {self.loads} 16-byte loads in flight "
                f"({', '.join(self.lines) or 'no line info'})")


def is_wide_load(insn: Instruction) -> bool:
    """A 16-byte global load: ld.global[.cg|.ca|.nc...].v4 of 32-bit words, v2 of 64-bit ones,
    or a cp.async of 16 bytes."""
    parts = insn.parts
    if insn.base == "ld" and "global" in parts:
        return ("v4" in parts and insn.type in ("u32", "b32", "s32", "f32")) or (
            "v2" in parts and insn.type in ("u64", "b64", "s64", "f64"))
    return insn.base == "cp" and "async" in parts and insn.operands[-1:] == ["16"]


def _registers(operand: str) -> list[str]:
    return _REGISTER.findall(operand)


def _reads_and_writes(insn: Instruction) -> tuple[list[str], list[str]]:
    """(registers read, registers written): stores, branches, barriers and reductions read all
    their operands; other instructions write their first and read the rest."""
    if insn.base in ("st", "red", "bra", "bar", "cp", "prefetch", "membar", "fence") or not insn.operands:
        return [r for op in insn.operands for r in _registers(op)], []
    return [r for op in insn.operands[1:] for r in _registers(op)], _registers(insn.operands[0])


def natural_loops(blocks: Sequence[Block]) -> list[set[int]]:
    """The natural loop of each back edge (tail -> head): head and the blocks that reach tail
    without passing head (ptx_lint's loop finder, one set a loop)."""
    preds: list[list[int]] = [[] for _ in blocks]
    for i, b in enumerate(blocks):
        for s in b.succs:
            preds[s].append(i)
    loops = []
    for tail, head in ptx_lint._back_edges(blocks):
        body, stack = {head}, [tail]
        while stack:
            node = stack.pop()
            if node not in body:
                body.add(node)
                stack.extend(preds[node])
        loops.append(body)
    return loops


def in_flight(blocks: Sequence[Block], body: set[int]) -> tuple[int, int, tuple[str, ...]]:
    """(16-byte loads before the first use of one of their results, 16-byte loads in the body,
    their source lines), scanning the loop body's blocks in program order."""
    pending: set[str] = set()
    before_use, total, used = 0, 0, False
    lines: list[str] = []
    for index in sorted(body):
        for insn in blocks[index].instructions:
            reads, writes = _reads_and_writes(insn)
            if is_wide_load(insn):
                total += 1
                if insn.loc and insn.loc not in lines:
                    lines.append(insn.loc)
                if not used:
                    before_use += 1
                    pending.update(writes)
                continue
            if used:
                continue
            if insn.base == "bar" or (insn.base == "mov" and not any(r in pending for r in reads)):
                used = used or insn.base == "bar"
                continue
            if insn.base == "mov":  # a rename of a pending value: follow it
                pending.update(writes)
                continue
            if any(r in pending for r in reads):
                used = True
    return before_use, total, tuple(lines)


def function_staging_loops(fn: Function) -> list[StagingLoop]:
    """The innermost loops of ``fn`` that issue 16-byte global loads, with their counts."""
    loops = sorted(natural_loops(fn.blocks), key=len)
    found: list[StagingLoop] = []
    claimed: set[int] = set()  # blocks whose loads an inner loop already counted
    for body in loops:
        if not any(is_wide_load(i) for b in body - claimed for i in fn.blocks[b].instructions):
            continue
        count, total, lines = in_flight(fn.blocks, body)
        found.append(StagingLoop(fn.name, lines, total, count))
        claimed |= body
    return found


def compile_ptx(path: Path, nvcc: str | None = None, arch: str = ptx_lint.DEFAULT_ARCH,
                cache_dir: Path | None = None) -> str:
    """The PTX of ``path`` as ptx_lint compiles it (cached by the sources' content)."""
    tools = ptx_lint.find_tools(nvcc, arch)
    sources = sorted(p for p in path.parent.iterdir() if p.suffix in (".cu", ".cuh", ".h"))
    digest = hashlib.sha256(("".join(p.read_text() for p in sources) + arch + path.name).encode())
    cache = (cache_dir or Path(tempfile.gettempdir()) / "tinyflow_ptx_inflight")
    cache.mkdir(parents=True, exist_ok=True)
    ptx = cache / f"{path.stem}_{digest.hexdigest()[:16]}.ptx"
    if not ptx.exists():
        tmp = ptx.with_suffix(".tmp")
        cmd = [tools.nvcc, "-ptx", "-lineinfo", f"-arch={tools.arch}", "-std=c++17",
               f"-I{path.parent}", str(path), "-o", str(tmp)]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise ptx_lint.LintError(f"ptx_inflight: nvcc -ptx failed on {path.name}:\n{done.stderr}")
        tmp.replace(ptx)
    return ptx.read_text()


_LOC_INLINED = re.compile(r"^(\s*\.loc\s+)(\d+)(\s+\d+\s+\d+)(.*?inlined_at\s+(\d+)\s+(\d+)\s+(\d+))",
                          re.M)


def _callers_of_helpers(ptx: str, helpers: Sequence[str] = ("mma.cuh",)) -> str:
    """The PTX with each ``.loc`` inside an inlined helper of ``helpers`` (mma.cuh's 16-byte load,
    say) moved to its call site (the ``inlined_at`` location), so that a staging loop's loads
    name the kernel's line that stages, not the helper's."""
    files = {num: Path(name).name for num, name in re.findall(r'^\s*\.file\s+(\d+)\s+"([^"]+)"', ptx, re.M)}

    def move(m: re.Match) -> str:
        if files.get(m.group(2)) not in helpers:
            return m.group(0)
        return f"{m.group(1)}{m.group(5)} {m.group(6)} {m.group(7)}"

    return _LOC_INLINED.sub(move, ptx)


def staging_loops(path: Path = CSRC / "rnn.cu", nvcc: str | None = None,
                  kernels: Sequence[str] | None = None) -> dict[str, list[StagingLoop]]:
    """Per kernel (``kernels``: only those, by name or ``name_*`` prefix), its staging loops."""
    out: dict[str, list[StagingLoop]] = {}
    for fn in ptx_lint.parse_ptx(_callers_of_helpers(compile_ptx(path, nvcc))):
        if not fn.is_entry or (kernels is not None and not any(
                fn.name == k or (k.endswith("*") and fn.name.startswith(k[:-1])) for k in kernels)):
            continue
        out[fn.name] = function_staging_loops(fn)
    return out


@dataclass(frozen=True)
class StepTrips:
    """The serial global round trips a thread waits through per time step, for one launch."""

    layer: str
    backward: bool
    hidden: int
    batch: int
    dtype: str  # the data's dtype, with the weights' where they differ ("float32/bfloat16")
    tensor_cores: bool
    trips: int
    rounds: int  # of them: staging (forward) or reduction (backward) rounds
    threads: int
    blocks: int

    def describe(self) -> str:
        kind = f"{self.layer} {'bwd' if self.backward else 'fwd'} H={self.hidden} B={self.batch}"
        return (f"{kind:<24}{self.dtype:<18}{'tc' if self.tensor_cores else 'scalar':<8}"
                f"{self.trips:>5}{self.rounds:>8}{self.threads:>9}{self.blocks:>8}")


DTYPES = (  # (data itemsize, its name, weight itemsize or None, tensor cores)
    (4, "float32", None, False), (4, "float32", None, True), (4, "float32/bfloat16", 2, True),
    (2, "bfloat16", None, True), (2, "bfloat16", None, False), (8, "float64", None, False),
)


def round_trips(blocks_available: int = 132, shared_limit: int = 227 * 1024,
                dtypes: Sequence[tuple] = DTYPES) -> list[StepTrips]:
    """StepTrips of every persistent launch at hidden 512 and 1024, batch 16 and 64, LSTM and
    GRU, forward and backward, on a machine of ``blocks_available`` SMs (an H100 by default);
    launches that take the per-step path (W_hh does not fit) are left out."""
    from tinyflow_cuda.kernels.rnn import plan_sequence

    rows = []
    for layer in ("lstm", "gru"):
        for backward in (False, True):
            for hidden in HIDDEN:
                for batch in BATCH:
                    for itemsize, name, weights, tc in dtypes:
                        plan = plan_sequence(4 if layer == "lstm" else 3, hidden, batch, itemsize,
                                             backward=backward, lstm=layer == "lstm",
                                             blocks_available=blocks_available,
                                             shared_limit=shared_limit, tensor_cores=tc,
                                             weight_itemsize=weights)
                        if plan is not None:
                            rows.append(StepTrips(layer, backward, hidden, batch, name, tc,
                                                  plan.trips, plan.stage_rounds, plan.threads,
                                                  plan.blocks))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m cuda_tools.ptx_inflight",
        description="16-byte loads in flight in the staging loops of the compiled recurrence "
                    "kernels, and the serial global round trips a time step waits through.")
    parser.add_argument("file", nargs="?", default=str(CSRC / "rnn.cu"))
    parser.add_argument("--nvcc", default=None)
    args = parser.parse_args(argv)
    failed = False
    print(f"staging loops of {Path(args.file).name} (target: >= {TARGET_IN_FLIGHT} 16-byte loads "
          f"in flight a thread)")
    for loops in staging_loops(Path(args.file), args.nvcc).values():
        for loop in loops:
            mark = "ok  " if loop.in_flight >= TARGET_IN_FLIGHT else "LOW "
            failed |= loop.in_flight < TARGET_IN_FLIGHT
            print(f"  {mark}{loop.describe()}")
    print(f"\nserial global round trips a thread per time step, H100 plans (target: <= "
          f"{TARGET_TRIPS})")
    print(f"  {'launch':<24}{'dtype':<18}{'path':<8}{'trips':>5}{'rounds':>8}{'threads':>9}"
          f"{'blocks':>8}")
    for row in round_trips():
        failed |= row.trips > TARGET_TRIPS
        print(f"  {row.describe()}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
