"""Attention: F.scaled_dot_product_attention and nn.MultiheadAttention's forward
(F.multi_head_attention_forward). No op of their own: they compose the Tensor ops and the ops of
the other families (matmul, softmax, dropout, linear, pad) as PyTorch's math reference computes
them."""
from __future__ import annotations

from typing import Any

import numpy as np

from tinyflow.arg_parser import FunctionalError
from tinyflow.creation import cat, tensor, zeros
from tinyflow.ops.activation import softmax
from tinyflow.ops.dropout import dropout
from tinyflow.ops.linear import linear
from tinyflow.ops.pad import pad
from tinyflow.tensor import Tensor

__all__ = ["scaled_dot_product_attention", "multi_head_attention_forward"]


def _neg_inf_mask(mask: Any, like: Tensor, keep_where_true: bool) -> Tensor:
    """An additive float mask from a boolean one (-inf where attention is not allowed) or the
    float mask itself. ``keep_where_true``: SDPA's meaning of True; MultiheadAttention's is the
    opposite (True = masked out)."""
    if not isinstance(mask, Tensor):
        mask = tensor(mask, device=like.device)
    if mask.dtype == np.bool_:
        allowed = mask.array if keep_where_true else ~mask.array
        xp = like.device.xp
        return Tensor._from_array(xp.where(allowed, 0.0, -np.inf).astype(like.dtype), device=like.device)
    return mask.to(like.dtype) if mask.dtype != like.dtype else mask


def _causal_mask(l_: int, s_: int, like: Tensor) -> Tensor:
    xp = like.device.xp
    allowed = xp.tril(xp.ones((l_, s_), dtype=bool))
    return Tensor._from_array(xp.where(allowed, 0.0, -np.inf).astype(like.dtype), device=like.device)


