"""The page of ``tinyflow explain``: an Explanation (tracer.py) as one self-contained HTML file.

``payload(ex)`` turns the record into plain data: the nodes, kernels, modules and phases with
their times, the memory samples, the data-parallel spans, the source of every function that
ran (read with ``inspect`` now, from the functions themselves) and the walk (the step's stops in
execution order, file by file). ``write_page(ex, path)`` puts that data, the script and the
style of ``assets/`` into ``assets/page.html``: one file that opens offline, with no library
fetched from anywhere.
"""
from __future__ import annotations

import datetime
import inspect
import json
import os
import platform
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from types import CodeType
from typing import Any

__all__ = ["payload", "write_page", "render", "Source", "source_of"]


@dataclass
class Source:
    """A function's code as the page shows it: where it is and its text."""

    path: str  # the file, relative to the checkout (tinyflow/ops/conv.py) or as found
    line: int  # the line of its ``def`` (decorators, if any, come before it)
    name: str  # its qualified name
    text: str
    first: int = 0  # the line ``text`` starts at (its first decorator); 0: ``line``

    def __post_init__(self) -> None:
        self.first = self.first or self.line


def _display_path(filename: str) -> str:
    """``filename`` relative to the folder that holds the tinyflow package (the checkout, or
    site-packages), else to the working directory, else as it is."""
    import tinyflow

    path = Path(filename).resolve()
    for root in (Path(tinyflow.__file__).resolve().parents[1], Path.cwd().resolve()):
        try:
            return path.relative_to(root).as_posix()
        except ValueError:
            continue
    return path.as_posix()


_MAX_LINES = 400


def source_of(obj: Any) -> Source | None:
    """The source of a function or code object, read with inspect (None where there is none)."""
    target = inspect.unwrap(obj) if callable(obj) and not isinstance(obj, CodeType) else obj
    target = getattr(target, "__func__", target)
    code = target if isinstance(target, CodeType) else getattr(target, "__code__", None)
    if code is None:
        return None
    name = getattr(target, "__qualname__", None) or getattr(code, "co_qualname", code.co_name)
    try:
        lines, start = inspect.getsourcelines(code)
    except (OSError, TypeError):
        return Source(_display_path(code.co_filename), code.co_firstlineno, name, "")
    if code.co_name == "<module>":  # a script's top level: the whole file, capped
        start = 1
    lines = lines[:_MAX_LINES]
    start = max(start, 1)
    def_line = next((start + i for i, text in enumerate(lines) if text.lstrip().startswith(("def ", "async def "))),
                    start)
    return Source(_display_path(code.co_filename), def_line, name, "".join(lines), first=start)


class _Sources:
    """The functions the page shows, each once: key ``path:line`` -> Source."""

    def __init__(self) -> None:
        self.table: dict[str, dict[str, Any]] = {}
        self._by_object: dict[int, str | None] = {}

    def key(self, obj: Any) -> str | None:
        if obj is None:
            return None
        cached = self._by_object.get(id(obj))
        if cached is not None or id(obj) in self._by_object:
            return cached
        source: Source | None = source_of(obj)
        key = None
        if source is not None:
            key = f"{source.path}:{source.line}"
            self.table.setdefault(key, {"path": source.path, "line": source.line, "first": source.first,
                                        "name": source.name, "text": source.text})
        self._by_object[id(obj)] = key
        return key


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms"


def _mib(n: int) -> str:
    if n >= 2**20:
        return f"{n / 2**20:.1f} MiB"
    if n >= 2**10:
        return f"{n / 2**10:.1f} KiB"
    return f"{n} B"


def _shape(meta: Any) -> str:
    return f"({', '.join(map(str, meta.shape))}) {meta.dtype}"


