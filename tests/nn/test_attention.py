"""scaled_dot_product_attention, MultiheadAttention and the Transformer layers against torch
from the same weights: masks (boolean and float, key padding, causal), batch_first, separate
key/value sizes, bias_kv and zero attention, pre- and post-norm, values and gradients."""
from __future__ import annotations

import numpy as np
import pytest

import tinyflow as tf
import tinyflow.nn as nn
import tinyflow.nn.functional as F
from tinyflow.testing import gradcheck

torch = pytest.importorskip("torch")
TF = torch.nn.functional
RNG = np.random.default_rng(0)


def arr(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def copy_weights(ours, theirs):
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})


def both(x):
    return tf.tensor(x, requires_grad=x.dtype.kind == "f"), torch.tensor(x, requires_grad=x.dtype.kind == "f")


@pytest.mark.parametrize("kw", [
    dict(), dict(is_causal=True), dict(scale=0.3), dict(mask="bool"), dict(mask="float"), dict(gqa=True),
])
def test_sdpa_matches_torch(kw):
    q, k, v = arr(2, 4, 5, 8), arr(2, 2 if kw.get("gqa") else 4, 7, 8), arr(2, 2 if kw.get("gqa") else 4, 7, 6)
    if kw.get("is_causal"):
        k, v = k[:, :, :5].copy(), v[:, :, :5].copy()
    extra = {key: val for key, val in kw.items() if key in ("is_causal", "scale")}
    mask = kw.get("mask")
    m = (RNG.random((5, 7)) > 0.3) if mask == "bool" else arr(1, 5, 7) if mask == "float" else None
    if m is not None and mask == "bool":
        m[:, 0] = True  # no row fully masked
    a, b = zip(both(q), both(k), both(v))
    out = F.scaled_dot_product_attention(*a, attn_mask=None if m is None else tf.tensor(m),
                                         enable_gqa=bool(kw.get("gqa")), **extra)
    ref = TF.scaled_dot_product_attention(*b, attn_mask=None if m is None else torch.tensor(m),
                                          enable_gqa=bool(kw.get("gqa")), **extra)
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=1e-5, atol=1e-6)
    out.sum().backward()
    ref.sum().backward()
    for x, y in zip(a, b):
        np.testing.assert_allclose(x.grad.numpy(), y.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_sdpa_gradcheck():
    q, k, v = (tf.tensor(RNG.standard_normal(s), dtype=tf.float64, requires_grad=True)
               for s in [(2, 3, 4), (2, 5, 4), (2, 5, 3)])
    mask = tf.tensor(RNG.standard_normal((3, 5)), dtype=tf.float64)
    gradcheck(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, attn_mask=mask), [q, k, v])


MHA_CASES = [
    dict(), dict(batch_first=True), dict(kdim=6, vdim=5), dict(add_bias_kv=True, add_zero_attn=True),
    dict(bias=False), dict(need_weights=False), dict(average_attn_weights=False), dict(unbatched=True),
]


