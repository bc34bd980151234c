"""The page of `tinyflow explain` used as a person uses it: opened in a real headless browser
(Debian's chromium, driven by playwright; .ci/run installs chromium), its boxes counted, clicked
and walked through, and photographed.

The page is written from one AlexNet-64 CPU training step traced with ``tf.explain()``; what each
click should show is asked of ``inspect`` on the class that ran, never written here as a path.
``TINYFLOW_SCREENSHOT=docs`` also writes the screenshot to docs/images/explain_alexnet.png (the
README's picture).
"""
from __future__ import annotations

import inspect
import json
import os
import re
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install playwright)")
CHROMIUM = os.environ.get("TINYFLOW_CHROMIUM", "/usr/bin/chromium")
if not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM)):
    pytest.skip(f"no chromium at {CHROMIUM} (apt-get install chromium; .ci/run does where it can)",
                allow_module_level=True)

import tinyflow as tf  # noqa: E402
import tinyflow.nn.functional as F  # noqa: E402
from tinyflow import cli  # noqa: E402
from tinyflow.bench.workloads import tinyflow_step, workload  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]


def function_class(name: str) -> type:
    """The Function subclass called ``name`` (found by walking the subclasses, not by its file)."""
    for f in ("relu", "max_pool2d", "conv2d", "linear", "dropout", "cross_entropy"):
        getattr(F, f)
    todo = [tf.autograd.Function]
    while todo:
        cls = todo.pop()
        if cls.__name__ == name:
            return cls
        todo.extend(cls.__subclasses__())
    raise LookupError(name)


def where(function: Any) -> tuple[str, int]:
    """(path relative to the folder holding the tinyflow package, line of its ``def``), by inspect."""
    function = inspect.unwrap(function)
    root = Path(tf.__file__).resolve().parents[1]
    lines, start = inspect.getsourcelines(function)
    return (Path(inspect.getsourcefile(function)).resolve().relative_to(root).as_posix(),
            start + next(i for i, line in enumerate(lines) if line.lstrip().startswith("def ")))


def trace_step(fail: bool = False) -> SimpleNamespace:
    """One AlexNet-64 CPU step at batch 2 under tf.explain(), every Function.apply also counted
    by the test; ``fail``: MaxPool2dFunction.forward raises."""
    tf.manual_seed(0)
    step = tinyflow_step(workload("alexnet", 2), "cpu")
    step.train()
    Function = tf.autograd.Function
    original = vars(Function)["apply"]
    pool = function_class("MaxPool2dFunction")
    pool_forward = vars(pool)["forward"]
    applied: Counter[str] = Counter()

    def counting(cls: type, *args: Any, **kwargs: Any) -> Any:
        applied[cls.__name__] += 1
        return original.__func__(cls, *args, **kwargs)

    def broken(ctx: Any, *args: Any, **kwargs: Any) -> Any:
        raise ValueError("the window does not fit")

    type.__setattr__(Function, "apply", classmethod(counting))
    if fail:
        type.__setattr__(pool, "forward", staticmethod(broken))
    try:
        with tf.explain(model=step.model, meta={"title": "alexnet, one training step", "model": "alexnet",
                                                "device": "cpu", "batch_size": 2}) as ex:
            step.train()
    except ValueError:
        assert fail
    finally:
        type.__setattr__(Function, "apply", original)
        type.__setattr__(pool, "forward", pool_forward)
    return SimpleNamespace(ex=ex, applied=applied)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    profile = tempfile.mkdtemp(prefix="tinyflow-chromium-")
    with sync_api.sync_playwright() as p:
        try:
            context = p.chromium.launch_persistent_context(profile, executable_path=CHROMIUM, headless=True, args=ARGS,
                                                           viewport={"width": 1400, "height": 900})
        except sync_api.Error as exc:  # the machine's chromium, not the page: skip, saying why
            shutil.rmtree(profile, ignore_errors=True)
            pytest.skip(f"chromium at {CHROMIUM} did not start: {str(exc).strip().splitlines()[0]}")
        try:
            yield context
        finally:
            context.close()
            shutil.rmtree(profile, ignore_errors=True)


def open_page(browser: Any, path: Path) -> tuple[Any, list[str]]:
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("request", lambda r: errors.append(f"fetched {r.url}") if not r.url.startswith(("file:", "data:")) else None)
    page.goto(path.as_uri())
    page.wait_for_selector("#graph-svg .node")
    return page, errors


@pytest.fixture(scope="module")
def step_page(browser: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimpleNamespace]:
    traced = trace_step()
    path = traced.ex.save(tmp_path_factory.mktemp("explain") / "alexnet.html")
    page, errors = open_page(browser, path)
    data = json.loads(re.search(r'id="data">(.*?)</script>', path.read_text(), re.S).group(1))
    yield SimpleNamespace(page=page, errors=errors, ex=traced.ex, applied=traced.applied, data=data, path=path)
    page.close()


