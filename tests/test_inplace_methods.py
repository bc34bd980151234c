"""The in-place methods (tinyflow/inplace.py), put on Tensor when tensor.py is imported: they keep
autograd's in-place rules, from any thread, and tensor.py's list names exactly inplace.py's methods."""
from __future__ import annotations

import ast
import inspect
from pathlib import Path

import numpy as np
import pytest

import tinyflow
from tinyflow import inplace
from tinyflow.tensor import INPLACE_METHODS, Tensor

def test_they_work_and_keep_autograds_rules(fresh_python):
    out = fresh_python(
        "import sys\n"
        "import numpy as np\n"
        "import tinyflow\n"
        "out = {}\n"
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
        "    out['leaf'] = 'refused'\n")
    assert out["x"] == [[5.0, 5.0, 5.0], [2.0, 2.0, 2.0]] and out["sum"] == 21.0
    assert out["same"] is True
    assert out["grad"] == [0.0, 8.0, 8.0]  # d(4 a^2)/da = 8a, and the entry overwritten by b[0] = 0
    assert out["leaf"] == "refused"


@pytest.mark.parametrize("first", ["x.add_(1)", "x += 1", "x[0] = 1", "x.mul_(2)"])
def test_eight_threads_make_in_place_calls_at_once(first, fresh_python):
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
        "out = {'errors': errors, 'results': len(results), 'distinct': len({repr(r) for r in results})}\n")
    assert out == {"errors": [], "results": 8, "distinct": 1}


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


def test_tensor_holds_the_real_functions():
    for name in INPLACE_METHODS:
        assert vars(Tensor)[name] is getattr(inplace, name), name
    assert inspect.signature(Tensor.add_) == inspect.signature(inplace.add_)
    assert Tensor.clip_ is Tensor.clamp_


def test_uniform_and_normal_fast_path_keeps_the_rules():
    """uniform_ / normal_ (model building uses them) take a fast path: they count as in-place
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
