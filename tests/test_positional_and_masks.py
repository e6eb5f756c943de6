"""Positional encoding against hand-computed values; masks and attention, property-based."""

from __future__ import annotations

import math

import hypothesis.strategies as st
import torch
import torch.nn.functional as F
from hypothesis import given, settings

from transformer.network import masks
from transformer.network.attention import scaled_dot_product_attention
from transformer.network.positional import sinusoidal_table


def test_sinusoidal_table_hand_computed() -> None:
    table = sinusoidal_table(50, 6, dtype=torch.float64)
    pos = 7
    for i in range(3):  # PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...)
        angle = pos / 10000 ** (2 * i / 6)
        assert table[pos, 2 * i].item() == math.sin(angle)
        assert table[pos, 2 * i + 1].item() == math.cos(angle)
    assert table[0, 0::2].abs().max() == 0 and (table[0, 1::2] == 1).all()


def test_sinusoidal_table_odd_width() -> None:
    table = sinusoidal_table(5, 5)
    assert table.shape == (5, 5)
    assert abs(table[3, 4].item() - math.sin(3 / 10000 ** (4 / 5))) < 1e-6  # the last, unpaired dimension is a sine


def test_a_fixed_offset_is_a_rotation_of_each_sin_cos_pair() -> None:
    """PE(pos + k) is a linear function of PE(pos): each (sin, cos) pair turns by the angle k * w_i."""
    d, k = 8, 5
    table = sinusoidal_table(40, d, dtype=torch.float64)
    for i in range(d // 2):
        w = 1 / 10000 ** (2 * i / d)
        rotation = torch.tensor([[math.cos(k * w), -math.sin(k * w)], [math.sin(k * w), math.cos(k * w)]],
                                dtype=torch.float64)
        pairs = table[:30, 2 * i : 2 * i + 2]  # (pos, [sin, cos])
        torch.testing.assert_close(pairs @ rotation, table[k : 30 + k, 2 * i : 2 * i + 2])


def test_causal_mask_is_lower_triangular() -> None:
    expected = torch.tensor([[1, 0, 0], [1, 1, 0], [1, 1, 1]], dtype=torch.bool)
    assert torch.equal(masks.causal_mask(3)[0, 0], expected)
    # with a cache of 2 earlier positions, 2 new queries see everything up to themselves
    assert torch.equal(masks.causal_mask(2, 4)[0, 0], torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]], dtype=torch.bool))


lengths = st.lists(st.integers(min_value=1, max_value=9), min_size=1, max_size=5)


def padded_batch(lens: list[int], pad_id: int = 0) -> torch.Tensor:
    ids = torch.full((len(lens), max(lens)), pad_id)
    for row, n in enumerate(lens):
        ids[row, :n] = torch.arange(1, n + 1)
    return ids


@given(lengths)
def test_padding_mask_marks_exactly_the_real_tokens(lens: list[int]) -> None:
    ids = padded_batch(lens)
    mask = masks.padding_mask(ids, 0)
    assert mask.shape == (len(lens), 1, 1, max(lens))
    assert mask.sum(-1).flatten().tolist() == lens


@given(lengths)
def test_decoder_mask_is_causal_and_padding_combined(lens: list[int]) -> None:
    ids = padded_batch(lens)
    mask = masks.decoder_self_mask(ids, 0)
    b, t = ids.shape
    assert mask.shape == (b, 1, t, t)
    for row, n in enumerate(lens):
        for i in range(t):
            for j in range(t):
                assert mask[row, 0, i, j].item() == (j <= i and j < n)
    assert torch.equal(masks.combine(masks.padding_mask(ids, 0), masks.causal_mask(t)), mask)
    assert masks.combine(None, None) is None


@settings(max_examples=40, deadline=None)
@given(
    lens=lengths,
    t_q=st.integers(1, 7),
    heads=st.integers(1, 3),
    d_k=st.sampled_from([1, 4, 8]),
    causal=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_explicit_attention_equals_pytorch_sdpa_and_masks_give_exact_zeros(lens, t_q, heads, d_k, causal, seed):
    g = torch.Generator().manual_seed(seed)
    b, t_k = len(lens), max(lens)
    q = torch.randn(b, heads, t_q, d_k, generator=g, dtype=torch.float64)
    k = torch.randn(b, heads, t_k, d_k, generator=g, dtype=torch.float64)
    v = torch.randn(b, heads, t_k, d_k, generator=g, dtype=torch.float64)
    mask = masks.padding_mask(padded_batch(lens), 0)
    if causal and t_q <= t_k:
        mask = masks.combine(mask, masks.causal_mask(t_q, t_k))
        if not mask.expand(b, 1, t_q, t_k).any(-1).all():  # a row with nothing to attend to has no softmax
            return
    out, scores, weights = scaled_dot_product_attention(q, k, v, mask)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
    blocked = ~mask.expand_as(weights)
    assert (weights[blocked] == 0).all()
    torch.testing.assert_close(weights.sum(-1), torch.ones(b, heads, t_q, dtype=torch.float64))
    # scores are Q K^T / sqrt(d_k) wherever allowed
    torch.testing.assert_close(scores[~blocked], (q @ k.transpose(-1, -2) / math.sqrt(d_k))[~blocked])
