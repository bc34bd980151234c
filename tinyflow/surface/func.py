"""``torch.func``: composable function transforms (``grad``, ``vjp``, ``jacrev``, ``vmap``) and
``functional_call`` / ``stack_module_state`` for calling modules as functions of their weights.

tinyflow has one level of autograd and no batching rule per op, so these are the single-level
forms of PyTorch's transforms:

- ``grad``, ``grad_and_value``, ``vjp``, ``jacrev``, ``jacfwd``, ``jvp`` run ``func`` on detached
  copies of the chosen inputs that require grad and differentiate with ``tinyflow.autograd.grad``.
  Their results are plain tensors (not connected to any graph outside the transform). Nesting
  them (``grad(grad(f))``, ``jacrev(jacrev(f))``, ``hessian``) needs differentiable backward
  passes, which tinyflow does not record: a NotImplementedError. ``jacfwd`` and ``jvp`` are
  computed in reverse mode (one backward pass per output element): the same values.
- ``vmap`` is a Python loop over the mapped dimension whose per-sample outputs are stacked. It
  composes with everything, ``vmap(grad(f))`` (per-sample gradients) and
  ``vmap(functional_call, in_dims=(None, 0, None))`` (model ensembles) included; it costs one
  call of ``func`` per sample instead of one batched call.

Inputs and outputs may be nested tuples, lists and dicts of tensors (PyTorch's pytrees).
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from tinyflow.autograd.grad_mode import enable_grad
from tinyflow.autograd.engine import grad as autograd_grad  # (this module defines torch.func.grad)
from tinyflow.autograd.functional import jacobian_blocks, jacobian_vector_products
from tinyflow.creation import stack, zeros_like

if TYPE_CHECKING:
    from tinyflow.nn.modules.module import Module
    from tinyflow.tensor import Tensor

__all__ = ["functional_call", "stack_module_state", "grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd",
           "hessian", "vmap", "functionalize", "linearize", "replace_all_batch_norm_modules_", "debug_unwrap"]


# ------------------------------------------------------------------------------------------ pytrees
class _TreeSpec(NamedTuple):
    """The structure of a nested container: ``kind`` is "leaf", "none", "tuple", "list",
    "namedtuple" or "dict"; ``keys`` the dict keys; ``children`` one spec per item."""

    kind: str
    type: Any = None
    keys: tuple = ()
    children: tuple = ()

    def __repr__(self) -> str:
        if self.kind == "leaf":
            return "*"
        if self.kind == "none":
            return "None"
        if self.kind == "dict":
            return "{" + ", ".join(f"{k!r}: {c!r}" for k, c in zip(self.keys, self.children)) + "}"
        inner = ", ".join(map(repr, self.children))
        if self.kind == "list":
            return f"[{inner}]"
        if self.kind == "namedtuple":
            return f"{self.type.__name__}({inner})"
        return f"({inner}{',' if len(self.children) == 1 else ''})"

    @property
    def num_leaves(self) -> int:
        if self.kind == "leaf":
            return 1
        return sum(c.num_leaves for c in self.children)


def _is_namedtuple(x: Any) -> bool:
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def _tree_flatten(tree: Any) -> tuple[list[Any], _TreeSpec]:
    """The leaves of ``tree`` (tuples, lists, dicts nest; None holds no leaf) and its structure."""
    leaves: list[Any] = []

    def walk(x: Any) -> _TreeSpec:
        if x is None:
            return _TreeSpec("none")
        if isinstance(x, dict):
            return _TreeSpec("dict", type(x), tuple(x.keys()), tuple(walk(v) for v in x.values()))
        if isinstance(x, (tuple, list)):
            kind = "namedtuple" if _is_namedtuple(x) else "tuple" if isinstance(x, tuple) else "list"
            return _TreeSpec(kind, type(x), (), tuple(walk(v) for v in x))
        leaves.append(x)
        return _TreeSpec("leaf")

    spec = walk(tree)
    return leaves, spec


def _tree_unflatten(leaves: Sequence[Any], spec: _TreeSpec) -> Any:
    """The inverse of ``tree_flatten``: ``leaves`` put back into the structure ``spec``."""
    it = iter(leaves)

    def build(s: _TreeSpec) -> Any:
        if s.kind == "leaf":
            return next(it)
        if s.kind == "none":
            return None
        items = [build(c) for c in s.children]
        if s.kind == "dict":
            return s.type(zip(s.keys, items)) if s.type is not dict else dict(zip(s.keys, items))
        if s.kind == "namedtuple":
            return s.type(*items)
        return tuple(items) if s.kind == "tuple" else items

    return build(spec)


def _tree_map(fn: Callable[[Any], Any], tree: Any) -> Any:
    """``tree`` with ``fn`` applied to every leaf."""
    leaves, spec = _tree_flatten(tree)
    return _tree_unflatten([fn(x) for x in leaves], spec)


def _broadcast_to_and_flatten(prefix: Any, spec: _TreeSpec) -> list[Any] | None:
    """``prefix`` (an in_dims/out_dims tree that may stop early: an int or None there covers the
    whole subtree) expanded to one value per leaf of ``spec``; None where the structures differ."""
    if prefix is None or not isinstance(prefix, (tuple, list, dict)):
        return [prefix] * spec.num_leaves
    if spec.kind in ("leaf", "none"):
        return None
    if isinstance(prefix, dict):
        if spec.kind != "dict" or set(prefix) != set(spec.keys):
            return None
        parts = [prefix[k] for k in spec.keys]
    else:
        same = (spec.kind == "list") == isinstance(prefix, list) and spec.kind != "dict"
        if not same or len(prefix) != len(spec.children):
            return None
        parts = list(prefix)
    out: list[Any] = []
    for p, c in zip(parts, spec.children):
        sub = _broadcast_to_and_flatten(p, c)
        if sub is None:
            return None
        out += sub
    return out


# ------------------------------------------------------------------------------------------ modules
def functional_call(module: Module, parameter_and_buffer_dicts: Any, args: Any = None,
                    kwargs: dict[str, Any] | None = None, *, tie_weights: bool = True, strict: bool = False) -> Any:
    """``module(*args, **kwargs)`` with the tensors of ``parameter_and_buffer_dicts`` (a dict of
    dotted name -> Tensor, or a tuple of dicts with distinct keys) in place of the module's
    parameters and buffers; the module's own come back afterwards, also on an error. Gradients
    flow to the given tensors. ``args`` that is not a tuple is one argument. ``tie_weights``:
    names tied in the module (one tensor under two names) take the one given value (two different
    values are a ValueError); ``strict``: missing or unexpected keys are a RuntimeError. A module
    that updates a buffer during the call (BatchNorm's running stats) leaves the new tensor in the
    given dict (a single dict only), as PyTorch."""
    from tinyflow.nn.utils.stateless import _functional_call

    if isinstance(parameter_and_buffer_dicts, dict):
        merged = parameter_and_buffer_dicts
    elif isinstance(parameter_and_buffer_dicts, Sequence) and not isinstance(parameter_and_buffer_dicts, str):
        if not all(isinstance(d, dict) for d in parameter_and_buffer_dicts):
            raise ValueError("Expected all elements of parameter_and_buffer_dicts to be dictionaries")
        counts: dict[str, int] = {}
        for d in parameter_and_buffer_dicts:
            for k in d:
                counts[k] = counts.get(k, 0) + 1
        repeated = [k for k, n in counts.items() if n > 1]
        if repeated:
            raise ValueError(f"{repeated} appeared in multiple dictionaries; behavior of functional call is ambiguous")
        merged = {k: v for d in parameter_and_buffer_dicts for k, v in d.items()}
    else:
        raise ValueError("Expected parameter_and_buffer_dicts to be a dict, or a list/tuple of dicts, "
                         f"but got {type(parameter_and_buffer_dicts)}")
    return _functional_call(module, merged, args, kwargs, tie_weights=tie_weights, strict=strict)


def _stacked_leaf(tensors: Sequence[Tensor], name: str) -> Tensor:

    flags = {t.requires_grad for t in tensors}
    if len(flags) > 1:
        raise RuntimeError(f"Expected {name} from each model to have the same .requires_grad")
    out = stack([t.detach() for t in tensors])
    return out.requires_grad_() if flags == {True} else out


def stack_module_state(models: Sequence[Module]) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
    """(params, buffers): each model's parameters and buffers stacked along a new leading dim,
    by their ``named_parameters`` / ``named_buffers`` names, for ensembling with
    ``vmap(functional_call-wrapper, in_dims=(0, 0, None))``. The stacked parameters are new
    leaves that require grad (when the models' do); the models are not changed."""
    models = list(models)
    if not models:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    if len({bool(m.training) for m in models}) > 1:
        raise RuntimeError("stack_module_state: Expected all models to have the same training/eval mode.")
    if any(type(m) is not type(models[0]) for m in models):
        raise RuntimeError("stack_module_state: Expected all models to be of the same class.")
    all_params = [dict(m.named_parameters()) for m in models]
    all_buffers = [dict(m.named_buffers()) for m in models]
    params = {k: _stacked_leaf([p[k] for p in all_params], k) for k in all_params[0]}
    buffers = {k: _stacked_leaf([b[k] for b in all_buffers], k) for k in all_buffers[0]}
    return params, buffers


# ------------------------------------------------------------------------------------------ nesting guard
class _Nesting(threading.local):
    def __init__(self) -> None:
        self.active: str | None = None  # the autograd transform now running func, if any


_nesting = _Nesting()


class _autograd_transform:  # noqa: N801 (a context manager used like a function)
    """Marks the time ``func`` runs under an autograd transform; a second one inside is an error."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __enter__(self) -> None:
        if _nesting.active is not None:
            raise NotImplementedError(
                f"{self.name} inside {_nesting.active}: nested autograd transforms (grad(grad(f)), "
                "jacrev(jacrev(f)), hessian, ...) need differentiable backward passes, which tinyflow does not "
                "record (no higher-order gradients). vmap composes with them freely (vmap(grad(f)) is fine)")
        _nesting.active = self.name

    def __exit__(self, *exc: Any) -> None:
        _nesting.active = None


# ------------------------------------------------------------------------------------------ autograd transforms
def _argnums_tuple(argnums: Any, num_args: int) -> tuple[int, ...]:
    """``argnums`` validated as PyTorch does, made non-negative (a tuple even for one int)."""

    def one(a: Any) -> int:
        if not isinstance(a, int) or isinstance(a, bool):
            raise RuntimeError(f"argnum must be int, got: {type(a)}")
        if -num_args <= a < num_args:
            return a % num_args
        raise RuntimeError(f"Got argnum={a}, but only {num_args} positional inputs")

    if isinstance(argnums, int) and not isinstance(argnums, bool):
        return (one(argnums),)
    if isinstance(argnums, tuple):
        if not argnums:
            raise RuntimeError("argnums must be non-empty")
        if len(set(argnums)) != len(argnums):
            raise RuntimeError(f"argnums elements must be unique, got {argnums}")
        return tuple(one(a) for a in argnums)
    raise RuntimeError(f"argnums must be int or Tuple[int, ...], got: {type(argnums)}")


def _make_differentiable(x: Any) -> Tensor:
    from tinyflow.dtypes import is_floating_or_complex
    from tinyflow.tensor import Tensor

    if not isinstance(x, Tensor):
        raise ValueError(f"Thing passed to transform API must be Tensor, got {type(x)}")
    if not is_floating_or_complex(x.dtype):
        raise RuntimeError(f"only Tensors of floating point dtype can require gradients, got {x.dtype} "
                           f"(shape {tuple(x.shape)}): differentiate with respect to a float tensor")
    return x.detach().requires_grad_(True)


def _detach_tree(tree: Any) -> Any:
    from tinyflow.tensor import Tensor

    return _tree_map(lambda x: x.detach() if isinstance(x, Tensor) else x, tree)


def _prepare_diff_args(args: tuple, argnums: Any) -> tuple[tuple, Any, list[Tensor], _TreeSpec]:
    """(args with the chosen ones replaced by differentiable copies, the chosen ones as PyTorch
    hands them back (one tree for an int argnums, a tuple of trees for a tuple), their leaves, their spec)."""
    nums = _argnums_tuple(argnums, len(args))
    chosen = tuple(_tree_map(_make_differentiable, args[a]) for a in nums)
    new_args = tuple(chosen[nums.index(i)] if i in nums else a for i, a in enumerate(args))
    diff = chosen[0] if isinstance(argnums, int) else chosen
    leaves, spec = _tree_flatten(diff)
    return new_args, diff, leaves, spec


def _grads(outputs: Sequence[Tensor], inputs: Sequence[Tensor], cotangents: Sequence[Any] | None,
           retain_graph: bool) -> list[Tensor]:
    """d(sum of cotangent * output)/d input for every input, zeros where an input is unused."""

    live = [k for k, o in enumerate(outputs) if o.requires_grad]
    if not live:
        return [zeros_like(x) for x in inputs]
    seeds = None if cotangents is None else [cotangents[k] for k in live]
    got = autograd_grad([outputs[k] for k in live], list(inputs), grad_outputs=seeds, retain_graph=retain_graph,
                           allow_unused=True, materialize_grads=True)
    return list(got)


def _split_aux(name: str, out: Any, has_aux: bool) -> tuple[Any, Any]:
    if not has_aux:
        return out, None
    if not (isinstance(out, tuple) and len(out) == 2):
        raise RuntimeError(f"{name}: output of function f should be a tuple: (output, aux) if has_aux is True")
    from tinyflow.tensor import Tensor

    for leaf in _tree_flatten(out[1])[0]:
        if not isinstance(leaf, Tensor):
            raise RuntimeError(f"{name}: Expected tensors in aux, got unsupported type {type(leaf)} (aux must be a "
                               "tensor or a tuple/list/dict of tensors)")
    return out[0], _detach_tree(out[1])


def grad_and_value(func: Callable[..., Any], argnums: int | tuple[int, ...] = 0,
                   has_aux: bool = False) -> Callable[..., Any]:
    """A function returning (gradient, value) of ``func``, which must return a scalar Tensor: the
    gradient with respect to the positional argument(s) ``argnums`` (an int: one tree of tensors
    shaped as that argument; a tuple: a tuple of such), and ``func``'s value (detached). With
    ``has_aux``, ``func`` returns (scalar, aux) and the result is (gradient, (value, aux)).
    Keyword arguments are passed through undifferentiated. tinyflow: the gradient is not
    differentiable again (no ``grad(grad(f))``)."""
    name = "grad_and_value(f)(*args)"

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from tinyflow.tensor import Tensor

        with _autograd_transform("grad"), enable_grad():
            new_args, diff, leaves, spec = _prepare_diff_args(args, argnums)
            output, aux = _split_aux(name, func(*new_args, **kwargs), has_aux)
            if not isinstance(output, Tensor):
                raise RuntimeError(f"{name}: Expected f(*args) to return a Tensor, got {type(output)}")
            if output.dim() != 0:
                raise RuntimeError(f"{name}: Expected f(*args) to return a scalar Tensor, got tensor with "
                                   f"{output.dim()} dims. Maybe you wanted to use the vjp or jacrev APIs instead?")
            grads = _tree_unflatten(_grads([output], leaves, None, retain_graph=False), spec)
        value = output.detach()
        return (grads, (value, aux)) if has_aux else (grads, value)

    wrapper.__name__ = f"grad_and_value({getattr(func, '__name__', 'f')})"
    wrapper.__doc__ = func.__doc__
    return wrapper


def grad(func: Callable[..., Any], argnums: int | tuple[int, ...] = 0, has_aux: bool = False) -> Callable[..., Any]:
    """A function returning the gradient of ``func`` (which returns a scalar Tensor) with respect
    to the positional argument(s) ``argnums``, shaped as those arguments (trees of tensors such
    as a params dict included); (gradient, aux) with ``has_aux``. See ``grad_and_value``."""
    inner = grad_and_value(func, argnums, has_aux)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        grads, value = inner(*args, **kwargs)
        return (grads, value[1]) if has_aux else grads

    wrapper.__name__ = f"grad({getattr(func, '__name__', 'f')})"
    wrapper.__doc__ = func.__doc__
    return wrapper


def _check_outputs(name: str, flat: Sequence[Any]) -> None:
    from tinyflow.dtypes import is_floating_or_complex
    from tinyflow.tensor import Tensor

    if not flat:
        raise RuntimeError(f"{name}: Expected f to be a function that has non-empty output (got output = [])")
    for o in flat:
        if not isinstance(o, Tensor):
            raise RuntimeError(f"{name}: expected f(*primals) to return only tensors, got unsupported type {type(o)}")
        if not is_floating_or_complex(o.dtype):
            raise RuntimeError(f"{name}: All outputs of f must be floating-point or complex Tensors, got Tensor "
                               f"with dtype {o.dtype}")


def vjp(func: Callable[..., Any], *primals: Any, has_aux: bool = False) -> tuple[Any, ...]:
    """(func(*primals), vjp_fn) (and aux with ``has_aux``): ``vjp_fn(cotangents)``, with
    cotangents shaped as the output tree, returns the vector-Jacobian product as a tuple with one
    entry per primal (zeros where the output does not depend on it). ``vjp_fn`` may be called
    several times. The output is detached; tinyflow: ``vjp_fn(..., create_graph=True)`` (second
    order) is not supported."""
    name = "vjp(f, *primals)"

    with _autograd_transform("vjp"), enable_grad():
        diff = tuple(_tree_map(_make_differentiable, p) for p in primals)
        output, aux = _split_aux(name, func(*diff), has_aux)
        flat_out, out_spec = _tree_flatten(output)
        _check_outputs(name, flat_out)
    leaves, in_spec = _tree_flatten(diff)

    def vjp_fn(cotangents: Any, retain_graph: bool = True, create_graph: bool | None = None) -> tuple[Any, ...]:
        from tinyflow.tensor import Tensor

        if create_graph:
            raise NotImplementedError("vjp_fn(create_graph=True): tinyflow's backward passes are not differentiable "
                                      "again (no higher-order gradients); use create_graph=False")
        flat_cot, cot_spec = _tree_flatten(cotangents)
        if cot_spec != out_spec:
            raise RuntimeError("Expected pytree structure of cotangents to be the same as pytree structure of outputs "
                               f"to the function. cotangents: {cot_spec!r}, primal output: {out_spec!r}")
        for k, (c, o) in enumerate(zip(flat_cot, flat_out)):
            if not isinstance(c, Tensor):
                raise RuntimeError(f"vjp_fn: cotangent {k} must be a Tensor, got {type(c)}")
            if tuple(c.shape) != tuple(o.shape):
                raise RuntimeError(f"Mismatch in shape: grad_output[{k}] has a shape of {tuple(c.shape)} and "
                                   f"output[{k}] has a shape of {tuple(o.shape)}.")
        return _tree_unflatten(_grads(flat_out, leaves, flat_cot, retain_graph=retain_graph), in_spec)

    detached = _tree_unflatten([o.detach() for o in flat_out], out_spec)
    return (detached, vjp_fn, aux) if has_aux else (detached, vjp_fn)


def jacrev(func: Callable[..., Any], argnums: int | tuple[int, ...] = 0, has_aux: bool = False, *,
           chunk_size: int | None = None, _preallocate_and_copy: bool = False) -> Callable[..., Any]:
    """A function returning the Jacobian of ``func`` with respect to the positional argument(s)
    ``argnums``: for each output tensor, the tree of the chosen arguments with each tensor ``x``
    replaced by d output / d x of shape ``output.shape + x.shape`` (a tuple over the arguments
    for a tuple ``argnums``); (jacobian, aux) with ``has_aux``. Computed by one backward pass per
    output element (``chunk_size`` is accepted; tinyflow does them one at a time)."""
    if chunk_size is not None and not (isinstance(chunk_size, int) and chunk_size > 0):
        raise ValueError("jacrev: `chunk_size` should be greater than 0.")
    return _jacobian_transform("jacrev", func, argnums, has_aux)


def jacfwd(func: Callable[..., Any], argnums: int | tuple[int, ...] = 0, has_aux: bool = False, *,
           randomness: str = "error") -> Callable[..., Any]:
    """The Jacobian of ``func`` as ``jacrev`` returns it (same structure and values). tinyflow has
    no forward mode: it is computed in reverse mode, one backward pass per output element, so it
    costs more than PyTorch's when the output is much larger than the input."""
    _check_randomness(randomness)
    return _jacobian_transform("jacfwd", func, argnums, has_aux)


def _jacobian_transform(api: str, func: Callable[..., Any], argnums: Any, has_aux: bool) -> Callable[..., Any]:
    name = f"{api}(f, argnums)(*args)"

    def wrapper(*args: Any, **kwargs: Any) -> Any:

        with _autograd_transform(api), enable_grad():
            new_args, _, leaves, in_spec = _prepare_diff_args(args, argnums)
            output, aux = _split_aux(name, func(*new_args, **kwargs), has_aux)
            flat_out, out_spec = _tree_flatten(output)
            _check_outputs(name, flat_out)
            blocks = jacobian_blocks(flat_out, leaves)
        jac = _tree_unflatten([_tree_unflatten(row, in_spec) for row in blocks], out_spec)
        return (jac, aux) if has_aux else jac

    wrapper.__name__ = f"{api}({getattr(func, '__name__', 'f')})"
    return wrapper


def jvp(func: Callable[..., Any], primals: Any, tangents: Any, *, strict: bool = False,
        has_aux: bool = False) -> tuple[Any, ...]:
    """(func(*primals), J @ tangents): the Jacobian-vector product, ``tangents`` shaped as
    ``primals`` (a tuple). tinyflow computes it from the reverse-mode Jacobian (one backward pass
    per output element), so it suits small outputs."""
    from tinyflow.tensor import Tensor

    name = "jvp(f, primals, tangents)"
    if not isinstance(primals, tuple) or not isinstance(tangents, tuple):
        raise RuntimeError(f"{name}: Expected primals and tangents to be tuples. E.g. jvp(f, (x,), (t,))")
    flat_p, p_spec = _tree_flatten(primals)
    flat_t, t_spec = _tree_flatten(tangents)
    if p_spec != t_spec:
        raise RuntimeError(f"{name}: Expected primals and tangents to have the same python structure. For example, "
                           f"if primals is a tuple of 3 tensors, tangents also must be. Got primals with structure "
                           f"{p_spec!r} and tangents with structure {t_spec!r}")
    for p, t in zip(flat_p, flat_t):
        if not isinstance(t, Tensor) or tuple(t.shape) != tuple(p.shape):
            raise RuntimeError(f"{name}: Expected primals and tangents to have the same shapes, got "
                               f"{tuple(p.shape)} and {tuple(getattr(t, 'shape', ()))}")
    with _autograd_transform("jvp"), enable_grad():
        diff = _tree_map(_make_differentiable, primals)
        output, aux = _split_aux(name, func(*diff), has_aux)
        flat_out, out_spec = _tree_flatten(output)
        _check_outputs(name, flat_out)
        leaves, _ = _tree_flatten(diff)
        blocks = jacobian_blocks(flat_out, leaves)
    products = jacobian_vector_products(flat_out, blocks, flat_t)
    out = _tree_unflatten([o.detach() for o in flat_out], out_spec)
    jvp_out = _tree_unflatten(products, out_spec)
    return (out, jvp_out, aux) if has_aux else (out, jvp_out)


def linearize(func: Callable[..., Any], *primals: Any) -> tuple[Any, Callable[..., Any]]:
    """(func(*primals), jvp_fn): ``jvp_fn(*tangents)`` is the Jacobian-vector product at
    ``primals`` (as ``jvp``), reusable for many tangents. tinyflow computes the Jacobian once, in
    reverse mode (one backward pass per output element), and multiplies by each tangent."""

    name = "linearize(func, *primals)"
    with _autograd_transform("linearize"), enable_grad():
        diff = _tree_map(_make_differentiable, primals)
        flat_out, out_spec = _tree_flatten(func(*diff))
        _check_outputs(name, flat_out)
        leaves, in_spec = _tree_flatten(diff)
        blocks = jacobian_blocks(flat_out, leaves)

    def jvp_fn(*tangents: Any) -> Any:
        from tinyflow.tensor import Tensor

        flat_t, t_spec = _tree_flatten(tangents)
        if t_spec != in_spec or any(not isinstance(t, Tensor) or tuple(t.shape) != tuple(x.shape)
                                    for t, x in zip(flat_t, leaves)):
            raise RuntimeError(f"{name}: expected tangents with the structure and shapes of primals "
                               f"{[tuple(x.shape) for x in leaves]}, got "
                               f"{[tuple(getattr(t, 'shape', ())) for t in flat_t]}")
        return _tree_unflatten(jacobian_vector_products(flat_out, blocks, flat_t), out_spec)

    return _tree_unflatten([o.detach() for o in flat_out], out_spec), jvp_fn


def replace_all_batch_norm_modules_(root: Module) -> Module:
    """In place: every BatchNorm in ``root`` stops tracking running stats (they become None and
    batch statistics are always used), so that it can run under ``vmap``; returns ``root``."""
    from tinyflow.nn.modules.batchnorm import _BatchNorm

    for m in root.modules():
        if isinstance(m, _BatchNorm) and m.track_running_stats:
            m.running_mean = None
            m.running_var = None
            m.num_batches_tracked = None
            m.track_running_stats = False
    return root


def debug_unwrap(tensor: Tensor, *, recurse: bool = True) -> Tensor:
    """The plain tensor under a transform's wrapper: tinyflow's transforms do not wrap tensors,
    so this returns ``tensor`` itself."""
    return tensor


def hessian(func: Callable[..., Any], argnums: int | tuple[int, ...] = 0) -> Callable[..., Any]:
    """``torch.func.hessian``: not available in tinyflow (second derivatives need differentiable
    backward passes, which tinyflow does not record): a NotImplementedError when called."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            "func.hessian: second derivatives need differentiable backward passes, which tinyflow does not record "
            "(no higher-order gradients); use jacrev of a function that returns the gradient you compute analytically")

    return wrapper


def functionalize(func: Callable[..., Any], *, remove: str = "mutations") -> Callable[..., Any]:
    """``torch.func.functionalize``: the same computation with in-place updates replaced by
    out-of-place ones, for other transforms. tinyflow's transforms handle mutation as eager code
    does, so this returns ``func`` unchanged (after checking ``remove``)."""
    if remove not in ("mutations", "mutations_and_views"):
        raise RuntimeError(f"functionalize(f, remove='mutations'): received invalid argument for remove={remove}. "
                           "Valid options are:\n     remove='mutations'\n     remove='mutations_and_views'")
    return func


# ------------------------------------------------------------------------------------------ vmap
def _check_randomness(randomness: str) -> None:
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or 'same'. Got {randomness}")


def _fn_name(func: Any) -> str:
    import functools

    if isinstance(func, functools.partial):
        return f"functools.partial({_fn_name(func.func)}, ...)"
    return getattr(func, "__name__", repr(func))


def _batch_inputs(func: Callable[..., Any], in_dims: Any, args: tuple) -> tuple[int, list[Any], list[Any], _TreeSpec]:
    """(batch size, in_dim per leaf (non-negative or None), the leaves, the args' spec), checked
    as PyTorch's vmap checks them."""
    from tinyflow.tensor import Tensor

    head = f"vmap({_fn_name(func)}, in_dims={in_dims}, ...)(<inputs>)"
    if not isinstance(in_dims, (int, tuple)):
        raise ValueError(f"{head}: expected `in_dims` to be int or a (potentially nested) tuple matching the "
                         f"structure of inputs, got: {type(in_dims)}.")
    if not args:
        raise ValueError(f"vmap({_fn_name(func)})(<inputs>): got no inputs. Maybe you forgot to add inputs, or you "
                         "are trying to vmap over a function with no inputs. The latter is unsupported.")
    leaves, spec = _tree_flatten(args)
    dims = _broadcast_to_and_flatten(in_dims, spec)
    if dims is None:
        dim_spec = _tree_flatten(in_dims)[1]
        raise ValueError(f"{head}: in_dims is not compatible with the structure of `inputs`. in_dims has structure "
                         f"{dim_spec!r} but inputs has structure {spec!r}.")
    for i, (arg, d) in enumerate(zip(leaves, dims)):
        if d is None:
            continue
        if not isinstance(d, int) or isinstance(d, bool):
            raise ValueError(f"{head}: Got in_dim={d} for an input but in_dim must be either an integer dimension "
                             "or None.")
        if not isinstance(arg, Tensor):
            raise ValueError(f"{head}: Got in_dim={d} for an input but the input is of type {type(arg)}. We cannot "
                             "vmap over non-Tensor arguments, please use None as the respective in_dim")
        if not -arg.dim() <= d < max(arg.dim(), 0) or arg.dim() == 0:
            raise ValueError(f"{head}: Got in_dim={d} for some input, but that input is a Tensor of dimensionality "
                             f"{arg.dim()} so expected in_dim to satisfy -{arg.dim()} <= in_dim < {arg.dim()}.")
        dims[i] = d % arg.dim()
    sizes = [arg.shape[d] for arg, d in zip(leaves, dims) if d is not None]
    if not sizes:
        raise ValueError("vmap: Expected at least one Tensor to vmap over")
    if any(s != sizes[0] for s in sizes):
        raise ValueError(f"vmap: Expected all tensors to have the same size in the mapped dimension, got sizes "
                         f"{sizes} for the mapped dimension")
    return sizes[0], dims, leaves, spec


def _stack_outputs(func: Callable[..., Any], out_dims: Any, results: list[Any]) -> Any:
    """The per-sample outputs, each tensor stacked at its out_dim (None: taken once, unbatched)."""
    from tinyflow.tensor import Tensor

    name = _fn_name(func)
    flats = [_tree_flatten(r) for r in results]
    spec = flats[0][1]
    if isinstance(results[0], Tensor):
        if isinstance(out_dims, int) or out_dims is None:
            dims: list[Any] | None = [out_dims]
        elif isinstance(out_dims, tuple) and len(out_dims) == 1:
            dims = list(out_dims)
        else:
            dims = None
    else:
        dims = _broadcast_to_and_flatten(out_dims, spec)
    if dims is None:
        raise ValueError(f"vmap({name}, ..., out_dims={out_dims})(<inputs>): out_dims is not compatible with the "
                         f"structure of `outputs`. out_dims has structure {_tree_flatten(out_dims)[1]!r} but outputs "
                         f"has structure {spec!r}.")
    for _, s in flats[1:]:
        if s != spec:
            raise ValueError(f"vmap({name}, ...): `{name}` returned outputs of different structures for different "
                             f"samples ({spec!r} and {s!r}); it must return the same structure for every sample")
    out = []
    for j, d in enumerate(dims):
        items = [leaves[j] for leaves, _ in flats]
        if d is None:
            first = items[0]
            if isinstance(first, Tensor) and any(
                    not isinstance(x, Tensor) or x.shape != first.shape or not bool((x == first).all())
                    for x in items[1:]):
                raise ValueError(f"vmap({name}, ...): `{name}` can not return a BatchedTensor when out_dim is None")
            out.append(first)
            continue
        if not isinstance(d, int) or isinstance(d, bool):
            raise ValueError(f"vmap({name}, ..., out_dims={out_dims}): `out_dims` must be an int, None or a python "
                             "collection of ints representing where in the outputs the vmapped dimension should "
                             "appear.")
        if not all(isinstance(x, Tensor) for x in items):
            bad = next(x for x in items if not isinstance(x, Tensor))
            raise ValueError(f"vmap({name}, ...): `{name}` must only return Tensors, got type {type(bad)}. Did you "
                             "mean to set out_dims= to None for output?")
        nd = items[0].dim() + 1
        if not -nd <= d < nd:
            raise IndexError(f"vmap({name}, ..., out_dims={out_dims}): out_dim {d} is out of range for outputs of "
                             f"{nd - 1} dims (expected {-nd} <= out_dim < {nd})")
        out.append(stack(items, dim=d))
    return _tree_unflatten(out, spec)


def vmap(func: Callable[..., Any], in_dims: int | tuple[Any, ...] = 0, out_dims: int | tuple[Any, ...] = 0,
         randomness: str = "error", *, chunk_size: int | None = None) -> Callable[..., Any]:
    """A function that maps ``func`` over dimension ``in_dims`` of its inputs and stacks the
    results along ``out_dims``: ``vmap(f)(x)[i] == f(x[i])``. ``in_dims`` is an int for every
    tensor, or a tuple with one entry per positional argument (None: not mapped; nested tuples or
    dicts for container arguments); ``out_dims`` likewise for the outputs (tensors or trees of
    them). ``randomness``: 'error' (a random op inside is an error), 'different' (each sample
    draws its own numbers) or 'same' (every sample draws the same numbers). Keyword arguments are
    passed unmapped. tinyflow: a Python loop over the samples (``chunk_size`` is accepted and has
    no effect); it composes with grad/vjp/jacrev/functional_call and with itself."""
    _check_randomness(randomness)
    if not (chunk_size is None or chunk_size > 0):
        raise ValueError(f"vmap: chunk_size should be None or greater than 0. (got {chunk_size})")

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from tinyflow import random as tf_random

        size, dims, leaves, spec = _batch_inputs(func, in_dims, args)
        if size == 0:
            raise ValueError(f"vmap({_fn_name(func)}): the mapped dimension has size 0; tinyflow's vmap runs "
                             "func once per sample and needs at least one sample")
        state = tf_random.get_rng_state() if randomness != "different" else None
        results = []
        for i in range(size):
            if randomness == "same":
                tf_random.set_rng_state(state)
            sample = [x if d is None else x.select(d, i) for x, d in zip(leaves, dims)]
            results.append(func(*_tree_unflatten(sample, spec), **kwargs))
            if randomness == "error" and tf_random.get_rng_state() != state:
                tf_random.set_rng_state(state)
                raise RuntimeError("vmap: called random operation while in randomness error mode. Please either use "
                                   "the 'same' or 'different' randomness flags on vmap or perform the randomness "
                                   "operation out of vmap")
        return _stack_outputs(func, out_dims, results)

    wrapper.__name__ = f"vmap({_fn_name(func)})"
    wrapper.__doc__ = func.__doc__
    return wrapper
