"""Special functions (torch.special and the extra elementwise maths of torch.*): the gamma family
(lgamma, digamma, polygamma, Hurwitz zeta, the regularized incomplete gammas), the error-function
family (erfc, erfcx, ndtr, ndtri, log_ndtr), the Bessel functions i0, i0e, i1, i1e, j0, j1, and
binary ops (xlogy, hypot, logaddexp2, fmax/fmin, heaviside, nextafter, ...).

NumPy has none of the special functions and SciPy is not a dependency, so each has an array
kernel ``<name>_array(xp, ...)`` written with ``xp`` ufuncs only (it runs on NumPy and CuPy alike).
Kernels compute in float64 and return the input's dtype; the algorithms are Cephes' (the
library behind PyTorch's CPU kernels) or series whose error terms are below float64 rounding.
Iterative kernels (zeta, incomplete gamma) loop until every element has converged.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from tinyflow.autograd.function import Context, Function
from tinyflow.device import to_host
from tinyflow.surface.ops.math import LogAddExp, UnaryFunction

__all__ = [
    "lgamma_array", "digamma_array", "zeta_array", "polygamma_array", "erf_small_array", "erfc_array",
    "erfcx_array", "ndtr_array", "ndtri_array", "log_ndtr_array", "i0_array", "i0e_array", "i1_array",
    "i1e_array", "bessel_j0_array", "bessel_j1_array", "spherical_bessel_j0_array", "Lgamma", "Digamma", "Polygamma", "Erfc", "Erfcx", "Ndtr", "Ndtri", "LogNdtr", "I0", "I0e",
    "I1", "I1e", "Sinc", "Entr", "Logit", "Xlogy", "Xlog1py", "Hypot", "LogAddExp2", "Fmax", "Fmin",
    "Heaviside", "NextAfter", "Zeta", "Frexp", "gammainc_array", "gammaincc_array", "Gammainc",
]

_MACHEP = 1.11022302462515654042e-16  # 2**-53
_LOG_SQRT_2PI = 0.91893853320467274178  # log(sqrt(2 pi))
_EULER = 0.57721566490153286061
_ZETA_DIRECT_LIMIT = 1e4  # zeta sums at most this many terms directly (q >= -1e4)
_SQRT_PI = math.sqrt(math.pi)


def _quiet(kernel: Callable[..., Any]) -> Callable[..., Any]:
    """Run ``kernel`` without NumPy's floating-point warnings: each branch of a kernel is computed
    on every element and the unused results (overflows, logs of negatives) are discarded."""

    @functools.wraps(kernel)
    def quiet(*args: Any, **kwargs: Any) -> Any:
        with np.errstate(all="ignore"):
            return kernel(*args, **kwargs)

    return quiet


def _wide(xp: Any, a: Any) -> Any:
    """``a`` as a float64 array (half, bfloat16, float32 and Python numbers alike)."""
    return xp.asarray(a).astype(xp.float64)


def _narrow(out: Any, like: Any) -> Any:
    """``out`` back in the dtype of the input ``like``."""
    return out.astype(like.dtype, copy=False)


def _poly(x: Any, coefs: tuple[float, ...]) -> Any:
    """coefs[0] x^n + ... + coefs[n] by Horner's rule (Cephes' polevl)."""
    out = x * 0 + coefs[0]
    for c in coefs[1:]:
        out = out * x + c
    return out


def _poly1(x: Any, coefs: tuple[float, ...]) -> Any:
    """x^(n+1) + coefs[0] x^n + ... + coefs[n]: a polynomial with leading coefficient 1 (p1evl)."""
    return _poly(x, (1.0, *coefs))


# ------------------------------------------------------------------ Hurwitz zeta, polygamma

# Euler-Maclaurin's divisors (2k)! / B_2k, as Cephes' zeta.c.
_ZETA_A = (
    12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9, 7.47242496e10,
    -2.950130727918164224e12, 1.1646782814350067249e14, -4.5979787224074726105e15, 1.8152105401943546773e17,
    -7.1661652561756670113e18,
)


@_quiet
def zeta_array(xp: Any, x: Any, q: Any) -> Any:
    """The Hurwitz zeta function sum_k (k + q)^-x (Cephes' zeta): the first terms summed directly
    until k + q > 9, then the Euler-Maclaurin tail; each element stops when its terms fall below
    float64 rounding. inf at x == 1 and at q a non-positive integer; NaN for x < 1, and for q < 0
    with x not an integer. The number of direct terms grows with -q (about 9 - min(q))."""
    x, q_in = xp.broadcast_arrays(_wide(xp, x), _wide(xp, q))
    # q < -_ZETA_DIRECT_LIMIT would take -q direct terms: those elements (and the poles, which the
    # end sets) are summed at q = 1 here and replaced below (by the polygamma reflection for an
    # integer x >= 2; otherwise NaN / inf as for any q < 0)
    pole = (q_in <= 0) & (q_in == xp.floor(q_in))
    far = (q_in < -_ZETA_DIRECT_LIMIT) & ~pole
    q = xp.where(far | pole | ~xp.isfinite(q_in), 1.0, q_in)
    s = q ** -x
    a = q.copy()
    b = xp.zeros_like(s)
    done = xp.zeros(s.shape, dtype=bool)
    steps = max(9, int(math.ceil(9 - float(q.min()))) + 1) if q.size else 9
    for i in range(steps):
        active = ~done & ((i < 9) | (a <= 9))
        a = xp.where(active, a + 1, a)
        term = a ** -x
        b = xp.where(active, term, b)
        s = xp.where(active, s + term, s)
        done = done | (active & (xp.abs(term / s) < _MACHEP))
    w = a
    tail = ~done
    s = xp.where(tail, s + b * w / (x - 1) - 0.5 * b, s)
    rising = xp.ones_like(s)
    k = 0.0
    for divisor in _ZETA_A:
        rising = rising * (x + k)
        b = b / w
        t = rising * b / divisor
        s = xp.where(tail, s + t, s)
        tail = tail & ~(xp.abs(t / s) < _MACHEP)
        k += 1
        rising = rising * (x + k)
        b = b / w
        k += 1
    if bool(far.any()):  # zeta(n + 1, q) = (-1)^(n+1) psi_n(q) / n! for integer n >= 1 (a host read: rare)
        for value in sorted({float(v) for v in _host_values(xp, x[far])}):
            if value >= 2 and value == math.floor(value):
                n = int(value) - 1
                here = far & (x == value)
                s = xp.where(here, (-1.0) ** (n + 1) * polygamma_array(xp, n, q_in) / math.factorial(n), s)
    s = xp.where(xp.isinf(q_in), math.nan, s)  # NaN at q = +inf, as PyTorch (q = -inf: a pole, below)
    s = xp.where(x == 1, math.inf, s)
    s = xp.where(x < 1, math.nan, s)
    s = xp.where(pole & (x >= 1), math.inf, s)
    s = xp.where((q_in < 0) & ~pole & (x != xp.floor(x)), math.nan, s)
    return xp.where(xp.isnan(x) | xp.isnan(q_in), math.nan, s)


def _host_values(xp: Any, a: Any) -> Any:
    """``a`` on the host (the distinct exponents of the far-negative q values of zeta)."""
    return a if xp is np else to_host(a, "zeta: exponents of far-negative q")


@functools.lru_cache(maxsize=1)
def _lgamma_series() -> tuple[float, ...]:
    """The Taylor coefficients of lgamma(2 + t) at t = 0, highest power first: (-1)^k (zeta(k) - 1)/k
    for k = 32..2, then 1 - Euler's gamma (the coefficient of t), then 0."""
    k = np.arange(2, 33, dtype=np.float64)
    zeta_minus_1 = zeta_array(np, k, np.full_like(k, 2.0))  # Hurwitz zeta(k, 2) = zeta(k) - 1
    coefs = (-1.0) ** k * zeta_minus_1 / k
    return (*(float(c) for c in coefs[::-1]), 1 - _EULER, 0.0)


def _lgamma_near_2(t: Any) -> Any:
    """lgamma(2 + t) for |t| <= 0.5, from its Taylor series (to t^32: (|t| / 2)^k / k < 1e-20)."""
    return _poly(t, _lgamma_series())


def _stirling_lgamma(xp: Any, x: Any) -> Any:
    """lgamma(x) for x >= 10: Stirling's series to x^-13 (the next term is < 1e-17 there)."""
    r = 1 / (x * x)
    series = _poly(r, (1 / 156, -691 / 360360, 1 / 1188, -1 / 1680, 1 / 1260, -1 / 360, 1 / 12)) / x
    return (x - 0.5) * xp.log(x) - x + _LOG_SQRT_2PI + series


def _lgamma_positive(xp: Any, x: Any) -> Any:
    """lgamma(x) for x > -0.5 (x >= 0.5 after the reflection): one Taylor series around 2 at an
    exact argument t, plus the log of the recurrence's factors."""
    # 2.5 <= x < 10: lgamma(x) = log((x-1)(x-2)...(u)) + lgamma(u), u in [1.5, 2.5) (exact steps)
    u = xp.clip(x, 0.5, 10.0)
    prod = xp.ones_like(u)
    for _ in range(8):
        step = u >= 2.5
        u = xp.where(step, u - 1, u)
        prod = xp.where(step, prod * u, prod)
    # 0.5 <= x < 1.5: lgamma(x) = lgamma(x + 1) - log(x); |x| < 0.5: lgamma(x + 2) - log|x| - log(x + 1)
    near_zero, near_one = xp.abs(x) <= 0.5, x < 1.5  # x = -0.5 itself lands here, not in the reflection
    t = xp.where(near_zero, x, xp.where(near_one, x - 1, u - 2))
    small = xp.clip(x, -0.5, 1.5)
    log_factors = xp.where(near_one, -xp.log(xp.abs(small)), xp.log(prod))
    log_factors = xp.where(near_zero, log_factors - xp.log1p(small), log_factors)
    out = _lgamma_near_2(xp.clip(t, -0.5, 0.5)) + log_factors
    return xp.where(x >= 10, _stirling_lgamma(xp, xp.maximum(x, 10.0)), out)


def _abs_sinpi(xp: Any, x: Any) -> Any:
    """|sin(pi x)|, exact at the integers (x - round(x) is exact)."""
    return xp.abs(xp.sin(math.pi * (x - xp.round(x))))


@_quiet
def lgamma_array(xp: Any, a: Any) -> Any:
    """log|Gamma(x)|: a Taylor series around 2 for x in [-0.5, 2.5) (exact arguments near the zeros
    at 1 and 2), the recurrence down to it below 10, Stirling's series above; the reflection
    log(pi / |sin(pi x)|) - lgamma(1 - x) for x < -0.5. inf at 0, the negative integers and +-inf."""
    x = _wide(xp, a)
    positive = _lgamma_positive(xp, xp.where(x < -0.5, 1 - x, x))
    reflected = math.log(math.pi) - xp.log(_abs_sinpi(xp, x)) - positive
    out = xp.where(x < -0.5, reflected, positive)
    pole = (x <= 0) & (x == xp.floor(x))
    out = xp.where(pole | xp.isinf(x), math.inf, out)
    return _narrow(xp.where(xp.isnan(x), x, out), a)


def _digamma_asymptotic(xp: Any, x: Any) -> Any:
    """digamma(x) for x >= 10: log x - 1/(2x) - sum B_2k / (2k x^2k), to x^-14."""
    r = 1 / (x * x)
    series = r * _poly(r, (1 / 12, -691 / 32760, 1 / 132, -1 / 240, 1 / 252, -1 / 120, 1 / 12))
    return xp.log(x) - 0.5 / x - series


def _digamma_positive(xp: Any, x: Any) -> Any:
    """digamma(x) for x > 0: the recurrence digamma(x) = digamma(x + 1) - 1/x up to x >= 10."""
    shift = xp.zeros_like(x)
    u = x
    for _ in range(10):
        step = u < 10
        shift = xp.where(step, shift - 1 / u, shift)
        u = xp.where(step, u + 1, u)
    return shift + _digamma_asymptotic(xp, u)


@_quiet
def digamma_array(xp: Any, a: Any) -> Any:
    """The logarithmic derivative of Gamma, as PyTorch's calc_digamma: the recurrence up to x >= 10
    and the asymptotic series; digamma(1 - x) - pi / tan(pi frac(x)) for x < 0. -inf at +0 (+inf at
    -0), NaN at the negative integers and -inf."""
    x = _wide(xp, a)
    positive = _digamma_positive(xp, xp.where(x < 0, 1 - x, xp.where(x == 0, 1.0, x)))
    frac = x - xp.trunc(x)
    reflected = positive - math.pi / xp.tan(math.pi * frac)
    out = xp.where(x < 0, reflected, positive)
    out = xp.where((x < 0) & (frac == 0), math.nan, out)
    out = xp.where(x == 0, xp.copysign(math.inf, -x), out)
    out = xp.where(x == math.inf, math.inf, out)
    return _narrow(xp.where(xp.isnan(x), x, out), a)


@functools.cache
def _cot_derivative_poly(n: int) -> tuple[float, ...]:
    """P_n with d^n/dx^n cot(pi x) = (-pi)^n P_n(cot(pi x)), highest power first: P_0(c) = c and
    P_(k+1)(c) = P_k'(c) (1 + c^2), as d/dx cot(pi x) = -pi (1 + cot^2(pi x))."""
    poly = np.array([1.0, 0.0])
    for _ in range(n):
        poly = np.polymul(np.polyder(poly), [1.0, 0.0, 1.0])
    return tuple(float(c) for c in poly)


@_quiet
def polygamma_array(xp: Any, n: int, a: Any) -> Any:
    """The n-th derivative of digamma: digamma for n == 0, else (-1)^(n+1) n! zeta(n + 1, x) for
    x > 0 and, for x < 0, the reflection psi_n(x) = (-1)^n psi_n(1 - x) - pi d^n/dx^n cot(pi x)
    (the direct sum of zeta(n + 1, x) would need about -x terms: 1e30 for x = -1e30)."""
    if n == 0:
        return digamma_array(xp, a)
    x = _wide(xp, a)
    sign = 1.0 if n % 2 else -1.0
    negative = x < 0
    pole = (x <= 0) & (x == xp.floor(x))
    positive = sign * float(math.factorial(n)) * zeta_array(xp, float(n + 1), xp.where(negative | pole, 1 - x, x))
    cot = 1 / xp.tan(math.pi * (x - xp.trunc(x)))
    reflected = (-1.0) ** n * positive - math.pi * (-math.pi) ** n * _poly(cot, _cot_derivative_poly(n))
    out = xp.where(negative, reflected, positive)
    out = xp.where(pole, sign * math.inf, out)  # zeta(n + 1, -k) diverges: +inf for odd n, -inf for even
    at_inf = 0.0 if n == 1 else math.nan  # PyTorch: trigamma(inf) = 0, higher orders NaN (zeta(n + 1, inf))
    out = xp.where(x == math.inf, at_inf, xp.where(x == -math.inf, math.nan, out))
    return _narrow(xp.where(xp.isnan(x), x, out), a)


# ------------------------------------------------------------------ error functions

# Cephes ndtr.c: erf on |x| <= 1 (T/U), erfc on [1, 8) (P/Q) and [8, inf) (R/S).
_ERF_T = (9.60497373987051638749e0, 9.00260197203842689217e1, 2.23200534594684319226e3, 7.00332514112805075473e3,
          5.55923013010394962768e4)
_ERF_U = (3.35617141647503099647e1, 5.21357949780152679795e2, 4.59432382970980127987e3, 2.26290000613890934246e4,
          4.92673942608635921086e4)
_ERFC_P = (2.46196981473530512524e-10, 5.64189564831068821977e-1, 7.46321056442269912687e0,
           4.86371970985681366614e1, 1.96520832956077098242e2, 5.26445194995477358631e2, 9.34528527171957607540e2,
           1.02755188689515710272e3, 5.57535335369399327526e2)
_ERFC_Q = (1.32281951154744992508e1, 8.67072140885989742329e1, 3.54937778887819891062e2, 9.75708501743205489753e2,
           1.82390916687909736289e3, 2.24633760818710981792e3, 1.65666309194161350182e3, 5.57535340817727675546e2)
_ERFC_R = (5.64189583547755073984e-1, 1.27536670759978104416e0, 5.01905042251180477414e0, 6.16021097993053585195e0,
           7.40974269950448939160e0, 2.97886665372100240670e0)
_ERFC_S = (2.26052863220117276590e0, 9.39603524938001434673e0, 1.20489539808096656605e1, 1.70814450747565897222e1,
           9.60896809063285878198e0, 3.36907645100081516050e0)


def erf_small_array(xp: Any, x: Any) -> Any:
    """erf(x) for |x| <= 1 (Cephes' rational approximation, float64 in and out)."""
    z = x * x
    return x * _poly(z, _ERF_T) / _poly1(z, _ERF_U)


def _exp_square(xp: Any, x: Any, sign: float) -> Any:
    """exp(sign * x^2) without the rounding error of x^2 (Cephes' expx2): x = m + f with m a
    multiple of 1/128, so m^2 is exact and exp(m^2) exp(2mf + f^2) carries the rest. ``sign`` is
    +-1 or +-1/2 (exact products)."""
    ax = xp.minimum(xp.abs(x), 1e300)
    m = xp.floor(ax * 128 + 0.5) / 128
    f = ax - m
    return xp.exp(sign * (m * m)) * xp.exp(sign * (2 * m * f + f * f))


def _erfcx_rational(xp: Any, ax: Any) -> Any:
    """exp(x^2) erfc(x) for x >= 1 (Cephes' P/Q below 8, R/S above; 1/(x sqrt(pi)) beyond 1e8)."""
    mid = _poly(ax, _ERFC_P) / _poly1(ax, _ERFC_Q)
    far = xp.minimum(ax, 1e8)
    far = _poly(far, _ERFC_R) / _poly1(far, _ERFC_S)
    out = xp.where(ax < 8, mid, far)
    return xp.where(ax > 1e8, 1 / (ax * _SQRT_PI), out)


@_quiet
def erfc_array(xp: Any, a: Any) -> Any:
    """1 - erf(x), accurate in the tail (not computed as 1 - erf): Cephes' erfc, with
    exp(-x^2) split so that x^2 loses nothing; 2 - erfc(-x) for x < 0."""
    x = _wide(xp, a)
    ax = xp.abs(x)
    near = 1 - erf_small_array(xp, xp.clip(x, -1.0, 1.0))
    tail = _exp_square(xp, ax, -1.0) * _erfcx_rational(xp, xp.maximum(ax, 1.0))
    tail = xp.where(x < 0, 2 - tail, tail)
    out = xp.where(ax < 1, near, tail)
    out = xp.where(xp.isinf(x), 1 - xp.sign(x), out)
    return _narrow(xp.where(xp.isnan(x), x, out), a)


@_quiet
def erfcx_array(xp: Any, a: Any) -> Any:
    """The scaled complementary error function exp(x^2) erfc(x): Cephes' rational forms for
    x >= 1 (no exp at all), exp(x^2)(1 - erf(x)) on (-1, 1), 2 exp(x^2) - erfcx(-x) below -1
    (inf once exp(x^2) overflows, about x < -26.6)."""
    x = _wide(xp, a)
    ax = xp.abs(x)
    clipped = xp.clip(x, -1.0, 1.0)
    near = xp.exp(clipped * clipped) * (1 - erf_small_array(xp, clipped))
    tail = _erfcx_rational(xp, xp.maximum(ax, 1.0))
    tail = xp.where(x < 0, 2 * _exp_square(xp, ax, 1.0) - tail, tail)
    out = xp.where(ax < 1, near, tail)
    out = xp.where(x == -math.inf, math.inf, xp.where(x == math.inf, 0.0, out))
    return _narrow(xp.where(xp.isnan(x), x, out), a)


@_quiet
def ndtr_array(xp: Any, a: Any) -> Any:
    """The standard normal CDF, as PyTorch's calc_ndtr: 1/2 + erf(x/sqrt2)/2 near 0, erfc(|x|/sqrt2)/2
    in the tails, there as exp(-x^2/2) erfcx(|x|/sqrt2) / 2 with x^2/2 split exactly (x/sqrt2 would
    round, costing x^2 * 1e-16 relative deep in the tail)."""
    x = _wide(xp, a)
    t = x * math.sqrt(0.5)
    near = 0.5 + 0.5 * erf_small_array(xp, xp.clip(t, -1.0, 1.0))
    at = xp.abs(t)
    deep = _exp_square(xp, x, -0.5) * _erfcx_rational(xp, xp.maximum(at, 1.0))
    half_tail = 0.5 * xp.where(at < 1, 1 - erf_small_array(xp, xp.minimum(at, 1.0)), deep)
    tail = xp.where(x > 0, 1 - half_tail, half_tail)
    out = xp.where(xp.abs(t) < math.sqrt(0.5), near, tail)
    out = xp.where(xp.isinf(x), (1 + xp.sign(x)) / 2, out)
    return _narrow(xp.where(xp.isnan(x), x, out), a)


@_quiet
def log_ndtr_array(xp: Any, a: Any) -> Any:
    """log of the standard normal CDF, as PyTorch: log(erfcx(-x/sqrt2)/2) - x^2/2 for x < -1 (no
    underflow however negative), log1p(-erfc(x/sqrt2)/2) otherwise."""
    x = _wide(xp, a)
    t = x * math.sqrt(0.5)
    left = xp.log(erfcx_array(xp, -t) / 2) - t * t
    right = xp.log1p(-erfc_array(xp, t) / 2)
    out = xp.where(x < -1, left, right)
    return _narrow(xp.where(x == -math.inf, -math.inf, out), a)


# Acklam's rational approximation of the normal quantile (relative error < 1.2e-9).
_ACKLAM_A = (-3.969683028665376e01, 2.209460984245205e02, -2.759285104469687e02, 1.383577518672690e02,
             -3.066479806614716e01, 2.506628277459239e00)
_ACKLAM_B = (-5.447609879822406e01, 1.615858368580409e02, -1.556989798598866e02, 6.680131188771972e01,
             -1.328068155288572e01, 1.0)
_ACKLAM_C = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e00, -2.549732539343734e00,
             4.374664141464968e00, 2.938163982698783e00)
