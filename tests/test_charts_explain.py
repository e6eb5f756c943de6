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
