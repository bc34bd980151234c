"""tinyflow takes PyTorch's parameter names, positions and keyword-only markers.

For every name that PyTorch and tinyflow both define as ``torch.<name>`` / ``tinyflow.<name>``,
``torch.nn.functional.<name>`` / ``tinyflow.nn.functional.<name>`` and ``torch.Tensor.<name>`` /
``tinyflow.Tensor.<name>``, among the callables of ``torch.overrides.get_testing_overrides()``
(PyTorch's own list of its public functions and methods) and the ``torch.*`` functions of
``get_ignored_functions()`` (the factories: zeros, arange, ...), a program written for torch must bind
its arguments the same way in tinyflow: the same positional parameters in the same order, torch's
keyword-only parameters accepted (and keyword-only in tinyflow too), nothing required that torch
makes optional. tinyflow may accept more (a trailing optional parameter, ``**kwargs``).

Where torch's signature comes from, most exact first:

- torch's own Python function (``inspect.signature``; nn.functional's ``max_pool2d`` & co. are
  ``boolean_dispatch`` wrappers: their with-indices form carries the signature);
- for a builtin, the type stubs torch ships (torch/_C/*.pyi), generated from
  native_functions.yaml like the Python binding itself, one ``@overload`` per form. Forms of
  ``torch.<name>`` that name a parameter ``self`` are deprecated.yaml's old orders (``addmm(beta,
  self, alpha, mat1, mat2)``) or a Scalar-first variant (``pow(self: Number, exponent)``) and are
  left out;
- else the testing-override lambda. Those lambdas are only a fallback: they write ``out`` as a
  positional parameter, leave out ``*`` (``cov``), give ``Tensor.sin`` the function's
  ``(input, out)``, and some are plainly wrong (``adaptive_max_pool1d(inputs, ...)``).

A method is compared without its ``self``, and without ``out`` (methods have none). Dunder methods
are left out: Python calls them positionally, so their names are not part of the API.

A name with several forms (overloads) must accept each form; where the forms contradict each
other for one Python signature (``max(other)`` and ``max(dim)``), or the stub is not what torch's
binding takes, the name is listed in ``EXCEPTIONS`` with the reason, and its real call forms are
tested by hand below. ``PENDING`` lists the names whose fix belongs to another file. Both are strict
expected failures: a name that comes to match fails the suite until it is dropped from the list.
"""
from __future__ import annotations

import ast
import inspect
import os
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import pytest

import tinyflow as tf
import tinyflow.nn.functional as F

torch = pytest.importorskip("torch")


class Param(NamedTuple):
    name: str
    kind: str  # "pos" (positional or keyword), "kw" (keyword-only), "*" (var-positional), "**"
    optional: bool


Signature = tuple[Param, ...]

_KINDS = {
    inspect.Parameter.POSITIONAL_ONLY: "pos", inspect.Parameter.POSITIONAL_OR_KEYWORD: "pos",
    inspect.Parameter.VAR_POSITIONAL: "*", inspect.Parameter.KEYWORD_ONLY: "kw", inspect.Parameter.VAR_KEYWORD: "**",
}