_ACKLAM_D = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e00, 3.754408661907416e00, 1.0)


def _ndtri_lower(xp: Any, p: Any) -> Any:
    """The normal quantile for 0 < p <= 1/2: Acklam's guess, then Newton steps: on
    erf(x/sqrt2)/2 = p - 1/2 for p > 0.08, else on log_ndtr(x) = log(p), whose slope
    sqrt(2/pi) / erfcx(-x/sqrt2) neither underflows nor overflows."""
    q = xp.sqrt(-2 * xp.log(p))
    tail = _poly(q, _ACKLAM_C) / _poly(q, _ACKLAM_D)
    r = p - 0.5
    central = r * _poly(r * r, _ACKLAM_A) / _poly(r * r, _ACKLAM_B)
    x = xp.where(p < 0.02425, tail, central)
    log_p = xp.log(p)
    middle = p > 0.08  # |x| < sqrt(2): Newton on erf(x/sqrt2)/2 = p - 1/2, both sides small near 0
    for _ in range(2):  # quadratic convergence from 1e-9: 1e-18
        t = xp.clip(x * math.sqrt(0.5), -1.0, 1.0)
        pdf = xp.exp(-t * t) / math.sqrt(2 * math.pi)
        step_middle = (0.5 * erf_small_array(xp, t) - (p - 0.5)) / pdf
        slope_inv = erfcx_array(xp, -x * math.sqrt(0.5)) * math.sqrt(math.pi / 2)
        step_tail = (log_ndtr_array(xp, x) - log_p) * slope_inv
        x = x - xp.where(middle, step_middle, step_tail)
    return x


