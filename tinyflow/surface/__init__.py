"""The PyTorch surface: what PyTorch has beyond a training step, attached to tinyflow at one seam.

This package holds it: the Tensor methods beyond the core (tensor_methods*.py: sin, gather, sort,
cumsum, flip, det, lgamma, quantile, new_zeros, ...), the ``tinyflow.*`` functions
(functions.py), ``torch.linalg``, ``torch.special``, ``torch.func``, ``torch.jit`` and
``torch.onnx`` (linalg.py, special.py, func.py, jit.py, onnx.py) and the ops only they call
(ops/). Nothing in the core or the framework imports it (tests/test_boundaries.py); it attaches
itself here, from one table, when tinyflow/__init__.py calls ``attach``:

- ``TABLE`` declares each name once, as PyTorch declares an op once in native_functions.yaml with
  its variants: ``m`` a Tensor method, ``p`` a Tensor property, ``f`` a ``tinyflow.<name>(input,
  ...)`` function with PyTorch's ``out=`` (made by functions.py on the first such name), ``i`` the
  in-place method ``<name>_`` (``x.sin_()`` writes ``x.sin()`` into x). A row names its source:
  ``"module:Namespace"`` (a namespace class of functions with ``self`` first, in that module of
  this package), ``"module"`` (plain functions), or ``"Tensor"`` (a core method that is also a
  ``tinyflow.*`` function). ``alias=name`` declares PyTorch's second name for one function.
- ``PUBLIC_MODULES``: the modules PyTorch programs import by path (``import torch.linalg``), each
  a file of this package registered under its public name, ``tinyflow.linalg``.

The methods load on first use: ``attach`` puts a stand-in on Tensor for each (``StandIn``) and
the first look-up of any method of a source module imports it and puts its real functions in
their place, so a training step never loads the surface it does not call.
"""
from __future__ import annotations

import functools
import importlib
import inspect
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any, NamedTuple

from tinyflow.arg_parser import accept_axis_alias, takes_dim
from tinyflow.dtypes import as_dtype
from tinyflow.promotion import can_cast
from tinyflow.tensor import Tensor

__all__ = ["TABLE", "METHODS", "FUNCTIONS", "INPLACE", "PUBLIC_MODULES", "PUBLIC_NAMES", "StandIn", "attach"]