def payload(ex: Any) -> dict[str, Any]:
    """Everything the page shows, as JSON-ready data."""
    sources = _Sources()
    nodes = [_node(n, sources) for n in ex.nodes]
    kernels = [{"id": k.id, "seq": k.seq, "name": k.name, "src": sources.key(k.function), "start": k.start,
                "end": k.end, "node": k.node, "span": k.span, "launches": sorted(k.launches.items()),
                "error": k.error} for k in ex.kernels]
    modules = [{"id": m.id, "seq": m.seq, "path": m.path, "type": m.type, "src": sources.key(m.function),
                "depth": m.depth, "start": m.start, "end": m.end, "parent": m.parent} for m in ex.modules]
    spans = [{"id": s.id, "seq": s.seq, "name": s.name, "phase": s.phase, "src": sources.key(s.function),
              "start": s.start, "end": s.end, "launches": sorted(s.launches.items())} for s in ex.spans]
    loss = [n for n in ex.nodes if n.phase == "loss"]
    if loss and not any(s["phase"] == "loss" for s in spans):  # the loss ran outside any module: its span
        spans.append({"id": len(spans), "seq": min(n.seq for n in loss), "name": "loss", "phase": "loss",
                      "src": None, "start": min(n.start for n in loss), "end": max(n.end for n in loss),
                      "launches": []})
    walk = _walk(ex, sources)
    launches_known = any(n.launches for n in ex.nodes) or any(s.launches for s in ex.spans)
    meta = {**ex.meta}
    meta.setdefault("title", "one training step")
    import tinyflow

    meta.update({"tinyflow": tinyflow.__version__, "python": platform.python_version(),
                 "created": datetime.datetime.now().isoformat(timespec="seconds"),
                 "memory_source": ex.memory_source, "launch_tally": launches_known,
                 "summary": ex.summary()})
    return {
        "meta": meta,
        "wall": list(ex.wall),
        "sources": sources.table,
        "nodes": nodes,
        "kernels": kernels,
        "modules": modules,
        "spans": spans,
        "memory": {"source": ex.memory_source, "samples": [list(s) for s in ex.memory], "peak": ex.peak()},
        "comm": ex.comm,
        "buckets": ex.buckets,
        "outside_launches": sorted(ex.outside_launches.items()),
        "error": ex.error,
        "walk": walk,
    }


def _node(n: Any, sources: _Sources) -> dict[str, Any]:
    def tensors(metas: list[Any]) -> list[dict[str, Any]]:
        return [{"shape": list(m.shape), "dtype": m.dtype, "bytes": m.nbytes, "from": m.source} for m in metas]

    caller = None
    if n.caller is not None:
        key = sources.key(n.caller[0])
        caller = [key, n.caller[1]] if key is not None else None
    return {
        "id": n.id, "seq": n.seq, "kind": n.kind, "phase": n.phase, "cls": n.cls, "src": sources.key(n.source_function),
        "module": n.module, "start": n.start, "end": n.end, "caller": caller, "inputs": tensors(n.inputs),
        "outputs": tensors(n.outputs), "saved": n.saved, "saved_bytes": n.saved_bytes, "recorded": n.recorded,
        "freed": None if n.freed is None else {"t": n.freed[0], "seq": n.freed[1], "how": n.freed[2]},
        "pair": n.pair, "parent": n.parent, "error": n.error, "kernels": n.kernels,
        "launches": sorted(n.launches.items()), "memops": n.memops,
    }


# ----------------------------------------------------------------------------- the walk