@_quiet
def ndtri_array(xp: Any, a: Any) -> Any:
    """The inverse of ndtr (the standard normal quantile): -inf at 0, inf at 1, NaN outside [0, 1];
    computed on min(p, 1 - p) (1 - p is exact for p >= 1/2) and reflected."""
    p = _wide(xp, a)
    lower = xp.minimum(p, 1 - p)
    inside = (lower > 0) & (lower <= 0.5)
    x = _ndtri_lower(xp, xp.where(inside, lower, 0.25))
    x = xp.where(p > 0.5, -x, x)
    x = xp.where(p == 0.5, 0.0, x)
    edge = xp.where(p == 0, -math.inf, xp.where(p == 1, math.inf, math.nan))
    return _narrow(xp.where(inside, x, edge), a)


# ------------------------------------------------------------------ modified Bessel functions


def _bessel_i_series(xp: Any, ax: Any, nu: int) -> Any:
    """I_nu(x) for 0 <= x <= 25, nu in (0, 1): (x/2)^nu sum_k (x^2/4)^k / (k! (k + nu)!), all terms
    positive (60 terms: the last is < 1e-20 of the sum at x = 25)."""
    y = ax * ax / 4
    term = xp.ones_like(ax) if nu == 0 else ax / 2
    total = term
    for k in range(1, 60):
        term = term * y / (k * (k + nu))
        total = total + term
    return total


