"""SGD and Adam updates (csrc/optim.cu) against tinyflow/kernels/optim.py."""
from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from kernel_backend import FLOATS, SETTINGS, reference, run, tol


# ---- optimizers ----------------------------------------------------------------------------------
@SETTINGS
@given(n=st.integers(1, 700), dtype=FLOATS, seed=st.integers(0, 99),
       momentum=st.sampled_from([0.0, 0.9]), dampening=st.sampled_from([0.0, 0.3]),
       weight_decay=st.sampled_from([0.0, 1e-2]), nesterov=st.booleans(), first=st.booleans())
def test_sgd_momentum_update_matches_reference(emu, n, dtype, seed, momentum, dampening,
                                               weight_decay, nesterov, first):
    rng = np.random.default_rng(seed)
    p, g, buf = (rng.standard_normal(n).astype(dtype) for _ in range(3))
    p_ref, buf_ref = p.copy(), buf.copy()
    kw = dict(momentum=momentum, dampening=dampening, weight_decay=weight_decay,
              nesterov=nesterov, first_step=first)
    reference("sgd_momentum_update")(p_ref, g, buf_ref if momentum else None, 0.1, **kw)
    assert run(emu, "sgd_momentum_update", p, g, buf if momentum else None, 0.1, **kw) is None
    np.testing.assert_allclose(p, p_ref, **tol(dtype))
    np.testing.assert_allclose(buf, buf_ref, **tol(dtype))


@SETTINGS
@given(n=st.integers(1, 700), dtype=FLOATS, seed=st.integers(0, 99), step=st.integers(1, 50),
       weight_decay=st.sampled_from([0.0, 1e-2]), amsgrad=st.booleans(),
       decoupled=st.booleans(), beta1=st.sampled_from([0.9, 0.3]))
def test_adam_update_matches_reference(emu, n, dtype, seed, step, weight_decay, amsgrad,
                                       decoupled, beta1):
    rng = np.random.default_rng(seed)
    p, g, m = (rng.standard_normal(n).astype(dtype) for _ in range(3))
    v, vmax = (rng.uniform(0, 1, n).astype(dtype) for _ in range(2))
    states = [a.copy() for a in (p, m, v, vmax)]
    kw = dict(beta1=beta1, beta2=0.999, eps=1e-8, weight_decay=weight_decay, amsgrad=amsgrad,
              decoupled_weight_decay=decoupled)
    reference("adam_update")(states[0], g, states[1], states[2], states[3], step, 1e-3, **kw)
    run(emu, "adam_update", p, g, m, v, vmax, step, 1e-3, **kw)
    for got, want in zip((p, m, v, vmax), states):
        np.testing.assert_allclose(got, want, **tol(dtype))
