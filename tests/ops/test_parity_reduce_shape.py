"""Parity sweep against PyTorch for reductions, scans, sorting, shape and indexing ops and Tensor
``__getitem__`` / ``__setitem__``, in the style of an OpInfo sweep: every op runs on every input
variant (0-d, empty, non-contiguous, int32/int64/uint8/bool, float32/float64, NaN/inf, huge and
tiny magnitudes, ties). Where torch returns a result, tinyflow must return the same shape, dtype,
values and (for float inputs) gradients; where torch raises, tinyflow must raise the same
exception class from its own code (not from deep inside NumPy). Float64 gradchecks (hypothesis)
cover the differentiable ops on random shapes."""
from __future__ import annotations

import os
import traceback
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tinyflow as tf
from tinyflow.testing import gradcheck

torch = pytest.importorskip("torch")

NUMPY_DIR = os.path.dirname(np.__file__)


# ------------------------------------------------------------------------------------------ inputs
def _inputs() -> dict[str, tuple[np.ndarray, object]]:
    """name: (array, pre) where ``pre(x)`` (applied in both frameworks) makes the op's input."""
    rng = np.random.default_rng(0)
    f = rng.standard_normal((3, 4))
    special = f.copy()
    special[0, 1], special[1, 2], special[2, 0], special[2, 3] = np.nan, np.inf, -np.inf, np.nan
    ties = np.array([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 2.0, 2.0], [-1.0, 5.0, -1.0, 5.0]])
    return {
        "f32": (f.astype(np.float32), None),
        "f16": (f.astype(np.float16), None),
        "f64_3d": (rng.standard_normal((2, 3, 4)), None),
        "f64_1d": (rng.standard_normal(5), None),
        "scalar": (np.array(0.75), None),
        "empty_rows": (np.zeros((0, 4), np.float32), None),
        "empty_cols": (np.zeros((3, 0)), None),
        "transposed": (rng.standard_normal((4, 3)), lambda x: x.t()),
        "strided": (rng.standard_normal((3, 8)), lambda x: x[:, ::2]),
        "int64": (rng.integers(-5, 6, (3, 4)).astype(np.int64), None),
        "int32": (rng.integers(-5, 6, (3, 4)).astype(np.int32), None),
        "uint8": (rng.integers(0, 6, (3, 4)).astype(np.uint8), None),
        "bool": (rng.random((3, 4)) < 0.5, None),
        "nan_inf": (special, None),
        "ties": (ties, None),
        "huge": ((f * 1e30).astype(np.float32), None),
        "tiny": (f * 1e-300, None),
    }


INPUTS = _inputs()


def _ix(m, shape, high, seed=1):
    """A deterministic int64 index tensor of ``shape`` with entries in [0, high) (0 when high is 0)."""
    arr = np.random.default_rng(seed).integers(0, max(high, 1), shape).astype(np.int64)
    return m.tensor(arr)


def _perm(m, shape, dim):
    """An int64 index of ``shape`` that is a permutation along ``dim`` (no position written twice)."""
    arr = np.argsort(np.random.default_rng(3).random(shape), axis=dim) if len(shape) else np.zeros((), np.int64)
    return m.tensor(arr.astype(np.int64))


def _dim_size(x, d):
    return x.shape[d] if x.ndim else 1


def _inplace(method, *args_of):
    """y = x.clone(); y.<method>(*args) (args computed from m and x); returns y."""
    def fn(m, x):
        y = x.clone()
        out = getattr(y, method)(*(f(m, x) for f in args_of))
        assert out is y
        return y

    return fn


def _chained_setitem(m, x):
    y = x.clone()
    y[1][0] = x.reshape(-1)[0] * 3  # a write through the view y[1] reaches y
    return y


def _setitem(index, value_of):
    def fn(m, x):
        y = x.clone()
        y[index(m, x)] = value_of(m, x)
        return y

    return fn