def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor, attn_mask: Any = None,
                                 dropout_p: float = 0.0, is_causal: bool = False, scale: float | None = None,
                                 enable_gqa: bool = False) -> Tensor:
    """softmax(q k^T * scale + mask) v over (..., L, E) queries and (..., S, E) keys, as PyTorch's
    math: a boolean mask keeps the positions where it is True, a float mask is added;
    ``is_causal`` masks the future; ``enable_gqa`` shares each key/value head among query heads."""
    op = "scaled_dot_product_attention"
    if query.ndim < 2 or key.ndim < 2 or value.ndim < 2:
        raise FunctionalError(f"{op}: query, key and value need at least 2 dims, got {tuple(query.shape)}, "
                              f"{tuple(key.shape)}, {tuple(value.shape)}")
    if is_causal and attn_mask is not None:
        raise FunctionalError(f"{op}: explicit attn_mask should not be set when is_causal=True")
    if enable_gqa and query.ndim >= 3 and key.shape[-3] != query.shape[-3]:
        heads, kv_heads = query.shape[-3], key.shape[-3]
        if heads % kv_heads:
            raise FunctionalError(f"{op}: {heads} query heads are not a multiple of {kv_heads} key/value heads")

        def repeat(t: Tensor) -> Tensor:
            lead, (h, s_, e) = tuple(t.shape[:-3]), tuple(t.shape[-3:])
            return t.reshape(*lead, h, 1, s_, e).expand(*lead, h, heads // h, s_, e).reshape(*lead, heads, s_, e)

        key, value = repeat(key), repeat(value)
    l_, s_ = query.shape[-2], key.shape[-2]
    factor = 1.0 / np.sqrt(query.shape[-1]) if scale is None else scale
    scores = (query @ key.transpose(-2, -1)) * float(factor)  # (..., L, S)
    if is_causal:
        scores = scores + _causal_mask(l_, s_, scores)
    if attn_mask is not None:
        scores = scores + _neg_inf_mask(attn_mask, scores, keep_where_true=True)
    weights = softmax(scores, dim=-1)
    if dropout_p > 0:
        weights = dropout(weights, dropout_p, training=True)
    return weights @ value


def multi_head_attention_forward(query: Tensor, key: Tensor, value: Tensor, embed_dim_to_check: int, num_heads: int,
                                 in_proj_weight: Tensor | None, in_proj_bias: Tensor | None,
                                 bias_k: Tensor | None, bias_v: Tensor | None, add_zero_attn: bool,
                                 dropout_p: float, out_proj_weight: Tensor, out_proj_bias: Tensor | None,
                                 training: bool = True, key_padding_mask: Any = None, need_weights: bool = True,
                                 attn_mask: Any = None, use_separate_proj_weight: bool = False,
                                 q_proj_weight: Tensor | None = None, k_proj_weight: Tensor | None = None,
                                 v_proj_weight: Tensor | None = None, static_k: Tensor | None = None,
                                 static_v: Tensor | None = None, average_attn_weights: bool = True,
                                 is_causal: bool = False) -> tuple[Tensor, Tensor | None]:
    """PyTorch's multi-head attention on (L, N, E) query and (S, N, E) key/value (or unbatched
    (L, E)): projections, heads, masks (True in a boolean mask = not allowed), softmax, dropout,
    output projection. Returns (output, weights averaged over heads or per head, or None)."""
    op = "multi_head_attention_forward"
    unbatched = query.ndim == 2
    if unbatched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    tgt_len, bsz, embed_dim = query.shape
    if embed_dim != embed_dim_to_check:
        raise FunctionalError(f"{op}: query has embedding dim {embed_dim}, expected {embed_dim_to_check}")
    if embed_dim % num_heads:
        raise FunctionalError(f"{op}: embed_dim {embed_dim} not divisible by num_heads {num_heads}")
    head_dim = embed_dim // num_heads
    if use_separate_proj_weight:
        b_q, b_k, b_v = (None, None, None) if in_proj_bias is None else in_proj_bias.chunk(3)
        q = linear(query, q_proj_weight, b_q)
        k = linear(key, k_proj_weight, b_k)
        v = linear(value, v_proj_weight, b_v)
    else:
        w_q, w_k, w_v = in_proj_weight.chunk(3)
        b_q, b_k, b_v = (None, None, None) if in_proj_bias is None else in_proj_bias.chunk(3)
        q, k, v = linear(query, w_q, b_q), linear(key, w_k, b_k), linear(value, w_v, b_v)
    if is_causal and attn_mask is None:
        attn_mask = _causal_mask(tgt_len, key.shape[0], q) < 0  # True = masked out, MHA's meaning
    if attn_mask is not None:
        attn_mask = _neg_inf_mask(attn_mask, q, keep_where_true=False)
        if attn_mask.ndim == 2:
            attn_mask = attn_mask.unsqueeze(0)  # (1, L, S)
    if bias_k is not None and bias_v is not None:
        k = cat([k, bias_k.expand(1, bsz, embed_dim)])
        v = cat([v, bias_v.expand(1, bsz, embed_dim)])
        if attn_mask is not None:
            attn_mask = pad(attn_mask, (0, 1))
        if key_padding_mask is not None:
            key_padding_mask = pad(key_padding_mask, (0, 1))
    q = q.reshape(tgt_len, bsz * num_heads, head_dim).transpose(0, 1)  # (N*H, L, hd)
    k = (static_k if static_k is not None else k.reshape(k.shape[0], bsz * num_heads, head_dim).transpose(0, 1))
    v = (static_v if static_v is not None else v.reshape(v.shape[0], bsz * num_heads, head_dim).transpose(0, 1))
    if add_zero_attn:
        k = cat([k, zeros(bsz * num_heads, 1, head_dim, dtype=k.dtype, device=k.device)], dim=1)
        v = cat([v, zeros(bsz * num_heads, 1, head_dim, dtype=v.dtype, device=v.device)], dim=1)
        if attn_mask is not None:
            attn_mask = pad(attn_mask, (0, 1))
        if key_padding_mask is not None:
            key_padding_mask = pad(key_padding_mask, (0, 1))
    src_len = k.shape[1]
    if key_padding_mask is not None:
        kpm = _neg_inf_mask(key_padding_mask, q, keep_where_true=False)  # (N, S)
        kpm = kpm.reshape(bsz, 1, 1, src_len).expand(bsz, num_heads, 1, src_len).reshape(bsz * num_heads, 1, src_len)
        attn_mask = kpm if attn_mask is None else attn_mask + kpm
    scores = (q * float(np.sqrt(1.0 / head_dim))) @ k.transpose(-2, -1)  # (N*H, L, S)
    if attn_mask is not None:
        scores = scores + attn_mask
    weights = softmax(scores, dim=-1)
    if dropout_p > 0.0 and training:
        weights = dropout(weights, dropout_p, training=True)
    out = (weights @ v).transpose(0, 1).reshape(tgt_len * bsz, embed_dim)
    out = linear(out, out_proj_weight, out_proj_bias).reshape(tgt_len, bsz, embed_dim)
    if unbatched:
        out = out.squeeze(1)
    if not need_weights:
        return out, None
    weights = weights.reshape(bsz, num_heads, tgt_len, src_len)
    if average_attn_weights:
        weights = weights.mean(dim=1)
    return out, (weights.squeeze(0) if unbatched else weights)