def _bessel_i_asymptotic(xp: Any, ax: Any, nu: int) -> Any:
    """sqrt(2 pi x) exp(-x) I_nu(x) for x > 25: sum_k (-1)^k a_k(nu) / x^k with
    a_k = prod_j (4 nu^2 - (2j - 1)^2) / (k! 8^k); 30 terms (the last < 1e-18)."""
    term = xp.ones_like(ax)
    total = term
    for k in range(1, 30):
        term = term * (-(4 * nu * nu - (2 * k - 1) ** 2) / (8 * k)) / ax
        total = total + term
    return total


@_quiet
def _bessel_i_scaled(xp: Any, a: Any, nu: int) -> Any:
    """exp(-|x|) I_nu(|x|) in float64 (i0e, and i1e before its sign)."""
    ax = xp.abs(_wide(xp, a))
    near = xp.minimum(ax, 25.0)
    series = _bessel_i_series(xp, near, nu) * xp.exp(-near)
    far = xp.maximum(ax, 25.0)
    asymptotic = _bessel_i_asymptotic(xp, far, nu) / xp.sqrt(2 * math.pi * far)
    out = xp.where(ax > 25, asymptotic, series)
    return xp.where(xp.isinf(ax), 0.0, out)


@_quiet
def _bessel_i(xp: Any, a: Any, nu: int) -> Any:
    """I_nu(|x|) in float64: the series below 25, exp(x) times the scaled asymptotic form above."""
    ax = xp.abs(_wide(xp, a))
    near = _bessel_i_series(xp, xp.minimum(ax, 25.0), nu)
    far = xp.maximum(ax, 25.0)
    half = xp.exp(far / 2)  # exp(x) as a square: finite as long as the result is
    asymptotic = _bessel_i_asymptotic(xp, far, nu) / xp.sqrt(2 * math.pi * far) * half * half
    return xp.where(ax > 25, asymptotic, near)