# ------------------------------------------------------------------------------------------ ops
# name: fn(m, x) with m the module (tinyflow or torch) and x the input tensor.
OPS = {
    # reductions
    "sum": lambda m, x: x.sum(),
    "sum_dim0": lambda m, x: x.sum(0),
    "sum_neg_keepdim": lambda m, x: x.sum(-1, keepdim=True),
    "sum_dims": lambda m, x: x.sum((0, -1)),
    "sum_dim_out_of_range": lambda m, x: x.sum(3),
    "sum_empty_dims": lambda m, x: x.sum(dim=()),
    "amax_empty_dims": lambda m, x: x.amax(dim=()),
    "mean_empty_dims": lambda m, x: x.mean(dim=[]),
    "sum_dtype": lambda m, x: x.sum(dtype=m.float64),
    "sum_fn_axis": lambda m, x: m.sum(x, dim=[0]),
    "mean": lambda m, x: x.mean(),
    "mean_dim": lambda m, x: x.mean(-1),
    "mean_keepdim": lambda m, x: x.mean((0,), keepdim=True),
    "mean_dtype": lambda m, x: x.mean(dtype=m.float64),
    "prod": lambda m, x: x.prod(),
    "prod_dim": lambda m, x: x.prod(0),
    "prod_keepdim": lambda m, x: x.prod(-1, keepdim=True),
    "prod_dtype": lambda m, x: x.prod(dtype=m.float64),
    "var": lambda m, x: x.var(),
    "var_dim": lambda m, x: x.var(0),
    "var_unbiased_false": lambda m, x: x.var(-1, unbiased=False),
    "var_correction": lambda m, x: x.var(-1, correction=0, keepdim=True),
    "var_correction2": lambda m, x: x.var(0, correction=2),
    "std": lambda m, x: x.std(),
    "std_dim": lambda m, x: x.std(-1, keepdim=True),
    "std_correction": lambda m, x: x.std(0, correction=0),
    "var_mean": lambda m, x: m.var_mean(x, 0),
    "var_mean_all": lambda m, x: m.var_mean(x),
    "std_mean": lambda m, x: m.std_mean(x, -1, keepdim=True),
    "std_mean_correction": lambda m, x: m.std_mean(x, 0, correction=0),
    "amax": lambda m, x: x.amax(),
    "amax_dim": lambda m, x: x.amax(0),
    "amax_dims": lambda m, x: x.amax((0, -1), keepdim=True),
    "amin": lambda m, x: x.amin(),
    "amin_dim": lambda m, x: x.amin(-1),
    "max": lambda m, x: x.max(),
    "max_dim": lambda m, x: x.max(0),
    "max_dim_keepdim": lambda m, x: x.max(-1, keepdim=True),
    "max_fn_dim": lambda m, x: m.max(x, dim=0),
    "max_two": lambda m, x: m.max(x, x.flip(0)),
    "min": lambda m, x: x.min(),
    "min_dim": lambda m, x: x.min(0),
    "min_dim_keepdim": lambda m, x: x.min(-1, keepdim=True),
    "min_two": lambda m, x: x.min(x.flip(-1)),
    "argmax": lambda m, x: x.argmax(),
    "argmax_dim": lambda m, x: x.argmax(0),
    "argmax_keepdim": lambda m, x: x.argmax(-1, keepdim=True),
    "argmin": lambda m, x: x.argmin(),
    "argmin_dim": lambda m, x: x.argmin(-1),
    "argmin_keepdim": lambda m, x: m.argmin(x, 0, keepdim=True),
    "logsumexp": lambda m, x: x.logsumexp(-1),
    "logsumexp_dims": lambda m, x: m.logsumexp(x, (0, -1)),
    "logsumexp_keepdim": lambda m, x: x.logsumexp(0, keepdim=True),
    "norm": lambda m, x: x.norm(),
    "norm_1": lambda m, x: x.norm(1),
    "norm_inf_dim": lambda m, x: x.norm(float("inf"), dim=0),
    "norm_3_keepdim": lambda m, x: x.norm(p=3, dim=-1, keepdim=True),
    "norm_0": lambda m, x: x.norm(0),
    "norm_fn": lambda m, x: m.norm(x, dim=-1),
    "all": lambda m, x: x.all(),
    "all_dim": lambda m, x: x.all(0),
    "any": lambda m, x: x.any(),
    "any_dim_keepdim": lambda m, x: x.any(-1, keepdim=True),
    "count_nonzero": lambda m, x: x.count_nonzero(),
    "count_nonzero_dim": lambda m, x: m.count_nonzero(x, dim=0),
    "count_nonzero_dims": lambda m, x: x.count_nonzero((0, -1)),
    "median": lambda m, x: x.median(),
    "median_dim": lambda m, x: x.median(0),
    "median_dim_keepdim": lambda m, x: x.median(-1, keepdim=True),
    "kthvalue": lambda m, x: x.kthvalue(1),
    "kthvalue_dim": lambda m, x: x.kthvalue(2, 0),
    "kthvalue_keepdim": lambda m, x: x.kthvalue(2, -1, keepdim=True),
    "kthvalue_too_large": lambda m, x: x.kthvalue(9, -1),
    # dims out of range
    "cumsum_bad_dim": lambda m, x: x.cumsum(4),
    "sort_bad_dim": lambda m, x: x.sort(dim=-4, stable=True),
    "argmax_bad_dim": lambda m, x: x.argmax(4),
    "transpose_bad_dim": lambda m, x: x.transpose(0, 4),
    "select_bad_dim": lambda m, x: x.select(4, 0),
    "select_bad_index": lambda m, x: x.select(0, -9),
    "unbind_bad_dim": lambda m, x: x.unbind(4),
    "gather_bad_dim": lambda m, x: x.gather(4, _ix(m, x.shape, 1)),
    "topk_bad_dim": lambda m, x: x.topk(1, 4),
    "movedim_repeated": lambda m, x: x.movedim((0, 0), (0, 1)),
    "diagonal_same_dims": lambda m, x: x.diagonal(0, 0, 0),
    "cat_empty_list": lambda m, x: m.cat([]),
    "stack_empty_list": lambda m, x: m.stack([]),
    # scans
    "cumsum": lambda m, x: x.cumsum(0),
    "cumsum_neg": lambda m, x: x.cumsum(-1),
    "cumsum_dtype": lambda m, x: x.cumsum(0, dtype=m.float64),
    "cumprod": lambda m, x: x.cumprod(-1),
    "cumprod_dim0": lambda m, x: m.cumprod(x, 0),
    "cummax": lambda m, x: x.cummax(0),
    "cummax_neg": lambda m, x: x.cummax(-1),
    "cummin": lambda m, x: x.cummin(-1),
    "logcumsumexp": lambda m, x: x.logcumsumexp(-1),
    "logcumsumexp_dim0": lambda m, x: m.logcumsumexp(x, 0),
    # sorting
    "sort": lambda m, x: x.sort(stable=True),
    "sort_desc_dim0": lambda m, x: x.sort(dim=0, descending=True, stable=True),
    "argsort": lambda m, x: x.argsort(stable=True),
    "argsort_desc": lambda m, x: m.argsort(x, dim=0, descending=True, stable=True),
    "msort": lambda m, x: m.msort(x),
    "topk": lambda m, x: x.topk(1),
    "topk_dim0_smallest": lambda m, x: x.topk(2, 0, largest=False),
    "topk_too_large": lambda m, x: x.topk(9),
    "unique": lambda m, x: x.unique(),
    "unique_inverse_counts": lambda m, x: m.unique(x, return_inverse=True, return_counts=True),
    "unique_dim0": lambda m, x: x.unique(dim=0),
    "unique_dim_inverse_counts": lambda m, x: m.unique(x, return_inverse=True, return_counts=True, dim=-1),
    # shape
    "reshape": lambda m, x: x.reshape(-1),
    "reshape_2": lambda m, x: x.reshape(2, -1),
    "reshape_bad": lambda m, x: x.reshape(5, 7),
    "reshape_two_minus_one": lambda m, x: x.reshape(-1, -1),
    "reshape_zero_minus_one": lambda m, x: x.reshape(0, -1),
    "view": lambda m, x: x.view(-1, 2),
    "flatten": lambda m, x: x.flatten(),
    "flatten_range": lambda m, x: x.flatten(0, -2),
    "flatten_fn": lambda m, x: m.flatten(x, 1),
    "unflatten": lambda m, x: x.unflatten(-1, (2, -1)),
    "squeeze": lambda m, x: x.unsqueeze(0).squeeze(),
    "squeeze_dim": lambda m, x: x.unsqueeze(1).squeeze(1),
    "squeeze_dims": lambda m, x: x.unsqueeze(0).squeeze((0, -1)),
    "squeeze_not_one": lambda m, x: x.squeeze(0),
    "unsqueeze": lambda m, x: x.unsqueeze(0),
    "unsqueeze_neg": lambda m, x: x.unsqueeze(-1),
    "unsqueeze_bad": lambda m, x: x.unsqueeze(5),
    "permute": lambda m, x: x.permute(-1, 0),
    "permute_bad": lambda m, x: x.permute(0, 0),
    "transpose": lambda m, x: x.transpose(0, -1),
    "transpose_fn": lambda m, x: m.transpose(x, 1, 0),
    "t": lambda m, x: x.t(),
    "movedim": lambda m, x: x.movedim(0, -1),
    "movedim_fn": lambda m, x: m.movedim(x, (0, 1), (1, 0)),
    "expand": lambda m, x: x.expand(2, *x.shape),
    "expand_minus_one": lambda m, x: x.unsqueeze(0).expand(3, *([-1] * x.ndim)),
    "expand_bad": lambda m, x: x.expand(7, 7),
    "expand_new_minus_one": lambda m, x: x.expand(-1, *x.shape),
    "expand_as": lambda m, x: x[:1].expand_as(x),
    "repeat": lambda m, x: x.repeat(2, *([1] * x.ndim)),
    "repeat_same": lambda m, x: x.repeat(*([2] * x.ndim)),
    "repeat_too_few": lambda m, x: x.repeat(2),
    "tile": lambda m, x: x.tile(2),
    "tile_fn": lambda m, x: m.tile(x, (2, 1)),
    "repeat_interleave": lambda m, x: x.repeat_interleave(2),
    "repeat_interleave_dim": lambda m, x: x.repeat_interleave(2, dim=0),
    "repeat_interleave_tensor": lambda m, x: x.repeat_interleave(_ix(m, (_dim_size(x, -1),), 3), dim=-1),
    "flip": lambda m, x: x.flip(0),
    "flip_dims": lambda m, x: x.flip(0, -1),
    "flip_fn": lambda m, x: m.flip(x, [-1]),
    "roll": lambda m, x: x.roll(1),
    "roll_dim": lambda m, x: x.roll(-1, 0),
    "roll_dims": lambda m, x: x.roll((1, 2), (0, -1)),
    "narrow": lambda m, x: x.narrow(-1, 1, 2),
    "narrow_neg_start": lambda m, x: x.narrow(0, -1, 1),
    "narrow_fn": lambda m, x: m.narrow(x, 0, 0, 1),
    "select": lambda m, x: x.select(0, 1),
    "select_neg": lambda m, x: x.select(-1, -1),
    "unbind": lambda m, x: x.unbind(0),
    "unbind_neg": lambda m, x: m.unbind(x, -1),
    "chunk": lambda m, x: x.chunk(2, -1),
    "chunk_many": lambda m, x: x.chunk(3, 0),
    "split": lambda m, x: x.split(2, -1),
    "split_sizes": lambda m, x: x.split([1, 2], 0),
    "split_bad_sizes": lambda m, x: x.split([1, 1], 0),
    "chunk_uneven": lambda m, x: x.chunk(3, -1),
    "split_fn": lambda m, x: m.split(x, 1),
    "cat": lambda m, x: m.cat([x, x * 2], 0),
    "cat_neg": lambda m, x: m.cat([x, x[..., :1]], -1),
    "cat_promote": lambda m, x: m.cat([x, m.ones(x.shape, dtype=m.float64)], 0),
    "cat_mixed_dtypes": lambda m, x: m.cat([x, x.to(m.int32), x.to(m.bool)], 0),
    "stack_mixed_dtypes": lambda m, x: m.stack([x, x.to(m.float64)], 0),
    "cat_bad": lambda m, x: m.cat([x, x.unsqueeze(0)], 0),
    "stack": lambda m, x: m.stack([x, x * 2]),
    "stack_neg": lambda m, x: m.stack([x, x], -1),
    "stack_bad": lambda m, x: m.stack([x, x.unsqueeze(0)]),
    "tril": lambda m, x: x.tril(),
    "tril_k": lambda m, x: m.tril(x, -1),
    "triu": lambda m, x: x.triu(1),
    "triu_neg": lambda m, x: x.triu(-1),
    "diag": lambda m, x: x.diag(),
    "diag_k": lambda m, x: m.diag(x, 1),
    "diagonal": lambda m, x: x.diagonal(),
    "diagonal_offset": lambda m, x: x.diagonal(-1, -1, 0),
    "diag_neg_far": lambda m, x: x.diag(-2),
    "diagonal_past_end": lambda m, x: x.diagonal(5),
    "tril_far": lambda m, x: x.tril(9),
    "roll_big_shift": lambda m, x: x.roll(-7, 0),
    "repeat_interleave_zero": lambda m, x: x.repeat_interleave(0, dim=0),
    "topk_zero": lambda m, x: x.topk(0),
    "kthvalue_zero": lambda m, x: x.kthvalue(0),
    "gather_empty_index": lambda m, x: x.gather(0, m.zeros((0,) + tuple(x.shape[1:]), dtype=m.int64)),
    "index_select_empty": lambda m, x: x.index_select(0, m.zeros(0, dtype=m.int64)),
    "scatter_empty_index": lambda m, x: x.scatter_add(0, m.zeros((0,) * x.ndim, dtype=m.int64), x),
    "trace": lambda m, x: x.trace(),
    # indexing ops
    "gather": lambda m, x: x.gather(-1, _ix(m, x.shape, _dim_size(x, -1))),
    "gather_dim0": lambda m, x: m.gather(x, 0, _ix(m, x.shape[:1] + x.shape[1:], _dim_size(x, 0), 2)),
    "gather_bad_index": lambda m, x: x.gather(-1, _ix(m, x.shape, 1) + 9),
    "scatter": lambda m, x: x.scatter(0, _ix(m, x.shape, _dim_size(x, 0)), x * 2),
    "scatter_perm": lambda m, x: x.scatter(0, _perm(m, tuple(x.shape), 0), x * 2),
    "scatter_value": lambda m, x: x.scatter(-1, _ix(m, x.shape, _dim_size(x, -1)), 3),
    "scatter_add": lambda m, x: x.scatter_add(0, _ix(m, x.shape, _dim_size(x, 0)), x * 2),
    "scatter_reduce_sum": lambda m, x: x.scatter_reduce(0, _ix(m, x.shape, _dim_size(x, 0)), x * 2, "sum"),
    "scatter_reduce_amax": lambda m, x: x.scatter_reduce(
        -1, _ix(m, x.shape, _dim_size(x, -1)), x * 2, "amax", include_self=False),
    "scatter_reduce_mean": lambda m, x: x.scatter_reduce(0, _ix(m, x.shape, _dim_size(x, 0)), x + 1, "mean"),
    "scatter_reduce_prod": lambda m, x: x.scatter_reduce(-1, _ix(m, x.shape, _dim_size(x, -1)), x + 1, "prod"),
    "index_select": lambda m, x: x.index_select(-1, _ix(m, (3,), _dim_size(x, -1))),
    "index_select_fn": lambda m, x: m.index_select(x, 0, _ix(m, (2,), _dim_size(x, 0), 3)),
    "index_select_bad": lambda m, x: x.index_select(0, m.tensor([99])),
    "index_add": lambda m, x: x.index_add(0, _ix(m, (x.shape[0],) if x.ndim else (), _dim_size(x, 0)), x * 2),
    "index_add_alpha": lambda m, x: x.index_add(0, _ix(m, (x.shape[0],) if x.ndim else (), _dim_size(x, 0)), x,
                                                alpha=2),
    "masked_fill": lambda m, x: x.masked_fill(x > 0, 0.5),
    "masked_fill_int": lambda m, x: x.masked_fill(x > 0, 7),
    "masked_fill_broadcast": lambda m, x: x.masked_fill(m.tensor(True), 1),
    "masked_fill_tensor_value": lambda m, x: x.masked_fill(x > 0, x.sum() if x.is_floating_point() else 3),
    "masked_fill_0d_f64": lambda m, x: x.masked_fill(x > 0, m.tensor(2.5, dtype=m.float64)),
    "masked_fill_vector_value": lambda m, x: x.masked_fill(x > 0, m.ones(2)),
    "masked_select": lambda m, x: x.masked_select(x > 0),
    "masked_select_broadcast": lambda m, x: m.masked_select(x, m.tensor([True, False, True, False])),
    "take": lambda m, x: x.take(_ix(m, (2, 2), x.numel())),
    "take_neg": lambda m, x: x.take(m.tensor([-1, 0])),
    "take_out_of_range": lambda m, x: x.take(m.tensor([99])),
    "index_select_neg": lambda m, x: x.index_select(0, m.tensor([-1])),
    "gather_neg": lambda m, x: x.gather(0, -_ix(m, x.shape, 1) - 1),
    "masked_fill_float_mask": lambda m, x: x.masked_fill(m.ones(x.shape), 1),
    "masked_select_int_mask": lambda m, x: x.masked_select(m.ones(x.shape, dtype=m.int64)),
    "where_float_cond": lambda m, x: m.where(m.ones(x.shape), x, x),
    "where_broadcast": lambda m, x: m.where(x[:1] > 0, x, x[:1] * 2),
    "take_along_dim": lambda m, x: x.take_along_dim(_ix(m, x.shape, _dim_size(x, -1)), -1),
    "take_along_dim_flat": lambda m, x: m.take_along_dim(x, _ix(m, (3,), x.numel())),
    "nonzero": lambda m, x: x.nonzero(),
    "nonzero_tuple": lambda m, x: x.nonzero(as_tuple=True),
    "argwhere": lambda m, x: m.argwhere(x),
    "where": lambda m, x: m.where(x > 0, x, x * 2),
    "where_scalar": lambda m, x: m.where(x > 0, x, 0.0),
    "where_int_scalar": lambda m, x: m.where(x > 0, x, 1),
    "where_method": lambda m, x: x.where(x < 0, -x),
    "where_0d_f64": lambda m, x: m.where(x > 0, x, m.tensor(2.5, dtype=m.float64)),
    "where_0d_int": lambda m, x: m.where(x > 0, m.tensor(7), x),
    "where_two_scalars": lambda m, x: m.where(x > 0, 1.0, 0.0),
    "where_int_scalars": lambda m, x: m.where(x > 0, 1, 0),
    "take_along_dim_broadcast": lambda m, x: x.take_along_dim(_ix(m, (2, 1), _dim_size(x, 0)), 0),
    "scatter_reduce_kw": lambda m, x: x.scatter(0, _ix(m, x.shape, _dim_size(x, 0)), x * 2, reduce="add"),
    "where_cond_only": lambda m, x: m.where(x),
    # __getitem__
    "getitem_int": lambda m, x: x[1],
    "getitem_neg_int": lambda m, x: x[-1],
    "getitem_out_of_range": lambda m, x: x[5],
    "getitem_slice_step": lambda m, x: x[::2],
    "getitem_negative_step": lambda m, x: x[::-1],
    "getitem_slice_2d": lambda m, x: x[1:, ::3],
    "getitem_neg_slice": lambda m, x: x[-2:, :-1],
    "getitem_none_ellipsis": lambda m, x: x[None, ..., None],
    "getitem_ellipsis_int": lambda m, x: x[..., 0],
    "getitem_list": lambda m, x: x[[0, 2, 0]],
    "getitem_tensor": lambda m, x: x[m.tensor([[0, 1], [1, 0]])],
    "getitem_neg_tensor": lambda m, x: x[m.tensor([-1, 0])],
    "getitem_mask": lambda m, x: x[x > 0],
    "getitem_row_mask": lambda m, x: x[m.tensor([True, False, True])],
    "getitem_two_arrays": lambda m, x: x[[0, 1], [1, 0]],
    "getitem_int_array": lambda m, x: x[0, [1, 0, 1]],
    "getitem_int_slice_array": lambda m, x: x[..., 0, :, [1, 0]] if x.ndim == 3 else x[0, :, [1, 0]],
    "getitem_slice_array": lambda m, x: x[1:, [0, 0, 2]],
    "getitem_array_none": lambda m, x: x[[1, 0], None],
    "getitem_empty_list": lambda m, x: x[[]],
    "getitem_false_mask": lambda m, x: x[m.zeros(x.shape, dtype=m.bool)],
    "getitem_float_index": lambda m, x: x[m.tensor([0.0])],
    "getitem_mask_wrong_shape": lambda m, x: x[m.tensor([True, False])],
    "getitem_int32_index": lambda m, x: x[m.tensor([1, 0], dtype=m.int32)],
    "getitem_broadcast_arrays": lambda m, x: x[[[0], [1]], [0, 1]],
    "getitem_false": lambda m, x: x[False],
    "getitem_none_slice_step": lambda m, x: x[..., None, 1::2],
    "getitem_int_ellipsis_array": lambda m, x: x[1, ..., [0]],
    "getitem_2d_mask_rows": lambda m, x: x[x.sum(-1) > 0] if x.ndim else x[x > 0],
    "getitem_0d_index": lambda m, x: x[m.tensor(1)],
    "getitem_bool_scalar": lambda m, x: x[True],
    "getitem_too_many": lambda m, x: x[0, 0, 0, 0],
    # __setitem__
    "setitem_int": _setitem(lambda m, x: 0, lambda m, x: 5),
    "setitem_slice": _setitem(lambda m, x: (slice(None), slice(None, None, 2)), lambda m, x: -1.5),
    "setitem_tensor_value": _setitem(lambda m, x: 1, lambda m, x: x[0] * 3),
    "setitem_broadcast": _setitem(lambda m, x: slice(1, None), lambda m, x: x[:1]),
    "setitem_mask": _setitem(lambda m, x: x > 0, lambda m, x: 0),
    "setitem_mask_values": _setitem(lambda m, x: x > 0, lambda m, x: x[x > 0] * 2),
    "setitem_array": _setitem(lambda m, x: m.tensor([2, 0]), lambda m, x: x[:2].flip(0)),
    "setitem_mixed": _setitem(lambda m, x: (0, [1, 0]), lambda m, x: 4),
    "setitem_ellipsis": _setitem(lambda m, x: (Ellipsis, -1), lambda m, x: x[..., 0]),
    "setitem_neg_index": _setitem(lambda m, x: -1, lambda m, x: x[0]),
    "setitem_row_broadcast": _setitem(lambda m, x: (slice(None),), lambda m, x: x[0]),
    "setitem_none": _setitem(lambda m, x: (None, 0), lambda m, x: 2),
    "setitem_chained": _chained_setitem,
    "masked_fill_": _inplace("masked_fill_", lambda m, x: x > 0, lambda m, x: 1),
    "scatter_": _inplace("scatter_", lambda m, x: 0, lambda m, x: _perm(m, tuple(x.shape), 0), lambda m, x: x * 2),
    "scatter_add_": _inplace("scatter_add_", lambda m, x: 0, lambda m, x: _ix(m, x.shape, _dim_size(x, 0)),
                             lambda m, x: x * 2),
    "index_add_": _inplace("index_add_", lambda m, x: -1, lambda m, x: _ix(m, (_dim_size(x, -1),), _dim_size(x, -1)),
                           lambda m, x: x.flip(-1)),
    "cumsum_": _inplace("cumsum_", lambda m, x: 0),
    "tril_": _inplace("tril_", lambda m, x: -1),
    "setitem_bad_shape": _setitem(lambda m, x: 0, lambda m, x: m.ones(7, dtype=x.dtype)),
    "setitem_out_of_range": _setitem(lambda m, x: 9, lambda m, x: 1),
}