# name -> why it is not compared (its real call forms are tested by hand below, where it has any).
EXCEPTIONS: dict[str, str] = {
    # forms that take different parameters at one position
    "Tensor.max": "max(), max(other) and max(dim, keepdim=False) share position 0; tinyflow reads a Tensor there as "
                  "other and takes other=",
    "Tensor.min": "as Tensor.max",
    "torch.max": "as Tensor.max, after input",
    "torch.min": "as Tensor.max, after input",
    "torch.std": "std(input, unbiased) puts a bool where std(input, dim, ...) has dim; tinyflow reads a bool there "
                 "as unbiased",
    "torch.var": "as torch.std",
    "Tensor.std": "as torch.std, without input",
    "Tensor.var": "as torch.std, without input",
    "torch.std_mean": "as torch.std",
    "torch.var_mean": "as torch.std",
    "torch.scatter": "scatter(input, dim, index, src) and scatter(input, dim, index, value) share position 3; "
                     "tinyflow reads a number there as value, and takes value=",
    "Tensor.scatter": "as torch.scatter, without input",
    "Tensor.scatter_": "as torch.scatter, without input",
    "torch.tensor_split": "tensor_split(input, indices | sections | tensor_indices_or_sections, dim) name position 1 "
                          "by its type; tinyflow takes indices_or_sections there (torch's documented name) and "
                          "sections= / indices= as keywords",
    "Tensor.tensor_split": "as torch.tensor_split, without input",
    "torch.isin": "isin(elements | element, test_elements | test_element) name the operands by type (a number is "
                  "element); tinyflow takes the Tensor names",
    "torch.result_type": "result_type(tensor, other), (scalar, tensor), (scalar1, scalar2) name the operands by "
                         "type; tinyflow takes them by position",
    "torch.arange": "arange(end), arange(start, end) and arange(start, end, step) share position 0; tinyflow takes "
                    "start there (a lone value is the end) and end=",
    "torch.randint": "randint(high, size) and randint(low, high, size) share positions 0 and 1; tinyflow takes "
                     "randint(low, high, size), randint(high, size) and high= / size=",
    "torch.randint_like": "randint_like(input, high) and randint_like(input, low, high) share position 1; tinyflow "
                          "reads a lone value as high, and takes high=",
    "torch.repeat_interleave": "the form repeat_interleave(repeats) (no input: indices repeated) is not taken; "
                               "repeat_interleave(input, repeats, dim) is",
    "torch.full": "the form full(size, fill_value, *, names) makes a named tensor (a prototype tinyflow does not have)",
    "torch.mm": "torch 2.13's form mm(input, mat2, out_dtype) runs on CUDA only, for half inputs (NotImplementedError "
                "on the CPU); tinyflow takes mm(input, mat2)",
    "torch.bmm": "as torch.mm",
    "torch.addmm": "as torch.mm",
    "torch.baddbmm": "as torch.mm",
    # where the stub is not what torch's binding takes
    "Tensor.requires_grad_": "the stub names its parameter mode; torch's binding takes requires_grad (as tinyflow)",
    "torch.linspace": "the stub's form with steps optional is refused by torch 2.13 (linspace(0, 1) is a TypeError); "
                      "steps is required, as in tinyflow",
    "torch.logspace": "as torch.linspace",
    "F.hardshrink": "F.hardshrink is the builtin torch.hardshrink, whose stub has out=; nn.functional documents "
                    "hardshrink(input, lambd=0.5), as tinyflow",
    "torch.einsum": "torch.einsum(*args) takes the equation and operands in several orders; tinyflow takes "
                    "einsum(equation, *operands) and a list of operands",
}

# name -> the file that must change: names that differ from torch today, fixed outside this test's
# change (strict xfail: drop the entry with the fix).
PENDING: dict[str, str] = {
}


# ------------------------------------------------------------------------------ torch's signatures
def _signature(fn: Callable[..., Any]) -> Signature:
    params = inspect.signature(fn).parameters.values()
    return tuple(Param(p.name, _KINDS[p.kind], p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD))
                 for p in params)


def _stub_signature(node: ast.FunctionDef) -> Signature:
    args = node.args
    positional = args.posonlyargs + args.args
    first_default = len(positional) - len(args.defaults)
    params = [Param(a.arg, "pos", i >= first_default) for i, a in enumerate(positional)]
    if args.vararg:
        params.append(Param(args.vararg.arg, "*", True))
    params += [Param(a.arg, "kw", d is not None) for a, d in zip(args.kwonlyargs, args.kw_defaults)]
    if args.kwarg:
        params.append(Param(args.kwarg.arg, "**", True))
    return tuple(params)


def _stubs(file: str, class_name: str | None = None) -> dict[str, list[Signature]]:
    """name -> its distinct signatures in torch/_C/<file> (module level, or in ``class_name``)."""
    path = os.path.join(os.path.dirname(torch.__file__), "_C", file)
    tree = ast.parse(open(path, encoding="utf-8").read())
    body = tree.body if class_name is None else next(
        n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name).body
    found: dict[str, list[Signature]] = {}
    for node in body:
        if isinstance(node, ast.FunctionDef):
            forms = found.setdefault(node.name, [])
            if (sig := _stub_signature(node)) not in forms:
                forms.append(sig)
    return found