@pytest.mark.parametrize("case", MHA_CASES, ids=lambda c: ",".join(c) or "default")
@pytest.mark.parametrize("masks", ["none", "bool", "float", "causal"])
def test_multihead_attention_matches_torch(case, masks):
    case = dict(case)
    call = {k: case.pop(k) for k in ("need_weights", "average_attn_weights") if k in case}
    unbatched = case.pop("unbatched", False)
    torch.manual_seed(0)
    theirs = torch.nn.MultiheadAttention(8, 2, **case)
    ours = nn.MultiheadAttention(8, 2, **case)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    copy_weights(ours, theirs)
    L, S, N = 4, 6, 3
    shape_q = (L, 8) if unbatched else ((N, L, 8) if case.get("batch_first") else (L, N, 8))
    shape_k = lambda d: (S, d) if unbatched else ((N, S, d) if case.get("batch_first") else (S, N, d))  # noqa: E731
    q, k, v = arr(*shape_q), arr(*shape_k(case.get("kdim", 8))), arr(*shape_k(case.get("vdim", 8)))
    kw = {}
    if masks == "bool":
        kpm = RNG.random((S,) if unbatched else (N, S)) > 0.7
        kpm[..., 0] = False
        kw = dict(key_padding_mask=kpm, attn_mask=np.triu(np.ones((L, S), bool), 3))
    elif masks == "float":
        kw = dict(attn_mask=arr(L, S))
    elif masks == "causal":
        kw = dict(attn_mask=np.triu(np.ones((L, S), bool), 1), is_causal=True)
    a, b = zip(both(q), both(k), both(v))
    out, w = ours(*a, **{key: tf.tensor(val) if isinstance(val, np.ndarray) else val for key, val in kw.items()},
                  **call)
    ref, rw = theirs(*b, **{key: torch.tensor(val) if isinstance(val, np.ndarray) else val for key, val in kw.items()},
                     **call)
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=1e-5, atol=1e-5)
    assert (w is None) == (rw is None)
    if w is not None:
        np.testing.assert_allclose(w.numpy(), rw.detach().numpy(), rtol=1e-5, atol=1e-6)
    out.sum().backward()
    ref.sum().backward()
    for x, y in zip(a, b):
        np.testing.assert_allclose(x.grad.numpy(), y.grad.numpy(), rtol=1e-4, atol=1e-5)
    for (name, p), tp in zip(ours.named_parameters(), theirs.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-4, atol=1e-5, err_msg=name)


@pytest.mark.filterwarnings("ignore:enable_nested_tensor")
@pytest.mark.parametrize("kw", [dict(), dict(norm_first=True, activation="gelu"), dict(batch_first=True)])
def test_transformer_layers_and_stacks_match_torch(kw):
    torch.manual_seed(1)
    pairs = [
        (nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, 0.0, **kw), 2, nn.LayerNorm(8)),
         torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(8, 2, 16, 0.0, **kw), 2, torch.nn.LayerNorm(8),
                                     enable_nested_tensor=False)),
        (nn.TransformerDecoderLayer(8, 2, 16, 0.0, **kw), torch.nn.TransformerDecoderLayer(8, 2, 16, 0.0, **kw)),
        (nn.Transformer(8, 2, 1, 2, 16, 0.0, **kw), torch.nn.Transformer(8, 2, 1, 2, 16, 0.0, **kw)),
    ]
    src = arr(3, 5, 8)
    tgt = arr(3, 4, 8) if kw.get("batch_first") else arr(5, 3, 8)[:4].copy()
    if not kw.get("batch_first"):
        src = src.transpose(1, 0, 2).copy()
    causal = nn.Transformer.generate_square_subsequent_mask(4)
    np.testing.assert_array_equal(causal.numpy(), torch.nn.Transformer.generate_square_subsequent_mask(4).numpy())
    for ours, theirs in pairs:
        assert list(ours.state_dict()) == list(theirs.state_dict())
        copy_weights(ours, theirs)
        if isinstance(ours, nn.TransformerEncoder):
            args, targs = (tf.tensor(src),), (torch.tensor(src),)
        else:
            mem = src
            args = (tf.tensor(tgt), tf.tensor(mem))
            targs = (torch.tensor(tgt), torch.tensor(mem))
        extra = {} if isinstance(ours, nn.TransformerEncoder) else {"tgt_mask": causal}
        textra = {} if isinstance(ours, nn.TransformerEncoder) else {
            "tgt_mask": torch.nn.Transformer.generate_square_subsequent_mask(4)}
        if isinstance(ours, nn.Transformer):
            args, targs = (tf.tensor(src), tf.tensor(tgt)), (torch.tensor(src), torch.tensor(tgt))
        out, ref = ours(*args, **extra), theirs(*targs, **textra)
        np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=1e-4, atol=1e-5)