# ------------------------------------------------------------------------------------------ skips
# (op, input): why the sweep does not compare them. "table" rows are docs/pytorch.md's.
SKIP = {
    # docs/pytorch.md, row "logcumsumexp": tinyflow computes integer input in float32; torch raises.
    **{(op, i): "table: logcumsumexp" for op in ("logcumsumexp", "logcumsumexp_dim0")
       for i in ("int64", "int32", "uint8", "bool")},
    # docs/pytorch.md, row "strides": tinyflow has no strided views, so view() of a transposed tensor
    # works where torch asks for reshape (take_along_dim without dim views its input in torch).
    ("view", "transposed"): "table: strides",
    ("take_along_dim_flat", "transposed"): "table: strides",
    # torch's var_mean/std_mean compute the mean by Welford's update, which turns an infinite mean
    # into NaN (torch.mean gives inf); tinyflow's mean is torch.mean's.
    **{(op, "nan_inf"): "torch var_mean: Welford mean" for op in ("var_mean", "std_mean", "std_mean_correction")},
    # torch.unique(dim=) orders slices with a comparator for which NaN is neither smaller nor larger
    # (so where a NaN-led slice lands is arbitrary); tinyflow sorts NaN last, as sort does.
    ("unique_dim_inverse_counts", "nan_inf"): "torch unique_dim: NaN order arbitrary",
}

