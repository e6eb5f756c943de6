"""ui/charts/explain.py: pure chart functions, fed plain arrays (no model)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

from ui.charts import labels
from ui.charts.explain import (
    agreement_heatmap,
    attribution_frame,
    ig_convergence_chart,
    logit_lens_grid,
    method_grid,
    normalise_rows,
    randomization_chart,
    residual_heatmap,
    residual_matrix,
    row_frame,
    source_share_chart,
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
    assert fig.data[0].customdata[0][1].tolist() == [labels(OUT)[0], labels(SRC)[1]]  # small: hover names tokens
    many = {f"m{i}": np.ones((60, 10)) for i in range(10)}  # 6,000 cells: hover gives positions
    big = method_grid(many, [f"s{i}" for i in range(10)], [f"o{i}" for i in range(60)])
    assert all(t.customdata is None for t in big.data)
    with pytest.raises(ValueError):
        method_grid({"x": np.zeros((2, 2))}, SRC, OUT)


def test_method_grid_writes_the_rows_once_left_of_the_first_column():
    """Issue 45: every panel wrote the output tokens left of itself, over its left neighbour's last column (3% of
    the width away); the panels share their rows, so only the first column's panels write them."""
    fig = method_grid({f"m{i}": np.ones((len(OUT), len(SRC))) for i in range(6)}, SRC, OUT, columns=4)
    first_column = {trace.yaxis for i, trace in enumerate(fig.data) if i % 4 == 0}
    for trace in fig.data:
        axis = fig.layout["yaxis" + trace.yaxis[1:]]
        assert (axis.showticklabels is not False) == (trace.yaxis in first_column), trace.yaxis
        assert list(axis.ticktext) == labels(OUT)  # hover and the first column still name every row
    # between two rows of panels, room for upright source labels at 14 px and the lower row's titles (presentation)
    long = method_grid({f"m{i}": np.ones((2, 3)) for i in range(8)}, ["▁because", "b", "c"], ["o", "p"], columns=4)
    gap = (long.layout.yaxis.domain[0] - long.layout.yaxis5.domain[1]) * (long.layout.height - 60)
    assert gap >= 16 + 8 * 0.62 * 14 + 16 * 1.3


def test_agreement_heatmap():
    table = pd.DataFrame([[1.0, -0.5], [-0.5, 1.0]], index=["attention", "saliency"],
                         columns=["attention", "saliency"])
    fig = agreement_heatmap(table)
    np.testing.assert_allclose(fig.data[0].z, table.to_numpy())
    assert list(fig.layout.xaxis.ticktext) == ["attention", "saliency"]


def test_logit_lens_grid():
    pieces = np.array([["a", "a", "a"], ["</s>", "</s>", "</s>"]], dtype=object)  # layer 0: "a", layer 1: "</s>"
    fig = logit_lens_grid(np.log(np.full((2, 3), 0.6)), pieces, ["<s>", "b", "a"])
    heat = fig.data[0]
    np.testing.assert_allclose(heat.z, np.full((2, 3), 0.6))
    assert heat.text[0][0] == "a" and heat.text[1][2] == "&lt;/s&gt;"
    assert "&lt;s&gt;" in fig.layout.xaxis.ticktext
    with pytest.raises(ValueError):
        logit_lens_grid(np.log(np.full((2, 3), 0.6)), pieces, ["<s>"])


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


def test_source_share_chart_draws_the_share_and_shades_the_prefix():
    share = np.array([0.9, 0.25, 0.6])
    fig = source_share_chart(share, OUT)
    source, prefix = fig.data
    np.testing.assert_allclose(source.y, share)
    np.testing.assert_allclose(prefix.y, 1.0)  # the shading runs from the source line up to 1
    assert prefix.fill == "tonexty"
    np.testing.assert_allclose(prefix.customdata, [0.1, 0.75, 0.4])  # the prefix's share, on hover
    assert list(fig.layout.xaxis.ticktext) == ["b", "a", "&lt;/s&gt;"]
    assert tuple(fig.layout.yaxis.range) == (0.0, 1.0)
    with pytest.raises(ValueError):
        source_share_chart(share[:2], OUT)