def i0_array(xp: Any, a: Any) -> Any:
    """The modified Bessel function of the first kind, order 0."""
    x = _wide(xp, a)
    return _narrow(xp.where(xp.isnan(x), x, _bessel_i(xp, x, 0)), a)


def i0e_array(xp: Any, a: Any) -> Any:
    """exp(-|x|) i0(x)."""
    x = _wide(xp, a)
    return _narrow(xp.where(xp.isnan(x), x, _bessel_i_scaled(xp, x, 0)), a)


def i1_array(xp: Any, a: Any) -> Any:
    """The modified Bessel function of the first kind, order 1 (odd in x)."""
    x = _wide(xp, a)
    return _narrow(xp.where(xp.isnan(x), x, xp.copysign(_bessel_i(xp, x, 1), x)), a)


def i1e_array(xp: Any, a: Any) -> Any:
    """exp(-|x|) i1(x)."""
    x = _wide(xp, a)
    return _narrow(xp.where(xp.isnan(x), x, xp.copysign(_bessel_i_scaled(xp, x, 1), x)), a)


def _bessel_j_series(xp: Any, ax: Any, nu: int) -> Any:
    """J_nu(x) for |x| <= 2: (x/2)^nu sum_k (-x^2/4)^k / (k! (k + nu)!) (no term exceeds 1)."""
    y = -ax * ax / 4
    term = xp.ones_like(ax) if nu == 0 else ax / 2
    total = term
    for k in range(1, 25):
        term = term * y / (k * (k + nu))
        total = total + term
    return total


_MILLER_START = 80


def _bessel_j_miller(xp: Any, ax: Any) -> tuple[Any, Any]:
    """(J0(x), J1(x)) for 2 <= x <= 25 by Miller's backward recurrence J_{n-1} = (2n/x) J_n - J_{n+1}
    from n = 80 (far above x, where J_n is negligible), normalized by J0 + 2 (J2 + J4 + ...) = 1."""
    upper = xp.zeros_like(ax)
    current = xp.full(ax.shape, 1e-200)
    norm = xp.zeros_like(ax)
    j1 = xp.zeros_like(ax)
    for n in range(_MILLER_START, 0, -1):  # current = f_n; make f_{n-1}
        lower = (2 * n / ax) * current - upper
        upper, current = current, lower
        if n == 2:
            j1 = current
        if (n - 1) % 2 == 0 and n - 1 > 0:
            norm = norm + 2 * current
    norm = norm + current  # f_0
    return current / norm, j1 / norm