# docs/pytorch.md, row "sorting": which of tied entries kthvalue/topk/median return is unspecified
# in torch; tinyflow's is stable. With ties the sweep compares the values only.
TIE_INDEX_FREE = {"median_dim", "median_dim_keepdim", "kthvalue", "kthvalue_dim", "kthvalue_keepdim", "topk",
                  "topk_dim0_smallest"}
TIED_INPUTS = {"int64", "int32", "uint8", "bool", "ties"}

# Differences that need changes outside this sweep's files (tinyflow/tensor.py, tinyflow/ops/
# activation.py), reported; the sweep expects them to differ until they are fixed
# (then remove the entry).
KNOWN = {
    # tensor.py amax() without dim is Max.apply(x, None) like max(): max()'s NaN gradient, not amax's
    ("amax", "nan_inf"): "tensor.py amax", ("amin", "nan_inf"): "tensor.py amin",
}

# torch's prod backward is grad * prod / input where no input is 0: NaN wherever an input is
# inf or NaN. tinyflow multiplies the other factors (exact), so those gradients differ.
EXACT_GRADIENT = {("prod_dim", "nan_inf"), ("prod_keepdim", "nan_inf")}
# torch's scatter_reduce amax/amin backward counts an excluded (include_self=False) input value
# that equals the result among the ties, so the src entry gets only part of the gradient (-inf
# here); tinyflow gives the src entries all of it.
EXACT_GRADIENT |= {("scatter_reduce_amax", "nan_inf")}

