"""summary.md of a bench/gpu/run_all.sh run: each phase, its exit status, duration and limit, and
its result in one line (pytest's counts, the benchmark's ratios, the profile's GPU-busy figures),
then the failed tests and the hangs.

    python bench/gpu/run_summary.py --phases LOGS/phases.tsv --env OUT/env.txt --out OUT/summary.md

phases.tsv has one line per phase, tab-separated, as run_all.sh's phase() writes them:
    name  kind  status  exit  seconds  limit  log  result_json  note
kind is pytest, bench, profile or cmd; status is ok, FAILED, TIMEOUT or SKIPPED; result_json (may
be empty) is the JSON file a bench or profile phase wrote (bench_gpu.py's record). env.txt's line
'gpu: NAME' names the GPU. Nothing here needs a GPU; the parsers are tested
on sample pytest output in tests/test_bench_gpu_scripts.py.
"""
from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

COUNT = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected|warnings?|rerun)\b")
DURATION = re.compile(r"\bin (\d+(?:\.\d+)?)s\b")
FIELDS = ("name", "kind", "status", "exit", "seconds", "limit", "log", "result_json", "note")


def pytest_counts(text: str) -> dict[str, Any] | None:
    """The counts of pytest's last line ('==== 2 failed, 120 passed, 3 skipped in 28.92s ====',
    '-q' leaves the '='s out; 'no tests ran in 0.01s'), or None when the run never got there."""
    for line in reversed(text.splitlines()):
        line = line.strip().strip("=").strip()
        duration = DURATION.search(line)
        if not duration or not (COUNT.match(line) or line.startswith("no tests ran")):
            continue
        counts: dict[str, Any] = {}
        for n, word in COUNT.findall(line):
            word = {"error": "errors", "warning": "warnings"}.get(word, word)
            counts[word] = counts.get(word, 0) + int(n)
        counts["seconds"] = float(duration.group(1))
        counts["line"] = line
        return counts
    return None


def pytest_troubles(text: str) -> dict[str, Any]:
    """What the log says went wrong: the FAILED/ERROR lines of the short summary; the tests whose
    xdist worker died under them ("worker 'gw0' crashed while running 'x.py::test'": what
    pytest-timeout's thread method does to a hung test, it ends the worker's process, and xdist
    starts another); pytest-timeout's 'Timeout' banners where they reach this log (without xdist)."""
    failed = [line.strip() for line in text.splitlines() if re.match(r"(FAILED|ERROR) \S", line.strip())]
    crashed = re.findall(r"worker '(?:gw\d+)' crashed while running '([^']+)'", text)
    return {
        "failed": list(dict.fromkeys(failed)),
        "crashed": list(dict.fromkeys(crashed)),
        "timeouts": len(re.findall(r"^\++ Timeout \++$", text, flags=re.M)),
        "workers_down": len(re.findall(r"\[gw\d+\] node down", text)),
        "interrupted": "KeyboardInterrupt" in text,
    }


def last_words(text: str, width: int = 160) -> str:
    """The last line a failed command printed before run_all.sh's own '== name: STATUS' line."""
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("== ")]
    return lines[-1][:width] if lines else ""


def describe_counts(counts: dict[str, Any] | None) -> str:
    if counts is None:
        return "no pytest summary line (stopped before the end)"
    order = ("failed", "errors", "passed", "skipped", "xfailed", "xpassed", "deselected")
    parts = [f"{counts[k]} {k}" for k in order if counts.get(k)]
    return (", ".join(parts) or "no tests ran") + f" in {counts['seconds']:.1f}s"


def describe_bench(record: dict[str, Any]) -> str:
    """'tf32 0.36x (23598 vs 65296 images/s), bf16 failed (tinyflow: timed out)'."""
    parts = []
    for r in record.get("results", []):
        if "ratio" in r:
            parts.append(f"{r['precision']} {r['ratio']:.2f}x ({r['tinyflow']:.0f} vs {r['torch']:.0f} {r['unit']})")
        else:
            bad = [f"{k}: {'timed out' if 'timed out after' in v['error'].splitlines()[0] else 'failed'}"
                   for k, v in r.items() if isinstance(v, dict) and "error" in v]
            parts.append(f"{r['precision']} failed ({', '.join(bad)})")
    return ", ".join(parts) or "no result"