def _bessel_j_asymptotic(xp: Any, ax: Any, nu: int) -> Any:
    """J_nu(x) for x > 25 (Hankel): sqrt(2/(pi x)) (P cos chi - Q sin chi), chi = x - (nu/2 + 1/4) pi,
    P = a_0 - a_2/x^2 + a_4/x^4 - ..., Q = a_1/x - a_3/x^3 + ..., a_k = prod_{j<=k} (4 nu^2 - (2j-1)^2) / (k! 8^k)
    (30 terms, the last < 1e-18)."""
    p = xp.zeros_like(ax)
    q = xp.zeros_like(ax)
    term = xp.ones_like(ax)
    for k in range(30):
        if k > 0:
            term = term * ((4 * nu * nu - (2 * k - 1) ** 2) / (8 * k)) / ax
        sign = -1.0 if (k // 2) % 2 else 1.0
        if k % 2 == 0:
            p = p + sign * term
        else:
            q = q + sign * term
    c, s = xp.cos(ax), xp.sin(ax)
    if nu == 0:  # chi = x - pi/4
        cos_chi, sin_chi = (c + s) * math.sqrt(0.5), (s - c) * math.sqrt(0.5)
    else:  # chi = x - 3 pi/4
        cos_chi, sin_chi = (s - c) * math.sqrt(0.5), -(s + c) * math.sqrt(0.5)
    return xp.sqrt(2 / (math.pi * ax)) * (p * cos_chi - q * sin_chi)


@_quiet
def _bessel_j(xp: Any, a: Any, nu: int) -> Any:
    x = _wide(xp, a)
    ax = xp.abs(x)
    small = _bessel_j_series(xp, xp.minimum(ax, 2.0), nu)
    mid = _bessel_j_miller(xp, xp.clip(ax, 2.0, 25.0))[nu]
    far = _bessel_j_asymptotic(xp, xp.maximum(ax, 25.0), nu)
    out = xp.where(ax < 2, small, xp.where(ax <= 25, mid, far))
    if nu == 1:
        out = xp.where(x < 0, -out, out)  # odd
    out = xp.where(xp.isinf(x), math.nan, out)
    return _narrow(xp.where(xp.isnan(x), x, out), a)


def bessel_j0_array(xp: Any, a: Any) -> Any:
    """The Bessel function of the first kind, order 0: a series below 2, Miller's recurrence up to
    25, Hankel's expansion beyond (absolute error ~1e-16, so relative error grows near its zeros)."""
    return _bessel_j(xp, a, 0)


def bessel_j1_array(xp: Any, a: Any) -> Any:
    """The Bessel function of the first kind, order 1 (odd), computed as bessel_j0_array."""
    return _bessel_j(xp, a, 1)


@_quiet
def spherical_bessel_j0_array(xp: Any, a: Any) -> Any:
    """sin(x) / x: 1 at 0, 0 at +-inf."""
    x = _wide(xp, a)
    out = xp.where(x == 0, 1.0, xp.sin(x) / xp.where(x == 0, 1.0, x))
    out = xp.where(xp.isinf(x), 0.0, out)
    return _narrow(out, a)


# ------------------------------------------------------------------ regularized incomplete gamma

_IGAM_MAX_STEPS = 4000


def _log1pmx(xp: Any, d: Any) -> Any:
    """log(1 + d) - d, by its series for |d| < 0.3 (where the difference would cancel)."""
    small = xp.clip(d, -0.3, 0.3)
    total = xp.zeros_like(d)
    power = small * small
    for k in range(2, 40):
        total = total + (power / k if k % 2 else -power / k)
        power = power * small
    return xp.where(xp.abs(d) < 0.3, total, xp.log1p(d) - d)


def _igam_log_prefactor(xp: Any, a: Any, x: Any) -> Any:
    """log(x^a exp(-x) / Gamma(a)); for a >= 10 as a log1pmx((x - a)/a) + log(a)/2 - log sqrt(2 pi)
    - (Stirling's remainder), which keeps its accuracy where x is close to a."""
    direct = a * xp.log(x) - x - lgamma_array(xp, a)
    big = xp.maximum(a, 10.0)
    remainder = _stirling_lgamma(xp, big) - ((big - 0.5) * xp.log(big) - big + _LOG_SQRT_2PI)
    uniform = big * _log1pmx(xp, (x - big) / big) + 0.5 * xp.log(big) - _LOG_SQRT_2PI - remainder
    return xp.where(a >= 10, uniform, direct)


def _igam_series(xp: Any, a: Any, x: Any) -> Any:
    """P(a, x) = x^a e^-x / Gamma(a + 1) sum_n x^n / ((a+1)...(a+n)), all terms positive (x <~ a)."""
    r = a.copy()
    c = xp.ones_like(a)
    total = xp.ones_like(a)
    done = xp.zeros(a.shape, dtype=bool)
    for step in range(_IGAM_MAX_STEPS):
        r = r + 1
        c = xp.where(done, c, c * x / r)
        total = xp.where(done, total, total + c)
        done = done | (c <= _MACHEP * total)
        if step % 16 == 15 and bool(done.all()):
            break
    return total * xp.exp(_igam_log_prefactor(xp, a, x)) / a


def _igamc_fraction(xp: Any, a: Any, x: Any) -> Any:
    """Q(a, x) for x >= a, x > 1.1: x^a e^-x / Gamma(a) times Legendre's continued fraction
    (Cephes' igamc, rescaled when the convergents grow)."""
    y = 1 - a
    z = x + y + 1
    c = xp.zeros_like(a)
    pkm2, qkm2 = xp.ones_like(a), x.copy()
    pkm1, qkm1 = x + 1, z * x
    ans = pkm1 / qkm1
    done = xp.zeros(a.shape, dtype=bool)
    for step in range(_IGAM_MAX_STEPS):
        c, y, z = c + 1, y + 1, z + 2
        yc = y * c
        pk = pkm1 * z - pkm2 * yc
        qk = qkm1 * z - qkm2 * yc
        ratio = pk / xp.where(qk == 0, 1.0, qk)
        converged = (qk != 0) & (xp.abs(ans - ratio) <= _MACHEP * xp.abs(ratio))
        ans = xp.where(done | (qk == 0), ans, ratio)
        done = done | converged
        pkm2, pkm1, qkm2, qkm1 = pkm1, pk, qkm1, qk
        scale = xp.where(xp.abs(pk) > 4.503599627370496e15, 2.0**-52, 1.0)
        pkm2, pkm1, qkm2, qkm1 = pkm2 * scale, pkm1 * scale, qkm2 * scale, qkm1 * scale
        if step % 16 == 15 and bool(done.all()):
            break
    return ans * xp.exp(_igam_log_prefactor(xp, a, x))


def _igamc_small_x(xp: Any, a: Any, x: Any) -> Any:
    """Q(a, x) for x <= 1.1 and a small: 1 - x^a / Gamma(a + 1) + x^a / Gamma(a) sum_n (-x)^n / (n! (a + n))
    (Cephes' igamc series: no 1 - P cancellation when a is small)."""
    fac = xp.ones_like(a)
    total = xp.zeros_like(a)
    for n in range(1, 60):
        fac = fac * -x / n
        total = total + fac / (a + n)
    log_x = xp.log(x)
    lgamma_1p = _lgamma_near_2(xp.clip(a, -0.5, 0.5)) - xp.log1p(a)  # lgamma(1 + a), exact argument
    lgamma_1p = xp.where(xp.abs(a) < 0.5, lgamma_1p, lgamma_array(xp, a + 1))
    return -xp.expm1(a * log_x - lgamma_1p) - xp.exp(a * log_x - lgamma_array(xp, a)) * total


@_quiet
def _igam_pair(xp: Any, a: Any, x: Any) -> tuple[Any, Any, Any]:
    """(P, Q, from_p): both regularized incomplete gammas and where P was computed directly (else Q)."""
    a, x = xp.broadcast_arrays(_wide(xp, a), _wide(xp, x))
    ok = (a > 0) & (x > 0) & xp.isfinite(a) & xp.isfinite(x)
    a_ok, x_ok = xp.where(ok, a, 1.0), xp.where(ok, x, 1.0)
    use_fraction = (x_ok > 1.1) & (x_ok >= a_ok)
    use_small = (x_ok <= 1.1) & ~use_fraction & xp.where(x_ok <= 0.5, -0.4 / xp.log(x_ok) >= a_ok, x_ok * 1.1 >= a_ok)
    use_series = ~use_fraction & ~use_small
    p_series = _igam_series(xp, xp.where(use_series, a_ok, 1.0), xp.where(use_series, x_ok, 0.5))
    q_fraction = _igamc_fraction(xp, xp.where(use_fraction, a_ok, 1.0), xp.where(use_fraction, x_ok, 2.0))
    q_small = _igamc_small_x(xp, xp.where(use_small, a_ok, 0.5), xp.where(use_small, x_ok, 0.5))
    q = xp.where(use_fraction, q_fraction, q_small)
    p = xp.where(use_series, p_series, 1 - q)
    q = xp.where(use_series, 1 - p_series, q)
    # edges, as PyTorch: NaN for a < 0 or x < 0 (or both 0, or both inf); P(0, x > 0) = 1; P(a, 0) = 0;
    # P(inf, x) = 0; P(a, inf) = 1
    p_edge = xp.where(x == 0, 0.0, xp.where(a == 0, 1.0, xp.where(xp.isinf(a), 0.0, 1.0)))
    bad = (a < 0) | (x < 0) | ((a == 0) & (x == 0)) | (xp.isinf(a) & xp.isinf(x)) | xp.isnan(a) | xp.isnan(x)
    p = xp.where(ok, p, xp.where(bad, math.nan, p_edge))
    q = xp.where(ok, q, xp.where(bad, math.nan, 1 - p_edge))
    return p, q, use_series


def gammainc_array(xp: Any, a: Any, x: Any) -> Any:
    """The regularized lower incomplete gamma function P(a, x) = gamma(a, x) / Gamma(a): its series
    where x < a (or x <= 1.1), 1 - Q otherwise. No uniform asymptotic (Temme) expansion: for
    a > 1e3 near x = a the relative error grows to about a * 1e-16."""
    return _igam_pair(xp, a, x)[0]


def gammaincc_array(xp: Any, a: Any, x: Any) -> Any:
    """The regularized upper incomplete gamma function Q(a, x) = 1 - P(a, x): Legendre's continued
    fraction where x >= a and x > 1.1, a series for small x, 1 - P otherwise."""
    return _igam_pair(xp, a, x)[1]


class Gammainc(Function):
    """P(a, x) (``upper``: Q(a, x)); PyTorch differentiates in x only: dP/dx = x^(a-1) e^-x / Gamma(a)."""

    @staticmethod
    def forward(ctx: Context, a: Any, x: Any, upper: bool) -> Any:
        xp = ctx.xp
        ctx.save_for_backward(a, x)
        ctx.upper = upper
        out = gammaincc_array(xp, a, x) if upper else gammainc_array(xp, a, x)
        return out.astype(xp.result_type(a, x), copy=False)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        name = "gammaincc" if ctx.upper else "gammainc"
        if ctx.needs_input_grad[0]:
            raise NotImplementedError(
                f"special.{name}: the derivative with respect to input (a, the first argument) is not implemented, "
                "as in PyTorch; detach it or differentiate in other (x) only"
            )
        xp = ctx.xp
        a, x = ctx.saved_tensors
        density = xp.exp((a - 1) * xp.log(x) - x - lgamma_array(xp, a))
        return None, (-g if ctx.upper else g) * density, None


# ------------------------------------------------------------------ unary Functions


class Lgamma(UnaryFunction):
    """log|Gamma(x)|; its derivative is digamma(x)."""

    f = staticmethod(lambda xp, a: lgamma_array(xp, a))
    df = staticmethod(lambda xp, a, out: digamma_array(xp, a))


class Digamma(UnaryFunction):
    """digamma(x); its derivative is polygamma(1, x)."""

    f = staticmethod(lambda xp, a: digamma_array(xp, a))
    df = staticmethod(lambda xp, a, out: polygamma_array(xp, 1, a))


class Polygamma(Function):
    """polygamma(n, x); its derivative is polygamma(n + 1, x)."""

    @staticmethod
    def forward(ctx: Context, a: Any, n: int) -> Any:
        ctx.save_for_backward(a)
        ctx.n = n
        return polygamma_array(ctx.xp, n, a)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        (a,) = ctx.saved_tensors
        return g * polygamma_array(ctx.xp, ctx.n + 1, a), None


class Erfc(UnaryFunction):
    """erfc(x); its derivative is -2/sqrt(pi) exp(-x^2)."""

    f = staticmethod(lambda xp, a: erfc_array(xp, a))
    df = staticmethod(lambda xp, a, out: (-2 / _SQRT_PI) * xp.exp(-a * a))


class Erfcx(UnaryFunction):
    """erfcx(x) = exp(x^2) erfc(x); its derivative is 2x erfcx(x) - 2/sqrt(pi)."""

    f = staticmethod(lambda xp, a: erfcx_array(xp, a))
    df = staticmethod(lambda xp, a, out: 2 * a * out - 2 / _SQRT_PI)


class Ndtr(UnaryFunction):
    """The standard normal CDF; its derivative is the normal density."""

    f = staticmethod(lambda xp, a: ndtr_array(xp, a))
    df = staticmethod(lambda xp, a, out: xp.exp(-a * a / 2) / math.sqrt(2 * math.pi))


class Ndtri(UnaryFunction):
    """The normal quantile; its derivative is sqrt(2 pi) exp(ndtri(p)^2 / 2)."""

    f = staticmethod(lambda xp, a: ndtri_array(xp, a))
    df = staticmethod(lambda xp, a, out: math.sqrt(2 * math.pi) * xp.exp(out * out / 2))


def _log_ndtr_slope(xp: Any, a: Any, out: Any) -> Any:
    """pdf / cdf: exp(-x^2/2 - log_ndtr(x)) / sqrt(2 pi) as PyTorch for x >= -1; below, where
    that difference of two large numbers would cancel, sqrt(2/pi) / erfcx(-x/sqrt2) (about -x)."""
    near = xp.maximum(a, -1.0)
    direct = xp.exp(-near * near / 2 - xp.where(a < -1, 0.0, out)) / math.sqrt(2 * math.pi)
    scaled = math.sqrt(2 / math.pi) / erfcx_array(xp, -xp.minimum(a, -1.0) * math.sqrt(0.5))
    return xp.where(a < -1, scaled, direct)


class LogNdtr(UnaryFunction):
    """log ndtr(x); its derivative is pdf(x) / ndtr(x)."""

    f = staticmethod(lambda xp, a: log_ndtr_array(xp, a))
    df = staticmethod(_log_ndtr_slope)


class I0(UnaryFunction):
    """i0(x); its derivative is i1(x)."""

    f = staticmethod(lambda xp, a: i0_array(xp, a))
    df = staticmethod(lambda xp, a, out: i1_array(xp, a))


class I0e(UnaryFunction):
    """i0e(x); its derivative is i1e(x) - sign(x) i0e(x)."""

    f = staticmethod(lambda xp, a: i0e_array(xp, a))
    df = staticmethod(lambda xp, a, out: i1e_array(xp, a) - xp.sign(a) * out)


def _safe_reciprocal(xp: Any, a: Any) -> Any:
    return 1 / xp.where(a == 0, 1, a)


class I1(UnaryFunction):
    """i1; its derivative i0(x) - i1(x)/x is 1/2 at 0."""

    f = staticmethod(lambda xp, a: i1_array(xp, a))
    df = staticmethod(lambda xp, a, out: xp.where(a == 0, 0.5, i0_array(xp, a) - out * _safe_reciprocal(xp, a)))


class I1e(UnaryFunction):
    """i1e; its derivative i0e(x) - i1e(x) (sign(x) + 1/x) is 1/2 at 0."""

    f = staticmethod(lambda xp, a: i1e_array(xp, a))
    df = staticmethod(lambda xp, a, out: xp.where(
        a == 0, 0.5, i0e_array(xp, a) - out * (xp.sign(a) + _safe_reciprocal(xp, a))))


def _sinc_slope(xp: Any, a: Any, out: Any) -> Any:
    """d/dx sin(pi x)/(pi x) = (cos(pi x) - sinc(x)) / x, 0 at x = 0."""
    return xp.where(a == 0, 0.0, (xp.cos(math.pi * a) - out) * _safe_reciprocal(xp, a))


@_quiet
def _sinc(xp: Any, a: Any) -> Any:
    """sin(pi x) / (pi x), 1 at 0 (NaN at +-inf, as PyTorch); half precision computes in float64."""
    return xp.sinc(a) if a.dtype.itemsize >= 4 else _narrow(xp.sinc(_wide(xp, a)), a)


class Sinc(UnaryFunction):
    """sin(pi x) / (pi x); its derivative (cos(pi x) - sinc(x)) / x, 0 at 0."""

    f = staticmethod(_sinc)
    df = staticmethod(_sinc_slope)


class Entr(UnaryFunction):
    """-x log x (0 at 0, -inf for x < 0); its derivative -(1 + log x)."""

    @staticmethod
    def f(xp: Any, a: Any) -> Any:
        out = xp.where(a > 0, -a * xp.log(xp.where(a > 0, a, 1)), xp.where(a == 0, 0, -math.inf))
        return xp.where(xp.isnan(a), a, out).astype(a.dtype, copy=False)

    @staticmethod
    def df(xp: Any, a: Any, out: Any) -> Any:
        return -(1 + xp.log(a))


class Logit(Function):
    """log(z / (1 - z)) with z = x clamped to [eps, 1 - eps] when eps is given (PyTorch's logit).
    Gradient 1/(x (1 - x)); outside [eps, 1 - eps] it is 0, and NaN outside [0, 1] without eps."""

    @staticmethod
    def forward(ctx: Context, a: Any, eps: float | None) -> Any:
        xp = ctx.xp
        ctx.save_for_backward(a)
        ctx.eps = eps
        z = a if eps is None else xp.clip(a, eps, 1 - eps)
        return xp.log(z / (1 - z))

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        xp = ctx.xp
        (a,) = ctx.saved_tensors
        grad = g / (a * (1 - a))
        if ctx.eps is None:  # +inf at the ends 0 and 1 (also at -0, where the line above gives -inf)
            grad = xp.where((a < 0) | (a > 1), math.nan, xp.where((a == 0) | (a == 1), g * math.inf, grad))
        else:
            grad = xp.where((a < ctx.eps) | (a > 1 - ctx.eps), 0, grad)
        return grad, None


# ------------------------------------------------------------------ binary Functions


class _XLog(Function):
    """x f(y) for f = log (Xlogy) or log1p (Xlog1py): 0 where x == 0 (unless y is NaN), as
    PyTorch's xlogy and special.xlog1py. The subclass names ``log`` (the ufunc) and ``shift``
    (f'(y) = 1 / (y + shift))."""

    log = "log"
    shift = 0

    @staticmethod
    def forward(ctx: Context, a: Any, b: Any) -> Any:
        xp = ctx.xp
        ctx.save_for_backward(a, b)
        out = xp.where(a == 0, 0, a * getattr(xp, ctx.fn.log)(b))
        return xp.where(xp.isnan(b), b, out).astype(out.dtype, copy=False)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        xp = ctx.xp
        a, b = ctx.saved_tensors
        need = ctx.needs_input_grad
        ga = g * xp.where(xp.isnan(b), b, xp.where(a == 0, 0, getattr(xp, ctx.fn.log)(b))) if need[0] else None
        gb = g * a / (b + ctx.fn.shift) if need[1] else None
        return ga, gb


class Xlogy(_XLog):
    """x log(y), 0 where x == 0 (unless y is NaN), as PyTorch's xlogy."""


class Xlog1py(_XLog):
    """x log1p(y), 0 where x == 0 (unless y is NaN), as PyTorch's special.xlog1py."""

    log = "log1p"
    shift = 1


class Hypot(Function):
    """sqrt(a^2 + b^2) without overflow; gradients a / out and b / out."""

    @staticmethod
    def forward(ctx: Context, a: Any, b: Any) -> Any:
        out = ctx.xp.hypot(a, b)
        ctx.save_for_backward(a, b, out)
        return out

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        a, b, out = ctx.saved_tensors
        return g * a / out, g * b / out


class LogAddExp2(LogAddExp):
    """log2(2^a + 2^b); gradients g / (1 + 2^(b - a)) and g / (1 + 2^(a - b)): LogAddExp in base 2."""

    ufunc, exp = "logaddexp2", "exp2"


class Fmax(Function):
    """The larger of a and b, ignoring a NaN (NaN only where both are). The gradient goes to a where
    a >= b or b is NaN, else to b, as PyTorch."""

    @staticmethod
    def forward(ctx: Context, a: Any, b: Any) -> Any:
        ctx.save_for_backward(a, b)
        return ctx.xp.fmax(a, b)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        xp = ctx.xp
        a, b = ctx.saved_tensors
        to_a = (a >= b) | xp.isnan(b)
        return xp.where(to_a, g, 0), xp.where(to_a, 0, g)


class Fmin(Function):
    """The smaller of a and b, ignoring a NaN; the gradient goes to a where a <= b or b is NaN."""

    @staticmethod
    def forward(ctx: Context, a: Any, b: Any) -> Any:
        ctx.save_for_backward(a, b)
        return ctx.xp.fmin(a, b)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        xp = ctx.xp
        a, b = ctx.saved_tensors
        to_a = (a <= b) | xp.isnan(b)
        return xp.where(to_a, g, 0), xp.where(to_a, 0, g)


class Heaviside(Function):
    """0 for x < 0, values for x == 0, 1 for x > 0. PyTorch defines no derivative."""

    @staticmethod
    def forward(ctx: Context, a: Any, values: Any) -> Any:
        xp = ctx.xp
        return xp.where(a == 0, values, (a > 0)).astype(xp.result_type(a, values), copy=False)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        raise RuntimeError("heaviside: the derivative is not implemented, as in PyTorch; detach the inputs first")


class NextAfter(Function):
    """The next float after a toward b. As PyTorch, the gradient passes to a unchanged where
    a != b (0 where they are equal) and b gets none."""

    @staticmethod
    def forward(ctx: Context, a: Any, b: Any) -> Any:
        ctx.save_for_backward(a, b)
        return ctx.xp.nextafter(a, b)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        xp = ctx.xp
        a, b = ctx.saved_tensors
        return xp.where(a == b, 0, g), (xp.zeros_like(g) if ctx.needs_input_grad[1] else None)


class Zeta(Function):
    """The Hurwitz zeta function zeta(x, q); PyTorch differentiates it in q only:
    d/dq = -x zeta(x + 1, q)."""

    @staticmethod
    def forward(ctx: Context, x: Any, q: Any) -> Any:
        ctx.save_for_backward(x, q)
        out = zeta_array(ctx.xp, x, q)
        return out.astype(ctx.xp.result_type(x, q), copy=False)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        if ctx.needs_input_grad[0]:
            raise NotImplementedError(
                "special.zeta: the derivative with respect to x (the first argument) is not implemented, as in "
                "PyTorch; detach x or differentiate in q only"
            )
        x, q = ctx.saved_tensors
        return None, g * (-x * zeta_array(ctx.xp, x + 1, q))


class Frexp(Function):
    """(mantissa, exponent) with x = mantissa * 2^exponent, |mantissa| in [0.5, 1); the exponent
    is int32. The mantissa's gradient is g / 2^exponent, as PyTorch."""

    @staticmethod
    def forward(ctx: Context, a: Any) -> tuple:
        xp = ctx.xp
        mantissa, exponent = xp.frexp(a)
        exponent = exponent.astype(xp.int32)
        ctx.save_for_backward(exponent)
        return mantissa.astype(a.dtype, copy=False), exponent

    @staticmethod
    def backward(ctx: Context, g: Any, _g_exponent: Any) -> Any:
        (exponent,) = ctx.saved_tensors
        return ctx.xp.ldexp(g, -exponent)  # g / 2^exponent, exact  # a subnormal x: 2^-exponent beyond float64 is a true inf
