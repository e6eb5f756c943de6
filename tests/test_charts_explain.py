"""ui/charts/explain.py: pure chart functions, fed plain arrays (no model)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

from ui.charts.explain import (
    agreement_heatmap,
    attribution_frame,
    logit_lens_grid,
    method_grid,
    normalise_rows,
    residual_heatmap,
    residual_matrix,
    row_frame,
    token_row_bars,
)

SRC = ["a", "b", "</s>"]
OUT = ["b", "a", "</s>"]
ATTR = {"attention": np.array([[0.1, 0.8, 0.1], [0.7, 0.2, 0.1], [0.2, 0.2, 0.6]]),
        "occlusion": np.array([[-0.5, 2.0, 0.0], [4.0, -1.0, 0.0], [0.0, 0.0, 0.0]])}


def test_normalise_rows():
    z = normalise_rows(ATTR["occlusion"])
    np.testing.assert_allclose(z, [[-0.25, 1.0, 0.0], [1.0, -0.25, 0.0], [0.0, 0.0, 0.0]])


def test_token_row_bars():
    fig = token_row_bars(ATTR, SRC, "<s>", row=1)
    assert isinstance(fig, go.Figure) and [t.name for t in fig.data] == ["attention", "occlusion"]
    np.testing.assert_allclose(fig.data[1].y, [1.0, -0.25, 0.0])
    assert "&lt;/s&gt;" in fig.layout.xaxis.ticktext and "&lt;s&gt;" in fig.layout.title.text
    with pytest.raises(ValueError):
        token_row_bars(ATTR, SRC[:2], "a", row=0)


def test_method_grid_shares_one_normalised_scale():
    fig = method_grid(ATTR, SRC, OUT)
    assert len(fig.data) == 2 and all(t.coloraxis == "coloraxis" for t in fig.data)
    assert fig.layout.coloraxis.cmin == -1 and fig.layout.coloraxis.cmax == 1
    assert "largest |value|" in fig.layout.title.text
    assert np.nanmax(np.abs(np.asarray(fig.data[1].z, dtype=float))) == 1.0
    assert "&lt;/s&gt;" in fig.layout.xaxis.ticktext
    with pytest.raises(ValueError):
        method_grid({"x": np.zeros((2, 2))}, SRC, OUT)


def test_agreement_heatmap():
    table = pd.DataFrame([[1.0, -0.5], [-0.5, 1.0]], index=["attention", "saliency"],
                         columns=["attention", "saliency"])
    fig = agreement_heatmap(table)
    np.testing.assert_allclose(fig.data[0].z, table.to_numpy())
    assert list(fig.layout.xaxis.ticktext) == ["attention", "saliency"]


def test_logit_lens_grid():
    vocab = ["<pad>", "<unk>", "<s>", "</s>", "a"]
    probs = np.full((2, 3, 5), 0.1)
    probs[0, :, 4] = 0.6  # layer 0 predicts "a" everywhere
    probs[1, :, 3] = 0.6  # layer 1 predicts "</s>"
    fig = logit_lens_grid(np.log(probs), ["<s>", "b", "a"], vocab)
    heat = fig.data[0]
    np.testing.assert_allclose(heat.z, np.full((2, 3), 0.6))
    assert heat.text[0][0] == "a" and heat.text[1][2] == "&lt;/s&gt;"
    assert "&lt;s&gt;" in fig.layout.xaxis.ticktext
    with pytest.raises(ValueError):
        logit_lens_grid(np.log(probs), ["<s>"], vocab)


def test_attribution_frame():
    frame = attribution_frame(ATTR["attention"], SRC, OUT)
    assert list(frame.columns) == ["0:a", "1:b", "2:</s>"] and list(frame.index)[0] == "0:b"


def test_row_frame_keeps_raw_values_per_method():
    frame = row_frame(ATTR, SRC, 1)
    assert list(frame.index) == ["0:attention", "1:occlusion"]
    np.testing.assert_allclose(frame.to_numpy(), [[0.7, 0.2, 0.1], [4.0, -1.0, 0.0]])


def test_residual_matrix_is_the_ratio_in_forward_order():
    rows = []
    for layer in (0, 1):
        for k, sublayer in enumerate(("self_attn", "cross_attn", "feed_forward")):
            for position in (0, 1):
                rows.append(dict(batch=0, stack="decoder", layer=layer, sublayer=sublayer, position=position,
                                 update_norm=float(1 + layer + k + position), stream_norm=2.0))
    rows.append(dict(batch=1, stack="decoder", layer=0, sublayer="self_attn", position=0, update_norm=99.0,
                     stream_norm=1.0))  # another sentence of the batch: ignored
    matrix, names = residual_matrix(pd.DataFrame(rows), "decoder")
    assert names == ["L0 self_attn", "L0 cross_attn", "L0 feed_forward", "L1 self_attn", "L1 cross_attn",
                     "L1 feed_forward"]
    np.testing.assert_allclose(matrix[:, 0], [0.5, 1.0, 1.5, 1.0, 1.5, 2.0])
    np.testing.assert_allclose(matrix[:, 1] - matrix[:, 0], 0.5)
    fig = residual_heatmap(pd.DataFrame(rows), "decoder", ["<s>", "x"])
    assert list(fig.layout.xaxis.ticktext) == ["&lt;s&gt;", "x"]  # escaped for Plotly
    with pytest.raises(ValueError, match="positions"):
        residual_heatmap(pd.DataFrame(rows), "decoder", ["<s>"])
    with pytest.raises(ValueError, match="encoder"):
        residual_matrix(pd.DataFrame(rows), "encoder")