# Ops whose gradient torch leaves undefined at ties or NaN (the subgradient is a free choice).
TIE_GRADIENT_FREE = {"median", "median_dim", "median_dim_keepdim", "kthvalue", "kthvalue_dim", "kthvalue_keepdim"}


def _outputs(r):
    if isinstance(r, (tuple, list)):
        return list(r)
    return [r]


def _torch_dtype(t):
    return str(t.dtype).replace("torch.", "")


def _raised_in_numpy(exc):
    """True when the innermost frame of ``exc`` lies in NumPy's package (an unwrapped NumPy error)."""
    frames = traceback.extract_tb(exc.__traceback__)
    return bool(frames) and frames[-1].filename.startswith(NUMPY_DIR)


def _run(m, fn, x):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return fn(m, x), None
        except Exception as exc:  # noqa: BLE001 (the sweep compares exception classes)
            return None, exc


def _make(m, array, pre, grad):
    x = m.tensor(array, requires_grad=grad)
    return x, (x if pre is None else pre(x))


def _compare_values(o, r, where):
    assert tuple(o.shape) == tuple(r.shape), f"{where}: shape {tuple(o.shape)} != torch {tuple(r.shape)}"
    assert str(o.dtype) == _torch_dtype(r), f"{where}: dtype {o.dtype} != torch {r.dtype}"
    got, ref = o.detach().numpy(), r.detach().numpy()
    if r.dtype.is_floating_point:
        tol = 2e-3 if r.dtype == torch.float16 else 1e-5  # torch accumulates float16 in float32
        np.testing.assert_allclose(got, ref, rtol=tol, atol=tol, equal_nan=True, err_msg=where)
    else:
        np.testing.assert_array_equal(got, ref, err_msg=where)


