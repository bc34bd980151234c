"""SGD and Adam updates (csrc/optim.cu) against tinyflow/kernels/optim.py: the per-tensor kernels
and the multi-tensor ones (one launch per dtype over a table of tensors), in every dtype."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernel_backend import FLOATS, SETTINGS, reference, run, tol
from tinyflow.dtypes import bfloat16
from tinyflow_cuda.kernels import optim as twin

pytest.importorskip("ml_dtypes")
BF16 = bfloat16()
HALVES = st.sampled_from([np.dtype(np.float16), BF16])
ALL_FLOATS = st.sampled_from([np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.float16), BF16])
# sizes around the 4096-element chunk and the 256-thread block, empty ones included
SIZES = st.lists(st.one_of(st.integers(0, 300), st.sampled_from([255, 256, 257, 4095, 4096, 4097, 8300])),
                 min_size=0, max_size=5)


def _is_half(dtype) -> bool:
    return np.dtype(dtype).itemsize == 2


def _half_tol(dtype) -> dict:
    """One rounding of the half dtype (the kernel and the float32 reference may round apart)."""
    eps = float(np.finfo(np.float16).eps) if np.dtype(dtype) == np.float16 else 2.0**-7
    return {"rtol": 2 * eps, "atol": eps}


# ---- per tensor ----------------------------------------------------------------------------------
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


@SETTINGS
@given(n=st.integers(1, 700), dtype=HALVES, seed=st.integers(0, 99), sgd=st.booleans(),
       nesterov=st.booleans(), decoupled=st.booleans())
def test_per_tensor_half_updates_compute_in_float32(emu, n, dtype, seed, sgd, nesterov, decoupled):
    """A half-precision call computes in float32 and rounds each stored value once: the float32
    reference's result rounded, within one rounding of the half dtype."""
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(n).astype(dtype) for _ in range(3)] + [
        rng.uniform(0.1, 1, n).astype(dtype) for _ in range(2)]
    wide = [a.astype(np.float32) for a in arrays]
    if sgd:
        kw = dict(momentum=0.9, dampening=0.0, weight_decay=1e-2, nesterov=nesterov, first_step=False)
        reference("sgd_momentum_update")(wide[0], wide[1], wide[2], 0.01, **kw)
        run(emu, "sgd_momentum_update", arrays[0], arrays[1], arrays[2], 0.01, **kw)
        checked = (0, 2)
    else:
        kw = dict(weight_decay=1e-2, amsgrad=True, decoupled_weight_decay=decoupled)
        reference("adam_update")(wide[0], wide[1], wide[2], wide[3], wide[4], 3, 1e-2, **kw)
        run(emu, "adam_update", *arrays, 3, 1e-2, **kw)
        checked = (0, 2, 3, 4)
    assert emu.launches[-1].endswith("_f16" if dtype == np.float16 else "_bf16")
    for i in checked:
        np.testing.assert_allclose(arrays[i].astype(np.float32), wide[i], **_half_tol(dtype))


# ---- multi-tensor --------------------------------------------------------------------------------
def _tensors(rng, sizes, dtype, residuals):
    """params, grads and (for half params, where asked) float32 residuals of the given sizes."""
    params = [rng.standard_normal(n).astype(dtype) for n in sizes]
    grads = [rng.standard_normal(n).astype(dtype) for n in sizes]
    res = None
    if residuals:
        res = [(rng.standard_normal(n) * 1e-3).astype(np.float32) if _is_half(dtype) else None
               for n in sizes]
    return params, grads, res


def _state_dtype(dtype):
    return np.dtype(np.float32) if _is_half(dtype) else np.dtype(dtype)


def _copies(arrays):
    return None if arrays is None else [None if a is None else a.copy() for a in arrays]


def _master(p, r):
    return p.astype(np.float32) + (0 if r is None else r)


def _assert_params_match(dtype, params, residuals, want_params, want_residuals):
    """Full precision: each param as the reference's. Half: the float32 master weight (param +
    residual) as the reference's, and the param within one rounding of it."""
    for i, (got, want) in enumerate(zip(params, want_params)):
        if not _is_half(dtype):
            np.testing.assert_allclose(got, want, **tol(dtype), err_msg=f"param {i}")
            continue
        r = None if residuals is None else residuals[i]
        r_want = None if want_residuals is None else want_residuals[i]
        np.testing.assert_allclose(_master(got, r), _master(want, r_want), **tol(np.float32),
                                   err_msg=f"master weight {i}")
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32),
                                   **_half_tol(dtype), err_msg=f"param {i}")