def describe_profile(record: dict[str, Any]) -> str:
    """'tf32: tinyflow 17.9 ms/step 100% busy 393 kernels, torch 7.2 ms/step 96% busy 371 kernels; ...'."""
    by_precision: dict[str, list[str]] = {}
    for c in record.get("cells", []):
        if "error" in c:
            text = "timed out" if "timed out after" in c["error"].splitlines()[0] else "failed"
        else:
            text = (f"{c['wall_ms']:.1f} ms/step {c['busy_fraction']:.0%} busy "
                    f"{c['kernels_per_step']:.0f} kernels")
        by_precision.setdefault(c["precision"], []).append(f"{c['framework']} {text}")
    return "; ".join(f"{p}: {', '.join(v)}" for p, v in by_precision.items()) or "no cell"


def read_phases(path: Path) -> list[dict[str, str]]:
    rows = []
    for line in path.read_text().splitlines():
        if line.strip():
            values = line.split("\t")
            rows.append(dict(zip(FIELDS, values + [""] * (len(FIELDS) - len(values)))))
    return rows


def phase_result(row: dict[str, str]) -> tuple[str, dict[str, Any] | None]:
    """The result column of one phase, and pytest's troubles when it ran pytest."""
    log = Path(row["log"]) if row["log"] else None
    text = log.read_text(errors="replace") if log and log.is_file() else ""
    parts, troubles = [], None
    if row["kind"] in ("bench", "profile") and row["result_json"]:
        try:
            record = json.loads(Path(row["result_json"]).read_text())
            parts.append(describe_profile(record) if "cells" in record else describe_bench(record))
        except (OSError, ValueError):
            parts.append("no result file")
    elif row["kind"] == "pytest" and row["status"] != "SKIPPED":
        parts.append(describe_counts(pytest_counts(text)))
        troubles = pytest_troubles(text)
        if troubles["crashed"]:
            parts.append(f"{len(troubles['crashed'])} test(s) hung or crashed their worker, which was replaced: "
                         + ", ".join(troubles["crashed"][:5]))
        if troubles["timeouts"]:
            parts.append(f"{troubles['timeouts']} test(s) stopped by --timeout")
        if row["status"] == "TIMEOUT":
            parts.append("the phase ran out of time" + (" (interrupted)" if troubles["interrupted"] else ""))
    if row["status"] in ("FAILED", "TIMEOUT") and row["kind"] != "pytest" and text:
        parts.append(f"last output: {last_words(text)}")
    if row["note"]:
        parts.append(row["note"])
    return "; ".join(parts), troubles


def render(rows: list[dict[str, str]], env_text: str = "", title: str = "", budget: str = "") -> str:
    device = next((line[len("gpu: "):].strip() for line in env_text.splitlines() if line.startswith("gpu: ")),
                  "unknown GPU")
    total = sum(int(r["seconds"] or 0) for r in rows)
    lines = [f"# GPU run summary: {device}{', ' + title if title else ''}", "",
             f"{len(rows)} phases, {total} s in all" + (f" (phases' hard limit {budget} s)" if budget else "")
             + "; full logs in logs.tar.gz.", "",
             "| phase | status | exit | seconds (limit) | result |", "|---|---|---:|---:|---|"]
    details = []
    for r in rows:
        result, troubles = phase_result(r)
        lines.append(f"| {r['name']} | {r['status']} | {r['exit']} | {r['seconds']} ({r['limit']}) | "
                     f"{result.replace('|', '/')} |")
        if troubles and (troubles["failed"] or troubles["crashed"]):
            details += ["", f"## {r['name']}: failed or stopped tests", ""]
            details += [f"    {line}" for line in troubles["failed"][:40]]
            details += [f"    HUNG/CRASHED {test}" for test in troubles["crashed"]
                        if not any(test in line for line in troubles["failed"])]
            if len(troubles["failed"]) > 40:
                details.append(f"    ... {len(troubles['failed']) - 40} more in {Path(r['log']).name}")
    return "\n".join(lines + details) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--phases", type=Path, required=True)
    p.add_argument("--env", type=Path)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--title", default="")
    p.add_argument("--budget", default="")
    args = p.parse_args()
    rows = read_phases(args.phases) if args.phases.is_file() else []
    env_text = args.env.read_text(errors="replace") if args.env and args.env.is_file() else ""
    args.out.write_text(render(rows, env_text, args.title, args.budget))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