def test_one_box_per_traced_function_call(step_page: SimpleNamespace) -> None:
    page, ex = step_page.page, step_page.ex
    assert page.locator("#graph-svg .node").count() == len(ex.nodes) == 44
    assert page.locator('#graph-svg .node[data-kind="forward"]').count() == sum(step_page.applied.values())
    assert page.locator('#graph-svg .node[data-kind="backward"]').count() == sum(n.kind == "backward" for n in ex.nodes)
    assert page.locator("#timeline-svg .tl-bar[data-node]:not([data-kernel])").count() == len(ex.nodes)
    bands = {page.locator("#bands .band").nth(i).get_attribute("data-module")
             for i in range(page.locator("#bands .band").count())}
    assert {n.module for n in ex.nodes if n.module} <= bands
    assert "peak" in page.locator("#memory-peak").inner_text()
    assert step_page.errors == []


def test_a_click_shows_the_source_of_the_right_file_and_line(step_page: SimpleNamespace) -> None:
    page = step_page.page
    conv = function_class("Conv2dFunction")
    page.locator('#graph-svg .node[data-kind="forward"][data-cls="Conv2dFunction"]').nth(1).click()
    details = page.locator("#detail-body")
    path, line = where(conv.forward)
    assert (details.get_attribute("data-path"), int(details.get_attribute("data-line"))) == (path, line)
    assert details.locator("h2").inner_text() == "Conv2dFunction.forward"
    assert "module features.3" in details.inner_text()
    assert "def forward(" in details.locator("pre.code .l.hl").inner_text()

    page.locator('#graph-svg .node[data-kind="backward"][data-cls="Conv2dFunction"]').nth(1).click()
    assert (details.get_attribute("data-path"), int(details.get_attribute("data-line"))) == where(conv.backward)
    assert "def backward(" in details.locator("pre.code .l.hl").inner_text()

    page.locator('#graph-svg .node[data-kind="forward"][data-cls="Conv2dFunction"]').nth(1).click()
    details.locator("a.jump", has_text=":").first.click()  # "called from": the F function's line
    caller_line = int(details.get_attribute("data-line"))
    assert ".apply(" in details.locator("pre.code .l.hl").inner_text()  # the line that called the op
    code, line = next(n for n in step_page.ex.nodes if n.cls == "Conv2dFunction").caller
    assert caller_line == line
    assert step_page.errors == []


def test_next_walks_the_step_in_execution_order_file_by_file(step_page: SimpleNamespace) -> None:
    page, walk, sources = step_page.page, step_page.data["walk"], step_page.data["sources"]
    details = page.locator("#detail-body")
    files = []
    for i in range(40):
        page.click("#next")
        stop = walk[i]
        assert page.locator("#walk-pos").inner_text().startswith(f"stop {i + 1}/{len(walk)}")
        assert details.get_attribute("data-path") == sources[stop["src"]]["path"]
        assert int(details.get_attribute("data-line")) == stop["line"]
        assert details.locator("pre.code .l.hl").count() == 1
        files.append(details.get_attribute("data-path"))
    conv = function_class("Conv2dFunction")
    forward_file = where(conv.forward)[0]
    im2col_file = where(tf.kernels.im2col)[0]
    assert forward_file in files and im2col_file in files
    assert files.index(forward_file) < files.index(im2col_file)  # the op, then the kernel it calls
    page.keyboard.press("ArrowLeft")
    assert page.locator("#walk-pos").inner_text().startswith(f"stop 39/{len(walk)}")
    assert step_page.errors == []


def test_the_screenshot(browser: Any, tmp_path: Path) -> None:
    """The command's page (its memory counts the model's parameters too), a node clicked."""
    path = tmp_path / "alexnet.html"
    assert cli.main(["explain", "alexnet", "--batch-size", "2", "--warmup", "1", "--out", str(path)]) == 0
    page, errors = open_page(browser, path)
    page.locator('#graph-svg .node[data-kind="forward"][data-cls="Conv2dFunction"]').nth(1).click()
    raw = tmp_path / "raw.png"
    page.screenshot(path=str(raw))
    page.close()
    assert errors == []
    from PIL import Image

    with Image.open(raw) as image:
        assert image.size == (1400, 900)
        small = image.convert("RGB").quantize(colors=128)  # a UI in a few colours: a PNG of ~100 KB
        assert len(small.getcolors()) > 40  # drawn, not blank
    shot = tmp_path / "explain_alexnet.png"
    small.save(shot, optimize=True)
    assert 20_000 < shot.stat().st_size < 300_000
    if os.environ.get("TINYFLOW_SCREENSHOT") == "docs":
        shutil.copyfile(shot, ROOT / "docs" / "images" / "explain_alexnet.png")


def test_the_failing_node_is_marked(browser: Any, tmp_path: Path) -> None:
    traced = trace_step(fail=True)
    page, errors = open_page(browser, traced.ex.save(tmp_path / "failed.html"))
    try:
        failed = page.locator("#graph-svg .node.failed")
        assert failed.count() == 1 and failed.get_attribute("data-cls") == "MaxPool2dFunction"
        banner = page.locator("#error")
        assert banner.is_visible() and "MaxPool2dFunction.forward (features.2)" in banner.inner_text()
        assert "ValueError: the window does not fit" in banner.inner_text()
        assert page.locator("#detail-body h2").inner_text() == "MaxPool2dFunction.forward"
        assert page.locator("#graph-svg .node").count() == len(traced.ex.nodes) == 3
        assert errors == []
    finally:
        page.close()