_STUBS = {
    "torch": _stubs("_VariableFunctions.pyi"), "torch._C._nn": _stubs("_nn.pyi"),
    "Tensor": _stubs("__init__.pyi", "TensorBase"),
}
_OVERRIDES = torch.overrides.get_testing_overrides()


def torch_forms(space: str, name: str, obj: Any) -> list[Signature]:
    """torch's call forms of ``obj`` (``space.name``), as the module docstring says."""
    forms: list[Signature] = []
    if inspect.isfunction(obj):
        dispatched = inspect.getclosurevars(obj).nonlocals.get("if_true")  # boolean_dispatch
        form = _signature(obj if dispatched is None else dispatched)
        if [p.kind for p in form] != ["*", "**"]:  # (*args, **kwargs) names nothing: the lambda does
            forms = [form]
    else:
        stub_space = "Tensor" if space == "Tensor" else "torch._C._nn" if obj.__module__ == "torch._C._nn" else "torch"
        forms = _STUBS[stub_space].get(name, [])
        if space != "Tensor":
            forms = [f for f in forms if "self" not in {p.name for p in f}]
    if not forms:
        lam = _signature(_OVERRIDES[obj])
        forms = [tuple(Param(p.name, "kw", True) if p.name == "out" else p for p in lam)]
    if space == "Tensor":
        forms = [tuple(p for p in f[1:] if p.name != "out") for f in forms]
    return forms


# ------------------------------------------------------------------------------ the comparison
def mismatches(form: Signature, ours: Signature, strict: bool) -> list[str]:
    """What a call written for torch's ``form`` finds wrong in tinyflow's signature ``ours``.
    ``strict``: torch's keyword-only parameters must be keyword-only in tinyflow too (not asked
    when another form of the name takes the parameter by position)."""
    problems = []
    torch_positional = [p for p in form if p.kind == "pos"]
    our_positional = [p for p in ours if p.kind == "pos"]
    by_name = {p.name: p for p in ours}
    varargs, varkw = any(p.kind == "*" for p in ours), any(p.kind == "**" for p in ours)
    for i, p in enumerate(torch_positional):
        if i < len(our_positional):
            if our_positional[i].name != p.name:
                problems.append(f"position {i} is {p.name!r} in torch, {our_positional[i].name!r} here")
        elif not varargs:
            problems.append(f"{p.name!r} (position {i}) is not accepted")
        elif p.name not in by_name and not varkw:
            problems.append(f"{p.name!r} is not accepted as a keyword")
    for p in form:
        if p.kind == "kw":
            if p.name not in by_name and not varkw:
                problems.append(f"keyword {p.name!r} is not accepted")
            elif strict and p.name in by_name and by_name[p.name].kind != "kw":
                problems.append(f"{p.name!r} is keyword-only in torch")
    theirs = {p.name: p for p in form}
    for p in ours:
        if p.kind in ("pos", "kw") and not p.optional:
            if p.name not in theirs:
                problems.append(f"{p.name!r} is required here and torch has no {p.name!r}")
            elif theirs[p.name].optional:
                problems.append(f"{p.name!r} is required here and optional in torch")
    return problems


def name_mismatches(forms: list[Signature], ours: Signature) -> list[str]:
    positional_somewhere = {p.name for f in forms for p in f if p.kind == "pos"}
    problems = []
    for form in forms:
        strict_form = tuple(p for p in form if not (p.kind == "kw" and p.name in positional_somewhere))
        found = mismatches(form, ours, strict=False) + [
            m for m in mismatches(strict_form, ours, strict=True) if "keyword-only" in m]
        problems += [f"{_format(form)}: {m}" for m in found]
    return problems


def _format(sig: Signature) -> str:
    out, star = [], False
    for p in sig:
        if p.kind == "kw" and not star:
            out.append("*")
            star = True
        star = star or p.kind == "*"
        out.append({"*": "*", "**": "**"}.get(p.kind, "") + p.name + ("=" if p.optional and p.kind in ("pos", "kw") else ""))
    return "(" + ", ".join(out) + ")"