# (variants, source, names): see the module docstring.
TABLE: tuple[tuple[str, str, str], ...] = (
    ("mfi", "tensor_methods:TensorMethods",
        "sin cos tan asin acos atan sinh cosh asinh acosh atanh atan2 rsqrt log2 log10 log1p expm1 "
        "exp2 erf erfinv reciprocal square neg lerp copysign clamp_min clamp_max nan_to_num floor "
        "ceil trunc round sign frac fmod remainder logical_not bitwise_not bitwise_and bitwise_or "
        "bitwise_xor cumsum cumprod"),
    ("mf", "tensor_methods:TensorMethods",
        "arcsin=asin arccos=acos arctan=atan arcsinh=asinh arccosh=acosh arctanh=atanh arctan2=atan2 "
        "negative=neg logaddexp diff fix=trunc div divide=div true_divide floor_divide isinf isposinf "
        "isneginf signbit isclose allclose equal logical_and logical_or logical_xor "
        "bitwise_left_shift bitwise_right_shift gather scatter scatter_add scatter_reduce "
        "index_select index_add masked_select masked_fill nonzero argwhere take take_along_dim "
        "argsort sort msort topk kthvalue median unique bincount cummax cummin logcumsumexp prod "
        "var_mean std_mean count_nonzero norm flip fliplr flipud roll tile repeat_interleave "
        "unflatten narrow select unbind movedim moveaxis=movedim swapaxes swapdims ravel "
        "tril triu diag diagonal trace dot inner outer ger=outer mm bmm mv addmm addcmul addcdiv "
        "is_complex multinomial bernoulli"),
    ("m", "tensor_methods:TensorMethods",
        "_rounded __floordiv__ __format__ __rfloordiv__ __mod__ __rmod__ __invert__ "
        "__and__=bitwise_and __or__=bitwise_or __xor__=bitwise_xor __lshift__=bitwise_left_shift "
        "__rshift__=bitwise_right_shift __rand__ __ror__ __rxor__ __rlshift__ __rrshift__ __iand__ "
        "__ior__ __ixor__ where masked_fill_ scatter_ scatter_add_ scatter_reduce_ index_add_ repeat unfold "
        "tril_ triu_ type byte char short ndimension get_device is_contiguous pin_memory is_pinned "
        "share_memory_ is_shared element_size nelement _new_like new_zeros new_ones new_empty "
        "new_full new_tensor new bernoulli_ random_"),
    ("mf", "tensor_methods_layout:LayoutMethods",
        "tensor_split hsplit vsplit dsplit split_with_sizes rot90 diag_embed diagflat index_copy "
        "index_fill index_put index_put_ masked_scatter slice_scatter select_scatter diagonal_scatter "
        "put unique_consecutive"),
    ("m", "tensor_methods_layout:LayoutMethods",
        "_split_named index_copy_ index_fill_ masked_scatter_ _scatter_slice fill_diagonal_ put_ "
        "reshape_as _restride_ squeeze_ unsqueeze_ t_ transpose_ swapaxes_ swapdims_ "
        "new_empty_strided"),
    ("mf", "tensor_methods_linalg:LinalgMethods",
        "det logdet slogdet inverse pinverse svd qr cholesky cholesky_solve cholesky_inverse "
        "matrix_power matrix_exp cross adjoint"),
    ("p", "tensor_methods_linalg:LinalgMethods", "mH H"),
    ("mfi", "tensor_methods_special:SpecialMethods",
        "lgamma digamma mvlgamma erfc i0 logit sinc sgn deg2rad rad2deg hypot heaviside nextafter "
        "ldexp gcd lcm"),
    ("mi", "tensor_methods_special:SpecialMethods", "polygamma xlogy"),
    ("mf", "tensor_methods_special:SpecialMethods", "logaddexp2 fmax fmin frexp"),
    ("m", "tensor_methods_special:SpecialMethods", "float_power float_power_"),
    ("mf", "tensor_methods_stats:StatsMethods",
        "nansum nanmean nanmedian quantile nanquantile mode aminmax histc histogram cov corrcoef dist "
        "renorm kron vdot baddbmm addbmm addmv addr multiply subtract greater greater_equal less "
        "less_equal not_equal absolute positive is_signed is_nonzero is_same_size"),
    ("m", "tensor_methods_stats:StatsMethods",
        "addmm_ baddbmm_ addbmm_ addmv_ addr_ multiply_ subtract_ absolute_ divide_ true_divide_ "
        "floor_divide_ eq_ ne_ lt_ le_ gt_ ge_ greater_=gt_ greater_equal_=ge_ less_=lt_ "
        "less_equal_=le_ not_equal_=ne_ logical_and_ logical_or_ logical_xor_ "
        "stride storage_offset exponential_ geometric_ log_normal_ cauchy_"),
    ("p", "tensor_methods_stats:StatsMethods", "is_cpu itemsize nbytes retains_grad"),
    ("f", "Tensor",
        "exp log sqrt tanh sigmoid relu abs clamp clip add sub mul matmul maximum minimum softmax "
        "log_softmax isnan isfinite eq ne lt le gt ge sum mean var std amax amin argmax argmin "
        "logsumexp all any reshape flatten squeeze unsqueeze transpose permute t chunk clone numel "
        "is_floating_point broadcast_to"),
    ("f", "tensor_methods_layout",
        "hstack vstack row_stack=vstack dstack column_stack block_diag cartesian_prod combinations "
        "vander logspace range=range_ searchsorted bucketize isin"),
    ("f", "tensor_methods_linalg", "chain_matmul"),
    ("f", "tensor_methods_special", "polygamma xlogy float_power"),
    ("f", "tensor_methods_stats", "tensordot cdist trapezoid trapz cumulative_trapezoid initial_seed"),
)


class Entry(NamedTuple):
    """One declared name: where its function lives (``source``, ``attr``) and its variants."""

    name: str
    source: str
    attr: str
    variants: str


def _expand(table: tuple[tuple[str, str, str], ...]) -> tuple[dict[str, Entry], dict[str, Entry], list[str]]:
    methods: dict[str, Entry] = {}
    functions: dict[str, Entry] = {}
    inplace: list[str] = []
    for variants, source, names in table:
        for label in names.split():
            name, _, attr = label.partition("=")
            entry = Entry(name, source, attr or name, variants)
            if "m" in variants or "p" in variants:
                methods[name] = entry
            if "f" in variants:
                functions[name] = entry
            if "i" in variants:
                inplace.append(name)
    return methods, functions, inplace


METHODS, FUNCTIONS, INPLACE = _expand(TABLE)
_loaded: set[str] = set()