def check(op, name):
    """Run OPS[op] on INPUTS[name] in both frameworks and compare results, errors and gradients."""
    array, pre = INPUTS[name]
    grad = array.dtype.kind == "f"
    th_leaf, th_x = _make(torch, array, pre, grad)
    tf_leaf, tf_x = _make(tf, array, pre, grad)
    ref, th_exc = _run(torch, OPS[op], th_x)
    got, tf_exc = _run(tf, OPS[op], tf_x)
    where = f"{op}[{name}]"
    if th_exc is not None:
        assert tf_exc is not None, f"{where}: torch raises {type(th_exc).__name__}({th_exc}), tinyflow returns a result"
        assert isinstance(tf_exc, type(th_exc)), (
            f"{where}: torch raises {type(th_exc).__name__}, tinyflow {type(tf_exc).__name__}: {tf_exc}")
        assert not _raised_in_numpy(tf_exc), f"{where}: an unwrapped NumPy error: {tf_exc!r}"
        assert str(tf_exc).strip(), f"{where}: an error without a message"
        return
    if tf_exc is not None:
        raise AssertionError(f"{where}: torch returns a result, tinyflow raises {tf_exc!r}") from tf_exc
    outs, refs = _outputs(got), _outputs(ref)
    if op in TIE_INDEX_FREE and name in TIED_INPUTS:
        outs, refs = outs[:1], refs[:1]
    assert len(outs) == len(refs), f"{where}: {len(outs)} outputs, torch {len(refs)}"
    if hasattr(ref, "_fields"):
        assert tuple(getattr(got, "_fields", ())) == tuple(ref._fields), f"{where}: fields of the named tuple"
    for o, r in zip(outs, refs):
        _compare_values(o, r, where)
    if not grad or (name in ("ties", "nan_inf") and op in TIE_GRADIENT_FREE) or (op, name) in EXACT_GRADIENT:
        return
    if op in TIE_INDEX_FREE and name in TIED_INPUTS:  # another tied entry receives the gradient
        return
    _compare_gradients(outs, refs, tf_leaf, th_leaf, where)