def _walk(ex: Any, sources: _Sources) -> list[dict[str, Any]]:
    """The step's stops in execution order, file by file: each module's forward, the line that
    called each op, the op's forward or backward, each kernel, the phases' entry points."""
    events: list[tuple[int, str, Any]] = []
    events += [(m.seq, "module", m) for m in ex.modules]
    events += [(n.seq, "node", n) for n in ex.nodes]
    events += [(k.seq, "kernel", k) for k in ex.kernels]
    events += [(s.seq, "span", s) for s in ex.spans if s.phase != "forward"]
    events.sort(key=lambda e: e[0])
    stops: list[dict[str, Any]] = []

    def stop(obj: Any, line: int | None, title: str, text: str, **refs: Any) -> None:
        key = sources.key(obj)
        if key is None:
            return
        line = line or sources.table[key]["line"]
        if stops and stops[-1]["src"] == key and stops[-1]["line"] == line:
            stops[-1]["text"] += " " + text
            return
        stops.append({"src": key, "line": line, "title": title, "text": text, "node": None, "kernel": None,
                      "module": None, **refs})

    for _, what, item in events:
        if what == "module":
            stop(item.function, None, f"{item.path} ({item.type}).forward",
                 f"The module {item.path} ({item.type}) runs its forward ({_ms(item.end - item.start)}).",
                 module=item.id)
        elif what == "span":
            stop(item.function, None, item.name, _SPAN_TEXT.get(item.phase, "").format(name=item.name)
                 + f" ({_ms(item.end - item.start)}).", span=item.id)
        elif what == "kernel":
            owner = ex.nodes[item.node] if item.node is not None else None
            where = f"{owner.cls}.{owner.kind}" if owner is not None else (
                ex.spans[item.span].name if item.span is not None else "the step")
            launched = ""
            if item.launches:
                launched = " It launched " + ", ".join(f"{name} x{count}" for name, count in sorted(item.launches.items())) + "."
            stop(item.function, None, f"kernel {item.name}",
                 f"{where} calls the kernel {item.name} of its device ({_ms(item.end - item.start)}).{launched}",
                 kernel=item.id, node=item.node)
        elif item.kind == "forward":
            n = item
            if n.caller is not None:
                code, line = n.caller
                stop(code, line, f"{getattr(code, 'co_qualname', code.co_name)} calls {n.cls}.apply",
                     f"{getattr(code, 'co_qualname', code.co_name)} hands its tensors to {n.cls}.apply, which "
                     "runs the forward on their arrays" + (" and records a node of the graph." if n.recorded else
                                                           " (no input needs a gradient: no node is recorded)."),
                     node=n.id)
            ins = ", ".join(_shape(m) for m in n.inputs) or "no arrays"
            outs = ", ".join(_shape(m) for m in n.outputs) or "no arrays"
            kept = f" It keeps {_mib(n.saved_bytes)} for backward." if n.saved_bytes else ""
            failed = f" It raised {n.error}." if n.error else ""
            stop(n.source_function, None, f"{n.cls}.forward" + (f" in {n.module}" if n.module else ""),
                 f"{n.cls}.forward: {ins} -> {outs} in {_ms(n.end - n.start)}.{kept}{failed}", node=n.id)
        else:
            n = item
            grads = ", ".join(_shape(m) for m in n.inputs) or "no arrays"
            failed = f" It raised {n.error}." if n.error else ""
            stop(n.source_function, None, f"{n.cls}.backward" + (f" of {n.module}" if n.module else ""),
                 f"{n.cls}.backward gets the gradient of its output{'s' if len(n.inputs) > 1 else ''} ({grads}) "
                 f"and returns its inputs' in {_ms(n.end - n.start)}; the engine then frees the node.{failed}",
                 node=n.id)
    return stops


_SPAN_TEXT = {
    "backward": "{name}: the engine orders the graph's nodes from the loss back to the leaves and calls "
                "each node's backward once, with the summed gradient of its outputs",
    "optimizer": "{name}: the optimizer's own code, outside the graph",
    "loss": "the loss",
    "other": "{name}",
}


# ----------------------------------------------------------------------------- the file


def _asset(name: str) -> str:
    return resources.files("tinyflow.explainer").joinpath("assets", name).read_text(encoding="utf-8")


_MARKER = re.compile(r"/\*(STYLE|SCRIPT|DATA)\*/|<!--(TITLE)-->")


def render(data: dict[str, Any]) -> str:
    """The page's HTML for ``payload`` data: template, style, script and data in one file."""
    blob = json.dumps(data, separators=(",", ":"), default=str)
    blob = blob.replace("<", "\\u003c")  # "<" only occurs in strings: nothing in the data can close its <script>
    parts = {"STYLE": _asset("page.css"), "SCRIPT": _asset("page.js"), "DATA": blob,
             "TITLE": _escape(str(data["meta"].get("title", "one training step")))}
    template = _asset("page.html")
    found = {m.group(1) or m.group(2) for m in _MARKER.finditer(template)}
    if found != set(parts):
        raise RuntimeError(f"tinyflow explain: the page template lacks the markers {sorted(set(parts) - found)}")
    return _MARKER.sub(lambda m: parts[m.group(1) or m.group(2)], template)  # one pass: no insert is read again


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def write_page(ex: Any, path: str | os.PathLike) -> Path:
    """Write ``ex`` as one HTML page at ``path`` (its folder made if needed); returns the path."""
    out = Path(path)
    if out.parent and not out.parent.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
    text = render(payload(ex))
    tmp = out.with_name(out.name + ".part")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, out)
    return out
