"""ui/charts/heads.py: pure chart functions fed hand-made head_summary, pruning and patching tables."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

from ui.charts.heads import (
    head_grid,
    head_rows,
    layer_effects,
    patching_head_grid,
    patching_heads,
    patching_layers,
    pruning_chart,
)

SUMMARY = pd.DataFrame({
    "kind": ["cross", "encoder", "encoder", "cross"], "layer": [0, 0, 0, 0], "head": [0, 0, 1, 1],
    "importance": [0.5, -0.1, 1.0, 0.0], "role": ["alignment", "positional", "mixed", "mixed"],
    "role_detail": ["", "previous", "", ""]})


def test_head_grid_rows_roles_and_click_data():
    assert head_rows(SUMMARY) == ["encoder 0", "cross 0"]
    fig = head_grid(SUMMARY)
    assert isinstance(fig, go.Figure) and [t.name for t in fig.data] == ["positional", "alignment", "mixed"]
    mixed = fig.data[2]
    assert list(mixed.customdata[:, 0]) == ["encoder", "cross"] and list(mixed.customdata[:, 2]) == [1, 1]
    assert list(mixed.y) == [0, 1] and list(mixed.text) == ["+1.00", "+0.00"]
    assert mixed.marker.size[0] == 40 and mixed.marker.size[1] == 12  # largest |importance| gets the largest marker
    assert list(fig.layout.yaxis.ticktext) == ["encoder 0", "cross 0"]


def test_head_grid_follows_the_measure_it_is_given():
    summary = SUMMARY.assign(importance_gradient=[0.0, 2.0, 0.5, float("nan")], role="mixed")
    fig = head_grid(summary, by="gradient")
    assert list(fig.data[0].text) == ["+0.00", "+2.00", "+0.50", "+nan"] and "∂loss/∂gate" in fig.layout.title.text
    assert list(fig.data[0].marker.size) == [12, 40, 19, 12]  # NaN (not computed) gets the smallest marker
    assert "loss change when off" in head_grid(summary).layout.title.text
    assert "gradient" in pruning_chart(pd.DataFrame({"n_heads_off": [0], "heads_off": [[]], "exact_match": [1.0],
                                                     "loss": [0.1]}), by="gradient").layout.title.text


def test_pruning_chart():
    curve = pd.DataFrame({"n_heads_off": [0, 1, 2], "heads_off": [[], [("cross", 0, 1)],
                                                                  [("cross", 0, 1), ("encoder", 0, 0)]],
                          "exact_match": [1.0, 0.5, 0.0], "loss": [0.1, 0.4, 2.0]})
    fig = pruning_chart(curve)
    assert list(fig.data[0].y) == [1.0, 0.5, 0.0] and list(fig.data[1].y) == [0.1, 0.4, 2.0]
    assert list(fig.data[0].customdata) == ["none", "cross 0 h1", "encoder 0 h0"]


def patching_table() -> pd.DataFrame:
    rows = [dict(site=f"encoder.{layer}.output", index=i, position=i, effect=layer + i / 10,
                 component="layer_output", kind="encoder", layer=layer, head=-1)
            for layer in range(2) for i in range(3)]
    rows += [dict(site="decoder.0.cross_attn.heads", index=h, position=i, effect=(-1) ** h * (h + i), component="head",
                  kind="cross", layer=0, head=h) for h in range(2) for i in range(2)]
    return pd.DataFrame(rows)


def test_patching_heatmaps():
    table = patching_table()
    np.testing.assert_allclose(layer_effects(table, "encoder"), [[0, 0.1, 0.2], [1, 1.1, 1.2]])
    fig = patching_layers(table, "encoder", ["a", "<s>", "</s>"])
    np.testing.assert_allclose(np.asarray(fig.data[0].z, dtype=float), [[0, 0.1, 0.2], [1, 1.1, 1.2]])
    assert "&lt;/s&gt;" in fig.layout.xaxis.ticktext
    heads = patching_heads(table, "cross", 0, ["x", "y"])
    np.testing.assert_allclose(np.asarray(heads.data[0].z, dtype=float), [[0, 1], [-1, -2]])
    grid = patching_head_grid(table)
    np.testing.assert_allclose(np.asarray(grid.data[0].z, dtype=float), [[1, -2]])  # largest |effect|, sign kept
    with pytest.raises(ValueError):
        patching_layers(table, "decoder", ["x"])
    with pytest.raises(ValueError):
        patching_heads(table, "encoder", 0, ["x"])
