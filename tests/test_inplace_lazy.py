"""The in-place methods (tinyflow/inplace.py) and the reductions (tinyflow/ops/reduce.py) load on
first use (issue 25): an AlexNet training step, which makes neither, loads neither, and after the
first use they behave as before (autograd's in-place rules included), from any thread."""
from __future__ import annotations

import ast
import inspect
from pathlib import Path

import numpy as np
import pytest

import tinyflow
from tinyflow import _lazy_names, inplace
from tinyflow.tensor import INPLACE_METHODS, Tensor

LOADED = "out['loaded'] = sorted(m for m in ('tinyflow.inplace', 'tinyflow.ops.reduce') if m in sys.modules)\n"


def test_an_alexnet_step_loads_neither_inplace_nor_reduce(fresh_python):
    out = fresh_python(
        "import numpy as np, sys\n"
        "import tinyflow\n"
        "import tinyflow.nn.functional as F\n"
        "import tinyflow.optim as optim\n"
        "from tinyflow.models import get_model\n"
        "tinyflow.manual_seed(0)\n"
        "model = get_model('alexnet', num_classes=10)\n"  # nn.init draws every parameter: uniform_
        "opt = optim.SGD(list(model.parameters()), lr=0.02, momentum=0.9, weight_decay=5e-4)\n"
        "x = tinyflow.tensor(np.random.default_rng(0).standard_normal((2, 3, 64, 64)).astype(np.float32))\n"
        "opt.zero_grad()\n"
        "loss = F.cross_entropy(model(x), tinyflow.tensor(np.array([1, 7])))\n"
        "loss.backward()\n"
        "opt.step()\n"
        "out = {'finite': bool(np.isfinite(loss.item()))}\n" + LOADED)
    assert out == {"finite": True, "loaded": []}


def test_first_use_loads_them_and_they_work(fresh_python):
    out = fresh_python(
        "import sys\n"
        "import numpy as np\n"
        "import tinyflow\n"
        "out = {}\n" + LOADED.replace("'loaded'", "'at_import'") +
        "x = tinyflow.zeros(2, 3)\n"
        "y = tinyflow.ones(2, 3)\n"
        "x.add_(1)\n"
        "x += y\n"
        "x[0] = 5\n"
        "s = x.sum()\n"
        "out['x'] = x.tolist()\n"
        "out['sum'] = s.item()\n"
        "out['same'] = tinyflow.Tensor.add_ is sys.modules['tinyflow.inplace'].add_\n"
        # autograd's in-place rules: the history moves onto the op; a view's write reaches its base
        "a = tinyflow.ones(3, requires_grad=True)\n"
        "b = a * 2\n"
        "b.mul_(b)\n"
        "b[0] = 0\n"
        "b.sum().backward()\n"
        "out['grad'] = a.grad.tolist()\n"
        "try:\n"
        "    a.add_(1)\n"
        "    out['leaf'] = 'allowed'\n"
        "except RuntimeError:\n"
        "    out['leaf'] = 'refused'\n" + LOADED)
    assert out["at_import"] == []
    assert out["x"] == [[5.0, 5.0, 5.0], [2.0, 2.0, 2.0]] and out["sum"] == 21.0
    assert out["same"] is True
    assert out["grad"] == [0.0, 8.0, 8.0]  # d(4 a^2)/da = 8a, and the entry overwritten by b[0] = 0
    assert out["leaf"] == "refused"
    assert out["loaded"] == ["tinyflow.inplace", "tinyflow.ops.reduce"]