SPACES = (("torch", torch, tf), ("F", torch.nn.functional, F), ("Tensor", torch.Tensor, tf.Tensor))
# torch.* functions that torch does not let a Tensor subclass override (the factories: zeros, arange,
# ...): not in get_testing_overrides, compared all the same.
_IGNORED = torch.overrides.get_ignored_functions()


def _listed(space: str, name: str, obj: Any) -> bool:
    try:
        return obj in _OVERRIDES or (space == "torch" and obj in _IGNORED and getattr(obj, "__name__", "") == name)
    except TypeError:  # unhashable
        return False


def common_names(space: str) -> dict[str, tuple[Any, Any]]:
    """label -> (torch's callable, tinyflow's) for the names both define in ``space``."""
    _, theirs, ours = next(s for s in SPACES if s[0] == space)
    found = {}
    for name in sorted(dir(theirs)):
        if name.startswith("__"):
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            obj = getattr(theirs, name, None)
        if obj is None or not _listed(space, name, obj) or isinstance(obj, type):
            continue
        mine = getattr(ours, name, None)
        if mine is None or isinstance(mine, type) or not callable(mine):
            continue
        found[f"{space}.{name}"] = (obj, mine)
    return found


def problems_of(label: str, theirs: Any, mine: Any) -> list[str]:
    space, name = label.split(".", 1)
    ours = _signature(mine)
    if space == "Tensor":
        ours = ours[1:]
    return name_mismatches(torch_forms(space, name, theirs), ours)


COMMON = {label: pair for space, _, _ in SPACES for label, pair in common_names(space).items()}


def _case(label: str) -> Any:
    why = EXCEPTIONS.get(label) or PENDING.get(label)
    return pytest.param(label, marks=pytest.mark.xfail(strict=True, reason=why)) if why else label


@pytest.mark.parametrize("label", [_case(label) for label in COMMON])
def test_signature_matches_torch(label: str) -> None:
    """A name listed in EXCEPTIONS or PENDING is expected to differ (strict: once it matches, drop it there)."""
    theirs, mine = COMMON[label]
    problems = problems_of(label, theirs, mine)
    assert not problems, f"{label}{_format(_signature(mine))} binds arguments unlike torch:\n" + "\n".join(problems)


def test_the_comparison_covers_the_surface() -> None:
    counts = {space: sum(label.startswith(space + ".") for label in COMMON) for space, _, _ in SPACES}
    assert counts["torch"] > 300 and counts["F"] > 90 and counts["Tensor"] > 400, counts
    assert not (set(EXCEPTIONS) | set(PENDING)) - set(COMMON), "an exception names nothing compared"


def test_the_comparison_can_fail() -> None:
    """The check itself: the names, positions and markers that PyTorch programs trip over."""
    def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1): ...  # noqa: ANN001,ANN202
    def cat(tensors, dim=0, out=None): ...  # noqa: ANN001,ANN202
    def zeros_like(input, dtype=None): ...  # noqa: ANN001,ANN202,A002
    forms = torch_forms("F", "conv2d", torch.nn.functional.conv2d)
    assert any("position 0 is 'input' in torch, 'x' here" in m for m in name_mismatches(forms, _signature(conv2d)))
    assert any("'out' is keyword-only" in m for m in name_mismatches(torch_forms("torch", "cat", torch.cat),
                                                                     _signature(cat)))
    found = name_mismatches(torch_forms("torch", "zeros_like", torch.zeros_like), _signature(zeros_like))
    assert any("'layout' is not accepted" in m for m in found) and any("'dtype' is keyword-only" in m for m in found)