def _load(source: str) -> None:
    """Import ``source``'s module and put the real functions of its methods on Tensor."""
    if source in _loaded:
        return
    module_name, _, namespace = source.partition(":")
    holder = getattr(importlib.import_module(f"tinyflow.surface.{module_name}"), namespace)
    for entry in METHODS.values():
        if entry.source == source:
            fn = vars(holder)[entry.attr]
            if inspect.isfunction(fn) and takes_dim(fn) and not hasattr(fn, "__wrapped__"):
                fn = accept_axis_alias(fn)  # PyTorch takes axis= wherever it takes dim=
                setattr(holder, entry.attr, fn)  # where pickle looks a method up by its qualified name
            setattr(Tensor, entry.name, fn)
    _loaded.add(source)


def _inplace_form(name: str) -> Callable[..., Tensor]:
    """``x.<name>_(...)``: ``x.<name>(...)`` written into x; the history moves onto the op."""

    def method(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        if name in ("cumsum", "cumprod") and self.dtype == bool:  # PyTorch has no bool kernel for these
            raise NotImplementedError(f"{name}_: not implemented for bool tensors; convert with .int() first")
        result = getattr(self, name)(*args, **kwargs)
        if not can_cast(result.dtype, self.dtype):  # sin_ of an int tensor: not a silent truncation
            raise RuntimeError(
                f"{name}_: result type {as_dtype(result.dtype).name} can't be cast to the desired output type "
                f"{as_dtype(self.dtype).name}; use the out-of-place {name}() or convert first"
            )
        return self.copy_(result)

    method.__name__, method.__qualname__ = name + "_", f"Tensor.{name}_"
    method.__doc__ = f"In place: ``x.{name}_()`` writes ``x.{name}()`` into x."
    return method


class StandIn:
    """What Tensor holds for the surface method (or property) ``name`` until ``load()`` has put the
    real one in its place.

    The first look-up of the name answers with the real one: ``x.sin``, ``Tensor.sin``,
    ``inspect.signature(Tensor.sin)``, and the special methods (``x & y``), which CPython looks up
    on the type, where it honours a descriptor; later look-ups find the real one and cost nothing
    more. ``load`` only imports a module and sets attributes to the same values, so threads that
    look names up at once may each run it: no lock is needed.
    """

    __slots__ = ("owner", "name", "load")

    def __init__(self, owner: type, name: str, load: Callable[[], None]) -> None:
        self.owner, self.name, self.load = owner, name, load

    def __get__(self, obj: Any, objtype: type | None = None) -> Any:
        self.load()
        real = vars(self.owner)[self.name]
        if real is self:
            raise AttributeError(f"{self.owner.__name__}.{self.name}: its module did not define it")
        get = getattr(type(real), "__get__", None)  # a function binds to obj, a property reads it
        return real if get is None else get(real, obj, objtype)

    def __repr__(self) -> str:
        return f"<{self.owner.__name__}.{self.name}, loaded on first use>"


def _install_methods() -> None:
    """Put the table's methods, properties and in-place forms on Tensor (stand-ins until used)."""
    for entry in METHODS.values():
        if entry.source not in _loaded:  # the first look-up of the name loads its source module
            load = functools.partial(_load, entry.source)
            setattr(Tensor, entry.name, StandIn(Tensor, entry.name, load))
    for name in INPLACE:
        setattr(Tensor, name + "_", _inplace_form(name))


# The modules PyTorch programs import by their path (``import torch.linalg``, ``from torch.func
# import vmap``): public name -> this package's module.
PUBLIC_MODULES = {name: f"tinyflow.surface.{name}" for name in ("linalg", "special", "func", "jit", "onnx")}
# Surface modules that live at their PyTorch path outside this package (imported here, so that
# ``tinyflow.nn.utils.parametrizations`` is there after ``import tinyflow``, as in PyTorch).
AT_TORCH_PATHS = ("tinyflow.nn.utils.parametrizations",)
# Names PyTorch also has at its top level that live in one of those modules: name -> module.
PUBLIC_NAMES = {"vmap": "func"}  # torch.vmap is torch.func.vmap


def attach(package: ModuleType) -> None:
    """The seam: put the surface on ``package`` (tinyflow): the Tensor methods (loaded on first
    use), the public modules under their public names (``import tinyflow.linalg`` and
    ``tinyflow.linalg`` reach tinyflow/surface/linalg.py) and, through ``package.__getattr__``,
    the ``tinyflow.*`` functions of the table (functions.py, loaded on the first such name)."""
    _install_methods()
    for public, home in PUBLIC_MODULES.items():
        module = importlib.import_module(home)
        sys.modules[f"{package.__name__}.{public}"] = module
        setattr(package, public, module)
    for name, public in PUBLIC_NAMES.items():
        setattr(package, name, getattr(getattr(package, public), name))
    for path in AT_TORCH_PATHS:
        importlib.import_module(path)