def _compare_gradients(outs, refs, tf_leaf, th_leaf, where):
    """Gradients of a random weighting of the float outputs (an output without a gradient in
    tinyflow counts as a zero gradient; ops torch cannot differentiate are not compared)."""
    rng = np.random.default_rng(0)
    loss_tf, loss_th = None, None
    for o, r in zip(outs, refs):
        if r.dtype.is_floating_point and r.requires_grad:
            w = rng.standard_normal(tuple(r.shape))
            lh = (r * torch.tensor(w, dtype=r.dtype)).sum()
            loss_th = lh if loss_th is None else loss_th + lh
            if o.requires_grad:
                lt = (o * tf.tensor(w, dtype=o.dtype)).sum()
                loss_tf = lt if loss_tf is None else loss_tf + lt
    if loss_th is None:
        return
    try:
        loss_th.backward()
    except (NotImplementedError, RuntimeError):  # e.g. unique: no derivative in torch
        return
    if loss_tf is not None:
        loss_tf.backward()
    ref = np.zeros(th_leaf.shape) if th_leaf.grad is None else th_leaf.grad.numpy()
    got = np.zeros(tf_leaf.shape) if tf_leaf.grad is None else tf_leaf.grad.numpy()
    assert got.shape == ref.shape, f"{where}: gradient shape {got.shape} != torch {ref.shape}"
    tol = 4e-3 if ref.dtype == np.float16 else 1e-4
    np.testing.assert_allclose(got, ref, rtol=tol, atol=tol / 10, equal_nan=True, err_msg=f"{where} gradient")


@pytest.mark.parametrize("op", list(OPS))
def test_sweep(op):
    """Every input variant of one op (one test per op keeps the sweep fast); all differences listed."""
    failures = []
    for name in INPUTS:
        if (op, name) in SKIP:
            continue
        try:
            check(op, name)
        except AssertionError as exc:
            if (op, name) not in KNOWN:
                failures.append(str(exc).strip().splitlines()[0][:300])
        else:
            if (op, name) in KNOWN:
                failures.append(f"{op}[{name}] now matches torch: remove it from KNOWN")
    assert not failures, "\n".join(failures)