def randomization_frame() -> pd.DataFrame:
    steps = ["nothing", "generator", "decoder layer 0", "encoder layer 0", "embeddings"]
    rows = []
    for method, curve, random_like in (("attention", [1.0, 0.9, 0.4, 0.1, 0.0], False),
                                       ("occlusion", [1.0, 0.95, 0.9, 0.8, 0.7], True)):
        rows += [dict(method=method, layers_randomized=k, randomized=steps[k], rank_correlation=rho,
                      random_like=random_like) for k, rho in enumerate(curve)]
    return pd.DataFrame(rows)


def test_randomization_chart_one_line_per_method_and_marks_the_random_like():
    fig = randomization_chart(randomization_frame())
    lines = [t for t in fig.data if t.mode == "lines+markers"]
    assert len(lines) == 2
    attention, occlusion = lines
    np.testing.assert_allclose(attention.y, [1.0, 0.9, 0.4, 0.1, 0.0])
    assert list(attention.x) == [0, 1, 2, 3, 4]
    assert attention.name == "attention" and attention.line.dash == "solid"
    assert occlusion.name == "occlusion: does not depend on what the model learned" and occlusion.line.dash == "dash"
    assert list(fig.layout.xaxis.ticktext) == ["trained", "generator", "decoder layer 0", "encoder layer 0",
                                               "embeddings"]
    assert any(shape.y0 == 0.5 and shape.y1 == 0.5 for shape in fig.layout.shapes)  # the threshold
    with pytest.raises(ValueError):
        randomization_chart(randomization_frame().iloc[:0])


def test_ig_convergence_chart_one_bar_per_row_red_above_tolerance():
    frame = pd.DataFrame({"output token": OUT, "f(x) − f(x′)": [2.0, 0.5, 0.0], "delta": [0.02, -0.1, 0.001],
                          "|delta| / |gap|": [0.01, 0.2, np.nan], "within tolerance": [True, False, True]})
    fig = ig_convergence_chart(frame, 0.05, 0.001)
    (bars,) = fig.data
    np.testing.assert_allclose(np.asarray(bars.y, dtype=float), [0.01, 0.2, np.nan])
    assert list(bars.marker.color) == ["#636efa", "#ef553b", "#636efa"]  # the row above tolerance is red
    assert [c[3] for c in bars.customdata] == ["1.0%", "20.0%", "undefined"]  # a gap of 0 has no ratio
    assert [c[4] for c in bars.customdata] == ["within tolerance", "above tolerance", "within tolerance"]
    assert any(shape.y0 == 0.05 and shape.y1 == 0.05 for shape in fig.layout.shapes)  # the tolerance
    assert list(fig.layout.xaxis.ticktext) == ["b", "a", "&lt;/s&gt;"]
    with pytest.raises(ValueError):
        ig_convergence_chart(frame.iloc[:0], 0.05, 0.001)


NAN_ATTR = {"attention": ATTR["attention"],
            "alti": np.array([[0.1, 0.8, 0.1], [np.nan, np.nan, np.nan], [0.3, 0.3, 0.4]])}  # row 1 undefined


def test_undefined_rows_stay_undefined_never_zero():
    z = normalise_rows(NAN_ATTR["alti"])
    assert np.isnan(z[1]).all() and np.allclose(z[0], [0.125, 1.0, 0.125])


def test_method_grid_reads_undefined_cells_as_undefined():
    fig = method_grid(NAN_ATTR, SRC, OUT)
    titles = [a.text for a in fig.layout.annotations]
    assert "alti (1 rows undefined)" in titles and "attention" in titles
    heat = fig.data[1]
    assert np.isnan(np.asarray(heat.z, dtype=float)[1]).all()  # blank, not 0
    assert list(heat.text[1]) == ["undefined"] * 3 and "%{text}" in heat.hovertemplate
    assert heat.text[0][1] == "1.000"


