"""A lint over the PTX of tinyflow's CUDA kernels: the costs that a review of the .cu misses.

docs/design.md ("The rules") asks kernels to run at the memory or tensor-core limit: 32-bit index
math, no division by a runtime value per element, no register spills. The H100 profile of issue 21
found im2col bound by six 64-bit divisions per element, which read innocently in the source
(``t % OW``) and plainly in the PTX (``div.s64``). So this lint compiles every ``csrc/*.cu`` the way
NVRTC does (``nvcc -ptx -arch=sm_90 -std=c++17 -I csrc``, plus ``-lineinfo`` for source lines, which
leaves the instructions unchanged), runs ``ptxas -v`` on that PTX, and reports, per ``.entry``
kernel, one ``kernel: rule: detail`` line per rule that fires:

``runtime-div``
    An integer ``div``/``rem`` (any width; nvcc guards every 64-bit one with a 32-bit fast path,
    both count) whose divisor is a register, not an immediate, inside a loop; or, inside a loop,
    a ``call`` to a function that does such a division (a ``.func`` of the same PTX that divides
    by a register anywhere, or an external helper named like an integer div/rem). A hardware
    integer division is a ~20-instruction sequence (64-bit: a call of ~70); per element it
    dominates an otherwise memory-bound kernel. Fix: precompute on the host (strides, magic
    numbers for a fast divmod), decode the index once per block or per thread before the loop,
    or iterate the dimensions in nested loops. Divisions in straight-line code before or after
    any loop (once per thread) are not flagged, nor are divisions by an immediate (nvcc turns
    those into a multiply-high).

``index64``
    Inside a loop, a 64x64-bit integer multiply (``mul.lo``/``mul.hi``/``mad.lo``/``mad.hi`` of
    type ``.s64``/``.u64``, or a 64-bit ``div``/``rem`` by an immediate) whose result reaches
    the address of a load, store or atomic (forward through integer arithmetic, conversions,
    moves and selects, not through loads). A 64-bit IMAD costs several 32-bit ones and two
    registers per value; index math on sizes below 2^31 should be 32-bit, widened once to form
    the address. So ``mul.wide.s32`` (32x32 -> 64, one instruction) is fine, as are 64-bit
    adds and shifts (pointer arithmetic), and 64-bit products that do not form an address
    (a 64-bit hash, say). Fix: compute the index in ``int`` and widen once (``x[(long long)i]``
    or let ``mul.wide`` do it); keep 64 bits only where a tensor may exceed 2^31 elements, and
    list that kernel with that reason.

``spill``
    ``ptxas -v`` reports non-zero "bytes spill stores" or "bytes spill loads" for the kernel:
    registers spilled to local memory (slow, and a sign of too many live values or a too tight
    ``__launch_bounds__``). Fix: fewer live values (smaller tiles, fewer unrolled accumulators)
    or looser launch bounds.

Loops are found on the control-flow graph of each function: PTX labels start basic blocks,
``bra`` (conditional or not), ``ret`` and ``exit`` end them. A back edge B -> H is an edge of a
depth-first walk from the entry block to a block still on the walk's stack (for the reducible
graphs nvcc emits: H dominates B); its loop is H plus every block that reaches B without passing
H (the natural loop). Grid-stride loops are loops like any other; code before the first loop,
like a trip count nvcc computes for unrolling, is not in one.

Limits (what the lint cannot see, and why a finding may still be fine):
- It reads PTX, not SASS: ptxas may still hoist, unroll or strength-reduce what the PTX shows
  (which errs towards findings), and the SASS-level helpers that ptxas calls for a ``div.s64``
  are seen as the ``div.s64`` itself.
- It does not know value ranges: a 64-bit product where a tensor can exceed 2^31 elements is
  needed; list it with that reason. A ``runtime-div`` on a per-row (not per-element) path in a
  loop over rows is cheap; list it with that reason.
- The dataflow of ``index64`` works on register names (PTX registers are reused across blocks),
  so it can only over-approximate what reaches an address.
- Spills depend on the architecture (``--arch``) and ptxas version; local arrays (``N bytes
  stack frame`` without spills) are not flagged.

The allowlist (``cuda_tools/check_cu_allow.txt``) holds one ``kernel  rule  reason`` per line
(``#`` comments, blank lines ignored). ``kernel`` is an exact kernel name, or ``name_*`` for every
dtype variant of a kernel (``name_f32``, ``name_f64``, ``name_f16``, ``name_bf16``); the reason is
the rest of the line and is required (a reason that is empty or starts with ``TODO`` is an error).
A finding not on the list fails the lint; an entry that matches no finding (stale: the kernel
was fixed, renamed or removed) fails it too, so the list stays true; ``--allow-stale`` turns
stale entries into warnings while kernels are being rewritten. ``--suggest-allowlist`` prints
the allowlist the current findings need, keeping the reasons of the entries that still fire.

Run it: ``python -m cuda_tools.ptx_lint`` (or ``python cuda_tools/ptx_lint.py``: it needs
only the standard library, so CI can run it before any venv exists); ``cuda_tools/check_cu.sh``
runs it after the compile check. Exit status: 0 clean, 1 findings, stale entries, a bad allowlist
or a file that does not compile, 2 when it cannot run (no nvcc or ptxas, bad arguments).
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
CSRC = HERE.parent / "tinyflow_cuda" / "csrc"  # the product's kernels; this lint is a tool beside them
DEFAULT_ALLOWLIST = HERE / "check_cu_allow.txt"
DEFAULT_ARCH = "sm_90"

RULES = ("runtime-div", "index64", "spill")
# What to do about each rule, printed with every unlisted finding.
FIXES = {
    "runtime-div": "precompute on the host or decode the index once per block/thread before the loop",
    "index64": "do the index math in 32-bit int and widen once to form the address",
    "spill": "reduce live values (smaller tiles, fewer unrolled accumulators) or loosen __launch_bounds__",
}
DTYPE_SUFFIXES = ("f32", "f64", "f16", "bf16")

INT_TYPES = frozenset({"s16", "u16", "s32", "u32", "s64", "u64"})
INT64_TYPES = frozenset({"s64", "u64"})
# Instructions through which an index value flows to its result (dest = first operand).
PROPAGATING = frozenset({
    "add", "sub", "mul", "mad", "mul24", "mad24", "sad", "div", "rem", "abs", "neg", "min", "max",
    "and", "or", "xor", "not", "cnot", "shl", "shr", "bfe", "bfi", "prmt", "cvt", "cvta", "mov",
    "selp", "addc", "subc", "madc", "shf",
})
# Instructions with an address operand ``[reg+offset]``.
MEMORY_OPS = frozenset({"ld", "ldu", "st", "atom", "red", "prefetch", "prefetchu", "cp"})
# An external helper (no body in the PTX) that does integer division.
INT_DIV_HELPER = re.compile(r"(?i)(div|rem|mod)")
FLOAT_HELPER = re.compile(r"(?i)(f32|f64|fdiv|dividef|float|double|_rn|_rz|_rd|_ru)")


class LintError(Exception):
    """The lint could not run (exit 2): a tool is missing or an argument is wrong."""


class AllowlistError(Exception):
    """The allowlist file is malformed (exit 1): one line naming the file, line and problem."""


# ----------------------------------------------------------------------------------------------
# PTX parsing


@dataclass
class Instruction:
    """One PTX instruction: ``@pred opcode.mod.type operands;`` and where it came from."""

    opcode: str  # e.g. "div.s64"
    operands: list[str]
    predicated: bool
    loc: str  # "conv.cu:20" from the innermost .loc, or "" without line info

    @property
    def parts(self) -> list[str]:
        return self.opcode.split(".")

    @property
    def base(self) -> str:
        return self.parts[0]

    @property
    def type(self) -> str:
        return self.parts[-1]


@dataclass
class Block:
    """A basic block: a label (or none for the entry block), its instructions, its successors."""

    label: str | None
    instructions: list[Instruction] = field(default_factory=list)
    succs: list[int] = field(default_factory=list)


@dataclass
class Function:
    """An ``.entry`` (kernel) or ``.func`` of a PTX module, split into basic blocks."""

    name: str
    is_entry: bool
    blocks: list[Block]


_HEADER = re.compile(r"\.(entry|func)\s+(?:\([^)]*\)\s*)?([A-Za-z_$%][\w$]*)")
_FILE = re.compile(r"^\s*\.file\s+(\d+)\s+\"([^\"]+)\"", re.M)
_LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)")
_LABEL = re.compile(r"^\s*([A-Za-z_$][\w$]*):\s*$")
_ADDRESS_REG = re.compile(r"\[\s*(%[\w]+)")


def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def _split_operands(text: str) -> list[str]:
    """Split ``a, [b+4], {c, d}`` at top-level commas."""
    out, depth, cur = [], 0, []
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        out.append("".join(cur).strip())
    return out


def _matching_brace(text: str, start: int) -> int:
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return i
    raise ValueError("unbalanced braces in PTX")


def parse_ptx(text: str) -> list[Function]:
    """Every function with a body in a PTX module, split into basic blocks with successors."""
    files = {int(num): Path(path).name for num, path in _FILE.findall(text)}
    text = _strip_comments(text)
    functions = []
    pos = 0
    while (m := _HEADER.search(text, pos)) is not None:
        kind, name = m.group(1), m.group(2)
        # The parameter list, then performance directives, then a body or a ';' (declaration).
        params = text.find("(", m.end())
        semicolon = text.find(";", m.end())
        brace = text.find("{", m.end())
        if params != -1 and (brace == -1 or params < brace) and (semicolon == -1 or params < semicolon):
            close = text.find(")", params)
            semicolon = text.find(";", close)
            brace = text.find("{", close)
        if brace == -1 or (semicolon != -1 and semicolon < brace):
            pos = m.end() if semicolon == -1 else semicolon + 1
            continue
        end = _matching_brace(text, brace)
        functions.append(Function(name, kind == "entry", _blocks(text[brace + 1 : end], files)))
        pos = end + 1
    return functions


def _statements(body: str, files: dict[int, str]) -> Iterable[tuple[str, str, str]]:
    """("label", name, "") and ("insn", text, loc) items of a function body, in order."""
    loc = ""
    pending = ""
    for line in body.splitlines():
        if (lm := _LOC.match(line)) is not None:
            file_name = files.get(int(lm.group(1)))
            # line 0: code the compiler attributes to no line (not the line before it)
            loc = f"{file_name}:{lm.group(2)}" if file_name and lm.group(2) != "0" else ""
            continue
        if not pending.strip() and (lab := _LABEL.match(line)) is not None:
            yield "label", lab.group(1), ""
            continue
        pending += " " + line.strip().strip("{}").strip()
        while ";" in pending:
            statement, pending = pending.split(";", 1)
            statement = statement.strip().lstrip("{").strip()
            if statement and not statement.startswith("."):
                yield "insn", statement, loc


def _instruction(statement: str, loc: str) -> Instruction:
    predicated = statement.startswith("@")
    if predicated:
        statement = statement.split(None, 1)[1]
    opcode, _, rest = statement.partition(" ")
    return Instruction(opcode.strip(), _split_operands(rest.replace("\t", " ")), predicated, loc)


def _blocks(body: str, files: dict[int, str]) -> list[Block]:
    blocks = [Block(None)]
    for kind, text, loc in _statements(body, files):
        if kind == "label":
            if blocks[-1].instructions or blocks[-1].label is not None:
                blocks.append(Block(text))
            else:
                blocks[-1].label = text
            continue
        insn = _instruction(text, loc)
        blocks[-1].instructions.append(insn)
        if insn.base in ("bra", "ret", "exit", "brx"):
            blocks.append(Block(None))
    blocks = [b for b in blocks if b.instructions or b.label is not None]
    index = {b.label: i for i, b in enumerate(blocks) if b.label is not None}
    for i, block in enumerate(blocks):
        last = block.instructions[-1] if block.instructions else None
        falls_through = True
        if last is not None and last.base == "bra":
            target = last.operands[-1] if last.operands else ""
            if target in index:
                block.succs.append(index[target])
            falls_through = last.predicated
        elif last is not None and last.base in ("ret", "exit"):
            falls_through = last.predicated
        if falls_through and i + 1 < len(blocks):
            block.succs.append(i + 1)
    return blocks


# ----------------------------------------------------------------------------------------------
# Loops


def _back_edges(blocks: Sequence[Block]) -> list[tuple[int, int]]:
    """Edges (tail, head) of a depth-first walk from the entry block that return to a block
    still on the walk's stack: in a reducible graph (all nvcc emits) exactly the edges whose
    head dominates their tail; in an irreducible one they still close every cycle."""
    edges, state = [], [0] * len(blocks)  # 0 unvisited, 1 on the stack, 2 done
    stack = [(0, iter(blocks[0].succs))]
    state[0] = 1
    while stack:
        node, succs = stack[-1]
        for succ in succs:
            if state[succ] == 1:
                edges.append((node, succ))
            elif state[succ] == 0:
                state[succ] = 1
                stack.append((succ, iter(blocks[succ].succs)))
                break
        else:
            state[node] = 2
            stack.pop()
    return edges


def loop_blocks(blocks: Sequence[Block]) -> set[int]:
    """Indices of the blocks inside some loop: for each back edge tail -> head, head and every
    block that reaches tail without passing head (the natural loop)."""
    if not blocks:
        return set()
    preds: list[list[int]] = [[] for _ in blocks]
    for i, b in enumerate(blocks):
        for s in b.succs:
            preds[s].append(i)
    inside: set[int] = set()
    for tail, head in _back_edges(blocks):
        body, stack = {head}, [tail]
        while stack:
            node = stack.pop()
            if node not in body:
                body.add(node)
                stack.extend(preds[node])
        inside |= body
    return inside


# ----------------------------------------------------------------------------------------------
# Rules


@dataclass(frozen=True)
class Finding:
    """One rule firing for one kernel: printed as ``kernel: rule: detail``."""

    kernel: str
    rule: str
    detail: str
    file: str = ""

    def line(self) -> str:
        return f"{self.kernel}: {self.rule}: {self.detail}"


def _is_int_div(insn: Instruction) -> bool:
    return insn.base in ("div", "rem") and insn.type in INT_TYPES


def _divides_by_register(insn: Instruction) -> bool:
    return _is_int_div(insn) and bool(insn.operands) and insn.operands[-1].startswith("%")


def _call_target(insn: Instruction) -> str:
    for op in insn.operands:
        if not op.startswith("("):
            return op.strip()
    return ""


def _is_mul64(insn: Instruction) -> bool:
    parts = insn.parts
    if insn.base in ("mul", "mad") and insn.type in INT64_TYPES and "wide" not in parts:
        return True
    return _is_int_div(insn) and insn.type in INT64_TYPES and not _divides_by_register(insn)


def _describe(hits: list[Instruction]) -> str:
    counts: dict[str, int] = defaultdict(int)
    for insn in hits:
        counts[insn.opcode] += 1
    ops = ", ".join(f"{op} x{n}" if n > 1 else op for op, n in sorted(counts.items()))
    locs = sorted({h.loc for h in hits if h.loc}, key=_loc_key)
    where = ""
    if locs:
        shown = _compact_locs(locs[:8]) + (", ..." if len(locs) > 8 else "")
        where = f" at {shown}"
    return f"{ops}{where}"


def _loc_key(loc: str) -> tuple[str, int]:
    name, _, line = loc.rpartition(":")
    return name, int(line) if line.isdigit() else 0


def _compact_locs(locs: list[str]) -> str:
    """conv.cu:20, conv.cu:21 -> conv.cu:20,21."""
    out: list[str] = []
    last_file = None
    for loc in locs:
        name, _, line = loc.rpartition(":")
        if name == last_file:
            out[-1] += f",{line}"
        else:
            out.append(loc)
            last_file = name
    return ", ".join(out)


def _dividing_functions(functions: Sequence[Function]) -> set[str]:
    """Names of the functions that divide by a register anywhere, directly or through calls."""
    divides = {f.name for f in functions
               if any(_divides_by_register(i) for b in f.blocks for i in b.instructions)}
    changed = True
    while changed:
        changed = False
        for f in functions:
            if f.name not in divides and any(
                i.base == "call" and _call_target(i) in divides for b in f.blocks for i in b.instructions
            ):
                divides.add(f.name)
                changed = True
    return divides


def _reaches_address(fn: Function, seeds: list[Instruction]) -> list[Instruction]:
    """The seeds whose destination register flows (by register name) into a memory address."""
    flows: dict[str, set[str]] = defaultdict(set)  # register -> registers computed from it
    addresses: set[str] = set()
    for block in fn.blocks:
        for insn in block.instructions:
            if insn.base in MEMORY_OPS:
                for op in insn.operands:
                    if (am := _ADDRESS_REG.match(op)) is not None:
                        addresses.add(am.group(1))
            elif insn.base in PROPAGATING and insn.operands and insn.operands[0].startswith("%"):
                dest = insn.operands[0]
                for op in insn.operands[1:]:
                    if op.startswith("%"):
                        flows[op].add(dest)
    hits = []
    for seed in seeds:
        seen, stack = set(), [seed.operands[0]]
        while stack:
            reg = stack.pop()
            if reg in seen:
                continue
            seen.add(reg)
            stack.extend(flows[reg])
        if seen & addresses:
            hits.append(seed)
    return hits


def lint_functions(functions: Sequence[Function], file: str = "") -> list[Finding]:
    """The runtime-div and index64 findings of every ``.entry`` in a parsed PTX module."""
    dividing = _dividing_functions(functions)
    bodies = {f.name for f in functions}
    findings = []
    for fn in functions:
        if not fn.is_entry:
            continue
        in_loop = [i for idx in sorted(loop_blocks(fn.blocks)) for i in fn.blocks[idx].instructions]
        divs = [i for i in in_loop if _divides_by_register(i)]
        calls = []
        for insn in in_loop:
            if insn.base != "call":
                continue
            target = _call_target(insn)
            if target in dividing or (target not in bodies and INT_DIV_HELPER.search(target)
                                      and not FLOAT_HELPER.search(target)):
                calls.append(target)
        if divs or calls:
            parts = []
            if divs:
                parts.append(f"integer div/rem by a runtime value inside a loop: {_describe(divs)}")
            if calls:
                parts.append("calls that divide inside a loop: " + ", ".join(sorted(set(calls))))
            findings.append(Finding(fn.name, "runtime-div", "; ".join(parts), file))
        index64 = _reaches_address(fn, [i for i in in_loop if _is_mul64(i) and i.operands])
        if index64:
            detail = f"64-bit multiply forming an address inside a loop: {_describe(index64)}"
            findings.append(Finding(fn.name, "index64", detail, file))
    return findings


_PTXAS_FUNC = re.compile(r"Function properties for ([\w$]+)\s*\n\s*(\d+) bytes stack frame, "
                         r"(\d+) bytes spill stores, (\d+) bytes spill loads")


def parse_ptxas_verbose(output: str) -> dict[str, tuple[int, int, int]]:
    """Function name -> (stack frame, spill stores, spill loads) bytes from ``ptxas -v``."""
    return {m.group(1): (int(m.group(2)), int(m.group(3)), int(m.group(4)))
            for m in _PTXAS_FUNC.finditer(output)}


def spill_findings(output: str, kernels: Iterable[str], file: str = "") -> list[Finding]:
    props = parse_ptxas_verbose(output)
    findings = []
    for name in kernels:
        stack, stores, loads = props.get(name, (0, 0, 0))
        if stores or loads:
            detail = (f"ptxas -v: {stores} bytes spill stores, {loads} bytes spill loads "
                      f"({stack} bytes stack frame)")
            findings.append(Finding(name, "spill", detail, file))
    return findings


# ----------------------------------------------------------------------------------------------
# Compiling


@dataclass
class Tools:
    nvcc: str
    ptxas: str
    arch: str = DEFAULT_ARCH
    include: Path = CSRC


def find_tools(nvcc: str | None = None, arch: str = DEFAULT_ARCH) -> Tools:
    """nvcc from the argument, $NVCC or PATH, and the ptxas beside it (else on PATH)."""
    nvcc_path = shutil.which(nvcc or os.environ.get("NVCC") or "nvcc")
    if nvcc_path is None:
        raise LintError(f"ptx_lint: nvcc not found ({nvcc or os.environ.get('NVCC') or 'nvcc'}); "
                        "set NVCC or put nvcc on PATH")
    beside = Path(nvcc_path).resolve().parent / "ptxas"
    ptxas_path = str(beside) if beside.exists() else shutil.which("ptxas")
    if ptxas_path is None:
        raise LintError(f"ptx_lint: ptxas not found beside {nvcc_path} nor on PATH")
    return Tools(nvcc_path, ptxas_path, arch)


@dataclass
class FileResult:
    path: Path
    kernels: list[str]
    findings: list[Finding]
    error: str = ""


def lint_file(path: Path, tools: Tools) -> FileResult:
    """Compile one .cu to PTX, run ptxas -v on it, and lint every kernel."""
    with tempfile.TemporaryDirectory(prefix="ptx_lint_") as tmp:
        ptx = Path(tmp) / (path.stem + ".ptx")
        cmd = [tools.nvcc, "-ptx", "-lineinfo", f"-arch={tools.arch}", "-std=c++17",
               f"-I{tools.include}", str(path), "-o", str(ptx)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            return FileResult(path, [], [], f"nvcc -ptx failed:\n{proc.stderr.strip()}")
        text = ptx.read_text()
        ptxas = subprocess.run([tools.ptxas, "-v", f"-arch={tools.arch}", str(ptx), "-o",
                                str(Path(tmp) / "out.cubin")], capture_output=True, text=True)
        if ptxas.returncode != 0:
            return FileResult(path, [], [], f"ptxas failed:\n{ptxas.stderr.strip()}")
    functions = parse_ptx(text)
    kernels = [f.name for f in functions if f.is_entry]
    findings = lint_functions(functions, path.name)
    findings += spill_findings(ptxas.stdout + ptxas.stderr, kernels, path.name)
    order = {k: i for i, k in enumerate(kernels)}
    findings.sort(key=lambda f: (order.get(f.kernel, 0), RULES.index(f.rule)))
    return FileResult(path, kernels, findings)


def lint_files(paths: Sequence[Path], tools: Tools, jobs: int | None = None) -> list[FileResult]:
    jobs = jobs or min(len(paths), os.cpu_count() or 1) or 1
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(lambda p: lint_file(p, tools), paths))


# ----------------------------------------------------------------------------------------------
# The allowlist


@dataclass(frozen=True)
class AllowEntry:
    """``kernel  rule  reason``: ``kernel`` is a name or ``name_*`` (every dtype variant)."""

    kernel: str
    rule: str
    reason: str
    line: int

    def matches(self, finding: Finding) -> bool:
        if finding.rule != self.rule:
            return False
        if self.kernel.endswith("_*"):
            base = self.kernel[:-1]
            return any(finding.kernel == base + sfx for sfx in DTYPE_SUFFIXES)
        return finding.kernel == self.kernel


def parse_allowlist(text: str, source: str = "check_cu_allow.txt") -> list[AllowEntry]:
    """Entries of an allowlist; AllowlistError names the first malformed line."""
    entries, seen = [], {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):  # a '#' later in the line is part of the reason
            continue
        fields = line.split(None, 2)
        where = f"{source}:{number}"
        if len(fields) < 3 or not fields[2].strip() or fields[2].strip().upper().startswith("TODO"):
            raise AllowlistError(f"{where}: '{raw.strip()}' needs a reason: write "
                                 "'kernel  rule  why this finding is acceptable' (a TODO is no reason)")
        kernel, rule, reason = fields[0], fields[1], fields[2].strip()
        if rule not in RULES:
            raise AllowlistError(f"{where}: unknown rule '{rule}'; the rules are {', '.join(RULES)}")
        if "*" in kernel[:-2] or ("*" in kernel and not kernel.endswith("_*")):
            raise AllowlistError(f"{where}: kernel '{kernel}' must be a name or name_* "
                                 "(every dtype variant of name)")
        if (kernel, rule) in seen:
            raise AllowlistError(f"{where}: '{kernel} {rule}' is listed already at line {seen[kernel, rule]}")
        seen[kernel, rule] = number
        entries.append(AllowEntry(kernel, rule, reason, number))
    return entries


def load_allowlist(path: Path | None) -> list[AllowEntry]:
    if path is None or not path.exists():
        return []
    return parse_allowlist(path.read_text(), path.name)


@dataclass
class Verdict:
    new: list[Finding]
    allowed: list[tuple[Finding, AllowEntry]]
    stale: list[AllowEntry]


def apply_allowlist(findings: Sequence[Finding], entries: Sequence[AllowEntry]) -> Verdict:
    new, allowed, used = [], [], set()
    for finding in findings:
        entry = next((e for e in entries if e.matches(finding)), None)
        if entry is None:
            new.append(finding)
        else:
            allowed.append((finding, entry))
            used.add(entry)
    return Verdict(new, allowed, [e for e in entries if e not in used])


def suggest_allowlist(results: Sequence[FileResult], entries: Sequence[AllowEntry]) -> str:
    """An allowlist covering the current findings: kept reasons where an entry still fires,
    ``TODO`` (which the loader rejects) for new ones; ``name_*`` where every dtype variant of a
    kernel in the file fires the same rule."""
    lines = [
        "# PTX lint allowlist (cuda_tools/ptx_lint.py, run by check_cu.sh): one",
        "#   kernel  rule  reason",
        "# per line. kernel: an exact name, or name_* for every dtype variant (f32, f64, f16, bf16).",
        f"# rules: {', '.join(RULES)}. The reason is required; an entry that no longer fires fails",
        "# the lint as stale. Regenerate: python -m cuda_tools.ptx_lint --suggest-allowlist",
    ]
    for result in results:
        if not result.findings:
            continue
        lines += ["", f"# {result.path.name}"]
        fired = {(f.kernel, f.rule) for f in result.findings}
        done: set[tuple[str, str]] = set()
        for finding in result.findings:
            key = (finding.kernel, finding.rule)
            if key in done:
                continue
            pattern, covered = finding.kernel, [key]
            base, _, sfx = finding.kernel.rpartition("_")
            if base and sfx in DTYPE_SUFFIXES:
                variants = [base + "_" + s for s in DTYPE_SUFFIXES if base + "_" + s in result.kernels]
                if len(variants) > 1 and all((v, finding.rule) in fired for v in variants):
                    pattern, covered = base + "_*", [(v, finding.rule) for v in variants]
            done.update(covered)
            entry = next((e for e in entries if e.rule == finding.rule and
                          (e.kernel == pattern or e.matches(finding))), None)
            reason = entry.reason if entry is not None else f"TODO say why, or fix: {finding.detail}"
            lines.append(f"{pattern:<36} {finding.rule:<12} {reason}")
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------------------------
# Command line


def _relative(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(HERE.parent))
    except ValueError:
        return str(path)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m cuda_tools.ptx_lint",
        description="Lint the PTX of CUDA kernels: runtime divisions and 64-bit index math in "
                    "loops, register spills. See the module docstring for the rules.")
    parser.add_argument("files", nargs="*", type=Path,
                        help="the .cu files (default: every tinyflow_cuda/csrc/*.cu)")
    parser.add_argument("--allowlist", type=Path, default=DEFAULT_ALLOWLIST,
                        help="kernel/rule/reason lines that may fire (default: %(default)s)")
    parser.add_argument("--nvcc", default=None, help="nvcc to use (default: $NVCC, else nvcc on PATH)")
    parser.add_argument("--arch", default=os.environ.get("ARCH", DEFAULT_ARCH),
                        help="GPU architecture (default: $ARCH, else %(default)s)")
    parser.add_argument("--include", type=Path, default=CSRC, help="include directory (default: csrc)")
    parser.add_argument("--jobs", type=int, default=None, help="files compiled at once (default: cores)")
    parser.add_argument("--suggest-allowlist", action="store_true",
                        help="print the allowlist the current findings need and exit 0")
    parser.add_argument("--allow-stale", action="store_true",
                        help="report allowlist entries that no longer fire as warnings, not failures")
    parser.add_argument("--verbose", "-v", action="store_true", help="also print the allowed findings")
    args = parser.parse_args(argv)
    try:
        tools = find_tools(args.nvcc, args.arch)
    except LintError as exc:
        print(exc, file=sys.stderr)
        return 2
    tools.include = args.include
    paths = sorted(args.files) if args.files else sorted(CSRC.glob("*.cu"))
    if not paths:
        print(f"ptx_lint: no .cu files under {CSRC}", file=sys.stderr)
        return 2
    try:
        entries = load_allowlist(args.allowlist)
    except AllowlistError as exc:
        print(f"ptx_lint: bad allowlist: {exc}", file=sys.stderr)
        return 1
    results = lint_files(paths, tools, args.jobs)
    if args.suggest_allowlist:
        sys.stdout.write(suggest_allowlist(results, entries))
        return 0

    failed = [r for r in results if r.error]
    for r in failed:
        print(f"ERROR   {_relative(r.path)}: {r.error}", file=sys.stderr)
    findings = [f for r in results for f in r.findings]
    verdict = apply_allowlist(findings, entries)
    allow_name = _relative(args.allowlist)
    for finding, entry in verdict.allowed if args.verbose else []:
        print(f"allowed {finding.line()}  [{allow_name}:{entry.line}: {entry.reason}]")
    for f in verdict.new:
        print(f"FAIL    {f.line()}\n        ({f.file}) fix: {FIXES[f.rule]}; or, if it must stay, "
              f"list it in {allow_name} as '{f.kernel}  {f.rule}  <why>'", file=sys.stderr)
    stale = verdict.stale if not failed else []  # a file that did not compile hides its findings
    for e in stale:
        label = "warning" if args.allow_stale else "STALE  "
        print(f"{label} {allow_name}:{e.line}: '{e.kernel}  {e.rule}' no longer fires; "
              "remove the line", file=sys.stderr)
    kernels = sum(len(r.kernels) for r in results)
    print(f"ptx lint ({tools.arch}): {kernels} kernels in {len(results)} file(s): "
          f"{len(findings)} finding(s), {len(verdict.allowed)} allowed by {allow_name}, "
          f"{len(verdict.new)} new, {len(stale)} stale"
          + (f", {len(failed)} file(s) not compiled" if failed else ""))
    bad_stale = stale and not args.allow_stale
    return 1 if failed or verdict.new or bad_stale else 0


if __name__ == "__main__":
    sys.exit(main())
