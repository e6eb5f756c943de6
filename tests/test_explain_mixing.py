"""What ALTI+ and value zeroing share (transformer/explain/mixing.py): undefined rows become NaN, never zeros;
the composition through the layers keeps them NaN only where a positive weight reaches them; ``layer`` is checked.
And the two methods' undefined rows end to end: ALTI+'s L1 closeness below its floor, value zeroing's rows of
zeros."""

from __future__ import annotations

import pytest
import torch
from explain_helpers import batch, tiny_model

from transformer.explain import attribute
from transformer.explain.alti import UNDEFINED_BELOW, _contributions
from transformer.explain.mixing import compose, decoder_layer, normalised

NAN = float("nan")


def test_a_row_of_zeros_is_undefined_not_zero():
    shares = normalised(torch.tensor([[[1.0, 3.0], [0.0, 0.0]]]))
    torch.testing.assert_close(shares[0, 0], torch.tensor([0.25, 0.75]))
    assert shares[0, 1].isnan().all()


def test_compose_spreads_nan_only_along_positive_weights():
    rolled = torch.tensor([[[0.5, 0.5], [NAN, NAN], [1.0, 0.0]]])  # (1, 3, 2): row 1 undefined
    mixing = torch.tensor([[[1.0, 0.0, 0.0],    # takes nothing from row 1: defined (a plain @ gives NaN)
                            [0.5, 0.5, 0.0],    # takes half of row 1: undefined
                            [NAN, NAN, NAN],    # undefined itself
                            [0.0, 0.0, 1.0]]])  # (1, 4, 3)
    out = compose(mixing, rolled)
    torch.testing.assert_close(out[0, 0], torch.tensor([0.5, 0.5]))
    torch.testing.assert_close(out[0, 3], torch.tensor([1.0, 0.0]))
    assert out[0, 1].isnan().all() and out[0, 2].isnan().all()


@pytest.mark.parametrize("bad", [2, -3, 1.0, True, "1"])
def test_layer_must_be_a_decoder_layer(bad):
    model = tiny_model(n_decoder_layers=2)
    with pytest.raises(ValueError, match="layer"):
        decoder_layer(model, bad)
    src, tgt = batch()
    for method in ("alti", "value_zeroing"):
        with pytest.raises(ValueError, match="layer"):
            attribute(model, src, tgt, method, layer=bad)


def test_layer_counts_from_the_last_when_negative():
    model = tiny_model(n_decoder_layers=3)
    assert [decoder_layer(model, i) for i in (None, 0, 2, -1, -3)] == [None, 0, 2, 2, 0]


def test_layer_is_no_option_of_the_other_methods():
    model = tiny_model()
    src, tgt = batch()
    with pytest.raises(ValueError, match="unknown option"):
        attribute(model, src, tgt, "rollout", layer=0)


def block_row(y, vectors):
    """One query of one block: y (D,), vectors (n, D) -> (1, 1, n) contributions."""
    return _contributions(vectors[None, None], y[None, None])[0, 0]


def test_alti_rows_whose_update_cancels_the_residual_are_undefined():
    y = torch.tensor([1.0, -1.0, 0.5, 0.0], dtype=torch.float64)
    # every contributor farther from y than the zero vector is: no closeness at all (was a row of zeros)
    far = torch.stack([3 * y, -2 * y, torch.tensor([0.0, 0.0, 0.0, 4.0], dtype=torch.float64)])
    assert block_row(y, far).isnan().all()
    # one contributor a sliver closer than zero (0.5% of ‖y‖₁): below the floor, undefined (was one-hot)
    sliver = torch.stack([3 * y, (2 - 0.005) * y, far[2]])  # ‖y - v‖₁ = 0.995 ‖y‖₁
    closeness = y.abs().sum() - (y - sliver[1]).abs().sum()
    assert 0 < closeness < UNDEFINED_BELOW * y.abs().sum()
    assert block_row(y, sliver).isnan().all()
    # the same contributor clearly closer (half of y): defined, the row sums to 1
    half = torch.stack([3 * y, 0.5 * y, far[2]])
    torch.testing.assert_close(block_row(y, half), torch.tensor([0.0, 1.0, 0.0], dtype=torch.float64))


def test_value_zeroing_rows_of_zeros_are_undefined_end_to_end():
    """With the last decoder layer's attention outputs switched off (W_O = 0, b_O kept), zeroing any token's values
    moves nothing there: its rows have no shares, and neither has any row composed through it (was: rows of 0)."""
    model = tiny_model(n_decoder_layers=2)
    with torch.no_grad():
        for attention in (model.decoder.layers[1].self_attn, model.decoder.layers[1].cross_attn):
            attention.w_o.weight.zero_()
    src, tgt = batch()
    for layer in (None, 1):
        result = attribute(model, src, tgt, "value_zeroing", layer=layer)
        real = tgt[:, 1:] != 0
        assert result.source.sum(-1)[real].isnan().all() and result.target.sum(-1)[real].isnan().all()
        assert (result.source[~real] == 0).all()  # padding rows and columns stay 0 (mask_padding): NaN only where real
        assert (result.source[1, :, 3:] == 0).all()
    defined = attribute(model, src, tgt, "value_zeroing", layer=0)
    sums = defined.source.sum(-1) + defined.target.sum(-1)
    torch.testing.assert_close(sums[real], torch.ones_like(sums[real]))