def test_token_row_bars_name_an_undefined_row():
    fig = token_row_bars(NAN_ATTR, SRC, OUT[1], 1)
    assert [t.name for t in fig.data] == ["attention", "alti: undefined for this token"]
    assert np.isnan(np.asarray(fig.data[1].y, dtype=float)).all()


def test_source_share_chart_marks_undefined_shares():
    share = np.array([0.6, np.nan, 0.2])
    fig = source_share_chart(share, OUT, reason="the update cancels the residual")
    source, prefix, marks = fig.data
    assert np.isnan(np.asarray(source.y, dtype=float)[1]) and np.isnan(np.asarray(prefix.y, dtype=float)[1])
    assert list(marks.x) == [1] and list(marks.text) == ["undefined"]
    assert "cancels the residual" in marks.hovertemplate
    assert len(fig.layout.shapes) == 1  # a grey band over the undefined token
    assert len(source_share_chart(np.array([0.6, 0.5, 0.2]), OUT).data) == 2  # nothing undefined: no marks


def _luminance(colour: str) -> float:
    """WCAG's relative luminance of "#rrggbb": what a greyscale print keeps of a colour."""
    channels = [int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def test_every_method_has_its_own_look_in_colour_greyscale_and_on_a_projector() -> None:
    """Issue 45: the Explain page's twelve maps took Plotly's ten-colour cycle in turn, so attention and ALTI+ were
    the same dark blue and rollout and "ALTI+ · layer 1" the same light blue. One palette (ui/charts/palette.py)
    gives each registry method its colour, and a pattern (bars) or dash and symbol (lines) of its own."""
    from transformer.explain.attribution import REGISTRY
    from ui.charts import palette

    assert palette.METHOD_ORDER == tuple(REGISTRY)
    keys = [*REGISTRY, "alti · layer 1", "value_zeroing · layer 1", "alti · layer 0"]
    row = np.array([[0.2, -0.5, 0.3]])
    bars = token_row_bars({key: row for key in keys}, ["a", "b", "</s>"], "x", 0)
    looks = [(t.marker.color, t.marker.pattern.shape, t.marker.pattern.solidity, t.marker.opacity) for t in bars.data]
    assert len(set(looks)) == len(keys)
    colour = {t.name: t.marker.color for t in bars.data}
    assert colour["attention"] != colour["alti"] and colour["rollout"] != colour["alti · layer 1"]
    assert len({colour[m] for m in REGISTRY}) == len(REGISTRY)  # one colour per method
    assert all(_luminance(c) < 0.75 for c in colour.values())  # none pale: a projector washes pale colours out
    # greyscale: two methods' bars differ in pattern, or in lightness by a step a print keeps
    methods = [t for t in bars.data if t.name in REGISTRY]
    for i, a in enumerate(methods):
        for b in methods[i + 1:]:
            same_pattern = (a.marker.pattern.shape, a.marker.pattern.solidity) == (b.marker.pattern.shape,
                                                                                 b.marker.pattern.solidity)
            assert not same_pattern or abs(_luminance(a.marker.color) - _luminance(b.marker.color)) > 0.1, (a.name,
                                                                                                             b.name)
    frame = pd.DataFrame([{"method": key, "layers_randomized": n, "randomized": f"{n}", "rank_correlation": 1 - n / 3,
                           "random_like": False} for key in REGISTRY for n in range(3)])
    lines = randomization_chart(frame)
    assert len({(t.line.color, t.marker.symbol) for t in lines.data}) == len(REGISTRY)
    assert len({t.marker.symbol for t in lines.data}) == len(REGISTRY)  # told apart in greyscale by the symbol
    assert {palette.line_style(key)["line"]["dash"] for key in REGISTRY} == set(palette.DASHES)