def _assert_states_match(dtype, got_states, want_states):
    for name, got, want in zip("abcd", got_states, want_states):
        if got is None:
            continue
        for i, (a, b) in enumerate(zip(got, want)):
            if a is not None:
                np.testing.assert_allclose(a, b, **tol(_state_dtype(dtype)), err_msg=f"state {name}[{i}]")


def _assert_one_launch_per_dtype(emu, name, sizes, dtype):
    launched = [k for k in emu.launches if k.startswith(name)]
    expected = 1 if any(sizes) else 0
    assert len(launched) == expected, f"{len(launched)} launches of {name} for sizes {sizes}"


@SETTINGS
@given(sizes=SIZES, dtype=ALL_FLOATS, seed=st.integers(0, 99), momentum=st.sampled_from([0.0, 0.9]),
       dampening=st.sampled_from([0.0, 0.3]), weight_decay=st.sampled_from([0.0, 1e-2]),
       nesterov=st.booleans(), maximize=st.booleans(), first=st.booleans(), residuals=st.booleans())
def test_sgd_multi_tensor_update_matches_reference(emu, sizes, dtype, seed, momentum, dampening,
                                                   weight_decay, nesterov, maximize, first, residuals):
    rng = np.random.default_rng(seed)
    params, grads, res = _tensors(rng, sizes, dtype, residuals)
    bufs = [rng.standard_normal(n).astype(_state_dtype(dtype)) for n in sizes] if momentum else None
    want = (_copies(params), _copies(bufs), _copies(res))
    kw = dict(momentum=momentum, dampening=dampening, weight_decay=weight_decay,
              nesterov=nesterov and momentum > 0 and dampening == 0, maximize=maximize, first_step=first)
    reference("sgd_multi_tensor_update")(want[0], grads, want[1], want[2], 0.1, **kw)
    out = run(emu, "sgd_multi_tensor_update", params, grads, bufs, res, 0.1,
              expect_kernel=any(sizes), **kw)
    assert out is None
    _assert_one_launch_per_dtype(emu, "sgd_multi_tensor_update", sizes, dtype)
    _assert_params_match(dtype, params, res, want[0], want[2])
    _assert_states_match(dtype, [bufs], [want[1]])


@SETTINGS
@given(sizes=SIZES, dtype=ALL_FLOATS, seed=st.integers(0, 99), step=st.integers(1, 50),
       weight_decay=st.sampled_from([0.0, 1e-2]), amsgrad=st.booleans(), decoupled=st.booleans(),
       beta1=st.sampled_from([0.9, 0.3]), maximize=st.booleans(), residuals=st.booleans())
def test_adam_multi_tensor_update_matches_reference(emu, sizes, dtype, seed, step, weight_decay,
                                                    amsgrad, decoupled, beta1, maximize, residuals):
    rng = np.random.default_rng(seed)
    params, grads, res = _tensors(rng, sizes, dtype, residuals)
    sd = _state_dtype(dtype)
    m = [rng.standard_normal(n).astype(sd) for n in sizes]
    v, vmax = ([rng.uniform(0, 1, n).astype(sd) for n in sizes] for _ in range(2))
    if not amsgrad and seed % 2:
        vmax = None  # the list may be left out without amsgrad
    want = [_copies(a) for a in (params, m, v, vmax, res)]
    kw = dict(beta1=beta1, beta2=0.999, eps=1e-8, weight_decay=weight_decay, amsgrad=amsgrad,
              decoupled_weight_decay=decoupled, maximize=maximize)
    reference("adam_multi_tensor_update")(want[0], grads, *want[1:], step, 1e-2, **kw)
    run(emu, "adam_multi_tensor_update", params, grads, m, v, vmax, res, step, 1e-2,
        expect_kernel=any(sizes), **kw)
    _assert_one_launch_per_dtype(emu, "adam_multi_tensor_update", sizes, dtype)
    _assert_params_match(dtype, params, res, want[0], want[4])
    _assert_states_match(dtype, [m, v, vmax], want[1:4])


