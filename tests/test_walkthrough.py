"""docs/walkthrough.md stays true: every `path.py:name` it cites names a real function or class."""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WALKTHROUGH = ROOT / "docs" / "walkthrough.md"
CITATION = re.compile(r"`([\w/]+\.py):([\w.]+)`")


def _defines(path: Path, dotted: str) -> bool:
    """Whether ``path`` defines ``dotted`` (a function, a class, or Class.method) at top level."""
    scope: list[ast.stmt] = ast.parse(path.read_text(), str(path)).body
    for part in dotted.split("."):
        found = next((node for node in scope
                      if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                      and node.name == part), None)
        if found is None:
            return False
        scope = found.body
    return True


def test_every_cited_function_exists():
    citations = CITATION.findall(WALKTHROUGH.read_text())
    assert len(citations) >= 40, "the walkthrough should trace the step through its functions"
    missing = [f"{path}:{name}" for path, name in citations
               if not (ROOT / path).is_file() or not _defines(ROOT / path, name)]
    assert not missing, f"docs/walkthrough.md cites names that do not exist: {missing}"


def test_the_checker_catches_a_wrong_name(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("class A:\n    def f(self):\n        pass\n\ndef g():\n    pass\n")
    assert _defines(module, "A.f") and _defines(module, "g")
    assert not _defines(module, "A.g") and not _defines(module, "h")