@pytest.mark.parametrize("first", ["x.add_(1)", "x += 1", "x[0] = 1", "x.mul_(2)"])
def test_eight_threads_make_the_first_inplace_call_at_once(first, fresh_python):
    out = fresh_python(
        "import threading\n"
        "import tinyflow\n"
        "from tinyflow.tensor import INPLACE_METHODS\n"
        "start = threading.Barrier(8)\n"
        "results, errors = [], []\n"
        "def work():\n"
        "    x = tinyflow.ones(4)\n"
        "    start.wait()\n"
        "    try:\n"
        f"        {first}\n"
        "        x.sub_(1)\n"
        "        x -= 0\n"
        "        results.append(x.tolist())\n"
        "    except BaseException as exc:\n"
        "        errors.append(repr(exc))\n"
        "threads = [threading.Thread(target=work) for _ in range(8)]\n"
        "[t.start() for t in threads]\n"
        "[t.join() for t in threads]\n"
        "out = {'errors': errors, 'results': len(results), 'distinct': len({repr(r) for r in results}),\n"
        "       'stand_ins_left': [n for n in INPLACE_METHODS\n"
        "                          if type(vars(tinyflow.Tensor)[n]).__name__ == 'StandIn']}\n")
    assert out == {"errors": [], "results": 8, "distinct": 1, "stand_ins_left": []}


def test_the_list_of_names_matches_inplace_py():
    """tensor.py writes the list once; it names exactly the methods inplace.py defines (its
    module-level functions and aliases whose first parameter is ``self``)."""
    tree = ast.parse(Path(inplace.__file__).read_text())
    defined = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)
               and node.args.args and node.args.args[0].arg == "self"}
    aliases = {target.id for node in tree.body if isinstance(node, ast.Assign)
               and isinstance(node.value, ast.Name) and node.value.id in defined for target in node.targets}
    assert sorted(INPLACE_METHODS) == sorted(defined | aliases)
    assert len(set(INPLACE_METHODS)) == len(INPLACE_METHODS)
    assert inplace.METHODS is INPLACE_METHODS


def test_after_loading_tensor_holds_the_real_functions():
    tinyflow.zeros(1).add_(0)
    for name in INPLACE_METHODS:
        assert vars(Tensor)[name] is getattr(inplace, name), name
    assert inspect.signature(Tensor.add_) == inspect.signature(inplace.add_)
    assert Tensor.clip_ is Tensor.clamp_


def test_stand_in_answers_as_the_real_attribute():
    """StandIn (tinyflow/_lazy_names.py) on a class of its own: methods, dunders and properties."""

    class Box:
        def __init__(self, v):
            self.v = v

    calls = []

    def load():
        calls.append(1)
        Box.double = lambda self: self.v * 2
        Box.__iadd__ = lambda self, other: Box(self.v + other)
        Box.__setitem__ = lambda self, key, value: setattr(self, "v", value)
        Box.half = property(lambda self: self.v / 2)

    for name in ("double", "__iadd__", "__setitem__", "half"):
        setattr(Box, name, _lazy_names.StandIn(Box, name, load))
    b = Box(3)
    b += 1  # a special method, looked up on the type
    assert b.v == 4 and calls == [1]
    b[0] = 10
    assert b.double() == 20 and b.half == 5.0 and Box.double(b) == 20
    assert calls == [1]  # loaded once: the stand-ins are gone

    class Empty:
        pass

    Empty.gone = _lazy_names.StandIn(Empty, "gone", lambda: None)
    with pytest.raises(AttributeError, match="did not define it"):
        Empty().gone  # noqa: B018


def test_uniform_and_normal_fast_path_keeps_the_rules():
    """uniform_ / normal_ live in tensor.py (model building uses them): they count as in-place
    edits, refuse a leaf that requires grad while autograd records, and are recorded on a non-leaf."""
    tinyflow.manual_seed(0)
    t = tinyflow.zeros(1000)
    v = t._version
    assert t.uniform_(2, 3) is t and t._version == v + 1
    assert 2 <= float(t.min()) and float(t.max()) < 3
    t.normal_(5, 0.1)
    assert abs(float(t.mean()) - 5) < 0.05 and t._version == v + 2
    t.uniform_(**{"from": -1, "to": 0})
    assert float(t.max()) < 0
    leaf = tinyflow.zeros(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf"):
        leaf.uniform_()
    with tinyflow.no_grad():
        leaf.uniform_()
    a = tinyflow.ones(3, requires_grad=True)
    b = a * 1
    b.normal_()
    (b * a).sum().backward()
    assert np.allclose(a.grad.numpy(), b.detach().numpy())  # no gradient through the old value
    expanded = tinyflow.zeros(3).expand(2, 3)
    with pytest.raises(RuntimeError, match="broadcast"):
        expanded.uniform_()
