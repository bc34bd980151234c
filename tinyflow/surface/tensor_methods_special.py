"""Tensor methods for the special and extra elementwise functions (lgamma, digamma, erfc, logit,
xlogy, hypot, sinc, ...): each calls an op of tinyflow/surface/ops/special.py.

``SpecialMethods`` is a namespace, not a base class: tinyflow/surface/__init__.py attaches the methods and the
``tinyflow.*`` functions of this file that its table lists.

As PyTorch: float functions of integer tensors compute in the default float dtype; binary ops
promote their operands (a Python number on either side); the in-place forms (``x.lgamma_()``)
write the result into x and refuse a floating result for an integer x.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from tinyflow import promotion, return_types
from tinyflow.dtypes import as_dtype, is_complex, is_floating
from tinyflow.ops.elementwise import broadcast_error

if TYPE_CHECKING:
    from tinyflow.tensor import Tensor

__all__ = ["SpecialMethods", "binary_operands"]

_SPECIAL: Any = None


def _special() -> Any:
    """tinyflow.ops.special, imported on first use (tensor.py imports this module at its top)."""
    global _SPECIAL
    if _SPECIAL is None:
        import tinyflow.surface.ops.special as special

        _SPECIAL = special
    return _SPECIAL


def _ops() -> Any:
    """Every op (tinyflow.surface.ops), imported on first use."""
    from tinyflow.surface.ops import index as ops

    return ops


def _floating(t: Tensor) -> Tensor:
    """``t`` itself when floating, else ``t`` in the default float dtype (torch.lgamma(int) is float)."""
    return promotion.float_operand(t)


def binary_operands(op: str, input: Any, other: Any, floating: bool = False,  # noqa: A002
                    integers: bool = True) -> tuple[Tensor, Tensor]:
    """``input`` and ``other`` (either may be a Python number) as tensors of their result dtype,
    a float one when ``floating`` and both are integers (without ``integers``, integers and bool are
    PyTorch's NotImplementedError); shapes that do not broadcast are PyTorch's RuntimeError."""
    if not hasattr(input, "dtype") and not hasattr(other, "dtype"):
        raise TypeError(f"{op}: expected at least one Tensor, got {type(input).__name__} and {type(other).__name__}")
    a, b = promotion.promote(input, other, floating=floating and integers)
    if not integers and not is_floating(a.dtype):
        raise NotImplementedError(f'"{op}" not implemented for {a.dtype} tensors; convert with .float() first')
    try:
        np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        raise broadcast_error(op, a.array, b.array) from None
    return a, b


def _need_floating(op: str, *tensors: Tensor) -> None:
    for t in tensors:
        if not is_floating(t.dtype):
            raise NotImplementedError(f"{op}: not implemented for dtype {t.dtype}; convert with .double() first")


def _need_integer(op: str, *tensors: Tensor) -> None:
    for t in tensors:
        if as_dtype(t.dtype).kind not in "iu":
            raise NotImplementedError(
                f"{op}: not implemented for dtype {t.dtype}; it takes integer tensors (convert with .long())"
            )


class SpecialMethods:
    """Tensor methods (``self`` is a Tensor): a namespace that tinyflow/surface/__init__.py reads; see the module docstring."""

    # ------------------------------------------------------------ gamma family
    def lgamma(self) -> Tensor:
        """log|Gamma(x)| (inf at 0 and the negative integers); its gradient is digamma(x)."""
        return _special().Lgamma.apply(_floating(self))

    def digamma(self) -> Tensor:
        """The logarithmic derivative of Gamma: -inf at +0, NaN at the negative integers."""
        return _special().Digamma.apply(_floating(self))

    def polygamma(self, n: int) -> Tensor:
        """The n-th derivative of digamma at self (``torch.polygamma(n, input)`` as a function)."""
        if int(n) != n or n < 0:
            raise RuntimeError(f"polygamma(n, x) does not support negative n (got n={n}); n must be an integer >= 0")
        return _special().Polygamma.apply(_floating(self), int(n))

    def mvlgamma(self, p: int) -> Tensor:
        """The log of the multivariate gamma function of dimension p:
        p(p-1)/4 log(pi) + sum_{j<p} lgamma(x - j/2)."""
        if int(p) != p or p < 1:
            raise RuntimeError(f"mvlgamma: p has to be greater than or equal to 1, got p={p}")
        x = _floating(self)
        out = x.lgamma()
        for j in range(1, int(p)):
            out = out + (x - j / 2).lgamma()
        return out + p * (p - 1) / 4 * math.log(math.pi)

    # ------------------------------------------------------------ error function, Bessel, logit
    def erfc(self) -> Tensor:
        """1 - erf(x), accurate in the tail (computed directly, not as 1 - erf)."""
        return _special().Erfc.apply(_floating(self))

    def i0(self) -> Tensor:
        """The modified Bessel function of the first kind, order 0; its gradient is i1(x)."""
        return _special().I0.apply(_floating(self))

    def logit(self, eps: float | None = None) -> Tensor:
        """log(z / (1 - z)), z = self clamped to [eps, 1 - eps] when eps is given (NaN outside [0, 1] else)."""
        return _special().Logit.apply(_floating(self), None if eps is None else float(eps))

    def sinc(self) -> Tensor:
        """The normalized sinc: sin(pi x) / (pi x), 1 at 0."""
        return _special().Sinc.apply(_floating(self))

    def sgn(self) -> Tensor:
        """The sign of x (-1, 0, 1; 0 for NaN) for real tensors, with a zero gradient."""
        if is_complex(self.dtype):
            raise NotImplementedError("sgn: complex tensors are not supported; use x / x.abs() where x != 0")
        out = self.sign()
        return out.masked_fill(out.isnan(), 0) if is_floating(self.dtype) else out  # sgn(NaN) is 0, as PyTorch

    def deg2rad(self) -> Tensor:
        """Degrees to radians: x * pi / 180."""
        return _floating(self) * (math.pi / 180)

    def rad2deg(self) -> Tensor:
        """Radians to degrees: x * 180 / pi."""
        return _floating(self) * (180 / math.pi)

    # ------------------------------------------------------------ binary maths
    def xlogy(self, other: Any) -> Tensor:
        """self * log(other), 0 where self == 0 (NaN where other is NaN)."""
        return _special().Xlogy.apply(*binary_operands("xlogy", self, other, floating=True))

    def hypot(self, other: Any) -> Tensor:
        """sqrt(self^2 + other^2), without overflow."""
        return _special().Hypot.apply(*binary_operands("hypot", self, other, integers=False))

    def logaddexp2(self, other: Any) -> Tensor:
        """log2(2^self + 2^other), without overflow."""
        return _special().LogAddExp2.apply(*binary_operands("logaddexp2", self, other, integers=False))

    def fmax(self, other: Any) -> Tensor:
        """The elementwise maximum, ignoring a NaN (NaN only where both are NaN)."""
        return _special().Fmax.apply(*binary_operands("fmax", self, other))

    def fmin(self, other: Any) -> Tensor:
        """The elementwise minimum, ignoring a NaN (NaN only where both are NaN)."""
        return _special().Fmin.apply(*binary_operands("fmin", self, other))

    def heaviside(self, values: Any) -> Tensor:
        """0 where self < 0, ``values`` where self == 0, 1 where self > 0 (no gradient, as PyTorch)."""
        if not hasattr(values, "dtype"):
            raise TypeError(f"heaviside: values must be a Tensor, got {type(values).__name__}")
        if values.dtype != self.dtype:
            raise RuntimeError(
                f"heaviside is not yet implemented for tensors with different dtypes ({self.dtype} and "
                f"{values.dtype}); convert values with .to(input.dtype)"
            )
        return _special().Heaviside.apply(*binary_operands("heaviside", self, values))

    def float_power(self, exponent: Any) -> Tensor:
        """self ** exponent computed in float64 (the result is float64 whatever the inputs)."""
        base = self.double()
        if hasattr(exponent, "dtype"):
            return base ** exponent.double()
        return base ** float(exponent)

    def nextafter(self, other: Any) -> Tensor:
        """The next representable float after self toward other."""
        a, b = binary_operands("nextafter", self, other)
        _need_floating("nextafter", a)
        return _special().NextAfter.apply(a, b)

    def ldexp(self, other: Any) -> Tensor:
        """self * 2 ** other (as PyTorch: computed as a product, so an integer self gives a float)."""
        if hasattr(other, "dtype"):
            return self * (2.0 ** other)
        return _floating(self) * (2.0 ** other)

    def frexp(self) -> tuple[Tensor, Tensor]:
        """(mantissa, exponent) with self = mantissa * 2^exponent and |mantissa| in [0.5, 1);
        the exponent is int32. A named tuple, as torch.return_types.frexp."""
        if not is_floating(self.dtype):
            raise RuntimeError(f"torch.frexp() only supports floating-point dtypes, got {self.dtype}")
        return return_types.frexp(*_special().Frexp.apply(self))

    def gcd(self, other: Any) -> Tensor:
        """The greatest common divisor of integer tensors (non-negative; gcd(0, 0) == 0)."""
        a, b = binary_operands("gcd", self, other)
        _need_integer("gcd", a, b)
        return _ops().NoGradient.apply(lambda xp, u, v: xp.gcd(u, v), a, b)

    def lcm(self, other: Any) -> Tensor:
        """The least common multiple of integer tensors (non-negative; 0 if either is 0)."""
        a, b = binary_operands("lcm", self, other)
        _need_integer("lcm", a, b)
        return _ops().NoGradient.apply(lambda xp, u, v: xp.lcm(u, v), a, b)

    # ------------------------------------------------------------ in place
    def float_power_(self, exponent: Any) -> Tensor:
        """In place: ``x.float_power_(e)`` writes ``x.float_power(e)`` into x, which must be float64."""
        if as_dtype(self.dtype) != as_dtype("float64"):
            raise RuntimeError(
                f"the base given to float_power_ has dtype {self.dtype} but the operation's result requires dtype "
                "float64; use x.float_power(e) or convert x with .double() first"
            )
        return self.copy_(self.float_power(exponent))


def _require_tensor(op: str, input: Any) -> None:  # noqa: A002
    if not hasattr(input, "dtype") or not hasattr(input, "device"):
        raise TypeError(f"tinyflow.{op}: expected a Tensor as input, got {type(input).__name__}")


def polygamma(n: int, input: Tensor) -> Tensor:  # noqa: A002 (PyTorch's name)
    """torch.polygamma(n, input): the n-th derivative of digamma."""
    _require_tensor("polygamma", input)
    return input.polygamma(n)


def xlogy(input: Any, other: Any) -> Tensor:  # noqa: A002
    """torch.xlogy(input, other): input * log(other), 0 where input == 0; either may be a number."""
    a, b = binary_operands("xlogy", input, other, floating=True)
    return _special().Xlogy.apply(a, b)


def float_power(input: Any, exponent: Any) -> Tensor:  # noqa: A002
    """torch.float_power(input, exponent): input ** exponent in float64; either may be a number."""
    if hasattr(input, "dtype"):
        return input.float_power(exponent)
    if not hasattr(exponent, "dtype"):
        raise TypeError("float_power: expected at least one Tensor")
    return float(input) ** exponent.double()