# ------------------------------------------------------------------------------ by hand
def test_the_reported_keyword_calls() -> None:
    x = tf.randn(2, 3, 8, 8)
    w = tf.randn(4, 3, 3, 3)
    assert F.conv2d(input=x, weight=w, padding=1).shape == (2, 4, 8, 8)
    assert F.max_pool2d(input=x, kernel_size=2).shape == (2, 3, 4, 4)
    assert F.avg_pool2d(input=x, kernel_size=2).shape == (2, 3, 4, 4)
    assert F.adaptive_avg_pool2d(input=x, output_size=1).shape == (2, 3, 1, 1)
    assert F.adaptive_max_pool2d(input=x, output_size=(2, 2)).shape == (2, 3, 2, 2)
    assert F.local_response_norm(input=x, size=2).shape == x.shape
    assert F.dropout(input=x, p=0.5, training=False) is not None
    rm, rv = tf.zeros(3), tf.ones(3)
    assert F.batch_norm(input=x, running_mean=rm, running_var=rv).shape == x.shape
    logits, target = tf.randn(4, 5), tf.tensor([0, 1, 2, 3])
    np.testing.assert_allclose(F.cross_entropy(input=logits, target=target).item(),
                               F.nll_loss(input=F.log_softmax(logits, dim=1), target=target).item(), rtol=1e-6)
    assert F.linear(input=tf.randn(2, 3), weight=tf.randn(4, 3)).shape == (2, 4)


def test_overloaded_call_forms() -> None:
    x = tf.arange(6.0)
    assert x.reshape(shape=(2, 3)).shape == (2, 3) and x.reshape((2, 3)).shape == (2, 3)
    assert x.reshape(2, 3).shape == (2, 3) and x.view(size=(3, 2)).shape == (3, 2)
    assert x.view(3, 2).shape == (3, 2) and x.view((3, 2)).shape == (3, 2)
    assert x.view(dtype=tf.int16).shape == (12,) and x.view(tf.int32).dtype == tf.int32
    assert x.expand(size=(2, 6)).shape == (2, 6) and x.broadcast_to(size=(2, 6)).shape == (2, 6)
    assert x.repeat(repeats=(2,)).shape == (12,) and x.tile(dims=(2,)).shape == (12,)
    cond = x > 2
    np.testing.assert_array_equal(tf.where(condition=cond, input=x, other=-x).numpy(),
                                  np.where(x.numpy() > 2, x.numpy(), -x.numpy()))
    np.testing.assert_array_equal(x.where(condition=cond, other=0.0).numpy(), np.where(x.numpy() > 2, x.numpy(), 0))
    z = tf.zeros_like(input=x, layout=None, dtype=tf.int64)
    assert z.dtype == tf.int64 and z.shape == x.shape
    assert tf.ones_like(input=x, memory_format=tf.preserve_format).shape == x.shape
    assert tf.full_like(input=x, fill_value=2.0).sum().item() == 12.0
    y = tf.tensor([5.0, 0.0, 9.0, 1.0, 1.0, 1.0])
    np.testing.assert_array_equal(tf.max(x, other=y).numpy(), np.maximum(x.numpy(), y.numpy()))
    np.testing.assert_array_equal(x.max(y).numpy(), np.maximum(x.numpy(), y.numpy()))
    np.testing.assert_array_equal(x.min(other=y).numpy(), np.minimum(x.numpy(), y.numpy()))
    assert x.max(dim=0).indices.item() == 5 and tf.min(x, 0, True).values.shape == (1,)
    np.testing.assert_allclose(x.std(False).item(), np.std(x.numpy()), rtol=1e-6)
    np.testing.assert_allclose(x.var(unbiased=True).item(), np.var(x.numpy(), ddof=1), rtol=1e-6)
    np.testing.assert_allclose(tf.std(x, False).item(), np.std(x.numpy()), rtol=1e-6)
    np.testing.assert_allclose(tf.var_mean(x, False)[0].item(), np.var(x.numpy()), rtol=1e-6)
    index = tf.tensor([[0, 1]])
    np.testing.assert_array_equal(tf.zeros(2, 2).scatter(0, index, 5.0).numpy(), [[5, 0], [0, 5]])
    np.testing.assert_array_equal(tf.zeros(2, 2).scatter(dim=0, index=index, value=5.0).numpy(), [[5, 0], [0, 5]])
    np.testing.assert_array_equal(tf.zeros(2, 2).scatter(dim=0, index=index, src=tf.ones(1, 2)).numpy(),
                                  [[1, 0], [0, 1]])
    m = tf.arange(16.0).reshape(4, 4)
    assert [t.shape for t in m.tensor_split(sections=2)] == [(2, 4), (2, 4)]
    assert [t.shape for t in m.tensor_split(indices=[1], dim=1)] == [(4, 1), (4, 3)]
    assert [t.shape for t in m.hsplit(sections=2)] == [(4, 2), (4, 2)]
    assert [t.shape for t in m.vsplit(indices=[1, 3])] == [(1, 4), (2, 4), (1, 4)]
    assert [t.shape for t in m.hsplit(1, 3)] == [(4, 1), (4, 2), (4, 1)]
    assert tf.isin(elements=x, test_elements=tf.tensor([1.0, 2.0])).sum().item() == 2
    assert x.uniform_(**{"from": 2.0, "to": 3.0}).min().item() >= 2.0
    assert tf.randn(2, requires_grad=False).requires_grad_(requires_grad=True).requires_grad