def test_multi_tensor_update_launches_once_per_dtype_and_leaves_the_rest_to_the_reference(emu):
    """A mixed list: one launch per dtype; a strided parameter and an int one go to the reference
    (and still get their update)."""
    rng = np.random.default_rng(0)
    dtypes = [np.float32, BF16, np.float32, np.float64, np.float16, BF16]
    params = [rng.standard_normal(300 + 7 * i).astype(dt) for i, dt in enumerate(dtypes)]
    params.append(rng.standard_normal((20, 2)).astype(np.float32)[:, 0])  # strided
    grads = [rng.standard_normal(p.shape).astype(p.dtype) for p in params]
    bufs = [np.zeros(p.shape, _state_dtype(p.dtype)) for p in params]
    want = _copies(params), _copies(bufs)
    reference("sgd_multi_tensor_update")(want[0], grads, want[1], None, 0.1, momentum=0.9)
    run(emu, "sgd_multi_tensor_update", params, grads, bufs, None, 0.1, momentum=0.9)
    assert sorted(emu.launches) == ["sgd_multi_tensor_update_bf16", "sgd_multi_tensor_update_f16",
                                    "sgd_multi_tensor_update_f32", "sgd_multi_tensor_update_f64"]
    for got, ref, dt in zip(params, want[0], dtypes + [np.float32]):
        np.testing.assert_allclose(got.astype(np.float32), ref.astype(np.float32),
                                   **(_half_tol(dt) if _is_half(dt) else tol(np.float32)))


def test_pointer_table_is_uploaded_once_while_the_tensors_stay_put(emu):
    """The parameters' and states' table is cached by its addresses; a step with the same
    gradient arrays uploads nothing, new gradient arrays upload only their own small table."""
    if emu.kind != "emulator":
        pytest.skip("counts the emulator's uploads")
    rng = np.random.default_rng(1)
    params = [rng.standard_normal(n).astype(np.float32) for n in (10, 5000, 3)]
    grads = [rng.standard_normal(p.shape).astype(np.float32) for p in params]
    m, v = ([np.zeros_like(p) for p in params] for _ in range(2))
    run(emu, "adam_multi_tensor_update", params, grads, m, v, None, None, 1, 1e-3)
    before = twin.TABLES.uploads
    run(emu, "adam_multi_tensor_update", params, grads, m, v, None, None, 2, 1e-3)
    assert twin.TABLES.uploads == before  # same tensors, same gradients: nothing uploaded
    new_grads = [g.copy() for g in grads]
    run(emu, "adam_multi_tensor_update", params, new_grads, m, v, None, None, 3, 1e-3)
    assert twin.TABLES.uploads == before + 1  # the gradients' table only
    assert emu.launches == ["adam_multi_tensor_update_f32"]


def test_multi_tensor_update_refuses_mismatched_lists(emu):
    p = [np.zeros(3, np.float32), np.zeros(4, np.float32)]
    with pytest.raises(ValueError, match=r"sgd_multi_tensor_update: 2 params but 1 grads"):
        run(emu, "sgd_multi_tensor_update", p, p[:1], None, None, 0.1, expect_kernel=False)
    with pytest.raises(ValueError, match=r"grads\[1\] has shape \(5,\) but params\[1\] has shape \(4,\)"):
        run(emu, "sgd_multi_tensor_update", p, [p[0], np.zeros(5, np.float32)], None, None, 0.1,
            expect_kernel=False)
    with pytest.raises(ValueError, match="amsgrad=True needs a max_exp_avg_sq"):
        run(emu, "adam_multi_tensor_update", p, p, p, p, None, None, 1, 0.1, amsgrad=True,
            expect_kernel=False)


# ---- device scalars and found_inf (a CUDA graph's captured step) ---------------------------------
@SETTINGS
@given(sizes=SIZES, dtype=ALL_FLOATS, seed=st.integers(0, 99), step=st.integers(1, 50),
       adam=st.booleans(), skip=st.booleans())