# ------------------------------------------------------------------------------------------ errors
def test_errors_name_the_op():
    x = tf.ones(3, 4)
    with pytest.raises(IndexError, match="sum"):
        x.sum(2)
    with pytest.raises(IndexError, match="cumsum"):
        x.cumsum(5)
    with pytest.raises(RuntimeError, match="kthvalue"):
        x.kthvalue(9)
    with pytest.raises(RuntimeError, match="topk"):
        x.topk(9)
    with pytest.raises(RuntimeError, match="gather"):
        x.gather(1, tf.tensor([[9]]))
    with pytest.raises(IndexError, match="index_select"):
        x.index_select(0, tf.tensor([3]))
    with pytest.raises(RuntimeError, match="reshape"):
        x.reshape(5, 7)
    with pytest.raises(RuntimeError, match="cat"):
        tf.cat([x, x.unsqueeze(0)])
    with pytest.raises(RuntimeError, match="stack"):
        tf.stack([x, x.t()])


# ------------------------------------------------------------------------------------------ gradchecks
shapes2d = st.tuples(st.integers(2, 4), st.integers(2, 4))  # var needs 2 entries per slice
seeds = st.integers(0, 2**31 - 1)
few = settings(max_examples=8, deadline=None)

# Differentiable ops for the float64 gradcheck: inputs are distinct (no ties) and away from 0.
GRADCHECK_OPS = [
    "sum_dims", "mean_keepdim", "prod_keepdim", "var_dim", "std_dim", "var_mean", "std_mean",
    "amax_dims", "max_dim", "min_two", "logsumexp_dims", "norm", "norm_fn", "norm_inf_dim", "norm_3_keepdim",
    "norm_1", "median_dim", "take_along_dim_broadcast", "masked_fill_tensor_value", "scatter_add_", "index_add_",
    "kthvalue_keepdim", "cumsum", "cumprod", "cummax", "cummin", "logcumsumexp", "sort", "topk", "msort",
    "flatten", "unflatten", "permute", "movedim", "expand", "repeat", "tile", "repeat_interleave_dim",
    "flip_dims", "roll_dims", "narrow", "select_neg", "unbind", "chunk", "split_sizes", "cat", "stack",
    "tril_k", "triu", "diagonal_offset", "trace", "gather", "scatter_perm", "scatter_add", "scatter_reduce_amax",
    "scatter_reduce_mean", "scatter_reduce_prod", "index_select", "index_add", "masked_fill", "masked_select",
    "take", "take_along_dim", "where", "getitem_slice_2d", "getitem_mask", "getitem_int_array",
    "getitem_slice_array", "setitem_tensor_value", "setitem_mask_values", "setitem_ellipsis",
]


@pytest.mark.parametrize("op", GRADCHECK_OPS)
@few
@given(shape=shapes2d, seed=seeds)
def test_gradcheck(op, shape, seed):
    rng = np.random.default_rng(seed)
    n = shape[0] * shape[1]
    values = (rng.permutation(n) + 1 + rng.uniform(0.1, 0.4, n)) * rng.choice([-1, 1], n) / n
    x = tf.tensor(values.reshape(shape), dtype=tf.float64, requires_grad=True)
    try:
        OPS[op](tf, x)
    except (RuntimeError, IndexError):
        return  # this shape does not suit the op (torch raises too: the sweep checks that)
    gradcheck(lambda t: OPS[op](tf, t), [x])


@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_amax_nan_gradient_as_torch(include_self):
    """A NaN result has no winner: its gradient is NaN as torch's (0 * inf); a position left alone
    keeps its gradient; with include_self=False a written input entry gets none."""
    a = np.array([[1.0, np.nan, 2.0, 0.5], [3.0, 0.25, np.nan, 4.0]])
    idx = np.array([[0, 0, 1, 1], [2, 2, 0, 1]])
    grads = []
    for m in (tf, torch):
        x = m.tensor(a, requires_grad=True)
        y = x.scatter_reduce(-1, m.tensor(idx), x * 2, "amax", include_self=include_self)
        (y * m.tensor(np.arange(1.0, 9.0).reshape(2, 4))).sum().backward()
        grads.append(x.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], equal_nan=True)


@pytest.mark.parametrize("op", ["cumsum", "cumprod", "logcumsumexp", "sum", "mean", "var", "norm", "logsumexp"])
def test_float16_accumulates_in_float32_as_torch(op):
    """Long float16 reductions and scans round each result once, as torch (a float16 running sum
    would stop at 2048)."""
    a = np.random.default_rng(0).uniform(0.5, 1.0, (2, 5000)).astype(np.float16)
    if op == "cumprod":
        a = (1 + (a - 0.75) * 1e-3).astype(np.float16)
    ours = getattr(tf.tensor(a), op)(-1) if op != "norm" else tf.tensor(a).norm(dim=-1)
    ref = getattr(torch.tensor(a), op)(-1) if op != "norm" else torch.tensor(a).norm(dim=-1)
    assert str(ours.dtype) == "float16"
    np.testing.assert_allclose(ours.numpy().astype(np.float32), ref.numpy().astype(np.float32), rtol=2e-3, atol=1e-3)