def test_lazily_resolved_names_show_their_real_signatures(fresh_python) -> None:
    """F's family files, the surface's methods and tinyflow.* functions load on first use; their
    signatures are the real ones on the first look-up."""
    out = fresh_python(
        "import inspect, tinyflow as tf, tinyflow.nn.functional as F\n"
        "def bare(f):\n"
        "    sig = inspect.signature(f)\n"
        "    params = [p.replace(annotation=p.empty) for p in sig.parameters.values()]\n"
        "    return str(sig.replace(parameters=params, return_annotation=sig.empty))\n"
        "out = [bare(f) for f in (F.max_pool2d, F.cross_entropy, tf.sin, tf.cumsum, tf.Tensor.cumsum,"
        " tf.zeros_like)]\n")
    assert out[0].startswith("(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_ind"), out
    assert out[1].startswith("(input, target, weight=None"), out
    assert out[2].replace(" -> 'Tensor'", "") == "(input, *, out=None)", out
    assert out[3].startswith("(input, dim, *, dtype=None"), out
    assert out[4].startswith("(self, dim, *, dtype=None"), out
    assert out[5].startswith("(input, *, memory_format=None, dtype=None, layout=None"), out


def test_factory_keywords_as_torch() -> None:
    """PyTorch's factory keywords: size=, out= (whose dtype and device are the defaults), layout=None,
    pin_memory and memory_format (accepted, nothing to do), and out= on cat, stack and where."""
    assert tf.zeros(size=(2, 3)).shape == (2, 3) and tf.randn(size=(4,), pin_memory=False).shape == (4,)
    out = tf.empty(0, dtype=tf.float64)
    assert tf.arange(4, out=out) is out and out.dtype == tf.float64 and out.tolist() == [0.0, 1.0, 2.0, 3.0]
    assert tf.ones(2, 2, out=out) is out and out.shape == (2, 2)
    theirs = torch.empty(0, dtype=torch.float64)
    torch.linspace(0, 1, 3, out=theirs)
    np.testing.assert_array_equal(tf.linspace(0, 1, 3, out=out).numpy(), theirs.numpy())
    ints = tf.empty(0, dtype=tf.int64)
    assert tf.cat([tf.tensor([1]), tf.tensor([2])], out=ints) is ints and ints.tolist() == [1, 2]
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type"):
        tf.cat([tf.ones(2)], out=ints)  # as torch: float into an int64 out
    with pytest.raises(RuntimeError, match="don't support automatic differentiation"):
        tf.stack([tf.ones(2, requires_grad=True)], out=tf.empty(0))
    assert tf.full(size=(2,), fill_value=7, layout=None).tolist() == [7, 7]
    with pytest.raises(ValueError, match="zeros: layout="):
        tf.zeros(2, layout="sparse_coo")
    x = tf.arange(6.0)
    assert tf.zeros_like(x, memory_format=tf.preserve_format, pin_memory=False).dtype == x.dtype
    pieces = tf.split(tensor=x, split_size_or_sections=[2, 4])
    assert [p.shape for p in pieces] == [(2,), (4,)]
    assert tf.arange(end=3).tolist() == [0, 1, 2] and tf.randint(high=5, size=(3,)).max().item() < 5
    assert tf.randint_like(x, 3).max().item() < 3 and tf.randint_like(x, low=1, high=2).min().item() == 1
    assert tf.eye(n=2, m=3).shape == (2, 3) and tf.randperm(n=4, dtype=tf.int32).dtype == tf.int32