def test_multi_tensor_updates_read_scalars_and_found_inf_from_device_arrays(emu, sizes, dtype, seed,
                                                                            step, adam, skip):
    """With ``scalars`` the kernels ignore their scalar arguments (here wrong on purpose) and give
    exactly the update of the right ones; a non-zero ``found_inf`` leaves everything untouched.
    The reference reads the same arrays the same way."""
    from tinyflow.kernels.optim import adam_step_scalars, sgd_step_scalars

    rng = np.random.default_rng(seed)
    params, grads, res = _tensors(rng, sizes, dtype, True)
    sd = _state_dtype(dtype)
    states = [[rng.standard_normal(n).astype(sd) for n in sizes]]
    if adam:
        states.append([rng.uniform(0, 1, n).astype(sd) for n in sizes])
        name, right, wrong = "adam_multi_tensor_update", dict(step=step, lr=1e-2), dict(step=1, lr=5.0)
        kw = dict(beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=1e-2)
        scalars = np.array(adam_step_scalars(1e-2, 0.9, 0.999, 1e-8, 1e-2, step), np.float64)
        wrong_kw = dict(beta1=0.5, beta2=0.5, eps=1.0, weight_decay=0.0)
        lists = lambda ps, ss, rs: (ps, grads, ss[0], ss[1], None, rs)  # noqa: E731
    else:
        name, right, wrong = "sgd_multi_tensor_update", dict(lr=0.1), dict(lr=5.0)
        kw = dict(momentum=0.9, dampening=0.1, weight_decay=1e-2)
        scalars = np.array(sgd_step_scalars(0.1, 0.9, 0.1, 1e-2), np.float64)
        wrong_kw = dict(momentum=0.5, dampening=0.0, weight_decay=0.0)
        lists = lambda ps, ss, rs: (ps, grads, ss[0], rs)  # noqa: E731
    found = np.array([1.0 if skip else 0.0], np.float32)
    copies = lambda: (_copies(params), [_copies(s) for s in states], _copies(res))  # noqa: E731
    by_args, by_pointer, ref_args, ref_pointer = copies(), copies(), copies(), copies()
    if not skip:
        run(emu, name, *lists(*by_args), **right, **kw, expect_kernel=any(sizes))
        reference(name)(*lists(*ref_args), **right, **kw)
    run(emu, name, *lists(*by_pointer), **wrong, **wrong_kw, scalars=scalars, found_inf=found,
        expect_kernel=any(sizes))
    reference(name)(*lists(*ref_pointer), **wrong, **wrong_kw, scalars=scalars, found_inf=found)

    def flat(arrays):
        return [a for a in arrays[0] + arrays[2] + sum(arrays[1], []) if a is not None]

    for got, want in ((by_pointer, by_args), (ref_pointer, ref_args)):
        for a, b in zip(flat(got), flat(want)):
            np.testing.assert_array_equal(a, b)  # the same arithmetic, the same values


@SETTINGS
@given(found=st.lists(st.booleans(), min_size=1, max_size=12), interval=st.integers(1, 4),
       init=st.sampled_from([1.0, 1024.0, 3.0e38, 3.0]), backoff=st.sampled_from([0.5, 0.25]))
def test_amp_update_scale_matches_reference_and_the_rule(emu, found, interval, init, backoff):
    """GradScaler's rule on the device: back off after an overflow, grow after ``interval`` clean
    steps unless the float32 scale would overflow; the kernel, the reference and a Python model
    agree step by step."""
    scale, tracker = np.array([init], np.float32), np.array([0], np.int32)
    ref_scale, ref_tracker = scale.copy(), tracker.copy()
    model_scale, model_clean = float(np.float32(init)), 0
    for f in found:
        flag = np.array([1.0 if f else 0.0], np.float32)
        run(emu, "amp_update_scale", scale, tracker, flag, 2.0, backoff, interval)
        reference("amp_update_scale")(ref_scale, ref_tracker, flag, 2.0, backoff, interval)
        if f:
            model_scale, model_clean = float(np.float32(model_scale * backoff)), 0
        else:
            model_clean += 1
            if model_clean == interval:
                if model_scale * 2.0 <= float(np.finfo(np.float32).max):
                    model_scale = float(np.float32(model_scale * 2.0))
                model_clean = 0
        assert scale[0] == ref_scale[0] == model_scale and tracker[0] == ref_tracker[0] == model_clean
