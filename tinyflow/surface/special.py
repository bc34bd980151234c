"""``tinyflow.special``: PyTorch's torch.special namespace (``import tinyflow as torch`` then
``torch.special.erfcx(x)``).

Each function takes a Tensor (integer tensors compute in the default float dtype) and is
differentiable where PyTorch's is. Most call a Tensor method or an op of tinyflow/surface/ops/special.py;
the kernels are float64 accurate (about 1e-15 relative away from the functions' zeros).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tinyflow import promotion
from tinyflow.surface.tensor_methods_special import binary_operands

if TYPE_CHECKING:
    from tinyflow.tensor import Tensor

__all__ = [
    "expit", "logit", "erf", "erfc", "erfcx", "erfinv", "gammaln", "digamma", "psi", "polygamma", "multigammaln",
    "i0", "i0e", "i1", "i1e", "ndtr", "ndtri", "log_ndtr", "log1p", "expm1", "exp2", "sinc", "round", "softmax",
    "log_softmax", "logsumexp", "xlogy", "xlog1py", "entr", "zeta", "gammainc", "gammaincc", "bessel_j0", "bessel_j1", "modified_bessel_i0",
    "modified_bessel_i1", "spherical_bessel_j0",
]


def _ops() -> Any:
    import tinyflow.surface.ops.special as special

    return special


def _tensor(op: str, input: Any) -> Tensor:  # noqa: A002 (PyTorch's name)
    if not hasattr(input, "dtype") or not hasattr(input, "device"):
        raise TypeError(f"special.{op}: expected a Tensor as input, got {type(input).__name__}")
    return input


def _float(op: str, input: Any) -> Tensor:  # noqa: A002
    """``input`` in a float dtype (the default one for integer and bool tensors)."""
    return promotion.float_operand(_tensor(op, input))


# ------------------------------------------------------------------ Tensor methods under torch.special names


def expit(input: Tensor) -> Tensor:  # noqa: A002
    """The logistic sigmoid 1 / (1 + exp(-x))."""
    return _float("expit", input).sigmoid()


def logit(input: Tensor, eps: float | None = None) -> Tensor:  # noqa: A002
    """log(z / (1 - z)), z = input clamped to [eps, 1 - eps] when eps is given."""
    return _tensor("logit", input).logit(eps)


def erf(input: Tensor) -> Tensor:  # noqa: A002
    """The error function 2/sqrt(pi) int_0^x exp(-t^2) dt."""
    return _tensor("erf", input).erf()


def erfc(input: Tensor) -> Tensor:  # noqa: A002
    """The complementary error function 1 - erf(x), accurate in the tail."""
    return _tensor("erfc", input).erfc()


def erfinv(input: Tensor) -> Tensor:  # noqa: A002
    """The inverse of erf on (-1, 1)."""
    return _tensor("erfinv", input).erfinv()


def gammaln(input: Tensor) -> Tensor:  # noqa: A002
    """log|Gamma(x)| (torch.lgamma)."""
    return _tensor("gammaln", input).lgamma()


def digamma(input: Tensor) -> Tensor:  # noqa: A002
    """The logarithmic derivative of the gamma function."""
    return _tensor("digamma", input).digamma()


psi = digamma


def polygamma(n: int, input: Tensor) -> Tensor:  # noqa: A002
    """The n-th derivative of digamma."""
    return _tensor("polygamma", input).polygamma(n)


def multigammaln(input: Tensor, p: int) -> Tensor:  # noqa: A002
    """The log of the multivariate gamma function of dimension p (torch.mvlgamma)."""
    return _tensor("multigammaln", input).mvlgamma(p)


def i0(input: Tensor) -> Tensor:  # noqa: A002
    """The modified Bessel function of the first kind, order 0."""
    return _tensor("i0", input).i0()


def log1p(input: Tensor) -> Tensor:  # noqa: A002
    """log(1 + x), accurate for small x."""
    return _tensor("log1p", input).log1p()


def expm1(input: Tensor) -> Tensor:  # noqa: A002
    """exp(x) - 1, accurate for small x."""
    return _tensor("expm1", input).expm1()


def exp2(input: Tensor) -> Tensor:  # noqa: A002
    """2 ** x."""
    return _tensor("exp2", input).exp2()


def sinc(input: Tensor) -> Tensor:  # noqa: A002
    """The normalized sinc sin(pi x) / (pi x), 1 at 0."""
    return _tensor("sinc", input).sinc()


def round(input: Tensor, *, decimals: int = 0) -> Tensor:  # noqa: A001,A002
    """Round half to even at ``decimals`` places."""
    return _tensor("round", input).round(decimals=decimals)


def softmax(input: Tensor, dim: int, *, dtype: Any = None) -> Tensor:  # noqa: A002
    """exp(x) / sum(exp(x)) along ``dim``, computed in ``dtype`` when given."""
    x = _tensor("softmax", input)
    return _float("softmax", x if dtype is None else x.to(dtype)).softmax(dim)


def log_softmax(input: Tensor, dim: int, *, dtype: Any = None) -> Tensor:  # noqa: A002
    """x - logsumexp(x) along ``dim``, computed in ``dtype`` when given."""
    x = _tensor("log_softmax", input)
    return _float("log_softmax", x if dtype is None else x.to(dtype)).log_softmax(dim)


def logsumexp(input: Tensor, dim: Any, keepdim: bool = False) -> Tensor:  # noqa: A002
    """log(sum(exp(x))) along ``dim``, without overflow."""
    return _float("logsumexp", input).logsumexp(dim, keepdim)


# ------------------------------------------------------------------ torch.special only


def erfcx(input: Tensor) -> Tensor:  # noqa: A002
    """The scaled complementary error function exp(x^2) erfc(x) (no underflow for large x)."""
    return _ops().Erfcx.apply(_float("erfcx", input))


def i0e(input: Tensor) -> Tensor:  # noqa: A002
    """The exponentially scaled modified Bessel function exp(-|x|) i0(x)."""
    return _ops().I0e.apply(_float("i0e", input))


def i1(input: Tensor) -> Tensor:  # noqa: A002
    """The modified Bessel function of the first kind, order 1."""
    return _ops().I1.apply(_float("i1", input))


def i1e(input: Tensor) -> Tensor:  # noqa: A002
    """The exponentially scaled modified Bessel function exp(-|x|) i1(x)."""
    return _ops().I1e.apply(_float("i1e", input))


def ndtr(input: Tensor) -> Tensor:  # noqa: A002
    """The standard normal CDF (1 + erf(x / sqrt 2)) / 2, accurate in both tails."""
    return _ops().Ndtr.apply(_float("ndtr", input))


def ndtri(input: Tensor) -> Tensor:  # noqa: A002
    """The inverse of ndtr (the normal quantile): -inf at 0, inf at 1, NaN outside [0, 1]."""
    return _ops().Ndtri.apply(_float("ndtri", input))


def log_ndtr(input: Tensor) -> Tensor:  # noqa: A002
    """log(ndtr(x)), finite however negative x is."""
    return _ops().LogNdtr.apply(_float("log_ndtr", input))


def entr(input: Tensor) -> Tensor:  # noqa: A002
    """The elementwise entropy -x log(x): 0 at 0, -inf for x < 0."""
    return _ops().Entr.apply(_float("entr", input))


def xlogy(input: Any, other: Any) -> Tensor:  # noqa: A002
    """input * log(other), 0 where input == 0 (NaN where other is NaN); either may be a number."""
    return _ops().Xlogy.apply(*binary_operands("special.xlogy", input, other, floating=True))


def xlog1py(input: Any, other: Any) -> Tensor:  # noqa: A002
    """input * log1p(other), 0 where input == 0 (NaN where other is NaN); either may be a number."""
    return _ops().Xlog1py.apply(*binary_operands("special.xlog1py", input, other, floating=True))


def zeta(input: Any, other: Any) -> Tensor:  # noqa: A002
    """The Hurwitz zeta function sum_k (k + other)^-input; either may be a number. Differentiable
    in ``other`` only, as PyTorch. Its cost grows with -min(other) for negative ``other``."""
    return _ops().Zeta.apply(*binary_operands("special.zeta", input, other, floating=True))


def gammainc(input: Any, other: Any) -> Tensor:  # noqa: A002
    """The regularized lower incomplete gamma function P(a, x) = 1/Gamma(a) int_0^x t^(a-1) e^-t dt,
    a = input, x = other (either may be a number). Differentiable in ``other`` only, as PyTorch.
    Float64 accurate to ~1e-14 for a < 300 (no Temme expansion: ~a * 1e-16 beyond)."""
    return _ops().Gammainc.apply(*binary_operands("special.gammainc", input, other, floating=True), False)


def gammaincc(input: Any, other: Any) -> Tensor:  # noqa: A002
    """The regularized upper incomplete gamma function Q(a, x) = 1 - P(a, x), computed directly
    (accurate where Q is tiny). Differentiable in ``other`` only, as PyTorch."""
    return _ops().Gammainc.apply(*binary_operands("special.gammaincc", input, other, floating=True), True)


# ------------------------------------------------------------------ Bessel functions without gradients


def _no_grad_kernel(op: str, kernel: str, input: Any) -> Tensor:  # noqa: A002
    """``kernel`` of surface/ops/special.py on a detached ``input``: PyTorch records no gradient for these."""
    from tinyflow.surface.ops.math import NoGradient

    array_fn = getattr(_ops(), kernel)
    return NoGradient.apply(lambda xp, a: array_fn(xp, a), _float(op, input).detach())


def bessel_j0(input: Tensor) -> Tensor:  # noqa: A002
    """The Bessel function of the first kind, order 0 (no gradient, as PyTorch)."""
    return _no_grad_kernel("bessel_j0", "bessel_j0_array", input)


def bessel_j1(input: Tensor) -> Tensor:  # noqa: A002
    """The Bessel function of the first kind, order 1 (no gradient, as PyTorch)."""
    return _no_grad_kernel("bessel_j1", "bessel_j1_array", input)


def modified_bessel_i0(input: Tensor) -> Tensor:  # noqa: A002
    """The modified Bessel function of the first kind, order 0: i0 without a gradient, as PyTorch."""
    return _no_grad_kernel("modified_bessel_i0", "i0_array", input)


def modified_bessel_i1(input: Tensor) -> Tensor:  # noqa: A002
    """The modified Bessel function of the first kind, order 1: i1 without a gradient, as PyTorch."""
    return _no_grad_kernel("modified_bessel_i1", "i1_array", input)


def spherical_bessel_j0(input: Tensor) -> Tensor:  # noqa: A002
    """The spherical Bessel function of the first kind, order 0: sin(x) / x (no gradient, as PyTorch)."""
    return _no_grad_kernel("spherical_bessel_j0", "spherical_bessel_j0_array", input)