@pytest.mark.parametrize("call", [
    "linspace(0, 1, 5, dtype={bool})", "linspace(0, 1, 2, dtype={bool})", "linspace(3, 1, 1, dtype={bool})",
    "linspace(0, 1, 0, dtype={bool})", "logspace(0, 1, 5, dtype={bool})", "logspace(0, 1, 1, dtype={bool})",
    "arange(5, dtype={bool})", "arange(0, 0, dtype={bool})", "arange(0.0, 2.5, 0.5, dtype={bool})",
    "range(0, 2, dtype={bool})", "linspace(0, 1, 5, dtype={uint8})", "logspace(0, 1, 5, dtype={uint8})",
])
def test_ranges_in_bool_are_refused_as_torch(call: str) -> None:
    """torch computes linspace / logspace / arange / range in a number type and has no bool kernel
    (NotImplementedError), except for a range of one or no value; tinyflow refuses the same calls, in
    one line that names the function and the dtype."""
    def run(lib: Any, dtypes: dict[str, Any]) -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # range is deprecated in both
            try:
                return eval(call.format(**dtypes), {"lib": lib}, {}).tolist()  # noqa: S307 (our own strings)
            except NotImplementedError as e:
                return e
    call = "lib." + call
    theirs = run(torch, {"bool": "lib.bool", "uint8": "lib.uint8"})
    ours = run(tf, {"bool": "lib.bool", "uint8": "lib.uint8"})
    if isinstance(theirs, Exception):
        assert isinstance(ours, NotImplementedError), ours
        op = call.split("(")[0].removeprefix("lib.")
        assert str(ours).startswith(f"{op}: not implemented for dtype bool") and "\n" not in str(ours)
    else:
        assert ours == theirs


def test_weighted_l1_and_mse_losses_as_torch() -> None:
    """F.l1_loss takes torch's weight= (last): 'mean' is the weighted mean sum(w * loss) / sum(w)."""
    rng = np.random.default_rng(0)
    a, t, w = (rng.standard_normal((3, 4)) for _ in range(3))
    w = np.abs(w)
    for name in ("l1_loss", "mse_loss"):
        for reduction in ("mean", "sum", "none"):
            ours = getattr(F, name)(tf.tensor(a), tf.tensor(t), reduction=reduction, weight=tf.tensor(w))
            theirs = getattr(torch.nn.functional, name)(torch.tensor(a), torch.tensor(t), reduction=reduction,
                                                        weight=torch.tensor(w))
            np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-12)
    with pytest.raises(ValueError, match="l1_loss: weight of shape"):
        F.l1_loss(tf.tensor(a), tf.tensor(t), weight=tf.ones(4))


def test_method_keywords_as_torch() -> None:
    x = tf.tensor([3.0, 4.0], requires_grad=True)
    y = (x * x).sum()
    with pytest.raises(NotImplementedError, match="backward\\(create_graph=True / inputs=...\\)"):
        y.backward(create_graph=True)
    y.backward(retain_graph=None)
    assert x.grad.tolist() == [6.0, 8.0]
    assert tf.tensor([1.0, 2.0]).dot(tensor=tf.tensor([3.0, 4.0])).item() == 11.0
    assert tf.tensor([1.0, 2.0]).pow(exponent=2).tolist() == [1.0, 4.0]
    assert tf.ones(2, 3).swapdims(dim0=0, dim1=1).shape == (3, 2)
    assert tf.tensor([1.25], dtype=tf.float64).round(decimals=1).item() == 1.2
    with pytest.raises(TypeError):
        tf.tensor([1.25]).round(1)  # decimals is keyword-only, as in torch
    assert tf.tensor([5.0]).subtract(2, 2).item() == 1.0
    assert tf.norm(tf.tensor([3.0, 4.0]), 2, None, False, None, tf.float64).dtype == tf.float64
    assert tf.ones(2).clone(memory_format=tf.contiguous_format).numpy(force=True).tolist() == [1.0, 1.0]
    assert tf.ones(2).cpu(memory_format=tf.preserve_format).shape == (2,)
